/* suite_svf: shadows and sky view factors against UMEP's outputs
 * (tests/data/svf, copied from ../shared/data/svf), tiles against the
 * untiled run, the matrices against the grids, the GPU code (in emulation
 * here) against the CPU.
 *
 *   test_svf            the committed fixture and the synthetic checks
 *   test_svf --shared   every folder of ../shared/data/svf (exit 77,
 *                       skipped, when ../shared is absent)
 */
#include "emulated_gpu.h"
#include "testutil.h"

#include "svf/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static accel_array grid_f32(float *data, int64_t rows, int64_t cols) {
  return array_of(data, ACCEL_DTYPE_F32, 2, (const int64_t[]){rows, cols});
}

static accel_array mat_u8(uint8_t *data, int64_t rows, int64_t cols, int64_t bytes) {
  return array_of(data, ACCEL_DTYPE_U8, 3, (const int64_t[]){rows, cols, bytes});
}

typedef struct city {
  char dir[512];
  accel_buffer *dsm, *cdsm, *tdsm;
  int64_t rows, cols;
  double pixel;
} city;

static void load_city(city *c, const char *root, const char *name) {
  memset(c, 0, sizeof *c);
  snprintf(c->dir, sizeof c->dir, "%s/%s", root, name);
  c->dsm = must_load(c->dir, "dsm");
  c->cdsm = must_load(c->dir, "cdsm");
  c->tdsm = must_load(c->dir, "tdsm");
  accel_array a = view_of(c->dsm);
  c->rows = a.shape[0];
  c->cols = a.shape[1];
  char path[1024];
  snprintf(path, sizeof path, "%s/meta.txt", c->dir);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char line[256];
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "pixel_size_m %lf", &c->pixel) == 1) break;
  fclose(f);
  ck_assert_msg(c->pixel > 0, "%s: no pixel_size_m", path);
}

static void free_city(city *c) {
  accel_buffer_destroy(c->dsm);
  accel_buffer_destroy(c->cdsm);
  accel_buffer_destroy(c->tdsm);
}

static const double suns[3][2] = {{90, 30}, {180, 60}, {247.5, 12}};

/* Shadows at the three sun positions equal UMEP's, every pixel. */
static void check_shadows(accel_ctx *ctx, const city *c, int64_t tile) {
  accel_array dsm = view_of(c->dsm), cdsm = view_of(c->cdsm), tdsm = view_of(c->tdsm);
  const int64_t n = c->rows * c->cols;
  float *out = malloc(sizeof(float) * (size_t)n * 3);
  accel_array o[3] = {grid_f32(out, c->rows, c->cols), grid_f32(out + n, c->rows, c->cols),
                      grid_f32(out + 2 * n, c->rows, c->cols)};
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c->pixel;
  opt.tile = tile;
  static const char *const kinds[3] = {"sh", "vegsh", "vbshvegsh"};
  for (int s = 0; s < 3; s++) {
    ck_assert_msg(
        accel_svf_shadows(ctx, &dsm, &cdsm, &tdsm, suns[s][0], suns[s][1], &opt, &o[0], &o[1], &o[2]) == ACCEL_OK, "%s",
        accel_last_error(ctx));
    for (int k = 0; k < 3; k++) {
      char name[128];
      snprintf(name, sizeof name, "shadow_az%g_alt%g_%s", suns[s][0], suns[s][1], kinds[k]);
      accel_buffer *ref = must_load(c->dir, name);
      const float *r = view_of(ref).data, *g = out + k * n;
      int64_t differ = 0, first = -1;
      for (int64_t i = 0; i < n; i++)
        if (r[i] != g[i]) {
          if (first < 0) first = i;
          differ++;
        }
      EXPECT(differ == 0, "%s/%s (tile %lld): %lld pixels differ, first at (%lld, %lld): %g, UMEP %g", c->dir, name,
             (long long)tile, (long long)differ, (long long)(first / c->cols), (long long)(first % c->cols), g[first],
             r[first]);
      accel_buffer_destroy(ref);
    }
  }
  free(out);
}

/* The 15 grids: within the bounds (1e-5, vegetation 1e-4), and in
 * fact float for float. */
