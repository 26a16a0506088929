/* Device arrays (accel_array_on_device): the flag, the refusals, and on the
 * emulated GPU (whose "device" memory is host memory) the CT stages that use
 * them in place, their byte counters, their slab paths and their CPU
 * fallback. */
#include "emulated_gpu.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

enum { NZ = 9, NY = 11, NX = 13, N = NZ * NY * NX };
static const int64_t SHAPE[3] = {NZ, NY, NX};

/* A volume of the given dtype over `data`, marked as device memory when asked. */
static accel_array volume(void *data, accel_dtype dtype, bool device) {
  accel_array a;
  ck_assert_int_eq(accel_array_init(&a, data, dtype, 3, SHAPE), ACCEL_OK);
  if (device) ck_assert_int_eq(accel_array_on_device(&a), ACCEL_OK);
  return a;
}

#if EXPECT_CUDA
/* Gray values with solid walls and closed pores: thresholds at 100 give
 * pores that fill holes closes and an EDT with some range. */
static void make_gray(uint8_t *g) {
  fill_random(g, N, 7);
  for (int z = 0; z < NZ; z++)
    for (int y = 0; y < NY; y++)
      for (int x = 0; x < NX; x++) {
        uint8_t *v = &g[(z * NY + y) * NX + x];
        const bool wall = z == 0 || y == 0 || x == 0 || z == NZ - 1 || y == NY - 1 || x == NX - 1 || x == 6;
        if (wall) *v = 200;
        else if (*v > 230) *v = 150; /* a few solid specks inside */
        else *v = 20;
      }
}

#endif

START_TEST(the_flag_is_a_bit_of_the_dtype) {
  uint8_t byte = 0;
  accel_array a = volume(&byte, ACCEL_DTYPE_F32, false);
  ck_assert_int_eq(accel_array_is_device(&a), 0);
  ck_assert_int_eq(accel_array_on_device(&a), ACCEL_OK);
  ck_assert_int_eq(accel_array_is_device(&a), 1);
  ck_assert_int_eq((int)a.dtype, ACCEL_DTYPE_F32 | ACCEL_DTYPE_DEVICE_FLAG);
  ck_assert_uint_eq(accel_dtype_size(a.dtype), 4);
  ck_assert_int_eq(accel_array_on_device(&a), ACCEL_OK); /* again: no change */
  ck_assert_int_eq((int)a.dtype, ACCEL_DTYPE_F32 | ACCEL_DTYPE_DEVICE_FLAG);
  ck_assert_int_eq(accel_array_is_device(NULL), 0);
  ck_assert_int_eq(accel_array_on_device(NULL), ACCEL_ERR_INVALID_ARG);
  a.dtype = ACCEL_DTYPE_INVALID;
  ck_assert_int_eq(accel_array_on_device(&a), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq((int)a.dtype, ACCEL_DTYPE_INVALID);
  ck_assert_uint_eq(accel_dtype_size(ACCEL_DTYPE_DEVICE_FLAG), 0); /* no plain dtype */
  /* accel_array_init describes host arrays: a flagged dtype is refused */
  ck_assert_int_eq(accel_array_init(&a, &byte, (accel_dtype)(ACCEL_DTYPE_U8 | ACCEL_DTYPE_DEVICE_FLAG), 3, SHAPE),
                   ACCEL_ERR_INVALID_ARG);
}
END_TEST

/* On the CPU, device memory is refused before anything reads it: the data
 * pointers here would crash on a read. */
START_TEST(the_cpu_refuses_device_arrays_unread) {
  accel_ctx *cpu = cpu_ctx();
  void *bogus = (void *)(uintptr_t)16;
  accel_array in = volume(bogus, ACCEL_DTYPE_U8, true), out = volume(bogus, ACCEL_DTYPE_U8, true);
  accel_array fout = volume(bogus, ACCEL_DTYPE_F32, true);
  ck_assert_int_eq(accel_ct_threshold(cpu, &in, 1, ACCEL_CT_GREATER, &out), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "in is device memory"));
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "the context runs on the CPU"));
  ck_assert_int_eq(accel_ct_fill_holes(cpu, &in, ACCEL_CT_FACES, &out), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_edt(cpu, &in, NULL, &fout), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_ct_rescale(cpu, &in, NULL, NULL, &fout), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "accel_ct_rescale: in is device memory"));
  accel_ct_pipeline *p = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(cpu, NULL, &p), ACCEL_OK);
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  o.edt = &fout;
  ck_assert_int_eq(accel_ct_pipeline_run(p, &in, NULL, &o), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "input is device memory"));
  /* a host input with a device output */
  uint8_t host[N];
  memset(host, 0, sizeof host);
  accel_array hin = volume(host, ACCEL_DTYPE_U8, false);
  ck_assert_int_eq(accel_ct_pipeline_run(p, &hin, NULL, &o), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(cpu), "outputs.edt is device memory"));
  accel_ct_pipeline_destroy(p);
  /* functions without a context */
  ck_assert_int_eq(accel_raw_save(cpu, "/nonexistent/x.raw", &in), ACCEL_ERR_INVALID_ARG);
  accel_ctx_destroy(cpu);
}
END_TEST

static void check_refusal(accel_ctx *ctx, const char *call, accel_status got, accel_status want, const char *needle) {
  ck_assert_msg(got == want && strstr(accel_last_error(ctx), needle), "%s: %s (%s), expected %s with \"%s\"", call,
                accel_status_string(got), accel_last_error(ctx), accel_status_string(want), needle);
}

/* Every other function taking arrays, with a device array among valid
 * host arguments: the refusal names the device memory (the data pointer
 * would crash on a read). */
