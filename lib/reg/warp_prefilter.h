/*
 * lib/reg/warp_prefilter.h - the warp's cubic B-spline prefilter of one
 * line (internal; C and CUDA): the recursions warp.c describes, one line at
 * a time, for the device's coefficients of a device layer and the CPU's of
 * the same layer (warp.c filters host layers eight lines at a time with the
 * same operations on each line).
 */
#ifndef ACCEL_REG_WARP_PREFILTER_H
#define ACCEL_REG_WARP_PREFILTER_H

#include "reg/interp.h"

#include <stdint.h>

/* The causal start's terms: ceil(log(1e-10) / log(2 - sqrt(3))). */
#define ACCEL__REG_HORIZON 18
#define ACCEL__REG_POLE (-0.26794919243112270) /* sqrt(3) - 2 */

/* The recursions on a line of n > ACCEL__REG_HORIZON samples c[k * s],
 * already times the gain, in float. */
ACCEL__REG_HD void accel__reg_warp_line_f(float *c, int64_t n, int64_t s) {
  const float z = (float)ACCEL__REG_POLE, za = (float)(ACCEL__REG_POLE / (ACCEL__REG_POLE * ACCEL__REG_POLE - 1.0));
  float sum = c[0], zn = z;
  for (int64_t k = 1; k < ACCEL__REG_HORIZON; k++, zn *= z) sum += zn * c[k * s];
  c[0] = sum;
  for (int64_t k = 1; k < n; k++) c[k * s] += z * c[(k - 1) * s];
  c[(n - 1) * s] = za * (z * c[(n - 2) * s] + c[(n - 1) * s]);
  for (int64_t k = n - 2; k >= 0; k--) c[k * s] = z * (c[(k + 1) * s] - c[k * s]);
}

/* The recursions on a line of 2 <= n <= ACCEL__REG_HORIZON samples c (in
 * double, times the gain already), with the exact mirrored start. */
ACCEL__REG_HD void accel__reg_warp_line_d(double *c, int64_t n) {
  const double z = ACCEL__REG_POLE, iz = 1.0 / z;
  double zn = z, z2n = 1.0; /* z^(n-1) by products, the same on the host and a device (no library pow) */
  for (int64_t k = 1; k < n; k++) z2n *= z;
  double sum = c[0] + z2n * c[n - 1];
  z2n *= z2n * iz;
  for (int64_t k = 1; k <= n - 2; k++) {
    sum += (zn + z2n) * c[k];
    zn *= z;
    z2n *= iz;
  }
  c[0] = sum / (1.0 - zn * zn);
  for (int64_t k = 1; k < n; k++) c[k] += z * c[k - 1];
  c[n - 1] = (z / (z * z - 1.0)) * (z * c[n - 2] + c[n - 1]);
  for (int64_t k = n - 2; k >= 0; k--) c[k] = z * (c[k + 1] - c[k]);
}

/* One line c[k * s] (k < n) of a layer's coefficients in place: rows come
 * with the gain already applied in float (gain 1), columns take it here
 * (gain 6: in float for long lines, in double for short ones, as warp.c's
 * column pass does). A line of one sample stays as it is. */
ACCEL__REG_HD void accel__reg_warp_line(float *c, int64_t n, int64_t s, float gain) {
  if (n < 2) return;
  if (n > ACCEL__REG_HORIZON) {
    if (gain != 1.0f)
      for (int64_t k = 0; k < n; k++) c[k * s] = gain * c[k * s];
    accel__reg_warp_line_f(c, n, s);
    return;
  }
  double line[ACCEL__REG_HORIZON];
  for (int64_t k = 0; k < n; k++) line[k] = (double)gain * (double)c[k * s];
  accel__reg_warp_line_d(line, n);
  for (int64_t k = 0; k < n; k++) c[k * s] = (float)line[k];
}

#endif
