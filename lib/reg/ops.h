/* lib/reg/ops.h - the registration domain's part of the backend vtable. */
#ifndef ACCEL_REG_OPS_H
#define ACCEL_REG_OPS_H

#include "core/backend.h"
#include "reg/bspline.h"
#include "accel/reg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One pyramid level of one image: smooth `in` with a Gaussian of `sigma`
 * pixels (0: no smoothing), then keep every `factor`-th pixel starting at
 * `offset` (level pixel (i, j) is input pixel (offset + factor i, offset +
 * factor j)), as F32 into `out` (height x width, contiguous). `in` is a
 * validated 2-D U8, U16 or F32 array, any strides. */
typedef struct accel__reg_pyramid_job {
  const accel_array *in;
  double sigma;
  int32_t factor;
  int32_t offset;
  float *out;
  int64_t width, height;
  /* 1: then turn `out` into its cubic B-spline coefficients (reg/interp.h),
   * in place: the moving image of a level is interpolated from them. */
  int32_t coefficients;
  /* 1: `in` is device memory (a C-contiguous device array); a GPU op reads
   * it in place, a CPU run gets a host copy (the dispatcher's slot). */
  int32_t in_device;
  /* A C-contiguous device copy of the host array `in` that the
   * registration holds across its levels (the hold job), or NULL: a GPU op
   * reads it there instead of uploading `in`'s rows; a CPU op reads `in`. */
  const void *resident;
} accel__reg_pyramid_job;

/* The registration's host inputs held in device memory across its levels,
 * so that each is uploaded once, not once a level. `release` 0: copy each
 * `in[k]` (fixed, moving; NULL: not this one) into device memory of its
 * packed size, `held[k]` and `bytes[k]` out, when they fit the budget with
 * `need` bytes to spare (what the finest level needs beside them);
 * otherwise hold nothing (held NULL), which is not a failure: the levels
 * then upload the rows they read. `release` 1: give `held` back. The CPU
 * op holds nothing. */
typedef struct accel__reg_hold_job {
  const accel_array *in[2];
  uint64_t need;
  void *held[2];
  size_t bytes[2];
  int32_t release;
} accel__reg_hold_job;

/* Where an F32 image (2-D, validated) first holds a non-finite value:
 * `bad` = row * width + column, or -1. The registration asks it of device
 * images, whose values the host cannot read (host images are checked on
 * the host); `device` as in the pyramid job. */
typedef struct accel__reg_finite_job {
  const accel_array *image;
  int32_t device;
  int64_t bad;
} accel__reg_finite_job;

/* The stage of that job for a device image `a` (2-D F32, C-contiguous,
 * plain dtype) on ctx: *bad as above, found where it lives ("reg.check"; a
 * CPU run reads a host copy). lib/reg/api.c. */
accel_status accel__reg_device_nonfinite(accel_ctx *ctx, const accel_array *a, int64_t *bad);

/* The optimisation of one level (lib/reg/level.h has the frame, the
 * optimizers and the evaluator a backend supplies). Level images are F32,
 * contiguous, the moving one as cubic B-spline coefficients; a level pixel q stands for the full-resolution point factor *
 * q + offset, the frame the transform lives in. `xf` is the level's grid
 * (nested in the final grid) with the transform's linear part; `params`
 * (that grid's 2 nx ny parameters, in and out) starts from the previous
 * level's result. `base` (params NULL: none) is a B-spline on the final
 * grid added to the level's displacement at coarse levels (an initial
 * transform's B-spline part): T(p) = q + base(q) + level(q), q = L(p). */
