/*
 * accel/core.h - libaccel core API: version, status codes, contexts, logging,
 * backends and devices, per-stage statistics, host array descriptors.
 *
 * Every other accel header includes this one. The header is plain C11, also
 * valid C++ (C++11 and later), and FFI friendly: only stdint/stddef types, no
 * varargs, no bitfields, no inline functions; constants are enums, and every
 * version macro has a function twin.
 *
 * Conventions that hold for the whole library
 * -------------------------------------------
 * - Functions return accel_status. ACCEL_OK (0) is success. Each function's
 *   comment names the failures particular to it; besides those, a function
 *   returns ACCEL_ERR_INVALID_ARG for a required pointer that is NULL or a
 *   malformed accel_array (see there), ACCEL_ERR_VERSION for a struct_size it
 *   cannot accept, and ACCEL_ERR_OUT_OF_MEMORY when host memory runs out.
 * - A function that runs a stage (each header names its stages) may also
 *   return ACCEL_ERR_CANCELLED when its progress callback asks to stop, and,
 *   under ACCEL_FALLBACK_DENY, the GPU's failure: ACCEL_ERR_DEVICE,
 *   ACCEL_ERR_DEVICE_MEMORY, ACCEL_ERR_NO_DEVICE, ACCEL_ERR_OUT_OF_MEMORY,
 *   ACCEL_ERR_UNSUPPORTED or ACCEL_ERR_INTERNAL, with the message
 *   "[GPU] <stage> failed: <reason> (fallback policy DENY)". Under
 *   ACCEL_FALLBACK_ALLOW those GPU failures are rerun on the CPU instead.
 * - On failure a function's outputs are unspecified unless its comment says
 *   otherwise (arrays it writes may hold partial results), and nothing is
 *   left to free: a function that returns a new handle or buffer through
 *   `out` sets *out to NULL on every failure but a NULL argument (which may
 *   leave *out as it was). Inputs are never modified; where an output may
 *   alias an input, that input is unspecified after a failure.
 * - The message of a failure is kept for the calling thread and read with
 *   accel_last_error(): pass the context the call was given, or NULL if it
 *   was given none (or a NULL one). Calls on a handle that keeps its context
 *   (an index, a CT pipeline) report through that context; calls on other
 *   handles (buffers, networks, pairs, ...) through NULL. The few functions
 *   that set no message say so. The message is also logged at DEBUG level on
 *   the context, if there is one.
 * - Threads: functions that take neither a context nor a handle may be
 *   called from any thread at any time. A context may be used from several
 *   threads at once (see accel_ctx_create). For the other handles, calls that
 *   only read a handle may run concurrently with each other; a call that
 *   changes or destroys it must not overlap any other call on it. A handle's
 *   const parameter marks the calls that only read it, unless its header says
 *   more (the index and the CT pipeline have such rules). Separate handles
 *   are independent.
 * - Callbacks are called during the call that was given them; each callback
 *   type says on which thread and what it may not do.
 * - Handles (accel_ctx, accel_buffer, ...) are opaque; each is released by its
 *   matching accel_*_destroy(), which accepts NULL.
 * - Structs that may grow start with uint32_t struct_size and have an init
 *   function taking the caller's size: accel_ctx_options_init(&o, sizeof o).
 *   It fills in the defaults and sets struct_size to that size. Always call
 *   it first. The library reads and writes only the bytes the caller's
 *   struct_size covers: a program compiled against older, smaller headers
 *   keeps working with a newer library (fields it does not have take their
 *   defaults), and nothing past its struct is ever touched. A size smaller
 *   than the oldest layout the library knows is ACCEL_ERR_VERSION; a larger
 *   one (newer headers, older library) is accepted while the fields this
 *   library does not know are zero. Fields are only ever added at the end.
 *   Every init function fails only with ACCEL_ERR_INVALID_ARG (NULL struct)
 *   or ACCEL_ERR_VERSION (a size below the oldest layout or over UINT32_MAX),
 *   then writes nothing, and reports through accel_last_error(NULL).
 * - The library never frees what the caller allocated; the caller never frees
 *   what the library returns except through the matching accel_* function.
 */
#ifndef ACCEL_CORE_H
#define ACCEL_CORE_H

#include <stddef.h>
#include <stdint.h>

#if defined(ACCEL_BUILDING_LIBRARY) && defined(__GNUC__)
#define ACCEL_API __attribute__((visibility("default")))
#else
#define ACCEL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

