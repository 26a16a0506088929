/* The transform object: grid layout, parameters, points, fields. */
#include "reg/transform.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>

accel_status accel_reg_grid_for(int64_t width, int64_t height, double spacing, accel_reg_grid *grid) {
  if (!grid || width < 1 || height < 1 || !(spacing > 0) || !isfinite(spacing)) return ACCEL_ERR_INVALID_ARG;
  const int64_t size[2] = {width, height};
  for (int d = 0; d < 2; d++) {
    const double extent = (double)(size[d] - 1);
    grid->image_size[d] = size[d];
    grid->size[d] = (int64_t)ceil(extent / spacing) + 3;
    grid->spacing[d] = spacing;
    grid->origin[d] = -((double)(grid->size[d] - 1) * spacing - extent) / 2.0;
  }
  return ACCEL_OK;
}

accel_status accel_reg_transform_create(accel_ctx *ctx, const accel_reg_grid *grid, accel_reg_transform **out) {
  (void)grid;
  if (out) *out = NULL;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

accel_status accel_reg_transform_set_initial(accel_ctx *ctx, accel_reg_transform *t, accel_reg_linear_kind kind,
                                             const double *params, const double *centre) {
  (void)t, (void)kind, (void)params, (void)centre;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

accel_status accel_reg_transform_initial(const accel_reg_transform *t, accel_reg_linear_kind *kind, double *params,
                                         double *centre) {
  (void)t, (void)kind, (void)params, (void)centre;
  return ACCEL_ERR_UNSUPPORTED;
}

accel_status accel_reg_transform_grid(const accel_reg_transform *t, accel_reg_grid *grid) {
  if (!t || !grid) return ACCEL_ERR_INVALID_ARG;
  *grid = t->grid;
  return ACCEL_OK;
}

int64_t accel_reg_transform_count(const accel_reg_transform *t) {
  return t ? 2 * t->grid.size[0] * t->grid.size[1] : 0;
}

accel_status accel_reg_transform_parameters(const accel_reg_transform *t, double *params, int64_t count) {
  (void)t, (void)params, (void)count;
  return ACCEL_ERR_UNSUPPORTED;
}

accel_status accel_reg_transform_set_parameters(accel_reg_transform *t, const double *params, int64_t count) {
  (void)t, (void)params, (void)count;
  return ACCEL_ERR_UNSUPPORTED;
}

accel_status accel_reg_transform_points(accel_ctx *ctx, const accel_reg_transform *t, double *xy, int64_t n) {
  (void)t, (void)xy, (void)n;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

accel_status accel_reg_transform_field(accel_ctx *ctx, const accel_reg_transform *t, int64_t x0, int64_t y0,
                                       const accel_array *field) {
  (void)t, (void)x0, (void)y0, (void)field;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

accel_status accel_reg_transform_clone(accel_ctx *ctx, const accel_reg_transform *t, accel_reg_transform **out) {
  (void)t;
  if (out) *out = NULL;
  return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "not implemented yet");
}

void accel_reg_transform_destroy(accel_reg_transform *t) {
  if (!t) return;
  free(t->params);
  free(t);
}

void accel__reg_xform_of(const accel_reg_transform *t, accel__reg_xform *x) {
  for (int k = 0; k < 4; k++) x->m[k] = t->m[k];
  x->b[0] = t->b[0];
  x->b[1] = t->b[1];
  x->nx = t->grid.size[0];
  x->ny = t->grid.size[1];
  for (int d = 0; d < 2; d++) {
    x->origin[d] = t->grid.origin[d];
    x->spacing[d] = t->grid.spacing[d];
  }
  x->params = t->params;
}