static void check_sky(accel_ctx *ctx, const city *c, int64_t tile) {
  accel_array dsm = view_of(c->dsm), cdsm = view_of(c->cdsm), tdsm = view_of(c->tdsm);
  const int64_t n = c->rows * c->cols;
  float *out = malloc(sizeof(float) * (size_t)n * ACCEL_SVF_GRIDS);
  accel_array o[ACCEL_SVF_GRIDS];
  const accel_array *grids[ACCEL_SVF_GRIDS];
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) {
    o[g] = grid_f32(out + g * n, c->rows, c->cols);
    grids[g] = &o[g];
  }
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c->pixel;
  opt.tile = tile;
  ck_assert_msg(accel_svf_sky(ctx, &dsm, &cdsm, &tdsm, &opt, grids, NULL) == ACCEL_OK, "%s", accel_last_error(ctx));
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) {
    char name[64];
    snprintf(name, sizeof name, "svf_%s", accel_svf_grid_name(g));
    accel_buffer *ref = must_load(c->dir, name);
    const float *r = view_of(ref).data, *v = out + g * n;
    double worst = 0;
    int64_t differ = 0, at = 0;
    for (int64_t i = 0; i < n; i++) {
      const double d = fabs((double)v[i] - (double)r[i]);
      if (v[i] != r[i]) differ++;
      if (d > worst || isnan(d)) {
        worst = d;
        at = i;
      }
    }
    const double bound = g < ACCEL_SVF_VEG ? 1e-5 : 1e-4;
    EXPECT(worst <= bound, "%s/%s (tile %lld): |diff| %g at (%lld, %lld) over %g", c->dir, name, (long long)tile, worst,
           (long long)(at / c->cols), (long long)(at % c->cols), bound);
    EXPECT(differ == 0, "%s/%s (tile %lld): %lld pixels differ from UMEP (largest %g)", c->dir, name, (long long)tile,
           (long long)differ, worst);
    accel_buffer_destroy(ref);
  }
  free(out);
}

START_TEST(committed_city_equals_umep) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  check_shadows(ctx, &c, 0);
  check_sky(ctx, &c, 0);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(shared_cities_equal_umep) {
  static const char *const names[] = {"city_120x100_1m", "city_96x128_2m"};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, SHARED_DATA_DIR "/svf", names[_i]);
  check_shadows(ctx, &c, 0);
  check_sky(ctx, &c, 0);
  check_sky(ctx, &c, 24);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

static Suite *suite_svf_shared(void) {
  return single_test_suite("svf_shared", "shared", 600, shared_cities_equal_umep, 2);
}

static const shared_run SVF_SHARED = {"--shared", SHARED_DATA_DIR "/svf/city_96x128_2m/dsm.npy", SHARED_DATA_DIR "/svf",
                                      suite_svf_shared};

/* Every output of a run: 15 grids then the three matrices. */
typedef struct run_out {
  float *grid;
  uint8_t *mat;
  int64_t n, mb;
} run_out;

static run_out run_all_as(accel_ctx *ctx, const city *c, int32_t patches, int64_t tile, bool veg, bool unpacked) {
  accel_array dsm = view_of(c->dsm), cdsm = view_of(c->cdsm), tdsm = view_of(c->tdsm);
  run_out r;
  r.n = c->rows * c->cols;
  int32_t np = 0;
  ck_assert_int_eq(accel_svf_patches(patches, &np, NULL, NULL), ACCEL_OK);
  r.mb = unpacked ? np : (np + 7) / 8;
  r.grid = calloc((size_t)r.n * ACCEL_SVF_GRIDS, sizeof(float));
  r.mat = calloc((size_t)(r.n * r.mb * 3), 1);
  accel_array o[ACCEL_SVF_GRIDS], m[3];
  const accel_array *grids[ACCEL_SVF_GRIDS] = {0}, *mats[3] = {0};
  for (int g = 0; g < (veg ? ACCEL_SVF_GRIDS : 5); g++) {
    o[g] = grid_f32(r.grid + g * r.n, c->rows, c->cols);
    grids[g] = &o[g];
  }
  for (int k = 0; k < (veg ? 3 : 1); k++) {
    m[k] = mat_u8(r.mat + k * r.n * r.mb, c->rows, c->cols, r.mb);
    mats[k] = &m[k];
  }
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c->pixel;
  opt.tile = tile;
  opt.patches = patches;
  ck_assert_msg(accel_svf_sky(ctx, &dsm, veg ? &cdsm : NULL, veg ? &tdsm : NULL, &opt, grids, mats) == ACCEL_OK, "%s",
                accel_last_error(ctx));
  return r;
}

static run_out run_all(accel_ctx *ctx, const city *c, int32_t patches, int64_t tile, bool veg) {
  return run_all_as(ctx, c, patches, tile, veg, false);
}

/* The matrices a byte a patch (UMEP's layout) are the bit-packed ones'
 * bits, unpacked here. */
