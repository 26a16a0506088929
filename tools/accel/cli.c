/* Shared CLI pieces: errors, the context, option values, progress bars. */
#include "cli.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static cli_progress *active_bar; /* the bar on screen, erased before other output */

static void erase_bar(void) {
  if (active_bar && active_bar->drawn) {
    fputs("\r\033[K", stderr);
    active_bar->drawn = false;
  }
}

/* --format json: on, the report begun, the messages printed so far. */
static struct {
  bool on, begun;
  cli_paths messages;
} json_state;

bool cli_json_on(void) { return json_state.on; }
void cli_json_set(bool on) { json_state.on = on; }
void cli_json_begin(void) { json_state.begun = true; }
bool cli_json_begun(void) { return json_state.begun; }

void cli_error(const char *fmt, ...) {
  erase_bar();
  va_list ap;
  va_start(ap, fmt);
  char message[2048];
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  fprintf(stderr, "accel: %s\n", message);
  if (json_state.on) cli_paths_push(&json_state.messages, message); /* a message lost to no memory: stderr has it */
}

void cli_json_errors(void) {
  printf("[");
  for (size_t i = 0; i < json_state.messages.n; i++) {
    if (i) printf(", ");
    cli_json_string(json_state.messages.v[i]);
  }
  printf("]");
}

bool cli_wants_json(int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *v = NULL;
    if (strncmp(argv[i], "--format=", 9) == 0) v = argv[i] + 9;
    else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) v = argv[++i];
    for (; v && *v; v += *v == ',') {
      const size_t n = strcspn(v, ",");
      if (n == 4 && strncmp(v, "json", 4) == 0) return true;
      v += n;
    }
  }
  return false;
}

/* s[0..n) is a JSON number. */
static bool json_number(const char *s, size_t n) {
  size_t i = s[0] == '-';
  if (i >= n || !isdigit((unsigned char)s[i])) return false;
  if (s[i] == '0') i++;
  else
    while (i < n && isdigit((unsigned char)s[i])) i++;
  if (i < n && s[i] == '.') {
    if (++i >= n || !isdigit((unsigned char)s[i])) return false;
    while (i < n && isdigit((unsigned char)s[i])) i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i += i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-');
    if (++i >= n || !isdigit((unsigned char)s[i])) return false;
    while (i < n && isdigit((unsigned char)s[i])) i++;
  }
  return i == n;
}

/* v[0..n) with cli_tsv_field's escapes undone (a new string; NULL when out of memory). */
static char *tsv_unescape(const char *v, size_t n) {
  char *out = malloc(n + 1), *o = out;
  for (size_t i = 0; out && i < n; i++) {
    const char next = i + 1 < n && v[i] == '\\' ? v[i + 1] : '\0';
    const char c = next == '\\' ? '\\' : next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : '\0';
    *o++ = c ? c : v[i];
    i += c != '\0';
  }
  if (out) *o = '\0';
  return out;
}

/* A value of a name<TAB>value line: a number, an array of them, or a string. */
static void json_value(const char *v, size_t n) {
  bool numbers = n > 0, list = false;
  for (size_t at = 0; numbers && at <= n;) {
    const char *c = memchr(v + at, ',', n - at);
    const size_t len = c ? (size_t)(c - (v + at)) : n - at;
    const bool nan = (len == 3 && strncmp(v + at, "nan", 3) == 0) || (len == 4 && strncmp(v + at, "-nan", 4) == 0);
    numbers = json_number(v + at, len) || nan;
    list |= c != NULL;
    at += len + 1;
  }
  if (!numbers) {
    char *copy = tsv_unescape(v, n);
    cli_json_string(copy ? copy : "");
    free(copy);
    return;
  }
  if (list) putchar('[');
  for (size_t at = 0; at <= n;) {
    const char *c = memchr(v + at, ',', n - at);
    const size_t len = c ? (size_t)(c - (v + at)) : n - at;
    printf("%s%.*s", at ? ", " : "", (int)len, json_number(v + at, len) ? v + at : "null");
    at += len + 1;
  }
  if (list) putchar(']');
}

