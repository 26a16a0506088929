/* kernels/image_gray.cu - gray conversion (Pillow's convert('L')) on the GPU. */
#include "cuda_util.h"

#include "image/ops.h"
#include "image/pillow.h"

#include <stdlib.h>

__global__ void gray_kernel(const uint8_t *__restrict__ src, int64_t src_pitch, int channels,
                            uint8_t *__restrict__ dst, int64_t dst_pitch, int64_t width, int64_t height) {
  for (int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; y < height; y += (int64_t)gridDim.y * blockDim.y) {
    const uint8_t *s = src + y * src_pitch;
    uint8_t *d = dst + y * dst_pitch;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < width;
         x += (int64_t)gridDim.x * blockDim.x) {
      const uint8_t *p = s + x * channels;
      d[x] = channels >= 3 ? accel__luma(p[0], p[1], p[2]) : p[0];
    }
  }
}

static accel_status cuda_to_gray(accel__call *call, const accel_array *src, const accel_array *dst) {
  const int64_t h = src->shape[0], w = src->shape[1], c = src->shape[2];
  const size_t in_row = (size_t)(w * c), in_bytes = in_row * (size_t)h, out_bytes = (size_t)(w * h);
  /* rows whose pixels are adjacent copy with a pitched memcpy; anything else is packed on the host */
  const bool src_rows = src->strides[2] == 1 && src->strides[1] == c && src->strides[0] >= (int64_t)in_row;
  const bool dst_rows = dst->strides[1] == 1 && dst->strides[0] >= w;

  accel__cuda_scope scope;
  accel_status s = accel__cuda_enter(call, &scope);
  if (s) return s;
  accel__cuda_state *st = scope.st;
  uint8_t *d_src = NULL, *d_dst = NULL, *staging = NULL;
  cudaError_t e = cudaSuccess;
  const char *what = "";

  s = accel__cuda_alloc(st, in_bytes, (void **)&d_src, call->why);
  if (!s) s = accel__cuda_alloc(st, out_bytes, (void **)&d_dst, call->why);
  if (!s && (!src_rows || !dst_rows)) {
    staging = (uint8_t *)malloc(in_bytes > out_bytes ? in_bytes : out_bytes);
    if (!staging) {
      accel__why(call->why, "cannot allocate %zu bytes of host staging memory", in_bytes);
      s = ACCEL_ERR_OUT_OF_MEMORY;
    }
  }
  if (s) goto out;

  if (src_rows) {
    e = cudaMemcpy2DAsync(d_src, in_row, src->data, (size_t)src->strides[0], in_row, (size_t)h,
                          cudaMemcpyHostToDevice, st->stream);
  } else {
    accel__array_pack(src, staging);
    e = cudaMemcpyAsync(d_src, staging, in_bytes, cudaMemcpyHostToDevice, st->stream);
  }
  what = "upload";
  if (e != cudaSuccess) goto cuda_fail;
  {
    dim3 block(32, 8);
    gray_kernel<<<accel__grid2d(w, h, block), block, 0, st->stream>>>(d_src, (int64_t)in_row, (int)c, d_dst, w, w, h);
    what = "gray_kernel launch";
    if ((e = cudaGetLastError()) != cudaSuccess) goto cuda_fail;
  }
  what = "download";
  if (dst_rows) {
    e = cudaMemcpy2DAsync(dst->data, (size_t)dst->strides[0], d_dst, (size_t)w, (size_t)w, (size_t)h,
                          cudaMemcpyDeviceToHost, st->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st->stream);
  } else {
    e = cudaMemcpyAsync(staging, d_dst, out_bytes, cudaMemcpyDeviceToHost, st->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st->stream);
    if (e == cudaSuccess) accel__array_unpack(staging, dst);
  }
  if (e != cudaSuccess) goto cuda_fail;
  goto out;

cuda_fail:
  s = accel__cuda_status(e, call->why, what);
out:
  accel__cuda_free(st, d_src, in_bytes);
  accel__cuda_free(st, d_dst, out_bytes);
  cudaStreamSynchronize(st->stream);
  accel__cuda_leave(&scope);
  free(staging);
  return s;
}

extern "C" const accel__image_ops accel__cuda_image_ops = {
    /* .to_gray = */ cuda_to_gray,
};
