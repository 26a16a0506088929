/* imagehash's ahash, dhash, dhash_vertical, phash and colorhash, and the
 * per-image plan that resizes once per distinct target. */
#include "hash/hashes.h"

#include "hash/dct.h"
#include "hash/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ colorhash */

/* imagehash: v = min(2^b - 1, int(fraction * 2^b)) for 14 fractions, each
 * spelled with bits [v // 2^(b-1-i) % 2^(b-i) > 0 for i < b]. */
void accel__colorhash(const accel__color_counts *c, int binbits, uint8_t *out) {
  const int maxvalue = 1 << binbits;
  const double n = (double)c->pixels;
  const double colors = (double)(c->colors > 0 ? c->colors : 1);
  int values[14];
  double fb = (double)c->black / n, fg = (double)c->gray / n;
  values[0] = (int)(fb * maxvalue);
  values[1] = (int)(fg * maxvalue);
  for (int i = 0; i < 6; i++) {
    values[2 + i] = (int)((double)(c->faint[i] * (uint64_t)maxvalue) / colors);
    values[8 + i] = (int)((double)(c->bright[i] * (uint64_t)maxvalue) / colors);
  }
  memset(out, 0, (size_t)(14 * binbits + 7) / 8);
  size_t bit = 0;
  for (int k = 0; k < 14; k++) {
    int v = values[k] < maxvalue - 1 ? values[k] : maxvalue - 1;
    for (int i = 0; i < binbits; i++, bit++)
      accel__set_bit(out, bit, (v >> (binbits - i - 1)) % (1 << (binbits - i)) > 0);
  }
}

/* ------------------------------------------------------------ phash, whash */

accel_status accel__phash_plane(const uint8_t *px, int n, const accel__dct_plan *plan, uint8_t *out) {
  double *scratch = malloc(sizeof(double) * (size_t)accel__phash_scratch(n, plan->n));
  if (!scratch) return ACCEL_ERR_OUT_OF_MEMORY;
  accel__phash(px, n, plan, scratch, out);
  free(scratch);
  return ACCEL_OK;
}

/* phash of the N x N plane with a plan of its own (a few microseconds next to the resize). */
static accel_status phash_plane(const uint8_t *px, int n, int N, uint8_t *out, char *why) {
  accel__dct_plan *plan = malloc(sizeof *plan);
  accel_status s = ACCEL_OK;
  if (!plan) {
    s = ACCEL_ERR_OUT_OF_MEMORY;
    accel__why(why, "out of memory in phash");
  } else if (!accel__dct_plan_init(plan, N)) {
    s = ACCEL_ERR_UNSUPPORTED;
    accel__why(why, "phash: no DCT of length %d (hash_size * highfreq_factor) as scipy computes it", N);
  } else if ((s = accel__phash_plane(px, n, plan, out)) != ACCEL_OK) {
    accel__why(why, "out of memory in phash");
  }
  free(plan);
  return s;
}

/* The Haar steps vectorise, so whash is compiled for AVX-512 and AVX2 too
 * (ACCEL__CLONES); the operations, and so the bits, are the same on every
 * path. */

/* accel__whash_block_ll with its first level read from the pixels through
 * t1[v] = S * (v / 255.) (each rounded, as pywt rounds them): the same
 * operations, without a division per pixel. t0[v] = v / 255. serves m = 0. */
static inline double block_ll_u8(const uint8_t *px, const accel__whash_geom *g, int bi, int bj, const double *t0,
                                 const double *t1, double *blk, double *tmp) {
  const uint8_t *src = px + (bi * g->B) * g->N + bj * g->B;
  if (g->m == 0) return t0[src[0]];
  const int64_t B = g->B, h = B / 2;
  for (int64_t i = 0; i < h; i++) {
    const uint8_t *xe = src + (2 * i) * g->N, *xo = xe + g->N;
    double *A = tmp + i * B;
    for (int64_t j = 0; j < B; j++) A[j] = t1[xo[j]] + t1[xe[j]];
  }
  accel__haar_ll_rows(tmp, B, blk, B);
  for (int k = 1, s = (int)h; k < g->m; k++, s /= 2) accel__haar_analyze_ll(blk, B, s, tmp);
  return blk[0];
}

