/*
 * accel/svf.h - shadows and sky view factors of digital surface models, as
 * UMEP's SOLWEIG computes them (shadowingfunction_20, svfForProcessing153).
 *
 * Grids are 2-D F32 arrays (rows, cols), row 0 at the top (north on a
 * north-up raster), any strides. Inputs:
 *   dsm   ground plus buildings, metres (required);
 *   cdsm  vegetation canopy height above ground, metres (NULL: no vegetation);
 *   tdsm  trunk-zone height above ground, metres (NULL: trunk_ratio * cdsm,
 *         UMEP's 25 % by default).
 * The pixel size is given explicitly (UMEP's `scale` is 1 / pixel size).
 * As UMEP's tools do: non-finite DSM/CDSM/TDSM cells (no data) count as 0, and
 * a DSM with negative heights is raised by |min| first (a DSM at or below 0
 * would be shaded by UMEP's zero fill outside the grid). Infinite values are
 * refused.
 *
 * Outputs are 1 where the sun (or the sky patch) is visible, 0 where it is
 * blocked, as UMEP writes them:
 *   sh          0 in building shadow;
 *   vegsh       0 in vegetation shadow that is not inside a building shadow;
 *   vbshvegsh   0 where vegetation would shade a pixel that a building shades.
 * The vegetation rule is UMEP's: a canopy cell shades when the ray passes
 * between its trunk-zone top and its canopy top; a ray under the canopy
 * (through the trunk zone, the "pergola") and a ray above it do not.
 *
 * Results equal UMEP's to the bit (docs/svf.md states the rules, including
 * the step rule, the stop height and the order of the SVF sums); tiling never
 * changes a result. Stage names: "svf.shadows", "svf.sky". On a CUDA backend
 * both run on the GPU, in tiles within the device memory budget.
 *
 * Device arrays (core.h): on a CUDA context the inputs (all of dsm, cdsm,
 * tdsm given: device arrays, or all host ones; mixed is
 * ACCEL_ERR_UNSUPPORTED) and any output may be C-contiguous device arrays.
 * Device inputs are prepared on the device (UMEP's raise, canopy and trunk
 * tops, every tile's window made there from them), device outputs written
 * there: none of them crosses the bus.
 *
 * Errors of both (core.h has the general rules): ACCEL_ERR_INVALID_ARG for
 * a NULL ctx (reported through accel_last_error(NULL)), NULL options or
 * dsm, a TDSM without a CDSM, a pixel_size that is not positive and finite,
 * a trunk_ratio or max_height that is negative or not finite, a negative
 * tile, a grid that is not a 2-D F32 array of the DSM's shape, an empty
 * DSM, an output overlapping an input or another output, an infinite input
 * value; ACCEL_ERR_LIMIT for more than 2^30 - 1 rows or columns;
 * ACCEL_ERR_VERSION, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_ERR_CANCELLED (progress
 * callback), and under ACCEL_FALLBACK_DENY the GPU's failure. The outputs
 * are unspecified after a failure.
 *
 * Threads: every function may be called from several threads at once, also
 * with one context (GPU work is serialized per context).
 */
#ifndef ACCEL_SVF_H
#define ACCEL_SVF_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The 15 SVF grids, in UMEP's order; names as UMEP saves them. */
typedef enum accel_svf_grid {
  ACCEL_SVF = 0,     /* "svf": buildings, whole sky */
  ACCEL_SVF_E = 1,   /* "svfE": eastern half sky (patch azimuth in [0, 180)) */
  ACCEL_SVF_S = 2,   /* "svfS": [90, 270) */
  ACCEL_SVF_W = 3,   /* "svfW": [180, 360) */
  ACCEL_SVF_N = 4,   /* "svfN": [270, 360) or [0, 90) */
  ACCEL_SVF_VEG = 5, /* "svfveg": vegetation, whole sky; then E, S, W, N */
  ACCEL_SVF_E_VEG = 6,
  ACCEL_SVF_S_VEG = 7,
  ACCEL_SVF_W_VEG = 8,
  ACCEL_SVF_N_VEG = 9,
  ACCEL_SVF_AVEG = 10, /* "svfaveg": vegetation within building shadows; then E, S, W, N */
  ACCEL_SVF_E_AVEG = 11,
  ACCEL_SVF_S_AVEG = 12,
  ACCEL_SVF_W_AVEG = 13,
  ACCEL_SVF_N_AVEG = 14,
  ACCEL_SVF_GRIDS = 15
} accel_svf_grid;

/* "svf", "svfE", ..., "svfveg", "svfEveg", ..., "svfNaveg" (static storage);
 * NULL if out of range. */
ACCEL_API const char *accel_svf_grid_name(int32_t grid);

/* The per-patch visibility matrices (what SOLWEIG's anisotropic sky reads). */
typedef enum accel_svf_matrix {
  ACCEL_SVF_MATRIX_SH = 0,    /* UMEP's shmat */
  ACCEL_SVF_MATRIX_VEGSH = 1, /* vegshmat */
  ACCEL_SVF_MATRIX_VBSH = 2,  /* vbshvegshmat */
  ACCEL_SVF_MATRICES = 3
} accel_svf_matrix;

