/* The emulated CUDA backend for tests (see emulated_gpu.h). */
#include "emulated_gpu.h"

#if EXPECT_CUDA
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

static uint64_t emulated_budget; /* 0: the emulated device's own */

void set_emulated_gpu_budget(uint64_t bytes) { emulated_budget = bytes; }

accel_ctx *make_emulated_gpu_ctx(accel_fallback_policy policy, log_capture *cap) {
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = ACCEL_BACKEND_CUDA;
  o.fallback = policy;
  o.device_memory_budget = emulated_budget;
  o.log_fn = cap ? capture_log : NULL;
  o.log_user = cap;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel__ctx_create_with(&o, accel__cuda_emulated_backend(), &ctx), ACCEL_OK);
  return ctx;
}

static accel_stage_stats stage_stats(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_msg(accel_ctx_stats_find(ctx, stage, &st) == ACCEL_OK, "no stats for %s", stage);
  return st;
}

int64_t fault_sweep(gpu_ctx_fn make, const char *stage, gpu_stage_fn run, void *user) {
  char failed[160];
  snprintf(failed, sizeof failed, "[GPU] %s failed: ", stage);
  for (int64_t at = 0;; at++) {
    log_capture cap = {0};
    accel_ctx *ctx = make(ACCEL_FALLBACK_ALLOW, &cap);
    accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
    accel__cuda_fault_at = at;
    accel_status s = run(ctx, user);
    const bool fired = accel__cuda_fault_at < 0;
    accel__cuda_fault_at = -1;
    accel_stage_stats st = stage_stats(ctx, stage);
    ck_assert_msg(s == ACCEL_OK, "%s, fault at CUDA call %lld: %s", stage, (long long)at, accel_last_error(ctx));
    if (!fired) { /* the whole stage ran without reaching call `at` */
      ck_assert_msg(st.gpu_runs == 1 && st.fallbacks == 0 && capture_count_level(&cap, ACCEL_LOG_WARN) == 0,
                    "%s without faults: %llu GPU runs, %llu fallbacks: %s", stage, (unsigned long long)st.gpu_runs,
                    (unsigned long long)st.fallbacks, cap.n ? cap.line[0] : "");
      accel_ctx_destroy(ctx);
      return at;
    }
    ck_assert_msg(st.fallbacks == 1 && st.cpu_runs == 1,
                  "%s: the launch failure at CUDA call %lld went unnoticed (%llu GPU runs, %llu fallbacks)", stage,
                  (long long)at, (unsigned long long)st.gpu_runs, (unsigned long long)st.fallbacks);
    char site[160]; /* where the stage reported the failure */
    snprintf(site, sizeof site, "%s", accel__cuda_failure_site());
    ck_assert_msg(site[0], "%s, fault at CUDA call %lld: no CUDA check reported it", stage, (long long)at);
    ck_assert_msg(capture_count_containing(&cap, ACCEL_LOG_WARN, failed) == 1 &&
                      capture_count_containing(&cap, ACCEL_LOG_WARN, ": cudaErrorLaunchFailure: ") == 1 &&
                      capture_count_containing(&cap, ACCEL_LOG_WARN, ". CPU fallback.") == 1,
                  "%s, fault at CUDA call %lld (%s): the fallback line lacks the stage or the error: \"%s\"", stage,
                  (long long)at, site, cap.n ? cap.line[cap.n - 1] : "");
    accel_ctx_destroy(ctx);

    ctx = make(ACCEL_FALLBACK_DENY, NULL);
    accel__cuda_fault_at = at;
    s = run(ctx, user);
    accel__cuda_fault_at = -1;
    ck_assert_msg(s == ACCEL_ERR_DEVICE && strstr(accel_last_error(ctx), failed) &&
                      strstr(accel_last_error(ctx), ": cudaErrorLaunchFailure: "),
                  "%s under DENY, fault at CUDA call %lld (%s): %s: %s", stage, (long long)at, site,
                  accel_status_string(s), accel_last_error(ctx));
    accel_ctx_destroy(ctx);
  }
}

int64_t emulated_fault_sweep(const char *stage, gpu_stage_fn run, void *user) {
  return fault_sweep(make_emulated_gpu_ctx, stage, run, user);
}
#endif
