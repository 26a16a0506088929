/* The transform object: grid layout, parameters, points, fields. */
#include "reg/transform.h"

#include "core/internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

accel_status accel_reg_grid_for(int64_t width, int64_t height, double spacing, accel_reg_grid *grid) {
  if (!grid || width < 2 || height < 2 || !(spacing > 0) || !isfinite(spacing)) return ACCEL_ERR_INVALID_ARG;
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

/* 2^26 parameters: a 23000-node-square grid (spacing 8 over 180,000 pixels). */
#define MAX_PARAMS ((int64_t)1 << 26)

/* A transform of grid g (unchecked) with all parameters 0 and no initial
 * part; a grid of 0 nodes has no parameters (a linear transform). */
static accel_status transform_alloc(accel_ctx *ctx, const char *func, const accel_reg_grid *g,
                                    accel_reg_transform **out) {
  const size_t n = (size_t)(2 * g->size[0] * g->size[1]);
  accel_reg_transform *t = calloc(1, sizeof *t);
  double *p = n ? calloc(n, sizeof *p) : NULL;
  if (!t || (n && !p)) {
    free(t);
    free(p);
    return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "no memory for a %lld x %lld grid", (long long)g->size[0],
                          (long long)g->size[1]);
  }
  t->grid = *g;
  t->params = p;
  t->m[0] = t->m[3] = 1.0;
  *out = t;
  return ACCEL_OK;
}

