/*
 * Shadows and sky view factors on the CPU: eight pixels of a row marched
 * together (their rays are parallel, so every step reads eight neighbouring
 * cells of a row: one vector load per grid), each lane stopping on its own
 * (accel__svf_march's rules), OpenMP over blocks of 8 columns x 16 rows. A
 * block runs every patch before the next block starts, so its sums stay in
 * cache and its rays' cells stay in L2.
 */
#include "svf/ops.h"

/* 512-bit vectors pass between always-inlined helpers only: no ABI is crossed. */
#pragma GCC diagnostic ignored "-Wpsabi"

#include <stdlib.h>
#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
typedef long v8l __attribute__((vector_size(64)));

enum { LANES = 8, UNIT_ROWS = 64 };

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE v8d masked(double w, v8l m) { return (v8d)(((v8l)((v8d){0} + w)) & m); }

/* The march of accel__svf_march for lanes c .. c+7 of row r (lanes outside
 * `valid` take no part). Returns the SH, V2 and VB lane masks (all ones /
 * zero). Written as loops over the eight lanes, which GCC turns into vector
 * instructions (one 512-bit or two 256-bit operations each). */
INLINE void march8(const accel__svf_window *w, int64_t cols, int64_t r, int64_t c, v8l valid, const int32_t *dx,
                   const int32_t *dy, const double *dz, uint32_t n, double hmax, bool veg, v8l *osh, v8l *ov2,
                   v8l *ovb) {
  const int64_t at = (r - w->r0) * w->pitch + (c - w->c0) + ACCEL__SVF_PAD;
  double a[LANES], lim[LANES];
  long sh[LANES], v2[LANES], vb[LANES], live[LANES];
  for (int l = 0; l < LANES; l++) {
    a[l] = w->dsm[at + l];
    lim[l] = hmax - a[l];
    sh[l] = 0;
    v2[l] = veg ? -(long)(w->trunk[at + l] * w->canopy[at + l] == 0.0 && w->canopy[at + l] > 1.0) & valid[l] : 0;
    vb[l] = v2[l];
    live[l] = valid[l];
  }
  double dzprev = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    for (int l = 0; l < LANES; l++) live[l] &= ~sh[l] & -(long)(dzprev < lim[l]);
    /* whether any lane is still live: a horizontal reduction, so not every step */
    if ((i & 3) == 0) {
      long any = 0;
      for (int l = 0; l < LANES; l++) any |= live[l];
      if (!any) break;
    }
    const int64_t gr = r + dx[i], gc = c + dy[i];
    /* off the grid (nothing more to see), or off the window (a block whose
     * lanes are all done, still stepping until the next check: a live lane
     * never leaves the window, whose halo covers every step that can count) */
    if (gr < w->r0 || gr >= w->r1 || gc + LANES <= 0 || gc >= cols || gc < w->c0 - ACCEL__SVF_PAD ||
        gc + LANES > w->c1 + ACCEL__SVF_PAD)
      break;
    const int64_t k = (gr - w->r0) * w->pitch + (gc - w->c0) + ACCEL__SVF_PAD;
    const double d = dz[i];
    const double *G = w->dsm + k;
    if (veg) {
      const double *C = w->canopy + k, *T = w->trunk + k;
      for (int l = 0; l < LANES; l++) {
        const long hit = -(long)(G[l] - d > a[l]) & live[l];
        const long t1 = -(long)(C[l] - d > a[l]), t2 = -(long)(T[l] - d > a[l]);
        const long t3 = -(long)(C[l] - dzprev > a[l]), t4 = -(long)(T[l] - dzprev > a[l]);
        const long v = (t1 | t2 | t3 | t4) & ~(t1 & t2 & t3 & t4) & live[l] & ~hit;
        v2[l] |= v;
        vb[l] |= v;
        sh[l] |= hit;
      }
    } else {
      for (int l = 0; l < LANES; l++) sh[l] |= -(long)(G[l] - d > a[l]) & live[l];
    }
    dzprev = d;
  }
  for (int l = 0; l < LANES; l++) {
    (*osh)[l] = sh[l];
    (*ov2)[l] = v2[l];
    (*ovb)[l] = vb[l];
  }
}

typedef struct unit_ctx {
  const accel__svf_job *job;
  const accel__svf_window *w;
  const accel__svf_tile *t;
} unit_ctx;

static v8l valid_lanes(int64_t c, int64_t c1) {
  v8l v;
  for (int l = 0; l < LANES; l++) v[l] = c + l < c1 ? -1 : 0;
  return v;
}

