/* The registration's coarse pre-alignment (lib/reg/prealign.h): images made
 * here by sampling a continuous random texture through a known rigid
 * transform, the transform found again; bad arguments; the GPU op in host
 * emulation against the CPU op. */
#include "emulated_gpu.h"
#include "testutil.h"

#include "accel_config.h"
#include "reg/prealign.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

/* A smooth random texture: uniform random values on a lattice of 3-pixel
 * spacing, interpolated by the cubic B-spline, a continuous function that
 * the images sample exactly at any point (no resampling error). */
typedef struct texture {
  double x0, y0; /* the lattice's first node */
  int64_t n;     /* nodes a side */
  double *v;
} texture;

static double uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0;
}

/* A texture covering the disc of `radius` pixels about (cx, cy). */
static texture make_texture(uint64_t seed, double cx, double cy, double radius) {
  texture t;
  t.n = (int64_t)(2 * radius / 3) + 8;
  t.x0 = cx - 3.0 * (double)(t.n / 2);
  t.y0 = cy - 3.0 * (double)(t.n / 2);
  t.v = malloc(sizeof(double) * (size_t)(t.n * t.n));
  ck_assert_ptr_nonnull(t.v);
  for (int64_t i = 0; i < t.n * t.n; i++) t.v[i] = 100.0 + 50.0 * (uniform(&seed) - 0.5);
  return t;
}

static double bspline3(double x) {
  x = fabs(x);
  if (x < 1) return 2.0 / 3 - x * x + 0.5 * x * x * x;
  if (x < 2) return (2 - x) * (2 - x) * (2 - x) / 6;
  return 0;
}

static double texture_at(const texture *t, double x, double y) {
  const double u = (x - t->x0) / 3, v = (y - t->y0) / 3;
  const int64_t i0 = (int64_t)floor(u) - 1, j0 = (int64_t)floor(v) - 1;
  ck_assert(i0 >= 0 && j0 >= 0 && i0 + 3 < t->n && j0 + 3 < t->n);
  double s = 0;
  for (int64_t j = j0; j < j0 + 4; j++) {
    double row = 0;
    for (int64_t i = i0; i < i0 + 4; i++) row += t->v[j * t->n + i] * bspline3(u - (double)i);
    s += row * bspline3(v - (double)j);
  }
  return s;
}

/* A pair of level images (w x h and mw x mh level pixels, level pixel q =
 * full-resolution factor q + offset): fixed(P) = texture(P), moving(T(P)) =
 * fixed(P) with T(P) = R(angle)(P - c) + c + t, i.e. moving(Q) =
 * texture(R^T (Q - c - t) + c). */
typedef struct pair {
  int64_t w, h, mw, mh;
  int32_t factor, offset;
  double angle, t[2], c[2];
  float *fixed, *moving;
} pair;

static void make_pair(pair *p, uint64_t seed) {
  const double fw = (double)(p->factor * p->w), fh = (double)(p->factor * p->h);
  const double mw = (double)(p->factor * p->mw), mh = (double)(p->factor * p->mh);
  const double radius = hypot(fw > mw ? fw : mw, fh > mh ? fh : mh) + hypot(p->t[0], p->t[1]) + 16;
  texture tex = make_texture(seed, p->c[0], p->c[1], radius);
  p->fixed = malloc(sizeof(float) * (size_t)(p->w * p->h));
  p->moving = malloc(sizeof(float) * (size_t)(p->mw * p->mh));
  ck_assert(p->fixed && p->moving);
  const double co = cos(p->angle), si = sin(p->angle);
  for (int64_t r = 0; r < p->h; r++)
    for (int64_t c = 0; c < p->w; c++)
      p->fixed[r * p->w + c] =
          (float)texture_at(&tex, (double)(p->factor * c + p->offset), (double)(p->factor * r + p->offset));
  for (int64_t r = 0; r < p->mh; r++)
    for (int64_t c = 0; c < p->mw; c++) {
      const double dx = (double)(p->factor * c + p->offset) - p->c[0] - p->t[0];
      const double dy = (double)(p->factor * r + p->offset) - p->c[1] - p->t[1];
      p->moving[r * p->mw + c] = (float)texture_at(&tex, co * dx + si * dy + p->c[0], -si * dx + co * dy + p->c[1]);
    }
  free(tex.v);
}

