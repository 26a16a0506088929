/* suite_gpu: CUDA results equal CPU results (gray, hashes, index searches,
 * CT stages whole and in slabs, shadows and sky view factors, registration
 * and warps); the CUDA error path on the device (every call's failure falls
 * back, stale errors stay out of later stages, memory goes back after each
 * call). Runs only where a CUDA device exists; elsewhere the program exits
 * 77 (meson's "skipped") with the reason. Tests run in this process, not in
 * forked children: CUDA cannot be used in a child forked after the parent
 * has initialized it (which the device probe does). */
#include "emulated_gpu.h"
#include "testutil.h"

#include "core/internal.h"
#include "reg/ops.h"
#include "reg/transform.h"

#include <dirent.h>
#include <math.h>
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

/* ctx ran `stage` `runs` times, every one on the GPU. */
static void expect_gpu_runs(accel_ctx *ctx, const char *stage, uint64_t runs) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  ck_assert_uint_eq(st.gpu_runs, runs);
  ck_assert_uint_eq(st.fallbacks, 0);
}

/* The GPU's pairs (a) are the CPU's (b), with their distances in nfields
 * fields (none: not compared); both are destroyed. Returns how many. */
static size_t expect_same_pairs(accel_pairs *a, accel_pairs *b, uint32_t nfields) {
  size_t na, nb;
  const uint64_t *fa, *sa, *fb, *sb;
  const uint32_t *da, *db;
  accel_pairs_view(a, &na, &fa, &sa, &da, NULL);
  accel_pairs_view(b, &nb, &fb, &sb, &db, NULL);
  ck_assert_uint_eq(na, nb);
  ck_assert(memcmp(fa, fb, na * 8) == 0 && memcmp(sa, sb, na * 8) == 0);
  if (nfields) ck_assert(memcmp(da, db, na * nfields * 4) == 0);
  accel_pairs_destroy(a);
  accel_pairs_destroy(b);
  return na;
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
  accel_ctx_info_init(&i, sizeof i);
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
  expect_gpu_runs(gpu, "image.gray", 7);
}
END_TEST

START_TEST(gray_strided_equals_cpu) {
  enum { H = 123, W = 457 };
  uint8_t *bgr = malloc(H * W * 3), *pad = malloc(H * (2 * W + 3)), *ref = malloc(H * W);
  fill_random(bgr, H * W * 3, 11);
  memset(pad, 0x55, H * (2 * W + 3));
  accel_array s = {.data = bgr + (H - 1) * W * 3 + 2,
                   .dtype = ACCEL_DTYPE_U8,
                   .ndim = 3,
                   .shape = {H, W, 3},
                   .strides = {-(int64_t)W * 3, 3, -1}};
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
  accel_ctx_options_init(&o, sizeof o);
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
  accel_device_info_init(&d, sizeof d);
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
  const struct {
    int size, binbits, nkinds, db4;
  } runs[] = {{8, 3, 6, 0}, {16, 5, 6, 0}, {6, 3, 5, 0}, {8, 3, 6, 1}, {4, 3, 6, 1}};
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    accel_hash_options o;
    accel_hash_options_init(&o, sizeof o);
    o.nkinds = (uint32_t)runs[r].nkinds;
    const accel_hash_kind all[6] = {ACCEL_HASH_AHASH,
                                    ACCEL_HASH_DHASH,
                                    ACCEL_HASH_DHASH_VERTICAL,
                                    ACCEL_HASH_PHASH,
                                    runs[r].nkinds == 6 ? ACCEL_HASH_WHASH : ACCEL_HASH_COLORHASH,
                                    ACCEL_HASH_COLORHASH};
    memcpy(o.kinds, all, sizeof all);
    o.hash_size = runs[r].size;
    o.color_binbits = runs[r].binbits;
    o.whash_mode = runs[r].db4 ? ACCEL_HASH_WHASH_DB4 : ACCEL_HASH_WHASH_HAAR;
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
  expect_gpu_runs(gpu, "hash.batch", 5);
}
END_TEST

/* Codes: random, with clusters of near copies (every 3rd code a copy of an
 * earlier one with 0..5 bits flipped). */
static void make_codes(uint64_t *c, size_t n, uint32_t wpe, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++)
    for (uint32_t w = 0; w < wpe; w++) {
      x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
      c[i * wpe + w] = x * 0x2545F4914F6CDD1Dull;
    }
  for (size_t i = 3; i < n; i += 3) {
    memcpy(c + i * wpe, c + (i / 3) * wpe, wpe * sizeof(uint64_t));
    for (uint32_t k = 0; k < (uint32_t)(i % 6); k++) c[i * wpe + (k % wpe)] ^= 1ull << ((i * 7 + k * 13) % 64);
  }
}

static accel_pairs *join_on(accel_ctx *ctx, const uint64_t *codes, size_t n, uint32_t bits, uint32_t nfields,
                            const accel_search_options *so) {
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.bits = bits;
  io.nfields = nfields;
  accel_index *ix = NULL;
  ck_assert_int_eq(accel_index_create(ctx, &io, &ix), ACCEL_OK);
  uint64_t *ids = malloc(n * sizeof(uint64_t));
  for (size_t i = 0; i < n; i++) ids[i] = (uint64_t)i * 2654435761u;
  ck_assert_int_eq(accel_index_add(ix, n, ids, codes, NULL, NULL), ACCEL_OK);
  accel_pairs *p = NULL;
  ck_assert_msg(accel_index_self_join(ix, so, &p) == ACCEL_OK, "%s", accel_last_error(ctx));
  free(ids);
  accel_index_destroy(ix);
  return p;
}

/* The CUDA brute-force join (forced: AUTO may pick multi-index hashing on
 * the CPU) equals the CPU's, for 64/128/256 bits, both rules, and an output
 * larger than the first device buffer (the rerun path). */
