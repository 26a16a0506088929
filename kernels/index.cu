/*
 * kernels/index.cu - exact Hamming searches on the GPU (brute force).
 *
 * Join and range: the search is a grid of work items, each a TILE x TILE
 * block of (row, column) pairs; a join's items are the upper triangle of
 * tiles only (column tile >= row tile), enumerated column by column. A
 * block stages its item's column tile in shared memory; each thread holds
 * one row's code in registers (the kernels are specialised for 1, 2 and 4
 * words per field, and for one field or any number of them, so every index
 * into the code is known when compiled) and compares it with the tile; a
 * warp appends its pairs with one atomic (a ballot, the leader's add, a
 * shuffle). The pair buffer is sized from the memory budget. The items run
 * in launches sized from the pairs per item seen so far; each launch's pairs
 * are copied out before the next, and a launch that overflows the buffer
 * runs again alone, in smaller parts, so no search ever reruns whole. Pairs
 * reach the sink only after the whole search succeeded.
 *
 * k nearest: queries in tiles, a thread per query with its code in
 * registers; the codes stream through shared memory in tiles, each block
 * taking a stripe of them, so the codes are read once per query tile, not
 * once per query. Pass 1 counts each query's distances in a shared-memory
 * histogram (added into the query's global one); a kernel finds each
 * query's cut (its k-th smallest distance) and how many entries lie at or
 * below it; pass 2 gathers those entries into exact-size lists, and the host
 * orders each list by (distance, id). Queries go in chunks whose histograms
 * and lists fit the memory budget.
 *
 * Every comparison is the host/device code below; the host emulation runs
 * the same per-thread code in loops over the same work items (tests without
 * a GPU).
 */
#include "cuda_util.h"

#include "index/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr uint32_t TILE = 128;                            /* rows and columns of a pair work item; threads of a block */
constexpr uint32_t HIST_SHARED = 40960;                   /* bytes of shared histograms per k-nearest block */
constexpr uint64_t MAX_GRID = 1u << 20;                   /* blocks per launch (they stride over the items) */
constexpr uint64_t FIRST_LAUNCHES = 32;                   /* a large pair search's first launch: this fraction of it */
constexpr uint64_t GROWTH = 4;                            /* launches grow at most this much from one to the next */
constexpr unsigned long long MAX_PAIRS = 1ull << 27;      /* pairs buffered per launch (1 GiB) */
constexpr unsigned long long MAX_CANDIDATES = 1ull << 28; /* k-nearest candidates per gather (1 GiB) */
constexpr uint64_t STAGING = 256ull << 20; /* host bytes of k-nearest results on their way to device arrays */

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

__host__ __device__ inline uint32_t popcount64(uint64_t x) {
#ifdef __CUDA_ARCH__
  return (uint32_t)__popcll(x);
#else
  return (uint32_t)__builtin_popcountll(x);
#endif
}

/* The kernels' code shapes: W words per field (1, 2 or 4: every width an
 * index takes) and F fields (1, or 0: any number up to the maximum, read at
 * run time). Loops over fields run to a constant bound and stop at the real
 * count, so they unroll and a thread's code stays in registers. */
template <int F> __host__ __device__ constexpr uint32_t field_bound() {
  return F ? (uint32_t)F : (uint32_t)ACCEL_INDEX_MAX_FIELDS;
}
template <int F> __host__ __device__ inline uint32_t nfields_of(const dev_codes *c) {
  return F ? (uint32_t)F : c->nfields;
}

/* Entry i's code in field f: out[w]. */
template <int W> __host__ __device__ inline void load_field(const dev_codes *c, uint32_t f, uint64_t i, uint64_t *out) {
  for (int w = 0; w < W; w++) out[w] = c->base[((uint64_t)f * W + w) * c->stride + i];
}

/* Entry i's code in every field: out[f * W + w]. */
template <int W, int F> __host__ __device__ inline void load_code(const dev_codes *c, uint64_t i, uint64_t *out) {
  const uint32_t nf = nfields_of<F>(c);
  for (uint32_t f = 0; f < field_bound<F>(); f++)
    if (f < nf) load_field<W>(c, f, i, out + f * W);
}

template <int W> __host__ __device__ inline uint32_t distance(const uint64_t *a, const uint64_t *b) {
  uint32_t d = 0;
  for (int w = 0; w < W; w++) d += popcount64(a[w] ^ b[w]);
  return d;
}

/* Do two codes (nf fields each) match under the rule? */
template <int W, int F>
__host__ __device__ inline bool matches(const uint64_t *mine, const uint64_t *theirs, uint32_t nf,
                                        const search_params *p) {
  for (uint32_t f = 0; f < field_bound<F>(); f++) {
    if (f >= nf) break;
    const bool within = distance<W>(mine + f * W, theirs + f * W) <= p->thresholds[f];
    if (p->rule == ACCEL_INDEX_ANY && within) return true;
    if (p->rule == ACCEL_INDEX_ALL && !within) return false;
  }
  return p->rule == ACCEL_INDEX_ALL;
}

