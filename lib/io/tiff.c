/* TIFF through libtiff: GeoTIFF rasters (one band in, F32 out; the
 * georeferencing tags carried from an input to the outputs made from it),
 * and images of any size with their pixels as stored, in and out. */
#include "io/file.h"

#include "accel/io.h"
#include "io/tiff.h"

/* The size of accel_tiff_save_options as first released. */
enum { TIFF_SAVE_V1_SIZE = offsetof(accel_tiff_save_options, geo) }; /* the first release's: up to bigtiff */

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
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#endif

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
 * declare (a few hundred bytes cannot hold a 3.6 GB strip). `bps` is the
 * bytes of one pixel in a strip or tile (all its samples, or one with
 * separate planes, whose strips or tiles follow plane after plane).
 * Returns NULL or what is wrong. */
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
  uint16_t planar = PLANARCONFIG_CONTIG, spp = 1;
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  const uint32_t per_plane = planar == PLANARCONFIG_SEPARATE && spp > 1 ? n / spp : n;
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
      const uint64_t first = (uint64_t)(per_plane ? i % per_plane : i) * rps;
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

/* ------------------------------------------------------------ images, pixels as stored */

/* What accel_tiff_load_image reads: the first directory's layout. */
typedef struct image_layout {
  uint32_t w, h;
  uint16_t spp, bits, format, planar, photometric;
  accel_dtype dtype;
  size_t es; /* bytes a sample */
} image_layout;

/* The dtype of a sample type; ACCEL_DTYPE_INVALID for one not loaded. */
static accel_dtype sample_dtype(uint16_t format, uint16_t bits) {
  if (format == SAMPLEFORMAT_IEEEFP) return bits == 32 ? ACCEL_DTYPE_F32 : bits == 64 ? ACCEL_DTYPE_F64 : 0;
  if (format == SAMPLEFORMAT_INT)
    return bits == 8 ? ACCEL_DTYPE_I8 : bits == 16 ? ACCEL_DTYPE_I16 : bits == 32 ? ACCEL_DTYPE_I32 : 0;
  if (format == SAMPLEFORMAT_UINT || format == SAMPLEFORMAT_VOID)
    return bits == 8 ? ACCEL_DTYPE_U8 : bits == 16 ? ACCEL_DTYPE_U16 : bits == 32 ? ACCEL_DTYPE_U32 : 0;
  return ACCEL_DTYPE_INVALID;
}

static const char *photometric_name(uint16_t p) {
  switch (p) {
  case PHOTOMETRIC_MINISWHITE: return "min-is-white";
  case PHOTOMETRIC_PALETTE: return "palette (colour-mapped)";
  case PHOTOMETRIC_MASK: return "transparency mask";
  case PHOTOMETRIC_SEPARATED: return "separated (CMYK)";
  case PHOTOMETRIC_YCBCR: return "YCbCr (as in JPEG-compressed TIFFs)";
  case PHOTOMETRIC_CIELAB:
  case PHOTOMETRIC_ICCLAB:
  case PHOTOMETRIC_ITULAB: return "CIE L*a*b*";
  default: return "an unknown";
  }
}

/* n (2, 4 or 8) bytes at p in the file's byte order. */
static uint64_t file_uint(const uint8_t *p, int n, bool le) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[le ? i : n - 1 - i] << (8 * i);
  return v;
}

/* The Photometric tag as the first directory of the file at fd stores it,
 * or -1 when that cannot be read (libtiff's value then stands). libtiff
 * reads a palette image of 8 bits or more whose colormap is missing as
 * min-is-black (RGB with 3 samples) without a word: the stored value tells
 * it apart. */
static int stored_photometric(int fd) {
  enum { MAX_ENTRIES = 512 }; /* a directory holds a few dozen; a longer one is not looked through */
  uint8_t h[16], e[MAX_ENTRIES * 20];
  if (fd < 0 || pread(fd, h, 8, 0) != 8 || (h[0] != 'I' && h[0] != 'M') || h[1] != h[0]) return -1;
  const bool le = h[0] == 'I', big = file_uint(h + 2, 2, le) == 43;
  if (big && pread(fd, h + 8, 8, 8) != 8) return -1;
  const uint64_t ifd = big ? file_uint(h + 8, 8, le) : file_uint(h + 4, 4, le);
  const int cn = big ? 8 : 2, esz = big ? 20 : 12;
  if (ifd > (uint64_t)INT64_MAX / 2 || pread(fd, e, (size_t)cn, (off_t)ifd) != cn) return -1;
  const uint64_t count = file_uint(e, cn, le);
  const size_t n = count < MAX_ENTRIES ? (size_t)count : MAX_ENTRIES;
  const ssize_t got = pread(fd, e, n * (size_t)esz, (off_t)(ifd + (uint64_t)cn));
  for (size_t k = 0; got > 0 && k < (size_t)got / (size_t)esz; k++) {
    const uint8_t *p = e + k * (size_t)esz;
    if (file_uint(p, 2, le) == TIFFTAG_PHOTOMETRIC)
      return file_uint(p + 2, 2, le) == TIFF_SHORT ? (int)file_uint(p + (big ? 12 : 8), 2, le) : -1;
  }
  return -1;
}

