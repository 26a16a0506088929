/* Multi-index hashing: the choice of substrings and radii, and the tables
 * (per substring, the entries bucketed by a key of its first bits). */
#include "index/mih.h"

#include <stdlib.h>
#include <string.h>

/* sum_{k <= radius} C(bits, k): the keys within radius of one key. */
static double volume(uint32_t bits, uint32_t radius) {
  double v = 0, c = 1;
  for (uint32_t k = 0; k <= radius && k <= bits; k++) {
    v += c;
    c = c * (double)(bits - k) / (double)(k + 1);
  }
  return v;
}

/* Masks a plan may enumerate per substring at most (memory and time). */
#define MAX_MASKS 16777216.0

/* The plan with m substrings (keys of at most `cap` bits), or false if it
 * would enumerate too many masks. */
static bool plan_for(size_t n, size_t nq, uint32_t bits, uint32_t r, uint32_t m, uint32_t cap, accel__mih_plan *p) {
  const uint32_t spare = r + 1 - m, base = spare / m, extra = spare % m;
  p->shape.m = m;
  p->visits = p->candidates = 0;
  const double dn = (double)n;
  for (uint32_t s = 0; s < m; s++) {
    const uint32_t start = (uint32_t)((uint64_t)bits * s / m), end = (uint32_t)((uint64_t)bits * (s + 1) / m);
    p->shape.start[s] = start;
    p->shape.len[s] = end - start;
    p->shape.key_bits[s] = end - start < cap ? end - start : cap;
    p->radius[s] = base + (s < extra ? 1 : 0);
    const double v = volume(p->shape.key_bits[s], p->radius[s]), keys = (double)(1ull << p->shape.key_bits[s]);
    if (v > MAX_MASKS) return false;
    if (nq) { /* per query: every key within the radius, and the entries there */
      p->visits += v;
      p->candidates += dn * v / keys;
    } else { /* every non-empty bucket against the later keys within the radius */
      p->visits += (dn < keys ? dn : keys) * (v + 1) / 2;
      p->candidates += dn * dn / 2 * v / keys;
    }
  }
  return true;
}

double accel__mih_plan_cost(const accel__mih_plan *p) {
  return p->visits * ACCEL__MIH_VISIT_COST + p->candidates * ACCEL__MIH_CANDIDATE_COST;
}

/* Candidate shapes: m from 1 to r + 1 substrings (at most one a bit), keys
 * of about log2 n bits (a dense bucket table) or a little shorter. */
void accel__mih_choose(size_t n, size_t nq, uint32_t bits, uint32_t r, accel__mih_plan *plan) {
  uint32_t lg = 1;
  while (lg < ACCEL__MIH_MAX_KEY_BITS && ((size_t)1 << lg) < n) lg++;
  uint32_t top = r + 1 < bits ? r + 1 : bits;
  if (top > ACCEL__MIH_MAX_M - 1) top = ACCEL__MIH_MAX_M - 1;
  accel__mih_plan *p = malloc(sizeof *p);
  double best = -1;
  for (uint32_t m = top; m >= 1 && p; m--)
    for (uint32_t cap = lg > 2 ? lg - 2 : 1; cap <= lg; cap++) {
      if (!plan_for(n, nq ? nq : 0, bits, r, m, cap, p)) continue;
      const double cost = accel__mih_plan_cost(p) * (nq ? (double)nq : 1.0);
      if (best < 0 || cost < best) {
        best = cost;
        *plan = *p;
      }
    }
  if (best < 0) /* out of memory for the scratch plan: exact matches of r + 1 substrings */
    plan_for(n, nq, bits, r, top, lg, plan);
  free(p);
}

uint32_t *accel__mih_masks(uint32_t key_bits, uint32_t radius, size_t *count) {
  if (radius > key_bits) radius = key_bits;
  const size_t total = (size_t)volume(key_bits, radius) - 1;
  uint32_t *m = malloc((total ? total : 1) * sizeof(uint32_t));
  if (!m) return NULL;
  size_t k = 0;
  for (uint32_t w = 1; w <= radius; w++) /* every w-bit mask in increasing order (Gosper's hack) */
    for (uint64_t v = (1ull << w) - 1; v < (1ull << key_bits);) {
      m[k++] = (uint32_t)v;
      const uint64_t t = v | (v - 1);
      v = (t + 1) | (((~t & (t + 1)) - 1) >> (__builtin_ctzll(v) + 1));
    }
  *count = k;
  return m;
}

