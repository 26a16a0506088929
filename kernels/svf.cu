/*
 * kernels/svf.cu - shadows and sky view factors on the GPU.
 *
 * One thread per pixel on a 2D grid over the tile's rows and columns (grid
 * strides: no launch-size limit). A thread marches its pixel along every
 * patch's steps with accel__svf_march (lib/svf/svf.h, shared with the host
 * emulation), stopping on its own as soon as nothing can change, and sums
 * the ring weights in double, patch by patch and ring by ring, in UMEP's
 * order: the CPU's sums to the bit. Neighbouring threads read neighbouring
 * cells at every step (parallel rays), so loads coalesce.
 *
 * Tiles: the largest square tile whose window (tile plus halo, three double
 * grids) and outputs fit the device memory budget, with room for a second
 * window: the next tile's is made on the host and uploaded on a second
 * stream while this tile's kernel runs (slab_stager); each tile's outputs
 * are downloaded into the caller's grids.
 */
#include "cuda_util.h"

#include "svf/ops.h"

#include <stdlib.h>
#include <string.h>

namespace {

/* The plan's tables on the device. */
struct dplan {
  const accel__svf_patch *patch;
  const int32_t *dx, *dy;
  const double *dz, *wf, *wh;
  int32_t npatch;
};

struct px_base {
  accel__svf_window w; /* device window */
  int64_t rows, cols;  /* the grid */
  int64_t r0, c0, tc;  /* the tile's first pixel and width */
  double hmax;
  dplan p;
};

struct shadow_px {
  px_base b;
  float *out0, *out1, *out2; /* tile-sized, or null */
  __host__ __device__ void operator()(int64_t tr, int64_t tcol) const {
    const accel__svf_patch &pa = b.p.patch[0];
    const unsigned h =
        accel__svf_march(&b.w, b.rows, b.cols, b.r0 + tr, b.c0 + tcol, b.p.dx, b.p.dy, b.p.dz, pa.steps, b.hmax);
    const int64_t o = tr * b.tc + tcol;
    if (out0) out0[o] = accel__svf_vis_sh(h);
    if (out1) out1[o] = accel__svf_vis_veg(h);
    if (out2) out2[o] = accel__svf_vis_vb(h);
  }
};

__host__ __device__ inline void add_rings(double *acc, int full, int side0, uint32_t sides, const double *wf,
                                          const double *wh, uint32_t rings) {
  for (uint32_t j = 0; j < rings; j++) {
    acc[full] += wf[j];
    if (sides & ACCEL__SVF_SIDE_E) acc[side0 + 0] += wh[j];
    if (sides & ACCEL__SVF_SIDE_S) acc[side0 + 1] += wh[j];
    if (sides & ACCEL__SVF_SIDE_W) acc[side0 + 2] += wh[j];
    if (sides & ACCEL__SVF_SIDE_N) acc[side0 + 3] += wh[j];
  }
}

struct sky_px {
  px_base b;
  float *out[ACCEL_SVF_GRIDS];      /* tile-sized, or null */
  uint8_t *mat[ACCEL_SVF_MATRICES]; /* tile-sized x mb, or null */
  int64_t mb;
  bool unpacked; /* a byte a patch (mb = P), else a bit */
  __host__ __device__ void operator()(int64_t tr, int64_t tcol) const {
    const int64_t r = b.r0 + tr, c = b.c0 + tcol, o = tr * b.tc + tcol;
    const bool veg = b.w.canopy != nullptr;
    double acc[ACCEL_SVF_GRIDS];
    for (int g = 0; g < ACCEL_SVF_GRIDS; g++) acc[g] = 0.0;
    unsigned byte[ACCEL_SVF_MATRICES] = {0, 0, 0};
    for (int32_t i = 0; i < b.p.npatch; i++) {
      const accel__svf_patch &pa = b.p.patch[i];
      const unsigned h = accel__svf_march(&b.w, b.rows, b.cols, r, c, b.p.dx + pa.first_step, b.p.dy + pa.first_step,
                                          b.p.dz + pa.first_step, pa.steps, b.hmax);
      const double *wf = b.p.wf + pa.first_ring, *wh = b.p.wh + pa.first_ring;
      const bool vis[3] = {accel__svf_vis_sh(h), veg && accel__svf_vis_veg(h), veg && accel__svf_vis_vb(h)};
      if (vis[0]) add_rings(acc, ACCEL_SVF, ACCEL_SVF_E, pa.sides, wf, wh, pa.rings);
      if (vis[1]) add_rings(acc, ACCEL_SVF_VEG, ACCEL_SVF_E_VEG, pa.sides, wf, wh, pa.rings);
      if (vis[2]) add_rings(acc, ACCEL_SVF_AVEG, ACCEL_SVF_E_AVEG, pa.sides, wf, wh, pa.rings);
      for (int m = 0; m < ACCEL_SVF_MATRICES; m++) {
        if (unpacked) {
          if (mat[m]) mat[m][o * mb + i] = (uint8_t)vis[m];
          continue;
        }
        byte[m] |= (unsigned)vis[m] << (i & 7);
        if ((i & 7) == 7 || i + 1 == b.p.npatch) {
          if (mat[m]) mat[m][o * mb + (i >> 3)] = (uint8_t)byte[m];
          byte[m] = 0;
        }
      }
    }
    const int64_t at = (r - b.w.r0) * b.w.pitch + (c - b.w.c0) + ACCEL__SVF_PAD;
    accel__svf_finish(acc, veg, veg ? b.w.trunk[at] : 0.0);
    for (int g = 0; g < ACCEL_SVF_GRIDS; g++)
      if (out[g]) out[g][o] = (float)acc[g];
  }
};

/* Device bytes a tile of side t needs: its window (two with overlap: the
 * next tile's is uploaded while this one's kernel runs) and its outputs. */
uint64_t tile_bytes(const accel__svf_job *job, int64_t t, int nout, int nmat, bool overlap) {
  const int64_t tr = t < job->rows ? t : job->rows, tc = t < job->cols ? t : job->cols;
  const int64_t wr = tr + 2 * job->plan->halo_rows < job->rows ? tr + 2 * job->plan->halo_rows : job->rows;
  const int64_t wc = tc + 2 * job->plan->halo_cols < job->cols ? tc + 2 * job->plan->halo_cols : job->cols;
  const uint64_t window = (uint64_t)wr * (uint64_t)(wc + 2 * ACCEL__SVF_PAD) * 8u * (job->veg ? 3u : 1u);
  return (overlap ? 2 : 1) * window +
         (uint64_t)tr * (uint64_t)tc * (4u * (uint64_t)nout + (uint64_t)nmat * (uint64_t)job->mat_bytes);
}

/* The plan's tables uploaded, and their device view. */
struct plan_bufs {
  dbuf patch, dx, dy, dz, wf, wh;
};

accel_status upload_plan(accel__executor *x, const accel__svf_plan *pl, plan_bufs &b, dplan *dp, char *why) {
  accel_status s = b.patch.put(x, pl->patch, (size_t)pl->npatch, why, "upload the patches");
  if (!s) s = b.dx.put(x, pl->dx, pl->nsteps, why, "upload the steps");
  if (!s) s = b.dy.put(x, pl->dy, pl->nsteps, why, "upload the steps");
  if (!s) s = b.dz.put(x, pl->dz, pl->nsteps, why, "upload the steps");
  if (!s) s = b.wf.put(x, pl->wfull, pl->nrings, why, "upload the weights");
  if (!s) s = b.wh.put(x, pl->whalf, pl->nrings, why, "upload the weights");
  *dp = dplan{b.patch.as<accel__svf_patch>(),
              b.dx.as<int32_t>(),
              b.dy.as<int32_t>(),
              b.dz.as<double>(),
              b.wf.as<double>(),
              b.wh.as<double>(),
              pl->npatch};
  return s;
}

/* The tile side: the whole grid when it fits; else what was asked for (or
 * the whole grid), halved until it fits what the budget leaves, with room
 * for two windows (*overlap) when `two_windows` allows it and a tile of at least 32
 * pixels fits so. */
accel_status tile_side(accel__executor *x, const accel__svf_job *job, int nout, int nmat, bool two_windows,
                       int64_t *side, bool *overlap, char *why) {
  const int64_t whole = job->rows > job->cols ? job->rows : job->cols;
  const int64_t asked = job->tile > 0 && job->tile < whole ? job->tile : whole;
  const uint64_t room = x->room();
  *overlap = false;
  *side = asked;
  if (asked == whole && tile_bytes(job, whole, nout, nmat, false) <= room) return ACCEL_OK; /* one tile */
  for (int two = two_windows ? 1 : 0; two >= 0; two--) {
    *side = asked;
    while (*side > 32 && tile_bytes(job, *side, nout, nmat, two) > room) *side = (*side + 1) / 2;
    if (tile_bytes(job, *side, nout, nmat, two) <= room) {
      *overlap = two;
      return ACCEL_OK;
    }
  }
  accel__why(why, "a %lld-pixel tile with its %lld x %lld halo needs %.1f MiB, over the %.1f MiB left of the budget",
             (long long)*side, (long long)job->plan->halo_rows, (long long)job->plan->halo_cols,
             tile_bytes(job, *side, nout, nmat, false) / 1048576.0, room / 1048576.0);
  return ACCEL_ERR_DEVICE_MEMORY;
}

/* Bytes of a tile's window (ngrid grids of doubles). */
size_t window_bytes(const accel__svf_job *job, const accel__svf_tile &t) {
  const int64_t wr = t.wr1 - t.wr0, pitch = t.wc1 - t.wc0 + 2 * ACCEL__SVF_PAD;
  return sizeof(double) * (size_t)wr * (size_t)pitch * (job->veg ? 3u : 1u);
}

/* Tile k's window made on the host into the stager's pinned buffer and
 * uploaded on its stream; *hw: the window's layout (host pointers). */
accel_status put_window(slab_stager &sg, const accel__svf_job *job, const accel__svf_tile &t, int64_t k,
                        accel__svf_window *hw, char *why) {
  const size_t bytes = window_bytes(job, t), cells = bytes / sizeof(double) / (job->veg ? 3u : 1u);
  return sg.put(
      k, bytes, nullptr,
      [&](uint8_t *p) {
        double *h = (double *)(void *)p;
        accel__svf_window_copy(job, &t, h, h + cells, h + 2 * cells, hw);
      },
      why);
}

/* Output i of the job (grid i, or matrix i - ACCEL_SVF_GRIDS) is device memory. */
bool out_on_device(const accel__svf_job *job, int i) { return (job->out_device >> i) & 1u; }

/* A tile's outputs on the device. */
struct tile_out {
  dbuf dout[ACCEL_SVF_GRIDS], dmat[ACCEL_SVF_MATRICES];
  float *po[ACCEL_SVF_GRIDS] = {nullptr};
  uint8_t *pm[ACCEL_SVF_MATRICES] = {nullptr};
};

/* One tile's kernel over its pixels, reading the device window dwin (layout
 * hw), into o (queued on the stream). */
accel_status launch_tile(accel__executor *x, const accel__svf_job *job, const dplan &dp, const accel__svf_tile &t,
                         const uint8_t *dwin, const accel__svf_window &hw, tile_out &o, char *why) {
  const size_t cells = window_bytes(job, t) / sizeof(double) / (job->veg ? 3u : 1u);
  accel__svf_window dw = hw;
  dw.dsm = (const double *)(const void *)dwin;
  dw.canopy = job->veg ? dw.dsm + cells : nullptr;
  dw.trunk = job->veg ? dw.dsm + 2 * cells : nullptr;
  const int64_t tr = t.r1 - t.r0, tc = t.c1 - t.c0;
  const px_base base = {dw, job->rows, job->cols, t.r0, t.c0, tc, job->hmax, dp};
  accel_status s = ACCEL_OK;
  for (int g = 0; g < ACCEL_SVF_GRIDS && !s; g++)
    if (job->out[g]) {
      s = o.dout[g].get(x, sizeof(float) * (size_t)(tr * tc), why);
      o.po[g] = o.dout[g].as<float>();
    }
  for (int m = 0; m < ACCEL_SVF_MATRICES && !s; m++)
    if (job->mat[m]) {
      s = o.dmat[m].get(x, (size_t)(tr * tc * job->mat_bytes), why);
      o.pm[m] = o.dmat[m].p;
    }
  if (s) return s;
  if (job->shadows) return each2d(x, tr, tc, shadow_px{base, o.po[0], o.po[1], o.po[2]}, why, "the shadow kernel");
  sky_px f;
  f.b = base;
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) f.out[g] = o.po[g];
  for (int m = 0; m < ACCEL_SVF_MATRICES; m++) f.mat[m] = o.pm[m];
  f.mb = job->mat_bytes;
  f.unpacked = job->unpacked != 0;
  return each2d(x, tr, tc, f, why, "the sky view factor kernel");
}