static void refuse_everywhere(accel_ctx *ctx, accel_status want, const char *needle, bool gpu) {
  static uint8_t host8[N];
  static float hostf[N];
  static int32_t host32[N];
  void *bogus = (void *)(uintptr_t)16;
  accel_array d8 = volume(bogus, ACCEL_DTYPE_U8, true), df = volume(bogus, ACCEL_DTYPE_F32, true);
  accel_array hf = volume(hostf, ACCEL_DTYPE_F32, false);
  accel_array h32 = volume(host32, ACCEL_DTYPE_I32, false);
  accel_array img;
  ck_assert_int_eq(accel_array_init(&img, bogus, ACCEL_DTYPE_U8, 2, (int64_t[]){NY, NX}), ACCEL_OK);
  ck_assert_int_eq(accel_array_on_device(&img), ACCEL_OK);
  accel_array himg;
  ck_assert_int_eq(accel_array_init(&himg, host8, ACCEL_DTYPE_U8, 2, (int64_t[]){NY, NX}), ACCEL_OK);
  uint32_t count = 0;
  uint8_t hash[64];
  accel_status st[1];
  accel_ct_network *net = NULL;
  accel_reg_transform *t = NULL;
  const accel_array *grids[1] = {&img};
  accel_svf_options so;
  accel_svf_options_init(&so, sizeof so);
  so.pixel_size = 1;
#define REFUSED(call) check_refusal(ctx, #call, (call), want, needle)
  REFUSED(accel_ct_rescale(ctx, &d8, NULL, NULL, &hf));
  REFUSED(accel_ct_feature_transform(ctx, &d8, NULL, NULL, &hf));
  REFUSED(accel_ct_markers(ctx, &df, NULL, NULL, &h32, &count));
  REFUSED(accel_ct_trim_markers(ctx, &df, &h32, NULL, &h32, &count));
  REFUSED(accel_ct_watershed(ctx, &df, &h32, NULL, NULL, &h32));
  REFUSED(accel_ct_network_build(ctx, &h32, &df, NULL, &net));
  if (!gpu) REFUSED(accel_hash_arrays(ctx, &img, 1, NULL, hash, sizeof hash, st));
  REFUSED(accel_image_to_gray(ctx, &img, &himg));
  REFUSED(accel_npy_save(ctx, "/nonexistent/x.npy", &d8));
  REFUSED(accel_raw_save(ctx, "/nonexistent/x.raw", &d8));
  REFUSED(accel_pnm_save(ctx, "/nonexistent/x.pgm", &img));
  REFUSED(accel_tiff_save(ctx, "/nonexistent/x.tif", &img, NULL));
  REFUSED(accel_tiff_save_image(ctx, "/nonexistent/x.tif", &img, NULL));
  if (!gpu) REFUSED(accel_reg_register(ctx, &img, &himg, NULL, NULL, NULL, &t, NULL));
  if (!gpu) REFUSED(accel_svf_shadows(ctx, &img, NULL, NULL, 90, 45, &so, &himg, NULL, NULL));
  if (!gpu) REFUSED(accel_svf_sky(ctx, &img, NULL, NULL, &so, grids, NULL));
#undef REFUSED
  ck_assert_ptr_null(net);
  ck_assert_ptr_null(t);
}

START_TEST(every_function_refuses_device_arrays_on_the_cpu) {
  accel_ctx *cpu = cpu_ctx();
  refuse_everywhere(cpu, ACCEL_ERR_INVALID_ARG, "device memory", false);
  accel_ctx_destroy(cpu);
}
END_TEST

#if EXPECT_CUDA
START_TEST(every_other_function_refuses_device_arrays_on_the_gpu) {
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, NULL);
  refuse_everywhere(gpu, ACCEL_ERR_UNSUPPORTED, "device arrays are not supported by", true);
  accel_ctx_destroy(gpu);
}
END_TEST

/* A stage's byte counters and runs after one call. */
static accel_stage_stats stats_of(accel_ctx *ctx, const char *stage) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  return st;
}

/* The CPU's results of the three stages, from host arrays. */
typedef struct refs {
  uint8_t gray[N], solid[N], filled[N];
  float edt[N];
} refs;

static void make_refs(refs *r) {
  make_gray(r->gray);
  accel_ctx *cpu = cpu_ctx();
  accel_array g = volume(r->gray, ACCEL_DTYPE_U8, false), s = volume(r->solid, ACCEL_DTYPE_U8, false);
  accel_array f = volume(r->filled, ACCEL_DTYPE_U8, false), e = volume(r->edt, ACCEL_DTYPE_F32, false);
  ck_assert_int_eq(accel_ct_threshold(cpu, &g, 100, ACCEL_CT_GREATER, &s), ACCEL_OK);
  ck_assert_int_eq(accel_ct_fill_holes(cpu, &s, ACCEL_CT_FACES, &f), ACCEL_OK);
  ck_assert_int_eq(accel_ct_edt(cpu, &f, NULL, &e), ACCEL_OK);
  accel_ctx_destroy(cpu);
  /* the threshold, written independently */
  int solid = 0;
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(r->solid[i], r->gray[i] > 100);
    solid += r->solid[i];
  }
  ck_assert_int_gt(solid, N / 4);
  ck_assert_int_lt(solid, N);
}

/* Each stage with device arrays in and out (in place, and mixed with a host
 * side): the CPU's results, and no byte of a device array on the bus. */
