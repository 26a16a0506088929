/* Hash API: options, argument checks, the batch through the dispatcher,
 * per-input error reports, hex and Hamming helpers. */
#include "hash/ops.h"

#include "accel/hash.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  HASH_OPTIONS_V1_SIZE = offsetof(accel_hash_options, phash_highfreq_factor), /* the first release's */
  DEFAULT_MAX_PIXELS = 256000000,
  DEFAULT_HIGHFREQ = 4 /* imagehash's phash */
};

static const char *const KIND_NAMES[ACCEL_HASH_KIND_COUNT] = {"ahash", "dhash", "dhash_vertical",
                                                              "phash", "whash", "colorhash"};

const char *accel_hash_kind_name(accel_hash_kind kind) {
  return (unsigned)kind < ACCEL_HASH_KIND_COUNT ? KIND_NAMES[kind] : "unknown";
}

accel_status accel_hash_kind_from_string(const char *name, accel_hash_kind *kind) {
  REQUIRE(NULL, name && kind, ACCEL_ERR_INVALID_ARG, "NULL argument");
  int i = 0;
  accel_status s = accel__parse_name(name, KIND_NAMES, ACCEL_HASH_KIND_COUNT, "average_hash", ACCEL_HASH_AHASH,
                                     "hash kind", "ahash, dhash, dhash_vertical, phash, whash, colorhash", &i);
  if (!s) *kind = (accel_hash_kind)i;
  return s;
}

accel_status accel_hash_options_init(accel_hash_options *o, size_t struct_size) {
  static const accel_hash_options DEFAULTS = {
      .nkinds = 4,
      .kinds = {ACCEL_HASH_AHASH, ACCEL_HASH_DHASH, ACCEL_HASH_PHASH, ACCEL_HASH_WHASH},
      .hash_size = 8,
      .color_binbits = 3};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, HASH_OPTIONS_V1_SIZE);
}

static bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

static accel_status bits_of(const accel_ctx *ctx, accel_hash_kind kind, int32_t n, int32_t binbits, uint32_t *nbits) {
  if ((unsigned)kind >= ACCEL_HASH_KIND_COUNT)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "unknown hash kind %d", (int)kind);
  if (kind == ACCEL_HASH_COLORHASH) {
    /* Up to 24, imagehash's int64 count * 2^binbits cannot overflow below 2^39 pixels (nor this code's). */
    if (binbits < 1 || binbits > 24)
      return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "color_binbits %d outside 1..24", (int)binbits);
    *nbits = 14u * (uint32_t)binbits;
    return ACCEL_OK;
  }
  /* imagehash's dhash_vertical and whash take a hash size of 1 (one bit); its other hashes refuse it. */
  const int32_t min = kind == ACCEL_HASH_DHASH_VERTICAL || kind == ACCEL_HASH_WHASH ? 1 : ACCEL_HASH_SIZE_MIN;
  if (n < min || n > ACCEL_HASH_SIZE_MAX)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "hash_size %d outside %d..%d", (int)n, (int)min,
                       ACCEL_HASH_SIZE_MAX);
  if (kind == ACCEL_HASH_WHASH && !power_of_two(n))
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "whash needs a power-of-two hash_size, not %d", (int)n);
  *nbits = (uint32_t)(n * n);
  return ACCEL_OK;
}

accel_status accel_hash_bits(accel_hash_kind kind, int32_t hash_size, int32_t color_binbits, uint32_t *nbits) {
  REQUIRE(NULL, nbits, ACCEL_ERR_INVALID_ARG, "nbits is NULL");
  return bits_of(NULL, kind, hash_size, color_binbits, nbits);
}

/* whash's bits under these options: db4's approximation is side x side
 * (from an explicit image_scale, else hash_size + 6); Haar's, nbits. */
static uint32_t whash_bits(const accel_hash_options *o, uint32_t nbits) {
  if (o->whash_mode != ACCEL_HASH_WHASH_DB4) return nbits;
  const int side = o->whash_image_scale ? accel__whash_db4_side(o->hash_size, o->whash_image_scale) : o->hash_size + 6;
  return (uint32_t)(side * side);
}