/* A tile's outputs into the caller's grids (downloaded, or copied on the
 * device into device outputs), waited for. */
accel_status store_tile(accel__executor *x, const accel__svf_job *job, const accel__svf_tile &t, const tile_out &o,
                        char *why) {
  const int64_t tr = t.r1 - t.r0, tc = t.c1 - t.c0;
  accel_status s = ACCEL_OK;
  for (int g = 0; g < ACCEL_SVF_GRIDS && !s; g++)
    if (o.po[g]) {
      const bool d = out_on_device(job, g);
      s = accel__cuda_check(x->copy2d(job->out[g] + t.r0 * job->cols + t.c0, sizeof(float) * (size_t)job->cols, o.po[g],
                                      sizeof(float) * (size_t)tc, sizeof(float) * (size_t)tc, (size_t)tr,
                                      d ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost),
                            why, d ? "store a tile on the device" : "download a tile");
    }
  for (int m = 0; m < ACCEL_SVF_MATRICES && !s; m++)
    if (o.pm[m]) {
      const size_t rowb = (size_t)(tc * job->mat_bytes);
      const bool d = out_on_device(job, ACCEL_SVF_GRIDS + m);
      s = accel__cuda_check(
          x->copy2d(job->mat[m] + (t.r0 * job->cols + t.c0) * job->mat_bytes, (size_t)(job->cols * job->mat_bytes),
                    o.pm[m], rowb, rowb, (size_t)tr, d ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost),
          why, d ? "store a tile on the device" : "download a tile");
    }
  if (!s) s = accel__cuda_check(x->sync(), why, "finish a tile");
  return s;
}

