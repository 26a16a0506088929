// The registration domain on CUDA. Stages without a CUDA op here (NULL) run
// on the CPU.
#include "cuda_util.h"
#include "reg/ops.h"
#include "reg/prealign.h"

extern "C" const accel__reg_ops accel__cuda_reg_ops = {
    /* .pyramid = */ nullptr,
    /* .level = */ nullptr,
    /* .warp = */ nullptr,
    /* .prealign = */ accel__reg_cuda_prealign,
};
