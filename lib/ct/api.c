/* CT stages and the pipeline: argument checks, contiguous views, dispatch. */
#include "ct/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ arrays */

/* An output that is also read (watershed's markers, fill in place): packed. */
static accel_status view_inout(accel_ctx *ctx, const char *F, const char *what, const accel_array *a, accel__view *v) {
  return accel__view_in(ctx, F, what, a, v);
}

static const char *dtype_list(const accel_dtype *ok, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? (i + 1 == n ? " or " : ", ") : "", accel__dtype_name(ok[i]));
  return buf;
}

/* A 3-D volume of one of the given dtypes, of `shape` if given (else it sets it). */
static accel_status check_volume(accel_ctx *ctx, const char *F, const char *what, const accel_array *a,
                                 const accel_dtype *ok, int nok, accel__dims *shape, bool set_shape) {
  accel_status s = accel__array_check(ctx, F, what, a);
  if (s) return s;
  if (a->ndim != 3)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: %s must be a 3-D volume (z, y, x), not %d-D", F, what,
                       (int)a->ndim);
  bool dtype_ok = false;
  for (int i = 0; i < nok; i++) dtype_ok = dtype_ok || a->dtype == ok[i];
  if (!dtype_ok) {
    char list[128];
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: %s must be %s, not %s", F, what,
                       dtype_list(ok, nok, list, sizeof list), accel__dtype_name(a->dtype));
  }
  const accel__dims d = {a->shape[0], a->shape[1], a->shape[2]};
  if (set_shape) {
    if (accel__dims_count(d) >= ACCEL__CT_NONE)
      return accel__fail(ctx, ACCEL_ERR_LIMIT, "%s: %s has %llu voxels; at most %u", F, what,
                         (unsigned long long)accel__dims_count(d), ACCEL__CT_NONE - 1);
    *shape = d;
  } else if (d.nz != shape->nz || d.ny != shape->ny || d.nx != shape->nx) {
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: %s has shape (%lld, %lld, %lld), expected (%lld, %lld, %lld)",
                       F, what, (long long)d.nz, (long long)d.ny, (long long)d.nx, (long long)shape->nz,
                       (long long)shape->ny, (long long)shape->nx);
  }
  return ACCEL_OK;
}

static const accel_dtype U8[] = {ACCEL_DTYPE_U8}, F32[] = {ACCEL_DTYPE_F32}, I32[] = {ACCEL_DTYPE_I32};

/* Outputs must not overlap inputs, except when they are the same view. */
static accel_status check_overlap(accel_ctx *ctx, const char *F, const accel_array *out, const accel_array *in,
                                  const char *what, bool same_allowed) {
  if (!in || !accel__arrays_overlap(out, in)) return ACCEL_OK;
  const bool same = out->data == in->data && out->dtype == in->dtype &&
                    memcmp(out->strides, in->strides, 3 * sizeof(int64_t)) == 0;
  if (same && same_allowed) return ACCEL_OK;
  return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: the output overlaps %s%s", F, what,
                     same_allowed ? " (only the very same array is allowed)" : "");
}

static accel_status check_spacing(accel_ctx *ctx, const char *F, const double *in, double out[3]) {
  for (int a = 0; a < 3; a++) {
    out[a] = in ? in[a] : 1.0;
    if (!(out[a] > 0) || !isfinite(out[a]))
      return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: spacing[%d] = %g must be positive and finite", F, a, out[a]);
  }
  return ACCEL_OK;
}

/* ------------------------------------------------------------ dispatch */

#define RUN_OP(NAME)                                                                                                   \
  static int run_##NAME(const accel__backend *b, accel__call *call, void *job) {                                     \
    if (!b->ct || !b->ct->NAME) return ACCEL__NOT_IMPLEMENTED;                                                         \
    return b->ct->NAME(call, job);                                                                                     \
  }
RUN_OP(rescale)
RUN_OP(threshold)
RUN_OP(fill_holes)
RUN_OP(edt)
RUN_OP(markers)

static int run_watershed(const accel__backend *b, accel__call *call, void *job) {
  /* scikit-image's tie order is a sequential binary heap's: the CPU's */
  if (!b->ct || !b->ct->watershed || (b->kind != ACCEL_BACKEND_CPU && ((accel__ct_job *)job)->ties != ACCEL_CT_TIES_STABLE))
    return ACCEL__NOT_IMPLEMENTED;
  return b->ct->watershed(call, job);
}

