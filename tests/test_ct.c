/* suite_ct: the CT stages and pipeline against SciPy 1.10 / scikit-image
 * 0.19.3 reference outputs (tests/data/ct, copied from ../shared/data/ct),
 * and against straightforward implementations written here (brute-force
 * distances, a breadth-first fill), on random volumes.
 *
 *   test_ct            the committed fixtures and the synthetic checks
 *   test_ct --shared   every folder of ../shared/data/ct (exit 77, skipped,
 *                      when ../shared is absent)
 */
#include "emulated_gpu.h"
#include "testutil.h"

#include "ct/ct.h"
#include "ct/ops.h"

/* The GPU's union-find, its retries counted, and in every other round a
 * yield between a union's finds and its link, so that other threads link
 * the same roots meanwhile even on a loaded machine with few cores
 * (gpu_union_find_with_threads). */
#include <sched.h>
static uint64_t uf_retries;
static int uf_yield;
#define ACCEL__UF_RETRY() ((void)__atomic_add_fetch(&uf_retries, 1, __ATOMIC_RELAXED))
#define ACCEL__UF_BEFORE_LINK() ((void)(uf_yield && sched_yield()))
#include "ct/union_find.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------ fixtures */

typedef struct fixture {
  char dir[512], name[128];
  double threshold, spacing[3];
  accel_ct_pores pores;
  accel_buffer *input, *filled, *pores_ref, *edt, *markers, *labels;
  accel__dims d;
  uint64_t n;
} fixture;

/* The fixture's volumes, in the order of the files they are loaded from. */
enum { FIXTURE_VOLUMES = 6 };
static const char *const FIXTURE_FILES[FIXTURE_VOLUMES] = {"input", "filled", "pores", "edt", "markers", "labels"};

static accel_buffer **fixture_volume(fixture *fx, int k) {
  accel_buffer **const volume[FIXTURE_VOLUMES] = {&fx->input, &fx->filled,  &fx->pores_ref,
                                                  &fx->edt,   &fx->markers, &fx->labels};
  return volume[k];
}

static void load_fixture(fixture *fx, const char *root, const char *name) {
  memset(fx, 0, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/%s", root, name);
  snprintf(fx->name, sizeof fx->name, "%s", name);
  char path[1024], line[256];
  snprintf(path, sizeof path, "%s/meta.txt", fx->dir);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s", path);
  while (fgets(line, sizeof line, f)) {
    double a, b, c;
    char mode[32];
    if (sscanf(line, "threshold %lf", &a) == 1) fx->threshold = a;
    if (sscanf(line, "sampling (%lf, %lf, %lf)", &a, &b, &c) == 3) {
      fx->spacing[0] = a;
      fx->spacing[1] = b;
      fx->spacing[2] = c;
    }
    if (sscanf(line, "pores %31s", mode) == 1)
      fx->pores = strcmp(mode, "all") == 0 ? ACCEL_CT_PORES_ALL : ACCEL_CT_PORES_CLOSED;
  }
  fclose(f);
  ck_assert(fx->spacing[0] > 0);
  for (int k = 0; k < FIXTURE_VOLUMES; k++) *fixture_volume(fx, k) = must_load(fx->dir, FIXTURE_FILES[k]);
  accel_array in = view_of(fx->input);
  fx->d = (accel__dims){in.shape[0], in.shape[1], in.shape[2]};
  fx->n = accel__dims_count(fx->d);
}

static void free_fixture(fixture *fx) {
  for (int k = 0; k < FIXTURE_VOLUMES; k++) accel_buffer_destroy(*fixture_volume(fx, k));
}

static accel_array new_volume(void **data, accel_dtype dt, accel__dims d) {
  *data = calloc(accel__dims_count(d) ? accel__dims_count(d) : 1, accel_dtype_size(dt));
  return array_of(*data, dt, 3, (const int64_t[]){d.nz, d.ny, d.nx});
}

/* Every stage of one fixture against its references, then the pipeline. */
static void check_fixture(accel_ctx *ctx, fixture *fx, bool stable_too) {
  const uint64_t n = fx->n;
  accel_array in = view_of(fx->input), ref_filled = view_of(fx->filled), ref_pores = view_of(fx->pores_ref),
              ref_edt = view_of(fx->edt), ref_markers = view_of(fx->markers), ref_labels = view_of(fx->labels);
  void *solid_d, *filled_d, *pores_d, *edt_d, *markers_d, *labels_d;
  accel_array solid = new_volume(&solid_d, ACCEL_DTYPE_U8, fx->d),
              filled = new_volume(&filled_d, ACCEL_DTYPE_U8, fx->d),
              pores = new_volume(&pores_d, ACCEL_DTYPE_U8, fx->d), edt = new_volume(&edt_d, ACCEL_DTYPE_F32, fx->d),
              markers = new_volume(&markers_d, ACCEL_DTYPE_I32, fx->d),
              labels = new_volume(&labels_d, ACCEL_DTYPE_I32, fx->d);
  /* threshold + fill holes */
  ck_assert_int_eq(accel_ct_threshold(ctx, &in, fx->threshold, ACCEL_CT_GREATER, &solid), ACCEL_OK);
  ck_assert_msg(accel_ct_fill_holes(ctx, &solid, ACCEL_CT_FACES, &filled) == ACCEL_OK, "%s", accel_last_error(ctx));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; i++) bad += ((uint8_t *)filled_d)[i] != ((uint8_t *)ref_filled.data)[i];
  ck_assert_msg(bad == 0, "%s: filled differs at %llu voxels", fx->name, (unsigned long long)bad);
  const uint8_t *s = solid_d, *fl = filled_d;
  uint8_t *p = pores_d;
  for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)(fx->pores == ACCEL_CT_PORES_ALL ? !s[i] : fl[i] && !s[i]);
  ck_assert_msg(memcmp(p, ref_pores.data, n) == 0, "%s: pores differ", fx->name);
  /* EDT of the reference pores: within 1e-5 relative (in fact identical) */
  ck_assert_int_eq(accel_ct_edt(ctx, &ref_pores, fx->spacing, &edt), ACCEL_OK);
  uint64_t exact = 0;
  for (uint64_t i = 0; i < n; i++) {
    const float a = ((float *)edt_d)[i], b = ((float *)ref_edt.data)[i];
    EXPECT(fabsf(a - b) <= 1e-5f * fabsf(b), "%s: edt[%llu] = %.9g, SciPy %.9g", fx->name, (unsigned long long)i,
           (double)a, (double)b);
    exact += a == b;
  }
  ck_assert_msg(exact == n, "%s: edt not bit-identical at %llu voxels", fx->name, (unsigned long long)(n - exact));
  /* markers from the reference distance map */
  uint32_t count = 0;
  ck_assert_msg(accel_ct_markers(ctx, &ref_edt, &ref_pores, NULL, &markers, &count) == ACCEL_OK, "%s",
                accel_last_error(ctx));
  bad = 0;
  int32_t refmax = 0;
  for (uint64_t i = 0; i < n; i++) {
    bad += ((int32_t *)markers_d)[i] != ((int32_t *)ref_markers.data)[i];
    if (((int32_t *)ref_markers.data)[i] > refmax) refmax = ((int32_t *)ref_markers.data)[i];
  }
  ck_assert_msg(bad == 0, "%s: markers differ at %llu voxels", fx->name, (unsigned long long)bad);
  ck_assert_uint_eq(count, (uint32_t)refmax);
  /* watershed of -edt from the reference markers */
  float *neg = malloc(n * sizeof(float));
  for (uint64_t i = 0; i < n; i++) neg[i] = -((float *)ref_edt.data)[i];
  accel_array nega;
  const int64_t shape[3] = {fx->d.nz, fx->d.ny, fx->d.nx};
  accel_array_init(&nega, neg, ACCEL_DTYPE_F32, 3, shape);
  ck_assert_msg(accel_ct_watershed(ctx, &nega, &ref_markers, &ref_pores, NULL, &labels) == ACCEL_OK, "%s",
                accel_last_error(ctx));
  bad = 0;
  for (uint64_t i = 0; i < n; i++) bad += ((int32_t *)labels_d)[i] != ((int32_t *)ref_labels.data)[i];
  ck_assert_msg(bad == 0, "%s: labels differ at %llu voxels", fx->name, (unsigned long long)bad);
  if (stable_too) { /* the stable tie rule: equal-valued markers in C order */
    accel_ct_watershed_options wo;
    accel_ct_watershed_options_init(&wo, sizeof wo);
    wo.ties = ACCEL_CT_TIES_STABLE;
    ck_assert_int_eq(accel_ct_watershed(ctx, &nega, &ref_markers, &ref_pores, &wo, &labels), ACCEL_OK);
    uint64_t pore = 0, differ = 0;
    for (uint64_t i = 0; i < n; i++) {
      pore += ((uint8_t *)ref_pores.data)[i] != 0;
      differ += ((int32_t *)labels_d)[i] != ((int32_t *)ref_labels.data)[i];
    }
    ck_assert_msg((double)differ <= 0.001 * (double)pore, "%s: stable ties differ at %llu of %llu pore voxels",
                  fx->name, (unsigned long long)differ, (unsigned long long)pore);
  }
  free(neg);
  /* the pipeline, end to end */
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  po.threshold = fx->threshold;
  po.pores = fx->pores;
  memcpy(po.spacing, fx->spacing, sizeof po.spacing);
  accel_ct_pipeline *pl = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &pl), ACCEL_OK);
  memset(filled_d, 7, n);
  memset(pores_d, 7, n);
  memset(edt_d, 0, n * 4);
  memset(markers_d, 0, n * 4);
  memset(labels_d, 0, n * 4);
  accel_ct_outputs out;
  accel_ct_outputs_init(&out, sizeof out);
  out.filled = &filled;
  out.pores = &pores;
  out.edt = &edt;
  out.markers = &markers;
  out.labels = &labels;
  accel_ct_network *net = NULL;
  out.network = &net;
  ck_assert_msg(accel_ct_pipeline_run(pl, &in, NULL, &out) == ACCEL_OK, "%s", accel_last_error(ctx));
  ck_assert_msg(memcmp(filled_d, ref_filled.data, n) == 0, "%s: pipeline filled differs", fx->name);
  ck_assert_msg(memcmp(pores_d, ref_pores.data, n) == 0, "%s: pipeline pores differ", fx->name);
  ck_assert_msg(memcmp(edt_d, ref_edt.data, n * 4) == 0, "%s: pipeline edt differs", fx->name);
  ck_assert_msg(memcmp(markers_d, ref_markers.data, n * 4) == 0, "%s: pipeline markers differ", fx->name);
  ck_assert_msg(memcmp(labels_d, ref_labels.data, n * 4) == 0, "%s: pipeline labels differ", fx->name);
  ck_assert_uint_eq(out.marker_count, (uint32_t)refmax);
  size_t nreg = 0;
  ck_assert_int_eq(accel_ct_network_info(net, &nreg, NULL, NULL), ACCEL_OK);
  ck_assert_uint_eq(nreg, (size_t)refmax);
  accel_ct_network_destroy(net);
  accel_ct_pipeline_destroy(pl);
  free(solid_d);
  free(filled_d);
  free(pores_d);
  free(edt_d);
  free(markers_d);
  free(labels_d);
}

static const char *const COMMITTED[] = {"berea_pore", "food_aniso_64x96x80_s1"};

/* The fixture `root`/`name`, on the CPU, against its references. */
static void fixture_equals_the_references(const char *root, const char *name) {
  accel_ctx *ctx = cpu_ctx();
  fixture fx;
  load_fixture(&fx, root, name);
  check_fixture(ctx, &fx, true);
  free_fixture(&fx);
  accel_ctx_destroy(ctx);
}

START_TEST(committed_fixtures_equal_the_references) {
  fixture_equals_the_references(TEST_DATA_DIR "/ct", COMMITTED[_i]);
}
END_TEST

static const char *const SHARED[] = {"berea_pore", "food_64x96x80_s1", "food_aniso_64x96x80_s1"};

START_TEST(shared_fixtures_equal_the_references) { fixture_equals_the_references(SHARED_DATA_DIR "/ct", SHARED[_i]); }
END_TEST

static Suite *suite_ct_shared(void) {
  return single_test_suite("ct_shared", "shared", 600, shared_fixtures_equal_the_references, 3);
}

static const shared_run CT_SHARED = {"--shared", SHARED_DATA_DIR "/ct/berea_pore/labels.npy", SHARED_DATA_DIR "/ct",
                                     suite_ct_shared};

static uint64_t rng = 1;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* SNOW's trims against PoreSpy 3.2.0 (tests/data/ct/make_trim_refs.py) on
 * berea_pore: of the reference markers and of a denser peak set with
 * touching peaks, each trim alone and both; then the same through
 * accel_ct_markers and the pipeline. */
