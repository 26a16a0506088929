/* Index searches: options, the dispatcher, pair results, grouping. */
#include "index/ops.h"

#include <stdlib.h>
#include <string.h>

enum { SEARCH_OPTIONS_V1_SIZE = sizeof(accel_search_options), KNN_MAX = 4096 };

accel_status accel_search_options_init(accel_search_options *o, size_t struct_size) {
  static const accel_search_options DEFAULTS = {.rule = ACCEL_INDEX_ALL, .algorithm = ACCEL_INDEX_AUTO};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, SEARCH_OPTIONS_V1_SIZE);
}

static accel_status read_search(const accel_index *ix, const char *func, const accel_search_options *in,
                                accel_search_options *o, accel__search *s) {
  accel_search_options_init(o, sizeof *o);
  if (in) {
    accel_status st = accel__versioned_in(ix->ctx, func, "options", in, o, sizeof *o, SEARCH_OPTIONS_V1_SIZE);
    if (st) return st;
  }
  if (o->rule != ACCEL_INDEX_ALL && o->rule != ACCEL_INDEX_ANY)
    return accel__fail_in(ix->ctx, func, ACCEL_ERR_INVALID_ARG, "unknown rule %d", (int)o->rule);
  if ((unsigned)o->algorithm > ACCEL_INDEX_MULTI_INDEX)
    return accel__fail_in(ix->ctx, func, ACCEL_ERR_INVALID_ARG, "unknown algorithm %d", (int)o->algorithm);
  memset(s, 0, sizeof *s);
  s->rule = o->rule;
  s->algorithm = o->algorithm;
  for (uint32_t f = 0; f < ix->nfields; f++) {
    if (o->thresholds[f] > ix->bits)
      return accel__fail_in(ix->ctx, func, ACCEL_ERR_INVALID_ARG, "threshold %u of field %u is over the %u bits",
                            o->thresholds[f], f, ix->bits);
    s->thresholds[f] = o->thresholds[f];
  }
  return ACCEL_OK;
}

/* ------------------------------------------------------------ pair results */

struct accel_pairs {
  size_t n, cap;
  uint32_t *a, *b; /* positions while collecting */
  uint64_t *first, *second;
  uint32_t *dist, nfields;
  pthread_mutex_t mu;
  bool oom;
};

static void collect(accel__pair_sink *sink, const uint32_t *a, const uint32_t *b, size_t n) {
  accel_pairs *p = sink->user;
  pthread_mutex_lock(&p->mu);
  if (p->n + n > p->cap && !p->oom) {
    size_t cap = p->cap ? p->cap : 4096;
    while (cap < p->n + n) cap *= 2;
    uint32_t *na = realloc(p->a, cap * sizeof(uint32_t));
    if (na) p->a = na;
    uint32_t *nb = na ? realloc(p->b, cap * sizeof(uint32_t)) : NULL;
    if (nb) p->b = nb;
    if (nb) p->cap = cap;
    else p->oom = true;
  }
  if (!p->oom) {
    memcpy(p->a + p->n, a, n * sizeof(uint32_t));
    memcpy(p->b + p->n, b, n * sizeof(uint32_t));
    p->n += n;
  }
  pthread_mutex_unlock(&p->mu);
}

static accel_pairs *pairs_new(uint32_t nfields) {
  accel_pairs *p = calloc(1, sizeof *p);
  if (p) {
    p->nfields = nfields;
    pthread_mutex_init(&p->mu, NULL);
  }
  return p;
}

