/* tools/accel/cli.h - shared pieces of the accel command-line tool. */
#ifndef ACCEL_CLI_H
#define ACCEL_CLI_H

#include <accel/accel.h>

#include <stdbool.h>

enum {
  CLI_OK = 0,          /* success */
  CLI_SOME_FAILED = 1, /* some inputs failed; the others were processed */
  CLI_USAGE = 2        /* usage or set-up error; nothing was processed */
};

/* Options given before the subcommand. */
typedef struct cli_globals {
  accel_backend_kind backend;
  bool strict;            /* fallback policy DENY */
  accel_log_level log_level;
  int threads;            /* 0: all */
  bool progress;          /* draw progress bars (stderr is a terminal and not --no-progress) */
} cli_globals;

typedef struct cli_command {
  const char *name;
  const char *summary;
  const char *usage; /* full help text */
  int (*run)(const cli_globals *g, int argc, char **argv);
  /* Options may follow the operands ("accel dupes DIR --threshold 3"): the
   * dispatcher moves them first, then "--", then the operands in their
   * order. These options take a separate value. NULL: argv as given. */
  const char *const *value_options;
} cli_command;

extern const cli_command cli_info_command;
extern const cli_command cli_gray_command;
extern const cli_command cli_hash_command;
extern const cli_command cli_dupes_command;
extern const cli_command cli_index_command;
extern const cli_command cli_ct_command;
extern const cli_command cli_shadow_command;
extern const cli_command cli_svf_command;

/* "accel: <message>" on stderr (clearing a progress bar first). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Create the context the global options describe; on failure print why and
 * return CLI_USAGE. Installs a log writer that keeps progress bars tidy. */
int cli_open_ctx(const cli_globals *g, accel_ctx **ctx);

/* True if argv[*i] is `name` taking a value ("--name V" or "--name=V"); then
 * *value is set and *i advanced past it. A missing value is a usage error
 * reported through *missing. */
bool cli_take_value(int argc, char **argv, int *i, const char *name, const char **value, bool *missing);
bool cli_is_help(const char *arg);

/* argv reordered: argv[0], the options (with the values of those in
 * value_options), "--", the operands in their order. A "--" in argv ends the
 * options. NULL when out of memory; free() the array (not the strings). */
char **cli_permute(int argc, char **argv, const char *const *value_options, int *out_argc);

/* A growable list of paths (owned strings). */
typedef struct cli_paths {
  char **v;
  size_t n, cap;
} cli_paths;

bool cli_paths_push(cli_paths *l, const char *path);
void cli_paths_free(cli_paths *l);
/* Append the .jpg/.jpeg/.png files (any case) under dir, recursively, depth
 * first, entries in byte order (reproducible). Prints why on failure. */
bool cli_walk(const char *dir, cli_paths *out);
/* Command-line PATH arguments: directories walked, files taken as given.
 * Returns false if a directory could not be read (the rest is collected). */
bool cli_collect(int argc, char **argv, cli_paths *out, bool *oom);

/* A JSON string literal on stdout. */
void cli_json_string(const char *s);

/* "--kinds a,b,c" into o->kinds / o->nkinds; errors name the command. */
bool cli_parse_kinds(const char *cmd, const char *list, accel_hash_options *o);
/* An integer option in lo..hi; errors name the command (NULL: none) and option. */
bool cli_parse_int(const char *cmd, const char *what, const char *v, int lo, int hi, int *out);

/* The hash options shared by hash, dupes and index build: --kinds, --size
 * (up to max_size), --binbits, --fast. Returns 1 if argv[*i] was one (then
 * *i is past its value), 0 if not, -1 on a bad value (reported). */
int cli_hash_option(const char *cmd, int argc, char **argv, int *i, accel_hash_options *o, int max_size);
/* "--format tsv|json" into *json; false (reported) otherwise. */
bool cli_parse_format(const char *cmd, const char *v, bool *json);
/* "--rule all|any". */
bool cli_parse_rule(const char *cmd, const char *v, accel_index_rule *rule);
/* "--threshold 5" or "5,8": up to ACCEL_INDEX_MAX_FIELDS values in out, *n of them. */
bool cli_parse_thresholds(const char *cmd, const char *v, uint32_t *out, uint32_t *n);

/* Create a directory and its parents (like mkdir -p); prints why on failure. */
bool cli_make_dirs(const char *path);

/* Progress bar on stderr, drawn only when enabled (a terminal), at most ten
 * times a second; finished bars are erased. */
typedef struct cli_progress {
  bool enabled;
  bool drawn;
  const char *label;
  double last_draw;
} cli_progress;

void cli_progress_begin(cli_progress *p, const char *label, bool enabled);
void cli_progress_update(cli_progress *p, double fraction, const char *detail);
void cli_progress_end(cli_progress *p);
/* accel_progress_fn adapter for library calls; user is a cli_progress*. */
int cli_progress_callback(void *user, const char *stage, double fraction);

#endif /* ACCEL_CLI_H */
