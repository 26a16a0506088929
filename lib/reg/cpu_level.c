/* The CPU op reg.level. */
#include "reg/cpu.h"

#include "core/internal.h"

#include <stdio.h>

accel_status accel__reg_cpu_level(accel__call *call, accel__reg_level_job *job) {
  (void)job;
  snprintf(call->why, sizeof call->why, "reg.level is not implemented yet");
  return ACCEL_ERR_UNSUPPORTED;
}
