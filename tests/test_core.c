/* suite_core: versions, statuses, contexts, options, environment overrides,
 * logging, per-thread last errors, device and backend queries, statistics,
 * array descriptors. */
#include "testutil.h"

#include "accel_config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#ifndef PROJECT_VERSION
#error "PROJECT_VERSION (meson's project version) must be defined"
#endif

/* What accel_ctx_query says of a context (its status is not checked here). */
static accel_ctx_info info_of(accel_ctx *ctx) {
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  accel_ctx_query(ctx, &info);
  return info;
}

/* An environment variable set to a value the library refuses: creating a
 * context fails, and the message names the variable. */
static void env_value_is_refused(const char *name, const char *value) {
  setenv(name, value, 1);
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(NULL, &ctx), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), name));
  unsetenv(name);
}

/* ------------------------------------------------------------ version */

START_TEST(version_macros_functions_and_build_agree) {
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", ACCEL_VERSION_MAJOR, ACCEL_VERSION_MINOR, ACCEL_VERSION_PATCH);
  ck_assert_str_eq(ACCEL_VERSION_STRING, expect);
  ck_assert_str_eq(accel_version_string(), ACCEL_VERSION_STRING);
  ck_assert_str_eq(PROJECT_VERSION, ACCEL_VERSION_STRING);
  ck_assert_int_eq(ACCEL_VERSION_NUMBER, ACCEL_VERSION_MAJOR * 10000 + ACCEL_VERSION_MINOR * 100 + ACCEL_VERSION_PATCH);
  ck_assert_uint_eq(accel_version_number(), ACCEL_VERSION_NUMBER);
  ck_assert_uint_eq(accel_abi_version(), ACCEL_ABI_VERSION);
  ck_assert_int_eq(PROJECT_ABI, ACCEL_ABI_VERSION);
}
END_TEST

START_TEST(build_info_names_cuda_and_openmp) {
  const char *b = accel_build_info();
  ck_assert_ptr_nonnull(strstr(b, EXPECT_CUDA ? "cuda=yes" : "cuda=no"));
  ck_assert_ptr_nonnull(strstr(b, "openmp="));
  ck_assert_ptr_nonnull(strstr(b, ACCEL_HAVE_TIFF ? "tiff=yes" : "tiff=no"));
}
END_TEST

/* ------------------------------------------------------------ status */

START_TEST(every_status_has_a_distinct_name) {
  for (int i = ACCEL_OK; i <= ACCEL_ERR_INTERNAL; i++) {
    const char *n = accel_status_string((accel_status)i);
    ck_assert_msg(strncmp(n, "ACCEL_", 6) == 0 && strcmp(n, "ACCEL_ERR_UNKNOWN") != 0, "status %d: %s", i, n);
    ck_assert_msg(strlen(accel_status_describe((accel_status)i)) > 3, "status %d", i);
    for (int j = 0; j < i; j++) ck_assert_str_ne(n, accel_status_string((accel_status)j));
  }
  ck_assert_str_eq(accel_status_string(ACCEL_OK), "ACCEL_OK");
  ck_assert_str_eq(accel_status_string(ACCEL_ERR_DECODE), "ACCEL_ERR_DECODE");
  ck_assert_str_eq(accel_status_string((accel_status)(ACCEL_ERR_INTERNAL + 1)), "ACCEL_ERR_UNKNOWN");
  ck_assert_str_eq(accel_status_string((accel_status)-1), "ACCEL_ERR_UNKNOWN");
  ck_assert_str_eq(accel_status_describe((accel_status)1000), "unknown status code");
}
END_TEST

START_TEST(status_values_are_frozen) {
  /* These numbers are ABI: bindings hard-code them. */
  ck_assert_int_eq(ACCEL_ERR_INVALID_ARG, 1);
  ck_assert_int_eq(ACCEL_ERR_OUT_OF_MEMORY, 2);
  ck_assert_int_eq(ACCEL_ERR_NO_DEVICE, 3);
  ck_assert_int_eq(ACCEL_ERR_DEVICE, 4);
  ck_assert_int_eq(ACCEL_ERR_DEVICE_MEMORY, 5);
  ck_assert_int_eq(ACCEL_ERR_UNSUPPORTED, 6);
  ck_assert_int_eq(ACCEL_ERR_CANCELLED, 7);
  ck_assert_int_eq(ACCEL_ERR_IO, 8);
  ck_assert_int_eq(ACCEL_ERR_FORMAT, 9);
  ck_assert_int_eq(ACCEL_ERR_DECODE, 10);
  ck_assert_int_eq(ACCEL_ERR_LIMIT, 11);
  ck_assert_int_eq(ACCEL_ERR_VERSION, 12);
  ck_assert_int_eq(ACCEL_ERR_NOT_FOUND, 13);
  ck_assert_int_eq(ACCEL_ERR_INTERNAL, 14);
}
END_TEST

