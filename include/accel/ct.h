/*
 * accel/ct.h - pore segmentation of CT volumes: rescale, threshold, fill
 * holes, exact Euclidean distance transform, markers, marker-controlled
 * watershed and a pore network, as single stages and as one pipeline.
 *
 * Volumes are 3-D arrays indexed (z, y, x) (numpy's C order); any strides
 * are accepted, C-contiguous arrays are used without copies. Masks are U8,
 * nonzero = true; outputs are written 0/1. Spacing is the voxel size along
 * (z, y, x) in any length unit (> 0); distances and volumes come in that unit.
 *
 * The reference semantics (docs/ct.md) are SciPy 1.10 (binary_fill_holes,
 * distance_transform_edt) and scikit-image 0.19.3 (peak_local_max,
 * watershed), reproduced exactly (docs/ct.md gives the comparisons).
 *
 * Stage names: "ct.rescale", "ct.threshold", "ct.fill_holes", "ct.edt",
 * "ct.markers", "ct.trim", "ct.watershed", "ct.network", and "ct.pipeline"
 * for a whole pipeline run. On a CUDA backend rescale, threshold, fill
 * holes, the EDT and the markers' window test run on the GPU (in Z slabs
 * beyond the device memory budget); the watershed (a sequential priority
 * queue), the trims and the network run on the CPU. Volumes of any size
 * the memory holds, up to 2^44 voxels (ACCEL_ERR_LIMIT beyond): beyond
 * 2^32 - 2 voxels the components and the peak search keep 64-bit voxel
 * indices, with the same results. Label and marker values are I32: more
 * than 2^31 - 1 markers (or trimmed peaks) is ACCEL_ERR_LIMIT.
 *
 * Device arrays (core.h, accel_array_on_device): on a CUDA context,
 * accel_ct_threshold, accel_ct_fill_holes, accel_ct_edt and
 * accel_ct_pipeline_run (input, markers, every output) read and write
 * C-contiguous device arrays in place; every other function here refuses
 * them (ACCEL_ERR_UNSUPPORTED; ACCEL_ERR_INVALID_ARG on a CPU context).
 *
 * Errors (core.h has the general rules). The stage functions and
 * accel_ct_network_build need a context (a NULL one is ACCEL_ERR_INVALID_ARG,
 * reported through accel_last_error(NULL)); the pipeline reports through
 * the context it was created with; network queries through NULL. They
 * refuse with ACCEL_ERR_INVALID_ARG a malformed array, one that is not 3-D
 * or not of the dtype named, a shape that differs from the first volume's,
 * an output that overlaps an input (except the very same array where a
 * function allows it), a spacing that is not positive and finite, and an
 * option out of its range; ACCEL_ERR_LIMIT beyond the voxel limit or the
 * markers' I32 numbers;
 * ACCEL_ERR_VERSION for an options or outputs struct_size;
 * ACCEL_ERR_OUT_OF_MEMORY (strided arrays also take contiguous copies). A
 * function with a progress callback may return ACCEL_ERR_CANCELLED, and
 * those dispatched to the backend (every stage but "ct.trim" and
 * "ct.network") the GPU's failure under ACCEL_FALLBACK_DENY. After a failure
 * the output arrays are unspecified and nothing is written through `count`.
 *
 * Threads: every function may be called from several threads at once, also
 * with one context (GPU work is serialized per context). A network never
 * changes once built, and a pipeline never changes once created:
 * accel_ct_pipeline_run may run on one pipeline from several threads at
 * once. Only their destroy functions must not overlap another call on them.
 * The context must outlive the pipelines made with it.
 */
#ifndef ACCEL_CT_H
#define ACCEL_CT_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum accel_ct_compare {
  ACCEL_CT_GREATER = 0,       /* value >  threshold (default) */
  ACCEL_CT_GREATER_EQUAL = 1, /* value >= threshold */
  ACCEL_CT_LESS = 2,          /* value <  threshold */
  ACCEL_CT_LESS_EQUAL = 3     /* value <= threshold */
} accel_ct_compare;

