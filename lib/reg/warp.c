/* Warping images with a transform: checks, the cubic prefilter, dispatch.
 *
 * Cubic interpolation needs the image's B-spline coefficients (Unser,
 * Aldroubi and Eden, "B-spline signal processing", IEEE Trans. Signal
 * Processing 41(2), 1993; Unser, "Splines: a perfect fit for signal and
 * image processing", IEEE Signal Processing Magazine 16(6), 1999, Box 2):
 * along each axis the samples times the gain 6 go through the causal and
 * anticausal first-order recursions of the pole z = sqrt(3) - 2, started
 * for mirror-symmetric boundaries. The start values are those of ITK's
 * BSplineDecompositionImageFilter, which elastix's FinalBSplineInterpolator
 * uses: the causal sum truncated after 18 terms (|z|^18 < 1e-10, ITK's
 * tolerance) when the line is longer, the exact mirrored sum otherwise; the
 * anticausal start z / (z^2 - 1) (z c[n-2] + c[n-1]); a line of one sample
 * stays as it is. Lines of more than 18 samples are filtered in float,
 * shorter ones (with the exact start) in double.
 *
 * The coefficients of one layer take 4 bytes per pixel and channel: a
 * large host layer is warped band by band of output rows, each band with
 * the coefficients of the moving rows it reaches (cubic_band), all channels
 * together, or one channel at a time when even a band's would pass
 * accel__reg_coef_all_bytes (the same result). A cubic warp with a device
 * layer goes whole to the op, which makes the whole layer's coefficients
 * (whole_layer; the GPU on the device, the CPU from host copies).
 */
#include "reg/ops.h"
#include "reg/transform.h"
#include "reg/warp_prefilter.h"

#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARP_OPTIONS_V1 sizeof(accel_reg_warp_options)

/* Above this, channels are prefiltered and warped one at a time (tests
 * lower it to compare both ways). */
int64_t accel__reg_coef_all_bytes = (int64_t)1 << 30;
#define HORIZON ACCEL__REG_HORIZON
#define POLE ACCEL__REG_POLE
/* Columns per strip of the column pass on short columns, per band on
 * long ones. */
#define STRIP 64
#define BAND 1024

accel_status accel_reg_warp_options_init(accel_reg_warp_options *o, size_t struct_size) {
  static const accel_reg_warp_options DEFAULTS = {.interp = ACCEL_REG_INTERP_CUBIC};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, WARP_OPTIONS_V1);
}

/* ------------------------------------------------------------ prefilter */

/* Lines (rows of one channel) filtered together, one per lane of a
 * vector: the recursions along a line are chains of dependent operations,
 * LANES independent lines keep the arithmetic units busy. */
#define LANES 8

/* One line of `in` (row r, channel k) times the gain (none for a line of
 * one sample, which stays as it is) into t[x * LANES]; false for a
 * non-finite F32 sample. */
static bool load_line(const accel_array *in, int64_t r, int64_t k, float *t) {
  const int64_t w = in->shape[1], s1 = in->strides[1];
  const float gain = w > 1 ? 6.0f : 1.0f;
  const char *p = (const char *)in->data + r * in->strides[0] + (in->ndim == 3 ? k * in->strides[2] : 0);
  bool finite = true;
  switch (in->dtype) {
  case ACCEL_DTYPE_U8:
    for (int64_t x = 0; x < w; x++) t[x * LANES] = gain * (float)*(const uint8_t *)(p + x * s1);
    break;
  case ACCEL_DTYPE_U16:
    for (int64_t x = 0; x < w; x++) t[x * LANES] = gain * (float)*(const uint16_t *)(p + x * s1);
    break;
  default:
    for (int64_t x = 0; x < w; x++) {
      const float v = *(const float *)(p + x * s1);
      finite = finite && isfinite(v);
      t[x * LANES] = gain * v;
    }
  }
  return finite;
}

typedef float v8f __attribute__((vector_size(32)));
/* LANES floats at any float's address. */
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));

/* The recursions of accel__reg_warp_line_f (warp_prefilter.h) on LANES
 * lines of n > HORIZON samples at once, in float: each lane's operations
 * are the line's. */
