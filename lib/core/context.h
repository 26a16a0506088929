/* lib/core/context.h - the context's layout (internal to lib/core). */
#ifndef ACCEL_CORE_CONTEXT_H
#define ACCEL_CORE_CONTEXT_H

#include "internal.h"

#include <pthread.h>

typedef struct accel__stage_record {
  char name[ACCEL_STAGE_NAME_MAX];
  accel__stats_delta total;
} accel__stage_record;

struct accel_ctx {
  uint64_t serial;               /* unique per context; keys the last-error slots */
  const accel__backend *backend; /* runs stages: the CPU or a GPU backend */
  void *backend_state;
  int32_t device;         /* -1 on the CPU */
  uint64_t memory_budget; /* 0 on the CPU */
  accel_fallback_policy fallback;
  int threads;
  uint64_t max_pixels; /* the loaders' pixel limit */
  accel_sync_policy sync;

  pthread_mutex_t log_mu;
  accel_log_fn log_fn; /* NULL: stderr */
  void *log_user;
  accel_log_level log_level;
  int log_env_level; /* ACCEL_LOG's level, or -1 when unset */

  pthread_mutex_t stats_mu;
  accel__stage_record *stages;
  size_t nstages, stages_cap;
};

#endif /* ACCEL_CORE_CONTEXT_H */
