/*
 * PNG decoding with libpng into the modes Pillow 9.4's PNG plugin produces:
 *
 *   gray 1 bit -> "1" (0/255)     gray 2/4 bit -> "L" (v*85, v*17)   gray 8 -> "L"
 *   gray 16    -> "I" (the 16-bit value)
 *   gray+alpha 8 -> "LA"          gray+alpha 16 -> "RGBA" (high bytes, gray copied to RGB)
 *   RGB 8/16   -> "RGB"  (16-bit: high byte)   RGBA 8/16 -> "RGBA" (high byte)
 *   palette 1/2/4/8 -> "P" with the PLTE colors
 *
 * tRNS never changes the pixels or the mode (Pillow keeps it as metadata).
 * Interlaced (Adam7) images are deinterlaced by libpng.
 *
 * Pillow's robustness rules, reproduced: CRCs of the chunks before the image
 * data are checked, those of IDAT and later chunks are not; image data that
 * stops early is an error, but a compressed stream that ends cleanly (zlib's
 * end marker) on a row boundary after at least one row leaves the remaining
 * rows 0 (Pillow's ZipDecode looks for the end only after a whole row); after
 * the image, a chunk whose body is cut off is an error while an unreadable
 * chunk header, a missing IEND or stray data (an IDAT after the image) ends
 * the file quietly.
 *
 * The pixel limit is checked from the header, before libpng allocates its
 * row buffers.
 */
#include "io/decode.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct png_src {
  const uint8_t *data;
  size_t size, pos;
  bool after_image;    /* all rows delivered; reading the trailing chunks */
  bool truncated_body; /* a trailing chunk's body ran past the end of the file */
  char message[200];
} png_src;

