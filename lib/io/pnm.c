/* Binary PGM (P5) and PPM (P6) reader and writer. */
#include "io/file.h"

#include "accel/io.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Read one header integer, skipping whitespace and # comments. */
static bool read_int(FILE *f, long *v) {
  int ch;
  for (;;) {
    ch = fgetc(f);
    if (ch == '#') {
      while (ch != '\n' && ch != '\r' && ch != EOF) ch = fgetc(f);
    } else if (!isspace(ch)) {
      break;
    }
  }
  if (!isdigit(ch)) return false;
  long x = 0;
  while (isdigit(ch)) {
    if (x > 100000000) return false;
    x = x * 10 + (ch - '0');
    ch = fgetc(f);
  }
  if (!isspace(ch)) return false; /* exactly one whitespace byte ends the last field */
  *v = x;
  return true;
}

static accel_status read_pnm(accel_ctx *ctx, const char *func, const char *path, FILE *f, int64_t fsize, void *out) {
  accel_status s = ACCEL_OK;
  accel_buffer *buf = NULL;
  char magic[2];
  long w, h, maxval;
  if (fread(magic, 1, 2, f) != 2 || magic[0] != 'P' || (magic[1] != '5' && magic[1] != '6')) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is not a binary PGM (P5) or PPM (P6) file", path);
    goto done;
  }
  if (!read_int(f, &w) || !read_int(f, &h) || !read_int(f, &maxval) || w < 1 || h < 1 || maxval < 1 || maxval > 65535) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s has a malformed PNM header", path);
    goto done;
  }
  if ((uint64_t)w * (uint64_t)h > accel__ctx_max_pixels(ctx)) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_LIMIT, "%s is %ld x %ld, over the pixel limit of %llu", path, w, h,
                       (unsigned long long)accel__ctx_max_pixels(ctx));
    goto done;
  }
  int channels = magic[1] == '6' ? 3 : 1;
  int item = maxval > 255 ? 2 : 1;
  int64_t shape[3] = {h, w, channels};
  int64_t bytes = h * w * channels * item, offset = ftell(f);
  if (offset < 0 || bytes > fsize - offset) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is truncated: %lld bytes of pixels expected, %lld present",
                       path, (long long)bytes, (long long)(offset < 0 ? 0 : fsize - offset));
    goto done;
  }
  if ((s = accel_buffer_create(item == 2 ? ACCEL_DTYPE_U16 : ACCEL_DTYPE_U8, channels == 3 ? 3 : 2, shape, &buf))) {
    accel__fail_in(ctx, func, s, "%s: %s", path, accel_last_error(NULL));
    goto done;
  }
  accel_array v;
  accel_buffer_view(buf, &v);
  if (fread(v.data, 1, (size_t)bytes, f) != (size_t)bytes) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is truncated", path);
    goto done;
  }
  if (item == 2) { /* PNM stores 16-bit samples big-endian */
    uint16_t *p = v.data;
    for (int64_t i = 0; i < bytes / 2; i++) p[i] = (uint16_t)(p[i] << 8 | p[i] >> 8);
  }
  *(accel_buffer **)out = buf;
  buf = NULL;
done:
  accel_buffer_destroy(buf);
  return s;
}

accel_status accel_pnm_load(accel_ctx *ctx, const char *path, accel_buffer **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  return accel__load(ctx, __func__, path, read_pnm, out);
}

accel_status accel_pnm_save(accel_ctx *ctx, const char *path, const accel_array *a) {
  accel_status s = accel__array_check(ctx, __func__, "array", a);
  if (s) return s;
  bool gray = a->ndim == 2 || (a->ndim == 3 && a->shape[2] == 1);
  bool rgb = a->ndim == 3 && a->shape[2] == 3;
  if ((!gray && !rgb) || (a->dtype != ACCEL_DTYPE_U8 && a->dtype != ACCEL_DTYPE_U16))
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "expects U8 or U16 of shape (H, W), (H, W, 1) or (H, W, 3)");
  if (a->shape[0] < 1 || a->shape[1] < 1) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "PNM images cannot be empty");
  bool wide = a->dtype == ACCEL_DTYPE_U16;
  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, __func__, path, false, &af))) return s;
  bool ok = fprintf(af.f, "P%c\n%lld %lld\n%d\n", rgb ? '6' : '5', (long long)a->shape[1], (long long)a->shape[0],
                    wide ? 65535 : 255) > 0;
  if (ok && !wide) {
    ok = accel__write_array_data(af.f, a);
  } else if (ok) { /* swap each row to big-endian */
    size_t row = (size_t)(a->shape[1] * (rgb ? 3 : 1));
    uint16_t *tmp = malloc(row * 2);
    ok = tmp != NULL;
    accel_array r = *a;
    r.ndim = a->ndim - 1;
    memmove(r.shape, a->shape + 1, sizeof(int64_t) * (size_t)r.ndim);
    memmove(r.strides, a->strides + 1, sizeof(int64_t) * (size_t)r.ndim);
    for (int64_t y = 0; ok && y < a->shape[0]; y++) {
      r.data = (char *)a->data + y * a->strides[0];
      accel__array_pack(&r, tmp);
      for (size_t i = 0; i < row; i++) tmp[i] = (uint16_t)(tmp[i] << 8 | tmp[i] >> 8);
      ok = fwrite(tmp, 2, row, af.f) == row;
    }
    free(tmp);
  }
  if (!ok) return accel__atomic_fail(ctx, __func__, &af);
  return accel__atomic_commit(ctx, __func__, &af);
}
