/*
 * accel/reg.h - B-spline free-form registration of 2-D images, and warping
 * with the result, as elastix's BSplineTransform does it.
 *
 * Coordinates: x = column, y = row, pixel centres at integers, spacing 1,
 * origin 0 (elastix's convention for images without geometry, such as TIFF).
 * A transform T maps a point of the FIXED image into the MOVING image:
 * T(p) = p + u(p). Registration finds T such that moving(T(p)) ~ fixed(p);
 * warping resamples the moving image (or any image in its frame, such as the
 * full-resolution RGB layers of a design) onto the fixed image's grid.
 *
 * A transform is an optional linear initial part (translation, rigid or
 * affine) followed by a cubic B-spline displacement, composed as elastix's
 * "Compose": T(p) = B(L(p)), where B(q) = q + sum_k c_k beta3((q - o) / s - k).
 * The control grid is laid out as elastix lays out a BSplineTransform over a
 * fixed image of Size (w, h): for a spacing s, GridSize = ceil((w - 1) / s) + 3
 * nodes in x (likewise y), GridOrigin = -((GridSize - 1) s - (w - 1)) / 2,
 * GridIndex 0, GridDirection identity; the parameters are all x displacements
 * (node by node, x fastest), then all y displacements. Outside the grid's
 * valid region (where a node of the support would be missing) B adds nothing.
 *
 * Images: 2-D arrays (rows, cols) of U8, U16 or F32, any strides; the warp
 * also takes (rows, cols, C) with C = 1, 3 or 4. Masks are U8, nonzero =
 * inside. Nothing needs a dense full-resolution displacement field: the
 * field is evaluated from the control grid where it is needed, tile by tile.
 *
 * Stage names: "reg.pyramid" (smoothing and downsampling, for the
 * pre-alignment), "reg.level" (one resolution level: its images and their
 * optimisation), "reg.hold" (a registration's inputs held on a GPU across
 * its levels, and given back), "reg.check", "reg.prealign", "reg.warp". On
 * a CUDA backend they run on the GPU: a registration's host images are
 * uploaded once when they fit the device memory budget beside its finest
 * level (each level then makes its images on the device and keeps them
 * there; otherwise each level uploads the input rows it reads), the warp is
 * streamed tile by tile within the budget.
 *
 * Errors (core.h has the general rules): ACCEL_ERR_INVALID_ARG for a NULL
 * ctx (reported through accel_last_error(NULL)), a NULL required pointer, an
 * image that is not a 2-D U8/U16/F32 array, an empty image, a mask of
 * another shape or dtype, options out of range (each named in the message),
 * non-finite values in an F32 image; ACCEL_ERR_LIMIT for an image over the
 * context's max_pixels or more than 2^31 - 1 pixels a side;
 * ACCEL_ERR_VERSION, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_ERR_CANCELLED (progress
 * callback), and under ACCEL_FALLBACK_DENY the GPU's failure. Outputs are
 * unspecified after a failure, and *out transforms are NULL.
 *
 * Threads: every function may be called from several threads at once, also
 * with one context (GPU work is serialized per context). A transform is
 * read-only in every function but accel_reg_transform_set_parameters and
 * accel_reg_transform_destroy: any number of threads may use it otherwise.
 * Results do not depend on the number of threads.
 */
#ifndef ACCEL_REG_H
#define ACCEL_REG_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- transform */

typedef struct accel_reg_transform accel_reg_transform;

/* The kind of the linear initial part (elastix's transform names). */
typedef enum accel_reg_linear_kind {
  ACCEL_REG_LINEAR_NONE = 0,        /* identity: no initial transform */
  ACCEL_REG_LINEAR_TRANSLATION = 1, /* "TranslationTransform": tx ty */
  ACCEL_REG_LINEAR_RIGID = 2,       /* "EulerTransform": angle (radians) tx ty, about the centre */
  ACCEL_REG_LINEAR_AFFINE = 3       /* "AffineTransform": a11 a12 a21 a22 tx ty, about the centre */
} accel_reg_linear_kind;

