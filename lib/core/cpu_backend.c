/* The CPU backend: always present, OpenMP-parallel ops from each domain. */
#include "internal.h"

#include "hash/ops.h"
#include "image/ops.h"
#include "index/ops.h"
#include "ct/ops.h"
#include "svf/ops.h"

#include <string.h>

static void cpu_probe(accel__probe_result *out) {
  out->device_count = 1;
  out->reason[0] = '\0';
}

const accel__backend accel__cpu_backend = {
    .version = ACCEL__BACKEND_VERSION,
    .name = "cpu",
    .kind = ACCEL_BACKEND_CPU,
    .probe = cpu_probe,
    .device_info = NULL,
    .open = NULL,
    .close = NULL,
    .image = &accel__cpu_image_ops,
    .hash = &accel__cpu_hash_ops,
    .index = &accel__cpu_index_ops,
    .ct = &accel__cpu_ct_ops,
    .svf = &accel__cpu_svf_ops,
};
