/*
 * kernels/cuda_util.h - what every CUDA stage shares (internal, CUDA C++).
 *
 * The backend state of one context: its device, one stream, a private memory
 * pool (so the host program's own CUDA allocations are untouched), and the
 * context's device memory budget, which every allocation is checked against.
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

/* Map a CUDA error to a status and write "<what>: <name>: <text>" to why. */
accel_status accel__cuda_status(cudaError_t err, char *why, const char *what);

/* Begin/end GPU work for a call: locks the state, makes its device current
 * on this thread (restoring the caller's device afterwards). */
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

/* Tests: the emulated executor's CUDA calls fail on request, as a device's
 * can. While accel__cuda_emulated_fault_at is n >= 0, n more calls succeed
 * and the next one fails with accel__cuda_emulated_fault_error (then it is
 * -1 again). Like a failed CUDA runtime call, a failed emulated call is also
 * remembered as the thread's last error until someone reads it. */
extern "C" int64_t accel__cuda_emulated_fault_at;
extern "C" int accel__cuda_emulated_fault_error;
cudaError_t accel__cuda_emulated_call(void);      /* the fault, or cudaSuccess */
cudaError_t accel__cuda_emulated_last_error(void); /* read and reset, as cudaGetLastError */

#ifdef __cplusplus
#include <stdlib.h>
#include <string.h>

/* Where the pipeline runs: a CUDA device (st != NULL), or the host, for
 * tests without a GPU (memory from malloc within a budget, filled with 0xA5
 * as device memory holds garbage; kernels as loops over the same per-thread
 * bodies; every call may fail on request: accel__cuda_emulated_fault_at). */
struct accel__executor {
  accel__cuda_state *st;
  uint64_t emu_budget, emu_in_use;

  uint64_t room() const {
    const uint64_t b = st ? st->budget : emu_budget, u = st ? st->in_use : emu_in_use;
    return b > u ? b - u : 0;
  }
  accel_status alloc(size_t n, uint8_t **p, char *why) {
    if (st) return accel__cuda_alloc(st, n, (void **)p, why);
    const cudaError_t e = accel__cuda_emulated_call();
    if (e != cudaSuccess) return accel__cuda_status(e, why, "cudaMallocFromPoolAsync");
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
  uint8_t *host_alloc(size_t n) {
    uint8_t *p = nullptr;
    if (st) return cudaHostAlloc((void **)&p, n, cudaHostAllocDefault) == cudaSuccess ? p : nullptr;
    return accel__cuda_emulated_call() == cudaSuccess ? (uint8_t *)malloc(n) : nullptr;
  }
  void host_free(uint8_t *p) {
    if (p && st) cudaFreeHost(p);
    else free(p);
  }
  cudaError_t upload(void *d, const void *h, size_t n) {
    if (st) return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, st->stream);
    if (const cudaError_t e = accel__cuda_emulated_call()) return e;
    memcpy(d, h, n);
    return cudaSuccess;
  }
  cudaError_t download(void *h, const void *d, size_t n) {
    if (st) return cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, st->stream);
    if (const cudaError_t e = accel__cuda_emulated_call()) return e;
    memcpy(h, d, n);
    return cudaSuccess;
  }
  cudaError_t zero(void *d, size_t n) {
    if (st) return cudaMemsetAsync(d, 0, n, st->stream);
    if (const cudaError_t e = accel__cuda_emulated_call()) return e;
    memset(d, 0, n);
    return cudaSuccess;
  }
  cudaError_t sync() { return st ? cudaStreamSynchronize(st->stream) : accel__cuda_emulated_call(); }
  cudaError_t last_error() { return st ? cudaGetLastError() : accel__cuda_emulated_last_error(); }
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
  if (!x->st) {
    if (const cudaError_t e = accel__cuda_emulated_call()) return accel__cuda_status(e, why, what);
    for (uint64_t i = 0; i < n; i++) f(i);
    return ACCEL_OK;
  }
  const uint64_t blocks = (n + 255) / 256;
  k_each<<<(unsigned)(blocks < 65535u * 16 ? blocks : 65535u * 16), 256, 0, x->st->stream>>>(n, f);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? ACCEL_OK : accel__cuda_status(e, why, what);
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
  if (!x->st) {
    if (const cudaError_t e = accel__cuda_emulated_call()) return accel__cuda_status(e, why, what);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) f(r, c);
    return ACCEL_OK;
  }
  const dim3 block(32, 4, 1);
  k_each2d<<<accel__grid2d(cols, rows, block), block, 0, x->st->stream>>>(rows, cols, f);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? ACCEL_OK : accel__cuda_status(e, why, what);
}

/* f(&executor) on the call's device: its scope entered, then left. */
template <class F> accel_status with_device(accel__call *call, F f) {
  accel__cuda_scope scope;
  accel_status s = accel__cuda_enter(call, &scope);
  if (s) return s;
  accel__executor x = {scope.st, 0, 0};
  s = f(&x);
  accel__cuda_leave(&scope);
  return s;
}

/* A device buffer released when it goes out of scope. */
struct dbuf {
  accel__executor *x = nullptr;
  uint8_t *p = nullptr;
  size_t n = 0;
  accel_status get(accel__executor *ex, size_t bytes, char *why) {
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

inline accel_status check(accel__executor *x, cudaError_t e, char *why, const char *what) {
  if (e == cudaSuccess) e = x->last_error();
  return e == cudaSuccess ? ACCEL_OK : accel__cuda_status(e, why, what);
}

/* Copy rows between layouts: `rows` rows of `width` bytes, spitch/dpitch
 * bytes apart (cudaMemcpy2DAsync, or memcpy in emulation). */
inline cudaError_t copy2d(accel__executor *x, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t rows, cudaMemcpyKind kind) {
  if (!x->st) {
    if (const cudaError_t e = accel__cuda_emulated_call()) return e;
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
  }
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, x->st->stream);
}

}  // namespace

#endif

#endif /* ACCEL_KERNELS_CUDA_UTIL_H */
