/*
 * CPU searches: brute force with hardware popcount (AVX-512 VPOPCNTDQ, or
 * POPCNT, picked at run time), multi-index hashing, and k-nearest
 * neighbours by a histogram of distances. OpenMP threads throughout.
 */
#include "index/mih.h"
#include "index/ops.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ row scans */

/* Emit (emit_a, j) for every j in [j0, j1) of b that the pair (a[i], b[j])
 * matches; the same arithmetic three times, for three instruction sets. */
typedef void (*scan_fn)(const accel__codes *a, size_t i, const accel__codes *b, size_t j0, size_t j1,
                        const accel__search *s, uint32_t emit_a, accel__pair_buf *pb);

#define SCAN_SCALAR(from)                                                                                              \
  for (size_t jj = (from); jj < j1; jj++)                                                                              \
    if (accel__pair_matches(a, i, b, jj, s)) accel__pair_push(pb, emit_a, (uint32_t)jj);

static void scan_generic(const accel__codes *a, size_t i, const accel__codes *b, size_t j0, size_t j1,
                         const accel__search *s, uint32_t emit_a, accel__pair_buf *pb) {
  SCAN_SCALAR(j0)
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("popcnt"))) static void scan_popcnt(const accel__codes *a, size_t i, const accel__codes *b,
                                                          size_t j0, size_t j1, const accel__search *s,
                                                          uint32_t emit_a, accel__pair_buf *pb) {
  SCAN_SCALAR(j0)
}

__attribute__((target("avx512f,avx512vpopcntdq,popcnt"))) static void
scan_avx512(const accel__codes *a, size_t i, const accel__codes *b, size_t j0, size_t j1, const accel__search *s,
            uint32_t emit_a, accel__pair_buf *pb) {
  size_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    __mmask8 mask = s->rule == ACCEL_INDEX_ALL ? 0xff : 0;
    for (uint32_t f = 0; f < a->nfields; f++) {
      __m512i d = _mm512_setzero_si512();
      for (uint32_t w = 0; w < a->words; w++) {
        const __m512i x = _mm512_set1_epi64((long long)a->field[f][w * a->stride + i]);
        const __m512i y = _mm512_loadu_si512((const void *)(b->field[f] + w * b->stride + j));
        d = _mm512_add_epi64(d, _mm512_popcnt_epi64(_mm512_xor_si512(x, y)));
      }
      const __mmask8 within = _mm512_cmple_epu64_mask(d, _mm512_set1_epi64(s->thresholds[f]));
      mask = s->rule == ACCEL_INDEX_ALL ? (__mmask8)(mask & within) : (__mmask8)(mask | within);
    }
    while (mask) {
      const int bit = __builtin_ctz(mask);
      accel__pair_push(pb, emit_a, (uint32_t)(j + (size_t)bit));
      mask = (__mmask8)(mask & (mask - 1));
    }
  }
  SCAN_SCALAR(j)
}
#endif

/* One field of one word (a single 64-bit hash kind, the common case): a
 * tile of rows [i0, i1) against columns [j0, j1), four rows held in
 * registers per pass over the columns. For a join only j > i is emitted. */
typedef void (*tile1_fn)(const uint64_t *rows, size_t i0, size_t i1, const uint64_t *cols, size_t j0, size_t j1,
                         uint32_t r, bool join, accel__pair_buf *pb);

static inline void tile1_tail(const uint64_t *rows, size_t i, size_t ni, const uint64_t *cols, size_t j, size_t j1,
                              uint32_t r, bool join, accel__pair_buf *pb) {
  for (; j < j1; j++)
    for (size_t k = 0; k < ni; k++)
      if ((!join || j > i + k) && (uint32_t)__builtin_popcountll(rows[i + k] ^ cols[j]) <= r)
        accel__pair_push(pb, (uint32_t)(i + k), (uint32_t)j);
}