/* whash without the coarsest approximation needs, per block, the level-m
 * approximation of the pixels pywt's waverec2 gives back
 * (accel__whash_block_final): the block's details with the reconstructed
 * approximation `a` on top, synthesized m levels, analysed m levels. With
 * the exact 1/sqrt(2) that is `a` itself (the Haar steps are orthonormal).
 * With pywt's rounded S (|S - 1/sqrt(2)| < 2^-54) and every product and sum
 * rounded, each of the 4m one-dimensional steps adds less than 4u * 2^m
 * (u = 2^-53; every value is at most 2^m: 2^k times a mean of pixels / 255
 * less the image's mean, all in [0, 1]) and multiplies the errors before it
 * by about sqrt(2) (2S), so the two differ by less than
 *   4^m / (sqrt(2) - 1) * 4u * 2^m < 2^(3m - 49).
 * whash_eps takes 2^(3m - 40), 512 times that. So a block's bit is certain
 * without the round trip unless `a` lies within the bound of the median;
 * and the median (the mean of the middle order statistics) is exact once
 * every block within twice the bound of the approximations' middle order
 * statistics is computed exactly (no other block can hold those ranks,
 * rounded or not). Those blocks take the round trip, and any other block
 * whose bit is still in doubt (none can be: the median lies within the
 * bound of the middle values; the check stays as a guard). The bits are
 * pywt's, for a fraction of the work; ties, as in flat images, simply take
 * the round trip. */
static double whash_eps(int m) { return ldexp(1.0, 3 * m - 40); }

/* Block by block (memory of one block, not of the N x N double image), with
 * exactly the operations pywt performs on the whole image: Haar is local, so
 * below level m a block's coefficients depend on the block alone. */
ACCEL__CLONES("avx512f", "avx2", "default")
ACCEL__HIDDEN accel_status accel__whash_plane(const uint8_t *px, int64_t N, int n, bool keep_ll, uint8_t *out) {
  const accel__whash_geom g = accel__whash_geometry(N, n);
  const int nn = n * n;
  double *blk = malloc(sizeof(double) * (size_t)(g.B * g.B)), *tmp = malloc(sizeof(double) * (size_t)(g.B * g.B));
  double *pyr = calloc((size_t)(4 * nn), sizeof(double));
  bool *exact = calloc((size_t)nn, sizeof(bool));
  accel_status s = ACCEL_OK;
  if (!blk || !tmp || !pyr || !exact) {
    s = ACCEL_ERR_OUT_OF_MEMORY;
  } else {
    double *ptmp = pyr + nn, *low = ptmp + nn, *sorted = low + nn, t0[256], t1[256];
    for (int v = 0; v < 256; v++) t0[v] = (double)v / 255., t1[v] = ACCEL__HAAR_S * t0[v];
    for (int bi = 0; bi < n; bi++)
      for (int bj = 0; bj < n; bj++) pyr[bi * n + bj] = block_ll_u8(px, &g, bi, bj, t0, t1, blk, tmp);
    if (keep_ll) { /* remove_max_haar_ll=False: the approximation of the pixels themselves */
      accel__whash_bits(pyr, n, ptmp, out);
    } else {
      accel__whash_top(pyr, n, g.ln, ptmp);
      const double e = whash_eps(g.m);
      memcpy(sorted, pyr, sizeof(double) * (size_t)nn);
      accel__median_inplace(sorted, nn); /* sorts them (a heap sort) */
      const double lo = sorted[(nn - 1) / 2], hi = sorted[nn / 2];
      for (int b = 0; b < nn; b++) {
        low[b] = pyr[b];
        if (fabs(pyr[b] - lo) <= 2 * e || fabs(pyr[b] - hi) <= 2 * e) {
          low[b] = accel__whash_block_final(px, &g, b / n, b % n, pyr[b], blk, tmp);
          exact[b] = true;
        }
      }
      memcpy(sorted, low, sizeof(double) * (size_t)nn);
      const double med = accel__median_inplace(sorted, nn);
      accel__clear_bits(out, nn);
      for (int b = 0; b < nn; b++) {
        if (!exact[b] && fabs(pyr[b] - med) <= e)
          low[b] = accel__whash_block_final(px, &g, b / n, b % n, pyr[b], blk, tmp), exact[b] = true;
        accel__set_bit(out, b, exact[b] ? low[b] > med : pyr[b] > med);
      }
    }
  }
  free(blk);
  free(tmp);
  free(pyr);
  free(exact);
  return s;
}

