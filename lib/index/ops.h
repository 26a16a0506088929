/* lib/index/ops.h - the index domain's part of the backend vtable. */
#ifndef ACCEL_INDEX_OPS_H
#define ACCEL_INDEX_OPS_H

#include "index/index.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One search as the backends see it. */
typedef struct accel__index_job {
  const char *stage;            /* "index.join", "index.range", "index.knn" */
  accel_index *index;           /* for the multi-index tables cache (may be NULL) */
  accel__codes codes;           /* the entries */
  accel__codes queries;         /* range and k-nearest queries */
  const uint64_t *entry_ids;    /* ids of the entries (k-nearest ties) */
  uint32_t bits;                /* bits per field */
  accel__search search;
  accel__pair_sink *sink;       /* join and range results (positions) */
  uint32_t k, field;            /* k-nearest */
  uint64_t *out_ids;            /* [nq * k] */
  uint32_t *out_distances;      /* [nq * k], may be NULL */
  accel_progress_fn progress;
  void *progress_user;
  accel_index_algorithm used;   /* set by the op: what ran */
} accel__index_job;

/* A GPU op hands pairs to the sink only once it has succeeded, so that a
 * CPU rerun after a failure never duplicates them. */
typedef struct accel__index_ops {
  accel_status (*join)(accel__call *call, accel__index_job *job);
  accel_status (*range)(accel__call *call, accel__index_job *job);
  accel_status (*knn)(accel__call *call, accel__index_job *job);
} accel__index_ops;

extern const accel__index_ops accel__cpu_index_ops;
#if defined(ACCEL_HAVE_CUDA) && ACCEL_HAVE_CUDA
extern const accel__index_ops accel__cuda_index_ops;
#endif

/* Which popcount kernel the CPU uses: "avx512-vpopcntdq", "popcnt", "generic". */
const char *accel__index_isa(void);
/* The automatic choice: multi-index hashing for this search? */
bool accel__prefer_mih(size_t n, uint32_t bits, const accel__search *search, uint32_t nfields);
/* On a GPU backend with AUTO: is multi-index hashing on the CPU clearly
 * cheaper than brute force on the GPU (large sets, small thresholds)? */
bool accel__prefer_cpu_mih_to_gpu(size_t n, uint32_t bits, const accel__search *search, uint32_t nfields);

#ifdef __cplusplus
}
#endif

#endif
