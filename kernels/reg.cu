/*
 * kernels/reg.cu - the registration domain's pyramid, level optimisation and
 * warp on the GPU (the pre-alignment's is in reg_prealign.cu).
 *
 * Every kernel is a per-pixel function that the host emulation also runs, in
 * loops, for tests without a GPU; the transform is evaluated with
 * lib/reg/bspline.h, the CPU's own per-point code, in double (nvcc
 * -fmad=false, the host without contraction), so the GPU maps every pixel to
 * the same point as the CPU.
 *
 * - pyramid: the CPU op's separable Gaussian (float taps and sums), the
 *   vertical pass at the kept rows, the horizontal pass at the kept columns
 *   of those. The whole image when it fits the device memory budget, else
 *   bands of output rows with the input rows they reach (the kernel's radius
 *   on each side, clamped at the edges). The moving level's cubic B-spline
 *   coefficients (lib/reg/prefilter.h) with a thread per row, then per
 *   column; images with lines over MAX_PREFILTER_LINE pixels are left to
 *   the CPU.
 * - hold: a registration's host inputs copied to the device once for all
 *   its levels when they fit beside the finest level, given back at its end.
 * - level: the level's images made on the device by the pyramid's code
 *   above (from the held copies or device inputs, read on the device, else
 *   each input's rows uploaded once for the level; the fixed image uploaded
 *   as it is, or its held copy used, where it is the level's image itself)
 *   and kept there for the level, never downloaded; the backend-neutral
 *   optimizer of lib/reg/level.c run on the host with a device evaluator:
 *   one thread per control-grid cell forms the cell's sums in sample order
 *   (lib/reg/level_cell.h, the CPU's code), then each gradient entry and
 *   Gauss-Newton block gathers its cells' terms in the order the CPU adds
 *   them, and the scalar sums are added on the host in cell order: the
 *   CPU's result to the bit. The optimizer, on the host, reads the metric
 *   and its derivatives back after every evaluation. A level whose images
 *   do not fit beside its arrays makes them on the host (the CPU's pyramid,
 *   or from device inputs the device's, downloaded) and streams them: every
 *   evaluation uploads bands of cell rows with the rows their samples can
 *   read (the fixed rows, through the linear part; the moving rows the
 *   displacement's range reaches, mirrored at the edges) and runs the
 *   band's cells on them (level_stream); when a row of cells does not fit,
 *   it falls back to the CPU.
 * - warp: the output in tiles, each computed on the device and downloaded
 *   into the caller's array (pitched copies when its rows allow, else through
 *   a host staging buffer). The source (the input, or for cubic
 *   interpolation its B-spline coefficients) is uploaded once when it fits
 *   beside a tile; otherwise each tile first finds which source rows its
 *   pixels reach (a pass over the tile's rows with the same transform) and
 *   only that band is uploaded, with its halo.
 *
 * Stage failures (over the budget, CUDA errors) return their status with the
 * reason; the dispatcher falls back to the CPU.
 */
#include "cuda_util.h"

extern "C" {
#include "reg/cpu.h" /* the CPU's pyramid, for a level whose images do not fit */
}
#include "reg/interp.h"
#include "reg/level_cell.h"
#include "reg/ops.h"
#include "reg/prealign.h"
#include "reg/prefilter.h"
#include "reg/warp_prefilter.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values per thread of the non-finite check (first_bad_f). */
constexpr int64_t FINITE_SEGMENT = 256;
extern "C" int64_t accel__reg_finite_segment = FINITE_SEGMENT;

namespace {

/* ---------------------------------------------------------------- arrays */

/* How a caller's 2-D or 3-D (channels last) array lies in memory. */
struct layout {
  int64_t rows, cols, ch;
  size_t es;        /* bytes per element */
  size_t row_bytes; /* cols * ch * es: one packed row */
  bool pitched;     /* elements adjacent within a row, rows at least a row apart: pitched copies */
};

layout layout_of(const accel_array *a) {
  layout l;
  l.rows = a->shape[0];
  l.cols = a->shape[1];
  l.ch = a->ndim == 3 ? a->shape[2] : 1;
  l.es = accel_dtype_size(a->dtype);
  l.row_bytes = (size_t)(l.cols * l.ch) * l.es;
  const bool px = a->ndim == 2 || a->strides[2] == (int64_t)l.es;
  l.pitched = px && a->strides[1] == (int64_t)(l.ch * (int64_t)l.es) && a->strides[0] >= (int64_t)l.row_bytes;
  return l;
}

/* A C-contiguous array of `a`'s shape and dtype at `data`. */
accel_array packed_at(const accel_array *a, const void *data) {
  accel_array p = *a;
  p.data = (void *)data;
  const int64_t es = (int64_t)accel_dtype_size(a->dtype);
  p.strides[1] = es;
  p.strides[0] = a->shape[1] * es;
  return p;
}

/* The elements of rows [r0, r1) and columns [c0, c1) of a caller's array,
 * between it and a packed buffer (out: array to buffer). */
void move_block(const accel_array *a, const layout &l, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t *buf,
                bool out) {
  const int64_t s2 = a->ndim == 3 ? a->strides[2] : 0;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++)
      for (int64_t k = 0; k < l.ch; k++) {
        uint8_t *p = (uint8_t *)a->data + r * a->strides[0] + c * a->strides[1] + k * s2;
        uint8_t *q = buf + (size_t)(((r - r0) * (c1 - c0) + (c - c0)) * l.ch + k) * l.es;
        if (out) memcpy(q, p, l.es);
        else memcpy(p, q, l.es);
      }
}

/* Rows [r0, r1) of a caller's array into packed device rows at d. When the
 * array's rows are not pitched they are packed into `staging`, two chunks
 * of about accel__cuda_pin_chunk bytes (at least a row each) taken in turn,
 * each packed while the other's upload is in flight (as upload_pinned): a
 * whole layer is never pinned at once; the last upload may still read its
 * chunk until the stream is synchronized. A device array (`device`:
 * C-contiguous) is copied on the device. */
accel_status upload_rows(accel__executor *x, const accel_array *a, int64_t r0, int64_t r1, uint8_t *d, hbuf &staging,
                         char *why, bool device = false) {
  const layout l = layout_of(a);
  const size_t n = (size_t)(r1 - r0);
  if (device)
    return accel__cuda_check(x->copy2d(d, l.row_bytes, (const uint8_t *)a->data + r0 * a->strides[0],
                                       (size_t)a->strides[0], l.row_bytes, n, cudaMemcpyDeviceToDevice),
                             why, "copy rows of a device array");
  if (l.pitched)
    return accel__cuda_check(x->copy2d(d, l.row_bytes, (const uint8_t *)a->data + r0 * a->strides[0],
                                       (size_t)a->strides[0], l.row_bytes, n, cudaMemcpyHostToDevice),
                             why, "upload rows");
  if (n == 0 || l.row_bytes == 0) return ACCEL_OK;
  const size_t fit = accel__cuda_pin_chunk / l.row_bytes, per = fit < 1 ? 1 : fit < n ? fit : n;
  const size_t chunk = l.row_bytes * per;
  accel_status s = accel__cuda_check(x->sync(), why, "wait for the staging buffer"); /* an upload may read it */
  if (!s) s = staging.reserve(x, per < n ? 2 * chunk : chunk, why, "staging memory");
  for (size_t r = 0, k = 0; !s && r < n; r += per, k++) {
    const size_t m = n - r < per ? n - r : per;
    uint8_t *buf = staging.p + (k & 1) * chunk; /* chunk k - 2's upload has ended (the sync below, at k - 1) */
    move_block(a, l, r0 + (int64_t)r, r0 + (int64_t)(r + m), 0, l.cols, buf, true);
    if (k > 0) s = accel__cuda_check(x->sync(), why, "upload rows"); /* chunk k - 1 has left its buffer */
    if (!s) s = accel__cuda_check(x->upload(d + r * l.row_bytes, buf, l.row_bytes * m), why, "upload rows");
  }
  return s;
}