static void lanes_coefficients(float *t, int64_t n) {
  v8f_u *T = (v8f_u *)(void *)t;
  const float z = (float)POLE, za = (float)(POLE / (POLE * POLE - 1.0));
  v8f sum = T[0];
  float zn = z;
  for (int64_t k = 1; k < HORIZON; k++, zn *= z) sum += zn * T[k];
  T[0] = sum;
  v8f prev = sum;
  for (int64_t k = 1; k < n; k++) T[k] = prev = T[k] + z * prev;
  v8f next = za * (z * T[n - 2] + T[n - 1]);
  T[n - 1] = next;
  for (int64_t k = n - 2; k >= 0; k--) T[k] = next = z * (next - T[k]);
}

/* LANES whole lines starting at src[l] (samples s1 bytes apart) times the
 * gain into t[x * LANES + l], a sample of every line at a time (the lines
 * of one row lie side by side in memory); fin[l]: line l's F32 samples
 * are finite. */
#define LOAD_LANES(T, check)                                                                                           \
  for (int64_t x = 0; x < w; x++)                                                                                      \
    for (int l = 0; l < LANES; l++) {                                                                                  \
      const float v = (float)*(const T *)(const void *)(src[l] + x * s1);                                              \
      if (check) fin[l] &= isfinite(v) != 0;                                                                           \
      t[x * LANES + l] = gain * v;                                                                                     \
    }

/* Lines [l0, l0 + LANES) of the rows [r0, r0 + rows) of `in` (row-major,
 * channel fastest) into coef; false for a non-finite sample (*bad: its row). */
ACCEL__CLONES("avx2", "default")
static bool lines_block(const accel_array *in, int64_t r0, int64_t rows, int64_t ch, int64_t nc, int64_t l0, float *t,
                        float *coef, int64_t *bad) {
  const int64_t w = in->shape[1], lines = rows * nc, s1 = in->strides[1];
  if (l0 + LANES <= lines) { /* a full block */
    const char *src[LANES];
    bool fin[LANES];
    const float gain = w > 1 ? 6.0f : 1.0f;
    for (int l = 0; l < LANES; l++) {
      src[l] = (const char *)in->data + (r0 + (l0 + l) / nc) * in->strides[0] +
               (in->ndim == 3 ? (ch + (l0 + l) % nc) * in->strides[2] : 0);
      fin[l] = true;
    }
    switch (in->dtype) {
    case ACCEL_DTYPE_U8: LOAD_LANES(uint8_t, false) break;
    case ACCEL_DTYPE_U16: LOAD_LANES(uint16_t, false) break;
    default: LOAD_LANES(float, true) break;
    }
    for (int l = 0; l < LANES; l++)
      if (!fin[l]) {
        *bad = r0 + (l0 + l) / nc;
        return false;
      }
  } else {
    for (int l = 0; l < LANES; l++) {
      if (l0 + l >= lines) {
        for (int64_t x = 0; x < w; x++) t[x * LANES + l] = 0.0f;
      } else if (!load_line(in, r0 + (l0 + l) / nc, ch + (l0 + l) % nc, t + l)) {
        *bad = r0 + (l0 + l) / nc;
        return false;
      }
    }
  }
  if (w > HORIZON) {
    lanes_coefficients(t, w);
  } else if (w > 1) {
    double line[HORIZON];
    for (int l = 0; l < LANES; l++) {
      for (int64_t x = 0; x < w; x++) line[x] = t[x * LANES + l];
      accel__reg_warp_line_d(line, w);
      for (int64_t x = 0; x < w; x++) t[x * LANES + l] = (float)line[x];
    }
  }
  const int m = lines - l0 < LANES ? (int)(lines - l0) : LANES;
  float *dst[LANES];
  for (int l = 0; l < m; l++) dst[l] = coef + (l0 + l) / nc * w * nc + (l0 + l) % nc;
  if (m == LANES) /* constant bounds: the lanes' stores unrolled */
    for (int64_t x = 0; x < w; x++)
      for (int l = 0; l < LANES; l++) dst[l][x * nc] = t[x * LANES + l];
  else
    for (int64_t x = 0; x < w; x++)
      for (int l = 0; l < m; l++) dst[l][x * nc] = t[x * LANES + l];
  return true;
}

/* Rows: rows [r0, r0 + rows) and channels [ch, ch + nc) of `in` into coef
 * (rows, w, nc), filtered along x. Returns 0, 1 for a non-finite F32 sample
 * (the first such row in *bad_row) or 2 when out of memory. */
