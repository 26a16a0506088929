/*
 * kernels/ct.cu - the CT stages on the GPU, and volumes larger than the
 * device memory budget in Z slabs.
 *
 * Every kernel is a per-voxel (or per-line) function that the host emulation
 * also runs, in loops, for tests without a GPU; the arithmetic is the CPU's
 * (the EDT's lines come from lib/ct/edt_line.h), so results are identical.
 *
 * - rescale, threshold: one thread per voxel.
 * - connected components (fill holes: background, 6 or 26; markers: pores,
 *   26): the concurrent union-find of lib/ct/union_find.h over voxel indices
 *   (atomicMin links from the larger root to the smaller, relaxed atomic
 *   loads, path halving), then every voxel takes its root: the smallest
 *   voxel of its component, as on the CPU. Labels are uint32 up to
 *   accel__ct_index_limit voxels and uint64 beyond (the same code
 *   instantiated for both; atomicMin on 64 bits where the labels are wide).
 * - EDT: one thread per row (two sweeps), then one thread per line along y
 *   and along z with its scratch interleaved with its neighbours' (coalesced).
 * - markers: the window-maximum test per voxel on the GPU; the rest (numpy's
 *   order of ties and the minimum distance, a sequential greedy choice over a
 *   few candidates) on the host, from the downloaded roots and flags. The
 *   general search (peak_local_max's other parameters) uses the same window
 *   test where it is the same (accel__ct_peaks_window_shared), and its own
 *   (lib/ct/peak_window.h, over the regions the host builds) otherwise.
 * - the watershed stays on the CPU (scikit-image's tie order is a sequential
 *   binary heap's), and so does the network.
 *
 * Slabs: fill holes labels each slab's background on the device and joins
 * the labels across the planes where slabs meet on the host (with which of
 * them reach the volume's border), then writes each slab; the EDT runs its x and y passes
 * per slab and its z pass per block of rows across all slabs; the markers'
 * window test runs per slab with min_distance planes of halo on each side,
 * with the components labelled on the host. Each is exact by construction:
 * the same operations on the same values as the whole-volume run.
 */
#include "cuda_util.h"

#include "ct/edt_line.h"
#include "ct/ft_line.h"
#include "ct/ops.h"
#include "ct/peak_window.h"
#include "ct/union_find.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace {

/* Component labels are voxel indices: uint32 up to accel__ct_index_limit
 * voxels, uint64 beyond (the same kernels, instantiated twice); none(T) is
 * "no component". */
template <class T> __host__ __device__ constexpr T none() { return (T) ~(T)0; }

/* The union-find of lib/ct/union_find.h for either label type. */
__host__ __device__ inline void uf_unite(uint32_t *L, uint32_t a, uint32_t b) { accel__uf_unite(L, a, b); }
__host__ __device__ inline void uf_unite(uint64_t *L, uint64_t a, uint64_t b) { accel__uf_unite_wide(L, a, b); }
__host__ __device__ inline void uf_flatten(uint32_t *L, uint32_t x) { accel__uf_flatten(L, x); }
__host__ __device__ inline void uf_flatten(uint64_t *L, uint64_t x) { accel__uf_flatten_wide(L, x); }
__host__ __device__ inline uint32_t uf_load(uint32_t *p) { return accel__uf_load(p); }
__host__ __device__ inline uint64_t uf_load(uint64_t *p) { return accel__uf_load_wide(p); }

/* The host's peak search parts (lib/ct/cpu_markers.c) for either label type. */
inline uint32_t *mask_list(const uint8_t *m, uint64_t n, uint64_t *np, uint32_t *) {
  return accel__ct_mask_list(m, n, np);
}
inline uint64_t *mask_list(const uint8_t *m, uint64_t n, uint64_t *np, uint64_t *) {
  return accel__ct_mask_list_wide(m, n, np);
}
inline accel_status components_list(const uint8_t *m, accel__dims d, const uint32_t *list, uint64_t np, int threads,
                                    uint32_t *root) {
  return accel__ct_components_list(m, d, list, np, 26, threads, root);
}
inline accel_status components_list(const uint8_t *m, accel__dims d, const uint64_t *list, uint64_t np, int threads,
                                    uint64_t *root) {
  return accel__ct_components_list_wide(m, d, list, np, 26, threads, root);
}
inline accel_status markers_finish(const float *edt, const uint8_t *m, accel__dims d, int md, const uint32_t *list,
                                   uint64_t np, uint32_t *root, uint8_t *cand, int32_t *out, uint32_t *count) {
  return accel__ct_markers_finish(edt, m, d, md, list, np, root, cand, out, count);
}
inline accel_status markers_finish(const float *edt, const uint8_t *m, accel__dims d, int md, const uint64_t *list,
                                   uint64_t np, uint64_t *root, uint8_t *cand, int32_t *out, uint32_t *count) {
  return accel__ct_markers_finish_wide(edt, m, d, md, list, np, root, cand, out, count);
}

/* ------------------------------------------------------------ elementwise */

struct rescale_f {
  const void *in;
  int i16;
  const double *slope, *intercept; /* device copies, per slice (or null) */
  float *out;
  uint64_t plane;
  int64_t z0; /* first slice of this chunk */
  __host__ __device__ void operator()(uint64_t i) const {
    const int64_t z = z0 + (int64_t)(i / plane);
    const double a = slope ? slope[z] : 1.0, b = intercept ? intercept[z] : 0.0;
    const double v = i16 ? (double)((const int16_t *)in)[i] : (double)((const uint16_t *)in)[i];
    out[i] = (float)(v * a + b);
  }
};

struct threshold_f {
  const void *in;
  accel_dtype dt;
  double t;
  int cmp;
  uint8_t *out;
  __host__ __device__ void operator()(uint64_t i) const {
    double v;
    switch (dt) {
    case ACCEL_DTYPE_U8: v = ((const uint8_t *)in)[i]; break;
    case ACCEL_DTYPE_I16: v = ((const int16_t *)in)[i]; break;
    case ACCEL_DTYPE_U16: v = ((const uint16_t *)in)[i]; break;
    case ACCEL_DTYPE_I32: v = ((const int32_t *)in)[i]; break;
    default: v = ((const float *)in)[i]; break;
    }
    out[i] = (uint8_t)(cmp == 0 ? v > t : cmp == 1 ? v >= t : cmp == 2 ? v < t : v <= t);
  }
};

/* ------------------------------------------------------------ components */

struct dims3 {
  int64_t nz, ny, nx;
  __host__ __device__ uint64_t count() const { return (uint64_t)nz * (uint64_t)ny * (uint64_t)nx; }
  /* voxel i's coordinates, and the index of (z, y, x) */
  __host__ __device__ void coords(uint64_t i, int64_t *z, int64_t *y, int64_t *x) const {
    *x = (int64_t)(i % (uint64_t)nx);
    *y = (int64_t)((i / (uint64_t)nx) % (uint64_t)ny);
    *z = (int64_t)(i / ((uint64_t)nx * (uint64_t)ny));
  }
  __host__ __device__ uint64_t index(int64_t z, int64_t y, int64_t x) const {
    return ((uint64_t)z * (uint64_t)ny + (uint64_t)y) * (uint64_t)nx + (uint64_t)x;
  }
};

/* The voxels a labelling joins: mask set (want_set) or clear. */
struct selected {
  const uint8_t *m;
  bool want_set;
  __host__ __device__ bool operator()(uint64_t i) const { return (m[i] != 0) == want_set; }
};

template <class T> struct cc_init_f {
  selected sel;
  T *L;
  __host__ __device__ void operator()(uint64_t i) const { L[i] = sel(i) ? (T)i : none<T>(); }
};

/* Which neighbours connect: those at most `steps` orthogonal steps away (1:
 * faces, 6-connected; 2: faces and edges, 18; 3: all 26). */
struct reach {
  int steps;
};
inline reach reach_of(int connectivity) { return reach{connectivity == 6 ? 1 : connectivity == 18 ? 2 : 3}; }

/* Union each selected voxel with its selected backward neighbours. */
template <class T> struct cc_merge_f {
  selected sel;
  reach conn;
  dims3 d;
  T *L;
  __host__ __device__ void operator()(uint64_t i) const {
    if (uf_load(&L[i]) == none<T>()) return;
    int64_t z, y, x;
    d.coords(i, &z, &y, &x);
    for (int dz = -1; dz <= 0; dz++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
          if (dz == 0 && (dy > 0 || (dy == 0 && dx >= 0))) continue;
          if ((dz != 0) + (dy != 0) + (dx != 0) > conn.steps) continue;
          const int64_t zz = z + dz, yy = y + dy, xx = x + dx;
          if (zz < 0 || yy < 0 || xx < 0 || yy >= d.ny || xx >= d.nx) continue;
          const uint64_t j = d.index(zz, yy, xx);
          if (sel(j)) uf_unite(L, (T)i, (T)j);
        }
  }
};

template <class T> struct cc_flatten_f {
  T *L;
  __host__ __device__ void operator()(uint64_t i) const {
    if (uf_load(&L[i]) != none<T>()) uf_flatten(L, (T)i);
  }
};

/* Components of the voxels whose mask value is selected: L = the smallest
 * voxel index of each (none<T>() elsewhere), indices local to the array. */
template <class T>
accel_status components(accel__executor *x, const uint8_t *m, dims3 d, bool want_set, reach conn, T *L, char *why) {
  const uint64_t n = d.count();
  const selected sel = {m, want_set};
  accel_status s = each(x, n, cc_init_f<T>{sel, L}, why, "component labels");
  if (!s) s = each(x, n, cc_merge_f<T>{sel, conn, d, L}, why, "component merge");
  if (!s) s = each(x, n, cc_flatten_f<T>{L}, why, "component roots");
  return s;
}

/* ------------------------------------------------------------ fill holes */

/* Mark the components of background voxels on the volume's border. In a
 * slab, only the faces that are the volume's count (first_z, last_z). */
template <class T> struct border_f {
  const T *L;
  dims3 d;
  bool first_z, last_z;
  uint8_t *outside;
  __host__ __device__ void operator()(uint64_t i) const {
    const T r = L[i];
    if (r == none<T>()) return;
    int64_t z, y, x;
    d.coords(i, &z, &y, &x);
    if (x == 0 || y == 0 || x == d.nx - 1 || y == d.ny - 1 || (first_z && z == 0) || (last_z && z == d.nz - 1))
      outside[r] = 1; /* the same value from every thread: no race on the result */
  }
};

template <class T> struct fill_out_f {
  const uint8_t *m;
  const T *L;
  const uint8_t *outside;
  uint8_t *out;
  __host__ __device__ void operator()(uint64_t i) const { out[i] = (uint8_t)(m[i] ? 1 : !outside[L[i]]); }
};

/* The pore mask (accel_ct_pores) from the solid and filled masks. */
struct pores_f {
  const uint8_t *solid, *filled; /* filled: NULL for ACCEL_CT_PORES_ALL */
  uint8_t *out;
  __host__ __device__ void operator()(uint64_t i) const {
    out[i] = (uint8_t)(filled ? filled[i] && !solid[i] : !solid[i]);
  }
};