static void on_read(png_structp png, png_bytep out, size_t n) {
  png_src *s = png_get_io_ptr(png);
  if (n > s->size - s->pos) {
    /* after the image, only a cut-off chunk body (not a chunk header) is an error */
    if (s->after_image && n != 8) s->truncated_body = true;
    png_error(png, "file is truncated");
  }
  memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

static void on_error(png_structp png, png_const_charp msg) {
  png_src *s = png_get_error_ptr(png);
  snprintf(s->message, sizeof s->message, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

/* Everything the decoder changes after setjmp lives here, on the heap: after
 * a longjmp, automatic variables modified since setjmp are indeterminate. */
typedef struct png_state {
  png_src src;
  accel__image_header hdr;
  uint8_t *image, *out;
  png_bytep *rowp;
  accel_status status;
  int passes;
  bool began;
  int64_t rows_done; /* rows handed to the sink */
  size_t in_stride;
  size_t raw_row_bytes; /* a row in the compressed stream: filter byte + packed pixels */
  bool gray16_to_i, ga16_to_rgba;
} png_state;

/* One decoded row (libpng's layout) to the sink (the mode's layout). */
static void emit(png_state *st, const accel__decode_sink *sink, int64_t y, const uint8_t *r) {
  const int64_t w = st->hdr.width;
  const void *pixels = r;
  if (st->gray16_to_i) {
    const uint16_t *sv = (const uint16_t *)r;
    int32_t *d = (int32_t *)st->out;
    for (int64_t x = 0; x < w; x++) d[x] = sv[x];
    pixels = st->out;
  } else if (st->ga16_to_rgba) {
    for (int64_t x = 0; x < w; x++) {
      st->out[4 * x] = st->out[4 * x + 1] = st->out[4 * x + 2] = r[2 * x];
      st->out[4 * x + 3] = r[2 * x + 1];
    }
    pixels = st->out;
  }
  sink->row(sink->user, y, pixels);
  st->rows_done = y + 1;
}

static accel_status fail(png_state *st, png_structp png, accel_status status, char *why, const char *msg) {
  accel__why(why, "%s", msg);
  st->status = status;
  png_longjmp(png, 1);
}

static void read_image(png_state *st, png_structp png, png_infop info, const accel__decode_options *opt,
                       const accel__decode_sink *sink, char *why) {
  png_set_read_fn(png, &st->src, on_read);
  png_set_benign_errors(png, 1);
  png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT); /* before the image data */
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);

  png_uint_32 w, h;
  int depth, ctype, interlace;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
  /* before png_read_update_info, which allocates rows of the declared width */
  const uint64_t pixels = (uint64_t)w * h;
  if (opt->max_pixels && pixels > opt->max_pixels) {
    char msg[ACCEL_REASON_MAX];
    snprintf(msg, sizeof msg, "%ux%u is %.1f megapixels, over the limit of %.1f", (unsigned)w, (unsigned)h,
             (double)pixels / 1e6, (double)opt->max_pixels / 1e6);
    fail(st, png, ACCEL_ERR_LIMIT, why, msg);
  }
  st->raw_row_bytes = ((uint64_t)w * (uint64_t)png_get_channels(png, info) * (uint64_t)depth + 7) / 8 + 1;
  accel__image_header *hdr = &st->hdr;
  hdr->format = 'P';
  hdr->width = w;
  hdr->height = h;
  hdr->jpeg_scale_denom = 1;
  switch (ctype) {
  case PNG_COLOR_TYPE_GRAY:
    if (depth == 16) {
      hdr->mode = ACCEL__MODE_I;
      st->gray16_to_i = true;
    } else {
      hdr->mode = depth == 1 ? ACCEL__MODE_1 : ACCEL__MODE_L;
      if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    }
    break;
  case PNG_COLOR_TYPE_GRAY_ALPHA:
    hdr->mode = depth == 16 ? ACCEL__MODE_RGBA : ACCEL__MODE_LA;
    st->ga16_to_rgba = depth == 16;
    break;
  case PNG_COLOR_TYPE_RGB: hdr->mode = ACCEL__MODE_RGB; break;
  case PNG_COLOR_TYPE_RGB_ALPHA: hdr->mode = ACCEL__MODE_RGBA; break;
  case PNG_COLOR_TYPE_PALETTE: {
    hdr->mode = ACCEL__MODE_P;
    png_colorp pal = NULL;
    int n = 0;
    if (png_get_PLTE(png, info, &pal, &n) && pal) {
      hdr->palette_len = n > 256 ? 256 : n;
      for (int i = 0; i < hdr->palette_len; i++) {
        hdr->palette[i][0] = pal[i].red;
        hdr->palette[i][1] = pal[i].green;
        hdr->palette[i][2] = pal[i].blue;
      }
    }
    if (depth < 8) png_set_packing(png);
    break;
  }
  default: fail(st, png, ACCEL_ERR_DECODE, why, "PNG: invalid color type");
  }
  if (depth == 16) {
    if (st->gray16_to_i) png_set_swap(png); /* big-endian samples to host order */
    else png_set_strip_16(png);             /* Pillow keeps the high byte */
  }
  st->passes = interlace != PNG_INTERLACE_NONE ? png_set_interlace_handling(png) : 1;
  png_read_update_info(png, info);
  png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE); /* IDAT and after: unchecked */

  accel_status s = sink->begin(sink->user, hdr, why);
  if (s) {
    st->status = s;
    png_longjmp(png, 1);
  }
  st->began = true;

  st->in_stride = png_get_rowbytes(png, info);
  size_t out_stride = (size_t)w * (size_t)accel__mode_bpp(hdr->mode);
  if ((st->gray16_to_i || st->ga16_to_rgba) && !(st->out = malloc(out_stride)))
    fail(st, png, ACCEL_ERR_OUT_OF_MEMORY, why, "out of memory for PNG rows");
  /* interlaced: the whole image (libpng fills it pass by pass); else one row */
  size_t rows_needed = st->passes > 1 ? (size_t)h : 1;
  if (st->in_stride && rows_needed > SIZE_MAX / st->in_stride) fail(st, png, ACCEL_ERR_LIMIT, why, "PNG too large");
  /* zeroed: rows a cleanly ended stream never fills stay 0, as in Pillow */
  if (!(st->image = calloc(rows_needed, st->in_stride ? st->in_stride : 1)))
    fail(st, png, ACCEL_ERR_OUT_OF_MEMORY, why, "out of memory for the PNG image");
  if (st->passes > 1) {
    if (!(st->rowp = malloc(sizeof(png_bytep) * h))) fail(st, png, ACCEL_ERR_OUT_OF_MEMORY, why, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) st->rowp[y] = st->image + (size_t)y * st->in_stride;
    png_read_image(png, st->rowp);
    for (png_uint_32 y = 0; y < h; y++) emit(st, sink, y, st->rowp[y]);
  } else {
    for (png_uint_32 y = 0; y < h; y++) {
      memset(st->image, 0, st->in_stride);
      png_read_row(png, st->image, NULL);
      emit(st, sink, y, st->image);
    }
  }
  st->src.after_image = true;
  png_read_end(png, NULL);
}

