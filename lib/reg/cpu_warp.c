/* The CPU op reg.warp: the output tile by tile, in parallel; in each tile
 * the transform is evaluated from the control grid row by row (separably
 * when the initial part keeps the axes: the B-spline's y weights combine the
 * grid rows once per output row, its x weights are tabulated once per
 * column), then every pixel is interpolated with interp.h. */
#include "reg/cpu.h"
#include "reg/interp.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* What every tile reads. */
typedef struct warp_geo {
  const accel__reg_warp_job *job;
  int64_t in_w, in_h, chans;
  const char *in;
  int64_t is0, is1, is2; /* bytes */
  char *out;
  int64_t os0, os1, os2; /* bytes; os2 = 0 for a 2-D output */
  int64_t out_w, out_h, tile, tiles_x;
  accel_dtype idt, odt;
  bool separable;
  float fill;
} warp_geo;

/* One tile's tables (per thread, sized for the tile's width). */
typedef struct tile_tab {
  int64_t w;
  double *qx;    /* the linear part's x per column (separable) */
  int64_t *i0;   /* the first grid node of each column's support; -1 outside the valid region */
  double *wx;    /* 4 weights per column */
  double *rx;    /* the grid rows combined with one row's y weights, x then y */
  int64_t r_cap; /* nodes rx has room for, per component */
  double *X, *Y; /* one row's positions in the moving image */
} tile_tab;

ALWAYS_INLINE float load_in(const char *p, accel_dtype d) {
  switch (d) {
  case ACCEL_DTYPE_U8: return (float)*(const uint8_t *)p;
  case ACCEL_DTYPE_U16: return (float)*(const uint16_t *)p;
  default: return *(const float *)p;
  }
}

ALWAYS_INLINE void store_out(char *p, accel_dtype d, float v) {
  switch (d) {
  case ACCEL_DTYPE_U8: *(uint8_t *)p = (uint8_t)accel__reg_to_int(v, 255.0f); break;
  case ACCEL_DTYPE_U16: *(uint16_t *)p = (uint16_t)accel__reg_to_int(v, 65535.0f); break;
  default: *(float *)p = v; break;
  }
}

/* ------------------------------------------------------------ positions */

/* The column tables of a tile whose first output column is the fixed image's
 * x = px0 (separable case). */
static void column_tables(const warp_geo *g, tile_tab *tt, int64_t px0) {
  const accel__reg_xform *x = &g->job->xf;
  for (int64_t c = 0; c < tt->w; c++) {
    const double px = (double)(px0 + c);
    tt->qx[c] = x->m[0] * px + x->b[0];
    int64_t first;
    if (x->params && accel__reg_support(tt->qx[c], x->origin[0], x->spacing[0], x->nx, &first, tt->wx + 4 * c))
      tt->i0[c] = first;
    else tt->i0[c] = -1;
  }
}

/* The positions of one output row at the fixed image's y = py, when the
 * initial part keeps the axes: the B-spline's rows combined once. */
static void row_separable(const warp_geo *g, tile_tab *tt, double py) {
  const accel__reg_xform *x = &g->job->xf;
  const double qy = x->m[3] * py + x->b[1];
  int64_t j0, lo = INT64_MAX, hi = -1;
  double wy[4];
  if (x->params && accel__reg_support(qy, x->origin[1], x->spacing[1], x->ny, &j0, wy))
    for (int64_t c = 0; c < tt->w; c++)
      if (tt->i0[c] >= 0) {
        lo = tt->i0[c] < lo ? tt->i0[c] : lo;
        hi = tt->i0[c] > hi ? tt->i0[c] : hi;
      }
  if (hi < 0) { /* no B-spline here */
    for (int64_t c = 0; c < tt->w; c++) tt->X[c] = tt->qx[c], tt->Y[c] = qy;
    return;
  }
  const int64_t nodes = hi - lo + 4, plane = x->nx * x->ny;
  double *rx = tt->rx, *ry = tt->rx + tt->r_cap;
  for (int64_t k = 0; k < nodes; k++) {
    const double *cx = x->params + j0 * x->nx + lo + k;
    double sx = 0.0, sy = 0.0;
    for (int j = 0; j < 4; j++) {
      sx += wy[j] * cx[j * x->nx];
      sy += wy[j] * cx[j * x->nx + plane];
    }
    rx[k] = sx;
    ry[k] = sy;
  }
  for (int64_t c = 0; c < tt->w; c++) {
    double ux = 0.0, uy = 0.0;
    if (tt->i0[c] >= 0) {
      const double *w = tt->wx + 4 * c;
      const int64_t k = tt->i0[c] - lo;
      ux = w[0] * rx[k] + w[1] * rx[k + 1] + w[2] * rx[k + 2] + w[3] * rx[k + 3];
      uy = w[0] * ry[k] + w[1] * ry[k + 1] + w[2] * ry[k + 2] + w[3] * ry[k + 3];
    }
    tt->X[c] = tt->qx[c] + ux;
    tt->Y[c] = qy + uy;
  }
}