/* Whole volume on the device: mask in, filled out (may alias). */
template <class T>
accel_status fill_device(accel__executor *x, const uint8_t *m, dims3 d, reach conn, uint8_t *out, char *why) {
  const uint64_t n = d.count();
  dbuf L, outside;
  accel_status s = L.get(x, n * sizeof(T), why);
  if (!s) s = outside.get(x, n, why);
  if (!s) s = accel__cuda_check(x->zero(outside.p, n), why, "memset");
  if (!s) s = components(x, m, d, false, conn, L.as<T>(), why);
  if (!s) s = each(x, n, border_f<T>{L.as<T>(), d, true, true, outside.p}, why, "fill border");
  if (!s) s = each(x, n, fill_out_f<T>{m, L.as<T>(), outside.p, out}, why, "fill output");
  return s;
}

/* ------------------------------------------------------------ EDT */

/* The first pass (squared distance along x to the row's nearest zero, as
 * accel__edt_row computes it) with a warp per row, so that a warp reads and
 * writes 32 consecutive voxels at a time: a forward sweep over the row in
 * chunks of 32 finds each voxel's nearest zero at or before it (the chunk's
 * zeros in one ballot, the last one carried to the next chunk) and keeps its
 * distance in the output's bits; a backward sweep does the same from the
 * right and writes the scaled square. The emulation runs the same lane code,
 * lane after lane. */
constexpr int32_t EDT_FAR = 0x3fffffff; /* no zero on that side (accel__edt_row's saturation) */

__host__ __device__ inline float edt_bits_to_float(int32_t v) {
#ifdef __CUDA_ARCH__
  return __int_as_float(v);
#else
  float f;
  memcpy(&f, &v, sizeof f);
  return f;
#endif
}

__host__ __device__ inline int32_t edt_float_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_int(f);
#else
  int32_t v;
  memcpy(&v, &f, sizeof v);
  return v;
#endif
}

/* Bit l set: voxel x0 + l of the row is a zero (lanes past the row: not). */
__host__ __device__ inline uint32_t edt_zero_mask(const uint8_t *row, int64_t x0, int64_t nx, unsigned lane) {
#ifdef __CUDA_ARCH__
  return __ballot_sync(0xffffffffu, x0 + lane < nx && !row[x0 + lane]);
#else
  (void)lane;
  uint32_t z = 0;
  for (int64_t l = 0; l < 32 && x0 + l < nx; l++)
    if (!row[x0 + l]) z |= 1u << l;
  return z;
#endif
}

__host__ __device__ inline int edt_highest(uint32_t z) { /* z != 0 */
#ifdef __CUDA_ARCH__
  return 31 - __clz(z);
#else
  return 31 - __builtin_clz(z);
#endif
}

__host__ __device__ inline int edt_lowest(uint32_t z) { /* z != 0 */
#ifdef __CUDA_ARCH__
  return __ffs(z) - 1;
#else
  return __builtin_ctz(z);
#endif
}

/* Forward, lane `lane` of chunk x0 (zeros z; last: the nearest zero left of
 * the chunk, -1 if none): the distance to the nearest zero at or before. */
__host__ __device__ inline void edt_forward_lane(float *o, int64_t nx, int64_t x0, uint32_t z, int64_t last,
                                                 unsigned lane) {
  const int64_t x = x0 + lane;
  if (x >= nx) return;
  const uint32_t upto = z & (0xffffffffu >> (31 - lane));
  const int64_t p = upto ? x0 + edt_highest(upto) : last;
  o[x] = edt_bits_to_float(p < 0 || x - p >= EDT_FAR ? EDT_FAR : (int32_t)(x - p));
}

/* Backward, lane `lane` of chunk x0 (next: the nearest zero right of the
 * chunk, -1 if none): the nearer of both sides, scaled and squared. */
__host__ __device__ inline void edt_backward_lane(float *o, int64_t nx, double sx, int64_t x0, uint32_t z, int64_t next,
                                                  unsigned lane) {
  const int64_t x = x0 + lane;
  if (x >= nx) return;
  const uint32_t from = z & (0xffffffffu << lane);
  const int64_t q = from ? x0 + edt_lowest(from) : next;
  const int32_t right = q < 0 || q - x >= EDT_FAR ? EDT_FAR : (int32_t)(q - x), left = edt_float_to_bits(o[x]);
  const int32_t dx = left < right ? left : right;
  const double sd = (double)dx * sx;
  o[x] = dx >= EDT_FAR ? INFINITY : (float)(sd * sd);
}

/* Row r's sweeps: lane `lane` of its warp (device), every lane (emulation). */
__host__ __device__ inline void edt_row_warp(const uint8_t *m, float *f, int64_t nx, double sx, uint64_t r,
                                             unsigned lane) {
  const uint8_t *row = m + r * (uint64_t)nx;
  float *o = f + r * (uint64_t)nx;
  int64_t last = -1;
  for (int64_t x0 = 0; x0 < nx; x0 += 32) {
    const uint32_t z = edt_zero_mask(row, x0, nx, lane);
#ifdef __CUDA_ARCH__
    edt_forward_lane(o, nx, x0, z, last, lane);
#else
    for (unsigned l = 0; l < 32; l++) edt_forward_lane(o, nx, x0, z, last, l);
#endif
    if (z) last = x0 + edt_highest(z);
  }
  int64_t next = -1;
  for (int64_t x0 = (nx - 1) / 32 * 32; x0 >= 0; x0 -= 32) {
    const uint32_t z = edt_zero_mask(row, x0, nx, lane);
#ifdef __CUDA_ARCH__
    edt_backward_lane(o, nx, sx, x0, z, next, lane);
#else
    for (unsigned l = 0; l < 32; l++) edt_backward_lane(o, nx, sx, x0, z, next, l);
#endif
    if (z) next = x0 + edt_lowest(z);
  }
}

__global__ void k_edt_rows(const uint8_t *m, float *f, int64_t nx, double sx, uint64_t rows) {
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
  for (uint64_t r = warp; r < rows; r += warps) edt_row_warp(m, f, nx, sx, r, threadIdx.x % 32);
}

accel_status edt_rows(accel__executor *x, const uint8_t *m, float *f, int64_t nx, double sx, uint64_t rows, char *why) {
  if (!rows || nx <= 0) return ACCEL_OK;
  const auto host = [&] {
    for (uint64_t r = 0; r < rows; r++) edt_row_warp(m, f, nx, sx, r, 0);
  };
  const uint64_t blocks = (rows + 7) / 8; /* 8 warps a block */
  const dim3 grid((unsigned)(blocks < 65535u * 16 ? blocks : 65535u * 16));
  return accel__cuda_check(x->launch(host, k_edt_rows, grid, dim3(256), 0, m, f, nx, sx, rows), why,
                           "distance transform rows");
}

/* Lines along an axis of a (nz, ny, nx) block: line l of `count` starting at
 * `first`; entries `stride` apart; each line's scratch interleaved. */
struct edt_lines_f {
  float *f;
  int64_t n, stride, nx; /* line length; element stride; x extent */
  bool along_z;
  uint64_t first, count;
  double s;
  bool root;
  int32_t *v;
  double *zz, *g, *h;
  __host__ __device__ void operator()(uint64_t t) const {
    const uint64_t l = first + t;
    /* along y: l = z * nx + x; along z: l = y * nx + x */
    const uint64_t a = l / (uint64_t)nx, xx = l % (uint64_t)nx;
    float *line = f + (along_z ? a * (uint64_t)nx + xx : a * (uint64_t)n * (uint64_t)nx + xx);
    const accel__edt_scratch w = {v + t, zz + t, g + t, h + t, (int64_t)count};
    accel__edt_line(line, stride, n, s, w);
    if (root)
      for (int64_t i = 0; i < n; i++) line[i * stride] = sqrtf(line[i * stride]);
  }
};

/* The y pass (axis 1) or z pass (axis 0) over a (nz, ny, nx) block on the
 * device, lines in chunks whose scratch fits what remains of the budget. */
accel_status edt_pass(accel__executor *x, float *f, dims3 d, int axis, double s, bool root, char *why) {
  const int64_t n = axis == 0 ? d.nz : d.ny;
  const int64_t stride = axis == 0 ? d.ny * d.nx : d.nx;
  const uint64_t lines = (uint64_t)(axis == 0 ? d.ny : d.nz) * (uint64_t)d.nx;
  const uint64_t per_line = (uint64_t)n * 4 + (uint64_t)(n + 1) * 8 + (uint64_t)n * 16;
  uint64_t chunk = lines;
  const uint64_t room = x->room();
  if (chunk * per_line > room) chunk = room / per_line;
  if (chunk == 0) {
    accel__why(why, "the distance transform needs %.1f MiB of line scratch, over the budget", per_line / 1048576.0);
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  dbuf v, zz, g, h;
  accel_status st = v.get(x, chunk * (uint64_t)n * 4, why);
  if (!st) st = zz.get(x, chunk * (uint64_t)(n + 1) * 8, why);
  if (!st) st = g.get(x, chunk * (uint64_t)n * 8, why);
  if (!st) st = h.get(x, chunk * (uint64_t)n * 8, why);
  for (uint64_t first = 0; !st && first < lines; first += chunk) {
    const uint64_t cnt = lines - first < chunk ? lines - first : chunk;
    st = each(x, cnt,
              edt_lines_f{f, n, stride, d.nx, axis == 0, first, cnt, s, root, v.as<int32_t>(), zz.as<double>(),
                          g.as<double>(), h.as<double>()},
              why, "distance transform lines");
  }
  return st;
}

/* x and y passes of a (nz, ny, nx) block: pores in, squared partial distances out. */
accel_status edt_xy(accel__executor *x, const uint8_t *m, float *f, dims3 d, const double sp[3], char *why) {
  accel_status s = edt_rows(x, m, f, d.nx, sp[2], (uint64_t)d.nz * (uint64_t)d.ny, why);
  if (!s) s = edt_pass(x, f, d, 1, sp[1], false, why);
  return s;
}

/* ------------------------------------------------------------ markers */

/* f(i) for i in [0, n), where every thread walks the same list of `count`
 * ints at f.offsets() (a window's offsets, in the same order, so a warp
 * reads one of them at a time): each block first copies the list into
 * shared memory and points its copy of f there, so the walk reads shared
 * memory (a broadcast) rather than global memory. A list too long for
 * shared memory stays where it is (each). Loops in emulation. */
constexpr size_t OFFSETS_SHARED = 32768; /* bytes */

template <class F> __global__ void k_each_offsets(uint64_t n, F f, int count) {
  extern __shared__ int staged[];
  for (int k = threadIdx.x; k < count; k += blockDim.x) staged[k] = f.offsets()[k];
  __syncthreads();
  f.use_offsets(staged);
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) f(i);
}