/* A packed device block (rows [r0, r1), columns [c0, c1)) into a caller's
 * array, waited for. */
accel_status download_block(accel__executor *x, const accel_array *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            const uint8_t *d, hbuf &staging, char *why, bool device = false) {
  const layout l = layout_of(a);
  const size_t w = (size_t)((c1 - c0) * l.ch) * l.es, n = (size_t)(r1 - r0);
  accel_status s;
  if (l.pitched || device) { /* a device array is C-contiguous: pitched */
    s = accel__cuda_check(x->copy2d((uint8_t *)a->data + r0 * a->strides[0] + c0 * a->strides[1], (size_t)a->strides[0],
                                    d, w, w, n, device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost),
                          why, device ? "write a tile of a device array" : "download a tile");
    if (!s) s = accel__cuda_check(x->sync(), why, "download a tile");
    return s;
  }
  s = staging.reserve(x, w * n, why, "staging memory");
  if (!s) s = download(x, staging.p, d, w * n, why, "download a tile");
  if (!s) move_block(a, l, r0, r1, c0, c1, staging.p, false);
  return s;
}

/* The rows [*lo, *hi] of an image of n rows that rows [a, b] reach when
 * indices outside mirror back in (with or without repeating the edge) or
 * clamp to the edge; a <= b. */
void rows_reached(int64_t a, int64_t b, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t l = a < 0 ? 0 : a > n - 1 ? n - 1 : a, h = b < 0 ? 0 : b > n - 1 ? n - 1 : b;
  if (a < 0 && -a > h) h = -a < n - 1 ? -a : n - 1;
  if (b > n - 1 && 2 * n - 2 - b < l) l = 2 * n - 2 - b > 0 ? 2 * n - 2 - b : 0;
  *lo = l;
  *hi = h;
}

/* ---------------------------------------------------------------- pyramid */

__host__ __device__ inline int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

__host__ __device__ inline float load_f(const void *p, accel_dtype dt, int64_t i) {
  switch (dt) {
  case ACCEL_DTYPE_U8: return (float)((const uint8_t *)p)[i];
  case ACCEL_DTYPE_U16: return (float)((const uint16_t *)p)[i];
  default: return ((const float *)p)[i];
  }
}

/* The vertical pass: the kept rows of the band at every input column, in
 * float, the taps in order (the CPU op's sums). */
struct smooth_cols_f {
  const void *in; /* the band's input rows, packed */
  accel_dtype dt;
  int64_t band0, rows, cols; /* the band's first input row; the input's size */
  const float *k;
  int32_t radius;
  int64_t offset, factor, i0;
  float *tmp; /* band's output rows x cols */
  __host__ __device__ void operator()(int64_t i, int64_t c) const {
    const int64_t y = offset + factor * (i0 + i);
    float acc = 0.0f;
    for (int32_t t = -radius; t <= radius; t++)
      acc += k[t + radius] * load_f(in, dt, (clamp_index(y + t, rows) - band0) * cols + c);
    tmp[i * cols + c] = acc;
  }
};

/* The horizontal pass at the kept columns. */
struct smooth_rows_f {
  const float *tmp;
  int64_t cols;
  const float *k;
  int32_t radius;
  int64_t offset, factor, width;
  float *out;
  __host__ __device__ void operator()(int64_t i, int64_t j) const {
    const int64_t x = offset + factor * j;
    const float *row = tmp + i * cols;
    float v = 0.0f;
    for (int32_t t = -radius; t <= radius; t++) v += k[t + radius] * row[clamp_index(x + t, cols)];
    out[i * width + j] = v;
  }
};

/* The CPU op's taps (lib/reg/cpu_pyramid.c): the Gaussian sampled at the
 * integers within ceil(3 sigma), divided by its sum, as float; one tap of 1
 * for sigma 0. Returns the radius, or -1 when over `room`. */
int32_t gaussian(double sigma, float *k, int32_t room) {
  const int radius = sigma > 0 ? (int)ceil(3.0 * sigma) : 0;
  if (radius > room) return -1;
  double sum = 0;
  for (int t = -radius; t <= radius; t++) sum += radius ? exp(-0.5 * t * t / (sigma * sigma)) : 1.0;
  for (int t = -radius; t <= radius; t++)
    k[t + radius] = (float)((radius ? exp(-0.5 * t * t / (sigma * sigma)) : 1.0) / sum);
  return radius;
}

enum { MAX_RADIUS = 1024 };

struct pyramid_plan {
  const accel__reg_pyramid_job *job;
  layout in;
  int32_t radius;
  int64_t band;  /* output rows per band */
  bool in_place; /* the output is a device image (no band of output rows to download) */
};

/* Device bytes of a band of n output rows (its input rows at most). */
uint64_t band_bytes(const pyramid_plan &p, int64_t n) {
  int64_t rows = p.job->factor * (n - 1) + 2 * (int64_t)p.radius + 1;
  if (rows > p.in.rows) rows = p.in.rows;
  return (uint64_t)rows * p.in.row_bytes + 4u * (uint64_t)n * (uint64_t)(p.in.cols + (p.in_place ? 0 : p.job->width));
}

accel_status pyramid_band(accel__executor *x, const pyramid_plan &p, const float *dk, int64_t i0, int64_t i1,
                          hbuf &staging, float *dev_out, char *why) {
  const accel__reg_pyramid_job *job = p.job;
  int64_t lo, hi;
  rows_reached(job->offset + job->factor * i0 - p.radius, job->offset + job->factor * (i1 - 1) + p.radius, p.in.rows,
               &lo, &hi);
  const int64_t n = i1 - i0;
  dbuf din, dtmp, dout;
  accel_status s = din.get(x, p.in.row_bytes * (size_t)(hi - lo + 1), why);
  if (!s) s = dtmp.get(x, sizeof(float) * (size_t)(n * p.in.cols), why);
  if (!s && !dev_out) s = dout.get(x, sizeof(float) * (size_t)(n * job->width), why);
  float *out = dev_out ? dev_out + i0 * job->width : dout.as<float>();
  if (!s) s = upload_rows(x, job->in, lo, hi + 1, din.p, staging, why, job->in_device != 0);
  if (!s)
    s = each2d(x, n, p.in.cols,
               smooth_cols_f{din.p, job->in->dtype, lo, p.in.rows, p.in.cols, dk, p.radius, job->offset, job->factor,
                             i0, dtmp.as<float>()},
               why, "the pyramid's vertical pass");
  if (!s)
    s = each2d(x, n, job->width,
               smooth_rows_f{dtmp.as<float>(), p.in.cols, dk, p.radius, job->offset, job->factor, job->width, out}, why,
               "the pyramid's horizontal pass");
  if (!s && !dev_out)
    s = download(x, job->out + i0 * job->width, dout.p, sizeof(float) * (size_t)(n * job->width), why,
                 "download a band");
  return s;
}

/* The longest line the recursive prefilters below take on the device (a
 * pyramid level's or a warp layer's): each line is one thread's three
 * dependent passes, so a line of millions of pixels keeps one thread busy
 * for seconds (a strip image gives few of them, and a GPU that drives a
 * display stops such a kernel, which ends the process's GPU use). Longer
 * lines are left to the CPU (accel__decline; the same arithmetic). */
static const int64_t MAX_PREFILTER_LINE = (int64_t)1 << 18;

/* The level's cubic B-spline coefficients (lib/reg/prefilter.h): a thread
 * per row, then a thread per column. */
struct prefilter_rows_f {
  float *img;
  int64_t w;
  __host__ __device__ void operator()(uint64_t r) const { accel__reg_prefilter_row(img + (int64_t)r * w, w); }
};

struct prefilter_cols_f {
  float *img;
  int64_t w, h;
  __host__ __device__ void operator()(uint64_t c) const {
    accel__reg_prefilter_cols(img, w, h, (int64_t)c, (int64_t)c + 1);
  }
};

/* In place on the device image at dev_out, else on job->out through the
 * device. */
