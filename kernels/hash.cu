/*
 * kernels/hash.cu - the hash batch on the GPU.
 *
 * Inputs are decoded on the CPU threads (JPEG/PNG decoding is serial per
 * image) while the GPU works on the previous group. Each group is uploaded
 * once (metadata, resampling weights and pixels in one copy) into a device
 * arena sized from the context's memory budget; then, all in kernels:
 *   gray conversion (Pillow's luma) of colour images,
 *   colorhash's pixel classes (per-block histograms, then atomics),
 *   the horizontal and vertical LANCZOS passes of every target,
 *   ahash/dhash/dhash_vertical, phash (scipy's DCT algorithm, one thread
 *   per image), whash (pywt's Haar steps, one thread per block of the plane;
 *   with db4, then one thread per column and per row of each level);
 * and one download of the hash bits and colour counts. Every per-sample and
 * per-plane computation is the host/device code of lib/hash/hash_math.h that
 * the CPU backend runs too, compiled without fused multiply-adds, so the
 * hashes equal the CPU's. Resampling weights and the DCT plan are computed on
 * the host (they need libm's sin/cos) and uploaded.
 */
#include "cuda_util.h"

#include "hash/hash_math.h"
#include "hash/ops.h"
#include "hash/resample.h"

#include <stdlib.h>
#include <string.h>

namespace {

enum { NCOUNTS = 15, ALIGN = 256, MAX_K = ACCEL_HASH_KIND_COUNT };

/* One image of a group, as the kernels see it; offsets are into the arena. */
struct img_desc {
  int64_t w, h;
  int64_t px_off; /* uploaded pixels: RGB (3 bytes) or gray (1 byte) */
  int32_t channels;
  int64_t gray_off; /* gray plane (== px_off for gray images) */
  int64_t plane_off[MAX_K], tw[MAX_K], th[MAX_K];
  int64_t slots_off;  /* nkinds * slot_bytes of hash bits */
  int64_t counts_off; /* NCOUNTS uint64 colour class counts, or -1 */
  int64_t phash_off;  /* phash scratch (doubles), or -1 */
  int64_t whash_off;  /* whash scratch (whash_doubles): the blocks', 4 * n * n, db4's image */
  int32_t whash_k;    /* the kind index of whash, or -1 */
};

/* A horizontal pass: rows [row0, row1) of a gray plane to out_w columns. */
struct hpass {
  int64_t src_off, w, row0, row1, out_off, out_w;
  int64_t wt_off, first_off, count_off; /* int32 arrays in the arena */
  int32_t ksize;
};

/* A vertical pass (or a row copy when no vertical resampling is needed). */
struct vpass {
  int64_t src_off, src_stride, src_row0, w, out_off, out_h;
  int64_t wt_off, first_off, count_off;
  int32_t ksize, copy;
};

struct group_meta {
  int32_t nimg, nh, nv, nkinds, hash_size, slot_bytes, need_color, whash_keep_ll, whash_db4;
  int32_t kinds[MAX_K];
  int64_t descs_off, hpass_off, vpass_off, plan_off;
};

template <typename T> __host__ __device__ inline T *at(uint8_t *arena, int64_t off) {
  return (T *)(void *)(arena + off);
}

/* The work of one thread, as host/device functions: the kernels below and
 * the host emulation (which runs this pipeline without a GPU, for tests)
 * execute exactly these. */

__host__ __device__ inline void gray_px(uint8_t *arena, const img_desc *d, int64_t x, int64_t y) {
  const uint8_t *p = arena + d->px_off + (y * d->w + x) * 3;
  arena[d->gray_off + y * d->w + x] = accel__luma(p[0], p[1], p[2]);
}

__host__ __device__ inline int color_px(uint8_t *arena, const img_desc *d, int64_t i) {
  const uint8_t l = arena[d->gray_off + i];
  if (d->channels != 3) return l < 256 / 8 ? 0 : 1; /* gray pixels have saturation 0 */
  const uint8_t *p = arena + d->px_off + 3 * i;
  uint8_t hue, sat;
  accel__rgb_to_hs(p[0], p[1], p[2], &hue, &sat);
  return accel__color_class(p[0], p[1], p[2], l, sat);
}

__host__ __device__ inline void hpass_px(uint8_t *arena, const hpass *t, int64_t x, int64_t y) {
  const int32_t *wt = at<int32_t>(arena, t->wt_off), *first = at<int32_t>(arena, t->first_off),
                *count = at<int32_t>(arena, t->count_off);
  arena[t->out_off + (y - t->row0) * t->out_w + x] =
      accel__resample_tap(arena + t->src_off + y * t->w + first[x], 1, wt + x * t->ksize, count[x]);
}

__host__ __device__ inline void vpass_px(uint8_t *arena, const vpass *t, int64_t x, int64_t y) {
  const uint8_t *src = arena + t->src_off;
  if (t->copy) {
    arena[t->out_off + y * t->w + x] = src[(y - t->src_row0) * t->src_stride + x];
    return;
  }
  const int32_t *wt = at<int32_t>(arena, t->wt_off), *first = at<int32_t>(arena, t->first_off),
                *count = at<int32_t>(arena, t->count_off);
  arena[t->out_off + y * t->w + x] = accel__resample_tap(src + (first[y] - t->src_row0) * t->src_stride + x,
                                                         t->src_stride, wt + y * t->ksize, count[y]);
}

/* ahash, dhash, dhash_vertical of (image, kind) number i. */
__host__ __device__ inline void simple_one(uint8_t *arena, const group_meta *m, int64_t i) {
  const int img = (int)(i / m->nkinds), k = (int)(i % m->nkinds);
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  uint8_t *out = arena + d->slots_off + (int64_t)k * m->slot_bytes;
  const uint8_t *plane = arena + d->plane_off[k];
  switch (m->kinds[k]) {
  case ACCEL_HASH_AHASH: accel__ahash(plane, m->hash_size, out); break;
  case ACCEL_HASH_DHASH: accel__dhash(plane, m->hash_size, out); break;
  case ACCEL_HASH_DHASH_VERTICAL: accel__dhash_vertical(plane, m->hash_size, out); break;
  default: break;
  }
}

__host__ __device__ inline void phash_one(uint8_t *arena, const group_meta *m, int img, int k) {
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  accel__phash(arena + d->plane_off[k], m->hash_size, at<accel__dct_plan>(arena, m->plan_off),
               at<double>(arena, d->phash_off), arena + d->slots_off + (int64_t)k * m->slot_bytes);
}

/* whash scratch of an image_scale N plane at hash size n, in doubles: the
 * blocks' (blk and tmp, B^2 each per block: 2 N^2; with db4 at least two
 * M^2 planes, M = max(N, n + 8), which its levels reuse as their output and
 * column pass), then pyr, ptmp, low and sorted (n^2 each), then with db4
 * the image its levels start from (M^2). */
__host__ __device__ inline int64_t whash_side_room(int64_t N, int n, bool db4) { return db4 && N < n + 8 ? n + 8 : N; }
__host__ __device__ inline int64_t whash_blocks_doubles(int64_t N, int n, bool db4) {
  const int64_t M = whash_side_room(N, n, db4);
  return 2 * M * M;
}
__host__ __device__ inline int64_t whash_doubles(int64_t N, int n, bool db4) {
  const int64_t M = whash_side_room(N, n, db4);
  return whash_blocks_doubles(N, n, db4) + 4 * (int64_t)n * n + (db4 ? M * M : 0);
}

/* An image's whash scratch, as whash_doubles lays it out. */
struct whash_parts {
  accel__whash_geom g;
  int64_t M;
  double *blocks, *pyr, *image; /* image: db4's level 0 */
};
__host__ __device__ inline whash_parts whash_parts_of(uint8_t *arena, const group_meta *m, const img_desc *d) {
  whash_parts w;
  const int n = m->hash_size;
  w.g = accel__whash_geometry(d->tw[d->whash_k], n);
  w.M = whash_side_room(w.g.N, n, m->whash_db4);
  w.blocks = at<double>(arena, d->whash_off);
  w.pyr = w.blocks + whash_blocks_doubles(w.g.N, n, m->whash_db4);
  w.image = w.pyr + 4 * (int64_t)n * n;
  return w;
}

/* whash stages 1 and 3: block number i of the group (image i / n^2); db4's
 * stage 3 writes the block's pixels into the image its levels start from. */
__host__ __device__ inline void whash_block(uint8_t *arena, const group_meta *m, int64_t i, int final_stage) {
  const int n = m->hash_size;
  const int img = (int)(i / (n * n)), b = (int)(i % (n * n)), bi = b / n, bj = b % n;
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  const whash_parts w = whash_parts_of(arena, m, d);
  const accel__whash_geom g = w.g;
  double *blk = w.blocks + (int64_t)b * 2 * g.B * g.B, *tmp = blk + g.B * g.B;
  double *pyr = w.pyr, *low = pyr + 2 * n * n;
  const uint8_t *px = arena + d->plane_off[d->whash_k];
  if (!final_stage) {
    pyr[b] = accel__whash_block_ll(px, &g, bi, bj, blk, tmp);
  } else if (m->whash_db4) {
    accel__whash_block_pixels(px, &g, bi, bj, pyr[b], m->whash_keep_ll, blk, tmp);
    for (int64_t r = 0; r < g.B; r++)
      for (int64_t c = 0; c < g.B; c++) w.image[(bi * g.B + r) * g.N + bj * g.B + c] = blk[r * g.B + c];
  } else {
    low[b] = m->whash_keep_ll ? pyr[b] : accel__whash_block_final(px, &g, bi, bj, pyr[b], blk, tmp);
  }
}

/* db4 level `level` of image img: column t (axis 0: image or the previous
 * level into the column pass's plane) or row t (axis 1: into the level's
 * output). Levels alternate between the first blocks plane and the image. */
__host__ __device__ inline void db4_line(uint8_t *arena, const group_meta *m, int img, int level, int axis, int64_t t) {
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  const whash_parts w = whash_parts_of(arena, m, d);
  if (level >= w.g.m) return;
  const int64_t side = accel__db4_side_after(w.g.N, level);
  double *src = level % 2 ? w.blocks : w.image, *dst = level % 2 ? w.image : w.blocks, *tmp = w.blocks + w.M * w.M;
  if (axis == 0 && t < side) accel__db4_column(src, side, t, tmp);
  if (axis == 1 && t < (side + 7) / 2) accel__db4_row(tmp, side, t, dst);
}

/* whash stages 2 (the top of the pyramid) and 4 (bits) of an image. */
__host__ __device__ inline void whash_image(uint8_t *arena, const group_meta *m, int img, int bits_stage) {
  const int n = m->hash_size;
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  const whash_parts w = whash_parts_of(arena, m, d);
  double *pyr = w.pyr, *ptmp = pyr + n * n, *low = ptmp + n * n, *sorted = low + n * n;
  uint8_t *out = arena + d->slots_off + (int64_t)d->whash_k * m->slot_bytes;
  if (!bits_stage) {
    if (!m->whash_keep_ll) accel__whash_top(pyr, n, w.g.ln, ptmp);
  } else if (m->whash_db4) { /* the last level's output, its side; the column plane as scratch */
    accel__whash_bits(w.g.m % 2 ? w.blocks : w.image, (int)accel__db4_side_after(w.g.N, w.g.m), w.blocks + w.M * w.M,
                      out);
  } else {
    accel__whash_bits(low, n, sorted, out);
  }
}

#define GRID_Y(v, end)                                                                                                 \
  for (int64_t v = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; v < (end); v += (int64_t)gridDim.y * blockDim.y)
#define GRID_X(v, end)                                                                                                 \
  for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < (end); v += (int64_t)gridDim.x * blockDim.x)

