/* NPY reader and writer (numpy's format, versions 1.0 to 3.0). */
#include "io/file.h"

#include "accel/io.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libaccel's file formats assume a little-endian host"
#endif

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_header {
  accel_dtype dtype;
  bool swap; /* big-endian data */
  bool fortran;
  int ndim;
  int64_t shape[ACCEL_ARRAY_MAX_DIMS];
} npy_header;

/* ---- a parser for the header's Python dict literal */

typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static bool parse_string(cursor *c, char *out, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 >= cap) return false;
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  c->p++;
  out[n] = '\0';
  return true;
}

static bool parse_bool(cursor *c, bool *v) {
  skip_ws(c);
  if (c->end - c->p >= 4 && memcmp(c->p, "True", 4) == 0) {
    c->p += 4;
    *v = true;
    return true;
  }
  if (c->end - c->p >= 5 && memcmp(c->p, "False", 5) == 0) {
    c->p += 5;
    *v = false;
    return true;
  }
  return false;
}

static bool parse_shape(cursor *c, npy_header *h) {
  if (!eat(c, '(')) return false;
  h->ndim = 0;
  for (;;) {
    if (eat(c, ')')) return true;
    skip_ws(c);
    if (c->p >= c->end || !isdigit((unsigned char)*c->p)) return false;
    int64_t v = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c->p - '0', &v)) return false;
      c->p++;
    }
    skip_ws(c);
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long suffix */
    if (h->ndim == ACCEL_ARRAY_MAX_DIMS) return false;
    h->shape[h->ndim++] = v;
    if (!eat(c, ',')) return eat(c, ')');
  }
}

static bool parse_descr(const char *d, npy_header *h) {
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return false;
  static const struct {
    const char *code;
    accel_dtype dtype;
  } T[] = {{"u1", ACCEL_DTYPE_U8},  {"b1", ACCEL_DTYPE_U8},  {"i1", ACCEL_DTYPE_I8},  {"u2", ACCEL_DTYPE_U16},
           {"i2", ACCEL_DTYPE_I16}, {"u4", ACCEL_DTYPE_U32}, {"i4", ACCEL_DTYPE_I32}, {"u8", ACCEL_DTYPE_U64},
           {"i8", ACCEL_DTYPE_I64}, {"f4", ACCEL_DTYPE_F32}, {"f8", ACCEL_DTYPE_F64}};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (strcmp(d + 1, T[i].code) == 0) {
      h->dtype = T[i].dtype;
      h->swap = order == '>' && accel_dtype_size(T[i].dtype) > 1;
      return true;
    }
  return false;
}

static accel_status parse_header(const accel_ctx *ctx, const char *func, const char *path, const char *text, size_t len,
                                 npy_header *h) {
  cursor c = {text, text + len};
  bool have_descr = false, have_order = false, have_shape = false;
  if (!eat(&c, '{')) goto bad;
  while (!eat(&c, '}')) {
    char key[32], descr[64];
    if (!parse_string(&c, key, sizeof key) || !eat(&c, ':')) goto bad;
    if (strcmp(key, "descr") == 0) {
      skip_ws(&c);
      if (c.p < c.end && (*c.p == '[' || *c.p == '('))
        return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: structured dtypes are not supported", path);
      if (!parse_string(&c, descr, sizeof descr)) goto bad;
      if (!parse_descr(descr, h))
        return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT,
                              "%s: dtype '%s' is not supported (u1 i1 u2 i2 u4 i4 u8 i8 f4 f8 b1 are)", path, descr);
      have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (!parse_bool(&c, &h->fortran)) goto bad;
      have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!parse_shape(&c, h)) goto bad;
      have_shape = true;
    } else {
      goto bad;
    }
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) goto bad;
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) goto bad;
  if (h->fortran)
    return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT,
                          "%s is in Fortran order; save it with numpy.ascontiguousarray first", path);
  return ACCEL_OK;
bad:
  return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: malformed .npy header", path);
}

