/* CT volumes from .npy (C or Fortran order), .npz members, TIFF stacks and
 * directories of TIFF slices. */
#include "volume.h"

#include "accel_config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>
#if ACCEL_HAVE_TIFF
#include <tiffio.h>
#endif

enum { MAX_VOXELS_LOG2 = 44 }; /* the CT stages' limit: at most 2^44 voxels (no memory holds more) */

static bool ends_with(const char *s, const char *tail) {
  const size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcasecmp(s + n - m, tail) == 0;
}

static bool is_tiff_name(const char *s) { return ends_with(s, ".tif") || ends_with(s, ".tiff"); }

bool volume_source_of(const char *cmd, const char *input, const char *member, volume_source *src) {
  memset(src, 0, sizeof *src);
  struct stat st;
  const bool exists = stat(input, &st) == 0;
  const char *colon = strrchr(input, ':');
  size_t len = strlen(input);
  if (!exists && colon && !member && colon - input >= 4 && strncasecmp(colon - 4, ".npz", 4) == 0) {
    len = (size_t)(colon - input); /* F.npz:MEMBER */
    member = colon + 1;
  }
  if (!(src->path = strndup(input, len))) {
    cli_error("out of memory");
    return false;
  }
  src->member = member;
  src->kind = exists && S_ISDIR(st.st_mode)  ? VOLUME_TIFF_DIR
              : ends_with(src->path, ".npz") ? VOLUME_NPZ
              : ends_with(src->path, ".npy") ? VOLUME_NPY
              : is_tiff_name(src->path)      ? VOLUME_TIFF
                                             : VOLUME_RAW;
  if (member && src->kind != VOLUME_NPZ) {
    cli_error("%s: --member names a member of an .npz archive; %s is not one", cmd, src->path);
    volume_source_free(src);
    return false;
  }
  return true;
}

void volume_source_free(volume_source *src) {
  free(src->path);
  src->path = NULL;
}

/* ------------------------------------------------------------ NPY in memory */

typedef struct npy_info {
  accel_dtype dtype;
  bool swap, fortran;
  int32_t ndim;
  int64_t shape[ACCEL_ARRAY_MAX_DIMS];
  size_t data_at; /* where the data starts */
} npy_info;