/* Read and check the tags of the first directory (nothing is allocated). */
static accel_status image_header(accel_ctx *ctx, const char *func, const char *path, TIFF *tif, image_layout *L) {
  memset(L, 0, sizeof *L);
  L->spp = 1, L->format = SAMPLEFORMAT_UINT, L->planar = PLANARCONFIG_CONTIG, L->photometric = PHOTOMETRIC_MINISBLACK;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &L->w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &L->h);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &L->spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &L->bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &L->format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &L->planar);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &L->photometric);
  uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  L->dtype = sample_dtype(L->format, L->bits);
  L->es = L->bits / 8u;
  const uint64_t limit = accel__ctx_max_pixels(ctx);
  if (!L->w || !L->h) return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s is empty (%u x %u)", path, L->w, L->h);
  if (L->photometric != PHOTOMETRIC_PALETTE && stored_photometric(TIFFFileno(tif)) == PHOTOMETRIC_PALETTE)
    return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT,
                          "%s: a palette (colour-mapped) image without its colormap; its pixels are colour indices",
                          path);
  if (L->photometric != PHOTOMETRIC_MINISBLACK && L->photometric != PHOTOMETRIC_RGB)
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                          "%s: %s images (photometric interpretation %u) are not supported; gray and RGB are", path,
                          photometric_name(L->photometric), (unsigned)L->photometric);
  if (L->spp < 1 || L->spp > 4 || (L->photometric == PHOTOMETRIC_RGB && L->spp < 3))
    return accel__fail_in(ctx, func, L->spp > 4 ? ACCEL_ERR_UNSUPPORTED : ACCEL_ERR_FORMAT,
                          "%s: %u samples a pixel with photometric interpretation %s; 1 to 4 gray, 3 or 4 RGB are read",
                          path, (unsigned)L->spp, L->photometric == PHOTOMETRIC_RGB ? "RGB" : "min-is-black");
  if (!L->dtype)
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED,
                          "%s: %u-bit samples of format %u are not supported (8/16/32-bit integers, 32/64-bit floats "
                          "are)",
                          path, (unsigned)L->bits, (unsigned)L->format);
  if (L->planar != PLANARCONFIG_CONTIG && L->planar != PLANARCONFIG_SEPARATE)
    return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: unknown planar configuration %u", path, L->planar);
  if ((uint64_t)L->w * L->h > limit)
    return accel__fail_in(ctx, func, ACCEL_ERR_LIMIT,
                          "%s is %u x %u, over the pixel limit of %llu (accel_ctx_options.max_pixels)", path, L->w,
                          L->h, (unsigned long long)limit);
  if (!TIFFIsCODECConfigured(compression))
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED, "%s: compression %u is not available in this libtiff", path,
                          (unsigned)compression);
  return ACCEL_OK;
}

/* Strips of separate planes decoded whole up to this size; larger ones a
 * band of rows at a time. */
#define WHOLE_STRIP_MAX ((tmsize_t)4 << 20)

/* Copy n samples of es bytes from packed `src` to every `step`-th sample of dst. */
static void scatter(uint8_t *dst, const uint8_t *src, size_t n, size_t es, size_t step) {
  switch (es) {
  case 1:
    for (size_t i = 0; i < n; i++) dst[i * step] = src[i];
    break;
  case 2:
    for (size_t i = 0; i < n; i++) memcpy(dst + i * step * 2, src + i * 2, 2);
    break;
  case 4:
    for (size_t i = 0; i < n; i++) memcpy(dst + i * step * 4, src + i * 4, 4);
    break;
  default:
    for (size_t i = 0; i < n; i++) memcpy(dst + i * step * 8, src + i * 8, 8);
    break;
  }
}

static accel_status strip_failed(accel_ctx *ctx, const char *func, const char *path, uint32_t y, const char *what) {
  return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: cannot read %s at row %u: %s", path, what, (unsigned)y,
                        tiff_message[0] ? tiff_message : "the file ends early");
}

/* Bytes [at, at + n) of an uncompressed strip, read past libtiff (which
 * would hold the whole strip), in the host's byte order. */
static bool read_raw(TIFF *tif, uint32_t strip, uint64_t at, size_t n, size_t es, uint8_t *buf) {
  const int fd = TIFFFileno(tif);
  uint64_t off = TIFFGetStrileOffset(tif, strip) + at;
  for (size_t done = 0; done < n;) {
    const ssize_t k = pread(fd, buf + done, n - done, (off_t)(off + done));
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return false;
    }
    done += (size_t)k;
  }
  if (TIFFIsByteSwapped(tif) && es > 1) {
    if (es == 2) TIFFSwabArrayOfShort((uint16_t *)(void *)buf, (tmsize_t)(n / 2));
    else if (es == 4) TIFFSwabArrayOfLong((uint32_t *)(void *)buf, (tmsize_t)(n / 4));
    else TIFFSwabArrayOfLong8((uint64_t *)(void *)buf, (tmsize_t)(n / 8));
  }
  return true;
}