/* Progress after tile i of n; a nonzero answer cancels. */
accel_status tile_done(const accel__svf_job *job, int64_t i, int64_t n, char *why) {
  if (job->progress && job->progress(job->progress_user, job->stage, (double)(i + 1) / (double)n)) {
    accel__why(why, "cancelled by the progress callback");
    return ACCEL_ERR_CANCELLED;
  }
  return ACCEL_OK;
}

/* The largest window of the job's tiles of side tside. */
size_t largest_window(const accel__svf_job *job, int64_t tside, int64_t tiles) {
  size_t largest = 0;
  for (int64_t i = 0; i < tiles; i++) {
    accel__svf_tile t;
    accel__svf_tile_at(job, tside, i, &t);
    const size_t b = window_bytes(job, t);
    largest = b > largest ? b : largest;
  }
  return largest;
}

/* Host inputs: each tile's window made on the host and uploaded through the
 * stager, the next one's while this one's kernel runs. */
accel_status run_host(accel__executor *x, const accel__svf_job *job, const dplan &dp, int64_t tside, bool overlap,
                      char *why) {
  const int64_t tiles = accel__svf_tile_count(job, tside);
  slab_stager sg;
  accel__svf_tile t[2];
  accel__svf_window hw[2];
  accel_status s = sg.init(x, largest_window(job, tside, tiles), overlap && tiles > 1, why);
  if (!s && tiles) {
    accel__svf_tile_at(job, tside, 0, &t[0]);
    s = put_window(sg, job, t[0], 0, &hw[0], why);
  }
  for (int64_t i = 0; i < tiles && !s; i++) {
    const int b = (int)(i & 1);
    uint8_t *win = nullptr;
    tile_out o;
    if (i + 1 < tiles) accel__svf_tile_at(job, tside, i + 1, &t[1 - b]);
    s = sg.ready(i, &win, why);
    if (!s) s = launch_tile(x, job, dp, t[b], win, hw[b], o, why);
    if (!s) s = sg.done(i, why);
    if (!s && i + 1 < tiles) s = put_window(sg, job, t[1 - b], i + 1, &hw[1 - b], why); /* while the kernel runs */
    if (!s) s = store_tile(x, job, t[b], o, why);
    if (!s) s = tile_done(job, i, tiles, why);
  }
  return s;
}

