/*
 * kernels/reg_prealign.cu - the coarse pre-alignment (lib/reg/prealign.h)
 * on the GPU: the images, spectra and correlation surfaces stay on the
 * device; the per-element steps (sampling and windowing, cross-power
 * spectra, log-polar resampling) are the CPU's own functions run by `each2d`;
 * the FFTs are cuFFT's (R2C and C2R, their work areas from the context's
 * pool and budget, on the context's stream); the host runs the algorithm
 * (lib/reg/prealign.c) and reads each correlation surface back to find its
 * peak.
 *
 * cuFFT is loaded at run time (dlopen of libcufft.so.<major> of the toolkit
 * this was built with): libaccel does not depend on it, and without it the
 * stage is declined and runs on the CPU. In the host emulation of the tests
 * the FFTs are kissfft's (the CPU's), so everything but the cuFFT calls
 * themselves is exercised there, and its results equal the CPU's; the cuFFT
 * path itself is tested only on a GPU.
 */
#include "cuda_util.h"

#include "reg/prealign.h"

#include <cufft.h>
#include <dlfcn.h>
#include <stdio.h>

#define ACCEL__STR2(x) #x
#define ACCEL__STR(x) ACCEL__STR2(x)

namespace {

/* The cuFFT entry points, loaded once per process. */
struct cufft_api {
  bool ok;
  char why[ACCEL_REASON_MAX];
  decltype(&cufftCreate) create;
  decltype(&cufftSetAutoAllocation) set_auto_allocation;
  decltype(&cufftMakePlan2d) make_plan_2d;
  decltype(&cufftSetWorkArea) set_work_area;
  decltype(&cufftSetStream) set_stream;
  decltype(&cufftExecR2C) exec_r2c;
  decltype(&cufftExecC2R) exec_c2r;
  decltype(&cufftDestroy) destroy;
};

template <class F> bool sym(void *lib, const char *name, F *f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

cufft_api load_cufft() {
  cufft_api a = {};
  const char *soname = "libcufft.so." ACCEL__STR(CUFFT_VER_MAJOR);
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef ACCEL_CUFFT_DIR
  if (!lib) lib = dlopen(ACCEL_CUFFT_DIR "/libcufft.so." ACCEL__STR(CUFFT_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
#endif
  if (!lib) {
    const char *e = dlerror();
    snprintf(a.why, sizeof a.why, "cuFFT (%s) cannot be loaded: %s", soname, e ? e : "not found");
    return a;
  }
  a.ok = sym(lib, "cufftCreate", &a.create) && sym(lib, "cufftSetAutoAllocation", &a.set_auto_allocation) &&
         sym(lib, "cufftMakePlan2d", &a.make_plan_2d) && sym(lib, "cufftSetWorkArea", &a.set_work_area) &&
         sym(lib, "cufftSetStream", &a.set_stream) && sym(lib, "cufftExecR2C", &a.exec_r2c) &&
         sym(lib, "cufftExecC2R", &a.exec_c2r) && sym(lib, "cufftDestroy", &a.destroy);
  if (!a.ok) snprintf(a.why, sizeof a.why, "%s lacks a function this build uses", soname);
  return a;
}

const cufft_api &cufft() {
  static const cufft_api api = load_cufft(); /* thread-safe initialisation */
  return api;
}

const char *cufft_name(int r) {
  static const char *const names[] = {"CUFFT_SUCCESS",        "CUFFT_INVALID_PLAN",  "CUFFT_ALLOC_FAILED",
                                      "CUFFT_INVALID_TYPE",   "CUFFT_INVALID_VALUE", "CUFFT_INTERNAL_ERROR",
                                      "CUFFT_EXEC_FAILED",    "CUFFT_SETUP_FAILED",  "CUFFT_INVALID_SIZE",
                                      "CUFFT_UNALIGNED_DATA", "cuFFT error 10",      "CUFFT_INVALID_DEVICE",
                                      "cuFFT error 12",       "CUFFT_NO_WORKSPACE",  "CUFFT_NOT_IMPLEMENTED",
                                      "cuFFT error 15",       "CUFFT_NOT_SUPPORTED", "CUFFT_MISSING_DEPENDENCY"};
  return r >= 0 && r < (int)(sizeof names / sizeof names[0]) ? names[r] : "cuFFT error";
}

/* The check of every cuFFT call: its result as a status, the reason "<what>:
 * <CUFFT_...> (<code>)" in why, the place remembered as accel__cuda_check does. */
accel_status cufft_check(cufftResult r, char *why, const char *what, accel__cuda_site at = accel__cuda_here()) {
  if (r == CUFFT_SUCCESS) return ACCEL_OK;
  accel__why(why, "%s: %s (%d)", what, cufft_name((int)r), (int)r);
  accel__cuda_note_failure(at);
  return r == CUFFT_ALLOC_FAILED ? ACCEL_ERR_DEVICE_MEMORY : ACCEL_ERR_DEVICE;
}

/* A real 2-D FFT of rows x cols, forward (R2C) and inverse (C2R,
 * unnormalised): cuFFT plans on the device, kissfft in emulation. Every
 * transform may fail on request as the other CUDA calls do (the faults of
 * kernels/testing.h), so the tests reach its error path. */
struct fft2d {
  accel__executor *x = nullptr;
  bool emulated = true;
  cufftHandle fwd = 0, inv = 0;
  bool have_fwd = false, have_inv = false;
  dbuf work;
  accel__reg_fft *host = nullptr;

  accel_status make(accel__executor *ex, bool emu, cudaStream_t stream, int32_t rows, int32_t cols, char *why) {
    x = ex;
    emulated = emu;
    if (emulated) return accel__reg_fft_new(rows, cols, &host, why);
    const cufft_api &f = cufft();
    size_t wf = 0, wi = 0;
    accel_status s = cufft_check(f.create(&fwd), why, "cufftCreate");
    have_fwd = !s;
    if (!s) s = cufft_check(f.create(&inv), why, "cufftCreate");
    have_inv = have_fwd && !s;
    if (!s) s = cufft_check(f.set_auto_allocation(fwd, 0), why, "cufftSetAutoAllocation");
    if (!s) s = cufft_check(f.set_auto_allocation(inv, 0), why, "cufftSetAutoAllocation");
    if (!s) s = cufft_check(f.make_plan_2d(fwd, rows, cols, CUFFT_R2C, &wf), why, "cufftMakePlan2d (R2C)");
    if (!s) s = cufft_check(f.make_plan_2d(inv, rows, cols, CUFFT_C2R, &wi), why, "cufftMakePlan2d (C2R)");
    const size_t ws = wf > wi ? wf : wi; /* one work area serves both (never 0 bytes: see the pool's accounting) */
    if (!s) s = work.get(x, ws ? ws : 1, why);
    if (!s) s = cufft_check(f.set_work_area(fwd, work.p), why, "cufftSetWorkArea");
    if (!s) s = cufft_check(f.set_work_area(inv, work.p), why, "cufftSetWorkArea");
    if (!s) s = cufft_check(f.set_stream(fwd, stream), why, "cufftSetStream");
    if (!s) s = cufft_check(f.set_stream(inv, stream), why, "cufftSetStream");
    return s;
  }
  accel_status forward(float *in, float *out, char *why) {
    accel_status s = accel__cuda_check(accel__cuda_fault(), why, "cufftExecR2C");
    if (s) return s;
    if (emulated) {
      accel__reg_fft_forward(host, in, out);
      return ACCEL_OK;
    }
    return cufft_check(cufft().exec_r2c(fwd, in, (cufftComplex *)(void *)out), why, "cufftExecR2C");
  }
  /* in is overwritten (cuFFT's out-of-place C2R does). */
  accel_status inverse(float *in, float *out, char *why) {
    accel_status s = accel__cuda_check(accel__cuda_fault(), why, "cufftExecC2R");
    if (s) return s;
    if (emulated) {
      accel__reg_fft_inverse(host, in, out);
      return ACCEL_OK;
    }
    return cufft_check(cufft().exec_c2r(inv, (cufftComplex *)(void *)in, out), why, "cufftExecC2R");
  }
  ~fft2d() {
    /* the plans' work on the stream is done: the engine waits for it (download) before it ends */
    if (have_fwd) (void)cufft().destroy(fwd);
    if (have_inv) (void)cufft().destroy(inv);
    accel__reg_fft_free(host);
  }
};

struct pixel_fn {
  accel__reg_pa_plan p;
  accel__reg_pa_map m;
  const float *img;
  int64_t w, h;
  double mean;
  float *out;
  __host__ __device__ void operator()(int64_t r, int64_t c) const {
    out[r * p.cols + c] = accel__reg_pa_pixel(&p, img, w, h, &m, mean, r, c);
  }
};

struct logpolar_fn {
  accel__reg_pa_plan p;
  const float *spec;
  float *out;
  __host__ __device__ void operator()(int64_t t, int64_t j) const {
    out[t * p.nr + j] = accel__reg_pa_logpolar(&p, spec, t, j);
  }
};

struct cross_fn {
  const float *a, *b;
  int64_t rows, cols;
  double sigma;
  float *out;
  __host__ __device__ void operator()(int64_t r, int64_t c) const {
    accel__reg_pa_cross(a, b, rows, cols, sigma, r, c, out + 2 * (r * (cols / 2 + 1) + c));
  }
};

struct gpu_engine {
  accel__executor *x;
  const accel__reg_pa_plan *p;
  dbuf img[2], real, cross, spec[4], surf;
  fft2d fimg, flp;
};

accel_status gpu_spectrum(void *self, int slot, int src, const accel__reg_pa_map *map, char *why) {
  gpu_engine *e = (gpu_engine *)self;
  const accel__reg_pa_plan &p = *e->p;
  const pixel_fn f = {p,
                      *map,
                      e->img[src].as<float>(),
                      src ? p.mw : p.fw,
                      src ? p.mh : p.fh,
                      src ? p.mmean : p.fmean,
                      e->real.as<float>()};
  accel_status s = each2d(e->x, p.rows, p.cols, f, why, "sample and window an image");
  if (!s) s = e->fimg.forward(e->real.as<float>(), e->spec[slot].as<float>(), why);
  return s;
}

accel_status gpu_logpolar(void *self, int slot, int from, char *why) {
  gpu_engine *e = (gpu_engine *)self;
  const logpolar_fn f = {*e->p, e->spec[from].as<float>(), e->real.as<float>()};
  accel_status s = each2d(e->x, e->p->nt, e->p->nr, f, why, "the log-polar magnitude spectrum");
  if (!s) s = e->flp.forward(e->real.as<float>(), e->spec[slot].as<float>(), why);
  return s;
}

accel_status gpu_correlate(void *self, int a, int b, float *out, char *why) {
  gpu_engine *e = (gpu_engine *)self;
  const accel__reg_pa_plan &p = *e->p;
  const bool lp = a >= ACCEL__REG_PA_LP_FIXED;
  const int64_t rows = lp ? p.nt : p.rows, cols = lp ? p.nr : p.cols;
  const cross_fn f = {e->spec[a].as<float>(), e->spec[b].as<float>(), rows, cols, p.sigma, e->cross.as<float>()};
  accel_status s = each2d(e->x, rows, cols / 2 + 1, f, why, "the cross-power spectrum");
  if (!s) s = (lp ? e->flp : e->fimg).inverse(e->cross.as<float>(), e->surf.as<float>(), why);
  if (!s) s = download(e->x, out, e->surf.p, sizeof(float) * (size_t)(rows * cols), why, "download a correlation");
  return s;
}

/* The engine's buffers and plans, the images uploaded. */
accel_status gpu_engine_open(gpu_engine *e, accel__call *call, const accel__reg_prealign_job *job, char *why) {
  const accel__cuda_state *state = (const accel__cuda_state *)call->state;
  const accel__reg_pa_plan &p = *e->p;
  const size_t img = (size_t)p.rows * (size_t)(p.cols / 2 + 1), lp = (size_t)p.nt * (size_t)(p.nr / 2 + 1);
  const size_t most = (size_t)p.rows * (size_t)p.cols > (size_t)p.nt * (size_t)p.nr ? (size_t)p.rows * (size_t)p.cols
                                                                                    : (size_t)p.nt * (size_t)p.nr;
  accel_status s = e->img[0].put(e->x, job->fixed, (size_t)(p.fw * p.fh), why, "upload the fixed image");
  if (!s) s = e->img[1].put(e->x, job->moving, (size_t)(p.mw * p.mh), why, "upload the moving image");
  if (!s) s = e->real.get(e->x, sizeof(float) * most, why);
  if (!s) s = e->surf.get(e->x, sizeof(float) * most, why);
  if (!s) s = e->cross.get(e->x, 2 * sizeof(float) * (img > lp ? img : lp), why);
  for (int i = 0; i < 4 && !s; i++) s = e->spec[i].get(e->x, 2 * sizeof(float) * (i < 2 ? img : lp), why);
  if (!s) s = e->fimg.make(e->x, state->emulated, state->stream, p.rows, p.cols, why);
  if (!s) s = e->flp.make(e->x, state->emulated, state->stream, p.nt, p.nr, why);
  return s;
}

} // namespace

extern "C" accel_status accel__reg_cuda_prealign(accel__call *call, accel__reg_prealign_job *job) {
  const bool emulated = ((const accel__cuda_state *)call->state)->emulated;
  if (emulated && !ACCEL_HAVE_KISSFFT) return accel__decline(call, "the emulation's FFT (kissfft) is not built in");
  if (!emulated && !cufft().ok) return accel__decline(call, "%s", cufft().why);
  accel__reg_pa_plan p;
  accel__reg_pa_plan_for(job, &p);
  return with_device(call, [&](accel__executor *x) {
    gpu_engine e;
    e.x = x;
    e.p = &p;
    accel_status s = gpu_engine_open(&e, call, job, call->why);
    const accel__reg_pa_engine engine = {&e, gpu_spectrum, gpu_logpolar, gpu_correlate};
    if (!s) s = accel__reg_pa_run(&p, &engine, job, call->why);
    if (s) x->drain();
    return s;
  });
}