/* Validate options (NULL = defaults) into a spec. */
static accel_status resolve(const accel_ctx *ctx, const char *func, const accel_hash_options *in, accel_hash_options *o,
                            accel__hash_spec *spec) {
  accel_hash_options_init(o, sizeof *o);
  if (in) {
    accel_status s = accel__versioned_in(ctx, func, "options", in, o, sizeof *o, HASH_OPTIONS_V1_SIZE);
    if (s) return s;
  }
  if (o->nkinds < 1 || o->nkinds > ACCEL_HASH_KIND_COUNT)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "nkinds %u outside 1..%d", o->nkinds,
                          ACCEL_HASH_KIND_COUNT);
  memset(spec, 0, sizeof *spec);
  spec->nkinds = (int)o->nkinds;
  spec->hash_size = o->hash_size;
  spec->binbits = o->color_binbits;
  /* imagehash takes any positive factor; larger ones than these are not implemented */
  spec->highfreq = o->phash_highfreq_factor ? o->phash_highfreq_factor : DEFAULT_HIGHFREQ;
  if (spec->highfreq < 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "phash_highfreq_factor %d is negative",
                          (int)o->phash_highfreq_factor);
  if (spec->highfreq > ACCEL_HASH_HIGHFREQ_MAX)
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED, "phash_highfreq_factor %d above the supported %d",
                          (int)o->phash_highfreq_factor, ACCEL_HASH_HIGHFREQ_MAX);
  if (o->whash_image_scale && (!power_of_two(o->whash_image_scale) || o->whash_image_scale < o->hash_size))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "whash_image_scale %d must be a power of two not below hash_size %d (imagehash: "
                          "\"image_scale is not power of 2\", \"hash_size in a wrong range\")",
                          (int)o->whash_image_scale, (int)o->hash_size);
  const uint64_t cap = o->max_pixels ? o->max_pixels : DEFAULT_MAX_PIXELS;
  if (o->whash_image_scale && (uint64_t)o->whash_image_scale * (uint64_t)o->whash_image_scale > cap)
    return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "whash_image_scale %d: %llu pixels, above max_pixels %llu",
                          (int)o->whash_image_scale,
                          (unsigned long long)o->whash_image_scale * (unsigned long long)o->whash_image_scale,
                          (unsigned long long)cap);
  spec->whash_scale = o->whash_image_scale;
  spec->whash_keep_ll = o->whash_keep_max_ll != 0;
  if (o->whash_mode != ACCEL_HASH_WHASH_HAAR && o->whash_mode != ACCEL_HASH_WHASH_DB4)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "whash_mode %d is neither Haar (0) nor db4 (1)",
                          (int)o->whash_mode);
  spec->whash_db4 = o->whash_mode == ACCEL_HASH_WHASH_DB4;
  for (uint32_t k = 0; k < o->nkinds; k++) {
    uint32_t nbits = 0;
    accel_status s = bits_of(ctx, o->kinds[k], o->hash_size, o->color_binbits, &nbits);
    if (s) return s;
    if (o->kinds[k] == ACCEL_HASH_WHASH) nbits = whash_bits(o, nbits);
    for (uint32_t j = 0; j < k; j++)
      if (o->kinds[j] == o->kinds[k])
        return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "kind %s is listed twice",
                              accel_hash_kind_name(o->kinds[k]));
    spec->kinds[k] = o->kinds[k];
    size_t bytes = (nbits + 7) / 8;
    if (bytes > spec->slot_bytes) spec->slot_bytes = bytes;
    if (o->kinds[k] == ACCEL_HASH_COLORHASH) spec->need_color = true;
    else spec->need_gray = true;
  }
  if (o->fast != 0 && o->fast != 1) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "fast must be 0 or 1");
  return ACCEL_OK;
}

accel_status accel_hash_slot_bytes(const accel_hash_options *options, size_t *slot_bytes) {
  REQUIRE(NULL, slot_bytes, ACCEL_ERR_INVALID_ARG, "slot_bytes is NULL");
  accel_hash_options o;
  accel__hash_spec spec;
  accel_status s = resolve(NULL, __func__, options, &o, &spec);
  if (s) return s;
  *slot_bytes = spec.slot_bytes;
  return ACCEL_OK;
}

accel_status accel_hash_kind_bits(const accel_hash_options *options, accel_hash_kind kind, uint32_t *nbits) {
  REQUIRE(NULL, nbits, ACCEL_ERR_INVALID_ARG, "nbits is NULL");
  accel_hash_options o;
  accel__hash_spec spec;
  accel_status s = resolve(NULL, __func__, options, &o, &spec);
  if (s) return s;
  uint32_t n = 0;
  if ((s = bits_of(NULL, kind, o.hash_size, o.color_binbits, &n))) return s;
  *nbits = kind == ACCEL_HASH_WHASH ? whash_bits(&o, n) : n;
  return ACCEL_OK;
}

/* Fast mode: the largest resize target of the requested kinds (whash then
 * works from the reduced image); Pillow's draft() picks the JPEG scale. */