accel_status coefficients(accel__executor *x, const accel__reg_pyramid_job *job, float *dev_out, char *why) {
  const size_t n = (size_t)(job->width * job->height);
  dbuf d;
  accel_status s = dev_out ? ACCEL_OK : d.put(x, job->out, n, why, "upload the level");
  float *img = dev_out ? dev_out : d.as<float>();
  if (!s) s = each(x, (uint64_t)job->height, prefilter_rows_f{img, job->width}, why, "prefilter the rows");
  if (!s)
    s = each(x, (uint64_t)job->width, prefilter_cols_f{img, job->width, job->height}, why, "prefilter the columns");
  if (!s && !dev_out) s = download(x, job->out, d.p, sizeof(float) * n, why, "download the coefficients");
  return s;
}

/* The level image of `job` into job->out, or, with dev_out, into that
 * device image (width x height floats), which then stays on the device. */
accel_status pyramid(accel__executor *x, accel__call *call, const accel__reg_pyramid_job *job,
                     float *dev_out = nullptr) {
  char *why = call->why;
  if (job->width <= 0 || job->height <= 0) return ACCEL_OK;
  accel__reg_pyramid_job held;
  accel_array copy;
  if (job->resident) { /* the input's packed copy on the device, read there */
    copy = packed_at(job->in, job->resident);
    held = *job;
    held.in = &copy;
    held.in_device = 1;
    job = &held;
  }
  if (job->coefficients && (job->width > MAX_PREFILTER_LINE || job->height > MAX_PREFILTER_LINE))
    return accel__decline(call, "the coefficients of a %lld x %lld level image (lines over %lld pixels)",
                          (long long)job->width, (long long)job->height, (long long)MAX_PREFILTER_LINE);
  float k[2 * MAX_RADIUS + 1];
  pyramid_plan p = {job, layout_of(job->in), 0, job->height, dev_out != nullptr};
  if ((p.radius = gaussian(job->sigma, k, MAX_RADIUS)) < 0)
    return accel__decline(call, "a smoothing kernel over %d taps", 2 * MAX_RADIUS + 1);
  dbuf dk;
  accel_status s = dk.put(x, k, (size_t)(2 * p.radius + 1), why, "upload the taps");
  while (!s && p.band > 1 && band_bytes(p, p.band) > x->room()) p.band = (p.band + 1) / 2;
  if (!s && band_bytes(p, p.band) > x->room()) {
    accel__why(why, "a band of one row needs %.3f MiB, over the %.3f MiB left of the budget",
               band_bytes(p, 1) / 1048576.0, x->room() / 1048576.0);
    s = ACCEL_ERR_DEVICE_MEMORY;
  }
  hbuf staging;
  for (int64_t i0 = 0; i0 < job->height && !s; i0 += p.band)
    s = pyramid_band(x, p, dk.as<float>(), i0, i0 + p.band < job->height ? i0 + p.band : job->height, staging, dev_out,
                     why);
  dk.reset();
  if (!s && job->coefficients) s = coefficients(x, job, dev_out, why);
  if (s) x->drain();
  return s;
}

/* The registration's inputs held on the device (ops.h), or given back:
 * buffers whose memory outlives the call (keep) until the release takes it
 * back (adopt). */
accel_status hold_on_device(accel__call *call, accel__reg_hold_job *job) {
  return with_device(call, [&](accel__executor *x) {
    dbuf buf[2];
    if (job->release) { /* released with the buffers */
      for (int k = 0; k < 2; k++) buf[k].adopt(x, job->held[k], job->bytes[k]);
      job->held[0] = job->held[1] = nullptr;
      return ACCEL_OK;
    }
    uint64_t total = job->need;
    for (int k = 0; k < 2; k++) {
      job->held[k] = nullptr;
      job->bytes[k] = job->in[k] ? layout_of(job->in[k]).row_bytes * (size_t)job->in[k]->shape[0] : 0;
      total += job->bytes[k];
    }
    if (total > x->room()) return ACCEL_OK; /* the levels upload what they read */
    hbuf staging;
    accel_status s = ACCEL_OK;
    for (int k = 0; k < 2 && !s; k++) {
      if (!job->in[k]) continue;
      s = buf[k].get(x, job->bytes[k], call->why);
      if (!s) s = upload_rows(x, job->in[k], 0, job->in[k]->shape[0], buf[k].p, staging, call->why);
    }
    if (!s) s = accel__cuda_check(x->sync(), call->why, "hold the inputs"); /* before the staging memory goes */
    if (s) {
      x->drain();
      if (s != ACCEL_ERR_DEVICE_MEMORY) return s;
      /* the device had less free than the budget (another process): hold
       * nothing, as when the budget has no room, which is no failure */
      call->why[0] = '\0';
      return ACCEL_OK;
    }
    for (int k = 0; k < 2; k++) job->held[k] = buf[k].keep();
    return ACCEL_OK;
  });
}

accel_status pyramid_on_device(accel__call *call, accel__reg_pyramid_job *job) {
  return with_device(call, [&](accel__executor *x) {
    /* the caller's work that writes a device image comes first */
    accel_status s =
        job->in_device ? accel__cuda_check(x->device_sync(), call->why, "cudaDeviceSynchronize") : ACCEL_OK;
    return s ? s : pyramid(x, call, job);
  });
}

/* A device image's first non-finite value: a thread per segment of
 * accel__reg_finite_segment values of a row finds the segment's first (or
 * w), then the host the first segment, in row order, that has one. A thread
 * per row would read a whole row alone: a long row (a strip image) would
 * take seconds. */
struct first_bad_f {
  const float *img;
  int64_t w, seg, segs; /* segs: segments per row */
  int64_t *col;
  __host__ __device__ void operator()(uint64_t i) const {
    const int64_t r = (int64_t)i / segs, c1 = ((int64_t)i % segs + 1) * seg;
    int64_t c = c1 - seg;
    const float *row = img + r * w;
    while (c < c1 && c < w && isfinite(row[c])) c++;
    col[i] = c < c1 && c < w ? c : w;
  }
};