/* The control grid of a B-spline transform, in elastix's terms. */
typedef struct accel_reg_grid {
  int64_t image_size[2]; /* the fixed image's Size (w, h) */
  int64_t size[2];       /* GridSize (nodes in x, in y) */
  double spacing[2];     /* GridSpacing, pixels */
  double origin[2];      /* GridOrigin, pixels */
} accel_reg_grid;

/* The elastix grid for a fixed image of width x height and a control point
 * spacing (pixels, > 0): see the layout above. ACCEL_ERR_INVALID_ARG for a
 * NULL grid, sizes < 2 or a spacing that is not positive and finite (no
 * last-error message; no context needed). */
ACCEL_API accel_status accel_reg_grid_for(int64_t width, int64_t height, double spacing, accel_reg_grid *grid);

/* A B-spline transform with the given grid and all parameters 0 (identity),
 * and no initial part. Errors: ACCEL_ERR_INVALID_ARG (NULL grid or out, a
 * grid with fewer than 4 nodes a side or a non-positive spacing),
 * ACCEL_ERR_LIMIT (more than 2^26 parameters), ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_reg_transform_create(accel_ctx *ctx, const accel_reg_grid *grid,
                                                  accel_reg_transform **out);

/* Set the linear initial part: kind, its parameters as elastix orders them
 * (see accel_reg_linear_kind; 0, 2, 3 or 6 values) and the centre of
 * rotation (x, y; ignored for a translation; NULL = (0, 0)). Errors:
 * ACCEL_ERR_INVALID_ARG (NULL transform, an unknown kind, NULL or non-finite
 * parameters, a singular affine matrix). */
ACCEL_API accel_status accel_reg_transform_set_initial(accel_ctx *ctx, accel_reg_transform *t,
                                                       accel_reg_linear_kind kind, const double *params,
                                                       const double *centre);

/* The linear initial part: *kind, and (when not NULL) its parameters (room
 * for 6) and centre (room for 2). ACCEL_ERR_INVALID_ARG for NULL t or kind. */
ACCEL_API accel_status accel_reg_transform_initial(const accel_reg_transform *t, accel_reg_linear_kind *kind,
                                                   double *params, double *centre);

/* The grid of a transform. ACCEL_ERR_INVALID_ARG for NULL arguments. */
ACCEL_API accel_status accel_reg_transform_grid(const accel_reg_transform *t, accel_reg_grid *grid);

/* The number of B-spline parameters, 2 * size[0] * size[1] (0 for NULL). */
ACCEL_API int64_t accel_reg_transform_count(const accel_reg_transform *t);

/* Copy the `count` B-spline parameters (all x, then all y) out of or into a
 * transform. ACCEL_ERR_INVALID_ARG for NULL pointers, a count other than
 * accel_reg_transform_count, or (set) a non-finite value. */
ACCEL_API accel_status accel_reg_transform_parameters(const accel_reg_transform *t, double *params, int64_t count);
ACCEL_API accel_status accel_reg_transform_set_parameters(accel_reg_transform *t, const double *params, int64_t count);

/* Apply T to n points: xy[2i], xy[2i + 1] (fixed image, x then y) become
 * T's value there (moving image). In place; n >= 0. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL t, NULL xy with n > 0, a negative n). */
ACCEL_API accel_status accel_reg_transform_points(accel_ctx *ctx, const accel_reg_transform *t, double *xy, int64_t n);

/* The displacement u(p) = T(p) - p over a region of the fixed image's pixel
 * grid: `field` is F32 (2, h, w), any strides; field[0][r][c] is u_x and
 * field[1][r][c] u_y at the pixel (x0 + c, y0 + r). The region may extend
 * beyond the image. Errors: ACCEL_ERR_INVALID_ARG (NULL arguments, a field
 * of another dtype or shape, x0 or y0 beyond +-2^40). */