/* The positions of one output row, any initial part: point by point. */
static void row_general(const warp_geo *g, tile_tab *tt, int64_t px0, double py) {
  for (int64_t c = 0; c < tt->w; c++) accel__reg_apply(&g->job->xf, (double)(px0 + c), py, &tt->X[c], &tt->Y[c]);
}

/* ------------------------------------------------------------ interpolation */

ALWAYS_INLINE void cubic_row(const warp_geo *g, const tile_tab *tt, char *o, accel_dtype odt) {
  const int64_t C = g->chans, w = g->in_w, h = g->in_h;
  const float *coef = g->job->coef;
  for (int64_t c = 0; c < tt->w; c++) {
    char *dst = o + c * g->os1;
    if (!accel__reg_inside(tt->X[c], tt->Y[c], w, h)) {
      for (int64_t ch = 0; ch < C; ch++) store_out(dst + ch * g->os2, odt, g->fill);
      continue;
    }
    int64_t ox[4], oy[4];
    float wx[4], wy[4];
    accel__reg_cubic_axis(tt->X[c], w, C, ox, wx);
    accel__reg_cubic_axis(tt->Y[c], h, w * C, oy, wy);
    for (int64_t ch = 0; ch < C; ch++)
      store_out(dst + ch * g->os2, odt, accel__reg_cubic_sum(coef + ch, oy, ox, wy, wx));
  }
}

ALWAYS_INLINE void linear_row(const warp_geo *g, const tile_tab *tt, char *o, accel_dtype idt, accel_dtype odt) {
  const int64_t C = g->chans, w = g->in_w, h = g->in_h;
  for (int64_t c = 0; c < tt->w; c++) {
    char *dst = o + c * g->os1;
    if (!accel__reg_inside(tt->X[c], tt->Y[c], w, h)) {
      for (int64_t ch = 0; ch < C; ch++) store_out(dst + ch * g->os2, odt, g->fill);
      continue;
    }
    int64_t ox[2], oy[2];
    float tx, ty;
    accel__reg_linear_axis(tt->X[c], w, g->is1, ox, &tx);
    accel__reg_linear_axis(tt->Y[c], h, g->is0, oy, &ty);
    for (int64_t ch = 0; ch < C; ch++) {
      const char *p = g->in + ch * g->is2;
      const float v = accel__reg_linear_mix(load_in(p + oy[0] + ox[0], idt), load_in(p + oy[0] + ox[1], idt),
                                            load_in(p + oy[1] + ox[0], idt), load_in(p + oy[1] + ox[1], idt), tx, ty);
      store_out(dst + ch * g->os2, odt, v);
    }
  }
}

/* Each combination of types gets its own copy of the pixel loop. */
#define LINEAR_FOR_OUT(idt)                                                                                            \
  switch (g->odt) {                                                                                                    \
  case ACCEL_DTYPE_U8: linear_row(g, tt, o, idt, ACCEL_DTYPE_U8); break;                                               \
  case ACCEL_DTYPE_U16: linear_row(g, tt, o, idt, ACCEL_DTYPE_U16); break;                                             \
  default: linear_row(g, tt, o, idt, ACCEL_DTYPE_F32); break;                                                          \
  }

static void interp_row(const warp_geo *g, const tile_tab *tt, char *o) {
  if (g->job->interp == ACCEL_REG_INTERP_CUBIC) {
    switch (g->odt) {
    case ACCEL_DTYPE_U8: cubic_row(g, tt, o, ACCEL_DTYPE_U8); break;
    case ACCEL_DTYPE_U16: cubic_row(g, tt, o, ACCEL_DTYPE_U16); break;
    default: cubic_row(g, tt, o, ACCEL_DTYPE_F32); break;
    }
    return;
  }
  switch (g->idt) {
  case ACCEL_DTYPE_U8: LINEAR_FOR_OUT(ACCEL_DTYPE_U8) break;
  case ACCEL_DTYPE_U16: LINEAR_FOR_OUT(ACCEL_DTYPE_U16) break;
  default: LINEAR_FOR_OUT(ACCEL_DTYPE_F32) break;
  }
}

/* ------------------------------------------------------------ tiles */

static void tab_free(tile_tab *tt) {
  free(tt->qx);
  free(tt->i0);
  free(tt->wx);
  free(tt->rx);
  free(tt->X);
  free(tt->Y);
}

