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

/* Entry i's code in every field: out[f * words + w]. */
__host__ __device__ inline void load_code(const dev_codes *c, uint64_t i, uint64_t *out) {
  for (uint32_t f = 0; f < c->nfields; f++)
    for (uint32_t w = 0; w < c->words; w++) out[f * c->words + w] = code_word(c, f, w, i);
}

/* Entry i's code in field f: out[w]. */
__host__ __device__ inline void load_field(const dev_codes *c, uint32_t f, uint64_t i, uint64_t *out) {
  for (uint32_t w = 0; w < c->words; w++) out[w] = code_word(c, f, w, i);
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

__host__ __device__ inline void append_pair(unsigned long long *count, uint32_t *out, unsigned long long cap,
                                            uint32_t a, uint32_t b) {
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
  if (i < rows.n) load_code(&rows, i, mine);
  const uint64_t ntiles = (cols.n + TILE - 1) / TILE;
  for (uint64_t tj = blockIdx.y; tj < ntiles; tj += gridDim.y) {
    if (p.join && tj < blockIdx.x) continue; /* whole tile left of the diagonal */
    const uint64_t j0 = tj * TILE;
    __syncthreads();
    if (j0 + threadIdx.x < cols.n) load_code(&cols, j0 + threadIdx.x, tile + threadIdx.x * fw);
    __syncthreads();
    if (i >= rows.n) continue;
    const uint64_t jn = cols.n - j0 < TILE ? cols.n - j0 : TILE;
    for (uint64_t jj = 0; jj < jn; jj++) {
      const uint64_t j = j0 + jj;
      if (p.join && j <= i) continue;
      if (matches(mine, tile + jj * fw, cols.words, cols.nfields, &p))
        append_pair(count, out, cap, (uint32_t)i, (uint32_t)j);
    }
  }
}

/* k-nearest, pass 1: histogram of distances per query (block x = query). */
__global__ void k_hist(dev_codes q, dev_codes c, uint32_t field, unsigned int *hist) {
  __shared__ unsigned int h[HIST];
  for (uint32_t b = threadIdx.x; b < HIST; b += blockDim.x) h[b] = 0;
  __syncthreads();
  uint64_t mine[4];
  load_field(&q, field, blockIdx.x, mine);
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

__global__ void k_gather(dev_codes q, dev_codes c, uint32_t field, const uint32_t *cut,
                         const unsigned long long *offset, unsigned long long *fill, uint32_t *out) {
  uint64_t mine[4];
  load_field(&q, field, blockIdx.x, mine);
  for (uint64_t j = threadIdx.x; j < c.n; j += blockDim.x)
    gather_entry(&c, field, mine, blockIdx.x, j, cut, offset, fill, out);
}

/* ------------------------------------------------------------ host side */

/* A search's codes uploaded (or, emulated, copied) in the device layout. */
accel_status upload_codes(accel__executor *x, const accel__codes *src, dbuf *dev, dev_codes *view, char *why) {
  const size_t n = src->n, words = src->words, nf = src->nfields;
  const size_t bytes = (n ? n : 1) * words * nf * sizeof(uint64_t);
  uint64_t *host = (uint64_t *)malloc(bytes);
  if (!host) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  for (size_t f = 0; f < nf; f++)
    for (size_t w = 0; w < words; w++) memcpy(host + (f * words + w) * n, src->field[f] + w * src->stride, n * 8);
  accel_status s = dev->get(x, bytes, why);
  if (!s) s = upload(x, dev->p, host, bytes, why, "code upload");
  if (!s) s = accel__cuda_check(x->sync(), why, "code upload"); /* the host copy is freed next */
  free(host);
  *view = dev_codes{src->words, src->nfields, (uint64_t)n, (uint64_t)n, dev->as<const uint64_t>()};
  return s;
}

/* ------------------------------------------------------------ join and range */

/* A pair search: rows against columns (join: i < j of one set), the rule. */
struct pair_search {
  dev_codes rows, cols;
  search_params p;
};

/* One run of the pair kernel with room for `cap` pairs in out; *count is
 * how many it found (more than cap: out overflowed). */
accel_status pair_pass(accel__executor *x, const pair_search &ps, dbuf &dcount, dbuf &out, unsigned long long cap,
                       unsigned long long *count, char *why) {
  accel_status s = out.get(x, (size_t)cap * 2 * sizeof(uint32_t), why);
  if (!s) s = accel__cuda_check(x->zero(dcount.p, sizeof *count), why, "pair count reset");
  if (s) return s;
  const dev_codes &rows = ps.rows, &cols = ps.cols;
  unsigned long long *dc = dcount.as<unsigned long long>();
  uint32_t *dpairs = out.as<uint32_t>();
  const auto host = [&] { /* emulation: the same comparisons, in order */
                          uint64_t mine[ACCEL_INDEX_MAX_FIELDS * 4], theirs[ACCEL_INDEX_MAX_FIELDS * 4];
                          for (uint64_t i = 0; i < rows.n; i++) {
                            load_code(&rows, i, mine);
                            for (uint64_t j = ps.p.join ? i + 1 : 0; j < cols.n; j++) {
                              load_code(&cols, j, theirs);
                              if (matches(mine, theirs, cols.words, cols.nfields, &ps.p))
                                append_pair(dc, dpairs, cap, (uint32_t)i, (uint32_t)j);
                            }
                          }
  };
  const uint32_t fw = cols.nfields * cols.words;
  const uint64_t tiles_r = (rows.n + TILE - 1) / TILE, tiles_c = (cols.n + TILE - 1) / TILE;
  const dim3 grid((unsigned)tiles_r, (unsigned)(tiles_c < 65535 ? tiles_c : 65535));
  s = accel__cuda_check(
      x->launch(host, k_pairs, grid, dim3(TILE), TILE * fw * sizeof(uint64_t), rows, cols, ps.p, dc, dpairs, cap), why,
      "pair kernel launch");
  if (!s) s = accel__cuda_check(x->download(count, dcount.p, sizeof *count), why, "pair count download");
  if (!s) s = accel__cuda_check(x->sync(), why, "pair kernel");
  return s;
}

/* The pairs found (count of them, as (row, column) in host), checked to
 * name rows and columns that exist, to the job's sink. */
accel_status emit_pairs(accel__index_job *job, const pair_search &ps, const uint32_t *host, unsigned long long count,
                        char *why) {
  for (unsigned long long k = 0; k < 2 * count; k++)
    if (host[k] >= (k % 2 ? ps.cols.n : ps.rows.n)) {
      accel__why(why, "the pair kernel returned entry %u of %llu", host[k],
                 (unsigned long long)(k % 2 ? ps.cols.n : ps.rows.n));
      return ACCEL_ERR_DEVICE;
    }
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
  return ACCEL_OK;
}

/* All pairs of rows x cols (join: i < j of one set), with a buffer grown to
 * the exact count when it overflows. On success the pairs go to the sink. */
accel_status find_pairs(accel__executor *x, accel__call *call, accel__index_job *job, bool join) {
  char *why = call->why;
  dbuf drows, dcols, dcount, dout;
  pair_search ps;
  memset(&ps, 0, sizeof ps);
  accel_status s = upload_codes(x, &job->codes, &dcols, &ps.cols, why);
  if (!s && !join) s = upload_codes(x, &job->queries, &drows, &ps.rows, why);
  if (!s && join) ps.rows = ps.cols;
  ps.p.rule = job->search.rule;
  ps.p.join = join;
  for (uint32_t f = 0; f < ACCEL_INDEX_MAX_FIELDS; f++) ps.p.thresholds[f] = job->search.thresholds[f];
  unsigned long long cap = 1 << 20, count = 0;
  if (!s) s = dcount.get(x, sizeof(unsigned long long), why);
  for (int attempt = 0; !s; attempt++) {
    s = pair_pass(x, ps, dcount, dout, cap, &count, why);
    if (s || count <= cap || attempt == 1) break;
    cap = count; /* overflow: rerun with room for every pair */
  }
  if (!s && count > cap) {
    accel__why(why, "the pair kernel found %llu pairs with room for %llu", count, cap);
    s = ACCEL_ERR_DEVICE;
  }
  uint32_t *host = nullptr;
  if (!s && count && !(host = (uint32_t *)malloc((size_t)count * 2 * sizeof(uint32_t)))) {
    accel__why(why, "out of host memory for %llu pairs", count);
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s && count) s = download(x, host, dout.p, (size_t)count * 2 * sizeof(uint32_t), why, "pair download");
  if (!s && count) s = emit_pairs(job, ps, host, count, why); /* success: now the sink */
  free(host);
  job->used = ACCEL_INDEX_BRUTE_FORCE;
  return s;
}

/* ------------------------------------------------------------ k nearest */

/* A k-nearest search: its codes on the device, the host's tables (each
 * query's histogram, cut distance and candidate offsets; the candidates)
 * and the device's. */
struct knn_search {
  size_t nq = 0;
  uint32_t f = 0;
  dev_codes q, c;
  unsigned int *hist = nullptr;
  uint32_t *cut = nullptr;
  unsigned long long *off = nullptr;
  uint32_t *found = nullptr;
  dbuf dq, dc, dhist, dcut, doff, dfill, dout;
  ~knn_search() {
    free(hist);
    free(cut);
    free(off);
    free(found);
  }
};

/* Pass 1: each query's histogram of distances, into ks.hist. */
accel_status knn_histograms(accel__executor *x, knn_search &ks, char *why) {
  const size_t nq = ks.nq, bytes = nq * HIST * sizeof(unsigned int);
  const uint32_t f = ks.f;
  const dev_codes &q = ks.q, &c = ks.c;
  accel_status s = ks.dhist.get(x, bytes, why);
  if (s) return s;
  unsigned int *dh = ks.dhist.as<unsigned int>();
  const auto host = [&] {
    uint64_t mine[4];
    memset(dh, 0, bytes);
    for (size_t i = 0; i < nq; i++) {
      load_field(&q, f, i, mine);
      for (uint64_t j = 0; j < c.n; j++) dh[i * HIST + field_distance(mine, &c, j, f)]++;
    }
  };
  s = accel__cuda_check(x->launch(host, k_hist, dim3((unsigned)nq), dim3(256), 0, q, c, f, dh), why,
                        "distance histogram launch");
  if (!s) s = accel__cuda_check(x->download(ks.hist, ks.dhist.p, bytes), why, "distance histogram download");
  if (!s) s = accel__cuda_check(x->sync(), why, "distance histogram");
  return s;
}

/* The cut distance of each query (that of its k-th nearest entry), and
 * where its candidates (every entry at or below it) go. */
void knn_cuts(knn_search &ks, uint32_t k, uint32_t maxd) {
  ks.off[0] = 0;
  for (size_t i = 0; i < ks.nq; i++) {
    unsigned long long below = 0;
    ks.cut[i] = maxd;
    for (uint32_t d = 0; d <= maxd; d++) {
      below += ks.hist[i * HIST + d];
      if (below >= k) {
        ks.cut[i] = d;
        break;
      }
    }
    ks.off[i + 1] = ks.off[i] + below;
  }
}

/* Pass 2: each query's candidates, into ks.found (checked to name entries
 * that exist). */
accel_status knn_gather(accel__executor *x, knn_search &ks, char *why) {
  const size_t nq = ks.nq, bout = (size_t)(ks.off[nq] ? ks.off[nq] : 1) * sizeof(uint32_t);
  const uint32_t f = ks.f;
  const dev_codes &q = ks.q, &c = ks.c;
  accel_status s = ks.dcut.get(x, nq * sizeof(uint32_t), why);
  if (!s) s = ks.doff.get(x, (nq + 1) * sizeof(unsigned long long), why);
  if (!s) s = ks.dfill.get(x, nq * sizeof(unsigned long long), why);
  if (!s) s = ks.dout.get(x, bout, why);
  if (!s) s = upload(x, ks.dcut.p, ks.cut, nq * sizeof(uint32_t), why, "cut distance upload");
  if (!s) s = upload(x, ks.doff.p, ks.off, (nq + 1) * sizeof(unsigned long long), why, "candidate offset upload");
  if (!s) s = accel__cuda_check(x->zero(ks.dfill.p, nq * sizeof(unsigned long long)), why, "candidate count reset");
  if (s) return s;
  const uint32_t *dcu = ks.dcut.as<const uint32_t>();
  const unsigned long long *dof = ks.doff.as<const unsigned long long>();
  unsigned long long *dfi = ks.dfill.as<unsigned long long>();
  uint32_t *dou = ks.dout.as<uint32_t>();
  const auto host = [&] { /* the kernel's work from the same device buffers */
                          uint64_t mine[4];
                          for (size_t i = 0; i < nq; i++) {
                            load_field(&q, f, i, mine);
                            for (uint64_t j = 0; j < c.n; j++) gather_entry(&c, f, mine, i, j, dcu, dof, dfi, dou);
                          }
  };
  s = accel__cuda_check(x->launch(host, k_gather, dim3((unsigned)nq), dim3(256), 0, q, c, f, dcu, dof, dfi, dou), why,
                        "nearest-neighbour gather launch");
  if (!s && !(ks.found = (uint32_t *)malloc(bout))) {
    accel__why(why, "out of host memory");
    s = ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (!s) s = accel__cuda_check(x->download(ks.found, ks.dout.p, bout), why, "nearest-neighbour download");
  if (!s) s = accel__cuda_check(x->sync(), why, "nearest-neighbour gather");
  for (size_t t = 0; !s && t < (size_t)ks.off[nq]; t++) /* the gather names entries that exist */
    if (ks.found[t] >= c.n) {
      accel__why(why, "the nearest-neighbour gather returned entry %u of %llu", ks.found[t], (unsigned long long)c.n);
      s = ACCEL_ERR_DEVICE;
    }
  return s;
}

/* Each query's candidates ordered by (distance, id) on the host: its k
 * nearest into the job's outputs. */
accel_status knn_emit(accel__index_job *job, const knn_search &ks, char *why) {
  const uint32_t k = job->k;
  for (size_t i = 0; i < ks.nq; i++) {
    const size_t m = (size_t)(ks.off[i + 1] - ks.off[i]);
    accel__knn_cand *cs = (accel__knn_cand *)malloc((m ? m : 1) * sizeof(accel__knn_cand));
    if (!cs) {
      accel__why(why, "out of host memory");
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    for (size_t t = 0; t < m; t++) {
      const uint32_t j = ks.found[ks.off[i] + t];
      cs[t] = accel__knn_cand{accel__field_distance(&job->queries, i, &job->codes, j, ks.f), job->entry_ids[j]};
    }
    accel__knn_emit(cs, m, k, job->out_ids + i * k, job->out_distances ? job->out_distances + i * k : nullptr);
    free(cs);
  }
  return ACCEL_OK;
}

accel_status knn(accel__executor *x, accel__call *call, accel__index_job *job) {
  char *why = call->why;
  knn_search ks;
  ks.nq = job->queries.n;
  ks.f = job->field;
  ks.hist = (unsigned int *)malloc(ks.nq * HIST * sizeof(unsigned int));
  ks.cut = (uint32_t *)malloc(ks.nq * sizeof(uint32_t));
  ks.off = (unsigned long long *)malloc((ks.nq + 1) * sizeof(unsigned long long));
  accel_status s = ks.hist && ks.cut && ks.off ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
  if (s) accel__why(why, "out of host memory");
  if (!s) s = upload_codes(x, &job->queries, &ks.dq, &ks.q, why);
  if (!s) s = upload_codes(x, &job->codes, &ks.dc, &ks.c, why);
  if (!s) s = knn_histograms(x, ks, why);
  if (!s) knn_cuts(ks, job->k, job->codes.words * 64);
  if (!s) s = knn_gather(x, ks, why);
  if (!s) s = knn_emit(job, ks, why);
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

} // namespace

extern "C" const accel__index_ops accel__cuda_index_ops = {
    /* .join = */ on_device<0>,
    /* .range = */ on_device<1>,
    /* .knn = */ on_device<2>,
};
