/* The registration domain: the grid layout, options, registration against
 * the truth and elastix's figures.
 *
 *   test_reg            the committed pair (tests/data/reg/tex_256_s5, made by
 *                       ../shared/tools/make_reg_data.py) and the synthetic checks
 *   test_reg --shared   the pairs of ../shared/data/reg (exit 77, skipped,
 *                       when ../shared is absent)
 */
#include "testutil.h"

#include "accel/reg.h"
#include "accel_config.h"
#include "core/internal.h"
#include "reg/cpu.h"
#include "reg/cpu_lanes.h"
#include "reg/level.h"
#include "reg/transform.h"
#include "reg/prefilter.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* elastix 5.0.1's GridSize and GridOrigin for the shared pairs (their
 * TransformParameters.0.txt): 512^2 and 1024^2 at spacing 64. */
START_TEST(grid_is_elastix_layout) {
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(512, 512, 64, &g), ACCEL_OK);
  ck_assert_int_eq(g.size[0], 11);
  ck_assert_int_eq(g.size[1], 11);
  ck_assert(g.origin[0] == -64.5 && g.origin[1] == -64.5);
  ck_assert_int_eq(accel_reg_grid_for(1024, 1024, 64, &g), ACCEL_OK);
  ck_assert_int_eq(g.size[0], 19);
  ck_assert(g.origin[0] == -64.5);
  ck_assert_int_eq(accel_reg_grid_for(1024, 1024, 0, &g), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_grid_for(1, 50, 64, &g), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_grid_for(50, 1, 64, &g), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_grid_for(2, 2, 64, &g), ACCEL_OK);
  ck_assert_int_eq(g.size[0], 4);
  /* a grid that is too small: the error names the function the caller called */
  g.size[0] = 3;
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(t);
  const char *e = accel_last_error(NULL);
  ck_assert_msg(strstr(e, "accel_reg_transform_create") && strstr(e, "at least 4 nodes"), "%s", e);
}
END_TEST

START_TEST(presets) {
  accel_reg_options o;
  ck_assert_int_eq(accel_reg_options_init(&o, sizeof o), ACCEL_OK);
  ck_assert_int_eq(o.levels, 0); /* automatic */
  ck_assert(o.grid_spacing == 64);
  ck_assert_int_eq(o.iterations, 500);
  /* automatic levels: 4, or 5 from a shorter side of 2048 pixels */
  ck_assert_int_eq(accel_reg_levels_for(&o, 2047, 100000), 4);
  ck_assert_int_eq(accel_reg_levels_for(&o, 2048, 2048), 5);
  ck_assert_int_eq(accel_reg_levels_for(&o, 17320, 17320), 5);
  ck_assert_int_eq(accel_reg_levels_for(NULL, 256, 256), 4);
  o.levels = 3;
  ck_assert_int_eq(accel_reg_levels_for(&o, 17320, 17320), 3);
  ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
  ck_assert_int_eq(o.levels, 4); /* elastix's NumberOfResolutions, whatever the size */
  ck_assert_int_eq(accel_reg_levels_for(&o, 17320, 17320), 4);
  ck_assert_int_eq(o.optimizer, ACCEL_REG_OPTIMIZER_ASGD);
  ck_assert_int_eq(o.samples, 5000);
  ck_assert(o.tolerance == 0);
  ck_assert_int_eq(accel_reg_options_preset(&o, "fastest"), ACCEL_ERR_NOT_FOUND);
}
END_TEST

/* Cubic B-splines sum to 1 and reproduce linear functions: coefficients
 * c_ij = a + b * (node x position) give u(x) = a + b x inside the valid
 * region, and nothing outside it. */
START_TEST(bspline_reproduces_linear_fields) {
  accel_reg_grid g;
  accel_reg_transform *t;
  ck_assert_int_eq(accel_reg_grid_for(300, 200, 32, &g), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(t), nodes = n / 2;
  double *p = malloc((size_t)n * sizeof *p);
  for (int64_t k = 0; k < nodes; k++) {
    const double gx = g.origin[0] + (double)(k % g.size[0]) * g.spacing[0];
    const double gy = g.origin[1] + (double)(k / g.size[0]) * g.spacing[1];
    p[k] = 1.5 + 0.01 * gx;
    p[nodes + k] = -2.0 + 0.02 * gy - 0.005 * gx;
  }
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, n), ACCEL_OK);
  double xy[6] = {0, 0, 299, 199, 123.25, 77.5};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, xy, 3), ACCEL_OK);
  const double in[6] = {0, 0, 299, 199, 123.25, 77.5};
  for (int i = 0; i < 3; i++) {
    const double x = in[2 * i], y = in[2 * i + 1];
    ck_assert_double_eq_tol(xy[2 * i], x + 1.5 + 0.01 * x, 1e-12);
    ck_assert_double_eq_tol(xy[2 * i + 1], y - 2.0 + 0.02 * y - 0.005 * x, 1e-12);
  }
  double far[2] = {-500, 40};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, far, 1), ACCEL_OK);
  ck_assert(far[0] == -500 && far[1] == 40);
  /* the field agrees with the points */
  float buf[2][4][5];
  accel_array f;
  int64_t shape[3] = {2, 4, 5};
  accel_array_init(&f, buf, ACCEL_DTYPE_F32, 3, shape);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, 120, 75, &f), ACCEL_OK);
  ck_assert_float_eq_tol(buf[0][2][3], (float)(1.5 + 0.01 * 123), 1e-5);
  ck_assert_float_eq_tol(buf[1][2][3], (float)(-2.0 + 0.02 * 77 - 0.005 * 123), 1e-5);
  /* an initial translation applies first */
  const double shift[2] = {3, -4};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL), ACCEL_OK);
  double q[2] = {100, 100};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, q, 1), ACCEL_OK);
  ck_assert_double_eq_tol(q[0], 103 + 1.5 + 0.01 * 103, 1e-12);
  ck_assert_double_eq_tol(q[1], 96 - 2.0 + 0.02 * 96 - 0.005 * 103, 1e-12);
  free(p);
  accel_reg_transform_destroy(t);
}
END_TEST

/* ---------------------------------------------------------------- registration */

/* A pair of make_reg_data.py: images, the true field, elastix's figures. */
typedef struct pair {
  accel_buffer *fb, *mb, *dx, *dy;
  accel_array fixed, moving;
  int64_t w, h;
  double el_mean, el_p95, el_mse; /* elastix 5.0.1's interior field error and MSE (meta.txt) */
} pair;

static accel_array tiff_view(accel_ctx *ctx, const char *dir, const char *name, accel_buffer **b) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ck_assert_msg(accel_tiff_load(ctx, path, b, NULL) == ACCEL_OK, "%s: %s", path, accel_last_error(ctx));
  accel_array a = view_of(*b);
  if (a.ndim == 3 && a.shape[2] == 1) a.ndim = 2;
  ck_assert_int_eq(a.ndim, 2);
  return a;
}

static void load_pair(accel_ctx *ctx, const char *dir, pair *p) {
  memset(p, 0, sizeof *p);
  p->fixed = tiff_view(ctx, dir, "fixed.tif", &p->fb);
  p->moving = tiff_view(ctx, dir, "moving.tif", &p->mb);
  p->dx = must_load(dir, "truth_dx");
  p->dy = must_load(dir, "truth_dy");
  p->h = p->fixed.shape[0], p->w = p->fixed.shape[1];
  char path[1024], line[512];
  snprintf(path, sizeof path, "%s/meta.txt", dir);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  double before;
  while (fgets(line, sizeof line, f)) {
    sscanf(line, "elastix field error |u_elastix - u_truth| interior: mean %lf p95 %lf", &p->el_mean, &p->el_p95);
    sscanf(line, "interior MSE before %lf after %lf", &before, &p->el_mse);
  }
  fclose(f);
  ck_assert_msg(p->el_mean > 0 && p->el_p95 > 0 && p->el_mse > 0, "%s: elastix's figures are missing", path);
}

static void free_pair(pair *p) {
  accel_buffer_destroy(p->fb);
  accel_buffer_destroy(p->mb);
  accel_buffer_destroy(p->dx);
  accel_buffer_destroy(p->dy);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* |u - u_truth| over the interior (border px from each edge): mean and
 * 95th percentile (the p-th value of the sorted errors, p = 0.95 (n - 1)). */
static void field_error(const accel_reg_transform *t, const pair *p, int64_t border, double *mean, double *p95) {
  const int64_t w = p->w - 2 * border, h = p->h - 2 * border, n = w * h;
  double *xy = malloc(sizeof(double) * (size_t)(2 * n)), *e = malloc(sizeof(double) * (size_t)n);
  for (int64_t k = 0; k < n; k++) xy[2 * k] = (double)(border + k % w), xy[2 * k + 1] = (double)(border + k / w);
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, xy, n), ACCEL_OK);
  const float *tx = view_of(p->dx).data, *ty = view_of(p->dy).data;
  double sum = 0;
  for (int64_t k = 0; k < n; k++) {
    const int64_t i = (border + k / w) * p->w + border + k % w;
    e[k] = hypot(xy[2 * k] - (double)(border + k % w) - tx[i], xy[2 * k + 1] - (double)(border + k / w) - ty[i]);
    sum += e[k];
  }
  qsort(e, (size_t)n, sizeof *e, cmp_double);
  *mean = sum / (double)n;
  *p95 = e[(int64_t)(0.95 * (double)(n - 1))];
  free(xy);
  free(e);
}

/* Cubic B-spline interpolation written for the test (Unser's recursive
 * prefilter, mirror boundaries, the whole line for the causal start). */
static void prefilter_line(double *c, int64_t n, int64_t stride) {
  const double z = sqrt(3.0) - 2.0;
  double s = 0, zk = 1;
  for (int64_t k = 0; k < n; k++, zk *= z) s += zk * 6.0 * c[k * stride];
  c[0] = s;
  for (int64_t k = 1; k < n; k++) c[k * stride] = 6.0 * c[k * stride] + z * c[(k - 1) * stride];
  c[(n - 1) * stride] = z / (z * z - 1) * (c[(n - 1) * stride] + z * c[(n - 2) * stride]);
  for (int64_t k = n - 2; k >= 0; k--) c[k * stride] = z * (c[(k + 1) * stride] - c[k * stride]);
}

