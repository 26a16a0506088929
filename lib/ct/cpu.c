/* The CPU backend's CT ops and pipeline. */
#include "ct/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static accel_status oom(accel__call *call, const char *what) {
  accel__why(call->why, "out of memory for %s", what);
  return ACCEL_ERR_OUT_OF_MEMORY;
}

/* A failed peak search or trim (s): too many markers for I32, or out of memory. */
static accel_status peaks_failed(accel__call *call, accel_status s, const char *what) {
  if (s != ACCEL_ERR_LIMIT) return oom(call, what);
  accel__why(call->why, "%s found more than 2^31 - 1 markers: their numbers exceed int32", what);
  return s;
}

static accel_status cpu_rescale(accel__call *call, accel__ct_rescale_job *job) {
  accel__ct_rescale_cpu(job->in, job->in_dtype, job->d, job->slope, job->intercept, job->out, call->threads);
  return ACCEL_OK;
}

static accel_status cpu_threshold(accel__call *call, accel__ct_threshold_job *job) {
  accel__ct_threshold_cpu(job->in, job->in_dtype, accel__dims_count(job->d), job->threshold, job->compare, job->out,
                          call->threads);
  return ACCEL_OK;
}

static accel_status cpu_fill(accel__call *call, accel__ct_fill_job *job) {
  accel_status s = accel__ct_fill_holes_cpu(job->mask, job->d, job->connectivity, call->threads, job->out);
  return s ? oom(call, "the background components") : ACCEL_OK;
}

static accel_status cpu_edt(accel__call *call, accel__ct_edt_job *job) {
  accel_status s = accel__ct_edt_cpu(job->mask, job->d, job->spacing, call->threads, job->out);
  return s ? oom(call, "the distance transform's line buffers") : ACCEL_OK;
}

static accel_status cpu_ft(accel__call *call, accel__ct_ft_job *job) {
  accel_status s =
      accel__ct_feature_transform_cpu(job->mask, job->d, job->spacing, call->threads, job->indices, job->distances);
  return s ? oom(call, "the feature transform's lines") : ACCEL_OK;
}

/* Markers of a (possibly smoothed) map. */
static accel_status markers_of(accel__call *call, const float *map, const uint8_t *mask, accel__dims d, int md,
                               double sigma, int32_t *out, uint32_t *count) {
  float *smooth = NULL;
  if (sigma > 0) {
    smooth = malloc((accel__dims_count(d) ? accel__dims_count(d) : 1) * sizeof(float));
    if (!smooth || accel__ct_gaussian_cpu(map, d, sigma, call->threads, smooth)) {
      free(smooth);
      return oom(call, "the smoothed distance map");
    }
    map = smooth;
  }
  accel_status s = accel__ct_markers_cpu(map, mask, d, md, call->threads, out, count);
  free(smooth);
  return s ? peaks_failed(call, s, "the peak search") : ACCEL_OK;
}

/* The general search (the api has refused smoothing with it, except of
 * float32 volumes). */
static accel_status general_markers(accel__call *call, accel__ct_markers_job *job) {
  const uint64_t n = accel__dims_count(job->d), nb = n ? n : 1;
  double *v = job->image64 ? NULL : malloc(nb * sizeof(double));
  float *smooth = job->sigma > 0 ? malloc(nb * sizeof(float)) : NULL;
  if ((!job->image64 && !v) ||
      (job->sigma > 0 && (!smooth || accel__ct_gaussian_cpu(job->image, job->d, job->sigma, call->threads, smooth)))) {
    free(v);
    free(smooth);
    return oom(call, "the peak search's values");
  }
  const float *f = smooth ? smooth : job->image;
  if (v)
    for (uint64_t i = 0; i < n; i++) v[i] = f[i];
  free(smooth);
  accel_status s = accel__ct_peaks_general_cpu(job->image64 ? job->image64 : v, job->mask, job->d, job->min_distance,
                                               job->general, call->threads, job->out, &job->count);
  free(v);
  return s ? peaks_failed(call, s, "the peak search") : ACCEL_OK;
}

static accel_status cpu_markers(accel__call *call, accel__ct_markers_job *job) {
  if (job->general) return general_markers(call, job);
  return markers_of(call, job->image, job->mask, job->d, job->min_distance, job->sigma, job->out, &job->count);
}

