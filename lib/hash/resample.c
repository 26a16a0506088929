/* Pillow-exact LANCZOS resampling of 8-bit gray planes. See resample.h. */
#include "hash/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return sin(x) / x;
}

static double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

accel_status accel__axis_init(accel__axis *a, int64_t in_size, int64_t out_size) {
  memset(a, 0, sizeof *a);
  a->in_size = in_size;
  a->out_size = out_size;
  const double scale = (double)in_size / (double)out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 3.0 * filterscale;
  a->ksize = (int)ceil(support) * 2 + 1;
  a->first = malloc(sizeof(int32_t) * (size_t)out_size);
  a->count = malloc(sizeof(int32_t) * (size_t)out_size);
  a->weight = calloc((size_t)out_size * (size_t)a->ksize, sizeof(int32_t));
  double *w = malloc(sizeof(double) * (size_t)a->ksize);
  if (!a->first || !a->count || !a->weight || !w) {
    free(w);
    accel__axis_free(a);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const double ss = 1.0 / filterscale;
  for (int64_t x = 0; x < out_size; x++) {
    const double center = ((double)x + 0.5) * scale;
    int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in_size) hi = in_size;
    const int n = (int)(hi - lo);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
      w[i] = lanczos(((double)(i + lo) - center + 0.5) * ss);
      sum += w[i];
    }
    int32_t *k = a->weight + x * a->ksize;
    for (int i = 0; i < n; i++) {
      double v = sum != 0.0 ? w[i] / sum : w[i];
      double fixed = v * (double)(1 << ACCEL__RESAMPLE_BITS);
      k[i] = (int32_t)(v < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    a->first[x] = (int32_t)lo;
    a->count[x] = n;
  }
  free(w);
  return ACCEL_OK;
}

void accel__axis_free(accel__axis *a) {
  free(a->first);
  free(a->count);
  free(a->weight);
  memset(a, 0, sizeof *a);
}

void accel__axis_span(const accel__axis *v, int64_t *begin, int64_t *end) {
  *begin = v->first[0];
  *end = v->first[v->out_size - 1] + v->count[v->out_size - 1];
}

static inline uint8_t clip8(int32_t ss) {
  if (ss >= (1 << ACCEL__RESAMPLE_BITS << 8)) return 255;
  if (ss <= 0) return 0;
  return (uint8_t)(ss >> ACCEL__RESAMPLE_BITS);
}

/* Integer sums are exact, so any summation order (and SIMD) gives Pillow's
 * value; the hot loops are compiled for AVX2 too and picked at run time. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && defined(__has_attribute)
#if __has_attribute(target_clones)
/* explicitly hidden: GCC gives the clones' dispatcher default visibility */
#define ACCEL__CLONES __attribute__((target_clones("avx2", "default"), visibility("hidden")))
#endif
#endif
#ifndef ACCEL__CLONES
#define ACCEL__CLONES
#endif

ACCEL__CLONES
void accel__resample_rows(const accel__axis *h, const uint8_t *in, int64_t in_stride, int64_t row0, int64_t row1,
                          uint8_t *out, int64_t out_stride) {
  const int ksize = h->ksize;
  for (int64_t y = row0; y < row1; y++) {
    const uint8_t *src = in + y * in_stride;
    uint8_t *dst = out + (y - row0) * out_stride;
    for (int64_t x = 0; x < h->out_size; x++) {
      const uint8_t *p = src + h->first[x];
      const int32_t *k = h->weight + x * ksize;
      const int n = h->count[x];
      int32_t ss = 1 << (ACCEL__RESAMPLE_BITS - 1);
      for (int i = 0; i < n; i++) ss += (int32_t)p[i] * k[i];
      dst[x] = clip8(ss);
    }
  }
}

ACCEL__CLONES
void accel__resample_cols(const accel__axis *v, const uint8_t *in, int64_t in_stride, int64_t in_row0, int64_t w,
                          uint8_t *out, int64_t out_stride) {
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)(w > 0 ? w : 1));
  if (!acc) { /* tiny fallback without the row accumulator */
    for (int64_t yy = 0; yy < v->out_size; yy++)
      for (int64_t x = 0; x < w; x++) {
        int32_t ss = 1 << (ACCEL__RESAMPLE_BITS - 1);
        const int32_t *k = v->weight + yy * v->ksize;
        for (int i = 0; i < v->count[yy]; i++) ss += (int32_t)in[(v->first[yy] - in_row0 + i) * in_stride + x] * k[i];
        out[yy * out_stride + x] = clip8(ss);
      }
    return;
  }
  for (int64_t yy = 0; yy < v->out_size; yy++) {
    const int32_t *k = v->weight + yy * v->ksize;
    const uint8_t *base = in + (v->first[yy] - in_row0) * in_stride;
    for (int64_t x = 0; x < w; x++) acc[x] = 1 << (ACCEL__RESAMPLE_BITS - 1);
    for (int i = 0; i < v->count[yy]; i++) {
      const uint8_t *row = base + i * in_stride;
      const int32_t ki = k[i];
      for (int64_t x = 0; x < w; x++) acc[x] += (int32_t)row[x] * ki;
    }
    uint8_t *dst = out + yy * out_stride;
    for (int64_t x = 0; x < w; x++) dst[x] = clip8(acc[x]);
  }
  free(acc);
}

accel_status accel__resize_gray(const uint8_t *in, int64_t w, int64_t h, int64_t stride, uint8_t *out, int64_t ow,
                                int64_t oh) {
  if (ow == w && oh == h) {
    for (int64_t y = 0; y < h; y++) memcpy(out + y * ow, in + y * stride, (size_t)w);
    return ACCEL_OK;
  }
  accel__axis ax, ay;
  accel_status s = accel__axis_init(&ax, w, ow);
  if (s) return s;
  if ((s = accel__axis_init(&ay, h, oh))) {
    accel__axis_free(&ax);
    return s;
  }
  if (ow == w) { /* vertical only */
    accel__resample_cols(&ay, in, stride, 0, w, out, ow);
  } else if (oh == h) { /* horizontal only */
    accel__resample_rows(&ax, in, stride, 0, h, out, ow);
  } else {
    int64_t y0, y1;
    accel__axis_span(&ay, &y0, &y1);
    uint8_t *tmp = malloc((size_t)(ow * (y1 - y0)));
    if (!tmp) {
      s = ACCEL_ERR_OUT_OF_MEMORY;
    } else {
      accel__resample_rows(&ax, in, stride, y0, y1, tmp, ow);
      accel__resample_cols(&ay, tmp, ow, y0, ow, out, ow);
      free(tmp);
    }
  }
  accel__axis_free(&ax);
  accel__axis_free(&ay);
  return s;
}