ACCEL_API accel_status accel_reg_transform_field(accel_ctx *ctx, const accel_reg_transform *t, int64_t x0, int64_t y0,
                                                 const accel_array *field);

/* An independent copy. Errors: ACCEL_ERR_INVALID_ARG, ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_reg_transform_clone(accel_ctx *ctx, const accel_reg_transform *t,
                                                 accel_reg_transform **out);

/* Write an elastix TransformParameters file that transformix reads: a
 * BSplineTransform with its image and grid metadata and the final resampler
 * (FinalBSplineInterpolator, order 3; DefaultPixelValue 0, ResultImageFormat
 * "tif", ResultImagePixelType "float"), keys in elastix 5's order, numbers
 * with the digits that read back as the same double. With an initial part,
 * that part is written first to "<path without .txt>.initial.txt" (an
 * elastix TranslationTransform, EulerTransform or AffineTransform file) and
 * named by its absolute path in InitialTransformParametersFileName ("T"
 * and "T.txt" share it: keep such names apart), after the path itself
 * proved writable (not a directory, its folder there). A
 * transform without a B-spline part (loaded from a linear file) is written
 * as that linear file alone. Errors: the saves' of io.h (each file written
 * whole under a temporary name, then renamed), ACCEL_ERR_INVALID_ARG also
 * for an absolute path holding a double quote or a line break. */
ACCEL_API accel_status accel_reg_transform_save(accel_ctx *ctx, const accel_reg_transform *t, const char *path);

/* Read an elastix TransformParameters file: a BSplineTransform (or
 * RecursiveBSplineTransform; order 3, 2-D, GridIndex 0, identity
 * directions, spacing 1, origin 0 and index 0) whose chain of initial
 * transforms (InitialTransformParametersFileName, "Compose") holds at most
 * TranslationTransform, EulerTransform and AffineTransform files: one keeps
 * its kind, parameters and centre, several are folded into one
 * AffineTransform (centre 0, 0); or one of those alone (then the B-spline
 * part has no parameters and leaves points unchanged: its grid has 0 x 0
 * nodes over the file's Size, accel_reg_transform_count is 0). The format:
 * "(Key value ...)" entries in any order, strings in double quotes, "//"
 * comments; a key given twice is an error, as in elastix. A relative
 * initial file name is tried as given, then beside `path`. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL arguments), ACCEL_ERR_IO, ACCEL_ERR_FORMAT (not
 * a parameter file, a missing or malformed key, a wrong number of
 * parameters; the message names the key and the file),
 * ACCEL_ERR_UNSUPPORTED (another transform, "Add" combination with an
 * initial transform, other directions, spacing, origin, dimension or spline
 * order, binary parameters, a chain over 16 files),
 * ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_reg_transform_load(accel_ctx *ctx, const char *path, accel_reg_transform **out);

/* Release a transform; accepts NULL. */
ACCEL_API void accel_reg_transform_destroy(accel_reg_transform *t);

/* ---------------------------------------------------------------- register */

typedef enum accel_reg_metric {
  ACCEL_REG_METRIC_MSE = 0, /* mean squared difference (elastix's AdvancedMeanSquares) */
  ACCEL_REG_METRIC_NCC = 1  /* 1 - normalised cross-correlation (elastix's AdvancedNormalizedCorrelation, shifted) */
} accel_reg_metric;

typedef enum accel_reg_optimizer {
  /* Damped Gauss-Newton (Levenberg-Marquardt) on the sampled metric; the
   * default (docs/reg.md has its rules). */
  ACCEL_REG_OPTIMIZER_GAUSS_NEWTON = 0,
  /* elastix's AdaptiveStochasticGradientDescent with its automatic
   * parameter estimation (Klein et al. 2009). */
  ACCEL_REG_OPTIMIZER_ASGD = 1
} accel_reg_optimizer;

/* Why a level stopped. */
typedef enum accel_reg_stop {
  ACCEL_REG_STOP_ITERATIONS = 0, /* the iteration limit */
  ACCEL_REG_STOP_CONVERGED = 1,  /* the convergence test (tolerance) */
  ACCEL_REG_STOP_STALLED = 2     /* no step improved the metric (Gauss-Newton's damping at its limit) */
} accel_reg_stop;

