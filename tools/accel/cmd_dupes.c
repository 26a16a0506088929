/* accel dupes: groups of near-duplicate images. */
#include "catalog.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char USAGE[] =
    "usage: accel [global options] dupes [--kinds K1,K2,...] [--threshold T] [--rule all|any]\n"
    "                                    [--size N] [--format tsv|json] [--index FILE] [--pairs]\n"
    "                                    [--binbits B] [--fast] [--algorithm auto|brute|mih]\n"
    "                                    [--follow-links] [--files-from F [-0]] [--html R.html]\n"
    "                                    PATH...|-\n"
    "\n"
    "Hashes the images (JPEG, PNG; directories walked recursively), finds every pair\n"
    "within the threshold and prints the groups of near-duplicates: the connected\n"
    "components of those pairs. Exact: no pair within the threshold is missed.\n"
    "\n";

static const char USAGE_TAIL[] =
    "\n"
    "TSV output: a header 'group<TAB>path', then one line per member of each group of\n"
    "two or more: groups numbered from 1, ordered by their first path, paths sorted\n"
    "(byte order). With --pairs: 'path1<TAB>path2' and one distance column per kind.\n"
    "JSON: [{\"group\": 1, \"paths\": [...]}, ...] or, with --pairs, [{\"paths\": [a, b],\n"
    "\"distances\": {kind: d, ...}}, ...].\n"
    "\n"
    "Files that cannot be hashed are reported on stderr, left out, and make the exit\n"
    "status 1.\n";

typedef struct dupes_args {
  catalog_options co;
  accel_search_options so;
  cli_thresholds th;
  cli_list_args list;
  const char *html;
  bool json, pairs, follow;
} dupes_args;

static const cli_choice ALGORITHMS[] = {
    {"auto", ACCEL_INDEX_AUTO}, {"brute", ACCEL_INDEX_BRUTE_FORCE}, {"mih", ACCEL_INDEX_MULTI_INDEX}, {NULL, 0}};

static const cli_option OPTIONS[] = {
    {.name = "--kinds",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(dupes_args, co.hash),
     .parse = cli_parse_kinds,
     .arg = "LIST",
     .help = "hash kinds compared (default dhash,ahash): ahash, dhash,\n"
             "dhash_vertical, phash, whash, colorhash"},
    {.name = "--threshold",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(dupes_args, th),
     .parse = cli_parse_thresholds,
     .arg = "T",
     .help = "largest Hamming distance that still matches, inclusive (default 5);\n"
             "one value for every kind, or one per kind: --threshold 5,8"},
    {.name = "--rule",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(dupes_args, so.rule),
     .choices = cli_rules,
     .arg = "R",
     .help = "all (default): a pair matches when every kind is within its\n"
             "threshold; any: when at least one is"},
    {.name = "--size",
     .kind = CLI_OPT_INT,
     CLI_AT(dupes_args, co.hash.hash_size),
     .lo = ACCEL_HASH_SIZE_MIN,
     .hi = 16,
     .arg = "N",
     .help = "hash_size (default 8, 64-bit hashes; up to 16)"},
    {.name = "--binbits",
     .kind = CLI_OPT_INT,
     CLI_AT(dupes_args, co.hash.color_binbits),
     .lo = 1,
     .hi = 8,
     .arg = "B",
     .help = "colorhash's binbits (default 3)"},
    {.name = "--fast",
     .kind = CLI_OPT_FLAG,
     CLI_AT(dupes_args, co.hash.fast),
     .help = "reduced-scale JPEG decoding (not bit-exact; see accel hash --help)"},
    {.name = "--index",
     .kind = CLI_OPT_STRING,
     CLI_AT(dupes_args, co.index_path),
     .arg = "FILE",
     .help = "keep the hashes in FILE: entries of files with the same size and\n"
             "modification time are reused, the others hashed; FILE is then\n"
             "rewritten to hold exactly these files"},
    {.name = "--pairs",
     .kind = CLI_OPT_FLAG,
     CLI_AT(dupes_args, pairs),
     .help = "print the matching pairs instead of the groups"},
    {.name = "--algorithm",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(dupes_args, so.algorithm),
     .choices = ALGORITHMS,
     .arg = "A",
     .help = "auto (default), brute (brute force) or mih (multi-index hashing)"},
    {.name = "--format",
     .kind = CLI_OPT_CHOICE,
     CLI_AT(dupes_args, json),
     .choices = cli_tsv_json,
     .arg = "F",
     .help = "tsv (default) or json"},
    {.name = "--follow-links",
     .kind = CLI_OPT_FLAG,
     CLI_AT(dupes_args, follow),
     .help = "also enter symbolic links to directories (each file counts once)"},
    CLI_LIST_OPTIONS(dupes_args, list),
    {.name = "--html",
     .kind = CLI_OPT_STRING,
     CLI_AT(dupes_args, html),
     .arg = "R.html",
     .help = "also write a report: each group a row of thumbnails (PNG data: URIs\n"
             "in the page, one self-contained file) with path, size and distances"},
    {0},
};

