/* Rescale, threshold and fill holes on the CPU. */
#include "ct/ct.h"

#include <stdlib.h>

void accel__ct_rescale_cpu(const void *in, accel_dtype dtype, accel__dims d, const double *slope,
                           const double *intercept, float *out, int threads) {
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t z = 0; z < d.nz; z++) {
    const double a = slope ? slope[z] : 1.0, b = intercept ? intercept[z] : 0.0;
    const uint64_t base = (uint64_t)z * plane;
    if (dtype == ACCEL_DTYPE_I16) {
      const int16_t *s = (const int16_t *)in + base;
      for (uint64_t i = 0; i < plane; i++) out[base + i] = (float)((double)s[i] * a + b);
    } else {
      const uint16_t *s = (const uint16_t *)in + base;
      for (uint64_t i = 0; i < plane; i++) out[base + i] = (float)((double)s[i] * a + b);
    }
  }
}

#define THRESHOLD_LOOP(T)                                                                                              \
  do {                                                                                                                 \
    const T *s = (const T *)in;                                                                                        \
    _Pragma("omp parallel for num_threads(threads) schedule(static)") for (uint64_t i = 0; i < n; i++) {               \
      const double v = (double)s[i];                                                                                   \
      out[i] = (uint8_t)(cmp == ACCEL_CT_GREATER         ? v > t                                                      \
                         : cmp == ACCEL_CT_GREATER_EQUAL ? v >= t                                                     \
                         : cmp == ACCEL_CT_LESS          ? v < t                                                      \
                                                         : v <= t);                                                   \
    }                                                                                                                  \
  } while (0)

void accel__ct_threshold_cpu(const void *in, accel_dtype dtype, uint64_t n, double t, accel_ct_compare cmp,
                             uint8_t *out, int threads) {
  switch (dtype) {
  case ACCEL_DTYPE_U8: THRESHOLD_LOOP(uint8_t); break;
  case ACCEL_DTYPE_I16: THRESHOLD_LOOP(int16_t); break;
  case ACCEL_DTYPE_U16: THRESHOLD_LOOP(uint16_t); break;
  case ACCEL_DTYPE_I32: THRESHOLD_LOOP(int32_t); break;
  default: THRESHOLD_LOOP(float); break;
  }
}

/* Background components touching the volume's border are outside; every
 * other background voxel is a hole and becomes foreground. */
accel_status accel__ct_fill_holes_cpu(const uint8_t *mask, accel__dims d, int connectivity, int threads, uint8_t *out) {
  const uint64_t n = accel__dims_count(d);
  uint32_t *root = malloc((n ? n : 1) * sizeof(uint32_t));
  uint8_t *outside = calloc(n / 8 + 1, 1); /* one bit per component root */
  if (!root || !outside) {
    free(root);
    free(outside);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_status s = accel__ct_components(mask, d, false, connectivity, threads, root);
  if (s) {
    free(root);
    free(outside);
    return s;
  }
  /* mark the components of border voxels */
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++) {
      const bool face = z == 0 || z == d.nz - 1 || y == 0 || y == d.ny - 1;
      const uint64_t row = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
      for (int64_t x = 0; x < d.nx; x += face || x == d.nx - 1 ? 1 : d.nx - 1) {
        const uint32_t r = root[row + (uint64_t)x];
        if (r != ACCEL__CT_NONE) outside[r >> 3] |= (uint8_t)(1u << (r & 7));
      }
    }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (uint64_t i = 0; i < n; i++) {
    const uint32_t r = root[i];
    out[i] = (uint8_t)(r == ACCEL__CT_NONE ? 1 : !((outside[r >> 3] >> (r & 7)) & 1));
  }
  free(root);
  free(outside);
  return ACCEL_OK;
}