static double beta3(double t) {
  t = fabs(t);
  return t < 1 ? 2.0 / 3 - t * t + t * t * t / 2 : t < 2 ? (2 - t) * (2 - t) * (2 - t) / 6 : 0;
}

static int64_t mirror(int64_t i, int64_t n) {
  i = i < 0 ? -i : i;
  return i >= n ? 2 * (n - 1) - i : i;
}

/* The interior MSE of moving(T(p)) (cubic) against fixed(p). */
static double mse_after(const accel_reg_transform *t, const pair *p, int64_t border) {
  const int64_t W = p->moving.shape[1], H = p->moving.shape[0];
  double *c = malloc(sizeof(double) * (size_t)(W * H));
  const float *m = p->moving.data, *f = p->fixed.data;
  for (int64_t k = 0; k < W * H; k++) c[k] = m[k];
  for (int64_t r = 0; r < H; r++) prefilter_line(c + r * W, W, 1);
  for (int64_t x = 0; x < W; x++) prefilter_line(c + x, H, W);
  double sum = 0;
  int64_t n = 0;
  for (int64_t r = border; r < p->h - border; r++)
    for (int64_t x = border; x < p->w - border; x++) {
      double q[2] = {(double)x, (double)r};
      accel_reg_transform_points(NULL, t, q, 1);
      const int64_t x0 = (int64_t)floor(q[0]), y0 = (int64_t)floor(q[1]);
      double v = 0;
      for (int64_t j = y0 - 1; j <= y0 + 2; j++)
        for (int64_t i = x0 - 1; i <= x0 + 2; i++)
          v += c[mirror(j, H) * W + mirror(i, W)] * beta3(q[0] - (double)i) * beta3(q[1] - (double)j);
      sum += (v - f[r * p->w + x]) * (v - f[r * p->w + x]);
      n++;
    }
  free(c);
  return sum / (double)n;
}

static accel_ctx *ctx_threads(int threads) {
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.cpu_threads = threads;
  accel_ctx *ctx;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  return ctx;
}

static accel_reg_transform *must_register(accel_ctx *ctx, const pair *p, const accel_reg_options *o,
                                          accel_reg_report *rep) {
  accel_reg_transform *t = NULL;
  accel_status s = accel_reg_register(ctx, &p->fixed, &p->moving, NULL, NULL, o, &t, rep);
  ck_assert_msg(s == ACCEL_OK, "register: %s", accel_last_error(ctx));
  return t;
}

static int32_t total_iterations(const accel_reg_report *r) {
  int32_t n = 0;
  for (int l = 0; l < r->levels; l++) n += r->level[l].iterations;
  return n;
}

static void committed_pair(accel_ctx *ctx, pair *p) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/reg/tex_256_s5", test_data_dir());
  load_pair(ctx, dir, p);
}

/* The default registration of a pair: the field error (border 64 px) and
 * the MSE after it no worse than elastix's; early stopping ends it in at
 * most half the iterations with a mean error within 10 % of the run
 * without it (tolerance 0). */
static void check_pair(accel_ctx *ctx, const pair *p, const char *name) {
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *t = must_register(ctx, p, &o, &rep);
  double mean, p95;
  field_error(t, p, 64, &mean, &p95);
  const double mse = mse_after(t, p, 64);
  fprintf(stderr, "%s: field error mean %.4f p95 %.4f (elastix %.4f %.4f), MSE %.3f (elastix %.3f), %d iterations\n",
          name, mean, p95, p->el_mean, p->el_p95, mse, p->el_mse, (int)total_iterations(&rep));
  ck_assert_msg(mean <= p->el_mean && p95 <= p->el_p95, "%s: field error %g %g, elastix %g %g", name, mean, p95,
                p->el_mean, p->el_p95);
  ck_assert_msg(mse <= p->el_mse, "%s: MSE %g, elastix %g", name, mse, p->el_mse);
  ck_assert_int_le(2 * total_iterations(&rep), rep.levels * o.iterations);
  for (int l = 0; l < rep.levels; l++)
    ck_assert(rep.level[l].stop == ACCEL_REG_STOP_CONVERGED || rep.level[l].stop == ACCEL_REG_STOP_STALLED);
  o.tolerance = 0;
  accel_reg_report full;
  accel_reg_report_init(&full, sizeof full);
  accel_reg_transform *tf = must_register(ctx, p, &o, &full);
  double fmean, fp95;
  field_error(tf, p, 64, &fmean, &fp95);
  fprintf(stderr, "%s without early stopping: mean %.4f p95 %.4f, %d iterations\n", name, fmean, fp95,
          (int)total_iterations(&full));
  ck_assert_msg(mean <= 1.1 * fmean, "%s: early stopping's mean error %g, the full run's %g", name, mean, fmean);
  accel_reg_transform_destroy(t);
  accel_reg_transform_destroy(tf);
}

START_TEST(committed_pair_beats_elastix) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  check_pair(ctx, &p, "tex_256_s5");
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* More training samples than a level has pixels: every pixel once, and
 * the Gauss-Newton matrix still its share of them. It took every k-th
 * sample with k from the samples asked for, not the ones drawn: the
 * coarsest level's matrix then had almost none and the level stopped after
 * one step (2,000,000 samples on this pair), and on the 1024^2 pair the
 * mean error was 0.175 px. */
START_TEST(more_samples_than_pixels) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.samples = 2000000;
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *t = must_register(ctx, &p, &o, &rep);
  for (int l = 0; l < rep.levels; l++) {
    ck_assert_int_eq(rep.level[l].samples, rep.level[l].width * rep.level[l].height);
    ck_assert_msg(rep.level[l].iterations >= 5, "level %d: %d iterations", l, (int)rep.level[l].iterations);
  }
  double mean, p95;
  field_error(t, &p, 64, &mean, &p95);
  fprintf(stderr, "tex_256_s5, 2,000,000 samples: field error mean %.4f p95 %.4f\n", mean, p95);
  ck_assert_msg(mean <= p.el_mean && p95 <= 1.25 * p.el_p95, "field error %g %g, elastix %g %g", mean, p95, p.el_mean,
                p.el_p95);
  accel_reg_transform_destroy(t);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Few validation samples: Gauss-Newton takes a step where their objective
 * falls, so with one of them the noise decided, every level stalled and
 * the mean error was 0.040 px (0.25 px on the 1024^2 shared pair). Fewer
 * than 5000 are raised to 5000; with ASGD, 0 (none) is allowed. */
START_TEST(few_validation_samples_are_raised) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.validation_samples = 1;
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *t = must_register(ctx, &p, &o, &rep);
  double mean, p95;
  field_error(t, &p, 64, &mean, &p95);
  fprintf(stderr, "tex_256_s5, 1 validation sample: field error mean %.4f p95 %.4f\n", mean, p95);
  ck_assert_msg(mean <= p.el_mean && p95 <= p.el_p95, "field error %g %g, elastix %g %g", mean, p95, p.el_mean,
                p.el_p95);
  accel_reg_transform_destroy(t);
  accel_reg_options_preset(&o, "elastix");
  o.validation_samples = 0;
  o.iterations = 20;
  t = must_register(ctx, &p, &o, &rep);
  accel_reg_transform_destroy(t);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The centred cubic B-spline (order 0) and its first two derivatives. */
static double spline(double t, int order) {
  const double a = fabs(t), sg = t < 0 ? -1.0 : 1.0;
  if (a >= 2) return 0;
  if (a < 1) return order == 0 ? 2.0 / 3 - a * a + a * a * a / 2 : order == 1 ? sg * (1.5 * a * a - 2 * a) : 3 * a - 2;
  return order == 0 ? (2 - a) * (2 - a) * (2 - a) / 6 : order == 1 ? -sg * (2 - a) * (2 - a) / 2 : 2 - a;
}

/* The bending energy of one-level registrations from `init`: the
 * objective at the start with weight 1 less that with weight 0. */
static double bending_energy(accel_ctx *ctx, pair *p, const uint8_t *mask, accel_reg_transform *init, double spacing) {
  double first[2];
  const accel_array m = mask ? array_of((void *)mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){p->h, p->w}) : p->fixed;
  for (int w = 0; w < 2; w++) {
    accel_reg_options o;
    accel_reg_options_init(&o, sizeof o);
    o.levels = 1;
    o.iterations = 1;
    o.grid_spacing = spacing;
    o.bending_weight = w;
    accel_reg_report rep;
    accel_reg_report_init(&rep, sizeof rep);
    accel_reg_transform *t = NULL;
    ck_assert_int_eq(accel_reg_register(ctx, &p->fixed, &p->moving, mask ? &m : NULL, init, &o, &t, &rep), ACCEL_OK);
    first[w] = rep.level[0].metric_first;
    accel_reg_transform_destroy(t);
  }
  return first[1] - first[0];
}

/* u_xx^2 + 2 u_xy^2 + u_yy^2 of both components at pixel (x, y), from the
 * control points c and the B-spline's own derivatives (this file's, not
 * the library's tables). */
static double bending_at(const accel_reg_grid *g, const double *c, double x, double y) {
  const double cx = (x - g->origin[0]) / g->spacing[0], cy = (y - g->origin[1]) / g->spacing[1];
  double f = 0;
  for (int d = 0; d < 2; d++) {
    double uxx = 0, uyy = 0, uxy = 0;
    for (int64_t j = (int64_t)floor(cy) - 1; j <= (int64_t)floor(cy) + 2; j++)
      for (int64_t i = (int64_t)floor(cx) - 1; i <= (int64_t)floor(cx) + 2; i++) {
        const double v = c[d * g->size[0] * g->size[1] + j * g->size[0] + i];
        uxx += v * spline(cx - (double)i, 2) * spline(cy - (double)j, 0);
        uyy += v * spline(cx - (double)i, 0) * spline(cy - (double)j, 2);
        uxy += v * spline(cx - (double)i, 1) * spline(cy - (double)j, 1);
      }
    uxx /= g->spacing[0] * g->spacing[0], uyy /= g->spacing[1] * g->spacing[1], uxy /= g->spacing[0] * g->spacing[1];
    f += uxx * uxx + 2 * uxy * uxy + uyy * uyy;
  }
  return f;
}

