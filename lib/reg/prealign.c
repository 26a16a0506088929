/* The coarse pre-alignment (prealign.h): the algorithm, the CPU engine on
 * kissfft (BSD-3-Clause, Debian's libkissfft-dev) and the stage's entry. */
#include "reg/prealign.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if ACCEL_HAVE_KISSFFT
#include <kiss_fft.h>
#include <kiss_fftr.h>
#endif

/* ---------------------------------------------------------------- host FFTs */

/* Rows by kiss_fftr (real, half spectrum), then columns by kiss_fft; the
 * inverse in the opposite order. (kissfft's own N-D real transform,
 * kiss_fftndr, is not used: Debian 12's 131.1.0 fails to allocate it.) */
struct accel__reg_fft {
#if ACCEL_HAVE_KISSFFT
  kiss_fftr_cfg row_fwd, row_inv;
  kiss_fft_cfg col_fwd, col_inv;
  kiss_fft_cpx *col, *col_out, *half; /* a column, its transform, a rows x half spectrum */
#endif
  int32_t rows, cols;
};

accel_status accel__reg_fft_new(int32_t rows, int32_t cols, accel__reg_fft **out, char *why) {
  *out = NULL;
#if ACCEL_HAVE_KISSFFT
  accel__reg_fft *f = calloc(1, sizeof *f);
  if (f) {
    f->rows = rows;
    f->cols = cols;
    f->row_fwd = kiss_fftr_alloc(cols, 0, NULL, NULL);
    f->row_inv = kiss_fftr_alloc(cols, 1, NULL, NULL);
    f->col_fwd = kiss_fft_alloc(rows, 0, NULL, NULL);
    f->col_inv = kiss_fft_alloc(rows, 1, NULL, NULL);
    f->col = malloc(sizeof(kiss_fft_cpx) * (size_t)rows);
    f->col_out = malloc(sizeof(kiss_fft_cpx) * (size_t)rows);
    f->half = malloc(sizeof(kiss_fft_cpx) * (size_t)rows * (size_t)(cols / 2 + 1));
  }
  if (!f || !f->row_fwd || !f->row_inv || !f->col_fwd || !f->col_inv || !f->col || !f->col_out || !f->half) {
    accel__reg_fft_free(f);
    accel__why(why, "out of memory for a %d x %d FFT", rows, cols);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  *out = f;
  return ACCEL_OK;
#else
  (void)rows;
  (void)cols;
  accel__why(why, "this libaccel was built without kissfft (Debian's libkissfft-dev), the CPU's FFT");
  return ACCEL_ERR_UNSUPPORTED;
#endif
}

#if ACCEL_HAVE_KISSFFT
/* Each column of the rows x half spectrum h through cfg, in place. */
static void fft_columns(accel__reg_fft *f, kiss_fft_cfg cfg, kiss_fft_cpx *h) {
  const int64_t half = f->cols / 2 + 1;
  for (int64_t c = 0; c < half; c++) {
    for (int64_t r = 0; r < f->rows; r++) f->col[r] = h[r * half + c];
    kiss_fft(cfg, f->col, f->col_out);
    for (int64_t r = 0; r < f->rows; r++) h[r * half + c] = f->col_out[r];
  }
}
#endif

void accel__reg_fft_forward(accel__reg_fft *f, const float *in, float *out) {
#if ACCEL_HAVE_KISSFFT
  kiss_fft_cpx *h = (kiss_fft_cpx *)(void *)out;
  const int64_t half = f->cols / 2 + 1;
  for (int64_t r = 0; r < f->rows; r++) kiss_fftr(f->row_fwd, in + r * f->cols, h + r * half);
  fft_columns(f, f->col_fwd, h);
#else
  (void)f, (void)in, (void)out;
#endif
}

void accel__reg_fft_inverse(accel__reg_fft *f, const float *in, float *out) {
#if ACCEL_HAVE_KISSFFT
  const int64_t half = f->cols / 2 + 1;
  memcpy(f->half, in, sizeof(kiss_fft_cpx) * (size_t)(f->rows * half));
  fft_columns(f, f->col_inv, f->half);
  for (int64_t r = 0; r < f->rows; r++) kiss_fftri(f->row_inv, f->half + r * half, out + r * f->cols);
#else
  (void)f, (void)in, (void)out;
#endif
}

void accel__reg_fft_free(accel__reg_fft *f) {
  if (!f) return;
#if ACCEL_HAVE_KISSFFT
  kiss_fftr_free(f->row_fwd);
  kiss_fftr_free(f->row_inv);
  kiss_fft_free(f->col_fwd);
  kiss_fft_free(f->col_inv);
  free(f->col);
  free(f->col_out);
  free(f->half);
#endif
  free(f);
}

/* ---------------------------------------------------------------- the plan */

static int32_t pow2_at_least(int64_t n) {
  int32_t p = 16;
  while (p < n) p *= 2;
  return p;
}

static void mean_std(const float *img, int64_t n, double *mean, double *std) {
  double s = 0.0, s2 = 0.0;
  for (int64_t i = 0; i < n; i++) s += img[i];
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) s2 += ((double)img[i] - *mean) * ((double)img[i] - *mean);
  *std = sqrt(s2 / (double)n);
}

