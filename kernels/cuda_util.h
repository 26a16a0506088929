/*
 * kernels/cuda_util.h - what every CUDA stage shares (internal, CUDA C++).
 *
 * - The backend state of one context: its device, one stream, a private
 *   memory pool (so the host program's own CUDA allocations are untouched),
 *   and the context's device memory budget, which every allocation is
 *   checked against; or, for tests, the host emulation of a device.
 * - The error path: accel__cuda_check, the one check of every CUDA call,
 *   which also remembers where a failure happened; accel__cuda_launch, a
 *   launch that returns its own error; stale errors forgotten when a stage
 *   starts.
 * - The executor (a device, or the host emulation for tests), whose calls
 *   each return their own error; the launch helpers (each, each2d), device
 *   and pinned host buffers (dbuf, hbuf), checked copies (upload, download).
 *
 * A stage file writes every step as a status:
 *
 *   accel_status s = buf.get(x, bytes, why);
 *   if (!s) s = upload(x, buf.p, host, bytes, why);
 *   if (!s) s = each(x, n, kernel_body{...}, why, "what it computes");
 *   if (!s) s = accel__cuda_check(x->zero(buf.p, bytes), why, "memset");
 *
 * tests/check_cuda_calls.py keeps the stage files to it.
 */
#ifndef ACCEL_KERNELS_CUDA_UTIL_H
#define ACCEL_KERNELS_CUDA_UTIL_H

#include "core/internal.h"
#include "testing.h"

#include <cuda_runtime.h>
#include <pthread.h>