/* Work item b: its row and column tiles. A join's items are the upper
 * triangle (row tile <= column tile) column by column, item c (c + 1) / 2 + r
 * being (r, c); other searches' are row-major, tiles_c columns a row. */
__host__ __device__ inline void item_tiles(uint64_t b, bool join, uint64_t tiles_c, uint64_t *rt, uint64_t *ct) {
  if (!join) {
    *rt = b / tiles_c;
    *ct = b % tiles_c;
    return;
  }
  uint64_t c = (uint64_t)((sqrt(8.0 * (double)b + 1.0) - 1.0) / 2.0); /* then exact, whatever the rounding */
  while (c && c * (c + 1) / 2 > b) c--;
  while ((c + 1) * (c + 2) / 2 <= b) c++;
  *ct = c;
  *rt = b - c * (c + 1) / 2;
}

/* Row i (of nrows) and column j make a pair: the kernel's test and the
 * emulation's. */
template <int W, int F>
__host__ __device__ inline bool pair_hit(const search_params *p, uint64_t i, uint64_t nrows, uint64_t j,
                                         const uint64_t *mine, const uint64_t *theirs, uint32_t nf) {
  return i < nrows && (!p->join || j > i) && matches<W, F>(mine, theirs, nf, p);
}

/* Where a launch puts its pairs: *count of them were found (past cap: the
 * buffer overflowed and the launch must run again), out[2 * at] and
 * out[2 * at + 1] the row and column of pair `at` < cap. */
struct pair_out {
  unsigned long long *count;
  uint32_t *out;
  unsigned long long cap;
};

template <int W, int F>
__global__ void k_pairs(dev_codes rows, dev_codes cols, search_params p, uint64_t b0, uint64_t items, uint64_t tiles_c,
                        pair_out po) {
  extern __shared__ uint64_t tile[]; /* [TILE][nfields * W] */
  const uint32_t nf = nfields_of<F>(&cols), fw = nf * W, lane = threadIdx.x & 31;
  uint64_t mine[W * field_bound<F>()] = {};
  for (uint64_t b = b0 + blockIdx.x; b < b0 + items; b += gridDim.x) {
    uint64_t rt, ct;
    item_tiles(b, p.join, tiles_c, &rt, &ct);
    const uint64_t i = rt * TILE + threadIdx.x, j0 = ct * TILE;
    if (i < rows.n) load_code<W, F>(&rows, i, mine);
    __syncthreads(); /* every thread is done with the previous item's tile */
    if (j0 + threadIdx.x < cols.n) load_code<W, F>(&cols, j0 + threadIdx.x, tile + threadIdx.x * fw);
    __syncthreads();
    const uint64_t jn = cols.n - j0 < TILE ? cols.n - j0 : TILE;
    for (uint64_t jj = 0; jj < jn; jj++) { /* the same count for the whole block: whole warps vote */
      const bool hit = pair_hit<W, F>(&p, i, rows.n, j0 + jj, mine, tile + jj * fw, nf);
      const unsigned mask = __ballot_sync(0xffffffffu, hit);
      if (!mask) continue;
      const int leader = __ffs(mask) - 1;
      unsigned long long at = 0;
      if ((int)lane == leader) at = atomicAdd(po.count, (unsigned long long)__popc(mask));
      at = __shfl_sync(0xffffffffu, at, leader) + (unsigned)__popc(mask & ((1u << lane) - 1u));
      if (hit && at < po.cap) {
        po.out[2 * at] = (uint32_t)i;
        po.out[2 * at + 1] = (uint32_t)(j0 + jj);
      }
    }
  }
}

/* The k-nearest kernels' walk: this thread's query (q0 + qi, when qi < qn)
 * against every code of the block's stripe of tiles of nb codes, each tile
 * staged in tile[nb][W] by the whole block: fn(j, d) for code j at
 * distance d. */
template <int W, class Fn>
__device__ inline void stripe_distances(const dev_codes &q, const dev_codes &c, uint64_t q0, uint64_t qi, uint64_t qn,
                                        uint64_t *tile, uint32_t nb, Fn fn) {
  uint64_t mine[W] = {};
  if (qi < qn) load_field<W>(&q, 0, q0 + qi, mine);
  const uint64_t ntiles = (c.n + nb - 1) / nb;
  for (uint64_t tj = blockIdx.y; tj < ntiles; tj += gridDim.y) {
    const uint64_t j0 = tj * nb;
    __syncthreads(); /* every thread is done with the previous tile */
    if (j0 + threadIdx.x < c.n) load_field<W>(&c, 0, j0 + threadIdx.x, tile + threadIdx.x * W);
    __syncthreads();
    const uint64_t jn = c.n - j0 < nb ? c.n - j0 : nb;
    if (qi < qn)
      for (uint64_t jj = 0; jj < jn; jj++) fn(j0 + jj, distance<W>(mine, tile + jj * W));
  }
}

/* k nearest, pass 1: each query's histogram of distances (blockDim.x
 * queries a block, hist[query - q0][W * 64 + 1], zeroed before). */