void accel__reg_pa_plan_for(const accel__reg_prealign_job *job, accel__reg_pa_plan *p) {
  memset(p, 0, sizeof *p);
  p->fw = job->fixed_width;
  p->fh = job->fixed_height;
  p->mw = job->moving_width;
  p->mh = job->moving_height;
  const int64_t side = p->fw > p->fh ? p->fw : p->fh;
  p->block = (int32_t)((side + ACCEL__REG_PA_CAP - 1) / ACCEL__REG_PA_CAP);
  p->gw = (int32_t)((p->fw + p->block - 1) / p->block);
  p->gh = (int32_t)((p->fh + p->block - 1) / p->block);
  p->rows = pow2_at_least(p->gh);
  p->cols = pow2_at_least(p->gw);
  p->nt = ACCEL__REG_PA_ANGLES;
  p->nr = ACCEL__REG_PA_RADII;
  const int32_t small = p->rows < p->cols ? p->rows : p->cols;
  p->rmin = 2.0 / small; /* two bins from the centre: below, the window's spectrum */
  p->rmax = 0.45;
  double fstd, mstd;
  mean_std(job->fixed, p->fw * p->fh, &p->fmean, &fstd);
  mean_std(job->moving, p->mw * p->mh, &p->mmean, &mstd);
  p->lscale = 1.0 / (fstd * sqrt((double)p->gw * (double)p->gh));
  p->sigma = 1.0;
}

/* ---------------------------------------------------------------- the algorithm */

/* The sub-sample position of a peak from three samples around it: the vertex
 * of the parabola through their logarithms (exact for a Gaussian peak), or
 * through the values when one is not positive. */
static double peak_offset(double am, double a0, double ap) {
  if (am > 0.0 && a0 > 0.0 && ap > 0.0) {
    const double lm = log(am), l0 = log(a0), lp = log(ap), den = lm - 2.0 * l0 + lp;
    if (den < 0.0) {
      const double d = 0.5 * (lm - lp) / den;
      if (fabs(d) <= 1.0) return d;
    }
  }
  const double den = am - 2.0 * a0 + ap;
  if (den >= 0.0) return 0.0;
  const double d = 0.5 * (am - ap) / den;
  return d < -1.0 ? -1.0 : d > 1.0 ? 1.0 : d;
}

/* The highest sample of a rows x cols surface (periodic; in column 0 only
 * when col0), its height and its signed sub-sample position (dy, dx). */
static void find_peak(const float *s, int64_t rows, int64_t cols, bool col0, double *dy, double *dx, double *height) {
  int64_t br = 0, bc = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < (col0 ? 1 : cols); c++)
      if (s[r * cols + c] > s[br * cols + bc]) br = r, bc = c;
#define AT(r, c) ((double)s[(((r) + rows) % rows) * cols + (((c) + cols) % cols)])
  const double oy = peak_offset(AT(br - 1, bc), AT(br, bc), AT(br + 1, bc));
  const double ox = col0 ? 0.0 : peak_offset(AT(br, bc - 1), AT(br, bc), AT(br, bc + 1));
#undef AT
  *height = s[br * cols + bc];
  *dy = (double)(2 * br <= rows ? br : br - rows) + oy;
  *dx = col0 ? 0.0 : (double)(2 * bc <= cols ? bc : bc - cols) + ox;
}

/* Where the fixed grid's point q is read in the moving image: T(q) = R(q - c) + c + t. */
static accel__reg_pa_map map_of(double angle, const double *t, const double *c) {
  const double co = cos(angle), si = sin(angle);
  accel__reg_pa_map m = {{co, -si, c[0] + t[0] - co * c[0] + si * c[1], si, co, c[1] + t[1] - si * c[0] - co * c[1]}};
  return m;
}