accel_status finite_on_device(accel__call *call, accel__reg_finite_job *job) {
  if (!job->device) return accel__decline(call, "a host image is checked on the host");
  return with_device(call, [&](accel__executor *x) {
    const int64_t h = job->image->shape[0], w = job->image->shape[1],
                  seg = accel__reg_finite_segment > 0 ? accel__reg_finite_segment : FINITE_SEGMENT;
    const int64_t segs = w > 0 ? (w + seg - 1) / seg : 0, n = h * segs;
    char *why = call->why;
    dbuf dcol;
    int64_t *col = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!col) {
      accel__why(why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    accel_status s = accel__cuda_check(x->device_sync(), why, "cudaDeviceSynchronize");
    if (!s && n > 0) s = dcol.get(x, sizeof(int64_t) * (size_t)n, why);
    if (!s && n > 0)
      s = each(x, (uint64_t)n, first_bad_f{(const float *)job->image->data, w, seg, segs, dcol.as<int64_t>()}, why,
               "look for non-finite values");
    if (!s && n > 0) s = download(x, col, dcol.p, sizeof(int64_t) * (size_t)n, why, "download the segments' findings");
    job->bad = -1;
    for (int64_t i = 0; i < n && !s && job->bad < 0; i++)
      if (col[i] < w) job->bad = i / segs * w + col[i];
    free(col);
    return s;
  });
}

/* ---------------------------------------------------------------- warp */

/* The source rows [row0, ...) of an image of w x h pixels of ch channels,
 * packed, on the device. */
struct src_band {
  const void *p;
  accel_dtype dt;
  int64_t w, h, ch, row0;
};

__host__ __device__ inline void store_f(void *p, accel_dtype dt, int64_t i, float v) {
  switch (dt) {
  case ACCEL_DTYPE_U8: ((uint8_t *)p)[i] = (uint8_t)accel__reg_to_int(v, 255.0f); break;
  case ACCEL_DTYPE_U16: ((uint16_t *)p)[i] = (uint16_t)accel__reg_to_int(v, 65535.0f); break;
  default: ((float *)p)[i] = v; break;
  }
}

/* One output pixel of a tile whose first pixel is (px0, py0) of the fixed
 * grid: T with bspline.h, the interpolation with interp.h (the CPU op's
 * arithmetic; offsets from the band's first row). */
struct warp_px_f {
  accel__reg_xform xf; /* params on the device */
  src_band src;
  bool cubic;
  float fill;
  int64_t px0, py0, tc;
  void *out; /* tile rows x tc x ch, packed */
  accel_dtype odt;
  __host__ __device__ void operator()(int64_t r, int64_t c) const {
    double tx, ty;
    accel__reg_apply(&xf, (double)(px0 + c), (double)(py0 + r), &tx, &ty);
    const int64_t o = (r * tc + c) * src.ch, row = src.w * src.ch, shift = src.row0 * row;
    if (!accel__reg_inside(tx, ty, src.w, src.h)) {
      for (int64_t k = 0; k < src.ch; k++) store_f(out, odt, o + k, fill);
    } else if (cubic) {
      int64_t ox[4], oy[4];
      float wx[4], wy[4];
      accel__reg_cubic_axis(tx, src.w, src.ch, ox, wx);
      accel__reg_cubic_axis(ty, src.h, row, oy, wy);
      for (int j = 0; j < 4; j++) oy[j] -= shift;
      for (int64_t k = 0; k < src.ch; k++)
        store_f(out, odt, o + k, accel__reg_cubic_sum((const float *)src.p + k, oy, ox, wy, wx));
    } else {
      int64_t ox[2], oy[2];
      float fx, fy;
      accel__reg_linear_axis(tx, src.w, src.ch, ox, &fx);
      accel__reg_linear_axis(ty, src.h, row, oy, &fy);
      oy[0] -= shift;
      oy[1] -= shift;
      for (int64_t k = 0; k < src.ch; k++) {
        const float v00 = load_f(src.p, src.dt, oy[0] + ox[0] + k), v10 = load_f(src.p, src.dt, oy[0] + ox[1] + k);
        const float v01 = load_f(src.p, src.dt, oy[1] + ox[0] + k), v11 = load_f(src.p, src.dt, oy[1] + ox[1] + k);
        store_f(out, odt, o + k, accel__reg_linear_mix(v00, v10, v01, v11, fx, fy));
      }
    }
  }
};

/* The source rows that row r of a tile reaches: [lo[r], hi[r]] before
 * mirroring (lo > hi when none). */
struct reach_f {
  accel__reg_xform xf;
  int64_t px0, py0, tc, w, h;
  int64_t *lo, *hi;
  __host__ __device__ void operator()(uint64_t r) const {
    int64_t l = INT64_MAX, u = INT64_MIN;
    for (int64_t c = 0; c < tc; c++) {
      double tx, ty;
      accel__reg_apply(&xf, (double)(px0 + c), (double)(py0 + (int64_t)r), &tx, &ty);
      if (!accel__reg_inside(tx, ty, w, h)) continue;
      const int64_t f = (int64_t)floor(ty);
      l = f - 1 < l ? f - 1 : l;
      u = f + 2 > u ? f + 2 : u;
    }
    lo[r] = l;
    hi[r] = u;
  }
};

struct warp_plan {
  const accel__reg_warp_job *job;
  layout out;
  int64_t sw, sh, ch; /* the source */
  accel_dtype sdt;
  size_t s_row;     /* bytes of a source row */
  int64_t y0, rows; /* the source rows the job holds: all of in's, or coef's band */
  int64_t tile;
  bool whole; /* the source uploaded once */
};

uint64_t tile_bytes(const warp_plan &p, int64_t t) {
  const uint64_t r = (uint64_t)(t < p.out.rows ? t : p.out.rows), c = (uint64_t)(t < p.out.cols ? t : p.out.cols);
  return r * c * (uint64_t)p.ch * p.out.es + 16u * r;
}

/* Whole source or bands, and the tile side: a multiple of the tile asked
 * for, about 1024 (fewer, larger launches and copies than the CPU's tiles),
 * halved until it fits beside the whole source; else bands, with the tile
 * asked for. Coefficients made from a host layer (device_coefficients)
 * hold the uploaded layer beside them until they are made: the whole
 * source needs room for that too. */
void plan_tiles(accel__executor *x, warp_plan &p, uint64_t raw) {
  const int64_t side = p.out.rows > p.out.cols ? p.out.rows : p.out.cols, asked = p.job->tile > 0 ? p.job->tile : 128;
  const uint64_t src = p.s_row * (uint64_t)p.rows, room = x->room();
  p.tile = asked < 1024 ? asked * (1024 / asked) : asked;
  p.tile = p.tile < side ? p.tile : side;
  while (p.tile > 16 && src + tile_bytes(p, p.tile) > room) p.tile = (p.tile + 1) / 2;
  p.whole = src + tile_bytes(p, p.tile) <= room && src + raw <= room;
  if (!p.whole) p.tile = asked;
}

/* Upload the source rows [lo, hi] into band. */
accel_status upload_source(accel__executor *x, const warp_plan &p, int64_t lo, int64_t hi, dbuf &band, hbuf &staging,
                           char *why) {
  const size_t bytes = p.s_row * (size_t)(hi - lo + 1);
  accel_status s = band.get(x, bytes, why);
  if (s) return s;
  if (p.job->coef) return upload(x, band.p, (const uint8_t *)p.job->coef + p.s_row * (size_t)(lo - p.y0), bytes, why);
  return upload_rows(x, p.job->in, lo, hi + 1, band.p, staging, why, p.job->in_device != 0);
}

/* The source band a tile reaches (rows [*lo, *hi]; *hi < *lo when none). */
accel_status tile_reach(accel__executor *x, const warp_plan &p, const accel__reg_xform &dxf, int64_t r0, int64_t c0,
                        int64_t tr, int64_t tc, int64_t *lo, int64_t *hi, char *why) {
  dbuf d;
  int64_t *h = (int64_t *)malloc(sizeof(int64_t) * 2 * (size_t)tr);
  if (!h) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_status s = d.get(x, sizeof(int64_t) * 2 * (size_t)tr, why);
  const reach_f f = {dxf, p.job->x0 + c0, p.job->y0 + r0, tc, p.sw, p.sh, d.as<int64_t>(), d.as<int64_t>() + tr};
  if (!s) s = each(x, (uint64_t)tr, f, why, "the rows a tile reaches");
  if (!s) s = download(x, h, d.p, sizeof(int64_t) * 2 * (size_t)tr, why, "download the rows a tile reaches");
  int64_t l = INT64_MAX, u = INT64_MIN;
  for (int64_t r = 0; r < tr && !s; r++) {
    l = h[r] < l ? h[r] : l;
    u = h[tr + r] > u ? h[tr + r] : u;
  }
  free(h);
  if (!s && l <= u) {
    rows_reached(l, u, p.sh, lo, hi);
    *lo = *lo > p.y0 ? *lo : p.y0; /* the job holds every row its pixels read */
    *hi = *hi < p.y0 + p.rows - 1 ? *hi : p.y0 + p.rows - 1;
  }
  if (!s && (l > u || *hi < *lo)) *hi = (*lo = p.y0) - 1;
  return s;
}

accel_status warp_tile(accel__executor *x, const warp_plan &p, const accel__reg_xform &dxf, dbuf &src, int64_t r0,
                       int64_t c0, hbuf &in_stage, hbuf &out_stage, char *why) {
  const accel__reg_warp_job *job = p.job;
  const int64_t tr = p.tile < p.out.rows - r0 ? p.tile : p.out.rows - r0;
  const int64_t tc = p.tile < p.out.cols - c0 ? p.tile : p.out.cols - c0;
  int64_t lo = p.y0, hi = p.y0 + p.rows - 1;
  accel_status s = ACCEL_OK;
  if (!p.whole) {
    s = tile_reach(x, p, dxf, r0, c0, tr, tc, &lo, &hi, why);
    if (!s && hi < lo) hi = lo; /* nothing reached: any one row */
    src.reset();                /* the previous tile's band */
    if (!s && p.s_row * (uint64_t)(hi - lo + 1) + tile_bytes(p, p.tile) > x->room()) {
      accel__why(why, "a tile reaches %lld rows of the source, %.3f MiB, over the %.3f MiB left of the budget",
                 (long long)(hi - lo + 1), p.s_row * (double)(hi - lo + 1) / 1048576.0, x->room() / 1048576.0);
      s = ACCEL_ERR_DEVICE_MEMORY;
    }
    if (!s) s = upload_source(x, p, lo, hi, src, in_stage, why);
  }
  dbuf dout;
  if (!s) s = dout.get(x, (size_t)(tr * tc * p.ch) * p.out.es, why);
  const src_band band = {src.p, p.sdt, p.sw, p.sh, p.ch, lo};
  const warp_px_f f = {
      dxf,    band,           job->interp == ACCEL_REG_INTERP_CUBIC, (float)job->fill, job->x0 + c0, job->y0 + r0, tc,
      dout.p, job->out->dtype};
  if (!s) s = each2d(x, tr, tc, f, why, "the warp kernel");
  if (!s) s = download_block(x, job->out, r0, r0 + tr, c0, c0 + tc, dout.p, out_stage, why, job->out_device != 0);
  return s;
}

/* A layer's cubic B-spline coefficients on the device, a line a thread
 * (lib/reg/warp_prefilter.h; the CPU's coefficients of the same layer):
 * rows (line = row * ch + channel) from the packed source times the gain,
 * then columns of the (h, w * ch) coefficients. */
struct coef_rows_f {
  const void *src;
  accel_dtype dt;
  float *coef;
  int64_t w, ch;
  __host__ __device__ void operator()(uint64_t l) const {
    const int64_t r = (int64_t)l / ch, k = (int64_t)l % ch;
    float *c = coef + r * w * ch + k;
    const float gain = w > 1 ? 6.0f : 1.0f;
    for (int64_t i = 0; i < w; i++) c[i * ch] = gain * load_f(src, dt, (r * w + i) * ch + k);
    accel__reg_warp_line(c, w, ch, 1.0f);
  }
};

struct coef_cols_f {
  float *coef;
  int64_t h, n;
  __host__ __device__ void operator()(uint64_t c) const { accel__reg_warp_line(coef + c, h, n, 6.0f); }
};

/* The coefficients of the whole layer job->in into coef (a cubic warp
 * without host coefficients: a device layer, read in place, or a host
 * layer uploaded once). */
accel_status device_coefficients(accel__executor *x, const accel__reg_warp_job *job, const warp_plan &p, dbuf &coef,
                                 hbuf &staging, char *why) {
  dbuf raw;
  accel_status s = ACCEL_OK;
  if (job->in_device) raw.borrow(job->in->data);
  else s = raw.get(x, layout_of(job->in).row_bytes * (size_t)p.sh, why);
  if (!s && !job->in_device) s = upload_rows(x, job->in, 0, p.sh, raw.p, staging, why);
  if (!s) s = coef.get(x, p.s_row * (size_t)p.sh, why);
  if (!s)
    s = each(x, (uint64_t)(p.sh * p.ch), coef_rows_f{raw.p, job->in->dtype, coef.as<float>(), p.sw, p.ch}, why,
             "prefilter the rows");
  if (!s)
    s = each(x, (uint64_t)(p.sw * p.ch), coef_cols_f{coef.as<float>(), p.sh, p.sw * p.ch}, why,
             "prefilter the columns");
  if (!s) s = accel__cuda_check(x->sync(), why, "prefilter the layer"); /* raw goes out of scope */
  return s;
}

accel_status warp(accel__executor *x, accel__call *call, accel__reg_warp_job *job) {
  char *why = call->why;
  warp_plan p = {};
  p.job = job;
  p.out = layout_of(job->out);
  const layout in = layout_of(job->in);
  p.sw = in.cols;
  p.sh = in.rows;
  p.ch = in.ch;
  /* cubic without the host's coefficients: made here, for the whole layer */
  const bool make = job->interp == ACCEL_REG_INTERP_CUBIC && !job->coef;
  if (make && (p.sw > MAX_PREFILTER_LINE || p.sh > MAX_PREFILTER_LINE))
    return accel__decline(call, "the coefficients of a %lld x %lld layer (lines over %lld pixels)", (long long)p.sw,
                          (long long)p.sh, (long long)MAX_PREFILTER_LINE);
  p.sdt = job->coef || make ? ACCEL_DTYPE_F32 : job->in->dtype;
  p.s_row = (size_t)(p.sw * p.ch) * (job->coef || make ? sizeof(float) : in.es);
  p.y0 = job->coef ? job->coef_y0 : 0;
  p.rows = job->coef ? job->coef_rows : in.rows;
  const size_t np = job->xf.params ? (size_t)(2 * job->xf.nx * job->xf.ny) : 0;
  dbuf dparams, src;
  hbuf in_stage, out_stage;
  accel_status s = dparams.put(x, job->xf.params, np, why, "upload the transform");
  accel__reg_xform dxf = job->xf;
  dxf.params = np ? dparams.as<double>() : nullptr;
  const uint64_t raw = make && !job->in_device ? in.row_bytes * (uint64_t)in.rows : 0; /* the layer, uploaded */
  if (!s) plan_tiles(x, p, raw);
  if (!s && make && !p.whole) {
    accel__why(why, "the layer's %.3f MiB of cubic coefficients and a tile%s are over the %.3f MiB left of the budget",
               p.s_row * (double)p.rows / 1048576.0, raw ? " (or the layer itself, uploaded to make them)" : "",
               x->room() / 1048576.0);
    s = ACCEL_ERR_DEVICE_MEMORY;
  }
  if (!s && make) s = device_coefficients(x, job, p, src, in_stage, why);
  else if (!s && p.whole) s = upload_source(x, p, p.y0, p.y0 + p.rows - 1, src, in_stage, why);
  const int64_t across = p.tile ? (p.out.cols + p.tile - 1) / p.tile : 0;
  const int64_t tiles = p.tile ? across * ((p.out.rows + p.tile - 1) / p.tile) : 0;
  for (int64_t i = 0, reported = 0; i < tiles && !s; i++) {
    s = warp_tile(x, p, dxf, src, i / across * p.tile, i % across * p.tile, in_stage, out_stage, why);
    /* at most about 100 calls a job, as the CPU op makes */
    if (!s && job->progress && ((i + 1) * 100 / tiles > reported || i + 1 == tiles)) {
      reported = (i + 1) * 100 / tiles;
      if (job->progress(job->progress_user, "reg.warp",
                        job->progress_base + job->progress_span * (double)(i + 1) / (double)tiles)) {
        accel__why(why, "cancelled by the progress callback");
        s = ACCEL_ERR_CANCELLED;
      }
    }
  }
  if (s) x->drain();
  return s;
}

accel_status warp_on_device(accel__call *call, accel__reg_warp_job *job) {
  return with_device(call, [&](accel__executor *x) {
    /* the caller's work on device layers comes first */
    const bool dev = job->in_device || job->out_device;
    accel_status s = dev ? accel__cuda_check(x->device_sync(), call->why, "cudaDeviceSynchronize") : ACCEL_OK;
    return s ? s : warp(x, call, job);
  });
}

/* ---------------------------------------------------------------- level */

/* One cell's sums (lib/reg/level_cell.h, the CPU's code), into its slot. */
struct cell_f {
  accel__reg_geom g; /* axes on the device */
  accel__reg_cell_in in;
  const double *params;
  double density;
  uint64_t stream;
  bool grad, normal;
  accel__reg_cell_acc *acc;
  double *sums;   /* cells x ACCEL__REG_SUMS */
  uint64_t first; /* the cell of thread 0 */
  __host__ __device__ void operator()(uint64_t k) const {
    const uint64_t c = first + k;
    accel__reg_cell_in e = in;
    e.g = &g;
    accel__reg_cell_acc *a = acc + c;
    memset(a, 0, sizeof *a);
    accel__reg_cell_eval(&e, params, (int64_t)c % g.ax.cells, (int64_t)c / g.ax.cells, density, stream, grad, normal,
                         a);
    for (int k = 0; k < ACCEL__REG_SUMS; k++) sums[c * ACCEL__REG_SUMS + k] = a->s[k];
  }
};

/* A node's gradient terms gathered colour by colour (the CPU's order of
 * additions): MSE into out (2n), NCC into out, out + 2n, out + 4n (gf, gm,
 * g1). */
struct gather_grad_f {
  const accel__reg_cell_acc *acc;
  int64_t nx, n, cx_n, cy_n;
  bool ncc;
  double *out;
  __host__ __device__ void operator()(uint64_t k) const {
    const int64_t i = (int64_t)k % nx, j = (int64_t)k / nx;
    double v[6] = {0, 0, 0, 0, 0, 0};
    for (int colour = 0; colour < 16; colour++) {
      int64_t cx, cy;
      int t;
      if (!accel__reg_cell_of(i, j, colour, cx_n, cy_n, &cx, &cy, &t)) continue;
      const accel__reg_cell_acc *a = acc + cy * cx_n + cx;
      v[0] += a->ga[0][t], v[1] += a->ga[1][t];
      if (ncc) v[2] += a->gb[0][t], v[3] += a->gb[1][t], v[4] += a->gc[0][t], v[5] += a->gc[1][t];
    }
    for (int m = 0; m < (ncc ? 3 : 1); m++) {
      out[2 * n * m + (int64_t)k] = v[2 * m];
      out[2 * n * m + n + (int64_t)k] = v[2 * m + 1];
    }
  }
};

/* One block of the Gauss-Newton matrix (node a, neighbour d of 7 x 7),
 * gathered colour by colour. */
struct gather_normal_f {
  const accel__reg_cell_acc *acc;
  int64_t nx, cx_n, cy_n;
  double *out;
  __host__ __device__ void operator()(uint64_t e) const {
    const int64_t a = (int64_t)e / ACCEL__REG_NB, d = (int64_t)e % ACCEL__REG_NB;
    const int64_t i = a % nx, j = a / nx, ib = i + d % 7 - 3, jb = j + d / 7 - 3;
    double v[3] = {0, 0, 0};
    for (int colour = 0; colour < 16; colour++) {
      int64_t cx, cy;
      int t;
      if (!accel__reg_cell_of(i, j, colour, cx_n, cy_n, &cx, &cy, &t)) continue;
      if (ib < cx || ib > cx + 3 || jb < cy || jb > cy + 3) continue;
      const int u = (int)((jb - cy) * 4 + (ib - cx));
      const accel__reg_cell_acc &c = acc[cy * cx_n + cx];
      v[0] += accel__reg_cell_L(&c, 0, t, u), v[1] += accel__reg_cell_L(&c, 1, t, u);
      v[2] += accel__reg_cell_L(&c, 2, t, u);
    }
    for (int m = 0; m < 3; m++) out[e * 3 + m] = v[m];
  }
};

/* The device evaluator's state: the level's images, axes and work arrays,
 * uploaded or allocated once for the level. */
struct level_dev {
  accel__executor *x;
  const accel__reg_geom *g; /* host */
  accel__reg_geom dg;       /* axes on the device */
  accel__reg_cell_in in;    /* device images and base */
  int64_t n, cells;
  dbuf fixed, moving, mask, axx, axy, base, params, acc, sums, grad, normal;
  double *h_sums, *h_grad; /* host: cells x SUMS; NCC's 6n */
  /* images over the budget: host level images (job's), streamed through
   * `band` (allocated only then) in bands of cell rows every evaluation
   * (level_stream) */
  dbuf band;
  double base_lo, base_hi; /* the base part's y displacement range, with 0 */
  double *row_lo, *row_hi; /* host: each node row's y displacement range, with 0 (every evaluation) */
  const accel__reg_level_job *job;
};

/* The level's arrays (cells, base, parameters, sums, derivatives). */
accel_status level_arrays(level_dev &d, const accel__reg_level_job *job, char *why) {
  accel__executor *x = d.x;
  const accel__reg_geom *g = d.g;
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC;
  const size_t nb = job->base.params ? (size_t)(2 * job->base.nx * job->base.ny) : 0;
  accel_status s = d.axx.put(x, g->ax.first, (size_t)(g->ax.cells + 1), why, "upload the cells");
  if (!s) s = d.axy.put(x, g->ay.first, (size_t)(g->ay.cells + 1), why, "upload the cells");
  if (!s) s = d.base.put(x, job->base.params, nb, why, "upload the base transform");
  if (!s) s = d.params.get(x, sizeof(double) * (size_t)(2 * d.n), why);
  const size_t cells = (size_t)(d.cells ? d.cells : 1); /* never a zero-byte allocation */
  if (!s) s = d.acc.get(x, sizeof(accel__reg_cell_acc) * cells, why);
  if (!s) s = d.sums.get(x, sizeof(double) * ACCEL__REG_SUMS * cells, why);
  if (!s) s = d.grad.get(x, sizeof(double) * (size_t)((ncc ? 6 : 2) * d.n), why);
  if (!s) s = d.normal.get(x, sizeof(double) * ACCEL__REG_NB3 * (size_t)d.n, why);
  if (s) return s;
  d.dg = *g;
  d.dg.ax.first = d.axx.as<int64_t>();
  d.dg.ay.first = d.axy.as<int64_t>();
  d.in.g = nullptr; /* each cell points it at its own copy of dg */
  d.in.base = job->base;
  d.in.base.params = nb ? d.base.as<double>() : nullptr;
  return ACCEL_OK;
}

/* The rows [*lo, *hi] of an image of h rows that cubic B-spline reads at
 * rows y in [y_lo, y_hi] (level pixels) touch: floor(y) - 1 .. floor(y) +
 * 2, mirrored at the edges as accel__reg_level_cubic mirrors them, a row
 * more on either side for rounding (the whole image for a range beyond
 * any image: non-finite parameters). */
void cubic_rows(double y_lo, double y_hi, int64_t h, int64_t *lo, int64_t *hi) {
  if (!(y_lo > -1e15 && y_hi < 1e15)) {
    *lo = 0, *hi = h - 1;
    return;
  }
  const int64_t a = (int64_t)floor(y_lo) - 2, b = (int64_t)floor(y_hi) + 3;
  if (a >= 0 && b <= h - 1) {
    *lo = a, *hi = b;
    return;
  }
  if (h == 1 || b - a + 1 >= 2 * (h - 1)) { /* a whole period of the mirrored image */
    *lo = 0, *hi = h - 1;
    return;
  }
  *lo = h, *hi = -1;
  for (int64_t y = a; y <= b; y++) {
    const int64_t m = accel__reg_mirror(y, h);
    *lo = m < *lo ? m : *lo, *hi = m > *hi ? m : *hi;
  }
}

/* The fixed level's rows [*lo, *hi] that the samples of cell rows [cy0,
 * cy1) read (accel__reg_fixed_at: the lattice rows themselves, or through
 * the linear part's inverse the bilinear reads' two rows), clamped. */
void fixed_rows(const accel__reg_geom *g, int64_t cy0, int64_t cy1, int64_t *lo, int64_t *hi) {
  const int64_t iy0 = g->ay.first[cy0], iy1 = g->ay.first[cy1] - 1;
  if (g->identity || iy1 < iy0) {
    *lo = iy0, *hi = iy1;
    return;
  }
  const double f = g->factor, off = g->offset;
  const double qx[2] = {f * (double)g->ax.first[0] + off, f * (double)(g->ax.first[g->ax.cells] - 1) + off};
  const double qy[2] = {f * (double)iy0 + off, f * (double)iy1 + off};
  double a = INFINITY, b = -INFINITY;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      const double ly = (g->inv[2] * qx[i] + g->inv[3] * qy[j] + g->invb[1] - off) / f;
      a = fmin(a, ly), b = fmax(b, ly);
    }
  *lo = (int64_t)floor(a) - 1, *hi = (int64_t)floor(b) + 2;
  *lo = *lo < 0 ? 0 : *lo, *hi = *hi > g->fh - 1 ? g->fh - 1 : *hi;
}