template <int W> __global__ void k_hist(dev_codes q, dev_codes c, uint64_t q0, uint64_t qn, unsigned int *hist) {
  extern __shared__ uint64_t smem[];
  const uint32_t bins = W * 64 + 1, nb = blockDim.x;
  uint64_t *tile = smem;                             /* [nb][W] */
  unsigned int *h = (unsigned int *)(smem + nb * W); /* [nb][bins], a row per thread */
  for (uint32_t t = threadIdx.x; t < nb * bins; t += nb) h[t] = 0;
  const uint64_t qi = (uint64_t)blockIdx.x * nb + threadIdx.x;
  unsigned int *own = h + threadIdx.x * bins; /* this query's histogram */
  stripe_distances<W>(q, c, q0, qi, qn, tile, nb, [&](uint64_t, uint32_t d) { own[d]++; });
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < nb * bins; t += nb) { /* consecutive threads, consecutive bins */
    const uint64_t row = (uint64_t)blockIdx.x * nb + t / bins;
    if (row < qn && h[t]) atomicAdd(&hist[row * bins + t % bins], h[t]);
  }
}

/* Each query's cut: the smallest distance with at least k entries at or
 * below it (every distance when there are fewer), and how many are. */
struct cut_f {
  const unsigned int *hist;
  uint32_t bins, k;
  uint32_t *cut;
  unsigned long long *below;
  __host__ __device__ void operator()(uint64_t r) const {
    unsigned long long n = 0;
    uint32_t d = 0;
    for (; d < bins; d++) {
      n += hist[r * bins + d];
      if (n >= k) break;
    }
    cut[r] = d < bins ? d : bins - 1;
    below[r] = n;
  }
};

/* pass 2: entry j goes to query r's list when within its cut (the kernel's
 * per-thread work, and the emulation's). */
struct gather_out {
  const uint32_t *cut;             /* [queries of the launch] */
  const unsigned long long *start; /* where each query's list starts in out */
  unsigned long long *fill;        /* entries each list holds so far */
  uint32_t *out;
};

__host__ __device__ inline void gather_entry(const gather_out &g, uint64_t r, uint32_t d, uint64_t j) {
  if (d > g.cut[r]) return;
#ifdef __CUDA_ARCH__
  const unsigned long long at = atomicAdd(&g.fill[r], 1ull);
#else
  const unsigned long long at = g.fill[r]++;
#endif
  g.out[g.start[r] + at] = (uint32_t)j;
}

template <int W> __global__ void k_gather(dev_codes q, dev_codes c, uint64_t q0, uint64_t qn, gather_out g) {
  __shared__ uint64_t tile[TILE * W];
  const uint64_t qi = (uint64_t)blockIdx.x * TILE + threadIdx.x;
  stripe_distances<W>(q, c, q0, qi, qn, tile, TILE, [&](uint64_t j, uint32_t d) { gather_entry(g, qi, d, j); });
}

/* ------------------------------------------------------------ host side */

/* A search's codes uploaded (or, emulated, copied) in the device layout:
 * every field (field < 0) or field `field` alone (the view's field 0). */
accel_status upload_codes(accel__executor *x, const accel__codes *src, int field, dbuf *dev, dev_codes *view,
                          char *why) {
  const size_t n = src->n, words = src->words;
  const size_t f0 = field < 0 ? 0 : (size_t)field, nf = field < 0 ? src->nfields : 1;
  const size_t bytes = (n ? n : 1) * words * nf * sizeof(uint64_t);
  uint64_t *host = (uint64_t *)malloc(bytes);
  if (!host) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  for (size_t f = 0; f < nf; f++)
    for (size_t w = 0; w < words; w++) memcpy(host + (f * words + w) * n, src->field[f0 + f] + w * src->stride, n * 8);
  accel_status s = dev->get(x, bytes, why);
  if (!s) s = upload(x, dev->p, host, bytes, why, "code upload");
  if (!s) s = accel__cuda_check(x->sync(), why, "code upload"); /* the host copy is freed next */
  free(host);
  *view = dev_codes{src->words, (uint32_t)nf, (uint64_t)n, (uint64_t)n, dev->as<const uint64_t>()};
  return s;
}

/* A progress report; true when the callback asks to stop. */
bool cancelled(const accel__index_job *job, double fraction, char *why) {
  if (!job->progress || !job->progress(job->progress_user, job->stage, fraction)) return false;
  accel__why(why, "cancelled by the progress callback");
  return true;
}

/* ------------------------------------------------------------ join and range */

/* A pair search: rows against columns (join: i < j of one set), the rule,
 * and its work items (TILE x TILE blocks of pairs; tiles_c column tiles). */
struct pair_search {
  dev_codes rows, cols;
  search_params p;
  uint64_t tiles_c, items;
};