typedef struct accel__cuda_state {
  int device;
  bool emulated; /* the host emulation (tests): no device, stream or pool */
  cudaStream_t stream;
  cudaMemPool_t pool;
  uint64_t budget;    /* bytes the context may hold */
  uint64_t in_use;    /* bytes currently allocated through accel__cuda_alloc (emulated: by the executors) */
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

/* Where a CUDA call is checked: as a default argument, accel__cuda_here()
 * is the place of the call that uses the default, so a helper that takes a
 * site and passes it on names its caller's line, not its own. */
struct accel__cuda_site {
  const char *file;
  int line;
};
inline accel__cuda_site accel__cuda_here(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return accel__cuda_site{file, line};
}
/* Remember (per thread) where the last reported failure happened, for
 * accel__cuda_failure_site(); forget it when a stage starts. */
void accel__cuda_note_failure(accel__cuda_site at);
void accel__cuda_forget_failure(void);

/* The one check of every CUDA call in kernels/ (the idea of CUB's CubDebug,
 * which wraps each call and knows its file and line):
 *
 *   if ((s = accel__cuda_check(cudaMemcpyAsync(...), why, "upload"))) return s;
 *
 * It judges the error that this call returned (an asynchronous call's own,
 * a launch's own through accel__cuda_launch), never cudaGetLastError's
 * answer, which may belong to an earlier, unrelated call. On failure it
 * writes the reason into why (accel__cuda_reason), remembers the caller's
 * file and line, and returns the status the error maps to; when why is NULL
 * (teardown calls whose failure changes nothing) it does neither. On success
 * ACCEL_OK, and why is left alone. tests/check_cuda_calls.py fails the tests
 * when a stage file (kernels/, .cu) makes a CUDA call, a launch or an
 * executor call outside it. */
inline accel_status accel__cuda_check(cudaError_t err, char *why, const char *what,
                                      accel__cuda_site at = accel__cuda_here()) {
  if (err == cudaSuccess) return ACCEL_OK;
  if (why) {
    accel__cuda_reason(err, why, what);
    accel__cuda_note_failure(at);
  }
  switch (err) {
  case cudaErrorMemoryAllocation: return ACCEL_ERR_DEVICE_MEMORY;
  case cudaErrorNoDevice:
  case cudaErrorInvalidDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorCompatNotSupportedOnDevice:
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorUnsupportedPtxVersion:
  case cudaErrorDevicesUnavailable: return ACCEL_ERR_NO_DEVICE;
  default: return ACCEL_ERR_DEVICE;
  }
}

/* Tests: CUDA calls fail on request (kernels/testing.h). */
cudaError_t accel__cuda_fault(void);               /* the fault due now, or cudaSuccess */
cudaError_t accel__cuda_emulated_last_error(void); /* read and reset, as cudaGetLastError */

/* A stage starts afresh: forget an error a previous call left on this
 * thread (a failed cudaHostAlloc, a device query; in emulation, a failed
 * emulated call), so that nothing can mistake it for one of this stage's,
 * and the place of the last failure. */
inline void accel__cuda_forget_stale_error(bool device) {
  if (device) (void)cudaGetLastError();
  else (void)accel__cuda_emulated_last_error();
  accel__cuda_forget_failure();
}

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

/* The contexts whose GPU work this thread is running (with_device marks
 * them, emulated or not). A progress callback runs inside that work, so a
 * stage it calls on the same context would wait for its own lock: that
 * call fails at once instead (accel__cuda_reentry). */
bool accel__cuda_entered(const accel__cuda_state *st);
void accel__cuda_mark(const accel__cuda_state *st);
void accel__cuda_unmark(void);
accel_status accel__cuda_reentry(accel__call *call);

/* Stream-ordered allocation from the context's pool, within its budget.
 * ACCEL_ERR_DEVICE_MEMORY when over budget or out of device memory. */
accel_status accel__cuda_alloc(accel__cuda_state *st, size_t bytes, void **ptr, char *why, accel__cuda_site at);
void accel__cuda_free(accel__cuda_state *st, void *ptr, size_t bytes);

/* Grid for a 2D launch over rows and columns; kernels loop with grid
 * strides, so any size fits within the device's grid limits. */
dim3 accel__grid2d(int64_t width, int64_t height, dim3 block);

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
 * Every call returns its own error, for accel__cuda_check; stage files
 * take memory through dbuf and hbuf, not alloc and host_alloc. */
struct accel__executor {
  accel__cuda_state *st;
  uint64_t emu_budget, emu_in_use;
  accel__call *call; /* counts the bytes each copy moves (the stage statistics) */

  uint64_t room() const {
    const uint64_t b = st ? st->budget : emu_budget, u = st ? st->in_use : emu_in_use;
    return b > u ? b - u : 0;
  }
  [[nodiscard]] accel_status alloc(size_t n, uint8_t **p, char *why, accel__cuda_site at) {
    *p = nullptr;
    if (accel_status s = accel__cuda_check(accel__cuda_fault(), why, "cudaMallocFromPoolAsync", at)) return s;
    if (st) return accel__cuda_alloc(st, n, (void **)p, why, at);
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
    call->bytes_up += n;
    if (st) return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, st->stream);
    memcpy(d, h, n);
    return cudaSuccess;
  }
  [[nodiscard]] cudaError_t download(void *h, const void *d, size_t n) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    call->bytes_down += n;
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
   * apart (host to device or back). Packed rows on both sides go as one
   * plain copy; pitches over max_pitch, which cudaMemcpy2DAsync refuses
   * (cudaErrorInvalidPitchValue: the device's maxPitch, 2^31 - 1 bytes on
   * current GPUs), a copy per row. */
  static constexpr size_t max_pitch = (size_t)INT32_MAX;
  [[nodiscard]] cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                                   cudaMemcpyKind kind) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    if (kind == cudaMemcpyHostToDevice) call->bytes_up += width * rows;
    if (kind == cudaMemcpyDeviceToHost) call->bytes_down += width * rows;
    if (st && dpitch == width && spitch == width) return cudaMemcpyAsync(dst, src, width * rows, kind, st->stream);
    if (st && dpitch <= max_pitch && spitch <= max_pitch)
      return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, st->stream);
    if (st) {
      for (size_t r = 0; r < rows; r++)
        if (const cudaError_t e =
                cudaMemcpyAsync((char *)dst + r * dpitch, (const char *)src + r * spitch, width, kind, st->stream))
          return e;
      return cudaSuccess;
    }
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
  }
  [[nodiscard]] cudaError_t sync() {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaStreamSynchronize(st->stream) : cudaSuccess;
  }
  /* Wait for all work on the device, of every stream: the caller's work
   * that produces a device array (accel_array_on_device) we read next. */
  [[nodiscard]] cudaError_t device_sync() {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaDeviceSynchronize() : cudaSuccess;
  }
  /* A second stream and events, for copies that overlap the kernels of the
   * main stream (slab_stager). In emulation every copy is done when it is
   * issued, so the stream and events are null and their calls succeed. */
  [[nodiscard]] cudaError_t stream_create(cudaStream_t *s) {
    *s = nullptr;
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaStreamCreateWithFlags(s, cudaStreamNonBlocking) : cudaSuccess;
  }
  void stream_destroy(cudaStream_t s) {
    if (!st || !s) return;
    (void)accel__cuda_check(cudaStreamSynchronize(s), nullptr, "cudaStreamSynchronize");
    (void)accel__cuda_check(cudaStreamDestroy(s), nullptr, "cudaStreamDestroy");
  }
  [[nodiscard]] cudaError_t event_create(cudaEvent_t *ev) {
    *ev = nullptr;
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaEventCreateWithFlags(ev, cudaEventDisableTiming) : cudaSuccess;
  }
  void event_destroy(cudaEvent_t ev) {
    if (st && ev) (void)accel__cuda_check(cudaEventDestroy(ev), nullptr, "cudaEventDestroy");
  }
  /* ev marks the work queued so far on s (nullptr: the main stream). */
  [[nodiscard]] cudaError_t record(cudaEvent_t ev, cudaStream_t s) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaEventRecord(ev, s ? s : st->stream) : cudaSuccess;
  }
  /* Work queued next on s (nullptr: the main stream) waits for ev. */
  [[nodiscard]] cudaError_t wait(cudaStream_t s, cudaEvent_t ev) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaStreamWaitEvent(s ? s : st->stream, ev, 0) : cudaSuccess;
  }
  /* The host waits for ev. */
  [[nodiscard]] cudaError_t event_sync(cudaEvent_t ev) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    return st ? cudaEventSynchronize(ev) : cudaSuccess;
  }
  /* upload() on stream s. */
  [[nodiscard]] cudaError_t upload_on(cudaStream_t s, void *d, const void *h, size_t n) {
    if (const cudaError_t e = accel__cuda_fault()) return e;
    call->bytes_up += n;
    if (st) return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
    memcpy(d, h, n);
    return cudaSuccess;
  }
  /* Wait for the stream before freeing what its work uses, on the way out of
   * a stage that failed: the error that matters was reported already. */
  void drain() {
    if (st) (void)accel__cuda_check(cudaStreamSynchronize(st->stream), nullptr, "cudaStreamSynchronize");
  }
  /* kernel<<<grid, block, shared>>>(args...) on the stream; in emulation,
   * host() instead (the kernel's per-thread bodies in loops), after the
   * fault a launch could meet. */
  template <class H, class... P, class... A>
  [[nodiscard]] cudaError_t launch(H host, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, A &&...args) {
    if (st) return accel__cuda_launch(kernel, grid, block, shared, st->stream, std::forward<A>(args)...);
    if (const cudaError_t e = accel__cuda_fault()) return e;
    host();
    return cudaSuccess;
  }
};

