/*
 * The CPU op reg.level: the CPU evaluator of the metric (level.h has the
 * interface) under the backend-neutral optimizer of level.c.
 *
 * Work is split by the control grid's cells: a cell's samples share their
 * 4 x 4 support nodes, so a cell's sums (the metric's, its 16 x 2 gradient
 * terms and 16 x 16 x 3 Gauss-Newton terms) are formed by one thread in
 * sample order, then added into the grid's arrays. The additions go in 16
 * rounds by (cell x mod 4, cell y mod 4): the cells of one round share no
 * node, and every array entry receives its terms in the same order on any
 * number of threads. Scalar sums are kept per cell and added in cell order.
 */
#include "reg/cpu.h"
#include "reg/interp.h"
#include "reg/level.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SUMS = 7 }; /* MSE: sum r^2, -, ..., count; NCC: f, m, ff, mm, fm, -, count */

typedef struct cpu_eval {
  const accel__reg_geom *g;
  const float *fixed, *moving;
  const uint8_t *mask;
  accel__reg_xform base; /* base.params NULL: none */
  double *cell_sums;     /* cells * SUMS */
  double *gf, *gm, *g1;  /* NCC's gradient sums, 2n each */
} cpu_eval;

/* One cell's accumulators. */
typedef struct cell_acc {
  double s[SUMS];
  double ga[2][16], gb[2][16], gc[2][16]; /* MSE: ga = sum r dm; NCC: f dm, m dm, dm */
  float L[3][16][16]; /* xx, xy, yy: single precision within a cell (a few hundred terms), double beyond */
} cell_acc;

/* Bilinear value and gradient (per level pixel) of img (w x h) at (x, y),
 * which lies in [0, w - 1] x [0, h - 1]. */
static inline float bilinear(const float *img, int64_t w, int64_t h, double x, double y, double *gx, double *gy) {
  int64_t x0 = (int64_t)x, y0 = (int64_t)y;
  if (x0 > w - 2) x0 = w > 1 ? w - 2 : 0;
  if (y0 > h - 2) y0 = h > 1 ? h - 2 : 0;
  const int64_t x1 = w > 1 ? x0 + 1 : x0, y1 = h > 1 ? y0 + 1 : y0;
  const double fx = x - (double)x0, fy = y - (double)y0;
  const double v00 = img[y0 * w + x0], v10 = img[y0 * w + x1], v01 = img[y1 * w + x0], v11 = img[y1 * w + x1];
  const double top = v00 + fx * (v10 - v00), bot = v01 + fx * (v11 - v01);
  if (gx) {
    *gx = (1 - fy) * (v10 - v00) + fy * (v11 - v01);
    *gy = bot - top;
  }
  return (float)(top + fy * (bot - top));
}

/* The fixed value at lattice (ix, iy), or false when the sample does not
 * count (outside the fixed image or its mask). */
static inline bool fixed_at(const cpu_eval *e, int64_t ix, int64_t iy, double qx, double qy, double *f) {
  const accel__reg_geom *g = e->g;
  if (g->identity) {
    const int64_t k = iy * g->fw + ix;
    if (e->mask && !e->mask[k]) return false;
    *f = e->fixed[k];
    return true;
  }
  const double px = g->inv[0] * qx + g->inv[1] * qy + g->invb[0], py = g->inv[2] * qx + g->inv[3] * qy + g->invb[1];
  const double lx = (px - g->offset) / g->factor, ly = (py - g->offset) / g->factor;
  if (!(lx >= 0 && lx <= (double)(g->fw - 1) && ly >= 0 && ly <= (double)(g->fh - 1))) return false;
  if (e->mask && !e->mask[(int64_t)floor(ly + 0.5) * g->fw + (int64_t)floor(lx + 0.5)]) return false;
  *f = bilinear(e->fixed, g->fw, g->fh, lx, ly, NULL, NULL);
  return true;
}

static inline double frac01(double t) { return t < 0 ? 0 : t >= 1 ? 0.9999999999999999 : t; }

