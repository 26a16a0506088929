/* Pillow-exact LANCZOS resampling of 8-bit gray planes. See resample.h. */
#include "hash/resample.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return sin(x) / x;
}

static double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

/* The fewest byte parts, from `parts` up to 4, that hold n weights
 * (accel__axis.vparts), and part i of a weight k, most significant first,
 * for P parts:
 * k = sum of part[i] * 2^(7 (P - 1 - i)), the first part signed, the others
 * in 0..127 (arithmetic shifts). P parts hold k in [-2^(7P), 2^(7P)). */
static int byte_parts(const int32_t *w, int64_t n, int parts) {
  for (int64_t i = 0; i < n; i++)
    while (parts < 4 && (w[i] < -(1 << (7 * parts)) || w[i] >= (1 << (7 * parts)))) parts++;
  return parts;
}
static int8_t byte_part(int32_t k, int parts, int i) {
  const int shift = 7 * (parts - 1 - i);
  return (int8_t)(i == 0 ? k >> shift : (k >> shift) & 127);
}

/* The 16-output blocks' weights in byte parts (accel__axis.wt) when every
 * full block's pixels, four taps per output rounded up, fit in the 64 bytes
 * from its first: [block][group of 4 taps][part][16 outputs x 4 taps].
 * Tails and other axes take the dot products. */
static void transpose_short(accel__axis *a) {
  const int64_t blocks = a->out_size / 16;
  const int kq = (a->ksize + 3) / 4;
  if (blocks == 0 || 4 * kq > 64) return;
  for (int64_t b = 0; b < blocks; b++)
    if (a->first[b * 16 + 15] - a->first[b * 16] + 4 * kq > 64) return;
  /* 3 or 4: two would need every weight below 2^14 (1/256), which a kernel of at most 64 taps summing to 1 never has */
  const int parts = a->vparts < 3 ? 3 : a->vparts;
  if (!(a->wt = calloc((size_t)(blocks * kq * parts * 64), 1))) return; /* optional: dots then */
  a->wt_parts = parts;
  a->wt_groups = kq;
  for (int64_t b = 0; b < blocks; b++)
    for (int l = 0; l < 16; l++)
      for (int t = 0; t < a->count[b * 16 + l]; t++)
        for (int p = 0; p < parts; p++)
          a->wt[((b * kq + t / 4) * parts + p) * 64 + 4 * l + t % 4] =
              byte_part(a->weight[(b * 16 + l) * a->ksize + t], parts, p);
}

/* The int8 parts of every weight (accel__axis.w8) when each lies in
 * [-2^21, 2^21) and the kernels are long enough for 64-byte steps to pay:
 * three, or two where every weight lies in [-2^14, 2^14) (vparts, split as
 * byte_part splits). */
static void split_bytes(accel__axis *a) {
  const int parts = a->vparts;
  if (a->ksize < 64 || parts > 3) return;
  a->k64 = (a->ksize + 63) / 64 * 64;
  if (!(a->w8 = calloc((size_t)(a->out_size * parts * a->k64), 1))) return; /* optional: the int16 dots then */
  a->w8_parts = parts;
  for (int64_t x = 0; x < a->out_size; x++)
    for (int i = 0; i < a->count[x]; i++)
      for (int p = 0; p < parts; p++)
        a->w8[(x * parts + p) * a->k64 + i] = byte_part(a->weight[x * a->ksize + i], parts, p);
}