/* Called after every iteration of every level (level 0 is the coarsest):
 * the metric's value on the iteration's (training) samples. Return 0 to go on, nonzero
 * to cancel (the call returns ACCEL_ERR_CANCELLED). Called on the calling
 * thread. It must not run stages on the same context: on a GPU backend the
 * registration holds the context's GPU lock, and such a call fails with
 * ACCEL_ERR_INVALID_ARG (use another context). */
typedef int (*accel_reg_progress_fn)(void *user, int32_t level, int32_t iteration, double metric);

typedef struct accel_reg_options {
  uint32_t struct_size; /* set by accel_reg_options_init */
  /* Resolution levels, 1..8, or 0 (the default): automatic, 4, or 5 when
   * the fixed image's shorter side is at least 2048 pixels (its coarsest
   * level is then still at least 128 pixels; accel_reg_levels_for). */
  int32_t levels;
  double grid_spacing; /* final control point spacing, pixels, up to 1e12; default 64. Level l (0 = coarsest)
                           uses grid_spacing * 2^(levels - 1 - l), elastix's grid schedule */
  /* Pyramid: level l is the image smoothed with a Gaussian of sigma
   * 0.5 * f, f = 2^(levels - 1 - l) (elastix's default schedule); with
   * `downsample` (default 1) it is also sampled every f pixels and the
   * finest level is not smoothed at all (sigma 0.5 blurs fine texture and
   * costs accuracy); with 0 every level keeps the full size, as elastix's
   * smoothing pyramid does. */
  int32_t downsample;
  int32_t iterations; /* per level, >= 1; default 500 */
  /* Fixed-image samples per iteration; default 5000; 0 = every pixel. The
   * Gauss-Newton optimizer needs more than a stochastic one: it uses at
   * least a fixed number per control point of the level (docs/reg.md). */
  int64_t samples;
  int32_t renew_samples;         /* 1 (default): new random samples every iteration */
  uint64_t seed;                 /* the samples' seed; same seed, same result, whatever the thread count */
  accel_reg_metric metric;       /* default ACCEL_REG_METRIC_MSE */
  accel_reg_optimizer optimizer; /* default ACCEL_REG_OPTIMIZER_GAUSS_NEWTON */
  /* Weight of the bending energy penalty (default 0): the mean over the
   * image (inside `fixed_mask`, when one is given) of u_xx^2 + 2 u_xy^2 +
   * u_yy^2, as elastix's TransformBendingEnergyPenalty averages it over its
   * samples (its Metric1Weight carries over; docs/reg.md). */
  double bending_weight;
  /* Early stopping (docs/reg.md): the objective on a fixed validation
   * sample set of `validation_samples` pixels (default 20000; at least
   * 5000, or all of a level's pixels where it has fewer; inside the mask
   * when one is given), drawn once per level, stops a level when its relative decrease over the last
   * `window` evaluations (default 3) falls below `tolerance` (default
   * 1e-3). Gauss-Newton evaluates it after every iteration; ASGD every 10
   * iterations. tolerance 0 = off: every iteration runs (Gauss-Newton may
   * still stop when no step improves the objective). Gauss-Newton's finest
   * level also stops 2 window + 1 iterations after the decrease first falls
   * below 10 x tolerance, and returns the mean of those iterates where its
   * objective is the lower (docs/reg.md). validation_samples 0 (ASGD
   * only; ACCEL_ERR_INVALID_ARG with Gauss-Newton, which takes a step only
   * where the validation objective falls): the objective of the
   * iteration's training samples takes the validation set's place
   * (noisier). */
  double tolerance;
  int32_t window;
  int64_t validation_samples;
  /* Coarse pre-alignment before the first level: 0 none (default), 1
   * translation, 2 translation and rotation, by FFT phase correlation at
   * the coarsest level (stage "reg.prealign"); it becomes the transform's
   * initial part (a TranslationTransform or an EulerTransform about the
   * fixed image's centre). ACCEL_ERR_INVALID_ARG with an initial transform
   * that has a linear part; ACCEL_ERR_UNSUPPORTED when the library was
   * built without kissfft. */
  int32_t prealign;
  accel_reg_progress_fn progress;
  void *progress_user;
} accel_reg_options;