/* Accumulate one cell's samples. */
static void cell_eval(const cpu_eval *e, const double *params, int64_t cx, int64_t cy, double density, uint64_t stream,
                      bool grad, bool normal, cell_acc *a) {
  const accel__reg_geom *g = e->g;
  const int64_t nx = g->xf.nx, n = nx * g->xf.ny;
  const int64_t P = (g->ax.first[cx + 1] - g->ax.first[cx]) * (g->ay.first[cy + 1] - g->ay.first[cy]);
  const int64_t ns = accel__reg_cell_samples(P, density);
  const double f = g->factor, off = g->offset, ncc = g->metric == ACCEL_REG_METRIC_NCC;
  const double *cpx = params, *cpy = params + n;
  for (int64_t k = 0; k < ns; k++) {
    int64_t ix, iy;
    accel__reg_sample_at(&g->ax, &g->ay, cx, cy, k, ns, density, g->seed, g->level, stream, &ix, &iy);
    const double qx = f * (double)ix + off, qy = f * (double)iy + off;
    double fv;
    if (!fixed_at(e, ix, iy, qx, qy, &fv)) continue;
    double wx[4], wy[4], w[16];
    accel__reg_weights(frac01((qx - g->xf.origin[0]) / g->xf.spacing[0] - (double)(cx + 1)), wx);
    accel__reg_weights(frac01((qy - g->xf.origin[1]) / g->xf.spacing[1] - (double)(cy + 1)), wy);
    double ux = 0, uy = 0;
    for (int j = 0; j < 4; j++) {
      const int64_t row = (cy + j) * nx + cx;
      for (int i = 0; i < 4; i++) {
        w[j * 4 + i] = wy[j] * wx[i];
        ux += w[j * 4 + i] * cpx[row + i];
        uy += w[j * 4 + i] * cpy[row + i];
      }
    }
    if (e->base.params) {
      double bx, by;
      accel__reg_bspline_at(&e->base, qx, qy, &bx, &by);
      ux += bx, uy += by;
    }
    const double mx = (qx + ux - off) / f, my = (qy + uy - off) / f;
    if (!g->keep_outside && !(mx >= 0 && mx <= (double)(g->mw - 1) && my >= 0 && my <= (double)(g->mh - 1))) continue;
    double gx, gy;
    const double mv = accel__reg_cubic(e->moving, g->mw, g->mh, mx, my, &gx, &gy);
    gx /= f, gy /= f;
    a->s[SUMS - 1] += 1;
    if (ncc) {
      a->s[0] += fv, a->s[1] += mv, a->s[2] += fv * fv, a->s[3] += mv * mv, a->s[4] += fv * mv;
    } else {
      a->s[0] += (mv - fv) * (mv - fv);
    }
    if (grad) {
      const double ca = ncc ? fv : mv - fv;
      for (int t = 0; t < 16; t++) {
        a->ga[0][t] += ca * gx * w[t], a->ga[1][t] += ca * gy * w[t];
        if (ncc) {
          a->gb[0][t] += mv * gx * w[t], a->gb[1][t] += mv * gy * w[t];
          a->gc[0][t] += gx * w[t], a->gc[1][t] += gy * w[t];
        }
      }
    }
    if (normal) {
      float wf[16];
      for (int t = 0; t < 16; t++) wf[t] = (float)w[t];
      const float G0 = (float)(gx * gx), G1 = (float)(gx * gy), G2 = (float)(gy * gy);
      for (int t = 0; t < 16; t++) {
        const float a0 = wf[t] * G0, a1 = wf[t] * G1, a2 = wf[t] * G2;
        for (int u = 0; u < 16; u++) a->L[0][t][u] += a0 * wf[u];
        for (int u = 0; u < 16; u++) a->L[1][t][u] += a1 * wf[u];
        for (int u = 0; u < 16; u++) a->L[2][t][u] += a2 * wf[u];
      }
    }
  }
}

/* Add a cell's gradient and Gauss-Newton terms into the grid's arrays. */
static void cell_scatter(const cpu_eval *e, int64_t cx, int64_t cy, const cell_acc *a, double *grad, double *normal) {
  const int64_t nx = e->g->xf.nx, n = nx * e->g->xf.ny;
  for (int t = 0; t < 16; t++) {
    const int64_t node = (cy + t / 4) * nx + cx + t % 4;
    if (grad && e->g->metric == ACCEL_REG_METRIC_NCC) {
      e->gf[node] += a->ga[0][t], e->gf[n + node] += a->ga[1][t];
      e->gm[node] += a->gb[0][t], e->gm[n + node] += a->gb[1][t];
      e->g1[node] += a->gc[0][t], e->g1[n + node] += a->gc[1][t];
    } else if (grad) {
      grad[node] += a->ga[0][t], grad[n + node] += a->ga[1][t];
    }
    if (!normal) continue;
    double *row = normal + node * ACCEL__REG_NB3;
    for (int u = 0; u < 16; u++) {
      double *v = row + ((u / 4 - t / 4 + 3) * 7 + (u % 4 - t % 4 + 3)) * 3;
      v[0] += a->L[0][t][u], v[1] += a->L[1][t][u], v[2] += a->L[2][t][u];
    }
  }
}