/* Items b0 .. b0 + m - 1 of a search, their pairs into po. */
template <int W, int F>
accel_status launch_pairs(accel__executor *x, const pair_search &ps, uint64_t b0, uint64_t m, const pair_out &po,
                          char *why) {
  const dev_codes &rows = ps.rows, &cols = ps.cols;
  const uint32_t nf = nfields_of<F>(&cols);
  const auto host = [&] { /* emulation: each item's rows against its columns */
                          uint64_t mine[W * field_bound<F>()] = {}, theirs[W * field_bound<F>()] = {};
                          for (uint64_t b = b0; b < b0 + m; b++) {
                            uint64_t rt, ct;
                            item_tiles(b, ps.p.join, ps.tiles_c, &rt, &ct);
                            for (uint64_t i = rt * TILE; i < rows.n && i < (rt + 1) * TILE; i++) {
                              load_code<W, F>(&rows, i, mine);
                              for (uint64_t j = ct * TILE; j < cols.n && j < (ct + 1) * TILE; j++) {
                                load_code<W, F>(&cols, j, theirs);
                                if (!pair_hit<W, F>(&ps.p, i, rows.n, j, mine, theirs, nf)) continue;
                                const unsigned long long at = (*po.count)++;
                                if (at < po.cap) {
                                  po.out[2 * at] = (uint32_t)i;
                                  po.out[2 * at + 1] = (uint32_t)j;
                                }
                              }
                            }
                          }
  };
  const dim3 grid((unsigned)(m < MAX_GRID ? m : MAX_GRID));
  return accel__cuda_check(x->launch(host, k_pairs<W, F>, grid, dim3(TILE), (size_t)TILE * nf * W * sizeof(uint64_t),
                                     rows, cols, ps.p, b0, m, ps.tiles_c, po),
                           why, "pair kernel launch");
}

typedef accel_status (*pairs_fn)(accel__executor *, const pair_search &, uint64_t, uint64_t, const pair_out &, char *);

/* The kernel for the codes' shape (words per field 1, 2 or 4; one field or
 * several), or null for a shape no index has. */
