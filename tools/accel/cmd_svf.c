/* accel shadow / accel svf: UMEP's shadows and sky view factors of a DSM. */
#include "picture.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char SHADOW_USAGE[] =
    "usage: accel [global options] shadow --dsm F [--cdsm F] [--tdsm F] [--pixel-size M]\n"
    "                                     --azimuth A --altitude H --out DIR [options]\n"
    "\n"
    "Shadows for one sun position, as UMEP's shadowingfunction_20 casts them, into\n"
    "DIR/shadow_az<A>_alt<H>_{sh,vegsh,vbshvegsh}.npy (or .tif), A and H printed as\n"
    "C's %g; 1 = sunlit: sh buildings, vegsh vegetation (outside building shadow),\n"
    "vbshvegsh 0 where vegetation shades inside a building shadow (docs/svf.md).\n"
    "\n";

static const char SVF_USAGE[] =
    "usage: accel [global options] svf --dsm F [--cdsm F] [--tdsm F] [--pixel-size M]\n"
    "                                  [--patches 153] [--tile N] [--shadow-matrices] --out DIR\n"
    "                                  [--preview P.png]\n"
    "\n"
    "Sky view factors as UMEP's svfForProcessing153 computes them, into\n"
    "DIR/svf_<name>.npy (or .tif) for svf, svfE, svfS, svfW, svfN and, with a CDSM,\n"
    "svfveg, svfEveg, ..., svfaveg, svfEaveg, ... (15 grids; docs/svf.md).\n"
    "\n";

static const char USAGE_TAIL[] =
    "\n"
    "Prints name<TAB>value lines on stdout (--format json: one JSON object). Exit\n"
    "status 1 when an input cannot be read or an output written, 2 for usage errors.\n";

typedef struct svf_args {
  const char *cmd;
  const char *dsm, *cdsm, *tdsm, *out;
  const char *format; /* "npy", "tif" or NULL */
  const char *preview;
  double azimuth, altitude, nodata;
  bool have_az, have_alt, have_pixel, matrices, uncompressed;
  accel_svf_options o;
} svf_args;

/* npy or tif (the grids), tsv or json (the report; the dispatcher reads
 * it), or a comma list of one of each: "tif,json". */
static bool parse_format(const char *cmd, const cli_option *o, const char *v, void *field) {
  for (const char *p = v;; p++) {
    const size_t n = strcspn(p, ",");
    if (n == 3 && (strncmp(p, "npy", 3) == 0 || strncmp(p, "tif", 3) == 0))
      *(const char **)field = n == 3 && p[0] == 'n' ? "npy" : "tif";
    else if (!((n == 3 && strncmp(p, "tsv", 3) == 0) || (n == 4 && strncmp(p, "json", 4) == 0))) {
      cli_error("%s: %s is npy or tif (the grids), tsv or json (the report), or one of each (tif,json), not '%s'", cmd,
                o->name, v);
      return false;
    }
    p += n;
    if (!*p) return true;
  }
}

static bool parse_patches(const char *cmd, const cli_option *o, const char *v, void *field) {
  int p;
  int32_t count;
  if (!cli_parse_int(cmd, o->name, v, 1, 100000, &p)) return false;
  if (accel_svf_patches(p, &count, NULL, NULL) != ACCEL_OK) {
    cli_error("%s: %s is 145, 153, 306 or 612 (UMEP's options), not %d", cmd, o->name, p);
    return false;
  }
  *(int32_t *)field = p;
  return true;
}

static const cli_choice COMPRESSIONS[] = {{"deflate", 0}, {"none", 1}, {NULL, 0}};

