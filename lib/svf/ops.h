/* lib/svf/ops.h - the SVF domain's part of the backend vtable. */
#ifndef ACCEL_SVF_OPS_H
#define ACCEL_SVF_OPS_H

#include "svf/svf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel__svf_ops {
  /* A whole job (job->shadows tells which), every tile of it. */
  accel_status (*shadows)(accel__call *call, accel__svf_job *job);
  accel_status (*sky)(accel__call *call, accel__svf_job *job);
} accel__svf_ops;

ACCEL__DECLARE_OPS(accel__svf_ops, svf);

#ifdef __cplusplus
}
#endif

#endif
