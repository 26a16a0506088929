/* tests/testutil.h - helpers shared by the Check suites. */
#ifndef ACCEL_TESTUTIL_H
#define ACCEL_TESTUTIL_H

#include <accel/accel.h>
#include <check.h>
#include <stdbool.h>
#include <stdint.h>

/* ../shared/data: the frozen references beside the checkout (meson passes the path). */
#ifndef SHARED_DATA_DIR
#define SHARED_DATA_DIR "../shared/data"
#endif

/* In loops over many elements: Check's ck_assert reports every passing call to
 * the parent process (a write each), so loops test quietly and fail loudly. */
#define EXPECT(cond, ...)                                                                                              \
  do {                                                                                                                 \
    if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                                            \
  } while (0)

/* Log messages captured by capture_log (a log callback; user = log_capture*). */
enum { CAPTURE_MAX = 64 };
typedef struct log_capture {
  int n;
  accel_log_level level[CAPTURE_MAX];
  char line[CAPTURE_MAX][512];
} log_capture;

void capture_log(void *user, accel_log_level level, const char *message);
/* Lines at `level` equal to `text`. */
int capture_count_exact(const log_capture *c, accel_log_level level, const char *text);
/* Lines at `level` (or any level if level < 0) containing `needle`. */
int capture_count_containing(const log_capture *c, int level, const char *needle);
/* Lines at or above `level`. */
int capture_count_level(const log_capture *c, accel_log_level level);

/* Context options as accel_ctx_options_init gives them, for `backend`. */
accel_ctx_options ctx_options(accel_backend_kind backend);

/* Create a context with a capturing logger; fails the test on error. */
accel_ctx *make_ctx(accel_backend_kind backend, accel_fallback_policy policy, log_capture *cap, accel_log_level level);

/* A CPU context that never falls back, logging warnings on stderr: what most tests use. */
accel_ctx *cpu_ctx(void);

/* Pillow's convert('L') for one RGB pixel, written independently of the
 * library: the ITU-R 601-2 weights 299/587/114 in Pillow's 16-bit fixed point. */
uint8_t ref_luma(unsigned r, unsigned g, unsigned b);

/* Deterministic pseudo-random bytes. */
void fill_random(uint8_t *p, size_t n, uint32_t seed);

/* Load dir/name.npy, or dir/name.npy.gz (gunzipped through a temporary
 * file); NULL when neither exists, a test failure when one cannot be read. */
accel_buffer *load_npy_gz(const char *dir, const char *name);

/* load_npy_gz of a file that must exist. */
accel_buffer *must_load(const char *dir, const char *name);

/* The array a buffer holds. */
accel_array view_of(accel_buffer *b);

/* A C-ordered array of `data` (accel_array_init, which must succeed). */
accel_array array_of(void *data, accel_dtype dtype, int32_t ndim, const int64_t *shape);

/* Find the repository's tests/data directory (TEST_DATA_DIR from meson). */
const char *test_data_dir(void);

/* Keep the calling test's address space under `bytes`, so that a loader that
 * allocates what a hostile header declares fails the test. Does nothing
 * under AddressSanitizer, which reserves terabytes for its shadow memory. */
void limit_address_space(uint64_t bytes);

/* Run a suite with Check's normal output; the exit status of a test main. */
int run_suite(Suite *s);

/* Environment the tests must not inherit (ACCEL_BACKEND, ACCEL_LOG). */
void clear_accel_env(void);

/* A test case: `timeout` seconds a test when above 0 (else Check's default);
 * `setup` and `teardown`, where not NULL, run around each test in its process. */
TCase *new_case(const char *name, double timeout, SFun setup, SFun teardown);

/* A suite holding the test case `tc`. */
Suite *suite_of(const char *name, TCase *tc);

/* A suite of one test case holding one test, run `loops` times (_i from 0). */
Suite *single_test_suite(const char *suite, const char *tcase, double timeout, const TTest *test, int loops);

/* A suite's second run, against the frozen references of ../shared/data.
 * Meson runs a test again with the flag when the test's source names "--shared". */
typedef struct shared_run {
  const char *flag;      /* "--shared" */
  const char *probe;     /* a file there whenever ../shared is */
  const char *absent;    /* what the skip line says is absent when the probe is not there */
  Suite *(*suite)(void); /* the references' suite */
} shared_run;

/* The main of a suite with a shared run: with the flag, the shared suite, or
 * exit 77 (skipped) with a SKIP line when ../shared is absent; otherwise
 * `suite_fn`'s suite. */
int run_main(int argc, char **argv, Suite *(*suite_fn)(void), const shared_run *shared);

#define ACCEL_TEST_MAIN_SHARED(suite_fn, shared)                                                                       \
  int main(int argc, char **argv) { return run_main(argc, argv, suite_fn, &(shared)); }

#define ACCEL_TEST_MAIN(suite_fn)                                                                                      \
  int main(void) {                                                                                                     \
    clear_accel_env();                                                                                                 \
    return run_suite(suite_fn());                                                                                      \
  }

#endif
