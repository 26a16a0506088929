/* lib/ct/ops.h - the CT domain's part of the backend vtable. */
#ifndef ACCEL_CT_OPS_H
#define ACCEL_CT_OPS_H

#include "ct/ct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stages as the backends see them: contiguous volumes of shape d, in
 * host memory, or in device memory where a job's `device` bit says so (an
 * accel_array_on_device array, on a GPU context; a CPU run gets host copies
 * of those, made by the dispatcher). */
enum {
  ACCEL__CT_DEV_IN = 1,  /* threshold, fill, EDT: the input (in, mask) */
  ACCEL__CT_DEV_OUT = 2, /* their output */
  /* the pipeline's */
  ACCEL__CT_DEV_INPUT = 1,
  ACCEL__CT_DEV_GIVEN = 2, /* given_markers */
  ACCEL__CT_DEV_SOLID = 4,
  ACCEL__CT_DEV_FILLED = 8,
  ACCEL__CT_DEV_PORES = 16,
  ACCEL__CT_DEV_EDT = 32,
  ACCEL__CT_DEV_MARKERS = 64,
  ACCEL__CT_DEV_LABELS = 128
};
typedef struct accel__ct_rescale_job {
  accel__dims d;
  const void *in; /* I16 or U16 */
  accel_dtype in_dtype;
  const double *slope, *intercept; /* one per slice; NULL: 1 and 0 */
  float *out;
} accel__ct_rescale_job;

typedef struct accel__ct_threshold_job {
  accel__dims d;
  const void *in;
  accel_dtype in_dtype;
  double threshold;
  accel_ct_compare compare;
  uint8_t *out;
  unsigned device; /* ACCEL__CT_DEV_IN, ACCEL__CT_DEV_OUT */
} accel__ct_threshold_job;

typedef struct accel__ct_fill_job {
  accel__dims d;
  const uint8_t *mask;
  int connectivity; /* 6 or 26 */
  uint8_t *out;     /* may be the mask */
  unsigned device;  /* ACCEL__CT_DEV_IN, ACCEL__CT_DEV_OUT */
} accel__ct_fill_job;

typedef struct accel__ct_edt_job {
  accel__dims d;
  const uint8_t *mask;
  double spacing[3]; /* (z, y, x) */
  float *out;
  unsigned device; /* ACCEL__CT_DEV_IN, ACCEL__CT_DEV_OUT */
} accel__ct_edt_job;

/* SciPy's feature transform (accel_ct_feature_transform); host arrays. */
typedef struct accel__ct_ft_job {
  accel__dims d;
  const uint8_t *mask;
  double spacing[3]; /* (z, y, x) */
  int32_t *indices;  /* (3, nz, ny, nx), or NULL */
  double *distances; /* or NULL (not both) */
} accel__ct_ft_job;

typedef struct accel__ct_markers_job {
  accel__dims d;
  const float *image;    /* the distance map (F32) */
  const double *image64; /* or an F64 map (then image is NULL; only with general) */
  const uint8_t *mask;   /* NULL: no regions (only with general) */
  int min_distance;
  double sigma; /* smoothing before the search */
  /* peak_local_max's other parameters; NULL: the first version's search
   * (a GPU op declines any other: accel__decline) */
  const accel__ct_peak_params *general;
  int32_t *out;
  uint32_t count; /* out: how many markers */
} accel__ct_markers_job;

/* scikit-image's tie order is a sequential binary heap's, the CPU's: a GPU
 * op declines (accel__decline) any ties rule but ACCEL_CT_TIES_STABLE. */
typedef struct accel__ct_watershed_job {
  accel__dims d;
  const float *image;    /* F32 images */
  const double *image64; /* F64 images (then image is NULL) */
  const uint8_t *mask;   /* NULL: everywhere */
  accel_ct_ties ties;
  int rank;              /* the image's own dimensionality, 1..3 */
  unsigned connectivity; /* >= 1 */
  bool watershed_line;
  double compactness; /* >= 0 */
  int32_t *out;       /* holds the markers on entry */
  accel_progress_fn progress;
  void *progress_user;
} accel__ct_watershed_job;

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
  accel_ct_network *network; /* out */
  uint32_t marker_count;     /* out */
  /* the stage currently running, for progress and fallback messages */
  const char *current;
  unsigned device; /* ACCEL__CT_DEV_INPUT ... ACCEL__CT_DEV_LABELS */
} accel__ct_pipeline_job;

typedef struct accel__ct_ops {
  accel_status (*rescale)(accel__call *call, accel__ct_rescale_job *job);
  accel_status (*threshold)(accel__call *call, accel__ct_threshold_job *job);
  accel_status (*fill_holes)(accel__call *call, accel__ct_fill_job *job);
  accel_status (*edt)(accel__call *call, accel__ct_edt_job *job);
  accel_status (*markers)(accel__call *call, accel__ct_markers_job *job);
  accel_status (*watershed)(accel__call *call, accel__ct_watershed_job *job);
  accel_status (*pipeline)(accel__call *call, accel__ct_pipeline_job *job);
  accel_status (*feature_transform)(accel__call *call, accel__ct_ft_job *job);
} accel__ct_ops;

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