static void free_pair(pair *p) {
  free(p->fixed);
  free(p->moving);
}

static accel_status run_pair(accel_ctx *ctx, const pair *p, int32_t mode, double params[3]) {
  return accel__reg_prealign(ctx, "test", p->fixed, p->w, p->h, p->moving, p->mw, p->mh, p->factor, p->offset, mode,
                             p->c, params);
}

/* The found transform within tol_px (translation, full-resolution pixels)
 * and tol_deg (angle) of the truth. */
static void expect_near(const pair *p, const double *got, double tol_px, double tol_deg, const char *what) {
  double da = (got[0] - p->angle) * 180 / PI;
  while (da > 180) da -= 360;
  while (da < -180) da += 360;
  const double dt = hypot(got[1] - p->t[0], got[2] - p->t[1]);
  ck_assert_msg(fabs(da) <= tol_deg && dt <= tol_px,
                "%s: found angle %.4f deg, t (%.3f, %.3f); truth %.4f deg, (%.3f, %.3f)", what, got[0] * 180 / PI,
                got[1], got[2], p->angle * 180 / PI, p->t[0], p->t[1]);
}

/* Translations at levels of factor 1, 2 and 3 (level 2 with an offset), a
 * non-integer shift each. */
START_TEST(translation_is_found) {
  static const struct {
    int64_t w, h;
    int32_t factor, offset;
    double tx, ty;
  } cases[] = {{256, 256, 1, 0, 5.37, -3.81}, {256, 200, 2, 1, 12.6, 7.3}, {180, 240, 3, 1, -20.45, 9.8}};
  const int i = _i;
  pair p = {
      cases[i].w, cases[i].h, cases[i].w, cases[i].h, cases[i].factor, cases[i].offset, 0.0, {cases[i].tx, cases[i].ty},
      {0, 0},     NULL,       NULL};
  p.c[0] = (double)(cases[i].w * cases[i].factor - 1) / 2;
  p.c[1] = (double)(cases[i].h * cases[i].factor - 1) / 2;
  make_pair(&p, 11 + (uint64_t)i);
  accel_ctx *ctx = cpu_ctx();
  double got[3] = {9, 9, 9};
  ck_assert_int_eq(run_pair(ctx, &p, 1, got), ACCEL_OK);
  ck_assert(got[0] == 0.0);
  expect_near(&p, got, 0.2, 0.0, "translation");
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, "reg.prealign", &st), ACCEL_OK);
  ck_assert_int_eq(st.cpu_runs, 1);
  accel_ctx_destroy(ctx);
  free_pair(&p);
}
END_TEST

/* Rotations of 3, -7, 25 and 160 degrees (the last beyond 90: the pi
 * ambiguity of the magnitude spectrum) with translations, at factor 2. */
START_TEST(rotation_is_found) {
  static const double deg[] = {3.0, -7.0, 25.0, 160.0};
  static const double tx[] = {4.2, -9.3, 6.1, -3.4}, ty[] = {-6.7, 2.45, 11.3, 5.5};
  const int i = _i;
  pair p = {240,  256, 240, 256, 2, 0, deg[i] * PI / 180, {tx[i], ty[i]}, {(480 - 1) / 2.0, (512 - 1) / 2.0},
            NULL, NULL};
  make_pair(&p, 101 + (uint64_t)i);
  accel_ctx *ctx = cpu_ctx();
  double got[3];
  ck_assert_int_eq(run_pair(ctx, &p, 2, got), ACCEL_OK);
  expect_near(&p, got, 0.2, 0.05, "rigid");
  accel_ctx_destroy(ctx);
  free_pair(&p);
}
END_TEST

/* A moving image of another size, and fixed images over the FFT cap (its
 * pixels averaged in blocks of 2, then sampled in blocks of 5). */
