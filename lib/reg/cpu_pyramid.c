/* The CPU op reg.pyramid: a sampled Gaussian (radius ceil(3 sigma),
 * normalised, edges replicated as ITK's zero-flux boundary), separable,
 * evaluated only at the rows and columns that are kept: the vertical pass
 * makes the kept rows at every input column, the horizontal pass the kept
 * columns of those. Each output row is one thread's work, so the result
 * does not depend on the thread count. */
#include "reg/cpu.h"
#include "reg/cpu_lanes.h"
#include "reg/prefilter.h"

#include "core/internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* tmp[c] += k * in[row][c] for every input column. */
static void add_row(const accel_array *in, int64_t row, float k, float *tmp) {
  const char *base = (const char *)in->data + row * in->strides[0];
  const int64_t w = in->shape[1], s = in->strides[1];
  const int64_t unit = in->dtype == ACCEL_DTYPE_U8 ? 1 : in->dtype == ACCEL_DTYPE_U16 ? 2 : 4;
  if (s == unit) { /* contiguous rows: loops the compiler vectorises, the same arithmetic */
    if (in->dtype == ACCEL_DTYPE_U8) {
      const uint8_t *p = (const uint8_t *)base;
      for (int64_t c = 0; c < w; c++) tmp[c] += k * (float)p[c];
    } else if (in->dtype == ACCEL_DTYPE_U16) {
      const uint16_t *p = (const uint16_t *)base;
      for (int64_t c = 0; c < w; c++) tmp[c] += k * (float)p[c];
    } else {
      const float *p = (const float *)base;
      for (int64_t c = 0; c < w; c++) tmp[c] += k * p[c];
    }
    return;
  }
  switch (in->dtype) {
  case ACCEL_DTYPE_U8:
    for (int64_t c = 0; c < w; c++) tmp[c] += k * (float)*(const uint8_t *)(base + c * s);
    break;
  case ACCEL_DTYPE_U16:
    for (int64_t c = 0; c < w; c++) tmp[c] += k * (float)*(const uint16_t *)(base + c * s);
    break;
  default:
    for (int64_t c = 0; c < w; c++) tmp[c] += k * *(const float *)(base + c * s);
    break;
  }
}

/* The vertical passes' last columns (fewer than 16), one at a time. */
#define VERTICAL_TAIL(T)                                                                                               \
  for (; c < w; c++) {                                                                                                 \
    float v = 0.0f;                                                                                                    \
    for (int k = 0; k < taps; k++) v += kern[k] * (float)((const T *)rows[k])[c];                                      \
    tmp[c] = v;                                                                                                        \
  }
/* The vertical pass over contiguous rows: tmp[c] = sum_k kern[k]
 * rows[k][c], k from 0 (add_row's operations on each column: from 0, a
 * tap at a time), 16 columns at a time summed in registers through all
 * taps (three times faster than a pass over the row per tap, which loads
 * and stores tmp at every tap). */
#define VERTICAL_FN(name, T)                                                                                           \
  ACCEL__CLONES("avx2", "default")                                                                                     \
  static void name(const void *const *rows, int taps, const float *kern, int64_t w, float *restrict tmp) {             \
    int64_t c = 0;                                                                                                     \
    for (; c + 16 <= w; c += 16) {                                                                                     \
      float acc[16] = {0};                                                                                             \
      for (int k = 0; k < taps; k++) {                                                                                 \
        const float kk = kern[k];                                                                                      \
        const T *p = (const T *)rows[k] + c;                                                                           \
        for (int l = 0; l < 16; l++) acc[l] += kk * (float)p[l];                                                       \
      }                                                                                                                \
      memcpy(tmp + c, acc, sizeof acc);                                                                                \
    }                                                                                                                  \
    VERTICAL_TAIL(T)                                                                                                   \
  }
