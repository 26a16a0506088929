/*
 * One level's optimisation, whatever backend evaluates the metric
 * (level.h has the frame, the layouts and the evaluator interface).
 *
 * Gauss-Newton (the default; Levenberg-Marquardt damping). Every iteration
 * the evaluator gives the gradient g and the Gauss-Newton matrix N of the
 * metric on the iteration's training samples; with the bending energy
 * penalty (weight w) the objective is metric + w BE, BE = c^T K c, K the
 * exact integral of the squared second derivatives of the B-spline
 * (u_xx^2 + 2 u_xy^2 + u_yy^2, per unit area of the image), a 7 x 7 stencil
 * on the grid. The step solves (N + lambda (diag N + eps)) d = -g by
 * conjugate gradients preconditioned with the nodes' 2 x 2 diagonal blocks;
 * it is taken when the objective on the fixed validation samples
 * decreases, and lambda then shrinks by 4; otherwise lambda grows by 8 and
 * the step is solved again. After 8 refusals the level stops as
 * ACCEL_REG_STOP_STALLED. Training samples per iteration are at least
 * ACCEL__REG_GN_PER_NODE per grid node (the samples option is raised to
 * that), because the step fits every node at once.
 *
 * Early stopping (both optimizers): the validation objective v_t after
 * iteration t (ASGD: every ASGD_EVAL_EVERY iterations, smoothed as the
 * mean of the last 3 evaluations) stops the level as
 * ACCEL_REG_STOP_CONVERGED when (v_{t - window} - v_t) < tolerance |v_{t -
 * window}|, i.e. its relative decrease over the last `window` iterations
 * is below the tolerance.
 */
#include "reg/level.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GN_TRIES 10
#define LAMBDA_START 1e-2
#define LAMBDA_MIN 1e-6
#define GN_CG_MAX 60
#define GN_CG_TOL 1e-2

/* ------------------------------------------------------------ geometry */

/* One axis: the valid cells of a grid of n nodes at origin/spacing, over
 * lattice indices [lo, hi] (q = factor i + offset). */
static bool axis_init(accel__reg_axis *a, int64_t n, double origin, double spacing, int32_t factor, int32_t offset,
                      int64_t lo, int64_t hi) {
  a->cells = n - 3;
  a->first = malloc(sizeof(int64_t) * (size_t)(a->cells + 1));
  if (!a->first) return false;
  for (int64_t k = 0; k <= a->cells; k++) {
    const double q = origin + (double)(k + 1) * spacing;
    int64_t i = (int64_t)ceil((q - offset) / factor);
    a->first[k] = i < lo ? lo : i > hi + 1 ? hi + 1 : i;
  }
  return true;
}

void accel__reg_geom_free(accel__reg_geom *g) {
  free(g->ax.first);
  free(g->ay.first);
  g->ax.first = g->ay.first = NULL;
}

/* The box of the fixed level image after the linear part, as lattice index
 * ranges. */
static void lattice_box(const accel__reg_geom *g, int64_t lo[2], int64_t hi[2]) {
  const double f = g->factor, o = g->offset;
  double qlo[2] = {INFINITY, INFINITY}, qhi[2] = {-INFINITY, -INFINITY};
  for (int c = 0; c < 4; c++) {
    const double px = o + f * (double)((c & 1) ? g->fw - 1 : 0), py = o + f * (double)((c & 2) ? g->fh - 1 : 0);
    double q[2];
    accel__reg_linear(&g->xf, px, py, &q[0], &q[1]);
    for (int d = 0; d < 2; d++) {
      qlo[d] = fmin(qlo[d], q[d]);
      qhi[d] = fmax(qhi[d], q[d]);
    }
  }
  for (int d = 0; d < 2; d++) {
    lo[d] = (int64_t)ceil((qlo[d] - o) / f - 1e-9);
    hi[d] = (int64_t)floor((qhi[d] - o) / f + 1e-9);
  }
}