/* Helpers every stage file shares (each file gets its own copies). */
namespace {

template <class F> __global__ void k_each(uint64_t n, F f) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) f(i);
}

/* f(i) for i in [0, n): a grid-stride kernel, or a loop in emulation. */
template <class F>
accel_status each(accel__executor *x, uint64_t n, F f, char *why, const char *what,
                  accel__cuda_site at = accel__cuda_here()) {
  if (!n) return ACCEL_OK;
  const uint64_t blocks = (n + 255) / 256;
  const dim3 grid((unsigned)(blocks < 65535u * 16 ? blocks : 65535u * 16));
  const auto host = [&] {
    for (uint64_t i = 0; i < n; i++) f(i);
  };
  return accel__cuda_check(x->launch(host, k_each<F>, grid, dim3(256), 0, n, f), why, what, at);
}

/* f(r, c) over a rows x cols grid: a 2D grid-stride kernel (any size fits
 * the launch limits), or loops in emulation. */
template <class F> __global__ void k_each2d(int64_t rows, int64_t cols, F f) {
  for (int64_t r = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; r < rows; r += (int64_t)gridDim.y * blockDim.y)
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x)
      f(r, c);
}

template <class F>
accel_status each2d(accel__executor *x, int64_t rows, int64_t cols, F f, char *why, const char *what,
                    accel__cuda_site at = accel__cuda_here()) {
  if (rows <= 0 || cols <= 0) return ACCEL_OK;
  const dim3 block(32, 4, 1);
  const auto host = [&] {
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) f(r, c);
  };
  return accel__cuda_check(x->launch(host, k_each2d<F>, accel__grid2d(cols, rows, block), block, 0, rows, cols, f), why,
                           what, at);
}

