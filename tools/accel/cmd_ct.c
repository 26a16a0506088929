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
    "\n"
    "input:\n"
    "  INPUT                  a .npy volume (uint8, int16, uint16, int32, float32), or a raw\n"
    "                         file with --shape and --dtype\n"
    "  --shape Z,Y,X          raw input: the shape (C order, little-endian)\n"
    "  --dtype D              raw input: uint8, int16, uint16, int32 or float32\n"
    "  --offset B             raw input: bytes to skip first (a header; default 0)\n"
    "  --rescale S,I          int16/uint16 input: value * S + I before the threshold\n"
    "                         (DICOM's rescale slope and intercept)\n"
    "segmentation:\n"
    "  --threshold T          required: solid = value > T\n"
    "  --compare OP           gt (default), ge, lt or le: solid = value OP T\n"
    "  --pores MODE           closed (default): fill_holes(solid) & ~solid; all: ~solid\n"
    "  --fill-connectivity C  6 (default, SciPy's) or 26\n"
    "  --spacing Z,Y,X        voxel size (default 1,1,1); distances and volumes use it\n"
    "  --min-distance D       markers: minimum peak distance in voxels (default 3)\n"
    "  --smooth SIGMA         Gaussian smoothing of the distance map for the peak search\n"
    "                         (SNOW's option; default 0, none)\n"
    "  --trim KINDS           SNOW's peak trims, PoreSpy 3's rules: saddles, nearby,\n"
    "                         saddles,nearby (or all), none (default)\n"
    "  --saddle-iterations N  the saddle trim's iteration limit (default 20)\n"
    "  --nearby-factor F      nearby trim: peaks nearer than F times their distance to\n"
    "                         the solid compete (default 1)\n"
    "  --ties RULE            skimage (default): scikit-image's order of equal markers;\n"
    "                         stable: equal markers in C order\n"
    "  --markers M.npy        use these markers (int32) instead of the peak search\n"
    "outputs (written atomically; .npy, or .raw for raw little-endian C-order values):\n"
    "  --out-solid F  --out-filled F  --out-pores F  --out-edt F  --out-markers F\n"
    "  --out-labels F\n"
    "  --network F.json       the pore network: regions, throats, porosity\n"
    "  An output whose name ends otherwise, or that would overwrite an input or another\n"
    "  output, is refused before anything runs.\n"
    "\n"
    "Prints a summary (name<TAB>value lines) on stdout. Exit status 1 when an input\n"
    "cannot be read or its content is refused (a float64 volume, markers that are not\n"
    "int32, ...) or an output cannot be written, 2 for usage errors.\n";