typedef enum accel_ct_connectivity {
  ACCEL_CT_FACES = 6,   /* 6-connected: voxels sharing a face */
  ACCEL_CT_EDGES = 18,  /* 18-connected: sharing a face or an edge */
  ACCEL_CT_CORNERS = 26 /* 26-connected: sharing a face, an edge or a corner */
} accel_ct_connectivity;

/* ---------------------------------------------------------------- stages */

/* DICOM's rescale: out[z, y, x] = in[z, y, x] * slope[z] + intercept[z],
 * computed in double and stored as F32. `in`: I16 or U16 (Z, Y, X); slope and
 * intercept: Z values each, or NULL for 1 and 0; a value that is not finite
 * is ACCEL_ERR_INVALID_ARG. `out` must not overlap `in`. */
ACCEL_API accel_status accel_ct_rescale(accel_ctx *ctx, const accel_array *in, const double *slope,
                                        const double *intercept, const accel_array *out);

/* out = in <compare> threshold, as U8 0/1. `in`: U8, I16, U16, I32 or F32;
 * the comparison is made in double (exact for these types). `out` may be
 * `in` itself when it is U8, and must not overlap it otherwise. An unknown
 * comparison or a NaN threshold is ACCEL_ERR_INVALID_ARG. */
ACCEL_API accel_status accel_ct_threshold(accel_ctx *ctx, const accel_array *in, double threshold,
                                          accel_ct_compare compare, const accel_array *out);

/* SciPy's binary_fill_holes: out = mask, plus every background voxel not
 * connected to the volume's border through background voxels (components
 * labelled with the given connectivity; SciPy's default is
 * ACCEL_CT_FACES; ACCEL_CT_EDGES and ACCEL_CT_CORNERS are the others; another
 * value is ACCEL_ERR_INVALID_ARG). U8 in, U8 out
 * (may be the same array, not otherwise overlapping). */
ACCEL_API accel_status accel_ct_fill_holes(accel_ctx *ctx, const accel_array *mask, accel_ct_connectivity connectivity,
                                           const accel_array *out);

/* SciPy's distance_transform_edt(mask, sampling=spacing) as F32: for every
 * nonzero voxel, the Euclidean distance (in spacing units) to the centre of
 * the nearest zero voxel; zero voxels get 0. The volume's border is not
 * background. Exact (linear-time separable algorithm on the CPU, exact per
 * line parabola envelopes on the GPU): SciPy's result rounded to float, to
 * the bit when the spacings' squares are exact binary fractions (1, 0.5,
 * 1.5, ...), within a float's rounding otherwise (then
 * accel_ct_feature_transform gives SciPy's values). A mask without any zero voxel gives
 * +inf everywhere (SciPy returns distances to a point outside the volume).
 * `spacing` may be NULL for (1, 1, 1). `out` must not overlap `mask`. */
ACCEL_API accel_status accel_ct_edt(accel_ctx *ctx, const accel_array *mask, const double *spacing,
                                    const accel_array *out);

/* SciPy's distance_transform_edt(mask, sampling=spacing, return_indices=True)
 * bit for bit: `indices` (I32, shape (3, Z, Y, X)) receives for every voxel
 * the (z, y, x) index of the zero voxel SciPy picks as its nearest (among
 * equally near ones, the one SciPy's feature transform keeps), and
 * `distances` (F64, (Z, Y, X)) SciPy's float64 distances, computed from those
 * indices as SciPy computes them. Either may be NULL (not both). A mask
 * without zero voxels gives SciPy's placeholder index (-1, 0, 0) everywhere
 * (and distances to it). `spacing` may be NULL for (1, 1, 1). Outputs must
 * not overlap the mask or each other. Stage "ct.feature_transform"; it holds 12
 * bytes per voxel. On a CUDA context the volume's features and the
 * distances (20 bytes per voxel) must fit the device memory budget: larger
 * volumes run on the CPU (declined, not a fallback). Both give the same
 * indices and distances, to the bit. */
ACCEL_API accel_status accel_ct_feature_transform(accel_ctx *ctx, const accel_array *mask, const double *spacing,
                                                  const accel_array *indices, const accel_array *distances);

