/*
 * lib/ct/ct.h - the CT algorithms on contiguous host volumes (internal).
 *
 * Volumes are C-ordered (z, y, x) with n = nz * ny * nx voxels. Every
 * function here is exact and deterministic for any thread count; the CUDA
 * kernels reproduce them.
 *
 * Voxel indices. The connected components and the peak search keep one
 * voxel index per voxel (a union-find parent, a component's root). Volumes of
 * at most accel__ct_index_limit voxels keep them in uint32 (the functions
 * without a suffix, ACCEL__CT_NONE for "no component"); larger volumes take
 * the wide path, the same code compiled with uint64 indices (the functions
 * suffixed _wide, UINT64_MAX for "none"). Both give the same results; the
 * 32-bit path keeps half the memory traffic for the volumes it can hold.
 * Tests lower accel__ct_index_limit so that the wide path runs on small
 * volumes. Label and marker values stay int32: more than 2^31 - 1 regions or
 * markers is ACCEL_ERR_LIMIT.
 */
#ifndef ACCEL_CT_INTERNAL_H
#define ACCEL_CT_INTERNAL_H

#include "core/internal.h"

#include "accel/ct.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel__dims {
  int64_t nz, ny, nx;
} accel__dims;

static inline uint64_t accel__dims_count(accel__dims d) { return (uint64_t)d.nz * (uint64_t)d.ny * (uint64_t)d.nx; }

enum { ACCEL__CT_NONE = 0xffffffffu }; /* "no component" in 32-bit label arrays */

/* The largest voxel count of the 32-bit path: indices up to n - 1 stay below
 * ACCEL__CT_NONE. */
#define ACCEL__CT_INDEX_LIMIT_DEFAULT ((uint64_t)0xfffffffeu)

/* Volumes of more voxels than this take the wide path (default
 * ACCEL__CT_INDEX_LIMIT_DEFAULT; tests lower it and restore it, with no CT
 * call running meanwhile). Internal, not exported from the shared library. */
extern uint64_t accel__ct_index_limit;

static inline bool accel__ct_wide(uint64_t n) { return n > accel__ct_index_limit; }

/* The most voxels a CT call takes: its intermediates (20 bytes a voxel and
 * more) could not be held in any address space beyond. */
#define ACCEL__CT_MAX_VOXELS ((uint64_t)1 << 44)

/* ---- connected components */

/* For every voxel whose mask value is selected (nonzero if want_set, zero
 * otherwise): the smallest linear index of its component (connectivity 6 or
 * 26) in root[]; ACCEL__CT_NONE elsewhere. root must hold n entries. */
accel_status accel__ct_components(const uint8_t *mask, accel__dims d, bool want_set, int connectivity, int threads,
                                  uint32_t *root);

/* The same for the voxels of `list` (increasing indices, all with mask set),
 * the components of the set voxels: p[] is written at those voxels only
 * (read p[j] only where mask[j] is set). */
accel_status accel__ct_components_list(const uint8_t *mask, accel__dims d, const uint32_t *list, uint64_t count,
                                       int connectivity, int threads, uint32_t *p);

/* The same with uint64 indices (UINT64_MAX: none), for any volume. */
accel_status accel__ct_components_wide(const uint8_t *mask, accel__dims d, bool want_set, int connectivity, int threads,
                                       uint64_t *root);
accel_status accel__ct_components_list_wide(const uint8_t *mask, accel__dims d, const uint64_t *list, uint64_t count,
                                            int connectivity, int threads, uint64_t *p);

/* ---- stages */

void accel__ct_rescale_cpu(const void *in, accel_dtype dtype, accel__dims d, const double *slope,
                           const double *intercept, float *out, int threads);
void accel__ct_threshold_cpu(const void *in, accel_dtype dtype, uint64_t n, double t, accel_ct_compare cmp,
                             uint8_t *out, int threads);