/* ------------------------------------------------------------ names */

START_TEST(backend_and_level_names_round_trip) {
  for (int k = ACCEL_BACKEND_AUTO; k <= ACCEL_BACKEND_CUDA; k++) {
    accel_backend_kind back;
    ck_assert_int_eq(accel_backend_from_string(accel_backend_name((accel_backend_kind)k), &back), ACCEL_OK);
    ck_assert_int_eq(back, k);
  }
  for (int l = ACCEL_LOG_DEBUG; l <= ACCEL_LOG_OFF; l++) {
    accel_log_level back;
    ck_assert_int_eq(accel_log_level_from_string(accel_log_level_name((accel_log_level)l), &back), ACCEL_OK);
    ck_assert_int_eq(back, l);
  }
  accel_backend_kind k;
  ck_assert_int_eq(accel_backend_from_string("CUDA", &k), ACCEL_OK);
  ck_assert_int_eq(k, ACCEL_BACKEND_CUDA);
  ck_assert_int_eq(accel_backend_from_string("gpu", &k), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "gpu"));
  accel_log_level l;
  ck_assert_int_eq(accel_log_level_from_string("warning", &l), ACCEL_OK);
  ck_assert_int_eq(l, ACCEL_LOG_WARN);
  ck_assert_int_eq(accel_log_level_from_string("loud", &l), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_backend_from_string(NULL, &k), ACCEL_ERR_INVALID_ARG);
}
END_TEST

/* ------------------------------------------------------------ contexts */

START_TEST(options_init_gives_documented_defaults) {
  accel_ctx_options o;
  memset(&o, 0x5a, sizeof o);
  ck_assert_int_eq(accel_ctx_options_init(&o, sizeof o), ACCEL_OK);
  ck_assert_uint_eq(o.struct_size, sizeof o);
  ck_assert_int_eq(o.backend, ACCEL_BACKEND_AUTO);
  ck_assert_int_eq(o.device, 0);
  ck_assert_int_eq(o.fallback, ACCEL_FALLBACK_ALLOW);
  ck_assert_uint_eq(o.device_memory_budget, 0);
  ck_assert_int_eq(o.cpu_threads, 0);
  ck_assert_int_eq(o.log_level, ACCEL_LOG_WARN);
  ck_assert_ptr_null((void *)o.log_fn);
  ck_assert_ptr_null(o.log_user);
  ck_assert_int_eq(accel_ctx_options_init(NULL, 0), ACCEL_ERR_INVALID_ARG);
}
END_TEST

START_TEST(default_context_resolves_its_options) {
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(NULL, &ctx), ACCEL_OK);
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  ck_assert_int_eq(accel_ctx_query(ctx, &info), ACCEL_OK);
  int32_t n = 0;
  accel_device_count(&n);
  ck_assert_int_eq(info.backend, n > 0 && EXPECT_CUDA ? ACCEL_BACKEND_CUDA : ACCEL_BACKEND_CPU);
  ck_assert_int_gt(info.cpu_threads, 0);
  ck_assert_int_eq(info.fallback, ACCEL_FALLBACK_ALLOW);
  ck_assert_int_eq(info.log_level, ACCEL_LOG_WARN);
  if (info.backend == ACCEL_BACKEND_CPU) {
    ck_assert_int_eq(info.device, -1);
    ck_assert_uint_eq(info.device_memory_budget, 0);
  }
  ck_assert_str_eq(accel_last_error(ctx), "");
  accel_ctx_destroy(ctx);
  accel_ctx_destroy(NULL);
}
END_TEST

START_TEST(explicit_options_are_kept) {
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.cpu_threads = 3;
  o.fallback = ACCEL_FALLBACK_DENY;
  o.log_level = ACCEL_LOG_ERROR;
  accel_ctx *ctx;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  accel_ctx_info info = info_of(ctx);
  ck_assert_int_eq(info.backend, ACCEL_BACKEND_CPU);
  ck_assert_int_eq(info.cpu_threads, 3);
  ck_assert_int_eq(info.fallback, ACCEL_FALLBACK_DENY);
  ck_assert_int_eq(info.log_level, ACCEL_LOG_ERROR);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(invalid_options_are_refused) {
  accel_ctx *ctx = (accel_ctx *)0x1;
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.cpu_threads = -2;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "cpu_threads"));
  accel_ctx_options_init(&o, sizeof o);
  o.backend = (accel_backend_kind)7;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  accel_ctx_options_init(&o, sizeof o);
  o.fallback = (accel_fallback_policy)5;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  accel_ctx_options_init(&o, sizeof o);
  o.log_level = (accel_log_level)9;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  accel_ctx_options_init(&o, sizeof o);
  o.device = -1;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ctx_create(NULL, NULL), ACCEL_ERR_INVALID_ARG);
}
END_TEST