static int run_pipeline(const accel__backend *b, accel__call *call, void *job) {
  if (!b->ct || !b->ct->pipeline) return ACCEL__NOT_IMPLEMENTED;
  return b->ct->pipeline(call, job);
}

/* ------------------------------------------------------------ stages */

/* Every slice's slope and intercept must be finite (NaN would make every
 * voxel fail every threshold: a silently empty segmentation). */
static accel_status check_rescale(accel_ctx *ctx, const char *F, const double *slope, const double *intercept,
                                  int64_t nz) {
  for (int64_t z = 0; z < nz; z++)
    if ((slope && !isfinite(slope[z])) || (intercept && !isfinite(intercept[z])))
      return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: slope or intercept of slice %lld is not finite", F,
                         (long long)z);
  return ACCEL_OK;
}

accel_status accel_ct_rescale(accel_ctx *ctx, const accel_array *in, const double *slope, const double *intercept,
                              const accel_array *out) {
  static const char F[] = "accel_ct_rescale";
  static const accel_dtype ok[] = {ACCEL_DTYPE_I16, ACCEL_DTYPE_U16};
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel__dims d;
  accel_status s = check_volume(ctx, F, "in", in, ok, 2, &d, true);
  if (!s) s = check_volume(ctx, F, "out", out, F32, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, in, "in", false);
  if (s) return s;
  if ((s = check_rescale(ctx, F, slope, intercept, d.nz))) return s;
  accel__view vi, vo;
  if ((s = accel__view_in(ctx, F, "in", in, &vi))) return s;
  if ((s = accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&vi);
    return s;
  }
  accel__ct_job job = {.stage = "ct.rescale", .d = d, .in = vi.data, .in_dtype = in->dtype, .slope = slope,
                       .intercept = intercept, .out = vo.data};
  s = accel__dispatch(ctx, "ct.rescale", run_rescale, &job);
  if (!s) accel__view_commit(&vo);
  accel__view_free(&vi);
  accel__view_free(&vo);
  return s;
}

accel_status accel_ct_threshold(accel_ctx *ctx, const accel_array *in, double threshold, accel_ct_compare compare,
                                const accel_array *out) {
  static const char F[] = "accel_ct_threshold";
  static const accel_dtype ok[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_I16, ACCEL_DTYPE_U16, ACCEL_DTYPE_I32, ACCEL_DTYPE_F32};
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  if ((unsigned)compare > ACCEL_CT_LESS_EQUAL)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown comparison %d", F, (int)compare);
  if (isnan(threshold)) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: threshold is NaN", F);
  accel__dims d;
  accel_status s = check_volume(ctx, F, "in", in, ok, 5, &d, true);
  if (!s) s = check_volume(ctx, F, "out", out, U8, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, in, "in", in->dtype == ACCEL_DTYPE_U8);
  if (s) return s;
  accel__view vi, vo;
  if ((s = accel__view_in(ctx, F, "in", in, &vi))) return s;
  if ((s = accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&vi);
    return s;
  }
  accel__ct_job job = {.stage = "ct.threshold", .d = d, .in = vi.data, .in_dtype = in->dtype, .threshold = threshold,
                       .compare = compare, .out = vo.data};
  s = accel__dispatch(ctx, "ct.threshold", run_threshold, &job);
  if (!s) accel__view_commit(&vo);
  accel__view_free(&vi);
  accel__view_free(&vo);
  return s;
}

accel_status accel_ct_fill_holes(accel_ctx *ctx, const accel_array *mask, accel_ct_connectivity connectivity,
                                 const accel_array *out) {
  static const char F[] = "accel_ct_fill_holes";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  if (connectivity != ACCEL_CT_FACES && connectivity != ACCEL_CT_CORNERS)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: connectivity must be 6 or 26, not %d", F, (int)connectivity);
  accel__dims d;
  accel_status s = check_volume(ctx, F, "mask", mask, U8, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "out", out, U8, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, mask, "mask", true);
  if (s) return s;
  accel__view vi, vo;
  if ((s = accel__view_in(ctx, F, "mask", mask, &vi))) return s;
  if ((s = accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&vi);
    return s;
  }
  accel__ct_job job = {.stage = "ct.fill_holes", .d = d, .mask = vi.data, .connectivity = (int)connectivity,
                       .out = vo.data};
  s = accel__dispatch(ctx, "ct.fill_holes", run_fill_holes, &job);
  if (!s) accel__view_commit(&vo);
  accel__view_free(&vi);
  accel__view_free(&vo);
  return s;
}