static void expect_unpacked(const run_out *packed, const run_out *bytes, const char *what) {
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < packed->n; i++)
      for (int64_t p = 0; p < bytes->mb; p++) {
        const uint8_t bit = (packed->mat[(k * packed->n + i) * packed->mb + p / 8] >> (p % 8)) & 1;
        if (bytes->mat[(k * bytes->n + i) * bytes->mb + p] != bit)
          ck_abort_msg("%s: matrix %d, cell %lld, patch %lld: %d, bit %d", what, k, (long long)i, (long long)p,
                       (int)bytes->mat[(k * bytes->n + i) * bytes->mb + p], (int)bit);
      }
}

static void expect_same(const run_out *a, const run_out *b, const char *what) {
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++)
    EXPECT(memcmp(a->grid + g * a->n, b->grid + g * b->n, sizeof(float) * (size_t)a->n) == 0, "%s: grid %s differs",
           what, accel_svf_grid_name(g));
  for (int k = 0; k < 3; k++)
    EXPECT(memcmp(a->mat + k * a->n * a->mb, b->mat + k * b->n * b->mb, (size_t)(a->n * a->mb)) == 0,
           "%s: matrix %d differs", what, k);
}

static void free_out(run_out *r) {
  free(r->grid);
  free(r->mat);
}

/* Tiles far smaller than the halo, and uneven ones: the same bits. */
START_TEST(small_tiles_equal_the_untiled_run) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  run_out whole = run_all(ctx, &c, 153, 0, true);
  static const int64_t sides[] = {7, 16, 50};
  for (size_t i = 0; i < 3; i++) {
    run_out t = run_all(ctx, &c, 153, sides[i], true);
    char what[64];
    snprintf(what, sizeof what, "tile %lld", (long long)sides[i]);
    expect_same(&whole, &t, what);
    free_out(&t);
  }
  check_shadows(ctx, &c, 9);
  free_out(&whole);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The grids again from the matrices' bits with weights computed here (UMEP's
 * annulus formula, sums in its order), for every patch option. */
static double annulus(double k, double n) {
  const double steprad = (360.0 / n) * (M_PI / 180.0), ring = 91.0 - k;
  return steprad * ((1.0 / (2.0 * M_PI)) * sin(M_PI / (2.0 * 90.0)) * sin((M_PI * (2.0 * ring - 1.0)) / (2.0 * 90.0)));
}