accel_status accel__reg_geom_init(accel__call *call, const accel__reg_level_job *job, accel__reg_geom *g) {
  const accel_reg_options *o = job->options;
  memset(g, 0, sizeof *g);
  g->xf = job->xf;
  g->xf.params = NULL;
  const double *m = g->xf.m, det = m[0] * m[3] - m[1] * m[2];
  g->inv[0] = m[3] / det, g->inv[1] = -m[1] / det, g->inv[2] = -m[2] / det, g->inv[3] = m[0] / det;
  g->invb[0] = -(g->inv[0] * g->xf.b[0] + g->inv[1] * g->xf.b[1]);
  g->invb[1] = -(g->inv[2] * g->xf.b[0] + g->inv[3] * g->xf.b[1]);
  g->identity = m[0] == 1 && m[1] == 0 && m[2] == 0 && m[3] == 1 && g->xf.b[0] == 0 && g->xf.b[1] == 0;
  g->factor = job->factor, g->offset = job->offset, g->level = job->level;
  g->fw = job->fixed_width, g->fh = job->fixed_height, g->mw = job->moving_width, g->mh = job->moving_height;
  g->cap = fmax((double)(1 << (o->levels - 1 - job->level)), 2.0);
  g->seed = o->seed, g->renew = o->renew_samples, g->metric = o->metric;
  int64_t lo[2], hi[2];
  if (g->identity) {
    lo[0] = lo[1] = 0, hi[0] = g->fw - 1, hi[1] = g->fh - 1;
  } else {
    lattice_box(g, lo, hi);
  }
  if (!axis_init(&g->ax, g->xf.nx, g->xf.origin[0], g->xf.spacing[0], g->factor, g->offset, lo[0], hi[0]) ||
      !axis_init(&g->ay, g->xf.ny, g->xf.origin[1], g->xf.spacing[1], g->factor, g->offset, lo[1], hi[1])) {
    accel__reg_geom_free(g);
    accel__why(call->why, "out of memory for the sample cells");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  g->candidates = (g->ax.first[g->ax.cells] - g->ax.first[0]) * (g->ay.first[g->ay.cells] - g->ay.first[0]);
  const int64_t nodes = g->xf.nx * g->xf.ny;
  const bool gn = o->optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON;
  const double cand = g->candidates > 0 ? (double)g->candidates : 1.0;
  int64_t train = o->samples;
  if (gn && train > 0 && train < ACCEL__REG_GN_PER_NODE * nodes) train = ACCEL__REG_GN_PER_NODE * nodes;
  g->train_density = train <= 0 ? 1.0 : (double)train / cand;
  g->train = g->train_density >= 1.0 ? g->candidates : train;
  const int64_t normal = ACCEL__REG_GN_NORMAL_PER_NODE * nodes;
  g->normal_density = !gn ? 0.0 : o->samples <= 0 ? 1.0 : (double)normal / cand;
  g->normal = !gn ? 0 : g->normal_density >= 1.0 ? g->candidates : normal;
  g->valid_density = o->validation_samples <= 0 ? 0.0 : (double)o->validation_samples / cand;
  g->valid = o->validation_samples <= 0 ? 0 : g->valid_density >= 1.0 ? g->candidates : o->validation_samples;
  return ACCEL_OK;
}

/* ------------------------------------------------------------ bending energy */

/* The cubic B-spline and its first two derivatives. */
static double bspline_d(double t, int order) {
  const double a = fabs(t), s = t < 0 ? -1.0 : 1.0;
  if (a >= 2) return 0;
  if (a < 1)
    return order == 0 ? 2.0 / 3.0 - a * a + a * a * a / 2 : order == 1 ? s * (-2 * a + 1.5 * a * a) : -2 + 3 * a;
  const double b = 2 - a;
  return order == 0 ? b * b * b / 6 : order == 1 ? -s * b * b / 2 : b;
}

/* K(di, dj) for |di|, |dj| <= 3: the 2-D bending stencil from the 1-D
 * integrals A_m(d) = int beta^(m)(t) beta^(m)(t - d) dt (4-point
 * Gauss-Legendre per unit interval, exact for these piecewise
 * polynomials). */
static void bending_stencil(double k[ACCEL__REG_NB]) {
  static const double gx[4] = {-0.8611363115940526, -0.3399810435848563, 0.3399810435848563, 0.8611363115940526};
  static const double gw[4] = {0.3478548451374538, 0.6521451548625461, 0.6521451548625461, 0.3478548451374538};
  double A[3][4];
  for (int m = 0; m < 3; m++)
    for (int d = 0; d < 4; d++) {
      double s = 0;
      for (int u = -2; u < 2; u++)
        for (int q = 0; q < 4; q++) {
          const double t = u + 0.5 + 0.5 * gx[q];
          s += 0.5 * gw[q] * bspline_d(t, m) * bspline_d(t - d, m);
        }
      A[m][d] = s;
    }
  for (int dj = -3; dj <= 3; dj++)
    for (int di = -3; di <= 3; di++) {
      const int i = abs(di), j = abs(dj);
      k[(dj + 3) * 7 + di + 3] = A[2][i] * A[0][j] + 2 * A[1][i] * A[1][j] + A[0][i] * A[2][j];
    }
}

typedef struct bending {
  double weight; /* the option times 1 / (spacing^2 area): BE = weight c^T K c */
  double k[ACCEL__REG_NB];
} bending;

static void bending_init(bending *b, const accel__reg_geom *g, double option) {
  const double area = (double)g->fw * g->factor * (double)g->fh * g->factor;
  b->weight = option / (g->xf.spacing[0] * g->xf.spacing[1] * area);
  bending_stencil(b->k);
}

/* y = K x for both components (y may not alias x); returns x^T K x. */
static double bending_apply(const bending *b, const accel__reg_geom *g, const double *x, double *y) {
  const int64_t nx = g->xf.nx, ny = g->xf.ny, n = nx * ny;
  double e = 0;
  for (int64_t j = 0; j < ny; j++)
    for (int64_t i = 0; i < nx; i++) {
      double sx = 0, sy = 0;
      for (int dj = -3; dj <= 3; dj++) {
        if (j + dj < 0 || j + dj >= ny) continue;
        for (int di = -3; di <= 3; di++) {
          if (i + di < 0 || i + di >= nx) continue;
          const double kk = b->k[(dj + 3) * 7 + di + 3];
          const int64_t c = (j + dj) * nx + i + di;
          sx += kk * x[c];
          sy += kk * x[n + c];
        }
      }
      y[j * nx + i] = sx;
      y[n + j * nx + i] = sy;
      e += x[j * nx + i] * sx + x[n + j * nx + i] * sy;
    }
  return e;
}

/* The penalty at x: its value, and (when grad/normal are given) its
 * gradient and Hessian added to those of the metric. */
static double bending_add(const bending *b, const accel__reg_geom *g, const double *x, double *grad, double *normal,
                          double *scratch) {
  if (!(b->weight > 0)) return 0;
  const int64_t n = g->xf.nx * g->xf.ny;
  const double e = bending_apply(b, g, x, scratch);
  if (grad)
    for (int64_t a = 0; a < 2 * n; a++) grad[a] += 2 * b->weight * scratch[a];
  if (normal)
    for (int64_t a = 0; a < n; a++)
      for (int nb = 0; nb < ACCEL__REG_NB; nb++) {
        normal[(a * ACCEL__REG_NB + nb) * 3] += 2 * b->weight * b->k[nb];
        normal[(a * ACCEL__REG_NB + nb) * 3 + 2] += 2 * b->weight * b->k[nb];
      }
  return b->weight * e;
}

/* ------------------------------------------------------------ linear algebra */

#define DOT_CHUNK 2048

/* a . b over n values, in fixed chunks summed in order. */
static double dot(const double *a, const double *b, int64_t n, int threads) {
  const int64_t chunks = (n + DOT_CHUNK - 1) / DOT_CHUNK;
  double part[256], total = 0;
  for (int64_t c0 = 0; c0 < chunks; c0 += 256) {
    const int64_t c1 = c0 + 256 < chunks ? c0 + 256 : chunks;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 65536)
    for (int64_t c = c0; c < c1; c++) {
      double s = 0;
      const int64_t e = (c + 1) * DOT_CHUNK < n ? (c + 1) * DOT_CHUNK : n;
      for (int64_t k = c * DOT_CHUNK; k < e; k++) s += a[k] * b[k];
      part[c - c0] = s;
    }
    for (int64_t c = c0; c < c1; c++) total += part[c - c0];
  }
  return total;
}

