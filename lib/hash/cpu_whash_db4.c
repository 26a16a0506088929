/*
 * whash with Daubechies-4 wavelets (imagehash's whash(mode="db4")): the
 * image's coarsest Haar approximation removed as for the Haar hash (unless
 * kept), then pywt.wavedec2(pixels, "db4", level) in its default
 * "symmetric" extension mode, and the bits of its approximation against
 * their median.
 *
 * pywt's analysis, term for term in pywt's order, is in hash_math.h
 * (accel__db4_dec_a and the 2-D level's columns and rows), shared with the
 * GPU.
 *
 * The approximation has (N + 7) / 2 values a side per level, so from the
 * third level on its side is hash_size + 6 (for any image size); the hash
 * has side^2 bits, as imagehash's has (accel__whash_db4_side).
 */
#include "hash/hashes.h"

#include "hash/hash_math.h"

#include <stdlib.h>
#include <string.h>

/* One level of the approximation: a (side x side, packed) into b (the
 * sides rounded up by 7 / 2), through tmp. */
static void db4_level(const double *a, int64_t side, double *b, double *tmp) {
  for (int64_t c = 0; c < side; c++) accel__db4_column(a, side, c, tmp);        /* axis 0 */
  for (int64_t r = 0; r < (side + 7) / 2; r++) accel__db4_row(tmp, side, r, b); /* axis 1 */
}

accel_status accel__whash_db4_plane(const uint8_t *px, int64_t N, int n, bool keep_ll, uint8_t *out) {
  const accel__whash_geom g = accel__whash_geometry(N, n);
  /* a level's output side (s + 7) / 2 exceeds its input's while s < 7
   * (small planes at small hash sizes): room for the larger of the two */
  const int64_t M = N > n + 8 ? N : n + 8;
  const size_t NN = (size_t)M * (size_t)M, BB = (size_t)(g.B * g.B);
  double *img = malloc(sizeof(double) * NN), *b = malloc(sizeof(double) * NN), *tmp = malloc(sizeof(double) * NN);
  double *blk = malloc(sizeof(double) * BB), *btmp = malloc(sizeof(double) * BB * 4);
  double *pyr = calloc((size_t)(2 * n * n), sizeof(double));
  accel_status s = ACCEL_OK;
  if (!img || !b || !tmp || !blk || !btmp || !pyr) {
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
  int64_t side = N;
  for (int l = 0; l < g.m; l++) {
    db4_level(img, side, b, tmp);
    side = (side + 7) / 2;
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
  return s;
}