START_TEST(stages_use_device_arrays_in_place) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  uint8_t *dev_in = malloc(N), *dev_out = malloc(N);
  float *dev_f = malloc(N * 4);
  for (int mode = 0; mode < 3; mode++) { /* both device; device input only; device output only */
    const bool din = mode != 2, dout = mode != 1;
    ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
    memcpy(dev_in, r->gray, N);
    memset(dev_out, 0xEE, N);
    accel_array in = volume(dev_in, ACCEL_DTYPE_U8, din), out = volume(dev_out, ACCEL_DTYPE_U8, dout);
    ck_assert_int_eq(accel_ct_threshold(gpu, &in, 100, ACCEL_CT_GREATER, &out), ACCEL_OK);
    ck_assert_mem_eq(dev_out, r->solid, N);
    accel_stage_stats st = stats_of(gpu, "ct.threshold");
    ck_assert_uint_eq(st.gpu_runs, 1);
    ck_assert_uint_eq(st.bytes_uploaded, din ? 0 : N);
    ck_assert_uint_eq(st.bytes_downloaded, dout ? 0 : N);

    memcpy(dev_in, r->solid, N);
    memset(dev_out, 0xEE, N);
    ck_assert_int_eq(accel_ct_fill_holes(gpu, &in, ACCEL_CT_FACES, &out), ACCEL_OK);
    ck_assert_mem_eq(dev_out, r->filled, N);
    st = stats_of(gpu, "ct.fill_holes");
    ck_assert_uint_eq(st.bytes_uploaded, din ? 0 : N);
    ck_assert_uint_eq(st.bytes_downloaded, dout ? 0 : N);

    memcpy(dev_in, r->filled, N);
    memset(dev_f, 0xEE, N * 4);
    accel_array fout = volume(dev_f, ACCEL_DTYPE_F32, dout);
    ck_assert_int_eq(accel_ct_edt(gpu, &in, NULL, &fout), ACCEL_OK);
    ck_assert_mem_eq(dev_f, r->edt, N * 4);
    st = stats_of(gpu, "ct.edt");
    ck_assert_uint_eq(st.gpu_runs, 1);
    ck_assert_uint_eq(st.bytes_uploaded, din ? 0 : N);
    ck_assert_uint_eq(st.bytes_downloaded, dout ? 0 : N * 4);
  }
  /* fill holes in place: the same device array in and out */
  memcpy(dev_in, r->solid, N);
  accel_array inout = volume(dev_in, ACCEL_DTYPE_U8, true);
  ck_assert_int_eq(accel_ct_fill_holes(gpu, &inout, ACCEL_CT_FACES, &inout), ACCEL_OK);
  ck_assert_mem_eq(dev_in, r->filled, N);
  free(dev_in);
  free(dev_out);
  free(dev_f);
  free(r);
  accel_ctx_destroy(gpu);
}
END_TEST

/* Beyond the budget (slabs), device arrays go through host copies: the
 * same results, their bytes counted. */
START_TEST(slabs_copy_device_arrays_through_the_host) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  set_emulated_gpu_budget(4 * NY * NX * 12); /* a few planes */
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  set_emulated_gpu_budget(0);
  uint8_t *dev_in = malloc(N), *dev_out = malloc(N);
  float *dev_f = malloc(N * 4);
  accel_array in = volume(dev_in, ACCEL_DTYPE_U8, true), out = volume(dev_out, ACCEL_DTYPE_U8, true);
  accel_array fout = volume(dev_f, ACCEL_DTYPE_F32, true);
  memcpy(dev_in, r->solid, N);
  ck_assert_int_eq(accel_ct_fill_holes(gpu, &in, ACCEL_CT_FACES, &out), ACCEL_OK);
  ck_assert_mem_eq(dev_out, r->filled, N);
  accel_stage_stats st = stats_of(gpu, "ct.fill_holes");
  ck_assert_uint_eq(st.gpu_runs, 1);
  ck_assert_uint_ge(st.bytes_downloaded, N); /* the mask to the host copy, the slabs' labels */
  memcpy(dev_in, r->filled, N);
  ck_assert_int_eq(accel_ct_edt(gpu, &in, NULL, &fout), ACCEL_OK);
  ck_assert_mem_eq(dev_f, r->edt, N * 4);
  ck_assert_uint_eq(stats_of(gpu, "ct.edt").gpu_runs, 1);
  memcpy(dev_in, r->gray, N);
  ck_assert_int_eq(accel_ct_threshold(gpu, &in, 100, ACCEL_CT_GREATER, &out), ACCEL_OK);
  ck_assert_mem_eq(dev_out, r->solid, N);
  free(dev_in);
  free(dev_out);
  free(dev_f);
  free(r);
  accel_ctx_destroy(gpu);
}
END_TEST

/* A budget where no plane of the fill's slab path fits, but a check that
 * counted a byte a voxel fewer would pass: fill holes refuses device arrays
 * before any byte of them crosses the bus (strict policy), and under the
 * default policy the CPU rerun copies each across exactly once. */
START_TEST(fill_refuses_device_arrays_without_copies_when_no_plane_fits) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  /* 90% of it (slab_planes' headroom) holds 8.5 bytes a voxel of a plane;
   * the slab path with 32-bit labels needs 9 (2 staged, 4 labels, 3) */
  const uint64_t budget = (uint64_t)NY * NX * 85 / 9;
  uint8_t *dev_in = malloc(N), *dev_out = malloc(N);
  accel_array in = volume(dev_in, ACCEL_DTYPE_U8, true), out = volume(dev_out, ACCEL_DTYPE_U8, true);
  for (int strict = 1; strict >= 0; strict--) {
    set_emulated_gpu_budget(budget);
    log_capture cap = {0};
    accel_ctx *gpu = make_emulated_gpu_ctx(strict ? ACCEL_FALLBACK_DENY : ACCEL_FALLBACK_ALLOW, &cap);
    set_emulated_gpu_budget(0);
    memcpy(dev_in, r->solid, N);
    memset(dev_out, 0xEE, N);
    const accel_status s = accel_ct_fill_holes(gpu, &in, ACCEL_CT_FACES, &out);
    accel_stage_stats st = stats_of(gpu, "ct.fill_holes");
    if (strict) {
      ck_assert_int_eq(s, ACCEL_ERR_DEVICE_MEMORY);
      ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "one plane of fill holes needs more than the device budget"));
      ck_assert_uint_eq(st.bytes_downloaded, 0);
      ck_assert_uint_eq(st.bytes_uploaded, 0);
      ck_assert_mem_eq(dev_in, r->solid, N);
    } else {
      ck_assert_int_eq(s, ACCEL_OK);
      ck_assert_mem_eq(dev_out, r->filled, N);
      ck_assert_uint_eq(st.fallbacks, 1);
      ck_assert_uint_eq(st.bytes_downloaded, N); /* the mask, once, for the CPU */
      ck_assert_uint_eq(st.bytes_uploaded, N);   /* the filled volume */
      ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] ct.fill_holes failed: "), 1);
    }
    accel_ctx_destroy(gpu);
  }
  free(dev_in);
  free(dev_out);
  free(r);
}
END_TEST

