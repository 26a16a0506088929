/*
 * Marker-controlled watershed: scikit-image 0.19.3's priority flood
 * (skimage/segmentation/_watershed_cy.pyx, connectivity 1, no compactness),
 * reproduced operation for operation:
 *
 * - markers (restricted to the mask) are pushed in C order with age 0;
 * - the heap pops the lowest (value, age); each popped voxel visits its
 *   neighbours in the order -z, -y, -x, +x, +y, +z, and every neighbour in
 *   the mask and still unlabelled takes the popped voxel's label and is
 *   pushed with the next age (ages count pushes from 2);
 * - the heap is the same binary heap (sift-up on push; on pop the last item
 *   moves to the root and sifts down towards the smaller child, the left one
 *   on ties), so equal-valued markers leave it in the same order as there.
 *
 * With ACCEL_CT_TIES_STABLE the markers get ages 0, 1, 2, ... in C order
 * instead, which makes every key distinct: any exact priority queue then
 * gives the same flood.
 *
 * Values become 32-bit keys that order like the floats (-0 as +0); a key and
 * an age pack into one integer compared in one instruction.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t value_key(float f) {
  f += 0.0f; /* -0 -> +0: equal values compare equal */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

typedef unsigned __int128 u128;

typedef struct cell {
  int32_t lab;
  uint32_t vk;
} cell;

/* The flood over a padded volume of cells: lab is OUTSIDE outside the mask
 * (and in the one-voxel padding), 0 unlabelled, else a label; vk the value
 * key. A neighbour's label and key share a cache line: the flood's order
 * jumps around the volume, and these loads are its cost. */