/* ------------------------------------------------------------ the plan */

void accel__hash_target(const accel__hash_spec *spec, accel_hash_kind kind, int64_t w, int64_t h, int64_t *tw,
                        int64_t *th) {
  const int n = spec->hash_size, highfreq = spec->highfreq;
  switch (kind) {
  case ACCEL_HASH_AHASH:
    *tw = n;
    *th = n;
    break;
  case ACCEL_HASH_DHASH:
    *tw = n + 1;
    *th = n;
    break;
  case ACCEL_HASH_DHASH_VERTICAL:
    *tw = n;
    *th = n + 1;
    break;
  case ACCEL_HASH_PHASH:
    *tw = (int64_t)n * highfreq;
    *th = (int64_t)n * highfreq;
    break;
  case ACCEL_HASH_WHASH: {
    if (spec->whash_scale) {
      *tw = *th = spec->whash_scale;
      break;
    }
    /* image_scale = max(2 ** int(log2(min(size))), hash_size) */
    int64_t m = w < h ? w : h, s = 1;
    while (s * 2 <= m) s *= 2;
    if (s < n) s = n;
    *tw = s;
    *th = s;
    break;
  }
  default:
    *tw = 0;
    *th = 0;
    break;
  }
}

void accel__hash_rows_free(accel__hash_rows *r) {
  free(r->arena);
  r->arena = NULL;
  r->arena_cap = 0;
  r->ngroups = 0;
}

bool accel__whash_db4_refused(const accel__hash_spec *spec, int64_t w, int64_t h, char *why) {
  bool whash = false;
  for (int k = 0; k < spec->nkinds; k++) whash = whash || spec->kinds[k] == ACCEL_HASH_WHASH;
  if (!whash || !spec->whash_db4 || spec->whash_scale) return false;
  int64_t tw, th;
  accel__hash_target(spec, ACCEL_HASH_WHASH, w, h, &tw, &th);
  if (tw >= 8 * (int64_t)spec->hash_size) return false;
  accel__why(why, "whash db4 at image_scale %lld, below 8 x hash_size %d: a smaller hash than the batch's",
             (long long)tw, spec->hash_size);
  return true;
}

accel_status accel__hash_rows_begin(const accel__hash_spec *spec, int64_t w, int64_t h, accel__axis_cache *cache,
                                    accel__hash_rows *r) {
  uint8_t *arena = r->arena;
  const size_t cap = r->arena_cap;
  memset(r, 0, sizeof *r);
  r->arena = arena, r->arena_cap = cap;
  r->w = w, r->h = h;
  for (int k = 0; k < spec->nkinds; k++) {
    r->group_of[k] = -1;
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
    accel__hash_target(spec, spec->kinds[k], w, h, &r->tw[k], &r->th[k]);
    int64_t y0 = 0, y1 = h;
    if (r->th[k] != h) {
      if (!(r->ay[k] = accel__axis_cached(cache, h, r->th[k]))) return ACCEL_ERR_OUT_OF_MEMORY;
      accel__axis_span(r->ay[k], &y0, &y1);
    }
    int g = 0;
    while (g < r->ngroups && r->group[g].tw != r->tw[k]) g++;
    if (g == r->ngroups) { /* a new width: its horizontal axis */
      r->ngroups++;
      r->group[g].tw = r->tw[k], r->group[g].y0 = y0, r->group[g].y1 = y1;
      if (r->tw[k] != w && !(r->group[g].ax = accel__axis_cached(cache, w, r->tw[k]))) return ACCEL_ERR_OUT_OF_MEMORY;
    }
    accel__hash_rows_group *gr = &r->group[g];
    gr->y0 = y0 < gr->y0 ? y0 : gr->y0;
    gr->y1 = y1 > gr->y1 ? y1 : gr->y1;
    r->group_of[k] = g;
  }
  /* the groups' rows, then the planes, 64-byte aligned */
  size_t need = 0, at[2 * ACCEL_HASH_KIND_COUNT];
  for (int g = 0; g < r->ngroups; g++)
    at[g] = need, need += ((size_t)(r->group[g].tw * (r->group[g].y1 - r->group[g].y0)) + 63) / 64 * 64;
  for (int k = 0; k < spec->nkinds; k++)
    if (r->group_of[k] >= 0)
      at[ACCEL_HASH_KIND_COUNT + k] = need, need += ((size_t)(r->tw[k] * r->th[k]) + 63) / 64 * 64;
  if (need > r->arena_cap) {
    free(r->arena);
    r->arena_cap = 0;
    if (!(r->arena = malloc(need))) return ACCEL_ERR_OUT_OF_MEMORY;
    r->arena_cap = need;
  }
  for (int g = 0; g < r->ngroups; g++) r->group[g].buf = r->arena + at[g];
  for (int k = 0; k < spec->nkinds; k++)
    if (r->group_of[k] >= 0) r->plane[k] = r->arena + at[ACCEL_HASH_KIND_COUNT + k];
  return ACCEL_OK;
}