typedef struct pa_state {
  const accel__reg_pa_plan *p;
  const accel__reg_pa_engine *e;
  const double *centre;
  float *surf;
} pa_state;

/* The residual translation of the moving image read through (angle, t)
 * against the fixed image, added to t; *height: the correlation peak's,
 * *moved: how far t moved. Without rotation the image is read at t rounded
 * to whole pixels, where interpolation is exact: interpolating at a
 * fraction of a pixel would damp and delay the high frequencies, which the
 * normalised spectrum weighs as much as the others, and pull the estimate. */
static accel_status refine_translation(pa_state *st, double angle, double *t, double *height, double *moved,
                                       char *why) {
  const double base[2] = {angle == 0.0 ? round(t[0]) : t[0], angle == 0.0 ? round(t[1]) : t[1]};
  const accel__reg_pa_map m = map_of(angle, base, st->centre);
  accel_status s = st->e->spectrum(st->e->self, ACCEL__REG_PA_MOVING, 1, &m, why);
  if (!s) s = st->e->correlate(st->e->self, ACCEL__REG_PA_FIXED, ACCEL__REG_PA_MOVING, st->surf, why);
  if (s) return s;
  double sy, sx;
  find_peak(st->surf, st->p->rows, st->p->cols, false, &sy, &sx, height);
  sx *= st->p->block;
  sy *= st->p->block;
  /* m_T(q + s) ~ f(q) means moving(T(q) + R s) ~ f(q): t gains R s */
  const double nx = base[0] + cos(angle) * sx - sin(angle) * sy, ny = base[1] + sin(angle) * sx + cos(angle) * sy;
  *moved = hypot(nx - t[0], ny - t[1]);
  t[0] = nx;
  t[1] = ny;
  return ACCEL_OK;
}

/* The residual rotation of the moving image read through (angle, t)
 * against the fixed image (radians, in [-pi/2, pi/2]). */
static accel_status residual_rotation(pa_state *st, double angle, const double *t, double *d, char *why) {
  const accel__reg_pa_map m = map_of(angle, t, st->centre);
  accel_status s = st->e->spectrum(st->e->self, ACCEL__REG_PA_MOVING, 1, &m, why);
  if (!s) s = st->e->logpolar(st->e->self, ACCEL__REG_PA_LP_MOVING, ACCEL__REG_PA_MOVING, why);
  if (!s) s = st->e->correlate(st->e->self, ACCEL__REG_PA_LP_FIXED, ACCEL__REG_PA_LP_MOVING, st->surf, why);
  if (s) return s;
  double dt, dr, height;
  find_peak(st->surf, st->p->nt, st->p->nr, true, &dt, &dr, &height);
  *d = dt * 3.14159265358979323846 / st->p->nt;
  return ACCEL_OK;
}

/* The angle where the translation's correlation peaks highest, from its
 * heights (h0 at *angle) a step either side, by a parabola: the log-polar
 * estimate is biased on small images, where few frequencies sample the
 * angle. The step turns the image's corners by about a pixel. */
static accel_status polish_angle(pa_state *st, double *angle, double *t, double h0, char *why) {
  const double half = 0.5 * hypot((double)st->p->fw, (double)st->p->fh), step = 1.0 / half;
  double hm, hp, tm[2] = {t[0], t[1]}, tp[2] = {t[0], t[1]}, moved;
  accel_status s = refine_translation(st, *angle - step, tm, &hm, &moved, why);
  if (!s) s = refine_translation(st, *angle + step, tp, &hp, &moved, why);
  if (s) return s;
  const double den = hm - 2.0 * h0 + hp;
  if (!(den < 0.0)) return ACCEL_OK;
  double d = 0.5 * (hm - hp) / den;
  d = d < -1.0 ? -1.0 : d > 1.0 ? 1.0 : d;
  *angle += d * step;
  return refine_translation(st, *angle, t, &h0, &moved, why);
}

/* Rotation: the log-polar estimate, its pi ambiguity settled by the
 * translation peaks, then two rounds of residual rotation and translation. */
static accel_status rotation(pa_state *st, double *angle, double *t, char *why) {
  const double pi = 3.14159265358979323846, zero[2] = {0.0, 0.0};
  double a0, best = -INFINITY;
  accel_status s = residual_rotation(st, 0.0, zero, &a0, why);
  for (int k = 0; k < 2 && !s; k++) {
    const double cand = k ? (a0 > 0.0 ? a0 - pi : a0 + pi) : a0;
    double tc[2] = {0.0, 0.0}, height, moved;
    s = refine_translation(st, cand, tc, &height, &moved, why);
    if (!s && height > best) {
      best = height;
      *angle = cand;
      t[0] = tc[0];
      t[1] = tc[1];
    }
  }
  double h0 = 0.0;
  for (int it = 0; it < 2 && !s; it++) {
    double d, moved;
    s = residual_rotation(st, *angle, t, &d, why);
    if (!s) *angle += d;
    if (!s) s = refine_translation(st, *angle, t, &h0, &moved, why);
  }
  return s ? s : polish_angle(st, angle, t, h0, why);
}

