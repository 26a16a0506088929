/* Registration: options, presets, argument checks, the pyramid and the
 * levels, dispatch.
 *
 * The levels (l = 0 the coarsest, f = 2^(levels - 1 - l)): the fixed and
 * the moving image are smoothed with a Gaussian of sigma 0.5 f (elastix's
 * default schedule) and, with `downsample`, sampled every f pixels from
 * offset (f - 1) / 2, so level pixel i stands for the full-resolution
 * point f i + offset; without it the level keeps the full size (f = 1 in
 * the frame). With `downsample` the finest level is not smoothed at all:
 * sigma 0.5 blurs fine texture (the 7 px weave of the test scenes) enough
 * to cost a sixth of the field accuracy, and at 300 MP it is the
 * pyramid's largest pass. The moving level image is turned into cubic
 * B-spline coefficients (the pyramid job's `coefficients`). The mask is
 * point-sampled the same way.
 *
 * options->prealign: prealign() below runs the FFT pre-alignment on the
 * coarsest level and sets r->t's linear part. The control grid of
 * level l has spacing grid_spacing * 2^(levels - 1 - l), its nodes on the
 * final grid's nodes (accel_reg_grid_for, elastix's layout), extended to
 * cover the image; the result of a level is carried to the next exactly by
 * B-spline subdivision (1/8 [1 4 6 4 1] per axis). */
#include "reg/cpu.h"
#include "reg/level_cell.h"
#include "reg/ops.h"
#include "reg/prealign.h"
#include "reg/transform.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The first released sizes of the option structs. */
#define REG_OPTIONS_V1 sizeof(accel_reg_options)
#define REG_REPORT_V1 sizeof(accel_reg_report)

static const accel_reg_options DEFAULTS = {
    .levels = 0,
    .grid_spacing = 64.0,
    .downsample = 1,
    .iterations = 500,
    .samples = 5000,
    .renew_samples = 1,
    .seed = 1,
    .metric = ACCEL_REG_METRIC_MSE,
    .optimizer = ACCEL_REG_OPTIMIZER_GAUSS_NEWTON,
    .tolerance = 1e-3,
    .window = 3,
    .validation_samples = 20000,
};

accel_status accel_reg_options_init(accel_reg_options *o, size_t struct_size) {
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, REG_OPTIONS_V1);
}

accel_status accel_reg_report_init(accel_reg_report *r, size_t struct_size) {
  static const accel_reg_report EMPTY = {0};
  return accel__versioned_init(__func__, r, struct_size, &EMPTY, sizeof EMPTY, REG_REPORT_V1);
}

accel_status accel_reg_options_preset(accel_reg_options *o, const char *name) {
  if (!o || !name || o->struct_size < REG_OPTIONS_V1) return ACCEL_ERR_INVALID_ARG;
  accel_reg_options p = DEFAULTS;
  if (!strcmp(name, "elastix")) {
    p.levels = 4;
    p.downsample = 0;
    p.optimizer = ACCEL_REG_OPTIMIZER_ASGD;
    p.tolerance = 0;
  } else if (strcmp(name, "default") != 0) {
    return ACCEL_ERR_NOT_FOUND;
  }
  p.struct_size = o->struct_size;
  p.progress = o->progress;
  p.progress_user = o->progress_user;
  memcpy(o, &p, sizeof p);
  return ACCEL_OK;
}

int32_t accel_reg_levels_for(const accel_reg_options *o, int64_t width, int64_t height) {
  if (o && o->struct_size >= REG_OPTIONS_V1 && o->levels != 0) return o->levels;
  return (width < height ? width : height) >= 2048 ? 5 : 4;
}

/* ------------------------------------------------------------ checks */

ACCEL__STAGE_FN(run_finite, reg, finite, job)

accel_status accel__reg_device_nonfinite(accel_ctx *ctx, const accel_array *a, int64_t *bad) {
  accel_array copy = *a;
  accel__reg_finite_job job = {&copy, 1, -1};
  const accel__device_slot slot = {
      .ptr = &copy.data, .bytes = (size_t)(a->shape[0] * a->shape[1]) * sizeof(float), .in = true};
  accel_status s = accel__dispatch_device(ctx, "reg.check", run_finite, &job, &slot, 1);
  *bad = job.bad;
  return s;
}

/* Whether every pixel of a host image (inside the mask m, when not NULL)
 * holds the first one's bits; false when the mask holds none. Reads up to
 * the first that differs: a pixel or a row into any textured image. */