/* ---------------------------------------------------------------- device inputs */

/* One thread's share (cells i, i + threads, ...) of a pass over raw device
 * inputs, merged on the host: their statistics (the first pass), or the
 * highest canopy or trunk top after the raise `up` (the second). */
struct stats_part {
  accel__svf_stats stats;
  double top;
};

struct stats_f {
  const float *raw[3];
  int64_t n, threads;
  bool has_trunk, second;
  double up, ratio; /* the second pass */
  stats_part *part;
  __host__ __device__ void operator()(uint64_t i) const {
    stats_part p;
    accel__svf_stats_init(&p.stats);
    p.top = -INFINITY;
    for (int64_t k = (int64_t)i; k < n; k += threads) {
      if (!second) {
        for (int g = 0; g < 3; g++)
          if (raw[g]) accel__svf_stats_add(&p.stats, g, raw[g][k], k);
        continue;
      }
      double d, ca, tr;
      accel__svf_cell(raw[0][k], raw[1][k], has_trunk ? raw[2][k] : 0.0f, true, has_trunk, up, ratio, &d, &ca, &tr);
      p.top = ca > p.top ? ca : p.top;
      p.top = tr > p.top ? tr : p.top;
    }
    part[i] = p;
  }
};

/* One pass of stats_f over the inputs, merged into *sum (first pass) or *top. */
accel_status stats_pass(accel__executor *x, const accel__svf_job *job, bool second, double up, accel__svf_stats *sum,
                        double *top, char *why) {
  const int64_t n = job->rows * job->cols, threads = n < 16384 ? n : 16384;
  dbuf d;
  stats_part *h = (stats_part *)malloc(sizeof(stats_part) * (size_t)threads);
  if (!h) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_status s = d.get(x, sizeof(stats_part) * (size_t)threads, why);
  const stats_f f = {{job->raw[0], job->raw[1], job->raw[2]},
                     n,
                     threads,
                     job->raw[2] != nullptr,
                     second,
                     up,
                     job->setup.trunk_ratio,
                     d.as<stats_part>()};
  if (!s) s = each(x, (uint64_t)threads, f, why, second ? "the highest tops" : "the inputs' statistics");
  if (!s) s = download(x, h, d.p, sizeof(stats_part) * (size_t)threads, why, "download the statistics");
  for (int64_t i = 0; i < threads && !s; i++) {
    const stats_part &p = h[i];
    if (second) {
      *top = p.top > *top ? p.top : *top;
      continue;
    }
    sum->lo = p.stats.lo < sum->lo ? p.stats.lo : sum->lo;
    sum->hi = p.stats.hi > sum->hi ? p.stats.hi : sum->hi;
    sum->chi = p.stats.chi > sum->chi ? p.stats.chi : sum->chi;
    for (int g = 0; g < 3; g++) {
      sum->nodata[g] += p.stats.nodata[g];
      if (p.stats.inf[g] >= 0 && (sum->inf[g] < 0 || p.stats.inf[g] < sum->inf[g])) sum->inf[g] = p.stats.inf[g];
    }
  }
  free(h);
  return s;
}