/* The value of 'key' in the header dict (a pointer just past "'key':"). */
static const char *dict_value(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s':", key);
  const char *p = strstr(h, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  return p;
}

static bool parse_descr(const char *v, npy_info *in) {
  static const struct {
    const char *code;
    accel_dtype dtype;
  } codes[] = {{"u1", ACCEL_DTYPE_U8},  {"i1", ACCEL_DTYPE_I8},  {"b1", ACCEL_DTYPE_U8},
               {"u2", ACCEL_DTYPE_U16}, {"i2", ACCEL_DTYPE_I16}, {"u4", ACCEL_DTYPE_U32},
               {"i4", ACCEL_DTYPE_I32}, {"f4", ACCEL_DTYPE_F32}, {"f8", ACCEL_DTYPE_F64}};
  if (!v || *v != '\'' || !strchr("<>|=", v[1])) return false;
  for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
    if (strncmp(v + 2, codes[k].code, 2) == 0 && v[4] == '\'') {
      in->dtype = codes[k].dtype;
      in->swap = v[1] == '>' && codes[k].code[1] != '1';
      return true;
    }
  return false;
}

static bool parse_shape(const char *v, npy_info *in) {
  if (!v || *v++ != '(') return false;
  in->ndim = 0;
  for (;;) {
    while (*v == ' ' || *v == ',') v++;
    if (*v == ')') return true;
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (end == v || errno || x < 0 || in->ndim == ACCEL_ARRAY_MAX_DIMS) return false;
    in->shape[in->ndim++] = x;
    v = end;
  }
}

/* The header of an NPY image of n bytes; false (printed, naming `what`) if it is not one we read. */
static bool npy_header(const char *cmd, const char *what, const uint8_t *d, size_t n, npy_info *in) {
  memset(in, 0, sizeof *in);
  bool ok = n >= 10 && memcmp(d, "\x93NUMPY", 6) == 0 && d[6] >= 1 && d[6] <= 3;
  const size_t hl = !ok         ? 0
                    : d[6] == 1 ? (size_t)(d[8] | d[9] << 8)
                    : n < 12    ? SIZE_MAX
                                : (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
  const size_t at = !ok ? 0 : d[6] == 1 ? 10 : 12;
  ok = ok && hl <= n - at && hl < 1 << 20;
  char *h = ok ? strndup((const char *)d + at, hl) : NULL;
  const char *fo = h ? dict_value(h, "fortran_order") : NULL;
  ok = h && parse_descr(dict_value(h, "descr"), in) && parse_shape(dict_value(h, "shape"), in) && fo &&
       (strncmp(fo, "True", 4) == 0 || strncmp(fo, "False", 5) == 0);
  if (ok) in->fortran = fo[0] == 'T';
  free(h);
  in->data_at = at + hl;
  uint64_t count = 1;
  for (int k = 0; ok && k < in->ndim; k++) {
    ok = in->shape[k] >= 0 && !__builtin_mul_overflow(count, (uint64_t)in->shape[k], &count) &&
         count <= (1ull << MAX_VOXELS_LOG2);
  }
  if (!ok) {
    cli_error("%s: %s: not an NPY array of u1, i1, b1, u2, i2, u4, i4, f4 or f8 (or a damaged header)", cmd, what);
    return false;
  }
  if (count * accel_dtype_size(in->dtype) != n - in->data_at) {
    cli_error("%s: %s: the NPY data holds %zu bytes, the header asks for %llu", cmd, what, n - in->data_at,
              (unsigned long long)(count * accel_dtype_size(in->dtype)));
    return false;
  }
  return true;
}

/* An NPY image into a new C-ordered, native-endian buffer. */
static bool npy_from_memory(const char *cmd, const char *what, const uint8_t *d, size_t n, accel_buffer **out) {
  npy_info in;
  if (!npy_header(cmd, what, d, n, &in)) return false;
  if (accel_buffer_create(in.dtype, in.ndim, in.shape, out)) {
    cli_error("%s: %s: %s", cmd, what, accel_last_error(NULL));
    return false;
  }
  accel_array v;
  accel_buffer_view(*out, &v);
  const size_t es = accel_dtype_size(in.dtype);
  size_t count = 1;
  for (int k = 0; k < in.ndim; k++) count *= (size_t)in.shape[k];
  const uint8_t *src = d + in.data_at;
  int64_t idx[ACCEL_ARRAY_MAX_DIMS] = {0};
  for (size_t i = 0; i < count; i++) {
    size_t from = i; /* Fortran order: the element at the C index idx */
    if (in.fortran) {
      from = 0;
      for (int k = in.ndim - 1; k >= 0; k--) from = from * (size_t)in.shape[k] + (size_t)idx[k];
      for (int k = in.ndim - 1; k >= 0 && ++idx[k] == in.shape[k]; k--) idx[k] = 0;
    }
    uint8_t *dst = (uint8_t *)v.data + i * es;
    for (size_t b = 0; b < es; b++) dst[b] = src[from * es + (in.swap ? es - 1 - b : b)];
  }
  return true;
}

/* A whole file into memory (at most `limit` bytes). */
static bool read_whole(const char *cmd, const char *path, uint8_t **data, size_t *n) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    cli_error("%s: %s: %s", cmd, path, f ? "not a regular file" : strerror(errno));
    if (f) fclose(f);
    return false;
  }
  *n = (size_t)st.st_size;
  *data = malloc(*n ? *n : 1);
  const bool ok = *data && fread(*data, 1, *n, f) == *n;
  if (!ok) cli_error("%s: %s: %s", cmd, path, *data ? "cannot be read" : "out of memory");
  fclose(f);
  if (!ok) free(*data);
  return ok;
}

static bool load_npy(accel_ctx *ctx, const char *cmd, const char *path, accel_buffer **out) {
  uint8_t head[128];
  FILE *f = fopen(path, "rb");
  const size_t got = f ? fread(head, 1, sizeof head, f) : 0;
  if (f) fclose(f);
  const bool fortran =
      got >= 10 && memcmp(head, "\x93NUMPY", 6) == 0 && memmem(head, got, "'fortran_order': True", 21) != NULL;
  if (!fortran) { /* the library's reader: every check, no copy */
    if (!accel_npy_load(ctx, path, out)) return true;
    cli_error("%s: %s", cmd, accel_last_error(ctx));
    return false;
  }
  uint8_t *d;
  size_t n;
  if (!read_whole(cmd, path, &d, &n)) return false;
  const bool ok = npy_from_memory(cmd, path, d, n, out);
  free(d);
  return ok;
}

