/*
 * lib/reg/interp.h - cubic B-spline interpolation of a level image
 * (internal; C and CUDA). The image holds B-spline coefficients (the
 * samples prefiltered as Unser, Aldroubi and Eden 1991 describe, mirror
 * boundaries: accel__reg_prefilter in cpu_pyramid.c); the value and the
 * gradient at (x, y) are the tensor-product cubic spline and its
 * derivatives, with mirrored indices past the edges (ITK's convention).
 */
#ifndef ACCEL_REG_INTERP_H
#define ACCEL_REG_INTERP_H

#include "reg/bspline.h"

ACCEL__REG_HD int64_t accel__reg_mirror(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t p = 2 * (n - 1);
  i = i < 0 ? -i : i;
  i %= p;
  return i > n - 1 ? p - i : i;
}

/* Value and gradient (per level pixel) at (x, y) of the spline with
 * coefficients c (w x h, row-major). */
ACCEL__REG_HD double accel__reg_cubic(const float *c, int64_t w, int64_t h, double x, double y, double *gx,
                                      double *gy) {
  const double fx = floor(x), fy = floor(y);
  double wx[4], wy[4], dx[4], dy[4];
  accel__reg_weights(x - fx, wx);
  accel__reg_weights(y - fy, wy);
  accel__reg_weights_d(x - fx, dx);
  accel__reg_weights_d(y - fy, dy);
  const int64_t x0 = (int64_t)fx - 1, y0 = (int64_t)fy - 1;
  int64_t xi[4];
  const bool inner = x0 >= 0 && x0 + 3 < w;
  for (int i = 0; i < 4; i++) xi[i] = inner ? x0 + i : accel__reg_mirror(x0 + i, w);
  double v = 0, vx = 0, vy = 0;
  for (int j = 0; j < 4; j++) {
    const float *row = c + accel__reg_mirror(y0 + j, h) * w;
    double r = 0, rd = 0;
    for (int i = 0; i < 4; i++) {
      r += wx[i] * row[xi[i]];
      rd += dx[i] * row[xi[i]];
    }
    v += wy[j] * r;
    vx += wy[j] * rd;
    vy += dy[j] * r;
  }
  *gx = vx;
  *gy = vy;
  return v;
}

#endif /* ACCEL_REG_INTERP_H */