/* SNOW's peak trimming (Gostick 2017), flags for accel_ct_marker_options.trim. */
enum {
  /* PoreSpy 3's trim_saddle_points: a peak whose plateau, grown a voxel at a
   * time through equal values, meets higher ground is dropped (see
   * accel_ct_trim_markers). */
  ACCEL_CT_TRIM_SADDLES = 1u,
  /* PoreSpy 3's trim_nearby_peaks: of two peaks nearer to each other than
   * the nearer one is to the solid, the one closer to the solid is dropped. */
  ACCEL_CT_TRIM_NEARBY = 2u
};

typedef struct accel_ct_marker_options {
  uint32_t struct_size; /* set by accel_ct_marker_options_init */
  int32_t min_distance; /* default 3: peaks closer than this (Chebyshev, voxels) are suppressed */
  /* Gaussian smoothing of the distance map before the peak search (SciPy's
   * gaussian_filter: truncate 4.0, mode 'reflect'), in voxels; 0 (default):
   * none. Only the peak search sees the smoothed map: the trims and (in a
   * pipeline) the watershed use the distance map itself, as PoreSpy 3's
   * snow_partitioning does. */
  double smooth_sigma;
  accel_progress_fn progress;
  void *progress_user;
  /* ACCEL_CT_TRIM_* flags (default 0: none), applied to the peaks found;
   * the survivors are renumbered (see accel_ct_trim_markers). */
  uint32_t trim;
  int32_t saddle_iterations; /* default 20 (PoreSpy's maxiter) */
  double nearby_factor;      /* default 1 (PoreSpy's f) */
  /* voxel size (z, y, x) for the distance between peaks in the nearby trim,
   * in the distance map's unit; default 1, 1, 1 (PoreSpy's voxel units) */
  double spacing[3];
  /* Appended in the second version (callers built against the first get
   * the defaults, which are the first version's behaviour): the rest of
   * scikit-image's peak_local_max (see accel_ct_markers). */
  uint32_t values;             /* ACCEL_CT_VALUES_* (default DISTANCES) */
  uint32_t order;              /* ACCEL_CT_PEAKS_* numbering (default C_ORDER) */
  uint32_t rules;              /* ACCEL_CT_RULES_* (default SKIMAGE_0_19) */
  int32_t exclude_border[3];   /* per axis of the image, in its own order (voxels, >= 0); default 0 */
  double threshold_abs;        /* NaN (default): None, the image's minimum */
  double threshold_rel;        /* NaN (default): None; else max(threshold, threshold_rel * max) */
  int64_t num_peaks;           /* -1 (default): no limit; else >= 0 */
  int64_t num_peaks_per_label; /* -1 (default): no limit; else >= 0 */
  /* The window: U8 (nonzero = in) with the image's dimensions, each axis
   * centred at extent / 2 as SciPy's filters centre it; NULL (default): the
   * (2 min_distance + 1) cube of the image's dimensions. */
  const accel_array *footprint;
  /* The regions as values (> 0; 0 and negatives are outside every region)
   * of an I32 array of the image's shape, as peak_local_max's `labels`; the
   * `mask` argument must then be NULL. NULL (default): the mask's connected
   * components (full connectivity), or no regions when mask is NULL too. */
  const accel_array *labels;
  double p_norm; /* the minimum distance's Minkowski norm, >= 1; default INFINITY */
  /* Inside a region's box, the value of voxels of other regions (scikit-image
   * masks them with the lowest value of the image's dtype); NaN (default):
   * the lowest finite value of the map's dtype. */
  double background;
} accel_ct_marker_options;

/* Values a peak search accepts (accel_ct_marker_options.values). */
enum {
  ACCEL_CT_VALUES_DISTANCES = 0, /* a distance map: finite, not negative */
  ACCEL_CT_VALUES_ANY = 1        /* any value but NaN (infinities too) */
};

/* How the peaks are numbered (accel_ct_marker_options.order). */
enum {
  ACCEL_CT_PEAKS_C_ORDER = 0, /* 1..n in C order of their voxels */
  ACCEL_CT_PEAKS_SORTED = 1   /* 1..n in the order peak_local_max returns them */
};

