/* CT stages and the pipeline: argument checks, contiguous views, dispatch. */
#include "ct/ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ arrays */

static const char *dtype_list(const accel_dtype *ok, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? (i + 1 == n ? " or " : ", ") : "", accel__dtype_name(ok[i]));
  return buf;
}

/* A 3-D volume of one of the given dtypes, of `shape` if given (else it sets it). */
static accel_status check_volume(accel_ctx *ctx, const char *func, const char *what, const accel_array *a,
                                 const accel_dtype *ok, int nok, accel__dims *shape, bool set_shape) {
  accel_status s = accel__array_check(ctx, func, what, a);
  if (s) return s;
  if (a->ndim != 3)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be a 3-D volume (z, y, x), not %d-D", what,
                          (int)a->ndim);
  bool dtype_ok = false;
  for (int i = 0; i < nok; i++) dtype_ok = dtype_ok || a->dtype == ok[i];
  if (!dtype_ok) {
    char list[128];
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be %s, not %s", what,
                          dtype_list(ok, nok, list, sizeof list), accel__dtype_name(a->dtype));
  }
  const accel__dims d = {a->shape[0], a->shape[1], a->shape[2]};
  if (set_shape) {
    if (accel__dims_count(d) > ACCEL__CT_MAX_VOXELS)
      return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT,
                            "%s has %llu voxels; at most 2^44 (no memory holds the intermediates of more)", what,
                            (unsigned long long)accel__dims_count(d));
    *shape = d;
  } else if (d.nz != shape->nz || d.ny != shape->ny || d.nx != shape->nx) {
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "%s has shape (%lld, %lld, %lld), expected (%lld, %lld, %lld)", what, (long long)d.nz,
                          (long long)d.ny, (long long)d.nx, (long long)shape->nz, (long long)shape->ny,
                          (long long)shape->nx);
  }
  return ACCEL_OK;
}

static const accel_dtype U8[] = {ACCEL_DTYPE_U8}, F32[] = {ACCEL_DTYPE_F32}, I32[] = {ACCEL_DTYPE_I32};

/* Outputs must not overlap inputs, except when they are the same view. */
static accel_status check_overlap(accel_ctx *ctx, const char *func, const accel_array *out, const accel_array *in,
                                  const char *what, bool same_allowed) {
  if (!in || !accel__arrays_overlap(out, in)) return ACCEL_OK;
  const bool same =
      out->data == in->data && out->dtype == in->dtype && memcmp(out->strides, in->strides, 3 * sizeof(int64_t)) == 0;
  if (same && same_allowed) return ACCEL_OK;
  return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "the output overlaps %s%s", what,
                        same_allowed ? " (only the very same array is allowed)" : "");
}

/* A one-input stage's arrays: `in` (named `what`) sets the shape, `out` has
 * it too and overlaps `in` only by being the very same array, which a stage
 * whose output has the input's dtype (fill, threshold of U8) runs in place. */
static accel_status check_in_out(accel_ctx *ctx, const char *func, const char *what, const accel_array *in,
                                 const accel_dtype *ok, int nok, const accel_array *out, const accel_dtype *out_dtype,
                                 accel__dims *d) {
  accel_status s = check_volume(ctx, func, what, in, ok, nok, d, true);
  if (!s) s = check_volume(ctx, func, "out", out, out_dtype, 1, d, false);
  if (!s) s = check_overlap(ctx, func, out, in, what, in->dtype == *out_dtype);
  return s;
}

static accel_status check_spacing(accel_ctx *ctx, const char *func, const double *in, double out[3]) {
  for (int a = 0; a < 3; a++) {
    out[a] = in ? in[a] : 1.0;
    if (!(out[a] > 0) || !isfinite(out[a]))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "spacing[%d] = %g must be positive and finite", a,
                            out[a]);
  }
  return ACCEL_OK;
}

static accel_status check_compare(accel_ctx *ctx, const char *func, accel_ct_compare compare, double threshold) {
  if ((unsigned)compare > ACCEL_CT_LESS_EQUAL)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown comparison %d", (int)compare);
  if (isnan(threshold)) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "threshold is NaN");
  return ACCEL_OK;
}

static accel_status check_ties(accel_ctx *ctx, const char *func, accel_ct_ties ties) {
  if (ties != ACCEL_CT_TIES_SKIMAGE && ties != ACCEL_CT_TIES_STABLE)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown ties rule %d", (int)ties);
  return ACCEL_OK;
}

/* A 1-D or 2-D array as a (1, 1, n) or (1, ny, nx) volume (the strides of
 * the added axes do not matter: their extent is 1); 3-D and others as they
 * are (check_volume judges them). */
static accel_array as_volume(const accel_array *a) {
  accel_array v = *a;
  if (a->ndim >= 1 && a->ndim < 3) {
    const int add = 3 - a->ndim;
    for (int i = 2; i >= add; i--) {
      v.shape[i] = a->shape[i - add];
      v.strides[i] = a->strides[i - add];
    }
    for (int i = 0; i < add; i++) {
      v.shape[i] = 1;
      v.strides[i] = 0;
    }
    v.ndim = 3;
  }
  return v;
}

/* ------------------------------------------------------------ device arrays */

/* A stage's arrays that may be device memory: the caller's (arg) as the
 * checks and the job see them (a), their host copies' slots for a CPU run. */
typedef struct dev_args {
  accel_array plain[2 + 6];
  accel__device_slot slots[2 + 6];
  int nslots;
  unsigned device; /* the job's bits */
} dev_args;

/* Accept `arg` (host or device memory) as *a; a device array sets `bit`. */
static accel_status accept_arg(accel_ctx *ctx, const char *func, const char *what, const accel_array *arg, dev_args *dv,
                               int k, unsigned bit, const accel_array **a) {
  bool dev = false;
  accel_status s = accel__array_accept(ctx, func, what, arg, &dv->plain[k], a, &dev);
  if (!s && dev) dv->device |= bit;
  return s;
}