__global__ void k_gray(uint8_t *arena, const group_meta *m) {
  const img_desc *d = at<img_desc>(arena, m->descs_off) + blockIdx.z;
  if (d->channels != 3) return;
  GRID_Y(y, d->h) GRID_X(x, d->w) gray_px(arena, d, x, y);
}

__global__ void k_color(uint8_t *arena, const group_meta *m) {
  __shared__ unsigned long long hist[NCOUNTS];
  const img_desc *d = at<img_desc>(arena, m->descs_off) + blockIdx.z;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (tid < NCOUNTS) hist[tid] = 0;
  __syncthreads();
  GRID_Y(y, d->h) GRID_X(x, d->w) atomicAdd(&hist[color_px(arena, d, y * d->w + x)], 1ull);
  __syncthreads();
  if (tid < NCOUNTS && hist[tid]) atomicAdd(at<unsigned long long>(arena, d->counts_off) + tid, hist[tid]);
}

__global__ void k_hpass(uint8_t *arena, const group_meta *m) {
  const hpass *t = at<hpass>(arena, m->hpass_off) + blockIdx.z;
  GRID_Y(yy, t->row1 - t->row0) GRID_X(x, t->out_w) hpass_px(arena, t, x, t->row0 + yy);
}

__global__ void k_vpass(uint8_t *arena, const group_meta *m) {
  const vpass *t = at<vpass>(arena, m->vpass_off) + blockIdx.z;
  GRID_Y(y, t->out_h) GRID_X(x, t->w) vpass_px(arena, t, x, y);
}

