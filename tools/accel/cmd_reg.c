/* accel register / accel warp: B-spline registration of two images (elastix's
 * model and files) and warping images with the transform it finds. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char REGISTER_USAGE[] =
    "usage: accel [global options] register --fixed F --moving M [options]\n"
    "\n"
    "Find the B-spline transform T (elastix's BSplineTransform) with moving(T(p)) ~\n"
    "fixed(p), T(p) = p + u(p) mapping fixed pixels into the moving image, and write\n"
    "it as an elastix TransformParameters file, as a displacement field, and as\n"
    "warped images (docs/reg.md).\n"
    "\n"
    "images: .tif/.tiff (uint8, uint16 or float32; gray, RGB or RGBA), .png, .jpg,\n"
    ".jpeg (decoded as Pillow does), .pgm/.ppm/.pnm, .npy ((H, W) or (H, W, C)).\n"
    "RGB is registered as gray = (2125 R + 7154 G + 721 B) / 10000, as elastix (ITK)\n"
    "reads an RGB file; alpha is ignored.\n"
    "\n";

static const char WARP_USAGE[] =
    "usage: accel [global options] warp --transform T [options] IN OUT [IN OUT]...\n"
    "\n"
    "Warp images with an elastix TransformParameters file (accel register's, or\n"
    "elastix's BSplineTransform with translation, Euler or affine initial\n"
    "transforms) onto the fixed image's grid, as transformix does: OUT(p) = IN(T(p)).\n"
    "Each OUT has IN's dtype (uint8, uint16 or float32; integers rounded and\n"
    "clamped; other dtypes become float32) and channels (gray and alpha: the gray).\n"
    "\n"
    "images: .tif/.tiff (uint8, uint16 or float32; gray, RGB or RGBA), .png, .jpg,\n"
    ".jpeg, .pgm/.ppm/.pnm, .npy ((H, W) or (H, W, C), C = 1, 3 or 4).\n"
    "\n";

static const char USAGE_TAIL[] =
    "\n"
    "Warped images are written in the format their name ends in: .tif/.tiff (the\n"
    "input's dtype and channels), .npy, .pgm/.ppm/.pnm (uint8 or uint16, gray or\n"
    "RGB). An output that would overwrite an input or another output is refused\n"
    "before anything runs. Prints name<TAB>value lines on stdout. Exit status 1\n"
    "when an input cannot be read or is refused, or an output cannot be written;\n"
    "2 for usage errors.\n";

enum { MAX_WARPS = 256 };

/* --warp IN, repeated; the OUTs are the operands, in order. */
typedef struct warp_list {
  const char *in[MAX_WARPS];
  int n;
} warp_list;

/* What the warps share: interpolation, fill, the output region, tiles. */
typedef struct warp_args {
  accel_reg_interp interp;
  double fill;
  int64_t region[4]; /* x0, y0, w, h */
  bool have_region;
  int64_t tile;
  int compression; /* TIFF outputs: an accel_tiff_compression */
  bool json;       /* --format json (the dispatcher writes the report) */
} warp_args;

/* The options given, applied over the preset whatever their order. */
typedef struct reg_given {
  bool levels, grid, downsample, iterations, samples, metric, optimizer, bending, tolerance, window, validation, seed,
      prealign;
} reg_given;

typedef struct reg_args {
  const char *fixed, *moving, *mask, *initial;
  int preset;
  const char *out_transform, *out_field, *out_warped;
  warp_list warps;
  accel_reg_options set; /* the values of the options given */
  reg_given given;
  warp_args w;
} reg_args;

static const cli_choice PRESETS[] = {{"default", 0}, {"elastix", 1}, {NULL, 0}};
static const char *const PRESET_NAMES[] = {"default", "elastix"};
static const cli_choice METRICS[] = {{"mse", ACCEL_REG_METRIC_MSE}, {"ncc", ACCEL_REG_METRIC_NCC}, {NULL, 0}};
static const cli_choice OPTIMIZERS[] = {
    {"gauss-newton", ACCEL_REG_OPTIMIZER_GAUSS_NEWTON}, {"asgd", ACCEL_REG_OPTIMIZER_ASGD}, {NULL, 0}};
static const cli_choice PREALIGN[] = {{"none", 0}, {"translation", 1}, {"rigid", 2}, {NULL, 0}};
static const cli_choice PYRAMIDS[] = {{"downsample", 1}, {"smooth", 0}, {NULL, 0}};
static const cli_choice COMPRESSIONS[] = {
    {"none", ACCEL_TIFF_COMPRESSION_NONE}, {"deflate", ACCEL_TIFF_COMPRESSION_DEFLATE}, {NULL, 0}};
static const cli_choice INTERPS[] = {{"linear", ACCEL_REG_INTERP_LINEAR}, {"cubic", ACCEL_REG_INTERP_CUBIC}, {NULL, 0}};

static bool parse_warp(const char *cmd, const cli_option *o, const char *v, void *field) {
  warp_list *l = field;
  if (l->n == MAX_WARPS) {
    cli_error("%s: at most %d %s pairs", cmd, MAX_WARPS, o->name);
    return false;
  }
  l->in[l->n++] = v;
  return true;
}

/* The warps' options, common to both commands (a macro: both tables list them). */
#define WARP_OPTIONS(type)                                                                                             \
  {.name = "--interp",                                                                                                 \
   .kind = CLI_OPT_CHOICE,                                                                                             \
   CLI_AT(type, w.interp),                                                                                             \
   .choices = INTERPS,                                                                                                 \
   .arg = "linear|cubic",                                                                                              \
   .help =                                                                                                             \
       "interpolation of the warped images (default cubic:\n"                                                          \
       "B-spline of order 3, transformix's final resampler)"},                                                         \
      {.name = "--fill",                                                                                               \
       .kind = CLI_OPT_REAL,                                                                                           \
       CLI_AT(type, w.fill),                                                                                           \
       .arg = "V",                                                                                                     \
       .help = "value where T falls outside the input (default 0)"},                                                   \
      {.name = "--tiff-compression",                                                                                   \
       .kind = CLI_OPT_CHOICE,                                                                                         \
       CLI_AT(type, w.compression),                                                                                    \
       .choices = COMPRESSIONS,                                                                                        \
       .arg = "C",                                                                                                     \
       .help =                                                                                                         \
           "TIFF outputs: none (default), or deflate (lossless,\n"                                                     \
           "with TIFF's predictor)"},                                                                                  \
      {.name = "--tile",                                                                                               \
       .kind = CLI_OPT_INT,                                                                                            \
       CLI_AT(type, w.tile),                                                                                           \
       .lo = 1,                                                                                                        \
       .hi = 65536,                                                                                                    \
       .arg = "N",                                                                                                     \
       .help = "warp tile side in pixels (default: chosen); results\nnever depend on it"},                             \
  {                                                                                                                    \
    .name = "--format", .kind = CLI_OPT_CHOICE, CLI_AT(type, w.json), .choices = cli_tsv_json, .arg = "F",             \
    .help = "the report on stdout: tsv (default) or json"                                                              \
  }

