/* Image API: argument checks, then the dispatcher. */
#include "core/internal.h"
#include "image/ops.h"

#include "accel/image.h"

typedef struct gray_job {
  accel_array src; /* (H, W, C) */
  accel_array dst; /* (H, W) */
} gray_job;

ACCEL__STAGE_FN(run_gray, image, to_gray, &((gray_job *)job)->src, &((gray_job *)job)->dst)

accel_status accel_image_to_gray(accel_ctx *ctx, const accel_array *src, accel_array *dst) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_status s = accel__array_check(ctx, __func__, "src", src);
  if (!s) s = accel__array_check(ctx, __func__, "dst", dst);
  if (s) return s;
  if (src->dtype != ACCEL_DTYPE_U8 || dst->dtype != ACCEL_DTYPE_U8)
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "src and dst must be U8, got %s and %s", accel__dtype_name(src->dtype),
                accel__dtype_name(dst->dtype));

  gray_job job = {.src = *src, .dst = *dst};
  if (src->ndim == 2) { /* (H, W) gray: view it as (H, W, 1) */
    job.src.ndim = 3;
    job.src.shape[2] = 1;
    job.src.strides[2] = 1;
  } else if (src->ndim != 3 || src->shape[2] < 1 || src->shape[2] > 4) {
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "src must be (H, W) or (H, W, C) with C in 1..4, got ndim %d%s",
                (int)src->ndim, src->ndim == 3 ? " with another channel count" : "");
  }
  if (dst->ndim == 3 && dst->shape[2] == 1) {
    job.dst.ndim = 2;
  } else if (dst->ndim != 2) {
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "dst must be (H, W) or (H, W, 1)");
  }
  if (job.dst.shape[0] != job.src.shape[0] || job.dst.shape[1] != job.src.shape[1])
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "dst is %lldx%lld but src is %lldx%lld", (long long)job.dst.shape[0],
                (long long)job.dst.shape[1], (long long)job.src.shape[0], (long long)job.src.shape[1]);
  if (accel__arrays_overlap(&job.src, &job.dst)) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "src and dst overlap");
  if (accel__array_count(&job.dst) == 0) return ACCEL_OK;
  return accel__dispatch(ctx, "image.gray", run_gray, &job);
}