START_TEST(index_join_equals_cpu) {
  const struct {
    uint32_t bits, nfields, t0, t1;
    size_t n;
    accel_index_rule rule;
  } runs[] = {{64, 1, 6, 0, 20000, ACCEL_INDEX_ALL},
              {128, 2, 10, 4, 9000, ACCEL_INDEX_ANY},
              {256, 1, 20, 0, 5000, ACCEL_INDEX_ALL},
              {64, 1, 22, 0, 6000, ACCEL_INDEX_ALL}};
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    const uint32_t wpe = runs[r].bits / 64 * runs[r].nfields;
    uint64_t *codes = malloc(runs[r].n * wpe * sizeof(uint64_t));
    make_codes(codes, runs[r].n, wpe, r + 1);
    accel_search_options so;
    accel_search_options_init(&so, sizeof so);
    so.thresholds[0] = runs[r].t0;
    so.thresholds[1] = runs[r].t1;
    so.rule = runs[r].rule;
    so.algorithm = ACCEL_INDEX_BRUTE_FORCE;
    accel_pairs *a = join_on(gpu, codes, runs[r].n, runs[r].bits, runs[r].nfields, &so);
    accel_pairs *b = join_on(cpu, codes, runs[r].n, runs[r].bits, runs[r].nfields, &so);
    ck_assert_uint_gt(expect_same_pairs(a, b, runs[r].nfields), 0);
    free(codes);
  }
  expect_gpu_runs(gpu, "index.join", 4);
}
END_TEST

/* Range and k-nearest on the GPU equal the CPU's. */
START_TEST(index_range_and_knn_equal_cpu) {
  const size_t n = 30000, nq = 300;
  uint64_t *codes = malloc(n * 2 * sizeof(uint64_t)), *q = malloc(nq * 2 * sizeof(uint64_t));
  make_codes(codes, n, 2, 11);
  memcpy(q, codes, nq * 2 * sizeof(uint64_t));
  for (size_t i = 0; i < nq; i += 2) q[i * 2] ^= 0x101;
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.bits = 128;
  accel_index *ig = NULL, *ic = NULL;
  uint64_t *ids = malloc(n * sizeof(uint64_t));
  for (size_t i = 0; i < n; i++) ids[i] = n - i;
  ck_assert_int_eq(accel_index_create(gpu, &io, &ig), ACCEL_OK);
  ck_assert_int_eq(accel_index_create(cpu, &io, &ic), ACCEL_OK);
  ck_assert_int_eq(accel_index_add(ig, n, ids, codes, NULL, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_index_add(ic, n, ids, codes, NULL, NULL), ACCEL_OK);
  accel_search_options so;
  accel_search_options_init(&so, sizeof so);
  so.thresholds[0] = 8;
  so.algorithm = ACCEL_INDEX_BRUTE_FORCE;
  accel_pairs *a = NULL, *b = NULL;
  ck_assert_msg(accel_index_range(ig, nq, q, &so, &a) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_index_range(ic, nq, q, &so, &b), ACCEL_OK);
  ck_assert_uint_ge(expect_same_pairs(a, b, 0), nq / 2);
  enum { K = 16 };
  uint64_t *ka = malloc(nq * K * 8), *kb = malloc(nq * K * 8);
  uint32_t *kda = malloc(nq * K * 4), *kdb = malloc(nq * K * 4);
  ck_assert_msg(accel_index_knn(ig, nq, q, K, 0, ka, kda) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_index_knn(ic, nq, q, K, 0, kb, kdb), ACCEL_OK);
  ck_assert(memcmp(ka, kb, nq * K * 8) == 0 && memcmp(kda, kdb, nq * K * 4) == 0);
  expect_gpu_runs(gpu, "index.knn", 1);
  accel_index_destroy(ig);
  accel_index_destroy(ic);
  free(codes);
  free(q);
  free(ids);
  free(ka);
  free(kb);
  free(kda);
  free(kdb);
}
END_TEST

/* A porous volume: random blobs (a smoothed random field, thresholded). */
static uint8_t *porous(int64_t nz, int64_t ny, int64_t nx, uint32_t seed) {
  const uint64_t n = (uint64_t)(nz * ny * nx);
  float *f = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
  uint8_t *r = malloc(n), *m = malloc(n);
  fill_random(r, n, seed);
  for (uint64_t i = 0; i < n; i++) f[i] = r[i];
  for (int pass = 0; pass < 3; pass++) /* a box blur, three times, along all axes */
    for (uint64_t i = 0; i < n; i++) {
      const int64_t x = (int64_t)(i % (uint64_t)nx), y = (int64_t)((i / (uint64_t)nx) % (uint64_t)ny),
                    z = (int64_t)(i / (uint64_t)(nx * ny));
      float acc = 0;
      int cnt = 0;
      for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++)
          for (int dx = -1; dx <= 1; dx++) {
            const int64_t zz = z + dz, yy = y + dy, xx = x + dx;
            if (zz < 0 || yy < 0 || xx < 0 || zz >= nz || yy >= ny || xx >= nx) continue;
            acc += f[(uint64_t)((zz * ny + yy) * nx + xx)];
            cnt++;
          }
      g[i] = acc / (float)cnt;
      if (i + 1 == n) memcpy(f, g, n * sizeof(float));
    }
  for (uint64_t i = 0; i < n; i++) m[i] = (uint8_t)(f[i] > 125.0f); /* about a fifth is pore */
  free(f);
  free(g);
  free(r);
  return m;
}

/* CT stages and the pipeline on the GPU equal the CPU's, whole volumes and,
 * with a small budget, in slabs. */
