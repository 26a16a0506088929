/* accel index: keep a catalog's hashes in an index file and query it. */
#include "catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] index build FILE [--kinds K1,K2,...] [--size N] [--binbits B]\n"
    "                                            [--fast] [--follow-links] PATH...\n"
    "       accel [global options] index query FILE [--threshold T] [--rule all|any]\n"
    "                                            [--k K] [--by KIND] [--format tsv|json]\n"
    "                                            [--follow-links] PATH...\n"
    "       accel [global options] index info FILE\n"
    "\n"
    "build   hash the images under PATH into FILE (created, or updated: entries of files\n"
    "        with the same size and modification time are reused, files no longer given\n"
    "        are dropped). Kinds default to the file's when it exists, else dhash,ahash;\n"
    "        the file is the one `accel dupes --index FILE` reads.\n"
    "query   hash the images PATH (the queries) as the index's were hashed and print\n"
    "        every entry within the threshold (default 5; one value, or one per kind)\n"
    "        by the rule (all: every kind within, any: at least one):\n"
    "          TSV 'query<TAB>path<TAB><kind>...' with the distance of each kind;\n"
    "        or, with --k K, the K nearest entries by the distance of one kind (--by,\n"
    "        default the first), ties by insertion order:\n"
    "          TSV 'query<TAB>rank<TAB>path<TAB>distance'.\n"
    "info    entries, bits and the hash options of FILE.\n"
    "\n"
    "Directories are walked recursively; symbolic links to directories only with\n"
    "--follow-links; each file counts once, whatever the names that lead to it.\n"
    "\n"
    "Files that cannot be hashed are reported on stderr and make the exit status 1.\n";

/* The hash options an index file was built with. */
static bool file_options(accel_ctx *ctx, const char *file, accel_index **ix, accel_hash_options *o) {
  if (accel_index_load(ctx, file, ix)) {
    cli_error("index: %s", accel_last_error(ctx));
    return false;
  }
  const char *meta = "";
  accel_index_get_meta(*ix, &meta);
  if (!catalog_parse_meta(meta, o)) {
    cli_error("index: %s is not an index of image hashes (meta '%s')", file, meta);
    accel_index_destroy(*ix);
    *ix = NULL;
    return false;
  }
  if (!catalog_fits(*ix, o)) {
    uint32_t bits = 0, nfields = 0;
    accel_index_info(*ix, &bits, &nfields, NULL);
    cli_error("index: %s is corrupt: its metadata ('%s') does not describe its %u fields of %u bits", file, meta,
              nfields, bits);
    accel_index_destroy(*ix);
    *ix = NULL;
    return false;
  }
  return true;
}

typedef struct build_args {
  catalog_options co;
  bool given, follow;
} build_args;

static const cli_option BUILD_OPTIONS[] = {
    {.name = "--kinds", .kind = CLI_OPT_CUSTOM, CLI_AT(build_args, co.hash), CLI_SEEN(build_args, given),
     .parse = cli_parse_kinds},
    {.name = "--size", .kind = CLI_OPT_INT, CLI_AT(build_args, co.hash.hash_size), CLI_SEEN(build_args, given),
     .lo = ACCEL_HASH_SIZE_MIN, .hi = 16},
    {.name = "--binbits", .kind = CLI_OPT_INT, CLI_AT(build_args, co.hash.color_binbits), CLI_SEEN(build_args, given),
     .lo = 1, .hi = 8},
    {.name = "--fast", .kind = CLI_OPT_FLAG, CLI_AT(build_args, co.hash.fast), CLI_SEEN(build_args, given)},
    {.name = "--follow-links", .kind = CLI_OPT_FLAG, CLI_AT(build_args, follow)},
    {0}};

