/* elastix TransformParameters files: written for transformix, read from
 * elastix. */
#include "reg/transform.h"

#include "core/internal.h"

accel_status accel_reg_transform_save(accel_ctx *ctx, const accel_reg_transform *t, const char *path) {
  (void)t, (void)path;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

accel_status accel_reg_transform_load(accel_ctx *ctx, const char *path, accel_reg_transform **out) {
  (void)path;
  if (out) *out = NULL;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}