accel_status accel__reg_pa_run(const accel__reg_pa_plan *p, const accel__reg_pa_engine *e, accel__reg_prealign_job *job,
                               char *why) {
  const size_t n = (size_t)(p->rows * p->cols > p->nt * p->nr ? p->rows * p->cols : p->nt * p->nr);
  pa_state st = {p, e, job->centre, malloc(n * sizeof(float))};
  if (!st.surf) {
    accel__why(why, "out of memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const accel__reg_pa_map id = {{1.0, 0.0, 0.0, 0.0, 1.0, 0.0}};
  double angle = 0.0, t[2] = {0.0, 0.0}, height, moved = 1.0;
  accel_status s = e->spectrum(e->self, ACCEL__REG_PA_FIXED, 0, &id, why);
  if (!s && job->mode == 2) s = e->logpolar(e->self, ACCEL__REG_PA_LP_FIXED, ACCEL__REG_PA_FIXED, why);
  if (!s && job->mode == 2) s = rotation(&st, &angle, t, why);
  /* the translation until it settles (the window's pull vanishes at 0) */
  for (int it = 0; it < 4 && !s && moved > 0.01; it++) s = refine_translation(&st, angle, t, &height, &moved, why);
  free(st.surf);
  if (s) return s;
  job->result[0] = angle;
  job->result[1] = t[0];
  job->result[2] = t[1];
  return ACCEL_OK;
}

/* ---------------------------------------------------------------- the CPU engine */

typedef struct cpu_engine {
  const accel__reg_pa_plan *p;
  const accel__reg_prealign_job *job;
  int threads;
  accel__reg_fft *img, *lp;
  float *real, *cross, *spec[4];
} cpu_engine;

static accel_status cpu_spectrum(void *self, int slot, int src, const accel__reg_pa_map *map, char *why) {
  (void)why;
  cpu_engine *e = self;
  const accel__reg_pa_plan *p = e->p;
  const float *img = src ? e->job->moving : e->job->fixed;
  const int64_t w = src ? p->mw : p->fw, h = src ? p->mh : p->fh;
  const double mean = src ? p->mmean : p->fmean;
  float *real = e->real;
#pragma omp parallel for num_threads(e->threads) schedule(static)
  for (int64_t r = 0; r < p->rows; r++)
    for (int64_t c = 0; c < p->cols; c++) real[r * p->cols + c] = accel__reg_pa_pixel(p, img, w, h, map, mean, r, c);
  accel__reg_fft_forward(e->img, e->real, e->spec[slot]);
  return ACCEL_OK;
}

static accel_status cpu_logpolar(void *self, int slot, int from, char *why) {
  (void)why;
  cpu_engine *e = self;
  const accel__reg_pa_plan *p = e->p;
  const float *spec = e->spec[from];
  float *real = e->real;
#pragma omp parallel for num_threads(e->threads) schedule(static)
  for (int64_t t = 0; t < p->nt; t++)
    for (int64_t j = 0; j < p->nr; j++) real[t * p->nr + j] = accel__reg_pa_logpolar(p, spec, t, j);
  accel__reg_fft_forward(e->lp, e->real, e->spec[slot]);
  return ACCEL_OK;
}

static accel_status cpu_correlate(void *self, int a, int b, float *out, char *why) {
  (void)why;
  cpu_engine *e = self;
  const accel__reg_pa_plan *p = e->p;
  const bool lp = a >= ACCEL__REG_PA_LP_FIXED;
  const int64_t rows = lp ? p->nt : p->rows, cols = lp ? p->nr : p->cols, half = cols / 2 + 1;
  const float *sa = e->spec[a], *sb = e->spec[b];
  float *cross = e->cross;
#pragma omp parallel for num_threads(e->threads) schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < half; c++)
      accel__reg_pa_cross(sa, sb, rows, cols, p->sigma, r, c, cross + 2 * (r * half + c));
  accel__reg_fft_inverse(lp ? e->lp : e->img, e->cross, out);
  return ACCEL_OK;
}

static void cpu_engine_free(cpu_engine *e) {
  accel__reg_fft_free(e->img);
  accel__reg_fft_free(e->lp);
  free(e->real);
  free(e->cross);
  for (int i = 0; i < 4; i++) free(e->spec[i]);
}

accel_status accel__reg_cpu_prealign(accel__call *call, accel__reg_prealign_job *job) {
  accel__reg_pa_plan p;
  accel__reg_pa_plan_for(job, &p);
  cpu_engine e = {&p, job, call->threads > 0 ? call->threads : 1, NULL, NULL, NULL, NULL, {NULL, NULL, NULL, NULL}};
  const size_t img = (size_t)p.rows * (size_t)(p.cols / 2 + 1), lp = (size_t)p.nt * (size_t)(p.nr / 2 + 1);
  const size_t most = (size_t)p.rows * (size_t)p.cols > (size_t)p.nt * (size_t)p.nr ? (size_t)p.rows * (size_t)p.cols
                                                                                    : (size_t)p.nt * (size_t)p.nr;
  accel_status s = accel__reg_fft_new(p.rows, p.cols, &e.img, call->why);
  if (!s) s = accel__reg_fft_new(p.nt, p.nr, &e.lp, call->why);
  if (!s) {
    e.real = malloc(most * sizeof(float));
    e.cross = malloc(2 * (img > lp ? img : lp) * sizeof(float));
    for (int i = 0; i < 4; i++) e.spec[i] = malloc(2 * (i < 2 ? img : lp) * sizeof(float));
    if (!e.real || !e.cross || !e.spec[0] || !e.spec[1] || !e.spec[2] || !e.spec[3]) {
      accel__why(call->why, "out of memory");
      s = ACCEL_ERR_OUT_OF_MEMORY;
    }
  }
  const accel__reg_pa_engine engine = {&e, cpu_spectrum, cpu_logpolar, cpu_correlate};
  if (!s) s = accel__reg_pa_run(&p, &engine, job, call->why);
  cpu_engine_free(&e);
  return s;
}

/* ---------------------------------------------------------------- the stage */

ACCEL__STAGE_FN(run_prealign, reg, prealign, job)

/* An image's check: finite values and some contrast. */
static accel_status check_image(accel_ctx *ctx, const char *func, const char *what, const float *img, int64_t n) {
  float lo = img[0], hi = img[0];
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(img[i]))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "the %s level image has a non-finite value at %lld", what,
                            (long long)i);
    lo = img[i] < lo ? img[i] : lo;
    hi = img[i] > hi ? img[i] : hi;
  }
  if (!(hi > lo))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "the %s image is constant: pre-alignment needs texture to correlate", what);
  return ACCEL_OK;
}