START_TEST(ct_equals_cpu) {
  const int64_t shape[3] = {48, 57, 70};
  const uint64_t n = 48 * 57 * 70;
  uint8_t *solid = porous(48, 57, 70, 9);
  accel_array s;
  accel_array_init(&s, solid, ACCEL_DTYPE_U8, 3, shape);
  for (int slabs = 0; slabs < 2; slabs++) {
    accel_ctx_options o;
    accel_ctx_options_init(&o, sizeof o);
    o.backend = ACCEL_BACKEND_CUDA;
    o.fallback = ACCEL_FALLBACK_DENY;
    if (slabs) o.device_memory_budget = 400000; /* a few planes */
    accel_ctx *g = NULL;
    ck_assert_int_eq(accel_ctx_create(&o, &g), ACCEL_OK);
    uint8_t *fa = malloc(n), *fb = malloc(n);
    accel_array a8, b8;
    accel_array_init(&a8, fa, ACCEL_DTYPE_U8, 3, shape);
    accel_array_init(&b8, fb, ACCEL_DTYPE_U8, 3, shape);
    for (int conn = 6; conn <= 26; conn += 20) {
      ck_assert_msg(accel_ct_fill_holes(g, &s, (accel_ct_connectivity)conn, &a8) == ACCEL_OK, "%s",
                    accel_last_error(g));
      ck_assert_int_eq(accel_ct_fill_holes(cpu, &s, (accel_ct_connectivity)conn, &b8), ACCEL_OK);
      ck_assert_msg(memcmp(fa, fb, n) == 0, "fill holes differ (slabs %d, connectivity %d)", slabs, conn);
    }
    uint8_t *pores = malloc(n);
    for (uint64_t i = 0; i < n; i++) pores[i] = !solid[i];
    accel_array p;
    accel_array_init(&p, pores, ACCEL_DTYPE_U8, 3, shape);
    float *ea = malloc(n * 4), *eb = malloc(n * 4);
    accel_array ae, be;
    accel_array_init(&ae, ea, ACCEL_DTYPE_F32, 3, shape);
    accel_array_init(&be, eb, ACCEL_DTYPE_F32, 3, shape);
    const double sp[3] = {2.0, 0.5, 0.5};
    ck_assert_msg(accel_ct_edt(g, &p, sp, &ae) == ACCEL_OK, "%s", accel_last_error(g));
    ck_assert_int_eq(accel_ct_edt(cpu, &p, sp, &be), ACCEL_OK);
    ck_assert_msg(memcmp(ea, eb, n * 4) == 0, "edt differs (slabs %d)", slabs);
    if (!slabs) { /* the feature transform (whole volumes only: larger ones are declined to the CPU) */
      int32_t *ia = malloc(n * 12), *ib = malloc(n * 12);
      double *da = malloc(n * 8), *db = malloc(n * 8);
      accel_array aia, bia, ada, bda;
      const int64_t ishape[4] = {3, shape[0], shape[1], shape[2]};
      accel_array_init(&aia, ia, ACCEL_DTYPE_I32, 4, ishape);
      accel_array_init(&bia, ib, ACCEL_DTYPE_I32, 4, ishape);
      accel_array_init(&ada, da, ACCEL_DTYPE_F64, 3, shape);
      accel_array_init(&bda, db, ACCEL_DTYPE_F64, 3, shape);
      ck_assert_msg(accel_ct_feature_transform(g, &p, sp, &aia, &ada) == ACCEL_OK, "%s", accel_last_error(g));
      ck_assert_int_eq(accel_ct_feature_transform(cpu, &p, sp, &bia, &bda), ACCEL_OK);
      ck_assert_msg(memcmp(ia, ib, n * 12) == 0 && memcmp(da, db, n * 8) == 0, "feature transform differs");
      expect_gpu_runs(g, "ct.feature_transform", 1);
      free(ia);
      free(ib);
      free(da);
      free(db);
    }
    int32_t *ma = malloc(n * 4), *mb = malloc(n * 4);
    accel_array am, bm;
    accel_array_init(&am, ma, ACCEL_DTYPE_I32, 3, shape);
    accel_array_init(&bm, mb, ACCEL_DTYPE_I32, 3, shape);
    ck_assert_msg(accel_ct_markers(g, &be, &p, NULL, &am, NULL) == ACCEL_OK, "%s", accel_last_error(g));
    ck_assert_int_eq(accel_ct_markers(cpu, &be, &p, NULL, &bm, NULL), ACCEL_OK);
    ck_assert_msg(memcmp(ma, mb, n * 4) == 0, "markers differ (slabs %d)", slabs);
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.threshold = 0;
    po.pores = ACCEL_CT_PORES_ALL;
    accel_ct_pipeline *pg = NULL, *pc = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(g, &po, &pg), ACCEL_OK);
    ck_assert_int_eq(accel_ct_pipeline_create(cpu, &po, &pc), ACCEL_OK);
    accel_ct_outputs oa, ob;
    accel_ct_outputs_init(&oa, sizeof oa);
    accel_ct_outputs_init(&ob, sizeof ob);
    oa.labels = &am;
    ob.labels = &bm;
    ck_assert_msg(accel_ct_pipeline_run(pg, &s, NULL, &oa) == ACCEL_OK, "%s", accel_last_error(g));
    ck_assert_int_eq(accel_ct_pipeline_run(pc, &s, NULL, &ob), ACCEL_OK);
    ck_assert_msg(memcmp(ma, mb, n * 4) == 0, "pipeline labels differ (slabs %d)", slabs);
    expect_gpu_runs(g, "ct.edt", 1);
    if (!slabs) { /* resident: the input up once (and the window's offsets), the host stages' volumes back */
      accel_stage_stats st;
      accel_stage_stats_init(&st, sizeof st);
      ck_assert_int_eq(accel_ctx_stats_find(g, "ct.pipeline", &st), ACCEL_OK);
      ck_assert_uint_eq(st.bytes_uploaded, n + (uint64_t)(7 * 7 * 7 - 1) * 12);
      ck_assert_uint_eq(st.bytes_downloaded, 10 * n);
    }
    accel_ct_pipeline_destroy(pg);
    accel_ct_pipeline_destroy(pc);
    free(fa);
    free(fb);
    free(pores);
    free(ea);
    free(eb);
    free(ma);
    free(mb);
    accel_ctx_destroy(g);
  }
  free(solid);
}
END_TEST

/* A transform over a fixed image of w x h: a small affine part and a
 * B-spline of spacing 16 with smooth displacements up to amp pixels. */
static accel_reg_transform *reg_transform(int64_t w, int64_t h, double amp) {
  accel_reg_grid g;
  ck_assert_int_eq(accel_reg_grid_for(w, h, 16, &g), ACCEL_OK);
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(t);
  double *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = amp * sin(0.7 * (double)i + (i < n / 2 ? 0.0 : 1.3));
  ck_assert_int_eq(accel_reg_transform_set_parameters(t, p, n), ACCEL_OK);
  free(p);
  const double aff[6] = {1.02, 0.03, -0.025, 0.99, 1.5, -2.25}, centre[2] = {(double)w / 2, (double)h / 2};
  ck_assert_int_eq(accel_reg_transform_set_initial(NULL, t, ACCEL_REG_LINEAR_AFFINE, aff, centre), ACCEL_OK);
  return t;
}

#if EXPECT_CUDA
/* libaccel's CUDA runtime is linked statically into this program: these are
 * its functions, with their C declarations (cudaError_t is an int enum). */
int cudaSetDevice(int device);
int cudaMalloc(void **ptr, size_t size);

/* Leave errors on this thread, as a failed device query or cudaHostAlloc do. */
static void leave_stale_errors(void) {
  void *p = NULL;
  ck_assert_int_ne(cudaSetDevice(1 << 20), 0);          /* cudaErrorInvalidDevice */
  ck_assert_int_ne(cudaMalloc(&p, (size_t)1 << 62), 0); /* cudaErrorMemoryAllocation */
}