void cli_json_from_kv(const char *text, size_t len, int rc) {
  printf("{");
  size_t fields = 0, plain = 0;
  for (int pass = 0; pass < 2; pass++) /* name<TAB>value lines, then the plain ones */
    for (size_t at = 0; at < len;) {
      const char *nl = memchr(text + at, '\n', len - at);
      const size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
      const char *line = text + at, *tab = memchr(line, '\t', n);
      at += n + 1;
      if (!n || (pass == 0) != (tab != NULL)) continue;
      if (pass == 1) printf("%s", plain++ ? ", " : fields++ ? ", \"outputs\": [" : "\"outputs\": [");
      else printf("%s", fields++ ? ", " : "");
      char *name = tsv_unescape(line, tab ? (size_t)(tab - line) : n);
      cli_json_string(name ? name : "");
      free(name);
      if (pass == 0) {
        printf(": ");
        json_value(tab + 1, n - (size_t)(tab + 1 - line));
      }
    }
  if (plain) printf("]");
  printf("%s\"exit_status\": %d, \"errors\": ", fields ? ", " : "", rc);
  cli_json_errors();
  printf("}\n");
}

void cli_tsv_field(const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '\\': fputs("\\\\", stdout); break;
    case '\t': fputs("\\t", stdout); break;
    case '\n': fputs("\\n", stdout); break;
    case '\r': fputs("\\r", stdout); break;
    default: putchar(*s);
    }
  }
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
  o.sync = g->sync;
  o.max_pixels = (uint64_t)g->max_pixels;
  cli_sync_all = g->sync == ACCEL_SYNC_ALL; /* the tool's own saves (cli_atomic_close) */
  o.log_fn = log_writer;
  accel_status s = accel_ctx_create(&o, ctx);
  if (s) {
    cli_error("cannot set up: %s", accel_last_error(NULL));
    return CLI_USAGE;
  }
  return CLI_OK;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int cli_atomic_open(const char *cmd, const char *path, char **tmp) {
  const size_t len = strlen(path);
  if (!(*tmp = malloc(len + 16))) {
    cli_error("out of memory");
    return -1;
  }
  snprintf(*tmp, len + 16, "%s.tmp.XXXXXX", path);
  const int fd = mkstemp(*tmp);
  if (fd < 0) {
    cli_error("%s: %s: cannot create a file beside it: %s", cmd, path, strerror(errno));
    free(*tmp);
    *tmp = NULL;
  }
  return fd;
}

bool cli_sync_all;

bool cli_atomic_close(const char *cmd, const char *path, int fd, char *tmp, bool ok) {
  const mode_t mask = umask(0); /* a new file's permissions, as open() would give them */
  umask(mask);
  if (ok && (fchmod(fd, 0666 & ~mask) != 0 || (cli_sync_all && fsync(fd) != 0))) {
    cli_error("%s: %s: %s", cmd, path, strerror(errno));
    ok = false;
  }
  if (close(fd) != 0 && ok) {
    cli_error("%s: %s: %s", cmd, path, strerror(errno));
    ok = false;
  }
  if (ok && rename(tmp, path) != 0) {
    cli_error("%s: %s: cannot rename %s: %s", cmd, path, tmp, strerror(errno));
    ok = false;
  }
  if (!ok) unlink(tmp);
  free(tmp);
  return ok;
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

int cli_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A set of files by device and inode (open addressing). */
typedef struct file_set {
  dev_t *dev;
  ino_t *ino;
  unsigned char *used;
  size_t n, cap;
} file_set;

static size_t id_hash(dev_t d, ino_t i) {
  uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)d * 0xc2b2ae3d27d4eb4full;
  return (size_t)(x ^ x >> 29);
}

