/* PGM/PPM: accel_pnm_load on any bytes; an image that loads is saved and
 * loaded again, and must come back unchanged. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT, ACCEL_ERR_OUT_OF_MEMORY,
                                        ACCEL_OK};
  accel_ctx *ctx = fuzz_ctx();
  accel_buffer *b = NULL;
  accel_status s = accel_pnm_load(ctx, fuzz_input_path(data, size), &b);
  if (s != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(s, errors, b);
    return 0;
  }
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.dtype == ACCEL_DTYPE_U8 || v.dtype == ACCEL_DTYPE_U16);
  FUZZ_CHECK(v.ndim == 2 || (v.ndim == 3 && v.shape[2] == 3));
  FUZZ_CHECK(v.shape[0] >= 1 && v.shape[1] >= 1);
  FUZZ_CHECK((uint64_t)v.shape[0] * (uint64_t)v.shape[1] <= FUZZ_MAX_PIXELS);
  FUZZ_CHECK((uint64_t)fuzz_count(&v) * accel_dtype_size(v.dtype) <= size);

  const char *out = fuzz_scratch_path("out.pnm");
  FUZZ_CHECK(accel_pnm_save(ctx, out, &v) == ACCEL_OK);
  accel_buffer *r = NULL;
  FUZZ_CHECK(accel_pnm_load(ctx, out, &r) == ACCEL_OK);
  accel_array rv = fuzz_view(r);
  FUZZ_CHECK(fuzz_same_array(&v, &rv));
  accel_buffer_destroy(r);
  accel_buffer_destroy(b);
  return 0;
}
