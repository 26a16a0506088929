/*
 * lib/svf/svf.h - shadows and sky view factors (internal; C and CUDA C++).
 *
 * A job holds the prepared inputs (double grids as UMEP computes in float64,
 * padded with PAD zero columns on each side), the plan (every patch's ray
 * steps and ring weights) and the outputs. Backends run it tile by tile:
 * each tile is an interior rectangle plus a halo wide enough that no ray that
 * can still change a result leaves it (accel__svf_plan.halo_*), copied into
 * a window of its own, so a tile sees nothing outside its window.
 *
 * The per-pixel march (accel__svf_march) is what the GPU runs per thread and
 * what its host emulation runs in loops; the CPU runs the same rules eight
 * pixels of a row at a time with vector instructions (lib/svf/cpu.c).
 */
#ifndef ACCEL_SVF_INTERNAL_H
#define ACCEL_SVF_INTERNAL_H

#include "core/internal.h"
#include "accel/svf.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define ACCEL__SVF_HD __host__ __device__ inline
#else
#define ACCEL__SVF_HD static inline
#endif

enum {
  ACCEL__SVF_PAD = 8,       /* zero columns on each side of every window row */
  ACCEL__SVF_MAX_RINGS = 16 /* rings (1-degree annuli) per band, at most */
};

/* UMEP's legacy zenith constant, added to the S and W half skies. */
#define ACCEL__SVF_LAST_ANNULUS 3.0459e-004

/* Side bits of a patch: which half skies it belongs to. */
enum { ACCEL__SVF_SIDE_E = 1, ACCEL__SVF_SIDE_S = 2, ACCEL__SVF_SIDE_W = 4, ACCEL__SVF_SIDE_N = 8 };

typedef struct accel__svf_patch {
  double azimuth, altitude; /* degrees */
  uint32_t first_step, steps;
  uint32_t first_ring, rings;
  uint32_t sides; /* ACCEL__SVF_SIDE_* */
} accel__svf_patch;

typedef struct accel__svf_plan {
  int32_t npatch;
  accel__svf_patch *patch;
  uint32_t nsteps, nrings; /* totals */
  int32_t *dx, *dy;        /* row and column offset of each step */
  double *dz;              /* height drop of each step */
  double *wfull, *whalf;   /* ring weights with n and ceil(n / 2) patches per band */
  int64_t halo_rows, halo_cols;
} accel__svf_plan;

/* Where the inputs of one tile live: rows [r0, r1) and columns [c0, c1) of
 * the grid, row-major with `pitch` doubles per row, column c at
 * (c - c0 + PAD). canopy and trunk are NULL without vegetation. */
typedef struct accel__svf_window {
  const double *dsm, *canopy, *trunk;
  int64_t pitch;
  int64_t r0, r1, c0, c1;
} accel__svf_window;

typedef struct accel__svf_tile {
  int64_t r0, r1, c0, c1;     /* the pixels it computes */
  int64_t wr0, wr1, wc0, wc1; /* what it reads */
} accel__svf_tile;

/* What preparing raw inputs needs besides them (UMEP's rules, api.c). */
typedef struct accel__svf_setup {
  double pixel_size, max_height, trunk_ratio;
  int32_t patches;          /* sky */
  double azimuth, altitude; /* shadows */
} accel__svf_setup;

/* What the preparation derives from the raw inputs: the DSM's lowest and
 * highest value and the CDSM's highest (from 0), no-data (NaN) read as 0;
 * per input, its no-data count and its first infinite cell (row-major), or
 * -1. */
typedef struct accel__svf_stats {
  double lo, hi, chi;
  uint64_t nodata[3];
  int64_t inf[3];
} accel__svf_stats;

typedef struct accel__svf_job {
  const char *stage;
  bool shadows; /* one sun position (sh, vegsh, vbshvegsh) or the sky */
  bool veg;
  int64_t rows, cols;
  double hmax;            /* highest DSM, canopy or trunk top: rays stop below it */
  accel__svf_window grid; /* the whole prepared grid (a window of itself) */
  const accel__svf_plan *plan;
  /* shadows: out[0..2] = sh, vegsh, vbshvegsh; sky: out[g] = grid g. rows x
   * cols, contiguous; NULL when not wanted. */
  float *out[ACCEL_SVF_GRIDS];
  uint8_t *mat[ACCEL_SVF_MATRICES]; /* rows x cols x mat_bytes; NULL when not wanted */
  int64_t mat_bytes;                /* bytes a cell: ceil(P / 8) bit-packed, P unpacked */
  int32_t unpacked;                 /* 1: a byte a patch (0 or 1), else a bit a patch */
  int64_t tile;                     /* tile side asked for; 0: backend's choice */
  accel_progress_fn progress;
  void *progress_user;
  /* Device inputs (accel_array_on_device): the raw F32 grids (rows x cols,
   * contiguous; raw[1], raw[2] NULL when not given), which the op prepares
   * itself: grid.dsm and plan are NULL and hmax 0 until then (a GPU op
   * reads them in place, a CPU run gets host copies). */
  const float *raw[3];
  accel__svf_setup setup;
  /* Bit g (grid g; ACCEL_SVF_GRIDS + m: matrix m) set: that output is
   * device memory (a CPU run gets a host copy). */
  uint32_t out_device;
} accel__svf_job;

