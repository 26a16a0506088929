/* suite_ct_peaks: accel_ct_markers with peak_local_max's other parameters
 * (the second version of accel_ct_marker_options): small cases whose peaks
 * scikit-image computed (0.19.3, and 0.24 for the 0.22 rules), the general
 * search against the first version's fast path on the committed fixtures,
 * the emulated GPU running it, and the refused arguments.
 * tests/python/test_peaks.py compares hundreds of random cases with
 * scikit-image itself. */
#include "emulated_gpu.h"
#include "testutil.h"

#include "ct/ct.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static accel_ct_marker_options general_options(int md) {
  accel_ct_marker_options o;
  accel_ct_marker_options_init(&o, sizeof o);
  o.min_distance = md;
  o.values = ACCEL_CT_VALUES_ANY;
  o.order = ACCEL_CT_PEAKS_SORTED;
  return o;
}

/* The peaks of a search, in their numbers' order, as flat indices. */
static int peaks_of(accel_ctx *ctx, const accel_array *image, const accel_array *mask, const accel_ct_marker_options *o,
                    int64_t *flat, int cap) {
  const int64_t n = image->ndim == 1 ? image->shape[0] : image->shape[0] * image->shape[1];
  int32_t *out = calloc((size_t)n, sizeof *out);
  accel_array a = array_of(out, ACCEL_DTYPE_I32, image->ndim, image->shape);
  uint32_t count = 0;
  ck_assert_msg(accel_ct_markers(ctx, image, mask, o, &a, &count) == ACCEL_OK, "%s", accel_last_error(ctx));
  ck_assert_int_le(count, cap);
  int seen = 0;
  for (int64_t i = 0; i < n; i++)
    if (out[i]) {
      ck_assert_int_le(out[i], (int32_t)count);
      flat[out[i] - 1] = i;
      seen++;
    }
  ck_assert_int_eq(seen, (int)count);
  free(out);
  return (int)count;
}

static void expect_peaks(accel_ctx *ctx, const accel_array *image, const accel_array *mask,
                         const accel_ct_marker_options *o, const int64_t *want, int nwant, const char *what) {
  int64_t got[64];
  const int n = peaks_of(ctx, image, mask, o, got, 64);
  ck_assert_msg(n == nwant, "%s: %d peaks, scikit-image %d", what, n, nwant);
  for (int k = 0; k < n; k++)
    ck_assert_msg(got[k] == want[k], "%s: peak %d at %lld, scikit-image's at %lld", what, k, (long long)got[k],
                  (long long)want[k]);
}

START_TEST(one_dimensional_image) {
  accel_ctx *ctx = cpu_ctx();
  double v[7] = {0, 2, 2, 0, 3, 0, 1};
  accel_array im = array_of(v, ACCEL_DTYPE_F64, 1, (const int64_t[]){7});
  accel_ct_marker_options o = general_options(1);
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){4, 1, 2, 6}, 4, "1-D, min_distance 1");
  o.min_distance = 2;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){4, 1}, 2, "1-D, min_distance 2");
  o.order = ACCEL_CT_PEAKS_C_ORDER; /* the same peaks numbered in C order */
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){1, 4}, 2, "1-D in C order");
  accel_ctx_destroy(ctx);
}
END_TEST

/* scikit-image's docstring example: 1.5 and 1 in a 7 x 7 image of zeros. */
START_TEST(docstring_example) {
  accel_ctx *ctx = cpu_ctx();
  float v[49] = {0};
  v[3 * 7 + 4] = 1;
  v[3 * 7 + 2] = 1.5f;
  accel_array im = array_of(v, ACCEL_DTYPE_F32, 2, (const int64_t[]){7, 7});
  accel_ct_marker_options o = general_options(1);
  o.exclude_border[0] = o.exclude_border[1] = 1; /* exclude_border=True */
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){23, 25}, 2, "min_distance 1");
  o.min_distance = 2;
  o.exclude_border[0] = o.exclude_border[1] = 2;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){23}, 1, "min_distance 2");
  o.exclude_border[1] = 3; /* column 2 is within 3 of the border now, column 4 too */
  expect_peaks(ctx, &im, NULL, &o, NULL, 0, "exclude_border (2, 3)");
  accel_ctx_destroy(ctx);
}
END_TEST

