/* tests/emulated_gpu.h - the CUDA backend's pipelines run on the host.
 *
 * A test backend whose hash and index ops are the CUDA ones in emulation:
 * the same host code, arena layouts and per-thread kernel bodies, run in
 * loops, with "device" memory from malloc under the emulated budgets
 * (accel__cuda_*_emulated_budget). Tests without a GPU use it to check
 * everything but the launch geometry and the CUDA calls themselves, which
 * the GPU suite covers. */
#ifndef ACCEL_TEST_EMULATED_GPU_H
#define ACCEL_TEST_EMULATED_GPU_H

#include "testutil.h"

#if EXPECT_CUDA
/* A context on the emulated GPU (backend kind CUDA), logging into cap. */
accel_ctx *make_emulated_gpu_ctx(accel_fallback_policy policy, log_capture *cap);

/* Emulated CUDA calls fail on request (kernels/cuda_util.h): while
 * accel__cuda_emulated_fault_at is n >= 0, n calls succeed and the next one
 * fails with accel__cuda_emulated_fault_error, a cudaError_t. */
extern int64_t accel__cuda_emulated_fault_at;
extern int accel__cuda_emulated_fault_error;
enum { EMU_CUDA_ERROR_LAUNCH_FAILURE = 719 }; /* cudaErrorLaunchFailure */
#endif

#endif
