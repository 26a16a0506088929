/* accel info: version, build options, backends, devices, the context. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: accel [global options] info\n"
    "\n"
    "Print the library version, how it was built, which backends exist and why\n"
    "one is unavailable, the CUDA devices, and the context the global options\n"
    "give (so 'accel --backend cuda --strict info' fails where CUDA cannot run).\n";

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static int run(const cli_globals *g, int argc, char **argv) {
  if (argc > 1) {
    cli_error("info: unexpected argument '%s'", argv[1]);
    return CLI_USAGE;
  }
  accel_ctx *ctx = NULL;
  int rc = cli_open_ctx(g, &ctx);
  if (rc) return rc;
  printf("libaccel %s (ABI %u)\n", accel_version_string(), accel_abi_version());
  printf("build: %s\n", accel_build_info());
  printf("backends:\n");
  const accel_backend_kind kinds[] = {ACCEL_BACKEND_CPU, ACCEL_BACKEND_CUDA};
  for (int k = 0; k < 2; k++) {
    accel_backend_info b;
    accel_backend_info_init(&b, sizeof b);
    if (accel_backend_query(kinds[k], &b)) continue;
    if (b.available) printf("  %-5s available%s\n", b.name, kinds[k] == ACCEL_BACKEND_CUDA ? "" : " (OpenMP CPU path)");
    else printf("  %-5s %s, unavailable: %s\n", b.name, b.compiled ? "compiled in" : "not compiled in", b.reason);
  }
  int32_t n = 0;
  accel_device_count(&n);
  printf("devices: %d\n", (int)n);
  for (int32_t i = 0; i < n; i++) {
    accel_device_info d;
    accel_device_info_init(&d, sizeof d);
    if (accel_device_query(i, &d)) {
      printf("  %d: (query failed: %s)\n", (int)i, accel_last_error(NULL));
      continue;
    }
    printf("  %d: %s, compute capability %d.%d, %d SMs, %.1f GiB total, %.1f GiB free, driver %d.%d, runtime %d.%d\n",
           (int)i, d.name, d.cc_major, d.cc_minor, d.multiprocessors, gib(d.total_memory), gib(d.free_memory),
           d.driver_version / 1000, d.driver_version % 1000 / 10, d.runtime_version / 1000,
           d.runtime_version % 1000 / 10);
  }

  accel_ctx_info ci;
  accel_ctx_info_init(&ci, sizeof ci);
  accel_ctx_query(ctx, &ci);
  printf("context: backend %s", accel_backend_name(ci.backend));
  if (ci.backend == ACCEL_BACKEND_CUDA)
    printf(" (device %d, memory budget %.1f GiB)", (int)ci.device, gib(ci.device_memory_budget));
  printf(", fallback %s, %d CPU threads, log level %s\n", ci.fallback == ACCEL_FALLBACK_DENY ? "deny" : "allow",
         (int)ci.cpu_threads, accel_log_level_name(ci.log_level));
  accel_ctx_destroy(ctx);
  return CLI_OK;
}

const cli_command cli_info_command = {
    .name = "info", .summary = "show version, build, backends and devices", .usage = USAGE, .run = run};
