/*
 * Markers as scikit-image 0.19.3's peak_local_max(edt, min_distance=d,
 * exclude_border=False, labels=<26-connected components of mask>) finds them:
 *
 * 1. Per component, a voxel is a candidate when no voxel of the same
 *    component within the (2d+1)^3 window is higher (other components and
 *    the volume's outside never count: peak_local_max masks them with the
 *    lowest float and pads with 0, below every positive distance; so the
 *    map must not be negative). With d = 0 every voxel is a candidate.
 * 2. If every voxel of a component is a candidate (a flat component), the
 *    candidates become the voxels that a binary opening (cross structure,
 *    within the component's bounding box) removes.
 * 3. Candidates must exceed the global minimum of edt.
 * 4. Per component, candidates in C order are sorted by decreasing value with
 *    numpy 1.x's quicksort (accel__np_argsort_f32), and kept greedily: a
 *    candidate within Chebyshev distance < d of a kept one is dropped.
 * 5. The kept peaks of all components are numbered 1..n in C order.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_offset(const void *a, const void *b) {
  const int *p = a, *q = b;
  const int dp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2], dq = q[0] * q[0] + q[1] * q[1] + q[2] * q[2];
  return (dp > dq) - (dp < dq);
}

int accel__ct_window_offsets(int r, int (*offs)[3]) {
  int noffs = 0;
  for (int dz = -r; dz <= r; dz++)
    for (int dy = -r; dy <= r; dy++)
      for (int dx = -r; dx <= r; dx++)
        if (dz || dy || dx) {
          offs[noffs][0] = dz;
          offs[noffs][1] = dy;
          offs[noffs][2] = dx;
          noffs++;
        }
  qsort(offs, (size_t)noffs, sizeof *offs, cmp_offset);
  return noffs;
}

#define CT_IDX uint32_t
#define CT_FN(name) name
#include "ct/cpu_markers_impl.h"
#undef CT_IDX
#undef CT_FN

#define CT_IDX uint64_t
#define CT_FN(name) name##_wide
#include "ct/cpu_markers_impl.h"
#undef CT_IDX
#undef CT_FN

accel_status accel__ct_markers_cpu(const float *edt, const uint8_t *mask, accel__dims d, int md, int threads,
                                   int32_t *out, uint32_t *count) {
  return accel__ct_wide(accel__dims_count(d)) ? markers_cpu_wide(edt, mask, d, md, threads, out, count)
                                              : markers_cpu(edt, mask, d, md, threads, out, count);
}