START_TEST(grids_equal_sums_over_the_matrices) {
  static const int32_t options[] = {145, 153, 306, 612};
  static const int32_t counts[] = {145, 153, 305, 609};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  const int32_t option = options[_i];
  int32_t np = 0, np2 = 0;
  ck_assert_int_eq(accel_svf_patches(option, &np, NULL, NULL), ACCEL_OK);
  ck_assert_int_eq(np, counts[_i]);
  double *az = malloc(sizeof(double) * (size_t)np), *alt = malloc(sizeof(double) * (size_t)np);
  ck_assert_int_eq(accel_svf_patches(option, &np2, az, alt), ACCEL_OK);
  ck_assert_int_eq(np2, np);
  run_out r = run_all(ctx, &c, option, 0, true);
  run_out u = run_all_as(ctx, &c, option, 0, true, true); /* a byte a patch */
  ck_assert_int_eq(u.mb, np);
  expect_unpacked(&r, &u, "a byte a patch");
  free_out(&u);
  const float *trunk_src = view_of(c.tdsm).data;
  /* bands: runs of equal altitude; rings between the midpoints as UMEP's annulino */
  const double *bounds;
  static const double b8[] = {0, 12, 24, 36, 48, 60, 72, 84, 90};
  static const double b15[] = {0, 4.5, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69, 75, 81, 90};
  bounds = option == 612 ? b15 : b8;
  for (int64_t i = 0; i < r.n; i += 37) {
    double acc[ACCEL_SVF_GRIDS] = {0};
    int band = -1;
    int32_t nb = 0;
    for (int32_t p = 0; p < np; p++) {
      if (p == 0 || alt[p] != alt[p - 1]) {
        band++;
        nb = 0;
        for (int32_t q = p; q < np && alt[q] == alt[p]; q++) nb++;
      }
      const double nh = ceil(nb / 2.0);
      const bool side[4] = {az[p] < 180, az[p] >= 90 && az[p] < 270, az[p] >= 180, az[p] >= 270 || az[p] < 90};
      for (int k = 0; k < 3; k++) {
        if (!((r.mat[k * r.n * r.mb + i * r.mb + p / 8] >> (p % 8)) & 1)) continue;
        for (double ring = bounds[band] + 1; ring < bounds[band + 1] + 1; ring += 1) {
          acc[5 * k] += annulus(ring, nb);
          for (int s = 0; s < 4; s++)
            if (side[s]) acc[5 * k + 1 + s] += annulus(ring, nh);
        }
      }
    }
    acc[2] += 3.0459e-4;
    acc[3] += 3.0459e-4;
    if (trunk_src[i] == 0) {
      acc[7] += 3.0459e-4;
      acc[8] += 3.0459e-4;
      acc[12] += 3.0459e-4;
      acc[13] += 3.0459e-4;
    }
    for (int g = 0; g < ACCEL_SVF_GRIDS; g++) {
      const float want = (float)(acc[g] > 1 ? 1 : acc[g]);
      EXPECT(r.grid[g * r.n + i] == want, "option %d pixel %lld grid %s: %.9g, from the matrix %.9g", (int)option,
             (long long)i, accel_svf_grid_name(g), r.grid[g * r.n + i], want);
    }
  }
  free_out(&r);
  free(az);
  free(alt);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A DSM below zero is raised as UMEP raises it; NaN counts as 0. */
START_TEST(negative_and_missing_heights) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  const int64_t n = c.rows * c.cols;
  float *low = malloc(sizeof(float) * (size_t)n), *up = malloc(sizeof(float) * (size_t)n);
  const float *d = view_of(c.dsm).data;
  float lo = INFINITY;
  for (int64_t i = 0; i < n; i++) lo = d[i] < lo ? d[i] : lo;
  /* a DSM with minimum -7 (exact in float), and the same raised by hand */
  for (int64_t i = 0; i < n; i++) {
    low[i] = d[i] - lo - 7.0f;
    up[i] = low[i] + 7.0f;
  }
  accel_array a = grid_f32(low, c.rows, c.cols), b = grid_f32(up, c.rows, c.cols);
  float *o1 = malloc(sizeof(float) * (size_t)n * 2);
  accel_array g1 = grid_f32(o1, c.rows, c.cols), g2 = grid_f32(o1 + n, c.rows, c.cols);
  const accel_array *w1[ACCEL_SVF_GRIDS] = {&g1}, *w2[ACCEL_SVF_GRIDS] = {&g2};
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c.pixel;
  ck_assert_int_eq(accel_svf_sky(ctx, &a, NULL, NULL, &opt, w1, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_svf_sky(ctx, &b, NULL, NULL, &opt, w2, NULL), ACCEL_OK);
  ck_assert(memcmp(o1, o1 + n, sizeof(float) * (size_t)n) == 0);
  /* NaN = 0 */
  up[5] = 0.0f;
  low[5] = NAN;
  for (int64_t i = 0; i < n; i++)
    if (i != 5) low[i] = up[i];
  ck_assert_int_eq(accel_svf_shadows(ctx, &a, NULL, NULL, 200, 20, &opt, &g1, NULL, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_svf_shadows(ctx, &b, NULL, NULL, 200, 20, &opt, &g2, NULL, NULL), ACCEL_OK);
  ck_assert(memcmp(o1, o1 + n, sizeof(float) * (size_t)n) == 0);
  free(o1);
  free(low);
  free(up);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments_are_errors) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  float d[12] = {0}, o[12], o2[6];
  accel_array dsm = grid_f32(d, 3, 4), out = grid_f32(o, 3, 4), small = grid_f32(o2, 2, 3);
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, 90, 30, &opt, &out, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "pixel_size"));
  opt.pixel_size = 1;
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, 90, 30, &opt, &out, NULL, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, 90, 0, &opt, &out, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, -5, 30, &opt, &out, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, 90, 30, &opt, &small, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_shadows(ctx, &dsm, NULL, NULL, 90, 30, &opt, &dsm, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  const accel_array *g[ACCEL_SVF_GRIDS] = {0};
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_ERR_INVALID_ARG);
  g[ACCEL_SVF_VEG] = &out;
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "CDSM"));
  g[ACCEL_SVF_VEG] = NULL;
  g[ACCEL_SVF] = &out;
  opt.patches = 150;
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_ERR_INVALID_ARG);
  opt.patches = 153;
  d[3] = INFINITY;
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_ERR_INVALID_ARG);
  d[3] = 0;
  uint8_t m[12 * 20];
  accel_array mat = mat_u8(m, 3, 4, 19);
  const accel_array *mats[3] = {&mat};
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, NULL, mats), ACCEL_ERR_INVALID_ARG);
  mat = mat_u8(m, 3, 4, 20);
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, NULL, mats), ACCEL_OK);
  /* a flat grid sees the whole sky: every patch visible */
  for (int i = 0; i < 12 * 20; i++) EXPECT(m[i] == ((i % 20) == 19 ? 0x01 : 0xff), "byte %d = %#x", i, m[i]);
  /* a byte a patch: all ones; both layouts in one call are refused */
  uint8_t mb[12 * 153], vm[12 * 153];
  accel_array bytes = mat_u8(mb, 3, 4, 153);
  mats[0] = &bytes;
  memset(mb, 7, sizeof mb);
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, NULL, mats), ACCEL_OK);
  for (int i = 0; i < 12 * 153; i++) EXPECT(mb[i] == 1, "byte %d = %d", i, mb[i]);
  float cv[12];
  accel_array cdsm_flat = grid_f32(cv, 3, 4), veg = mat_u8(vm, 3, 4, 20);
  memset(cv, 0, sizeof cv);
  const accel_array *mixed[3] = {&bytes, &veg};
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, &cdsm_flat, NULL, &opt, NULL, mixed), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "one layout for all"));
  mats[0] = &mat;
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_OK);
  ck_assert_float_eq(o[0], 1.0f);
  ck_assert_ptr_null(accel_svf_grid_name(15));
  ck_assert_str_eq(accel_svf_grid_name(ACCEL_SVF_N_AVEG), "svfNaveg");
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ halo */

