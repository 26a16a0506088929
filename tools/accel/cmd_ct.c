/* accel ct segment: the CT pore pipeline on one volume. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  if (c != 6 && c != 26) {
    cli_error("%s: %s must be 6 or 26", cmd, o->name);
    return false;
  }
  *(accel_ct_connectivity *)field = (accel_ct_connectivity)c;
  return true;
}

enum { NOUT = 6 }; /* solid, filled, pores, edt, markers, labels */

typedef struct segment_args {
  accel_ct_pipeline_options po;
  const char *markers, *network, *out[NOUT];
  int64_t shape[3], offset;
  accel_dtype dtype;
  double rescale[2];
  bool have_shape, have_offset, have_rescale, have_threshold;
} segment_args;

static const cli_choice DTYPES[] = {{"uint8", ACCEL_DTYPE_U8},   {"int16", ACCEL_DTYPE_I16},
                                    {"uint16", ACCEL_DTYPE_U16}, {"int32", ACCEL_DTYPE_I32},
                                    {"float32", ACCEL_DTYPE_F32}, {NULL, 0}};
static const cli_choice COMPARES[] = {{"gt", ACCEL_CT_GREATER}, {"ge", ACCEL_CT_GREATER_EQUAL},
                                      {"lt", ACCEL_CT_LESS},    {"le", ACCEL_CT_LESS_EQUAL},
                                      {NULL, 0}};
static const cli_choice PORES[] = {{"closed", ACCEL_CT_PORES_CLOSED}, {"all", ACCEL_CT_PORES_ALL}, {NULL, 0}};
static const cli_choice TIES[] = {{"skimage", ACCEL_CT_TIES_SKIMAGE}, {"stable", ACCEL_CT_TIES_STABLE}, {NULL, 0}};

#define OUTPUT(flag, k) {.name = flag, .kind = CLI_OPT_STRING, CLI_AT(segment_args, out[k]), .arg = "F"}