#define TILE1_SCALAR_BODY                                                                                              \
  for (size_t i = i0; i < i1; i += 4) {                                                                                \
    const size_t ni = i1 - i < 4 ? i1 - i : 4;                                                                         \
    const size_t js = join && i + 1 > j0 ? i + 1 : j0;                                                                 \
    if (js < j1) tile1_tail(rows, i, ni, cols, js, j1, r, join, pb);                                                   \
  }

static void tile1_generic(const uint64_t *rows, size_t i0, size_t i1, const uint64_t *cols, size_t j0, size_t j1,
                          uint32_t r, bool join, accel__pair_buf *pb) {
  TILE1_SCALAR_BODY
}

#if defined(__x86_64__)
__attribute__((target("popcnt"))) static void tile1_popcnt(const uint64_t *rows, size_t i0, size_t i1,
                                                           const uint64_t *cols, size_t j0, size_t j1, uint32_t r,
                                                           bool join, accel__pair_buf *pb) {
  TILE1_SCALAR_BODY
}

__attribute__((target("avx512f,avx512vpopcntdq,popcnt"))) static void
tile1_avx512(const uint64_t *rows, size_t i0, size_t i1, const uint64_t *cols, size_t j0, size_t j1, uint32_t r,
             bool join, accel__pair_buf *pb) {
  const __m512i th = _mm512_set1_epi64(r);
  for (size_t i = i0; i < i1; i += 4) {
    const size_t ni = i1 - i < 4 ? i1 - i : 4;
    const size_t js = join && i + 1 > j0 ? i + 1 : j0;
    /* rows past the tile's end repeat the last one; their matches are dropped */
    const __m512i a0 = _mm512_set1_epi64((long long)rows[i]);
    const __m512i a1 = _mm512_set1_epi64((long long)rows[i + (ni > 1 ? 1 : 0)]);
    const __m512i a2 = _mm512_set1_epi64((long long)rows[i + (ni > 2 ? 2 : 0)]);
    const __m512i a3 = _mm512_set1_epi64((long long)rows[i + (ni > 3 ? 3 : 0)]);
    size_t j = js;
    for (; j + 8 <= j1; j += 8) {
      const __m512i y = _mm512_loadu_si512((const void *)(cols + j));
      const __mmask8 m0 = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(a0, y)), th);
      const __mmask8 m1 = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(a1, y)), th);
      const __mmask8 m2 = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(a2, y)), th);
      const __mmask8 m3 = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(a3, y)), th);
      if (__builtin_expect((m0 | m1 | m2 | m3) != 0, 0)) {
        const __mmask8 ms[4] = {m0, m1, m2, m3};
        for (size_t k = 0; k < ni; k++)
          for (unsigned m = ms[k]; m; m &= m - 1) {
            const size_t jj = j + (size_t)__builtin_ctz(m);
            if (!join || jj > i + k) accel__pair_push(pb, (uint32_t)(i + k), (uint32_t)jj);
          }
      }
    }
    if (j < j1) tile1_tail(rows, i, ni, cols, j, j1, r, join, pb);
  }
}
#endif

static tile1_fn pick_tile1(void) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) return tile1_avx512;
  if (__builtin_cpu_supports("popcnt")) return tile1_popcnt;
#endif
  return tile1_generic;
}

static scan_fn pick_scan(void) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) return scan_avx512;
  if (__builtin_cpu_supports("popcnt")) return scan_popcnt;
#endif
  return scan_generic;
}

const char *accel__index_isa(void) {
  scan_fn f = pick_scan();
#if defined(__x86_64__)
  if (f == scan_avx512) return "avx512-vpopcntdq";
  if (f == scan_popcnt) return "popcnt";
#endif
  return "generic";
}

/* ------------------------------------------------------------ progress */

typedef struct progress {
  accel__index_job *job;
  size_t total, done;
  int cancelled;
} progress;