/* The mean of bending_at over a w x h image's pixels (inside the mask,
 * when one is given). */
static double bending_pixels(const accel_reg_grid *g, const double *c, int64_t w, int64_t h, const uint8_t *mask) {
  double sum = 0, wsum = 0;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++) {
      if (!mask || mask[y * w + x]) sum += bending_at(g, c, (double)x, (double)y), wsum += 1;
    }
  return sum / wsum;
}

/* The committed pair cut to 256 rows of 200 columns and a 48 px grid (the
 * axes' tables differ: their nodes, origins), with control points c that
 * bend the left of the image more than its right (init: a transform of
 * them). */
typedef struct bending_case {
  accel_ctx *ctx;
  pair p;
  accel_reg_grid g;
  accel_reg_transform *init;
  double *c;
} bending_case;

static void bending_case_init(bending_case *b) {
  b->ctx = cpu_ctx();
  committed_pair(b->ctx, &b->p);
  b->p.w = b->p.fixed.shape[1] = b->p.moving.shape[1] = 200;
  ck_assert_int_eq(accel_reg_grid_for(b->p.w, b->p.h, 48, &b->g), ACCEL_OK);
  ck_assert(b->g.size[0] != b->g.size[1] && b->g.origin[0] != b->g.origin[1]);
  ck_assert_int_eq(accel_reg_transform_create(b->ctx, &b->g, &b->init), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(b->init);
  b->c = malloc(sizeof(double) * (size_t)n);
  for (int64_t k = 0; k < n; k++)
    b->c[k] = (3 * sin(0.7 * (double)k) + (k % 5 == 0 ? 6 : 0)) * (k % b->g.size[0] < 4 ? 1.0 : 0.3);
  ck_assert_int_eq(accel_reg_transform_set_parameters(b->init, b->c, n), ACCEL_OK);
}

static void bending_case_free(bending_case *b) {
  free(b->c);
  accel_reg_transform_destroy(b->init);
  free_pair(&b->p);
  accel_ctx_destroy(b->ctx);
}

/* The bending energy is the mean over the image of u_xx^2 + 2 u_xy^2 +
 * u_yy^2 (both components), as elastix's TransformBendingEnergyPenalty
 * averages it over its samples, against the mean over the pixels. It
 * was the integral over the whole control grid's support,
 * outside the image too, divided by the image's area: 300 times elastix's
 * value for elastix's own result on a shared pair. */
START_TEST(bending_energy_is_the_mean_over_the_image) {
  bending_case b;
  bending_case_init(&b);
  pair *p = &b.p;
  const double be = bending_energy(b.ctx, p, NULL, b.init, 48), mean = bending_pixels(&b.g, b.c, p->w, p->h, NULL);
  fprintf(stderr, "bending energy %.6g, the mean over the pixels %.6g\n", be, mean);
  ck_assert_msg(fabs(be - mean) <= 1e-6 * mean, "bending energy %g, the pixels' mean %g", be, mean);
  bending_case_free(&b);
}
END_TEST

/* With a mask, the mean over the pixels inside it (elastix's samples lie
 * there). It was the mean over the whole image, which the test checks
 * would fail: a mask of whole cells, and a disc whose edge crosses cells. */
START_TEST(bending_energy_with_a_mask_is_the_mean_inside_it) {
  bending_case b;
  bending_case_init(&b);
  pair *p = &b.p;
  uint8_t *mask = calloc((size_t)(p->w * p->h), 1);
  const double whole = bending_pixels(&b.g, b.c, p->w, p->h, NULL);
  for (int shape = 0; shape < 2; shape++) {
    /* shape 0: the columns of the cells from the third on (grid coordinate
     * 3 onwards); 1: a disc of radius 70 at (120, 140) */
    const double edge = ceil(b.g.origin[0] + 3 * b.g.spacing[0]);
    for (int64_t y = 0; y < p->h; y++)
      for (int64_t x = 0; x < p->w; x++)
        mask[y * p->w + x] = shape == 0 ? x >= edge : hypot((double)x - 120, (double)y - 140) <= 70;
    const double be = bending_energy(b.ctx, p, mask, b.init, 48), mean = bending_pixels(&b.g, b.c, p->w, p->h, mask);
    fprintf(stderr, "mask %d: bending energy %.6g, the mean over its pixels %.6g (over the image %.6g)\n", shape, be,
            mean, whole);
    ck_assert_msg(fabs(be - mean) <= 1e-6 * mean, "mask %d: bending energy %g, the mean inside %g", shape, be, mean);
    ck_assert(fabs(whole - mean) > 0.1 * mean); /* the whole image's mean would fail */
  }
  free(mask);
  bending_case_free(&b);
}
END_TEST

/* With an initial rotation, the mean over the lattice points (q = L(p),
 * where the B-spline is evaluated) that lie in the fixed image's
 * footprint: it was over the footprint's bounding box, whose corners the
 * image does not reach. */
START_TEST(bending_energy_with_a_rotation_is_the_mean_over_the_footprint) {
  bending_case b;
  bending_case_init(&b);
  pair *p = &b.p;
  const double angle = 0.35, centre[2] = {100, 128}, rigid[3] = {angle, 0, 0};
  ck_assert_int_eq(accel_reg_transform_set_initial(b.ctx, b.init, ACCEL_REG_LINEAR_RIGID, rigid, centre), ACCEL_OK);
  const double be = bending_energy(b.ctx, p, NULL, b.init, 48);
  /* the integer points q of the grid's valid region (grid coordinates
   * [1, size - 2)) whose p = R^T (q - centre) + centre lies in the image,
   * and those of the footprint's bounding box */
  double sum = 0, box_sum = 0;
  int64_t count = 0, box_count = 0;
  const double co = cos(angle), si = sin(angle);
  double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
  for (int k = 0; k < 4; k++) {
    const double x = (k & 1) ? (double)(p->w - 1) : 0, y = (k & 2) ? (double)(p->h - 1) : 0;
    const double qx = co * (x - centre[0]) - si * (y - centre[1]) + centre[0];
    const double qy = si * (x - centre[0]) + co * (y - centre[1]) + centre[1];
    lo[0] = fmin(lo[0], qx), hi[0] = fmax(hi[0], qx), lo[1] = fmin(lo[1], qy), hi[1] = fmax(hi[1], qy);
  }
  for (int64_t qy = (int64_t)ceil(lo[1]); qy <= (int64_t)floor(hi[1]); qy++)
    for (int64_t qx = (int64_t)ceil(lo[0]); qx <= (int64_t)floor(hi[0]); qx++) {
      const double gx = ((double)qx - b.g.origin[0]) / b.g.spacing[0],
                   gy = ((double)qy - b.g.origin[1]) / b.g.spacing[1];
      if (!(gx >= 1 && gx < (double)b.g.size[0] - 2 && gy >= 1 && gy < (double)b.g.size[1] - 2)) continue;
      const double f = bending_at(&b.g, b.c, (double)qx, (double)qy);
      box_sum += f, box_count++;
      const double dx = (double)qx - centre[0], dy = (double)qy - centre[1];
      const double px = co * dx + si * dy + centre[0], py = -si * dx + co * dy + centre[1];
      if (px >= 0 && px <= (double)(p->w - 1) && py >= 0 && py <= (double)(p->h - 1)) sum += f, count++;
    }
  const double mean = sum / (double)count, box = box_sum / (double)box_count;
  fprintf(stderr, "rotated: bending energy %.6g, the mean over the footprint %.6g (over its box %.6g)\n", be, mean,
          box);
  ck_assert_msg(fabs(be - mean) <= 1e-6 * mean, "bending energy %g, the footprint's mean %g", be, mean);
  ck_assert(fabs(box - mean) > 0.02 * mean); /* the box's mean (3.6% off) would fail */
  bending_case_free(&b);
}
END_TEST

/* With a mask, the validation set still holds `validation_samples`
 * samples inside it: they were drawn over the whole level and those
 * outside the mask dropped, so a 128 x 96 mask on a 512^2 level (4.7%)
 * kept about 230 of 5000. Counted here by drawing the set as the
 * evaluators do. */
START_TEST(validation_samples_inside_a_mask) {
  enum { N = 512 };
  static uint8_t mask[N * N];
  for (int y = 200; y < 296; y++)
    for (int x = 300; x < 428; x++) mask[y * N + x] = 1;
  accel_reg_grid grid;
  ck_assert_int_eq(accel_reg_grid_for(N, N, 64, &grid), ACCEL_OK);
  accel_reg_transform *t;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &grid, &t), ACCEL_OK);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.validation_samples = 5000;
  o.levels = 1;
  accel__reg_level_job job;
  memset(&job, 0, sizeof job);
  job.fixed_width = job.moving_width = job.fixed_height = job.moving_height = N;
  job.mask = mask;
  job.factor = 1;
  job.options = &o;
  accel__reg_xform_of(t, &job.xf);
  accel__call call;
  memset(&call, 0, sizeof call);
  accel__reg_geom g;
  ck_assert_int_eq(accel__reg_geom_init(&call, &job, &g), ACCEL_OK);
  const double density = accel__reg_density(&g, ACCEL__REG_SET_VALID);
  const uint64_t stream = accel__reg_stream(&g, ACCEL__REG_SET_VALID, 0);
  int64_t inside = 0;
  for (int64_t cy = 0; cy < g.ay.cells; cy++)
    for (int64_t cx = 0; cx < g.ax.cells; cx++) {
      const int64_t P = (g.ax.first[cx + 1] - g.ax.first[cx]) * (g.ay.first[cy + 1] - g.ay.first[cy]);
      const int64_t ns = accel__reg_cell_samples(P, density);
      for (int64_t k = 0; k < ns; k++) {
        int64_t ix, iy;
        accel__reg_sample_at(&g.ax, &g.ay, cx, cy, k, ns, density, g.seed, g.level, stream, &ix, &iy);
        inside += mask[iy * N + ix] != 0;
      }
    }
  fprintf(stderr, "validation samples inside a 4.7%% mask: %lld of 5000\n", (long long)inside);
  ck_assert_msg(inside >= 4500 && inside <= 5500, "%lld validation samples inside the mask", (long long)inside);
  accel__reg_geom_free(&g);
  accel_reg_transform_destroy(t);
}
END_TEST