template <class F>
accel_status each_offsets(accel__executor *x, uint64_t n, F f, int count, char *why, const char *what,
                          accel__cuda_site at = accel__cuda_here()) {
  const size_t bytes = (size_t)(count > 0 ? count : 0) * sizeof(int);
  if (!n || bytes > OFFSETS_SHARED) return each(x, n, f, why, what, at);
  const uint64_t blocks = (n + 255) / 256; /* few enough blocks that copying the list stays cheap */
  const dim3 grid((unsigned)(blocks < 8192 ? blocks : 8192));
  const auto host = [&] {
    for (uint64_t i = 0; i < n; i++) f(i);
  };
  return accel__cuda_check(x->launch(host, k_each_offsets<F>, grid, dim3(256), bytes, n, f, count), why, what, at);
}

/* The window-maximum test of each pore voxel in planes [z0, z1) of a block
 * that holds planes [b0, b1) of the volume (edt, mask and roots). */
template <class T> struct window_f {
  const float *edt;
  const uint8_t *m;
  const T *root;
  dims3 d;    /* the block's extents */
  int64_t z0; /* first tested plane, in block coordinates */
  const int *offs;
  int noffs;
  uint8_t *cand; /* the tested planes' flags, from z0 */
  __host__ __device__ const int *offsets() const { return offs; }
  __host__ __device__ void use_offsets(const int *p) { offs = p; }
  __host__ __device__ void operator()(uint64_t t) const {
    const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
    const uint64_t i = (uint64_t)z0 * plane + t;
    if (!m[i]) {
      cand[t] = 0;
      return;
    }
    int64_t z, y, x;
    d.coords(i, &z, &y, &x);
    const float v = edt[i];
    const T c = root[i];
    uint8_t is_max = 1;
    for (int k = 0; k < noffs && is_max; k++) {
      const int64_t zz = z + offs[3 * k], yy = y + offs[3 * k + 1], xx = x + offs[3 * k + 2];
      if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
      const uint64_t j = d.index(zz, yy, xx);
      if (m[j] && root[j] == c && edt[j] > v) is_max = 0;
    }
    cand[t] = is_max;
  }
};

/* ------------------------------------------------------------ the executor's context */

struct run_ctx {
  accel__executor *x;
  accel__call *call;
  dims3 d;
};

/* Z planes per slab for `per_voxel` bytes a voxel plus `halo` planes a side. */
int64_t slab_planes(const run_ctx &r, uint64_t per_voxel, int64_t halo) {
  const uint64_t plane = (uint64_t)r.d.ny * (uint64_t)r.d.nx;
  const uint64_t room = r.x->room() / 10 * 9; /* headroom for small buffers */
  const uint64_t plane_bytes = plane * per_voxel;
  if (plane_bytes == 0) return r.d.nz;
  const int64_t fit = (int64_t)(room / plane_bytes) - 2 * halo;
  return fit < 1 ? 0 : fit > r.d.nz ? r.d.nz : fit;
}

/* Z planes per slab for `staged` bytes a voxel that slab_stager uploads
 * (with `halo` planes a side) and `fixed` bytes a voxel of the slab's own:
 * when the volume takes several slabs and two staged ones fit beside the
 * rest, as many as fit so (*overlap); else slab_planes' single-buffer count. */
int64_t staged_planes(const run_ctx &r, uint64_t staged, uint64_t fixed, int64_t halo, bool *overlap) {
  const int64_t one = slab_planes(r, staged + fixed, halo);
  *overlap = false;
  if (one < 1 || one >= r.d.nz || !staged) return one;
  const uint64_t plane = (uint64_t)r.d.ny * (uint64_t)r.d.nx, room = r.x->room() / 10 * 9;
  const uint64_t per = plane * (2 * staged + fixed), extra = 4 * (uint64_t)halo * plane * staged;
  if (room <= extra || (room - extra) / per < 1) return one;
  int64_t two = (int64_t)((room - extra) / per);
  /* planes a staging holds (8 bytes spare: window_host aligns its roots) */
  const int64_t pinned = (int64_t)((slab_stager::max_bytes - 8) / (plane * staged)) - 2 * halo;
  if (pinned < 1) return one;
  two = two > pinned ? pinned : two;
  *overlap = true;
  return two > r.d.nz ? r.d.nz : two;
}

/* Host copies of device arrays (accel_array_on_device) for the parts of a
 * stage that read and write host memory (the slab paths beyond the budget,
 * the pipeline's host stages): down() moves each job pointer added to a
 * host copy (an input's contents downloaded), up() uploads the outputs
 * when the stage succeeded and puts the device pointers back. */
struct host_copies {
  accel__executor *x;
  struct slot {
    void **ptr;
    size_t bytes;
    bool in;
    void *dev;
  } s[8];
  int n = 0;
  bool moved = false;
  explicit host_copies(accel__executor *ex) : x(ex) {}
  host_copies(const host_copies &) = delete;
  host_copies &operator=(const host_copies &) = delete;
  template <class T> void add(T **ptr, size_t bytes, bool in) { s[n++] = slot{(void **)ptr, bytes, in, (void *)*ptr}; }
  [[nodiscard]] accel_status down(char *why) {
    accel_status st = ACCEL_OK;
    for (int i = 0; i < n; i++) *s[i].ptr = nullptr;
    moved = true;
    for (int i = 0; i < n && !st; i++) {
      if (!(*s[i].ptr = malloc(s[i].bytes ? s[i].bytes : 1))) {
        accel__why(why, "out of host memory for a copy of a device array");
        st = ACCEL_ERR_OUT_OF_MEMORY;
      } else if (s[i].in && s[i].bytes) {
        st = download(x, *s[i].ptr, s[i].dev, s[i].bytes, why);
      }
    }
    return st;
  }
  [[nodiscard]] accel_status up(char *why, accel_status st) {
    if (!moved) return st;
    for (int i = 0; i < n && !st; i++)
      if (!s[i].in && s[i].bytes) st = upload(x, s[i].dev, *s[i].ptr, s[i].bytes, why);
    if (!st && n) st = accel__cuda_check(x->sync(), why, "upload"); /* before the host copies go */
    restore();
    return st;
  }
  void restore() {
    if (!moved) return;
    if (n) x->drain();
    for (int i = 0; i < n; i++) {
      free(*s[i].ptr);
      *s[i].ptr = s[i].dev;
    }
    moved = false;
  }
  ~host_copies() { restore(); }
};

/* ------------------------------------------------------------ stages over host volumes */

/* Threshold (with the optional rescale first) of host `in` into host
 * `solid`, in chunks of whole planes. */