INLINE void shadows_unit(const unit_ctx *u, int64_t r0, int64_t r1, int64_t c, bool veg) {
  const accel__svf_job *job = u->job;
  const accel__svf_plan *p = job->plan;
  const v8l valid = valid_lanes(c, u->t->c1);
  for (int64_t r = r0; r < r1; r++) {
    v8l sh, v2, vb;
    march8(u->w, job->cols, r, c, valid, p->dx, p->dy, p->dz, p->patch[0].steps, job->hmax, veg, &sh, &v2, &vb);
    for (int l = 0; l < LANES && c + l < u->t->c1; l++) {
      const unsigned h =
          (sh[l] ? ACCEL__SVF_HIT_SH : 0) | (v2[l] ? ACCEL__SVF_HIT_V2 : 0) | (vb[l] ? ACCEL__SVF_HIT_VB : 0);
      const int64_t o = r * job->cols + c + l;
      if (job->out[0]) job->out[0][o] = accel__svf_vis_sh(h);
      if (job->out[1]) job->out[1][o] = accel__svf_vis_veg(h);
      if (job->out[2]) job->out[2][o] = accel__svf_vis_vb(h);
    }
  }
}

/* acc += the ring weights of a patch where `vis`, ring by ring (UMEP's order). */
INLINE void add_rings(v8d *acc, int full, uint32_t sides, int side0, const double *wf, const double *wh, uint32_t rings,
                      v8l vis) {
  for (uint32_t j = 0; j < rings; j++) {
    acc[full] += masked(wf[j], vis);
    const v8d h = masked(wh[j], vis);
    if (sides & ACCEL__SVF_SIDE_E) acc[side0 + 0] += h;
    if (sides & ACCEL__SVF_SIDE_S) acc[side0 + 1] += h;
    if (sides & ACCEL__SVF_SIDE_W) acc[side0 + 2] += h;
    if (sides & ACCEL__SVF_SIDE_N) acc[side0 + 3] += h;
  }
}

INLINE void set_bits(uint8_t *mat, int64_t bytes, bool unpacked, int64_t o, int32_t patch, v8l vis, int lanes) {
  const uint8_t bit = unpacked ? 1 : (uint8_t)(1u << (patch & 7));
  const int64_t at = unpacked ? patch : patch >> 3;
  for (int l = 0; l < lanes; l++)
    if (vis[l]) mat[(o + l) * bytes + at] |= bit;
}

INLINE void sky_unit(const unit_ctx *u, int64_t r0, int64_t r1, int64_t c, bool veg) {
  const accel__svf_job *job = u->job;
  const accel__svf_plan *p = job->plan;
  const v8l valid = valid_lanes(c, u->t->c1);
  const int lanes = (int)(u->t->c1 - c < LANES ? u->t->c1 - c : LANES);
  v8d acc[UNIT_ROWS][ACCEL_SVF_GRIDS];
  memset(acc, 0, sizeof acc);
  for (int32_t pi = 0; pi < p->npatch; pi++) {
    const accel__svf_patch *pa = &p->patch[pi];
    const double *wf = p->wfull + pa->first_ring, *wh = p->whalf + pa->first_ring;
    for (int64_t r = r0; r < r1; r++) {
      v8l sh, v2, vb;
      march8(u->w, job->cols, r, c, valid, p->dx + pa->first_step, p->dy + pa->first_step, p->dz + pa->first_step,
             pa->steps, job->hmax, veg, &sh, &v2, &vb);
      v8d *a = acc[r - r0];
      const v8l vis_sh = ~sh;
      add_rings(a, ACCEL_SVF, pa->sides, ACCEL_SVF_E, wf, wh, pa->rings, vis_sh);
      const int64_t o = r * job->cols + c;
      if (job->mat[0]) set_bits(job->mat[0], job->mat_bytes, job->unpacked, o, pi, vis_sh, lanes);
      if (veg) {
        const v8l vis_veg = ~(v2 & ~sh), vis_vb = ~(vb & sh);
        add_rings(a, ACCEL_SVF_VEG, pa->sides, ACCEL_SVF_E_VEG, wf, wh, pa->rings, vis_veg);
        add_rings(a, ACCEL_SVF_AVEG, pa->sides, ACCEL_SVF_E_AVEG, wf, wh, pa->rings, vis_vb);
        if (job->mat[1]) set_bits(job->mat[1], job->mat_bytes, job->unpacked, o, pi, vis_veg, lanes);
        if (job->mat[2]) set_bits(job->mat[2], job->mat_bytes, job->unpacked, o, pi, vis_vb, lanes);
      }
    }
  }
  for (int64_t r = r0; r < r1; r++)
    for (int l = 0; l < lanes; l++) {
      double s[ACCEL_SVF_GRIDS];
      for (int g = 0; g < ACCEL_SVF_GRIDS; g++) s[g] = acc[r - r0][g][l];
      const int64_t at = (r - u->w->r0) * u->w->pitch + (c + l - u->w->c0) + ACCEL__SVF_PAD;
      accel__svf_finish(s, veg, veg ? u->w->trunk[at] : 0.0);
      const int64_t o = r * job->cols + c + l;
      for (int g = 0; g < ACCEL_SVF_GRIDS; g++)
        if (job->out[g]) job->out[g][o] = (float)s[g];
    }
}

