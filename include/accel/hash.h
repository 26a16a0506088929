/*
 * accel/hash.h - perceptual image hashes, bit-exact with the Python
 * `imagehash` library (4.3.2) on Pillow 9.4, many images at a time.
 *
 * Each input is decoded once (JPEG or PNG, see accel/image.h for the exact
 * decoding rules) and every requested kind is computed from that one decode:
 *
 *   ahash            imagehash.average_hash(img, hash_size)
 *   dhash            imagehash.dhash(img, hash_size)
 *   dhash_vertical   imagehash.dhash_vertical(img, hash_size)
 *   phash            imagehash.phash(img, hash_size, highfreq_factor)
 *   whash            imagehash.whash(img, hash_size)       (haar, max-level LL removed)
 *   colorhash        imagehash.colorhash(img, binbits)
 *
 * All are identical to imagehash's: the decoding, Pillow's convert('L') and
 * LANCZOS resize, scipy's DCT algorithm (phash) and pywt's Haar arithmetic
 * (whash) are reproduced operation for operation (docs/hash.md: 1617 of 1617
 * reference hashes), at every hash_size and highfreq_factor accepted here.
 *
 * Bits and hex: a hash of n bits is imagehash's boolean array flattened in row
 * order, b[0] first. It is stored packed MSB first: byte j holds b[8j]..b[8j+7]
 * in bits 7..0, unused low bits of the last byte are zero. The hex string is
 * imagehash's str(hash): the bits read as one big-endian number, written with
 * ceil(n / 4) lowercase hex digits (so 64 bits -> 16 digits, colorhash with
 * binbits 3 -> 42 bits -> 11 digits). For 64-bit hashes, the 8 bytes read as
 * a big-endian uint64 equal int(str(hash), 16).
 *
 * Stage name: "hash.batch" (a whole batch: on the CUDA backend, decoding on
 * the CPU threads and everything else on the GPU).
 *
 * Threads: every function may be called from several threads at once;
 * batches on one context run concurrently, each on the context's CPU
 * threads (their GPU work is serialized). The functions without a context
 * report failures through accel_last_error(NULL).
 */
#ifndef ACCEL_HASH_H
#define ACCEL_HASH_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum accel_hash_kind {
  ACCEL_HASH_AHASH = 0,
  ACCEL_HASH_DHASH = 1,
  ACCEL_HASH_DHASH_VERTICAL = 2,
  ACCEL_HASH_PHASH = 3,
  ACCEL_HASH_WHASH = 4,
  ACCEL_HASH_COLORHASH = 5
} accel_hash_kind;

enum {
  ACCEL_HASH_KIND_COUNT = 6,
  ACCEL_HASH_SIZE_MIN = 2,
  /* hash_size; 256 gives 65536-bit hashes. (The first release's maximum was
   * 64 and 512 bytes: programs built with those constants never ask for
   * more, and the library never writes more than they ask for.) */
  ACCEL_HASH_SIZE_MAX = 256,
  ACCEL_HASH_MAX_BYTES = 8192, /* bytes of the largest hash */
  ACCEL_HASH_HIGHFREQ_MAX = 16 /* phash's highfreq_factor: 1..16 */
};

/* "ahash", "dhash", "dhash_vertical", "phash", "whash", "colorhash";
 * "unknown" otherwise. Static storage. */
ACCEL_API const char *accel_hash_kind_name(accel_hash_kind kind);
/* Parse a kind name, any case (also imagehash's function names
 * "average_hash" and "dhash_vertical"). ACCEL_ERR_INVALID_ARG otherwise, and
 * for a NULL argument; *kind is then left as it was. */
ACCEL_API accel_status accel_hash_kind_from_string(const char *name, accel_hash_kind *kind);

/* Reports the failure of one input of a batch. Called on the calling thread,
 * in input order, after the batch has run and only when it returns ACCEL_OK;
 * `message` is valid during the call. No libaccel lock is held. */
typedef void (*accel_hash_error_fn)(void *user, size_t index, accel_status status, const char *message);

