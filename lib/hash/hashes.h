/*
 * lib/hash/hashes.h - imagehash's hash functions on a decoded gray plane
 * (internal). The arithmetic of each step is documented with its function.
 */
#ifndef ACCEL_HASH_HASHES_H
#define ACCEL_HASH_HASHES_H

#include "core/internal.h"

#include "accel/hash.h"
#include "hash/hash_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to compute, resolved from accel_hash_options. */
typedef struct accel__hash_spec {
  int nkinds;
  accel_hash_kind kinds[ACCEL_HASH_KIND_COUNT];
  int hash_size;
  int highfreq;        /* phash's highfreq_factor: it hashes a hash_size * highfreq square */
  int64_t whash_scale; /* whash's image_scale; 0: imagehash's default for the image */
  bool whash_keep_ll;  /* whash without removing the coarsest approximation */
  bool whash_db4;      /* whash with Daubechies-4 wavelets */
  int binbits;
  size_t slot_bytes;
  bool need_gray;  /* any kind but colorhash */
  bool need_color; /* colorhash */
} accel__hash_spec;

/* colorhash's pixel classes, counted while decoding:
 * black: L < 32; gray: not black and S < 85; colors: the rest; faint: colors
 * with S < 170; bright: colors with S > 170 (S == 170 is in neither, as in
 * imagehash); hue bins: numpy.histogram over linspace(0, 255, 7). */
typedef struct accel__color_counts {
  uint64_t pixels, black, gray, colors;
  uint64_t faint[6], bright[6];
} accel__color_counts;

void accel__colorhash(const accel__color_counts *c, int binbits, uint8_t *out);

/* The resize target (width, height) a kind needs from a w x h image
 * (highfreq: phash's highfreq_factor). */
void accel__hash_target(const accel__hash_spec *spec, accel_hash_kind kind, int64_t w, int64_t h, int64_t *tw,
                        int64_t *th);

/* phash of an N x N plane (the plan's length, N = n * highfreq_factor) and
 * whash of a scale x scale plane (the arithmetic is in hash_math.h; these
 * allocate its scratch). */
accel_status accel__phash_plane(const uint8_t *px, int n, const accel__dct_plan *plan, uint8_t *out);
accel_status accel__whash_plane(const uint8_t *px, int64_t scale, int n, bool keep_ll, uint8_t *out);
/* The side of whash's db4 approximation of a scale x scale plane at hash
 * size n: (side + 7) / 2 per level, log2(scale / n) levels (n + 6 from the
 * third level on). */
static inline int accel__whash_db4_side(int n, int64_t scale) {
  int64_t side = scale;
  for (int64_t s = scale; s > n; s /= 2) side = (side + 7) / 2;
  return (int)side;
}
/* whash db4 without an explicit image_scale takes images whose own
 * image_scale is at least 8 x hash_size (their hashes have the batch's
 * (hash_size + 6)^2 bits): true, with the reason in why, for a w x h image
 * it refuses (a smaller hash than the slots hold: ACCEL_ERR_UNSUPPORTED). */
bool accel__whash_db4_refused(const accel__hash_spec *spec, int64_t w, int64_t h, char *why);
/* The same with Daubechies-4 wavelets (cpu_whash_db4.c): side^2 bits. */
accel_status accel__whash_db4_plane(const uint8_t *px, int64_t scale, int n, bool keep_ll, uint8_t *out);

struct accel__axis_cache;
struct accel__axis;

/* The resizes of one image, fed with its gray rows in order (a band at a
 * time, straight from the decoder, so that the full-size gray plane need
 * never exist): the kinds that share a target width form a group whose
 * horizontal pass runs on each band as it comes, over the rows [y0, y1)
 * that the group's vertical passes read, into the group's buffer (tw x
 * (y1 - y0)); the vertical passes and the bits follow at the end. The
 * integer arithmetic is the same whatever the bands, so the hashes are. */
typedef struct accel__hash_rows_group {
  int64_t tw, y0, y1;
  const struct accel__axis *ax; /* NULL: the width is kept (rows copied) */
  uint8_t *buf;
} accel__hash_rows_group;

typedef struct accel__hash_rows {
  int64_t w, h;
  int ngroups;
  int group_of[ACCEL_HASH_KIND_COUNT]; /* each kind's group; -1: colorhash */
  int64_t tw[ACCEL_HASH_KIND_COUNT], th[ACCEL_HASH_KIND_COUNT];
  const struct accel__axis *ay[ACCEL_HASH_KIND_COUNT]; /* NULL: the height is kept */
  accel__hash_rows_group group[ACCEL_HASH_KIND_COUNT];
  uint8_t *plane[ACCEL_HASH_KIND_COUNT]; /* each kind's resized plane */
  /* The groups' buffers and the planes, one allocation kept from image to
   * image (a thread's images are mostly alike: no page faults for fresh
   * memory each time); freed by accel__hash_rows_free. */
  uint8_t *arena;
  size_t arena_cap;
} accel__hash_rows;

/* Plan the resizes of a w x h image with the calling thread's axis cache
 * (every axis is taken from it here: fewer than its size); *r starts
 * zeroed, and may have served other images since. */
accel_status accel__hash_rows_begin(const accel__hash_spec *spec, int64_t w, int64_t h, struct accel__axis_cache *cache,
                                    accel__hash_rows *r);
/* The image's rows y0 .. y0 + count - 1 (in order, after those before),
 * row stride `stride`; the bytes past each row's end up to the next row's
 * start may be read (zeros or pixels: their weights are zero). */
void accel__hash_rows_feed(accel__hash_rows *r, const uint8_t *rows, int64_t stride, int64_t y0, int64_t count);
/* The vertical passes and every kind's bits (colour counts: may be NULL
 * without colorhash); writes nkinds slots of spec->slot_bytes. */
accel_status accel__hash_rows_finish(const accel__hash_spec *spec, accel__hash_rows *r,
                                     const accel__color_counts *color, uint8_t *slots, char *why);
/* Release the arena (after the last image). */
void accel__hash_rows_free(accel__hash_rows *r);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_HASH_HASHES_H */
