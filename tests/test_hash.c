/* suite_hash: decoding and perceptual hashes against imagehash's own output.
 *
 *   test_hash            the committed subset (tests/data/hash), the decoder
 *                        against Pillow's pixels, batch semantics, helpers
 *   test_hash --shared   the whole corpus of ../shared/data/hash with the
 *                        acceptance rule of the hashing issue (exit 77 when
 *                        ../shared is absent)
 */
#include "emulated_gpu.h"
#include "testutil.h"

#include "hash/hashes.h"
#include "hash/job.h"
#include "hash/ops.h"
#include "hash/resample.h"

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ------------------------------------------------------------ reference TSV */

enum { MAX_ROWS = 256, NCOLS = 17 };
static const char *const COLS[NCOLS] = {"file",   "group",   "sha256", "width",   "height",          "mode",
                                        "ahash8", "ahash16", "dhash8", "dhash16", "dhash_vertical8", "dhash_vertical16",
                                        "phash8", "phash16", "whash8", "whash16", "colorhash8"};

typedef struct ref_row {
  char col[NCOLS][80];
} ref_row;

typedef struct ref_table {
  int n;
  ref_row rows[MAX_ROWS];
} ref_table;

static void load_tsv(ref_table *t, const char *path) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char line[4096];
  bool header = false;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\r\n")] = '\0';
    if (!header) { /* check the column order once */
      header = true;
      char *save = NULL, *tok = strtok_r(line, "\t", &save);
      for (int c = 0; c < NCOLS; c++, tok = strtok_r(NULL, "\t", &save))
        ck_assert_msg(tok && strcmp(tok, COLS[c]) == 0, "%s: column %d is not %s", path, c, COLS[c]);
      continue;
    }
    ck_assert_int_lt(t->n, MAX_ROWS);
    ref_row *r = &t->rows[t->n++];
    char *save = NULL, *tok = strtok_r(line, "\t", &save);
    for (int c = 0; c < NCOLS; c++, tok = strtok_r(NULL, "\t", &save)) {
      ck_assert_msg(tok != NULL, "%s: short row", path);
      snprintf(r->col[c], sizeof r->col[c], "%s", tok);
    }
  }
  fclose(f);
}

static int col_of(const char *kind, int size) {
  char name[32];
  snprintf(name, sizeof name, "%s%d", kind, size);
  for (int c = 0; c < NCOLS; c++)
    if (strcmp(COLS[c], name) == 0) return c;
  return -1;
}

static int hex_distance(const char *a, const char *b) {
  int d = 0;
  for (size_t i = 0; a[i] && b[i]; i++) {
    char x[2] = {a[i], 0}, y[2] = {b[i], 0};
    d += __builtin_popcount((unsigned)(strtol(x, NULL, 16) ^ strtol(y, NULL, 16)));
  }
  return d;
}

/* accel_hash_options as initialised, with the `nk` kinds of `kinds` when nk > 0. */
static accel_hash_options hash_options(const accel_hash_kind *kinds, int nk) {
  accel_hash_options o;
  accel_hash_options_init(&o, sizeof o);
  if (nk > 0) {
    o.nkinds = (uint32_t)nk;
    memcpy(o.kinds, kinds, sizeof(accel_hash_kind) * (size_t)nk);
  }
  return o;
}

typedef struct kind_tally {
  int same, differ, max_distance;
} kind_tally;

/* Hash every row's file at one size with `kinds`; tally agreement per kind;
 * error rows must fail with ACCEL_ERR_DECODE. */
static void compare(accel_ctx *ctx, const char *dir, const ref_table *t, int size, const accel_hash_kind *kinds, int nk,
                    kind_tally *tally) {
  const char *paths[MAX_ROWS];
  char buf[MAX_ROWS][512];
  for (int i = 0; i < t->n; i++) {
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, t->rows[i].col[0]);
    paths[i] = buf[i];
  }
  accel_hash_options o = hash_options(kinds, nk);
  o.hash_size = size;
  size_t slot;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  uint8_t *hashes = malloc((size_t)t->n * (size_t)nk * slot);
  accel_status st[MAX_ROWS];
  ck_assert_int_eq(accel_hash_files(ctx, paths, (size_t)t->n, &o, hashes, slot, st), ACCEL_OK);
  for (int i = 0; i < t->n; i++) {
    const ref_row *r = &t->rows[i];
    if (strcmp(r->col[5], "error") == 0) {
      ck_assert_msg(st[i] == ACCEL_ERR_DECODE, "%s: Pillow cannot load it, we returned %s", r->col[0],
                    accel_status_string(st[i]));
      continue;
    }
    ck_assert_msg(st[i] == ACCEL_OK, "%s: %s", r->col[0], accel_status_string(st[i]));
    for (int k = 0; k < nk; k++) {
      int c = col_of(accel_hash_kind_name(kinds[k]), kinds[k] == ACCEL_HASH_COLORHASH ? 8 : size);
      ck_assert_int_ge(c, 0);
      uint32_t nbits;
      accel_hash_bits(kinds[k], size, 3, &nbits);
      char hex[ACCEL_HASH_MAX_BYTES * 2 + 1];
      ck_assert_int_eq(accel_hash_to_hex(hashes + ((size_t)i * (size_t)nk + (size_t)k) * slot, nbits, hex, sizeof hex),
                       ACCEL_OK);
      if (strcmp(hex, r->col[c]) == 0) {
        tally[k].same++;
      } else {
        int d = hex_distance(hex, r->col[c]);
        tally[k].differ++;
        if (d > tally[k].max_distance) tally[k].max_distance = d;
        printf("  %s %s: ours %s, imagehash %s (distance %d)\n", r->col[0], COLS[c], hex, r->col[c], d);
      }
    }
  }
  free(hashes);
}

static const accel_hash_kind ALL6[6] = {ACCEL_HASH_AHASH, ACCEL_HASH_DHASH, ACCEL_HASH_DHASH_VERTICAL,
                                        ACCEL_HASH_PHASH, ACCEL_HASH_WHASH, ACCEL_HASH_COLORHASH};

/* The hashing issue's acceptance rule: ahash, dhash, dhash_vertical and
 * colorhash identical; phash and whash identical on >= 99% of the images
 * and within distance 2 on the rest. `strict` demands identity for all. */
static void check_corpus(const char *dir, const ref_table *t, bool strict) {
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_AUTO, ACCEL_FALLBACK_DENY, NULL, ACCEL_LOG_WARN);
  for (int size = 8; size <= 16; size += 8) {
    kind_tally tally[6];
    memset(tally, 0, sizeof tally);
    int nk = size == 8 ? 6 : 5; /* colorhash has one column */
    compare(ctx, dir, t, size, ALL6, nk, tally);
    for (int k = 0; k < nk; k++) {
      const kind_tally *y = &tally[k];
      int total = y->same + y->differ;
      printf("%s size %d: %d/%d identical to imagehash, max distance %d\n", accel_hash_kind_name(ALL6[k]), size,
             y->same, total, y->max_distance);
      bool float_kind = ALL6[k] == ACCEL_HASH_PHASH || ALL6[k] == ACCEL_HASH_WHASH;
      if (strict || !float_kind) {
        ck_assert_msg(y->differ == 0, "%s size %d differs on %d images", accel_hash_kind_name(ALL6[k]), size,
                      y->differ);
      } else {
        ck_assert_msg(y->same * 100 >= total * 99, "%s size %d identical on only %d/%d", accel_hash_kind_name(ALL6[k]),
                      size, y->same, total);
        ck_assert_int_le(y->max_distance, 2);
      }
    }
  }
  accel_ctx_destroy(ctx);
}

