/* accel index: keep a catalog's hashes in an index file and query it. */
#include "catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] index build FILE [--kinds K1,K2,...] [--size N] [--binbits B]\n"
    "                                            [--fast] [--follow-links] [--files-from F [-0]]\n"
    "                                            [--format tsv|json] PATH...|-\n"
    "       accel [global options] index query FILE [--threshold T] [--rule all|any]\n"
    "                                            [--k K] [--by KIND] [--format tsv|json]\n"
    "                                            [--follow-links] [--files-from F [-0]] PATH...|-\n"
    "       accel [global options] index info [--format tsv|json] FILE\n"
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
    "PATH - reads a list of paths from the standard input, --files-from F from F\n"
    "(one a line; NUL-separated with -0). TSV fields escape \\, tab, newline and\n"
    "carriage return as \\\\, \\t, \\n, \\r. --format json: one JSON document.\n"
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
  uint32_t bits = 0, nfields = 0;
  accel_index_info(*ix, &bits, &nfields, NULL);
  if (!catalog_parse_meta(meta, o)) cli_error("index: %s is not an index of image hashes (meta '%s')", file, meta);
  else if (!catalog_fits(*ix, o))
    cli_error("index: %s is corrupt: its metadata ('%s') does not describe its %u fields of %u bits", file, meta,
              nfields, bits);
  else return true;
  accel_index_destroy(*ix);
  *ix = NULL;
  return false;
}

/* The context, and the index FILE with the hash options it was built with.
 * On failure (reported) nothing is left open. */
static int open_index(const cli_globals *g, const char *file, accel_ctx **ctx, accel_index **ix,
                      accel_hash_options *o) {
  const int rc = cli_open_ctx(g, ctx);
  if (rc || file_options(*ctx, file, ix, o)) return rc;
  accel_ctx_destroy(*ctx);
  *ctx = NULL;
  return CLI_SOME_FAILED; /* the index file was refused */
}

/* ------------------------------------------------------------ build */

typedef struct build_args {
  catalog_options co;
  cli_list_args list;
  bool given, follow, json;
} build_args;

static const cli_option BUILD_OPTIONS[] = {
    {.name = "--kinds",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(build_args, co.hash),
     CLI_SEEN(build_args, given),
     .parse = cli_parse_kinds},
    {.name = "--size",
     .kind = CLI_OPT_INT,
     CLI_AT(build_args, co.hash.hash_size),
     CLI_SEEN(build_args, given),
     .lo = ACCEL_HASH_SIZE_MIN,
     .hi = 16},
    {.name = "--binbits",
     .kind = CLI_OPT_INT,
     CLI_AT(build_args, co.hash.color_binbits),
     CLI_SEEN(build_args, given),
     .lo = 1,
     .hi = 8},
    {.name = "--fast", .kind = CLI_OPT_FLAG, CLI_AT(build_args, co.hash.fast), CLI_SEEN(build_args, given)},
    {.name = "--follow-links", .kind = CLI_OPT_FLAG, CLI_AT(build_args, follow)},
    {.name = "--format", .kind = CLI_OPT_CHOICE, CLI_AT(build_args, json), .choices = cli_tsv_json},
    CLI_LIST_OPTIONS(build_args, list),
    {0}};

/* The context; without hash options, those of an existing FILE are kept. */
static int build_setup(const cli_globals *g, catalog_options *co, bool given, accel_ctx **ctx) {
  FILE *f = given ? NULL : fopen(co->index_path, "rb");
  if (!f) return cli_open_ctx(g, ctx);
  fclose(f);
  accel_index *old = NULL;
  const int rc = open_index(g, co->index_path, ctx, &old, &co->hash);
  accel_index_destroy(old);
  return rc;
}

