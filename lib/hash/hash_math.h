/*
 * lib/hash/hash_math.h - the arithmetic of imagehash's hashes on resized
 * planes, shared by the CPU and CUDA backends (internal; C and CUDA).
 *
 * Everything here works on caller-provided memory and allocates nothing, so
 * the same code runs in a CPU loop and in a CUDA thread, and the GPU's hashes
 * are the CPU's by construction. Floating-point code must be compiled
 * without contraction (C11 mode does not contract; nvcc gets -fmad=false).
 */
#ifndef ACCEL_HASH_MATH_H
#define ACCEL_HASH_MATH_H

#include "hash/dct.h"
#include "image/pillow.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACCEL__MATH_HD static inline __host__ __device__
#else
#define ACCEL__MATH_HD static inline
#endif

/* ------------------------------------------------------------ bits */

/* Bit i of a hash packed MSB first. */
ACCEL__MATH_HD void accel__set_bit(uint8_t *out, int64_t i, bool v) {
  if (v) out[i >> 3] |= (uint8_t)(0x80u >> (i & 7));
}

ACCEL__MATH_HD void accel__clear_bits(uint8_t *out, int64_t nbits) {
  for (int64_t i = 0; i < (nbits + 7) / 8; i++) out[i] = 0;
}

/* ------------------------------------------------------------ resampling */

/* One output sample of Pillow's 8-bit resampling: clip8((2^21 + sum p*k) >> 22).
 * `step` is the distance between taps (1 along a row, the stride down a column). */
ACCEL__MATH_HD uint8_t accel__resample_tap(const uint8_t *p, int64_t step, const int32_t *k, int count) {
  int32_t ss = 1 << 21;
  for (int i = 0; i < count; i++) ss += (int32_t)p[i * step] * k[i];
  if (ss >= (1 << 22 << 8)) return 255;
  if (ss <= 0) return 0;
  return (uint8_t)(ss >> 22);
}

/* ------------------------------------------------------------ simple hashes */

/* ahash: pixels > numpy.mean (an exact integer sum divided by the count). */
ACCEL__MATH_HD void accel__ahash(const uint8_t *px, int n, uint8_t *out) {
  const int m = n * n;
  uint64_t sum = 0;
  for (int i = 0; i < m; i++) sum += px[i];
  const double avg = (double)sum / (double)m;
  accel__clear_bits(out, m);
  for (int i = 0; i < m; i++) accel__set_bit(out, i, (double)px[i] > avg);
}

/* dhash on an (n+1) x n plane: right neighbour > pixel. */
ACCEL__MATH_HD void accel__dhash(const uint8_t *px, int n, uint8_t *out) {
  accel__clear_bits(out, n * n);
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) accel__set_bit(out, r * n + c, px[r * (n + 1) + c + 1] > px[r * (n + 1) + c]);
}

/* dhash_vertical on an n x (n+1) plane: lower neighbour > pixel. */
ACCEL__MATH_HD void accel__dhash_vertical(const uint8_t *px, int n, uint8_t *out) {
  accel__clear_bits(out, n * n);
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) accel__set_bit(out, r * n + c, px[(r + 1) * n + c] > px[r * n + c]);
}

/* ------------------------------------------------------------ median */

/* numpy.median of v[0..m) (v is sorted in place): the middle value, or the
 * two middle values added and halved. Heap sort: in place, no recursion. */
ACCEL__MATH_HD void accel__sift(double *v, int start, int end) {
  int root = start;
  while (2 * root + 1 <= end) {
    int child = 2 * root + 1, swap = root;
    if (v[swap] < v[child]) swap = child;
    if (child + 1 <= end && v[swap] < v[child + 1]) swap = child + 1;
    if (swap == root) return;
    double t = v[root];
    v[root] = v[swap];
    v[swap] = t;
    root = swap;
  }
}

ACCEL__MATH_HD double accel__median_inplace(double *v, int m) {
  for (int start = (m - 2) / 2; start >= 0; start--) accel__sift(v, start, m - 1);
  for (int end = m - 1; end > 0; end--) {
    double t = v[0];
    v[0] = v[end];
    v[end] = t;
    accel__sift(v, 0, end - 1);
  }
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2.0;
}

/* ------------------------------------------------------------ phash */