accel_status accel__axis_init(accel__axis *a, int64_t in_size, int64_t out_size) {
  memset(a, 0, sizeof *a);
  a->in_size = in_size;
  a->out_size = out_size;
  const double scale = (double)in_size / (double)out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 3.0 * filterscale;
  a->ksize = (int)ceil(support) * 2 + 1;
  a->first = malloc(sizeof(int32_t) * (size_t)out_size);
  a->count = malloc(sizeof(int32_t) * (size_t)out_size);
  a->weight = calloc((size_t)out_size * (size_t)a->ksize, sizeof(int32_t));
  double *w = malloc(sizeof(double) * (size_t)a->ksize);
  if (!a->first || !a->count || !a->weight || !w) {
    free(w);
    accel__axis_free(a);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  const double ss = 1.0 / filterscale;
  for (int64_t x = 0; x < out_size; x++) {
    const double center = ((double)x + 0.5) * scale;
    int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in_size) hi = in_size;
    const int n = (int)(hi - lo);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
      w[i] = lanczos(((double)(i + lo) - center + 0.5) * ss);
      sum += w[i];
    }
    int32_t *k = a->weight + x * a->ksize;
    for (int i = 0; i < n; i++) {
      double v = sum != 0.0 ? w[i] / sum : w[i];
      double fixed = v * (double)(1 << ACCEL__RESAMPLE_BITS);
      k[i] = (int32_t)(v < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    a->first[x] = (int32_t)lo;
    a->count[x] = n;
  }
  free(w);
  a->vparts = byte_parts(a->weight, out_size * a->ksize, 2);
  /* split weights for the SIMD pass; huge kernels (a downscale by more than
   * ~700x) would overflow its 32-bit lanes and keep the scalar pass */
  if (a->ksize <= 4096) {
    a->kpad = (a->ksize + 31) / 32 * 32;
    a->hi = calloc((size_t)out_size * (size_t)a->kpad, sizeof(int16_t));
    a->lo = calloc((size_t)out_size * (size_t)a->kpad, sizeof(int16_t));
    if (!a->hi || !a->lo) {
      accel__axis_free(a);
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    transpose_short(a);
    split_bytes(a);
    for (int64_t x = 0; x < out_size; x++)
      for (int i = 0; i < a->count[x]; i++) {
        const int32_t k = a->weight[x * a->ksize + i];
        a->hi[x * a->kpad + i] = (int16_t)(k >> 11); /* arithmetic shift: k = hi * 2048 + lo, 0 <= lo < 2048 */
        a->lo[x * a->kpad + i] = (int16_t)(k & 2047);
      }
  }
  return ACCEL_OK;
}

void accel__axis_free(accel__axis *a) {
  free(a->first);
  free(a->count);
  free(a->weight);
  free(a->hi);
  free(a->lo);
  free(a->wt);
  free(a->w8);
  memset(a, 0, sizeof *a);
}

const accel__axis *accel__axis_cached(accel__axis_cache *c, int64_t in_size, int64_t out_size) {
  const uint64_t now = ++c->clock;
  int victim = 0;
  for (int i = 0; i < ACCEL__AXIS_CACHE_SIZE; i++) {
    if (c->entry[i].weight && c->entry[i].in_size == in_size && c->entry[i].out_size == out_size) {
      c->used[i] = now;
      return &c->entry[i];
    }
    if (c->used[i] < c->used[victim]) victim = i; /* empty slots were never used: 0 */
  }
  accel__axis *slot = &c->entry[victim];
  if (slot->weight) accel__axis_free(slot);
  if (accel__axis_init(slot, in_size, out_size) != ACCEL_OK) {
    c->used[victim] = 0;
    return NULL;
  }
  c->used[victim] = now;
  return slot;
}

/* One cache per thread that hashes, kept from call to call (OpenMP's
 * threads live on between parallel regions): the weights of a 2560-pixel
 * row's axes take some 3 ms to compute, more than a fifth of hashing the
 * image, and callers often hash a few files per call. Freed when the
 * thread exits. */
static pthread_key_t thread_cache_key;
static pthread_once_t thread_cache_once = PTHREAD_ONCE_INIT;
static bool thread_cache_ok;

static void thread_cache_release(void *p) {
  accel__axis_cache_free(p);
  free(p);
}

static void thread_cache_init(void) {
  thread_cache_ok = pthread_key_create(&thread_cache_key, thread_cache_release) == 0;
}

accel__axis_cache *accel__axis_cache_thread(void) {
  pthread_once(&thread_cache_once, thread_cache_init);
  if (!thread_cache_ok) return NULL;
  accel__axis_cache *c = pthread_getspecific(thread_cache_key);
  if (!c && (c = calloc(1, sizeof *c)) && pthread_setspecific(thread_cache_key, c) != 0) {
    free(c);
    c = NULL;
  }
  return c;
}

void accel__axis_cache_free(accel__axis_cache *c) {
  for (int i = 0; i < ACCEL__AXIS_CACHE_SIZE; i++)
    if (c->entry[i].weight) accel__axis_free(&c->entry[i]);
  memset(c->used, 0, sizeof c->used);
  c->clock = 0;
}

void accel__axis_span(const accel__axis *v, int64_t *begin, int64_t *end) {
  *begin = v->first[0];
  *end = v->first[v->out_size - 1] + v->count[v->out_size - 1];
}

static inline uint8_t clip8(int32_t ss) {
  if (ss >= (1 << ACCEL__RESAMPLE_BITS << 8)) return 255;
  if (ss <= 0) return 0;
  return (uint8_t)(ss >> ACCEL__RESAMPLE_BITS);
}

/* Integer sums are exact, so any summation order (and SIMD) gives Pillow's
 * value. The horizontal pass uses pmaddwd on the split weights: per lane,
 * 255 * 2048 * 2 * kpad / 8 < 2^31 for kpad <= 4096. */
#if defined(__x86_64__)
#include <immintrin.h>

static inline int32_t dot_sse2(const uint8_t *p, const int16_t *hi, const int16_t *lo, int kpad) {
  const __m128i zero = _mm_setzero_si128();
  __m128i ah = zero, al = zero;
  for (int i = 0; i < kpad; i += 8) {
    const __m128i px = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(p + i)), zero);
    ah = _mm_add_epi32(ah, _mm_madd_epi16(px, _mm_loadu_si128((const __m128i *)(const void *)(hi + i))));
    al = _mm_add_epi32(al, _mm_madd_epi16(px, _mm_loadu_si128((const __m128i *)(const void *)(lo + i))));
  }
  int32_t h[4], l[4];
  _mm_storeu_si128((__m128i *)(void *)h, ah);
  _mm_storeu_si128((__m128i *)(void *)l, al);
  return (int32_t)(((int64_t)h[0] + h[1] + h[2] + h[3]) * 2048 + ((int64_t)l[0] + l[1] + l[2] + l[3]));
}