static int cmd_build(const cli_globals *g, int argc, char **argv) {
  build_args a = {.co.cmd = "index build"};
  accel_hash_options_init(&a.co.hash, sizeof a.co.hash);
  a.co.hash.nkinds = 2;
  a.co.hash.kinds[0] = ACCEL_HASH_DHASH;
  a.co.hash.kinds[1] = ACCEL_HASH_AHASH;
  int first = cli_parse_options("index build", BUILD_OPTIONS, argc, argv, &a);
  if (first < 0) return CLI_USAGE;
  catalog_options co = a.co;
  const bool given = a.given, follow = a.follow;
  if (first >= argc) {
    cli_error("index build: no FILE given (see accel index --help)");
    return CLI_USAGE;
  }
  co.index_path = argv[first++];
  if (first >= argc) {
    cli_error("index build: no PATH given (see accel index --help)");
    return CLI_USAGE;
  }
  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  if (!given) { /* keep an existing file's hashes */
    FILE *f = fopen(co.index_path, "rb");
    if (f) {
      fclose(f);
      accel_index *old = NULL;
      accel_hash_options fo;
      if (!file_options(ctx, co.index_path, &old, &fo)) {
        accel_ctx_destroy(ctx);
        return CLI_SOME_FAILED; /* the index file was refused */
      }
      co.hash = fo;
      accel_index_destroy(old);
    }
  }
  cli_paths paths = {0};
  bool oom;
  rc = cli_collect(argc - first, argv + first, follow, &paths, &oom) ? CLI_OK : CLI_SOME_FAILED;
  if (oom) {
    cli_error("out of memory");
    cli_paths_free(&paths);
    accel_ctx_destroy(ctx);
    return CLI_USAGE;
  }
  accel_index *ix = NULL;
  catalog_stats st;
  int r = catalog_build(g, ctx, &co, &paths, &ix, &st);
  cli_paths_free(&paths);
  if (r) rc = r;
  if (ix) {
    size_t n = 0;
    accel_index_info(ix, NULL, NULL, &n);
    fprintf(stderr, "accel: index build: %s: %zu entries (%zu reused, %zu hashed, %zu dropped, %zu failed)\n",
            co.index_path, n, st.reused, st.hashed, st.removed, st.failed);
  }
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  return rc;
}

typedef struct err_sink {
  char **paths;
} err_sink;

static void on_error(void *user, size_t index, accel_status status, const char *message) {
  cli_error("index query: %s: %s: %s", ((err_sink *)user)->paths[index], accel_status_string(status), message);
}

typedef struct row {
  uint64_t query;
  const char *path;
  size_t at;
} row;

static int cmp_row(const void *a, const void *b) {
  const row *x = a, *y = b;
  if (x->query != y->query) return x->query < y->query ? -1 : 1;
  return strcmp(x->path, y->path);
}

typedef struct query_args {
  const char *by;
  accel_search_options so;
  cli_thresholds th;
  int k;
  bool json, follow;
} query_args;

static const cli_option QUERY_OPTIONS[] = {
    {.name = "--threshold", .kind = CLI_OPT_CUSTOM, CLI_AT(query_args, th), .parse = cli_parse_thresholds},
    {.name = "--rule", .kind = CLI_OPT_CHOICE, CLI_AT(query_args, so.rule), .choices = cli_rules},
    {.name = "--k", .kind = CLI_OPT_INT, CLI_AT(query_args, k), .lo = 1, .hi = 4096},
    {.name = "--by", .kind = CLI_OPT_STRING, CLI_AT(query_args, by)},
    {.name = "--format", .kind = CLI_OPT_CHOICE, CLI_AT(query_args, json), .choices = cli_tsv_json},
    {.name = "--follow-links", .kind = CLI_OPT_FLAG, CLI_AT(query_args, follow)},
    {0}};

