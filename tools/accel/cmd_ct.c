/* accel ct segment: the CT pore pipeline on one volume. */
#include "picture.h"
#include "volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char USAGE[] =
    "usage: accel [global options] ct segment INPUT --threshold T [options]\n"
    "\n"
    "Segments the pores of a CT volume (z, y, x): threshold (solid = value > T),\n"
    "fill holes, pores, exact distance transform, markers (the distance map's peaks),\n"
    "watershed, pore network. Results identical to SciPy / scikit-image 0.19.3\n"
    "(docs/ct.md). Only what the outputs need is computed.\n"
    "\n";

static const char USAGE_TAIL[] =
    "\n"
    "Prints a summary (name<TAB>value lines) on stdout. Exit status 1 when an input\n"
    "cannot be read or its content is refused (a float64 volume, markers that are not\n"
    "int32, ...) or an output cannot be written, 2 for usage errors.\n";

/* "saddles", "nearby", a comma list of them, "all" or "none". */
static bool trim_flags(const char *v, uint32_t *out) {
  if (strcmp(v, "none") == 0) return *out = 0, true;
  if (strcmp(v, "all") == 0) return *out = ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY, true;
  uint32_t flags = 0;
  while (*v) {
    const size_t len = strcspn(v, ",");
    if (len == 7 && strncmp(v, "saddles", 7) == 0) flags |= ACCEL_CT_TRIM_SADDLES;
    else if (len == 6 && strncmp(v, "nearby", 6) == 0) flags |= ACCEL_CT_TRIM_NEARBY;
    else return false;
    v += len;
    if (*v == ',' && *++v == '\0') return false;
  }
  *out = flags;
  return flags != 0;
}

static bool parse_trim(const char *cmd, const cli_option *o, const char *v, void *field) {
  if (trim_flags(v, field)) return true;
  cli_error("%s: %s takes saddles, nearby, saddles,nearby, all or none, not '%s'", cmd, o->name, v);
  return false;
}

static bool parse_connectivity(const char *cmd, const cli_option *o, const char *v, void *field) {
  int c = 0;
  if (!cli_parse_int(cmd, o->name, v, 6, 26, &c)) return false;
  if (c != 6 && c != 18 && c != 26) {
    cli_error("%s: %s must be 6, 18 or 26", cmd, o->name);
    return false;
  }
  *(accel_ct_connectivity *)field = (accel_ct_connectivity)c;
  return true;
}

enum { NOUT = 6 }; /* solid, filled, pores, edt, markers, labels */

typedef struct segment_args {
  accel_ct_pipeline_options po;
  const char *markers, *network, *out[NOUT], *member, *preview;
  int64_t shape[3], offset;
  accel_dtype dtype;
  double rescale[2];
  bool have_shape, have_offset, have_rescale, have_threshold, json;
} segment_args;

static const cli_choice DTYPES[] = {{"uint8", ACCEL_DTYPE_U8},    {"int16", ACCEL_DTYPE_I16},
                                    {"uint16", ACCEL_DTYPE_U16},  {"int32", ACCEL_DTYPE_I32},
                                    {"float32", ACCEL_DTYPE_F32}, {NULL, 0}};
static const cli_choice COMPARES[] = {{"gt", ACCEL_CT_GREATER},
                                      {"ge", ACCEL_CT_GREATER_EQUAL},
                                      {"lt", ACCEL_CT_LESS},
                                      {"le", ACCEL_CT_LESS_EQUAL},
                                      {NULL, 0}};
static const cli_choice PORES[] = {{"closed", ACCEL_CT_PORES_CLOSED}, {"all", ACCEL_CT_PORES_ALL}, {NULL, 0}};
static const cli_choice TIES[] = {{"skimage", ACCEL_CT_TIES_SKIMAGE}, {"stable", ACCEL_CT_TIES_STABLE}, {NULL, 0}};

#define OUTPUT(flag, k)                                                                                                \
  { .name = flag, .kind = CLI_OPT_STRING, CLI_AT(segment_args, out[k]), .arg = "F" }