__attribute__((target("avx2"))) static inline int32_t dot_avx2(const uint8_t *p, const int16_t *hi, const int16_t *lo,
                                                               int kpad) {
  __m256i ah = _mm256_setzero_si256(), al = _mm256_setzero_si256();
  for (int i = 0; i < kpad; i += 16) {
    const __m256i px = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p + i)));
    ah = _mm256_add_epi32(ah, _mm256_madd_epi16(px, _mm256_loadu_si256((const __m256i *)(const void *)(hi + i))));
    al = _mm256_add_epi32(al, _mm256_madd_epi16(px, _mm256_loadu_si256((const __m256i *)(const void *)(lo + i))));
  }
  int32_t h[8], l[8];
  _mm256_storeu_si256((__m256i *)(void *)h, ah);
  _mm256_storeu_si256((__m256i *)(void *)l, al);
  int64_t sh = 0, sl = 0;
  for (int i = 0; i < 8; i++) {
    sh += h[i];
    sl += l[i];
  }
  return (int32_t)(sh * 2048 + sl);
}

/* AVX-512 VNNI: vpdpwssd multiplies 32 int16 pairs and adds them to 16
 * int32 lanes in one instruction (the AVX2 path needs a multiply and an add
 * for 16). The two accumulators are then joined lane by lane, hi * 2048 +
 * lo, and summed in int32: every step wraps modulo 2^32, and the true sum
 * (Pillow's own int32 accumulator less its rounding term) fits in an int32,
 * so the wrapped result is the exact one. (GCC 12's AVX-512 shift and
 * shuffle intrinsics pass an uninitialized vector as their unused merge
 * source, which -Winit-self reports: silenced here only.) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static inline int32_t dot_vnni(const uint8_t *p,
                                                                                      const int16_t *hi,
                                                                                      const int16_t *lo, int kpad) {
  __m512i ah = _mm512_setzero_si512(), al = _mm512_setzero_si512();
  for (int i = 0; i < kpad; i += 32) {
    const __m512i px = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
    ah = _mm512_dpwssd_epi32(ah, px, _mm512_loadu_si512((const void *)(hi + i)));
    al = _mm512_dpwssd_epi32(al, px, _mm512_loadu_si512((const void *)(lo + i)));
  }
  __m512i v = _mm512_add_epi32(_mm512_slli_epi32(ah, 11), al);
  v = _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, 0x4E)); /* 256-bit halves */
  v = _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, 0xB1)); /* 128-bit quarters */
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0x4E));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0xB1));
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(v));
}

