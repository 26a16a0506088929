/* suite_reg_gpu: the registration domain's CUDA ops, run in host emulation
 * (tests/emulated_gpu.h), against the CPU ops on the same jobs: the pyramid
 * (every dtype and layout, factors and offsets, whole and in bands), the
 * warp (linear and cubic, U8/U16/F32 in and out, 1, 3 and 4 channels, whole,
 * in tiles and with the source in bands from a small budget), a budget too
 * small for any tile (the fallback line, or the error under DENY), one
 * level's optimisation (both metrics and optimizers, with a mask: the CPU's
 * parameters to the bit), whole registrations (the CPU's transform to the
 * bit), and a failure at every CUDA call of each op
 * (emulated_fault_sweep). */
#include "emulated_gpu.h"
#include "testutil.h"

#include "core/internal.h"
#include "reg/ops.h"
#include "reg/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if EXPECT_CUDA
ACCEL__STAGE_FN(run_pyramid, reg, pyramid, job)
ACCEL__STAGE_FN(run_warp, reg, warp, job)
ACCEL__STAGE_FN(run_level, reg, level, job)

/* ---------------------------------------------------------------- images */

/* An image in one of three layouts: C order, rows padded (pitched copies),
 * every other pixel (packed on the host). */
enum { LAYOUT_DENSE, LAYOUT_PADDED, LAYOUT_GAPPED, LAYOUTS };
typedef struct image {
  uint8_t *mem;
  accel_array a;
} image;

static double pattern(int64_t r, int64_t c, int64_t k, uint32_t seed) {
  const double x = (double)c, y = (double)r;
  const double noise = (double)((((uint32_t)(r * 7919 + c * 104729 + k * 31) ^ seed) * 2654435761u) >> 24) / 255.0;
  return 0.5 + 0.3 * sin(0.21 * x + 0.05 * (double)k) * cos(0.13 * y) + 0.15 * (noise - 0.5);
}

static image make_image(accel_dtype dt, int64_t h, int64_t w, int64_t ch, int layout, uint32_t seed) {
  const int64_t es = (int64_t)accel_dtype_size(dt), step = layout == LAYOUT_GAPPED ? 2 : 1;
  const int64_t row = (w * step * ch + (layout == LAYOUT_PADDED ? 5 : 0)) * es;
  image im;
  im.mem = calloc((size_t)(row * h), 1);
  const int64_t shape[3] = {h, w, ch};
  ck_assert_int_eq(accel_array_init(&im.a, im.mem, dt, ch > 1 ? 3 : 2, shape), ACCEL_OK);
  im.a.strides[0] = row;
  im.a.strides[1] = step * ch * es;
  if (ch > 1) im.a.strides[2] = es;
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < w; c++)
      for (int64_t k = 0; k < ch; k++) {
        const double v = pattern(r, c, k, seed);
        uint8_t *p = im.mem + r * row + c * im.a.strides[1] + k * es;
        if (dt == ACCEL_DTYPE_U8) *p = (uint8_t)(v * 255.0);
        else if (dt == ACCEL_DTYPE_U16) *(uint16_t *)(void *)p = (uint16_t)(v * 65535.0);
        else *(float *)(void *)p = (float)(v * 300.0 - 50.0);
      }
  return im;
}

static double image_at(const image *im, int64_t r, int64_t c, int64_t k) {
  const uint8_t *p =
      im->mem + r * im->a.strides[0] + c * im->a.strides[1] + (im->a.ndim == 3 ? k * im->a.strides[2] : 0);
  switch (im->a.dtype) {
  case ACCEL_DTYPE_U8: return *p;
  case ACCEL_DTYPE_U16: return *(const uint16_t *)(const void *)p;
  default: return *(const float *)(const void *)p;
  }
}

/* The largest difference between two images of one shape. */
static double max_diff(const image *a, const image *b) {
  const int64_t ch = a->a.ndim == 3 ? a->a.shape[2] : 1;
  double d = 0;
  for (int64_t r = 0; r < a->a.shape[0]; r++)
    for (int64_t c = 0; c < a->a.shape[1]; c++)
      for (int64_t k = 0; k < ch; k++) {
        const double e = fabs(image_at(a, r, c, k) - image_at(b, r, c, k));
        d = e > d ? e : d;
      }
  return d;
}

static void clear_image(image *im) { memset(im->mem, 0x5A, (size_t)(im->a.strides[0] * im->a.shape[0])); }

/* ---------------------------------------------------------------- pyramid */

typedef struct pyr_case {
  image in;
  accel__reg_pyramid_job job;
  float *cpu; /* the CPU's level */
} pyr_case;

static void pyr_case_init(pyr_case *c, accel_dtype dt, int layout, int64_t h, int64_t w, int32_t factor, int32_t offset,
                          double sigma, int32_t coefficients) {
  c->in = make_image(dt, h, w, 1, layout, (uint32_t)(factor * 131 + offset));
  memset(&c->job, 0, sizeof c->job);
  c->job.in = &c->in.a;
  c->job.sigma = sigma;
  c->job.factor = factor;
  c->job.offset = offset;
  c->job.width = (w - 1 - offset) / factor + 1;
  c->job.height = (h - 1 - offset) / factor + 1;
  c->job.coefficients = coefficients;
  const size_t n = (size_t)(c->job.width * c->job.height);
  c->cpu = malloc(n * sizeof(float));
  c->job.out = c->cpu;
  set_emulated_gpu_budget(0);
  accel_ctx *cpu = cpu_ctx();
  ck_assert_msg(accel__dispatch(cpu, "reg.pyramid", run_pyramid, &c->job) == ACCEL_OK, "cpu pyramid: %s",
                accel_last_error(cpu));
  accel_ctx_destroy(cpu);
}

static void pyr_case_free(pyr_case *c) {
  free(c->in.mem);
  free(c->cpu);
}

/* The GPU's level of c, checked against the CPU's when it succeeds. */
static accel_status pyr_on_gpu(accel_ctx *ctx, void *user) {
  pyr_case *c = user;
  accel__reg_pyramid_job job = c->job;
  const size_t n = (size_t)(job.width * job.height);
  job.out = malloc(n * sizeof(float));
  memset(job.out, 0x5A, n * sizeof(float));
  const accel_status s = accel__dispatch(ctx, "reg.pyramid", run_pyramid, &job);
  if (!s)
    for (size_t i = 0; i < n; i++)
      EXPECT(job.out[i] == c->cpu[i],
             "pyramid (%s, factor %d, offset %d, sigma %g, coefficients %d): pixel %zu is %.9g, CPU %.9g",
             accel__dtype_name(c->in.a.dtype), job.factor, job.offset, job.sigma, job.coefficients, i, job.out[i],
             c->cpu[i]);
  free(job.out);
  return s;
}

static const struct {
  int32_t factor, offset;
  double sigma;
} PYR[] = {{1, 0, 0.0}, {2, 0, 1.0}, {4, 1, 2.0}, {8, 3, 4.0}, {1, 0, 0.5}};

/* Every dtype and layout, whole (1 GiB) and in bands (a budget of a few
 * rows). */
static void pyramid_equals_cpu(uint64_t budget) {
  set_emulated_gpu_budget(budget);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  const accel_dtype dts[3] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  int runs = 0;
  for (int d = 0; d < 3; d++)
    for (int layout = 0; layout < LAYOUTS; layout++)
      for (size_t k = 0; k < sizeof PYR / sizeof PYR[0]; k++) {
        pyr_case c;
        pyr_case_init(&c, dts[d], layout, 71, 93, PYR[k].factor, PYR[k].offset, PYR[k].sigma, (int32_t)(k + d) % 2);
        ck_assert_msg(pyr_on_gpu(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
        runs++;
        if (layout == LAYOUT_DENSE) { /* the input as device memory, its rows copied on the device */
          const size_t bytes = (size_t)(71 * 93) * accel_dtype_size(dts[d]);
          accel_array dev = c.in.a;
          dev.data = malloc(bytes);
          memcpy(dev.data, c.in.a.data, bytes);
          c.job.in = &dev;
          c.job.in_device = 1;
          ck_assert_msg(pyr_on_gpu(gpu, &c) == ACCEL_OK, "device input: %s", accel_last_error(gpu));
          free(dev.data);
          runs++;
        }
        pyr_case_free(&c);
      }
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.pyramid", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.gpu_runs, runs);
  ck_assert_int_eq((int)st.fallbacks, 0);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget(0);
}

START_TEST(pyramid_equals_cpu_in_emulation) { pyramid_equals_cpu(0); }
END_TEST

START_TEST(pyramid_bands_equal_cpu_in_emulation) { pyramid_equals_cpu(30000); }
END_TEST

/* Rows that are not pitched (the gapped layout) packed into staging chunks
 * of 1000 bytes: 2 to 10 rows a chunk, the two chunks taken in turn. */
START_TEST(pyramid_staged_in_chunks_equals_cpu_in_emulation) {
  const size_t chunk = accel__cuda_pin_chunk;
  accel__cuda_pin_chunk = 1000;
  pyramid_equals_cpu(0);
  pyramid_equals_cpu(30000);
  accel__cuda_pin_chunk = chunk;
}
END_TEST

/* ---------------------------------------------------------------- warp */

/* A transform over a fixed image of fw x fh: a small affine part (one that
 * keeps the axes for odd seeds: the CPU's separable path) and a B-spline of
 * spacing 16 with displacements up to `amp` pixels. */
static accel_reg_transform *make_transform(int64_t fw, int64_t fh, double amp, uint32_t seed) {
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(fw, fh, 16, &g), ACCEL_OK);
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(t);
  double *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = amp * (2.0 * pattern(i, i * 3, 0, seed) - 1.0);
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, n), ACCEL_OK);
  free(p);
  const double shear = seed % 2 ? 0.0 : 0.03;
  const double aff[6] = {1.02, shear, -shear, 0.99, 1.5, -2.25}, centre[2] = {(double)fw / 2, (double)fh / 2};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_AFFINE, aff, centre), ACCEL_OK);
  return t;
}

typedef struct warp_case {
  image in, cpu;
  float *coef; /* any F32 image of in's shape stands for its coefficients */
  int out_layout;
  accel_reg_transform *t;
  accel__reg_warp_job job;
} warp_case;