START_TEST(trims_equal_porespy) {
  accel_ctx *ctx = cpu_ctx();
  const char *dir = TEST_DATA_DIR "/ct/berea_pore";
  accel_buffer *edt_b = must_load(dir, "edt"), *pores_b = must_load(dir, "pores"), *input_b = must_load(dir, "input");
  accel_array edt = view_of(edt_b), pores = view_of(pores_b), input = view_of(input_b);
  const accel__dims d = {edt.shape[0], edt.shape[1], edt.shape[2]};
  const uint64_t n = accel__dims_count(d);
  void *out_d;
  accel_array out = new_volume(&out_d, ACCEL_DTYPE_I32, d);
  static const struct {
    const char *peaks, *ref;
    uint32_t trim;
  } cases[] = {
      {"markers", "trim_saddles", ACCEL_CT_TRIM_SADDLES},
      {"markers", "trim_nearby", ACCEL_CT_TRIM_NEARBY},
      {"markers", "trim_both", ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY},
      {"peaks_md1", "trim_saddles_md1", ACCEL_CT_TRIM_SADDLES},
      {"peaks_md1", "trim_nearby_md1", ACCEL_CT_TRIM_NEARBY},
      {"peaks_md1", "trim_both_md1", ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    accel_buffer *pk_b = must_load(dir, cases[c].peaks), *ref_b = must_load(dir, cases[c].ref);
    accel_array pk = view_of(pk_b), ref = view_of(ref_b);
    accel_ct_marker_options mo;
    accel_ct_marker_options_init(&mo, sizeof mo);
    mo.trim = cases[c].trim;
    uint32_t count = 0;
    ck_assert_msg(accel_ct_trim_markers(ctx, &edt, &pk, &mo, &out, &count) == ACCEL_OK, "%s", accel_last_error(ctx));
    uint64_t bad = 0, peaks_in = 0;
    int32_t refmax = 0;
    for (uint64_t i = 0; i < n; i++) {
      bad += ((int32_t *)out_d)[i] != ((int32_t *)ref.data)[i];
      peaks_in += ((int32_t *)pk.data)[i] != 0;
      if (((int32_t *)ref.data)[i] > refmax) refmax = ((int32_t *)ref.data)[i];
    }
    ck_assert_msg(bad == 0, "%s of %s: differs from PoreSpy at %llu voxels", cases[c].ref, cases[c].peaks,
                  (unsigned long long)bad);
    ck_assert_uint_eq(count, (uint32_t)refmax);
    ck_assert_msg(count < peaks_in, "%s: the fixture must exercise the trim", cases[c].ref); /* not vacuous */
    /* in place (out aliasing the markers) */
    ck_assert_int_eq(accel_ct_trim_markers(ctx, &edt, &pk, &mo, &pk, NULL), ACCEL_OK);
    ck_assert_msg(memcmp(pk.data, ref.data, n * 4) == 0, "%s in place differs", cases[c].ref);
    accel_buffer_destroy(pk_b);
    accel_buffer_destroy(ref_b);
  }
  /* the peak search with both trims, and the pipeline */
  accel_buffer *ref_b = must_load(dir, "trim_both");
  accel_array ref = view_of(ref_b);
  accel_ct_marker_options mo;
  accel_ct_marker_options_init(&mo, sizeof mo);
  mo.trim = ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY;
  uint32_t count = 0;
  ck_assert_int_eq(accel_ct_markers(ctx, &edt, &pores, &mo, &out, &count), ACCEL_OK);
  ck_assert_msg(memcmp(out_d, ref.data, n * 4) == 0, "markers with trims differ from PoreSpy");
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  po.threshold = 0;
  po.pores = ACCEL_CT_PORES_ALL;
  po.trim = mo.trim;
  accel_ct_pipeline *pl = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &pl), ACCEL_OK);
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  memset(out_d, 0, n * 4);
  o.markers = &out;
  ck_assert_msg(accel_ct_pipeline_run(pl, &input, NULL, &o) == ACCEL_OK, "%s", accel_last_error(ctx));
  ck_assert_msg(memcmp(out_d, ref.data, n * 4) == 0, "pipeline markers with trims differ from PoreSpy");
  ck_assert_uint_eq(o.marker_count, count);
  accel_ct_pipeline_destroy(pl);
  /* bad options */
  mo.trim = 4;
  ck_assert_int_eq(accel_ct_trim_markers(ctx, &edt, &out, &mo, &out, NULL), ACCEL_ERR_INVALID_ARG);
  mo.trim = ACCEL_CT_TRIM_SADDLES;
  mo.saddle_iterations = 0;
  ck_assert_int_eq(accel_ct_trim_markers(ctx, &edt, &out, &mo, &out, NULL), ACCEL_ERR_INVALID_ARG);
  mo.saddle_iterations = 20;
  mo.nearby_factor = -1;
  ck_assert_int_eq(accel_ct_markers(ctx, &edt, &pores, &mo, &out, NULL), ACCEL_ERR_INVALID_ARG);
  accel_buffer_destroy(ref_b);
  accel_buffer_destroy(edt_b);
  accel_buffer_destroy(pores_b);
  accel_buffer_destroy(input_b);
  free(out_d);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The nearby trim's neighbour search against all pairs, on random peaks
 * with anisotropic spacing: nearest (ties to the lowest number) and the
 * drop rule, written out directly. */
START_TEST(nearby_trim_equals_all_pairs) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {23, 41, 37};
  const uint64_t n = accel__dims_count(d);
  void *map_d, *pk_d, *out_d;
  accel_array map = new_volume(&map_d, ACCEL_DTYPE_F32, d), pk = new_volume(&pk_d, ACCEL_DTYPE_I32, d),
              out = new_volume(&out_d, ACCEL_DTYPE_I32, d);
  float *m = map_d;
  int32_t *p = pk_d;
  for (int round = 0; round < 20; round++) {
    /* isolated single-voxel peaks (no two within a 3x3x3 cube) */
    memset(p, 0, n * 4);
    for (uint64_t i = 0; i < n; i++) m[i] = (float)(rnd() % 40) * 0.25f;
    uint32_t want = 5 + rnd() % 300, np = 0;
    int64_t pz[400], py[400], px[400];
    for (uint32_t t = 0; t < want * 4 && np < want; t++) {
      const int64_t z = rnd() % d.nz, y = rnd() % d.ny, x = rnd() % d.nx;
      bool near = false;
      for (uint32_t k = 0; k < np; k++)
        near = near || (llabs(pz[k] - z) <= 1 && llabs(py[k] - y) <= 1 && llabs(px[k] - x) <= 1);
      if (near) continue;
      pz[np] = z;
      py[np] = y;
      px[np] = x;
      np++;
      p[(z * d.ny + y) * d.nx + x] = 1;
    }
    /* numbered in C order, as the groups are */
    uint32_t order[400], k2 = 0;
    for (uint64_t i = 0; i < n; i++)
      if (p[i])
        for (uint32_t k = 0; k < np; k++)
          if ((uint64_t)((pz[k] * d.ny + py[k]) * d.nx + px[k]) == i) order[k2++] = k;
    const double sp[3] = {1.5, 1.0, 0.5}, f = 0.5 + (rnd() % 8) * 0.25;
    bool drop[400] = {false};
    for (uint32_t a = 0; a < np; a++) {
      const uint32_t i = order[a];
      double best = INFINITY;
      uint32_t who = UINT32_MAX;
      for (uint32_t b = 0; b < np; b++) {
        if (b == a) continue;
        const uint32_t j = order[b];
        const double dz = (double)(pz[j] - pz[i]) * sp[0], dy = (double)(py[j] - py[i]) * sp[1],
                     dx = (double)(px[j] - px[i]) * sp[2], q = dz * dz + dy * dy + dx * dx;
        if (q < best) { /* b ascending: the first of equals is the lowest */
          best = q;
          who = b;
        }
      }
      if (who == UINT32_MAX) continue;
      const double La = (double)m[(pz[i] * d.ny + py[i]) * d.nx + px[i]] + a * 1e-6;
      const uint32_t j = order[who];
      const double Lb = (double)m[(pz[j] * d.ny + py[j]) * d.nx + px[j]] + who * 1e-6;
      if (sqrt(best) <= f * La) drop[La < Lb ? a : who] = true;
    }
    accel_ct_marker_options mo;
    accel_ct_marker_options_init(&mo, sizeof mo);
    mo.trim = ACCEL_CT_TRIM_NEARBY;
    mo.nearby_factor = f;
    memcpy(mo.spacing, sp, sizeof sp);
    uint32_t count = 0;
    ck_assert_int_eq(accel_ct_trim_markers(ctx, &map, &pk, &mo, &out, &count), ACCEL_OK);
    uint32_t next = 0;
    for (uint32_t a = 0; a < np; a++) {
      const uint32_t i = order[a];
      const int32_t got = ((int32_t *)out_d)[(pz[i] * d.ny + py[i]) * d.nx + px[i]];
      EXPECT(got == (drop[a] ? 0 : (int32_t)++next), "round %d peak %u: %d", round, a, got);
    }
    ck_assert_uint_eq(count, next);
  }
  free(map_d);
  free(pk_d);
  free(out_d);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ synthetic checks */

/* The EDT against every pair (foreground voxel, background voxel), in double. */
/* ------------------------------------------------------------ the GPU's union-find with threads */

typedef struct uf_worker {
  uint32_t *label;
  const uint32_t *edges;     /* pairs */
  size_t first, count, step; /* this thread's edges: first, first + step, ... */
  uint32_t lo, hi;           /* and elements to flatten */
  pthread_barrier_t *sync;
} uf_worker;

static void *uf_work(void *arg) {
  const uf_worker *w = arg;
  pthread_barrier_wait(w->sync);
  for (size_t e = w->first; e < w->count; e += w->step) accel__uf_unite(w->label, w->edges[2 * e], w->edges[2 * e + 1]);
  pthread_barrier_wait(w->sync); /* every union done: the end of the merge kernel */
  for (uint32_t x = w->lo; x < w->hi; x++) accel__uf_flatten(w->label, x);
  return NULL;
}

static uint32_t seq_find(const uint32_t *p, uint32_t x) {
  while (p[x] != x) x = p[x];
  return x;
}

/* lib/ct/union_find.h (the GPU's components, fill holes and the peak
 * search) run by 8 threads at once, then flattened concurrently: every
 * element ends labelled with the smallest element of its component, as a
 * sequential union-find finds. Each edge is united once, so a lost link
 * shows. The edges join each element of a group to the group's last one, in
 * random order, the threads taking turns along them (as neighbouring voxels
 * of a warp meet the same component): threads often race to link the same
 * root, so the branch where another thread linked it meanwhile is taken. */
START_TEST(gpu_union_find_with_threads) {
  enum { N = 8192, G = 64, E = N - N / G, T = 8 };
  static uint32_t label[N], ref[N], edges[2 * E];
  uint64_t x = 12345;
  uf_retries = 0;
  int rounds = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (; rounds < 500 && (rounds < 20 || __atomic_load_n(&uf_retries, __ATOMIC_RELAXED) < 10); rounds++) {
    uf_yield = rounds % 2; /* tight races, then races made likely */
    size_t e = 0;
    for (uint32_t g = 0; g < N; g += G) {
      const size_t first = e;
      for (uint32_t i = 0; i + 1 < G; i++, e++) {
        edges[2 * e] = g + i;
        edges[2 * e + 1] = g + G - 1;
      }
      for (size_t k = e - first; k > 1; k--) { /* shuffle the group's edges */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const size_t j = first + (size_t)(x % k), l = first + k - 1;
        const uint32_t t = edges[2 * j];
        edges[2 * j] = edges[2 * l];
        edges[2 * l] = t;
        if (x >> 63) { /* either end first */
          edges[2 * l + 1] = edges[2 * l];
          edges[2 * l] = g + G - 1;
        }
      }
    }
    for (uint32_t i = 0; i < N; i++) label[i] = ref[i] = i;
    for (e = 0; e < E; e++) { /* the reference: the smaller root wins */
      const uint32_t ra = seq_find(ref, edges[2 * e]), rb = seq_find(ref, edges[2 * e + 1]);
      if (ra != rb) ref[ra > rb ? ra : rb] = ra < rb ? ra : rb;
    }
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, T);
    pthread_t th[T];
    uf_worker w[T];
    for (int t = 0; t < T; t++) {
      w[t] = (uf_worker){label, edges, (size_t)t, E, T, (uint32_t)(t * N / T), (uint32_t)((t + 1) * N / T), &sync};
      ck_assert_int_eq(pthread_create(&th[t], NULL, uf_work, &w[t]), 0);
    }
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&sync);
    for (uint32_t i = 0; i < N; i++)
      EXPECT(label[i] == seq_find(ref, i), "round %d: element %u labelled %u, its component's smallest is %u", rounds,
             i, label[i], seq_find(ref, i));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("union-find: %d rounds of %d threads in %.2f s, %llu unions went on after a concurrent link\n", rounds, T,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), (unsigned long long)uf_retries);
  ck_assert_msg(uf_retries > 0, "no union ever found its root linked by another thread in %d rounds", rounds);
}
END_TEST

/* The feature transform: every index names a zero voxel at the brute-force
 * nearest distance, and the F64 distances are the indices' own (SciPy's
 * exact tie choice is checked against SciPy in tests/python/test_edt_scipy.py). */