accel_status accel_ct_edt(accel_ctx *ctx, const accel_array *mask, const double *spacing, const accel_array *out) {
  static const char F[] = "accel_ct_edt";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel__dims d;
  double sp[3];
  accel_status s = check_volume(ctx, F, "mask", mask, U8, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "out", out, F32, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, mask, "mask", false);
  if (!s) s = check_spacing(ctx, F, spacing, sp);
  if (s) return s;
  accel__view vi, vo;
  if ((s = accel__view_in(ctx, F, "mask", mask, &vi))) return s;
  if ((s = accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&vi);
    return s;
  }
  accel__ct_job job = {.stage = "ct.edt", .d = d, .mask = vi.data, .out = vo.data};
  memcpy(job.spacing, sp, sizeof sp);
  s = accel__dispatch(ctx, "ct.edt", run_edt, &job);
  if (!s) accel__view_commit(&vo);
  accel__view_free(&vi);
  accel__view_free(&vo);
  return s;
}

enum { MARKER_OPTIONS_V1 = sizeof(accel_ct_marker_options), WATERSHED_OPTIONS_V1 = sizeof(accel_ct_watershed_options),
       PIPELINE_OPTIONS_V1 = sizeof(accel_ct_pipeline_options), OUTPUTS_V1 = sizeof(accel_ct_outputs) };

accel_status accel_ct_marker_options_init(accel_ct_marker_options *o, size_t struct_size) {
  accel_ct_marker_options d;
  memset(&d, 0, sizeof d);
  d.min_distance = 3;
  d.saddle_iterations = 20;
  d.nearby_factor = 1.0;
  d.spacing[0] = d.spacing[1] = d.spacing[2] = 1.0;
  return accel__versioned_init("accel_ct_marker_options_init", o, struct_size, &d, sizeof d, MARKER_OPTIONS_V1);
}

static accel_status check_trim(accel_ctx *ctx, const char *F, uint32_t trim, int32_t iterations, double factor) {
  if (trim & ~(uint32_t)(ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown trim flags 0x%x", F, (unsigned)trim);
  if (iterations < 1)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: saddle_iterations %d must be >= 1", F, (int)iterations);
  if (!(factor >= 0) || isinf(factor))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: nearby_factor %g must be finite and >= 0", F, factor);
  return ACCEL_OK;
}

/* The trims after a peak search or on given peaks (host code on every
 * backend), counted as the stage "ct.trim". */
static accel_status run_trim(accel_ctx *ctx, const char *F, const float *map, accel__dims d,
                             const accel_ct_marker_options *o, const double sp[3], int32_t *markers,
                             uint32_t *count) {
  const double t0 = accel__now();
  accel_status s = accel__ct_trim_markers_cpu(map, d, o->trim, o->saddle_iterations, o->nearby_factor, sp,
                                              accel__ctx_threads(ctx), markers, count);
  accel__stats_delta delta = {.runs = 1, .cpu_runs = s ? 0 : 1, .failures = s ? 1 : 0, .seconds = accel__now() - t0};
  accel__stats_add(ctx, "ct.trim", &delta);
  if (s) return accel__fail(ctx, s, "%s: out of memory for the peak trims", F);
  return ACCEL_OK;
}

static accel_status finite_nonnegative(accel_ctx *ctx, const char *F, const float *v, uint64_t n, const char *what) {
  for (uint64_t i = 0; i < n; i++)
    if (!(v[i] >= 0) || isinf(v[i]))
      return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: %s[%llu] = %g: a distance map is finite and not negative",
                         F, what, (unsigned long long)i, (double)v[i]);
  return ACCEL_OK;
}

accel_status accel_ct_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *mask,
                              const accel_ct_marker_options *options, const accel_array *out, uint32_t *count) {
  static const char F[] = "accel_ct_markers";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel_ct_marker_options o;
  accel_ct_marker_options_init(&o, sizeof o);
  accel_status s = ACCEL_OK;
  if (options && (s = accel__versioned_in(ctx, F, "options", options, &o, sizeof o, MARKER_OPTIONS_V1))) return s;
  if (o.min_distance < 0) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: min_distance %d < 0", F, o.min_distance);
  if (!(o.smooth_sigma >= 0) || isinf(o.smooth_sigma))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: smooth_sigma %g must be >= 0", F, o.smooth_sigma);
  if ((s = check_trim(ctx, F, o.trim, o.saddle_iterations, o.nearby_factor))) return s;
  double sp[3];
  if ((s = check_spacing(ctx, F, o.spacing, sp))) return s;
  accel__dims d;
  s = check_volume(ctx, F, "edt", edt, F32, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "mask", mask, U8, 1, &d, false);
  if (!s) s = check_volume(ctx, F, "out", out, I32, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, edt, "edt", false);
  if (!s) s = check_overlap(ctx, F, out, mask, "mask", false);
  if (s) return s;
  accel__view ve, vm, vo;
  if ((s = accel__view_in(ctx, F, "edt", edt, &ve))) return s;
  if ((s = finite_nonnegative(ctx, F, ve.data, accel__dims_count(d), "edt")) ||
      (s = accel__view_in(ctx, F, "mask", mask, &vm))) {
    accel__view_free(&ve);
    return s;
  }
  if ((s = accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&ve);
    accel__view_free(&vm);
    return s;
  }
  accel__ct_job job = {.stage = "ct.markers", .d = d, .image = ve.data, .mask = vm.data, .min_distance = o.min_distance,
                       .sigma = o.smooth_sigma, .out = vo.data, .progress = o.progress,
                       .progress_user = o.progress_user};
  s = accel__dispatch(ctx, "ct.markers", run_markers, &job);
  if (!s && o.trim) s = run_trim(ctx, F, ve.data, d, &o, sp, vo.data, &job.count);
  if (!s) {
    accel__view_commit(&vo);
    if (count) *count = job.count;
  }
  accel__view_free(&ve);
  accel__view_free(&vm);
  accel__view_free(&vo);
  return s;
}