int cudaMemcpy(void *dst, const void *src, size_t count, int kind);
int cudaFree(void *ptr);

/* A device copy of n bytes at p (cudaMemcpyHostToDevice = 1). */
static void *device_copy(const void *p, size_t n) {
  void *d = NULL;
  ck_assert_int_eq(cudaMalloc(&d, n), 0);
  ck_assert_int_eq(cudaMemcpy(d, p, n, 1), 0);
  return d;
}

/* The warp of an RGB layer in device memory, linear and cubic (the cubic
 * coefficients made on the device), into device memory: the CPU's warp of
 * the host layer within 1e-4, and the layer never crossed the bus. */
START_TEST(warp_of_device_layers_equals_cpu) {
  enum { H = 211, W = 187, N = H * W * 3 };
  uint8_t *rgb = malloc(N);
  float *want = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) rgb[i] = (uint8_t)((i * 2654435761u) >> 24);
  accel_reg_transform *t = reg_transform(W, H, 2.0);
  void *din = device_copy(rgb, N), *dout = NULL;
  ck_assert_int_eq(cudaMalloc(&dout, sizeof(float) * N), 0);
  accel_array hi, ho, di, dd;
  accel_array_init(&hi, rgb, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_array_init(&ho, want, ACCEL_DTYPE_F32, 3, (int64_t[]){H, W, 3});
  accel_array_init(&di, din, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_array_init(&dd, dout, ACCEL_DTYPE_F32, 3, (int64_t[]){H, W, 3});
  ck_assert_int_eq(accel_array_on_device(&di), ACCEL_OK);
  ck_assert_int_eq(accel_array_on_device(&dd), ACCEL_OK);
  const accel_array *hin[1] = {&hi}, *hout[1] = {&ho}, *din_[1] = {&di}, *dout_[1] = {&dd};
  for (int interp = 1; interp <= 3; interp += 2) {
    accel_reg_warp_options wo;
    accel_reg_warp_options_init(&wo, sizeof wo);
    wo.interp = (accel_reg_interp)interp;
    ck_assert_int_eq(accel_reg_warp(cpu, t, hin, hout, 1, &wo), ACCEL_OK);
    ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
    ck_assert_msg(accel_reg_warp(gpu, t, din_, dout_, 1, &wo) == ACCEL_OK, "%s", accel_last_error(gpu));
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "reg.warp", &st), ACCEL_OK);
    ck_assert_uint_eq(st.gpu_runs, 1);
    ck_assert_uint_eq(st.bytes_downloaded, 0);
    ck_assert_uint_lt(st.bytes_uploaded, (uint64_t)N);                /* the transform only */
    ck_assert_int_eq(cudaMemcpy(got, dout, sizeof(float) * N, 2), 0); /* cudaMemcpyDeviceToHost */
    double d = 0;
    for (int i = 0; i < N; i++) d = fmax(d, fabs((double)got[i] - (double)want[i]));
    printf("warp of device layers (%s): %.3g from the CPU's\n", interp == 1 ? "linear" : "cubic", d);
    ck_assert_msg(d <= 1e-4, "the warp of device layers differs by %g", d);
  }
  ck_assert_int_eq(cudaFree(din), 0);
  ck_assert_int_eq(cudaFree(dout), 0);
  accel_reg_transform_destroy(t);
  free(rgb), free(want), free(got);
}
END_TEST

/* k nearest of queries in device memory into device arrays
 * (accel_index_knn_arrays): the CPU's neighbours and distances, one GPU
 * run, and the queries never crossed the bus whole (only the searched
 * field's words come back, with the candidate lists). */
START_TEST(knn_of_device_queries_equals_cpu) {
  enum { K = 16 };
  const size_t n = 30000, nq = 300;
  uint64_t *codes = malloc(n * 4 * sizeof(uint64_t)), *ids = malloc(n * sizeof(uint64_t));
  make_codes(codes, n, 4, 12); /* two fields of 128 bits */
  for (size_t i = 0; i < n; i++) ids[i] = 3 * i + 1;
  uint64_t *q = malloc(nq * 4 * sizeof(uint64_t));
  memcpy(q, codes + 4 * 1000, nq * 4 * sizeof(uint64_t));
  for (size_t i = 0; i < nq; i += 3) q[i * 4 + 2] ^= 0x10001;
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.bits = 128;
  io.nfields = 2;
  accel_index *ig = NULL, *ic = NULL;
  ck_assert_int_eq(accel_index_create(gpu, &io, &ig), ACCEL_OK);
  ck_assert_int_eq(accel_index_create(cpu, &io, &ic), ACCEL_OK);
  ck_assert_int_eq(accel_index_add(ig, n, ids, codes, NULL, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_index_add(ic, n, ids, codes, NULL, NULL), ACCEL_OK);
  uint64_t *want = malloc(nq * K * 8), *got = malloc(nq * K * 8);
  uint32_t *wd = malloc(nq * K * 4), *gd = malloc(nq * K * 4);
  ck_assert_int_eq(accel_index_knn(ic, nq, q, K, 1, want, wd), ACCEL_OK);
  void *dq = device_copy(q, nq * 4 * 8), *di = NULL, *dd = NULL;
  ck_assert_int_eq(cudaMalloc(&di, nq * K * 8), 0);
  ck_assert_int_eq(cudaMalloc(&dd, nq * K * 4), 0);
  accel_array aq, ai, ad;
  accel_array_init(&aq, dq, ACCEL_DTYPE_U64, 3, (int64_t[]){(int64_t)nq, 2, 2});
  accel_array_init(&ai, di, ACCEL_DTYPE_U64, 2, (int64_t[]){(int64_t)nq, K});
  accel_array_init(&ad, dd, ACCEL_DTYPE_U32, 2, (int64_t[]){(int64_t)nq, K});
  ck_assert_int_eq(accel_array_on_device(&aq), ACCEL_OK);
  ck_assert_int_eq(accel_array_on_device(&ai), ACCEL_OK);
  ck_assert_int_eq(accel_array_on_device(&ad), ACCEL_OK);
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  ck_assert_msg(accel_index_knn_arrays(ig, &aq, K, 1, &ai, &ad) == ACCEL_OK, "%s", accel_last_error(gpu));
  expect_gpu_runs(gpu, "index.knn", 1);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "index.knn", &st), ACCEL_OK);
  /* field 1's codes, the candidate lists' offsets and the results: never the queries */
  ck_assert_uint_le(st.bytes_uploaded, (uint64_t)(n * 2 * 8 + nq * 8 + nq * K * 12));
  ck_assert_int_eq(cudaMemcpy(got, di, nq * K * 8, 2), 0);
  ck_assert_int_eq(cudaMemcpy(gd, dd, nq * K * 4, 2), 0);
  ck_assert_mem_eq(got, want, nq * K * 8);
  ck_assert_mem_eq(gd, wd, nq * K * 4);
  ck_assert_int_eq(cudaFree(dq), 0);
  ck_assert_int_eq(cudaFree(di), 0);
  ck_assert_int_eq(cudaFree(dd), 0);
  accel_index_destroy(ig);
  accel_index_destroy(ic);
  free(codes), free(ids), free(q), free(want), free(got), free(wd), free(gd);
}
END_TEST