START_TEST(feature_transform_equals_brute_force) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {9, 11, 7};
  const uint64_t n = accel__dims_count(d);
  const double sp[3] = {1.5, 0.5, 0.7};
  void *md, *dd;
  accel_array m = new_volume(&md, ACCEL_DTYPE_U8, d), dist = new_volume(&dd, ACCEL_DTYPE_F64, d);
  int32_t *ind = malloc(3 * n * sizeof(int32_t));
  accel_array ia;
  accel_array_init(&ia, ind, ACCEL_DTYPE_I32, 4, (int64_t[]){3, d.nz, d.ny, d.nx});
  uint8_t *mk = md;
  for (uint64_t i = 0; i < n; i++) mk[i] = (uint8_t)(rnd() % 100 >= 8);
  mk[0] = 0;
  ck_assert_msg(accel_ct_feature_transform(ctx, &m, sp, &ia, &dist) == ACCEL_OK, "%s", accel_last_error(ctx));
  const double *dv = dd;
  for (uint64_t i = 0; i < n; i++) {
    const int64_t z = (int64_t)i / (d.ny * d.nx), y = ((int64_t)i / d.nx) % d.ny, x = (int64_t)i % d.nx;
    double best = INFINITY;
    for (uint64_t j = 0; j < n; j++) {
      if (mk[j]) continue;
      const int64_t zz = (int64_t)j / (d.ny * d.nx), yy = ((int64_t)j / d.nx) % d.ny, xx = (int64_t)j % d.nx;
      const double a = (double)(z - zz) * sp[0], b = (double)(y - yy) * sp[1], c = (double)(x - xx) * sp[2];
      if (a * a + b * b + c * c < best) best = a * a + b * b + c * c;
    }
    const int32_t fz = ind[i], fy = ind[n + i], fx = ind[2 * n + i];
    ck_assert(fz >= 0 && fz < d.nz && fy >= 0 && fy < d.ny && fx >= 0 && fx < d.nx);
    ck_assert_msg(mk[((uint64_t)fz * (uint64_t)d.ny + (uint64_t)fy) * (uint64_t)d.nx + (uint64_t)fx] == 0,
                  "voxel %llu: its feature is not a zero voxel", (unsigned long long)i);
    const double a = (double)(fz - z) * sp[0], b = (double)(fy - y) * sp[1], c = (double)(fx - x) * sp[2];
    ck_assert_msg(dv[i] == sqrt(a * a + b * b + c * c), "voxel %llu: distance is not its feature's",
                  (unsigned long long)i);
    ck_assert_msg(fabs(dv[i] - sqrt(best)) <= 1e-12 * sqrt(best), "voxel %llu: %.17g, nearest %.17g",
                  (unsigned long long)i, dv[i], sqrt(best));
  }
  /* either output alone; bad arguments */
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, sp, NULL, &dist), ACCEL_OK);
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, NULL, &ia, NULL), ACCEL_OK);
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, sp, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, sp, &dist, NULL), ACCEL_ERR_INVALID_ARG); /* not I32 4-D */
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, sp, NULL, &m), ACCEL_ERR_INVALID_ARG);    /* not F64 */
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, (double[]){1, 0, 1}, &ia, NULL), ACCEL_ERR_INVALID_ARG);
  accel_array wrong;
  accel_array_init(&wrong, ind, ACCEL_DTYPE_I32, 4, (int64_t[]){2, d.nz, d.ny, d.nx});
  ck_assert_int_eq(accel_ct_feature_transform(ctx, &m, sp, &wrong, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_feature_transform(NULL, &m, sp, &ia, NULL), ACCEL_ERR_INVALID_ARG);
  free(md);
  free(dd);
  free(ind);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(edt_equals_brute_force) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims shapes[] = {{7, 9, 11}, {1, 20, 1}, {13, 1, 6}, {5, 5, 40}, {16, 17, 3}};
  const double spacings[][3] = {{1, 1, 1}, {2, 0.5, 0.5}, {0.3, 1.7, 1.1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t sp = 0; sp < 3; sp++)
      for (int density = 0; density < 3; density++) {
        const accel__dims d = shapes[si];
        const uint64_t n = accel__dims_count(d);
        void *md, *od;
        accel_array m = new_volume(&md, ACCEL_DTYPE_U8, d), o = new_volume(&od, ACCEL_DTYPE_F32, d);
        uint8_t *mk = md;
        for (uint64_t i = 0; i < n; i++) mk[i] = (uint8_t)(rnd() % 100 >= (density == 0 ? 2 : density == 1 ? 20 : 70));
        mk[rnd() % n] = 0; /* at least one background voxel */
        ck_assert_int_eq(accel_ct_edt(ctx, &m, spacings[sp], &o), ACCEL_OK);
        const bool exact = sp < 2;
        for (uint64_t i = 0; i < n; i++) {
          const int64_t z = (int64_t)i / (d.ny * d.nx), y = ((int64_t)i / d.nx) % d.ny, x = (int64_t)i % d.nx;
          double best = mk[i] ? INFINITY : 0;
          for (uint64_t j = 0; j < n && mk[i]; j++) {
            if (mk[j]) continue;
            const int64_t zz = (int64_t)j / (d.ny * d.nx), yy = ((int64_t)j / d.nx) % d.ny, xx = (int64_t)j % d.nx;
            const double dz = (double)(z - zz) * spacings[sp][0], dy = (double)(y - yy) * spacings[sp][1],
                         dx = (double)(x - xx) * spacings[sp][2];
            const double dd = dz * dz + dy * dy + dx * dx;
            if (dd < best) best = dd;
          }
          const float want = (float)sqrt(best), got = ((float *)od)[i];
          EXPECT(exact ? got == want : fabsf(got - want) <= 2e-6f * want,
                 "shape %zu spacing %zu voxel %llu: %.9g vs %.9g", si, sp, (unsigned long long)i, (double)got,
                 (double)want);
        }
        free(md);
        free(od);
      }
  /* no background at all: +inf everywhere */
  void *md, *od;
  const accel__dims d = {3, 4, 5};
  accel_array m = new_volume(&md, ACCEL_DTYPE_U8, d), o = new_volume(&od, ACCEL_DTYPE_F32, d);
  memset(md, 1, 60);
  ck_assert_int_eq(accel_ct_edt(ctx, &m, NULL, &o), ACCEL_OK);
  for (int i = 0; i < 60; i++) ck_assert(isinf(((float *)od)[i]));
  free(md);
  free(od);
  accel_ctx_destroy(ctx);
}
END_TEST

/* Fill holes against a breadth-first search from the border. */
START_TEST(fill_holes_equals_a_flood_from_the_border) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims shapes[] = {{12, 13, 14}, {1, 30, 30}, {20, 1, 9}, {2, 2, 2}, {31, 8, 5}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int conn = 0; conn < 3; conn++) /* 6, 26, 18: neighbours at most 1, 3, 2 steps away */
      for (int density = 40; density <= 70; density += 15) {
        const accel__dims d = shapes[si];
        const uint64_t n = accel__dims_count(d);
        void *md, *od;
        accel_array m = new_volume(&md, ACCEL_DTYPE_U8, d), o = new_volume(&od, ACCEL_DTYPE_U8, d);
        uint8_t *mk = md;
        for (uint64_t i = 0; i < n; i++) mk[i] = (uint8_t)(rnd() % 100 < (uint32_t)density);
        const accel_ct_connectivity c = conn == 0 ? ACCEL_CT_FACES : conn == 1 ? ACCEL_CT_CORNERS : ACCEL_CT_EDGES;
        const int steps = conn == 0 ? 1 : conn == 1 ? 3 : 2;
        ck_assert_int_eq(accel_ct_fill_holes(ctx, &m, c, &o), ACCEL_OK);
        /* reference: flood the background from border voxels */
        uint8_t *out = malloc(n);
        uint64_t *queue = malloc(n * sizeof(uint64_t)), qh = 0, qt = 0;
        for (uint64_t i = 0; i < n; i++) out[i] = 1;
        for (uint64_t i = 0; i < n; i++) {
          const int64_t z = (int64_t)i / (d.ny * d.nx), y = ((int64_t)i / d.nx) % d.ny, x = (int64_t)i % d.nx;
          const bool border = z == 0 || y == 0 || x == 0 || z == d.nz - 1 || y == d.ny - 1 || x == d.nx - 1;
          if (border && !mk[i]) {
            out[i] = 0;
            queue[qt++] = i;
          }
        }
        while (qh < qt) {
          const uint64_t i = queue[qh++];
          const int64_t z = (int64_t)i / (d.ny * d.nx), y = ((int64_t)i / d.nx) % d.ny, x = (int64_t)i % d.nx;
          for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
              for (int dx = -1; dx <= 1; dx++) {
                if (abs(dz) + abs(dy) + abs(dx) > steps) continue;
                const int64_t zz = z + dz, yy = y + dy, xx = x + dx;
                if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
                const uint64_t j = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
                if (!mk[j] && out[j]) {
                  out[j] = 0;
                  queue[qt++] = j;
                }
              }
        }
        ck_assert_msg(memcmp(out, od, n) == 0, "shape %zu conn %d density %d", si, conn, density);
        /* in place */
        ck_assert_int_eq(accel_ct_fill_holes(ctx, &m, c, &m), ACCEL_OK);
        ck_assert(memcmp(out, md, n) == 0);
        free(out);
        free(queue);
        free(md);
        free(od);
      }
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(threshold_and_rescale) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {3, 4, 5};
  void *id, *fd, *od;
  accel_array in = new_volume(&id, ACCEL_DTYPE_I16, d), f = new_volume(&fd, ACCEL_DTYPE_F32, d),
              o = new_volume(&od, ACCEL_DTYPE_U8, d);
  int16_t *v = id;
  for (int i = 0; i < 60; i++) v[i] = (int16_t)(i * 37 % 200 - 100);
  const double slope[3] = {1.0, 2.0, 0.5}, intercept[3] = {-1024, 0, 10.25};
  ck_assert_int_eq(accel_ct_rescale(ctx, &in, slope, intercept, &f), ACCEL_OK);
  for (int i = 0; i < 60; i++) ck_assert(((float *)fd)[i] == (float)(v[i] * slope[i / 20] + intercept[i / 20]));
  const accel_ct_compare cmps[4] = {ACCEL_CT_GREATER, ACCEL_CT_GREATER_EQUAL, ACCEL_CT_LESS, ACCEL_CT_LESS_EQUAL};
  for (int c = 0; c < 4; c++) {
    ck_assert_int_eq(accel_ct_threshold(ctx, &in, 11, cmps[c], &o), ACCEL_OK);
    for (int i = 0; i < 60; i++) {
      const int want = c == 0 ? v[i] > 11 : c == 1 ? v[i] >= 11 : c == 2 ? v[i] < 11 : v[i] <= 11;
      ck_assert_int_eq(((uint8_t *)od)[i], want);
    }
  }
  ck_assert_int_eq(accel_ct_threshold(ctx, &f, -1000.5, ACCEL_CT_GREATER, &o), ACCEL_OK);
  for (int i = 0; i < 60; i++) ck_assert_int_eq(((uint8_t *)od)[i], ((float *)fd)[i] > -1000.5f);
  free(id);
  free(fd);
  free(od);
  accel_ctx_destroy(ctx);
}
END_TEST

/* numpy 1.x's argsort (quicksort kind), as numpy's scalar code orders ties:
 * keys -((37 i + 11) mod m) / 2 in float32, orders recorded from numpy. */
START_TEST(argsort_orders_ties_as_numpy) {
  static const int64_t want40[] = {19, 34, 29, 24, 14, 9,  39, 4,  16, 6,  21, 31, 26, 11, 36, 1,  13, 33, 3,  18,
                                   38, 28, 8,  23, 35, 30, 0,  20, 15, 10, 5,  25, 27, 22, 2,  17, 32, 12, 37, 7};
  static const int64_t want100[] = {99, 43, 29, 50, 57, 22, 64, 71, 15, 78, 36, 1,  8,  85, 92, 11, 32, 46, 95, 53,
                                    25, 4,  81, 60, 88, 67, 39, 74, 18, 63, 56, 70, 98, 77, 84, 42, 91, 0,  49, 35,
                                    7,  14, 28, 21, 94, 3,  87, 10, 80, 73, 17, 66, 59, 24, 38, 52, 45, 31, 55, 97,
                                    41, 90, 6,  34, 83, 76, 48, 69, 13, 27, 62, 20, 9,  86, 37, 93, 44, 51, 23, 79,
                                    2,  65, 72, 16, 30, 58, 96, 26, 5,  40, 19, 61, 33, 82, 12, 54, 75, 47, 89, 68};
  static const int64_t want300[] = {
      0,   99,  201, 96,  204, 93,  207, 90,  210, 87,  213, 84,  216, 198, 81,  78,  222, 75,  147, 225, 72,  228,
      69,  231, 66,  234, 63,  219, 102, 195, 105, 153, 144, 156, 141, 159, 138, 162, 135, 165, 132, 168, 129, 171,
      126, 174, 123, 177, 120, 180, 117, 183, 114, 186, 111, 189, 108, 192, 237, 60,  150, 240, 258, 21,  288, 261,
      36,  12,  264, 33,  285, 9,   267, 15,  282, 270, 27,  273, 18,  24,  279, 276, 30,  42,  39,  51,  294, 54,
      243, 249, 48,  246, 6,   297, 252, 57,  45,  291, 255, 3,   296, 152, 281, 176, 179, 164, 173, 290, 284, 158,
      170, 293, 287, 167, 161, 155, 278, 194, 185, 236, 242, 233, 230, 245, 227, 248, 251, 221, 218, 254, 215, 257,
      182, 212, 260, 206, 263, 203, 200, 266, 197, 269, 239, 191, 272, 188, 275, 209, 224, 149, 74,  59,  62,  65,
      68,  71,  77,  80,  83,  86,  89,  92,  95,  98,  101, 104, 56,  107, 53,  47,  2,   5,   8,   11,  14,  17,
      20,  23,  26,  29,  32,  35,  38,  41,  44,  50,  110, 299, 125, 143, 131, 113, 122, 140, 146, 128, 137, 119,
      134, 116, 112, 34,  262, 31,  268, 136, 265, 259, 163, 40,  256, 43,  133, 253, 46,  166, 250, 49,  37,  160,
      25,  271, 1,   151, 295, 4,   292, 7,   145, 289, 10,  154, 28,  286, 283, 16,  142, 280, 19,  157, 277, 22,
      274, 139, 13,  247, 55,  130, 214, 85,  178, 211, 88,  208, 91,  118, 205, 94,  181, 202, 97,  199, 100, 115,
      196, 103, 184, 193, 106, 190, 109, 121, 52,  82,  79,  244, 187, 169, 241, 58,  238, 61,  127, 235, 64,  172,
      232, 67,  229, 70,  124, 226, 73,  298, 223, 76,  175, 220, 217, 148};
  const struct {
    int n, m;
    const int64_t *want;
  } cases[] = {{40, 5, want40}, {100, 7, want100}, {300, 3, want300}};
  for (int c = 0; c < 3; c++) {
    float keys[300];
    int64_t order[300];
    for (int i = 0; i < cases[c].n; i++) keys[i] = -(float)((37 * i + 11) % cases[c].m) * 0.5f;
    accel__np_argsort_f32(keys, order, cases[c].n);
    for (int i = 0; i < cases[c].n; i++) ck_assert_msg(order[i] == cases[c].want[i], "n %d position %d", cases[c].n, i);
  }
}
END_TEST