/* Range with 0 of the y displacements of each node row of the level's
 * grid (every evaluation) and of the whole base part (once): a sample's
 * displacement is a weighted mean of its support's, weights at most 1. A
 * non-finite value widens a range to infinity. */
void widen(double v, double *lo, double *hi) {
  if (v != v) *lo = -INFINITY, *hi = INFINITY;
  else *lo = v < *lo ? v : *lo, *hi = v > *hi ? v : *hi;
}

void node_row_ranges(level_dev &d, const double *params) {
  const int64_t nx = d.g->xf.nx, ny = d.g->xf.ny;
  for (int64_t j = 0; j < ny; j++) {
    double a = 0, b = 0;
    for (int64_t k = j * nx; k < (j + 1) * nx; k++) widen(params[d.n + k], &a, &b);
    d.row_lo[j] = a, d.row_hi[j] = b;
  }
}

void base_range(level_dev &d) {
  const accel__reg_xform &base = d.job->base;
  double a = 0, b = 0;
  const int64_t nb = base.params ? base.nx * base.ny : 0;
  for (int64_t k = nb; k < 2 * nb; k++) widen(base.params[k], &a, &b);
  d.base_lo = a, d.base_hi = b;
}

/* The y displacement's range [*lo, *hi] over node rows [j0, j1]. */
void uy_range(const level_dev &d, int64_t j0, int64_t j1, double *lo, double *hi) {
  double a = 0, b = 0;
  for (int64_t j = j0; j <= j1; j++) a = fmin(a, d.row_lo[j]), b = fmax(b, d.row_hi[j]);
  *lo = a + d.base_lo, *hi = b + d.base_hi;
}

