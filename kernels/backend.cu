/*
 * kernels/backend.cu - the CUDA backend: probing, devices, per-context
 * state (device, stream, memory pool, budget) and the backend table; the
 * reasons CUDA errors give.
 *
 * The CUDA runtime is linked statically and loads the driver (libcuda.so.1)
 * itself, so libaccel loads on machines without a driver; we check for the
 * driver first to give a clear reason instead of the runtime's
 * "driver version is insufficient". A driver that is there but too old
 * (the CUDA 13 runtime needs R580 or newer) is named with the version needed.
 *
 * A context opens only after a test kernel ran on its device (so a build
 * without code for the device, or a driver that cannot load it, fails once,
 * at creation, with the reason); each call leaves the device with nothing
 * held in the context's pool but what a call keeps for later ones on
 * purpose (a registration's inputs, stage reg.hold, from its start to its
 * end), which stays counted against the budget.
 *
 * For tests, the same ops tables also make the emulated backend
 * (kernels/testing.h): its state says "emulated" and every stage runs on the
 * host executor instead of a device.
 */
#include "cuda_util.h"

#include "core/context.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void accel__cuda_reason(cudaError_t err, char *why, const char *what) {
  char hint[200] = "";
  int v = 0;
  switch (err) {
  case cudaErrorInsufficientDriver:
  case cudaErrorUnsupportedPtxVersion:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorCompatNotSupportedOnDevice:
    if (!accel__cuda_check(cudaDriverGetVersion(&v), nullptr, "cudaDriverGetVersion") && v > 0)
      snprintf(hint, sizeof hint,
               " (libaccel's CUDA %d.%d runtime needs NVIDIA driver R%s or newer; this driver "
               "supports CUDA %d.%d)",
               CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, ACCEL__CUDA_MIN_DRIVER, v / 1000, v % 1000 / 10);
    else
      snprintf(hint, sizeof hint, " (libaccel's CUDA %d.%d runtime needs NVIDIA driver R%s or newer)",
               CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, ACCEL__CUDA_MIN_DRIVER);
    break;
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorInvalidDeviceFunction: {
    int dev = 0, major = 0, minor = 0;
    if (!accel__cuda_check(cudaGetDevice(&dev), nullptr, "cudaGetDevice") &&
        !accel__cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), nullptr, "") &&
        !accel__cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), nullptr, ""))
      snprintf(hint, sizeof hint,
               " (libaccel is built for %s; this device is sm_%d%d: rebuild with -Dcuda-arch=sm_%d%d)",
               ACCEL_CUDA_ARCHS, major, minor, major, minor);
    break;
  }
  default: break;
  }
  const char *text = cudaGetErrorString(err);
  size_t n = strlen(text);
  while (n && text[n - 1] == '.') n--; /* the hint, or the fallback line's own period, follows */
  accel__why(why, "%s: %s: %.*s%s", what, cudaGetErrorName(err), (int)n, text, hint);
}

/* Tests: the reason and the status of a CUDA error code, as a stage reports them. */
extern "C" accel_status accel__cuda_error_reason(int err, char *why, const char *what) {
  return accel__cuda_check((cudaError_t)err, why, what);
}

extern "C" int64_t accel__cuda_fault_at = -1;
extern "C" size_t accel__cuda_pin_chunk = (size_t)16 << 20;
extern "C" bool accel__cuda_overlap = true;
extern "C" int accel__cuda_fault_error = cudaErrorLaunchFailure;
static thread_local cudaError_t emulated_last_error = cudaSuccess;
static thread_local accel__cuda_site failed_at = {nullptr, 0};

void accel__cuda_note_failure(accel__cuda_site at) { failed_at = at; }

void accel__cuda_forget_failure(void) { failed_at = accel__cuda_site{nullptr, 0}; }

extern "C" const char *accel__cuda_failure_site(void) {
  static thread_local char site[160];
  site[0] = '\0';
  if (!failed_at.file) return site;
  const char *file = strstr(failed_at.file, "kernels/"); /* the path from the source root */
  snprintf(site, sizeof site, "%s:%d", file ? file : failed_at.file, failed_at.line);
  return site;
}

cudaError_t accel__cuda_fault(void) {
  int64_t n = __atomic_load_n(&accel__cuda_fault_at, __ATOMIC_RELAXED);
  while (n >= 0 &&
         !__atomic_compare_exchange_n(&accel__cuda_fault_at, &n, n - 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  if (n != 0) return cudaSuccess;
  return emulated_last_error = (cudaError_t)accel__cuda_fault_error;
}

cudaError_t accel__cuda_emulated_last_error(void) {
  const cudaError_t e = emulated_last_error;
  emulated_last_error = cudaSuccess;
  return e;
}

static bool driver_loadable(char *why) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    accel__why(why, "no NVIDIA driver (libcuda.so.1 cannot be loaded)");
    return false;
  }
  dlclose(h);
  return true;
}

