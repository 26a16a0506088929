/* tools/accel/cli.h - shared pieces of the accel command-line tool. */
#ifndef ACCEL_CLI_H
#define ACCEL_CLI_H

#include <accel/accel.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
  CLI_OK = 0,          /* success */
  CLI_SOME_FAILED = 1, /* some inputs failed; the others were processed */
  CLI_USAGE = 2        /* usage or set-up error; nothing was processed */
};

/* The global options, given before the command or among its options. */
typedef struct cli_globals {
  accel_backend_kind backend;
  bool strict; /* fallback policy DENY */
  accel_log_level log_level;
  int threads;            /* 0: all */
  bool progress;          /* draw progress bars (stderr is a terminal and not --no-progress) */
  accel_sync_policy sync; /* which saves are fsync'd */
  int64_t max_pixels;     /* the loaders' and outputs' pixel limit; 0: the library's default */
} cli_globals;

/* ------------------------------------------------------------ options
 * Each command describes its options once, in a table: the table parses
 * them into the fields of the command's argument struct, says which take a
 * value (so that they may follow the operands), and writes the options part
 * of the command's help. */

typedef enum cli_opt_kind {
  CLI_OPT_END = 0, /* ends a table */
  CLI_OPT_TEXT,    /* not parsed: a line of the help (help; with a name, laid out as an option) */
  CLI_OPT_FLAG,    /* no value: sets the field (bool or integer) to 1 */
  CLI_OPT_CLEAR,   /* no value: sets it to 0 */
  CLI_OPT_INT,     /* count (default 1) comma-separated whole numbers in lo..hi (integer fields) */
  CLI_OPT_REAL,    /* count (default 1) comma-separated finite numbers (double fields); with
                      range, each >= min (> min when exclusive), else "<label> takes <range>" */
  CLI_OPT_STRING,  /* the value itself (a const char * field) */
  CLI_OPT_CHOICE,  /* one of the choices' names: its value (an integer, enum or bool field) */
  CLI_OPT_CUSTOM   /* parse() reads the value into the field */
} cli_opt_kind;

typedef struct cli_choice {
  const char *name; /* NULL ends the list */
  int value;
} cli_choice;

typedef struct cli_option cli_option;
/* Reads v into field; false after printing why (naming cmd and the option). */
typedef bool (*cli_parse_fn)(const char *cmd, const cli_option *option, const char *v, void *field);

struct cli_option {
  const char *name; /* "--size"; NULL only in a text line */
  cli_opt_kind kind;
  size_t offset, size; /* the field in the argument struct: CLI_AT(type, member) */
  size_t seen;         /* 1 + the offset of a bool set when the option is given (CLI_SEEN); 0: none */
  const char *arg;     /* the value's name in the help: "N" */
  const char *help;    /* the help, lines separated by '\n'; NULL: listed beside the next such options */
  const char *label;   /* how value errors name the option (default: name) */
  int count;           /* CLI_OPT_INT, CLI_OPT_REAL: how many values (0: 1) */
  int64_t lo, hi;      /* CLI_OPT_INT */
  double min;          /* CLI_OPT_REAL with range */
  bool exclusive;
  double max;         /* CLI_OPT_REAL with range: the largest value (0: no upper bound) */
  bool max_exclusive; /* max itself refused */
  const char *range;
  const cli_choice *choices; /* CLI_OPT_CHOICE */
  cli_parse_fn parse;        /* CLI_OPT_CUSTOM */
};

#define CLI_AT(type, member) .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)
#define CLI_SEEN(type, member) .seen = offsetof(type, member) + 1

/* argv[*i] against the table: 1 if it is one of its options (then *i is on
 * its value, if any, which is read into args), 0 if not, -1 after a usage
 * error (printed; cmd names the command, NULL for the global options). */
int cli_take_option(const char *cmd, const cli_option *table, int argc, char **argv, int *i, void *args);
/* The options of argv[1..] into args, up to the first operand or "--".
 * Returns the index of the first operand (argc: none), or -1 after a usage
 * error (printed). An unknown option is one; the message sends the user to
 * the help of cmd's first word ("index build": accel index --help). */
int cli_parse_options(const char *cmd, const cli_option *table, int argc, char **argv, void *args);
/* True if arg is an option of the table that takes a separate value. */
bool cli_takes_value(const cli_option *table, const char *arg);
/* The options part of a help: each option's name, value and help, the help
 * starting `column` characters after the indent. */
