/*
 * lib/image/pillow.h - Pillow 9.4's per-pixel arithmetic (internal; C and CUDA).
 *
 * Gray: convert('L'). RGB -> L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16;
 * "1"/"L"/"LA" keep their gray value; "P" uses its palette entry's RGB;
 * "I" clips to 0..255; "CMYK" goes through Pillow's CMYK -> RGB first:
 *   nk = 255 - K;  X' = clip8(nk - muldiv255(X, nk)),
 *   muldiv255(a, b) = (t = a*b + 128, ((t >> 8) + t) >> 8).
 * Palette indices past the palette read Pillow's default gray ramp (i, i, i).
 *
 * HSV: Pillow's rgb2hsv (which follows Python's colorsys), with its float
 * and double steps: hue and saturation scaled to 0..255 by truncation.
 */
#ifndef ACCEL_IMAGE_PILLOW_H
#define ACCEL_IMAGE_PILLOW_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACCEL__HD static inline __host__ __device__
#else
#define ACCEL__HD static inline
#endif

ACCEL__HD uint8_t accel__luma(unsigned r, unsigned g, unsigned b) {
  return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

ACCEL__HD uint8_t accel__cmyk_channel(unsigned x, unsigned k) {
  int nk = 255 - (int)k;
  int t = (int)x * nk + 128;
  int v = nk - (((t >> 8) + t) >> 8);
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Hue and saturation (0..255) of Pillow's convert('HSV'): float quotients,
 * the hue's double steps rounded back to float, truncation to 0..255.
 * Two exact shortcuts: only the two quotients the hue formula uses are
 * computed, and fmod(x, 1.0) for x in [5/6, 2) is x - 1 or x (exact by
 * Sterbenz's lemma). Verified against Pillow on all 2^24 colours. */
ACCEL__HD void accel__rgb_to_hs(unsigned r, unsigned g, unsigned b, uint8_t *hue, uint8_t *sat) {
  unsigned maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
  unsigned minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
  if (maxc == minc) {
    *hue = 0;
    *sat = 0;
    return;
  }
  const float span = (float)(maxc - minc);
  const float s = span / (float)maxc;
  float h;
  if (r == maxc) {
    h = (float)(maxc - b) / span - (float)(maxc - g) / span;
  } else if (g == maxc) {
    h = (float)(2.0 + (double)((float)(maxc - r) / span) - (double)((float)(maxc - b) / span));
  } else {
    h = (float)(4.0 + (double)((float)(maxc - g) / span) - (double)((float)(maxc - r) / span));
  }
  double x = (double)h / 6.0 + 1.0;
  h = (float)(x >= 1.0 ? x - 1.0 : x);
  int hi = (int)((double)h * 255.0), si = (int)((double)s * 255.0);
  *hue = (uint8_t)(hi < 0 ? 0 : hi > 255 ? 255 : hi);
  *sat = (uint8_t)(si < 0 ? 0 : si > 255 ? 255 : si);
}

#endif /* ACCEL_IMAGE_PILLOW_H */