accel_status threshold_host(run_ctx &r, const void *in, accel_dtype dt, const double *slope, const double *intercept,
                            double t, int cmp, uint8_t *solid, unsigned dev = 0) {
  const bool in_dev = dev & ACCEL__CT_DEV_IN, out_dev = dev & ACCEL__CT_DEV_OUT; /* used in place */
  char *why = r.call->why;
  const uint64_t plane = (uint64_t)r.d.ny * (uint64_t)r.d.nx;
  const uint64_t isz = accel_dtype_size(dt);
  const bool rescale = slope != nullptr;
  dbuf ds, di;
  accel_status s = ACCEL_OK;
  if (rescale) {
    s = ds.get(r.x, (uint64_t)r.d.nz * 8, why);
    if (!s) s = di.get(r.x, (uint64_t)r.d.nz * 8, why);
    if (!s) s = upload(r.x, ds.p, slope, (size_t)r.d.nz * 8, why);
    if (!s) s = upload(r.x, di.p, intercept, (size_t)r.d.nz * 8, why);
    if (s) return s;
  }
  /* the whole volume at once, or chunks (with room for two of the input's: slab_stager) */
  const uint64_t per_voxel = (in_dev ? 0 : isz) + (out_dev ? 0 : 1) + (rescale ? 4 : 0);
  bool overlap = false;
  int64_t planes = staged_planes(r, in_dev ? 0 : isz, per_voxel - (in_dev ? 0 : isz), 0, &overlap);
  if (planes < 1) {
    accel__why(why, "one plane needs %.1f MiB, over the budget", plane * per_voxel / 1048576.0);
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  if (planes > r.d.nz) planes = r.d.nz;
  slab_stager sg; /* host input: the next chunk uploaded while this one is thresholded */
  dbuf dout, dflt;
  const auto depth = [&](int64_t z0) { return r.d.nz - z0 < planes ? r.d.nz - z0 : planes; };
  const auto put = [&](int64_t k) {
    const uint8_t *from = (const uint8_t *)in + (uint64_t)(k * planes) * plane * isz;
    return sg.put(k, (uint64_t)depth(k * planes) * plane * isz, from, why);
  };
  if (!in_dev) s = sg.init(r.x, (uint64_t)planes * plane * isz, overlap, why);
  if (!s && !out_dev) s = dout.get(r.x, (uint64_t)planes * plane, why);
  if (!s && rescale) s = dflt.get(r.x, (uint64_t)planes * plane * 4, why);
  if (!s && !in_dev) s = put(0);
  if (s) return s;
  for (int64_t k = 0, z0 = 0; z0 < r.d.nz && !s; k++, z0 += planes) {
    const int64_t nzc = depth(z0);
    const uint64_t cnt = (uint64_t)nzc * plane;
    const uint8_t *chunk = (const uint8_t *)in + (uint64_t)z0 * plane * isz;
    uint8_t *to = out_dev ? solid + (uint64_t)z0 * plane : dout.p, *staged = nullptr;
    if (!in_dev) s = sg.ready(k, &staged, why);
    const void *src = in_dev ? (const void *)chunk : (const void *)staged;
    accel_dtype sdt = dt;
    if (!s && rescale) {
      s = each(r.x, cnt,
               rescale_f{src, dt == ACCEL_DTYPE_I16, ds.as<double>(), di.as<double>(), dflt.as<float>(), plane, z0},
               why, "rescale");
      src = dflt.p;
      sdt = ACCEL_DTYPE_F32;
    }
    if (!s) s = each(r.x, cnt, threshold_f{src, sdt, t, cmp, to}, why, "threshold");
    if (!s && !in_dev) s = sg.done(k, why);
    if (!s && !in_dev && z0 + planes < r.d.nz) s = put(k + 1);
    if (!s && !out_dev) s = download(r.x, solid + (uint64_t)z0 * plane, dout.p, cnt, why);
  }
  return s;
}

/* Host union-find over global voxel indices, for merging slab labels. */
template <class T> struct host_uf {
  T *parent = nullptr;     /* indexed by voxel; only touched entries are valid */
  uint8_t *flag = nullptr; /* per root: reaches the border */
  bool ok(uint64_t n) {
    parent = (T *)malloc((n ? n : 1) * sizeof(T));
    flag = (uint8_t *)calloc(n ? n : 1, 1);
    return parent && flag;
  }
  ~host_uf() {
    free(parent);
    free(flag);
  }
  T find(T a) {
    while (parent[a] != a) {
      parent[a] = parent[parent[a]];
      a = parent[a];
    }
    return a;
  }
  void unite(T a, T b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (a > b) {
      const T t = a;
      a = b;
      b = t;
    }
    parent[b] = a;
    flag[a] = (uint8_t)(flag[a] | flag[b]);
  }
};

/* fill_slabs' bytes a voxel: staged slabs of mask and outside flags
 * (slab_stager); labels (label_bytes), outside, out, bitmap. */
constexpr uint64_t FILL_STAGED = 2;
constexpr uint64_t fill_fixed(uint64_t label_bytes) { return label_bytes + 1 + 1 + 1; }

/* Fill holes of a host mask into host out, in Z slabs. Pass 1 labels each
 * slab's background on the device and brings the labels back with the
 * roots that reach the volume's border; the host joins the labels across the
 * planes where slabs meet; pass 2 labels each slab again and writes it with
 * the joined answer (per voxel, whether its component is outside). */
template <class T> accel_status fill_slabs(run_ctx &r, const uint8_t *mask, reach conn, uint8_t *out) {
  char *why = r.call->why;
  const dims3 &d = r.d;
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx, n = d.count();
  bool overlap = false;
  const int64_t planes = staged_planes(r, FILL_STAGED, fill_fixed(sizeof(T)), 0, &overlap);
  if (planes < 1) {
    accel__why(why, "one plane of fill holes needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  host_uf<T> uf;
  if (!uf.ok(n)) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const uint64_t cap = (uint64_t)planes * plane;
  const int64_t slabs = (d.nz + planes - 1) / planes;
  const auto depth = [&](int64_t z0) { return d.nz - z0 < planes ? d.nz - z0 : planes; }; /* planes from z0 */
  slab_stager sg; /* pass 1's slab k is put k, pass 2's slab k is put slabs + k */
  dbuf dl, dout, doutside;
  accel_status s = sg.init(r.x, 2 * cap, overlap, why);
  if (!s) s = dl.get(r.x, cap * sizeof(T), why);
  if (!s) s = doutside.get(r.x, cap, why);
  if (!s) s = dout.get(r.x, cap, why);
  T *roots = (T *)malloc(cap * sizeof(T));
  uint8_t *flags = (uint8_t *)malloc(cap);
  if (!s && (!roots || !flags)) {
    accel__why(why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  /* pass 1: per slab, roots of every voxel (brought back), border roots;
   * the host links each slab's voxels to their roots (global indices) */
  if (!s) s = sg.put(0, (uint64_t)depth(0) * plane, mask, why);
  for (int64_t k = 0, z0 = 0; z0 < d.nz && !s; k++, z0 += planes) {
    const int64_t nzc = depth(z0);
    const uint64_t cnt = (uint64_t)nzc * plane, base = (uint64_t)z0 * plane;
    const dims3 sd = {nzc, d.ny, d.nx};
    uint8_t *dm = nullptr;
    s = sg.ready(k, &dm, why);
    if (!s) s = accel__cuda_check(r.x->zero(doutside.p, cnt), why, "memset");
    if (!s) s = components(r.x, dm, sd, false, conn, dl.as<T>(), why);
    if (!s) s = sg.done(k, why);
    if (!s && z0 + planes < d.nz) s = sg.put(k + 1, (uint64_t)depth(z0 + planes) * plane, mask + base + cnt, why);
    if (!s) s = each(r.x, cnt, border_f<T>{dl.as<T>(), sd, z0 == 0, z0 + nzc == d.nz, doutside.p}, why, "border");
    if (!s) s = download(r.x, roots, dl.p, cnt * sizeof(T), why);
    if (!s) s = download(r.x, flags, doutside.p, cnt, why);
    if (s) break;
    /* the slab's trees on the host: every background voxel points to its
     * root (global indices); a root carries its border flag */
    for (uint64_t i = 0; i < cnt; i++) {
      if (roots[i] == none<T>()) {
        uf.parent[base + i] = none<T>();
        continue;
      }
      uf.parent[base + i] = (T)(base + roots[i]);
      if (roots[i] == i) uf.flag[base + i] = flags[i];
    }
  }
  /* merge where slabs meet: the first plane of each slab with the plane before */
  for (int64_t z0 = planes; z0 < d.nz && !s; z0 += planes)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t xx = 0; xx < d.nx; xx++) {
        const uint64_t i = d.index(z0, y, xx);
        if (mask[i]) continue;
        for (int dy = -1; dy <= 1; dy++)
          for (int dx = -1; dx <= 1; dx++) {
            if (1 + (dy != 0) + (dx != 0) > conn.steps) continue;
            const int64_t yy = y + dy, xj = xx + dx;
            if (yy < 0 || xj < 0 || yy >= d.ny || xj >= d.nx) continue;
            const uint64_t j = d.index(z0 - 1, yy, xj);
            if (!mask[j]) uf.unite((T)i, (T)j);
          }
      }
  /* pass 2: each slab with its roots' merged answers: the mask and, after
   * it, whether each voxel's component is outside, staged together */
  const auto put2 = [&](int64_t k) {
    const uint64_t cnt = (uint64_t)depth(k * planes) * plane, base = (uint64_t)(k * planes) * plane;
    return sg.put(
        slabs + k, 2 * cnt, nullptr,
        [&](uint8_t *p) {
          memcpy(p, mask + base, cnt);
          for (uint64_t i = 0; i < cnt; i++) /* at every background voxel (its local root's among them) */
            p[cnt + i] = uf.parent[base + i] == none<T>() ? 0 : uf.flag[uf.find((T)(base + i))];
        },
        why);
  };
  if (!s) s = put2(0);
  for (int64_t k = 0, z0 = 0; z0 < d.nz && !s; k++, z0 += planes) {
    const int64_t nzc = depth(z0);
    const uint64_t cnt = (uint64_t)nzc * plane, base = (uint64_t)z0 * plane;
    const dims3 sd = {nzc, d.ny, d.nx};
    uint8_t *dm = nullptr;
    s = sg.ready(slabs + k, &dm, why);
    if (!s) s = components(r.x, dm, sd, false, conn, dl.as<T>(), why);
    if (!s) s = each(r.x, cnt, fill_out_f<T>{dm, dl.as<T>(), dm + cnt, dout.p}, why, "fill output");
    if (!s) s = sg.done(slabs + k, why);
    if (!s && z0 + planes < d.nz) s = put2(k + 1);
    if (!s) s = download(r.x, out + base, dout.p, cnt, why);
  }
  free(roots);
  free(flags);
  return s;
}

/* EDT of host pores into host out: whole on the device when it fits, else
 * x and y passes per slab and the z pass per block of rows. */
accel_status edt_host(run_ctx &r, const uint8_t *pores, const double sp[3], float *out) {
  char *why = r.call->why;
  const dims3 &d = r.d;
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx, n = d.count();
  const uint64_t line_scratch = (uint64_t)(d.nz > d.ny ? d.nz : d.ny) * 40;
  if (n * 9 + line_scratch * 1024 <= r.x->room()) { /* pores, squared distances, row scratch */
    dbuf dm, df;
    accel_status s = dm.get(r.x, n, why);
    if (!s) s = df.get(r.x, n * 4, why);
    if (!s) s = upload(r.x, dm.p, pores, n, why);
    if (!s) s = edt_xy(r.x, dm.p, df.as<float>(), d, sp, why);
    dm.reset();
    if (!s) s = edt_pass(r.x, df.as<float>(), d, 0, sp[0], true, why);
    if (!s) s = download(r.x, out, df.p, n * 4, why);
    return s;
  }
  /* x and y per slab, the next slab's pores uploaded while the current one's kernels run */
  bool overlap = false;
  int64_t planes = staged_planes(r, 1, 4 + 4, 0, &overlap);
  accel_status s = ACCEL_OK;
  if (planes < 1) {
    accel__why(why, "one plane of the distance transform needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  {
    slab_stager sg;
    dbuf df;
    const auto depth = [&](int64_t z0) { return d.nz - z0 < planes ? d.nz - z0 : planes; }; /* planes from z0 */
    const auto put = [&](int64_t k) {
      return sg.put(k, (uint64_t)depth(k * planes) * plane, pores + (uint64_t)(k * planes) * plane, why);
    };
    s = sg.init(r.x, (uint64_t)planes * plane, overlap, why);
    if (!s) s = df.get(r.x, (uint64_t)planes * plane * 4, why);
    if (!s) s = put(0);
    for (int64_t k = 0, z0 = 0; z0 < d.nz && !s; k++, z0 += planes) {
      const int64_t nzc = depth(z0);
      const uint64_t cnt = (uint64_t)nzc * plane, base = (uint64_t)z0 * plane;
      uint8_t *dm = nullptr;
      s = sg.ready(k, &dm, why);
      if (!s) s = edt_xy(r.x, dm, df.as<float>(), dims3{nzc, d.ny, d.nx}, sp, why);
      if (!s) s = sg.done(k, why);
      if (!s && z0 + planes < d.nz) s = put(k + 1);
      if (!s) s = download(r.x, out + base, df.p, cnt * 4, why);
    }
  }
  if (s) return s;
  /* z per block of rows: all planes, rows [y0, y1); the next block gathered
   * and uploaded while this one's lines run (two blocks: slab_stager) */
  const uint64_t block_row = (uint64_t)d.nz * (uint64_t)d.nx * 4, room = r.x->room() / 10 * 9;
  const uint64_t col_bytes = block_row + (uint64_t)d.nx * ((uint64_t)d.nz * 28 + 8);
  int64_t rows = (int64_t)(room / (col_bytes ? col_bytes : 1));
  const uint64_t pinned_rows = slab_stager::max_bytes / (block_row ? block_row : 1);
  const bool zoverlap = rows < d.ny && room / (col_bytes + block_row) >= 1 && pinned_rows >= 1;
  if (zoverlap) rows = (int64_t)(room / (col_bytes + block_row));
  if (zoverlap && (uint64_t)rows > pinned_rows) rows = (int64_t)pinned_rows;
  if (rows < 1) {
    accel__why(why, "one row block of the distance transform needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  if (rows > d.ny) rows = d.ny;
  const auto width = [&](int64_t y0) { return (size_t)(d.ny - y0 < rows ? d.ny - y0 : rows) * (size_t)d.nx * 4; };
  const auto put = [&](slab_stager &sg, int64_t k) {
    const int64_t y0 = k * rows;
    const size_t w = width(y0);
    return sg.put(
        k, w * (size_t)d.nz, nullptr,
        [&](uint8_t *p) {
          for (int64_t z = 0; z < d.nz; z++)
            memcpy(p + (size_t)z * w, out + (uint64_t)z * plane + (uint64_t)y0 * (uint64_t)d.nx, w);
        },
        why);
  };
  slab_stager sg;
  s = sg.init(r.x, (size_t)d.nz * (size_t)rows * (size_t)d.nx * 4, zoverlap, why);
  if (!s) s = put(sg, 0);
  for (int64_t k = 0, y0 = 0; y0 < d.ny && !s; k++, y0 += rows) {
    const int64_t nyc = d.ny - y0 < rows ? d.ny - y0 : rows;
    const size_t w = width(y0);
    uint8_t *df = nullptr;
    s = sg.ready(k, &df, why);
    if (!s) s = edt_pass(r.x, (float *)(void *)df, dims3{d.nz, nyc, d.nx}, 0, sp[0], true, why);
    /* staged, the next block goes to the other buffer now; unstaged, it
     * replaces this one's results (the pass runs in place) after their download */
    if (!s && sg.staged && y0 + rows < d.ny) s = put(sg, k + 1);
    if (!s)
      s = accel__cuda_check(
          r.x->copy2d(out + (uint64_t)y0 * (uint64_t)d.nx, plane * 4, df, w, w, (size_t)d.nz, cudaMemcpyDeviceToHost),
          why, "download");
    if (!s) s = accel__cuda_check(r.x->sync(), why, "download");
    if (!s) s = sg.done(k, why); /* the block's buffer was read last by that download */
    if (!s && !sg.staged && y0 + rows < d.ny) s = put(sg, k + 1);
  }
  return s;
}

/* The window test of the peak search for host volumes: whole, or per slab
 * with min_distance planes of halo. root: host roots (from the host's
 * components when slabbed) or NULL to label on the device (whole volumes). */
template <class T>
accel_status window_host(run_ctx &r, const float *edt, const uint8_t *pores, int md, T *root, uint8_t *cand,
                         bool have_root) {
  char *why = r.call->why;
  const dims3 &d = r.d;
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx, n = d.count();
  const int rad = md < 1 ? 0 : md, w = 2 * rad + 1;
  int(*offs)[3] = (int(*)[3])malloc((size_t)w * (size_t)w * (size_t)w * sizeof *offs);
  if (!offs) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const int noffs = accel__ct_window_offsets(rad, offs);
  dbuf doffs;
  accel_status s = doffs.get(r.x, (size_t)(noffs ? noffs : 1) * 3 * sizeof(int), why);
  if (!s && noffs) s = upload(r.x, doffs.p, offs, (size_t)noffs * 3 * sizeof(int), why);
  free(offs);
  if (s) return s;
  if (!have_root && n * (6 + sizeof(T)) <= r.x->room()) { /* whole: label and test on the device */
    dbuf de, dm, dl, dc;
    s = de.get(r.x, n * 4, why);
    if (!s) s = dm.get(r.x, n, why);
    if (!s) s = dl.get(r.x, n * sizeof(T), why);
    if (!s) s = dc.get(r.x, n, why);
    if (!s) s = upload(r.x, de.p, edt, n * 4, why);
    if (!s) s = upload(r.x, dm.p, pores, n, why);
    if (!s) s = components(r.x, dm.p, d, true, reach{3}, dl.as<T>(), why);
    if (!s)
      s = each_offsets(r.x, n, window_f<T>{de.as<float>(), dm.p, dl.as<T>(), d, 0, doffs.as<int>(), noffs, dc.p},
                       3 * noffs, why, "peak window");
    if (!s) s = download(r.x, root, dl.p, n * sizeof(T), why);
    if (!s) s = download(r.x, cand, dc.p, n, why);
    return s;
  }
  if (!have_root) { /* components on the host, exact like the device's */
    uint64_t np = 0;
    T *list = mask_list(pores, n, &np, root);
    if (!list) {
      accel__why(why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    s = components_list(pores, accel__dims{d.nz, d.ny, d.nx}, list, np, r.call->threads, root);
    free(list);
    if (s) {
      accel__why(why, "out of host memory");
      return s;
    }
  }
  /* staged slabs with their halos (slab_stager), each the map, the pores
   * and the roots one after the other, and the flags */
  bool overlap = false;
  const int64_t planes = staged_planes(r, 4 + 1 + sizeof(T), 1, rad, &overlap);
  if (planes < 1) {
    accel__why(why, "one plane of the peak search (with its halo) needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  const uint64_t cap = (uint64_t)(planes + 2 * rad) * plane;
  /* planes [b0, b1) of slab k (planes [z0, z0 + nzc) and the halo), and where its roots start in the staging */
  struct block {
    int64_t z0, nzc, b0, b1;
    uint64_t cnt, roots_at;
  };
  const auto block_of = [&](int64_t k) {
    block b;
    b.z0 = k * planes;
    b.nzc = d.nz - b.z0 < planes ? d.nz - b.z0 : planes;
    b.b0 = b.z0 - rad < 0 ? 0 : b.z0 - rad;
    b.b1 = b.z0 + b.nzc + rad > d.nz ? d.nz : b.z0 + b.nzc + rad;
    b.cnt = (uint64_t)(b.b1 - b.b0) * plane;
    b.roots_at = (b.cnt * 5 + 7) / 8 * 8;
    return b;
  };
  const auto put = [&](slab_stager &sg, int64_t k) {
    const block b = block_of(k);
    const uint64_t at = (uint64_t)b.b0 * plane;
    return sg.put(
        k, b.roots_at + b.cnt * sizeof(T), nullptr,
        [&](uint8_t *p) {
          memcpy(p, edt + at, b.cnt * 4);
          memcpy(p + b.cnt * 4, pores + at, b.cnt);
          memcpy(p + b.roots_at, root + at, b.cnt * sizeof(T));
        },
        why);
  };
  slab_stager sg;
  dbuf dc;
  s = sg.init(r.x, (cap * 5 + 7) / 8 * 8 + cap * sizeof(T), overlap, why);
  if (!s) s = dc.get(r.x, (uint64_t)planes * plane, why);
  if (!s) s = put(sg, 0);
  /* roots at non-pore voxels are never read: the host's are garbage there */
  for (int64_t k = 0; k * planes < d.nz && !s; k++) {
    const block b = block_of(k);
    uint8_t *p = nullptr;
    s = sg.ready(k, &p, why);
    if (!s)
      s = each_offsets(r.x, (uint64_t)b.nzc * plane,
                       window_f<T>{(const float *)(void *)p, p + b.cnt * 4, (const T *)(void *)(p + b.roots_at),
                                   dims3{b.b1 - b.b0, d.ny, d.nx}, b.z0 - b.b0, doffs.as<int>(), noffs, dc.p},
                       3 * noffs, why, "peak window");
    if (!s) s = sg.done(k, why);
    if (!s && (k + 1) * planes < d.nz) s = put(sg, k + 1);
    if (!s) s = download(r.x, cand + (uint64_t)b.z0 * plane, dc.p, (uint64_t)b.nzc * plane, why);
  }
  return s;
}

/* Markers of host edt/pores into host out (the window test on the device,
 * the rest on the host), with labels of type T. */
template <class T>
accel_status markers_host_t(run_ctx &r, const float *edt, const uint8_t *pores, int md, int32_t *out, uint32_t *count) {
  const uint64_t n = r.d.count();
  T *root = (T *)malloc((n ? n : 1) * sizeof(T));
  uint8_t *cand = (uint8_t *)calloc(n ? n : 1, 1);
  uint64_t np = 0;
  T *list = nullptr;
  accel_status s = ACCEL_OK;
  if (!root || !cand) {
    accel__why(r.call->why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s) s = window_host(r, edt, pores, md, root, cand, false);
  if (!s && !(list = mask_list(pores, n, &np, root))) {
    accel__why(r.call->why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s && (s = markers_finish(edt, pores, accel__dims{r.d.nz, r.d.ny, r.d.nx}, md, list, np, root, cand, out, count)))
    accel__why(r.call->why,
               s == ACCEL_ERR_LIMIT ? "more than 2^31 - 1 markers: their numbers exceed int32" : "out of host memory");
  free(root);
  free(cand);
  free(list);
  return s;
}

/* The same, with 64-bit labels beyond accel__ct_index_limit voxels. */
accel_status markers_host(run_ctx &r, const float *edt, const uint8_t *pores, int md, int32_t *out, uint32_t *count) {
  return accel__ct_wide(r.d.count()) ? markers_host_t<uint64_t>(r, edt, pores, md, out, count)
                                     : markers_host_t<uint32_t>(r, edt, pores, md, out, count);
}

/* ------------------------------------------------------------ ops */

/* rescale: elementwise in plane chunks */
accel_status stage(accel__executor *x, accel__call *call, accel__ct_rescale_job *job) {
  run_ctx r{x, call, dims3{job->d.nz, job->d.ny, job->d.nx}};
  char *why = call->why;
  const uint64_t plane = (uint64_t)r.d.ny * (uint64_t)r.d.nx;
  int64_t planes = (int64_t)(x->room() / 10 * 9 / (plane * 6 + 16));
  if (planes < 1) {
    accel__why(why, "one plane needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  if (planes > r.d.nz) planes = r.d.nz;
  dbuf ds, di, din, dout;
  accel_status s = ds.get(x, (uint64_t)r.d.nz * 8, why);
  if (!s) s = di.get(x, (uint64_t)r.d.nz * 8, why);
  if (!s && job->slope) s = upload(x, ds.p, job->slope, (size_t)r.d.nz * 8, why);
  if (!s && job->intercept) s = upload(x, di.p, job->intercept, (size_t)r.d.nz * 8, why);
  if (!s) s = din.get(x, (uint64_t)planes * plane * 2, why);
  if (!s) s = dout.get(x, (uint64_t)planes * plane * 4, why);
  for (int64_t z0 = 0; z0 < r.d.nz && !s; z0 += planes) {
    const int64_t nzc = r.d.nz - z0 < planes ? r.d.nz - z0 : planes;
    const uint64_t cnt = (uint64_t)nzc * plane;
    s = upload(x, din.p, (const uint8_t *)job->in + (uint64_t)z0 * plane * 2, cnt * 2, why);
    if (!s)
      s = each(x, cnt,
               rescale_f{din.p, job->in_dtype == ACCEL_DTYPE_I16, job->slope ? ds.as<double>() : nullptr,
                         job->intercept ? di.as<double>() : nullptr, dout.as<float>(), plane, z0},
               why, "rescale");
    if (!s) s = download(x, job->out + (uint64_t)z0 * plane, dout.p, cnt * 4, why);
  }
  return s;
}

accel_status stage(accel__executor *x, accel__call *call, accel__ct_threshold_job *job) {
  run_ctx r{x, call, dims3{job->d.nz, job->d.ny, job->d.nx}};
  return threshold_host(r, job->in, job->in_dtype, nullptr, nullptr, job->threshold, (int)job->compare, job->out,
                        job->device);
}

/* The input and output of a one-input stage on the device: the caller's
 * device arrays in place, else buffers of ours (the input uploaded). */
accel_status stage_buffers(accel__executor *x, unsigned dev, dbuf &din, const void *in, size_t in_bytes, dbuf &dout,
                           void *out, size_t out_bytes, char *why) {
  accel_status s = ACCEL_OK;
  if (dev & ACCEL__CT_DEV_IN) din.borrow((void *)in);
  else if (!(s = din.get(x, in_bytes, why))) s = upload(x, din.p, in, in_bytes, why);
  if (s) return s;
  if (dev & ACCEL__CT_DEV_OUT) dout.borrow(out);
  else s = dout.get(x, out_bytes, why);
  return s;
}

/* The output of a one-input stage: downloaded unless it is a device array. */
accel_status stage_result(accel__executor *x, unsigned dev, void *out, const dbuf &dout, size_t bytes, char *why) {
  return dev & ACCEL__CT_DEV_OUT ? ACCEL_OK : download(x, out, dout.p, bytes, why);
}

/* Device bytes a one-input stage saves with device arrays. */
uint64_t borrowed(unsigned dev, uint64_t in_bytes, uint64_t out_bytes) {
  return (dev & ACCEL__CT_DEV_IN ? in_bytes : 0) + (dev & ACCEL__CT_DEV_OUT ? out_bytes : 0);
}

/* A one-input stage's device arrays as host copies, for its slab path. */
template <class I, class O, class F>
accel_status through_host(accel__executor *x, unsigned dev, I **in, size_t in_bytes, O **out, size_t out_bytes,
                          char *why, F f) {
  host_copies hc(x);
  if (dev & ACCEL__CT_DEV_IN) hc.add(in, in_bytes, true);
  if (dev & ACCEL__CT_DEV_OUT) hc.add(out, out_bytes, false);
  accel_status s = hc.down(why);
  if (!s) s = f();
  return hc.up(why, s);
}

accel_status stage(accel__executor *x, accel__call *call, accel__ct_fill_job *job) {
  run_ctx r{x, call, dims3{job->d.nz, job->d.ny, job->d.nx}};
  const uint64_t n = r.d.count();
  char *why = call->why;
  const bool wide = accel__ct_wide(n); /* 64-bit labels */
  const unsigned dev = job->device;
  if (n * (wide ? 12 : 8) - borrowed(dev, n, n) <= x->room()) { /* whole: mask, labels, outside flags, out */
    dbuf dm, dout;
    accel_status s = stage_buffers(x, dev, dm, job->mask, n, dout, job->out, n, why);
    if (!s)
      s = wide ? fill_device<uint64_t>(x, dm.p, r.d, reach_of(job->connectivity), dout.p, why)
               : fill_device<uint32_t>(x, dm.p, r.d, reach_of(job->connectivity), dout.p, why);
    return s ? s : stage_result(x, dev, job->out, dout, n, why);
  }
  /* fill_slabs' own test, before any copy */
  if (dev && slab_planes(r, FILL_STAGED + fill_fixed(wide ? 8 : 4), 0) < 1) {
    accel__why(why, "one plane of fill holes needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  return through_host(x, dev, &job->mask, n, &job->out, n, why, [&] {
    return wide ? fill_slabs<uint64_t>(r, job->mask, reach_of(job->connectivity), job->out)
                : fill_slabs<uint32_t>(r, job->mask, reach_of(job->connectivity), job->out);
  });
}

accel_status stage(accel__executor *x, accel__call *call, accel__ct_edt_job *job) {
  run_ctx r{x, call, dims3{job->d.nz, job->d.ny, job->d.nx}};
  const uint64_t n = r.d.count();
  const unsigned dev = job->device;
  const uint64_t line_scratch = (uint64_t)(r.d.nz > r.d.ny ? r.d.nz : r.d.ny) * 40;
  if (dev && n * 9 + line_scratch * 1024 - borrowed(dev, n, n * 4) <= x->room()) { /* whole, in place */
    char *why = call->why;
    dbuf dm, df;
    accel_status s = stage_buffers(x, dev, dm, job->mask, n, df, job->out, n * 4, why);
    if (!s) s = edt_xy(x, dm.p, df.as<float>(), r.d, job->spacing, why);
    dm.reset();
    if (!s) s = edt_pass(x, df.as<float>(), r.d, 0, job->spacing[0], true, why);
    return s ? s : stage_result(x, dev, job->out, df, n * 4, why);
  }
  if (dev && slab_planes(r, 1 + 4 + 4, 0) < 1) { /* edt_host's own test, before any copy */
    accel__why(call->why, "one plane of the distance transform needs more than the device budget");
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  return through_host(x, dev, &job->mask, n, &job->out, n * 4, call->why,
                      [&] { return edt_host(r, job->mask, job->spacing, job->out); });
}

/* ------------------------------------------------------------ feature transform */

struct ft_init_f {
  const uint8_t *m;
  int32_t *ft;
  uint64_t n;
  int64_t ny, nx;
  __host__ __device__ void operator()(uint64_t i) const { accel__ft_init(m, ft, n, i, ny, nx); }
};

/* Lines [first, first + count) of the pass along `axis`, each line's
 * scratch interleaved with its neighbours' (coalesced). */
struct ft_lines_f {
  int32_t *ft;
  uint64_t n;
  dims3 d;
  int axis;
  uint64_t first, count;
  double sp[3];
  int32_t *f, *keep;
  __host__ __device__ void operator()(uint64_t t) const {
    int64_t coor[3], stride, len;
    uint64_t base;
    accel__ft_line_of((int64_t)(first + t), axis, d.nz, d.ny, d.nx, coor, &base, &stride, &len);
    accel__ft_line(ft, n, base, stride, len, axis, coor, sp, accel__ft_scratch{f + t, keep + t, (int64_t)count});
  }
};

struct ft_distance_f {
  const int32_t *ft;
  uint64_t n;
  int64_t ny, nx;
  double sp[3];
  double *out;
  __host__ __device__ void operator()(uint64_t i) const { out[i] = accel__ft_distance(ft, n, i, ny, nx, sp); }
};

/* The feature transform on the device: the whole volume's features (12
 * bytes a voxel) within the budget, the passes' lines in chunks whose
 * scratch fits what remains of it; larger volumes are left to the CPU. */
accel_status stage(accel__executor *x, accel__call *call, accel__ct_ft_job *job) {
  const dims3 d{job->d.nz, job->d.ny, job->d.nx};
  const uint64_t n = d.count();
  const int64_t longest = d.nz > d.ny ? (d.nz > d.nx ? d.nz : d.nx) : (d.ny > d.nx ? d.ny : d.nx);
  const uint64_t per_line = (uint64_t)longest * 16; /* 3 coordinates and a stack entry per element */
  const uint64_t peak = n * 12 + (job->distances ? n * 8 : n) + per_line * 256;
  if (n == 0) return ACCEL_OK;
  if (peak > x->room())
    return accel__decline(call, "the feature transform of %.1f MiB exceeds the device budget", peak / 1048576.0);
  char *why = call->why;
  const double *sp = job->spacing;
  dbuf dm, dft;
  accel_status s = dm.put(x, job->mask, n, why, "upload");
  if (!s) s = dft.get(x, n * 12, why);
  if (!s) s = each(x, n, ft_init_f{dm.p, dft.as<int32_t>(), n, d.ny, d.nx}, why, "feature transform start");
  dm.reset();
  for (int axis = 0; axis < 3 && !s; axis++) {
    const int64_t len = axis == 0 ? d.nz : axis == 1 ? d.ny : d.nx;
    const uint64_t lines = len ? n / (uint64_t)len : 0, line_bytes = (uint64_t)len * 16;
    uint64_t chunk = x->room() / (line_bytes ? line_bytes : 1);
    if (chunk > lines) chunk = lines;
    if (!chunk && lines) {
      accel__why(why, "no room left for the feature transform's line scratch");
      s = ACCEL_ERR_DEVICE_MEMORY;
    }
    dbuf f, keep;
    if (!s && chunk) s = f.get(x, chunk * (uint64_t)len * 12, why);
    if (!s && chunk) s = keep.get(x, chunk * (uint64_t)len * 4, why);
    for (uint64_t first = 0; !s && first < lines; first += chunk) {
      const uint64_t cnt = lines - first < chunk ? lines - first : chunk;
      s = each(
          x, cnt,
          ft_lines_f{
              dft.as<int32_t>(), n, d, axis, first, cnt, {sp[0], sp[1], sp[2]}, f.as<int32_t>(), keep.as<int32_t>()},
          why, "feature transform lines");
    }
  }
  if (!s && job->distances) {
    dbuf dd;
    s = dd.get(x, n * 8, why);
    if (!s)
      s = each(x, n, ft_distance_f{dft.as<int32_t>(), n, d.ny, d.nx, {sp[0], sp[1], sp[2]}, dd.as<double>()}, why,
               "feature transform distances");
    if (!s) s = download(x, job->distances, dd.p, n * 8, why);
  }
  if (!s && job->indices) s = download(x, job->indices, dft.p, n * 12, why);
  return s;
}

/* The general search with the window test on the device (where it is the
 * first version's: accel__ct_peaks_window_shared), the rest on the host. */
template <class T> accel_status general_host_t(run_ctx &r, const float *map, accel__ct_markers_job *job) {
  const uint64_t n = r.d.count(), nb = n ? n : 1;
  T *root = (T *)malloc(nb * sizeof(T));
  uint8_t *cand = (uint8_t *)calloc(nb, 1);
  double *v = (double *)malloc(nb * sizeof(double));
  accel_status s = ACCEL_OK;
  if (!root || !cand || !v) {
    accel__why(r.call->why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s) s = window_host(r, map, job->mask, job->min_distance, root, cand, false);
  if (!s) {
    for (uint64_t i = 0; i < n; i++) v[i] = map[i];
    accel__ct_peak_params p = *job->general;
    p.window = cand;
    s = accel__ct_peaks_general_cpu(v, job->mask, job->d, job->min_distance, &p, r.call->threads, job->out,
                                    &job->count);
    if (s)
      accel__why(r.call->why, s == ACCEL_ERR_LIMIT ? "more than 2^31 - 1 markers: their numbers exceed int32"
                                                   : "out of host memory");
  }
  free(root);
  free(cand);
  free(v);
  return s;
}

/* The general search's own window test (labels, a footprint, an excluded
 * border, no mask, negative values or a float64 map: accel__ct_peak_window),
 * one thread per voxel of the regions. */
struct peak_window_f {
  accel__ct_peak_window w;
  uint8_t *cand;
  __host__ __device__ const int *offsets() const { return w.offs; }
  __host__ __device__ void use_offsets(const int *p) { w.offs = p; }
  __host__ __device__ void operator()(uint64_t k) const {
    const uint64_t i = w.mem[k];
    cand[i] = accel__ct_peak_window_test(&w, i, w.rid ? w.rid[i] : 0);
  }
};

/* The window test of w on the device into the host's cand (n bytes). */
accel_status peak_window_device(run_ctx &r, const accel__ct_peak_window &w, uint8_t *cand) {
  char *why = r.call->why;
  const uint64_t n = r.d.count();
  const uint64_t need = n * 8 + (w.rid ? n * 8 : 0) + w.nreg * sizeof(accel__ct_peak_region) + (uint64_t)w.noffs * 12 +
                        w.nmem * 8 + n + 4096;
  if (need > r.x->room())
    return accel__decline(r.call, "the peak search's window test needs %.1f MiB, over the device budget",
                          need / 1048576.0);
  dbuf dv, drid, dreg, doffs, dmem, dcand;
  accel_status s = dv.put(r.x, w.v, n, why, "upload");
  if (!s && w.rid) s = drid.put(r.x, w.rid, n, why, "upload");
  if (!s) s = dreg.put(r.x, w.reg, w.nreg, why, "upload");
  if (!s) s = doffs.put(r.x, w.offs, (size_t)w.noffs * 3, why, "upload");
  if (!s) s = dmem.put(r.x, w.mem, w.nmem, why, "upload");
  if (!s) s = dcand.get(r.x, n ? n : 1, why);
  if (!s) {
    accel__ct_peak_window dw = w;
    dw.v = dv.as<double>();
    dw.rid = w.rid ? drid.as<int64_t>() : nullptr;
    dw.reg = dreg.as<accel__ct_peak_region>();
    dw.offs = doffs.as<int32_t>();
    dw.mem = dmem.as<uint64_t>();
    s = each_offsets(r.x, w.nmem, peak_window_f{dw, dcand.p}, 3 * w.noffs, why, "peak window test");
  }
  if (!s) s = download(r.x, cand, dcand.p, n, why);
  return s;
}

/* The general search: its regions and footprint on the host, its window
 * test on the device, the rest on the host (map: the float32 map, or NULL
 * for job->image64). */
accel_status general_device(run_ctx &r, const float *map, accel__ct_markers_job *job) {
  char *why = r.call->why;
  const uint64_t n = r.d.count(), nb = n ? n : 1;
  double *v = map ? (double *)malloc(nb * sizeof(double)) : nullptr;
  uint8_t *cand = (uint8_t *)calloc(nb, 1);
  accel__ct_peak_search *ps = nullptr;
  accel__ct_peak_window w;
  accel_status s = (map && !v) || !cand ? ACCEL_ERR_OUT_OF_MEMORY : ACCEL_OK;
  if (!s && map)
    for (uint64_t i = 0; i < n; i++) v[i] = map[i];
  if (!s)
    s = accel__ct_peak_search_begin(map ? v : job->image64, job->mask, job->d, job->min_distance, job->general,
                                    r.call->threads, &ps, &w);
  if (s) accel__why(why, "out of host memory");
  if (!s) s = peak_window_device(r, w, cand);
  if (!s && (s = accel__ct_peak_search_finish(ps, cand, job->min_distance, r.call->threads, job->out, &job->count)))
    accel__why(why,
               s == ACCEL_ERR_LIMIT ? "more than 2^31 - 1 markers: their numbers exceed int32" : "out of host memory");
  accel__ct_peak_search_free(ps);
  free(v);
  free(cand);
  return s;
}

/* markers (a smoothed map is smoothed on the host, as the CPU does) */
accel_status stage(accel__executor *x, accel__call *call, accel__ct_markers_job *job) {
  /* searches the first version's window test does not serve run their own */
  const bool own_window = job->general && (!job->image || !accel__ct_peaks_window_shared(job->general, job->mask));
  run_ctx r{x, call, dims3{job->d.nz, job->d.ny, job->d.nx}};
  const uint64_t n = r.d.count();
  const float *map = job->image;
  float *smooth = nullptr;
  if (job->sigma > 0) {
    smooth = (float *)malloc((n ? n : 1) * 4);
    if (!smooth || accel__ct_gaussian_cpu(job->image, job->d, job->sigma, call->threads, smooth)) {
      free(smooth);
      accel__why(call->why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    map = smooth;
  }
  accel_status s = own_window      ? general_device(r, map, job)
                   : !job->general ? markers_host(r, map, job->mask, job->min_distance, job->out, &job->count)
                   : accel__ct_wide(r.d.count()) ? general_host_t<uint64_t>(r, map, job)
                                                 : general_host_t<uint32_t>(r, map, job);
  free(smooth);
  return s;
}

/* The peak search with its window test on the device. */
accel_status device_peaks(accel__call *, void *user, const float *map, const uint8_t *mask, int md, int32_t *out,
                          uint32_t *count) {
  return markers_host(*(run_ctx *)user, map, mask, md, out, count);
}

/* ------------------------------------------------------------ the pipeline on the device */

/* What a run needs, from the requested outputs back (accel_ct_pipeline_run). */
struct wants {
  bool labels, markers, edt, pores, filled;
  explicit wants(const accel__ct_pipeline_job *job) {
    labels = job->labels || job->want_network;
    markers = !job->given_markers && (job->markers || labels);
    edt = job->edt || markers || labels;
    pores = job->pores || edt;
    filled = job->filled || (pores && job->o.pores == ACCEL_CT_PORES_CLOSED);
  }
};

/* The progress report of a pipeline step; ACCEL_ERR_CANCELLED when the
 * callback asks to stop. */
accel_status step(accel__ct_pipeline_job *job, const char *name, double f, char *why) {
  job->current = name;
  const accel_ct_pipeline_options *o = &job->o;
  if (o->progress && o->progress(o->progress_user, name, f)) {
    accel__why(why, "cancelled by the progress callback");
    return ACCEL_ERR_CANCELLED;
  }
  return ACCEL_OK;
}

/* Device bytes per voxel the resident pipeline holds at its peak: the pore
 * mask, the distance map and the peak window's roots and flags (10; 14 with
 * the 64-bit roots beyond accel__ct_index_limit voxels), or during the
 * distance map's rows the map and its row scratch (9); the threshold
 * (input, float copy, solid) and fill holes (solid, filled, labels, flags)
 * take less. */
uint64_t resident_bytes(dims3 d, accel_dtype in_dtype, bool rescale) {
  const uint64_t n = d.count(), isz = accel_dtype_size(in_dtype);
  const uint64_t first = isz + 1 + (rescale ? 4 : 0), peak = accel__ct_wide(n) ? 14 : 10;
  const uint64_t scratch = (uint64_t)(d.nz > d.ny ? d.nz : d.ny) * 40 * 1024 + (1u << 20);
  return n * (first > peak ? first : peak) + scratch;
}

/* The volumes a resident run keeps on the device, and the host's copies. */
struct resident {
  run_ctx *r;
  hbuf pin;
  dbuf solid, filled, pores, edt;
  const float *host_edt; /* the map the host stages read */
  unsigned dev;          /* the job's device arrays used in place (ACCEL__CT_DEV_*) */
  /* volume `bit`, the caller's device array `mem` when it is one, else a buffer of ours */
  [[nodiscard]] accel_status volume(dbuf &b, unsigned bit, void *mem, size_t bytes, char *why) {
    if (!(dev & bit)) return b.get(r->x, bytes, why);
    b.borrow(mem);
    return ACCEL_OK;
  }
  /* the caller's host output `to` (if any) gets volume `b` */
  [[nodiscard]] accel_status out(void *to, unsigned bit, const dbuf &b, size_t bytes, char *why) {
    return to && !(dev & bit) ? download_pinned(r->x, pin, to, b.p, bytes, why) : ACCEL_OK;
  }
};

/* Threshold (after the optional rescale) of the uploaded input into
 * res.solid; the input's buffers are released on return. */
accel_status resident_threshold(resident &res, const accel__ct_pipeline_job *job) {
  run_ctx &r = *res.r;
  char *why = r.call->why;
  const accel_ct_pipeline_options *o = &job->o;
  const uint64_t n = r.d.count(), plane = (uint64_t)r.d.ny * (uint64_t)r.d.nx;
  const bool rescale = o->slope != nullptr;
  dbuf din, ds, di, dflt;
  accel_status s = res.volume(din, ACCEL__CT_DEV_INPUT, (void *)job->in, n * accel_dtype_size(job->in_dtype), why);
  if (!s && !(res.dev & ACCEL__CT_DEV_INPUT)) s = upload_pinned(r.x, res.pin, din.p, job->in, din.n, why);
  const void *src = din.p;
  accel_dtype sdt = job->in_dtype;
  if (!s && rescale) {
    s = ds.put(r.x, o->slope, (size_t)r.d.nz, why, "upload");
    if (!s) s = di.put(r.x, o->intercept, (size_t)r.d.nz, why, "upload");
    if (!s) s = dflt.get(r.x, n * 4, why);
    if (!s)
      s = each(r.x, n,
               rescale_f{din.p, job->in_dtype == ACCEL_DTYPE_I16, ds.as<double>(), di.as<double>(), dflt.as<float>(),
                         plane, 0},
               why, "rescale");
    src = dflt.p, sdt = ACCEL_DTYPE_F32;
  }
  if (!s) s = res.volume(res.solid, ACCEL__CT_DEV_SOLID, job->solid, n, why);
  if (!s) s = each(r.x, n, threshold_f{src, sdt, o->threshold, (int)o->compare, res.solid.p}, why, "threshold");
  return s;
}

/* The peak search with the distance map and the pore mask still on the
 * device (the unsmoothed map), with component labels of type T. */
template <class T>
accel_status resident_peaks_t(accel__call *call, resident &res, const float *map, const uint8_t *mask, int md,
                              int32_t *out, uint32_t *count) {
  run_ctx &r = *res.r;
  char *why = call->why;
  const uint64_t n = r.d.count();
  const int rad = md < 1 ? 0 : md, w = 2 * rad + 1;
  int(*offs)[3] = (int(*)[3])malloc((size_t)w * (size_t)w * (size_t)w * sizeof *offs);
  T *root = (T *)malloc((n ? n : 1) * sizeof(T));
  uint8_t *cand = (uint8_t *)malloc(n ? n : 1);
  uint64_t np = 0;
  T *list = nullptr;
  accel_status s = ACCEL_OK;
  if (!offs || !root || !cand || !(list = mask_list(mask, n, &np, root))) {
    accel__why(why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  const int noffs = s ? 0 : accel__ct_window_offsets(rad, offs);
  dbuf doffs, dl, dc;
  if (!s) s = doffs.put(r.x, &offs[0][0], (size_t)noffs * 3, why, "upload");
  if (!s) s = dl.get(r.x, n * sizeof(T), why);
  if (!s) s = dc.get(r.x, n ? n : 1, why);
  if (!s) s = components(r.x, res.pores.p, r.d, true, reach{3}, dl.as<T>(), why);
  if (!s)
    s = each_offsets(r.x, n,
                     window_f<T>{res.edt.as<float>(), res.pores.p, dl.as<T>(), r.d, 0, doffs.as<int>(), noffs, dc.p},
                     3 * noffs, why, "peak window");
  if (!s) s = download_pinned(r.x, res.pin, root, dl.p, n * sizeof(T), why);
  if (!s) s = download_pinned(r.x, res.pin, cand, dc.p, n, why);
  if (!s && (s = markers_finish(map, mask, accel__dims{r.d.nz, r.d.ny, r.d.nx}, md, list, np, root, cand, out, count)))
    accel__why(why,
               s == ACCEL_ERR_LIMIT ? "more than 2^31 - 1 markers: their numbers exceed int32" : "out of host memory");
  free(offs);
  free(root);
  free(cand);
  free(list);
  return s;
}

/* The same with 64-bit labels beyond accel__ct_index_limit voxels; a
 * smoothed map, made on the host, goes up. */
accel_status resident_peaks(accel__call *call, void *user, const float *map, const uint8_t *mask, int md, int32_t *out,
                            uint32_t *count) {
  resident &res = *(resident *)user;
  if (map != res.host_edt) return markers_host(*res.r, map, mask, md, out, count);
  return accel__ct_wide(res.r->d.count()) ? resident_peaks_t<uint64_t>(call, res, map, mask, md, out, count)
                                          : resident_peaks_t<uint32_t>(call, res, map, mask, md, out, count);
}

/* The device stages of a pipeline whose volumes fit the budget together:
 * the input goes up once; solid, filled, pores and the distance map are
 * made and kept on the device; what comes back is what the caller asked
 * for, and what the host stages after it read (the pore mask and the map,
 * and the peak window's roots and flags). */
accel_status resident_stages(resident &res, accel__ct_pipeline_job *job, const wants &w, uint8_t *pores, float *edt) {
  run_ctx &r = *res.r;
  char *why = r.call->why;
  const uint64_t n = r.d.count();
  const accel_ct_pipeline_options *o = &job->o;
  accel_status s = resident_threshold(res, job);
  if (!s) s = res.out(job->solid, ACCEL__CT_DEV_SOLID, res.solid, n, why);
  if (!s && w.filled && !(s = step(job, "ct.fill_holes", 0.05, why))) {
    s = res.volume(res.filled, ACCEL__CT_DEV_FILLED, job->filled, n, why);
    if (!s)
      s = accel__ct_wide(n)
              ? fill_device<uint64_t>(r.x, res.solid.p, r.d, reach_of(o->fill_connectivity), res.filled.p, why)
              : fill_device<uint32_t>(r.x, res.solid.p, r.d, reach_of(o->fill_connectivity), res.filled.p, why);
    if (!s) s = res.out(job->filled, ACCEL__CT_DEV_FILLED, res.filled, n, why);
  }
  if (!s && w.pores) { /* pores, edt: the host's copies when it wants them (not device arrays) */
    s = res.volume(res.pores, ACCEL__CT_DEV_PORES, job->pores, n, why);
    const uint8_t *filled = o->pores == ACCEL_CT_PORES_CLOSED ? res.filled.p : nullptr;
    if (!s) s = each(r.x, n, pores_f{res.solid.p, filled, res.pores.p}, why, "pores");
    res.solid.reset();
    res.filled.reset();
    if (!s) s = res.out(pores, 0, res.pores, n, why);
  }
  if (!s && w.edt && !(s = step(job, "ct.edt", 0.15, why))) {
    s = res.volume(res.edt, ACCEL__CT_DEV_EDT, job->edt, n * 4, why);
    if (!s) s = edt_xy(r.x, res.pores.p, res.edt.as<float>(), r.d, o->spacing, why);
    if (!s) s = edt_pass(r.x, res.edt.as<float>(), r.d, 0, o->spacing[0], true, why);
    if (!s) s = res.out(edt, 0, res.edt, n * 4, why);
  }
  return s;
}

/* The device stages stage by stage over host volumes (each stage uploads
 * what it reads and downloads what it makes, in slabs beyond the budget):
 * for volumes whose stages do not fit the budget together. */
accel_status staged_stages(run_ctx &r, accel__ct_pipeline_job *job, const wants &w, uint8_t *solid, uint8_t *filled,
                           uint8_t *pores, float *edt) {
  const accel_ct_pipeline_options *o = &job->o;
  const uint64_t n = r.d.count();
  char *why = r.call->why;
  accel_status s =
      threshold_host(r, job->in, job->in_dtype, o->slope, o->intercept, o->threshold, (int)o->compare, solid);
  if (!s && w.filled && !(s = step(job, "ct.fill_holes", 0.05, why))) {
    accel__ct_fill_job fj = {job->d, solid, (int)o->fill_connectivity, filled, 0};
    s = stage(r.x, r.call, &fj);
  }
  if (!s && w.pores)
    for (uint64_t i = 0; i < n; i++)
      pores[i] = (uint8_t)(o->pores == ACCEL_CT_PORES_CLOSED ? filled[i] && !solid[i] : !solid[i]);
  if (!s && w.edt && !(s = step(job, "ct.edt", 0.15, why))) s = edt_host(r, pores, o->spacing, edt);
  return s;
}

/* Host copies of the job's device arrays of `bits` (n voxels). */
void add_copies(host_copies &hc, accel__ct_pipeline_job *job, unsigned bits, uint64_t n) {
  const size_t isz = accel_dtype_size(job->in_dtype);
  if (bits & ACCEL__CT_DEV_INPUT) hc.add(&job->in, n * isz, true);
  if (bits & ACCEL__CT_DEV_GIVEN) hc.add(&job->given_markers, n * 4, true);
  if (bits & ACCEL__CT_DEV_SOLID) hc.add(&job->solid, n, false);
  if (bits & ACCEL__CT_DEV_FILLED) hc.add(&job->filled, n, false);
  if (bits & ACCEL__CT_DEV_PORES) hc.add(&job->pores, n, false);
  if (bits & ACCEL__CT_DEV_EDT) hc.add(&job->edt, n * 4, false);
  if (bits & ACCEL__CT_DEV_MARKERS) hc.add(&job->markers, n * 4, false);
  if (bits & ACCEL__CT_DEV_LABELS) hc.add(&job->labels, n * 4, false);
}

/* The pipeline: threshold, fill, pores, EDT and the peak window on the
 * device, resident there from the upload of the input to the last stage
 * that reads them when they fit the budget together (else stage by stage,
 * whole or slabbed); the rest on the host as the CPU does. */
accel_status pipeline(accel__executor *x, accel__call *call, accel__ct_pipeline_job *job) {
  const accel__dims d = job->d;
  run_ctx r{x, call, dims3{d.nz, d.ny, d.nx}};
  const uint64_t n = accel__dims_count(d), nb = n ? n : 1;
  const wants w(job);
  const bool fits = resident_bytes(r.d, job->in_dtype, job->o.slope != nullptr) <= x->room();
  char *why = call->why;
  /* device arrays: the resident stages use the input and the volumes made
   * on the device in place; what host code reads or writes (the given
   * markers, the markers and labels, everything on the staged path) is
   * copied through the host */
  host_copies hc(x);
  const unsigned dev =
      fits ? job->device & ~(unsigned)(ACCEL__CT_DEV_GIVEN | ACCEL__CT_DEV_MARKERS | ACCEL__CT_DEV_LABELS) : 0;
  add_copies(hc, job, job->device & ~dev, n);
  accel_status s = hc.down(why);
  /* host volumes: the outputs asked for (not device arrays), and what the host stages read */
  const bool host_solid = !fits, host_filled = !fits && w.filled;
  const bool host_pores = fits ? w.markers || w.labels : w.pores, host_edt = fits ? w.markers || w.labels : w.edt;
  uint8_t *solid = job->solid && !(dev & ACCEL__CT_DEV_SOLID) ? job->solid
                   : host_solid                               ? (uint8_t *)malloc(nb)
                                                              : nullptr;
  uint8_t *filled = job->filled && !(dev & ACCEL__CT_DEV_FILLED) ? job->filled
                    : host_filled                                ? (uint8_t *)malloc(nb)
                                                                 : nullptr;
  uint8_t *pores = job->pores && !(dev & ACCEL__CT_DEV_PORES) ? job->pores
                   : host_pores                               ? (uint8_t *)malloc(nb)
                                                              : nullptr;
  float *edt = job->edt && !(dev & ACCEL__CT_DEV_EDT) ? job->edt : host_edt ? (float *)malloc(nb * 4) : nullptr;
  int32_t *markers = job->markers ? job->markers : w.markers ? (int32_t *)malloc(nb * 4) : nullptr;
  int32_t *labels = job->labels ? job->labels : w.labels ? (int32_t *)malloc(nb * 4) : nullptr;
  if (!s && ((host_solid && !solid) || (host_filled && !filled) || (host_pores && !pores) || (host_edt && !edt) ||
             (w.markers && !markers) || (w.labels && !labels))) {
    accel__why(why, "out of host memory for the pipeline's volumes");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s) s = step(job, "ct.threshold", 0.0, why);
  resident res;
  res.r = &r;
  res.host_edt = edt;
  res.dev = dev;
  if (!s) s = fits ? resident_stages(res, job, w, pores, edt) : staged_stages(r, job, w, solid, filled, pores, edt);
  if (!s)
    s = fits ? accel__ct_pipeline_finish(call, job, pores, edt, markers, labels, resident_peaks, &res)
             : accel__ct_pipeline_finish(call, job, pores, edt, markers, labels, device_peaks, &r);
  if (solid != job->solid) free(solid); /* ours, not the caller's nor host copies (hc's) */
  if (filled != job->filled) free(filled);
  if (pores != job->pores) free(pores);
  if (edt != job->edt) free(edt);
  if (markers != job->markers) free(markers);
  if (labels != job->labels) free(labels);
  s = hc.up(why, s);
  if (!s && job->o.progress) job->o.progress(job->o.progress_user, "ct.pipeline", 1.0);
  return s;
}

/* The job's device arrays (accel_array_on_device), for the streams' order. */
template <class JOB> unsigned device_arrays(const JOB *) { return 0; }
unsigned device_arrays(const accel__ct_threshold_job *job) { return job->device; }
unsigned device_arrays(const accel__ct_fill_job *job) { return job->device; }
unsigned device_arrays(const accel__ct_edt_job *job) { return job->device; }

/* f() after every stream's work on the device (what makes the caller's
 * device arrays ready), and waited for (the outputs are written when the
 * call returns), when the job has device arrays. */
template <class F> accel_status ordered(accel__executor *x, char *why, unsigned dev, F f) {
  accel_status s = dev ? accel__cuda_check(x->device_sync(), why, "cudaDeviceSynchronize") : ACCEL_OK;
  if (!s) s = f();
  if (!s && dev) s = accel__cuda_check(x->sync(), why, "cudaStreamSynchronize");
  return s;
}

template <class JOB> accel_status on_device(accel__call *call, JOB *job) {
  return with_device(call, [&](accel__executor *x) {
    return ordered(x, call->why, device_arrays(job), [&] { return stage(x, call, job); });
  });
}

accel_status pipeline_on_device(accel__call *call, accel__ct_pipeline_job *job) {
  return with_device(call, [&](accel__executor *x) {
    return ordered(x, call->why, job->device, [&] { return pipeline(x, call, job); });
  });
}

} // namespace

extern "C" const accel__ct_ops accel__cuda_ct_ops = {
    /* .rescale = */ on_device<accel__ct_rescale_job>,
    /* .threshold = */ on_device<accel__ct_threshold_job>,
    /* .fill_holes = */ on_device<accel__ct_fill_job>,
    /* .edt = */ on_device<accel__ct_edt_job>,
    /* .markers = */ on_device<accel__ct_markers_job>,
    /* .watershed = */ nullptr,
    /* .pipeline = */ pipeline_on_device,
    /* .feature_transform = */ on_device<accel__ct_ft_job>,
};
