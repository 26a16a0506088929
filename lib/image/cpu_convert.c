/* Pillow 9.4's convert('L') and convert('RGB') for each decoded mode. */
#include "image/convert.h"

#include "image/pillow.h"

static inline uint8_t clip_i32(int32_t v) { return (uint8_t)(v <= 0 ? 0 : v >= 255 ? 255 : v); }

/* RGB rows to gray, 8 pixels per step with AVX2 where the CPU has it: each
 * pixel's bytes spread to a 32-bit lane, then the exact integer formula. */
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static int64_t rgb_to_gray_avx2(const uint8_t *p, int64_t w, uint8_t *out) {
  const __m256i perm = _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6); /* lane 1 gets bytes 12..27 */
  const __m256i spread = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1, 0, 1, 2, -1, 3, 4, 5,
                                          -1, 6, 7, 8, -1, 9, 10, 11, -1);
  const __m256i ff = _mm256_set1_epi32(0xff), round = _mm256_set1_epi32(0x8000);
  const __m256i wr = _mm256_set1_epi32(19595), wg = _mm256_set1_epi32(38470), wb = _mm256_set1_epi32(7471);
  int64_t x = 0;
  /* 8 pixels read 32 bytes (24 used): stop while 8 more bytes remain in the row */
  for (; x + 11 <= w; x += 8) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + 3 * x));
    v = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, perm), spread);
    const __m256i r = _mm256_and_si256(v, ff), g = _mm256_and_si256(_mm256_srli_epi32(v, 8), ff),
                  b = _mm256_srli_epi32(v, 16);
    __m256i l = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(r, wr), _mm256_mullo_epi32(g, wg)),
                                 _mm256_add_epi32(_mm256_mullo_epi32(b, wb), round));
    l = _mm256_srli_epi32(l, 16);
    const __m128i l16 = _mm_packus_epi32(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1));
    _mm_storel_epi64((__m128i *)(void *)(out + x), _mm_packus_epi16(l16, l16));
  }
  return x;
}

/* 16 pixels per step with AVX-512 VBMI: vpermb spreads 48 bytes into 16
 * lanes (r | g << 8 | b << 16), the same integer formula on each. (GCC 12's
 * AVX-512 shift intrinsics pass an uninitialized vector as their unused
 * merge source, which it reports: silenced here only.) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t rgb_to_gray_avx512(const uint8_t *p, int64_t w,
                                                                                         uint8_t *out) {
  uint8_t order[64];
  for (int l = 0; l < 16; l++)
    for (int c = 0; c < 4; c++) order[4 * l + c] = (uint8_t)(c < 3 ? 3 * l + c : 0);
  const __m512i idx = _mm512_loadu_si512((const void *)order);
  const __m512i ff = _mm512_set1_epi32(0xff), round = _mm512_set1_epi32(0x8000);
  const __m512i wr = _mm512_set1_epi32(19595), wg = _mm512_set1_epi32(38470), wb = _mm512_set1_epi32(7471);
  int64_t x = 0;
  /* 16 pixels read 64 bytes (48 used): stop while 16 more bytes remain in the row */
  for (; 3 * x + 64 <= 3 * w; x += 16) {
    const __m512i v = _mm512_maskz_permutexvar_epi8((__mmask64)0x7777777777777777ULL, idx,
                                                    _mm512_loadu_si512((const void *)(p + 3 * x)));
    const __m512i r = _mm512_and_si512(v, ff), g = _mm512_and_si512(_mm512_srli_epi32(v, 8), ff),
                  b = _mm512_srli_epi32(v, 16);
    __m512i l = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(r, wr), _mm512_mullo_epi32(g, wg)),
                                 _mm512_add_epi32(_mm512_mullo_epi32(b, wb), round));
    _mm_storeu_si128((__m128i *)(void *)(out + x), _mm512_cvtepi32_epi8(_mm512_srli_epi32(l, 16)));
  }
  return x;
}
#pragma GCC diagnostic pop

bool accel__gray_path_available(int path) {
  switch (path) {
  case ACCEL__GRAY_SCALAR: return true;
  case ACCEL__GRAY_AVX2: return __builtin_cpu_supports("avx2");
  case ACCEL__GRAY_AVX512:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
  default: return false;
  }
}
#else
bool accel__gray_path_available(int path) { return path == ACCEL__GRAY_SCALAR; }
#endif

int accel__gray_path = ACCEL__GRAY_AUTO;

void accel__rgb_row_to_gray(const uint8_t *p, int64_t w, uint8_t *out) {
  int64_t x = 0;
#if defined(__x86_64__)
  static int best = -1;
  if (best < 0)
    best = accel__gray_path_available(ACCEL__GRAY_AVX512) ? ACCEL__GRAY_AVX512
           : accel__gray_path_available(ACCEL__GRAY_AVX2) ? ACCEL__GRAY_AVX2
                                                          : ACCEL__GRAY_SCALAR;
  const int path = accel__gray_path && accel__gray_path_available(accel__gray_path) ? accel__gray_path : best;
  if (path == ACCEL__GRAY_AVX512) x = rgb_to_gray_avx512(p, w, out);
  else if (path == ACCEL__GRAY_AVX2) x = rgb_to_gray_avx2(p, w, out);
#endif
  for (; x < w; x++) out[x] = accel__luma(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
}

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
  case ACCEL__MODE_RGB: accel__rgb_row_to_gray(p, w, out); break;
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
    case ACCEL__MODE_RGB:
      o[0] = p[3 * x];
      o[1] = p[3 * x + 1];
      o[2] = p[3 * x + 2];
      break;
    case ACCEL__MODE_RGBA:
      o[0] = p[4 * x];
      o[1] = p[4 * x + 1];
      o[2] = p[4 * x + 2];
      break;
    case ACCEL__MODE_CMYK:
      o[0] = accel__cmyk_channel(p[4 * x], p[4 * x + 3]);
      o[1] = accel__cmyk_channel(p[4 * x + 1], p[4 * x + 3]);
      o[2] = accel__cmyk_channel(p[4 * x + 2], p[4 * x + 3]);
      break;
    }
  }
}