/* Whose peak_local_max (accel_ct_marker_options.rules). */
enum {
  /* scikit-image 0.19.3: beyond the image (or a region's box) the window
   * sees 0 (SciPy's mode 'constant'), equal values keep numpy 1.x's
   * quicksort order */
  ACCEL_CT_RULES_SKIMAGE_0_19 = 0,
  /* scikit-image 0.22 and later: the window sees the nearest voxel inside
   * (mode 'nearest', since 0.20), equal values keep C order (a stable
   * sort, since 0.22) */
  ACCEL_CT_RULES_SKIMAGE_0_22 = 1
};

ACCEL_API accel_status accel_ct_marker_options_init(accel_ct_marker_options *options, size_t struct_size);

/* Markers as scikit-image 0.19.3's
 *   peak_local_max(edt, min_distance=d, exclude_border=False,
 *                  labels=label(mask, connectivity=3))
 * finds them (per 26-connected component of mask: local maxima of a
 * (2d+1)^3 window, the strongest first with ties ordered as numpy 1.x's
 * quicksort orders them, then peaks closer than d to a kept one dropped),
 * numbered 1..n in C order into `out` (I32, zero elsewhere). `edt`: F32,
 * finite and not negative; `mask`: U8; `out` overlaps neither. *count (may
 * be NULL) receives n. `options` may be NULL for the defaults; with
 * options->trim the trims of accel_ct_trim_markers follow (stage "ct.trim").
 *
 * The second version's options give peak_local_max's other parameters
 * (docs/ct.md has the rules): threshold_abs, threshold_rel, exclude_border,
 * num_peaks, num_peaks_per_label, footprint, labels (then `mask` is NULL;
 * with neither, the whole image is one region and scikit-image's labels=None
 * rules apply), p_norm, any real values (values = ACCEL_CT_VALUES_ANY), the
 * numbering in peak_local_max's order, and scikit-image 0.22's rules. With
 * them, or for an F64 `edt`, or a 1-D or 2-D one (searched with the rules of
 * its own dimensionality: the window, the components and the flat-region
 * opening of that rank; mask, labels, footprint and out of that rank too),
 * a general search runs; on a GPU its window test runs on the device (the
 * regions and the selection on the host), unless its arrays (about 25 bytes
 * per voxel) exceed the device budget: then the CPU runs it. Voxels
 * outside every region are never peaks (scikit-image makes them peaks when
 * the threshold is below `background`). Smoothing and the trims take 3-D F32 distance maps only
 * (ACCEL_ERR_UNSUPPORTED otherwise).
 *
 * ACCEL_ERR_INVALID_ARG also for a negative min_distance, a smooth_sigma or
 * nearby_factor that is negative or not finite, saddle_iterations < 1,
 * unknown trim flags, values, order or rules, an edt value that is negative,
 * NaN or infinite (ACCEL_CT_VALUES_ANY: NaN), a negative exclude_border (or
 * one past the image's rank that is not 0), num_peaks or
 * num_peaks_per_label below -1, p_norm below 1 or NaN, both a mask and
 * labels, a footprint that is not U8 of the image's rank or has elements
 * but none set. */
ACCEL_API accel_status accel_ct_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *mask,
                                        const accel_ct_marker_options *options, const accel_array *out,
                                        uint32_t *count);

/* SNOW's trims of given peaks: `markers` (I32, nonzero = a peak voxel) and
 * the distance map `edt` (F32, finite, not negative), with options->trim,
 * saddle_iterations, nearby_factor and spacing (NULL options: both trims,
 * defaults). The rules are PoreSpy 3.2's:
 *  - saddles: per 6-connected group of peak voxels P, at most
 *    saddle_iterations times: D = P dilated by a 3x3x3 cube, M = the highest
 *    value in D, E = the voxels of D valued M (and > 0); E == P: a true peak
 *    (E's voxels kept); E and P disjoint: dropped; else P = E and again.
 *    Undecided after the last iteration: dropped.
 *  - nearby: per 26-connected group i in C order, its centroid truncated to
 *    whole voxels c_i, L_i = edt[c_i] + i * 1e-6, n_i the group with the
 *    nearest centroid (ties: the lowest-numbered; SciPy's KD-tree leaves them
 *    unspecified); where |c_i - c_n| * spacing <= nearby_factor * L_i, the
 *    one of i, n_i with the smaller L is dropped (n_i when equal).
 * The survivors are numbered by 26-connected group in C order into `out`
 * (I32, may be the very array `markers`, must not overlap `edt`); *count
 * (may be NULL) receives their number. `edt` and the options it uses are
 * checked as by accel_ct_markers. Runs on the CPU on every backend (its work
 * is per peak, not per voxel), as stage "ct.trim". */
