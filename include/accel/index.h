/*
 * accel/index.h - an exact Hamming similarity index over binary hash codes,
 * and grouping of near-duplicates.
 *
 * Entries hold `nfields` codes (one per hash kind, e.g. dhash and ahash) of
 * 64, 128 or 256 bits each, a user id (uint64, unique in the index), and
 * optionally a label (e.g. a file path) and a stamp (e.g. file size and time)
 * that applications use to keep the index current.
 *
 * Codes are arrays of uint64 words, `bits / 64` per field, fields one after
 * the other. Word w holds bits 64w .. 64w + 63 of the hash, the first of them
 * in the most significant bit: for a 64-bit imagehash hash the word is
 * int(str(hash), 16) (accel_hash_* packs hashes the same way: read their
 * bytes big-endian). Shorter hashes (colorhash's 42 bits) go in the high bits
 * of a 64-bit field, the rest zero.
 *
 * Distances are Hamming distances, and matches are inclusive: d <= r (FAISS's
 * range search is strict, d < r). With several fields each has a threshold;
 * the rule ALL needs every field within its threshold, ANY at least one.
 *
 * Searches are exact. The algorithm is chosen per call (docs/index.md):
 * blocked brute force with hardware popcount (AVX-512 or POPCNT picked at run
 * time, OpenMP), or multi-index hashing: each code split into m >= r + 1
 * substrings, so that by the pigeonhole principle two codes within r share at
 * least one substring exactly; only codes sharing one are compared. On the
 * CUDA backend, brute force in shared-memory tiles. Stages: "index.join",
 * "index.range", "index.knn".
 *
 * Errors (core.h has the general rules): a call given an index reports its
 * failure through accel_last_error() of the index's context (the one it was
 * created or loaded with), except for a NULL index and for NULL outputs of
 * accel_index_find and accel_index_get_meta, which report through NULL, as
 * do the calls without an index (pairs, groups, accel_groups_from_pairs).
 * The searches (self-join, range, k-nearest, grouping) may also fail as
 * stages do: ACCEL_ERR_CANCELLED from their progress callback (k-nearest
 * has none) and, under ACCEL_FALLBACK_DENY, the GPU's failure.
 *
 * Threads: the calls that only read an index (accel_index_info, _get, _find,
 * _get_meta, _save and the searches) may run concurrently on one index, from
 * any threads; accel_index_add, _remove, _set_meta and _destroy must not
 * overlap any other call on the same index. Separate indexes are independent,
 * also on one context. The context must outlive the index. Pairs and groups
 * never change once made: any threads may view them until they are destroyed.
 */
#ifndef ACCEL_INDEX_H
#define ACCEL_INDEX_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ACCEL_INDEX_MAX_FIELDS = 8 };

typedef struct accel_index accel_index;

typedef struct accel_index_options {
  uint32_t struct_size; /* set by accel_index_options_init */
  uint32_t bits;        /* bits per field: 64 (default), 128 or 256 */
  uint32_t nfields;     /* codes per entry, 1 (default) .. ACCEL_INDEX_MAX_FIELDS */
} accel_index_options;

ACCEL_API accel_status accel_index_options_init(accel_index_options *options, size_t struct_size);

/* An empty index, searched with `ctx`'s backend (the context must outlive
 * it). `options` may be NULL (64 bits, one field). Errors:
 * ACCEL_ERR_INVALID_ARG (NULL ctx or out, bits not 64/128/256, nfields out
 * of range), ACCEL_ERR_VERSION, ACCEL_ERR_OUT_OF_MEMORY; *out is NULL on
 * failure (when out is not). */
ACCEL_API accel_status accel_index_create(accel_ctx *ctx, const accel_index_options *options, accel_index **out);
/* Release an index; accepts NULL. */
ACCEL_API void accel_index_destroy(accel_index *index);

/* Bits per field, fields per entry, number of entries. Any may be NULL.
 * Fails only for a NULL index. */
ACCEL_API accel_status accel_index_info(const accel_index *index, uint32_t *bits, uint32_t *nfields, size_t *count);

/* Add n entries: ids[n], codes[n * nfields * bits / 64]; labels and stamps
 * may be NULL (no label, stamp 0), and a label may be NULL. All or nothing:
 * an id already in the index (or twice in the call), or the id UINT64_MAX
 * (reserved: it marks a missing k-nearest result), fails the call with
 * ACCEL_ERR_INVALID_ARG and adds none (an index file holding it is
 * ACCEL_ERR_FORMAT). Also ACCEL_ERR_INVALID_ARG for NULL ids or codes with
 * n > 0, ACCEL_ERR_LIMIT beyond 2^32 - 1 entries in all,
 * ACCEL_ERR_OUT_OF_MEMORY; on every failure the index is unchanged. Codes,
 * labels and stamps are copied. */