START_TEST(struct_size_is_checked) {
  accel_ctx *ctx = NULL;
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.struct_size = 0;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_VERSION);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "struct_size"));
  o.struct_size = offsetof(accel_ctx_options, max_pixels) - 4; /* smaller than the oldest layout */
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_VERSION);

  /* a caller built against a newer header: accepted while the extra fields are zero */
  struct {
    accel_ctx_options o;
    uint64_t future[2];
  } newer;
  memset(&newer, 0, sizeof newer);
  accel_ctx_options_init(&newer.o, sizeof newer.o);
  newer.o.struct_size = sizeof newer;
  newer.o.backend = ACCEL_BACKEND_CPU;
  ck_assert_int_eq(accel_ctx_create(&newer.o, &ctx), ACCEL_OK);
  accel_ctx_destroy(ctx);
  newer.future[1] = 1;
  ck_assert_int_eq(accel_ctx_create(&newer.o, &ctx), ACCEL_ERR_VERSION);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "does not know"));

  ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  accel_ctx_info info;
  accel_ctx_info_init(&info, sizeof info);
  info.struct_size = 2;
  ck_assert_int_eq(accel_ctx_query(ctx, &info), ACCEL_ERR_VERSION);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  st.struct_size = 8;
  ck_assert_int_eq(accel_ctx_stats_get(ctx, 0, &st), ACCEL_ERR_VERSION);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The layouts of accel_ctx_options and accel_ctx_info before max_pixels was
 * added, as a program built against those headers declares them: both begin
 * with the same fields. */
#define CTX_V1_FIELDS                                                                                                  \
  uint32_t struct_size;                                                                                                \
  accel_backend_kind backend;                                                                                          \
  int32_t device;                                                                                                      \
  accel_fallback_policy fallback;                                                                                      \
  uint64_t device_memory_budget;                                                                                       \
  int32_t cpu_threads;                                                                                                 \
  accel_log_level log_level;

typedef struct ctx_options_v1 {
  CTX_V1_FIELDS
  accel_log_fn log_fn;
  void *log_user;
} ctx_options_v1;

typedef struct ctx_info_v1 {
  CTX_V1_FIELDS
} ctx_info_v1;

enum { GUARD = 0xa5, GUARD_BYTES = 64 };

/* A `T` named `field` with guard bytes after it, to see what a call writes past it. */
#define GUARDED(T, field)                                                                                              \
  struct {                                                                                                             \
    T field;                                                                                                           \
    unsigned char guard[GUARD_BYTES];                                                                                  \
  }

static bool guard_intact(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != GUARD) return false;
  return true;
}

START_TEST(older_smaller_structs_work_and_nothing_past_them_is_written) {
  ck_assert_uint_lt(sizeof(ctx_options_v1), sizeof(accel_ctx_options));
  ck_assert_uint_lt(sizeof(ctx_info_v1), sizeof(accel_ctx_info));
  GUARDED(ctx_options_v1, o) opt;
  memset(&opt, GUARD, sizeof opt);
  ck_assert_int_eq(accel_ctx_options_init((accel_ctx_options *)(void *)&opt.o, sizeof opt.o), ACCEL_OK);
  ck_assert(guard_intact(opt.guard, sizeof opt.guard));
  ck_assert_uint_eq(opt.o.struct_size, sizeof opt.o);
  ck_assert_int_eq(opt.o.backend, ACCEL_BACKEND_AUTO);
  ck_assert_int_eq(opt.o.log_level, ACCEL_LOG_WARN);
  ck_assert_ptr_null(opt.o.log_user);
  opt.o.backend = ACCEL_BACKEND_CPU;
  opt.o.cpu_threads = 2;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create((const accel_ctx_options *)(void *)&opt.o, &ctx), ACCEL_OK);
  ck_assert(guard_intact(opt.guard, sizeof opt.guard));

  GUARDED(ctx_info_v1, i) info;
  memset(&info, GUARD, sizeof info);
  ck_assert_int_eq(accel_ctx_info_init((accel_ctx_info *)(void *)&info.i, sizeof info.i), ACCEL_OK);
  ck_assert(guard_intact(info.guard, sizeof info.guard));
  ck_assert_int_eq(accel_ctx_query(ctx, (accel_ctx_info *)(void *)&info.i), ACCEL_OK);
  ck_assert(guard_intact(info.guard, sizeof info.guard));
  ck_assert_int_eq(info.i.backend, ACCEL_BACKEND_CPU);
  ck_assert_int_eq(info.i.cpu_threads, 2);

  /* the fields an old caller lacks take their defaults */
  accel_ctx_info full;
  accel_ctx_info_init(&full, sizeof full);
  ck_assert_int_eq(accel_ctx_query(ctx, &full), ACCEL_OK);
  ck_assert_uint_eq(full.max_pixels, ACCEL_DEFAULT_MAX_PIXELS);
  accel_ctx_destroy(ctx);

  /* below the oldest layout: refused, nothing written */
  memset(&opt, GUARD, sizeof opt);
  ck_assert_int_eq(accel_ctx_options_init((accel_ctx_options *)(void *)&opt.o, sizeof opt.o - 8), ACCEL_ERR_VERSION);
  ck_assert(guard_intact((const unsigned char *)&opt, sizeof opt));
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "struct_size"));
}
END_TEST

