/* suite_image: gray conversion against Pillow's own output (fixtures made by
 * Pillow 9.4.0) and an independent formula, over every layout it accepts;
 * the CUDA conversion in host emulation. */
#include "emulated_gpu.h"
#include "testutil.h"

#include "image/convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static accel_ctx *ctx;

static void setup(void) { ctx = cpu_ctx(); }
static void teardown(void) { accel_ctx_destroy(ctx); }

static accel_buffer *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/gray/%s", test_data_dir(), name);
  accel_buffer *b = NULL;
  size_t n = strlen(name);
  accel_status s =
      n > 4 && strcmp(name + n - 4, ".npy") == 0 ? accel_npy_load(NULL, path, &b) : accel_pnm_load(NULL, path, &b);
  ck_assert_msg(s == ACCEL_OK, "load %s: %s", path, accel_last_error(NULL));
  return b;
}

/* Convert fixture `in` and compare with Pillow's convert('L') in `expected`. */
static void check_against_pillow(const char *in, const char *expected) {
  accel_buffer *src = load(in), *ref = load(expected);
  accel_array s, r, d;
  accel_buffer_view(src, &s);
  accel_buffer_view(ref, &r);
  ck_assert_int_eq(r.shape[0], s.shape[0]);
  ck_assert_int_eq(r.shape[1], s.shape[1]);
  accel_buffer *out = NULL;
  ck_assert_int_eq(accel_buffer_create(ACCEL_DTYPE_U8, 2, s.shape, &out), ACCEL_OK);
  accel_buffer_view(out, &d);
  ck_assert_msg(accel_image_to_gray(ctx, &s, &d) == ACCEL_OK, "%s", accel_last_error(ctx));
  ck_assert_mem_eq(d.data, r.data, (size_t)(r.shape[0] * r.shape[1]));
  accel_buffer_destroy(src);
  accel_buffer_destroy(ref);
  accel_buffer_destroy(out);
}

START_TEST(rgb_matches_pillow) { check_against_pillow("chelsea_37x23.ppm", "chelsea_37x23.L.pgm"); }
END_TEST

START_TEST(rgba_matches_pillow_alpha_ignored) {
  check_against_pillow("coffee_rgba_29x17.npy", "coffee_rgba_29x17.L.npy");
}
END_TEST

START_TEST(gray_alpha_matches_pillow) { check_against_pillow("la_29x17.npy", "la_29x17.L.npy"); }
END_TEST

START_TEST(sample_photo_matches_pillow) { check_against_pillow("../../../samples/astronaut.ppm", "astronaut.L.pgm"); }
END_TEST

START_TEST(known_pillow_values) {
  /* Image.new('RGB', (1, 1), c).convert('L').getpixel((0, 0)) under Pillow 9.4.0 */
  static const uint8_t px[6][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}, {1, 2, 3}, {128, 64, 200}};
  static const uint8_t pillow[6] = {76, 150, 29, 255, 2, 99};
  uint8_t out[6];
  accel_array s, d;
  accel_array_init(&s, (void *)px, ACCEL_DTYPE_U8, 3, (int64_t[]){1, 6, 3});
  accel_array_init(&d, out, ACCEL_DTYPE_U8, 2, (int64_t[]){1, 6});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_OK);
  ck_assert_mem_eq(out, pillow, 6);
}
END_TEST

START_TEST(every_channel_layout) {
  enum { H = 19, W = 31 };
  uint8_t src[H * W * 4], dst[H * W], g1[H * W];
  fill_random(src, sizeof src, 9);
  for (int c = 1; c <= 4; c++) {
    accel_array s, d;
    accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, c});
    accel_array_init(&d, dst, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 1}); /* (H, W, 1) dst is accepted */
    ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_OK);
    for (int i = 0; i < H * W; i++) {
      const uint8_t *p = src + i * c;
      uint8_t want = c >= 3 ? ref_luma(p[0], p[1], p[2]) : p[0];
      ck_assert_msg(dst[i] == want, "C=%d pixel %d: %d != %d", c, i, dst[i], want);
    }
  }
  /* (H, W) gray is copied unchanged */
  accel_array s, d;
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  accel_array_init(&d, g1, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_OK);
  ck_assert_mem_eq(g1, src, sizeof g1);
}
END_TEST