/* Functions without a device path refuse device arrays on a GPU context,
 * and so do strided device arrays. */
START_TEST(the_gpu_refuses_what_it_cannot_take) {
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, NULL);
  static int16_t raw[N];
  static float f[N];
  accel_array in = volume(raw, ACCEL_DTYPE_I16, true), out = volume(f, ACCEL_DTYPE_F32, false);
  ck_assert_int_eq(accel_ct_rescale(gpu, &in, NULL, NULL, &out), ACCEL_ERR_UNSUPPORTED);
  ck_assert_str_eq(accel_last_error(gpu),
                   "accel_ct_rescale: device arrays are not supported by accel_ct_rescale; copy in to the host");
  accel_array mask = volume(raw, ACCEL_DTYPE_U8, true), fo = volume(f, ACCEL_DTYPE_F32, false);
  ck_assert_int_eq(accel_ct_network_build(gpu, &mask, &fo, NULL, &(accel_ct_network *){NULL}), ACCEL_ERR_UNSUPPORTED);
  ck_assert_int_eq(accel_ct_feature_transform(gpu, &mask, NULL, NULL, &fo), ACCEL_ERR_UNSUPPORTED);
  /* strided: every other x */
  accel_array strided = mask;
  strided.shape[2] = NX / 2;
  strided.strides[2] = 2;
  accel_array small = volume(f, ACCEL_DTYPE_U8, true);
  small.shape[2] = NX / 2;
  small.strides[1] = NX / 2, small.strides[0] = NY * (NX / 2);
  ck_assert_int_eq(accel_ct_threshold(gpu, &strided, 1, ACCEL_CT_GREATER, &small), ACCEL_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "in is a strided device array"));
  /* elements at an odd address (a view one byte into a buffer): kernels cannot load them */
  static float g[N + 1];
  accel_array odd = volume(f, ACCEL_DTYPE_F32, true), m8 = volume(raw, ACCEL_DTYPE_U8, true);
  odd.data = (uint8_t *)(void *)g + 1;
  ck_assert_int_eq(accel_ct_threshold(gpu, &odd, 1, ACCEL_CT_GREATER, &m8), ACCEL_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "in is a device array at an address that is not a multiple"));
  accel_ctx_destroy(gpu);
}
END_TEST

/* The pipeline from a device input to device outputs: the CPU's volumes,
 * and nothing on the bus when only device stages' volumes are asked for;
 * markers and labels (made on the host) go up, and what the host stages
 * read comes down. */
START_TEST(pipeline_uses_device_arrays_in_place) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL), *cpu = cpu_ctx();
  accel_ct_pipeline_options po;
  accel_ct_pipeline_options_init(&po, sizeof po);
  po.threshold = 100;
  accel_ct_pipeline *pg = NULL, *pc = NULL;
  ck_assert_int_eq(accel_ct_pipeline_create(gpu, &po, &pg), ACCEL_OK);
  ck_assert_int_eq(accel_ct_pipeline_create(cpu, &po, &pc), ACCEL_OK);
  uint8_t *solid = malloc(N), *filled = malloc(N), *pores = malloc(N), *in = malloc(N);
  float *edt = malloc(N * 4);
  int32_t *labels = malloc(N * 4), *ref_labels = malloc(N * 4);
  memcpy(in, r->gray, N);
  accel_array din = volume(in, ACCEL_DTYPE_U8, true), ds = volume(solid, ACCEL_DTYPE_U8, true);
  accel_array df = volume(filled, ACCEL_DTYPE_U8, true), dp = volume(pores, ACCEL_DTYPE_U8, true);
  accel_array de = volume(edt, ACCEL_DTYPE_F32, true), dl = volume(labels, ACCEL_DTYPE_I32, true);
  accel_ct_outputs o;
  accel_ct_outputs_init(&o, sizeof o);
  o.solid = &ds, o.filled = &df, o.pores = &dp, o.edt = &de;
  ck_assert_int_eq(accel_ct_pipeline_run(pg, &din, NULL, &o), ACCEL_OK);
  ck_assert_ptr_eq(o.solid, &ds); /* the caller's outputs struct keeps its pointers */
  ck_assert_mem_eq(solid, r->solid, N);
  ck_assert_mem_eq(filled, r->filled, N);
  for (int i = 0; i < N; i++) EXPECT(pores[i] == (r->filled[i] && !r->solid[i]), "pores differ at %d", i);
  accel_stage_stats st = stats_of(gpu, "ct.pipeline");
  ck_assert_uint_eq(st.gpu_runs, 1);
  ck_assert_uint_eq(st.bytes_uploaded, 0);
  ck_assert_uint_eq(st.bytes_downloaded, 0);
  /* the distance map of the pores, which the pipeline computes */
  accel_array hp = volume(pores, ACCEL_DTYPE_U8, false);
  float *ref_edt = malloc(N * 4);
  accel_array he = volume(ref_edt, ACCEL_DTYPE_F32, false);
  ck_assert_int_eq(accel_ct_edt(cpu, &hp, NULL, &he), ACCEL_OK);
  ck_assert_mem_eq(edt, ref_edt, N * 4);

  /* labels: made on the host, uploaded into the device array */
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  accel_ct_outputs_init(&o, sizeof o);
  o.labels = &dl;
  ck_assert_int_eq(accel_ct_pipeline_run(pg, &din, NULL, &o), ACCEL_OK);
  accel_array hin = volume(r->gray, ACCEL_DTYPE_U8, false), hl = volume(ref_labels, ACCEL_DTYPE_I32, false);
  accel_ct_outputs oc;
  accel_ct_outputs_init(&oc, sizeof oc);
  oc.labels = &hl;
  ck_assert_int_eq(accel_ct_pipeline_run(pc, &hin, NULL, &oc), ACCEL_OK);
  ck_assert_uint_eq(o.marker_count, oc.marker_count);
  ck_assert_mem_eq(labels, ref_labels, N * 4);
  st = stats_of(gpu, "ct.pipeline");
  ck_assert_uint_eq(st.bytes_uploaded % 4, 0);
  ck_assert_uint_ge(st.bytes_uploaded, (uint64_t)N * 4);   /* the labels (and the peak window's offsets) */
  ck_assert_uint_ge(st.bytes_downloaded, (uint64_t)N * 5); /* the pores and the map for the host stages */

  /* given device markers, read by the host stages */
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  int32_t *given = malloc(N * 4);
  memcpy(given, ref_labels, N * 4);
  accel_array dm = volume(given, ACCEL_DTYPE_I32, true);
  accel_ct_outputs_init(&o, sizeof o);
  o.labels = &dl;
  memset(labels, 0, N * 4);
  ck_assert_int_eq(accel_ct_pipeline_run(pg, &din, &dm, &o), ACCEL_OK);
  ck_assert_mem_eq(labels, ref_labels, N * 4); /* the watershed of its own labels gives them back */

  free(given);
  free(ref_edt);
  free(solid), free(filled), free(pores), free(in), free(edt), free(labels), free(ref_labels), free(r);
  accel_ct_pipeline_destroy(pg);
  accel_ct_pipeline_destroy(pc);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}
