/*
 * kernels/cuda_util.h - what every CUDA stage shares (internal, CUDA C++).
 *
 * - The backend state of one context: its device, one stream, a private
 *   memory pool (so the host program's own CUDA allocations are untouched),
 *   and the context's device memory budget, which every allocation is
 *   checked against.
 * - The error path: accel__cuda_check, the one check of every CUDA call;
 *   accel__cuda_launch, a launch that returns its own error; stale errors
 *   forgotten when a stage starts.
 * - The executor (a device, or the host emulation for tests), whose calls
 *   each return their own error, and the launch and buffer helpers.
 */
#ifndef ACCEL_KERNELS_CUDA_UTIL_H
#define ACCEL_KERNELS_CUDA_UTIL_H

#include "core/internal.h"

#include <cuda_runtime.h>
#include <pthread.h>

typedef struct accel__cuda_state {
  int device;
  cudaStream_t stream;
  cudaMemPool_t pool;
  uint64_t budget;   /* bytes the context may hold */
  uint64_t in_use;   /* bytes currently allocated through accel__cuda_alloc */
  pthread_mutex_t mu; /* serializes GPU work of one context */
} accel__cuda_state;

/* The oldest NVIDIA driver that runs the CUDA runtime libaccel links
 * (statically): R580 for CUDA 13, R525 for CUDA 12. */
#if CUDART_VERSION >= 13000
#define ACCEL__CUDA_MIN_DRIVER "580"
#elif CUDART_VERSION >= 12000
#define ACCEL__CUDA_MIN_DRIVER "525"
#else
#define ACCEL__CUDA_MIN_DRIVER "450"
#endif
#ifndef ACCEL_CUDA_ARCHS
#define ACCEL_CUDA_ARCHS "?"
#endif

/* "<what>: <cudaErrorName>: <text>" in why, and for the errors a user can
 * act on, what to do: update the driver, rebuild for this device. */
void accel__cuda_reason(cudaError_t err, char *why, const char *what);

/* The one check of every CUDA call in kernels/ (the model is CUB's CubDebug):
 *
 *   if ((s = accel__cuda_check(cudaMemcpyAsync(...), why, "upload"))) return s;
 *
 * It judges the error that this call returned (an asynchronous call's own,
 * a launch's own through accel__cuda_launch), never cudaGetLastError's
 * answer, which may belong to an earlier, unrelated call. On failure it
 * writes the reason into why (accel__cuda_reason; nothing when why is NULL,
 * as for teardown calls whose failure changes nothing) and returns the
 * status the error maps to; on success ACCEL_OK, and why is left alone.
 * tests/check_cuda_calls.py fails the tests when a stage file (kernels/, .cu)
 * makes a CUDA call, a launch or an executor call outside it. */
inline accel_status accel__cuda_check(cudaError_t err, char *why, const char *what) {
  if (err == cudaSuccess) return ACCEL_OK;
  if (why) accel__cuda_reason(err, why, what);
  switch (err) {
  case cudaErrorMemoryAllocation:
    return ACCEL_ERR_DEVICE_MEMORY;
  case cudaErrorNoDevice:
  case cudaErrorInvalidDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorCompatNotSupportedOnDevice:
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorUnsupportedPtxVersion:
  case cudaErrorDevicesUnavailable:
    return ACCEL_ERR_NO_DEVICE;
  default:
    return ACCEL_ERR_DEVICE;
  }
}

/* A stage starts afresh: forget an error a previous call left on this
 * thread (a failed cudaHostAlloc, a device query), so that nothing can
 * mistake it for one of this stage's (accel__cuda_enter calls it). */
inline void accel__cuda_forget_stale_error() { (void)cudaGetLastError(); }

/* Begin/end GPU work for a call: enter locks the state, makes its device
 * current on this thread (remembering the caller's) and forgets stale errors;
 * leave waits for the stream, gives the pool's free memory back to the device
 * (a call holds device memory only while it runs: PyTorch or CuPy in the same
 * process need it), restores the caller's device and unlocks. */
typedef struct accel__cuda_scope {
  accel__cuda_state *st;
  int prev_device;
} accel__cuda_scope;
accel_status accel__cuda_enter(accel__call *call, accel__cuda_scope *scope);
void accel__cuda_leave(accel__cuda_scope *scope);