static const cli_option OPTIONS[] = {
    {.kind = CLI_OPT_TEXT, .help = "input:"},
    {.name = "INPUT",
     .kind = CLI_OPT_TEXT,
     .help = "the volume (z, y, x) of uint8, int16, uint16, int32 or float32:\n"
             "a .npy file (C or Fortran order); an .npz archive's member,\n"
             "F.npz:NAME or --member NAME (the only one when not named);\n"
             "a multi-page TIFF, each page a z slice; a directory of\n"
             "TIFF slices (.tif/.tiff, in byte order of their names);\n"
             "else a raw file with --shape and --dtype"},
    {.name = "--member",
     .kind = CLI_OPT_STRING,
     CLI_AT(segment_args, member),
     .arg = "NAME",
     .help = "the .npz member to read (NAME or NAME.npy)"},
    {.name = "--shape",
     .kind = CLI_OPT_INT,
     CLI_AT(segment_args, shape),
     CLI_SEEN(segment_args, have_shape),
     .count = 3,
     .lo = 1,
     .hi = INT64_MAX,
     .arg = "Z,Y,X",
     .help = "raw input: the shape (C order, little-endian)"},
    {.name = "--dtype",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(segment_args, dtype),
     .choices = DTYPES,
     .arg = "D",
     .help = "raw input: uint8, int16, uint16, int32 or float32"},
    {.name = "--offset",
     .kind = CLI_OPT_INT,
     CLI_AT(segment_args, offset),
     CLI_SEEN(segment_args, have_offset),
     .lo = 0,
     .hi = INT64_MAX,
     .arg = "B",
     .help = "raw input: bytes to skip first (a header; default 0)"},
    {.name = "--rescale",
     .kind = CLI_OPT_REAL,
     CLI_AT(segment_args, rescale),
     CLI_SEEN(segment_args, have_rescale),
     .count = 2,
     .label = "--rescale (SLOPE,INTERCEPT)",
     .arg = "S,I",
     .help = "int16/uint16 input: value * S + I before the threshold\n"
             "(DICOM's rescale slope and intercept)"},
    {.kind = CLI_OPT_TEXT, .help = "segmentation:"},
    {.name = "--threshold",
     .kind = CLI_OPT_REAL,
     CLI_AT(segment_args, po.threshold),
     CLI_SEEN(segment_args, have_threshold),
     .arg = "T",
     .help = "required: solid = value > T"},
    {.name = "--compare",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(segment_args, po.compare),
     .choices = COMPARES,
     .arg = "OP",
     .help = "gt (default), ge, lt or le: solid = value OP T"},
    {.name = "--pores",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(segment_args, po.pores),
     .choices = PORES,
     .arg = "MODE",
     .help = "closed (default): fill_holes(solid) & ~solid; all: ~solid"},
    {.name = "--fill-connectivity",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(segment_args, po.fill_connectivity),
     .parse = parse_connectivity,
     .arg = "C",
     .help = "6 (default, SciPy's), 18 or 26"},
    {.name = "--spacing",
     .kind = CLI_OPT_REAL,
     CLI_AT(segment_args, po.spacing),
     .count = 3,
     .min = 0,
     .exclusive = true,
     .range = "three sizes > 0",
     .arg = "Z,Y,X",
     .help = "voxel size (default 1,1,1); distances and volumes use it"},
    {.name = "--min-distance",
     .kind = CLI_OPT_INT,
     CLI_AT(segment_args, po.min_distance),
     .lo = 0,
     .hi = 1000,
     .arg = "D",
     .help = "markers: minimum peak distance in voxels (default 3)"},
    {.name = "--smooth",
     .kind = CLI_OPT_REAL,
     CLI_AT(segment_args, po.smooth_sigma),
     .min = 0,
     .range = "a sigma >= 0",
     .arg = "SIGMA",
     .help = "Gaussian smoothing of the distance map for the peak search\n(SNOW's option; default 0, none)"},
    {.name = "--trim",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(segment_args, po.trim),
     .parse = parse_trim,
     .arg = "KINDS",
     .help = "SNOW's peak trims, PoreSpy 3's rules: saddles, nearby,\n"
             "saddles,nearby (or all), none (default)"},
    {.name = "--saddle-iterations",
     .kind = CLI_OPT_INT,
     CLI_AT(segment_args, po.saddle_iterations),
     .lo = 1,
     .hi = 100000,
     .arg = "N",
     .help = "the saddle trim's iteration limit (default 20)"},
    {.name = "--nearby-factor",
     .kind = CLI_OPT_REAL,
     CLI_AT(segment_args, po.nearby_factor),
     .min = 0,
     .range = "a number >= 0",
     .arg = "F",
     .help = "nearby trim: peaks nearer than F times their distance to\n"
             "the solid compete (default 1)"},
    {.name = "--ties",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(segment_args, po.ties),
     .choices = TIES,
     .arg = "RULE",
     .help = "skimage (default): scikit-image's order of equal markers;\n"
             "stable: equal markers in C order"},
    {.name = "--markers",
     .kind = CLI_OPT_STRING,
     CLI_AT(segment_args, markers),
     .arg = "M.npy",
     .help = "use these markers (int32) instead of the peak search"},
    {.kind = CLI_OPT_TEXT, .help = "outputs (written atomically; .npy, or .raw for raw little-endian C-order values):"},
    OUTPUT("--out-solid", 0),
    OUTPUT("--out-filled", 1),
    OUTPUT("--out-pores", 2),
    OUTPUT("--out-edt", 3),
    OUTPUT("--out-markers", 4),
    OUTPUT("--out-labels", 5),
    {.name = "--network",
     .kind = CLI_OPT_STRING,
     CLI_AT(segment_args, network),
     .arg = "F.json",
     .help = "the pore network: regions, throats, porosity"},
    {.name = "--preview",
     .kind = CLI_OPT_STRING,
     CLI_AT(segment_args, preview),
     .arg = "P.png",
     .help = "a picture: the mid-planes z, y, x side by side, the labels in\n"
             "colour over the gray values (docs/cli.md gives its size)"},
    {.name = "--format",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(segment_args, json),
     .choices = cli_tsv_json,
     .arg = "F",
     .help = "the summary as tsv (default) or json"},
    {.kind = CLI_OPT_TEXT,
     .help = "  An output whose name ends otherwise, or that would overwrite an input or another\n"
             "  output, is refused before anything runs."},
    {0}};

