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
enum { ACCEL__BACKEND_VERSION = 5 };

/* One run of one stage on one backend. */
typedef struct accel__call {
  accel_ctx *ctx;                /* the context the stage runs for */
  void *state;                   /* the backend's per-context state (from open) */
  int threads;                   /* CPU threads the stage may use */
  char why[ACCEL_REASON_MAX];    /* on failure: the reason, without a final period */
  bool declined;                 /* set by accel__decline: not a failure, the CPU runs the stage */
  uint64_t bytes_up, bytes_down; /* host <-> device copies of the call (the GPU executor counts them) */
} accel__call;

/* What a backend sees of the machine; filled by probe(), which never fails. */
typedef struct accel__probe_result {
  int32_t device_count;
  char reason[ACCEL_REASON_MAX]; /* why device_count is 0, else "" */
} accel__probe_result;

/* In: what the context asks for. Out: what open() resolved. */
typedef struct accel__backend_config {
  int32_t device;         /* device index */
  uint64_t memory_budget; /* bytes; 0 = 90% of free memory; resolved by open() */
  int threads;            /* CPU threads of the context */
} accel__backend_config;

/* The domains that have ops, in the order of their members in accel__backend.
 * A new domain adds X(name) at the end: that gives every backend table the
 * member `name`, declares the domain's ops tables and puts its CPU table in
 * the CPU backend (lib/core/cpu_backend.c). */
#define ACCEL__DOMAINS(X) X(image) X(hash) X(index) X(ct) X(svf) X(reg)
#define ACCEL__OPS_MEMBER(d) const struct accel__##d##_ops *d;
#define ACCEL__OPS_TABLES(d) extern const struct accel__##d##_ops accel__cpu_##d##_ops, accel__cuda_##d##_ops;

typedef struct accel__backend {
  uint32_t version; /* ACCEL__BACKEND_VERSION */
  const char *name; /* "cpu", "cuda", ... */
  accel_backend_kind kind;
  void (*probe)(accel__probe_result *out);
  /* Describe one device; ACCEL_ERR_NOT_FOUND for a bad index. */
  accel_status (*device_info)(int32_t index, accel_device_info *info, char *why);
  /* Prepare the backend for one context. On failure, fill why. */
  accel_status (*open)(accel__backend_config *config, void **state, char *why);
  void (*close)(void *state);
  /* Per-domain operations, one member per domain of ACCEL__DOMAINS: `const
   * struct accel__<d>_ops *<d>` (lib/<d>/ops.h). NULL members (or a NULL
   * table) mean "this backend does not implement the stage", and the CPU
   * runs it. */
  ACCEL__DOMAINS(ACCEL__OPS_MEMBER)
  /* Copy n bytes between host memory and the context's device (to_device:
   * host `src` to device `dst`, else device `src` to host `dst`), waited
   * for, counted in call->bytes_up / bytes_down; on failure, call->why.
   * The dispatcher stages device arrays through it for a CPU run. NULL on
   * backends without device memory. */
  accel_status (*copy)(accel__call *call, void *dst, const void *src, size_t n, bool to_device);
} accel__backend;

/* Each domain's ops tables: accel__cpu_<d>_ops (lib/<d>/cpu.c) and, when the
 * domain has a CUDA path, accel__cuda_<d>_ops (kernels/<d>.cu). */
ACCEL__DOMAINS(ACCEL__OPS_TABLES)

/* The backends this build has. */
extern const accel__backend accel__cpu_backend;
#if defined(ACCEL_HAVE_CUDA) && ACCEL_HAVE_CUDA
extern const accel__backend accel__cuda_backend;
/* The CUDA backend's ops in host emulation (kernels/testing.h). */
const accel__backend *accel__cuda_emulated_backend(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_CORE_BACKEND_H */
