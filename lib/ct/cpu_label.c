/*
 * Connected components by union-find over voxel indices. Parents always
 * point to smaller indices (a union links the larger root under the smaller),
 * so one pass in increasing order flattens every tree and each component is
 * named by its smallest voxel index, whatever the thread count.
 *
 * Threads scan Z slabs independently (unions inside a slab only), then the
 * slab boundaries are merged, then the trees are flattened.
 *
 * The code is compiled twice (cpu_label_impl.h): with uint32 indices for
 * volumes of at most accel__ct_index_limit voxels, and with uint64 indices
 * (the _wide functions) for any volume.
 */
#include "ct/ct.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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
        if (manhattan > (connectivity == 6 ? 1 : connectivity == 18 ? 2 : 3)) continue;
        b.dz[b.n] = dz;
        b.dy[b.n] = dy;
        b.dx[b.n] = dx;
        b.n++;
      }
  return b;
}

static inline bool selected(const uint8_t *mask, uint64_t i, bool want_set) { return (mask[i] != 0) == want_set; }

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

uint64_t accel__ct_index_limit = ACCEL__CT_INDEX_LIMIT_DEFAULT;

#define CT_IDX uint32_t
#define CT_NONE ((uint32_t)ACCEL__CT_NONE)
#define CT_FN(name) name
#include "ct/cpu_label_impl.h"
#undef CT_IDX
#undef CT_NONE
#undef CT_FN

#define CT_IDX uint64_t
#define CT_NONE UINT64_MAX
#define CT_FN(name) name##_wide
#include "ct/cpu_label_impl.h"
#undef CT_IDX
#undef CT_NONE
#undef CT_FN
