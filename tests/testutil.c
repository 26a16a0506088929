#include "testutil.h"

#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void capture_log(void *user, accel_log_level level, const char *message) {
  log_capture *c = user;
  if (c->n >= CAPTURE_MAX) return;
  c->level[c->n] = level;
  snprintf(c->line[c->n], sizeof c->line[0], "%s", message);
  c->n++;
}

int capture_count_exact(const log_capture *c, accel_log_level level, const char *text) {
  int k = 0;
  for (int i = 0; i < c->n; i++) k += c->level[i] == level && strcmp(c->line[i], text) == 0;
  return k;
}

int capture_count_containing(const log_capture *c, int level, const char *needle) {
  int k = 0;
  for (int i = 0; i < c->n; i++) k += (level < 0 || (int)c->level[i] == level) && strstr(c->line[i], needle) != NULL;
  return k;
}

int capture_count_level(const log_capture *c, accel_log_level level) {
  int k = 0;
  for (int i = 0; i < c->n; i++) k += c->level[i] >= level;
  return k;
}

accel_ctx_options ctx_options(accel_backend_kind backend) {
  accel_ctx_options o;
  ck_assert_int_eq(accel_ctx_options_init(&o, sizeof o), ACCEL_OK);
  o.backend = backend;
  return o;
}

accel_ctx *make_ctx(accel_backend_kind backend, accel_fallback_policy policy, log_capture *cap, accel_log_level level) {
  accel_ctx_options o = ctx_options(backend);
  o.fallback = policy;
  o.log_level = level;
  o.log_fn = cap ? capture_log : NULL;
  o.log_user = cap;
  accel_ctx *ctx = NULL;
  accel_status s = accel_ctx_create(&o, &ctx);
  ck_assert_msg(s == ACCEL_OK, "accel_ctx_create: %s: %s", accel_status_string(s), accel_last_error(NULL));
  return ctx;
}

accel_ctx *cpu_ctx(void) { return make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_DENY, NULL, ACCEL_LOG_WARN); }

uint8_t ref_luma(unsigned r, unsigned g, unsigned b) {
  /* 0.299, 0.587, 0.114 scaled by 65536 and rounded, as Pillow's Convert.c does */
  const unsigned wr = (unsigned)(0.299 * 65536 + 0.5), wg = (unsigned)(0.587 * 65536 + 0.5),
                 wb = (unsigned)(0.114 * 65536 + 0.5);
  return (uint8_t)((r * wr + g * wg + b * wb + 32768u) / 65536u);
}

void fill_random(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed ? seed : 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)(x >> 24);
  }
}

const char *test_data_dir(void) {
#ifdef TEST_DATA_DIR
  return TEST_DATA_DIR;
#else
  return "tests/data";
#endif
}

int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void clear_accel_env(void) {
  unsetenv("ACCEL_BACKEND");
  unsetenv("ACCEL_LOG");
}

TCase *new_case(const char *name, double timeout, SFun setup, SFun teardown) {
  TCase *tc = tcase_create(name);
  if (timeout > 0) tcase_set_timeout(tc, timeout);
  if (setup || teardown) tcase_add_checked_fixture(tc, setup, teardown);
  return tc;
}

Suite *suite_of(const char *name, TCase *tc) {
  Suite *s = suite_create(name);
  suite_add_tcase(s, tc);
  return s;
}

Suite *single_test_suite(const char *suite, const char *tcase, double timeout, const TTest *test, int loops) {
  TCase *tc = new_case(tcase, timeout, NULL, NULL);
  tcase_add_loop_test(tc, test, 0, loops);
  return suite_of(suite, tc);
}

int run_main(int argc, char **argv, Suite *(*suite_fn)(void), const shared_run *shared) {
  clear_accel_env();
  if (argc > 1 && strcmp(argv[1], shared->flag) == 0) {
    struct stat st;
    if (stat(shared->probe, &st) != 0) {
      printf("SKIP: %s is absent (../shared not beside the checkout)\n", shared->absent);
      return 77;
    }
    return run_suite(shared->suite());
  }
  return run_suite(suite_fn());
}

/* ------------------------------------------------------------ fixtures */

accel_buffer *load_npy_gz(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  accel_buffer *b = NULL;
  struct stat st;
  if (stat(path, &st) == 0) {
    ck_assert_msg(accel_npy_load(NULL, path, &b) == ACCEL_OK, "%s: %s", path, accel_last_error(NULL));
    return b;
  }
  snprintf(path, sizeof path, "%s/%s.npy.gz", dir, name);
  gzFile gz = gzopen(path, "rb");
  if (!gz) return NULL;
  char tmp[] = "/tmp/accel-test-XXXXXX";
  int fd = mkstemp(tmp);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "wb");
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) ck_assert_int_eq(fwrite(buf, 1, (size_t)n, f), n);
  gzclose(gz);
  fclose(f);
  ck_assert_msg(accel_npy_load(NULL, tmp, &b) == ACCEL_OK, "%s: %s", path, accel_last_error(NULL));
  unlink(tmp);
  return b;
}

accel_buffer *must_load(const char *dir, const char *name) {
  accel_buffer *b = load_npy_gz(dir, name);
  ck_assert_msg(b != NULL, "cannot open %s/%s.npy(.gz)", dir, name);
  return b;
}

accel_array view_of(accel_buffer *b) {
  accel_array a;
  accel_buffer_view(b, &a);
  return a;
}

accel_array array_of(void *data, accel_dtype dtype, int32_t ndim, const int64_t *shape) {
  accel_array a;
  ck_assert_int_eq(accel_array_init(&a, data, dtype, ndim, shape), ACCEL_OK);
  return a;
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

void limit_address_space(uint64_t bytes) {
#ifndef UNDER_ASAN
  struct rlimit rl = {bytes, bytes};
  ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
#else
  (void)bytes;
#endif
}
