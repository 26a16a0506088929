/*
 * accel/image.h - image operations on host arrays.
 *
 * Stage names (see accel_ctx_stats_find): "image.gray".
 *
 * Decoding follows Pillow 9.4 (libjpeg-turbo, libpng) so that pixel values
 * are the ones Python users get from PIL.Image.open(path).convert(...):
 *  - JPEG: accurate integer IDCT, fancy upsampling; 1 component is gray,
 *    3 are RGB (YCbCr converted by libjpeg), 4 are CMYK read as Adobe
 *    inverted CMYK (YCCK converted by libjpeg). EXIF orientation is not
 *    applied (neither does Image.open). A file that ends early is an error.
 *  - PNG: every colour type and bit depth, palette (+tRNS), gray + alpha,
 *    16-bit, Adam7. 16-bit RGB(A) keeps the high byte of each sample;
 *    16-bit gray is Pillow's mode "I", which convert('L') clips to 255.
 *    Transparency (tRNS) does not change pixel values.
 *  - Gray is Pillow's convert('L') of the image's mode (CMYK through RGB);
 *    RGB is convert('RGB').
 *
 * Threads: every function may be called from several threads at once, with
 * one context or several (core.h has the general rules).
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
 * the context's fallback policy. Empty images (H or W = 0) succeed without
 * running the stage. Errors: ACCEL_ERR_INVALID_ARG for a NULL pointer (ctx
 * included), a malformed array, a dtype other than U8, a shape that is not
 * one of the above or does not match between src and dst, or overlapping
 * arrays; under ACCEL_FALLBACK_DENY the GPU's failure (core.h). dst is
 * unspecified after a failure. */
ACCEL_API accel_status accel_image_to_gray(accel_ctx *ctx, const accel_array *src, accel_array *dst);

/* Pillow's mode of a decoded file (what PIL.Image.open reports). */
typedef enum accel_image_mode {
  ACCEL_IMAGE_MODE_1 = 0, /* bilevel */
  ACCEL_IMAGE_MODE_L = 1,
  ACCEL_IMAGE_MODE_LA = 2,
  ACCEL_IMAGE_MODE_P = 3, /* palette */
  ACCEL_IMAGE_MODE_RGB = 4,
  ACCEL_IMAGE_MODE_RGBA = 5,
  ACCEL_IMAGE_MODE_CMYK = 6,
  ACCEL_IMAGE_MODE_I = 7 /* 32-bit integer gray (16-bit PNG gray) */
} accel_image_mode;

typedef enum accel_image_format { ACCEL_IMAGE_FORMAT_JPEG = 1, ACCEL_IMAGE_FORMAT_PNG = 2 } accel_image_format;

typedef enum accel_decode_target {
  ACCEL_DECODE_GRAY = 0, /* U8 (H, W): convert('L') */
  ACCEL_DECODE_RGB = 1   /* U8 (H, W, 3): convert('RGB') */
} accel_decode_target;

typedef struct accel_decode_options {
  uint32_t struct_size;       /* set by accel_decode_options_init */
  accel_decode_target target; /* default ACCEL_DECODE_RGB */
  /* More pixels than this fails with ACCEL_ERR_LIMIT before decoding.
   * 0 = default, 256 000 000; never more than the context's max_pixels. */
  uint64_t max_pixels;
} accel_decode_options;

ACCEL_API accel_status accel_decode_options_init(accel_decode_options *options, size_t struct_size);

typedef struct accel_image_info {
  uint32_t struct_size; /* set by accel_image_info_init */
  accel_image_format format;
  accel_image_mode mode; /* Pillow's mode of the file */
  int64_t width, height;
} accel_image_info;

ACCEL_API accel_status accel_image_info_init(accel_image_info *info, size_t struct_size);
/* "1", "L", "LA", "P", "RGB", "RGBA", "CMYK", "I"; "?" otherwise. Static
 * storage. */
ACCEL_API const char *accel_image_mode_name(accel_image_mode mode);

/* Decode a JPEG or PNG file into a new buffer (free it with
 * accel_buffer_destroy). `options` may be NULL (RGB, default limit); `info`
 * may be NULL, else it must have been prepared by accel_image_info_init and
 * is written only on success. `ctx` may be NULL (errors then go to
 * accel_last_error(NULL); the context's pixel limit is taken as
 * ACCEL_DEFAULT_MAX_PIXELS). Host only (no stage). Errors:
 * ACCEL_ERR_INVALID_ARG (NULL path or out, an unknown target),
 * ACCEL_ERR_VERSION (options' or info's struct_size), ACCEL_ERR_IO (cannot
 * open or read the file), ACCEL_ERR_FORMAT (not JPEG/PNG, or a variant
 * Pillow cannot open), ACCEL_ERR_DECODE (corrupt or truncated),
 * ACCEL_ERR_LIMIT, ACCEL_ERR_OUT_OF_MEMORY. On failure *out is NULL, unless
 * a NULL argument left it alone. */
ACCEL_API accel_status accel_image_decode_file(accel_ctx *ctx, const char *path, const accel_decode_options *options,
                                               accel_buffer **out, accel_image_info *info);
/* The same for a file's bytes in memory (`data` may be NULL when size is
 * 0), read only during the call; ACCEL_ERR_IO does not occur. */
ACCEL_API accel_status accel_image_decode_buffer(accel_ctx *ctx, const void *data, size_t size,
                                                 const accel_decode_options *options, accel_buffer **out,
                                                 accel_image_info *info);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IMAGE_H */