END_TEST

/* A GPU failure with device arrays: under ALLOW the CPU reruns the stage on
 * host copies of them (the input copied down, the output up, counted), and
 * the answer is the CPU's. */
START_TEST(fallback_stages_device_arrays_through_the_host) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  uint8_t *dev_in = malloc(N);
  float *dev_f = malloc(N * 4);
  memcpy(dev_in, r->filled, N);
  memset(dev_f, 0xEE, N * 4);
  accel_array in = volume(dev_in, ACCEL_DTYPE_U8, true), fout = volume(dev_f, ACCEL_DTYPE_F32, true);
  accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
  accel__cuda_fault_at = 0; /* the first CUDA call of the stage */
  ck_assert_int_eq(accel_ct_edt(gpu, &in, NULL, &fout), ACCEL_OK);
  accel__cuda_fault_at = -1;
  ck_assert_mem_eq(dev_f, r->edt, N * 4);
  accel_stage_stats st = stats_of(gpu, "ct.edt");
  ck_assert_uint_eq(st.fallbacks, 1);
  ck_assert_uint_eq(st.cpu_runs, 1);
  ck_assert_uint_eq(st.bytes_downloaded, N);   /* the mask to the host */
  ck_assert_uint_eq(st.bytes_uploaded, N * 4); /* the distances back */
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] ct.edt failed: "), 1);
  free(dev_in);
  free(dev_f);
  free(r);
  accel_ctx_destroy(gpu);
}
END_TEST

/* Every CUDA call of a stage with device arrays made to fail in turn
 * (tests/emulated_gpu.c): each failure falls back, and the answer is the CPU's. */
typedef struct sweep_case {
  const refs *r;
  int op; /* 0 threshold, 1 fill holes, 2 EDT, 3 the pipeline */
} sweep_case;

static accel_status run_with_device_arrays(accel_ctx *ctx, void *user) {
  const sweep_case *c = user;
  uint8_t *dev_in = malloc(N), *dev_out = malloc(N);
  float *dev_f = malloc(N * 4);
  memcpy(dev_in, c->op == 0 || c->op == 3 ? c->r->gray : c->op == 1 ? c->r->solid : c->r->filled, N);
  memset(dev_out, 0xEE, N);
  memset(dev_f, 0xEE, N * 4);
  accel_array in = volume(dev_in, ACCEL_DTYPE_U8, true), out = volume(dev_out, ACCEL_DTYPE_U8, true);
  accel_array fout = volume(dev_f, ACCEL_DTYPE_F32, true);
  accel_status s;
  if (c->op == 0) s = accel_ct_threshold(ctx, &in, 100, ACCEL_CT_GREATER, &out);
  else if (c->op == 1) s = accel_ct_fill_holes(ctx, &in, ACCEL_CT_FACES, &out);
  else if (c->op == 2) s = accel_ct_edt(ctx, &in, NULL, &fout);
  else {
    accel_ct_pipeline_options po;
    accel_ct_pipeline_options_init(&po, sizeof po);
    po.threshold = 100;
    accel_ct_pipeline *p = NULL;
    ck_assert_int_eq(accel_ct_pipeline_create(ctx, &po, &p), ACCEL_OK);
    accel_ct_outputs o;
    accel_ct_outputs_init(&o, sizeof o);
    o.filled = &out;
    s = accel_ct_pipeline_run(p, &in, NULL, &o);
    accel_ct_pipeline_destroy(p);
  }
  if (s == ACCEL_OK && c->op != 2) ck_assert_mem_eq(dev_out, c->op == 0 ? c->r->solid : c->r->filled, N);
  if (s == ACCEL_OK && c->op == 2) ck_assert_mem_eq(dev_f, c->r->edt, N * 4);
  free(dev_in);
  free(dev_out);
  free(dev_f);
  return s;
}

