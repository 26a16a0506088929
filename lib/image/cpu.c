/* CPU gray conversion: Pillow's convert('L') arithmetic, rows in parallel. */
#include "core/internal.h"
#include "image/convert.h"
#include "image/ops.h"
#include "image/pillow.h"

static accel_status cpu_to_gray(accel__call *call, const accel_array *src, const accel_array *dst) {
  (void)call; /* read by OpenMP pragmas only */
  const int64_t h = src->shape[0], w = src->shape[1], c = src->shape[2];
  const int64_t sy = src->strides[0], sx = src->strides[1], sc = src->strides[2];
  const int64_t dy = dst->strides[0], dx = dst->strides[1];
  const char *sbase = src->data;
  char *dbase = dst->data;

#pragma omp parallel for num_threads(call->threads) schedule(static) if (h * w >= 65536)
  for (int64_t y = 0; y < h; y++) {
    const uint8_t *s = (const uint8_t *)(sbase + y * sy);
    uint8_t *d = (uint8_t *)(dbase + y * dy);
    if (c >= 3) {
      if (sc == 1 && sx == 3 && dx == 1) { /* packed RGB rows: the common case */
        accel__rgb_row_to_gray(s, w, d);
      } else if (sc == 1 && sx == c && dx == 1) {
        for (int64_t x = 0; x < w; x++) d[x] = accel__luma(s[x * c], s[x * c + 1], s[x * c + 2]);
      } else {
        for (int64_t x = 0; x < w; x++) {
          const uint8_t *p = s + x * sx;
          d[x * dx] = accel__luma(p[0], p[sc], p[2 * sc]);
        }
      }
    } else { /* gray or gray + alpha: the gray channel unchanged */
      for (int64_t x = 0; x < w; x++) d[x * dx] = s[x * sx];
    }
  }
  return ACCEL_OK;
}

const accel__image_ops accel__cpu_image_ops = {
    .to_gray = cpu_to_gray,
};
