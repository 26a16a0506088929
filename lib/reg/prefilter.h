/*
 * lib/reg/prefilter.h - cubic B-spline prefiltering of a level image's rows
 * and columns (internal; C and CUDA, so that the CPU's pyramid and the
 * GPU's make the same coefficients).
 *
 * Unser, Aldroubi and Eden 1991, mirror boundaries: the pole z = sqrt(3) -
 * 2, gain 6, a causal pass started from the mirrored sum, an anticausal
 * pass started from its closed form. A row carries the causal and
 * anticausal sums in double; columns (a block of them at a time, for the
 * CPU's cache) carry them through the float image.
 */
#ifndef ACCEL_REG_PREFILTER_H
#define ACCEL_REG_PREFILTER_H

#include "reg/bspline.h"

#define ACCEL__REG_POLE (-0.26794919243112270)

/* Terms of the initial causal sum: enough for 1e-9, at most n. */
ACCEL__REG_HD int accel__reg_horizon(int64_t n) {
  const int k = (int)ceil(log(1e-9) / log(-ACCEL__REG_POLE));
  return k < n ? k : (int)n;
}

/* One row of n samples, in place. */
ACCEL__REG_HD void accel__reg_prefilter_row(float *s, int64_t n) {
  if (n < 2) return;
  const double z = ACCEL__REG_POLE;
  double zk = 1, sum = 0;
  for (int k = 0; k < accel__reg_horizon(n); k++, zk *= z) sum += zk * 6.0 * s[k];
  double prev = sum;
  s[0] = (float)sum;
  for (int64_t k = 1; k < n; k++) s[k] = (float)(prev = 6.0 * s[k] + z * prev);
  double next = z / (z * z - 1) * ((double)s[n - 1] + z * (double)s[n - 2]);
  s[n - 1] = (float)next;
  for (int64_t k = n - 2; k >= 0; k--) s[k] = (float)(next = z * (next - s[k]));
}

/* Rows [0, rows) (at most 8) of an image of width w starting at img, in
 * place, side by side: each row's arithmetic is accel__reg_prefilter_row's,
 * while the rows' recursions overlap (one row alone waits on each step's
 * multiply and add). */
ACCEL__REG_HD void accel__reg_prefilter_rows(float *img, int64_t w, int rows) {
  if (w < 2) return;
  const double z = ACCEL__REG_POLE;
  double sum[8], prev[8];
  for (int r = 0; r < rows; r++) sum[r] = 0;
  double zk = 1;
  for (int k = 0; k < accel__reg_horizon(w); k++, zk *= z)
    for (int r = 0; r < rows; r++) sum[r] += zk * 6.0 * img[r * w + k];
  for (int r = 0; r < rows; r++) img[r * w] = (float)sum[r], prev[r] = sum[r];
  for (int64_t k = 1; k < w; k++)
    for (int r = 0; r < rows; r++) img[r * w + k] = (float)(prev[r] = 6.0 * img[r * w + k] + z * prev[r]);
  for (int r = 0; r < rows; r++) {
    float *s = img + r * w;
    prev[r] = z / (z * z - 1) * ((double)s[w - 1] + z * (double)s[w - 2]);
    s[w - 1] = (float)prev[r];
  }
  for (int64_t k = w - 2; k >= 0; k--)
    for (int r = 0; r < rows; r++) img[r * w + k] = (float)(prev[r] = z * (prev[r] - img[r * w + k]));
}

/* The columns [c0, c1) (at most 64) of an image of w x h, in place. */
ACCEL__REG_HD void accel__reg_prefilter_cols(float *img, int64_t w, int64_t h, int64_t c0, int64_t c1) {
  if (h < 2) return;
  const double z = ACCEL__REG_POLE;
  const int64_t m = c1 - c0;
  double sum[64];
  for (int64_t c = 0; c < m; c++) sum[c] = 0;
  double zk = 1;
  for (int k = 0; k < accel__reg_horizon(h); k++, zk *= z)
    for (int64_t c = 0; c < m; c++) sum[c] += zk * 6.0 * img[k * w + c0 + c];
  for (int64_t c = 0; c < m; c++) img[c0 + c] = (float)sum[c];
  for (int64_t r = 1; r < h; r++)
    for (int64_t c = 0; c < m; c++)
      img[r * w + c0 + c] = (float)(6.0 * img[r * w + c0 + c] + z * img[(r - 1) * w + c0 + c]);
  for (int64_t c = 0; c < m; c++) {
    const double last = img[(h - 1) * w + c0 + c], before = img[(h - 2) * w + c0 + c];
    img[(h - 1) * w + c0 + c] = (float)(z / (z * z - 1) * (last + z * before));
  }
  for (int64_t r = h - 2; r >= 0; r--)
    for (int64_t c = 0; c < m; c++)
      img[r * w + c0 + c] = (float)(z * (img[(r + 1) * w + c0 + c] - img[r * w + c0 + c]));
}

#endif /* ACCEL_REG_PREFILTER_H */