/* Every init function: with the exact size, nothing past the struct is
 * written; with a newer, larger size the extra bytes are zeroed and nothing
 * past them is written; a tiny size is refused without writing. */
#define CHECK_INIT(T, fn)                                                                                              \
  do {                                                                                                                 \
    struct {                                                                                                           \
      T v;                                                                                                             \
      unsigned char extra[16];                                                                                         \
      unsigned char guard[GUARD_BYTES];                                                                                \
    } b;                                                                                                               \
    memset(&b, GUARD, sizeof b);                                                                                       \
    ck_assert_int_eq(fn(&b.v, sizeof b.v), ACCEL_OK);                                                                  \
    ck_assert_uint_eq(b.v.struct_size, sizeof b.v);                                                                    \
    ck_assert_msg(guard_intact(b.extra, sizeof b.extra + sizeof b.guard), #fn " wrote past struct_size");              \
    memset(&b, GUARD, sizeof b);                                                                                       \
    ck_assert_int_eq(fn(&b.v, sizeof b.v + sizeof b.extra), ACCEL_OK);                                                 \
    ck_assert_uint_eq(b.v.struct_size, sizeof b.v + sizeof b.extra);                                                   \
    for (size_t k = 0; k < sizeof b.extra; k++) ck_assert_uint_eq(b.extra[k], 0);                                      \
    ck_assert_msg(guard_intact(b.guard, sizeof b.guard), #fn " wrote past a larger struct_size");                      \
    memset(&b, GUARD, sizeof b);                                                                                       \
    ck_assert_int_eq(fn(&b.v, 2), ACCEL_ERR_VERSION);                                                                  \
    ck_assert(guard_intact((const unsigned char *)&b, sizeof b));                                                      \
    ck_assert_int_eq(fn(NULL, sizeof b.v), ACCEL_ERR_INVALID_ARG);                                                     \
  } while (0)

START_TEST(every_init_takes_the_callers_size) {
  CHECK_INIT(accel_ctx_options, accel_ctx_options_init);
  CHECK_INIT(accel_ctx_info, accel_ctx_info_init);
  CHECK_INIT(accel_stage_stats, accel_stage_stats_init);
  CHECK_INIT(accel_backend_info, accel_backend_info_init);
  CHECK_INIT(accel_device_info, accel_device_info_init);
  CHECK_INIT(accel_hash_options, accel_hash_options_init);
  CHECK_INIT(accel_decode_options, accel_decode_options_init);
  CHECK_INIT(accel_image_info, accel_image_info_init);
  CHECK_INIT(accel_index_options, accel_index_options_init);
  CHECK_INIT(accel_search_options, accel_search_options_init);
  CHECK_INIT(accel_ct_marker_options, accel_ct_marker_options_init);
  CHECK_INIT(accel_ct_watershed_options, accel_ct_watershed_options_init);
  CHECK_INIT(accel_ct_pipeline_options, accel_ct_pipeline_options_init);
  CHECK_INIT(accel_ct_outputs, accel_ct_outputs_init);
  CHECK_INIT(accel_svf_options, accel_svf_options_init);
}
END_TEST

/* Query functions write no further than the caller's struct_size either. */
START_TEST(queries_write_only_the_callers_size) {
  GUARDED(accel_backend_info, v) b;
  memset(&b, GUARD, sizeof b);
  accel_backend_info_init(&b.v, sizeof b.v);
  ck_assert_int_eq(accel_backend_query(ACCEL_BACKEND_CPU, &b.v), ACCEL_OK);
  ck_assert(guard_intact(b.guard, sizeof b.guard));
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  accel_array px, g;
  uint8_t rgb[6] = {1, 2, 3, 4, 5, 6}, gray[2];
  accel_array_init(&px, rgb, ACCEL_DTYPE_U8, 3, (int64_t[]){1, 2, 3});
  accel_array_init(&g, gray, ACCEL_DTYPE_U8, 2, (int64_t[]){1, 2});
  ck_assert_int_eq(accel_image_to_gray(ctx, &px, &g), ACCEL_OK);
  GUARDED(accel_stage_stats, v) st;
  memset(&st, GUARD, sizeof st);
  accel_stage_stats_init(&st.v, sizeof st.v);
  ck_assert_int_eq(accel_ctx_stats_get(ctx, 0, &st.v), ACCEL_OK);
  ck_assert(guard_intact(st.guard, sizeof st.guard));
  /* a caller built against the first version (without the byte counters) */
  const size_t v1 = offsetof(accel_stage_stats, bytes_uploaded);
  memset(&st, GUARD, sizeof st);
  ck_assert_int_eq(accel_stage_stats_init(&st.v, v1), ACCEL_OK);
  ck_assert_int_eq(accel_ctx_stats_get(ctx, 0, &st.v), ACCEL_OK);
  ck_assert_uint_eq(st.v.runs, 1);
  ck_assert(guard_intact((const unsigned char *)&st.v + v1, sizeof st - v1));
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(absurd_thread_counts_are_refused) {
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.cpu_threads = 100000;
  accel_ctx *ctx = (accel_ctx *)0x1;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "cpu_threads 100000"));
  o.cpu_threads = ACCEL_CPU_THREADS_MAX;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  accel_ctx_destroy(ctx);
  /* the default (all cores, or OMP_NUM_THREADS) stays within the cap */
  o.cpu_threads = 0;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  accel_ctx_info info = info_of(ctx);
  ck_assert_int_ge(info.cpu_threads, 1);
  ck_assert_int_le(info.cpu_threads, ACCEL_CPU_THREADS_MAX);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ environment */

START_TEST(env_backend_overrides_options) {
  setenv("ACCEL_BACKEND", "cpu", 1);
  log_capture cap = {0};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_DENY, &cap, ACCEL_LOG_DEBUG);
  accel_ctx_info info = info_of(ctx);
  ck_assert_int_eq(info.backend, ACCEL_BACKEND_CPU);
  ck_assert_int_eq(capture_count_containing(&cap, -1, "CPU fallback"), 0);
  accel_ctx_destroy(ctx);
  env_value_is_refused("ACCEL_BACKEND", "gpu");
}
END_TEST

START_TEST(env_backend_cuda_follows_the_policy) {
  int32_t n = 0;
  accel_device_count(&n);
  if (n > 0) return; /* with a device, ACCEL_BACKEND=cuda simply works */
  setenv("ACCEL_BACKEND", "cuda", 1);
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.fallback = ACCEL_FALLBACK_DENY;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_NO_DEVICE);
  log_capture cap = {0};
  ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, &cap, ACCEL_LOG_WARN);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] ctx.init failed: "), 1);
  accel_ctx_destroy(ctx);
  unsetenv("ACCEL_BACKEND");
}
END_TEST

