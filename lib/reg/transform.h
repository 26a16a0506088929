/* lib/reg/transform.h - the opaque accel_reg_transform (internal). */
#ifndef ACCEL_REG_TRANSFORM_H
#define ACCEL_REG_TRANSFORM_H

#include "accel/reg.h"
#include "reg/bspline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct accel_reg_transform {
  accel_reg_grid grid;
  accel_reg_linear_kind kind; /* the initial part as given (saved as such) */
  double linear[6];           /* its parameters, elastix's order */
  double centre[2];
  double m[4], b[2]; /* the initial part folded: q = M p + b */
  double *params;    /* 2 * grid.size[0] * grid.size[1]; NULL without a B-spline part */
};

/* A new transform with all parameters 0 and no initial part (checks the
 * grid; fails as accel_reg_transform_create). */
accel_status accel__reg_transform_new(accel_ctx *ctx, const char *func, const accel_reg_grid *grid,
                                      accel_reg_transform **out);

/* A transform without a B-spline part (a grid of 0 x 0 nodes over a fixed
 * image of width x height, no parameters) and no initial part yet: what a
 * linear elastix file loads as. */
accel_status accel__reg_transform_new_linear(accel_ctx *ctx, int64_t width, int64_t height, accel_reg_transform **out);

/* Fold an elastix linear transform (kind, its parameters v in elastix's
 * order, its centre c; c is unused for a translation) into q = M p + b.
 * False for an unknown kind. */
bool accel__reg_fold_linear(accel_reg_linear_kind kind, const double *v, const double *c, double m[4], double b[2]);

/* warp.c: the largest coefficient buffer of a layer's channels together
 * (bytes); a layer whose coefficients would pass it is warped one channel at
 * a time. 1 GiB; tests lower it. */
extern int64_t accel__reg_coef_all_bytes;
/* warp.c: a cubic warp whose layer's coefficients pass this (bytes) goes
 * band by band of output rows, each band with the coefficients of the
 * moving rows it reaches (about this many bytes). 256 MiB; tests lower it. */
extern int64_t accel__reg_band_bytes;

/* The per-point view of a transform (params points into t). */
void accel__reg_xform_of(const accel_reg_transform *t, accel__reg_xform *x);

#ifdef __cplusplus
}
#endif

#endif