/* The city's lowest height, highest top (DSM, canopy, trunk) and UMEP's stop
 * height, computed here as docs/svf.md states them (no cell is negative or
 * missing). */
static void city_extent(const city *c, double *lowest, double *highest, double *amax) {
  const float *d = view_of(c->dsm).data, *cd = view_of(c->cdsm).data, *td = view_of(c->tdsm).data;
  double lo = INFINITY, hi = -INFINITY, top = -INFINITY, chi = 0;
  for (int64_t i = 0; i < c->rows * c->cols; i++) {
    const double dv = d[i], canopy = cd[i] ? (double)cd[i] + dv : 0, trunk = td[i] ? (double)td[i] + dv : 0;
    lo = fmin(lo, dv);
    hi = fmax(hi, dv);
    chi = fmax(chi, cd[i]);
    top = fmax(top, fmax(dv, fmax(canopy, trunk)));
  }
  *lowest = lo;
  *highest = top;
  *amax = fmax(hi, chi);
}

/* Rows r0..r1 and columns c0..c1 of a grid, as a strided view of it. */
static accel_array window_of(accel_buffer *b, const int64_t w[4]) {
  accel_array a = view_of(b);
  a.data = (float *)a.data + w[0] * a.shape[1] + w[2];
  a.shape[0] = w[1] - w[0];
  a.shape[1] = w[3] - w[2];
  return a;
}

/* Shadows for `sun` (3 grids) or the 15 SVF grids (sun NULL) of window w into
 * out (window-sized grids one after the other); how many grids. */
static int run_window(accel_ctx *ctx, const city *c, const accel_svf_options *opt, const double *sun,
                      const int64_t w[4], float *out) {
  accel_array dsm = window_of(c->dsm, w), cdsm = window_of(c->cdsm, w), tdsm = window_of(c->tdsm, w);
  const int64_t rows = w[1] - w[0], cols = w[3] - w[2], n = rows * cols;
  accel_array o[ACCEL_SVF_GRIDS];
  const accel_array *grids[ACCEL_SVF_GRIDS];
  const int ng = sun ? 3 : ACCEL_SVF_GRIDS;
  for (int g = 0; g < ng; g++) {
    o[g] = grid_f32(out + g * n, rows, cols);
    grids[g] = &o[g];
  }
  accel_status s = sun ? accel_svf_shadows(ctx, &dsm, &cdsm, &tdsm, sun[0], sun[1], opt, &o[0], &o[1], &o[2])
                       : accel_svf_sky(ctx, &dsm, &cdsm, &tdsm, opt, grids, NULL);
  ck_assert_msg(s == ACCEL_OK, "%s", accel_last_error(ctx));
  return ng;
}

/* The grid cut into 2 x 2 chunks, each run alone on its window (the chunk
 * and hr rows, hc columns around it, clipped to the grid): the chunk's
 * pixels that differ from the whole grid's run `whole`. */