/* ------------------------------------------------------------ .npz (zip) */

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* One member of the central directory. */
typedef struct zip_entry {
  char name[256];
  uint16_t method;
  uint32_t crc;
  uint64_t csize, usize, offset;
} zip_entry;

/* The ZIP64 extra field's sizes and offset, where the entry has 0xffffffff. */
static void zip64_extra(const uint8_t *x, size_t n, zip_entry *e) {
  for (size_t at = 0; at + 4 <= n;) {
    const uint16_t id = le16(x + at), len = le16(x + at + 2);
    if (at + 4 + len > n) return;
    if (id == 1) {
      const uint8_t *p = x + at + 4, *end = p + len;
      if (e->usize == UINT32_MAX && p + 8 <= end) e->usize = le64(p), p += 8;
      if (e->csize == UINT32_MAX && p + 8 <= end) e->csize = le64(p), p += 8;
      if (e->offset == UINT32_MAX && p + 8 <= end) e->offset = le64(p);
      return;
    }
    at += 4 + (size_t)len;
  }
}

/* The central directory (read whole; at most 64 MiB) and where it is. */
static bool zip_directory(FILE *f, uint64_t size, uint8_t **cd, uint64_t *cd_size, uint64_t *entries) {
  uint8_t tail[65557];
  const size_t n = size < sizeof tail ? (size_t)size : sizeof tail;
  if (n < 22 || fseeko(f, (off_t)(size - n), SEEK_SET) != 0 || fread(tail, 1, n, f) != n) return false;
  size_t e = n - 22 + 1;
  while (e-- > 0 && le32(tail + e) != 0x06054b50) {
  }
  if (e == (size_t)-1) return false;
  uint64_t cd_at = le32(tail + e + 16);
  *cd_size = le32(tail + e + 12);
  *entries = le16(tail + e + 10);
  if ((cd_at == UINT32_MAX || *entries == 0xffff) && e >= 20 && le32(tail + e - 20) == 0x07064b50) {
    uint8_t z[56];
    const uint64_t z_at = le64(tail + e - 20 + 8);
    if (fseeko(f, (off_t)z_at, SEEK_SET) != 0 || fread(z, 1, 56, f) != 56 || le32(z) != 0x06064b50) return false;
    *entries = le64(z + 32);
    *cd_size = le64(z + 40);
    cd_at = le64(z + 48);
  }
  if (cd_at > size || *cd_size > size - cd_at || *cd_size > (64u << 20)) return false;
  *cd = malloc(*cd_size ? *cd_size : 1);
  return *cd && fseeko(f, (off_t)cd_at, SEEK_SET) == 0 && fread(*cd, 1, *cd_size, f) == *cd_size;
}

/* The member `want` ("name" or "name.npy"; NULL: the only one). Prints why not. */
static bool zip_find(const char *cmd, const char *path, FILE *f, uint64_t size, const char *want, zip_entry *out) {
  uint8_t *cd = NULL;
  uint64_t cd_size = 0, entries = 0;
  if (!zip_directory(f, size, &cd, &cd_size, &entries)) {
    free(cd);
    cli_error("%s: %s: not a readable .npz (zip) archive", cmd, path);
    return false;
  }
  char names[512] = "";
  size_t found = 0, count = 0;
  for (uint64_t at = 0, k = 0; k < entries && at + 46 <= cd_size && le32(cd + at) == 0x02014b50; k++) {
    const uint8_t *p = cd + at;
    const size_t nl = le16(p + 28), xl = le16(p + 30), cl = le16(p + 32);
    if (at + 46 + nl + xl + cl > cd_size) break;
    zip_entry e = {.method = le16(p + 10),
                   .crc = le32(p + 16),
                   .csize = le32(p + 20),
                   .usize = le32(p + 24),
                   .offset = le32(p + 42)};
    snprintf(e.name, sizeof e.name, "%.*s", (int)(nl < 255 ? nl : 255), (const char *)p + 46);
    zip64_extra(p + 46 + nl, xl, &e);
    at += 46 + nl + xl + cl;
    count++;
    const size_t len = strlen(e.name);
    const bool npy = ends_with(e.name, ".npy");
    cli_list_add(names, sizeof names, count - 1, false, e.name);
    const bool match =
        !want || strcmp(e.name, want) == 0 || (npy && strlen(want) == len - 4 && strncmp(e.name, want, len - 4) == 0);
    if (match && found++ == 0) *out = e;
  }
  free(cd);
  if (found == 1) return true;
  if (!want && found > 1)
    cli_error("%s: %s holds several arrays (%s): name one, %s:NAME or --member NAME", cmd, path, names, path);
  else cli_error("%s: %s has no member %s (it holds %s)", cmd, path, want ? want : "at all", count ? names : "nothing");
  return false;
}

