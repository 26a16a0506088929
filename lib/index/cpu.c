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

int accel__index_isa_cap = 2;

/* The popcount kernels this CPU runs: 2 AVX-512 VPOPCNTDQ, 1 POPCNT, 0
 * generic (at most accel__index_isa_cap). */
static int isa_level(void) {
  int level = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) level = 2;
  else if (__builtin_cpu_supports("popcnt")) level = 1;
#endif
  return level < accel__index_isa_cap ? level : accel__index_isa_cap < 0 ? 0 : accel__index_isa_cap;
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
 * first field it matches on, so once. Each pass has its own plan (substrings
 * and radii, mih.h) for its field's threshold. */
typedef struct mih_passes {
  int npasses;
  uint32_t field[ACCEL_INDEX_MAX_FIELDS];
  accel__mih_plan plan[ACCEL_INDEX_MAX_FIELDS];
  uint32_t **masks; /* [pass * ACCEL__MIH_MAX_M + substring]: the flips to enumerate */
  size_t *nmasks;
} mih_passes;

/* The passes for n entries and nq range queries (0: a self-join); malloc'd
 * (plans are large), NULL when out of memory. */
static mih_passes *plan_mih(uint32_t nfields, size_t n, size_t nq, const accel__search *s, uint32_t bits) {
  mih_passes *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->npasses = s->rule == ACCEL_INDEX_ALL ? 1 : (int)nfields;
  for (uint32_t f = 0; f < nfields; f++) {
    if (s->rule == ACCEL_INDEX_ANY) p->field[f] = f;
    else if (s->thresholds[f] < s->thresholds[p->field[0]]) p->field[0] = f;
  }
  for (int k = 0; k < p->npasses; k++) accel__mih_choose(n, nq, bits, s->thresholds[p->field[k]], &p->plan[k]);
  return p;
}

static void free_passes(mih_passes *p) {
  if (!p) return;
  if (p->masks)
    for (size_t i = 0; i < (size_t)p->npasses * ACCEL__MIH_MAX_M; i++) free(p->masks[i]);
  free(p->masks);
  free(p->nmasks);
  free(p);
}

