/* accel gray: convert images to 8-bit gray (Pillow's convert('L')). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char USAGE[] =
    "usage: accel [global options] gray [-o FILE | --out DIR] [--format pgm|npy] INPUT...\n"
    "\n"
    "Convert 8-bit images to gray with Pillow's convert('L') arithmetic\n"
    "(L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16; alpha ignored).\n"
    "\n"
    "inputs:  .jpg .jpeg .png (decoded as Pillow decodes them), .pgm .ppm .pnm (binary,\n"
    "         8-bit) or .npy (uint8, (H, W) or (H, W, C), C = 1..4)\n";

static const char USAGE_TAIL[] =
    "\n"
    "An output that would overwrite an input, or two inputs that would be written to\n"
    "the same file, are refused before anything is written.\n"
    "\n"
    "Prints each output path. Exit status 1 if some inputs failed (each is\n"
    "reported on stderr), 2 for usage errors.\n";

typedef struct gray_args {
  const char *out_file, *out_dir, *format_name;
} gray_args;

/* pgm, npy or tif (the files), tsv or json (the report; the dispatcher
 * reads it), or one of each: "npy,json". */
static bool parse_format(const char *cmd, const cli_option *o, const char *v, void *field) {
  (void)o;
  for (const char *p = v;; p++) {
    const size_t n = strcspn(p, ",");
    if (n == 3 && (strncmp(p, "pgm", 3) == 0 || strncmp(p, "npy", 3) == 0 || strncmp(p, "tif", 3) == 0)) {
      *(const char **)field = p[0] == 'p' ? "pgm" : p[0] == 'n' ? "npy" : "tif";
    } else if (!((n == 3 && strncmp(p, "tsv", 3) == 0) || (n == 4 && strncmp(p, "json", 4) == 0))) {
      cli_error("%s: --format must be pgm, npy or tif (the files), tsv or json (the report), or one of each, not '%s'",
                cmd, v);
      return false;
    }
    p += n;
    if (!*p) return true;
  }
}

static const cli_option OPTIONS[] = {
    {.name = "-o",
     .kind = CLI_OPT_STRING,
     CLI_AT(gray_args, out_file),
     .arg = "FILE",
     .help = "output file for a single input, in the format its extension names:\n"
             ".pgm or .pnm, .npy, .tif or .tiff (any other is refused)"},
    {.name = "--out",
     .kind = CLI_OPT_STRING,
     CLI_AT(gray_args, out_dir),
     .arg = "DIR",
     .help = "output directory (default ., created if missing); each INPUT becomes\n"
             "DIR/<name>.gray.<format>"},
    {.name = "--format",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(gray_args, format_name),
     .parse = parse_format,
     .arg = "F",
     .help = "pgm (default), npy or tif; or tsv (default) or json: the\n"
             "report (the outputs written); both: --format npy,json"},
    {0},
};

static const cli_choice FORMATS[] = {
    {"pgm", CLI_FORMAT_PGM}, {"npy", CLI_FORMAT_NPY}, {"tif", CLI_FORMAT_TIF}, {NULL, 0}};

static const char *ext_of(const char *path) {
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  return dot && (!slash || dot > slash) ? dot + 1 : "";
}

/* JPEG/PNG decode to Pillow's convert('RGB'), whose gray (the image.gray
 * stage) is Pillow's convert('L') for every mode a file can have. */
static accel_status load(accel_ctx *ctx, const char *path, accel_buffer **out) {
  const char *e = ext_of(path);
  if (strcasecmp(e, "npy") == 0) return accel_npy_load(ctx, path, out);
  if (strcasecmp(e, "jpg") == 0 || strcasecmp(e, "jpeg") == 0 || strcasecmp(e, "png") == 0)
    return accel_image_decode_file(ctx, path, NULL, out, NULL);
  return accel_pnm_load(ctx, path, out);
}

static accel_status save(accel_ctx *ctx, const char *path, cli_format format, const accel_array *a) {
  switch (format) {
  case CLI_FORMAT_NPY: return accel_npy_save(ctx, path, a);
  case CLI_FORMAT_TIF: return accel_tiff_save(ctx, path, a, NULL);
  default: return accel_pnm_save(ctx, path, a);
  }
}

static const char *ext_name(cli_format format) {
  return format == CLI_FORMAT_NPY ? "npy" : format == CLI_FORMAT_TIF ? "tif" : "pgm";
}

static char *output_path(const char *dir, const char *input, const char *format) {
  const char *base = strrchr(input, '/');
  base = base ? base + 1 : input;
  size_t stem = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) stem = (size_t)(dot - base);
  size_t n = strlen(dir) + stem + strlen(format) + 8;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%.*s.gray.%s", dir, (int)stem, base, format);
  return p;
}

