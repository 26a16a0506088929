/* The registration domain: the grid layout, options, registration against
 * the truth and elastix's figures. */
#include "testutil.h"

#include "accel/reg.h"

#include <math.h>
#include <stdlib.h>
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

/* Cubic B-splines sum to 1 and reproduce linear functions: coefficients
 * c_ij = a + b * (node x position) give u(x) = a + b x inside the valid
 * region, and nothing outside it. */
START_TEST(bspline_reproduces_linear_fields) {
  accel_reg_grid g;
  accel_reg_transform *t;
  ck_assert_int_eq(accel_reg_grid_for(300, 200, 32, &g), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(t), nodes = n / 2;
  double *p = malloc((size_t)n * sizeof *p);
  for (int64_t k = 0; k < nodes; k++) {
    const double gx = g.origin[0] + (double)(k % g.size[0]) * g.spacing[0];
    const double gy = g.origin[1] + (double)(k / g.size[0]) * g.spacing[1];
    p[k] = 1.5 + 0.01 * gx;
    p[nodes + k] = -2.0 + 0.02 * gy - 0.005 * gx;
  }
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, n), ACCEL_OK);
  double xy[6] = {0, 0, 299, 199, 123.25, 77.5};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, xy, 3), ACCEL_OK);
  const double in[6] = {0, 0, 299, 199, 123.25, 77.5};
  for (int i = 0; i < 3; i++) {
    const double x = in[2 * i], y = in[2 * i + 1];
    ck_assert_double_eq_tol(xy[2 * i], x + 1.5 + 0.01 * x, 1e-12);
    ck_assert_double_eq_tol(xy[2 * i + 1], y - 2.0 + 0.02 * y - 0.005 * x, 1e-12);
  }
  double far[2] = {-500, 40};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, far, 1), ACCEL_OK);
  ck_assert(far[0] == -500 && far[1] == 40);
  /* the field agrees with the points */
  float buf[2][4][5];
  accel_array f;
  int64_t shape[3] = {2, 4, 5};
  accel_array_init(&f, buf, ACCEL_DTYPE_F32, 3, shape);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, 120, 75, &f), ACCEL_OK);
  ck_assert_float_eq_tol(buf[0][2][3], (float)(1.5 + 0.01 * 123), 1e-5);
  ck_assert_float_eq_tol(buf[1][2][3], (float)(-2.0 + 0.02 * 77 - 0.005 * 123), 1e-5);
  /* an initial translation applies first */
  const double shift[2] = {3, -4};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL), ACCEL_OK);
  double q[2] = {100, 100};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, q, 1), ACCEL_OK);
  ck_assert_double_eq_tol(q[0], 103 + 1.5 + 0.01 * 103, 1e-12);
  ck_assert_double_eq_tol(q[1], 96 - 2.0 + 0.02 * 96 - 0.005 * 103, 1e-12);
  free(p);
  accel_reg_transform_destroy(t);
}
END_TEST

static Suite *suite_reg(void) {
  TCase *tc = new_case("reg", 300, NULL, NULL);
  tcase_add_test(tc, grid_is_elastix_layout);
  tcase_add_test(tc, presets);
  tcase_add_test(tc, bspline_reproduces_linear_fields);
  return suite_of("reg", tc);
}
ACCEL_TEST_MAIN(suite_reg)