/* The bit flips of every substring of every pass (false: out of memory). */
static bool make_masks(mih_passes *p) {
  if (p->masks) return true;
  const size_t slots = (size_t)p->npasses * ACCEL__MIH_MAX_M;
  p->masks = calloc(slots, sizeof *p->masks);
  p->nmasks = calloc(slots, sizeof *p->nmasks);
  if (!p->masks || !p->nmasks) return false;
  for (int k = 0; k < p->npasses; k++)
    for (uint32_t sub = 0; sub < p->plan[k].shape.m; sub++) {
      const size_t i = (size_t)k * ACCEL__MIH_MAX_M + sub;
      p->masks[i] = accel__mih_masks(p->plan[k].shape.key_bits[sub], p->plan[k].radius[sub], &p->nmasks[i]);
      if (!p->masks[i]) return false;
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

/* Is a pair (x: the XOR of the driving field's codes) reported through
 * substring sub? Only if within that substring's radius (its key may be
 * shorter than the substring) and within no earlier substring's radius (that
 * substring reports it): every pair once, without a set of seen pairs. */
static inline bool substring_owns(const accel__mih_plan *p, const uint64_t *x, uint32_t sub) {
  const accel__mih_shape *sh = &p->shape;
  if (sh->key_bits[sub] < sh->len[sub] && accel__words_popcount(x, sh->start[sub], sh->len[sub]) > p->radius[sub])
    return false;
  for (uint32_t s2 = 0; s2 < sub; s2++)
    if (accel__words_popcount(x, sh->start[s2], sh->len[s2]) <= p->radius[s2]) return false;
  return true;
}

/* One substring of a pass, as its join and range searches read it. */
typedef struct mih_sub {
  const accel__codes *c; /* the entries */
  const accel__mih_table *t;
  const accel__mih_plan *plan;
  const accel__search *s;
  uint32_t sub;
  const uint32_t *off, *order, *masks;
  const uint64_t *codes; /* one-word codes in bucket order, or NULL */
  size_t nmasks;
} mih_sub;

static mih_sub sub_view(const accel__codes *c, const accel__mih_table *t, const mih_passes *p, int k, uint32_t sub,
                        const accel__search *s) {
  const size_t i = (size_t)k * ACCEL__MIH_MAX_M + sub;
  return (mih_sub){c,
                   t,
                   &p->plan[k],
                   s,
                   sub,
                   t->offsets + t->offset_at[sub],
                   t->order + (size_t)sub * t->n,
                   p->masks[i],
                   t->codes ? t->codes + (size_t)sub * t->n : NULL,
                   p->nmasks[i]};
}

/* The driving field's code of bucket slot x. */
static inline void slot_code(const mih_sub *j, size_t x, uint64_t *w) {
  if (j->codes) {
    w[0] = j->codes[x];
    return;
  }
  for (uint32_t k = 0; k < j->c->words; k++) w[k] = j->c->field[j->t->field][k * j->c->stride + j->order[x]];
}

/* Slots x and y are within the driving threshold (XOR xw): emit the pair if
 * this substring and pass own it. */
static void join_found(const mih_sub *j, size_t x, size_t y, const uint64_t *xw, accel__pair_buf *pb) {
  if (!substring_owns(j->plan, xw, j->sub)) return;
  const uint32_t pi = j->order[x], qi = j->order[y];
  if (j->c->nfields > 1 && !others_agree(j->c, pi, j->c, qi, j->s, j->t->field)) return;
  accel__pair_push(pb, pi < qi ? pi : qi, pi < qi ? qi : pi);
}

/* Slots [x0, x1) against [y0, y1), or the pairs within [x0, x1) (same);
 * inlined into join_keys, whose clones pick the popcount instruction once. */
static inline __attribute__((always_inline)) void join_buckets(const mih_sub *j, size_t x0, size_t x1, size_t y0,
                                                               size_t y1, bool same, accel__pair_buf *pb) {
  const uint32_t thr = j->s->thresholds[j->t->field], words = j->c->words;
  if (j->codes) { /* one word: the buckets' codes are contiguous */
    for (size_t x = x0; x < x1; x++) {
      const uint64_t cx = j->codes[x];
      for (size_t y = same ? x + 1 : y0; y < y1; y++) {
        const uint64_t v = cx ^ j->codes[y];
        if ((uint32_t)__builtin_popcountll(v) <= thr) join_found(j, x, y, &v, pb);
      }
    }
    return;
  }
  for (size_t x = x0; x < x1; x++) {
    uint64_t cx[4], cy[4], v[4];
    slot_code(j, x, cx);
    for (size_t y = same ? x + 1 : y0; y < y1; y++) {
      slot_code(j, y, cy);
      uint32_t d = 0;
      for (uint32_t w = 0; w < words; w++) {
        v[w] = cx[w] ^ cy[w];
        d += (uint32_t)__builtin_popcountll(v[w]);
      }
      if (d <= thr) join_found(j, x, y, v, pb);
    }
  }
}

/* Keys [k0, k1) of the substring: each bucket with itself and with the
 * later buckets whose keys are within the radius (every bucket pair once). */
POPCNT_CLONES static void join_keys(const mih_sub *j, size_t k0, size_t k1, accel__pair_buf *pb) {
  for (size_t k = k0; k < k1; k++) {
    const uint32_t a0 = j->off[k], a1 = j->off[k + 1];
    if (a0 == a1) continue;
    if (a1 - a0 > 1) join_buckets(j, a0, a1, a0, a1, true, pb);
    for (size_t i = 0; i < j->nmasks; i++) {
      const size_t k2 = k ^ j->masks[i];
      if (k2 < k) continue;
      const uint32_t b0 = j->off[k2], b1 = j->off[k2 + 1];
      if (b0 < b1) join_buckets(j, a0, a1, b0, b1, false, pb);
    }
  }
}

/* The (cached) tables of every pass, and the masks. */
static accel_status get_tables(accel__call *call, accel__index_job *job, mih_passes *p,
                               const accel__mih_table **tables) {
  if (!make_masks(p)) return oom_status(call);
  for (int k = 0; k < p->npasses; k++) {
    accel_status st = job->index ? accel__mih_get(job->index, p->field[k], &p->plan[k].shape, call->threads, &tables[k])
                                 : ACCEL_ERR_INTERNAL;
    if (st) {
      accel__why(call->why, "out of memory for the multi-index tables");
      return st;
    }
  }
  return ACCEL_OK;
}

enum { JOIN_CHUNK = 1024, COST_SAMPLE = 16 }; /* keys a scheduling unit; chunks a counted one */

static accel_status mih_join(accel__call *call, accel__index_job *job, mih_passes *passes) {
  progress p = {job, 0, 0, 0};
  int oom = 0;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  accel_status st = get_tables(call, job, passes, tables);
  if (st) return st;
  for (int k = 0; k < passes->npasses; k++) p.total += passes->plan[k].shape.m;
  for (int k = 0; k < passes->npasses && !p.cancelled && !oom; k++) {
    const accel__mih_table *t = tables[k];
    for (uint32_t sub = 0; sub < t->shape.m && !p.cancelled && !oom; sub++) {
      const mih_sub j = sub_view(&job->codes, t, passes, k, sub, &job->search);
      const size_t nkeys = (size_t)1 << t->shape.key_bits[sub];
      const long long nchunks = (long long)((nkeys + JOIN_CHUNK - 1) / JOIN_CHUNK);
#pragma omp parallel num_threads(call->threads)
      {
        accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 1)
        for (long long ch = 0; ch < nchunks; ch++) {
          const size_t k0 = (size_t)ch * JOIN_CHUNK, k1 = k0 + JOIN_CHUNK < nkeys ? k0 + JOIN_CHUNK : nkeys;
          if (pb) join_keys(&j, k0, k1, pb);
        }
        if (pb) accel__pair_flush(pb);
        free(pb);
      }
      progress_step(&p, 1);
    }
  }
  return oom ? oom_status(call) : progress_end(&p, call);
}

/* Every entry within reach of query qi through one substring of a pass. */
POPCNT_CLONES static void mih_range_sub(const accel__codes *q, size_t qi, const mih_sub *j, const uint64_t *mine,
                                        accel__pair_buf *pb) {
  const uint32_t f = j->t->field, words = j->c->words, thr = j->s->thresholds[f];
  const accel__mih_shape *sh = &j->plan->shape;
  const uint64_t key = accel__words_substring(mine, sh->start[j->sub], sh->key_bits[j->sub]);
  for (size_t i = 0; i <= j->nmasks; i++) {
    const size_t kk = i ? key ^ j->masks[i - 1] : key;
    for (size_t x = j->off[kk]; x < j->off[kk + 1]; x++) {
      uint64_t xw[4];
      slot_code(j, x, xw);
      uint32_t d = 0;
      for (uint32_t w = 0; w < words; w++) {
        xw[w] ^= mine[w];
        d += (uint32_t)__builtin_popcountll(xw[w]);
      }
      if (d > thr || !substring_owns(j->plan, xw, j->sub)) continue;
      const uint32_t pi = j->order[x];
      if (j->c->nfields > 1 && !others_agree(q, qi, j->c, pi, j->s, f)) continue;
      accel__pair_push(pb, (uint32_t)qi, pi);
    }
  }
}

static void mih_range_query(const accel__codes *q, size_t qi, const accel__codes *c, const mih_passes *passes,
                            const accel__mih_table **tables, const accel__search *s, accel__pair_buf *pb) {
  for (int k = 0; k < passes->npasses; k++) {
    uint64_t mine[4];
    for (uint32_t w = 0; w < c->words; w++) mine[w] = q->field[passes->field[k]][w * q->stride + qi];
    for (uint32_t sub = 0; sub < tables[k]->shape.m; sub++) {
      const mih_sub j = sub_view(c, tables[k], passes, k, sub, s);
      mih_range_sub(q, qi, &j, mine, pb);
    }
  }
}

static accel_status mih_range(accel__call *call, accel__index_job *job, mih_passes *passes) {
  const accel__codes *c = &job->codes, *q = &job->queries;
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  accel_status st = get_tables(call, job, passes, tables);
  if (st) return st;
  progress p = {job, q->n, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    accel__pair_buf *pb = pair_buf_new(job->sink, &oom);
#pragma omp for schedule(dynamic, 16)
    for (long long qi = 0; qi < (long long)q->n; qi++) {
      if (!pb || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED)) continue;
      mih_range_query(q, (size_t)qi, c, passes, tables, &job->search, pb);
      progress_step(&p, 1);
    }
    if (pb) accel__pair_flush(pb);
    free(pb);
  }
  return oom ? oom_status(call) : progress_end(&p, call);
}

