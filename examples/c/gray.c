/* examples/c/gray.c - convert a PPM/PGM/NPY image to gray with libaccel.
 *
 *   cc gray.c $(pkg-config --cflags --libs accel) -o gray
 *   ./gray photo.ppm photo-gray.pgm
 *
 * Shows the whole pattern: a context, a library-allocated buffer, a view of
 * caller memory, errors with messages, and the per-stage statistics. */
#include <accel/accel.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, accel_status s, const accel_ctx *ctx) {
  fprintf(stderr, "%s: %s: %s\n", what, accel_status_string(s), accel_last_error(ctx));
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s INPUT.{ppm,pgm,npy} OUTPUT.{pgm,npy}\n", argv[0]);
    return 2;
  }
  accel_ctx *ctx = NULL;
  accel_status s = accel_ctx_create(NULL, &ctx); /* defaults: AUTO backend, CPU fallback allowed */
  if (s) return fail("accel_ctx_create", s, NULL);

  size_t n = strlen(argv[1]);
  accel_buffer *img = NULL;
  s = n > 4 && strcmp(argv[1] + n - 4, ".npy") == 0 ? accel_npy_load(ctx, argv[1], &img)
                                                    : accel_pnm_load(ctx, argv[1], &img);
  if (s) return fail(argv[1], s, ctx);
  accel_array src;
  accel_buffer_view(img, &src);

  static unsigned char gray[8192 * 8192];
  if (src.ndim < 2 || src.shape[0] * src.shape[1] > (int64_t)sizeof gray) {
    fprintf(stderr, "%s: image too large for this example\n", argv[1]);
    return 1;
  }
  accel_array dst;
  int64_t shape[2] = {src.shape[0], src.shape[1]};
  accel_array_init(&dst, gray, ACCEL_DTYPE_U8, 2, shape);
  s = accel_image_to_gray(ctx, &src, &dst);
  if (s) return fail("accel_image_to_gray", s, ctx);

  size_t m = strlen(argv[2]);
  s = m > 4 && strcmp(argv[2] + m - 4, ".npy") == 0 ? accel_npy_save(ctx, argv[2], &dst)
                                                    : accel_pnm_save(ctx, argv[2], &dst);
  if (s) return fail(argv[2], s, ctx);

  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  if (accel_ctx_stats_find(ctx, "image.gray", &st) == ACCEL_OK)
    printf("%s: %lldx%lld, image.gray ran on the %s in %.3f ms\n", argv[2], (long long)shape[1], (long long)shape[0],
           st.gpu_runs ? "GPU" : "CPU", st.seconds * 1e3);
  accel_buffer_destroy(img);
  accel_ctx_destroy(ctx);
  return 0;
}
