/*
 * kernels/index.cu - exact Hamming searches on the GPU (brute force).
 *
 * Join and range: a grid of (row tile, column tile) blocks; each block stages
 * its column tile's codes (every field) in shared memory, each thread holds
 * one row's codes and compares it with the tile; pairs within the thresholds
 * (by the rule) are appended to a device buffer. When the buffer overflows
 * the search reruns with the exact size, so results are complete; they are
 * handed to the sink only after the whole search succeeded.
 *
 * k nearest: distances are small integers, so a first pass builds each
 * query's histogram of distances (shared-memory atomics), the host finds the
 * k-th smallest distance, a second pass gathers the entries at or below it,
 * and the host orders them by (distance, id).
 *
 * Every comparison is the host/device code below; the host emulation runs the
 * same per-thread code in loops (tests without a GPU).
 */
#include "cuda_util.h"

#include "index/ops.h"

#include <stdlib.h>
#include <string.h>

namespace {

enum { TILE = 128, HIST = 257 };

/* Codes in the device layout: field-major, then word-major, then entry. */
struct dev_codes {
  uint32_t words, nfields;
  uint64_t n, stride;
  const uint64_t *base; /* base[(f * words + w) * stride + i] */
};

struct search_params {
  uint32_t rule, thresholds[ACCEL_INDEX_MAX_FIELDS];
  uint32_t join; /* 1: pairs i < j of one set; 0: every (query, entry) */
};

__host__ __device__ inline uint64_t code_word(const dev_codes *c, uint32_t f, uint32_t w, uint64_t i) {
  return c->base[((uint64_t)f * c->words + w) * c->stride + i];
}

__host__ __device__ inline uint32_t popcount64(uint64_t x) {
#ifdef __CUDA_ARCH__
  return (uint32_t)__popcll(x);
#else
  return (uint32_t)__builtin_popcountll(x);
#endif
}

/* Does row code `mine` (nfields * words words) match entry j of c? */
__host__ __device__ inline bool matches(const uint64_t *mine, const uint64_t *theirs, uint32_t words, uint32_t nfields,
                                        const search_params *p) {
  for (uint32_t f = 0; f < nfields; f++) {
    uint32_t d = 0;
    for (uint32_t w = 0; w < words; w++) d += popcount64(mine[f * words + w] ^ theirs[f * words + w]);
    const bool within = d <= p->thresholds[f];
    if (p->rule == ACCEL_INDEX_ANY && within) return true;
    if (p->rule == ACCEL_INDEX_ALL && !within) return false;
  }
  return p->rule == ACCEL_INDEX_ALL;
}

__host__ __device__ inline uint32_t field_distance(const uint64_t *mine, const dev_codes *c, uint64_t j, uint32_t f) {
  uint32_t d = 0;
  for (uint32_t w = 0; w < c->words; w++) d += popcount64(mine[w] ^ code_word(c, f, w, j));
  return d;
}

__host__ __device__ inline void append_pair(unsigned long long *count, uint32_t *out, unsigned long long cap, uint32_t a,
                                            uint32_t b) {
#ifdef __CUDA_ARCH__
  const unsigned long long at = atomicAdd(count, 1ull);
#else
  const unsigned long long at = (*count)++;
#endif
  if (at < cap) {
    out[2 * at] = a;
    out[2 * at + 1] = b;
  }
}

__global__ void k_pairs(dev_codes rows, dev_codes cols, search_params p, unsigned long long *count, uint32_t *out,
                        unsigned long long cap) {
  extern __shared__ uint64_t tile[]; /* [TILE][nfields * words] */
  const uint32_t fw = cols.nfields * cols.words;
  const uint64_t i = (uint64_t)blockIdx.x * TILE + threadIdx.x;
  uint64_t mine[ACCEL_INDEX_MAX_FIELDS * 4];
  if (i < rows.n)
    for (uint32_t f = 0; f < rows.nfields; f++)
      for (uint32_t w = 0; w < rows.words; w++) mine[f * rows.words + w] = code_word(&rows, f, w, i);
  const uint64_t ntiles = (cols.n + TILE - 1) / TILE;
  for (uint64_t tj = blockIdx.y; tj < ntiles; tj += gridDim.y) {
    if (p.join && tj < blockIdx.x) continue; /* whole tile left of the diagonal */
    const uint64_t j0 = tj * TILE;
    __syncthreads();
    if (j0 + threadIdx.x < cols.n)
      for (uint32_t f = 0; f < cols.nfields; f++)
        for (uint32_t w = 0; w < cols.words; w++)
          tile[threadIdx.x * fw + f * cols.words + w] = code_word(&cols, f, w, j0 + threadIdx.x);
    __syncthreads();
    if (i >= rows.n) continue;
    const uint64_t jn = cols.n - j0 < TILE ? cols.n - j0 : TILE;
    for (uint64_t jj = 0; jj < jn; jj++) {
      const uint64_t j = j0 + jj;
      if (p.join && j <= i) continue;
      if (matches(mine, tile + jj * fw, cols.words, cols.nfields, &p)) append_pair(count, out, cap, (uint32_t)i, (uint32_t)j);
    }
  }
}

/* k-nearest, pass 1: histogram of distances per query (block x = query). */
__global__ void k_hist(dev_codes q, dev_codes c, uint32_t field, unsigned int *hist) {
  __shared__ unsigned int h[HIST];
  for (uint32_t b = threadIdx.x; b < HIST; b += blockDim.x) h[b] = 0;
  __syncthreads();
  uint64_t mine[4];
  for (uint32_t w = 0; w < q.words; w++) mine[w] = code_word(&q, field, w, blockIdx.x);
  for (uint64_t j = threadIdx.x; j < c.n; j += blockDim.x) atomicAdd(&h[field_distance(mine, &c, j, field)], 1u);
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < HIST; b += blockDim.x) hist[(uint64_t)blockIdx.x * HIST + b] = h[b];
}

