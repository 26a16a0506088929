/* lib/reg/cpu.h - the CPU ops of the registration domain (internal). */
#ifndef ACCEL_REG_CPU_H
#define ACCEL_REG_CPU_H

#include "reg/ops.h"

accel_status accel__reg_cpu_pyramid(accel__call *call, accel__reg_pyramid_job *job); /* cpu_pyramid.c */
accel_status accel__reg_cpu_level(accel__call *call, accel__reg_level_job *job);     /* cpu_level.c */
accel_status accel__reg_cpu_warp(accel__call *call, accel__reg_warp_job *job);       /* cpu_warp.c */

#endif
