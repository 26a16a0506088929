/* suite_hash_dct: phash's DCT-II (lib/hash/dct.h) against scipy.fftpack.dct.
 *
 * - bit for bit against frozen SciPy 1.17.1 outputs at lengths that are not
 *   powers of two (tests/data/dct, made by make_dct_refs.py there): radix 3
 *   and 5, the generic pass for 7, 11, 13, 61, ..., and their mixes with 2 and 4;
 * - every plannable length up to 512 against the defining cosine sum (to
 *   rounding), and the plan's limits: pocketfft's Bluestein lengths and
 *   lengths past ACCEL__DCT_MAX are refused.
 */
#include "testutil.h"

#include "hash/dct.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 5 };

/* Row r of length n, as make_dct_refs.py builds it. */
static void fill_row(int r, int n, double *x) {
  for (int i = 0; i < n; i++) {
    switch (r) {
    case 0: x[i] = 128.0; break;
    case 1: x[i] = 255.0 * (i % 2); break;
    case 2: x[i] = 200.0 * ((i / 3) % 2); break;
    case 3: x[i] = (double)((7 * i * i + 3 * i + 11) % 256); break;
    default: x[i] = (double)((37 * i) % 101) / 7.0 - 5.5; break;
    }
  }
}

static accel__dct_plan *new_plan(int n) {
  accel__dct_plan *p = malloc(sizeof *p);
  ck_assert_ptr_nonnull(p);
  ck_assert_msg(accel__dct_plan_init(p, n), "no plan for length %d", n);
  return p;
}

START_TEST(dct_equals_scipy_bit_for_bit) {
  static const int lengths[] = {3,  5,  6,  7,  9,  10, 11, 12, 13, 14, 15, 20,  21,  22,  24,  28,
                                33, 35, 36, 44, 45, 49, 52, 60, 63, 77, 84, 121, 143, 180, 236, 244};
  char dir[512], name[64];
  snprintf(dir, sizeof dir, "%s/dct", test_data_dir());
  for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
    const int n = lengths[t];
    snprintf(name, sizeof name, "dct_%d", n);
    accel_buffer *b = must_load(dir, name);
    const accel_array ref = view_of(b);
    ck_assert_int_eq(ref.dtype, ACCEL_DTYPE_F64);
    ck_assert_int_eq(ref.ndim, 2);
    ck_assert_int_eq(ref.shape[0], ROWS);
    ck_assert_int_eq(ref.shape[1], n);
    accel__dct_plan *p = new_plan(n);
    double x[256], scratch[256];
    for (int r = 0; r < ROWS; r++) {
      fill_row(r, n, x);
      accel__dct2(p, x, scratch);
      const double *want = (const double *)ref.data + r * n;
      for (int k = 0; k < n; k++)
        ck_assert_msg(memcmp(&x[k], &want[k], sizeof x[k]) == 0, "length %d row %d coefficient %d: %a, scipy %a", n, r,
                      k, x[k], want[k]);
    }
    free(p);
    accel_buffer_destroy(b);
  }
}
END_TEST

/* Only pocketfft's choice of algorithm limits the plan: its Bluestein
 * lengths (primes from 191 on, and 2 x 239, ...) and lengths past the
 * plan's tables are refused; every other length is planned and transforms
 * as the defining sum y_k = 2 sum_i x_i cos(pi k (2i + 1) / 2n) does. */
START_TEST(every_length_plans_and_sums_like_the_definition) {
  accel__dct_plan *p = malloc(sizeof *p);
  double *x = malloc(sizeof(double) * 2 * ACCEL__DCT_MAX), *y = x + ACCEL__DCT_MAX;
  double *cosines = malloc(sizeof(double) * 4 * 512);
  ck_assert(p && x && cosines);
  int refused = 0;
  for (int n = 1; n <= ACCEL__DCT_MAX; n++) {
    const bool blue = accel__dct_bluestein(n);
    ck_assert_int_eq(accel__dct_plan_init(p, n), !blue);
    refused += blue;
    if (blue || n > 512) continue;
    for (int m = 0; m < 4 * n; m++) cosines[m] = cos(M_PI * m / (2.0 * n));
    fill_row(3, n, x);
    memcpy(y, x, sizeof(double) * (size_t)n);
    accel__dct2(p, y, y + n);
    for (int k = 0; k < n; k++) {
      double s = 0.0;
      for (int i = 0; i < n; i++) s += x[i] * cosines[(k * (2 * i + 1)) % (4 * n)];
      ck_assert_msg(fabs(y[k] - 2.0 * s) <= 1e-9 * 256.0 * n, "length %d coefficient %d: %g, sum %g", n, k, y[k],
                    2.0 * s);
    }
  }
  ck_assert(accel__dct_bluestein(191) && accel__dct_bluestein(478) && !accel__dct_bluestein(256));
  ck_assert(!accel__dct_bluestein(189) && !accel__dct_bluestein(4 * 61));
  ck_assert_int_gt(refused, 100);
  ck_assert(!accel__dct_plan_init(p, 0));
  ck_assert(!accel__dct_plan_init(p, ACCEL__DCT_MAX + 1));
  /* every length phash can ask for: hash_size up to 64 times highfreq_factor up to 16 */
  for (int n = 2; n <= 64; n++)
    for (int f = 1; f <= 16; f++) ck_assert_msg(accel__dct_plan_init(p, n * f), "length %d x %d", n, f);
  free(cosines);
  free(x);
  free(p);
}
END_TEST

static Suite *suite_hash_dct(void) {
  TCase *tc = new_case("dct", 120, NULL, NULL);
  tcase_add_test(tc, dct_equals_scipy_bit_for_bit);
  tcase_add_test(tc, every_length_plans_and_sums_like_the_definition);
  return suite_of("hash_dct", tc);
}

ACCEL_TEST_MAIN(suite_hash_dct)