static void warp_case_init(warp_case *c, accel_dtype in_dt, accel_dtype out_dt, int64_t ch, accel_reg_interp interp,
                           int out_layout) {
  enum { H = 57, W = 69, OH = 50, OW = 61 };
  c->in = make_image(in_dt, H, W, ch, LAYOUT_PADDED, (uint32_t)(ch * 7 + in_dt));
  c->out_layout = out_layout;
  c->cpu = make_image(out_dt, OH, OW, ch, out_layout, 0);
  c->coef = malloc(sizeof(float) * H * W * (size_t)ch);
  for (int64_t r = 0; r < H; r++)
    for (int64_t col = 0; col < W; col++)
      for (int64_t k = 0; k < ch; k++) c->coef[(r * W + col) * ch + k] = (float)(300.0 * pattern(r, col, k, 99) - 40);
  c->t = make_transform(W, H, 4.0, (uint32_t)(3 + ch + interp));
  memset(&c->job, 0, sizeof c->job);
  accel__reg_xform_of(c->t, &c->job.xf);
  c->job.in = &c->in.a;
  c->job.out = &c->cpu.a;
  c->job.coef = interp == ACCEL_REG_INTERP_CUBIC ? c->coef : NULL;
  c->job.coef_y0 = 0;
  c->job.coef_rows = H;
  c->job.interp = interp;
  c->job.fill = 17;
  c->job.tile = 128;
  c->job.x0 = -6; /* the region reaches past the fixed image's top left */
  c->job.y0 = 9;
  set_emulated_gpu_budget(0);
  accel_ctx *cpu = cpu_ctx();
  ck_assert_msg(accel__dispatch(cpu, "reg.warp", run_warp, &c->job) == ACCEL_OK, "cpu warp: %s", accel_last_error(cpu));
  accel_ctx_destroy(cpu);
}

static void warp_case_free(warp_case *c) {
  free(c->in.mem);
  free(c->cpu.mem);
  free(c->coef);
  accel_reg_transform_destroy(c->t);
}

/* The GPU's warp of c (with c's tile), checked against the CPU's when it
 * succeeds: within 1e-4 for F32, equal for integers. */
static accel_status warp_on_gpu(accel_ctx *ctx, void *user) {
  warp_case *c = user;
  const accel_array *o = &c->cpu.a;
  image out = make_image(o->dtype, o->shape[0], o->shape[1], o->ndim == 3 ? o->shape[2] : 1, c->out_layout, 0);
  clear_image(&out);
  accel__reg_warp_job job = c->job;
  job.out = &out.a;
  const accel_status s = accel__dispatch(ctx, "reg.warp", run_warp, &job);
  if (!s) {
    const double d = max_diff(&out, &c->cpu);
    EXPECT(d <= (o->dtype == ACCEL_DTYPE_F32 ? 1e-4 : 0.0), "warp (%s to %s, %s, tile %lld): differs by %g",
           accel__dtype_name(c->in.a.dtype), accel__dtype_name(o->dtype), job.coef ? "cubic" : "linear",
           (long long)job.tile, d);
  }
  free(out.mem);
  return s;
}

/* Every interpolation, dtype pair and channel count; whole, in tiles of 16,
 * and (with a budget below the source's size) with the source in bands. */
static void warp_equals_cpu(uint64_t budget, int64_t tile) {
  set_emulated_gpu_budget(budget);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  const accel_dtype dts[3] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  const int64_t chs[3] = {1, 3, 4};
  int runs = 0;
  for (int interp = 0; interp < 2; interp++)
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 3; k++) {
        warp_case c;
        const accel_dtype out_dt = dts[(i + k + interp) % 3];
        warp_case_init(&c, dts[i], out_dt, chs[k], interp ? ACCEL_REG_INTERP_CUBIC : ACCEL_REG_INTERP_LINEAR,
                       (i + k) % 2 ? LAYOUT_GAPPED : LAYOUT_DENSE);
        if (tile) c.job.tile = tile;
        ck_assert_msg(warp_on_gpu(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
        warp_case_free(&c);
        runs++;
      }
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.warp", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.gpu_runs, runs);
  ck_assert_int_eq((int)st.fallbacks, 0);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget(0);
}

START_TEST(warp_equals_cpu_in_emulation) { warp_equals_cpu(0, 0); }
END_TEST

START_TEST(warp_tiles_equal_cpu_in_emulation) { warp_equals_cpu(70000, 16); }
END_TEST

START_TEST(warp_source_bands_equal_cpu_in_emulation) { warp_equals_cpu(30000, 16); }
END_TEST

/* ---------------------------------------------------------------- level */

/* One level's optimisation: a fixed image, a moving one that is it shifted
 * and bent (its values stand for the moving level's spline coefficients),
 * a grid of spacing 24, and the CPU's parameters and report after it. */
enum { LH = 72, LW = 88 };
typedef struct level_case {
  float fixed[LH * LW], moving[LH * LW];
  uint8_t mask[LH * LW];
  accel_reg_transform *t, *base;
  int64_t n;
  double *start, *cpu;
  accel_reg_options o;
  accel_reg_level_report cpu_report;
  accel__reg_level_job job;
} level_case;

/* How a level case departs from the plain one. */
typedef struct level_variant {
  double degrees;         /* an initial rotation about the image's centre */
  int32_t factor, offset; /* the level's frame (0, 0: full resolution) */
  double base;            /* the y amplitude of a base B-spline part (0: none) */
  double edge;            /* the start's y displacement of the last edge_rows node rows, past the bottom edge */
  int32_t edge_rows;
} level_variant;

static accel_status level_case_init_as(level_case *c, accel_reg_metric metric, accel_reg_optimizer opt, bool mask,
                                       int32_t iterations, level_variant v);

static accel_status level_case_init(level_case *c, accel_reg_metric metric, accel_reg_optimizer opt, bool mask,
                                    int32_t iterations) {
  return level_case_init_as(c, metric, opt, mask, iterations, (level_variant){.degrees = 0});
}

static accel_status level_case_init_as(level_case *c, accel_reg_metric metric, accel_reg_optimizer opt, bool mask,
                                       int32_t iterations, level_variant v) {
  const int32_t f = v.factor ? v.factor : 1;
  for (int r = 0; r < LH; r++)
    for (int k = 0; k < LW; k++) {
      const double dx = 1.5 * sin(0.05 * r), dy = -1.0 + 0.8 * cos(0.07 * k);
      c->fixed[r * LW + k] = (float)(100 * pattern(r, k, 0, 5));
      c->moving[r * LW + k] = (float)(100 * (0.5 + 0.3 * sin(0.21 * (k - dx)) * cos(0.13 * (r - dy))) + 3);
      c->mask[r * LW + k] = (uint8_t)((r - 36) * (r - 36) + (k - 44) * (k - 44) < 34 * 34);
    }
  /* the level's pixels stand for the points f i + offset of an image f
   * times its size, the grid's spacing f times 24 */
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(f * LW, f * LH, 24.0 * f, &g), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &c->t), ACCEL_OK);
  if (v.degrees != 0) {
    const double rigid[3] = {v.degrees * M_PI / 180.0, 0.7 * f, -0.4 * f},
                 centre[2] = {(f * LW - 1) / 2.0, (f * LH - 1) / 2.0};
    ck_assert_int_eq(accel_reg_transform_set_initial(NULL, c->t, ACCEL_REG_LINEAR_RIGID, rigid, centre), ACCEL_OK);
  }
  c->n = accel_reg_transform_count(c->t);
  c->start = calloc((size_t)c->n, sizeof(double));
  c->cpu = calloc((size_t)c->n, sizeof(double));
  for (int64_t i = 0; i < c->n; i++) c->start[i] = 0.3 * f * sin(0.9 * (double)i);
  for (int64_t i = c->n - v.edge_rows * g.size[0]; v.edge != 0 && i < c->n; i++) c->start[i] = v.edge * f; /* y */
  c->base = NULL;
  if (v.base != 0) {
    ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &c->base), ACCEL_OK);
    double *bp = calloc((size_t)c->n, sizeof(double));
    for (int64_t i = c->n / 2; i < c->n; i++) bp[i] = v.base * f * cos(0.7 * (double)i);
    ck_assert_int_eq(accel_reg_transform_set_parameters(c->base, bp, c->n), ACCEL_OK);
    free(bp);
  }
  accel_reg_options_init(&c->o, sizeof c->o);
  c->o.metric = metric;
  c->o.optimizer = opt;
  c->o.iterations = iterations;
  c->o.samples = 1500;
  c->o.validation_samples = 800;
  c->o.window = 3;
  c->o.levels = 1;
  memset(&c->job, 0, sizeof c->job);
  c->job.fixed = c->fixed;
  c->job.moving = c->moving;
  c->job.fixed_width = c->job.moving_width = LW;
  c->job.fixed_height = c->job.moving_height = LH;
  c->job.mask = mask ? c->mask : NULL;
  c->job.factor = f;
  c->job.offset = v.offset;
  accel__reg_xform_of(c->t, &c->job.xf);
  if (c->base) accel__reg_xform_of(c->base, &c->job.base);
  c->job.options = &c->o;
  memcpy(c->cpu, c->start, sizeof(double) * (size_t)c->n);
  c->job.params = c->cpu;
  c->job.xf.params = c->cpu;
  c->job.report = &c->cpu_report;
  accel_ctx *cpu = cpu_ctx();
  const accel_status s = accel__dispatch(cpu, "reg.level", run_level, &c->job);
  ck_assert_msg(s == ACCEL_OK || s == ACCEL_ERR_UNSUPPORTED, "cpu level: %s", accel_last_error(cpu));
  if (s) printf("level_equals_cpu: not compared: %s\n", accel_last_error(cpu));
  accel_ctx_destroy(cpu);
  return s;
}

static void level_case_free(level_case *c) {
  free(c->start);
  free(c->cpu);
  accel_reg_transform_destroy(c->t);
  accel_reg_transform_destroy(c->base);
}

/* The GPU's level of c, checked against the CPU's when it succeeds: the
 * same parameters to the bit, the same report. */