void accel_pairs_destroy(accel_pairs *p) {
  if (!p) return;
  free(p->a);
  free(p->b);
  free(p->first);
  free(p->second);
  free(p->dist);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* ------------------------------------------------------------ sorting many pairs */

typedef struct key_at {
  uint64_t key, at; /* at: the pair's number, or its distance */
} key_at;

/* LSD radix sort of v by the low `bits` bits of its keys, 11 bits a pass
 * (stable; tmp: scratch of n). */
static void radix_key_at(key_at *v, key_at *tmp, size_t n, uint32_t bits) {
  key_at *src = v, *dst = tmp;
  for (uint32_t shift = 0; shift < bits; shift += 11) {
    size_t count[2049] = {0};
    for (size_t i = 0; i < n; i++) count[((src[i].key >> shift) & 2047) + 1]++;
    for (int b = 0; b < 2048; b++) count[b + 1] += count[b];
    for (size_t i = 0; i < n; i++) dst[count[(src[i].key >> shift) & 2047]++] = src[i];
    key_at *t = src;
    src = dst;
    dst = t;
  }
  if (src != v) memcpy(v, src, n * sizeof *v);
}

/* The rank of every entry's id (ids are distinct) and the ids in rank order;
 * both NULL when the ids ascend with the position (rank = position). */
static bool id_ranks(const uint64_t *ids, size_t n, uint32_t **rank, uint64_t **sorted) {
  *rank = NULL;
  *sorted = NULL;
  size_t i = 1;
  while (i < n && ids[i - 1] < ids[i]) i++;
  if (i >= n) return true;
  key_at *v = malloc(n * sizeof *v), *tmp = malloc(n * sizeof *tmp);
  *rank = malloc(n * sizeof(uint32_t));
  *sorted = malloc(n * sizeof(uint64_t));
  const bool ok = v && tmp && *rank && *sorted;
  if (ok) {
    for (i = 0; i < n; i++) v[i] = (key_at){ids[i], i};
    radix_key_at(v, tmp, n, 64);
    for (i = 0; i < n; i++) {
      (*rank)[v[i].at] = (uint32_t)i;
      (*sorted)[i] = v[i].key;
    }
  }
  free(v);
  free(tmp);
  return ok;
}

static uint32_t bits_for(size_t n) {
  uint32_t b = 1;
  while (b < 64 && ((uint64_t)1 << b) < n) b++;
  return b;
}

/* finish_pairs for many pairs: each pair as one integer (the ranks of its
 * ids, or the query number and the rank), radix-sorted, the ids and
 * distances filled in on `threads` threads. Returns false (nothing done)
 * where that does not apply or memory is short; the caller sorts then. */
static bool finish_pairs_radix(accel_pairs *p, const accel__codes *x, const accel__codes *y, const uint64_t *ids,
                               bool join, int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const size_t n = p->n, ny = y->n;
  const uint32_t lb = bits_for(ny), hb = join ? lb : bits_for(x->n);
  if (n < 4096 || hb + lb > 64) return false;
  uint32_t *rank = NULL;
  uint64_t *sorted = NULL;
  key_at *v = malloc(n * sizeof *v), *tmp = malloc(n * sizeof *tmp);
  bool ok = v && tmp && id_ranks(ids, ny, &rank, &sorted);
  if (ok) { /* one field: the payload is the distance, so that no pass after the sort reads the codes */
    const bool one = p->nfields == 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long i = 0; i < (long long)n; i++) {
      const uint32_t a = p->a[i], b = p->b[i];
      const uint64_t ra = join ? (rank ? rank[a] : a) : a, rb = rank ? rank[b] : b;
      v[i] = (key_at){join && ra > rb ? rb << lb | ra : ra << lb | rb, one ? accel__field_distance(x, a, y, b, 0) : i};
    }
    radix_key_at(v, tmp, n, hb + lb);
    const uint64_t low = ((uint64_t)1 << lb) - 1, *by_rank = sorted ? sorted : ids;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long i = 0; i < (long long)n; i++) {
      p->first[i] = join ? by_rank[v[i].key >> lb] : v[i].key >> lb;
      p->second[i] = by_rank[v[i].key & low];
      if (one) p->dist[i] = (uint32_t)v[i].at;
      for (uint32_t f = 0; !one && f < p->nfields; f++)
        p->dist[(size_t)i * p->nfields + f] = accel__field_distance(x, p->a[v[i].at], y, p->b[v[i].at], f);
    }
  }
  free(v);
  free(tmp);
  free(rank);
  free(sorted);
  return ok;
}

typedef struct key_pos {
  uint64_t first, second;
  size_t at;
} key_pos;

static int cmp_key(const void *x, const void *y) {
  const key_pos *a = x, *b = y;
  return accel__cmp_u64_pair(a->first, a->second, b->first, b->second);
}

/* Positions to ids (join: the smaller id first; range: the query number
 * first), the distances of every field, then sorted by (first, second). */