static int cmp_member(const void *a, const void *b) {
  return strcmp(((const report_member *)a)->path, ((const report_member *)b)->path);
}

static int cmp_group(const void *a, const void *b) {
  return strcmp(((const report_group *)a)->m[0].path, ((const report_group *)b)->m[0].path);
}

/* The groups, each sorted by path, ordered by their first path; free(*members), free(*gv). */
static bool sorted_groups(accel_index *ix, const accel_groups *groups, report_member **members, report_group **gv,
                          size_t *ng) {
  const uint64_t *off, *mem;
  accel_groups_view(groups, ng, &off, &mem);
  *members = malloc((*ng ? off[*ng] : 1) * sizeof **members);
  *gv = malloc((*ng ? *ng : 1) * sizeof **gv);
  if (!*members || !*gv) {
    free(*members);
    free(*gv);
    cli_error("out of memory");
    return false;
  }
  for (size_t g = 0; g < *ng; g++) {
    (*gv)[g].m = *members + off[g];
    (*gv)[g].n = (size_t)(off[g + 1] - off[g]);
    for (size_t m = 0; m < (*gv)[g].n; m++)
      (*gv)[g].m[m] = (report_member){catalog_label(ix, mem[off[g] + m]), mem[off[g] + m]};
    qsort((*gv)[g].m, (*gv)[g].n, sizeof(report_member), cmp_member);
  }
  if (*ng) qsort(*gv, *ng, sizeof **gv, cmp_group);
  return true;
}

/* Groups as sorted lists of paths, ordered by their first path; and the report. */
static int print_groups(accel_ctx *ctx, accel_index *ix, const accel_groups *groups, const dupes_args *a) {
  size_t ng;
  report_member *members;
  report_group *gv;
  if (!sorted_groups(ix, groups, &members, &gv, &ng)) return CLI_USAGE;
  if (a->pairs) {
    /* only the report */
  } else if (a->json) {
    cli_json_begin();
    printf("[");
    for (size_t g = 0; g < ng; g++) {
      printf("%s\n  {\"group\": %zu, \"paths\": [", g ? "," : "", g + 1);
      for (size_t m = 0; m < gv[g].n; m++) {
        if (m) printf(", ");
        cli_json_string(gv[g].m[m].path);
      }
      printf("]}");
    }
    printf("%s]\n", ng ? "\n" : "");
  } else {
    printf("group\tpath\n");
    for (size_t g = 0; g < ng; g++)
      for (size_t m = 0; m < gv[g].n; m++) {
        printf("%zu\t", g + 1);
        cli_tsv_field(gv[g].m[m].path);
        printf("\n");
      }
  }
  int rc = CLI_OK;
  if (a->html && !report_write(ctx, "dupes", a->html, ix, &a->co.hash, a->so.thresholds, gv, ng)) rc = CLI_SOME_FAILED;
  free(members);
  free(gv);
  return rc;
}

typedef struct pair_view {
  const char *a, *b;
  size_t at;
} pair_view;