ACCEL_API accel_status accel_ct_trim_markers(accel_ctx *ctx, const accel_array *edt, const accel_array *markers,
                                             const accel_ct_marker_options *options, const accel_array *out,
                                             uint32_t *count);

/* How ties between equally low markers are broken by the watershed. */
typedef enum accel_ct_ties {
  /* scikit-image's order: its binary heap pops equal-valued markers in an
   * order that depends on the heap's history; reproduced exactly (the same
   * heap, operation for operation). */
  ACCEL_CT_TIES_SKIMAGE = 0,
  /* Equal-valued markers in C order (a stable priority queue), otherwise the
   * same flood: an order defined without reference to any heap. */
  ACCEL_CT_TIES_STABLE = 1
} accel_ct_ties;

typedef struct accel_ct_watershed_options {
  uint32_t struct_size; /* set by accel_ct_watershed_options_init */
  accel_ct_ties ties;   /* default ACCEL_CT_TIES_SKIMAGE */
  accel_progress_fn progress;
  void *progress_user;
  /* Appended in the second version (callers built against the first get
   * the defaults, which are the first version's behaviour): */
  /* Neighbours: those at most `connectivity` orthogonal steps away (1:
   * faces, default; 2: faces and edges; 3 or more: all 26 in 3-D), within
   * the image's own dimensionality, as scipy.ndimage's
   * generate_binary_structure; >= 1. */
  uint32_t connectivity;
  /* Nonzero: a one-voxel line of 0 between basins (scikit-image's
   * watershed_line=True). Default 0. */
  uint32_t watershed_line;
  /* > 0: the compact watershed (scikit-image's compactness): a voxel's
   * priority is its value plus compactness times its Euclidean distance
   * (in voxels) to the marker that reached it. Default 0; finite, >= 0. */
  double compactness;
} accel_ct_watershed_options;

ACCEL_API accel_status accel_ct_watershed_options_init(accel_ct_watershed_options *options, size_t struct_size);

/* scikit-image 0.19.3's watershed(image, markers, connectivity=...,
 * mask=mask, compactness=..., watershed_line=...): a priority flood from
 * the markers (I32, nonzero = a label), lowest (value, age) first, where the
 * age counts pushes (markers 0); neighbours are visited in scikit-image's
 * order for the connectivity (its offsets sorted by distance with numpy
 * 1.x's argsort). Without watershed_line and compactness a voxel takes the
 * label of the neighbour that first pushes it; with either it is labelled
 * when popped (and, with watershed_line, left 0 and closed when its
 * neighbours carry two different labels; with compactness its priority
 * grows with the distance to its marker). Voxels outside mask (U8; NULL =
 * everywhere) stay 0, as do voxels no marker reaches. `image`: F32 or F64
 * (flooded in double precision as scikit-image does; F32 with connectivity
 * 1 and neither option takes a faster path with the same result) without
 * NaN (flood -edt to split pores), 1-D, 2-D or 3-D with its own
 * dimensionality (the neighbours of a 2-D image are those of a plane);
 * `markers`, `mask` and `out` of the image's shape; `out`: I32 (may be the
 * very array `markers`, must not overlap `image` or `mask`).
 * ACCEL_ERR_INVALID_ARG also for NaN in `image` inside the mask, a marker
 * value of INT32_MIN (reserved), unknown ties, connectivity 0 or a
 * compactness that is negative or not finite. */
ACCEL_API accel_status accel_ct_watershed(accel_ctx *ctx, const accel_array *image, const accel_array *markers,
                                          const accel_array *mask, const accel_ct_watershed_options *options,
                                          const accel_array *out);

