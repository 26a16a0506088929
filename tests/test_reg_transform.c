/* The registration domain's transform files and warp: elastix's
 * TransformParameters files (against elastix's own files, transformix's
 * fields and its result images) and accel_reg_warp (against independent
 * computations written here). */
#include "testutil.h"

#include "accel/reg.h"
#include "reg/cpu.h"
#include "reg/transform.h"
#include "reg/warp_prefilter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRANSFORMIX "/usr/bin/transformix"

/* ------------------------------------------------------------ helpers */

static double urand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (double)(*s >> 8) / 16777216.0;
}

/* A transform over a w x h image with control spacing `spacing` and random
 * parameters of up to `amp` pixels. */
static accel_reg_transform *random_transform(int64_t w, int64_t h, double spacing, double amp, uint32_t seed) {
  accel_reg_grid g;
  accel_reg_transform *t;
  ck_assert_int_eq(accel_reg_grid_for(w, h, spacing, &g), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(t);
  double *p = malloc((size_t)n * sizeof *p);
  for (int64_t k = 0; k < n; k++) p[k] = amp * (2 * urand(&seed) - 1);
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, n), ACCEL_OK);
  free(p);
  return t;
}

static char *make_temp_dir(void) {
  char *d = strdup("/tmp/accel-reg-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(d));
  return d;
}

static void remove_dir(char *d) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  ck_assert_int_eq(system(cmd), 0);
  free(d);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  ck_assert_int_eq(fread(s, 1, (size_t)n, f), n);
  s[n] = '\0';
  fclose(f);
  return s;
}

/* accel_reg_transform_field over the whole w x h image. */
static float *field_of(const accel_reg_transform *t, int64_t w, int64_t h) {
  float *f = malloc((size_t)(2 * w * h) * sizeof *f);
  const int64_t shape[3] = {2, h, w};
  accel_array a = array_of(f, ACCEL_DTYPE_F32, 3, shape);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, 0, 0, &a), ACCEL_OK);
  return f;
}

/* ------------------------------------------------------------ elastix files */

/* transformix's dense field of the file at `path` (a w x h image), read
 * from the .mhd/.raw it writes when ResultImageFormat is "mhd": (h, w, 2). */
static float *transformix_field(const char *dir, const char *path, int64_t w, int64_t h) {
  char *text = read_text(path), *at = strstr(text, "(ResultImageFormat \"tif\")");
  ck_assert_ptr_nonnull(at);
  memcpy(at, "(ResultImageFormat \"mhd\")", 25);
  char mhd_params[600], cmd[2000], raw[600];
  snprintf(mhd_params, sizeof mhd_params, "%s/mhd_params.txt", dir);
  write_text(mhd_params, text);
  free(text);
  snprintf(cmd, sizeof cmd, "%s -def all -tp '%s' -out '%s' > /dev/null 2>&1", TRANSFORMIX, mhd_params, dir);
  ck_assert_msg(system(cmd) == 0, "transformix failed: %s", cmd);
  snprintf(raw, sizeof raw, "%s/deformationField.raw", dir);
  const int64_t shape[3] = {h, w, 2};
  accel_buffer *b = NULL;
  ck_assert_msg(accel_raw_load(NULL, raw, ACCEL_DTYPE_F32, 3, shape, 0, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
  float *out = malloc((size_t)(2 * w * h) * sizeof *out);
  memcpy(out, view_of(b).data, (size_t)(2 * w * h) * sizeof *out);
  accel_buffer_destroy(b);
  return out;
}

/* Files elastix 5.0.1 wrote (tests/data/reg, README there): each linear
 * transform and a B-spline on an affine initial transform (named relative to
 * the file, as elastix writes a name given relative). Ours loads them as
 * written and gives transformix's field; without transformix, the loads. */
START_TEST(elastix_files_give_transformix_fields) {
  static const char *const names[] = {"elastix_translation.txt", "elastix_euler.txt", "elastix_affine.txt",
                                      "elastix_bspline_on_affine.txt"};
  static const accel_reg_linear_kind kinds[] = {ACCEL_REG_LINEAR_TRANSLATION, ACCEL_REG_LINEAR_RIGID,
                                                ACCEL_REG_LINEAR_AFFINE, ACCEL_REG_LINEAR_AFFINE};
  char path[600];
  snprintf(path, sizeof path, "%s/reg/%s", TEST_DATA_DIR, names[_i]);
  accel_reg_transform *t = NULL;
  ck_assert_msg(accel_reg_transform_load(NULL, path, &t) == ACCEL_OK, "%s", accel_last_error(NULL));
  accel_reg_linear_kind kind;
  double v[6], c[2];
  accel_reg_transform_initial(t, &kind, v, c);
  ck_assert_int_eq(kind, kinds[_i]);
  ck_assert_int_eq(accel_reg_transform_count(t), _i == 3 ? 242 : 0);
  if (_i == 2) ck_assert(v[0] == 0.9979 && v[5] == -0.334823 && c[0] == 255.5 && c[1] == 255.5);
  if (access(TRANSFORMIX, X_OK) != 0) {
    printf("SKIP elastix_files_give_transformix_fields (transformix part): no %s\n", TRANSFORMIX);
    accel_reg_transform_destroy(t);
    return;
  }
  /* transformix reads relative names from its working directory: both files go to one */
  char *dir = make_temp_dir(), cmd[2000], raw[600];
  for (int k = 0; k < 2; k++) {
    const char *name = k ? names[_i] : names[2];
    snprintf(path, sizeof path, "%s/reg/%s", TEST_DATA_DIR, name);
    char *text = read_text(path), *tif = strstr(text, "(ResultImageFormat \"tif\")");
    if (tif) memcpy(tif, "(ResultImageFormat \"mhd\")", 25);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_text(path, text);
    free(text);
  }
  snprintf(cmd, sizeof cmd, "cd '%s' && %s -def all -tp '%s' -out . > /dev/null 2>&1", dir, TRANSFORMIX, names[_i]);
  ck_assert_msg(system(cmd) == 0, "transformix failed: %s", cmd);
  snprintf(raw, sizeof raw, "%s/deformationField.raw", dir);
  const int64_t shape[3] = {512, 512, 2};
  accel_buffer *b = NULL;
  ck_assert_msg(accel_raw_load(NULL, raw, ACCEL_DTYPE_F32, 3, shape, 0, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
  const float *theirs = view_of(b).data, *ours = field_of(t, 512, 512);
  double worst = 0;
  for (int64_t i = 0; i < 512 * 512; i++)
    for (int d = 0; d < 2; d++) worst = fmax(worst, fabs((double)theirs[2 * i + d] - (double)ours[d * 512 * 512 + i]));
  ck_assert_msg(worst <= 1e-4, "%s: largest difference %g px", names[_i], worst);
  free((void *)ours);
  accel_buffer_destroy(b);
  accel_reg_transform_destroy(t);
  remove_dir(dir);
}
END_TEST

/* Save t, run transformix on the file, compare its field with ours. */
static double transformix_difference(const accel_reg_transform *t) {
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_transform_grid(t, &g), ACCEL_OK);
  const int64_t w = g.image_size[0], h = g.image_size[1];
  char *dir = make_temp_dir(), path[600];
  snprintf(path, sizeof path, "%s/TransformParameters.0.txt", dir);
  ck_assert_msg(accel_reg_transform_save(NULL, t, path) == ACCEL_OK, "%s", accel_last_error(NULL));
  float *theirs = transformix_field(dir, path, w, h), *ours = field_of(t, w, h);
  double worst = 0;
  for (int64_t i = 0; i < w * h; i++)
    for (int d = 0; d < 2; d++) worst = fmax(worst, fabs((double)theirs[2 * i + d] - (double)ours[d * w * h + i]));
  free(theirs);
  free(ours);
  remove_dir(dir);
  return worst;
}

/* transformix evaluates the files we write as we do: a B-spline whose grid
 * leaves part of the image outside its valid region, alone and after each
 * kind of initial transform, and a linear transform alone. */
START_TEST(transformix_reads_our_files) {
  if (access(TRANSFORMIX, X_OK) != 0) {
    printf("SKIP transformix_reads_our_files: no %s\n", TRANSFORMIX);
    return;
  }
  accel_reg_transform *t = random_transform(160, 120, 24, 4, 7);
  accel_reg_grid g;
  accel_reg_transform_grid(t, &g);
  /* a grid shifted and shrunk: its valid region ends inside the image */
  accel_reg_grid shifted = g;
  shifted.origin[0] += 13.25, shifted.origin[1] -= 20.5, shifted.size[0] -= 2;
  accel_reg_transform *s = random_transform(160, 120, 24, 4, 8), *u;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &shifted, &u), ACCEL_OK);
  double *p = malloc((size_t)accel_reg_transform_count(u) * sizeof *p);
  uint32_t seed = 9;
  for (int64_t k = 0; k < accel_reg_transform_count(u); k++) p[k] = 5 * (2 * urand(&seed) - 1);
  ck_assert_int_eq(accel_reg_transform_set_parameters(u, p, accel_reg_transform_count(u)), ACCEL_OK);
  free(p);
  ck_assert_double_le(transformix_difference(u), 1e-4);
  ck_assert_double_le(transformix_difference(t), 1e-4);
  const double affine[6] = {1.02, -0.03, 0.025, 0.97, 2.5, -1.75}, centre[2] = {79.5, 59.5};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_AFFINE, affine, centre), ACCEL_OK);
  ck_assert_double_le(transformix_difference(t), 1e-4);
  const double euler[3] = {0.05, -3.25, 1.5}, shift[2] = {-4.5, 2.25};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, s, ACCEL_REG_LINEAR_RIGID, euler, centre), ACCEL_OK);
  ck_assert_double_le(transformix_difference(s), 1e-4);
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, u, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL), ACCEL_OK);
  ck_assert_double_le(transformix_difference(u), 1e-4);
  accel_reg_transform_destroy(t);
  accel_reg_transform_destroy(s);
  accel_reg_transform_destroy(u);
}
END_TEST