/* The options appended in the watershed's second version, on cases worked
 * out by hand from scikit-image 0.19.3's flood (see accel/ct.h). */
START_TEST(watershed_options_by_hand) {
  accel_ctx *ctx = cpu_ctx();
  accel_ct_watershed_options wo;
  accel_ct_watershed_options_init(&wo, sizeof wo);
  ck_assert_uint_eq(wo.connectivity, 1);
  ck_assert_uint_eq(wo.watershed_line, 0);
  ck_assert(wo.compactness == 0);
  /* a ramp up to the middle (1-D): the middle pixel is reached from both
   * basins, so the watershed line takes it; the markers keep their labels */
  float ramp[7] = {0, 1, 2, 3, 2, 1, 0};
  int32_t mk[9] = {1, 0, 0, 0, 0, 0, 2}, out[9];
  accel_array im = array_of(ramp, ACCEL_DTYPE_F32, 1, (const int64_t[]){7}),
              mka = array_of(mk, ACCEL_DTYPE_I32, 1, (const int64_t[]){7}),
              outa = array_of(out, ACCEL_DTYPE_I32, 1, (const int64_t[]){7});
  wo.watershed_line = 1;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mka, NULL, &wo, &outa), ACCEL_OK);
  ck_assert_mem_eq(out, ((const int32_t[]){1, 1, 1, 0, 2, 2, 2}), 7 * sizeof(int32_t));
  /* a low channel from marker 2 (x = 7) towards marker 1 (x = 0), values
   * 0 10 10 10 1 1 1 0 (float64): the plain flood pops x = 6, 5, 4 (at 1)
   * before x = 1 (at 10), and x = 4's push labels x = 3 for marker 2;
   * compact with 10, x = 3 is pushed from marker 1 at 10 + 10 * 3 = 40 and
   * from marker 2 at 10 + 10 * 4 = 50, so marker 1's push pops first */
  double row[8] = {0, 10, 10, 10, 1, 1, 1, 0};
  memset(mk, 0, sizeof mk);
  mk[0] = 1;
  mk[7] = 2;
  im = array_of(row, ACCEL_DTYPE_F64, 1, (const int64_t[]){8});
  mka = array_of(mk, ACCEL_DTYPE_I32, 1, (const int64_t[]){8});
  outa = array_of(out, ACCEL_DTYPE_I32, 1, (const int64_t[]){8});
  wo.watershed_line = 0;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mka, NULL, &wo, &outa), ACCEL_OK);
  ck_assert_mem_eq(out, ((const int32_t[]){1, 1, 1, 2, 2, 2, 2, 2}), 8 * sizeof(int32_t));
  wo.compactness = 10.0;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mka, NULL, &wo, &outa), ACCEL_OK);
  ck_assert_mem_eq(out, ((const int32_t[]){1, 1, 1, 1, 2, 2, 2, 2}), 8 * sizeof(int32_t));
  /* 2-D: two voxels that touch only at a corner, the others outside the
   * mask: 4-connected the second is not reached, 8-connected it is */
  float sq[4] = {0, 9, 9, 1};
  int32_t mk2[4] = {1, 0, 0, 0}, out2[4];
  uint8_t diag[4] = {1, 0, 0, 1};
  const int64_t s2[2] = {2, 2};
  accel_array im2 = array_of(sq, ACCEL_DTYPE_F32, 2, s2), mk2a = array_of(mk2, ACCEL_DTYPE_I32, 2, s2),
              out2a = array_of(out2, ACCEL_DTYPE_I32, 2, s2), diaga = array_of(diag, ACCEL_DTYPE_U8, 2, s2);
  accel_ct_watershed_options_init(&wo, sizeof wo);
  ck_assert_int_eq(accel_ct_watershed(ctx, &im2, &mk2a, &diaga, &wo, &out2a), ACCEL_OK);
  ck_assert_mem_eq(out2, ((const int32_t[]){1, 0, 0, 0}), sizeof out2);
  wo.connectivity = 2;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im2, &mk2a, &diaga, &wo, &out2a), ACCEL_OK);
  ck_assert_mem_eq(out2, ((const int32_t[]){1, 0, 0, 1}), sizeof out2);
  /* 3-D: opposite corners of a 2x2x2 cube: only connectivity 3 joins them */
  float cube[8] = {0};
  int32_t mk3[8] = {5}, out3[8];
  uint8_t ends[8] = {1, 0, 0, 0, 0, 0, 0, 1};
  const int64_t s3[3] = {2, 2, 2};
  accel_array im3 = array_of(cube, ACCEL_DTYPE_F32, 3, s3), mk3a = array_of(mk3, ACCEL_DTYPE_I32, 3, s3),
              out3a = array_of(out3, ACCEL_DTYPE_I32, 3, s3), endsa = array_of(ends, ACCEL_DTYPE_U8, 3, s3);
  for (uint32_t c = 1; c <= 4; c++) {
    wo.connectivity = c;
    ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk3a, &endsa, &wo, &out3a), ACCEL_OK);
    ck_assert_int_eq(out3[0], 5);
    ck_assert_int_eq(out3[7], c >= 3 ? 5 : 0);
  }
  /* a caller built against the first version (struct_size up to
   * progress_user) gets connectivity 1: the corner stays unreached */
  wo.struct_size = (uint32_t)offsetof(accel_ct_watershed_options, connectivity);
  ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk3a, &endsa, &wo, &out3a), ACCEL_OK);
  ck_assert_int_eq(out3[7], 0);
  /* bad options */
  accel_ct_watershed_options_init(&wo, sizeof wo);
  wo.connectivity = 0;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk3a, &endsa, &wo, &out3a), ACCEL_ERR_INVALID_ARG);
  wo.connectivity = 1;
  wo.compactness = -1;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk3a, &endsa, &wo, &out3a), ACCEL_ERR_INVALID_ARG);
  wo.compactness = NAN;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk3a, &endsa, &wo, &out3a), ACCEL_ERR_INVALID_ARG);
  /* markers of another dimensionality than the image */
  ck_assert_int_eq(accel_ct_watershed(ctx, &im3, &mk2a, NULL, NULL, &out3a), ACCEL_ERR_INVALID_ARG);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A plateau between two markers splits by first-pushed-first: the left half
 * to the first marker, which pops first. */
START_TEST(watershed_plateau_and_mask) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {1, 1, 7};
  void *imd, *mkd, *od, *maskd;
  accel_array im = new_volume(&imd, ACCEL_DTYPE_F32, d), mk = new_volume(&mkd, ACCEL_DTYPE_I32, d),
              o = new_volume(&od, ACCEL_DTYPE_I32, d), mask = new_volume(&maskd, ACCEL_DTYPE_U8, d);
  ((int32_t *)mkd)[0] = 1;
  ((int32_t *)mkd)[6] = 2;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mk, NULL, NULL, &o), ACCEL_OK);
  const int32_t want[7] = {1, 1, 1, 1, 2, 2, 2};
  ck_assert_mem_eq(od, want, sizeof want);
  /* a mask gap stops the flood; out may alias the markers */
  memset(maskd, 1, 7);
  ((uint8_t *)maskd)[2] = 0;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mk, &mask, NULL, &mk), ACCEL_OK);
  const int32_t want2[7] = {1, 1, 0, 2, 2, 2, 2};
  ck_assert_mem_eq(mkd, want2, sizeof want2);
  /* a voxel takes its label when first pushed, not when popped: x = 1 is
   * labelled by marker 1 at once, though marker 2's lower valley floods first */
  float *v = imd;
  const float vals[7] = {0, 5, 5, 1, 1, 1, 0};
  memcpy(v, vals, sizeof vals);
  memset(mkd, 0, 28);
  ((int32_t *)mkd)[0] = 1;
  ((int32_t *)mkd)[6] = 2;
  ck_assert_int_eq(accel_ct_watershed(ctx, &im, &mk, NULL, NULL, &o), ACCEL_OK);
  const int32_t want3[7] = {1, 1, 2, 2, 2, 2, 2};
  ck_assert_mem_eq(od, want3, sizeof want3);
  free(imd);
  free(mkd);
  free(od);
  free(maskd);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The network against sums written here, on the committed berea labels. */
START_TEST(network_equals_direct_sums) {
  accel_ctx *ctx = cpu_ctx();
  fixture fx;
  load_fixture(&fx, TEST_DATA_DIR "/ct", "berea_pore");
  accel_array lab = view_of(fx.labels), edt = view_of(fx.edt);
  const double sp[3] = {2.0, 0.5, 1.5};
  accel_ct_network *net = NULL;
  ck_assert_int_eq(accel_ct_network_build(ctx, &lab, &edt, sp, &net), ACCEL_OK);
  const int32_t *L = lab.data;
  const float *E = edt.data;
  const accel__dims d = fx.d;
  int32_t maxl = 0;
  uint64_t labelled = 0;
  for (uint64_t i = 0; i < fx.n; i++) {
    if (L[i] > maxl) maxl = L[i];
    labelled += L[i] > 0;
  }
  size_t nreg, nth;
  double porosity;
  accel_ct_network_info(net, &nreg, &nth, &porosity);
  ck_assert_uint_eq(nreg, (size_t)maxl);
  ck_assert(fabs(porosity - (double)labelled / (double)fx.n) < 1e-15);
  for (int32_t l = 1; l <= maxl; l++) {
    uint64_t cnt = 0;
    double cz = 0, cy = 0, cx = 0;
    float mx = 0;
    for (uint64_t i = 0; i < fx.n; i++)
      if (L[i] == l) {
        cnt++;
        cz += (double)(i / (uint64_t)(d.ny * d.nx));
        cy += (double)((i / (uint64_t)d.nx) % (uint64_t)d.ny);
        cx += (double)(i % (uint64_t)d.nx);
        if (E[i] > mx) mx = E[i];
      }
    accel_ct_region r;
    r.struct_size = sizeof r;
    ck_assert_int_eq(accel_ct_network_region(net, (size_t)l - 1, &r), ACCEL_OK);
    ck_assert_uint_eq(r.label, (uint32_t)l);
    ck_assert_uint_eq(r.voxels, cnt);
    ck_assert(fabs(r.volume - (double)cnt * 1.5) < 1e-9);
    ck_assert(fabs(r.equivalent_radius - cbrt(3.0 * (double)cnt * 1.5 / (4.0 * M_PI))) < 1e-9);
    ck_assert(fabs(r.centroid[0] - cz / (double)cnt * 2.0) < 1e-9 &&
              fabs(r.centroid[1] - cy / (double)cnt * 0.5) < 1e-9 &&
              fabs(r.centroid[2] - cx / (double)cnt * 1.5) < 1e-9);
    ck_assert(r.inscribed_radius == mx);
  }
  /* throats: every face-adjacent pair of different labels, counted here */
  uint64_t *faces = calloc((size_t)(maxl + 1) * (size_t)(maxl + 1), sizeof(uint64_t));
  double *area = calloc((size_t)(maxl + 1) * (size_t)(maxl + 1), sizeof(double));
  float *rad = calloc((size_t)(maxl + 1) * (size_t)(maxl + 1), sizeof(float));
  const double fa[3] = {sp[1] * sp[2], sp[0] * sp[2], sp[0] * sp[1]};
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t x = 0; x < d.nx; x++) {
        const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
        const int64_t nz[3] = {z + 1 < d.nz, y + 1 < d.ny, x + 1 < d.nx};
        const uint64_t step[3] = {(uint64_t)(d.ny * d.nx), (uint64_t)d.nx, 1};
        for (int a = 0; a < 3; a++) {
          if (!nz[a]) continue;
          const int32_t p = L[i], q = L[i + step[a]];
          if (p <= 0 || q <= 0 || p == q) continue;
          const size_t k = (size_t)(p < q ? p : q) * (size_t)(maxl + 1) + (size_t)(p < q ? q : p);
          faces[k]++;
          area[k] += fa[a];
          const float m = E[i] < E[i + step[a]] ? E[i] : E[i + step[a]];
          if (m > rad[k]) rad[k] = m;
        }
      }
  size_t t = 0;
  for (int32_t a = 1; a <= maxl; a++)
    for (int32_t b = a + 1; b <= maxl; b++) {
      const size_t k = (size_t)a * (size_t)(maxl + 1) + (size_t)b;
      if (!faces[k]) continue;
      accel_ct_throat th;
      th.struct_size = sizeof th;
      ck_assert_int_eq(accel_ct_network_throat(net, t++, &th), ACCEL_OK);
      ck_assert(th.a == (uint32_t)a && th.b == (uint32_t)b);
      ck_assert_uint_eq(th.faces, faces[k]);
      ck_assert(fabs(th.area - area[k]) < 1e-9 * area[k]);
      ck_assert(th.inscribed_radius == rad[k]);
    }
  ck_assert_uint_eq(t, nth);
  ck_assert_uint_gt(nth, 10);
  accel_ct_throat th;
  th.struct_size = sizeof th;
  ck_assert_int_eq(accel_ct_network_throat(net, nth, &th), ACCEL_ERR_NOT_FOUND);
  free(faces);
  free(area);
  free(rad);
  accel_ct_network_destroy(net);
  free_fixture(&fx);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments_are_errors) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {2, 3, 4}, d2 = {2, 3, 5};
  void *a, *b, *c, *e;
  accel_array u8 = new_volume(&a, ACCEL_DTYPE_U8, d), f32 = new_volume(&b, ACCEL_DTYPE_F32, d),
              i32 = new_volume(&c, ACCEL_DTYPE_I32, d), other = new_volume(&e, ACCEL_DTYPE_F32, d2);
  accel_array flat = u8;
  flat.ndim = 2;
  ck_assert_int_eq(accel_ct_edt(ctx, &flat, NULL, &f32), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "3-D"));
  ck_assert_int_eq(accel_ct_edt(ctx, &u8, NULL, &other), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "shape"));
  ck_assert_int_eq(accel_ct_edt(ctx, &f32, NULL, &f32), ACCEL_ERR_INVALID_ARG);
  const double bad_sp[3] = {1, 0, 1};
  ck_assert_int_eq(accel_ct_edt(ctx, &u8, bad_sp, &f32), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_fill_holes(ctx, &u8, (accel_ct_connectivity)12, &u8), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_threshold(ctx, &f32, NAN, ACCEL_CT_GREATER, &u8), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_rescale(ctx, &f32, NULL, NULL, &f32), ACCEL_ERR_INVALID_ARG);
  ((float *)b)[3] = NAN;
  ck_assert_int_eq(accel_ct_watershed(ctx, &f32, &i32, NULL, NULL, &i32), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_markers(ctx, &f32, &u8, NULL, &i32, NULL), ACCEL_ERR_INVALID_ARG);
  ((float *)b)[3] = -1;
  ck_assert_int_eq(accel_ct_markers(ctx, &f32, &u8, NULL, &i32, NULL), ACCEL_ERR_INVALID_ARG);
  ((float *)b)[3] = 0;
  accel_ct_marker_options mo;
  accel_ct_marker_options_init(&mo, sizeof mo);
  mo.min_distance = -1;
  ck_assert_int_eq(accel_ct_markers(ctx, &f32, &u8, &mo, &i32, NULL), ACCEL_ERR_INVALID_ARG);
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  double slope[2] = {1, 1};
  po.slope = slope;
  accel_ct_pipeline *p = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &p), ACCEL_ERR_INVALID_ARG); /* no intercept */
  ck_assert_ptr_null(p);
  accel_ct_pipeline_options_init(&po, sizeof po);
  ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &p), ACCEL_OK);
  accel_ct_outputs out;
  accel_ct_outputs_init(&out, sizeof out);
  out.edt = &u8; /* wrong dtype */
  ck_assert_int_eq(accel_ct_pipeline_run(p, &f32, NULL, &out), ACCEL_ERR_INVALID_ARG);
  accel_ct_pipeline_destroy(p);
  free(a);
  free(b);
  free(c);
  free(e);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The pipeline used to take a NaN or infinite rescale slope or intercept
 * (the rescale stage alone refused them) and segment nothing, silently. */