/* ------------------------------------------------------------ the choice */

/* Multi-index hashing's cost is counted in brute-force comparisons of two
 * one-word codes (mih.h): a visited bucket about 160, a candidate about 80,
 * the bucketing and the exact count included (calibrated with
 * bench/index_scale.c on a 2-core x86-64 with AVX-512: brute force compares
 * 5e10 pairs a second there, and at 100,000 random codes multi-index hashing
 * and brute force tie at r = 10); comparisons of several fields or words
 * cost more per pair in the general kernel. */
/* A data-centre GPU's brute force against these 2 CPU cores' brute force, a
 * conservative guess (no GPU measurement yet): on a CUDA backend, AUTO runs
 * multi-index hashing on the CPU only where it wins by at least this. */
enum { GPU_SPEEDUP = 20 };

static double bf_pair_cost(uint32_t words, uint32_t nfields) {
  return nfields == 1 && words == 1 ? 1.0 : 2.0 * nfields * words;
}

/* Multi-index hashing's cost over brute force's for a self-join if the codes
 * were uniform, or a negative value when out of memory. */
static double uniform_cost_ratio(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  mih_passes *p = plan_mih(nfields, n, 0, s, bits);
  if (!p) return -1;
  double cost = 0;
  for (int k = 0; k < p->npasses; k++) cost += accel__mih_plan_cost(&p->plan[k]);
  free_passes(p);
  const double dn = (double)n;
  return cost / (dn * (dn - 1) / 2 * bf_pair_cost(bits / 64, nfields));
}