/* out may equal mask. */
accel_status accel__ct_fill_holes_cpu(const uint8_t *mask, accel__dims d, int connectivity, int threads, uint8_t *out);
/* SciPy's feature transform (accel_ct_feature_transform): indices as
 * 3 planes of n int32 (z, then y, then x; NULL: not kept) and/or float64
 * distances (NULL: not wanted). */
accel_status accel__ct_feature_transform_cpu(const uint8_t *mask, accel__dims d, const double spacing[3], int threads,
                                             int32_t *indices, double *distances);
/* spacing: (z, y, x). */
accel_status accel__ct_edt_cpu(const uint8_t *mask, accel__dims d, const double spacing[3], int threads, float *out);

/* SciPy's gaussian_filter(in, sigma, truncate=4.0, mode='reflect') of a
 * float32 volume (one sigma for every axis, in voxels). out may equal in. */
accel_status accel__ct_gaussian_cpu(const float *in, accel__dims d, double sigma, int threads, float *out);

/* The mask's voxels in C order (malloc'd; NULL when out of memory). */
uint32_t *accel__ct_mask_list(const uint8_t *mask, uint64_t n, uint64_t *count);
uint64_t *accel__ct_mask_list_wide(const uint8_t *mask, uint64_t n, uint64_t *count);

/* The window offsets of radius r, nearest first: (2r+1)^3 - 1 of them. */
int accel__ct_window_offsets(int r, int (*offs)[3]);

/* The peak search in two parts. First (the per-voxel part, also done on a
 * GPU): root[] = the smallest voxel of each mask voxel's 26-connected
 * component and cand[] = 1 where no voxel of the same component in the
 * (2 md + 1)^3 window is higher (both at the voxels of list only). Then the
 * rest: flat components, the threshold, numpy's order, the minimum distance,
 * numbering (root[] and cand[] are overwritten). */
accel_status accel__ct_peak_candidates_cpu(const float *edt, const uint8_t *mask, accel__dims d, int md, int threads,
                                           const uint32_t *list, uint64_t np, uint32_t *root, uint8_t *cand);
accel_status accel__ct_markers_finish(const float *edt, const uint8_t *mask, accel__dims d, int md,
                                      const uint32_t *list, uint64_t np, uint32_t *root, uint8_t *cand, int32_t *out,
                                      uint32_t *count);
/* The same with uint64 indices. Both return ACCEL_ERR_LIMIT when there are
 * more than 2^31 - 1 markers. */
accel_status accel__ct_peak_candidates_cpu_wide(const float *edt, const uint8_t *mask, accel__dims d, int md,
                                                int threads, const uint64_t *list, uint64_t np, uint64_t *root,
                                                uint8_t *cand);
accel_status accel__ct_markers_finish_wide(const float *edt, const uint8_t *mask, accel__dims d, int md,
                                           const uint64_t *list, uint64_t np, uint64_t *root, uint8_t *cand,
                                           int32_t *out, uint32_t *count);

/* Peak search (peak_local_max semantics, see accel/ct.h); markers numbered
 * in C order into out (I32); the wide path beyond accel__ct_index_limit
 * voxels. ACCEL_ERR_OUT_OF_MEMORY, or ACCEL_ERR_LIMIT past 2^31 - 1 markers. */
accel_status accel__ct_markers_cpu(const float *edt, const uint8_t *mask, accel__dims d, int min_distance, int threads,
                                   int32_t *out, uint32_t *count);

/* peak_local_max with all its parameters (cpu_markers_general.c): the
 * image in double (float32 maps converted), d (1, 1, n) or (1, ny, nx)
 * below rank 3, every axis in (z, y, x) order. */