static const char *data_path(const char *rel) {
  static char p[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", test_data_dir(), rel);
  return p[k];
}

START_TEST(committed_subset_matches_imagehash) {
  static ref_table t;
  memset(&t, 0, sizeof t);
  load_tsv(&t, data_path("hash/reference.tsv"));
  load_tsv(&t, data_path("hash/generated.tsv"));
  ck_assert_int_ge(t.n, 30);
  check_corpus(data_path("hash"), &t, true);
}
END_TEST

/* ------------------------------------------------------------ decoding */

static accel_buffer *npy(const char *rel) {
  accel_buffer *b = NULL;
  ck_assert_msg(accel_npy_load(NULL, data_path(rel), &b) == ACCEL_OK, "%s", accel_last_error(NULL));
  return b;
}

static void check_decode(const char *file, accel_decode_target target, const char *expected, accel_image_mode mode) {
  accel_decode_options o;
  accel_decode_options_init(&o, sizeof o);
  o.target = target;
  accel_image_info info;
  accel_image_info_init(&info, sizeof info);
  accel_buffer *got = NULL, *want = npy(expected);
  accel_status s = accel_image_decode_file(NULL, data_path(file), &o, &got, &info);
  ck_assert_msg(s == ACCEL_OK, "%s: %s", file, accel_last_error(NULL));
  accel_array g, w;
  accel_buffer_view(got, &g);
  accel_buffer_view(want, &w);
  ck_assert_int_eq(info.mode, mode);
  ck_assert_int_eq(g.ndim, w.ndim);
  for (int i = 0; i < g.ndim; i++) ck_assert_int_eq(g.shape[i], w.shape[i]);
  ck_assert_int_eq(info.width, g.shape[1]);
  ck_assert_int_eq(info.height, g.shape[0]);
  size_t n = (size_t)(g.shape[0] * g.shape[1] * (g.ndim == 3 ? g.shape[2] : 1));
  ck_assert_msg(memcmp(g.data, w.data, n) == 0, "%s: pixels differ from Pillow's", file);
  accel_buffer_destroy(got);
  accel_buffer_destroy(want);
}

START_TEST(decoded_pixels_match_pillow) {
  check_decode("hash/hopper.jpg", ACCEL_DECODE_RGB, "decode/hopper.RGB.npy", ACCEL_IMAGE_MODE_RGB);
  check_decode("hash/hopper.jpg", ACCEL_DECODE_GRAY, "decode/hopper.L.npy", ACCEL_IMAGE_MODE_RGB);
  check_decode("hash/tiny.png", ACCEL_DECODE_GRAY, "decode/tiny.L.npy", ACCEL_IMAGE_MODE_P);
  check_decode("hash/hopper_16bit_qtables.jpg", ACCEL_DECODE_RGB, "decode/hopper_16bit_qtables.RGB.npy",
               ACCEL_IMAGE_MODE_RGB);
  check_decode("hash/pil_sample_cmyk.jpg", ACCEL_DECODE_RGB, "decode/pil_sample_cmyk.RGB.npy", ACCEL_IMAGE_MODE_CMYK);
  check_decode("hash/pil_sample_cmyk.jpg", ACCEL_DECODE_GRAY, "decode/pil_sample_cmyk.L.npy", ACCEL_IMAGE_MODE_CMYK);
  check_decode("hash/hopper_gray.jpg", ACCEL_DECODE_GRAY, "decode/hopper_gray.L.npy", ACCEL_IMAGE_MODE_L);
  check_decode("hash/i_trns.png", ACCEL_DECODE_GRAY, "decode/i_trns.L.npy", ACCEL_IMAGE_MODE_I);
  check_decode("hash/gen_adam7_rgba16.png", ACCEL_DECODE_RGB, "decode/gen_adam7_rgba16.RGB.npy", ACCEL_IMAGE_MODE_RGBA);
  check_decode("hash/pil123p.png", ACCEL_DECODE_RGB, "decode/pil123p.RGB.npy", ACCEL_IMAGE_MODE_P);
  check_decode("hash/pil123p.png", ACCEL_DECODE_GRAY, "decode/pil123p.L.npy", ACCEL_IMAGE_MODE_P);
  check_decode("hash/gen_gray2.png", ACCEL_DECODE_GRAY, "decode/gen_gray2.L.npy", ACCEL_IMAGE_MODE_L);
}
END_TEST

START_TEST(png_robustness_follows_pillow) {
  FILE *f = fopen(data_path("png_edge/expected.tsv"), "r");
  ck_assert_ptr_nonnull(f);
  char line[256];
  int cases = 0;
  accel_decode_options o;
  accel_decode_options_init(&o, sizeof o);
  o.target = ACCEL_DECODE_GRAY;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char name[128], outcome[16];
    ck_assert_int_eq(sscanf(line, "%127s %15s", name, outcome), 2);
    char rel[256];
    snprintf(rel, sizeof rel, "png_edge/%s", name);
    accel_buffer *got = NULL;
    accel_status s = accel_image_decode_file(NULL, data_path(rel), &o, &got, NULL);
    if (strcmp(outcome, "ok") == 0) {
      ck_assert_msg(s == ACCEL_OK, "%s: Pillow loads it, we: %s", name, accel_last_error(NULL));
      snprintf(rel, sizeof rel, "png_edge/%.*s.L.npy", (int)(strlen(name) - 4), name);
      accel_buffer *want = npy(rel);
      accel_array g, w;
      accel_buffer_view(got, &g);
      accel_buffer_view(want, &w);
      ck_assert_msg(memcmp(g.data, w.data, (size_t)(w.shape[0] * w.shape[1])) == 0, "%s: pixels differ", name);
      accel_buffer_destroy(want);
    } else {
      ck_assert_msg(s == ACCEL_ERR_DECODE, "%s: Pillow refuses it, we returned %s", name, accel_status_string(s));
    }
    accel_buffer_destroy(got);
    cases++;
  }
  fclose(f);
  ck_assert_int_eq(cases, 11);
}
END_TEST

/* tests/data/bad: image data ending before row 0 used to write row -1 (heap
 * corruption); absurd widths allocated libpng's row buffers before the limit
 * was checked. Each is now an error, found from the header. */
START_TEST(hostile_images_fail_cleanly) {
  limit_address_space(1ull << 30);
  static const struct {
    const char *file;
    accel_status want;
  } cases[] = {{"bad/empty_idat.png", ACCEL_ERR_DECODE},
               {"bad/wide_rgba16.png", ACCEL_ERR_LIMIT},
               {"bad/wide_max_rgba16.png", ACCEL_ERR_LIMIT},
               {"bad/base_65000.jpg", ACCEL_ERR_LIMIT}};
  enum { N = sizeof cases / sizeof cases[0] };
  const char *paths[N];
  for (int i = 0; i < N; i++) {
    accel_buffer *b = NULL;
    const accel_status s = accel_image_decode_file(NULL, data_path(cases[i].file), NULL, &b, NULL);
    ck_assert_msg(s == cases[i].want, "%s: %s (%s)", cases[i].file, accel_status_string(s), accel_last_error(NULL));
    ck_assert_ptr_null(b);
    paths[i] = strdup(data_path(cases[i].file));
  }
  accel_ctx *ctx = cpu_ctx();
  accel_hash_options h = hash_options(ALL6, 6);
  size_t slot = 0;
  ck_assert_int_eq(accel_hash_slot_bytes(&h, &slot), ACCEL_OK);
  uint8_t *out = malloc(N * 6 * slot);
  accel_status st[N];
  ck_assert_int_eq(accel_hash_files(ctx, paths, N, &h, out, slot, st), ACCEL_OK);
  for (int i = 0; i < N; i++)
    ck_assert_msg(st[i] == cases[i].want, "%s: %s", cases[i].file, accel_status_string(st[i]));
  for (int i = 0; i < N; i++) free((void *)paths[i]);
  free(out);
  accel_ctx_destroy(ctx);
}
END_TEST

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(*n ? *n : 1);
  ck_assert_uint_eq(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

/* Every prefix and a bit-flipped copy of a JPEG and a PNG: an error (or, for
 * the PNG's trailing chunks, success), never a crash. Run under ASan too. */
START_TEST(truncated_and_corrupt_inputs_never_crash) {
  const char *files[] = {"hash/hopper__progressive.jpg", "hash/pil_sample_cmyk.jpg", "hash/gen_adam7_rgb8.png",
                         "hash/pil123p.png", "hash/gen_gray_alpha16.png"};
  accel_decode_options o;
  accel_decode_options_init(&o, sizeof o);
  for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
    size_t n;
    uint8_t *full = slurp(data_path(files[fi]), &n);
    size_t step = n / 300 + 1;
    for (size_t cut = 0; cut < n; cut += step) {
      accel_buffer *b = NULL;
      accel_status s = accel_image_decode_buffer(NULL, full, cut, &o, &b, NULL);
      ck_assert_msg(s == ACCEL_ERR_DECODE || s == ACCEL_ERR_FORMAT || (s == ACCEL_OK && cut > n - 64), "%s cut %zu: %s",
                    files[fi], cut, accel_status_string(s));
      ck_assert_int_eq(s == ACCEL_OK, b != NULL);
      accel_buffer_destroy(b);
    }
    uint32_t x = 12345;
    for (int trial = 0; trial < 40; trial++) {
      uint8_t *bad = malloc(n);
      memcpy(bad, full, n);
      for (int k = 0; k < 8; k++) {
        x = x * 1103515245u + 12345u;
        bad[16 + (x >> 8) % (n - 16)] ^= (uint8_t)(1u << (x % 8));
      }
      accel_buffer *b = NULL;
      accel_status s = accel_image_decode_buffer(NULL, bad, n, &o, &b, NULL);
      ck_assert(s == ACCEL_OK || s == ACCEL_ERR_DECODE || s == ACCEL_ERR_FORMAT || s == ACCEL_ERR_LIMIT);
      accel_buffer_destroy(b);
      free(bad);
    }
    free(full);
  }
  uint8_t junk[64];
  fill_random(junk, sizeof junk, 3);
  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_image_decode_buffer(NULL, junk, sizeof junk, &o, &b, NULL), ACCEL_ERR_FORMAT);
  ck_assert_int_eq(accel_image_decode_file(NULL, "/nonexistent.png", &o, &b, NULL), ACCEL_ERR_IO);
}
END_TEST