/* f(&executor) for one call of a stage: on the call's device, its scope
 * entered (stale errors forgotten) and then left (memory given back); in
 * the host emulation (tests), within the context's budget. */
template <class F> accel_status with_device(accel__call *call, F f) {
  accel__cuda_state *st = (accel__cuda_state *)call->state;
  if (accel__cuda_entered(st)) return accel__cuda_reentry(call);
  if (st->emulated) {
    accel__cuda_forget_stale_error(false);
    /* memory a call keeps (the registration's held inputs) stays counted
     * against the budget until a later call gives it back, as on a device */
    const uint64_t start = __atomic_load_n(&st->in_use, __ATOMIC_RELAXED);
    accel__executor x = {nullptr, st->budget, start, call};
    accel__cuda_mark(st);
    const accel_status s = f(&x);
    accel__cuda_unmark();
    __atomic_add_fetch(&st->in_use, x.emu_in_use - start, __ATOMIC_RELAXED); /* wraps for a net release */
    return s;
  }
  accel__cuda_scope scope;
  accel_status s = accel__cuda_enter(call, &scope);
  if (s) return s;
  accel__executor x = {scope.st, 0, 0, call};
  accel__cuda_mark(st);
  s = f(&x);
  accel__cuda_unmark();
  accel__cuda_leave(&scope);
  return s;
}

/* A device buffer released when it goes out of scope (or taken again). */
struct dbuf {
  accel__executor *x = nullptr;
  uint8_t *p = nullptr;
  size_t n = 0;
  [[nodiscard]] accel_status get(accel__executor *ex, size_t bytes, char *why,
                                 accel__cuda_site at = accel__cuda_here()) {
    reset();
    x = ex;
    const accel_status s = x->alloc(bytes, &p, why, at);
    if (!s) n = bytes;
    return s;
  }
  /* Room for `count` T (at least one) holding h's. */
  template <class T>
  [[nodiscard]] accel_status put(accel__executor *ex, const T *h, size_t count, char *why, const char *what,
                                 accel__cuda_site at = accel__cuda_here()) {
    accel_status s = get(ex, sizeof(T) * (count ? count : 1), why, at);
    if (!s && count) s = accel__cuda_check(x->upload(p, h, sizeof(T) * count), why, what, at);
    return s;
  }
  template <class T> T *as() const { return (T *)(void *)p; }
  /* The memory handed on to outlive the buffer and the call (memory one
   * call keeps for later calls: adopt() takes it back), no longer released
   * here; its size is the caller's to keep. */
  [[nodiscard]] void *keep() {
    void *q = p;
    x = nullptr;
    p = nullptr;
    n = 0;
    return q;
  }
  /* Memory of `bytes` from keep() (NULL: none), released with the buffer. */
  void adopt(accel__executor *ex, void *mem, size_t bytes) {
    reset();
    if (!mem) return;
    x = ex;
    p = (uint8_t *)mem;
    n = bytes;
  }
  /* The caller's device memory (a device array) in place of a buffer of
   * ours: used as one, never released. */
  void borrow(void *mem) {
    reset();
    p = (uint8_t *)mem;
  }
  void reset() {
    if (x) x->release(p, n);
    x = nullptr;
    p = nullptr;
    n = 0;
  }
  ~dbuf() { reset(); }
};

