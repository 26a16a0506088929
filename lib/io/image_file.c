/* One loader for the image files of registration: TIFF with its samples as
 * stored, PNG and JPEG through the decoders that reproduce Pillow. */
#include "image/convert.h"
#include "io/decode.h"
#include "io/file.h"

#include "accel/io.h"

#include <stdlib.h>
#include <string.h>

typedef struct load_sink {
  accel__image_header hdr;
  accel_buffer *buf;
  uint8_t *px;
  int channels; /* 1 gray (U8, or U16 for mode I), 3 RGB */
} load_sink;

static accel_status on_begin(void *user, const accel__image_header *hdr, char *why) {
  load_sink *c = user;
  c->hdr = *hdr;
  c->channels = accel__mode_is_gray(hdr->mode) ? 1 : 3;
  const int64_t shape[3] = {hdr->height, hdr->width, 3};
  const accel_dtype dtype = hdr->mode == ACCEL__MODE_I ? ACCEL_DTYPE_U16 : ACCEL_DTYPE_U8;
  if (accel_buffer_create(dtype, c->channels == 3 ? 3 : 2, shape, &c->buf)) {
    accel__why(why, "out of memory for a %lld x %lld image", (long long)hdr->width, (long long)hdr->height);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_array v;
  accel_buffer_view(c->buf, &v);
  c->px = v.data;
  return ACCEL_OK;
}

static void on_row(void *user, int64_t y, const void *pixels) {
  load_sink *c = user;
  const int64_t w = c->hdr.width;
  if (c->hdr.mode == ACCEL__MODE_I) { /* 16-bit PNG gray: the values as stored */
    uint16_t *out = (uint16_t *)(void *)c->px + y * w;
    const int32_t *in = pixels;
    for (int64_t x = 0; x < w; x++) out[x] = (uint16_t)(in[x] < 0 ? 0 : in[x] > 65535 ? 65535 : in[x]);
  } else if (c->channels == 3) {
    accel__row_to_rgb(&c->hdr, pixels, w, c->px + (size_t)(y * w * 3));
  } else {
    accel__row_to_gray(&c->hdr, pixels, w, c->px + (size_t)(y * w));
  }
}

/* TIFF's four signatures: classic and BigTIFF, either byte order. */
static bool is_tiff(const uint8_t *h, size_t n) {
  if (n < 4) return false;
  return (h[0] == 'I' && h[1] == 'I' && (h[2] == 42 || h[2] == 43) && h[3] == 0) ||
         (h[0] == 'M' && h[1] == 'M' && h[2] == 0 && (h[3] == 42 || h[3] == 43));
}

accel_status accel_image_load(accel_ctx *ctx, const char *path, accel_buffer **out) {
  REQUIRE(ctx, path && out, ACCEL_ERR_INVALID_ARG, "path and out are required");
  *out = NULL;
  FILE *f;
  int64_t size;
  accel_status s = accel__open_read(ctx, __func__, path, &f, &size);
  if (s) return s;
  uint8_t head[8];
  const size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  if (is_tiff(head, n)) return accel_tiff_load_image(ctx, path, out);
  char why[ACCEL_REASON_MAX] = "";
  uint8_t *data = NULL;
  size_t len = 0;
  if ((s = accel__read_file(path, &data, &len, why))) return FAIL(ctx, s, "%s: %s", path, why);
  const accel__decode_options options = {.max_pixels = accel__ctx_max_pixels(ctx)};
  load_sink c = {0};
  const accel__decode_sink sink = {on_begin, on_row, &c};
  s = accel__decode(data, len, &options, &sink, why);
  free(data);
  if (s) {
    const bool began = c.buf != NULL;
    accel_buffer_destroy(c.buf);
    if (s == ACCEL_ERR_FORMAT && !began)
      return FAIL(ctx, s, "%s is neither TIFF, PNG nor JPEG, or a variant these readers refuse (%s)", path, why);
    return FAIL(ctx, s, "%s: %s", path, why);
  }
  *out = c.buf;
  return ACCEL_OK;
}