static bool constant(const accel_array *a, const accel_array *m) {
  const size_t k = accel_dtype_size(a->dtype);
  const char *first = NULL;
  for (int64_t r = 0; r < a->shape[0]; r++) {
    const char *row = (const char *)a->data + r * a->strides[0];
    const char *mrow = m ? (const char *)m->data + r * m->strides[0] : NULL;
    for (int64_t c = 0; c < a->shape[1]; c++) {
      if (mrow && !mrow[c * m->strides[1]]) continue;
      const char *p = row + c * a->strides[1];
      if (!first) first = p;
      else if (memcmp(p, first, k)) return false;
    }
  }
  return first != NULL;
}

/* One image of accel_reg_register: a host array, or a device array (on a
 * CUDA context) described in *plain with *device set; *use is the one to
 * read. */
static accel_status check_image(accel_ctx *ctx, const char *func, const char *what, const accel_array *in,
                                accel_array *plain, const accel_array **use, bool *device) {
  accel_status s = accel__array_accept(ctx, func, what, in, plain, use, device);
  if (!s && !*device) s = accel__array_check(ctx, func, what, in);
  if (s) return s;
  const accel_array *a = *use;
  if (a->ndim != 2)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be a 2-D image (rows, cols), not %d-D", what,
                          (int)a->ndim);
  if (a->dtype != ACCEL_DTYPE_U8 && a->dtype != ACCEL_DTYPE_U16 && a->dtype != ACCEL_DTYPE_F32)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be U8, U16 or F32, not %s", what,
                          accel__dtype_name(a->dtype));
  if (a->shape[0] < 2 || a->shape[1] < 2)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "%s is %lld x %lld pixels: registration needs at least 2 along each axis", what,
                          (long long)a->shape[0], (long long)a->shape[1]);
  if (a->shape[0] > INT32_MAX || a->shape[1] > INT32_MAX ||
      (uint64_t)a->shape[0] * (uint64_t)a->shape[1] > accel__ctx_max_pixels(ctx))
    return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "%s has %lld x %lld pixels, over the context's limit", what,
                          (long long)a->shape[0], (long long)a->shape[1]);
  if (a->dtype == ACCEL_DTYPE_F32) {
    int64_t bad = -1;
    if (*device) s = accel__reg_device_nonfinite(ctx, a, &bad);
    else bad = accel__reg_first_nonfinite(a, accel__ctx_threads(ctx));
    if (s) return s;
    const int64_t w = a->shape[1];
    if (bad >= 0)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s[%lld, %lld] is not finite", what,
                            (long long)(bad / w), (long long)(bad % w));
  }
  if (!*device && constant(a, NULL)) /* host images only: a device one would be read back for it */
    accel__log(ctx, ACCEL_LOG_WARN,
               "accel: %s: the %s image is constant: nothing to register on (with mse the result follows the "
               "other image's values alone; with ncc it stays where it starts)",
               func, what);
  return ACCEL_OK;
}

static accel_status check_options(accel_ctx *ctx, const char *func, const accel_reg_options *in, accel_reg_options *o) {
  accel_reg_options_init(o, sizeof *o);
  accel_status s;
  if (in && (s = accel__versioned_in(ctx, func, "options", in, o, sizeof *o, REG_OPTIONS_V1))) return s;
#define CHECK(cond, ...) REQUIRE_IN(ctx, func, cond, ACCEL_ERR_INVALID_ARG, __VA_ARGS__)
  CHECK(o->levels >= 0 && o->levels <= 8, "levels %d: 1 to 8, or 0 (automatic)", (int)o->levels);
  /* beyond about 1e15 the sample positions lose their cells in double
   * precision; any grid of more than 1e12 pixels is one cell anyway */
  CHECK(o->grid_spacing > 0 && o->grid_spacing <= 1e12, "grid_spacing %g: above 0 and at most 1e12 pixels",
        o->grid_spacing);
  CHECK(o->downsample == 0 || o->downsample == 1, "downsample %d: 0 or 1", (int)o->downsample);
  CHECK(o->iterations >= 1 && o->iterations <= 1000000, "iterations %d: 1 to 1000000", (int)o->iterations);
  CHECK(o->samples >= 0, "samples %lld < 0", (long long)o->samples);
  CHECK(o->renew_samples == 0 || o->renew_samples == 1, "renew_samples %d: 0 or 1", (int)o->renew_samples);
  CHECK(o->metric == ACCEL_REG_METRIC_MSE || o->metric == ACCEL_REG_METRIC_NCC, "unknown metric %d", (int)o->metric);
  CHECK(o->optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON || o->optimizer == ACCEL_REG_OPTIMIZER_ASGD,
        "unknown optimizer %d", (int)o->optimizer);
  CHECK(o->bending_weight >= 0 && isfinite(o->bending_weight), "bending_weight %g must be >= 0", o->bending_weight);
  CHECK(o->tolerance >= 0 && o->tolerance < 1, "tolerance %g: 0 (off) to below 1", o->tolerance);
  CHECK(o->window >= 1 && o->window <= 100000, "window %d: 1 to 100000", (int)o->window);
  CHECK(o->validation_samples >= 0, "validation_samples %lld < 0", (long long)o->validation_samples);
  /* Gauss-Newton's steps judged on the training samples that made them are
   * all taken: the 1024^2 shared pair then ends 0.24 px off on average
   * (0.038 px with the validation set). */
  CHECK(o->validation_samples > 0 || o->optimizer != ACCEL_REG_OPTIMIZER_GAUSS_NEWTON,
        "validation_samples 0 (no validation set) is for the ASGD optimizer: Gauss-Newton takes a step only where the "
        "objective on the validation samples falls");
  CHECK(o->prealign >= 0 && o->prealign <= 2, "prealign %d: 0, 1 or 2", (int)o->prealign);
#undef CHECK
  return ACCEL_OK;
}