static accel_status finish_pairs(accel_pairs *p, const accel__codes *x, const accel__codes *y, const uint64_t *ids,
                                 bool join, int threads) {
  const size_t n = p->n;
  p->first = malloc((n ? n : 1) * sizeof(uint64_t));
  p->second = malloc((n ? n : 1) * sizeof(uint64_t));
  p->dist = malloc((n ? n : 1) * p->nfields * sizeof(uint32_t));
  if (!p->first || !p->second || !p->dist) return ACCEL_ERR_OUT_OF_MEMORY;
  if (!finish_pairs_radix(p, x, y, ids, join, threads)) {
    key_pos *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return ACCEL_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
      uint64_t f = join ? ids[p->a[i]] : p->a[i], s = ids[p->b[i]];
      if (join && f > s) {
        uint64_t t = f;
        f = s;
        s = t;
      }
      k[i] = (key_pos){f, s, i};
    }
    qsort(k, n, sizeof *k, cmp_key);
    for (size_t i = 0; i < n; i++) {
      const size_t at = k[i].at;
      p->first[i] = k[i].first;
      p->second[i] = k[i].second;
      for (uint32_t f = 0; f < p->nfields; f++)
        p->dist[i * p->nfields + f] = accel__field_distance(x, p->a[at], y, p->b[at], f);
    }
    free(k);
  }
  free(p->a);
  free(p->b);
  p->a = p->b = NULL;
  return ACCEL_OK;
}

accel_status accel_pairs_view(const accel_pairs *p, size_t *count, const uint64_t **first, const uint64_t **second,
                              const uint32_t **distances, uint32_t *nfields) {
  REQUIRE(NULL, p, ACCEL_ERR_INVALID_ARG, "pairs is NULL");
  if (count) *count = p->n;
  if (first) *first = p->first;
  if (second) *second = p->second;
  if (distances) *distances = p->dist;
  if (nfields) *nfields = p->nfields;
  return ACCEL_OK;
}

/* ------------------------------------------------------------ dispatch */

ACCEL__STAGE_FN(run_join, index, join, job)
ACCEL__STAGE_FN(run_range, index, range, job)
ACCEL__STAGE_FN(run_knn, index, knn, job)

static void job_init(accel__index_job *job, accel_index *ix, const char *stage, const accel_search_options *o,
                     const accel__search *s) {
  memset(job, 0, sizeof *job);
  job->stage = stage;
  job->index = ix;
  job->codes = accel__index_codes(ix);
  job->entry_ids = ix->ids;
  job->bits = ix->bits;
  if (s) job->search = *s;
  if (o) {
    job->progress = o->progress;
    job->progress_user = o->progress_user;
  }
}

/* The search of the job (unless `skip`: nothing to compare) into the sink,
 * then a DEBUG line saying how it ran. */
static accel_status run_search(accel_index *ix, accel__index_job *job, accel__stage_fn fn, accel__pair_sink *sink,
                               bool skip) {
  job->sink = sink;
  accel_status st = skip ? ACCEL_OK : accel__dispatch(ix->ctx, job->stage, fn, job);
  if (!st)
    accel__log(ix->ctx, ACCEL_LOG_DEBUG, "accel: %s over %zu entries by %s (%s)", job->stage, job->codes.n,
               job->used == ACCEL_INDEX_MULTI_INDEX ? "multi-index hashing" : "brute force", accel__index_isa());
  return st;
}

/* The pairs of a self-join (join) or of a range search of nq queries, for
 * the public function func. */