static int cmd_build(const cli_globals *g, int argc, char **argv) {
  build_args a = {.co.cmd = "index build"};
  accel_hash_options_init(&a.co.hash, sizeof a.co.hash);
  a.co.hash.nkinds = 2;
  a.co.hash.kinds[0] = ACCEL_HASH_DHASH;
  a.co.hash.kinds[1] = ACCEL_HASH_AHASH;
  int first = cli_parse_options("index build", BUILD_OPTIONS, argc, argv, &a);
  if (first < 0 || !cli_has_operand("index build", first, argc, "FILE")) return CLI_USAGE;
  a.co.index_path = argv[first++];
  if (!cli_has_paths("index build", first, argc, &a.list)) return CLI_USAGE;
  accel_ctx *ctx = NULL;
  int rc = build_setup(g, &a.co, a.given, &ctx);
  if (rc) return rc;
  cli_paths paths = {0};
  rc = cli_collect_lists("index build", argc - first, argv + first, &a.list, a.follow, &paths);
  accel_index *ix = NULL;
  catalog_stats st;
  const int r = rc == CLI_USAGE ? rc : catalog_build(g, ctx, &a.co, &paths, &ix, &st);
  cli_paths_free(&paths);
  if (r) rc = r;
  if (ix) {
    size_t n = 0;
    accel_index_info(ix, NULL, NULL, &n);
    fprintf(stderr, "accel: index build: %s: %zu entries (%zu reused, %zu hashed, %zu dropped, %zu failed)\n",
            a.co.index_path, n, st.reused, st.hashed, st.removed, st.failed);
    if (cli_json_on()) { /* the report (JSON only: the TSV tool prints nothing on stdout here) */
      printf("file\t");
      cli_tsv_field(a.co.index_path);
      printf("\nentries\t%zu\nreused\t%zu\nhashed\t%zu\ndropped\t%zu\nfailed\t%zu\n", n, st.reused, st.hashed,
             st.removed, st.failed);
    }
  }
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  return rc;
}

/* ------------------------------------------------------------ query */

typedef struct query_args {
  const char *by;
  accel_search_options so;
  cli_thresholds th;
  cli_list_args list;
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
    CLI_LIST_OPTIONS(query_args, list),
    {0}};

/* A query run: the index and its hash options, the queries and their codes. */
typedef struct query {
  accel_index *ix;
  accel_hash_options ho;
  uint32_t bits, by_field; /* the index's code width; the kind --k ranks by */
  cli_paths paths;         /* the queries */
  uint64_t *codes;         /* of the queries that could be hashed, */
  size_t *qmap, n;         /* which are paths[qmap[0..n)] */
} query;

/* The thresholds (one per kind of the index) and the kind --by names; both
 * checked, each error reported. */
static int query_setup(query_args *a, query *q) {
  int rc = CLI_OK;
  const uint32_t nkinds = q->ho.nkinds;
  if (a->th.n != 1 && a->th.n != nkinds) {
    cli_error("index query: %u thresholds for the index's %u kinds", a->th.n, nkinds);
    rc = CLI_USAGE;
  }
  for (uint32_t f = 0; f < nkinds; f++) a->so.thresholds[f] = a->th.v[a->th.n == 1 ? 0 : f];
  if (!a->by) return rc;
  accel_hash_kind kind;
  if (accel_hash_kind_from_string(a->by, &kind) == ACCEL_OK)
    for (uint32_t f = 0; f < nkinds; f++)
      if (q->ho.kinds[f] == kind) {
        q->by_field = f;
        return rc;
      }
  cli_error("index query: --by %s: not a kind of this index", a->by);
  return CLI_USAGE;
}

