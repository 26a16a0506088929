/* The CPU backend: always present, OpenMP-parallel ops from each domain. */
#include "internal.h"

#include <string.h>

static void cpu_probe(accel__probe_result *out) {
  out->device_count = 1;
  out->reason[0] = '\0';
}

/* every domain's CPU table (ACCEL__DOMAINS of lib/core/backend.h) */
#define CPU_OPS(d) .d = &accel__cpu_##d##_ops,

/* clang-format off */
const accel__backend accel__cpu_backend = {
    .version = ACCEL__BACKEND_VERSION,
    .name = "cpu",
    .kind = ACCEL_BACKEND_CPU,
    .probe = cpu_probe,
    .device_info = NULL,
    .open = NULL,
    .close = NULL,
    ACCEL__DOMAINS(CPU_OPS)
};
/* clang-format on */
