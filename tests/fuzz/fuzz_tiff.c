/* TIFF: accel_tiff_load on any bytes; a raster that loads is saved with its
 * georeferencing (accel_tiff_save) and loaded again: the values (NaN where
 * the first load had NaN) and the pixel size must come back unchanged. */
#include "fuzz.h"

#include <math.h>
#include <string.h>

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT, ACCEL_ERR_OUT_OF_MEMORY,
                                        ACCEL_OK};
  accel_ctx *ctx = fuzz_ctx();
  accel_buffer *b = NULL;
  accel_geo *geo = NULL;
  accel_status s = accel_tiff_load(ctx, fuzz_input_path(data, size), &b, &geo);
  if (s != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(s, errors, b);
    FUZZ_CHECK(geo == NULL);
    return 0;
  }
  FUZZ_CHECK(geo != NULL);
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.dtype == ACCEL_DTYPE_F32 && v.ndim == 2);
  FUZZ_CHECK(v.shape[0] >= 1 && v.shape[1] >= 1);
  FUZZ_CHECK((uint64_t)v.shape[0] * (uint64_t)v.shape[1] <= FUZZ_MAX_PIXELS);
  double px = 0, py = 0;
  const accel_status ps = accel_geo_pixel_size(geo, &px, &py);
  FUZZ_CHECK(ps == ACCEL_OK || ps == ACCEL_ERR_NOT_FOUND);

  const char *out = fuzz_scratch_path("out.tif");
  FUZZ_CHECK(accel_tiff_save(ctx, out, &v, geo) == ACCEL_OK);
  accel_buffer *r = NULL;
  accel_geo *rgeo = NULL;
  FUZZ_CHECK(accel_tiff_load(ctx, out, &r, &rgeo) == ACCEL_OK);
  accel_array rv = fuzz_view(r);
  FUZZ_CHECK(rv.dtype == ACCEL_DTYPE_F32 && rv.ndim == 2);
  FUZZ_CHECK(rv.shape[0] == v.shape[0] && rv.shape[1] == v.shape[1]);
  const float *a = v.data, *c = rv.data;
  for (int64_t i = 0, n = fuzz_count(&v); i < n; i++)
    FUZZ_CHECK((isnan(a[i]) && isnan(c[i])) || memcmp(&a[i], &c[i], sizeof a[i]) == 0);
  double rx = 0, ry = 0;
  FUZZ_CHECK(accel_geo_pixel_size(rgeo, &rx, &ry) == ps);
  FUZZ_CHECK(ps != ACCEL_OK || (same_double(px, rx) && same_double(py, ry)));

  accel_geo_destroy(rgeo);
  accel_buffer_destroy(r);
  accel_geo_destroy(geo);
  accel_buffer_destroy(b);
  return 0;
}