/* What one march found for one pixel. */
enum { ACCEL__SVF_HIT_SH = 1, ACCEL__SVF_HIT_V2 = 2, ACCEL__SVF_HIT_VB = 4 };

/* UMEP's initial vegetation shadow of a pixel: bush = canopy where
 * trunk * canopy == 0, and it shades when above 1. */
ACCEL__SVF_HD bool accel__svf_bush(double canopy, double trunk) { return trunk * canopy == 0.0 && canopy > 1.0; }

/* March one pixel (row r, column c of the grid) along the steps of one
 * patch. Building shadow: some step's DSM minus its drop is above the
 * pixel. Vegetation (UMEP's shadowingfunction_20): a step shades when 1 to 3
 * of its canopy/trunk tests against this and the previous drop hold (4 is
 * the "pergola": under the canopy). Stops as soon as nothing can change:
 * the pixel is in building shadow, the drop so far clears the highest top,
 * or the ray leaves the grid (UMEP's zero fill changes nothing on a DSM
 * >= 0). Returns ACCEL__SVF_HIT_* bits: SH; V2 = some step (or the bush)
 * shades; VB = that happened before the building shadow began. */
ACCEL__SVF_HD unsigned accel__svf_march(const accel__svf_window *w, int64_t rows, int64_t cols, int64_t r, int64_t c,
                                        const int32_t *dx, const int32_t *dy, const double *dz, uint32_t n,
                                        double hmax) {
  const int64_t at = (r - w->r0) * w->pitch + (c - w->c0) + ACCEL__SVF_PAD;
  const double a = w->dsm[at];
  const double lim = hmax - a;
  unsigned hit = 0;
  if (w->canopy && accel__svf_bush(w->canopy[at], w->trunk[at])) hit = ACCEL__SVF_HIT_V2 | ACCEL__SVF_HIT_VB;
  double dzprev = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    if (!(dzprev < lim)) break;
    const int64_t gr = r + dx[i], gc = c + dy[i];
    if (gr < 0 || gr >= rows || gc < 0 || gc >= cols) break;
    const int64_t k = (gr - w->r0) * w->pitch + (gc - w->c0) + ACCEL__SVF_PAD;
    const double d = dz[i];
    if (w->dsm[k] - d > a) return hit | ACCEL__SVF_HIT_SH;
    if (w->canopy) {
      const double cp = w->canopy[k], tr = w->trunk[k];
      const int m = (cp - d > a) + (tr - d > a) + (cp - dzprev > a) + (tr - dzprev > a);
      if (m >= 1 && m <= 3) hit |= ACCEL__SVF_HIT_V2 | ACCEL__SVF_HIT_VB;
    }
    dzprev = d;
  }
  return hit;
}

/* Visibility (1 = visible) of the three shadow kinds from march bits. */
ACCEL__SVF_HD bool accel__svf_vis_sh(unsigned h) { return !(h & ACCEL__SVF_HIT_SH); }
ACCEL__SVF_HD bool accel__svf_vis_veg(unsigned h) { return !((h & ACCEL__SVF_HIT_V2) && !(h & ACCEL__SVF_HIT_SH)); }
ACCEL__SVF_HD bool accel__svf_vis_vb(unsigned h) { return !((h & ACCEL__SVF_HIT_VB) && (h & ACCEL__SVF_HIT_SH)); }

/* UMEP's final corrections of one pixel's double sums (acc[15]) into the
 * float grids: the legacy constant on the S and W half skies (vegetation:
 * where no trunk), then everything clamped at 1. */
ACCEL__SVF_HD void accel__svf_finish(double *acc, bool veg, double trunk) {
  acc[ACCEL_SVF_S] += ACCEL__SVF_LAST_ANNULUS;
  acc[ACCEL_SVF_W] += ACCEL__SVF_LAST_ANNULUS;
  for (int g = 0; g < 5; g++)
    if (acc[g] > 1.0) acc[g] = 1.0;
  if (!veg) return;
  const double last = trunk == 0.0 ? ACCEL__SVF_LAST_ANNULUS : 0.0;
  acc[ACCEL_SVF_S_VEG] += last;
  acc[ACCEL_SVF_W_VEG] += last;
  acc[ACCEL_SVF_S_AVEG] += last;
  acc[ACCEL_SVF_W_AVEG] += last;
  for (int g = 5; g < ACCEL_SVF_GRIDS; g++)
    if (acc[g] > 1.0) acc[g] = 1.0;
}

