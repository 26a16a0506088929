/* The fake backend: opens or fails to, and its gray op either computes the
 * right answer or scribbles 0xAB over the output and fails, as a GPU stage
 * that died halfway would. */
#include "fake_backend.h"

#include "image/ops.h"

#include <stdio.h>
#include <string.h>

fake_control fake;

void fake_reset(void) {
  memset(&fake, 0, sizeof fake);
  fake.has_gray = true;
}

static void fake_probe(accel__probe_result *out) {
  out->device_count = 1;
  out->reason[0] = '\0';
}

static accel_status fake_open(accel__backend_config *cfg, void **state, char *why) {
  if (fake.open_status != ACCEL_OK) {
    accel__why(why, "%s", fake.open_reason);
    return fake.open_status;
  }
  fake.opens++;
  cfg->memory_budget = 1 << 20;
  *state = &fake;
  return ACCEL_OK;
}

static void fake_close(void *state) {
  (void)state;
  fake.closes++;
}

static accel_status fake_gray(accel__call *call, const accel_array *src, const accel_array *dst) {
  __atomic_add_fetch(&fake.gray_calls, 1, __ATOMIC_RELAXED);
  for (int64_t y = 0; y < dst->shape[0]; y++)
    for (int64_t x = 0; x < dst->shape[1]; x++) {
      uint8_t *d = (uint8_t *)dst->data + y * dst->strides[0] + x * dst->strides[1];
      const uint8_t *s = (const uint8_t *)src->data + y * src->strides[0] + x * src->strides[1];
      if (fake.gray_status != ACCEL_OK) {
        *d = 0xAB;
      } else if (src->shape[2] >= 3) {
        *d = (uint8_t)((s[0] * 19595u + s[src->strides[2]] * 38470u + s[2 * src->strides[2]] * 7471u + 0x8000u) >> 16);
      } else {
        *d = s[0];
      }
    }
  if (fake.gray_status != ACCEL_OK) {
    snprintf(call->why, sizeof call->why, "%s", fake.gray_reason);
    return fake.gray_status;
  }
  return ACCEL_OK;
}

static const accel__image_ops fake_image_ops = {.to_gray = fake_gray};
static const accel__image_ops fake_no_image_ops = {.to_gray = NULL};

static accel_status fake_device_info(int32_t index, accel_device_info *info, char *why) {
  (void)index;
  (void)info;
  (void)why;
  return ACCEL_ERR_UNSUPPORTED;
}

/* not const: fake_ctx_create points .image at the table the test asks for */
static accel__backend fake_backend = {
    .version = ACCEL__BACKEND_VERSION,
    .name = "fake-gpu",
    .kind = ACCEL_BACKEND_CUDA,
    .probe = fake_probe,
    .device_info = fake_device_info,
    .open = fake_open,
    .close = fake_close,
    .image = &fake_image_ops,
};

accel_status fake_ctx_create(const accel_ctx_options *opts, accel_ctx **out) {
  fake_backend.image = fake.has_gray ? &fake_image_ops : &fake_no_image_ops;
  return accel__ctx_create_with(opts, &fake_backend, out);
}