VERTICAL_FN(vertical_u8_any, uint8_t)
VERTICAL_FN(vertical_u16_any, uint16_t)
VERTICAL_FN(vertical_f32, float)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* The 8- and 16-bit passes with AVX2 spelled out: the compilers convert
 * their pixels to float one at a time (a third of the F32 pass's speed; at
 * 300 MP 1.5 s of 8-bit pyramids). The same operations per column as
 * VERTICAL_FN (each tap's product, then its sum, from 0; no fused
 * multiply-add), so the same bits. */
#define VERTICAL_AVX2(name, T, LOAD16)                                                                                 \
  __attribute__((target("avx2"))) static void name(const void *const *rows, int taps, const float *kern, int64_t w,    \
                                                   float *restrict tmp) {                                              \
    int64_t c = 0;                                                                                                     \
    for (; c + 16 <= w; c += 16) {                                                                                     \
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                                                       \
      for (int k = 0; k < taps; k++) {                                                                                 \
        const __m256 kk = _mm256_set1_ps(kern[k]);                                                                     \
        __m256 v0, v1;                                                                                                 \
        LOAD16((const T *)rows[k] + c, v0, v1);                                                                        \
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(kk, v0));                                                                 \
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(kk, v1));                                                                 \
      }                                                                                                                \
      _mm256_storeu_ps(tmp + c, a0);                                                                                   \
      _mm256_storeu_ps(tmp + c + 8, a1);                                                                               \
    }                                                                                                                  \
    VERTICAL_TAIL(T)                                                                                                   \
  }
#define LOAD16_U8(p, v0, v1)                                                                                           \
  do {                                                                                                                 \
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p));                                             \
    v0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));                                                                  \
    v1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));                                               \
  } while (0)
#define LOAD16_U16(p, v0, v1)                                                                                          \
  do {                                                                                                                 \
    v0 = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))));               \
    v1 = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((p) + 8))));         \
  } while (0)
VERTICAL_AVX2(vertical_u8_avx2, uint8_t, LOAD16_U8)
VERTICAL_AVX2(vertical_u16_avx2, uint16_t, LOAD16_U16)

static void vertical_u8(const void *const *rows, int taps, const float *kern, int64_t w, float *restrict tmp) {
  if (accel__reg_have_avx2()) vertical_u8_avx2(rows, taps, kern, w, tmp);
  else vertical_u8_any(rows, taps, kern, w, tmp);
}

static void vertical_u16(const void *const *rows, int taps, const float *kern, int64_t w, float *restrict tmp) {
  if (accel__reg_have_avx2()) vertical_u16_avx2(rows, taps, kern, w, tmp);
  else vertical_u16_any(rows, taps, kern, w, tmp);
}
#else
#define vertical_u8 vertical_u8_any
#define vertical_u16 vertical_u16_any
#endif

/* Taps of the register-summed vertical pass at most (larger kernels: add_row). */
#define VERTICAL_TAPS 128

/* out[j] = sum_k kern[k] tmp[off + f j + k] (k = -radius..radius, columns
 * clamped to the row), the terms added in the order of k from 0: the
 * columns whose taps all lie inside the row a tap at a time over all of
 * them (loops the compiler vectorises; every pixel's sum is the same),
 * the others one by one. */
static void horizontal(const float *tmp, int64_t W, int64_t off, int64_t f, const float *kern, int radius, float *out,
                       int64_t width) {
  int64_t j0 = radius - off <= 0 ? 0 : (radius - off + f - 1) / f;
  int64_t j1 = W - 1 - radius - off < 0 ? 0 : (W - 1 - radius - off) / f + 1;
  j1 = j1 < width ? j1 : width;
  j0 = j0 < j1 ? j0 : j1;
  for (int64_t j = 0; j < width; j++) {
    if (j == j0) j = j1; /* the inner columns below */
    if (j >= width) break;
    const int64_t c = off + f * j;
    float v = 0.0f;
    for (int k = -radius; k <= radius; k++) v += kern[k + radius] * tmp[clamp64(c + k, 0, W - 1)];
    out[j] = v;
  }
  if (j0 == j1) return;
  float *restrict o = out;
  for (int64_t j = j0; j < j1; j++) o[j] = 0.0f;
  for (int k = -radius; k <= radius; k++) {
    const float kk = kern[k + radius];
    const float *restrict t = tmp + (off + f * j0 + k); /* inside the row for every inner column */
    if (f == 1)
      for (int64_t j = j0; j < j1; j++) o[j] += kk * t[j - j0];
    else
      for (int64_t j = j0; j < j1; j++) o[j] += kk * t[f * (j - j0)];
  }
}