static void cuda_probe(accel__probe_result *out) {
  out->device_count = 0;
  out->reason[0] = '\0';
  if (!driver_loadable(out->reason)) return;
  int n = 0;
  if (accel__cuda_check(cudaGetDeviceCount(&n), out->reason, "cudaGetDeviceCount")) return;
  if (n == 0) accel__why(out->reason, "the NVIDIA driver reports no CUDA device");
  out->device_count = n;
}

static accel_status cuda_device_info(int32_t index, accel_device_info *info, char *why) {
  cudaDeviceProp p;
  accel_status s = accel__cuda_check(cudaGetDeviceProperties(&p, index), why, "cudaGetDeviceProperties");
  if (s) return s;
  info->index = index;
  accel__strlcpy(info->name, p.name, sizeof info->name);
  info->total_memory = p.totalGlobalMem;
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->multiprocessors = p.multiProcessorCount;
  int v = 0;
  if (!accel__cuda_check(cudaDriverGetVersion(&v), nullptr, "cudaDriverGetVersion")) info->driver_version = v;
  if (!accel__cuda_check(cudaRuntimeGetVersion(&v), nullptr, "cudaRuntimeGetVersion")) info->runtime_version = v;
  int prev = 0;
  size_t free_b = 0, total_b = 0;
  if (!accel__cuda_check(cudaGetDevice(&prev), nullptr, "cudaGetDevice") &&
      !accel__cuda_check(cudaSetDevice(index), nullptr, "cudaSetDevice")) {
    if (!accel__cuda_check(cudaMemGetInfo(&free_b, &total_b), nullptr, "cudaMemGetInfo")) info->free_memory = free_b;
    (void)accel__cuda_check(cudaSetDevice(prev), nullptr, "cudaSetDevice");
  }
  return ACCEL_OK;
}

static void cuda_close(void *state) {
  accel__cuda_state *st = (accel__cuda_state *)state;
  if (!st) return;
  int prev = 0;
  const bool restore = !accel__cuda_check(cudaGetDevice(&prev), nullptr, "cudaGetDevice");
  (void)accel__cuda_check(cudaSetDevice(st->device), nullptr, "cudaSetDevice");
  if (st->stream) {
    (void)accel__cuda_check(cudaStreamSynchronize(st->stream), nullptr, "cudaStreamSynchronize");
    (void)accel__cuda_check(cudaStreamDestroy(st->stream), nullptr, "cudaStreamDestroy");
  }
  if (st->pool) (void)accel__cuda_check(cudaMemPoolDestroy(st->pool), nullptr, "cudaMemPoolDestroy");
  if (restore) (void)accel__cuda_check(cudaSetDevice(prev), nullptr, "cudaSetDevice");
  pthread_mutex_destroy(&st->mu);
  free(st);
}

namespace {
__global__ void k_ready(unsigned *out, unsigned value) { *out = value; }
} // namespace

/* Prove that libaccel's kernels run on this device with this driver before
 * the context relies on them: the kernel image loads (a device that the
 * build has no code for, or a driver too old for the runtime or its PTX,
 * fail here with the reason), and a launch on the context's stream writes
 * what it was asked to (4 bytes from the pool, outside the budget; the pool
 * is trimmed afterwards). */
static accel_status self_test(accel__cuda_state *st, char *why) {
  char what[96];
  snprintf(what, sizeof what, "CUDA device %d cannot run libaccel's kernels: cudaFuncGetAttributes", st->device);
  cudaFuncAttributes fa;
  accel_status s = accel__cuda_check(cudaFuncGetAttributes(&fa, k_ready), why, what);
  if (s) return s;
  void *d = nullptr;
  unsigned h = 0;
  s = accel__cuda_check(cudaMallocFromPoolAsync(&d, sizeof h, st->pool, st->stream), why, "a test kernel's memory");
  if (s) return s;
  s = accel__cuda_check(accel__cuda_launch(k_ready, dim3(1), dim3(1), 0, st->stream, (unsigned *)d, 0x600du), why,
                        "a test kernel's launch");
  if (!s)
    s = accel__cuda_check(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st->stream), why,
                          "a test kernel's result");
  const accel_status freed =
      accel__cuda_check(cudaFreeAsync(d, st->stream), s ? nullptr : why, "a test kernel's memory");
  /* waited for whatever failed: the copy into h may be queued */
  const accel_status done =
      accel__cuda_check(cudaStreamSynchronize(st->stream), s || freed ? nullptr : why, "a test kernel");
  if (!s) s = freed;
  if (!s) s = done;
  if (!s && h != 0x600du) {
    accel__why(why, "a test kernel ran on CUDA device %d but wrote %#x instead of 0x600d", st->device, h);
    s = ACCEL_ERR_DEVICE;
  }
  return s;
}

