/*
 * The feature transform of SciPy's distance_transform_edt(return_indices=
 * True) on the CPU: for every voxel, the index of "its" nearest zero voxel,
 * chosen as SciPy chooses among equally near ones, and the float64 distances
 * SciPy derives from those indices. The per-voxel and per-line steps (and
 * the algorithm's description) are in lib/ct/ft_line.h, shared with the GPU.
 */
#include "ct/ct.h"
#include "ct/ft_line.h"

#include <stdlib.h>

/* The pass along `axis` over every line; false when out of memory. */
static bool ft_pass(int32_t *ft, accel__dims d, int axis, const double sp[3], int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const uint64_t nvox = accel__dims_count(d);
  const int64_t len = axis == 0 ? d.nz : axis == 1 ? d.ny : d.nx;
  const int64_t lines = (int64_t)(nvox / (uint64_t)(len ? len : 1));
  int oom = 0;
#pragma omp parallel num_threads(threads)
  {
    accel__ft_scratch w = {malloc((size_t)len * 3 * sizeof(int32_t)), malloc((size_t)len * sizeof(int32_t)), 1};
    if (!w.f || !w.keep) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 64)
    for (int64_t k = 0; k < lines; k++) {
      if (!w.f || !w.keep) continue;
      int64_t coor[3], stride, n;
      uint64_t base;
      accel__ft_line_of(k, axis, d.nz, d.ny, d.nx, coor, &base, &stride, &n);
      accel__ft_line(ft, nvox, base, stride, n, axis, coor, sp, w);
    }
    free(w.f);
    free(w.keep);
  }
  return !oom;
}

accel_status accel__ct_feature_transform_cpu(const uint8_t *mask, accel__dims d, const double sp[3], int threads,
                                             int32_t *indices, double *distances) {
  (void)threads; /* read by OpenMP pragmas only */
  const uint64_t n = accel__dims_count(d);
  int32_t *ft = indices ? indices : malloc((n ? n : 1) * 3 * sizeof(int32_t));
  if (!ft) return ACCEL_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) accel__ft_init(mask, ft, n, (uint64_t)i, d.ny, d.nx);
  bool ok = true;
  for (int axis = 0; axis < 3 && ok; axis++) ok = ft_pass(ft, d, axis, sp, threads);
  if (ok && distances) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; i++) distances[i] = accel__ft_distance(ft, n, (uint64_t)i, d.ny, d.nx, sp);
  }
  if (!indices) free(ft);
  return ok ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
}
