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
                                                          size_t j0, size_t j1, const accel__search *s, uint32_t emit_a,
                                                          accel__pair_buf *pb) {
  SCAN_SCALAR(j0)
}

__attribute__((target("avx512f,avx512vpopcntdq,popcnt"))) static void scan_avx512(const accel__codes *a, size_t i,
                                                                                  const accel__codes *b, size_t j0,
                                                                                  size_t j1, const accel__search *s,
                                                                                  uint32_t emit_a,
                                                                                  accel__pair_buf *pb) {
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

__attribute__((target("avx512f,avx512vpopcntdq,popcnt"))) static void tile1_avx512(const uint64_t *rows, size_t i0,
                                                                                   size_t i1, const uint64_t *cols,
                                                                                   size_t j0, size_t j1, uint32_t r,
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

/* The popcount kernels this CPU runs: 2 AVX-512 VPOPCNTDQ, 1 POPCNT, 0 generic. */
static int isa_level(void) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) return 2;
  if (__builtin_cpu_supports("popcnt")) return 1;
#endif
  return 0;
}

#if defined(__x86_64__)
static const tile1_fn TILE1[3] = {tile1_generic, tile1_popcnt, tile1_avx512};
static const scan_fn SCAN[3] = {scan_generic, scan_popcnt, scan_avx512};
#else
static const tile1_fn TILE1[1] = {tile1_generic};
static const scan_fn SCAN[1] = {scan_generic};
#endif

static tile1_fn pick_tile1(void) { return TILE1[isa_level()]; }

static scan_fn pick_scan(void) { return SCAN[isa_level()]; }