/* Adds (dev, ino); false if it was there already. *oom on allocation failure. */
static bool set_add(file_set *s, dev_t d, ino_t i, bool *oom) {
  if (2 * (s->n + 1) > s->cap) {
    file_set g = {0};
    g.cap = s->cap ? 2 * s->cap : 1024;
    g.dev = malloc(g.cap * sizeof *g.dev);
    g.ino = malloc(g.cap * sizeof *g.ino);
    g.used = calloc(g.cap, 1);
    if (!g.dev || !g.ino || !g.used) {
      free(g.dev), free(g.ino), free(g.used);
      *oom = true;
      return false;
    }
    for (size_t k = 0; k < s->cap; k++)
      if (s->used[k]) {
        size_t h = id_hash(s->dev[k], s->ino[k]) & (g.cap - 1);
        while (g.used[h]) h = (h + 1) & (g.cap - 1);
        g.used[h] = 1, g.dev[h] = s->dev[k], g.ino[h] = s->ino[k];
      }
    g.n = s->n;
    free(s->dev), free(s->ino), free(s->used);
    *s = g;
  }
  size_t h = id_hash(d, i) & (s->cap - 1);
  for (; s->used[h]; h = (h + 1) & (s->cap - 1))
    if (s->dev[h] == d && s->ino[h] == i) return false;
  s->used[h] = 1, s->dev[h] = d, s->ino[h] = i;
  s->n++;
  return true;
}

static void set_free(file_set *s) {
  free(s->dev), free(s->ino), free(s->used);
  memset(s, 0, sizeof *s);
}

typedef struct walker {
  file_set files, dirs;
  bool follow_links, oom;
  cli_paths *out;
} walker;

/* A file found by the walk or named on the command line: listed once. A path
 * that cannot be examined is listed as given (its load will report why). */
static bool take_file(walker *w, const char *path, const struct stat *st) {
  if (st && !set_add(&w->files, st->st_dev, st->st_ino, &w->oom)) return !w->oom;
  if (!cli_paths_push(w->out, path)) w->oom = true;
  return !w->oom;
}

static bool walk(walker *w, const char *dir, const struct stat *dst) {
  if (!set_add(&w->dirs, dst->st_dev, dst->st_ino, &w->oom)) return !w->oom; /* entered already */
  DIR *d = opendir(dir);
  if (!d) {
    cli_error("%s: %s", dir, strerror(errno));
    return false;
  }
  cli_paths names = {0};
  struct dirent *e;
  bool ok = true;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !cli_paths_push(&names, e->d_name)) w->oom = true;
  closedir(d);
  if (names.n) qsort(names.v, names.n, sizeof(char *), cli_cmp_str);
  const size_t dl = strlen(dir);
  const bool slash = dl && dir[dl - 1] == '/';
  for (size_t i = 0; i < names.n && !w->oom; i++) {
    const size_t n = dl + strlen(names.v[i]) + 2;
    char *p = malloc(n);
    if (!p) {
      w->oom = true;
      break;
    }
    snprintf(p, n, "%s%s%s", dir, slash ? "" : "/", names.v[i]);
    struct stat lst, st;
    if (lstat(p, &lst) == 0) {
      const bool link = S_ISLNK(lst.st_mode);
      const bool target = link ? stat(p, &st) == 0 : (st = lst, true);
      if (target && S_ISDIR(st.st_mode)) {
        if (!link || w->follow_links) ok = walk(w, p, &st) && ok;
      } else if (image_name(names.v[i])) {
        take_file(w, p, target ? &st : NULL); /* a broken link is reported when it is read */
      }
    }
    free(p);
  }
  cli_paths_free(&names);
  return ok && !w->oom;
}

int cli_collect(int argc, char **argv, bool follow_links, cli_paths *out) {
  walker w = {.follow_links = follow_links, .out = out};
  bool ok = true;
  for (int i = 0; i < argc && !w.oom; i++) {
    struct stat st;
    const bool exists = stat(argv[i], &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) ok = walk(&w, argv[i], &st) && ok; /* a named directory is always entered */
    else take_file(&w, argv[i], exists ? &st : NULL);
  }
  set_free(&w.files);
  set_free(&w.dirs);
  if (w.oom) {
    cli_error("out of memory");
    cli_paths_free(out);
    return CLI_USAGE;
  }
  return ok ? CLI_OK : CLI_SOME_FAILED;
}

