/* Version and build information. */
#include "internal.h"

uint32_t accel_version_number(void) { return ACCEL_VERSION_NUMBER; }
const char *accel_version_string(void) { return ACCEL_VERSION_STRING; }
uint32_t accel_abi_version(void) { return ACCEL_ABI_VERSION; }

const char *accel_build_info(void) {
  return "cuda=" ACCEL_CUDA_INFO " openmp=" ACCEL_OPENMP_INFO " tiff=" ACCEL_TIFF_INFO
         " sanitizers=" ACCEL_SANITIZE_INFO;
}