/* Bytes of `fixed` rows of the fixed level (with the mask's, if any) and
 * `moving` rows of the moving one. */
uint64_t rows_bytes(const level_dev &d, int64_t fixed, int64_t moving) {
  return (uint64_t)fixed * (uint64_t)d.g->fw * (sizeof(float) + (d.job->mask ? 1 : 0)) +
         (uint64_t)moving * (uint64_t)d.g->mw * sizeof(float);
}

/* A band of cell rows [cy0, cy1): the level rows its samples read. */
struct band_rows {
  int64_t f0, f1, m0, m1; /* fixed and moving rows, inclusive (f1 < f0: none) */
  uint64_t bytes;         /* of the fixed rows, their mask and the moving rows */
};

band_rows rows_of(const level_dev &d, int64_t cy0, int64_t cy1) {
  const accel__reg_geom *g = d.g;
  band_rows b;
  fixed_rows(g, cy0, cy1, &b.f0, &b.f1);
  double ulo, uhi;
  uy_range(d, cy0, cy1 + 2, &ulo, &uhi);
  const double f = g->factor;
  const double qlo = f * (double)g->ay.first[cy0] + g->offset, qhi = f * (double)(g->ay.first[cy1] - 1) + g->offset;
  cubic_rows((qlo + ulo - g->offset) / f, (qhi + uhi - g->offset) / f, g->mh, &b.m0, &b.m1);
  b.bytes = rows_bytes(d, b.f1 >= b.f0 ? b.f1 - b.f0 + 1 : 0, b.m1 - b.m0 + 1);
  return b;
}