/* Pinned host memory of at least `bytes` (kept while large enough),
 * released when it goes out of scope. */
struct hbuf {
  accel__executor *x = nullptr;
  uint8_t *p = nullptr;
  size_t n = 0;
  [[nodiscard]] accel_status reserve(accel__executor *ex, size_t bytes, char *why, const char *what,
                                     accel__cuda_site at = accel__cuda_here()) {
    if (bytes <= n) return ACCEL_OK;
    reset();
    x = ex;
    const accel_status s = accel__cuda_check(x->host_alloc(bytes, &p), why, what, at);
    if (!s) n = bytes;
    return s;
  }
  /* Waits for the stream first: a copy from or into the pinned memory may
   * still be queued (an upload's last chunk is not waited for), and
   * cudaFreeHost is not documented to wait for it. */
  void reset() {
    if (x && p) x->drain();
    if (x) x->host_free(p);
    x = nullptr;
    p = nullptr;
    n = 0;
  }
  ~hbuf() { reset(); }
};

/* Uploads of consecutive slabs (or tiles) that overlap the kernels on the
 * previous one: two device buffers and two pinned host buffers, the copies
 * on a second stream, ordered by events:
 *
 *   slab_stager sg;
 *   s = sg.init(x, bytes, overlap, why);                   // room for the largest slab
 *   if (!s) s = sg.put(0, n0, src0, fill0, why);          // slab 0 on its way
 *   for (k = 0; ...; k++) {
 *     if (!s) s = sg.ready(k, &dev, why);                  // the main stream waits for slab k
 *     ... kernels on dev (main stream) ...
 *     if (!s) s = sg.done(k, why);                         // after them, slab k's buffer is free
 *     if (!s && more) s = sg.put(k + 1, n, src, fill, why); // made on the host meanwhile
 *     ... downloads of slab k's results ...
 *   }
 *
 * put() waits (host) for the upload that last read its pinned buffer,
 * copies the slab there from src (or lets fill(p) write it when src is
 * null), and queues the upload after the kernels that last read its device
 * buffer (slab k - 1's). The destructor waits for the copy stream before
 * anything is freed. Without overlap (one slab alone, or no room for two)
 * one device buffer and no pinned memory: each slab is uploaded from src
 * (or from a host buffer that fill writes) on the main stream, after the
 * kernels on the previous one, as a plain copy; put(k + 1) then overwrites
 * the only buffer, so a loop whose results stay in the staged buffer (read
 * by its downloads) calls it after them when !staged. */
