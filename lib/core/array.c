/* Host array descriptors: validation, extents, packing. */
#include "internal.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#define ACCEL_HAVE_MMAP 1
#include <sys/mman.h>
#else
#define ACCEL_HAVE_MMAP 0
#endif

static const size_t DTYPE_SIZE[] = {0, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

/* The dtype without the device flag. */
static unsigned plain_dtype(accel_dtype dtype) { return (unsigned)dtype & ~(unsigned)ACCEL_DTYPE_DEVICE_FLAG; }

size_t accel_dtype_size(accel_dtype dtype) {
  const unsigned d = plain_dtype(dtype);
  return d < sizeof DTYPE_SIZE / sizeof DTYPE_SIZE[0] ? DTYPE_SIZE[d] : 0;
}

accel_status accel_array_on_device(accel_array *a) {
  REQUIRE(NULL, a, ACCEL_ERR_INVALID_ARG, "array is NULL");
  REQUIRE(NULL, accel_dtype_size(a->dtype), ACCEL_ERR_INVALID_ARG, "invalid dtype %d", (int)a->dtype);
  a->dtype = (accel_dtype)((unsigned)a->dtype | (unsigned)ACCEL_DTYPE_DEVICE_FLAG);
  return ACCEL_OK;
}

int32_t accel_array_is_device(const accel_array *a) {
  return a && ((unsigned)a->dtype & (unsigned)ACCEL_DTYPE_DEVICE_FLAG) ? 1 : 0;
}

static const char *dtype_name(accel_dtype d) {
  static const char *const names[] = {"INVALID", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F32", "F64"};
  return (unsigned)d < sizeof names / sizeof names[0] ? names[d] : "unknown";
}

accel_status accel_array_init(accel_array *a, void *data, accel_dtype dtype, int32_t ndim, const int64_t *shape) {
  REQUIRE(NULL, a, ACCEL_ERR_INVALID_ARG, "array is NULL");
  memset(a, 0, sizeof *a);
  size_t item = plain_dtype(dtype) == (unsigned)dtype ? accel_dtype_size(dtype) : 0; /* no device flag here */
  REQUIRE(NULL, item, ACCEL_ERR_INVALID_ARG, "invalid dtype %d", (int)dtype);
  if (ndim < 0 || ndim > ACCEL_ARRAY_MAX_DIMS)
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "ndim %d outside 0..%d", (int)ndim, ACCEL_ARRAY_MAX_DIMS);
  if (ndim > 0 && !shape) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "shape is NULL");
  int64_t stride = (int64_t)item;
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "shape[%d] = %lld is negative", i, (long long)shape[i]);
    if (shape[i] == 0) empty = true;
  }
  for (int i = ndim - 1; i >= 0; i--) {
    a->shape[i] = shape[i];
    a->strides[i] = stride;
    if (!empty && __builtin_mul_overflow(stride, shape[i], &stride))
      return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "array size overflows");
  }
  a->data = data;
  a->dtype = dtype;
  a->ndim = ndim;
  return ACCEL_OK;
}

int64_t accel__array_count(const accel_array *a) {
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] == 0) return 0; /* before any product: the other extents may overflow one */
  int64_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
  return n;
}

/* A device array where host memory is needed: the CPU's refusal or the GPU's. */
static accel_status refuse_device(const accel_ctx *ctx, const char *func, const char *what) {
  if (!accel__ctx_on_gpu(ctx))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "%s is device memory (accel_array_on_device), but %s; copy it to the host", what,
                          ctx ? "the context runs on the CPU" : "this call has no CUDA context");
  return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED, "device arrays are not supported by %s; copy %s to the host",
                        func, what);
}

accel_status accel__array_check(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a) {
  if (!a) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s is NULL", what);
  if (accel_array_is_device(a) && accel_dtype_size(a->dtype)) return refuse_device(ctx, func, what);
  return accel__array_check_memory(ctx, func, what, a);
}

accel_status accel__array_accept(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a,
                                 accel_array *plain, const accel_array **use, bool *device) {
  *use = a;
  *device = false;
  if (!a || !accel_array_is_device(a) || !accel_dtype_size(a->dtype)) return ACCEL_OK;
  if (!accel__ctx_on_gpu(ctx)) return refuse_device(ctx, func, what);
  *plain = *a;
  plain->dtype = (accel_dtype)plain_dtype(a->dtype);
  accel_status s = accel__array_check_memory(ctx, func, what, plain);
  if (s) return s;
  if (!accel__array_is_contiguous(plain))
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                          "%s is a strided device array; device arrays must be C-contiguous (copy it to a "
                          "contiguous one)",
                          what);
  const size_t item = accel_dtype_size(plain->dtype);
  if ((uintptr_t)plain->data % item)
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                          "%s is a device array at an address that is not a multiple of its %zu-byte elements; device "
                          "kernels need aligned elements (copy it to an aligned one)",
                          what, item);
  *use = plain;
  *device = true;
  return ACCEL_OK;
}