static accel_status cpu_watershed(accel__call *call, accel__ct_watershed_job *job) {
  /* connectivity 1 (the faces, whose order is the same in every rank) over
   * float32 without the options: the fast flood; the rest: the general one */
  const bool plain =
      job->image && (job->connectivity == 1 || job->rank == 1) && !job->watershed_line && !(job->compactness > 0);
  const accel__ct_watershed_src src = {job->image, job->image64, job->mask};
  const accel__ct_watershed_rule rule = {job->rank, job->connectivity, job->watershed_line,
                                         job->ties == ACCEL_CT_TIES_STABLE, job->compactness};
  accel_status s = plain
                       ? accel__ct_watershed_cpu(job->image, job->mask, job->d, job->ties, job->out, job->progress,
                                                 job->progress_user)
                       : accel__ct_watershed_ext_cpu(&src, job->d, &rule, job->out, job->progress, job->progress_user);
  if (s == ACCEL_ERR_CANCELLED) accel__why(call->why, "cancelled by the progress callback");
  else if (s) return oom(call, "the flood");
  return s;
}

/* ------------------------------------------------------------ the pipeline */

typedef struct prog {
  accel__ct_pipeline_job *job;
  double base, span; /* this stage's share of the whole run */
} prog;

static int stage_progress(void *user, const char *stage, double f) {
  prog *p = user;
  const accel_ct_pipeline_options *o = &p->job->o;
  return o->progress ? o->progress(o->progress_user, stage, p->base + p->span * f) : 0;
}

static bool report(accel__ct_pipeline_job *job, const char *stage, double fraction) {
  job->current = stage;
  return job->o.progress && job->o.progress(job->o.progress_user, stage, fraction);
}

/* The peak search of the CPU pipeline. */
static accel_status cpu_peaks(accel__call *call, void *user, const float *map, const uint8_t *mask, int md,
                              int32_t *out, uint32_t *count) {
  const accel__dims *d = user;
  accel_status s = accel__ct_markers_cpu(map, mask, *d, md, call->threads, out, count);
  return s ? peaks_failed(call, s, "the peak search") : ACCEL_OK;
}

accel_status accel__ct_pipeline_finish(accel__call *call, accel__ct_pipeline_job *job, const uint8_t *pores,
                                       const float *edt, int32_t *markers, int32_t *labels, accel__ct_peak_fn peaks,
                                       void *peaks_user) {
  const accel__dims d = job->d;
  const uint64_t n = accel__dims_count(d), nb = n ? n : 1;
  const accel_ct_pipeline_options *o = &job->o;
  accel_status s = ACCEL_OK;
  float *scratch = NULL;
  if (!job->given_markers && markers) {
    /* the peak search sees the smoothed map, the trims and the flood the
     * distance map itself (PoreSpy 3's snow_partitioning) */
    const float *map = edt;
    if (o->smooth_sigma > 0) {
      if (report(job, "ct.markers", 0.3)) goto cancelled;
      scratch = malloc(nb * sizeof(float));
      if (!scratch || accel__ct_gaussian_cpu(edt, d, o->smooth_sigma, call->threads, scratch)) {
        s = oom(call, "the smoothed distance map");
        goto done;
      }
      map = scratch;
    }
    if (report(job, "ct.markers", 0.35)) goto cancelled;
    if ((s = peaks(call, peaks_user, map, pores, o->min_distance, markers, &job->marker_count))) goto done;
    if (o->trim) {
      if (report(job, "ct.trim", 0.45)) goto cancelled;
      if ((s = accel__ct_trim_markers_cpu(edt, d, o->trim, o->saddle_iterations, o->nearby_factor, o->spacing,
                                          call->threads, markers, &job->marker_count))) {
        s = peaks_failed(call, s, "the peak trims");
        goto done;
      }
    }
  }
  if (job->given_markers) {
    uint32_t given = 0;
    for (uint64_t i = 0; i < n; i++) given += job->given_markers[i] != 0;
    job->marker_count = given;
    if (job->markers && job->markers != job->given_markers) memcpy(job->markers, job->given_markers, n * 4);
  }
  if (labels) {
    if (report(job, "ct.watershed", 0.5)) goto cancelled;
    const int32_t *seeds = job->given_markers ? job->given_markers : markers;
    float *neg = scratch ? scratch : malloc(nb * sizeof(float));
    if (!neg) {
      s = oom(call, "the flooded map");
      goto done;
    }
    scratch = neg;
#pragma omp parallel for num_threads(call->threads) schedule(static)
    for (uint64_t i = 0; i < n; i++) {
      neg[i] = -edt[i];
      labels[i] = pores[i] ? seeds[i] : 0;
    }
    prog p = {job, 0.5, 0.4};
    s = accel__ct_watershed_cpu(neg, pores, d, o->ties, labels, o->progress ? stage_progress : NULL, &p);
    if (s == ACCEL_ERR_CANCELLED) goto cancelled;
    if (s) {
      s = oom(call, "the flood");
      goto done;
    }
  }
  if (job->want_network) {
    if (report(job, "ct.network", 0.9)) goto cancelled;
    if (accel__ct_network_cpu(labels, edt, d, o->spacing, call->threads, &job->network)) {
      s = oom(call, "the network");
      goto done;
    }
  }
  goto done;
cancelled:
  accel__why(call->why, "cancelled by the progress callback");
  s = ACCEL_ERR_CANCELLED;
done:
  free(scratch);
  return s;
}