/* Stream-ordered allocation from the context's pool, within its budget.
 * ACCEL_ERR_DEVICE_MEMORY when over budget or out of device memory. */
accel_status accel__cuda_alloc(accel__cuda_state *st, size_t bytes, void **ptr, char *why);
void accel__cuda_free(accel__cuda_state *st, void *ptr, size_t bytes);

/* Grid for a 2D launch over rows and columns; kernels loop with grid
 * strides, so any size fits within the device's grid limits. */
dim3 accel__grid2d(int64_t width, int64_t height, dim3 block);

/* Tests: CUDA calls fail on request, on a device or in the host emulation.
 * While accel__cuda_fault_at is n >= 0, n more calls of the executor (and
 * launches) succeed and the next one fails with accel__cuda_fault_error
 * without being made (then it is -1 again), so that tests reach every error
 * path. Like a failed CUDA runtime call, a failed emulated call is also
 * remembered as the thread's last error until someone reads it. */
extern "C" int64_t accel__cuda_fault_at;
extern "C" int accel__cuda_fault_error;
cudaError_t accel__cuda_fault(void);               /* the fault due now, or cudaSuccess */
cudaError_t accel__cuda_emulated_last_error(void); /* read and reset, as cudaGetLastError */

#include <stdlib.h>
#include <string.h>

#include <utility>

/* kernel<<<grid, block, shared, stream>>>(args...), returning the launch's
 * own error (<<<>>> returns none, and cudaGetLastError after it may answer
 * for another call). */
template <class... P, class... A>
[[nodiscard]] cudaError_t accel__cuda_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared,
                                             cudaStream_t stream, A &&...args) {
  if (const cudaError_t e = accel__cuda_fault()) return e;
  cudaLaunchConfig_t cfg = {}; /* no attributes */
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = shared;
  cfg.stream = stream;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

/* Where the pipeline runs: a CUDA device (st != NULL), or the host, for
 * tests without a GPU (memory from malloc within a budget, filled with 0xA5
 * as device memory holds garbage; kernels as loops over the same per-thread
 * bodies). Every call may fail on request: accel__cuda_fault_at.
 * Every call returns its own error, for accel__cuda_check. */
struct accel__executor {
  accel__cuda_state *st;
  uint64_t emu_budget, emu_in_use;

  uint64_t room() const {
    const uint64_t b = st ? st->budget : emu_budget, u = st ? st->in_use : emu_in_use;
    return b > u ? b - u : 0;
  }
  [[nodiscard]] accel_status alloc(size_t n, uint8_t **p, char *why) {
    *p = nullptr;
    if (accel_status s = accel__cuda_check(accel__cuda_fault(), why, "cudaMallocFromPoolAsync")) return s;
    if (st) return accel__cuda_alloc(st, n, (void **)p, why);
    if (emu_in_use + n > emu_budget) {
      accel__why(why, "needs %.1f MiB more device memory, over the budget of %.1f MiB", n / 1048576.0,
                 emu_budget / 1048576.0);
      return ACCEL_ERR_DEVICE_MEMORY;
    }
    if (!(*p = (uint8_t *)malloc(n ? n : 1))) {
      accel__why(why, "out of memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    memset(*p, 0xA5, n);
    emu_in_use += n;
    return ACCEL_OK;
  }
  void release(uint8_t *p, size_t n) {
    if (!p) return;
    if (st) {
      accel__cuda_free(st, p, n);
    } else {
      free(p);
      emu_in_use -= n;
    }
  }
  /* Pinned host memory (page-locked: asynchronous copies). */
  [[nodiscard]] cudaError_t host_alloc(size_t n, uint8_t **p) {
    *p = nullptr;
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (st) return cudaHostAlloc((void **)p, n ? n : 1, cudaHostAllocDefault);
    return (*p = (uint8_t *)malloc(n ? n : 1)) ? cudaSuccess : cudaErrorMemoryAllocation;
  }
  void host_free(uint8_t *p) {
    if (!p) return;
    if (st) (void)accel__cuda_check(cudaFreeHost(p), nullptr, "cudaFreeHost");
    else free(p);
  }
  [[nodiscard]] cudaError_t upload(void *d, const void *h, size_t n) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (st) return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, st->stream);
    memcpy(d, h, n);
    return cudaSuccess;
  }
  [[nodiscard]] cudaError_t download(void *h, const void *d, size_t n) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (st) return cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, st->stream);
    memcpy(h, d, n);
    return cudaSuccess;
  }
  [[nodiscard]] cudaError_t zero(void *d, size_t n) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (st) return cudaMemsetAsync(d, 0, n, st->stream);
    memset(d, 0, n);
    return cudaSuccess;
  }
  /* Rows between layouts: `rows` rows of `width` bytes, spitch/dpitch bytes
   * apart (host to device or back). */
  [[nodiscard]] cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t rows, cudaMemcpyKind kind) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (st) return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, st->stream);
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
  }
  [[nodiscard]] cudaError_t sync() {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaStreamSynchronize(st->stream) : cudaSuccess;
  }
  /* Wait for the stream before freeing what its work uses, on the way out of
   * a stage that failed: the error that matters was reported already. */
  void drain() {
    if (st) (void)accel__cuda_check(cudaStreamSynchronize(st->stream), nullptr, "cudaStreamSynchronize");
  }
  /* In emulation, what stands for a launch: host loops f() (the kernel's
   * per-thread bodies), after the fault a launch could meet. */
  template <class F> [[nodiscard]] cudaError_t emulate(F f) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    f();
    return cudaSuccess;
  }
};