START_TEST(sizes_differ_and_large_images) {
  pair p = {300, 220, 256, 270, 1, 0, 4.0 * PI / 180, {-7.3, 3.9}, {149.5, 109.5}, NULL, NULL};
  make_pair(&p, 7);
  accel_ctx *ctx = cpu_ctx();
  double got[3];
  ck_assert_int_eq(run_pair(ctx, &p, 2, got), ACCEL_OK);
  expect_near(&p, got, 0.2, 0.05, "other sizes");
  free_pair(&p);
  pair q = {700, 600, 700, 600, 1, 0, -5.0 * PI / 180, {10.7, -4.2}, {349.5, 299.5}, NULL, NULL};
  make_pair(&q, 8);
  ck_assert_int_eq(run_pair(ctx, &q, 2, got), ACCEL_OK);
  expect_near(&q, got, 0.2, 0.05, "over the cap");
  free_pair(&q);
  /* blocks of 5 x 5 pixels, sampled at 4 x 4 points */
  pair b = {2200, 600, 2200, 600, 1, 0, -2.0 * PI / 180, {-15.2, 6.6}, {1099.5, 299.5}, NULL, NULL};
  make_pair(&b, 9);
  ck_assert_int_eq(run_pair(ctx, &b, 2, got), ACCEL_OK);
  expect_near(&b, got, 0.2, 0.05, "sparse blocks");
  accel_ctx_destroy(ctx);
  free_pair(&b);
}
END_TEST

START_TEST(bad_arguments_are_errors) {
  accel_ctx *ctx = cpu_ctx();
  float img[64], flat[64];
  for (int i = 0; i < 64; i++) img[i] = (float)((i * 37) % 11), flat[i] = 3.0f;
  const double c[2] = {3.5, 3.5};
  double out[3];
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", NULL, 8, 8, img, 8, 8, 1, 0, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, img, 8, 8, 1, 0, 1, c, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 1, 64, img, 8, 8, 1, 0, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, img, 8, 8, 0, 0, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, img, 8, 8, 1, -1, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, img, 8, 8, 1, 0, 3, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_str_eq(accel_last_error(ctx),
                   "f: pre-alignment: factor 1 (>= 1), offset 0 (>= 0), mode 3 (1 or 2), "
                   "centre (3.5, 3.5) (finite)");
  const double nan_c[2] = {NAN, 0};
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, img, 8, 8, 1, 0, 1, nan_c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, flat, 8, 8, 1, 0, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_str_eq(accel_last_error(ctx), "f: the moving image is constant: pre-alignment needs texture to correlate");
  img[5] = NAN;
  ck_assert_int_eq(accel__reg_prealign(ctx, "f", img, 8, 8, flat, 8, 8, 1, 0, 1, c, out), ACCEL_ERR_INVALID_ARG);
  ck_assert_str_eq(accel_last_error(ctx), "f: the fixed level image has a non-finite value at 5");
  accel_ctx_destroy(ctx);
}
END_TEST

#if !ACCEL_HAVE_KISSFFT
/* Without kissfft the CPU has no FFT: the stage is unsupported, with the reason. */
START_TEST(without_kissfft_unsupported) {
  pair p = {64, 64, 64, 64, 1, 0, 0.0, {1.5, 2.0}, {31.5, 31.5}, NULL, NULL};
  make_pair(&p, 3);
  accel_ctx *ctx = cpu_ctx();
  double got[3];
  ck_assert_int_eq(run_pair(ctx, &p, 1, got), ACCEL_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "without kissfft"));
  accel_ctx_destroy(ctx);
  free_pair(&p);
}
END_TEST
#endif

#if EXPECT_CUDA && ACCEL_HAVE_KISSFFT
/* The GPU op in host emulation (kissfft in place of cuFFT, the kernels'
 * per-element code on the host) gives the CPU op's result to the bit: the
 * same per-element functions, the same FFT. */
