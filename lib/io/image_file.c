/* One loader for the image files of registration: TIFF with its samples as
 * stored, PNG and JPEG through the decoders that reproduce Pillow. */
#include "image/convert.h"
#include "io/file.h"

#include "accel/io.h"

#include <stdbool.h>
#include <stdio.h>

/* TIFF's four signatures: classic and BigTIFF, either byte order. */
static bool is_tiff(const uint8_t *h, size_t n) {
  if (n < 4) return false;
  return (h[0] == 'I' && h[1] == 'I' && (h[2] == 42 || h[2] == 43) && h[3] == 0) ||
         (h[0] == 'M' && h[1] == 'M' && h[2] == 0 && (h[3] == 42 || h[3] == 43));
}

accel_status accel_image_load(accel_ctx *ctx, const char *path, accel_buffer **out) {
  REQUIRE(ctx, path && out, ACCEL_ERR_INVALID_ARG, "path and out are required");
  *out = NULL;
  FILE *f;
  int64_t size;
  accel_status s = accel__open_read(ctx, __func__, path, &f, &size);
  if (s) return s;
  uint8_t head[8];
  const size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  if (is_tiff(head, n)) return accel_tiff_load_image(ctx, path, out);
  return accel__image_decode_native(ctx, __func__, path, out);
}