static accel_status search_pairs(accel_index *ix, const char *func, bool join, size_t nq, const uint64_t *queries,
                                 const accel_search_options *options, accel_pairs **out) {
  accel_search_options o;
  accel__search s;
  accel_status st = read_search(ix, func, options, &o, &s);
  if (st) return st;
  accel_pairs *p = pairs_new(ix->nfields);
  uint64_t *storage = NULL;
  accel__index_job job;
  job_init(&job, ix, join ? "index.join" : "index.range", &o, &s);
  if (!p || (!join && accel__codes_from_rows(queries, nq, ix->nfields, ix->words, &job.queries, &storage))) {
    accel_pairs_destroy(p);
    free(storage);
    return accel__fail_in(ix->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  accel__pair_sink sink = {collect, p};
  const bool skip = join ? ix->n < 2 : nq == 0 || ix->n == 0;
  st = run_search(ix, &job, join ? run_join : run_range, &sink, skip);
  if (!st && p->oom) st = accel__fail_in(ix->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for the pairs");
  if (!st && finish_pairs(p, join ? &job.codes : &job.queries, &job.codes, ix->ids, join, accel__ctx_threads(ix->ctx)))
    st = accel__fail_in(ix->ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory sorting %zu pairs", p->n);
  free(storage);
  if (st) {
    accel_pairs_destroy(p);
    return st;
  }
  *out = p;
  return ACCEL_OK;
}

accel_status accel_index_self_join(accel_index *ix, const accel_search_options *options, accel_pairs **out) {
  REQUIRE(ix ? ix->ctx : NULL, ix && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  return search_pairs(ix, __func__, true, 0, NULL, options, out);
}

accel_status accel_index_range(accel_index *ix, size_t nq, const uint64_t *queries, const accel_search_options *options,
                               accel_pairs **out) {
  if (!ix || !out || (nq && !queries)) return FAIL(ix ? ix->ctx : NULL, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  if (nq > UINT32_MAX) return FAIL(ix->ctx, ACCEL_ERR_LIMIT, "at most %u queries a call", UINT32_MAX);
  return search_pairs(ix, __func__, false, nq, queries, options, out);
}

accel_status accel_index_knn(accel_index *ix, size_t nq, const uint64_t *queries, uint32_t k, uint32_t field,
                             uint64_t *ids, uint32_t *distances) {
  if (!ix || (nq && (!queries || !ids))) return FAIL(ix ? ix->ctx : NULL, ACCEL_ERR_INVALID_ARG, "NULL argument");
  if (k < 1 || k > KNN_MAX) return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG, "k %u outside 1..%d", k, KNN_MAX);
  if (field >= ix->nfields)
    return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG, "field %u, the index has %u", field, ix->nfields);
  if (nq == 0) return ACCEL_OK;
  accel__index_job job;
  job_init(&job, ix, "index.knn", NULL, NULL);
  uint64_t *storage = NULL;
  if (accel__codes_from_rows(queries, nq, ix->nfields, ix->words, &job.queries, &storage))
    return FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  job.k = k;
  job.field = field;
  job.out_ids = ids;
  job.out_distances = distances;
  accel_status st = ACCEL_OK;
  if (ix->n == 0) {
    for (size_t i = 0; i < nq * k; i++) {
      ids[i] = UINT64_MAX;
      if (distances) distances[i] = UINT32_MAX;
    }
  } else {
    st = accel__dispatch(ix->ctx, "index.knn", run_knn, &job);
  }
  free(storage);
  return st;
}

/* The shape of `queries` for accel_index_knn_arrays: (nq, per), (nq, nfields,
 * words) or, with one word per entry, (nq,); *nq set. */
static bool query_shape(const accel_index *ix, const accel_array *q, size_t *nq) {
  const int64_t per = (int64_t)ix->nfields * ix->words;
  const bool ok = (q->ndim == 1 && per == 1) || (q->ndim == 2 && q->shape[1] == per) ||
                  (q->ndim == 3 && q->shape[1] == ix->nfields && q->shape[2] == ix->words);
  *nq = ok ? (size_t)q->shape[0] : 0;
  return ok;
}

static bool result_shape(const accel_array *a, size_t nq, uint32_t k) {
  return a->ndim == 2 && a->shape[0] == (int64_t)nq && a->shape[1] == (int64_t)k;
}

accel_status accel_index_knn_arrays(accel_index *ix, const accel_array *queries, uint32_t k, uint32_t field,
                                    const accel_array *ids, const accel_array *distances) {
  const char *func = __func__;
  if (!ix || !queries || !ids) return FAIL(ix ? ix->ctx : NULL, ACCEL_ERR_INVALID_ARG, "NULL argument");
  accel_ctx *ctx = ix->ctx;
  if (k < 1 || k > KNN_MAX) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "k %u outside 1..%d", k, KNN_MAX);
  if (field >= ix->nfields) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "field %u, the index has %u", field, ix->nfields);
  const accel_array *in[3] = {queries, ids, distances};
  const char *names[3] = {"queries", "ids", "distances"};
  const accel_dtype want[3] = {ACCEL_DTYPE_U64, ACCEL_DTYPE_U64, ACCEL_DTYPE_U32};
  accel_array plain[3];
  const accel_array *a[3] = {NULL, NULL, NULL};
  bool dev[3] = {false, false, false};
  accel_status s;
  for (int i = 0; i < 3; i++) {
    if (!in[i]) continue;
    if ((s = accel__array_accept(ctx, func, names[i], in[i], &plain[i], &a[i], &dev[i]))) return s;
    if (!dev[i] && (s = accel__array_check(ctx, func, names[i], a[i]))) return s;
    if (a[i]->dtype != want[i])
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be %s, not %s", names[i],
                            accel__dtype_name(want[i]), accel__dtype_name(a[i]->dtype));
  }
  if (dev[1] != dev[0] || (a[2] && dev[2] != dev[0]))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "queries, ids and distances must all be device arrays or all host arrays");
  size_t nq;
  if (!query_shape(ix, a[0], &nq))
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG,
                          "queries of %d dimensions: expected (nq, %u), (nq, %u, %u)%s for %u field(s) of %u bits",
                          (int)a[0]->ndim, ix->nfields * ix->words, ix->nfields, ix->words,
                          ix->nfields * ix->words == 1 ? " or (nq,)" : "", ix->nfields, ix->bits);
  for (int i = 1; i < 3; i++)
    if (a[i] && !result_shape(a[i], nq, k))
      return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s must be of shape (%zu, %u), the queries and k",
                            names[i], nq, k);
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (a[i] && a[j] && accel__arrays_overlap(a[i], a[j]))
        return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s and %s overlap", names[i], names[j]);
  if (nq == 0) return ACCEL_OK;
  accel__index_job job;
  job_init(&job, ix, "index.knn", NULL, NULL);
  job.k = k;
  job.field = field;
  job.nq = nq;
  if (dev[0]) {
    job.array_rows = a[0]->data, job.array_ids = a[1]->data, job.array_distances = a[2] ? a[2]->data : NULL;
    const size_t per = (size_t)ix->nfields * ix->words;
    accel__device_slot slots[3] = {
        {.ptr = &job.array_rows, .bytes = nq * per * sizeof(uint64_t), .in = true},
        {.ptr = &job.array_ids, .bytes = nq * k * sizeof(uint64_t), .out = true},
        {.ptr = &job.array_distances, .bytes = nq * k * sizeof(uint32_t), .out = true},
    };
    return accel__dispatch_device(ctx, "index.knn", run_knn, &job, slots, a[2] ? 3 : 2);
  }
  accel__view v[3] = {ACCEL__IN("queries", a[0]), ACCEL__OUT("ids", a[1]), ACCEL__OUT("distances", a[2])};
  if ((s = accel__views_open(ctx, func, v, 3))) return s;
  s = accel_index_knn(ix, nq, v[0].data, k, field, v[1].data, v[2].data);
  return accel__views_close(v, 3, s);
}

