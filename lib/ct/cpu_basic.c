/* Rescale, threshold and fill holes on the CPU. */
#include "ct/ct.h"

#include <stdlib.h>
#include <string.h>

void accel__ct_rescale_cpu(const void *in, accel_dtype dtype, accel__dims d, const double *slope,
                           const double *intercept, float *out, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
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
      out[i] = (uint8_t)(cmp == ACCEL_CT_GREATER         ? v > t                                                       \
                         : cmp == ACCEL_CT_GREATER_EQUAL ? v >= t                                                      \
                         : cmp == ACCEL_CT_LESS          ? v < t                                                       \
                                                         : v <= t);                                                             \
    }                                                                                                                  \
  } while (0)

void accel__ct_threshold_cpu(const void *in, accel_dtype dtype, uint64_t n, double t, accel_ct_compare cmp,
                             uint8_t *out, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  switch (dtype) {
  case ACCEL_DTYPE_U8: THRESHOLD_LOOP(uint8_t); break;
  case ACCEL_DTYPE_I16: THRESHOLD_LOOP(int16_t); break;
  case ACCEL_DTYPE_U16: THRESHOLD_LOOP(uint16_t); break;
  case ACCEL_DTYPE_I32: THRESHOLD_LOOP(int32_t); break;
  default: THRESHOLD_LOOP(float); break;
  }
}

/* Background components touching the volume's border are outside; every
 * other background voxel is a hole and becomes foreground. The outside is
 * found by a scanline flood from the border voxels: each popped seed grows to
 * its whole background run along x, and the runs of the neighbouring rows
 * that touch it (x0..x1 for 6-connectivity, one more each side for 26) are
 * pushed, one seed per run. Every voxel is visited a bounded number of times,
 * in runs of consecutive bytes. */
typedef struct seed {
  int64_t z, y, x;
} seed;

typedef struct seeds {
  seed *v;
  size_t n, cap;
} seeds;

static bool push_seed(seeds *s, int64_t z, int64_t y, int64_t x) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4096;
    seed *v = realloc(s->v, cap * sizeof *v);
    if (!v) return false;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (seed){z, y, x};
  return true;
}

/* state[]: 0 background not yet reached, 1 foreground, 2 outside. */
enum { FREE = 0, SOLID = 1, OUT = 2 };

static inline bool has_zero_byte(uint64_t w) { return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0; }

/* Push one seed per run of FREE voxels in row (z, y), x in [a, b]; words
 * of eight voxels that are all FREE or all taken are passed in one step. */
static bool scan_row(const uint8_t *state, accel__dims d, int64_t z, int64_t y, int64_t a, int64_t b, seeds *st) {
  if (z < 0 || y < 0 || z >= d.nz || y >= d.ny) return true;
  if (a < 0) a = 0;
  if (b >= d.nx) b = d.nx - 1;
  const uint8_t *row = state + ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
  bool in_run = false;
  int64_t x = a;
  while (x <= b) {
    if (x + 8 <= b + 1) {
      uint64_t w;
      memcpy(&w, row + x, 8);
      if (w == 0) { /* eight FREE voxels */
        if (!in_run && !push_seed(st, z, y, x)) return false;
        in_run = true;
        x += 8;
        continue;
      }
      if (!has_zero_byte(w)) { /* eight taken voxels */
        in_run = false;
        x += 8;
        continue;
      }
    }
    const bool free = row[x] == FREE;
    if (free && !in_run && !push_seed(st, z, y, x)) return false;
    in_run = free;
    x++;
  }
  return true;
}

accel_status accel__ct_fill_holes_cpu(const uint8_t *mask, accel__dims d, int connectivity, int threads, uint8_t *out) {
  (void)threads; /* read by OpenMP pragmas only */
  const uint64_t n = accel__dims_count(d);
  uint8_t *state = malloc(n ? n : 1);
  seeds st = {NULL, 0, 0};
  if (!state) return ACCEL_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (uint64_t i = 0; i < n; i++) state[i] = mask[i] ? SOLID : FREE;
  bool ok = true;
  /* seeds: every border voxel (runs are found when popped) */
  for (int64_t z = 0; z < d.nz && ok; z++)
    for (int64_t y = 0; y < d.ny && ok; y++) {
      const bool face = z == 0 || z == d.nz - 1 || y == 0 || y == d.ny - 1;
      ok = face ? scan_row(state, d, z, y, 0, d.nx - 1, &st)
                : (push_seed(&st, z, y, 0) && (d.nx == 1 || push_seed(&st, z, y, d.nx - 1)));
    }
  /* rows at (dz, dy) m = |dz| + |dy| steps away connect when m is within
   * the connectivity's reach, and then over x +-1 too while m + 1 is */
  const int reach = connectivity == 6 ? 1 : connectivity == 18 ? 2 : 3;
  while (ok && st.n) {
    const seed sd = st.v[--st.n];
    uint8_t *row = state + ((uint64_t)sd.z * (uint64_t)d.ny + (uint64_t)sd.y) * (uint64_t)d.nx;
    if (row[sd.x] != FREE) continue;
    int64_t x0 = sd.x, x1 = sd.x;
    while (x0 > 0 && row[x0 - 1] == FREE) x0--;
    while (x1 + 1 < d.nx && row[x1 + 1] == FREE) x1++;
    memset(row + x0, OUT, (size_t)(x1 - x0 + 1));
    for (int64_t dz = -1; dz <= 1 && ok; dz++)
      for (int64_t dy = -1; dy <= 1 && ok; dy++) {
        const int m = (dz != 0) + (dy != 0);
        if (!m || m > reach) continue;
        const int64_t grow = m + 1 <= reach ? 1 : 0;
        ok = scan_row(state, d, sd.z + dz, sd.y + dy, x0 - grow, x1 + grow, &st);
      }
  }
  free(st.v);
  if (!ok) {
    free(state);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (uint64_t i = 0; i < n; i++) out[i] = (uint8_t)(state[i] != OUT);
  free(state);
  return ACCEL_OK;
}