START_TEST(any_strides_flipped_bgr_and_padded) {
  enum { H = 23, W = 17 };
  uint8_t bgr[H][W][3];
  fill_random(&bgr[0][0][0], sizeof bgr, 3);
  /* view BGR memory as RGB flipped upside down: negative row and channel strides */
  accel_array s = {.data = &bgr[H - 1][0][2],
                   .dtype = ACCEL_DTYPE_U8,
                   .ndim = 3,
                   .shape = {H, W, 3},
                   .strides = {-(int64_t)(W * 3), 3, -1}};
  /* write into every other column of a wider buffer, right to left */
  uint8_t wide[H][2 * W + 1];
  memset(wide, 0x77, sizeof wide);
  accel_array d = {
      .data = &wide[0][2 * (W - 1)], .dtype = ACCEL_DTYPE_U8, .ndim = 2, .shape = {H, W}, .strides = {2 * W + 1, -2}};
  ck_assert_msg(accel_image_to_gray(ctx, &s, &d) == ACCEL_OK, "%s", accel_last_error(ctx));
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      const uint8_t *p = bgr[H - 1 - y][x];
      ck_assert_int_eq(wide[y][2 * (W - 1 - x)], ref_luma(p[2], p[1], p[0]));
      ck_assert_int_eq(wide[y][2 * (W - 1 - x) + 1], 0x77); /* gaps untouched */
    }
}
END_TEST

START_TEST(threads_do_not_change_the_result) {
  enum { H = 300, W = 401 }; /* big enough to run in parallel */
  uint8_t *src = malloc(H * W * 3), *a = malloc(H * W), *b = malloc(H * W);
  fill_random(src, H * W * 3, 77);
  accel_ctx *one = NULL;
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.cpu_threads = 1;
  ck_assert_int_eq(accel_ctx_create(&o, &one), ACCEL_OK);
  accel_array s, d1, d2;
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_array_init(&d1, a, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  accel_array_init(&d2, b, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  ck_assert_int_eq(accel_image_to_gray(one, &s, &d1), ACCEL_OK);
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d2), ACCEL_OK);
  ck_assert_mem_eq(a, b, H * W);
  for (int i = 0; i < H * W; i++) ck_assert_int_eq(a[i], ref_luma(src[3 * i], src[3 * i + 1], src[3 * i + 2]));
  accel_ctx_destroy(one);
  free(src);
  free(a);
  free(b);
}
END_TEST

START_TEST(empty_images_succeed_without_work) {
  uint8_t dummy;
  accel_array s, d;
  accel_array_init(&s, NULL, ACCEL_DTYPE_U8, 3, (int64_t[]){0, 5, 3});
  accel_array_init(&d, &dummy, ACCEL_DTYPE_U8, 2, (int64_t[]){0, 5});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_OK);
  size_t n = 1;
  accel_ctx_stats_count(ctx, &n);
  ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(bad_arguments_are_refused_with_messages) {
  uint8_t buf[4 * 4 * 5], out[16];
  accel_array s, d;
  accel_array_init(&d, out, ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4});
  ck_assert_int_eq(accel_image_to_gray(NULL, &s, &d), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_image_to_gray(ctx, NULL, &d), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_image_to_gray(ctx, &d, NULL), ACCEL_ERR_INVALID_ARG);

  accel_array_init(&s, buf, ACCEL_DTYPE_U8, 3, (int64_t[]){4, 4, 5});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG); /* 5 channels */
  accel_array_init(&s, buf, ACCEL_DTYPE_U8, 4, (int64_t[]){1, 4, 4, 3});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG); /* 4-D */
  accel_array_init(&s, buf, ACCEL_DTYPE_U16, 3, (int64_t[]){4, 4, 2});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "U16"));
  accel_array_init(&s, buf, ACCEL_DTYPE_U8, 3, (int64_t[]){4, 3, 3});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG); /* size mismatch */
  accel_array_init(&s, NULL, ACCEL_DTYPE_U8, 3, (int64_t[]){4, 4, 3});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG); /* NULL data */
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "NULL data"));
  accel_array_init(&s, buf, ACCEL_DTYPE_U8, 3, (int64_t[]){4, 4, 3});
  accel_array_init(&d, buf + 8, ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4});
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG); /* overlap */
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "overlap"));
  accel_array_init(&d, out, ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4});
  s.ndim = 12;
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG);
  accel_array_init(&s, buf, ACCEL_DTYPE_U8, 3, (int64_t[]){4, 4, 3});
  s.strides[0] = INT64_MIN;
  ck_assert_int_eq(accel_image_to_gray(ctx, &s, &d), ACCEL_ERR_INVALID_ARG);
}
END_TEST

