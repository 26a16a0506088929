/* JPEG/PNG: accel_image_decode_buffer to RGB and to gray, then
 * accel_hash_buffers with all six hash kinds on the same bytes.
 *
 * Hashing decodes with the same rules as accel_image_decode_buffer, so an
 * input decodes if and only if it hashes; and as imagehash converts to "L"
 * before all but colorhash, the gray hashes of the file equal those of its
 * decoded gray image (accel_hash_arrays): checked for the three that only
 * resample (ahash, dhash, dhash_vertical), which see every gray pixel, while
 * phash and whash would add their arithmetic, not a check of the decoding. */
#include "fuzz.h"

#include <string.h>

enum { HASH_SIZE = 8, NKINDS = ACCEL_HASH_KIND_COUNT };

/* The first nkinds kinds, in accel_hash_kind order. */
static void hash_options(accel_hash_options *o, uint32_t nkinds) {
  FUZZ_CHECK(accel_hash_options_init(o, sizeof *o) == ACCEL_OK);
  o->nkinds = nkinds;
  for (uint32_t k = 0; k < nkinds; k++) o->kinds[k] = (accel_hash_kind)k;
  o->hash_size = HASH_SIZE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_FORMAT, ACCEL_ERR_DECODE, ACCEL_ERR_LIMIT, ACCEL_ERR_OUT_OF_MEMORY,
                                        ACCEL_OK};
  accel_ctx *ctx = fuzz_ctx();

  accel_decode_options dopt;
  FUZZ_CHECK(accel_decode_options_init(&dopt, sizeof dopt) == ACCEL_OK);
  accel_image_info info;
  FUZZ_CHECK(accel_image_info_init(&info, sizeof info) == ACCEL_OK);
  accel_buffer *rgb = NULL, *gray = NULL;
  dopt.target = ACCEL_DECODE_RGB;
  const accel_status srgb = accel_image_decode_buffer(ctx, data, size, &dopt, &rgb, &info);
  dopt.target = ACCEL_DECODE_GRAY;
  const accel_status sgray = accel_image_decode_buffer(ctx, data, size, &dopt, &gray, NULL);
  FUZZ_CHECK(srgb == sgray);
  if (srgb != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(srgb, errors, rgb);
    FUZZ_CHECK(gray == NULL);
  } else {
    const accel_array vr = fuzz_view(rgb), vg = fuzz_view(gray);
    FUZZ_CHECK(vr.dtype == ACCEL_DTYPE_U8 && vr.ndim == 3 && vr.shape[2] == 3);
    FUZZ_CHECK(vg.dtype == ACCEL_DTYPE_U8 && vg.ndim == 2);
    FUZZ_CHECK(vr.shape[0] == info.height && vr.shape[1] == info.width);
    FUZZ_CHECK(vg.shape[0] == info.height && vg.shape[1] == info.width);
    FUZZ_CHECK(info.width >= 1 && info.height >= 1 && (uint64_t)info.width * (uint64_t)info.height <= FUZZ_MAX_PIXELS);
    FUZZ_CHECK(info.format == ACCEL_IMAGE_FORMAT_JPEG || info.format == ACCEL_IMAGE_FORMAT_PNG);
    FUZZ_CHECK(info.mode >= ACCEL_IMAGE_MODE_1 && info.mode <= ACCEL_IMAGE_MODE_I);
  }

  accel_hash_options o;
  hash_options(&o, NKINDS);
  size_t slot = 0;
  FUZZ_CHECK(accel_hash_slot_bytes(&o, &slot) == ACCEL_OK && slot > 0 && slot <= ACCEL_HASH_MAX_BYTES);
  uint8_t hashes[NKINDS * ACCEL_HASH_MAX_BYTES];
  accel_status hs = ACCEL_ERR_INTERNAL;
  const void *ptr = data;
  FUZZ_CHECK(accel_hash_buffers(ctx, &ptr, &size, 1, &o, hashes, slot, &hs) == ACCEL_OK);
  FUZZ_CHECK(hs == srgb);
  if (hs == ACCEL_OK) {
    for (uint32_t k = 0; k < NKINDS; k++) {
      uint32_t bits = 0;
      FUZZ_CHECK(accel_hash_bits((accel_hash_kind)k, o.hash_size, o.color_binbits, &bits) == ACCEL_OK);
      char hex[ACCEL_HASH_MAX_BYTES * 2 + 1];
      uint8_t back[ACCEL_HASH_MAX_BYTES];
      FUZZ_CHECK(accel_hash_to_hex(hashes + k * slot, bits, hex, sizeof hex) == ACCEL_OK);
      FUZZ_CHECK(accel_hash_from_hex(hex, bits, back, sizeof back) == ACCEL_OK);
      FUZZ_CHECK(memcmp(back, hashes + k * slot, (bits + 7) / 8) == 0);
    }
    /* ahash, dhash and dhash_vertical of the decoded gray image */
    accel_hash_options og;
    hash_options(&og, ACCEL_HASH_PHASH);
    size_t gslot = 0;
    FUZZ_CHECK(accel_hash_slot_bytes(&og, &gslot) == ACCEL_OK && gslot == slot);
    uint8_t ghashes[NKINDS * ACCEL_HASH_MAX_BYTES];
    accel_status gs = ACCEL_ERR_INTERNAL;
    const accel_array vg = fuzz_view(gray);
    FUZZ_CHECK(accel_hash_arrays(ctx, &vg, 1, &og, ghashes, gslot, &gs) == ACCEL_OK);
    FUZZ_CHECK(gs == ACCEL_OK);
    FUZZ_CHECK(memcmp(ghashes, hashes, ACCEL_HASH_PHASH * slot) == 0);
  } else {
    for (size_t i = 0; i < NKINDS * slot; i++) FUZZ_CHECK(hashes[i] == 0);
  }
  accel_buffer_destroy(gray);
  accel_buffer_destroy(rgb);
  return 0;
}