static accel_status level_on_gpu(accel_ctx *ctx, void *user) {
  level_case *c = user;
  accel__reg_level_job job = c->job;
  double *p = malloc(sizeof(double) * (size_t)c->n);
  memcpy(p, c->start, sizeof(double) * (size_t)c->n);
  accel_reg_level_report rep;
  memset(&rep, 0, sizeof rep);
  job.params = p;
  job.xf.params = p;
  job.report = &rep;
  const accel_status s = accel__dispatch(ctx, "reg.level", run_level, &job);
  if (!s) {
    double d = 0;
    for (int64_t i = 0; i < c->n; i++) d = fmax(d, fabs(p[i] - c->cpu[i]));
    EXPECT(memcmp(p, c->cpu, sizeof(double) * (size_t)c->n) == 0,
           "level (metric %d, optimizer %d): parameters differ from the CPU's by up to %g", (int)c->o.metric,
           (int)c->o.optimizer, d);
    EXPECT(rep.iterations == c->cpu_report.iterations && rep.stop == c->cpu_report.stop &&
               rep.samples == c->cpu_report.samples && rep.metric_first == c->cpu_report.metric_first &&
               rep.metric_last == c->cpu_report.metric_last,
           "level report: %d iterations (CPU %d), metric %.17g (CPU %.17g)", rep.iterations, c->cpu_report.iterations,
           rep.metric_last, c->cpu_report.metric_last);
  }
  free(p);
  return s;
}

/* Both metrics, both optimizers, with and without a mask: the GPU's level
 * is the CPU's to the bit (the same samples, sums in the same order). */
START_TEST(level_equals_cpu_in_emulation) {
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  int runs = 0;
  for (int metric = 0; metric < 2; metric++)
    for (int opt = 0; opt < 2; opt++) { /* an optimizer the CPU does not have yet is skipped, with a line */
      level_case *c = malloc(sizeof *c);
      if (!level_case_init(c, (accel_reg_metric)metric, (accel_reg_optimizer)opt, (metric + opt) % 2 == 1, 12)) {
        ck_assert_msg(level_on_gpu(gpu, c) == ACCEL_OK, "%s", accel_last_error(gpu));
        runs++;
      }
      level_case_free(c);
      free(c);
    }
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.level", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.gpu_runs, runs);
  ck_assert_int_eq((int)st.fallbacks, 0);
  accel_ctx_destroy(gpu);
}
END_TEST

/* ---------------------------------------------------------------- register */

/* Whole registrations (pyramid, levels) on the GPU and the CPU: a pair whose
 * fixed image is the moving one warped by a known transform; MSE, and NCC
 * with a mask and a bending penalty (its table over the mask's points).
 * The same transform to the bit, so the same registration error, and the
 * same report. */
START_TEST(register_equals_cpu_in_emulation) {
  enum { H = 120, W = 136 };
  float *moving = malloc(sizeof(float) * H * W), *fixed = malloc(sizeof(float) * H * W);
  uint8_t *mask = malloc(H * W);
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++) {
      moving[r * W + c] = (float)(100 + 60 * sin(0.11 * c) * cos(0.07 * r) + 40 * sin(0.031 * (c + 2 * r)) +
                                  25 * ((r / 9 + c / 11) % 2));
      mask[r * W + c] = (uint8_t)(c > 10 && r < H - 8);
    }
  accel_reg_transform *truth = make_transform(W, H, 2.0, 3);
  accel_array am, af, ak;
  accel_array_init(&am, moving, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&af, fixed, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&ak, mask, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  const accel_array *in[1] = {&am}, *out[1] = {&af};
  accel_reg_warp_options wo;
  accel_reg_warp_options_init(&wo, sizeof wo);
  accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_int_eq(accel_reg_warp(cpu, truth, in, out, 1, &wo), ACCEL_OK);
  for (int ncc = 0; ncc < 2; ncc++) {
    accel_reg_options o;
    accel_reg_options_init(&o, sizeof o);
    o.levels = 2;
    o.grid_spacing = 32;
    o.iterations = 15;
    o.samples = 2000;
    o.metric = ncc ? ACCEL_REG_METRIC_NCC : ACCEL_REG_METRIC_MSE;
    o.bending_weight = ncc ? 1e3 : 0;
    accel_reg_report rg, rc;
    accel_reg_report_init(&rg, sizeof rg);
    accel_reg_report_init(&rc, sizeof rc);
    accel_reg_transform *tg = NULL, *tc = NULL;
    const accel_array *m = ncc ? &ak : NULL;
    ck_assert_msg(accel_reg_register(gpu, &af, &am, m, NULL, &o, &tg, &rg) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_reg_register(cpu, &af, &am, m, NULL, &o, &tc, &rc), ACCEL_OK);
    const int64_t n = accel_reg_transform_count(tc);
    double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
    ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
    ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
    ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "metric %d: the GPU's transform differs", ncc);
    for (int l = 0; l < 2; l++)
      ck_assert(rg.level[l].iterations == rc.level[l].iterations && rg.level[l].stop == rc.level[l].stop &&
                rg.level[l].metric_first == rc.level[l].metric_first &&
                rg.level[l].metric_last == rc.level[l].metric_last);
    free(pg);
    free(pc);
    accel_reg_transform_destroy(tg);
    accel_reg_transform_destroy(tc);
  }
  /* two registrations of two levels, each level's images made by the level
   * stage on the device (no pyramid stage) */
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.level", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.gpu_runs, 4);
  ck_assert_int_eq((int)st.fallbacks, 0);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.pyramid", &st), ACCEL_ERR_NOT_FOUND);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
  accel_reg_transform_destroy(truth);
  free(moving);
  free(fixed);
  free(mask);
}
END_TEST

static uint64_t uploaded(accel_ctx *ctx, const char *stage);
static uint64_t downloaded(accel_ctx *ctx, const char *stage);

static accel_array on_device_copy(const accel_array *a);

/* Whole registrations under budgets from one that holds every level down
 * to one where the finest level's images do not fit beside its arrays:
 * those made on the host and streamed, the CPU's transform to the bit
 * either way (no fallback allowed), or the device memory error. From host
 * images no level image is ever downloaded; from device arrays a streamed
 * level's images are made on the device and come down to stream. */
START_TEST(register_streams_over_the_budget_in_emulation) {
  enum { H = 120, W = 136 };
  float *moving = malloc(sizeof(float) * H * W), *fixed = malloc(sizeof(float) * H * W);
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++)
      moving[r * W + c] = (float)(100 + 60 * sin(0.11 * c) * cos(0.07 * r) + 40 * sin(0.031 * (c + 2 * r)) +
                                  25 * ((r / 9 + c / 11) % 2));
  accel_reg_transform *truth = make_transform(W, H, 2.0, 3);
  accel_array am, af;
  accel_array_init(&am, moving, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&af, fixed, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  const accel_array *in[1] = {&am}, *out[1] = {&af};
  accel_ctx *cpu = cpu_ctx();
  ck_assert_int_eq(accel_reg_warp(cpu, truth, in, out, 1, NULL), ACCEL_OK);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2, o.grid_spacing = 32, o.iterations = 8, o.samples = 2000;
  accel_reg_transform *tc = NULL;
  ck_assert_int_eq(accel_reg_register(cpu, &af, &am, NULL, NULL, &o, &tc, NULL), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(tc);
  double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
  ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
  accel_array df = on_device_copy(&af), dm = on_device_copy(&am);
  for (int dev = 0; dev < 2; dev++) {
    int streamed = 0, resident = 0;
    uint64_t down = 0;
    for (uint64_t budget = 400000; budget >= 160000; budget -= 20000) {
      set_emulated_gpu_budget(budget);
      accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
      accel_reg_transform *tg = NULL;
      const accel_status s = accel_reg_register(gpu, dev ? &df : &af, dev ? &dm : &am, NULL, NULL, &o, &tg, NULL);
      if (s == ACCEL_OK) {
        ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
        ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0,
                      "budget %llu, device inputs %d: the GPU's transform differs", (unsigned long long)budget, dev);
        /* each level uploads its inputs' rows once when resident (8 H W
         * bytes at most), far more when it streams them every evaluation */
        const bool streams = uploaded(gpu, "reg.level") > (uint64_t)(32 * H * W);
        streamed += streams, resident += !streams;
        /* what comes back is the optimizer's sums alone, the same whether
         * the images were made on the device or streamed from the host;
         * from device arrays a streamed level's images come down too */
        if (!down) down = downloaded(gpu, "reg.level");
        if (dev && streams) ck_assert_uint_ge(downloaded(gpu, "reg.level"), down + (uint64_t)(8 * H * W));
        else ck_assert_uint_eq(downloaded(gpu, "reg.level"), down);
      } else {
        ck_assert_int_eq(s, ACCEL_ERR_DEVICE_MEMORY);
      }
      accel_reg_transform_destroy(tg);
      accel_ctx_destroy(gpu);
    }
    ck_assert_msg(streamed > 0 && resident > 0, "device inputs %d: %d budgets streamed, %d resident", dev, streamed,
                  resident);
  }
  set_emulated_gpu_budget(0);
  free(df.data), free(dm.data);
  free(pg), free(pc);
  accel_reg_transform_destroy(tc);
  accel_reg_transform_destroy(truth);
  accel_ctx_destroy(cpu);
  free(moving);
  free(fixed);
}
END_TEST

/* Progress: fractions rising to 1 from the calling thread; a nonzero
 * answer cancels the GPU's warp, which is no failure (no fallback). */
typedef struct progress_log {
  int calls, cancel_at;
  double last;
} progress_log;

static int on_progress(void *user, const char *stage, double fraction) {
  progress_log *l = user;
  EXPECT(!strcmp(stage, "reg.warp") && fraction > l->last && fraction <= 1.0, "progress %s %g after %g", stage,
         fraction, l->last);
  l->last = fraction;
  return ++l->calls == l->cancel_at;
}

START_TEST(warp_progress_and_cancel_in_emulation) {
  warp_case c;
  warp_case_init(&c, ACCEL_DTYPE_F32, ACCEL_DTYPE_U8, 1, ACCEL_REG_INTERP_LINEAR, LAYOUT_DENSE);
  set_emulated_gpu_budget(18000); /* the whole source, tiles of 16 */
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  progress_log log = {0, 0, 0.0};
  c.job.progress = on_progress;
  c.job.progress_user = &log;
  c.job.progress_span = 1.0;
  ck_assert_int_eq(warp_on_gpu(gpu, &c), ACCEL_OK);
  ck_assert(log.calls >= 4 && log.last == 1.0);
  log = (progress_log){0, 2, 0.0};
  ck_assert_int_eq(warp_on_gpu(gpu, &c), ACCEL_ERR_CANCELLED);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.warp", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.fallbacks, 0);
  accel_ctx_destroy(gpu);
  warp_case_free(&c);
  set_emulated_gpu_budget(0);
}
END_TEST