static int cmp_pair(const void *x, const void *y) {
  const pair_view *p = x, *q = y;
  int c = strcmp(p->a, q->a);
  return c ? c : strcmp(p->b, q->b);
}

static int print_pairs(accel_index *ix, const accel_pairs *pairs, const accel_hash_options *o, bool json) {
  size_t n;
  const uint64_t *first, *second;
  const uint32_t *dist;
  uint32_t nf;
  accel_pairs_view(pairs, &n, &first, &second, &dist, &nf);
  pair_view *pv = malloc((n ? n : 1) * sizeof *pv);
  if (!pv) {
    cli_error("out of memory");
    return CLI_USAGE;
  }
  for (size_t i = 0; i < n; i++) {
    const char *a = catalog_label(ix, first[i]), *b = catalog_label(ix, second[i]);
    pv[i] = strcmp(a, b) <= 0 ? (pair_view){a, b, i} : (pair_view){b, a, i};
  }
  if (n) qsort(pv, n, sizeof *pv, cmp_pair);
  if (json) {
    cli_json_begin();
    printf("[");
  } else {
    printf("path1\tpath2");
    for (uint32_t k = 0; k < o->nkinds; k++) printf("\t%s", accel_hash_kind_name(o->kinds[k]));
    printf("\n");
  }
  for (size_t i = 0; i < n; i++) {
    const uint32_t *d = dist + pv[i].at * nf;
    if (json) {
      printf("%s\n  {\"paths\": [", i ? "," : "");
      cli_json_string(pv[i].a);
      printf(", ");
      cli_json_string(pv[i].b);
      printf("], \"distances\": {");
      for (uint32_t k = 0; k < o->nkinds; k++)
        printf("%s\"%s\": %u", k ? ", " : "", accel_hash_kind_name(o->kinds[k]), d[k]);
      printf("}}");
    } else {
      cli_tsv_field(pv[i].a);
      printf("\t");
      cli_tsv_field(pv[i].b);
      for (uint32_t k = 0; k < o->nkinds; k++) printf("\t%u", d[k]);
      printf("\n");
    }
  }
  if (json) printf("%s]\n", n ? "\n" : "");
  free(pv);
  return CLI_OK;
}

/* One threshold a kind into so: the one given for all, or each kind's own;
 * false (reported) when they do not fit the kinds. */
static bool set_thresholds(const dupes_args *a, accel_search_options *so) {
  const accel_hash_options *o = &a->co.hash;
  if (a->th.n != 1 && a->th.n != o->nkinds) {
    cli_error("dupes: %u thresholds for %u kinds (give one, or one per kind)", a->th.n, o->nkinds);
    return false;
  }
  if (!catalog_bits("dupes", o)) return false;
  for (uint32_t k = 0; k < o->nkinds; k++) {
    so->thresholds[k] = a->th.v[a->th.n == 1 ? 0 : k];
    uint32_t kb = 0;
    accel_hash_bits(o->kinds[k], o->hash_size, o->color_binbits, &kb);
    if (so->thresholds[k] > kb) {
      cli_error("dupes: threshold %u is over the %u bits of %s", so->thresholds[k], kb,
                accel_hash_kind_name(o->kinds[k]));
      return false;
    }
  }
  return true;
}

/* The pairs within the thresholds, or their groups, printed; the report. */
static int search(const cli_globals *g, accel_ctx *ctx, accel_index *ix, dupes_args *a) {
  cli_progress bar;
  cli_progress_begin(&bar, "dupes", g->progress);
  a->so.progress = cli_progress_callback;
  a->so.progress_user = &bar;
  accel_status s = ACCEL_OK;
  int rc = CLI_OK;
  if (a->pairs) {
    accel_pairs *p = NULL;
    s = accel_index_self_join(ix, &a->so, &p);
    cli_progress_end(&bar);
    if (!s) rc = print_pairs(ix, p, &a->co.hash, a->json);
    accel_pairs_destroy(p);
  }
  if (!s && (!a->pairs || a->html)) {
    accel_groups *gr = NULL;
    s = accel_index_group(ix, &a->so, &gr);
    cli_progress_end(&bar);
    if (!s) {
      const int r = print_groups(ctx, ix, gr, a);
      if (r) rc = r;
    }
    accel_groups_destroy(gr);
  }
  cli_progress_end(&bar);
  if (s) {
    cli_error("dupes: %s", accel_last_error(ctx));
    rc = CLI_SOME_FAILED;
  }
  return rc;
}