static int64_t mask_count(const accel_array *m) {
  int64_t n = 0;
#pragma omp parallel for reduction(+ : n) schedule(static)
  for (int64_t r = 0; r < m->shape[0]; r++) {
    const char *row = (const char *)m->data + r * m->strides[0];
    for (int64_t c = 0; c < m->shape[1]; c++) n += row[c * m->strides[1]] != 0;
  }
  return n;
}

/* ------------------------------------------------------------ levels and grids */

typedef struct frame {
  int32_t factor, offset; /* of the level images */
  double sigma;
  int64_t fw, fh, mw, mh;
} frame;

static int64_t level_size(int64_t n, int32_t f, int32_t off) { return (n - 1 - off) / f + 1; }

static void level_frame(const accel_reg_options *o, int32_t l, int64_t W, int64_t H, int64_t MW, int64_t MH,
                        frame *fr) {
  const int32_t f = 1 << (o->levels - 1 - l);
  fr->sigma = f == 1 && o->downsample ? 0.0 : 0.5 * f;
  fr->factor = o->downsample ? f : 1;
  int64_t off = (fr->factor - 1) / 2, least = W < H ? W : H;
  least = MW < least ? MW : least;
  least = MH < least ? MH : least;
  fr->offset = (int32_t)(off < least - 1 ? off : least - 1);
  fr->fw = level_size(W, fr->factor, fr->offset), fr->fh = level_size(H, fr->factor, fr->offset);
  fr->mw = level_size(MW, fr->factor, fr->offset), fr->mh = level_size(MH, fr->factor, fr->offset);
}

/* A level grid: nodes m0 .. m1 at final origin + m spacing. */
typedef struct lgrid {
  int64_t m0[2], m1[2];
  double spacing;
} lgrid;

/* The grids of all levels, finest first: the final grid, then each coarser
 * one the least that refines exactly to the next and covers the image. */
static void level_grids(const accel_reg_grid *final, int32_t levels, lgrid *g) {
  for (int d = 0; d < 2; d++) {
    g[levels - 1].m0[d] = 0, g[levels - 1].m1[d] = final->size[d] - 1;
  }
  g[levels - 1].spacing = final->spacing[0];
  for (int32_t l = levels - 2; l >= 0; l--) {
    g[l].spacing = g[l + 1].spacing * 2;
    for (int d = 0; d < 2; d++) {
      const int64_t n0 = g[l + 1].m0[d], n1 = g[l + 1].m1[d];
      int64_t m0 = (int64_t)floor((double)(n0 - 1) / 2), m1 = (int64_t)floor((double)(n1 + 2) / 2);
      const int64_t c0 = (int64_t)floor((0 - final->origin[d]) / g[l].spacing) - 1;
      const int64_t c1 = (int64_t)floor(((double)(final->image_size[d] - 1) - final->origin[d]) / g[l].spacing) + 2;
      g[l].m0[d] = m0 < c0 ? m0 : c0;
      g[l].m1[d] = m1 > c1 ? m1 : c1;
    }
  }
}

