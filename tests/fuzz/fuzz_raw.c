/* Raw volumes: accel_raw_load with the dtype, shape and offset taken from the
 * first bytes of the input, the rest being the file.
 *
 *   byte 0   dtype: the value mod 12 (0 and 11 are invalid dtypes)
 *   byte 1   ndim: the value mod 10 (0 and 9 are invalid)
 *   byte 2   bit 0 clear, "fitted": extents are 1 + (a byte mod 16), one byte
 *            each for all but the last, which is fitted to the file; the
 *            offset is byte 3 (at most the file's size). Then the file.
 *            bit 0 set, "literal": ndim little-endian int64 extents (any
 *            value: negative, overflowing), a uint64 offset, then the file.
 *   byte 3   the fitted offset
 *
 * A load that succeeds must give the requested dtype and shape and the file's
 * bytes after the offset; a fitted request whose sizes agree must succeed. */
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_INVALID_ARG,   ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT,
                                        ACCEL_ERR_OUT_OF_MEMORY, ACCEL_OK};
  if (size < 4) return 0;
  const accel_dtype dtype = (accel_dtype)(data[0] % 12);
  const int32_t ndim = data[1] % 10;
  const bool literal = data[2] & 1;
  const size_t item = accel_dtype_size(dtype);
  int64_t shape[ACCEL_ARRAY_MAX_DIMS + 1] = {0};
  uint64_t offset = 0;
  size_t pos = 4;
  bool expect_ok = false; /* a request the library must accept */
  if (literal) {
    if (size < pos + 8 * (size_t)ndim + 8) return 0;
    for (int i = 0; i < ndim; i++, pos += 8) shape[i] = (int64_t)fuzz_le64(data + pos);
    offset = fuzz_le64(data + pos);
    pos += 8;
  } else {
    const size_t lead = ndim > 1 ? (size_t)ndim - 1 : 0;
    if (size < pos + lead) return 0;
    uint64_t inner = 1;
    for (size_t i = 0; i < lead; i++, pos++) {
      shape[i] = 1 + data[pos] % 16;
      inner *= (uint64_t)shape[i];
    }
    const uint64_t fsize = size - pos;
    offset = data[3] <= fsize ? data[3] : fsize;
    if (ndim >= 1) {
      const uint64_t row = item ? item * inner : 1;
      shape[ndim - 1] = (int64_t)((fsize - offset) / row);
      expect_ok = item && ndim <= ACCEL_ARRAY_MAX_DIMS && (fsize - offset) % row == 0;
    }
  }
  const uint8_t *file = data + pos;
  const size_t fsize = size - pos;

  accel_ctx *ctx = fuzz_ctx();
  accel_buffer *b = NULL;
  accel_status s = accel_raw_load(ctx, fuzz_input_path(file, fsize), dtype, ndim, shape, offset, &b);
  if (s != ACCEL_OK) {
    FUZZ_CHECK(!expect_ok);
    FUZZ_CHECK_FAILURE(s, errors, b);
    return 0;
  }
  accel_array v = fuzz_view(b);
  FUZZ_CHECK(v.dtype == dtype && v.ndim == ndim);
  for (int i = 0; i < ndim; i++) FUZZ_CHECK(v.shape[i] == shape[i]);
  FUZZ_CHECK(offset <= fsize);
  const uint64_t bytes = (uint64_t)fuzz_count(&v) * item;
  FUZZ_CHECK(offset + bytes == fsize);
  FUZZ_CHECK(bytes == 0 || memcmp(v.data, file + offset, (size_t)bytes) == 0);
  accel_buffer_destroy(b);
  return 0;
}