/* y = (N + diag(damp)) x in the node-block layout. */
static void normal_apply(const double *N, const double *damp, int64_t nx, int64_t ny, const double *x, double *y,
                         int threads) {
  const int64_t n = nx * ny;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 1024)
  for (int64_t a = 0; a < n; a++) {
    const int64_t i = a % nx, j = a / nx;
    double sx = damp[a] * x[a], sy = damp[n + a] * x[n + a];
    const double *e = N + a * ACCEL__REG_NB3;
    for (int dj = -3; dj <= 3; dj++) {
      if (j + dj < 0 || j + dj >= ny) continue;
      for (int di = -3; di <= 3; di++) {
        if (i + di < 0 || i + di >= nx) continue;
        const int64_t b = a + dj * nx + di;
        const double *v = e + ((dj + 3) * 7 + di + 3) * 3;
        sx += v[0] * x[b] + v[1] * x[n + b];
        sy += v[1] * x[b] + v[2] * x[n + b];
      }
    }
    y[a] = sx;
    y[n + a] = sy;
  }
}

/* Solve (N + diag(damp)) d = -g by preconditioned conjugate gradients,
 * from d = 0, the preconditioner the inverse 2 x 2 diagonal blocks.
 * work: 4 * 2n doubles. */
static void pcg(const double *N, const double *damp, int64_t nx, int64_t ny, const double *g, double *d, double *work,
                int threads) {
  const int64_t n = nx * ny, P = 2 * n;
  double *r = work, *z = work + P, *p = work + 2 * P, *q = work + 3 * P;
  for (int64_t k = 0; k < P; k++) d[k] = 0, r[k] = -g[k];
  const double r0 = sqrt(dot(r, r, P, threads));
  if (!(r0 > 0)) return;
  double rz = 0;
  for (int it = 0; it < GN_CG_MAX; it++) {
    for (int64_t a = 0; a < n; a++) {
      const double *e = N + (a * ACCEL__REG_NB + 24) * 3;
      const double xx = e[0] + damp[a], xy = e[1], yy = e[2] + damp[n + a], det = xx * yy - xy * xy;
      z[a] = det > 0 ? (yy * r[a] - xy * r[n + a]) / det : 0;
      z[n + a] = det > 0 ? (xx * r[n + a] - xy * r[a]) / det : 0;
    }
    const double rz1 = dot(r, z, P, threads);
    if (it == 0)
      for (int64_t k = 0; k < P; k++) p[k] = z[k];
    else
      for (int64_t k = 0; k < P; k++) p[k] = z[k] + (rz1 / rz) * p[k];
    rz = rz1;
    normal_apply(N, damp, nx, ny, p, q, threads);
    const double pq = dot(p, q, P, threads);
    if (!(pq > 0)) break;
    const double alpha = rz / pq;
    for (int64_t k = 0; k < P; k++) d[k] += alpha * p[k], r[k] -= alpha * q[k];
    if (sqrt(dot(r, r, P, threads)) < GN_CG_TOL * r0) break;
  }
}

