/* Shadows and sky view factors: argument checks, UMEP's input preparation,
 * the plan, dispatch. */
#include "svf/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first released size of accel_svf_options. */
#define SVF_OPTIONS_V1 sizeof(accel_svf_options)

static const char *const grid_names[ACCEL_SVF_GRIDS] = {"svf",     "svfE",     "svfS",     "svfW",     "svfN",
                                                        "svfveg",  "svfEveg",  "svfSveg",  "svfWveg",  "svfNveg",
                                                        "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg"};

const char *accel_svf_grid_name(int32_t grid) { return grid >= 0 && grid < ACCEL_SVF_GRIDS ? grid_names[grid] : NULL; }

accel_status accel_svf_options_init(accel_svf_options *o, size_t struct_size) {
  static const accel_svf_options DEFAULTS = {.patches = 153, .trunk_ratio = 0.25};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, SVF_OPTIONS_V1);
}

/* ------------------------------------------------------------ checks */

/* A device array of the call (on a CUDA context): its plain description,
 * kept for the job. */
typedef struct dev_arg {
  accel_array plain;
  bool on;
} dev_arg;

static accel_status check_grid(accel_ctx *ctx, const char *func, const char *what, const accel_array *in,
                               accel_dtype dtype, int64_t *rows, int64_t *cols, bool set, dev_arg *dev) {
  const accel_array *a = in;
  accel_status s = accel__array_accept(ctx, func, what, in, &dev->plain, &a, &dev->on);
  if (!s && !dev->on) s = accel__array_check(ctx, func, what, in);
  if (s) return s;
  if (a->ndim != 2)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be a 2-D grid (rows, cols), not %d-D", what,
                          (int)a->ndim);
  if (a->dtype != dtype)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be %s, not %s", what, accel__dtype_name(dtype),
                          accel__dtype_name(a->dtype));
  if (set) {
    if (a->shape[0] < 1 || a->shape[1] < 1)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s is empty (%lld x %lld)", what, (long long)a->shape[0],
                            (long long)a->shape[1]);
    if (a->shape[0] > INT32_MAX / 2 || a->shape[1] > INT32_MAX / 2)
      return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "%s has %lld x %lld cells; at most %d per side", what,
                            (long long)a->shape[0], (long long)a->shape[1], INT32_MAX / 2);
    *rows = a->shape[0];
    *cols = a->shape[1];
  } else if (a->shape[0] != *rows || a->shape[1] != *cols) {
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s is %lld x %lld, the DSM %lld x %lld", what,
                          (long long)a->shape[0], (long long)a->shape[1], (long long)*rows, (long long)*cols);
  }
  return ACCEL_OK;
}

static accel_status check_out_overlap(accel_ctx *ctx, const char *func, const char *what, const accel_array *out,
                                      const accel_array *const *ins, int nins) {
  for (int i = 0; i < nins; i++)
    if (ins[i] && accel__arrays_overlap(out, ins[i]))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s overlaps an input or another output", what);
  return ACCEL_OK;
}

static accel_status check_options(accel_ctx *ctx, const char *func, const accel_svf_options *in, accel_svf_options *o) {
  accel_svf_options_init(o, sizeof *o);
  accel_status s;
  if (!in) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "options is NULL (the pixel size is required)");
  if ((s = accel__versioned_in(ctx, func, "options", in, o, sizeof *o, SVF_OPTIONS_V1))) return s;
  if (!(o->pixel_size > 0) || !isfinite(o->pixel_size))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "pixel_size %g must be a positive number of metres",
                          o->pixel_size);
  if (!(o->trunk_ratio >= 0) || !isfinite(o->trunk_ratio))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "trunk_ratio %g must be >= 0", o->trunk_ratio);
  if (!(o->max_height >= 0) || !isfinite(o->max_height))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "max_height %g must be >= 0 (0: UMEP's rule)",
                          o->max_height);
  if (o->tile < 0) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "tile %lld < 0", (long long)o->tile);
  return ACCEL_OK;
}

/* ------------------------------------------------------------ inputs */

/* Host inputs prepared here (lib/svf/prepare.c, the rules a backend applies
 * to device inputs): job->grid, job->plan and job->hmax set, *buf holding
 * the grids (accel__svf_release_raw frees both). */
static accel_status prepare_host(accel_ctx *ctx, const char *func, const accel_array *const in[3], accel__svf_job *job,
                                 double **buf) {
  accel__view v[3] = {ACCEL__IN("dsm", in[0]), ACCEL__IN("cdsm", in[1]), ACCEL__IN("tdsm", in[2])};
  accel_status s = accel__views_open(ctx, func, v, 3);
  if (s) return s;
  char why[ACCEL_REASON_MAX] = "";
  for (int k = 0; k < 3; k++) job->raw[k] = v[k].data;
  s = accel__svf_prepare_raw(ctx, job, buf, why);
  for (int k = 0; k < 3; k++) job->raw[k] = NULL; /* prepared: the backends take job->grid */
  accel__views_close(v, 3, ACCEL_OK);
  return s ? accel__fail_in(ctx, func, s, "%s", why) : ACCEL_OK;
}