/* Through accel_reg_warp, with the cubic warp cut into bands of output rows
 * (each job holding the coefficients of the moving rows it reaches): the
 * GPU's output is the CPU's, for F32 and U8 outputs, whole and in tiles. */
START_TEST(warp_coefficient_bands_equal_cpu_in_emulation) {
  enum { H = 150, W = 64, C = 3 };
  image in = make_image(ACCEL_DTYPE_F32, H, W, C, LAYOUT_PADDED, 21);
  accel_reg_transform *t = make_transform(W, H, 3.0, 8);
  const int64_t keep = accel__reg_band_bytes;
  accel__reg_band_bytes = 40 * W * C * 4; /* bands of 20 output rows */
  accel_ctx *cpu = cpu_ctx();
  for (int budget = 0; budget < 2; budget++) {
    set_emulated_gpu_budget(budget ? 90000 : 0);
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
    for (int k = 0; k < 2; k++) {
      const accel_dtype dt = k ? ACCEL_DTYPE_U8 : ACCEL_DTYPE_F32;
      image a = make_image(dt, H, W, C, LAYOUT_DENSE, 0), b = make_image(dt, H, W, C, LAYOUT_DENSE, 0);
      const accel_array *ins[1] = {&in.a}, *oa[1] = {&a.a}, *ob[1] = {&b.a};
      accel_reg_warp_options o;
      accel_reg_warp_options_init(&o, sizeof o);
      o.tile = 16;
      ck_assert_msg(accel_reg_warp(gpu, t, ins, oa, 1, &o) == ACCEL_OK, "%s", accel_last_error(gpu));
      ck_assert_int_eq(accel_reg_warp(cpu, t, ins, ob, 1, &o), ACCEL_OK);
      const double d = max_diff(&a, &b);
      ck_assert_msg(d <= (k ? 0.0 : 1e-4), "coefficient bands (%s, budget %d): differs by %g", accel__dtype_name(dt),
                    budget, d);
      free(a.mem);
      free(b.mem);
    }
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.warp", &st), ACCEL_OK);
    ck_assert_int_ge((int)st.gpu_runs, 2 * (H / 20));
    ck_assert_int_eq((int)st.fallbacks, 0);
    accel_ctx_destroy(gpu);
  }
  accel__reg_band_bytes = keep;
  set_emulated_gpu_budget(0);
  accel_ctx_destroy(cpu);
  accel_reg_transform_destroy(t);
  free(in.mem);
}
END_TEST

/* Edge cases of whole registrations: images of a few pixels (levels of
 * single pixels, grids of few cells), every pixel as samples, and a start
 * from an earlier transform (its B-spline part added at the coarse levels);
 * the GPU's transform is the CPU's to the bit. */
static void expect_same_registration(accel_ctx *gpu, accel_ctx *cpu, const accel_array *f, const accel_array *m,
                                     const accel_reg_transform *init, const accel_reg_options *o, const char *what) {
  accel_reg_transform *tg = NULL, *tc = NULL;
  ck_assert_msg(accel_reg_register(gpu, f, m, NULL, init, o, &tg, NULL) == ACCEL_OK, "%s: %s", what,
                accel_last_error(gpu));
  ck_assert_int_eq(accel_reg_register(cpu, f, m, NULL, init, o, &tc, NULL), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(tc);
  double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
  ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
  ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "%s: the GPU's transform differs", what);
  free(pg);
  free(pc);
  accel_reg_transform_destroy(tg);
  accel_reg_transform_destroy(tc);
}

START_TEST(register_edge_cases_equal_cpu_in_emulation) {
  accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  float tiny[7 * 5];
  for (int k = 0; k < 35; k++) tiny[k] = (float)((k * 37) % 11);
  const accel_array a = array_of(tiny, ACCEL_DTYPE_F32, 2, (const int64_t[]){7, 5});
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 4;
  o.iterations = 8;
  o.samples = 500;
  expect_same_registration(gpu, cpu, &a, &a, NULL, &o, "a 7 x 5 image");
  enum { H = 64, W = 72 };
  float *fixed = malloc(sizeof(float) * H * W), *moving = malloc(sizeof(float) * H * W);
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++) {
      fixed[r * W + c] = (float)(100 * pattern(r, c, 0, 3));
      moving[r * W + c] = (float)(100 * pattern(r + 1, c - 1, 0, 3));
    }
  const accel_array f = array_of(fixed, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  const accel_array m = array_of(moving, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  o.levels = 2;
  o.grid_spacing = 16;
  o.samples = 0; /* every pixel */
  expect_same_registration(gpu, cpu, &f, &m, NULL, &o, "every pixel");
  accel_reg_transform *init = make_transform(W, H, 1.0, 5);
  o.samples = 1000;
  expect_same_registration(gpu, cpu, &f, &m, init, &o, "from an initial transform");
  accel_reg_transform_destroy(init);
  free(fixed);
  free(moving);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
}
END_TEST

/* A progress callback that runs a stage on the context whose call it
 * reports on: on a GPU context that call would wait for its own lock, so
 * it fails at once with a message (no fallback: the caller's mistake), and
 * the registration goes on to the CPU's transform. */
typedef struct reentry {
  accel_ctx *ctx;
  const accel_reg_transform *t;
  const accel_array *in;
  accel_array *out;
  int calls;
  accel_status status;
  char message[512];
} reentry;

static int warp_from_progress(void *user, int32_t level, int32_t iteration, double metric) {
  (void)level, (void)iteration, (void)metric;
  reentry *r = user;
  if (r->calls++) return 0;
  const accel_array *in[1] = {r->in};
  const accel_array *out[1] = {r->out};
  r->status = accel_reg_warp(r->ctx, r->t, in, out, 1, NULL);
  snprintf(r->message, sizeof r->message, "%s", accel_last_error(r->ctx));
  return 0;
}

START_TEST(progress_callback_calling_the_same_gpu_context_fails_cleanly) {
  enum { H = 48, W = 56 };
  float *fixed = malloc(sizeof(float) * H * W), *moving = malloc(sizeof(float) * H * W),
        *warped = malloc(sizeof(float) * H * W);
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++) {
      fixed[r * W + c] = (float)(100 * pattern(r, c, 0, 3));
      moving[r * W + c] = (float)(100 * pattern(r + 1, c, 0, 3));
    }
  const accel_array f = array_of(fixed, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  const accel_array m = array_of(moving, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  accel_array out = array_of(warped, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  accel_reg_transform *t = make_transform(W, H, 1.0, 9);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2, o.grid_spacing = 16, o.iterations = 4, o.samples = 1000;
  accel_ctx *cpu = cpu_ctx();
  accel_reg_transform *want = NULL;
  ck_assert_int_eq(accel_reg_register(cpu, &f, &m, NULL, NULL, &o, &want, NULL), ACCEL_OK);
  for (int allow = 0; allow < 2; allow++) {
    log_capture cap = {0};
    accel_ctx *gpu = make_emulated_gpu_ctx(allow ? ACCEL_FALLBACK_ALLOW : ACCEL_FALLBACK_DENY, &cap);
    reentry r = {gpu, t, &m, &out, 0, ACCEL_OK, ""};
    o.progress = warp_from_progress, o.progress_user = &r;
    accel_reg_transform *got = NULL;
    ck_assert_msg(accel_reg_register(gpu, &f, &m, NULL, NULL, &o, &got, NULL) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(r.status, ACCEL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(r.message, "inside another call on the same GPU context"), "%s", r.message);
    ck_assert_int_eq(cap.n, 0); /* no fallback line */
    const int64_t n = accel_reg_transform_count(want);
    double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
    ck_assert_int_eq(accel_reg_transform_parameters(got, pg, n), ACCEL_OK);
    ck_assert_int_eq(accel_reg_transform_parameters(want, pc, n), ACCEL_OK);
    ck_assert(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0);
    free(pg), free(pc);
    accel_reg_transform_destroy(got);
    /* after the call, the context takes stages again */
    const accel_array *in[1] = {&m};
    const accel_array *outs[1] = {&out};
    ck_assert_msg(accel_reg_warp(gpu, t, in, outs, 1, NULL) == ACCEL_OK, "%s", accel_last_error(gpu));
    accel_ctx_destroy(gpu);
  }
  accel_reg_transform_destroy(want);
  accel_reg_transform_destroy(t);
  accel_ctx_destroy(cpu);
  free(fixed), free(moving), free(warped);
}
END_TEST

/* A start whose samples all lie absurdly far off the moving image (their
 * pixel index beyond an int64_t, which a device converts differently from
 * a CPU): the CPU's error, from the GPU's level, with no fallback. */
START_TEST(an_initial_transform_off_the_images_is_the_cpus_error) {
  enum { H = 48, W = 56 };
  float *img = malloc(sizeof(float) * H * W);
  for (int k = 0; k < H * W; k++) img[k] = (float)(100 * pattern(k / W, k % W, 0, 3));
  const accel_array a = array_of(img, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W});
  accel_reg_transform *init = make_transform(W, H, 1.0, 4), *t = NULL;
  const int64_t n = accel_reg_transform_count(init);
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t k = 0; k < n; k++) v[k] = k % 3 ? 1e200 : -1e200;
  ck_assert_int_eq(accel_reg_transform_set_parameters(init, v, n), ACCEL_OK);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2, o.grid_spacing = 16, o.iterations = 4, o.samples = 1000;
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(accel_reg_register(gpu, &a, &a, NULL, init, &o, &t, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_msg(strstr(accel_last_error(gpu), "none of its samples maps into the moving image"), "%s",
                accel_last_error(gpu));
  ck_assert_int_eq(cap.n, 0);
  accel_ctx_destroy(gpu);
  accel_reg_transform_destroy(init);
  free(v);
  free(img);
}
END_TEST

/* A mask the coarsest level's samples (every 8th row) miss altogether: no
 * error on either backend; that level measures nothing and stalls at once,
 * the finer ones register, and the GPU's transform is the CPU's to the bit
 * (the counts that decide it are the GPU's own), with no fallback. */
START_TEST(a_mask_the_coarse_samples_miss_is_the_cpus_result) {
  enum { H = 48, W = 56 };
  float *img = malloc(sizeof(float) * H * W), *moved = malloc(sizeof(float) * H * W);
  uint8_t *mask = calloc(H * W, 1);
  for (int k = 0; k < H * W; k++) img[k] = (float)(100 * pattern(k / W, k % W, 0, 3));
  for (int r = 13; r < 18; r++) memset(mask + r * W, 1, W);
  for (int k = 0; k < H * W; k++) moved[k] = img[(k / W) * W + (k % W + 1) % W];
  const accel_array f = array_of(img, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W}),
                    m = array_of(moved, ACCEL_DTYPE_F32, 2, (const int64_t[]){H, W}),
                    k = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){H, W});
  for (int asgd = 0; asgd < 2; asgd++) {
    accel_reg_options o;
    accel_reg_options_init(&o, sizeof o);
    if (asgd) ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
    o.levels = 4, o.grid_spacing = 16, o.iterations = 6, o.samples = 1000;
    log_capture cap = {0};
    accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
    accel_reg_report rg, rc;
    accel_reg_report_init(&rg, sizeof rg);
    accel_reg_report_init(&rc, sizeof rc);
    accel_reg_transform *tg = NULL, *tc = NULL;
    ck_assert_msg(accel_reg_register(cpu, &f, &m, &k, NULL, &o, &tc, &rc) == ACCEL_OK, "%s", accel_last_error(cpu));
    ck_assert_msg(accel_reg_register(gpu, &f, &m, &k, NULL, &o, &tg, &rg) == ACCEL_OK, "%s", accel_last_error(gpu));
    if (!asgd) ck_assert(rc.level[0].iterations == 1 && rc.level[0].stop == ACCEL_REG_STOP_STALLED);
    ck_assert_int_eq(cap.n, 0);
    const int64_t n = accel_reg_transform_count(tc);
    double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
    ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
    ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
    ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "asgd %d: the GPU's transform differs", asgd);
    for (int l = 0; l < 4; l++) ck_assert_int_eq(rg.level[l].iterations, rc.level[l].iterations);
    free(pg);
    free(pc);
    accel_reg_transform_destroy(tg);
    accel_reg_transform_destroy(tc);
    accel_ctx_destroy(gpu);
    accel_ctx_destroy(cpu);
  }
  free(mask);
  free(moved);
  free(img);
}
END_TEST