bool accel__prefer_mih(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  const double ratio = n < 2048 ? -1 : uniform_cost_ratio(n, bits, s, nfields);
  return ratio >= 0 && ratio < 1;
}

/* On a GPU backend with AUTO: is multi-index hashing on the CPU clearly
 * cheaper than brute force on the GPU (large sets, small thresholds)? */
static bool prefer_cpu_mih_to_gpu(size_t n, uint32_t bits, const accel__search *s, uint32_t nfields) {
  const double ratio = n < 65536 ? -1 : uniform_cost_ratio(n, bits, s, nfields);
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

/* The cost of one substring on these codes: join, every bucket pair the
 * search visits and the candidates they hold; range, the same expected for a
 * query drawn like the entries. */
static double sub_cost(const mih_sub *j, bool join, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const size_t nkeys = (size_t)1 << j->plan->shape.key_bits[j->sub];
  const double n = (double)j->t->n;
  /* over 2^20 keys, one chunk of keys in COST_SAMPLE (the visits would cost
   * as much as the search's own): an estimate, good enough for the choice */
  const size_t every = nkeys > ((size_t)1 << 20) ? COST_SAMPLE : 1;
  double visits = 0, cand = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : visits, cand) schedule(dynamic, JOIN_CHUNK)
  for (long long k = 0; k < (long long)nkeys; k++) {
    if (((size_t)k / JOIN_CHUNK) % every) continue;
    const double len = (double)(j->off[k + 1] - j->off[k]);
    if (len == 0) continue;
    double near = 0, seen = 0; /* entries in, and buckets visited at, the keys within the radius */
    for (size_t i = 0; i < j->nmasks; i++) {
      const size_t k2 = (size_t)k ^ j->masks[i];
      if (join && k2 < (size_t)k) continue;
      near += (double)(j->off[k2 + 1] - j->off[k2]);
      seen += 1;
    }
    visits += join ? 1 + seen : (1 + seen) * len / n;
    cand += join ? len * (len - 1) / 2 + len * near : len * (len + near) / n;
  }
  return (visits * ACCEL__MIH_VISIT_COST + cand * ACCEL__MIH_CANDIDATE_COST) * (double)every;
}

