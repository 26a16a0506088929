/*
 * Index files (little-endian):
 *
 *   header, 64 bytes: "ACCELIDX", version u32 (1), bits u32, nfields u32,
 *     header size u32 (64), count u64, label bytes u64, meta bytes u64,
 *     16 reserved bytes (zero)
 *   ids[count] u64, stamps[count] u64
 *   codes: per field, per word, count u64 (word-major)
 *   label lengths[count] u64 (UINT64_MAX: no label), label bytes, meta bytes
 *   CRC-32 (zlib's) of everything before it, u32
 *
 * A file is accepted only if its size is exactly what the header announces
 * and the checksum matches: truncation and corruption are errors, never a
 * crash or a partial index.
 */
#include "index/index.h"
#include "io/file.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "index files are read and written in the host's order, which must be little-endian"
#endif

static const char MAGIC[8] = {'A', 'C', 'C', 'E', 'L', 'I', 'D', 'X'};
enum { VERSION = 1, HEADER = 64 };

typedef struct header {
  char magic[8];
  uint32_t version, bits, nfields, header_size;
  uint64_t count, label_bytes, meta_bytes;
  uint8_t reserved[16];
} header;

_Static_assert(sizeof(header) == HEADER, "index file header layout");

typedef struct crc_writer {
  FILE *f;
  uLong crc;
  bool ok;
} crc_writer;

static void put(crc_writer *w, const void *p, size_t n) {
  if (!w->ok || n == 0) return;
  w->crc = crc32(w->crc, p, (uInt)n);
  w->ok = fwrite(p, 1, n, w->f) == n;
}

static void put_big(crc_writer *w, const void *p, size_t n) { /* crc32 takes uInt lengths */
  const char *c = p;
  while (n) {
    size_t k = n > (1u << 30) ? (1u << 30) : n;
    put(w, c, k);
    c += k;
    n -= k;
  }
}

accel_status accel_index_save(const accel_index *ix, const char *path) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MAGIC, 8);
  h.version = VERSION;
  h.bits = ix->bits;
  h.nfields = ix->nfields;
  h.header_size = HEADER;
  h.count = ix->n;
  for (size_t i = 0; i < ix->n; i++) h.label_bytes += ix->labels[i] ? strlen(ix->labels[i]) : 0;
  h.meta_bytes = ix->meta ? strlen(ix->meta) : 0;
  accel__atomic_file af;
  accel_status s = accel__atomic_open(ix->ctx, __func__, path, true, &af);
  if (s) return s;
  crc_writer w = {af.f, crc32(0, Z_NULL, 0), true};
  put(&w, &h, sizeof h);
  put_big(&w, ix->ids, ix->n * sizeof(uint64_t));
  put_big(&w, ix->stamps, ix->n * sizeof(uint64_t));
  for (uint32_t f = 0; ix->n && f < ix->nfields; f++) /* an empty index has no code arrays at all */
    for (uint32_t wd = 0; wd < ix->words; wd++) put_big(&w, ix->codes[f] + wd * ix->cap, ix->n * sizeof(uint64_t));
  for (size_t i = 0; i < ix->n; i++) {
    uint64_t len = ix->labels[i] ? strlen(ix->labels[i]) : UINT64_MAX;
    put(&w, &len, sizeof len);
  }
  for (size_t i = 0; i < ix->n; i++)
    if (ix->labels[i]) put(&w, ix->labels[i], strlen(ix->labels[i]));
  if (ix->meta) put(&w, ix->meta, strlen(ix->meta));
  uint32_t crc = (uint32_t)w.crc;
  if (w.ok) w.ok = fwrite(&crc, sizeof crc, 1, af.f) == 1;
  if (!w.ok) return accel__atomic_fail(ix->ctx, __func__, &af);
  return accel__atomic_commit(ix->ctx, __func__, &af);
}

/* The index in a file's bytes `data`, whose header h, size and checksum
 * are checked. */