START_TEST(pipeline_refuses_non_finite_rescale) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims d = {3, 4, 5};
  void *vd;
  accel_array vol = new_volume(&vd, ACCEL_DTYPE_I16, d);
  for (int i = 0; i < 60; i++) ((int16_t *)vd)[i] = (int16_t)(i % 7 == 0 ? -1000 : 500);
  const double bad[][2] = {{NAN, 0}, {1, NAN}, {INFINITY, 0}, {1, -INFINITY}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    double slope[3] = {1, 1, 1}, intercept[3] = {0, 0, 0};
    slope[1] = bad[k][0];
    intercept[1] = bad[k][1];
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.slope = slope;
    po.intercept = intercept;
    po.threshold = 0;
    accel_ct_pipeline *p = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &p), ACCEL_OK); /* read at run time, when Z is known */
    accel_ct_outputs out;
    accel_ct_outputs_init(&out, sizeof out);
    ck_assert_int_eq(accel_ct_pipeline_run(p, &vol, NULL, &out), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "slice 1 is not finite"));
    accel_ct_pipeline_destroy(p);
  }
  free(vd);
  accel_ctx_destroy(ctx);
}
END_TEST

/* A strided (non-contiguous) view gives the same results as a contiguous copy. */
START_TEST(strided_views) {
  accel_ctx *ctx = cpu_ctx();
  const accel__dims big = {6, 8, 10}, d = {6, 8, 5};
  void *md, *cd, *o1, *o2;
  accel_array m = new_volume(&md, ACCEL_DTYPE_U8, big), c = new_volume(&cd, ACCEL_DTYPE_U8, d),
              a1 = new_volume(&o1, ACCEL_DTYPE_F32, d), a2 = new_volume(&o2, ACCEL_DTYPE_F32, big);
  for (int i = 0; i < 480; i++) ((uint8_t *)md)[i] = (uint8_t)(rnd() % 5 != 0);
  accel_array sv = m; /* every other x */
  sv.shape[2] = 5;
  sv.strides[2] = 2;
  for (int i = 0; i < 240; i++) ((uint8_t *)cd)[i] = ((uint8_t *)md)[2 * i];
  accel_array ov = a2;
  ov.shape[2] = 5;
  ov.strides[2] = 8;
  ck_assert_int_eq(accel_ct_edt(ctx, &c, NULL, &a1), ACCEL_OK);
  ck_assert_int_eq(accel_ct_edt(ctx, &sv, NULL, &ov), ACCEL_OK);
  for (int i = 0; i < 240; i++) ck_assert(((float *)o1)[i] == ((float *)o2)[2 * i]);
  free(md);
  free(cd);
  free(o1);
  free(o2);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(raw_files) {
  char dir[] = "/tmp/accel-raw-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/v.raw", dir);
  int16_t v[24];
  for (int i = 0; i < 24; i++) v[i] = (int16_t)(i * 1000 - 9000);
  accel_array a;
  const int64_t shape[3] = {2, 3, 4};
  accel_array_init(&a, v, ACCEL_DTYPE_I16, 3, shape);
  ck_assert_int_eq(accel_raw_save(NULL, path, &a), ACCEL_OK);
  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_raw_load(NULL, path, ACCEL_DTYPE_I16, 3, shape, 0, &b), ACCEL_OK);
  accel_array back = view_of(b);
  ck_assert_mem_eq(back.data, v, sizeof v);
  accel_buffer_destroy(b);
  const int64_t wrong[3] = {2, 3, 5};
  ck_assert_int_eq(accel_raw_load(NULL, path, ACCEL_DTYPE_I16, 3, wrong, 0, &b), ACCEL_ERR_FORMAT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "48 bytes"));
  const int64_t sub[3] = {1, 3, 4};
  ck_assert_int_eq(accel_raw_load(NULL, path, ACCEL_DTYPE_I16, 3, sub, 24, &b), ACCEL_OK); /* a 24-byte header */
  back = view_of(b);
  ck_assert_mem_eq(back.data, v + 12, 24);
  accel_buffer_destroy(b);
  ck_assert_int_eq(accel_raw_load(NULL, "/nonexistent/v.raw", ACCEL_DTYPE_I16, 3, shape, 0, &b), ACCEL_ERR_IO);
  unlink(path);
  rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ the CUDA pipeline in emulation */

#if EXPECT_CUDA
/* The feature transform on the emulated GPU equals the CPU's: indices and
 * float64 distances, together and alone. */
static void ft_gpu_equals_cpu(accel_ctx *gpu, accel_ctx *cpu, const accel_array *pores, accel__dims d,
                              const double sp[3], const char *what, const char *name) {
  const uint64_t n = accel__dims_count(d);
  int32_t *ia_d = malloc(n * 12), *ib_d = malloc(n * 12);
  double *da_d = malloc(n * 8), *db_d = malloc(n * 8);
  accel_array ia, ib, da, db;
  const int64_t ishape[4] = {3, d.nz, d.ny, d.nx}, vshape[3] = {d.nz, d.ny, d.nx};
  accel_array_init(&ia, ia_d, ACCEL_DTYPE_I32, 4, ishape);
  accel_array_init(&ib, ib_d, ACCEL_DTYPE_I32, 4, ishape);
  accel_array_init(&da, da_d, ACCEL_DTYPE_F64, 3, vshape);
  accel_array_init(&db, db_d, ACCEL_DTYPE_F64, 3, vshape);
  ck_assert_msg(accel_ct_feature_transform(gpu, pores, sp, &ia, &da) == ACCEL_OK, "%s", accel_last_error(gpu));
  ck_assert_int_eq(accel_ct_feature_transform(cpu, pores, sp, &ib, &db), ACCEL_OK);
  ck_assert_msg(memcmp(ia_d, ib_d, n * 12) == 0 && memcmp(da_d, db_d, n * 8) == 0, "%s %s: feature transform", what,
                name);
  memset(da_d, 0, n * 8);
  ck_assert_int_eq(accel_ct_feature_transform(gpu, pores, sp, NULL, &da), ACCEL_OK);
  ck_assert_msg(memcmp(da_d, db_d, n * 8) == 0, "%s %s: feature transform distances alone", what, name);
  memset(ia_d, 0, n * 12);
  ck_assert_int_eq(accel_ct_feature_transform(gpu, pores, sp, &ia, NULL), ACCEL_OK);
  ck_assert_msg(memcmp(ia_d, ib_d, n * 12) == 0, "%s %s: feature transform indices alone", what, name);
  free(ia_d);
  free(ib_d);
  free(da_d);
  free(db_d);
}

/* The EDT's first pass on the emulated GPU (a warp per row, rows in chunks
 * of 32 voxels) equals the CPU's to the bit: rows shorter than a chunk, one
 * voxel past it, whole chunks, rows without a zero, volumes without one. */
START_TEST(gpu_edt_rows_equal_cpu_in_emulation) {
  set_emulated_gpu_budget((uint64_t)1 << 30);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_ctx *cpu = cpu_ctx();
  const int64_t widths[] = {1, 5, 31, 32, 33, 64, 65, 100};
  const double spacings[][3] = {{1, 1, 1}, {0.3, 1.7, 1.1}};
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
    for (int density = 0; density < 5; density++)
      for (size_t sp = 0; sp < 2; sp++) {
        const accel__dims d = {3, 7, widths[wi]};
        const uint64_t n = accel__dims_count(d);
        void *md, *ad, *bd;
        accel_array m = new_volume(&md, ACCEL_DTYPE_U8, d), a = new_volume(&ad, ACCEL_DTYPE_F32, d),
                    b = new_volume(&bd, ACCEL_DTYPE_F32, d);
        uint8_t *mk = md;
        const int zeros_in_1000[] = {0, 4, 200, 700, 1000}; /* none, rows without zeros, ..., all */
        for (uint64_t i = 0; i < n; i++) mk[i] = (uint8_t)((int)(rnd() % 1000) >= zeros_in_1000[density]);
        ck_assert_msg(accel_ct_edt(gpu, &m, spacings[sp], &a) == ACCEL_OK, "%s", accel_last_error(gpu));
        ck_assert_int_eq(accel_ct_edt(cpu, &m, spacings[sp], &b), ACCEL_OK);
        ck_assert_msg(memcmp(ad, bd, n * 4) == 0, "width %lld, density %d, spacing %zu: the GPU's EDT differs",
                      (long long)widths[wi], density, sp);
        free(md);
        free(ad);
        free(bd);
      }
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}
END_TEST

/* Every GPU stage and the GPU pipeline (their host emulation: the kernels'
 * per-voxel code in loops) equal the CPU, whole and in slabs. */