/* ASGD with a large bending weight: its step size was estimated from the
 * metric's gradient alone, the steps grew without bound (parameters of
 * 1e8 px) and the level reported `converged` on the sentinel value of no
 * samples. The estimate now includes the bending gradient: the result is
 * Gauss-Newton's (the same stiff transform at that weight). */
START_TEST(asgd_with_a_large_bending_weight_stays_bounded) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.metric = ACCEL_REG_METRIC_NCC;
  o.bending_weight = 1e6;
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *gn = must_register(ctx, &p, &o, &rep);
  o.optimizer = ACCEL_REG_OPTIMIZER_ASGD;
  accel_reg_transform *sg = must_register(ctx, &p, &o, &rep);
  ck_assert(rep.level[rep.levels - 1].metric_last < 1);
  double gmean, gp95, amean, ap95;
  field_error(gn, &p, 64, &gmean, &gp95);
  field_error(sg, &p, 64, &amean, &ap95);
  fprintf(stderr, "tex_256_s5, NCC, bending 1e6: Gauss-Newton %.4f %.4f, ASGD %.4f %.4f\n", gmean, gp95, amean, ap95);
  ck_assert_msg(fabs(amean - gmean) <= 0.1 * gmean, "ASGD %g, Gauss-Newton %g", amean, gmean);
  accel_reg_transform_destroy(gn);
  accel_reg_transform_destroy(sg);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A 7 x 7 texture and its copy rolled one column right, with the default
 * (four) levels: the coarsest of 1 x 1 pixels. Its matrix had a vanishing
 * share of the samples too (above), and the result moved the wrong way
 * (u_x -0.84 at the centre). */
START_TEST(a_7x7_shift_with_the_default_levels) {
  accel_ctx *ctx = cpu_ctx();
  float f[49], m[49];
  for (int y = 0; y < 7; y++)
    for (int x = 0; x < 7; x++)
      f[y * 7 + x] = (float)(128 + 60 * sin(x / 5.0) * cos(y / 7.0) + 20 * sin((x + y) / 3.0));
  for (int y = 0; y < 7; y++)
    for (int x = 0; x < 7; x++) m[y * 7 + x] = f[y * 7 + (x + 6) % 7];
  const accel_array a = array_of(f, ACCEL_DTYPE_F32, 2, (const int64_t[]){7, 7});
  const accel_array b = array_of(m, ACCEL_DTYPE_F32, 2, (const int64_t[]){7, 7});
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  accel_reg_transform *t = NULL;
  ck_assert_msg(accel_reg_register(ctx, &a, &b, NULL, NULL, &o, &t, NULL) == ACCEL_OK, "%s", accel_last_error(ctx));
  double xy[2] = {3, 3};
  ck_assert_int_eq(accel_reg_transform_points(ctx, t, xy, 1), ACCEL_OK);
  ck_assert_msg(xy[0] - 3 > 0.5 && xy[0] - 3 < 1.5 && fabs(xy[1] - 3) < 0.3, "u at the centre %g %g", xy[0] - 3,
                xy[1] - 3);
  accel_reg_transform_destroy(t);
  accel_ctx_destroy(ctx);
}
END_TEST

/* With the FFT pre-alignment the result has a rigid initial part and stays
 * within twice elastix's error on the committed pair (whose misalignment is
 * small: there the pre-alignment only moves the start, measured 0.038 px
 * mean against 0.026 without it); with an initial linear part it is
 * refused. */
START_TEST(prealigned_registration) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.prealign = 2;
  accel_reg_transform *t = must_register(ctx, &p, &o, NULL);
  accel_reg_linear_kind kind;
  double v[6], c[2];
  ck_assert_int_eq(accel_reg_transform_initial(t, &kind, v, c), ACCEL_OK);
  ck_assert_int_eq(kind, ACCEL_REG_LINEAR_RIGID);
  ck_assert(c[0] == 127.5 && c[1] == 127.5);
  double mean, p95;
  field_error(t, &p, 64, &mean, &p95);
  fprintf(stderr, "tex_256_s5 prealigned: field error mean %.4f p95 %.4f\n", mean, p95);
  ck_assert_msg(mean <= 2 * p.el_mean && p95 <= 2 * p.el_p95, "prealigned: field error %g %g, elastix %g %g", mean, p95,
                p.el_mean, p.el_p95);
  accel_reg_transform *again = NULL;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, t, &o, &again, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(again);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "exclude each other"));
  accel_reg_transform_destroy(t);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Options for the quick tests: two levels, few iterations. */
static accel_reg_options quick_options(void) {
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2;
  o.iterations = 6;
  return o;
}

static void params_of(const accel_reg_transform *t, double **p, int64_t *n) {
  *n = accel_reg_transform_count(t);
  *p = malloc(sizeof(double) * (size_t)*n);
  ck_assert_int_eq(accel_reg_transform_parameters(t, *p, *n), ACCEL_OK);
}

static void assert_same_params(const accel_reg_transform *a, const accel_reg_transform *b) {
  double *pa, *pb;
  int64_t na, nb;
  params_of(a, &pa, &na);
  params_of(b, &pb, &nb);
  ck_assert_int_eq(na, nb);
  ck_assert_msg(memcmp(pa, pb, sizeof(double) * (size_t)na) == 0, "the parameters differ");
  free(pa);
  free(pb);
}

/* Same seed, same parameters, bit for bit, on 1 and 2 threads; both
 * metrics, with and without renewal. */
START_TEST(same_result_on_one_and_two_threads) {
  accel_ctx *one = ctx_threads(1), *two = ctx_threads(2);
  pair p;
  committed_pair(one, &p);
  accel_reg_options o = quick_options();
  o.metric = _i & 1 ? ACCEL_REG_METRIC_NCC : ACCEL_REG_METRIC_MSE;
  o.renew_samples = _i & 2 ? 0 : 1;
  accel_reg_transform *a = must_register(one, &p, &o, NULL), *b = must_register(two, &p, &o, NULL);
  assert_same_params(a, b);
  accel_reg_transform_destroy(b);
  o.seed = 99;
  b = must_register(two, &p, &o, NULL);
  double *pa, *pb;
  int64_t n;
  params_of(a, &pa, &n);
  params_of(b, &pb, &n);
  ck_assert_msg(memcmp(pa, pb, sizeof(double) * (size_t)n) != 0, "another seed gave the same parameters");
  free(pa);
  free(pb);
  accel_reg_transform_destroy(a);
  accel_reg_transform_destroy(b);
  free_pair(&p);
  accel_ctx_destroy(one);
  accel_ctx_destroy(two);
}
END_TEST

/* Register f and m with *path set (the path a test compares against),
 * then without it: the parameters are the same to the bit. The switch is
 * cleared before any assertion. */
static void assert_path_changes_nothing(accel_ctx *ctx, const accel_array *f, const accel_array *m,
                                        const accel_array *mask, const accel_reg_transform *initial,
                                        const accel_reg_options *o, bool *path) {
  accel_reg_transform *a = NULL, *b = NULL;
  *path = true;
  const accel_status first = accel_reg_register(ctx, f, m, mask, initial, o, &a, NULL);
  *path = false;
  ck_assert_int_eq(first, ACCEL_OK);
  ck_assert_int_eq(accel_reg_register(ctx, f, m, mask, initial, o, &b, NULL), ACCEL_OK);
  assert_same_params(a, b);
  accel_reg_transform_destroy(a);
  accel_reg_transform_destroy(b);
}

/* The lane-parallel evaluator (lib/reg/cpu_level_lanes.c) gives the scalar
 * evaluator's parameters to the bit: MSE and NCC, Gauss-Newton (samples
 * outside the moving image read from its mirrored extension) and ASGD
 * (skipped), every pixel or random samples, a mask over half the image, an
 * odd-sized crop (cells and samples at the mirrored edges), a translation
 * and a rigid pre-alignment (the fixed image read at the initial part's
 * inverse; the rigid one with the mask), and an initial transform with a
 * B-spline part (added to the coarse levels' displacements), without and
 * with a rigid part. Processors
 * without AVX2 compare the scalar code with itself. */
START_TEST(lanes_equal_the_scalar_evaluator) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o = quick_options();
  o.metric = _i == 1 ? ACCEL_REG_METRIC_NCC : ACCEL_REG_METRIC_MSE;
  if (_i == 2) ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
  if (_i == 2) o.levels = 2, o.iterations = 20;
  if (_i == 3) o.samples = 0;
  if (_i == 5) o.prealign = 1;
  if (_i == 6) o.prealign = 2;
  uint8_t *mask = NULL;
  accel_array mk = p.fixed, f = p.fixed, m = p.moving;
  accel_reg_transform *initial = NULL;
  if (_i >= 7) { /* a short run's result starts the compared ones; 8: with a rigid part */
    accel_reg_options short_run = o;
    short_run.levels = 2, short_run.iterations = 3;
    if (_i == 8) short_run.prealign = 2;
    ck_assert_int_eq(accel_reg_register(ctx, &f, &m, NULL, NULL, &short_run, &initial, NULL), ACCEL_OK);
  }
  if (_i == 3 || _i == 6) {
    mask = malloc((size_t)(p.w * p.h));
    for (int64_t k = 0; k < p.w * p.h; k++) mask[k] = (k % p.w) < p.w / 2 + 17;
    mk = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){p.h, p.w});
  }
  if (_i == 4) /* a 203 x 237 crop of both images */
    f.shape[0] = m.shape[0] = 203, f.shape[1] = m.shape[1] = 237;
  assert_path_changes_nothing(ctx, &f, &m, mask ? &mk : NULL, initial, &o, &accel__reg_lanes_off);
  accel_reg_transform_destroy(initial);
  free(mask);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The first non-finite value of an F32 image (row-major index), found
 * wherever it lies, the first of several, in contiguous rows and strided
 * ones; the largest finite values, subnormals and negative zeros are
 * finite. */
