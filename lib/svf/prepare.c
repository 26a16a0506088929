/* UMEP's preparation of the inputs, then the plan: for host inputs in
 * api.c, and for device inputs (raw job) in a CPU run on host copies of
 * them. The GPU prepares device inputs itself with the same statistics
 * (accel__svf_stats_add), cells (accel__svf_cell) and rules
 * (accel__svf_settle, accel__svf_plan_raw). */
#include "svf/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const INPUT_NAMES[3] = {"dsm", "cdsm", "tdsm"};

void accel__svf_stats_of(const float *const raw[3], int64_t rows, int64_t cols, accel__svf_stats *st) {
  accel__svf_stats_init(st);
  const int64_t n = rows * cols;
  for (int g = 0; g < 3; g++)
    for (int64_t k = 0; raw[g] && k < n; k++) accel__svf_stats_add(st, g, raw[g][k], k);
}

accel_status accel__svf_settle(accel_ctx *ctx, const char *stage, const accel__svf_stats *st, int64_t cols, double *up,
                               double *hi, double *lo, char *why) {
  for (int g = 0; g < 3; g++)
    if (st->inf[g] >= 0) {
      accel__why(why, "%s[%lld, %lld] is infinite", INPUT_NAMES[g], (long long)(st->inf[g] / cols),
                 (long long)(st->inf[g] % cols));
      return ACCEL_ERR_INVALID_ARG;
    }
  for (int g = 0; g < 3; g++)
    if (st->nodata[g])
      accel__log(ctx, ACCEL_LOG_INFO, "accel: %s: %llu no-data (NaN) cells of %s count as 0", stage,
                 (unsigned long long)st->nodata[g], INPUT_NAMES[g]);
  *up = 0, *hi = st->hi, *lo = st->lo;
  if (st->lo < 0) {
    accel__log(ctx, ACCEL_LOG_INFO, "accel: %s: the DSM goes down to %g; raised by %g as UMEP does", stage, st->lo,
               -st->lo);
    *up = fabs(st->lo);
    *hi += *up;
    *lo = 0;
  }
  return ACCEL_OK;
}

accel_status accel__svf_plan_raw(accel__svf_job *job, const accel__svf_stats *st, double hi, double lo, double top,
                                 char *why) {
  const accel__svf_setup *o = &job->setup;
  const double amax = o->max_height > 0 ? o->max_height : (job->veg ? (hi > st->chi ? hi : st->chi) : hi);
  accel__svf_plan *plan = job->shadows
                              ? accel__svf_plan_sun(o->azimuth, o->altitude, job->rows, job->cols, amax, o->pixel_size)
                              : accel__svf_plan_sky(o->patches, job->rows, job->cols, amax, o->pixel_size);
  if (!plan) {
    accel__why(why, "out of memory for the ray steps");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel__svf_plan_halo(plan, top, lo);
  job->plan = plan;
  job->hmax = top;
  return ACCEL_OK;
}

accel_status accel__svf_prepare_raw(accel_ctx *ctx, accel__svf_job *job, double **buf, char *why) {
  const int64_t rows = job->rows, cols = job->cols, pitch = cols + 2 * ACCEL__SVF_PAD;
  accel__svf_stats st;
  double up, hi, lo;
  accel__svf_stats_of(job->raw, rows, cols, &st);
  accel_status s = accel__svf_settle(ctx, job->stage, &st, cols, &up, &hi, &lo, why);
  if (s) return s;
  const size_t cells = (size_t)rows * (size_t)pitch, grids = job->veg ? 3 : 1;
  if (!(*buf = calloc(cells * grids, sizeof(double)))) {
    accel__why(why, "out of memory for the %lld x %lld input grids", (long long)rows, (long long)cols);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  double *D = *buf, *C = job->veg ? *buf + cells : NULL, *T = job->veg ? *buf + 2 * cells : NULL;
  double top = hi;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      const int64_t i = r * cols + c, k = r * pitch + c + ACCEL__SVF_PAD;
      double d, ca = 0, tr = 0;
      accel__svf_cell(job->raw[0][i], job->veg ? job->raw[1][i] : 0.0f, job->raw[2] ? job->raw[2][i] : 0.0f, job->veg,
                      job->raw[2] != NULL, up, job->setup.trunk_ratio, &d, &ca, &tr);
      D[k] = d;
      if (!job->veg) continue;
      C[k] = ca, T[k] = tr;
      top = ca > top ? ca : top;
      top = tr > top ? tr : top;
    }
  job->grid = (accel__svf_window){D, C, T, pitch, 0, rows, 0, cols};
  if ((s = accel__svf_plan_raw(job, &st, hi, lo, top, why))) {
    free(*buf);
    *buf = NULL;
    job->grid.dsm = NULL;
  }
  return s;
}

void accel__svf_release_raw(accel__svf_job *job, double *buf) {
  accel__svf_plan_free((accel__svf_plan *)job->plan);
  job->plan = NULL;
  job->hmax = 0;
  memset(&job->grid, 0, sizeof job->grid);
  free(buf);
}
