/* tools/accel/picture.h - pictures for people: RGB canvases, a small bitmap
 * font, colour maps, PNG encoding (libpng) and files written atomically. */
#ifndef ACCEL_CLI_PICTURE_H
#define ACCEL_CLI_PICTURE_H

#include "cli.h"

#include <stddef.h>
#include <stdint.h>

/* An 8-bit RGB image, rows top to bottom. */
typedef struct pic_image {
  int w, h;
  uint8_t *rgb; /* w * h * 3 */
} pic_image;

/* A w x h canvas filled with one colour; false (printed) when out of memory
 * or over 2^28 pixels. */
bool pic_create(pic_image *im, int w, int h, const uint8_t fill[3]);
void pic_free(pic_image *im);
/* The pixel at (x, y), or NULL outside. */
uint8_t *pic_at(pic_image *im, int x, int y);
/* A filled rectangle, clipped. */
void pic_rect(pic_image *im, int x, int y, int w, int h, const uint8_t c[3]);
/* Text in a 5 x 7 font, each font pixel a scale x scale square; glyphs are
 * 6 * scale apart. Characters: 0-9 . - = A-Z (others are left blank). */
void pic_text(pic_image *im, int x, int y, int scale, const char *s, const uint8_t c[3]);
/* The width text takes. */
int pic_text_width(const char *s, int scale);

/* The viridis colour map at t in [0, 1] (clamped). */
void pic_viridis(double t, uint8_t out[3]);
/* A bright colour for a label (neighbouring labels differ in hue). */
void pic_label_colour(uint32_t label, uint8_t out[3]);

/* The image as a PNG in memory (free() it); false when out of memory. */
bool pic_png_encode(const pic_image *im, uint8_t **data, size_t *size);
/* The image as a PNG file, written atomically; false (printed) on failure. */
bool pic_png_save(const char *cmd, const char *path, const pic_image *im);
/* Bytes into a file, under a temporary name beside it renamed when complete
 * and synced; false (printed, naming cmd) on failure. */
bool pic_write_file(const char *cmd, const char *path, const void *data, size_t size);
/* RFC 4648 base64 of data (a NUL-terminated string to free()), NULL when out of memory. */
char *pic_base64(const uint8_t *data, size_t size);

/* The integer factor that brings the largest of the sides to at least
 * `target` pixels: max(1, target / largest) (nearest-neighbour scaling). */
int pic_scale_for(int64_t largest, int target);

/* accel ct segment --preview: the mid-planes of a volume (z, y, x) side by
 * side, z = Z/2 (Y x X), y = Y/2 (Z x X), x = X/2 (Z x Y), each scaled by
 * s = pic_scale_for(max(Z, Y, X), 256) and PIC_GAP pixels apart, the gray
 * values stretched from the volume's minimum to its maximum, labels > 0
 * blended half and half with their colour. labels may be NULL. The size:
 * s * (2X + Y) + 2 * PIC_GAP wide, s * max(Y, Z) high. */
enum { PIC_GAP = 8 };
bool pic_ct_preview(const char *cmd, const char *path, const accel_array *volume, const accel_array *labels);

/* accel svf --preview: an F32 grid (rows, cols) through viridis from 0 to
 * 1, scaled by s = pic_scale_for(max(rows, cols), 256), with a legend on
 * the right (a colour bar from 0 at the bottom to 1 at the top, ticks 0.0,
 * 0.5 and 1.0, the label "SVF"). The size: s * cols + PIC_LEGEND wide,
 * max(s * rows, PIC_MIN_HEIGHT) high. */
enum { PIC_LEGEND = 64, PIC_MIN_HEIGHT = 128 };
bool pic_svf_preview(const char *cmd, const char *path, const accel_array *grid);

#endif