static accel_status index_from_data(accel_ctx *ctx, const char *func, const char *path, const header *h,
                                    const uint8_t *data, accel_index **out) {
  const uint64_t words = h->bits / 64;
  accel_index_options o;
  accel_index_options_init(&o, sizeof o);
  o.bits = h->bits;
  o.nfields = h->nfields;
  accel_index *ix = NULL;
  accel_status s = accel_index_create(ctx, &o, &ix);
  if (s) return s;
  const size_t n = (size_t)h->count;
  const uint64_t *ids = (const uint64_t *)(const void *)(data + HEADER);
  const uint64_t *stamps = ids + n;
  const uint64_t *codes = stamps + n; /* [nfields][words][n] */
  const uint64_t *lens = codes + n * h->nfields * words;
  const char *text = (const char *)(lens + n), *end_text = text + h->label_bytes;
  /* rows for accel_index_add; labels copied out of the text */
  uint64_t *rows = malloc((n ? n : 1) * h->nfields * words * sizeof(uint64_t));
  char **labels = calloc(n ? n : 1, sizeof(char *));
  if (!rows || !labels) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  } else {
    const char *t = text;
    for (size_t i = 0; i < n && !s; i++) {
      for (uint32_t fl = 0; fl < h->nfields; fl++)
        for (uint64_t w = 0; w < words; w++) rows[(i * h->nfields + fl) * words + w] = codes[(fl * words + w) * n + i];
      if (lens[i] == UINT64_MAX) continue;
      if (lens[i] > (uint64_t)(end_text - t)) {
        s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is corrupt (label lengths)", path);
      } else if (!(labels[i] = strndup(t, (size_t)lens[i]))) {
        s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
      } else {
        t += lens[i];
      }
    }
    if (!s && t != end_text) s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is corrupt (label bytes)", path);
    if (!s && (s = accel_index_add(ix, n, ids, rows, (const char *const *)labels, stamps)))
      accel__fail_in(ctx, func, s == ACCEL_ERR_INVALID_ARG ? ACCEL_ERR_FORMAT : s, "%s: %s", path,
                     accel_last_error(ctx));
    if (s == ACCEL_ERR_INVALID_ARG) s = ACCEL_ERR_FORMAT; /* duplicate ids: a corrupt file */
    if (!s && h->meta_bytes) {
      char *meta = strndup(end_text, (size_t)h->meta_bytes);
      if (!meta || (s = accel_index_set_meta(ix, meta)))
        s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
      free(meta);
    }
  }
  for (size_t i = 0; labels && i < n; i++) free(labels[i]);
  free(labels);
  free(rows);
  if (s) accel_index_destroy(ix);
  else *out = ix;
  return s;
}

static accel_status read_index(accel_ctx *ctx, const char *func, const char *path, FILE *f, int64_t fsize, void *out) {
  accel_status s = ACCEL_OK;
  uint8_t *data = NULL;
  header h;
  if (fsize < HEADER + 4 || fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, MAGIC, 8) != 0) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is not a libaccel index", path);
    goto done;
  }
  if (h.version != VERSION || h.header_size != HEADER) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s has index format version %u; this libaccel reads version %d",
                       path, h.version, VERSION);
    goto done;
  }
  if ((h.bits != 64 && h.bits != 128 && h.bits != 256) || h.nfields < 1 || h.nfields > ACCEL_INDEX_MAX_FIELDS ||
      h.count > UINT32_MAX || h.meta_bytes > 4095) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s has a corrupt header", path);
    goto done;
  }
  /* the exact size the header announces, checked before allocating */
  const uint64_t words = h.bits / 64;
  const uint64_t fixed = h.count * (8 + 8 + 8 * h.nfields * words + 8);
  const uint64_t expect = (uint64_t)HEADER + fixed + h.label_bytes + h.meta_bytes + 4;
  if (h.label_bytes > (uint64_t)fsize || expect != (uint64_t)fsize) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT,
                       "%s is truncated or corrupt (%lld bytes, the header announces "
                       "%llu)",
                       path, (long long)fsize, (unsigned long long)expect);
    goto done;
  }
  data = malloc((size_t)fsize);
  if (!data) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for %lld bytes", (long long)fsize);
    goto done;
  }
  memcpy(data, &h, sizeof h);
  if (fread(data + HEADER, 1, (size_t)fsize - HEADER, f) != (size_t)fsize - HEADER) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot read %s", path);
    goto done;
  }
  uint32_t stored;
  memcpy(&stored, data + fsize - 4, 4);
  uLong crc = crc32(0, Z_NULL, 0);
  for (uint64_t off = 0; off < (uint64_t)fsize - 4;) {
    uint64_t k = (uint64_t)fsize - 4 - off > (1u << 30) ? (1u << 30) : (uint64_t)fsize - 4 - off;
    crc = crc32(crc, data + off, (uInt)k);
    off += k;
  }
  if ((uint32_t)crc != stored) {
    s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is corrupt (checksum mismatch)", path);
    goto done;
  }
  s = index_from_data(ctx, func, path, &h, data, out);
done:
  free(data);
  return s;
}

accel_status accel_index_load(accel_ctx *ctx, const char *path, accel_index **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  return accel__load(ctx, __func__, path, read_index, out);
}