/* The slot of a device array whose data the job reaches through *ptr. */
static void add_slot(dev_args *dv, unsigned bit, void *ptr, const accel_array *a, bool in) {
  if (!(dv->device & bit) || !a) return;
  const size_t bytes = (size_t)accel__array_count(a) * accel_dtype_size(a->dtype);
  dv->slots[dv->nslots++] = (accel__device_slot){(void **)ptr, bytes, in, !in};
}

/* ------------------------------------------------------------ dispatch */

ACCEL__STAGE_FN(run_rescale, ct, rescale, job)
ACCEL__STAGE_FN(run_threshold, ct, threshold, job)
ACCEL__STAGE_FN(run_fill_holes, ct, fill_holes, job)
ACCEL__STAGE_FN(run_edt, ct, edt, job)
ACCEL__STAGE_FN(run_markers, ct, markers, job)
ACCEL__STAGE_FN(run_watershed, ct, watershed, job)
ACCEL__STAGE_FN(run_pipeline, ct, pipeline, job)
ACCEL__STAGE_FN(run_feature_transform, ct, feature_transform, job)

/* ------------------------------------------------------------ stages */

/* Every slice's slope and intercept must be finite (NaN would make every
 * voxel fail every threshold: a silently empty segmentation). */
static accel_status check_rescale(accel_ctx *ctx, const char *func, const double *slope, const double *intercept,
                                  int64_t nz) {
  for (int64_t z = 0; z < nz; z++)
    if ((slope && !isfinite(slope[z])) || (intercept && !isfinite(intercept[z])))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "slope or intercept of slice %lld is not finite",
                            (long long)z);
  return ACCEL_OK;
}

accel_status accel_ct_rescale(accel_ctx *ctx, const accel_array *in, const double *slope, const double *intercept,
                              const accel_array *out) {
  static const accel_dtype ok[] = {ACCEL_DTYPE_I16, ACCEL_DTYPE_U16};
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel__dims d;
  accel_status s = check_in_out(ctx, __func__, "in", in, ok, 2, out, F32, &d);
  if (!s) s = check_rescale(ctx, __func__, slope, intercept, d.nz);
  accel__view v[2] = {ACCEL__IN("in", in), ACCEL__OUT("out", out)};
  if (s || (s = accel__views_open(ctx, __func__, v, 2))) return s;
  accel__ct_rescale_job job = {
      .d = d, .in = v[0].data, .in_dtype = in->dtype, .slope = slope, .intercept = intercept, .out = v[1].data};
  return accel__views_close(v, 2, accel__dispatch(ctx, "ct.rescale", run_rescale, &job));
}

/* The input and output of a one-input stage that takes device arrays. */
static accel_status accept_in_out(accel_ctx *ctx, const char *func, const char *what, const accel_array **in,
                                  const accel_array **out, dev_args *dv) {
  dv->nslots = 0;
  dv->device = 0;
  accel_status s = accept_arg(ctx, func, what, *in, dv, 0, ACCEL__CT_DEV_IN, in);
  if (!s) s = accept_arg(ctx, func, "out", *out, dv, 1, ACCEL__CT_DEV_OUT, out);
  return s;
}

accel_status accel_ct_threshold(accel_ctx *ctx, const accel_array *in, double threshold, accel_ct_compare compare,
                                const accel_array *out) {
  static const accel_dtype ok[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_I16, ACCEL_DTYPE_U16, ACCEL_DTYPE_I32, ACCEL_DTYPE_F32};
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_status s = check_compare(ctx, __func__, compare, threshold);
  dev_args dv;
  if (s || (s = accept_in_out(ctx, __func__, "in", &in, &out, &dv))) return s;
  accel__dims d;
  s = check_in_out(ctx, __func__, "in", in, ok, 5, out, U8, &d);
  accel__view v[2] = {ACCEL__IN("in", in), ACCEL__OUT("out", out)};
  if (s || (s = accel__views_open(ctx, __func__, v, 2))) return s;
  accel__ct_threshold_job job = {.d = d,
                                 .in = v[0].data,
                                 .in_dtype = in->dtype,
                                 .threshold = threshold,
                                 .compare = compare,
                                 .out = v[1].data,
                                 .device = dv.device};
  add_slot(&dv, ACCEL__CT_DEV_IN, &job.in, in, true);
  add_slot(&dv, ACCEL__CT_DEV_OUT, &job.out, out, false);
  s = accel__dispatch_device(ctx, "ct.threshold", run_threshold, &job, dv.slots, dv.nslots);
  return accel__views_close(v, 2, s);
}

accel_status accel_ct_fill_holes(accel_ctx *ctx, const accel_array *mask, accel_ct_connectivity connectivity,
                                 const accel_array *out) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, connectivity == ACCEL_CT_FACES || connectivity == ACCEL_CT_EDGES || connectivity == ACCEL_CT_CORNERS,
          ACCEL_ERR_INVALID_ARG, "connectivity must be 6, 18 or 26, not %d", (int)connectivity);
  dev_args dv;
  accel_status s = accept_in_out(ctx, __func__, "mask", &mask, &out, &dv);
  if (s) return s;
  accel__dims d;
  s = check_in_out(ctx, __func__, "mask", mask, U8, 1, out, U8, &d);
  accel__view v[2] = {ACCEL__IN("mask", mask), ACCEL__OUT("out", out)};
  if (s || (s = accel__views_open(ctx, __func__, v, 2))) return s;
  accel__ct_fill_job job = {
      .d = d, .mask = v[0].data, .connectivity = (int)connectivity, .out = v[1].data, .device = dv.device};
  add_slot(&dv, ACCEL__CT_DEV_IN, &job.mask, mask, true);
  add_slot(&dv, ACCEL__CT_DEV_OUT, &job.out, out, false);
  s = accel__dispatch_device(ctx, "ct.fill_holes", run_fill_holes, &job, dv.slots, dv.nslots);
  return accel__views_close(v, 2, s);
}