/* What is saved loads back bit for bit: parameters, grid, initial part. */
START_TEST(save_and_load_round_trip) {
  accel_reg_transform *t = random_transform(200, 150, 21.7, 3, 11), *back = NULL;
  const double affine[6] = {1.0 / 3.0, 0.1, -0.2, 1.1, 1e-7, -12345.678901234567}, centre[2] = {99.5, 74.5};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_AFFINE, affine, centre), ACCEL_OK);
  char *dir = make_temp_dir(), path[600], initial[600];
  snprintf(path, sizeof path, "%s/T.txt", dir);
  snprintf(initial, sizeof initial, "%s/T.initial.txt", dir);
  ck_assert_int_eq(accel_reg_transform_save(NULL, t, path), ACCEL_OK);
  ck_assert_int_eq(access(initial, R_OK), 0);
  ck_assert_msg(accel_reg_transform_load(NULL, path, &back) == ACCEL_OK, "%s", accel_last_error(NULL));
  const int64_t n = accel_reg_transform_count(t);
  ck_assert_int_eq(accel_reg_transform_count(back), n);
  double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  accel_reg_transform_parameters(t, a, n);
  accel_reg_transform_parameters(back, b, n);
  ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
  accel_reg_grid ga, gb;
  accel_reg_transform_grid(t, &ga);
  accel_reg_transform_grid(back, &gb);
  ck_assert(memcmp(&ga, &gb, sizeof ga) == 0);
  accel_reg_linear_kind kind;
  double v[6], c[2];
  ck_assert_int_eq(accel_reg_transform_initial(back, &kind, v, c), ACCEL_OK);
  ck_assert_int_eq(kind, ACCEL_REG_LINEAR_AFFINE);
  ck_assert(memcmp(v, affine, sizeof v) == 0 && memcmp(c, centre, sizeof c) == 0);
  /* the file looks as elastix writes it */
  char *text = read_text(path);
  ck_assert_ptr_nonnull(strstr(text, "(Transform \"BSplineTransform\")\n(NumberOfParameters "));
  ck_assert_ptr_nonnull(strstr(text, "(Size 200 150)\n(Index 0 0)\n(Spacing 1.0000000000 1.0000000000)\n"));
  ck_assert_ptr_nonnull(strstr(text, "(GridSpacing 21.7000000000 21.7000000000)\n"));
  ck_assert_ptr_nonnull(strstr(text, "(FinalBSplineInterpolationOrder 3)\n"));
  free(text);
  accel_reg_transform_destroy(back);
  /* a linear transform alone saves as one linear file */
  accel_reg_transform *lin = NULL;
  write_text(path,
             "(Transform \"EulerTransform\")(NumberOfParameters 3)(TransformParameters 0.1 2 3)\n"
             "(CenterOfRotationPoint 10 20)(Size 64 48)\n");
  ck_assert_int_eq(accel_reg_transform_load(NULL, path, &lin), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_count(lin), 0);
  ck_assert_int_eq(accel_reg_transform_save(NULL, lin, path), ACCEL_OK);
  text = read_text(path);
  ck_assert_ptr_nonnull(strstr(text,
                               "(Transform \"EulerTransform\")\n(NumberOfParameters 3)\n"
                               "(TransformParameters 0.1 2 3)\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "// EulerTransform specific\n(CenterOfRotationPoint 10.0000000000 20.0000000000)"));
  free(text);
  double xy[2] = {10, 20};
  ck_assert_int_eq(accel_reg_transform_points(NULL, lin, xy, 1), ACCEL_OK);
  ck_assert_double_eq_tol(xy[0], 12, 1e-12);
  ck_assert_double_eq_tol(xy[1], 23, 1e-12);
  accel_reg_transform_destroy(lin);
  /* lone CR line ends (and CRLF) read as line ends, comments included */
  for (int crlf = 0; crlf < 2; crlf++) {
    const char *end = crlf ? "\r\n" : "\r";
    char buf[512];
    snprintf(buf, sizeof buf,
             "// a comment%s(Transform \"EulerTransform\") // another%s(NumberOfParameters 3)%s"
             "(TransformParameters 0.1 2 3)%s(CenterOfRotationPoint 10 20)%s(Size 64 48)%s",
             end, end, end, end, end, end);
    write_text(path, buf);
    lin = NULL;
    ck_assert_msg(accel_reg_transform_load(NULL, path, &lin) == ACCEL_OK, "%s", accel_last_error(NULL));
    double q[2] = {10, 20};
    ck_assert_int_eq(accel_reg_transform_points(NULL, lin, q, 1), ACCEL_OK);
    ck_assert_double_eq_tol(q[0], 12, 1e-12);
    accel_reg_transform_destroy(lin);
  }
  accel_reg_transform_destroy(t);
  free(a);
  free(b);
  remove_dir(dir);
}
END_TEST

/* A chain B-spline <- Euler <- translation <- affine (relative names, found
 * beside the file), comments, any order, one entry over several lines:
 * points go through the affine first, as elastix composes them. */
START_TEST(initial_chains_fold) {
  char *dir = make_temp_dir(), path[600];
  snprintf(path, sizeof path, "%s/b.txt", dir);
  write_text(
      path,
      "// a B-spline over 40 x 30 pixels\n(Transform \"BSplineTransform\") // the transform\n"
      "(NumberOfParameters 32)\n(TransformParameters 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
      "  0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0)\n(GridSize 4 // nodes in x\n 4) (GridSpacing 20 15)\n(GridOrigin -20 -15)\n"
      "(Size 40 30)(InitialTransformParametersFileName \"e.txt\")\n(HowToCombineTransforms \"Compose\")\n");
  snprintf(path, sizeof path, "%s/e.txt", dir);
  write_text(path,
             "(CenterOfRotationPoint 5 6)(Transform \"EulerTransform\")(NumberOfParameters 3)\n"
             "(TransformParameters 0.5 1 -2)(Size 40 30)(InitialTransformParametersFileName \"t.txt\")\n");
  snprintf(path, sizeof path, "%s/t.txt", dir);
  write_text(path,
             "(Transform \"TranslationTransform\")(NumberOfParameters 2)(TransformParameters 3 4)(Size 40 30)\n"
             "(InitialTransformParametersFileName \"a.txt\")");
  snprintf(path, sizeof path, "%s/a.txt", dir);
  write_text(path,
             "(Transform \"AffineTransform\")(NumberOfParameters 6)(TransformParameters 1.1 0.2 -0.1 0.9 7 8)\n"
             "(CenterOfRotationPoint 1 2)(Size 40 30)(Index 0 0)(Spacing 1 1)\n");
  snprintf(path, sizeof path, "%s/b.txt", dir);
  accel_reg_transform *t = NULL;
  ck_assert_msg(accel_reg_transform_load(NULL, path, &t) == ACCEL_OK, "%s", accel_last_error(NULL));
  const double p[2] = {11, -3};
  /* affine about (1, 2), then the translation, then the Euler rotation about (5, 6) */
  double ax = 1.1 * (p[0] - 1) + 0.2 * (p[1] - 2) + 1 + 7, ay = -0.1 * (p[0] - 1) + 0.9 * (p[1] - 2) + 2 + 8;
  ax += 3, ay += 4;
  const double ex = cos(0.5) * (ax - 5) - sin(0.5) * (ay - 6) + 5 + 1;
  const double ey = sin(0.5) * (ax - 5) + cos(0.5) * (ay - 6) + 6 - 2;
  double xy[2] = {p[0], p[1]};
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, xy, 1), ACCEL_OK);
  ck_assert_double_eq_tol(xy[0], ex, 1e-12);
  ck_assert_double_eq_tol(xy[1], ey, 1e-12);
  accel_reg_linear_kind kind;
  accel_reg_transform_initial(t, &kind, NULL, NULL);
  ck_assert_int_eq(kind, ACCEL_REG_LINEAR_AFFINE);
  accel_reg_transform_destroy(t);
  remove_dir(dir);
}
END_TEST