START_TEST(env_log_overrides_levels) {
  setenv("ACCEL_LOG", "debug", 1);
  log_capture cap = {0};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, &cap, ACCEL_LOG_ERROR);
  ck_assert_int_ge(capture_count_containing(&cap, ACCEL_LOG_DEBUG, "context ready"), 1);
  /* a later accel_set_log cannot lower the level below what ACCEL_LOG asks */
  ck_assert_int_eq(accel_set_log(ctx, capture_log, &cap, ACCEL_LOG_OFF), ACCEL_OK);
  accel_ctx_info info = info_of(ctx);
  ck_assert_int_eq(info.log_level, ACCEL_LOG_DEBUG);
  accel_ctx_destroy(ctx);

  setenv("ACCEL_LOG", "off", 1);
  log_capture quiet = {0};
  ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, &quiet, ACCEL_LOG_DEBUG);
  accel_array a;
  ck_assert_int_ne(accel_image_to_gray(ctx, NULL, &a), ACCEL_OK);
  ck_assert_int_eq(quiet.n, 0);
  accel_ctx_destroy(ctx);
  env_value_is_refused("ACCEL_LOG", "chatty");
}
END_TEST

/* ------------------------------------------------------------ logging */

START_TEST(log_callback_gets_user_data_and_respects_level) {
  log_capture cap = {0};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, &cap, ACCEL_LOG_DEBUG);
  ck_assert_int_ge(cap.n, 1); /* the DEBUG "context ready" line reached our user pointer */
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_DEBUG, "context ready"), 1);
  int before = cap.n;
  accel_array a;
  ck_assert_int_eq(accel_image_to_gray(ctx, NULL, &a), ACCEL_ERR_INVALID_ARG); /* logs at DEBUG */
  ck_assert_int_gt(cap.n, before);
  ck_assert_int_eq(accel_set_log(ctx, capture_log, &cap, ACCEL_LOG_ERROR), ACCEL_OK);
  before = cap.n;
  ck_assert_int_eq(accel_image_to_gray(ctx, NULL, &a), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(cap.n, before);
  ck_assert_int_eq(accel_set_log(ctx, capture_log, &cap, (accel_log_level)17), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_set_log(NULL, capture_log, &cap, ACCEL_LOG_WARN), ACCEL_ERR_INVALID_ARG);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The default writer prints the exact line on stderr (the file it is
 * redirected to here), one line per message. */
START_TEST(default_writer_prints_exact_lines_on_stderr) {
  int32_t n = 0;
  accel_device_count(&n);
  if (n > 0) return;
  char path[] = "/tmp/accel-stderr-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CUDA);
  accel_ctx *ctx = NULL;
  accel_status s = accel_ctx_create(&o, &ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ck_assert_int_eq(s, ACCEL_OK);
  accel_ctx_destroy(ctx);
  char buf[1024] = {0};
  ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  ck_assert_int_gt(got, 0);
  ck_assert_msg(strncmp(buf, "[GPU] ctx.init failed: ", 23) == 0, "stderr: %s", buf);
  char *nl = strchr(buf, '\n');
  ck_assert_ptr_nonnull(nl);
  ck_assert_str_eq(nl + 1, "");
  ck_assert_msg(strncmp(nl - 15, ". CPU fallback.", 15) == 0, "stderr: %s", buf);
}
END_TEST

/* ------------------------------------------------------------ last error */

typedef struct err_arg {
  accel_ctx *ctx;
  pthread_barrier_t *barrier;
  int64_t height;
  char seen[256];
} err_arg;

static void *fail_then_read(void *p) {
  err_arg *a = p;
  uint8_t buf[64];
  accel_array src, dst;
  int64_t ss[2] = {a->height, 1}, ds[2] = {1, 1};
  accel_array_init(&src, buf, ACCEL_DTYPE_U8, 2, ss);
  accel_array_init(&dst, buf + 32, ACCEL_DTYPE_U8, 2, ds);
  accel_image_to_gray(a->ctx, &src, &dst); /* fails with a message naming our height */
  pthread_barrier_wait(a->barrier);        /* both threads have failed */
  snprintf(a->seen, sizeof a->seen, "%s", accel_last_error(a->ctx));
  return NULL;
}

START_TEST(last_error_is_per_thread) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, 2);
  err_arg a1 = {ctx, &b, 11, ""}, a2 = {ctx, &b, 22, ""};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, fail_then_read, &a1);
  pthread_create(&t2, NULL, fail_then_read, &a2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  pthread_barrier_destroy(&b);
  ck_assert_msg(strstr(a1.seen, "11x1") != NULL, "thread 1 saw: %s", a1.seen);
  ck_assert_msg(strstr(a2.seen, "22x1") != NULL, "thread 2 saw: %s", a2.seen);
  ck_assert_str_eq(accel_last_error(ctx), ""); /* the main thread made no failing call */
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(last_error_is_per_context) {
  accel_ctx *a = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  accel_ctx *b = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  accel_array x;
  ck_assert_int_eq(accel_image_to_gray(a, NULL, &x), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(
      accel_ctx_stats_find(b, "no.such.stage", &(accel_stage_stats){.struct_size = sizeof(accel_stage_stats)}),
      ACCEL_ERR_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(accel_last_error(a), "src is NULL"));
  ck_assert_ptr_nonnull(strstr(accel_last_error(b), "no.such.stage"));
  accel_ctx_destroy(a);
  accel_ctx_destroy(b);
  /* a new context never inherits a destroyed one's message */
  accel_ctx *c = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  ck_assert_str_eq(accel_last_error(c), "");
  accel_ctx_destroy(c);
}
END_TEST

/* ------------------------------------------------------------ devices */

START_TEST(device_and_backend_queries) {
  int32_t n = -1;
  ck_assert_int_eq(accel_device_count(&n), ACCEL_OK);
  ck_assert_int_ge(n, 0);
  ck_assert_int_eq(accel_device_count(NULL), ACCEL_ERR_INVALID_ARG);
  accel_device_info d;
  accel_device_info_init(&d, sizeof d);
  ck_assert_int_eq(accel_device_query(n, &d), ACCEL_ERR_NOT_FOUND);
  ck_assert_int_eq(accel_device_query(-1, &d), ACCEL_ERR_NOT_FOUND);
  for (int32_t i = 0; i < n; i++) {
    ck_assert_int_eq(accel_device_query(i, &d), ACCEL_OK);
    ck_assert_int_eq(d.index, i);
    ck_assert_int_gt((int)strlen(d.name), 0);
    ck_assert_uint_gt(d.total_memory, 0);
    ck_assert_int_ge(d.cc_major, 3);
  }

  accel_backend_info b;
  accel_backend_info_init(&b, sizeof b);
  ck_assert_int_eq(accel_backend_query(ACCEL_BACKEND_CPU, &b), ACCEL_OK);
  ck_assert_str_eq(b.name, "cpu");
  ck_assert_int_eq(b.compiled, 1);
  ck_assert_int_eq(b.available, 1);
  ck_assert_int_eq(accel_backend_query(ACCEL_BACKEND_CUDA, &b), ACCEL_OK);
  ck_assert_str_eq(b.name, "cuda");
  ck_assert_int_eq(b.compiled, EXPECT_CUDA);
  ck_assert_int_eq(b.available, n > 0);
  ck_assert_int_eq(b.device_count, n);
  ck_assert_int_eq(b.reason[0] != '\0', n == 0); /* a reason exactly when unavailable */
  ck_assert_int_eq(accel_backend_query(ACCEL_BACKEND_AUTO, &b), ACCEL_ERR_INVALID_ARG);
}
END_TEST

/* ------------------------------------------------------------ stats */

START_TEST(stats_count_find_get_reset) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  size_t n = 7;
  ck_assert_int_eq(accel_ctx_stats_count(ctx, &n), ACCEL_OK);
  ck_assert_uint_eq(n, 0);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, "image.gray", &st), ACCEL_ERR_NOT_FOUND);
  uint8_t px[2][3][3] = {{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}}, {{255, 255, 255}, {0, 0, 0}, {1, 2, 3}}};
  uint8_t g[2][3];
  accel_array s, d;
  accel_array_init(&s, px, ACCEL_DTYPE_U8, 3, (int64_t[]){2, 3, 3});
  accel_array_init(&d, g, ACCEL_DTYPE_U8, 2, (int64_t[]){2, 3});
  for (int i = 0; i < 3; i++) ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_OK);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, "image.gray", &st), ACCEL_OK);
  ck_assert_str_eq(st.stage, "image.gray");
  ck_assert_uint_eq(st.runs, 3);
  ck_assert_uint_eq(st.cpu_runs, 3);
  ck_assert_uint_eq(st.gpu_runs, 0);
  ck_assert(st.seconds >= 0.0);
  accel_ctx_stats_count(ctx, &n);
  ck_assert_uint_eq(n, 1);
  accel_stage_stats st0;
  accel_stage_stats_init(&st0, sizeof st0);
  ck_assert_int_eq(accel_ctx_stats_get(ctx, 0, &st0), ACCEL_OK);
  ck_assert_str_eq(st0.stage, "image.gray");
  ck_assert_int_eq(accel_ctx_stats_get(ctx, 1, &st0), ACCEL_ERR_NOT_FOUND);
  ck_assert_int_eq(accel_ctx_stats_reset(ctx), ACCEL_OK);
  accel_ctx_stats_count(ctx, &n);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, "image.gray", &st), ACCEL_ERR_NOT_FOUND);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ arrays */