START_TEST(first_nonfinite_finds_the_first) {
  const int64_t h = 37, w = 101;
  float *img = malloc(sizeof(float) * (size_t)(2 * h * w));
  const float odd[4] = {FLT_MAX, -FLT_MAX, 1e-45f, -0.0f};
  const struct {
    int64_t at, also;
    float v;
  } C[] = {{-1, -1, 0},
           {0, -1, NAN},
           {h * w - 1, -1, INFINITY},
           {5 * w + 3, 9 * w, -INFINITY},
           {20 * w + 99, 20 * w + 100, NAN},
           {w - 1, 3 * w, NAN},
           {12 * w + 7, -1, NAN},                /* the last lane of the first eight */
           {14 * w + 46, 30 * w, -INFINITY},     /* lane 6 */
           {16 * w + 89, 16 * w + 90, INFINITY}, /* lane 1 of the last eight */
           {33 * w + 61, -1, -NAN}};             /* lane 5 */
  for (size_t i = 0; i < sizeof C / sizeof *C; i++)
    for (int strided = 0; strided < 2; strided++) {
      const int64_t step = strided ? 2 : 1;
      for (int64_t k = 0; k < h * w; k++) img[k * step] = k % 17 == 0 ? odd[k / 17 % 4] : (float)k;
      if (C[i].at >= 0) img[C[i].at * step] = C[i].v;
      if (C[i].also >= 0) img[C[i].also * step] = NAN;
      accel_array a = array_of(img, ACCEL_DTYPE_F32, 2, (const int64_t[]){h, w});
      a.strides[0] = w * step * 4, a.strides[1] = step * 4;
      for (int threads = 1; threads <= 2; threads++) ck_assert_int_eq(accel__reg_first_nonfinite(&a, threads), C[i].at);
    }
  free(img);
}
END_TEST

ACCEL__STAGE_FN(run_pyramid, reg, pyramid, job)

/* The CPU's pyramid level from contiguous rows (the vertical pass 16
 * columns at a time through all taps, the last columns one by one) equals,
 * to the bit, the level from the same values every other pixel of a wider
 * buffer (a row at a time per tap): every dtype, the factors and
 * smoothing of four levels and a smoothing at full size. */
START_TEST(pyramid_register_sums_equal_the_rows) {
  static const struct {
    int32_t factor, offset;
    double sigma;
  } L[] = {{1, 0, 0.0}, {2, 0, 1.0}, {4, 1, 2.0}, {8, 3, 4.0}, {1, 0, 0.5}};
  const int64_t h = 41, w = 1100;
  const accel_dtype dts[3] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  accel_ctx *ctx = cpu_ctx();
  for (int d = 0; d < 3; d++) {
    const int64_t es = (int64_t)accel_dtype_size(dts[d]);
    uint8_t *dense = malloc((size_t)(h * w * es)), *gapped = calloc((size_t)(h * w * 2 * es), 1);
    for (int64_t k = 0; k < h * w; k++) {
      const uint32_t v = (uint32_t)(k * 2654435761u) >> 16;
      uint8_t *p = dense + k * es, *q = gapped + 2 * k * es;
      if (dts[d] == ACCEL_DTYPE_U8) *p = (uint8_t)v;
      else if (dts[d] == ACCEL_DTYPE_U16) *(uint16_t *)(void *)p = (uint16_t)v;
      else *(float *)(void *)p = (float)v / 77.0f - 300.0f;
      memcpy(q, p, (size_t)es);
    }
    accel_array a = array_of(dense, dts[d], 2, (const int64_t[]){h, w}), b = a;
    b.data = gapped;
    b.strides[0] = 2 * w * es, b.strides[1] = 2 * es;
    for (size_t l = 0; l < sizeof L / sizeof *L; l++) {
      accel__reg_pyramid_job job = {0};
      job.sigma = L[l].sigma, job.factor = L[l].factor, job.offset = L[l].offset;
      job.width = (w - 1 - job.offset) / job.factor + 1, job.height = (h - 1 - job.offset) / job.factor + 1;
      job.coefficients = (int32_t)(l % 2);
      const size_t n = (size_t)(job.width * job.height);
      float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
      job.in = &a, job.out = got;
      ck_assert_int_eq(accel__dispatch(ctx, "reg.pyramid", run_pyramid, &job), ACCEL_OK);
      job.in = &b, job.out = want;
      ck_assert_int_eq(accel__dispatch(ctx, "reg.pyramid", run_pyramid, &job), ACCEL_OK);
      for (size_t k = 0; k < n; k++)
        ck_assert_msg(memcmp(&got[k], &want[k], sizeof(float)) == 0, "%s, factor %d, sigma %g: pixel %zu %.9g, %.9g",
                      accel__dtype_name(dts[d]), (int)job.factor, job.sigma, k, got[k], want[k]);
      free(got);
      free(want);
    }
    free(dense);
    free(gapped);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

/* Gauss-Newton's products from the matrix's upper half (level.c) give
 * the parameters of the products from the whole matrix to the bit: the
 * default registration at a 16-pixel grid (19 nodes a row at the finest
 * level, so most rows go eight nodes at a time) with MSE, with NCC, with
 * the bending penalty, and with a mask on an odd-sized crop (nodes at the
 * grid's edges); and at a 4-pixel grid (4489 nodes: the solver's loops on
 * the threads). */
START_TEST(half_matrix_equals_the_whole) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.grid_spacing = 16;
  if (_i == 1) o.metric = ACCEL_REG_METRIC_NCC;
  if (_i == 2) o.bending_weight = 0.5;
  if (_i == 4) o.grid_spacing = 4, o.levels = 2, o.iterations = 4;
  uint8_t *mask = NULL;
  accel_array mk = p.fixed, f = p.fixed, m = p.moving;
  if (_i == 3) {
    f.shape[0] = m.shape[0] = 203, f.shape[1] = m.shape[1] = 237;
    mask = malloc((size_t)(203 * 237));
    for (int64_t k = 0; k < 203 * 237; k++) mask[k] = (k % 237) > 40;
    mk = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){203, 237});
  }
  assert_path_changes_nothing(ctx, &f, &m, mask ? &mk : NULL, NULL, &o, &accel__reg_normal_full);
  free(mask);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

typedef struct calls {
  int n, last_level, last_iteration, cancel_level, cancel_iteration;
  bool ordered, finite;
} calls;

static int count_calls(void *user, int32_t level, int32_t iteration, double metric) {
  calls *c = user;
  const bool next =
      level > c->last_level ? iteration == 0 : level == c->last_level && iteration == c->last_iteration + 1;
  c->ordered = c->ordered && next;
  c->finite = c->finite && isfinite(metric) && metric >= 0;
  c->n++;
  c->last_level = level, c->last_iteration = iteration;
  return level == c->cancel_level && iteration == c->cancel_iteration;
}

/* The CPU's level coefficients (columns in bands of whole rows) equal, to
 * the bit, the shared row and column recursions the GPU runs (8 rows and
 * 64 columns at a time), at sizes around the causal start's horizon and
 * the bands' width, on one thread and two. */
START_TEST(prefilter_bands_equal_the_strips) {
  static const int64_t sizes[][2] = {{1, 5},    {5, 1},     {2, 2},     {3, 17},    {20, 19},
                                     {64, 300}, {37, 1029}, {2100, 40}, {1025, 23}, {3071, 9}};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const int64_t w = sizes[i][0], h = sizes[i][1];
    float *ref = malloc(sizeof(float) * (size_t)(w * h)), *got = malloc(sizeof(float) * (size_t)(w * h));
    uint64_t x = 0x9E3779B97F4A7C15ull + (uint64_t)i;
    for (int64_t k = 0; k < w * h; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ref[k] = (float)(x % 65536) / 256.0f - (k % 7 == 0 ? 100.0f : 0.0f);
    }
    for (int threads = 1; threads <= 2; threads++) {
      memcpy(got, ref, sizeof(float) * (size_t)(w * h));
      accel__reg_prefilter(got, w, h, threads);
      float *want = malloc(sizeof(float) * (size_t)(w * h));
      memcpy(want, ref, sizeof(float) * (size_t)(w * h));
      for (int64_t r = 0; r < h; r += 8) accel__reg_prefilter_rows(want + r * w, w, h - r < 8 ? (int)(h - r) : 8);
      for (int64_t c = 0; c < w; c += 64) accel__reg_prefilter_cols(want, w, h, c, c + 64 < w ? c + 64 : w);
      for (int64_t k = 0; k < w * h; k++)
        ck_assert_msg(memcmp(&got[k], &want[k], sizeof(float)) == 0,
                      "%lld x %lld, %d threads: coefficient (%lld, %lld) %.9g, the strips' %.9g", (long long)w,
                      (long long)h, threads, (long long)(k / w), (long long)(k % w), got[k], want[k]);
      free(want);
    }
    free(ref);
    free(got);
  }
}
END_TEST

START_TEST(progress_and_cancel) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o = quick_options();
  calls c = {0, -1, -1, -1, -1, true, true};
  o.progress = count_calls;
  o.progress_user = &c;
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *t = must_register(ctx, &p, &o, &rep);
  ck_assert(c.ordered && c.finite);
  ck_assert_int_eq(c.n, total_iterations(&rep));
  ck_assert_int_eq(rep.levels, 2);
  ck_assert_int_eq(rep.level[1].width, 256);
  ck_assert_int_eq(rep.level[0].width, 128);
  ck_assert(rep.level[1].grid_spacing == 64 && rep.level[0].grid_spacing == 128);
  ck_assert(rep.level[1].metric_last <= rep.level[1].metric_first);
  accel_reg_transform_destroy(t);
  calls k = {0, -1, -1, 1, 2, true, true};
  o.progress_user = &k;
  t = (accel_reg_transform *)&k;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, NULL, &o, &t, NULL), ACCEL_ERR_CANCELLED);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(k.last_level, 1);
  ck_assert_int_eq(k.last_iteration, 2);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "cancel"));
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* levels 0 (the default) runs 4 levels below a shorter side of 2048
 * pixels and 5 from it: the report, the progress callback and the level
 * sizes say so; an explicit count is kept. The images are the committed
 * pair's fixed image mirror-tiled to 2048 x 2048 (and its 2047-row top). */
