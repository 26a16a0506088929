/* Group near-duplicate images: hash each file (dhash and ahash, imagehash's
 * values), put the hashes in an exact Hamming index, and print the groups
 * whose members are within 5 bits on both kinds.
 *
 *   cc $(pkg-config --cflags accel) dupes.c $(pkg-config --libs accel) -o dupes
 *   ./dupes photo1.jpg photo2.png ...
 */
#include <accel/accel.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s IMAGE...\n", argv[0]);
    return 2;
  }
  const size_t n = (size_t)argc - 1;
  accel_ctx *ctx = NULL;
  if (accel_ctx_create(NULL, &ctx) != ACCEL_OK) {
    fprintf(stderr, "dupes: %s\n", accel_last_error(NULL));
    return 2;
  }
  accel_hash_options ho;
  accel_hash_options_init(&ho, sizeof ho);
  ho.nkinds = 2;
  ho.kinds[0] = ACCEL_HASH_DHASH;
  ho.kinds[1] = ACCEL_HASH_AHASH;
  size_t slot = 0;
  accel_hash_slot_bytes(&ho, &slot); /* 8 bytes: 64-bit hashes */
  uint8_t *hashes = calloc(n * 2, slot);
  accel_status *status = calloc(n, sizeof *status);
  uint64_t *ids = calloc(n, sizeof *ids), *codes = calloc(n * 2, sizeof *codes);
  int rc = 0;
  if (!hashes || !status || !ids || !codes ||
      accel_hash_files(ctx, (const char *const *)argv + 1, n, &ho, hashes, slot, status) != ACCEL_OK) {
    fprintf(stderr, "dupes: %s\n", hashes && status && ids && codes ? accel_last_error(ctx) : "out of memory");
    rc = 2;
    goto done;
  }
  /* the index: two fields (dhash, ahash) of 64 bits; id = the argument's number */
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.nfields = 2;
  accel_index *ix = NULL;
  if (accel_index_create(ctx, &io, &ix) != ACCEL_OK) {
    fprintf(stderr, "dupes: %s\n", accel_last_error(ctx));
    rc = 2;
    goto done;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (status[i] != ACCEL_OK) {
      fprintf(stderr, "dupes: %s: %s\n", argv[1 + i], accel_status_string(status[i]));
      rc = 1;
      continue;
    }
    ids[m] = i;
    for (int k = 0; k < 2; k++) { /* a hash's bytes, big-endian, are its uint64 code */
      uint64_t v = 0;
      for (int b = 0; b < 8; b++) v = v << 8 | hashes[(i * 2 + k) * slot + b];
      codes[m * 2 + k] = v;
    }
    m++;
  }
  accel_search_options so;
  accel_search_options_init(&so, sizeof so);
  so.rule = ACCEL_INDEX_ALL;
  so.thresholds[0] = so.thresholds[1] = 5;
  accel_groups *groups = NULL;
  if (accel_index_add(ix, m, ids, codes, NULL, NULL) != ACCEL_OK || accel_index_group(ix, &so, &groups) != ACCEL_OK) {
    fprintf(stderr, "dupes: %s\n", accel_last_error(ctx));
    rc = 2;
  } else {
    size_t ng = 0;
    const uint64_t *offsets, *members;
    accel_groups_view(groups, &ng, &offsets, &members);
    for (size_t g = 0; g < ng; g++)
      for (uint64_t k = offsets[g]; k < offsets[g + 1]; k++) printf("%zu\t%s\n", g + 1, argv[1 + members[k]]);
  }
  accel_groups_destroy(groups);
  accel_index_destroy(ix);
done:
  free(hashes);
  free(status);
  free(ids);
  free(codes);
  accel_ctx_destroy(ctx);
  return rc;
}
