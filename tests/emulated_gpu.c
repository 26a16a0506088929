/* The emulated CUDA backend for tests (see emulated_gpu.h). */
#include "emulated_gpu.h"

#if EXPECT_CUDA
#include "core/internal.h"
#include "hash/ops.h"
#include "index/ops.h"
#include "ct/ops.h"
#include "svf/ops.h"

static accel_status emu_open(accel__backend_config *cfg, void **state, char *why) {
  (void)why;
  cfg->memory_budget = (uint64_t)1 << 30;
  *state = NULL;
  return ACCEL_OK;
}

static void emu_probe(accel__probe_result *out) { out->device_count = 1; }

static const accel__backend emulated_gpu = {
    .version = ACCEL__BACKEND_VERSION,
    .name = "cuda-emulated",
    .kind = ACCEL_BACKEND_CUDA,
    .probe = emu_probe,
    .open = emu_open,
    .hash = &accel__cuda_hash_ops_emulated,
    .index = &accel__cuda_index_ops_emulated,
    .ct = &accel__cuda_ct_ops_emulated,
    .svf = &accel__cuda_svf_ops_emulated,
};

accel_ctx *make_emulated_gpu_ctx(accel_fallback_policy policy, log_capture *cap) {
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = ACCEL_BACKEND_CUDA;
  o.fallback = policy;
  if (cap) {
    o.log_fn = capture_log;
    o.log_user = cap;
  }
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel__ctx_create_with(&o, &emulated_gpu, &ctx), ACCEL_OK);
  return ctx;
}
#endif
