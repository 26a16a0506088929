/*
 * JPEG decoding with libjpeg-turbo, set up as Pillow 9.4 sets it up:
 * accurate integer IDCT (JDCT_ISLOW), fancy upsampling, output RGB for
 * 3-component files, gray for 1 component, and for 4 components CMYK that
 * Pillow reads as Adobe-inverted ("CMYK;I": every sample is 255 - v).
 * libjpeg's own color-space guess (JFIF, Adobe transform, component ids)
 * decides between YCbCr/RGB and YCCK/CMYK, as in Pillow.
 *
 * A file that ends before the image does is an error (Pillow raises "image
 * file is truncated"); libjpeg's other warnings are ignored, as Pillow
 * ignores them.
 */
#include "io/decode.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jerror.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} jpeg_err;

static void on_error(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  cinfo->err->format_message(cinfo, e->message);
  longjmp(e->jump, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;                      /* trace messages */
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) { /* the data ran out: truncated */
    jpeg_err *e = (jpeg_err *)cinfo->err;
    cinfo->err->format_message(cinfo, e->message);
    longjmp(e->jump, 1);
  }
}

/* Pillow's draft(): the largest of 8, 4, 2, 1 not above min(w // rw, h // rh). */
static int draft_denom(int64_t w, int64_t h, int64_t rw, int64_t rh) {
  if (rw <= 0 || rh <= 0) return 1;
  int64_t scale = w / rw < h / rh ? w / rw : h / rh;
  static const int denoms[] = {8, 4, 2, 1};
  for (int i = 0; i < 4; i++)
    if (scale >= denoms[i]) return denoms[i];
  return 1;
}

accel_status accel__decode_jpeg(const uint8_t *data, size_t size, const accel__decode_options *opt,
                                const accel__decode_sink *sink, char *why) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  /* volatile: modified after setjmp and read after a longjmp */
  uint8_t *volatile rows = NULL;
  volatile accel_status status = ACCEL_OK;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  if (setjmp(err.jump)) {
    if (status == ACCEL_OK) {
      accel__why(why, "JPEG: %s", err.message);
      status = ACCEL_ERR_DECODE;
    }
    jpeg_destroy_decompress(&cinfo);
    free(rows);
    return status;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) {
    accel__why(why, "JPEG: no image in the stream (tables only)");
    status = ACCEL_ERR_DECODE;
    longjmp(err.jump, 1);
  }

  accel__image_header hdr;
  memset(&hdr, 0, sizeof hdr);
  hdr.format = 'J';
  switch (cinfo.num_components) {
  case 1:
    hdr.mode = ACCEL__MODE_L;
    cinfo.out_color_space = JCS_GRAYSCALE;
    break;
  case 3:
    hdr.mode = ACCEL__MODE_RGB;
    cinfo.out_color_space = JCS_RGB;
    break;
  case 4:
    hdr.mode = ACCEL__MODE_CMYK;
    cinfo.out_color_space = JCS_CMYK;
    break;
  default:
    accel__why(why, "JPEG with %d components is not an image Pillow opens", cinfo.num_components);
    status = ACCEL_ERR_FORMAT;
    longjmp(err.jump, 1);
  }
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  hdr.jpeg_scale_denom = draft_denom(cinfo.image_width, cinfo.image_height, opt->draft_width, opt->draft_height);
  if (hdr.jpeg_scale_denom > 1) {
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned)hdr.jpeg_scale_denom;
  }
  uint64_t pixels = (uint64_t)cinfo.image_width * cinfo.image_height;
  if (opt->max_pixels && pixels > opt->max_pixels) {
    accel__why(why, "%ux%u is %.1f megapixels, over the limit of %.1f", cinfo.image_width, cinfo.image_height,
               (double)pixels / 1e6, (double)opt->max_pixels / 1e6);
    status = ACCEL_ERR_LIMIT;
    longjmp(err.jump, 1);
  }
  jpeg_start_decompress(&cinfo);
  hdr.width = cinfo.output_width;
  hdr.height = cinfo.output_height;
  if ((status = sink->begin(sink->user, &hdr, why)) != ACCEL_OK) longjmp(err.jump, 1);

  const int bpp = cinfo.output_components;
  const size_t stride = (size_t)cinfo.output_width * (size_t)bpp;
  const int batch = cinfo.rec_outbuf_height > 0 ? cinfo.rec_outbuf_height : 1;
  /* Every row starts 16 bytes past a 32-byte boundary: libjpeg-turbo's AVX2
   * colour converters write a row with non-temporal (streaming) stores when
   * it is 32-byte aligned, which sends it to DRAM just before the sink
   * reads it back; misaligned rows stay in the cache. */
  const size_t pitch = (stride + 31) / 32 * 32;
  rows = malloc(pitch * (size_t)batch + 64);
  if (!rows) {
    accel__why(why, "out of memory for JPEG rows");
    status = ACCEL_ERR_OUT_OF_MEMORY;
    longjmp(err.jump, 1);
  }
  uint8_t *first = (uint8_t *)(((uintptr_t)rows + 31) / 32 * 32) + 16;
  JSAMPROW ptrs[16];
  for (int i = 0; i < batch && i < 16; i++) ptrs[i] = first + (size_t)i * pitch;
  while (cinfo.output_scanline < cinfo.output_height) {
    int64_t y0 = cinfo.output_scanline;
    JDIMENSION got = jpeg_read_scanlines(&cinfo, ptrs, (JDIMENSION)(batch < 16 ? batch : 16));
    for (JDIMENSION i = 0; i < got; i++) {
      uint8_t *r = ptrs[i];
      if (hdr.mode == ACCEL__MODE_CMYK)
        for (size_t k = 0; k < stride; k++) r[k] = (uint8_t)(255 - r[k]);
      sink->row(sink->user, y0 + (int64_t)i, r);
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  free(rows);
  return ACCEL_OK;
}