#define OUTSIDE INT32_MIN
#define DEFINE_FLOOD(NAME, KEY_T, AGE_SHIFT, INDEX_T)                                                                  \
  static const KEY_T NAME##_age_mask = ((KEY_T)1 << AGE_SHIFT) - 1;                                                    \
  typedef struct NAME##_item {                                                                                         \
    KEY_T key;                                                                                                         \
    INDEX_T index;                                                                                                     \
  } NAME##_item;                                                                                                       \
                                                                                                                       \
  /* keys and indices in two arrays: the comparisons read only the keys */                                             \
  typedef struct NAME##_heap {                                                                                         \
    KEY_T *k;                                                                                                          \
    INDEX_T *x;                                                                                                        \
    size_t n, cap;                                                                                                     \
  } NAME##_heap;                                                                                                       \
                                                                                                                       \
  static void NAME##_free(NAME##_heap *h) {                                                                            \
    free(h->k);                                                                                                        \
    free(h->x);                                                                                                        \
  }                                                                                                                    \
                                                                                                                       \
  static bool NAME##_push(NAME##_heap *h, NAME##_item it) {                                                            \
    if (h->n == h->cap) {                                                                                              \
      size_t cap = h->cap ? h->cap * 2 : 4096;                                                                         \
      KEY_T *k = realloc(h->k, cap * sizeof *k);                                                                       \
      if (!k) return false;                                                                                            \
      h->k = k;                                                                                                        \
      INDEX_T *x = realloc(h->x, cap * sizeof *x);                                                                     \
      if (!x) return false;                                                                                            \
      h->x = x;                                                                                                        \
      h->cap = cap;                                                                                                    \
    }                                                                                                                  \
    size_t c = h->n++;                                                                                                 \
    while (c > 0) { /* the parent moves down while the item is strictly smaller */                                     \
      const size_t p = (c + 1) / 2 - 1;                                                                                \
      if (!(it.key < h->k[p])) break;                                                                                  \
      h->k[c] = h->k[p];                                                                                               \
      h->x[c] = h->x[p];                                                                                               \
      c = p;                                                                                                           \
    }                                                                                                                  \
    h->k[c] = it.key;                                                                                                  \
    h->x[c] = it.index;                                                                                                \
    return true;                                                                                                       \
  }                                                                                                                    \
                                                                                                                       \
  static NAME##_item NAME##_pop(NAME##_heap *h) {                                                                      \
    const NAME##_item top = {h->k[0], h->x[0]};                                                                        \
    const size_t n = --h->n;                                                                                           \
    if (n == 0) return top;                                                                                            \
    KEY_T *k = h->k;                                                                                                   \
    INDEX_T *x = h->x;                                                                                                 \
    const KEY_T lk = k[n];                                                                                             \
    const INDEX_T lx = x[n];                                                                                           \
    size_t i = 0;                                                                                                      \
    if ((lk & NAME##_age_mask) != 0) {                                                                                 \
      /* a key no other item has: the hole goes down the smaller children to                                       \
       * the bottom and the last item comes back up (one comparison a level;                                       \
       * the same final places as the sift-down below, ties being impossible) */   \
      for (;;) {                                                                                                       \
        const size_t l = 2 * i + 1;                                                                                    \
        if (l + 1 >= n) {                                                                                              \
          if (l + 1 == n) { /* a lone left child */                                                                    \
            k[i] = k[l];                                                                                               \
            x[i] = x[l];                                                                                               \
            i = l;                                                                                                     \
          }                                                                                                            \
          break;                                                                                                       \
        }                                                                                                              \
        __builtin_prefetch(&k[4 * i + 3]);                                                                             \
        const size_t s = l + (k[l + 1] < k[l]);                                                                        \
        k[i] = k[s];                                                                                                   \
        x[i] = x[s];                                                                                                   \
        i = s;                                                                                                         \
      }                                                                                                                \
      while (i > 0) {                                                                                                  \
        const size_t p = (i - 1) / 2;                                                                                  \
        if (!(lk < k[p])) break;                                                                                       \
        k[i] = k[p];                                                                                                   \
        x[i] = x[p];                                                                                                   \
        i = p;                                                                                                         \
      }                                                                                                                \
    } else {                                                                                                           \
      /* an age-0 marker may tie: scikit-image's sift-down exactly; the                                             \
       * smaller child (the left one on ties) moves up while strictly smaller */  \
      for (;;) {                                                                                                       \
        const size_t l = 2 * i + 1;                                                                                    \
        if (l >= n) break;                                                                                             \
        const size_t s = l + 1 < n ? l + (k[l + 1] < k[l]) : l;                                                        \
        if (!(k[s] < lk)) break;                                                                                       \
        k[i] = k[s];                                                                                                   \
        x[i] = x[s];                                                                                                   \
        i = s;                                                                                                         \
      }                                                                                                                \
    }                                                                                                                  \
    k[i] = lk;                                                                                                         \
    x[i] = lx;                                                                                                         \
    return top;                                                                                                        \
  }                                                                                                                    \
                                                                                                                       \
  static accel_status NAME(cell *c, const int64_t nb[6], const uint64_t *seeds, uint64_t nseeds, bool stable,          \
                           uint64_t total, accel_progress_fn progress, void *user) {                                   \
    NAME##_heap h = {NULL, NULL, 0, 0};                                                                                \
    for (uint64_t k = 0; k < nseeds; k++) {                                                                            \
      const uint64_t i = seeds[k];                                                                                     \
      const NAME##_item it = {((KEY_T)c[i].vk << AGE_SHIFT) | (KEY_T)(stable ? k : 0), (INDEX_T)i};                    \
      if (!NAME##_push(&h, it)) goto oom;                                                                              \
    }                                                                                                                  \
    uint64_t age = stable ? nseeds : 1, popped = 0;                                                                    \
    while (h.n) {                                                                                                      \
      const NAME##_item e = NAME##_pop(&h);                                                                            \
      if (h.n) { /* the next voxel's neighbours, fetched while this one is done */                                     \
        const uint64_t nx = h.x[0];                                                                                    \
        for (int k = 0; k < 6; k++) __builtin_prefetch(&c[(uint64_t)((int64_t)nx + nb[k])]);                           \
      }                                                                                                                \
      const int32_t l = c[e.index].lab;                                                                                \
      for (int k = 0; k < 6; k++) {                                                                                    \
        const uint64_t j = (uint64_t)((int64_t)e.index + nb[k]);                                                       \
        if (c[j].lab != 0) continue; /* outside the mask, or labelled */                                               \
        c[j].lab = l;                                                                                                  \
        const NAME##_item it = {((KEY_T)c[j].vk << AGE_SHIFT) | (KEY_T)(++age), (INDEX_T)j};                           \
        if (!NAME##_push(&h, it)) goto oom;                                                                            \
      }                                                                                                                \
      if (progress && (++popped & 0xfffff) == 0 && progress(user, "ct.watershed", (double)popped / (double)total)) {   \
        NAME##_free(&h);                                                                                               \
        return ACCEL_ERR_CANCELLED;                                                                                    \
      }                                                                                                                \
    }                                                                                                                  \
    NAME##_free(&h);                                                                                                   \
    return ACCEL_OK;                                                                                                   \
  oom:                                                                                                                 \
    NAME##_free(&h);                                                                                                   \
    return ACCEL_ERR_OUT_OF_MEMORY;                                                                                    \
  }

DEFINE_FLOOD(flood64, uint64_t, 32, uint32_t)
DEFINE_FLOOD(flood128, u128, 64, uint64_t)

/* ------------------------------------------------------------ sparse masks
 *
 * When the mask covers little of the volume, the padded copy would cost more
 * than the flood: the flood then works in the caller's arrays (labels, mask,
 * image), finding a popped voxel's position by two divisions done as
 * multiplications. Same heap, same order, same result. */

typedef struct divider {
  uint64_t m;
  unsigned s;
} divider;

/* q = (i * m) >> s equals i / d for every i < 2^32. */
static divider make_divider(uint64_t d) {
  unsigned l = 0;
  while (((uint64_t)1 << l) < d) l++;
  divider v = {(uint64_t)((((u128)1) << (32 + l)) / d + 1), 32 + l};
  return v;
}

static inline uint64_t divide(uint64_t i, divider v) { return (uint64_t)(((u128)i * v.m) >> v.s); }

static accel_status flood_direct(const float *image, const uint8_t *mask, accel__dims d, int32_t *lab,
                                 const uint32_t *seeds, uint64_t nseeds, bool stable, uint64_t total,
                                 accel_progress_fn progress, void *user) {
  flood64_heap h = {NULL, NULL, 0, 0};
  const divider dx = make_divider((uint64_t)d.nx), dy = make_divider((uint64_t)d.ny);
  const int64_t plane = d.ny * d.nx;
  for (uint64_t k = 0; k < nseeds; k++) {
    const flood64_item it = {((uint64_t)value_key(image[seeds[k]]) << 32) | (stable ? k : 0), seeds[k]};
    if (!flood64_push(&h, it)) goto oom;
  }
  uint64_t age = stable ? nseeds : 1, popped = 0;
  while (h.n) {
    const flood64_item e = flood64_pop(&h);
    if (h.n) { /* the next voxel's neighbourhood, fetched while this one is done */
      const uint64_t nx = h.x[0];
      __builtin_prefetch(&lab[nx]);
      __builtin_prefetch(&mask[nx]);
      if (nx >= (uint64_t)plane) __builtin_prefetch(&lab[nx - (uint64_t)plane]);
      __builtin_prefetch(&lab[nx + (uint64_t)plane]);
    }
    const uint64_t i = e.index, q = divide(i, dx), z = divide(q, dy);
    const int64_t x = (int64_t)(i - q * (uint64_t)d.nx), y = (int64_t)(q - z * (uint64_t)d.ny);
    const int32_t l = lab[i];
    /* -z, -y, -x, +x, +y, +z, skipped at the volume's faces */
    const bool ok[6] = {z > 0, y > 0, x > 0, x + 1 < d.nx, y + 1 < d.ny, (int64_t)z + 1 < d.nz};
    const int64_t nb[6] = {-plane, -d.nx, -1, 1, d.nx, plane};
    for (int k = 0; k < 6; k++) {
      if (!ok[k]) continue;
      const uint64_t j = (uint64_t)((int64_t)i + nb[k]);
      if (!mask[j] || lab[j] != 0) continue;
      lab[j] = l;
      const flood64_item it = {((uint64_t)value_key(image[j]) << 32) | (++age), (uint32_t)j};
      if (!flood64_push(&h, it)) goto oom;
    }
    if ((++popped & 0xfffff) == 0 && progress && progress(user, "ct.watershed", (double)popped / (double)total)) {
      flood64_free(&h);
      return ACCEL_ERR_CANCELLED;
    }
  }
  flood64_free(&h);
  return ACCEL_OK;
oom:
  flood64_free(&h);
  return ACCEL_ERR_OUT_OF_MEMORY;
}

static accel_status watershed_sparse(const float *image, const uint8_t *mask, accel__dims d, accel_ct_ties ties,
                                     int32_t *labels, uint64_t inmask, accel_progress_fn progress, void *user) {
  const uint64_t n = accel__dims_count(d);
  uint64_t nseeds = 0, cap = 1024;
  uint32_t *seeds = malloc(cap * sizeof(uint32_t));
  if (!seeds) return ACCEL_ERR_OUT_OF_MEMORY;
  for (uint64_t i = 0; i < n; i++) {
    if (!labels[i]) continue;
    if (!mask[i]) { /* markers outside the mask are dropped */
      labels[i] = 0;
      continue;
    }
    if (nseeds == cap) {
      uint32_t *more = realloc(seeds, 2 * cap * sizeof(uint32_t));
      if (!more) {
        free(seeds);
        return ACCEL_ERR_OUT_OF_MEMORY;
      }
      seeds = more;
      cap *= 2;
    }
    seeds[nseeds++] = (uint32_t)i;
  }
  accel_status st =
      flood_direct(image, mask, d, labels, seeds, nseeds, ties == ACCEL_CT_TIES_STABLE, inmask, progress, user);
  free(seeds);
  return st;
}

accel_status accel__ct_watershed_cpu(const float *image, const uint8_t *mask, accel__dims d, accel_ct_ties ties,
                                     int32_t *labels, accel_progress_fn progress, void *progress_user) {
  const uint64_t n = accel__dims_count(d);
  if (mask) {
    uint64_t inmask = 0;
    for (uint64_t i = 0; i < n; i++) inmask += mask[i] != 0;
    if (inmask < n / 8 && !accel__ct_wide(2 * n)) { /* uint32 seeds and indices */
      accel_status st = watershed_sparse(image, mask, d, ties, labels, inmask, progress, progress_user);
      if (!st && progress) progress(progress_user, "ct.watershed", 1.0);
      return st;
    }
  }
  const int64_t pz = d.nz + 2, py = d.ny + 2, px = d.nx + 2;
  const uint64_t pn = (uint64_t)pz * (uint64_t)py * (uint64_t)px, pplane = (uint64_t)py * (uint64_t)px;
  cell *c = malloc(pn * sizeof(cell));
  uint64_t *seeds = NULL, nseeds = 0, cap = 1024, inmask = 0;
  accel_status st = ACCEL_OK;
  if (!c || !(seeds = malloc(cap * sizeof(uint64_t)))) goto oom;
  /* every cell written once: the padding and the voxels outside the mask
   * OUTSIDE, the others their marker and key; the seeds in C order (the
   * padded volume's C order is the volume's) */
  const cell out_cell = {OUTSIDE, 0};
  for (uint64_t i = 0; i < pplane; i++) c[i] = c[pn - pplane + i] = out_cell;
  for (int64_t z = 0; z < d.nz; z++) {
    cell *plane = c + (uint64_t)(z + 1) * pplane;
    for (int64_t x = 0; x < px; x++) plane[x] = plane[(uint64_t)(py - 1) * (uint64_t)px + (uint64_t)x] = out_cell;
    for (int64_t y = 0; y < d.ny; y++) {
      const uint64_t src = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
      const uint64_t row = (uint64_t)(z + 1) * pplane + (uint64_t)(y + 1) * (uint64_t)px;
      c[row] = c[row + (uint64_t)px - 1] = out_cell;
      for (int64_t x = 0; x < d.nx; x++) {
        cell *to = &c[row + 1 + (uint64_t)x];
        if (mask && !mask[src + (uint64_t)x]) {
          *to = out_cell;
          continue;
        }
        inmask++;
        const int32_t m = labels[src + (uint64_t)x];
        to->lab = m;
        to->vk = value_key(image[src + (uint64_t)x]);
        if (!m) continue;
        if (nseeds == cap) {
          uint64_t *more = realloc(seeds, 2 * cap * sizeof(uint64_t));
          if (!more) goto oom;
          seeds = more;
          cap *= 2;
        }
        seeds[nseeds++] = row + 1 + (uint64_t)x;
      }
    }
  }
  const int64_t nb[6] = {-py * px, -px, -1, 1, px, py * px};
  const bool stable = ties == ACCEL_CT_TIES_STABLE;
  const uint64_t max_age = (stable ? nseeds : 1) + inmask + 1;
  /* 32-bit ages and padded indices, or 64-bit ones (beyond accel__ct_index_limit) */
  st = !accel__ct_wide(max_age) && !accel__ct_wide(pn)
           ? flood64(c, nb, seeds, nseeds, stable, inmask, progress, progress_user)
           : flood128(c, nb, seeds, nseeds, stable, inmask, progress, progress_user);
  if (!st)
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++) {
        const uint64_t dst = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
        const uint64_t src = ((uint64_t)(z + 1) * (uint64_t)py + (uint64_t)(y + 1)) * (uint64_t)px + 1;
        for (int64_t x = 0; x < d.nx; x++) {
          const int32_t l = c[src + (uint64_t)x].lab;
          labels[dst + (uint64_t)x] = l == OUTSIDE ? 0 : l;
        }
      }
  if (!st && progress) progress(progress_user, "ct.watershed", 1.0);
  goto done;
oom:
  st = ACCEL_ERR_OUT_OF_MEMORY;
done:
  free(c);
  free(seeds);
  return st;
}