static const char C[] = "ct segment";

static bool ends_png(const char *path) {
  const size_t n = strlen(path);
  return n >= 4 && strcasecmp(path + n - 4, ".png") == 0;
}

/* An output file: where, in which format, and its buffer. */
typedef struct outspec {
  const char *flag, *path;
  cli_format format;
  accel_dtype dtype;
  accel_buffer *buf;
  accel_array view;
} outspec;

/* One run of the pipeline and what it holds. */
typedef struct run_state {
  const char *input;
  volume_source src;
  accel_ctx *ctx;
  accel_buffer *in, *mk;
  accel_array vin, vmk;
  double *slopes, *intercepts;
  accel_ct_pipeline *pl;
  accel_ct_network *net;
  outspec outs[NOUT];
  uint32_t markers;
} run_state;

/* The input is a volume file, or a raw one with --shape and --dtype. */
static bool check_input(const segment_args *a, run_state *r) {
  if (!a->have_threshold) {
    cli_error("%s: --threshold is required", C);
    return false;
  }
  if (!volume_source_of(C, r->input, a->member, &r->src)) return false;
  const bool raw = r->src.kind == VOLUME_RAW;
  if (raw && (!a->have_shape || a->dtype == ACCEL_DTYPE_INVALID)) {
    cli_error(
        "%s: %s is not a .npy, .npz or TIFF file nor a directory: give --shape Z,Y,X and --dtype for a raw "
        "volume",
        C, r->input);
    return false;
  }
  if (!raw && (a->have_shape || a->dtype != ACCEL_DTYPE_INVALID || a->have_offset)) {
    cli_error("%s: --shape, --dtype and --offset are for raw inputs; %s carries its own", C, r->input);
    return false;
  }
  return true;
}

