/* TIFF images: accel_tiff_load_image on any bytes; an image that loads is
 * saved with accel_tiff_save_image (DEFLATE, tiles) and loaded again: it
 * must come back with the same dtype, shape and bytes. */
#include "fuzz.h"

static accel_status save_deflate_tiles(accel_ctx *ctx, const char *path, const accel_array *a) {
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  o.compression = ACCEL_TIFF_COMPRESSION_DEFLATE;
  o.tile_size = 16;
  return accel_tiff_save_image(ctx, path, a, &o);
}

static accel_status save_plain(accel_ctx *ctx, const char *path, const accel_array *a) {
  return accel_tiff_save_image(ctx, path, a, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO,          ACCEL_ERR_FORMAT,        ACCEL_ERR_LIMIT,
                                        ACCEL_ERR_UNSUPPORTED, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_OK};
  accel_buffer *b = NULL;
  if (!fuzz_load(accel_tiff_load_image, data, size, errors, &b)) return 0;
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.ndim == 2 || (v.ndim == 3 && v.shape[2] >= 1 && v.shape[2] <= 4));
  FUZZ_CHECK((uint64_t)v.shape[0] * (uint64_t)v.shape[1] <= FUZZ_MAX_PIXELS);
  fuzz_check_round_trip(accel_tiff_load_image, save_plain, "plain.tif", &v);
  fuzz_check_round_trip(accel_tiff_load_image, save_deflate_tiles, "tiles.tif", &v);
  accel_buffer_destroy(b);
  return 0;
}