/* ------------------------------------------------------------ union-find */

typedef struct uf {
  uint32_t *parent, *size;
  size_t n;
  pthread_mutex_t mu;
} uf;

static bool uf_init(uf *u, size_t n) {
  u->n = n;
  u->parent = malloc((n ? n : 1) * sizeof(uint32_t));
  u->size = malloc((n ? n : 1) * sizeof(uint32_t));
  if (!u->parent || !u->size) return false;
  for (size_t i = 0; i < n; i++) {
    u->parent[i] = (uint32_t)i;
    u->size[i] = 1;
  }
  pthread_mutex_init(&u->mu, NULL);
  return true;
}

static uint32_t uf_find(uf *u, uint32_t x) {
  while (u->parent[x] != x) {
    u->parent[x] = u->parent[u->parent[x]]; /* path halving */
    x = u->parent[x];
  }
  return x;
}

static void uf_union(uf *u, uint32_t a, uint32_t b) {
  a = uf_find(u, a);
  b = uf_find(u, b);
  if (a == b) return;
  if (u->size[a] < u->size[b]) {
    uint32_t t = a;
    a = b;
    b = t;
  }
  u->parent[b] = a;
  u->size[a] += u->size[b];
}

static void uf_sink(accel__pair_sink *sink, const uint32_t *a, const uint32_t *b, size_t n) {
  uf *u = sink->user;
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; i < n; i++) uf_union(u, a[i], b[i]);
  pthread_mutex_unlock(&u->mu);
}

static void uf_free(uf *u) {
  free(u->parent);
  free(u->size);
  if (u->parent && u->size) pthread_mutex_destroy(&u->mu);
}

/* ------------------------------------------------------------ groups */

struct accel_groups {
  size_t n;
  uint64_t *offsets, *members;
};

void accel_groups_destroy(accel_groups *g) {
  if (!g) return;
  free(g->offsets);
  free(g->members);
  free(g);
}

accel_status accel_groups_view(const accel_groups *g, size_t *ngroups, const uint64_t **offsets,
                               const uint64_t **members) {
  REQUIRE(NULL, g, ACCEL_ERR_INVALID_ARG, "groups is NULL");
  if (ngroups) *ngroups = g->n;
  if (offsets) *offsets = g->offsets;
  if (members) *members = g->members;
  return ACCEL_OK;
}

typedef struct root_id {
  uint32_t root;
  uint64_t id;
} root_id;

static int cmp_root_id(const void *x, const void *y) {
  const root_id *a = x, *b = y;
  return accel__cmp_u64_pair(a->root, a->id, b->root, b->id);
}