START_TEST(pixel_limit_guards_decompression_bombs) {
  accel_decode_options o;
  accel_decode_options_init(&o, sizeof o);
  o.max_pixels = 128 * 128 - 1;
  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_image_decode_file(NULL, data_path("hash/hopper.jpg"), &o, &b, NULL), ACCEL_ERR_LIMIT);
  ck_assert_int_eq(accel_image_decode_file(NULL, data_path("hash/hopper.png"), &o, &b, NULL), ACCEL_ERR_LIMIT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "limit"));
  o.max_pixels = 128 * 128;
  ck_assert_int_eq(accel_image_decode_file(NULL, data_path("hash/hopper.png"), &o, &b, NULL), ACCEL_OK);
  accel_buffer_destroy(b);

  accel_ctx *ctx = cpu_ctx();
  accel_hash_options h = hash_options(NULL, 0);
  h.max_pixels = 1000;
  const char *paths[2] = {data_path("hash/hopper.png"), data_path("hash/palette_gray.png")};
  uint8_t out[2 * 4 * 8];
  accel_status st[2];
  ck_assert_int_eq(accel_hash_files(ctx, paths, 2, &h, out, 8, st), ACCEL_OK);
  ck_assert_int_eq(st[0], ACCEL_ERR_LIMIT);
  ck_assert_int_eq(st[1], ACCEL_OK); /* 10x10 */
  accel_ctx_destroy(ctx);

  /* the context's limit caps the options' own */
  accel_ctx_options co = ctx_options(ACCEL_BACKEND_CPU);
  co.max_pixels = 128 * 128 - 1;
  ck_assert_int_eq(accel_ctx_create(&co, &ctx), ACCEL_OK);
  o.max_pixels = 0;
  ck_assert_int_eq(accel_image_decode_file(ctx, data_path("hash/hopper.png"), &o, &b, NULL), ACCEL_ERR_LIMIT);
  h.max_pixels = 1u << 30;
  ck_assert_int_eq(accel_hash_files(ctx, paths, 2, &h, out, 8, st), ACCEL_OK);
  ck_assert_int_eq(st[0], ACCEL_ERR_LIMIT);
  ck_assert_int_eq(st[1], ACCEL_OK);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ batch semantics */

typedef struct errors_seen {
  int n;
  size_t index[8];
  accel_status status[8];
  char message[8][200];
} errors_seen;

static void record_error(void *user, size_t index, accel_status status, const char *message) {
  errors_seen *e = user;
  if (e->n >= 8) return;
  e->index[e->n] = index;
  e->status[e->n] = status;
  snprintf(e->message[e->n], sizeof e->message[0], "%s", message);
  e->n++;
}

START_TEST(one_broken_input_never_fails_the_batch) {
  accel_ctx *ctx = cpu_ctx();
  const char *paths[5] = {data_path("hash/hopper.jpg"), data_path("hash/truncated_jpeg.jpg"), "/no/such/file.png",
                          data_path("hash/broken.png"), data_path("hash/hopper.png")};
  accel_hash_options o = hash_options(NULL, 0);
  errors_seen seen = {0};
  o.on_error = record_error;
  o.error_user = &seen;
  size_t slot;
  accel_hash_slot_bytes(&o, &slot);
  ck_assert_uint_eq(slot, 8);
  uint8_t out[5 * 4 * 8];
  memset(out, 0xee, sizeof out);
  accel_status st[5];
  ck_assert_int_eq(accel_hash_files(ctx, paths, 5, &o, out, slot, st), ACCEL_OK);
  ck_assert_int_eq(st[0], ACCEL_OK);
  ck_assert_int_eq(st[1], ACCEL_ERR_DECODE);
  ck_assert_int_eq(st[2], ACCEL_ERR_IO);
  ck_assert_int_eq(st[3], ACCEL_ERR_DECODE);
  ck_assert_int_eq(st[4], ACCEL_OK);
  for (int i = 32; i < 32 * 4; i++) ck_assert_int_eq(out[i], 0); /* failed inputs: zeros */
  ck_assert_int_eq(seen.n, 3);
  ck_assert_int_eq(seen.index[0], 1);
  ck_assert_int_eq(seen.index[1], 2);
  ck_assert_int_eq(seen.index[2], 3);
  ck_assert_ptr_nonnull(strstr(seen.message[0], "Premature end"));
  ck_assert_ptr_nonnull(strstr(seen.message[1], "/no/such/file.png"));
  /* input 0 and input 4 hash as a batch of one would */
  uint8_t one[4 * 8];
  accel_status s1;
  ck_assert_int_eq(accel_hash_files(ctx, paths, 1, &o, one, slot, &s1), ACCEL_OK);
  ck_assert_mem_eq(one, out, sizeof one);
  ck_assert_int_eq(accel_hash_files(ctx, paths, 0, &o, NULL, slot, NULL), ACCEL_OK);
  accel_ctx_destroy(ctx);
}
END_TEST

static int cancel_after_two(void *user, const char *stage, double fraction) {
  int *calls = user;
  ck_assert_str_eq(stage, "hash.batch");
  ck_assert(fraction > 0.0 && fraction <= 1.0);
  return ++*calls >= 2;
}

START_TEST(progress_reports_and_cancels) {
  accel_ctx_options co = ctx_options(ACCEL_BACKEND_CPU);
  co.cpu_threads = 1;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&co, &ctx), ACCEL_OK);
  const char *paths[6];
  for (int i = 0; i < 6; i++) paths[i] = data_path("hash/hopper.png");
  accel_hash_options o = hash_options(NULL, 0);
  int calls = 0;
  o.progress = cancel_after_two;
  o.progress_user = &calls;
  uint8_t out[6 * 4 * 8];
  accel_status st[6];
  ck_assert_int_eq(accel_hash_files(ctx, paths, 6, &o, out, 8, st), ACCEL_ERR_CANCELLED);
  ck_assert_int_eq(calls, 2);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "cancel"));
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(buffers_and_arrays_hash_like_files) {
  accel_ctx *ctx = cpu_ctx();
  accel_hash_options o = hash_options(ALL6, 6);
  size_t slot;
  accel_hash_slot_bytes(&o, &slot);
  const char *files[3] = {data_path("hash/hopper.png"), data_path("hash/hopper_gray.jpg"),
                          data_path("hash/uncompressed_la.png")};
  uint8_t by_file[3 * 6 * 8], by_buffer[3 * 6 * 8], by_array[3 * 6 * 8];
  accel_status st[3];
  ck_assert_int_eq(accel_hash_files(ctx, files, 3, &o, by_file, slot, st), ACCEL_OK);
  const void *data[3];
  size_t sizes[3];
  for (int i = 0; i < 3; i++) data[i] = slurp(files[i], &sizes[i]);
  ck_assert_int_eq(accel_hash_buffers(ctx, data, sizes, 3, &o, by_buffer, slot, st), ACCEL_OK);
  ck_assert_mem_eq(by_file, by_buffer, sizeof by_file);

  /* arrays: an RGB PNG, a gray JPEG and an LA PNG decoded into their own
   * modes hash as imagehash hashes Image.fromarray of them */
  accel_buffer *img[3];
  accel_array arr[3];
  accel_decode_options d;
  accel_decode_options_init(&d, sizeof d);
  ck_assert_int_eq(accel_image_decode_file(NULL, files[0], &d, &img[0], NULL), ACCEL_OK);
  d.target = ACCEL_DECODE_GRAY;
  ck_assert_int_eq(accel_image_decode_file(NULL, files[1], &d, &img[1], NULL), ACCEL_OK);
  accel_buffer_view(img[0], &arr[0]);
  accel_buffer_view(img[1], &arr[1]);
  /* LA: gray with an alpha channel that must not matter */
  accel_buffer_view(img[1], &arr[2]);
  uint8_t *la = malloc((size_t)(arr[2].shape[0] * arr[2].shape[1] * 2));
  for (int64_t i = 0; i < arr[2].shape[0] * arr[2].shape[1]; i++) {
    la[2 * i] = ((uint8_t *)arr[2].data)[i];
    la[2 * i + 1] = (uint8_t)(i * 31);
  }
  accel_array_init(&arr[2], la, ACCEL_DTYPE_U8, 3, (int64_t[]){arr[1].shape[0], arr[1].shape[1], 2});
  ck_assert_int_eq(accel_hash_arrays(ctx, arr, 3, &o, by_array, slot, st), ACCEL_OK);
  ck_assert_mem_eq(by_array, by_file, 2 * 6 * slot);                       /* RGB and L */
  ck_assert_mem_eq(by_array + 2 * 6 * slot, by_file + 6 * slot, 6 * slot); /* LA = its L */
  /* a flipped, channel-reversed view hashes like the flipped copy */
  accel_array v = arr[0];
  v.data = (uint8_t *)arr[0].data + (arr[0].shape[0] - 1) * arr[0].strides[0] + 2;
  v.strides[0] = -arr[0].strides[0];
  v.strides[2] = -1;
  size_t bytes = (size_t)(arr[0].shape[0] * arr[0].shape[1] * 3);
  uint8_t *copy = malloc(bytes);
  accel_array c;
  accel_array_init(&c, copy, ACCEL_DTYPE_U8, 3, arr[0].shape);
  for (int64_t y = 0; y < c.shape[0]; y++)
    for (int64_t x = 0; x < c.shape[1]; x++)
      for (int k = 0; k < 3; k++)
        copy[(y * c.shape[1] + x) * 3 + k] =
            ((uint8_t *)arr[0].data)[((c.shape[0] - 1 - y) * c.shape[1] + x) * 3 + 2 - k];
  uint8_t hv[6 * 8], hc[6 * 8];
  ck_assert_int_eq(accel_hash_arrays(ctx, &v, 1, &o, hv, slot, st), ACCEL_OK);
  ck_assert_int_eq(accel_hash_arrays(ctx, &c, 1, &o, hc, slot, st), ACCEL_OK);
  ck_assert_mem_eq(hv, hc, sizeof hv);
  accel_array bad = arr[0];
  bad.dtype = ACCEL_DTYPE_U16;
  ck_assert_int_eq(accel_hash_arrays(ctx, &bad, 1, &o, hv, slot, st), ACCEL_ERR_INVALID_ARG);
  free(copy);
  free(la);
  for (int i = 0; i < 3; i++) free((void *)data[i]);
  accel_buffer_destroy(img[0]);
  accel_buffer_destroy(img[1]);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(fast_mode_changes_only_jpegs) {
  accel_ctx *ctx = cpu_ctx();
  accel_hash_options o = hash_options(NULL, 0);
  const char *files[2] = {data_path("hash/hopper.png"), data_path("hash/hopper.jpg")};
  uint8_t exact[2 * 4 * 8], fast[2 * 4 * 8];
  accel_status st[2];
  ck_assert_int_eq(accel_hash_files(ctx, files, 2, &o, exact, 8, st), ACCEL_OK);
  o.fast = 1;
  ck_assert_int_eq(accel_hash_files(ctx, files, 2, &o, fast, 8, st), ACCEL_OK);
  ck_assert_int_eq(st[1], ACCEL_OK);
  ck_assert_mem_eq(exact, fast, 4 * 8); /* PNG: no DCT scaling */
  uint32_t d;                           /* a 128x128 JPEG decoded at 1/4: close, not equal */
  accel_hash_distance(exact + 32, fast + 32, 64, &d);
  ck_assert_int_le(d, 16);
  o.fast = 2;
  ck_assert_int_eq(accel_hash_files(ctx, files, 2, &o, fast, 8, st), ACCEL_ERR_INVALID_ARG);
  accel_ctx_destroy(ctx);
}
END_TEST

/* each kind's bits under options: whash db4's approximation side is hash_size + 6, or halved from an
 * explicit image_scale down to hash_size ((s + 7) / 2 a level); Haar's and the others', accel_hash_bits' */
START_TEST(kind_bits_follow_the_options) {
  uint32_t nb = 0;
  accel_hash_options o;
  accel_hash_options_init(&o, sizeof o);
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, &nb), ACCEL_OK);
  ck_assert_uint_eq(nb, 64);
  ck_assert_int_eq(accel_hash_kind_bits(NULL, ACCEL_HASH_COLORHASH, &nb), ACCEL_OK);
  ck_assert_uint_eq(nb, 42);
  o.whash_mode = ACCEL_HASH_WHASH_DB4;
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, &nb), ACCEL_OK);
  ck_assert_uint_eq(nb, 14 * 14);
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_PHASH, &nb), ACCEL_OK); /* not among kinds */
  ck_assert_uint_eq(nb, 64);
  o.whash_image_scale = 16;
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, &nb), ACCEL_OK);
  ck_assert_uint_eq(nb, 11 * 11);
  o.whash_image_scale = 64; /* 64 -> 35 -> 21 -> 14 */
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, &nb), ACCEL_OK);
  ck_assert_uint_eq(nb, 14 * 14);
  nb = 7;
  ck_assert_int_eq(accel_hash_kind_bits(&o, (accel_hash_kind)9, &nb), ACCEL_ERR_INVALID_ARG);
  ck_assert_uint_eq(nb, 7);
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, NULL), ACCEL_ERR_INVALID_ARG);
  o.whash_image_scale = 12; /* not a power of two: the options are refused */
  ck_assert_int_eq(accel_hash_kind_bits(&o, ACCEL_HASH_WHASH, &nb), ACCEL_ERR_INVALID_ARG);
}
END_TEST

