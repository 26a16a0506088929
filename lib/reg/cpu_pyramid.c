/* The CPU op reg.pyramid: a sampled Gaussian (radius ceil(3 sigma),
 * normalised, edges replicated as ITK's zero-flux boundary), separable,
 * evaluated only at the rows and columns that are kept: the vertical pass
 * makes the kept rows at every input column, the horizontal pass the kept
 * columns of those. Each output row is one thread's work, so the result
 * does not depend on the thread count. */
#include "reg/cpu.h"

#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void accel__reg_prefilter(float *img, int64_t w, int64_t h, int threads);

static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* tmp[c] += k * in[row][c] for every input column. */
static void add_row(const accel_array *in, int64_t row, float k, float *tmp) {
  const char *base = (const char *)in->data + row * in->strides[0];
  const int64_t w = in->shape[1], s = in->strides[1];
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
      for (int64_t c = 0; c < W; c++) tmp[c] = 0.0f;
      const int64_t r = off + f * i;
      for (int k = -radius; k <= radius; k++) add_row(in, clamp64(r + k, 0, H - 1), kern[k + radius], tmp);
      float *o = job->out + i * job->width;
      for (int64_t j = 0; j < job->width; j++) {
        const int64_t c = off + f * j;
        float v = 0.0f;
        if (c - radius >= 0 && c + radius < W)
          for (int k = -radius; k <= radius; k++) v += kern[k + radius] * tmp[c + k];
        else
          for (int k = -radius; k <= radius; k++) v += kern[k + radius] * tmp[clamp64(c + k, 0, W - 1)];
        o[j] = v;
      }
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

/* Cubic B-spline prefiltering in place (Unser, Aldroubi and Eden 1991;
 * mirror boundaries): the pole z = sqrt(3) - 2, gain 6, a causal pass
 * started from the mirrored sum, an anticausal pass started from its
 * closed form. Rows one by one; columns as whole rows at a time. */
#define POLE (-0.26794919243112270)

static int horizon(int64_t n) {
  const int k = (int)ceil(log(1e-9) / log(-POLE));
  return k < n ? k : (int)n;
}

static void prefilter_row(float *s, int64_t n) {
  if (n < 2) return;
  const double z = POLE;
  double zk = 1, sum = 0;
  for (int k = 0; k < horizon(n); k++, zk *= z) sum += zk * 6.0 * s[k];
  double prev = sum;
  s[0] = (float)sum;
  for (int64_t k = 1; k < n; k++) s[k] = (float)(prev = 6.0 * s[k] + z * prev);
  double next = z / (z * z - 1) * ((double)s[n - 1] + z * (double)s[n - 2]);
  s[n - 1] = (float)next;
  for (int64_t k = n - 2; k >= 0; k--) s[k] = (float)(next = z * (next - s[k]));
}

static void prefilter_cols(float *img, int64_t w, int64_t h, int64_t c0, int64_t c1) {
  if (h < 2) return;
  const double z = POLE;
  const int64_t m = c1 - c0;
  double sum[64];
  for (int64_t c = 0; c < m; c++) sum[c] = 0;
  double zk = 1;
  for (int k = 0; k < horizon(h); k++, zk *= z)
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

void accel__reg_prefilter(float *img, int64_t w, int64_t h, int threads) {
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < h; r++) prefilter_row(img + r * w, w);
#pragma omp for schedule(static)
    for (int64_t c0 = 0; c0 < w; c0 += 64) prefilter_cols(img, w, h, c0, c0 + 64 < w ? c0 + 64 : w);
  }
}