static int prefilter_rows(const accel_array *in, int64_t r0, int64_t rows, int64_t ch, int64_t nc, float *coef,
                          int threads, int64_t *bad_row) {
  (void)threads; /* unused without OpenMP */
  const int64_t w = in->shape[1], blocks = (rows * nc + LANES - 1) / LANES;
  int64_t bad = INT64_MAX;
  int nomem = 0;
#pragma omp parallel num_threads(threads)
  {
    float *t = malloc((size_t)w * LANES * sizeof *t);
    if (!t) {
#pragma omp atomic write
      nomem = 1;
    }
#pragma omp for schedule(static) reduction(min : bad)
    for (int64_t b = 0; b < blocks; b++) {
      int64_t row;
      if (t && !lines_block(in, r0, rows, ch, nc, b * LANES, t, coef, &row)) bad = row < bad ? row : bad;
    }
    free(t);
  }
  *bad_row = bad;
  return nomem ? 2 : bad != INT64_MAX ? 1 : 0;
}

/* Columns: the same recursions down every column of coef (h rows of n
 * floats), in float (double for whole columns of at most HORIZON rows,
 * which take the exact mirrored start, strip by strip). `top`: the rows
 * start at the image's first row (ITK's causal start), else somewhere
 * inside it: the causal recursion then starts from the first row's sample
 * alone, whose error has decayed below float precision MARGIN rows further
 * down (the anticausal start at the band's end likewise). Long columns go
 * in bands of BAND columns taken row by row (each step reads and writes
 * consecutive floats; a narrow strip walked down the rows touches a new
 * page at every row), each column with the operations of its own
 * recursion. */
static void prefilter_columns(float *coef, int64_t h, int64_t n, bool top, int threads) {
  (void)threads; /* unused without OpenMP */
  if (h < 2) return;
  const float z = (float)POLE, za = (float)(POLE / (POLE * POLE - 1.0));
  if (h <= HORIZON) {
    const int64_t strips = (n + STRIP - 1) / STRIP;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t s = 0; s < strips; s++) {
      const int64_t x0 = s * STRIP, m = n - x0 < STRIP ? n - x0 : STRIP;
      float *c = coef + x0;
      double col[HORIZON];
      for (int64_t x = 0; x < m; x++) {
        for (int64_t r = 0; r < h; r++) col[r] = 6.0 * (double)c[r * n + x];
        accel__reg_warp_line_d(col, h);
        for (int64_t r = 0; r < h; r++) c[r * n + x] = (float)col[r];
      }
    }
    return;
  }
  const int64_t bands = (n + BAND - 1) / BAND;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t s = 0; s < bands; s++) {
    const int64_t x0 = s * BAND, m = n - x0 < BAND ? n - x0 : BAND;
    float *c = coef + x0, sum[BAND];
    for (int64_t x = 0; x < m; x++) sum[x] = 6.0f * c[x];
    float zn = z;
    for (int64_t k = 1; k < HORIZON && top; k++, zn *= z) {
      const float *row = c + k * n;
      for (int64_t x = 0; x < m; x++) sum[x] += zn * (6.0f * row[x]);
    }
    for (int64_t x = 0; x < m; x++) c[x] = sum[x];
    for (int64_t r = 1; r < h; r++) {
      float *row = c + r * n;
      const float *up = row - n;
      for (int64_t x = 0; x < m; x++) row[x] = 6.0f * row[x] + z * up[x];
    }
    float *last = c + (h - 1) * n;
    for (int64_t x = 0; x < m; x++) last[x] = za * (z * last[x - n] + last[x]);
    for (int64_t r = h - 2; r >= 0; r--) {
      float *row = c + r * n;
      const float *down = row + n;
      for (int64_t x = 0; x < m; x++) row[x] = z * (down[x] - row[x]);
    }
  }
}

/* The coefficients of a whole layer (h, w, C) into coef (h, w * C floats):
 * every row of every channel, then every column, from the image's edges.
 * 0, 1 (a non-finite F32 sample: its row in *bad_row) or 2 (out of
 * memory). */
int accel__reg_layer_coefficients(const accel_array *in, float *coef, int threads, int64_t *bad_row) {
  const int64_t h = in->shape[0], w = in->shape[1], nc = in->ndim == 3 ? in->shape[2] : 1;
  const int rc = prefilter_rows(in, 0, h, 0, nc, coef, threads, bad_row);
  if (!rc) prefilter_columns(coef, h, w * nc, true, threads);
  return rc;
}

/* ------------------------------------------------------------ checks */