static const cli_option REGISTER_OPTIONS[] = {
    {.kind = CLI_OPT_TEXT, .help = "inputs:"},
    {.name = "--fixed",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, fixed),
     .arg = "F",
     .help = "the fixed image (required)"},
    {.name = "--moving",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, moving),
     .arg = "M",
     .help = "the moving image (required; any size)"},
    {.name = "--mask",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, mask),
     .arg = "FILE",
     .help = "samples only where this image (the fixed image's\nsize) is nonzero"},
    {.name = "--initial",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, initial),
     .arg = "T.txt",
     .help = "start from this transform (an elastix file over\nthe fixed image)"},
    {.kind = CLI_OPT_TEXT, .help = "registration (defaults: the preset's):"},
    {.name = "--preset",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(reg_args, preset),
     .choices = PRESETS,
     .arg = "NAME",
     .help = "the defaults of the options below: default, or\n"
             "elastix (elastix's parameter file: ASGD, a smoothing\n"
             "pyramid, no early stopping); the options given are\n"
             "applied over it"},
    {.name = "--grid",
     .kind = CLI_OPT_REAL,
     CLI_AT(reg_args, set.grid_spacing),
     CLI_SEEN(reg_args, given.grid),
     .min = 0,
     .exclusive = true,
     .max = 1e12, /* the library's bound */
     .range = "a spacing above 0 and at most 1e12",
     .arg = "S",
     .help = "final control point spacing in pixels (default 64);\n"
             "it doubles from level to level towards the coarsest"},
    {.name = "--levels",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.levels),
     CLI_SEEN(reg_args, given.levels),
     .lo = 0,
     .hi = 8,
     .arg = "N",
     .help = "resolution levels, 1..8, or 0 (default): 4, or 5 when\n"
             "the fixed image's shorter side is at least 2048 px"},
    {.name = "--pyramid",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(reg_args, set.downsample),
     CLI_SEEN(reg_args, given.downsample),
     .choices = PYRAMIDS,
     .arg = "MODE",
     .help = "downsample (default): levels smoothed and\n"
             "downsampled, the finest not smoothed; smooth: every\n"
             "level smoothed at full size (elastix's pyramid)"},
    {.name = "--iterations",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.iterations),
     CLI_SEEN(reg_args, given.iterations),
     .lo = 1,
     .hi = 1000000, /* the library's bounds, so that a value beyond them is a usage error */
     .arg = "N",
     .help = "iterations per level at most (default 500)"},
    {.name = "--samples",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.samples),
     CLI_SEEN(reg_args, given.samples),
     .lo = 0,
     .hi = INT64_MAX,
     .arg = "N",
     .help = "random fixed-image samples per iteration (default\n5000; 0 = every pixel)"},
    {.name = "--metric",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(reg_args, set.metric),
     CLI_SEEN(reg_args, given.metric),
     .choices = METRICS,
     .arg = "mse|ncc",
     .help = "mean squared difference (default), or 1 - the\nnormalised cross-correlation"},
    {.name = "--optimizer",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(reg_args, set.optimizer),
     CLI_SEEN(reg_args, given.optimizer),
     .choices = OPTIMIZERS,
     .arg = "NAME",
     .help = "gauss-newton (default): damped Gauss-Newton; asgd:\n"
             "elastix's adaptive stochastic gradient descent"},
    {.name = "--bending",
     .kind = CLI_OPT_REAL,
     CLI_AT(reg_args, set.bending_weight),
     CLI_SEEN(reg_args, given.bending),
     .min = 0,
     .range = "a weight >= 0",
     .arg = "W",
     .help = "weight of the bending energy penalty (default 0)"},
    {.name = "--tolerance",
     .kind = CLI_OPT_REAL,
     CLI_AT(reg_args, set.tolerance),
     CLI_SEEN(reg_args, given.tolerance),
     .min = 0,
     .max = 1,
     .max_exclusive = true,
     .range = "a number >= 0 and below 1",
     .arg = "T",
     .help = "stop a level when the validation objective's relative\n"
             "decrease over --window evaluations is below T\n"
             "(default 1e-3; 0: every iteration runs)"},
    {.name = "--window",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.window),
     CLI_SEEN(reg_args, given.window),
     .lo = 1,
     .hi = 100000,
     .arg = "N",
     .help = "evaluations the early stopping looks back (default 3)"},
    {.name = "--validation-samples",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.validation_samples),
     CLI_SEEN(reg_args, given.validation),
     .lo = 0,
     .hi = INT64_MAX,
     .arg = "N",
     .help =
         "samples of the early stopping's metric (default\n20000, at least 5000; 0: none, with --optimizer\nasgd only)"},
    {.name = "--seed",
     .kind = CLI_OPT_INT,
     CLI_AT(reg_args, set.seed),
     CLI_SEEN(reg_args, given.seed),
     .lo = 0,
     .hi = INT64_MAX,
     .arg = "S",
     .help = "the samples' seed (default 1): same seed, same result"},
    {.name = "--prealign",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(reg_args, set.prealign),
     CLI_SEEN(reg_args, given.prealign),
     .choices = PREALIGN,
     .arg = "MODE",
     .help = "none (default), translation or rigid: a coarse\n"
             "alignment by phase correlation first, kept as the\n"
             "transform's initial part"},
    {.kind = CLI_OPT_TEXT, .help = "outputs:"},
    {.name = "--out-transform",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, out_transform),
     .arg = "T.txt",
     .help = "elastix TransformParameters file (transformix reads\n"
             "it); an initial part goes to T.initial.txt beside it"},
    {.name = "--out-field",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, out_field),
     .arg = "D.npy",
     .help = "float32 (2, H, W) over the fixed image, pixels:\n"
             "[0] u_x (columns), [1] u_y (rows); T maps (x, y) to\n"
             "(x + D[0, y, x], y + D[1, y, x]) in the moving image"},
    {.name = "--out-warped",
     .kind = CLI_OPT_STRING,
     CLI_AT(reg_args, out_warped),
     .arg = "W",
     .help = "the moving image (as read: its dtype and channels)\n"
             "warped onto the fixed image"},
    {.name = "--warp",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(reg_args, warps),
     .parse = parse_warp,
     .arg = "IN OUT",
     .help = "also warp IN (in the moving image's frame, any\n"
             "size) into OUT; repeatable"},
    WARP_OPTIONS(reg_args),
    {0},
};

