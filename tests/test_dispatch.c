/* suite_dispatch: the one fallback policy, proven with a backend that fails
 * on request (no GPU needed). */
#include "fake_backend.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 7, W = 13 };

static uint8_t rgb[H][W][3];
static uint8_t out[H][W];
static uint8_t expect[H][W];

static void setup(void) {
  fake_reset();
  fill_random(&rgb[0][0][0], sizeof rgb, 42);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) expect[y][x] = ref_luma(rgb[y][x][0], rgb[y][x][1], rgb[y][x][2]);
  memset(out, 0, sizeof out);
}

static accel_ctx *fake_ctx(accel_backend_kind backend, accel_fallback_policy policy, log_capture *cap) {
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = backend;
  o.fallback = policy;
  o.log_level = ACCEL_LOG_DEBUG;
  o.log_fn = capture_log;
  o.log_user = cap;
  accel_ctx *ctx = NULL;
  accel_status s = fake_ctx_create(&o, &ctx);
  ck_assert_msg(s == ACCEL_OK, "create: %s", accel_last_error(NULL));
  return ctx;
}

static accel_status gray(accel_ctx *ctx) {
  accel_array src, dst;
  int64_t ss[3] = {H, W, 3}, ds[2] = {H, W};
  accel_array_init(&src, rgb, ACCEL_DTYPE_U8, 3, ss);
  accel_array_init(&dst, out, ACCEL_DTYPE_U8, 2, ds);
  return accel_image_to_gray(ctx, &src, &dst);
}

static accel_stage_stats stats_of(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_msg(accel_ctx_stats_find(ctx, stage, &st) == ACCEL_OK, "no stats for %s", stage);
  return st;
}

START_TEST(gpu_success_counts_gpu_run) {
  log_capture cap = {0};
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  accel_ctx_query(ctx, &info);
  ck_assert_int_eq(info.backend, ACCEL_BACKEND_CUDA);
  ck_assert_int_eq(gray(ctx), ACCEL_OK);
  ck_assert_int_eq(fake.gray_calls, 1);
  ck_assert_mem_eq(out, expect, sizeof out);
  accel_stage_stats st = stats_of(ctx, "image.gray");
  ck_assert_uint_eq(st.runs, 1);
  ck_assert_uint_eq(st.gpu_runs, 1);
  ck_assert_uint_eq(st.cpu_runs, 0);
  ck_assert_uint_eq(st.fallbacks, 0);
  ck_assert_int_eq(capture_count_level(&cap, ACCEL_LOG_WARN), 0);
  accel_ctx_destroy(ctx);
  ck_assert_int_eq(fake.closes, 1);
}
END_TEST

static void check_fallback(accel_status fail, const char *reason, const char *expected_line) {
  log_capture cap = {0};
  fake.gray_status = fail;
  snprintf(fake.gray_reason, sizeof fake.gray_reason, "%s", reason);
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(gray(ctx), ACCEL_OK);
  ck_assert_int_eq(fake.gray_calls, 1);
  /* the fake scribbled 0xAB over dst: what is there now is the CPU's answer */
  ck_assert_mem_eq(out, expect, sizeof out);
  ck_assert_int_eq(capture_count_exact(&cap, ACCEL_LOG_WARN, expected_line), 1);
  ck_assert_int_eq(capture_count_level(&cap, ACCEL_LOG_WARN), 1);
  accel_stage_stats st = stats_of(ctx, "image.gray");
  ck_assert_uint_eq(st.runs, 1);
  ck_assert_uint_eq(st.fallbacks, 1);
  ck_assert_uint_eq(st.cpu_runs, 1);
  ck_assert_uint_eq(st.gpu_runs, 0);
  ck_assert_uint_eq(st.failures, 0);
  ck_assert_int_eq(gray(ctx), ACCEL_OK); /* and again: every failure is logged and counted */
  ck_assert_uint_eq(stats_of(ctx, "image.gray").fallbacks, 2);
  ck_assert_int_eq(capture_count_exact(&cap, ACCEL_LOG_WARN, expected_line), 2);
  accel_ctx_destroy(ctx);
}

