/*
 * SciPy's gaussian_filter(volume, sigma, truncate=4.0, mode='reflect') for a
 * float32 volume: one 1-D correlation per axis (z, then y, then x), each line
 * computed in double from float32 values and stored as float32, with the
 * kernel exp(-x^2 / (2 sigma^2)) / sum over x = -R..R, R = int(4 sigma + 0.5),
 * and 'reflect' edges (d c b a | a b c d | d c b a). As in ndimage's
 * symmetric case, each output is w0 * v0 + sum over j of
 * (v[-j] + v[+j]) * w[j], j from R down to 1. Agreement with SciPy is to
 * float rounding (its exp and sum come from numpy).
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t reflect(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * n;
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

static bool pass(const float *in, float *out, accel__dims d, int axis, const double *w, int64_t rad, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const int64_t n = axis == 0 ? d.nz : axis == 1 ? d.ny : d.nx;
  const int64_t stride = axis == 0 ? d.ny * d.nx : axis == 1 ? d.nx : 1;
  const int64_t lines = (int64_t)(accel__dims_count(d) / (uint64_t)n);
  int oom = 0;
#pragma omp parallel num_threads(threads)
  {
    double *buf = malloc((size_t)(n + 2 * rad) * sizeof(double));
    if (!buf) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(static)
    for (int64_t l = 0; l < lines; l++) {
      if (!buf) continue;
      int64_t base;
      if (axis == 2) base = l * d.nx;
      else if (axis == 1) base = (l / d.nx) * d.ny * d.nx + l % d.nx;
      else base = l;
      for (int64_t i = -rad; i < n + rad; i++) buf[i + rad] = (double)in[base + reflect(i, n) * stride];
      for (int64_t i = 0; i < n; i++) {
        const double *c = buf + i + rad;
        double acc = c[0] * w[0];
        for (int64_t j = rad; j >= 1; j--) acc += (c[-j] + c[j]) * w[j];
        out[base + i * stride] = (float)acc;
      }
    }
    free(buf);
  }
  return !oom;
}

accel_status accel__ct_gaussian_cpu(const float *in, accel__dims d, double sigma, int threads, float *out) {
  const int64_t rad = (int64_t)(4.0 * sigma + 0.5);
  double *w = malloc((size_t)(rad + 1) * sizeof(double));
  float *tmp = malloc((accel__dims_count(d) ? accel__dims_count(d) : 1) * sizeof(float));
  if (!w || !tmp) {
    free(w);
    free(tmp);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  double sum = 0;
  const double k = -0.5 / (sigma * sigma);
  for (int64_t x = -rad; x <= rad; x++) sum += exp(k * (double)(x * x));
  for (int64_t x = 0; x <= rad; x++) w[x] = exp(k * (double)(x * x)) / sum;
  const bool ok = pass(in, tmp, d, 0, w, rad, threads) && pass(tmp, out, d, 1, w, rad, threads) &&
                  pass(out, tmp, d, 2, w, rad, threads);
  if (ok) memcpy(out, tmp, accel__dims_count(d) * sizeof(float));
  free(w);
  free(tmp);
  return ok ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
}