/* Each output in the format its name gives; none may overwrite an input or another output. */
static bool check_outputs(const segment_args *a, run_state *r) {
  static const char *const flags[NOUT] = {"--out-solid", "--out-filled",  "--out-pores",
                                          "--out-edt",   "--out-markers", "--out-labels"};
  static const accel_dtype dtypes[NOUT] = {ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,
                                           ACCEL_DTYPE_F32, ACCEL_DTYPE_I32, ACCEL_DTYPE_I32};
  const cli_file ins[2] = {{r->src.path, "INPUT", NULL}, {a->markers, "--markers", NULL}};
  cli_file files[NOUT + 2];
  size_t nfiles = 0;
  for (int k = 0; k < NOUT; k++) {
    r->outs[k] = (outspec){flags[k], a->out[k], 0, dtypes[k], NULL, {0}};
    if (!a->out[k]) continue;
    if (!cli_output_format(C, flags[k], a->out[k], CLI_FORMAT_NPY | CLI_FORMAT_RAW, &r->outs[k].format)) return false;
    files[nfiles++] = (cli_file){a->out[k], flags[k], NULL};
  }
  cli_format json;
  if (a->network) {
    if (!cli_output_format(C, "--network", a->network, CLI_FORMAT_JSON, &json)) return false;
    files[nfiles++] = (cli_file){a->network, "--network", NULL};
  }
  if (a->preview) {
    if (!ends_png(a->preview)) {
      cli_error("%s: --preview %s: the file name must end in .png (the format written)", C, a->preview);
      return false;
    }
    files[nfiles++] = (cli_file){a->preview, "--preview", NULL};
  }
  return cli_check_outputs(C, ins, a->markers ? 2 : 1, files, nfiles);
}

/* The volume (3-D), its rescale (one slope and intercept a slice) and the markers given. */
static int load_inputs(segment_args *a, run_state *r) {
  if (r->src.kind != VOLUME_RAW) {
    if (!volume_load(r->ctx, C, &r->src, &r->in)) return CLI_SOME_FAILED;
  } else if (accel_raw_load(r->ctx, r->input, a->dtype, 3, a->shape, (uint64_t)a->offset, &r->in)) {
    cli_error("%s: %s", C, accel_last_error(r->ctx));
    return CLI_SOME_FAILED;
  }
  accel_buffer_view(r->in, &r->vin);
  if (r->vin.ndim != 3) {
    cli_error("%s: %s is %d-D; a volume is 3-D (z, y, x)", C, r->input, (int)r->vin.ndim);
    return CLI_SOME_FAILED;
  }
  if (a->have_rescale) {
    r->slopes = malloc((size_t)r->vin.shape[0] * sizeof(double));
    r->intercepts = malloc((size_t)r->vin.shape[0] * sizeof(double));
    if (!r->slopes || !r->intercepts) {
      cli_error("out of memory");
      return CLI_SOME_FAILED;
    }
    for (int64_t z = 0; z < r->vin.shape[0]; z++) {
      r->slopes[z] = a->rescale[0];
      r->intercepts[z] = a->rescale[1];
    }
    a->po.slope = r->slopes;
    a->po.intercept = r->intercepts;
  }
  if (a->markers && accel_npy_load(r->ctx, a->markers, &r->mk)) {
    cli_error("%s: %s", C, accel_last_error(r->ctx));
    return CLI_SOME_FAILED;
  }
  if (r->mk) accel_buffer_view(r->mk, &r->vmk);
  return CLI_OK;
}

/* The pipeline on the volume, into the outputs asked for. */
static int run_pipeline(const cli_globals *g, segment_args *a, run_state *r) {
  cli_progress bar;
  cli_progress_begin(&bar, "ct", g->progress);
  a->po.progress = cli_progress_callback;
  a->po.progress_user = &bar;
  accel_status s = accel_ct_pipeline_create(r->ctx, &a->po, &r->pl);
  if (s) {
    cli_progress_end(&bar);
    cli_error("%s: %s", C, accel_last_error(r->ctx));
    return s == ACCEL_ERR_INVALID_ARG ? CLI_USAGE : CLI_SOME_FAILED; /* the options were refused */
  }
  accel_ct_outputs out;
  accel_ct_outputs_init(&out, sizeof out);
  const accel_array **slots[NOUT] = {&out.solid, &out.filled, &out.pores, &out.edt, &out.markers, &out.labels};
  for (int k = 0; k < NOUT; k++) {
    if (!r->outs[k].path && !(k == NOUT - 1 && a->preview)) continue; /* the preview draws the labels */
    if (accel_buffer_create(r->outs[k].dtype, 3, r->vin.shape, &r->outs[k].buf)) {
      cli_progress_end(&bar);
      cli_error("%s: %s", C, accel_last_error(NULL));
      return CLI_SOME_FAILED;
    }
    accel_buffer_view(r->outs[k].buf, &r->outs[k].view);
    *slots[k] = &r->outs[k].view;
  }
  if (a->network) out.network = &r->net;
  s = accel_ct_pipeline_run(r->pl, &r->vin, r->mk ? &r->vmk : NULL, &out);
  cli_progress_end(&bar);
  if (s) { /* the options were accepted: what is refused now is the input's content */
    cli_error("%s: %s", C, accel_last_error(r->ctx));
    return CLI_SOME_FAILED;
  }
  r->markers = out.marker_count;
  return CLI_OK;
}

