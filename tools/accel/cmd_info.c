/* accel info: version, build options, backends, devices, the context. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] info [--format tsv|json]\n"
    "\n"
    "Print the library version, how it was built, which backends exist and why\n"
    "one is unavailable, the CUDA devices, and the context the global options\n"
    "give (so 'accel --backend cuda --strict info' fails where CUDA cannot run).\n"
    "\n";

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static const cli_option OPTIONS[] = {{.name = "--format",
                                      .kind = CLI_OPT_CHOICE,
                                      .offset = 0,
                                      .size = sizeof(bool),
                                      .choices = cli_tsv_json,
                                      .arg = "F",
                                      .help = "text (tsv, the default) or json: one object, name: value"},
                                     {0}};

/* The backends and devices: as text, or as name<TAB>value lines for the JSON report. */
static void print_backends(bool kv) {
  const accel_backend_kind kinds[] = {ACCEL_BACKEND_CPU, ACCEL_BACKEND_CUDA};
  if (!kv) printf("backends:\n");
  for (int k = 0; k < 2; k++) {
    accel_backend_info b;
    accel_backend_info_init(&b, sizeof b);
    if (accel_backend_query(kinds[k], &b)) continue;
    if (kv) {
      printf("backend.%s.compiled\t%d\nbackend.%s.available\t%d\n", b.name, (int)b.compiled, b.name, (int)b.available);
      if (!b.available) printf("backend.%s.reason\t%s\n", b.name, b.reason);
    } else if (b.available) {
      printf("  %-5s available%s\n", b.name, kinds[k] == ACCEL_BACKEND_CUDA ? "" : " (OpenMP CPU path)");
    } else {
      printf("  %-5s %s, unavailable: %s\n", b.name, b.compiled ? "compiled in" : "not compiled in", b.reason);
    }
  }
  int32_t n = 0;
  accel_device_count(&n);
  printf(kv ? "devices\t%d\n" : "devices: %d\n", (int)n);
  for (int32_t i = 0; i < n; i++) {
    accel_device_info d;
    accel_device_info_init(&d, sizeof d);
    if (accel_device_query(i, &d)) {
      printf(kv ? "device%d.error\t%s\n" : "  %d: (query failed: %s)\n", (int)i, accel_last_error(NULL));
      continue;
    }
    if (kv)
      printf("device%d.name\t%s\ndevice%d.compute_capability\t%d.%d\ndevice%d.total_memory\t%llu\n", (int)i, d.name,
             (int)i, d.cc_major, d.cc_minor, (int)i, (unsigned long long)d.total_memory);
    else
      printf(
          "  %d: %s, compute capability %d.%d, %d SMs, %.1f GiB total, %.1f GiB free, driver %d.%d, runtime "
          "%d.%d\n",
          (int)i, d.name, d.cc_major, d.cc_minor, d.multiprocessors, gib(d.total_memory), gib(d.free_memory),
          d.driver_version / 1000, d.driver_version % 1000 / 10, d.runtime_version / 1000,
          d.runtime_version % 1000 / 10);
  }
}

static int run(const cli_globals *g, int argc, char **argv) {
  bool json = false;
  const int first = cli_parse_options("info", OPTIONS, argc, argv, &json);
  if (first < 0) return CLI_USAGE;
  if (first < argc) {
    cli_error("info: unexpected argument '%s'", argv[first]);
    return CLI_USAGE;
  }
  const bool kv = cli_json_on();
  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  if (kv) printf("version\t%s\nabi\t%u\nbuild\t%s\n", accel_version_string(), accel_abi_version(), accel_build_info());
  else printf("libaccel %s (ABI %u)\nbuild: %s\n", accel_version_string(), accel_abi_version(), accel_build_info());
  print_backends(kv);
  accel_ctx_info ci;
  accel_ctx_info_init(&ci, sizeof ci);
  accel_ctx_query(ctx, &ci);
  const char *fallback = ci.fallback == ACCEL_FALLBACK_DENY ? "deny" : "allow";
  if (kv) {
    printf("context.backend\t%s\ncontext.fallback\t%s\ncontext.cpu_threads\t%d\ncontext.log_level\t%s\n",
           accel_backend_name(ci.backend), fallback, (int)ci.cpu_threads, accel_log_level_name(ci.log_level));
    if (ci.backend == ACCEL_BACKEND_CUDA)
      printf("context.device\t%d\ncontext.device_memory_budget\t%llu\n", (int)ci.device,
             (unsigned long long)ci.device_memory_budget);
  } else {
    printf("context: backend %s", accel_backend_name(ci.backend));
    if (ci.backend == ACCEL_BACKEND_CUDA)
      printf(" (device %d, memory budget %.1f GiB)", (int)ci.device, gib(ci.device_memory_budget));
    printf(", fallback %s, %d CPU threads, log level %s\n", fallback, (int)ci.cpu_threads,
           accel_log_level_name(ci.log_level));
  }
  accel_ctx_destroy(ctx);
  return CLI_OK;
}

const cli_command cli_info_command = {.name = "info",
                                      .summary = "show version, build, backends and devices",
                                      .usage = USAGE,
                                      .options = OPTIONS,
                                      .help_column = 12,
                                      .run = run};
