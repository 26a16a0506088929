/*
 * lib/ct/edt_line.h - one line of the exact distance transform's y and z
 * passes, shared by the CPU (lib/ct/cpu_edt.c) and the GPU (kernels/ct.cu) so
 * that both compute the same floating-point operations in the same order.
 *
 * The line holds squared distances from the previous passes (0 = background,
 * +inf = no background yet). Its zeros bound its runs of nonzero values: for
 * p inside a run, a parabola centred beyond the zero next to it costs more
 * than that zero's, so each run together with its bounding zeros is replaced
 * by the lower envelope of its parabolas f(q) + ((p - q) s)^2 (Felzenszwalb
 * and Huttenlocher), computed in double and stored as float.
 */
#ifndef ACCEL_CT_EDT_LINE_H
#define ACCEL_CT_EDT_LINE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ct/hd.h"

/* Scratch of one line (up to n values): entry k of each array at [k * step]
 * (the GPU interleaves the scratch of neighbouring lines). */
typedef struct accel__edt_scratch {
  int32_t *v; /* the envelope's parabolas */
  double *zz; /* where each starts (n + 1 entries) */
  double *g;  /* the line's values in double */
  double *h;  /* g[v] + (s v)^2 of each parabola */
  int64_t step;
} accel__edt_scratch;

/* The envelope of f[0 .. n) (entries fstride apart), in place. */
static inline ACCEL__CT_HD void accel__edt_envelope(float *f, int64_t fstride, int64_t n, double s,
                                                    accel__edt_scratch w) {
  const double s2 = s * s, s2x2 = 2.0 * s2;
  const int64_t st = w.step;
  int64_t k = -1;
  for (int64_t q = 0; q < n; q++) {
    const float fv = f[q * fstride];
    w.g[q * st] = fv;
    if (isinf(fv)) continue;
    const double fq = (double)fv + s2 * (double)q * (double)q;
    double cross = -INFINITY;
    while (k >= 0) {
      cross = (fq - w.h[k * st]) / (s2x2 * (double)(q - w.v[k * st]));
      if (cross <= w.zz[k * st]) k--;
      else break;
    }
    k++;
    w.v[k * st] = (int32_t)q;
    w.h[k * st] = fq;
    w.zz[k * st] = k == 0 ? -INFINITY : cross;
    w.zz[(k + 1) * st] = INFINITY;
  }
  if (k < 0) return; /* no finite value: the line stays +inf */
  int64_t j = 0;
  for (int64_t p = 0; p < n; p++) {
    while (w.zz[(j + 1) * st] < (double)p) j++;
    const int64_t vj = w.v[j * st];
    const double dq = ((double)(p - vj)) * s;
    f[p * fstride] = (float)(w.g[vj * st] + dq * dq);
  }
}

/* The whole line: each run of nonzero values with its bounding zeros. */
static inline ACCEL__CT_HD void accel__edt_line(float *f, int64_t fstride, int64_t n, double s, accel__edt_scratch w) {
  int64_t i = 0;
  while (i < n) {
    if (fstride == 1) /* zeros here are +0.0: four of them have all bits clear */
      while (i + 4 <= n) {
        uint64_t a, b;
        memcpy(&a, f + i, 8);
        memcpy(&b, f + i + 2, 8);
        if (a | b) break;
        i += 4;
      }
    while (i < n && f[i * fstride] == 0) i++;
    if (i >= n) break;
    int64_t j = i;
    while (j + 1 < n && f[(j + 1) * fstride] != 0) j++;
    const int64_t lo = i > 0 ? i - 1 : 0, hi = j + 1 < n ? j + 1 : j;
    accel__edt_envelope(f + lo * fstride, fstride, hi - lo + 1, s, w);
    i = j + 1;
  }
}

/* Squared distance along x of one row, for the first pass: the distance in
 * voxels to the row's nearest zero of m (two sweeps), scaled by sx and
 * squared; +inf in a row without zeros. dist: n int32 of scratch. */
static inline ACCEL__CT_HD void accel__edt_row(const uint8_t *m, float *o, int64_t n, double sx, int32_t *dist,
                                               int64_t dstep) {
  const int32_t far = 0x3fffffff;
  int32_t run = far;
  for (int64_t x = 0; x < n; x++) {
    run = m[x] ? (run < far ? run + 1 : far) : 0;
    dist[x * dstep] = run;
  }
  run = far;
  for (int64_t x = n - 1; x >= 0; x--) {
    run = m[x] ? (run < far ? run + 1 : far) : 0;
    if (run < dist[x * dstep]) dist[x * dstep] = run;
  }
  for (int64_t x = 0; x < n; x++) {
    const int32_t dx = dist[x * dstep];
    const double sd = (double)dx * sx;
    o[x] = dx >= far ? INFINITY : (float)(sd * sd);
  }
}

#endif