typedef struct bad_file {
  const char *text;
  accel_status status;
  const char *message; /* a part of the message */
} bad_file;

#define BSPLINE_HEAD "(Transform \"BSplineTransform\")(NumberOfParameters 32)(GridSize 4 4)(GridSpacing 20 15)"
#define ZEROS16 " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
#define BSPLINE_OK BSPLINE_HEAD "(GridOrigin -20 -15)(Size 40 30)(TransformParameters" ZEROS16 ZEROS16 ")"

static const bad_file BAD_FILES[] = {
    {"", ACCEL_ERR_FORMAT, "no entries"},
    {"hello", ACCEL_ERR_FORMAT, "not a parameter file"},
    {"(Transform \"BSplineTransform\"", ACCEL_ERR_FORMAT, "no closing parenthesis"},
    {BSPLINE_HEAD "(Size 40 30)(TransformParameters" ZEROS16 ZEROS16 ")", ACCEL_ERR_FORMAT, "(GridOrigin) is missing"},
    {BSPLINE_HEAD "(GridOrigin -20 x)(Size 40 30)(TransformParameters" ZEROS16 ZEROS16 ")", ACCEL_ERR_FORMAT,
     "(GridOrigin): value 2 \"x\""},
    {BSPLINE_HEAD "(GridOrigin -20 -15)(Size 40 30)(TransformParameters" ZEROS16 ")", ACCEL_ERR_FORMAT,
     "(TransformParameters) has 16 values, 32 expected"},
    {BSPLINE_OK "(Size 40 30)", ACCEL_ERR_FORMAT, "(Size) is given twice"},
    {BSPLINE_OK "(BSplineTransformSplineOrder 2)", ACCEL_ERR_UNSUPPORTED, "order 2"},
    {BSPLINE_OK "(Spacing 0.5 0.5)", ACCEL_ERR_UNSUPPORTED, "(Spacing)"},
    {BSPLINE_OK "(Origin 1 0)", ACCEL_ERR_UNSUPPORTED, "(Origin)"},
    {BSPLINE_OK "(Direction 0 1 1 0)", ACCEL_ERR_UNSUPPORTED, "(Direction)"},
    {BSPLINE_OK "(FixedImageDimension 3)", ACCEL_ERR_UNSUPPORTED, "3-D"},
    {BSPLINE_OK "(InitialTransformParametersFileName \"x.txt\")(HowToCombineTransforms \"Add\")", ACCEL_ERR_UNSUPPORTED,
     "\"Add\""},
    {BSPLINE_OK "(InitialTransformParametersFileName \"f.txt\")", ACCEL_ERR_UNSUPPORTED, "a B-spline transform in"},
    {"(Transform \"SplineKernelTransform\")", ACCEL_ERR_UNSUPPORTED, "SplineKernelTransform"},
    {"(Transform \"EulerTransform\")(NumberOfParameters 3)(TransformParameters 1 2 3)(Size 9 9)", ACCEL_ERR_FORMAT,
     "(CenterOfRotationPoint) is missing"},
    {"(Transform \"AffineTransform\")(NumberOfParameters 6)(TransformParameters 1 2 2 4 0 0)(Size 9 9)"
     "(CenterOfRotationPoint 0 0)",
     ACCEL_ERR_FORMAT, "singular"},
    {"(Transform \"TranslationTransform\")(NumberOfParameters 3)(TransformParameters 1 2 3)(Size 9 9)",
     ACCEL_ERR_FORMAT, "(NumberOfParameters) is 3, the transform has 2"},
    {"(Transform \"TranslationTransform\")(NumberOfParameters 2)(TransformParameters 1 2)(Size 9 9)"
     "(InitialTransformParametersFileName \"loop.txt\")",
     ACCEL_ERR_UNSUPPORTED, "more than 16"},
};

/* Malformed and unsupported files: the documented status, a message naming
 * the key and the file. */
START_TEST(bad_files_are_errors) {
  char *dir = make_temp_dir(), path[600], loop[600];
  snprintf(path, sizeof path, "%s/f.txt", dir);
  snprintf(loop, sizeof loop, "%s/loop.txt", dir);
  const bad_file *b = &BAD_FILES[_i];
  write_text(path, b->text);
  write_text(loop, b->text); /* a file whose initial transform is itself */
  accel_reg_transform *t = (accel_reg_transform *)1;
  const accel_status s =
      accel_reg_transform_load(NULL, _i == (int)(sizeof BAD_FILES / sizeof *b) - 1 ? loop : path, &t);
  ck_assert_msg(s == b->status, "case %d: %s: %s", _i, accel_status_string(s), accel_last_error(NULL));
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(accel_last_error(NULL), b->message), "case %d: %s", _i, accel_last_error(NULL));
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "accel_reg_transform_load: "));
  remove_dir(dir);
}
END_TEST

START_TEST(bad_arguments_of_files) {
  accel_reg_transform *t = random_transform(50, 40, 16, 1, 3), *out = NULL;
  ck_assert_int_eq(accel_reg_transform_save(NULL, NULL, "/tmp/x.txt"), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_save(NULL, t, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_save(NULL, t, ""), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_save(NULL, t, "/nonexistent-dir/x.txt"), ACCEL_ERR_IO);
  ck_assert_int_eq(accel_reg_transform_load(NULL, NULL, &out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_load(NULL, "/tmp/x.txt", NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_load(NULL, "/nonexistent-dir/x.txt", &out), ACCEL_ERR_IO);
  ck_assert_ptr_null(out);
  /* field offsets where x0 + c would overflow (it returned OK and displacements of 2e18) */
  float buf[2 * 3 * 4];
  accel_array f;
  ck_assert_int_eq(accel_array_init(&f, buf, ACCEL_DTYPE_F32, 3, (const int64_t[]){2, 3, 4}), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, INT64_MAX - 2, 0, &f), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, 0, INT64_MIN, &f), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, -((int64_t)1 << 40), (int64_t)1 << 40, &f), ACCEL_OK);
  accel_reg_transform_destroy(t);
}
END_TEST

/* ------------------------------------------------------------ warp: references */

/* The cubic B-spline. */
static double beta3(double t) {
  t = fabs(t);
  return t < 1 ? 2.0 / 3.0 - t * t + t * t * t / 2 : t < 2 ? (2 - t) * (2 - t) * (2 - t) / 6 : 0;
}

