/* tests/testutil.h - helpers shared by the Check suites. */
#ifndef ACCEL_TESTUTIL_H
#define ACCEL_TESTUTIL_H

#include <accel/accel.h>
#include <check.h>
#include <stdbool.h>
#include <stdint.h>

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

/* Create a context with a capturing logger; fails the test on error. */
accel_ctx *make_ctx(accel_backend_kind backend, accel_fallback_policy policy, log_capture *cap,
                    accel_log_level level);

/* Pillow's convert('L') for one RGB pixel, written independently of the
 * library: the ITU-R 601-2 weights 299/587/114 in Pillow's 16-bit fixed point. */
uint8_t ref_luma(unsigned r, unsigned g, unsigned b);

/* Deterministic pseudo-random bytes. */
void fill_random(uint8_t *p, size_t n, uint32_t seed);

/* Load dir/name.npy, or dir/name.npy.gz (gunzipped through a temporary
 * file); NULL when neither exists, a test failure when one cannot be read. */
accel_buffer *load_npy_gz(const char *dir, const char *name);

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

#define ACCEL_TEST_MAIN(suite_fn)                                                                                      \
  int main(void) {                                                                                                     \
    clear_accel_env();                                                                                                 \
    return run_suite(suite_fn());                                                                                      \
  }

#endif
