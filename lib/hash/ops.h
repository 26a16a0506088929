/* lib/hash/ops.h - the hash domain's part of the backend vtable. */
#ifndef ACCEL_HASH_OPS_H
#define ACCEL_HASH_OPS_H

#include "hash/job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel__hash_ops {
  /* Run the whole batch: statuses, messages and hashes of every input. */
  accel_status (*batch)(accel__call *call, accel__hash_job *job);
} accel__hash_ops;

ACCEL__DECLARE_OPS(accel__hash_ops, hash);

#ifdef __cplusplus
}
#endif

#endif
