/* elastix TransformParameters files: accel_reg_transform_load on any bytes
 * (the file's initial transforms, if it names any, are looked up as its
 * text says and fail cleanly when absent); a transform that loads is
 * evaluated at a few points, saved with accel_reg_transform_save and loaded
 * again: the points must map to the same places. */
#include "fuzz.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {
      ACCEL_ERR_IO,          ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT, ACCEL_ERR_UNSUPPORTED, ACCEL_ERR_OUT_OF_MEMORY,
      ACCEL_ERR_INVALID_ARG, ACCEL_OK};
  accel_ctx *ctx = fuzz_ctx();
  accel_reg_transform *t = NULL;
  accel_status s = accel_reg_transform_load(ctx, fuzz_input_path(data, size), &t);
  if (s != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(s, errors, t);
    return 0;
  }
  accel_reg_grid g;
  FUZZ_CHECK(accel_reg_transform_grid(t, &g) == ACCEL_OK);
  double xy[8] = {0, 0, (double)g.image_size[0] - 1, (double)g.image_size[1] - 1, 0.5, 7.25, -3, 2};
  double back[8];
  memcpy(back, xy, sizeof xy);
  FUZZ_CHECK(accel_reg_transform_points(ctx, t, xy, 4) == ACCEL_OK);
  const char *out = fuzz_scratch_path("T.txt");
  s = accel_reg_transform_save(ctx, t, out);
  FUZZ_CHECK(s == ACCEL_OK || s == ACCEL_ERR_IO);
  if (s == ACCEL_OK) {
    accel_reg_transform *r = NULL;
    FUZZ_CHECK(accel_reg_transform_load(ctx, out, &r) == ACCEL_OK);
    FUZZ_CHECK(accel_reg_transform_points(ctx, r, back, 4) == ACCEL_OK);
    for (int i = 0; i < 8; i++)
      FUZZ_CHECK((isnan(xy[i]) && isnan(back[i])) || fabs(xy[i] - back[i]) <= 1e-9 * (1 + fabs(xy[i])));
    accel_reg_transform_destroy(r);
  }
  accel_reg_transform_destroy(t);
  return 0;
}