/* Labels whose regions are not connected (7: two blobs), thresholds, counts,
 * the 1-norm and a footprint without its centre. */
static void labels_and_parameters_on(accel_ctx *ctx) {
  int32_t lab[30] = {7, 7, 0, 3, 3, 0, 7, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 0, 0, 0, 0, 7, 7, 0, 0, 0};
  double v[30] = {1, 2, 0, 5, 5, 0, 3, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 1, 0, 0, 0, 0, 2, 6, 0, 0, 0};
  const int64_t shape[2] = {5, 6};
  accel_array im = array_of(v, ACCEL_DTYPE_F64, 2, shape), labels = array_of(lab, ACCEL_DTYPE_I32, 2, shape);
  accel_ct_marker_options o = general_options(1);
  o.labels = &labels;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){3, 4, 19, 26, 6}, 5, "labels");
  o.num_peaks_per_label = 1;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){3, 19}, 2, "one peak per label");
  o.num_peaks_per_label = -1;
  o.num_peaks = 2;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){19, 26}, 2, "two peaks in all");
  o = general_options(1);
  o.threshold_abs = 4.5;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){19, 26, 3, 4}, 4, "threshold_abs");
  o = general_options(1);
  o.threshold_rel = 0.5;
  o.p_norm = 1;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){19, 26, 3, 4}, 4, "threshold_rel, 1-norm");
  uint8_t f[3] = {1, 0, 1};
  accel_array fp = array_of(f, ACCEL_DTYPE_U8, 2, (const int64_t[]){1, 3});
  o = general_options(1);
  o.footprint = &fp;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){3, 4}, 2, "footprint without its centre, 0.19.3");
  o.rules = ACCEL_CT_RULES_SKIMAGE_0_22; /* beyond the border: the nearest pixel, (1, 0) itself */
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){3, 4, 6}, 3, "footprint without its centre, 0.22");
}

START_TEST(labels_and_parameters) {
  accel_ctx *ctx = cpu_ctx();
  labels_and_parameters_on(ctx);
  accel_ctx_destroy(ctx);
}
END_TEST

/* scikit-image's test_peak_at_border: a negative image. 0.19.3 sees 0 beyond
 * the border (no peak within min_distance of it), 0.20 and later the
 * nearest pixel. */
static void negative_image_at_the_border_on(accel_ctx *ctx) {
  int16_t v[100];
  double d[100];
  for (int i = 0; i < 100; i++) v[i] = -2;
  v[24] = v[30] = -1;
  for (int i = 0; i < 100; i++) d[i] = v[i];
  accel_array im = array_of(d, ACCEL_DTYPE_F64, 2, (const int64_t[]){10, 10});
  accel_ct_marker_options o = general_options(3);
  o.background = INT16_MIN;
  expect_peaks(ctx, &im, NULL, &o, NULL, 0, "0.19.3 rules");
  o.rules = ACCEL_CT_RULES_SKIMAGE_0_22;
  expect_peaks(ctx, &im, NULL, &o, (const int64_t[]){24, 30}, 2, "0.22 rules");
}