accel_status accel_ct_edt(accel_ctx *ctx, const accel_array *mask, const double *spacing, const accel_array *out) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel__dims d;
  accel__ct_edt_job job;
  dev_args dv;
  accel_status s = accept_in_out(ctx, __func__, "mask", &mask, &out, &dv);
  if (!s) s = check_in_out(ctx, __func__, "mask", mask, U8, 1, out, F32, &d);
  if (!s) s = check_spacing(ctx, __func__, spacing, job.spacing);
  accel__view v[2] = {ACCEL__IN("mask", mask), ACCEL__OUT("out", out)};
  if (s || (s = accel__views_open(ctx, __func__, v, 2))) return s;
  job.d = d;
  job.mask = v[0].data;
  job.out = v[1].data;
  job.device = dv.device;
  add_slot(&dv, ACCEL__CT_DEV_IN, &job.mask, mask, true);
  add_slot(&dv, ACCEL__CT_DEV_OUT, &job.out, out, false);
  s = accel__dispatch_device(ctx, "ct.edt", run_edt, &job, dv.slots, dv.nslots);
  return accel__views_close(v, 2, s);
}

/* The feature transform's outputs: (3, Z, Y, X) I32 indices, (Z, Y, X) F64 distances. */
static accel_status check_ft_out(accel_ctx *ctx, const char *func, const accel_array *mask, const accel_array *indices,
                                 const accel_array *distances, accel__dims d) {
  static const accel_dtype F64[] = {ACCEL_DTYPE_F64};
  if (!indices && !distances)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "indices and distances are both NULL");
  accel_status s = ACCEL_OK;
  if (distances && !(s = check_volume(ctx, func, "distances", distances, F64, 1, &d, false)))
    s = check_overlap(ctx, func, distances, mask, "mask", false);
  if (s || !indices) return s;
  if ((s = accel__array_check(ctx, func, "indices", indices))) return s;
  if (indices->ndim != 4 || indices->dtype != ACCEL_DTYPE_I32 || indices->shape[0] != 3 || indices->shape[1] != d.nz ||
      indices->shape[2] != d.ny || indices->shape[3] != d.nx)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "indices must be I32 of shape (3, %lld, %lld, %lld): the mask's shape after 3",
                          (long long)d.nz, (long long)d.ny, (long long)d.nx);
  if ((s = check_overlap(ctx, func, indices, mask, "mask", false))) return s;
  if (distances && accel__arrays_overlap(indices, distances))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "indices and distances overlap");
  return ACCEL_OK;
}

accel_status accel_ct_feature_transform(accel_ctx *ctx, const accel_array *mask, const double *spacing,
                                        const accel_array *indices, const accel_array *distances) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel__ct_ft_job job;
  accel_status s = check_volume(ctx, __func__, "mask", mask, U8, 1, &job.d, true);
  if (!s && (job.d.nz > INT32_MAX || job.d.ny > INT32_MAX || job.d.nx > INT32_MAX))
    s = accel__fail_in(ctx, __func__, ACCEL_ERR_LIMIT, "mask has a side over 2^31 - 1: beyond the I32 indices");
  if (!s) s = check_spacing(ctx, __func__, spacing, job.spacing);
  if (!s) s = check_ft_out(ctx, __func__, mask, indices, distances, job.d);
  accel__view v[3] = {ACCEL__IN("mask", mask), ACCEL__OUT("indices", indices), ACCEL__OUT("distances", distances)};
  if (s || (s = accel__views_open(ctx, __func__, v, 3))) return s;
  job.mask = v[0].data;
  job.indices = v[1].data;
  job.distances = v[2].data;
  s = accel__dispatch(ctx, "ct.feature_transform", run_feature_transform, &job);
  return accel__views_close(v, 3, s);
}

enum {
  MARKER_OPTIONS_V1 = offsetof(accel_ct_marker_options, values),             /* the first release's */
  WATERSHED_OPTIONS_V1 = offsetof(accel_ct_watershed_options, connectivity), /* the first release's */
  PIPELINE_OPTIONS_V1 = sizeof(accel_ct_pipeline_options),
  OUTPUTS_V1 = sizeof(accel_ct_outputs)
};

accel_status accel_ct_marker_options_init(accel_ct_marker_options *o, size_t struct_size) {
  static const accel_ct_marker_options DEFAULTS = {.min_distance = 3,
                                                   .saddle_iterations = 20,
                                                   .nearby_factor = 1.0,
                                                   .spacing = {1.0, 1.0, 1.0},
                                                   .threshold_abs = NAN,
                                                   .threshold_rel = NAN,
                                                   .num_peaks = -1,
                                                   .num_peaks_per_label = -1,
                                                   .p_norm = INFINITY,
                                                   .background = NAN};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, MARKER_OPTIONS_V1);
}

static accel_status check_trim(accel_ctx *ctx, const char *func, uint32_t trim, int32_t iterations, double factor) {
  if (trim & ~(uint32_t)(ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown trim flags 0x%x", (unsigned)trim);
  if (iterations < 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "saddle_iterations %d must be >= 1", (int)iterations);
  if (!(factor >= 0) || isinf(factor))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "nearby_factor %g must be finite and >= 0", factor);
  return ACCEL_OK;
}

/* The second version's options of a peak search. */
static accel_status check_peak_options(accel_ctx *ctx, const char *func, const accel_ct_marker_options *o) {
  if (o->values > ACCEL_CT_VALUES_ANY || o->order > ACCEL_CT_PEAKS_SORTED || o->rules > ACCEL_CT_RULES_SKIMAGE_0_22)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown values (%u), order (%u) or rules (%u)",
                          (unsigned)o->values, (unsigned)o->order, (unsigned)o->rules);
  for (int a = 0; a < 3; a++)
    if (o->exclude_border[a] < 0)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "exclude_border[%d] = %d < 0", a,
                            (int)o->exclude_border[a]);
  if (o->num_peaks < -1 || o->num_peaks_per_label < -1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "num_peaks %lld or num_peaks_per_label %lld < -1",
                          (long long)o->num_peaks, (long long)o->num_peaks_per_label);
  if (!(o->p_norm >= 1))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "p_norm %g must be >= 1 (or INFINITY)", o->p_norm);
  return ACCEL_OK;
}

/* The options of a peak search (search: markers) or of the trims alone: the
 * caller's over the defaults in o, checked; sp: the spacing to use. */