/* Small inputs of every domain, and the CPU's answers. */
typedef struct gpu_case {
  int op; /* gray, k nearest, self-join, fill holes, pipeline, sky view factors */
  uint8_t rgb[61 * 83 * 3], gray[61 * 83];
  uint64_t codes[3000 * 2], ids[3000], knn_ids[50 * 7];
  uint32_t knn_dist[50 * 7];
  size_t npairs;
  uint64_t *first, *second;
  uint8_t *vol, *filled;
  int32_t *labels;
  float dsm[40 * 50], sky[40 * 50];
  accel_reg_transform *xf;
  uint8_t warped[47 * 59 * 3];
  float lfixed[40 * 48], lmoving[40 * 48];
  accel_reg_options lo;
  double lparams[128];
} gpu_case;
enum { CASE_GRAY, CASE_KNN, CASE_JOIN, CASE_FILL, CASE_PIPELINE, CASE_SKY, CASE_WARP, CASE_LEVEL, CASES };
static const char *const CASE_STAGE[CASES] = {"image.gray",  "index.knn", "index.join", "ct.fill_holes",
                                              "ct.pipeline", "svf.sky",   "reg.warp",   "reg.level"};
ACCEL__STAGE_FN(run_reg_level, reg, level, job)

/* Two iterations of one level (Gauss-Newton, NCC) on the 40 x 48 images of
 * c, a grid of spacing 16 (c->xf's is over 59 x 47: the level's is its own). */
static accel_status run_level_case(accel_ctx *ctx, gpu_case *c, double *params) {
  accel_reg_grid g;
  accel_reg_transform *t = NULL;
  ck_assert_int_eq(accel_reg_grid_for(48, 40, 16, &g), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_create(NULL, &g, &t), ACCEL_OK);
  ck_assert_int_le(accel_reg_transform_count(t), 128);
  accel_reg_level_report rep;
  accel__reg_level_job job;
  memset(&job, 0, sizeof job);
  job.fixed = c->lfixed, job.moving = c->lmoving;
  job.fixed_width = job.moving_width = 48, job.fixed_height = job.moving_height = 40;
  job.factor = 1;
  accel__reg_xform_of(t, &job.xf);
  memset(params, 0, sizeof c->lparams);
  job.params = params;
  job.xf.params = params;
  job.options = &c->lo;
  job.report = &rep;
  const accel_status s = accel__dispatch(ctx, "reg.level", run_reg_level, &job);
  accel_reg_transform_destroy(t);
  return s;
}
static const int64_t VOL[3] = {24, 29, 31};

static accel_status run_case(accel_ctx *ctx, gpu_case *c, bool keep) {
  accel_status s = ACCEL_OK;
  switch (c->op) {
  case CASE_GRAY: {
    uint8_t out[sizeof c->gray];
    accel_array a, b;
    accel_array_init(&a, c->rgb, ACCEL_DTYPE_U8, 3, (int64_t[]){61, 83, 3});
    accel_array_init(&b, keep ? c->gray : out, ACCEL_DTYPE_U8, 2, (int64_t[]){61, 83});
    s = accel_image_to_gray(ctx, &a, &b);
    if (!s && !keep) ck_assert(memcmp(out, c->gray, sizeof out) == 0);
    break;
  }
  case CASE_KNN:
  case CASE_JOIN: {
    accel_index_options io;
    accel_index_options_init(&io, sizeof io);
    io.bits = 128;
    accel_index *ix = NULL;
    ck_assert_int_eq(accel_index_create(ctx, &io, &ix), ACCEL_OK);
    ck_assert_int_eq(accel_index_add(ix, 3000, c->ids, c->codes, NULL, NULL), ACCEL_OK);
    if (c->op == CASE_KNN) {
      uint64_t ids[50 * 7];
      uint32_t dist[50 * 7];
      s = accel_index_knn(ix, 50, c->codes + 2 * 100, 7, 0, keep ? c->knn_ids : ids, keep ? c->knn_dist : dist);
      if (!s && !keep)
        ck_assert(memcmp(ids, c->knn_ids, sizeof ids) == 0 && memcmp(dist, c->knn_dist, sizeof dist) == 0);
    } else {
      accel_search_options so;
      accel_search_options_init(&so, sizeof so);
      so.thresholds[0] = 30;
      so.algorithm = ACCEL_INDEX_BRUTE_FORCE;
      accel_pairs *p = NULL;
      s = accel_index_self_join(ix, &so, &p);
      if (!s) {
        size_t n;
        const uint64_t *f, *sec;
        accel_pairs_view(p, &n, &f, &sec, NULL, NULL);
        if (keep) {
          c->npairs = n;
          c->first = malloc(n * 8 + 8);
          c->second = malloc(n * 8 + 8);
          memcpy(c->first, f, n * 8);
          memcpy(c->second, sec, n * 8);
        } else {
          ck_assert(n == c->npairs && memcmp(f, c->first, n * 8) == 0 && memcmp(sec, c->second, n * 8) == 0);
        }
      }
      accel_pairs_destroy(p);
    }
    accel_index_destroy(ix);
    break;
  }
  case CASE_FILL:
  case CASE_PIPELINE: {
    const size_t n = (size_t)(VOL[0] * VOL[1] * VOL[2]);
    uint8_t *f8 = malloc(n);
    int32_t *l32 = malloc(n * 4);
    accel_array in, out;
    accel_array_init(&in, c->vol, ACCEL_DTYPE_U8, 3, VOL);
    if (c->op == CASE_FILL) {
      accel_array_init(&out, keep ? c->filled : f8, ACCEL_DTYPE_U8, 3, VOL);
      s = accel_ct_fill_holes(ctx, &in, ACCEL_CT_CORNERS, &out);
      if (!s && !keep) ck_assert(memcmp(f8, c->filled, n) == 0);
    } else {
      accel_ct_pipeline_options po;
      accel_ct_pipeline_options_init(&po, sizeof po);
      po.threshold = 0;
      po.pores = ACCEL_CT_PORES_ALL;
      accel_ct_pipeline *pl = NULL;
      ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &pl), ACCEL_OK);
      accel_ct_outputs o;
      accel_ct_outputs_init(&o, sizeof o);
      accel_array_init(&out, keep ? c->labels : l32, ACCEL_DTYPE_I32, 3, VOL);
      o.labels = &out;
      s = accel_ct_pipeline_run(pl, &in, NULL, &o);
      accel_ct_pipeline_destroy(pl);
      if (!s && !keep) ck_assert(memcmp(l32, c->labels, n * 4) == 0);
    }
    free(f8);
    free(l32);
    break;
  }
  case CASE_WARP: { /* the RGB frame warped, cubic */
    uint8_t out[sizeof c->warped];
    accel_array a, b;
    accel_array_init(&a, c->rgb, ACCEL_DTYPE_U8, 3, (int64_t[]){61, 83, 3});
    accel_array_init(&b, keep ? c->warped : out, ACCEL_DTYPE_U8, 3, (int64_t[]){47, 59, 3});
    accel_reg_warp_options wo;
    accel_reg_warp_options_init(&wo, sizeof wo);
    wo.tile = 32;
    const accel_array *in[1] = {&a}, *o[1] = {&b};
    s = accel_reg_warp(ctx, c->xf, in, o, 1, &wo);
    if (!s && !keep) ck_assert(memcmp(out, c->warped, sizeof out) == 0);
    break;
  }
  case CASE_LEVEL: {
    double p[128];
    s = run_level_case(ctx, c, keep ? c->lparams : p);
    if (!s && !keep) ck_assert(memcmp(p, c->lparams, sizeof p) == 0);
    break;
  }
  default: {
    float out[40 * 50];
    accel_array dsm, o;
    accel_array_init(&dsm, c->dsm, ACCEL_DTYPE_F32, 2, (int64_t[]){40, 50});
    accel_array_init(&o, keep ? c->sky : out, ACCEL_DTYPE_F32, 2, (int64_t[]){40, 50});
    const accel_array *grids[ACCEL_SVF_GRIDS] = {&o};
    accel_svf_options so;
    accel_svf_options_init(&so, sizeof so);
    so.pixel_size = 1;
    so.tile = 24;
    s = accel_svf_sky(ctx, &dsm, NULL, NULL, &so, grids, NULL);
    if (!s && !keep) ck_assert(memcmp(out, c->sky, sizeof out) == 0);
    break;
  }
  }
  return s;
}