/* ---------------------------------------------------------------- pore network */

/* A region (pore body): label L's voxels. */
typedef struct accel_ct_region {
  uint32_t struct_size; /* set by the caller: sizeof(accel_ct_region) */
  uint32_t label;
  uint64_t voxels;
  double volume;            /* voxels * spacing[0] * spacing[1] * spacing[2] */
  double equivalent_radius; /* radius of the sphere of that volume */
  double centroid[3];       /* mean voxel centre, (z, y, x) * spacing */
  double inscribed_radius;  /* the largest distance-map value inside */
} accel_ct_region;

/* A throat: the face-adjacent voxel pairs of two regions a < b. */
typedef struct accel_ct_throat {
  uint32_t struct_size;    /* set by the caller: sizeof(accel_ct_throat) */
  uint32_t a, b;           /* region labels, a < b */
  uint64_t faces;          /* shared voxel faces */
  double area;             /* sum of the shared faces' areas (spacing products) */
  double inscribed_radius; /* max over shared faces of min(edt[one side], edt[other]) */
} accel_ct_throat;

typedef struct accel_ct_network accel_ct_network;

/* The network of a label volume (I32, 0 or negative = not pore; regions are
 * the positive labels present, sorted) with its distance map (F32, same
 * shape) and spacing (NULL = 1, 1, 1). Runs on the CPU (stage "ct.network").
 * *out is NULL on failure (when ctx and out are not). */
ACCEL_API accel_status accel_ct_network_build(accel_ctx *ctx, const accel_array *labels, const accel_array *edt,
                                              const double *spacing, accel_ct_network **out);
/* Counts, and porosity = labelled voxels / all voxels. Any may be NULL.
 * Fails only for a NULL network. */
ACCEL_API accel_status accel_ct_network_info(const accel_ct_network *network, size_t *regions, size_t *throats,
                                             double *porosity);
/* Region i (0 .. regions-1, by label) and throat i (sorted by (a, b)).
 * ACCEL_ERR_NOT_FOUND past the end, ACCEL_ERR_VERSION when out->struct_size
 * is below the struct's size; `out` is written only on success. */
ACCEL_API accel_status accel_ct_network_region(const accel_ct_network *network, size_t i, accel_ct_region *out);
ACCEL_API accel_status accel_ct_network_throat(const accel_ct_network *network, size_t i, accel_ct_throat *out);
/* Write the network as JSON (what `accel ct segment --network` writes):
 *   {"porosity": p, "spacing": [z, y, x],
 *    "regions": [{"label", "voxels", "volume", "equivalent_radius",
 *                 "centroid": [z, y, x], "inscribed_radius"}, ...],
 *    "throats": [{"a", "b", "faces", "area", "inscribed_radius"}, ...]}
 * numbers printed to round-trip exactly. Written atomically like
 * accel_npy_save (io.h): a failed save leaves any previous file untouched.
 * `ctx` may be NULL (it only receives the error). Errors as io.h's saves:
 * ACCEL_ERR_INVALID_ARG (NULL network, a bad path), ACCEL_ERR_IO (with the
 * system's reason), ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_ct_network_save_json(accel_ctx *ctx, const accel_ct_network *network, const char *path);
/* Release a network; accepts NULL. */
ACCEL_API void accel_ct_network_destroy(accel_ct_network *network);

/* ---------------------------------------------------------------- the pipeline */

typedef enum accel_ct_pores {
  ACCEL_CT_PORES_CLOSED = 0, /* closed voids: fill_holes(solid) & ~solid */
  ACCEL_CT_PORES_ALL = 1     /* every voxel that is not solid */
} accel_ct_pores;