ACCEL__STAGE_FN(run_shadows, svf, shadows, job)
ACCEL__STAGE_FN(run_sky, svf, sky, job)

/* The job's outputs: views of the host ones (v[i].data), the device ones
 * in place (their bit in job->out_device and a slot each for a CPU run). */
static void set_outputs(accel__svf_job *job, accel__view *v, int nv, const dev_arg *dev, accel__device_slot *slots,
                        int *nslots) {
  for (int i = 0; i < nv; i++) {
    void *p = v[i].data;
    if (dev[i].on) {
      p = dev[i].plain.data;
      job->out_device |= 1u << i;
      slots[*nslots] = (accel__device_slot){
          .bytes = (size_t)accel__array_count(&dev[i].plain) * accel_dtype_size(dev[i].plain.dtype), .out = true};
    }
    if (i < ACCEL_SVF_GRIDS) job->out[i] = p;
    else job->mat[i - ACCEL_SVF_GRIDS] = p;
    if (dev[i].on) {
      slots[*nslots].ptr = i < ACCEL_SVF_GRIDS ? (void **)&job->out[i] : (void **)&job->mat[i - ACCEL_SVF_GRIDS];
      (*nslots)++;
    }
  }
}

/* Both stages after their checks: the inputs prepared with the plan of
 * rays (the sun's at azimuth and altitude for shadows, else the sky's
 * patches; host inputs here, device inputs by the op itself from job->raw),
 * views of the nv host outputs v (the grids job->out, then the matrices
 * job->mat; device outputs in place), the stage on the backend, the
 * outputs back. The job comes with its stage, kind and matrix size set;
 * dev[0..3) describes the inputs, dev[3..) the outputs. */
static accel_status run_stage(accel_ctx *ctx, const char *func, const accel_array *const in[3],
                              const accel_svf_options *o, double azimuth, double altitude, int64_t rows, int64_t cols,
                              accel__svf_job *job, accel__view *v, int nv, const dev_arg *dev) {
  const bool raw = dev[0].on;
  if ((in[1] && dev[1].on != raw) || (in[2] && dev[2].on != raw))
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                          "dsm, cdsm and tdsm must all be device arrays or all host arrays");
  job->veg = in[1] != NULL;
  job->rows = rows;
  job->cols = cols;
  job->tile = o->tile;
  job->progress = o->progress;
  job->progress_user = o->progress_user;
  job->setup = (accel__svf_setup){o->pixel_size, o->max_height, o->trunk_ratio, o->patches, azimuth, altitude};
  double *buf = NULL;
  accel_status s = raw ? ACCEL_OK : prepare_host(ctx, func, in, job, &buf);
  if (s) return s;
  accel__device_slot slots[3 + ACCEL_SVF_GRIDS + ACCEL_SVF_MATRICES];
  int nslots = 0;
  for (int k = 0; k < 3 && raw; k++)
    if (in[k]) {
      job->raw[k] = dev[k].plain.data;
      slots[nslots++] = (accel__device_slot){
          .ptr = (void **)&job->raw[k], .bytes = (size_t)(rows * cols) * sizeof(float), .in = true};
    }
  for (int i = 0; i < nv; i++)
    if (dev[3 + i].on) v[i].a = NULL; /* in place: no view */
  if (!(s = accel__views_open(ctx, func, v, nv))) {
    set_outputs(job, v, nv, dev + 3, slots, &nslots);
    s = accel__dispatch_device(ctx, job->stage, job->shadows ? run_shadows : run_sky, job, slots, nslots);
    if (!s && job->progress) job->progress(job->progress_user, job->stage, 1.0);
    s = accel__views_close(v, nv, s);
  }
  if (!raw) accel__svf_release_raw(job, buf);
  return s;
}

