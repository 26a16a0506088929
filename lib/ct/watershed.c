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
 * gives the same flood, as the GPU does.
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

/* The flood over padded arrays: lab[] is OUTSIDE outside the mask (and in
 * the one-voxel padding), 0 unlabelled, else a label; vk[] the value keys. */
#define OUTSIDE INT32_MIN
#define DEFINE_FLOOD(NAME, KEY_T, AGE_SHIFT)                                                                           \
  typedef struct NAME##_item {                                                                                         \
    KEY_T key;                                                                                                         \
    uint64_t index;                                                                                                    \
  } NAME##_item;                                                                                                       \
                                                                                                                       \
  typedef struct NAME##_heap {                                                                                         \
    NAME##_item *a;                                                                                                    \
    size_t n, cap;                                                                                                     \
  } NAME##_heap;                                                                                                       \
                                                                                                                       \
  static bool NAME##_push(NAME##_heap *h, NAME##_item it) {                                                            \
    if (h->n == h->cap) {                                                                                              \
      size_t cap = h->cap ? h->cap * 2 : 4096;                                                                         \
      NAME##_item *a = realloc(h->a, cap * sizeof *a);                                                                 \
      if (!a) return false;                                                                                            \
      h->a = a;                                                                                                        \
      h->cap = cap;                                                                                                    \
    }                                                                                                                  \
    size_t c = h->n++;                                                                                                 \
    while (c > 0) { /* the parent moves down while the item is strictly smaller */                                   \
      const size_t p = (c + 1) / 2 - 1;                                                                                \
      if (!(it.key < h->a[p].key)) break;                                                                              \
      h->a[c] = h->a[p];                                                                                               \
      c = p;                                                                                                           \
    }                                                                                                                  \
    h->a[c] = it;                                                                                                      \
    return true;                                                                                                       \
  }                                                                                                                    \
                                                                                                                       \
  static NAME##_item NAME##_pop(NAME##_heap *h) {                                                                      \
    const NAME##_item top = h->a[0];                                                                                   \
    const size_t n = --h->n;                                                                                           \
    if (n == 0) return top;                                                                                            \
    const NAME##_item last = h->a[n];                                                                                  \
    size_t i = 0;                                                                                                      \
    for (;;) { /* smallest of (last, left, right), left first on ties */                                             \
      const size_t l = 2 * i + 1, r = l + 1;                                                                           \
      if (l >= n) break;                                                                                               \
      size_t s = i;                                                                                                    \
      KEY_T sk = last.key;                                                                                             \
      if (h->a[l].key < sk) {                                                                                          \
        s = l;                                                                                                         \
        sk = h->a[l].key;                                                                                              \
      }                                                                                                                \
      if (r < n && h->a[r].key < sk) s = r;                                                                            \
      if (s == i) break;                                                                                               \
      h->a[i] = h->a[s];                                                                                               \
      i = s;                                                                                                           \
    }                                                                                                                  \
    h->a[i] = last;                                                                                                    \
    return top;                                                                                                        \
  }                                                                                                                    \
                                                                                                                       \
  static accel_status NAME(const uint32_t *vk, int32_t *lab, const int64_t nb[6], const uint64_t *seeds,              \
                           uint64_t nseeds, bool stable, uint64_t total, accel_progress_fn progress, void *user) {    \
    NAME##_heap h = {NULL, 0, 0};                                                                                      \
    for (uint64_t k = 0; k < nseeds; k++) {                                                                            \
      const uint64_t i = seeds[k];                                                                                     \
      const NAME##_item it = {((KEY_T)vk[i] << AGE_SHIFT) | (KEY_T)(stable ? k : 0), i};                               \
      if (!NAME##_push(&h, it)) goto oom;                                                                              \
    }                                                                                                                  \
    uint64_t age = stable ? nseeds : 1, popped = 0;                                                                    \
    while (h.n) {                                                                                                      \
      const NAME##_item e = NAME##_pop(&h);                                                                            \
      const int32_t l = lab[e.index];                                                                                  \
      for (int k = 0; k < 6; k++) {                                                                                    \
        const uint64_t j = (uint64_t)((int64_t)e.index + nb[k]);                                                       \
        if (lab[j] != 0) continue; /* outside the mask, or labelled */                                               \
        lab[j] = l;                                                                                                    \
        const NAME##_item it = {((KEY_T)vk[j] << AGE_SHIFT) | (KEY_T)(++age), j};                                      \
        if (!NAME##_push(&h, it)) goto oom;                                                                            \
      }                                                                                                                \
      if (progress && (++popped & 0xfffff) == 0 && progress(user, "ct.watershed", (double)popped / (double)total)) {  \
        free(h.a);                                                                                                     \
        return ACCEL_ERR_CANCELLED;                                                                                    \
      }                                                                                                                \
    }                                                                                                                  \
    free(h.a);                                                                                                         \
    return ACCEL_OK;                                                                                                   \
  oom:                                                                                                                 \
    free(h.a);                                                                                                         \
    return ACCEL_ERR_OUT_OF_MEMORY;                                                                                    \
  }

DEFINE_FLOOD(flood64, uint64_t, 32)
DEFINE_FLOOD(flood128, u128, 64)

accel_status accel__ct_watershed_cpu(const float *image, const uint8_t *mask, accel__dims d, accel_ct_ties ties,
                                     int32_t *labels, accel_progress_fn progress, void *progress_user) {
  const int64_t pz = d.nz + 2, py = d.ny + 2, px = d.nx + 2;
  const uint64_t pn = (uint64_t)pz * (uint64_t)py * (uint64_t)px;
  uint32_t *vk = malloc(pn * sizeof(uint32_t));
  int32_t *lab = malloc(pn * sizeof(int32_t));
  uint64_t *seeds = NULL, nseeds = 0, inmask = 0;
  accel_status st = ACCEL_OK;
  if (!vk || !lab) goto oom;
  for (uint64_t i = 0; i < pn; i++) lab[i] = OUTSIDE;
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++) {
      const uint64_t src = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
      const uint64_t dst = ((uint64_t)(z + 1) * (uint64_t)py + (uint64_t)(y + 1)) * (uint64_t)px + 1;
      for (int64_t x = 0; x < d.nx; x++) {
        vk[dst + (uint64_t)x] = value_key(image[src + (uint64_t)x]);
        if (mask && !mask[src + (uint64_t)x]) continue;
        inmask++;
        const int32_t m = labels[src + (uint64_t)x];
        lab[dst + (uint64_t)x] = m;
        if (m) nseeds++;
      }
    }
  seeds = malloc((nseeds ? nseeds : 1) * sizeof(uint64_t));
  if (!seeds) goto oom;
  nseeds = 0;
  for (uint64_t i = 0; i < pn; i++) /* C order of the padded volume = C order of the volume */
    if (lab[i] != 0 && lab[i] != OUTSIDE) seeds[nseeds++] = i;
  const int64_t nb[6] = {-py * px, -px, -1, 1, px, py * px};
  const bool stable = ties == ACCEL_CT_TIES_STABLE;
  const uint64_t max_age = (stable ? nseeds : 1) + inmask + 1;
  st = max_age < ((uint64_t)1 << 32)
           ? flood64(vk, lab, nb, seeds, nseeds, stable, inmask, progress, progress_user)
           : flood128(vk, lab, nb, seeds, nseeds, stable, inmask, progress, progress_user);
  if (!st)
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++) {
        const uint64_t dst = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
        const uint64_t src = ((uint64_t)(z + 1) * (uint64_t)py + (uint64_t)(y + 1)) * (uint64_t)px + 1;
        for (int64_t x = 0; x < d.nx; x++) {
          const int32_t l = lab[src + (uint64_t)x];
          labels[dst + (uint64_t)x] = l == OUTSIDE ? 0 : l;
        }
      }
  if (!st && progress) progress(progress_user, "ct.watershed", 1.0);
  goto done;
oom:
  st = ACCEL_ERR_OUT_OF_MEMORY;
done:
  free(vk);
  free(lab);
  free(seeds);
  return st;
}