START_TEST(negative_image_at_the_border) {
  accel_ctx *ctx = cpu_ctx();
  negative_image_at_the_border_on(ctx);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The general search (forced by values = ANY, and with an F64 copy of the
 * map) finds the fast path's markers on the committed fixtures; a caller of
 * the first version's struct gets them too. */
START_TEST(general_search_equals_the_fast_path) {
  static const char *const names[] = {"berea_pore", "food_aniso_64x96x80_s1"};
  accel_ctx *ctx = cpu_ctx();
  for (int f = 0; f < 2; f++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ct/%s", test_data_dir(), names[f]);
    accel_buffer *edt_b = must_load(dir, "edt"), *pores_b = must_load(dir, "pores"), *ref_b = must_load(dir, "markers");
    accel_array edt = view_of(edt_b), pores = view_of(pores_b), ref = view_of(ref_b);
    const uint64_t n = (uint64_t)(edt.shape[0] * edt.shape[1] * edt.shape[2]);
    int32_t *out = malloc(n * 4);
    double *e64 = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) e64[i] = ((const float *)edt.data)[i];
    accel_array o32 = array_of(out, ACCEL_DTYPE_I32, 3, edt.shape),
                edt64 = array_of(e64, ACCEL_DTYPE_F64, 3, edt.shape);
    accel_ct_marker_options o;
    accel_ct_marker_options_init(&o, sizeof o);
    o.values = ACCEL_CT_VALUES_ANY;
    for (int k = 0; k < 3; k++) {
      accel_ct_marker_options v1 = o;
      if (k == 2) { /* the first version's struct: its size, the defaults beyond */
        accel_ct_marker_options_init(&v1, offsetof(accel_ct_marker_options, values));
        v1.min_distance = 3;
      }
      uint32_t count = 0;
      memset(out, 0xff, n * 4);
      ck_assert_msg(accel_ct_markers(ctx, k == 1 ? &edt64 : &edt, &pores, &v1, &o32, &count) == ACCEL_OK, "%s",
                    accel_last_error(ctx));
      ck_assert_msg(memcmp(out, ref.data, n * 4) == 0, "%s: the search %d differs from scikit-image 0.19.3's", names[f],
                    k);
    }
    free(out);
    free(e64);
    accel_buffer_destroy(edt_b);
    accel_buffer_destroy(pores_b);
    accel_buffer_destroy(ref_b);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_peak_arguments) {
  accel_ctx *ctx = cpu_ctx();
  float v[16] = {0};
  int32_t out[16], lab[16] = {0};
  uint8_t m[16] = {0}, f[4] = {0};
  const int64_t shape[2] = {4, 4};
  accel_array im = array_of(v, ACCEL_DTYPE_F32, 2, shape), o32 = array_of(out, ACCEL_DTYPE_I32, 2, shape),
              mask = array_of(m, ACCEL_DTYPE_U8, 2, shape), labels = array_of(lab, ACCEL_DTYPE_I32, 2, shape),
              fp = array_of(f, ACCEL_DTYPE_U8, 2, (const int64_t[]){2, 2}),
              fp1 = array_of(f, ACCEL_DTYPE_U8, 1, (const int64_t[]){4});
  accel_ct_marker_options o = general_options(1);
  o.labels = &labels;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, &mask, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG); /* both */
  o = general_options(1);
  o.footprint = &fp; /* no element set */
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o.footprint = &fp1; /* not the image's rank */
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.p_norm = 0.5;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.exclude_border[1] = -1;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.exclude_border[2] = 1; /* past the rank */
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.num_peaks = -2;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.rules = 7;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o = general_options(1);
  o.trim = ACCEL_CT_TRIM_SADDLES; /* the trims are 3-D rules */
  ck_assert_int_eq(accel_ct_markers(ctx, &im, &mask, &o, &o32, NULL), ACCEL_ERR_UNSUPPORTED);
  o = general_options(1);
  v[5] = NAN;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, NULL, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  v[5] = -1; /* a distance map is not negative */
  o.values = ACCEL_CT_VALUES_DISTANCES;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, &mask, &o, &o32, NULL), ACCEL_ERR_INVALID_ARG);
  o.values = ACCEL_CT_VALUES_ANY;
  ck_assert_int_eq(accel_ct_markers(ctx, &im, &mask, &o, &o32, NULL), ACCEL_OK);
  accel_ctx_destroy(ctx);
}
END_TEST

#if EXPECT_CUDA
/* A search the GPU's window test serves (the mask's components, the cube, no
 * excluded border, a distance map): thresholds, counts, the 2-norm and the
 * sorted numbering on the host after it, equal to the CPU's, whole and in
 * slabs, 3-D and 2-D, counted as GPU runs. */