/* The member's bytes, inflated and checked against its CRC-32. */
static bool zip_read(const char *cmd, const char *path, FILE *f, uint64_t size, const zip_entry *e, uint8_t **data) {
  uint8_t lh[30];
  const bool ok = e->offset < size && fseeko(f, (off_t)e->offset, SEEK_SET) == 0 && fread(lh, 1, 30, f) == 30 &&
                  le32(lh) == 0x04034b50;
  const uint64_t start = e->offset + 30 + le16(lh + 26) + le16(lh + 28);
  if (!ok || start > size || e->csize > size - start || (e->method != 0 && e->method != 8) || e->usize > (1ull << 40) ||
      (e->method == 0 && e->csize != e->usize)) {
    cli_error("%s: %s: member %s is damaged or compressed in a way not read here (stored and deflate are)", cmd, path,
              e->name);
    return false;
  }
  uint8_t *c = malloc(e->csize ? e->csize : 1), *u = e->method ? malloc(e->usize ? e->usize : 1) : c;
  bool good = c && u && fseeko(f, (off_t)start, SEEK_SET) == 0 && fread(c, 1, e->csize, f) == e->csize;
  if (good && e->method == 8) {
    z_stream z = {0};
    good = inflateInit2(&z, -15) == Z_OK;
    uint64_t done = 0, used = 0;
    while (good && done < e->usize) { /* in pieces: zlib counts in 32 bits */
      z.next_in = c + used;
      z.avail_in = (uInt)(e->csize - used < UINT32_MAX ? e->csize - used : UINT32_MAX);
      z.next_out = u + done;
      z.avail_out = (uInt)(e->usize - done < UINT32_MAX ? e->usize - done : UINT32_MAX);
      const uInt in0 = z.avail_in, out0 = z.avail_out;
      const int r = inflate(&z, Z_NO_FLUSH);
      used += in0 - z.avail_in;
      done += out0 - z.avail_out;
      good = (r == Z_OK || r == Z_STREAM_END) &&
             (r == Z_STREAM_END ? done == e->usize : in0 != z.avail_in || out0 != z.avail_out);
      if (r == Z_STREAM_END) break;
    }
    good = good && done == e->usize;
    inflateEnd(&z);
  }
  uLong crc = crc32(0, Z_NULL, 0);
  for (uint64_t at = 0; good && at < e->usize; at += 1u << 30)
    crc = crc32(crc, u + at, (uInt)(e->usize - at < (1u << 30) ? e->usize - at : (1u << 30)));
  good = good && crc == e->crc;
  if (!good)
    cli_error("%s: %s: member %s %s", cmd, path, e->name,
              c && u ? "is damaged (inflate or CRC-32 failed)" : "does not fit in memory");
  if (e->method) free(c);
  if (!good) free(u);
  else *data = u;
  return good;
}

static bool load_npz(const char *cmd, const volume_source *src, accel_buffer **out) {
  FILE *f = fopen(src->path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    cli_error("%s: %s: %s", cmd, src->path, f ? "not a regular file" : strerror(errno));
    if (f) fclose(f);
    return false;
  }
  zip_entry e;
  uint8_t *d = NULL;
  bool ok = zip_find(cmd, src->path, f, (uint64_t)st.st_size, src->member, &e) &&
            zip_read(cmd, src->path, f, (uint64_t)st.st_size, &e, &d);
  fclose(f);
  if (ok) {
    char what[1024];
    snprintf(what, sizeof what, "%s:%s", src->path, e.name);
    ok = npy_from_memory(cmd, what, d, (size_t)e.usize, out);
  }
  free(d);
  return ok;
}

/* ------------------------------------------------------------ TIFF */