typedef struct warp_cmd_args {
  const char *transform, *out_field;
  warp_args w;
} warp_cmd_args;

static const cli_option WARP_CMD_OPTIONS[] = {
    {.name = "--transform",
     .kind = CLI_OPT_STRING,
     CLI_AT(warp_cmd_args, transform),
     .arg = "T.txt",
     .help = "the elastix TransformParameters file (required)"},
    WARP_OPTIONS(warp_cmd_args),
    {.name = "--region",
     .kind = CLI_OPT_INT,
     CLI_AT(warp_cmd_args, w.region),
     CLI_SEEN(warp_cmd_args, w.have_region),
     .count = 4,
     .lo = -((int64_t)1 << 40),
     .hi = (int64_t)1 << 40,
     .arg = "X0,Y0,W,H",
     .help = "only this region of the fixed image's grid\n(default: all of it)"},
    {.name = "--out-field",
     .kind = CLI_OPT_STRING,
     CLI_AT(warp_cmd_args, out_field),
     .arg = "D.npy",
     .help = "also the displacement field over the region, as\n"
             "accel register writes it (IN OUT pairs are then\n"
             "optional)"},
    {0},
};

/* ------------------------------------------------------------ image files */

typedef enum image_kind { IMG_NONE = 0, IMG_TIF, IMG_NPY, IMG_PNM, IMG_DECODE } image_kind;

static image_kind kind_of(const char *path) {
  static const struct {
    const char *ext;
    image_kind kind;
  } exts[] = {{"tif", IMG_TIF}, {"tiff", IMG_TIF},   {"npy", IMG_NPY},    {"pgm", IMG_PNM},    {"ppm", IMG_PNM},
              {"pnm", IMG_PNM}, {"png", IMG_DECODE}, {"jpg", IMG_DECODE}, {"jpeg", IMG_DECODE}};
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  const char *ext = dot && (!slash || dot > slash) ? dot + 1 : "";
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
    if (strcasecmp(ext, exts[i].ext) == 0) return exts[i].kind;
  return IMG_NONE;
}

/* An output image's name must say its format: .tif/.tiff, .npy or .pgm/.ppm/.pnm. */
static bool output_kind(const char *cmd, const char *what, const char *path) {
  const image_kind k = kind_of(path);
  if (k == IMG_TIF || k == IMG_NPY || k == IMG_PNM) return true;
  cli_error("%s: %s %s: the file name must end in .tif, .tiff, .npy, .pgm, .ppm or .pnm (the format written)", cmd,
            what, path);
  return false;
}

static bool input_kind(const char *cmd, const char *what, const char *path) {
  if (kind_of(path) != IMG_NONE) return true;
  cli_error("%s: %s %s: not an image file name (.tif, .tiff, .npy, .png, .jpg, .jpeg, .pgm, .ppm, .pnm)", cmd, what,
            path);
  return false;
}

/* An image file as stored: (H, W) or (H, W, C); TIFF, PNG and JPEG are
 * told apart by their signature (a gray PNG is (H, W)). */
static accel_status load_image(accel_ctx *ctx, const char *path, accel_buffer **out) {
  switch (kind_of(path)) {
  case IMG_NPY: return accel_npy_load(ctx, path, out);
  case IMG_PNM: return accel_pnm_load(ctx, path, out);
  default: return accel_image_load(ctx, path, out);
  }
}

static accel_status save_image(accel_ctx *ctx, const char *path, const accel_array *a, int compression) {
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  o.compression = (accel_tiff_compression)compression;
  switch (kind_of(path)) {
  case IMG_TIF: return accel_tiff_save_image(ctx, path, a, &o);
  case IMG_NPY: return accel_npy_save(ctx, path, a);
  default: return accel_pnm_save(ctx, path, a);
  }
}

/* v without a trailing channel axis of 1: (H, W, 1) is (H, W). */
static void squeeze(accel_array *v) {
  if (v->ndim == 3 && v->shape[2] == 1) v->ndim = 2;
}

/* The element at p of an array of a's dtype, as a double. */
static double element(const accel_array *a, const char *p) {
  switch (a->dtype) {
  case ACCEL_DTYPE_U8: return *(const uint8_t *)p;
  case ACCEL_DTYPE_I8: return *(const int8_t *)p;
  case ACCEL_DTYPE_U16: return *(const uint16_t *)p;
  case ACCEL_DTYPE_I16: return *(const int16_t *)p;
  case ACCEL_DTYPE_U32: return *(const uint32_t *)p;
  case ACCEL_DTYPE_I32: return *(const int32_t *)p;
  case ACCEL_DTYPE_U64: return (double)*(const uint64_t *)p;
  case ACCEL_DTYPE_I64: return (double)*(const int64_t *)p;
  case ACCEL_DTYPE_F32: return *(const float *)p;
  default: return *(const double *)p;
  }
}

/* An image as the registration takes it: U8, U16 or F32 (H, W) as it is
 * (gray and alpha: the gray); RGB or RGBA as F32 gray, (2125 R + 7154 G +
 * 721 B) / 10000 in double as ITK's ConvertPixelBuffer makes it when elastix
 * reads an RGB file into a float image (alpha ignored: ITK would multiply by
 * it); other real dtypes as F32. *conv is the new buffer (NULL when v was
 * usable as it is). */
static bool registration_view(const char *cmd, const char *path, accel_array *v, accel_buffer **conv) {
  *conv = NULL;
  squeeze(v);
  if (v->ndim == 3 && v->shape[2] == 2) v->ndim = 2; /* gray and alpha: the gray */
  const bool rgb = v->ndim == 3 && (v->shape[2] == 3 || v->shape[2] == 4);
  if (v->ndim != 2 && !rgb) {
    cli_error("%s: %s: a gray (H, W) or RGB(A) (H, W, 3|4) image is needed, not shape %s", cmd, path,
              v->ndim == 3 ? "(H, W, C)" : "of another rank");
    return false;
  }
  if (!rgb && (v->dtype == ACCEL_DTYPE_U8 || v->dtype == ACCEL_DTYPE_U16 || v->dtype == ACCEL_DTYPE_F32)) return true;
  accel_array g;
  if (accel_buffer_create(ACCEL_DTYPE_F32, 2, v->shape, conv)) {
    cli_error("%s: %s: no memory for its gray image", cmd, path);
    return false;
  }
  accel_buffer_view(*conv, &g);
  float *dst = g.data;
  const int64_t cs = rgb ? v->strides[2] : 0;
  for (int64_t r = 0; r < v->shape[0]; r++)
    for (int64_t c = 0; c < v->shape[1]; c++) {
      const char *p = (const char *)v->data + r * v->strides[0] + c * v->strides[1];
      *dst++ = rgb ? (float)((2125.0 * element(v, p) + 7154.0 * element(v, p + cs) + 721.0 * element(v, p + 2 * cs)) /
                             10000.0)
                   : (float)element(v, p);
    }
  *v = g;
  return true;
}