__global__ void k_simple(uint8_t *arena, const group_meta *m) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < (int64_t)m->nimg * m->nkinds) simple_one(arena, m, i);
}

__global__ void k_phash(uint8_t *arena, const group_meta *m, int k) {
  const int img = blockIdx.x * blockDim.x + threadIdx.x;
  if (img < m->nimg) phash_one(arena, m, img, k);
}

__global__ void k_whash_blocks(uint8_t *arena, const group_meta *m, int final_stage) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < (int64_t)m->nimg * m->hash_size * m->hash_size) whash_block(arena, m, i, final_stage);
}

/* db4 lines: (image, line) i of nimg x lines. */
__global__ void k_db4(uint8_t *arena, const group_meta *m, int level, int axis, int64_t lines) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < (int64_t)m->nimg * lines) db4_line(arena, m, (int)(i / lines), level, axis, i % lines);
}

__global__ void k_whash_image(uint8_t *arena, const group_meta *m, int bits_stage) {
  const int img = blockIdx.x * blockDim.x + threadIdx.x;
  if (img < m->nimg) whash_image(arena, m, img, bits_stage);
}

/* ------------------------------------------------------------ host side: a group's plan */

typedef accel__executor executor;

int64_t align_up(int64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

/* A group's hash slots and colour counts lie in one block, image after
 * image, so that one memset clears them and one copy brings them back:
 * each image's slots (padded to 8 bytes), then its counts. */
int64_t slots_span(const accel__hash_spec *spec) { return (spec->nkinds * (int64_t)spec->slot_bytes + 7) / 8 * 8; }
int64_t result_stride(const accel__hash_spec *spec) { return slots_span(spec) + (spec->need_color ? NCOUNTS * 8 : 0); }

/* Arena layout of one group, built on the host. */
struct group_plan {
  size_t nimg = 0;
  size_t *index = nullptr; /* the job's input index of each image */
  accel__hash_image *img = nullptr;
  img_desc *desc = nullptr;
  hpass *hp = nullptr;
  vpass *vp = nullptr;
  int nh = 0, nv = 0;
  group_meta meta;
  int64_t meta_bytes = 0;   /* meta + descs + passes + plan + weights: uploaded first */
  int64_t upload_bytes = 0; /* ... + pixels */
  int64_t total_bytes = 0;  /* ... + everything computed on the device */
};

void plan_free(group_plan *g) {
  for (size_t i = 0; i < g->nimg; i++) accel__hash_image_free(&g->img[i]);
  free(g->index);
  free(g->img);
  free(g->desc);
  free(g->hp);
  free(g->vp);
  *g = group_plan();
}

/* Whether the group holds an image as RGB: a colour image decoded so, or a
 * colour device array (RGB, RGBA); gray modes are a gray plane. */
bool as_rgb(const accel__hash_image *im) { return im->rgb || (im->device && im->channels >= 3); }

/* Device bytes one decoded image needs (to decide group sizes). */
int64_t image_bytes(const accel__hash_spec *spec, int64_t w, int64_t h, bool rgb) {
  int64_t b = align_up(w * h * (rgb ? 3 : 1)) + (rgb ? align_up(w * h) : 0) + 4096;
  for (int k = 0; k < spec->nkinds; k++) {
    int64_t tw, th;
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
    accel__hash_target(spec, spec->kinds[k], w, h, &tw, &th);
    b += align_up(tw * th) + align_up(tw * h) + align_up((tw + th) * 8 * (6 * (w / tw + h / th) + 16));
    if (spec->kinds[k] == ACCEL_HASH_WHASH) b += align_up(whash_doubles(tw, spec->hash_size, spec->whash_db4) * 8);
    if (spec->kinds[k] == ACCEL_HASH_PHASH) b += align_up(accel__phash_scratch(spec->hash_size, (int)tw) * 8);
  }
  return b;
}

/* The resampling weights of a group's passes, copied out of the axis cache
 * at once (the cache recycles its entries) as [weights | first | count]
 * int32, one entry per distinct axis, each with its arena offset. */
struct weight_table {
  struct entry {
    int64_t in_size, out_size, off;
    int32_t ksize;
    int32_t *data;
  };
  entry *e = nullptr; /* room for every pass of the group */
  int n = 0;
  ~weight_table() {
    for (int i = 0; i < n; i++) free(e[i].data);
    free(e);
  }
  int64_t bytes(int i) const { return e[i].out_size * (int64_t)(e[i].ksize + 2) * 4; }
  /* a's entry, added unless there; -1: out of memory */
  int add(const accel__axis *a) {
    for (int i = 0; i < n; i++)
      if (e[i].in_size == a->in_size && e[i].out_size == a->out_size) return i;
    int32_t *d = (int32_t *)malloc((size_t)bytes_of(a));
    if (!d) return -1;
    memcpy(d, a->weight, (size_t)(a->out_size * a->ksize) * 4);
    memcpy(d + a->out_size * a->ksize, a->first, (size_t)a->out_size * 4);
    memcpy(d + a->out_size * (a->ksize + 1), a->count, (size_t)a->out_size * 4);
    e[n] = entry{a->in_size, a->out_size, 0, a->ksize, d};
    return n++;
  }
  static int64_t bytes_of(const accel__axis *a) { return a->out_size * (int64_t)(a->ksize + 2) * 4; }
  /* the arena offsets of entry i's weights, first taps and tap counts */
  void place(int i, int64_t *wt_off, int64_t *first_off, int64_t *count_off) const {
    *wt_off = e[i].off;
    *first_off = e[i].off + e[i].out_size * (int64_t)e[i].ksize * 4;
    *count_off = *first_off + e[i].out_size * 4;
  }
};

/* Planning one group: its passes' weights, and each pass's entry in them
 * (h_axis[t] of horizontal pass t, v_axis[t] of vertical pass t). */
struct group_builder {
  const accel__hash_spec *spec;
  accel__axis_cache *cache;
  group_plan *g;
  weight_table w;
  int *h_axis = nullptr, *v_axis = nullptr;
  group_builder(const accel__hash_spec *s, accel__axis_cache *c, group_plan *gp) : spec(s), cache(c), g(gp) {}
  ~group_builder() {
    free(h_axis);
    free(v_axis);
  }
};

/* An image's size, channels and the target of every kind. */
void plan_targets(const accel__hash_spec *spec, const accel__hash_image *im, img_desc *d) {
  d->w = im->w;
  d->h = im->h;
  d->channels = as_rgb(im) ? 3 : 1;
  d->counts_off = d->phash_off = d->whash_off = -1;
  d->whash_k = -1;
  for (int k = 0; k < spec->nkinds; k++) {
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
    accel__hash_target(spec, spec->kinds[k], d->w, d->h, &d->tw[k], &d->th[k]);
    if (spec->kinds[k] == ACCEL_HASH_WHASH) d->whash_k = k;
  }
}

/* The rows [y0, y1) that the vertical passes of d's targets as wide as
 * target k read (all of them when one keeps the height). False: out of
 * memory. */
bool rows_read(const group_builder &b, const img_desc *d, int k, int64_t *y0, int64_t *y1) {
  *y0 = d->h;
  *y1 = 0;
  for (int j = 0; j < b.spec->nkinds; j++) {
    if (b.spec->kinds[j] == ACCEL_HASH_COLORHASH || d->tw[j] != d->tw[k]) continue;
    if (d->th[j] == d->h) {
      *y0 = 0;
      *y1 = d->h;
      continue;
    }
    const accel__axis *ay = accel__axis_cached(b.cache, d->h, d->th[j]);
    if (!ay) return false;
    int64_t first, end;
    accel__axis_span(ay, &first, &end);
    if (first < *y0) *y0 = first;
    if (end > *y1) *y1 = end;
  }
  return true;
}

/* Image i's horizontal pass for target k when k is the first target of its
 * width and that width is not the image's: over the rows the targets of
 * that width read. False: out of memory. */
bool plan_hpass(group_builder &b, size_t i, int k) {
  group_plan *g = b.g;
  const img_desc *d = &g->desc[i];
  bool seen = false;
  for (int j = 0; j < k; j++) seen = seen || (b.spec->kinds[j] != ACCEL_HASH_COLORHASH && d->tw[j] == d->tw[k]);
  int64_t y0, y1;
  if (!rows_read(b, d, k, &y0, &y1)) return false;
  if (seen || d->tw[k] == d->w) return true;
  const accel__axis *ax = accel__axis_cached(b.cache, d->w, d->tw[k]);
  if (!ax) return false;
  hpass *p = &g->hp[g->nh];
  p->w = d->w;
  p->row0 = y0;
  p->row1 = y1;
  p->out_w = d->tw[k];
  p->ksize = ax->ksize;
  if ((b.h_axis[g->nh] = b.w.add(ax)) < 0) return false;
  p->src_off = (int64_t)i; /* resolved in place_passes: the image's index */
  g->nh++;
  return true;
}

/* Image i's vertical pass for target k: a resampling, or a copy of the rows
 * when the height stays. False: out of memory. */
bool plan_vpass(group_builder &b, size_t i, int k) {
  group_plan *g = b.g;
  const img_desc *d = &g->desc[i];
  vpass *p = &g->vp[g->nv];
  p->w = d->tw[k];
  p->out_h = d->th[k];
  p->copy = d->th[k] == d->h;
  p->src_off = (int64_t)i; /* resolved in place_passes */
  p->src_row0 = k;         /* temporarily: the kind, resolved in place_passes */
  if (!p->copy) {
    const accel__axis *ay = accel__axis_cached(b.cache, d->h, d->th[k]);
    if (!ay) return false;
    p->ksize = ay->ksize;
    if ((b.v_axis[g->nv] = b.w.add(ay)) < 0) return false;
  }
  g->nv++;
  return true;
}

/* Image i's passes: the horizontal ones (one per distinct target width),
 * then one vertical pass per target (colorhash has none). False: out of
 * memory. */
bool plan_passes(group_builder &b, size_t i) {
  const accel__hash_spec *spec = b.spec;
  for (int k = 0; k < spec->nkinds; k++)
    if (spec->kinds[k] != ACCEL_HASH_COLORHASH && !plan_hpass(b, i, k)) return false;
  for (int k = 0; k < spec->nkinds; k++)
    if (spec->kinds[k] != ACCEL_HASH_COLORHASH && !plan_vpass(b, i, k)) return false;
  return true;
}

/* Arena offsets of the uploaded part: meta, descs, passes, plan, weights,
 * pixels. Returns its end (upload_bytes). */
int64_t place_upload(group_builder &b, bool plan) {
  group_plan *g = b.g;
  int64_t off = align_up(sizeof(group_meta));
  g->meta.descs_off = off;
  off = align_up(off + (int64_t)(g->nimg * sizeof(img_desc)));
  g->meta.hpass_off = off;
  off = align_up(off + (int64_t)(g->nh * sizeof(hpass)));
  g->meta.vpass_off = off;
  off = align_up(off + (int64_t)(g->nv * sizeof(vpass)));
  g->meta.plan_off = plan ? off : -1;
  if (plan) off = align_up(off + (int64_t)sizeof(accel__dct_plan));
  for (int i = 0; i < b.w.n; i++) {
    b.w.e[i].off = off;
    off = align_up(off + b.w.bytes(i));
  }
  for (size_t i = 0; i < g->nimg; i++) {
    if (g->img[i].device) continue; /* not uploaded: place_device */
    g->desc[i].px_off = off;
    off = align_up(off + g->desc[i].w * g->desc[i].h * g->desc[i].channels);
  }
  return g->upload_bytes = off;
}

/* Arena offsets, from off, of what only the device writes per image: the
 * pixels of device-array images, the gray plane of colour images, target
 * planes, hash slots, colour counts, phash and whash scratch. Returns their
 * end. */
int64_t place_device(const accel__hash_spec *spec, group_plan *g, int64_t off) {
  const int n = spec->hash_size, K = spec->nkinds;
  for (size_t i = 0; i < g->nimg; i++)
    if (g->img[i].device) {
      g->desc[i].px_off = off;
      off = align_up(off + g->desc[i].w * g->desc[i].h * g->desc[i].channels);
    }
  const int64_t results = off, stride = result_stride(spec);
  off = align_up(off + (int64_t)g->nimg * stride);
  for (size_t i = 0; i < g->nimg; i++) {
    img_desc *d = &g->desc[i];
    if (d->channels == 3) {
      d->gray_off = off;
      off = align_up(off + d->w * d->h);
    } else {
      d->gray_off = d->px_off;
    }
    for (int k = 0; k < K; k++) {
      if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
      d->plane_off[k] = off;
      off = align_up(off + d->tw[k] * d->th[k]);
    }
    d->slots_off = results + (int64_t)i * stride;
    if (spec->need_color) d->counts_off = d->slots_off + slots_span(spec);
    for (int k = 0; k < K; k++) {
      if (spec->kinds[k] == ACCEL_HASH_PHASH) {
        d->phash_off = off;
        off = align_up(off + accel__phash_scratch(n, (int)d->tw[k]) * 8);
      }
      if (spec->kinds[k] == ACCEL_HASH_WHASH) {
        d->whash_off = off;
        off = align_up(off + whash_doubles(d->tw[k], n, spec->whash_db4) * 8);
      }
    }
  }
  return off;
}

/* The passes' arena offsets: the horizontal passes' outputs, from off, and
 * their weights; each vertical pass reads its image's horizontal pass of
 * its width, or the gray plane. Returns the arena's end (total_bytes). */
int64_t place_passes(group_builder &b, int64_t off) {
  group_plan *g = b.g;
  for (int t = 0; t < g->nh; t++) {
    hpass *p = &g->hp[t];
    p->src_off = g->desc[p->src_off].gray_off;
    b.w.place(b.h_axis[t], &p->wt_off, &p->first_off, &p->count_off);
    p->out_off = off;
    off = align_up(off + p->out_w * (p->row1 - p->row0));
  }
  for (int t = 0; t < g->nv; t++) {
    vpass *p = &g->vp[t];
    const img_desc *d = &g->desc[p->src_off];
    const int k = (int)p->src_row0;
    p->out_off = d->plane_off[k];
    p->src_off = d->gray_off;
    p->src_stride = d->w;
    p->src_row0 = 0;
    for (int u = 0; u < g->nh; u++)
      if (g->hp[u].src_off == d->gray_off && g->hp[u].out_w == d->tw[k]) {
        p->src_off = g->hp[u].out_off;
        p->src_stride = g->hp[u].out_w;
        p->src_row0 = g->hp[u].row0;
      }
    if (!p->copy) b.w.place(b.v_axis[t], &p->wt_off, &p->first_off, &p->count_off);
  }
  return g->total_bytes = off;
}

/* What the kernels read of the spec. */
void fill_meta(const accel__hash_spec *spec, group_plan *g) {
  group_meta *m = &g->meta;
  m->nimg = (int32_t)g->nimg;
  m->nh = g->nh;
  m->nv = g->nv;
  m->nkinds = spec->nkinds;
  m->hash_size = spec->hash_size;
  m->whash_keep_ll = spec->whash_keep_ll ? 1 : 0;
  m->whash_db4 = spec->whash_db4 ? 1 : 0;
  m->slot_bytes = (int32_t)spec->slot_bytes;
  m->need_color = spec->need_color;
  for (int k = 0; k < spec->nkinds; k++) m->kinds[k] = spec->kinds[k];
}

/* The host copy of the uploaded part, in pinned staging memory (grown as
 * needed): [meta | descs | passes | plan | weights | pixels]. */
accel_status stage_group(executor *x, const group_builder &b, const accel__dct_plan *plan, hbuf *staging, char *why) {
  const group_plan *g = b.g;
  const group_meta *m = &g->meta;
  const accel_status s = staging->reserve(x, (size_t)g->upload_bytes, why, "pinned staging memory");
  if (s) return s;
  uint8_t *to = staging->p;
  memcpy(to, m, sizeof *m);
  memcpy(to + m->descs_off, g->desc, g->nimg * sizeof(img_desc));
  memcpy(to + m->hpass_off, g->hp, g->nh * sizeof(hpass));
  memcpy(to + m->vpass_off, g->vp, g->nv * sizeof(vpass));
  if (plan) memcpy(to + m->plan_off, plan, sizeof *plan);
  for (int i = 0; i < b.w.n; i++) memcpy(to + b.w.e[i].off, b.w.e[i].data, (size_t)b.w.bytes(i));
  for (size_t i = 0; i < g->nimg; i++) {
    const accel__hash_image *im = &g->img[i];
    if (im->device) continue; /* converted on the device (device_pixels) */
    memcpy(to + g->desc[i].px_off, im->rgb ? im->rgb : im->gray, (size_t)(im->w * im->h * (im->rgb ? 3 : 1)));
  }
  return ACCEL_OK;
}

/* Plan the group of g->nimg images taken: its passes, arena layout and
 * metadata; then stage its upload. */
accel_status build_group(const accel__hash_spec *spec, group_plan *g, accel__axis_cache *cache,
                         const accel__dct_plan *plan, executor *x, hbuf *staging, char *why) {
  const size_t passes = g->nimg * (size_t)spec->nkinds;
  group_builder b(spec, cache, g);
  g->desc = (img_desc *)calloc(g->nimg, sizeof(img_desc));
  g->hp = (hpass *)calloc(passes, sizeof(hpass));
  g->vp = (vpass *)calloc(passes, sizeof(vpass));
  b.w.e = (weight_table::entry *)calloc(passes * 2, sizeof(weight_table::entry));
  b.h_axis = (int *)calloc(passes, sizeof(int));
  b.v_axis = (int *)calloc(passes, sizeof(int));
  bool ok = g->desc && g->hp && g->vp && b.w.e && b.h_axis && b.v_axis;
  for (size_t i = 0; i < g->nimg && ok; i++) {
    plan_targets(spec, &g->img[i], &g->desc[i]);
    ok = plan_passes(b, i);
  }
  if (!ok) {
    accel__why(why, "out of host memory staging %zu images", g->nimg);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  place_passes(b, place_device(spec, g, place_upload(b, plan != nullptr)));
  fill_meta(spec, g);
  return stage_group(x, b, plan, staging, why);
}

/* ------------------------------------------------------------ host side: the kernels of a group */

dim3 grid_for(int64_t w, int64_t h, int64_t z, dim3 block) {
  dim3 g = accel__grid2d(w, h, block);
  g.z = (unsigned)(z < 1 ? 1 : z);
  return g;
}

/* Gray conversion and colour classes of every image, then the resampling
 * passes: launched on the stream, or (emulation) the same per-thread bodies
 * in host loops, the colour histogram straight into the counts. */
accel_status run_planes(executor *x, uint8_t *arena, const group_plan *g, bool need_color, char *why) {
  const group_meta *m = (const group_meta *)(void *)arena;
  const dim3 b2(32, 8);
  int64_t maxw = 1, maxh = 1, hw = 1, hh = 1, vw = 1, vh = 1; /* the grids' extents */
  for (size_t i = 0; i < g->nimg; i++) {
    if (g->desc[i].w > maxw) maxw = g->desc[i].w;
    if (g->desc[i].h > maxh) maxh = g->desc[i].h;
  }
  for (int t = 0; t < g->nh; t++) {
    if (g->hp[t].out_w > hw) hw = g->hp[t].out_w;
    if (g->hp[t].row1 - g->hp[t].row0 > hh) hh = g->hp[t].row1 - g->hp[t].row0;
  }
  for (int t = 0; t < g->nv; t++) {
    if (g->vp[t].w > vw) vw = g->vp[t].w;
    if (g->vp[t].out_h > vh) vh = g->vp[t].out_h;
  }
  const dim3 img_grid = grid_for(maxw, maxh, (int64_t)g->nimg, b2);
  const auto gray = [&] {
    for (size_t i = 0; i < g->nimg; i++)
      if (g->desc[i].channels == 3)
        for (int64_t y = 0; y < g->desc[i].h; y++)
          for (int64_t xx = 0; xx < g->desc[i].w; xx++) gray_px(arena, &g->desc[i], xx, y);
  };
  const auto color = [&] {
    for (size_t i = 0; i < g->nimg; i++) {
      uint64_t *counts = at<uint64_t>(arena, g->desc[i].counts_off);
      for (int64_t p = 0; p < g->desc[i].w * g->desc[i].h; p++) counts[color_px(arena, &g->desc[i], p)]++;
    }
  };
  const auto horizontal = [&] {
    for (int t = 0; t < g->nh; t++)
      for (int64_t y = g->hp[t].row0; y < g->hp[t].row1; y++)
        for (int64_t xx = 0; xx < g->hp[t].out_w; xx++) hpass_px(arena, &g->hp[t], xx, y);
  };
  const auto vertical = [&] {
    for (int t = 0; t < g->nv; t++)
      for (int64_t y = 0; y < g->vp[t].out_h; y++)
        for (int64_t xx = 0; xx < g->vp[t].w; xx++) vpass_px(arena, &g->vp[t], xx, y);
  };
  accel_status s = accel__cuda_check(x->launch(gray, k_gray, img_grid, b2, 0, arena, m), why, "gray kernel launch");
  if (!s && need_color)
    s = accel__cuda_check(x->launch(color, k_color, img_grid, b2, 0, arena, m), why, "colour class kernel launch");
  if (!s && g->nh)
    s = accel__cuda_check(x->launch(horizontal, k_hpass, grid_for(hw, hh, g->nh, b2), b2, 0, arena, m), why,
                          "horizontal resampling kernel launch");
  if (!s && g->nv)
    s = accel__cuda_check(x->launch(vertical, k_vpass, grid_for(vw, vh, g->nv, b2), b2, 0, arena, m), why,
                          "vertical resampling kernel launch");
  return s;
}

/* whash db4's levels of a group (whash is kind k): per level, a column
 * pass and then a row pass over every image's lines (images with fewer
 * levels or shorter lines leave their threads idle). */
accel_status run_db4(executor *x, uint8_t *arena, const group_plan *g, int k, int n, char *why) {
  const group_meta *m = (const group_meta *)(void *)arena;
  int64_t lines = 1;
  int levels = 0;
  for (size_t i = 0; i < g->nimg; i++) {
    const accel__whash_geom geo = accel__whash_geometry(g->desc[i].tw[k], n);
    const int64_t M = whash_side_room(geo.N, n, true);
    lines = M > lines ? M : lines;
    levels = geo.m > levels ? geo.m : levels;
  }
  const int64_t total = (int64_t)g->nimg * lines;
  accel_status s = ACCEL_OK;
  for (int level = 0; level < levels && !s; level++)
    for (int axis = 0; axis < 2 && !s; axis++) {
      const auto host = [&] {
        for (int64_t i = 0; i < total; i++) db4_line(arena, m, (int)(i / lines), level, axis, i % lines);
      };
      s = accel__cuda_check(
          x->launch(host, k_db4, dim3((unsigned)((total + 127) / 128)), dim3(128), 0, arena, m, level, axis, lines),
          why, "whash db4 kernel launch");
    }
  return s;
}

/* The hashes of every (image, kind) from the planes: ahash and dhash, then
 * phash and whash per kind, launched or emulated as run_planes does. */
accel_status run_hashes(executor *x, uint8_t *arena, const group_plan *g, const accel__hash_spec *spec, char *why) {
  const int n = spec->hash_size;
  const int64_t simple = (int64_t)g->nimg * spec->nkinds, blocks = (int64_t)g->nimg * n * n;
  const unsigned img_blocks = (unsigned)((g->nimg + 63) / 64);
  const group_meta *m = (const group_meta *)(void *)arena;
  const auto simple_host = [&] {
    for (int64_t i = 0; i < simple; i++) simple_one(arena, m, i);
  };
  accel_status s = accel__cuda_check(
      x->launch(simple_host, k_simple, dim3((unsigned)((simple + 127) / 128)), dim3(128), 0, arena, m), why,
      "ahash and dhash kernel launch");
  for (int k = 0; k < spec->nkinds && !s; k++) {
    const auto phash_host = [&] {
      for (size_t i = 0; i < g->nimg; i++) phash_one(arena, m, (int)i, k);
    };
    if (spec->kinds[k] == ACCEL_HASH_PHASH)
      s = accel__cuda_check(x->launch(phash_host, k_phash, dim3(img_blocks), dim3(64), 0, arena, m, k), why,
                            "phash kernel launch");
    for (int stage = 0; stage < 2 && !s && spec->kinds[k] == ACCEL_HASH_WHASH; stage++) {
      const auto blocks_host = [&] {
        for (int64_t i = 0; i < blocks; i++) whash_block(arena, m, i, stage);
      };
      const auto image_host = [&] {
        for (size_t i = 0; i < g->nimg; i++) whash_image(arena, m, (int)i, stage);
      };
      s = accel__cuda_check(
          x->launch(blocks_host, k_whash_blocks, dim3((unsigned)((blocks + 63) / 64)), dim3(64), 0, arena, m, stage),
          why, "whash block kernel launch");
      if (!s && stage == 1 && spec->whash_db4) s = run_db4(x, arena, g, k, n, why);
      if (!s)
        s = accel__cuda_check(x->launch(image_host, k_whash_image, dim3(img_blocks), dim3(64), 0, arena, m, stage), why,
                              "whash kernel launch");
    }
  }
  return s;
}

/* colorhash bits from the downloaded class counts (same code as the CPU). */
void colorhash_from_counts(const accel__hash_spec *spec, const uint64_t *c, uint8_t *slots) {
  accel__color_counts cc;
  memset(&cc, 0, sizeof cc);
  cc.black = c[0];
  cc.gray = c[1];
  cc.colors = c[2];
  for (int b = 0; b < 6; b++) {
    cc.faint[b] = c[3 + b];
    cc.bright[b] = c[9 + b];
    cc.colors += c[3 + b] + c[9 + b];
  }
  cc.pixels = cc.black + cc.gray + cc.colors;
  for (int k = 0; k < spec->nkinds; k++)
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH)
      accel__colorhash(&cc, spec->binbits, slots + (size_t)k * spec->slot_bytes);
}

/* ------------------------------------------------------------ host side: the batch */

/* The decoded inputs waiting for a group: decoded `batch` at a time on the
 * CPU threads, in input order (the loader records those that fail to decode
 * and they are left out), and the progress reports. Decoding goes on until
 * the pending images fill a group of GROUP_TARGET device bytes (or MAX_PENDING
 * images, or the inputs end), so that small images make large groups whose
 * work outweighs the launches of a group, and large ones come a batch at a
 * time (the host holds no more of them than that). */
constexpr int64_t GROUP_TARGET = (int64_t)64 << 20;
constexpr size_t MAX_PENDING = 1024;

struct decoder {
  accel__call *call;
  accel__hash_job *job;
  size_t batch = 0, npending = 0, next = 0; /* next: the first input not decoded yet */
  accel__hash_image *pending = nullptr;
  size_t *index = nullptr; /* the job's input index of each */
  decoder(accel__call *c, accel__hash_job *j) : call(c), job(j) {}
  ~decoder() {
    for (size_t i = 0; i < npending; i++) accel__hash_image_free(&pending[i]);
    free(pending);
    free(index);
  }
  size_t capacity = 0; /* of pending and index */
  bool init() {
    batch = (size_t)(call->threads * 2 > 8 ? call->threads * 2 : 8);
    capacity = batch > MAX_PENDING ? batch : MAX_PENDING;
    pending = (accel__hash_image *)calloc(capacity, sizeof(accel__hash_image));
    index = (size_t *)calloc(capacity, sizeof(size_t));
    return pending && index;
  }
  /* Device bytes of the pending images' group. */
  int64_t pending_bytes() const {
    int64_t need = 0;
    for (size_t i = 0; i < npending; i++)
      need += image_bytes(&job->spec, pending[i].w, pending[i].h, as_rgb(&pending[i]));
    return need;
  }
  /* The next inputs into pending (empty): batches of them until a group's
   * worth is decoded. */
  accel_status decode_next() {
    accel_status s = ACCEL_OK;
    do s = decode_batch();
    while (!s && next < job->n && npending + batch <= capacity && pending_bytes() < GROUP_TARGET);
    return s;
  }
  /* The next inputs (at most batch) appended to pending (room for batch more). */
  accel_status decode_batch() {
    const size_t from = next, to = job->n - next < batch ? job->n : next + batch;
    next = to;
    accel__hash_image *tmp = (accel__hash_image *)calloc(to - from, sizeof(accel__hash_image));
    if (!tmp) {
      accel__why(call->why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    accel__hash_load_range(job, from, to, true, tmp, call->threads);
    for (size_t i = 0; i < to - from; i++) {
      char why[ACCEL_REASON_MAX];
      if (!tmp[i].gray && !tmp[i].rgb && !tmp[i].device) continue;         /* recorded by the loader */
      if (accel__whash_db4_refused(&job->spec, tmp[i].w, tmp[i].h, why)) { /* as the CPU refuses it */
        accel__hash_record(job, from + i, ACCEL_ERR_UNSUPPORTED, why);
        accel__hash_image_free(&tmp[i]);
        continue;
      }
      pending[npending] = tmp[i];
      index[npending++] = from + i;
    }
    free(tmp);
    return ACCEL_OK;
  }
  /* Progress on the calling thread; a nonzero answer cancels. */
  accel_status report() const {
    const size_t done = next - npending;
    if (job->progress && job->progress(job->progress_user, "hash.batch", (double)done / (double)job->n)) {
      accel__why(call->why, "cancelled by the progress callback after %zu of %zu inputs", done, job->n);
      return ACCEL_ERR_CANCELLED;
    }
    return ACCEL_OK;
  }
  /* How many pending images make the next group: those that fit in cap
   * device bytes together (at least the first). */
  size_t fitting(int64_t cap) const {
    size_t n = 0;
    int64_t need = 0;
    while (n < npending) {
      need += image_bytes(&job->spec, pending[n].w, pending[n].h, as_rgb(&pending[n]));
      if (need > cap && n > 0) break;
      n++;
    }
    return n;
  }
  /* The first n pending images into g (empty). */
  accel_status take(size_t n, group_plan *g) {
    g->nimg = n;
    g->img = (accel__hash_image *)malloc(n * sizeof(accel__hash_image));
    g->index = (size_t *)malloc(n * sizeof(size_t));
    if (!g->img || !g->index) {
      g->nimg = 0;
      accel__why(call->why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    memcpy(g->img, pending, n * sizeof(accel__hash_image));
    memcpy(g->index, index, n * sizeof(size_t));
    memmove(pending, pending + n, (npending - n) * sizeof(accel__hash_image));
    memmove(index, index + n, (npending - n) * sizeof(size_t));
    npending -= n;
    return ACCEL_OK;
  }
};

/* What the groups of a batch share: phash's DCT plan,
 * the axis cache, the largest group the budget leaves room for, the device
 * arena (grown as groups need) and the pinned staging and result memory. */
struct batch_state {
  executor *x;
  accel__call *call;
  accel__hash_job *job;
  accel__axis_cache cache = {};
  accel__dct_plan *plan = nullptr; /* with phash */
  int64_t group_cap = 0;
  dbuf arena;
  hbuf staging, results;
  batch_state(executor *ex, accel__call *c, accel__hash_job *j) : x(ex), call(c), job(j) {}
  ~batch_state() {
    free(plan);
    accel__axis_cache_free(&cache);
  }
  /* False: out of host memory, or (*unsupported) no DCT plan for phash's length. */
  bool init(bool *unsupported) {
    const int N = job->spec.hash_size * job->spec.highfreq;
    bool has_phash = false;
    for (int k = 0; k < job->spec.nkinds; k++) has_phash = has_phash || job->spec.kinds[k] == ACCEL_HASH_PHASH;
    plan = has_phash ? (accel__dct_plan *)malloc(sizeof *plan) : nullptr;
    *unsupported = plan && !accel__dct_plan_init(plan, N);
    /* groups of images up to 2 GiB (one image alone may need more), within
     * what the context's budget leaves */
    const uint64_t room = x->room();
    const int64_t slack = (int64_t)1 << 20; /* meta, plan, tables: a bound on what the estimate leaves out */
    group_cap = (int64_t)(room < ((uint64_t)2 << 30) ? room : ((uint64_t)2 << 30)) - slack;
    return !(has_phash && !plan) && !*unsupported;
  }
  size_t slots_bytes() const { return (size_t)job->spec.nkinds * job->spec.slot_bytes; }
  size_t result_bytes() const { return (size_t)result_stride(&job->spec); } /* an image's slots and counts */
};

/* An arena for g: the one there when large enough, else a new one with a
 * quarter more room (as far as the budget goes). */
accel_status grow_arena(batch_state &b, const group_plan &g) {
  if ((size_t)g.total_bytes <= b.arena.n) return ACCEL_OK;
  b.arena.reset();
  const uint64_t want = (uint64_t)g.total_bytes + (uint64_t)g.total_bytes / 4, left = b.x->room();
  const size_t size = (size_t)(want < left ? want : (uint64_t)g.total_bytes);
  const accel_status s = b.arena.get(b.x, size, b.call->why);
  if (s == ACCEL_ERR_DEVICE_MEMORY && g.nimg == 1)
    accel__why(b.call->why, "a %lldx%lld image needs %.1f MiB of device memory, more than the budget leaves",
               (long long)g.img[0].w, (long long)g.img[0].h, g.total_bytes / 1048576.0);
  return s;
}

/* A device array's pixels (L, LA, RGB or RGBA) as the group holds them:
 * gray (L; LA's L) or RGB (RGBA's alpha dropped), as the CPU converts an
 * array (accel__row_to_gray, accel__row_to_rgb). */
struct device_px {
  const uint8_t *src;
  uint8_t *dst;
  int32_t in_ch, out_ch;
  __host__ __device__ void operator()(uint64_t i) const {
    for (int32_t k = 0; k < out_ch; k++) dst[i * out_ch + k] = src[i * in_ch + k];
  }
};

/* The group's device-array images into their place in the arena: queued
 * on the stream after the upload. */
accel_status device_pixels(batch_state &b, const group_plan &g) {
  accel_status s = ACCEL_OK;
  for (size_t i = 0; i < g.nimg && !s; i++) {
    const accel__hash_image *im = &g.img[i];
    if (!im->device) continue;
    const device_px f = {im->device, b.arena.p + g.desc[i].px_off, im->channels, g.desc[i].channels};
    s = each(b.x, (uint64_t)(im->w * im->h), f, b.call->why, "convert a device image");
  }
  return s;
}

/* One upload of the staged group, its device-array images put in place,
 * and its hash slots (their padding too) and colour counts zeroed (one
 * block): queued on the stream. */
accel_status upload_group(batch_state &b, const group_plan &g) {
  char *why = b.call->why;
  accel_status s = upload(b.x, b.arena.p, b.staging.p, (size_t)g.upload_bytes, why);
  if (!s) s = device_pixels(b, g);
  if (!s && g.nimg)
    s = accel__cuda_check(b.x->zero(b.arena.p + g.desc[0].slots_off, g.nimg * b.result_bytes()), why, "memset");
  return s;
}

/* Every image's hash slots and colour counts into the pinned results, in
 * one copy: queued on the stream. */
accel_status download_group(batch_state &b, const group_plan &g) {
  if (!g.nimg) return ACCEL_OK;
  return accel__cuda_check(b.x->download(b.results.p, b.arena.p + g.desc[0].slots_off, g.nimg * b.result_bytes()),
                           b.call->why, "download");
}

/* The downloaded results of a finished group into the job. */
void store_group(batch_state &b, const group_plan &g) {
  const accel__hash_spec *spec = &b.job->spec;
  const size_t slots_bytes = b.slots_bytes(), per_img = b.result_bytes();
  for (size_t i = 0; i < g.nimg; i++) {
    const uint8_t *r = b.results.p + i * per_img;
    uint8_t *slots = accel__hash_slots(b.job, g.index[i]);
    memcpy(slots, r, slots_bytes);
    if (spec->need_color) colorhash_from_counts(spec, (const uint64_t *)(const void *)(r + slots_span(spec)), slots);
    accel__hash_record(b.job, g.index[i], ACCEL_OK, "");
  }
}

/* One group through the device: planned and staged, uploaded, hashed and
 * downloaded (all queued on the stream; the next inputs are decoded
 * meanwhile), then stored into the job. */
accel_status run_group(batch_state &b, decoder &dec, group_plan &g) {
  const accel__hash_spec *spec = &b.job->spec;
  char *why = b.call->why;
  accel_status s = build_group(spec, &g, &b.cache, b.plan, b.x, &b.staging, b.call->why);
  if (!s) s = grow_arena(b, g);
  if (!s) s = b.results.reserve(b.x, g.nimg * b.result_bytes(), why, "pinned result memory");
  if (!s) s = upload_group(b, g);
  if (!s) s = run_planes(b.x, b.arena.p, &g, spec->need_color, why);
  if (!s) s = run_hashes(b.x, b.arena.p, &g, spec, why);
  if (!s) s = download_group(b, g);
  if (!s && dec.npending == 0 && dec.next < b.job->n) s = dec.decode_next(); /* while the GPU works */
  if (!s) s = accel__cuda_check(b.x->sync(), why, "hash kernels");
  if (!s) store_group(b, g);
  return s;
}

accel_status run_pipeline(executor *x, accel__call *call, accel__hash_job *job) {
  batch_state b(x, call, job);
  decoder dec(call, job);
  accel_status s = ACCEL_OK;
  bool unsupported = false;
  if (!b.init(&unsupported) || !dec.init()) {
    s = unsupported ? ACCEL_ERR_UNSUPPORTED : ACCEL_ERR_OUT_OF_MEMORY;
    if (unsupported)
      accel__why(call->why, "phash: no DCT of length %d (hash_size * highfreq_factor) as scipy computes it",
                 job->spec.hash_size * job->spec.highfreq);
    else accel__why(call->why, "out of host memory");
  }
  if (!s && job->on_device) /* the caller's work that writes the device images comes first */
    s = accel__cuda_check(x->device_sync(), call->why, "cudaDeviceSynchronize");
  group_plan g;
  while (!s) {
    if (dec.npending == 0) { /* nothing decoded waits: decode the next inputs (no GPU work to overlap) */
      if (dec.next >= job->n) break;
      s = dec.decode_next();
      if (s) break;
      if (dec.npending == 0) { /* every one of them failed to decode */
        s = dec.report();
        continue;
      }
    }
    s = dec.take(dec.fitting(b.group_cap), &g);
    if (!s) s = run_group(b, dec, g);
    if (s) break;
    plan_free(&g);
    s = dec.report();
  }
  x->drain(); /* a failed group may still have work queued on what is freed next */
  plan_free(&g);
  return s;
}

} // namespace

static accel_status cuda_hash_batch(accel__call *call, accel__hash_job *job) {
  return with_device(call, [&](executor *x) { return run_pipeline(x, call, job); });
}

extern "C" const accel__hash_ops accel__cuda_hash_ops = {
    /* .batch = */ cuda_hash_batch,
};
