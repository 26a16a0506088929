/* Backend and device queries (no context needed). */
#include "internal.h"

#include <string.h>

enum { BACKEND_INFO_V1_SIZE = sizeof(accel_backend_info), DEVICE_INFO_V1_SIZE = sizeof(accel_device_info) };

static const accel__backend *gpu_backend(void) {
#if ACCEL_HAVE_CUDA
  return &accel__cuda_backend;
#else
  return NULL;
#endif
}

/* What the GPU backend sees; false if this build has none. */
static bool probe(accel__probe_result *p) {
  const accel__backend *b = gpu_backend();
  if (!b) return false;
  memset(p, 0, sizeof *p);
  b->probe(p);
  return true;
}

accel_status accel_backend_info_init(accel_backend_info *info, size_t struct_size) {
  return accel__versioned_init(__func__, info, struct_size, NULL, sizeof *info, BACKEND_INFO_V1_SIZE);
}

accel_status accel_backend_query(accel_backend_kind kind, accel_backend_info *info) {
  REQUIRE(NULL, info, ACCEL_ERR_INVALID_ARG, "info is NULL");
  accel_backend_info i;
  accel_backend_info_init(&i, sizeof i);
  i.kind = kind;
  if (kind == ACCEL_BACKEND_CPU) {
    accel__strlcpy(i.name, "cpu", sizeof i.name);
    i.compiled = i.available = 1;
    i.device_count = 1;
  } else if (kind == ACCEL_BACKEND_CUDA) {
    accel__strlcpy(i.name, "cuda", sizeof i.name);
    accel__probe_result p;
    if (probe(&p)) {
      i.compiled = 1;
      i.device_count = p.device_count;
      i.available = p.device_count > 0;
      accel__strlcpy(i.reason, p.reason, sizeof i.reason);
    } else {
      accel__strlcpy(i.reason, "this libaccel was built without CUDA", sizeof i.reason);
    }
  } else {
    return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "kind must be CPU or CUDA, got %d", (int)kind);
  }
  return accel__versioned_out(NULL, __func__, "info", info, &i, sizeof i, BACKEND_INFO_V1_SIZE);
}

accel_status accel_device_count(int32_t *count) {
  REQUIRE(NULL, count, ACCEL_ERR_INVALID_ARG, "count is NULL");
  accel__probe_result p;
  *count = probe(&p) ? p.device_count : 0;
  return ACCEL_OK;
}

accel_status accel_device_info_init(accel_device_info *info, size_t struct_size) {
  return accel__versioned_init(__func__, info, struct_size, NULL, sizeof *info, DEVICE_INFO_V1_SIZE);
}

accel_status accel_device_query(int32_t index, accel_device_info *info) {
  REQUIRE(NULL, info, ACCEL_ERR_INVALID_ARG, "info is NULL");
  int32_t n;
  accel_device_count(&n);
  if (index < 0 || index >= n)
    return FAIL(NULL, ACCEL_ERR_NOT_FOUND, "no CUDA device %d (%d present)", (int)index, (int)n);
  accel_device_info d;
  accel_device_info_init(&d, sizeof d);
  char why[ACCEL_REASON_MAX] = "";
  accel_status s = gpu_backend()->device_info(index, &d, why);
  if (s) return FAIL(NULL, s, "%s", why);
  return accel__versioned_out(NULL, __func__, "info", info, &d, sizeof d, DEVICE_INFO_V1_SIZE);
}