ACCEL_API accel_status accel_index_add(accel_index *index, size_t n, const uint64_t *ids, const uint64_t *codes,
                                       const char *const *labels, const uint64_t *stamps);
/* Remove the entries with these ids; ids not in the index are ignored.
 * `removed` (may be NULL) receives how many were removed. Positions of the
 * remaining entries may change. Fails only with ACCEL_ERR_INVALID_ARG (NULL
 * index, NULL ids with n > 0), changing nothing. */
ACCEL_API accel_status accel_index_remove(accel_index *index, size_t n, const uint64_t *ids, size_t *removed);
/* The entry at `position` (0 .. count-1): its id, codes (nfields * bits / 64
 * words, may be NULL), label (NULL if none; valid until the index changes;
 * may be NULL) and stamp (may be NULL). ACCEL_ERR_NOT_FOUND past the end;
 * nothing is written on failure. */
ACCEL_API accel_status accel_index_get(const accel_index *index, size_t position, uint64_t *id, uint64_t *codes,
                                       const char **label, uint64_t *stamp);
/* The position of an id, or ACCEL_ERR_NOT_FOUND (*position untouched). */
ACCEL_API accel_status accel_index_find(const accel_index *index, uint64_t id, size_t *position);
/* A free-form string saved with the index (e.g. which hash kinds the fields
 * hold); at most 4095 bytes. set copies it (NULL clears it); a longer one is
 * ACCEL_ERR_INVALID_ARG, and a failed set keeps the old string. get: "" if
 * none; valid until the next set or the index's destruction. */
ACCEL_API accel_status accel_index_set_meta(accel_index *index, const char *meta);
ACCEL_API accel_status accel_index_get_meta(const accel_index *index, const char **meta);

/* Save to a file: a versioned little-endian format with a CRC-32 of the
 * whole content, written under a temporary name and renamed, so a failed
 * save never destroys the previous file. Errors as io.h's saves:
 * ACCEL_ERR_INVALID_ARG (NULL index, a bad path), ACCEL_ERR_IO,
 * ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_index_save(const accel_index *index, const char *path);
/* Load a saved index. A file that is not an index, of an unknown version,
 * truncated or corrupt (checksum) fails with ACCEL_ERR_FORMAT; ACCEL_ERR_IO
 * when it cannot be opened or read; also ACCEL_ERR_INVALID_ARG (NULL ctx,
 * path or out), ACCEL_ERR_OUT_OF_MEMORY. *out is NULL on failure (when out
 * is not): never a partial index. Messages go to accel_last_error(ctx). */
ACCEL_API accel_status accel_index_load(accel_ctx *ctx, const char *path, accel_index **out);

/* ---------------------------------------------------------------- searching */

typedef enum accel_index_rule {
  ACCEL_INDEX_ALL = 0, /* every field within its threshold */
  ACCEL_INDEX_ANY = 1  /* at least one field within its threshold */
} accel_index_rule;

typedef enum accel_index_algorithm {
  ACCEL_INDEX_AUTO = 0,        /* chosen from the sizes and thresholds (docs/index.md) */
  ACCEL_INDEX_BRUTE_FORCE = 1, /* every pair compared */
  ACCEL_INDEX_MULTI_INDEX = 2  /* multi-index hashing (CPU); exact for any threshold */
} accel_index_algorithm;

typedef struct accel_search_options {
  uint32_t struct_size;                        /* set by accel_search_options_init */
  accel_index_rule rule;                       /* default ACCEL_INDEX_ALL */
  uint32_t thresholds[ACCEL_INDEX_MAX_FIELDS]; /* per field, inclusive; default 0 */
  accel_index_algorithm algorithm;             /* default ACCEL_INDEX_AUTO */
  accel_progress_fn progress;                  /* optional: fraction of the search done */
  void *progress_user;
} accel_search_options;

ACCEL_API accel_status accel_search_options_init(accel_search_options *options, size_t struct_size);

/* Pairs found by a search; read them with accel_pairs_view.
 *
 * The self-join, the range search and accel_index_group: `options` may be
 * NULL (rule ALL, thresholds 0). Errors besides the searches' (above):
 * ACCEL_ERR_INVALID_ARG (a NULL index or out, an unknown rule or algorithm,
 * a threshold over the bits), ACCEL_ERR_VERSION, ACCEL_ERR_OUT_OF_MEMORY.
 * *out is NULL on failure (when out is not); results reach it only once the
 * whole search succeeded. */
typedef struct accel_pairs accel_pairs;

/* Every pair of entries within the thresholds (by the rule), each once:
 * first = the smaller id, second = the larger; sorted by (first, second). */
ACCEL_API accel_status accel_index_self_join(accel_index *index, const accel_search_options *options,
                                             accel_pairs **out);
