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
 *   per image), whash (pywt's Haar steps, one thread per block of the plane);
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
  int64_t px_off;   /* uploaded pixels: RGB (3 bytes) or gray (1 byte) */
  int32_t channels;
  int64_t gray_off; /* gray plane (== px_off for gray images) */
  int64_t plane_off[MAX_K], tw[MAX_K], th[MAX_K];
  int64_t slots_off;   /* nkinds * slot_bytes of hash bits */
  int64_t counts_off;  /* NCOUNTS uint64 colour class counts, or -1 */
  int64_t phash_off;   /* phash scratch (doubles), or -1 */
  int64_t whash_off;   /* whash scratch: 2 * N * N doubles of blocks, then 4 * n * n */
  int32_t whash_k;     /* the kind index of whash, or -1 */
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
  int32_t nimg, nh, nv, nkinds, hash_size, slot_bytes, need_color;
  int32_t kinds[MAX_K];
  int64_t descs_off, hpass_off, vpass_off, plan_off, cosk_off;
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
  const accel__dct_plan *plan = m->plan_off >= 0 ? at<accel__dct_plan>(arena, m->plan_off) : nullptr;
  const double *cosk = m->cosk_off >= 0 ? at<double>(arena, m->cosk_off) : nullptr;
  accel__phash(arena + d->plane_off[k], m->hash_size, plan, cosk, at<double>(arena, d->phash_off),
               arena + d->slots_off + (int64_t)k * m->slot_bytes);
}

/* whash stages 1 and 3: block number i of the group (image i / n^2). */
__host__ __device__ inline void whash_block(uint8_t *arena, const group_meta *m, int64_t i, int final_stage) {
  const int n = m->hash_size;
  const int img = (int)(i / (n * n)), b = (int)(i % (n * n)), bi = b / n, bj = b % n;
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  const int k = d->whash_k;
  const accel__whash_geom g = accel__whash_geometry(d->tw[k], n);
  double *scratch = at<double>(arena, d->whash_off);
  double *blk = scratch + (int64_t)b * 2 * g.B * g.B, *tmp = blk + g.B * g.B;
  double *pyr = scratch + 2 * g.N * g.N, *low = pyr + 2 * n * n;
  const uint8_t *px = arena + d->plane_off[k];
  if (!final_stage) {
    accel__whash_block_analyze(px, &g, bi, bj, blk, tmp);
    pyr[b] = blk[0];
  } else {
    low[b] = accel__whash_block_final(px, &g, bi, bj, pyr[b], blk, tmp);
  }
}

/* whash stages 2 (the top of the pyramid) and 4 (bits) of an image. */
__host__ __device__ inline void whash_image(uint8_t *arena, const group_meta *m, int img, int bits_stage) {
  const int n = m->hash_size;
  const img_desc *d = at<img_desc>(arena, m->descs_off) + img;
  const int k = d->whash_k;
  const accel__whash_geom g = accel__whash_geometry(d->tw[k], n);
  double *pyr = at<double>(arena, d->whash_off) + 2 * g.N * g.N, *ptmp = pyr + n * n, *low = ptmp + n * n,
         *sorted = low + n * n;
  if (!bits_stage) accel__whash_top(pyr, n, g.ln, ptmp);
  else accel__whash_bits(low, n, sorted, arena + d->slots_off + (int64_t)k * m->slot_bytes);
}

#define GRID_Y(v, end) \
  for (int64_t v = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; v < (end); v += (int64_t)gridDim.y * blockDim.y)
#define GRID_X(v, end) \
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

__global__ void k_whash_image(uint8_t *arena, const group_meta *m, int bits_stage) {
  const int img = blockIdx.x * blockDim.x + threadIdx.x;
  if (img < m->nimg) whash_image(arena, m, img, bits_stage);
}

/* ------------------------------------------------------------ host side */