/* Scratch doubles accel__phash needs for hash size n on an N x N plane. */
ACCEL__MATH_HD int64_t accel__phash_scratch(int n, int N) { return (int64_t)N * (n + 2) + 2 * (int64_t)n * n; }

/* phash of the N x N plane (N = n * highfreq_factor): scipy.fftpack.dct
 * along axis 0 then axis 1 with scipy's own algorithm (the plan, of length
 * N), the low n rows and columns kept, bits = coefficient > median. */
ACCEL__MATH_HD void accel__phash(const uint8_t *px, int n, const accel__dct_plan *plan, double *scratch, uint8_t *out) {
  const int N = plan->n;
  double *line = scratch, *tmp = line + N, *cols = tmp + N, *low = cols + (int64_t)n * N, *sorted = low + n * n;
  for (int j = 0; j < N; j++) { /* axis 0: every column, low k kept */
    for (int i = 0; i < N; i++) line[i] = (double)px[i * N + j];
    accel__dct2(plan, line, tmp);
    for (int k = 0; k < n; k++) cols[k * N + j] = line[k];
  }
  for (int k = 0; k < n; k++) { /* axis 1: the low rows */
    for (int j = 0; j < N; j++) line[j] = cols[k * N + j];
    accel__dct2(plan, line, tmp);
    for (int j = 0; j < n; j++) low[k * n + j] = line[j];
  }
  for (int i = 0; i < n * n; i++) sorted[i] = low[i];
  const double med = accel__median_inplace(sorted, n * n);
  accel__clear_bits(out, n * n);
  for (int i = 0; i < n * n; i++) accel__set_bit(out, i, low[i] > med);
}

/* ------------------------------------------------------------ whash (Haar) */

/* pywt's Haar steps with S = sqrt(1/2) rounded, each product rounded, then
 * the sum (no fused multiply-add):
 *   analysis  a = S*x[2i+1] + S*x[2i],  d = -S*x[2i+1] + S*x[2i]  (axis 0, then axis 1)
 *   synthesis y[2i] = S*a + S*d, y[2i+1] = S*a + -S*d              (axis 1, then axis 0) */
#define ACCEL__HAAR_S 0x1.6a09e667f3bcdp-1

/* One analysis level of the s x s corner of x (row stride ld), in place,
 * Mallat layout (aa top left, ad right, da below, dd diagonal); tmp: s*s. */
ACCEL__MATH_HD void accel__haar_analyze(double *x, int64_t ld, int64_t s, double *tmp) {
  const double S = ACCEL__HAAR_S;
  const int64_t h = s / 2;
  for (int64_t i = 0; i < h; i++) {
    const double *xe = x + (2 * i) * ld, *xo = x + (2 * i + 1) * ld;
    double *A = tmp + i * s, *D = tmp + (h + i) * s;
    for (int64_t j = 0; j < s; j++) {
      const double po = S * xo[j], pe = S * xe[j];
      A[j] = po + pe;
      D[j] = -po + pe;
    }
  }
  for (int64_t i = 0; i < s; i++) {
    const double *r = tmp + i * s;
    double *o = x + i * ld;
    for (int64_t j = 0; j < h; j++) {
      const double po = S * r[2 * j + 1], pe = S * r[2 * j];
      o[j] = po + pe;
      o[h + j] = -po + pe;
    }
  }
}

/* The axis-1 half of the aa band: the s/2 rows of tmp (s wide, the axis-0
 * approximations) into the top-left s/2 x s/2 of x (row stride ld). */
ACCEL__MATH_HD void accel__haar_ll_rows(const double *tmp, int64_t s, double *x, int64_t ld) {
  const double S = ACCEL__HAAR_S;
  const int64_t h = s / 2;
  for (int64_t i = 0; i < h; i++) {
    const double *r = tmp + i * s;
    double *o = x + i * ld;
    for (int64_t j = 0; j < h; j++) {
      const double po = S * r[2 * j + 1], pe = S * r[2 * j];
      o[j] = po + pe;
    }
  }
}

/* The aa band alone of accel__haar_analyze (its top-left s/2 x s/2), with the
 * same operations: for an analysis whose details nobody reads. tmp: s*s/2. */