/* ------------------------------------------------------------ helpers */

START_TEST(options_and_sizes_are_validated) {
  uint32_t bits;
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_AHASH, 8, 3, &bits), ACCEL_OK);
  ck_assert_uint_eq(bits, 64);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_PHASH, 16, 3, &bits), ACCEL_OK);
  ck_assert_uint_eq(bits, 256);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_COLORHASH, 8, 3, &bits), ACCEL_OK);
  ck_assert_uint_eq(bits, 42);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_AHASH, 1, 3, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_DHASH, 65, 3, &bits), ACCEL_OK); /* sizes above 64, as imagehash */
  ck_assert_uint_eq(bits, 65 * 65);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_DHASH, ACCEL_HASH_SIZE_MAX + 1, 3, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_WHASH, 12, 3, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_COLORHASH, 8, 25, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_COLORHASH, 8, 0, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_COLORHASH, 8, 24, &bits), ACCEL_OK); /* imagehash takes binbits > 8 */
  ck_assert_uint_eq(bits, 14 * 24);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_DHASH_VERTICAL, 1, 3, &bits), ACCEL_OK); /* as imagehash: one bit */
  ck_assert_uint_eq(bits, 1);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_WHASH, 1, 3, &bits), ACCEL_OK);
  ck_assert_uint_eq(bits, 1);
  ck_assert_int_eq(accel_hash_bits(ACCEL_HASH_WHASH, 0, 3, &bits), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_bits((accel_hash_kind)9, 8, 3, &bits), ACCEL_ERR_INVALID_ARG);
  accel_hash_options o;
  accel_hash_options_init(&o, sizeof o);
  ck_assert_uint_eq(o.nkinds, 4);
  ck_assert_int_eq(o.kinds[3], ACCEL_HASH_WHASH);
  size_t slot;
  o.kinds[1] = ACCEL_HASH_AHASH;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_ERR_INVALID_ARG); /* listed twice */
  accel_hash_options_init(&o, sizeof o);
  o.hash_size = 16;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  ck_assert_uint_eq(slot, 32);
  o.nkinds = 0;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_ERR_INVALID_ARG);
  /* phash's highfreq_factor: 0 is imagehash's 4, negative is refused, past 16 not implemented */
  accel_hash_options_init(&o, sizeof o);
  ck_assert_int_eq(o.phash_highfreq_factor, 0);
  for (int32_t f = 0; f <= ACCEL_HASH_HIGHFREQ_MAX; f++) {
    o.phash_highfreq_factor = f;
    ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  }
  o.phash_highfreq_factor = -1;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_ERR_INVALID_ARG);
  o.phash_highfreq_factor = ACCEL_HASH_HIGHFREQ_MAX + 1;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_ERR_UNSUPPORTED);
  /* a caller built before the field: its struct ends where the field begins, and gets the default */
  accel_hash_options_init(&o, sizeof o);
  ck_assert_int_eq(accel_hash_options_init(&o, offsetof(accel_hash_options, phash_highfreq_factor)), ACCEL_OK);
  ck_assert_uint_eq(o.struct_size, offsetof(accel_hash_options, phash_highfreq_factor));
  o.phash_highfreq_factor = -1; /* past the caller's struct: never read */
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  /* whash's image_scale: 0 (imagehash's default) or a power of two not below hash_size, within max_pixels */
  accel_hash_options_init(&o, sizeof o);
  ck_assert_int_eq(o.whash_image_scale, 0);
  ck_assert_int_eq(o.whash_keep_max_ll, 0);
  const int32_t scales[][2] = {{8, ACCEL_OK},
                               {64, ACCEL_OK},
                               {8192, ACCEL_OK},
                               {12, ACCEL_ERR_INVALID_ARG},
                               {4, ACCEL_ERR_INVALID_ARG},
                               {-8, ACCEL_ERR_INVALID_ARG},
                               {32768, ACCEL_ERR_LIMIT}};
  for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
    o.whash_image_scale = scales[i][0];
    ck_assert_msg(accel_hash_slot_bytes(&o, &slot) == (accel_status)scales[i][1], "image_scale %d", scales[i][0]);
  }
  /* whash_mode: Haar or db4, whose hashes have (hash_size + 6)^2 bits */
  accel_hash_options_init(&o, sizeof o);
  o.kinds[0] = ACCEL_HASH_WHASH;
  o.nkinds = 1;
  o.whash_mode = ACCEL_HASH_WHASH_DB4;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  ck_assert_uint_eq(slot, (14 * 14 + 7) / 8);
  o.whash_mode = 2;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_ERR_INVALID_ARG);
  /* a caller built before the whash fields gets the defaults */
  ck_assert_int_eq(accel_hash_options_init(&o, offsetof(accel_hash_options, whash_image_scale)), ACCEL_OK);
  o.whash_image_scale = 12; /* past the caller's struct: never read */
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  accel_hash_kind k;
  ck_assert_int_eq(accel_hash_kind_from_string("average_hash", &k), ACCEL_OK);
  ck_assert_int_eq(k, ACCEL_HASH_AHASH);
  ck_assert_int_eq(accel_hash_kind_from_string("dhash_vertical", &k), ACCEL_OK);
  ck_assert_int_eq(k, ACCEL_HASH_DHASH_VERTICAL);
  ck_assert_int_eq(accel_hash_kind_from_string("md5", &k), ACCEL_ERR_INVALID_ARG);
  for (int i = 0; i < ACCEL_HASH_KIND_COUNT; i++) {
    ck_assert_int_eq(accel_hash_kind_from_string(accel_hash_kind_name((accel_hash_kind)i), &k), ACCEL_OK);
    ck_assert_int_eq(k, i);
  }
  accel_ctx *ctx = cpu_ctx();
  accel_hash_options_init(&o, sizeof o);
  const char *p = data_path("hash/hopper.png");
  uint8_t out[64];
  accel_status st;
  ck_assert_int_eq(accel_hash_files(ctx, &p, 1, &o, out, 4, &st), ACCEL_ERR_INVALID_ARG); /* slot too small */
  ck_assert_int_eq(accel_hash_files(ctx, NULL, 1, &o, out, 8, &st), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_files(NULL, &p, 1, &o, out, 8, &st), ACCEL_ERR_INVALID_ARG);
  accel_ctx_destroy(ctx);
}
END_TEST