/* The codes of the queries, hashed as the index's entries were. */
static int hash_queries(accel_ctx *ctx, query *q) {
  accel_hash_options ho = q->ho;
  size_t slot = 0;
  accel_hash_slot_bytes(&ho, &slot);
  const size_t n = q->paths.n ? q->paths.n : 1, wpe = ho.nkinds * q->bits / 64;
  uint8_t *hashes = malloc(n * ho.nkinds * slot);
  accel_status *st = malloc(n * sizeof(accel_status));
  q->codes = malloc(n * wpe * sizeof(uint64_t));
  q->qmap = malloc(n * sizeof(size_t));
  int rc = CLI_OK;
  cli_file_errors errors = {"index query", q->paths.v};
  ho.on_error = cli_file_error;
  ho.error_user = &errors;
  if (!hashes || !st || !q->codes || !q->qmap) {
    cli_error("out of memory");
    rc = CLI_USAGE;
  } else if (accel_hash_files(ctx, (const char *const *)q->paths.v, q->paths.n, &ho, hashes, slot, st)) {
    cli_error("index query: %s", accel_last_error(ctx));
    rc = CLI_USAGE;
  }
  for (size_t i = 0; rc != CLI_USAGE && i < q->paths.n; i++) {
    if (st[i] != ACCEL_OK) {
      rc = CLI_SOME_FAILED;
      continue;
    }
    catalog_codes(hashes + i * ho.nkinds * slot, slot, ho.nkinds, q->bits, q->codes + q->n * wpe);
    q->qmap[q->n++] = i;
  }
  free(hashes);
  free(st);
  return rc;
}