ACCEL__MATH_HD void accel__haar_analyze_ll(double *x, int64_t ld, int64_t s, double *tmp) {
  const double S = ACCEL__HAAR_S;
  const int64_t h = s / 2;
  for (int64_t i = 0; i < h; i++) {
    const double *xe = x + (2 * i) * ld, *xo = x + (2 * i + 1) * ld;
    double *A = tmp + i * s;
    for (int64_t j = 0; j < s; j++) {
      const double po = S * xo[j], pe = S * xe[j];
      A[j] = po + pe;
    }
  }
  accel__haar_ll_rows(tmp, s, x, ld);
}

/* Inverse of accel__haar_analyze for the 2s x 2s corner; tmp: 4*s*s. */
ACCEL__MATH_HD void accel__haar_synthesize(double *x, int64_t ld, int64_t s, double *tmp) {
  const double S = ACCEL__HAAR_S;
  const int64_t n2 = 2 * s;
  for (int64_t i = 0; i < n2; i++) {
    const double *lo = x + i * ld, *hi = x + i * ld + s;
    double *o = tmp + i * n2;
    for (int64_t j = 0; j < s; j++) {
      const double pa = S * lo[j], pd = S * hi[j];
      o[2 * j] = pa + pd;
      o[2 * j + 1] = pa + -pd;
    }
  }
  for (int64_t i = 0; i < s; i++) {
    const double *a = tmp + i * n2, *d = tmp + (s + i) * n2;
    double *even = x + (2 * i) * ld, *odd = x + (2 * i + 1) * ld;
    for (int64_t j = 0; j < n2; j++) {
      const double pa = S * a[j], pd = S * d[j];
      even[j] = pa + pd;
      odd[j] = pa + -pd;
    }
  }
}

/* whash geometry: image_scale N = 2^L, hash size n = 2^ln, m = L - ln levels
 * inside each B x B block (B = 2^m). */
typedef struct accel__whash_geom {
  int L, ln, m;
  int64_t N, B;
} accel__whash_geom;

ACCEL__MATH_HD accel__whash_geom accel__whash_geometry(int64_t N, int n) {
  accel__whash_geom g;
  g.L = 0;
  g.ln = 0;
  while ((int64_t)1 << (g.L + 1) <= N) g.L++;
  while ((1 << (g.ln + 1)) <= n) g.ln++;
  g.m = g.L - g.ln;
  g.N = N;
  g.B = (int64_t)1 << g.m;
  return g;
}

/* Block (bi, bj) of the N x N plane, the pixels / 255, into blk (B*B). */
ACCEL__MATH_HD void accel__whash_block_load(const uint8_t *px, const accel__whash_geom *g, int bi, int bj,
                                            double *blk) {
  const uint8_t *src = px + (bi * g->B) * g->N + bj * g->B;
  for (int64_t i = 0; i < g->B; i++)
    for (int64_t j = 0; j < g->B; j++) blk[i * g->B + j] = (double)src[i * g->N + j] / 255.;
}

/* Block (bi, bj) analysed to level m; its level-m approximation is left in
 * blk[0]. blk, tmp: B*B doubles each. */
ACCEL__MATH_HD void accel__whash_block_analyze(const uint8_t *px, const accel__whash_geom *g, int bi, int bj,
                                               double *blk, double *tmp) {
  accel__whash_block_load(px, g, bi, bj, blk);
  for (int k = 0, s = (int)g->B; k < g->m; k++, s /= 2) accel__haar_analyze(blk, g->B, s, tmp);
}

/* The same block's level-m approximation alone, with the same operations:
 * the details of this analysis are not read. */
ACCEL__MATH_HD double accel__whash_block_ll(const uint8_t *px, const accel__whash_geom *g, int bi, int bj, double *blk,
                                            double *tmp) {
  accel__whash_block_load(px, g, bi, bj, blk);
  for (int k = 0, s = (int)g->B; k < g->m; k++, s /= 2) accel__haar_analyze_ll(blk, g->B, s, tmp);
  return blk[0];
}

/* The n x n level-m approximations: analysed to the top, the top zeroed
 * (imagehash's remove_max_haar_ll), synthesized back. tmp: n*n doubles. */
