/*
 * One level's optimisation, whatever backend evaluates the metric
 * (level.h has the frame, the layouts and the evaluator interface).
 *
 * Gauss-Newton (the default; Levenberg-Marquardt damping). Every iteration
 * the evaluator gives the gradient g of the metric on the iteration's
 * training samples (at least ACCEL__REG_GN_PER_NODE per grid node: the
 * gradient decides where the iteration ends, so its noise is the result's)
 * and, in the same pass, the Gauss-Newton matrix N on a stratified subset
 * of them (every k-th sample of a cell, k the training samples over
 * ACCEL__REG_GN_NORMAL_PER_NODE per node, rounded: 4 by default; N only
 * shapes the step, and from the gradient's own samples it matches the
 * gradient it scales). With
 * the bending energy penalty (weight w) the objective is metric + w BE,
 * BE = c^T K c, the mean over the region the level samples of the
 * squared second derivatives of the B-spline (u_xx^2 + 2 u_xy^2 + u_yy^2,
 * as elastix's TransformBendingEnergyPenalty), computed exactly: K couples
 * each node with its 7 x 7 neighbours, separably per axis. The step solves (N + lambda (diag N + eps))
 * d = -g by conjugate gradients preconditioned with the nodes' 2 x 2
 * diagonal blocks. A node moves at most one level pixel (factor
 * full-resolution pixels) per step: longer steps leave the range where the
 * linearised image is a fair model and, on fine periodic texture, jump into
 * the wrong period. The step is taken when the objective on the fixed
 * validation samples decreases; otherwise lambda grows and the step is
 * solved again (Nielsen's damping update: lambda shrinks by max(1/3, 1 -
 * (2 rho - 1)^3) after a step whose actual decrease is rho times the
 * model's, grows by 2, 4, 8, ... after refusals). After 6 refusals the
 * level stops as ACCEL_REG_STOP_STALLED.
 *
 * Early stopping (both optimizers): the validation objective v_t after
 * iteration t (ASGD: every ASGD_EVAL_EVERY iterations, smoothed as the
 * mean of the last 3 evaluations) stops the level as
 * ACCEL_REG_STOP_CONVERGED when (v_{t - window} - v_t) < tolerance |v_{t -
 * window}|, i.e. its relative decrease over the last `window` iterations
 * is below the tolerance.
 *
 * Averaging (Gauss-Newton, the finest level): with samples renewed every
 * iteration each step carries its own sampling noise, and near the optimum
 * the damping shrinks the steps only slowly, so the last few iterations at
 * the finest level cost the most (a third of an 8192^2 registration) and
 * gain little. Once the validation objective's relative decrease over the
 * window is below AVG_ENTER times the tolerance, the level keeps the sum
 * of its iterates from that one on, stops as ACCEL_REG_STOP_CONVERGED when
 * it holds 2 window + 1 of them (or earlier, by the tests above), and
 * returns their mean (Polyak-Ruppert averaging) where the validation
 * objective is lower there than at the last iterate, the last iterate
 * otherwise (where a region still moves towards the optimum, the mean
 * lags behind it). Coarser levels return their last iterate: their results
 * only start the next level.
 */
#include "reg/level.h"

#include "core/internal.h"
#include "reg/level_cell.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GN_TRIES 6
/* The damping's floor, relative to the mean diagonal of N: nodes with
 * little data (at the image's edges) move only as far as they are
 * supported. */
#define GN_EPS 0.1
#define ASGD_EXACT_SAMPLES 100000.0
#define LAMBDA_START 1e-2
#define LAMBDA_MIN 1e-6
#define GN_CG_MAX 60
#define GN_CG_TOL 1e-2
#define AVG_ENTER 10.0

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
  g->cap = (double)(1 << (o->levels - 1 - job->level));
  g->keep_outside = o->optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON;
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
  /* A training density of 1 or more draws every candidate once. Counted
   * as such (or as the per-node minimum's, when that is above 1, as the
   * default's count), so that more samples than the level has pixels leave
   * the matrix the share the default leaves it, not a vanishing one. */
  const double least = (double)(ACCEL__REG_GN_PER_NODE * nodes) / cand;
  const double drawn = fmin(g->train_density, fmax(1.0, least));
  g->normal_every =
      gn && g->normal_density > 0 && g->normal_density < drawn ? (int64_t)floor(drawn / g->normal_density + 0.5) : 1;
  g->normal = !gn ? 0 : g->train / g->normal_every;
  g->exact_density = ASGD_EXACT_SAMPLES / cand;
  g->jacobian_density = (double)(2 * nodes > 1000 ? 2 * nodes : 1000) / cand;
  const int64_t valid = o->validation_samples <= 0                     ? 0
                        : o->validation_samples < ACCEL__REG_VALID_MIN ? ACCEL__REG_VALID_MIN
                                                                       : o->validation_samples;
  /* Draws outside the mask do not count: the validation set is drawn at
   * the density that leaves `valid` of them inside it (a mask over 1% of
   * the image left 50 of 5000). Training samples keep their density: a
   * node's own samples, not the level's total, decide its step. */
  double inside = 1.0;
  if (job->mask && valid > 0) {
    int64_t in = 0;
    const int64_t px = g->fw * g->fh;
    for (int64_t k = 0; k < px; k++) in += job->mask[k] != 0;
    if (in > 0) inside = (double)in / (double)px;
  }
  g->valid_density = (double)valid / cand / inside;
  g->valid = valid <= 0 ? 0 : g->valid_density >= 1.0 ? g->candidates : valid;
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

/* The bending energy BE = c^T K c: the mean, over the level's lattice
 * points whose samples count (in the fixed image and its mask), of u_xx^2
 * + 2 u_xy^2 + u_yy^2 of both components, as elastix's
 * TransformBendingEnergyPenalty averages it over its samples. Where every
 * point of the level's box counts, K is separable: for node (i, j) and its
 * neighbour (i + di, j + dj), K = X2 Y0 + 2 X1 Y1 + X0 Y2 with X_m[i][di]
 * the mean over the lattice columns of the m-th derivatives' product of
 * the two nodes' weights (in pixels), Y_m likewise; else bending_cells. */
