/*
 * kernels/image.cu - gray conversion (Pillow's convert('L')) on the GPU.
 *
 * One thread per pixel on a 2D grid over rows and columns. Rows whose pixels
 * are adjacent in memory travel with pitched copies; other layouts are packed
 * (and unpacked) on the host. The host emulation runs the same per-pixel code.
 */
#include "cuda_util.h"

#include "image/ops.h"
#include "image/pillow.h"

#include <stdlib.h>

namespace {

struct gray_f {
  const uint8_t *src;
  int64_t src_pitch;
  int channels;
  uint8_t *dst;
  int64_t dst_pitch;
  __host__ __device__ void operator()(int64_t y, int64_t x) const {
    const uint8_t *p = src + y * src_pitch + x * channels;
    dst[y * dst_pitch + x] = channels >= 3 ? accel__luma(p[0], p[1], p[2]) : p[0];
  }
};

accel_status to_gray(accel__executor *x, accel__call *call, const accel_array *src, const accel_array *dst) {
  char *why = call->why;
  const int64_t h = src->shape[0], w = src->shape[1], c = src->shape[2];
  const size_t in_row = (size_t)(w * c), in_bytes = in_row * (size_t)h, out_bytes = (size_t)(w * h);
  /* rows whose pixels are adjacent copy with a pitched memcpy; anything else is packed on the host */
  const bool src_rows = src->strides[2] == 1 && src->strides[1] == c && src->strides[0] >= (int64_t)in_row;
  const bool dst_rows = dst->strides[1] == 1 && dst->strides[0] >= w;
  dbuf dsrc, ddst;
  uint8_t *staging = nullptr;
  accel_status s = dsrc.get(x, in_bytes, why);
  if (!s) s = ddst.get(x, out_bytes, why);
  if (!s && (!src_rows || !dst_rows) && !(staging = (uint8_t *)malloc(in_bytes > out_bytes ? in_bytes : out_bytes))) {
    accel__why(why, "cannot allocate %zu bytes of host staging memory", in_bytes > out_bytes ? in_bytes : out_bytes);
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s && src_rows) {
    s = accel__cuda_check(
        x->copy2d(dsrc.p, in_row, src->data, (size_t)src->strides[0], in_row, (size_t)h, cudaMemcpyHostToDevice), why,
        "upload");
  } else if (!s) {
    accel__array_pack(src, staging);
    s = upload(x, dsrc.p, staging, in_bytes, why);
  }
  if (!s) s = each2d(x, h, w, gray_f{dsrc.p, (int64_t)in_row, (int)c, ddst.p, w}, why, "gray kernel");
  if (!s && dst_rows) {
    s = accel__cuda_check(
        x->copy2d(dst->data, (size_t)dst->strides[0], ddst.p, (size_t)w, (size_t)w, (size_t)h, cudaMemcpyDeviceToHost),
        why, "download");
  } else if (!s) {
    s = accel__cuda_check(x->download(staging, ddst.p, out_bytes), why, "download");
  }
  if (!s) s = accel__cuda_check(x->sync(), why, "download");
  if (!s && !dst_rows) accel__array_unpack(staging, dst);
  x->drain(); /* after a failure, the copies may still use staging */
  free(staging);
  return s;
}

accel_status on_device(accel__call *call, const accel_array *src, const accel_array *dst) {
  return with_device(call, [&](accel__executor *x) { return to_gray(x, call, src, dst); });
}

} // namespace

extern "C" const accel__image_ops accel__cuda_image_ops = {
    /* .to_gray = */ on_device,
};
