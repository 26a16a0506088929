/* The CPU backend's registration ops (each in its own file). */
#include "reg/cpu.h"
#include "reg/prealign.h"

/* The CPU reads the host inputs where they are: nothing to hold. */
static accel_status cpu_hold(accel__call *call, accel__reg_hold_job *job) {
  (void)call;
  job->held[0] = job->held[1] = NULL;
  return ACCEL_OK;
}

const accel__reg_ops accel__cpu_reg_ops = {
    .pyramid = accel__reg_cpu_pyramid,
    .level = accel__reg_cpu_level,
    .warp = accel__reg_cpu_warp,
    .prealign = accel__reg_cpu_prealign,
    .finite = accel__reg_cpu_finite,
    .hold = cpu_hold,
};