typedef struct group_ref {
  uint64_t first;
  size_t at, len;
} group_ref;

static int cmp_group(const void *x, const void *y) {
  return accel__cmp_u64(((const group_ref *)x)->first, ((const group_ref *)y)->first);
}

/* Components of size >= 2 of u over elements whose ids are ids[0..n). */
static accel_status groups_from_uf(uf *u, const uint64_t *ids, accel_groups **out) {
  const size_t n = u->n;
  root_id *r = malloc((n ? n : 1) * sizeof *r);
  group_ref *refs = malloc((n ? n : 1) * sizeof *refs);
  accel_groups *g = calloc(1, sizeof *g);
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  if (!r || !refs || !g) goto done;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t root = uf_find(u, (uint32_t)i);
    if (u->size[root] >= 2) r[m++] = (root_id){root, ids[i]};
  }
  qsort(r, m, sizeof *r, cmp_root_id); /* by component, members by id */
  size_t ng = 0;
  for (size_t i = 0; i < m;) {
    size_t j = i + 1;
    while (j < m && r[j].root == r[i].root) j++;
    refs[ng++] = (group_ref){r[i].id, i, j - i};
    i = j;
  }
  qsort(refs, ng, sizeof *refs, cmp_group); /* groups by their first member */
  g->n = ng;
  g->offsets = malloc((ng + 1) * sizeof(uint64_t));
  g->members = malloc((m ? m : 1) * sizeof(uint64_t));
  if (!g->offsets || !g->members) goto done;
  size_t k = 0;
  for (size_t i = 0; i < ng; i++) {
    g->offsets[i] = k;
    for (size_t j = 0; j < refs[i].len; j++) g->members[k++] = r[refs[i].at + j].id;
  }
  g->offsets[ng] = k;
  *out = g;
  g = NULL;
  st = ACCEL_OK;
done:
  free(r);
  free(refs);
  accel_groups_destroy(g);
  return st;
}

static int cmp_u64(const void *x, const void *y) { return accel__cmp_u64(*(const uint64_t *)x, *(const uint64_t *)y); }

accel_status accel_groups_from_pairs(size_t npairs, const uint64_t *first, const uint64_t *second, accel_groups **out) {
  if (!out || (npairs && (!first || !second))) return FAIL(NULL, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  if (npairs > UINT32_MAX / 2) return FAIL(NULL, ACCEL_ERR_LIMIT, "too many pairs");
  /* ids to dense numbers: the sorted distinct ids */
  uint64_t *ids = malloc((npairs ? 2 * npairs : 1) * sizeof(uint64_t));
  REQUIRE(NULL, ids, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  if (npairs) {
    memcpy(ids, first, npairs * sizeof(uint64_t));
    memcpy(ids + npairs, second, npairs * sizeof(uint64_t));
  }
  qsort(ids, 2 * npairs, sizeof(uint64_t), cmp_u64);
  size_t n = 0;
  for (size_t i = 0; i < 2 * npairs; i++)
    if (i == 0 || ids[i] != ids[n - 1]) ids[n++] = ids[i];
  uf u;
  accel_status s = ACCEL_OK;
  if (!uf_init(&u, n)) {
    s = ACCEL_ERR_OUT_OF_MEMORY;
  } else {
    for (size_t i = 0; i < npairs; i++) {
      const size_t a = accel__lower_bound_u64(ids, n, first[i]), b = accel__lower_bound_u64(ids, n, second[i]);
      uf_union(&u, (uint32_t)a, (uint32_t)b);
    }
    s = groups_from_uf(&u, ids, out);
  }
  uf_free(&u);
  free(ids);
  if (s) return FAIL(NULL, s, "out of memory");
  return ACCEL_OK;
}

accel_status accel_index_group(accel_index *ix, const accel_search_options *options, accel_groups **out) {
  REQUIRE(ix ? ix->ctx : NULL, ix && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *out = NULL;
  accel_search_options o;
  accel__search s;
  accel_status st = read_search(ix, __func__, options, &o, &s);
  if (st) return st;
  uf u;
  if (!uf_init(&u, ix->n)) {
    uf_free(&u);
    return FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  accel__pair_sink sink = {uf_sink, &u};
  accel__index_job job;
  job_init(&job, ix, "index.join", &o, &s);
  st = run_search(ix, &job, run_join, &sink, ix->n < 2);
  if (!st && groups_from_uf(&u, ix->ids, out)) st = FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  uf_free(&u);
  return st;
}