/* ------------------------------------------------------------ early stopping, progress */

typedef struct stopper {
  double tolerance;
  int window;
  int n;
  double *hist; /* n values so far */
} stopper;

/* Record v; true when the level has converged. */
static bool stopper_push(stopper *s, double v) {
  s->hist[s->n++] = v;
  if (!(s->tolerance > 0) || s->n <= s->window) return false;
  const double old = s->hist[s->n - 1 - s->window];
  return old - v < s->tolerance * fabs(old);
}

static accel_status progress(accel__call *call, const accel__reg_level_job *job, int32_t it, double value) {
  const accel_reg_options *o = job->options;
  if (o->progress && o->progress(o->progress_user, job->level, it, value)) {
    accel__why(call->why, "cancelled by the progress callback at level %d, iteration %d", (int)job->level, (int)it);
    return ACCEL_ERR_CANCELLED;
  }
  return ACCEL_OK;
}

/* The objective (metric + bending) on the validation set, or on the
 * training set of `it` when there is none. */
static accel_status objective(accel__call *call, const accel__reg_evaluator *ev, const accel__reg_geom *g,
                              const bending *b, const double *x, int32_t it, double *scratch, double *v) {
  int64_t count;
  accel_status s = ev->eval(call, ev->state, x, g->valid > 0 ? ACCEL__REG_SET_VALID : ACCEL__REG_SET_TRAIN, it, v,
                            &count, NULL, NULL);
  if (s) return s;
  *v += bending_add(b, g, x, NULL, NULL, scratch);
  return ACCEL_OK;
}