void cli_print_options(FILE *out, const cli_option *table, int column);
/* v, one of the choices: its value in *out. Else false, printing
 * "<cmd>: <what> must be a, b or c, not '<v>'". */
bool cli_parse_choice(const char *cmd, const char *what, const cli_choice *choices, const char *v, int *out);
/* Appends name to a list "a, b or c" being written in buf: index is its
 * position in the list, last whether it ends it. */
void cli_list_add(char *buf, size_t size, size_t index, bool last, const char *name);

/* "--format tsv|json": a bool, true for json. */
extern const cli_choice cli_tsv_json[];
/* "--rule all|any". */
extern const cli_choice cli_rules[];

/* ------------------------------------------------------------ commands */

typedef struct cli_command {
  const char *name;
  const char *summary;
  /* The help: usage, then the options the table describes (their help
   * starting help_column characters in), then usage_tail. */
  const char *usage;
  /* The options. Given (even empty), they may follow the operands ("accel
   * dupes DIR --threshold 3"): the dispatcher moves them first, then "--",
   * then the operands in their order. NULL: argv as given. A command with
   * subcommands lists here the options its help describes. */
  const cli_option *options;
  int help_column;
  const char *usage_tail;
  int (*run)(const cli_globals *g, int argc, char **argv);
  /* --format json: false, the command prints name<TAB>value lines (and
   * plain lines) that the dispatcher turns into one JSON object with the
   * exit status and the error messages; true, the command prints its own
   * JSON (calling cli_json_begin() first). */
  bool json_native;
  /* NULL, or the subcommands (NULL-terminated): argv[1] names one, which
   * gets argv[1..] and is parsed by its own options. */
  const struct cli_command *const *subcommands;
} cli_command;

/* ------------------------------------------------------------ JSON reports
 * `--format json` (any command; `--format=json`, or json in a comma list
 * such as `--format tif,json` where --format also names a file type) makes
 * the report on stdout one JSON document. While it is on, every message
 * cli_error prints is also kept; a command that fails before printing its
 * report leaves {"exit_status": N, "errors": [messages]} on stdout. */

/* True when the report is JSON. */
bool cli_json_on(void);
void cli_json_set(bool on);
/* A native JSON command starts printing its document. */
void cli_json_begin(void);
bool cli_json_begun(void);
/* The messages kept so far: a JSON array on stdout. */
void cli_json_errors(void);
/* argv[1..] (up to "--") asks for JSON: --format json, --format=json, or a
 * comma list with json. */
bool cli_wants_json(int argc, char **argv);
/* A captured name<TAB>value report as one JSON object on stdout (numbers
 * and comma lists of numbers as such, other values as strings, lines
 * without a tab in "outputs"), with "exit_status" and "errors". */
void cli_json_from_kv(const char *text, size_t len, int rc);

/* A TSV field on stdout: backslash, tab, newline and carriage return written
 * as \\, \t, \n and \r, every other byte as it is, so that any file name
 * survives (docs/cli.md). */
void cli_tsv_field(const char *s);

/* The help of a command. */
void cli_print_help(FILE *out, const cli_command *c);

/* Each command file defines one `const cli_command cli_<name>_command`;
 * main.c's CLI_COMMANDS lists them. */

/* For "%s%s..." in messages: "<cmd>: ", or nothing when cmd is NULL. */
#define CLI_CMD_PREFIX(cmd) (cmd) ? (cmd) : "", (cmd) ? ": " : ""

/* "accel: <message>" on stderr (clearing a progress bar first). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Create the context the global options describe; on failure print why and
 * return CLI_USAGE. Installs a log writer that keeps progress bars tidy. */
int cli_open_ctx(const cli_globals *g, accel_ctx **ctx);

bool cli_is_help(const char *arg);

/* argv reordered: argv[0], the options of the table (with their values),
 * "--", the operands in their order. A "--" in argv ends the options. NULL
 * when out of memory; free() the array (not the strings). */
char **cli_permute(int argc, char **argv, const cli_option *table, int *out_argc);

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
 * follow_links (a link to "." no longer loops). Returns CLI_OK,
 * CLI_SOME_FAILED if a directory could not be read (the rest is collected;
 * why is printed), or CLI_USAGE when out of memory (printed; *out is then
 * empty). */
