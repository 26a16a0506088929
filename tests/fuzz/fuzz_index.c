/* Index files: accel_index_load on any bytes whose last four bytes are
 * replaced by the CRC-32 (zlib's) of the others, so that inputs get past the
 * checksum. An index that loads is
 *  - read back entry by entry (accel_index_get, accel_index_find);
 *  - searched: self-join and range search by brute force and by multi-index
 *    hashing, which must agree (both are exact), and a k-NN search;
 *  - saved and loaded again, and must come back unchanged.
 * Thresholds and rules come from the input's last bytes before the CRC. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { MAX_WORDS = ACCEL_INDEX_MAX_FIELDS * 4, KNN_K = 3 };

static bool same_pairs(const accel_pairs *a, const accel_pairs *b) {
  size_t na = 0, nb = 0;
  const uint64_t *fa, *sa, *fb, *sb;
  const uint32_t *da, *db;
  uint32_t nfa = 0, nfb = 0;
  FUZZ_CHECK(accel_pairs_view(a, &na, &fa, &sa, &da, &nfa) == ACCEL_OK);
  FUZZ_CHECK(accel_pairs_view(b, &nb, &fb, &sb, &db, &nfb) == ACCEL_OK);
  if (na != nb || nfa != nfb) return false;
  return na == 0 || (memcmp(fa, fb, na * sizeof *fa) == 0 && memcmp(sa, sb, na * sizeof *sa) == 0 &&
                     memcmp(da, db, na * nfa * sizeof *da) == 0);
}

/* Self-join and one range search with both algorithms; they must agree. */
static void search(accel_index *ix, uint32_t nfields, size_t count, const uint64_t *query, const uint8_t *knobs) {
  accel_search_options so;
  FUZZ_CHECK(accel_search_options_init(&so, sizeof so) == ACCEL_OK);
  so.rule = knobs[0] & 1 ? ACCEL_INDEX_ANY : ACCEL_INDEX_ALL;
  for (uint32_t f = 0; f < nfields; f++) so.thresholds[f] = knobs[1 + f % 2] % 40;
  accel_pairs *p[2] = {NULL, NULL}, *q[2] = {NULL, NULL};
  static const accel_index_algorithm algs[2] = {ACCEL_INDEX_BRUTE_FORCE, ACCEL_INDEX_MULTI_INDEX};
  for (int a = 0; a < 2; a++) {
    so.algorithm = algs[a];
    FUZZ_CHECK(accel_index_self_join(ix, &so, &p[a]) == ACCEL_OK);
    FUZZ_CHECK(accel_index_range(ix, 1, query, &so, &q[a]) == ACCEL_OK);
  }
  FUZZ_CHECK(same_pairs(p[0], p[1]));
  FUZZ_CHECK(same_pairs(q[0], q[1]));
  size_t nq = 0;
  FUZZ_CHECK(accel_pairs_view(q[0], &nq, NULL, NULL, NULL, NULL) == ACCEL_OK);
  FUZZ_CHECK(nq <= count);
  for (int a = 0; a < 2; a++) {
    accel_pairs_destroy(p[a]);
    accel_pairs_destroy(q[a]);
  }
  uint64_t ids[KNN_K];
  uint32_t dist[KNN_K];
  const uint32_t field = knobs[3] % nfields;
  FUZZ_CHECK(accel_index_knn(ix, 1, query, KNN_K, field, ids, dist) == ACCEL_OK);
  /* missing results are id UINT64_MAX, distance UINT32_MAX; UINT64_MAX is also a valid id */
  size_t pos = 0;
  for (size_t k = 0; k < KNN_K; k++) {
    FUZZ_CHECK((k < count) == (dist[k] != UINT32_MAX));
    FUZZ_CHECK(k < count ? dist[k] <= 256 && accel_index_find(ix, ids[k], &pos) == ACCEL_OK : ids[k] == UINT64_MAX);
    FUZZ_CHECK(k == 0 || dist[k] >= dist[k - 1]);
  }
  accel_groups *g = NULL;
  FUZZ_CHECK(accel_index_group(ix, &so, &g) == ACCEL_OK);
  accel_groups_destroy(g);
}

