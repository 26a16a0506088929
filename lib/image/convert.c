/* Pillow 9.4's convert('L') and convert('RGB') for each decoded mode. */
#include "image/convert.h"

#include "image/pillow.h"

static inline uint8_t clip_i32(int32_t v) { return (uint8_t)(v <= 0 ? 0 : v >= 255 ? 255 : v); }

/* A palette entry; indices past the palette read Pillow's default gray ramp. */
static inline const uint8_t *pal(const accel__image_header *h, uint8_t i, uint8_t ramp[3]) {
  if (i < h->palette_len) return h->palette[i];
  ramp[0] = ramp[1] = ramp[2] = i;
  return ramp;
}

bool accel__mode_is_gray(accel__mode mode) {
  return mode == ACCEL__MODE_1 || mode == ACCEL__MODE_L || mode == ACCEL__MODE_LA || mode == ACCEL__MODE_I;
}

void accel__row_to_gray(const accel__image_header *h, const void *row, int64_t w, uint8_t *out) {
  const uint8_t *p = row;
  uint8_t ramp[3];
  switch (h->mode) {
  case ACCEL__MODE_1:
  case ACCEL__MODE_L:
    for (int64_t x = 0; x < w; x++) out[x] = p[x];
    break;
  case ACCEL__MODE_LA:
    for (int64_t x = 0; x < w; x++) out[x] = p[2 * x];
    break;
  case ACCEL__MODE_I: {
    const int32_t *v = row;
    for (int64_t x = 0; x < w; x++) out[x] = clip_i32(v[x]);
    break;
  }
  case ACCEL__MODE_P:
    for (int64_t x = 0; x < w; x++) {
      const uint8_t *c = pal(h, p[x], ramp);
      out[x] = accel__luma(c[0], c[1], c[2]);
    }
    break;
  case ACCEL__MODE_RGB:
    for (int64_t x = 0; x < w; x++) out[x] = accel__luma(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
    break;
  case ACCEL__MODE_RGBA:
    for (int64_t x = 0; x < w; x++) out[x] = accel__luma(p[4 * x], p[4 * x + 1], p[4 * x + 2]);
    break;
  case ACCEL__MODE_CMYK:
    for (int64_t x = 0; x < w; x++) {
      const uint8_t *c = p + 4 * x;
      out[x] = accel__luma(accel__cmyk_channel(c[0], c[3]), accel__cmyk_channel(c[1], c[3]),
                           accel__cmyk_channel(c[2], c[3]));
    }
    break;
  }
}

void accel__row_to_rgb(const accel__image_header *h, const void *row, int64_t w, uint8_t *out) {
  const uint8_t *p = row;
  uint8_t ramp[3];
  for (int64_t x = 0; x < w; x++) {
    uint8_t *o = out + 3 * x;
    switch (h->mode) {
    case ACCEL__MODE_1:
    case ACCEL__MODE_L: o[0] = o[1] = o[2] = p[x]; break;
    case ACCEL__MODE_LA: o[0] = o[1] = o[2] = p[2 * x]; break;
    case ACCEL__MODE_I: o[0] = o[1] = o[2] = clip_i32(((const int32_t *)row)[x]); break;
    case ACCEL__MODE_P: {
      const uint8_t *c = pal(h, p[x], ramp);
      o[0] = c[0];
      o[1] = c[1];
      o[2] = c[2];
      break;
    }
    case ACCEL__MODE_RGB: o[0] = p[3 * x]; o[1] = p[3 * x + 1]; o[2] = p[3 * x + 2]; break;
    case ACCEL__MODE_RGBA: o[0] = p[4 * x]; o[1] = p[4 * x + 1]; o[2] = p[4 * x + 2]; break;
    case ACCEL__MODE_CMYK:
      o[0] = accel__cmyk_channel(p[4 * x], p[4 * x + 3]);
      o[1] = accel__cmyk_channel(p[4 * x + 1], p[4 * x + 3]);
      o[2] = accel__cmyk_channel(p[4 * x + 2], p[4 * x + 3]);
      break;
    }
  }
}