/* Fill `options` with the defaults (the "default" preset). */
ACCEL_API accel_status accel_reg_options_init(accel_reg_options *options, size_t struct_size);

/* The number of levels a registration of a `width` x `height` fixed image
 * with `options` (from accel_reg_options_init or _preset) runs:
 * options->levels as it is, or when that is 0 (or `options` is NULL or
 * its struct_size unset) the automatic choice, 4 levels, or 5 when the
 * shorter side is at least 2048 pixels. On large images the fifth level finds the global
 * displacement (a rotation of a fraction of a degree moves the borders of
 * a 17320^2 scan by tens of pixels) at a sixteenth of the resolution,
 * where it costs little (docs/reg.md). */
ACCEL_API int32_t accel_reg_levels_for(const accel_reg_options *options, int64_t width, int64_t height);

/* Set every field but struct_size, progress and progress_user from a named
 * preset: "default" (what accel_reg_options_init gives) or "elastix"
 * (the usual elastix B-spline parameter file: 4 levels, grid 64, 500 iterations,
 * 5000 samples renewed every iteration, MSE, ASGD, no early stopping, a
 * smoothing pyramid without downsampling). ACCEL_ERR_INVALID_ARG for NULL
 * arguments or struct_size unset, ACCEL_ERR_NOT_FOUND for another name. */
ACCEL_API accel_status accel_reg_options_preset(accel_reg_options *options, const char *name);

/* What one level did. */
typedef struct accel_reg_level_report {
  int32_t iterations;    /* iterations run */
  int32_t stop;          /* an accel_reg_stop */
  int64_t samples;       /* samples per iteration */
  int64_t width, height; /* the level's image size */
  double grid_spacing;
  double metric_first, metric_last; /* the objective (metric plus bending) on the validation samples */
  double seconds;                   /* making the level's images (the pre-alignment too, at level 0) and optimising */
} accel_reg_level_report;

typedef struct accel_reg_report {
  uint32_t struct_size; /* set by accel_reg_report_init */
  int32_t levels;
  accel_reg_level_report level[8];
  double seconds;
} accel_reg_report;

ACCEL_API accel_status accel_reg_report_init(accel_reg_report *report, size_t struct_size);

/* Register `moving` to `fixed` (2-D U8, U16 or F32, any sizes from 2 x 2
 * and strides; they need not have the same size): *out receives a new transform over the
 * fixed image's grid (free with accel_reg_transform_destroy). `fixed_mask`
 * (NULL: everywhere) limits the samples to its nonzero pixels. `initial`
 * (NULL: identity) gives the initial part (its linear part is kept; a
 * B-spline part with the final grid starts the optimisation). `report` may
 * be NULL. Errors: the general ones above, and ACCEL_ERR_INVALID_ARG for a
 * mask with fewer nonzero pixels than 16 per control point of the coarsest
 * grid, an initial transform over another image size or with a nonzero
 * B-spline part on another grid than the final one, an ASGD level that
 * diverges ("level L diverged": after its first iteration none of its
 * samples maps into the moving image), and a level whose
 * first training samples the initial transform puts far off the images
 * ("level L: none of its samples maps into the moving image"): its linear
 * part maps all of them off the fixed image, or none of those in the fixed
 * image and its mask maps into the moving image (with Gauss-Newton, which
 * reads beyond the moving image's edges from its mirrored extension: none
 * within 1e12 pixels of it). A mask that a coarse level's samples miss
 * altogether (a few rows; the level reads it every 2^(levels - 1 - l)
 * pixels) is no error: that level measures nothing and changes nothing,
 * and the finer ones register.
 * Device arrays (core.h): on a CUDA context `fixed` and `moving` may be
 * C-contiguous device arrays, read in place (the pyramid copies their rows
 * on the device; an F32 image's finiteness is checked there, stage
 * "reg.check"); the level images are made and kept on the device, as from
 * held host images. The mask must be host memory. */
