/* Warping images with a transform: checks, the cubic prefilter, dispatch. */
#include "reg/ops.h"
#include "reg/transform.h"

#include "core/internal.h"

#define WARP_OPTIONS_V1 sizeof(accel_reg_warp_options)

accel_status accel_reg_warp_options_init(accel_reg_warp_options *o, size_t struct_size) {
  static const accel_reg_warp_options DEFAULTS = {.interp = ACCEL_REG_INTERP_CUBIC};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, WARP_OPTIONS_V1);
}

accel_status accel_reg_warp(accel_ctx *ctx, const accel_reg_transform *t, const accel_array *const *in,
                            const accel_array *const *out, int32_t count, const accel_reg_warp_options *options) {
  (void)t, (void)in, (void)out, (void)count, (void)options;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}
