/* Shared CLI pieces: errors, the context, option values, progress bars. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
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
  accel_ctx_options_init(&o);
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
  if (*i + 1 >= argc) {
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
