/*
 * The CPU op reg.level: the CPU evaluator of the metric (level.h has the
 * interface) under the backend-neutral optimizer of level.c.
 *
 * Work is split by the control grid's cells (lib/reg/level_cell.h has a
 * cell's arithmetic, shared with the GPU): a cell's samples share their
 * 4 x 4 support nodes, so a cell's sums (the metric's, its 16 x 2 gradient
 * terms and 16 x 16 x 3 Gauss-Newton terms) are formed by one thread in
 * sample order and kept per cell; then every node gathers its entries of
 * the grid's arrays from the cells around it in the order of the cells'
 * colours (cell x mod 4, cell y mod 4), as the GPU does, so that every
 * entry receives its terms in the same order on any number of threads.
 * The cells wait for nothing but the gathering (one barrier: on a busy
 * machine a barrier costs a descheduled thread's time slice). Scalar sums
 * are kept per cell and added in cell order.
 */
#include "reg/cpu.h"
#include "reg/cpu_lanes.h"
#include "reg/level_cell.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_eval {
  accel__reg_cell_in in;    /* the geometry, the images and the base */
  double *cell_sums;        /* cells * ACCEL__REG_SUMS */
  accel__reg_cell_acc *acc; /* every cell's terms (cells) */
  double *gf, *gm, *g1;     /* NCC's gradient sums, 2n each */
} cpu_eval;

/* Node (i, j)'s gradient and Gauss-Newton terms from the cells, colour by
 * colour (level_cell.h: the same sums as a scatter in rounds of colours). */
static void node_gather(const cpu_eval *e, int64_t i, int64_t j, double *grad, double *normal) {
  const accel__reg_geom *g = e->in.g;
  const int64_t nx = g->xf.nx, n = nx * g->xf.ny, node = j * nx + i;
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC;
  double *row = normal ? normal + node * ACCEL__REG_NB3 : NULL;
  if (row) memset(row, 0, sizeof(double) * ACCEL__REG_NB3);
  for (int colour = 0; colour < 16; colour++) {
    int64_t cx, cy;
    int t;
    if (!accel__reg_cell_of(i, j, colour, g->ax.cells, g->ay.cells, &cx, &cy, &t)) continue;
    const accel__reg_cell_acc *a = e->acc + cy * g->ax.cells + cx;
    if (grad && ncc) {
      e->gf[node] += a->ga[0][t], e->gf[n + node] += a->ga[1][t];
      e->gm[node] += a->gb[0][t], e->gm[n + node] += a->gb[1][t];
      e->g1[node] += a->gc[0][t], e->g1[n + node] += a->gc[1][t];
    } else if (grad) {
      grad[node] += a->ga[0][t], grad[n + node] += a->ga[1][t];
    }
    if (!row) continue;
    for (int u = 0; u < 16; u++) {
      double *v = row + ((u / 4 - t / 4 + 3) * 7 + (u % 4 - t % 4 + 3)) * 3;
      v[0] += accel__reg_cell_L(a, 0, t, u), v[1] += accel__reg_cell_L(a, 1, t, u),
          v[2] += accel__reg_cell_L(a, 2, t, u);
    }
  }
}

/* Zero the parts of a cell's terms that an evaluation adds to. */
static void acc_clear(accel__reg_cell_acc *a, bool grad, bool ncc, bool normal) {
  memset(a->s, 0, sizeof a->s);
  if (grad) memset(a->ga, 0, sizeof a->ga);
  if (grad && ncc) memset(a->gb, 0, sizeof a->gb), memset(a->gc, 0, sizeof a->gc);
  if (normal) memset(a->L, 0, sizeof a->L);
}