START_TEST(every_failure_with_device_arrays_falls_back_right) {
  refs *r = malloc(sizeof *r);
  make_refs(r);
  static const char *const stages[] = {"ct.threshold", "ct.fill_holes", "ct.edt", "ct.pipeline"};
  static const uint64_t budgets[] = {0, 4 * NY * NX * 12}; /* whole; slabs of a few planes, through the host */
  for (int b = 0; b < 2; b++) {
    set_emulated_gpu_budget(budgets[b]);
    for (int op = 0; op < 4; op++) {
      sweep_case c = {r, op};
      ck_assert_int_ge(emulated_fault_sweep(stages[op], run_with_device_arrays, &c), 2);
    }
  }
  set_emulated_gpu_budget(0);
  free(r);
}
END_TEST

/* ---- hashing images that are device arrays */

enum { HIMG = 5, HW = 96, HH = 72, HKINDS = 5 };

/* Five images of every layout an array can have (L, LA, RGB, RGBA, and L
 * again), filled with smooth gradients and noise so the hashes differ. */
static void make_images(uint8_t *px[HIMG], accel_array img[HIMG], bool device) {
  static const int channels[HIMG] = {1, 2, 3, 4, 1};
  for (int i = 0; i < HIMG; i++) {
    const int c = channels[i];
    px[i] = malloc((size_t)(HW * HH * c));
    fill_random(px[i], HW * HH * c, 100 + i);
    for (int y = 0; y < HH; y++)
      for (int x = 0; x < HW; x++)
        for (int k = 0; k < c; k++) {
          uint8_t *v = &px[i][(y * HW + x) * c + k];
          *v = (uint8_t)((*v & 31) + (x * (k + 1) * 2 + y * (i + 1)) % 200);
        }
    const int64_t shape[3] = {HH, HW, c};
    ck_assert_int_eq(accel_array_init(&img[i], px[i], ACCEL_DTYPE_U8, c == 1 ? 2 : 3, shape), ACCEL_OK);
    if (device && i != 4)
      ck_assert_int_eq(accel_array_on_device(&img[i]), ACCEL_OK); /* the last one stays on the host */
  }
}

static void hash_options(accel_hash_options *o) {
  accel_hash_options_init(o, sizeof *o);
  static const accel_hash_kind kinds[HKINDS] = {ACCEL_HASH_AHASH, ACCEL_HASH_DHASH, ACCEL_HASH_PHASH, ACCEL_HASH_WHASH,
                                                ACCEL_HASH_COLORHASH};
  o->nkinds = HKINDS;
  memcpy(o->kinds, kinds, sizeof kinds);
}

enum { HSLOT = 16 };

/* The CPU's hashes of the five images, from host arrays. */
static void hash_refs(uint8_t want[HIMG * HKINDS * HSLOT]) {
  uint8_t *px[HIMG];
  accel_array img[HIMG];
  make_images(px, img, false);
  accel_ctx *cpu = cpu_ctx();
  accel_hash_options o;
  hash_options(&o);
  accel_status st[HIMG];
  ck_assert_int_eq(accel_hash_arrays(cpu, img, HIMG, &o, want, HSLOT, st), ACCEL_OK);
  for (int i = 0; i < HIMG; i++) ck_assert_int_eq(st[i], ACCEL_OK);
  accel_ctx_destroy(cpu);
  for (int i = 0; i < HIMG; i++) free(px[i]);
}

static accel_status hash_on(accel_ctx *ctx, bool device, uint8_t got[HIMG * HKINDS * HSLOT]) {
  uint8_t *px[HIMG];
  accel_array img[HIMG];
  make_images(px, img, device);
  accel_hash_options o;
  hash_options(&o);
  accel_status st[HIMG];
  memset(got, 0xEE, HIMG * HKINDS * HSLOT);
  const accel_status s = accel_hash_arrays(ctx, img, HIMG, &o, got, HSLOT, st);
  for (int i = 0; i < HIMG && !s; i++) ck_assert_int_eq(st[i], ACCEL_OK);
  for (int i = 0; i < HIMG; i++) free(px[i]);
  return s;
}

/* Device images (gray, LA, RGB, RGBA, among a host one) hashed in place:
 * the CPU's hashes from host arrays, and their pixels never uploaded (the
 * host run uploads at least their bytes more). */
START_TEST(hash_arrays_reads_device_images_in_place) {
  uint8_t *want = malloc(HIMG * HKINDS * HSLOT), *got = malloc(HIMG * HKINDS * HSLOT);
  hash_refs(want);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  ck_assert_int_eq(hash_on(gpu, false, got), ACCEL_OK);
  ck_assert_mem_eq(got, want, HIMG * HKINDS * HSLOT);
  const accel_stage_stats host = stats_of(gpu, "hash.batch");
  ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
  ck_assert_int_eq(hash_on(gpu, true, got), ACCEL_OK);
  ck_assert_mem_eq(got, want, HIMG * HKINDS * HSLOT);
  const accel_stage_stats dev = stats_of(gpu, "hash.batch");
  ck_assert_uint_eq(dev.gpu_runs, 1);
  ck_assert_uint_eq(dev.bytes_downloaded, host.bytes_downloaded);
  /* device images 0..3 hold L, L (from LA), RGB, RGB (from RGBA) on the device */
  const uint64_t device_px = (uint64_t)HW * HH * (1 + 1 + 3 + 3);
  ck_assert_uint_le(dev.bytes_uploaded + device_px, host.bytes_uploaded);
  free(want);
  free(got);
  accel_ctx_destroy(gpu);
}
END_TEST

static accel_status hash_device_images(accel_ctx *ctx, void *user) {
  const uint8_t *want = user;
  uint8_t got[HIMG * HKINDS * HSLOT];
  const accel_status s = hash_on(ctx, true, got);
  if (s == ACCEL_OK) ck_assert_mem_eq(got, want, sizeof got);
  return s;
}

/* Every CUDA call of the batch made to fail in turn with device images: the
 * CPU reruns it on host copies of them, with the same hashes. */