/* A mask as U8 (H, W): nonzero = inside. *conv as above. */
static bool mask_view(const char *cmd, const char *path, accel_array *v, accel_buffer **conv) {
  *conv = NULL;
  squeeze(v);
  if (v->ndim != 2) {
    cli_error("%s: %s: a mask is a 2-D (H, W) image, not %d-D", cmd, path, (int)v->ndim);
    return false;
  }
  if (v->dtype == ACCEL_DTYPE_U8) return true;
  accel_array m;
  if (accel_buffer_create(ACCEL_DTYPE_U8, 2, v->shape, conv)) {
    cli_error("%s: %s: no memory for the mask", cmd, path);
    return false;
  }
  accel_buffer_view(*conv, &m);
  uint8_t *dst = m.data;
  for (int64_t r = 0; r < v->shape[0]; r++)
    for (int64_t c = 0; c < v->shape[1]; c++)
      *dst++ = element(v, (const char *)v->data + r * v->strides[0] + c * v->strides[1]) != 0;
  *v = m;
  return true;
}

/* ------------------------------------------------------------ the field */

/* The .npy header of a little-endian float32 C-ordered (2, h, w) array,
 * padded with spaces to a multiple of 64 bytes as numpy writes it. */
static size_t npy_header(char *buf, int64_t h, int64_t w) {
  char dict[128];
  const int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, %lld, %lld), }",
                         (long long)h, (long long)w);
  const size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64, hlen = total - 10;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', hlen - (size_t)n - 1);
  buf[total - 1] = '\n';
  return total;
}