pairs_fn pick_pairs(uint32_t words, uint32_t nfields) {
  const bool one = nfields == 1;
  switch (words) {
  case 1: return one ? launch_pairs<1, 1> : launch_pairs<1, 0>;
  case 2: return one ? launch_pairs<2, 1> : launch_pairs<2, 0>;
  case 4: return one ? launch_pairs<4, 1> : launch_pairs<4, 0>;
  default: return nullptr;
  }
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

/* The pairs of a search collected on the host as its launches finish. */
struct host_pairs {
  uint32_t *p = nullptr; /* [2 * cap]: row, column */
  unsigned long long n = 0, cap = 0;
  hbuf pin;
  ~host_pairs() { free(p); }
  /* Room for `more` pairs after the n held. */
  accel_status reserve(unsigned long long more, char *why) {
    if (n + more <= cap) return ACCEL_OK;
    unsigned long long c = cap ? cap : 1024;
    while (c < n + more) c *= 2;
    uint32_t *q = (uint32_t *)realloc(p, (size_t)c * 2 * sizeof(uint32_t));
    if (!q) {
      accel__why(why, "out of host memory for %llu pairs", n + more);
      return ACCEL_ERR_OUT_OF_MEMORY;
    }
    p = q;
    cap = c;
    return ACCEL_OK;
  }
};

/* The pair buffer's size: what the memory budget allows (up to MAX_PAIRS),
 * at least one item's worth (fewer when the search has fewer pairs). */
unsigned long long pair_capacity(accel__executor *x, const pair_search &ps) {
  const double possible =
      ps.p.join ? (double)ps.rows.n * (double)(ps.rows.n - (ps.rows.n > 0)) / 2 : (double)ps.rows.n * (double)ps.cols.n;
  double cap = (double)(x->room() / (2 * sizeof(uint32_t)));
  if (cap > (double)MAX_PAIRS) cap = (double)MAX_PAIRS;
  const double item = possible < (double)TILE * TILE ? possible : (double)TILE * TILE;
  if (cap < item) cap = item;
  if (cap > possible) cap = possible;
  return cap < 1 ? 1 : (unsigned long long)cap;
}

/* Every item of the search in launches: each launch's pairs appended to
 * hp; a launch that overflows the buffer runs again in smaller parts. */
accel_status pair_launches(accel__executor *x, accel__index_job *job, const pair_search &ps, dbuf &dcount, dbuf &dout,
                           unsigned long long cap, host_pairs &hp, char *why) {
  const pairs_fn fn = pick_pairs(ps.cols.words, ps.cols.nfields);
  if (!fn) {
    accel__why(why, "codes of %u words per field have no pair kernel", ps.cols.words);
    return ACCEL_ERR_UNSUPPORTED;
  }
  const pair_out po{dcount.as<unsigned long long>(), dout.as<uint32_t>(), cap};
  const uint64_t items = ps.items;
  uint64_t m = items <= 64 ? items : (items / FIRST_LAUNCHES > 64 ? items / FIRST_LAUNCHES : 64);
  accel_status s = ACCEL_OK;
  for (uint64_t b0 = 0; !s && b0 < items;) {
    if (m > items - b0) m = items - b0;
    unsigned long long count = 0;
    s = accel__cuda_check(x->zero(dcount.p, sizeof count), why, "pair count reset");
    if (!s) s = fn(x, ps, b0, m, po, why);
    if (!s) s = download(x, &count, dcount.p, sizeof count, why, "pair count download");
    if (s) break;
    if (count > cap) { /* overflow: the same items again, in a smaller launch */
      if (m == 1) {
        accel__why(why, "one tile holds %llu pairs, more than the buffer's %llu", count, cap);
        return ACCEL_ERR_DEVICE;
      }
      const double fit = (double)m * (double)(cap / 2) / (double)count;
      m = fit < (double)(m / 2) ? (uint64_t)fit : m / 2;
      m = m ? m : 1;
      continue;
    }
    s = hp.reserve(count, why);
    if (!s && count) s = download_pinned(x, hp.pin, hp.p + 2 * hp.n, dout.p, (size_t)count * 2 * sizeof(uint32_t), why);
    if (s) break;
    hp.n += count;
    b0 += m;
    if (b0 < items && cancelled(job, (double)b0 / (double)items, why)) return ACCEL_ERR_CANCELLED;
    const double fit = count ? (double)m * (double)(cap / 2) / (double)count : (double)m * GROWTH;
    const double grow = fit < (double)m * GROWTH ? fit : (double)m * GROWTH;
    m = grow < 1 ? 1 : (uint64_t)grow;
  }
  return s;
}

/* All pairs of rows x cols (join: i < j of one set). On success the pairs
 * go to the sink. */
accel_status find_pairs(accel__executor *x, accel__call *call, accel__index_job *job, bool join) {
  char *why = call->why;
  dbuf drows, dcols, dcount, dout;
  pair_search ps;
  memset(&ps, 0, sizeof ps);
  accel_status s = upload_codes(x, &job->codes, -1, &dcols, &ps.cols, why);
  if (!s && !join) s = upload_codes(x, &job->queries, -1, &drows, &ps.rows, why);
  if (!s && join) ps.rows = ps.cols;
  ps.p.rule = job->search.rule;
  ps.p.join = join;
  for (uint32_t f = 0; f < ACCEL_INDEX_MAX_FIELDS; f++) ps.p.thresholds[f] = job->search.thresholds[f];
  const uint64_t tiles_r = (ps.rows.n + TILE - 1) / TILE;
  ps.tiles_c = (ps.cols.n + TILE - 1) / TILE;
  ps.items = join ? ps.tiles_c * (ps.tiles_c + 1) / 2 : tiles_r * ps.tiles_c;
  if (!s) s = dcount.get(x, sizeof(unsigned long long), why);
  const unsigned long long cap = s ? 0 : pair_capacity(x, ps);
  if (!s) s = dout.get(x, (size_t)cap * 2 * sizeof(uint32_t), why);
  host_pairs hp;
  if (!s) s = pair_launches(x, job, ps, dcount, dout, cap, hp, why);
  if (!s && hp.n) s = emit_pairs(job, ps, hp.p, hp.n, why); /* success: now the sink */
  job->used = ACCEL_INDEX_BRUTE_FORCE;
  return s;
}

/* ------------------------------------------------------------ k nearest */

/* A k-nearest search: the searched field of queries and codes on the
 * device, and per-query tables for a chunk of qc queries (host and device). */
struct knn_search {
  dev_codes q, c;
  uint32_t bins = 0;
  uint64_t qc = 0, lim = 0; /* queries per chunk; candidates per gather */
  uint32_t *cut = nullptr;
  unsigned long long *below = nullptr, *start = nullptr;
  uint32_t *found = nullptr;
  accel__knn_cand *cand = nullptr;
  size_t ncand = 0;
  dbuf dq, dc, dhist, dcut, dbelow, dstart, dfill, dout;
  /* The queries' codes on the host (the final ordering's distances), and
   * where results go: ids[(qi - base) * k], distances likewise (the job's
   * outputs with base 0, or a chunk's host staging, base its first query,
   * for outputs in device memory). */
  accel__codes hq{};
  uint64_t *hq_mem = nullptr, *ids = nullptr, base = 0;
  uint32_t *dist = nullptr;
  bool staged = false;
  ~knn_search() {
    free(hq_mem);
    if (staged) {
      free(ids);
      free(dist);
    }
    free(cut);
    free(below);
    free(start);
    free(found);
    free(cand);
  }
};

/* fn(i, j, d) for every query q0 + i (i < qn) and code j at distance d:
 * the k-nearest kernels' emulation. */
template <int W, class Fn> void each_distance(const dev_codes &q, const dev_codes &c, uint64_t q0, uint64_t qn, Fn fn) {
  uint64_t mine[W], theirs[W];
  for (uint64_t i = 0; i < qn; i++) {
    load_field<W>(&q, 0, q0 + i, mine);
    for (uint64_t j = 0; j < c.n; j++) {
      load_field<W>(&c, 0, j, theirs);
      fn(i, j, distance<W>(mine, theirs));
    }
  }
}

/* A k-nearest grid: x, the query tiles of qb; y, enough stripes of the
 * codes' tiles of qb to fill the device (about 4096 blocks in all). */
dim3 knn_grid(uint64_t qn, uint64_t ncodes, uint32_t qb) {
  const uint64_t gx = (qn + qb - 1) / qb, ntiles = (ncodes + qb - 1) / qb;
  uint64_t gy = (4096 + gx - 1) / gx;
  gy = gy > ntiles ? ntiles : gy > 65535 ? 65535 : gy;
  return dim3((unsigned)gx, (unsigned)(gy ? gy : 1));
}

template <int W>
accel_status launch_hist(accel__executor *x, const knn_search &ks, uint64_t q0, uint64_t qn, char *why) {
  const uint32_t bins = W * 64 + 1;
  uint32_t qb = HIST_SHARED / (bins * 4) / 32 * 32;
  qb = qb < 32 ? 32 : qb > TILE ? TILE : qb;
  const dev_codes &q = ks.q, &c = ks.c;
  unsigned int *hist = ks.dhist.as<unsigned int>();
  const auto host = [&] {
    each_distance<W>(q, c, q0, qn, [&](uint64_t i, uint64_t, uint32_t d) { hist[i * bins + d]++; });
  };
  const size_t shared = (size_t)qb * W * sizeof(uint64_t) + (size_t)qb * bins * sizeof(unsigned int);
  return accel__cuda_check(x->launch(host, k_hist<W>, knn_grid(qn, c.n, qb), dim3(qb), shared, q, c, q0, qn, hist), why,
                           "distance histogram launch");
}

template <int W>
accel_status launch_gather(accel__executor *x, const knn_search &ks, uint64_t q0, uint64_t qn, const gather_out &g,
                           char *why) {
  const dev_codes &q = ks.q, &c = ks.c;
  const auto host = [&] {
    each_distance<W>(q, c, q0, qn, [&](uint64_t i, uint64_t j, uint32_t d) { gather_entry(g, i, d, j); });
  };
  return accel__cuda_check(x->launch(host, k_gather<W>, knn_grid(qn, c.n, TILE), dim3(TILE), 0, q, c, q0, qn, g), why,
                           "nearest-neighbour gather launch");
}

/* Pass 1 for queries q0 .. q0 + qn - 1: their cuts and candidate counts in
 * ks.cut and ks.below. */
accel_status knn_cuts(accel__executor *x, knn_search &ks, uint32_t k, uint64_t q0, uint64_t qn, char *why) {
  const uint32_t bins = ks.bins;
  accel_status s =
      accel__cuda_check(x->zero(ks.dhist.p, (size_t)qn * bins * sizeof(unsigned int)), why, "distance histogram reset");
  if (!s) {
    switch (ks.c.words) {
    case 1: s = launch_hist<1>(x, ks, q0, qn, why); break;
    case 2: s = launch_hist<2>(x, ks, q0, qn, why); break;
    default: s = launch_hist<4>(x, ks, q0, qn, why);
    }
  }
  if (!s)
    s = each(
        x, qn,
        cut_f{ks.dhist.as<const unsigned int>(), bins, k, ks.dcut.as<uint32_t>(), ks.dbelow.as<unsigned long long>()},
        why, "nearest-neighbour cuts");
  if (!s) s = accel__cuda_check(x->download(ks.cut, ks.dcut.p, qn * sizeof(uint32_t)), why, "cut download");
  if (!s) s = download(x, ks.below, ks.dbelow.p, qn * sizeof(unsigned long long), why, "candidate count download");
  return s;
}

/* The candidates of queries r0 .. r0 + rn - 1 of the chunk at q0, gathered
 * into ks.found (ks.start relative to the first), checked to name entries
 * that exist, then each query's k nearest into the job's outputs. */
accel_status knn_gather(accel__executor *x, accel__index_job *job, knn_search &ks, uint64_t q0, uint64_t r0,
                        uint64_t rn, char *why) {
  const unsigned long long total = ks.start[rn];
  accel_status s = upload(x, ks.dstart.p, ks.start, rn * sizeof(unsigned long long), why, "candidate offset upload");
  if (!s) s = accel__cuda_check(x->zero(ks.dfill.p, rn * sizeof(unsigned long long)), why, "candidate count reset");
  const gather_out g{ks.dcut.as<const uint32_t>() + r0, ks.dstart.as<const unsigned long long>(),
                     ks.dfill.as<unsigned long long>(), ks.dout.as<uint32_t>()};
  if (!s) {
    switch (ks.c.words) {
    case 1: s = launch_gather<1>(x, ks, q0 + r0, rn, g, why); break;
    case 2: s = launch_gather<2>(x, ks, q0 + r0, rn, g, why); break;
    default: s = launch_gather<4>(x, ks, q0 + r0, rn, g, why);
    }
  }
  if (!s && total) s = download(x, ks.found, ks.dout.p, (size_t)total * sizeof(uint32_t), why, "candidate download");
  for (unsigned long long t = 0; !s && t < total; t++) /* the gather names entries that exist */
    if (ks.found[t] >= ks.c.n) {
      accel__why(why, "the nearest-neighbour gather returned entry %u of %llu", ks.found[t],
                 (unsigned long long)ks.c.n);
      s = ACCEL_ERR_DEVICE;
    }
  for (uint64_t t = 0; !s && t < rn; t++) { /* each list ordered by (distance, id) on the host */
    const uint64_t qi = q0 + r0 + t;
    const size_t m = (size_t)(ks.start[t + 1] - ks.start[t]);
    for (size_t e = 0; e < m; e++) {
      const uint32_t j = ks.found[ks.start[t] + e];
      ks.cand[e] = accel__knn_cand{accel__field_distance(&ks.hq, qi, &job->codes, j, job->field), job->entry_ids[j]};
    }
    const uint64_t at = (qi - ks.base) * job->k;
    accel__knn_emit(ks.cand, m, job->k, ks.ids + at, ks.dist ? ks.dist + at : nullptr);
  }
  return s;
}

/* Room for `want` candidates on the device and the host (grown when short). */
accel_status knn_room(accel__executor *x, knn_search &ks, uint64_t want, char *why) {
  if (ks.dout.n >= want * sizeof(uint32_t)) return ACCEL_OK;
  free(ks.found);
  if (!(ks.found = (uint32_t *)malloc((size_t)want * sizeof(uint32_t)))) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return ks.dout.get(x, (size_t)want * sizeof(uint32_t), why);
}

/* Pass 2 for a chunk's queries: their candidate lists in gathers of at
 * most ks.lim entries. */
accel_status knn_lists(accel__executor *x, accel__index_job *job, knn_search &ks, uint64_t q0, uint64_t qn, char *why) {
  unsigned long long chunk = 0; /* candidates of the whole chunk: the lists' room, up to ks.lim */
  for (uint64_t r = 0; r < qn; r++) chunk += ks.below[r];
  accel_status s = knn_room(x, ks, chunk < ks.lim ? (chunk ? chunk : 1) : ks.lim, why);
  for (uint64_t r0 = 0; !s && r0 < qn;) {
    uint64_t rn = 0;
    unsigned long long total = 0;
    size_t longest = 0;
    ks.start[0] = 0;
    while (r0 + rn < qn && total + ks.below[r0 + rn] <= ks.lim) {
      total += ks.below[r0 + rn];
      if (ks.below[r0 + rn] > longest) longest = (size_t)ks.below[r0 + rn];
      ks.start[++rn] = total;
    }
    if (!rn) {
      accel__why(why, "query %llu has %llu entries at or below its k-th distance, more than the device memory holds",
                 (unsigned long long)(q0 + r0), ks.below[r0]);
      return ACCEL_ERR_DEVICE_MEMORY;
    }
    if (longest > ks.ncand) {
      free(ks.cand);
      ks.ncand = 0;
      if (!(ks.cand = (accel__knn_cand *)malloc(longest * sizeof(accel__knn_cand)))) {
        accel__why(why, "out of host memory");
        return ACCEL_ERR_OUT_OF_MEMORY;
      }
      ks.ncand = longest;
    }
    s = knn_gather(x, job, ks, q0, r0, rn, why);
    r0 += rn;
  }
  return s;
}

/* Buffers for chunks of queries: each query's histogram and tables on the
 * device within half the budget, the candidate lists within half of the rest. */
accel_status knn_buffers(accel__executor *x, knn_search &ks, char *why) {
  const uint64_t per_query = (uint64_t)ks.bins * sizeof(unsigned int) + sizeof(uint32_t) + 3 * sizeof(uint64_t);
  ks.qc = x->room() / 2 / per_query;
  ks.qc = ks.qc < 1 ? 1 : ks.qc > ks.q.n ? ks.q.n : ks.qc;
  ks.cut = (uint32_t *)malloc(ks.qc * sizeof(uint32_t));
  ks.below = (unsigned long long *)malloc(ks.qc * sizeof(unsigned long long));
  ks.start = (unsigned long long *)malloc((ks.qc + 1) * sizeof(unsigned long long));
  if (!ks.cut || !ks.below || !ks.start) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_status s = ks.dhist.get(x, (size_t)ks.qc * ks.bins * sizeof(unsigned int), why);
  if (!s) s = ks.dcut.get(x, (size_t)ks.qc * sizeof(uint32_t), why);
  if (!s) s = ks.dbelow.get(x, (size_t)ks.qc * sizeof(unsigned long long), why);
  if (!s) s = ks.dstart.get(x, (size_t)ks.qc * sizeof(unsigned long long), why);
  if (!s) s = ks.dfill.get(x, (size_t)ks.qc * sizeof(unsigned long long), why);
  if (s) return s;
  ks.lim = x->room() / 2 / sizeof(uint32_t);
  ks.lim = ks.lim < 1 ? 1 : ks.lim > MAX_CANDIDATES ? MAX_CANDIDATES : ks.lim;
  return ACCEL_OK;
}

/* Query i's word w of field f from rows [nq][per] (a device array) into
 * the device layout, out[w * nq + i]. */
struct field_of_rows_f {
  const uint64_t *rows;
  uint64_t *out;
  uint64_t nq;
  uint32_t per, words, f;
  __host__ __device__ void operator()(uint64_t t) const {
    const uint64_t i = t % nq, w = t / nq;
    out[t] = rows[i * per + (uint64_t)f * words + w];
  }
};

/* The queries of accel_index_knn_arrays, rows in device memory: the
 * searched field's words in the device layout, made on the device, and
 * their host copy for the final ordering; the outputs staged per chunk. */
accel_status device_queries(accel__executor *x, const accel__index_job *job, knn_search &ks, char *why) {
  const uint32_t words = job->codes.words, nf = job->codes.nfields;
  const uint64_t nq = job->nq;
  const size_t bytes = (size_t)nq * words * sizeof(uint64_t);
  ks.staged = true;
  ks.hq_mem = (uint64_t *)malloc(bytes);
  if (!ks.hq_mem) {
    accel__why(why, "out of host memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_status s = ks.dq.get(x, bytes, why);
  if (!s)
    s = each(
        x, nq * words,
        field_of_rows_f{(const uint64_t *)job->array_rows, ks.dq.as<uint64_t>(), nq, nf * words, words, job->field},
        why, "query layout");
  if (!s) s = download(x, ks.hq_mem, ks.dq.p, bytes, why, "query download");
  ks.q = dev_codes{words, 1, nq, nq, ks.dq.as<const uint64_t>()};
  ks.hq.words = words;
  ks.hq.nfields = nf;
  ks.hq.n = ks.hq.stride = nq;
  ks.hq.field[job->field] = ks.hq_mem;
  return s;
}

/* A chunk's staged results into the device arrays of the job. */
accel_status put_results(accel__executor *x, const accel__index_job *job, const knn_search &ks, uint64_t q0,
                         uint64_t qn, char *why) {
  const size_t at = (size_t)q0 * job->k, n = (size_t)qn * job->k;
  accel_status s = upload(x, (uint64_t *)job->array_ids + at, ks.ids, n * sizeof(uint64_t), why, "result upload");
  if (!s && job->array_distances)
    s = upload(x, (uint32_t *)job->array_distances + at, ks.dist, n * sizeof(uint32_t), why, "result upload");
  if (!s) s = accel__cuda_check(x->sync(), why, "result upload"); /* the staging is reused next */
  return s;
}

accel_status knn(accel__executor *x, accel__call *call, accel__index_job *job) {
  char *why = call->why;
  knn_search ks;
  ks.bins = job->codes.words * 64 + 1;
  const bool rows = job->array_rows != nullptr; /* device arrays (accel_index_knn_arrays) */
  /* the caller's work on its arrays (any stream) is done before they are read or written */
  accel_status s = rows ? accel__cuda_check(x->device_sync(), why, "cudaDeviceSynchronize") : ACCEL_OK;
  if (!s)
    s = rows ? device_queries(x, job, ks, why) : upload_codes(x, &job->queries, (int)job->field, &ks.dq, &ks.q, why);
  if (!rows) {
    ks.hq = job->queries;
    ks.ids = job->out_ids;
    ks.dist = job->out_distances;
  }
  if (!s) s = upload_codes(x, &job->codes, (int)job->field, &ks.dc, &ks.c, why);
  if (!s && !ks.q.n) return ACCEL_OK;
  if (!s) s = knn_buffers(x, ks, why);
  if (!s && rows) { /* the results' host staging: at most STAGING bytes a chunk */
    const uint64_t most = STAGING / ((uint64_t)job->k * 12);
    ks.qc = ks.qc < most ? ks.qc : most ? most : 1;
    ks.ids = (uint64_t *)malloc((size_t)ks.qc * job->k * sizeof(uint64_t));
    ks.dist = job->array_distances ? (uint32_t *)malloc((size_t)ks.qc * job->k * sizeof(uint32_t)) : nullptr;
    if (!ks.ids || (job->array_distances && !ks.dist)) {
      accel__why(why, "out of host memory for the results");
      s = ACCEL_ERR_OUT_OF_MEMORY;
    }
  }
  for (uint64_t q0 = 0; !s && q0 < ks.q.n; q0 += ks.qc) {
    const uint64_t qn = ks.q.n - q0 < ks.qc ? ks.q.n - q0 : ks.qc;
    ks.base = rows ? q0 : 0;
    s = knn_cuts(x, ks, job->k, q0, qn, why);
    if (!s) s = knn_lists(x, job, ks, q0, qn, why);
    if (!s && rows) s = put_results(x, job, ks, q0, qn, why);
    if (!s && q0 + qn < ks.q.n && cancelled(job, (double)(q0 + qn) / (double)ks.q.n, why)) s = ACCEL_ERR_CANCELLED;
  }
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
