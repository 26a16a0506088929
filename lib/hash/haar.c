/*
 * whash: imagehash.whash(img, n) with mode 'haar' and remove_max_haar_ll,
 * reproducing pywt's float64 arithmetic operation for operation:
 *
 *   pixels = gray / 255.                         (N x N, N = image_scale = 2^L)
 *   c = wavedec2(pixels, 'haar', level=L); c[0] = 0; pixels' = waverec2(c)
 *   low = wavedec2(pixels', 'haar', level=m)[0]  (m = L - log2(n): n x n)
 *   bits = low > median(low)
 *
 * pywt's Haar steps with S = 0x1.6a09e667f3bcdp-1 (sqrt(1/2) rounded), for
 * even lengths (no boundary extension):
 *   analysis along an axis:  a = S*x[2i+1] + S*x[2i],  d = -S*x[2i+1] + S*x[2i]
 *   2-D analysis: along axis 0 first, then axis 1 of both halves
 *   synthesis along an axis: y[2i] = S*a + S*d,  y[2i+1] = S*a + -S*d
 *   2-D synthesis: along axis 1 first ('a' from aa/ad, 'd' from da/dd), then axis 0
 * each product rounded, then the sum rounded (no fused multiply-add).
 *
 * Haar is local: below level m every coefficient of a B x B block (B = 2^m)
 * depends on that block only, and above it on the n x n level-m
 * approximations. So the image is processed block by block (memory B^2, not
 * N^2) with exactly the operations pywt performs on the whole image.
 */
#include "hash/hashes.h"

#include <stdlib.h>
#include <string.h>

static const double S = 0x1.6a09e667f3bcdp-1;

/* One 2-D analysis level of the s x s top-left corner of x (row stride ld),
 * in place: aa to [0, s/2)^2, da (low along axis 1, high along axis 0) below
 * it, ad to its right, dd diagonal. tmp holds s*s doubles. */
static void analyze(double *x, int64_t ld, int64_t s, double *tmp) {
  const int64_t h = s / 2;
  /* axis 0: rows 2i, 2i+1 -> A (tmp rows [0,h)), D (tmp rows [h,s)) */
  for (int64_t i = 0; i < h; i++) {
    const double *xe = x + (2 * i) * ld, *xo = x + (2 * i + 1) * ld;
    double *A = tmp + i * s, *D = tmp + (h + i) * s;
    for (int64_t j = 0; j < s; j++) {
      const double po = S * xo[j], pe = S * xe[j];
      A[j] = po + pe;
      D[j] = -po + pe;
    }
  }
  /* axis 1 of A and D: columns 2j, 2j+1 -> low half, high half */
  for (int64_t i = 0; i < s; i++) {
    const double *r = tmp + i * s;
    double *out = x + i * ld;
    for (int64_t j = 0; j < h; j++) {
      const double po = S * r[2 * j + 1], pe = S * r[2 * j];
      out[j] = po + pe;
      out[h + j] = -po + pe;
    }
  }
}

/* Inverse of analyze for the 2s x 2s corner whose quadrants hold a, ad
 * (right), da (below), dd (diagonal). */
static void synthesize(double *x, int64_t ld, int64_t s, double *tmp) {
  const int64_t n2 = 2 * s;
  /* axis 1: row i of the upper half -> 'a' (from aa, ad), lower half -> 'd' (from da, dd) */
  for (int64_t i = 0; i < n2; i++) {
    const double *lo = x + i * ld, *hi = x + i * ld + s;
    double *out = tmp + i * n2;
    for (int64_t j = 0; j < s; j++) {
      const double pa = S * lo[j], pd = S * hi[j];
      out[2 * j] = pa + pd;
      out[2 * j + 1] = pa + -pd;
    }
  }
  /* axis 0: 'a' rows [0, s), 'd' rows [s, 2s) */
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

/* Levels 1..levels of a B x B block, in place (Mallat layout). */
static void analyze_levels(double *x, int64_t B, int levels, double *tmp) {
  for (int k = 0, s = (int)B; k < levels; k++, s /= 2) analyze(x, B, s, tmp);
}

static void load_block(double *x, const uint8_t *px, int64_t stride, int64_t B) {
  for (int64_t i = 0; i < B; i++)
    for (int64_t j = 0; j < B; j++) x[i * B + j] = (double)px[i * stride + j] / 255.;
}

accel_status accel__whash(const uint8_t *px, int64_t N, int n, uint8_t *out) {
  int L = 0, ln = 0;
  while ((int64_t)1 << (L + 1) <= N) L++;
  while ((1 << (ln + 1)) <= n) ln++;
  const int m = L - ln;            /* levels inside a block */
  const int64_t B = (int64_t)1 << m;
  accel_status st = ACCEL_OK;
  double *blk = malloc(sizeof(double) * (size_t)(B * B));
  double *tmp = malloc(sizeof(double) * (size_t)(B * B));
  double *pyr = calloc((size_t)(n * n), sizeof(double)); /* level-m approximations, then their pyramid */
  double *ptmp = malloc(sizeof(double) * (size_t)(n * n));
  double *low = calloc((size_t)(n * n), sizeof(double));
  memset(out, 0, (size_t)(n * n + 7) / 8);
  if (!blk || !tmp || !pyr || !ptmp || !low) {
    st = ACCEL_ERR_OUT_OF_MEMORY;
    goto done;
  }
  /* 1. forward: each block's level-m approximation */
  for (int bi = 0; bi < n; bi++)
    for (int bj = 0; bj < n; bj++) {
      load_block(blk, px + (bi * B) * N + bj * B, N, B);
      analyze_levels(blk, B, m, tmp);
      pyr[bi * n + bj] = blk[0];
    }
  /* 2. the levels above m on the n x n array; zero the top approximation;
   *    synthesize back down to level m: the reconstructed approximations */
  for (int k = 0, s = n; k < ln; k++, s /= 2) analyze(pyr, n, s, ptmp);
  pyr[0] *= 0;
  for (int k = 0, s = 1; k < ln; k++, s *= 2) synthesize(pyr, n, s, ptmp);
  /* 3. per block: its own details (recomputed), the new approximation on top,
   *    synthesis to pixels', then analysis to level m again */
  for (int bi = 0; bi < n; bi++)
    for (int bj = 0; bj < n; bj++) {
      load_block(blk, px + (bi * B) * N + bj * B, N, B);
      analyze_levels(blk, B, m, tmp);
      blk[0] = pyr[bi * n + bj];
      for (int k = 0, s = 1; k < m; k++, s *= 2) synthesize(blk, B, s, tmp);
      analyze_levels(blk, B, m, tmp);
      low[bi * n + bj] = blk[0];
    }
  {
    const double med = accel__median(low, n * n);
    for (int i = 0; i < n * n; i++) accel__set_bit(out, (size_t)i, low[i] > med);
  }
done:
  free(blk);
  free(tmp);
  free(pyr);
  free(ptmp);
  free(low);
  return st;
}
