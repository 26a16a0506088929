/* GeoTIFF rasters through libtiff: one band in, F32 out; the georeferencing
 * tags carried from an input to the outputs made from it. */
#include "io/file.h"

#include "accel/io.h"

#if ACCEL_HAVE_TIFF
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The GeoTIFF tags (OGC GeoTIFF 1.1), which libtiff does not know by itself. */
enum {
  TAG_MODEL_PIXEL_SCALE = 33550,
  TAG_MODEL_TIEPOINT = 33922,
  TAG_MODEL_TRANSFORMATION = 34264,
  TAG_GEO_KEY_DIRECTORY = 34735,
  TAG_GEO_DOUBLE_PARAMS = 34736,
  TAG_GEO_ASCII_PARAMS = 34737
};

static const TIFFFieldInfo geo_fields[] = {
    {TAG_MODEL_PIXEL_SCALE, -1, -1, TIFF_DOUBLE, FIELD_CUSTOM, 1, 1, "ModelPixelScaleTag"},
    {TAG_MODEL_TIEPOINT, -1, -1, TIFF_DOUBLE, FIELD_CUSTOM, 1, 1, "ModelTiepointTag"},
    {TAG_MODEL_TRANSFORMATION, -1, -1, TIFF_DOUBLE, FIELD_CUSTOM, 1, 1, "ModelTransformationTag"},
    {TAG_GEO_KEY_DIRECTORY, -1, -1, TIFF_SHORT, FIELD_CUSTOM, 1, 1, "GeoKeyDirectoryTag"},
    {TAG_GEO_DOUBLE_PARAMS, -1, -1, TIFF_DOUBLE, FIELD_CUSTOM, 1, 1, "GeoDoubleParamsTag"},
    {TAG_GEO_ASCII_PARAMS, -1, -1, TIFF_ASCII, FIELD_CUSTOM, 1, 0, "GeoASCIIParamsTag"},
    /* GDAL's; libtiff defines their numbers but does not register them */
    {TIFFTAG_GDAL_METADATA, -1, -1, TIFF_ASCII, FIELD_CUSTOM, 1, 0, "GDALMetadata"},
    {TIFFTAG_GDAL_NODATA, -1, -1, TIFF_ASCII, FIELD_CUSTOM, 1, 0, "GDALNoDataValue"},
};

static TIFFExtendProc parent_extender;

static void geo_extender(TIFF *tif) {
  TIFFMergeFieldInfo(tif, geo_fields, sizeof geo_fields / sizeof geo_fields[0]);
  if (parent_extender) parent_extender(tif);
}

/* libtiff's handlers print to stderr: collect the last message instead. */
static __thread char tiff_message[256];

static void tiff_handler(const char *module, const char *fmt, va_list ap) {
  char msg[200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  snprintf(tiff_message, sizeof tiff_message, "%s%s%s", module ? module : "", module ? ": " : "", msg);
}

static void tiff_quiet_warning(const char *module, const char *fmt, va_list ap) {
  (void)module;
  (void)fmt;
  (void)ap;
}

static pthread_once_t tiff_once = PTHREAD_ONCE_INIT;

static void tiff_setup(void) {
  parent_extender = TIFFSetTagExtender(geo_extender);
  TIFFSetErrorHandler(tiff_handler);
  TIFFSetWarningHandler(tiff_quiet_warning);
}

/* ------------------------------------------------------------ geo tags */

typedef struct geo_tag {
  uint32_t tag;
  TIFFDataType type;
  uint32_t count;
  void *data;
} geo_tag;

/* The georeferencing only: GDAL's metadata (band statistics, descriptions)
 * and no-data value describe the input's values, not those of the grids
 * made from it, so they are not carried. */
struct accel_geo {
  int n;
  geo_tag t[6];
};

static const struct {
  uint32_t tag;
  TIFFDataType type;
} carried[] = {{TAG_MODEL_PIXEL_SCALE, TIFF_DOUBLE},    {TAG_MODEL_TIEPOINT, TIFF_DOUBLE},
               {TAG_MODEL_TRANSFORMATION, TIFF_DOUBLE}, {TAG_GEO_KEY_DIRECTORY, TIFF_SHORT},
               {TAG_GEO_DOUBLE_PARAMS, TIFF_DOUBLE},    {TAG_GEO_ASCII_PARAMS, TIFF_ASCII}};

void accel_geo_destroy(accel_geo *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) free(g->t[i].data);
  free(g);
}