START_TEST(allow_device_error_falls_back) {
  check_fallback(ACCEL_ERR_DEVICE, "simulated launch failure",
                 "[GPU] image.gray failed: simulated launch failure. CPU fallback.");
}
END_TEST

START_TEST(allow_device_memory_falls_back) {
  check_fallback(ACCEL_ERR_DEVICE_MEMORY, "cudaMalloc: out of memory.",
                 "[GPU] image.gray failed: cudaMalloc: out of memory. CPU fallback.");
}
END_TEST

START_TEST(allow_device_limit_falls_back) {
  check_fallback(ACCEL_ERR_UNSUPPORTED, "image wider than the device's texture limit",
                 "[GPU] image.gray failed: image wider than the device's texture limit. CPU fallback.");
}
END_TEST

START_TEST(deny_returns_the_gpu_error) {
  log_capture cap = {0};
  fake.gray_status = ACCEL_ERR_DEVICE;
  snprintf(fake.gray_reason, sizeof fake.gray_reason, "simulated illegal address");
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_DENY, &cap);
  ck_assert_int_eq(gray(ctx), ACCEL_ERR_DEVICE);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "simulated illegal address"));
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "image.gray"));
  ck_assert_int_eq(capture_count_containing(&cap, -1, "CPU fallback"), 0);
  accel_stage_stats st = stats_of(ctx, "image.gray");
  ck_assert_uint_eq(st.fallbacks, 0);
  ck_assert_uint_eq(st.failures, 1);
  ck_assert_uint_eq(st.cpu_runs, 0);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(caller_errors_from_gpu_never_fall_back) {
  const accel_status no_fallback[] = {ACCEL_ERR_INVALID_ARG, ACCEL_ERR_CANCELLED, ACCEL_ERR_LIMIT};
  for (size_t i = 0; i < sizeof no_fallback / sizeof no_fallback[0]; i++) {
    log_capture cap = {0};
    fake_reset();
    fake.gray_status = no_fallback[i];
    snprintf(fake.gray_reason, sizeof fake.gray_reason, "the caller's fault");
    accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
    ck_assert_int_eq(gray(ctx), no_fallback[i]);
    ck_assert_int_eq(capture_count_containing(&cap, -1, "CPU fallback"), 0);
    accel_stage_stats st = stats_of(ctx, "image.gray");
    ck_assert_uint_eq(st.fallbacks, 0);
    ck_assert_uint_eq(st.cpu_runs, 0);
    ck_assert_uint_eq(st.failures, 1);
    accel_ctx_destroy(ctx);
  }
}
END_TEST