/* Compile-time version of these headers. The run-time twins below report the
 * version of the library actually loaded; compare them to detect a mismatch. */
#define ACCEL_VERSION_MAJOR 0
#define ACCEL_VERSION_MINOR 1
#define ACCEL_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define ACCEL_VERSION_NUMBER 100
#define ACCEL_VERSION_STRING "0.1.0"
/* The ABI major version: the N of the soname libaccel.so.N. */
#define ACCEL_ABI_VERSION 0

/* ACCEL_VERSION_NUMBER of the loaded library. */
ACCEL_API uint32_t accel_version_number(void);
/* ACCEL_VERSION_STRING of the loaded library (static storage). */
ACCEL_API const char *accel_version_string(void);
/* ACCEL_ABI_VERSION of the loaded library. */
ACCEL_API uint32_t accel_abi_version(void);
/* One line describing how the library was built, e.g.
 * "cuda=yes cuda_version=13.0 cuda_arch=sm_75,sm_80,sm_86,sm_89,sm_90+compute_90 openmp=yes tiff=yes
 * sanitizers=none".
 * Keys are stable; values are informative. Static storage. */
ACCEL_API const char *accel_build_info(void);

/* ----------------------------------------------------------------- status */

/* Result of every call. The values are frozen: new codes are only appended,
 * and a value is never reused. */
typedef enum accel_status {
  ACCEL_OK = 0,
  ACCEL_ERR_INVALID_ARG = 1,   /* a bad argument; never retried elsewhere */
  ACCEL_ERR_OUT_OF_MEMORY = 2, /* host memory allocation failed */
  ACCEL_ERR_NO_DEVICE = 3,     /* the requested GPU backend/device is absent */
  ACCEL_ERR_DEVICE = 4,        /* a GPU driver, launch or runtime error */
  ACCEL_ERR_DEVICE_MEMORY = 5, /* GPU memory (or the memory budget) exhausted */
  ACCEL_ERR_UNSUPPORTED = 6,   /* a feature this build or path does not have */
  ACCEL_ERR_CANCELLED = 7,     /* a progress callback asked to stop */
  ACCEL_ERR_IO = 8,            /* a file could not be opened, read or written */
  ACCEL_ERR_FORMAT = 9,        /* a file or buffer is not of a readable format */
  ACCEL_ERR_DECODE = 10,       /* image data is corrupt or truncated */
  ACCEL_ERR_LIMIT = 11,        /* an input exceeds a configured limit */
  ACCEL_ERR_VERSION = 12,      /* a struct_size or version this library cannot accept */
  ACCEL_ERR_NOT_FOUND = 13,    /* a named item does not exist */
  ACCEL_ERR_INTERNAL = 14      /* a bug in libaccel; please report it */
} accel_status;

/* The enumerator's name, e.g. "ACCEL_ERR_DECODE"; "ACCEL_ERR_UNKNOWN" for a
 * value this library does not know. Static storage, never NULL. */
ACCEL_API const char *accel_status_string(accel_status status);
/* A short English description, e.g. "corrupt or truncated image data".
 * Static storage, never NULL. */
ACCEL_API const char *accel_status_describe(accel_status status);

/* ---------------------------------------------------------------- enums */

typedef enum accel_backend_kind {
  ACCEL_BACKEND_AUTO = 0, /* CUDA when a usable device exists, else CPU */
  ACCEL_BACKEND_CPU = 1,  /* OpenMP CPU path; always available */
  ACCEL_BACKEND_CUDA = 2  /* NVIDIA GPU through CUDA */
} accel_backend_kind;

/* What happens when a GPU stage fails (device out of memory, launch failure,
 * driver error, a device limit). Invalid arguments never fall back. */
typedef enum accel_fallback_policy {
  /* Log the WARN line "[GPU] <stage> failed: <reason>. CPU fallback.",
   * count it in the stage's statistics and return the CPU result. */
  ACCEL_FALLBACK_ALLOW = 0,
  /* Return the GPU error; accel_last_error() holds the reason. */
  ACCEL_FALLBACK_DENY = 1
} accel_fallback_policy;

typedef enum accel_log_level {
  ACCEL_LOG_DEBUG = 0,
  ACCEL_LOG_INFO = 1,
  ACCEL_LOG_WARN = 2,
  ACCEL_LOG_ERROR = 3,
  ACCEL_LOG_OFF = 4 /* as a threshold: log nothing */
} accel_log_level;