/* "saddles", "nearby", a comma list of them, "all" or "none". */
static bool parse_trim(const char *v, uint32_t *out) {
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

static bool parse_dtype(const char *v, accel_dtype *d) {
  static const struct {
    const char *name;
    accel_dtype d;
  } t[] = {{"uint8", ACCEL_DTYPE_U8},   {"int16", ACCEL_DTYPE_I16}, {"uint16", ACCEL_DTYPE_U16},
           {"int32", ACCEL_DTYPE_I32},  {"float32", ACCEL_DTYPE_F32}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(v, t[i].name) == 0) {
      *d = t[i].d;
      return true;
    }
  return false;
}

typedef struct outspec {
  const char *flag, *path;
  cli_format format;
  accel_dtype dtype;
  accel_buffer *buf;
  accel_array view;
} outspec;

static int segment(const cli_globals *g, int argc, char **argv) {
  const char *input = NULL, *markers_path = NULL, *network_path = NULL;
  int64_t shape[3] = {0, 0, 0};
  accel_dtype raw_dtype = ACCEL_DTYPE_INVALID;
  double rescale[2] = {0, 0};
  int64_t offset = 0;
  static const char C[] = "ct segment";
  bool have_shape = false, have_rescale = false, have_threshold = false, have_offset = false;
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  outspec outs[] = {{"--out-solid", NULL, 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-filled", NULL, 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-pores", NULL, 0, ACCEL_DTYPE_U8, NULL, {0}},
                    {"--out-edt", NULL, 0, ACCEL_DTYPE_F32, NULL, {0}},
                    {"--out-markers", NULL, 0, ACCEL_DTYPE_I32, NULL, {0}},
                    {"--out-labels", NULL, 0, ACCEL_DTYPE_I32, NULL, {0}}};
  enum { NOUT = sizeof outs / sizeof outs[0] };
  int first = argc;
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    bool missing = false, taken = false;
    if (strcmp(argv[i], "--") == 0) {
      first = i + 1;
      break;
    }
    for (int k = 0; k < NOUT && !taken; k++)
      if (cli_take_value(argc, argv, &i, outs[k].flag, &v, &missing)) {
        if (missing) return CLI_USAGE;
        outs[k].path = v;
        taken = true;
      }
    if (taken) continue;
    if (cli_take_value(argc, argv, &i, "--threshold", &v, &missing)) {
      if (missing || !cli_parse_reals(C, "--threshold", v, 1, &po.threshold)) return CLI_USAGE;
      have_threshold = true;
    } else if (cli_take_value(argc, argv, &i, "--compare", &v, &missing)) {
      if (missing) return CLI_USAGE;
      static const char *const ops[] = {"gt", "ge", "lt", "le"};
      int k = 0;
      while (k < 4 && strcmp(v, ops[k])) k++;
      if (k == 4) {
        cli_error("ct segment: --compare must be gt, ge, lt or le, not '%s'", v);
        return CLI_USAGE;
      }
      po.compare = (accel_ct_compare)k;
    } else if (cli_take_value(argc, argv, &i, "--pores", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (strcmp(v, "closed") && strcmp(v, "all")) {
        cli_error("ct segment: --pores must be closed or all, not '%s'", v);
        return CLI_USAGE;
      }
      po.pores = strcmp(v, "all") == 0 ? ACCEL_CT_PORES_ALL : ACCEL_CT_PORES_CLOSED;
    } else if (cli_take_value(argc, argv, &i, "--fill-connectivity", &v, &missing)) {
      int c = 0;
      if (missing || !cli_parse_int("ct segment", "--fill-connectivity", v, 6, 26, &c)) return CLI_USAGE;
      if (c != 6 && c != 26) {
        cli_error("ct segment: --fill-connectivity must be 6 or 26");
        return CLI_USAGE;
      }
      po.fill_connectivity = (accel_ct_connectivity)c;
    } else if (cli_take_value(argc, argv, &i, "--spacing", &v, &missing)) {
      if (missing || !cli_parse_reals(C, "--spacing", v, 3, po.spacing)) return CLI_USAGE;
      if (!(po.spacing[0] > 0 && po.spacing[1] > 0 && po.spacing[2] > 0)) {
        cli_error("%s: --spacing takes three sizes > 0, not '%s'", C, v);
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--min-distance", &v, &missing)) {
      if (missing || !cli_parse_int("ct segment", "--min-distance", v, 0, 1000, &po.min_distance)) return CLI_USAGE;
    } else if (cli_take_value(argc, argv, &i, "--smooth", &v, &missing)) {
      if (missing || !cli_parse_reals(C, "--smooth", v, 1, &po.smooth_sigma)) return CLI_USAGE;
      if (po.smooth_sigma < 0) {
        cli_error("%s: --smooth takes a sigma >= 0, not '%s'", C, v);
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--trim", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (!parse_trim(v, &po.trim)) {
        cli_error("ct segment: --trim takes saddles, nearby, saddles,nearby, all or none, not '%s'", v);
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--saddle-iterations", &v, &missing)) {
      if (missing || !cli_parse_int("ct segment", "--saddle-iterations", v, 1, 100000, &po.saddle_iterations))
        return CLI_USAGE;
    } else if (cli_take_value(argc, argv, &i, "--nearby-factor", &v, &missing)) {
      if (missing || !cli_parse_reals(C, "--nearby-factor", v, 1, &po.nearby_factor)) return CLI_USAGE;
      if (po.nearby_factor < 0) {
        cli_error("%s: --nearby-factor takes a number >= 0, not '%s'", C, v);
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--ties", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (strcmp(v, "skimage") && strcmp(v, "stable")) {
        cli_error("ct segment: --ties must be skimage or stable, not '%s'", v);
        return CLI_USAGE;
      }
      po.ties = strcmp(v, "stable") == 0 ? ACCEL_CT_TIES_STABLE : ACCEL_CT_TIES_SKIMAGE;
    } else if (cli_take_value(argc, argv, &i, "--markers", &v, &missing)) {
      if (missing) return CLI_USAGE;
      markers_path = v;
    } else if (cli_take_value(argc, argv, &i, "--network", &v, &missing)) {
      if (missing) return CLI_USAGE;
      network_path = v;
    } else if (cli_take_value(argc, argv, &i, "--shape", &v, &missing)) {
      if (missing || !cli_parse_ints(C, "--shape", v, 3, 1, INT64_MAX, shape)) return CLI_USAGE;
      have_shape = true;
    } else if (cli_take_value(argc, argv, &i, "--dtype", &v, &missing)) {
      if (missing || !parse_dtype(v, &raw_dtype)) {
        if (!missing) cli_error("ct segment: --dtype must be uint8, int16, uint16, int32 or float32, not '%s'", v);
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--offset", &v, &missing)) {
      if (missing || !cli_parse_ints(C, "--offset", v, 1, 0, INT64_MAX, &offset)) return CLI_USAGE;
      have_offset = true;
    } else if (cli_take_value(argc, argv, &i, "--rescale", &v, &missing)) {
      if (missing || !cli_parse_reals(C, "--rescale (SLOPE,INTERCEPT)", v, 2, rescale)) return CLI_USAGE;
      have_rescale = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("ct segment: unknown option '%s' (see accel ct --help)", argv[i]);
      return CLI_USAGE;
    } else {
      first = i;
      break;
    }
  }
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

static int run(const cli_globals *g, int argc, char **argv) {
  if (argc < 2) {
    cli_error("ct: segment? (see accel ct --help)");
    return CLI_USAGE;
  }
  if (strcmp(argv[1], "segment") != 0) {
    cli_error("ct: unknown subcommand '%s' (segment)", argv[1]);
    return CLI_USAGE;
  }
  static const char *const values[] = {"--shape", "--dtype", "--offset", "--rescale", "--threshold", "--compare",
                                       "--pores", "--fill-connectivity", "--spacing", "--min-distance", "--smooth",
                                       "--trim", "--saddle-iterations", "--nearby-factor", "--ties", "--markers", "--out-solid", "--out-filled", "--out-pores",
                                       "--out-edt", "--out-markers", "--out-labels", "--network", NULL};
  int pargc;
  char **pargv = cli_permute(argc - 1, argv + 1, values, &pargc);
  if (!pargv) {
    cli_error("out of memory");
    return CLI_USAGE;
  }
  int rc = segment(g, pargc, pargv);
  free(pargv);
  return rc;
}

const cli_command cli_ct_command = {"ct", "CT pore segmentation: fill, distance map, watershed, network", USAGE, run,
                                    NULL};