/* The k nearest entries of each query by one kind's distance. */
static int print_nearest(accel_ctx *ctx, const query *q, int k, bool json) {
  uint64_t *ids = malloc((q->n ? q->n : 1) * (size_t)k * sizeof(uint64_t));
  uint32_t *dist = malloc((q->n ? q->n : 1) * (size_t)k * sizeof(uint32_t));
  if (!ids || !dist || accel_index_knn(q->ix, q->n, q->codes, (uint32_t)k, q->by_field, ids, dist)) {
    cli_error("index query: %s", ids && dist ? accel_last_error(ctx) : "out of memory");
    free(ids);
    free(dist);
    return ids && dist ? CLI_SOME_FAILED : CLI_USAGE;
  }
  const char *kname = accel_hash_kind_name(q->ho.kinds[q->by_field]);
  if (json) cli_json_begin(), printf("[");
  else printf("query\trank\tpath\t%s\n", kname);
  size_t printed = 0;
  for (size_t i = 0; i < q->n; i++)
    for (int r = 0; r < k && ids[i * (size_t)k + (size_t)r] != UINT64_MAX; r++) {
      const size_t at = i * (size_t)k + (size_t)r;
      const char *query = q->paths.v[q->qmap[i]], *path = catalog_label(q->ix, ids[at]);
      if (!json) {
        cli_tsv_field(query);
        printf("\t%d\t", r + 1);
        cli_tsv_field(path);
        printf("\t%u\n", dist[at]);
        continue;
      }
      printf("%s\n  {\"query\": ", printed++ ? "," : "");
      cli_json_string(query);
      printf(", \"rank\": %d, \"path\": ", r + 1);
      cli_json_string(path);
      printf(", \"%s\": %u}", kname, dist[at]);
    }
  if (json) printf("%s]\n", printed ? "\n" : "");
  free(ids);
  free(dist);
  return CLI_OK;
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

/* One match: the query, the entry and the distance of each kind. */
static void print_match(const query *q, const char *query, const char *path, const uint32_t *d, uint32_t nf, bool json,
                        bool first) {
  if (!json) {
    cli_tsv_field(query);
    printf("\t");
    cli_tsv_field(path);
    for (uint32_t f = 0; f < nf; f++) printf("\t%u", d[f]);
    printf("\n");
    return;
  }
  printf("%s\n  {\"query\": ", first ? "" : ",");
  cli_json_string(query);
  printf(", \"path\": ");
  cli_json_string(path);
  printf(", \"distances\": {");
  for (uint32_t f = 0; f < nf; f++) printf("%s\"%s\": %u", f ? ", " : "", accel_hash_kind_name(q->ho.kinds[f]), d[f]);
  printf("}}");
}

/* Every entry within the thresholds of each query, by path within a query. */
static int print_matches(accel_ctx *ctx, const query *q, const accel_search_options *so, bool json) {
  accel_pairs *p = NULL;
  if (accel_index_range(q->ix, q->n, q->codes, so, &p)) {
    cli_error("index query: %s", accel_last_error(ctx));
    return CLI_SOME_FAILED;
  }
  size_t n;
  const uint64_t *qi, *id;
  const uint32_t *d;
  uint32_t nf;
  accel_pairs_view(p, &n, &qi, &id, &d, &nf);
  if (json) cli_json_begin(), printf("[");
  else printf("query\tpath");
  for (uint32_t f = 0; !json && f < q->ho.nkinds; f++) printf("\t%s", accel_hash_kind_name(q->ho.kinds[f]));
  if (!json) printf("\n");
  int rc = CLI_OK;
  row *rows = malloc((n ? n : 1) * sizeof *rows);
  for (size_t i = 0; rows && i < n; i++) rows[i] = (row){qi[i], catalog_label(q->ix, id[i]), i};
  if (rows && n) qsort(rows, n, sizeof *rows, cmp_row);
  if (!rows) {
    cli_error("out of memory");
    rc = CLI_USAGE;
    n = 0;
  }
  for (size_t r = 0; r < n; r++) {
    const size_t i = rows[r].at;
    print_match(q, q->paths.v[q->qmap[qi[i]]], rows[r].path, d + i * nf, nf, json, r == 0);
  }
  if (json) printf("%s]\n", n ? "\n" : "");
  free(rows);
  accel_pairs_destroy(p);
  return rc;
}

static int cmd_query(const cli_globals *g, int argc, char **argv) {
  query_args a = {.th = {.v = {5}, .n = 1}};
  accel_search_options_init(&a.so, sizeof a.so);
  int first = cli_parse_options("index query", QUERY_OPTIONS, argc, argv, &a);
  if (first < 0 || !cli_has_operand("index query", first, argc, "FILE")) return CLI_USAGE;
  const char *file = argv[first++];
  if (!cli_has_paths("index query", first, argc, &a.list)) return CLI_USAGE;
  accel_ctx *ctx = NULL;
  query q = {0};
  int rc = open_index(g, file, &ctx, &q.ix, &q.ho);
  if (rc) return rc;
  accel_index_info(q.ix, &q.bits, NULL, NULL);
  rc = query_setup(&a, &q);
  if (!rc) rc = cli_collect_lists("index query", argc - first, argv + first, &a.list, a.follow, &q.paths);
  int r = rc == CLI_USAGE ? rc : hash_queries(ctx, &q);
  if (r) rc = r;
  if (r != CLI_USAGE) {
    r = a.k > 0 ? print_nearest(ctx, &q, a.k, a.json) : print_matches(ctx, &q, &a.so, a.json);
    if (r) rc = r;
  }
  free(q.codes);
  free(q.qmap);
  cli_paths_free(&q.paths);
  accel_index_destroy(q.ix);
  accel_ctx_destroy(ctx);
  return rc;
}

/* ------------------------------------------------------------ info */

static const cli_option INFO_OPTIONS[] = {
    {.name = "--format", .kind = CLI_OPT_CHOICE, .offset = 0, .size = sizeof(bool), .choices = cli_tsv_json}, {0}};

static int cmd_info(const cli_globals *g, int argc, char **argv) {
  /* argv: "info", its options, "--", FILE */
  bool json = false;
  const int first = cli_parse_options("index info", INFO_OPTIONS, argc, argv, &json);
  if (first < 0) return CLI_USAGE;
  if (argc - first != 1) {
    cli_error("index info: give exactly one FILE and no options (see accel index --help)");
    return CLI_USAGE;
  }
  accel_ctx *ctx = NULL;
  accel_index *ix = NULL;
  accel_hash_options ho;
  const int rc = open_index(g, argv[first], &ctx, &ix, &ho);
  if (rc) return rc;
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

static const cli_command BUILD = {.name = "build", .options = BUILD_OPTIONS, .run = cmd_build};
static const cli_command QUERY = {.name = "query", .options = QUERY_OPTIONS, .run = cmd_query, .json_native = true};
static const cli_command INFO = {.name = "info", .options = INFO_OPTIONS, .run = cmd_info};
static const cli_command *const SUBCOMMANDS[] = {&BUILD, &QUERY, &INFO, NULL};

const cli_command cli_index_command = {.name = "index",
                                       .summary = "keep image hashes in an index file; query it",
                                       .usage = USAGE,
                                       .subcommands = SUBCOMMANDS};