struct slab_stager {
  /* the most pinned memory one staging buffer takes (page-locking is slow
   * and host memory finite): larger slabs are uploaded without overlap */
  static constexpr uint64_t max_bytes = (uint64_t)1 << 30;
  accel__executor *x = nullptr;
  bool staged = false;
  cudaStream_t copy = nullptr;
  cudaEvent_t up[2] = {nullptr, nullptr}, used[2] = {nullptr, nullptr};
  dbuf dev[2];
  hbuf pin[2];
  size_t cap = 0;
  slab_stager() = default;
  slab_stager(const slab_stager &) = delete;
  slab_stager &operator=(const slab_stager &) = delete;
  [[nodiscard]] accel_status init(accel__executor *ex, size_t bytes, bool overlap, char *why,
                                  accel__cuda_site at = accel__cuda_here()) {
    x = ex;
    cap = bytes;
    staged = overlap && bytes <= max_bytes && accel__cuda_overlap;
    if (!staged) return dev[0].get(x, bytes ? bytes : 1, why, at);
    accel_status s = accel__cuda_check(x->stream_create(&copy), why, "cudaStreamCreate", at);
    for (int b = 0; b < 2 && !s; b++) {
      s = dev[b].get(x, bytes ? bytes : 1, why, at);
      if (!s) s = pin[b].reserve(x, bytes ? bytes : 1, why, "pinned staging buffer", at);
      if (!s) s = accel__cuda_check(x->event_create(&up[b]), why, "cudaEventCreate", at);
      if (!s) s = accel__cuda_check(x->event_create(&used[b]), why, "cudaEventCreate", at);
      /* the buffers exist for the copy stream once the main stream got them */
      if (!s) s = accel__cuda_check(x->record(used[b], nullptr), why, "cudaEventRecord", at);
      if (!s) s = accel__cuda_check(x->record(up[b], copy), why, "cudaEventRecord", at);
    }
    return s;
  }
  template <class F>
  [[nodiscard]] accel_status put(int64_t k, size_t bytes, const void *src, F fill, char *why,
                                 accel__cuda_site at = accel__cuda_here()) {
    const int b = (int)(k & 1);
    if (bytes > cap) {
      accel__why(why, "a slab of %zu bytes exceeds its staging buffer of %zu", bytes, cap);
      return ACCEL_ERR_INTERNAL;
    }
    if (!staged) return direct(bytes, src, fill, why, at);
    accel_status s = accel__cuda_check(x->event_sync(up[b]), why, "cudaEventSynchronize", at);
    if (!s && src) memcpy(pin[b].p, src, bytes);
    if (!s && !src) fill(pin[b].p);
    if (!s) s = accel__cuda_check(x->wait(copy, used[b]), why, "cudaStreamWaitEvent", at);
    if (!s) s = accel__cuda_check(x->upload_on(copy, dev[b].p, pin[b].p, bytes), why, "upload", at);
    if (!s) s = accel__cuda_check(x->record(up[b], copy), why, "cudaEventRecord", at);
    return s;
  }
  [[nodiscard]] accel_status put(int64_t k, size_t bytes, const void *src, char *why,
                                 accel__cuda_site at = accel__cuda_here()) {
    return put(
        k, bytes, src, [](uint8_t *) {}, why, at);
  }
  [[nodiscard]] accel_status ready(int64_t k, uint8_t **p, char *why, accel__cuda_site at = accel__cuda_here()) {
    const int b = staged ? (int)(k & 1) : 0;
    *p = dev[b].p;
    return staged ? accel__cuda_check(x->wait(nullptr, up[b]), why, "cudaStreamWaitEvent", at) : ACCEL_OK;
  }
  [[nodiscard]] accel_status done(int64_t k, char *why, accel__cuda_site at = accel__cuda_here()) {
    return staged ? accel__cuda_check(x->record(used[k & 1], nullptr), why, "cudaEventRecord", at) : ACCEL_OK;
  }
  ~slab_stager() {
    if (!x || !staged) return;
    x->stream_destroy(copy); /* waits for its copies: then the buffers may go */
    for (int b = 0; b < 2; b++) {
      x->event_destroy(up[b]);
      x->event_destroy(used[b]);
    }
  }