static bool write_at(int fd, const void *data, size_t n, off_t at) {
  for (const char *p = data; n;) {
    const ssize_t k = pwrite(fd, p, n, at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= (size_t)k, at += k;
  }
  return true;
}

static void to_little_endian(float *v, size_t n) {
  const uint16_t one = 1;
  if (*(const uint8_t *)&one) return;
  for (size_t i = 0; i < n; i++) {
    uint32_t x;
    memcpy(&x, &v[i], 4);
    x = x >> 24 | (x >> 8 & 0xff00) | (x << 8 & 0xff0000) | x << 24;
    memcpy(&v[i], &x, 4);
  }
}

/* The field's planes, band by band of rows, into the open file fd: a
 * (2, rows, w) band is evaluated from the control grid and its two planes
 * written where they belong, so no (2, H, W) array is ever held. */
static bool write_field_bands(accel_ctx *ctx, const char *path, const accel_reg_transform *t, int fd, size_t header,
                              const int64_t r[4], cli_progress *bar) {
  const int64_t w = r[2], h = r[3], band = w >= (1 << 22) ? 1 : ((int64_t)1 << 22) / w; /* 32 MiB a band */
  const int64_t rows = band < h ? band : h, shape[3] = {2, rows, w};
  accel_buffer *buf = NULL;
  if (accel_buffer_create(ACCEL_DTYPE_F32, 3, shape, &buf)) {
    cli_error("%s: no memory for a band of the field", path);
    return false;
  }
  accel_array all, v;
  accel_buffer_view(buf, &all);
  bool ok = true;
  for (int64_t y = 0; y < h && ok; y += rows) {
    const int64_t n = y + rows <= h ? rows : h - y;
    v = all;
    v.shape[1] = n;
    if (accel_reg_transform_field(ctx, t, r[0], r[1] + y, &v)) {
      cli_error("%s: %s", path, accel_last_error(ctx));
      ok = false;
      break;
    }
    float *plane[2] = {all.data, (float *)((char *)all.data + all.strides[0])};
    for (int k = 0; k < 2 && ok; k++)
      for (int64_t i = 0; i < n * w; i++)
        if (!isfinite(plane[k][i])) { /* beyond float32 (a parameter of 1e300): not written as inf */
          cli_error(
              "%s: the displacement at row %lld, column %lld is beyond float32's range (%g); the transform's "
              "parameters are far off",
              path, (long long)(r[1] + y + i / w), (long long)(r[0] + i % w), (double)plane[k][i]);
          ok = false;
          break;
        }
    for (int k = 0; k < 2 && ok; k++) {
      to_little_endian(plane[k], (size_t)(n * w));
      const off_t at = (off_t)header + (off_t)(((int64_t)k * h + y) * w * 4);
      errno = 0;
      if (!write_at(fd, plane[k], (size_t)(n * w) * 4, at)) {
        cli_error("%s: cannot write: %s", path, strerror(errno ? errno : EIO));
        ok = false;
      }
    }
    cli_progress_update(bar, (double)(y + n) / (double)h, "field");
  }
  accel_buffer_destroy(buf);
  return ok;
}

/* The field over the region r (x0, y0, w, h) of the fixed grid into a .npy
 * file, written under a temporary name beside it and renamed when complete
 * (synced under --sync all), as the library's saves do. */
static bool write_field(accel_ctx *ctx, const char *cmd, const accel_reg_transform *t, const char *path,
                        const int64_t r[4], bool progress) {
  char *tmp;
  const int fd = cli_atomic_open(cmd, path, &tmp);
  if (fd < 0) return false;
  char header[256];
  const size_t hsize = npy_header(header, r[3], r[2]);
  cli_progress bar;
  cli_progress_begin(&bar, cmd, progress);
  errno = 0;
  bool ok = write_at(fd, header, hsize, 0);
  if (!ok) cli_error("%s: %s: %s", cmd, path, strerror(errno ? errno : EIO));
  ok = ok && write_field_bands(ctx, path, t, fd, hsize, r, &bar);
  cli_progress_end(&bar);
  return cli_atomic_close(cmd, path, fd, tmp, ok);
}

/* ------------------------------------------------------------ warping */

/* An image as the warp takes it: (H, W, 1) as (H, W), gray and alpha as the
 * gray; dtypes other than U8, U16 and F32 (a .npy of float64, a TIFF of
 * int16) as F32, in a new buffer that replaces *buf. */
static bool warp_view(const char *cmd, const char *path, accel_array *v, accel_buffer **buf) {
  squeeze(v);
  if (v->ndim == 3 && v->shape[2] == 2) v->ndim = 2;
  if (v->dtype == ACCEL_DTYPE_U8 || v->dtype == ACCEL_DTYPE_U16 || v->dtype == ACCEL_DTYPE_F32 ||
      (v->ndim != 2 && v->ndim != 3))
    return true; /* the warp refuses the other shapes, saying why */
  accel_buffer *f = NULL;
  accel_array g;
  if (accel_buffer_create(ACCEL_DTYPE_F32, v->ndim, v->shape, &f)) {
    cli_error("%s: %s: no memory to convert it to float32", cmd, path);
    return false;
  }
  accel_buffer_view(f, &g);
  float *dst = g.data;
  const int64_t channels = v->ndim == 3 ? v->shape[2] : 1, cs = v->ndim == 3 ? v->strides[2] : 0;
  for (int64_t r = 0; r < v->shape[0]; r++)
    for (int64_t c = 0; c < v->shape[1]; c++)
      for (int64_t k = 0; k < channels; k++)
        *dst++ = (float)element(v, (const char *)v->data + r * v->strides[0] + c * v->strides[1] + k * cs);
  accel_buffer_destroy(*buf);
  *buf = f;
  *v = g;
  return true;
}

/* What the warps of a run share. */
typedef struct warp_job {
  const char *cmd;
  accel_ctx *ctx;
  const accel_reg_transform *t;
  accel_reg_warp_options o; /* its x0, y0: the region's */
  int64_t region[4];        /* x0, y0, w, h of the fixed grid */
  int compression;
  cli_progress bar;
  bool progress;
} warp_job;

static void warp_job_init(warp_job *j, const char *cmd, accel_ctx *ctx, const accel_reg_transform *t,
                          const warp_args *w, const int64_t region[4], bool progress) {
  j->cmd = cmd;
  j->ctx = ctx;
  j->t = t;
  accel_reg_warp_options_init(&j->o, sizeof j->o);
  j->o.interp = w->interp;
  j->o.fill = w->fill;
  j->o.tile = w->tile;
  j->o.x0 = region[0];
  j->o.y0 = region[1];
  j->o.progress = cli_progress_callback;
  j->o.progress_user = &j->bar;
  memcpy(j->region, region, sizeof j->region);
  j->compression = w->compression;
  j->progress = progress;
}

/* Warp the image `in` (NULL: read from in_path) into out_path over the
 * job's region. The input buffer is released. */
static bool warp_image(warp_job *j, const char *in_path, accel_buffer *in, const char *out_path) {
  const char *cmd = j->cmd;
  accel_ctx *ctx = j->ctx;
  const int64_t *r = j->region;
  accel_status s = in ? ACCEL_OK : load_image(ctx, in_path, &in);
  if (s) {
    cli_error("%s: %s: %s: %s", cmd, in_path, accel_status_string(s), accel_last_error(ctx));
    return false;
  }
  accel_array src, dst;
  accel_buffer_view(in, &src);
  if (!warp_view(cmd, in_path, &src, &in)) {
    accel_buffer_destroy(in);
    return false;
  }
  if (src.ndim == 3 && src.shape[2] != 1 && src.shape[2] != 3 && src.shape[2] != 4) {
    /* said before an output file is made (the TIFF writer's refusal names
     * the output, not the channels) */
    cli_error("%s: %s: has %lld channels; the warp takes gray (1), gray and alpha (2, as gray), RGB (3) or RGBA (4)",
              cmd, in_path, (long long)src.shape[2]);
    accel_buffer_destroy(in);
    return false;
  }
  const int64_t channels = src.ndim == 3 ? src.shape[2] : 1;
  if (kind_of(out_path) == IMG_PNM && (src.dtype == ACCEL_DTYPE_F32 || channels == 4)) {
    /* before the warp, not when saving after it */
    cli_error("%s: %s: PGM and PPM hold 8- and 16-bit gray or RGB, not %s; write .tif or .npy", cmd, out_path,
              src.dtype == ACCEL_DTYPE_F32 ? "floating-point pixels" : "RGBA");
    accel_buffer_destroy(in);
    return false;
  }
  const int64_t shape[3] = {r[3], r[2], channels};
  const int32_t ndim = src.ndim == 3 ? 3 : 2;
  /* An uncompressed TIFF is warped straight into the file's pages (no
   * buffer of the image, no copy of it into the file: about 1.5 s of a
   * 900 MB layer); elsewhere into a buffer that is saved. */
  accel_tiff_writer *tw = NULL;
  if (kind_of(out_path) == IMG_TIF && j->compression == ACCEL_TIFF_COMPRESSION_NONE &&
      (s = accel_tiff_create_image(ctx, out_path, src.dtype, ndim, shape, NULL, &tw, &dst)) &&
      s != ACCEL_ERR_UNSUPPORTED) {
    cli_error("%s: %s: %s: %s", cmd, out_path, accel_status_string(s), accel_last_error(ctx));
    accel_buffer_destroy(in);
    return false;
  }
  /* not zeroed: the warp writes every pixel (the fill outside), and zeroing
   * a 900 MB layer first took a second on one core */
  size_t bytes = accel_dtype_size(src.dtype);
  bool too_big = false;
  for (int k = 0; k < 3; k++) too_big |= __builtin_mul_overflow(bytes, (size_t)shape[k], &bytes);
  void *out = tw || too_big ? NULL : malloc(bytes ? bytes : 1);
  if (!tw && (!out || accel_array_init(&dst, out, src.dtype, ndim, shape))) {
    cli_error("%s: %s: no memory for the %lld x %lld warped image", cmd, out_path, (long long)shape[0],
              (long long)shape[1]);
    free(out);
    accel_buffer_destroy(in);
    return false;
  }
  const accel_array *ins[1] = {&src}, *outs[1] = {&dst};
  s = accel_reg_warp(ctx, j->t, ins, outs, 1, &j->o);
  accel_buffer_destroy(in);
  if (s) {
    cli_error("%s: %s: %s: %s", cmd, in_path, accel_status_string(s), accel_last_error(ctx));
    accel_tiff_writer_destroy(tw);
  } else if ((s = tw ? accel_tiff_writer_commit(tw) : save_image(ctx, out_path, &dst, j->compression))) {
    cli_error("%s: %s: %s: %s", cmd, out_path, accel_status_string(s), accel_last_error(ctx));
  }
  free(out);
  return !s;
}

/* warp_image with a progress bar. */
static bool warp_one(warp_job *j, const char *in_path, accel_buffer *in, const char *out_path) {
  cli_progress_begin(&j->bar, j->cmd, j->progress);
  const bool done = warp_image(j, in_path, in, out_path);
  cli_progress_end(&j->bar);
  return done;
}

/* ------------------------------------------------------------ register */

static const char REG[] = "register";

/* One run of accel register: what it read, found and wrote. */
typedef struct reg_run {
  reg_args a;
  char **outs; /* the --warp OUTs */
  char *initial_out;
  accel_reg_options o;
  accel_ctx *ctx;
  accel_buffer *fixed, *moving, *mask, *conv[3];
  accel_array vf, vm, vk;
  accel_reg_transform *initial, *t;
  accel_reg_report report;
  int64_t moving_shape[2];
  int written;
} reg_run;

/* The preset, then the options given over it. */
static void apply_options(const reg_args *a, accel_reg_options *o) {
  accel_reg_options_init(o, sizeof *o);
  accel_reg_options_preset(o, PRESET_NAMES[a->preset]);
  const reg_given *g = &a->given;
  const accel_reg_options *s = &a->set;
  if (g->levels) o->levels = s->levels;
  if (g->grid) o->grid_spacing = s->grid_spacing;
  if (g->downsample) o->downsample = s->downsample;
  if (g->iterations) o->iterations = s->iterations;
  if (g->samples) o->samples = s->samples;
  if (g->metric) o->metric = s->metric;
  if (g->optimizer) o->optimizer = s->optimizer;
  if (g->bending) o->bending_weight = s->bending_weight;
  if (g->tolerance) o->tolerance = s->tolerance;
  if (g->window) o->window = s->window;
  if (g->validation) o->validation_samples = s->validation_samples;
  if (g->seed) o->seed = s->seed;
  if (g->prealign) o->prealign = s->prealign;
}

/* "<T without .txt>.initial.txt": where accel_reg_transform_save puts an initial part. */
static char *initial_name(const char *path) {
  size_t n = strlen(path);
  if (n > 4 && strcmp(path + n - 4, ".txt") == 0) n -= 4;
  char *p = malloc(n + 13);
  if (p) snprintf(p, n + 13, "%.*s.initial.txt", (int)n, path);
  return p;
}

/* Every file named: inputs readable by name, outputs in a format their
 * name gives, none overwriting an input or another output. */
static bool check_files(reg_run *r) {
  const reg_args *a = &r->a;
  if (!input_kind(REG, "--fixed", a->fixed) || !input_kind(REG, "--moving", a->moving) ||
      (a->mask && !input_kind(REG, "--mask", a->mask)))
    return false;
  cli_format npy;
  if (a->out_field && !cli_output_format(REG, "--out-field", a->out_field, CLI_FORMAT_NPY, &npy)) return false;
  if (a->out_warped && !output_kind(REG, "--out-warped", a->out_warped)) return false;
  cli_file ins[4 + MAX_WARPS], outs[4 + MAX_WARPS];
  size_t ni = 0, no = 0;
  ins[ni++] = (cli_file){a->fixed, "--fixed", NULL};
  ins[ni++] = (cli_file){a->moving, "--moving", NULL};
  if (a->mask) ins[ni++] = (cli_file){a->mask, "--mask", NULL};
  if (a->initial) ins[ni++] = (cli_file){a->initial, "--initial", NULL};
  for (int k = 0; k < a->warps.n; k++) {
    if (!input_kind(REG, "--warp", a->warps.in[k]) || !output_kind(REG, "--warp", r->outs[k])) return false;
    ins[ni++] = (cli_file){a->warps.in[k], "--warp", NULL};
    outs[no++] = (cli_file){r->outs[k], "--warp", NULL};
  }
  if (a->out_transform) outs[no++] = (cli_file){a->out_transform, "--out-transform", NULL};
  if (a->out_transform && (a->initial || r->o.prealign)) {
    if (!(r->initial_out = initial_name(a->out_transform))) return false;
    outs[no++] = (cli_file){r->initial_out, "--out-transform (its initial part)", NULL};
  }
  if (a->out_field) outs[no++] = (cli_file){a->out_field, "--out-field", NULL};
  if (a->out_warped) outs[no++] = (cli_file){a->out_warped, "--out-warped", NULL};
  return cli_check_outputs(REG, ins, ni, outs, no);
}

static int parse_register(int argc, char **argv, reg_run *r) {
  reg_args *a = &r->a;
  const int first = cli_parse_options(REG, REGISTER_OPTIONS, argc, argv, a);
  if (first < 0) return CLI_USAGE;
  const int n = argc - first;
  if (n != a->warps.n) {
    if (n > a->warps.n) cli_error("%s: unexpected argument '%s'", REG, argv[first + a->warps.n]);
    else cli_error("%s: --warp %s needs an output: --warp IN OUT", REG, a->warps.in[n]);
    return CLI_USAGE;
  }
  r->outs = argv + first;
  if (!a->fixed || !a->moving) {
    cli_error("%s: %s is required (see accel register --help)", REG, !a->fixed ? "--fixed" : "--moving");
    return CLI_USAGE;
  }
  apply_options(a, &r->o);
  if (r->o.validation_samples == 0 && r->o.optimizer == ACCEL_REG_OPTIMIZER_GAUSS_NEWTON) {
    cli_error(
        "%s: --validation-samples 0 (no validation set) needs --optimizer asgd: Gauss-Newton takes a step "
        "only where the objective on the validation samples falls",
        REG);
    return CLI_USAGE;
  }
  return check_files(r) ? CLI_OK : CLI_USAGE;
}

/* An image for the registration (converted when it must be); *kept: the
 * buffer as read, when it is the view. */
static bool load_for_registration(reg_run *r, const char *path, accel_buffer **buf, accel_array *v, int slot) {
  accel_status s = load_image(r->ctx, path, buf);
  if (s) {
    cli_error("%s: %s: %s: %s", REG, path, accel_status_string(s), accel_last_error(r->ctx));
    return false;
  }
  accel_buffer_view(*buf, v);
  const bool ok = slot == 2 ? mask_view(REG, path, v, &r->conv[slot]) : registration_view(REG, path, v, &r->conv[slot]);
  if (ok && r->conv[slot]) { /* the file's own pixels are not needed any more */
    accel_buffer_destroy(*buf);
    *buf = NULL;
  }
  return ok;
}

/* Whether `path` opens for reading (errors say why): the --warp layers
 * are read after the registration, and a typo there should not cost it. */
static bool readable(const char *what, const char *path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    cli_error("%s: %s %s: is a directory", REG, what, path);
    return false;
  }
  if (fd < 0) {
    cli_error("%s: %s %s: cannot read: %s", REG, what, path, strerror(errno));
    return false;
  }
  close(fd);
  return true;
}