/* Samples in separate planes, strips of rows: each plane's strip decoded into
 * one strip's scratch and scattered into dst; a strip over WHOLE_STRIP_MAX
 * a band of rows at a time (read directly when uncompressed; otherwise
 * libtiff holds the strip's compressed bytes, not the decoded strip). */
static accel_status read_separate_strips(accel_ctx *ctx, const char *func, const char *path, TIFF *tif,
                                         const image_layout *L, uint32_t rps, uint8_t *dst) {
  const size_t row = (size_t)L->w * L->spp * L->es, srow = (size_t)L->w * L->es;
  uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  const bool whole = (tmsize_t)(srow * rps) <= WHOLE_STRIP_MAX, raw = !whole && compression == COMPRESSION_NONE;
  const uint32_t band = whole ? rps : raw && srow < ((size_t)1 << 20) ? (uint32_t)(((size_t)1 << 20) / srow) : 1;
  uint8_t *scratch = _TIFFmalloc((tmsize_t)(srow * (band < rps ? band : rps)));
  if (!scratch) return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  const uint32_t per_plane = (L->h + rps - 1) / rps;
  accel_status s = ACCEL_OK;
  for (uint32_t p = 0; p < L->spp && !s; p++)
    for (uint32_t y = 0; y < L->h && !s;) {
      const uint32_t strip = p * per_plane + y / rps, in_strip = y % rps, left = rps - in_strip;
      uint32_t rows = band < left ? band : left;
      if (rows > L->h - y) rows = L->h - y;
      const tmsize_t want = (tmsize_t)(rows * srow);
      bool ok;
      if (whole) ok = TIFFReadEncodedStrip(tif, strip, scratch, want) == want;
      else if (raw) ok = read_raw(tif, strip, (uint64_t)in_strip * srow, (size_t)want, L->es, scratch);
      else ok = TIFFReadScanline(tif, scratch, y, (uint16_t)p) >= 0;
      if (!ok) s = strip_failed(ctx, func, path, y, "a strip");
      else scatter(dst + (size_t)y * row + p * L->es, scratch, (size_t)rows * L->w, L->es, L->spp);
      y += rows;
    }
  _TIFFfree(scratch);
  return s;
}

/* Strips of rows: with samples interleaved, each strip is decoded straight
 * into its rows of dst (libtiff reads an uncompressed strip straight there,
 * and holds a compressed one's bytes while it decodes it). */
static accel_status read_strips(accel_ctx *ctx, const char *func, const char *path, TIFF *tif, const image_layout *L,
                                uint8_t *dst) {
  uint32_t rps = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
  if (!rps || rps > L->h) rps = L->h;
  if (L->planar == PLANARCONFIG_SEPARATE && L->spp > 1) return read_separate_strips(ctx, func, path, tif, L, rps, dst);
  const size_t row = (size_t)L->w * L->spp * L->es;
  for (uint32_t y = 0; y < L->h; y += rps) {
    const uint32_t rows = L->h - y < rps ? L->h - y : rps;
    const tmsize_t want = (tmsize_t)(rows * row);
    if (TIFFReadEncodedStrip(tif, y / rps, dst + (size_t)y * row, want) != want)
      return strip_failed(ctx, func, path, y, "the strip");
  }
  return ACCEL_OK;
}

/* Tiles: one tile's scratch, its rows copied (or its samples scattered)
 * into dst. */
static accel_status read_tiles(accel_ctx *ctx, const char *func, const char *path, TIFF *tif, const image_layout *L,
                               uint8_t *dst) {
  const bool sep = L->planar == PLANARCONFIG_SEPARATE && L->spp > 1;
  const size_t pix = L->spp * L->es, row = (size_t)L->w * pix, tpix = sep ? L->es : pix;
  uint32_t tw = 0, th = 0;
  TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
  TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
  const tmsize_t size = (tmsize_t)((size_t)tw * th * tpix);
  uint8_t *tile = tw && th ? _TIFFmalloc(size) : NULL;
  if (!tile) return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  accel_status s = ACCEL_OK;
  for (uint32_t p = 0; p < (sep ? L->spp : 1u) && !s; p++)
    for (uint32_t y = 0; y < L->h && !s; y += th)
      for (uint32_t x = 0; x < L->w && !s; x += tw) {
        if (TIFFReadEncodedTile(tif, TIFFComputeTile(tif, x, y, 0, (uint16_t)p), tile, size) != size) {
          s = accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: cannot read the tile at row %u, column %u: %s", path,
                             (unsigned)y, (unsigned)x, tiff_message[0] ? tiff_message : "short tile");
          break;
        }
        const uint32_t rows = L->h - y < th ? L->h - y : th, cols = L->w - x < tw ? L->w - x : tw;
        for (uint32_t r = 0; r < rows; r++) {
          uint8_t *to = dst + (size_t)(y + r) * row + (size_t)x * pix;
          const uint8_t *from = tile + (size_t)r * tw * tpix;
          if (sep) scatter(to + p * L->es, from, cols, L->es, L->spp);
          else memcpy(to, from, (size_t)cols * pix);
        }
      }
  _TIFFfree(tile);
  return s;
}