/* pass 2: entry j goes to query qi's candidates when it is within the
 * query's cut distance (the kernel's per-thread work, and the emulation's). */
__host__ __device__ inline void gather_entry(const dev_codes *c, uint32_t field, const uint64_t *mine, uint64_t qi,
                                             uint64_t j, const uint32_t *cut, const unsigned long long *offset,
                                             unsigned long long *fill, uint32_t *out) {
  if (field_distance(mine, c, j, field) > cut[qi]) return;
#ifdef __CUDA_ARCH__
  const unsigned long long at = atomicAdd(&fill[qi], 1ull);
#else
  const unsigned long long at = fill[qi]++;
#endif
  out[offset[qi] + at] = (uint32_t)j;
}

__global__ void k_gather(dev_codes q, dev_codes c, uint32_t field, const uint32_t *cut, const unsigned long long *offset,
                         unsigned long long *fill, uint32_t *out) {
  uint64_t mine[4];
  for (uint32_t w = 0; w < q.words; w++) mine[w] = code_word(&q, field, w, blockIdx.x);
  for (uint64_t j = threadIdx.x; j < c.n; j += blockDim.x)
    gather_entry(&c, field, mine, blockIdx.x, j, cut, offset, fill, out);
}

/* ------------------------------------------------------------ host side */

/* A search's codes uploaded (or, emulated, copied) in the device layout. */
accel_status upload_codes(accel__executor *x, const accel__codes *src, uint8_t **dev, size_t *bytes, dev_codes *view,
                          char *why) {
  const size_t n = src->n, words = src->words, nf = src->nfields;
  *bytes = (n ? n : 1) * words * nf * sizeof(uint64_t);
  uint64_t *host = (uint64_t *)malloc(*bytes);
  if (!host) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  for (size_t f = 0; f < nf; f++)
    for (size_t w = 0; w < words; w++) memcpy(host + (f * words + w) * n, src->field[f] + w * src->stride, n * 8);
  accel_status s = x->alloc(*bytes, dev, why);
  if (!s) s = accel__cuda_check(x->upload(*dev, host, *bytes), why, "code upload");
  if (!s) s = accel__cuda_check(x->sync(), why, "code upload"); /* the host copy is freed next */
  free(host);
  *view = dev_codes{src->words, src->nfields, (uint64_t)n, (uint64_t)n, (const uint64_t *)(void *)*dev};
  return s;
}

/* All pairs of rows x cols (join: i < j of one set), with a buffer grown to
 * the exact count when it overflows. On success the pairs go to the sink. */
