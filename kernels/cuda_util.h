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

#ifdef __cplusplus
#include <stdlib.h>
#include <string.h>

/* Where the pipeline runs: a CUDA device (st != NULL), or the host, for
 * tests without a GPU (memory from malloc within a budget, kernels as
 * loops over the same per-thread bodies). */
struct accel__executor {
  accel__cuda_state *st;
  uint64_t emu_budget, emu_in_use;

  uint64_t room() const {
    const uint64_t b = st ? st->budget : emu_budget, u = st ? st->in_use : emu_in_use;
    return b > u ? b - u : 0;
  }
  accel_status alloc(size_t n, uint8_t **p, char *why) {
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
    return (uint8_t *)malloc(n);
  }
  void host_free(uint8_t *p) {
    if (p && st) cudaFreeHost(p);
    else free(p);
  }
  cudaError_t upload(void *d, const void *h, size_t n) {
    if (st) return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, st->stream);
    memcpy(d, h, n);
    return cudaSuccess;
  }
  cudaError_t download(void *h, const void *d, size_t n) {
    if (st) return cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, st->stream);
    memcpy(h, d, n);
    return cudaSuccess;
  }
  cudaError_t zero(void *d, size_t n) {
    if (st) return cudaMemsetAsync(d, 0, n, st->stream);
    memset(d, 0, n);
    return cudaSuccess;
  }
  cudaError_t sync() { return st ? cudaStreamSynchronize(st->stream) : cudaSuccess; }
  cudaError_t last_error() { return st ? cudaGetLastError() : cudaSuccess; }
};

#endif

#endif /* ACCEL_KERNELS_CUDA_UTIL_H */