bool cli_has_paths(const char *cmd, int first, int argc, const cli_list_args *l) {
  return (l && l->files_from) || cli_has_operand(cmd, first, argc, "PATH");
}

/* The entries of a list (one a line, or NUL-terminated) appended to out;
 * false (printed) if it cannot be read. */
static bool read_list(const char *cmd, const char *name, bool nul, cli_paths *out) {
  const bool std_in = strcmp(name, "-") == 0;
  FILE *f = std_in ? stdin : fopen(name, "rb");
  if (!f) {
    cli_error("%s: --files-from %s: %s", cmd, name, strerror(errno));
    return false;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  bool ok = true;
  errno = 0;
  while (ok && (n = getdelim(&line, &cap, nul ? '\0' : '\n', f)) >= 0) {
    if (n > 0 && line[n - 1] == (nul ? '\0' : '\n')) line[--n] = '\0';
    if (n > 0 && !cli_paths_push(out, line)) ok = false;
  }
  if (ok && ferror(f))
    cli_error("%s: %s: %s", cmd, std_in ? "the standard input" : name, strerror(errno ? errno : EIO));
  else if (!ok) cli_error("out of memory");
  ok = ok && !ferror(f);
  free(line);
  if (!std_in) fclose(f);
  return ok;
}

int cli_collect_lists(const char *cmd, int argc, char **argv, const cli_list_args *l, bool follow_links,
                      cli_paths *out) {
  cli_paths all = {0};
  bool ok = true, stdin_used = false;
  for (int i = 0; i < argc && ok; i++) {
    if (strcmp(argv[i], "-") != 0) {
      ok = cli_paths_push(&all, argv[i]);
      if (!ok) cli_error("out of memory");
      continue;
    }
    if (!stdin_used) ok = read_list(cmd, "-", l && l->nul, &all); /* "- -": one list */
    stdin_used = true;
  }
  if (ok && l && l->files_from) {
    const bool again = stdin_used && strcmp(l->files_from, "-") == 0;
    if (again) cli_error("%s: the standard input can be read once: give - or --files-from -, not both", cmd);
    ok = !again && read_list(cmd, l->files_from, l->nul, &all);
  }
  if (ok && all.n > (size_t)INT32_MAX) {
    cli_error("%s: more than %d paths", cmd, INT32_MAX);
    ok = false;
  }
  const int rc = ok ? cli_collect((int)all.n, all.v, follow_links, out) : CLI_USAGE;
  cli_paths_free(&all);
  return rc;
}

void cli_file_error(void *user, size_t index, accel_status status, const char *message) {
  const cli_file_errors *e = user;
  cli_error("%s%s%s: %s: %s", CLI_CMD_PREFIX(e->cmd), e->paths[index], accel_status_string(status), message);
}

bool cli_has_operand(const char *cmd, int first, int argc, const char *what) {
  if (first < argc) return true;
  cli_error("%s: no %s given (see accel %.*s --help)", cmd, what, (int)strcspn(cmd, " "), cmd);
  return false;
}

static int stdout_errno;

bool cli_flush_stdout(void) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return true;
  if (!stdout_errno) stdout_errno = errno ? errno : EIO;
  return false;
}

int cli_stdout_error(void) { return stdout_errno; }

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, surrogates or code points past U+10FFFF), 0 if there is none. */
static size_t utf8_length(const unsigned char *s) {
  const unsigned char c = s[0];
  const size_t n = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
  for (size_t k = 1; k < n; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
      (c == 0xF4 && s[1] > 0x8F))
    return 0;
  return n;
}

void cli_json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    const unsigned char c = *p;
    const size_t n = utf8_length(p);
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else if (n) fwrite(p, 1, n, stdout);
    else fputs("\\ufffd", stdout); /* not UTF-8: JSON strings are Unicode */
    p += n ? n : 1;
  }
  putchar('"');
}

/* ------------------------------------------------------------ option values */