int cli_collect(int argc, char **argv, bool follow_links, cli_paths *out);
/* ------------------------------------------------------------ path lists
 * Commands that take PATH operands also read them from lists: the operand
 * "-" (the standard input) and --files-from FILE ("-": the standard input),
 * one path per line, or NUL-terminated with -0. Empty entries are skipped. */
typedef struct cli_list_args {
  const char *files_from;
  bool nul;
} cli_list_args;

#define CLI_LIST_OPTIONS(type, member)                                                                                 \
  {.name = "--files-from",                                                                                             \
   .kind = CLI_OPT_STRING,                                                                                             \
   CLI_AT(type, member.files_from),                                                                                    \
   .arg = "F",                                                                                                         \
   .help =                                                                                                             \
       "also the paths listed in file F, one a line (F = -: standard input);\n"                                        \
       "a PATH operand - reads such a list from the standard input"},                                                  \
  {                                                                                                                    \
    .name = "-0", .kind = CLI_OPT_FLAG, CLI_AT(type, member.nul),                                                      \
    .help = "lists are NUL-separated (find -print0), not one path a line"                                              \
  }

/* True if the command has paths to work on: an operand at argv[first], or a
 * list; else false, as cli_has_operand. */
bool cli_has_paths(const char *cmd, int first, int argc, const cli_list_args *l);
/* cli_collect over the operands, "-" and the --files-from list expanded in
 * place. A list that cannot be read is a usage error (printed). */
int cli_collect_lists(const char *cmd, int argc, char **argv, const cli_list_args *l, bool follow_links,
                      cli_paths *out);

/* An accel_hash_error_fn for a batch of paths (user: a cli_file_errors):
 * "[<cmd>: ]<path>: <status>: <message>". */
typedef struct cli_file_errors {
  const char *cmd; /* NULL: no prefix */
  char *const *paths;
} cli_file_errors;
void cli_file_error(void *user, size_t index, accel_status status, const char *message);
/* True if argv[first] is an operand; else false, printing "<cmd>: no <what>
 * given" and where the help is. */
bool cli_has_operand(const char *cmd, int first, int argc, const char *what);

/* Flush stdout (results appear as they are ready). False on a write error,
 * whose errno is kept for the final report: main() turns any lost output
 * into exit status 1 with a message. */
bool cli_flush_stdout(void);
/* errno of the first failed flush of stdout, 0 if none. */
int cli_stdout_error(void);

/* A JSON string literal on stdout. */
void cli_json_string(const char *s);

/* Option values: exactly n comma-separated numbers ("64,96,80"). Whole
 * numbers are parsed as integers (digits, a leading '-' only where lo is
 * negative; no spaces, signs, exponents or overflow), within lo..hi; real
 * numbers must be finite. Errors name the command (NULL: none) and the
 * option (what), and are printed. */
bool cli_parse_ints(const char *cmd, const char *what, const char *v, int n, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_reals(const char *cmd, const char *what, const char *v, int n, double *out);
/* One whole number into an int. */
bool cli_parse_int(const char *cmd, const char *what, const char *v, int lo, int hi, int *out);

/* Custom option readers. "--kinds a,b,c" into an accel_hash_options field
 * (kinds, nkinds). */
bool cli_parse_kinds(const char *cmd, const cli_option *o, const char *v, void *field);
/* "--threshold 5" or "5,8" into a cli_thresholds field. */
typedef struct cli_thresholds {
  uint32_t v[ACCEL_INDEX_MAX_FIELDS];
  uint32_t n;
} cli_thresholds;
bool cli_parse_thresholds(const char *cmd, const cli_option *o, const char *v, void *field);

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

/* qsort() order of strings (an array of char *): byte order. */
int cli_cmp_str(const void *a, const void *b);

/* Create a directory and its parents (like mkdir -p); prints why on failure. */
bool cli_make_dirs(const char *path);

/* Outputs written whole or not at all: cli_atomic_open creates a temporary
 * file beside `path` (*tmp, to pass on) and returns its descriptor, or -1
 * after printing why; cli_atomic_close (with ok: whether everything was
 * written) gives it a new file's permissions, syncs it under --sync all
 * (cli_sync_all, set by cli_open_ctx) and renames it over `path`, or
 * removes it, printing why when that fails; frees *tmp. */
extern bool cli_sync_all;
int cli_atomic_open(const char *cmd, const char *path, char **tmp);
bool cli_atomic_close(const char *cmd, const char *path, int fd, char *tmp, bool ok);

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