START_TEST(array_init_and_buffers) {
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_U8), 1);
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_I16), 2);
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_F32), 4);
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_F64), 8);
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_INVALID), 0);
  ck_assert_uint_eq(accel_dtype_size((accel_dtype)99), 0);
  accel_array a;
  int64_t shape[3] = {4, 5, 6};
  ck_assert_int_eq(accel_array_init(&a, NULL, ACCEL_DTYPE_F32, 3, shape), ACCEL_OK);
  ck_assert_int_eq(a.strides[2], 4);
  ck_assert_int_eq(a.strides[1], 24);
  ck_assert_int_eq(a.strides[0], 120);
  int64_t neg[2] = {3, -1};
  ck_assert_int_eq(accel_array_init(&a, NULL, ACCEL_DTYPE_U8, 2, neg), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_array_init(&a, NULL, ACCEL_DTYPE_U8, 9, shape), ACCEL_ERR_INVALID_ARG);
  int64_t huge[2] = {INT64_MAX / 2, 4};
  ck_assert_int_eq(accel_array_init(&a, NULL, ACCEL_DTYPE_U8, 2, huge), ACCEL_ERR_INVALID_ARG);

  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_buffer_create(ACCEL_DTYPE_I16, 3, shape, &b), ACCEL_OK);
  accel_array v;
  ck_assert_int_eq(accel_buffer_view(b, &v), ACCEL_OK);
  ck_assert_int_eq(v.dtype, ACCEL_DTYPE_I16);
  ck_assert_int_eq(v.ndim, 3);
  ck_assert_int_eq(v.shape[1], 5);
  int16_t *p = v.data;
  for (int i = 0; i < 120; i++) ck_assert_int_eq(p[i], 0);
  accel_buffer_destroy(b);
  accel_buffer_destroy(NULL);
  ck_assert_int_eq(accel_buffer_create(ACCEL_DTYPE_U8, 2, huge, &b), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(b);
}
END_TEST

