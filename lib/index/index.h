/* lib/index/index.h - the index's layout and search internals (internal). */
#ifndef ACCEL_INDEX_INTERNAL_H
#define ACCEL_INDEX_INTERNAL_H

#include "core/internal.h"

#include "accel/index.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codes are stored word-major per field: word w of entry i of field f at
 * codes[f][w * cap + i], so consecutive entries' words are contiguous (SIMD
 * loads 8 of them at once). Positions are uint32: at most 2^32 - 1 entries. */
struct accel_index {
  accel_ctx *ctx;
  uint32_t bits, words, nfields;
  size_t n, cap;
  uint64_t *ids;
  uint64_t *codes[ACCEL_INDEX_MAX_FIELDS];
  uint64_t *stamps;
  char **labels;
  /* id -> position + 1 (0: empty), linear probing, backward-shift deletion */
  uint64_t *map_ids, *map_pos;
  size_t map_cap;
  char *meta;
  /* multi-index tables cached between searches (rebuilt after changes) */
  pthread_mutex_t mu;
  struct accel__mih_table *mih[ACCEL_INDEX_MAX_FIELDS];
  uint64_t version; /* bumped by every change */
};

/* A read-only view of the codes for a search: the index's, or queries
 * converted to the same word-major layout. */
typedef struct accel__codes {
  uint32_t words, nfields;
  size_t n, stride; /* stride: the word-major row length (cap) */
  const uint64_t *field[ACCEL_INDEX_MAX_FIELDS];
} accel__codes;

/* What a search asks for. */
typedef struct accel__search {
  accel_index_rule rule;
  uint32_t thresholds[ACCEL_INDEX_MAX_FIELDS];
  accel_index_algorithm algorithm;
} accel__search;

/* Receives pairs of positions (thread safe: ops may call it from any of
 * their threads). For a join a < b; for a range search a = query number. */
typedef struct accel__pair_sink {
  void (*emit)(struct accel__pair_sink *sink, const uint32_t *a, const uint32_t *b, size_t n);
  void *user;
} accel__pair_sink;

/* Per-thread buffering of pairs before the sink. */
typedef struct accel__pair_buf {
  uint32_t a[4096], b[4096];
  size_t n;
  accel__pair_sink *sink;
} accel__pair_buf;

static inline void accel__pair_push(accel__pair_buf *pb, uint32_t a, uint32_t b) {
  pb->a[pb->n] = a;
  pb->b[pb->n] = b;
  if (++pb->n == 4096) {
    pb->sink->emit(pb->sink, pb->a, pb->b, pb->n);
    pb->n = 0;
  }
}

static inline void accel__pair_flush(accel__pair_buf *pb) {
  if (pb->n) pb->sink->emit(pb->sink, pb->a, pb->b, pb->n);
  pb->n = 0;
}

accel__codes accel__index_codes(const accel_index *index);
/* Queries given as [nq][nfields][words] to the word-major layout (malloc'd;
 * the view points into *storage, which the caller frees). */
accel_status accel__codes_from_rows(const uint64_t *rows, size_t nq, uint32_t nfields, uint32_t words,
                                    accel__codes *view, uint64_t **storage);

/* Distance of field f between entry i of x and entry j of y. */
static inline uint32_t accel__field_distance(const accel__codes *x, size_t i, const accel__codes *y, size_t j,
                                             uint32_t f) {
  uint32_t d = 0;
  for (uint32_t w = 0; w < x->words; w++)
    d += (uint32_t)__builtin_popcountll(x->field[f][w * x->stride + i] ^ y->field[f][w * y->stride + j]);
  return d;
}

/* True if the pair satisfies the thresholds under the rule. */
static inline bool accel__pair_matches(const accel__codes *x, size_t i, const accel__codes *y, size_t j,
                                       const accel__search *s) {
  for (uint32_t f = 0; f < x->nfields; f++) {
    const bool within = accel__field_distance(x, i, y, j, f) <= s->thresholds[f];
    if (s->rule == ACCEL_INDEX_ANY && within) return true;
    if (s->rule == ACCEL_INDEX_ALL && !within) return false;
  }
  return s->rule == ACCEL_INDEX_ALL;
}

/* A k-nearest candidate: an entry's distance and id. */
typedef struct accel__knn_cand {
  uint32_t d;
  uint64_t id;
} accel__knn_cand;

/* Order n candidates by (distance, id) and write the first k to ids and
 * distances (distances may be NULL); past n: UINT64_MAX and UINT32_MAX. */
void accel__knn_emit(accel__knn_cand *c, size_t n, uint32_t k, uint64_t *ids, uint32_t *distances);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_INDEX_INTERNAL_H */