static int64_t chunk_differences(accel_ctx *ctx, const city *c, const accel_svf_options *opt, const double *sun,
                                 const float *whole, int64_t hr, int64_t hc) {
  float *out = malloc(sizeof(float) * (size_t)(c->rows * c->cols) * ACCEL_SVF_GRIDS);
  int64_t differ = 0;
  for (int q = 0; q < 4; q++) {
    const int64_t r0 = q / 2 ? c->rows / 2 : 0, r1 = q / 2 ? c->rows : c->rows / 2;
    const int64_t c0 = q % 2 ? c->cols / 2 : 0, c1 = q % 2 ? c->cols : c->cols / 2;
    const int64_t w[4] = {r0 > hr ? r0 - hr : 0, r1 + hr < c->rows ? r1 + hr : c->rows, c0 > hc ? c0 - hc : 0,
                          c1 + hc < c->cols ? c1 + hc : c->cols};
    const int64_t wn = (w[1] - w[0]) * (w[3] - w[2]), n = c->rows * c->cols;
    const int ng = run_window(ctx, c, opt, sun, w, out);
    for (int g = 0; g < ng; g++)
      for (int64_t r = r0; r < r1; r++)
        for (int64_t k = c0; k < c1; k++)
          differ += out[g * wn + (r - w[0]) * (w[3] - w[2]) + (k - w[2])] != whole[g * n + r * c->cols + k];
  }
  free(out);
  return differ;
}

/* Chunks computed apart on windows with accel_svf_halo's halo give the whole
 * grid's bits (the rule Dask's map_overlap relies on); without a halo they
 * do not. 20 m pixels make the halo smaller than the chunks. */
START_TEST(windows_with_the_halo_equal_the_whole_grid) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  double lowest, highest, amax;
  city_extent(&c, &lowest, &highest, &amax);
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = 20;
  opt.max_height = amax;
  float *whole = malloc(sizeof(float) * (size_t)(c.rows * c.cols) * ACCEL_SVF_GRIDS);
  const int64_t all[4] = {0, c.rows, 0, c.cols};
  for (int m = -1; m < 3; m++) {
    const double *sun = m < 0 ? NULL : suns[m];
    int64_t hr = -1, hc = -1, hr0 = -1, hc0 = -1;
    ck_assert_msg(accel_svf_halo(&opt, c.rows, c.cols, lowest, highest, sun, &hr, &hc) == ACCEL_OK, "%s",
                  accel_last_error(NULL));
    ck_assert(hr >= 0 && hc >= 0 && hr < c.rows / 2 && hc < c.cols / 2);
    /* the bound of docs/svf.md: (T - a_min) / (tan(H_min) * pixel) + 1 */
    const double bound = (highest - lowest) / (tan((sun ? sun[1] : 6) * M_PI / 180) * opt.pixel_size) + 1;
    EXPECT(hr <= bound + 1 && hc <= bound + 1, "halo %lld x %lld over the bound %g", (long long)hr, (long long)hc,
           bound);
    run_window(ctx, &c, &opt, sun, all, whole);
    EXPECT(chunk_differences(ctx, &c, &opt, sun, whole, hr, hc) == 0, "mode %d: chunks with the halo differ", m);
    if (!sun) {
      ck_assert(hr > 0 && hc > 0);
      EXPECT(chunk_differences(ctx, &c, &opt, sun, whole, 0, 0) > 0, "chunks without a halo do not differ");
    }
    /* max_height 0 stands for `highest`: never a smaller halo */
    accel_svf_options o0 = opt;
    o0.max_height = 0;
    ck_assert_int_eq(accel_svf_halo(&o0, c.rows, c.cols, lowest, highest, sun, &hr0, &hc0), ACCEL_OK);
    EXPECT(hr0 >= hr && hc0 >= hc, "halo %lld x %lld below %lld x %lld", (long long)hr0, (long long)hc0, (long long)hr,
           (long long)hc);
  }
  free(whole);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(halo_arguments_are_checked) {
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  int64_t hr = 7, hc = 7;
  const double sun[2] = {90, 30}, low_sun[2] = {90, 0};
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 0, 5, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "pixel_size"));
  opt.pixel_size = 1;
  ck_assert_int_eq(accel_svf_halo(NULL, 10, 10, 0, 5, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 0, 5, NULL, NULL, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_halo(&opt, 0, 10, 0, 5, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_halo(&opt, (int64_t)1 << 31, 10, 0, 5, NULL, &hr, &hc), ACCEL_ERR_LIMIT);
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 5, 0, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 0, NAN, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 0, 5, low_sun, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "altitude"));
  opt.patches = 150;
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 0, 5, NULL, &hr, &hc), ACCEL_ERR_INVALID_ARG);
  ck_assert(hr == 7 && hc == 7); /* written only on success */
  /* a flat grid needs no halo; a 5 m wall casts 5 pixels at 45 degrees */
  ck_assert_int_eq(accel_svf_halo(&opt, 10, 10, 3, 3, sun, &hr, &hc), ACCEL_OK);
  ck_assert(hr == 0 && hc == 0);
  const double south[2] = {180, 45};
  ck_assert_int_eq(accel_svf_halo(&opt, 50, 50, 0, 5, south, &hr, &hc), ACCEL_OK);
  EXPECT(hr >= 5 && hr <= 6 && hc == 0, "halo %lld x %lld", (long long)hr, (long long)hc);
}
END_TEST