START_TEST(hash_arrays_with_device_images_fall_back_right) {
  uint8_t *want = malloc(HIMG * HKINDS * HSLOT);
  hash_refs(want);
  ck_assert_int_ge(emulated_fault_sweep("hash.batch", hash_device_images, want), 2);
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
  accel__cuda_fault_at = 0;
  uint8_t got[HIMG * HKINDS * HSLOT];
  ck_assert_int_eq(hash_on(gpu, true, got), ACCEL_OK);
  accel__cuda_fault_at = -1;
  ck_assert_mem_eq(got, want, sizeof got);
  const accel_stage_stats st = stats_of(gpu, "hash.batch");
  ck_assert_uint_eq(st.fallbacks, 1);
  ck_assert_uint_eq(st.bytes_downloaded, (uint64_t)HW * HH * (1 + 2 + 3 + 4)); /* the device images, down */
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] hash.batch failed: "), 1);
  free(want);
  accel_ctx_destroy(gpu);
}
END_TEST

/* ---- sky view factors and shadows of device grids */

enum { SR = 23, SC = 29, SN = SR * SC, SMB = (153 + 7) / 8 };

/* A DSM going below 0 (UMEP raises it) with no-data cells, a canopy and
 * trunks: the three inputs, as host arrays. */
typedef struct svf_in {
  float g[3][SN];
} svf_in;

static void make_svf_in(svf_in *in) {
  uint8_t noise[SN];
  fill_random(noise, SN, 11);
  for (int i = 0; i < SN; i++) {
    const int r = i / SC, c = i % SC;
    in->g[0][i] = (float)((r % 7 == 3 && c % 5 < 3) ? 12.0 + noise[i] / 32.0 : -1.5 + noise[i] / 128.0);
    in->g[1][i] = (float)((r + c) % 6 == 0 ? 4.0 + noise[i] / 64.0 : 0.0);
    in->g[2][i] = in->g[1][i] > 0 ? in->g[1][i] * 0.3f : 0.0f;
  }
  in->g[0][5] = NAN; /* no data: 0 */
  in->g[1][40] = NAN;
}

static accel_array grid2(void *data, accel_dtype dt, bool device) {
  accel_array a;
  ck_assert_int_eq(accel_array_init(&a, data, dt, 2, (int64_t[]){SR, SC}), ACCEL_OK);
  if (device) ck_assert_int_eq(accel_array_on_device(&a), ACCEL_OK);
  return a;
}

/* Every grid and matrix of the sky from the inputs (device arrays when
 * dev_in, outputs device arrays when dev_out) into out (15 grids, then the
 * 3 matrices' bytes); tile 0 or a few tiles. */
typedef struct sky_run {
  const svf_in *in;
  bool dev_in, dev_out;
  int64_t tile;
  float grids[ACCEL_SVF_GRIDS][SN];
  uint8_t mats[ACCEL_SVF_MATRICES][SN * SMB];
} sky_run;

static accel_status run_sky_on(accel_ctx *ctx, sky_run *r) {
  svf_in *copy = malloc(sizeof *copy); /* the device's inputs: another buffer, as device memory is */
  memcpy(copy, r->in, sizeof *copy);
  accel_array in[3], g[ACCEL_SVF_GRIDS], m[ACCEL_SVF_MATRICES];
  const accel_array *gp[ACCEL_SVF_GRIDS], *mp[ACCEL_SVF_MATRICES];
  for (int k = 0; k < 3; k++) in[k] = grid2(copy->g[k], ACCEL_DTYPE_F32, r->dev_in);
  memset(r->grids, 0xEE, sizeof r->grids);
  memset(r->mats, 0xEE, sizeof r->mats);
  for (int k = 0; k < ACCEL_SVF_GRIDS; k++) {
    g[k] = grid2(r->grids[k], ACCEL_DTYPE_F32, r->dev_out);
    gp[k] = &g[k];
  }
  for (int k = 0; k < ACCEL_SVF_MATRICES; k++) {
    ck_assert_int_eq(accel_array_init(&m[k], r->mats[k], ACCEL_DTYPE_U8, 3, (int64_t[]){SR, SC, SMB}), ACCEL_OK);
    if (r->dev_out) ck_assert_int_eq(accel_array_on_device(&m[k]), ACCEL_OK);
    mp[k] = &m[k];
  }
  accel_svf_options o;
  accel_svf_options_init(&o, sizeof o);
  o.pixel_size = 1.0;
  o.tile = r->tile;
  const accel_status s = accel_svf_sky(ctx, &in[0], &in[1], &in[2], &o, gp, mp);
  free(copy);
  return s;
}

static sky_run *sky_want(const svf_in *in) {
  sky_run *want = malloc(sizeof *want);
  *want = (sky_run){.in = in};
  accel_ctx *cpu = cpu_ctx();
  ck_assert_int_eq(run_sky_on(cpu, want), ACCEL_OK);
  accel_ctx_destroy(cpu);
  return want;
}

static void expect_sky(const sky_run *got, const sky_run *want) {
  ck_assert_mem_eq(got->grids, want->grids, sizeof got->grids);
  ck_assert_mem_eq(got->mats, want->mats, sizeof got->mats);
}

/* Device inputs and outputs, whole and tiled: the CPU's grids and
 * matrices from host arrays; nothing of them crosses the bus (the same run
 * with host outputs downloads exactly their bytes more; with host inputs it
 * uploads their windows). */