/* Helpers every stage file shares (each file gets its own copies). */
namespace {

template <class F> __global__ void k_each(uint64_t n, F f) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    f(i);
}

/* f(i) for i in [0, n): a grid-stride kernel, or a loop in emulation. */
template <class F> accel_status each(accel__executor *x, uint64_t n, F f, char *why, const char *what) {
  if (!n) return ACCEL_OK;
  if (!x->st) return accel__cuda_check(x->emulate([&] {
    for (uint64_t i = 0; i < n; i++) f(i);
  }), why, what);
  const uint64_t blocks = (n + 255) / 256;
  const dim3 grid((unsigned)(blocks < 65535u * 16 ? blocks : 65535u * 16));
  return accel__cuda_check(accel__cuda_launch(k_each<F>, grid, dim3(256), 0, x->st->stream, n, f), why, what);
}

/* f(r, c) over a rows x cols grid: a 2D grid-stride kernel (any size fits
 * the launch limits), or loops in emulation. */
template <class F> __global__ void k_each2d(int64_t rows, int64_t cols, F f) {
  for (int64_t r = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; r < rows; r += (int64_t)gridDim.y * blockDim.y)
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x)
      f(r, c);
}

template <class F>
accel_status each2d(accel__executor *x, int64_t rows, int64_t cols, F f, char *why, const char *what) {
  if (rows <= 0 || cols <= 0) return ACCEL_OK;
  if (!x->st) return accel__cuda_check(x->emulate([&] {
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) f(r, c);
  }), why, what);
  const dim3 block(32, 4, 1);
  return accel__cuda_check(
      accel__cuda_launch(k_each2d<F>, accel__grid2d(cols, rows, block), block, 0, x->st->stream, rows, cols, f), why,
      what);
}

/* f(&executor) on the call's device: its scope entered (stale errors
 * forgotten), then left (memory given back). */
template <class F> accel_status with_device(accel__call *call, F f) {
  accel__cuda_scope scope;
  accel_status s = accel__cuda_enter(call, &scope);
  if (s) return s;
  accel__executor x = {scope.st, 0, 0};
  s = f(&x);
  accel__cuda_leave(&scope);
  return s;
}

/* The same on the host, for tests: a "device" of `budget` bytes. */
template <class F> accel_status with_emulation(uint64_t budget, F f) {
  (void)accel__cuda_emulated_last_error(); /* as accel__cuda_enter forgets stale errors */
  accel__executor x = {nullptr, budget, 0};
  return f(&x);
}

/* A device buffer released when it goes out of scope. */
struct dbuf {
  accel__executor *x = nullptr;
  uint8_t *p = nullptr;
  size_t n = 0;
  [[nodiscard]] accel_status get(accel__executor *ex, size_t bytes, char *why) {
    x = ex;
    n = bytes;
    return x->alloc(bytes, &p, why);
  }
  template <class T> T *as() const { return (T *)(void *)p; }
  void reset() {
    if (x) x->release(p, n);
    x = nullptr;
    p = nullptr;
  }
  ~dbuf() { reset(); }
};

}  // namespace

#endif /* ACCEL_KERNELS_CUDA_UTIL_H */