static void gpu_equals_cpu(uint64_t budget, const char *what) {
  set_emulated_gpu_budget(budget);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
  accel_ctx *cpu = cpu_ctx();
  for (size_t f = 0; f < 2; f++) {
    fixture fx;
    load_fixture(&fx, TEST_DATA_DIR "/ct", COMMITTED[f]);
    const uint64_t n = fx.n;
    accel_array in = view_of(fx.input), ref_pores = view_of(fx.pores_ref), ref_edt = view_of(fx.edt);
    void *a_d, *b_d;
    /* threshold, fill holes (both connectivities), EDT, markers */
    accel_array a8 = new_volume(&a_d, ACCEL_DTYPE_U8, fx.d), b8 = new_volume(&b_d, ACCEL_DTYPE_U8, fx.d);
    ck_assert_msg(accel_ct_threshold(gpu, &in, fx.threshold, ACCEL_CT_GREATER, &a8) == ACCEL_OK, "%s",
                  accel_last_error(gpu));
    ck_assert_int_eq(accel_ct_threshold(cpu, &in, fx.threshold, ACCEL_CT_GREATER, &b8), ACCEL_OK);
    ck_assert_msg(memcmp(a_d, b_d, n) == 0, "%s %s: threshold", what, fx.name);
    accel_array solid = b8;
    void *fa_d, *fb_d;
    accel_array fa = new_volume(&fa_d, ACCEL_DTYPE_U8, fx.d), fb = new_volume(&fb_d, ACCEL_DTYPE_U8, fx.d);
    for (int conn = 0; conn < 3; conn++) {
      const accel_ct_connectivity c = conn == 0 ? ACCEL_CT_FACES : conn == 1 ? ACCEL_CT_CORNERS : ACCEL_CT_EDGES;
      ck_assert_msg(accel_ct_fill_holes(gpu, &solid, c, &fa) == ACCEL_OK, "%s", accel_last_error(gpu));
      ck_assert_int_eq(accel_ct_fill_holes(cpu, &solid, c, &fb), ACCEL_OK);
      ck_assert_msg(memcmp(fa_d, fb_d, n) == 0, "%s %s: fill holes conn %d", what, fx.name, conn);
      /* the background of the berea solid is one huge component: fill its complement too */
      ck_assert_int_eq(accel_ct_fill_holes(gpu, &ref_pores, c, &fa), ACCEL_OK);
      ck_assert_int_eq(accel_ct_fill_holes(cpu, &ref_pores, c, &fb), ACCEL_OK);
      ck_assert_msg(memcmp(fa_d, fb_d, n) == 0, "%s %s: fill holes of the pores conn %d", what, fx.name, conn);
    }
    void *ea_d, *eb_d;
    accel_array ea = new_volume(&ea_d, ACCEL_DTYPE_F32, fx.d), eb = new_volume(&eb_d, ACCEL_DTYPE_F32, fx.d);
    ck_assert_msg(accel_ct_edt(gpu, &ref_pores, fx.spacing, &ea) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_ct_edt(cpu, &ref_pores, fx.spacing, &eb), ACCEL_OK);
    ck_assert_msg(memcmp(ea_d, eb_d, n * 4) == 0, "%s %s: edt", what, fx.name);
    ft_gpu_equals_cpu(gpu, cpu, &ref_pores, fx.d, fx.spacing, what, fx.name);
    void *ma_d, *mb_d;
    accel_array ma = new_volume(&ma_d, ACCEL_DTYPE_I32, fx.d), mb = new_volume(&mb_d, ACCEL_DTYPE_I32, fx.d);
    uint32_t ca = 0, cb = 0;
    ck_assert_msg(accel_ct_markers(gpu, &ref_edt, &ref_pores, NULL, &ma, &ca) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_ct_markers(cpu, &ref_edt, &ref_pores, NULL, &mb, &cb), ACCEL_OK);
    ck_assert_msg(memcmp(ma_d, mb_d, n * 4) == 0 && ca == cb, "%s %s: markers", what, fx.name);
    /* the pipeline */
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.threshold = fx.threshold;
    po.pores = fx.pores;
    memcpy(po.spacing, fx.spacing, sizeof po.spacing);
    accel_ct_pipeline *pg = NULL, *pc = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(gpu, &po, &pg), ACCEL_OK);
    ck_assert_int_eq(accel_ct_pipeline_create(cpu, &po, &pc), ACCEL_OK);
    void *la_d, *lb_d;
    accel_array la = new_volume(&la_d, ACCEL_DTYPE_I32, fx.d), lb = new_volume(&lb_d, ACCEL_DTYPE_I32, fx.d);
    accel_ct_outputs oa, ob;
    accel_ct_outputs_init(&oa, sizeof oa);
    accel_ct_outputs_init(&ob, sizeof ob);
    oa.edt = &ea;
    oa.labels = &la;
    oa.filled = &fa;
    ob.edt = &eb;
    ob.labels = &lb;
    ob.filled = &fb;
    ck_assert_msg(accel_ct_pipeline_run(pg, &in, NULL, &oa) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_ct_pipeline_run(pc, &in, NULL, &ob), ACCEL_OK);
    ck_assert_msg(memcmp(la_d, lb_d, n * 4) == 0, "%s %s: pipeline labels", what, fx.name);
    ck_assert_msg(memcmp(ea_d, eb_d, n * 4) == 0, "%s %s: pipeline edt", what, fx.name);
    ck_assert_msg(memcmp(fa_d, fb_d, n) == 0, "%s %s: pipeline filled", what, fx.name);
    ck_assert_msg(memcmp(la_d, view_of(fx.labels).data, n * 4) == 0, "%s %s: pipeline labels vs the reference", what,
                  fx.name);
    ck_assert_uint_eq(oa.marker_count, ob.marker_count);
    accel_ct_pipeline_destroy(pg);
    accel_ct_pipeline_destroy(pc);
    free(a_d);
    free(b_d);
    free(fa_d);
    free(fb_d);
    free(ea_d);
    free(eb_d);
    free(ma_d);
    free(mb_d);
    free(la_d);
    free(lb_d);
    free_fixture(&fx);
  }
  /* every stage ran on the "GPU": no fallback (the policy is DENY anyway); the
   * feature transform leaves a volume over the budget to the CPU, declined */
  const bool whole = budget >= ((uint64_t)1 << 30);
  const char *stages[] = {"ct.threshold", "ct.fill_holes", "ct.edt",
                          "ct.markers",   "ct.pipeline",   "ct.feature_transform"};
  for (int k = 0; k < (whole ? 6 : 5); k++) {
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, stages[k], &st), ACCEL_OK);
    ck_assert_msg(st.gpu_runs == st.runs && st.fallbacks == 0, "%s: %s ran %llu times, %llu on the GPU", what,
                  stages[k], (unsigned long long)st.runs, (unsigned long long)st.gpu_runs);
  }
  ck_assert_int_eq(cap.n, 0);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
  set_emulated_gpu_budget((uint64_t)1 << 30);
}

START_TEST(gpu_stages_equal_cpu_in_emulation) { gpu_equals_cpu((uint64_t)1 << 30, "whole volume"); }
END_TEST

/* A budget of a few planes: every stage goes through its slab path, with
 * each next slab staged while the current one runs, and without. */
START_TEST(gpu_slabs_equal_cpu_in_emulation) {
  gpu_equals_cpu(1200000, "slabs");
  accel__cuda_overlap = false;
  gpu_equals_cpu(1200000, "slabs one after the other");
  accel__cuda_overlap = true;
}
END_TEST

/* A budget below one plane: the GPU stage fails, the CPU answers, the line is logged. */
START_TEST(gpu_too_small_a_budget_falls_back) {
  set_emulated_gpu_budget(20000);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  fixture fx;
  load_fixture(&fx, TEST_DATA_DIR "/ct", "berea_pore");
  accel_array pores = view_of(fx.pores_ref), ref = view_of(fx.edt);
  void *e_d;
  accel_array e = new_volume(&e_d, ACCEL_DTYPE_F32, fx.d);
  ck_assert_int_eq(accel_ct_edt(gpu, &pores, NULL, &e), ACCEL_OK);
  ck_assert(memcmp(e_d, ref.data, fx.n * 4) == 0);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] ct.edt failed: "), 1);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, ". CPU fallback."), 1);
  accel_ctx *strict = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_int_eq(accel_ct_edt(strict, &pores, NULL, &e), ACCEL_ERR_DEVICE_MEMORY);
  /* the feature transform over the budget is declined: the CPU answers, even under DENY, with no warning */
  double *fd = malloc(fx.n * 8);
  accel_array dist;
  accel_array_init(&dist, fd, ACCEL_DTYPE_F64, 3, (int64_t[]){fx.d.nz, fx.d.ny, fx.d.nx});
  ck_assert_int_eq(accel_ct_feature_transform(strict, &pores, NULL, NULL, &dist), ACCEL_OK);
  for (uint64_t i = 0; i < fx.n; i++)
    ck_assert_msg((float)fd[i] == ((const float *)ref.data)[i], "voxel %llu", (unsigned long long)i);
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(strict, "ct.feature_transform", &st), ACCEL_OK);
  ck_assert(st.runs == 1 && st.cpu_runs == 1 && st.gpu_runs == 0 && st.fallbacks == 0);
  free(fd);
  accel_ctx_destroy(strict);
  free(e_d);
  free_fixture(&fx);
  accel_ctx_destroy(gpu);
  set_emulated_gpu_budget((uint64_t)1 << 30);
}
END_TEST

/* The pipeline's volumes, in accel_ct_outputs' order. */
enum { PIPE_VOLUMES = 6 };
static const char *const PIPE_NAMES[PIPE_VOLUMES] = {"solid", "filled", "pores", "edt", "markers", "labels"};
static const accel_dtype PIPE_TYPES[PIPE_VOLUMES] = {ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,
                                                     ACCEL_DTYPE_F32, ACCEL_DTYPE_I32, ACCEL_DTYPE_I32};

/* Run `pl` asking for the volumes named in `want` (all when NULL) into
 * fresh buffers vol[k] (NULL for those not asked for). */
static void pipeline_volumes(accel_ct_pipeline *pl, accel_ctx *ctx, const accel_array *in, const char *want,
                             accel__dims d, void *vol[PIPE_VOLUMES]) {
  accel_array a[PIPE_VOLUMES];
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  const accel_array **slot[PIPE_VOLUMES] = {&o.solid, &o.filled, &o.pores, &o.edt, &o.markers, &o.labels};
  for (int k = 0; k < PIPE_VOLUMES; k++) {
    vol[k] = NULL;
    if (!want || strstr(want, PIPE_NAMES[k])) a[k] = new_volume(&vol[k], PIPE_TYPES[k], d), *slot[k] = &a[k];
  }
  ck_assert_msg(accel_ct_pipeline_run(pl, in, NULL, &o) == ACCEL_OK, "%s", accel_last_error(ctx));
}

/* What the emulated GPU's pipeline copied for one run asking for `want`
 * (its statistics' difference), its volumes checked against the CPU's. */
typedef struct bus_bytes {
  uint64_t up, down;
} bus_bytes;

static bus_bytes pipeline_bus_bytes(accel_ctx *gpu, accel_ct_pipeline *pl, const accel_array *in, const char *want,
                                    accel__dims d, void *const cpu[PIPE_VOLUMES]) {
  accel_stage_stats before, after;
  accel_stage_stats_init(&before, sizeof before);
  accel_stage_stats_init(&after, sizeof after);
  if (accel_ctx_stats_find(gpu, "ct.pipeline", &before) != ACCEL_OK)
    before.bytes_uploaded = before.bytes_downloaded = 0;
  void *vol[PIPE_VOLUMES];
  pipeline_volumes(pl, gpu, in, want, d, vol);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "ct.pipeline", &after), ACCEL_OK);
  ck_assert_uint_eq(after.gpu_runs, after.runs);
  for (int k = 0; k < PIPE_VOLUMES; k++) {
    if (!vol[k]) continue;
    ck_assert_msg(memcmp(vol[k], cpu[k], accel__dims_count(d) * accel_dtype_size(PIPE_TYPES[k])) == 0,
                  "%s asked: %s differs from the CPU's", want, PIPE_NAMES[k]);
    free(vol[k]);
  }
  return (bus_bytes){after.bytes_uploaded - before.bytes_uploaded, after.bytes_downloaded - before.bytes_downloaded};
}

/* The GPU pipeline keeps its volumes on the device: the statistics' byte
 * counters show the input going up once and only what was asked for (and
 * what the host stages read) coming back. A pipeline that round-trips an
 * intermediate through the host, or downloads a volume nobody asked for,
 * fails here. */
START_TEST(gpu_pipeline_uploads_once_downloads_what_is_asked) {
  set_emulated_gpu_budget((uint64_t)1 << 30);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_ctx *cpu = cpu_ctx();
  fixture fx;
  load_fixture(&fx, TEST_DATA_DIR "/ct", COMMITTED[1]);
  const uint64_t n = fx.n, isz = accel_dtype_size(view_of(fx.input).dtype);
  accel_array in = view_of(fx.input);
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  po.threshold = fx.threshold;
  po.pores = fx.pores;
  memcpy(po.spacing, fx.spacing, sizeof po.spacing);
  accel_ct_pipeline *pg = NULL, *pc = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(gpu, &po, &pg), ACCEL_OK);
  ck_assert_int_eq(accel_ct_pipeline_create(cpu, &po, &pc), ACCEL_OK);
  void *ref[PIPE_VOLUMES];
  pipeline_volumes(pc, cpu, &in, NULL, fx.d, ref);
  const int w = 2 * po.min_distance + 1;
  const uint64_t window = (uint64_t)(w * w * w - 1) * 12; /* the peak window's offsets (3 int each) */
  struct {
    const char *want;
    uint64_t up, down;
  } cases[] = {
      {"edt", n * isz, n * 4},
      {"solid pores", n * isz, 2 * n},
      {"filled", n * isz, n},
      /* the host stages read the pore mask, the map and the window's roots and flags */
      {"labels", n * isz + window, n + 4 * n + 4 * n + n},
  };
  /* whole copies, then (the last case) through pinned chunks lowered to
   * 100000 bytes: the volumes take 5 to 20 of them, the last one partial */
  const size_t chunk = accel__cuda_pin_chunk;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0] + 1; k++) {
    const size_t c = k < sizeof cases / sizeof cases[0] ? k : k - 1;
    accel__cuda_pin_chunk = c == k ? chunk : 100000;
    const bus_bytes b = pipeline_bus_bytes(gpu, pg, &in, cases[c].want, fx.d, ref);
    ck_assert_msg(b.up == cases[c].up && b.down == cases[c].down,
                  "%s asked (chunk %zu): %llu bytes up, %llu down; expected %llu and %llu", cases[c].want,
                  accel__cuda_pin_chunk, (unsigned long long)b.up, (unsigned long long)b.down,
                  (unsigned long long)cases[c].up, (unsigned long long)cases[c].down);
  }
  accel__cuda_pin_chunk = chunk;
  /* the CPU backend moves nothing */
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(cpu, "ct.pipeline", &st), ACCEL_OK);
  ck_assert(st.bytes_uploaded == 0 && st.bytes_downloaded == 0);
  for (int k = 0; k < PIPE_VOLUMES; k++) free(ref[k]);
  accel_ct_pipeline_destroy(pg);
  accel_ct_pipeline_destroy(pc);
  free_fixture(&fx);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}