START_TEST(the_default_levels_follow_the_image_size) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  const int64_t n = 2048;
  uint8_t *big = malloc((size_t)(n * n));
  const float *f = p.fixed.data;
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < n; c++) {
      const int64_t tr = r / p.h % 2 ? p.h - 1 - r % p.h : r % p.h, tc = c / p.w % 2 ? p.w - 1 - c % p.w : c % p.w;
      const float v = f[tr * p.w + tc];
      big[r * n + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
    }
  static const struct {
    int64_t rows;
    int32_t levels, expect;
  } cases[] = {{2048, 0, 5}, {2047, 0, 4}, {2048, 3, 3}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const accel_array a = array_of(big, ACCEL_DTYPE_U8, 2, (const int64_t[]){cases[k].rows, n});
    accel_reg_options o;
    accel_reg_options_init(&o, sizeof o);
    o.levels = cases[k].levels;
    o.iterations = 1;
    calls c = {0, -1, -1, -1, -1, true, true};
    o.progress = count_calls;
    o.progress_user = &c;
    ck_assert_int_eq(accel_reg_levels_for(&o, n, cases[k].rows), cases[k].expect);
    accel_reg_report rep;
    accel_reg_report_init(&rep, sizeof rep);
    accel_reg_transform *t = NULL;
    ck_assert_int_eq(accel_reg_register(ctx, &a, &a, NULL, NULL, &o, &t, &rep), ACCEL_OK);
    ck_assert_int_eq(rep.levels, cases[k].expect);
    ck_assert_int_eq(c.last_level, cases[k].expect - 1);
    ck_assert(c.ordered);
    const int64_t f0 = (int64_t)1 << (cases[k].expect - 1);
    ck_assert_int_eq(rep.level[0].width, (n + f0 - 1) / f0);
    ck_assert(rep.level[0].grid_spacing == 64.0 * (double)f0);
    ck_assert_int_eq(rep.level[cases[k].expect - 1].width, n);
    accel_reg_transform_destroy(t);
  }
  free(big);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A U8 image read through strides (every other column of a wider buffer,
 * rows reversed) registers exactly as its contiguous copy; a mask that is
 * everywhere nonzero changes nothing. */
START_TEST(strides_and_a_full_mask_change_nothing) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  const int64_t w = p.w, h = p.h;
  uint8_t *wide = malloc((size_t)(2 * w * h)), *packed = malloc((size_t)(w * h)), *mask = malloc((size_t)(w * h));
  const float *m = p.moving.data;
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < w; c++) {
      const float v = m[r * w + c];
      packed[r * w + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
      wide[(h - 1 - r) * 2 * w + 2 * c] = packed[r * w + c];
      wide[(h - 1 - r) * 2 * w + 2 * c + 1] = 77;
    }
  memset(mask, 1, (size_t)(w * h));
  accel_array a = array_of(packed, ACCEL_DTYPE_U8, 2, (const int64_t[]){h, w}), b = a, mk = a;
  b.data = wide + (h - 1) * 2 * w;
  b.strides[0] = -2 * w;
  b.strides[1] = 2;
  mk.data = mask;
  accel_reg_options o = quick_options();
  accel_reg_transform *ta = NULL, *tb = NULL, *tc = NULL;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &a, NULL, NULL, &o, &ta, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &b, NULL, NULL, &o, &tb, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &a, &mk, NULL, &o, &tc, NULL), ACCEL_OK);
  assert_same_params(ta, tb);
  assert_same_params(ta, tc);
  /* with a bending penalty too (its mean is over the points that count:
   * every one of them here) */
  accel_reg_transform_destroy(ta);
  accel_reg_transform_destroy(tc);
  o.bending_weight = 100;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &a, NULL, NULL, &o, &ta, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &a, &mk, NULL, &o, &tc, NULL), ACCEL_OK);
  assert_same_params(ta, tc);
  o.bending_weight = 0;
  /* a mask over the left half: the left half still registers */
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < w; c++) mask[r * w + c] = c < w / 2;
  accel_reg_transform_destroy(tc);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &a, &mk, NULL, &o, &tc, NULL), ACCEL_OK);
  double xy[2] = {80, 128};
  ck_assert_int_eq(accel_reg_transform_points(NULL, tc, xy, 1), ACCEL_OK);
  const float *tx = view_of(p.dx).data, *ty = view_of(p.dy).data;
  ck_assert_double_lt(hypot(xy[0] - 80 - tx[128 * w + 80], xy[1] - 128 - ty[128 * w + 80]), 0.3);
  accel_reg_transform_destroy(ta);
  accel_reg_transform_destroy(tb);
  accel_reg_transform_destroy(tc);
  free(wide);
  free(packed);
  free(mask);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* An 8- or 16-bit fixed image gives the parameters of the F32 image with
 * the same values, to the bit: packed, its finest level (unsmoothed, the
 * samples on its pixels) is read in place, on the lanes and the scalar
 * evaluator, also with normalised correlation, ASGD and a mask; strided, or
 * with a pre-alignment (the samples between pixels), the level converts it
 * to float first. */
START_TEST(fixed_8_and_16_bit_equal_float) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  const int64_t w = p.w, h = p.h, scale = _i == 1 ? 200 : 1;
  const accel_dtype dtype = _i == 1 ? ACCEL_DTYPE_U16 : ACCEL_DTYPE_U8;
  const size_t size = _i == 1 ? 2 : 1;
  uint8_t *ints = malloc((size_t)(2 * w * h) * size);
  float *same = malloc(sizeof(float) * (size_t)(w * h));
  const float *src = p.fixed.data;
  for (int64_t k = 0; k < w * h; k++) {
    const float v = src[k];
    const int64_t q = (int64_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f) * scale;
    same[k] = (float)q;
    if (_i == 1) ((uint16_t *)ints)[k] = (uint16_t)q;
    else ints[k] = (uint8_t)q;
  }
  accel_array fi = array_of(ints, dtype, 2, (const int64_t[]){h, w});
  const accel_array ff = array_of(same, ACCEL_DTYPE_F32, 2, (const int64_t[]){h, w});
  if (_i == 2) { /* every other byte of a wider buffer: not packed */
    uint8_t *wide = ints + w * h;
    for (int64_t k = w * h - 1; k >= 0; k--) wide[k] = ints[k];
    for (int64_t k = 0; k < w * h; k++) ints[2 * k] = wide[k], ints[2 * k + 1] = 99;
    fi.strides[1] = 2, fi.strides[0] = 2 * w;
  }
  accel_reg_options o = quick_options();
  if (_i == 3) o.prealign = 2;
  uint8_t *mask = NULL; /* 4: normalised correlation, ASGD and a mask over part of the image, in place */
  accel_array mk;
  if (_i == 4) {
    o.metric = ACCEL_REG_METRIC_NCC, o.optimizer = ACCEL_REG_OPTIMIZER_ASGD, o.iterations = 30;
    mask = malloc((size_t)(w * h));
    for (int64_t k = 0; k < w * h; k++) mask[k] = (k % w) + (k / w) < w + h / 3;
    mk = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){h, w});
  }
  for (int lanes = 0; lanes < 2; lanes++) {
    accel__reg_lanes_off = lanes == 1;
    accel_reg_transform *a = NULL, *b = NULL;
    const accel_status sa = accel_reg_register(ctx, &fi, &p.moving, mask ? &mk : NULL, NULL, &o, &a, NULL);
    const accel_status sb = accel_reg_register(ctx, &ff, &p.moving, mask ? &mk : NULL, NULL, &o, &b, NULL);
    accel__reg_lanes_off = false;
    ck_assert_msg(sa == ACCEL_OK && sb == ACCEL_OK, "register: %s", accel_last_error(ctx));
    assert_same_params(a, b);
    accel_reg_transform_destroy(a);
    accel_reg_transform_destroy(b);
  }
  free(mask);
  free(ints);
  free(same);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Normalised correlation registers the pair too (its gain and offset do
 * not matter to it); a strong bending penalty makes the field smoother. */
START_TEST(ncc_and_bending) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.metric = ACCEL_REG_METRIC_NCC;
  accel_reg_transform *t = must_register(ctx, &p, &o, NULL);
  double mean, p95;
  field_error(t, &p, 64, &mean, &p95);
  ck_assert_msg(mean < 0.06 && p95 < 0.12, "NCC: field error %g %g", mean, p95);
  accel_reg_transform_destroy(t);
  double bend[2];
  for (int k = 0; k < 2; k++) {
    o = quick_options();
    o.bending_weight = k ? 1e9 : 0;
    t = must_register(ctx, &p, &o, NULL);
    double *c;
    int64_t n;
    params_of(t, &c, &n);
    accel_reg_grid g;
    accel_reg_transform_grid(t, &g);
    bend[k] = 0;
    for (int64_t j = 1; j + 1 < g.size[1]; j++)
      for (int64_t i = 1; i + 1 < g.size[0]; i++)
        for (int d = 0; d < 2; d++) {
          const double *q = c + d * n / 2 + j * g.size[0] + i;
          bend[k] += pow(q[-1] - 2 * q[0] + q[1], 2) + pow(q[-g.size[0]] - 2 * q[0] + q[g.size[0]], 2);
        }
    free(c);
    accel_reg_transform_destroy(t);
  }
  ck_assert_msg(bend[1] < 0.5 * bend[0], "bending: %g, without %g", bend[1], bend[0]);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Register with one thing wrong: `status`, and a message naming the
 * function and containing `needle`. */
static void expect_error(accel_ctx *ctx, const accel_array *f, const accel_array *m, const accel_array *mask,
                         const accel_reg_transform *init, const accel_reg_options *o, accel_status status,
                         const char *needle) {
  accel_reg_transform *t = (accel_reg_transform *)&t;
  ck_assert_int_eq(accel_reg_register(ctx, f, m, mask, init, o, &t, NULL), status);
  ck_assert_ptr_null(t);
  const char *e = accel_last_error(ctx);
  ck_assert_msg(strstr(e, "accel_reg_register") && strstr(e, needle), "message \"%s\" lacks \"%s\"", e, needle);
}