static int cancel_at_half(void *user, const char *stage, double f) {
  (void)stage;
  *(double *)user = f;
  return f >= 0.5;
}

START_TEST(progress_and_cancel) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_OFF);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  accel_array dsm = view_of(c.dsm);
  float *o = malloc(sizeof(float) * (size_t)(c.rows * c.cols));
  accel_array out = grid_f32(o, c.rows, c.cols);
  const accel_array *g[ACCEL_SVF_GRIDS] = {&out};
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c.pixel;
  double last = -1;
  opt.progress = cancel_at_half;
  opt.progress_user = &last;
  ck_assert_int_eq(accel_svf_sky(ctx, &dsm, NULL, NULL, &opt, g, NULL), ACCEL_ERR_CANCELLED);
  ck_assert(last >= 0.5 && last < 1.0);
  free(o);
  free_city(&c);
  accel_ctx_destroy(ctx);
}
END_TEST

#if EXPECT_CUDA
/* The GPU's per-pixel march and sums (in emulation) against the CPU's vector
 * code: every output, whole and in budget-sized tiles. */
static void gpu_equals_cpu(uint64_t budget, const char *what) {
  set_emulated_gpu_budget(budget);
  accel_ctx *cpu = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_ALLOW, NULL, ACCEL_LOG_WARN);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  run_out a = run_all(cpu, &c, 153, 0, true), b = run_all(gpu, &c, 153, 0, true);
  expect_same(&a, &b, what);
  free_out(&a);
  free_out(&b);
  a = run_all(cpu, &c, 145, 0, false);
  b = run_all(gpu, &c, 145, 0, false);
  expect_same(&a, &b, what);
  free_out(&a);
  free_out(&b);
  set_emulated_gpu_budget(budget * 4); /* a byte a patch: 8 times the matrices' bytes (still tiles) */
  accel_ctx *wide = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
  a = run_all_as(cpu, &c, 153, 0, true, true);
  b = run_all_as(wide, &c, 153, 0, true, true);
  expect_same(&a, &b, what);
  accel_ctx_destroy(wide);
  set_emulated_gpu_budget(budget);
  check_shadows(gpu, &c, 0);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "svf.sky", &st), ACCEL_OK);
  ck_assert_int_eq((int)st.gpu_runs, 2);
  ck_assert_int_eq(cap.n, 0);
  free_out(&a);
  free_out(&b);
  free_city(&c);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget((uint64_t)1 << 30);
}

START_TEST(gpu_equals_cpu_in_emulation) { gpu_equals_cpu((uint64_t)1 << 30, "whole grid"); }
END_TEST

START_TEST(gpu_tiles_equal_cpu_in_emulation) {
  gpu_equals_cpu(1000000, "tiles from the budget");
  accel__cuda_overlap = false; /* each window uploaded after the previous tile's kernel */
  gpu_equals_cpu(1000000, "tiles one after the other");
  accel__cuda_overlap = true;
}
END_TEST

START_TEST(gpu_too_small_a_budget_falls_back) {
  set_emulated_gpu_budget(20000);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  city c;
  load_city(&c, TEST_DATA_DIR "/svf", "city_96x128_2m");
  check_shadows(gpu, &c, 0);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] svf.shadows failed: "), 3);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, ". CPU fallback."), 3);
  accel_ctx *strict = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_array dsm = view_of(c.dsm);
  float *o = malloc(sizeof(float) * (size_t)(c.rows * c.cols));
  accel_array out = grid_f32(o, c.rows, c.cols);
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c.pixel;
  ck_assert_int_eq(accel_svf_shadows(strict, &dsm, NULL, NULL, 90, 30, &opt, &out, NULL, NULL),
                   ACCEL_ERR_DEVICE_MEMORY);
  free(o);
  accel_ctx_destroy(strict);
  free_city(&c);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget((uint64_t)1 << 30);
}
END_TEST

/* A corner of the committed city (every input grid), in tiles, and the CPU's
 * outputs of it. */
enum { CROP_R = 24, CROP_C = 30, CROP_N = CROP_R * CROP_C, SKY_MB = (153 + 7) / 8 };
typedef struct svf_case {
  float dsm[CROP_N], cdsm[CROP_N], tdsm[CROP_N];
  double pixel;
  int shadows;
  float grid[ACCEL_SVF_GRIDS][CROP_N];
  uint8_t mat[ACCEL_SVF_MATRICES][CROP_N * SKY_MB];
} svf_case;