/* For nq query codes (nq * nfields * bits / 64 words): every entry within the
 * thresholds. first = the query's number (0 .. nq-1), second = the entry's
 * id; sorted by (first, second). Also ACCEL_ERR_INVALID_ARG for NULL queries
 * with nq > 0, ACCEL_ERR_LIMIT for nq over 2^32 - 1. */
ACCEL_API accel_status accel_index_range(accel_index *index, size_t nq, const uint64_t *queries,
                                         const accel_search_options *options, accel_pairs **out);
/* The k entries nearest to each query by the distance of `field`, nearest
 * first, ties broken by the smaller id: ids[nq * k] and distances[nq * k]
 * (distances may be NULL). Missing results (fewer than k entries) are id
 * UINT64_MAX and distance UINT32_MAX. 1 <= k <= 4096. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL index, NULL queries or ids with nq > 0, k or
 * field out of range), ACCEL_ERR_OUT_OF_MEMORY, and under
 * ACCEL_FALLBACK_DENY the GPU's failure; ids and distances are unspecified
 * after a failure. nq = 0 writes nothing. */
ACCEL_API accel_status accel_index_knn(accel_index *index, size_t nq, const uint64_t *queries, uint32_t k,
                                       uint32_t field, uint64_t *ids, uint32_t *distances);
/* accel_index_knn on arrays, which on a CUDA context may live in device
 * memory (accel_array_on_device; then all three must, C-contiguous):
 * `queries` U64 of shape (nq, nfields * bits / 64) or (nq, nfields, bits /
 * 64), or (nq,) for one 64-bit field; `ids` U64 and `distances` U32 (may be
 * NULL) of shape (nq, k). The results are accel_index_knn's. With device
 * arrays the search reads the queries where they are (no copy through the
 * host) and writes the results into the device arrays; the entries' codes
 * live in host memory and are uploaded for each search, as with host
 * queries, and each query's candidates are ordered by (distance, id) on the
 * host, so the selected field's query words and the results pass through
 * host memory once (stage "index.knn", counted in its statistics). A GPU
 * failure falls back as usual: the CPU then gets host copies of the arrays.
 * Errors: accel_index_knn's; ACCEL_ERR_INVALID_ARG for shapes or dtypes
 * that do not match, device arrays on a CPU context, or device and host
 * arrays mixed; ACCEL_ERR_UNSUPPORTED for a strided device array; inputs
 * that overlap the outputs are refused. */
ACCEL_API accel_status accel_index_knn_arrays(accel_index *index, const accel_array *queries, uint32_t k,
                                              uint32_t field, const accel_array *ids, const accel_array *distances);

/* The pairs: *count of them; first[i], second[i], and the distances of every
 * field, distances[i * nfields + f]. Pointers valid until the pairs are
 * destroyed. Any output may be NULL. Fails only for NULL pairs. */
ACCEL_API accel_status accel_pairs_view(const accel_pairs *pairs, size_t *count, const uint64_t **first,
                                        const uint64_t **second, const uint32_t **distances, uint32_t *nfields);
/* Release pairs; accepts NULL. */
ACCEL_API void accel_pairs_destroy(accel_pairs *pairs);

/* ---------------------------------------------------------------- grouping */

/* Connected components of a graph given by edges: groups of two or more
 * members, each group's members sorted, groups sorted by their first member. */
typedef struct accel_groups accel_groups;

/* The groups of the graph whose edges are (first[i], second[i]): members
 * are the ids as given. Errors: ACCEL_ERR_INVALID_ARG (NULL out, NULL first
 * or second with npairs > 0), ACCEL_ERR_LIMIT (npairs over 2^31 - 1),
 * ACCEL_ERR_OUT_OF_MEMORY; *out is NULL on failure (when out is not).
 * Messages go to accel_last_error(NULL). */
ACCEL_API accel_status accel_groups_from_pairs(size_t npairs, const uint64_t *first, const uint64_t *second,
                                               accel_groups **out);
/* The groups of near-duplicates of an index: the connected components of
 * its self-join, computed without keeping every pair (memory grows with the
 * entries, not with the pairs). Members are ids. Runs as stage "index.join";
 * fails as accel_index_self_join does. */
ACCEL_API accel_status accel_index_group(accel_index *index, const accel_search_options *options, accel_groups **out);
/* *ngroups groups; group g is members[offsets[g] .. offsets[g + 1]).
 * Pointers valid until the groups are destroyed; any output may be NULL.
 * Fails only for NULL groups. */
ACCEL_API accel_status accel_groups_view(const accel_groups *groups, size_t *ngroups, const uint64_t **offsets,
                                         const uint64_t **members);
/* Release groups; accepts NULL. */
ACCEL_API void accel_groups_destroy(accel_groups *groups);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_INDEX_H */