uint64_t accel__tiff_map_min = (uint64_t)64 << 20;

/* An uncompressed image whose strips lie in the file one after the other,
 * in the host's byte order, samples interleaved: the raster is the file's
 * bytes, and it is mapped rather than read (copying a large image costs
 * its size in fresh memory, and the time to fault it in, on top of the
 * page cache that already holds it). The mapping is private: writes to
 * the buffer never reach the file. NULL when the layout does not allow it
 * or mapping fails (the caller reads the strips). */
static accel_buffer *map_strips(TIFF *tif, const image_layout *L, uint64_t file_size) {
#if defined(__unix__) || defined(__APPLE__)
  uint16_t compression = COMPRESSION_NONE, fill = FILLORDER_MSB2LSB;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &fill);
  const uint64_t row = (uint64_t)L->w * L->spp * L->es, bytes = row * L->h;
  /* FillOrder 2: libtiff reverses each byte's bits as it reads; the file's
   * bytes are not the raster */
  if (TIFFIsTiled(tif) || compression != COMPRESSION_NONE || fill != FILLORDER_MSB2LSB ||
      (L->planar == PLANARCONFIG_SEPARATE && L->spp > 1) || TIFFIsByteSwapped(tif) || bytes < accel__tiff_map_min ||
      bytes > (uint64_t)SIZE_MAX)
    return NULL;
  uint32_t rps = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
  if (!rps || rps > L->h) rps = L->h;
  const uint64_t *offsets = NULL, *counts = NULL;
  const uint32_t n = TIFFNumberOfStrips(tif);
  if (n != (L->h + rps - 1) / rps || !TIFFGetField(tif, TIFFTAG_STRIPOFFSETS, &offsets) ||
      !TIFFGetField(tif, TIFFTAG_STRIPBYTECOUNTS, &counts) || !offsets || !counts)
    return NULL;
  const uint64_t start = offsets[0];
  if (start % L->es || start > file_size || bytes > file_size - start) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t rows = L->h - (uint64_t)i * rps < rps ? L->h - (uint64_t)i * rps : rps;
    if (offsets[i] != start + (uint64_t)i * rps * row || counts[i] < rows * row) return NULL;
  }
  const size_t map_bytes = (size_t)(start + bytes);
  void *map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, TIFFFileno(tif), 0);
  if (map == MAP_FAILED) return NULL;
  const int64_t shape[3] = {L->h, L->w, L->spp};
  accel_buffer *b = NULL;
  if (accel__buffer_wrap_mapping(L->dtype, L->spp == 1 ? 2 : 3, shape, map, map_bytes, (size_t)start, &b)) {
    munmap(map, map_bytes);
    return NULL;
  }
  return b;
#else
  (void)tif, (void)L, (void)file_size;
  return NULL;
#endif
}

