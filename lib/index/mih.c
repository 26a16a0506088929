/* Multi-index hashing tables: per substring, the entries sorted by it. */
#include "index/mih.h"

#include <stdlib.h>
#include <string.h>

uint32_t accel__mih_substrings(uint32_t bits, uint32_t r) {
  uint32_t m = r + 1, min_m = (bits + 63) / 64;
  if (m < min_m) m = min_m;
  return m <= bits && m <= ACCEL__MIH_MAX_M ? m : 0;
}

/* LSD radix sort of positions by key, 8 bits a pass over the key's `len` bits. */
static bool radix_sort(const uint64_t *keys, size_t n, uint32_t len, uint32_t *order) {
  uint32_t *tmp = malloc((n ? n : 1) * sizeof(uint32_t));
  if (!tmp) return false;
  for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
  uint32_t *src = order, *dst = tmp;
  const uint32_t passes = (len + 7) / 8;
  for (uint32_t p = 0; p < passes; p++) {
    size_t count[257] = {0};
    const uint32_t shift = 8 * p;
    for (size_t i = 0; i < n; i++) count[((keys[src[i]] >> shift) & 0xff) + 1]++;
    for (int b = 0; b < 256; b++) count[b + 1] += count[b];
    for (size_t i = 0; i < n; i++) dst[count[(keys[src[i]] >> shift) & 0xff]++] = src[i];
    uint32_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != order) memcpy(order, src, n * sizeof(uint32_t));
  free(tmp);
  return true;
}

accel_status accel__mih_build(const accel__codes *c, uint32_t f, uint32_t bits, uint32_t m, int threads,
                              accel__mih_table **out) {
  (void)threads; /* read by OpenMP pragmas only */
  accel__mih_table *t = calloc(1, sizeof *t);
  if (!t) return ACCEL_ERR_OUT_OF_MEMORY;
  t->field = f;
  t->m = m;
  t->bits = bits;
  t->n = c->n;
  for (uint32_t s = 0; s < m; s++) { /* nearly equal contiguous substrings */
    t->start[s] = (uint32_t)((uint64_t)bits * s / m);
    t->len[s] = (uint32_t)((uint64_t)bits * (s + 1) / m) - t->start[s];
  }
  const size_t n = c->n ? c->n : 1;
  t->order = malloc((size_t)m * n * sizeof(uint32_t));
  t->sorted_keys = malloc((size_t)m * n * sizeof(uint64_t));
  if (!t->order || !t->sorted_keys) {
    accel__mih_free(t);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  int failed = 0;
#pragma omp parallel num_threads(threads)
  {
    uint64_t *k = malloc(n * sizeof(uint64_t)); /* this substring of every entry, by position */
    if (!k) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 1)
    for (int s = 0; s < (int)m; s++) {
      if (!k) continue;
      for (size_t i = 0; i < c->n; i++) k[i] = accel__substring(c, f, i, t->start[s], t->len[s]);
      uint32_t *o = t->order + (size_t)s * n;
      if (!radix_sort(k, c->n, t->len[s], o)) {
        __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
        continue;
      }
      uint64_t *sk = t->sorted_keys + (size_t)s * n;
      for (size_t i = 0; i < c->n; i++) sk[i] = k[o[i]];
    }
    free(k);
  }
  if (failed) accel__mih_free(t);
  else *out = t;
  return failed ? ACCEL_ERR_OUT_OF_MEMORY : ACCEL_OK;
}

void accel__mih_free(accel__mih_table *t) {
  if (!t) return;
  free(t->order);
  free(t->sorted_keys);
  free(t);
}

accel_status accel__mih_get(accel_index *ix, uint32_t f, uint32_t m, int threads, const accel__mih_table **out) {
  accel_status s = ACCEL_OK;
  pthread_mutex_lock(&ix->mu);
  accel__mih_table *t = ix->mih[f];
  while (t && t->m != m) t = t->next;
  if (!t) { /* tables stay until the index changes: concurrent searches may be reading them */
    accel__codes c = accel__index_codes(ix);
    s = accel__mih_build(&c, f, ix->bits, m, threads, &t);
    if (!s) {
      t->next = ix->mih[f];
      ix->mih[f] = t;
    }
  }
  pthread_mutex_unlock(&ix->mu);
  *out = t;
  return s;
}

void accel__mih_invalidate(accel_index *ix) {
  pthread_mutex_lock(&ix->mu);
  for (uint32_t f = 0; f < ACCEL_INDEX_MAX_FIELDS; f++) {
    while (ix->mih[f]) {
      accel__mih_table *next = ix->mih[f]->next;
      accel__mih_free(ix->mih[f]);
      ix->mih[f] = next;
    }
  }
  pthread_mutex_unlock(&ix->mu);
}