/* One row's outputs with a path's dot product inlined (a call per output
 * cost as much as the products of short kernels). */
#define ACCEL__ROW_FN(name, target, dot)                                                                               \
  target static void name(const accel__axis *h, const uint8_t *src, uint8_t *dst) {                                    \
    for (int64_t x = 0; x < h->out_size; x++)                                                                          \
      dst[x] = clip8((1 << (ACCEL__RESAMPLE_BITS - 1)) +                                                               \
                     dot(src + h->first[x], h->hi + x * h->kpad, h->lo + x * h->kpad, h->kpad));                       \
  }
ACCEL__ROW_FN(row_sse2, , dot_sse2)
ACCEL__ROW_FN(row_avx2, __attribute__((target("avx2"))), dot_avx2)
ACCEL__ROW_FN(row_vnni, __attribute__((target("avx512f,avx512bw,avx512vnni"))), dot_vnni)
#undef ACCEL__ROW_FN

#define VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni")))
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* The byte-part accumulators joined (part p shifted 7 (parts - 1 - p) bits),
 * Pillow's rounding term added and the sums clipped as clip8 clips: 16
 * outputs in 0..255, one per int32 lane. */
VNNI_TARGET static inline __attribute__((always_inline)) __m512i join_clip(const __m512i *acc, int parts) {
  __m512i v = _mm512_set1_epi32(1 << (ACCEL__RESAMPLE_BITS - 1));
  for (int p = 0; p < parts; p++) v = _mm512_add_epi32(v, _mm512_slli_epi32(acc[p], (unsigned)(7 * (parts - 1 - p))));
  return _mm512_min_epi32(_mm512_srai_epi32(_mm512_max_epi32(v, _mm512_setzero_si512()), 22), _mm512_set1_epi32(255));
}

/* Long kernels with byte-sized weight parts: vpdpbusd multiplies 64 pixels
 * (uint8) by 64 weight bytes (int8) and adds them to 16 int32 lanes, for
 * each of the parts (3: a, b, c; 2: b, c); the lanes are joined a * 2^14 +
 * b * 2^7 + c and summed, modulo 2^32 at every step and exact since the
 * true sum fits. Two parts are a third fewer products (ahash's and dhash's
 * kernels on large images). */
VBMI_TARGET static inline int32_t dot_bytes(const uint8_t *p, const int8_t *w, int k64, int parts) {
  const int8_t *wb = w + (parts - 2) * k64, *wc = wb + k64;
  __m512i sa = _mm512_setzero_si512(), sb = _mm512_setzero_si512(), sc = _mm512_setzero_si512();
  for (int i = 0; i < k64; i += 64) {
    const __m512i px = _mm512_loadu_si512((const void *)(p + i));
    if (parts == 3) sa = _mm512_dpbusd_epi32(sa, px, _mm512_loadu_si512((const void *)(w + i)));
    sb = _mm512_dpbusd_epi32(sb, px, _mm512_loadu_si512((const void *)(wb + i)));
    sc = _mm512_dpbusd_epi32(sc, px, _mm512_loadu_si512((const void *)(wc + i)));
  }
  __m512i v = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(sa, 14), _mm512_slli_epi32(sb, 7)), sc);
  v = _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, 0x4E));
  v = _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, 0xB1));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0x4E));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0xB1));
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(v));
}