/* "auto", "cpu", "cuda"; "unknown" otherwise. Static storage. */
ACCEL_API const char *accel_backend_name(accel_backend_kind kind);
/* Parse "auto", "cpu" or "cuda" (any case) into *kind. Any other name (or a
 * NULL argument) is ACCEL_ERR_INVALID_ARG and leaves *kind as it was. */
ACCEL_API accel_status accel_backend_from_string(const char *name, accel_backend_kind *kind);
/* "debug", "info", "warn", "error", "off"; "unknown" otherwise. Static storage. */
ACCEL_API const char *accel_log_level_name(accel_log_level level);
/* Parse a level name (any case; "warning" is accepted for "warn") into
 * *level; otherwise as accel_backend_from_string. */
ACCEL_API accel_status accel_log_level_from_string(const char *name, accel_log_level *level);

/* Receives every log message at or above the context's level. `message` is
 * one line without a trailing newline, valid only during the call. Calls on
 * one context are serialized, but may come from any thread that uses it.
 * The context's log lock is held during the call: the callback must not call
 * libaccel with the same context (that would deadlock). */
typedef void (*accel_log_fn)(void *user, accel_log_level level, const char *message);

/* Reports progress of a long call: `stage` names the stage (static storage),
 * `fraction` rises from 0 to 1. Return 0 to continue; a nonzero return
 * cancels the call, which then returns ACCEL_ERR_CANCELLED. Called on the
 * thread that made the call. It must not run stages on the same context: on
 * a GPU backend the running call holds the context's GPU lock, and such a
 * call fails with ACCEL_ERR_INVALID_ARG (use another context). */
typedef int (*accel_progress_fn)(void *user, const char *stage, double fraction);

/* ---------------------------------------------------------------- context */

typedef struct accel_ctx accel_ctx;

/* Which saves reach the disk (fsync) before they replace their target.
 * Every save is atomic whatever the policy: it is written to a temporary
 * file in the target's directory and renamed over the target only when
 * complete, so a reader or a crashed process never leaves or sees a
 * partial file. The sync makes the new file survive a power failure or a
 * kernel crash that follows the save; without it such a failure may leave
 * the previous file, or an empty one, at the path. It costs the time the
 * disk needs for the whole file (seconds for a 900 MB image). */
typedef enum accel_sync_policy {
  /* Index files (accel_index_save: a catalogue built over hours) are
   * synced; images, arrays, transform and network files, which the call
   * that wrote them can write again, are not (as image tools do). */
  ACCEL_SYNC_INDEX = 0,
  ACCEL_SYNC_ALL = 1, /* every save, and the directory entry that names it */
  ACCEL_SYNC_NONE = 2 /* no save */
} accel_sync_policy;

typedef struct accel_ctx_options {
  uint32_t struct_size;           /* sizeof(accel_ctx_options), set by init */
  accel_backend_kind backend;     /* default ACCEL_BACKEND_AUTO */
  int32_t device;                 /* CUDA device index, default 0 */
  accel_fallback_policy fallback; /* default ACCEL_FALLBACK_ALLOW */
  /* Device memory the context may hold at once, in bytes. 0 (default) means
   * 90% of the device memory free when the context is created. Work larger
   * than the budget is split (slabs, tiles, batches) or fails with
   * ACCEL_ERR_DEVICE_MEMORY, which the fallback policy then handles. */
  uint64_t device_memory_budget;
  /* CPU threads, 1..ACCEL_CPU_THREADS_MAX; 0 (default) = all (OpenMP's
   * default, itself capped at ACCEL_CPU_THREADS_MAX). More is
   * ACCEL_ERR_INVALID_ARG. */
  int32_t cpu_threads;
  accel_log_level log_level; /* default ACCEL_LOG_WARN */
  accel_log_fn log_fn;       /* NULL (default) = write lines to stderr */
  void *log_user;            /* passed to log_fn */
  /* The largest image or raster (width x height) any loader of this context
   * accepts: JPEG/PNG decoding and hashing (unless their own options set a
   * smaller max_pixels), PGM/PPM and TIFF loading. Larger inputs fail with
   * ACCEL_ERR_LIMIT before anything is allocated. 0 (default) means
   * ACCEL_DEFAULT_MAX_PIXELS. (Added after the first layout: programs built
   * without it get the default.) */
  uint64_t max_pixels;
  /* Which saves are synced to the disk (accel_sync_policy; default
   * ACCEL_SYNC_INDEX). An unknown value is ACCEL_ERR_INVALID_ARG. (Added
   * after max_pixels: programs built without it get the default.) */
  accel_sync_policy sync;
} accel_ctx_options;