static void byteswap(void *data, size_t count, size_t item) {
  unsigned char *p = data;
  for (size_t i = 0; i < count; i++, p += item)
    for (size_t a = 0, b = item - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

static accel_status read_npy(accel_ctx *ctx, const char *func, const char *path, FILE *f, int64_t fsize, void *out) {
  accel_status s = ACCEL_OK;
  char *text = NULL;
  accel_buffer *buf = NULL;
  unsigned char pre[12];
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, MAGIC, 6) != 0) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is not a .npy file", path);
    goto done;
  }
  uint32_t hlen;
  int major = pre[6];
  if (major == 1) {
    if (fread(pre + 8, 1, 2, f) != 2) goto truncated;
    hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
  } else if (major == 2 || major == 3) {
    if (fread(pre + 8, 1, 4, f) != 4) goto truncated;
    hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
  } else {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: .npy version %d.%d is not supported", path, major, pre[7]);
    goto done;
  }
  if ((int64_t)hlen > fsize) goto truncated;
  text = malloc((size_t)hlen + 1);
  if (!text) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  if (fread(text, 1, hlen, f) != hlen) goto truncated;
  text[hlen] = '\0';
  npy_header h;
  memset(&h, 0, sizeof h);
  if ((s = parse_header(ctx, func, path, text, hlen, &h))) goto done;

  size_t item = accel_dtype_size(h.dtype), bytes = item;
  for (int i = 0; i < h.ndim; i++)
    if (accel__mul_overflow(bytes, (size_t)h.shape[i], &bytes)) goto truncated;
  int64_t offset = ftell(f);
  if (offset < 0 || offset > fsize || (uint64_t)bytes > (uint64_t)(fsize - offset)) { /* unsigned: no wrap */
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT,
                       "%s is truncated: the header announces %zu bytes of data, %lld remain", path, bytes,
                       (long long)(offset < 0 ? 0 : fsize - offset));
    goto done;
  }
  if ((s = accel_buffer_create(h.dtype, h.ndim, h.shape, &buf))) {
    accel__fail_in(ctx, func, s, "%s: %s", path, accel_last_error(NULL));
    goto done;
  }
  accel_array view;
  accel_buffer_view(buf, &view);
  if (bytes && fread(view.data, 1, bytes, f) != bytes) goto truncated;
  if (h.swap) byteswap(view.data, bytes / item, item);
  *(accel_buffer **)out = buf;
  buf = NULL;
  goto done;

truncated:
  s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is truncated or its header is corrupt", path);
done:
  accel_buffer_destroy(buf);
  free(text);
  return s;
}

accel_status accel_npy_load(accel_ctx *ctx, const char *path, accel_buffer **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  return accel__load(ctx, __func__, path, read_npy, out);
}

static const char *descr_of(accel_dtype d) {
  switch (d) {
  case ACCEL_DTYPE_U8: return "|u1";
  case ACCEL_DTYPE_I8: return "|i1";
  case ACCEL_DTYPE_U16: return "<u2";
  case ACCEL_DTYPE_I16: return "<i2";
  case ACCEL_DTYPE_U32: return "<u4";
  case ACCEL_DTYPE_I32: return "<i4";
  case ACCEL_DTYPE_U64: return "<u8";
  case ACCEL_DTYPE_I64: return "<i8";
  case ACCEL_DTYPE_F32: return "<f4";
  case ACCEL_DTYPE_F64: return "<f8";
  default: return NULL;
  }
}

accel_status accel_npy_save(accel_ctx *ctx, const char *path, const accel_array *a) {
  accel_status s = accel__array_check(ctx, __func__, "array", a);
  if (s) return s;
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of(a->dtype));
  for (int i = 0; i < a->ndim; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld,%s", (long long)a->shape[i], i + 1 < a->ndim ? " " : "");
  if (a->ndim > 1) n--; /* numpy writes (3, 4) but (5,) */
  n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
  /* pad with spaces so that the data starts on a 64-byte boundary; end with \n */
  size_t pre = 10, total = pre + (size_t)n + 1;
  size_t padded = (total + 63) / 64 * 64;
  unsigned char head[600];
  memcpy(head, MAGIC, 6);
  head[6] = 1;
  head[7] = 0;
  size_t hlen = padded - pre;
  head[8] = (unsigned char)(hlen & 0xff);
  head[9] = (unsigned char)(hlen >> 8);
  memcpy(head + pre, dict, (size_t)n);
  memset(head + pre + n, ' ', padded - total);
  head[padded - 1] = '\n';

  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, __func__, path, false, &af))) return s;
  if (fwrite(head, 1, padded, af.f) != padded || !accel__write_array_data(af.f, a))
    return accel__atomic_fail(ctx, __func__, &af);
  return accel__atomic_commit(ctx, __func__, &af);
}