bool cli_parse_kinds(const char *cmd, const cli_option *option, const char *list, void *field) {
  (void)option;
  accel_hash_options *o = field;
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

/* v[0..n): a whole number in lo..hi, digits only (a leading '-' only where
 * lo is negative), no overflow. */
static bool whole(const char *v, size_t n, int64_t lo, int64_t hi, int64_t *out) {
  const bool neg = n && *v == '-' && lo < 0;
  v += neg;
  n -= neg;
  uint64_t m = 0;
  for (size_t k = 0; k < n; k++) {
    const uint64_t d = (uint64_t)(v[k] - '0');
    if (v[k] < '0' || v[k] > '9' || m > (UINT64_MAX - d) / 10) return false;
    m = m * 10 + d;
  }
  if (!n || m > (uint64_t)INT64_MAX + neg) return false;
  const int64_t x = !neg ? (int64_t)m : m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

/* v[0..n): a finite real number. */
static bool real(const char *v, size_t n, double *out) {
  char buf[64];
  if (!n || n >= sizeof buf || isspace((unsigned char)*v)) return false;
  memcpy(buf, v, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  *out = strtod(buf, &end);
  return !*end && errno != ERANGE && isfinite(*out);
}

/* Up to max comma-separated numbers: whole ones in lo..hi into ints, or
 * (ints NULL) finite reals into reals. How many, or -1 if one is not. */
static int numbers(const char *v, int max, int64_t lo, int64_t hi, int64_t *ints, double *reals) {
  for (int k = 0;; k++) {
    const size_t len = strcspn(v, ",");
    if (k == max || !(ints ? whole(v, len, lo, hi, &ints[k]) : real(v, len, &reals[k]))) return -1;
    v += len;
    if (!*v++) return k + 1;
  }
}

bool cli_parse_ints(const char *cmd, const char *what, const char *v, int n, int64_t lo, int64_t hi, int64_t *out) {
  if (numbers(v, n, lo, hi, out, NULL) == n) return true;
  if (n == 1)
    cli_error("%s%s%s must be a whole number in %lld..%lld, not '%s'", CLI_CMD_PREFIX(cmd), what, (long long)lo,
              (long long)hi, v);
  else if (hi == INT64_MAX)
    cli_error("%s%s%s takes %d comma-separated whole numbers >= %lld, not '%s'", CLI_CMD_PREFIX(cmd), what, n,
              (long long)lo, v);
  else
    cli_error("%s%s%s takes %d comma-separated whole numbers in %lld..%lld, not '%s'", CLI_CMD_PREFIX(cmd), what, n,
              (long long)lo, (long long)hi, v);
  return false;
}

bool cli_parse_int(const char *cmd, const char *what, const char *v, int lo, int hi, int *out) {
  int64_t x;
  if (!cli_parse_ints(cmd, what, v, 1, lo, hi, &x)) return false;
  *out = (int)x;
  return true;
}

bool cli_parse_reals(const char *cmd, const char *what, const char *v, int n, double *out) {
  if (numbers(v, n, 0, 0, NULL, out) == n) return true;
  if (n == 1) cli_error("%s%s%s takes a finite number, not '%s'", CLI_CMD_PREFIX(cmd), what, v);
  else cli_error("%s%s%s takes %d comma-separated finite numbers, not '%s'", CLI_CMD_PREFIX(cmd), what, n, v);
  return false;
}

/* ------------------------------------------------------------ outputs */

/* Which file a path is: an existing one by device and inode; a new one by
 * its directory's device and inode and its name, or, when even the
 * directory is missing (to be created), by the path's text. */
typedef struct file_key {
  dev_t dev;
  ino_t ino;
  const char *name; /* NULL for an existing file */
  bool output;
  const cli_file *file;
} file_key;

static void key_of(const cli_file *f, bool output, file_key *k) {
  memset(k, 0, sizeof *k);
  k->output = output;
  k->file = f;
  struct stat st;
  if (stat(f->path, &st) == 0) {
    k->dev = st.st_dev;
    k->ino = st.st_ino;
    return;
  }
  const char *slash = strrchr(f->path, '/');
  char *dir = slash ? strndup(f->path, slash == f->path ? 1 : (size_t)(slash - f->path)) : strdup(".");
  if (dir && stat(dir, &st) == 0) {
    k->dev = st.st_dev;
    k->ino = st.st_ino;
    k->name = slash ? slash + 1 : f->path;
  } else {
    k->dev = 0;
    k->ino = 0;
    k->name = f->path;
  }
  free(dir);
}

static int cmp_key(const void *a, const void *b) {
  const file_key *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  if (!x->name != !y->name) return x->name ? 1 : -1;
  if (x->name) {
    const int c = strcmp(x->name, y->name);
    if (c) return c;
  }
  if (x->output != y->output) return x->output ? 1 : -1; /* inputs first in a run */
  return x->file < y->file ? -1 : x->file > y->file;
}

static bool same_source(const cli_file *a, const cli_file *b) {
  struct stat x, y;
  return a->source && b->source &&
         (strcmp(a->source, b->source) == 0 ||
          (stat(a->source, &x) == 0 && stat(b->source, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino));
}

bool cli_check_outputs(const char *cmd, const cli_file *inputs, size_t ninputs, const cli_file *outputs,
                       size_t noutputs) {
  const size_t n = ninputs + noutputs;
  file_key *keys = malloc((n ? n : 1) * sizeof *keys);
  if (!keys) {
    cli_error("out of memory");
    return false;
  }
  for (size_t i = 0; i < ninputs; i++) key_of(&inputs[i], false, &keys[i]);
  for (size_t i = 0; i < noutputs; i++) key_of(&outputs[i], true, &keys[ninputs + i]);
  qsort(keys, n, sizeof *keys, cmp_key);
  bool ok = true;
  for (size_t i = 1; i < n && ok; i++) {
    const file_key *a = &keys[i - 1], *b = &keys[i];
    if (!b->output || cmp_key(a, b) == 0) continue;
    const bool same =
        a->dev == b->dev && a->ino == b->ino && !a->name == !b->name && (!a->name || strcmp(a->name, b->name) == 0);
    if (!same) continue;
    if (a->output && same_source(a->file, b->file)) continue; /* one input given twice: one output */
    if (!a->output)
      cli_error("%s: %s would write %s, which is the input %s", cmd, b->file->what, b->file->path, a->file->path);
    else cli_error("%s: %s and %s would both write %s", cmd, a->file->what, b->file->what, b->file->path);
    ok = false;
  }
  free(keys);
  return ok;
}

bool cli_output_format(const char *cmd, const char *flag, const char *path, unsigned allowed, cli_format *out) {
  static const struct {
    const char *ext;
    cli_format format;
  } names[] = {{"npy", CLI_FORMAT_NPY}, {"raw", CLI_FORMAT_RAW},  {"pgm", CLI_FORMAT_PGM},  {"pnm", CLI_FORMAT_PGM},
               {"tif", CLI_FORMAT_TIF}, {"tiff", CLI_FORMAT_TIF}, {"json", CLI_FORMAT_JSON}};
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  const char *ext = dot && (!slash || dot > slash) ? dot + 1 : "";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((allowed & names[i].format) && strcasecmp(ext, names[i].ext) == 0) {
      *out = names[i].format;
      return true;
    }
  char list[64] = "";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (allowed & names[i].format) {
      strcat(list, list[0] ? ", ." : ".");
      strcat(list, names[i].ext);
    }
  cli_error("%s: %s %s: the file name must end in %s (the format written)", cmd, flag, path, list);
  return false;
}

bool cli_parse_thresholds(const char *cmd, const cli_option *option, const char *v, void *field) {
  (void)option;
  cli_thresholds *th = field;
  if (!*v) {
    cli_error("%s: --threshold is empty", cmd);
    return false;
  }
  int64_t t[ACCEL_INDEX_MAX_FIELDS];
  const int n = numbers(v, ACCEL_INDEX_MAX_FIELDS, 0, 4096, t, NULL);
  if (n < 0) {
    cli_error("%s: --threshold takes integers like 5 or 5,8, not '%s'", cmd, v);
    return false;
  }
  for (int k = 0; k < n; k++) th->v[k] = (uint32_t)t[k];
  th->n = (uint32_t)n;
  return true;
}