 private:
  template <class F> accel_status direct(size_t bytes, const void *src, F fill, char *why, accel__cuda_site at) {
    void *tmp = src ? nullptr : malloc(bytes ? bytes : 1);
    if (!src && !tmp) {
      accel__why(why, "out of host memory for a slab");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    if (tmp) fill((uint8_t *)tmp);
    accel_status s = accel__cuda_check(x->upload(dev[0].p, src ? src : tmp, bytes), why, "upload", at);
    if (!s && tmp) s = accel__cuda_check(x->sync(), why, "upload", at); /* before tmp goes */
    free(tmp);
    return s;
  }
};

/* n bytes from the host to the device. */
inline accel_status upload(accel__executor *x, void *d, const void *h, size_t n, char *why, const char *what = "upload",
                           accel__cuda_site at = accel__cuda_here()) {
  return accel__cuda_check(x->upload(d, h, n), why, what, at);
}

/* n bytes from the device to the host, waited for (the host reads them next). */
inline accel_status download(accel__executor *x, void *h, const void *d, size_t n, char *why,
                             const char *what = "download", accel__cuda_site at = accel__cuda_here()) {
  accel_status s = accel__cuda_check(x->download(h, d, n), why, what, at);
  if (!s) s = accel__cuda_check(x->sync(), why, what, at);
  return s;
}

/* Volumes between pageable host memory (the caller's arrays) and the device
 * through two pinned chunks of `pin` (accel__cuda_pin_chunk bytes each), so
 * the DMA engine copies at full speed and the host's copy of one chunk
 * overlaps the transfer of the other. Up to one chunk, a plain copy (pinning
 * would cost more than it saves). */
inline accel_status upload_pinned(accel__executor *x, hbuf &pin, void *d, const void *h, size_t n, char *why,
                                  accel__cuda_site at = accel__cuda_here()) {
  const size_t chunk = accel__cuda_pin_chunk;
  if (n <= chunk) return upload(x, d, h, n, why, "upload", at);
  accel_status s = pin.reserve(x, 2 * chunk, why, "pinned staging buffer", at);
  for (size_t off = 0, k = 0; !s && off < n; off += chunk, k++) {
    const size_t len = n - off < chunk ? n - off : chunk;
    uint8_t *buf = pin.p + (k & 1) * chunk;
    memcpy(buf, (const uint8_t *)h + off, len);          /* while the previous chunk is in flight */
    s = accel__cuda_check(x->sync(), why, "upload", at); /* the previous chunk has left its buffer */
    if (!s) s = accel__cuda_check(x->upload((uint8_t *)d + off, buf, len), why, "upload", at);
  }
  if (!s) s = accel__cuda_check(x->sync(), why, "upload", at); /* pin may be reused or freed next */
  return s;
}

inline accel_status download_pinned(accel__executor *x, hbuf &pin, void *h, const void *d, size_t n, char *why,
                                    accel__cuda_site at = accel__cuda_here()) {
  const size_t chunk = accel__cuda_pin_chunk;
  if (n <= chunk) return download(x, h, d, n, why, "download", at);
  accel_status s = pin.reserve(x, 2 * chunk, why, "pinned staging buffer", at);
  if (!s) s = accel__cuda_check(x->download(pin.p, d, chunk), why, "download", at);
  for (size_t off = 0, k = 0; !s && off < n; off += chunk, k++) {
    const size_t len = n - off < chunk ? n - off : chunk, next = off + len;
    s = accel__cuda_check(x->sync(), why, "download", at); /* chunk k has arrived */
    if (!s && next < n) {
      const size_t nlen = n - next < chunk ? n - next : chunk;
      s = accel__cuda_check(x->download(pin.p + ((k + 1) & 1) * chunk, (const uint8_t *)d + next, nlen), why,
                            "download", at);
    }
    if (!s) memcpy((uint8_t *)h + off, pin.p + (k & 1) * chunk, len); /* while the next chunk is in flight */
  }
  return s;
}

} // namespace

#endif /* ACCEL_KERNELS_CUDA_UTIL_H */