/* Called by every thread; only the caller's thread reports. */
static bool progress_step(progress *p, size_t units) {
  size_t d = __atomic_add_fetch(&p->done, units, __ATOMIC_RELAXED);
#ifdef _OPENMP
  const bool caller = omp_get_thread_num() == 0;
#else
  const bool caller = true;
#endif
  if (caller && p->job->progress &&
      p->job->progress(p->job->progress_user, p->job->stage, p->total ? (double)d / (double)p->total : 1.0))
    __atomic_store_n(&p->cancelled, 1, __ATOMIC_RELAXED);
  return !__atomic_load_n(&p->cancelled, __ATOMIC_RELAXED);
}

static accel_status progress_end(progress *p, accel__call *call) {
  if (p->cancelled) {
    accel__why(call->why, "cancelled by the progress callback");
    return ACCEL_ERR_CANCELLED;
  }
  if (p->job->progress) p->job->progress(p->job->progress_user, p->job->stage, 1.0);
  return ACCEL_OK;
}

/* A thread's pair buffer; on failure *oom is set and the search fails. */
static accel__pair_buf *pair_buf_new(accel__pair_sink *sink, int *oom) {
  accel__pair_buf *pb = malloc(sizeof *pb);
  if (pb) {
    pb->n = 0;
    pb->sink = sink;
  } else {
    __atomic_store_n(oom, 1, __ATOMIC_RELAXED);
  }
  return pb;
}

static accel_status oom_status(accel__call *call) {
  accel__why(call->why, "out of memory");
  return ACCEL_ERR_OUT_OF_MEMORY;
}

/* ------------------------------------------------------------ brute force */

enum { ROWS = 64, COLS = 4096 };

/* Rows x columns in blocks of ROWS rows; each block passes over the columns
 * in tiles of COLS, kept in cache while the block's rows meet them. A join
 * compares only j > i (rows and columns are the same codes). */
static void bf_block(const accel__codes *rows, size_t i0, size_t i1, const accel__codes *cols, bool join,
                     const accel__search *s, scan_fn scan, tile1_fn tile1, accel__pair_buf *pb) {
  const bool one_word = rows->nfields == 1 && rows->words == 1;
  for (size_t j0 = join ? i0 + 1 : 0; j0 < cols->n; j0 += COLS) {
    const size_t j1 = j0 + COLS < cols->n ? j0 + COLS : cols->n;
    if (one_word) {
      tile1(rows->field[0], i0, i1, cols->field[0], j0, j1, s->thresholds[0], join, pb);
      continue;
    }
    for (size_t i = i0; i < i1; i++) {
      const size_t js = join && i + 1 > j0 ? i + 1 : j0;
      if (js < j1) scan(rows, i, cols, js, j1, s, (uint32_t)i, pb);
    }
  }
}

static accel_status bf_search(accel__call *call, accel__index_job *job, bool join) {
  const accel__codes *rows = join ? &job->codes : &job->queries, *cols = &job->codes;
  const scan_fn scan = pick_scan();
  const tile1_fn tile1 = pick_tile1();
  const size_t n = rows->n, blocks = (n + ROWS - 1) / ROWS;
  progress p = {job, blocks, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 1)
    for (long long blk = 0; blk < (long long)blocks; blk++) {
      if (!pb || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED)) continue;
      const size_t i0 = (size_t)blk * ROWS, i1 = i0 + ROWS < n ? i0 + ROWS : n;
      bf_block(rows, i0, i1, cols, join, &job->search, scan, tile1, pb);
      progress_step(&p, 1);
    }
    if (pb) accel__pair_flush(pb);
    free(pb);
  }
  return oom ? oom_status(call) : progress_end(&p, call);
}

static accel_status bf_join(accel__call *call, accel__index_job *job) { return bf_search(call, job, true); }
static accel_status bf_range(accel__call *call, accel__index_job *job) { return bf_search(call, job, false); }

/* ------------------------------------------------------------ multi-index hashing */

/* With rule ALL, one field drives the search (the smallest threshold: the
 * fewest candidates) and every candidate is checked on all fields. With rule
 * ANY, each field drives a pass, and a pair is emitted in the pass of the
 * first field it matches on, so once. */