/* AUTO: brute force for small sets and where even uniform codes would cost
 * too much; otherwise the tables are built (cached on the index) and the
 * visits and candidates counted exactly, so clustered catalogs with many
 * equal substrings fall back to brute force when that is cheaper. */
static bool choose_mih(accel__call *call, accel__index_job *job, mih_passes *passes, bool join) {
  const accel__codes *c = &job->codes;
  if (job->search.algorithm != ACCEL_INDEX_AUTO) return job->search.algorithm == ACCEL_INDEX_MULTI_INDEX;
  if (!accel__prefer_mih(c->n, job->bits, &job->search, c->nfields) || !job->index) return false;
  const double nq = join ? (double)c->n : (double)job->queries.n;
  const double bf = (join ? nq * (nq - 1) / 2 : nq * (double)c->n) * bf_pair_cost(c->words, c->nfields);
  if (!join && nq * 16 < (double)c->n / 64) return false; /* too few queries to pay for bucketing the index */
  const accel__mih_table *tables[ACCEL_INDEX_MAX_FIELDS];
  if (get_tables(call, job, passes, tables)) return false;
  double cost = 0;
  for (int k = 0; k < passes->npasses; k++)
    for (uint32_t sub = 0; sub < tables[k]->shape.m; sub++) {
      const mih_sub j = sub_view(c, tables[k], passes, k, sub, &job->search);
      cost += sub_cost(&j, join, call->threads) * (join ? 1.0 : nq);
    }
  return cost < bf;
}

static accel_status cpu_search(accel__call *call, accel__index_job *job, bool join) {
  mih_passes *p = plan_mih(job->codes.nfields, job->codes.n, join ? 0 : job->queries.n, &job->search, job->bits);
  if (!p) return oom_status(call);
  const bool mih = choose_mih(call, job, p, join);
  job->used = mih ? ACCEL_INDEX_MULTI_INDEX : ACCEL_INDEX_BRUTE_FORCE;
  const accel_status st = !mih ? (join ? bf_join(call, job) : bf_range(call, job))
                               : (join ? mih_join(call, job, p) : mih_range(call, job, p));
  free_passes(p);
  return st;
}

static accel_status cpu_join(accel__call *call, accel__index_job *job) { return cpu_search(call, job, true); }
static accel_status cpu_range(accel__call *call, accel__index_job *job) { return cpu_search(call, job, false); }

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

/* Distances of one query's field (its words qw) to codes [j0, j0 + m) of
 * a field laid out word-major (cf, stride) into d: the same sums for three
 * instruction sets. */
typedef void (*dist_fn)(const uint64_t *qw, uint32_t words, const uint64_t *cf, size_t stride, size_t j0, size_t m,
                        uint16_t *d);

#define DIST_SCALAR(from)                                                                                              \
  for (size_t u = (from); u < m; u++) {                                                                                \
    uint32_t s = 0;                                                                                                    \
    for (uint32_t w = 0; w < words; w++) s += (uint32_t)__builtin_popcountll(qw[w] ^ cf[w * stride + j0 + u]);         \
    d[u] = (uint16_t)s;                                                                                                \
  }

static void dist_generic(const uint64_t *qw, uint32_t words, const uint64_t *cf, size_t stride, size_t j0, size_t m,
                         uint16_t *d) {
  DIST_SCALAR(0)
}