void accel__hash_rows_feed(accel__hash_rows *r, const uint8_t *rows, int64_t stride, int64_t y0, int64_t count) {
  for (int g = 0; g < r->ngroups; g++) {
    const accel__hash_rows_group *gr = &r->group[g];
    const int64_t a = y0 > gr->y0 ? y0 : gr->y0, b = y0 + count < gr->y1 ? y0 + count : gr->y1;
    if (a >= b) continue;
    uint8_t *out = gr->buf + (a - gr->y0) * gr->tw;
    if (gr->ax) {
      accel__resample_rows(gr->ax, rows + (a - y0) * stride, stride, 0, b - a, out, gr->tw);
    } else {
      for (int64_t y = a; y < b; y++) memcpy(out + (y - a) * gr->tw, rows + (y - y0) * stride, (size_t)gr->tw);
    }
  }
}

accel_status accel__hash_rows_finish(const accel__hash_spec *spec, accel__hash_rows *r,
                                     const accel__color_counts *color, uint8_t *slots, char *why) {
  const int n = spec->hash_size;
  const int64_t *tw = r->tw, h = r->h;
  uint8_t *const *planes = r->plane;
  accel_status s = ACCEL_OK;
  memset(slots, 0, spec->slot_bytes * (size_t)spec->nkinds);

  /* 1. the vertical passes from the groups' rows */
  for (int k = 0; k < spec->nkinds; k++) {
    if (r->group_of[k] < 0) continue;
    const accel__hash_rows_group *gr = &r->group[r->group_of[k]];
    if (r->th[k] == h) {
      memcpy(planes[k], gr->buf, (size_t)(tw[k] * h)); /* the group's rows are all of them */
    } else {
      accel__resample_cols(r->ay[k], gr->buf, gr->tw, gr->y0, tw[k], planes[k], tw[k]);
    }
  }

  /* 2. bits */
  for (int k = 0; k < spec->nkinds && !s; k++) {
    uint8_t *out = slots + (size_t)k * spec->slot_bytes;
    switch (spec->kinds[k]) {
    case ACCEL_HASH_AHASH: accel__ahash(planes[k], n, out); break;
    case ACCEL_HASH_DHASH: accel__dhash(planes[k], n, out); break;
    case ACCEL_HASH_DHASH_VERTICAL: accel__dhash_vertical(planes[k], n, out); break;
    case ACCEL_HASH_PHASH: s = phash_plane(planes[k], n, (int)tw[k], out, why); break;
    case ACCEL_HASH_WHASH:
      if (accel__whash_db4_refused(spec, r->w, h, why)) {
        s = ACCEL_ERR_UNSUPPORTED;
      } else if ((s = spec->whash_db4 ? accel__whash_db4_plane(planes[k], tw[k], n, spec->whash_keep_ll, out)
                                      : accel__whash_plane(planes[k], tw[k], n, spec->whash_keep_ll, out))) {
        accel__why(why, "out of memory in whash");
      }
      break;
    case ACCEL_HASH_COLORHASH: accel__colorhash(color, spec->binbits, out); break;
    }
  }
  return s;
}