accel_status accel__ct_pipeline_cpu(accel__call *call, accel__ct_pipeline_job *job) {
  const accel__dims d = job->d;
  const uint64_t n = accel__dims_count(d), nb = n ? n : 1;
  const accel_ct_pipeline_options *o = &job->o;
  const bool want_labels = job->labels || job->want_network;
  /* the peak search, unless markers are given */
  const bool want_markers = !job->given_markers && (job->markers || want_labels);
  const bool want_edt = job->edt || want_markers || want_labels;
  const bool want_pores = job->pores || want_edt;
  const bool want_filled = job->filled || (want_pores && o->pores == ACCEL_CT_PORES_CLOSED);
  accel_status s = ACCEL_OK;
  /* our own buffers for what is needed but not requested */
  uint8_t *solid = job->solid ? job->solid : malloc(nb);
  uint8_t *filled = job->filled ? job->filled : (want_filled ? malloc(nb) : NULL);
  uint8_t *pores = job->pores ? job->pores : (want_pores ? malloc(nb) : NULL);
  float *edt = job->edt ? job->edt : (want_edt ? malloc(nb * sizeof(float)) : NULL);
  float *rescaled = NULL;
  int32_t *markers = job->markers ? job->markers : (want_markers ? malloc(nb * sizeof(int32_t)) : NULL);
  int32_t *labels = job->labels ? job->labels : (want_labels ? malloc(nb * sizeof(int32_t)) : NULL);
  if (!solid || (want_filled && !filled) || (want_pores && !pores) || (want_edt && !edt) ||
      (want_markers && !markers) || (want_labels && !labels)) {
    s = oom(call, "the pipeline's intermediates");
    goto done;
  }
  if (report(job, "ct.threshold", 0.0)) goto cancelled;
  const void *in = job->in;
  accel_dtype dt = job->in_dtype;
  if (o->slope) {
    if (!(rescaled = malloc(nb * sizeof(float)))) {
      s = oom(call, "the rescaled volume");
      goto done;
    }
    accel__ct_rescale_cpu(in, dt, d, o->slope, o->intercept, rescaled, call->threads);
    in = rescaled;
    dt = ACCEL_DTYPE_F32;
  }
  accel__ct_threshold_cpu(in, dt, n, o->threshold, o->compare, solid, call->threads);
  free(rescaled);
  rescaled = NULL;
  if (want_filled) {
    if (report(job, "ct.fill_holes", 0.05)) goto cancelled;
    if (accel__ct_fill_holes_cpu(solid, d, o->fill_connectivity, call->threads, filled)) {
      s = oom(call, "the background components");
      goto done;
    }
  }
  if (want_pores) {
#pragma omp parallel for num_threads(call->threads) schedule(static)
    for (uint64_t i = 0; i < n; i++)
      pores[i] = (uint8_t)(o->pores == ACCEL_CT_PORES_CLOSED ? filled[i] && !solid[i] : !solid[i]);
  }
  if (want_edt) {
    if (report(job, "ct.edt", 0.15)) goto cancelled;
    if (accel__ct_edt_cpu(pores, d, o->spacing, call->threads, edt)) {
      s = oom(call, "the distance transform");
      goto done;
    }
  }
  s = accel__ct_pipeline_finish(call, job, pores, edt, markers, labels, cpu_peaks, &job->d);
  if (s) goto done;
  report(job, "ct.pipeline", 1.0);
  goto done;
cancelled:
  accel__why(call->why, "cancelled by the progress callback");
  s = ACCEL_ERR_CANCELLED;
done:
  if (!job->solid) free(solid);
  if (!job->filled) free(filled);
  if (!job->pores) free(pores);
  if (!job->edt) free(edt);
  if (!job->markers) free(markers);
  if (!job->labels) free(labels);
  free(rescaled);
  return s;
}

const accel__ct_ops accel__cpu_ct_ops = {
    .rescale = cpu_rescale,
    .threshold = cpu_threshold,
    .fill_holes = cpu_fill,
    .edt = cpu_edt,
    .markers = cpu_markers,
    .watershed = cpu_watershed,
    .pipeline = accel__ct_pipeline_cpu,
    .feature_transform = cpu_ft,
};