static int64_t mirror_index(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

/* Interpolating B-spline coefficients of one line with mirror boundaries:
 * (c[k-1] + 4 c[k] + c[k+1]) / 6 = s[k], c[-1] = c[1], c[n] = c[n-2],
 * solved as a tridiagonal system (Thomas' algorithm). */
static void solve_line(double *c, int64_t n, int64_t stride) {
  if (n == 1) return;
  double *cp = malloc((size_t)n * sizeof *cp), *dp = malloc((size_t)n * sizeof *dp);
  for (int64_t k = 0; k < n; k++) {
    const double lo = k == 0 ? 0 : (k == n - 1 ? 2 : 1) / 6.0, up = k == 0 ? 2 / 6.0 : k == n - 1 ? 0 : 1 / 6.0;
    const double den = 4 / 6.0 - (k ? lo * cp[k - 1] : 0);
    cp[k] = up / den;
    dp[k] = (c[k * stride] - (k ? lo * dp[k - 1] : 0)) / den;
  }
  for (int64_t k = n - 1; k >= 0; k--) c[k * stride] = dp[k] - (k < n - 1 ? cp[k] * c[(k + 1) * stride] : 0);
  free(cp);
  free(dp);
}

/* The reference warp of a (h, w) double image: positions from
 * accel_reg_transform_points, ITK's rules written out directly. */
static void reference_warp(const accel_reg_transform *t, const double *img, int64_t w, int64_t h, int cubic,
                           double fill, int64_t x0, int64_t y0, int64_t ow, int64_t oh, double *out) {
  double *c = malloc((size_t)(w * h) * sizeof *c), *xy = malloc((size_t)(2 * ow * oh) * sizeof *xy);
  memcpy(c, img, (size_t)(w * h) * sizeof *c);
  if (cubic) {
    for (int64_t r = 0; r < h; r++) solve_line(c + r * w, w, 1);
    for (int64_t x = 0; x < w; x++) solve_line(c + x, h, w);
  }
  for (int64_t r = 0; r < oh; r++)
    for (int64_t k = 0; k < ow; k++)
      xy[2 * (r * ow + k)] = (double)(x0 + k), xy[2 * (r * ow + k) + 1] = (double)(y0 + r);
  ck_assert_int_eq(accel_reg_transform_points(NULL, t, xy, ow * oh), ACCEL_OK);
  for (int64_t i = 0; i < ow * oh; i++) {
    const double x = xy[2 * i], y = xy[2 * i + 1];
    if (!(x >= -0.5 && x < w - 0.5 && y >= -0.5 && y < h - 0.5)) {
      out[i] = fill;
      continue;
    }
    double v = 0;
    if (cubic) {
      for (int64_t j = (int64_t)floor(y) - 1; j <= (int64_t)floor(y) + 2; j++)
        for (int64_t k = (int64_t)floor(x) - 1; k <= (int64_t)floor(x) + 2; k++)
          v += c[mirror_index(j, h) * w + mirror_index(k, w)] * beta3(x - (double)k) * beta3(y - (double)j);
    } else {
      const double cx = fmin(fmax(x, 0), (double)(w - 1)), cy = fmin(fmax(y, 0), (double)(h - 1));
      const int64_t i0 = (int64_t)cx, j0 = (int64_t)cy, i1 = i0 + 1 < w ? i0 + 1 : i0, j1 = j0 + 1 < h ? j0 + 1 : j0;
      const double tx = cx - (double)i0, ty = cy - (double)j0;
      v = (1 - ty) * ((1 - tx) * c[j0 * w + i0] + tx * c[j0 * w + i1]) +
          ty * ((1 - tx) * c[j1 * w + i0] + tx * c[j1 * w + i1]);
    }
    out[i] = v;
  }
  free(c);
  free(xy);
}

static accel_ctx *threads_ctx(int threads) {
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.fallback = ACCEL_FALLBACK_DENY;
  o.cpu_threads = threads;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  return ctx;
}

static accel_status warp1(accel_ctx *ctx, const accel_reg_transform *t, const accel_array *in, const accel_array *out,
                          int interp, double fill, int64_t x0, int64_t y0, int64_t tile) {
  accel_reg_warp_options o;
  accel_reg_warp_options_init(&o, sizeof o);
  o.interp = interp;
  o.fill = fill;
  o.x0 = x0;
  o.y0 = y0;
  o.tile = tile;
  return accel_reg_warp(ctx, t, &in, &out, 1, &o);
}

/* A smooth random image of 0..255 values. */
static void make_image(float *img, int64_t w, int64_t h, int64_t chans, uint32_t seed) {
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < w; c++)
      for (int64_t k = 0; k < chans; k++)
        img[(r * w + c) * chans + k] =
            (float)(127.5 + 60 * sin(0.31 * (double)c + (double)k) * cos(0.17 * (double)r) + 60 * urand(&seed));
}

/* ------------------------------------------------------------ warp tests */

/* Linear and cubic warps against the references above, with and without an
 * initial rotation (the point-by-point and the separable paths), over a
 * region reaching beyond the image (the fill, the edges, the mirror). */
START_TEST(warp_equals_reference) {
  const int64_t w = 61, h = 47, ow = 75, oh = 58, x0 = -6, y0 = -4;
  accel_reg_transform *t = random_transform(w, h, 16, 5, 21 + (uint32_t)_i);
  if (_i & 1) {
    const double euler[3] = {0.08, 1.5, -2.25}, centre[2] = {30, 23};
    ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_RIGID, euler, centre), ACCEL_OK);
  }
  const int cubic = _i >= 2 ? ACCEL_REG_INTERP_CUBIC : ACCEL_REG_INTERP_LINEAR;
  float *img = malloc((size_t)(w * h) * sizeof *img), *got = malloc((size_t)(ow * oh) * sizeof *got);
  double *src = malloc((size_t)(w * h) * sizeof *src), *want = malloc((size_t)(ow * oh) * sizeof *want);
  make_image(img, w, h, 1, 5);
  for (int64_t i = 0; i < w * h; i++) src[i] = img[i];
  reference_warp(t, src, w, h, cubic == ACCEL_REG_INTERP_CUBIC, 17.5, x0, y0, ow, oh, want);
  const int64_t si[2] = {h, w}, so[2] = {oh, ow};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 2, si), out = array_of(got, ACCEL_DTYPE_F32, 2, so);
  accel_ctx *ctx = cpu_ctx();
  ck_assert_msg(warp1(ctx, t, &in, &out, cubic, 17.5, x0, y0, 0) == ACCEL_OK, "%s", accel_last_error(ctx));
  int64_t fills = 0;
  for (int64_t i = 0; i < ow * oh; i++) {
    EXPECT(fabs((double)got[i] - want[i]) <= 1e-3, "case %d pixel %lld: %.6f, reference %.6f", _i, (long long)i,
           (double)got[i], want[i]);
    fills += want[i] == 17.5;
  }
  ck_assert_int_gt(fills, 100);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(got);
  free(src);
  free(want);
}
END_TEST

/* Images of one or a few pixels a side (the prefilter's lines of one
 * sample and short lines with the exact mirrored start, mirrors that fold
 * twice) against the reference, both interpolations. */
START_TEST(small_images_equal_reference) {
  static const int64_t sizes[][2] = {{1, 1}, {1, 7}, {6, 1}, {2, 3}, {19, 17}, {3, 40}};
  const int64_t w = sizes[_i][0], h = sizes[_i][1], ow = w + 4, oh = h + 4;
  accel_reg_grid g = {{w, h}, {4, 4}, {4.0, 3.0}, {-3.0, -2.5}};
  accel_reg_transform *t;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  double p[32];
  uint32_t seed = 91 + (uint32_t)_i;
  for (int k = 0; k < 32; k++) p[k] = 0.7 * (2 * urand(&seed) - 1);
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, 32), ACCEL_OK);
  float img[40 * 40], got[44 * 44];
  double src[40 * 40], want[44 * 44];
  make_image(img, w, h, 1, 9);
  for (int64_t i = 0; i < w * h; i++) src[i] = img[i];
  const int64_t si[2] = {h, w}, so[2] = {oh, ow};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 2, si), out = array_of(got, ACCEL_DTYPE_F32, 2, so);
  accel_ctx *ctx = cpu_ctx();
  for (int interp = 1; interp <= 3; interp += 2) {
    reference_warp(t, src, w, h, interp == 3, 99, -2, -2, ow, oh, want);
    ck_assert_int_eq(warp1(ctx, t, &in, &out, interp, 99, -2, -2, 0), ACCEL_OK);
    for (int64_t i = 0; i < ow * oh; i++)
      EXPECT(fabs((double)got[i] - want[i]) <= 1e-3, "%lld x %lld interp %d pixel %lld: %g, reference %g", (long long)w,
             (long long)h, interp, (long long)i, (double)got[i], want[i]);
  }
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
}
END_TEST