typedef struct accel_hash_options {
  uint32_t struct_size;                         /* set by accel_hash_options_init */
  uint32_t nkinds;                              /* how many entries of kinds[] to compute */
  accel_hash_kind kinds[ACCEL_HASH_KIND_COUNT]; /* default: ahash, dhash, phash, whash */
  int32_t hash_size;     /* default 8; ACCEL_HASH_SIZE_MIN..MAX (dhash_vertical, whash: from 1); whash: a power of 2 */
  int32_t color_binbits; /* colorhash's binbits, default 3; 1..24 */
  /* 0 (default): exact. 1: decode large JPEGs at a reduced DCT scale, as
   * Pillow's draft() picks it for the largest resize the requested kinds
   * need (whash then uses the reduced image's size). Much faster, not
   * bit-exact: docs/hash.md gives the measured agreement. */
  int32_t fast;
  /* Decompression-bomb guard: an image with more pixels fails with
   * ACCEL_ERR_LIMIT before any pixel is decoded. 0 = default, 256 000 000;
   * never more than the context's max_pixels. */
  uint64_t max_pixels;
  accel_progress_fn progress; /* stage "hash.batch", fraction of inputs done */
  void *progress_user;
  accel_hash_error_fn on_error; /* optional: the message of each failed input */
  void *error_user;
  /* phash's highfreq_factor, imagehash's phash(image, hash_size,
   * highfreq_factor): the image is resized to hash_size * highfreq_factor
   * pixels square before the DCT. 0 (default) means 4; else
   * 1..ACCEL_HASH_HIGHFREQ_MAX (larger: ACCEL_ERR_UNSUPPORTED). (Added
   * after the first layout: programs built without it get the default.) */
  int32_t phash_highfreq_factor;
  /* whash's image_scale (imagehash's whash(image, hash_size, image_scale)):
   * the side of the square the image is resized to before the wavelet
   * transform. 0 (default): imagehash's, the largest power of two not
   * above the image's smaller side (at least hash_size); else a power of
   * two >= hash_size (a smaller one or one that is not a power of two is
   * ACCEL_ERR_INVALID_ARG; one whose square exceeds max_pixels,
   * ACCEL_ERR_LIMIT). (Added after the second layout, as the next.) */
  int32_t whash_image_scale;
  /* 1: keep the coarsest Haar approximation, as imagehash's
   * remove_max_haar_ll=False; 0 (default): remove it, as imagehash does by
   * default. */
  int32_t whash_keep_max_ll;
  /* whash's wavelets: ACCEL_HASH_WHASH_HAAR (0, default) or
   * ACCEL_HASH_WHASH_DB4 (imagehash's mode="db4"). A db4 hash
   * has side^2 bits, as imagehash's: its approximation's side becomes
   * (side + 7) / 2 per level, hash_size + 6 from the third level on. With
   * whash_image_scale given, side follows from it; without, it is
   * hash_size + 6, and an image whose own image_scale is below
   * 8 x hash_size (a smaller hash) gets ACCEL_ERR_UNSUPPORTED. */
  int32_t whash_mode;
} accel_hash_options;

enum { ACCEL_HASH_WHASH_HAAR = 0, ACCEL_HASH_WHASH_DB4 = 1 };

ACCEL_API accel_status accel_hash_options_init(accel_hash_options *options, size_t struct_size);

/* Bits of one hash of `kind`: hash_size^2, or 14 * color_binbits for
 * colorhash. ACCEL_ERR_INVALID_ARG for an unknown kind or sizes the library
 * refuses (hash_size outside ACCEL_HASH_SIZE_MIN..MAX, where dhash_vertical
 * and whash also take 1 as imagehash does; whash's not a power of two;
 * color_binbits outside 1..24); *nbits is then left as it was. */
ACCEL_API accel_status accel_hash_bits(accel_hash_kind kind, int32_t hash_size, int32_t color_binbits, uint32_t *nbits);
/* Bytes each hash occupies in a batch's output: the largest
 * ceil(bits / 8) over options->kinds (NULL options: the defaults). Fails as
 * a batch would for these options: ACCEL_ERR_INVALID_ARG (nkinds, a kind
 * listed twice, a size accel_hash_bits refuses, fast not 0 or 1, a negative
 * phash_highfreq_factor), ACCEL_ERR_UNSUPPORTED (phash_highfreq_factor above
 * ACCEL_HASH_HIGHFREQ_MAX), ACCEL_ERR_VERSION. */
ACCEL_API accel_status accel_hash_slot_bytes(const accel_hash_options *options, size_t *slot_bytes);
/* Bits of each hash of `kind` a batch with these options writes (NULL: the
 * defaults): accel_hash_bits of their hash_size and color_binbits, except
 * whash with ACCEL_HASH_WHASH_DB4, whose approximation is side x side (side
 * hash_size + 6, or what an explicit whash_image_scale gives). `kind` need
 * not be among options->kinds. Fails as accel_hash_slot_bytes does, and
 * with ACCEL_ERR_INVALID_ARG for an unknown kind or NULL nbits (*nbits is
 * then left as it was). */
ACCEL_API accel_status accel_hash_kind_bits(const accel_hash_options *options, accel_hash_kind kind, uint32_t *nbits);