/* One image of the call: a 2-D or (h, w, C) U8/U16/F32 array, C in 1, 3, 4;
 * a device array (on a CUDA context) described in
 * *plain with *device set. *use is the one to read. */
static accel_status check_image(accel_ctx *ctx, const char *func, const char *what, int32_t i, const accel_array *in,
                                accel_array *plain, const accel_array **use, bool *device, int64_t *chans) {
  char name[32];
  snprintf(name, sizeof name, "%s[%d]", what, (int)i);
  if (!in) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s is NULL", name);
  accel_status s = accel__array_accept(ctx, func, name, in, plain, use, device);
  if (!s && !*device) s = accel__array_check(ctx, func, name, in);
  if (s) return s;
  const accel_array *a = *use;
  if (a->ndim != 2 && a->ndim != 3)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be (rows, cols) or (rows, cols, C), not %d-D",
                          name, (int)a->ndim);
  if (a->dtype != ACCEL_DTYPE_U8 && a->dtype != ACCEL_DTYPE_U16 && a->dtype != ACCEL_DTYPE_F32)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be U8, U16 or F32, not %s", name,
                          accel__dtype_name(a->dtype));
  *chans = a->ndim == 3 ? a->shape[2] : 1;
  if (*chans != 1 && *chans != 3 && *chans != 4)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has %lld channels; 1, 3 or 4", name, (long long)*chans);
  /* an empty output is an empty region, as accel_reg_transform_field's */
  const int64_t least = strcmp(what, "out") == 0 ? 0 : 1;
  if (a->shape[0] < least || a->shape[1] < least)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s is empty (%lld x %lld)", name, (long long)a->shape[0],
                          (long long)a->shape[1]);
  if (a->shape[0] > INT32_MAX || a->shape[1] > INT32_MAX)
    return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "%s is %lld x %lld: at most 2^31 - 1 pixels a side", name,
                          (long long)a->shape[0], (long long)a->shape[1]);
  if ((uint64_t)a->shape[0] * (uint64_t)a->shape[1] > accel__ctx_max_pixels(ctx))
    return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "%s has %lld x %lld pixels, over the context's max_pixels %llu",
                          name, (long long)a->shape[0], (long long)a->shape[1],
                          (unsigned long long)accel__ctx_max_pixels(ctx));
  return ACCEL_OK;
}

static accel_status check_options(accel_ctx *ctx, const char *func, const accel_reg_warp_options *in,
                                  accel_reg_warp_options *o) {
  accel_reg_warp_options_init(o, sizeof *o);
  accel_status s;
  if (in && (s = accel__versioned_in(ctx, func, "options", in, o, sizeof *o, WARP_OPTIONS_V1))) return s;
  if (o->interp != ACCEL_REG_INTERP_LINEAR && o->interp != ACCEL_REG_INTERP_CUBIC)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "interp %d: ACCEL_REG_INTERP_LINEAR (1) or _CUBIC (3)",
                          (int)o->interp);
  if (!isfinite(o->fill)) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "fill is not finite");
  if (o->tile < 0 || o->tile > 65536)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "tile %lld: 0 (chosen) or 1..65536", (long long)o->tile);
  const int64_t lim = (int64_t)1 << 40;
  if (o->x0 < -lim || o->x0 > lim || o->y0 < -lim || o->y0 > lim)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "region offset (%lld, %lld) beyond +-2^40",
                          (long long)o->x0, (long long)o->y0);
  return ACCEL_OK;
}

/* The first row of an F32 image holding a non-finite value, or -1. */
static int64_t first_nonfinite_row(const accel_array *a, int threads) {
  (void)threads; /* unused without OpenMP */
  if (a->dtype != ACCEL_DTYPE_F32) return -1;
  const int64_t h = a->shape[0], w = a->shape[1], nc = a->ndim == 3 ? a->shape[2] : 1;
  const int64_t s2 = a->ndim == 3 ? a->strides[2] : 0;
  int64_t bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad) num_threads(threads)
  for (int64_t r = 0; r < h; r++) {
    const char *row = (const char *)a->data + r * a->strides[0];
    bool ok = true;
    for (int64_t x = 0; x < w; x++)
      for (int64_t k = 0; k < nc; k++) ok = ok && isfinite(*(const float *)(row + x * a->strides[1] + k * s2));
    if (!ok) bad = r < bad ? r : bad;
  }
  return bad == INT64_MAX ? -1 : bad;
}

