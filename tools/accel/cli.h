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
/* Command-line PATH arguments: directories walked recursively for .jpg,
 * .jpeg and .png files (any case), depth first, entries in byte order
 * (reproducible); files taken as given. Each file is listed once, however
 * many names, links or operands lead to it (device and inode); no directory
 * is entered twice; symbolic links to directories are followed only with
 * follow_links (a link to "." no longer loops). Returns false if a directory
 * could not be read (the rest is collected; why is printed), or on *oom. */
bool cli_collect(int argc, char **argv, bool follow_links, cli_paths *out, bool *oom);

/* Flush stdout (results appear as they are ready). False on a write error,
 * whose errno is kept for the final report: main() turns any lost output
 * into exit status 1 with a message. */
bool cli_flush_stdout(void);
/* errno of the first failed flush of stdout, 0 if none. */
int cli_stdout_error(void);

/* A JSON string literal on stdout. */
void cli_json_string(const char *s);

/* "--kinds a,b,c" into o->kinds / o->nkinds; errors name the command. */
bool cli_parse_kinds(const char *cmd, const char *list, accel_hash_options *o);
/* Option values: exactly n comma-separated numbers ("64,96,80"). Whole
 * numbers are parsed as integers (digits, a leading '-' only where lo is
 * negative; no spaces, signs, exponents or overflow), within lo..hi; real
 * numbers must be finite. Errors name the command (NULL: none) and the
 * option (what), and are printed. */
bool cli_parse_ints(const char *cmd, const char *what, const char *v, int n, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_reals(const char *cmd, const char *what, const char *v, int n, double *out);
/* One whole number into an int. */
bool cli_parse_int(const char *cmd, const char *what, const char *v, int lo, int hi, int *out);

/* A file a command reads or writes, and how to name it in messages. */
typedef struct cli_file {
  const char *path;
  const char *what;   /* who writes it, for messages: "--out-labels", an input's path, ... */
  const char *source; /* outputs: the input it is made from, or NULL; two outputs made from
                         the same input may share a file (the same input given twice) */
} cli_file;

/* Refuse (printing why; a usage error) outputs that would overwrite an input
 * or each other. Paths are compared as files: an existing one by device and
 * inode (hard links, symbolic links, "./x" and "x" alike), a new one by its
 * directory's identity and its name. */
bool cli_check_outputs(const char *cmd, const cli_file *inputs, size_t ninputs, const cli_file *outputs,
                       size_t noutputs);

/* File formats an output's extension can name (case-insensitive): .npy,
 * .raw, .pgm/.pnm, .tif/.tiff, .json. */
typedef enum cli_format {
  CLI_FORMAT_NPY = 1,
  CLI_FORMAT_RAW = 2,
  CLI_FORMAT_PGM = 4,
  CLI_FORMAT_TIF = 8,
  CLI_FORMAT_JSON = 16
} cli_format;
/* The format path's extension names, when it is one of `allowed` (a mask of
 * cli_format); else false, printing which extensions `flag` takes. */
bool cli_output_format(const char *cmd, const char *flag, const char *path, unsigned allowed, cli_format *out);

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

/* qsort() order of strings (an array of char *): byte order. */
int cli_cmp_str(const void *a, const void *b);

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