/* A tile's window made on the device from the raw inputs (the cells api.c
 * makes on the host), zero padded. */
struct window_f {
  const float *raw[3];
  int64_t cols, wr0, wc0, wc, pitch;
  size_t cells;
  bool veg, has_trunk;
  double up, ratio;
  double *out;
  __host__ __device__ void operator()(int64_t r, int64_t c) const {
    const int64_t o = r * pitch + c;
    double d = 0.0, ca = 0.0, tr = 0.0;
    if (c >= ACCEL__SVF_PAD && c < ACCEL__SVF_PAD + wc) {
      const int64_t k = (wr0 + r) * cols + wc0 + c - ACCEL__SVF_PAD;
      accel__svf_cell(raw[0][k], veg ? raw[1][k] : 0.0f, has_trunk ? raw[2][k] : 0.0f, veg, has_trunk, up, ratio, &d,
                      &ca, &tr);
    }
    out[o] = d;
    if (!veg) return;
    out[cells + o] = ca;
    out[2 * cells + o] = tr;
  }
};

/* Device inputs: the statistics and the plan, then every tile's window made
 * on the device from them (nothing of them crosses the bus). */
accel_status run_raw(accel__executor *x, accel__call *call, accel__svf_job *job, int nout, int nmat) {
  char *why = call->why;
  accel__svf_stats stats;
  accel__svf_stats_init(&stats);
  double up = 0, hi = 0, lo = 0, top = 0;
  accel_status s = stats_pass(x, job, false, 0, &stats, nullptr, why);
  if (!s) s = accel__svf_settle(call->ctx, job->stage, &stats, job->cols, &up, &hi, &lo, why);
  top = hi;
  if (!s && job->veg) s = stats_pass(x, job, true, up, nullptr, &top, why);
  if (!s) s = accel__svf_plan_raw(job, &stats, hi, lo, top, why);
  if (s) return s;
  plan_bufs pb;
  dplan dp;
  int64_t side = 0;
  bool overlap = false;
  s = upload_plan(x, job->plan, pb, &dp, why);
  if (!s) s = tile_side(x, job, nout, nmat, false, &side, &overlap, why); /* one window, made on the device */
  const int64_t whole = job->rows > job->cols ? job->rows : job->cols, tside = side >= whole ? 0 : side;
  const int64_t tiles = s ? 0 : accel__svf_tile_count(job, tside);
  dbuf win;
  if (!s) s = win.get(x, largest_window(job, tside, tiles), why);
  for (int64_t i = 0; i < tiles && !s; i++) {
    accel__svf_tile t;
    accel__svf_tile_at(job, tside, i, &t);
    const int64_t wc = t.wc1 - t.wc0, pitch = wc + 2 * ACCEL__SVF_PAD;
    const size_t cells = (size_t)((t.wr1 - t.wr0) * pitch);
    const window_f wf = {{job->raw[0], job->raw[1], job->raw[2]},
                         job->cols,
                         t.wr0,
                         t.wc0,
                         wc,
                         pitch,
                         cells,
                         job->veg,
                         job->raw[2] != nullptr,
                         up,
                         job->setup.trunk_ratio,
                         win.as<double>()};
    const accel__svf_window hw = {nullptr, nullptr, nullptr, pitch, t.wr0, t.wr1, t.wc0, t.wc1};
    tile_out o;
    s = each2d(x, t.wr1 - t.wr0, pitch, wf, why, "a tile's window");
    if (!s) s = launch_tile(x, job, dp, t, win.p, hw, o, why);
    if (!s) s = store_tile(x, job, t, o, why);
    if (!s) s = tile_done(job, i, tiles, why);
  }
  return s;
}

