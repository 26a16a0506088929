/* The CPU op reg.warp. */
#include "reg/cpu.h"

#include "core/internal.h"

#include <stdio.h>

accel_status accel__reg_cpu_warp(accel__call *call, accel__reg_warp_job *job) {
  (void)job;
  snprintf(call->why, sizeof call->why, "reg.warp is not implemented yet");
  return ACCEL_ERR_UNSUPPORTED;
}