#if defined(__x86_64__)
__attribute__((target("popcnt"))) static void dist_popcnt(const uint64_t *qw, uint32_t words, const uint64_t *cf,
                                                          size_t stride, size_t j0, size_t m, uint16_t *d) {
  DIST_SCALAR(0)
}

__attribute__((target("avx512f,avx512vpopcntdq,popcnt"))) static void dist_avx512(const uint64_t *qw, uint32_t words,
                                                                                  const uint64_t *cf, size_t stride,
                                                                                  size_t j0, size_t m, uint16_t *d) {
  size_t t = 0;
  for (; t + 8 <= m; t += 8) {
    __m512i s = _mm512_setzero_si512();
    for (uint32_t w = 0; w < words; w++) {
      const __m512i y = _mm512_loadu_si512((const void *)(cf + w * stride + j0 + t));
      s = _mm512_add_epi64(s, _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_set1_epi64((long long)qw[w]), y)));
    }
    _mm512_mask_cvtepi64_storeu_epi16((void *)(d + t), (__mmask8)0xff, s); /* the 8 sums, narrowed */
  }
  DIST_SCALAR(t)
}
static const dist_fn DIST[3] = {dist_generic, dist_popcnt, dist_avx512};
#else
static const dist_fn DIST[1] = {dist_generic};
#endif

/* One query's selection, one pass over the codes: the k smallest (distance,
 * id) seen so far in a max-heap (at most k entries, whatever the ties), and
 * the cut, the largest distance that can still enter it (the heap's top
 * distance once it is full, the code width before). At the end the heap
 * holds the k smallest (distance, id) of all entries: the entries at or
 * below the k-th smallest distance, ordered by (distance, id), first k,
 * which is what the histogram and second pass this replaced gave. */
typedef struct knn_sel {
  uint32_t cut;
  size_t n;
  accel__knn_cand *c; /* [k], a max-heap by (d, id) */
} knn_sel;

static inline bool cand_less(accel__knn_cand a, accel__knn_cand b) { return a.d != b.d ? a.d < b.d : a.id < b.id; }

static void heap_down(accel__knn_cand *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, big = i;
    if (l < n && cand_less(h[big], h[l])) big = l;
    if (l + 1 < n && cand_less(h[big], h[l + 1])) big = l + 1;
    if (big == i) return;
    const accel__knn_cand t = h[i];
    h[i] = h[big];
    h[big] = t;
    i = big;
  }
}

static void sel_add(knn_sel *s, accel__knn_cand x, uint32_t k) {
  if (s->n < k) {
    size_t i = s->n++;
    s->c[i] = x;
    while (i && cand_less(s->c[(i - 1) / 2], s->c[i])) { /* up */
      const accel__knn_cand t = s->c[i];
      s->c[i] = s->c[(i - 1) / 2];
      s->c[(i - 1) / 2] = t;
      i = (i - 1) / 2;
    }
  } else if (cand_less(x, s->c[0])) {
    s->c[0] = x;
    heap_down(s->c, s->n, 0);
  } else {
    return;
  }
  if (s->n == k) s->cut = s->c[0].d;
}

static void sel_block(knn_sel *s, const uint16_t *d, size_t m, const uint64_t *ids, uint32_t k) {
  for (size_t t = 0; t < m; t++) {
    if (t % 32 == 0 && t + 32 <= m) { /* most runs of 32 hold nothing at or below the cut: one vector test */
      const uint16_t cut = (uint16_t)s->cut;
      int any = 0;
      for (size_t u = t; u < t + 32; u++) any |= d[u] <= cut;
      if (!any) {
        t += 31;
        continue;
      }
    }
    if (d[t] <= s->cut) sel_add(s, (accel__knn_cand){d[t], ids[t]}, k);
  }
}

/* Queries in blocks of KNN_QB against blocks of KNN_BLOCK codes, so that a
 * block of codes is read from memory once for KNN_QB queries. */
enum { KNN_QB = 8, KNN_BLOCK = 512 };

typedef struct knn_ws {
  knn_sel sel[KNN_QB];
  uint16_t d[KNN_BLOCK];
} knn_ws;