CLONES static void run_unit(const unit_ctx *u, int64_t r0, int64_t r1, int64_t c) {
  const bool veg = u->job->veg;
  if (u->job->shadows) {
    if (veg) shadows_unit(u, r0, r1, c, true);
    else shadows_unit(u, r0, r1, c, false);
  } else {
    if (veg) sky_unit(u, r0, r1, c, true);
    else sky_unit(u, r0, r1, c, false);
  }
}

typedef struct tile_units {
  unit_ctx u;
  int64_t across;
} tile_units;

static bool tile_unit(void *user, int64_t i) {
  const tile_units *tu = user;
  const accel__svf_tile *t = tu->u.t;
  const int64_t r0 = t->r0 + (i / tu->across) * UNIT_ROWS, c = t->c0 + (i % tu->across) * LANES;
  run_unit(&tu->u, r0, r0 + UNIT_ROWS < t->r1 ? r0 + UNIT_ROWS : t->r1, c);
  return true;
}

/* One tile: its units in parallel; progress from the calling thread. */
static accel_status run_tile(accel__call *call, accel__svf_job *job, const accel__svf_tile *t,
                             const accel__svf_window *w, double base, double span) {
  tile_units tu = {{job, w, t}, (t->c1 - t->c0 + LANES - 1) / LANES};
  const int64_t down = (t->r1 - t->r0 + UNIT_ROWS - 1) / UNIT_ROWS;
  const accel__units_progress p = {job->progress, job->progress_user, job->stage, base, span, 0};
  return accel__parallel_units(call, tu.across * down, tile_unit, &tu, &p, "a tile");
}

static accel_status cpu_tiles(accel__call *call, accel__svf_job *job) {
  const int64_t tiles = accel__svf_tile_count(job, job->tile);
  double *buf = NULL;
  accel_status s = ACCEL_OK;
  for (int m = 0; m < ACCEL_SVF_MATRICES; m++)
    if (job->mat[m]) memset(job->mat[m], 0, (size_t)(job->rows * job->cols * job->mat_bytes));
  for (int64_t i = 0; i < tiles && !s; i++) {
    accel__svf_tile t;
    accel__svf_tile_at(job, job->tile, i, &t);
    accel__svf_window w = job->grid;
    if (tiles > 1) {
      /* a window of its own, so a tile reads nothing outside its halo */
      const size_t cells = (size_t)(t.wr1 - t.wr0) * (size_t)(t.wc1 - t.wc0 + 2 * ACCEL__SVF_PAD);
      free(buf);
      if (!(buf = malloc(sizeof(double) * cells * (job->veg ? 3 : 1)))) {
        accel__why(call->why, "out of memory for a tile's window");
        s = ACCEL_ERR_OUT_OF_MEMORY;
        break;
      }
      accel__svf_window_copy(job, &t, buf, buf + cells, buf + 2 * cells, &w);
    }
    s = run_tile(call, job, &t, &w, (double)i / (double)tiles, 1.0 / (double)tiles);
  }
  free(buf);
  return s;
}

/* A job with raw inputs (device arrays, here host copies of them) is
 * prepared first, as api.c prepares host inputs. */
static accel_status cpu_run(accel__call *call, accel__svf_job *job) {
  if (!job->raw[0] || job->grid.dsm) return cpu_tiles(call, job);
  double *buf = NULL;
  accel_status s = accel__svf_prepare_raw(call->ctx, job, &buf, call->why);
  if (!s) s = cpu_tiles(call, job);
  if (job->plan) accel__svf_release_raw(job, buf);
  return s;
}

const accel__svf_ops accel__cpu_svf_ops = {
    .shadows = cpu_run,
    .sky = cpu_run,
};