static int load_inputs(reg_run *r) {
  const reg_args *a = &r->a;
  for (int k = 0; k < a->warps.n; k++)
    if (!readable("--warp", a->warps.in[k])) return CLI_SOME_FAILED;
  if (!load_for_registration(r, a->fixed, &r->fixed, &r->vf, 0) ||
      !load_for_registration(r, a->moving, &r->moving, &r->vm, 1) ||
      (a->mask && !load_for_registration(r, a->mask, &r->mask, &r->vk, 2)))
    return CLI_SOME_FAILED;
  if (a->mask && (r->vk.shape[0] != r->vf.shape[0] || r->vk.shape[1] != r->vf.shape[1])) {
    cli_error(
        "%s: --mask %s is %lld x %lld pixels, the fixed image %s %lld x %lld (rows x columns): a mask has the "
        "fixed image's size",
        REG, a->mask, (long long)r->vk.shape[0], (long long)r->vk.shape[1], a->fixed, (long long)r->vf.shape[0],
        (long long)r->vf.shape[1]);
    return CLI_SOME_FAILED;
  }
  r->moving_shape[0] = r->vm.shape[0];
  r->moving_shape[1] = r->vm.shape[1];
  if (a->initial) {
    accel_status s = accel_reg_transform_load(r->ctx, a->initial, &r->initial);
    if (s) {
      cli_error("%s: %s: %s: %s", REG, a->initial, accel_status_string(s), accel_last_error(r->ctx));
      return CLI_SOME_FAILED;
    }
  }
  return CLI_OK;
}