/* The layers of one call, the device ones' descriptions and flags. */
typedef struct layers {
  const accel_array **in, **out;
  accel_array *plain; /* [2 * count]: in[i]'s at i, out[i]'s at count + i */
  bool *device;       /* the same order */
} layers;

/* The arguments of one call. */
static accel_status check_call(accel_ctx *ctx, const char *func, const accel_array *const *in,
                               const accel_array *const *out, int32_t count, layers *L) {
  for (int32_t i = 0; i < count; i++) {
    int64_t ci, co;
    accel_status s = check_image(ctx, func, "in", i, in[i], &L->plain[i], &L->in[i], &L->device[i], &ci);
    if (!s) s = check_image(ctx, func, "out", i, out[i], &L->plain[count + i], &L->out[i], &L->device[count + i], &co);
    if (s) return s;
    if (ci != co)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "out[%d] has %lld channels, in[%d] %lld", (int)i,
                            (long long)co, (int)i, (long long)ci);
  }
  for (int32_t i = 0; i < count; i++)
    for (int32_t j = 0; j < count; j++) {
      if (accel__arrays_overlap(L->out[i], L->in[j]))
        return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "out[%d] overlaps in[%d]", (int)i, (int)j);
      if (j < i && accel__arrays_overlap(L->out[i], L->out[j]))
        return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "out[%d] overlaps out[%d]", (int)i, (int)j);
    }
  return ACCEL_OK;
}

/* ------------------------------------------------------------ dispatch */

ACCEL__STAGE_FN(run_warp, reg, warp, job)

/* The first row of a layer holding a non-finite value, or -1: on the host,
 * or where a device layer lives ("reg.check"; a CPU run reads a host copy). */
static accel_status nonfinite_row(accel_ctx *ctx, const accel_array *a, bool device, int64_t *row) {
  if (!device) {
    *row = first_nonfinite_row(a, accel__ctx_threads(ctx));
    return ACCEL_OK;
  }
  *row = -1;
  if (a->dtype != ACCEL_DTYPE_F32) return ACCEL_OK;
  const int64_t per_row = a->shape[1] * (a->ndim == 3 ? a->shape[2] : 1);
  accel_array flat; /* (rows, cols * C): the same C-contiguous memory */
  if (accel_array_init(&flat, a->data, ACCEL_DTYPE_F32, 2, (int64_t[]){a->shape[0], per_row}))
    return accel__fail(ctx, ACCEL_ERR_INTERNAL, "a layer's flat view");
  int64_t bad = -1;
  const accel_status s = accel__reg_device_nonfinite(ctx, &flat, &bad);
  if (!s && bad >= 0) *row = bad / per_row;
  return s;
}

/* One warp of a whole layer, device layers in place (host copies for a
 * CPU run: the input copied down, the output up): linear, or cubic with
 * the coefficients of the whole layer made by the op (on the device where
 * the GPU runs it). */
static accel_status whole_layer(accel_ctx *ctx, accel__reg_warp_job *job, const accel_array *in, bool in_dev,
                                const accel_array *out, bool out_dev) {
  accel_array vin = *in, vout = *out;
  accel__device_slot slots[2];
  int n = 0;
  if (in_dev)
    slots[n++] = (accel__device_slot){
        .ptr = &vin.data, .bytes = (size_t)accel__array_count(in) * accel_dtype_size(in->dtype), .in = true};
  if (out_dev) /* every pixel is written (the fill outside) */
    slots[n++] = (accel__device_slot){
        .ptr = &vout.data, .bytes = (size_t)accel__array_count(out) * accel_dtype_size(out->dtype), .out = true};
  job->in = &vin, job->out = &vout;
  job->in_device = in_dev, job->out_device = out_dev;
  const accel_status s = accel__dispatch_device(ctx, "reg.warp", run_warp, job, slots, n);
  job->in_device = job->out_device = 0;
  return s;
}

/* Channel k of an (h, w, C) array as an (h, w) array (the array itself
 * when 2-D). */
static accel_array channel_of(const accel_array *a, int64_t k) {
  accel_array v = *a;
  if (a->ndim == 3) {
    v.ndim = 2;
    v.data = (char *)a->data + k * a->strides[2];
  }
  return v;
}

/* The moving rows [*a, *b) that the output rows [r0, r1) can read with
 * cubic interpolation: the linear part's extremes over the band's corners,
 * widened by the largest B-spline parameter in y (the weights are positive
 * and sum to at most 1), the support and the mirror at the edges. */