static void ws_free(knn_ws *w) {
  for (int i = 0; i < KNN_QB; i++) free(w->sel[i].c);
  free(w);
}

static knn_ws *ws_alloc(uint32_t k) {
  knn_ws *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  for (int i = 0; i < KNN_QB; i++)
    if (!(w->sel[i].c = malloc((size_t)k * sizeof(accel__knn_cand)))) {
      ws_free(w);
      return NULL;
    }
  return w;
}

/* Queries [q0, q0 + nb) of q: their k nearest into the job's outputs. */
static void knn_queries(const accel__index_job *job, const accel__codes *q, size_t q0, size_t nb, dist_fn dist,
                        knn_ws *w) {
  const accel__codes *c = &job->codes;
  const uint32_t k = job->k, f = job->field, words = c->words;
  uint64_t qw[KNN_QB][4]; /* at most 256 bits a field */
  for (size_t i = 0; i < nb; i++) {
    w->sel[i].n = 0;
    w->sel[i].cut = words * 64;
    for (uint32_t x = 0; x < words; x++) qw[i][x] = q->field[f][x * q->stride + q0 + i];
  }
  for (size_t j0 = 0; j0 < c->n; j0 += KNN_BLOCK) {
    const size_t m = c->n - j0 < KNN_BLOCK ? c->n - j0 : KNN_BLOCK;
    for (size_t i = 0; i < nb; i++) {
      dist(qw[i], words, c->field[f], c->stride, j0, m, w->d);
      sel_block(&w->sel[i], w->d, m, job->entry_ids + j0, k);
    }
  }
  for (size_t i = 0; i < nb; i++) {
    const size_t at = (q0 + i) * k;
    accel__knn_emit(w->sel[i].c, w->sel[i].n, k, job->out_ids + at,
                    job->out_distances ? job->out_distances + at : NULL);
  }
}

/* Distances are small integers: each query's cut (the largest distance
 * that can still be among its k nearest) falls as the codes stream by, so
 * most distances are rejected 32 at a time (knn_sel). */
static accel_status knn_of(accel__call *call, accel__index_job *job, const accel__codes *q) {
  const dist_fn dist = DIST[isa_level()];
  const long long blocks = (long long)((q->n + KNN_QB - 1) / KNN_QB);
  progress p = {job, q->n, 0, 0};
  int oom = 0;
#pragma omp parallel num_threads(call->threads)
  {
    knn_ws *w = ws_alloc(job->k);
    if (!w) __atomic_store_n(&oom, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 1)
    for (long long b = 0; b < blocks; b++) {
      if (!w || __atomic_load_n(&p.cancelled, __ATOMIC_RELAXED) || __atomic_load_n(&oom, __ATOMIC_RELAXED)) continue;
      const size_t q0 = (size_t)b * KNN_QB, nb = q->n - q0 < KNN_QB ? q->n - q0 : KNN_QB;
      knn_queries(job, q, q0, nb, dist, w);
      progress_step(&p, nb);
    }
    if (w) ws_free(w);
  }
  if (oom) {
    accel__why(call->why, "out of memory for the nearest entries' candidates");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return progress_end(&p, call);
}

/* The queries as the job holds them: word-major codes, or rows (arrays). */
static accel_status cpu_knn(accel__call *call, accel__index_job *job) {
  if (!job->array_rows) return knn_of(call, job, &job->queries);
  accel__codes q;
  uint64_t *storage = NULL;
  if (accel__codes_from_rows(job->array_rows, job->nq, job->codes.nfields, job->codes.words, &q, &storage)) {
    accel__why(call->why, "out of memory for %zu queries", job->nq);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel__index_job j = *job;
  j.out_ids = job->array_ids;
  j.out_distances = job->array_distances;
  const accel_status s = knn_of(call, &j, &q);
  free(storage);
  return s;
}

const accel__index_ops accel__cpu_index_ops = {
    .join = cpu_join,
    .range = cpu_range,
    .knn = cpu_knn,
};