const char *accel__index_isa(void) {
  static const char *const NAMES[3] = {"generic", "popcnt", "avx512-vpopcntdq"};
  return NAMES[isa_level()];
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

#if __has_attribute(target_clones) && defined(__x86_64__)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define POPCNT_CLONES
#endif

/* Is a pair found through field f (at distance d_f <= its threshold, known)
 * owned by that pass? ALL: every other field within its threshold too. ANY:
 * no earlier field within its threshold (that field's pass emits it). */
static inline bool others_agree(const accel__codes *a, size_t i, const accel__codes *b, size_t j,
                                const accel__search *s, uint32_t f) {
  if (s->rule == ACCEL_INDEX_ALL) {
    for (uint32_t g = 0; g < a->nfields; g++)
      if (g != f && accel__field_distance(a, i, b, j, g) > s->thresholds[g]) return false;
    return true;
  }
  for (uint32_t g = 0; g < f; g++)
    if (accel__field_distance(a, i, b, j, g) <= s->thresholds[g]) return false;
  return true;
}

/* Did an earlier substring than `sub` already match exactly? Then the pair
 * belongs to that substring's run (each pair is examined once). `x` holds
 * the XOR of the two codes of the driving field. */
static inline bool earlier_substring_equal(const accel__mih_table *t, const uint64_t *x, uint32_t sub) {
  for (uint32_t s2 = 0; s2 < sub; s2++)
    if (accel__words_substring(x, t->start[s2], t->len[s2]) == 0) return true;
  return false;
}

/* Per-thread copies of one run's positions and codes (the driving field),
 * so that the pairs of a run read contiguous memory. */
typedef struct run_buf {
  uint32_t *pos;
  uint64_t *code;
  size_t cap;
} run_buf;

static bool run_buf_reserve(run_buf *rb, size_t n, uint32_t words) {
  if (n <= rb->cap) return true;
  size_t cap = rb->cap ? rb->cap : 64;
  while (cap < n) cap *= 2;
  uint32_t *pos = realloc(rb->pos, cap * sizeof(uint32_t));
  if (pos) rb->pos = pos;
  uint64_t *code = pos ? realloc(rb->code, cap * words * sizeof(uint64_t)) : NULL;
  if (code) rb->code = code;
  if (!code) return false;
  rb->cap = cap;
  return true;
}

/* Every pair within the run [a0, a1) of substring `sub` of the driving field. */
POPCNT_CLONES static void mih_join_run(const accel__codes *c, const accel__mih_table *t, uint32_t sub, size_t a0,
                                       size_t a1, const accel__search *s, run_buf *rb, accel__pair_buf *pb) {
  const uint32_t f = t->field, words = c->words, thr = s->thresholds[f];
  const uint32_t *order = t->order + (size_t)sub * t->n;
  const size_t len = a1 - a0;
  for (size_t x = 0; x < len; x++) {
    rb->pos[x] = order[a0 + x];
    for (uint32_t w = 0; w < words; w++) rb->code[x * words + w] = c->field[f][w * c->stride + rb->pos[x]];
  }
  for (size_t x = 0; x < len; x++) {
    const uint64_t *cx = rb->code + x * words;
    for (size_t y = x + 1; y < len; y++) {
      const uint64_t *cy = rb->code + y * words;
      uint64_t xw[4];
      uint32_t d = 0;
      for (uint32_t w = 0; w < words; w++) {
        xw[w] = cx[w] ^ cy[w];
        d += (uint32_t)__builtin_popcountll(xw[w]);
      }
      if (d > thr || earlier_substring_equal(t, xw, sub)) continue;
      const uint32_t pi = rb->pos[x], qi = rb->pos[y];
      if (c->nfields > 1 && !others_agree(c, pi, c, qi, s, f)) continue;
      accel__pair_push(pb, pi < qi ? pi : qi, pi < qi ? qi : pi);
    }
  }
}

/* The (cached) tables of every pass of the plan. */
static accel_status get_tables(accel__call *call, accel__index_job *job, const mih_plan *plan,
                               const accel__mih_table **tables) {
  for (int k = 0; k < plan->npasses; k++) {
    accel_status st = job->index ? accel__mih_get(job->index, plan->field[k], plan->m[k], call->threads, &tables[k])
                                 : ACCEL_ERR_INTERNAL;
    if (st) {
      accel__why(call->why, "out of memory for the multi-index tables");
      return st;
    }
  }
  return ACCEL_OK;
}

static accel_status mih_join(accel__call *call, accel__index_job *job, const mih_plan *plan) {
  const accel__codes *c = &job->codes;
  progress p = {job, 0, 0, 0};
  int oom = 0;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  accel_status st = get_tables(call, job, plan, tables);
  if (st) return st;
  for (int k = 0; k < plan->npasses; k++) p.total += plan->m[k];
  /* runs: [start, end) of equal substrings with two or more entries */
  size_t *runs = malloc((c->n + 1) * sizeof(size_t));
  if (!runs) return oom_status(call);
  for (int k = 0; k < plan->npasses && !p.cancelled && !oom; k++) {
    const accel__mih_table *t = tables[k];
    for (uint32_t sub = 0; sub < t->m && !p.cancelled && !oom; sub++) {
      const uint64_t *sk = t->sorted_keys + (size_t)sub * t->n;
      size_t nruns = 0;
      for (size_t a = 0; a < c->n;) {
        size_t b = a + 1;
        while (b < c->n && sk[b] == sk[a]) b++;
        if (b - a > 1) runs[nruns++] = a;
        a = b;
      }
#pragma omp parallel num_threads(call->threads)
      {
        accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
        run_buf rb = {NULL, NULL, 0};
#pragma omp for schedule(dynamic, 64)
        for (long long r = 0; r < (long long)nruns; r++) {
          if (!pb || __atomic_load_n(&oom, __ATOMIC_RELAXED)) continue;
          const size_t a0 = runs[r];
          size_t a1 = a0 + 1;
          while (a1 < c->n && sk[a1] == sk[a0]) a1++;
          if (!run_buf_reserve(&rb, a1 - a0, c->words)) {
            __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
            continue;
          }
          mih_join_run(c, t, sub, a0, a1, &job->search, &rb, pb);
        }
        if (pb) accel__pair_flush(pb);
        free(pb);
        free(rb.pos);
        free(rb.code);
      }
      progress_step(&p, 1);
    }
  }
  free(runs);
  return oom ? oom_status(call) : progress_end(&p, call);
}

/* Every entry within reach of query qi through the pass of table t. */
POPCNT_CLONES static void mih_range_query(const accel__codes *q, size_t qi, const accel__codes *c,
                                          const accel__mih_table *t, const accel__search *s, accel__pair_buf *pb) {
  const uint32_t f = t->field, words = c->words, thr = s->thresholds[f];
  uint64_t mine[4];
  for (uint32_t w = 0; w < words; w++) mine[w] = q->field[f][w * q->stride + qi];
  for (uint32_t sub = 0; sub < t->m; sub++) {
    const uint64_t key = accel__words_substring(mine, t->start[sub], t->len[sub]);
    const uint64_t *sk = t->sorted_keys + (size_t)sub * t->n;
    const uint32_t *order = t->order + (size_t)sub * t->n;
    for (size_t x = accel__lower_bound_u64(sk, t->n, key); x < t->n && sk[x] == key; x++) {
      const uint32_t pi = order[x];
      uint64_t xw[4];
      uint32_t d = 0;
      for (uint32_t w = 0; w < words; w++) {
        xw[w] = mine[w] ^ c->field[f][w * c->stride + pi];
        d += (uint32_t)__builtin_popcountll(xw[w]);
      }
      if (d > thr || earlier_substring_equal(t, xw, sub)) continue;
      if (c->nfields > 1 && !others_agree(q, qi, c, pi, s, f)) continue;
      accel__pair_push(pb, (uint32_t)qi, pi);
    }
  }
}

static accel_status mih_range(accel__call *call, accel__index_job *job, const mih_plan *plan) {
  const accel__codes *c = &job->codes, *q = &job->queries;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  accel_status st = get_tables(call, job, plan, tables);
  if (st) return st;
  progress p = {job, q->n, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 16)
    for (long long qi = 0; qi < (long long)q->n; qi++) {
      if (!pb || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED)) continue;
      for (int k = 0; k < plan->npasses; k++) mih_range_query(q, (size_t)qi, c, tables[k], &job->search, pb);
      progress_step(&p, 1);
    }
    if (pb) accel__pair_flush(pb);
    free(pb);
  }
  return oom ? oom_status(call) : progress_end(&p, call);
}