static accel_status svf_run(accel_ctx *ctx, const svf_case *c, float (*grid)[CROP_N], uint8_t (*mat)[CROP_N * SKY_MB]) {
  accel_array dsm = grid_f32((float *)c->dsm, CROP_R, CROP_C), cdsm = grid_f32((float *)c->cdsm, CROP_R, CROP_C),
              tdsm = grid_f32((float *)c->tdsm, CROP_R, CROP_C);
  accel_svf_options opt;
  accel_svf_options_init(&opt, sizeof opt);
  opt.pixel_size = c->pixel;
  opt.tile = 16;
  accel_array o[ACCEL_SVF_GRIDS], m[ACCEL_SVF_MATRICES];
  const accel_array *grids[ACCEL_SVF_GRIDS], *mats[ACCEL_SVF_MATRICES];
  for (int g = 0; g < ACCEL_SVF_GRIDS; g++) {
    o[g] = grid_f32(grid[g], CROP_R, CROP_C);
    grids[g] = &o[g];
  }
  for (int k = 0; k < ACCEL_SVF_MATRICES; k++) {
    m[k] = mat_u8(mat[k], CROP_R, CROP_C, SKY_MB);
    mats[k] = &m[k];
  }
  if (c->shadows) return accel_svf_shadows(ctx, &dsm, &cdsm, &tdsm, 247.5, 12, &opt, &o[0], &o[1], &o[2]);
  return accel_svf_sky(ctx, &dsm, &cdsm, &tdsm, &opt, grids, mats);
}

static accel_status svf_on_gpu(accel_ctx *ctx, void *user) {
  const svf_case *c = user;
  static float grid[ACCEL_SVF_GRIDS][CROP_N];
  static uint8_t mat[ACCEL_SVF_MATRICES][CROP_N * SKY_MB];
  const accel_status s = svf_run(ctx, c, grid, mat);
  if (!s) {
    ck_assert(memcmp(grid, c->grid, c->shadows ? 3 * sizeof grid[0] : sizeof grid) == 0);
    ck_assert(c->shadows || memcmp(mat, c->mat, sizeof mat) == 0);
  }
  return s;
}

/* Every CUDA call of shadows and sky view factors is checked: a failure at
 * any of them, in any tile, falls back with the error's name. */
START_TEST(gpu_failures_fall_back_in_emulation) {
  static svf_case c;
  city full;
  load_city(&full, TEST_DATA_DIR "/svf", "city_96x128_2m");
  const float *src[3] = {view_of(full.dsm).data, view_of(full.cdsm).data, view_of(full.tdsm).data};
  float *dst[3] = {c.dsm, c.cdsm, c.tdsm};
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < CROP_R; r++) memcpy(dst[k] + r * CROP_C, src[k] + (r + 30) * full.cols + 40, CROP_C * 4);
  c.pixel = full.pixel;
  free_city(&full);
  accel_ctx *cpu = cpu_ctx();
  for (c.shadows = 1; c.shadows >= 0; c.shadows--) {
    ck_assert_int_eq(svf_run(cpu, &c, c.grid, c.mat), ACCEL_OK);
    ck_assert_int_ge(emulated_fault_sweep(c.shadows ? "svf.shadows" : "svf.sky", svf_on_gpu, &c), 20);
  }
  accel_ctx_destroy(cpu);
}
END_TEST
#endif

static Suite *suite_svf(void) {
  TCase *tc = new_case("svf", 300, NULL, NULL);
  tcase_add_test(tc, committed_city_equals_umep);
  tcase_add_test(tc, small_tiles_equal_the_untiled_run);
  tcase_add_loop_test(tc, grids_equal_sums_over_the_matrices, 0, 4);
  tcase_add_test(tc, negative_and_missing_heights);
  tcase_add_test(tc, bad_arguments_are_errors);
  tcase_add_test(tc, progress_and_cancel);
  tcase_add_test(tc, windows_with_the_halo_equal_the_whole_grid);
  tcase_add_test(tc, halo_arguments_are_checked);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_equals_cpu_in_emulation);
  tcase_add_test(tc, gpu_tiles_equal_cpu_in_emulation);
  tcase_add_test(tc, gpu_too_small_a_budget_falls_back);
  tcase_add_test(tc, gpu_failures_fall_back_in_emulation);
#endif
  return suite_of("svf", tc);
}

ACCEL_TEST_MAIN_SHARED(suite_svf, SVF_SHARED)
