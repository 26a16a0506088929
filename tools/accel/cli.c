/* Shared CLI pieces: errors, the context, option values, progress bars. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

static cli_progress *active_bar; /* the bar on screen, erased before other output */

static void erase_bar(void) {
  if (active_bar && active_bar->drawn) {
    fputs("\r\033[K", stderr);
    active_bar->drawn = false;
  }
}

void cli_error(const char *fmt, ...) {
  erase_bar();
  va_list ap;
  va_start(ap, fmt);
  fputs("accel: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void log_writer(void *user, accel_log_level level, const char *message) {
  (void)user;
  (void)level;
  erase_bar();
  fprintf(stderr, "%s\n", message);
}

int cli_open_ctx(const cli_globals *g, accel_ctx **ctx) {
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = g->backend;
  o.fallback = g->strict ? ACCEL_FALLBACK_DENY : ACCEL_FALLBACK_ALLOW;
  o.log_level = g->log_level;
  o.cpu_threads = g->threads;
  o.log_fn = log_writer;
  accel_status s = accel_ctx_create(&o, ctx);
  if (s) {
    cli_error("cannot set up: %s", accel_last_error(NULL));
    return CLI_USAGE;
  }
  return CLI_OK;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

bool cli_take_value(int argc, char **argv, int *i, const char *name, const char **value, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '=') {
    *value = a + n + 1;
    return true;
  }
  if (a[n] != '\0') return false;
  if (*i + 1 >= argc || strcmp(argv[*i + 1], "--") == 0) {
    *missing = true;
    cli_error("option %s needs a value", name);
    return true;
  }
  *value = argv[++*i];
  return true;
}

bool cli_make_dirs(const char *path) {
  char *p = strdup(path);
  if (!p) return false;
  bool ok = true;
  for (char *c = p + 1;; c++) {
    if (*c == '/' || *c == '\0') {
      char saved = *c;
      *c = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        cli_error("cannot create directory %s: %s", p, strerror(errno));
        ok = false;
        break;
      }
      *c = saved;
      if (!saved) break;
    }
  }
  struct stat st;
  if (ok && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) {
    cli_error("%s is not a directory", p);
    ok = false;
  }
  free(p);
  return ok;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_begin(cli_progress *p, const char *label, bool enabled) {
  memset(p, 0, sizeof *p);
  p->enabled = enabled;
  p->label = label;
  if (enabled) active_bar = p;
}

void cli_progress_update(cli_progress *p, double fraction, const char *detail) {
  if (!p->enabled) return;
  double t = now();
  if (p->drawn && fraction < 1.0 && t - p->last_draw < 0.1) return;
  p->last_draw = t;
  if (fraction < 0) fraction = 0;
  if (fraction > 1) fraction = 1;
  enum { WIDTH = 30 };
  char bar[WIDTH + 1];
  int full = (int)(fraction * WIDTH + 0.5);
  for (int i = 0; i < WIDTH; i++) bar[i] = i < full ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(stderr, "\r\033[K%s [%s] %3d%% %s", p->label, bar, (int)(fraction * 100 + 0.5), detail ? detail : "");
  fflush(stderr);
  p->drawn = true;
}

void cli_progress_end(cli_progress *p) {
  if (active_bar == p) {
    erase_bar();
    active_bar = NULL;
  }
  p->enabled = false;
}

int cli_progress_callback(void *user, const char *stage, double fraction) {
  cli_progress_update((cli_progress *)user, fraction, stage);
  return 0;
}

/* ------------------------------------------------------------ paths */

bool cli_paths_push(cli_paths *l, const char *p) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    char **v = realloc(l->v, cap * sizeof *v);
    if (!v) return false;
    l->v = v;
    l->cap = cap;
  }
  if (!(l->v[l->n] = strdup(p))) return false;
  l->n++;
  return true;
}

void cli_paths_free(cli_paths *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

static bool image_name(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool cli_walk(const char *dir, cli_paths *out) {
  DIR *d = opendir(dir);
  if (!d) {
    cli_error("%s: %s", dir, strerror(errno));
    return false;
  }
  cli_paths names = {0};
  struct dirent *e;
  bool ok = true;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) ok = ok && cli_paths_push(&names, e->d_name);
  closedir(d);
  if (names.n) qsort(names.v, names.n, sizeof(char *), cmp_str);
  size_t dl = strlen(dir);
  bool slash = dl && dir[dl - 1] == '/';
  for (size_t i = 0; i < names.n && ok; i++) {
    size_t n = dl + strlen(names.v[i]) + 2;
    char *p = malloc(n);
    if (!p) {
      ok = false;
      break;
    }
    snprintf(p, n, "%s%s%s", dir, slash ? "" : "/", names.v[i]);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) ok = cli_walk(p, out);
    else if (image_name(names.v[i])) ok = cli_paths_push(out, p);
    free(p);
  }
  cli_paths_free(&names);
  return ok;
}

