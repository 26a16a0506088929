/* NPY: accel_npy_load on any bytes; an array that loads is saved and loaded
 * again, and must come back unchanged (dtype, shape, values). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_OK};
  accel_ctx *ctx = fuzz_ctx();
  accel_buffer *b = NULL;
  accel_status s = accel_npy_load(ctx, fuzz_input_path(data, size), &b);
  if (s != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(s, errors, b);
    return 0;
  }
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.ndim >= 0 && v.ndim <= ACCEL_ARRAY_MAX_DIMS);
  FUZZ_CHECK(accel_dtype_size(v.dtype) > 0);
  /* the data was in the file: it cannot be larger than the input */
  FUZZ_CHECK((uint64_t)fuzz_count(&v) * accel_dtype_size(v.dtype) <= size);

  const char *out = fuzz_scratch_path("out.npy");
  FUZZ_CHECK(accel_npy_save(ctx, out, &v) == ACCEL_OK);
  accel_buffer *r = NULL;
  FUZZ_CHECK(accel_npy_load(ctx, out, &r) == ACCEL_OK);
  accel_array rv = fuzz_view(r);
  FUZZ_CHECK(fuzz_same_array(&v, &rv));
  accel_buffer_destroy(r);
  accel_buffer_destroy(b);
  return 0;
}