accel_status accel_svf_shadows(accel_ctx *ctx, const accel_array *dsm, const accel_array *cdsm, const accel_array *tdsm,
                               double azimuth, double altitude, const accel_svf_options *options, const accel_array *sh,
                               const accel_array *vegsh, const accel_array *vbshvegsh) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_svf_options o;
  accel_status s = check_options(ctx, __func__, options, &o);
  if (s) return s;
  if (!(azimuth >= 0 && azimuth <= 360))
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "azimuth %g must be in [0, 360] degrees (clockwise from north)", azimuth);
  if (!(altitude > 0 && altitude <= 90))
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "altitude %g must be in (0, 90] degrees", altitude);
  REQUIRE(ctx, dsm, ACCEL_ERR_INVALID_ARG, "dsm is NULL");
  REQUIRE(ctx, sh, ACCEL_ERR_INVALID_ARG, "sh is NULL");
  if (tdsm && !cdsm) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "a TDSM without a CDSM");
  int64_t rows, cols;
  const accel_array *ins[3] = {dsm, cdsm, tdsm};
  const accel_array *outs[3] = {sh, vegsh, vbshvegsh};
  static const char *const out_names[3] = {"sh", "vegsh", "vbshvegsh"};
  dev_arg dev[6];
  memset(dev, 0, sizeof dev);
  s = check_grid(ctx, __func__, "dsm", dsm, ACCEL_DTYPE_F32, &rows, &cols, true, &dev[0]);
  if (!s && cdsm) s = check_grid(ctx, __func__, "cdsm", cdsm, ACCEL_DTYPE_F32, &rows, &cols, false, &dev[1]);
  if (!s && tdsm) s = check_grid(ctx, __func__, "tdsm", tdsm, ACCEL_DTYPE_F32, &rows, &cols, false, &dev[2]);
  for (int i = 0; i < 3 && !s; i++)
    if (outs[i]) {
      s = check_grid(ctx, __func__, out_names[i], outs[i], ACCEL_DTYPE_F32, &rows, &cols, false, &dev[3 + i]);
      if (!s) s = check_out_overlap(ctx, __func__, out_names[i], outs[i], ins, 3);
      if (!s) s = check_out_overlap(ctx, __func__, out_names[i], outs[i], outs, i);
    }
  if (s) return s;

  accel__view v[3];
  for (int i = 0; i < 3; i++) v[i] = (accel__view)ACCEL__OUT(out_names[i], outs[i]);
  accel__svf_job job = {.stage = "svf.shadows", .shadows = true};
  return run_stage(ctx, __func__, ins, &o, azimuth, altitude, rows, cols, &job, v, 3, dev);
}

accel_status accel_svf_sky(accel_ctx *ctx, const accel_array *dsm, const accel_array *cdsm, const accel_array *tdsm,
                           const accel_svf_options *options, const accel_array *const *grids,
                           const accel_array *const *matrices) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_svf_options o;
  accel_status s = check_options(ctx, __func__, options, &o);
  if (s) return s;
  const int32_t npatch = accel__svf_patch_count(o.patches);
  REQUIRE(ctx, npatch, ACCEL_ERR_INVALID_ARG, "patches %d: UMEP's options are 145, 153, 306 and 612", (int)o.patches);
  REQUIRE(ctx, dsm, ACCEL_ERR_INVALID_ARG, "dsm is NULL");
  if (tdsm && !cdsm) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "a TDSM without a CDSM");
  int64_t rows, cols;
  dev_arg dev[3 + ACCEL_SVF_GRIDS + ACCEL_SVF_MATRICES];
  memset(dev, 0, sizeof dev);
  s = check_grid(ctx, __func__, "dsm", dsm, ACCEL_DTYPE_F32, &rows, &cols, true, &dev[0]);
  if (!s && cdsm) s = check_grid(ctx, __func__, "cdsm", cdsm, ACCEL_DTYPE_F32, &rows, &cols, false, &dev[1]);
  if (!s && tdsm) s = check_grid(ctx, __func__, "tdsm", tdsm, ACCEL_DTYPE_F32, &rows, &cols, false, &dev[2]);
  if (s) return s;
  int64_t mat_bytes = 0; /* the first matrix's layout: ceil(P / 8) packed, P unpacked */
  const accel_array *all[3 + ACCEL_SVF_GRIDS + ACCEL_SVF_MATRICES] = {dsm, cdsm, tdsm};
  int nall = 3, wanted = 0;
  for (int g = 0; g < ACCEL_SVF_GRIDS && grids; g++) {
    const accel_array *a = grids[g];
    if (!a) continue;
    if (g >= ACCEL_SVF_VEG && !cdsm)
      return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "grid %s needs a CDSM (vegetation)", grid_names[g]);
    if ((s = check_grid(ctx, __func__, grid_names[g], a, ACCEL_DTYPE_F32, &rows, &cols, false, &dev[3 + g]))) return s;
    if ((s = check_out_overlap(ctx, __func__, grid_names[g], a, all, nall))) return s;
    all[nall++] = a;
    wanted++;
  }
  static const char *const mat_names[3] = {"the sh matrix", "the vegsh matrix", "the vbshvegsh matrix"};
  for (int m = 0; m < ACCEL_SVF_MATRICES && matrices; m++) {
    const accel_array *a = matrices[m];
    if (!a) continue;
    if (m > 0 && !cdsm) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "%s needs a CDSM (vegetation)", mat_names[m]);
    dev_arg *d = &dev[3 + ACCEL_SVF_GRIDS + m];
    if ((s = accel__array_accept(ctx, __func__, mat_names[m], matrices[m], &d->plain, &a, &d->on))) return s;
    if (!d->on && (s = accel__array_check(ctx, __func__, mat_names[m], a))) return s;
    const int64_t packed = (npatch + 7) / 8;
    if (a->ndim != 3 || a->dtype != ACCEL_DTYPE_U8 || a->shape[0] != rows || a->shape[1] != cols ||
        (a->shape[2] != packed && a->shape[2] != npatch))
      return FAIL(ctx, ACCEL_ERR_INVALID_ARG,
                  "%s must be U8 (%lld, %lld, %lld) bit-packed or (%lld, %lld, %d) a byte a patch, for %d patches",
                  mat_names[m], (long long)rows, (long long)cols, (long long)packed, (long long)rows, (long long)cols,
                  (int)npatch, (int)npatch);
    if (mat_bytes && a->shape[2] != mat_bytes)
      return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "%s is %s, an earlier matrix %s: one layout for all", mat_names[m],
                  a->shape[2] == npatch ? "a byte a patch" : "bit-packed",
                  mat_bytes == npatch ? "a byte a patch" : "bit-packed");
    mat_bytes = a->shape[2];
    if ((s = check_out_overlap(ctx, __func__, mat_names[m], a, all, nall))) return s;
    all[nall++] = a;
    wanted++;
  }
  REQUIRE(ctx, wanted, ACCEL_ERR_INVALID_ARG, "no output asked for");

  accel__view v[ACCEL_SVF_GRIDS + ACCEL_SVF_MATRICES];
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) v[g] = (accel__view)ACCEL__OUT(grid_names[g], grids ? grids[g] : NULL);
  for (int m = 0; m < ACCEL_SVF_MATRICES; m++)
    v[ACCEL_SVF_GRIDS + m] = (accel__view)ACCEL__OUT(mat_names[m], matrices ? matrices[m] : NULL);
  accel__svf_job job = {.stage = "svf.sky", .mat_bytes = mat_bytes, .unpacked = mat_bytes == npatch};
  return run_stage(ctx, __func__, all, &o, 0, 0, rows, cols, &job, v, ACCEL_SVF_GRIDS + ACCEL_SVF_MATRICES, dev);
}