static const cli_option OPTIONS[] = {
    {.kind = CLI_OPT_TEXT, .help = "input:"},
    {.name = "INPUT", .kind = CLI_OPT_TEXT,
     .help = "a .npy volume (uint8, int16, uint16, int32, float32), or a raw\n"
             "file with --shape and --dtype"},
    {.name = "--shape", .kind = CLI_OPT_INT, CLI_AT(segment_args, shape), CLI_SEEN(segment_args, have_shape),
     .count = 3, .lo = 1, .hi = INT64_MAX, .arg = "Z,Y,X", .help = "raw input: the shape (C order, little-endian)"},
    {.name = "--dtype", .kind = CLI_OPT_CHOICE, CLI_AT(segment_args, dtype), .choices = DTYPES, .arg = "D",
     .help = "raw input: uint8, int16, uint16, int32 or float32"},
    {.name = "--offset", .kind = CLI_OPT_INT, CLI_AT(segment_args, offset), CLI_SEEN(segment_args, have_offset),
     .lo = 0, .hi = INT64_MAX, .arg = "B", .help = "raw input: bytes to skip first (a header; default 0)"},
    {.name = "--rescale", .kind = CLI_OPT_REAL, CLI_AT(segment_args, rescale), CLI_SEEN(segment_args, have_rescale),
     .count = 2, .label = "--rescale (SLOPE,INTERCEPT)", .arg = "S,I",
     .help = "int16/uint16 input: value * S + I before the threshold\n"
             "(DICOM's rescale slope and intercept)"},
    {.kind = CLI_OPT_TEXT, .help = "segmentation:"},
    {.name = "--threshold", .kind = CLI_OPT_REAL, CLI_AT(segment_args, po.threshold),
     CLI_SEEN(segment_args, have_threshold), .arg = "T", .help = "required: solid = value > T"},
    {.name = "--compare", .kind = CLI_OPT_CHOICE, CLI_AT(segment_args, po.compare), .choices = COMPARES,
     .arg = "OP", .help = "gt (default), ge, lt or le: solid = value OP T"},
    {.name = "--pores", .kind = CLI_OPT_CHOICE, CLI_AT(segment_args, po.pores), .choices = PORES, .arg = "MODE",
     .help = "closed (default): fill_holes(solid) & ~solid; all: ~solid"},
    {.name = "--fill-connectivity", .kind = CLI_OPT_CUSTOM, CLI_AT(segment_args, po.fill_connectivity),
     .parse = parse_connectivity, .arg = "C", .help = "6 (default, SciPy's) or 26"},
    {.name = "--spacing", .kind = CLI_OPT_REAL, CLI_AT(segment_args, po.spacing), .count = 3, .min = 0,
     .exclusive = true, .range = "three sizes > 0", .arg = "Z,Y,X",
     .help = "voxel size (default 1,1,1); distances and volumes use it"},
    {.name = "--min-distance", .kind = CLI_OPT_INT, CLI_AT(segment_args, po.min_distance), .lo = 0, .hi = 1000,
     .arg = "D", .help = "markers: minimum peak distance in voxels (default 3)"},
    {.name = "--smooth", .kind = CLI_OPT_REAL, CLI_AT(segment_args, po.smooth_sigma), .min = 0,
     .range = "a sigma >= 0", .arg = "SIGMA",
     .help = "Gaussian smoothing of the distance map for the peak search\n"
             "(SNOW's option; default 0, none)"},
    {.name = "--trim", .kind = CLI_OPT_CUSTOM, CLI_AT(segment_args, po.trim), .parse = parse_trim, .arg = "KINDS",
     .help = "SNOW's peak trims, PoreSpy 3's rules: saddles, nearby,\n"
             "saddles,nearby (or all), none (default)"},
    {.name = "--saddle-iterations", .kind = CLI_OPT_INT, CLI_AT(segment_args, po.saddle_iterations), .lo = 1,
     .hi = 100000, .arg = "N", .help = "the saddle trim's iteration limit (default 20)"},
    {.name = "--nearby-factor", .kind = CLI_OPT_REAL, CLI_AT(segment_args, po.nearby_factor), .min = 0,
     .range = "a number >= 0", .arg = "F",
     .help = "nearby trim: peaks nearer than F times their distance to\n"
             "the solid compete (default 1)"},
    {.name = "--ties", .kind = CLI_OPT_CHOICE, CLI_AT(segment_args, po.ties), .choices = TIES, .arg = "RULE",
     .help = "skimage (default): scikit-image's order of equal markers;\n"
             "stable: equal markers in C order"},
    {.name = "--markers", .kind = CLI_OPT_STRING, CLI_AT(segment_args, markers), .arg = "M.npy",
     .help = "use these markers (int32) instead of the peak search"},
    {.kind = CLI_OPT_TEXT, .help = "outputs (written atomically; .npy, or .raw for raw little-endian C-order values):"},
    OUTPUT("--out-solid", 0),
    OUTPUT("--out-filled", 1),
    OUTPUT("--out-pores", 2),
    OUTPUT("--out-edt", 3),
    OUTPUT("--out-markers", 4),
    OUTPUT("--out-labels", 5),
    {.name = "--network", .kind = CLI_OPT_STRING, CLI_AT(segment_args, network), .arg = "F.json",
     .help = "the pore network: regions, throats, porosity"},
    {.kind = CLI_OPT_TEXT,
     .help = "  An output whose name ends otherwise, or that would overwrite an input or another\n"
             "  output, is refused before anything runs."},
    {0}};

typedef struct outspec {
  const char *flag, *path;
  cli_format format;
  accel_dtype dtype;
  accel_buffer *buf;
  accel_array view;
} outspec;