enum {
  /* The most CPU threads a context accepts. */
  ACCEL_CPU_THREADS_MAX = 1024,
  /* The default pixel limit of image and raster loaders: 2^30 pixels (a
   * 32768 x 32768 raster, 4 GiB as float32). */
  ACCEL_DEFAULT_MAX_PIXELS = 1073741824
};

/* Fill the caller's `opts` of `struct_size` bytes (pass sizeof *opts) with
 * the defaults above; struct_size is set to that size. Writes nothing past
 * struct_size bytes. ACCEL_ERR_VERSION if the size is smaller than the
 * oldest layout (the one without max_pixels); see the init rule above. */
ACCEL_API accel_status accel_ctx_options_init(accel_ctx_options *opts, size_t struct_size);

/* Create a context. `opts` may be NULL for the defaults; it is read only
 * during the call.
 *
 * Environment overrides (read here, and taking precedence over `opts`):
 *   ACCEL_BACKEND=auto|cpu|cuda   replaces opts->backend
 *   ACCEL_LOG=debug|info|warn|error|off   replaces opts->log_level
 * An unrecognized value fails with ACCEL_ERR_INVALID_ARG.
 *
 * Backend choice: CPU always works. AUTO uses CUDA when this build has it and
 * the device opens; otherwise it logs one INFO line saying why and uses the
 * CPU. An explicit CUDA request that cannot be met logs
 * "[GPU] ctx.init failed: <reason>. CPU fallback." (WARN, counted as a
 * fallback of stage "ctx.init") and uses the CPU under ACCEL_FALLBACK_ALLOW;
 * under ACCEL_FALLBACK_DENY it fails with ACCEL_ERR_NO_DEVICE.
 *
 * Errors: ACCEL_ERR_INVALID_ARG (NULL out, an unknown backend, policy or
 * level, a negative device, cpu_threads out of range, a bad environment
 * value), ACCEL_ERR_VERSION (struct_size), ACCEL_ERR_NO_DEVICE,
 * ACCEL_ERR_OUT_OF_MEMORY. On failure *out is NULL (when out is not) and
 * accel_last_error(NULL) has the message.
 *
 * Threads: every function taking a context may be called from several
 * threads at once with the same context, except accel_ctx_destroy. Its log
 * callback, statistics and GPU work are serialized internally; CPU stages of
 * different calls run concurrently, each with the context's cpu_threads. */
ACCEL_API accel_status accel_ctx_create(const accel_ctx_options *opts, accel_ctx **out);

/* Release a context and everything it holds. Accepts NULL. No call on the
 * context may be running or start afterwards; the indexes and CT pipelines
 * made with it may then only be destroyed. Buffers, networks, pairs and
 * groups do not depend on it. */
ACCEL_API void accel_ctx_destroy(accel_ctx *ctx);

/* The message of the last failed call made with `ctx` on the calling thread
 * ("" if none). Pass NULL for calls that had no context (accel_ctx_create,
 * device queries, name parsers, functions given a NULL context); `ctx` must
 * otherwise be a live context. Each thread has its own messages, so
 * concurrent failures never mix. Successful calls do not clear it. A thread
 * keeps the messages of the four contexts (NULL counting as one) that most
 * recently failed on it; an older one reads "". The string (at most 1023
 * bytes) is owned by the library and stays valid until the next failing
 * libaccel call on the same thread. Never fails; never NULL. */
ACCEL_API const char *accel_last_error(const accel_ctx *ctx);

/* Replace the log callback and threshold. fn = NULL restores the stderr
 * writer. If ACCEL_LOG is set in the environment, its level still wins over
 * `level`. May be called while other threads use the context: messages
 * logged after it returns go to the new callback. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL ctx, an unknown level; nothing changes). */
ACCEL_API accel_status accel_set_log(accel_ctx *ctx, accel_log_fn fn, void *user, accel_log_level level);