/* Did the image data's zlib stream end cleanly (its end marker) exactly
 * after `rows` whole rows? Inflates the concatenated IDAT chunks, counting
 * the output. Only asked when libpng ran out of image data. */
static bool stream_ends_after_rows(const png_src *src, size_t raw_row_bytes, int64_t rows) {
  if (rows < 1 || src->size < 8) return false;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return false;
  uint8_t sink[16384];
  int ret = Z_OK;
  for (size_t at = 8; ret == Z_OK && src->size - at >= 12;) {
    const uint8_t *c = src->data + at;
    const uint32_t len = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
    if (len > src->size - at - 12) break;
    if (memcmp(c + 4, "IDAT", 4) == 0) {
      z.next_in = (Bytef *)(uintptr_t)(c + 8);
      z.avail_in = len;
      while (ret == Z_OK && z.avail_in) {
        z.next_out = sink;
        z.avail_out = sizeof sink;
        ret = inflate(&z, Z_NO_FLUSH);
        if (ret == Z_BUF_ERROR && z.avail_out) ret = Z_OK; /* needs the next chunk */
      }
    }
    at += (size_t)len + 12;
  }
  const bool ended = ret == Z_STREAM_END && z.total_out == (uLong)rows * raw_row_bytes;
  inflateEnd(&z);
  return ended;
}

accel_status accel__decode_png(const uint8_t *data, size_t size, const accel__decode_options *opt,
                               const accel__decode_sink *sink, char *why) {
  png_state *st = calloc(1, sizeof *st);
  if (!st) {
    accel__why(why, "out of memory for the PNG decoder");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  st->src.data = data;
  st->src.size = size;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st->src, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  accel_status result = ACCEL_OK;
  if (!png || !info) {
    accel__why(why, "out of memory for the PNG decoder");
    result = ACCEL_ERR_OUT_OF_MEMORY;
  } else if (setjmp(png_jmpbuf(png)) == 0) {
    read_image(st, png, info, opt, sink, why);
  } else if (st->status != ACCEL_OK) {
    result = st->status; /* ours: a limit, the sink, memory; why is set */
  } else if (st->src.after_image && !st->src.truncated_body) {
    result = ACCEL_OK; /* trailing chunks end quietly */
  } else if (st->began && st->passes == 1 && strcmp(st->src.message, "Not enough image data") == 0 &&
             stream_ends_after_rows(&st->src, st->raw_row_bytes, st->rows_done)) {
    /* the compressed stream ended early but cleanly after a whole row:
     * Pillow keeps the rows it has and leaves the others 0 */
    memset(st->image, 0, st->in_stride);
    for (int64_t y = st->rows_done; y < st->hdr.height; y++) emit(st, sink, y, st->image);
  } else {
    accel__why(why, "PNG: %s", st->src.message);
    result = ACCEL_ERR_DECODE;
  }
  png_destroy_read_struct(&png, &info, NULL);
  free(st->image);
  free(st->out);
  free(st->rowp);
  free(st);
  return result;
}