START_TEST(bad_arguments_are_errors) {
  accel_ctx *ctx = cpu_ctx();
  enum { N = 96 };
  static float img[N * N], nan_img[N * N];
  static uint8_t mask[N * N];
  static int32_t ints[N * N];
  for (int k = 0; k < N * N; k++) img[k] = nan_img[k] = (float)(k % 7);
  nan_img[5 * N + 3] = NAN;
  const accel_array f = array_of(img, ACCEL_DTYPE_F32, 2, (const int64_t[]){N, N});
  accel_array bad = array_of(ints, ACCEL_DTYPE_I32, 2, (const int64_t[]){N, N});
  const accel_array nan_a = array_of(nan_img, ACCEL_DTYPE_F32, 2, (const int64_t[]){N, N});
  const accel_array vol = array_of(img, ACCEL_DTYPE_F32, 3, (const int64_t[]){1, N, N});
  accel_array mk = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){N, N});
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_register(NULL, &f, &f, NULL, NULL, &o, &t, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "ctx"));
  ck_assert_int_eq(accel_reg_register(ctx, &f, &f, NULL, NULL, &o, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  expect_error(ctx, NULL, &f, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "fixed");
  expect_error(ctx, &f, NULL, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "moving");
  expect_error(ctx, &f, &bad, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "U8, U16 or F32");
  expect_error(ctx, &vol, &f, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "2-D");
  expect_error(ctx, &f, &nan_a, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "moving[5, 3] is not finite");
  bad = f;
  bad.shape[0] = 0;
  expect_error(ctx, &bad, &f, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "fixed");
  /* one pixel along an axis: no grid of 4 nodes fits it; said as such, in the public function's name */
  accel_array thin = f;
  thin.shape[1] = 1;
  expect_error(ctx, &thin, &f, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "fixed is 96 x 1 pixels");
  thin.shape[0] = 1, thin.shape[1] = N;
  expect_error(ctx, &f, &thin, NULL, NULL, &o, ACCEL_ERR_INVALID_ARG, "at least 2 along each axis");
  /* an initial transform over another size, given as rows x columns like the messages above */
  accel_reg_grid og;
  accel_reg_grid_for(40, N, 64, &og); /* 40 columns, 96 rows */
  accel_reg_transform *other = NULL;
  ck_assert_int_eq(accel_reg_transform_create(ctx, &og, &other), ACCEL_OK);
  expect_error(ctx, &f, &f, NULL, other, &o, ACCEL_ERR_INVALID_ARG,
               "over a 96 x 40 image (rows x columns), the fixed image is 96 x 96");
  accel_reg_transform_destroy(other);
  const struct {
    const char *needle;
    int field;
    double value;
  } opts[] = {{"levels", 0, -1},
              {"levels", 0, 9},
              {"grid_spacing", 1, 0},
              {"iterations", 2, 0},
              {"samples", 3, -1},
              {"metric", 4, 7},
              {"optimizer", 5, 9},
              {"bending_weight", 6, -1},
              {"tolerance", 7, 1},
              {"window", 8, 0},
              {"validation_samples", 9, -1},
              {"prealign", 10, 3},
              {"downsample", 11, 2},
              {"renew_samples", 12, 5},
              {"grid_spacing", 1, 1e13},
              {"validation_samples 0 (no validation set) is for the ASGD optimizer", 9, 0}};
  for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
    accel_reg_options x = o;
    const double v = opts[k].value;
    switch (opts[k].field) {
    case 0: x.levels = (int32_t)v; break;
    case 1: x.grid_spacing = v; break;
    case 2: x.iterations = (int32_t)v; break;
    case 3: x.samples = (int64_t)v; break;
    case 4: x.metric = (accel_reg_metric)v; break;
    case 5: x.optimizer = (accel_reg_optimizer)v; break;
    case 6: x.bending_weight = v; break;
    case 7: x.tolerance = v; break;
    case 8: x.window = (int32_t)v; break;
    case 9: x.validation_samples = (int64_t)v; break;
    case 10: x.prealign = (int32_t)v; break;
    case 11: x.downsample = (int32_t)v; break;
    default: x.renew_samples = (int32_t)v; break;
    }
    expect_error(ctx, &f, &f, NULL, NULL, &x, ACCEL_ERR_INVALID_ARG, opts[k].needle);
  }
  accel_reg_options old = o;
  old.struct_size = 8;
  expect_error(ctx, &f, &f, NULL, NULL, &old, ACCEL_ERR_VERSION, "options");
  /* masks: another dtype, another shape, too few pixels */
  accel_array mbad = f;
  expect_error(ctx, &f, &f, &mbad, NULL, &o, ACCEL_ERR_INVALID_ARG, "fixed_mask");
  mbad = mk;
  mbad.shape[0] = N - 1;
  expect_error(ctx, &f, &f, &mbad, NULL, &o, ACCEL_ERR_INVALID_ARG, "fixed_mask is 95 x 96");
  memset(mask, 0, sizeof mask);
  mask[0] = 1;
  expect_error(ctx, &f, &f, &mk, NULL, &o, ACCEL_ERR_INVALID_ARG, "16 per node");
  /* an initial transform over another image size */
  accel_reg_grid g;
  accel_reg_grid_for(N + 1, N, 64, &g);
  accel_reg_transform *init;
  ck_assert_int_eq(accel_reg_transform_create(ctx, &g, &init), ACCEL_OK);
  expect_error(ctx, &f, &f, NULL, init, &o, ACCEL_ERR_INVALID_ARG, "initial transform");
  accel_reg_transform_destroy(init);
  accel_reg_report rep = {0};
  t = (accel_reg_transform *)&t;
  ck_assert_int_eq(accel_reg_register(ctx, &f, &f, NULL, NULL, &o, &t, &rep), ACCEL_ERR_VERSION);
  ck_assert_ptr_null(t);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The elastix preset (ASGD with its automatic parameter estimation, a
 * smoothing pyramid, 500 iterations of 5000 samples) lands where elastix
 * does: within 25 % of its field error on the committed pair. */
START_TEST(elastix_preset_reproduces_elastix) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
  accel_reg_report rep;
  accel_reg_report_init(&rep, sizeof rep);
  accel_reg_transform *t = must_register(ctx, &p, &o, &rep);
  ck_assert_int_eq(total_iterations(&rep), 4 * 500);
  ck_assert_int_eq(rep.level[0].width, 256);
  double mean, p95;
  field_error(t, &p, 64, &mean, &p95);
  fprintf(stderr, "tex_256_s5, elastix preset: field error mean %.4f p95 %.4f (elastix %.4f %.4f)\n", mean, p95,
          p.el_mean, p.el_p95);
  ck_assert_msg(mean <= 1.25 * p.el_mean && p95 <= 1.25 * p.el_p95, "ASGD: field error %g %g", mean, p95);
  accel_reg_transform_destroy(t);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A constant image is registered (any result is a minimum) but logged as
 * such; a textured one logs nothing of the kind. */
START_TEST(a_constant_image_is_logged) {
  accel_ctx *ctx = cpu_ctx();
  log_capture cap = {0};
  ck_assert_int_eq(accel_set_log(ctx, capture_log, &cap, ACCEL_LOG_WARN), ACCEL_OK);
  pair p;
  committed_pair(ctx, &p);
  float *flat = malloc(sizeof(float) * (size_t)(p.w * p.h));
  for (int64_t k = 0; k < p.w * p.h; k++) flat[k] = 7;
  const accel_array c = array_of(flat, ACCEL_DTYPE_F32, 2, (const int64_t[]){p.h, p.w});
  accel_reg_options o = quick_options();
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, NULL, &o, &t, NULL), ACCEL_OK);
  accel_reg_transform_destroy(t);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "constant"), 0);
  ck_assert_int_eq(accel_reg_register(ctx, &c, &p.moving, NULL, NULL, &o, &t, NULL), ACCEL_OK);
  accel_reg_transform_destroy(t);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "the fixed image is constant"), 1);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &c, NULL, NULL, &o, &t, NULL), ACCEL_OK);
  accel_reg_transform_destroy(t);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "the moving image is constant"), 1);
  /* constant inside the mask alone: a 96 x 96 flat square of the fixed image, masked to it */
  float *patched = malloc(sizeof(float) * (size_t)(p.w * p.h));
  uint8_t *inside = calloc((size_t)(p.w * p.h), 1);
  memcpy(patched, p.fixed.data, sizeof(float) * (size_t)(p.w * p.h));
  for (int64_t y = 80; y < 176; y++)
    for (int64_t x = 80; x < 176; x++) patched[y * p.w + x] = 7, inside[y * p.w + x] = 1;
  const accel_array pf = array_of(patched, ACCEL_DTYPE_F32, 2, (const int64_t[]){p.h, p.w});
  const accel_array mk = array_of(inside, ACCEL_DTYPE_U8, 2, (const int64_t[]){p.h, p.w});
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, &mk, NULL, &o, &t, NULL), ACCEL_OK);
  accel_reg_transform_destroy(t);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "constant inside fixed_mask"), 0);
  ck_assert_int_eq(accel_reg_register(ctx, &pf, &p.moving, &mk, NULL, &o, &t, NULL), ACCEL_OK);
  accel_reg_transform_destroy(t);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "the fixed image is constant inside fixed_mask"), 1);
  free(patched);
  free(inside);
  free(flat);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Images of a few pixels register (the levels shrink to single pixels);
 * every pixel as samples; and a registration started from an earlier
 * result (its linear part and B-spline parameters) stays as accurate. */