static accel_geo *geo_read(TIFF *tif) {
  accel_geo *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  for (size_t i = 0; i < sizeof carried / sizeof carried[0]; i++) {
    geo_tag *t = &g->t[g->n];
    if (carried[i].type == TIFF_ASCII) {
      const char *s = NULL;
      if (TIFFGetField(tif, carried[i].tag, &s) != 1 || !s) continue;
      t->count = (uint32_t)strlen(s) + 1;
      if (!(t->data = malloc(t->count))) continue;
      memcpy(t->data, s, t->count);
    } else {
      uint32_t count = 0;
      void *p = NULL;
      const uint16_t *s16 = NULL;
      uint16_t c16 = 0;
      if (carried[i].type == TIFF_SHORT) {
        if (TIFFGetField(tif, carried[i].tag, &c16, &s16) != 1 || !s16) continue;
        count = c16;
        p = (void *)s16;
      } else {
        const double *d = NULL;
        if (TIFFGetField(tif, carried[i].tag, &c16, &d) != 1 || !d) continue;
        count = c16;
        p = (void *)d;
      }
      const size_t size = carried[i].type == TIFF_SHORT ? 2 : 8;
      if (!count || !(t->data = malloc(count * size))) continue;
      memcpy(t->data, p, count * size);
      t->count = count;
    }
    t->tag = carried[i].tag;
    t->type = carried[i].type;
    g->n++;
  }
  return g;
}

static void geo_write(TIFF *tif, const accel_geo *g) {
  for (int i = 0; g && i < g->n; i++) {
    const geo_tag *t = &g->t[i];
    if (t->type == TIFF_ASCII) TIFFSetField(tif, t->tag, (const char *)t->data);
    else TIFFSetField(tif, t->tag, (uint16_t)t->count, t->data);
  }
}

accel_status accel_geo_pixel_size(const accel_geo *g, double *x, double *y) {
  for (int i = 0; g && i < g->n; i++)
    if (g->t[i].tag == TAG_MODEL_PIXEL_SCALE && g->t[i].count >= 2) {
      const double *d = g->t[i].data;
      if (x) *x = d[0];
      if (y) *y = d[1];
      return ACCEL_OK;
    }
  return ACCEL_ERR_NOT_FOUND;
}

/* ------------------------------------------------------------ load */

static double sample_at(const void *buf, uint16_t format, uint16_t bits, size_t i) {
  if (format == SAMPLEFORMAT_IEEEFP) return bits == 32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
  if (format == SAMPLEFORMAT_INT) {
    switch (bits) {
    case 8: return ((const int8_t *)buf)[i];
    case 16: return ((const int16_t *)buf)[i];
    default: return ((const int32_t *)buf)[i];
    }
  }
  switch (bits) {
  case 8: return ((const uint8_t *)buf)[i];
  case 16: return ((const uint16_t *)buf)[i];
  default: return ((const uint32_t *)buf)[i];
  }
}

/* How many times its stored size a strip or tile of this compression can
 * decode to at most (0: no bound known; the pixel limit still applies).
 * PackBits turns 2 bytes into at most 128; an LZW code (9-12 bits) stands
 * for at most 4096 bytes; deflate's maximum ratio is about 1032:1. */
static uint64_t max_ratio(uint16_t compression) {
  switch (compression) {
  case COMPRESSION_NONE: return 1;
  case COMPRESSION_PACKBITS: return 64;
  case COMPRESSION_LZW: return 4096 * 8 / 9 + 1;
  case COMPRESSION_DEFLATE:
  case COMPRESSION_ADOBE_DEFLATE: return 1100;
  default: return 0;
  }
}

/* The largest tile accepted: the whole image rounded up to TIFF's multiples
 * of 16, or 4096 x 4096 pixels, whichever is larger. */
static uint64_t max_tile_pixels(uint32_t w, uint32_t h) {
  const uint64_t whole = ((uint64_t)w + 15) / 16 * 16 * (((uint64_t)h + 15) / 16 * 16);
  return whole > 4096ull * 4096 ? whole : 4096ull * 4096;
}

