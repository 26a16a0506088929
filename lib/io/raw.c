/* Raw volumes: C-ordered little-endian elements, shape and dtype given. */
#include "io/file.h"

#include "accel/io.h"

#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libaccel's file formats assume a little-endian host"
#endif

accel_status accel_raw_load(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim, const int64_t *shape,
                            uint64_t offset, accel_buffer **out) {
  if (!path || !out || (ndim && !shape)) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  const size_t item = accel_dtype_size(dtype);
  REQUIRE(ctx, item, ACCEL_ERR_INVALID_ARG, "invalid dtype %d", (int)dtype);
  if (ndim < 1 || ndim > ACCEL_ARRAY_MAX_DIMS)
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "ndim %d outside 1..%d", (int)ndim, ACCEL_ARRAY_MAX_DIMS);
  size_t bytes = item;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "negative extent %lld", (long long)shape[i]);
    if (accel__mul_overflow(bytes, (size_t)shape[i], &bytes) || bytes > (size_t)INT64_MAX)
      return FAIL(ctx, ACCEL_ERR_LIMIT, "the shape's size overflows");
  }
  FILE *f = NULL;
  int64_t size = 0;
  accel_status s = accel__open_read(ctx, __func__, path, &f, &size);
  if (s) return s;
  if (offset > (uint64_t)size || (uint64_t)size - offset != bytes) {
    fclose(f);
    return FAIL(ctx, ACCEL_ERR_FORMAT, "%s has %lld bytes; offset %llu + the shape's %zu bytes of %s is %llu", path,
                (long long)size, (unsigned long long)offset, bytes, accel__dtype_name(dtype),
                (unsigned long long)(offset + bytes));
  }
  accel_buffer *buf = NULL;
  if ((s = accel_buffer_create(dtype, ndim, shape, &buf))) {
    fclose(f);
    return FAIL(ctx, s, "%s: %s", path, accel_last_error(NULL));
  }
  accel_array view;
  accel_buffer_view(buf, &view);
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || (bytes && fread(view.data, 1, bytes, f) != bytes)) {
    fclose(f);
    accel_buffer_destroy(buf);
    return FAIL(ctx, ACCEL_ERR_IO, "cannot read %s", path);
  }
  fclose(f);
  *out = buf;
  return ACCEL_OK;
}

accel_status accel_raw_save(accel_ctx *ctx, const char *path, const accel_array *a) {
  accel_status s = accel__array_check(ctx, __func__, "array", a);
  if (s) return s;
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, __func__, path, false, &af))) return s;
  if (!accel__write_array_data(af.f, a)) return accel__atomic_fail(ctx, __func__, &af);
  return accel__atomic_commit(ctx, __func__, &af);
}