/* The metric and its derivatives from the summed terms. */
static void finish(const cpu_eval *e, const double *s, double *value, double *grad, double *normal) {
  const int64_t n = e->g->xf.nx * e->g->xf.ny;
  const double N = s[SUMS - 1];
  if (!(N > 0)) {
    *value = 1e300;
    if (grad) memset(grad, 0, sizeof(double) * (size_t)(2 * n));
    return;
  }
  double scale = 2.0 / N;
  if (e->g->metric == ACCEL_REG_METRIC_NCC) {
    const double mf = s[0] / N, mm = s[1] / N, sff = s[2] - N * mf * mf, smm = s[3] - N * mm * mm,
                 sfm = s[4] - N * mf * mm;
    const double den = sqrt(sff * smm);
    *value = den > 0 ? 1.0 - sfm / den : 1.0;
    if (grad)
      for (int64_t k = 0; k < 2 * n; k++)
        grad[k] = den > 0 ? -((e->gf[k] - mf * e->g1[k]) - (sfm / smm) * (e->gm[k] - mm * e->g1[k])) / den : 0.0;
    scale = smm > 0 ? 1.0 / smm : 0.0;
  } else {
    *value = s[0] / N;
    if (grad)
      for (int64_t k = 0; k < 2 * n; k++) grad[k] *= scale;
  }
  if (normal)
    for (int64_t k = 0; k < n * ACCEL__REG_NB3; k++) normal[k] *= scale;
}

static accel_status cpu_eval_fn(accel__call *call, void *state, const double *params, int set, int32_t iteration,
                                double *value, int64_t *count, double *grad, double *normal) {
  const cpu_eval *e = state;
  const accel__reg_geom *g = e->g;
  const int64_t n = g->xf.nx * g->xf.ny, cx_n = g->ax.cells, cells = cx_n * g->ay.cells;
  const double density = accel__reg_density(g, set);
  const uint64_t stream = accel__reg_stream(g, set, iteration);
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC, deriv = grad || normal;
  if (grad) memset(ncc ? e->gf : grad, 0, sizeof(double) * (size_t)(2 * n));
  if (grad && ncc)
    memset(e->gm, 0, sizeof(double) * (size_t)(2 * n)), memset(e->g1, 0, sizeof(double) * (size_t)(2 * n));
  if (normal) memset(normal, 0, sizeof(double) * (size_t)(n * ACCEL__REG_NB3));
  /* Threads pay off with enough samples between the 16 rounds' barriers. */
  const bool parallel = (density < 1 ? density : 1.0) * (double)g->candidates >= (deriv ? 65536.0 : 16384.0);
  int failed = 0;
#pragma omp parallel num_threads(call->threads) reduction(| : failed) if (parallel)
  {
    cell_acc *a = malloc(sizeof *a);
    if (!a) failed = 1;
    for (int color = 0; color < (deriv ? 16 : 1); color++) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < cells; c++) {
        const int64_t cx = c % cx_n, cy = c / cx_n;
        if (!a || (deriv && (cx % 4) + 4 * (cy % 4) != color)) continue;
        if (deriv) memset(a, 0, sizeof *a);
        else memset(a->s, 0, sizeof a->s);
        cell_eval(e, params, cx, cy, density, stream, grad != NULL, normal != NULL, a);
        memcpy(e->cell_sums + c * SUMS, a->s, sizeof a->s);
        if (deriv) cell_scatter(e, cx, cy, a, grad, normal);
      }
    }
    free(a);
  }
  if (failed) {
    accel__why(call->why, "out of memory for the cell sums");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  double s[SUMS] = {0};
  for (int64_t c = 0; c < cells; c++)
    for (int k = 0; k < SUMS; k++) s[k] += e->cell_sums[c * SUMS + k];
  *count = (int64_t)s[SUMS - 1];
  finish(e, s, value, grad, normal);
  return ACCEL_OK;
}

accel_status accel__reg_cpu_level(accel__call *call, accel__reg_level_job *job) {
  accel__reg_geom g;
  accel_status s = accel__reg_geom_init(call, job, &g);
  if (s) return s;
  const int64_t n = g.xf.nx * g.xf.ny, cells = g.ax.cells * g.ay.cells;
  cpu_eval e = {&g,   job->fixed, job->moving, job->mask, job->base, malloc(sizeof(double) * (size_t)(cells * SUMS)),
                NULL, NULL,       NULL};
  const bool ncc = g.metric == ACCEL_REG_METRIC_NCC;
  if (ncc)
    e.gf = malloc(sizeof(double) * (size_t)(6 * n)), e.gm = e.gf ? e.gf + 2 * n : NULL,
    e.g1 = e.gf ? e.gf + 4 * n : NULL;
  if (!e.cell_sums || (ncc && !e.gf)) {
    accel__why(call->why, "out of memory for %lld cells", (long long)cells);
    s = ACCEL_ERR_OUT_OF_MEMORY;
  } else {
    const accel__reg_evaluator ev = {&e, cpu_eval_fn};
    s = accel__reg_optimize(call, job, &g, &ev);
  }
  free(e.cell_sums);
  free(e.gf);
  accel__reg_geom_free(&g);
  return s;
}