static void draft_size(const accel__hash_spec *spec, int64_t *w, int64_t *h) {
  int64_t dw = 0, dh = 0;
  for (int k = 0; k < spec->nkinds; k++) {
    int64_t tw = 0, th = 0;
    if (spec->kinds[k] == ACCEL_HASH_WHASH) tw = th = spec->whash_scale ? spec->whash_scale : spec->hash_size;
    else if (spec->kinds[k] != ACCEL_HASH_COLORHASH) accel__hash_target(spec, spec->kinds[k], 1, 1, &tw, &th);
    if (tw > dw) dw = tw;
    if (th > dh) dh = th;
  }
  *w = dw;
  *h = dh;
}

ACCEL__STAGE_FN(run_batch, hash, batch, job)

static accel_status hash_batch(accel_ctx *ctx, const char *func, accel__hash_job *job, const accel_hash_options *in,
                               uint8_t *hashes, size_t slot_bytes, accel_status *statuses,
                               const accel__device_slot *slots, int nslots) {
  accel_hash_options o;
  accel_status s = resolve(ctx, func, in, &o, &job->spec);
  if (s) return s;
  if (job->n && (!hashes || !statuses))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "hashes and statuses must not be NULL");
  if (slot_bytes < job->spec.slot_bytes)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "slot_bytes %zu is smaller than the %zu these kinds need",
                          slot_bytes, job->spec.slot_bytes);
  job->spec.slot_bytes = slot_bytes;
  job->hashes = hashes;
  job->statuses = statuses;
  job->progress = o.progress;
  job->progress_user = o.progress_user;
  job->decode.max_pixels = o.max_pixels ? o.max_pixels : DEFAULT_MAX_PIXELS;
  if (job->decode.max_pixels > accel__ctx_max_pixels(ctx)) job->decode.max_pixels = accel__ctx_max_pixels(ctx);
  if (o.fast) draft_size(&job->spec, &job->decode.draft_width, &job->decode.draft_height);
  if (job->n == 0) return ACCEL_OK;
  job->messages = calloc(job->n, sizeof(char *));
  if (!job->messages) return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  memset(hashes, 0, job->n * (size_t)job->spec.nkinds * slot_bytes);
  for (size_t i = 0; i < job->n; i++) statuses[i] = ACCEL_ERR_INTERNAL;

  s = accel__dispatch_device(ctx, "hash.batch", run_batch, job, slots, nslots);
  if (s == ACCEL_OK && o.on_error)
    for (size_t i = 0; i < job->n; i++)
      if (statuses[i] != ACCEL_OK) o.on_error(o.error_user, i, statuses[i], job->messages[i] ? job->messages[i] : "");
  for (size_t i = 0; i < job->n; i++) free(job->messages[i]);
  free(job->messages);
  return s;
}

accel_status accel_hash_files(accel_ctx *ctx, const char *const *paths, size_t n, const accel_hash_options *options,
                              uint8_t *hashes, size_t slot_bytes, accel_status *statuses) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  if (n && !paths) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "paths is NULL");
  for (size_t i = 0; i < n; i++) REQUIRE(ctx, paths[i], ACCEL_ERR_INVALID_ARG, "paths[%zu] is NULL", i);
  accel__hash_job job = {.source = ACCEL__SRC_FILES, .n = n, .paths = paths};
  return hash_batch(ctx, __func__, &job, options, hashes, slot_bytes, statuses, NULL, 0);
}

accel_status accel_hash_buffers(accel_ctx *ctx, const void *const *data, const size_t *sizes, size_t n,
                                const accel_hash_options *options, uint8_t *hashes, size_t slot_bytes,
                                accel_status *statuses) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  if (n && (!data || !sizes)) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "data or sizes is NULL");
  for (size_t i = 0; i < n; i++)
    if (!data[i] && sizes[i]) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "data[%zu] is NULL", i);
  accel__hash_job job = {.source = ACCEL__SRC_BUFFERS, .n = n, .data = data, .sizes = sizes};
  return hash_batch(ctx, __func__, &job, options, hashes, slot_bytes, statuses, NULL, 0);
}

/* The images of accel_hash_arrays checked; device images (accepted on a
 * GPU context) described in plain[] with a slot each for a CPU run. */
static accel_status check_images(accel_ctx *ctx, const char *func, const accel_array *images, size_t n,
                                 accel_array *plain, bool *on_device, accel__device_slot *slots, int *nslots) {
  for (size_t i = 0; i < n; i++) {
    char what[32];
    snprintf(what, sizeof what, "images[%zu]", i);
    const accel_array *a;
    accel_status s = accel__array_accept(ctx, func, what, &images[i], &plain[i], &a, &on_device[i]);
    if (!s && !on_device[i]) s = accel__array_check(ctx, func, what, a);
    if (s) return s;
    if (a->dtype != ACCEL_DTYPE_U8 || (a->ndim != 2 && a->ndim != 3) ||
        (a->ndim == 3 && (a->shape[2] < 1 || a->shape[2] > 4)) || a->shape[0] < 1 || a->shape[1] < 1)
      return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "%s must be a non-empty U8 (H, W) or (H, W, C) array with C in 1..4",
                  what);
    if (!on_device[i]) {
      plain[i] = images[i];
      continue;
    }
    const int64_t bytes = a->shape[0] * a->shape[1] * (a->ndim == 3 ? a->shape[2] : 1);
    slots[(*nslots)++] = (accel__device_slot){.ptr = &plain[i].data, .bytes = (size_t)bytes, .in = true};
  }
  return ACCEL_OK;
}