/* The outputs written, and the summary. */
static int save_outputs(const segment_args *a, const run_state *r) {
  int rc = CLI_OK;
  for (int k = 0; k < NOUT; k++) {
    const outspec *o = &r->outs[k];
    if (o->path && (o->format == CLI_FORMAT_RAW ? accel_raw_save(r->ctx, o->path, &o->view)
                                                : accel_npy_save(r->ctx, o->path, &o->view))) {
      cli_error("%s: %s", C, accel_last_error(r->ctx));
      rc = CLI_SOME_FAILED;
    }
  }
  if (a->network && accel_ct_network_save_json(r->ctx, r->net, a->network)) {
    cli_error("%s: %s", C, accel_last_error(r->ctx));
    rc = CLI_SOME_FAILED;
  }
  if (a->preview && !pic_ct_preview(C, a->preview, &r->vin, &r->outs[NOUT - 1].view)) rc = CLI_SOME_FAILED;
  const int64_t *shape = r->vin.shape;
  printf("shape\t%lld,%lld,%lld\n", (long long)shape[0], (long long)shape[1], (long long)shape[2]);
  printf("markers\t%u\n", r->markers);
  if (r->net) {
    size_t nr, nt;
    double porosity;
    accel_ct_network_info(r->net, &nr, &nt, &porosity);
    printf("regions\t%zu\nthroats\t%zu\nporosity\t%.6f\n", nr, nt, porosity);
  }
  return rc;
}

static int segment(const cli_globals *g, int argc, char **argv) {
  segment_args a = {0};
  accel_ct_pipeline_options_init(&a.po, sizeof a.po);
  const int first = cli_parse_options(C, OPTIONS, argc, argv, &a);
  if (first < 0 || !cli_has_operand(C, first, argc, "INPUT")) return CLI_USAGE;
  if (argc - first > 1) {
    cli_error("%s: one INPUT at a time, not %d", C, argc - first);
    return CLI_USAGE;
  }
  run_state r = {.input = argv[first]};
  if (!check_input(&a, &r) || !check_outputs(&a, &r)) {
    volume_source_free(&r.src);
    return CLI_USAGE;
  }
  int rc = cli_open_ctx(g, &r.ctx);
  if (!rc) rc = load_inputs(&a, &r);
  if (!rc) rc = run_pipeline(g, &a, &r);
  if (!rc) rc = save_outputs(&a, &r);
  accel_ct_network_destroy(r.net);
  accel_ct_pipeline_destroy(r.pl);
  accel_buffer_destroy(r.in);
  volume_source_free(&r.src);
  accel_buffer_destroy(r.mk);
  for (int k = 0; k < NOUT; k++) accel_buffer_destroy(r.outs[k].buf);
  free(r.slopes);
  free(r.intercepts);
  accel_ctx_destroy(r.ctx);
  return rc;
}

static const cli_command SEGMENT = {.name = "segment", .options = OPTIONS, .run = segment};
static const cli_command *const SUBCOMMANDS[] = {&SEGMENT, NULL};

const cli_command cli_ct_command = {.name = "ct",
                                    .summary = "CT pore segmentation: fill, distance map, watershed, network",
                                    .usage = USAGE,
                                    .options = OPTIONS,
                                    .help_column = 23,
                                    .usage_tail = USAGE_TAIL,
                                    .subcommands = SUBCOMMANDS};
