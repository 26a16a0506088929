/* NPY: accel_npy_load on any bytes; an array that loads is saved and loaded
 * again, and must come back unchanged (dtype, shape, values). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_OK};
  accel_buffer *b = NULL;
  if (!fuzz_load(accel_npy_load, data, size, errors, &b)) return 0;
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.ndim >= 0 && v.ndim <= ACCEL_ARRAY_MAX_DIMS);
  FUZZ_CHECK(accel_dtype_size(v.dtype) > 0);
  /* the data was in the file: it cannot be larger than the input */
  FUZZ_CHECK((uint64_t)fuzz_count(&v) * accel_dtype_size(v.dtype) <= size);
  fuzz_check_round_trip(accel_npy_load, accel_npy_save, "out.npy", &v);
  accel_buffer_destroy(b);
  return 0;
}
