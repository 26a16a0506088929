/* lib/image/ops.h - the image domain's part of the backend vtable. */
#ifndef ACCEL_IMAGE_OPS_H
#define ACCEL_IMAGE_OPS_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel__image_ops {
  /* src: U8 (H, W, C), C in 1..4, any strides; dst: U8 (H, W), any strides.
   * Both validated and non-overlapping; H, W > 0. */
  accel_status (*to_gray)(accel__call *call, const accel_array *src, const accel_array *dst);
} accel__image_ops;

ACCEL__DECLARE_OPS(accel__image_ops, image);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IMAGE_OPS_H */