typedef struct bending {
  double weight;       /* the option: the penalty is weight c^T K c */
  double *x[3], *y[3]; /* X_m, Y_m: [node * 7 + d + 3] */
  double *k;           /* or K itself where it is not separable (bending_cells): [node * 49 + neighbour] */
} bending;

/* One axis's B-spline weights at its lattice indices [first[0],
 * first[cells]): t[(i - first[0]) * 12 + m * 4 + a], the m-th derivative
 * (per pixel^m) of the weight of node k + a at index i of cell k. */
static double *lattice_weights(const accel__reg_axis *ax, double origin, double spacing, int32_t factor,
                               int32_t offset) {
  const int64_t n = ax->first[ax->cells] - ax->first[0];
  double *t = malloc(sizeof(double) * 12 * (size_t)(n > 0 ? n : 1));
  if (!t) return NULL;
  for (int64_t k = 0; k < ax->cells; k++)
    for (int64_t i = ax->first[k]; i < ax->first[k + 1]; i++) {
      const double c = ((double)factor * (double)i + offset - origin) / spacing;
      for (int m = 0; m < 3; m++)
        for (int a = 0; a < 4; a++)
          t[(i - ax->first[0]) * 12 + m * 4 + a] = bspline_d(c - (double)(k + a), m) * pow(spacing, -m);
    }
  return t;
}

/* One axis's tables: X_m[node * 7 + d + 3], the mean over the axis's
 * lattice indices of the m-th derivatives' product of the weights of node
 * and node + d (summed in index order: (k, d) and (k + d, -d) alike). */
static bool bending_axis(double *t[3], const accel__reg_axis *ax, int64_t n, double origin, double spacing,
                         int32_t factor, int32_t offset) {
  for (int m = 0; m < 3; m++)
    if (!(t[m] = calloc((size_t)(7 * n), sizeof(double)))) return false;
  double *w = lattice_weights(ax, origin, spacing, factor, offset);
  if (!w) return false;
  const int64_t first = ax->first[0], count = ax->first[ax->cells] - first;
  for (int64_t k = 0; k < ax->cells; k++)
    for (int64_t i = ax->first[k]; i < ax->first[k + 1]; i++)
      for (int m = 0; m < 3; m++)
        for (int a = 0; a < 4; a++)
          for (int b = 0; b < 4; b++)
            t[m][(k + a) * 7 + b - a + 3] += w[(i - first) * 12 + m * 4 + a] * w[(i - first) * 12 + m * 4 + b];
  free(w);
  if (count > 0)
    for (int m = 0; m < 3; m++)
      for (int64_t e = 0; e < 7 * n; e++) t[m][e] /= (double)count;
  return true;
}

static void bending_free(bending *b) {
  for (int m = 0; m < 3; m++) free(b->x[m]), free(b->y[m]);
  free(b->k);
}

/* Whether the samples at lattice (ix, iy) count: in the fixed image and
 * its mask (accel__reg_fixed_where, as the evaluators decide). */
static bool point_counts(const accel__reg_geom *g, const uint8_t *mask, int64_t ix, int64_t iy) {
  double lx, ly;
  return accel__reg_fixed_where(g, mask, ix, iy, (double)g->factor * (double)ix + g->offset,
                                (double)g->factor * (double)iy + g->offset, &lx, &ly) == ACCEL__REG_FIXED_IN;
}

/* p[m][a * 4 + b] += w[m * 4 + a] w[m * 4 + b]: one point's products. */
static void weight_products(double p[3][16], const double *w) {
  for (int m = 0; m < 3; m++)
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) p[m][a * 4 + b] += w[m * 4 + a] * w[m * 4 + b];
}

/* k[a * 16 + b] += sum over points of the bending energy's products for
 * the cell's nodes a = j * 4 + i and b, from their x sums sx and y sums sy
 * (weight_products): X2 Y0 + 2 X1 Y1 + X0 Y2. */
static void cell_products(double k[256], const double sx[3][16], const double sy[3][16]) {
  for (int a = 0; a < 16; a++)
    for (int b = 0; b < 16; b++) {
      const int x = (a % 4) * 4 + b % 4, y = (a / 4) * 4 + b / 4;
      k[a * 16 + b] += sx[2][x] * sy[0][y] + 2 * sx[1][x] * sy[1][y] + sx[0][x] * sy[2][y];
    }
}

/* Cell (cx, cy)'s sums over its lattice points that count (point_counts)
 * into k (zeroed here); returns their number. A row whose points all count
 * adds only its y products: the x sums of such rows are the cell's full
 * row's, added once. */
static int64_t cell_bending(const accel__reg_geom *g, const uint8_t *mask, const double *wx, const double *wy,
                            int64_t cx, int64_t cy, double k[256]) {
  const int64_t x0 = g->ax.first[cx], x1 = g->ax.first[cx + 1], y0 = g->ay.first[cy], y1 = g->ay.first[cy + 1];
  const int64_t fx = g->ax.first[0], fy = g->ay.first[0];
  double full_x[3][16] = {{0}}, full_y[3][16] = {{0}};
  int64_t points = 0;
  memset(k, 0, sizeof(double) * 256);
  for (int64_t iy = y0; iy < y1; iy++) {
    int64_t in = 0;
    for (int64_t ix = x0; ix < x1; ix++) in += point_counts(g, mask, ix, iy);
    points += in;
    if (in == x1 - x0) {
      weight_products(full_y, wy + (iy - fy) * 12);
    } else if (in > 0) {
      double row_x[3][16] = {{0}}, row_y[3][16] = {{0}};
      for (int64_t ix = x0; ix < x1; ix++)
        if (point_counts(g, mask, ix, iy)) weight_products(row_x, wx + (ix - fx) * 12);
      weight_products(row_y, wy + (iy - fy) * 12);
      cell_products(k, row_x, row_y);
    }
  }
  if (points) {
    for (int64_t ix = x0; ix < x1; ix++) weight_products(full_x, wx + (ix - fx) * 12);
    cell_products(k, full_x, full_y);
  }
  return points;
}

