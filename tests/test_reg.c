/* The registration domain: the grid layout, options, registration against
 * the truth and elastix's figures. */
#include "testutil.h"

#include "accel/reg.h"

#include <math.h>
#include <string.h>

/* elastix 5.0.1's GridSize and GridOrigin for the shared pairs (their
 * TransformParameters.0.txt): 512^2 and 1024^2 at spacing 64. */
START_TEST(grid_is_elastix_layout) {
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(512, 512, 64, &g), ACCEL_OK);
  ck_assert_int_eq(g.size[0], 11);
  ck_assert_int_eq(g.size[1], 11);
  ck_assert(g.origin[0] == -64.5 && g.origin[1] == -64.5);
  ck_assert_int_eq(accel_reg_grid_for(1024, 1024, 64, &g), ACCEL_OK);
  ck_assert_int_eq(g.size[0], 19);
  ck_assert(g.origin[0] == -64.5);
  ck_assert_int_eq(accel_reg_grid_for(1024, 1024, 0, &g), ACCEL_ERR_INVALID_ARG);
}
END_TEST

START_TEST(presets) {
  accel_reg_options o;
  ck_assert_int_eq(accel_reg_options_init(&o, sizeof o), ACCEL_OK);
  ck_assert_int_eq(o.levels, 4);
  ck_assert(o.grid_spacing == 64);
  ck_assert_int_eq(o.iterations, 500);
  ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
  ck_assert_int_eq(o.optimizer, ACCEL_REG_OPTIMIZER_ASGD);
  ck_assert_int_eq(o.samples, 5000);
  ck_assert(o.tolerance == 0);
  ck_assert_int_eq(accel_reg_options_preset(&o, "fastest"), ACCEL_ERR_NOT_FOUND);
}
END_TEST

static Suite *suite_reg(void) {
  TCase *tc = new_case("reg", 300, NULL, NULL);
  tcase_add_test(tc, grid_is_elastix_layout);
  tcase_add_test(tc, presets);
  return suite_of("reg", tc);
}
ACCEL_TEST_MAIN(suite_reg)
