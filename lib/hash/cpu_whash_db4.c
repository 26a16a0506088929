/*
 * whash with Daubechies-4 wavelets (imagehash's whash(mode="db4")): the
 * image's coarsest Haar approximation removed as for the Haar hash (unless
 * kept), then pywt.wavedec2(pixels, "db4", level) in its default
 * "symmetric" extension mode, and the bits of its approximation against
 * their median.
 *
 * pywt's analysis of one signal of length N is a convolution with the 8
 * decomposition low-pass taps at every second position (1, 3, ..., N + 6),
 * the signal extended by half-sample symmetry at both ends; its output has
 * (N + 7) / 2 values. The sums here take pywt's terms in pywt's order (the
 * taps that reach past the left end after the in-range ones, those past the
 * right end before them, the extension reflected as often as a short signal
 * needs), in double without fused multiply-adds, so the coefficients are
 * pywt's to the bit. A 2-D level runs along axis 0 (every column), then
 * axis 1 (every row), as pywt.dwtn does.
 *
 * The approximation has (N + 7) / 2 values a side per level, so from the
 * third level on its side is hash_size + 6 (for any image size); the hash
 * has side^2 bits, as imagehash's has (accel__whash_db4_side).
 */
#include "hash/hashes.h"

#include "hash/hash_math.h"

#include <stdlib.h>
#include <string.h>

/* pywt's db4 dec_lo, as the float64 values pywt holds. */
static const double DB4[8] = {-0x1.5b41730b72e29p-7, 0x1.0d60ac768117bp-5, 0x1.f94e2196383a9p-6, -0x1.7f0c1b7c604d4p-3,
                              -0x1.ca7c6f9db5bfbp-6, 0x1.4302cdd3de43ap-1, 0x1.6e005ea45d748p-1, 0x1.d7d052af15ec0p-3};
enum { F = 8 };

/* The taps past the left end, j from *j on: the extension x[0], x[1], ...,
 * then x[N-1], x[N-2], ..., alternately (half-sample symmetric). */
static double left_tail(const double *x, size_t N, size_t *j, double sum) {
  while (*j < F) {
    for (size_t k = 0; k < N && *j < F; ++*j, ++k) sum += DB4[*j] * x[k];
    for (size_t k = 0; k < N && *j < F; ++k, ++*j) sum += DB4[*j] * x[N - 1 - k];
  }
  return sum;
}

/* The taps past the right end (taps i - N, i - N - 1, ..., 0, j counting
 * them): x[N-1], x[N-2], ..., then x[0], x[1], ..., alternately. */
static double right_head(const double *x, size_t N, size_t i, size_t *j, double sum) {
  while (i - *j >= N) {
    for (size_t k = 0; k < N && i - *j >= N; ++*j, ++k) sum += DB4[i - N - *j] * x[N - 1 - k];
    for (size_t k = 0; k < N && i - *j >= N; ++*j, ++k) sum += DB4[i - N - *j] * x[k];
  }
  return sum;
}

/* pywt's downsampling convolution (step 2, symmetric mode) of x[0..N) into
 * out[0 .. (N + 7) / 2). */
static void db4_dec_a(const double *x, size_t N, double *out) {
  size_t i = 1, o = 0;
  for (; i < F && i < N; i += 2, ++o) { /* left boundary */
    double sum = 0;
    size_t j;
    for (j = 0; j <= i; ++j) sum += DB4[j] * x[i - j];
    out[o] = left_tail(x, N, &j, sum);
  }
  for (; i < N; i += 2, ++o) { /* inside (N >= 8) */
    double sum = 0;
    for (size_t j = 0; j < F; ++j) sum += x[i - j] * DB4[j];
    out[o] = sum;
  }
  for (; i < F; i += 2, ++o) { /* a signal shorter than the filter: both ends at once */
    size_t j = 0;
    double sum = right_head(x, N, i, &j, 0);
    for (; j <= i; ++j) sum += DB4[j] * x[i - j];
    out[o] = left_tail(x, N, &j, sum);
  }
  for (; i < N + F - 1; i += 2, ++o) { /* right boundary */
    size_t j = 0;
    double sum = right_head(x, N, i, &j, 0);
    for (; j < F; ++j) sum += DB4[j] * x[i - j];
    out[o] = sum;
  }
}

/* One level of the approximation: a (rows x cols, packed) into b (the
 * halves rounded up by 7 / 2 each way); line: max(rows, cols) + 8 doubles
 * of scratch for a column and its result. */
static void db4_level(const double *a, size_t rows, size_t cols, double *b, double *tmp, double *line) {
  const size_t r2 = (rows + F - 1) / 2, c2 = (cols + F - 1) / 2;
  double *col_out = line + rows;
  for (size_t c = 0; c < cols; c++) { /* axis 0 */
    for (size_t r = 0; r < rows; r++) line[r] = a[r * cols + c];
    db4_dec_a(line, rows, col_out);
    for (size_t r = 0; r < r2; r++) tmp[r * cols + c] = col_out[r];
  }
  for (size_t r = 0; r < r2; r++) db4_dec_a(tmp + r * cols, cols, b + r * c2); /* axis 1 */
}

accel_status accel__whash_db4_plane(const uint8_t *px, int64_t N, int n, bool keep_ll, uint8_t *out) {
  const accel__whash_geom g = accel__whash_geometry(N, n);
  /* a level's output side (s + 7) / 2 exceeds its input's while s < 7
   * (small planes at small hash sizes): room for the larger of the two */
  const int64_t M = N > n + 8 ? N : n + 8;
  const size_t NN = (size_t)M * (size_t)M, BB = (size_t)(g.B * g.B);
  double *img = malloc(sizeof(double) * NN), *b = malloc(sizeof(double) * NN), *tmp = malloc(sizeof(double) * NN);
  double *blk = malloc(sizeof(double) * BB), *btmp = malloc(sizeof(double) * BB * 4);
  double *pyr = calloc((size_t)(2 * n * n), sizeof(double)), *line = malloc(sizeof(double) * (size_t)(2 * M + 16));
  accel_status s = ACCEL_OK;
  if (!img || !b || !tmp || !blk || !btmp || !pyr || !line) {
    s = ACCEL_ERR_OUT_OF_MEMORY;
    goto done;
  }
  /* the pixels / 255, with the coarsest Haar approximation removed as for the Haar hash */
  for (int bi = 0; bi < n; bi++)
    for (int bj = 0; bj < n; bj++) pyr[bi * n + bj] = accel__whash_block_ll(px, &g, bi, bj, blk, btmp);
  if (!keep_ll) accel__whash_top(pyr, n, g.ln, pyr + n * n);
  for (int bi = 0; bi < n; bi++)
    for (int bj = 0; bj < n; bj++) {
      accel__whash_block_pixels(px, &g, bi, bj, pyr[bi * n + bj], keep_ll, blk, btmp);
      for (int64_t i = 0; i < g.B; i++)
        memcpy(img + (size_t)((bi * g.B + i) * N + bj * g.B), blk + i * g.B, sizeof(double) * (size_t)g.B);
    }
  /* m levels of db4 */
  size_t side = (size_t)N;
  for (int l = 0; l < g.m; l++) {
    db4_level(img, side, side, b, tmp, line);
    side = (side + F - 1) / 2;
    double *t = img;
    img = b;
    b = t;
  }
  accel__whash_bits(img, (int)side, tmp, out);
done:
  free(img);
  free(b);
  free(tmp);
  free(blk);
  free(btmp);
  free(pyr);
  free(line);
  return s;
}