START_TEST(gpu_window_serves_the_general_search) {
  const accel__dims dims[2] = {{24, 20, 18}, {1, 60, 50}};
  const uint64_t budgets[2] = {(uint64_t)1 << 30, 60000};
  accel_ctx *cpu = cpu_ctx();
  for (int b = 0; b < 2; b++) {
    set_emulated_gpu_budget(budgets[b]);
    log_capture cap = {0};
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
    for (int k = 0; k < 2; k++) {
      const accel__dims d = dims[k];
      const uint64_t n = accel__dims_count(d);
      const int rank = k ? 2 : 3;
      const int64_t shape3[3] = {d.nz, d.ny, d.nx}, *shape = shape3 + 3 - rank;
      uint8_t *m = malloc(n);
      float *e = malloc(n * 4);
      int32_t *oa = malloc(n * 4), *ob = malloc(n * 4);
      fill_random(m, n, 7 + (uint32_t)k);
      for (uint64_t i = 0; i < n; i++) m[i] = m[i] < 170;
      accel_array mask = array_of(m, ACCEL_DTYPE_U8, rank, shape), edt = array_of(e, ACCEL_DTYPE_F32, rank, shape),
                  a = array_of(oa, ACCEL_DTYPE_I32, rank, shape), bb = array_of(ob, ACCEL_DTYPE_I32, rank, shape);
      accel_array m3 = array_of(m, ACCEL_DTYPE_U8, 3, shape3), e3 = array_of(e, ACCEL_DTYPE_F32, 3, shape3);
      ck_assert_int_eq(accel_ct_edt(cpu, &m3, NULL, &e3), ACCEL_OK);
      accel_ct_marker_options o;
      accel_ct_marker_options_init(&o, sizeof o);
      o.min_distance = 2;
      o.order = ACCEL_CT_PEAKS_SORTED;
      o.threshold_rel = 0.3;
      o.num_peaks = 40;
      o.num_peaks_per_label = 25;
      o.p_norm = 2;
      uint32_t ca = 0, cb = 0;
      ck_assert_msg(accel_ct_markers(gpu, &edt, &mask, &o, &a, &ca) == ACCEL_OK, "%s", accel_last_error(gpu));
      ck_assert_int_eq(accel_ct_markers(cpu, &edt, &mask, &o, &bb, &cb), ACCEL_OK);
      ck_assert_msg(ca == cb && ca > 3 && memcmp(oa, ob, n * 4) == 0, "budget %llu, %d-D: %u peaks, the CPU %u",
                    (unsigned long long)budgets[b], rank, ca, cb);
      free(m);
      free(e);
      free(oa);
      free(ob);
    }
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "ct.markers", &st), ACCEL_OK);
    ck_assert_msg(st.gpu_runs == 2 && st.cpu_runs == 0 && st.fallbacks == 0, "gpu %llu, cpu %llu",
                  (unsigned long long)st.gpu_runs, (unsigned long long)st.cpu_runs);
    accel_ctx_destroy(gpu);
  }
  set_emulated_gpu_budget((uint64_t)1 << 30);
  accel_ctx_destroy(cpu);
}
END_TEST

static accel_stage_stats markers_stats(accel_ctx *ctx) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, "ct.markers", &st), ACCEL_OK);
  return st;
}

/* A random 3-D search with labels, a footprint, an excluded border and
 * negative values (rules: 0.19.3's or 0.22's) on the GPU and the CPU. */
static void general_gpu_equals_cpu(accel_ctx *gpu, accel_ctx *cpu, uint32_t rules, bool f64) {
  const int64_t shape[3] = {14, 17, 19};
  const uint64_t n = 14 * 17 * 19;
  uint8_t *r = malloc(n), fp[45];
  float *v = malloc(n * 4);
  double *v64 = malloc(n * 8);
  int32_t *lab = malloc(n * 4), *oa = malloc(n * 4), *ob = malloc(n * 4);
  fill_random(r, n, 41 + rules);
  for (uint64_t i = 0; i < n; i++) {
    const int64_t z = (int64_t)i / (17 * 19), y = (int64_t)i / 19 % 17, x = (int64_t)i % 19;
    v[i] = (float)(sin(0.7 * x) * cos(0.5 * y) + 0.3 * sin(0.9 * z) + (r[i] % 8) * 0.01 - 0.6); /* negatives */
    v64[i] = v[i];
    lab[i] = r[i] < 20 ? 0 : 1 + (int32_t)(x / 7 + 3 * (y / 6)) + (z > 8 ? 10 : 0); /* boxes that overlap */
  }
  fill_random(fp, sizeof fp, 5);
  for (int k = 0; k < 45; k++) fp[k] = fp[k] < 160;
  fp[22] = 1;
  accel_array im = array_of(f64 ? (void *)v64 : (void *)v, f64 ? ACCEL_DTYPE_F64 : ACCEL_DTYPE_F32, 3, shape),
              la = array_of(lab, ACCEL_DTYPE_I32, 3, shape),
              foot = array_of(fp, ACCEL_DTYPE_U8, 3, (const int64_t[]){3, 3, 5}),
              a = array_of(oa, ACCEL_DTYPE_I32, 3, shape), b = array_of(ob, ACCEL_DTYPE_I32, 3, shape);
  for (int variant = 0; variant < 3; variant++) {
    accel_ct_marker_options o = general_options(2);
    o.rules = rules;
    o.background = -0.25;
    if (variant == 0) o.labels = &la, o.num_peaks_per_label = 3;
    if (variant == 1) o.footprint = &foot, o.exclude_border[0] = 1, o.exclude_border[2] = 2;
    if (variant == 2) o.labels = &la, o.footprint = &foot, o.threshold_rel = 0.2, o.num_peaks = 30;
    uint32_t ca = 0, cb = 0;
    ck_assert_msg(accel_ct_markers(gpu, &im, NULL, &o, &a, &ca) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_ct_markers(cpu, &im, NULL, &o, &b, &cb), ACCEL_OK);
    ck_assert_msg(ca == cb && ca > 2 && memcmp(oa, ob, n * 4) == 0, "rules %u, variant %d: %u peaks, the CPU %u", rules,
                  variant, ca, cb);
  }
  free(r);
  free(v);
  free(v64);
  free(lab);
  free(oa);
  free(ob);
}

