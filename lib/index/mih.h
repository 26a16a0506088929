/*
 * lib/index/mih.h - multi-index hashing tables (internal).
 *
 * A field's codes are cut into m contiguous substrings and substring s is
 * searched within a radius r_s, the radii summing to r - m + 1 (m <= r + 1).
 * Two codes within Hamming distance r then lie within r_s on at least one
 * substring s: were every substring distance at least r_s + 1, the distance
 * would be at least sum (r_s + 1) = r + 1 (the generalised pigeonhole of
 * Norouzi, Punjani and Fleet's multi-index hashing). With m = r + 1 every
 * radius is 0 (exact substring matches); fewer, longer substrings searched by
 * enumerating bit flips keep the buckets small as the set grows.
 *
 * Per substring, the entries are bucketed (counting sort) by the first
 * key_bits bits of the substring, key_bits <= log2 n or so, so that the
 * bucket table is dense. A pair is reported only from the FIRST substring on
 * which the two codes lie within its radius (tested on their XOR), so every
 * pair is reported once without a set of seen pairs.
 */
#ifndef ACCEL_INDEX_MIH_H
#define ACCEL_INDEX_MIH_H

#include "index/index.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ACCEL__MIH_MAX_M = 257, ACCEL__MIH_MAX_KEY_BITS = 30 };

/* How a table cuts the codes: substring s is bits [start, start + len) and
 * its buckets are keyed by the first key_bits (<= len) of them. */
typedef struct accel__mih_shape {
  uint32_t m;
  uint32_t start[ACCEL__MIH_MAX_M], len[ACCEL__MIH_MAX_M], key_bits[ACCEL__MIH_MAX_M];
} accel__mih_shape;

/* A search plan: the table's shape and the radius of every substring. */
typedef struct accel__mih_plan {
  accel__mih_shape shape;
  uint32_t radius[ACCEL__MIH_MAX_M];
  double visits, candidates; /* expected on uniform codes (join: pairs; range: per query) */
} accel__mih_plan;

typedef struct accel__mih_table {
  uint32_t field, bits, words;
  accel__mih_shape shape;
  size_t n;
  uint32_t *offsets;                  /* substring s: 2^key_bits + 1 bucket starts at offsets + offset_at[s] */
  size_t offset_at[ACCEL__MIH_MAX_M]; /* where each substring's bucket starts begin */
  uint32_t *order;                    /* [m][n]: positions in bucket order (ascending within a bucket) */
  uint64_t *codes;                    /* [m][n]: the field's code in bucket order (one-word codes), or NULL */
  struct accel__mih_table *next;      /* the index keeps one table per (field, shape) in a list */
} accel__mih_table;

/* Expected cost of one plan relative to a brute-force comparison of two
 * one-word codes: a visited bucket (a random memory access) and a candidate
 * (a pair of codes examined), with the bucketing and the exact count that
 * precede the search spread over them. */
enum { ACCEL__MIH_VISIT_COST = 160, ACCEL__MIH_CANDIDATE_COST = 80 };

/* The cheapest plan for threshold r on `bits`-bit codes over n entries,
 * for a self-join (nq = 0) or nq range queries, on uniform codes. Always
 * succeeds for bits >= 1. */
void accel__mih_choose(size_t n, size_t nq, uint32_t bits, uint32_t r, accel__mih_plan *plan);
/* Its cost in brute-force comparisons (join: all pairs; range: all queries). */
double accel__mih_plan_cost(const accel__mih_plan *plan);

/* The masks of weight 1..radius on key_bits bits (malloc'd; *count of them),
 * or NULL when out of memory. */
uint32_t *accel__mih_masks(uint32_t key_bits, uint32_t radius, size_t *count);

/* Bits [start, start + len) of a code given as words (bit 0 = the first
 * word's MSB), 1 <= len <= 64. */
static inline uint64_t accel__words_substring(const uint64_t *w, uint32_t start, uint32_t len) {
  const uint32_t k = start / 64, off = start % 64;
  uint64_t v = w[k] << off;
  if (off + len > 64) v |= w[k + 1] >> (64 - off);
  return len == 64 ? v : v >> (64 - len);
}

/* Set bits among bits [start, start + len) of a code given as words. */
static inline uint32_t accel__words_popcount(const uint64_t *w, uint32_t start, uint32_t len) {
  uint32_t d = 0;
  while (len) {
    const uint32_t off = start % 64, take = 64 - off < len ? 64 - off : len;
    uint64_t v = w[start / 64] << off;
    if (take < 64) v >>= 64 - take;
    d += (uint32_t)__builtin_popcountll(v);
    start += take;
    len -= take;
  }
  return d;
}

/* Substring [start, start + len) of entry i (bit 0 = the first word's MSB). */
static inline uint64_t accel__substring(const accel__codes *c, uint32_t f, size_t i, uint32_t start, uint32_t len) {
  const uint32_t w = start / 64, off = start % 64;
  uint64_t v = c->field[f][w * c->stride + i] << off;
  if (off + len > 64) v |= c->field[f][(w + 1) * c->stride + i] >> (64 - off);
  return len == 64 ? v : v >> (64 - len);
}

/* Build a table of field f with the given shape (threads for bucketing). */
accel_status accel__mih_build(const accel__codes *c, uint32_t f, uint32_t bits, const accel__mih_shape *shape,
                              int threads, accel__mih_table **out);
void accel__mih_free(accel__mih_table *t);

/* The index's cached table for (field, shape), built if needed (thread safe). */
accel_status accel__mih_get(accel_index *index, uint32_t f, const accel__mih_shape *shape, int threads,
                            const accel__mih_table **out);
/* Drop cached tables (the index changed). */
void accel__mih_invalidate(accel_index *index);

#ifdef __cplusplus
}
#endif

#endif