/* The inputs and outputs, common to shadow and svf (a macro: both tables list them). */
#define GRID_OPTIONS                                                                                                   \
  {.kind = CLI_OPT_TEXT, .help = "inputs (.npy, or GeoTIFF .tif/.tiff; one band, metres, same shape):"},               \
      {.name = "--dsm",                                                                                                \
       .kind = CLI_OPT_STRING,                                                                                         \
       CLI_AT(svf_args, dsm),                                                                                          \
       .arg = "F",                                                                                                     \
       .help =                                                                                                         \
           "ground and buildings (required); below 0 it is raised by\n"                                                \
           "|min| as UMEP does; NaN / GeoTIFF no-data counts as 0"},                                                   \
      {.name = "--cdsm",                                                                                               \
       .kind = CLI_OPT_STRING,                                                                                         \
       CLI_AT(svf_args, cdsm),                                                                                         \
       .arg = "F",                                                                                                     \
       .help = "vegetation canopy height above ground (default: none)"},                                               \
      {.name = "--tdsm",                                                                                               \
       .kind = CLI_OPT_STRING,                                                                                         \
       CLI_AT(svf_args, tdsm),                                                                                         \
       .arg = "F",                                                                                                     \
       .help = "trunk-zone height above ground (default: --trunk-ratio x CDSM)"},                                      \
      {.name = "--pixel-size",                                                                                         \
       .kind = CLI_OPT_REAL,                                                                                           \
       CLI_AT(svf_args, o.pixel_size),                                                                                 \
       CLI_SEEN(svf_args, have_pixel),                                                                                 \
       .arg = "M",                                                                                                     \
       .help =                                                                                                         \
           "metres per pixel (UMEP's scale is 1/M); default: a GeoTIFF\n"                                              \
           "DSM's pixel scale (square pixels), else required"},                                                        \
      {.name = "--trunk-ratio",                                                                                        \
       .kind = CLI_OPT_REAL,                                                                                           \
       CLI_AT(svf_args, o.trunk_ratio),                                                                                \
       .arg = "R",                                                                                                     \
       .help = "TDSM = R x CDSM when no --tdsm is given (default 0.25)"},                                              \
      {.name = "--max-height",                                                                                         \
       .kind = CLI_OPT_REAL,                                                                                           \
       CLI_AT(svf_args, o.max_height),                                                                                 \
       .arg = "H",                                                                                                     \
       .help = "UMEP's amaxvalue, where rays stop (default: max(DSM, CDSM))"},                                         \
      {.name = "--tile",                                                                                               \
       .kind = CLI_OPT_INT,                                                                                            \
       CLI_AT(svf_args, o.tile),                                                                                       \
       .lo = 1,                                                                                                        \
       .hi = 1000000000,                                                                                               \
       .arg = "N",                                                                                                     \
       .help =                                                                                                         \
           "tile side in pixels (default: the whole grid on the CPU,\n"                                                \
           "the device memory budget on a GPU); results never depend on it"},                                          \
      {.kind = CLI_OPT_TEXT, .help = "outputs:"},                                                                      \
      {.name = "--out",                                                                                                \
       .kind = CLI_OPT_STRING,                                                                                         \
       CLI_AT(svf_args, out),                                                                                          \
       .arg = "DIR",                                                                                                   \
       .help = "directory for the grids (created if missing)"},                                                        \
      {.name = "--format",                                                                                             \
       .kind = CLI_OPT_CUSTOM,                                                                                         \
       CLI_AT(svf_args, format),                                                                                       \
       .parse = parse_format,                                                                                          \
       .arg = "npy|tif",                                                                                               \
       .help =                                                                                                         \
           "file type of the grids (default: the DSM's); GeoTIFF outputs\n"                                            \
           "carry the DSM's georeferencing; tsv (default) or json: the report;\n"                                      \
           "both: --format tif,json"},                                                                                 \
      {.name = "--nodata",                                                                                             \
       .kind = CLI_OPT_REAL,                                                                                           \
       CLI_AT(svf_args, nodata),                                                                                       \
       .arg = "V",                                                                                                     \
       .help =                                                                                                         \
           "GeoTIFF outputs: GDAL's no-data value, written where the DSM\n"                                            \
           "has none (NaN or its own no-data; default -9999)"},                                                        \
  {                                                                                                                    \
    .name = "--compression", .kind = CLI_OPT_CHOICE, CLI_AT(svf_args, uncompressed), .choices = COMPRESSIONS,          \
    .arg = "C", .help = "GeoTIFF outputs: deflate (default) or none"                                                   \
  }

