/* lib/image/convert.h - rows of a decoded image to gray or RGB with Pillow's
 * convert('L') / convert('RGB') arithmetic (internal). */
#ifndef ACCEL_IMAGE_CONVERT_H
#define ACCEL_IMAGE_CONVERT_H

#include "io/decode.h"

/* w pixels of `row` (in header->mode) to w gray bytes. */
void accel__row_to_gray(const accel__image_header *header, const void *row, int64_t w, uint8_t *out);
/* w pixels of `row` to w RGB triplets. */
void accel__row_to_rgb(const accel__image_header *header, const void *row, int64_t w, uint8_t *out);
/* w packed RGB pixels to gray (vectorized where the CPU allows). */
void accel__rgb_row_to_gray(const uint8_t *p, int64_t w, uint8_t *out);
/* Its vector paths, chosen at run time (AUTO: the fastest available); tests
 * force each in turn and compare them with the scalar formula. */
enum { ACCEL__GRAY_AUTO = 0, ACCEL__GRAY_SCALAR = 1, ACCEL__GRAY_AVX2 = 2, ACCEL__GRAY_AVX512 = 3 };
extern int accel__gray_path; /* a test switch: a path, or AUTO */
bool accel__gray_path_available(int path);
/* True if the mode's RGB is always gray (R = G = B): 1, L, LA, I. */
bool accel__mode_is_gray(accel__mode mode);

/* Decode a PNG or JPEG file as Pillow does, keeping what it is: gray (and
 * 16-bit PNG gray as U16, values as stored) as (H, W), everything else as
 * RGB (H, W, 3) U8. Failures are reported for `func`; *out is NULL then.
 * Bounded by the context's max_pixels (lib/image/decode_api.c). */
accel_status accel__image_decode_native(accel_ctx *ctx, const char *func, const char *path, accel_buffer **out);

#endif