accel_status accel__reg_cpu_pyramid(accel__call *call, accel__reg_pyramid_job *job) {
  const accel_array *in = job->in;
  const int64_t H = in->shape[0], W = in->shape[1], f = job->factor, off = job->offset;
  const int radius = job->sigma > 0 ? (int)ceil(3.0 * job->sigma) : 0;
  float *kern = malloc(sizeof(float) * (size_t)(2 * radius + 1));
  if (!kern) {
    accel__why(call->why, "out of memory for the smoothing kernel");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  double sum = 0;
  for (int k = -radius; k <= radius; k++) sum += radius ? exp(-0.5 * k * k / (job->sigma * job->sigma)) : 1.0;
  for (int k = -radius; k <= radius; k++)
    kern[k + radius] = (float)((radius ? exp(-0.5 * k * k / (job->sigma * job->sigma)) : 1.0) / sum);
  int failed = 0;
#pragma omp parallel num_threads(call->threads) reduction(| : failed)
  {
    float *tmp = malloc(sizeof(float) * (size_t)W);
    if (!tmp) failed = 1;
#pragma omp for schedule(dynamic, 4)
    for (int64_t i = 0; i < job->height; i++) {
      if (!tmp) continue;
      const int64_t r = off + f * i, unit = in->dtype == ACCEL_DTYPE_U8 ? 1 : in->dtype == ACCEL_DTYPE_U16 ? 2 : 4;
      if (in->strides[1] == unit && 2 * radius + 1 <= VERTICAL_TAPS) {
        const void *rows[VERTICAL_TAPS];
        for (int k = -radius; k <= radius; k++)
          rows[k + radius] = (const char *)in->data + clamp64(r + k, 0, H - 1) * in->strides[0];
        if (in->dtype == ACCEL_DTYPE_U8) vertical_u8(rows, 2 * radius + 1, kern, W, tmp);
        else if (in->dtype == ACCEL_DTYPE_U16) vertical_u16(rows, 2 * radius + 1, kern, W, tmp);
        else vertical_f32(rows, 2 * radius + 1, kern, W, tmp);
      } else {
        for (int64_t c = 0; c < W; c++) tmp[c] = 0.0f;
        for (int k = -radius; k <= radius; k++) add_row(in, clamp64(r + k, 0, H - 1), kern[k + radius], tmp);
      }
      horizontal(tmp, W, off, f, kern, radius, job->out + i * job->width, job->width);
    }
    free(tmp);
  }
  free(kern);
  if (failed) {
    accel__why(call->why, "out of memory for a row of %lld pixels", (long long)W);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (job->coefficients) accel__reg_prefilter(job->out, job->width, job->height, call->threads);
  return ACCEL_OK;
}

/* The columns [c0, c1) of an image of w x h in place, with
 * accel__reg_prefilter_cols's arithmetic on every column (the same
 * coefficients to the bit), taken row by row: each step reads and writes
 * c1 - c0 consecutive floats, where a strip of columns walked down the
 * image touches a new page at every row and, at 300 MP, leaves the cache
 * before its anticausal pass (2.5 times slower at 17320^2). sum: c1 - c0
 * doubles. */
static void prefilter_band(float *img, int64_t w, int64_t h, int64_t c0, int64_t c1, double *sum) {
  if (h < 2) return;
  const double z = ACCEL__REG_POLE;
  const int64_t m = c1 - c0;
  for (int64_t c = 0; c < m; c++) sum[c] = 0;
  double zk = 1;
  for (int k = 0; k < accel__reg_horizon(h); k++, zk *= z) {
    const float *row = img + k * w + c0;
    for (int64_t c = 0; c < m; c++) sum[c] += zk * 6.0 * row[c];
  }
  for (int64_t c = 0; c < m; c++) img[c0 + c] = (float)sum[c];
  for (int64_t r = 1; r < h; r++) {
    float *row = img + r * w + c0;
    const float *up = row - w;
    for (int64_t c = 0; c < m; c++) row[c] = (float)(6.0 * row[c] + z * up[c]);
  }
  float *last = img + (h - 1) * w + c0;
  for (int64_t c = 0; c < m; c++) last[c] = (float)(z / (z * z - 1) * ((double)last[c] + z * (double)last[c - w]));
  for (int64_t r = h - 2; r >= 0; r--) {
    float *row = img + r * w + c0;
    const float *down = row + w;
    for (int64_t c = 0; c < m; c++) row[c] = (float)(z * (down[c] - row[c]));
  }
}

/* Columns per band of the column pass: a band's row stays in the first
 * level cache between one row's step and the next. */
#define PREFILTER_BAND 1024

/* Cubic B-spline prefiltering in place (lib/reg/prefilter.h, shared with
 * the GPU): rows 8 side by side (each as the GPU's one by one); columns in
 * bands of whole rows (prefilter_band: each column as the GPU's). */
void accel__reg_prefilter(float *img, int64_t w, int64_t h, int threads) {
  (void)threads; /* unused without OpenMP */
  const int64_t bands = (w + PREFILTER_BAND - 1) / PREFILTER_BAND;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < h; r += 8) accel__reg_prefilter_rows(img + r * w, w, h - r < 8 ? (int)(h - r) : 8);
    double sum[PREFILTER_BAND];
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < bands; b++)
      prefilter_band(img, w, h, b * PREFILTER_BAND,
                     b * PREFILTER_BAND + PREFILTER_BAND < w ? (b + 1) * PREFILTER_BAND : w, sum);
  }
}