/* The level's images made on the device from the inputs (job->make): the
 * fixed one by its pyramid job (without one it is the caller's own image,
 * which level_resident uploads as it is), the moving one's coefficients. */
accel_status level_images(accel__executor *x, accel__call *call, level_dev &d, const accel__reg_level_job *job) {
  const accel__reg_geom *g = d.g;
  char *why = call->why;
  accel_status s = ACCEL_OK;
  if (job->make[0]) {
    s = d.fixed.get(x, sizeof(float) * (size_t)(g->fw * g->fh), why);
    if (!s) s = pyramid(x, call, job->make[0], d.fixed.as<float>());
  }
  if (!s) s = d.moving.get(x, sizeof(float) * (size_t)(g->mw * g->mh), why);
  if (!s) s = pyramid(x, call, job->make[1], d.moving.as<float>());
  return s;
}

/* The level's images on the device for the whole level: made there
 * (level_images) or uploaded as they are, and the mask. */
accel_status level_resident(level_dev &d, accel__call *call, const accel__reg_level_job *job) {
  accel__executor *x = d.x;
  const accel__reg_geom *g = d.g;
  char *why = call->why;
  accel_status s = job->make[1] ? level_images(x, call, d, job) : ACCEL_OK;
  if (!s && !d.fixed.p && job->fixed_resident) d.fixed.borrow((void *)job->fixed_resident);
  if (!s && !d.fixed.p) s = d.fixed.put(x, job->fixed, (size_t)(g->fw * g->fh), why, "upload the fixed level");
  if (!s && !d.moving.p) s = d.moving.put(x, job->moving, (size_t)(g->mw * g->mh), why, "upload the moving level");
  if (!s && job->mask) s = d.mask.put(x, job->mask, (size_t)(g->fw * g->fh), why, "upload the mask");
  d.in.fixed = d.fixed.as<float>();
  d.in.moving = d.moving.as<float>();
  d.in.mask = job->mask ? d.mask.p : nullptr;
  return s;
}

/* A level image that does not fit beside the level's arrays, made into its
 * host buffer (job->out): from a host input by the CPU's pyramid; from a
 * device array by the device's pyramid in bands of what the budget has
 * left, downloaded, then (the moving image) the coefficients by the CPU's
 * prefilter, whose arithmetic the device's is (prefilter.h). */
accel_status host_image(accel__executor *x, accel__call *call, accel__reg_pyramid_job *job) {
  if (!job->in_device) return accel__reg_cpu_pyramid(call, job);
  accel__reg_pyramid_job smooth = *job;
  smooth.coefficients = 0;
  const accel_status s = pyramid(x, call, &smooth); /* each band waited for */
  if (!s && job->coefficients) accel__reg_prefilter(job->out, job->width, job->height, call->threads);
  return s;
}

/* Images that do not fit: made on the host (host_image) and streamed
 * through a band buffer of what is left of the budget, up to the whole
 * images (level_stream). */