START_TEST(tiny_images_every_pixel_and_an_initial_transform) {
  accel_ctx *ctx = cpu_ctx();
  float tiny[7 * 5];
  for (int k = 0; k < 35; k++) tiny[k] = (float)((k * 37) % 11);
  const accel_array a = array_of(tiny, ACCEL_DTYPE_F32, 2, (const int64_t[]){7, 5});
  accel_reg_options o = quick_options();
  o.levels = 4;
  accel_reg_transform *t = NULL;
  ck_assert_msg(accel_reg_register(ctx, &a, &a, NULL, NULL, &o, &t, NULL) == ACCEL_OK, "%s", accel_last_error(ctx));
  accel_reg_transform_destroy(t);
  pair p;
  committed_pair(ctx, &p);
  o = quick_options();
  o.samples = 0;
  t = must_register(ctx, &p, &o, NULL);
  double mean0, p950, mean1, p951;
  field_error(t, &p, 64, &mean0, &p950);
  const double shift[2] = {0, 0};
  ck_assert_int_eq(accel_reg_transform_set_initial(ctx, t, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL), ACCEL_OK);
  accel_reg_transform *t2 = NULL;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, t, &o, &t2, NULL), ACCEL_OK);
  accel_reg_linear_kind kind;
  double lin[6];
  ck_assert_int_eq(accel_reg_transform_initial(t2, &kind, lin, NULL), ACCEL_OK);
  ck_assert_int_eq(kind, ACCEL_REG_LINEAR_TRANSLATION);
  ck_assert(lin[0] == 0 && lin[1] == 0);
  field_error(t2, &p, 64, &mean1, &p951);
  ck_assert_msg(mean1 < 1.5 * mean0 + 0.01, "from an initial transform: %g, before %g", mean1, mean0);
  /* its B-spline part on another grid than the final one: refused (it was dropped without a word) */
  accel_reg_options half = o;
  half.grid_spacing = o.grid_spacing / 2;
  accel_reg_transform *t4 = NULL;
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, t, &half, &t4, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_msg(strstr(accel_last_error(ctx), "B-spline part is on another grid"), "%s", accel_last_error(ctx));
  ck_assert_ptr_null(t4);
  /* a rigid initial part off the truth: the samples then lie off the
   * pixel lattice, and the B-spline takes up the rest */
  accel_reg_grid g;
  accel_reg_transform_grid(t, &g);
  accel_reg_transform *init, *t3 = NULL;
  ck_assert_int_eq(accel_reg_transform_create(ctx, &g, &init), ACCEL_OK);
  const double rigid[3] = {0.004, 0.7, -0.4}, centre[2] = {128, 128};
  ck_assert_int_eq(accel_reg_transform_set_initial(ctx, init, ACCEL_REG_LINEAR_RIGID, rigid, centre), ACCEL_OK);
  accel_reg_options_init(&o, sizeof o);
  ck_assert_int_eq(accel_reg_register(ctx, &p.fixed, &p.moving, NULL, init, &o, &t3, NULL), ACCEL_OK);
  field_error(t3, &p, 64, &mean1, &p951);
  ck_assert_msg(mean1 < 0.06 && p951 < 0.12, "from a rigid initial part: %g %g", mean1, p951);
  accel_reg_transform_destroy(init);
  accel_reg_transform_destroy(t3);
  accel_reg_transform_destroy(t);
  accel_reg_transform_destroy(t2);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A start so far off that no sample of the first level maps into the
 * moving image: B-spline parameters of 1e200 (beyond any int64_t pixel
 * index: such samples never count), a translation of 1e13, and for the
 * elastix preset (samples outside the moving image skipped) one of 1e4: an
 * error that says so, from the lanes and from the scalar evaluator. */
START_TEST(an_initial_transform_off_the_images_is_an_error) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(p.w, p.h, 64, &g), ACCEL_OK);
  uint8_t *ones = malloc((size_t)(p.w * p.h));
  memset(ones, 1, (size_t)(p.w * p.h));
  const accel_array full = array_of(ones, ACCEL_DTYPE_U8, 2, (const int64_t[]){p.h, p.w});
  for (int k = 0; k < 3; k++)
    for (int lanes_off = 0; lanes_off < 2; lanes_off++) {
      accel_reg_transform *init = NULL, *t = NULL;
      ck_assert_int_eq(accel_reg_transform_create(ctx, &g, &init), ACCEL_OK);
      accel_reg_options o = quick_options();
      if (k == 0) {
        const int64_t n = accel_reg_transform_count(init);
        double *v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) v[i] = i % 2 ? 1e200 : -1e200;
        ck_assert_int_eq(accel_reg_transform_set_parameters(init, v, n), ACCEL_OK);
        free(v);
      } else {
        const double shift[2] = {k == 1 ? 1e13 : 1e4, 0};
        ck_assert_int_eq(accel_reg_transform_set_initial(ctx, init, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL),
                         ACCEL_OK);
        if (k == 2) {
          ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
          o.iterations = 5;
        }
      }
      accel__reg_lanes_off = lanes_off;
      for (int masked = 0; masked < 2; masked++) { /* a full mask: the samples are in it, so still the error */
        const accel_status s = accel_reg_register(ctx, &p.fixed, &p.moving, masked ? &full : NULL, init, &o, &t, NULL);
        ck_assert_msg(s == ACCEL_ERR_INVALID_ARG && t == NULL, "case %d: %d %s", k, (int)s, accel_last_error(ctx));
        ck_assert_msg(strstr(accel_last_error(ctx), "level 0: none of its samples maps into the moving image"), "%s",
                      accel_last_error(ctx));
      }
      accel__reg_lanes_off = false;
      accel_reg_transform_destroy(init);
    }
  free(ones);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A mask that passes the registration's check (16 pixels per node of the
 * coarsest grid) but that the coarse level's samples, on every 8th row,
 * miss entirely (three rows): no error; the coarse level measures nothing
 * and stalls at once, the finer levels register (Gauss-Newton and the
 * elastix preset's ASGD, on the lanes and the scalar evaluator alike). */
START_TEST(a_mask_the_coarse_samples_miss_is_no_error) {
  accel_ctx *ctx = cpu_ctx();
  pair p;
  committed_pair(ctx, &p);
  const int64_t w = p.w, h = p.h;
  uint8_t *mask = calloc((size_t)(w * h), 1);
  for (int64_t r = 100; r < 103; r++) memset(mask + r * w, 1, (size_t)w);
  const accel_array mk = array_of(mask, ACCEL_DTYPE_U8, 2, (const int64_t[]){h, w});
  for (int asgd = 0; asgd < 2; asgd++) {
    accel_reg_options o;
    accel_reg_options_init(&o, sizeof o);
    if (asgd) ck_assert_int_eq(accel_reg_options_preset(&o, "elastix"), ACCEL_OK);
    o.iterations = 20;
    accel_reg_transform *t[2] = {NULL, NULL};
    for (int lanes_off = 0; lanes_off < 2; lanes_off++) {
      accel_reg_report r;
      accel_reg_report_init(&r, sizeof r);
      accel__reg_lanes_off = lanes_off;
      const accel_status s = accel_reg_register(ctx, &p.fixed, &p.moving, &mk, NULL, &o, &t[lanes_off], &r);
      accel__reg_lanes_off = false;
      ck_assert_msg(s == ACCEL_OK, "%s: %d %s", asgd ? "asgd" : "gn", (int)s, accel_last_error(ctx));
      ck_assert_int_eq(r.levels, 4);
      if (!asgd) ck_assert_int_eq(r.level[0].stop, ACCEL_REG_STOP_STALLED);
      ck_assert_int_eq(r.level[3].iterations > 1, 1);
      ck_assert(isfinite(r.level[3].metric_last));
    }
    assert_same_params(t[0], t[1]);
    accel_reg_transform_destroy(t[0]);
    accel_reg_transform_destroy(t[1]);
  }
  free(mask);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

static const char *const shared_pairs[] = {"tex_512_s1", "tex_1024_s2"};

START_TEST(shared_pairs_beat_elastix) {
  accel_ctx *ctx = cpu_ctx();
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/reg/%s", SHARED_DATA_DIR, shared_pairs[_i]);
  pair p;
  load_pair(ctx, dir, &p);
  check_pair(ctx, &p, shared_pairs[_i]);
  free_pair(&p);
  accel_ctx_destroy(ctx);
}
END_TEST

static Suite *suite_reg_shared(void) {
  return single_test_suite("reg_shared", "shared", 900, shared_pairs_beat_elastix, 2);
}

static const shared_run REG_SHARED = {"--shared", SHARED_DATA_DIR "/reg/tex_512_s1/fixed.tif", SHARED_DATA_DIR "/reg",
                                      suite_reg_shared};

static Suite *suite_reg(void) {
  TCase *tc = new_case("reg", 300, NULL, NULL);
  tcase_add_test(tc, grid_is_elastix_layout);
  tcase_add_test(tc, presets);
  tcase_add_test(tc, bspline_reproduces_linear_fields);
  tcase_add_test(tc, bad_arguments_are_errors);
  tcase_add_loop_test(tc, same_result_on_one_and_two_threads, 0, 4);
  tcase_add_loop_test(tc, lanes_equal_the_scalar_evaluator, 0, 9);
  tcase_add_loop_test(tc, half_matrix_equals_the_whole, 0, 5);
  tcase_add_test(tc, pyramid_register_sums_equal_the_rows);
  tcase_add_test(tc, first_nonfinite_finds_the_first);
  tcase_add_test(tc, prefilter_bands_equal_the_strips);
  tcase_add_test(tc, progress_and_cancel);
  tcase_add_test(tc, the_default_levels_follow_the_image_size);
  tcase_add_test(tc, strides_and_a_full_mask_change_nothing);
  tcase_add_loop_test(tc, fixed_8_and_16_bit_equal_float, 0, 5);
  tcase_add_test(tc, ncc_and_bending);
  tcase_add_test(tc, committed_pair_beats_elastix);
  tcase_add_test(tc, more_samples_than_pixels);
  tcase_add_test(tc, a_7x7_shift_with_the_default_levels);
  tcase_add_test(tc, few_validation_samples_are_raised);
  tcase_add_test(tc, asgd_with_a_large_bending_weight_stays_bounded);
  tcase_add_test(tc, bending_energy_is_the_mean_over_the_image);
  tcase_add_test(tc, bending_energy_with_a_mask_is_the_mean_inside_it);
  tcase_add_test(tc, bending_energy_with_a_rotation_is_the_mean_over_the_footprint);
  tcase_add_test(tc, validation_samples_inside_a_mask);
  tcase_add_test(tc, a_constant_image_is_logged);
#if ACCEL_HAVE_KISSFFT
  tcase_add_test(tc, prealigned_registration);
#endif
  tcase_add_test(tc, elastix_preset_reproduces_elastix);
  tcase_add_test(tc, tiny_images_every_pixel_and_an_initial_transform);
  tcase_add_test(tc, an_initial_transform_off_the_images_is_an_error);
  tcase_add_test(tc, a_mask_the_coarse_samples_miss_is_no_error);
  return suite_of("reg", tc);
}

ACCEL_TEST_MAIN_SHARED(suite_reg, REG_SHARED)