bool cli_collect(int argc, char **argv, cli_paths *out, bool *oom) {
  bool ok = true;
  *oom = false;
  for (int i = 0; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      if (!cli_walk(argv[i], out)) ok = false;
    } else if (!cli_paths_push(out, argv[i])) {
      *oom = true;
      return false;
    }
  }
  return ok;
}

void cli_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

/* ------------------------------------------------------------ option values */

bool cli_parse_kinds(const char *cmd, const char *list, accel_hash_options *o) {
  char *copy = strdup(list), *save = NULL;
  if (!copy) return false;
  o->nkinds = 0;
  bool ok = true;
  for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
    if (o->nkinds == ACCEL_HASH_KIND_COUNT) {
      cli_error("%s: too many kinds in '%s'", cmd, list);
      ok = false;
    } else if (accel_hash_kind_from_string(t, &o->kinds[o->nkinds])) {
      cli_error("%s: %s", cmd, accel_last_error(NULL));
      ok = false;
    } else {
      o->nkinds++;
    }
  }
  free(copy);
  if (ok && o->nkinds == 0) {
    cli_error("%s: --kinds is empty", cmd);
    ok = false;
  }
  return ok;
}

bool cli_parse_int(const char *cmd, const char *what, const char *v, int lo, int hi, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (!*v || *end || x < lo || x > hi) {
    cli_error("%s%s%s must be an integer in %d..%d, not '%s'", cmd ? cmd : "", cmd ? ": " : "", what, lo, hi, v);
    return false;
  }
  *out = (int)x;
  return true;
}

/* ------------------------------------------------------------ argument order */

static bool takes_value(const char *arg, const char *const *value_options) {
  for (; value_options && *value_options; value_options++)
    if (strcmp(arg, *value_options) == 0) return true;
  return false;
}

char **cli_permute(int argc, char **argv, const char *const *value_options, int *out_argc) {
  static char dashdash[] = "--";
  char **out = malloc(((size_t)argc + 2) * sizeof(char *));
  char **pos = malloc(((size_t)argc + 1) * sizeof(char *));
  if (!out || !pos) {
    free(out);
    free(pos);
    return NULL;
  }
  int no = 0, np = 0;
  out[no++] = argv[0];
  bool ended = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ended) {
      pos[np++] = argv[i];
    } else if (strcmp(a, "--") == 0) {
      ended = true;
    } else if (a[0] == '-' && a[1]) {
      out[no++] = argv[i];
      if (takes_value(a, value_options) && i + 1 < argc) out[no++] = argv[++i];
    } else {
      pos[np++] = argv[i];
    }
  }
  out[no++] = dashdash;
  for (int i = 0; i < np; i++) out[no++] = pos[i];
  out[no] = NULL;
  free(pos);
  *out_argc = no;
  return out;
}

int cli_hash_option(const char *cmd, int argc, char **argv, int *i, accel_hash_options *o, int max_size) {
  const char *v = NULL;
  bool missing = false;
  if (strcmp(argv[*i], "--fast") == 0) {
    o->fast = 1;
    return 1;
  }
  if (cli_take_value(argc, argv, i, "--kinds", &v, &missing))
    return !missing && cli_parse_kinds(cmd, v, o) ? 1 : -1;
  if (cli_take_value(argc, argv, i, "--size", &v, &missing))
    return !missing && cli_parse_int(cmd, "--size", v, ACCEL_HASH_SIZE_MIN, max_size, &o->hash_size) ? 1 : -1;
  if (cli_take_value(argc, argv, i, "--binbits", &v, &missing))
    return !missing && cli_parse_int(cmd, "--binbits", v, 1, 8, &o->color_binbits) ? 1 : -1;
  return 0;
}

bool cli_parse_format(const char *cmd, const char *v, bool *json) {
  if (strcmp(v, "tsv") && strcmp(v, "json")) {
    cli_error("%s: --format must be tsv or json, not '%s'", cmd, v);
    return false;
  }
  *json = strcmp(v, "json") == 0;
  return true;
}

bool cli_parse_rule(const char *cmd, const char *v, accel_index_rule *rule) {
  if (strcmp(v, "all") && strcmp(v, "any")) {
    cli_error("%s: --rule must be all or any, not '%s'", cmd, v);
    return false;
  }
  *rule = strcmp(v, "any") == 0 ? ACCEL_INDEX_ANY : ACCEL_INDEX_ALL;
  return true;
}

bool cli_parse_thresholds(const char *cmd, const char *v, uint32_t *out, uint32_t *given) {
  uint32_t n = 0;
  for (const char *p = v; *p;) {
    char *end;
    long x = strtol(p, &end, 10);
    if (end == p || x < 0 || x > 4096 || n == ACCEL_INDEX_MAX_FIELDS || (*end && *end != ',')) {
      cli_error("%s: --threshold takes integers like 5 or 5,8, not '%s'", cmd, v);
      return false;
    }
    out[n++] = (uint32_t)x;
    p = *end ? end + 1 : end;
  }
  if (n == 0) cli_error("%s: --threshold is empty", cmd);
  *given = n;
  return n > 0;
}