typedef struct accel_ct_pipeline_options {
  uint32_t struct_size; /* set by accel_ct_pipeline_options_init */
  /* input I16/U16 with slopes: rescaled per slice first (NULL: not) */
  const double *slope, *intercept;         /* Z values each, both or neither */
  double threshold;                        /* solid = input <compare> threshold */
  accel_ct_compare compare;                /* default ACCEL_CT_GREATER */
  accel_ct_connectivity fill_connectivity; /* default ACCEL_CT_FACES */
  accel_ct_pores pores;                    /* default ACCEL_CT_PORES_CLOSED */
  double spacing[3];                       /* default 1, 1, 1 */
  int32_t min_distance;                    /* default 3 */
  double smooth_sigma;                     /* default 0: the peak search's smoothing */
  accel_ct_ties ties;                      /* default ACCEL_CT_TIES_SKIMAGE */
  accel_progress_fn progress;              /* stage names as above, fraction of the pipeline */
  void *progress_user;
  uint32_t trim;             /* ACCEL_CT_TRIM_* of the peaks found (default 0) */
  int32_t saddle_iterations; /* default 20 */
  double nearby_factor;      /* default 1 (distances in spacing units) */
} accel_ct_pipeline_options;

ACCEL_API accel_status accel_ct_pipeline_options_init(accel_ct_pipeline_options *options, size_t struct_size);

/* Where a run writes; NULL members are not computed unless later stages
 * need them (and are then never downloaded from a GPU). */
typedef struct accel_ct_outputs {
  uint32_t struct_size;       /* set by accel_ct_outputs_init */
  const accel_array *solid;   /* U8 */
  const accel_array *filled;  /* U8 */
  const accel_array *pores;   /* U8 */
  const accel_array *edt;     /* F32 (the unsmoothed distance map) */
  const accel_array *markers; /* I32 */
  const accel_array *labels;  /* I32 */
  accel_ct_network **network; /* receives a network (destroy it) */
  uint32_t marker_count;      /* out: markers found or given */
} accel_ct_outputs;

ACCEL_API accel_status accel_ct_outputs_init(accel_ct_outputs *outputs, size_t struct_size);

typedef struct accel_ct_pipeline accel_ct_pipeline;

/* A pipeline with fixed options, reusable for many volumes. It keeps a copy
 * of the options and the caller's slope and intercept pointers (read at
 * every run, so they must stay valid until the last), nothing else: device
 * memory is taken per run, within the budget, and returned when the run
 * ends. `options` may be NULL for the defaults. ACCEL_ERR_INVALID_ARG (NULL
 * ctx or out, slope without intercept or the reverse, an option out of
 * range as the stages check them, a NaN threshold), ACCEL_ERR_VERSION,
 * ACCEL_ERR_OUT_OF_MEMORY; *out is NULL on failure (when ctx and out are
 * not). */
ACCEL_API accel_status accel_ct_pipeline_create(accel_ctx *ctx, const accel_ct_pipeline_options *options,
                                                accel_ct_pipeline **out);
/* Release a pipeline; accepts NULL. No run may be in progress. */
ACCEL_API void accel_ct_pipeline_destroy(accel_ct_pipeline *pipeline);

/* Run on `input` (Z, Y, X): U8, I16, U16, I32 or F32 (I16/U16 rescaled first
 * when the options give slopes; the slope and intercept arrays are read at
 * each run and must hold Z values). `markers` (I32) replaces the peak search
 * when not NULL. Only the stages that the requested outputs need are run. On
 * a CUDA backend the GPU stages work on the whole volume when it fits the
 * device memory budget, else in Z slabs, with results identical either way
 * (docs/ct.md says what crosses the bus).
 *
 * Outputs must not overlap the input, the markers or each other. Errors, in
 * the pipeline's context: ACCEL_ERR_INVALID_ARG (NULL pipeline or outputs,
 * slopes with an input that is not I16/U16, a slope or intercept that is
 * not finite, an array refused as above), ACCEL_ERR_LIMIT,
 * ACCEL_ERR_VERSION (outputs->struct_size), ACCEL_ERR_OUT_OF_MEMORY,
 * ACCEL_ERR_CANCELLED, and under ACCEL_FALLBACK_DENY the GPU's failure.
 * outputs->marker_count is written only on success; *outputs->network is
 * NULL after a failure past the argument checks (nothing to free). */
ACCEL_API accel_status accel_ct_pipeline_run(accel_ct_pipeline *pipeline, const accel_array *input,
                                             const accel_array *markers, accel_ct_outputs *outputs);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CT_H */