ACCEL_API accel_status accel_reg_register(accel_ctx *ctx, const accel_array *fixed, const accel_array *moving,
                                          const accel_array *fixed_mask, const accel_reg_transform *initial,
                                          const accel_reg_options *options, accel_reg_transform **out,
                                          accel_reg_report *report);

/* ---------------------------------------------------------------- warp */

typedef enum accel_reg_interp {
  ACCEL_REG_INTERP_LINEAR = 1,
  ACCEL_REG_INTERP_CUBIC = 3 /* cubic B-spline, as elastix's FinalBSplineInterpolator (order 3) */
} accel_reg_interp;

typedef struct accel_reg_warp_options {
  uint32_t struct_size;    /* set by accel_reg_warp_options_init */
  accel_reg_interp interp; /* default ACCEL_REG_INTERP_CUBIC */
  double fill;             /* value outside the moving image; default 0 */
  /* The output's first pixel in the fixed image's grid (a region of the
   * fixed image; default 0, 0). */
  int64_t x0, y0;
  int64_t tile; /* tile side in pixels, 0..65536; 0 (default): chosen; results never depend on it */
  /* Called on the calling thread as the output's tiles are done (stage
   * "reg.warp", fraction of all layers); nonzero cancels (ACCEL_ERR_CANCELLED). */
  accel_progress_fn progress;
  void *progress_user;
} accel_reg_warp_options;

ACCEL_API accel_status accel_reg_warp_options_init(accel_reg_warp_options *options, size_t struct_size);

/* Warp `count` images with one transform: out[i](r, c) = in[i](T(x0 + c,
 * y0 + r)), interpolated; `fill` where T falls outside in[i] (as elastix:
 * more than half a pixel outside its edge pixels). in[i]: (H, W) or (H, W, C),
 * C in 1, 3, 4, U8, U16 or F32; out[i]: any (h, w) with in[i]'s channels,
 * U8, U16 or F32 (integers rounded to nearest and clamped to their range;
 * h or w 0: an empty region, nothing written, as accel_reg_transform_field).
 * Cubic interpolation is exact B-spline interpolation (the input's
 * coefficients by recursive prefiltering with mirror boundaries, as ITK
 * does); linear is ITK's bilinear interpolation, the edge pixels repeated
 * within the half pixel beyond them. The transform is evaluated tile by tile
 * from its control grid. Memory beyond the outputs, for cubic only: the
 * coefficients (4 bytes per pixel and channel) of a layer up to 256 MiB,
 * else of the moving rows that a band of output rows reaches (about 256 MiB
 * a band, with 32 rows more on either side; more where the transform
 * reaches far). options may be NULL (the defaults). Errors: the general ones above, ACCEL_ERR_INVALID_ARG for
 * count < 1, NULL in/out entries, channel mismatches, an output overlapping
 * an input or another output, options out of range (x0 and y0 within
 * +-2^40). Device arrays (core.h): on a CUDA context any in[i] and out[i]
 * may be C-contiguous device arrays, read and written in place. A cubic
 * warp with a device layer (in or out) makes the coefficients of the whole
 * layer on the device (4 bytes per pixel and channel, beside the layer
 * when it is uploaded from the host): more than the budget holds is
 * ACCEL_ERR_DEVICE_MEMORY, which the fallback policy handles (the CPU then
 * works on host copies). */
ACCEL_API accel_status accel_reg_warp(accel_ctx *ctx, const accel_reg_transform *t, const accel_array *const *in,
                                      const accel_array *const *out, int32_t count,
                                      const accel_reg_warp_options *options);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_REG_H */