static const cli_option SHADOW_OPTIONS[] = {
    {.kind = CLI_OPT_TEXT, .help = "sun:"},
    {.name = "--azimuth",
     .kind = CLI_OPT_REAL,
     CLI_AT(svf_args, azimuth),
     CLI_SEEN(svf_args, have_az),
     .arg = "A",
     .help = "degrees clockwise from north, 0..360"},
    {.name = "--altitude",
     .kind = CLI_OPT_REAL,
     CLI_AT(svf_args, altitude),
     CLI_SEEN(svf_args, have_alt),
     .arg = "H",
     .help = "degrees above the horizon, (0, 90]"},
    GRID_OPTIONS,
    {0},
};

static const cli_option SVF_OPTIONS[] = {
    {.kind = CLI_OPT_TEXT, .help = "sky:"},
    {.name = "--patches",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(svf_args, o.patches),
     .parse = parse_patches,
     .arg = "P",
     .help = "145, 153 (default), 306 or 612 (UMEP's patch options; 306\n"
             "and 612 make 305 and 609 patches, as in UMEP)"},
    {.name = "--shadow-matrices",
     .kind = CLI_OPT_FLAG,
     CLI_AT(svf_args, matrices),
     .help = "also DIR/shmat.npy (and vegshmat.npy, vbshvegshmat.npy with a\n"
             "CDSM): uint8 (rows, cols, ceil(P/8)), patch p visible when bit\n"
             "p % 8 of byte p / 8 is set (np.unpackbits(m, axis=2,\n"
             "bitorder=\"little\")[..., :P])"},
    GRID_OPTIONS,
    {.name = "--preview",
     .kind = CLI_OPT_STRING,
     CLI_AT(svf_args, preview),
     .arg = "P.png",
     .help = "a picture of the svf grid: viridis from 0 to 1, with a legend\n"
             "(docs/cli.md gives its size)"},
    {0},
};

static bool has_tiff_ext(const char *path) {
  const char *dot = strrchr(path, '.');
  return dot && (strcasecmp(dot, ".tif") == 0 || strcasecmp(dot, ".tiff") == 0);
}

/* v's values as float32 into dst; false if they are not real numbers. */
static bool to_f32(const accel_array *v, float *dst) {
  const int64_t n = v->shape[0] * v->shape[1];
  for (int64_t i = 0; i < n; i++) {
    const void *p = (const char *)v->data + (size_t)i * accel_dtype_size(v->dtype);
    switch (v->dtype) {
    case ACCEL_DTYPE_F64: dst[i] = (float)*(const double *)p; break;
    case ACCEL_DTYPE_U8: dst[i] = *(const uint8_t *)p; break;
    case ACCEL_DTYPE_I8: dst[i] = *(const int8_t *)p; break;
    case ACCEL_DTYPE_U16: dst[i] = *(const uint16_t *)p; break;
    case ACCEL_DTYPE_I16: dst[i] = *(const int16_t *)p; break;
    case ACCEL_DTYPE_I32: dst[i] = (float)*(const int32_t *)p; break;
    case ACCEL_DTYPE_U32: dst[i] = (float)*(const uint32_t *)p; break;
    default: return false;
    }
  }
  return true;
}

/* A .npy grid of any real dtype as F32 (rows, cols). */
static bool load_npy_grid(accel_ctx *ctx, const char *cmd, const char *path, accel_buffer **out) {
  accel_buffer *b = NULL, *f = NULL;
  if (accel_npy_load(ctx, path, &b)) {
    cli_error("%s: %s", cmd, accel_last_error(ctx));
    return false;
  }
  accel_array v, fv;
  accel_buffer_view(b, &v);
  bool ok = v.ndim == 2;
  if (!ok) cli_error("%s: %s is %d-D; a 2-D grid is needed", cmd, path, (int)v.ndim);
  if (ok && v.dtype == ACCEL_DTYPE_F32) {
    *out = b;
    return true;
  }
  if (ok && accel_buffer_create(ACCEL_DTYPE_F32, 2, v.shape, &f)) {
    cli_error("%s: out of memory", cmd);
    ok = false;
  }
  if (ok) accel_buffer_view(f, &fv);
  if (ok && !to_f32(&v, fv.data)) {
    cli_error("%s: %s: a real-valued grid is needed", cmd, path);
    ok = false;
  }
  accel_buffer_destroy(b);
  if (!ok) accel_buffer_destroy(f);
  else *out = f;
  return ok;
}