/* whash with Daubechies-4 wavelets of a committed image against imagehash
 * 4.3.2's whash(Image.open(...), size, image_scale, mode="db4",
 * remove_max_haar_ll) (Pillow 9.4.0, PyWavelets 1.8.0); and an image_scale
 * below 8 x hash_size refused for the image alone. */
START_TEST(whash_db4_matches_imagehash) {
  const struct {
    int size, scale, keep;
    const char *hex;
  } cases[] = {
      {8, 0, 0, "01fc03f01fc07f00ffe7f001ff3f01fc0ff00cfe31fa84a01"},
      {8, 0, 1, "01fc03f01fc07f00ffe7f001ff3f01fc0ff00cfe31fa84a01"},
      {4, 128, 0, "03c0f03c0f03c0ffbc0ff97e1"},
      {2, 64, 0, "0707070703ffff09"},
      {16, 256, 0,
       "0017fc005ff0017fc005ff0017fc007fffc3ffc0a03f0000fff0fbffa1ffc01ffff8fffc03fff00fffc0849f001e0fe0403f"
       "c0c07f7201f80087e0001"},
      /* explicit image_scales below 8 x size: fewer levels, smaller sides (11, 2, 4, 9) */
      {8, 16, 0, "00ddcf83f33e05c1fc7f8fe0e488804"},
      {2, 2, 0, "5"},
      {1, 2, 0, "5555"},
      {4, 16, 0, "0af37abc9eafa793c0000"},
  };
  accel_ctx *ctx = cpu_ctx();
  const char *p = data_path("hash/hopper.png");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    accel_hash_options o;
    accel_hash_options_init(&o, sizeof o);
    o.nkinds = 1;
    o.kinds[0] = ACCEL_HASH_WHASH;
    o.hash_size = cases[c].size;
    o.whash_image_scale = cases[c].scale;
    o.whash_keep_max_ll = cases[c].keep;
    o.whash_mode = ACCEL_HASH_WHASH_DB4;
    size_t slot;
    ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
    uint8_t out[ACCEL_HASH_MAX_BYTES];
    accel_status st;
    ck_assert_msg(accel_hash_files(ctx, &p, 1, &o, out, slot, &st) == ACCEL_OK, "%s", accel_last_error(ctx));
    ck_assert_msg(st == ACCEL_OK, "case %zu: %s", c, accel_status_string(st));
    const uint32_t side =
        (uint32_t)(cases[c].scale ? accel__whash_db4_side(cases[c].size, cases[c].scale) : cases[c].size + 6);
    char hex[ACCEL_HASH_MAX_BYTES * 2 + 1];
    ck_assert_int_eq(accel_hash_to_hex(out, side * side, hex, sizeof hex), ACCEL_OK);
    ck_assert_msg(strcmp(hex, cases[c].hex) == 0, "case %zu: %s, imagehash %s", c, hex, cases[c].hex);
  }
  /* 128 x 128 at hash size 32: image_scale 128 < 8 x 32, a smaller db4 hash than the slots hold */
  accel_hash_options o;
  accel_hash_options_init(&o, sizeof o);
  o.nkinds = 1;
  o.kinds[0] = ACCEL_HASH_WHASH;
  o.hash_size = 32;
  o.whash_mode = ACCEL_HASH_WHASH_DB4;
  size_t slot;
  ck_assert_int_eq(accel_hash_slot_bytes(&o, &slot), ACCEL_OK);
  uint8_t *out = malloc(slot);
  accel_status st;
  ck_assert_int_eq(accel_hash_files(ctx, &p, 1, &o, out, slot, &st), ACCEL_OK);
  ck_assert_int_eq(st, ACCEL_ERR_UNSUPPORTED);
  free(out);
  accel_ctx_destroy(ctx);
}
END_TEST

START_TEST(hex_and_distance_follow_imagehash) {
  /* worked examples: imagehash's str() of known arrays */
  uint8_t h[8] = {0x81, 0, 0, 0, 0, 0, 0, 0x01}; /* bits [0][0], [0][7], [7][7] */
  char hex[80];
  ck_assert_int_eq(accel_hash_to_hex(h, 64, hex, sizeof hex), ACCEL_OK);
  ck_assert_str_eq(hex, "8100000000000001");
  /* colorhash, 42 bits: the first digit holds 2 bits */
  uint8_t c[6];
  ck_assert_int_eq(accel_hash_from_hex("33000000000", 42, c, sizeof c), ACCEL_OK);
  ck_assert_int_eq(c[0], 0xcc); /* 0b11 0011 0000... : bits 0,1 then 4,5 */
  ck_assert_int_eq(accel_hash_to_hex(c, 42, hex, sizeof hex), ACCEL_OK);
  ck_assert_str_eq(hex, "33000000000");
  ck_assert_int_eq(accel_hash_from_hex("0e000000000", 42, c, sizeof c), ACCEL_OK);
  ck_assert_int_eq(accel_hash_to_hex(c, 42, hex, sizeof hex), ACCEL_OK);
  ck_assert_str_eq(hex, "0e000000000");
  ck_assert_int_eq(accel_hash_from_hex("4e000000000", 42, c, sizeof c), ACCEL_ERR_INVALID_ARG); /* a 43rd bit */
  ck_assert_int_eq(accel_hash_from_hex("0e00000000", 42, c, sizeof c), ACCEL_ERR_INVALID_ARG);  /* too short */
  ck_assert_int_eq(accel_hash_from_hex("0x000000000", 42, c, sizeof c), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_hash_to_hex(h, 64, hex, 16), ACCEL_ERR_INVALID_ARG); /* no room for the NUL */
  /* distances: imagehash's hash - hash */
  uint8_t a[8], b[8];
  accel_hash_from_hex("8100000000000001", 64, a, 8);
  accel_hash_from_hex("0100000000000000", 64, b, 8);
  uint32_t d;
  ck_assert_int_eq(accel_hash_distance(a, b, 64, &d), ACCEL_OK);
  ck_assert_uint_eq(d, 2);
  uint8_t x[6], y[6];
  accel_hash_from_hex("3ffffffffff", 42, x, 6);
  accel_hash_from_hex("00000000000", 42, y, 6);
  ck_assert_int_eq(accel_hash_distance(x, y, 42, &d), ACCEL_OK);
  ck_assert_uint_eq(d, 42);
  for (int i = 0; i < 6; i++) x[i] = 0xff; /* bits past nbits never count */
  ck_assert_int_eq(accel_hash_distance(x, y, 42, &d), ACCEL_OK);
  ck_assert_uint_eq(d, 42);
}
END_TEST

/* The CPU's table of saturations and the per-pixel formula the GPU uses
 * agree on every colour, so CPU and GPU colorhashes count the same pixels. */
