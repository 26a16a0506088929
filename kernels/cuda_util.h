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

#endif /* ACCEL_KERNELS_CUDA_UTIL_H */