static accel_status read_marker_options(accel_ctx *ctx, const char *func, const accel_ct_marker_options *options,
                                        bool search, accel_ct_marker_options *o, double sp[3]) {
  accel_status s = ACCEL_OK;
  if (options && (s = accel__versioned_in(ctx, func, "options", options, o, sizeof *o, MARKER_OPTIONS_V1))) return s;
  if (search && o->min_distance < 0)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "min_distance %d < 0", o->min_distance);
  if (search && (!(o->smooth_sigma >= 0) || isinf(o->smooth_sigma)))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "smooth_sigma %g must be >= 0", o->smooth_sigma);
  if ((s = check_trim(ctx, func, o->trim, o->saddle_iterations, o->nearby_factor))) return s;
  if (search && (s = check_peak_options(ctx, func, o))) return s;
  return check_spacing(ctx, func, o->spacing, sp);
}

/* The trims after a peak search or on given peaks (host code on every
 * backend), counted as the stage "ct.trim". */
static accel_status run_trim(accel_ctx *ctx, const char *func, const float *map, accel__dims d,
                             const accel_ct_marker_options *o, const double sp[3], int32_t *markers, uint32_t *count) {
  const double t0 = accel__now();
  accel_status s = accel__ct_trim_markers_cpu(map, d, o->trim, o->saddle_iterations, o->nearby_factor, sp,
                                              accel__ctx_threads(ctx), markers, count);
  accel__stats_delta delta = {.runs = 1, .cpu_runs = s ? 0 : 1, .failures = s ? 1 : 0, .seconds = accel__now() - t0};
  accel__stats_add(ctx, "ct.trim", &delta);
  if (s == ACCEL_ERR_LIMIT)
    return accel__fail_in(ctx, func, s, "more than 2^31 - 1 peaks survive the trims: their numbers exceed int32");
  if (s) return accel__fail_in(ctx, func, s, "out of memory for the peak trims");
  return ACCEL_OK;
}

/* The views v[0..n), of which v[0] is a distance map: it must be finite
 * and not negative (checked before the others are opened). */
static accel_status open_edt(accel_ctx *ctx, const char *func, accel__view *v, int n, accel__dims d) {
  accel_status s = accel__views_open(ctx, func, v, 1);
  const float *e = v->data;
  for (uint64_t i = 0, count = accel__dims_count(d); i < count && !s; i++)
    if (!(e[i] >= 0) || isinf(e[i]))
      s = accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "edt[%llu] = %g: a distance map is finite and not negative",
                         (unsigned long long)i, (double)e[i]);
  if (!s) s = accel__views_open(ctx, func, v + 1, n - 1);
  return s ? accel__views_close(v, 1, s) : ACCEL_OK;
}

/* The arguments of a peak search (search: `other` is the mask) or of the
 * trims alone (`other`: the markers, which out may be): the options over
 * the defaults in o, sp the spacing, d the shape of edt. */
static accel_status check_markers(accel_ctx *ctx, const char *func, const accel_ct_marker_options *options, bool search,
                                  accel_ct_marker_options *o, double sp[3], const accel_array *edt,
                                  const accel_array *other, const accel_array *out, accel__dims *d) {
  const char *what = search ? "mask" : "markers";
  accel_status s = read_marker_options(ctx, func, options, search, o, sp);
  if (!s) s = check_volume(ctx, func, "edt", edt, F32, 1, d, true);
  if (!s) s = check_volume(ctx, func, what, other, search ? U8 : I32, 1, d, false);
  if (!s) s = check_volume(ctx, func, "out", out, I32, 1, d, false);
  if (!s) s = check_overlap(ctx, func, out, edt, "edt", false);
  if (!s) s = check_overlap(ctx, func, out, other, what, !search);
  return s;
}

/* Does a peak search need the general search (second-version options, or
 * arrays the first version did not take)? */
static bool wants_general(const accel_ct_marker_options *o, const accel_array *edt, const accel_array *mask) {
  return !mask || !edt || edt->ndim != 3 || edt->dtype != ACCEL_DTYPE_F32 || o->values || o->order || o->rules ||
         o->exclude_border[0] || o->exclude_border[1] || o->exclude_border[2] || !isnan(o->threshold_abs) ||
         !isnan(o->threshold_rel) || o->num_peaks >= 0 || o->num_peaks_per_label >= 0 || o->footprint || o->labels ||
         !isinf(o->p_norm);
}

/* The map's values: finite and not negative (DISTANCES) or not NaN (ANY). */
static accel_status check_values(accel_ctx *ctx, const char *func, const void *data, bool f64, uint64_t n, bool any) {
  for (uint64_t i = 0; i < n; i++) {
    const double v = f64 ? ((const double *)data)[i] : ((const float *)data)[i];
    if (any ? isnan(v) : !(v >= 0) || isinf(v))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "edt[%llu] = %g: %s", (unsigned long long)i, v,
                            any ? "NaN has no order" : "a distance map is finite and not negative");
  }
  return ACCEL_OK;
}

/* The footprint: U8 with the image's rank, its extents into f (z, y, x). */
static accel_status check_footprint(accel_ctx *ctx, const char *func, const accel_array *fp, int rank, int64_t f[3]) {
  f[0] = f[1] = f[2] = 1;
  if (!fp) return ACCEL_OK;
  accel_status s = accel__array_check(ctx, func, "options->footprint", fp);
  if (s) return s;
  if (fp->ndim != rank || fp->dtype != ACCEL_DTYPE_U8)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "options->footprint must be U8 of the image's %d dimensions", rank);
  for (int a = 0; a < rank; a++) {
    if (fp->shape[a] < 1 || fp->shape[a] > INT32_MAX)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "options->footprint's extents must be 1 .. 2^31 - 1");
    f[3 - rank + a] = fp->shape[a];
  }
  return ACCEL_OK;
}