#if EXPECT_CUDA
/* The CUDA conversion (kernels/image.cu) in host emulation, both copy
 * paths (pitched rows, and packing through host memory for other strides):
 * the reference's values, and every CUDA call's failure falls back with the
 * error's name. */
typedef struct gray_case {
  uint8_t rgb[37][53][4], want[37][53];
  int strided; /* the source read through a flipped, channel-reversed view */
} gray_case;

static accel_status gray_on(accel_ctx *ctx, void *user) {
  gray_case *c = user;
  uint8_t out[37][53];
  accel_array s, d;
  if (c->strided) {
    s = (accel_array){.data = &c->rgb[36][0][2],
                      .dtype = ACCEL_DTYPE_U8,
                      .ndim = 3,
                      .shape = {37, 53, 3},
                      .strides = {-53 * 4, 4, -1}};
  } else {
    accel_array_init(&s, c->rgb, ACCEL_DTYPE_U8, 3, (int64_t[]){37, 53, 4});
  }
  accel_array_init(&d, out, ACCEL_DTYPE_U8, 2, (int64_t[]){37, 53});
  const accel_status st = accel_image_to_gray(ctx, &s, &d);
  if (!st) ck_assert(memcmp(out, c->want, sizeof out) == 0);
  return st;
}

START_TEST(gpu_gray_in_emulation) {
  static gray_case c;
  fill_random(&c.rgb[0][0][0], sizeof c.rgb, 8);
  for (c.strided = 0; c.strided < 2; c.strided++) {
    for (int y = 0; y < 37; y++)
      for (int x = 0; x < 53; x++) {
        const uint8_t *p = c.rgb[c.strided ? 36 - y : y][x];
        c.want[y][x] = c.strided ? ref_luma(p[2], p[1], p[0]) : ref_luma(p[0], p[1], p[2]);
      }
    ck_assert_int_ge(emulated_fault_sweep("image.gray", gray_on, &c), 5);
  }
}
END_TEST
#endif

/* The RGB-to-gray row conversion's vector paths (AVX2, AVX-512), each forced
 * where the CPU has it, equal the scalar formula at every width. */
START_TEST(gray_paths_equal_the_scalar_formula) {
  uint32_t seed = 77;
  const int64_t widths[] = {1, 7, 8, 10, 11, 15, 16, 21, 22, 23, 31, 32, 63, 64, 65, 100, 2560};
  for (size_t c = 0; c < sizeof widths / sizeof widths[0]; c++) {
    const int64_t w = widths[c];
    uint8_t *rgb = malloc((size_t)(3 * w)), *want = malloc((size_t)w), *got = malloc((size_t)w);
    for (int64_t i = 0; i < 3 * w; i++) {
      seed = seed * 1664525u + 1013904223u;
      rgb[i] = (uint8_t)(i % 5 == 0 ? 255 : i % 7 == 0 ? 0 : seed >> 24); /* extremes and noise */
    }
    accel__gray_path = ACCEL__GRAY_SCALAR;
    accel__rgb_row_to_gray(rgb, w, want);
    for (int path = ACCEL__GRAY_AVX2; path <= ACCEL__GRAY_AVX512; path++) {
      if (!accel__gray_path_available(path)) continue;
      accel__gray_path = path;
      memset(got, 0xA5, (size_t)w);
      accel__rgb_row_to_gray(rgb, w, got);
      ck_assert_msg(memcmp(got, want, (size_t)w) == 0, "width %lld: path %d differs", (long long)w, path);
    }
    accel__gray_path = ACCEL__GRAY_AUTO;
    free(rgb);
    free(want);
    free(got);
  }
}
END_TEST

Suite *suite_image(void) {
  TCase *tc = new_case("gray", 0, setup, teardown);
  tcase_add_test(tc, rgb_matches_pillow);
  tcase_add_test(tc, gray_paths_equal_the_scalar_formula);
  tcase_add_test(tc, rgba_matches_pillow_alpha_ignored);
  tcase_add_test(tc, gray_alpha_matches_pillow);
  tcase_add_test(tc, sample_photo_matches_pillow);
  tcase_add_test(tc, known_pillow_values);
  tcase_add_test(tc, every_channel_layout);
  tcase_add_test(tc, any_strides_flipped_bgr_and_padded);
  tcase_add_test(tc, threads_do_not_change_the_result);
  tcase_add_test(tc, empty_images_succeed_without_work);
  tcase_add_test(tc, bad_arguments_are_refused_with_messages);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_gray_in_emulation);
#endif
  return suite_of("image", tc);
}

ACCEL_TEST_MAIN(suite_image)
