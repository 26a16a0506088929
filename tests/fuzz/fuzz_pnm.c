/* PGM/PPM: accel_pnm_load on any bytes; an image that loads is saved and
 * loaded again, and must come back unchanged. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT, ACCEL_ERR_OUT_OF_MEMORY,
                                        ACCEL_OK};
  accel_buffer *b = NULL;
  if (!fuzz_load(accel_pnm_load, data, size, errors, &b)) return 0;
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.dtype == ACCEL_DTYPE_U8 || v.dtype == ACCEL_DTYPE_U16);
  FUZZ_CHECK(v.ndim == 2 || (v.ndim == 3 && v.shape[2] == 3));
  FUZZ_CHECK(v.shape[0] >= 1 && v.shape[1] >= 1);
  FUZZ_CHECK((uint64_t)v.shape[0] * (uint64_t)v.shape[1] <= FUZZ_MAX_PIXELS);
  FUZZ_CHECK((uint64_t)fuzz_count(&v) * accel_dtype_size(v.dtype) <= size);
  fuzz_check_round_trip(accel_pnm_load, accel_pnm_save, "out.pnm", &v);
  accel_buffer_destroy(b);
  return 0;
}