accel_status accel_tiff_load_image(accel_ctx *ctx, const char *path, accel_buffer **out) {
  REQUIRE(ctx, path && out, ACCEL_ERR_INVALID_ARG, "path and out are required");
  *out = NULL;
  pthread_once(&tiff_once, tiff_setup);
  tiff_message[0] = '\0';
  FILE *probe;
  int64_t file_size;
  accel_status s = accel__open_read(ctx, __func__, path, &probe, &file_size);
  if (s) return s;
  fclose(probe);
  /* "m": no memory mapping, whose pages would count against the process
   * beside the decoded image */
  TIFF *tif = TIFFOpen(path, "rm");
  REQUIRE(ctx, tif, ACCEL_ERR_FORMAT, "%s is not a readable TIFF (%s)", path, tiff_message);
  image_layout L;
  s = image_header(ctx, __func__, path, tif, &L);
  /* a stack given where an image is meant: say which image is used */
  if (!s && !TIFFLastDirectory(tif))
    accel__log(ctx, ACCEL_LOG_WARN, "accel: %s holds more than one image; only the first is loaded", path);
  char why[200];
  const size_t chunk_bps = L.planar == PLANARCONFIG_SEPARATE ? L.es : L.es * L.spp;
  const char *bad = s ? NULL : check_layout(tif, L.w, L.h, chunk_bps, (uint64_t)file_size, why, sizeof why);
  if (bad) s = FAIL(ctx, ACCEL_ERR_FORMAT, "%s: %s", path, bad);
  accel_buffer *b = NULL;
  if (!s && (b = map_strips(tif, &L, (uint64_t)file_size))) {
    TIFFClose(tif);
    *out = b;
    return ACCEL_OK;
  }
  if (!s) {
    const int64_t shape[3] = {L.h, L.w, L.spp};
    if ((s = accel__buffer_create_uninit(L.dtype, L.spp == 1 ? 2 : 3, shape, &b)))
      FAIL(ctx, s, "no memory for %s (%u x %u x %u %s)", path, L.h, L.w, L.spp, accel__dtype_name(L.dtype));
  }
  if (!s) {
    accel_array v;
    accel_buffer_view(b, &v);
    tiff_message[0] = '\0';
    s = TIFFIsTiled(tif) ? read_tiles(ctx, __func__, path, tif, &L, v.data)
                         : read_strips(ctx, __func__, path, tif, &L, v.data);
  }
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

/* libtiff writes through the save's descriptor, so every write's error is
 * kept; it needs seeks, and reads back nothing it did not write. */
static TIFF *client_open(const char *path, const char *mode, accel__atomic_file *af) {
  return TIFFClientOpen(path, mode, (thandle_t)af, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size, tiff_map,
                        tiff_unmap);
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
  if ((s = accel__atomic_open(ctx, __func__, path, false, &af))) return s;
  TIFF *tif = client_open(path, "w", &af);
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

/* ------------------------------------------------------------ images: save */

uint64_t accel__tiff_classic_max = UINT32_MAX;

/* What accel_tiff_save_image writes. */
typedef struct save_plan {
  uint32_t w, h, tile, rps; /* tile 0: strips of rps rows */
  uint16_t spp, format;
  size_t es, pix; /* bytes a sample, a pixel */
  bool big;
} save_plan;

static uint16_t dtype_format(accel_dtype d) {
  switch (d) {
  case ACCEL_DTYPE_U8:
  case ACCEL_DTYPE_U16:
  case ACCEL_DTYPE_U32: return SAMPLEFORMAT_UINT;
  case ACCEL_DTYPE_I8:
  case ACCEL_DTYPE_I16:
  case ACCEL_DTYPE_I32: return SAMPLEFORMAT_INT;
  case ACCEL_DTYPE_F32:
  case ACCEL_DTYPE_F64: return SAMPLEFORMAT_IEEEFP;
  default: return 0;
  }
}

/* The array and the options, checked; the layout of the file. */
static accel_status plan_save(accel_ctx *ctx, const char *func, const accel_array *a, const accel_tiff_save_options *o,
                              save_plan *p) {
  accel_status s = accel__array_check(ctx, func, "image", a);
  if (s) return s;
  memset(p, 0, sizeof *p);
  p->format = dtype_format(a->dtype);
  if (!p->format || a->ndim < 2 || a->ndim > 3 || (a->ndim == 3 && (a->shape[2] < 1 || a->shape[2] > 4)))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "an (H, W) or (H, W, 1..4) image of U8, I8, U16, I16, U32, I32, F32 or F64 is needed, not "
                          "a %d-D %s array%s",
                          (int)a->ndim, accel__dtype_name(a->dtype), a->ndim == 3 ? " of that many channels" : "");
  if (a->shape[0] < 1 || a->shape[1] < 1 || a->shape[0] > UINT32_MAX || a->shape[1] > UINT32_MAX)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "cannot write a %lld x %lld image", (long long)a->shape[0],
                          (long long)a->shape[1]);
  if (o->compression != ACCEL_TIFF_COMPRESSION_NONE && o->compression != ACCEL_TIFF_COMPRESSION_DEFLATE)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "unknown compression %d", (int)o->compression);
  if (o->deflate_level < 1 || o->deflate_level > 9)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "deflate_level %d is not in 1..9", (int)o->deflate_level);
  if (o->predictor != 0 && o->predictor != 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "predictor %d is neither 0 nor 1", (int)o->predictor);
  if (o->tile_size && (o->tile_size < 16 || o->tile_size > 4096 || o->tile_size % 16))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "tile_size %d is not 0 or a multiple of 16 in 16..4096",
                          (int)o->tile_size);
  if (o->bigtiff != 0 && o->bigtiff != 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "bigtiff %d is neither 0 nor 1", (int)o->bigtiff);
  if (o->has_nodata != 0 && o->has_nodata != 1)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "has_nodata %d is neither 0 nor 1", (int)o->has_nodata);
  if (o->geo && !(a->ndim == 2 || (a->ndim == 3 && a->shape[2] == 1)))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "georeferencing goes with one-band (H, W) images only");
  p->h = (uint32_t)a->shape[0], p->w = (uint32_t)a->shape[1];
  p->spp = (uint16_t)(a->ndim == 3 ? a->shape[2] : 1);
  p->es = accel_dtype_size(a->dtype), p->pix = p->es * p->spp;
  p->tile = (uint32_t)o->tile_size;
  const uint64_t row = (uint64_t)p->w * p->pix;
  p->rps = row >= (1u << 20) ? 1 : (uint32_t)((1u << 20) / row);
  if (p->rps > p->h) p->rps = p->h;
  /* A bound on the file's size: the pixels (whole tiles), deflate's worst
   * expansion (5 bytes a 16 KiB stored block, a few bytes a stream), two
   * 8-byte entries a strip or tile, the directory. */
  const uint64_t t = p->tile, rows = t ? (p->h + t - 1) / t * t : p->h, cols = t ? (p->w + t - 1) / t * t : p->w;
  const uint64_t chunks = t ? rows / t * (cols / t) : (p->h + p->rps - 1) / p->rps;
  const uint64_t data = rows * cols * p->pix;
  const uint64_t bound = data + data / 1024 + chunks * (16 + 16) + (1u << 16);
  p->big = o->bigtiff == 1 || bound > accel__tiff_classic_max;
  return ACCEL_OK;
}