static int cmd_query(const cli_globals *g, int argc, char **argv) {
  query_args a = {.th = {.v = {5}, .n = 1}};
  accel_search_options_init(&a.so, sizeof a.so);
  int first = cli_parse_options("index query", QUERY_OPTIONS, argc, argv, &a);
  if (first < 0) return CLI_USAGE;
  const char *file = NULL, *by = a.by;
  accel_search_options so = a.so;
  const uint32_t *th = a.th.v, nth = a.th.n;
  const int k = a.k;
  const bool json = a.json, follow = a.follow;
  if (first >= argc) {
    cli_error("index query: no FILE given (see accel index --help)");
    return CLI_USAGE;
  }
  file = argv[first++];
  if (first >= argc) {
    cli_error("index query: no PATH given (see accel index --help)");
    return CLI_USAGE;
  }
  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  accel_index *ix = NULL;
  accel_hash_options ho;
  if (!file_options(ctx, file, &ix, &ho)) {
    accel_ctx_destroy(ctx);
    return CLI_SOME_FAILED; /* the index file was refused */
  }
  uint32_t bits = 0, by_field = 0;
  accel_index_info(ix, &bits, NULL, NULL);
  rc = CLI_OK;
  if (nth != 1 && nth != ho.nkinds) {
    cli_error("index query: %u thresholds for the index's %u kinds", nth, ho.nkinds);
    rc = CLI_USAGE;
  }
  for (uint32_t f = 0; f < ho.nkinds; f++) so.thresholds[f] = th[nth == 1 ? 0 : f];
  if (by) {
    accel_hash_kind kind;
    bool found = false;
    if (accel_hash_kind_from_string(by, &kind) == ACCEL_OK)
      for (uint32_t f = 0; f < ho.nkinds && !found; f++)
        if (ho.kinds[f] == kind) {
          by_field = f;
          found = true;
        }
    if (!found) {
      cli_error("index query: --by %s: not a kind of this index", by);
      rc = CLI_USAGE;
    }
  }
  cli_paths q = {0};
  bool oom = false;
  if (!rc && !cli_collect(argc - first, argv + first, follow, &q, &oom)) rc = oom ? CLI_USAGE : CLI_SOME_FAILED;
  size_t slot = 0;
  accel_hash_slot_bytes(&ho, &slot);
  const uint32_t wpe = ho.nkinds * bits / 64;
  uint8_t *hashes = malloc((q.n ? q.n : 1) * ho.nkinds * slot);
  accel_status *st = malloc((q.n ? q.n : 1) * sizeof(accel_status));
  uint64_t *codes = malloc((q.n ? q.n : 1) * wpe * sizeof(uint64_t));
  size_t *qmap = malloc((q.n ? q.n : 1) * sizeof(size_t)); /* query row -> path */
  size_t nq = 0;
  if (rc != CLI_USAGE && (!hashes || !st || !codes || !qmap)) {
    cli_error("out of memory");
    rc = CLI_USAGE;
  }
  if (rc != CLI_USAGE) {
    err_sink es = {q.v};
    ho.on_error = on_error;
    ho.error_user = &es;
    if (accel_hash_files(ctx, (const char *const *)q.v, q.n, &ho, hashes, slot, st)) {
      cli_error("index query: %s", accel_last_error(ctx));
      rc = CLI_USAGE;
    }
  }
  if (rc != CLI_USAGE) {
    for (size_t i = 0; i < q.n; i++) {
      if (st[i] != ACCEL_OK) {
        rc = CLI_SOME_FAILED;
        continue;
      }
      catalog_codes(hashes + i * ho.nkinds * slot, slot, ho.nkinds, bits, codes + nq * wpe);
      qmap[nq++] = i;
    }
    if (k > 0) {
      uint64_t *ids = malloc((nq ? nq : 1) * (size_t)k * sizeof(uint64_t));
      uint32_t *dist = malloc((nq ? nq : 1) * (size_t)k * sizeof(uint32_t));
      if (!ids || !dist || accel_index_knn(ix, nq, codes, (uint32_t)k, by_field, ids, dist)) {
        cli_error("index query: %s", ids && dist ? accel_last_error(ctx) : "out of memory");
        rc = ids && dist ? CLI_SOME_FAILED : CLI_USAGE;
      } else {
        const char *kname = accel_hash_kind_name(ho.kinds[by_field]);
        if (json) printf("[");
        else printf("query\trank\tpath\t%s\n", kname);
        size_t printed = 0;
        for (size_t i = 0; i < nq; i++)
          for (int r = 0; r < k; r++) {
            const size_t at = i * (size_t)k + (size_t)r;
            if (ids[at] == UINT64_MAX) break;
            const char *path = catalog_label(ix, ids[at]);
            if (json) {
              printf("%s\n  {\"query\": ", printed++ ? "," : "");
              cli_json_string(q.v[qmap[i]]);
              printf(", \"rank\": %d, \"path\": ", r + 1);
              cli_json_string(path);
              printf(", \"%s\": %u}", kname, dist[at]);
            } else {
              printf("%s\t%d\t%s\t%u\n", q.v[qmap[i]], r + 1, path, dist[at]);
            }
          }
        if (json) printf("%s]\n", printed ? "\n" : "");
      }
      free(ids);
      free(dist);
    } else {
      accel_pairs *p = NULL;
      if (accel_index_range(ix, nq, codes, &so, &p)) {
        cli_error("index query: %s", accel_last_error(ctx));
        rc = CLI_SOME_FAILED;
      } else {
        size_t n;
        const uint64_t *qi, *id;
        const uint32_t *d;
        uint32_t nf;
        accel_pairs_view(p, &n, &qi, &id, &d, &nf);
        if (json) {
          printf("[");
        } else {
          printf("query\tpath");
          for (uint32_t f = 0; f < ho.nkinds; f++) printf("\t%s", accel_hash_kind_name(ho.kinds[f]));
          printf("\n");
        }
        /* within a query, entries by path */
        row *rows = malloc((n ? n : 1) * sizeof *rows);
        for (size_t i = 0; rows && i < n; i++) rows[i] = (row){qi[i], catalog_label(ix, id[i]), i};
        if (rows && n) qsort(rows, n, sizeof *rows, cmp_row);
        if (!rows) {
          cli_error("out of memory");
          rc = CLI_USAGE;
          n = 0;
        }
        for (size_t r = 0; r < n; r++) {
          const size_t i = rows[r].at;
          const char *query = q.v[qmap[qi[i]]], *path = rows[r].path;
          if (json) {
            printf("%s\n  {\"query\": ", r ? "," : "");
            cli_json_string(query);
            printf(", \"path\": ");
            cli_json_string(path);
            printf(", \"distances\": {");
            for (uint32_t f = 0; f < nf; f++)
              printf("%s\"%s\": %u", f ? ", " : "", accel_hash_kind_name(ho.kinds[f]), d[i * nf + f]);
            printf("}}");
          } else {
            printf("%s\t%s", query, path);
            for (uint32_t f = 0; f < nf; f++) printf("\t%u", d[i * nf + f]);
            printf("\n");
          }
        }
        if (json) printf("%s]\n", n ? "\n" : "");
        free(rows);
      }
      accel_pairs_destroy(p);
    }
  }
  free(hashes);
  free(st);
  free(codes);
  free(qmap);
  cli_paths_free(&q);
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  return rc;
}

