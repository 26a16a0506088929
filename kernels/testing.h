/*
 * kernels/testing.h - what tests reach of the CUDA backend (internal; C and
 * CUDA C++).
 *
 * - The emulated backend: the CUDA backend's own ops, run on the host, for
 *   tests without a GPU.
 * - Faults on request: CUDA calls that fail, on a device or in emulation.
 * - The place (file and line) of the last CUDA failure a stage reported.
 */
#ifndef ACCEL_KERNELS_TESTING_H
#define ACCEL_KERNELS_TESTING_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend of kind CUDA ("cuda-emulated") whose ops tables are the CUDA
 * backend's, run as host emulation: the same host code, arena layouts and
 * per-thread kernel bodies in loops, with "device" memory from malloc. Its
 * device memory is the context's device_memory_budget (1 GiB when that is
 * 0), so tests choose it per context as they would on a device. Everything
 * but the launch geometry and the CUDA calls themselves is exercised. */
const accel__backend *accel__cuda_emulated_backend(void);

/* While accel__cuda_fault_at is n >= 0, n more CUDA calls (the executor's
 * and launches, on a device or in emulation) succeed and the next one fails
 * with accel__cuda_fault_error (a cudaError_t) without being made; then it
 * is -1 again. Tests reach every error path this way. */
extern int64_t accel__cuda_fault_at;
extern int accel__cuda_fault_error;

/* The chunk of the pinned staging buffers that large volumes cross the bus
 * in (16 MiB); tests lower it so small volumes take the chunked path. */
extern size_t accel__cuda_pin_chunk;

/* Values per thread of the device's non-finite check of an F32 image
 * (kernels/reg.cu; 256); tests lower it so small images span segments. */
extern int64_t accel__reg_finite_segment;

/* false: slab and tile loops upload each slab after the kernels on the
 * previous one, as they do when two staged slabs do not fit (slab_stager);
 * tests run both ways. Default true. */
extern bool accel__cuda_overlap;

/* Device memory that ctx's CUDA (or emulated) backend holds now, between
 * calls (what a registration holds across its levels; 0 when nothing is
 * held, and on other backends). */
uint64_t accel__cuda_memory_in_use(const accel_ctx *ctx);

/* "kernels/<file>.cu:<line>" of the last failed CUDA call that a stage
 * reported on this thread (accel__cuda_check), "" when none has since the
 * thread's last stage began. */
const char *accel__cuda_failure_site(void);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_KERNELS_TESTING_H */