/* Pack pixels [x, x + n) of row y into dst (interleaved samples). */
static void pack_pixels(const accel_array *a, const save_plan *p, uint32_t y, uint32_t x, uint32_t n, uint8_t *dst) {
  const uint8_t *src = (const uint8_t *)a->data + (int64_t)y * a->strides[0] + (int64_t)x * a->strides[1];
  const int64_t s1 = a->strides[1], s2 = a->ndim == 3 ? a->strides[2] : (int64_t)p->es;
  if (s1 == (int64_t)p->pix && (p->spp == 1 || s2 == (int64_t)p->es)) {
    memcpy(dst, src, (size_t)n * p->pix);
    return;
  }
  for (uint32_t c = 0; c < n; c++)
    for (uint16_t k = 0; k < p->spp; k++, dst += p->es) memcpy(dst, src + c * s1 + k * s2, p->es);
}

/* Strip after strip, each packed into one strip's buffer. */
static bool write_strips(TIFF *tif, const accel_array *a, const save_plan *p) {
  const size_t row = (size_t)p->w * p->pix;
  uint8_t *buf = malloc(row * p->rps);
  bool ok = buf != NULL;
  for (uint32_t y = 0; y < p->h && ok; y += p->rps) {
    const uint32_t rows = p->h - y < p->rps ? p->h - y : p->rps;
    for (uint32_t r = 0; r < rows; r++) pack_pixels(a, p, y + r, 0, p->w, buf + r * row);
    ok = TIFFWriteEncodedStrip(tif, y / p->rps, buf, (tmsize_t)(rows * row)) >= 0;
  }
  free(buf);
  return ok;
}

/* Tile after tile, each packed into one tile's buffer (edges zero-padded). */
static bool write_tiles(TIFF *tif, const accel_array *a, const save_plan *p) {
  const uint32_t t = p->tile;
  const size_t trow = (size_t)t * p->pix, size = trow * t;
  uint8_t *buf = malloc(size);
  bool ok = buf != NULL;
  for (uint32_t y = 0; y < p->h && ok; y += t)
    for (uint32_t x = 0; x < p->w && ok; x += t) {
      const uint32_t rows = p->h - y < t ? p->h - y : t, cols = p->w - x < t ? p->w - x : t;
      if (rows < t || cols < t) memset(buf, 0, size);
      for (uint32_t r = 0; r < rows; r++) pack_pixels(a, p, y + r, x, cols, buf + r * trow);
      ok = TIFFWriteEncodedTile(tif, TIFFComputeTile(tif, x, y, 0, 0), buf, (tmsize_t)size) >= 0;
    }
  free(buf);
  return ok;
}

static void set_image_tags(TIFF *tif, const save_plan *p, const accel_tiff_save_options *o) {
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, p->w);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, p->h);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, p->spp);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)(p->es * 8));
  TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, p->format);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, (uint16_t)(p->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK));
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, (uint16_t)PLANARCONFIG_CONTIG);
  if (p->spp == 2 || p->spp == 4) {
    const uint16_t alpha[1] = {EXTRASAMPLE_UNASSALPHA};
    TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)1, alpha);
  }
  if (o->compression == ACCEL_TIFF_COMPRESSION_DEFLATE) {
    TIFFSetField(tif, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_ADOBE_DEFLATE);
    TIFFSetField(tif, TIFFTAG_ZIPQUALITY, (int)o->deflate_level);
    if (o->predictor)
      TIFFSetField(tif, TIFFTAG_PREDICTOR,
                   (uint16_t)(p->format == SAMPLEFORMAT_IEEEFP ? PREDICTOR_FLOATINGPOINT : PREDICTOR_HORIZONTAL));
  } else {
    TIFFSetField(tif, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_NONE);
  }
  geo_write(tif, o->geo);
  if (o->has_nodata) {
    char nodata[40];
    if (isnan(o->nodata)) snprintf(nodata, sizeof nodata, "nan");
    else snprintf(nodata, sizeof nodata, "%.17g", o->nodata);
    TIFFSetField(tif, TIFFTAG_GDAL_NODATA, nodata);
  }
  if (p->tile) {
    TIFFSetField(tif, TIFFTAG_TILEWIDTH, p->tile);
    TIFFSetField(tif, TIFFTAG_TILELENGTH, p->tile);
  } else {
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, p->rps);
  }
}