/* What a context resolved its options to. */
typedef struct accel_ctx_info {
  uint32_t struct_size;       /* set by accel_ctx_info_init */
  accel_backend_kind backend; /* ACCEL_BACKEND_CPU or ACCEL_BACKEND_CUDA: what runs stages */
  int32_t device;             /* CUDA device index, or -1 on the CPU backend */
  accel_fallback_policy fallback;
  uint64_t device_memory_budget; /* bytes; 0 on the CPU backend */
  int32_t cpu_threads;           /* threads CPU stages use */
  accel_log_level log_level;
  uint64_t max_pixels; /* the loaders' pixel limit (added after the first layout) */
} accel_ctx_info;

ACCEL_API accel_status accel_ctx_info_init(accel_ctx_info *info, size_t struct_size);
/* Fill `info` (prepared by accel_ctx_info_init) as far as its struct_size
 * covers. Errors: ACCEL_ERR_INVALID_ARG (NULL), ACCEL_ERR_VERSION (a
 * struct_size below the first layout; nothing written). */
ACCEL_API accel_status accel_ctx_query(const accel_ctx *ctx, accel_ctx_info *info);

/* ---------------------------------------------------------------- stats */

/* Lengths of fixed character fields, with the terminating NUL. */
enum { ACCEL_STAGE_NAME_MAX = 48, ACCEL_DEVICE_NAME_MAX = 256, ACCEL_REASON_MAX = 256 };

/* Per-stage counters of one context, since creation or the last reset.
 * Stage names are stable: "ctx.init", "image.gray", and the names each domain
 * header lists. The functions below may run while other threads use the
 * context: each reads a consistent snapshot of one stage. Their `stats` must
 * have been prepared by accel_stage_stats_init (ACCEL_ERR_VERSION otherwise)
 * and is written only on success. */
typedef struct accel_stage_stats {
  uint32_t struct_size; /* set by accel_stage_stats_init */
  char stage[ACCEL_STAGE_NAME_MAX];
  uint64_t runs;      /* calls of the stage that reached the dispatcher */
  uint64_t gpu_runs;  /* completed on the GPU */
  uint64_t cpu_runs;  /* completed on the CPU (fallbacks included) */
  uint64_t fallbacks; /* GPU failures rerun on the CPU */
  uint64_t failures;  /* calls that returned an error */
  double seconds;     /* wall time spent in the stage */
  /* Appended in the second version (a struct_size that ends before them
   * gets the first version's fields only): bytes the stage's GPU work copied
   * from host memory to the device and back, attempts that fell back to the
   * CPU included; 0 for work done on the CPU. */
  uint64_t bytes_uploaded;
  uint64_t bytes_downloaded;
} accel_stage_stats;

ACCEL_API accel_status accel_stage_stats_init(accel_stage_stats *stats, size_t struct_size);
/* Number of stages with statistics, stored in *count. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL). */
ACCEL_API accel_status accel_ctx_stats_count(const accel_ctx *ctx, size_t *count);
/* Statistics of the index-th stage, in the order stages first ran (since
 * the last reset). ACCEL_ERR_NOT_FOUND past the end. */
ACCEL_API accel_status accel_ctx_stats_get(const accel_ctx *ctx, size_t index, accel_stage_stats *stats);
/* Statistics of the named stage; ACCEL_ERR_NOT_FOUND if it has not run
 * since creation or the last reset. */
ACCEL_API accel_status accel_ctx_stats_find(const accel_ctx *ctx, const char *stage, accel_stage_stats *stats);
/* Forget all statistics. Errors: ACCEL_ERR_INVALID_ARG (NULL ctx). */
ACCEL_API accel_status accel_ctx_stats_reset(accel_ctx *ctx);

/* ------------------------------------------------------ backends, devices */

typedef struct accel_backend_info {
  uint32_t struct_size; /* set by accel_backend_info_init */
  accel_backend_kind kind;
  char name[16];                 /* "cpu", "cuda" */
  int32_t compiled;              /* 1 if this build contains the backend */
  int32_t available;             /* 1 if it can run here now */
  int32_t device_count;          /* devices it sees (CPU: 1) */
  char reason[ACCEL_REASON_MAX]; /* why it is unavailable, else "" */
} accel_backend_info;

ACCEL_API accel_status accel_backend_info_init(accel_backend_info *info, size_t struct_size);
/* Describe backend `kind` (CPU or CUDA) in `info` (prepared by
 * accel_backend_info_init). Never fails for lack of a device: that is
 * reported in info->available and info->reason. Errors:
 * ACCEL_ERR_INVALID_ARG (NULL info, AUTO or an unknown kind),
 * ACCEL_ERR_VERSION (info->struct_size). */