/* The general search's arrays (any of 1-D to 3-D): d their shape. */
static accel_status check_general(accel_ctx *ctx, const char *func, const accel_ct_marker_options *o,
                                  const accel_array *edt, const accel_array *mask, const accel_array *out,
                                  accel_array a3[4], accel__dims *d) {
  static const accel_dtype reals[] = {ACCEL_DTYPE_F32, ACCEL_DTYPE_F64};
  REQUIRE(ctx, edt && out, ACCEL_ERR_INVALID_ARG, "edt and out must not be NULL");
  REQUIRE(ctx, !(mask && o->labels), ACCEL_ERR_INVALID_ARG, "give the mask or options->labels, not both");
  const int rank = edt->ndim;
  REQUIRE(ctx, rank >= 1 && rank <= 3, ACCEL_ERR_INVALID_ARG, "edt must be 1-D, 2-D or 3-D, not %d-D", rank);
  REQUIRE(ctx, out->ndim == rank && (!mask || mask->ndim == rank) && (!o->labels || o->labels->ndim == rank),
          ACCEL_ERR_INVALID_ARG, "mask, options->labels and out must have the image's %d dimensions", rank);
  for (int a = rank; a < 3; a++)
    REQUIRE(ctx, o->exclude_border[a] == 0, ACCEL_ERR_INVALID_ARG,
            "exclude_border[%d] must be 0: the image has %d dimensions", a, rank);
  REQUIRE(ctx, !o->trim || (rank == 3 && edt->dtype == ACCEL_DTYPE_F32 && !o->values), ACCEL_ERR_UNSUPPORTED,
          "the trims take a 3-D float32 distance map");
  REQUIRE(ctx, !(o->smooth_sigma > 0) || (rank == 3 && edt->dtype == ACCEL_DTYPE_F32), ACCEL_ERR_UNSUPPORTED,
          "smoothing takes a 3-D float32 map");
  a3[0] = as_volume(edt);
  a3[1] = as_volume(out);
  a3[2] = mask ? as_volume(mask) : a3[0];
  a3[3] = o->labels ? as_volume(o->labels) : a3[0];
  accel_status s = check_volume(ctx, func, "edt", &a3[0], reals, 2, d, true);
  if (!s && mask) s = check_volume(ctx, func, "mask", &a3[2], U8, 1, d, false);
  if (!s && o->labels) s = check_volume(ctx, func, "options->labels", &a3[3], I32, 1, d, false);
  if (!s) s = check_volume(ctx, func, "out", &a3[1], I32, 1, d, false);
  if (!s) s = check_overlap(ctx, func, &a3[1], &a3[0], "edt", false);
  if (!s && mask) s = check_overlap(ctx, func, &a3[1], &a3[2], "mask", false);
  if (!s && o->labels) s = check_overlap(ctx, func, &a3[1], &a3[3], "options->labels", false);
  if (!s && o->footprint) s = check_overlap(ctx, func, &a3[1], o->footprint, "options->footprint", false);
  return s;
}

/* accel_ct_markers with the general search. */
static accel_status markers_general(accel_ctx *ctx, const char *func, const accel_ct_marker_options *o,
                                    const double sp[3], const accel_array *edt, const accel_array *mask,
                                    const accel_array *out, uint32_t *count) {
  accel_array a3[4];
  accel__dims d;
  int64_t f[3];
  accel_status s = check_general(ctx, func, o, edt, mask, out, a3, &d);
  if (!s) s = check_footprint(ctx, func, o->footprint, edt->ndim, f);
  if (s) return s;
  const bool f64 = edt->dtype == ACCEL_DTYPE_F64;
  accel__view v[5] = {ACCEL__IN("edt", &a3[0]), ACCEL__IN("mask", mask ? &a3[2] : NULL),
                      ACCEL__IN("options->labels", o->labels ? &a3[3] : NULL),
                      ACCEL__IN("options->footprint", o->footprint), ACCEL__OUT("out", &a3[1])};
  if ((s = accel__views_open(ctx, func, v, 5))) return s;
  s = check_values(ctx, func, v[0].data, f64, accel__dims_count(d), o->values == ACCEL_CT_VALUES_ANY);
  const uint64_t fn = (uint64_t)(f[0] * f[1] * f[2]);
  uint64_t set = 0;
  for (uint64_t k = 0; k < fn && v[3].data; k++) set += ((const uint8_t *)v[3].data)[k] != 0;
  if (!s && v[3].data && fn > 1 && !set)
    s = accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "options->footprint has no element set");
  accel__ct_peak_params p = {.rank = edt->ndim,
                             .threshold_abs = o->threshold_abs,
                             .threshold_rel = o->threshold_rel,
                             .num_peaks = o->num_peaks,
                             .per_label = o->num_peaks_per_label,
                             .footprint = v[3].data,
                             .fshape = {f[0], f[1], f[2]},
                             .labels = v[2].data,
                             .p_norm = o->p_norm,
                             .background = !isnan(o->background) ? o->background
                                           : f64                 ? -DBL_MAX
                                                                 : -FLT_MAX,
                             .sorted = o->order == ACCEL_CT_PEAKS_SORTED,
                             .rules_0_22 = o->rules == ACCEL_CT_RULES_SKIMAGE_0_22,
                             .f32 = !f64,
                             .distances = o->values == ACCEL_CT_VALUES_DISTANCES};
  for (int a = 0; a < edt->ndim; a++) p.border[3 - edt->ndim + a] = o->exclude_border[a];
  accel__ct_markers_job job = {.d = d,
                               .image = f64 ? NULL : v[0].data,
                               .image64 = f64 ? v[0].data : NULL,
                               .mask = v[1].data,
                               .min_distance = o->min_distance,
                               .sigma = o->smooth_sigma,
                               .general = &p,
                               .out = v[4].data};
  if (!s) s = accel__dispatch(ctx, "ct.markers", run_markers, &job);
  if (!s && o->trim) s = run_trim(ctx, func, job.image, d, o, sp, job.out, &job.count);
  if (!s && count) *count = job.count;
  return accel__views_close(v, 5, s);
}