/* Substring s: entries counting-sorted by key (stable, so positions ascend
 * within a bucket); keys is scratch of n entries. */
static void bucket_substring(const accel__codes *c, accel__mih_table *t, uint32_t s, uint32_t *keys) {
  const size_t n = c->n, nkeys = (size_t)1 << t->shape.key_bits[s];
  uint32_t *off = t->offsets + t->offset_at[s], *o = t->order + s * n;
  memset(off, 0, (nkeys + 1) * sizeof(uint32_t));
  for (size_t i = 0; i < n; i++) {
    keys[i] = (uint32_t)accel__substring(c, t->field, i, t->shape.start[s], t->shape.key_bits[s]);
    off[keys[i] + 1]++;
  }
  for (size_t k = 0; k < nkeys; k++) off[k + 1] += off[k];
  for (size_t i = 0; i < n; i++) o[off[keys[i]]++] = (uint32_t)i; /* off[k]: now the end of bucket k */
  memmove(off + 1, off, nkeys * sizeof(uint32_t));
  off[0] = 0;
  if (t->codes) {
    uint64_t *cs = t->codes + s * n;
    for (size_t x = 0; x < n; x++) cs[x] = c->field[t->field][o[x]];
  }
}

accel_status accel__mih_build(const accel__codes *c, uint32_t f, uint32_t bits, const accel__mih_shape *shape,
                              int threads, accel__mih_table **out) {
  (void)threads; /* read by OpenMP pragmas only */
  accel__mih_table *t = calloc(1, sizeof *t);
  if (!t) return ACCEL_ERR_OUT_OF_MEMORY;
  t->field = f;
  t->bits = bits;
  t->words = c->words;
  t->shape = *shape;
  t->n = c->n;
  const uint32_t m = shape->m;
  size_t total = 0;
  for (uint32_t s = 0; s < m; s++) {
    t->offset_at[s] = total;
    total += ((size_t)1 << shape->key_bits[s]) + 1;
  }
  const size_t n = c->n ? c->n : 1;
  t->offsets = malloc(total * sizeof(uint32_t));
  t->order = malloc((size_t)m * n * sizeof(uint32_t));
  t->codes = c->words == 1 ? malloc((size_t)m * n * sizeof(uint64_t)) : NULL;
  if (!t->offsets || !t->order || (c->words == 1 && !t->codes)) {
    accel__mih_free(t);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  int failed = 0;
#pragma omp parallel num_threads(threads)
  {
    uint32_t *keys = malloc(n * sizeof(uint32_t));
    if (!keys) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 1)
    for (int s = 0; s < (int)m; s++)
      if (keys) bucket_substring(c, t, (uint32_t)s, keys);
    free(keys);
  }
  if (failed) accel__mih_free(t);
  else *out = t;
  return failed ? ACCEL_ERR_OUT_OF_MEMORY : ACCEL_OK;
}

void accel__mih_free(accel__mih_table *t) {
  if (!t) return;
  free(t->offsets);
  free(t->order);
  free(t->codes);
  free(t);
}

static bool shape_equal(const accel__mih_shape *a, const accel__mih_shape *b) {
  if (a->m != b->m) return false;
  for (uint32_t s = 0; s < a->m; s++)
    if (a->start[s] != b->start[s] || a->len[s] != b->len[s] || a->key_bits[s] != b->key_bits[s]) return false;
  return true;
}

accel_status accel__mih_get(accel_index *ix, uint32_t f, const accel__mih_shape *shape, int threads,
                            const accel__mih_table **out) {
  accel_status s = ACCEL_OK;
  pthread_mutex_lock(&ix->mu);
  accel__mih_table *t = ix->mih[f];
  while (t && !shape_equal(&t->shape, shape)) t = t->next;
  if (!t) { /* tables stay until the index changes: concurrent searches may be reading them */
    accel__codes c = accel__index_codes(ix);
    s = accel__mih_build(&c, f, ix->bits, shape, threads, &t);
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