/* A level whose working arrays do not fit the budget, nor a fortiori its
 * images: the fallback line and the CPU's parameters. */
START_TEST(level_over_the_budget_falls_back) {
  level_case *c = malloc(sizeof *c);
  ck_assert_int_eq(level_case_init(c, ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, false, 3), ACCEL_OK);
  set_emulated_gpu_budget(30000); /* its arrays take about 100 KiB, its two images 50 KiB */
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(level_on_gpu(gpu, c), ACCEL_OK);
  ck_assert_int_eq(cap.n, 1);
  ck_assert_msg(strncmp(cap.line[0], "[GPU] reg.level failed: ", 24) == 0 && strstr(cap.line[0], "budget") &&
                    strstr(cap.line[0], ". CPU fallback."),
                "%s", cap.line[0]);
  accel_ctx_destroy(gpu);
  level_case_free(c);
  free(c);
  set_emulated_gpu_budget(0);
}
END_TEST

/* A level whose images do not fit beside its arrays streams them: the
 * images made on the host and uploaded in bands of cell rows every
 * evaluation. From a budget that holds everything down to one that holds
 * the arrays alone, every run gives the CPU's parameters to the bit, on the
 * GPU while a row of cells fits, else by the fallback with the reason; some
 * budgets stream (the images uploaded more than twice over). Cases: MSE;
 * NCC with a mask; a rotated start (the fixed rows read through the
 * rotation); ASGD (samples mapped outside the moving image skipped); a
 * coarse level (factor 4, offset 1) with a base B-spline part; starts
 * whose last node row, or last three, reach far past the bottom edge (the
 * band's rows then come from the last node row's displacement, or from
 * mirrored rows well above the band). */
START_TEST(level_streams_images_over_the_budget) {
  static const struct {
    accel_reg_metric metric;
    accel_reg_optimizer opt;
    bool mask;
    level_variant v;
  } cases[] = {
      {ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, false, {.degrees = 0}},
      {ACCEL_REG_METRIC_NCC, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, true, {.degrees = 0}},
      {ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, false, {.degrees = 2.0}},
      {ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_ASGD, false, {.degrees = -1.0}},
      {ACCEL_REG_METRIC_MSE,
       ACCEL_REG_OPTIMIZER_GAUSS_NEWTON,
       false,
       {.degrees = 1.0, .factor = 4, .offset = 1, .base = 3.0}},
      {ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, true, {.factor = 2, .edge = 40.0, .edge_rows = 1}},
      {ACCEL_REG_METRIC_MSE, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, false, {.edge = 50.0, .edge_rows = 3}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    level_case *c = malloc(sizeof *c);
    const accel_status si = level_case_init_as(c, cases[k].metric, cases[k].opt, cases[k].mask, 6, cases[k].v);
    if (si) { /* an optimizer the CPU does not have: skipped, with a line */
      level_case_free(c);
      free(c);
      continue;
    }
    const uint64_t images = 2 * sizeof(float) * LH * LW;
    int resident = 0, streamed = 0, fell_back = 0;
    for (uint64_t budget = 200000; budget >= 80000; budget -= 4000) {
      set_emulated_gpu_budget(budget);
      log_capture cap = {0};
      accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
      ck_assert_int_eq(level_on_gpu(gpu, c), ACCEL_OK); /* the CPU's parameters and report */
      accel_stage_stats st;
      accel_stage_stats_init(&st, sizeof st);
      ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.level", &st), ACCEL_OK);
      if (st.fallbacks) {
        fell_back++;
        ck_assert_msg(cap.n == 1 && strstr(cap.line[0], "budget"), "budget %llu: %s", (unsigned long long)budget,
                      cap.n ? cap.line[0] : "no line");
      } else if (st.bytes_uploaded > 2 * images) {
        streamed++;
        ck_assert_int_eq(cap.n, 0);
      } else {
        ck_assert_msg(!streamed && !fell_back, "budget %llu: resident after a smaller budget streamed",
                      (unsigned long long)budget);
        resident++;
      }
      accel_ctx_destroy(gpu);
    }
    ck_assert_msg(resident > 0 && streamed > 0 && fell_back > 0, "case %zu: %d resident, %d streamed, %d fell back", k,
                  resident, streamed, fell_back);
    level_case_free(c);
    free(c);
  }
  set_emulated_gpu_budget(0);
}
END_TEST

/* A budget too small for one tile: the exact fallback line and the CPU's
 * result; under DENY, the device memory error. */
START_TEST(warp_too_small_a_budget_falls_back) {
  warp_case c;
  warp_case_init(&c, ACCEL_DTYPE_F32, ACCEL_DTYPE_F32, 3, ACCEL_REG_INTERP_CUBIC, LAYOUT_DENSE);
  c.job.tile = 16;
  set_emulated_gpu_budget(3000);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(warp_on_gpu(gpu, &c), ACCEL_OK);
  ck_assert_int_eq(cap.n, 1);
  ck_assert_msg(strncmp(cap.line[0], "[GPU] reg.warp failed: ", 23) == 0 && strstr(cap.line[0], "over the") &&
                    strstr(cap.line[0], ". CPU fallback."),
                "%s", cap.line[0]);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, ". CPU fallback."), 1);
  accel_ctx *strict = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_int_eq(warp_on_gpu(strict, &c), ACCEL_ERR_DEVICE_MEMORY);
  ck_assert(strstr(accel_last_error(strict), "[GPU] reg.warp failed: "));
  accel_ctx_destroy(strict);
  accel_ctx_destroy(gpu);
  warp_case_free(&c);
  set_emulated_gpu_budget(0);
}
END_TEST

/* Every CUDA call of the pyramid (in bands) and of the warp (in tiles, the
 * source whole and in bands, through the staging buffers) is checked: a
 * failure at any of them falls back with the error's name. */
START_TEST(failures_fall_back_in_emulation) {
  pyr_case p;
  set_emulated_gpu_budget(6000);
  pyr_case_init(&p, ACCEL_DTYPE_U16, LAYOUT_GAPPED, 23, 31, 2, 1, 1.0, 1);
  ck_assert_int_ge(emulated_fault_sweep("reg.pyramid", pyr_on_gpu, &p), 10);
  pyr_case_free(&p);
  for (int bands = 0; bands < 2; bands++) {
    warp_case c;
    warp_case_init(&c, ACCEL_DTYPE_U8, ACCEL_DTYPE_U8, 3, bands ? ACCEL_REG_INTERP_LINEAR : ACCEL_REG_INTERP_CUBIC,
                   LAYOUT_GAPPED);
    c.job.tile = 32;
    set_emulated_gpu_budget(bands ? 15000 : 0);
    ck_assert_int_ge(emulated_fault_sweep("reg.warp", warp_on_gpu, &c), 8);
    warp_case_free(&c);
  }
  set_emulated_gpu_budget(0);
  level_case *l = malloc(sizeof *l);
  ck_assert_int_eq(level_case_init(l, ACCEL_REG_METRIC_NCC, ACCEL_REG_OPTIMIZER_GAUSS_NEWTON, true, 2), ACCEL_OK);
  ck_assert_int_ge(emulated_fault_sweep("reg.level", level_on_gpu, l), 10);
  /* the same level streaming its images: the largest budget that makes it
   * stream, then a fault at every CUDA call of it */
  uint64_t streams = 0;
  for (uint64_t budget = 200000; budget >= 80000 && !streams; budget -= 4000) {
    set_emulated_gpu_budget(budget);
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
    if (level_on_gpu(gpu, l) == ACCEL_OK && uploaded(gpu, "reg.level") > 4 * sizeof(float) * LH * LW) streams = budget;
    accel_ctx_destroy(gpu);
  }
  ck_assert_uint_gt(streams, 0);
  set_emulated_gpu_budget(streams);
  ck_assert_int_ge(emulated_fault_sweep("reg.level", level_on_gpu, l), 20);
  set_emulated_gpu_budget(0);
  level_case_free(l);
  free(l);
}
END_TEST