static void grid_xform(const accel_reg_grid *final, const lgrid *g, const accel_reg_transform *t, accel__reg_xform *x) {
  accel__reg_xform_of(t, x);
  x->nx = g->m1[0] - g->m0[0] + 1;
  x->ny = g->m1[1] - g->m0[1] + 1;
  for (int d = 0; d < 2; d++) {
    x->spacing[d] = g->spacing;
    x->origin[d] = final->origin[d] + (double)g->m0[d] * g->spacing;
  }
}

/* One axis of the subdivision: fine node n (n0 + k, stride fs) from the
 * coarse nodes m (m0 + j, stride cs). */
static void refine_line(const double *c, int64_t m0, int64_t cn, int64_t cs, double *d, int64_t n0, int64_t fn,
                        int64_t fs) {
  for (int64_t k = 0; k < fn; k++) {
    const int64_t n = n0 + k, m = (int64_t)floor((double)n / 2);
#define C(j) ((j)-m0 >= 0 && (j)-m0 < cn ? c[((j)-m0) * cs] : 0.0)
    d[k * fs] = (n & 1) ? (C(m) + C(m + 1)) / 2 : (C(m - 1) + 6 * C(m) + C(m + 1)) / 8;
#undef C
  }
}

/* Coarse parameters (grid gc) to the next finer grid gf: x, then y
 * displacements, each refined along x, then along y. */
static bool refine(const lgrid *gc, const double *c, const lgrid *gf, double *f) {
  const int64_t cnx = gc->m1[0] - gc->m0[0] + 1, cny = gc->m1[1] - gc->m0[1] + 1;
  const int64_t fnx = gf->m1[0] - gf->m0[0] + 1, fny = gf->m1[1] - gf->m0[1] + 1;
  double *mid = malloc(sizeof(double) * (size_t)(fnx * cny));
  if (!mid) return false;
  for (int comp = 0; comp < 2; comp++) {
    const double *cc = c + comp * cnx * cny;
    for (int64_t j = 0; j < cny; j++) refine_line(cc + j * cnx, gc->m0[0], cnx, 1, mid + j * fnx, gf->m0[0], fnx, 1);
    double *ff = f + comp * fnx * fny;
    for (int64_t i = 0; i < fnx; i++) refine_line(mid + i, gc->m0[1], cny, fnx, ff + i, gf->m0[1], fny, fnx);
  }
  free(mid);
  return true;
}

/* ------------------------------------------------------------ dispatch */

ACCEL__STAGE_FN(run_pyramid, reg, pyramid, job)
ACCEL__STAGE_FN(run_level, reg, level, job)
ACCEL__STAGE_FN(run_hold, reg, hold, job)

/* The dispatcher's slot for a 2-D device input `a` (a copy of the
 * caller's descriptor): a CPU run reads a host copy of it. */
static accel__device_slot input_slot(accel_array *a) {
  return (accel__device_slot){
      .ptr = &a->data, .bytes = (size_t)(a->shape[0] * a->shape[1]) * accel_dtype_size(a->dtype), .in = true};
}

/* One pyramid job; a device image read in place by the GPU (a CPU run
 * gets a host copy of it). */
static accel_status pyramid(accel_ctx *ctx, accel__reg_pyramid_job *job, bool device) {
  if (!device) return accel__dispatch(ctx, "reg.pyramid", run_pyramid, job);
  accel_array copy = *job->in;
  const accel_array *in = job->in;
  const accel__device_slot slot = input_slot(&copy);
  job->in = &copy;
  job->in_device = 1;
  const accel_status s = accel__dispatch_device(ctx, "reg.pyramid", run_pyramid, job, &slot, 1);
  job->in = in;
  return s;
}

/* The level mask: the mask's pixel at each level pixel's point. */
static uint8_t *level_mask(const accel_array *m, const frame *fr) {
  uint8_t *out = malloc((size_t)(fr->fw * fr->fh));
  if (!out) return NULL;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < fr->fh; i++) {
    const char *row = (const char *)m->data + (fr->offset + fr->factor * i) * m->strides[0];
    for (int64_t j = 0; j < fr->fw; j++) out[i * fr->fw + j] = row[(fr->offset + fr->factor * j) * m->strides[1]] != 0;
  }
  return out;
}