START_TEST(saturation_table_equals_the_formula_everywhere) {
  long bad = 0;
  for (unsigned r = 0; r < 256; r++)
    for (unsigned g = 0; g < 256; g++)
      for (unsigned b = 0; b < 256; b++) {
        uint8_t hue, sat;
        accel__rgb_to_hs(r, g, b, &hue, &sat);
        bad += accel__saturation(r, g, b) != sat;
      }
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* The resizes fed band by band, as the decoder feeds them (1, 7 and 128
 * rows at a time, each band in a buffer of its own), give the hashes of the
 * whole plane fed at once, to the bit: shapes short and long, up- and
 * downscales, hash sizes 8 and 16, one accel__hash_rows reused throughout
 * (its buffers holding the previous image's rows). */
START_TEST(band_fed_resizes_equal_the_whole_plane) {
  const int64_t shapes[][2] = {{700, 1000}, {5, 300}, {300, 5}, {3, 5}, {48, 64}, {1600, 37}};
  const int bands[] = {1, 7, 128};
  accel__axis_cache cache = {0};
  accel__hash_rows rows = {0};
  uint32_t seed = 7;
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const int64_t h = shapes[c][0], w = shapes[c][1];
    uint8_t *plane = malloc((size_t)(w * h));
    for (int64_t i = 0; i < w * h; i++) {
      seed = seed * 1664525u + 1013904223u;
      plane[i] = (uint8_t)(i % 89 < 50 ? (seed >> 24) : (i / w + i % w) % 3 * 120);
    }
    for (int size = 8; size <= 16; size += 8) {
      accel_hash_options o = hash_options(ALL6, 5); /* colorhash needs the colour counts */
      o.hash_size = size;
      accel__hash_spec spec = {.nkinds = 5, .hash_size = size, .highfreq = 4, .binbits = 3, .need_gray = true};
      memcpy(spec.kinds, o.kinds, sizeof spec.kinds);
      ck_assert_int_eq(accel_hash_slot_bytes(&o, &spec.slot_bytes), ACCEL_OK);
      uint8_t *want = calloc(5, spec.slot_bytes), *got = calloc(5, spec.slot_bytes);
      char why[ACCEL_REASON_MAX] = "";
      ck_assert_int_eq(accel__hash_rows_begin(&spec, w, h, &cache, &rows), ACCEL_OK);
      accel__hash_rows_feed(&rows, plane, w, 0, h);
      ck_assert_int_eq(accel__hash_rows_finish(&spec, &rows, NULL, want, why), ACCEL_OK);
      for (size_t b = 0; b < sizeof bands / sizeof bands[0]; b++) {
        ck_assert_int_eq(accel__hash_rows_begin(&spec, w, h, &cache, &rows), ACCEL_OK);
        for (int64_t y0 = 0; y0 < h; y0 += bands[b]) {
          const int64_t n = h - y0 < bands[b] ? h - y0 : bands[b];
          uint8_t *band = malloc((size_t)(w * n));
          memcpy(band, plane + y0 * w, (size_t)(w * n));
          accel__hash_rows_feed(&rows, band, w, y0, n);
          free(band);
        }
        ck_assert_int_eq(accel__hash_rows_finish(&spec, &rows, NULL, got, why), ACCEL_OK);
        ck_assert_msg(memcmp(got, want, 5 * spec.slot_bytes) == 0, "%lldx%lld size %d, bands of %d: hashes differ",
                      (long long)w, (long long)h, size, bands[b]);
      }
      free(want);
      free(got);
    }
    free(plane);
  }
  accel__hash_rows_free(&rows);
  accel__axis_cache_free(&cache);
}
END_TEST

/* An axis handed out by the cache stays valid for the next calls, also when
 * it was a hit on an old entry (the resizes of an image keep every axis they
 * looked up): a full cache, hits on its oldest entry and on one in the
 * middle, then new sizes. */
START_TEST(axis_cache_keeps_what_it_handed_out) {
  accel__axis_cache cache = {0};
  for (int k = 0; k < ACCEL__AXIS_CACHE_SIZE; k++) ck_assert_ptr_nonnull(accel__axis_cached(&cache, 100 + k, 8));
  const accel__axis *b = accel__axis_cached(&cache, 102, 8); /* a hit in the middle */
  const accel__axis *a = accel__axis_cached(&cache, 100, 8); /* a hit on the oldest */
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  const accel__axis *held[ACCEL__AXIS_CACHE_SIZE - 2];
  for (int k = 0; k < ACCEL__AXIS_CACHE_SIZE - 2; k++) held[k] = accel__axis_cached(&cache, 500 + k, 9);
  ck_assert_int_eq(a->in_size, 100);
  ck_assert_int_eq(a->out_size, 8);
  ck_assert_int_eq(b->in_size, 102);
  for (int k = 0; k < ACCEL__AXIS_CACHE_SIZE - 2; k++) ck_assert_int_eq(held[k]->in_size, 500 + k);
  accel__axis_cache_free(&cache);
}
END_TEST

/* The vertical pass, forced onto each path where the CPU has it (the VNNI
 * and VBMI paths take 64 columns at a time in byte products, 2 to 4 parts;
 * without AVX-512 VNNI every path is the plain loop), equals the plain loop
 * to the bit: downscales short and long, upscales, widths below, at and
 * past 64 columns, the buffer's rows starting before the first row read. */
START_TEST(vertical_paths_equal_the_scalar_loop) {
  const int64_t sizes[][2] = {{1600, 1024}, {3000, 2048}, {1600, 8}, {1600, 32},
                              {37, 5},      {5, 37},      {100, 99}, {7000, 3}};
  const int64_t widths[] = {8, 64, 130, 1029};
  uint32_t seed = 11;
  int parts[5] = {0};
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
    accel__axis ay;
    ck_assert_int_eq(accel__axis_init(&ay, sizes[c][0], sizes[c][1]), ACCEL_OK);
    parts[ay.vparts]++;
    int64_t y0, y1;
    accel__axis_span(&ay, &y0, &y1);
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
      const int64_t w = widths[k], stride = w + 3, out = sizes[c][1], lead = 3; /* rows before y0 */
      uint8_t *src = malloc((size_t)((y1 - y0 + lead) * stride)), *want = malloc((size_t)(out * w)),
              *got = malloc((size_t)(out * w));
      for (int64_t i = 0; i < (y1 - y0 + lead) * stride; i++) {
        seed = seed * 1664525u + 1013904223u;
        src[i] = (uint8_t)(i % 89 < 50 ? (seed >> 24) : (i / 7) % 2 * 255); /* noise, and hard edges */
      }
      accel__resample_path = ACCEL__RESAMPLE_SCALAR;
      accel__resample_cols(&ay, src, stride, y0 - lead, w, want, w);
      for (int path = ACCEL__RESAMPLE_SSE2; path <= ACCEL__RESAMPLE_VBMI; path++) {
        if (!accel__resample_path_available(path)) continue;
        accel__resample_path = path;
        memset(got, 0xA5, (size_t)(out * w));
        accel__resample_cols(&ay, src, stride, y0 - lead, w, got, w);
        ck_assert_msg(memcmp(got, want, (size_t)(out * w)) == 0, "%lld -> %lld, width %lld: path %d differs",
                      (long long)sizes[c][0], (long long)out, (long long)w, path);
      }
      accel__resample_path = ACCEL__RESAMPLE_AUTO;
      free(src);
      free(want);
      free(got);
    }
    accel__axis_free(&ay);
  }
  /* every split ran: long downscales in two parts, short ones in three, upscales in four */
  ck_assert_int_gt(parts[2], 0);
  ck_assert_int_gt(parts[3], 0);
  ck_assert_int_gt(parts[4], 0);
}
END_TEST

/* pywt's whash steps on the whole N x N image (wavedec2 to the top, the top
 * approximation zeroed, waverec2, wavedec2 to log2(N / n) levels; or the
 * last alone when the top is kept), then imagehash's median rule: the
 * definition the block-wise accel__whash_plane and its shortcut (most
 * blocks' round trip skipped, see cpu_hashes.c) must equal. */
static void whash_whole_image(const uint8_t *px, int64_t N, int n, bool keep, uint8_t *out) {
  double *x = malloc(sizeof(double) * (size_t)(N * N)), *tmp = malloc(sizeof(double) * (size_t)(4 * N * N)),
         *low = malloc(sizeof(double) * (size_t)(n * n)), *sorted = malloc(sizeof(double) * (size_t)(n * n));
  ck_assert_ptr_nonnull(x);
  ck_assert_ptr_nonnull(tmp);
  for (int64_t i = 0; i < N * N; i++) x[i] = (double)px[i] / 255.;
  int L = 0, m = 0;
  while ((int64_t)1 << (L + 1) <= N) L++;
  while ((int64_t)n << (m + 1) <= N) m++;
  if (!keep) {
    for (int k = 0; k < L; k++) accel__haar_analyze(x, N, N >> k, tmp);
    x[0] *= 0;
    for (int k = L - 1; k >= 0; k--) accel__haar_synthesize(x, N, N >> (k + 1), tmp);
  }
  for (int k = 0; k < m; k++) accel__haar_analyze(x, N, N >> k, tmp);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) low[i * n + j] = x[i * N + j];
  accel__whash_bits(low, n, sorted, out);
  free(x);
  free(tmp);
  free(low);
  free(sorted);
}

/* The whash plane equals the whole-image transform on planes made to put
 * block approximations at or near the median: flat images, a few grey
 * levels, blocks that are the same pixels shuffled (equal sums, rounded
 * differently), a gradient, noise, and noise with a flat half. */
START_TEST(whash_plane_equals_the_whole_image_transform) {
  const struct {
    int64_t N;
    int n;
  } geo[] = {{64, 8}, {256, 8}, {256, 16}, {128, 4}, {8, 8}, {1024, 8}, {64, 1}, {64, 2}, {256, 32}};
  uint32_t seed = 5;
  for (size_t c = 0; c < sizeof geo / sizeof geo[0]; c++) {
    const int64_t N = geo[c].N, B = N / geo[c].n;
    uint8_t *px = malloc((size_t)(N * N));
    for (int pattern = 0; pattern < 6; pattern++) {
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) {
          seed = seed * 1664525u + 1013904223u;
          const uint8_t r = (uint8_t)(seed >> 24);
          const int64_t bi = i / B, bj = j / B, u = i % B, v = j % B;
          uint8_t val = 0;
          switch (pattern) {
          case 0: val = 200; break;                                                  /* flat */
          case 1: val = (uint8_t)((bi * 3 + bj * 5) % 4 * 60); break;                /* four levels by block */
          case 2: val = (uint8_t)(((u * 7 + v * 3 + bi + bj) % B) * 255 / B); break; /* shuffled ramps */
          case 3: val = (uint8_t)((i + j) * 255 / (2 * N)); break;                   /* gradient */
          case 4: val = r; break;                                                    /* noise */
          default: val = i < N / 2 ? 90 : r; break;                                  /* half flat */
          }
          px[i * N + j] = val;
        }
      for (int keep = 0; keep < 2; keep++) {
        uint8_t want[128] = {0}, got[128] = {0};
        whash_whole_image(px, N, geo[c].n, keep, want);
        ck_assert_int_eq(accel__whash_plane(px, N, geo[c].n, keep, got), ACCEL_OK);
        ck_assert_msg(memcmp(got, want, (size_t)(geo[c].n * geo[c].n + 7) / 8) == 0,
                      "whash %lld/%d, pattern %d, keep %d: differs from the whole-image transform", (long long)N,
                      geo[c].n, pattern, keep);
      }
    }
    free(px);
  }
}
END_TEST