typedef struct reg_progress {
  cli_progress bar;
  int32_t levels, iterations;
} reg_progress;

static int on_iteration(void *user, int32_t level, int32_t iteration, double metric) {
  reg_progress *p = user;
  if (!p->bar.enabled) return 0;
  char detail[96];
  snprintf(detail, sizeof detail, "level %d/%d, iteration %d, metric %.6g", (int)level + 1, (int)p->levels,
           (int)iteration, metric);
  const double within = fmin(1.0, (double)iteration / (double)p->iterations);
  cli_progress_update(&p->bar, ((double)level + within) / (double)p->levels, detail);
  return 0;
}

static const char *stop_name(int32_t stop) {
  return stop == ACCEL_REG_STOP_CONVERGED ? "converged" : stop == ACCEL_REG_STOP_STALLED ? "stalled" : "iterations";
}

static void print_report(const reg_run *r) {
  const accel_reg_report *p = &r->report;
  accel_reg_grid grid;
  accel_reg_transform_grid(r->t, &grid);
  printf("fixed_shape\t%lld,%lld\nmoving_shape\t%lld,%lld\n", (long long)r->vf.shape[0], (long long)r->vf.shape[1],
         (long long)r->moving_shape[0], (long long)r->moving_shape[1]);
  printf("grid_size\t%lld,%lld\ngrid_spacing\t%g\n", (long long)grid.size[0], (long long)grid.size[1], grid.spacing[0]);
  for (int l = 0; l < p->levels && l < 8; l++) {
    const accel_reg_level_report *v = &p->level[l];
    printf("level%d.size\t%lld,%lld\nlevel%d.grid_spacing\t%g\nlevel%d.iterations\t%d\nlevel%d.stop\t%s\n", l,
           (long long)v->height, (long long)v->width, l, v->grid_spacing, l, (int)v->iterations, l, stop_name(v->stop));
    printf("level%d.metric\t%.9g,%.9g\nlevel%d.seconds\t%.3f\n", l, v->metric_first, v->metric_last, l, v->seconds);
  }
  printf("metric\t%.9g\nseconds\t%.3f\n", p->levels > 0 ? p->level[p->levels - 1].metric_last : NAN, p->seconds);
  cli_flush_stdout();
}

static int register_pair(const cli_globals *g, reg_run *r) {
  reg_progress p = {.levels = accel_reg_levels_for(&r->o, r->vf.shape[1], r->vf.shape[0]),
                    .iterations = r->o.iterations};
  cli_progress_begin(&p.bar, REG, g->progress);
  r->o.progress = on_iteration;
  r->o.progress_user = &p;
  accel_reg_report_init(&r->report, sizeof r->report);
  const accel_status s =
      accel_reg_register(r->ctx, &r->vf, &r->vm, r->a.mask ? &r->vk : NULL, r->initial, &r->o, &r->t, &r->report);
  cli_progress_end(&p.bar);
  if (s) {
    cli_error("%s: %s: %s", REG, accel_status_string(s), accel_last_error(r->ctx));
    return CLI_SOME_FAILED;
  }
  print_report(r);
  return CLI_OK;
}

/* The images are not needed once the transform is found: only the moving
 * image as read, when it is warped (else it is read again). */
static void release_inputs(reg_run *r) {
  accel_buffer_destroy(r->fixed);
  accel_buffer_destroy(r->mask);
  r->fixed = r->mask = NULL;
  for (int k = 0; k < 3; k++) {
    accel_buffer_destroy(r->conv[k]);
    r->conv[k] = NULL;
  }
  if (!r->a.out_warped) {
    accel_buffer_destroy(r->moving);
    r->moving = NULL;
  }
}

static int write_outputs(const cli_globals *g, reg_run *r) {
  const reg_args *a = &r->a;
  release_inputs(r);
  bool ok = true;
  if (a->out_transform) {
    const accel_status s = accel_reg_transform_save(r->ctx, r->t, a->out_transform);
    if (s) cli_error("%s: %s: %s: %s", REG, a->out_transform, accel_status_string(s), accel_last_error(r->ctx));
    ok = !s && ok;
    r->written += !s;
  }
  const int64_t region[4] = {0, 0, r->vf.shape[1], r->vf.shape[0]};
  if (a->out_field) {
    const bool done = write_field(r->ctx, REG, r->t, a->out_field, region, g->progress);
    ok = done && ok;
    r->written += done;
  }
  warp_job j;
  warp_job_init(&j, REG, r->ctx, r->t, &a->w, region, g->progress);
  for (int k = -1; k < a->warps.n; k++) {
    const char *in = k < 0 ? a->moving : a->warps.in[k], *out = k < 0 ? a->out_warped : r->outs[k];
    if (!out) continue;
    const bool done = warp_one(&j, in, k < 0 ? r->moving : NULL, out);
    if (k < 0) r->moving = NULL; /* released by warp_one */
    ok = done && ok;
    r->written += done;
  }
  printf("written\t%d\n", r->written);
  return ok ? CLI_OK : CLI_SOME_FAILED;
}