static int segment(const cli_globals *g, int argc, char **argv) {
  static const char C[] = "ct segment";
  segment_args a = {0};
  accel_ct_pipeline_options_init(&a.po, sizeof a.po);
  const int first = cli_parse_options(C, OPTIONS, argc, argv, &a);
  if (first < 0) return CLI_USAGE;
  const char *input = NULL, *markers_path = a.markers, *network_path = a.network;
  const int64_t *shape = a.shape, offset = a.offset;
  const accel_dtype raw_dtype = a.dtype;
  const double *rescale = a.rescale;
  const bool have_shape = a.have_shape, have_rescale = a.have_rescale, have_threshold = a.have_threshold,
             have_offset = a.have_offset;
  accel_ct_pipeline_options po = a.po;
  outspec outs[] = {{"--out-solid", a.out[0], 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-filled", a.out[1], 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-pores", a.out[2], 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-edt", a.out[3], 0, ACCEL_DTYPE_F32, NULL, {0}},
                    {"--out-markers", a.out[4], 0, ACCEL_DTYPE_I32, NULL, {0}},
                    {"--out-labels", a.out[5], 0, ACCEL_DTYPE_I32, NULL, {0}}};
  if (first >= argc) {
    cli_error("ct segment: no INPUT given (see accel ct --help)");
    return CLI_USAGE;
  }
  if (argc - first > 1) {
    cli_error("ct segment: one INPUT at a time, not %d", argc - first);
    return CLI_USAGE;
  }
  input = argv[first];
  if (!have_threshold) {
    cli_error("ct segment: --threshold is required");
    return CLI_USAGE;
  }
  const size_t len = strlen(input);
  const bool is_npy = len >= 4 && strcmp(input + len - 4, ".npy") == 0;
  if (!is_npy && (!have_shape || raw_dtype == ACCEL_DTYPE_INVALID)) {
    cli_error("ct segment: %s is not a .npy file: give --shape Z,Y,X and --dtype for a raw volume", input);
    return CLI_USAGE;
  }
  if (is_npy && (have_shape || raw_dtype != ACCEL_DTYPE_INVALID || have_offset)) {
    cli_error("ct segment: --shape, --dtype and --offset are for raw inputs; %s carries its own", input);
    return CLI_USAGE;
  }
  /* each output in the format its name gives; none may overwrite an input or another output */
  cli_file ins[2] = {{input, "INPUT", NULL}, {markers_path, "--markers", NULL}}, files[NOUT + 1];
  size_t nfiles = 0;
  for (int k = 0; k < NOUT; k++) {
    if (!outs[k].path) continue;
    if (!cli_output_format(C, outs[k].flag, outs[k].path, CLI_FORMAT_NPY | CLI_FORMAT_RAW, &outs[k].format))
      return CLI_USAGE;
    files[nfiles++] = (cli_file){outs[k].path, outs[k].flag, NULL};
  }
  cli_format json;
  if (network_path) {
    if (!cli_output_format(C, "--network", network_path, CLI_FORMAT_JSON, &json)) return CLI_USAGE;
    files[nfiles++] = (cli_file){network_path, "--network", NULL};
  }
  if (!cli_check_outputs(C, ins, markers_path ? 2 : 1, files, nfiles)) return CLI_USAGE;

  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  accel_buffer *in = NULL, *mk = NULL;
  accel_ct_pipeline *pl = NULL;
  accel_ct_network *net = NULL;
  double *slopes = NULL, *intercepts = NULL;
  accel_status s = is_npy ? accel_npy_load(ctx, input, &in)
                          : accel_raw_load(ctx, input, raw_dtype, 3, shape, offset, &in);
  accel_array vin;
  if (s) {
    cli_error("ct segment: %s", accel_last_error(ctx));
    rc = CLI_SOME_FAILED;
    goto done;
  }
  accel_buffer_view(in, &vin);
  if (vin.ndim != 3) {
    cli_error("ct segment: %s is %d-D; a volume is 3-D (z, y, x)", input, (int)vin.ndim);
    rc = CLI_SOME_FAILED;
    goto done;
  }
  if (have_rescale) {
    slopes = malloc((size_t)vin.shape[0] * sizeof(double));
    intercepts = malloc((size_t)vin.shape[0] * sizeof(double));
    if (!slopes || !intercepts) {
      cli_error("out of memory");
      rc = CLI_SOME_FAILED;
      goto done;
    }
    for (int64_t z = 0; z < vin.shape[0]; z++) {
      slopes[z] = rescale[0];
      intercepts[z] = rescale[1];
    }
    po.slope = slopes;
    po.intercept = intercepts;
  }
  accel_array vmk;
  if (markers_path) {
    if ((s = accel_npy_load(ctx, markers_path, &mk))) {
      cli_error("ct segment: %s", accel_last_error(ctx));
      rc = CLI_SOME_FAILED;
      goto done;
    }
    accel_buffer_view(mk, &vmk);
  }
  cli_progress bar;
  cli_progress_begin(&bar, "ct", g->progress);
  po.progress = cli_progress_callback;
  po.progress_user = &bar;
  if ((s = accel_ct_pipeline_create(ctx, &po, &pl))) {
    cli_progress_end(&bar);
    cli_error("ct segment: %s", accel_last_error(ctx));
    rc = s == ACCEL_ERR_INVALID_ARG ? CLI_USAGE : CLI_SOME_FAILED; /* the options were refused */
    goto done;
  }
  accel_ct_outputs out;
  accel_ct_outputs_init(&out, sizeof out);
  const accel_array **slots[NOUT] = {&out.solid, &out.filled, &out.pores, &out.edt, &out.markers, &out.labels};
  for (int k = 0; k < NOUT; k++) {
    if (!outs[k].path) continue;
    if ((s = accel_buffer_create(outs[k].dtype, 3, vin.shape, &outs[k].buf))) {
      cli_progress_end(&bar);
      cli_error("ct segment: %s", accel_last_error(NULL));
      rc = CLI_SOME_FAILED;
      goto done;
    }
    accel_buffer_view(outs[k].buf, &outs[k].view);
    *slots[k] = &outs[k].view;
  }
  if (network_path) out.network = &net;
  s = accel_ct_pipeline_run(pl, &vin, markers_path ? &vmk : NULL, &out);
  cli_progress_end(&bar);
  if (s) { /* the options were accepted: what is refused now is the input's content */
    cli_error("ct segment: %s", accel_last_error(ctx));
    rc = CLI_SOME_FAILED;
    goto done;
  }
  for (int k = 0; k < NOUT; k++)
    if (outs[k].path && (outs[k].format == CLI_FORMAT_RAW ? accel_raw_save(ctx, outs[k].path, &outs[k].view)
                                                          : accel_npy_save(ctx, outs[k].path, &outs[k].view))) {
      cli_error("ct segment: %s", accel_last_error(ctx));
      rc = CLI_SOME_FAILED;
    }
  if (network_path && accel_ct_network_save_json(ctx, net, network_path)) {
    cli_error("ct segment: %s", accel_last_error(ctx));
    rc = CLI_SOME_FAILED;
  }
  printf("shape\t%lld,%lld,%lld\n", (long long)vin.shape[0], (long long)vin.shape[1], (long long)vin.shape[2]);
  printf("markers\t%u\n", out.marker_count);
  if (net) {
    size_t nr, nt;
    double porosity;
    accel_ct_network_info(net, &nr, &nt, &porosity);
    printf("regions\t%zu\nthroats\t%zu\nporosity\t%.6f\n", nr, nt, porosity);
  }
done:
  accel_ct_network_destroy(net);
  accel_ct_pipeline_destroy(pl);
  accel_buffer_destroy(in);
  accel_buffer_destroy(mk);
  for (int k = 0; k < NOUT; k++) accel_buffer_destroy(outs[k].buf);
  free(slopes);
  free(intercepts);
  accel_ctx_destroy(ctx);
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