/* Before the raster is allocated: the strips or tiles must lie inside the
 * file, and the bytes they hold must be able to decode to the pixels they
 * declare (a few hundred bytes cannot hold a 3.6 GB strip). Returns NULL or
 * what is wrong. */
static const char *check_layout(TIFF *tif, uint32_t w, uint32_t h, size_t bps, uint64_t file_size, char *why,
                                size_t why_size) {
  uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  const uint64_t ratio = max_ratio(compression);
  const bool tiled = TIFFIsTiled(tif);
  uint32_t tw = 0, th = 0, rps = 0;
  if (tiled) {
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    if (!tw || !th) return "tiles without a width or length";
    if ((uint64_t)tw * th > max_tile_pixels(w, h)) {
      snprintf(why, why_size, "tiles of %u x %u pixels for a %u x %u raster", (unsigned)tw, (unsigned)th, (unsigned)w,
               (unsigned)h);
      return why;
    }
  } else {
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
    if (!rps || rps > h) rps = h;
  }
  const uint32_t n = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
  const uint64_t *offsets = NULL, *counts = NULL;
  if (!n || !TIFFGetField(tif, tiled ? TIFFTAG_TILEOFFSETS : TIFFTAG_STRIPOFFSETS, &offsets) ||
      !TIFFGetField(tif, tiled ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS, &counts) || !offsets || !counts)
    return tiled ? "no tile offsets or byte counts" : "no strip offsets or byte counts";
  for (uint32_t i = 0; i < n; i++) {
    if (offsets[i] > file_size || counts[i] > file_size - offsets[i]) {
      snprintf(why, why_size, "truncated: %s %u needs bytes %llu..%llu of a %llu-byte file", tiled ? "tile" : "strip",
               (unsigned)i, (unsigned long long)offsets[i], (unsigned long long)(offsets[i] + counts[i]),
               (unsigned long long)file_size);
      return why;
    }
    if (!ratio) continue;
    uint64_t pixels; /* what this strip or tile decodes to */
    if (tiled) {
      pixels = (uint64_t)tw * th; /* edge tiles are stored whole */
    } else {
      const uint64_t first = (uint64_t)i * rps;
      pixels = first >= h ? 0 : (uint64_t)w * (h - first < rps ? h - first : rps);
    }
    if (counts[i] * ratio < pixels * bps) {
      snprintf(why, why_size, "truncated: %s %u holds %llu bytes, too few for its %llu bytes of pixels",
               tiled ? "tile" : "strip", (unsigned)i, (unsigned long long)counts[i],
               (unsigned long long)(pixels * bps));
      return why;
    }
  }
  return NULL;
}