accel_status accel__array_check_memory(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a) {
  size_t item = accel_dtype_size(a->dtype);
  if (!item) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has invalid dtype %d", what, (int)a->dtype);
  if (a->ndim < 0 || a->ndim > ACCEL_ARRAY_MAX_DIMS)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has ndim %d outside 0..%d", what, (int)a->ndim,
                          ACCEL_ARRAY_MAX_DIMS);
  int64_t count = 1, span = (int64_t)item;
  bool empty = false;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] < 0) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has negative shape[%d]", what, i);
    empty = empty || a->shape[i] == 0;
  }
  if (empty) return ACCEL_OK; /* no element: any extents and strides (accel_array_init agrees) */
  for (int i = 0; i < a->ndim; i++)
    if (__builtin_mul_overflow(count, a->shape[i], &count))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has too many elements", what);
  for (int i = 0; i < a->ndim; i++) {
    if (a->strides[i] == INT64_MIN)
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has an invalid stride", what);
    int64_t s = a->strides[i] < 0 ? -a->strides[i] : a->strides[i], reach;
    if (__builtin_mul_overflow(s, a->shape[i] - 1, &reach) || __builtin_add_overflow(span, reach, &span))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s strides reach beyond the address space", what);
  }
  if (!a->data) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s has NULL data", what);
  return ACCEL_OK;
}

void accel__array_extent(const accel_array *a, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  if (accel__array_count(a) == 0) return;
  for (int i = 0; i < a->ndim; i++) {
    int64_t r = a->strides[i] * (a->shape[i] - 1);
    if (r < 0) *lo += r;
    else *hi += r;
  }
  *hi += (int64_t)accel_dtype_size(a->dtype);
}

bool accel__arrays_overlap(const accel_array *a, const accel_array *b) {
  int64_t alo, ahi, blo, bhi;
  accel__array_extent(a, &alo, &ahi);
  accel__array_extent(b, &blo, &bhi);
  if (alo == ahi || blo == bhi) return false;
  intptr_t pa = (intptr_t)a->data, pb = (intptr_t)b->data;
  return pa + alo < pb + bhi && pb + blo < pa + ahi;
}

bool accel__array_is_contiguous(const accel_array *a) {
  int64_t expect = (int64_t)accel_dtype_size(a->dtype);
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (a->shape[i] != 1 && a->strides[i] != expect) return false;
    expect *= a->shape[i];
  }
  return true;
}

/* Walk dims [dim, ndim) in C order; the innermost is copied in one go when
 * its elements are adjacent. */
static void copy_rec(const accel_array *a, int dim, char *base, char **packed, bool to_packed) {
  size_t item = accel_dtype_size(a->dtype);
  if (dim == a->ndim) {
    if (to_packed) memcpy(*packed, base, item);
    else memcpy(base, *packed, item);
    *packed += item;
    return;
  }
  int64_t n = a->shape[dim], st = a->strides[dim];
  if (dim == a->ndim - 1 && st == (int64_t)item) {
    if (to_packed) memcpy(*packed, base, (size_t)n * item);
    else memcpy(base, *packed, (size_t)n * item);
    *packed += (size_t)n * item;
    return;
  }
  for (int64_t i = 0; i < n; i++) copy_rec(a, dim + 1, base + i * st, packed, to_packed);
}

void accel__array_pack(const accel_array *a, void *dst) {
  if (accel__array_count(a) == 0) return;
  char *p = dst;
  copy_rec(a, 0, a->data, &p, true);
}

void accel__array_unpack(const void *src, const accel_array *a) {
  if (accel__array_count(a) == 0) return;
  char *p = (char *)src;
  copy_rec(a, 0, a->data, &p, false);
}

/* ------------------------------------------------------------ buffers */

struct accel_buffer {
  accel_array view;
  void *map; /* a file mapping (accel__buffer_wrap_mapping), or NULL: view.data is the buffer's own */
  size_t map_bytes;
};

