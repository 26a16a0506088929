/*
 * The feature transform of SciPy's distance_transform_edt(return_indices=
 * True): for every voxel, the index of "its" nearest zero voxel, chosen as
 * SciPy chooses among equally near ones, and the float64 distances SciPy
 * derives from those indices.
 *
 * The algorithm is Maurer, Qi and Raghavan's ("A linear time algorithm for
 * computing exact Euclidean distance transforms of binary images in
 * arbitrary dimensions", IEEE PAMI 25(2), 2003), in the form SciPy's
 * ndimage implements: zero voxels are their own features, then one pass per
 * axis, z first, x last. A pass takes each line along its axis and the
 * features the previous passes left on it; it keeps, in order along the
 * line, those whose Voronoi cell crosses the line (a feature is dropped when
 * the next one's cell starts before the previous one's ends: the PAMI
 * paper's "remove" test, with a, b, c the spacings between three features'
 * projections and u, v, w their squared distances to the line), then walks
 * the line giving each voxel the first of them that no later one beats
 * (a tie keeps the earlier). Every sum and product is made in double in the
 * order SciPy makes it (coordinate by coordinate, z first), without fused
 * multiply-adds, so ties resolve as they do there and the distances,
 * sqrt((dz sz)^2 + (dy sy)^2 + (dx sx)^2) summed left to right, are SciPy's
 * to the bit.
 *
 * Voxels that no pass reaches (a volume without zero voxels) keep SciPy's
 * placeholder (-1, 0, 0).
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>

/* One line's features: f[3 * i + c] (coordinate c of element i). */
typedef struct ft_line {
  int32_t *f;
  int64_t *keep; /* the stack of kept elements */
} ft_line;

/* Squared, scaled distance of feature `f` to the line through `coor`,
 * leaving out axis `skip` (-1: none; then coor[skip] is ignored). */
static inline double off_line(const int32_t *f, const int64_t coor[3], const double sp[3], int skip) {
  double r = 0.0;
  for (int c = 0; c < 3; c++) {
    if (c == skip) continue;
    const double t = (double)((int64_t)f[c] - coor[c]) * sp[c];
    r += t * t;
  }
  return r;
}

/* Squared, scaled distance of feature `f` to element `p` of the line along `axis`. */
static inline double to_point(const int32_t *f, const int64_t coor[3], int axis, int64_t p, const double sp[3]) {
  double r = 0.0;
  for (int c = 0; c < 3; c++) {
    const double t = (double)((int64_t)f[c] - (c == axis ? p : coor[c])) * sp[c];
    r += t * t;
  }
  return r;
}

/* One line of length n along `axis` whose element i is voxel base + i *
 * stride; coor: the line's coordinates (coor[axis] unused). */
static void voronoi_line(int32_t *ft, uint64_t nvox, uint64_t base, int64_t stride, int64_t n, int axis,
                         const int64_t coor[3], const double sp[3], ft_line w) {
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) w.f[3 * i + c] = ft[c * nvox + base + (uint64_t)(i * stride)];
  int64_t l = -1;
  for (int64_t i = 0; i < n; i++) {
    const int32_t *fi = w.f + 3 * i;
    if (fi[0] < 0) continue; /* no feature yet */
    const double fd = (double)fi[axis], wr = off_line(fi, coor, sp, axis);
    while (l >= 1) {
      const int32_t *f1 = w.f + 3 * w.keep[l], *f2 = w.f + 3 * w.keep[l - 1];
      const double x1 = (double)f1[axis];
      const double a = (x1 - (double)f2[axis]) * sp[axis], b = (fd - x1) * sp[axis], c = a + b;
      const double ur = off_line(f2, coor, sp, axis), vr = off_line(f1, coor, sp, axis);
      if (c * vr - b * ur - a * wr - a * b * c <= 0.0) break;
      l--;
    }
    w.keep[++l] = i;
  }
  if (l < 0) return; /* no feature on this line yet */
  const int64_t last = l;
  l = 0;
  for (int64_t p = 0; p < n; p++) {
    double d1 = to_point(w.f + 3 * w.keep[l], coor, axis, p, sp);
    while (l < last) {
      const double d2 = to_point(w.f + 3 * w.keep[l + 1], coor, axis, p, sp);
      if (d1 <= d2) break;
      d1 = d2;
      l++;
    }
    const int32_t *best = w.f + 3 * w.keep[l];
    for (int c = 0; c < 3; c++) ft[c * nvox + base + (uint64_t)(p * stride)] = best[c];
  }
}

/* The pass along `axis` over every line; false when out of memory. */
static bool ft_pass(int32_t *ft, accel__dims d, int axis, const double sp[3], int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const uint64_t nvox = accel__dims_count(d);
  const int64_t len = axis == 0 ? d.nz : axis == 1 ? d.ny : d.nx;
  const int64_t stride = axis == 0 ? d.ny * d.nx : axis == 1 ? d.nx : 1;
  const int64_t lines = (int64_t)(nvox / (uint64_t)(len ? len : 1));
  int oom = 0;
#pragma omp parallel num_threads(threads)
  {
    ft_line w = {malloc((size_t)len * 3 * sizeof(int32_t)), malloc((size_t)len * sizeof(int64_t))};
    if (!w.f || !w.keep) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 64)
    for (int64_t k = 0; k < lines; k++) {
      if (!w.f || !w.keep) continue;
      int64_t coor[3];
      if (axis == 0) coor[0] = 0, coor[1] = k / d.nx, coor[2] = k % d.nx;
      else if (axis == 1) coor[0] = k / d.nx, coor[1] = 0, coor[2] = k % d.nx;
      else coor[0] = k / d.ny, coor[1] = k % d.ny, coor[2] = 0;
      const uint64_t base =
          ((uint64_t)coor[0] * (uint64_t)d.ny + (uint64_t)coor[1]) * (uint64_t)d.nx + (uint64_t)coor[2];
      voronoi_line(ft, nvox, base, stride, len, axis, coor, sp, w);
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
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t x = 0; x < d.nx; x++) {
        const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
        const bool zero = mask[i] == 0;
        ft[i] = zero ? (int32_t)z : -1;
        ft[n + i] = zero ? (int32_t)y : 0;
        ft[2 * n + i] = zero ? (int32_t)x : 0;
      }
  bool ok = true;
  for (int axis = 0; axis < 3 && ok; axis++) ok = ft_pass(ft, d, axis, sp, threads);
  if (ok && distances) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++)
        for (int64_t x = 0; x < d.nx; x++) {
          const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
          /* as numpy: int32 differences, in float64, scaled, squared, summed z first */
          const double tz = (double)(int32_t)(ft[i] - (int32_t)z) * sp[0];
          const double ty = (double)(int32_t)(ft[n + i] - (int32_t)y) * sp[1];
          const double tx = (double)(int32_t)(ft[2 * n + i] - (int32_t)x) * sp[2];
          distances[i] = sqrt(tz * tz + ty * ty + tx * tx);
        }
  }
  if (!indices) free(ft);
  return ok ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
}