typedef struct mih_plan {
  int npasses;
  uint32_t field[ACCEL_INDEX_MAX_FIELDS], m[ACCEL_INDEX_MAX_FIELDS];
} mih_plan;

static bool plan_mih(const accel__codes *c, const accel__search *s, uint32_t bits, mih_plan *p) {
  memset(p, 0, sizeof *p);
  if (s->rule == ACCEL_INDEX_ALL) {
    uint32_t best = 0;
    for (uint32_t f = 1; f < c->nfields; f++)
      if (s->thresholds[f] < s->thresholds[best]) best = f;
    p->npasses = 1;
    p->field[0] = best;
    p->m[0] = accel__mih_substrings(bits, s->thresholds[best]);
    return p->m[0] != 0;
  }
  p->npasses = (int)c->nfields;
  for (uint32_t f = 0; f < c->nfields; f++) {
    p->field[f] = f;
    p->m[f] = accel__mih_substrings(bits, s->thresholds[f]);
    if (!p->m[f]) return false;
  }
  return true;
}

/* Does pass `pass` (driving field f) own the pair? ALL: the full rule. ANY:
 * within f's threshold and not within that of an earlier field. */
static inline bool pass_owns(const accel__codes *a, size_t i, const accel__codes *b, size_t j, const accel__search *s,
                             uint32_t f) {
  if (s->rule == ACCEL_INDEX_ALL) return accel__pair_matches(a, i, b, j, s);
  if (accel__field_distance(a, i, b, j, f) > s->thresholds[f]) return false;
  for (uint32_t g = 0; g < f; g++)
    if (accel__field_distance(a, i, b, j, g) <= s->thresholds[g]) return false;
  return true;
}

static accel_status mih_join(accel__call *call, accel__index_job *job, const mih_plan *plan) {
  const accel__codes *c = &job->codes;
  progress p = {job, 0, 0, 0};
  int oom = 0;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  for (int k = 0; k < plan->npasses; k++) {
    accel_status st = job->index ? accel__mih_get(job->index, plan->field[k], plan->m[k], call->threads, &tables[k])
                                 : ACCEL_ERR_INTERNAL;
    if (st) {
      accel__why(call->why, "out of memory for the multi-index tables");
      return st;
    }
    p.total += plan->m[k];
  }
  uint32_t *runs = malloc((c->n + 1) * sizeof(uint32_t));
  if (!runs) {
    accel__why(call->why, "out of memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  for (int k = 0; k < plan->npasses && !p.cancelled; k++) {
    const accel__mih_table *t = tables[k];
    const uint32_t f = plan->field[k];
    for (uint32_t sub = 0; sub < t->m && !p.cancelled; sub++) {
      const uint64_t *sk = t->sorted_keys + (size_t)sub * t->n;
      const uint32_t *order = t->order + (size_t)sub * t->n;
      /* runs of equal substrings with two or more entries */
      size_t nruns = 0;
      for (size_t a = 0; a < c->n;) {
        size_t b = a + 1;
        while (b < c->n && sk[b] == sk[a]) b++;
        if (b - a > 1) runs[nruns++] = (uint32_t)a;
        a = b;
      }
#pragma omp parallel num_threads(call->threads)
      {
        accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 64)
        for (long long r = 0; r < (long long)nruns; r++) {
          if (!pb) continue;
          const size_t a0 = runs[r];
          size_t a1 = a0 + 1;
          while (a1 < c->n && sk[a1] == sk[a0]) a1++;
          for (size_t x = a0; x < a1; x++)
            for (size_t y = x + 1; y < a1; y++) {
              const uint32_t pi = order[x], qi = order[y];
              bool seen = false; /* the pair belongs to the first substring the two share */
              for (uint32_t s2 = 0; s2 < sub && !seen; s2++)
                seen = t->keys[(size_t)s2 * t->n + pi] == t->keys[(size_t)s2 * t->n + qi];
              if (seen || !pass_owns(c, pi, c, qi, &job->search, f)) continue;
              accel__pair_push(pb, pi < qi ? pi : qi, pi < qi ? qi : pi);
            }
        }
        if (pb) accel__pair_flush(pb);
        free(pb);
      }
      progress_step(&p, 1);
    }
  }
  free(runs);
  return oom ? oom_status(call) : progress_end(&p, call);
}