#if EXPECT_CUDA
/* kernels/backend.cu: the reason and status a stage reports for a CUDA error code. */
accel_status accel__cuda_error_reason(int err, char *why, const char *what);

/* A CUDA error reads "<what>: <cudaErrorName>: <text>" (the name is what the
 * fallback line must carry), maps to the status the policy needs, and says
 * what to do when the user can act: a driver older than the runtime needs. */
START_TEST(cuda_errors_are_named_and_say_what_to_do) {
  char why[ACCEL_REASON_MAX] = "untouched";
  ck_assert_int_eq(accel__cuda_error_reason(0, why, "upload"), ACCEL_OK);
  ck_assert_str_eq(why, "untouched");
  ck_assert_int_eq(accel__cuda_error_reason(719, why, "gather launch"), ACCEL_ERR_DEVICE);
  ck_assert_ptr_eq(strstr(why, "gather launch: cudaErrorLaunchFailure: "), why);
  ck_assert_int_eq(accel__cuda_error_reason(2, why, "cudaMallocFromPoolAsync"), ACCEL_ERR_DEVICE_MEMORY);
  ck_assert_ptr_eq(strstr(why, "cudaMallocFromPoolAsync: cudaErrorMemoryAllocation: "), why);
  ck_assert_int_eq(accel__cuda_error_reason(209, why, "cudaFuncGetAttributes"), ACCEL_ERR_NO_DEVICE);
  ck_assert_ptr_nonnull(strstr(why, ": cudaErrorNoKernelImageForDevice: "));
  ck_assert_int_eq(accel__cuda_error_reason(35, why, "cudaGetDeviceCount"), ACCEL_ERR_NO_DEVICE);
  ck_assert_ptr_eq(strstr(why, "cudaGetDeviceCount: cudaErrorInsufficientDriver: "), why);
  ck_assert_msg(strstr(why, "runtime needs NVIDIA driver R") && strstr(why, " or newer"), "%s", why);
  ck_assert_int_eq(accel__cuda_error_reason(222, why, "cudaFuncGetAttributes"), ACCEL_ERR_NO_DEVICE);
  ck_assert_msg(strstr(why, "needs NVIDIA driver R"), "%s", why);
}
END_TEST
#endif

