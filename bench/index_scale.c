/*
 * bench/index_scale.c - the self-join at scale (millions of 64-bit codes),
 * without Python's memory and generation overhead.
 *
 *   cc -O2 -fopenmp bench/index_scale.c -Iinclude -Lbuild -laccel -o index_scale
 *   LD_LIBRARY_PATH=build ./index_scale N R THREADS random|clustered [SAMPLES [auto|brute|mih]]
 *
 * random: uniform 64-bit codes. clustered: N / 10 groups of ten, each member
 * its group's random centre with 0 to 6 random bits flipped, positions
 * shuffled. Times accel_index_add plus accel_index_self_join (ids are the
 * positions), then checks SAMPLES entries (default 200) against a brute-force
 * scan of every code: the pairs that contain them must be exactly the codes
 * within R. The algorithm is chosen automatically unless named. Prints one
 * JSON line.
 */
#define _POSIX_C_SOURCE 200809L
#include <accel/core.h>
#include <accel/index.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void make_codes(uint64_t *codes, size_t n, bool clustered) {
  if (!clustered) {
    for (size_t i = 0; i < n; i++) codes[i] = rnd();
    return;
  }
  for (size_t i = 0; i < n; i += 10) {
    const uint64_t centre = rnd();
    for (size_t k = i; k < i + 10 && k < n; k++) {
      uint64_t c = centre;
      for (int f = (int)(rnd() % 7); f > 0; f--) c ^= 1ull << (rnd() % 64);
      codes[k] = c;
    }
  }
  for (size_t i = n - 1; i > 0; i--) { /* shuffle */
    const size_t j = rnd() % (i + 1);
    const uint64_t t = codes[i];
    codes[i] = codes[j];
    codes[j] = t;
  }
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sampled entries: their partners in the pairs against a brute-force scan. */
static bool check_samples(const uint64_t *codes, size_t n, uint32_t r, size_t np, const uint64_t *first,
                          const uint64_t *second, size_t samples) {
  bool ok = true;
  for (size_t s = 0; s < samples && ok; s++) {
    const size_t q = rnd() % n;
    size_t nw = 0, ng = 0, cap = 64;
    uint64_t *want = malloc(cap * 8), *got = malloc(cap * 8);
    for (size_t j = 0; j < n; j++)
      if (j != q && (uint32_t)__builtin_popcountll(codes[j] ^ codes[q]) <= r) {
        if (nw == cap) {
          cap *= 2;
          want = realloc(want, cap * 8);
          got = realloc(got, cap * 8);
        }
        want[nw++] = j;
      }
    for (size_t i = 0; i < np; i++) {
      if (first[i] != q && second[i] != q) continue;
      if (ng == cap) {
        cap *= 2;
        want = realloc(want, cap * 8);
        got = realloc(got, cap * 8);
      }
      got[ng++] = first[i] == q ? second[i] : first[i];
    }
    qsort(got, ng, 8, cmp_u64);
    ok = nw == ng && !memcmp(want, got, nw * 8);
    if (!ok) fprintf(stderr, "entry %zu: %zu pairs, brute force %zu\n", q, ng, nw);
    free(want);
    free(got);
  }
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s N R THREADS random|clustered [SAMPLES [auto|brute|mih]]\n", argv[0]);
    return 2;
  }
  const size_t n = strtoull(argv[1], NULL, 10), samples = argc > 5 ? strtoull(argv[5], NULL, 10) : 200;
  const uint32_t r = (uint32_t)atoi(argv[2]);
  const bool clustered = !strcmp(argv[4], "clustered");
  uint64_t *codes = malloc(n * 8), *ids = malloc(n * 8);
  if (!codes || !ids) return 1;
  make_codes(codes, n, clustered);
  for (size_t i = 0; i < n; i++) ids[i] = i;
  accel_ctx_options co;
  accel_ctx_options_init(&co, sizeof co);
  co.backend = ACCEL_BACKEND_CPU;
  co.cpu_threads = atoi(argv[3]);
  accel_ctx *ctx = NULL;
  if (accel_ctx_create(&co, &ctx)) return 1;
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.bits = 64;
  accel_index *ix = NULL;
  const double t0 = now();
  if (accel_index_create(ctx, &io, &ix) || accel_index_add(ix, n, ids, codes, NULL, NULL)) {
    fprintf(stderr, "%s\n", accel_last_error(NULL));
    return 1;
  }
  const double t1 = now();
  accel_search_options so;
  accel_search_options_init(&so, sizeof so);
  so.thresholds[0] = r;
  const char *alg = argc > 6 ? argv[6] : "auto";
  so.algorithm = !strcmp(alg, "brute") ? ACCEL_INDEX_BRUTE_FORCE
                 : !strcmp(alg, "mih") ? ACCEL_INDEX_MULTI_INDEX
                                       : ACCEL_INDEX_AUTO;
  accel_pairs *p = NULL;
  if (accel_index_self_join(ix, &so, &p)) {
    fprintf(stderr, "%s\n", accel_last_error(NULL));
    return 1;
  }
  const double t2 = now();
  size_t np;
  const uint64_t *first, *second;
  accel_pairs_view(p, &np, &first, &second, NULL, NULL);
  const bool ok = check_samples(codes, n, r, np, first, second, samples);
  printf(
      "{\"n\": %zu, \"r\": %u, \"threads\": %d, \"data\": \"%s\", \"algorithm\": \"%s\", \"add_s\": %.3f, \"join_s\": %.3f, "
      "\"total_s\": %.3f, \"pairs\": %zu, \"sampled\": %zu, \"sampled_equal\": %s}\n",
      n, r, co.cpu_threads, clustered ? "clustered" : "random", alg, t1 - t0, t2 - t1, t2 - t0, np, samples,
      ok ? "true" : "false");
  accel_pairs_destroy(p);
  accel_index_destroy(ix);
  accel_ctx_destroy(ctx);
  free(codes);
  free(ids);
  return ok ? 0 : 1;
}