accel_status accel_tiff_save_image(accel_ctx *ctx, const char *path, const accel_array *image,
                                   const accel_tiff_save_options *options) {
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  accel_status s =
      options ? accel__versioned_in(ctx, __func__, "options", options, &o, sizeof o, TIFF_SAVE_V1_SIZE) : ACCEL_OK;
  save_plan p;
  if (s || (s = plan_save(ctx, __func__, image, &o, &p))) return s;
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  REQUIRE(ctx, o.compression == ACCEL_TIFF_COMPRESSION_NONE || TIFFIsCODECConfigured(COMPRESSION_ADOBE_DEFLATE),
          ACCEL_ERR_UNSUPPORTED, "this libtiff has no deflate");
  pthread_once(&tiff_once, tiff_setup);
  tiff_message[0] = '\0';
  accel__atomic_file af;
  if ((s = accel__atomic_open(ctx, __func__, path, false, &af))) return s;
  TIFF *tif = client_open(path, p.big ? "w8" : "w", &af);
  if (!tif) {
    accel__atomic_abort(&af);
    return FAIL(ctx, ACCEL_ERR_IO, "cannot write %s (%s)", path, tiff_message);
  }
  set_image_tags(tif, &p, &o);
  bool ok = p.tile ? write_tiles(tif, image, &p) : write_strips(tif, image, &p);
  ok = TIFFFlush(tif) == 1 && ok;
  TIFFClose(tif);
  if (!ok && !af.err && tiff_message[0]) { /* libtiff refused without a system error */
    accel__atomic_abort(&af);
    return FAIL(ctx, ACCEL_ERR_IO, "cannot write %s: %s", path, tiff_message);
  }
  if (!ok || af.err) return accel__atomic_fail(ctx, __func__, &af);
  return accel__atomic_commit(ctx, __func__, &af);
}

/* ------------------------------------------------------------ written in place */

struct accel_tiff_writer {
  accel_ctx *ctx;
  accel__atomic_file af;
  void *map;
  size_t map_bytes;
};

/* libtiff's I/O for a file laid out but not filled: while `skip` is set,
 * a write (a strip's pixels) only extends the file by its length, as a
 * hole, and the strips' extent is recorded (gap: they are not one run). */
typedef struct sparse_out {
  accel__atomic_file *af;
  bool skip, gap;
  uint64_t start, end;
} sparse_out;

static tmsize_t sparse_read(thandle_t h, void *buf, tmsize_t n) { return tiff_read(((sparse_out *)h)->af, buf, n); }

static tmsize_t sparse_write(thandle_t h, void *buf, tmsize_t n) {
  sparse_out *o = h;
  if (!o->skip) return tiff_write(o->af, buf, n);
  const off_t at = lseek(o->af->fd, 0, SEEK_CUR);
  if (at < 0 || ftruncate(o->af->fd, at + (off_t)n) != 0 || lseek(o->af->fd, at + (off_t)n, SEEK_SET) < 0) {
    if (!o->af->err) o->af->err = errno;
    return -1;
  }
  if (o->end == 0) o->start = o->end = (uint64_t)at;
  o->gap = o->gap || (uint64_t)at != o->end;
  o->end = (uint64_t)at + (uint64_t)n;
  return n;
}

static toff_t sparse_seek(thandle_t h, toff_t off, int whence) { return tiff_seek(((sparse_out *)h)->af, off, whence); }

static toff_t sparse_size(thandle_t h) { return tiff_size(((sparse_out *)h)->af); }

/* The file of plan p laid out by libtiff (its tags, then its strips as one
 * hole, then its directory); *o the strips' extent. */
static bool lay_out(const char *path, const save_plan *p, const accel_tiff_save_options *opt, sparse_out *o) {
  TIFF *tif = TIFFClientOpen(path, p->big ? "w8" : "w", (thandle_t)o, sparse_read, sparse_write, sparse_seek,
                             tiff_close, sparse_size, tiff_map, tiff_unmap);
  if (!tif) return false;
  set_image_tags(tif, p, opt);
  const size_t row = (size_t)p->w * p->pix;
  uint8_t *zero = calloc(row * p->rps, 1); /* what libtiff is handed; never read (skipped) */
  bool ok = zero != NULL;
  o->skip = true;
  for (uint32_t y = 0; y < p->h && ok; y += p->rps) {
    const uint32_t rows = p->h - y < p->rps ? p->h - y : p->rps;
    ok = TIFFWriteRawStrip(tif, y / p->rps, zero, (tmsize_t)(rows * row)) >= 0;
  }
  o->skip = false;
  ok = TIFFFlush(tif) == 1 && ok;
  TIFFClose(tif);
  free(zero);
  return ok;
}

/* Reserve the strips' blocks (no fault for want of space while the pixels
 * are written) and map them. */
static accel_status map_pixels(accel_ctx *ctx, const char *func, const char *path, accel_tiff_writer *w,
                               const sparse_out *o, void **pixels) {
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), base = o->start / page * page;
  if (fallocate(w->af.fd, 0, (off_t)o->start, (off_t)(o->end - o->start)) != 0) {
    const int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS)
      return FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "%s: its file system cannot reserve space (save a buffer instead)", path);
    return accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot reserve %llu bytes for %s: %s",
                          (unsigned long long)(o->end - o->start), path, strerror(e));
  }
  w->map_bytes = (size_t)(o->end - base);
  w->map = mmap(NULL, w->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w->af.fd, (off_t)base);
  if (w->map == MAP_FAILED) {
    w->map = NULL;
    return accel__fail_in(ctx, func, ACCEL_ERR_UNSUPPORTED, "cannot map %s for writing: %s (save a buffer instead)",
                          path, strerror(errno));
  }
  *pixels = (uint8_t *)w->map + (o->start - base);
  return ACCEL_OK;
}