/* --html: an .html name that is none of the inputs (operands, lists, --index). */
static bool check_report(const dupes_args *a, int n, char **operands) {
  const size_t len = strlen(a->html);
  if (!(len >= 5 && strcasecmp(a->html + len - 5, ".html") == 0) &&
      !(len >= 4 && strcasecmp(a->html + len - 4, ".htm") == 0)) {
    cli_error("dupes: --html %s: the file name must end in .html or .htm", a->html);
    return false;
  }
  cli_file *ins = malloc(((size_t)n + 2) * sizeof *ins);
  if (!ins) {
    cli_error("out of memory");
    return false;
  }
  size_t k = 0;
  for (int i = 0; i < n; i++)
    if (strcmp(operands[i], "-") != 0) ins[k++] = (cli_file){operands[i], "PATH", NULL};
  if (a->co.index_path) ins[k++] = (cli_file){a->co.index_path, "--index", NULL};
  if (a->list.files_from && strcmp(a->list.files_from, "-") != 0)
    ins[k++] = (cli_file){a->list.files_from, "--files-from", NULL};
  const cli_file out = {a->html, "--html", NULL};
  const bool ok = cli_check_outputs("dupes", ins, k, &out, 1);
  free(ins);
  return ok;
}

/* The index of the files: hashed, or reused from --index. */
static int catalog(const cli_globals *g, accel_ctx *ctx, const dupes_args *a, const cli_paths *paths,
                   accel_index **ix) {
  catalog_stats stats;
  const int rc = catalog_build(g, ctx, &a->co, paths, ix, &stats);
  if (*ix && a->co.index_path && g->log_level <= ACCEL_LOG_INFO)
    cli_error("dupes: %s: %zu hashes reused, %zu computed, %zu dropped", a->co.index_path, stats.reused, stats.hashed,
              stats.removed);
  return rc;
}

static int run(const cli_globals *g, int argc, char **argv) {
  dupes_args a = {.co.cmd = "dupes", .th = {.v = {5}, .n = 1}};
  accel_hash_options_init(&a.co.hash, sizeof a.co.hash);
  a.co.hash.nkinds = 2;
  a.co.hash.kinds[0] = ACCEL_HASH_DHASH;
  a.co.hash.kinds[1] = ACCEL_HASH_AHASH;
  accel_search_options_init(&a.so, sizeof a.so);
  const int first = cli_parse_options("dupes", OPTIONS, argc, argv, &a);
  if (first < 0 || !cli_has_paths("dupes", first, argc, &a.list) || !set_thresholds(&a, &a.so)) return CLI_USAGE;
  if (a.html && !check_report(&a, argc - first, argv + first)) return CLI_USAGE;
  cli_paths paths = {0};
  int rc = cli_collect_lists("dupes", argc - first, argv + first, &a.list, a.follow, &paths);
  if (rc == CLI_USAGE) return rc;
  accel_ctx *ctx = NULL;
  accel_index *ix = NULL;
  int r = cli_open_ctx(g, &ctx);
  if (!r) r = catalog(g, ctx, &a, &paths, &ix);
  cli_paths_free(&paths);
  if (r) rc = r;
  if (ix) {
    r = search(g, ctx, ix, &a);
    if (r) rc = r;
  }
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  return rc;
}

const cli_command cli_dupes_command = {.name = "dupes",
                                       .summary = "groups of near-duplicate images (exact Hamming search)",
                                       .usage = USAGE,
                                       .options = OPTIONS,
                                       .help_column = 18,
                                       .usage_tail = USAGE_TAIL,
                                       .run = run,
                                       .json_native = true};