accel_status find_pairs(accel__executor *x, accel__call *call, accel__index_job *job, bool join) {
  char *why = call->why;
  accel_status s = ACCEL_OK;
  uint8_t *drows = nullptr, *dcols = nullptr, *dout = nullptr, *dcount = nullptr;
  size_t brows = 0, bcols = 0, bout = 0;
  dev_codes rows, cols;
  const accel__codes *hrows = join ? &job->codes : &job->queries;
  s = upload_codes(x, &job->codes, &dcols, &bcols, &cols, why);
  if (!s && !join) s = upload_codes(x, hrows, &drows, &brows, &rows, why);
  if (!s && join) rows = cols;
  search_params p;
  memset(&p, 0, sizeof p);
  p.rule = job->search.rule;
  p.join = join;
  for (uint32_t f = 0; f < ACCEL_INDEX_MAX_FIELDS; f++) p.thresholds[f] = job->search.thresholds[f];
  unsigned long long cap = 1 << 20, count = 0;
  if (!s) s = x->alloc(sizeof(unsigned long long), &dcount, why);
  uint32_t *host = nullptr;
  for (int attempt = 0; !s && attempt < 2; attempt++) {
    bout = (size_t)cap * 2 * sizeof(uint32_t);
    if ((s = x->alloc(bout, &dout, why))) break;
    if ((s = accel__cuda_check(x->zero(dcount, sizeof count), why, "pair count reset"))) break;
    unsigned long long *dc = (unsigned long long *)(void *)dcount;
    uint32_t *dpairs = (uint32_t *)(void *)dout;
    if (x->st) {
      const uint32_t fw = cols.nfields * cols.words;
      const uint64_t tiles_r = (rows.n + TILE - 1) / TILE, tiles_c = (cols.n + TILE - 1) / TILE;
      const dim3 grid((unsigned)tiles_r, (unsigned)(tiles_c < 65535 ? tiles_c : 65535));
      s = accel__cuda_check(accel__cuda_launch(k_pairs, grid, dim3(TILE), TILE * fw * sizeof(uint64_t), x->st->stream,
                                               rows, cols, p, dc, dpairs, cap),
                            why, "pair kernel launch");
    } else { /* emulation: the same comparisons, in order */
      s = accel__cuda_check(x->emulate([&] {
        uint64_t mine[ACCEL_INDEX_MAX_FIELDS * 4], theirs[ACCEL_INDEX_MAX_FIELDS * 4];
        for (uint64_t i = 0; i < rows.n; i++) {
          for (uint32_t f = 0; f < rows.nfields; f++)
            for (uint32_t w = 0; w < rows.words; w++) mine[f * rows.words + w] = code_word(&rows, f, w, i);
          for (uint64_t j = join ? i + 1 : 0; j < cols.n; j++) {
            for (uint32_t f = 0; f < cols.nfields; f++)
              for (uint32_t w = 0; w < cols.words; w++) theirs[f * cols.words + w] = code_word(&cols, f, w, j);
            if (matches(mine, theirs, cols.words, cols.nfields, &p))
              append_pair(dc, dpairs, cap, (uint32_t)i, (uint32_t)j);
          }
        }
      }), why, "pair kernel launch");
    }
    if (s) break;
    if ((s = accel__cuda_check(x->download(&count, dcount, sizeof count), why, "pair count download")) ||
        (s = accel__cuda_check(x->sync(), why, "pair kernel")))
      break;
    if (count <= cap) break;
    x->release(dout, bout); /* overflow: rerun with room for every pair */
    dout = nullptr;
    cap = count;
  }
  if (!s && count > cap) {
    accel__why(why, "the pair kernel found %llu pairs with room for %llu", count, cap);
    s = ACCEL_ERR_DEVICE;
  }
  if (!s && count) {
    host = (uint32_t *)malloc((size_t)count * 2 * sizeof(uint32_t));
    if (!host) {
      accel__why(why, "out of host memory for %llu pairs", count);
      s = ACCEL_ERR_OUT_OF_MEMORY;
    } else if (!(s = accel__cuda_check(x->download(host, dout, (size_t)count * 2 * sizeof(uint32_t)), why,
                                       "pair download"))) {
      s = accel__cuda_check(x->sync(), why, "pair download");
    }
  }
  for (unsigned long long k = 0; !s && k < 2 * count; k++) /* a pair names rows and columns that exist */
    if (host[k] >= (k % 2 ? cols.n : rows.n)) {
      accel__why(why, "the pair kernel returned entry %u of %llu", host[k],
                 (unsigned long long)(k % 2 ? cols.n : rows.n));
      s = ACCEL_ERR_DEVICE;
    }
  if (!s && host) { /* success: now the sink */
    const size_t CHUNK = 4096;
    uint32_t a[CHUNK], b[CHUNK];
    for (unsigned long long k = 0; k < count; k += CHUNK) {
      const size_t m = count - k < CHUNK ? (size_t)(count - k) : CHUNK;
      for (size_t t = 0; t < m; t++) {
        a[t] = host[2 * (k + t)];
        b[t] = host[2 * (k + t) + 1];
      }
      job->sink->emit(job->sink, a, b, m);
    }
  }
  free(host);
  x->release(dout, bout);
  x->release(dcount, sizeof(unsigned long long));
  x->release(dcols, bcols);
  if (!join) x->release(drows, brows);
  job->used = ACCEL_INDEX_BRUTE_FORCE;
  return s;
}