accel_status accel__reg_prealign(accel_ctx *ctx, const char *func, const float *fixed, int64_t fw, int64_t fh,
                                 const float *moving, int64_t mw, int64_t mh, int32_t factor, int32_t offset,
                                 int32_t mode, const double centre[2], double params[3]) {
  if (!func) func = __func__;
  if (!ctx || !fixed || !moving || !centre || !params)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "pre-alignment: a NULL argument");
  if (fw < 2 || fh < 2 || mw < 2 || mh < 2)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "pre-alignment needs level images of at least 2 x 2 pixels (fixed %lld x %lld, moving %lld x "
                          "%lld at the coarsest level: fewer levels make it larger)",
                          (long long)fw, (long long)fh, (long long)mw, (long long)mh);
  if (factor < 1 || offset < 0 || (mode != 1 && mode != 2) || !isfinite(centre[0]) || !isfinite(centre[1]))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "pre-alignment: factor %d (>= 1), offset %d (>= 0), mode %d (1 or 2), centre (%g, %g) "
                          "(finite)",
                          (int)factor, (int)offset, (int)mode, centre[0], centre[1]);
  accel_status s = check_image(ctx, func, "fixed", fixed, fw * fh);
  if (!s) s = check_image(ctx, func, "moving", moving, mw * mh);
  if (s) return s;
  accel__reg_prealign_job job = {fixed, fw, fh, moving, mw, mh, mode, {0, 0}, {0, 0, 0}};
  job.centre[0] = (centre[0] - offset) / factor;
  job.centre[1] = (centre[1] - offset) / factor;
  if ((s = accel__dispatch(ctx, "reg.prealign", run_prealign, &job))) return s;
  params[0] = job.result[0];
  params[1] = job.result[1] * factor;
  params[2] = job.result[2] * factor;
  return ACCEL_OK;
}