/* Every other general search runs its own window test on the GPU (a GPU
 * run, even under DENY): scikit-image's values, and the CPU's on random
 * volumes; one whose arrays exceed the budget is declined to the CPU (no
 * fallback, no warning). */
START_TEST(gpu_runs_the_general_search) {
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap), *cpu = cpu_ctx();
  double v[7] = {0, 2, 2, 0, 3, 0, 1};
  accel_array im = array_of(v, ACCEL_DTYPE_F64, 1, (const int64_t[]){7});
  accel_ct_marker_options o = general_options(1);
  expect_peaks(gpu, &im, NULL, &o, (const int64_t[]){4, 1, 2, 6}, 4, "emulated GPU");
  labels_and_parameters_on(gpu);
  negative_image_at_the_border_on(gpu);
  for (int f64 = 0; f64 < 2; f64++) {
    general_gpu_equals_cpu(gpu, cpu, ACCEL_CT_RULES_SKIMAGE_0_19, f64);
    general_gpu_equals_cpu(gpu, cpu, ACCEL_CT_RULES_SKIMAGE_0_22, f64);
  }
  accel_stage_stats st = markers_stats(gpu);
  ck_assert_msg(st.gpu_runs == st.runs && st.runs >= 20 && st.cpu_runs == 0 && st.fallbacks == 0,
                "runs %llu, cpu %llu, gpu %llu, fallbacks %llu", (unsigned long long)st.runs,
                (unsigned long long)st.cpu_runs, (unsigned long long)st.gpu_runs, (unsigned long long)st.fallbacks);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget(20000);
  gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
  general_gpu_equals_cpu(gpu, cpu, ACCEL_CT_RULES_SKIMAGE_0_19, false);
  st = markers_stats(gpu);
  ck_assert_msg(st.cpu_runs == st.runs && st.gpu_runs == 0 && st.fallbacks == 0 && cap.n == 0,
                "over the budget: runs %llu, cpu %llu, gpu %llu", (unsigned long long)st.runs,
                (unsigned long long)st.cpu_runs, (unsigned long long)st.gpu_runs);
  set_emulated_gpu_budget((uint64_t)1 << 30);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}
END_TEST
#endif

static Suite *suite_ct_peaks(void) {
  TCase *tc = tcase_create("peaks");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, one_dimensional_image);
  tcase_add_test(tc, docstring_example);
  tcase_add_test(tc, labels_and_parameters);
  tcase_add_test(tc, negative_image_at_the_border);
  tcase_add_test(tc, general_search_equals_the_fast_path);
  tcase_add_test(tc, bad_peak_arguments);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_window_serves_the_general_search);
  tcase_add_test(tc, gpu_runs_the_general_search);
#endif
  return suite_of("ct_peaks", tc);
}

ACCEL_TEST_MAIN(suite_ct_peaks)
