/* lib/reg/cpu.h - the CPU ops of the registration domain (internal). */
#ifndef ACCEL_REG_CPU_H
#define ACCEL_REG_CPU_H

#include "reg/ops.h"

accel_status accel__reg_cpu_pyramid(accel__call *call, accel__reg_pyramid_job *job); /* cpu_pyramid.c */
accel_status accel__reg_cpu_level(accel__call *call, accel__reg_level_job *job);     /* cpu_level.c */
accel_status accel__reg_cpu_warp(accel__call *call, accel__reg_warp_job *job);       /* cpu_warp.c */
/* Tests set this to run the cubic warp's per-pixel set-up one pixel at a
 * time, its colour sums 4 lanes a pixel column and its integer stores one
 * channel at a time: the paths the vector code replaced. */
extern bool accel__reg_warp_plain;
/* A whole layer's cubic B-spline coefficients (warp.c): 0, 1 (a
 * non-finite sample, its row in *bad_row) or 2 (out of memory). */
int accel__reg_layer_coefficients(const accel_array *in, float *coef, int threads, int64_t *bad_row);
accel_status accel__reg_cpu_finite(accel__call *call, accel__reg_finite_job *job); /* cpu_pyramid.c */
/* The first non-finite value of a 2-D F32 host image (row * width +
 * column), or -1; on `threads` threads. */
int64_t accel__reg_first_nonfinite(const accel_array *a, int threads); /* cpu_pyramid.c */
/* A level image's cubic B-spline coefficients in place: the coefficients
 * of accel__reg_prefilter_rows and accel__reg_prefilter_cols
 * (prefilter.h, the GPU's), on `threads` threads. */
void accel__reg_prefilter(float *img, int64_t w, int64_t h, int threads); /* cpu_pyramid.c */

#endif