accel_status accel_ct_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *mask,
                              const accel_ct_marker_options *options, const accel_array *out, uint32_t *count) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_ct_marker_options o;
  accel_ct_marker_options_init(&o, sizeof o);
  double sp[3];
  accel__dims d;
  accel_status s = read_marker_options(ctx, __func__, options, true, &o, sp);
  if (s) return s;
  if (wants_general(&o, edt, mask)) return markers_general(ctx, __func__, &o, sp, edt, mask, out, count);
  s = check_markers(ctx, __func__, options, true, &o, sp, edt, mask, out, &d);
  accel__view v[3] = {ACCEL__IN("edt", edt), ACCEL__IN("mask", mask), ACCEL__OUT("out", out)};
  if (s || (s = open_edt(ctx, __func__, v, 3, d))) return s;
  accel__ct_markers_job job = {.d = d,
                               .image = v[0].data,
                               .mask = v[1].data,
                               .min_distance = o.min_distance,
                               .sigma = o.smooth_sigma,
                               .out = v[2].data};
  s = accel__dispatch(ctx, "ct.markers", run_markers, &job);
  if (!s && o.trim) s = run_trim(ctx, __func__, job.image, d, &o, sp, job.out, &job.count);
  if (!s && count) *count = job.count;
  return accel__views_close(v, 3, s);
}

accel_status accel_ct_trim_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *markers,
                                   const accel_ct_marker_options *options, const accel_array *out, uint32_t *count) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_ct_marker_options o;
  accel_ct_marker_options_init(&o, sizeof o);
  o.trim = ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY;
  double sp[3];
  accel__dims d;
  accel_status s = check_markers(ctx, __func__, options, false, &o, sp, edt, markers, out, &d);
  if (s) return s;
  /* the output starts as the markers: the very array, or a copy */
  const bool alias = out->data == markers->data;
  accel__view v[2] = {ACCEL__IN("edt", edt), ACCEL__VIEW("out", out, alias ? ACCEL__VIEW_INOUT : ACCEL__VIEW_OUT)};
  if ((s = open_edt(ctx, __func__, v, 2, d))) return s;
  if (!alias) accel__array_pack(markers, v[1].data);
  uint32_t n = 0;
  s = run_trim(ctx, __func__, v[0].data, d, &o, sp, v[1].data, &n);
  if (!s && count) *count = n;
  return accel__views_close(v, 2, s);
}

accel_status accel_ct_watershed_options_init(accel_ct_watershed_options *o, size_t struct_size) {
  static const accel_ct_watershed_options DEFAULTS = {.ties = ACCEL_CT_TIES_SKIMAGE, .connectivity = 1};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, WATERSHED_OPTIONS_V1);
}

/* The flood's start in one pass: the output is markers * mask; NaN values
 * of the image in the mask and the reserved marker value are refused. */
static accel_status seed_flood(accel_ctx *ctx, const char *func, uint64_t n, const void *image, bool f64,
                               const uint8_t *mask, const int32_t *markers, int32_t *out) {
  uint64_t bad_nan = UINT64_MAX, bad_marker = UINT64_MAX;
  for (uint64_t i = 0; i < n; i++) {
    const bool in = !mask || mask[i];
    const int32_t m = in ? markers[i] : 0;
    out[i] = m;
    const bool nan = f64 ? isnan(((const double *)image)[i]) : isnan(((const float *)image)[i]);
    if (in && nan && bad_nan == UINT64_MAX) bad_nan = i;
    if (m == INT32_MIN && bad_marker == UINT64_MAX) bad_marker = i;
  }
  if (bad_nan != UINT64_MAX)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "image[%llu] is NaN", (unsigned long long)bad_nan);
  if (bad_marker != UINT64_MAX)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "marker value %d (at %llu) is reserved", INT32_MIN,
                          (unsigned long long)bad_marker);
  return ACCEL_OK;
}

/* The watershed's options beyond the tie rule: connectivity >= 1, a finite
 * compactness >= 0. */
static accel_status check_watershed_options(accel_ctx *ctx, const char *func, const accel_ct_watershed_options *o) {
  accel_status s = check_ties(ctx, func, o->ties);
  if (s) return s;
  if (o->connectivity < 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "connectivity %u must be >= 1", (unsigned)o->connectivity);
  if (!(o->compactness >= 0) || isinf(o->compactness))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "compactness %g must be finite and >= 0", o->compactness);
  return ACCEL_OK;
}

accel_status accel_ct_watershed(accel_ctx *ctx, const accel_array *image, const accel_array *markers,
                                const accel_array *mask, const accel_ct_watershed_options *options,
                                const accel_array *out) {
  static const accel_dtype reals[] = {ACCEL_DTYPE_F32, ACCEL_DTYPE_F64};
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, image && markers && out, ACCEL_ERR_INVALID_ARG, "image, markers and out must not be NULL");
  accel_ct_watershed_options o;
  accel_ct_watershed_options_init(&o, sizeof o);
  accel_status s = ACCEL_OK;
  if (options && (s = accel__versioned_in(ctx, __func__, "options", options, &o, sizeof o, WATERSHED_OPTIONS_V1)))
    return s;
  if ((s = check_watershed_options(ctx, __func__, &o))) return s;
  REQUIRE(ctx, image->ndim >= 1 && image->ndim <= 3, ACCEL_ERR_INVALID_ARG, "image must be 1-D, 2-D or 3-D, not %d-D",
          (int)image->ndim);
  const int rank = image->ndim;
  REQUIRE(ctx, markers->ndim == image->ndim && out->ndim == image->ndim && (!mask || mask->ndim == image->ndim),
          ACCEL_ERR_INVALID_ARG, "markers, mask and out must have the image's %d dimensions", (int)image->ndim);
  const accel_array im3 = as_volume(image), mk3 = as_volume(markers), out3 = as_volume(out);
  const accel_array ms3 = mask ? as_volume(mask) : im3;
  const accel_array *ms = mask ? &ms3 : NULL;
  accel__dims d;
  s = check_volume(ctx, __func__, "image", &im3, reals, 2, &d, true);
  if (!s) s = check_volume(ctx, __func__, "markers", &mk3, I32, 1, &d, false);
  if (!s && ms) s = check_volume(ctx, __func__, "mask", ms, U8, 1, &d, false);
  if (!s) s = check_volume(ctx, __func__, "out", &out3, I32, 1, &d, false);
  if (!s) s = check_overlap(ctx, __func__, &out3, &im3, "image", false);
  if (!s) s = check_overlap(ctx, __func__, &out3, ms, "mask", false);
  if (!s) s = check_overlap(ctx, __func__, &out3, &mk3, "markers", true);
  if (s) return s;
  const bool alias = out->data == markers->data, f64 = image->dtype == ACCEL_DTYPE_F64;
  accel__view v[4] = {ACCEL__IN("image", &im3), ACCEL__IN("mask", ms),
                      ACCEL__VIEW("out", &out3, alias ? ACCEL__VIEW_INOUT : ACCEL__VIEW_OUT),
                      ACCEL__IN("markers", alias ? NULL : &mk3)};
  if ((s = accel__views_open(ctx, __func__, v, 4))) return s;
  s = seed_flood(ctx, __func__, accel__dims_count(d), v[0].data, f64, v[1].data, alias ? v[2].data : v[3].data,
                 v[2].data);
  accel__views_close(v + 3, 1, s); /* the markers are in the output now */
  accel__ct_watershed_job job = {.d = d,
                                 .image = f64 ? NULL : v[0].data,
                                 .image64 = f64 ? v[0].data : NULL,
                                 .mask = v[1].data,
                                 .ties = o.ties,
                                 .rank = rank,
                                 .connectivity = o.connectivity,
                                 .watershed_line = o.watershed_line != 0,
                                 .compactness = o.compactness,
                                 .out = v[2].data,
                                 .progress = o.progress,
                                 .progress_user = o.progress_user};
  if (!s) s = accel__dispatch(ctx, "ct.watershed", run_watershed, &job);
  return accel__views_close(v, 3, s);
}