static void rows_reached(const accel__reg_warp_job *job, int64_t out_w, int64_t r0, int64_t r1, double umax, int64_t h,
                         int64_t *a, int64_t *b) {
  const accel__reg_xform *x = &job->xf;
  double lo = INFINITY, hi = -INFINITY;
  for (int k = 0; k < 4; k++) {
    const double px = (double)(job->x0 + (k & 1 ? out_w - 1 : 0)), py = (double)(job->y0 + (k & 2 ? r1 - 1 : r0));
    const double y = x->m[2] * px + x->m[3] * py + x->b[1];
    lo = y < lo ? y : lo;
    hi = y > hi ? y : hi;
  }
  lo = floor(lo - umax) - 3;
  hi = ceil(hi + umax) + 4;
  *a = lo < 3 ? 0 : (lo > (double)h ? h : (int64_t)lo);
  *b = hi > (double)(h - 3) ? h : (hi < 1 ? 1 : (int64_t)hi);
  if (*b <= *a) *a = *b - 1; /* nothing inside: any row will do */
}

/* Rows beyond those reached whose coefficients a band also computes: the
 * recursions' start error has decayed by |z|^32 < 1e-18 where it matters. */
#define MARGIN 32

/* Output rows per band: the coefficients of half accel__reg_band_bytes,
 * leaving room for the rows a band reaches beyond its own; one band when
 * the whole image's coefficients fit (tests lower it). Every band also
 * computes 2 MARGIN rows and the displacement's reach again: at 256 MiB a
 * 300 MP RGB warp made about 17% more coefficient rows than the image has,
 * at 1 GiB 4% (0.7 s less CPU time, the same output). */
int64_t accel__reg_band_bytes = (int64_t)1 << 30;

/* One band of output rows [r0, r1) of a cubic warp: the coefficients of the
 * moving rows it reaches, all channels together or one at a time. */
static accel_status cubic_band(accel_ctx *ctx, const char *func, accel__reg_warp_job *job, int32_t i,
                               const accel_array *in, const accel_array *out, int64_t r0, int64_t r1, double umax,
                               float *coef, int64_t group, double base, double span) {
  const int64_t h = in->shape[0], w = in->shape[1], nc = in->ndim == 3 ? in->shape[2] : 1, passes = nc / group;
  const int64_t y0 = job->y0;
  int64_t a, b;
  rows_reached(job, out->shape[1], r0, r1, umax, h, &a, &b);
  a = a > MARGIN ? a - MARGIN : 0;
  b = b < h - MARGIN ? b + MARGIN : h;
  accel_array band = *out;
  band.data = (char *)out->data + r0 * out->strides[0];
  band.shape[0] = r1 - r0;
  job->y0 = y0 + r0;
  job->coef = coef;
  job->coef_y0 = a;
  job->coef_rows = b - a;
  accel_status s = ACCEL_OK;
  for (int64_t p = 0; p < passes && !s; p++) {
    const int threads = accel__ctx_threads(ctx);
    int64_t bad;
    const int rc = prefilter_rows(in, a, b - a, p * group, group, coef, threads, &bad);
    if (rc == 2) s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "no memory for the prefilter's lines");
    else if (rc == 1)
      s = accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "in[%d] has a non-finite value in row %lld", (int)i,
                         (long long)bad);
    if (s) break;
    prefilter_columns(coef, b - a, w * group, a == 0, threads);
    const accel_array vi = channel_of(in, p), vo = channel_of(&band, p);
    job->in = group == nc ? in : &vi;
    job->out = group == nc ? &band : &vo;
    job->progress_base = base + span * (double)p / (double)passes;
    job->progress_span = span / (double)passes;
    s = accel__dispatch(ctx, "reg.warp", run_warp, job);
  }
  job->y0 = y0;
  return s;
}

/* Warp one layer: linear at once; cubic band by band (one band when the
 * coefficients of the whole layer are small). */