/* ------------------------------------------------------------ the choice */

/* Multi-index hashing examines the pairs that share a substring exactly (the
 * candidates); brute force examines every pair. One candidate costs about as
 * much as MIH_CANDIDATE_COST brute-force comparisons of a single 64-bit field
 * (measured with bench/index_bench.py on x86-64 with AVX-512: 0.035 ns per
 * compared pair on 2 cores, 0.7 ns per candidate); comparisons of several
 * fields or words cost more per pair in the general kernel. */
enum { MIH_CANDIDATE_COST = 20 };
/* A data-centre GPU's brute force against these 2 CPU cores' brute force, a
 * conservative guess (no GPU measurement yet): on a CUDA backend, AUTO runs
 * multi-index hashing on the CPU only where it wins by at least this. */
enum { GPU_SPEEDUP = 20 };

static double bf_pair_cost(const accel__codes *c) {
  return c->nfields == 1 && c->words == 1 ? 1.0 : 2.0 * c->nfields * c->words;
}

/* The share of pairs that share one of the m substrings if codes were
 * uniform: a lower bound for any data (equal substrings are least likely
 * when every value is equally likely). */
static double uniform_share(uint32_t bits, uint32_t m) {
  double share = 0;
  for (uint32_t k = 0; k < m; k++) {
    const uint32_t len = (uint32_t)((uint64_t)bits * (k + 1) / m) - (uint32_t)((uint64_t)bits * k / m);
    share += len >= 60 ? 0 : 1.0 / (double)((uint64_t)1 << len);
  }
  return share;
}

static double plan_uniform_share(const mih_plan *plan, uint32_t bits) {
  double share = 0;
  for (int k = 0; k < plan->npasses; k++) share += uniform_share(bits, plan->m[k]);
  return share;
}

/* sum over substrings and runs of equal values of L(L-1)/2 (join: the exact
 * number of candidates) or L^2 / n (range: the expected candidates of a query
 * drawn like the entries). */
static double table_candidates(const accel__mih_table *t, bool join) {
  double sum = 0;
  for (uint32_t sub = 0; sub < t->m; sub++) {
    const uint64_t *sk = t->sorted_keys + (size_t)sub * t->n;
    for (size_t a = 0; a < t->n;) {
      size_t b = a + 1;
      while (b < t->n && sk[b] == sk[a]) b++;
      const double len = (double)(b - a);
      sum += join ? len * (len - 1) / 2 : len * len / (double)t->n;
      a = b;
    }
  }
  return sum;
}

/* Multi-index hashing's cost over brute force's if the codes were uniform
 * (a lower bound), or a negative value when the thresholds allow no
 * substrings. */
static double uniform_cost_ratio(uint32_t bits, const accel__search *s, uint32_t nfields) {
  accel__codes shape;
  memset(&shape, 0, sizeof shape);
  shape.nfields = nfields;
  shape.words = bits / 64;
  mih_plan plan;
  if (!plan_mih(&shape, s, bits, &plan)) return -1;
  return plan_uniform_share(&plan, bits) * MIH_CANDIDATE_COST / bf_pair_cost(&shape);
}

bool accel__prefer_mih(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  const double ratio = n < 2048 ? -1 : uniform_cost_ratio(bits, s, nfields);
  return ratio >= 0 && ratio < 1;
}

