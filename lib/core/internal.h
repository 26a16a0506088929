/*
 * lib/core/internal.h - helpers shared by every part of the library
 * (internal; hidden from the shared library's exports).
 */
#ifndef ACCEL_CORE_INTERNAL_H
#define ACCEL_CORE_INTERNAL_H

#include "accel_config.h"
#include "accel/core.h"
#include "backend.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors: per-thread last error (error.c) */

/* Record `fmt` as the last error of `ctx` (may be NULL) on this thread and
 * return `status`. Also logged at DEBUG level. */
accel_status accel__fail(const accel_ctx *ctx, accel_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- logging (log.c) */

void accel__log(accel_ctx *ctx, accel_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool accel__log_enabled(accel_ctx *ctx, accel_log_level level);

/* ---- the dispatcher (dispatch.c) */

/* Returned by a stage function when the backend it was given has no
 * implementation of the stage; the dispatcher then runs it on the CPU. */
enum { ACCEL__NOT_IMPLEMENTED = -1 };

/* Runs one stage on `call->state`'s backend. Returns an accel_status or
 * ACCEL__NOT_IMPLEMENTED; on failure it leaves the reason in call->why. */
typedef int (*accel__stage_fn)(const accel__backend *backend, accel__call *call, void *job);

/* Run `stage` on the context's backend and apply the fallback policy.
 * Arguments must already be validated: this is where GPU failures become
 * CPU reruns (ALLOW) or errors (DENY), get logged and counted. */
accel_status accel__dispatch(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job);

/* True for statuses that mean "the backend failed", as opposed to "the input
 * or the caller is at fault"; only those fall back. */
bool accel__is_backend_failure(accel_status status);

/* ---- statistics (stats.c) */

typedef struct accel__stats_delta {
  uint64_t runs, gpu_runs, cpu_runs, fallbacks, failures;
  double seconds;
} accel__stats_delta;

void accel__stats_add(accel_ctx *ctx, const char *stage, const accel__stats_delta *delta);

/* ---- context accessors (context.c) */

int accel__ctx_threads(const accel_ctx *ctx);
/* The pixel limit of image and raster loaders (ctx may be NULL: the default). */
uint64_t accel__ctx_max_pixels(const accel_ctx *ctx);

/* Create a context whose GPU backend is `gpu` instead of the built-in CUDA
 * backend (NULL: none). Tests use it to install a backend that fails on
 * request. */
accel_status accel__ctx_create_with(const accel_ctx_options *opts, const accel__backend *gpu,
                                    accel_ctx **out);

/* ---- arrays (array.c) */

/* Number of elements; 0 if any dimension is 0. Assumes a checked array. */
int64_t accel__array_count(const accel_array *a);
/* Validate dtype, ndim, shape, data; `what` names the argument in messages.
 * Returns ACCEL_OK or ACCEL_ERR_INVALID_ARG (recorded for ctx). */
accel_status accel__array_check(const accel_ctx *ctx, const char *func, const char *what,
                                const accel_array *a);
/* Byte range [*lo, *hi) touched by the array relative to data. */
void accel__array_extent(const accel_array *a, int64_t *lo, int64_t *hi);
/* True if the memory ranges of two arrays intersect. */
bool accel__arrays_overlap(const accel_array *a, const accel_array *b);
/* True if C-contiguous (row-major, no gaps). */
bool accel__array_is_contiguous(const accel_array *a);
/* Copy the array's elements in C order into/out of a packed buffer. */
void accel__array_pack(const accel_array *a, void *dst);
void accel__array_unpack(const void *src, const accel_array *a);
/* A contiguous view of a caller's array: its memory when C-contiguous, else
 * a packed copy (accel__view_in) or a scratch buffer (accel__view_out) that
 * accel__view_commit unpacks into the array. accel__view_free releases it. */
typedef struct accel__view {
  const accel_array *a;
  void *data;
  bool owned;
} accel__view;
accel_status accel__view_in(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a,
                            accel__view *v);
accel_status accel__view_out(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a,
                             accel__view *v);
void accel__view_commit(accel__view *v);
void accel__view_free(accel__view *v);
/* "U8", "F32", ... for messages. */
const char *accel__dtype_name(accel_dtype dtype);

/* ---- versioned structs (util.c): struct_size is the first member */

/* An init function's body: write `defaults` (ours, ours_size bytes) into the
 * caller's struct of `size` bytes, never past it: the bytes both cover are
 * copied, any beyond ours are zeroed, struct_size becomes `size`.
 * ACCEL_ERR_INVALID_ARG for NULL, ACCEL_ERR_VERSION for a size below
 * `min_size` (the oldest layout) or over UINT32_MAX; nothing is written then. */
accel_status accel__versioned_init(const char *func, void *theirs, size_t size, const void *defaults,
                                   size_t ours_size, size_t min_size);

/* Read a caller's struct into `ours` (which holds the defaults): copies what
 * both sizes cover. ACCEL_ERR_VERSION if theirs is smaller than `min_size`
 * (the first released size) or larger with nonzero bytes we do not know. */
accel_status accel__versioned_in(const accel_ctx *ctx, const char *func, const char *what,
                                 const void *theirs, void *ours, size_t ours_size, size_t min_size);
/* Write `ours` into a caller's struct, as far as its struct_size covers
 * (bytes past our size are zeroed). ACCEL_ERR_VERSION below `min_size`. */
accel_status accel__versioned_out(const accel_ctx *ctx, const char *func, const char *what,
                                  void *theirs, const void *ours, size_t ours_size, size_t min_size);

/* ---- small utilities (util.c) */

double accel__now(void);                        /* monotonic seconds */
bool accel__mul_overflow(size_t a, size_t b, size_t *out);
int accel__default_threads(void);               /* OpenMP's default, or the CPU count */
/* Copy at most size-1 bytes and terminate; like strlcpy. */
void accel__strlcpy(char *dst, const char *src, size_t size);
/* Write a formatted reason into a fixed why[ACCEL_REASON_MAX] buffer,
 * dropping a final period so log lines stay well punctuated. */
void accel__why(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CORE_INTERNAL_H */