/* The horizontal pass's dot products (scalar, SSE2, AVX2, AVX-512 VNNI and
 * VBMI, the byte products with three weight parts and with two), each
 * forced in turn where the CPU has it, equal the scalar loop to the bit on
 * random rows, downscales short and long, upscales and odd widths. */
START_TEST(resample_paths_equal_the_scalar_loop) {
  const int64_t sizes[][2] = {{2560, 8}, {2560, 9}, {2560, 32}, {2560, 1024}, {1600, 1024}, {4000, 2048}, {37, 5},
                              {5, 37},   {3, 17},   {100, 99},  {64, 64},     {7000, 3},    {4000, 8},    {3000, 9}};
  uint32_t seed = 2026;
  int split[4] = {0};  /* axes with 0, -, 2, 3 byte parts */
  int blocks[5] = {0}; /* axes with 0, -, -, 3, 4 byte parts in the 16-output blocks */
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
    const int64_t in = sizes[c][0], out = sizes[c][1], rows = 3;
    accel__axis ax;
    ck_assert_int_eq(accel__axis_init(&ax, in, out), ACCEL_OK);
    split[ax.w8 ? ax.w8_parts : 0]++;
    blocks[ax.wt ? ax.wt_parts : 0]++;
    uint8_t *src = malloc((size_t)(in * rows)), *want = malloc((size_t)(out * rows)),
            *got = malloc((size_t)(out * rows));
    for (int64_t i = 0; i < in * rows; i++) {
      seed = seed * 1664525u + 1013904223u;
      src[i] = (uint8_t)(i % 97 < 40 ? (seed >> 24) : (i / 13) % 2 * 255); /* noise, and hard edges */
    }
    accel__resample_path = ACCEL__RESAMPLE_SCALAR;
    accel__resample_rows(&ax, src, in, 0, rows, want, out);
    for (int path = ACCEL__RESAMPLE_SSE2; path <= ACCEL__RESAMPLE_VBMI; path++) {
      if (!accel__resample_path_available(path)) continue;
      accel__resample_path = path;
      memset(got, 0xA5, (size_t)(out * rows));
      accel__resample_rows(&ax, src, in, 0, rows, got, out);
      ck_assert_msg(memcmp(got, want, (size_t)(out * rows)) == 0, "%lld -> %lld: path %d differs from the scalar loop",
                    (long long)in, (long long)out, path);
    }
    accel__resample_path = ACCEL__RESAMPLE_AUTO;
    accel__axis_free(&ax);
    free(src);
    free(want);
    free(got);
  }
  /* both splits of the long kernels ran (2560 -> 8: two parts; 2560 -> 32: three) */
  ck_assert_int_gt(split[2], 0);
  ck_assert_int_gt(split[3], 0);
  /* and both of the short kernels' blocks (downscales: three parts; upscales, weights near 2^22: four) */
  ck_assert_int_gt(blocks[3], 0);
  ck_assert_int_gt(blocks[4], 0);
}
END_TEST

#if EXPECT_CUDA
/* The CUDA batch pipeline (decode rounds, grouping, arena layout, one
 * upload, every kernel's per-thread code, downloads) run on the host through
 * a test backend, against the CPU backend. Only the launch geometry and the
 * CUDA calls themselves are left to the GPU suite. */
static void compare_pipelines(const char **paths, size_t n, int size, int binbits, const int whash[4], log_capture *cap,
                              uint64_t *fallbacks) {
  const int highfreq = whash[0]; /* phash's factor, then whash's image_scale, keep_max_ll and mode */
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_ALLOW, cap);
  accel_ctx *cpu = cpu_ctx();
  accel_hash_options h = hash_options(ALL6, 6);
  if (size & (size - 1)) h.nkinds = 5; /* whash needs a power of two: drop it (it is last but colorhash) */
  if (h.nkinds == 5) h.kinds[4] = ACCEL_HASH_COLORHASH;
  h.hash_size = size;
  h.color_binbits = binbits;
  h.phash_highfreq_factor = highfreq;
  h.whash_image_scale = whash[1];
  h.whash_keep_max_ll = whash[2];
  h.whash_mode = whash[3];
  size_t slot;
  ck_assert_int_eq(accel_hash_slot_bytes(&h, &slot), ACCEL_OK);
  uint8_t *a = malloc(n * 6 * slot), *b = malloc(n * 6 * slot);
  accel_status sa[MAX_ROWS], sb[MAX_ROWS];
  ck_assert_int_eq(accel_hash_files(gpu, paths, n, &h, a, slot, sa), ACCEL_OK);
  ck_assert_int_eq(accel_hash_files(cpu, paths, n, &h, b, slot, sb), ACCEL_OK);
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg(sa[i] == sb[i], "%s: %s vs %s", paths[i], accel_status_string(sa[i]), accel_status_string(sb[i]));
    for (uint32_t k = 0; k < h.nkinds; k++) {
      const uint8_t *x = a + (i * h.nkinds + k) * slot, *y = b + (i * h.nkinds + k) * slot;
      if (memcmp(x, y, slot) == 0) continue;
      uint32_t nbits;
      accel_hash_kind_bits(&h, h.kinds[k], &nbits);
      char hx[ACCEL_HASH_MAX_BYTES * 2 + 1], hy[ACCEL_HASH_MAX_BYTES * 2 + 1];
      accel_hash_to_hex(x, nbits, hx, sizeof hx);
      accel_hash_to_hex(y, nbits, hy, sizeof hy);
      ck_abort_msg("%s: %s size %d binbits %d highfreq %d: GPU pipeline %s, CPU %s", paths[i],
                   accel_hash_kind_name(h.kinds[k]), size, binbits, highfreq, hx, hy);
    }
  }
  accel_stage_stats st;
  accel_stage_stats_init(&st, sizeof st);
  ck_assert_int_eq(accel_ctx_stats_find(gpu, "hash.batch", &st), ACCEL_OK);
  *fallbacks = st.fallbacks;
  free(a);
  free(b);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
}

START_TEST(gpu_pipeline_equals_cpu_in_emulation) {
  static ref_table t;
  memset(&t, 0, sizeof t);
  load_tsv(&t, data_path("hash/reference.tsv"));
  load_tsv(&t, data_path("hash/generated.tsv"));
  const char *paths[MAX_ROWS];
  static char buf[MAX_ROWS][512];
  for (int i = 0; i < t.n; i++) {
    snprintf(buf[i], sizeof buf[i], "%s/%s", data_path("hash"), t.rows[i].col[0]);
    paths[i] = buf[i];
  }
  const struct {
    uint64_t budget;
    int size, binbits, opt[4]; /* highfreq_factor, whash_image_scale, whash_keep_max_ll, whash_mode */
  } runs[] = {
      {(uint64_t)1 << 30, 8, 3, {0, 0, 0}},   /* everything in large groups */
      {(uint64_t)1 << 30, 16, 3, {0, 0, 0}},  /* 256-bit hashes, 64x64 DCT */
      {(uint64_t)6 << 20, 8, 3, {0, 0, 0}},   /* a small budget: many groups, some of one image */
      {(uint64_t)1 << 30, 6, 4, {0, 0, 0}},   /* a non-power-of-two size: radix-3 and radix-2 passes */
      {(uint64_t)1 << 30, 7, 3, {5, 0, 0}},   /* highfreq_factor 5: radix 5 and the generic pass (7) */
      {(uint64_t)1 << 30, 13, 3, {1, 0, 0}},  /* highfreq_factor 1: the generic pass alone (13) */
      {(uint64_t)1 << 30, 8, 3, {0, 64, 1}},  /* whash at image_scale 64, keeping the coarsest approximation */
      {(uint64_t)1 << 30, 4, 3, {0, 512, 0}}, /* whash at image_scale 512 (upscaling small images) */
      {(uint64_t)1 << 30, 128, 3, {0, 0, 0}}, /* 16384-bit hashes, a 512-point DCT */
      /* whash db4: images below image_scale 64 refused as on the CPU; explicit scales, some below 8 x size */
      {(uint64_t)1 << 30, 8, 3, {0, 0, 0, ACCEL_HASH_WHASH_DB4}},
      {(uint64_t)1 << 30, 2, 3, {0, 0, 1, ACCEL_HASH_WHASH_DB4}},
      {(uint64_t)1 << 30, 4, 3, {0, 128, 0, ACCEL_HASH_WHASH_DB4}},
      {(uint64_t)1 << 30, 8, 3, {0, 16, 0, ACCEL_HASH_WHASH_DB4}},
      {(uint64_t)1 << 30, 2, 3, {0, 4, 1, ACCEL_HASH_WHASH_DB4}},
      {(uint64_t)6 << 20, 4, 3, {0, 0, 0, ACCEL_HASH_WHASH_DB4}}, /* small groups */
  };
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    set_emulated_gpu_budget(runs[r].budget);
    log_capture cap = {0};
    uint64_t fallbacks = 0;
    compare_pipelines(paths, (size_t)t.n, runs[r].size, runs[r].binbits, runs[r].opt, &cap, &fallbacks);
    ck_assert_msg(fallbacks == 0, "run %zu fell back to the CPU: %s", r, cap.n ? cap.line[0] : "");
  }
  /* a budget no image fits in: the one fallback policy, and still the right answer */
  set_emulated_gpu_budget(64 << 10);
  log_capture cap = {0};
  uint64_t fallbacks = 0;
  compare_pipelines(paths, 4, 8, 3, (const int[4]){0, 0, 0, 0}, &cap, &fallbacks);
  ck_assert_uint_eq(fallbacks, 1);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "[GPU] hash.batch failed: "), 1);
  ck_assert_int_eq(capture_count_containing(&cap, ACCEL_LOG_WARN, "device memory"), 1);
  set_emulated_gpu_budget(0);
}
END_TEST

