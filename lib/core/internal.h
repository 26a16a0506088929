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
/* The same with "<func>: " before the message, the form of every message a
 * public function leaves. Helpers shared by several public functions take the
 * caller's name (a `func` parameter) and report through this. */
accel_status accel__fail_in(const accel_ctx *ctx, const char *func, accel_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* FAIL(ctx, status, fmt, ...): record "<this function's name>: <message>"
 * as the last error of ctx and evaluate to `status`. Use it in the public
 * function itself, whose name (__func__) is what the user sees; in a helper,
 * call accel__fail_in with the public function's name instead. */
#define FAIL(ctx, status, ...) accel__fail_in((ctx), __func__, (status), __VA_ARGS__)

/* REQUIRE(ctx, cond, status, fmt, ...): unless `cond` holds, return
 * FAIL(ctx, status, fmt, ...) from the enclosing function. For the argument
 * checks at the top of a public function. */
#define REQUIRE(ctx, cond, status, ...)                                                                                \
  do {                                                                                                                 \
    if (!(cond)) return FAIL(ctx, status, __VA_ARGS__);                                                                \
  } while (0)

/* REQUIRE_IN(ctx, func, cond, status, fmt, ...): the same in a helper that
 * checks arguments for the public function `func` (its name is what the
 * user sees). */
#define REQUIRE_IN(ctx, func, cond, status, ...)                                                                       \
  do {                                                                                                                 \
    if (!(cond)) return accel__fail_in((ctx), (func), (status), __VA_ARGS__);                                          \
  } while (0)

/* ---- logging (log.c) */

void accel__log(accel_ctx *ctx, accel_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool accel__log_enabled(accel_ctx *ctx, accel_log_level level);

/* ---- the dispatcher (dispatch.c) */

/* Returned by a stage function when the backend it was given has no
 * implementation of the stage; the dispatcher then runs it on the CPU. */
enum { ACCEL__NOT_IMPLEMENTED = -1 };

/* Runs one stage on `call->state`'s backend. Returns an accel_status or
 * ACCEL__NOT_IMPLEMENTED; on failure it leaves the reason in call->why. */
typedef int (*accel__stage_fn)(const accel__backend *backend, accel__call *call, void *job);

/* ACCEL__STAGE_FN(name, domain, op, args...): define `static int name(...)`,
 * the accel__stage_fn that calls backend->domain->op(call, args...), or
 * answers ACCEL__NOT_IMPLEMENTED when the backend lacks that op. `args` are
 * the op's arguments after `call`, written in terms of `job` (the void *
 * the dispatcher passes through): usually just `job`. One per stage, in
 * lib/<domain>/api.c; a stage that a backend cannot take in some case is
 * declined by the op itself (accel__decline), never decided here. */
#define ACCEL__STAGE_FN(name, domain, op, ...)                                                                         \
  static int name(const accel__backend *b, accel__call *call, void *job) {                                             \
    if (!b->domain || !b->domain->op) return ACCEL__NOT_IMPLEMENTED;                                                   \
    return b->domain->op(call, __VA_ARGS__);                                                                           \
  }

/* For an op that does not take this case (a choice, not a failure: say the
 * GPU leaves an algorithm to the CPU): leave the reason in call->why, mark
 * the call declined and return ACCEL_ERR_UNSUPPORTED. The dispatcher then
 * runs the stage on the CPU with a DEBUG line, counting no fallback and
 * logging no warning, whatever the fallback policy. */
accel_status accel__decline(accel__call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run `stage` on the context's backend and apply the fallback policy.
 * Arguments must already be validated: this is where GPU failures become
 * CPU reruns (ALLOW) or errors (DENY), get logged and counted. */
accel_status accel__dispatch(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job);

/* A device array of a stage's job (accel_array_on_device): where the job
 * keeps its pointer, its size, and whether the stage reads it (in) and
 * writes it (out). */
enum { ACCEL__DEVICE_SLOTS_MAX = 8 };
typedef struct accel__device_slot {
  void **ptr;
  size_t bytes;
  bool in, out;
} accel__device_slot;

/* accel__dispatch for a job that holds device arrays (slots[0..nslots),
 * any number: ACCEL__DEVICE_SLOTS_MAX is what a stage's fixed table holds,
 * on a GPU context): the GPU op reads and
 * writes them in place; a CPU run (a fallback, or a stage the GPU leaves to
 * the CPU) gets host copies of them, the inputs copied down before it and
 * the outputs up after it through the GPU backend's copies, counted in the
 * stage's statistics. A failed copy is the stage's failure. */
accel_status accel__dispatch_device(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job,
                                    const accel__device_slot *slots, int nslots);

/* True for statuses that mean "the backend failed", as opposed to "the input
 * or the caller is at fault"; only those fall back. */
bool accel__is_backend_failure(accel_status status);

/* ---- statistics (stats.c) */

typedef struct accel__stats_delta {
  uint64_t runs, gpu_runs, cpu_runs, fallbacks, failures;
  double seconds;
  uint64_t bytes_up, bytes_down;
} accel__stats_delta;

void accel__stats_add(accel_ctx *ctx, const char *stage, const accel__stats_delta *delta);

/* ---- context accessors (context.c) */

int accel__ctx_threads(const accel_ctx *ctx);
/* True when ctx (may be NULL: false) runs stages on a GPU backend. */
bool accel__ctx_on_gpu(const accel_ctx *ctx);
/* The pixel limit of image and raster loaders (ctx may be NULL: the default). */
uint64_t accel__ctx_max_pixels(const accel_ctx *ctx);
/* Whether a save (an index file's when `index`) is synced under the
 * context's accel_sync_policy (ctx may be NULL: the default). */
bool accel__ctx_syncs(const accel_ctx *ctx, bool index);

/* Create a context whose GPU backend is `gpu` instead of the built-in CUDA
 * backend (NULL: none). Tests use it to install a backend that fails on
 * request. */
accel_status accel__ctx_create_with(const accel_ctx_options *opts, const accel__backend *gpu, accel_ctx **out);

/* ---- arrays (array.c) */

/* Number of elements; 0 if any dimension is 0. Assumes a checked array. */
int64_t accel__array_count(const accel_array *a);
/* Validate dtype, ndim, shape, data; `what` names the argument in messages.
 * Returns ACCEL_OK or ACCEL_ERR_INVALID_ARG (recorded for ctx). A device
 * array (accel_array_on_device) is refused: ACCEL_ERR_INVALID_ARG without a
 * context or on a CPU one, ACCEL_ERR_UNSUPPORTED on a GPU one ("device
 * arrays are not supported by <func>; copy <what> to the host"). */
accel_status accel__array_check(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a);
/* Validate a host array's layout and memory (accel__array_check without
 * the test of its memory kind; `a` not NULL). */
accel_status accel__array_check_memory(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a);
/* For the stages that take device arrays (accel_array_on_device): `a`
 * (may be NULL) as they see it. A host array (or NULL) is left as it is:
 * *use = a, *device = false, ACCEL_OK, nothing checked (the caller's
 * checks follow). A device array is accepted on a context with a GPU
 * backend only (ACCEL_ERR_INVALID_ARG otherwise), validated, and must be
 * C-contiguous (ACCEL_ERR_UNSUPPORTED otherwise): then *plain is its copy
 * without the device flag, *use = plain and *device = true. */
accel_status accel__array_accept(const accel_ctx *ctx, const char *func, const char *what, const accel_array *a,
                                 accel_array *plain, const accel_array **use, bool *device);
/* Byte range [*lo, *hi) touched by the array relative to data. */
void accel__array_extent(const accel_array *a, int64_t *lo, int64_t *hi);
/* True if the memory ranges of two arrays intersect. */
bool accel__arrays_overlap(const accel_array *a, const accel_array *b);
/* True if C-contiguous (row-major, no gaps). */
bool accel__array_is_contiguous(const accel_array *a);
/* Copy the array's elements in C order into/out of a packed buffer. */
void accel__array_pack(const accel_array *a, void *dst);
void accel__array_unpack(const void *src, const accel_array *a);
/* A buffer as accel_buffer_create makes it, not zero-filled (for loaders
 * that write every byte). */
accel_status accel__buffer_create_uninit(accel_dtype dtype, int32_t ndim, const int64_t *shape, accel_buffer **out);
/* A C-contiguous buffer over a private file mapping (map, map_bytes; POSIX
 * mmap), its data at map + offset; accel_buffer_destroy unmaps it. On
 * failure the mapping is left to the caller. */
/* Whether a buffer is a file mapping (tests). */
bool accel__buffer_is_mapped(const accel_buffer *b);
accel_status accel__buffer_wrap_mapping(accel_dtype dtype, int32_t ndim, const int64_t *shape, void *map,
                                        size_t map_bytes, size_t offset, accel_buffer **out);
/* A contiguous view of a caller's array: its memory when C-contiguous, else
 * a packed copy (IN: what a stage reads), a scratch buffer (OUT: what it
 * writes) or both (INOUT: an output that starts as the array's contents).
 * OUT and INOUT views are copied back into a strided array when the stage
 * has succeeded and discarded otherwise. */
typedef enum accel__view_mode { ACCEL__VIEW_IN, ACCEL__VIEW_OUT, ACCEL__VIEW_INOUT } accel__view_mode;
typedef struct accel__view {
  const char *what;     /* the argument's name, for messages */
  const accel_array *a; /* NULL: no array, no view (data stays NULL) */
  accel__view_mode mode;
  void *data; /* set by accel__views_open */
  bool owned;
} accel__view;
/* Initializers: ACCEL__IN("what", a), ACCEL__OUT("what", a), or ACCEL__VIEW
 * with the mode given (a NULL array makes an unused slot). */
#define ACCEL__VIEW(what, array, mode)                                                                                 \
  { (what), (array), (mode), NULL, false }
#define ACCEL__IN(what, array) ACCEL__VIEW(what, array, ACCEL__VIEW_IN)
#define ACCEL__OUT(what, array) ACCEL__VIEW(what, array, ACCEL__VIEW_OUT)
/* The views of a stage's arrays: fill what, a and mode of v[0..n), then
 * open them all; on failure (out of memory, recorded as `func: ...`)
 * nothing stays open. A stage then runs on v[i].data and ends with
 * accel__views_close, which copies the outputs back when `s` is ACCEL_OK,
 * releases every view either way and returns `s`:
 *
 *   accel__view v[2] = {ACCEL__IN("in", in), ACCEL__OUT("out", out)};
 *   if ((s = accel__views_open(ctx, __func__, v, 2))) return s;
 *   ... s = accel__dispatch(ctx, stage, fn, &job) with v[0].data, v[1].data ...
 *   return accel__views_close(v, 2, s);
 */
accel_status accel__views_open(const accel_ctx *ctx, const char *func, accel__view *v, int n);
accel_status accel__views_close(accel__view *v, int n, accel_status s);
/* "U8", "F32", ... for messages. */
const char *accel__dtype_name(accel_dtype dtype);

/* ---- versioned structs (util.c): struct_size is the first member */

/* An init function's body: write `defaults` (ours, ours_size bytes; NULL:
 * all zero) into the caller's struct of `size` bytes, never past it: the bytes both cover are
 * copied, any beyond ours are zeroed, struct_size becomes `size`.
 * ACCEL_ERR_INVALID_ARG for NULL, ACCEL_ERR_VERSION for a size below
 * `min_size` (the oldest layout) or over UINT32_MAX; nothing is written then. */
accel_status accel__versioned_init(const char *func, void *theirs, size_t size, const void *defaults, size_t ours_size,
                                   size_t min_size);

/* Read a caller's struct into `ours` (which holds the defaults): copies what
 * both sizes cover. ACCEL_ERR_VERSION if theirs is smaller than `min_size`
 * (the first released size) or larger with nonzero bytes we do not know. */
accel_status accel__versioned_in(const accel_ctx *ctx, const char *func, const char *what, const void *theirs,
                                 void *ours, size_t ours_size, size_t min_size);
/* Write `ours` into a caller's struct, as far as its struct_size covers
 * (bytes past our size are zeroed). ACCEL_ERR_VERSION below `min_size`. */
accel_status accel__versioned_out(const accel_ctx *ctx, const char *func, const char *what, void *theirs,
                                  const void *ours, size_t ours_size, size_t min_size);

/* ---- ordering, for qsort comparators and searches */

/* -1, 0 or 1 as a is below, equal to or above b. */
static inline int accel__cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }
/* The same for the pairs (a1, a2) and (b1, b2): by first members, then second. */
static inline int accel__cmp_u64_pair(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2) {
  return a1 != b1 ? accel__cmp_u64(a1, b1) : accel__cmp_u64(a2, b2);
}
/* The first position of sorted v[0..n) whose value is not below key (util.c). */
size_t accel__lower_bound_u64(const uint64_t *v, size_t n, uint64_t key);

/* ---- run-time clones
 * A function compiled for wider vector units as well, the widest the
 * processor has picked at load time (GCC's target_clones):
 *   ACCEL__CLONES("avx2", "default") void f(...)
 * The arithmetic must not depend on the vector width (no contraction: the
 * build passes -ffp-contract=off). GCC on x86-64 only, and not under
 * AddressSanitizer: clang 14 leaves callers of clones in other files
 * unresolved. Elsewhere the plain function. GCC gives the clones'
 * dispatcher of an external function default visibility: mark those
 * ACCEL__HIDDEN too. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ACCEL__CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#endif
#endif
#define ACCEL__HIDDEN __attribute__((visibility("hidden")))
#ifndef ACCEL__CLONES
#define ACCEL__CLONES(...)
#endif

/* ---- small utilities (util.c) */

double accel__now(void); /* monotonic seconds */
bool accel__mul_overflow(size_t a, size_t b, size_t *out);
int accel__default_threads(void); /* OpenMP's default, or the CPU count */
/* The *index of `name` among names[0..n), ignoring case, or alias_index for
 * `alias` (may be NULL); anything else is ACCEL_ERR_INVALID_ARG with the
 * last error "unknown <what> "<name>" (<choices>)". */
accel_status accel__parse_name(const char *name, const char *const *names, int n, const char *alias, int alias_index,
                               const char *what, const char *choices, int *index);
/* Copy at most size-1 bytes and terminate; like strlcpy. */
void accel__strlcpy(char *dst, const char *src, size_t size);
/* Write a formatted reason into a fixed why[ACCEL_REASON_MAX] buffer,
 * dropping a final period so log lines stay well punctuated. */
void accel__why(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Progress of a loop of units: `fn` (NULL: none) called from the calling
 * thread with `stage` and base + span * done / n, at most `reports` times
 * (0: after every unit). */
typedef struct accel__units_progress {
  accel_progress_fn fn;
  void *user;
  const char *stage;
  double base, span;
  int64_t reports;
} accel__units_progress;

/* Run work(user, i) for i in 0 .. n - 1 on call->threads threads, one unit
 * at a time in any order (OpenMP dynamic schedule). A unit that returns
 * false (out of memory) or a progress callback that returns nonzero stops
 * the units not yet started. Returns ACCEL_OK, ACCEL_ERR_CANCELLED or
 * ACCEL_ERR_OUT_OF_MEMORY (`oom_what` names what ran out), call->why set. */
accel_status accel__parallel_units(accel__call *call, int64_t n, bool (*work)(void *user, int64_t i), void *user,
                                   const accel__units_progress *progress, const char *oom_what);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CORE_INTERNAL_H */