/* Short kernels, 16 outputs at once: the block's 64 bytes of pixels loaded
 * once; for each group of four taps, vpermb picks each output's four pixels
 * into its int32 lane and vpdpbusd multiplies them by the four weights'
 * byte parts and adds them, one accumulator per part; the parts are joined
 * (shifted 7 bits apart) and clipped as clip8 clips. Every step is exact
 * modulo 2^32 and the true sum (Pillow's int32 accumulator) fits, so the
 * result is Pillow's. Tails take the dots. */
VBMI_TARGET static inline __attribute__((always_inline)) void block_bytes(const accel__axis *h, int64_t b, int parts,
                                                                          const uint8_t *src, uint8_t *dst) {
  const int32_t *first = h->first + b * 16;
  const int8_t *w = h->wt + b * h->wt_groups * parts * 64;
  const __m512i win = _mm512_loadu_si512((const void *)(src + first[0]));
  /* byte 4 l + c: output l's pixel c of the group within the window */
  const __m512i d = _mm512_sub_epi32(_mm512_loadu_si512((const void *)first), _mm512_set1_epi32(first[0]));
  __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(d, _mm512_set1_epi32(0x01010101)), _mm512_set1_epi32(0x03020100));
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int q = 0; q < h->wt_groups; q++, w += parts * 64) {
    const __m512i px = _mm512_permutexvar_epi8(idx, win);
    for (int p = 0; p < parts; p++)
      acc[p] = _mm512_dpbusd_epi32(acc[p], px, _mm512_loadu_si512((const void *)(w + p * 64)));
    idx = _mm512_add_epi8(idx, _mm512_set1_epi8(4));
  }
  _mm_storeu_si128((__m128i *)(void *)(dst + b * 16), _mm512_cvtepi32_epi8(join_clip(acc, parts)));
}

VBMI_TARGET static void row_vbmi(const accel__axis *h, const uint8_t *src, uint8_t *dst) {
  const int64_t blocks = h->wt ? h->out_size / 16 : 0;
  /* the part count a constant in each loop, so the accumulators stay in registers */
  if (h->wt_parts == 3)
    for (int64_t b = 0; b < blocks; b++) block_bytes(h, b, 3, src, dst);
  else
    for (int64_t b = 0; b < blocks; b++) block_bytes(h, b, 4, src, dst);
  for (int64_t x = blocks * 16; x < h->out_size; x++)
    dst[x] = clip8((1 << (ACCEL__RESAMPLE_BITS - 1)) +
                   (h->w8 ? dot_bytes(src + h->first[x], h->w8 + x * h->w8_parts * h->k64, h->k64, h->w8_parts)
                          : dot_vnni(src + h->first[x], h->hi + x * h->kpad, h->lo + x * h->kpad, h->kpad)));
}

typedef void (*row_fn)(const accel__axis *, const uint8_t *, uint8_t *);

bool accel__resample_path_available(int path) {
  switch (path) {
  case ACCEL__RESAMPLE_SCALAR:
  case ACCEL__RESAMPLE_SSE2: return true;
  case ACCEL__RESAMPLE_AVX2: return __builtin_cpu_supports("avx2");
  case ACCEL__RESAMPLE_VNNI:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  case ACCEL__RESAMPLE_VBMI:
    return accel__resample_path_available(ACCEL__RESAMPLE_VNNI) && __builtin_cpu_supports("avx512vbmi");
  default: return false;
  }
}

