/* accel - command-line front end of libaccel. Parses options, dispatches to
 * subcommands; the work itself is done by the library. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_command *const COMMANDS[] = {&cli_info_command, &cli_hash_command, &cli_dupes_command,
                                              &cli_index_command, &cli_ct_command, &cli_shadow_command,
                                              &cli_svf_command, &cli_gray_command};
enum { NCOMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static void usage(FILE *out) {
  fprintf(out,
          "usage: accel [global options] <command> [options] [args]\n"
          "\n"
          "GPU-accelerated image hashing, similarity search, CT segmentation, sky view\n"
          "factors and registration, with an identical CPU path.\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-8s %s\n", COMMANDS[i]->name, COMMANDS[i]->summary);
  fprintf(out,
          "  help     show help for a command\n"
          "\n"
          "global options (before the command):\n"
          "  --backend auto|cpu|cuda  where stages run (default auto; env ACCEL_BACKEND wins)\n"
          "  --strict                 a GPU failure is an error instead of a CPU fallback\n"
          "  --log-level LEVEL        debug|info|warn|error|off (default warn; env ACCEL_LOG wins)\n"
          "  --threads N              CPU threads, 0..1024 (default 0 = all)\n"
          "  --no-progress            never draw progress bars (they only appear on a terminal)\n"
          "  --version                print the version and exit\n"
          "  --help                   print this help and exit\n"
          "\n"
          "exit status: 0 success, 1 some inputs failed, 2 usage or set-up error\n"
          "'accel <command> --help' describes a command.\n");
}

static const cli_command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(COMMANDS[i]->name, name) == 0) return COMMANDS[i];
  return NULL;
}

static int run_main(int argc, char **argv) {
  cli_globals g = {.backend = ACCEL_BACKEND_AUTO, .log_level = ACCEL_LOG_WARN, .progress = isatty(2) != 0};
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i], *v = NULL;
    bool missing = false;
    if (cli_is_help(a)) {
      usage(stdout);
      return CLI_OK;
    } else if (strcmp(a, "--version") == 0) {
      printf("accel %s (libaccel %s, ABI %u)\n", ACCEL_VERSION_STRING, accel_version_string(), accel_abi_version());
      return CLI_OK;
    } else if (strcmp(a, "--strict") == 0) {
      g.strict = true;
    } else if (strcmp(a, "--no-progress") == 0) {
      g.progress = false;
    } else if (cli_take_value(argc, argv, &i, "--backend", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (accel_backend_from_string(v, &g.backend)) {
        cli_error("--backend: %s", accel_last_error(NULL));
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--log-level", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (accel_log_level_from_string(v, &g.log_level)) {
        cli_error("--log-level: %s", accel_last_error(NULL));
        return CLI_USAGE;
      }
    } else if (cli_take_value(argc, argv, &i, "--threads", &v, &missing)) {
      if (missing) return CLI_USAGE;
      if (!cli_parse_int(NULL, "--threads", v, 0, ACCEL_CPU_THREADS_MAX, &g.threads)) return CLI_USAGE;
    } else {
      cli_error("unknown global option '%s' (see accel --help)", a);
      return CLI_USAGE;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *name = argv[i];
  if (strcmp(name, "help") == 0) {
    if (i + 1 >= argc || cli_is_help(argv[i + 1]) || strcmp(argv[i + 1], "help") == 0) {
      usage(stdout);
      return CLI_OK;
    }
    const cli_command *c = find_command(argv[i + 1]);
    if (!c) {
      cli_error("unknown command '%s' (see accel --help)", argv[i + 1]);
      return CLI_USAGE;
    }
    fputs(c->usage, stdout);
    return CLI_OK;
  }
  const cli_command *c = find_command(name);
  if (!c) {
    cli_error("unknown command '%s' (see accel --help)", name);
    return CLI_USAGE;
  }
  for (int j = i + 1; j < argc; j++) {
    if (strcmp(argv[j], "--") == 0) break;
    if (cli_is_help(argv[j])) {
      fputs(c->usage, stdout);
      return CLI_OK;
    }
  }
  if (!c->value_options) return c->run(&g, argc - i, argv + i);
  int pargc;
  char **pargv = cli_permute(argc - i, argv + i, c->value_options, &pargc);
  if (!pargv) {
    cli_error("out of memory");
    return CLI_USAGE;
  }
  int rc = c->run(&g, pargc, pargv);
  free(pargv);
  return rc;
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