/* The identity reproduces the input: F32 exactly with linear interpolation,
 * to float rounding with cubic, integers exactly with both; an initial
 * translation by whole pixels shifts exactly. */
START_TEST(identity_and_integer_shifts_are_exact) {
  const int64_t w = 33, h = 25;
  accel_reg_transform *t = random_transform(w, h, 8, 0, 1);
  float *img = malloc((size_t)(w * h * 3) * sizeof *img), *got = malloc((size_t)(w * h * 3) * sizeof *got);
  uint8_t *img8 = malloc((size_t)(w * h * 3)), *got8 = malloc((size_t)(w * h * 3));
  make_image(img, w, h, 3, 2);
  for (int64_t i = 0; i < w * h * 3; i++) img8[i] = (uint8_t)img[i];
  const int64_t shape[3] = {h, w, 3};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 3, shape), out = array_of(got, ACCEL_DTYPE_F32, 3, shape);
  accel_array in8 = array_of(img8, ACCEL_DTYPE_U8, 3, shape), out8 = array_of(got8, ACCEL_DTYPE_U8, 3, shape);
  accel_ctx *ctx = cpu_ctx();
  for (int shift = 0; shift < 2; shift++) {
    const double by[2] = {3, -2};
    if (shift) ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_TRANSLATION, by, NULL), 0);
    for (int interp = 1; interp <= 3; interp += 2) {
      ck_assert_int_eq(warp1(ctx, t, &in, &out, interp, -1, 0, 0, 0), ACCEL_OK);
      ck_assert_int_eq(warp1(ctx, t, &in8, &out8, interp, 7, 0, 0, 0), ACCEL_OK);
      for (int64_t r = 0; r < h; r++)
        for (int64_t c = 0; c < w; c++)
          for (int64_t k = 0; k < 3; k++) {
            const int64_t sr = r - 2 * shift, sc = c + 3 * shift, o = (r * w + c) * 3 + k;
            const bool inside = sr >= 0 && sc < w;
            const float want = inside ? img[(sr * w + sc) * 3 + k] : -1;
            const uint8_t want8 = inside ? img8[(sr * w + sc) * 3 + k] : 7;
            if (interp == 1)
              EXPECT(got[o] == want, "linear (%lld, %lld): %g, not %g", (long long)r, (long long)c, (double)got[o],
                     (double)want);
            else
              EXPECT(fabsf(got[o] - want) <= 2e-4f, "cubic (%lld, %lld): %g, not %g", (long long)r, (long long)c,
                     (double)got[o], (double)want);
            EXPECT(got8[o] == want8, "U8 interp %d (%lld, %lld): %d, not %d", interp, (long long)r, (long long)c,
                   got8[o], want8);
          }
    }
  }
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(got);
  free(img8);
  free(got8);
}
END_TEST

/* Tiles and threads do not change a bit of the result. */
START_TEST(tiles_and_threads_do_not_matter) {
  const int64_t w = 90, h = 70, n = w * h * 3;
  accel_reg_transform *t = random_transform(w, h, 20, 4, 31);
  if (_i) {
    const double affine[6] = {1.01, 0.02, -0.015, 0.99, 1, 2}, centre[2] = {45, 35};
    ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_AFFINE, affine, centre), ACCEL_OK);
  }
  float *img = malloc((size_t)n * sizeof *img), *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  make_image(img, w, h, 3, 4);
  const int64_t shape[3] = {h, w, 3};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 3, shape), oa = array_of(a, ACCEL_DTYPE_F32, 3, shape),
              ob = array_of(b, ACCEL_DTYPE_F32, 3, shape);
  accel_ctx *one = threads_ctx(1), *two = threads_ctx(2);
  for (int interp = 1; interp <= 3; interp += 2) {
    ck_assert_int_eq(warp1(one, t, &in, &oa, interp, 0, 0, 0, 100000 % 65536), ACCEL_OK);
    const int64_t tiles[] = {1, 7, 0, 64};
    for (int k = 0; k < 4; k++) {
      ck_assert_int_eq(warp1(two, t, &in, &ob, interp, 0, 0, 0, tiles[k]), ACCEL_OK);
      ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0, "interp %d tile %lld differs", interp,
                    (long long)tiles[k]);
    }
  }
  accel_ctx_destroy(one);
  accel_ctx_destroy(two);
  accel_reg_transform_destroy(t);
  free(img);
  free(a);
  free(b);
}
END_TEST

/* Several layers in one call equal one call each; every type in and out:
 * integer outputs are the F32 output rounded and clamped; channels of a
 * colour image warp as the gray images they are; strided arrays as packed
 * ones; a region of the output is that region of the whole. */
START_TEST(layers_types_channels_regions) {
  const int64_t w = 40, h = 30;
  accel_reg_transform *t = random_transform(w, h, 12, 6, 41);
  const int interp = _i ? ACCEL_REG_INTERP_CUBIC : ACCEL_REG_INTERP_LINEAR;
  float *f3 = malloc((size_t)(w * h * 3) * sizeof *f3), *ref = malloc((size_t)(w * h * 3) * sizeof *ref);
  uint8_t *u8 = malloc((size_t)(w * h * 3)), *o8 = malloc((size_t)(w * h * 3));
  uint16_t *u16 = malloc((size_t)(w * h * 3) * 2), *o16 = malloc((size_t)(w * h * 3) * 2);
  make_image(f3, w, h, 3, 6);
  for (int64_t i = 0; i < w * h * 3; i++) u8[i] = (uint8_t)f3[i], u16[i] = (uint16_t)(f3[i] * 250);
  float *fu8 = malloc((size_t)(w * h * 3) * sizeof *fu8), *fu16 = malloc((size_t)(w * h * 3) * sizeof *fu16);
  for (int64_t i = 0; i < w * h * 3; i++) fu8[i] = u8[i], fu16[i] = u16[i];
  const int64_t s3[3] = {h, w, 3};
  accel_array a8 = array_of(u8, ACCEL_DTYPE_U8, 3, s3), a16 = array_of(u16, ACCEL_DTYPE_U16, 3, s3);
  accel_array b8 = array_of(o8, ACCEL_DTYPE_U8, 3, s3), b16 = array_of(o16, ACCEL_DTYPE_U16, 3, s3);
  accel_array r8 = array_of(fu8, ACCEL_DTYPE_F32, 3, s3), rf = array_of(ref, ACCEL_DTYPE_F32, 3, s3);
  accel_ctx *ctx = cpu_ctx();
  const accel_array *ins[2] = {&a8, &a16}, *outs[2] = {&b8, &b16};
  accel_reg_warp_options o;
  accel_reg_warp_options_init(&o, sizeof o);
  o.interp = interp;
  o.fill = 300;
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 2, &o), ACCEL_OK);
  /* the U8 layer: F32 in and out, then rounded and clamped (the fill 300 becomes 255) */
  ck_assert_int_eq(warp1(ctx, t, &r8, &rf, interp, 300, 0, 0, 0), ACCEL_OK);
  for (int64_t i = 0; i < w * h * 3; i++)
    EXPECT(o8[i] == (uint8_t)fmin(255, floor(fmax(0, ref[i]) + 0.5)), "U8 %lld: %d for %g", (long long)i, o8[i],
           (double)ref[i]);
  /* the U16 layer, one channel at a time through strided 2-D views */
  for (int k = 0; k < 3; k++) {
    accel_array ci = a16, co = rf;
    ci.ndim = co.ndim = 2;
    ci.data = u16 + k;
    co.data = ref + k;
    ck_assert_int_eq(warp1(ctx, t, &ci, &co, interp, 300, 0, 0, 0), ACCEL_OK);
  }
  for (int64_t i = 0; i < w * h * 3; i++)
    EXPECT(o16[i] == (uint16_t)fmin(65535, floor(fmax(0, ref[i]) + 0.5)), "U16 %lld: %d for %g", (long long)i, o16[i],
           (double)ref[i]);
  /* a region: (x0, y0) = (7, 5), 20 x 11 pixels, equals that part of the whole */
  float part[11][20][3];
  const int64_t sp[3] = {11, 20, 3};
  accel_array ap = array_of(part, ACCEL_DTYPE_F32, 3, sp);
  ck_assert_int_eq(warp1(ctx, t, &r8, &rf, interp, 0, 0, 0, 0), ACCEL_OK);
  ck_assert_int_eq(warp1(ctx, t, &r8, &ap, interp, 0, 7, 5, 0), ACCEL_OK);
  for (int r = 0; r < 11; r++)
    for (int c = 0; c < 20; c++)
      for (int k = 0; k < 3; k++) EXPECT(part[r][c][k] == ref[((r + 5) * w + c + 7) * 3 + k], "region (%d, %d)", r, c);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(f3);
  free(ref);
  free(u8);
  free(o8);
  free(u16);
  free(o16);
  free(fu8);
  free(fu16);
}
END_TEST