static accel_status case_on_gpu(accel_ctx *ctx, void *user) { return run_case(ctx, user, false); }

static gpu_case *make_cases(void) {
  gpu_case *c = calloc(1, sizeof *c);
  fill_random(c->rgb, sizeof c->rgb, 3);
  make_codes(c->codes, 3000, 2, 5);
  for (int i = 0; i < 3000; i++) c->ids[i] = (uint64_t)i * 2654435761u + 1;
  c->vol = porous(VOL[0], VOL[1], VOL[2], 4);
  const size_t n = (size_t)(VOL[0] * VOL[1] * VOL[2]);
  c->filled = malloc(n);
  c->labels = malloc(n * 4);
  for (int i = 0; i < 40 * 50; i++) c->dsm[i] = (float)((i * 7919) % 23 > 18 ? 12 + i % 5 : 1);
  c->xf = reg_transform(59, 47, 3.0);
  for (int i = 0; i < 40 * 48; i++) {
    c->lfixed[i] = (float)(50 + 40 * sin(0.3 * (i % 48)) * cos(0.23 * (i / 48)));
    c->lmoving[i] = (float)(52 + 40 * sin(0.3 * (i % 48) + 0.4) * cos(0.23 * (i / 48) - 0.2));
  }
  accel_reg_options_init(&c->lo, sizeof c->lo);
  c->lo.metric = ACCEL_REG_METRIC_NCC;
  c->lo.iterations = 2;
  c->lo.samples = 600;
  c->lo.validation_samples = 300;
  for (c->op = 0; c->op < CASES; c->op++) ck_assert_int_eq(run_case(cpu, c, true), ACCEL_OK);
  return c;
}

static void free_cases(gpu_case *c) {
  free(c->first);
  free(c->second);
  free(c->vol);
  free(c->filled);
  free(c->labels);
  accel_reg_transform_destroy(c->xf);
  free(c);
}

static accel_ctx *cuda_ctx(accel_fallback_policy policy, log_capture *cap) {
  return make_ctx(ACCEL_BACKEND_CUDA, policy, cap, ACCEL_LOG_WARN);
}

/* Every CUDA call of every stage file, failing on the device in turn: each
 * failure is reported (fallback with the error's name, or the error under
 * DENY), and the stage cleans up after it (compute-sanitizer's memcheck and
 * leak check watch this run in scripts/gpu-check.sh). */
START_TEST(every_failed_call_falls_back_on_the_device) {
  gpu_case *c = make_cases();
  for (c->op = 0; c->op < CASES; c->op++) ck_assert_int_ge(fault_sweep(cuda_ctx, CASE_STAGE[c->op], case_on_gpu, c), 4);
  free_cases(c);
}
END_TEST

/* An error left on the thread by a CUDA call outside any stage (a failed
 * device query, a failed cudaHostAlloc) is no stage's failure: every stage
 * after it runs on the GPU (the policy is DENY). */
START_TEST(a_stale_error_never_fails_the_next_stage) {
  gpu_case *c = make_cases();
  for (c->op = 0; c->op < CASES; c->op++) {
    leave_stale_errors();
    ck_assert_msg(run_case(gpu, c, false) == ACCEL_OK, "%s after a stale error: %s", CASE_STAGE[c->op],
                  accel_last_error(gpu));
  }
  free_cases(c);
}
END_TEST

/* The context's memory pool gives its memory back when a call ends: after a
 * call that used about 270 MB, the device's free memory is what it was (a
 * pool that kept its blocks held up to 90% of the device between calls,
 * starving PyTorch or CuPy in the same process). Not measured under
 * compute-sanitizer (ACCEL_TEST_UNDER_SANITIZER set by scripts/gpu-check.sh). */
