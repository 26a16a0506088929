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
    for (int i = 0; i < binbits; i++, bit++) accel__set_bit(out, bit, (v >> (binbits - i - 1)) % (1 << (binbits - i)) > 0);
  }
}

/* ------------------------------------------------------------ simple hashes */

/* numpy.mean of uint8: an exact integer sum divided by the count. */
void accel__ahash(const uint8_t *px, int n, uint8_t *out) {
  const int m = n * n;
  uint64_t sum = 0;
  for (int i = 0; i < m; i++) sum += px[i];
  const double avg = (double)sum / (double)m;
  memset(out, 0, (size_t)(m + 7) / 8);
  for (int i = 0; i < m; i++) accel__set_bit(out, (size_t)i, (double)px[i] > avg);
}

void accel__dhash(const uint8_t *px, int n, uint8_t *out) {
  memset(out, 0, (size_t)(n * n + 7) / 8);
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) accel__set_bit(out, (size_t)(r * n + c), px[r * (n + 1) + c + 1] > px[r * (n + 1) + c]);
}

void accel__dhash_vertical(const uint8_t *px, int n, uint8_t *out) {
  memset(out, 0, (size_t)(n * n + 7) / 8);
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) accel__set_bit(out, (size_t)(r * n + c), px[(r + 1) * n + c] > px[r * n + c]);
}

/* numpy.median: the middle value, or the mean of the two middle values. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double accel__median(const double *v, int m) {
  double *s = malloc(sizeof(double) * (size_t)m);
  if (!s) return NAN;
  memcpy(s, v, sizeof(double) * (size_t)m);
  qsort(s, (size_t)m, sizeof(double), cmp_double);
  double med = m % 2 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2.0;
  free(s);
  return med;
}

/* phash: scipy.fftpack.dct (type II, unnormalized) along axis 0, then axis 1,
 * of the 4n x 4n plane; only the n x n low frequencies are needed; bits =
 * coefficient > their median. Power-of-two sizes use scipy's own algorithm
 * (dct.h) and match bit for bit; other sizes sum the definition,
 * 2 * sum x[i] cos(pi k (2i+1) / 2N), which can differ where coefficients
 * tie at the median. */
void accel__phash(const uint8_t *px, int n, uint8_t *out) {
  const int N = 4 * n;
  accel__dct_plan plan;
  const bool exact = accel__dct_plan_init(&plan, N);
  double *line = malloc(sizeof(double) * (size_t)N), *scratch = malloc(sizeof(double) * (size_t)N);
  double *cosk = exact ? NULL : malloc(sizeof(double) * (size_t)(n * N));
  double *cols = malloc(sizeof(double) * (size_t)(n * N)); /* [k][j]: axis-0 transform, low k only */
  double *low = calloc((size_t)(n * n), sizeof(double));
  memset(out, 0, (size_t)(n * n + 7) / 8);
  if (!line || !scratch || (!exact && !cosk) || !cols || !low) goto done;
  if (!exact)
    for (int k = 0; k < n; k++)
      for (int i = 0; i < N; i++) cosk[k * N + i] = 2.0 * cos(M_PI * (double)k * (double)(2 * i + 1) / (double)(2 * N));
  for (int j = 0; j < N; j++) { /* axis 0: each column */
    for (int i = 0; i < N; i++) line[i] = (double)px[i * N + j];
    if (exact) {
      accel__dct2(&plan, line, scratch);
      for (int k = 0; k < n; k++) cols[k * N + j] = line[k];
    } else {
      for (int k = 0; k < n; k++) {
        double s = 0.0;
        for (int i = 0; i < N; i++) s += line[i] * cosk[k * N + i];
        cols[k * N + j] = s;
      }
    }
  }
  for (int k = 0; k < n; k++) { /* axis 1: the low rows */
    for (int j = 0; j < N; j++) line[j] = cols[k * N + j];
    if (exact) {
      accel__dct2(&plan, line, scratch);
      for (int l = 0; l < n; l++) low[k * n + l] = line[l];
    } else {
      for (int l = 0; l < n; l++) {
        double s = 0.0;
        for (int j = 0; j < N; j++) s += line[j] * cosk[l * N + j];
        low[k * n + l] = s;
      }
    }
  }
  {
    const double med = accel__median(low, n * n);
    for (int i = 0; i < n * n; i++) accel__set_bit(out, (size_t)i, low[i] > med);
  }
done:
  free(line);
  free(scratch);
  free(cosk);
  free(cols);
  free(low);
}

/* ------------------------------------------------------------ the plan */