typedef struct reg_run {
  accel_ctx *ctx;
  const accel_array *fixed, *moving, *mask;
  bool fixed_dev, moving_dev; /* fixed, moving are device arrays (plain dtypes) */
  const accel_reg_options *o;
  accel_reg_transform *t; /* the result: its linear part set, final grid */
  accel__reg_xform base;  /* the initial B-spline part on the final grid (params NULL: none) */
  lgrid grids[8];
  double *params[8];
  float *images;            /* every level's images (fixed_offset): one allocation, reused by every level */
  accel__reg_hold_job hold; /* the host inputs' device copies (GPU; held NULL: none) */
  accel_reg_report report;
} reg_run;

/* The coarse pre-alignment (options->prealign, lib/reg/prealign.h): the
 * coarsest level's fixed image and the moving image at the same level (not
 * its B-spline coefficients, which the level keeps) give a translation or a
 * rigid transform about the fixed image's centre, which becomes r->t's
 * linear part (an EulerTransform or TranslationTransform when saved). */
static accel_status prealign(reg_run *r, const float *fixed, const frame *fr) {
  const char *func = "accel_reg_register";
  float *moving = malloc((size_t)(fr->mw * fr->mh) * sizeof(float));
  if (!moving) return accel__fail_in(r->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for the pre-alignment");
  accel__reg_pyramid_job pm = {r->moving, fr->sigma, fr->factor, fr->offset, moving,
                               fr->mw,    fr->mh,    0,          0,          r->hold.held[1]};
  accel_status s = pyramid(r->ctx, &pm, r->moving_dev);
  const double centre[2] = {(double)(r->fixed->shape[1] - 1) / 2.0, (double)(r->fixed->shape[0] - 1) / 2.0};
  double pa[3];
  if (!s)
    s = accel__reg_prealign(r->ctx, func, fixed, fr->fw, fr->fh, moving, fr->mw, fr->mh, fr->factor, fr->offset,
                            r->o->prealign, centre, pa);
  free(moving);
  if (s) return s;
  accel__log(r->ctx, ACCEL_LOG_INFO, "reg: pre-alignment angle %.4f deg, shift %.3f %.3f px", pa[0] * 180.0 / M_PI,
             pa[1], pa[2]);
  return r->o->prealign == 1 ? accel_reg_transform_set_initial(r->ctx, r->t, ACCEL_REG_LINEAR_TRANSLATION, pa + 1, NULL)
                             : accel_reg_transform_set_initial(r->ctx, r->t, ACCEL_REG_LINEAR_RIGID, pa, centre);
}

/* Whether a level's fixed image is the caller's own: unsmoothed, not
 * downsampled, float32 with packed rows (the pyramid would copy it
 * unchanged; at the finest level of a large image the copy is a second
 * image's memory to fault in). */
static bool fixed_in_place(const accel_array *fixed, const frame *fr) {
  return fr->sigma == 0 && fr->factor == 1 && fr->offset == 0 && fixed->dtype == ACCEL_DTYPE_F32 &&
         fixed->strides[1] == (int64_t)sizeof(float) && fixed->strides[0] == fixed->shape[1] * (int64_t)sizeof(float);
}

/* Where a level's images lie in reg_run's images: the moving image's
 * B-spline coefficients first, the fixed image after them (from a multiple
 * of 64 bytes). Every level starts at the same address, so the pages a
 * coarser level touched serve the finer ones: at the finest level of a
 * 300 MP pair whose fixed image is read in place, the coefficients reuse
 * the pages of the level before's two images (two buffers would have
 * 0.3 GB more to fault in). */
static int64_t fixed_offset(const frame *fr) { return (fr->mw * fr->mh + 15) / 16 * 16; }

/* The floats of the images of level l; direct: its fixed image is the
 * caller's (none made on the host). */
static int64_t level_floats(const frame *fr, bool direct) { return fixed_offset(fr) + (direct ? 0 : fr->fw * fr->fh); }

static accel_status one_level(reg_run *r, int32_t l) {
  const char *func = "accel_reg_register";
  frame fr;
  level_frame(r->o, l, r->fixed->shape[1], r->fixed->shape[0], r->moving->shape[1], r->moving->shape[0], &fr);
  const bool direct = !r->fixed_dev && fixed_in_place(r->fixed, &fr);
  float *fimg = direct ? (float *)r->fixed->data : r->images + fixed_offset(&fr), *mimg = r->images;
  uint8_t *mask = r->mask ? level_mask(r->mask, &fr) : NULL;
  accel_status s = ACCEL_OK;
  if (r->mask && !mask)
    s = accel__fail_in(r->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for level %d's mask", (int)l);
  /* The level stage makes its own images (on a GPU, in device memory: they
   * never come back to the host), but for the pre-alignment, which reads
   * the coarsest level's fixed image on the host before it. */
  const bool made = l == 0 && r->o->prealign;
  const double t0 = accel__now();
  accel_array fixed_in = *r->fixed, moving_in = *r->moving; /* the device inputs' host copies in a CPU run */
  accel__reg_pyramid_job pf = {&fixed_in, fr.sigma, fr.factor, fr.offset,    fimg,
                               fr.fw,     fr.fh,    0,         r->fixed_dev, r->hold.held[0]};
  accel__reg_pyramid_job pm = {&moving_in, fr.sigma, fr.factor, fr.offset,     mimg,
                               fr.mw,      fr.mh,    1,         r->moving_dev, r->hold.held[1]};
  if (made) {
    if (!s && !direct) s = pyramid(r->ctx, &pf, r->fixed_dev);
    if (!s) s = pyramid(r->ctx, &pm, r->moving_dev);
    if (!s) s = prealign(r, fimg, &fr);
  }
  const lgrid *g = &r->grids[l];
  const int64_t n = (g->m1[0] - g->m0[0] + 1) * (g->m1[1] - g->m0[1] + 1);
  if (!s && !(r->params[l] = calloc((size_t)(2 * n), sizeof(double))))
    s = accel__fail_in(r->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for level %d's grid", (int)l);
  if (!s && l > 0 && !refine(&r->grids[l - 1], r->params[l - 1], g, r->params[l]))
    s = accel__fail_in(r->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory refining the grid of level %d", (int)l);
  accel__reg_level_job job;
  memset(&job, 0, sizeof job);
  job.fixed = fimg, job.fixed_width = fr.fw, job.fixed_height = fr.fh;
  job.moving = mimg, job.moving_width = fr.mw, job.moving_height = fr.mh;
  job.mask = mask, job.factor = fr.factor, job.offset = fr.offset, job.level = l;
  if (!s) {
    const bool last = l == r->o->levels - 1;
    if (last && r->base.params)
      for (int64_t k = 0; k < 2 * n; k++) r->params[l][k] += r->base.params[k];
    grid_xform(&r->t->grid, g, r->t, &job.xf);
    job.xf.params = job.params = r->params[l];
    job.base = r->base;
    if (last) job.base.params = NULL;
    job.options = r->o;
    job.report = &r->report.level[l];
    job.make[0] = made || direct ? NULL : &pf;
    job.make[1] = made ? NULL : &pm;
    job.fixed_resident = direct ? r->hold.held[0] : NULL;
    accel__device_slot slots[2];
    int ns = 0;
    for (int k = 0; k < 2; k++)
      if (job.make[k] && job.make[k]->in_device) slots[ns++] = input_slot(k ? &moving_in : &fixed_in);
    s = accel__dispatch_device(r->ctx, "reg.level", run_level, &job, slots, ns);
    r->report.level[l].seconds = accel__now() - t0;
  }
  free(mask);
  return s;
}

/* On a GPU, the host inputs copied to the device once for every level
 * (stage reg.hold), when they fit the budget beside what the finest level
 * (frame fr) needs there: its images (where its fixed image is the input
 * itself, the next level's fixed image instead), mask, cells' terms and
 * node arrays, and 64 MiB for the pyramid's bands. Otherwise (also when
 * the device has less free memory than the budget says), or after a GPU
 * failure (the CPU fallback holds nothing), each level uploads the input
 * rows it reads. A single level reads each input once anyway. */
static accel_status hold_inputs(reg_run *r, const frame *fr, const frame *coarser) {
  r->hold.in[0] = r->fixed_dev ? NULL : r->fixed;
  r->hold.in[1] = r->moving_dev ? NULL : r->moving;
  if (!accel__ctx_on_gpu(r->ctx) || r->o->levels < 2 || (!r->hold.in[0] && !r->hold.in[1])) return ACCEL_OK;
  const lgrid *g = &r->grids[r->o->levels - 1];
  const uint64_t nodes = (uint64_t)((g->m1[0] - g->m0[0] + 1) * (g->m1[1] - g->m0[1] + 1));
  const uint64_t fpx = (uint64_t)(fr->fw * fr->fh), mpx = (uint64_t)(fr->mw * fr->mh);
  /* where the finest fixed image is the input itself, the next level's is
   * the largest fixed image a level makes */
  const uint64_t own = !r->fixed_dev && fixed_in_place(r->fixed, fr) ? (uint64_t)(coarser->fw * coarser->fh) : fpx;
  r->hold.need = 4 * own + 4 * mpx + (r->mask ? fpx : 0) +
                 nodes * (sizeof(accel__reg_cell_acc) + sizeof(double) * (ACCEL__REG_SUMS + 8 + ACCEL__REG_NB3)) +
                 ((uint64_t)64 << 20);
  return accel__dispatch(r->ctx, "reg.hold", run_hold, &r->hold);
}

/* The held inputs given back (whatever the registration's outcome). */
static void release_inputs(reg_run *r) {
  if (!r->hold.held[0] && !r->hold.held[1]) return;
  r->hold.release = 1;
  (void)accel__dispatch(r->ctx, "reg.hold", run_hold, &r->hold);
  r->hold.held[0] = r->hold.held[1] = NULL;
}

static accel_status check_initial(accel_ctx *ctx, const accel_reg_transform *in, const accel_reg_grid *final,
                                  reg_run *r) {
  const char *func = "accel_reg_register";
  if (!in) return ACCEL_OK;
  if (r->o->prealign && in->kind != ACCEL_REG_LINEAR_NONE)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "prealign %d and an initial transform with a linear part exclude each other",
                          (int)r->o->prealign);
  if (in->grid.image_size[0] != final->image_size[0] || in->grid.image_size[1] != final->image_size[1])
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "the initial transform is over a %lld x %lld image (rows x columns), the fixed image is "
                          "%lld x %lld",
                          (long long)in->grid.image_size[1], (long long)in->grid.image_size[0],
                          (long long) final->image_size[1], (long long) final->image_size[0]);
  accel_status s = accel_reg_transform_set_initial(ctx, r->t, in->kind, in->linear, in->centre);
  if (s) return s;
  bool same = in->grid.size[0] == final->size[0] && in->grid.size[1] == final->size[1];
  for (int d = 0; d < 2; d++)
    same = same && fabs(in->grid.spacing[d] - final->spacing[d]) < 1e-9 * final->spacing[d] &&
           fabs(in->grid.origin[d] - final->origin[d]) < 1e-9 * final->spacing[d];
  bool any = false;
  for (int64_t k = 0; k < accel_reg_transform_count(in); k++) any = any || in->params[k] != 0;
  /* a B-spline part on another grid was dropped without a word (its linear
   * part kept): the final grid cannot hold it exactly */
  if (any && !same)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "the initial transform's B-spline part is on another grid (%lld x %lld nodes, spacing %g "
                          "x %g) than the registration's final grid (%lld x %lld nodes, spacing %g x %g): register "
                          "with its grid spacing, or give an initial transform without a B-spline part",
                          (long long)in->grid.size[0], (long long)in->grid.size[1], in->grid.spacing[0],
                          in->grid.spacing[1], (long long) final->size[0], (long long) final->size[1],
                          final->spacing[0], final->spacing[1]);
  if (any) accel__reg_xform_of(in, &r->base);
  return ACCEL_OK;
}

accel_status accel_reg_register(accel_ctx *ctx, const accel_array *fixed, const accel_array *moving,
                                const accel_array *fixed_mask, const accel_reg_transform *initial,
                                const accel_reg_options *options, accel_reg_transform **out, accel_reg_report *report) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE(ctx, fixed, ACCEL_ERR_INVALID_ARG, "fixed is NULL");
  REQUIRE(ctx, moving, ACCEL_ERR_INVALID_ARG, "moving is NULL");
  accel_status s;
  accel_reg_options o;
  accel_array fixed_plain, moving_plain;
  bool fixed_dev = false, moving_dev = false;
  if ((s = check_image(ctx, __func__, "fixed", fixed, &fixed_plain, &fixed, &fixed_dev)) ||
      (s = check_image(ctx, __func__, "moving", moving, &moving_plain, &moving, &moving_dev)) ||
      (s = check_options(ctx, __func__, options, &o)))
    return s;
  REQUIRE(ctx, !report || report->struct_size >= REG_REPORT_V1, ACCEL_ERR_VERSION,
          "report->struct_size %u: call accel_reg_report_init first", report ? (unsigned)report->struct_size : 0u);
  const int64_t W = fixed->shape[1], H = fixed->shape[0];
  o.levels = accel_reg_levels_for(&o, W, H);
  accel_reg_grid final;
  accel_reg_grid_for(W, H, o.grid_spacing, &final);
  reg_run r;
  memset(&r, 0, sizeof r);
  r.ctx = ctx, r.fixed = fixed, r.moving = moving, r.mask = fixed_mask, r.o = &o;
  r.fixed_dev = fixed_dev, r.moving_dev = moving_dev;
  level_grids(&final, o.levels, r.grids);
  if (fixed_mask) {
    if ((s = accel__array_check(ctx, __func__, "fixed_mask", fixed_mask))) return s;
    REQUIRE(ctx, fixed_mask->dtype == ACCEL_DTYPE_U8 && fixed_mask->ndim == 2, ACCEL_ERR_INVALID_ARG,
            "fixed_mask must be a 2-D U8 array, not %d-D %s", (int)fixed_mask->ndim,
            accel__dtype_name(fixed_mask->dtype));
    REQUIRE(ctx, fixed_mask->shape[0] == H && fixed_mask->shape[1] == W, ACCEL_ERR_INVALID_ARG,
            "fixed_mask is %lld x %lld, the fixed image %lld x %lld", (long long)fixed_mask->shape[0],
            (long long)fixed_mask->shape[1], (long long)H, (long long)W);
    const int64_t nodes = (r.grids[0].m1[0] - r.grids[0].m0[0] + 1) * (r.grids[0].m1[1] - r.grids[0].m0[1] + 1);
    const int64_t inside = mask_count(fixed_mask);
    REQUIRE(ctx, inside >= 16 * nodes, ACCEL_ERR_INVALID_ARG,
            "fixed_mask has %lld nonzero pixels, fewer than 16 per node of the coarsest grid (%lld nodes)",
            (long long)inside, (long long)nodes);
    if (!fixed_dev && !constant(fixed, NULL) && constant(fixed, fixed_mask))
      accel__log(ctx, ACCEL_LOG_WARN,
                 "accel: %s: the fixed image is constant inside fixed_mask: nothing to register on (the levels "
                 "fit what their smoothing carries in from outside the mask)",
                 __func__);
  }
  if ((s = accel__reg_transform_new(ctx, __func__, &final, &r.t))) return s;
  if (!(s = check_initial(ctx, initial, &final, &r))) {
    const double t0 = accel__now();
    accel_reg_report_init(&r.report, sizeof r.report);
    r.report.levels = o.levels;
    /* One allocation serves every level's images (fixed_offset), so that
     * its memory is faulted in once. An 8- or 16-bit fixed image that the
     * CPU's finest level reads in place (cpu_level.c) leaves the end of
     * the finest level's part untouched, so never in memory; a GPU level or
     * an initial linear part needs it. */
    frame fr, ff;
    level_frame(&o, o.levels - 1, W, H, moving->shape[1], moving->shape[0], &fr);
    ff = fr;
    if (!fixed_dev && fixed_in_place(fixed, &fr)) { /* the largest fixed image a level makes */
      if (o.levels > 1) level_frame(&o, o.levels - 2, W, H, moving->shape[1], moving->shape[0], &ff);
      else ff.fw = ff.fh = 1;
    }
    int64_t floats = 0;
    for (int32_t l = 0; l < o.levels; l++) {
      frame f;
      level_frame(&o, l, W, H, moving->shape[1], moving->shape[0], &f);
      const int64_t k = level_floats(&f, !fixed_dev && fixed_in_place(fixed, &f));
      floats = k > floats ? k : floats;
    }
    r.images = malloc((size_t)floats * sizeof(float));
    if (!r.images)
      s = accel__fail_in(ctx, __func__, ACCEL_ERR_OUT_OF_MEMORY,
                         "out of memory for the level images (%lld floats, %.2f GB)", (long long)floats,
                         (double)floats * sizeof(float) / 1e9);
    if (!s) s = hold_inputs(&r, &fr, &ff);
    for (int32_t l = 0; l < o.levels && !s; l++) s = one_level(&r, l);
    release_inputs(&r);
    free(r.images);
    r.report.seconds = accel__now() - t0;
  }
  if (!s) memcpy(r.t->params, r.params[o.levels - 1], sizeof(double) * (size_t)accel_reg_transform_count(r.t));
  for (int32_t l = 0; l < o.levels; l++) free(r.params[l]);
  if (!s && report)
    s = accel__versioned_out(ctx, __func__, "report", report, &r.report, sizeof r.report, REG_REPORT_V1);
  if (s) {
    accel_reg_transform_destroy(r.t);
    return s;
  }
  *out = r.t;
  return ACCEL_OK;
}
