/*
 * lib/ct/ft_line.h - the feature transform's per-voxel and per-line steps,
 * shared by the CPU (lib/ct/cpu_ft.c) and the GPU (kernels/ct.cu) so that
 * both make the same floating-point operations in the same order.
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
 * multiply-adds (C11 does not contract; nvcc gets -fmad=false), so ties
 * resolve as they do there and the distances, sqrt((dz sz)^2 + (dy sy)^2 +
 * (dx sx)^2) summed left to right, are SciPy's to the bit.
 *
 * Features are (3, nvox) int32: coordinate c of voxel i at [c * nvox + i].
 * Voxels that no pass reaches (a volume without zero voxels) keep SciPy's
 * placeholder (-1, 0, 0).
 */
#ifndef ACCEL_CT_FT_LINE_H
#define ACCEL_CT_FT_LINE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ct/hd.h"

/* Scratch of one line of up to n elements: entry k of each array at
 * [k * step] (the GPU interleaves the scratch of neighbouring lines). */
typedef struct accel__ft_scratch {
  int32_t *f;    /* the line's features: 3 n entries, coordinate c of element i at 3 i + c */
  int32_t *keep; /* the stack of kept elements: n entries */
  int64_t step;
} accel__ft_scratch;

/* A voxel's initial feature: itself when it is zero, the placeholder else. */
static inline ACCEL__CT_HD void accel__ft_init(const uint8_t *mask, int32_t *ft, uint64_t nvox, uint64_t i, int64_t ny,
                                               int64_t nx) {
  const bool zero = mask[i] == 0;
  const int64_t plane = ny * nx;
  ft[i] = zero ? (int32_t)((int64_t)i / plane) : -1;
  ft[nvox + i] = zero ? (int32_t)((int64_t)i % plane / nx) : 0;
  ft[2 * nvox + i] = zero ? (int32_t)((int64_t)i % nx) : 0;
}

/* Squared, scaled distance of feature `f` (entries `step` apart) to the line
 * through `coor`, leaving out axis `skip` (-1: none). */
static inline ACCEL__CT_HD double accel__ft_off_line(const int32_t *f, int64_t step, const int64_t coor[3],
                                                     const double sp[3], int skip) {
  double r = 0.0;
  for (int c = 0; c < 3; c++) {
    if (c == skip) continue;
    const double t = (double)((int64_t)f[c * step] - coor[c]) * sp[c];
    r += t * t;
  }
  return r;
}

/* Squared, scaled distance of feature `f` to element `p` of the line along `axis`. */
static inline ACCEL__CT_HD double accel__ft_to_point(const int32_t *f, int64_t step, const int64_t coor[3], int axis,
                                                     int64_t p, const double sp[3]) {
  double r = 0.0;
  for (int c = 0; c < 3; c++) {
    const double t = (double)((int64_t)f[c * step] - (c == axis ? p : coor[c])) * sp[c];
    r += t * t;
  }
  return r;
}

/* One line of length n along `axis` whose element i is voxel base + i *
 * stride of the features ft; coor: the line's coordinates (coor[axis]
 * unused). */
static inline ACCEL__CT_HD void accel__ft_line(int32_t *ft, uint64_t nvox, uint64_t base, int64_t stride, int64_t n,
                                               int axis, const int64_t coor[3], const double sp[3],
                                               accel__ft_scratch w) {
  const int64_t st = w.step;
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) w.f[(3 * i + c) * st] = ft[(uint64_t)c * nvox + base + (uint64_t)(i * stride)];
  int64_t l = -1;
  for (int64_t i = 0; i < n; i++) {
    const int32_t *fi = w.f + 3 * i * st;
    if (fi[0] < 0) continue; /* no feature yet */
    const double fd = (double)fi[axis * st], wr = accel__ft_off_line(fi, st, coor, sp, axis);
    while (l >= 1) {
      const int32_t *f1 = w.f + 3 * (int64_t)w.keep[l * st] * st, *f2 = w.f + 3 * (int64_t)w.keep[(l - 1) * st] * st;
      const double x1 = (double)f1[axis * st];
      const double a = (x1 - (double)f2[axis * st]) * sp[axis], b = (fd - x1) * sp[axis], c = a + b;
      const double ur = accel__ft_off_line(f2, st, coor, sp, axis), vr = accel__ft_off_line(f1, st, coor, sp, axis);
      if (c * vr - b * ur - a * wr - a * b * c <= 0.0) break;
      l--;
    }
    w.keep[++l * st] = (int32_t)i;
  }
  if (l < 0) return; /* no feature on this line yet */
  const int64_t last = l;
  l = 0;
  for (int64_t p = 0; p < n; p++) {
    double d1 = accel__ft_to_point(w.f + 3 * (int64_t)w.keep[l * st] * st, st, coor, axis, p, sp);
    while (l < last) {
      const double d2 = accel__ft_to_point(w.f + 3 * (int64_t)w.keep[(l + 1) * st] * st, st, coor, axis, p, sp);
      if (d1 <= d2) break;
      d1 = d2;
      l++;
    }
    const int32_t *best = w.f + 3 * (int64_t)w.keep[l * st] * st;
    for (int c = 0; c < 3; c++) ft[(uint64_t)c * nvox + base + (uint64_t)(p * stride)] = best[c * st];
  }
}

/* Line k of the pass along `axis` of a (nz, ny, nx) volume: its coordinates
 * (coor[axis] = 0), its first voxel, stride and length. Lines are numbered
 * so that consecutive ones are neighbours along x (along y for the x pass). */
static inline ACCEL__CT_HD void accel__ft_line_of(int64_t k, int axis, int64_t nz, int64_t ny, int64_t nx,
                                                  int64_t coor[3], uint64_t *base, int64_t *stride, int64_t *len) {
  if (axis == 0) coor[0] = 0, coor[1] = k / nx, coor[2] = k % nx;
  else if (axis == 1) coor[0] = k / nx, coor[1] = 0, coor[2] = k % nx;
  else coor[0] = k / ny, coor[1] = k % ny, coor[2] = 0;
  *base = ((uint64_t)coor[0] * (uint64_t)ny + (uint64_t)coor[1]) * (uint64_t)nx + (uint64_t)coor[2];
  *stride = axis == 0 ? ny * nx : axis == 1 ? nx : 1;
  *len = axis == 0 ? nz : axis == 1 ? ny : nx;
}

/* Voxel i's distance to its feature, as numpy computes it from the indices:
 * int32 differences, in float64, scaled, squared and summed z first. */
static inline ACCEL__CT_HD double accel__ft_distance(const int32_t *ft, uint64_t nvox, uint64_t i, int64_t ny,
                                                     int64_t nx, const double sp[3]) {
  const int64_t plane = ny * nx;
  const int32_t z = (int32_t)((int64_t)i / plane), y = (int32_t)((int64_t)i % plane / nx),
                x = (int32_t)((int64_t)i % nx);
  const double tz = (double)(int32_t)(ft[i] - z) * sp[0];
  const double ty = (double)(int32_t)(ft[nvox + i] - y) * sp[1];
  const double tx = (double)(int32_t)(ft[2 * nvox + i] - x) * sp[2];
  return sqrt(tz * tz + ty * ty + tx * tx);
}

#endif