/* A raster as F32 (rows, cols): .npy of any real dtype, or a GeoTIFF. */
static bool load_grid(accel_ctx *ctx, const char *cmd, const char *path, accel_buffer **out, accel_geo **geo) {
  if (!has_tiff_ext(path)) return load_npy_grid(ctx, cmd, path, out);
  if (!accel_tiff_load(ctx, path, out, geo)) return true;
  cli_error("%s: %s", cmd, accel_last_error(ctx));
  return false;
}

static int parse(int argc, char **argv, svf_args *a, bool shadow) {
  const int first = cli_parse_options(a->cmd, shadow ? SHADOW_OPTIONS : SVF_OPTIONS, argc, argv, a);
  if (first < 0) return CLI_USAGE;
  if (first < argc) {
    cli_error("%s: unexpected argument '%s'", a->cmd, argv[first]);
    return CLI_USAGE;
  }
  const bool pixel_needed = a->have_pixel ? !(a->o.pixel_size > 0) : !(a->dsm && has_tiff_ext(a->dsm));
  const char *need = !a->dsm                  ? "--dsm"
                     : pixel_needed           ? "--pixel-size"
                     : !a->out                ? "--out"
                     : shadow && !a->have_az  ? "--azimuth"
                     : shadow && !a->have_alt ? "--altitude"
                                              : NULL;
  if (need) {
    cli_error("%s: %s is required%s (see accel %s --help)", a->cmd, need,
              strcmp(need, "--pixel-size") == 0 && a->o.pixel_size != 0 ? " and must be > 0" : "", a->cmd);
    return CLI_USAGE;
  }
  if (a->tdsm && !a->cdsm) {
    cli_error("%s: --tdsm needs --cdsm", a->cmd);
    return CLI_USAGE;
  }
  /* every option is checked here, so that what the library refuses later is the inputs' content */
  const char *bad = shadow && !(a->azimuth >= 0 && a->azimuth <= 360)   ? "--azimuth must be in 0..360 degrees"
                    : shadow && !(a->altitude > 0 && a->altitude <= 90) ? "--altitude must be in (0, 90] degrees"
                    : !(a->o.trunk_ratio >= 0)                          ? "--trunk-ratio must be >= 0"
                    : !(a->o.max_height >= 0)                           ? "--max-height must be >= 0"
                                                                        : NULL;
  if (bad) {
    cli_error("%s: %s", a->cmd, bad);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* The files a run writes, in order: shadow's sh, vegsh, vbshvegsh; svf's
 * grids (5, or 15 with a CDSM), then the shadow matrices asked for. */
enum { MAX_OUTPUTS = ACCEL_SVF_GRIDS + 3, PATH_MAX_LEN = 4096 };
typedef struct out_names {
  int n;
  char path[MAX_OUTPUTS][PATH_MAX_LEN];
} out_names;

static void output_names(const svf_args *a, bool shadow, bool tif, out_names *o) {
  static const char *const kinds[3] = {"sh", "vegsh", "vbshvegsh"};
  static const char *const mats[3] = {"shmat", "vegshmat", "vbshvegshmat"};
  const char *ext = tif ? "tif" : "npy";
  o->n = 0;
  if (shadow) {
    for (int k = 0; k < 3; k++)
      snprintf(o->path[o->n++], PATH_MAX_LEN, "%s/shadow_az%g_alt%g_%s.%s", a->out, a->azimuth, a->altitude, kinds[k],
               ext);
    return;
  }
  const int ngrids = a->cdsm ? ACCEL_SVF_GRIDS : 5, nmats = a->matrices ? (a->cdsm ? 3 : 1) : 0;
  for (int k = 0; k < ngrids; k++)
    snprintf(o->path[o->n++], PATH_MAX_LEN, "%s/svf_%s.%s", a->out, accel_svf_grid_name(k), ext);
  for (int k = 0; k < nmats; k++) snprintf(o->path[o->n++], PATH_MAX_LEN, "%s/%s.npy", a->out, mats[k]);
}

/* A run: its inputs, outputs and where they go. */
typedef struct svf_run {
  svf_args *a;
  bool shadow, tif;
  const out_names *names;
  accel_ctx *ctx;
  accel_buffer *bd, *bc, *bt, *outbuf;
  accel_geo *geo, *ogeo[2];         /* the DSM's; the CDSM's and TDSM's */
  accel_array dsm, cdsm, tdsm, all; /* all: the outputs' buffer */
  int64_t rows, cols, n;
  int written;
} svf_run;

/* The output files, none of which may overwrite an input. */
static bool check_outputs(const svf_run *r, out_names *names) {
  const svf_args *a = r->a;
  output_names(a, r->shadow, r->tif, names);
  const cli_file ins[3] = {{a->dsm, "--dsm", NULL}, {a->cdsm, "--cdsm", NULL}, {a->tdsm, "--tdsm", NULL}};
  cli_file outs[MAX_OUTPUTS + 1];
  size_t n = 0;
  for (int k = 0; k < names->n; k++) outs[n++] = (cli_file){names->path[k], "--out", NULL};
  if (a->preview) {
    const size_t len = strlen(a->preview);
    if (len < 4 || strcasecmp(a->preview + len - 4, ".png") != 0) {
      cli_error("%s: --preview %s: the file name must end in .png (the format written)", a->cmd, a->preview);
      return false;
    }
    outs[n++] = (cli_file){a->preview, "--preview", NULL};
  }
  return cli_check_outputs(a->cmd, ins, a->tdsm ? 3 : a->cdsm ? 2 : 1, outs, n);
}

/* The pixel size of a GeoTIFF (its ModelPixelScale), 0 if it has none;
 * -1 (printed) if its pixels are not square. */
static double geo_pixel(const char *cmd, const char *path, const accel_geo *geo) {
  double gx = 0, gy = 0;
  if (!geo || accel_geo_pixel_size(geo, &gx, &gy) != ACCEL_OK || !(gx > 0) || !(gy > 0)) return 0;
  if (fabs(gx - gy) <= 1e-6 * gx) return gx;
  cli_error("%s: %s has pixels of %g x %g: UMEP's model needs square pixels (resample it first)", cmd, path, gx, gy);
  return -1;
}

/* --pixel-size, or the DSM's pixel scale; the other GeoTIFFs must agree with it. */
static bool pixel_size(svf_run *r) {
  svf_args *a = r->a;
  const double dsm = geo_pixel(a->cmd, a->dsm, r->geo);
  if (dsm < 0) return false;
  if (!a->have_pixel && dsm == 0) {
    cli_error("%s: %s carries no pixel size (no ModelPixelScale tag): give --pixel-size", a->cmd, a->dsm);
    return false;
  }
  if (!a->have_pixel) a->o.pixel_size = dsm;
  else if (dsm > 0 && fabs(dsm - a->o.pixel_size) > 1e-6 * dsm)
    cli_error("%s: warning: --pixel-size %g, but %s says %g (--pixel-size is used)", a->cmd, a->o.pixel_size, a->dsm,
              dsm);
  const char *other[2] = {a->cdsm, a->tdsm};
  for (int k = 0; k < 2; k++) {
    const double p = geo_pixel(a->cmd, other[k], r->ogeo[k]);
    if (p < 0) return false;
    if (p > 0 && dsm > 0 && fabs(p - dsm) > 1e-6 * dsm) {
      cli_error("%s: %s has pixels of %g, the DSM %s of %g: the grids must share one pixel size", a->cmd, other[k], p,
                a->dsm, dsm);
      return false;
    }
  }
  return true;
}

/* The grids read, and the output directory made. */
static int load_inputs(svf_run *r) {
  const svf_args *a = r->a;
  if (!load_grid(r->ctx, a->cmd, a->dsm, &r->bd, &r->geo) ||
      (a->cdsm && !load_grid(r->ctx, a->cmd, a->cdsm, &r->bc, &r->ogeo[0])) ||
      (a->tdsm && !load_grid(r->ctx, a->cmd, a->tdsm, &r->bt, &r->ogeo[1])))
    return CLI_SOME_FAILED;
  if (!pixel_size(r)) return CLI_USAGE; /* set-up */
  if (!cli_make_dirs(a->out)) return CLI_USAGE;
  accel_buffer_view(r->bd, &r->dsm);
  if (r->bc) accel_buffer_view(r->bc, &r->cdsm);
  if (r->bt) accel_buffer_view(r->bt, &r->tdsm);
  r->rows = r->dsm.shape[0];
  r->cols = r->dsm.shape[1];
  r->n = r->rows * r->cols;
  return CLI_OK;
}

/* One buffer of `bytes` for all the outputs. */
static bool make_outputs(svf_run *r, int64_t bytes, cli_progress *bar) {
  if (accel_buffer_create(ACCEL_DTYPE_U8, 1, &bytes, &r->outbuf)) {
    cli_progress_end(bar);
    cli_error("%s: out of memory for the outputs", r->a->cmd);
    return false;
  }
  accel_buffer_view(r->outbuf, &r->all);
  return true;
}

/* Output k: a view of the outputs' buffer from byte `at`. */
static const accel_array *output_view(svf_run *r, accel_array *v, int64_t at, accel_dtype dtype, int ndim,
                                      const int64_t *shape) {
  accel_array_init(v, (uint8_t *)r->all.data + at, dtype, ndim, shape);
  return v;
}

/* A GeoTIFF grid: no-data where the DSM has none, compressed, georeferenced. */
static accel_status save_tiff(svf_run *r, const char *path, const accel_array *a) {
  const svf_args *args = r->a;
  const float *dsm = r->dsm.data;
  float *g = a->data;
  for (int64_t i = 0; a->dtype == ACCEL_DTYPE_F32 && i < r->n; i++)
    if (isnan(dsm[i])) g[i] = (float)args->nodata;
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  o.compression = args->uncompressed ? ACCEL_TIFF_COMPRESSION_NONE : ACCEL_TIFF_COMPRESSION_DEFLATE;
  o.predictor = 0; /* readers without the floating-point predictor (tifffile without imagecodecs) read these */
  o.geo = r->geo;
  o.has_nodata = 1;
  o.nodata = (double)(float)args->nodata;
  return accel_tiff_save_image(r->ctx, path, a, &o);
}

/* Written: in the format asked for (matrices: .npy), counted in r->written. */
static bool save(svf_run *r, const char *path, bool tif, const accel_array *a) {
  const accel_status s = tif ? save_tiff(r, path, a) : accel_npy_save(r->ctx, path, a);
  if (s) {
    cli_error("%s: %s", r->a->cmd, accel_last_error(r->ctx));
    return false;
  }
  r->written++;
  return true;
}

/* The mean of a grid. */
static double mean(const accel_array *a, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += ((const float *)a->data)[i];
  return sum / (double)n;
}

static int cast_shadows(svf_run *r, cli_progress *bar) {
  const int64_t shape[2] = {r->rows, r->cols};
  accel_array o[3];
  if (!make_outputs(r, 3 * r->n * 4, bar)) return CLI_SOME_FAILED;
  for (int k = 0; k < 3; k++) output_view(r, &o[k], k * r->n * 4, ACCEL_DTYPE_F32, 2, shape);
  const accel_status s = accel_svf_shadows(r->ctx, &r->dsm, r->bc ? &r->cdsm : NULL, r->bt ? &r->tdsm : NULL,
                                           r->a->azimuth, r->a->altitude, &r->a->o, &o[0], &o[1], &o[2]);
  cli_progress_end(bar);
  if (s) {
    cli_error("%s: %s", r->a->cmd, accel_last_error(r->ctx));
    return CLI_SOME_FAILED; /* options were checked: the inputs' content was refused */
  }
  bool ok = true;
  const double sunlit = mean(&o[0], r->n); /* before no-data values are written in */
  for (int k = 0; k < 3; k++) ok = save(r, r->names->path[k], r->tif, &o[k]) && ok;
  printf("shape\t%lld,%lld\nsunlit_fraction\t%.6f\nwritten\t%d\n", (long long)r->rows, (long long)r->cols, sunlit,
         r->written);
  return ok ? CLI_OK : CLI_SOME_FAILED;
}

static int sky_view(svf_run *r, cli_progress *bar) {
  const int ngrids = r->bc ? ACCEL_SVF_GRIDS : 5, nmats = r->a->matrices ? (r->bc ? 3 : 1) : 0;
  int32_t np = 0;
  accel_svf_patches(r->a->o.patches, &np, NULL, NULL); /* checked while parsing */
  const int64_t mb = (np + 7) / 8, grid[2] = {r->rows, r->cols}, mat[3] = {r->rows, r->cols, mb};
  accel_array o[ACCEL_SVF_GRIDS], m[3];
  const accel_array *grids[ACCEL_SVF_GRIDS] = {0}, *mats[3] = {0};
  if (!make_outputs(r, r->n * ngrids * 4 + r->n * mb * nmats, bar)) return CLI_SOME_FAILED;
  for (int k = 0; k < ngrids; k++) grids[k] = output_view(r, &o[k], k * r->n * 4, ACCEL_DTYPE_F32, 2, grid);
  for (int k = 0; k < nmats; k++)
    mats[k] = output_view(r, &m[k], r->n * ngrids * 4 + k * r->n * mb, ACCEL_DTYPE_U8, 3, mat);
  const accel_status s = accel_svf_sky(r->ctx, &r->dsm, r->bc ? &r->cdsm : NULL, r->bt ? &r->tdsm : NULL, &r->a->o,
                                       grids, nmats ? mats : NULL);
  cli_progress_end(bar);
  if (s) {
    cli_error("%s: %s", r->a->cmd, accel_last_error(r->ctx));
    return CLI_SOME_FAILED; /* options were checked: the inputs' content was refused */
  }
  bool ok = !r->a->preview || pic_svf_preview(r->a->cmd, r->a->preview, &o[0]);
  const double svf = mean(&o[0], r->n); /* before no-data values are written in */
  for (int k = 0; k < ngrids; k++) ok = save(r, r->names->path[k], r->tif, &o[k]) && ok;
  for (int k = 0; k < nmats; k++) ok = save(r, r->names->path[ngrids + k], false, &m[k]) && ok;
  printf("shape\t%lld,%lld\npatches\t%d\nmean_svf\t%.6f\nwritten\t%d\n", (long long)r->rows, (long long)r->cols,
         (int)np, svf, r->written);
  return ok ? CLI_OK : CLI_SOME_FAILED;
}

static int run_common(const cli_globals *g, int argc, char **argv, bool shadow) {
  svf_args a = {.cmd = shadow ? "shadow" : "svf", .nodata = -9999};
  accel_svf_options_init(&a.o, sizeof a.o);
  int rc = parse(argc, argv, &a, shadow);
  if (rc) return rc;
  static out_names names; /* large: not on the stack */
  svf_run r = {.a = &a, .shadow = shadow, .names = &names};
  r.tif = a.format ? strcmp(a.format, "tif") == 0 : has_tiff_ext(a.dsm);
  if (!check_outputs(&r, &names)) return CLI_USAGE;
  rc = cli_open_ctx(g, &r.ctx);
  if (!rc) rc = load_inputs(&r);
  if (!rc) {
    cli_progress bar;
    cli_progress_begin(&bar, a.cmd, g->progress);
    a.o.progress = cli_progress_callback;
    a.o.progress_user = &bar;
    rc = shadow ? cast_shadows(&r, &bar) : sky_view(&r, &bar);
  }
  accel_buffer_destroy(r.bd);
  accel_buffer_destroy(r.bc);
  accel_buffer_destroy(r.bt);
  accel_buffer_destroy(r.outbuf);
  accel_geo_destroy(r.geo);
  accel_geo_destroy(r.ogeo[0]);
  accel_geo_destroy(r.ogeo[1]);
  accel_ctx_destroy(r.ctx);
  return rc;
}

static int run_shadow(const cli_globals *g, int argc, char **argv) { return run_common(g, argc, argv, true); }
static int run_svf(const cli_globals *g, int argc, char **argv) { return run_common(g, argc, argv, false); }

const cli_command cli_shadow_command = {.name = "shadow",
                                        .summary = "shadows of a surface model for one sun position (UMEP)",
                                        .usage = SHADOW_USAGE,
                                        .options = SHADOW_OPTIONS,
                                        .help_column = 23,
                                        .usage_tail = USAGE_TAIL,
                                        .run = run_shadow};
const cli_command cli_svf_command = {.name = "svf",
                                     .summary = "sky view factors of a surface model (UMEP's 153 patches)",
                                     .usage = SVF_USAGE,
                                     .options = SVF_OPTIONS,
                                     .help_column = 23,
                                     .usage_tail = USAGE_TAIL,
                                     .run = run_svf};