START_TEST(invalid_arguments_never_reach_a_backend) {
  log_capture cap = {0};
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
  accel_array src, dst;
  int64_t ss[3] = {H, W, 3}, bad[2] = {H + 1, W};
  accel_array_init(&src, rgb, ACCEL_DTYPE_U8, 3, ss);
  accel_array_init(&dst, out, ACCEL_DTYPE_U8, 2, bad);
  ck_assert_int_eq(accel_image_to_gray(ctx, &src, &dst), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_image_to_gray(ctx, NULL, &dst), ACCEL_ERR_INVALID_ARG);
  src.dtype = ACCEL_DTYPE_F32;
  ck_assert_int_eq(accel_image_to_gray(ctx, &src, &dst), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(fake.gray_calls, 0);
  size_t n = 99;
  accel_ctx_stats_count(ctx, &n);
  ck_assert_uint_eq(n, 0); /* the dispatcher never saw them */
  ck_assert_int_eq(capture_count_containing(&cap, -1, "CPU fallback"), 0);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(missing_gpu_op_runs_on_cpu_without_fallback) {
  log_capture cap = {0};
  fake.has_gray = false;
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_DENY, &cap);
  ck_assert_int_eq(gray(ctx), ACCEL_OK);
  ck_assert_mem_eq(out, expect, sizeof out);
  accel_stage_stats st = stats_of(ctx, "image.gray");
  ck_assert_uint_eq(st.cpu_runs, 1);
  ck_assert_uint_eq(st.fallbacks, 0);
  ck_assert_int_eq(capture_count_level(&cap, ACCEL_LOG_WARN), 0);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(cuda_request_without_device_allow_falls_back_at_creation) {
  log_capture cap = {0};
  fake.open_status = ACCEL_ERR_NO_DEVICE;
  snprintf(fake.open_reason, sizeof fake.open_reason, "no CUDA-capable device is detected");
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(capture_count_exact(&cap, ACCEL_LOG_WARN,
                                       "[GPU] ctx.init failed: no CUDA-capable device is detected. CPU fallback."),
                   1);
  ck_assert_int_eq(capture_count_level(&cap, ACCEL_LOG_WARN), 1);
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  accel_ctx_query(ctx, &info);
  ck_assert_int_eq(info.backend, ACCEL_BACKEND_CPU);
  ck_assert_int_eq(info.device, -1);
  accel_stage_stats st = stats_of(ctx, "ctx.init");
  ck_assert_uint_eq(st.fallbacks, 1);
  ck_assert_int_eq(gray(ctx), ACCEL_OK);
  ck_assert_int_eq(fake.gray_calls, 0);
  ck_assert_uint_eq(stats_of(ctx, "image.gray").cpu_runs, 1);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(cuda_request_without_device_deny_fails) {
  log_capture cap = {0};
  fake.open_status = ACCEL_ERR_NO_DEVICE;
  snprintf(fake.open_reason, sizeof fake.open_reason, "no CUDA-capable device is detected");
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = ACCEL_BACKEND_CUDA;
  o.fallback = ACCEL_FALLBACK_DENY;
  o.log_fn = capture_log;
  o.log_user = &cap;
  accel_ctx *ctx = (accel_ctx *)0x1;
  ck_assert_int_eq(fake_ctx_create(&o, &ctx), ACCEL_ERR_NO_DEVICE);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "no CUDA-capable device is detected"));
  ck_assert_int_eq(capture_count_containing(&cap, -1, "CPU fallback"), 0);
}
END_TEST

START_TEST(auto_without_device_is_one_info_line) {
  log_capture cap = {0};
  fake.open_status = ACCEL_ERR_NO_DEVICE;
  snprintf(fake.open_reason, sizeof fake.open_reason, "no NVIDIA driver");
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_AUTO, ACCEL_FALLBACK_DENY, &cap);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_INFO, "no NVIDIA driver"), 1);
  ck_assert_int_eq(capture_count_level(&cap, ACCEL_LOG_WARN), 0);
  size_t n = 9;
  accel_ctx_stats_count(ctx, &n);
  ck_assert_uint_eq(n, 0); /* AUTO choosing the CPU is not a fallback */
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(explicit_cpu_never_opens_the_gpu) {
  log_capture cap = {0};
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, &cap);
  ck_assert_int_eq(fake.opens, 0);
  ck_assert_int_eq(gray(ctx), ACCEL_OK);
  ck_assert_int_eq(fake.gray_calls, 0);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The real build: this machine's CUDA backend (or its absence) behaves the same. */
START_TEST(real_cuda_request_without_device) {
  int32_t n = 0;
  accel_device_count(&n);
  if (n > 0) {
    puts("SKIP real_cuda_request_without_device: a CUDA device is present");
    return;
  }
  log_capture cap = {0};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap, ACCEL_LOG_WARN);
  ck_assert_int_eq(cap.n, 1);
  ck_assert_int_eq(cap.level[0], ACCEL_LOG_WARN);
  const char *line = cap.line[0], *tail = ". CPU fallback.";
  ck_assert_msg(strncmp(line, "[GPU] ctx.init failed: ", 23) == 0, "line: %s", line);
  ck_assert_msg(strlen(line) > strlen(tail) + 23 && strcmp(line + strlen(line) - strlen(tail), tail) == 0, "line: %s",
                line);
  ck_assert_msg(strstr(line, "..") == NULL, "line: %s", line);
  accel_ctx_destroy(ctx);

  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.backend = ACCEL_BACKEND_CUDA;
  o.fallback = ACCEL_FALLBACK_DENY;
  ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_NO_DEVICE);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "unavailable"));
}
END_TEST

