/*
 * lib/reg/interp.h - the warp's per-pixel interpolation arithmetic
 * (internal; C and CUDA, so that both backends resample identically).
 *
 * Positions are continuous indices of the moving image (x = column, y =
 * row, pixel centres at integers), as ITK's ImageFunction sees them:
 *  - inside: -0.5 <= x < w - 0.5 and likewise y (ITK's IsInsideBuffer on a
 *    continuous index); elsewhere the warp writes the fill value, as
 *    elastix's resampler writes DefaultPixelValue.
 *  - linear: ITK's LinearInterpolateImageFunction: bilinear between the
 *    pixels floor(x) and floor(x) + 1, where a neighbour beyond the last
 *    pixel (or a position before the first) takes the edge pixel's value.
 *  - cubic: ITK's BSplineInterpolateImageFunction of order 3 on B-spline
 *    coefficients (warp.c computes them): the 4 x 4 coefficients from
 *    floor(x) - 1, weighted by the cubic B-spline, indices outside the image
 *    mirrored about the edge pixels (-1 -> 1, w -> w - 2), as ITK's
 *    ApplyMirrorBoundaryConditions does.
 * Weights and sums are float: positions are double only until the integer
 * part is taken, so the fraction keeps its full precision at any image size.
 */
#ifndef ACCEL_REG_INTERP_H
#define ACCEL_REG_INTERP_H

#include "reg/bspline.h"

/* ITK's IsInsideBuffer for the continuous index (x, y) of a w x h image
 * (false for NaN). */
ACCEL__REG_HD bool accel__reg_inside(double x, double y, int64_t w, int64_t h) {
  return x >= -0.5 && x < (double)w - 0.5 && y >= -0.5 && y < (double)h - 0.5;
}

/* floor(x) as an integer, exactly, without a call to floor() (which is a
 * library call on baseline x86-64); x within the int64 range. */
ACCEL__REG_HD int64_t accel__reg_floor(double x) {
  const int64_t i = (int64_t)x;
  return (double)i > x ? i - 1 : i;
}

/* Mirror an index into 0..n-1 about the edge pixels (period 2n - 2): the
 * boundary condition of the B-spline coefficients. */
ACCEL__REG_HD int64_t accel__reg_mirror(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

/* The cubic B-spline weights of the nodes floor(x) - 1 .. floor(x) + 2 for
 * the fraction t in [0, 1). */
ACCEL__REG_HD void accel__reg_cubic_weights(float t, float w[4]) {
  const float s = 1.0f - t, t2 = t * t, t3 = t2 * t;
  w[0] = s * s * s * (1.0f / 6.0f);
  w[1] = (3.0f * t3 - 6.0f * t2 + 4.0f) * (1.0f / 6.0f);
  w[2] = (-3.0f * t3 + 3.0f * t2 + 3.0f * t + 1.0f) * (1.0f / 6.0f);
  w[3] = t3 * (1.0f / 6.0f);
}

/* One axis of the cubic interpolation at x (inside an image of n pixels
 * along it): the 4 coefficient indices (mirrored) times `stride` (elements
 * between neighbours along the axis), and their weights. */
ACCEL__REG_HD void accel__reg_cubic_axis(double x, int64_t n, int64_t stride, int64_t off[4], float w[4]) {
  const int64_t f = accel__reg_floor(x), i = f - 1;
  accel__reg_cubic_weights((float)(x - (double)f), w);
  if (i >= 0 && i + 3 < n) {
    for (int k = 0; k < 4; k++) off[k] = (i + k) * stride;
  } else {
    for (int k = 0; k < 4; k++) off[k] = accel__reg_mirror(i + k, n) * stride;
  }
}

/* The cubic value from the 4 x 4 coefficients at coef[oy[j] + ox[i]]: each
 * column of 4 combined in y first (j = 0..3 in order), then the columns as
 * (wx0 col0 + wx2 col2) + (wx1 col1 + wx3 col3) - the order in which the
 * CPU's vector code sums them, so that both give the same bits. */
ACCEL__REG_HD float accel__reg_cubic_sum(const float *coef, const int64_t oy[4], const int64_t ox[4], const float wy[4],
                                         const float wx[4]) {
  float col[4];
  for (int i = 0; i < 4; i++)
    col[i] = wy[0] * coef[oy[0] + ox[i]] + wy[1] * coef[oy[1] + ox[i]] + wy[2] * coef[oy[2] + ox[i]] +
             wy[3] * coef[oy[3] + ox[i]];
  return (wx[0] * col[0] + wx[2] * col[2]) + (wx[1] * col[1] + wx[3] * col[3]);
}

/* One axis of the linear interpolation at x (inside an image of n pixels):
 * the two pixel indices times `stride` and the fraction towards the second.
 * A position before the first pixel or at or past the last one takes the
 * edge pixel with fraction 0, as ITK does. */
ACCEL__REG_HD void accel__reg_linear_axis(double x, int64_t n, int64_t stride, int64_t off[2], float *t) {
  const double c = x < 0.0 ? 0.0 : (x > (double)(n - 1) ? (double)(n - 1) : x);
  const int64_t i = (int64_t)c; /* c >= 0: truncation is floor */
  off[0] = i * stride;
  off[1] = (i + 1 < n ? i + 1 : i) * stride;
  *t = (float)(c - (double)i);
}

/* The bilinear value of v00 (x0, y0), v10 (x1, y0), v01 (x0, y1), v11
 * (x1, y1) for the fractions tx, ty: along x, then along y, each as
 * a + (b - a) t (so that t = 0 gives a exactly). */
ACCEL__REG_HD float accel__reg_linear_mix(float v00, float v10, float v01, float v11, float tx, float ty) {
  const float a = v00 + (v10 - v00) * tx, b = v01 + (v11 - v01) * tx;
  return a + (b - a) * ty;
}

/* An interpolated value stored into an integer type of maximum `hi`:
 * clamped to 0..hi and rounded to nearest (halves up); NaN gives 0 (a
 * conversion of NaN would be undefined). */
ACCEL__REG_HD uint32_t accel__reg_to_int(float v, float hi) {
  v = v >= 0.0f ? (v > hi ? hi : v) : 0.0f;
  return (uint32_t)(v + 0.5f); /* v + 0.5 >= 0: truncation is floor */
}

#endif /* ACCEL_REG_INTERP_H */