accel_status accel_tiff_create_image(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim,
                                     const int64_t *shape, const accel_tiff_save_options *options,
                                     accel_tiff_writer **out, accel_array *pixels) {
  const char *func = __func__;
  REQUIRE(ctx, out && pixels && shape, ACCEL_ERR_INVALID_ARG, "out, pixels and shape are required");
  *out = NULL;
  memset(pixels, 0, sizeof *pixels);
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  accel_status s =
      options ? accel__versioned_in(ctx, func, "options", options, &o, sizeof o, TIFF_SAVE_V1_SIZE) : ACCEL_OK;
  if (s) return s;
  REQUIRE(ctx, o.compression == ACCEL_TIFF_COMPRESSION_NONE && o.tile_size == 0, ACCEL_ERR_INVALID_ARG,
          "an image written in place is uncompressed and in strips (compression none, tile_size 0)");
  static char placeholder; /* the plan checks the shape and dtype; it reads no pixel */
  accel_array a;
  if ((s = accel_array_init(&a, &placeholder, dtype, ndim, shape)))
    return FAIL(ctx, s, "dtype %d, %d dimensions: not an image", (int)dtype, (int)ndim);
  save_plan p;
  if ((s = plan_save(ctx, func, &a, &o, &p))) return s;
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  pthread_once(&tiff_once, tiff_setup);
  tiff_message[0] = '\0';
  accel_tiff_writer *w = calloc(1, sizeof *w);
  if (!w) return FAIL(ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  w->ctx = ctx;
  if ((s = accel__atomic_open(ctx, func, path, false, &w->af))) {
    free(w);
    return s;
  }
  sparse_out so = {&w->af, false, false, 0, 0};
  const bool laid = lay_out(path, &p, &o, &so);
  const uint64_t bytes = (uint64_t)p.h * p.w * p.pix;
  void *data = NULL;
  if (!laid || w->af.err)
    s = w->af.err ? accel__atomic_fail(ctx, func, &w->af)
                  : FAIL(ctx, ACCEL_ERR_IO, "cannot write %s (%s)", path, tiff_message);
  else if (so.gap || so.end - so.start != bytes || so.start % p.es)
    s = FAIL(ctx, ACCEL_ERR_UNSUPPORTED, "%s: libtiff did not lay the strips out as one run (save a buffer instead)",
             path);
  else s = map_pixels(ctx, func, path, w, &so, &data);
  if (!s) s = accel_array_init(pixels, data, dtype, ndim, shape);
  if (s) {
    memset(pixels, 0, sizeof *pixels);
    accel_tiff_writer_destroy(w);
    return s;
  }
  *out = w;
  return ACCEL_OK;
}

accel_status accel_tiff_writer_commit(accel_tiff_writer *w) {
  REQUIRE(NULL, w, ACCEL_ERR_INVALID_ARG, "writer is NULL");
  if (w->map) munmap(w->map, w->map_bytes); /* the pages stay in the file; a sync writes them */
  w->map = NULL;
  const accel_status s = accel__atomic_commit(w->ctx, __func__, &w->af);
  free(w);
  return s;
}

void accel_tiff_writer_destroy(accel_tiff_writer *w) {
  if (!w) return;
  if (w->map) munmap(w->map, w->map_bytes);
  if (w->af.fd >= 0 || w->af.tmp_name) accel__atomic_abort(&w->af);
  free(w);
}

#else /* !ACCEL_HAVE_TIFF */

#include <string.h>

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

accel_status accel_tiff_create_image(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim,
                                     const int64_t *shape, const accel_tiff_save_options *options,
                                     accel_tiff_writer **out, accel_array *pixels) {
  (void)path, (void)dtype, (void)ndim, (void)shape, (void)options;
  if (out) *out = NULL;
  if (pixels) memset(pixels, 0, sizeof *pixels);
  return no_tiff(ctx, __func__);
}

accel_status accel_tiff_writer_commit(accel_tiff_writer *w) {
  (void)w;
  return no_tiff(NULL, __func__);
}

void accel_tiff_writer_destroy(accel_tiff_writer *w) { (void)w; }

accel_status accel_geo_pixel_size(const accel_geo *g, double *x, double *y) {
  (void)g;
  (void)x;
  (void)y;
  return ACCEL_ERR_NOT_FOUND;
}

void accel_geo_destroy(accel_geo *g) { (void)g; }

uint64_t accel__tiff_map_min = (uint64_t)64 << 20;

accel_status accel_tiff_load_image(accel_ctx *ctx, const char *path, accel_buffer **out) {
  (void)path;
  if (out) *out = NULL;
  return no_tiff(ctx, __func__);
}

accel_status accel_tiff_save_image(accel_ctx *ctx, const char *path, const accel_array *image,
                                   const accel_tiff_save_options *options) {
  (void)path;
  (void)image;
  (void)options;
  return no_tiff(ctx, __func__);
}
#endif

accel_status accel_tiff_save_options_init(accel_tiff_save_options *options, size_t struct_size) {
  static const accel_tiff_save_options DEFAULTS = {.deflate_level = 6, .predictor = 1};
  return accel__versioned_init(__func__, options, struct_size, &DEFAULTS, sizeof DEFAULTS, TIFF_SAVE_V1_SIZE);
}