static int run_register(const cli_globals *g, int argc, char **argv) {
  reg_run *r = calloc(1, sizeof *r); /* large: not on the stack */
  if (!r) {
    cli_error("out of memory");
    return CLI_USAGE;
  }
  r->a.w.interp = ACCEL_REG_INTERP_CUBIC;
  int rc = parse_register(argc, argv, r);
  if (!rc) rc = cli_open_ctx(g, &r->ctx);
  if (!rc) rc = load_inputs(r);
  if (!rc) rc = register_pair(g, r);
  if (!rc) rc = write_outputs(g, r);
  accel_buffer_destroy(r->fixed);
  accel_buffer_destroy(r->moving);
  accel_buffer_destroy(r->mask);
  for (int k = 0; k < 3; k++) accel_buffer_destroy(r->conv[k]);
  accel_reg_transform_destroy(r->initial);
  accel_reg_transform_destroy(r->t);
  accel_ctx_destroy(r->ctx);
  free(r->initial_out);
  free(r);
  return rc;
}

/* ------------------------------------------------------------ warp */

static const char WARP[] = "warp";

static int parse_warp_cmd(int argc, char **argv, warp_cmd_args *a, int *first) {
  *first = cli_parse_options(WARP, WARP_CMD_OPTIONS, argc, argv, a);
  if (*first < 0) return CLI_USAGE;
  const int n = argc - *first;
  if (!a->transform) {
    cli_error("%s: --transform is required (see accel warp --help)", WARP);
    return CLI_USAGE;
  }
  if (n % 2 || (n == 0 && !a->out_field)) {
    cli_error("%s: %s", WARP, n % 2 ? "inputs and outputs come in pairs: IN OUT [IN OUT]..." : "no IN OUT given");
    return CLI_USAGE;
  }
  if (a->w.have_region && (a->w.region[2] < 1 || a->w.region[3] < 1)) {
    cli_error("%s: --region's width and height must be >= 1", WARP);
    return CLI_USAGE;
  }
  cli_format npy;
  if (a->out_field && !cli_output_format(WARP, "--out-field", a->out_field, CLI_FORMAT_NPY, &npy)) return CLI_USAGE;
  cli_file *ins = calloc((size_t)n / 2 + 1, sizeof *ins), *outs = calloc((size_t)n / 2 + 1, sizeof *outs);
  bool ok = ins && outs;
  if (!ok) cli_error("out of memory");
  size_t ni = 0, no = 0;
  if (ok) ins[ni++] = (cli_file){a->transform, "--transform", NULL};
  for (int k = *first; ok && k < argc; k += 2) {
    ok = input_kind(WARP, "IN", argv[k]) && output_kind(WARP, "OUT", argv[k + 1]);
    ins[ni++] = (cli_file){argv[k], "IN", NULL};
    outs[no++] = (cli_file){argv[k + 1], argv[k], NULL};
  }
  if (ok && a->out_field) outs[no++] = (cli_file){a->out_field, "--out-field", NULL};
  ok = ok && cli_check_outputs(WARP, ins, ni, outs, no);
  free(ins);
  free(outs);
  return ok ? CLI_OK : CLI_USAGE;
}

static int warp_files(const cli_globals *g, const warp_cmd_args *a, accel_ctx *ctx, int n, char **pairs) {
  accel_reg_transform *t = NULL;
  accel_status s = accel_reg_transform_load(ctx, a->transform, &t);
  if (s) {
    cli_error("%s: %s: %s: %s", WARP, a->transform, accel_status_string(s), accel_last_error(ctx));
    return CLI_SOME_FAILED;
  }
  accel_reg_grid grid;
  accel_reg_transform_grid(t, &grid);
  int64_t region[4] = {0, 0, grid.image_size[0], grid.image_size[1]};
  if (a->w.have_region) memcpy(region, a->w.region, sizeof region);
  /* Before any output: a transform file's Size (or --region) can ask for
   * any size, and the field's file would be written until the disk is full
   * (a warped image is refused by accel_reg_warp, after its buffer). */
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  uint64_t pixels = 0;
  const bool wraps = __builtin_mul_overflow((uint64_t)region[2], (uint64_t)region[3], &pixels);
  if (!accel_ctx_query(ctx, &info) && (wraps || pixels > info.max_pixels)) {
    cli_error("%s: %s: the output region has %lld x %lld pixels, over the context's max_pixels %llu (%s)", WARP,
              accel_status_string(ACCEL_ERR_LIMIT), (long long)region[3], (long long)region[2],
              (unsigned long long)info.max_pixels, a->w.have_region ? "--region" : "the transform's Size");
    accel_reg_transform_destroy(t);
    return CLI_SOME_FAILED;
  }
  printf("shape\t%lld,%lld\n", (long long)region[3], (long long)region[2]);
  int written = 0, failed = 0;
  if (a->out_field) {
    const bool done = write_field(ctx, WARP, t, a->out_field, region, g->progress);
    written += done;
    failed += !done;
  }
  warp_job j;
  warp_job_init(&j, WARP, ctx, t, &a->w, region, g->progress);
  for (int k = 0; k < n; k += 2) {
    const bool done = warp_one(&j, pairs[k], NULL, pairs[k + 1]);
    written += done;
    failed += !done;
  }
  printf("written\t%d\n", written);
  accel_reg_transform_destroy(t);
  return failed ? CLI_SOME_FAILED : CLI_OK;
}

static int run_warp(const cli_globals *g, int argc, char **argv) {
  warp_cmd_args a = {.w = {.interp = ACCEL_REG_INTERP_CUBIC}};
  int first;
  int rc = parse_warp_cmd(argc, argv, &a, &first);
  accel_ctx *ctx = NULL;
  if (!rc) rc = cli_open_ctx(g, &ctx);
  if (!rc) rc = warp_files(g, &a, ctx, argc - first, argv + first);
  accel_ctx_destroy(ctx);
  return rc;
}

const cli_command cli_register_command = {.name = "register",
                                          .summary = "B-spline registration of two images (elastix's model)",
                                          .usage = REGISTER_USAGE,
                                          .options = REGISTER_OPTIONS,
                                          .help_column = 25,
                                          .usage_tail = USAGE_TAIL,
                                          .run = run_register};
const cli_command cli_warp_command = {.name = "warp",
                                      .summary = "warp images with an elastix transform file",
                                      .usage = WARP_USAGE,
                                      .options = WARP_CMD_OPTIONS,
                                      .help_column = 25,
                                      .usage_tail = USAGE_TAIL,
                                      .run = run_warp};