START_TEST(device_memory_goes_back_after_each_call) {
  enum { H = 8192, W = 8192 };
  if (getenv("ACCEL_TEST_UNDER_SANITIZER")) { /* compute-sanitizer keeps device memory of its own */
    printf("device_memory_goes_back_after_each_call: not measured under %s\n", getenv("ACCEL_TEST_UNDER_SANITIZER"));
    return;
  }
  uint8_t *src = malloc((size_t)H * W * 3), *dst = malloc((size_t)H * W);
  memset(src, 7, (size_t)H * W * 3);
  accel_array s, d;
  accel_array_init(&s, src, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_array_init(&d, dst, ACCEL_DTYPE_U8, 2, (int64_t[]){H, W});
  accel_device_info before, after;
  accel_device_info_init(&before, sizeof before);
  accel_device_info_init(&after, sizeof after);
  ck_assert_int_eq(accel_device_query(0, &before), ACCEL_OK);
  ck_assert_msg(accel_image_to_gray(gpu, &s, &d) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_device_query(0, &after), ACCEL_OK);
  const double held = ((double)before.free_memory - (double)after.free_memory) / 1048576.0;
  printf("device memory held after a 256 MiB call: %.1f MiB\n", held);
  ck_assert_msg(held < 64, "the context still holds %.1f MiB of device memory after the call", held);
  free(src);
  free(dst);
}
END_TEST
#endif

/* Shadows and sky view factors on the GPU equal the CPU's (a synthetic city
 * of blocks, every grid and matrix, in tiles). */
START_TEST(svf_equals_cpu) {
  enum { R = 150, C = 170, P = 153, MB = (P + 7) / 8 };
  static float dsm[R * C], cdsm[R * C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      const bool block = (r / 11) % 3 == 1 && (c / 13) % 2 == 0; /* rows of buildings */
      dsm[r * C + c] = 10.0f + 0.02f * (float)c + (block ? 6.0f + (float)((r * 31 + c) % 17) : 0.0f);
      cdsm[r * C + c] = (r + c) % 9 == 0 ? 5.0f : 0.0f;
    }
  accel_array ad, ac;
  accel_array_init(&ad, dsm, ACCEL_DTYPE_F32, 2, (int64_t[]){R, C});
  accel_array_init(&ac, cdsm, ACCEL_DTYPE_F32, 2, (int64_t[]){R, C});
  float *ga = malloc(sizeof(float) * R * C * ACCEL_SVF_GRIDS), *gb = malloc(sizeof(float) * R * C * ACCEL_SVF_GRIDS);
  uint8_t *ma = malloc((size_t)R * C * MB * 3), *mb = malloc((size_t)R * C * MB * 3);
  for (int tile = 0; tile <= 64; tile += 64) {
    accel_array oa[ACCEL_SVF_GRIDS], ob[ACCEL_SVF_GRIDS], xa[3], xb[3];
    const accel_array *pa[ACCEL_SVF_GRIDS], *pb[ACCEL_SVF_GRIDS], *qa[3], *qb[3];
    for (int g = 0; g < ACCEL_SVF_GRIDS; g++) {
      accel_array_init(&oa[g], ga + g * R * C, ACCEL_DTYPE_F32, 2, (int64_t[]){R, C});
      accel_array_init(&ob[g], gb + g * R * C, ACCEL_DTYPE_F32, 2, (int64_t[]){R, C});
      pa[g] = &oa[g];
      pb[g] = &ob[g];
    }
    for (int m = 0; m < 3; m++) {
      accel_array_init(&xa[m], ma + m * R * C * MB, ACCEL_DTYPE_U8, 3, (int64_t[]){R, C, MB});
      accel_array_init(&xb[m], mb + m * R * C * MB, ACCEL_DTYPE_U8, 3, (int64_t[]){R, C, MB});
      qa[m] = &xa[m];
      qb[m] = &xb[m];
    }
    accel_svf_options so;
    accel_svf_options_init(&so, sizeof so);
    so.pixel_size = 1;
    so.tile = tile;
    ck_assert_msg(accel_svf_sky(gpu, &ad, &ac, NULL, &so, pa, qa) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_svf_sky(cpu, &ad, &ac, NULL, &so, pb, qb), ACCEL_OK);
    ck_assert_msg(memcmp(ga, gb, sizeof(float) * R * C * ACCEL_SVF_GRIDS) == 0, "sky view factors differ (tile %d)",
                  tile);
    ck_assert_msg(memcmp(ma, mb, (size_t)R * C * MB * 3) == 0, "visibility matrices differ (tile %d)", tile);
    ck_assert_int_eq(accel_svf_shadows(gpu, &ad, &ac, NULL, 247.5, 12, &so, &oa[0], &oa[1], &oa[2]), ACCEL_OK);
    ck_assert_int_eq(accel_svf_shadows(cpu, &ad, &ac, NULL, 247.5, 12, &so, &ob[0], &ob[1], &ob[2]), ACCEL_OK);
    ck_assert_msg(memcmp(ga, gb, sizeof(float) * R * C * 3) == 0, "shadows differ (tile %d)", tile);
  }
  /* the matrices a byte a patch: the CPU's bytes, and the bit-packed ones' bits */
  uint8_t *ua = malloc((size_t)R * C * P), *ub = malloc((size_t)R * C * P);
  accel_array xa, xb;
  accel_array_init(&xa, ua, ACCEL_DTYPE_U8, 3, (int64_t[]){R, C, P});
  accel_array_init(&xb, ub, ACCEL_DTYPE_U8, 3, (int64_t[]){R, C, P});
  const accel_array *qa[3] = {&xa}, *qb[3] = {&xb};
  accel_svf_options so;
  accel_svf_options_init(&so, sizeof so);
  so.pixel_size = 1;
  ck_assert_msg(accel_svf_sky(gpu, &ad, &ac, NULL, &so, NULL, qa) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_svf_sky(cpu, &ad, &ac, NULL, &so, NULL, qb), ACCEL_OK);
  ck_assert_msg(memcmp(ua, ub, (size_t)R * C * P) == 0, "unpacked visibility matrices differ");
  for (int64_t i = 0; i < (int64_t)R * C * P; i++)
    ck_assert_int_eq(ua[i], (ma[i / P * MB + i % P / 8] >> (i % P % 8)) & 1); /* the last tile's bit-packed sh */
  expect_gpu_runs(gpu, "svf.sky", 3);
  free(ga);
  free(gb);
  free(ma);
  free(mb);
  free(ua);
  free(ub);
}
END_TEST

/* ctx ran `stage` on the GPU (at least once) and never fell back. */
static void expect_on_gpu(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  ck_assert_msg(st.gpu_runs > 0 && st.fallbacks == 0, "%s: %llu GPU runs, %llu fallbacks", stage,
                (unsigned long long)st.gpu_runs, (unsigned long long)st.fallbacks);
}

/* The mean distance between a transform's field and the truth's over an
 * image of w x h. */
static double field_error(const accel_reg_transform *t, const accel_reg_transform *truth, int64_t w, int64_t h) {
  float *a = malloc(sizeof(float) * 2 * (size_t)(w * h)), *b = malloc(sizeof(float) * 2 * (size_t)(w * h));
  accel_array fa, fb;
  accel_array_init(&fa, a, ACCEL_DTYPE_F32, 3, (int64_t[]){2, h, w});
  accel_array_init(&fb, b, ACCEL_DTYPE_F32, 3, (int64_t[]){2, h, w});
  ck_assert_int_eq(accel_reg_transform_field(NULL, t, 0, 0, &fa), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_field(NULL, truth, 0, 0, &fb), ACCEL_OK);
  double sum = 0;
  for (int64_t i = 0; i < w * h; i++) sum += hypot(a[i] - b[i], a[w * h + i] - b[w * h + i]);
  free(a);
  free(b);
  return sum / (double)(w * h);
}

/* Registration and warping on the GPU equal the CPU's: a pair whose fixed
 * image is the moving one warped by a known transform, registered in two
 * levels on each; the parameters equal to rounding, so the registration
 * error against the truth is the same, and warps with one transform (linear
 * and cubic, F32 out) within 1e-4. */
START_TEST(reg_equals_cpu) {
  enum { H = 200, W = 232 };
  float *moving = malloc(sizeof(float) * H * W), *fixed = malloc(sizeof(float) * H * W);
  float *wa = malloc(sizeof(float) * H * W), *wb = malloc(sizeof(float) * H * W);
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++)
      moving[r * W + c] = (float)(100 + 60 * sin(0.11 * c) * cos(0.07 * r) + 40 * sin(0.031 * (c + 2 * r)) +
                                  25 * ((r / 9 + c / 11) % 2));
  accel_reg_transform *truth = reg_transform(W, H, 2.5), *tg = NULL, *tc = NULL;
  accel_array am, af, aa, ab;
  accel_array_init(&am, moving, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&af, fixed, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&aa, wa, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  accel_array_init(&ab, wb, ACCEL_DTYPE_F32, 2, (int64_t[]){H, W});
  const accel_array *in[1] = {&am}, *out_f[1] = {&af}, *out_a[1] = {&aa}, *out_b[1] = {&ab};
  accel_reg_warp_options wo;
  accel_reg_warp_options_init(&wo, sizeof wo);
  ck_assert_int_eq(accel_reg_warp(cpu, truth, in, out_f, 1, &wo), ACCEL_OK);
  accel_reg_options o;
  accel_reg_options_init(&o, sizeof o);
  o.levels = 2;
  o.grid_spacing = 32;
  o.iterations = 30;
  o.samples = 3000;
  o.tolerance = 0;
  ck_assert_msg(accel_reg_register(gpu, &af, &am, NULL, NULL, &o, &tg, NULL) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_reg_register(cpu, &af, &am, NULL, NULL, &o, &tc, NULL), ACCEL_OK);
  const int64_t n = accel_reg_transform_count(tc);
  double *pg = malloc(sizeof(double) * (size_t)n), *pc = malloc(sizeof(double) * (size_t)n), dp = 0;
  ck_assert_int_eq(accel_reg_transform_parameters(tg, pg, n), ACCEL_OK);
  ck_assert_int_eq(accel_reg_transform_parameters(tc, pc, n), ACCEL_OK);
  for (int64_t i = 0; i < n; i++) dp = fmax(dp, fabs(pg[i] - pc[i]));
  const double eg = field_error(tg, truth, W, H), ec = field_error(tc, truth, W, H);
  printf("reg: parameters differ by at most %.3g px; field error GPU %.6f px, CPU %.6f px\n", dp, eg, ec);
  ck_assert_msg(dp < 1e-6 && fabs(eg - ec) < 1e-6, "GPU and CPU registrations differ: %g px, errors %g and %g", dp, eg,
                ec);
  for (int interp = 1; interp <= 3; interp += 2) {
    wo.interp = (accel_reg_interp)interp;
    ck_assert_msg(accel_reg_warp(gpu, tc, in, out_a, 1, &wo) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_reg_warp(cpu, tc, in, out_b, 1, &wo), ACCEL_OK);
    for (int i = 0; i < H * W; i++) ck_assert_msg(fabsf(wa[i] - wb[i]) <= 1e-4f, "warp differs at %d", i);
  }
  expect_on_gpu(gpu, "reg.level"); /* the pyramid runs inside it, on the device */
  expect_on_gpu(gpu, "reg.warp");
  free(pg);
  free(pc);
  accel_reg_transform_destroy(tg);
  accel_reg_transform_destroy(tc);
  accel_reg_transform_destroy(truth);
  free(moving);
  free(fixed);
  free(wa);
  free(wb);
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
  tcase_add_test(tc, index_join_equals_cpu);
  tcase_add_test(tc, index_range_and_knn_equal_cpu);
  tcase_add_test(tc, ct_equals_cpu);
  tcase_add_test(tc, svf_equals_cpu);
  tcase_add_test(tc, reg_equals_cpu);
#if EXPECT_CUDA
  tcase_add_test(tc, every_failed_call_falls_back_on_the_device);
  tcase_add_test(tc, a_stale_error_never_fails_the_next_stage);
  tcase_add_test(tc, device_memory_goes_back_after_each_call);
  tcase_add_test(tc, warp_of_device_layers_equals_cpu);
  tcase_add_test(tc, knn_of_device_queries_equals_cpu);
#endif
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  clear_accel_env();
  accel_backend_info b;
  accel_backend_info_init(&b, sizeof b);
  accel_backend_query(ACCEL_BACKEND_CUDA, &b);
  if (!b.available) {
    printf("SKIP: no CUDA device: %s\n", b.reason);
    return 77;
  }
  setenv("CK_FORK", "no", 1); /* this process has initialized CUDA: children could not use it */
  return run_suite(suite_gpu());
}