accel_status accel_ct_network_build(accel_ctx *ctx, const accel_array *labels, const accel_array *edt,
                                    const double *spacing, accel_ct_network **out) {
  REQUIRE(ctx, ctx && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  accel__dims d;
  double sp[3];
  accel_status s = check_volume(ctx, __func__, "labels", labels, I32, 1, &d, true);
  if (!s) s = check_volume(ctx, __func__, "edt", edt, F32, 1, &d, false);
  if (!s) s = check_spacing(ctx, __func__, spacing, sp);
  accel__view v[2] = {ACCEL__IN("labels", labels), ACCEL__IN("edt", edt)};
  if (s || (s = accel__views_open(ctx, __func__, v, 2))) return s;
  const double t0 = accel__now();
  s = accel__ct_network_cpu(v[0].data, v[1].data, d, sp, accel__ctx_threads(ctx), out);
  accel__stats_delta delta = {.runs = 1, .cpu_runs = s ? 0 : 1, .failures = s ? 1 : 0, .seconds = accel__now() - t0};
  accel__stats_add(ctx, "ct.network", &delta);
  accel__views_close(v, 2, ACCEL_OK);
  if (s) return FAIL(ctx, s, "out of memory");
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
  static const accel_ct_pipeline_options DEFAULTS = {.compare = ACCEL_CT_GREATER,
                                                     .fill_connectivity = ACCEL_CT_FACES,
                                                     .pores = ACCEL_CT_PORES_CLOSED,
                                                     .spacing = {1.0, 1.0, 1.0},
                                                     .min_distance = 3,
                                                     .ties = ACCEL_CT_TIES_SKIMAGE,
                                                     .saddle_iterations = 20,
                                                     .nearby_factor = 1.0};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, PIPELINE_OPTIONS_V1);
}

accel_status accel_ct_outputs_init(accel_ct_outputs *o, size_t struct_size) {
  return accel__versioned_init(__func__, o, struct_size, NULL, sizeof *o, OUTPUTS_V1);
}

