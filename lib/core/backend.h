/*
 * lib/core/backend.h - the backend vtable (internal).
 *
 * A backend is a table of operations, one ops table per domain. The CPU
 * backend always exists; the CUDA backend exists when libaccel is built with
 * nvcc. Backend operations never log, never choose another backend and never
 * fall back: they do the work, return a status with a reason in call->why,
 * or decline a case they do not take (accel__decline in core/internal.h).
 * lib/core/dispatch.c alone decides what happens next.
 *
 * This header is included from C and from CUDA C++ (kernels/).
 */
#ifndef ACCEL_CORE_BACKEND_H
#define ACCEL_CORE_BACKEND_H

#include "accel_config.h"
#include "accel/core.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the layout of accel__backend or of an ops table changes. */
enum { ACCEL__BACKEND_VERSION = 3 };

/* One run of one stage on one backend. */
typedef struct accel__call {
  accel_ctx *ctx;             /* the context the stage runs for */
  void *state;                /* the backend's per-context state (from open) */
  int threads;                /* CPU threads the stage may use */
  char why[ACCEL_REASON_MAX]; /* on failure: the reason, without a final period */
  bool declined;              /* set by accel__decline: not a failure, the CPU runs the stage */
} accel__call;

/* What a backend sees of the machine; filled by probe(), which never fails. */
typedef struct accel__probe_result {
  int32_t device_count;
  char reason[ACCEL_REASON_MAX]; /* why device_count is 0, else "" */
} accel__probe_result;

/* In: what the context asks for. Out: what open() resolved. */
typedef struct accel__backend_config {
  int32_t device;              /* device index */
  uint64_t memory_budget;      /* bytes; 0 = 90% of free memory; resolved by open() */
  int threads;                 /* CPU threads of the context */
} accel__backend_config;

typedef struct accel__backend {
  uint32_t version;            /* ACCEL__BACKEND_VERSION */
  const char *name;            /* "cpu", "cuda", ... */
  accel_backend_kind kind;
  void (*probe)(accel__probe_result *out);
  /* Describe one device; ACCEL_ERR_NOT_FOUND for a bad index. */
  accel_status (*device_info)(int32_t index, accel_device_info *info, char *why);
  /* Prepare the backend for one context. On failure, fill why. */
  accel_status (*open)(accel__backend_config *config, void **state, char *why);
  void (*close)(void *state);
  /* Per-domain operations, one member per domain (struct accel__<d>_ops of
   * lib/<d>/ops.h; the member declares the struct's name); NULL members (or
   * a NULL table) mean "this backend does not implement the stage", and the
   * CPU runs it. A new domain adds its member last. */
  const struct accel__image_ops *image;
  const struct accel__hash_ops *hash;
  const struct accel__index_ops *index;
  const struct accel__ct_ops *ct;
  const struct accel__svf_ops *svf;
} accel__backend;

/* ACCEL__DECLARE_OPS(type, domain): declare the tables of one domain's ops,
 * accel__cpu_<domain>_ops and, in a CUDA build, accel__cuda_<domain>_ops
 * (defined in lib/<domain>/cpu.c and kernels/<domain>.cu). */
#if defined(ACCEL_HAVE_CUDA) && ACCEL_HAVE_CUDA
#define ACCEL__DECLARE_OPS(type, domain)                                                                               \
  extern const type accel__cpu_##domain##_ops;                                                                         \
  extern const type accel__cuda_##domain##_ops
#else
#define ACCEL__DECLARE_OPS(type, domain) extern const type accel__cpu_##domain##_ops
#endif

/* The backends this build has. */
extern const accel__backend accel__cpu_backend;
#if defined(ACCEL_HAVE_CUDA) && ACCEL_HAVE_CUDA
extern const accel__backend accel__cuda_backend;
#endif

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CORE_BACKEND_H */