void accel__hash_target(accel_hash_kind kind, int n, int64_t w, int64_t h, int64_t *tw, int64_t *th) {
  switch (kind) {
  case ACCEL_HASH_AHASH: *tw = n; *th = n; break;
  case ACCEL_HASH_DHASH: *tw = n + 1; *th = n; break;
  case ACCEL_HASH_DHASH_VERTICAL: *tw = n; *th = n + 1; break;
  case ACCEL_HASH_PHASH: *tw = 4 * n; *th = 4 * n; break;
  case ACCEL_HASH_WHASH: {
    /* image_scale = max(2 ** int(log2(min(size))), hash_size) */
    int64_t m = w < h ? w : h, s = 1;
    while (s * 2 <= m) s *= 2;
    if (s < n) s = n;
    *tw = s;
    *th = s;
    break;
  }
  default: *tw = 0; *th = 0; break;
  }
}

accel_status accel__hash_compute(const accel__hash_spec *spec, const uint8_t *gray, int64_t w, int64_t h,
                                 int64_t stride, const accel__color_counts *color, accel__axis_cache *cache,
                                 uint8_t *slots, char *why) {
  const int n = spec->hash_size;
  int64_t tw[ACCEL_HASH_KIND_COUNT], th[ACCEL_HASH_KIND_COUNT];
  uint8_t *planes[ACCEL_HASH_KIND_COUNT] = {0};
  accel_status s = ACCEL_OK;
  memset(slots, 0, spec->slot_bytes * (size_t)spec->nkinds);

  /* 1. resized planes; each distinct target width shares one horizontal pass
   *    over the union of the rows its targets' vertical passes read */
  bool done[ACCEL_HASH_KIND_COUNT] = {0};
  for (int k = 0; k < spec->nkinds; k++) {
    accel__hash_target(spec->kinds[k], n, w, h, &tw[k], &th[k]);
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) done[k] = true;
  }
  for (int k = 0; k < spec->nkinds && !s; k++) {
    if (done[k]) continue;
    int group[ACCEL_HASH_KIND_COUNT], ng = 0;
    for (int j = k; j < spec->nkinds; j++)
      if (!done[j] && tw[j] == tw[k]) group[ng++] = j;
    int64_t y0 = h, y1 = 0;
    for (int g = 0; g < ng && !s; g++) {
      int j = group[g];
      planes[j] = malloc((size_t)(tw[j] * th[j]));
      if (!planes[j]) {
        s = ACCEL_ERR_OUT_OF_MEMORY;
      } else if (th[j] == h) {
        y0 = 0;
        y1 = h;
      } else {
        const accel__axis *ay = accel__axis_cached(cache, h, th[j]);
        if (!ay) {
          s = ACCEL_ERR_OUT_OF_MEMORY;
          break;
        }
        int64_t a, b;
        accel__axis_span(ay, &a, &b);
        if (a < y0) y0 = a;
        if (b > y1) y1 = b;
      }
    }
    uint8_t *tmp = NULL;
    const uint8_t *rows = gray; /* the horizontally resampled rows [rows0, y1) */
    int64_t rows_stride = stride, rows0 = 0;
    if (!s && tw[k] != w) {
      const accel__axis *ax = accel__axis_cached(cache, w, tw[k]);
      tmp = ax ? malloc((size_t)(tw[k] * (y1 - y0))) : NULL;
      if (!tmp) {
        s = ACCEL_ERR_OUT_OF_MEMORY;
      } else {
        accel__resample_rows(ax, gray, stride, y0, y1, tmp, tw[k]);
        rows = tmp;
        rows_stride = tw[k];
        rows0 = y0;
      }
    }
    for (int g = 0; g < ng && !s; g++) {
      int j = group[g];
      if (th[j] == h) {
        for (int64_t y = 0; y < h; y++) memcpy(planes[j] + y * tw[j], rows + (y - rows0) * rows_stride, (size_t)tw[j]);
      } else {
        const accel__axis *ay = accel__axis_cached(cache, h, th[j]);
        if (!ay) s = ACCEL_ERR_OUT_OF_MEMORY;
        else accel__resample_cols(ay, rows, rows_stride, rows0, tw[j], planes[j], tw[j]);
      }
      done[j] = true;
    }
    free(tmp);
    if (s) accel__why(why, "out of memory resizing a %lldx%lld image", (long long)w, (long long)h);
  }

  /* 2. bits */
  for (int k = 0; k < spec->nkinds && !s; k++) {
    uint8_t *out = slots + (size_t)k * spec->slot_bytes;
    switch (spec->kinds[k]) {
    case ACCEL_HASH_AHASH: accel__ahash(planes[k], n, out); break;
    case ACCEL_HASH_DHASH: accel__dhash(planes[k], n, out); break;
    case ACCEL_HASH_DHASH_VERTICAL: accel__dhash_vertical(planes[k], n, out); break;
    case ACCEL_HASH_PHASH: accel__phash(planes[k], n, out); break;
    case ACCEL_HASH_WHASH:
      if ((s = accel__whash(planes[k], tw[k], n, out)) != ACCEL_OK) accel__why(why, "out of memory in whash");
      break;
    case ACCEL_HASH_COLORHASH: accel__colorhash(color, spec->binbits, out); break;
    }
  }
  for (int k = 0; k < spec->nkinds; k++) free(planes[k]);
  return s;
}