static accel_status cuda_open(accel__backend_config *cfg, void **state, char *why) {
  accel__probe_result p;
  cuda_probe(&p);
  if (p.device_count == 0) {
    accel__why(why, "%s", p.reason);
    return ACCEL_ERR_NO_DEVICE;
  }
  if (cfg->device >= p.device_count) {
    accel__why(why, "CUDA device %d requested but %d present", (int)cfg->device, (int)p.device_count);
    return ACCEL_ERR_NO_DEVICE;
  }
  accel__cuda_state *st = (accel__cuda_state *)calloc(1, sizeof *st);
  if (!st) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  pthread_mutex_init(&st->mu, NULL);
  st->device = cfg->device;
  int prev = 0;
  const bool restore = !accel__cuda_check(cudaGetDevice(&prev), nullptr, "cudaGetDevice");
  accel_status s = accel__cuda_check(cudaSetDevice(st->device), why, "cudaSetDevice");
  if (!s) s = accel__cuda_check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), why, "cudaStreamCreate");
  size_t free_b = 0, total_b = 0;
  if (!s) s = accel__cuda_check(cudaMemGetInfo(&free_b, &total_b), why, "cudaMemGetInfo");
  if (!s) {
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = st->device;
    s = accel__cuda_check(cudaMemPoolCreate(&st->pool, &props), why, "cudaMemPoolCreate");
  }
  if (!s) {
    st->budget = cfg->memory_budget ? cfg->memory_budget : (uint64_t)((double)free_b * 0.9);
    /* within a call, freed blocks stay cached for the next allocation (up to
     * the budget); accel__cuda_leave trims the pool when the call ends */
    uint64_t keep = st->budget;
    s = accel__cuda_check(cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &keep), why,
                          "cudaMemPoolSetAttribute");
    cfg->memory_budget = st->budget;
  }
  if (!s) s = self_test(st, why);
  if (!s) (void)accel__cuda_check(cudaMemPoolTrimTo(st->pool, 0), nullptr, "cudaMemPoolTrimTo");
  if (restore) (void)accel__cuda_check(cudaSetDevice(prev), nullptr, "cudaSetDevice");
  if (s) {
    cuda_close(st);
    return s;
  }
  *state = st;
  return ACCEL_OK;
}

/* This thread's entered contexts, innermost last (nesting deeper than the
 * array is counted, not recorded: a guard, not a limit). */
enum { ENTERED_MAX = 16 };
static thread_local const accel__cuda_state *entered[ENTERED_MAX];
static thread_local int entered_depth;

bool accel__cuda_entered(const accel__cuda_state *st) {
  for (int k = 0; k < entered_depth && k < ENTERED_MAX; k++)
    if (entered[k] == st) return true;
  return false;
}

void accel__cuda_mark(const accel__cuda_state *st) {
  if (entered_depth < ENTERED_MAX) entered[entered_depth] = st;
  entered_depth++;
}

void accel__cuda_unmark(void) { entered_depth--; }

accel_status accel__cuda_reentry(accel__call *call) {
  accel__why(call->why,
             "called from inside another call on the same GPU context (a progress callback?): a GPU context runs "
             "one call at a time; use another context");
  return ACCEL_ERR_INVALID_ARG;
}

accel_status accel__cuda_enter(accel__call *call, accel__cuda_scope *scope) {
  accel__cuda_state *st = (accel__cuda_state *)call->state;
  scope->st = st;
  pthread_mutex_lock(&st->mu);
  accel__cuda_forget_stale_error(true);
  scope->prev_device = st->device;
  (void)accel__cuda_check(cudaGetDevice(&scope->prev_device), nullptr, "cudaGetDevice");
  accel_status s = accel__cuda_check(cudaSetDevice(st->device), call->why, "cudaSetDevice");
  if (s) {
    pthread_mutex_unlock(&st->mu);
    scope->st = NULL;
  }
  return s;
}

void accel__cuda_leave(accel__cuda_scope *scope) {
  accel__cuda_state *st = scope->st;
  if (!st) return;
  /* the call's frees are queued on the stream: once it is idle, the pool can
   * give their unused memory back to the device (what a call keeps, dbuf's
   * keep(), stays allocated) */
  (void)accel__cuda_check(cudaStreamSynchronize(st->stream), nullptr, "cudaStreamSynchronize");
  (void)accel__cuda_check(cudaMemPoolTrimTo(st->pool, 0), nullptr, "cudaMemPoolTrimTo");
  (void)accel__cuda_check(cudaSetDevice(scope->prev_device), nullptr, "cudaSetDevice");
  pthread_mutex_unlock(&st->mu);
  scope->st = NULL;
}