/* The byte size of a C-contiguous array of this shape, with the view. */
static accel_status buffer_layout(accel_dtype dtype, int32_t ndim, const int64_t *shape, accel_array *a,
                                  size_t *bytes) {
  accel_status s = accel_array_init(a, NULL, dtype, ndim, shape);
  if (s) return s;
  *bytes = accel_dtype_size(dtype);
  for (int i = 0; i < ndim; i++)
    if (accel__mul_overflow(*bytes, (size_t)shape[i], bytes))
      return FAIL(NULL, ACCEL_ERR_OUT_OF_MEMORY, "size overflows");
  return ACCEL_OK;
}

static accel_status buffer_new(accel_dtype dtype, int32_t ndim, const int64_t *shape, bool zero, accel_buffer **out) {
  REQUIRE(NULL, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  accel_array a;
  size_t bytes;
  accel_status s = buffer_layout(dtype, ndim, shape, &a, &bytes);
  if (s) return s;
  accel_buffer *b = malloc(sizeof *b);
  void *mem = NULL;
  if (!b || posix_memalign(&mem, 64, bytes ? bytes : 1)) {
    free(b);
    return FAIL(NULL, ACCEL_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", bytes);
  }
  if (zero) memset(mem, 0, bytes);
  a.data = mem;
  b->view = a;
  b->map = NULL, b->map_bytes = 0;
  *out = b;
  return ACCEL_OK;
}

accel_status accel_buffer_create(accel_dtype dtype, int32_t ndim, const int64_t *shape, accel_buffer **out) {
  return buffer_new(dtype, ndim, shape, true, out);
}

accel_status accel__buffer_create_uninit(accel_dtype dtype, int32_t ndim, const int64_t *shape, accel_buffer **out) {
  return buffer_new(dtype, ndim, shape, false, out);
}

accel_status accel__buffer_wrap_mapping(accel_dtype dtype, int32_t ndim, const int64_t *shape, void *map,
                                        size_t map_bytes, size_t offset, accel_buffer **out) {
  REQUIRE(NULL, out && map, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  accel_array a;
  size_t bytes;
  accel_status s = buffer_layout(dtype, ndim, shape, &a, &bytes);
  if (s) return s;
  REQUIRE(NULL, offset <= map_bytes && bytes <= map_bytes - offset, ACCEL_ERR_INVALID_ARG,
          "%zu bytes at %zu do not fit a mapping of %zu", bytes, offset, map_bytes);
  accel_buffer *b = malloc(sizeof *b);
  if (!b) return FAIL(NULL, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  a.data = (char *)map + offset;
  b->view = a;
  b->map = map, b->map_bytes = map_bytes;
  *out = b;
  return ACCEL_OK;
}

bool accel__buffer_is_mapped(const accel_buffer *b) { return b && b->map; }

accel_status accel_buffer_view(const accel_buffer *buffer, accel_array *view) {
  REQUIRE(NULL, buffer && view, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *view = buffer->view;
  return ACCEL_OK;
}

void accel_buffer_destroy(accel_buffer *buffer) {
  if (!buffer) return;
#if ACCEL_HAVE_MMAP
  if (buffer->map) munmap(buffer->map, buffer->map_bytes);
  else
#endif
    free(buffer->view.data);
  free(buffer);
}

const char *accel__dtype_name(accel_dtype d) { return dtype_name(d); }

/* ---- contiguous views */

static accel_status view_open(const accel_ctx *ctx, const char *func, accel__view *v) {
  const accel_array *a = v->a;
  if (accel__array_is_contiguous(a)) {
    v->data = a->data;
    return ACCEL_OK;
  }
  const size_t bytes = (size_t)accel__array_count(a) * accel_dtype_size(a->dtype);
  if (!(v->data = malloc(bytes ? bytes : 1)))
    return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for a contiguous copy of %s", v->what);
  v->owned = true;
  if (v->mode != ACCEL__VIEW_OUT) accel__array_pack(a, v->data);
  return ACCEL_OK;
}

accel_status accel__views_open(const accel_ctx *ctx, const char *func, accel__view *v, int n) {
  for (int i = 0; i < n; i++) {
    v[i].data = NULL;
    v[i].owned = false;
  }
  for (int i = 0; i < n; i++) {
    accel_status s = v[i].a ? view_open(ctx, func, &v[i]) : ACCEL_OK;
    if (s) return accel__views_close(v, i, s);
  }
  return ACCEL_OK;
}

accel_status accel__views_close(accel__view *v, int n, accel_status s) {
  for (int i = 0; i < n; i++) {
    if (!v[i].owned) continue;
    if (!s && v[i].mode != ACCEL__VIEW_IN) accel__array_unpack(v[i].data, v[i].a);
    free(v[i].data);
    v[i].owned = false;
  }
  return s;
}