END_TEST

/* One CT stage on a small volume of blobs, and the CPU's answer. */
enum { CT_STAGES = 8 };
typedef struct ct_case {
  accel__dims d;
  int op; /* rescale, threshold, fill 6, fill 26, edt, markers, pipeline, feature transform */
  void *raw_d, *solid_d, *pores_d, *edt_d;
  accel_array raw, solid, pores, edt;
  double slope[64], intercept[64];
  void *want_d[CT_STAGES], *want2_d; /* the CPU's outputs (the pipeline's labels and filled volume) */
} ct_case;

static const accel_dtype CT_OUT[CT_STAGES] = {ACCEL_DTYPE_F32, ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,  ACCEL_DTYPE_U8,
                                              ACCEL_DTYPE_F32, ACCEL_DTYPE_I32, ACCEL_DTYPE_I32, ACCEL_DTYPE_F64};

static accel_status ct_stage(accel_ctx *ctx, ct_case *c, int op, void *out_d, void *out2_d) {
  accel_array out, out2;
  const int64_t shape[3] = {c->d.nz, c->d.ny, c->d.nx};
  accel_array_init(&out, out_d, CT_OUT[op], 3, shape);
  accel_array_init(&out2, out2_d, ACCEL_DTYPE_U8, 3, shape);
  const double sp[3] = {1.5, 1.0, 0.75};
  switch (op) {
  case 0: return accel_ct_rescale(ctx, &c->raw, c->slope, c->intercept, &out);
  case 1: return accel_ct_threshold(ctx, &c->raw, 0, ACCEL_CT_GREATER, &out);
  case 2: return accel_ct_fill_holes(ctx, &c->solid, ACCEL_CT_FACES, &out);
  case 3: return accel_ct_fill_holes(ctx, &c->solid, ACCEL_CT_CORNERS, &out);
  case 4: return accel_ct_edt(ctx, &c->pores, sp, &out);
  case 5: return accel_ct_markers(ctx, &c->edt, &c->pores, NULL, &out, NULL);
  case 7: return accel_ct_feature_transform(ctx, &c->pores, sp, NULL, &out);
  default: {
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.threshold = 0;
    po.pores = ACCEL_CT_PORES_CLOSED;
    memcpy(po.spacing, sp, sizeof sp);
    accel_ct_pipeline *pl = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &pl), ACCEL_OK);
    accel_ct_outputs o;
    accel_ct_outputs_init(&o, sizeof o);
    o.labels = &out;
    o.filled = &out2;
    const accel_status s = accel_ct_pipeline_run(pl, &c->raw, NULL, &o);
    accel_ct_pipeline_destroy(pl);
    return s;
  }
  }
}

static accel_status ct_on_gpu(accel_ctx *ctx, void *user) {
  ct_case *c = user;
  const uint64_t n = accel__dims_count(c->d);
  void *out_d, *out2_d;
  new_volume(&out_d, CT_OUT[c->op], c->d);
  new_volume(&out2_d, ACCEL_DTYPE_U8, c->d);
  const accel_status s = ct_stage(ctx, c, c->op, out_d, out2_d);
  if (!s) {
    ck_assert_msg(memcmp(out_d, c->want_d[c->op], n * accel_dtype_size(CT_OUT[c->op])) == 0, "stage %d differs", c->op);
    if (c->op == 6) ck_assert_msg(memcmp(out2_d, c->want2_d, n) == 0, "the pipeline's filled volume differs");
  }
  free(out_d);
  free(out2_d);
  return s;
}

/* Every CUDA call of every CT stage is checked, whole volumes and in slabs:
 * a failure at any call falls back with the error's name (fill holes in
 * slabs reported a failed memset as cudaErrorUnknown). */
START_TEST(gpu_stage_failures_fall_back_in_emulation) {
  static ct_case c;
  memset(&c, 0, sizeof c);
  c.d = (accel__dims){20, 32, 36};
  const uint64_t n = accel__dims_count(c.d);
  c.raw = new_volume(&c.raw_d, ACCEL_DTYPE_I16, c.d);
  c.solid = new_volume(&c.solid_d, ACCEL_DTYPE_U8, c.d);
  c.pores = new_volume(&c.pores_d, ACCEL_DTYPE_U8, c.d);
  c.edt = new_volume(&c.edt_d, ACCEL_DTYPE_F32, c.d);
  int16_t *raw = c.raw_d;
  for (uint64_t i = 0; i < n; i++) { /* blobs and noise: solid with closed holes */
    const double x = (double)(i % 36), y = (double)(i / 36 % 32), z = (double)(i / (36 * 32));
    raw[i] = (int16_t)(300 * sin(x / 2.3) * sin(y / 1.9) * cos(z / 2.7) + 120 + (double)(rnd() % 160) - 80);
  }
  for (int z = 0; z < 20; z++) {
    c.slope[z] = 1 + z * 0.125;
    c.intercept[z] = -1024 + z;
  }
  accel_ctx *cpu = cpu_ctx();
  ck_assert_int_eq(accel_ct_threshold(cpu, &c.raw, 0, ACCEL_CT_GREATER, &c.solid), ACCEL_OK);
  ck_assert_int_eq(accel_ct_fill_holes(cpu, &c.solid, ACCEL_CT_FACES, &c.pores), ACCEL_OK);
  uint64_t holes = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint8_t *p = c.pores_d;
    p[i] = (uint8_t)(p[i] && !((uint8_t *)c.solid_d)[i]);
    holes += p[i];
  }
  ck_assert_uint_gt(holes, 10);
  ck_assert_int_eq(accel_ct_edt(cpu, &c.pores, (const double[]){1.5, 1.0, 0.75}, &c.edt), ACCEL_OK);
  for (int op = 0; op < CT_STAGES; op++) new_volume(&c.want_d[op], CT_OUT[op], c.d);
  new_volume(&c.want2_d, ACCEL_DTYPE_U8, c.d);
  for (int op = 0; op < CT_STAGES; op++) ck_assert_int_eq(ct_stage(cpu, &c, op, c.want_d[op], c.want2_d), ACCEL_OK);
  accel_ctx_destroy(cpu);
  static const char *const stages[CT_STAGES] = {"ct.rescale", "ct.threshold", "ct.fill_holes", "ct.fill_holes",
                                                "ct.edt",     "ct.markers",   "ct.pipeline",   "ct.feature_transform"};
  /* the whole volume, then a budget that sends fill holes, the EDT and the peak window through slabs
   * (staged while the previous slab runs, then one after the other) */
  const uint64_t budgets[3] = {(uint64_t)1 << 30, 100000, 100000};
  for (int b = 0; b < 3; b++) {
    set_emulated_gpu_budget(budgets[b]);
    accel__cuda_overlap = b < 2;
    for (c.op = 0; c.op < CT_STAGES; c.op++)
      if (b == 0 || c.op != 7) /* the feature transform leaves volumes over the budget to the CPU */
        ck_assert_int_ge(emulated_fault_sweep(stages[c.op], ct_on_gpu, &c), 3);
  }
  accel__cuda_overlap = true;
  set_emulated_gpu_budget((uint64_t)1 << 30);
  for (int op = 0; op < CT_STAGES; op++) free(c.want_d[op]);
  free(c.want2_d);
  free(c.raw_d);
  free(c.solid_d);
  free(c.pores_d);
  free(c.edt_d);
}
END_TEST
#endif

/* ------------------------------------------------------------ the wide path
 *
 * Volumes beyond accel__ct_index_limit voxels label with uint64 indices.
 * Lowering the limit below a small volume's voxel count runs that path here:
 * its outputs must equal the 32-bit path's bit for bit, stage by stage, on
 * the CPU and on the emulated GPU (whole and in slabs). */

/* Outputs of every stage, appended in order. */
typedef struct record {
  uint8_t *bytes;
  size_t n;
  int items;
  const char *name[64];
  size_t at[65];
} record;

static void rec_add(record *r, const char *name, const void *p, size_t bytes) {
  ck_assert_int_lt(r->items, 64);
  r->bytes = realloc(r->bytes, r->n + bytes + 1);
  ck_assert_ptr_nonnull(r->bytes);
  memcpy(r->bytes + r->n, p, bytes);
  r->name[r->items] = name;
  r->at[r->items++] = r->n;
  r->n += bytes;
  r->at[r->items] = r->n;
}

/* The first item where b differs from a, or NULL. */
static const char *rec_differs(const record *a, const record *b) {
  if (a->items != b->items) return "the number of outputs";
  for (int k = 0; k < a->items; k++)
    if (a->at[k + 1] - a->at[k] != b->at[k + 1] - b->at[k] ||
        memcmp(a->bytes + a->at[k], b->bytes + b->at[k], a->at[k + 1] - a->at[k]) != 0)
      return a->name[k];
  return NULL;
}

/* A 24x20x18 gray volume: solid (200) with 30 balls of pore (40), some
 * closed (holes to fill), some cut by the faces, many touching others. */
static const accel__dims WIDE_D = {24, 20, 18};

static void wide_volume(uint8_t *v) {
  const accel__dims d = WIDE_D;
  memset(v, 200, accel__dims_count(d));
  rng = 12345;
  for (int b = 0; b < 30; b++) {
    const double cz = rnd() % 24, cy = rnd() % 20, cx = rnd() % 18, r = 1.2 + (rnd() % 30) / 10.0;
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++)
        for (int64_t x = 0; x < d.nx; x++)
          if ((z - cz) * (z - cz) + (y - cy) * (y - cy) + (x - cx) * (x - cx) <= r * r)
            v[(z * d.ny + y) * d.nx + x] = 40;
  }
  for (int64_t z = 10; z < 15; z++) /* and a closed cavity: 3^3 pore in a 5^3 shell */
    for (int64_t y = 8; y < 13; y++)
      for (int64_t x = 7; x < 12; x++)
        v[(z * d.ny + y) * d.nx + x] = z % 14 > 10 && y % 12 > 8 && x % 11 > 7 ? 40 : 200;
}

static void rec_network(record *r, accel_ctx *ctx, const char *name, accel_ct_network *net, size_t min_regions) {
  size_t nreg = 0, nth = 0;
  double porosity = 0;
  ck_assert_msg(net != NULL, "%s: no network (%s)", name, accel_last_error(ctx));
  ck_assert_int_eq(accel_ct_network_info(net, &nreg, &nth, &porosity), ACCEL_OK);
  ck_assert_uint_ge(nreg, min_regions); /* not vacuous */
  const size_t bytes = sizeof porosity + nreg * sizeof(accel_ct_region) + nth * sizeof(accel_ct_throat);
  uint8_t *all = calloc(1, bytes), *at = all;
  memcpy(at, &porosity, sizeof porosity);
  at += sizeof porosity;
  for (size_t i = 0; i < nreg; i++, at += sizeof(accel_ct_region)) {
    accel_ct_region g;
    memset(&g, 0, sizeof g);
    g.struct_size = sizeof g;
    ck_assert_int_eq(accel_ct_network_region(net, i, &g), ACCEL_OK);
    memcpy(at, &g, sizeof g);
  }
  for (size_t i = 0; i < nth; i++, at += sizeof(accel_ct_throat)) {
    accel_ct_throat t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    ck_assert_int_eq(accel_ct_network_throat(net, i, &t), ACCEL_OK);
    memcpy(at, &t, sizeof t);
  }
  rec_add(r, name, all, bytes);
  free(all);
  accel_ct_network_destroy(net);
}

/* The pipeline (closed pores with both trims and the network; all pores,
 * stable ties) into r. */
static void wide_pipelines(accel_ctx *ctx, const accel_array *in, record *r) {
  const accel__dims d = WIDE_D;
  const uint64_t n = accel__dims_count(d);
  void *f_d, *e_d, *m_d, *l_d;
  accel_array f = new_volume(&f_d, ACCEL_DTYPE_U8, d), e = new_volume(&e_d, ACCEL_DTYPE_F32, d),
              m = new_volume(&m_d, ACCEL_DTYPE_I32, d), l = new_volume(&l_d, ACCEL_DTYPE_I32, d);
  for (int k = 0; k < 2; k++) {
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.threshold = 100;
    po.min_distance = 1;
    po.pores = k ? ACCEL_CT_PORES_ALL : ACCEL_CT_PORES_CLOSED;
    po.trim = k ? 0 : ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY;
    po.ties = k ? ACCEL_CT_TIES_STABLE : ACCEL_CT_TIES_SKIMAGE;
    accel_ct_pipeline *pl = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &pl), ACCEL_OK);
    accel_ct_outputs o;
    accel_ct_outputs_init(&o, sizeof o);
    o.filled = &f;
    o.edt = &e;
    o.markers = &m;
    o.labels = &l;
    accel_ct_network *net = NULL;
    o.network = &net;
    ck_assert_msg(accel_ct_pipeline_run(pl, in, NULL, &o) == ACCEL_OK, "%s", accel_last_error(ctx));
    rec_add(r, "pipeline filled", f_d, n);
    rec_add(r, "pipeline edt", e_d, n * 4);
    rec_add(r, "pipeline markers", m_d, n * 4);
    rec_add(r, "pipeline labels", l_d, n * 4);
    rec_add(r, "pipeline marker count", &o.marker_count, sizeof o.marker_count);
    rec_network(r, ctx, "pipeline network", net, k ? 4 : 1); /* all pores; the closed cavity */
    accel_ct_pipeline_destroy(pl);
  }
  free(f_d);
  free(e_d);
  free(m_d);
  free(l_d);
}

/* The watersheds (scikit-image's ties, stable ties, a sparse mask, the
 * general flood with the watershed line) and the network, into r. */