int64_t align_up(int64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

/* Arena layout of one group, built on the host. */
struct group_plan {
  size_t nimg = 0;
  size_t *index = nullptr;       /* the job's input index of each image */
  accel__hash_image *img = nullptr;
  img_desc *desc = nullptr;
  hpass *hp = nullptr;
  vpass *vp = nullptr;
  int nh = 0, nv = 0;
  group_meta meta;
  int64_t meta_bytes = 0;        /* meta + descs + passes + plan + cosk + weights: uploaded first */
  int64_t upload_bytes = 0;      /* ... + pixels */
  int64_t total_bytes = 0;       /* ... + everything computed on the device */
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

/* Device bytes one decoded image needs (to decide group sizes). */
int64_t image_bytes(const accel__hash_spec *spec, int64_t w, int64_t h, bool rgb) {
  int64_t b = align_up(w * h * (rgb ? 3 : 1)) + (rgb ? align_up(w * h) : 0) + 4096;
  for (int k = 0; k < spec->nkinds; k++) {
    int64_t tw, th;
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
    accel__hash_target(spec->kinds[k], spec->hash_size, w, h, &tw, &th);
    b += align_up(tw * th) + align_up(tw * h) + align_up((tw + th) * 8 * (6 * (w / tw + h / th) + 16));
    if (spec->kinds[k] == ACCEL_HASH_WHASH) b += align_up((2 * tw * tw + 4 * spec->hash_size * spec->hash_size) * 8);
    if (spec->kinds[k] == ACCEL_HASH_PHASH) b += align_up(accel__phash_scratch(spec->hash_size) * 8);
  }
  return b;
}

}  // namespace

/* Build the arena layout and the host staging copy of one group. The
 * staging buffer (pinned, grown as needed) receives [meta | descs | passes |
 * plan | cosk | weights | pixels]. */
typedef accel__executor executor;

static accel_status build_group(const accel__hash_job *job, group_plan *g, accel__axis_cache *cache,
                                const accel__dct_plan *plan, const double *cosk, executor *x, uint8_t **staging,
                                size_t *staging_cap, char *why) {
  const accel__hash_spec *spec = &job->spec;
  const int n = spec->hash_size, K = spec->nkinds;
  g->desc = (img_desc *)calloc(g->nimg, sizeof(img_desc));
  g->hp = (hpass *)calloc(g->nimg * K, sizeof(hpass));
  g->vp = (vpass *)calloc(g->nimg * K, sizeof(vpass));
  accel_status pinned = ACCEL_OK;
  if (!g->desc || !g->hp || !g->vp) {
    accel__why(why, "out of host memory staging %zu images", g->nimg);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  /* the weights of every pass, copied out of the axis cache at once (the
   * cache recycles its entries) as [weights | first | count] int32 */
  struct wref {
    int64_t in_size, out_size, off;
    int32_t ksize;
    int32_t *data;
  };
  wref *wr = (wref *)calloc(g->nimg * K * 2, sizeof(wref));
  int nw = 0;
  if (!wr) {
    accel__why(why, "out of host memory staging %zu images", g->nimg);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  auto weights_of = [&](const accel__axis *a) -> int64_t { /* index into wr, deduplicated per group; -1: no memory */
    for (int i = 0; i < nw; i++)
      if (wr[i].in_size == a->in_size && wr[i].out_size == a->out_size) return i;
    int32_t *d = (int32_t *)malloc((size_t)(a->out_size * (a->ksize + 2)) * 4);
    if (!d) return -1;
    memcpy(d, a->weight, (size_t)(a->out_size * a->ksize) * 4);
    memcpy(d + a->out_size * a->ksize, a->first, (size_t)a->out_size * 4);
    memcpy(d + a->out_size * (a->ksize + 1), a->count, (size_t)a->out_size * 4);
    wr[nw] = wref{a->in_size, a->out_size, 0, a->ksize, d};
    return nw++;
  };
  /* passes and per-image geometry; arena offsets are assigned afterwards */
  int *h_axis = (int *)calloc(g->nimg * K, sizeof(int)), *v_axis = (int *)calloc(g->nimg * K, sizeof(int));
  if (!h_axis || !v_axis) {
    free(wr); /* nothing copied yet */
    free(h_axis);
    free(v_axis);
    accel__why(why, "out of host memory staging %zu images", g->nimg);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  bool ok = true;
  for (size_t i = 0; i < g->nimg && ok; i++) {
    img_desc *d = &g->desc[i];
    const accel__hash_image *im = &g->img[i];
    d->w = im->w;
    d->h = im->h;
    d->channels = im->rgb ? 3 : 1;
    d->counts_off = d->phash_off = d->whash_off = -1;
    d->whash_k = -1;
    for (int k = 0; k < K; k++) {
      if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
      accel__hash_target(spec->kinds[k], n, d->w, d->h, &d->tw[k], &d->th[k]);
      if (spec->kinds[k] == ACCEL_HASH_WHASH) d->whash_k = k;
    }
    /* one horizontal pass per distinct width over the rows its targets read */
    for (int k = 0; k < K && ok; k++) {
      if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
      bool seen = false;
      for (int j = 0; j < k; j++) seen = seen || (spec->kinds[j] != ACCEL_HASH_COLORHASH && d->tw[j] == d->tw[k]);
      int64_t y0 = d->h, y1 = 0;
      for (int j = 0; j < K; j++) {
        if (spec->kinds[j] == ACCEL_HASH_COLORHASH || d->tw[j] != d->tw[k]) continue;
        if (d->th[j] == d->h) {
          y0 = 0;
          y1 = d->h;
        } else {
          const accel__axis *ay = accel__axis_cached(cache, d->h, d->th[j]);
          if (!ay) {
            ok = false;
            break;
          }
          int64_t a, b;
          accel__axis_span(ay, &a, &b);
          if (a < y0) y0 = a;
          if (b > y1) y1 = b;
        }
      }
      if (!ok || seen || d->tw[k] == d->w) continue;
      const accel__axis *ax = accel__axis_cached(cache, d->w, d->tw[k]);
      if (!ax) {
        ok = false;
        break;
      }
      hpass *p = &g->hp[g->nh];
      p->w = d->w;
      p->row0 = y0;
      p->row1 = y1;
      p->out_w = d->tw[k];
      p->ksize = ax->ksize;
      if ((h_axis[g->nh] = (int)weights_of(ax)) < 0) {
        ok = false;
        break;
      }
      p->src_off = (int64_t)i; /* resolved below: image index */
      g->nh++;
    }
    for (int k = 0; k < K && ok; k++) {
      if (spec->kinds[k] == ACCEL_HASH_COLORHASH) continue;
      vpass *p = &g->vp[g->nv];
      p->w = d->tw[k];
      p->out_h = d->th[k];
      p->copy = d->th[k] == d->h;
      p->src_off = (int64_t)i;   /* resolved below */
      p->src_row0 = k;           /* temporarily: the kind, resolved below */
      if (!p->copy) {
        const accel__axis *ay = accel__axis_cached(cache, d->h, d->th[k]);
        if (!ay) {
          ok = false;
          break;
        }
        p->ksize = ay->ksize;
        if ((v_axis[g->nv] = (int)weights_of(ay)) < 0) {
          ok = false;
          break;
        }
      }
      g->nv++;
    }
  }
  /* uploaded part: meta, descs, passes, plan, cosk, weights, pixels */
  int64_t off = align_up(sizeof(group_meta));
  g->meta.descs_off = off;
  off = align_up(off + (int64_t)(g->nimg * sizeof(img_desc)));
  g->meta.hpass_off = off;
  off = align_up(off + (int64_t)(g->nh * sizeof(hpass)));
  g->meta.vpass_off = off;
  off = align_up(off + (int64_t)(g->nv * sizeof(vpass)));
  g->meta.plan_off = plan ? off : -1;
  if (plan) off = align_up(off + (int64_t)sizeof(accel__dct_plan));
  g->meta.cosk_off = cosk ? off : -1;
  if (cosk) off = align_up(off + (int64_t)(4 * n * n) * 8);
  for (int i = 0; i < nw; i++) {
    wr[i].off = off;
    off = align_up(off + wr[i].out_size * (int64_t)(wr[i].ksize + 2) * 4);
  }
  for (size_t i = 0; i < g->nimg; i++) {
    g->desc[i].px_off = off;
    off = align_up(off + g->desc[i].w * g->desc[i].h * g->desc[i].channels);
  }
  g->upload_bytes = off;
  /* device-only part */
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
    d->slots_off = off;
    off = align_up(off + K * (int64_t)spec->slot_bytes);
    if (spec->need_color) {
      d->counts_off = off;
      off = align_up(off + NCOUNTS * 8);
    }
    for (int k = 0; k < K; k++) {
      if (spec->kinds[k] == ACCEL_HASH_PHASH) {
        d->phash_off = off;
        off = align_up(off + accel__phash_scratch(n) * 8);
      }
      if (spec->kinds[k] == ACCEL_HASH_WHASH) {
        d->whash_off = off;
        off = align_up(off + (2 * d->tw[k] * d->tw[k] + 4 * (int64_t)n * n) * 8);
      }
    }
  }
  /* horizontal pass outputs, and the passes' arena offsets */
  for (int t = 0; t < g->nh; t++) {
    hpass *p = &g->hp[t];
    const img_desc *d = &g->desc[p->src_off];
    const wref *w = &wr[h_axis[t]];
    p->src_off = d->gray_off;
    p->wt_off = w->off;
    p->first_off = w->off + w->out_size * (int64_t)w->ksize * 4;
    p->count_off = p->first_off + w->out_size * 4;
    p->out_off = off;
    off = align_up(off + p->out_w * (p->row1 - p->row0));
  }
  for (int t = 0; t < g->nv; t++) {
    vpass *p = &g->vp[t];
    const size_t i = (size_t)p->src_off;
    const int k = (int)p->src_row0;
    const img_desc *d = &g->desc[i];
    p->out_off = d->plane_off[k];
    /* the source: this width's horizontal pass of this image, or the gray plane */
    p->src_off = d->gray_off;
    p->src_stride = d->w;
    p->src_row0 = 0;
    for (int u = 0; u < g->nh; u++)
      if (g->hp[u].src_off == d->gray_off && g->hp[u].out_w == d->tw[k]) {
        p->src_off = g->hp[u].out_off;
        p->src_stride = g->hp[u].out_w;
        p->src_row0 = g->hp[u].row0;
      }
    if (!p->copy) {
      const wref *w = &wr[v_axis[t]];
      p->wt_off = w->off;
      p->first_off = w->off + w->out_size * (int64_t)w->ksize * 4;
      p->count_off = p->first_off + w->out_size * 4;
    }
  }
  g->total_bytes = off;
  /* the staging copy */
  group_meta *m = &g->meta;
  m->nimg = (int32_t)g->nimg;
  m->nh = g->nh;
  m->nv = g->nv;
  m->nkinds = K;
  m->hash_size = n;
  m->slot_bytes = (int32_t)spec->slot_bytes;
  m->need_color = spec->need_color;
  for (int k = 0; k < K; k++) m->kinds[k] = spec->kinds[k];
  if (ok && (size_t)g->upload_bytes > *staging_cap) {
    x->host_free(*staging);
    *staging = nullptr;
    *staging_cap = 0;
    if ((pinned = accel__cuda_check(x->host_alloc((size_t)g->upload_bytes, staging), why, "pinned staging memory")))
      ok = false;
    else
      *staging_cap = (size_t)g->upload_bytes;
  }
  if (ok) {
    uint8_t *s = *staging;
    memcpy(s, m, sizeof *m);
    memcpy(s + m->descs_off, g->desc, g->nimg * sizeof(img_desc));
    memcpy(s + m->hpass_off, g->hp, g->nh * sizeof(hpass));
    memcpy(s + m->vpass_off, g->vp, g->nv * sizeof(vpass));
    if (plan) memcpy(s + m->plan_off, plan, sizeof *plan);
    if (cosk) memcpy(s + m->cosk_off, cosk, (size_t)(4 * n * n) * 8);
    for (int i = 0; i < nw; i++)
      memcpy(s + wr[i].off, wr[i].data, (size_t)(wr[i].out_size * (wr[i].ksize + 2)) * 4);
    for (size_t i = 0; i < g->nimg; i++) {
      const accel__hash_image *im = &g->img[i];
      memcpy(s + g->desc[i].px_off, im->rgb ? im->rgb : im->gray, (size_t)(im->w * im->h * (im->rgb ? 3 : 1)));
    }
  }
  for (int i = 0; i < nw; i++) free(wr[i].data);
  free(wr);
  free(h_axis);
  free(v_axis);
  if (pinned) return pinned;
  if (!ok) {
    accel__why(why, "out of host memory staging %zu images", g->nimg);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return ACCEL_OK;
}

static dim3 grid_for(int64_t w, int64_t h, int64_t z, dim3 block) {
  dim3 g = accel__grid2d(w, h, block);
  g.z = (unsigned)(z < 1 ? 1 : z);
  return g;
}

namespace {

/* Every kernel of a group, in order: launched on the stream, each launch
 * checked, or run as loops on the host with the same bodies (the colour
 * histogram straight into the counts). */
accel_status run_kernels(executor *x, uint8_t *arena, const group_plan *g, const accel__hash_spec *spec, char *why) {
  const int n = spec->hash_size;
  const int64_t simple = (int64_t)g->nimg * spec->nkinds, blocks = (int64_t)g->nimg * n * n;
  const group_meta *m = (const group_meta *)(void *)arena;
  if (!x->st) return accel__cuda_check(x->emulate([&] {
    for (size_t i = 0; i < g->nimg; i++) {
      const img_desc *d = &g->desc[i];
      if (d->channels == 3)
        for (int64_t y = 0; y < d->h; y++)
          for (int64_t xx = 0; xx < d->w; xx++) gray_px(arena, d, xx, y);
      if (spec->need_color) {
        uint64_t *counts = at<uint64_t>(arena, d->counts_off);
        for (int64_t p = 0; p < d->w * d->h; p++) counts[color_px(arena, d, p)]++;
      }
    }
    for (int t = 0; t < g->nh; t++)
      for (int64_t y = g->hp[t].row0; y < g->hp[t].row1; y++)
        for (int64_t xx = 0; xx < g->hp[t].out_w; xx++) hpass_px(arena, &g->hp[t], xx, y);
    for (int t = 0; t < g->nv; t++)
      for (int64_t y = 0; y < g->vp[t].out_h; y++)
        for (int64_t xx = 0; xx < g->vp[t].w; xx++) vpass_px(arena, &g->vp[t], xx, y);
    for (int64_t i = 0; i < simple; i++) simple_one(arena, m, i);
    for (int k = 0; k < spec->nkinds; k++) {
      if (spec->kinds[k] == ACCEL_HASH_PHASH)
        for (size_t i = 0; i < g->nimg; i++) phash_one(arena, m, (int)i, k);
      if (spec->kinds[k] == ACCEL_HASH_WHASH)
        for (int stage = 0; stage < 2; stage++) {
          for (int64_t i = 0; i < blocks; i++) whash_block(arena, m, i, stage);
          for (size_t i = 0; i < g->nimg; i++) whash_image(arena, m, (int)i, stage);
        }
    }
  }), why, "hash kernels");
  cudaStream_t stream = x->st->stream;
  const dim3 b2(32, 8);
  int64_t maxw = 1, maxh = 1, hw = 1, hh = 1, vw = 1, vh = 1;
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
  accel_status s =
      accel__cuda_check(accel__cuda_launch(k_gray, img_grid, b2, 0, stream, arena, m), why, "gray kernel launch");
  if (!s && spec->need_color)
    s = accel__cuda_check(accel__cuda_launch(k_color, img_grid, b2, 0, stream, arena, m), why,
                          "colour class kernel launch");
  if (!s && g->nh)
    s = accel__cuda_check(accel__cuda_launch(k_hpass, grid_for(hw, hh, g->nh, b2), b2, 0, stream, arena, m), why,
                          "horizontal resampling kernel launch");
  if (!s && g->nv)
    s = accel__cuda_check(accel__cuda_launch(k_vpass, grid_for(vw, vh, g->nv, b2), b2, 0, stream, arena, m), why,
                          "vertical resampling kernel launch");
  if (!s)
    s = accel__cuda_check(
        accel__cuda_launch(k_simple, dim3((unsigned)((simple + 127) / 128)), dim3(128), 0, stream, arena, m), why,
        "ahash and dhash kernel launch");
  for (int k = 0; k < spec->nkinds && !s; k++) {
    if (spec->kinds[k] == ACCEL_HASH_PHASH)
      s = accel__cuda_check(
          accel__cuda_launch(k_phash, dim3((unsigned)((g->nimg + 63) / 64)), dim3(64), 0, stream, arena, m, k), why,
          "phash kernel launch");
    if (spec->kinds[k] == ACCEL_HASH_WHASH)
      for (int stage = 0; stage < 2 && !s; stage++) {
        s = accel__cuda_check(accel__cuda_launch(k_whash_blocks, dim3((unsigned)((blocks + 63) / 64)), dim3(64), 0,
                                                 stream, arena, m, stage),
                              why, "whash block kernel launch");
        if (!s)
          s = accel__cuda_check(accel__cuda_launch(k_whash_image, dim3((unsigned)((g->nimg + 63) / 64)), dim3(64), 0,
                                                   stream, arena, m, stage),
                                why, "whash kernel launch");
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
    if (spec->kinds[k] == ACCEL_HASH_COLORHASH) accel__colorhash(&cc, spec->binbits, slots + (size_t)k * spec->slot_bytes);
}

accel_status run_pipeline(executor *x, accel__call *call, accel__hash_job *job) {
  const accel__hash_spec *spec = &job->spec;
  const int n = spec->hash_size;
  accel_status s = ACCEL_OK;
  accel__axis_cache cache = {};
  accel__dct_plan plan;
  bool has_phash = false;
  for (int k = 0; k < spec->nkinds; k++) has_phash = has_phash || spec->kinds[k] == ACCEL_HASH_PHASH;
  const bool exact_dct = has_phash && accel__dct_plan_init(&plan, 4 * n);
  double *cosk = has_phash && !exact_dct ? accel__phash_cos_table(n) : nullptr;
  /* the arena: groups of images up to 2 GiB (one image alone may need more),
   * within what the context's budget leaves; grown as groups need it */
  const uint64_t room = x->room();
  const int64_t slack = (int64_t)1 << 20; /* meta, plan, tables: a bound on what the estimate leaves out */
  const int64_t group_cap = (int64_t)(room < ((uint64_t)2 << 30) ? room : ((uint64_t)2 << 30)) - slack;
  uint8_t *arena = nullptr, *staging = nullptr, *results = nullptr;
  size_t arena_size = 0, staging_cap = 0, results_cap = 0;
  const int batch = call->threads * 2 > 8 ? call->threads * 2 : 8; /* inputs decoded per round */
  accel__hash_image *pending = (accel__hash_image *)calloc((size_t)batch, sizeof(accel__hash_image));
  size_t *pending_index = (size_t *)calloc((size_t)batch, sizeof(size_t));
  size_t npending = 0, next = 0;
  group_plan g;
  if ((has_phash && !exact_dct && !cosk) || !pending || !pending_index) {
    s = ACCEL_ERR_OUT_OF_MEMORY;
    accel__why(call->why, "out of host memory");
  }
  auto take = [&](size_t from, size_t to) { /* decode [from, to) into pending (empty on entry) */
    accel__hash_image *tmp = (accel__hash_image *)calloc(to - from, sizeof(accel__hash_image));
    if (!tmp) return false;
    accel__hash_load_range(job, from, to, true, tmp, call->threads);
    for (size_t i = 0; i < to - from; i++)
      if (tmp[i].gray || tmp[i].rgb) {
        pending[npending] = tmp[i];
        pending_index[npending++] = from + i;
      }
    free(tmp);
    return true;
  };
  auto decode_next = [&]() {
    const size_t to = job->n - next < (size_t)batch ? job->n : next + (size_t)batch;
    if (!take(next, to)) {
      s = ACCEL_ERR_OUT_OF_MEMORY;
      accel__why(call->why, "out of host memory");
    }
    next = to;
  };
  auto report = [&]() { /* progress on the calling thread; nonzero cancels */
    const size_t done = next - npending;
    if (job->progress && job->progress(job->progress_user, "hash.batch", (double)done / (double)job->n)) {
      s = ACCEL_ERR_CANCELLED;
      accel__why(call->why, "cancelled by the progress callback after %zu of %zu inputs", done, job->n);
    }
  };
  while (!s) {
    if (npending == 0) { /* nothing decoded waits: decode the next inputs (no GPU work to overlap) */
      if (next >= job->n) break;
      decode_next();
      if (s) break;
      if (npending == 0) { /* every one of them failed to decode */
        report();
        continue;
      }
    }
    /* a group: the pending images that fit (at least the first) */
    size_t take_n = 0;
    int64_t need = 0;
    while (take_n < npending) {
      const accel__hash_image *im = &pending[take_n];
      need += image_bytes(spec, im->w, im->h, im->rgb != nullptr);
      if (need > group_cap && take_n > 0) break;
      take_n++;
    }
    g.nimg = take_n;
    g.img = (accel__hash_image *)malloc(take_n * sizeof(accel__hash_image));
    g.index = (size_t *)malloc(take_n * sizeof(size_t));
    if (!g.img || !g.index) {
      g.nimg = 0;
      s = ACCEL_ERR_OUT_OF_MEMORY;
      accel__why(call->why, "out of host memory");
      break;
    }
    memcpy(g.img, pending, take_n * sizeof(accel__hash_image));
    memcpy(g.index, pending_index, take_n * sizeof(size_t));
    memmove(pending, pending + take_n, (npending - take_n) * sizeof(accel__hash_image));
    memmove(pending_index, pending_index + take_n, (npending - take_n) * sizeof(size_t));
    npending -= take_n;
    if ((s = build_group(job, &g, &cache, exact_dct ? &plan : nullptr, cosk, x, &staging, &staging_cap, call->why)))
      break;
    if ((size_t)g.total_bytes > arena_size) { /* grow the arena (within the budget) */
      x->release(arena, arena_size);
      arena = nullptr;
      arena_size = 0;
      const uint64_t want = (uint64_t)g.total_bytes + (uint64_t)g.total_bytes / 4, left = x->room();
      const size_t size = (size_t)(want < left ? want : (uint64_t)g.total_bytes);
      if ((s = x->alloc(size, &arena, call->why)) != ACCEL_OK) {
        if (s == ACCEL_ERR_DEVICE_MEMORY && g.nimg == 1)
          accel__why(call->why, "a %lldx%lld image needs %.1f MiB of device memory, more than the budget leaves",
                     (long long)g.img[0].w, (long long)g.img[0].h, g.total_bytes / 1048576.0);
        break;
      }
      arena_size = size;
    }
    /* results: slots and counts of every image */
    const size_t slots_bytes = (size_t)spec->nkinds * spec->slot_bytes, per_img = slots_bytes + NCOUNTS * 8;
    if (take_n * per_img > results_cap) {
      x->host_free(results);
      results = nullptr;
      results_cap = 0;
      if ((s = accel__cuda_check(x->host_alloc(take_n * per_img, &results), call->why, "pinned result memory")))
        break;
      results_cap = take_n * per_img;
    }
    /* one upload, the kernels, the downloads: all queued on the stream */
    if ((s = accel__cuda_check(x->upload(arena, staging, (size_t)g.upload_bytes), call->why, "upload"))) break;
    for (size_t i = 0; i < g.nimg && !s; i++) { /* hash slots (their padding too) and counts start at 0 */
      s = accel__cuda_check(x->zero(arena + g.desc[i].slots_off, slots_bytes), call->why, "memset");
      if (!s && spec->need_color)
        s = accel__cuda_check(x->zero(arena + g.desc[i].counts_off, NCOUNTS * 8), call->why, "memset");
    }
    if (s || (s = run_kernels(x, arena, &g, spec, call->why))) break;
    for (size_t i = 0; i < g.nimg && !s; i++) {
      s = accel__cuda_check(x->download(results + i * per_img, arena + g.desc[i].slots_off, slots_bytes), call->why,
                            "download");
      if (!s && spec->need_color)
        s = accel__cuda_check(
            x->download(results + i * per_img + slots_bytes, arena + g.desc[i].counts_off, NCOUNTS * 8), call->why,
            "download");
    }
    if (s) break;
    if (npending == 0 && next < job->n) decode_next(); /* while the GPU works */
    if (s || (s = accel__cuda_check(x->sync(), call->why, "hash kernels"))) break;
    for (size_t i = 0; i < g.nimg; i++) {
      const uint8_t *r = results + i * per_img;
      uint8_t *slots = accel__hash_slots(job, g.index[i]);
      memcpy(slots, r, slots_bytes);
      if (spec->need_color) colorhash_from_counts(spec, (const uint64_t *)(const void *)(r + slots_bytes), slots);
      accel__hash_record(job, g.index[i], ACCEL_OK, "");
    }
    plan_free(&g);
    report();
  }
  x->drain(); /* a failed group may still have work queued on what is freed next */
  plan_free(&g);
  for (size_t i = 0; i < npending; i++) accel__hash_image_free(&pending[i]);
  free(pending);
  free(pending_index);
  x->release(arena, arena_size);
  x->host_free(staging);
  x->host_free(results);
  free(cosk);
  accel__axis_cache_free(&cache);
  return s;
}

}  // namespace

static accel_status cuda_hash_batch(accel__call *call, accel__hash_job *job) {
  return with_device(call, [&](executor *x) { return run_pipeline(x, call, job); });
}

extern "C" const accel__hash_ops accel__cuda_hash_ops = {
    /* .batch = */ cuda_hash_batch,
};

/* Tests: the same pipeline on the host, with this much "device" memory. */
extern "C" uint64_t accel__cuda_hash_emulated_budget = (uint64_t)1 << 30;

static accel_status emulated_hash_batch(accel__call *call, accel__hash_job *job) {
  return with_emulation(accel__cuda_hash_emulated_budget, [&](executor *x) { return run_pipeline(x, call, job); });
}

extern "C" const accel__hash_ops accel__cuda_hash_ops_emulated = {
    /* .batch = */ emulated_hash_batch,
};