typedef struct accel__reg_level_job {
  const float *fixed;
  int64_t fixed_width, fixed_height;
  const float *moving;
  int64_t moving_width, moving_height;
  const uint8_t *mask; /* fixed level mask or NULL */
  int32_t factor;
  int32_t offset;
  int32_t level;
  accel__reg_xform xf; /* its params point at `params` */
  double *params;
  accel__reg_xform base; /* base.params NULL: no base displacement */
  const accel_reg_options *options;
  accel_reg_level_report *report;
  /* The level's images still to be made, or NULL (made already): the
   * pyramid jobs of the fixed image (NULL: `fixed` is the caller's own
   * image, read as it is) and of the moving one (its coefficients), whose
   * `out` are `fixed` and `moving`. A CPU op runs them into those host
   * buffers; a GPU op makes the images in device memory from the inputs
   * and keeps them there for the level, so that they never come back to
   * the host. The inputs may be device arrays (`in_device`; a CPU run gets
   * host copies, the dispatcher's slots) or held on the device
   * (`resident`). */
  accel__reg_pyramid_job *make[2];
  /* Without make[0]: the device copy of `fixed` that the registration
   * holds (a GPU op reads it in place instead of uploading it), or NULL. */
  const void *fixed_resident;
} accel__reg_level_job;

/* Warp one image: out(r, c) = in(T(x0 + c, y0 + r)). `in` and `out` are
 * validated 2-D or 3-D (channels last) arrays of U8, U16 or F32 with the
 * same channels; `coef` (cubic only) holds rows coef_y0 .. coef_y0 +
 * coef_rows - 1 of in's B-spline coefficients, F32 (coef_rows, W, C)
 * contiguous: every row the job's output can read (warp.c cuts large host
 * images into bands of output rows, each with the coefficients of the
 * moving rows it reaches), or is NULL for a cubic job with a device layer:
 * the op then makes the whole layer's coefficients itself (the GPU on the
 * device, the CPU from its host copy). */
typedef struct accel__reg_warp_job {
  accel__reg_xform xf;
  const accel_array *in;
  const accel_array *out;
  const float *coef;
  int64_t coef_y0, coef_rows;
  accel_reg_interp interp;
  double fill;
  int64_t x0, y0;
  int64_t tile; /* tile side, > 0 */
  /* Progress (NULL: none): called from the calling thread with base + span
   * times the fraction of the job done; nonzero cancels the job
   * (ACCEL_ERR_CANCELLED). */
  accel_progress_fn progress;
  void *progress_user;
  double progress_base, progress_span;
  /* 1: `in` / `out` is device memory (C-contiguous): a GPU op reads and
   * writes it in place, a CPU run gets host copies (the dispatcher's
   * slots). */
  int32_t in_device, out_device;
} accel__reg_warp_job;

/* The coarse pre-alignment (lib/reg/prealign.h): the rigid transform, or
 * translation (mode 1; angle 0), that best maps `fixed` onto `moving` by
 * FFT phase correlation, in LEVEL pixels: T(q) = R(angle) (q - centre) +
 * centre + (tx, ty), moving(T(q)) ~ fixed(q). Level images are F32,
 * contiguous, already checked (finite, not constant). */
typedef struct accel__reg_prealign_job {
  const float *fixed;
  int64_t fixed_width, fixed_height;
  const float *moving;
  int64_t moving_width, moving_height;
  int32_t mode;     /* 1 translation, 2 translation and rotation */
  double centre[2]; /* the centre of rotation, level pixels */
  double result[3]; /* out: angle (radians), tx, ty (level pixels) */
} accel__reg_prealign_job;

typedef struct accel__reg_ops {
  accel_status (*pyramid)(accel__call *call, accel__reg_pyramid_job *job);
  accel_status (*level)(accel__call *call, accel__reg_level_job *job);
  accel_status (*warp)(accel__call *call, accel__reg_warp_job *job);
  accel_status (*prealign)(accel__call *call, accel__reg_prealign_job *job);
  accel_status (*finite)(accel__call *call, accel__reg_finite_job *job);
  accel_status (*hold)(accel__call *call, accel__reg_hold_job *job);
} accel__reg_ops;

#ifdef __cplusplus
}
#endif

#endif