/* Returns 0 on success, else prints why and returns 1. */
static int convert(accel_ctx *ctx, const char *in, const char *out, cli_format format) {
  accel_buffer *img = NULL, *gray = NULL;
  accel_array src, dst;
  accel_status s = load(ctx, in, &img);
  if (!s) {
    accel_buffer_view(img, &src);
    if (src.dtype != ACCEL_DTYPE_U8) {
      cli_error("%s: ACCEL_ERR_UNSUPPORTED: gray conversion takes 8-bit images only", in);
      accel_buffer_destroy(img);
      return 1;
    }
    s = accel_buffer_create(ACCEL_DTYPE_U8, 2, src.shape, &gray);
    if (s) {
      cli_error("%s: %s: %s", in, accel_status_string(s), accel_last_error(NULL));
      accel_buffer_destroy(img);
      return 1;
    }
    accel_buffer_view(gray, &dst);
    s = accel_image_to_gray(ctx, &src, &dst);
    if (!s) s = save(ctx, out, format, &dst);
  }
  if (s) cli_error("%s: %s: %s", in, accel_status_string(s), accel_last_error(ctx));
  else cli_tsv_field(out), printf("\n");
  accel_buffer_destroy(img);
  accel_buffer_destroy(gray);
  return s ? 1 : 0;
}

/* The format written: --format's, or the one -o's name gives (they must agree). */
static bool output_format(const gray_args *a, int ninputs, cli_format *format) {
  int chosen = CLI_FORMAT_PGM;
  if (a->format_name && !cli_parse_choice("gray", "--format", FORMATS, a->format_name, &chosen)) return false;
  *format = (cli_format)chosen;
  if (a->out_file && ninputs != 1) {
    cli_error("gray: -o takes a single input; use --out DIR for several");
    return false;
  }
  return true;
}

/* -o's name: the format it names, which --format (if given) must be. */
static bool named_format(const gray_args *a, cli_format *format) {
  cli_format named;
  if (!cli_output_format("gray", "-o", a->out_file, CLI_FORMAT_PGM | CLI_FORMAT_NPY | CLI_FORMAT_TIF, &named))
    return false;
  if (a->format_name && named != *format) {
    cli_error("gray: -o %s names %s, not --format %s", a->out_file, ext_name(named), a->format_name);
    return false;
  }
  *format = named;
  return true;
}

/* Each input's output path (names[i]), checked against the inputs and each
 * other before anything is written. */
static int plan_outputs(const gray_args *a, cli_format format, int n, char **inputs, char **names) {
  cli_file *ins = calloc((size_t)n, sizeof *ins), *outs = calloc((size_t)n, sizeof *outs);
  int rc = ins && outs ? CLI_OK : CLI_USAGE;
  if (rc) cli_error("out of memory");
  for (int i = 0; i < n && !rc; i++) {
    ins[i] = (cli_file){inputs[i], "input", NULL};
    names[i] = a->out_file ? strdup(a->out_file) : output_path(a->out_dir, inputs[i], ext_name(format));
    if (!names[i]) {
      cli_error("out of memory");
      rc = CLI_USAGE;
    }
    outs[i] = (cli_file){names[i], inputs[i], inputs[i]};
  }
  if (!rc && !cli_check_outputs("gray", ins, (size_t)n, outs, (size_t)n)) rc = CLI_USAGE;
  if (!rc && !a->out_file && !cli_make_dirs(a->out_dir)) rc = CLI_USAGE;
  free(ins);
  free(outs);
  return rc;
}

static int convert_all(const cli_globals *g, cli_format format, int n, char **inputs, char **names) {
  accel_ctx *ctx = NULL;
  const int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  int failed = 0;
  cli_progress bar;
  cli_progress_begin(&bar, "gray", g->progress);
  for (int i = 0; i < n; i++) {
    cli_progress_update(&bar, (double)i / n, inputs[i]);
    failed += convert(ctx, inputs[i], names[i], format);
  }
  cli_progress_update(&bar, 1.0, "");
  cli_progress_end(&bar);
  accel_ctx_destroy(ctx);
  return failed ? CLI_SOME_FAILED : CLI_OK;
}

static int run(const cli_globals *g, int argc, char **argv) {
  gray_args a = {.out_dir = "."};
  const int first = cli_parse_options("gray", OPTIONS, argc, argv, &a);
  if (first < 0) return CLI_USAGE;
  const int n = argc - first;
  if (n < 1) {
    cli_error("gray: no input files (see accel gray --help)");
    return CLI_USAGE;
  }
  cli_format format;
  if (!output_format(&a, n, &format)) return CLI_USAGE;
  for (int i = first; i < argc; i++)
    if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("gray: options must come before the inputs ('%s')", argv[i]);
      return CLI_USAGE;
    }
  if (a.out_file && !named_format(&a, &format)) return CLI_USAGE;
  char **names = calloc((size_t)n, sizeof *names);
  int rc = names ? plan_outputs(&a, format, n, argv + first, names) : CLI_USAGE;
  if (!names) cli_error("out of memory");
  if (!rc) rc = convert_all(g, format, n, argv + first, names);
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names);
  return rc;
}

const cli_command cli_gray_command = {.name = "gray",
                                      .summary = "convert images to 8-bit gray (Pillow's convert('L'))",
                                      .usage = USAGE,
                                      .options = OPTIONS,
                                      .help_column = 15,
                                      .usage_tail = USAGE_TAIL,
                                      .run = run};