accel_status accel_hash_arrays(accel_ctx *ctx, const accel_array *images, size_t n, const accel_hash_options *options,
                               uint8_t *hashes, size_t slot_bytes, accel_status *statuses) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  if (n && !images) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "images is NULL");
  accel_array *plain = n ? malloc(n * sizeof *plain) : NULL;
  bool *on_device = n ? calloc(n, sizeof *on_device) : NULL;
  accel__device_slot *slots = n ? malloc(n * sizeof *slots) : NULL;
  if (n && (!plain || !on_device || !slots)) {
    free(plain), free(on_device), free(slots);
    return FAIL(ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for %zu image descriptions", n);
  }
  int nslots = 0;
  accel_status s = check_images(ctx, __func__, images, n, plain, on_device, slots, &nslots);
  if (!s) {
    accel__hash_job job = {
        .source = ACCEL__SRC_ARRAYS, .n = n, .arrays = plain, .on_device = nslots ? on_device : NULL};
    s = hash_batch(ctx, __func__, &job, options, hashes, slot_bytes, statuses, slots, nslots);
  }
  free(plain), free(on_device), free(slots);
  return s;
}

/* ------------------------------------------------------------ hex, distance */

accel_status accel_hash_to_hex(const uint8_t *hash, uint32_t nbits, char *out, size_t out_size) {
  if (!hash || !out || nbits == 0) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "NULL argument or zero bits");
  const uint32_t digits = (nbits + 3) / 4;
  if (out_size < (size_t)digits + 1)
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "%u bits need %u characters and a NUL", nbits, digits);
  /* digit d (from the right) holds bits n-1-4d-3 .. n-1-4d of the number, i.e.
   * array bits b[n-4-4d] .. b[n-1-4d] (those below 0 are leading zeros) */
  static const char HEX[] = "0123456789abcdef";
  for (uint32_t d = 0; d < digits; d++) {
    unsigned v = 0;
    for (int k = 3; k >= 0; k--) {
      int64_t bit = (int64_t)nbits - 1 - 4 * (int64_t)d - k;
      v = v << 1 | (bit >= 0 ? (hash[bit >> 3] >> (7 - (bit & 7))) & 1u : 0u);
    }
    out[digits - 1 - d] = HEX[v];
  }
  out[digits] = '\0';
  return ACCEL_OK;
}

accel_status accel_hash_from_hex(const char *hex, uint32_t nbits, uint8_t *out, size_t out_size) {
  if (!hex || !out || nbits == 0) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "NULL argument or zero bits");
  const uint32_t digits = (nbits + 3) / 4, bytes = (nbits + 7) / 8;
  if (strlen(hex) != digits) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "\"%s\" is not %u hex digits", hex, digits);
  if (out_size < bytes) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "out_size < %u", bytes);
  memset(out, 0, bytes);
  for (uint32_t d = 0; d < digits; d++) {
    char c = hex[digits - 1 - d];
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "'%c' is not a hex digit", c);
    for (int k = 3; k >= 0; k--) {
      int64_t bit = (int64_t)nbits - 1 - 4 * (int64_t)d - k;
      if ((v >> k) & 1) {
        if (bit < 0) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "\"%s\" has more than %u bits", hex, nbits);
        out[bit >> 3] |= (uint8_t)(0x80u >> (bit & 7));
      }
    }
  }
  return ACCEL_OK;
}

accel_status accel_hash_distance(const uint8_t *a, const uint8_t *b, uint32_t nbits, uint32_t *distance) {
  REQUIRE(NULL, a && b && distance, ACCEL_ERR_INVALID_ARG, "NULL argument");
  uint32_t d = 0, full = nbits / 8;
  for (uint32_t i = 0; i < full; i++) d += (uint32_t)__builtin_popcount((unsigned)(a[i] ^ b[i]));
  if (nbits % 8)
    d += (uint32_t)__builtin_popcount((unsigned)((a[full] ^ b[full]) & (0xffu << (8 - nbits % 8)) & 0xffu));
  *distance = d;
  return ACCEL_OK;
}
