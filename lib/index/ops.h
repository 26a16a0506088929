/* lib/index/ops.h - the index domain's part of the backend vtable. */
#ifndef ACCEL_INDEX_OPS_H
#define ACCEL_INDEX_OPS_H

#include "index/index.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One search as the backends see it. */
typedef struct accel__index_job {
  const char *stage;    /* "index.join", "index.range", "index.knn" */
  accel_index *index;   /* for the multi-index tables cache (may be NULL) */
  accel__codes codes;   /* the entries */
  accel__codes queries; /* range and k-nearest queries */
  /* k-nearest from accel_index_knn_arrays (array_rows NULL: `queries`,
   * out_ids and out_distances hold the search): the queries as rows
   * [nq][nfields][words] and the outputs, all in device memory (a GPU op
   * reads and writes them in place; a CPU run gets host copies, which
   * accel__dispatch_device swaps in through these void pointers). */
  void *array_rows, *array_ids, *array_distances;
  size_t nq;
  const uint64_t *entry_ids; /* ids of the entries (k-nearest ties) */
  uint32_t bits;             /* bits per field */
  accel__search search;
  accel__pair_sink *sink;  /* join and range results (positions) */
  uint32_t k, field;       /* k-nearest */
  uint64_t *out_ids;       /* [nq * k] */
  uint32_t *out_distances; /* [nq * k], may be NULL */
  accel_progress_fn progress;
  void *progress_user;
  accel_index_algorithm used; /* set by the op: what ran */
} accel__index_job;

/* A GPU op hands pairs to the sink only once it has succeeded, so that a
 * CPU rerun after a failure never duplicates them. */
typedef struct accel__index_ops {
  accel_status (*join)(accel__call *call, accel__index_job *job);
  accel_status (*range)(accel__call *call, accel__index_job *job);
  accel_status (*knn)(accel__call *call, accel__index_job *job);
} accel__index_ops;

/* Which popcount kernel the CPU uses: "avx512-vpopcntdq", "popcnt", "generic". */
const char *accel__index_isa(void);
/* The highest popcount kernel the CPU searches may use: 2 AVX-512
 * VPOPCNTDQ (the default), 1 POPCNT, 0 generic (tests lower it to run each
 * kernel on a CPU that has the faster ones). */
extern int accel__index_isa_cap;
/* The automatic choice: multi-index hashing for this search? */
bool accel__prefer_mih(size_t n, uint32_t bits, const accel__search *search, uint32_t nfields);
/* GPU backends search by brute force. Multi-index hashing is a CPU
 * algorithm: asked for explicitly, or chosen by AUTO where it examines so few
 * pairs that the CPU beats the GPU's brute force, a GPU op's join or range
 * search declines the job (accel__decline: the CPU runs it, and nothing is
 * logged or counted as a fallback). Returns that status, or ACCEL_OK when
 * the GPU takes the job. k-nearest always stays on the GPU. */
accel_status accel__index_gpu_decline(accel__call *call, const accel__index_job *job);

#ifdef __cplusplus
}
#endif

#endif