/* ------------------------------------------------------------ Gauss-Newton */

typedef struct gn_mem {
  double *grad, *normal, *damp, *step, *trial, *work, *scratch, *hist;
} gn_mem;

static void gn_free(gn_mem *m) {
  free(m->grad), free(m->normal), free(m->damp), free(m->step), free(m->trial), free(m->work), free(m->scratch);
  free(m->hist);
}

static bool gn_alloc(gn_mem *m, int64_t n, int32_t iterations) {
  const size_t P = (size_t)(2 * n);
  memset(m, 0, sizeof *m);
  m->grad = malloc(P * sizeof(double)), m->normal = malloc((size_t)n * ACCEL__REG_NB3 * sizeof(double));
  m->damp = malloc(P * sizeof(double)), m->step = malloc(P * sizeof(double)), m->trial = malloc(P * sizeof(double));
  m->work = malloc(4 * P * sizeof(double)), m->scratch = malloc(P * sizeof(double));
  m->hist = malloc(((size_t)iterations + 1) * sizeof(double));
  return m->grad && m->normal && m->damp && m->step && m->trial && m->work && m->scratch && m->hist;
}

/* One accepted step from x (objective *v), or false (stalled). lambda in/out. */
static accel_status gn_step(accel__call *call, const accel__reg_evaluator *ev, const accel__reg_geom *g,
                            const bending *b, gn_mem *m, double *x, int32_t it, double *lambda, double *nu, double *v,
                            bool *stalled) {
  const int64_t nx = g->xf.nx, ny = g->xf.ny, n = nx * ny;
  double mean = 0;
  for (int64_t a = 0; a < n; a++) {
    const double *e = m->normal + (a * ACCEL__REG_NB + 24) * 3;
    mean += e[0] + e[2];
  }
  const double eps = 1e-6 * mean / (double)(2 * n) + 1e-300;
  *stalled = true;
  for (int t = 0; t < GN_TRIES; t++) {
    for (int64_t a = 0; a < n; a++) {
      const double *e = m->normal + (a * ACCEL__REG_NB + 24) * 3;
      m->damp[a] = *lambda * (e[0] + eps);
      m->damp[n + a] = *lambda * (e[2] + eps);
    }
    pcg(m->normal, m->damp, nx, ny, m->grad, m->step, m->work, call->threads);
    for (int64_t a = 0; a < n; a++) {
      const double len = hypot(m->step[a], m->step[n + a]);
      if (len > g->cap) m->step[a] *= g->cap / len, m->step[n + a] *= g->cap / len;
    }
    for (int64_t k = 0; k < 2 * n; k++) m->trial[k] = x[k] + m->step[k];
    /* The model's predicted decrease -(g.d + d.N d / 2). */
    normal_apply(m->normal, m->damp, nx, ny, m->step, m->work, call->threads);
    double gd = 0, dnd = 0;
    for (int64_t k = 0; k < 2 * n; k++)
      gd += m->grad[k] * m->step[k], dnd += m->step[k] * m->work[k] - m->damp[k] * m->step[k] * m->step[k];
    const double pred = -(gd + dnd / 2);
    double vt;
    accel_status s = objective(call, ev, g, b, m->trial, it, m->scratch, &vt);
    if (s) return s;
    if (vt < *v) {
      memcpy(x, m->trial, (size_t)(2 * n) * sizeof *x);
      const double rho = pred > 0 ? (*v - vt) / pred : 0, c = 2 * rho - 1;
      *v = vt;
      *lambda = fmax(*lambda * fmax(1.0 / 3, 1 - c * c * c), LAMBDA_MIN);
      *nu = 2;
      *stalled = false;
      return ACCEL_OK;
    }
    *lambda *= *nu;
    *nu *= 2;
  }
  return ACCEL_OK;
}