/* A 2-D image as one slice: (H, W) becomes (1, H, W). */
static bool as_volume(const char *cmd, const char *path, accel_buffer **b) {
  accel_array v;
  accel_buffer_view(*b, &v);
  if (v.ndim == 3) return true;
  if (v.ndim != 2) {
    cli_error("%s: %s: a slice must be one gray image (H, W), not %d-D", cmd, path, (int)v.ndim);
    return false;
  }
  accel_buffer *n = NULL;
  const int64_t shape[3] = {1, v.shape[0], v.shape[1]};
  if (accel_buffer_create(v.dtype, 3, shape, &n)) {
    cli_error("%s: %s", cmd, accel_last_error(NULL));
    return false;
  }
  accel_array nv;
  accel_buffer_view(n, &nv);
  memcpy(nv.data, v.data, (size_t)(v.shape[0] * v.shape[1]) * accel_dtype_size(v.dtype));
  accel_buffer_destroy(*b);
  *b = n;
  return true;
}

#if ACCEL_HAVE_TIFF
static __thread char tiff_why[256];

static void tiff_error(const char *module, const char *fmt, va_list ap) {
  (void)module;
  vsnprintf(tiff_why, sizeof tiff_why, fmt, ap);
}

/* The dtype of a page's samples, or INVALID. */
static accel_dtype page_dtype(TIFF *t, uint32_t *w, uint32_t *h, const char **why) {
  uint16_t spp = 1, bps = 1, fmt = SAMPLEFORMAT_UINT;
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &fmt);
  if (!TIFFGetField(t, TIFFTAG_IMAGEWIDTH, w) || !TIFFGetField(t, TIFFTAG_IMAGELENGTH, h) || !*w || !*h)
    return *why = "a page without a size", ACCEL_DTYPE_INVALID;
  if (spp != 1) return *why = "pages must be gray (one sample a pixel)", ACCEL_DTYPE_INVALID;
  if (TIFFIsTiled(t)) return *why = "tiled pages in a multi-page file are not read (strips are)", ACCEL_DTYPE_INVALID;
  const accel_dtype d = fmt == SAMPLEFORMAT_IEEEFP ? (bps == 32   ? ACCEL_DTYPE_F32
                                                      : bps == 64 ? ACCEL_DTYPE_F64
                                                                  : 0)
                        : fmt == SAMPLEFORMAT_INT  ? (bps == 8    ? ACCEL_DTYPE_I8
                                                      : bps == 16 ? ACCEL_DTYPE_I16
                                                      : bps == 32 ? ACCEL_DTYPE_I32
                                                                  : 0)
                                                   : (bps == 8    ? ACCEL_DTYPE_U8
                                                      : bps == 16 ? ACCEL_DTYPE_U16
                                                      : bps == 32 ? ACCEL_DTYPE_U32
                                                                  : 0);
  if (!d) *why = "samples of 8, 16 or 32-bit integers or 32/64-bit floats are read";
  return d ? d : ACCEL_DTYPE_INVALID;
}

/* Every page of a multi-page TIFF, one z slice each (strips; same size and type). */
static bool read_pages(const char *cmd, const char *path, TIFF *t, uint32_t pages, accel_buffer **out) {
  uint32_t w0 = 0, h0 = 0;
  const char *why = NULL;
  const accel_dtype d0 = page_dtype(t, &w0, &h0, &why);
  if (d0 == ACCEL_DTYPE_INVALID || (uint64_t)w0 * h0 * pages > 1ull << MAX_VOXELS_LOG2) {
    cli_error("%s: %s: %s", cmd, path, why ? why : "more than 2^44 voxels");
    return false;
  }
  const int64_t shape[3] = {pages, h0, w0};
  if (accel_buffer_create(d0, 3, shape, out)) {
    cli_error("%s: %s: %s", cmd, path, accel_last_error(NULL));
    return false;
  }
  accel_array v;
  accel_buffer_view(*out, &v);
  const size_t row = (size_t)w0 * accel_dtype_size(d0);
  if ((size_t)TIFFScanlineSize64(t) != row) return cli_error("%s: %s: unexpected row size", cmd, path), false;
  for (uint32_t z = 0; z < pages; z++) {
    uint32_t w, h;
    if (!TIFFSetDirectory(t, (tdir_t)z) || page_dtype(t, &w, &h, &why) != d0 || w != w0 || h != h0) {
      cli_error("%s: %s: page %u differs from the first (%s)", cmd, path, z + 1, why ? why : "size or sample type");
      return false;
    }
    for (uint32_t y = 0; y < h0; y++)
      if (TIFFReadScanline(t, (uint8_t *)v.data + ((size_t)z * h0 + y) * row, y, 0) < 0) {
        cli_error("%s: %s: page %u, row %u: %s", cmd, path, z + 1, y, tiff_why[0] ? tiff_why : "cannot be read");
        return false;
      }
  }
  return true;
}
#endif

