/*
 * Exact Euclidean distance transform, separable (Felzenszwalb and
 * Huttenlocher, "Distance transforms of sampled functions", 2012): along x the
 * distance to the nearest background voxel of the row (two sweeps), then
 * along y and along z the lower envelope of the parabolas
 * f(q) + ((p - q) * s)^2 of each line. Squared distances are kept in the
 * float32 output between passes: sums of squared multiples of the spacing,
 * exact while below 2^24 in units of the smallest square (distances up to
 * 4096 voxels at unit spacing), so the result is SciPy's to the bit there.
 *
 * The y and z passes read lines across memory: BLOCK neighbouring lines are
 * copied into a contiguous buffer, transformed, and copied back, so every
 * access to the volume is a run of BLOCK consecutive floats.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 16 };

/* One line: f[0..n) (squared distances, +inf = none) in place; spacing s.
 * v, zz: scratch of n and n + 1 entries. */
static void envelope(float *f, int64_t n, double s, int64_t *v, double *zz, double *g) {
  const double s2 = s * s, s2x2 = 2.0 * s2;
  double *h = g + n; /* h[k]: the k-th envelope parabola's value at 0, g[v] + s2 v^2 */
  int64_t k = -1;
  for (int64_t q = 0; q < n; q++) {
    g[q] = f[q];
    if (isinf(f[q])) continue;
    const double fq = g[q] + s2 * (double)q * (double)q;
    double cross = -INFINITY;
    while (k >= 0) {
      cross = (fq - h[k]) / (s2x2 * (double)(q - v[k]));
      if (cross <= zz[k]) k--;
      else break;
    }
    k++;
    v[k] = q;
    h[k] = fq;
    zz[k] = k == 0 ? -INFINITY : cross;
    zz[k + 1] = INFINITY;
  }
  if (k < 0) return; /* no finite value: the line stays +inf */
  int64_t j = 0;
  for (int64_t p = 0; p < n; p++) {
    while (zz[j + 1] < (double)p) j++;
    const double dq = ((double)(p - v[j])) * s;
    f[p] = (float)(g[v[j]] + dq * dq);
  }
}

/* A line's zeros (background already at distance 0) bound its runs of
 * nonzero values: for p inside a run, a parabola centred beyond the zero
 * next to it costs more than that zero's, so each run together with its
 * bounding zeros is transformed alone; lines of zeros are left as they are. */
static inline bool four_zeros(const float *f) { /* zeros here are +0.0: all bits clear */
  uint64_t a, b;
  memcpy(&a, f, 8);
  memcpy(&b, f + 2, 8);
  return (a | b) == 0;
}

static void transform_line(float *f, int64_t n, double s, int64_t *v, double *zz, double *g) {
  int64_t i = 0;
  while (i < n) {
    while (i + 4 <= n && four_zeros(f + i)) i += 4;
    while (i < n && f[i] == 0) i++;
    if (i >= n) break;
    int64_t j = i;
    while (j + 1 < n && f[j + 1] != 0) j++;
    const int64_t lo = i > 0 ? i - 1 : 0, hi = j + 1 < n ? j + 1 : j;
    envelope(f + lo, hi - lo + 1, s, v, zz, g);
    i = j + 1;
  }
}

/* Pass along y (axis 1) or z (axis 0) on the float volume; with root, the
 * square roots are taken as the lines are written back (the last pass).
 * sqrtf of a float equals the double square root rounded to float (a double
 * carries more than twice a float's bits, so rounding twice is harmless).
 * False when out of memory for the line buffers. */
static bool pass_strided(float *vol, accel__dims d, int axis, double s, bool root, int threads) {
  int oom = 0;
  const int64_t n = axis == 0 ? d.nz : d.ny;
  const int64_t stride = axis == 0 ? d.ny * d.nx : d.nx; /* elements between line entries */
  const int64_t outer = axis == 0 ? d.ny : d.nz;          /* the other non-x axis */
  const int64_t xblocks = (d.nx + BLOCK - 1) / BLOCK;
#pragma omp parallel num_threads(threads)
  {
    /* a block of BLOCK lines, transposed: line c at buf[c * n] */
    float *buf = malloc((size_t)n * BLOCK * sizeof(float));
    int64_t *v = malloc((size_t)n * sizeof(int64_t));
    double *zz = malloc((size_t)(n + 1) * sizeof(double)), *g = malloc((size_t)(2 * n) * sizeof(double));
    if (!buf || !v || !zz || !g) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 4) collapse(2)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t xb = 0; xb < xblocks; xb++) {
        if (!buf || !v || !zz || !g) continue;
        const int64_t x0 = xb * BLOCK, w = d.nx - x0 < BLOCK ? d.nx - x0 : BLOCK;
        const int64_t base = axis == 0 ? o * d.nx + x0 : o * d.ny * d.nx + x0;
        for (int64_t i = 0; i < n; i++) {
          const float *src = vol + base + i * stride;
          for (int64_t c = 0; c < w; c++) buf[c * n + i] = src[c];
        }
        for (int64_t c = 0; c < w; c++) transform_line(buf + c * n, n, s, v, zz, g);
        for (int64_t i = 0; i < n; i++) {
          float *dst = vol + base + i * stride;
          if (root)
            for (int64_t c = 0; c < w; c++) dst[c] = sqrtf(buf[c * n + i]);
          else
            for (int64_t c = 0; c < w; c++) dst[c] = buf[c * n + i];
        }
      }
    free(buf);
    free(v);
    free(zz);
    free(g);
  }
  return !oom;
}

accel_status accel__ct_edt_cpu(const uint8_t *mask, accel__dims d, const double spacing[3], int threads, float *out) {
  const double sx = spacing[2];
  /* x: distance to the nearest zero of the row, in voxels (int32 sweeps, then
   * the squares scaled in one vectorizable loop; rows without a zero: inf) */
  int oom = 0;
#pragma omp parallel num_threads(threads)
  {
    int32_t *dist = malloc((size_t)(d.nx ? d.nx : 1) * sizeof(int32_t));
    if (!dist) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < d.nz * d.ny; r++) {
      if (!dist) continue;
      const uint8_t *m = mask + r * d.nx;
      float *o = out + r * d.nx;
      const int32_t far = INT32_MAX / 2;
      int32_t run = far;
      for (int64_t x = 0; x < d.nx; x++) {
        run = m[x] ? (run < far ? run + 1 : far) : 0;
        dist[x] = run;
      }
      run = far;
      for (int64_t x = d.nx - 1; x >= 0; x--) {
        run = m[x] ? (run < far ? run + 1 : far) : 0;
        if (run < dist[x]) dist[x] = run;
      }
      for (int64_t x = 0; x < d.nx; x++) {
        const double dx = (double)dist[x] * sx;
        o[x] = dist[x] >= far ? INFINITY : (float)(dx * dx);
      }
    }
    free(dist);
  }
  if (oom) return ACCEL_ERR_OUT_OF_MEMORY;
  if (!pass_strided(out, d, 1, spacing[1], false, threads) || !pass_strided(out, d, 0, spacing[0], true, threads))
    return ACCEL_ERR_OUT_OF_MEMORY;
  return ACCEL_OK;
}