/* A batch of the committed inputs and the CPU's hashes of it. */
typedef struct hash_case {
  const char *paths[8];
  size_t n, slot;
  accel_hash_options h;
  uint8_t expect[8 * 6 * ACCEL_HASH_MAX_BYTES];
  accel_status expect_status[8];
} hash_case;

static accel_status hash_on_gpu(accel_ctx *ctx, void *user) {
  hash_case *c = user;
  uint8_t out[sizeof c->expect];
  accel_status st[8];
  const accel_status s = accel_hash_files(ctx, c->paths, c->n, &c->h, out, c->slot, st);
  if (!s) {
    ck_assert(memcmp(st, c->expect_status, c->n * sizeof st[0]) == 0);
    ck_assert(memcmp(out, c->expect, c->n * c->h.nkinds * c->slot) == 0);
  }
  return s;
}

static void hash_case_init(hash_case *c) {
  static char buf[8][512];
  /* colour and gray, JPEG and PNG, one that fails to decode */
  static const char *const names[] = {"hopper.jpg", "hopper_gray.jpg", "palette_color.png", "hopper__quarter.png",
                                      "broken.png"};
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(buf[i], sizeof buf[i], "%s/%s", data_path("hash"), names[i]);
    c->paths[c->n++] = buf[i];
  }
  c->h = hash_options(ALL6, 6);
  ck_assert_int_eq(accel_hash_slot_bytes(&c->h, &c->slot), ACCEL_OK);
  accel_ctx *cpu = cpu_ctx();
  ck_assert_int_eq(accel_hash_files(cpu, c->paths, c->n, &c->h, c->expect, c->slot, c->expect_status), ACCEL_OK);
  accel_ctx_destroy(cpu);
}

/* Every CUDA call of the batch is checked: a failure at any of them falls
 * back with the error's name (one group, then groups of an image or two). */
START_TEST(gpu_pipeline_failures_fall_back_in_emulation) {
  static hash_case c;
  hash_case_init(&c);
  const uint64_t budgets[] = {(uint64_t)1 << 30, ((uint64_t)1 << 20) + 200000};
  for (int b = 0; b < 2; b++) {
    set_emulated_gpu_budget(budgets[b]);
    ck_assert_int_ge(emulated_fault_sweep("hash.batch", hash_on_gpu, &c), 8);
  }
  set_emulated_gpu_budget(0);
}
END_TEST

/* The CUDA calls (launches and copies) of one batch of n copies of a small
 * image on the emulated GPU, checked against the CPU's hashes. */
static int64_t batch_calls(size_t n, const accel_hash_options *h, size_t slot) {
  static char path[512];
  snprintf(path, sizeof path, "%s/hopper__quarter.png", data_path("hash"));
  const char **paths = malloc(n * sizeof *paths);
  for (size_t i = 0; i < n; i++) paths[i] = path;
  uint8_t *out = malloc(n * h->nkinds * slot), *want = malloc(n * h->nkinds * slot);
  accel_status *st = malloc(n * sizeof *st);
  accel_ctx *gpu = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, NULL), *cpu = cpu_ctx();
  const int64_t many = (int64_t)1 << 40;
  accel__cuda_fault_at = many;
  ck_assert_msg(accel_hash_files(gpu, paths, n, h, out, slot, st) == ACCEL_OK, "%s", accel_last_error(gpu));
  const int64_t calls = many - accel__cuda_fault_at;
  accel__cuda_fault_at = -1;
  ck_assert_int_eq(accel_hash_files(cpu, paths, n, h, want, slot, st), ACCEL_OK);
  ck_assert_mem_eq(out, want, n * h->nkinds * slot);
  accel_ctx_destroy(gpu);
  accel_ctx_destroy(cpu);
  free(paths);
  free(out);
  free(want);
  free(st);
  return calls;
}

/* Small images share a group: a batch of 300 thumbnails makes about the
 * CUDA calls of one image, not one group per decoded batch of 8 or so
 * (launches would cost more than the work). */
START_TEST(gpu_small_images_share_a_group_in_emulation) {
  set_emulated_gpu_budget((uint64_t)1 << 30);
  const accel_hash_options h = hash_options(ALL6, 6);
  size_t slot = 0;
  ck_assert_int_eq(accel_hash_slot_bytes(&h, &slot), ACCEL_OK);
  const int64_t one = batch_calls(1, &h, slot), many = batch_calls(300, &h, slot);
  ck_assert_msg(many <= one + one / 2, "300 small images took %lld CUDA calls, one took %lld: groups too small",
                (long long)many, (long long)one);
  set_emulated_gpu_budget(0);
}
END_TEST

/* A failed CUDA call (here the first call of a batch, under DENY) is the
 * failure of its own stage only: it must not come back as the error of the
 * next, unrelated stage on the same thread. */
START_TEST(a_failed_call_never_fails_the_next_stage_in_emulation) {
  static hash_case c;
  hash_case_init(&c);
  for (int64_t at = 0; at < 4; at++) {
    log_capture cap = {0};
    accel_ctx *ctx = make_emulated_gpu_ctx(ACCEL_FALLBACK_DENY, &cap);
    accel__cuda_fault_error = CUDA_ERROR_LAUNCH_FAILURE;
    accel__cuda_fault_at = at;
    ck_assert_int_ne(hash_on_gpu(ctx, &c), ACCEL_OK);
    accel__cuda_fault_at = -1;
    const accel_status s = hash_on_gpu(ctx, &c);
    ck_assert_msg(s == ACCEL_OK, "after a failed call %lld, the next batch failed too: %s", (long long)at,
                  accel_last_error(ctx));
    accel_ctx_destroy(ctx);
  }
}
END_TEST
#endif

Suite *suite_hash(void) {
  TCase *tc = new_case("hash", 120, NULL, NULL);
  tcase_add_test(tc, resample_paths_equal_the_scalar_loop);
  tcase_add_test(tc, vertical_paths_equal_the_scalar_loop);
  tcase_add_test(tc, whash_plane_equals_the_whole_image_transform);
  tcase_add_test(tc, axis_cache_keeps_what_it_handed_out);
  tcase_add_test(tc, band_fed_resizes_equal_the_whole_plane);
  tcase_add_test(tc, whash_db4_matches_imagehash);
  tcase_add_test(tc, committed_subset_matches_imagehash);
  tcase_add_test(tc, decoded_pixels_match_pillow);
  tcase_add_test(tc, png_robustness_follows_pillow);
  tcase_add_test(tc, truncated_and_corrupt_inputs_never_crash);
  tcase_add_test(tc, pixel_limit_guards_decompression_bombs);
  tcase_add_test(tc, hostile_images_fail_cleanly);
  tcase_add_test(tc, one_broken_input_never_fails_the_batch);
  tcase_add_test(tc, progress_reports_and_cancels);
  tcase_add_test(tc, buffers_and_arrays_hash_like_files);
  tcase_add_test(tc, fast_mode_changes_only_jpegs);
  tcase_add_test(tc, options_and_sizes_are_validated);
  tcase_add_test(tc, kind_bits_follow_the_options);
  tcase_add_test(tc, hex_and_distance_follow_imagehash);
  tcase_add_test(tc, saturation_table_equals_the_formula_everywhere);
#if EXPECT_CUDA
  tcase_add_test(tc, gpu_pipeline_equals_cpu_in_emulation);
  tcase_add_test(tc, gpu_pipeline_failures_fall_back_in_emulation);
  tcase_add_test(tc, gpu_small_images_share_a_group_in_emulation);
  tcase_add_test(tc, a_failed_call_never_fails_the_next_stage_in_emulation);
#endif
  return suite_of("hash", tc);
}

START_TEST(shared_corpus_meets_the_acceptance_rule) {
  static ref_table t;
  memset(&t, 0, sizeof t);
  load_tsv(&t, SHARED_DATA_DIR "/hash/reference.tsv");
  ck_assert_int_ge(t.n, 150);
  check_corpus(SHARED_DATA_DIR "/hash/images", &t, false);
}
END_TEST

static Suite *suite_hash_shared(void) {
  return single_test_suite("hash_shared", "reference", 600, shared_corpus_meets_the_acceptance_rule, 1);
}

static const shared_run HASH_SHARED = {"--shared", SHARED_DATA_DIR "/hash/reference.tsv",
                                       SHARED_DATA_DIR "/hash/reference.tsv", suite_hash_shared};

ACCEL_TEST_MAIN_SHARED(suite_hash, HASH_SHARED)
