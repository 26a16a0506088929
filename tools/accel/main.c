/* accel - command-line front end of libaccel. Parses options, dispatches to
 * subcommands; the work itself is done by the library. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The commands, in the order of the help: each is `cli_<name>_command`,
 * defined in cmd_<file>.c. A new command adds its name here. */
#define CLI_COMMANDS(X) X(info) X(hash) X(dupes) X(index) X(ct) X(shadow) X(svf) X(register) X(warp) X(gray)

#define CLI_DECLARE(name) extern const cli_command cli_##name##_command;
CLI_COMMANDS(CLI_DECLARE)
#define CLI_ENTRY(name) &cli_##name##_command,
static const cli_command *const COMMANDS[] = {CLI_COMMANDS(CLI_ENTRY)};
enum { NCOMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static bool parse_backend(const char *cmd, const cli_option *o, const char *v, void *field) {
  (void)cmd;
  if (!accel_backend_from_string(v, field)) return true;
  cli_error("%s: %s", o->name, accel_last_error(NULL));
  return false;
}

static bool parse_log_level(const char *cmd, const cli_option *o, const char *v, void *field) {
  (void)cmd;
  if (!accel_log_level_from_string(v, field)) return true;
  cli_error("%s: %s", o->name, accel_last_error(NULL));
  return false;
}

static bool parse_sync(const char *cmd, const cli_option *o, const char *v, void *field) {
  (void)cmd;
  static const char *const NAMES[] = {"index", "all", "none"};
  for (int i = 0; i < 3; i++)
    if (strcmp(v, NAMES[i]) == 0) {
      *(accel_sync_policy *)field = (accel_sync_policy)i;
      return true;
    }
  cli_error("%s: unknown value '%s' (expected index, all or none)", o->name, v);
  return false;
}

static const cli_option GLOBAL_OPTIONS[] = {
    {.name = "--backend",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(cli_globals, backend),
     .parse = parse_backend,
     .arg = "auto|cpu|cuda",
     .help = "where stages run (default auto; env ACCEL_BACKEND wins)"},
    {.name = "--strict",
     .kind = CLI_OPT_FLAG,
     CLI_AT(cli_globals, strict),
     .help = "a GPU failure is an error instead of a CPU fallback"},
    {.name = "--log-level",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(cli_globals, log_level),
     .parse = parse_log_level,
     .arg = "LEVEL",
     .help = "debug|info|warn|error|off (default warn; env ACCEL_LOG wins)"},
    {.name = "--threads",
     .kind = CLI_OPT_INT,
     CLI_AT(cli_globals, threads),
     .lo = 0,
     .hi = ACCEL_CPU_THREADS_MAX,
     .arg = "N",
     .help = "CPU threads, 0..1024 (default 0 = all)"},
    {.name = "--sync",
     .kind = CLI_OPT_CUSTOM,
     CLI_AT(cli_globals, sync),
     .parse = parse_sync,
     .arg = "index|all|none",
     .help = "which saved files are fsync'd before they replace their target\n"
             "(default index: index files; images and arrays are replaced\n"
             "atomically but not synced)"},
    {.name = "--max-pixels",
     .kind = CLI_OPT_INT,
     CLI_AT(cli_globals, max_pixels),
     .lo = 0,
     .hi = INT64_MAX,
     .arg = "N",
     .help = "the largest image (width x height) read or written\n"
             "(default 0: 1073741824, 2^30)"},
    {.name = "--no-progress",
     .kind = CLI_OPT_CLEAR,
     CLI_AT(cli_globals, progress),
     .help = "never draw progress bars (they only appear on a terminal)"},
    {.name = "--version", .kind = CLI_OPT_TEXT, .help = "print the version and exit"},
    {.name = "--help", .kind = CLI_OPT_TEXT, .help = "print this help and exit"},
    {0}};

static void usage(FILE *out) {
  fprintf(out,
          "usage: accel [global options] <command> [options] [args]\n"
          "\n"
          "GPU-accelerated image hashing, similarity search, CT segmentation, shadows and\n"
          "sky view factors, with an identical CPU path.\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-9s %s\n", COMMANDS[i]->name, COMMANDS[i]->summary);
  fprintf(out,
          "  help     show help for a command\n"
          "\n"
          "global options (before the command or among its options):\n");
  cli_print_options(out, GLOBAL_OPTIONS, 25);
  fprintf(out,
          "\n"
          "every command: --format json makes its report one JSON document (errors included)\n"
          "exit status: 0 success, 1 some inputs failed, 2 usage or set-up error\n"
          "'accel <command> --help' describes a command.\n");
}

static const cli_command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(COMMANDS[i]->name, name) == 0) return COMMANDS[i];
  return NULL;
}

/* "accel help [command]". */
static int help(int argc, char **argv) {
  if (argc < 1 || cli_is_help(argv[0]) || strcmp(argv[0], "help") == 0) {
    usage(stdout);
    return CLI_OK;
  }
  const cli_command *c = find_command(argv[0]);
  if (!c) {
    cli_error("unknown command '%s' (see accel --help)", argv[0]);
    return CLI_USAGE;
  }
  cli_print_help(stdout, c);
  return CLI_OK;
}