accel_status accel_tiff_load(accel_ctx *ctx, const char *path, accel_buffer **out, accel_geo **geo) {
  REQUIRE(ctx, path && out, ACCEL_ERR_INVALID_ARG, "path and out are required");
  *out = NULL;
  if (geo) *geo = NULL;
  pthread_once(&tiff_once, tiff_setup);
  tiff_message[0] = '\0';
  FILE *probe;
  int64_t file_size;
  accel_status s = accel__open_read(ctx, __func__, path, &probe, &file_size);
  if (s) return s;
  fclose(probe);
  TIFF *tif = TIFFOpen(path, "r");
  REQUIRE(ctx, tif, ACCEL_ERR_FORMAT, "%s is not a readable TIFF (%s)", path, tiff_message);
  uint32_t w = 0, h = 0;
  uint16_t spp = 1, bits = 0, format = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  const bool ok_format =
      (format == SAMPLEFORMAT_IEEEFP && (bits == 32 || bits == 64)) ||
      ((format == SAMPLEFORMAT_INT || format == SAMPLEFORMAT_UINT) && (bits == 8 || bits == 16 || bits == 32));
  if (spp != 1) s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s has %u bands; one is needed", path, (unsigned)spp);
  else if (!ok_format)
    s = FAIL(ctx, ACCEL_ERR_FORMAT,
             "%s: %u-bit samples of format %u are not supported (float32, float64 and "
             "8/16/32-bit integers are)",
             path, (unsigned)bits, (unsigned)format);
  else if (!w || !h) s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s is empty", path);
  else if ((uint64_t)w * h > accel__ctx_max_pixels(ctx))
    s = FAIL(ctx, ACCEL_ERR_LIMIT, "%s is %u x %u, over the pixel limit of %llu (accel_ctx_options.max_pixels)", path,
             (unsigned)w, (unsigned)h, (unsigned long long)accel__ctx_max_pixels(ctx));
  char layout_why[200];
  const char *bad = s ? NULL : check_layout(tif, w, h, bits / 8u, (uint64_t)file_size, layout_why, sizeof layout_why);
  if (bad) s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s: %s", path, bad);
  accel_buffer *b = NULL;
  if (!s) {
    const int64_t shape[2] = {h, w};
    if ((s = accel_buffer_create(ACCEL_DTYPE_F32, 2, shape, &b)))
      FAIL(ctx, s, "no memory for %s (%u x %u)", path, (unsigned)h, (unsigned)w);
  }
  float *dst = NULL;
  if (!s) {
    accel_array v;
    accel_buffer_view(b, &v);
    dst = v.data;
  }
  const size_t bps = bits / 8u;
  if (!s && TIFFIsTiled(tif)) {
    uint32_t tw = 0, th = 0;
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    void *tile = tw && th ? _TIFFmalloc(TIFFTileSize(tif)) : NULL;
    if (!tile) s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s: bad tiles", path);
    for (uint32_t y = 0; y < h && !s; y += th)
      for (uint32_t x = 0; x < w && !s; x += tw) {
        if (TIFFReadTile(tif, tile, x, y, 0, 0) < 0) {
          s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s: cannot read the tile at (%u, %u): %s", path, (unsigned)y, (unsigned)x,
                   tiff_message);
          break;
        }
        for (uint32_t r = 0; r < th && y + r < h; r++)
          for (uint32_t c = 0; c < tw && x + c < w; c++)
            dst[(size_t)(y + r) * w + x + c] = (float)sample_at(tile, format, bits, (size_t)r * tw + c);
      }
    if (tile) _TIFFfree(tile);
  } else if (!s) {
    void *line = _TIFFmalloc(TIFFScanlineSize(tif) > (tmsize_t)(w * bps) ? TIFFScanlineSize(tif) : (tmsize_t)(w * bps));
    if (!line) s = FAIL(ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
    for (uint32_t r = 0; r < h && !s; r++) {
      if (TIFFReadScanline(tif, line, r, 0) < 0) {
        s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s: cannot read row %u: %s", path, (unsigned)r, tiff_message);
        break;
      }
      for (uint32_t c = 0; c < w; c++) dst[(size_t)r * w + c] = (float)sample_at(line, format, bits, c);
    }
    if (line) _TIFFfree(line);
  }
  /* GDAL's no-data value becomes NaN */
  const char *nodata = NULL;
  if (!s && TIFFGetField(tif, TIFFTAG_GDAL_NODATA, &nodata) == 1 && nodata) {
    char *end;
    const double nd = strtod(nodata, &end);
    if (end != nodata) {
      const float ndf = (float)nd;
      for (size_t i = 0; i < (size_t)w * h; i++)
        if (dst[i] == ndf) dst[i] = NAN;
    }
  }
  if (!s && geo && !(*geo = geo_read(tif)))
    s = FAIL(ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for the georeferencing");
  TIFFClose(tif);
  if (s) {
    accel_buffer_destroy(b);
    return s;
  }
  *out = b;
  return ACCEL_OK;
}

/* ------------------------------------------------------------ save */

/* libtiff's I/O on an atomic save's temporary file (the handle is the
 * accel__atomic_file): writes go through accel__atomic_write, which keeps
 * the first error. */
static tmsize_t tiff_read(thandle_t h, void *buf, tmsize_t n) {
  const ssize_t k = read(((accel__atomic_file *)h)->fd, buf, (size_t)n);
  return k < 0 ? -1 : (tmsize_t)k;
}

static tmsize_t tiff_write(thandle_t h, void *buf, tmsize_t n) {
  return accel__atomic_write((accel__atomic_file *)h, buf, (size_t)n) ? n : -1;
}

static toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  const off_t at = lseek(((accel__atomic_file *)h)->fd, (off_t)off, whence);
  return at < 0 ? (toff_t)-1 : (toff_t)at;
}