/* Whether w contiguous floats are all finite (exponent bits not all ones),
 * eight at a time with no early exit, so that the loop is vectorised: the
 * scalar test with its branch per sample took 0.3 to 0.45 s an image of
 * 300 MP on two threads, this 0.12 s. */
typedef int32_t v8i __attribute__((vector_size(32)));

ACCEL__CLONES("avx2", "default") static bool row_finite(const float *p, int64_t w) {
  v8i any = {0};
  int64_t c = 0;
  for (; c + 8 <= w; c += 8) {
    v8i u;
    memcpy(&u, p + c, sizeof u);
    any |= (u & 0x7f800000) == 0x7f800000;
  }
  int32_t one = 0;
  for (int k = 0; k < 8; k++) one |= any[k];
  for (; c < w; c++) one |= !isfinite(p[c]);
  return !one;
}

int64_t accel__reg_first_nonfinite(const accel_array *a, int threads) {
  (void)threads; /* unused without OpenMP */
  const int64_t h = a->shape[0], w = a->shape[1];
  int64_t bad = INT64_MAX;
#pragma omp parallel for reduction(min : bad) schedule(static) num_threads(threads)
  for (int64_t r = 0; r < h; r++) {
    const char *row = (const char *)a->data + r * a->strides[0];
    if (a->strides[1] == (int64_t)sizeof(float) && row_finite((const float *)row, w)) continue;
    for (int64_t c = 0; c < w; c++)
      if (!isfinite(*(const float *)(row + c * a->strides[1]))) {
        bad = r * w + c < bad ? r * w + c : bad;
        break;
      }
  }
  return bad == INT64_MAX ? -1 : bad;
}

accel_status accel__reg_cpu_finite(accel__call *call, accel__reg_finite_job *job) {
  job->bad = accel__reg_first_nonfinite(job->image, call->threads);
  return ACCEL_OK;
}