accel_status accel__cuda_alloc(accel__cuda_state *st, size_t bytes, void **ptr, char *why, accel__cuda_site at) {
  *ptr = NULL;
  if (bytes == 0) bytes = 1;
  if (st->in_use + bytes > st->budget) {
    accel__why(why, "needs %.1f MiB more device memory, over the context's budget of %.1f MiB (%.1f MiB in use)",
               bytes / 1048576.0, st->budget / 1048576.0, st->in_use / 1048576.0);
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  const accel_status s =
      accel__cuda_check(cudaMallocFromPoolAsync(ptr, bytes, st->pool, st->stream), why, "cudaMallocFromPoolAsync", at);
  if (s) {
    *ptr = NULL;
    return s;
  }
  st->in_use += bytes;
  return ACCEL_OK;
}

void accel__cuda_free(accel__cuda_state *st, void *ptr, size_t bytes) {
  if (!ptr) return;
  if (bytes == 0) bytes = 1;
  (void)accel__cuda_check(cudaFreeAsync(ptr, st->stream), nullptr, "cudaFreeAsync");
  st->in_use -= bytes;
}

dim3 accel__grid2d(int64_t width, int64_t height, dim3 block) {
  int64_t gx = (width + block.x - 1) / block.x, gy = (height + block.y - 1) / block.y;
  if (gx > 65535 * 32) gx = 65535 * 32; /* grid-stride loops cover the rest */
  if (gy > 65535) gy = 65535;
  if (gx < 1) gx = 1;
  if (gy < 1) gy = 1;
  return dim3((unsigned)gx, (unsigned)gy, 1);
}

/* The dispatcher's copies of device arrays for a CPU run (backend.h). */
static accel_status cuda_copy(accel__call *call, void *dst, const void *src, size_t n, bool to_device) {
  const accel__cuda_site stage_failure = failed_at; /* the failed GPU op's, which the copies do not replace */
  const accel_status s = with_device(call, [&](accel__executor *x) {
    if (!to_device) { /* after the caller's work on the array; waited for */
      accel_status s = accel__cuda_check(x->device_sync(), call->why, "cudaDeviceSynchronize");
      return s ? s : download(x, dst, src, n, call->why);
    }
    accel_status s = upload(x, dst, src, n, call->why);
    if (!s) s = accel__cuda_check(x->sync(), call->why, "upload");
    return s;
  });
  if (!s) failed_at = stage_failure;
  return s;
}

extern "C" const accel__backend accel__cuda_backend = {
    /* .version = */ ACCEL__BACKEND_VERSION,
    /* .name = */ "cuda",
    /* .kind = */ ACCEL_BACKEND_CUDA,
    /* .probe = */ cuda_probe,
    /* .device_info = */ cuda_device_info,
    /* .open = */ cuda_open,
    /* .close = */ cuda_close,
    /* .image = */ &accel__cuda_image_ops,
    /* .hash = */ &accel__cuda_hash_ops,
    /* .index = */ &accel__cuda_index_ops,
    /* .ct = */ &accel__cuda_ct_ops,
    /* .svf = */ &accel__cuda_svf_ops,
    /* .reg = */ &accel__cuda_reg_ops,
    /* .copy = */ cuda_copy,
};

extern "C" uint64_t accel__cuda_memory_in_use(const accel_ctx *ctx) {
  if (!ctx || ctx->backend->kind != ACCEL_BACKEND_CUDA || !ctx->backend_state) return 0;
  return __atomic_load_n(&((const accel__cuda_state *)ctx->backend_state)->in_use, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ the host emulation, for tests */

static void emulated_probe(accel__probe_result *out) {
  out->device_count = 1;
  out->reason[0] = '\0';
}

/* A "device" of the context's budget, 1 GiB unless it asks for another. */
static accel_status emulated_open(accel__backend_config *cfg, void **state, char *why) {
  accel__cuda_state *st = (accel__cuda_state *)calloc(1, sizeof *st);
  if (!st) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  st->device = cfg->device;
  st->emulated = true;
  st->budget = cfg->memory_budget ? cfg->memory_budget : (uint64_t)1 << 30;
  cfg->memory_budget = st->budget;
  *state = st;
  return ACCEL_OK;
}

static void emulated_close(void *state) { free(state); }

/* The CUDA backend's tables with the emulated device: a domain registered in
 * accel__cuda_backend is emulated without another line here. */
static accel__backend make_emulated(void) {
  accel__backend b = accel__cuda_backend;
  b.name = "cuda-emulated";
  b.probe = emulated_probe;
  b.device_info = nullptr;
  b.open = emulated_open;
  b.close = emulated_close;
  return b;
}

extern "C" const accel__backend *accel__cuda_emulated_backend(void) {
  static const accel__backend emulated = make_emulated(); /* initialised once, thread-safe */
  return &emulated;
}
