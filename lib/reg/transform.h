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
  double *params;    /* 2 * grid.size[0] * grid.size[1] */
};

/* A new transform with all parameters 0 and no initial part (checks the
 * grid; fails as accel_reg_transform_create). */
accel_status accel__reg_transform_new(accel_ctx *ctx, const accel_reg_grid *grid, accel_reg_transform **out);

/* The per-point view of a transform (params points into t). */
void accel__reg_xform_of(const accel_reg_transform *t, accel__reg_xform *x);

#ifdef __cplusplus
}
#endif

#endif