typedef struct accel_svf_options {
  uint32_t struct_size; /* set by accel_svf_options_init */
  double pixel_size;    /* metres per pixel; required (> 0) */
  /* Sky patches: 145 (Robinson and Stone), 153 (default; Wallenberg et
   * al., what UMEP uses), 306 or 612 (UMEP's patch options 3 and 4, which
   * make 305 and 609 patches). */
  int32_t patches;
  double trunk_ratio; /* TDSM = trunk_ratio * CDSM when no TDSM is given; default 0.25 */
  /* UMEP's amaxvalue, the height at which the rays stop; 0 (default):
   * UMEP's SVF rule, max(max DSM, max CDSM) (after the DSM's raise). */
  double max_height;
  /* Tile side in pixels (interior; each tile also reads a halo, see
   * docs/svf.md); 0 (default): the whole grid on the CPU, the largest tiles
   * that fit the device memory budget on a GPU. Results never depend on it. */
  int64_t tile;
  accel_progress_fn progress;
  void *progress_user;
} accel_svf_options;

ACCEL_API accel_status accel_svf_options_init(accel_svf_options *options, size_t struct_size);

/* The patches of a patch option (145, 153, 306 or 612). `*count` receives
 * their number. With `azimuth` and `altitude` not NULL (room for the count
 * each), also the patch directions in degrees, in UMEP's order (band by band
 * from the horizon, azimuth ascending within a band): the order of the
 * matrices' bits. Call it once with NULL arrays to learn the count.
 *
 * Returns ACCEL_OK, or ACCEL_ERR_INVALID_ARG for an unknown option or a
 * NULL `count` (then nothing is written, and no last-error message is set).
 * Needs no context; safe to call from several threads at once. */
ACCEL_API accel_status accel_svf_patches(int32_t option, int32_t *count, double *azimuth, double *altitude);

/* Shadows for one sun position (azimuth clockwise from north, altitude above
 * the horizon, degrees; altitude in (0, 90]). `sh` is required; `vegsh` and
 * `vbshvegsh` may be NULL (without a CDSM they come out all 1). All grids of
 * the same shape; outputs must not overlap inputs. Only pixel_size,
 * trunk_ratio, max_height, tile and progress of `options` are used.
 * ACCEL_ERR_INVALID_ARG also for a NULL `sh`, an azimuth outside [0, 360]
 * or an altitude outside (0, 90]. */
ACCEL_API accel_status accel_svf_shadows(accel_ctx *ctx, const accel_array *dsm, const accel_array *cdsm,
                                         const accel_array *tdsm, double azimuth, double altitude,
                                         const accel_svf_options *options, const accel_array *sh,
                                         const accel_array *vegsh, const accel_array *vbshvegsh);

/* Sky view factors. `grids[g]` (g an accel_svf_grid) receives grid g (F32,
 * rows x cols) or is NULL when not wanted; `grids` itself may be NULL when
 * only matrices are wanted. The vegetation grids (5..14) need a CDSM.
 * `matrices[m]` (may be NULL, and any entry NULL) receives the per-patch
 * visibility of matrix m, bit-packed or a byte a patch as its shape says:
 * U8 (rows, cols, ceil(P / 8)) for P patches, bit p % 8 (least significant
 * first) of byte p / 8 set when patch p is visible (numpy:
 * np.unpackbits(m, axis=2, bitorder="little")[..., :P]); or U8 (rows, cols,
 * P), byte p 1 when patch p is visible, else 0 (UMEP's own layout, eight
 * times the memory). Every matrix of a call takes the same layout. The
 * vegetation matrices need a CDSM. At least one output is required.
 * ACCEL_ERR_INVALID_ARG also for an unknown patch option, a vegetation
 * output without a CDSM, a matrix of another dtype or shape, matrices of
 * both layouts, or no output. */
ACCEL_API accel_status accel_svf_sky(accel_ctx *ctx, const accel_array *dsm, const accel_array *cdsm,
                                     const accel_array *tdsm, const accel_svf_options *options,
                                     const accel_array *const *grids, const accel_array *const *matrices);

/* The halo of the tiles of a grid: how many rows and columns beyond a tile
 * the rays that can still change one of its pixels read (docs/svf.md). A run
 * on a window made of a tile and this halo on every side (clipped to the
 * grid) gives the tile's pixels the values of the whole grid's run, provided
 * the window's run stops its rays where the whole grid's run does (set
 * max_height) and sees the same heights (a DSM that the whole grid's run
 * would raise must be raised first: the window's own minimum would differ).
 * This is what lets a grid be cut into chunks computed apart (Dask's
 * map_overlap with this halo as depth).
 *
 * The grid is described by its size (rows x cols), its lowest DSM height
 * `lowest` and its highest top `highest` (the largest of the DSM, the canopy
 * CDSM + DSM and the trunk zone TDSM + DSM), as its run prepares them (no-data
 * cells as 0, after the raise). `sun` (azimuth, altitude in degrees, as
 * accel_svf_shadows takes them) gives the halo of that sun's shadows; NULL
 * gives the halo of the sky view factors with options->patches. Of `options`
 * only pixel_size, patches and max_height are used; max_height 0 stands for
 * `highest`, never below UMEP's default stop height, so the halo is then
 * never too small.
 *
 * ACCEL_ERR_INVALID_ARG for NULL options or outputs, an option accel_svf_sky
 * would refuse, rows or cols below 1, a lowest or highest that is not
 * finite, highest < lowest, a sun outside accel_svf_shadows's range;
 * ACCEL_ERR_LIMIT for more than 2^30 - 1 rows or columns; ACCEL_ERR_VERSION;
 * ACCEL_ERR_OUT_OF_MEMORY. Messages go to accel_last_error(NULL); the
 * outputs are written only on success. Needs no context; safe to call from
 * several threads at once. */
ACCEL_API accel_status accel_svf_halo(const accel_svf_options *options, int64_t rows, int64_t cols, double lowest,
                                      double highest, const double *sun, int64_t *halo_rows, int64_t *halo_cols);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_SVF_H */
