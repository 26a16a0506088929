/*
 * lib/reg/bspline.h - the transform's per-point arithmetic (internal; C and
 * CUDA, so that both backends evaluate a transform identically).
 *
 * A transform is a linear part q = M p + b (the initial transform folded to
 * a matrix) followed by a cubic B-spline displacement over a control grid:
 *   B(q) = q + sum_{i,j} c_{ij} beta3(cx - i) beta3(cy - j),
 *   (cx, cy) = ((q - origin) / spacing),
 * with the support of the 4 x 4 nodes starting at floor(c) - 1. As ITK's
 * AdvancedBSplineDeformableTransform, B adds nothing where a node of the
 * support would fall outside the grid (1 <= c < size - 2 in each axis).
 */
#ifndef ACCEL_REG_BSPLINE_H
#define ACCEL_REG_BSPLINE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACCEL__REG_HD static inline __host__ __device__
#else
#define ACCEL__REG_HD static inline
#endif

/* The transform as the per-point code sees it (pointers to host or device
 * parameters, as the backend needs). */
typedef struct accel__reg_xform {
  double m[4]; /* linear part: q = (m0 px + m1 py + b0, m2 px + m3 py + b1) */
  double b[2];
  int64_t nx, ny;       /* GridSize */
  double origin[2];     /* GridOrigin */
  double spacing[2];    /* GridSpacing */
  const double *params; /* 2 nx ny: all x, then all y; NULL = no B-spline part */
} accel__reg_xform;

/* The cubic B-spline weights of the 4 nodes from floor(c) - 1 for the
 * fraction t = c - floor(c). */
ACCEL__REG_HD void accel__reg_weights(double t, double w[4]) {
  const double s = 1.0 - t, t2 = t * t, t3 = t2 * t;
  w[0] = s * s * s / 6.0;
  w[1] = (3.0 * t3 - 6.0 * t2 + 4.0) / 6.0;
  w[2] = (-3.0 * t3 + 3.0 * t2 + 3.0 * t + 1.0) / 6.0;
  w[3] = t3 / 6.0;
}

/* The support of q in one axis: its first node and weights; false outside
 * the valid region. */
ACCEL__REG_HD bool accel__reg_support(double q, double origin, double spacing, int64_t n, int64_t *first, double w[4]) {
  const double c = (q - origin) / spacing;
  if (!(c >= 1.0) || !(c < (double)(n - 2))) return false;
  const double f = floor(c);
  *first = (int64_t)f - 1;
  accel__reg_weights(c - f, w);
  return true;
}

/* The linear part. */
ACCEL__REG_HD void accel__reg_linear(const accel__reg_xform *t, double px, double py, double *qx, double *qy) {
  *qx = t->m[0] * px + t->m[1] * py + t->b[0];
  *qy = t->m[2] * px + t->m[3] * py + t->b[1];
}

/* The B-spline displacement at q (after the linear part); (0, 0) outside the
 * valid region or without a B-spline part. */
ACCEL__REG_HD void accel__reg_bspline_at(const accel__reg_xform *t, double qx, double qy, double *ux, double *uy) {
  int64_t i0, j0;
  double wx[4], wy[4];
  *ux = 0.0;
  *uy = 0.0;
  if (!t->params || !accel__reg_support(qx, t->origin[0], t->spacing[0], t->nx, &i0, wx) ||
      !accel__reg_support(qy, t->origin[1], t->spacing[1], t->ny, &j0, wy))
    return;
  const double *cx = t->params, *cy = t->params + t->nx * t->ny;
  double sx = 0.0, sy = 0.0;
  for (int j = 0; j < 4; j++) {
    const int64_t row = (j0 + j) * t->nx + i0;
    double rx = 0.0, ry = 0.0;
    for (int i = 0; i < 4; i++) {
      rx += wx[i] * cx[row + i];
      ry += wx[i] * cy[row + i];
    }
    sx += wy[j] * rx;
    sy += wy[j] * ry;
  }
  *ux = sx;
  *uy = sy;
}

/* T(p): the linear part, then the B-spline. */
ACCEL__REG_HD void accel__reg_apply(const accel__reg_xform *t, double px, double py, double *tx, double *ty) {
  double qx, qy, ux, uy;
  accel__reg_linear(t, px, py, &qx, &qy);
  accel__reg_bspline_at(t, qx, qy, &ux, &uy);
  *tx = qx + ux;
  *ty = qy + uy;
}

#endif /* ACCEL_REG_BSPLINE_H */