/* Colour layers warped one channel at a time (as large ones are) give the
 * bits of all channels at once; U8 in and F32 out is the F32 warp of the
 * same values. */
START_TEST(channels_one_at_a_time_equal_all_at_once) {
  const int64_t w = 45, h = 38, chans = _i ? 4 : 3, n = w * h * chans;
  accel_reg_transform *t = random_transform(w, h, 16, 5, 71);
  uint8_t *img = malloc((size_t)n);
  float *fimg = malloc((size_t)n * sizeof *fimg), *a = malloc((size_t)n * sizeof *a),
        *b = malloc((size_t)n * sizeof *b);
  for (int64_t i = 0; i < n; i++) img[i] = (uint8_t)(i * 2654435761u >> 24), fimg[i] = img[i];
  const int64_t shape[3] = {h, w, chans};
  accel_array in = array_of(img, ACCEL_DTYPE_U8, 3, shape), fin = array_of(fimg, ACCEL_DTYPE_F32, 3, shape);
  accel_array oa = array_of(a, ACCEL_DTYPE_F32, 3, shape), ob = array_of(b, ACCEL_DTYPE_F32, 3, shape);
  accel_ctx *ctx = cpu_ctx();
  const int64_t keep = accel__reg_coef_all_bytes;
  ck_assert_int_eq(warp1(ctx, t, &in, &oa, ACCEL_REG_INTERP_CUBIC, 3, -4, 2, 0), ACCEL_OK);
  accel__reg_coef_all_bytes = 0;
  ck_assert_int_eq(warp1(ctx, t, &in, &ob, ACCEL_REG_INTERP_CUBIC, 3, -4, 2, 0), ACCEL_OK);
  accel__reg_coef_all_bytes = keep;
  ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
  ck_assert_int_eq(warp1(ctx, t, &fin, &ob, ACCEL_REG_INTERP_CUBIC, 3, -4, 2, 0), ACCEL_OK);
  ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
  ck_assert_int_eq(warp1(ctx, t, &in, &oa, ACCEL_REG_INTERP_LINEAR, 3, -4, 2, 0), ACCEL_OK);
  ck_assert_int_eq(warp1(ctx, t, &fin, &ob, ACCEL_REG_INTERP_LINEAR, 3, -4, 2, 0), ACCEL_OK);
  ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(fimg);
  free(a);
  free(b);
}
END_TEST

/* A layer's cubic coefficients on the CPU (rows eight lines at a time,
 * long columns in bands of whole rows) equal, to the bit, the line
 * recursions of warp_prefilter.h (the GPU's) applied line by line: gray
 * and colour, lines of one sample, of at most the causal
 * start's horizon (exact start) and longer, rows wider than a band;
 * U8, U16 and F32; and the first row with a non-finite F32 sample. */
START_TEST(layer_coefficients_equal_the_line_recursions) {
  static const int64_t shapes[][3] = {{1, 5, 1},   {5, 1, 3},     {2, 2, 1},    {17, 18, 3},
                                      {19, 20, 1}, {40, 1100, 3}, {300, 37, 4}, {23, 2049, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    const int64_t h = shapes[i][0], w = shapes[i][1], nc = shapes[i][2], n = w * nc;
    uint8_t *u8 = malloc((size_t)(h * n));
    uint16_t *u16 = malloc(sizeof(uint16_t) * (size_t)(h * n));
    float *f32 = malloc(sizeof(float) * (size_t)(h * n)), *got = malloc(sizeof(float) * (size_t)(h * n)),
          *want = malloc(sizeof(float) * (size_t)(h * n));
    for (int64_t k = 0; k < h * n; k++) u8[k] = (uint8_t)((uint64_t)(k + 7 * i) * 2654435761u >> 24);
    for (int64_t k = 0; k < h * n; k++) u16[k] = (uint16_t)(u8[k] * 257 ^ (k & 255));
    for (int64_t k = 0; k < h * n; k++) f32[k] = (float)u8[k] * 0.37f - 11.0f;
    static const accel_dtype dts[3] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
    for (int f = 0; f < 3; f++) {
      const int64_t shape[3] = {h, w, nc};
      void *data = f == 0 ? (void *)u8 : f == 1 ? (void *)u16 : (void *)f32;
      const accel_array in = array_of(data, dts[f], nc > 1 ? 3 : 2, shape);
      int64_t bad = -1;
      ck_assert_int_eq(accel__reg_layer_coefficients(&in, got, 2, &bad), 0);
      for (int64_t k = 0; k < h * n; k++)
        want[k] = (w > 1 ? 6.0f : 1.0f) * (f == 0 ? (float)u8[k] : f == 1 ? (float)u16[k] : f32[k]);
      for (int64_t r = 0; r < h; r++)
        for (int64_t c = 0; c < nc; c++) accel__reg_warp_line(want + r * n + c, w, nc, 1.0f);
      for (int64_t x = 0; x < n; x++) accel__reg_warp_line(want + x, h, n, 6.0f);
      for (int64_t k = 0; k < h * n; k++)
        ck_assert_msg(memcmp(&got[k], &want[k], sizeof(float)) == 0,
                      "%lld x %lld x %lld (%s): coefficient %lld is %.9g, the lines' %.9g", (long long)h, (long long)w,
                      (long long)nc,
                      f == 0   ? "u8"
                      : f == 1 ? "u16"
                               : "f32",
                      (long long)k, got[k], want[k]);
    }
    if (h >= 3 && w > 1) { /* non-finite samples: the first row that holds one */
      const int64_t shape[3] = {h, w, nc};
      f32[(h - 1) * n + n - 1] = NAN;
      f32[(h / 2) * n + n / 2] = INFINITY;
      const accel_array in = array_of(f32, ACCEL_DTYPE_F32, nc > 1 ? 3 : 2, shape);
      int64_t bad = -1;
      ck_assert_int_eq(accel__reg_layer_coefficients(&in, got, 2, &bad), 1);
      ck_assert_int_eq(bad, h / 2);
    }
    free(u8);
    free(u16);
    free(f32);
    free(got);
    free(want);
  }
}
END_TEST

/* The cubic warp's vector code (the per-pixel set-up four pixels at a
 * time, three channels' sums from 12 contiguous coefficients a support row,
 * integer stores four channels at a time) writes, to the bit, what the code
 * it replaced writes (accel__reg_warp_plain): over a region reaching past
 * the image on every side (fills, positions clamped before their floor,
 * mirrored supports), rows whose width is not a multiple of 4, the
 * separable and the point-by-point positions, positions exactly on the
 * inside test's edges and on pixel centres (a shift of half a pixel with no
 * B-spline), values beyond every output type's range, values next to the
 * rounding's halves (the identity on an image of half-integers); gray, RGB
 * and RGBA, every output type, whole and in tiles of 7. */
START_TEST(vector_warp_equals_the_plain_code) {
  const int64_t w = 45, h = 31, ow = w + 9, oh = h + 7;
  accel_reg_transform *t = random_transform(w, h, 8, _i >= 2 ? 0 : 6, 61 + (uint32_t)_i);
  if (_i == 1) {
    const double euler[3] = {0.11, -1.25, 2.5}, centre[2] = {22, 15};
    ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_RIGID, euler, centre), ACCEL_OK);
  } else if (_i == 2) {
    const double by[2] = {-0.5, 0.5};
    ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_TRANSLATION, by, NULL), ACCEL_OK);
  }
  float *img = malloc(sizeof(float) * (size_t)(w * h * 4));
  char *a = malloc(sizeof(float) * (size_t)(ow * oh * 4)), *b = malloc(sizeof(float) * (size_t)(ow * oh * 4));
  accel_ctx *ctx = threads_ctx(2);
  static const accel_dtype outs[3] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  static const char *const names[3] = {"U8", "U16", "F32"};
  for (int64_t nc = 1; nc <= 4; nc += nc == 1 ? 2 : 1) {
    make_image(img, w, h, nc, 9 + (uint32_t)nc);
    for (int64_t k = 0; k < w * h * nc; k += 5) img[k] = k % 2 ? img[k] * 300.0f : -img[k]; /* past 65535, below 0 */
    if (_i == 3)
      for (int64_t k = 0; k < w * h * nc; k++) img[k] = floorf(img[k]) + 0.5f;
    const int64_t si[3] = {h, w, nc}, so[3] = {oh, ow, nc};
    const accel_array in = array_of(img, ACCEL_DTYPE_F32, nc > 1 ? 3 : 2, si);
    for (int o = 0; o < 3; o++)
      for (int64_t tile = 0; tile <= 7; tile += 7) {
        const accel_array oa = array_of(a, outs[o], nc > 1 ? 3 : 2, so), ob = array_of(b, outs[o], nc > 1 ? 3 : 2, so);
        const size_t bytes = (size_t)(ow * oh * nc) * accel_dtype_size(outs[o]);
        memset(a, 1, bytes), memset(b, 2, bytes);
        accel__reg_warp_plain = true;
        const accel_status plain = warp1(ctx, t, &in, &oa, ACCEL_REG_INTERP_CUBIC, 3.25, -5, -3, tile);
        accel__reg_warp_plain = false;
        ck_assert_int_eq(plain, ACCEL_OK);
        ck_assert_int_eq(warp1(ctx, t, &in, &ob, ACCEL_REG_INTERP_CUBIC, 3.25, -5, -3, tile), ACCEL_OK);
        ck_assert_msg(memcmp(a, b, bytes) == 0, "case %d, %lld channels, %s output, tile %lld: the outputs differ", _i,
                      (long long)nc, names[o], (long long)tile);
      }
  }
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(a);
  free(b);
}
END_TEST