static bool load_tiff(accel_ctx *ctx, const char *cmd, const char *path, accel_buffer **out) {
#if ACCEL_HAVE_TIFF
  uint32_t pages = 1;
  TIFFErrorHandler old_e = TIFFSetErrorHandler(tiff_error), old_w = TIFFSetWarningHandler(NULL);
  tiff_why[0] = '\0';
  TIFF *t = TIFFOpen(path, "r");
  if (t) {
    pages = TIFFNumberOfDirectories(t);
    bool ok = pages < 2 || read_pages(cmd, path, t, pages, out);
    TIFFClose(t);
    if (pages >= 2 && !ok) {
      accel_buffer_destroy(*out);
      *out = NULL;
    }
  }
  TIFFSetErrorHandler(old_e);
  TIFFSetWarningHandler(old_w);
  if (pages >= 2) return *out != NULL;
#endif
  /* one page (or no libtiff): the library's reader, with all its checks */
  if (accel_tiff_load_image(ctx, path, out)) {
    cli_error("%s: %s", cmd, accel_last_error(ctx));
    return false;
  }
  return as_volume(cmd, path, out);
}

/* The .tif/.tiff files of a directory in byte order, stacked. */
static bool load_tiff_dir(accel_ctx *ctx, const char *cmd, const char *dir, accel_buffer **out) {
  DIR *d = opendir(dir);
  if (!d) return cli_error("%s: %s: %s", cmd, dir, strerror(errno)), false;
  cli_paths names = {0};
  struct dirent *e;
  bool ok = true;
  while (ok && (e = readdir(d)))
    if (e->d_name[0] != '.' && is_tiff_name(e->d_name)) ok = cli_paths_push(&names, e->d_name);
  closedir(d);
  if (ok && names.n) qsort(names.v, names.n, sizeof(char *), cli_cmp_str);
  if (!ok || !names.n) {
    cli_error("%s: %s: %s", cmd, dir, ok ? "no .tif or .tiff slices in this directory" : "out of memory");
    cli_paths_free(&names);
    return false;
  }
  accel_array first = {0}, all;
  char path[4096];
  for (size_t z = 0; ok && z < names.n; z++) {
    accel_buffer *b = NULL;
    accel_array v;
    snprintf(path, sizeof path, "%s/%s", dir, names.v[z]);
    ok = !accel_tiff_load_image(ctx, path, &b);
    if (!ok) cli_error("%s: %s", cmd, accel_last_error(ctx));
    if (ok) accel_buffer_view(b, &v);
    if (ok && z == 0) {
      first = v;
      const int64_t shape[3] = {(int64_t)names.n, v.shape[0], v.ndim == 2 ? v.shape[1] : 0};
      ok = v.ndim == 2 && (uint64_t)shape[0] * (uint64_t)shape[1] * (uint64_t)shape[2] <= 1ull << MAX_VOXELS_LOG2 &&
           !accel_buffer_create(v.dtype, 3, shape, out);
      if (!ok) cli_error("%s: %s: slices must be gray images (H, W) of at most 2^44 voxels in all", cmd, path);
      if (ok) accel_buffer_view(*out, &all);
    } else if (ok && (v.ndim != 2 || v.dtype != first.dtype || v.shape[0] != first.shape[0] ||
                      v.shape[1] != first.shape[1])) {
      cli_error("%s: %s: a slice unlike the first (%s): same size and sample type needed", cmd, path, names.v[0]);
      ok = false;
    }
    const size_t bytes = ok ? (size_t)(v.shape[0] * v.shape[1]) * accel_dtype_size(v.dtype) : 0;
    if (ok) memcpy((uint8_t *)all.data + z * bytes, v.data, bytes);
    accel_buffer_destroy(b);
  }
  cli_paths_free(&names);
  if (!ok) {
    accel_buffer_destroy(*out);
    *out = NULL;
  }
  return ok;
}

bool volume_load(accel_ctx *ctx, const char *cmd, const volume_source *src, accel_buffer **out) {
  switch (src->kind) {
  case VOLUME_NPY: return load_npy(ctx, cmd, src->path, out);
  case VOLUME_NPZ: return load_npz(cmd, src, out);
  case VOLUME_TIFF: return load_tiff(ctx, cmd, src->path, out);
  case VOLUME_TIFF_DIR: return load_tiff_dir(ctx, cmd, src->path, out);
  default: return false;
  }
}
