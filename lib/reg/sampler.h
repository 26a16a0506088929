/*
 * lib/reg/sampler.h - where a level's samples lie (internal; C and CUDA, so
 * that every backend draws the same samples).
 *
 * Samples are stratified by the cells of the level's control grid: a cell is
 * the square [k, k + 1) x [l, l + 1) of grid coordinates ((q - origin) /
 * spacing, q = L(p) the point after the linear part), and every sample in it
 * has the same 4 x 4 support nodes (k - 1 .. k + 2, l - 1 .. l + 2). The
 * candidate positions of a cell are the level's pixel lattice in q-space
 * (q = factor * i + offset, i integer) inside the cell and inside the box of
 * the fixed image; a cell with P candidates gets round(density * P) samples
 * (density = samples / all candidates), drawn among its candidates by a
 * counter-based hash of (seed, level, set, cell, k) (rows stratified,
 * columns uniform: accel__reg_sample_at): no state, the same on every
 * thread count and on a GPU. With
 * density >= 1 (or samples = 0) every candidate is taken once, in order.
 *
 * A sample counts when p = L^-1(q) lies in the fixed image (and its mask)
 * and T(p) in the moving image; the others are skipped (elastix skips
 * samples that map outside the moving image, too).
 */
#ifndef ACCEL_REG_SAMPLER_H
#define ACCEL_REG_SAMPLER_H

#include "reg/bspline.h"

#include <stdint.h>

/* Sample sets: the iteration's training samples (the metric and its
 * gradient), the fixed validation set (drawn once per level), and the
 * iteration's samples of the Gauss-Newton matrix (fewer: the matrix only
 * sets the step's shape, the gradient its end point). */
enum {
  ACCEL__REG_SET_TRAIN = 0,
  ACCEL__REG_SET_VALID = 1,
  ACCEL__REG_SET_NORMAL = 2,
  ACCEL__REG_SET_EXACT = 3,   /* ASGD's parameter estimation: the "exact" gradient's samples */
  ACCEL__REG_SET_JACOBIAN = 4 /* ASGD's parameter estimation: the Jacobian terms' points */
};

/* One axis of the cell layout: cell k (0-based among the cells of the valid
 * region, grid coordinate k + 1) holds the lattice indices [first[k],
 * first[k + 1]) of this axis. */
typedef struct accel__reg_axis {
  int64_t cells;  /* valid cells: GridSize - 3 */
  int64_t *first; /* cells + 1 lattice indices (host or device memory) */
} accel__reg_axis;

/* splitmix64's finaliser (Steele, Lea and Flood 2014): a bijective mix. */
ACCEL__REG_HD uint64_t accel__reg_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The hash of one sample: 64 random bits from (seed, level, set and
 * iteration, cell, k). `stream` is (set << 32) | iteration. The part that
 * does not depend on k is the cell's key (accel__reg_cell_key). */
ACCEL__REG_HD uint64_t accel__reg_cell_key(uint64_t seed, int32_t level, uint64_t stream, int64_t cell) {
  uint64_t h = accel__reg_mix(seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(level + 1));
  h = accel__reg_mix(h ^ stream);
  return accel__reg_mix(h ^ (uint64_t)cell);
}

ACCEL__REG_HD uint64_t accel__reg_hash_k(uint64_t key, int64_t k) {
  return accel__reg_mix(key ^ ((uint64_t)k * 0xd1b54a32d192ed03ULL));
}

ACCEL__REG_HD uint64_t accel__reg_hash(uint64_t seed, int32_t level, uint64_t stream, int64_t cell, int64_t k) {
  return accel__reg_hash_k(accel__reg_cell_key(seed, level, stream, cell), k);
}

/* A uniform index in [0, n) from 32 random bits (n < 2^32). */
ACCEL__REG_HD int64_t accel__reg_pick(uint32_t bits, int64_t n) {
  return (int64_t)(((uint64_t)bits * (uint64_t)n) >> 32);
}

/* How many samples a cell of P candidates gets at `density` (< 1), at
 * least one when P > 0. */
ACCEL__REG_HD int64_t accel__reg_cell_samples(int64_t candidates, double density) {
  if (candidates <= 0) return 0;
  if (density >= 1.0) return candidates;
  const int64_t n = (int64_t)floor(density * (double)candidates + 0.5);
  return n < 1 ? 1 : n;
}

/* The k-th of the ns samples of cell (cx, cy) (0-based valid cells), key
 * the cell's accel__reg_cell_key: its lattice indices (ix, iy). Rows are
 * stratified (sample k lies in the k-th of ns equal bands of the cell's
 * rows, at a random row of it), columns uniform: the samples come in row
 * order, so a cell reads its images front to back. */
ACCEL__REG_HD void accel__reg_sample_key(const accel__reg_axis *ax, const accel__reg_axis *ay, int64_t cx, int64_t cy,
                                         int64_t k, int64_t ns, double density, uint64_t key, int64_t *ix,
                                         int64_t *iy) {
  const int64_t x0 = ax->first[cx], nx = ax->first[cx + 1] - x0;
  const int64_t y0 = ay->first[cy], ny = ay->first[cy + 1] - y0;
  if (density >= 1.0) {
    *ix = x0 + k % nx;
    *iy = y0 + k / nx;
    return;
  }
  const uint64_t h = accel__reg_hash_k(key, k);
  *ix = x0 + accel__reg_pick((uint32_t)h, nx);
  const int64_t r =
      (int64_t)(((double)k + (double)(uint32_t)(h >> 32) * (1.0 / 4294967296.0)) * (double)ny / (double)ns);
  *iy = y0 + (r < ny ? r : ny - 1);
}

/* The same from the sample's seed, level and stream. */
ACCEL__REG_HD void accel__reg_sample_at(const accel__reg_axis *ax, const accel__reg_axis *ay, int64_t cx, int64_t cy,
                                        int64_t k, int64_t ns, double density, uint64_t seed, int32_t level,
                                        uint64_t stream, int64_t *ix, int64_t *iy) {
  accel__reg_sample_key(ax, ay, cx, cy, k, ns, density, accel__reg_cell_key(seed, level, stream, cy * ax->cells + cx),
                        ix, iy);
}

#endif /* ACCEL_REG_SAMPLER_H */
