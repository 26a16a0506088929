/* accel hash: perceptual hashes of image files, imagehash's hex strings. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] hash [--kinds K1,K2,...] [--size N] [--binbits B] [--highfreq F]\n"
    "                                   [--whash-scale S] [--whash-keep-ll] [--whash-mode haar|db4]\n"
    "                                   [--fast] [--jobs N] [--format tsv|json] [--follow-links]\n"
    "                                   [--files-from F [-0]] PATH...|-\n"
    "\n"
    "Perceptual hashes identical to Python's imagehash (4.3.2 on Pillow 9.4):\n"
    "each file is decoded once and every kind is computed from that decode.\n"
    "A directory PATH is walked recursively for .jpg, .jpeg and .png files (any case).\n"
    "\n";

static const char USAGE_TAIL[] =
    "\n"
    "A file that cannot be hashed gets error:<status> in its columns (TSV) or an \"error\"\n"
    "member (JSON, with its \"message\"), a message on stderr, and makes the exit\n"
    "status 1.\n";

typedef struct hash_args {
  accel_hash_options hash;
  cli_list_args list;
  int jobs;
  bool follow, json;
} hash_args;

static const cli_choice WHASH_MODES[] = {{"haar", ACCEL_HASH_WHASH_HAAR}, {"db4", ACCEL_HASH_WHASH_DB4}, {NULL, 0}};

static const cli_option OPTIONS[] = {
    {.name = "--kinds",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(hash_args, hash),
     .parse = cli_parse_kinds,
     .arg = "LIST",
     .help = "any of ahash, dhash, dhash_vertical, phash, whash, colorhash\n"
             "(default ahash,dhash,phash,whash); columns come in this order"},
    {.name = "--size",
     .kind = CLI_OPT_INT,
     CLI_AT(hash_args, hash.hash_size),
     .lo = ACCEL_HASH_SIZE_MIN,
     .hi = ACCEL_HASH_SIZE_MAX,
     .arg = "N",
     .help = "hash_size (default 8; 16 gives 256-bit hashes; whash needs a power of 2)"},
    {.name = "--binbits",
     .kind = CLI_OPT_INT,
     CLI_AT(hash_args, hash.color_binbits),
     .lo = 1,
     .hi = 24,
     .arg = "B",
     .help = "colorhash's binbits, 1..24 (default 3)"},
    {.name = "--highfreq",
     .kind = CLI_OPT_INT,
     CLI_AT(hash_args, hash.phash_highfreq_factor),
     .lo = 1,
     .hi = ACCEL_HASH_HIGHFREQ_MAX,
     .arg = "F",
     .help = "phash's highfreq_factor, 1..16 (default 4): the DCT of a size*F square"},
    {.name = "--whash-scale",
     .kind = CLI_OPT_INT,
     CLI_AT(hash_args, hash.whash_image_scale),
     .lo = 1,
     .hi = 1 << 16,
     .arg = "S",
     .help = "whash's image_scale: a power of two, at least --size (default: the\n"
             "image's own, the largest power of two not above its smaller side)"},
    {.name = "--whash-keep-ll",
     .kind = CLI_OPT_FLAG,
     CLI_AT(hash_args, hash.whash_keep_max_ll),
     .help = "keep whash's coarsest Haar approximation (imagehash's remove_max_haar_ll=False)"},
    {.name = "--whash-mode",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(hash_args, hash.whash_mode),
     .choices = WHASH_MODES,
     .arg = "M",
     .help = "whash's wavelets: haar (default) or db4 ((size + 6)^2-bit hashes, where\n"
             "the image_scale is at least 8 x size; on the CPU)"},
    {.name = "--fast",
     .kind = CLI_OPT_FLAG,
     CLI_AT(hash_args, hash.fast),
     .help = "decode large JPEGs at a reduced DCT scale (Pillow's draft()): much\n"
             "faster, not bit-exact (see docs/hash.md for the measured agreement)"},
    {.name = "--jobs",
     .kind = CLI_OPT_INT,
     CLI_AT(hash_args, jobs),
     .lo = 0,
     .hi = ACCEL_CPU_THREADS_MAX,
     .arg = "N",
     .help = "worker threads (default: the global --threads, else all cores)"},
    {.name = "--follow-links",
     .kind = CLI_OPT_FLAG,
     CLI_AT(hash_args, follow),
     .help = "also enter symbolic links to directories (each file is hashed once)"},
    {.name = "--format",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(hash_args, json),
     .choices = cli_tsv_json,
     .arg = "F",
     .help = "tsv (default): a header 'path' + one column per kind, then one line\n"
             "per file with imagehash's hex (paths escaped: \\\\ \\t \\n \\r);\n"
             "json: an array of objects"},
    CLI_LIST_OPTIONS(hash_args, list),
    {0}};

/* What a run prints, and how. */
typedef struct printer {
  const accel_hash_options *o;
  char **messages; /* of the files of the chunk that failed */
  bool json;
  size_t slot, printed;
  uint32_t nbits[ACCEL_HASH_KIND_COUNT];
} printer;

/* TSV: the header; JSON: the opening bracket. */
static void print_start(printer *p) {
  for (uint32_t k = 0; k < p->o->nkinds; k++) accel_hash_kind_bits(p->o, p->o->kinds[k], &p->nbits[k]);
  if (p->json) {
    cli_json_begin();
    printf("[");
    return;
  }
  printf("path");
  for (uint32_t k = 0; k < p->o->nkinds; k++) printf("\t%s", accel_hash_kind_name(p->o->kinds[k]));
  printf("\n");
}

