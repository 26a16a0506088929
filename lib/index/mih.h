/*
 * lib/index/mih.h - multi-index hashing tables (internal).
 *
 * A field's codes are cut into m contiguous substrings (m >= r + 1, and at
 * least one per 64 bits so that a substring fits a uint64). Two codes within
 * Hamming distance r differ in at most r substrings, so at least one of the
 * m substrings is identical (pigeonhole): only codes that share a substring
 * need comparing. Per substring, the entries sorted by its value form runs of
 * equal values; a pair is examined only at the FIRST substring the two codes
 * share, so every pair is examined once without a set of seen pairs.
 */
#ifndef ACCEL_INDEX_MIH_H
#define ACCEL_INDEX_MIH_H

#include "index/index.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ACCEL__MIH_MAX_M = 257 };

typedef struct accel__mih_table {
  uint32_t field, m, bits;
  size_t n;
  uint32_t start[ACCEL__MIH_MAX_M], len[ACCEL__MIH_MAX_M];
  uint32_t *order;               /* [m][n]: positions sorted by substring s */
  uint64_t *sorted_keys;         /* [m][n]: substring s of entry order[s][k] */
  struct accel__mih_table *next; /* the index keeps one table per (field, m) in a list */
} accel__mih_table;

/* The number of substrings multi-index hashing uses for threshold r on
 * `bits`-bit codes, or 0 if it cannot (r + 1 > bits). */
uint32_t accel__mih_substrings(uint32_t bits, uint32_t r);

/* Bits [start, start + len) of a code given as words (bit 0 = the first
 * word's MSB), 1 <= len <= 64. */
static inline uint64_t accel__words_substring(const uint64_t *w, uint32_t start, uint32_t len) {
  const uint32_t k = start / 64, off = start % 64;
  uint64_t v = w[k] << off;
  if (off + len > 64) v |= w[k + 1] >> (64 - off);
  return len == 64 ? v : v >> (64 - len);
}

/* Substring [start, start + len) of entry i (bit 0 = the first word's MSB). */
static inline uint64_t accel__substring(const accel__codes *c, uint32_t f, size_t i, uint32_t start, uint32_t len) {
  const uint32_t w = start / 64, off = start % 64;
  uint64_t v = c->field[f][w * c->stride + i] << off;
  if (off + len > 64) v |= c->field[f][(w + 1) * c->stride + i] >> (64 - off);
  return len == 64 ? v : v >> (64 - len);
}

/* Build a table for field f with m substrings (threads for sorting). */
accel_status accel__mih_build(const accel__codes *c, uint32_t f, uint32_t bits, uint32_t m, int threads,
                              accel__mih_table **out);
void accel__mih_free(accel__mih_table *t);

/* The index's cached table for (field, m), built if needed (thread safe). */
accel_status accel__mih_get(accel_index *index, uint32_t f, uint32_t m, int threads, const accel__mih_table **out);
/* Drop cached tables (the index changed). */
void accel__mih_invalidate(accel_index *index);

#ifdef __cplusplus
}
#endif

#endif