/* Tables for tiles of width w; false when out of memory. */
static bool tab_alloc(const warp_geo *g, tile_tab *tt, int64_t w) {
  memset(tt, 0, sizeof *tt);
  const accel__reg_xform *x = &g->job->xf;
  tt->w = w;
  /* the nodes one row of a tile can reach: its extent in the grid, plus the support */
  const double reach = fabs(x->m[0]) * (double)w / x->spacing[0] + 6.0;
  tt->r_cap = reach < (double)x->nx + 4 ? (int64_t)reach : x->nx + 4;
  tt->qx = malloc((size_t)w * sizeof *tt->qx);
  tt->i0 = malloc((size_t)w * sizeof *tt->i0);
  tt->wx = malloc((size_t)w * 4 * sizeof *tt->wx);
  tt->rx = malloc((size_t)tt->r_cap * 2 * sizeof *tt->rx);
  tt->X = malloc((size_t)w * sizeof *tt->X);
  tt->Y = malloc((size_t)w * sizeof *tt->Y);
  if (tt->qx && tt->i0 && tt->wx && tt->rx && tt->X && tt->Y) return true;
  tab_free(tt);
  return false;
}

static bool run_tile(const warp_geo *g, int64_t index) {
  const int64_t r0 = index / g->tiles_x * g->tile, c0 = index % g->tiles_x * g->tile;
  const int64_t w = g->out_w - c0 < g->tile ? g->out_w - c0 : g->tile;
  const int64_t h = g->out_h - r0 < g->tile ? g->out_h - r0 : g->tile;
  const int64_t px0 = g->job->x0 + c0;
  tile_tab tt;
  if (!tab_alloc(g, &tt, w)) return false;
  if (g->separable) column_tables(g, &tt, px0);
  for (int64_t r = 0; r < h; r++) {
    const double py = (double)(g->job->y0 + r0 + r);
    if (g->separable) row_separable(g, &tt, py);
    else row_general(g, &tt, px0, py);
    interp_row(g, &tt, g->out + (r0 + r) * g->os0 + c0 * g->os1);
  }
  tab_free(&tt);
  return true;
}

static void geo_of(const accel__reg_warp_job *job, warp_geo *g) {
  const accel_array *in = job->in, *out = job->out;
  memset(g, 0, sizeof *g);
  g->job = job;
  g->in_h = in->shape[0];
  g->in_w = in->shape[1];
  g->chans = in->ndim == 3 ? in->shape[2] : 1;
  g->in = in->data;
  g->is0 = in->strides[0];
  g->is1 = in->strides[1];
  g->is2 = in->ndim == 3 ? in->strides[2] : 0;
  g->out = out->data;
  g->out_h = out->shape[0];
  g->out_w = out->shape[1];
  g->os0 = out->strides[0];
  g->os1 = out->strides[1];
  g->os2 = out->ndim == 3 ? out->strides[2] : 0;
  g->idt = in->dtype;
  g->odt = out->dtype;
  g->tile = job->tile > 0 ? job->tile : 128;
  g->tiles_x = (g->out_w + g->tile - 1) / g->tile;
  g->separable = job->xf.m[1] == 0.0 && job->xf.m[2] == 0.0;
  g->fill = (float)job->fill;
}

accel_status accel__reg_cpu_warp(accel__call *call, accel__reg_warp_job *job) {
  warp_geo g;
  geo_of(job, &g);
  const int64_t tiles = g.tiles_x * ((g.out_h + g.tile - 1) / g.tile);
  int64_t done = 0, reported = 0;
  int stop = 0; /* 1: cancelled, 2: out of memory */
#pragma omp parallel for schedule(dynamic, 1) num_threads(call->threads)
  for (int64_t i = 0; i < tiles; i++) {
    int halt;
#pragma omp atomic read
    halt = stop;
    if (halt) continue;
    if (!run_tile(&g, i)) {
#pragma omp atomic write
      stop = 2;
      continue;
    }
    int64_t now;
#pragma omp atomic capture
    now = ++done;
#ifdef _OPENMP
    const bool caller = omp_get_thread_num() == 0;
#else
    const bool caller = true;
#endif
    /* at most about 100 calls a job, from the calling thread */
    if (caller && job->progress && now * 100 / tiles > reported && now < tiles) {
      reported = now * 100 / tiles;
      if (job->progress(job->progress_user, "reg.warp",
                        job->progress_base + job->progress_span * (double)now / (double)tiles)) {
#pragma omp atomic write
        stop = 1;
      }
    }
  }
  if (!stop && job->progress && job->progress(job->progress_user, "reg.warp", job->progress_base + job->progress_span))
    stop = 1;
  if (stop == 1) {
    accel__why(call->why, "cancelled by the progress callback");
    return ACCEL_ERR_CANCELLED;
  }
  if (stop == 2) {
    accel__why(call->why, "out of memory for the tile tables");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return ACCEL_OK;
}