/* ---------------------------------------------------------------- device arrays */

/* A copy of a contiguous array marked as device memory (the emulated GPU's
 * device memory is host memory); free its data. */
static accel_array on_device_copy(const accel_array *a) {
  const size_t bytes = (size_t)accel__array_count(a) * accel_dtype_size(a->dtype);
  accel_array d = *a;
  d.data = malloc(bytes);
  memcpy(d.data, a->data, bytes);
  ck_assert_int_eq(accel_array_on_device(&d), ACCEL_OK);
  return d;
}

static uint64_t uploaded(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  return st.bytes_uploaded;
}

static uint64_t downloaded(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  return st.bytes_downloaded;
}

/* Bytes copied between the host and the device by every stage so far. */
static void copied(accel_ctx *ctx, uint64_t *up, uint64_t *down) {
  size_t n = 0;
  ck_assert_int_eq(accel_ctx_stats_count(ctx, &n), ACCEL_OK);
  *up = *down = 0;
  for (size_t i = 0; i < n; i++) {
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_get(ctx, i, &st), ACCEL_OK);
    *up += st.bytes_uploaded, *down += st.bytes_downloaded;
  }
}

/* The device memory a context holds at every progress call (between the
 * stage calls of a level's iterations). */
typedef struct held_probe {
  accel_ctx *ctx;
  uint64_t least, most;
} held_probe;

static int held_during(void *user, int32_t level, int32_t iteration, double value) {
  (void)level, (void)iteration, (void)value;
  held_probe *p = user;
  const uint64_t n = accel__cuda_memory_in_use(p->ctx);
  p->least = n < p->least ? n : p->least;
  p->most = n > p->most ? n : p->most;
  return 0;
}

/* A registration of host images on a GPU holds them on the device for all
 * its levels (reg.hold), each uploaded once: three levels upload them once
 * where they uploaded them three times, with the CPU's transform to the
 * bit. Under a budget too small to hold them beside the finest level
 * nothing is held and each level uploads the rows it reads, as before. A
 * failure at any CUDA call of the hold falls back (nothing held, the levels
 * still on the GPU) or, under DENY, is the error; the memory is given back
 * in every case. */
START_TEST(register_holds_host_images_once_in_emulation) {
  enum { H = 120, W = 136 };
  image fixed = make_image(ACCEL_DTYPE_F32, H, W, 1, LAYOUT_DENSE, 3);
  image moving = make_image(ACCEL_DTYPE_U16, H, W, 1, LAYOUT_GAPPED, 4);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 3, o.grid_spacing = 16, o.iterations = 6, o.samples = 2000;
  accel_ctx *cpu = cpu_ctx();
  accel_reg_transform *tc = NULL, *tg = NULL;
  ck_assert_int_eq(accel_reg_register(cpu, &fixed.a, &moving.a, NULL, NULL, &o, &tc, NULL), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(tc);
  double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
  ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
  const uint64_t px = (uint64_t)(H * W), inputs = px * (4 + 2);
  uint64_t level_up[2] = {0, 0};
  held_probe probe = {NULL, UINT64_MAX, 0};
  o.progress = held_during, o.progress_user = &probe;
  for (int small = 0; small < 2; small++) {
    set_emulated_gpu_budget(small ? (uint64_t)32 << 20 : 0); /* under the hold's 64 MiB of room for the bands */
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
    probe.ctx = gpu, probe.least = UINT64_MAX, probe.most = 0;
    ck_assert_msg(accel_reg_register(gpu, &fixed.a, &moving.a, NULL, NULL, &o, &tg, NULL) == ACCEL_OK, "%s",
                  accel_last_error(gpu));
    /* between the levels' calls the device holds the inputs (counted
     * against the budget of every call meanwhile), or nothing */
    ck_assert_uint_eq(probe.least, (small ? 0 : inputs));
    ck_assert_uint_eq(probe.most, (small ? 0 : inputs));
    ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
    ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "budget %d: the GPU's transform differs", small);
    accel_reg_transform_destroy(tg);
    tg = NULL;
    ck_assert_uint_eq(uploaded(gpu, "reg.hold"), small ? 0 : inputs);
    level_up[small] = uploaded(gpu, "reg.level");
    ck_assert_uint_eq(accel__cuda_memory_in_use(gpu), 0);
    accel_ctx_destroy(gpu);
  }
  /* held: the levels upload no image rows (taps, cells, parameters only,
   * less than the inputs); not held: each level all rows of both inputs
   * (the finest level the fixed image as it is), three times the inputs */
  ck_assert_uint_lt(level_up[0], inputs);
  ck_assert_uint_eq(level_up[1], level_up[0] + 3 * inputs);
  set_emulated_gpu_budget(0);
  o.progress = NULL, o.progress_user = NULL;
  /* a fault at each CUDA call of the hold (the registration's first) */
  int held_faults = 0;
  for (int64_t k = 0;; k++) {
    log_capture cap = {0};
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
    accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
    accel__cuda_fault_at = k;
    const accel_status s = accel_reg_register(gpu, &fixed.a, &moving.a, NULL, NULL, &o, &tg, NULL);
    const bool hit = accel__cuda_fault_at < 0;
    accel__cuda_fault_at = -1;
    ck_assert_int_eq(s, ACCEL_OK);
    ck_assert(hit);
    ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
    ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "fault %lld: the transform differs", (long long)k);
    accel_reg_transform_destroy(tg);
    tg = NULL;
    ck_assert_int_eq(cap.n, 1);
    ck_assert_msg(strstr(cap.line[0], "cudaErrorLaunchFailure") && strstr(cap.line[0], ". CPU fallback."), "%s",
                  cap.line[0]);
    ck_assert_uint_eq(accel__cuda_memory_in_use(gpu), 0);
    const bool in_hold = strncmp(cap.line[0], "[GPU] reg.hold failed: ", 23) == 0;
    if (in_hold) { /* nothing held: the levels upload the rows they read, on the GPU */
      accel_stage_stats st;
      accel_stage_stats_init(&st, sizeof st);
      ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.level", &st), ACCEL_OK);
      ck_assert_int_eq((int)st.gpu_runs, 3);
      ck_assert_uint_eq(st.bytes_uploaded, level_up[1]);
    }
    accel_ctx_destroy(gpu);
    if (!in_hold) break; /* past the hold: the level's faults are failures_fall_back_in_emulation's */
    held_faults++;
  }
  ck_assert_int_ge(held_faults, 5); /* two allocations, two uploads, the wait */
  accel_ctx *strict = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
  accel__cuda_fault_at = 1;
  ck_assert_int_eq(accel_reg_register(strict, &fixed.a, &moving.a, NULL, NULL, &o, &tg, NULL), ACCEL_ERR_DEVICE);
  accel__cuda_fault_at = -1;
  ck_assert_ptr_null(tg);
  ck_assert_uint_eq(accel__cuda_memory_in_use(strict), 0);
  accel_ctx_destroy(strict);
  free(pg), free(pc);
  accel_reg_transform_destroy(tc);
  accel_ctx_destroy(cpu);
  free(fixed.mem);
  free(moving.mem);
}
END_TEST

/* Registration of device images (F32 fixed, U8 moving): the CPU's
 * transform from host arrays to the bit, the full-resolution images never
 * uploaded (each level copies the rows of its inputs on the device) nor
 * any level image, the same downloads as from host arrays (that none is a
 * level image, register_streams_over_the_budget_in_emulation checks), a
 * non-finite device value refused as on the host. */