static accel_status gauss_newton(accel__call *call, accel__reg_level_job *job, const accel__reg_geom *g,
                                 const accel__reg_evaluator *ev) {
  const accel_reg_options *o = job->options;
  const int64_t n = g->xf.nx * g->xf.ny;
  gn_mem m;
  if (!gn_alloc(&m, n, o->iterations)) {
    gn_free(&m);
    accel__why(call->why, "out of memory for the Gauss-Newton system of %lld nodes", (long long)n);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  bending b;
  bending_init(&b, g, o->bending_weight);
  stopper st = {o->tolerance, o->window, 0, m.hist};
  accel_reg_level_report *r = job->report;
  double *x = job->params, v, lambda = LAMBDA_START, nu = 2;
  accel_status s = objective(call, ev, g, &b, x, 0, m.scratch, &v);
  r->metric_first = r->metric_last = v;
  r->stop = ACCEL_REG_STOP_ITERATIONS;
  stopper_push(&st, v);
  for (int32_t it = 0; !s && it < o->iterations; it++) {
    double value;
    int64_t count;
    double unused;
    s = ev->eval(call, ev->state, x, ACCEL__REG_SET_TRAIN, it, &value, &count, m.grad, NULL);
    if (!s) s = ev->eval(call, ev->state, x, ACCEL__REG_SET_NORMAL, it, &unused, &count, NULL, m.normal);
    if (s) break;
    const double be = bending_add(&b, g, x, m.grad, m.normal, m.scratch);
    if (g->valid == 0) v = value + be;
    bool stalled;
    if ((s = gn_step(call, ev, g, &b, &m, x, it, &lambda, &nu, &v, &stalled))) break;
    r->iterations = it + 1;
    r->metric_last = v;
    if ((s = progress(call, job, it, value))) break;
    if (stalled) {
      r->stop = ACCEL_REG_STOP_STALLED;
      break;
    }
    if (stopper_push(&st, v)) {
      r->stop = ACCEL_REG_STOP_CONVERGED;
      break;
    }
  }
  gn_free(&m);
  return s;
}

/* ------------------------------------------------------------ entry */

accel_status accel__reg_optimize(accel__call *call, accel__reg_level_job *job, const accel__reg_geom *g,
                                 const accel__reg_evaluator *ev) {
  accel_reg_level_report *r = job->report;
  r->samples = g->train;
  r->width = g->fw;
  r->height = g->fh;
  r->grid_spacing = g->xf.spacing[0];
  r->iterations = 0;
  if (job->options->optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON) return gauss_newton(call, job, g, ev);
  accel__why(call->why, "the ASGD optimizer is not available yet");
  return ACCEL_ERR_UNSUPPORTED;
}