static accel_status cpu_eval_fn(accel__call *call, void *state, const double *params, int set, int32_t iteration,
                                double *value, int64_t count[3], double *grad, double *normal) {
  const cpu_eval *e = state;
  const accel__reg_geom *g = e->in.g;
  const int64_t n = g->xf.nx * g->xf.ny, cx_n = g->ax.cells, cells = cx_n * g->ay.cells;
  const double density = accel__reg_density(g, set);
  const uint64_t stream = accel__reg_stream(g, set, iteration);
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC, deriv = grad || normal;
  if (grad) memset(ncc ? e->gf : grad, 0, sizeof(double) * (size_t)(2 * n));
  if (grad && ncc)
    memset(e->gm, 0, sizeof(double) * (size_t)(2 * n)), memset(e->g1, 0, sizeof(double) * (size_t)(2 * n));
  /* Threads pay off from some 16384 samples (1 to 2 ms of one core's
   * work; a parallel region costs microseconds on an idle machine, and the
   * coarsest level's 70,000 samples and the 20,000 validation samples of
   * every step took 0.15 s of a 3 s registration at 8192^2 on one core);
   * every cell is one thread's work, and the only wait is between the cells
   * and the nodes' gathering. */
  const bool parallel = (density < 1 ? density : 1.0) * (double)g->candidates >= 16384.0;
  (void)parallel, (void)call; /* unused without OpenMP */
#pragma omp parallel num_threads(call->threads) if (parallel)
  {
    accel__reg_cell_acc local;
#pragma omp for schedule(dynamic, 4)
    for (int64_t c = 0; c < cells; c++) {
      accel__reg_cell_acc *a = deriv ? e->acc + c : &local;
      acc_clear(a, grad != NULL, ncc, normal != NULL);
      if (!accel__reg_cell_eval_lanes(&e->in, params, c % cx_n, c / cx_n, density, stream, grad != NULL, normal != NULL,
                                      a))
        accel__reg_cell_eval(&e->in, params, c % cx_n, c / cx_n, density, stream, grad != NULL, normal != NULL, a);
      memcpy(e->cell_sums + c * ACCEL__REG_SUMS, a->s, sizeof a->s);
    }
    if (deriv) {
#pragma omp for schedule(static)
      for (int64_t node = 0; node < n; node++) node_gather(e, node % g->xf.nx, node / g->xf.nx, grad, normal);
    }
  }
  double s[ACCEL__REG_SUMS] = {0};
  for (int64_t c = 0; c < cells; c++)
    for (int k = 0; k < ACCEL__REG_SUMS; k++) s[k] += e->cell_sums[c * ACCEL__REG_SUMS + k];
  count[0] = (int64_t)s[ACCEL__REG_SUMS - 1];
  count[1] = (int64_t)s[ACCEL__REG_SUM_FIXED];
  count[2] = (int64_t)s[ACCEL__REG_SUM_INSIDE];
  accel__reg_finish(g, s, e->gf, e->gm, e->g1, value, grad, normal);
  return ACCEL_OK;
}

/* Whether a level's fixed image is a pyramid job that only converts a
 * packed 8- or 16-bit host image to float (no smoothing, no sampling): the
 * level then reads the input in place (accel__reg_cell_in's fixed_u8,
 * fixed_u16), its samples on the fixed pixels. At the finest level of a
 * 300 MP scan the float copy is 1.2 GB of memory to fault in and four
 * times the bytes each sample reads. */
static bool fixed_read_in_place(const accel__reg_pyramid_job *p, const accel__reg_geom *g) {
  if (!p || !g->identity || p->sigma != 0 || p->factor != 1 || p->offset != 0) return false;
  const accel_array *in = p->in;
  const int64_t size = in->dtype == ACCEL_DTYPE_U8 ? 1 : in->dtype == ACCEL_DTYPE_U16 ? 2 : 0;
  return size && in->ndim == 2 && in->shape[0] == p->height && in->shape[1] == p->width && in->strides[1] == size &&
         in->strides[0] == in->shape[1] * size;
}

accel_status accel__reg_cpu_level(accel__call *call, accel__reg_level_job *job) {
  accel__reg_geom g;
  accel_status s = accel__reg_geom_init(call, job, &g);
  if (s) return s;
  const bool in_place = fixed_read_in_place(job->make[0], &g);
  for (int k = in_place ? 1 : 0; k < 2 && !s; k++)
    if (job->make[k]) s = accel__reg_cpu_pyramid(call, job->make[k]);
  if (s) {
    accel__reg_geom_free(&g);
    return s;
  }
  const int64_t n = g.xf.nx * g.xf.ny, cells = g.ax.cells * g.ay.cells;
  const accel_array *fin = in_place ? job->make[0]->in : NULL;
  cpu_eval e = {{&g, in_place ? NULL : job->fixed, job->moving, job->mask, job->base,
                 fin && fin->dtype == ACCEL_DTYPE_U8 ? (const uint8_t *)fin->data : NULL,
                 fin && fin->dtype == ACCEL_DTYPE_U16 ? (const uint16_t *)fin->data : NULL},
                malloc(sizeof(double) * (size_t)(cells * ACCEL__REG_SUMS)),
                malloc(sizeof(accel__reg_cell_acc) * (size_t)(cells > 0 ? cells : 1)),
                NULL,
                NULL,
                NULL};
  const bool ncc = g.metric == ACCEL_REG_METRIC_NCC;
  if (ncc)
    e.gf = malloc(sizeof(double) * (size_t)(6 * n)), e.gm = e.gf ? e.gf + 2 * n : NULL,
    e.g1 = e.gf ? e.gf + 4 * n : NULL;
  if (!e.cell_sums || !e.acc || (ncc && !e.gf)) {
    accel__why(call->why, "out of memory for %lld cells", (long long)cells);
    s = ACCEL_ERR_OUT_OF_MEMORY;
  } else {
    const accel__reg_evaluator ev = {&e, cpu_eval_fn};
    s = accel__reg_optimize(call, job, &g, &ev);
  }
  free(e.cell_sums);
  free(e.acc);
  free(e.gf);
  accel__reg_geom_free(&g);
  return s;
}