/* Large images go band by band of output rows, each with the coefficients
 * of the moving rows it reaches: the same values (to float rounding) as the
 * whole image's, with or without a rotation, also for bands that reach no
 * moving row at all; one channel at a time within bands gives the same bits. */
START_TEST(bands_equal_the_whole) {
  const int64_t w = 300, h = 200, n = w * h * 3;
  accel_reg_transform *t = random_transform(w, h, 40, 6, 81);
  const double euler[3] = {0.06, 3, -40}, centre[2] = {150, 100}, shift[2] = {2.5, -150};
  if (_i == 1) ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_RIGID, euler, centre), 0);
  if (_i == 2) ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_TRANSLATION, shift, NULL), 0);
  float *img = malloc((size_t)n * sizeof *img), *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  make_image(img, w, h, 3, 8);
  const int64_t shape[3] = {h, w, 3};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 3, shape), oa = array_of(a, ACCEL_DTYPE_F32, 3, shape),
              ob = array_of(b, ACCEL_DTYPE_F32, 3, shape);
  accel_ctx *ctx = cpu_ctx();
  const int64_t keep = accel__reg_band_bytes, keep_all = accel__reg_coef_all_bytes;
  ck_assert_int_eq(warp1(ctx, t, &in, &oa, ACCEL_REG_INTERP_CUBIC, -7, 0, 0, 0), ACCEL_OK);
  accel__reg_band_bytes = 20000; /* bands of 16 output rows */
  ck_assert_int_eq(warp1(ctx, t, &in, &ob, ACCEL_REG_INTERP_CUBIC, -7, 0, 0, 0), ACCEL_OK);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
  ck_assert_msg(worst <= 1e-4, "case %d: bands differ by %g", _i, worst);
  memcpy(a, b, (size_t)n * sizeof *a);
  accel__reg_coef_all_bytes = 0;
  ck_assert_int_eq(warp1(ctx, t, &in, &ob, ACCEL_REG_INTERP_CUBIC, -7, 0, 0, 0), ACCEL_OK);
  accel__reg_band_bytes = keep;
  accel__reg_coef_all_bytes = keep_all;
  ck_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(a);
  free(b);
}
END_TEST

typedef struct progress_log {
  int calls, cancel_at;
  double last;
  bool monotonic;
} progress_log;

static int on_progress(void *user, const char *stage, double fraction) {
  progress_log *p = user;
  ck_assert_str_eq(stage, "reg.warp");
  p->monotonic = p->monotonic && fraction >= p->last && fraction <= 1.0;
  p->last = fraction;
  return ++p->calls == p->cancel_at;
}

START_TEST(progress_and_cancel) {
  const int64_t w = 300, h = 200;
  accel_reg_transform *t = random_transform(w, h, 32, 3, 51);
  float *img = calloc((size_t)(w * h), sizeof *img), *a = malloc((size_t)(w * h) * sizeof *a),
        *b = malloc((size_t)(w * h) * sizeof *b);
  const int64_t shape[2] = {h, w};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 2, shape), oa = array_of(a, ACCEL_DTYPE_F32, 2, shape),
              ob = array_of(b, ACCEL_DTYPE_F32, 2, shape);
  const accel_array *ins[2] = {&in, &in}, *outs[2] = {&oa, &ob};
  accel_reg_warp_options o;
  accel_reg_warp_options_init(&o, sizeof o);
  o.tile = 16;
  o.progress = on_progress;
  progress_log p = {0, 0, 0, true};
  o.progress_user = &p;
  /* one thread: progress comes from the calling thread only, which on a busy machine may run few tiles */
  accel_ctx_options co = ctx_options(ACCEL_BACKEND_CPU);
  co.cpu_threads = 1;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&co, &ctx), ACCEL_OK);
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 2, &o), ACCEL_OK);
  ck_assert_msg(p.monotonic && p.last == 1.0 && p.calls >= 10, "%d calls, last %g", p.calls, p.last);
  p = (progress_log){0, 3, 0, true};
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 2, &o), ACCEL_ERR_CANCELLED);
  ck_assert_int_eq(p.calls, 3);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
  free(img);
  free(a);
  free(b);
}
END_TEST

