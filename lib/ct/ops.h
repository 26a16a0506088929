/* lib/ct/ops.h - the CT domain's part of the backend vtable. */
#ifndef ACCEL_CT_OPS_H
#define ACCEL_CT_OPS_H

#include "ct/ct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One stage as the backends see it: contiguous host volumes. */
typedef struct accel__ct_job {
  const char *stage;
  accel__dims d;
  const void *in;               /* rescale, threshold: the input */
  accel_dtype in_dtype;
  const double *slope, *intercept;
  double threshold;
  accel_ct_compare compare;
  int connectivity;             /* fill holes: 6 or 26 */
  double spacing[3];
  int min_distance;             /* markers */
  double sigma;                 /* markers: smoothing before the search */
  accel_ct_ties ties;           /* watershed */
  const uint8_t *mask;          /* fill, edt, markers, watershed (NULL: everywhere) */
  const float *image;           /* markers (the distance map), watershed */
  void *out;                    /* the stage's output (watershed: holds the markers on entry) */
  uint32_t count;               /* markers: how many */
  accel_progress_fn progress;
  void *progress_user;
} accel__ct_job;

/* A whole pipeline run: the input and what to produce, contiguous. Outputs
 * that are NULL are not wanted (the op may still compute what later stages
 * need, in its own memory). */
typedef struct accel__ct_pipeline_job {
  accel__dims d;
  const void *in;
  accel_dtype in_dtype;
  accel_ct_pipeline_options o;
  const int32_t *given_markers; /* replaces the peak search when not NULL */
  uint8_t *solid, *filled, *pores;
  float *edt;
  int32_t *markers, *labels;
  bool want_network;
  accel_ct_network *network;    /* out */
  uint32_t marker_count;        /* out */
  /* the stage currently running, for progress and fallback messages */
  const char *current;
} accel__ct_pipeline_job;

typedef struct accel__ct_ops {
  accel_status (*rescale)(accel__call *call, accel__ct_job *job);
  accel_status (*threshold)(accel__call *call, accel__ct_job *job);
  accel_status (*fill_holes)(accel__call *call, accel__ct_job *job);
  accel_status (*edt)(accel__call *call, accel__ct_job *job);
  accel_status (*markers)(accel__call *call, accel__ct_job *job);
  accel_status (*watershed)(accel__call *call, accel__ct_job *job);
  accel_status (*pipeline)(accel__call *call, accel__ct_pipeline_job *job);
} accel__ct_ops;

extern const accel__ct_ops accel__cpu_ct_ops;
#if defined(ACCEL_HAVE_CUDA) && ACCEL_HAVE_CUDA
extern const accel__ct_ops accel__cuda_ct_ops;
#endif

/* A pipeline's peak search: markers of `map` within `mask` (numbered, count
 * set), or a status with call->why set. */
typedef accel_status (*accel__ct_peak_fn)(accel__call *call, void *user, const float *map, const uint8_t *mask,
                                          int min_distance, int32_t *out, uint32_t *count);

/* The host part of every pipeline after the distance map: smoothing, the
 * peak search (by `peaks`) and trims, or the given markers; the watershed;
 * the network. markers / labels: where they go (NULL: not needed). */
accel_status accel__ct_pipeline_finish(accel__call *call, accel__ct_pipeline_job *job, const uint8_t *pores,
                                       const float *edt, int32_t *markers, int32_t *labels, accel__ct_peak_fn peaks,
                                       void *peaks_user);

/* The CPU pipeline (also what a GPU pipeline falls back to). */
accel_status accel__ct_pipeline_cpu(accel__call *call, accel__ct_pipeline_job *job);

#ifdef __cplusplus
}
#endif

#endif