ACCEL_API accel_status accel_backend_query(accel_backend_kind kind, accel_backend_info *info);

typedef struct accel_device_info {
  uint32_t struct_size; /* set by accel_device_info_init */
  int32_t index;
  char name[ACCEL_DEVICE_NAME_MAX];
  uint64_t total_memory; /* bytes */
  uint64_t free_memory;  /* bytes, at the time of the query */
  int32_t cc_major;      /* compute capability */
  int32_t cc_minor;
  int32_t multiprocessors;
  int32_t driver_version; /* e.g. 13000 for 13.0 */
  int32_t runtime_version;
} accel_device_info;

ACCEL_API accel_status accel_device_info_init(accel_device_info *info, size_t struct_size);
/* Number of usable CUDA devices. Zero devices (no GPU, no driver, a build
 * without CUDA) is not an error: *count is 0 and ACCEL_OK is returned.
 * Errors: ACCEL_ERR_INVALID_ARG (NULL count) only. */
ACCEL_API accel_status accel_device_count(int32_t *count);
/* Describe CUDA device `index` in `info` (prepared by
 * accel_device_info_init). Errors: ACCEL_ERR_NOT_FOUND (no such device, or
 * no CUDA in this build), ACCEL_ERR_VERSION (info->struct_size), or the
 * CUDA runtime's failure as a device status (ACCEL_ERR_DEVICE, ...);
 * `info` is written only on success. */
ACCEL_API accel_status accel_device_query(int32_t index, accel_device_info *info);

/* ----------------------------------------------------------- host arrays */

typedef enum accel_dtype {
  ACCEL_DTYPE_INVALID = 0, /* never valid in an array */
  ACCEL_DTYPE_U8 = 1,      /* uint8_t, numpy uint8 */
  ACCEL_DTYPE_I8 = 2,      /* int8_t, numpy int8 */
  ACCEL_DTYPE_U16 = 3,     /* uint16_t, numpy uint16 */
  ACCEL_DTYPE_I16 = 4,     /* int16_t, numpy int16 */
  ACCEL_DTYPE_U32 = 5,     /* uint32_t, numpy uint32 */
  ACCEL_DTYPE_I32 = 6,     /* int32_t, numpy int32 */
  ACCEL_DTYPE_U64 = 7,     /* uint64_t, numpy uint64 */
  ACCEL_DTYPE_I64 = 8,     /* int64_t, numpy int64 */
  ACCEL_DTYPE_F32 = 9,     /* float, numpy float32 */
  ACCEL_DTYPE_F64 = 10,    /* double, numpy float64 */
  /* Not a dtype: the bit accel_array_on_device sets in an array's dtype to
   * mark its data as device memory (listed here so that every value an
   * accel_dtype field can hold is within the enumeration, also in C++). */
  ACCEL_DTYPE_DEVICE_FLAG = 0x10000
} accel_dtype;

enum { ACCEL_ARRAY_MAX_DIMS = 8 };

/* A view of a host array the caller owns: numpy arrays, Rust slices and C
 * arrays map onto it without copies. Element (i0, i1, ...) lives at
 * (char *)data + i0 * strides[0] + i1 * strides[1] + ...; strides are in
 * bytes and may be negative. Images are (height, width) or
 * (height, width, channels) with channels interleaved. This layout is frozen.
 *
 * Malformed (ACCEL_ERR_INVALID_ARG wherever an array is passed): an invalid
 * dtype, ndim outside 0..ACCEL_ARRAY_MAX_DIMS, a negative extent, more
 * elements than int64 holds, strides reaching beyond the address space, or
 * NULL data while the array has elements. An empty array (an extent of 0)
 * may have any strides and NULL data. The library reads and writes the
 * caller's memory only during the call it is passed to.
 */
typedef struct accel_array {
  void *data;
  accel_dtype dtype;
  int32_t ndim;                          /* 0..ACCEL_ARRAY_MAX_DIMS */
  int64_t shape[ACCEL_ARRAY_MAX_DIMS];   /* entries past ndim are ignored */
  int64_t strides[ACCEL_ARRAY_MAX_DIMS]; /* bytes */
} accel_array;

/* Bytes per element of `dtype`; 0 for an invalid dtype. The device flag
 * (ACCEL_DTYPE_DEVICE_FLAG) is ignored: a device array's dtype has the size
 * of its plain dtype. */