static size_t lower_bound(const uint64_t *v, size_t n, uint64_t key) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static accel_status mih_range(accel__call *call, accel__index_job *job, const mih_plan *plan) {
  const accel__codes *c = &job->codes, *q = &job->queries;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  for (int k = 0; k < plan->npasses; k++) {
    accel_status st = job->index ? accel__mih_get(job->index, plan->field[k], plan->m[k], call->threads, &tables[k])
                                 : ACCEL_ERR_INTERNAL;
    if (st) {
      accel__why(call->why, "out of memory for the multi-index tables");
      return st;
    }
  }
  progress p = {job, q->n, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 16)
    for (long long qi = 0; qi < (long long)q->n; qi++) {
      if (!pb || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED)) continue;
      for (int k = 0; k < plan->npasses; k++) {
        const accel__mih_table *t = tables[k];
        const uint32_t f = plan->field[k];
        uint64_t qkeys[ACCEL__MIH_MAX_M];
        for (uint32_t sub = 0; sub < t->m; sub++) qkeys[sub] = accel__substring(q, f, (size_t)qi, t->start[sub], t->len[sub]);
        for (uint32_t sub = 0; sub < t->m; sub++) {
          const uint64_t *sk = t->sorted_keys + (size_t)sub * t->n;
          const uint32_t *order = t->order + (size_t)sub * t->n;
          for (size_t x = lower_bound(sk, t->n, qkeys[sub]); x < t->n && sk[x] == qkeys[sub]; x++) {
            const uint32_t pi = order[x];
            bool seen = false;
            for (uint32_t s2 = 0; s2 < sub && !seen; s2++) seen = t->keys[(size_t)s2 * t->n + pi] == qkeys[s2];
            if (!seen && pass_owns(q, (size_t)qi, c, pi, &job->search, f)) accel__pair_push(pb, (uint32_t)qi, pi);
          }
        }
      }
      progress_step(&p, 1);
    }
    if (pb) accel__pair_flush(pb);
    free(pb);
  }
  return oom ? oom_status(call) : progress_end(&p, call);
}

/* Multi-index hashing pays when few pairs share a substring: the expected
 * share for uniform codes is sum over substrings of 2^-len; brute force
 * compares every pair at a fraction of the cost of a candidate. Small sets
 * always go brute force. */
bool accel__prefer_mih(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  if (n < 2048) return false;
  for (uint32_t f = 0; f < nfields; f++) {
    if (s->rule == ACCEL_INDEX_ALL && f > 0) break; /* ALL: one driving field (checked below) */
    uint32_t t = s->thresholds[f];
    if (s->rule == ACCEL_INDEX_ALL)
      for (uint32_t g = 1; g < nfields; g++)
        if (s->thresholds[g] < t) t = s->thresholds[g];
    const uint32_t m = accel__mih_substrings(bits, t);
    if (!m) return false;
    double share = 0;
    for (uint32_t k = 0; k < m; k++) {
      const uint32_t len = (uint32_t)((uint64_t)bits * (k + 1) / m) - (uint32_t)((uint64_t)bits * k / m);
      share += len >= 60 ? 0 : 1.0 / (double)((uint64_t)1 << len);
    }
    if (share > 0.02) return false;
  }
  return true;
}

