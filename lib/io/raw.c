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
  static const char F[] = "accel_raw_load";
  if (!path || !out || (ndim && !shape)) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: NULL argument", F);
  *out = NULL;
  const size_t item = accel_dtype_size(dtype);
  if (!item) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: invalid dtype %d", F, (int)dtype);
  if (ndim < 1 || ndim > ACCEL_ARRAY_MAX_DIMS)
    return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: ndim %d outside 1..%d", F, (int)ndim, ACCEL_ARRAY_MAX_DIMS);
  size_t bytes = item;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: negative extent %lld", F, (long long)shape[i]);
    if (accel__mul_overflow(bytes, (size_t)shape[i], &bytes) || bytes > (size_t)INT64_MAX)
      return accel__fail(ctx, ACCEL_ERR_LIMIT, "%s: the shape's size overflows", F);
  }
  FILE *f = NULL;
  int64_t size = 0;
  accel_status s = accel__open_read(ctx, F, path, &f, &size);
  if (s) return s;
  if (offset > (uint64_t)size || (uint64_t)size - offset != bytes) {
    fclose(f);
    return accel__fail(ctx, ACCEL_ERR_FORMAT, "%s: %s has %lld bytes; offset %llu + the shape's %zu bytes of %s is %llu",
                       F, path, (long long)size, (unsigned long long)offset, bytes, accel__dtype_name(dtype),
                       (unsigned long long)(offset + bytes));
  }
  accel_buffer *buf = NULL;
  if ((s = accel_buffer_create(dtype, ndim, shape, &buf))) {
    fclose(f);
    return accel__fail(ctx, s, "%s: %s: %s", F, path, accel_last_error(NULL));
  }
  accel_array view;
  accel_buffer_view(buf, &view);
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || (bytes && fread(view.data, 1, bytes, f) != bytes)) {
    fclose(f);
    accel_buffer_destroy(buf);
    return accel__fail(ctx, ACCEL_ERR_IO, "%s: cannot read %s", F, path);
  }
  fclose(f);
  *out = buf;
  return ACCEL_OK;
}

accel_status accel_raw_save(accel_ctx *ctx, const char *path, const accel_array *a) {
  static const char F[] = "accel_raw_save";
  accel_status s = accel__array_check(ctx, F, "array", a);
  if (s) return s;
  if (!path) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: path is NULL", F);
  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, F, path, &af))) return s;
  if (!accel__write_array_data(af.f, a))
    return accel__atomic_fail(ctx, F, &af);
  return accel__atomic_commit(ctx, F, &af);
}