static int cmd_info(const cli_globals *g, int argc, char **argv) {
  /* argv: "info", "--", FILE */
  if (argc != 3 || strcmp(argv[1], "--")) {
    cli_error("index info: give exactly one FILE and no options (see accel index --help)");
    return CLI_USAGE;
  }
  argv++;
  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  accel_index *ix = NULL;
  accel_hash_options ho;
  if (!file_options(ctx, argv[1], &ix, &ho)) {
    accel_ctx_destroy(ctx);
    return CLI_SOME_FAILED; /* the index file was refused */
  }
  uint32_t bits, nf;
  size_t n;
  accel_index_info(ix, &bits, &nf, &n);
  printf("entries\t%zu\nbits\t%u\nkinds\t", n, bits);
  for (uint32_t f = 0; f < ho.nkinds; f++) printf("%s%s", f ? "," : "", accel_hash_kind_name(ho.kinds[f]));
  printf("\nsize\t%d\nbinbits\t%d\nfast\t%d\n", (int)ho.hash_size, (int)ho.color_binbits, (int)ho.fast);
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  return CLI_OK;
}

static const cli_option NO_OPTIONS[] = {{0}};

static const cli_command BUILD = {.name = "build", .options = BUILD_OPTIONS, .run = cmd_build};
static const cli_command QUERY = {.name = "query", .options = QUERY_OPTIONS, .run = cmd_query};
static const cli_command INFO = {.name = "info", .options = NO_OPTIONS, .run = cmd_info};
static const cli_command *const SUBCOMMANDS[] = {&BUILD, &QUERY, &INFO, NULL};

const cli_command cli_index_command = {.name = "index",
                                       .summary = "keep image hashes in an index file; query it",
                                       .usage = USAGE,
                                       .subcommands = SUBCOMMANDS};