accel_status knn(accel__executor *x, accel__call *call, accel__index_job *job) {
  char *why = call->why;
  const size_t nq = job->queries.n;
  const uint32_t k = job->k, f = job->field, maxd = job->codes.words * 64;
  uint8_t *dq = nullptr, *dc = nullptr, *dhist = nullptr, *dcut = nullptr, *doff = nullptr, *dfill = nullptr,
          *dout = nullptr;
  size_t bq = 0, bc = 0, bout = 0;
  dev_codes q, c;
  unsigned int *hist = (unsigned int *)malloc(nq * HIST * sizeof(unsigned int));
  uint32_t *cut = (uint32_t *)malloc(nq * sizeof(uint32_t));
  unsigned long long *off = (unsigned long long *)malloc((nq + 1) * sizeof(unsigned long long));
  uint32_t *found = nullptr;
  accel_status s = hist && cut && off ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
  if (s) accel__why(why, "out of host memory");
  if (!s) s = upload_codes(x, &job->queries, &dq, &bq, &q, why);
  if (!s) s = upload_codes(x, &job->codes, &dc, &bc, &c, why);
  if (!s) s = x->alloc(nq * HIST * sizeof(unsigned int), &dhist, why);
  if (!s) { /* pass 1 */
    unsigned int *dh = (unsigned int *)(void *)dhist;
    if (x->st) {
      s = accel__cuda_check(accel__cuda_launch(k_hist, dim3((unsigned)nq), dim3(256), 0, x->st->stream, q, c, f, dh),
                            why, "distance histogram launch");
    } else {
      s = accel__cuda_check(x->emulate([&] {
        uint64_t mine[4];
        memset(dh, 0, nq * HIST * sizeof(unsigned int));
        for (size_t i = 0; i < nq; i++) {
          for (uint32_t w = 0; w < q.words; w++) mine[w] = code_word(&q, f, w, i);
          for (uint64_t j = 0; j < c.n; j++) dh[i * HIST + field_distance(mine, &c, j, f)]++;
        }
      }), why, "distance histogram launch");
    }
    if (!s)
      s = accel__cuda_check(x->download(hist, dhist, nq * HIST * sizeof(unsigned int)), why,
                            "distance histogram download");
    if (!s) s = accel__cuda_check(x->sync(), why, "distance histogram");
  }
  if (!s) { /* the cut distance of each query, and where its candidates go */
    off[0] = 0;
    for (size_t i = 0; i < nq; i++) {
      unsigned long long below = 0;
      cut[i] = maxd;
      for (uint32_t d = 0; d <= maxd; d++) {
        below += hist[i * HIST + d];
        if (below >= k) {
          cut[i] = d;
          break;
        }
      }
      off[i + 1] = off[i] + below;
    }
    bout = (size_t)(off[nq] ? off[nq] : 1) * sizeof(uint32_t);
    if (!(s = x->alloc(nq * sizeof(uint32_t), &dcut, why)) &&
        !(s = x->alloc((nq + 1) * sizeof(unsigned long long), &doff, why)) &&
        !(s = x->alloc(nq * sizeof(unsigned long long), &dfill, why)) && !(s = x->alloc(bout, &dout, why)) &&
        !(s = accel__cuda_check(x->upload(dcut, cut, nq * sizeof(uint32_t)), why, "cut distance upload")) &&
        !(s = accel__cuda_check(x->upload(doff, off, (nq + 1) * sizeof(unsigned long long)), why,
                                "candidate offset upload")) &&
        !(s = accel__cuda_check(x->zero(dfill, nq * sizeof(unsigned long long)), why, "candidate count reset"))) {
      const uint32_t *dcu = (const uint32_t *)(void *)dcut;
      const unsigned long long *dof = (const unsigned long long *)(void *)doff;
      unsigned long long *dfi = (unsigned long long *)(void *)dfill;
      uint32_t *dou = (uint32_t *)(void *)dout;
      if (x->st) {
        s = accel__cuda_check(accel__cuda_launch(k_gather, dim3((unsigned)nq), dim3(256), 0, x->st->stream, q, c, f,
                                                 dcu, dof, dfi, dou),
                              why, "nearest-neighbour gather launch");
      } else { /* the kernel's work from the same device buffers */
        s = accel__cuda_check(x->emulate([&] {
          uint64_t mine[4];
          for (size_t i = 0; i < nq; i++) {
            for (uint32_t w = 0; w < q.words; w++) mine[w] = code_word(&q, f, w, i);
            for (uint64_t j = 0; j < c.n; j++) gather_entry(&c, f, mine, i, j, dcu, dof, dfi, dou);
          }
        }), why, "nearest-neighbour gather launch");
      }
      if (!s && !(found = (uint32_t *)malloc(bout))) {
        accel__why(why, "out of host memory");
        s = ACCEL_ERR_OUT_OF_MEMORY;
      }
      if (!s) s = accel__cuda_check(x->download(found, dout, bout), why, "nearest-neighbour download");
      if (!s) s = accel__cuda_check(x->sync(), why, "nearest-neighbour gather");
    }
  }
  for (size_t t = 0; !s && t < (size_t)off[nq]; t++) /* the gather names entries that exist */
    if (found[t] >= c.n) {
      accel__why(why, "the nearest-neighbour gather returned entry %u of %llu", found[t], (unsigned long long)c.n);
      s = ACCEL_ERR_DEVICE;
    }
  if (!s) { /* order each query's candidates by (distance, id) on the host */
    for (size_t i = 0; i < nq && !s; i++) {
      const size_t m = (size_t)(off[i + 1] - off[i]);
      accel__knn_cand *cs = (accel__knn_cand *)malloc((m ? m : 1) * sizeof(accel__knn_cand));
      if (!cs) {
        accel__why(why, "out of host memory");
        s = ACCEL_ERR_OUT_OF_MEMORY;
        break;
      }
      for (size_t t = 0; t < m; t++) {
        const uint32_t j = found[off[i] + t];
        cs[t] = accel__knn_cand{accel__field_distance(&job->queries, i, &job->codes, j, f), job->entry_ids[j]};
      }
      accel__knn_emit(cs, m, k, job->out_ids + i * k, job->out_distances ? job->out_distances + i * k : nullptr);
      free(cs);
    }
  }
  free(hist);
  free(cut);
  free(off);
  free(found);
  x->release(dq, bq);
  x->release(dc, bc);
  x->release(dhist, nq * HIST * sizeof(unsigned int));
  x->release(dcut, nq * sizeof(uint32_t));
  x->release(doff, (nq + 1) * sizeof(unsigned long long));
  x->release(dfill, nq * sizeof(unsigned long long));
  x->release(dout, bout);
  return s;
}

