/*
 * Exact Euclidean distance transform, separable (Felzenszwalb and
 * Huttenlocher, "Distance transforms of sampled functions", 2012): along x the
 * distance to the nearest background voxel of the row (two sweeps), then
 * along y and along z the lower envelope of the parabolas of each line
 * (lib/ct/edt_line.h, shared with the GPU). Squared distances are kept in
 * the float32 output between passes: sums of squared multiples of the
 * spacing, exact while below 2^24 in units of the smallest square (distances
 * up to 4096 voxels at unit spacing), so the result is SciPy's to the bit
 * there.
 *
 * The y and z passes read lines across memory: BLOCK neighbouring lines are
 * transposed into a contiguous buffer, transformed, and written back, so
 * every access to the volume is a run of BLOCK consecutive floats. The last
 * pass takes the square roots as it writes back (sqrtf of a float equals the
 * double square root rounded to float: a double carries more than twice a
 * float's bits, so rounding twice is harmless).
 */
#include "ct/ct.h"
#include "ct/edt_line.h"

#include <stdlib.h>

enum { BLOCK = 16 };

/* Pass along y (axis 1) or z (axis 0) on the float volume; false when out
 * of memory for the line buffers. */
static bool pass_strided(float *vol, accel__dims d, int axis, double s, bool root, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  int oom = 0;
  const int64_t n = axis == 0 ? d.nz : d.ny;
  const int64_t stride = axis == 0 ? d.ny * d.nx : d.nx; /* elements between line entries */
  const int64_t outer = axis == 0 ? d.ny : d.nz;         /* the other non-x axis */
  const int64_t xblocks = (d.nx + BLOCK - 1) / BLOCK;
#pragma omp parallel num_threads(threads)
  {
    /* a block of BLOCK lines, transposed: line c at buf[c * n] */
    float *buf = malloc((size_t)n * BLOCK * sizeof(float));
    int32_t *v = malloc((size_t)n * sizeof(int32_t));
    double *zz = malloc((size_t)(n + 1) * sizeof(double)), *g = malloc((size_t)(2 * n) * sizeof(double));
    const accel__edt_scratch w = {v, zz, g, g + n, 1};
    if (!buf || !v || !zz || !g) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 4) collapse(2)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t xb = 0; xb < xblocks; xb++) {
        if (!buf || !v || !zz || !g) continue;
        const int64_t x0 = xb * BLOCK, wd = d.nx - x0 < BLOCK ? d.nx - x0 : BLOCK;
        const int64_t base = axis == 0 ? o * d.nx + x0 : o * d.ny * d.nx + x0;
        for (int64_t i = 0; i < n; i++) {
          const float *src = vol + base + i * stride;
          for (int64_t c = 0; c < wd; c++) buf[c * n + i] = src[c];
        }
        for (int64_t c = 0; c < wd; c++) accel__edt_line(buf + c * n, 1, n, s, w);
        for (int64_t i = 0; i < n; i++) {
          float *dst = vol + base + i * stride;
          if (root)
            for (int64_t c = 0; c < wd; c++) dst[c] = sqrtf(buf[c * n + i]);
          else
            for (int64_t c = 0; c < wd; c++) dst[c] = buf[c * n + i];
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
  int oom = 0;
#pragma omp parallel num_threads(threads)
  {
    int32_t *dist = malloc((size_t)(d.nx ? d.nx : 1) * sizeof(int32_t));
    if (!dist) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < d.nz * d.ny; r++)
      if (dist) accel__edt_row(mask + r * d.nx, out + r * d.nx, d.nx, spacing[2], dist, 1);
    free(dist);
  }
  if (oom || !pass_strided(out, d, 1, spacing[1], false, threads) ||
      !pass_strided(out, d, 0, spacing[0], true, threads))
    return ACCEL_ERR_OUT_OF_MEMORY;
  return ACCEL_OK;
}