/* ------------------------------------------------------------ halo */

accel_status accel_svf_halo(const accel_svf_options *options, int64_t rows, int64_t cols, double lowest, double highest,
                            const double *sun, int64_t *halo_rows, int64_t *halo_cols) {
  accel_svf_options o;
  accel_status s = check_options(NULL, __func__, options, &o);
  if (s) return s;
  REQUIRE(NULL, halo_rows && halo_cols, ACCEL_ERR_INVALID_ARG, "halo_rows or halo_cols is NULL");
  if (rows < 1 || cols < 1)
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "a grid of %lld x %lld cells is empty", (long long)rows, (long long)cols);
  if (rows > INT32_MAX / 2 || cols > INT32_MAX / 2)
    return FAIL(NULL, ACCEL_ERR_LIMIT, "a grid of %lld x %lld cells; at most %d per side", (long long)rows,
                (long long)cols, INT32_MAX / 2);
  if (!isfinite(lowest) || !isfinite(highest) || highest < lowest)
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "lowest %g and highest %g must be finite, lowest <= highest", lowest,
                highest);
  if (sun && !(sun[0] >= 0 && sun[0] <= 360))
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "azimuth %g must be in [0, 360] degrees (clockwise from north)", sun[0]);
  if (sun && !(sun[1] > 0 && sun[1] <= 90))
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "altitude %g must be in (0, 90] degrees", sun[1]);
  if (!sun && accel__svf_patch_count(o.patches) <= 0)
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "patches %d: UMEP's options are 145, 153, 306 and 612", (int)o.patches);
  const double amax = o.max_height > 0 ? o.max_height : highest;
  accel__svf_plan *plan = sun ? accel__svf_plan_sun(sun[0], sun[1], rows, cols, amax, o.pixel_size)
                              : accel__svf_plan_sky(o.patches, rows, cols, amax, o.pixel_size);
  if (!plan) return FAIL(NULL, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for the ray steps");
  accel__svf_plan_halo(plan, highest, lowest);
  *halo_rows = plan->halo_rows;
  *halo_cols = plan->halo_cols;
  accel__svf_plan_free(plan);
  return ACCEL_OK;
}