START_TEST(gpu_equals_cpu_in_emulation) {
  pair p = {200, 180, 210, 170, 2, 1, -7.0 * PI / 180, {6.3, -2.9}, {199.5, 179.5}, NULL, NULL};
  make_pair(&p, 21);
  accel_ctx *cpu = cpu_ctx();
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
  for (int32_t mode = 1; mode <= 2; mode++) {
    double a[3], b[3];
    ck_assert_int_eq(run_pair(cpu, &p, mode, a), ACCEL_OK);
    ck_assert_int_eq(run_pair(gpu, &p, mode, b), ACCEL_OK);
    for (int k = 0; k < 3; k++)
      ck_assert_msg(a[k] == b[k], "mode %d, parameter %d: CPU %.17g, GPU %.17g", mode, k, a[k], b[k]);
  }
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.prealign", &st), ACCEL_OK);
  ck_assert_int_eq(st.gpu_runs, 2);
  ck_assert_int_eq(st.fallbacks, 0);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
  free_pair(&p);
}
END_TEST

static accel_status prealign_on(accel_ctx *ctx, void *user) {
  const pair *p = user;
  double got[3];
  accel_status s = run_pair(ctx, p, 2, got);
  if (s == ACCEL_OK) expect_near(p, got, 0.5, 0.2, "fault sweep");
  return s;
}

/* Every CUDA call of the stage (the FFTs' too) failing in turn is reported
 * and falls back to the CPU (ALLOW) or fails (DENY). */
START_TEST(gpu_failures_fall_back_in_emulation) {
  pair p = {64, 64, 64, 64, 1, 0, 6.0 * PI / 180, {2.5, -1.25}, {31.5, 31.5}, NULL, NULL};
  make_pair(&p, 5);
  ck_assert_int_ge(emulated_fault_sweep("reg.prealign", prealign_on, &p), 20);
  free_pair(&p);
}
END_TEST

/* Too little device memory is a GPU failure: the CPU runs the stage. */
START_TEST(gpu_small_budget_falls_back) {
  pair p = {128, 128, 128, 128, 1, 0, 0.0, {3.5, 1.25}, {63.5, 63.5}, NULL, NULL};
  make_pair(&p, 9);
  set_emulated_gpu_budget(100000);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  set_emulated_gpu_budget(0);
  double got[3];
  ck_assert_int_eq(run_pair(gpu, &p, 1, got), ACCEL_OK);
  expect_near(&p, got, 0.5, 0.0, "small budget");
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] reg.prealign failed: "), 1);
  accel_ctx_destroy(gpu);
  free_pair(&p);
}
END_TEST
#endif

static Suite *prealign_suite(void) {
  TCase *tc = new_case("reg_prealign", 300, NULL, NULL);
  tcase_add_loop_test(tc, translation_is_found, 0, 3);
  tcase_add_loop_test(tc, rotation_is_found, 0, 4);
  tcase_add_test(tc, sizes_differ_and_large_images);
  tcase_add_test(tc, bad_arguments_are_errors);
#if !ACCEL_HAVE_KISSFFT
  tcase_add_test(tc, without_kissfft_unsupported);
#endif
#if EXPECT_CUDA && ACCEL_HAVE_KISSFFT
  tcase_add_test(tc, gpu_equals_cpu_in_emulation);
  tcase_add_test(tc, gpu_failures_fall_back_in_emulation);
  tcase_add_test(tc, gpu_small_budget_falls_back);
#endif
  return suite_of("reg_prealign", tc);
}

/* ------------------------------------------------------------ ../shared/data/reg */

#if ACCEL_HAVE_TIFF
/* A level of a full-resolution image, as the registration's pyramid makes
 * it: smoothed with a Gaussian of sigma 0.5 factor (mirrored edges), then
 * every factor-th pixel from 0. */
