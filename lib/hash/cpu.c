/* The CPU hash batch: inputs decoded and hashed in parallel, one per thread
 * at a time (dynamic schedule: image sizes vary), each resized band by band
 * as its rows are decoded (accel__hash_rows). */
#include "hash/ops.h"
#include "hash/resample.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static accel_status cpu_batch(accel__call *call, accel__hash_job *job) {
  size_t done = 0, reported = 0;
  int cancelled = 0;
  const long long n = (long long)job->n;
#pragma omp parallel num_threads(call->threads)
  {
    accel__axis_cache local = {0}; /* without a thread's own cache (out of memory): this call's */
    accel__axis_cache *cache = accel__axis_cache_thread();
    if (!cache) cache = &local;  /* the weights are reused across same-sized images, and calls */
    accel__hash_rows rows = {0}; /* per thread: decoded rows resized band by band, buffers reused */
#pragma omp for schedule(dynamic, 1)
    for (long long i = 0; i < n; i++) {
      if (__atomic_load_n(&cancelled, __ATOMIC_RELAXED)) continue;
      char why[ACCEL_REASON_MAX] = "";
      accel__hash_image img;
      accel_status s = accel__hash_load_fused(job, (size_t)i, cache, &img, &rows, why);
      if (!s) s = accel__hash_rows_finish(&job->spec, &rows, &img.color, accel__hash_slots(job, (size_t)i), why);
      accel__hash_image_free(&img);
      accel__hash_record(job, (size_t)i, s, why);
      size_t d = __atomic_add_fetch(&done, 1, __ATOMIC_RELAXED);
#ifdef _OPENMP
      const bool caller = omp_get_thread_num() == 0;
#else
      const bool caller = true;
#endif
      if (caller && job->progress) {
        reported = d;
        if (job->progress(job->progress_user, "hash.batch", (double)d / (double)n))
          __atomic_store_n(&cancelled, 1, __ATOMIC_RELAXED);
      }
    }
    accel__axis_cache_free(&local);
    accel__hash_rows_free(&rows);
  }
  if (cancelled) {
    accel__why(call->why, "cancelled by the progress callback after %zu of %zu inputs", done, job->n);
    return ACCEL_ERR_CANCELLED;
  }
  /* another thread may have finished the last inputs: report completion */
  if (job->progress && reported < job->n) job->progress(job->progress_user, "hash.batch", 1.0);
  return ACCEL_OK;
}

const accel__hash_ops accel__cpu_hash_ops = {
    .batch = cpu_batch,
};