accel_status level_streamed(level_dev &d, accel__call *call, const accel__reg_level_job *job) {
  accel__executor *x = d.x;
  const accel__reg_geom *g = d.g;
  if (!(d.row_lo = (double *)malloc(sizeof(double) * 2 * (size_t)g->xf.ny))) {
    accel__why(call->why, "out of host memory for %lld node rows", (long long)g->xf.ny);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  d.row_hi = d.row_lo + g->xf.ny;
  base_range(d);
  accel_status s = ACCEL_OK;
  for (int k = 0; k < 2 && !s; k++)
    if (job->make[k]) s = host_image(x, call, job->make[k]);
  const uint64_t whole = rows_bytes(d, g->fh, g->mh);
  if (!s) s = d.band.get(x, (size_t)((x->room() < whole ? x->room() : whole) / 8 * 8), call->why);
  return s;
}

/* The cells' sums of a level whose images stream: bands of cell rows, as
 * many as the band buffer holds the rows of, each band's rows uploaded
 * (moving, fixed, mask) and its cells run reading them in place. The sums
 * are the resident images' (the same reads). */
accel_status level_stream(level_dev &d, cell_f cf, const double *params, char *why) {
  accel__executor *x = d.x;
  const accel__reg_geom *g = d.g;
  const int64_t cx_n = g->ax.cells, cy_n = g->ay.cells;
  accel_status s = ACCEL_OK;
  node_row_ranges(d, params);
  for (int64_t cy0 = 0; cy0 < cy_n && !s;) {
    int64_t cy1 = cy0 + 1;
    band_rows b = rows_of(d, cy0, cy1);
    if (b.bytes > d.band.n) {
      accel__why(why, "one row of cells reads %.3f MiB of the level's images, over the %.3f MiB left of the budget",
                 b.bytes / 1048576.0, d.band.n / 1048576.0);
      return ACCEL_ERR_DEVICE_MEMORY;
    }
    for (; cy1 < cy_n; cy1++) {
      const band_rows wider = rows_of(d, cy0, cy1 + 1);
      if (wider.bytes > d.band.n) break;
      b = wider;
    }
    float *mov = d.band.as<float>();
    float *fix = mov + (b.m1 - b.m0 + 1) * g->mw;
    const int64_t fr = b.f1 >= b.f0 ? b.f1 - b.f0 + 1 : 0;
    uint8_t *msk = (uint8_t *)(fix + fr * g->fw);
    const accel__reg_level_job *job = d.job;
    s = upload(x, mov, job->moving + b.m0 * g->mw, sizeof(float) * (size_t)((b.m1 - b.m0 + 1) * g->mw), why,
               "upload the moving rows");
    if (!s && fr)
      s = upload(x, fix, job->fixed + b.f0 * g->fw, sizeof(float) * (size_t)(fr * g->fw), why, "upload the fixed rows");
    if (!s && fr && job->mask)
      s = upload(x, msk, job->mask + b.f0 * g->fw, (size_t)(fr * g->fw), why, "upload the mask rows");
    /* the cells index the whole images: pointers shifted back by the band's first row
     * (only the band's rows are read) */
    cf.in.moving = mov - b.m0 * g->mw;
    cf.in.fixed = fix - b.f0 * g->fw;
    cf.in.mask = job->mask ? msk - b.f0 * g->fw : nullptr;
    cf.first = (uint64_t)(cy0 * cx_n);
    if (!s) s = each(x, (uint64_t)((cy1 - cy0) * cx_n), cf, why, "the cells' sums");
    cy0 = cy1;
  }
  return s;
}

/* The evaluator (lib/reg/level.h): the cells' sums on the device, the
 * gradient and matrix gathered there, the scalar sums added on the host in
 * cell order, then the CPU's finish. */
accel_status level_eval(accel__call *call, void *state, const double *params, int set, int32_t iteration, double *value,
                        int64_t count[3], double *grad, double *normal) {
  level_dev &d = *(level_dev *)state;
  accel__executor *x = d.x;
  char *why = call->why;
  const accel__reg_geom *g = d.g;
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC;
  const cell_f cf = {d.dg,
                     d.in,
                     d.params.as<double>(),
                     accel__reg_density(g, set),
                     accel__reg_stream(g, set, iteration),
                     grad != nullptr,
                     normal != nullptr,
                     d.acc.as<accel__reg_cell_acc>(),
                     d.sums.as<double>(),
                     0};
  accel_status s = upload(x, d.params.p, params, sizeof(double) * (size_t)(2 * d.n), why, "upload the parameters");
  if (!s) s = d.band.p ? level_stream(d, cf, params, why) : each(x, (uint64_t)d.cells, cf, why, "the cells' sums");
  const int64_t nx = g->xf.nx, cx_n = g->ax.cells, cy_n = g->ay.cells;
  if (!s && grad)
    s = each(x, (uint64_t)d.n,
             gather_grad_f{d.acc.as<accel__reg_cell_acc>(), nx, d.n, cx_n, cy_n, ncc, d.grad.as<double>()}, why,
             "the gradient");
  if (!s && normal)
    s = each(x, (uint64_t)(d.n * ACCEL__REG_NB),
             gather_normal_f{d.acc.as<accel__reg_cell_acc>(), nx, cx_n, cy_n, d.normal.as<double>()}, why,
             "the Gauss-Newton matrix");
  if (!s) s = download(x, d.h_sums, d.sums.p, sizeof(double) * ACCEL__REG_SUMS * (size_t)d.cells, why);
  if (!s && grad) s = download(x, ncc ? d.h_grad : grad, d.grad.p, sizeof(double) * (size_t)((ncc ? 6 : 2) * d.n), why);
  if (!s && normal) s = download(x, normal, d.normal.p, sizeof(double) * ACCEL__REG_NB3 * (size_t)d.n, why);
  if (s) return s;
  double sum[ACCEL__REG_SUMS] = {0};
  for (int64_t c = 0; c < d.cells; c++)
    for (int k = 0; k < ACCEL__REG_SUMS; k++) sum[k] += d.h_sums[c * ACCEL__REG_SUMS + k];
  count[0] = (int64_t)sum[ACCEL__REG_SUMS - 1];
  count[1] = (int64_t)sum[ACCEL__REG_SUM_FIXED];
  count[2] = (int64_t)sum[ACCEL__REG_SUM_INSIDE];
  accel__reg_finish(g, sum, d.h_grad, d.h_grad + 2 * d.n, d.h_grad + 4 * d.n, value, grad, normal);
  return ACCEL_OK;
}

/* Whether the level's inputs are device arrays (its pyramid jobs read them
 * in place). */
bool device_inputs(const accel__reg_level_job *job) {
  return (job->make[0] && job->make[0]->in_device) || (job->make[1] && job->make[1]->in_device);
}

accel_status level(accel__executor *x, accel__call *call, accel__reg_level_job *job) {
  accel__reg_geom g;
  accel_status s = accel__reg_geom_init(call, job, &g);
  if (s) return s;
  level_dev d;
  d.in = accel__reg_cell_in{}; /* no 8- or 16-bit fixed image: the device's is float */
  d.x = x;
  d.g = &g;
  d.n = g.xf.nx * g.xf.ny;
  d.cells = g.ax.cells * g.ay.cells;
  d.job = job;
  d.row_lo = d.row_hi = nullptr;
  d.h_sums = (double *)malloc(sizeof(double) * ACCEL__REG_SUMS * (size_t)(d.cells ? d.cells : 1));
  d.h_grad = (double *)malloc(sizeof(double) * 6 * (size_t)d.n);
  if (!d.h_sums || !d.h_grad) {
    accel__why(call->why, "out of host memory for %lld cells", (long long)d.cells);
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  /* the optimizer works on a copy of the parameters: after a failure the
   * CPU starts again from the job's own */
  accel__reg_level_job mine = *job;
  mine.params = nullptr;
  if (!s && !(mine.params = (double *)malloc(sizeof(double) * 2 * (size_t)d.n))) {
    accel__why(call->why, "out of host memory for the parameters");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s) {
    memcpy(mine.params, job->params, sizeof(double) * 2 * (size_t)d.n);
    mine.xf.params = mine.params;
    s = level_arrays(d, job, call->why);
    if (!s) {
      s = level_resident(d, call, job);
      if (s == ACCEL_ERR_DEVICE_MEMORY) { /* the images do not fit beside the arrays */
        x->drain();                       /* before what the stream's work uses is given back */
        d.fixed.reset(), d.moving.reset(), d.mask.reset();
        call->why[0] = '\0';
        s = level_streamed(d, call, job);
      }
    }
  }
  if (!s) {
    const accel__reg_evaluator ev = {&d, level_eval};
    s = accel__reg_optimize(call, &mine, &g, &ev);
  }
  if (!s) memcpy(job->params, mine.params, sizeof(double) * 2 * (size_t)d.n);
  if (s) x->drain();
  free(mine.params);
  free(d.h_sums);
  free(d.h_grad);
  free(d.row_lo);
  accel__reg_geom_free(&g);
  return s;
}

accel_status level_on_device(accel__call *call, accel__reg_level_job *job) {
  return with_device(call, [&](accel__executor *x) {
    /* the caller's work that writes a device input comes first */
    accel_status s =
        device_inputs(job) ? accel__cuda_check(x->device_sync(), call->why, "cudaDeviceSynchronize") : ACCEL_OK;
    return s ? s : level(x, call, job);
  });
}

} // namespace

extern "C" const accel__reg_ops accel__cuda_reg_ops = {
    /* .pyramid = */ pyramid_on_device,
    /* .level = */ level_on_device,
    /* .warp = */ warp_on_device,
    /* .prealign = */ accel__reg_cuda_prealign,
    /* .finite = */ finite_on_device,
    /* .hold = */ hold_on_device,
};
