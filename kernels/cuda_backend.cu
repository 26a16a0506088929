/*
 * kernels/cuda_backend.cu - the CUDA backend: probing, devices, per-context
 * state (device, stream, memory pool, budget) and the backend table.
 *
 * The CUDA runtime is linked statically and loads the driver (libcuda.so.1)
 * itself, so libaccel loads on machines without a driver; we check for the
 * driver first to give a clear reason instead of the runtime's
 * "driver version is insufficient".
 */
#include "cuda_util.h"

#include "hash/ops.h"
#include "image/ops.h"
#include "index/ops.h"
#include "ct/ops.h"
#include "svf/ops.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

accel_status accel__cuda_status(cudaError_t err, char *why, const char *what) {
  accel__why(why, "%s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
  switch (err) {
  case cudaSuccess:
    return ACCEL_OK;
  case cudaErrorMemoryAllocation:
    return ACCEL_ERR_DEVICE_MEMORY;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
    return ACCEL_ERR_NO_DEVICE;
  default:
    return ACCEL_ERR_DEVICE;
  }
}

extern "C" int64_t accel__cuda_emulated_fault_at = -1;
extern "C" int accel__cuda_emulated_fault_error = cudaErrorLaunchFailure;
static thread_local cudaError_t emulated_last_error = cudaSuccess;

cudaError_t accel__cuda_emulated_call(void) {
  int64_t n = __atomic_load_n(&accel__cuda_emulated_fault_at, __ATOMIC_RELAXED);
  while (n >= 0 && !__atomic_compare_exchange_n(&accel__cuda_emulated_fault_at, &n, n - 1, false, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED)) {
  }
  if (n != 0) return cudaSuccess;
  return emulated_last_error = (cudaError_t)accel__cuda_emulated_fault_error;
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
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    accel__cuda_status(e, out->reason, "cudaGetDeviceCount");
    return;
  }
  if (n == 0) accel__why(out->reason, "the NVIDIA driver reports no CUDA device");
  out->device_count = n;
}

static accel_status cuda_device_info(int32_t index, accel_device_info *info, char *why) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) return accel__cuda_status(e, why, "cudaGetDeviceProperties");
  info->index = index;
  accel__strlcpy(info->name, p.name, sizeof info->name);
  info->total_memory = p.totalGlobalMem;
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->multiprocessors = p.multiProcessorCount;
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) info->driver_version = v;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) info->runtime_version = v;
  size_t free_b = 0, total_b = 0;
  if (cudaSetDevice(index) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    info->free_memory = free_b;
  cudaSetDevice(prev);
  return ACCEL_OK;
}

static void cuda_close(void *state) {
  accel__cuda_state *st = (accel__cuda_state *)state;
  if (!st) return;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(st->device);
  if (st->stream) {
    cudaStreamSynchronize(st->stream);
    cudaStreamDestroy(st->stream);
  }
  if (st->pool) cudaMemPoolDestroy(st->pool);
  cudaSetDevice(prev);
  pthread_mutex_destroy(&st->mu);
  free(st);
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
  cudaGetDevice(&prev);
  accel_status s = ACCEL_OK;
  cudaError_t e = cudaSetDevice(st->device);
  if (e != cudaSuccess) s = accel__cuda_status(e, why, "cudaSetDevice");
  if (!s && (e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking)) != cudaSuccess)
    s = accel__cuda_status(e, why, "cudaStreamCreate");
  size_t free_b = 0, total_b = 0;
  if (!s && (e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) s = accel__cuda_status(e, why, "cudaMemGetInfo");
  if (!s) {
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = st->device;
    if ((e = cudaMemPoolCreate(&st->pool, &props)) != cudaSuccess) s = accel__cuda_status(e, why, "cudaMemPoolCreate");
  }
  if (!s) {
    st->budget = cfg->memory_budget ? cfg->memory_budget : (uint64_t)((double)free_b * 0.9);
    /* keep freed blocks cached up to the budget instead of returning them */
    uint64_t keep = st->budget;
    cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &keep);
    cfg->memory_budget = st->budget;
  }
  cudaSetDevice(prev);
  if (s) {
    cuda_close(st);
    return s;
  }
  *state = st;
  return ACCEL_OK;
}

accel_status accel__cuda_enter(accel__call *call, accel__cuda_scope *scope) {
  accel__cuda_state *st = (accel__cuda_state *)call->state;
  scope->st = st;
  pthread_mutex_lock(&st->mu);
  scope->prev_device = 0;
  cudaGetDevice(&scope->prev_device);
  cudaError_t e = cudaSetDevice(st->device);
  if (e != cudaSuccess) {
    pthread_mutex_unlock(&st->mu);
    scope->st = NULL;
    return accel__cuda_status(e, call->why, "cudaSetDevice");
  }
  return ACCEL_OK;
}

void accel__cuda_leave(accel__cuda_scope *scope) {
  if (!scope->st) return;
  cudaSetDevice(scope->prev_device);
  pthread_mutex_unlock(&scope->st->mu);
  scope->st = NULL;
}

accel_status accel__cuda_alloc(accel__cuda_state *st, size_t bytes, void **ptr, char *why) {
  *ptr = NULL;
  if (bytes == 0) bytes = 1;
  if (st->in_use + bytes > st->budget) {
    accel__why(why, "needs %.1f MiB more device memory, over the context's budget of %.1f MiB (%.1f MiB in use)",
               bytes / 1048576.0, st->budget / 1048576.0, st->in_use / 1048576.0);
    return ACCEL_ERR_DEVICE_MEMORY;
  }
  cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes, st->pool, st->stream);
  if (e != cudaSuccess) {
    *ptr = NULL;
    return accel__cuda_status(e, why, "cudaMallocFromPoolAsync");
  }
  st->in_use += bytes;
  return ACCEL_OK;
}

void accel__cuda_free(accel__cuda_state *st, void *ptr, size_t bytes) {
  if (!ptr) return;
  if (bytes == 0) bytes = 1;
  cudaFreeAsync(ptr, st->stream);
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
};