static accel_status warp_layer(accel_ctx *ctx, const char *func, accel__reg_warp_job *job, int32_t i,
                               const accel_array *in, const accel_array *out, double base, double span,
                               const bool dev[2]) {
  const int64_t h = in->shape[0], w = in->shape[1], nc = in->ndim == 3 ? in->shape[2] : 1, oh = out->shape[0];
  job->coef = NULL;
  job->coef_y0 = 0;
  job->coef_rows = h;
  if (job->interp == ACCEL_REG_INTERP_LINEAR || dev[0] || dev[1]) {
    job->progress_base = base, job->progress_span = span;
    return whole_layer(ctx, job, in, dev[0], out, dev[1]);
  }
  /* bands: whole when the layer's coefficients fit accel__reg_band_bytes */
  const int64_t row_bytes = w * nc * 4;
  int64_t rows = h * row_bytes <= accel__reg_band_bytes ? oh : accel__reg_band_bytes / row_bytes / 2;
  rows = rows < 16 ? 16 : rows;
  double umax = 0;
  const int64_t nodes = job->xf.nx * job->xf.ny;
  for (int64_t k = 0; job->xf.params && k < nodes; k++) umax = fmax(umax, fabs(job->xf.params[nodes + k]));
  /* the buffer for the largest band, all channels or one */
  int64_t most = 0;
  for (int64_t r0 = 0; r0 < oh; r0 += rows) {
    int64_t a, b;
    rows_reached(job, out->shape[1], r0, r0 + rows < oh ? r0 + rows : oh, umax, h, &a, &b);
    a = a > MARGIN ? a - MARGIN : 0;
    b = b < h - MARGIN ? b + MARGIN : h;
    most = b - a > most ? b - a : most;
  }
  const int64_t group = most * row_bytes <= accel__reg_coef_all_bytes ? nc : 1;
  size_t bytes;
  float *coef = NULL;
  if (accel__mul_overflow((size_t)(most * w * group), sizeof(float), &bytes) || !(coef = malloc(bytes)))
    return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY,
                          "no memory for the %lld x %lld x %lld B-spline coefficients", (long long)most, (long long)w,
                          (long long)group);
  accel_status s = ACCEL_OK;
  for (int64_t r0 = 0; r0 < oh && !s; r0 += rows) {
    const int64_t r1 = r0 + rows < oh ? r0 + rows : oh;
    s = cubic_band(ctx, func, job, i, in, out, r0, r1, umax, coef, group, base + span * (double)r0 / (double)oh,
                   span * (double)(r1 - r0) / (double)oh);
  }
  free(coef);
  return s;
}

accel_status accel_reg_warp(accel_ctx *ctx, const accel_reg_transform *t, const accel_array *const *in,
                            const accel_array *const *out, int32_t count, const accel_reg_warp_options *options) {
  REQUIRE(ctx, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  REQUIRE(ctx, in && out, ACCEL_ERR_INVALID_ARG, "%s is NULL", in ? "out" : "in");
  REQUIRE(ctx, count >= 1, ACCEL_ERR_INVALID_ARG, "count %d < 1", (int)count);
  accel_reg_warp_options o;
  accel_status s = check_options(ctx, __func__, options, &o);
  if (s) return s;
  layers L = {malloc(sizeof(accel_array *) * (size_t)count), malloc(sizeof(accel_array *) * (size_t)count),
              malloc(sizeof(accel_array) * 2 * (size_t)count), calloc(2 * (size_t)count, sizeof(bool))};
  if (!L.in || !L.out || !L.plain || !L.device)
    s = FAIL(ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for %d layers", (int)count);
  if (!s) s = check_call(ctx, __func__, in, out, count, &L);
  for (int32_t i = 0; i < count && !s; i++) {
    int64_t bad;
    s = nonfinite_row(ctx, L.in[i], L.device[i], &bad);
    if (!s && bad >= 0)
      s = FAIL(ctx, ACCEL_ERR_INVALID_ARG, "in[%d] has a non-finite value in row %lld", (int)i, (long long)bad);
  }
  accel__reg_warp_job job;
  memset(&job, 0, sizeof job);
  accel__reg_xform_of(t, &job.xf);
  job.interp = o.interp;
  job.fill = o.fill;
  job.x0 = o.x0;
  job.y0 = o.y0;
  job.tile = o.tile > 0 ? o.tile : 128;
  job.progress = o.progress;
  job.progress_user = o.progress_user;
  for (int32_t i = 0; i < count && !s; i++) {
    if (L.out[i]->shape[0] == 0 || L.out[i]->shape[1] == 0) continue; /* nothing to write */
    const bool dev[2] = {L.device[i], L.device[count + i]};
    s = warp_layer(ctx, __func__, &job, i, L.in[i], L.out[i], (double)i / count, 1.0 / count, dev);
  }
  free(L.in), free(L.out), free(L.plain), free(L.device);
  return s;
}
