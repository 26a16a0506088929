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

static const cli_option OPTIONS[] = {
    {.name = "-o", .kind = CLI_OPT_STRING, CLI_AT(gray_args, out_file), .arg = "FILE",
     .help = "output file for a single input, in the format its extension names:\n"
             ".pgm or .pnm, .npy, .tif or .tiff (any other is refused)"},
    {.name = "--out", .kind = CLI_OPT_STRING, CLI_AT(gray_args, out_dir), .arg = "DIR",
     .help = "output directory (default ., created if missing); each INPUT becomes\n"
             "DIR/<name>.gray.<format>"},
    {.name = "--format", .kind = CLI_OPT_STRING, CLI_AT(gray_args, format_name), .arg = "F",
     .help = "pgm (default), npy or tif"},
    {0}};

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
  else printf("%s\n", out);
  accel_buffer_destroy(img);
  accel_buffer_destroy(gray);
  return s ? 1 : 0;
}

static int run(const cli_globals *g, int argc, char **argv) {
  gray_args a = {.out_dir = "."};
  const int first_input = cli_parse_options("gray", OPTIONS, argc, argv, &a);
  if (first_input < 0) return CLI_USAGE;
  const char *out_file = a.out_file, *out_dir = a.out_dir, *format_name = a.format_name;
  int ninputs = argc - first_input;
  if (ninputs < 1) {
    cli_error("gray: no input files (see accel gray --help)");
    return CLI_USAGE;
  }
  int chosen = CLI_FORMAT_PGM;
  if (format_name && !cli_parse_choice("gray", "--format", FORMATS, format_name, &chosen)) return CLI_USAGE;
  cli_format format = (cli_format)chosen;
  if (out_file && ninputs != 1) {
    cli_error("gray: -o takes a single input; use --out DIR for several");
    return CLI_USAGE;
  }
  for (int i = first_input; i < argc; i++)
    if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("gray: options must come before the inputs ('%s')", argv[i]);
      return CLI_USAGE;
    }
  if (out_file) {
    cli_format named;
    if (!cli_output_format("gray", "-o", out_file, CLI_FORMAT_PGM | CLI_FORMAT_NPY | CLI_FORMAT_TIF, &named))
      return CLI_USAGE;
    if (format_name && named != format) {
      cli_error("gray: -o %s names %s, not --format %s", out_file, ext_name(named), format_name);
      return CLI_USAGE;
    }
    format = named;
  }

  /* every output path, checked against the inputs and each other before anything is written */
  cli_file *ins = calloc((size_t)ninputs, sizeof *ins), *outs = calloc((size_t)ninputs, sizeof *outs);
  char **names = calloc((size_t)ninputs, sizeof *names);
  int rc = ins && outs && names ? CLI_OK : CLI_USAGE;
  if (rc) cli_error("out of memory");
  for (int i = 0; i < ninputs && !rc; i++) {
    ins[i] = (cli_file){argv[first_input + i], "input", NULL};
    names[i] = out_file ? strdup(out_file) : output_path(out_dir, argv[first_input + i], ext_name(format));
    if (!names[i]) {
      cli_error("out of memory");
      rc = CLI_USAGE;
    }
    outs[i] = (cli_file){names[i], argv[first_input + i], argv[first_input + i]};
  }
  if (!rc && !cli_check_outputs("gray", ins, (size_t)ninputs, outs, (size_t)ninputs)) rc = CLI_USAGE;
  if (!rc && !out_file && !cli_make_dirs(out_dir)) rc = CLI_USAGE;
  accel_ctx *ctx = NULL;
  if (!rc) rc = cli_open_ctx(g, &ctx);
  if (!rc) {
    int failed = 0;
    cli_progress bar;
    cli_progress_begin(&bar, "gray", g->progress);
    for (int i = 0; i < ninputs; i++) {
      cli_progress_update(&bar, (double)i / ninputs, ins[i].path);
      failed += convert(ctx, ins[i].path, names[i], format);
    }
    cli_progress_update(&bar, 1.0, "");
    cli_progress_end(&bar);
    rc = failed ? CLI_SOME_FAILED : CLI_OK;
  }
  for (int i = 0; names && i < ninputs; i++) free(names[i]);
  free(names);
  free(ins);
  free(outs);
  accel_ctx_destroy(ctx);
  return rc;
}

const cli_command cli_gray_command = {.name = "gray",
                                      .summary = "convert images to 8-bit gray (Pillow's convert('L'))",
                                      .usage = USAGE,
                                      .options = OPTIONS,
                                      .help_column = 15,
                                      .usage_tail = USAGE_TAIL,
                                      .run = run};
