/* Registration: options, presets, argument checks, the pyramid and the
 * levels, dispatch. */
#include "reg/ops.h"
#include "reg/transform.h"

#include "core/internal.h"

#include <string.h>

/* The first released sizes of the option structs. */
#define REG_OPTIONS_V1 sizeof(accel_reg_options)
#define REG_REPORT_V1 sizeof(accel_reg_report)

static const accel_reg_options DEFAULTS = {
    .levels = 4,
    .grid_spacing = 64.0,
    .downsample = 1,
    .iterations = 500,
    .samples = 5000,
    .renew_samples = 1,
    .seed = 1,
    .metric = ACCEL_REG_METRIC_MSE,
    .optimizer = ACCEL_REG_OPTIMIZER_GAUSS_NEWTON,
    .tolerance = 1e-4,
    .window = 10,
    .validation_samples = 20000,
};

accel_status accel_reg_options_init(accel_reg_options *o, size_t struct_size) {
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, REG_OPTIONS_V1);
}

accel_status accel_reg_report_init(accel_reg_report *r, size_t struct_size) {
  static const accel_reg_report EMPTY = {0};
  return accel__versioned_init(__func__, r, struct_size, &EMPTY, sizeof EMPTY, REG_REPORT_V1);
}

accel_status accel_reg_options_preset(accel_reg_options *o, const char *name) {
  if (!o || !name || o->struct_size < REG_OPTIONS_V1) return ACCEL_ERR_INVALID_ARG;
  accel_reg_options p = DEFAULTS;
  if (!strcmp(name, "elastix")) {
    p.downsample = 0;
    p.optimizer = ACCEL_REG_OPTIMIZER_ASGD;
    p.tolerance = 0;
  } else if (strcmp(name, "default") != 0) {
    return ACCEL_ERR_NOT_FOUND;
  }
  p.struct_size = o->struct_size;
  p.progress = o->progress;
  p.progress_user = o->progress_user;
  memcpy(o, &p, sizeof p);
  return ACCEL_OK;
}

accel_status accel_reg_register(accel_ctx *ctx, const accel_array *fixed, const accel_array *moving,
                                const accel_array *fixed_mask, const accel_reg_transform *initial,
                                const accel_reg_options *options, accel_reg_transform **out, accel_reg_report *report) {
  (void)fixed, (void)moving, (void)fixed_mask, (void)initial, (void)options, (void)report;
  if (out) *out = NULL;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}