ACCEL__MATH_HD void accel__whash_top(double *pyr, int n, int ln, double *tmp) {
  for (int k = 0, s = n; k < ln; k++, s /= 2) accel__haar_analyze(pyr, n, s, tmp);
  pyr[0] *= 0;
  for (int k = 0, s = 1; k < ln; k++, s *= 2) accel__haar_synthesize(pyr, n, s, tmp);
}

/* Block (bi, bj) of the pixels pywt's waverec2 gives back (the level-m
 * approximation replaced by `approx`), or of the pixels / 255 themselves
 * (keep: nothing removed), into blk. */
ACCEL__MATH_HD void accel__whash_block_pixels(const uint8_t *px, const accel__whash_geom *g, int bi, int bj,
                                              double approx, bool keep, double *blk, double *tmp) {
  if (keep) {
    accel__whash_block_load(px, g, bi, bj, blk);
    return;
  }
  accel__whash_block_analyze(px, g, bi, bj, blk, tmp);
  blk[0] = approx;
  for (int k = 0, s = 1; k < g->m; k++, s *= 2) accel__haar_synthesize(blk, g->B, s, tmp);
}

/* Block (bi, bj) again: its details, the reconstructed approximation on top,
 * synthesis to pixels', analysis to level m; returns the block's value of
 * the final wavedec2's approximation. */
ACCEL__MATH_HD double accel__whash_block_final(const uint8_t *px, const accel__whash_geom *g, int bi, int bj,
                                               double approx, double *blk, double *tmp) {
  accel__whash_block_analyze(px, g, bi, bj, blk, tmp);
  blk[0] = approx;
  for (int k = 0, s = 1; k < g->m; k++, s *= 2) accel__haar_synthesize(blk, g->B, s, tmp);
  /* only the approximation is read: the details of this analysis are not computed */
  for (int k = 0, s = (int)g->B; k < g->m; k++, s /= 2) accel__haar_analyze_ll(blk, g->B, s, tmp);
  return blk[0];
}

/* Bits from the n x n final approximations (sorted: n*n scratch doubles). */
ACCEL__MATH_HD void accel__whash_bits(const double *low, int n, double *sorted, uint8_t *out) {
  for (int i = 0; i < n * n; i++) sorted[i] = low[i];
  const double med = accel__median_inplace(sorted, n * n);
  accel__clear_bits(out, n * n);
  for (int i = 0; i < n * n; i++) accel__set_bit(out, i, low[i] > med);
}

/* ------------------------------------------------------------ whash db4 */

/* pywt's db4 analysis of one signal of length N, as pywt computes it in its
 * default "symmetric" mode: a convolution with the 8 decomposition low-pass
 * taps at every second position (1, 3, ..., N + 6), the signal extended by
 * half-sample symmetry at both ends, (N + 7) / 2 outputs. The sums take
 * pywt's terms in pywt's order (the taps that reach past the left end after
 * the in-range ones, those past the right end before them, the extension
 * reflected as often as a short signal needs), in double without fused
 * multiply-adds, so the coefficients are pywt's to the bit. Signal entries
 * and outputs are `xs` and `os` apart. */

/* pywt's db4 dec_lo, as the float64 values pywt holds. */
ACCEL__MATH_HD double accel__db4_tap(int64_t j) {
  const double k[8] = {-0x1.5b41730b72e29p-7, 0x1.0d60ac768117bp-5, 0x1.f94e2196383a9p-6, -0x1.7f0c1b7c604d4p-3,
                       -0x1.ca7c6f9db5bfbp-6, 0x1.4302cdd3de43ap-1, 0x1.6e005ea45d748p-1, 0x1.d7d052af15ec0p-3};
  return k[j];
}

/* The taps past the left end, j from *j on: the extension x[0], x[1], ...,
 * then x[N-1], x[N-2], ..., alternately (half-sample symmetric). */
ACCEL__MATH_HD double accel__db4_left_tail(const double *x, int64_t xs, int64_t N, int64_t *j, double sum) {
  while (*j < 8) {
    for (int64_t k = 0; k < N && *j < 8; ++*j, ++k) sum += accel__db4_tap(*j) * x[k * xs];
    for (int64_t k = 0; k < N && *j < 8; ++k, ++*j) sum += accel__db4_tap(*j) * x[(N - 1 - k) * xs];
  }
  return sum;
}