/* The path in force: the test switch where the CPU has it, else the fastest. */
static int path_in_force(void) {
  static int cached = -1; /* threads may race to fill it, with the same value */
  int best = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (best < 0) {
    best = accel__resample_path_available(ACCEL__RESAMPLE_VBMI)   ? ACCEL__RESAMPLE_VBMI
           : accel__resample_path_available(ACCEL__RESAMPLE_VNNI) ? ACCEL__RESAMPLE_VNNI
           : accel__resample_path_available(ACCEL__RESAMPLE_AVX2) ? ACCEL__RESAMPLE_AVX2
                                                                  : ACCEL__RESAMPLE_SSE2;
    __atomic_store_n(&cached, best, __ATOMIC_RELAXED);
  }
  return accel__resample_path && accel__resample_path_available(accel__resample_path) ? accel__resample_path : best;
}

/* The row function of the path in force (NULL: the scalar loop). */
static row_fn pick_row(void) {
  const int path = path_in_force();
  return path == ACCEL__RESAMPLE_VBMI   ? row_vbmi
         : path == ACCEL__RESAMPLE_VNNI ? row_vnni
         : path == ACCEL__RESAMPLE_AVX2 ? row_avx2
         : path == ACCEL__RESAMPLE_SSE2 ? row_sse2
                                        : NULL;
}

/* The vertical pass, 64 columns at a time, four taps (input rows) per step:
 * the four rows' 64 bytes interleaved by unpacking (each int32 lane then
 * holds one column's four pixels) and multiplied by the taps' byte parts
 * with vpdpbusd, one accumulator per part and per quarter of the columns;
 * the parts joined, clipped, and the quarters put back in column order with
 * vpermd. Exact modulo 2^32 at every step, as the rows' dot products are.
 * Columns [0, w / 64 * 64) of every output row. */
VNNI_TARGET static inline __attribute__((always_inline)) void cols64(const accel__axis *v, const uint8_t *in,
                                                                     int64_t in_stride, int64_t in_row0, int64_t w,
                                                                     uint8_t *out, int64_t out_stride, int parts,
                                                                     int32_t *wq) {
  /* quarter j's lane 4 L + c is column 16 L + 4 j + c: in the quarters' bytes laid end to end, the
   * four columns 16 L + 4 j .. + 3 are dword 4 j + L, and go to dword 4 L + j (a 4 x 4 transpose) */
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t yy = 0; yy < v->out_size; yy++) {
    const int32_t *k = v->weight + yy * v->ksize;
    const int n = v->count[yy], groups = (n + 3) / 4;
    const uint8_t *base = in + (v->first[yy] - in_row0) * in_stride;
    for (int q = 0; q < groups; q++) /* each part's four bytes of taps 4q .. 4q + 3 */
      for (int p = 0; p < parts; p++) {
        uint32_t word = 0;
        for (int c = 0; c < 4; c++)
          if (4 * q + c < n) word |= (uint32_t)(uint8_t)byte_part(k[4 * q + c], parts, p) << (8 * c);
        wq[q * parts + p] = (int32_t)word;
      }
    for (int64_t x = 0; x + 64 <= w; x += 64) {
      __m512i acc[4][4];
      for (int j = 0; j < 4; j++)
        for (int p = 0; p < parts; p++) acc[j][p] = _mm512_setzero_si512();
      for (int q = 0; q < groups; q++) {
        __m512i r[4];
        for (int c = 0; c < 4; c++) /* taps past the count weigh 0: any row in range will do */
          r[c] = _mm512_loadu_si512((const void *)(base + (4 * q + c < n ? 4 * q + c : 0) * in_stride + x));
        const __m512i a = _mm512_unpacklo_epi8(r[0], r[1]), b = _mm512_unpackhi_epi8(r[0], r[1]);
        const __m512i c = _mm512_unpacklo_epi8(r[2], r[3]), d = _mm512_unpackhi_epi8(r[2], r[3]);
        const __m512i quarter[4] = {_mm512_unpacklo_epi16(a, c), _mm512_unpackhi_epi16(a, c),
                                    _mm512_unpacklo_epi16(b, d), _mm512_unpackhi_epi16(b, d)};
        for (int p = 0; p < parts; p++) {
          const __m512i wp = _mm512_set1_epi32(wq[q * parts + p]);
          for (int j = 0; j < 4; j++) acc[j][p] = _mm512_dpbusd_epi32(acc[j][p], quarter[j], wp);
        }
      }
      __m128i quad[4];
      for (int j = 0; j < 4; j++) quad[j] = _mm512_cvtepi32_epi8(join_clip(acc[j], parts));
      __m512i bytes = _mm512_castsi128_si512(quad[0]);
      bytes = _mm512_inserti32x4(bytes, quad[1], 1);
      bytes = _mm512_inserti32x4(bytes, quad[2], 2);
      bytes = _mm512_inserti32x4(bytes, quad[3], 3);
      _mm512_storeu_si512((void *)(out + yy * out_stride + x), _mm512_permutexvar_epi32(order, bytes));
    }
  }
}