accel_status accel_ct_trim_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *markers,
                                   const accel_ct_marker_options *options, const accel_array *out, uint32_t *count) {
  static const char F[] = "accel_ct_trim_markers";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel_ct_marker_options o;
  accel_ct_marker_options_init(&o, sizeof o);
  o.trim = ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY;
  accel_status s = ACCEL_OK;
  if (options && (s = accel__versioned_in(ctx, F, "options", options, &o, sizeof o, MARKER_OPTIONS_V1))) return s;
  if ((s = check_trim(ctx, F, o.trim, o.saddle_iterations, o.nearby_factor))) return s;
  double sp[3];
  if ((s = check_spacing(ctx, F, o.spacing, sp))) return s;
  accel__dims d;
  s = check_volume(ctx, F, "edt", edt, F32, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "markers", markers, I32, 1, &d, false);
  if (!s) s = check_volume(ctx, F, "out", out, I32, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, edt, "edt", false);
  if (!s) s = check_overlap(ctx, F, out, markers, "markers", true);
  if (s) return s;
  const bool alias = out->data == markers->data;
  accel__view ve, vo;
  if ((s = accel__view_in(ctx, F, "edt", edt, &ve))) return s;
  if ((s = finite_nonnegative(ctx, F, ve.data, accel__dims_count(d), "edt")) ||
      (s = alias ? view_inout(ctx, F, "out", out, &vo) : accel__view_out(ctx, F, "out", out, &vo))) {
    accel__view_free(&ve);
    return s;
  }
  if (!alias) accel__array_pack(markers, vo.data); /* the output starts as the markers */
  uint32_t n = 0;
  s = run_trim(ctx, F, ve.data, d, &o, sp, vo.data, &n);
  if (!s) {
    accel__view_commit(&vo);
    if (count) *count = n;
  }
  accel__view_free(&ve);
  accel__view_free(&vo);
  return s;
}

accel_status accel_ct_watershed_options_init(accel_ct_watershed_options *o, size_t struct_size) {
  accel_ct_watershed_options d;
  memset(&d, 0, sizeof d);
  d.ties = ACCEL_CT_TIES_SKIMAGE;
  return accel__versioned_init("accel_ct_watershed_options_init", o, struct_size, &d, sizeof d, WATERSHED_OPTIONS_V1);
}