static float *level_of(const float *img, int64_t w, int64_t h, int32_t factor, int64_t *lw, int64_t *lh) {
  *lw = (w + factor - 1) / factor;
  *lh = (h + factor - 1) / factor;
  float *tmp = malloc(sizeof(float) * (size_t)(w * h)), *out = malloc(sizeof(float) * (size_t)(*lw * *lh));
  ck_assert(tmp && out);
  const double sg = 0.5 * factor;
  const int rad = factor > 1 ? (int)ceil(4 * sg) : 0;
  double k[64], ks = 0;
  for (int i = -rad; i <= rad; i++) ks += k[i + rad] = exp(-0.5 * i * i / (sg * sg));
#define MIRROR(i, n) ((i) < 0 ? -(i) : (i) >= (n) ? 2 * (n)-2 - (i) : (i))
  for (int64_t r = 0; r < h; r++) /* rows, along x */
    for (int64_t c = 0; c < w; c++) {
      double acc = 0;
      for (int i = -rad; i <= rad; i++) acc += k[i + rad] * img[r * w + MIRROR(c + i, w)];
      tmp[r * w + c] = (float)(acc / ks);
    }
  for (int64_t r = 0; r < *lh; r++) /* columns, along y, at the kept pixels only */
    for (int64_t c = 0; c < *lw; c++) {
      double acc = 0;
      for (int i = -rad; i <= rad; i++) acc += k[i + rad] * tmp[MIRROR(r * factor + i, h) * w + c * factor];
      out[r * *lw + c] = (float)(acc / ks);
    }
#undef MIRROR
  free(tmp);
  return out;
}

static float *load_gray(const char *dir, const char *name, int64_t *w, int64_t *h, accel_buffer **keep) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ck_assert_msg(accel_tiff_load_image(NULL, path, keep) == ACCEL_OK, "%s: %s", path, accel_last_error(NULL));
  accel_array a;
  ck_assert_int_eq(accel_buffer_view(*keep, &a), ACCEL_OK);
  ck_assert(a.dtype == ACCEL_DTYPE_F32 && a.ndim == 2);
  *h = a.shape[0];
  *w = a.shape[1];
  return a.data;
}

/* Cubic convolution (Keys 1981, a = -0.5) of img at (x, y); `fill` beyond the edge pixels. */
static double keys_at(const float *img, int64_t w, int64_t h, double x, double y, double fill) {
  if (x < 0 || y < 0 || x > (double)(w - 1) || y > (double)(h - 1)) return fill;
  const int64_t x0 = (int64_t)floor(x), y0 = (int64_t)floor(y);
  double s = 0;
  for (int64_t j = y0 - 1; j <= y0 + 2; j++)
    for (int64_t i = x0 - 1; i <= x0 + 2; i++) {
      double wt = 1;
      const double d[2] = {fabs(x - (double)i), fabs(y - (double)j)};
      for (int a = 0; a < 2; a++)
        wt *= d[a] < 1   ? 1.5 * d[a] * d[a] * d[a] - 2.5 * d[a] * d[a] + 1
              : d[a] < 2 ? -0.5 * d[a] * d[a] * d[a] + 2.5 * d[a] * d[a] - 4 * d[a] + 2
                         : 0;
      const int64_t ii = i < 0 ? 0 : i >= w ? w - 1 : i, jj = j < 0 ? 0 : j >= h ? h - 1 : j;
      s += wt * img[jj * w + ii];
    }
  return s;
}

static const char *const PAIRS[] = {"tex_512_s1", "tex_1024_s2"};

/* The fabric of the shared pairs (a woven twill of 7-pixel threads over a
 * photo) turned by 5 degrees and shifted, resampled here by cubic
 * convolution: found again at full resolution and at a level of factor 4. */
START_TEST(fabric_rigid_is_found) {
  char dir[1024];
  snprintf(dir, sizeof dir, SHARED_DATA_DIR "/reg/%s", PAIRS[_i / 2]);
  int64_t w, h;
  accel_buffer *buf;
  const float *fixed = load_gray(dir, "fixed.tif", &w, &h, &buf);
  const double angle = 5.0 * PI / 180, t[2] = {13.3, -8.6}, c[2] = {(double)(w - 1) / 2, (double)(h - 1) / 2};
  float *moving = malloc(sizeof(float) * (size_t)(w * h));
  ck_assert_ptr_nonnull(moving);
  double mean = 0;
  for (int64_t i = 0; i < w * h; i++) mean += fixed[i];
  mean /= (double)(w * h);
  for (int64_t r = 0; r < h; r++) /* moving(Q) = fixed(R^T (Q - c - t) + c) */
    for (int64_t col = 0; col < w; col++) {
      const double dx = (double)col - c[0] - t[0], dy = (double)r - c[1] - t[1];
      moving[r * w + col] = (float)keys_at(fixed, w, h, cos(angle) * dx + sin(angle) * dy + c[0],
                                           -sin(angle) * dx + cos(angle) * dy + c[1], mean);
    }
  const int32_t factor = _i % 2 ? 4 : 1;
  int64_t lw, lh;
  float *lf = level_of(fixed, w, h, factor, &lw, &lh), *lm = level_of(moving, w, h, factor, &lw, &lh);
  accel_ctx *ctx = cpu_ctx();
  double got[3];
  ck_assert_int_eq(accel__reg_prealign(ctx, "test", lf, lw, lh, lm, lw, lh, factor, 0, 2, c, got), ACCEL_OK);
  const pair p = {lw, lh, lw, lh, factor, 0, angle, {t[0], t[1]}, {c[0], c[1]}, NULL, NULL};
  expect_near(&p, got, 0.1, 0.05, dir);
  accel_ctx_destroy(ctx);
  free(lf);
  free(lm);
  free(moving);
  accel_buffer_destroy(buf);
}
END_TEST

