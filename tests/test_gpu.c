/* suite_gpu: CUDA results equal CPU results. Runs only where a CUDA device
 * exists; elsewhere the program exits 77 (meson's "skipped") with the reason. */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static accel_ctx *gpu, *cpu;

static void setup(void) {
  gpu = make_ctx(ACCEL_BACKEND_CUDA, ACCEL_FALLBACK_DENY, NULL, ACCEL_LOG_WARN);
  cpu = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_DENY, NULL, ACCEL_LOG_WARN);
}

static void teardown(void) {
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}

static void compare_gray(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  size_t n = (size_t)(h * w);
  uint8_t *src = malloc(n * (size_t)c), *a = malloc(n), *b = malloc(n);
  fill_random(src, n * (size_t)c, seed);
  accel_array s, da, db;
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, (int64_t[]){h, w, c});
  accel_array_init(&da, a, ACCEL_DTYPE_U8, 2, (int64_t[]){h, w});
  accel_array_init(&db, b, ACCEL_DTYPE_U8, 2, (int64_t[]){h, w});
  ck_assert_msg(accel_image_to_gray(gpu, &s, &da) == ACCEL_OK, "gpu: %s", accel_last_error(gpu));
  ck_assert_int_eq(accel_image_to_gray(cpu, &s, &db), ACCEL_OK);
  ck_assert_msg(memcmp(a, b, n) == 0, "GPU and CPU differ at %lldx%lldx%lld", (long long)h, (long long)w, (long long)c);
  free(src);
  free(a);
  free(b);
}

START_TEST(context_runs_on_cuda) {
  accel_ctx_info i;
  accel_ctx_info_init(&i);
  accel_ctx_query(gpu, &i);
  ck_assert_int_eq(i.backend, ACCEL_BACKEND_CUDA);
  ck_assert_int_eq(i.device, 0);
  ck_assert_uint_gt(i.device_memory_budget, 0);
}
END_TEST

START_TEST(gray_equals_cpu) {
  compare_gray(1, 1, 3, 1);
  compare_gray(17, 33, 1, 2);
  compare_gray(31, 67, 2, 3);
  compare_gray(480, 640, 3, 4);
  compare_gray(3000, 4000, 4, 5); /* a 12 MP RGBA frame */
  compare_gray(1, 300000, 3, 6);  /* wider than one grid row of blocks */
  compare_gray(600000, 2, 3, 7);  /* taller than 65535 blocks of 8 rows: grid-stride rows */
  accel_stage_stats st;
  accel_stage_stats_init(&st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "image.gray", &st), ACCEL_OK);
  ck_assert_uint_eq(st.gpu_runs, 7);
  ck_assert_uint_eq(st.fallbacks, 0);
}
END_TEST

START_TEST(gray_strided_equals_cpu) {
  enum { H = 123, W = 457 };
  uint8_t *bgr = malloc(H * W * 3), *pad = malloc(H * (2 * W + 3)), *ref = malloc(H * W);
  fill_random(bgr, H * W * 3, 11);
  memset(pad, 0x55, H * (2 * W + 3));
  accel_array s = {.data = bgr + (H - 1) * W * 3 + 2, .dtype = ACCEL_DTYPE_U8, .ndim = 3,
                   .shape = {H, W, 3}, .strides = {-(int64_t)W * 3, 3, -1}};
  accel_array d = {.data = pad, .dtype = ACCEL_DTYPE_U8, .ndim = 2, .shape = {H, W}, .strides = {2 * W + 3, 2}};
  accel_array r;
  accel_array_init(&r, ref, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  ck_assert_msg(accel_image_to_gray(gpu, &s, &d) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_image_to_gray(cpu, &s, &r), ACCEL_OK);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      ck_assert_int_eq(pad[y * (2 * W + 3) + 2 * x], ref[y * W + x]);
      ck_assert_int_eq(pad[y * (2 * W + 3) + 2 * x + 1], 0x55);
    }
  free(bgr);
  free(pad);
  free(ref);
}
END_TEST

START_TEST(memory_budget_is_enforced_through_the_policy) {
  enum { H = 256, W = 256 };
  uint8_t *src = malloc(H * W * 3), *dst = malloc(H * W);
  fill_random(src, H * W * 3, 5);
  accel_array s, d;
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_array_init(&d, dst, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  accel_ctx_options o;
  accel_ctx_options_init(&o);
  o.backend = ACCEL_BACKEND_CUDA;
  o.device_memory_budget = 1024; /* far too small */
  o.fallback = ACCEL_FALLBACK_DENY;
  accel_ctx *tiny = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &tiny), ACCEL_OK);
  ck_assert_int_eq(accel_image_to_gray(tiny, &s, &d), ACCEL_ERR_DEVICE_MEMORY);
  ck_assert_ptr_nonnull(strstr(accel_last_error(tiny), "budget"));
  accel_ctx_destroy(tiny);

  log_capture cap = {0};
  o.fallback = ACCEL_FALLBACK_ALLOW;
  o.log_fn = capture_log;
  o.log_user = &cap;
  ck_assert_int_eq(accel_ctx_create(&o, &tiny), ACCEL_OK);
  ck_assert_int_eq(accel_image_to_gray(tiny, &s, &d), ACCEL_OK);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] image.gray failed: "), 1);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, ". CPU fallback."), 1);
  for (int i = 0; i < H * W; i++) ck_assert_int_eq(dst[i], ref_luma(src[3 * i], src[3 * i + 1], src[3 * i + 2]));
  accel_ctx_destroy(tiny);
  free(src);
  free(dst);
}
END_TEST