/* cols64 with the part count a constant (the accumulators in registers);
 * false when out of memory. */
VNNI_TARGET static bool cols_vnni(const accel__axis *v, const uint8_t *in, int64_t in_stride, int64_t in_row0,
                                  int64_t w, uint8_t *out, int64_t out_stride) {
  int32_t *wq = malloc(sizeof(int32_t) * 4 * (size_t)((v->ksize + 3) / 4));
  if (!wq) return false;
  if (v->vparts == 2) cols64(v, in, in_stride, in_row0, w, out, out_stride, 2, wq);
  else if (v->vparts == 3) cols64(v, in, in_stride, in_row0, w, out, out_stride, 3, wq);
  else cols64(v, in, in_stride, in_row0, w, out, out_stride, 4, wq);
  free(wq);
  return true;
}
#pragma GCC diagnostic pop
#else
bool accel__resample_path_available(int path) { return path == ACCEL__RESAMPLE_SCALAR; }
#endif

int accel__resample_path = ACCEL__RESAMPLE_AUTO;

void accel__resample_rows(const accel__axis *h, const uint8_t *in, int64_t in_stride, int64_t row0, int64_t row1,
                          uint8_t *out, int64_t out_stride) {
  const int ksize = h->ksize;
#if defined(__x86_64__)
  /* A dot product reads kpad bytes from its first pixel: up to kpad - 1
   * past the row's end, where its weights are zero. They are read in place
   * while the rows after it (up to row1) hold that many bytes, else from a
   * zero-padded copy of the row. */
  const row_fn row = h->hi ? pick_row() : NULL;
  int64_t reach = h->kpad > 64 ? h->kpad : 64; /* the 16-output blocks read 64 bytes */
  if (h->k64 > reach) reach = h->k64;          /* the byte dot products, k64 */
  uint8_t *pad = row ? calloc((size_t)(h->in_size + reach), 1) : NULL;
  if (pad) {
    for (int64_t y = row0; y < row1; y++) {
      const uint8_t *src = in + y * in_stride;
      if ((row1 - 1 - y) * in_stride < reach) {
        memcpy(pad, src, (size_t)h->in_size);
        src = pad;
      }
      row(h, src, out + (y - row0) * out_stride);
    }
    free(pad);
    return;
  }
#endif
  for (int64_t y = row0; y < row1; y++) {
    const uint8_t *src = in + y * in_stride;
    uint8_t *dst = out + (y - row0) * out_stride;
    for (int64_t x = 0; x < h->out_size; x++) {
      const uint8_t *p = src + h->first[x];
      const int32_t *k = h->weight + x * ksize;
      const int n = h->count[x];
      int32_t ss = 1 << (ACCEL__RESAMPLE_BITS - 1);
      for (int i = 0; i < n; i++) ss += (int32_t)p[i] * k[i];
      dst[x] = clip8(ss);
    }
  }
}

