/* suite_index: the Hamming index against a straightforward reference (every
 * pair, bits counted one by one) on random and clustered codes, for 64, 128
 * and 256 bits, thresholds 0..12, both rules, every algorithm (and the CUDA
 * pipeline in host emulation); k-nearest, grouping, the container, files. */
#include "emulated_gpu.h"
#include "testutil.h"

#include "index/mih.h"
#include "index/ops.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ------------------------------------------------------------ data */

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

typedef struct dataset {
  size_t n;
  uint32_t words, nfields;
  uint64_t *ids, *codes; /* codes: [n][nfields][words] */
} dataset;

/* Random codes, or clusters: a few centres, members a few bits away, and
 * runs of identical copies. Ids random and unique (not the positions). */
static dataset make_data(size_t n, uint32_t bits, uint32_t nfields, bool clustered, uint64_t seed) {
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  dataset d = {n, bits / 64, nfields, malloc(n * sizeof(uint64_t)),
               malloc(n * nfields * (bits / 64) * sizeof(uint64_t))};
  const size_t wpe = nfields * d.words;
  for (size_t i = 0; i < n; i++) {
    d.ids[i] = (rnd() << 20) ^ i; /* unique: the low bits hold i */
    uint64_t *c = d.codes + i * wpe;
    if (!clustered || i < 8) {
      for (size_t w = 0; w < wpe; w++) c[w] = rnd();
    } else if (i % 5 == 0) { /* an identical copy of an earlier code */
      memcpy(c, d.codes + (rnd() % i) * wpe, wpe * 8);
    } else { /* a centre (one of the first 8) with a few flipped bits */
      memcpy(c, d.codes + (rnd() % 8) * wpe, wpe * 8);
      for (int k = (int)(rnd() % 9); k > 0; k--) {
        uint64_t b = rnd() % (wpe * 64);
        c[b / 64] ^= 1ull << (b % 64);
      }
    }
  }
  return d;
}

static void free_data(dataset *d) {
  free(d->ids);
  free(d->codes);
}

/* ------------------------------------------------------------ the reference */

/* Bits counted by clearing the lowest set bit, one at a time: no table, no
 * hardware popcount, nothing shared with the library's kernels. */
static uint32_t slow_distance(const uint64_t *a, const uint64_t *b, uint32_t words) {
  uint32_t d = 0;
  for (uint32_t w = 0; w < words; w++)
    for (uint64_t x = a[w] ^ b[w]; x; x &= x - 1) d++;
  return d;
}

static bool slow_match(const uint64_t *a, const uint64_t *b, const dataset *d, const accel_search_options *o) {
  int within = 0;
  for (uint32_t f = 0; f < d->nfields; f++)
    within += slow_distance(a + f * d->words, b + f * d->words, d->words) <= o->thresholds[f];
  return o->rule == ACCEL_INDEX_ALL ? within == (int)d->nfields : within > 0;
}

typedef struct pair {
  uint64_t a, b;
} pair;

static int cmp_pair(const void *x, const void *y) {
  const pair *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  return (p->b > q->b) - (p->b < q->b);
}

static pair *reference_join(const dataset *d, const accel_search_options *o, size_t *np) {
  size_t cap = 1024, n = 0;
  pair *p = malloc(cap * sizeof *p);
  const size_t wpe = d->nfields * d->words;
  for (size_t i = 0; i < d->n; i++)
    for (size_t j = i + 1; j < d->n; j++)
      if (slow_match(d->codes + i * wpe, d->codes + j * wpe, d, o)) {
        if (n == cap) p = realloc(p, (cap *= 2) * sizeof *p);
        uint64_t a = d->ids[i], b = d->ids[j];
        p[n++] = a < b ? (pair){a, b} : (pair){b, a};
      }
  qsort(p, n, sizeof *p, cmp_pair);
  *np = n;
  return p;
}

/* ------------------------------------------------------------ helpers */

static accel_index *build(accel_ctx *ctx, const dataset *d) {
  accel_index_options o;
  accel_index_options_init(&o, sizeof o);
  o.bits = d->words * 64;
  o.nfields = d->nfields;
  accel_index *ix = NULL;
  ck_assert_int_eq(accel_index_create(ctx, &o, &ix), ACCEL_OK);
  ck_assert_int_eq(accel_index_add(ix, d->n, d->ids, d->codes, NULL, NULL), ACCEL_OK);
  return ix;
}

/* A search's pairs, as accel_pairs_view gives them. */
typedef struct pairs_view {
  size_t n;
  const uint64_t *first, *second;
  const uint32_t *dist;
  uint32_t nf;
} pairs_view;

static pairs_view view_pairs(const accel_pairs *p) {
  pairs_view v;
  accel_pairs_view(p, &v.n, &v.first, &v.second, &v.dist, &v.nf);
  return v;
}

/* The join equals the reference: the same pairs, in (first, second) order,
 * with the distances of every field. */
static void check_join_with(accel_index *ix, const dataset *d, const accel_search_options *o, const char *what,
                            const pair *ref, size_t nref) {
  accel_pairs *p = NULL;
  ck_assert_msg(accel_index_self_join(ix, o, &p) == ACCEL_OK, "%s: %s", what, accel_last_error(NULL));
  const pairs_view v = view_pairs(p);
  ck_assert_msg(v.n == nref, "%s: %zu pairs, the reference has %zu", what, v.n, nref);
  for (size_t i = 0; i < v.n; i++) {
    EXPECT(v.first[i] == ref[i].a && v.second[i] == ref[i].b, "%s: pair %zu differs", what, i);
    size_t pa = 0, pb = 0;
    accel_index_find(ix, v.first[i], &pa);
    accel_index_find(ix, v.second[i], &pb);
    for (uint32_t f = 0; f < v.nf; f++) {
      uint64_t ca[8 * 4], cb[8 * 4];
      accel_index_get(ix, pa, NULL, ca, NULL, NULL);
      accel_index_get(ix, pb, NULL, cb, NULL, NULL);
      EXPECT(v.dist[i * v.nf + f] == slow_distance(ca + f * d->words, cb + f * d->words, d->words),
             "%s: pair %zu distance %u", what, i, f);
    }
  }
  accel_pairs_destroy(p);
}

static void check_join(accel_index *ix, const dataset *d, const accel_search_options *o, const char *what) {
  size_t nref;
  pair *ref = reference_join(d, o, &nref);
  check_join_with(ix, d, o, what, ref, nref);
  free(ref);
}

/* Search options as initialised, with field 0's threshold `r`. */
static accel_search_options search_options(uint32_t r) {
  accel_search_options o;
  accel_search_options_init(&o, sizeof o);
  o.thresholds[0] = r;
  return o;
}

/* ------------------------------------------------------------ joins */