START_TEST(bad_warp_arguments) {
  accel_reg_transform *t = random_transform(20, 10, 8, 1, 61);
  float img[10][20][3], out[10][20][3];
  const int64_t s3[3] = {10, 20, 3}, s2[2] = {10, 20}, s4[3] = {10, 20, 2}, s0[2] = {0, 20};
  accel_array in = array_of(img, ACCEL_DTYPE_F32, 3, s3), o = array_of(out, ACCEL_DTYPE_F32, 3, s3);
  accel_array gray = array_of(out, ACCEL_DTYPE_F32, 2, s2), two = array_of(out, ACCEL_DTYPE_F32, 3, s4);
  accel_array i32 = array_of(out, ACCEL_DTYPE_I32, 3, s3), empty = array_of(out, ACCEL_DTYPE_F32, 2, s0);
  accel_array self = array_of(img, ACCEL_DTYPE_F32, 3, s3);
  memset(img, 0, sizeof img);
  accel_ctx *ctx = cpu_ctx();
  const accel_array *ins[1] = {&in}, *outs[1] = {&o}, *null[1] = {NULL};
  accel_reg_warp_options opt;
  accel_reg_warp_options_init(&opt, sizeof opt);
  ck_assert_int_eq(accel_reg_warp(NULL, t, ins, outs, 1, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_warp(ctx, NULL, ins, outs, 1, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_warp(ctx, t, NULL, outs, 1, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 0, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_reg_warp(ctx, t, null, outs, 1, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "in[0] is NULL"));
  const struct {
    const accel_array *in, *out;
    const char *message;
  } cases[] = {{&in, &gray, "out[0] has 1 channels, in[0] 3"},
               {&two, &o, "in[0] has 2 channels"},
               {&in, &i32, "out[0] must be U8, U16 or F32"},
               {&empty, &o, "in[0] is empty"},
               {&in, &self, "out[0] overlaps in[0]"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const accel_array *ci[1] = {cases[k].in}, *co[1] = {cases[k].out};
    ck_assert_int_eq(accel_reg_warp(ctx, t, ci, co, 1, NULL), ACCEL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(accel_last_error(ctx), cases[k].message), "%s", accel_last_error(ctx));
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "accel_reg_warp: "));
  }
  opt.interp = 2;
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_ERR_INVALID_ARG);
  opt.interp = ACCEL_REG_INTERP_LINEAR;
  opt.fill = NAN;
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_ERR_INVALID_ARG);
  opt.fill = 0;
  opt.tile = -1;
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_ERR_INVALID_ARG);
  opt.tile = 0;
  for (int interp = 1; interp <= 3; interp += 2) {
    opt.interp = interp;
    img[3][4][1] = NAN;
    ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "non-finite value in row 3"));
    img[3][4][1] = 0;
    ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_OK);
  }
  /* an empty output is an empty region (it was "out[0] is empty" while the field of one is empty),
   * and the other layers of the call are still written */
  float none[1], grayin[10][20];
  for (int r = 0; r < 10; r++)
    for (int c = 0; c < 20; c++) grayin[r][c] = (float)(r * 20 + c);
  const int64_t s00[2] = {10, 0};
  accel_array gin = array_of(grayin, ACCEL_DTYPE_F32, 2, s2), gout = array_of(none, ACCEL_DTYPE_F32, 2, s00);
  for (int interp = 1; interp <= 3; interp += 2) {
    opt.interp = interp;
    memset(out, 0xff, sizeof out);
    const accel_array *two_in[2] = {&gin, &gin}, *two_out[2] = {&gout, &gray};
    ck_assert_int_eq(accel_reg_warp(ctx, t, two_in, two_out, 2, &opt), ACCEL_OK);
    ck_assert(isfinite(((const float *)out)[5 * 20 + 10])); /* gray over out: (5, 10) written */
  }
  opt.struct_size = 4;
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, &opt), ACCEL_ERR_VERSION);
  accel_ctx_destroy(ctx);
  accel_reg_transform_destroy(t);
}
END_TEST

/* ------------------------------------------------------------ ../shared */

#define REG_DATA SHARED_DATA_DIR "/reg"

/* Our B-spline evaluation is elastix's: the transform elastix wrote gives
 * transformix's dense field (elastix_dx, elastix_dy). */
START_TEST(elastix_transform_gives_transformix_field) {
  accel_reg_transform *t = NULL;
  ck_assert_msg(accel_reg_transform_load(NULL, REG_DATA "/tex_512_s1/TransformParameters.0.txt", &t) == ACCEL_OK, "%s",
                accel_last_error(NULL));
  accel_buffer *dx = must_load(REG_DATA "/tex_512_s1", "elastix_dx"),
               *dy = must_load(REG_DATA "/tex_512_s1", "elastix_dy");
  const float *ex = view_of(dx).data, *ey = view_of(dy).data, *f = field_of(t, 512, 512);
  double worst = 0;
  for (int64_t i = 0; i < 512 * 512; i++)
    worst = fmax(worst, fmax(fabs((double)f[i] - ex[i]), fabs((double)f[512 * 512 + i] - ey[i])));
  ck_assert_msg(worst <= 1e-4, "largest difference %g px", worst);
  free((void *)f);
  accel_buffer_destroy(dx);
  accel_buffer_destroy(dy);
  accel_reg_transform_destroy(t);
}
END_TEST

/* Our cubic warp of the moving image with elastix's transform is elastix's
 * result image. */
START_TEST(warp_reproduces_elastix_result) {
  static const char *const cases[] = {"tex_512_s1", "tex_1024_s2"};
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/%s", REG_DATA, cases[_i % 2]);
  const int64_t keep = accel__reg_band_bytes;
  if (_i >= 2) accel__reg_band_bytes = 200000; /* also band by band */
  accel_reg_transform *t = NULL;
  snprintf(path, sizeof path, "%s/TransformParameters.0.txt", dir);
  ck_assert_msg(accel_reg_transform_load(NULL, path, &t) == ACCEL_OK, "%s", accel_last_error(NULL));
  accel_buffer *moving = NULL, *result = NULL, *got = NULL;
  snprintf(path, sizeof path, "%s/moving.tif", dir);
  ck_assert_msg(accel_tiff_load(NULL, path, &moving, NULL) == ACCEL_OK, "%s", accel_last_error(NULL));
  snprintf(path, sizeof path, "%s/result.tif", dir);
  ck_assert_msg(accel_tiff_load(NULL, path, &result, NULL) == ACCEL_OK, "%s", accel_last_error(NULL));
  accel_array m = view_of(moving), r = view_of(result);
  ck_assert_int_eq(accel_buffer_create(ACCEL_DTYPE_F32, 2, r.shape, &got), ACCEL_OK);
  accel_array g = view_of(got);
  accel_ctx *ctx = cpu_ctx();
  const accel_array *ins[1] = {&m}, *outs[1] = {&g};
  ck_assert_int_eq(accel_reg_warp(ctx, t, ins, outs, 1, NULL), ACCEL_OK);
  accel__reg_band_bytes = keep;
  const float *a = g.data, *b = r.data;
  double lo = INFINITY, hi = -INFINITY, worst = 0;
  for (int64_t i = 0; i < r.shape[0] * r.shape[1]; i++) {
    lo = fmin(lo, b[i]), hi = fmax(hi, b[i]);
    worst = fmax(worst, fabs((double)a[i] - b[i]));
  }
  ck_assert_msg(worst <= 1e-3 * (hi - lo), "%s: largest difference %g of a range %g", cases[_i % 2], worst, hi - lo);
  accel_ctx_destroy(ctx);
  accel_buffer_destroy(moving);
  accel_buffer_destroy(result);
  accel_buffer_destroy(got);
  accel_reg_transform_destroy(t);
}
END_TEST

static Suite *suite_shared(void) {
  TCase *tc = new_case("reg_transform_shared", 300, NULL, NULL);
  tcase_add_test(tc, elastix_transform_gives_transformix_field);
  tcase_add_loop_test(tc, warp_reproduces_elastix_result, 0, 4);
  return suite_of("reg_transform_shared", tc);
}

static const shared_run REG_SHARED = {"--shared", REG_DATA "/tex_512_s1/TransformParameters.0.txt", REG_DATA,
                                      suite_shared};

static Suite *suite_reg_transform(void) {
  TCase *tc = new_case("reg_transform", 300, NULL, NULL);
  tcase_add_test(tc, transformix_reads_our_files);
  tcase_add_loop_test(tc, elastix_files_give_transformix_fields, 0, 4);
  tcase_add_test(tc, save_and_load_round_trip);
  tcase_add_test(tc, initial_chains_fold);
  tcase_add_loop_test(tc, bad_files_are_errors, 0, (int)(sizeof BAD_FILES / sizeof BAD_FILES[0]));
  tcase_add_test(tc, bad_arguments_of_files);
  tcase_add_loop_test(tc, warp_equals_reference, 0, 4);
  tcase_add_loop_test(tc, small_images_equal_reference, 0, 6);
  tcase_add_test(tc, identity_and_integer_shifts_are_exact);
  tcase_add_loop_test(tc, tiles_and_threads_do_not_matter, 0, 2);
  tcase_add_loop_test(tc, layers_types_channels_regions, 0, 2);
  tcase_add_loop_test(tc, channels_one_at_a_time_equal_all_at_once, 0, 2);
  tcase_add_test(tc, layer_coefficients_equal_the_line_recursions);
  tcase_add_loop_test(tc, vector_warp_equals_the_plain_code, 0, 4);
  tcase_add_loop_test(tc, bands_equal_the_whole, 0, 3);
  tcase_add_test(tc, progress_and_cancel);
  tcase_add_test(tc, bad_warp_arguments);
  return suite_of("reg_transform", tc);
}

ACCEL_TEST_MAIN_SHARED(suite_reg_transform, REG_SHARED)