accel_status accel_ct_pipeline_create(accel_ctx *ctx, const accel_ct_pipeline_options *options,
                                      accel_ct_pipeline **out) {
  REQUIRE(ctx, ctx && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  accel_ct_pipeline_options o;
  accel_ct_pipeline_options_init(&o, sizeof o);
  accel_status s;
  if (options && (s = accel__versioned_in(ctx, __func__, "options", options, &o, sizeof o, PIPELINE_OPTIONS_V1)))
    return s;
  REQUIRE(ctx, !o.slope == !o.intercept, ACCEL_ERR_INVALID_ARG, "give slope and intercept together, or neither");
  if ((s = check_compare(ctx, __func__, o.compare, o.threshold))) return s;
  REQUIRE(ctx,
          o.fill_connectivity == ACCEL_CT_FACES || o.fill_connectivity == ACCEL_CT_EDGES ||
              o.fill_connectivity == ACCEL_CT_CORNERS,
          ACCEL_ERR_INVALID_ARG, "fill_connectivity must be 6, 18 or 26");
  REQUIRE(ctx, o.pores == ACCEL_CT_PORES_CLOSED || o.pores == ACCEL_CT_PORES_ALL, ACCEL_ERR_INVALID_ARG,
          "unknown pores mode %d", (int)o.pores);
  REQUIRE(ctx, o.min_distance >= 0, ACCEL_ERR_INVALID_ARG, "min_distance < 0");
  REQUIRE(ctx, o.smooth_sigma >= 0 && !isinf(o.smooth_sigma), ACCEL_ERR_INVALID_ARG, "smooth_sigma must be >= 0");
  if ((s = check_ties(ctx, __func__, o.ties))) return s;
  if ((s = check_trim(ctx, __func__, o.trim, o.saddle_iterations, o.nearby_factor))) return s;
  double sp[3];
  if ((s = check_spacing(ctx, __func__, o.spacing, sp))) return s;
  accel_ct_pipeline *p = calloc(1, sizeof *p);
  REQUIRE(ctx, p, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  p->ctx = ctx;
  p->o = o;
  p->o.slope = p->o.intercept = NULL; /* copied at run time, when Z is known */
  p->slope = (double *)o.slope;       /* the caller's, read at each run */
  p->intercept = (double *)o.intercept;
  *out = p;
  return ACCEL_OK;
}

void accel_ct_pipeline_destroy(accel_ct_pipeline *p) { free(p); }

/* The outputs a pipeline run can write, in the order of accel__view slots 2.. */
enum { NOUT = 6 };

/* The input (its shape, and its dtype for a rescale) and the markers. */
static accel_status check_run_inputs(const accel_ct_pipeline *p, const char *func, const accel_array *input,
                                     const accel_array *markers, accel__dims *d) {
  static const accel_dtype in_ok[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_I16, ACCEL_DTYPE_U16, ACCEL_DTYPE_I32,
                                      ACCEL_DTYPE_F32};
  accel_ctx *ctx = p->ctx;
  accel_status s;
  if ((s = check_volume(ctx, func, "input", input, in_ok, 5, d, true))) return s;
  if (p->slope && input->dtype != ACCEL_DTYPE_I16 && input->dtype != ACCEL_DTYPE_U16)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "rescaling needs an I16 or U16 input, not %s",
                          accel__dtype_name(input->dtype));
  if (p->slope && (s = check_rescale(ctx, func, p->slope, p->intercept, d->nz))) return s;
  if (markers && (s = check_volume(ctx, func, "markers", markers, I32, 1, d, false))) return s;
  return ACCEL_OK;
}

/* Each wanted output: its shape and dtype, overlapping nothing else. */
static accel_status check_run_outputs(accel_ctx *ctx, const char *func, const accel__view *outs,
                                      const accel_dtype *const *dtypes, const accel_array *input,
                                      const accel_array *markers, accel__dims *d) {
  accel_status s;
  for (int k = 0; k < NOUT; k++) {
    if (!outs[k].a) continue;
    if ((s = check_volume(ctx, func, outs[k].what, outs[k].a, dtypes[k], 1, d, false)) ||
        (s = check_overlap(ctx, func, outs[k].a, input, "the input", false)) ||
        (s = check_overlap(ctx, func, outs[k].a, markers, "the markers", false)))
      return s;
    for (int j = 0; j < k; j++)
      if (outs[j].a && (s = check_overlap(ctx, func, outs[k].a, outs[j].a, outs[j].what, false))) return s;
  }
  return ACCEL_OK;
}

/* The run's input, markers and outputs in host or device memory. */
static accel_status accept_run_arrays(accel_ctx *ctx, const char *func, const accel_array **input,
                                      const accel_array **markers, accel_ct_outputs *o, dev_args *dv) {
  dv->nslots = 0;
  dv->device = 0;
  accel_status s = accept_arg(ctx, func, "input", *input, dv, 0, ACCEL__CT_DEV_INPUT, input);
  if (!s) s = accept_arg(ctx, func, "markers", *markers, dv, 1, ACCEL__CT_DEV_GIVEN, markers);
  const accel_array **outs[NOUT] = {&o->solid, &o->filled, &o->pores, &o->edt, &o->markers, &o->labels};
  static const char *const names[NOUT] = {"outputs.solid", "outputs.filled",  "outputs.pores",
                                          "outputs.edt",   "outputs.markers", "outputs.labels"};
  for (int k = 0; k < NOUT && !s; k++)
    s = accept_arg(ctx, func, names[k], *outs[k], dv, 2 + k, ACCEL__CT_DEV_SOLID << k, outs[k]);
  return s;
}

accel_status accel_ct_pipeline_run(accel_ct_pipeline *p, const accel_array *input, const accel_array *markers,
                                   accel_ct_outputs *outputs) {
  REQUIRE(p ? p->ctx : NULL, p && outputs, ACCEL_ERR_INVALID_ARG, "NULL argument");
  accel_ctx *ctx = p->ctx;
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  accel_status s = accel__versioned_in(ctx, __func__, "outputs", outputs, &o, sizeof o, OUTPUTS_V1);
  dev_args dv;
  accel__dims d;
  accel_ct_outputs given = o; /* the caller's pointers, written back */
  if (s || (s = accept_run_arrays(ctx, __func__, &input, &markers, &o, &dv)) ||
      (s = check_run_inputs(p, __func__, input, markers, &d)))
    return s;
  accel__view v[2 + NOUT] = {ACCEL__IN("input", input),
                             ACCEL__IN("markers", markers),
                             ACCEL__OUT("outputs.solid", o.solid),
                             ACCEL__OUT("outputs.filled", o.filled),
                             ACCEL__OUT("outputs.pores", o.pores),
                             ACCEL__OUT("outputs.edt", o.edt),
                             ACCEL__OUT("outputs.markers", o.markers),
                             ACCEL__OUT("outputs.labels", o.labels)};
  static const accel_dtype *const out_dtypes[NOUT] = {U8, U8, U8, F32, I32, I32};
  if ((s = check_run_outputs(ctx, __func__, v + 2, out_dtypes, input, markers, &d))) return s;
  if (o.network) *o.network = NULL;
  if ((s = accel__views_open(ctx, __func__, v, 2 + NOUT))) return s;
  accel__ct_pipeline_job job;
  memset(&job, 0, sizeof job);
  job.d = d;
  job.in = v[0].data;
  job.in_dtype = input->dtype;
  job.o = p->o;
  job.o.slope = p->slope;
  job.o.intercept = p->intercept;
  job.given_markers = v[1].data;
  job.solid = v[2].data;
  job.filled = v[3].data;
  job.pores = v[4].data;
  job.edt = v[5].data;
  job.markers = v[6].data;
  job.labels = v[7].data;
  job.want_network = o.network != NULL;
  job.device = dv.device;
  add_slot(&dv, ACCEL__CT_DEV_INPUT, &job.in, input, true);
  add_slot(&dv, ACCEL__CT_DEV_GIVEN, &job.given_markers, markers, true);
  void *const out_ptrs[NOUT] = {&job.solid, &job.filled, &job.pores, &job.edt, &job.markers, &job.labels};
  for (int k = 0; k < NOUT; k++) add_slot(&dv, ACCEL__CT_DEV_SOLID << k, out_ptrs[k], v[2 + k].a, false);
  s = accel__dispatch_device(ctx, "ct.pipeline", run_pipeline, &job, dv.slots, dv.nslots);
  s = accel__views_close(v, 2 + NOUT, s);
  if (s) {
    accel_ct_network_destroy(job.network);
    return s;
  }
  if (o.network) *o.network = job.network;
  given.marker_count = job.marker_count;
  return accel__versioned_out(ctx, __func__, "outputs", outputs, &given, sizeof given, OUTPUTS_V1);
}
