/* tests/fake_backend.h - a "GPU" backend for tests that fails on request. */
#ifndef ACCEL_FAKE_BACKEND_H
#define ACCEL_FAKE_BACKEND_H

#include "core/internal.h"

typedef struct fake_control {
  accel_status open_status; /* returned by open(); ACCEL_OK opens */
  char open_reason[128];
  accel_status gray_status; /* returned by the gray op after scribbling on dst */
  char gray_reason[128];
  bool has_gray; /* false: the backend has no gray op */
  int gray_calls;
  int opens, closes;
} fake_control;

extern fake_control fake;

/* Reset `fake` to "opens and computes correctly". */
void fake_reset(void);
/* Create a context whose GPU backend is the fake one. */
accel_status fake_ctx_create(const accel_ctx_options *opts, accel_ctx **out);

#endif