static accel_status cpu_join(accel__call *call, accel__index_job *job) {
  mih_plan plan;
  const bool mih_ok = plan_mih(&job->codes, &job->search, job->bits, &plan);
  bool mih = job->search.algorithm == ACCEL_INDEX_MULTI_INDEX ||
             (job->search.algorithm == ACCEL_INDEX_AUTO && accel__prefer_mih(job->codes.n, job->bits, &job->search,
                                                                              job->codes.nfields));
  if (mih && !mih_ok) mih = false; /* thresholds too large for substrings: brute force is exact too */
  job->used = mih ? ACCEL_INDEX_MULTI_INDEX : ACCEL_INDEX_BRUTE_FORCE;
  return mih ? mih_join(call, job, &plan) : bf_join(call, job);
}

static accel_status cpu_range(accel__call *call, accel__index_job *job) {
  mih_plan plan;
  const bool mih_ok = plan_mih(&job->codes, &job->search, job->bits, &plan);
  /* the tables cost a sort of the index: worth it for many queries */
  bool mih = job->search.algorithm == ACCEL_INDEX_MULTI_INDEX ||
             (job->search.algorithm == ACCEL_INDEX_AUTO && job->queries.n * 16 >= job->codes.n / 64 &&
              accel__prefer_mih(job->codes.n, job->bits, &job->search, job->codes.nfields));
  if (mih && !mih_ok) mih = false;
  job->used = mih ? ACCEL_INDEX_MULTI_INDEX : ACCEL_INDEX_BRUTE_FORCE;
  return mih ? mih_range(call, job, &plan) : bf_range(call, job);
}

/* ------------------------------------------------------------ k nearest */

typedef struct cand {
  uint32_t d;
  uint64_t id;
} cand;

static int cmp_cand(const void *x, const void *y) {
  const cand *a = x, *b = y;
  if (a->d != b->d) return a->d < b->d ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

/* Distances are small integers: a histogram gives the k-th smallest, then
 * the entries at or below it are sorted by (distance, id). */
static accel_status cpu_knn(accel__call *call, accel__index_job *job) {
  const accel__codes *c = &job->codes, *q = &job->queries;
  const uint32_t k = job->k, f = job->field, maxd = c->words * 64;
  progress p = {job, q->n, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    uint16_t *dist = malloc((c->n ? c->n : 1) * sizeof(uint16_t));
    size_t *hist = malloc((maxd + 1) * sizeof(size_t));
    cand *cs = NULL;
    size_t ccap = 0;
    if (!dist || !hist) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 4)
    for (long long qi = 0; qi < (long long)q->n; qi++) {
      if (!dist || !hist || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED) || __atomic_load_n(&oom, __ATOMIC_RELAXED))
        continue;
      memset(hist, 0, (maxd + 1) * sizeof(size_t));
      for (size_t j = 0; j < c->n; j++) {
        dist[j] = (uint16_t)accel__field_distance(q, (size_t)qi, c, j, f);
        hist[dist[j]]++;
      }
      uint32_t cut = maxd;
      size_t below = 0;
      for (uint32_t d = 0; d <= maxd; d++) {
        below += hist[d];
        if (below >= k) {
          cut = d;
          break;
        }
      }
      size_t nc = 0;
      if (below > ccap) {
        free(cs);
        ccap = below;
        cs = malloc(ccap * sizeof(cand));
        if (!cs) {
          __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
          ccap = 0;
          continue;
        }
      }
      for (size_t j = 0; j < c->n; j++)
        if (dist[j] <= cut) cs[nc++] = (cand){dist[j], job->entry_ids[j]};
      qsort(cs, nc, sizeof(cand), cmp_cand);
      for (uint32_t r = 0; r < k; r++) {
        job->out_ids[(size_t)qi * k + r] = r < nc ? cs[r].id : UINT64_MAX;
        if (job->out_distances) job->out_distances[(size_t)qi * k + r] = r < nc ? cs[r].d : UINT32_MAX;
      }
      progress_step(&p, 1);
    }
    free(dist);
    free(hist);
    free(cs);
  }
  if (oom) {
    accel__why(call->why, "out of memory for %zu distances", c->n);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return progress_end(&p, call);
}

const accel__index_ops accel__cpu_index_ops = {
    .join = cpu_join,
    .range = cpu_range,
    .knn = cpu_knn,
};