/* The subcommand argv[1] names; NULL (reported) if none does. */
static const cli_command *find_subcommand(const cli_command *c, int argc, char **argv) {
  char list[128] = "";
  size_t n = 0;
  while (c->subcommands[n]) n++;
  for (size_t k = 0; k < n; k++) {
    if (argc > 1 && strcmp(argv[1], c->subcommands[k]->name) == 0) return c->subcommands[k];
    cli_list_add(list, sizeof list, k, k + 1 == n, c->subcommands[k]->name);
  }
  if (argc < 2) cli_error("%s: %s? (see accel %s --help)", c->name, list, c->name);
  else cli_error("%s: unknown subcommand '%s' (%s)", c->name, argv[1], list);
  return NULL;
}

/* The global options among a command's ("accel hash DIR --threads 2"),
 * read into g and taken out of argv; not those after "--", nor the values of
 * the command's options (which are kept with them). */
static int take_globals(cli_globals *g, const cli_option *options, int *argc, char **argv) {
  int n = 1, i = 1;
  for (; i < *argc && strcmp(argv[i], "--") != 0; i++) {
    const int taken = cli_take_option(NULL, GLOBAL_OPTIONS, *argc, argv, &i, g);
    if (taken < 0) return CLI_USAGE;
    if (taken) continue;
    argv[n++] = argv[i];
    if (cli_takes_value(options, argv[i]) && i + 1 < *argc) argv[n++] = argv[++i];
  }
  while (i < *argc) argv[n++] = argv[i++];
  argv[n] = NULL;
  *argc = n;
  return CLI_OK;
}

/* A command (or subcommand) with its arguments: the global options taken
 * out, the others first. */
static int run_parsed(cli_globals *g, const cli_command *c, int argc, char **argv) {
  if (take_globals(g, c->options, &argc, argv)) return CLI_USAGE;
  if (!c->options) return c->run(g, argc, argv);
  int pargc;
  char **pargv = cli_permute(argc, argv, c->options, &pargc);
  if (!pargv) {
    cli_error("out of memory");
    return CLI_USAGE;
  }
  int rc = c->run(g, pargc, pargv);
  free(pargv);
  return rc;
}

/* A command: its help, or its run on argv (argv[0] names it). */
static int run_command(cli_globals *g, const cli_command *c, int argc, char **argv) {
  for (int j = 1; j < argc && strcmp(argv[j], "--") != 0; j++)
    if (cli_is_help(argv[j])) {
      cli_print_help(stdout, c);
      return CLI_OK;
    }
  if (c->subcommands) {
    const cli_command *sub = find_subcommand(c, argc, argv);
    if (!sub) return CLI_USAGE;
    c = sub;
    argc--;
    argv++;
  }
  cli_json_set(cli_wants_json(argc, argv));
  if (!cli_json_on()) return run_parsed(g, c, argc, argv);
  if (c->json_native) {
    const int rc = run_parsed(g, c, argc, argv);
    if (!cli_json_begun()) cli_json_from_kv("", 0, rc); /* failed before its report */
    return rc;
  }
  /* name<TAB>value lines captured, then one JSON object (glibc's stdout is a variable) */
  char *text = NULL;
  size_t len = 0;
  FILE *out = stdout, *mem = open_memstream(&text, &len);
  if (!mem) {
    cli_error("out of memory");
    cli_json_from_kv("", 0, CLI_USAGE);
    return CLI_USAGE;
  }
  stdout = mem;
  int rc = run_parsed(g, c, argc, argv);
  const bool lost = fclose(mem) != 0;
  stdout = out;
  if (lost && !rc) rc = CLI_SOME_FAILED;
  cli_json_from_kv(text ? text : "", text ? len : 0, rc);
  free(text);
  return rc;
}

static int run_main(int argc, char **argv) {
  cli_globals g = {.backend = ACCEL_BACKEND_AUTO, .log_level = ACCEL_LOG_WARN, .progress = isatty(2) != 0};
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (cli_is_help(argv[i])) {
      usage(stdout);
      return CLI_OK;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("accel %s (libaccel %s, ABI %u)\n", ACCEL_VERSION_STRING, accel_version_string(), accel_abi_version());
      return CLI_OK;
    }
    const int taken = cli_take_option(NULL, GLOBAL_OPTIONS, argc, argv, &i, &g);
    if (taken < 0) return CLI_USAGE;
    if (!taken) {
      cli_error("unknown global option '%s' (see accel --help)", argv[i]);
      return CLI_USAGE;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (strcmp(argv[i], "help") == 0) return help(argc - i - 1, argv + i + 1);
  const cli_command *c = find_command(argv[i]);
  if (!c) {
    cli_error("unknown command '%s' (see accel --help)", argv[i]);
    return CLI_USAGE;
  }
  return run_command(&g, c, argc - i, argv + i);
}

int main(int argc, char **argv) {
  int rc = run_main(argc, argv);
  /* Output lost (a full disk, a closed descriptor) must not pass for success:
   * stdio reports a failed write only when its buffer is flushed. */
  errno = 0;
  cli_flush_stdout();
  int err = cli_stdout_error();
  if (fclose(stdout) != 0 && !err) err = errno ? errno : EIO;
  if (err) {
    cli_error("cannot write the standard output: %s", strerror(err));
    if (rc == CLI_OK) rc = CLI_SOME_FAILED;
  }
  return rc;
}
