/*
 * lib/hash/resample.h - Pillow 9.4's Image.resize(size, LANCZOS) on 8-bit
 * gray images, bit for bit (internal).
 *
 * Coefficients (per output pixel, computed in double as Pillow does):
 *   scale = in / out; filterscale = max(scale, 1); support = 3 * filterscale
 *   ksize = 2 * ceil(support) + 1; center = (x + 0.5) * scale
 *   first = max(0, (int)(center - support + 0.5)), last = min(in, (int)(center + support + 0.5))
 *   w[i] = lanczos((first + i - center + 0.5) / filterscale),
 *     lanczos(t) = sinc(t) * sinc(t / 3) on [-3, 3), 0 elsewhere
 *   normalized by their sum, then to 22-bit fixed point rounded away from 0.
 * Each output is clip8((2^21 + sum in * w) >> 22): the horizontal pass runs
 * first (over the rows the vertical pass will read) into an 8-bit
 * intermediate, then the vertical pass. A pass whose size does not change is
 * skipped; an unchanged size is a copy.
 */
#ifndef ACCEL_HASH_RESAMPLE_H
#define ACCEL_HASH_RESAMPLE_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ACCEL__RESAMPLE_BITS = 22 };

/* One axis of a resize: per output index, the first input index, the tap
 * count and ksize fixed-point weights. */
typedef struct accel__axis {
  int64_t in_size, out_size;
  int ksize;
  int32_t *first;  /* [out_size] */
  int32_t *count;  /* [out_size] */
  int32_t *weight; /* [out_size * ksize] */
  /* For SIMD dot products: each weight split exactly as hi * 2048 + lo
   * (both int16), padded with zeros to kpad (a multiple of 32). */
  int kpad;
  int16_t *hi, *lo; /* [out_size * kpad] */
  /* For short kernels (whash's): the weights of each block of 16 outputs
   * in groups of four taps, each weight split into wt_parts bytes as w8 is
   * (3 or 4 parts: the first signed, the others 0..127, 7 bits apart):
   * [out_size / 16][wt_groups][wt_parts][16 outputs][4 taps] int8, when
   * every block's pixels (4 * wt_groups from its first) lie within 64
   * bytes; else NULL. */
  int wt_groups, wt_parts;
  int8_t *wt;
  /* For long kernels whose weights lie in [-2^21, 2^21): each split exactly
   * as a * 2^14 + b * 2^7 + c (a signed, b and c in 0..127, int8 each), or,
   * when every weight lies in [-2^14, 2^14) (downscales by more than about
   * 260, where no tap weighs much), as b * 2^7 + c (b signed) in two parts;
   * padded with zeros to k64 taps (a multiple of 64); else NULL. */
  int k64;
  int w8_parts; /* 3 or 2 */
  int8_t *w8;   /* [out_size][w8_parts][k64]: a, b, c or b, c */
  /* The byte parts (2 to 4, split as wt's) every weight fits in: the
   * vertical pass's byte products. */
  int vparts;
} accel__axis;

accel_status accel__axis_init(accel__axis *axis, int64_t in_size, int64_t out_size);
void accel__axis_free(accel__axis *axis);

/* A few axes kept for reuse: catalogs repeat the same image sizes, and
 * computing the weights (two sin() per tap) is a large part of small resizes.
 * One cache per thread; not thread safe. */
enum { ACCEL__AXIS_CACHE_SIZE = 16 };
typedef struct accel__axis_cache {
  uint64_t clock;                            /* calls so far */
  uint64_t used[ACCEL__AXIS_CACHE_SIZE];     /* the call that last returned each entry */
  accel__axis entry[ACCEL__AXIS_CACHE_SIZE]; /* weight == NULL: empty */
} accel__axis_cache;

/* The axis for in_size -> out_size, from the cache or computed into it
 * (in an empty slot, else in the least recently returned one): valid for
 * the next ACCEL__AXIS_CACHE_SIZE - 1 calls at least. NULL when out of
 * memory. */
const accel__axis *accel__axis_cached(accel__axis_cache *cache, int64_t in_size, int64_t out_size);
void accel__axis_cache_free(accel__axis_cache *cache);
/* The calling thread's own cache, kept until the thread exits (NULL when
 * out of memory). */
accel__axis_cache *accel__axis_cache_thread(void);

/* Rows of the input the vertical pass of `v` reads: [*begin, *end). */
void accel__axis_span(const accel__axis *v, int64_t *begin, int64_t *end);

/* The passes' dot products, chosen at run time from the CPU's features
 * (AUTO: the fastest available): the horizontal pass has one per path, the
 * vertical pass its byte products on the VNNI and VBMI paths and a plain
 * loop on the others. Tests force each path in turn and compare them, bit
 * for bit, with the scalar loop. */
enum {
  ACCEL__RESAMPLE_AUTO = 0,
  ACCEL__RESAMPLE_SCALAR = 1,
  ACCEL__RESAMPLE_SSE2 = 2,
  ACCEL__RESAMPLE_AVX2 = 3,
  ACCEL__RESAMPLE_VNNI = 4, /* AVX-512 VNNI */
  ACCEL__RESAMPLE_VBMI = 5  /* AVX-512 VBMI: 16 outputs at once where the kernels are short */
};
extern int accel__resample_path; /* a test switch: a path, or AUTO */
bool accel__resample_path_available(int path);

/* Horizontal pass: rows [row0, row1) of in (width h->in_size, stride
 * in_stride) into out (width h->out_size, stride out_stride), out row 0 being
 * input row row0. */
void accel__resample_rows(const accel__axis *h, const uint8_t *in, int64_t in_stride, int64_t row0, int64_t row1,
                          uint8_t *out, int64_t out_stride);
/* Vertical pass: `in` holds input rows starting at row `in_row0` (so the
 * weights' first indices are shifted by it); width w. With AVX-512 VNNI
 * (the VNNI and VBMI paths) 64 columns at a time in byte products. */
void accel__resample_cols(const accel__axis *v, const uint8_t *in, int64_t in_stride, int64_t in_row0, int64_t w,
                          uint8_t *out, int64_t out_stride);

/* Whole resize of a gray plane (w x h, stride) to ow x oh (packed). */
accel_status accel__resize_gray(const uint8_t *in, int64_t w, int64_t h, int64_t stride, uint8_t *out, int64_t ow,
                                int64_t oh);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_HASH_RESAMPLE_H */