typedef struct accel__ct_peak_params {
  int rank;                            /* 1..3: the image's own dimensionality */
  double threshold_abs, threshold_rel; /* NaN: None */
  int64_t border[3];                   /* excluded border per axis */
  int64_t num_peaks, per_label;        /* -1: no limit */
  const uint8_t *footprint;            /* C order of fshape; NULL: the cube of min_distance */
  int64_t fshape[3];
  const int32_t *labels; /* NULL: the mask's components, or no regions when the mask is NULL too */
  double p_norm, background;
  bool sorted;     /* number in peak_local_max's order (else C order) */
  bool rules_0_22; /* scikit-image 0.22's rules (mode 'nearest', a stable order) */
  bool f32;        /* the map is float32: thresholds compare in float32 */
  bool distances;  /* the map is not negative (ACCEL_CT_VALUES_DISTANCES) */
  /* the window test already done (1 = a candidate, at the mask's voxels),
   * by the GPU; NULL: done here */
  const uint8_t *window;
} accel__ct_peak_params;
accel_status accel__ct_peaks_general_cpu(const double *image, const uint8_t *mask, accel__dims d, int min_distance,
                                         const accel__ct_peak_params *p, int threads, int32_t *out, uint32_t *count);
/* Is the first version's window test (each voxel against the higher voxels
 * of its component in the cube, the rest of the window ignored) the general
 * search's for these parameters? The mask's components, the cube, no
 * excluded border, and values that are not negative (0 beyond the box never
 * wins) or the 0.22 rules (the nearest voxel of the box is in the cube). */
static inline bool accel__ct_peaks_window_shared(const accel__ct_peak_params *p, const uint8_t *mask) {
  return mask && !p->labels && !p->footprint && !p->border[0] && !p->border[1] && !p->border[2] &&
         (p->distances || p->rules_0_22);
}

/* SNOW's trims (see accel_ct_trim_markers) of the peak voxels of markers
 * (nonzero), renumbered in place; *count receives the survivors' count.
 * ACCEL_ERR_OUT_OF_MEMORY, or ACCEL_ERR_LIMIT past 2^31 - 1 survivors. */
accel_status accel__ct_trim_markers_cpu(const float *map, accel__dims d, unsigned trim, int iterations, double factor,
                                        const double spacing[3], int threads, int32_t *markers, uint32_t *count);

/* Priority flood (watershed semantics, see accel/ct.h). labels holds the
 * markers on entry (already restricted to the mask), the labels on return.
 * mask may be NULL (everywhere). progress may be NULL. */
accel_status accel__ct_watershed_cpu(const float *image, const uint8_t *mask, accel__dims d, accel_ct_ties ties,
                                     int32_t *labels, accel_progress_fn progress, void *progress_user);

/* The general flood (cpu_watershed_ext.c): any connectivity, the watershed
 * line, compactness, float32 or float64 values (one of f32, f64 set). rank:
 * the image's own dimensionality (1: d is (1, 1, n); 2: (1, ny, nx)). */
typedef struct accel__ct_watershed_src {
  const float *f32;
  const double *f64;
  const uint8_t *mask; /* NULL: everywhere */
} accel__ct_watershed_src;
typedef struct accel__ct_watershed_rule {
  int rank;
  unsigned connectivity; /* >= 1; above the rank means the rank */
  bool watershed_line, stable;
  double compactness; /* >= 0 */
} accel__ct_watershed_rule;
accel_status accel__ct_watershed_ext_cpu(const accel__ct_watershed_src *src, accel__dims d,
                                         const accel__ct_watershed_rule *rule, int32_t *labels,
                                         accel_progress_fn progress, void *progress_user);

/* numpy 1.x's argsort(kind='quicksort') of float32 keys without NaN: the
 * introsort (median of three, insertion sort below 16, heapsort beyond the
 * depth limit) whose order of equal keys peak_local_max inherits. */
void accel__np_argsort_f32(const float *keys, int64_t *order, int64_t n);
void accel__np_argsort_f64(const double *keys, int64_t *order, int64_t n);

/* The network (see accel/ct.h). */
accel_status accel__ct_network_cpu(const int32_t *labels, const float *edt, accel__dims d, const double spacing[3],
                                   int threads, accel_ct_network **out);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CT_INTERNAL_H */