accel_status accel_ct_watershed(accel_ctx *ctx, const accel_array *image, const accel_array *markers,
                                const accel_array *mask, const accel_ct_watershed_options *options,
                                const accel_array *out) {
  static const char F[] = "accel_ct_watershed";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel_ct_watershed_options o;
  accel_ct_watershed_options_init(&o, sizeof o);
  accel_status s = ACCEL_OK;
  if (options && (s = accel__versioned_in(ctx, F, "options", options, &o, sizeof o, WATERSHED_OPTIONS_V1))) return s;
  if (o.ties != ACCEL_CT_TIES_SKIMAGE && o.ties != ACCEL_CT_TIES_STABLE)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown ties rule %d", F, (int)o.ties);
  accel__dims d;
  s = check_volume(ctx, F, "image", image, F32, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "markers", markers, I32, 1, &d, false);
  if (!s && mask) s = check_volume(ctx, F, "mask", mask, U8, 1, &d, false);
  if (!s) s = check_volume(ctx, F, "out", out, I32, 1, &d, false);
  if (!s) s = check_overlap(ctx, F, out, image, "image", false);
  if (!s) s = check_overlap(ctx, F, out, mask, "mask", false);
  if (!s) s = check_overlap(ctx, F, out, markers, "markers", true);
  if (s) return s;
  const uint64_t n = accel__dims_count(d);
  accel__view vi, vm = {NULL, NULL, false}, vk = {NULL, NULL, false}, vo;
  if ((s = accel__view_in(ctx, F, "image", image, &vi))) return s;
  if (mask && (s = accel__view_in(ctx, F, "mask", mask, &vm))) goto fail;
  const bool alias = out->data == markers->data;
  if ((s = alias ? view_inout(ctx, F, "out", out, &vo) : accel__view_out(ctx, F, "out", out, &vo))) goto fail;
  if (!alias && (s = accel__view_in(ctx, F, "markers", markers, &vk))) {
    accel__view_free(&vo);
    goto fail;
  }
  /* one pass: the output starts as markers * mask; NaN values in the mask and
   * the reserved marker value are refused */
  {
    const float *im = vi.data;
    const uint8_t *mk = vm.data;
    const int32_t *src = alias ? vo.data : vk.data;
    int32_t *dst = vo.data;
    uint64_t bad_nan = UINT64_MAX, bad_marker = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
      const bool in = !mk || mk[i];
      const int32_t m = in ? src[i] : 0;
      dst[i] = m;
      if (in && isnan(im[i]) && bad_nan == UINT64_MAX) bad_nan = i;
      if (m == INT32_MIN && bad_marker == UINT64_MAX) bad_marker = i;
    }
    accel__view_free(&vk);
    if (bad_nan != UINT64_MAX)
      s = accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: image[%llu] is NaN", F, (unsigned long long)bad_nan);
    else if (bad_marker != UINT64_MAX)
      s = accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: marker value %d (at %llu) is reserved", F, INT32_MIN,
                      (unsigned long long)bad_marker);
  }
  accel__ct_job job = {.stage = "ct.watershed", .d = d, .image = vi.data, .mask = vm.data, .ties = o.ties,
                       .out = vo.data, .progress = o.progress, .progress_user = o.progress_user};
  if (!s) s = accel__dispatch(ctx, "ct.watershed", run_watershed, &job);
  if (!s) accel__view_commit(&vo);
  accel__view_free(&vo);
fail:
  accel__view_free(&vi);
  accel__view_free(&vm);
  return s;
}

accel_status accel_ct_network_build(accel_ctx *ctx, const accel_array *labels, const accel_array *edt,
                                    const double *spacing, accel_ct_network **out) {
  static const char F[] = "accel_ct_network_build";
  if (!ctx || !out) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: NULL argument", F);
  *out = NULL;
  accel__dims d;
  double sp[3];
  accel_status s = check_volume(ctx, F, "labels", labels, I32, 1, &d, true);
  if (!s) s = check_volume(ctx, F, "edt", edt, F32, 1, &d, false);
  if (!s) s = check_spacing(ctx, F, spacing, sp);
  if (s) return s;
  accel__view vl, ve;
  if ((s = accel__view_in(ctx, F, "labels", labels, &vl))) return s;
  if ((s = accel__view_in(ctx, F, "edt", edt, &ve))) {
    accel__view_free(&vl);
    return s;
  }
  const double t0 = accel__now();
  s = accel__ct_network_cpu(vl.data, ve.data, d, sp, accel__ctx_threads(ctx), out);
  accel__stats_delta delta = {.runs = 1, .cpu_runs = s ? 0 : 1, .failures = s ? 1 : 0, .seconds = accel__now() - t0};
  accel__stats_add(ctx, "ct.network", &delta);
  accel__view_free(&vl);
  accel__view_free(&ve);
  if (s) return accel__fail(ctx, s, "%s: out of memory", F);
  return ACCEL_OK;
}