static void wide_watersheds(accel_ctx *ctx, const accel_array *edt, const accel_array *markers,
                            const accel_array *pores, record *r) {
  const accel__dims d = WIDE_D;
  const uint64_t n = accel__dims_count(d);
  void *neg_d, *l_d, *sparse_d;
  accel_array neg = new_volume(&neg_d, ACCEL_DTYPE_F32, d), l = new_volume(&l_d, ACCEL_DTYPE_I32, d),
              sparse = new_volume(&sparse_d, ACCEL_DTYPE_U8, d);
  uint64_t insparse = 0;
  for (uint64_t i = 0; i < n; i++) {
    ((float *)neg_d)[i] = -((const float *)edt->data)[i];
    /* the first two planes' pores: under an eighth of the volume (the sparse flood) */
    ((uint8_t *)sparse_d)[i] = (uint8_t)(i < 2 * (uint64_t)(d.ny * d.nx) && ((const uint8_t *)pores->data)[i]);
    insparse += ((uint8_t *)sparse_d)[i];
  }
  ck_assert_uint_gt(insparse, 10);
  for (int k = 0; k < 4; k++) {
    accel_ct_watershed_options wo;
    accel_ct_watershed_options_init(&wo, sizeof wo);
    wo.ties = k == 1 ? ACCEL_CT_TIES_STABLE : ACCEL_CT_TIES_SKIMAGE;
    wo.connectivity = k == 3 ? 2 : 1;
    wo.watershed_line = k == 3;
    const accel_array *mask = k == 2 ? &sparse : pores;
    ck_assert_msg(accel_ct_watershed(ctx, &neg, markers, mask, &wo, &l) == ACCEL_OK, "%s", accel_last_error(ctx));
    rec_add(r, "watershed", l_d, n * 4);
  }
  accel_ct_watershed(ctx, &neg, markers, pores, NULL, &l);
  accel_ct_network *net = NULL;
  const double sp[3] = {1.5, 1.0, 0.5};
  ck_assert_int_eq(accel_ct_network_build(ctx, &l, edt, sp, &net), ACCEL_OK);
  rec_network(r, ctx, "network", net, 4);
  free(neg_d);
  free(l_d);
  free(sparse_d);
}

/* Every stage on ctx into r (cleared first). */
static void wide_stages(accel_ctx *ctx, record *r) {
  const accel__dims d = WIDE_D;
  const uint64_t n = accel__dims_count(d);
  free(r->bytes);
  memset(r, 0, sizeof *r);
  void *g_d, *s_d, *f_d, *p_d, *e_d, *m_d;
  accel_array g = new_volume(&g_d, ACCEL_DTYPE_U8, d), s = new_volume(&s_d, ACCEL_DTYPE_U8, d),
              f = new_volume(&f_d, ACCEL_DTYPE_U8, d), p = new_volume(&p_d, ACCEL_DTYPE_U8, d),
              e = new_volume(&e_d, ACCEL_DTYPE_F32, d), m = new_volume(&m_d, ACCEL_DTYPE_I32, d);
  wide_volume(g_d);
  ck_assert_int_eq(accel_ct_threshold(ctx, &g, 100, ACCEL_CT_GREATER, &s), ACCEL_OK);
  for (int k = 0; k < 4; k++) { /* the solid's holes and the pores' (6, 26) */
    ck_assert_msg(accel_ct_fill_holes(ctx, k < 2 ? &s : &p, k % 2 ? ACCEL_CT_CORNERS : ACCEL_CT_FACES, &f) == ACCEL_OK,
                  "%s", accel_last_error(ctx));
    rec_add(r, "fill holes", f_d, n);
    if (k == 1) { /* the pores: all but the solid; some of them closed */
      uint64_t closed = 0;
      for (uint64_t i = 0; i < n; i++) {
        ((uint8_t *)p_d)[i] = !((uint8_t *)s_d)[i];
        closed += ((uint8_t *)f_d)[i] && !((uint8_t *)s_d)[i];
      }
      ck_assert_uint_ge(closed, 27);
    }
  }
  ck_assert_msg(accel_ct_edt(ctx, &p, NULL, &e) == ACCEL_OK, "%s", accel_last_error(ctx));
  rec_add(r, "edt", e_d, n * 4);
  for (int k = 0; k < 2; k++) { /* a plain peak search; one with both trims */
    accel_ct_marker_options mo;
    accel_ct_marker_options_init(&mo, sizeof mo);
    mo.min_distance = k ? 1 : 2;
    mo.trim = k ? ACCEL_CT_TRIM_SADDLES | ACCEL_CT_TRIM_NEARBY : 0;
    uint32_t count = 0;
    ck_assert_msg(accel_ct_markers(ctx, &e, &p, &mo, &m, &count) == ACCEL_OK, "%s", accel_last_error(ctx));
    ck_assert_uint_gt(count, 3);
    rec_add(r, "markers", m_d, n * 4);
    rec_add(r, "marker count", &count, sizeof count);
  }
  wide_watersheds(ctx, &e, &m, &p, r);
  wide_pipelines(ctx, &g, r);
  free(g_d);
  free(s_d);
  free(f_d);
  free(p_d);
  free(e_d);
  free(m_d);
}

/* The components themselves, 32-bit and wide: the same roots. */
static void wide_components_equal(void) {
  const accel__dims d = WIDE_D;
  const uint64_t n = accel__dims_count(d);
  uint8_t *g = malloc(n);
  uint32_t *r32 = malloc(n * 4);
  uint64_t *r64 = malloc(n * 8), np = 0;
  wide_volume(g);
  for (uint64_t i = 0; i < n; i++) g[i] = g[i] == 40; /* the pores */
  for (int conn = 6; conn <= 26; conn += 20)
    for (int set = 0; set < 2; set++) { /* the solid's components, then the pores' */
      ck_assert_int_eq(accel__ct_components(g, d, set, conn, 3, r32), ACCEL_OK);
      ck_assert_int_eq(accel__ct_components_wide(g, d, set, conn, 3, r64), ACCEL_OK);
      for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(r32[i] == ACCEL__CT_NONE ? r64[i] == UINT64_MAX : r64[i] == r32[i],
                      "components conn %d: root of %llu", conn, (unsigned long long)i);
    }
  uint32_t *l32 = accel__ct_mask_list(g, n, &np);
  uint64_t *l64 = accel__ct_mask_list_wide(g, n, &np);
  ck_assert_int_eq(accel__ct_components_list(g, d, l32, np, 26, 2, r32), ACCEL_OK);
  ck_assert_int_eq(accel__ct_components_list_wide(g, d, l64, np, 26, 2, r64), ACCEL_OK);
  for (uint64_t k = 0; k < np; k++) ck_assert_uint_eq(r32[l32[k]], r64[l64[k]]);
  free(l32);
  free(l64);
  free(g);
  free(r32);
  free(r64);
}

START_TEST(wide_labels_equal_32_bit_labels) {
  wide_components_equal();
  accel_ctx *ctx = cpu_ctx();
  record narrow = {0}, wide = {0};
  wide_stages(ctx, &narrow);
  accel__ct_index_limit = 1000; /* below the 8640 voxels: every stage takes the wide path */
  wide_stages(ctx, &wide);
  accel__ct_index_limit = ACCEL__CT_INDEX_LIMIT_DEFAULT;
  const char *bad = rec_differs(&narrow, &wide);
  ck_assert_msg(bad == NULL, "the wide path's %s differs from the 32-bit path's", bad);
#if EXPECT_CUDA
  /* the emulated GPU, whole and in slabs of a few planes, wide and 32-bit */
  static const uint64_t budgets[2] = {(uint64_t)1 << 30, 60000};
  for (int b = 0; b < 2; b++)
    for (int lowered = 0; lowered < 2; lowered++) {
      set_emulated_gpu_budget(budgets[b]);
      log_capture cap = {0};
      accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
      if (lowered) accel__ct_index_limit = 1000;
      wide_stages(gpu, &wide);
      accel__ct_index_limit = ACCEL__CT_INDEX_LIMIT_DEFAULT;
      bad = rec_differs(&narrow, &wide);
      ck_assert_msg(bad == NULL, "the emulated GPU's %s (budget %llu, %s labels) differs from the CPU's", bad,
                    (unsigned long long)budgets[b], lowered ? "wide" : "32-bit");
      const char *stages[] = {"ct.fill_holes", "ct.edt", "ct.markers", "ct.pipeline"};
      for (int k = 0; k < 4; k++) {
        accel_stage_stats st;
        accel_stage_stats_init(&st, sizeof st);
        ck_assert_int_eq(accel_ctx_stats_find(gpu, stages[k], &st), ACCEL_OK);
        ck_assert_msg(st.gpu_runs == st.runs && st.runs > 0, "%s ran on the CPU", stages[k]);
      }
      ck_assert_int_eq(cap.n, 0);
      accel_ctx_destroy(gpu);
    }
  set_emulated_gpu_budget((uint64_t)1 << 30);
#endif
  free(narrow.bytes);
  free(wide.bytes);
  accel_ctx_destroy(ctx);
}
END_TEST

/* The committed fixtures against SciPy's and scikit-image's outputs, on the wide path. */
START_TEST(wide_fixtures_equal_the_references) {
  accel__ct_index_limit = 1000;
  fixture_equals_the_references(TEST_DATA_DIR "/ct", COMMITTED[_i]);
  accel__ct_index_limit = ACCEL__CT_INDEX_LIMIT_DEFAULT;
}
END_TEST

#if EXPECT_CUDA
/* The emulated GPU on the committed fixtures, wide, whole and in slabs:
 * equal to the CPU, and the pipeline's labels to scikit-image's. */
START_TEST(wide_gpu_stages_equal_cpu_in_emulation) {
  accel__ct_index_limit = 1000;
  /* the slabs' budget: a little more than the 32-bit test's, for the 64-bit labels of 7 planes */
  gpu_equals_cpu(_i ? 1700000 : (uint64_t)1 << 30, _i ? "wide slabs" : "wide whole volume");
  accel__ct_index_limit = ACCEL__CT_INDEX_LIMIT_DEFAULT;
}
END_TEST
#endif

/* Volumes beyond what any memory holds: a clear error, before any allocation. */
/* A view of shape (n, n, n) of one byte, every stride 0. */
static accel_array everywhere(uint8_t *one, int64_t n) {
  accel_array a;
  memset(&a, 0, sizeof a);
  a.data = one;
  a.dtype = ACCEL_DTYPE_U8;
  a.ndim = 3;
  a.shape[0] = a.shape[1] = a.shape[2] = n;
  return a;
}

START_TEST(oversized_volumes_are_errors) {
  accel_ctx *ctx = cpu_ctx();
  static uint8_t one;
  accel_array big = everywhere(&one, (int64_t)1 << 15); /* 2^45 voxels */
  ck_assert_int_eq(accel_ct_fill_holes(ctx, &big, ACCEL_CT_FACES, &big), ACCEL_ERR_LIMIT);
  ck_assert_msg(strstr(accel_last_error(ctx), "at most 2^44") != NULL, "%s", accel_last_error(ctx));
  big = everywhere(&one, (int64_t)1 << 22); /* 2^66: no int64 holds the count */
  ck_assert_int_eq(accel_ct_fill_holes(ctx, &big, ACCEL_CT_FACES, &big), ACCEL_ERR_INVALID_ARG);
  ck_assert_msg(strstr(accel_last_error(ctx), "too many elements") != NULL, "%s", accel_last_error(ctx));
  accel_ctx_destroy(ctx);
}
END_TEST

Suite *suite_ct(void) {
  TCase *tc = new_case("stages", 300, NULL, NULL);
  tcase_add_loop_test(tc, committed_fixtures_equal_the_references, 0, 2);
  tcase_add_test(tc, trims_equal_porespy);
  tcase_add_test(tc, nearby_trim_equals_all_pairs);
  tcase_add_test(tc, edt_equals_brute_force);
  tcase_add_test(tc, feature_transform_equals_brute_force);
  tcase_add_test(tc, gpu_union_find_with_threads);
  tcase_add_test(tc, fill_holes_equals_a_flood_from_the_border);
  tcase_add_test(tc, threshold_and_rescale);
  tcase_add_test(tc, pipeline_refuses_non_finite_rescale);
  tcase_add_test(tc, argsort_orders_ties_as_numpy);
  tcase_add_test(tc, watershed_plateau_and_mask);
  tcase_add_test(tc, watershed_options_by_hand);
  tcase_add_test(tc, network_equals_direct_sums);
  tcase_add_test(tc, bad_arguments_are_errors);
  tcase_add_test(tc, strided_views);
  tcase_add_test(tc, raw_files);
  tcase_add_test(tc, wide_labels_equal_32_bit_labels);
  tcase_add_loop_test(tc, wide_fixtures_equal_the_references, 0, 2);
  tcase_add_test(tc, oversized_volumes_are_errors);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_stages_equal_cpu_in_emulation);
  tcase_add_test(tc, gpu_edt_rows_equal_cpu_in_emulation);
  tcase_add_test(tc, gpu_slabs_equal_cpu_in_emulation);
  tcase_add_test(tc, gpu_pipeline_uploads_once_downloads_what_is_asked);
  tcase_add_test(tc, gpu_too_small_a_budget_falls_back);
  tcase_add_test(tc, gpu_stage_failures_fall_back_in_emulation);
  tcase_add_loop_test(tc, wide_gpu_stages_equal_cpu_in_emulation, 0, 2);
#endif
  return suite_of("ct", tc);
}

ACCEL_TEST_MAIN_SHARED(suite_ct, CT_SHARED)