START_TEST(joins_equal_the_reference) {
  accel_ctx *ctx = cpu_ctx();
  const uint32_t bits[3] = {64, 128, 256};
  for (int b = 0; b < 3; b++)
    for (int clustered = 0; clustered < 2; clustered++) {
      dataset d = make_data(400, bits[b], 1, clustered, (uint64_t)(b * 2 + clustered + 1));
      accel_index *ix = build(ctx, &d);
      for (uint32_t r = 0; r <= 12; r++)
        for (int alg = 0; alg < 3; alg++) {
          accel_search_options o = search_options(r);
          o.algorithm = (accel_index_algorithm)alg;
          char what[96];
          snprintf(what, sizeof what, "%u bits %s r=%u algorithm %d", bits[b], clustered ? "clustered" : "random", r,
                   alg);
          check_join(ix, &d, &o, what);
        }
      accel_index_destroy(ix);
      free_data(&d);
    }
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(several_fields_and_both_rules) {
  accel_ctx *ctx = cpu_ctx();
  for (int clustered = 0; clustered < 2; clustered++) {
    dataset d = make_data(350, 64, 3, clustered, 40 + (uint64_t)clustered);
    accel_index *ix = build(ctx, &d);
    const uint32_t th[][3] = {{5, 5, 5}, {0, 12, 3}, {10, 2, 7}, {12, 12, 12}, {0, 0, 0}};
    for (size_t t = 0; t < sizeof th / sizeof th[0]; t++)
      for (int rule = 0; rule < 2; rule++)
        for (int alg = 0; alg < 3; alg++) {
          accel_search_options o;
          accel_search_options_init(&o, sizeof o);
          memcpy(o.thresholds, th[t], sizeof th[t]);
          o.rule = (accel_index_rule)rule;
          o.algorithm = (accel_index_algorithm)alg;
          char what[96];
          snprintf(what, sizeof what, "3 fields %s thresholds %zu rule %d algorithm %d",
                   clustered ? "clustered" : "random", t, rule, alg);
          check_join(ix, &d, &o, what);
        }
    accel_index_destroy(ix);
    free_data(&d);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

/* Large enough that AUTO picks multi-index hashing for small thresholds and
 * brute force spans several column tiles, with many identical codes
 * (clustered). */
START_TEST(multi_index_at_scale) {
  accel_ctx *ctx = cpu_ctx();
  for (int clustered = 0; clustered < 2; clustered++) {
    dataset d = make_data(5000, 64, 1, clustered, 77 + (uint64_t)clustered);
    accel_index *ix = build(ctx, &d);
    for (uint32_t r = 0; r <= 10; r += 2) {
      accel_search_options o = search_options(r);
      size_t nref;
      pair *ref = reference_join(&d, &o, &nref);
      for (int alg = 0; alg < 3; alg++) { /* several row blocks and column tiles of brute force */
        o.algorithm = (accel_index_algorithm)alg;
        char what[64];
        snprintf(what, sizeof what, "5000 %s r=%u algorithm %d", clustered ? "clustered" : "random", r, alg);
        check_join_with(ix, &d, &o, what, ref, nref);
      }
      free(ref);
    }
    accel_index_destroy(ix);
    free_data(&d);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ multi-index plans */

/* Groups of ten: a random first code, the others it with 0..maxflips random
 * bits flipped, so that pair distances straddle the threshold; ids ascend. */
static dataset make_groups(size_t n, uint32_t bits, uint32_t maxflips, uint64_t seed) {
  dataset d = make_data(n, bits, 1, false, seed);
  for (size_t i = 0; i < n; i++) {
    d.ids[i] = 3 * i + 7; /* ascending with the position: the pair sort's shortcut */
    if (i % 10 == 0) continue;
    uint64_t *c = d.codes + i * d.words;
    memcpy(c, d.codes + (i - i % 10) * d.words, d.words * sizeof(uint64_t));
    for (uint32_t k = (uint32_t)(rnd() % (maxflips + 1)); k > 0; k--) {
      const uint64_t b = rnd() % bits;
      c[b / 64] ^= 1ull << (b % 64);
    }
  }
  return d;
}

/* Every pair of one-field codes within r, by ids (hardware popcount: fast
 * enough for tens of thousands of codes, and independent of the index). */
static pair *popcount_join(const dataset *d, uint32_t r, size_t *np) {
  size_t cap = 1024, n = 0;
  pair *p = malloc(cap * sizeof *p);
  for (size_t i = 0; i < d->n; i++)
    for (size_t j = i + 1; j < d->n; j++) {
      uint32_t dist = 0;
      for (uint32_t w = 0; w < d->words; w++)
        dist += (uint32_t)__builtin_popcountll(d->codes[i * d->words + w] ^ d->codes[j * d->words + w]);
      if (dist > r) continue;
      if (n == cap) p = realloc(p, (cap *= 2) * sizeof *p);
      const uint64_t a = d->ids[i], b = d->ids[j];
      p[n++] = a < b ? (pair){a, b} : (pair){b, a};
    }
  qsort(p, n, sizeof *p, cmp_pair);
  *np = n;
  return p;
}

/* The plan's invariants: m <= r + 1 contiguous substrings covering the code,
 * keys no longer than their substrings, radii summing to r - m + 1. */
static void check_plan(const accel__mih_plan *p, uint32_t bits, uint32_t r, const char *what) {
  uint32_t sum = 0, next = 0;
  ck_assert_msg(p->shape.m >= 1 && p->shape.m <= r + 1, "%s: m = %u", what, p->shape.m);
  for (uint32_t s = 0; s < p->shape.m; s++) {
    ck_assert_msg(p->shape.start[s] == next && p->shape.len[s] >= 1, "%s: substring %u", what, s);
    ck_assert_msg(p->shape.key_bits[s] >= 1 && p->shape.key_bits[s] <= p->shape.len[s] &&
                      p->shape.key_bits[s] <= ACCEL__MIH_MAX_KEY_BITS,
                  "%s: key of substring %u", what, s);
    next += p->shape.len[s];
    sum += p->radius[s];
  }
  ck_assert_msg(next == bits && sum == r + 1 - p->shape.m, "%s: %u bits, radii sum %u", what, next, sum);
}

/* Range search through multi-index hashing against the popcount scan:
 * queries near entries (a few flips) and random ones. */
static void check_mih_range(accel_index *ix, const dataset *d, uint32_t r, const char *what) {
  dataset q = make_data(40, d->words * 64, 1, false, 500 + r);
  for (size_t i = 0; i < 20; i++) {
    uint64_t *c = q.codes + i * d->words;
    memcpy(c, d->codes + (rnd() % d->n) * d->words, d->words * sizeof(uint64_t));
    for (uint32_t k = (uint32_t)(rnd() % (r + 2)); k > 0; k--) {
      const uint64_t b = rnd() % (d->words * 64);
      c[b / 64] ^= 1ull << (b % 64);
    }
  }
  accel_search_options o = search_options(r);
  o.algorithm = ACCEL_INDEX_MULTI_INDEX;
  accel_pairs *p = NULL;
  ck_assert_int_eq(accel_index_range(ix, q.n, q.codes, &o, &p), ACCEL_OK);
  pair *want = malloc(q.n * d->n * sizeof *want);
  size_t nw = 0;
  for (size_t qi = 0; qi < q.n; qi++)
    for (size_t j = 0; j < d->n; j++) {
      uint32_t dist = 0;
      for (uint32_t w = 0; w < d->words; w++)
        dist += (uint32_t)__builtin_popcountll(q.codes[qi * d->words + w] ^ d->codes[j * d->words + w]);
      if (dist <= r) want[nw++] = (pair){qi, d->ids[j]};
    }
  qsort(want, nw, sizeof *want, cmp_pair);
  const pairs_view v = view_pairs(p);
  ck_assert_msg(v.n == nw, "%s range: %zu pairs, the scan %zu", what, v.n, nw);
  for (size_t i = 0; i < nw; i++)
    EXPECT(v.first[i] == want[i].a && v.second[i] == want[i].b, "%s range: pair %zu differs", what, i);
  free(want);
  accel_pairs_destroy(p);
  free_data(&q);
}

/* Substrings and radii chosen from N as well as r (fewer, longer substrings
 * searched within a radius by enumerating bit flips, keys shorter than their
 * substrings, several substrings all with radius >= 1) find exactly the
 * pairs of a popcount scan, on random codes and on groups whose distances
 * straddle the threshold. */
START_TEST(mih_plans_equal_brute_force) {
  static const struct {
    size_t n;
    uint32_t bits, r;
  } cases[] = {{300, 64, 1},    {300, 64, 4},  {300, 64, 20},  {300, 128, 9},  {300, 256, 14},
               {3000, 64, 2},   {3000, 64, 9}, {3000, 64, 14}, {3000, 128, 6}, {3000, 128, 30},
               {3000, 256, 20}, {8000, 64, 4}, {8000, 64, 9},  {8000, 128, 30}};
  accel_ctx *ctx = cpu_ctx();
  bool all_radii_positive = false, short_keys = false, exact_substrings = false;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int clustered = 0; clustered < 2; clustered++) {
      const size_t n = cases[c].n;
      const uint32_t bits = cases[c].bits, r = cases[c].r;
      char what[96];
      snprintf(what, sizeof what, "%zu x %u bits %s r=%u", n, bits, clustered ? "groups" : "random", r);
      accel__mih_plan plan;
      accel__mih_choose(n, 0, bits, r, &plan);
      check_plan(&plan, bits, r, what);
      uint32_t min_radius = UINT32_MAX;
      for (uint32_t s = 0; s < plan.shape.m; s++) {
        if (plan.radius[s] < min_radius) min_radius = plan.radius[s];
        if (plan.shape.key_bits[s] < plan.shape.len[s]) short_keys = true;
      }
      all_radii_positive |= plan.shape.m > 1 && min_radius >= 1;
      exact_substrings |= plan.shape.m > 1 && plan.radius[0] == 0;
      dataset d = clustered ? make_groups(n, bits, r, 600 + c) : make_data(n, bits, 1, false, 700 + c);
      accel_index *ix = build(ctx, &d);
      size_t nref;
      pair *ref = popcount_join(&d, r, &nref);
      accel_search_options o = search_options(r);
      o.algorithm = ACCEL_INDEX_MULTI_INDEX;
      accel_pairs *p = NULL;
      ck_assert_msg(accel_index_self_join(ix, &o, &p) == ACCEL_OK, "%s: %s", what, accel_last_error(NULL));
      const pairs_view v = view_pairs(p);
      ck_assert_msg(v.n == nref, "%s: %zu pairs, the scan %zu", what, v.n, nref);
      for (size_t i = 0; i < nref; i++)
        EXPECT(v.first[i] == ref[i].a && v.second[i] == ref[i].b, "%s: pair %zu differs", what, i);
      accel_pairs_destroy(p);
      if (n <= 3000) check_mih_range(ix, &d, r, what);
      free(ref);
      accel_index_destroy(ix);
      free_data(&d);
    }
  ck_assert_msg(all_radii_positive && short_keys && exact_substrings, "the cases cover every kind of plan");
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ range, k-nearest */

START_TEST(range_and_knn_equal_the_reference) {
  accel_ctx *ctx = cpu_ctx();
  for (int clustered = 0; clustered < 2; clustered++) {
    dataset d = make_data(3000, 128, 2, clustered, 90 + (uint64_t)clustered);
    dataset q = make_data(60, 128, 2, clustered, 190 + (uint64_t)clustered);
    memcpy(q.codes, d.codes, 20 * 2 * 2 * sizeof(uint64_t)); /* some queries are entries */
    accel_index *ix = build(ctx, &d);
    const size_t wpe = 2 * 2;
    for (uint32_t r = 0; r <= 12; r += 3)
      for (int alg = 0; alg < 3; alg++) {
        accel_search_options o = search_options(r);
        o.thresholds[1] = r + 2;
        o.rule = r % 2 ? ACCEL_INDEX_ANY : ACCEL_INDEX_ALL;
        o.algorithm = (accel_index_algorithm)alg;
        accel_pairs *p = NULL;
        ck_assert_int_eq(accel_index_range(ix, q.n, q.codes, &o, &p), ACCEL_OK);
        size_t n, k = 0;
        const uint64_t *first, *second;
        accel_pairs_view(p, &n, &first, &second, NULL, NULL);
        for (size_t qi = 0; qi < q.n; qi++) {
          uint64_t want[3000];
          size_t nw = 0;
          for (size_t j = 0; j < d.n; j++)
            if (slow_match(q.codes + qi * wpe, d.codes + j * wpe, &d, &o)) want[nw++] = d.ids[j];
          /* sort ids ascending */
          for (size_t a = 1; a < nw; a++)
            for (size_t b2 = a; b2 > 0 && want[b2 - 1] > want[b2]; b2--) {
              uint64_t t = want[b2];
              want[b2] = want[b2 - 1];
              want[b2 - 1] = t;
            }
          for (size_t t = 0; t < nw; t++, k++) {
            EXPECT(k < n && first[k] == qi && second[k] == want[t], "range r=%u alg %d query %zu", r, alg, qi);
          }
        }
        ck_assert_uint_eq(k, n);
        accel_pairs_destroy(p);
      }
    /* k nearest by field 1, ties by id */
    const uint32_t K = 7;
    uint64_t ids[60 * 7];
    uint32_t dist[60 * 7];
    ck_assert_int_eq(accel_index_knn(ix, q.n, q.codes, K, 1, ids, dist), ACCEL_OK);
    for (size_t qi = 0; qi < q.n; qi++) {
      /* reference: the K smallest (distance, id) */
      uint32_t best_d[7];
      uint64_t best_id[7];
      for (uint32_t r = 0; r < K; r++) {
        best_d[r] = UINT32_MAX;
        best_id[r] = UINT64_MAX;
      }
      for (size_t j = 0; j < d.n; j++) {
        uint32_t dd = slow_distance(q.codes + qi * wpe + 2, d.codes + j * wpe + 2, 2);
        uint64_t id = d.ids[j];
        for (uint32_t r = 0; r < K; r++)
          if (dd < best_d[r] || (dd == best_d[r] && id < best_id[r])) {
            for (uint32_t s = K - 1; s > r; s--) {
              best_d[s] = best_d[s - 1];
              best_id[s] = best_id[s - 1];
            }
            best_d[r] = dd;
            best_id[r] = id;
            break;
          }
      }
      for (uint32_t r = 0; r < K; r++) {
        EXPECT(dist[qi * K + r] == best_d[r] && ids[qi * K + r] == best_id[r], "knn query %zu rank %u", qi, r);
      }
    }
    accel_index_destroy(ix);
    free_data(&d);
    free_data(&q);
  }
  /* fewer entries than k: padding */
  dataset d = make_data(3, 64, 1, false, 5);
  accel_index *ix = build(ctx, &d);
  uint64_t ids[5];
  uint32_t dist[5];
  ck_assert_int_eq(accel_index_knn(ix, 1, d.codes, 5, 0, ids, dist), ACCEL_OK);
  ck_assert_uint_eq(dist[0], 0);
  ck_assert_uint_eq(ids[0], d.ids[0]);
  ck_assert_uint_eq(ids[3], UINT64_MAX);
  ck_assert_uint_eq(dist[4], UINT32_MAX);
  ck_assert_int_eq(accel_index_knn(ix, 1, d.codes, 0, 0, ids, dist), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_index_knn(ix, 1, d.codes, 1, 1, ids, dist), ACCEL_ERR_INVALID_ARG);
  accel_index_destroy(ix);
  free_data(&d);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ grouping */

static void check_groups_equal_components(const pair *p, size_t np, const accel_groups *g) {
  /* reference components by repeated relabelling */
  uint64_t ids[4096];
  size_t n = 0;
  for (size_t i = 0; i < np; i++) {
    uint64_t v[2] = {p[i].a, p[i].b};
    for (int k = 0; k < 2; k++) {
      size_t j = 0;
      while (j < n && ids[j] != v[k]) j++;
      if (j == n) ids[n++] = v[k];
    }
  }
  size_t label[4096];
  for (size_t i = 0; i < n; i++) label[i] = i;
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < np; i++) {
      size_t x = 0, y = 0;
      while (ids[x] != p[i].a) x++;
      while (ids[y] != p[i].b) y++;
      size_t lo = label[x] < label[y] ? label[x] : label[y];
      if (label[x] != lo || label[y] != lo) {
        for (size_t k = 0; k < n; k++)
          if (label[k] == label[x] || label[k] == label[y]) label[k] = lo;
        again = true;
      }
    }
  }
  size_t ng;
  const uint64_t *off, *mem;
  accel_groups_view(g, &ng, &off, &mem);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++) {
    bool first = true;
    for (size_t k = 0; k < i; k++) first = first && label[k] != label[i];
    distinct += first;
  }
  ck_assert_uint_eq(ng, distinct);
  size_t total = 0;
  for (size_t gi = 0; gi < ng; gi++) {
    EXPECT(off[gi + 1] - off[gi] >= 2, "group %zu has fewer than 2 members", gi);
    EXPECT(!gi || mem[off[gi - 1]] < mem[off[gi]], "group %zu out of order", gi); /* groups by first member */
    for (uint64_t m = off[gi]; m < off[gi + 1]; m++) {
      EXPECT(m == off[gi] || mem[m - 1] < mem[m], "group %zu members unsorted", gi); /* members sorted */
      size_t x = 0, y = 0;
      while (ids[x] != mem[m]) x++;
      while (ids[y] != mem[off[gi]]) y++;
      EXPECT(label[x] == label[y], "group %zu spans two components", gi); /* one component */
      total++;
    }
  }
  ck_assert_uint_eq(total, n);
}

typedef struct dist_id {
  uint32_t d;
  uint64_t id;
} dist_id;

static int cmp_dist_id(const void *x, const void *y) {
  const dist_id *a = x, *b = y;
  return accel__cmp_u64_pair(a->d, a->id, b->d, b->id);
}

/* The CPU's k nearest with each popcount kernel (generic, POPCNT, AVX-512
 * where the CPU has them: accel__index_isa_cap), every width, on clustered
 * codes (runs of identical copies: ties at the k-th distance), queries in
 * whole and partial blocks, k from 1 to more than the entries: every
 * (distance, id) list sorted independently. */
START_TEST(cpu_knn_kernels_equal_the_reference) {
  static const uint32_t widths[] = {64, 128, 256}, ks[] = {1, 7, 100, 1600};
  accel_ctx *ctx = cpu_ctx();
  for (int wi = 0; wi < 3; wi++) {
    dataset d = make_data(1500, widths[wi], 2, true, 400 + (uint64_t)wi);
    const size_t nq = 37, wpe = 2 * d.words;
    accel_index *ix = build(ctx, &d);
    dist_id *all = malloc(d.n * sizeof *all);
    uint64_t *ids = malloc(nq * 1600 * 8);
    uint32_t *dist = malloc(nq * 1600 * 4);
    for (int cap = 0; cap <= 2; cap++) {
      accel__index_isa_cap = cap;
      for (int ki = 0; ki < 4; ki++) {
        const uint32_t k = ks[ki];
        ck_assert_int_eq(accel_index_knn(ix, nq, d.codes + 3 * wpe, k, 1, ids, dist), ACCEL_OK);
        for (size_t qi = 0; qi < nq; qi++) {
          for (size_t j = 0; j < d.n; j++)
            all[j] = (dist_id){slow_distance(d.codes + (3 + qi) * wpe + d.words, d.codes + j * wpe + d.words, d.words),
                               d.ids[j]};
          qsort(all, d.n, sizeof *all, cmp_dist_id);
          for (uint32_t r = 0; r < k; r++) {
            const uint64_t want_id = r < d.n ? all[r].id : UINT64_MAX;
            const uint32_t want_d = r < d.n ? all[r].d : UINT32_MAX;
            EXPECT(ids[qi * k + r] == want_id && dist[qi * k + r] == want_d,
                   "kernel %d, %u bits, k %u, query %zu rank %u", cap, widths[wi], k, qi, r);
          }
        }
      }
    }
    accel__index_isa_cap = 2;
    free(all);
    free(ids);
    free(dist);
    accel_index_destroy(ix);
    free_data(&d);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

/* accel_index_knn_arrays on host arrays: every accepted shape of the
 * queries, strided outputs and no distances give accel_index_knn's results
 * (checked against the reference above); wrong shapes, dtypes, overlaps
 * and device arrays on a CPU context are refused without a write. */
START_TEST(knn_arrays_equal_knn) {
  accel_ctx *ctx = cpu_ctx();
  const uint32_t K = 6;
  for (int shape = 0; shape < 3; shape++) {
    const uint32_t bits = shape == 0 ? 64 : 128, nf = shape == 0 ? 1 : 2;
    dataset d = make_data(900, bits, nf, true, 300 + (uint64_t)shape);
    accel_index *ix = build(ctx, &d);
    const size_t nq = 50, wpe = nf * d.words;
    uint64_t want_ids[50 * 6], got_ids[50 * 2 * 6];
    uint32_t want_d[50 * 6], got_d[50 * 6];
    const uint32_t field = nf - 1;
    ck_assert_int_eq(accel_index_knn(ix, nq, d.codes, K, field, want_ids, want_d), ACCEL_OK);
    accel_array q, ids, dist;
    const int64_t q1[1] = {(int64_t)nq}, q2[2] = {(int64_t)nq, (int64_t)wpe}, q3[3] = {(int64_t)nq, nf, d.words};
    const int64_t rs[2] = {(int64_t)nq, K};
    ck_assert_int_eq(accel_array_init(&q, d.codes, ACCEL_DTYPE_U64, shape + 1,
                                      shape == 0   ? q1
                                      : shape == 1 ? q2
                                                   : q3),
                     ACCEL_OK);
    /* ids every second element of a wider buffer: a strided output */
    ck_assert_int_eq(accel_array_init(&ids, got_ids, ACCEL_DTYPE_U64, 2, rs), ACCEL_OK);
    ids.strides[1] = 16;
    ids.strides[0] = 16 * K;
    ck_assert_int_eq(accel_array_init(&dist, got_d, ACCEL_DTYPE_U32, 2, rs), ACCEL_OK);
    memset(got_ids, 0, sizeof got_ids);
    ck_assert_msg(accel_index_knn_arrays(ix, &q, K, field, &ids, &dist) == ACCEL_OK, "%s", accel_last_error(ctx));
    for (size_t i = 0; i < nq * K; i++) ck_assert_uint_eq(got_ids[2 * i], want_ids[i]);
    ck_assert_mem_eq(got_d, want_d, sizeof want_d);
    ck_assert_int_eq(accel_index_knn_arrays(ix, &q, K, field, &ids, NULL), ACCEL_OK);
    for (size_t i = 0; i < nq * K; i++) ck_assert_uint_eq(got_ids[2 * i], want_ids[i]);
    /* refusals: nothing written */
    memset(got_ids, 0xAB, sizeof got_ids);
    accel_array bad = q;
    bad.dtype = ACCEL_DTYPE_I64;
    ck_assert_int_eq(accel_index_knn_arrays(ix, &bad, K, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "queries must be U64"));
    ck_assert_int_eq(accel_index_knn_arrays(ix, &q, K + 1, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "ids must be of shape"));
    ck_assert_int_eq(accel_index_knn_arrays(ix, &q, K, nf, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    const int64_t wrong[2] = {(int64_t)nq, (int64_t)wpe + 1};
    ck_assert_int_eq(accel_array_init(&bad, d.codes, ACCEL_DTYPE_U64, 2, wrong), ACCEL_OK);
    ck_assert_int_eq(accel_index_knn_arrays(ix, &bad, K, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    if (shape > 0) { /* (nq,) only for one 64-bit field */
      ck_assert_int_eq(accel_array_init(&bad, d.codes, ACCEL_DTYPE_U64, 1, q1), ACCEL_OK);
      ck_assert_int_eq(accel_index_knn_arrays(ix, &bad, K, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    }
    accel_array ov = dist; /* distances over the ids' memory */
    ov.data = got_ids;
    ck_assert_int_eq(accel_index_knn_arrays(ix, &q, K, field, &ids, &ov), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "overlap"));
    accel_array dq = q;
    ck_assert_int_eq(accel_array_on_device(&dq), ACCEL_OK);
    ck_assert_int_eq(accel_index_knn_arrays(ix, &dq, K, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "device memory"));
    ck_assert_int_eq(accel_index_knn_arrays(ix, NULL, K, field, &ids, &dist), ACCEL_ERR_INVALID_ARG);
    for (size_t i = 0; i < sizeof got_ids; i++) ck_assert_uint_eq(((uint8_t *)got_ids)[i], 0xAB);
    /* no queries: nothing to do */
    const int64_t none[2] = {0, (int64_t)wpe}, rnone[2] = {0, K};
    ck_assert_int_eq(accel_array_init(&bad, d.codes, ACCEL_DTYPE_U64, 2, none), ACCEL_OK);
    ck_assert_int_eq(accel_array_init(&ids, got_ids, ACCEL_DTYPE_U64, 2, rnone), ACCEL_OK);
    ck_assert_int_eq(accel_index_knn_arrays(ix, &bad, K, field, &ids, NULL), ACCEL_OK);
    accel_index_destroy(ix);
    free_data(&d);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(grouping_is_connected_components) {
  accel_ctx *ctx = cpu_ctx();
  dataset d = make_data(600, 64, 2, true, 123);
  accel_index *ix = build(ctx, &d);
  for (uint32_t r = 0; r <= 8; r += 4) {
    accel_search_options o = search_options(r);
    o.thresholds[1] = r;
    o.rule = ACCEL_INDEX_ALL;
    size_t np;
    pair *ref = reference_join(&d, &o, &np);
    uint64_t *a = malloc((np ? np : 1) * 8), *b = malloc((np ? np : 1) * 8);
    for (size_t i = 0; i < np; i++) {
      a[i] = ref[i].a;
      b[i] = ref[i].b;
    }
    accel_groups *g1 = NULL, *g2 = NULL;
    ck_assert_int_eq(accel_groups_from_pairs(np, a, b, &g1), ACCEL_OK);
    check_groups_equal_components(ref, np, g1);
    ck_assert_int_eq(accel_index_group(ix, &o, &g2), ACCEL_OK); /* without materializing pairs: the same groups */
    size_t n1, n2;
    const uint64_t *o1, *m1, *o2, *m2;
    accel_groups_view(g1, &n1, &o1, &m1);
    accel_groups_view(g2, &n2, &o2, &m2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(o1, o2, (n1 + 1) * sizeof(uint64_t));
    ck_assert_mem_eq(m1, m2, o1[n1] * sizeof(uint64_t));
    accel_groups_destroy(g1);
    accel_groups_destroy(g2);
    free(a);
    free(b);
    free(ref);
  }
  accel_groups *g = NULL;
  ck_assert_int_eq(accel_groups_from_pairs(0, NULL, NULL, &g), ACCEL_OK);
  size_t ng = 9;
  accel_groups_view(g, &ng, NULL, NULL);
  ck_assert_uint_eq(ng, 0);
  accel_groups_destroy(g);
  accel_index_destroy(ix);
  free_data(&d);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ the container */

START_TEST(add_remove_get_find_meta) {
  accel_ctx *ctx = cpu_ctx();
  accel_index *ix = NULL;
  accel_index_options o;
  accel_index_options_init(&o, sizeof o);
  o.bits = 128;
  o.nfields = 2;
  ck_assert_int_eq(accel_index_create(ctx, &o, &ix), ACCEL_OK);
  uint64_t ids[3] = {10, 20, 30}, codes[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const char *labels[3] = {"a.jpg", NULL, "c.png"};
  uint64_t stamps[3] = {111, 222, 333};
  ck_assert_int_eq(accel_index_add(ix, 3, ids, codes, labels, stamps), ACCEL_OK);
  uint64_t dup[2] = {40, 20};
  ck_assert_int_eq(accel_index_add(ix, 2, dup, codes, NULL, NULL), ACCEL_ERR_INVALID_ARG); /* all or nothing */
  uint64_t twice[2] = {50, 50};
  ck_assert_int_eq(accel_index_add(ix, 2, twice, codes, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "twice"));
  size_t count, pos;
  uint32_t b, nf;
  accel_index_info(ix, &b, &nf, &count);
  ck_assert_uint_eq(count, 3);
  ck_assert_uint_eq(b, 128);
  ck_assert_uint_eq(nf, 2);
  ck_assert_int_eq(accel_index_find(ix, 40, &pos), ACCEL_ERR_NOT_FOUND);
  ck_assert_int_eq(accel_index_find(ix, 50, &pos), ACCEL_ERR_NOT_FOUND);
  size_t removed;
  uint64_t gone[2] = {10, 99};
  ck_assert_int_eq(accel_index_remove(ix, 2, gone, &removed), ACCEL_OK);
  ck_assert_uint_eq(removed, 1);
  ck_assert_int_eq(accel_index_find(ix, 30, &pos), ACCEL_OK);
  uint64_t id, c[4], stamp;
  const char *label;
  ck_assert_int_eq(accel_index_get(ix, pos, &id, c, &label, &stamp), ACCEL_OK);
  ck_assert_uint_eq(id, 30);
  ck_assert_uint_eq(c[0], 9);
  ck_assert_uint_eq(c[3], 12);
  ck_assert_str_eq(label, "c.png");
  ck_assert_uint_eq(stamp, 333);
  ck_assert_int_eq(accel_index_find(ix, 20, &pos), ACCEL_OK);
  accel_index_get(ix, pos, &id, NULL, &label, NULL);
  ck_assert_ptr_null(label);
  ck_assert_int_eq(accel_index_get(ix, 2, &id, NULL, NULL, NULL), ACCEL_ERR_NOT_FOUND);
  const char *meta;
  accel_index_get_meta(ix, &meta);
  ck_assert_str_eq(meta, "");
  ck_assert_int_eq(accel_index_set_meta(ix, "kinds=dhash,ahash size=8"), ACCEL_OK);
  accel_index_get_meta(ix, &meta);
  ck_assert_str_eq(meta, "kinds=dhash,ahash size=8");
  /* many adds and removes keep the id map consistent */
  for (uint64_t k = 0; k < 5000; k++) {
    uint64_t cc[4] = {k, k, k, k}, i2 = 1000 + k * 7919;
    ck_assert_int_eq(accel_index_add(ix, 1, &i2, cc, NULL, NULL), ACCEL_OK);
    if (k % 3 == 0) {
      uint64_t r = 1000 + (k / 2) * 7919;
      accel_index_remove(ix, 1, &r, NULL);
    }
  }
  accel_index_info(ix, NULL, NULL, &count);
  for (size_t p = 0; p < count; p++) {
    accel_index_get(ix, p, &id, NULL, NULL, NULL);
    ck_assert_int_eq(accel_index_find(ix, id, &pos), ACCEL_OK);
    ck_assert_uint_eq(pos, p);
  }
  o.bits = 96;
  accel_index *bad = NULL;
  ck_assert_int_eq(accel_index_create(ctx, &o, &bad), ACCEL_ERR_INVALID_ARG);
  o.bits = 64;
  o.nfields = 9;
  ck_assert_int_eq(accel_index_create(ctx, &o, &bad), ACCEL_ERR_INVALID_ARG);
  accel_search_options so = search_options(129);
  accel_pairs *p = NULL;
  ck_assert_int_eq(accel_index_self_join(ix, &so, &p), ACCEL_ERR_INVALID_ARG);
  accel_index_destroy(ix);
  accel_index_destroy(NULL);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ files */

static char tmpdir[128];

static void file_setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/accel-index-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void file_teardown(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(save_load_round_trip_and_corruption) {
  accel_ctx *ctx = cpu_ctx();
  dataset d = make_data(200, 256, 2, true, 9);
  accel_index *ix = build(ctx, &d);
  uint64_t extra_id = 1, extra_codes[8] = {1, 2, 3, 4, 5, 6, 7, 8}, stamp = 42;
  const char *label = "photos/IMG_0001.JPG";
  ck_assert_int_eq(accel_index_add(ix, 1, &extra_id, extra_codes, &label, &stamp), ACCEL_OK);
  accel_index_set_meta(ix, "kinds=phash,whash size=16");
  char path[256];
  snprintf(path, sizeof path, "%s/catalog.idx", tmpdir);
  ck_assert_int_eq(accel_index_save(ix, path), ACCEL_OK);
  accel_index *back = NULL;
  ck_assert_int_eq(accel_index_load(ctx, path, &back), ACCEL_OK);
  size_t n1, n2;
  uint32_t b2, f2;
  accel_index_info(ix, NULL, NULL, &n1);
  accel_index_info(back, &b2, &f2, &n2);
  ck_assert_uint_eq(n1, n2);
  ck_assert_uint_eq(b2, 256);
  ck_assert_uint_eq(f2, 2);
  for (size_t p = 0; p < n1; p++) {
    uint64_t i1, i2, c1[8], c2[8], s1, s2;
    const char *l1, *l2;
    accel_index_get(ix, p, &i1, c1, &l1, &s1);
    accel_index_get(back, p, &i2, c2, &l2, &s2);
    ck_assert_uint_eq(i1, i2);
    ck_assert_mem_eq(c1, c2, sizeof c1);
    ck_assert_uint_eq(s1, s2);
    ck_assert(l1 == NULL ? l2 == NULL : strcmp(l1, l2) == 0);
  }
  const char *meta;
  accel_index_get_meta(back, &meta);
  ck_assert_str_eq(meta, "kinds=phash,whash size=16");
  accel_index_destroy(back);

  /* every truncation and sampled single-bit corruptions: errors, never a crash */
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *full = malloc((size_t)size);
  ck_assert_int_eq(fread(full, 1, (size_t)size, f), size);
  fclose(f);
  char bad[300];
  snprintf(bad, sizeof bad, "%s/bad.idx", tmpdir);
  for (long cut = 0; cut < size; cut += cut < 200 ? 1 : 997) {
    f = fopen(bad, "wb");
    fwrite(full, 1, (size_t)cut, f);
    fclose(f);
    ck_assert_msg(accel_index_load(ctx, bad, &back) == ACCEL_ERR_FORMAT, "cut at %ld", cut);
    ck_assert_ptr_null(back);
  }
  for (long at = 0; at < size; at += 37) {
    full[at] ^= 0x10;
    f = fopen(bad, "wb");
    fwrite(full, 1, (size_t)size, f);
    fclose(f);
    full[at] ^= 0x10;
    ck_assert_msg(accel_index_load(ctx, bad, &back) == ACCEL_ERR_FORMAT, "bit flipped at %ld", at);
  }
  ck_assert_int_eq(accel_index_load(ctx, "/nonexistent/x.idx", &back), ACCEL_ERR_IO);

  /* a failed save keeps the previous file (a file size limit makes the write fail) */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved, rl;
  getrlimit(RLIMIT_FSIZE, &saved);
  rl = saved;
  rl.rlim_cur = 1000;
  int lim = setrlimit(RLIMIT_FSIZE, &rl);
  accel_status st = accel_index_save(ix, path);
  setrlimit(RLIMIT_FSIZE, &saved);
  ck_assert_int_eq(lim, 0);
  ck_assert_int_eq(st, ACCEL_ERR_IO);
  ck_assert_int_eq(accel_index_load(ctx, path, &back), ACCEL_OK);
  accel_index_destroy(back);
  free(full);
  accel_index_destroy(ix);
  free_data(&d);
  accel_ctx_destroy(ctx);
}
END_TEST

/* An index with no entries has no code arrays: saving it must not do
 * arithmetic on their NULL pointers (UBSan under clang flagged NULL + 0),
 * and it loads back empty with its metadata. */
START_TEST(empty_index_saves_and_loads) {
  accel_ctx *ctx = cpu_ctx();
  for (uint32_t bits = 64; bits <= 256; bits *= 2) {
    accel_index_options o;
    accel_index_options_init(&o, sizeof o);
    o.bits = bits;
    o.nfields = 3;
    accel_index *ix = NULL;
    ck_assert_int_eq(accel_index_create(ctx, &o, &ix), ACCEL_OK);
    ck_assert_int_eq(accel_index_set_meta(ix, "empty"), ACCEL_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/empty-%u.idx", tmpdir, bits);
    ck_assert_msg(accel_index_save(ix, path) == ACCEL_OK, "%s", accel_last_error(ctx));
    accel_index *back = NULL;
    ck_assert_msg(accel_index_load(ctx, path, &back) == ACCEL_OK, "%s", accel_last_error(ctx));
    size_t n = 1;
    uint32_t b = 0, nf = 0;
    accel_index_info(back, &b, &nf, &n);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(b, bits);
    ck_assert_uint_eq(nf, 3);
    const char *meta = NULL;
    accel_index_get_meta(back, &meta);
    ck_assert_str_eq(meta, "empty");
    accel_index_destroy(back);
    /* UINT64_MAX is the id of a missing k-nearest result: never an entry's */
    const uint64_t ids[2] = {7, UINT64_MAX}, codes[2 * 3 * 4] = {0};
    ck_assert_int_eq(accel_index_add(ix, 2, ids, codes, NULL, NULL), ACCEL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "reserved"));
    size_t count = 1;
    accel_index_info(ix, NULL, NULL, &count);
    ck_assert_uint_eq(count, 0); /* all or nothing */
    accel_index_destroy(ix);
  }
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ CUDA in emulation */

#if EXPECT_CUDA
START_TEST(gpu_searches_equal_the_reference_in_emulation) {
  log_capture cap = {0};
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  accel_ctx *cpu = cpu_ctx();
  for (int clustered = 0; clustered < 2; clustered++) {
    dataset d = make_data(500, 128, 2, clustered, 300 + (uint64_t)clustered);
    accel_index *gx = build(gpu, &d), *cx = build(cpu, &d);
    for (uint32_t r = 0; r <= 12; r += 4)
      for (int rule = 0; rule < 2; rule++) {
        accel_search_options o = search_options(r);
        o.thresholds[1] = 12 - r;
        o.rule = (accel_index_rule)rule;
        check_join(gx, &d, &o, "emulated GPU join");
        accel_pairs *pg = NULL, *pc = NULL;
        ck_assert_int_eq(accel_index_range(gx, 40, d.codes, &o, &pg), ACCEL_OK);
        ck_assert_int_eq(accel_index_range(cx, 40, d.codes, &o, &pc), ACCEL_OK);
        size_t ng, nc;
        const uint64_t *fg, *sg, *fc, *sc;
        accel_pairs_view(pg, &ng, &fg, &sg, NULL, NULL);
        accel_pairs_view(pc, &nc, &fc, &sc, NULL, NULL);
        ck_assert_uint_eq(ng, nc);
        ck_assert_mem_eq(fg, fc, ng * 8);
        ck_assert_mem_eq(sg, sc, ng * 8);
        accel_pairs_destroy(pg);
        accel_pairs_destroy(pc);
      }
    uint64_t ig[40 * 9], ic[40 * 9];
    uint32_t dg[40 * 9], dc[40 * 9];
    ck_assert_int_eq(accel_index_knn(gx, 40, d.codes + 10 * 4, 9, 1, ig, dg), ACCEL_OK);
    ck_assert_int_eq(accel_index_knn(cx, 40, d.codes + 10 * 4, 9, 1, ic, dc), ACCEL_OK);
    ck_assert_mem_eq(ig, ic, sizeof ig);
    ck_assert_mem_eq(dg, dc, sizeof dg);
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "index.join", &st), ACCEL_OK);
    ck_assert_uint_eq(st.fallbacks, 0);
    ck_assert_uint_gt(st.gpu_runs, 0);
    accel_index_destroy(gx);
    accel_index_destroy(cx);
    free_data(&d);
  }
  /* too little device memory: the fallback line, and the right answer from the CPU */
  set_emulated_gpu_budget(4096);
  accel_ctx *small = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, &cap);
  set_emulated_gpu_budget(0);
  dataset d = make_data(300, 64, 1, true, 11);
  accel_index *gx = build(small, &d);
  accel_search_options o = search_options(3);
  check_join(gx, &d, &o, "emulated GPU join over budget");
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] index.join failed: "), 1);
  accel_index_destroy(gx);
  free_data(&d);
  accel_ctx_destroy(small);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}
END_TEST

/* The launches of one GPU search: each downloads its pair count (8 bytes),
 * and the pairs it kept (8 bytes each) once it did not overflow. */
static uint64_t pair_launches(accel_ctx *ctx, const char *stage, size_t npairs) {
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(ctx, stage, &st), ACCEL_OK);
  ck_assert_uint_eq(st.fallbacks, 0);
  ck_assert_uint_eq(st.gpu_runs, 1);
  ck_assert_uint_ge(st.bytes_downloaded, 8 * npairs + 8);
  return (st.bytes_downloaded - 8 * npairs) / 8;
}

/* The GPU join and range as many work items (2000 codes: 16 tiles, 136
 * items in a join's triangle) for every code width, one field and three,
 * in a memory budget so small that the pair buffer overflows and launches
 * run again in parts: the reference's pairs, and no fallback (strict). */
START_TEST(gpu_pair_launches_split_in_emulation) {
  static const uint32_t widths[] = {64, 128, 256};
  accel_ctx *cpu = cpu_ctx();
  for (int wi = 0; wi < 3; wi++)
    for (uint32_t nf = 1; nf <= 3; nf += 2) {
      dataset d = make_data(2000, widths[wi], nf, true, 900 + (uint64_t)wi * 10 + nf);
      log_capture cap = {0};
      set_emulated_gpu_budget(d.n * nf * d.words * 8 + 200 * 1024);
      accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
      set_emulated_gpu_budget(0);
      accel_index *gx = build(gpu, &d), *cx = build(cpu, &d);
      accel_search_options o = search_options(widths[wi] / 8);
      for (uint32_t f = 1; f < nf; f++) o.thresholds[f] = widths[wi] / 6;
      o.rule = nf == 1 ? ACCEL_INDEX_ANY : ACCEL_INDEX_ALL;
      o.algorithm = ACCEL_INDEX_BRUTE_FORCE;
      char what[64];
      snprintf(what, sizeof what, "emulated GPU join, %u bits, %u fields", widths[wi], nf);
      size_t nref;
      pair *ref = reference_join(&d, &o, &nref);
      ck_assert_uint_gt(nref, 40000); /* past the buffer's 25,000 pairs */
      check_join_with(gx, &d, &o, what, ref, nref);
      free(ref);
      EXPECT(pair_launches(gpu, "index.join", nref) >= 3, "%s: the first launch overflowed and ran in parts", what);
      accel_pairs *pg = NULL, *pc = NULL;
      ck_assert_int_eq(accel_index_range(gx, 300, d.codes, &o, &pg), ACCEL_OK);
      ck_assert_int_eq(accel_index_range(cx, 300, d.codes, &o, &pc), ACCEL_OK);
      const pairs_view vg = view_pairs(pg), vc = view_pairs(pc);
      ck_assert_uint_eq(vg.n, vc.n);
      ck_assert_mem_eq(vg.first, vc.first, vg.n * 8);
      ck_assert_mem_eq(vg.second, vc.second, vg.n * 8);
      ck_assert_mem_eq(vg.dist, vc.dist, vg.n * nf * 4);
      EXPECT(pair_launches(gpu, "index.range", vg.n) >= 2, "%s: range in several launches", what);
      accel_pairs_destroy(pg);
      accel_pairs_destroy(pc);
      accel_index_destroy(gx);
      accel_index_destroy(cx);
      accel_ctx_destroy(gpu);
      free_data(&d);
    }
  accel_ctx_destroy(cpu);
}
END_TEST

/* GPU k-nearest in a small budget: queries in several chunks, and a
 * chunk's candidate lists in several gathers, for every code width, on the
 * second of two fields: the CPU's neighbours and distances. */
START_TEST(gpu_knn_chunks_equal_the_cpu_in_emulation) {
  static const uint32_t widths[] = {64, 128, 256};
  accel_ctx *cpu = cpu_ctx();
  for (int wi = 0; wi < 3; wi++) {
    dataset d = make_data(1500, widths[wi], 2, true, 1200 + (uint64_t)wi);
    const size_t nq = 600, k = 40;
    log_capture cap = {0};
    set_emulated_gpu_budget((d.n + nq) * d.words * 8 + 160 * 1024);
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
    set_emulated_gpu_budget(0);
    accel_index *gx = build(gpu, &d), *cx = build(cpu, &d);
    uint64_t *ig = malloc(nq * k * 8), *ic = malloc(nq * k * 8);
    uint32_t *dg = malloc(nq * k * 4), *dc = malloc(nq * k * 4);
    ck_assert_msg(accel_index_knn(gx, nq, d.codes, k, 1, ig, dg) == ACCEL_OK, "%s", accel_last_error(gpu));
    ck_assert_int_eq(accel_index_knn(cx, nq, d.codes, k, 1, ic, dc), ACCEL_OK);
    ck_assert_mem_eq(ig, ic, nq * k * 8);
    ck_assert_mem_eq(dg, dc, nq * k * 4);
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "index.knn", &st), ACCEL_OK);
    ck_assert_uint_eq(st.gpu_runs, 1);
    free(ig);
    free(ic);
    free(dg);
    free(dc);
    accel_index_destroy(gx);
    accel_index_destroy(cx);
    accel_ctx_destroy(gpu);
    free_data(&d);
  }
  accel_ctx_destroy(cpu);
}
END_TEST

/* The k-nearest of queries in "device memory" (host memory flagged with
 * accel_array_on_device: the emulated GPU's device memory is the host's)
 * by accel_index_knn_arrays: rows (nq, nfields, words), outputs (nq, k). */
typedef struct knn_dev_case {
  const dataset *d;
  size_t nq, k;
  uint32_t field;
  const uint64_t *ids; /* the CPU's, to compare with */
  const uint32_t *dist;
} knn_dev_case;

static accel_status knn_on_device(accel_ctx *ctx, void *user) {
  const knn_dev_case *c = user;
  accel_index *ix = build(ctx, c->d);
  uint64_t *ids = malloc(c->nq * c->k * 8);
  uint32_t *dist = malloc(c->nq * c->k * 4);
  const int64_t qs[3] = {(int64_t)c->nq, c->d->nfields, c->d->words}, rs[2] = {(int64_t)c->nq, (int64_t)c->k};
  accel_array q, ai, ad;
  ck_assert_int_eq(accel_array_init(&q, c->d->codes, ACCEL_DTYPE_U64, 3, qs), ACCEL_OK);
  ck_assert_int_eq(accel_array_init(&ai, ids, ACCEL_DTYPE_U64, 2, rs), ACCEL_OK);
  ck_assert_int_eq(accel_array_init(&ad, dist, ACCEL_DTYPE_U32, 2, rs), ACCEL_OK);
  accel_array_on_device(&q);
  accel_array_on_device(&ai);
  accel_array_on_device(&ad);
  const accel_status s = accel_index_knn_arrays(ix, &q, (uint32_t)c->k, c->field, &ai, &ad);
  if (!s) {
    ck_assert_mem_eq(ids, c->ids, c->nq * c->k * 8);
    ck_assert_mem_eq(dist, c->dist, c->nq * c->k * 4);
  }
  free(ids);
  free(dist);
  accel_index_destroy(ix);
  return s;
}

/* accel_index_knn_arrays with device arrays on the emulated GPU, for every
 * code width, in several chunks of queries (a small budget): the CPU's
 * neighbours and distances, one GPU run and no fallback; without the
 * distances, the same ids; device and host arrays mixed are refused. Then
 * every CUDA call of it made to fail in turn: each failure falls back to
 * the CPU on host copies of the arrays and still gives the CPU's results
 * (or, denied, the error). */
START_TEST(gpu_knn_arrays_on_device_in_emulation) {
  static const uint32_t widths[] = {64, 128, 256};
  accel_ctx *cpu = cpu_ctx();
  for (int wi = 0; wi < 3; wi++) {
    dataset d = make_data(1500, widths[wi], 2, true, 1300 + (uint64_t)wi);
    const size_t nq = 600, k = 40;
    accel_index *cx = build(cpu, &d);
    uint64_t *ic = malloc(nq * k * 8), *ig = malloc(nq * k * 8);
    uint32_t *dc = malloc(nq * k * 4);
    ck_assert_int_eq(accel_index_knn(cx, nq, d.codes, k, 1, ic, dc), ACCEL_OK);
    knn_dev_case c = {&d, nq, k, 1, ic, dc};
    log_capture cap = {0};
    set_emulated_gpu_budget((d.n + nq) * d.words * 8 + 160 * 1024);
    accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
    set_emulated_gpu_budget(0);
    ck_assert_msg(knn_on_device(gpu, &c) == ACCEL_OK, "%s", accel_last_error(gpu));
    accel_stage_stats st;
    accel_stage_stats_init(&st, sizeof st);
    ck_assert_int_eq(accel_ctx_stats_find(gpu, "index.knn", &st), ACCEL_OK);
    ck_assert_uint_eq(st.gpu_runs, 1);
    ck_assert_uint_eq(st.fallbacks, 0);
    /* up: the searched field's codes, the lists' offsets, the results; never the queries */
    ck_assert_uint_eq(st.bytes_uploaded, d.n * d.words * 8 + nq * 8 + nq * k * 12);
    accel_index *gx = build(gpu, &d);
    const int64_t qs[2] = {(int64_t)nq, 2 * d.words}, rs[2] = {(int64_t)nq, (int64_t)k};
    accel_array q, ai;
    accel_array_init(&q, d.codes, ACCEL_DTYPE_U64, 2, qs);
    accel_array_init(&ai, ig, ACCEL_DTYPE_U64, 2, rs);
    accel_array_on_device(&q);
    accel_array_on_device(&ai);
    ck_assert_int_eq(accel_index_knn_arrays(gx, &q, k, 1, &ai, NULL), ACCEL_OK);
    ck_assert_mem_eq(ig, ic, nq * k * 8);
    accel_array_init(&ai, ig, ACCEL_DTYPE_U64, 2, rs); /* a host output beside device queries */
    ck_assert_int_eq(accel_index_knn_arrays(gx, &q, k, 1, &ai, NULL), ACCEL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(accel_last_error(gpu), "must all be device arrays or all host arrays"), "%s",
                  accel_last_error(gpu));
    accel_index_destroy(gx);
    /* an empty index: every result missing, written into the device arrays */
    accel_index_options io;
    accel_index_options_init(&io, sizeof io);
    io.bits = widths[wi];
    io.nfields = 2;
    ck_assert_int_eq(accel_index_create(gpu, &io, &gx), ACCEL_OK);
    uint32_t *dg = malloc(nq * k * 4);
    accel_array ad;
    accel_array_init(&ad, dg, ACCEL_DTYPE_U32, 2, rs);
    accel_array_on_device(&ad);
    accel_array_init(&ai, ig, ACCEL_DTYPE_U64, 2, rs);
    accel_array_on_device(&ai);
    ck_assert_msg(accel_index_knn_arrays(gx, &q, k, 0, &ai, &ad) == ACCEL_OK, "%s", accel_last_error(gpu));
    for (size_t i = 0; i < nq * k; i++) ck_assert(ig[i] == UINT64_MAX && dg[i] == UINT32_MAX);
    free(dg);
    accel_index_destroy(gx);
    accel_ctx_destroy(gpu);
    if (wi == 1) {
      c.nq = 37, c.k = 5;
      ck_assert_int_eq(accel_index_knn(cx, c.nq, d.codes, c.k, 1, ic, dc), ACCEL_OK);
      ck_assert_int_ge(emulated_fault_sweep("index.knn", knn_on_device, &c), 6);
    }
    free(ic);
    free(ig);
    free(dc);
    accel_index_destroy(cx);
    free_data(&d);
  }
  accel_ctx_destroy(cpu);
}
END_TEST

/* One search, and the CPU's answer to compare with. */
typedef struct search_case {
  const dataset *d;
  accel_search_options o;
  int op; /* 0 self-join, 1 range, 2 k nearest */
  size_t nq, k;
  size_t npairs;
  uint64_t *first, *second, *ids; /* pairs (join, range) or ids (k nearest) */
  uint32_t *dist;
} search_case;

static accel_status search(accel_ctx *ctx, search_case *c, bool keep) {
  accel_index *ix = build(ctx, c->d);
  accel_status s;
  if (c->op < 2) {
    accel_pairs *p = NULL;
    s = c->op == 0 ? accel_index_self_join(ix, &c->o, &p) : accel_index_range(ix, c->nq, c->d->codes, &c->o, &p);
    if (!s) {
      const pairs_view v = view_pairs(p);
      if (keep) {
        c->npairs = v.n;
        c->first = malloc(v.n * 8 + 8);
        c->second = malloc(v.n * 8 + 8);
        c->dist = malloc(v.n * v.nf * 4 + 4);
        memcpy(c->first, v.first, v.n * 8);
        memcpy(c->second, v.second, v.n * 8);
        memcpy(c->dist, v.dist, v.n * v.nf * 4);
      } else {
        ck_assert_uint_eq(v.n, c->npairs);
        ck_assert(memcmp(v.first, c->first, v.n * 8) == 0 && memcmp(v.second, c->second, v.n * 8) == 0);
        ck_assert(memcmp(v.dist, c->dist, v.n * v.nf * 4) == 0);
      }
    }
    accel_pairs_destroy(p);
  } else {
    uint64_t *ids = malloc(c->nq * c->k * 8);
    uint32_t *dist = malloc(c->nq * c->k * 4);
    s = accel_index_knn(ix, c->nq, c->d->codes, c->k, 0, ids, dist);
    if (!s && keep) {
      c->ids = ids;
      c->dist = dist;
      ids = NULL;
      dist = NULL;
    } else if (!s) {
      ck_assert(memcmp(ids, c->ids, c->nq * c->k * 8) == 0 && memcmp(dist, c->dist, c->nq * c->k * 4) == 0);
    }
    free(ids);
    free(dist);
  }
  accel_index_destroy(ix);
  return s;
}

static accel_status search_on_gpu(accel_ctx *ctx, void *user) { return search(ctx, user, false); }

/* Every CUDA call of the searches is checked: a failure at any of them (a
 * launch, an upload, a memset, a download, an allocation) falls back with
 * the error's name instead of handing on garbage (k nearest indexed the
 * entry ids with whatever a failed launch left in device memory). */
START_TEST(gpu_search_failures_fall_back_in_emulation) {
  dataset d = make_data(300, 128, 1, true, 77);
  accel_ctx *cpu = cpu_ctx();
  static const char *const stages[] = {"index.join", "index.range", "index.knn"};
  for (int op = 0; op < 3; op++) {
    search_case c;
    memset(&c, 0, sizeof c);
    c.d = &d;
    c.o = search_options(20);
    c.o.algorithm = ACCEL_INDEX_BRUTE_FORCE;
    c.op = op;
    c.nq = 37;
    c.k = 5;
    ck_assert_int_eq(search(cpu, &c, true), ACCEL_OK);
    ck_assert(op == 2 || c.npairs > 0);
    const int64_t calls = emulated_fault_sweep(stages[op], search_on_gpu, &c);
    ck_assert_int_ge(calls, 6);
    free(c.first);
    free(c.second);
    free(c.ids);
    free(c.dist);
  }
  accel_ctx_destroy(cpu);
  free_data(&d);
}
END_TEST
#endif

Suite *suite_index(void) {
  TCase *tc = new_case("search", 300, NULL, NULL);
  tcase_add_test(tc, joins_equal_the_reference);
  tcase_add_test(tc, several_fields_and_both_rules);
  tcase_add_test(tc, multi_index_at_scale);
  tcase_add_test(tc, mih_plans_equal_brute_force);
  tcase_add_test(tc, range_and_knn_equal_the_reference);
  tcase_add_test(tc, cpu_knn_kernels_equal_the_reference);
  tcase_add_test(tc, knn_arrays_equal_knn);
  tcase_add_test(tc, grouping_is_connected_components);
  tcase_add_test(tc, add_remove_get_find_meta);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_searches_equal_the_reference_in_emulation);
  tcase_add_test(tc, gpu_search_failures_fall_back_in_emulation);
  tcase_add_test(tc, gpu_pair_launches_split_in_emulation);
  tcase_add_test(tc, gpu_knn_chunks_equal_the_cpu_in_emulation);
  tcase_add_test(tc, gpu_knn_arrays_on_device_in_emulation);
#endif
  Suite *s = suite_of("index", tc);
  TCase *tf = new_case("files", 0, file_setup, file_teardown);
  tcase_add_test(tf, save_load_round_trip_and_corruption);
  tcase_add_test(tf, empty_index_saves_and_loads);
  suite_add_tcase(s, tf);
  return s;
}

ACCEL_TEST_MAIN(suite_index)