/* Where only some of the box's points count (a mask, or an initial linear
 * part that maps some of the box off the fixed image), BE is the mean over
 * those lattice points, as elastix's is the mean over its samples, which
 * lie there. K is then not separable: a table of 49 entries a node. The
 * cells add to it a row of cells in four (rows 4 apart share no node), in
 * a fixed order whatever the threads, (a, b) and (b, a) alike. */
static bool bending_cells(bending *b, const accel__reg_geom *g, const uint8_t *mask, int threads) {
  (void)threads; /* unused without OpenMP */
  const int64_t ncx = g->ax.cells, ncy = g->ay.cells, nx = g->xf.nx, n = nx * g->xf.ny;
  double *wx = lattice_weights(&g->ax, g->xf.origin[0], g->xf.spacing[0], g->factor, g->offset);
  double *wy = lattice_weights(&g->ay, g->xf.origin[1], g->xf.spacing[1], g->factor, g->offset);
  int64_t *points = calloc((size_t)(ncy > 0 ? ncy : 1), sizeof(int64_t));
  b->k = calloc((size_t)n * ACCEL__REG_NB, sizeof(double));
  const bool ok = wx && wy && points && b->k;
  if (ok) {
    for (int64_t pass = 0; pass < 4; pass++) {
#pragma omp parallel for num_threads(threads) schedule(dynamic)
      for (int64_t cy = pass; cy < ncy; cy += 4)
        for (int64_t cx = 0; cx < ncx; cx++) {
          double k[256];
          const int64_t in = cell_bending(g, mask, wx, wy, cx, cy, k);
          if (!in) continue;
          points[cy] += in;
          for (int a = 0; a < 16; a++) {
            double *row = b->k + ((cy + a / 4) * nx + cx + a % 4) * ACCEL__REG_NB;
            for (int c = 0; c < 16; c++) row[(c / 4 - a / 4 + 3) * 7 + c % 4 - a % 4 + 3] += k[a * 16 + c];
          }
        }
    }
    int64_t total = 0;
    for (int64_t cy = 0; cy < ncy; cy++) total += points[cy];
    if (total > 0)
      for (int64_t e = 0; e < n * ACCEL__REG_NB; e++) b->k[e] /= (double)total;
  }
  free(wx), free(wy), free(points);
  return ok;
}

/* Whether every lattice point of the level's box counts. */
static bool all_count(const accel__reg_geom *g, const uint8_t *mask) {
  for (int64_t iy = g->ay.first[0]; iy < g->ay.first[g->ay.cells]; iy++)
    for (int64_t ix = g->ax.first[0]; ix < g->ax.first[g->ax.cells]; ix++)
      if (!point_counts(g, mask, ix, iy)) return false;
  return true;
}

/* false: out of memory (bending_free either way). */
static bool bending_init(bending *b, const accel__reg_geom *g, const uint8_t *mask, double option, int threads) {
  memset(b, 0, sizeof *b);
  b->weight = option;
  if (!(option > 0)) return true;
  if (!((!mask && g->identity) || all_count(g, mask))) return bending_cells(b, g, mask, threads);
  return bending_axis(b->x, &g->ax, g->xf.nx, g->xf.origin[0], g->xf.spacing[0], g->factor, g->offset) &&
         bending_axis(b->y, &g->ay, g->xf.ny, g->xf.origin[1], g->xf.spacing[1], g->factor, g->offset);
}

static accel_status bending_oom(accel__call *call) {
  accel__why(call->why, "out of memory for the bending energy's tables");
  return ACCEL_ERR_OUT_OF_MEMORY;
}

/* K between node (i, j) and (i + di, j + dj). */
static double bending_k(const bending *b, const accel__reg_geom *g, int64_t i, int64_t j, int di, int dj) {
  if (b->k) return b->k[(j * g->xf.nx + i) * ACCEL__REG_NB + (dj + 3) * 7 + di + 3];
  const int64_t x = i * 7 + di + 3, y = j * 7 + dj + 3;
  return b->x[2][x] * b->y[0][y] + 2 * b->x[1][x] * b->y[1][y] + b->x[0][x] * b->y[2][y];
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
          const double kk = bending_k(b, g, i, j, di, dj);
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
        const int64_t i = a % g->xf.nx, j = a / g->xf.nx;
        const int di = nb % 7 - 3, dj = nb / 7 - 3;
        if (i + di < 0 || i + di >= g->xf.nx || j + dj < 0 || j + dj >= g->xf.ny) continue;
        const double kk = bending_k(b, g, i, j, di, dj);
        normal[(a * ACCEL__REG_NB + nb) * 3] += 2 * b->weight * kk;
        normal[(a * ACCEL__REG_NB + nb) * 3 + 2] += 2 * b->weight * kk;
      }
  return b->weight * e;
}

/* ------------------------------------------------------------ linear algebra */

#define DOT_CHUNK 2048