/* ------------------------------------------------------------ the pipeline */

struct accel_ct_pipeline {
  accel_ctx *ctx;
  accel_ct_pipeline_options o;
  double *slope, *intercept; /* our copies */
  int64_t nslopes;
};

accel_status accel_ct_pipeline_options_init(accel_ct_pipeline_options *o, size_t struct_size) {
  accel_ct_pipeline_options d;
  memset(&d, 0, sizeof d);
  d.compare = ACCEL_CT_GREATER;
  d.fill_connectivity = ACCEL_CT_FACES;
  d.pores = ACCEL_CT_PORES_CLOSED;
  d.spacing[0] = d.spacing[1] = d.spacing[2] = 1.0;
  d.min_distance = 3;
  d.ties = ACCEL_CT_TIES_SKIMAGE;
  d.saddle_iterations = 20;
  d.nearby_factor = 1.0;
  return accel__versioned_init("accel_ct_pipeline_options_init", o, struct_size, &d, sizeof d, PIPELINE_OPTIONS_V1);
}

accel_status accel_ct_outputs_init(accel_ct_outputs *o, size_t struct_size) {
  accel_ct_outputs d;
  memset(&d, 0, sizeof d);
  return accel__versioned_init("accel_ct_outputs_init", o, struct_size, &d, sizeof d, OUTPUTS_V1);
}

accel_status accel_ct_pipeline_create(accel_ctx *ctx, const accel_ct_pipeline_options *options,
                                      accel_ct_pipeline **out) {
  static const char F[] = "accel_ct_pipeline_create";
  if (!ctx || !out) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: NULL argument", F);
  *out = NULL;
  accel_ct_pipeline_options o;
  accel_ct_pipeline_options_init(&o, sizeof o);
  accel_status s;
  if (options && (s = accel__versioned_in(ctx, F, "options", options, &o, sizeof o, PIPELINE_OPTIONS_V1))) return s;
  if (!o.slope != !o.intercept)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: give slope and intercept together, or neither", F);
  if ((unsigned)o.compare > ACCEL_CT_LESS_EQUAL)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown comparison %d", F, (int)o.compare);
  if (isnan(o.threshold)) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: threshold is NaN", F);
  if (o.fill_connectivity != ACCEL_CT_FACES && o.fill_connectivity != ACCEL_CT_CORNERS)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: fill_connectivity must be 6 or 26", F);
  if (o.pores != ACCEL_CT_PORES_CLOSED && o.pores != ACCEL_CT_PORES_ALL)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown pores mode %d", F, (int)o.pores);
  if (o.min_distance < 0) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: min_distance < 0", F);
  if (!(o.smooth_sigma >= 0) || isinf(o.smooth_sigma))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: smooth_sigma must be >= 0", F);
  if (o.ties != ACCEL_CT_TIES_SKIMAGE && o.ties != ACCEL_CT_TIES_STABLE)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: unknown ties rule %d", F, (int)o.ties);
  if ((s = check_trim(ctx, F, o.trim, o.saddle_iterations, o.nearby_factor))) return s;
  double sp[3];
  if ((s = check_spacing(ctx, F, o.spacing, sp))) return s;
  accel_ct_pipeline *p = calloc(1, sizeof *p);
  if (!p) return accel__fail(ctx, ACCEL_ERR_OUT_OF_MEMORY, "%s: out of memory", F);
  p->ctx = ctx;
  p->o = o;
  p->o.slope = p->o.intercept = NULL; /* copied at run time, when Z is known */
  p->slope = (double *)o.slope;       /* the caller's, read at each run */
  p->intercept = (double *)o.intercept;
  *out = p;
  return ACCEL_OK;
}