Suite *suite_core(void) {
  TCase *tc = new_case("core", 0, NULL, NULL);
  tcase_add_test(tc, version_macros_functions_and_build_agree);
  tcase_add_test(tc, build_info_names_cuda_and_openmp);
  tcase_add_test(tc, every_status_has_a_distinct_name);
  tcase_add_test(tc, status_values_are_frozen);
  tcase_add_test(tc, backend_and_level_names_round_trip);
  tcase_add_test(tc, options_init_gives_documented_defaults);
  tcase_add_test(tc, default_context_resolves_its_options);
  tcase_add_test(tc, explicit_options_are_kept);
  tcase_add_test(tc, invalid_options_are_refused);
  tcase_add_test(tc, struct_size_is_checked);
  tcase_add_test(tc, older_smaller_structs_work_and_nothing_past_them_is_written);
  tcase_add_test(tc, every_init_takes_the_callers_size);
  tcase_add_test(tc, queries_write_only_the_callers_size);
  tcase_add_test(tc, absurd_thread_counts_are_refused);
  tcase_add_test(tc, env_backend_overrides_options);
  tcase_add_test(tc, env_backend_cuda_follows_the_policy);
  tcase_add_test(tc, env_log_overrides_levels);
  tcase_add_test(tc, log_callback_gets_user_data_and_respects_level);
  tcase_add_test(tc, default_writer_prints_exact_lines_on_stderr);
  tcase_add_test(tc, last_error_is_per_thread);
  tcase_add_test(tc, last_error_is_per_context);
  tcase_add_test(tc, device_and_backend_queries);
  tcase_add_test(tc, stats_count_find_get_reset);
  tcase_add_test(tc, array_init_and_buffers);
#if EXPECT_CUDA
  tcase_add_test(tc, cuda_errors_are_named_and_say_what_to_do);
#endif
  return suite_of("core", tc);
}

ACCEL_TEST_MAIN(suite_core)
