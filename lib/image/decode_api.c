/* Public decoding: a file or buffer to Pillow's gray or RGB. */
#include "image/convert.h"

#include "accel/image.h"

#include <stdlib.h>
#include <string.h>

enum { DECODE_OPTIONS_V1_SIZE = sizeof(accel_decode_options), IMAGE_INFO_V1_SIZE = sizeof(accel_image_info) };

accel_status accel_decode_options_init(accel_decode_options *o, size_t struct_size) {
  static const accel_decode_options DEFAULTS = {.target = ACCEL_DECODE_RGB};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, DECODE_OPTIONS_V1_SIZE);
}

accel_status accel_image_info_init(accel_image_info *info, size_t struct_size) {
  return accel__versioned_init(__func__, info, struct_size, NULL, sizeof *info, IMAGE_INFO_V1_SIZE);
}

const char *accel_image_mode_name(accel_image_mode mode) { return accel__mode_name((accel__mode)mode); }

typedef struct decode_ctx {
  accel_decode_target target;
  bool native; /* accel__image_decode_native: gray or RGB as the file is, 16-bit gray kept */
  accel__image_header hdr;
  accel_buffer *buf;
  uint8_t *px;
  int channels;
} decode_ctx;

static accel_status on_begin(void *user, const accel__image_header *hdr, char *why) {
  decode_ctx *c = user;
  c->hdr = *hdr;
  const bool rgb = c->native ? !accel__mode_is_gray(hdr->mode) : c->target == ACCEL_DECODE_RGB;
  c->channels = rgb ? 3 : 1;
  const accel_dtype dtype = c->native && hdr->mode == ACCEL__MODE_I ? ACCEL_DTYPE_U16 : ACCEL_DTYPE_U8;
  int64_t shape[3] = {hdr->height, hdr->width, 3};
  if (accel_buffer_create(dtype, rgb ? 3 : 2, shape, &c->buf)) {
    accel__why(why, "out of memory for a %lldx%lld image", (long long)hdr->width, (long long)hdr->height);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_array v;
  accel_buffer_view(c->buf, &v);
  c->px = v.data;
  return ACCEL_OK;
}

static void on_row(void *user, int64_t y, const void *pixels) {
  decode_ctx *c = user;
  const int64_t w = c->hdr.width;
  if (c->native && c->hdr.mode == ACCEL__MODE_I) { /* 16-bit PNG gray: the values as stored */
    uint16_t *out = (uint16_t *)(void *)c->px + y * w;
    const int32_t *in = pixels;
    for (int64_t x = 0; x < w; x++) out[x] = (uint16_t)(in[x] < 0 ? 0 : in[x] > 65535 ? 65535 : in[x]);
  } else if (c->channels == 3) {
    accel__row_to_rgb(&c->hdr, pixels, w, c->px + (size_t)(y * w * 3));
  } else {
    accel__row_to_gray(&c->hdr, pixels, w, c->px + (size_t)(y * w));
  }
}

/* Read `path` (when not NULL) or take data[0, size), and decode it into c. */
static accel_status run_decode(const char *path, const void *data, size_t size, uint64_t max_pixels, decode_ctx *c,
                               char *why) {
  const accel__decode_options dopt = {.max_pixels = max_pixels};
  const accel__decode_sink sink = {on_begin, on_row, c};
  uint8_t *file = NULL;
  accel_status s = ACCEL_OK;
  if (path) {
    s = accel__read_file(path, &file, &size, why);
    data = file;
  }
  if (!s) s = accel__decode(data, size, &dopt, &sink, why);
  free(file);
  return s;
}

accel_status accel__image_decode_native(accel_ctx *ctx, const char *func, const char *path, accel_buffer **out) {
  *out = NULL;
  decode_ctx c = {.native = true};
  char why[ACCEL_REASON_MAX] = "";
  const accel_status s = run_decode(path, NULL, 0, accel__ctx_max_pixels(ctx), &c, why);
  if (s) {
    const bool began = c.buf != NULL;
    accel_buffer_destroy(c.buf);
    if (s == ACCEL_ERR_FORMAT && !began)
      return accel__fail_in(ctx, func, s, "%s is neither TIFF, PNG nor JPEG, or a variant these readers refuse (%s)",
                            path, why);
    return accel__fail_in(ctx, func, s, "%s: %s", path, why);
  }
  *out = c.buf;
  return ACCEL_OK;
}

static accel_status decode(accel_ctx *ctx, const char *func, const char *path, const void *data, size_t size,
                           const accel_decode_options *in, accel_buffer **out, accel_image_info *info) {
  if (!out) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  accel_decode_options o;
  accel_decode_options_init(&o, sizeof o);
  if (in) {
    accel_status s = accel__versioned_in(ctx, func, "options", in, &o, sizeof o, DECODE_OPTIONS_V1_SIZE);
    if (s) return s;
  }
  if (o.target != ACCEL_DECODE_GRAY && o.target != ACCEL_DECODE_RGB)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown target %d", (int)o.target);
  if (info && info->struct_size < IMAGE_INFO_V1_SIZE)
    return accel__fail_in(ctx, func, ACCEL_ERR_VERSION, "info->struct_size too small; call accel_image_info_init");
  uint64_t limit = o.max_pixels ? o.max_pixels : 256000000, ctx_limit = accel__ctx_max_pixels(ctx);
  decode_ctx c = {.target = o.target};
  char why[ACCEL_REASON_MAX] = "";
  const accel_status s = run_decode(path, data, size, limit < ctx_limit ? limit : ctx_limit, &c, why);
  if (s) {
    accel_buffer_destroy(c.buf);
    return accel__fail_in(ctx, func, s, "%s%s%s", path ? path : "", path ? ": " : "", why);
  }
  if (info) {
    accel_image_info i;
    accel_image_info_init(&i, sizeof i);
    i.format = c.hdr.format == 'J' ? ACCEL_IMAGE_FORMAT_JPEG : ACCEL_IMAGE_FORMAT_PNG;
    i.mode = (accel_image_mode)c.hdr.mode;
    i.width = c.hdr.width;
    i.height = c.hdr.height;
    accel__versioned_out(ctx, func, "info", info, &i, sizeof i, IMAGE_INFO_V1_SIZE);
  }
  *out = c.buf;
  return ACCEL_OK;
}

accel_status accel_image_decode_file(accel_ctx *ctx, const char *path, const accel_decode_options *options,
                                     accel_buffer **out, accel_image_info *info) {
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  return decode(ctx, __func__, path, NULL, 0, options, out, info);
}

accel_status accel_image_decode_buffer(accel_ctx *ctx, const void *data, size_t size,
                                       const accel_decode_options *options, accel_buffer **out,
                                       accel_image_info *info) {
  if (!data && size) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "data is NULL");
  return decode(ctx, __func__, NULL, data, size, options, out, info);
}