/* One prepared cell from the raw values (x, the DSM; cv, the CDSM; tv,
 * the TDSM when has_trunk), as api.c prepares host inputs: no data (NaN)
 * as 0, the DSM raised by `up` when it goes below 0, absolute canopy and
 * trunk tops, 0 where they add nothing. */
ACCEL__SVF_HD void accel__svf_cell(float x, float cv, float tv, bool veg, bool has_trunk, double up, double ratio,
                                   double *d, double *canopy, double *trunk) {
  double D = x != x ? 0.0 : (double)x;
  if (up > 0) D += up;
  *d = D;
  if (!veg) return;
  const double c = cv != cv ? 0.0 : (double)cv;
  const double t = has_trunk ? (tv != tv ? 0.0 : (double)tv) : c * ratio;
  double ca = c + D, tr = t + D;
  if (ca == D) ca = 0;
  if (tr == D) tr = 0;
  *canopy = ca;
  *trunk = tr;
}

ACCEL__SVF_HD void accel__svf_stats_init(accel__svf_stats *st) {
  st->lo = INFINITY, st->hi = -INFINITY, st->chi = 0.0;
  for (int g = 0; g < 3; g++) st->nodata[g] = 0, st->inf[g] = -1;
}

/* Cell k (row-major) of input g holds x: into st. Cells come in rising k
 * for each input (a first infinite cell stays the first). */
ACCEL__SVF_HD void accel__svf_stats_add(accel__svf_stats *st, int g, float x, int64_t k) {
  const bool nan = x != x, inf = !nan && x - x != x - x;
  if (inf && st->inf[g] < 0) st->inf[g] = k;
  st->nodata[g] += nan;
  const double v = nan ? 0.0 : (double)x;
  if (g == 0) {
    st->lo = v < st->lo ? v : st->lo;
    st->hi = v > st->hi ? v : st->hi;
  } else if (g == 1) {
    st->chi = v > st->chi ? v : st->chi;
  }
}

/* ---- preparing raw inputs (lib/svf/prepare.c) */

/* The statistics of host raw inputs. */
void accel__svf_stats_of(const float *const raw[3], int64_t rows, int64_t cols, accel__svf_stats *st);
/* After the statistics: an infinite input is ACCEL_ERR_INVALID_ARG (why
 * says where); else the INFO lines api.c logs, the DSM's raise (*up), and
 * the highest DSM after it (*hi) and lowest (*lo). */
accel_status accel__svf_settle(accel_ctx *ctx, const char *stage, const accel__svf_stats *st, int64_t cols, double *up,
                               double *hi, double *lo, char *why);
/* The plan of a job whose raw inputs gave st: amax from UMEP's rule,
 * hmax = top (the highest DSM, canopy or trunk top after the raise), the
 * halo; job->plan and job->hmax set. ACCEL_ERR_OUT_OF_MEMORY. */
accel_status accel__svf_plan_raw(accel__svf_job *job, const accel__svf_stats *st, double hi, double lo, double top,
                                 char *why);
/* A job's raw host inputs (job->raw) prepared: the grids into *buf
 * (job->grid) and the plan (job->plan, job->hmax), as UMEP prepares them;
 * on failure why says why and nothing stays allocated. Release with
 * accel__svf_release_raw. */
accel_status accel__svf_prepare_raw(accel_ctx *ctx, accel__svf_job *job, double **buf, char *why);
void accel__svf_release_raw(accel__svf_job *job, double *buf);

/* ---- host helpers (lib/svf/plan.c) */

/* How many patches option (145, 153, 306, 612) has; 0 for another option. */
int32_t accel__svf_patch_count(int32_t option);
/* UMEP's sky patches of an option (145, 153, 306, 612), and each patch's
 * steps on a rows x cols grid with stop height amax. NULL on out-of-memory. */
accel__svf_plan *accel__svf_plan_sky(int32_t option, int64_t rows, int64_t cols, double amax, double pixel_size);
/* One sun position. */
accel__svf_plan *accel__svf_plan_sun(double azimuth, double altitude, int64_t rows, int64_t cols, double amax,
                                     double pixel_size);
/* Halo of the plan for pixels no lower than amin under tops of hmax. */
void accel__svf_plan_halo(accel__svf_plan *plan, double hmax, double amin);
void accel__svf_plan_free(accel__svf_plan *plan);

/* Tiles of side `side` (0: one tile): their count, and tile i. */
int64_t accel__svf_tile_count(const accel__svf_job *job, int64_t side);
void accel__svf_tile_at(const accel__svf_job *job, int64_t side, int64_t i, accel__svf_tile *t);
/* Copy a tile's window of the job's grid into dst (3 arrays of
 * (wr1-wr0) x pitch doubles, canopy/trunk only with vegetation), zero
 * padded; fills `w` to describe it. */
void accel__svf_window_copy(const accel__svf_job *job, const accel__svf_tile *t, double *dsm, double *canopy,
                            double *trunk, accel__svf_window *w);

#ifdef __cplusplus
}
#endif

#endif