accel_status accel__reg_transform_new(accel_ctx *ctx, const char *func, const accel_reg_grid *g,
                                      accel_reg_transform **out) {
  REQUIRE_IN(ctx, func, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE_IN(ctx, func, g, ACCEL_ERR_INVALID_ARG, "grid is NULL");
  for (int d = 0; d < 2; d++) {
    REQUIRE_IN(ctx, func, g->size[d] >= 4, ACCEL_ERR_INVALID_ARG, "grid size %lld in %c: at least 4 nodes",
               (long long)g->size[d], "xy"[d]);
    REQUIRE_IN(ctx, func, g->spacing[d] > 0 && isfinite(g->spacing[d]), ACCEL_ERR_INVALID_ARG,
               "grid spacing %g must be > 0", g->spacing[d]);
    REQUIRE_IN(ctx, func, isfinite(g->origin[d]), ACCEL_ERR_INVALID_ARG, "grid origin is not finite");
    REQUIRE_IN(ctx, func, g->image_size[d] >= 1, ACCEL_ERR_INVALID_ARG, "image size %lld < 1",
               (long long)g->image_size[d]);
  }
  REQUIRE_IN(ctx, func, g->size[0] <= MAX_PARAMS / 2 / g->size[1], ACCEL_ERR_LIMIT,
             "grid of %lld x %lld nodes: over %lld parameters", (long long)g->size[0], (long long)g->size[1],
             (long long)MAX_PARAMS);
  return transform_alloc(ctx, func, g, out);
}

accel_status accel__reg_transform_new_linear(accel_ctx *ctx, int64_t width, int64_t height, accel_reg_transform **out) {
  const accel_reg_grid g = {{width, height}, {0, 0}, {1.0, 1.0}, {0.0, 0.0}};
  *out = NULL;
  return transform_alloc(ctx, __func__, &g, out);
}

accel_status accel_reg_transform_create(accel_ctx *ctx, const accel_reg_grid *grid, accel_reg_transform **out) {
  return accel__reg_transform_new(ctx, __func__, grid, out);
}

/* Fold an elastix linear transform into q = M p + b. Translation: q = p + t.
 * Euler (2-D): q = R(angle) (p - c) + c + t. Affine: q = A (p - c) + c + t. */
bool accel__reg_fold_linear(accel_reg_linear_kind kind, const double *v, const double *c, double m[4], double b[2]) {
  double a[4] = {1, 0, 0, 1}, t[2] = {0, 0};
  switch (kind) {
  case ACCEL_REG_LINEAR_NONE: break;
  case ACCEL_REG_LINEAR_TRANSLATION: t[0] = v[0], t[1] = v[1]; break;
  case ACCEL_REG_LINEAR_RIGID:
    a[0] = cos(v[0]), a[1] = -sin(v[0]), a[2] = sin(v[0]), a[3] = cos(v[0]);
    t[0] = v[1], t[1] = v[2];
    break;
  case ACCEL_REG_LINEAR_AFFINE:
    for (int k = 0; k < 4; k++) a[k] = v[k];
    t[0] = v[4], t[1] = v[5];
    break;
  default: return false;
  }
  const double cx = kind == ACCEL_REG_LINEAR_TRANSLATION ? 0 : c[0],
               cy = kind == ACCEL_REG_LINEAR_TRANSLATION ? 0 : c[1];
  for (int k = 0; k < 4; k++) m[k] = a[k];
  b[0] = cx + t[0] - a[0] * cx - a[1] * cy;
  b[1] = cy + t[1] - a[2] * cx - a[3] * cy;
  return true;
}

static int linear_count(accel_reg_linear_kind kind) {
  return kind == ACCEL_REG_LINEAR_TRANSLATION ? 2
         : kind == ACCEL_REG_LINEAR_RIGID     ? 3
         : kind == ACCEL_REG_LINEAR_AFFINE    ? 6
                                              : 0;
}

accel_status accel_reg_transform_set_initial(accel_ctx *ctx, accel_reg_transform *t, accel_reg_linear_kind kind,
                                             const double *params, const double *centre) {
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  REQUIRE(ctx, kind >= ACCEL_REG_LINEAR_NONE && kind <= ACCEL_REG_LINEAR_AFFINE, ACCEL_ERR_INVALID_ARG,
          "unknown initial transform kind %d", (int)kind);
  const int n = linear_count(kind);
  REQUIRE(ctx, n == 0 || params, ACCEL_ERR_INVALID_ARG, "params is NULL");
  for (int k = 0; k < n; k++)
    REQUIRE(ctx, isfinite(params[k]), ACCEL_ERR_INVALID_ARG, "parameter %d of the initial transform is not finite", k);
  const double zero[2] = {0, 0}, *c = centre ? centre : zero;
  REQUIRE(ctx, isfinite(c[0]) && isfinite(c[1]), ACCEL_ERR_INVALID_ARG, "centre is not finite");
  double m[4], b[2];
  accel__reg_fold_linear(kind, params, c, m, b);
  const double det = m[0] * m[3] - m[1] * m[2];
  REQUIRE(ctx, fabs(det) > 1e-12, ACCEL_ERR_INVALID_ARG, "the initial transform is singular (determinant %g)", det);
  t->kind = kind;
  for (int k = 0; k < 6; k++) t->linear[k] = k < n ? params[k] : 0.0;
  t->centre[0] = c[0];
  t->centre[1] = c[1];
  memcpy(t->m, m, sizeof m);
  memcpy(t->b, b, sizeof b);
  return ACCEL_OK;
}

accel_status accel_reg_transform_initial(const accel_reg_transform *t, accel_reg_linear_kind *kind, double *params,
                                         double *centre) {
  if (!t || !kind) return ACCEL_ERR_INVALID_ARG;
  *kind = t->kind;
  if (params) memcpy(params, t->linear, sizeof t->linear);
  if (centre) memcpy(centre, t->centre, sizeof t->centre);
  return ACCEL_OK;
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
  if (!t || (!params && count) || count != accel_reg_transform_count(t)) return ACCEL_ERR_INVALID_ARG;
  if (count) memcpy(params, t->params, (size_t)count * sizeof *params);
  return ACCEL_OK;
}

accel_status accel_reg_transform_set_parameters(accel_reg_transform *t, const double *params, int64_t count) {
  if (!t || (!params && count) || count != accel_reg_transform_count(t)) return ACCEL_ERR_INVALID_ARG;
  for (int64_t k = 0; k < count; k++)
    if (!isfinite(params[k])) return ACCEL_ERR_INVALID_ARG;
  if (count) memcpy(t->params, params, (size_t)count * sizeof *params);
  return ACCEL_OK;
}

accel_status accel_reg_transform_points(accel_ctx *ctx, const accel_reg_transform *t, double *xy, int64_t n) {
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  REQUIRE(ctx, n >= 0, ACCEL_ERR_INVALID_ARG, "n %lld < 0", (long long)n);
  REQUIRE(ctx, xy || n == 0, ACCEL_ERR_INVALID_ARG, "xy is NULL");
  accel__reg_xform x;
  accel__reg_xform_of(t, &x);
  const int threads = ctx ? accel__ctx_threads(ctx) : accel__default_threads();
  (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) if (n > 4096) num_threads(threads)
  for (int64_t i = 0; i < n; i++) accel__reg_apply(&x, xy[2 * i], xy[2 * i + 1], &xy[2 * i], &xy[2 * i + 1]);
  return ACCEL_OK;
}

accel_status accel_reg_transform_field(accel_ctx *ctx, const accel_reg_transform *t, int64_t x0, int64_t y0,
                                       const accel_array *field) {
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  accel_status s = accel__array_check(ctx, __func__, "field", field);
  if (s) return s;
  REQUIRE(ctx, field->dtype == ACCEL_DTYPE_F32 && field->ndim == 3 && field->shape[0] == 2, ACCEL_ERR_INVALID_ARG,
          "field must be F32 (2, h, w)");
  const int64_t lim = (int64_t)1 << 40; /* as accel_reg_warp's region: x0 + c never overflows */
  REQUIRE(ctx, x0 >= -lim && x0 <= lim && y0 >= -lim && y0 <= lim, ACCEL_ERR_INVALID_ARG,
          "region offset (%lld, %lld) beyond +-2^40", (long long)x0, (long long)y0);
  const int64_t h = field->shape[1], w = field->shape[2];
  accel__reg_xform x;
  accel__reg_xform_of(t, &x);
  char *base = (char *)field->data;
  const int threads = ctx ? accel__ctx_threads(ctx) : accel__default_threads();
  (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < w; c++) {
      const double px = (double)(x0 + c), py = (double)(y0 + r);
      double tx, ty;
      accel__reg_apply(&x, px, py, &tx, &ty);
      *(float *)(base + r * field->strides[1] + c * field->strides[2]) = (float)(tx - px);
      *(float *)(base + field->strides[0] + r * field->strides[1] + c * field->strides[2]) = (float)(ty - py);
    }
  return ACCEL_OK;
}

accel_status accel_reg_transform_clone(accel_ctx *ctx, const accel_reg_transform *t, accel_reg_transform **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  accel_reg_transform *c = NULL;
  accel_status s = transform_alloc(ctx, __func__, &t->grid, &c);
  if (s) return s;
  double *p = c->params;
  *c = *t;
  c->params = p;
  if (p) memcpy(p, t->params, (size_t)accel_reg_transform_count(t) * sizeof *p);
  *out = c;
  return ACCEL_OK;
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
  x->params = accel_reg_transform_count(t) > 0 ? t->params : NULL;
}
