/* The CPU op reg.pyramid. */
#include "reg/cpu.h"

#include "core/internal.h"

#include <stdio.h>

accel_status accel__reg_cpu_pyramid(accel__call *call, accel__reg_pyramid_job *job) {
  (void)job;
  snprintf(call->why, sizeof call->why, "reg.pyramid is not implemented yet");
  return ACCEL_ERR_UNSUPPORTED;
}
