/* accel hash: perceptual hashes of image files, imagehash's hex strings. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] hash [--kinds K1,K2,...] [--size N] [--binbits B] [--fast]\n"
    "                                   [--jobs N] [--format tsv|json] [--follow-links] PATH...\n"
    "\n"
    "Perceptual hashes identical to Python's imagehash (4.3.2 on Pillow 9.4):\n"
    "each file is decoded once and every kind is computed from that decode.\n"
    "A directory PATH is walked recursively for .jpg, .jpeg and .png files (any case).\n"
    "\n"
    "  --kinds LIST    any of ahash, dhash, dhash_vertical, phash, whash, colorhash\n"
    "                  (default ahash,dhash,phash,whash); columns come in this order\n"
    "  --size N        hash_size (default 8; 16 gives 256-bit hashes; whash needs a power of 2)\n"
    "  --binbits B     colorhash's binbits (default 3)\n"
    "  --fast          decode large JPEGs at a reduced DCT scale (Pillow's draft()): much\n"
    "                  faster, not bit-exact (see docs/hash.md for the measured agreement)\n"
    "  --jobs N        worker threads (default: the global --threads, else all cores)\n"
    "  --follow-links  also enter symbolic links to directories (each file is hashed once)\n"
    "  --format F      tsv (default): a header 'path' + one column per kind, then one line\n"
    "                  per file with imagehash's hex; json: an array of objects\n"
    "\n"
    "A file that cannot be hashed gets error:<status> in its columns (TSV) or an \"error\"\n"
    "member (JSON), a message on stderr, and makes the exit status 1.\n";

typedef struct err_sink {
  const char *const *paths;
  size_t offset;
} err_sink;

static void on_error(void *user, size_t index, accel_status status, const char *message) {
  err_sink *e = user;
  cli_error("%s: %s: %s", e->paths[e->offset + index], accel_status_string(status), message);
}

static int run(const cli_globals *g, int argc, char **argv) {
  accel_hash_options o;
  accel_hash_options_init(&o, sizeof o);
  bool json = false;
  int jobs = g->threads, first = argc;
  bool follow = false;
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    bool missing = false;
    int h = 0;
    if (strcmp(argv[i], "--") == 0) {
      first = i + 1;
      break;
    } else if (strcmp(argv[i], "--follow-links") == 0) {
      follow = true;
    } else if ((h = cli_hash_option("hash", argc, argv, &i, &o, ACCEL_HASH_SIZE_MAX))) {
      if (h < 0) return CLI_USAGE;
    } else if (cli_take_value(argc, argv, &i, "--jobs", &v, &missing)) {
      if (missing || !cli_parse_int("hash", "--jobs", v, 0, ACCEL_CPU_THREADS_MAX, &jobs)) return CLI_USAGE;
    } else if (cli_take_value(argc, argv, &i, "--format", &v, &missing)) {
      if (missing || !cli_parse_format("hash", v, &json)) return CLI_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("hash: unknown option '%s' (see accel hash --help)", argv[i]);
      return CLI_USAGE;
    } else {
      first = i;
      break;
    }
  }
  if (first >= argc) {
    cli_error("hash: no PATH given (see accel hash --help)");
    return CLI_USAGE;
  }
  size_t slot;
  if (accel_hash_slot_bytes(&o, &slot)) { /* checks sizes against kinds (whash: power of two) */
    cli_error("hash: %s", accel_last_error(NULL));
    return CLI_USAGE;
  }

  cli_paths paths = {0};
  int rc = CLI_OK;
  bool oom;
  if (!cli_collect(argc - first, argv + first, follow, &paths, &oom)) {
    if (oom) {
      cli_error("out of memory");
      cli_paths_free(&paths);
      return CLI_USAGE;
    }
    rc = CLI_SOME_FAILED;
  }

  cli_globals gj = *g;
  gj.threads = jobs;
  accel_ctx *ctx = NULL;
  int r = cli_open_ctx(&gj, &ctx);
  if (r) return r;

  uint32_t nbits[ACCEL_HASH_KIND_COUNT];
  for (uint32_t k = 0; k < o.nkinds; k++) accel_hash_bits(o.kinds[k], o.hash_size, o.color_binbits, &nbits[k]);
  if (json) {
    printf("[");
  } else {
    printf("path");
    for (uint32_t k = 0; k < o.nkinds; k++) printf("\t%s", accel_hash_kind_name(o.kinds[k]));
    printf("\n");
  }

  enum { CHUNK = 512 };
  uint8_t *hashes = malloc((size_t)CHUNK * o.nkinds * slot);
  accel_status *st = malloc(sizeof(accel_status) * CHUNK);
  if (!hashes || !st) {
    cli_error("out of memory");
    free(hashes);
    free(st);
    accel_ctx_destroy(ctx);
    return CLI_USAGE;
  }
  cli_progress bar;
  cli_progress_begin(&bar, "hash", g->progress);
  err_sink es = {(const char *const *)paths.v, 0};
  o.on_error = on_error;
  o.error_user = &es;
  size_t printed = 0;
  for (size_t off = 0; off < paths.n; off += CHUNK) {
    size_t n = paths.n - off < CHUNK ? paths.n - off : CHUNK;
    es.offset = off;
    cli_progress_update(&bar, (double)off / (double)paths.n, paths.v[off]);
    accel_status s = accel_hash_files(ctx, (const char *const *)paths.v + off, n, &o, hashes, slot, st);
    if (s) {
      cli_error("hash: %s: %s", accel_status_string(s), accel_last_error(ctx));
      rc = s == ACCEL_ERR_INVALID_ARG ? CLI_USAGE : CLI_SOME_FAILED;
      break;
    }
    cli_progress_end(&bar); /* print results without a bar in between */
    for (size_t i = 0; i < n; i++) {
      const char *path = paths.v[off + i];
      if (st[i] != ACCEL_OK) rc = CLI_SOME_FAILED;
      if (json) {
        printf("%s\n  {\"path\": ", printed++ ? "," : "");
        cli_json_string(path);
        if (st[i] != ACCEL_OK) printf(", \"error\": \"%s\"}", accel_status_string(st[i]));
      } else {
        fputs(path, stdout);
      }
      for (uint32_t k = 0; k < o.nkinds; k++) {
        char hex[ACCEL_HASH_MAX_BYTES * 2 + 2];
        if (st[i] != ACCEL_OK) {
          if (!json) printf("\terror:%s", accel_status_string(st[i]));
          continue;
        }
        accel_hash_to_hex(hashes + (i * o.nkinds + k) * slot, nbits[k], hex, sizeof hex);
        if (json) printf(", \"%s\": \"%s\"", accel_hash_kind_name(o.kinds[k]), hex);
        else printf("\t%s", hex);
      }
      if (json && st[i] == ACCEL_OK) printf("}");
      if (!json) printf("\n");
    }
    cli_flush_stdout();
    cli_progress_begin(&bar, "hash", g->progress);
  }
  cli_progress_end(&bar);
  if (json) printf("%s]\n", printed ? "\n" : "");
  free(hashes);
  free(st);
  cli_paths_free(&paths);
  accel_ctx_destroy(ctx);
  return rc;
}

static const char *const VALUE_OPTIONS[] = {"--kinds", "--size", "--binbits", "--jobs", "--format", NULL};

const cli_command cli_hash_command = {"hash", "perceptual hashes of images, identical to imagehash", USAGE, run,
                                      VALUE_OPTIONS};