/* One file: a TSV line, or a JSON object; its hashes (one slot a kind), or its error. */
static void print_file(printer *p, const char *path, accel_status st, const char *message, const uint8_t *hashes) {
  if (p->json) {
    printf("%s\n  {\"path\": ", p->printed++ ? "," : "");
    cli_json_string(path);
    if (st != ACCEL_OK) {
      printf(", \"error\": \"%s\", \"message\": ", accel_status_string(st));
      cli_json_string(*message ? message : accel_status_string(st));
      printf("}");
    }
  } else {
    cli_tsv_field(path);
  }
  for (uint32_t k = 0; k < p->o->nkinds; k++) {
    char hex[ACCEL_HASH_MAX_BYTES * 2 + 2];
    if (st != ACCEL_OK) {
      if (!p->json) printf("\terror:%s", accel_status_string(st));
      continue;
    }
    accel_hash_to_hex(hashes + k * p->slot, p->nbits[k], hex, sizeof hex);
    if (p->json) printf(", \"%s\": \"%s\"", accel_hash_kind_name(p->o->kinds[k]), hex);
    else printf("\t%s", hex);
  }
  if (p->json && st == ACCEL_OK) printf("}");
  if (!p->json) printf("\n");
}

/* The messages of a chunk's failed files, kept for the JSON report. */
typedef struct hash_errors {
  cli_file_errors base;
  char **messages; /* CHUNK of them, NULL where none */
} hash_errors;

static void on_file_error(void *user, size_t index, accel_status status, const char *message) {
  hash_errors *e = user;
  cli_file_error(&e->base, index, status, message);
  free(e->messages[index]);
  e->messages[index] = strdup(message);
}

/* Hash the files in chunks and print them, each chunk as soon as it is done. */
static int hash_files(const cli_globals *g, accel_ctx *ctx, const cli_paths *paths, accel_hash_options *o, printer *p) {
  enum { CHUNK = 512 };
  print_start(p);
  uint8_t *hashes = malloc((size_t)CHUNK * o->nkinds * p->slot);
  accel_status *st = malloc(sizeof(accel_status) * CHUNK);
  hash_errors errors = {{NULL, paths->v}, calloc(CHUNK, sizeof(char *))};
  if (!hashes || !st || !errors.messages) {
    cli_error("out of memory");
    free(hashes);
    free(st);
    free(errors.messages);
    return CLI_USAGE;
  }
  o->on_error = on_file_error;
  o->error_user = &errors;
  int rc = CLI_OK;
  cli_progress bar;
  for (size_t off = 0; off < paths->n; off += CHUNK) {
    const size_t n = paths->n - off < CHUNK ? paths->n - off : CHUNK;
    errors.base.paths = paths->v + off;
    cli_progress_begin(&bar, "hash", g->progress);
    cli_progress_update(&bar, (double)off / (double)paths->n, paths->v[off]);
    const accel_status s = accel_hash_files(ctx, (const char *const *)paths->v + off, n, o, hashes, p->slot, st);
    cli_progress_end(&bar); /* print results without a bar in between */
    if (s) {
      cli_error("hash: %s: %s", accel_status_string(s), accel_last_error(ctx));
      rc = s == ACCEL_ERR_INVALID_ARG ? CLI_USAGE : CLI_SOME_FAILED;
      break;
    }
    for (size_t i = 0; i < n; i++) {
      if (st[i] != ACCEL_OK) rc = CLI_SOME_FAILED;
      print_file(p, paths->v[off + i], st[i], errors.messages[i] ? errors.messages[i] : "",
                 hashes + i * o->nkinds * p->slot);
      free(errors.messages[i]);
      errors.messages[i] = NULL;
    }
    cli_flush_stdout();
  }
  if (p->json) printf("%s]\n", p->printed ? "\n" : "");
  for (size_t i = 0; i < CHUNK; i++) free(errors.messages[i]);
  free(errors.messages);
  free(hashes);
  free(st);
  return rc;
}

static int run(const cli_globals *g, int argc, char **argv) {
  hash_args a = {.jobs = g->threads};
  accel_hash_options_init(&a.hash, sizeof a.hash);
  const int first = cli_parse_options("hash", OPTIONS, argc, argv, &a);
  if (first < 0 || !cli_has_paths("hash", first, argc, &a.list)) return CLI_USAGE;
  printer p = {.o = &a.hash, .json = a.json};
  if (accel_hash_slot_bytes(&a.hash, &p.slot)) { /* checks sizes against kinds (whash: power of two) */
    cli_error("hash: %s", accel_last_error(NULL));
    return CLI_USAGE;
  }
  cli_paths paths = {0};
  int rc = cli_collect_lists("hash", argc - first, argv + first, &a.list, a.follow, &paths);
  if (rc == CLI_USAGE) return rc;
  cli_globals gj = *g;
  gj.threads = a.jobs;
  accel_ctx *ctx = NULL;
  int r = cli_open_ctx(&gj, &ctx);
  if (!r) r = hash_files(g, ctx, &paths, &a.hash, &p);
  if (r) rc = r;
  cli_paths_free(&paths);
  accel_ctx_destroy(ctx);
  return rc;
}

const cli_command cli_hash_command = {.name = "hash",
                                      .summary = "perceptual hashes of images, identical to imagehash",
                                      .usage = USAGE,
                                      .options = OPTIONS,
                                      .help_column = 16,
                                      .usage_tail = USAGE_TAIL,
                                      .run = run,
                                      .json_native = true};