/* On a GPU backend with AUTO: is multi-index hashing on the CPU clearly
 * cheaper than brute force on the GPU (large sets, small thresholds)? */
static bool prefer_cpu_mih_to_gpu(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  const double ratio = n < 65536 ? -1 : uniform_cost_ratio(bits, s, nfields);
  return ratio >= 0 && ratio * GPU_SPEEDUP < 1;
}

accel_status accel__index_gpu_decline(accel__call *call, const accel__index_job *job) {
  if (job->search.algorithm == ACCEL_INDEX_MULTI_INDEX)
    return accel__decline(call, "multi-index hashing, as asked, runs on the CPU");
  if (job->search.algorithm == ACCEL_INDEX_AUTO &&
      prefer_cpu_mih_to_gpu(job->codes.n, job->bits, &job->search, job->codes.nfields))
    return accel__decline(call, "multi-index hashing on the CPU beats brute force on the GPU here");
  return ACCEL_OK;
}

/* AUTO: brute force for small sets and where even uniform codes would give
 * too many candidates; otherwise the tables are built (cached on the index)
 * and the candidates counted exactly, so clustered catalogs with many equal
 * substrings fall back to brute force when that is cheaper. */
static bool choose_mih(accel__call *call, accel__index_job *job, const mih_plan *plan, bool join) {
  const accel__codes *c = &job->codes;
  if (job->search.algorithm != ACCEL_INDEX_AUTO) return job->search.algorithm == ACCEL_INDEX_MULTI_INDEX;
  if (!accel__prefer_mih(c->n, job->bits, &job->search, c->nfields) || !job->index) return false;
  const double nq = join ? (double)c->n : (double)job->queries.n;
  const double bf = (join ? nq * (nq - 1) / 2 : nq * (double)c->n) * bf_pair_cost(c);
  if (!join && nq * 16 < (double)c->n / 64) return false; /* too few queries to pay for sorting the index */
  double candidates = 0;
  for (int k = 0; k < plan->npasses; k++) {
    const accel__mih_table *t;
    if (accel__mih_get(job->index, plan->field[k], plan->m[k], call->threads, &t)) return false;
    candidates += table_candidates(t, join) * (join ? 1.0 : nq);
  }
  return candidates * MIH_CANDIDATE_COST < bf;
}

static accel_status cpu_join(accel__call *call, accel__index_job *job) {
  mih_plan plan;
  /* thresholds too large for substrings: brute force (exact too) */
  const bool mih = plan_mih(&job->codes, &job->search, job->bits, &plan) && choose_mih(call, job, &plan, true);
  job->used = mih ? ACCEL_INDEX_MULTI_INDEX : ACCEL_INDEX_BRUTE_FORCE;
  return mih ? mih_join(call, job, &plan) : bf_join(call, job);
}

static accel_status cpu_range(accel__call *call, accel__index_job *job) {
  mih_plan plan;
  const bool mih = plan_mih(&job->codes, &job->search, job->bits, &plan) && choose_mih(call, job, &plan, false);
  job->used = mih ? ACCEL_INDEX_MULTI_INDEX : ACCEL_INDEX_BRUTE_FORCE;
  return mih ? mih_range(call, job, &plan) : bf_range(call, job);
}

/* ------------------------------------------------------------ k nearest */

static int cmp_cand(const void *x, const void *y) {
  const accel__knn_cand *a = x, *b = y;
  return accel__cmp_u64_pair(a->d, a->id, b->d, b->id);
}

void accel__knn_emit(accel__knn_cand *c, size_t n, uint32_t k, uint64_t *ids, uint32_t *distances) {
  qsort(c, n, sizeof *c, cmp_cand);
  for (uint32_t r = 0; r < k; r++) {
    ids[r] = r < n ? c[r].id : UINT64_MAX;
    if (distances) distances[r] = r < n ? c[r].d : UINT32_MAX;
  }
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
    accel__knn_cand *cs = NULL;
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
        cs = malloc(ccap * sizeof *cs);
        if (!cs) {
          __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
          ccap = 0;
          continue;
        }
      }
      for (size_t j = 0; j < c->n; j++)
        if (dist[j] <= cut) cs[nc++] = (accel__knn_cand){dist[j], job->entry_ids[j]};
      accel__knn_emit(cs, nc, k, job->out_ids + (size_t)qi * k,
                      job->out_distances ? job->out_distances + (size_t)qi * k : NULL);
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