void accel_ct_pipeline_destroy(accel_ct_pipeline *p) { free(p); }

accel_status accel_ct_pipeline_run(accel_ct_pipeline *p, const accel_array *input, const accel_array *markers,
                                   accel_ct_outputs *outputs) {
  static const char F[] = "accel_ct_pipeline_run";
  if (!p || !outputs) return accel__fail(p ? p->ctx : NULL, ACCEL_ERR_INVALID_ARG, "%s: NULL argument", F);
  accel_ctx *ctx = p->ctx;
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  accel_status s = accel__versioned_in(ctx, F, "outputs", outputs, &o, sizeof o, OUTPUTS_V1);
  if (s) return s;
  static const accel_dtype in_ok[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_I16, ACCEL_DTYPE_U16, ACCEL_DTYPE_I32,
                                      ACCEL_DTYPE_F32};
  accel__dims d;
  if ((s = check_volume(ctx, F, "input", input, in_ok, 5, &d, true))) return s;
  if (p->slope && input->dtype != ACCEL_DTYPE_I16 && input->dtype != ACCEL_DTYPE_U16)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: rescaling needs an I16 or U16 input, not %s", F,
                       accel__dtype_name(input->dtype));
  if (p->slope && (s = check_rescale(ctx, F, p->slope, p->intercept, d.nz))) return s;
  if (markers && (s = check_volume(ctx, F, "markers", markers, I32, 1, &d, false))) return s;
  const struct {
    const accel_array *a;
    const accel_dtype *dt;
    const char *what;
  } outs[] = {{o.solid, U8, "outputs.solid"},   {o.filled, U8, "outputs.filled"},    {o.pores, U8, "outputs.pores"},
              {o.edt, F32, "outputs.edt"},      {o.markers, I32, "outputs.markers"}, {o.labels, I32, "outputs.labels"}};
  enum { NOUT = sizeof outs / sizeof outs[0] };
  for (int k = 0; k < NOUT; k++) {
    if (!outs[k].a) continue;
    if ((s = check_volume(ctx, F, outs[k].what, outs[k].a, outs[k].dt, 1, &d, false)) ||
        (s = check_overlap(ctx, F, outs[k].a, input, "the input", false)) ||
        (s = check_overlap(ctx, F, outs[k].a, markers, "the markers", false)))
      return s;
    for (int j = 0; j < k; j++)
      if (outs[j].a && (s = check_overlap(ctx, F, outs[k].a, outs[j].a, outs[j].what, false))) return s;
  }
  if (o.network) *o.network = NULL;
  accel__view vin, vmk = {NULL, NULL, false}, vo[NOUT];
  memset(vo, 0, sizeof vo);
  if ((s = accel__view_in(ctx, F, "input", input, &vin))) return s;
  if (markers && (s = accel__view_in(ctx, F, "markers", markers, &vmk))) goto done;
  for (int k = 0; k < NOUT; k++)
    if (outs[k].a && (s = accel__view_out(ctx, F, outs[k].what, outs[k].a, &vo[k]))) goto done;
  accel__ct_pipeline_job job;
  memset(&job, 0, sizeof job);
  job.d = d;
  job.in = vin.data;
  job.in_dtype = input->dtype;
  job.o = p->o;
  job.o.slope = p->slope;
  job.o.intercept = p->intercept;
  job.given_markers = vmk.data;
  job.solid = vo[0].data;
  job.filled = vo[1].data;
  job.pores = vo[2].data;
  job.edt = vo[3].data;
  job.markers = vo[4].data;
  job.labels = vo[5].data;
  job.want_network = o.network != NULL;
  s = accel__dispatch(ctx, "ct.pipeline", run_pipeline, &job);
  if (!s) {
    for (int k = 0; k < NOUT; k++)
      if (outs[k].a) accel__view_commit(&vo[k]);
    if (o.network) *o.network = job.network;
    o.marker_count = job.marker_count;
    s = accel__versioned_out(ctx, F, "outputs", outputs, &o, sizeof o, OUTPUTS_V1);
  } else {
    accel_ct_network_destroy(job.network);
  }
done:
  accel__view_free(&vin);
  accel__view_free(&vmk);
  for (int k = 0; k < NOUT; k++) accel__view_free(&vo[k]);
  return s;
}
