/* lib/reg/cpu_lanes.h - a cell's sums four samples at a time, and the
 * processor check the registration's AVX2 paths share (internal;
 * cpu_level_lanes.c). */
#ifndef ACCEL_REG_CPU_LANES_H
#define ACCEL_REG_CPU_LANES_H

#include "reg/level_cell.h"

#include <stdbool.h>

/* Whether the processor has AVX2 (asked once). */
bool accel__reg_have_avx2(void);

/* accel__reg_cell_eval's sums, bit for bit, with the samples' arithmetic in
 * vector lanes; false (and nothing done) without AVX2 or with
 * accel__reg_lanes_off. */
bool accel__reg_cell_eval_lanes(const accel__reg_cell_in *e, const double *params, int64_t cx, int64_t cy,
                                double density, uint64_t stream, bool grad, bool normal, accel__reg_cell_acc *a);

/* Tests set this to compare the lanes with the scalar code. */
extern bool accel__reg_lanes_off;

#endif