/* The shared pairs themselves (a B-spline deformation and a small affine
 * part, not a rigid motion): the rigid start found at the coarsest level of
 * a 4-level pyramid (factor 8) brings the moving image closer, its mean
 * distance to the truth T(p) below the identity's. */
START_TEST(pairs_start_closer) {
  char dir[1024];
  snprintf(dir, sizeof dir, SHARED_DATA_DIR "/reg/%s", PAIRS[_i]);
  int64_t w, h, mw, mh, lw, lh, mlw, mlh;
  accel_buffer *fb, *mb;
  const float *fixed = load_gray(dir, "fixed.tif", &w, &h, &fb), *moving = load_gray(dir, "moving.tif", &mw, &mh, &mb);
  float *lf = level_of(fixed, w, h, 8, &lw, &lh), *lm = level_of(moving, mw, mh, 8, &mlw, &mlh);
  const double c[2] = {(double)(w - 1) / 2, (double)(h - 1) / 2};
  accel_ctx *ctx = cpu_ctx();
  double got[3];
  ck_assert_int_eq(accel__reg_prealign(ctx, "test", lf, lw, lh, lm, mlw, mlh, 8, 0, 2, c, got), ACCEL_OK);
  accel_buffer *bx = must_load(dir, "truth_dx"), *by = must_load(dir, "truth_dy");
  const accel_array ux = view_of(bx), uy = view_of(by);
  const float *dx = ux.data, *dy = uy.data;
  double before = 0, after = 0;
  for (int64_t r = 0; r < h; r++)
    for (int64_t col = 0; col < w; col++) {
      const double x = (double)col - c[0], y = (double)r - c[1];
      const double tx = cos(got[0]) * x - sin(got[0]) * y + c[0] + got[1] - (double)col;
      const double ty = sin(got[0]) * x + cos(got[0]) * y + c[1] + got[2] - (double)r;
      before += hypot(dx[r * w + col], dy[r * w + col]);
      after += hypot(dx[r * w + col] - tx, dy[r * w + col] - ty);
    }
  ck_assert_msg(after < 0.9 * before, "%s: mean distance to the truth %.3f px from the start found, %.3f from identity",
                dir, after / (double)(w * h), before / (double)(w * h));
  accel_buffer_destroy(bx);
  accel_buffer_destroy(by);
  accel_ctx_destroy(ctx);
  free(lf);
  free(lm);
  accel_buffer_destroy(fb);
  accel_buffer_destroy(mb);
}
END_TEST
#endif

static Suite *prealign_shared_suite(void) {
  TCase *tc = new_case("reg_prealign_shared", 300, NULL, NULL);
#if ACCEL_HAVE_TIFF
  tcase_add_loop_test(tc, fabric_rigid_is_found, 0, 4);
  tcase_add_loop_test(tc, pairs_start_closer, 0, 2);
#endif
  return suite_of("reg_prealign_shared", tc);
}

static const shared_run PREALIGN_SHARED = {"--shared", SHARED_DATA_DIR "/reg/tex_512_s1/fixed.tif",
                                           SHARED_DATA_DIR "/reg", prealign_shared_suite};

ACCEL_TEST_MAIN_SHARED(prealign_suite, PREALIGN_SHARED)