/*
 * Hash a batch of inputs. Outputs, caller-allocated:
 *   hashes    n * nkinds * slot_bytes bytes: input i, kind k (in the order of
 *             options->kinds) at hashes + (i * nkinds + k) * slot_bytes;
 *             the bytes of a slot past the hash's ceil(bits / 8) are zero,
 *             and all of an input's slots are zero when it fails;
 *   statuses  n entries: ACCEL_OK, or why input i failed (ACCEL_ERR_IO,
 *             ACCEL_ERR_FORMAT, ACCEL_ERR_DECODE, ACCEL_ERR_LIMIT, ...).
 * One failing input never fails the batch: the call returns ACCEL_OK when
 * the batch ran, and an error only for invalid arguments, ACCEL_ERR_CANCELLED
 * (progress callback) or a failure of the whole batch.
 *
 * Errors: ACCEL_ERR_INVALID_ARG (NULL ctx; NULL inputs, hashes or statuses
 * with n > 0; options as accel_hash_slot_bytes refuses them; slot_bytes
 * smaller than accel_hash_slot_bytes gives), ACCEL_ERR_VERSION,
 * ACCEL_ERR_OUT_OF_MEMORY, ACCEL_ERR_CANCELLED, and under
 * ACCEL_FALLBACK_DENY the GPU's failure (core.h). Invalid arguments leave
 * hashes and statuses untouched. After any other failure, an input whose
 * status is ACCEL_OK holds its hashes; every other input has all-zero slots
 * and an error status (inputs the batch never reached included). n = 0
 * succeeds without writing anything.
 *
 * CPU: inputs are decoded and hashed on the context's threads. CUDA: inputs
 * are decoded on the CPU threads while the GPU converts, resizes and hashes
 * the previous group; results are identical to the CPU's.
 */
ACCEL_API accel_status accel_hash_files(accel_ctx *ctx, const char *const *paths, size_t n,
                                        const accel_hash_options *options, uint8_t *hashes, size_t slot_bytes,
                                        accel_status *statuses);
/* The same for in-memory encoded files (JPEG or PNG bytes; data[i] may be
 * NULL when sizes[i] is 0). */
ACCEL_API accel_status accel_hash_buffers(accel_ctx *ctx, const void *const *data, const size_t *sizes, size_t n,
                                          const accel_hash_options *options, uint8_t *hashes, size_t slot_bytes,
                                          accel_status *statuses);
/* The same for decoded images: U8 arrays of shape (H, W) or (H, W, 1) ("L"),
 * (H, W, 2) ("LA"), (H, W, 3) ("RGB") or (H, W, 4) ("RGBA"), hashed as
 * imagehash hashes PIL.Image.fromarray(array). Any strides. Any other or an
 * empty array is ACCEL_ERR_INVALID_ARG for the whole call. On a CUDA
 * context an image may be a device array (core.h, accel_array_on_device;
 * C-contiguous), mixed with host ones: the GPU reads it in place (its pixels
 * are never copied through the host; a CPU fallback copies them down). The
 * hashes and statuses are host memory, as always. */
ACCEL_API accel_status accel_hash_arrays(accel_ctx *ctx, const accel_array *images, size_t n,
                                         const accel_hash_options *options, uint8_t *hashes, size_t slot_bytes,
                                         accel_status *statuses);

/* Write imagehash's hex string of an nbits hash (ceil(nbits / 4) digits and
 * a NUL). ACCEL_ERR_INVALID_ARG for a NULL pointer, nbits 0, or an out_size
 * too small (nothing written then). */
ACCEL_API accel_status accel_hash_to_hex(const uint8_t *hash, uint32_t nbits, char *out, size_t out_size);
/* Parse imagehash's hex string of an nbits hash (imagehash.hex_to_hash's
 * inverse of str()); writes ceil(nbits / 8) bytes. ACCEL_ERR_INVALID_ARG for
 * a NULL pointer, nbits 0, a wrong length, a non-hex digit, a value of more
 * than nbits bits, or an out_size below ceil(nbits / 8); `out` is
 * unspecified after a failure. */
ACCEL_API accel_status accel_hash_from_hex(const char *hex, uint32_t nbits, uint8_t *out, size_t out_size);
/* Hamming distance between two nbits hashes (imagehash's a - b); 0 for
 * nbits 0. ACCEL_ERR_INVALID_ARG for a NULL pointer only. */
ACCEL_API accel_status accel_hash_distance(const uint8_t *a, const uint8_t *b, uint32_t nbits, uint32_t *distance);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_HASH_H */