/* The vertical pass over columns [x0, x1), vectorised by the compiler
 * across columns; compiled for AVX2 as well (ACCEL__CLONES). */
ACCEL__CLONES("avx2", "default")
static void cols_loop(const accel__axis *v, const uint8_t *in, int64_t in_stride, int64_t in_row0, int64_t x0,
                      int64_t x1, uint8_t *out, int64_t out_stride) {
  const int64_t w = x1 - x0;
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)(w > 0 ? w : 1));
  if (!acc) { /* tiny fallback without the row accumulator */
    for (int64_t yy = 0; yy < v->out_size; yy++)
      for (int64_t x = x0; x < x1; x++) {
        int32_t ss = 1 << (ACCEL__RESAMPLE_BITS - 1);
        const int32_t *k = v->weight + yy * v->ksize;
        for (int i = 0; i < v->count[yy]; i++) ss += (int32_t)in[(v->first[yy] - in_row0 + i) * in_stride + x] * k[i];
        out[yy * out_stride + x] = clip8(ss);
      }
    return;
  }
  for (int64_t yy = 0; yy < v->out_size; yy++) {
    const int32_t *k = v->weight + yy * v->ksize;
    const uint8_t *base = in + (v->first[yy] - in_row0) * in_stride + x0;
    for (int64_t x = 0; x < w; x++) acc[x] = 1 << (ACCEL__RESAMPLE_BITS - 1);
    for (int i = 0; i < v->count[yy]; i++) {
      const uint8_t *row = base + i * in_stride;
      const int32_t ki = k[i];
      for (int64_t x = 0; x < w; x++) acc[x] += (int32_t)row[x] * ki;
    }
    uint8_t *dst = out + yy * out_stride + x0;
    for (int64_t x = 0; x < w; x++) dst[x] = clip8(acc[x]);
  }
  free(acc);
}

void accel__resample_cols(const accel__axis *v, const uint8_t *in, int64_t in_stride, int64_t in_row0, int64_t w,
                          uint8_t *out, int64_t out_stride) {
  int64_t x0 = 0;
#if defined(__x86_64__)
  if (w >= 64 && path_in_force() >= ACCEL__RESAMPLE_VNNI && cols_vnni(v, in, in_stride, in_row0, w, out, out_stride))
    x0 = w / 64 * 64;
#endif
  if (x0 < w) cols_loop(v, in, in_stride, in_row0, x0, w, out, out_stride);
}

accel_status accel__resize_gray(const uint8_t *in, int64_t w, int64_t h, int64_t stride, uint8_t *out, int64_t ow,
                                int64_t oh) {
  if (ow == w && oh == h) {
    for (int64_t y = 0; y < h; y++) memcpy(out + y * ow, in + y * stride, (size_t)w);
    return ACCEL_OK;
  }
  accel__axis ax, ay;
  accel_status s = accel__axis_init(&ax, w, ow);
  if (s) return s;
  if ((s = accel__axis_init(&ay, h, oh))) {
    accel__axis_free(&ax);
    return s;
  }
  if (ow == w) { /* vertical only */
    accel__resample_cols(&ay, in, stride, 0, w, out, ow);
  } else if (oh == h) { /* horizontal only */
    accel__resample_rows(&ax, in, stride, 0, h, out, ow);
  } else {
    int64_t y0, y1;
    accel__axis_span(&ay, &y0, &y1);
    uint8_t *tmp = malloc((size_t)(ow * (y1 - y0)));
    if (!tmp) {
      s = ACCEL_ERR_OUT_OF_MEMORY;
    } else {
      accel__resample_rows(&ax, in, stride, y0, y1, tmp, ow);
      accel__resample_cols(&ay, tmp, ow, y0, ow, out, ow);
      free(tmp);
    }
  }
  accel__axis_free(&ax);
  accel__axis_free(&ay);
  return s;
}