/* Every entry, label and the metadata of two indexes are the same. */
static void check_same(const accel_index *a, const accel_index *b) {
  uint32_t bits[2], nf[2];
  size_t n[2];
  FUZZ_CHECK(accel_index_info(a, &bits[0], &nf[0], &n[0]) == ACCEL_OK);
  FUZZ_CHECK(accel_index_info(b, &bits[1], &nf[1], &n[1]) == ACCEL_OK);
  FUZZ_CHECK(bits[0] == bits[1] && nf[0] == nf[1] && n[0] == n[1]);
  const size_t words = (size_t)nf[0] * bits[0] / 64;
  for (size_t i = 0; i < n[0]; i++) {
    uint64_t id[2], stamp[2], codes[2][MAX_WORDS];
    const char *label[2];
    size_t pos = 0;
    FUZZ_CHECK(accel_index_get(a, i, &id[0], codes[0], &label[0], &stamp[0]) == ACCEL_OK);
    FUZZ_CHECK(accel_index_find(b, id[0], &pos) == ACCEL_OK);
    FUZZ_CHECK(accel_index_get(b, pos, &id[1], codes[1], &label[1], &stamp[1]) == ACCEL_OK);
    FUZZ_CHECK(id[0] == id[1] && stamp[0] == stamp[1]);
    FUZZ_CHECK(memcmp(codes[0], codes[1], words * sizeof(uint64_t)) == 0);
    FUZZ_CHECK((label[0] == NULL) == (label[1] == NULL));
    FUZZ_CHECK(!label[0] || strcmp(label[0], label[1]) == 0);
  }
  const char *meta[2];
  FUZZ_CHECK(accel_index_get_meta(a, &meta[0]) == ACCEL_OK && accel_index_get_meta(b, &meta[1]) == ACCEL_OK);
  FUZZ_CHECK(strcmp(meta[0], meta[1]) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const accel_status errors[] = {ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_OUT_OF_MEMORY, ACCEL_OK};
  if (size < 4) return 0;
  uint8_t *file = malloc(size);
  FUZZ_CHECK(file != NULL);
  memcpy(file, data, size);
  const uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), file, (uInt)(size - 4));
  for (int i = 0; i < 4; i++) file[size - 4 + i] = (uint8_t)(crc >> 8 * i);
  uint8_t knobs[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < 4 && i + 4 < size; i++) knobs[i] = file[size - 5 - i];

  accel_ctx *ctx = fuzz_ctx();
  accel_index *ix = NULL;
  accel_status s = accel_index_load(ctx, fuzz_input_path(file, size), &ix);
  free(file);
  if (s != ACCEL_OK) {
    FUZZ_CHECK_FAILURE(s, errors, ix);
    return 0;
  }
  uint32_t bits = 0, nfields = 0;
  size_t count = 0;
  FUZZ_CHECK(accel_index_info(ix, &bits, &nfields, &count) == ACCEL_OK);
  FUZZ_CHECK(bits == 64 || bits == 128 || bits == 256);
  FUZZ_CHECK(nfields >= 1 && nfields <= ACCEL_INDEX_MAX_FIELDS);
  FUZZ_CHECK(count <= size / 8);
  const char *meta = NULL;
  FUZZ_CHECK(accel_index_get_meta(ix, &meta) == ACCEL_OK && meta && strlen(meta) <= 4095);

  /* the query: the first entry's codes, or zeros */
  uint64_t query[MAX_WORDS] = {0};
  if (count) FUZZ_CHECK(accel_index_get(ix, 0, NULL, query, NULL, NULL) == ACCEL_OK);
  search(ix, nfields, count, query, knobs);

  const char *out = fuzz_scratch_path("out.idx");
  FUZZ_CHECK(accel_index_save(ix, out) == ACCEL_OK);
  accel_index *r = NULL;
  FUZZ_CHECK(accel_index_load(ctx, out, &r) == ACCEL_OK);
  check_same(ix, r);
  accel_index_destroy(r);
  accel_index_destroy(ix);
  return 0;
}