static int tiff_close(thandle_t h) {
  (void)h; /* the save closes its descriptor itself */
  return 0;
}

static toff_t tiff_size(thandle_t h) {
  struct stat st;
  return fstat(((accel__atomic_file *)h)->fd, &st) == 0 ? (toff_t)st.st_size : 0;
}

static int tiff_map(thandle_t h, void **base, toff_t *size) {
  (void)h;
  (void)base;
  (void)size;
  return 0; /* never mapped */
}

static void tiff_unmap(thandle_t h, void *base, toff_t size) {
  (void)h;
  (void)base;
  (void)size;
}

accel_status accel_tiff_save(accel_ctx *ctx, const char *path, const accel_array *a, const accel_geo *geo) {
  accel_status s = accel__array_check(ctx, __func__, "array", a);
  if (s) return s;
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  if (a->ndim != 2 || (a->dtype != ACCEL_DTYPE_F32 && a->dtype != ACCEL_DTYPE_U8))
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "a 2-D F32 or U8 array is needed, not %d-D %s", (int)a->ndim,
                accel__dtype_name(a->dtype));
  if (a->shape[0] < 1 || a->shape[1] < 1 || a->shape[0] > UINT32_MAX || a->shape[1] > UINT32_MAX)
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "cannot write a %lld x %lld raster", (long long)a->shape[0],
                (long long)a->shape[1]);
  pthread_once(&tiff_once, tiff_setup);
  tiff_message[0] = '\0';
  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, __func__, path, &af))) return s;
  /* libtiff writes through the save's descriptor, so every write's error is
   * kept; it needs seeks, and reads back nothing it did not write */
  TIFF *tif = TIFFClientOpen(path, "w", (thandle_t)&af, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                             tiff_map, tiff_unmap);
  if (!tif) {
    accel__atomic_abort(&af);
    return FAIL(ctx, ACCEL_ERR_IO, "cannot write %s (%s)", path, tiff_message);
  }
  const uint32_t h = (uint32_t)a->shape[0], w = (uint32_t)a->shape[1];
  const size_t es = a->dtype == ACCEL_DTYPE_F32 ? 4 : 1;
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)1);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)(es * 8));
  TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, (uint16_t)(es == 4 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT));
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, (uint16_t)PHOTOMETRIC_MINISBLACK);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, (uint16_t)PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_NONE);
  TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(tif, 0));
  geo_write(tif, geo);
  uint8_t *line = malloc(w * es);
  const bool oom = line == NULL;
  bool ok = !oom;
  for (uint32_t r = 0; r < h && ok; r++) {
    for (uint32_t c = 0; c < w; c++)
      memcpy(line + c * es, (const uint8_t *)a->data + r * a->strides[0] + c * a->strides[1], es);
    ok = TIFFWriteScanline(tif, line, r, 0) >= 0;
  }
  free(line);
  /* the directory is written here: a failure now is as fatal as one in a strip */
  ok = TIFFFlush(tif) == 1 && ok;
  TIFFClose(tif);
  if (!ok || af.err) {
    if (!af.err && !oom) af.err = EIO; /* libtiff refused without a system error */
    return accel__atomic_fail(ctx, __func__, &af);
  }
  return accel__atomic_commit(ctx, __func__, &af);
}

#else /* !ACCEL_HAVE_TIFF */

static accel_status no_tiff(accel_ctx *ctx, const char *func) {
  return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                        "this libaccel was built without libtiff (GeoTIFF); "
                        "use .npy files or rebuild with libtiff-dev installed");
}

accel_status accel_tiff_load(accel_ctx *ctx, const char *path, accel_buffer **out, accel_geo **geo) {
  (void)path;
  if (out) *out = NULL;
  if (geo) *geo = NULL;
  return no_tiff(ctx, __func__);
}

accel_status accel_tiff_save(accel_ctx *ctx, const char *path, const accel_array *a, const accel_geo *geo) {
  (void)path;
  (void)a;
  (void)geo;
  return no_tiff(ctx, __func__);
}

accel_status accel_geo_pixel_size(const accel_geo *g, double *x, double *y) {
  (void)g;
  (void)x;
  (void)y;
  return ACCEL_ERR_NOT_FOUND;
}

void accel_geo_destroy(accel_geo *g) { (void)g; }
#endif