ACCEL_API size_t accel_dtype_size(accel_dtype dtype);
/* Describe a C-contiguous (row-major) array: copies the shape, computes the
 * strides; `data` is stored as given. ACCEL_ERR_INVALID_ARG for a NULL
 * array, an invalid dtype, ndim outside 0..ACCEL_ARRAY_MAX_DIMS, a NULL
 * shape with ndim > 0, a negative extent, or a byte size over INT64_MAX;
 * *array is then zeroed (when not NULL). */
ACCEL_API accel_status accel_array_init(accel_array *array, void *data, accel_dtype dtype, int32_t ndim,
                                        const int64_t *shape);

/* ------------------------------------------------------- device arrays
 *
 * An accel_array may also describe memory of the context's CUDA device (a
 * CuPy array, a PyTorch CUDA tensor, cudaMalloc'd memory): its layout stays
 * as it is, and the bit ACCEL_DTYPE_DEVICE_FLAG of its dtype says where the
 * data lives. accel_array_on_device sets it; accel_dtype_size and the
 * element layout see the plain dtype. A library older than these functions
 * refuses such a dtype as invalid (ACCEL_ERR_INVALID_ARG), never reading
 * device memory on the host.
 *
 * What the functions taking arrays do with a device array:
 * - On a context whose backend is the CPU (including every context of a
 *   build without CUDA), and on calls without a context:
 *   ACCEL_ERR_INVALID_ARG ("<what> is device memory, but ..."). The data is
 *   never read.
 * - On a CUDA context, the stages with a GPU path read device inputs and
 *   write device outputs in place, without copies through the host:
 *   accel_hash_arrays (its images), accel_reg_register (fixed, moving),
 *   accel_reg_warp (its layers, linear interpolation), accel_svf_shadows and
 *   accel_svf_sky (inputs, outputs), accel_ct_threshold, accel_ct_fill_holes,
 *   accel_ct_edt and accel_ct_pipeline_run (its input, the given markers and every output;
 *   the markers and labels are made on the host and go up, and the host
 *   stages read the pore mask and the distance map, which come down). The
 *   stage statistics' bytes_uploaded and bytes_downloaded show it: device
 *   arrays are never counted. Device arrays must be C-contiguous, their
 *   data at a multiple of the element size (ACCEL_ERR_UNSUPPORTED
 *   otherwise). When the GPU op fails and the
 *   fallback policy is ALLOW, the CPU rerun copies the device inputs to the
 *   host and its outputs back (counted in the same statistics).
 * - Every other function: ACCEL_ERR_UNSUPPORTED ("device arrays are not
 *   supported by <function>; copy <what> to the host").
 * - Streams: the library's work is ordered after all work queued on the
 *   device before the call (it synchronizes the device before it reads a
 *   device array), and the call returns only once its device outputs are
 *   written. Produce the inputs on any stream; read the outputs after the
 *   call returns.
 * The device is the context's (accel_ctx_options.device); memory of another
 * device is not detected and must not be passed. */

/* Mark `array` as device memory: sets ACCEL_DTYPE_DEVICE_FLAG in its dtype
 * (again: no change). Errors: ACCEL_ERR_INVALID_ARG for NULL or an array
 * whose plain dtype is invalid (nothing changes). */
ACCEL_API accel_status accel_array_on_device(accel_array *array);
/* 1 if `array` is marked as device memory, 0 otherwise (also for NULL).
 * Sets no message. */
ACCEL_API int32_t accel_array_is_device(const accel_array *array);

/* An array the library allocated (file loaders return these). */
typedef struct accel_buffer accel_buffer;

/* Allocate a zero-filled C-contiguous array. Errors: those of
 * accel_array_init, ACCEL_ERR_OUT_OF_MEMORY (also for a size over
 * SIZE_MAX); *out is NULL on failure (when out is not). Messages go to
 * accel_last_error(NULL). */
ACCEL_API accel_status accel_buffer_create(accel_dtype dtype, int32_t ndim, const int64_t *shape, accel_buffer **out);
/* A view of the buffer's memory, valid until accel_buffer_destroy.
 * ACCEL_ERR_INVALID_ARG for a NULL argument. Views may be taken from several
 * threads at once; what is written through them is the caller's to
 * synchronize. */
ACCEL_API accel_status accel_buffer_view(const accel_buffer *buffer, accel_array *view);
/* Release a buffer; accepts NULL. */
ACCEL_API void accel_buffer_destroy(accel_buffer *buffer);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CORE_H */