START_TEST(register_reads_device_images_in_place) {
  enum { H = 96, W = 104 };
  image fixed = make_image(ACCEL_DTYPE_F32, H, W, 1, LAYOUT_DENSE, 5);
  image moving = make_image(ACCEL_DTYPE_U8, H, W, 1, LAYOUT_DENSE, 9);
  accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2, o.grid_spacing = 32, o.iterations = 10, o.samples = 1000;
  accel_reg_transform *tc = NULL, *tg = NULL;
  ck_assert_int_eq(accel_reg_register(cpu, &fixed.a, &moving.a, NULL, NULL, &o, &tc, NULL), ACCEL_OK);
  accel_array df = on_device_copy(&fixed.a), dm = on_device_copy(&moving.a);
  ck_assert_msg(accel_reg_register(gpu, &df, &dm, NULL, NULL, &o, &tg, NULL) == ACCEL_OK, "%s", accel_last_error(gpu));
  const int64_t n = accel_reg_transform_count(tc);
  double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n);
  ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
  ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "the device images' transform differs");
  /* what the device run uploads is the smoothing taps, the cells' layout
   * and every evaluation's parameters: less than one full-resolution F32
   * image (the levels' images, had they been uploaded, are 2.5 of them) */
  const uint64_t device_up = uploaded(gpu, "reg.level"), device_down = downloaded(gpu, "reg.level");
  uint64_t up, down;
  copied(gpu, &up, &down);
  /* the F32 image's finiteness, checked on the device, uploads nothing and
   * downloads a column index a row */
  ck_assert_uint_eq(up, device_up);
  ck_assert_uint_eq(down, device_down + H * sizeof(int64_t));
  ck_assert_uint_lt(up, (uint64_t)(H * W) * sizeof(float));
  /* the same from host arrays uploads each input once (reg.hold: 4 + 1
   * bytes a pixel), which the levels then read on the device as they read
   * device arrays (the finest level's fixed image is the held copy itself,
   * with no smoothing job and so one tap fewer), and gives it back after */
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  accel_reg_transform *th = NULL;
  ck_assert_int_eq(accel_reg_register(gpu, &fixed.a, &moving.a, NULL, NULL, &o, &th, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_parameters(th, pg, n), ACCEL_OK);
  ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "the held images' transform differs");
  accel_reg_transform_destroy(th);
  uint64_t host_up, host_down;
  copied(gpu, &host_up, &host_down);
  ck_assert_uint_eq(host_down, device_down);
  ck_assert_uint_eq(uploaded(gpu, "reg.hold"), (uint64_t)(H * W) * (4 + 1));
  ck_assert_uint_eq(uploaded(gpu, "reg.level") + sizeof(float), device_up);
  ck_assert_uint_eq(host_up, uploaded(gpu, "reg.hold") + uploaded(gpu, "reg.level"));
  ck_assert_uint_eq(accel__cuda_memory_in_use(gpu), 0);
  /* a device fixed image and a host moving one: only the host one is held,
   * and the levels upload what they do from two device arrays */
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  ck_assert_int_eq(accel_reg_register(gpu, &df, &moving.a, NULL, NULL, &o, &th, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_parameters(th, pg, n), ACCEL_OK);
  ck_assert_msg(memcmp(pg, pc, sizeof(double) * (size_t)n) == 0, "the mixed inputs' transform differs");
  accel_reg_transform_destroy(th);
  ck_assert_uint_eq(uploaded(gpu, "reg.hold"), (uint64_t)(H * W));
  ck_assert_uint_eq(uploaded(gpu, "reg.level"), device_up);
  ck_assert_uint_eq(accel__cuda_memory_in_use(gpu), 0);
  /* a NaN in the device image: refused as the host refuses it */
  ((float *)df.data)[7 * W + 3] = NAN;
  ((float *)fixed.a.data)[7 * W + 3] = NAN;
  accel_reg_transform *bad = NULL;
  ck_assert_int_eq(accel_reg_register(cpu, &fixed.a, &moving.a, NULL, NULL, &o, &bad, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "fixed[7, 3] is not finite"));
  ck_assert_int_eq(accel_reg_register(gpu, &df, &dm, NULL, NULL, &o, &bad, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "fixed[7, 3] is not finite"));
  ck_assert_ptr_null(bad);
  /* rows in segments of 16 (the last one of 8): the first non-finite value
   * in row order, wherever its segment lies */
  const int64_t segment = accel__reg_finite_segment;
  accel__reg_finite_segment = 16;
  static const struct {
    int n;
    int at[3][2]; /* row, column */
    float v;
  } cases[] = {{1, {{7, 3}}, NAN},
               {3, {{8, 0}, {7, 90}, {7, 50}}, INFINITY},
               {2, {{95, 103}, {95, 96}}, -INFINITY},
               {1, {{0, 15}}, NAN},
               {1, {{0, 16}}, NAN}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    float *d = df.data, *h = fixed.a.data;
    for (int64_t i = 0; i < H * W; i++) d[i] = h[i] = isfinite(h[i]) ? h[i] : 1.0f;
    for (int k = 0; k < cases[c].n; k++) d[cases[c].at[k][0] * W + cases[c].at[k][1]] = cases[c].v;
    memcpy(h, d, sizeof(float) * H * W);
    ck_assert_int_eq(accel_reg_register(cpu, &fixed.a, &moving.a, NULL, NULL, &o, &bad, NULL), ACCEL_ERR_INVALID_ARG);
    char want[64];
    snprintf(want, sizeof want, "fixed[%d, %d] is not finite", cases[c].at[cases[c].n - 1][0],
             cases[c].at[cases[c].n - 1][1]);
    ck_assert_msg(strstr(accel_last_error(cpu), want), "case %zu: %s", c, accel_last_error(cpu));
    ck_assert_int_eq(accel_reg_register(gpu, &df, &dm, NULL, NULL, &o, &bad, NULL), ACCEL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(accel_last_error(gpu), want), "case %zu: %s", c, accel_last_error(gpu));
  }
  accel__reg_finite_segment = segment;
  free(pg), free(pc), free(df.data), free(dm.data);
  accel_reg_transform_destroy(tc);
  accel_reg_transform_destroy(tg);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
  free(fixed.mem), free(moving.mem);
}
END_TEST

/* A cubic warp that makes a host layer's coefficients on the device holds
 * the uploaded layer beside them until they are made: with room for the
 * coefficients and a tile but not for the layer too, the plan declines at
 * once (no upload, the reason given); with room for both, the CPU's
 * pixels. */
START_TEST(warp_plans_room_for_the_uploaded_layer_in_emulation) {
  warp_case c;
  warp_case_init(&c, ACCEL_DTYPE_U8, ACCEL_DTYPE_F32, 3, ACCEL_REG_INTERP_CUBIC, LAYOUT_DENSE);
  c.job.coef = NULL; /* made by the op, from the layer */
  accel_ctx *cpu = cpu_ctx();
  ck_assert_int_eq(accel__dispatch(cpu, "reg.warp", run_warp, &c.job), ACCEL_OK);
  accel_ctx_destroy(cpu);
  const uint64_t coef = 57 * 69 * 3 * 4, layer = 57 * 69 * 3, params = 2 * sizeof(double) * c.job.xf.nx * c.job.xf.ny;
  const uint64_t tile = 16 * 16 * 3 * 4 + 16 * 16; /* a tile of 16 and its rows' reach */
  ck_assert(tile + 1024 < layer);
  set_emulated_gpu_budget(coef + params + tile + 1024);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_int_ne(warp_on_gpu(gpu, &c), ACCEL_OK);
  ck_assert_msg(strstr(accel_last_error(gpu), "(or the layer itself, uploaded to make them)"), "%s",
                accel_last_error(gpu));
  ck_assert_uint_eq(uploaded(gpu, "reg.warp"), params);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget(coef + params + layer + tile);
  gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_msg(warp_on_gpu(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget(0);
  warp_case_free(&c);
}
END_TEST

/* A warp of device layers (RGB U8 in, F32 out; and a host output): the
 * CPU's pixels, nothing of the layers on the bus. Linear: the CPU's to the
 * bit; cubic (the coefficients made on the device from the layer in place):
 * within `tol` of the CPU's from the host layer. */
typedef struct dwarp_case {
  const accel_reg_transform *t;
  const accel_array *in;
  const accel_array *want;
  accel_reg_interp interp;
  double tol;
} dwarp_case;

/* gpu ran reg.warp once on the GPU, and of the layers (n bytes each at
 * least) nothing crossed the bus: only the transform went up. */
static void expect_layers_stayed(accel_ctx *gpu, int64_t n) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.warp", &st), ACCEL_OK);
  ck_assert_uint_eq(st.gpu_runs, 1);
  ck_assert_uint_eq(st.bytes_downloaded, 0);
  ck_assert_uint_lt(st.bytes_uploaded, (uint64_t)n);
}

static double max_abs_diff_f32(const float *a, const float *b, int64_t n) {
  double d = 0;
  for (int64_t k = 0; k < n; k++) d = fmax(d, fabs((double)a[k] - (double)b[k]));
  return d;
}

static accel_status warp_device_layers(accel_ctx *ctx, void *user) {
  const dwarp_case *c = user;
  accel_array din = on_device_copy(c->in), dout = on_device_copy(c->want);
  memset(dout.data, 0xEE, (size_t)accel__array_count(c->want) * 4);
  const accel_array *in[1] = {&din}, *out[1] = {&dout};
  accel_reg_warp_options wo;
  accel_reg_warp_options_init(&wo, sizeof wo);
  wo.interp = c->interp;
  wo.tile = 16;
  const accel_status s = accel_reg_warp(ctx, c->t, in, out, 1, &wo);
  const int64_t n = accel__array_count(c->want);
  if (s == ACCEL_OK && c->tol == 0) ck_assert_mem_eq(dout.data, c->want->data, (size_t)n * 4);
  if (s == ACCEL_OK && c->tol > 0) {
    const double d = max_abs_diff_f32(dout.data, c->want->data, n);
    ck_assert_msg(d <= c->tol, "cubic device layers: %g from the CPU's", d);
  }
  free(din.data), free(dout.data);
  return s;
}

/* The cubic warp of device layers: a device input read in place (only
 * the transform uploaded, nothing downloaded), a device output, and each
 * with a host partner; the CPU's pixels from the host layer within 1e-4
 * (the coefficients of the whole layer against the CPU's bands); every
 * CUDA call's failure reruns it on the CPU, and a budget too small for the
 * layer's coefficients falls back with the exact line. */
static void cubic_device_layers(const accel_reg_transform *t, const accel_array *in, accel_ctx *cpu) {
  const int64_t H = in->shape[0], W = in->shape[1];
  image want = make_image(ACCEL_DTYPE_F32, H, W, 3, LAYOUT_DENSE, 1);
  accel_reg_warp_options wo;
  accel_reg_warp_options_init(&wo, sizeof wo);
  const accel_array *hin[1] = {in}, *hout[1] = {&want.a};
  ck_assert_int_eq(accel_reg_warp(cpu, t, hin, hout, 1, &wo), ACCEL_OK);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  dwarp_case c = {t, in, &want.a, ACCEL_REG_INTERP_CUBIC, 1e-4};
  ck_assert_int_eq(warp_device_layers(gpu, &c), ACCEL_OK);
  expect_layers_stayed(gpu, H * W);
  /* a host input (uploaded once) with a device output, and the reverse */
  accel_array dout = on_device_copy(&want.a), din = on_device_copy(in);
  image host_out = make_image(ACCEL_DTYPE_F32, H, W, 3, LAYOUT_PADDED, 1);
  const accel_array *a_in[1] = {in}, *a_out[1] = {&dout}, *b_in[1] = {&din}, *b_out[1] = {&host_out.a};
  memset(dout.data, 0xEE, (size_t)(H * W * 12));
  ck_assert_msg(accel_reg_warp(gpu, t, a_in, a_out, 1, &wo) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert(max_abs_diff_f32(dout.data, want.a.data, H * W * 3) <= 1e-4);
  ck_assert_int_eq(accel_reg_warp(gpu, t, b_in, b_out, 1, &wo), ACCEL_OK);
  for (int64_t r = 0; r < H; r++)
    ck_assert(max_abs_diff_f32((const float *)((uint8_t *)host_out.mem + r * host_out.a.strides[0]),
                               (const float *)want.mem + r * W * 3, W * 3) <= 1e-4);
  ck_assert_int_ge(emulated_fault_sweep("reg.warp", warp_device_layers, &c), 3);
  /* the layer's coefficients (H W 12 bytes) over the budget */
  set_emulated_gpu_budget((uint64_t)(H * W * 6));
  log_capture cap = {0};
  accel_ctx *small = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(warp_device_layers(small, &c), ACCEL_OK);
  ck_assert_int_eq(cap.n, 1);
  ck_assert_msg(strncmp(cap.line[0], "[GPU] reg.warp failed: ", 23) == 0 && strstr(cap.line[0], "cubic coefficients") &&
                    strstr(cap.line[0], ". CPU fallback."),
                "%s", cap.line[0]);
  set_emulated_gpu_budget(0);
  accel_ctx_destroy(small);
  free(din.data), free(dout.data), free(host_out.mem), free(want.mem);
  accel_ctx_destroy(gpu);
}

/* gpu's runs and fallbacks of `stage`. */
static void expect_runs(accel_ctx *gpu, const char *stage, uint64_t runs, uint64_t gpu_runs) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, stage, &st), ACCEL_OK);
  ck_assert_uint_eq(st.runs, runs);
  ck_assert_uint_eq(st.gpu_runs, gpu_runs);
  ck_assert_uint_eq(st.fallbacks, 0);
}