/* Brute force only: a join or range search meant for multi-index hashing (a
 * CPU algorithm) is declined before anything reaches the device. */
template <int OP> accel_status run(accel__call *call, accel__index_job *job, accel__executor *x) {
  if (OP == 0) return find_pairs(x, call, job, true);
  if (OP == 1) return find_pairs(x, call, job, false);
  return knn(x, call, job);
}

template <int OP> accel_status on_device(accel__call *call, accel__index_job *job) {
  if (OP < 2 && accel__index_gpu_decline(call, job)) return ACCEL_ERR_UNSUPPORTED;
  return with_device(call, [&](accel__executor *x) { return run<OP>(call, job, x); });
}

}  // namespace

extern "C" uint64_t accel__cuda_index_emulated_budget = (uint64_t)1 << 30;

namespace {
template <int OP> accel_status emulated(accel__call *call, accel__index_job *job) {
  if (OP < 2 && accel__index_gpu_decline(call, job)) return ACCEL_ERR_UNSUPPORTED;
  return with_emulation(accel__cuda_index_emulated_budget, [&](accel__executor *x) { return run<OP>(call, job, x); });
}
}  // namespace

extern "C" const accel__index_ops accel__cuda_index_ops = {
    /* .join = */ on_device<0>,
    /* .range = */ on_device<1>,
    /* .knn = */ on_device<2>,
};

extern "C" const accel__index_ops accel__cuda_index_ops_emulated = {
    /* .join = */ emulated<0>,
    /* .range = */ emulated<1>,
    /* .knn = */ emulated<2>,
};