accel_status run(accel__executor *x, accel__call *call, accel__svf_job *job) {
  char *why = call->why;
  int nout = 0, nmat = 0;
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) nout += job->out[g] != nullptr;
  for (int m = 0; m < ACCEL_SVF_MATRICES; m++) nmat += job->mat[m] != nullptr;
  if (job->out_device || (job->raw[0] && !job->grid.dsm)) { /* the caller's work on device arrays comes first */
    const accel_status s = accel__cuda_check(x->device_sync(), why, "cudaDeviceSynchronize");
    if (s) return s;
  }
  if (job->raw[0] && !job->grid.dsm) {
    const accel_status s = run_raw(x, call, job, nout, nmat);
    if (job->plan) accel__svf_release_raw(job, nullptr);
    return s;
  }
  plan_bufs pb;
  dplan dp;
  int64_t side = 0;
  bool overlap = false;
  accel_status s = upload_plan(x, job->plan, pb, &dp, why);
  if (!s) s = tile_side(x, job, nout, nmat, true, &side, &overlap, why);
  if (s) return s;
  const int64_t whole = job->rows > job->cols ? job->rows : job->cols;
  return run_host(x, job, dp, side >= whole ? 0 : side, overlap, why);
}

accel_status on_device(accel__call *call, accel__svf_job *job) {
  return with_device(call, [&](accel__executor *x) { return run(x, call, job); });
}

} // namespace

extern "C" const accel__svf_ops accel__cuda_svf_ops = {
    /* .shadows = */ on_device,
    /* .sky = */ on_device,
};
