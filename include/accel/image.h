/*
 * accel/image.h - image operations on host arrays.
 *
 * Stage names (see accel_ctx_stats_find): "image.gray".
 */
#ifndef ACCEL_IMAGE_H
#define ACCEL_IMAGE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convert an 8-bit image to 8-bit gray with Pillow's exact arithmetic for
 * Image.convert('L') (ITU-R 601-2 luma in 16-bit fixed point):
 *
 *   L = (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16
 *
 * src: ACCEL_DTYPE_U8, shape (H, W) gray (copied unchanged), or (H, W, C)
 *      with C = 1 (gray), 2 (gray + alpha: the gray channel is kept),
 *      3 (RGB) or 4 (RGBA: alpha is ignored, as Pillow ignores it).
 * dst: ACCEL_DTYPE_U8, shape (H, W) or (H, W, 1); the caller's memory.
 * Any strides (negative too) on both sides; src and dst must not overlap.
 *
 * Runs on the context's backend (stage "image.gray"); a GPU failure follows
 * the context's fallback policy. Empty images (H or W = 0) succeed.
 * Errors: ACCEL_ERR_INVALID_ARG for a NULL pointer, a dtype other than U8,
 * a shape that is not one of the above or does not match between src and
 * dst, NULL data with a nonzero size, or overlapping arrays. */
ACCEL_API accel_status accel_image_to_gray(accel_ctx *ctx, const accel_array *src,
                                           accel_array *dst);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IMAGE_H */