/* Lines over 2^18 pixels are not prefiltered on the device (a thread a
 * line: seconds for one thread): a level image's coefficients and a device
 * layer's cubic warp are left to the CPU without a fallback, even under
 * DENY, with the CPU's results; the same images without coefficients (a
 * smoothed level, a linear warp) run on the device. */
START_TEST(long_lines_are_left_to_the_cpu_in_emulation) {
  const int64_t L = ((int64_t)1 << 18) + 1;
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  static const int64_t sizes[2][2] = {{3, L}, {L, 2}};
  for (int k = 0; k < 2; k++) {
    pyr_case c;
    pyr_case_init(&c, ACCEL_DTYPE_U8, LAYOUT_DENSE, sizes[k][0], sizes[k][1], 1, 0, 0.0, 1);
    ck_assert_msg(pyr_on_gpu(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
    expect_runs(gpu, "reg.pyramid", 2 * (uint64_t)k + 1, (uint64_t)k);
    pyr_case_free(&c);
    pyr_case_init(&c, ACCEL_DTYPE_U8, LAYOUT_DENSE, sizes[k][0], sizes[k][1], 1, 0, 0.0, 0); /* on the device */
    ck_assert_msg(pyr_on_gpu(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
    expect_runs(gpu, "reg.pyramid", 2 * (uint64_t)k + 2, (uint64_t)k + 1);
    pyr_case_free(&c);
  }
  /* a device layer of 2 x L, cubic then linear */
  accel_ctx *cpu = cpu_ctx();
  image in = make_image(ACCEL_DTYPE_U8, 2, L, 1, LAYOUT_DENSE, 5);
  accel_reg_transform *t = make_transform(L, 2, 0.4, 7);
  for (int interp = 0; interp < 2; interp++) {
    image want = make_image(ACCEL_DTYPE_F32, 2, L, 1, LAYOUT_DENSE, 1), got = want;
    got.mem = malloc((size_t)(2 * L) * sizeof(float));
    got.a.data = got.mem;
    accel_reg_warp_options wo;
    accel_reg_warp_options_init(&wo, sizeof wo);
    wo.interp = interp ? ACCEL_REG_INTERP_LINEAR : ACCEL_REG_INTERP_CUBIC;
    const accel_array *hin[1] = {&in.a}, *hout[1] = {&want.a}, *gout[1] = {&got.a};
    ck_assert_int_eq(accel_reg_warp(cpu, t, hin, hout, 1, &wo), ACCEL_OK);
    accel_array din = on_device_copy(&in.a);
    const accel_array *din_[1] = {&din};
    ck_assert_msg(accel_reg_warp(gpu, t, din_, gout, 1, &wo) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_double_le(max_abs_diff_f32((const float *)(void *)got.mem, (const float *)(void *)want.mem, 2 * L), 1e-4);
    expect_runs(gpu, "reg.warp", (uint64_t)interp + 1, (uint64_t)interp);
    free(din.data), free(got.mem), free(want.mem);
  }
  accel_reg_transform_destroy(t);
  free(in.mem);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
}
END_TEST

/* Cubic device layers of every line length the prefilter treats apart:
 * one pixel (left as it is), short lines (the exact start, in double) and
 * long ones, in rows and in columns: the CPU's warp of the host layer. */
static void cubic_device_shapes(accel_ctx *cpu) {
  static const int64_t shapes[][2] = {{1, 9}, {20, 1}, {7, 5}, {18, 19}, {19, 18}, {3, 40}};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const int64_t H = shapes[k][0], W = shapes[k][1];
    image in = make_image(ACCEL_DTYPE_U16, H, W, 3, LAYOUT_DENSE, (uint32_t)k + 3);
    image want = make_image(ACCEL_DTYPE_F32, H, W, 3, LAYOUT_DENSE, 1);
    /* a B-spline part alone, |u| <= 0.3 px: every output pixel reads the layer */
    accel_reg_grid g;
    ck_assert_int_eq(accel_reg_grid_for(32, 32, 16, &g), ACCEL_OK);
    accel_reg_transform *t = NULL;
    ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
    double p[2 * 64];
    const int64_t np = accel_reg_transform_count(t);
    ck_assert_int_le(np, 2 * 64);
    for (int64_t i = 0; i < np; i++) p[i] = 0.3 * (2.0 * pattern(i, i * 5, 1, (uint32_t)k) - 1.0);
    ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, np), ACCEL_OK);
    accel_reg_warp_options wo;
    accel_reg_warp_options_init(&wo, sizeof wo);
    const accel_array *hin[1] = {&in.a}, *hout[1] = {&want.a};
    ck_assert_int_eq(accel_reg_warp(cpu, t, hin, hout, 1, &wo), ACCEL_OK);
    dwarp_case c = {t, &in.a, &want.a, ACCEL_REG_INTERP_CUBIC, 1e-4 * 65535};
    ck_assert_msg(warp_device_layers(gpu, &c) == ACCEL_OK, "%lld x %lld: %s", (long long)H, (long long)W,
                  accel_last_error(gpu));
    accel_reg_transform_destroy(t);
    free(in.mem), free(want.mem);
  }
  accel_ctx_destroy(gpu);
}

START_TEST(warp_reads_device_layers_in_place) {
  enum { H = 45, W = 53 };
  image in = make_image(ACCEL_DTYPE_U8, H, W, 3, LAYOUT_DENSE, 4);
  image want = make_image(ACCEL_DTYPE_F32, H, W, 3, LAYOUT_DENSE, 1);
  accel_reg_transform *t = make_transform(W, H, 1.5, 2);
  accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_reg_warp_options wo;
  accel_reg_warp_options_init(&wo, sizeof wo);
  wo.interp = ACCEL_REG_INTERP_LINEAR;
  const accel_array *hin[1] = {&in.a}, *hout[1] = {&want.a};
  ck_assert_int_eq(accel_reg_warp(cpu, t, hin, hout, 1, &wo), ACCEL_OK);
  dwarp_case c = {t, &in.a, &want.a, ACCEL_REG_INTERP_LINEAR, 0.0};
  ck_assert_int_eq(warp_device_layers(gpu, &c), ACCEL_OK);
  expect_layers_stayed(gpu, H * W);
  /* a device input with a host output */
  image host_out = make_image(ACCEL_DTYPE_F32, H, W, 3, LAYOUT_PADDED, 1);
  accel_array din = on_device_copy(&in.a);
  const accel_array *mixed_in[1] = {&din}, *mixed_out[1] = {&host_out.a};
  ck_assert_int_eq(accel_reg_warp(gpu, t, mixed_in, mixed_out, 1, &wo), ACCEL_OK);
  for (int64_t r = 0; r < H; r++)
    ck_assert_mem_eq((uint8_t *)host_out.mem + r * host_out.a.strides[0], (uint8_t *)want.mem + r * W * 12,
                     (size_t)W * 12);
  /* every CUDA call made to fail in turn: the CPU reruns it on host copies */
  ck_assert_int_ge(emulated_fault_sweep("reg.warp", warp_device_layers, &c), 2);
  free(din.data);
  free(host_out.mem);
  cubic_device_layers(t, &in.a, cpu);
  cubic_device_shapes(cpu);
  accel_reg_transform_destroy(t);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
  free(in.mem), free(want.mem);
}
END_TEST
#endif

static Suite *suite_reg_gpu(void) {
  TCase *tc = new_case("reg_gpu", 120, NULL, NULL);
#if EXPECT_CUDA
  tcase_add_test(tc, pyramid_equals_cpu_in_emulation);
  tcase_add_test(tc, pyramid_bands_equal_cpu_in_emulation);
  tcase_add_test(tc, pyramid_staged_in_chunks_equals_cpu_in_emulation);
  tcase_add_test(tc, warp_equals_cpu_in_emulation);
  tcase_add_test(tc, warp_tiles_equal_cpu_in_emulation);
  tcase_add_test(tc, warp_source_bands_equal_cpu_in_emulation);
  tcase_add_test(tc, warp_coefficient_bands_equal_cpu_in_emulation);
  tcase_add_test(tc, level_equals_cpu_in_emulation);
  tcase_add_test(tc, register_equals_cpu_in_emulation);
  tcase_add_test(tc, register_edge_cases_equal_cpu_in_emulation);
  tcase_add_test(tc, progress_callback_calling_the_same_gpu_context_fails_cleanly);
  tcase_add_test(tc, an_initial_transform_off_the_images_is_the_cpus_error);
  tcase_add_test(tc, a_mask_the_coarse_samples_miss_is_the_cpus_result);
  tcase_add_test(tc, level_over_the_budget_falls_back);
  tcase_add_test(tc, level_streams_images_over_the_budget);
  tcase_add_test(tc, register_streams_over_the_budget_in_emulation);
  tcase_add_test(tc, warp_progress_and_cancel_in_emulation);
  tcase_add_test(tc, warp_plans_room_for_the_uploaded_layer_in_emulation);
  tcase_add_test(tc, warp_too_small_a_budget_falls_back);
  tcase_add_test(tc, failures_fall_back_in_emulation);
  tcase_add_test(tc, register_holds_host_images_once_in_emulation);
  tcase_add_test(tc, register_reads_device_images_in_place);
  tcase_add_test(tc, warp_reads_device_layers_in_place);
  tcase_add_test(tc, long_lines_are_left_to_the_cpu_in_emulation);
#endif
  return suite_of("reg_gpu", tc);
}

ACCEL_TEST_MAIN(suite_reg_gpu)
