/* The CPU backend's registration ops (each in its own file). */
#include "reg/cpu.h"
#include "reg/prealign.h"

const accel__reg_ops accel__cpu_reg_ops = {
    .pyramid = accel__reg_cpu_pyramid,
    .level = accel__reg_cpu_level,
    .warp = accel__reg_cpu_warp,
    .prealign = accel__reg_cpu_prealign,
    .finite = accel__reg_cpu_finite,
};