/* The taps past the right end (taps i - N, i - N - 1, ..., 0, j counting
 * them): x[N-1], x[N-2], ..., then x[0], x[1], ..., alternately. */
ACCEL__MATH_HD double accel__db4_right_head(const double *x, int64_t xs, int64_t N, int64_t i, int64_t *j, double sum) {
  while (i - *j >= N) {
    for (int64_t k = 0; k < N && i - *j >= N; ++*j, ++k) sum += accel__db4_tap(i - N - *j) * x[(N - 1 - k) * xs];
    for (int64_t k = 0; k < N && i - *j >= N; ++*j, ++k) sum += accel__db4_tap(i - N - *j) * x[k * xs];
  }
  return sum;
}

/* x[0..N) into out[0 .. (N + 7) / 2). */
ACCEL__MATH_HD void accel__db4_dec_a(const double *x, int64_t xs, int64_t N, double *out, int64_t os) {
  int64_t i = 1, o = 0;
  for (; i < 8 && i < N; i += 2, ++o) { /* left boundary */
    double sum = 0;
    int64_t j;
    for (j = 0; j <= i; ++j) sum += accel__db4_tap(j) * x[(i - j) * xs];
    out[o * os] = accel__db4_left_tail(x, xs, N, &j, sum);
  }
  for (; i < N; i += 2, ++o) { /* inside (N >= 8) */
    double sum = 0;
    for (int64_t j = 0; j < 8; ++j) sum += x[(i - j) * xs] * accel__db4_tap(j);
    out[o * os] = sum;
  }
  for (; i < 8; i += 2, ++o) { /* a signal shorter than the filter: both ends at once */
    int64_t j = 0;
    double sum = accel__db4_right_head(x, xs, N, i, &j, 0);
    for (; j <= i; ++j) sum += accel__db4_tap(j) * x[(i - j) * xs];
    out[o * os] = accel__db4_left_tail(x, xs, N, &j, sum);
  }
  for (; i < N + 7; i += 2, ++o) { /* right boundary */
    int64_t j = 0;
    double sum = accel__db4_right_head(x, xs, N, i, &j, 0);
    for (; j < 8; ++j) sum += accel__db4_tap(j) * x[(i - j) * xs];
    out[o * os] = sum;
  }
}

/* One 2-D level of pywt.dwtn's approximation, as pywt runs it: axis 0
 * (every column), then axis 1 (every row). Column c of a (side x side,
 * packed) into tmp ((side + 7) / 2 x side), then row r of tmp into b
 * ((side + 7) / 2 a side, packed). */
ACCEL__MATH_HD void accel__db4_column(const double *a, int64_t side, int64_t c, double *tmp) {
  accel__db4_dec_a(a + c, side, side, tmp + c, side);
}
ACCEL__MATH_HD void accel__db4_row(const double *tmp, int64_t side, int64_t r, double *b) {
  accel__db4_dec_a(tmp + r * side, 1, side, b + r * ((side + 7) / 2), 1);
}

/* The side of whash's db4 approximation after `levels` levels from `side`. */
ACCEL__MATH_HD int64_t accel__db4_side_after(int64_t side, int levels) {
  for (int l = 0; l < levels; l++) side = (side + 7) / 2;
  return side;
}

/* ------------------------------------------------------------ colorhash */

/* colorhash's class of a pixel (RGB and its L): 0 black (L < 32), 1 gray
 * (S < 85), 2 a colour with S == 170 (in neither histogram, as imagehash),
 * 3 + bin faint (S < 170), 9 + bin bright (S > 170); hue bins of
 * numpy.histogram over linspace(0, 255, 7). */
ACCEL__MATH_HD int accel__color_class(unsigned r, unsigned g, unsigned b, unsigned l, uint8_t sat) {
  if (l < 256 / 8) return 0;
  if (sat < 256 / 3) return 1;
  if (sat == 256 * 2 / 3) return 2;
  uint8_t hue, s2;
  accel__rgb_to_hs(r, g, b, &hue, &s2);
  int bin = (2 * hue) / 85;
  if (bin > 5) bin = 5;
  return (sat < 256 * 2 / 3 ? 3 : 9) + bin;
}

#endif /* ACCEL_HASH_MATH_H */