/* a . b over n values, in fixed chunks summed in order. */
static double dot(const double *a, const double *b, int64_t n, int threads) {
  (void)threads; /* unused without OpenMP */
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

/* Nodes from which a product with N runs on the threads: conjugate
 * gradients take one product per iteration, and a parallel region of less
 * work costs more than it saves (on a busy machine, a descheduled thread's
 * time slice). */
#define NORMAL_APPLY_PARALLEL 2048

/* The system's products. N is symmetric to the bit: the entries of nodes
 * a and b receive the same cells' terms in the same order (level_cell.h),
 * and the bending stencil is even. So the products keep only the blocks
 * of each node with the 25 nodes from itself on (neighbour index nb >= 24:
 * rows below, or its own row to the right) and read a node's other 24
 * blocks from those nodes' entries, slot by slot: H[(slot * 3 + m) * n +
 * node], slot nb - 24 of node a or 24 - nb of node b. Neighbouring
 * nodes of a row then read consecutive values of every array, and
 * are summed side by side in vector lanes (eight): each node's sums are added in
 * the order of the whole matrix's product (one chain of additions per
 * node, which one node at a time waits on: the products took a fifth of
 * a 300 MP registration). Tests set accel__reg_normal_full to read the
 * whole matrix one node at a time, as before, and compare. */
#define HALF 25
bool accel__reg_normal_full = false;

/* The system the products read: n * HALF * 3 values by slot, or the whole
 * matrix (full). */
typedef struct gn_system {
  const double *m;
  int64_t n;
  bool full;
} gn_system;

/* Node a's block {xx, xy, yy} with neighbour nb (node b). */
static inline void gn_block(gn_system N, int64_t a, int64_t b, int nb, double v[3]) {
  if (N.full) {
    memcpy(v, N.m + (a * ACCEL__REG_NB + nb) * 3, sizeof(double) * 3);
    return;
  }
  const int64_t node = nb >= 24 ? a : b, slot = nb >= 24 ? nb - 24 : 24 - nb;
  for (int k = 0; k < 3; k++) v[k] = N.m[(slot * 3 + k) * N.n + node];
}

/* The upper half of N into H by slot (n * HALF * 3). */
static void normal_half(const double *N, int64_t n, double *H, int threads) {
  (void)threads; /* unused without OpenMP */
#pragma omp parallel for num_threads(threads) schedule(static) if (n > NORMAL_APPLY_PARALLEL)
  for (int64_t a = 0; a < n; a++)
    for (int k = 0; k < HALF * 3; k++) H[k * n + a] = N[(a * ACCEL__REG_NB + 24) * 3 + k];
}

/* Node a's row of the product (node by node, either layout). */
static void apply_node(gn_system N, const double *damp, int64_t nx, int64_t ny, int64_t a, const double *x, double *y) {
  const int64_t n = nx * ny, i = a % nx, j = a / nx;
  double sx = damp[a] * x[a], sy = damp[n + a] * x[n + a];
  for (int dj = -3; dj <= 3; dj++) {
    if (j + dj < 0 || j + dj >= ny) continue;
    for (int di = -3; di <= 3; di++) {
      if (i + di < 0 || i + di >= nx) continue;
      const int64_t b = a + dj * nx + di;
      double v[3];
      gn_block(N, a, b, (dj + 3) * 7 + di + 3, v);
      sx += v[0] * x[b] + v[1] * x[n + b];
      sy += v[1] * x[b] + v[2] * x[n + b];
    }
  }
  y[a] = sx;
  y[n + a] = sy;
}

typedef double v8d __attribute__((vector_size(64)));
/* Eight doubles at any double's address. */
typedef double v8d_u __attribute__((vector_size(64), aligned(8), may_alias));
#define v8d_at(p) (*(const v8d_u *)(p))

/* Nodes a .. a + 7 of one row, all 7 x 7 neighbours of each inside the
 * row (by slot): apply_node's operations in each lane (no contraction of
 * the multiplies and adds: -ffp-contract=off). */
static inline __attribute__((always_inline)) void apply_eight(gn_system N, const double *damp, int64_t nx, int64_t ny,
                                                              int64_t a, const double *x, double *y) {
  const int64_t n = N.n, j = a / nx;
  v8d sx = v8d_at(damp + a) * v8d_at(x + a), sy = v8d_at(damp + n + a) * v8d_at(x + n + a);
  for (int dj = -3; dj <= 3; dj++) {
    if (j + dj < 0 || j + dj >= ny) continue;
    for (int di = -3; di <= 3; di++) {
      const int nb = (dj + 3) * 7 + di + 3;
      const int64_t b = a + dj * nx + di, node = nb >= 24 ? a : b, slot = nb >= 24 ? nb - 24 : 24 - nb;
      const double *h = N.m + slot * 3 * n + node;
      const v8d v0 = v8d_at(h), v1 = v8d_at(h + n), v2 = v8d_at(h + 2 * n);
      const v8d xb = v8d_at(x + b), xnb = v8d_at(x + n + b);
      sx += v0 * xb + v1 * xnb;
      sy += v1 * xb + v2 * xnb;
    }
  }
  *(v8d_u *)(y + a) = sx;
  *(v8d_u *)(y + n + a) = sy;
}

/* Grid rows [j0, j1) of y = (N + diag(damp)) x. */
ACCEL__CLONES("avx2", "default")
static void apply_rows(gn_system N, const double *damp, int64_t nx, int64_t ny, int64_t j0, int64_t j1, const double *x,
                       double *y) {
  for (int64_t j = j0; j < j1; j++) {
    int64_t i = 0;
    while (i < nx)
      if (!N.full && i >= 3 && i + 10 < nx) {
        apply_eight(N, damp, nx, ny, j * nx + i, x, y);
        i += 8;
      } else {
        apply_node(N, damp, nx, ny, j * nx + i, x, y);
        i++;
      }
  }
}

/* y = (N + diag(damp)) x, row by row of the grid. */
static void normal_apply(gn_system N, const double *damp, int64_t nx, int64_t ny, const double *x, double *y,
                         int threads) {
  (void)threads; /* unused without OpenMP */
#pragma omp parallel for num_threads(threads) schedule(static) if (nx * ny > NORMAL_APPLY_PARALLEL)
  for (int64_t j = 0; j < ny; j++) apply_rows(N, damp, nx, ny, j, j + 1, x, y);
}

/* Solve (N + diag(damp)) d = -g by preconditioned conjugate gradients,
 * from d = 0, the preconditioner the inverse 2 x 2 diagonal blocks.
 * work: 4 * 2n doubles. */
static void pcg(gn_system N, const double *damp, int64_t nx, int64_t ny, const double *g, double *d, double *work,
                int threads) {
  (void)threads; /* unused without OpenMP */
  const int64_t n = nx * ny, P = 2 * n;
  const bool par = n > NORMAL_APPLY_PARALLEL;
  (void)par;
  double *r = work, *z = work + P, *p = work + 2 * P, *q = work + 3 * P;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
  for (int64_t k = 0; k < P; k++) d[k] = 0, r[k] = -g[k];
  const double r0 = sqrt(dot(r, r, P, threads));
  if (!(r0 > 0)) return;
  double rz = 0;
  for (int it = 0; it < GN_CG_MAX; it++) {
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t a = 0; a < n; a++) {
      double e[3];
      gn_block(N, a, a, 24, e);
      const double xx = e[0] + damp[a], xy = e[1], yy = e[2] + damp[n + a], det = xx * yy - xy * xy;
      z[a] = det > 0 ? (yy * r[a] - xy * r[n + a]) / det : 0;
      z[n + a] = det > 0 ? (xx * r[n + a] - xy * r[a]) / det : 0;
    }
    const double rz1 = dot(r, z, P, threads), beta = it == 0 ? 0.0 : rz1 / rz;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t k = 0; k < P; k++) p[k] = it == 0 ? z[k] : z[k] + beta * p[k];
    rz = rz1;
    normal_apply(N, damp, nx, ny, p, q, threads);
    const double pq = dot(p, q, P, threads);
    if (!(pq > 0)) break;
    const double alpha = rz / pq;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
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

/* Whether the last value's relative decrease over the window is below
 * `factor` times the tolerance (never with tolerance 0). */
static bool stopper_below(const stopper *s, double factor) {
  if (!(s->tolerance > 0) || s->n <= s->window) return false;
  const double old = s->hist[s->n - 1 - s->window];
  return old - s->hist[s->n - 1] < factor * s->tolerance * fabs(old);
}

/* Record v; true when the level has converged. */
static bool stopper_push(stopper *s, double v) {
  s->hist[s->n++] = v;
  return stopper_below(s, 1.0);
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
  int64_t count[3];
  accel_status s = ev->eval(call, ev->state, x, g->valid > 0 ? ACCEL__REG_SET_VALID : ACCEL__REG_SET_TRAIN, it, v,
                            count, NULL, NULL);
  if (s) return s;
  *v += bending_add(b, g, x, NULL, NULL, scratch);
  return ACCEL_OK;
}

/* A level whose first training samples all fall outside the moving image
 * (or, in the Gauss-Newton's mirrored extension, absurdly far from it):
 * its start, the initial transform or the coarser levels' result, is far
 * off, and no step could be measured. An error, not a transform left as it
 * came in; so too when the initial linear part maps every sample off the
 * fixed image. Not when the fixed mask is the reason (the samples in the
 * fixed image all outside the mask): a mask sampled at the level's spacing
 * can miss every sample of an iteration (a few rows, a sparse mask) while
 * later iterations and levels find it; such a level runs on (a step that
 * measures nothing changes nothing) as any level does. */
static bool no_samples_error(const int64_t count[3]) { return count[0] == 0 && (count[1] > 0 || count[2] == 0); }

static accel_status no_samples(accel__call *call, int32_t level) {
  accel__why(call->why,
             "level %d: none of its samples maps into the moving image (is the initial transform far off the "
             "images?)",
             (int)level);
  return ACCEL_ERR_INVALID_ARG;
}

/* ------------------------------------------------------------ Gauss-Newton */

typedef struct gn_mem {
  double *grad, *normal, *half, *damp, *step, *trial, *work, *scratch, *hist;
} gn_mem;

static void gn_free(gn_mem *m) {
  free(m->grad), free(m->normal), free(m->half), free(m->damp), free(m->step), free(m->trial), free(m->work),
      free(m->scratch);
  free(m->hist);
}

static bool gn_alloc(gn_mem *m, int64_t n, int32_t iterations) {
  const size_t P = (size_t)(2 * n);
  memset(m, 0, sizeof *m);
  m->grad = malloc(P * sizeof(double)), m->normal = malloc((size_t)n * ACCEL__REG_NB3 * sizeof(double));
  m->half = accel__reg_normal_full ? NULL : malloc((size_t)n * HALF * 3 * sizeof(double));
  m->damp = malloc(P * sizeof(double)), m->step = malloc(P * sizeof(double)), m->trial = malloc(P * sizeof(double));
  m->work = malloc(4 * P * sizeof(double)), m->scratch = malloc(P * sizeof(double));
  m->hist = malloc(((size_t)iterations + 1) * sizeof(double));
  return m->grad && m->normal && (m->half || accel__reg_normal_full) && m->damp && m->step && m->trial && m->work &&
         m->scratch && m->hist;
}

/* One accepted step from x (objective *v), or false (stalled). lambda in/out. */
static accel_status gn_step(accel__call *call, const accel__reg_evaluator *ev, const accel__reg_geom *g,
                            const bending *b, gn_mem *m, double *x, int32_t it, double *lambda, double *nu, double *v,
                            bool *stalled) {
  const int64_t nx = g->xf.nx, ny = g->xf.ny, n = nx * ny;
  gn_system N = {m->normal, n, true};
  if (m->half) {
    normal_half(m->normal, n, m->half, call->threads);
    N = (gn_system){m->half, n, false};
  }
  double mean = 0;
  for (int64_t a = 0; a < n; a++) {
    double e[3];
    gn_block(N, a, a, 24, e);
    mean += e[0] + e[2];
  }
  const double eps = GN_EPS * mean / (double)(2 * n) + 1e-300;
  *stalled = true;
  for (int t = 0; t < GN_TRIES; t++) {
    for (int64_t a = 0; a < n; a++) {
      double e[3];
      gn_block(N, a, a, 24, e);
      m->damp[a] = *lambda * (e[0] + eps);
      m->damp[n + a] = *lambda * (e[2] + eps);
    }
    pcg(N, m->damp, nx, ny, m->grad, m->step, m->work, call->threads);
#pragma omp parallel for num_threads(call->threads) schedule(static) if (n > NORMAL_APPLY_PARALLEL)
    for (int64_t a = 0; a < n; a++) {
      const double len = hypot(m->step[a], m->step[n + a]);
      if (len > g->cap) m->step[a] *= g->cap / len, m->step[n + a] *= g->cap / len;
      m->trial[a] = x[a] + m->step[a], m->trial[n + a] = x[n + a] + m->step[n + a];
    }
    /* The model's predicted decrease -(g.d + d.N d / 2). */
    normal_apply(N, m->damp, nx, ny, m->step, m->work, call->threads);
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

/* The finest level's mean of iterates (see the top of the file). */
typedef struct averager {
  double *sum;   /* 2n: the iterates' sum; NULL: not averaging */
  int32_t count; /* the iterates in it */
} averager;

/* Whether the level starts averaging after pushing v: the validation
 * objective's relative decrease over the window is below AVG_ENTER times
 * the tolerance (the level has not converged by the tolerance itself).
 * Not without a validation set: the mean and the last iterate would be
 * compared on different training samples. */
static bool averaging_starts(const stopper *s, const accel__reg_level_job *job, const accel__reg_geom *g) {
  return job->level == job->options->levels - 1 && g->valid > 0 && stopper_below(s, AVG_ENTER);
}

static accel_status gauss_newton(accel__call *call, accel__reg_level_job *job, const accel__reg_geom *g,
                                 const accel__reg_evaluator *ev) {
  const accel_reg_options *o = job->options;
  const int64_t n = g->xf.nx * g->xf.ny;
  gn_mem m;
  averager avg = {NULL, 0};
  if (!gn_alloc(&m, n, o->iterations)) {
    gn_free(&m);
    accel__why(call->why, "out of memory for the Gauss-Newton system of %lld nodes", (long long)n);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  bending b;
  const bool bent = bending_init(&b, g, job->mask, o->bending_weight, call->threads);
  stopper st = {o->tolerance, o->window, 0, m.hist};
  accel_reg_level_report *r = job->report;
  double *x = job->params, v = NAN, lambda = LAMBDA_START, nu = 2;
  accel_status s = bent ? objective(call, ev, g, &b, x, 0, m.scratch, &v) : bending_oom(call);
  r->metric_first = r->metric_last = v;
  r->stop = ACCEL_REG_STOP_ITERATIONS;
  stopper_push(&st, v);
  for (int32_t it = 0; !s && it < o->iterations; it++) {
    double value;
    int64_t count[3];
    s = ev->eval(call, ev->state, x, ACCEL__REG_SET_TRAIN, it, &value, count, m.grad, m.normal);
    if (!s && it == 0 && no_samples_error(count)) s = no_samples(call, job->level);
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
    if (avg.sum) {
      for (int64_t k = 0; k < 2 * n; k++) avg.sum[k] += x[k];
      avg.count++;
    }
    if (stopper_push(&st, v) || avg.count > 2 * o->window) {
      r->stop = ACCEL_REG_STOP_CONVERGED;
      break;
    }
    if (!avg.sum && averaging_starts(&st, job, g)) {
      if (!(avg.sum = malloc((size_t)(2 * n) * sizeof(double)))) {
        accel__why(call->why, "out of memory for the mean of %lld nodes' iterates", (long long)n);
        s = ACCEL_ERR_OUT_OF_MEMORY;
        break;
      }
      memcpy(avg.sum, x, (size_t)(2 * n) * sizeof(double));
      avg.count = 1;
    }
  }
  if (!s && avg.count > 1) { /* the mean, where its objective is the lower */
    double *mean = m.trial, vm;
    for (int64_t k = 0; k < 2 * n; k++) mean[k] = avg.sum[k] / avg.count;
    s = objective(call, ev, g, &b, mean, r->iterations, m.scratch, &vm);
    if (!s && vm < v) memcpy(x, mean, (size_t)(2 * n) * sizeof(double)), r->metric_last = vm;
  }
  free(avg.sum);
  gn_free(&m);
  bending_free(&b);
  return s;
}

/* ------------------------------------------------------------ ASGD */

/* elastix's AdaptiveStochasticGradientDescent (Klein, Pluim, Staring and
 * Viergever 2009, "Adaptive stochastic gradient descent optimisation for
 * image registration", IJCV 81) with its automatic parameter estimation
 * ("Original"): x_{k+1} = x_k - a / (A + t_k + 1) g_k, A = 20, the time
 * t_{k+1} = max(0, t_k + f(-g_k . g_{k-1})), f a sigmoid from fmin to
 * fmax = 1 with f(0) = 0 and scale omega. From the B-spline Jacobians J_j
 * at M = max(1000, parameters) points (here: 2 x P, the 16 weights w_j in
 * each row): C = (1/M) sum J_j^T J_j, TrC, TrCC = ||C||_F^2, maxJJ =
 * max_j 6 |w_j|^2, maxJCJ = max_j 6 w_j^T S w_j (S the per-axis block of
 * C); from gradient measurements at the level's start perturbed by
 * N(0, (delta / sqrt(maxJJ))^2): gg = mean |g_exact|^2 (100000 samples),
 * ee = mean |g_exact - g_stochastic|^2; sigma1 = sqrt(gg / TrC), sigma3 =
 * sqrt(ee / TrC), a = A delta / (sigma1 sqrt(maxJCJ)) * sigma1^2 /
 * (sigma1^2 + sigma3^2), fmin = -0.99 + 0.98 sigma1^2 / (sigma1^2 +
 * sigma3^2), omega = 0.1 sigma3^2 sqrt(TrCC); delta, the largest voxel
 * displacement of a step, is the level's pixel size (full-resolution
 * pixels). */
#define ASGD_A 20.0
#define ASGD_EVAL_EVERY 10

typedef struct asgd_params {
  double a, fmin, fmax, omega;
} asgd_params;

/* The Jacobian terms (elastix's ComputeJacobianTerms for a B-spline): 1,
 * 0 when the level has no candidate points, -1 out of memory. */
static int jacobian_terms(const accel__reg_geom *g, double *TrC, double *TrCC, double *maxJJ, double *maxJCJ) {
  const int64_t nx = g->xf.nx, n = nx * g->xf.ny, cxn = g->ax.cells, cells = cxn * g->ay.cells;
  double *S = calloc((size_t)(n * ACCEL__REG_NB), sizeof(double));
  if (!S) return -1;
  const uint64_t stream = accel__reg_stream(g, ACCEL__REG_SET_JACOBIAN, 0);
  double M = 0;
  *maxJJ = *maxJCJ = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t c = 0; c < cells; c++) {
      const int64_t cx = c % cxn, cy = c / cxn;
      const int64_t P = (g->ax.first[cx + 1] - g->ax.first[cx]) * (g->ay.first[cy + 1] - g->ay.first[cy]);
      const int64_t ns = accel__reg_cell_samples(P, g->jacobian_density);
      for (int64_t k = 0; k < ns; k++) {
        int64_t ix, iy;
        accel__reg_sample_at(&g->ax, &g->ay, cx, cy, k, ns, g->jacobian_density, g->seed, g->level, stream, &ix, &iy);
        const double qx = g->factor * (double)ix + g->offset, qy = g->factor * (double)iy + g->offset;
        double wx[4], wy[4], w[16], ww = 0, wsw = 0;
        const double tx = (qx - g->xf.origin[0]) / g->xf.spacing[0] - (double)(cx + 1);
        const double ty = (qy - g->xf.origin[1]) / g->xf.spacing[1] - (double)(cy + 1);
        accel__reg_weights(tx < 0 ? 0 : tx > 1 ? 1 : tx, wx);
        accel__reg_weights(ty < 0 ? 0 : ty > 1 ? 1 : ty, wy);
        for (int t = 0; t < 16; t++) w[t] = wy[t / 4] * wx[t % 4], ww += w[t] * w[t];
        for (int t = 0; t < 16; t++) {
          const int64_t a = (cy + t / 4) * nx + cx + t % 4;
          for (int u = 0; u < 16; u++) {
            const int nb = (u / 4 - t / 4 + 3) * 7 + (u % 4 - t % 4 + 3);
            if (pass == 0) S[a * ACCEL__REG_NB + nb] += w[t] * w[u];
            else wsw += w[t] * w[u] * S[a * ACCEL__REG_NB + nb] / M;
          }
        }
        if (pass == 0) M += 1;
        *maxJJ = fmax(*maxJJ, 6 * ww);
        if (pass == 1) *maxJCJ = fmax(*maxJCJ, 6 * wsw);
      }
    }
  *TrC = *TrCC = 0;
  for (int64_t a = 0; a < n; a++) {
    *TrC += 2 * S[a * ACCEL__REG_NB + 24] / M;
    for (int nb = 0; nb < ACCEL__REG_NB; nb++) *TrCC += 2 * pow(S[a * ACCEL__REG_NB + nb] / M, 2);
  }
  free(S);
  return M > 0 ? 1 : 0;
}

/* A standard normal number from the counter hash (Box-Muller). */
static double normal_at(const accel__reg_geom *g, uint64_t stream, int64_t k) {
  const uint64_t h = accel__reg_hash(g->seed, g->level, stream, -1, k);
  const double u1 = ((double)(h >> 11) + 0.5) / 9007199254740992.0, u2 = (double)(uint32_t)h / 4294967296.0;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* The automatic parameter estimation at x; work: 3 * 2n doubles, scratch
 * 2n. The gradients are the objective's, bending included (as elastix's
 * estimation samples its whole cost function): from the metric's alone, a
 * large bending weight made steps that grew without bound. */
static accel_status asgd_estimate(accel__call *call, const accel__reg_evaluator *ev, const accel__reg_geom *g,
                                  const bending *b, const double *x, double *work, double *scratch, asgd_params *p) {
  const int64_t P = 2 * g->xf.nx * g->xf.ny;
  double TrC, TrCC, maxJJ, maxJCJ;
  const int terms = jacobian_terms(g, &TrC, &TrCC, &maxJJ, &maxJCJ);
  if (terms == 0) return no_samples(call, g->level);
  if (terms < 0) {
    accel__why(call->why, "out of memory for the Jacobian terms");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const double delta = g->factor, K = 1.5;
  int measurements = TrCC > 1e-14 && TrC > 1e-14 ? (int)ceil(8.0 * TrCC / TrC / TrC / (K - 1) / (K - 1)) : 2;
  measurements = measurements < 2 ? 2 : measurements > 1000 ? 1000 : measurements;
  const double sigma4 = maxJJ > 1e-14 ? delta / sqrt(maxJJ) : 0;
  double *mu = work, *ge = work + P, *ga = work + 2 * P, gg = 0, ee = 0, value;
  int64_t count[3];
  for (int i = 0; i < measurements; i++) {
    const uint64_t stream = ((uint64_t)5 << 32) | (uint32_t)i;
    for (int64_t k = 0; k < P; k++) mu[k] = x[k] + sigma4 * normal_at(g, stream, k);
    accel_status s = ev->eval(call, ev->state, mu, ACCEL__REG_SET_EXACT, -1 - i, &value, count, ge, NULL);
    if (!s) s = ev->eval(call, ev->state, mu, ACCEL__REG_SET_TRAIN, -1 - i, &value, count, ga, NULL);
    if (s) return s;
    bending_add(b, g, mu, ge, NULL, scratch);
    bending_add(b, g, mu, ga, NULL, scratch);
    for (int64_t k = 0; k < P; k++) gg += ge[k] * ge[k], ee += (ge[k] - ga[k]) * (ge[k] - ga[k]);
  }
  gg /= measurements, ee /= measurements;
  const double sigma1 = gg > 1e-14 && TrC > 1e-14 ? sqrt(gg / TrC) : 0;
  const double sigma3 = ee > 1e-14 && TrC > 1e-14 ? sqrt(ee / TrC) : 0;
  const double a_max = sigma1 > 1e-14 && maxJCJ > 1e-14 ? ASGD_A * delta / sigma1 / sqrt(maxJCJ) : 0;
  const double noise = sigma1 * sigma1 / (sigma1 * sigma1 + sigma3 * sigma3 + 1e-14);
  p->a = a_max * noise;
  p->fmax = 1.0;
  p->fmin = -0.99 + 0.98 * noise;
  p->omega = fmax(1e-14, 0.1 * sigma3 * sigma3 * sqrt(TrCC));
  return ACCEL_OK;
}

/* ITK's sigmoid from fmin to fmax, shifted so that f(0) = 0. */
static double asgd_sigmoid(const asgd_params *p, double x) {
  const double beta = p->omega * log(-p->fmax / p->fmin);
  return (p->fmax - p->fmin) / (1 + exp(-(x - beta) / p->omega)) + p->fmin;
}

/* Early stopping for ASGD: the validation objective every
 * ASGD_EVAL_EVERY iterations, smoothed as the mean of the last 3. */
static accel_status asgd_check(accel__call *call, const accel__reg_evaluator *ev, const accel__reg_geom *g,
                               const bending *b, const double *x, int32_t it, double *scratch, double *recent,
                               stopper *st, bool *stop) {
  *stop = false;
  const int32_t e = (it + 1) / ASGD_EVAL_EVERY;
  if (!(st->tolerance > 0) || (it + 1) % ASGD_EVAL_EVERY) return ACCEL_OK;
  double v;
  accel_status s = objective(call, ev, g, b, x, it, scratch, &v);
  if (s) return s;
  recent[e % 3] = v;
  if (e < 3) return ACCEL_OK;
  const double smooth = (recent[0] + recent[1] + recent[2]) / 3;
  /* the stopper counts evaluations: a window of `window` iterations */
  *stop = stopper_push(st, smooth);
  return ACCEL_OK;
}

static accel_status asgd(accel__call *call, accel__reg_level_job *job, const accel__reg_geom *g,
                         const accel__reg_evaluator *ev) {
  const accel_reg_options *o = job->options;
  const int64_t P = 2 * g->xf.nx * g->xf.ny;
  double *mem = malloc(sizeof(double) * (size_t)(6 * P + o->iterations + 1));
  if (!mem) {
    accel__why(call->why, "out of memory for ASGD's %lld parameters", (long long)P);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  double *grad = mem, *prev = mem + P, *scratch = mem + 2 * P, *work = mem + 3 * P;
  bending b;
  const bool bent = bending_init(&b, g, job->mask, o->bending_weight, call->threads);
  const int window = o->window / ASGD_EVAL_EVERY > 1 ? o->window / ASGD_EVAL_EVERY : 1;
  stopper st = {o->tolerance, window, 0, mem + 6 * P};
  accel_reg_level_report *r = job->report;
  double *x = job->params, v = NAN, t = 0, recent[3] = {0, 0, 0};
  asgd_params p;
  accel_status s = bent ? objective(call, ev, g, &b, x, 0, scratch, &v) : bending_oom(call);
  if (!s) s = asgd_estimate(call, ev, g, &b, x, work, scratch, &p);
  r->metric_first = r->metric_last = v;
  r->stop = ACCEL_REG_STOP_ITERATIONS;
  for (int32_t it = 0; !s && it < o->iterations; it++) {
    double value;
    int64_t count[3];
    if ((s = ev->eval(call, ev->state, x, ACCEL__REG_SET_TRAIN, it, &value, count, grad, NULL))) break;
    if (it == 0 && no_samples_error(count) && (s = no_samples(call, job->level))) break;
    if (it > 0 && no_samples_error(count)) { /* its value would be a sentinel, its gradient 0: not converged */
      accel__why(call->why,
                 "level %d diverged: after %d iterations none of its samples maps into the moving image "
                 "(ASGD's steps grew without bound; try the Gauss-Newton optimizer)",
                 (int)job->level, (int)it);
      s = ACCEL_ERR_INVALID_ARG;
      break;
    }
    bending_add(&b, g, x, grad, NULL, scratch);
    if (it > 0) t = fmax(0.0, t + asgd_sigmoid(&p, -dot(prev, grad, P, call->threads)));
    const double gain = p.a / (ASGD_A + t + 1);
    for (int64_t k = 0; k < P; k++) x[k] -= gain * grad[k], prev[k] = grad[k];
    r->iterations = it + 1;
    if ((s = progress(call, job, it, value))) break;
    bool stop;
    if ((s = asgd_check(call, ev, g, &b, x, it, scratch, recent, &st, &stop))) break;
    if (stop) {
      r->stop = ACCEL_REG_STOP_CONVERGED;
      break;
    }
  }
  if (!s) s = objective(call, ev, g, &b, x, o->iterations, scratch, &r->metric_last);
  free(mem);
  bending_free(&b);
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
  return job->options->optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON ? gauss_newton(call, job, g, ev)
                                                                     : asgd(call, job, g, ev);
}
