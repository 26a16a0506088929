/* Image API: argument checks, then the dispatcher. */
#include "core/internal.h"
#include "image/ops.h"

#include "accel/image.h"

typedef struct gray_job {
  accel_array src; /* (H, W, C) */
  accel_array dst; /* (H, W) */
} gray_job;

static int run_gray(const accel__backend *b, accel__call *call, void *job) {
  gray_job *j = job;
  if (!b->image || !b->image->to_gray) return ACCEL__NOT_IMPLEMENTED;
  return b->image->to_gray(call, &j->src, &j->dst);
}

accel_status accel_image_to_gray(accel_ctx *ctx, const accel_array *src, accel_array *dst) {
  static const char F[] = "accel_image_to_gray";
  if (!ctx) return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "%s: ctx is NULL", F);
  accel_status s = accel__array_check(ctx, F, "src", src);
  if (!s) s = accel__array_check(ctx, F, "dst", dst);
  if (s) return s;
  if (src->dtype != ACCEL_DTYPE_U8 || dst->dtype != ACCEL_DTYPE_U8)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: src and dst must be U8, got %s and %s", F,
                       accel__dtype_name(src->dtype), accel__dtype_name(dst->dtype));

  gray_job job = {.src = *src, .dst = *dst};
  if (src->ndim == 2) { /* (H, W) gray: view it as (H, W, 1) */
    job.src.ndim = 3;
    job.src.shape[2] = 1;
    job.src.strides[2] = 1;
  } else if (src->ndim != 3 || src->shape[2] < 1 || src->shape[2] > 4) {
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG,
                       "%s: src must be (H, W) or (H, W, C) with C in 1..4, got ndim %d%s", F, (int)src->ndim,
                       src->ndim == 3 ? " with another channel count" : "");
  }
  if (dst->ndim == 3 && dst->shape[2] == 1) {
    job.dst.ndim = 2;
  } else if (dst->ndim != 2) {
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: dst must be (H, W) or (H, W, 1)", F);
  }
  if (job.dst.shape[0] != job.src.shape[0] || job.dst.shape[1] != job.src.shape[1])
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: dst is %lldx%lld but src is %lldx%lld", F,
                       (long long)job.dst.shape[0], (long long)job.dst.shape[1], (long long)job.src.shape[0],
                       (long long)job.src.shape[1]);
  if (accel__arrays_overlap(&job.src, &job.dst))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: src and dst overlap", F);
  if (accel__array_count(&job.dst) == 0) return ACCEL_OK;
  return accel__dispatch(ctx, "image.gray", run_gray, &job);
}