START_TEST(device_query_is_sane) {
  accel_device_info d;
  accel_device_info_init(&d);
  ck_assert_int_eq(accel_device_query(0, &d), ACCEL_OK);
  ck_assert_uint_gt(d.free_memory, 0);
  ck_assert_uint_le(d.free_memory, d.total_memory);
  ck_assert_int_gt(d.multiprocessors, 0);
  ck_assert_int_gt(d.runtime_version, 0);
  printf("device 0: %s, cc %d.%d, %d SMs\n", d.name, d.cc_major, d.cc_minor, d.multiprocessors);
}
END_TEST

/* The CUDA hash batch equals the CPU's on the committed corpus: every kind,
 * sizes 8 and 16 and a non-power-of-two size, colour binbits 3 and 5. */
START_TEST(hash_batch_equals_cpu) {
  DIR *d = opendir(TEST_DATA_DIR "/hash");
  ck_assert_ptr_nonnull(d);
  static char names[256][512];
  const char *paths[256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 256) {
    size_t l = strlen(e->d_name);
    if (l > 4 && (strcmp(e->d_name + l - 4, ".png") == 0 || strcmp(e->d_name + l - 4, ".jpg") == 0)) {
      snprintf(names[n], sizeof names[n], "%s/hash/%s", TEST_DATA_DIR, e->d_name);
      paths[n] = names[n];
      n++;
    }
  }
  closedir(d);
  ck_assert_int_gt(n, 30);
  const struct { int size, binbits, nkinds; } runs[] = {{8, 3, 6}, {16, 5, 6}, {6, 3, 5}};
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    accel_hash_options o;
    accel_hash_options_init(&o);
    o.nkinds = (uint32_t)runs[r].nkinds;
    const accel_hash_kind all[6] = {ACCEL_HASH_AHASH, ACCEL_HASH_DHASH, ACCEL_HASH_DHASH_VERTICAL, ACCEL_HASH_PHASH,
                                    runs[r].nkinds == 6 ? ACCEL_HASH_WHASH : ACCEL_HASH_COLORHASH, ACCEL_HASH_COLORHASH};
    memcpy(o.kinds, all, sizeof all);
    o.hash_size = runs[r].size;
    o.color_binbits = runs[r].binbits;
    size_t slot;
    ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
    uint8_t *a = malloc((size_t)n * 6 * slot), *b = malloc((size_t)n * 6 * slot);
    accel_status sa[256], sb[256];
    ck_assert_msg(accel_hash_files(gpu, paths, (size_t)n, &o, a, slot, sa) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_hash_files(cpu, paths, (size_t)n, &o, b, slot, sb), ACCEL_OK);
    for (int i = 0; i < n; i++) {
      ck_assert_msg(sa[i] == sb[i], "%s: %s vs %s", paths[i], accel_status_string(sa[i]), accel_status_string(sb[i]));
      ck_assert_msg(memcmp(a + (size_t)i * o.nkinds * slot, b + (size_t)i * o.nkinds * slot, o.nkinds * slot) == 0,
                    "%s: GPU hashes differ from the CPU's (size %d)", paths[i], runs[r].size);
    }
    free(a);
    free(b);
  }
  accel_stage_stats st;
  accel_stage_stats_init(&st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "hash.batch", &st), ACCEL_OK);
  ck_assert_uint_eq(st.gpu_runs, 3);
  ck_assert_uint_eq(st.fallbacks, 0);
}
END_TEST

Suite *suite_gpu(void) {
  Suite *s = suite_create("gpu");
  TCase *tc = tcase_create("cuda");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, context_runs_on_cuda);
  tcase_add_test(tc, gray_equals_cpu);
  tcase_add_test(tc, gray_strided_equals_cpu);
  tcase_add_test(tc, memory_budget_is_enforced_through_the_policy);
  tcase_add_test(tc, device_query_is_sane);
  tcase_add_test(tc, hash_batch_equals_cpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  clear_accel_env();
  accel_backend_info b;
  accel_backend_info_init(&b);
  accel_backend_query(ACCEL_BACKEND_CUDA, &b);
  if (!b.available) {
    printf("SKIP: no CUDA device: %s\n", b.reason);
    return 77;
  }
  return run_suite(suite_gpu());
}