START_TEST(svf_uses_device_grids_in_place) {
  svf_in *in = malloc(sizeof *in);
  make_svf_in(in);
  sky_run *want = sky_want(in), *got = malloc(sizeof *got);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  static const bool modes[3][2] = {{true, true}, {true, false}, {false, true}};
  uint64_t up[3], down[3];
  for (int k = 0; k < 3; k++) {
    *got = (sky_run){.in = in, .dev_in = modes[k][0], .dev_out = modes[k][1]};
    ck_assert_int_eq(accel_ctx_stats_reset(gpu), ACCEL_OK);
    ck_assert_msg(run_sky_on(gpu, got) == ACCEL_OK, "%s", accel_last_error(gpu));
    expect_sky(got, want);
    const accel_stage_stats st = stats_of(gpu, "svf.sky");
    ck_assert_uint_eq(st.gpu_runs, 1);
    up[k] = st.bytes_uploaded, down[k] = st.bytes_downloaded;
  }
  ck_assert_uint_eq(down[1], down[0] + sizeof got->grids + sizeof got->mats);
  ck_assert_uint_ge(up[2], up[0] + 3 * SN * sizeof(double)); /* three prepared grids */
  for (int64_t tile = 5; tile <= 11; tile += 6) {            /* tiles with halos */
    *got = (sky_run){.in = in, .dev_in = true, .dev_out = true, .tile = tile};
    ck_assert_msg(run_sky_on(gpu, got) == ACCEL_OK, "%s", accel_last_error(gpu));
    expect_sky(got, want);
  }
  free(in), free(want), free(got);
  accel_ctx_destroy(gpu);
}
END_TEST

/* Shadows of device grids; an infinite device value and mixed inputs refused. */
START_TEST(svf_shadows_and_refusals_with_device_grids) {
  svf_in *in = malloc(sizeof *in);
  make_svf_in(in);
  float *want = malloc(3 * SN * sizeof(float)), *got = malloc(3 * SN * sizeof(float));
  accel_ctx *cpu = cpu_ctx(), *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL);
  accel_svf_options o;
  accel_svf_options_init(&o, sizeof o);
  o.pixel_size = 0.5;
  accel_array h[3], d[3], wo[3], go[3];
  for (int k = 0; k < 3; k++) {
    h[k] = grid2(in->g[k], ACCEL_DTYPE_F32, false);
    d[k] = grid2(in->g[k], ACCEL_DTYPE_F32, true);
    wo[k] = grid2(want + k * SN, ACCEL_DTYPE_F32, false);
    go[k] = grid2(got + k * SN, ACCEL_DTYPE_F32, true);
  }
  ck_assert_int_eq(accel_svf_shadows(cpu, &h[0], &h[1], NULL, 135, 30, &o, &wo[0], &wo[1], &wo[2]), ACCEL_OK);
  memset(got, 0xEE, 3 * SN * sizeof(float));
  ck_assert_msg(accel_svf_shadows(gpu, &d[0], &d[1], NULL, 135, 30, &o, &go[0], &go[1], &go[2]) == ACCEL_OK, "%s",
                accel_last_error(gpu));
  ck_assert_mem_eq(got, want, 3 * SN * sizeof(float));
  ck_assert_int_eq(accel_svf_shadows(gpu, &d[0], &h[1], NULL, 135, 30, &o, &go[0], NULL, NULL), ACCEL_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "all be device arrays or all host"));
  in->g[1][3 * SC + 4] = INFINITY;
  ck_assert_int_eq(accel_svf_shadows(gpu, &d[0], &d[1], NULL, 135, 30, &o, &go[0], NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(gpu), "cdsm[3, 4] is infinite"));
  free(in), free(want), free(got);
  accel_ctx_destroy(cpu);
  accel_ctx_destroy(gpu);
}
END_TEST

static accel_status sky_device_grids(accel_ctx *ctx, void *user) {
  const sky_run *want = user;
  sky_run *got = malloc(sizeof *got);
  *got = (sky_run){.in = want->in, .dev_in = true, .dev_out = true, .tile = 11};
  const accel_status s = run_sky_on(ctx, got);
  if (s == ACCEL_OK) expect_sky(got, want);
  free(got);
  return s;
}

/* Every CUDA call made to fail in turn with device grids: the CPU reruns
 * the job on host copies, preparing them as api.c does. */
START_TEST(svf_with_device_grids_falls_back_right) {
  svf_in *in = malloc(sizeof *in);
  make_svf_in(in);
  sky_run *want = sky_want(in);
  ck_assert_int_ge(emulated_fault_sweep("svf.sky", sky_device_grids, want), 2);
  free(in), free(want);
}
END_TEST
#endif

static Suite *suite_device_arrays(void) {
  TCase *tc = new_case("device_arrays", 120, NULL, NULL);
  tcase_add_test(tc, the_flag_is_a_bit_of_the_dtype);
  tcase_add_test(tc, the_cpu_refuses_device_arrays_unread);
  tcase_add_test(tc, every_function_refuses_device_arrays_on_the_cpu);
#if EXPECT_CUDA
  tcase_add_test(tc, every_other_function_refuses_device_arrays_on_the_gpu);
  tcase_add_test(tc, stages_use_device_arrays_in_place);
  tcase_add_test(tc, slabs_copy_device_arrays_through_the_host);
  tcase_add_test(tc, fill_refuses_device_arrays_without_copies_when_no_plane_fits);
  tcase_add_test(tc, the_gpu_refuses_what_it_cannot_take);
  tcase_add_test(tc, pipeline_uses_device_arrays_in_place);
  tcase_add_test(tc, fallback_stages_device_arrays_through_the_host);
  tcase_add_test(tc, every_failure_with_device_arrays_falls_back_right);
  tcase_add_test(tc, hash_arrays_reads_device_images_in_place);
  tcase_add_test(tc, hash_arrays_with_device_images_fall_back_right);
  tcase_add_test(tc, svf_uses_device_grids_in_place);
  tcase_add_test(tc, svf_shadows_and_refusals_with_device_grids);
  tcase_add_test(tc, svf_with_device_grids_falls_back_right);
#endif
  return suite_of("device_arrays", tc);
}

ACCEL_TEST_MAIN(suite_device_arrays)