typedef struct worker_arg {
  accel_ctx *ctx;
  int runs;
  int failures;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  enum { WH = 32, WW = 48 };
  uint8_t src[WH][WW][4], dst[WH][WW];
  fill_random(&src[0][0][0], sizeof src, 7);
  accel_array s, d;
  int64_t ss[3] = {WH, WW, 4}, ds[2] = {WH, WW};
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, ss);
  accel_array_init(&d, dst, ACCEL_DTYPE_U8, 2, ds);
  for (int i = 0; i < a->runs; i++) {
    if (accel_image_to_gray(a->ctx, &s, &d) != ACCEL_OK) a->failures++;
    for (int y = 0; y < WH; y++)
      for (int x = 0; x < WW; x++)
        if (dst[y][x] != ref_luma(src[y][x][0], src[y][x][1], src[y][x][2])) a->failures++;
  }
  return NULL;
}

START_TEST(concurrent_fallbacks_are_all_counted) {
  log_capture cap = {0};
  fake.gray_status = ACCEL_ERR_DEVICE;
  snprintf(fake.gray_reason, sizeof fake.gray_reason, "busy");
  accel_ctx *ctx = fake_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_ALLOW, &cap);
  accel_set_log(ctx, NULL, NULL, ACCEL_LOG_OFF); /* CAPTURE_MAX would overflow */
  enum { T = 4, RUNS = 25 };
  pthread_t th[T];
  worker_arg args[T];
  for (int i = 0; i < T; i++) {
    args[i] = (worker_arg){ctx, RUNS, 0};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(args[i].failures, 0);
  }
  accel_stage_stats st = stats_of(ctx, "image.gray");
  ck_assert_uint_eq(st.runs, T * RUNS);
  ck_assert_uint_eq(st.fallbacks, T * RUNS);
  ck_assert_uint_eq(st.cpu_runs, T * RUNS);
  accel_ctx_destroy(ctx);
}
END_TEST

Suite *suite_dispatch(void) {
  Suite *s = suite_create("dispatch");
  TCase *tc = tcase_create("policy");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, gpu_success_counts_gpu_run);
  tcase_add_test(tc, allow_device_error_falls_back);
  tcase_add_test(tc, allow_device_memory_falls_back);
  tcase_add_test(tc, allow_device_limit_falls_back);
  tcase_add_test(tc, deny_returns_the_gpu_error);
  tcase_add_test(tc, caller_errors_from_gpu_never_fall_back);
  tcase_add_test(tc, invalid_arguments_never_reach_a_backend);
  tcase_add_test(tc, missing_gpu_op_runs_on_cpu_without_fallback);
  tcase_add_test(tc, concurrent_fallbacks_are_all_counted);
  suite_add_tcase(s, tc);
  TCase *tc2 = tcase_create("creation");
  tcase_add_checked_fixture(tc2, setup, NULL);
  tcase_add_test(tc2, cuda_request_without_device_allow_falls_back_at_creation);
  tcase_add_test(tc2, cuda_request_without_device_deny_fails);
  tcase_add_test(tc2, auto_without_device_is_one_info_line);
  tcase_add_test(tc2, explicit_cpu_never_opens_the_gpu);
  tcase_add_test(tc2, real_cuda_request_without_device);
  suite_add_tcase(s, tc2);
  return s;
}

ACCEL_TEST_MAIN(suite_dispatch)
