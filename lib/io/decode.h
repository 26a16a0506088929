/*
 * lib/io/decode.h - JPEG and PNG decoding into Pillow's image modes (internal).
 *
 * The decoders reproduce what Pillow 9.4 (with libjpeg-turbo and zlib) gets
 * when it opens a file, mode for mode, so that later conversions follow
 * Pillow's arithmetic exactly. Rows are handed to a sink one at a time, in
 * order, so consumers need not hold the decoded image.
 */
#ifndef ACCEL_IO_DECODE_H
#define ACCEL_IO_DECODE_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pillow's modes as its JPEG and PNG plugins produce them. */
typedef enum accel__mode {
  ACCEL__MODE_1 = 0,  /* 1 byte per pixel, 0 or 255 (Pillow stores bilevel pixels so) */
  ACCEL__MODE_L = 1,  /* gray */
  ACCEL__MODE_LA = 2, /* gray, alpha */
  ACCEL__MODE_P = 3,  /* palette index; the palette is in the header */
  ACCEL__MODE_RGB = 4,
  ACCEL__MODE_RGBA = 5,
  ACCEL__MODE_CMYK = 6,
  ACCEL__MODE_I = 7 /* 32-bit signed gray (16-bit PNG gray) */
} accel__mode;

/* Bytes per pixel of a mode's rows. */
int accel__mode_bpp(accel__mode mode);
/* Pillow's name of a mode ("RGB", ...). */
const char *accel__mode_name(accel__mode mode);

typedef struct accel__image_header {
  accel__mode mode;
  int64_t width, height;
  int palette_len;         /* entries in palette (P) */
  uint8_t palette[256][3]; /* RGB, unused entries zero */
  int format;              /* 'J' JPEG, 'P' PNG */
  int jpeg_scale_denom;    /* 1, or 2/4/8 when a DCT-scaled decode was asked */
} accel__image_header;

typedef struct accel__decode_sink {
  /* After the header, before any pixel: may refuse (e.g. a size limit) by
   * returning a status with a reason in why. */
  accel_status (*begin)(void *user, const accel__image_header *header, char *why);
  /* Rows in order y = 0, 1, ...; `pixels` holds width pixels of the mode. */
  void (*row)(void *user, int64_t y, const void *pixels);
  void *user;
} accel__decode_sink;

typedef struct accel__decode_options {
  uint64_t max_pixels; /* width * height above this: ACCEL_ERR_LIMIT */
  /* JPEG only: ask libjpeg for a DCT-scaled decode no smaller than these
   * (Pillow's draft() rule); 0 = full size. */
  int64_t draft_width, draft_height;
} accel__decode_options;

/* Decode an in-memory JPEG or PNG (sniffed from its signature). Returns
 * ACCEL_ERR_DECODE (corrupt or truncated), ACCEL_ERR_FORMAT (neither JPEG
 * nor PNG, or a variant Pillow does not open), ACCEL_ERR_LIMIT,
 * ACCEL_ERR_OUT_OF_MEMORY, or what begin() returned; the reason in why. */
accel_status accel__decode(const uint8_t *data, size_t size, const accel__decode_options *options,
                           const accel__decode_sink *sink, char *why);

accel_status accel__decode_jpeg(const uint8_t *data, size_t size, const accel__decode_options *options,
                                const accel__decode_sink *sink, char *why);
accel_status accel__decode_png(const uint8_t *data, size_t size, const accel__decode_options *options,
                               const accel__decode_sink *sink, char *why);

/* Read a whole file into memory (free with free()). ACCEL_ERR_IO on failure. */
accel_status accel__read_file(const char *path, uint8_t **data, size_t *size, char *why);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IO_DECODE_H */
