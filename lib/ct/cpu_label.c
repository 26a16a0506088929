/*
 * Connected components by union-find over voxel indices. Parents always
 * point to smaller indices (a union links the larger root under the smaller),
 * so one pass in increasing order flattens every tree and each component is
 * named by its smallest voxel index, whatever the thread count.
 *
 * Threads scan Z slabs independently (unions inside a slab only), then the
 * slab boundaries are merged, then the trees are flattened.
 */
#include "ct/ct.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static inline uint32_t find_root(uint32_t *p, uint32_t x) {
  while (p[x] != x) {
    p[x] = p[p[x]]; /* path halving */
    x = p[x];
  }
  return x;
}

static inline void unite(uint32_t *p, uint32_t a, uint32_t b) {
  a = find_root(p, a);
  b = find_root(p, b);
  if (a < b) p[b] = a;
  else if (b < a) p[a] = b;
}

/* The neighbours scanned before a voxel: 3 for 6-connectivity, 13 for 26. */
typedef struct back_nb {
  int n;
  int dz[13], dy[13], dx[13];
} back_nb;

static back_nb backward_neighbours(int connectivity) {
  back_nb b;
  memset(&b, 0, sizeof b);
  for (int dz = -1; dz <= 0; dz++)
    for (int dy = -1; dy <= 1; dy++)
      for (int dx = -1; dx <= 1; dx++) {
        if (dz == 0 && (dy > 0 || (dy == 0 && dx >= 0))) continue;
        const int manhattan = abs(dz) + abs(dy) + abs(dx);
        if (connectivity == 6 && manhattan != 1) continue;
        b.dz[b.n] = dz;
        b.dy[b.n] = dy;
        b.dx[b.n] = dx;
        b.n++;
      }
  return b;
}

static inline bool selected(const uint8_t *mask, uint64_t i, bool want_set) { return (mask[i] != 0) == want_set; }

/* Union voxel (z, y, x) with its selected backward neighbours whose z is at
 * least zmin. */
static inline void scan_voxel(const uint8_t *mask, accel__dims d, bool want_set, const back_nb *b, int64_t zmin,
                              int64_t z, int64_t y, int64_t x, uint32_t *p) {
  const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
  for (int k = 0; k < b->n; k++) {
    const int64_t zz = z + b->dz[k], yy = y + b->dy[k], xx = x + b->dx[k];
    if (zz < zmin || yy < 0 || yy >= d.ny || xx < 0 || xx >= d.nx) continue;
    const uint64_t j = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
    if (selected(mask, j, want_set)) unite(p, (uint32_t)i, (uint32_t)j);
  }
}

/* First list entry with index >= v (the list is increasing). */
static uint64_t lower(const uint32_t *list, uint64_t count, uint64_t v) {
  uint64_t lo = 0, hi = count;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (list[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void coords(uint64_t i, accel__dims d, int64_t *z, int64_t *y, int64_t *x) {
  *x = (int64_t)(i % (uint64_t)d.nx);
  const uint64_t r = i / (uint64_t)d.nx;
  *y = (int64_t)(r % (uint64_t)d.ny);
  *z = (int64_t)(r / (uint64_t)d.ny);
}

/* How many z slabs the threads scan. */
static int slab_count(int threads, accel__dims d) {
  const int nslabs = threads < 1 ? 1 : threads;
  return nslabs > d.nz ? (int)(d.nz ? d.nz : 1) : nslabs;
}

/* scan_voxel at the voxels of `list` in planes [z0, z1), looking no lower
 * than plane zmin; `init` first makes each of them its own root. */
static void scan_planes(const uint8_t *mask, accel__dims d, const back_nb *b, const uint32_t *list, uint64_t count,
                        int64_t z0, int64_t z1, int64_t zmin, bool init, uint32_t *p) {
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
  const uint64_t k0 = lower(list, count, (uint64_t)z0 * plane), k1 = lower(list, count, (uint64_t)z1 * plane);
  for (uint64_t k = k0; k < k1 && init; k++) p[list[k]] = list[k];
  for (uint64_t k = k0; k < k1; k++) {
    int64_t z, y, x;
    coords(list[k], d, &z, &y, &x);
    scan_voxel(mask, d, true, b, zmin, z, y, x, p);
  }
}

accel_status accel__ct_components_list(const uint8_t *mask, accel__dims d, const uint32_t *list, uint64_t count,
                                       int connectivity, int threads, uint32_t *p) {
  if (accel__dims_count(d) >= ACCEL__CT_NONE) return ACCEL_ERR_LIMIT;
  const back_nb b = backward_neighbours(connectivity);
  const int nslabs = slab_count(threads, d);
#pragma omp parallel for num_threads(nslabs) schedule(static, 1)
  for (int s = 0; s < nslabs; s++) {
    const int64_t z0 = d.nz * s / nslabs, z1 = d.nz * (s + 1) / nslabs;
    scan_planes(mask, d, &b, list, count, z0, z1, z0, true, p);
  }
  for (int s = 1; s < nslabs; s++) { /* the slab boundaries */
    const int64_t z = d.nz * s / nslabs;
    scan_planes(mask, d, &b, list, count, z, z + 1, z - 1, false, p);
  }
  for (uint64_t k = 0; k < count; k++) p[list[k]] = p[p[list[k]]]; /* flatten, in increasing order */
  return ACCEL_OK;
}

/* scan_voxel at the selected voxels of plane z, looking no lower than zmin. */
static void scan_plane(const uint8_t *mask, accel__dims d, bool want_set, const back_nb *b, int64_t z, int64_t zmin,
                       uint32_t *p) {
  for (int64_t y = 0; y < d.ny; y++)
    for (int64_t x = 0; x < d.nx; x++) {
      const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
      if (p[i] != ACCEL__CT_NONE) scan_voxel(mask, d, want_set, b, zmin, z, y, x, p);
    }
}

accel_status accel__ct_components(const uint8_t *mask, accel__dims d, bool want_set, int connectivity, int threads,
                                  uint32_t *p) {
  const uint64_t n = accel__dims_count(d);
  if (n >= ACCEL__CT_NONE) return ACCEL_ERR_LIMIT;
  const back_nb b = backward_neighbours(connectivity);
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
  const int nslabs = slab_count(threads, d);
#pragma omp parallel for num_threads(nslabs) schedule(static, 1)
  for (int s = 0; s < nslabs; s++) {
    const int64_t z0 = d.nz * s / nslabs, z1 = d.nz * (s + 1) / nslabs;
    for (uint64_t i = (uint64_t)z0 * plane; i < (uint64_t)z1 * plane; i++)
      p[i] = selected(mask, i, want_set) ? (uint32_t)i : ACCEL__CT_NONE;
    for (int64_t z = z0; z < z1; z++) scan_plane(mask, d, want_set, &b, z, z0, p);
  }
  /* the slab boundaries: the first plane of each slab against the plane before */
  for (int s = 1; s < nslabs; s++) scan_plane(mask, d, want_set, &b, d.nz * s / nslabs, d.nz * s / nslabs - 1, p);
  /* flatten: parents are smaller, so theirs are final already */
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != ACCEL__CT_NONE) p[i] = p[p[i]];
  return ACCEL_OK;
}
