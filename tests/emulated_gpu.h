/* tests/emulated_gpu.h - the CUDA backend's pipelines run on the host.
 *
 * Contexts on the emulated backend (kernels/testing.h): the CUDA backend's
 * own ops, the same host code, arena layouts and per-thread kernel bodies,
 * run in loops, with "device" memory from malloc within the context's
 * budget. Tests without a GPU use it to check everything but the launch
 * geometry and the CUDA calls themselves, which the GPU suite covers. */
#ifndef ACCEL_TEST_EMULATED_GPU_H
#define ACCEL_TEST_EMULATED_GPU_H

#include "testutil.h"

#if EXPECT_CUDA
#include "../kernels/testing.h"

/* A context on the emulated GPU (backend kind CUDA), logging into cap. */
accel_ctx *make_emulated_gpu_ctx(accel_fallback_policy policy, log_capture *cap);

/* The device memory of the emulated GPU contexts made from now on; 0 (the
 * start) gives the emulated device's own, 1 GiB. */
void set_emulated_gpu_budget(uint64_t bytes);

/* CUDA calls fail on request, in emulation and on a device: while
 * accel__cuda_fault_at is n >= 0, n calls succeed and the next one fails
 * with accel__cuda_fault_error, a cudaError_t (kernels/testing.h). */
enum { CUDA_ERROR_LAUNCH_FAILURE = 719 }; /* cudaErrorLaunchFailure */

/* Runs one GPU stage on ctx; checks the result against the CPU's whenever
 * it returns ACCEL_OK, and returns the stage's status. */
typedef accel_status (*gpu_stage_fn)(accel_ctx *ctx, void *user);
/* A context on a CUDA backend with this policy, logging into cap (may be NULL). */
typedef accel_ctx *(*gpu_ctx_fn)(accel_fallback_policy policy, log_capture *cap);

/* Make each CUDA call of `run` fail in turn (a launch failure at the first
 * call, then at the second, ...) until a run makes fewer calls, on fresh
 * contexts from `make`. Every failure must be reported, never ignored: under
 * ALLOW the one line "[GPU] <stage> failed: ...cudaErrorLaunchFailure....
 * CPU fallback.", one fallback counted and the CPU's result; under DENY
 * ACCEL_ERR_DEVICE with the error's name. Returns the number of CUDA calls
 * of a run without faults. */
int64_t fault_sweep(gpu_ctx_fn make, const char *stage, gpu_stage_fn run, void *user);
/* The same on the emulated GPU. */
int64_t emulated_fault_sweep(const char *stage, gpu_stage_fn run, void *user);
#endif

#endif
