/* suite_io: NPY against files numpy wrote (and byte-identical output), PNM,
 * TIFF (GeoTIFF rasters; images against files other writers made), error
 * paths, atomic saves.
 *
 *   test_io            the suite
 *   test_io --shared   the registration images of ../shared/data/reg (exit
 *                      77, skipped, when ../shared is absent)
 */
#include "testutil.h"

#include "accel_config.h"
#if ACCEL_HAVE_TIFF
#include <math.h>
#include <tiffio.h>
#endif

#include "io/file.h"
#include "io/tiff.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/accel-io-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(tmpdir);
}

static const char *fixture(const char *name) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/npy/%s", test_data_dir(), name);
  return path;
}

static const char *tmp(const char *name) {
  static char path[2][512];
  static int k;
  k ^= 1;
  snprintf(path[k], sizeof path[k], "%s/%s", tmpdir, name);
  return path[k];
}

static accel_array load_ok(const char *path, accel_buffer **b) {
  accel_status s = accel_npy_load(NULL, path, b);
  ck_assert_msg(s == ACCEL_OK, "%s: %s", path, accel_last_error(NULL));
  accel_array a;
  accel_buffer_view(*b, &a);
  return a;
}

static size_t file_bytes(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

START_TEST(reads_what_numpy_wrote) {
  accel_buffer *b;
  accel_array a = load_ok(fixture("i16_3x4.npy"), &b);
  ck_assert_int_eq(a.dtype, ACCEL_DTYPE_I16);
  ck_assert_int_eq(a.ndim, 2);
  ck_assert_int_eq(a.shape[0], 3);
  ck_assert_int_eq(a.shape[1], 4);
  for (int i = 0; i < 12; i++) ck_assert_int_eq(((int16_t *)a.data)[i], i - 5);
  accel_buffer_destroy(b);

  a = load_ok(fixture("f32_5.npy"), &b);
  ck_assert_int_eq(a.dtype, ACCEL_DTYPE_F32);
  const float f[5] = {0.5f, -1.25f, 3e38f, -0.0f, 7.0f};
  ck_assert_mem_eq(a.data, f, sizeof f);
  accel_buffer_destroy(b);

  a = load_ok(fixture("be_u16_2x3.npy"), &b); /* big-endian on disk */
  const uint16_t be[6] = {1, 258, 65535, 0, 4096, 43981};
  ck_assert_int_eq(a.dtype, ACCEL_DTYPE_U16);
  ck_assert_mem_eq(a.data, be, sizeof be);
  accel_buffer_destroy(b);

  a = load_ok(fixture("bool_4.npy"), &b);
  ck_assert_int_eq(a.dtype, ACCEL_DTYPE_U8);
  ck_assert_mem_eq(a.data, "\1\0\0\1", 4);
  accel_buffer_destroy(b);

  a = load_ok(fixture("f64_scalar.npy"), &b);
  ck_assert_int_eq(a.ndim, 0);
  ck_assert(*(double *)a.data == 2.5);
  accel_buffer_destroy(b);

  a = load_ok(fixture("v2_u8_2x2.npy"), &b); /* format version 2.0 */
  ck_assert_mem_eq(a.data, "\1\2\3\4", 4);
  accel_buffer_destroy(b);

  a = load_ok(fixture("i64_empty_0x3.npy"), &b);
  ck_assert_int_eq(a.shape[0], 0);
  ck_assert_int_eq(a.shape[1], 3);
  accel_buffer_destroy(b);
}
END_TEST

START_TEST(refuses_what_it_cannot_read) {
  static const struct {
    const char *file;
    accel_status status;
    const char *needle;
  } cases[] = {
      {"fortran_2x3.npy", ACCEL_ERR_FORMAT, "Fortran"},
      {"structured.npy", ACCEL_ERR_FORMAT, "structured"},
      {"c64.npy", ACCEL_ERR_FORMAT, "c8"},
      {"truncated.npy", ACCEL_ERR_FORMAT, "truncated"},
      {"not_npy.npy", ACCEL_ERR_FORMAT, "not a .npy"},
      {"does_not_exist.npy", ACCEL_ERR_IO, "cannot open"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    accel_buffer *b = (accel_buffer *)0x1;
    accel_status s = accel_npy_load(NULL, fixture(cases[i].file), &b);
    ck_assert_msg(s == cases[i].status, "%s: %s", cases[i].file, accel_status_string(s));
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(accel_last_error(NULL), cases[i].needle), "%s: %s", cases[i].file, accel_last_error(NULL));
  }
  accel_buffer *b;
  ck_assert_int_eq(accel_npy_load(NULL, test_data_dir(), &b), ACCEL_ERR_IO); /* a directory */
  ck_assert_int_eq(accel_npy_load(NULL, NULL, &b), ACCEL_ERR_INVALID_ARG);
}
END_TEST

START_TEST(every_truncation_is_an_error_not_a_crash) {
  unsigned char full[256];
  size_t n = file_bytes(fixture("u8_2x3x4.npy"), full, sizeof full);
  for (size_t cut = 0; cut < n; cut++) {
    FILE *f = fopen(tmp("cut.npy"), "wb");
    fwrite(full, 1, cut, f);
    fclose(f);
    accel_buffer *b = NULL;
    ck_assert_msg(accel_npy_load(NULL, tmp("cut.npy"), &b) == ACCEL_ERR_FORMAT, "cut at %zu", cut);
    ck_assert_ptr_null(b);
  }
  /* a header that announces a huge array must not allocate it */
  FILE *f = fopen(tmp("huge.npy"), "wb");
  const char hdr[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 100000), }";
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(sizeof hdr - 1), 0};
  fwrite(pre, 1, 10, f);
  fwrite(hdr, 1, sizeof hdr - 1, f);
  fclose(f);
  accel_buffer *b;
  ck_assert_int_eq(accel_npy_load(NULL, tmp("huge.npy"), &b), ACCEL_ERR_FORMAT);
}
END_TEST

START_TEST(writes_byte_identical_to_numpy) {
  const char *names[] = {"i16_3x4.npy", "f32_5.npy", "u8_2x3x4.npy", "f64_scalar.npy", "i64_empty_0x3.npy"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    accel_buffer *b;
    accel_array a = load_ok(fixture(names[i]), &b);
    ck_assert_int_eq(accel_npy_save(NULL, tmp("out.npy"), &a), ACCEL_OK);
    unsigned char want[512], got[512];
    size_t nw = file_bytes(fixture(names[i]), want, sizeof want), ng = file_bytes(tmp("out.npy"), got, sizeof got);
    ck_assert_msg(nw == ng && memcmp(want, got, nw) == 0, "%s differs from numpy's bytes", names[i]);
    accel_buffer_destroy(b);
  }
}
END_TEST

START_TEST(saves_strided_views_in_c_order) {
  int32_t m[3][5];
  for (int y = 0; y < 3; y++)
    for (int x = 0; x < 5; x++) m[y][x] = y * 10 + x;
  accel_array t = {.data = m, .dtype = ACCEL_DTYPE_I32, .ndim = 2, .shape = {5, 3}, .strides = {4, 20}}; /* transpose */
  ck_assert_int_eq(accel_npy_save(NULL, tmp("t.npy"), &t), ACCEL_OK);
  accel_buffer *b;
  accel_array a = load_ok(tmp("t.npy"), &b);
  ck_assert_int_eq(a.shape[0], 5);
  ck_assert_int_eq(a.shape[1], 3);
  for (int y = 0; y < 5; y++)
    for (int x = 0; x < 3; x++) ck_assert_int_eq(((int32_t *)a.data)[y * 3 + x], x * 10 + y);
  accel_buffer_destroy(b);
  accel_array one = {.data = &m[0][4], .dtype = ACCEL_DTYPE_I32, .ndim = 1, .shape = {5}, .strides = {-4}};
  ck_assert_int_eq(accel_npy_save(NULL, tmp("r.npy"), &one), ACCEL_OK);
  a = load_ok(tmp("r.npy"), &b);
  for (int x = 0; x < 5; x++) ck_assert_int_eq(((int32_t *)a.data)[x], 4 - x);
  accel_buffer_destroy(b);
}
END_TEST

static int count_files(void) {
  int n = 0;
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  while ((e = readdir(d))) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

START_TEST(failed_save_keeps_the_previous_file) {
  uint8_t small[4] = {9, 8, 7, 6};
  accel_array a;
  accel_array_init(&a, small, ACCEL_DTYPE_U8, 1, (int64_t[]){4});
  ck_assert_int_eq(accel_npy_save(NULL, tmp("keep.npy"), &a), ACCEL_OK);
  /* make the next saves fail part-way with a file size limit: once in a write, once at
   * flush time (data small enough to sit in stdio's buffer). Check reports through a file,
   * so no ck_assert may run until the limit is lifted. */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved, rl;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
  uint8_t *big = calloc(1, 100000);
  accel_array b1, b2;
  accel_array_init(&b1, big, ACCEL_DTYPE_U8, 1, (int64_t[]){100000});
  accel_array_init(&b2, big, ACCEL_DTYPE_U8, 1, (int64_t[]){1000});
  rl = saved;
  rl.rlim_cur = 4096;
  int lim1 = setrlimit(RLIMIT_FSIZE, &rl);
  accel_status in_write = accel_npy_save(NULL, tmp("keep.npy"), &b1);
  rl.rlim_cur = 200;
  int lim2 = setrlimit(RLIMIT_FSIZE, &rl);
  accel_status at_flush = accel_npy_save(NULL, tmp("keep.npy"), &b2);
  int restored = setrlimit(RLIMIT_FSIZE, &saved);
  free(big);
  ck_assert_int_eq(lim1, 0);
  ck_assert_int_eq(lim2, 0);
  ck_assert_int_eq(restored, 0);
  ck_assert_int_eq(in_write, ACCEL_ERR_IO);
  ck_assert_int_eq(at_flush, ACCEL_ERR_IO);
  accel_buffer *back;
  accel_array r = load_ok(tmp("keep.npy"), &back);
  ck_assert_int_eq(r.shape[0], 4);
  ck_assert_mem_eq(r.data, small, 4);
  accel_buffer_destroy(back);
  ck_assert_int_eq(count_files(), 1); /* no temporary file left behind */
  ck_assert_int_eq(accel_npy_save(NULL, "/nonexistent-dir/x.npy", &a), ACCEL_ERR_IO);
}
END_TEST

static accel_ctx *ctx_with_pixel_limit(uint64_t max_pixels) {
  accel_ctx_options o = ctx_options(ACCEL_BACKEND_CPU);
  o.max_pixels = max_pixels;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
  return ctx;
}

START_TEST(pnm_obeys_the_pixel_limit) {
  char path[1024];
  snprintf(path, sizeof path, "%s/gray/chelsea_37x23.ppm", test_data_dir());
  accel_ctx *ctx = ctx_with_pixel_limit(37 * 23 - 1);
  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_pnm_load(ctx, path, &b), ACCEL_ERR_LIMIT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "pixel limit"));
  ck_assert_ptr_null(b);
  accel_ctx_destroy(ctx);
  ctx = ctx_with_pixel_limit(37 * 23);
  ck_assert_int_eq(accel_pnm_load(ctx, path, &b), ACCEL_OK);
  accel_buffer_destroy(b);
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ atomic saves */

enum { SAVE_NPY, SAVE_RAW, SAVE_PNM, SAVE_TIFF, SAVE_TIFF_IMAGE, SAVE_INDEX, SAVE_NETWORK, SAVE_KINDS };
static const char *const SAVE_NAMES[SAVE_KINDS] = {"a.npy", "a.raw", "a.pgm", "a.tif", "b.tif", "a.idx", "a.json"};

/* What the library writes, one kind at a time, from fixed content. */
typedef struct save_inputs {
  accel_ctx *ctx;
  uint8_t image[64 * 64];
  accel_index *index;
  accel_ct_network *network;
} save_inputs;

static void make_save_inputs_on(save_inputs *in, accel_ctx *ctx) {
  fill_random(in->image, sizeof in->image, 7);
  in->ctx = ctx;
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  ck_assert_int_eq(accel_index_create(ctx, &io, &in->index), ACCEL_OK);
  uint64_t ids[300], codes[300];
  for (int i = 0; i < 300; i++) ids[i] = (uint64_t)i + 1, codes[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
  ck_assert_int_eq(accel_index_add(in->index, 300, ids, codes, NULL, NULL), ACCEL_OK);
  int32_t labels[4 * 8 * 8];
  float edt[4 * 8 * 8];
  for (int i = 0; i < 256; i++) labels[i] = 1 + (i % 8) / 2 + 4 * (i / 64), edt[i] = (float)(i % 5);
  accel_array l, e;
  accel_array_init(&l, labels, ACCEL_DTYPE_I32, 3, (int64_t[]){4, 8, 8});
  accel_array_init(&e, edt, ACCEL_DTYPE_F32, 3, (int64_t[]){4, 8, 8});
  ck_assert_int_eq(accel_ct_network_build(ctx, &l, &e, NULL, &in->network), ACCEL_OK);
}

static void make_save_inputs(save_inputs *in) { make_save_inputs_on(in, cpu_ctx()); }

static void free_save_inputs(save_inputs *in) {
  accel_index_destroy(in->index);
  accel_ct_network_destroy(in->network);
  accel_ctx_destroy(in->ctx);
}

static accel_status save_kind(save_inputs *in, int kind, const char *path) {
  accel_array a;
  accel_array_init(&a, in->image, ACCEL_DTYPE_U8, 2, (int64_t[]){64, 64});
  switch (kind) {
  case SAVE_NPY: return accel_npy_save(in->ctx, path, &a);
  case SAVE_RAW: return accel_raw_save(in->ctx, path, &a);
  case SAVE_PNM: return accel_pnm_save(in->ctx, path, &a);
  case SAVE_TIFF: return accel_tiff_save(in->ctx, path, &a, NULL);
  case SAVE_TIFF_IMAGE: {
    accel_tiff_save_options o;
    accel_tiff_save_options_init(&o, sizeof o);
    o.compression = ACCEL_TIFF_COMPRESSION_DEFLATE, o.tile_size = 32;
    return accel_tiff_save_image(in->ctx, path, &a, &o);
  }
  case SAVE_INDEX: return accel_index_save(in->index, path); /* the index's context */
  default: return accel_ct_network_save_json(in->ctx, in->network, path);
  }
}

static bool skip_kind(int kind) { return (kind == SAVE_TIFF || kind == SAVE_TIFF_IMAGE) && !ACCEL_HAVE_TIFF; }

static long dir_entries(const char *dir) {
  long n = 0;
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

/* A full disk (here: a file size limit, EFBIG) in the middle of the data or
 * at the very end (TIFF writes its directory when the file is closed, and a
 * failure there used to be ignored: a truncated file replaced the good one
 * and the save reported success). Every saver reports ACCEL_ERR_IO with the
 * system's reason, leaves the previous file byte for byte, and no temporary. */
START_TEST(full_disks_never_replace_a_good_file) {
  save_inputs in;
  make_save_inputs(&in);
  signal(SIGXFSZ, SIG_IGN);
  for (int kind = 0; kind < SAVE_KINDS; kind++) {
    if (skip_kind(kind)) continue;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/k%d", tmpdir, kind);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    snprintf(path, sizeof path, "%s/%s", dir, SAVE_NAMES[kind]);
    ck_assert_msg(save_kind(&in, kind, path) == ACCEL_OK, "%s: %s", SAVE_NAMES[kind], accel_last_error(in.ctx));
    static unsigned char good[1 << 16], now[1 << 16];
    const size_t size = file_bytes(path, good, sizeof good);
    ck_assert_uint_gt(size, 64);
    const rlim_t limits[2] = {size / 2, size - 1};
    for (int k = 0; k < 2; k++) {
      struct rlimit saved, rl;
      ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
      rl = saved;
      rl.rlim_cur = limits[k];
      const int set = setrlimit(RLIMIT_FSIZE, &rl);
      const accel_status st = save_kind(&in, kind, path); /* no ck_assert until the limit is lifted */
      const int restored = setrlimit(RLIMIT_FSIZE, &saved);
      ck_assert_int_eq(set, 0);
      ck_assert_int_eq(restored, 0);
      ck_assert_msg(st == ACCEL_ERR_IO, "%s, limit %lu: %s", SAVE_NAMES[kind], (unsigned long)limits[k],
                    accel_status_string(st));
      const char *why = accel_last_error(in.ctx);
      ck_assert_msg(strstr(why, path) && strstr(why, strerror(EFBIG)), "%s: %s", SAVE_NAMES[kind], why);
      ck_assert_uint_eq(file_bytes(path, now, sizeof now), size);
      ck_assert_mem_eq(now, good, size);
      ck_assert_int_eq(dir_entries(dir), 1);
    }
  }
  free_save_inputs(&in);
}
END_TEST

/* New files get 0666 less the umask, as files any program creates (TIFF
 * saves were 0600: mkstemp's mode). */
START_TEST(saved_files_take_the_umask) {
  save_inputs in;
  make_save_inputs(&in);
  const mode_t masks[3] = {022, 027, 0};
  for (int m = 0; m < 3; m++) {
    const mode_t old = umask(masks[m]);
    for (int kind = 0; kind < SAVE_KINDS; kind++) {
      if (skip_kind(kind)) continue;
      char path[600];
      snprintf(path, sizeof path, "%s/m%o-%s", tmpdir, (unsigned)masks[m], SAVE_NAMES[kind]);
      ck_assert_msg(save_kind(&in, kind, path) == ACCEL_OK, "%s", accel_last_error(in.ctx));
      struct stat st;
      ck_assert_int_eq(stat(path, &st), 0);
      ck_assert_msg((st.st_mode & 0777) == (0666 & ~masks[m]), "%s: mode %o", path, (unsigned)(st.st_mode & 0777));
    }
    umask(old);
  }
  free_save_inputs(&in);
}
END_TEST

/* The sync policy decides which saves are fsync'd (the file and its
 * directory: two calls), counted by the writer: by default index files
 * only; ACCEL_SYNC_ALL every kind; ACCEL_SYNC_NONE none. Every save is
 * complete and loads back either way; an unknown policy is refused. */
START_TEST(saves_sync_as_the_policy_says) {
  const accel_sync_policy policies[3] = {ACCEL_SYNC_INDEX, ACCEL_SYNC_ALL, ACCEL_SYNC_NONE};
  for (int p = 0; p < 3; p++) {
    accel_ctx_options o;
    accel_ctx_options_init(&o, sizeof o);
    ck_assert_int_eq(o.sync, ACCEL_SYNC_INDEX);
    o.backend = ACCEL_BACKEND_CPU, o.sync = policies[p];
    accel_ctx *ctx;
    ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_OK);
    save_inputs in;
    make_save_inputs_on(&in, ctx);
    for (int kind = 0; kind < SAVE_KINDS; kind++) {
      if (skip_kind(kind)) continue;
      char path[600];
      snprintf(path, sizeof path, "%s/p%d-%s", tmpdir, p, SAVE_NAMES[kind]);
      const int64_t before = accel__atomic_syncs;
      ck_assert_msg(save_kind(&in, kind, path) == ACCEL_OK, "%s", accel_last_error(ctx));
      const bool synced = policies[p] == ACCEL_SYNC_ALL || (policies[p] == ACCEL_SYNC_INDEX && kind == SAVE_INDEX);
      ck_assert_msg(accel__atomic_syncs - before == (synced ? 2 : 0), "policy %d, %s: %lld syncs", p, SAVE_NAMES[kind],
                    (long long)(accel__atomic_syncs - before));
      struct stat st;
      ck_assert_int_eq(stat(path, &st), 0);
      ck_assert_int_gt(st.st_size, 0);
    }
    free_save_inputs(&in);
  }
  accel_ctx_options o;
  accel_ctx_options_init(&o, sizeof o);
  o.sync = (accel_sync_policy)3;
  accel_ctx *ctx = NULL;
  ck_assert_int_eq(accel_ctx_create(&o, &ctx), ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "sync policy"));
}
END_TEST

/* A process killed in the middle of a save (kill -9) leaves no temporary
 * file for good: with O_TMPFILE there is none to leave; a named temporary
 * (file systems without O_TMPFILE) is removed by the next save of the same
 * target. The previous file is untouched either way. */
static void killed_save(const char *path, bool named) {
  const pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    accel__atomic_named_only = named;
    accel__atomic_file af;
    if (accel__atomic_open(NULL, "test", path, false, &af) != ACCEL_OK) _exit(3);
    static char junk[1 << 20];
    fwrite(junk, 1, sizeof junk, af.f);
    fflush(af.f);
    raise(SIGKILL);
    _exit(4);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

START_TEST(killed_saves_leave_no_temporary) {
  uint8_t v[4] = {1, 2, 3, 4};
  accel_array a;
  accel_array_init(&a, v, ACCEL_DTYPE_U8, 1, (int64_t[]){4});
  ck_assert_int_eq(accel_npy_save(NULL, tmp("t.npy"), &a), ACCEL_OK);
  ck_assert_int_eq(count_files(), 1);
  killed_save(tmp("t.npy"), false);
  accel_buffer *b;
  accel_array r = load_ok(tmp("t.npy"), &b);
  ck_assert_mem_eq(r.data, v, 4);
  accel_buffer_destroy(b);
  ck_assert_int_le(count_files(), 2); /* 2 only where the file system has no O_TMPFILE */
  ck_assert_int_eq(accel_npy_save(NULL, tmp("t.npy"), &a), ACCEL_OK);
  ck_assert_int_eq(count_files(), 1);

  /* named temporaries, as on file systems without O_TMPFILE */
  killed_save(tmp("t.npy"), true);
  ck_assert_int_eq(count_files(), 2);
  killed_save(tmp("other.npy"), true);
  ck_assert_int_eq(count_files(), 3);
  accel__atomic_named_only = true;
  v[0] = 9;
  const accel_status st = accel_npy_save(NULL, tmp("t.npy"), &a);
  accel__atomic_named_only = false;
  ck_assert_int_eq(st, ACCEL_OK);
  ck_assert_int_eq(count_files(), 2); /* t.npy's leftover is gone; other.npy's is another target's */
  r = load_ok(tmp("t.npy"), &b);
  ck_assert_mem_eq(r.data, v, 4);
  accel_buffer_destroy(b);
  /* a save into a missing directory or onto a directory is an error, not a crash */
  ck_assert_int_eq(accel_npy_save(NULL, "/nonexistent-dir/x.npy", &a), ACCEL_ERR_IO);
  ck_assert_int_eq(accel_npy_save(NULL, tmpdir, &a), ACCEL_ERR_IO);
  char slash[600];
  snprintf(slash, sizeof slash, "%s/", tmpdir);
  ck_assert_int_eq(accel_npy_save(NULL, slash, &a), ACCEL_ERR_INVALID_ARG);
}
END_TEST

START_TEST(pnm_round_trip_and_errors) {
  accel_buffer *b = NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/gray/chelsea_37x23.ppm", test_data_dir());
  ck_assert_int_eq(accel_pnm_load(NULL, path, &b), ACCEL_OK);
  accel_array a;
  accel_buffer_view(b, &a);
  ck_assert_int_eq(a.ndim, 3);
  ck_assert_int_eq(a.shape[0], 23);
  ck_assert_int_eq(a.shape[1], 37);
  ck_assert_int_eq(a.shape[2], 3);
  ck_assert_int_eq(accel_pnm_save(NULL, tmp("c.ppm"), &a), ACCEL_OK);
  unsigned char x[4096], y[4096];
  size_t nx = file_bytes(path, x, sizeof x), ny = file_bytes(tmp("c.ppm"), y, sizeof y);
  ck_assert_uint_eq(nx, ny); /* Pillow's header is "P6\n37 23\n255\n", like ours */
  ck_assert_mem_eq(x, y, nx);
  accel_buffer_destroy(b);

  /* 16-bit PGM with a comment, built from the netpbm specification */
  FILE *f = fopen(tmp("w.pgm"), "wb");
  fputs("P5\n# made by hand\n3 2\n65535\n", f);
  const unsigned char px[12] = {0, 0, 0, 1, 1, 0, 0x0f, 0xff, 0x9c, 0x40, 0xff, 0xff};
  fwrite(px, 1, 12, f);
  fclose(f);
  ck_assert_int_eq(accel_pnm_load(NULL, tmp("w.pgm"), &b), ACCEL_OK);
  accel_buffer_view(b, &a);
  const uint16_t want[6] = {0, 1, 256, 4095, 40000, 65535};
  ck_assert_int_eq(a.dtype, ACCEL_DTYPE_U16);
  ck_assert_int_eq(a.ndim, 2);
  ck_assert_mem_eq(a.data, want, sizeof want);
  ck_assert_int_eq(accel_pnm_save(NULL, tmp("w2.pgm"), &a), ACCEL_OK);
  accel_buffer_destroy(b);
  ck_assert_int_eq(accel_pnm_load(NULL, tmp("w2.pgm"), &b), ACCEL_OK);
  accel_buffer_view(b, &a);
  ck_assert_mem_eq(a.data, want, sizeof want);
  accel_buffer_destroy(b);

  f = fopen(tmp("short.pgm"), "wb");
  fputs("P5 4 4 255\n1234", f);
  fclose(f);
  ck_assert_int_eq(accel_pnm_load(NULL, tmp("short.pgm"), &b), ACCEL_ERR_FORMAT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "truncated"));
  f = fopen(tmp("ascii.pgm"), "wb");
  fputs("P2 1 1 255\n7\n", f);
  fclose(f);
  ck_assert_int_eq(accel_pnm_load(NULL, tmp("ascii.pgm"), &b), ACCEL_ERR_FORMAT);
  f = fopen(tmp("zero.pgm"), "wb");
  fputs("P5 0 4 255\n", f);
  fclose(f);
  ck_assert_int_eq(accel_pnm_load(NULL, tmp("zero.pgm"), &b), ACCEL_ERR_FORMAT);
  float fl[4] = {0};
  accel_array_init(&a, fl, ACCEL_DTYPE_F32, 2, (int64_t[]){2, 2});
  ck_assert_int_eq(accel_pnm_save(NULL, tmp("f.pgm"), &a), ACCEL_ERR_INVALID_ARG);
}
END_TEST

#if ACCEL_HAVE_TIFF
/* A tiled int16 GeoTIFF written here with libtiff (pixel scale, GDAL no-data):
 * loads as F32 with NaN for no-data; saved with its georeferencing and
 * loaded again, the values and the pixel scale come back. */
START_TEST(geotiff_round_trip) {
  accel_buffer *b = NULL;
  /* registers libaccel's GeoTIFF tags with libtiff (a failed load does) */
  ck_assert_int_eq(accel_tiff_load(NULL, "/nonexistent.tif", &b, NULL), ACCEL_ERR_IO);
  char path[512], out[512];
  snprintf(path, sizeof path, "%s/in.tif", tmpdir);
  snprintf(out, sizeof out, "%s/out.tif", tmpdir);
  enum { W = 37, H = 21, T = 16 };
  TIFF *tif = TIFFOpen(path, "w");
  ck_assert_ptr_nonnull(tif);
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, W);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, H);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_INT);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
  TIFFSetField(tif, TIFFTAG_TILEWIDTH, T);
  TIFFSetField(tif, TIFFTAG_TILELENGTH, T);
  const double scale[3] = {0.5, 0.5, 0};
  ck_assert_int_eq(TIFFSetField(tif, 33550, 3, scale), 1);
  TIFFSetField(tif, TIFFTAG_GDAL_NODATA, "-9999");
  int16_t tile[T * T];
  for (int ty = 0; ty < H; ty += T)
    for (int tx = 0; tx < W; tx += T) {
      for (int r = 0; r < T; r++)
        for (int c = 0; c < T; c++) tile[r * T + c] = (int16_t)((ty + r) * 100 - (tx + c));
      if (ty == 0 && tx == 0) tile[3 * T + 4] = -9999;
      ck_assert_int_ge(TIFFWriteTile(tif, tile, (uint32_t)tx, (uint32_t)ty, 0, 0), 0);
    }
  TIFFClose(tif);
  accel_geo *geo = NULL;
  ck_assert_msg(accel_tiff_load(NULL, path, &b, &geo) == ACCEL_OK, "%s", accel_last_error(NULL));
  accel_array v;
  accel_buffer_view(b, &v);
  ck_assert_int_eq(v.dtype, ACCEL_DTYPE_F32);
  ck_assert_int_eq(v.shape[0], H);
  ck_assert_int_eq(v.shape[1], W);
  const float *f = v.data;
  for (int r = 0; r < H; r++)
    for (int c = 0; c < W; c++) {
      if (r == 3 && c == 4) ck_assert(isnan(f[r * W + c]));
      else ck_assert_float_eq(f[r * W + c], (float)(r * 100 - c));
    }
  double px = 0, py = 0;
  ck_assert_int_eq(accel_geo_pixel_size(geo, &px, &py), ACCEL_OK);
  ck_assert(px == 0.5 && py == 0.5);
  ck_assert_int_eq(accel_tiff_save(NULL, out, &v, geo), ACCEL_OK);
  accel_buffer *b2 = NULL;
  accel_geo *geo2 = NULL;
  ck_assert_int_eq(accel_tiff_load(NULL, out, &b2, &geo2), ACCEL_OK);
  accel_array v2;
  accel_buffer_view(b2, &v2);
  for (int i = 0; i < W * H; i++)
    ck_assert(((const float *)v2.data)[i] == f[i] || (isnan(f[i]) && isnan(((const float *)v2.data)[i])));
  px = 0;
  ck_assert_int_eq(accel_geo_pixel_size(geo2, &px, NULL), ACCEL_OK);
  ck_assert(px == 0.5);
  /* errors: not a TIFF, a 3-D array */
  accel_buffer *bad = NULL;
  char text[512];
  snprintf(text, sizeof text, "%s/not.tif", tmpdir);
  FILE *f_text = fopen(text, "w");
  ck_assert_ptr_nonnull(f_text);
  fputs("not a TIFF\n", f_text);
  fclose(f_text);
  ck_assert_int_eq(accel_tiff_load(NULL, text, &bad, NULL), ACCEL_ERR_FORMAT);
  ck_assert_ptr_null(bad);
  const int64_t shape[3] = {2, 2, 2};
  accel_buffer *cube = NULL;
  ck_assert_int_eq(accel_buffer_create(ACCEL_DTYPE_F32, 3, shape, &cube), ACCEL_OK);
  accel_array cv;
  accel_buffer_view(cube, &cv);
  ck_assert_int_eq(accel_tiff_save(NULL, out, &cv, NULL), ACCEL_ERR_INVALID_ARG);
  accel_buffer_destroy(cube);
  accel_buffer_destroy(b);
  accel_buffer_destroy(b2);
  accel_geo_destroy(geo);
  accel_geo_destroy(geo2);
}
END_TEST

static const char *bad_file(const char *name) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/bad/%s", test_data_dir(), name);
  return path;
}

/* tests/data/bad: TIFFs of a few hundred bytes declaring 30000 x 30000
 * rasters or 16 x 268435472 tiles used to allocate 3.5 to 17 GB before
 * reading a strip; truncated strips and tiles. All are refused from the
 * header, under a 1 GiB address-space limit. */
START_TEST(hostile_tiffs_are_refused_before_allocating) {
  limit_address_space(1ull << 30);
  static const char *const refused[] = {"bomb_30000.tif", "bomb_tiled_30000.tif", "tile_bomb.tif", "trunc_strip.tif",
                                        "trunc_tile.tif"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    accel_buffer *b = NULL;
    const accel_status s = accel_tiff_load(NULL, bad_file(refused[i]), &b, NULL);
    ck_assert_msg(s == ACCEL_ERR_FORMAT, "%s: %s (%s)", refused[i], accel_status_string(s), accel_last_error(NULL));
    ck_assert_ptr_null(b);
  }
  accel_buffer *b = NULL;
  ck_assert_msg(accel_tiff_load(NULL, bad_file("small_ok.tif"), &b, NULL) == ACCEL_OK, "%s", accel_last_error(NULL));
  accel_array v;
  accel_buffer_view(b, &v);
  ck_assert_int_eq(v.shape[0], 1);
  ck_assert_int_eq(v.shape[1], 2);
  accel_buffer_destroy(b);
  /* the context's pixel limit applies to rasters too */
  accel_ctx *ctx = ctx_with_pixel_limit(1);
  ck_assert_int_eq(accel_tiff_load(ctx, bad_file("small_ok.tif"), &b, NULL), ACCEL_ERR_LIMIT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "pixel limit"));
  accel_ctx_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ TIFF images */

static const char *tiff_fixture(const char *name) {
  static char path[2][1024];
  static int k;
  k ^= 1;
  snprintf(path[k], sizeof path[k], "%s/tiff/%s", test_data_dir(), name);
  return path[k];
}

/* The element (y, x, c) of an (H, W) or (H, W, C) array. */
static const uint8_t *pixel_at(const accel_array *a, int64_t y, int64_t x, int64_t c) {
  return (const uint8_t *)a->data + y * a->strides[0] + x * a->strides[1] + (a->ndim == 3 ? c * a->strides[2] : 0);
}

/* Same shape (a 2-D array equals its (H, W, 1) form), dtype and bits. */
static void expect_same_image(const accel_array *got, const accel_array *want, const char *what) {
  const int64_t c = want->ndim == 3 ? want->shape[2] : 1;
  ck_assert_msg(got->dtype == want->dtype, "%s: dtype %d, not %d", what, (int)got->dtype, (int)want->dtype);
  ck_assert_msg(got->ndim == (c == 1 ? 2 : 3), "%s: %d-D", what, (int)got->ndim);
  ck_assert_msg(got->shape[0] == want->shape[0] && got->shape[1] == want->shape[1] && (c == 1 || got->shape[2] == c),
                "%s: shape", what);
  const size_t es = accel_dtype_size(want->dtype);
  for (int64_t y = 0; y < want->shape[0]; y++)
    for (int64_t x = 0; x < want->shape[1]; x++)
      for (int64_t k = 0; k < c; k++)
        EXPECT(memcmp(pixel_at(got, y, x, k), pixel_at(want, y, x, k), es) == 0, "%s: differs at (%lld, %lld, %lld)",
               what, (long long)y, (long long)x, (long long)k);
}

/* tests/data/tiff: files written byte by byte by make_tiff.py (strips,
 * separate planes in tiles, big-endian) and converted by libtiff's tiffcp
 * (tiles, deflate/LZW/PackBits with predictors, separate planes in strips,
 * BigTIFF) load as numpy saved their pixels. */
/* Every fixture read through strips and, where the layout allows (map_min
 * 0: any size), mapped: the same pixels either way. */
START_TEST(tiff_images_from_other_writers) {
  static const char *const cases[] = {"u8_1",  "u8_2",  "u8_3",  "u8_4",  "u16_1", "u16_3",
                                      "u16_4", "f32_1", "f32_3", "i16_1", "f64_1"};
  static const char *const variants[] = {"", "_st", "_tz", "_sl", "_bb"};
  const uint64_t saved = accel__tiff_map_min;
  accel__tiff_map_min = _i ? 0 : UINT64_MAX;
  int mapped = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s.npy", cases[i]);
    accel_buffer *want_b = NULL;
    ck_assert_int_eq(accel_npy_load(NULL, tiff_fixture(name), &want_b), ACCEL_OK);
    const accel_array want = view_of(want_b);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
      snprintf(name, sizeof name, "%s%s.tif", cases[i], variants[v]);
      accel_buffer *b = NULL;
      const accel_status s = accel_tiff_load_image(NULL, tiff_fixture(name), &b);
      ck_assert_msg(s == ACCEL_OK, "%s: %s", name, accel_last_error(NULL));
      const accel_array got = view_of(b);
      expect_same_image(&got, &want, name);
      /* mapped: one strip after the other, uncompressed, little-endian, the data at a multiple of the sample
       * size (the float fixtures' start 2 bytes off) */
      const bool mappable = _i && v == 0 && strcmp(cases[i], "u16_3") != 0 && cases[i][0] != 'f';
      ck_assert_msg(accel__buffer_is_mapped(b) == mappable, "%s: mapped %d", name, (int)accel__buffer_is_mapped(b));
      mapped += accel__buffer_is_mapped(b);
      accel_buffer_destroy(b);
    }
    accel_buffer_destroy(want_b);
  }
  accel__tiff_map_min = saved;
  ck_assert_int_eq(mapped, _i ? 7 : 0);
}
END_TEST

/* FillOrder 2 (bits of each byte stored last to first), written by
 * libtiff: the same pixels read through libtiff and where mapping would
 * apply, which leaves such a file to libtiff (mapped, its bytes came back
 * with their bits reversed from files of 64 MiB on). */
START_TEST(tiff_fill_order_2_reads_the_same_mapped_or_not) {
  const char *path = tmp("fill2.tif");
  enum { W = 40, H = 12 };
  uint8_t px[H][W];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) px[y][x] = (uint8_t)(y * 37 + x * 11 + 1);
  TIFF *tif = TIFFOpen(path, "w");
  ck_assert_ptr_nonnull(tif);
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, W);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, H);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_FILLORDER, FILLORDER_LSB2MSB);
  TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 4);
  for (int y = 0; y < H; y++) ck_assert_int_eq(TIFFWriteScanline(tif, px[y], (uint32_t)y, 0), 1);
  TIFFClose(tif);
  const uint64_t saved = accel__tiff_map_min;
  for (int mapped = 0; mapped < 2; mapped++) {
    accel__tiff_map_min = mapped ? 0 : UINT64_MAX;
    accel_buffer *b = NULL;
    ck_assert_msg(accel_tiff_load_image(NULL, path, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
    const accel_array a = view_of(b);
    ck_assert(a.ndim == 2 && a.shape[0] == H && a.shape[1] == W && a.dtype == ACCEL_DTYPE_U8);
    ck_assert(!accel__buffer_is_mapped(b));
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        EXPECT(*pixel_at(&a, y, x, 0) == px[y][x], "map_min %s: (%d, %d) is %d, not %d", mapped ? "0" : "max", y, x,
               *pixel_at(&a, y, x, 0), px[y][x]);
    accel_buffer_destroy(b);
  }
  accel__tiff_map_min = saved;
}
END_TEST

/* A file of two gray images (8 x 6, then 5 x 4, values k and 100 + k),
 * written with libtiff: the first loads, and the log says that only it
 * did; a file of one image logs nothing. */
START_TEST(tiff_stack_loads_its_first_image_and_says_so) {
  const char *path = tmp("stack.tif");
  TIFF *tif = TIFFOpen(path, "w");
  ck_assert_ptr_nonnull(tif);
  for (int page = 0; page < 2; page++) {
    const uint32_t w = page ? 4 : 8, h = page ? 5 : 6;
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, h);
    uint8_t row[8];
    for (uint32_t y = 0; y < h; y++) {
      for (uint32_t x = 0; x < w; x++) row[x] = (uint8_t)((page ? 100 : 0) + y * w + x);
      ck_assert_int_eq(TIFFWriteScanline(tif, row, y, 0), 1);
    }
    ck_assert_int_eq(TIFFWriteDirectory(tif), 1);
  }
  TIFFClose(tif);
  log_capture cap = {0};
  accel_ctx *ctx = make_ctx(ACCEL_BACKEND_CPU, ACCEL_FALLBACK_DENY, &cap, ACCEL_LOG_DEBUG);
  cap.n = 0;
  accel_buffer *b = NULL;
  ck_assert_int_eq(accel_tiff_load_image(ctx, path, &b), ACCEL_OK);
  const accel_array a = view_of(b);
  ck_assert_int_eq(a.shape[0], 6);
  ck_assert_int_eq(a.shape[1], 8);
  for (int k = 0; k < 48; k++) ck_assert_int_eq(((const uint8_t *)a.data)[k], k);
  accel_buffer_destroy(b);
  ck_assert_int_eq(cap.n, 1);
  ck_assert_int_eq(
      capture_count_containing(&cap, ACCEL_LOG_WARN, "stack.tif holds more than one image; only the first is loaded"),
      1);
  cap.n = 0;
  ck_assert_int_eq(accel_tiff_load_image(ctx, tiff_fixture("u8_1.tif"), &b), ACCEL_OK);
  accel_buffer_destroy(b);
  ck_assert_int_eq(cap.n, 0);
  accel_ctx_destroy(ctx);
}
END_TEST

/* An image of every dtype the saver takes, with strides: every other
 * column of a wider buffer, rows from the bottom up. */
typedef struct strided_image {
  uint8_t *mem;
  accel_array a;
} strided_image;

static strided_image make_strided(accel_dtype dtype, int64_t h, int64_t w, int64_t c, uint32_t seed) {
  strided_image s;
  const size_t es = accel_dtype_size(dtype), row = (size_t)(2 * w * c) * es;
  s.mem = malloc(row * (size_t)h);
  ck_assert_ptr_nonnull(s.mem);
  fill_random(s.mem, row * (size_t)h, seed);
  if (dtype == ACCEL_DTYPE_F32 || dtype == ACCEL_DTYPE_F64) /* finite values and a few NaN, inf, -0 */
    for (size_t i = 0; i < row * (size_t)h / es; i++) {
      const double v = (double)((int)(i * 2654435761u % 20001) - 10000) / 7.0;
      if (es == 4) ((float *)s.mem)[i] = i % 97 == 5 ? NAN : i % 89 == 3 ? -INFINITY : i % 83 == 1 ? -0.0f : (float)v;
      else ((double *)s.mem)[i] = i % 97 == 5 ? NAN : v;
    }
  s.a.dtype = dtype;
  s.a.ndim = c == 1 && (seed & 1) ? 2 : 3;
  s.a.shape[0] = h, s.a.shape[1] = w, s.a.shape[2] = c;
  s.a.strides[0] = -(int64_t)row;
  s.a.strides[1] = (int64_t)(2 * c * es);
  s.a.strides[2] = (int64_t)es;
  s.a.data = s.mem + row * (size_t)(h - 1);
  return s;
}

/* Read a file the test's own way, through libtiff (one scanline or tile at a
 * time, contiguous samples), to check what the saver wrote. */
static void expect_file_holds(const char *path, const accel_array *want) {
  TIFF *tif = TIFFOpen(path, "r");
  ck_assert_ptr_nonnull(tif);
  uint32_t w = 0, h = 0, tw = 0, th = 0;
  uint16_t spp = 0, bits = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  TIFFGetField(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetField(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  const size_t es = accel_dtype_size(want->dtype);
  ck_assert_int_eq(w, want->shape[1]);
  ck_assert_int_eq(h, want->shape[0]);
  ck_assert_int_eq(spp, want->ndim == 3 ? want->shape[2] : 1);
  ck_assert_int_eq(bits, es * 8);
  const bool tiled = TIFFIsTiled(tif);
  if (tiled) TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw), TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
  else tw = w, th = 1;
  uint8_t *buf = malloc(tiled ? (size_t)TIFFTileSize(tif) : (size_t)TIFFScanlineSize(tif));
  ck_assert_ptr_nonnull(buf);
  for (uint32_t y = 0; y < h; y += th)
    for (uint32_t x = 0; x < w; x += tw) {
      if (tiled) ck_assert_int_ge(TIFFReadTile(tif, buf, x, y, 0, 0), 0);
      else ck_assert_int_ge(TIFFReadScanline(tif, buf, y, 0), 0);
      for (uint32_t r = 0; r < th && y + r < h; r++)
        for (uint32_t c = 0; c < tw && x + c < w; c++)
          for (uint16_t k = 0; k < spp; k++)
            EXPECT(memcmp(buf + (((size_t)r * tw + c) * spp + k) * es, pixel_at(want, y + r, x + c, k), es) == 0,
                   "%s: differs at (%u, %u, %u)", path, (unsigned)(y + r), (unsigned)(x + c), (unsigned)k);
    }
  free(buf);
  TIFFClose(tif);
}

/* The tags a saved file has: compression, predictor, tiles, BigTIFF, colour. */
static void expect_tags(const char *path, const accel_tiff_save_options *o, accel_dtype dtype, int64_t c) {
  TIFF *tif = TIFFOpen(path, "r");
  ck_assert_ptr_nonnull(tif);
  uint16_t compression = 0, predictor = 1, photometric = 0, n_extra = 0, *extra = NULL, format = 0;
  TIFFGetField(tif, TIFFTAG_COMPRESSION, &compression);
  if (compression != COMPRESSION_NONE) TIFFGetFieldDefaulted(tif, TIFFTAG_PREDICTOR, &predictor);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetField(tif, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra);
  const bool deflate = o->compression == ACCEL_TIFF_COMPRESSION_DEFLATE, fp = dtype == ACCEL_DTYPE_F32;
  ck_assert_int_eq(compression, deflate ? COMPRESSION_ADOBE_DEFLATE : COMPRESSION_NONE);
  ck_assert_int_eq(predictor, deflate && o->predictor ? (fp ? PREDICTOR_FLOATINGPOINT : PREDICTOR_HORIZONTAL) : 1);
  ck_assert_int_eq(TIFFIsTiled(tif), o->tile_size != 0);
  ck_assert_int_eq(TIFFIsBigTIFF(tif), o->bigtiff == 1);
  ck_assert_int_eq(photometric, c >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
  ck_assert_int_eq(format, fp ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
  ck_assert_int_eq(n_extra, c == 2 || c == 4);
  if (n_extra) ck_assert_int_eq(extra[0], EXTRASAMPLE_UNASSALPHA);
  if (!o->tile_size) { /* strips of about 1 MiB */
    uint32_t rps = 0;
    TIFFGetField(tif, TIFFTAG_ROWSPERSTRIP, &rps);
    const uint64_t row = (uint64_t)TIFFScanlineSize64(tif);
    ck_assert(rps >= 1 && (rps * row <= (1u << 20) || rps == 1));
  }
  TIFFClose(tif);
}

/* U8, U16, F32 x 1..4 channels x strips, tiles, deflate with and without
 * the predictor, BigTIFF: saved from strided views, the files hold the
 * pixels (read back by libtiff directly) and load back bit for bit. */
START_TEST(tiff_images_round_trip) {
  static const accel_dtype dtypes[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  enum { N_VARIANTS = 5 };
  accel_tiff_save_options opts[N_VARIANTS];
  for (int v = 0; v < N_VARIANTS; v++) ck_assert_int_eq(accel_tiff_save_options_init(&opts[v], sizeof opts[v]), 0);
  ck_assert_int_eq(opts[0].compression, ACCEL_TIFF_COMPRESSION_NONE);
  ck_assert_int_eq(opts[0].tile_size, 0);
  opts[1].compression = ACCEL_TIFF_COMPRESSION_DEFLATE;
  opts[2].tile_size = 16, opts[2].compression = ACCEL_TIFF_COMPRESSION_DEFLATE, opts[2].deflate_level = 9;
  opts[3].compression = ACCEL_TIFF_COMPRESSION_DEFLATE, opts[3].predictor = 0, opts[3].bigtiff = 1;
  opts[4].tile_size = 32, opts[4].bigtiff = 1;
  const char *path = tmp("img.tif");
  uint32_t seed = 1;
  for (size_t d = 0; d < 3; d++)
    for (int64_t c = 1; c <= 4; c++)
      for (int v = 0; v < N_VARIANTS; v++, seed++) {
        strided_image im = make_strided(dtypes[d], 37 + v, 29 + 2 * v, c, seed);
        const accel_status s = accel_tiff_save_image(NULL, path, &im.a, &opts[v]);
        ck_assert_msg(s == ACCEL_OK, "%s: %s", accel_status_string(s), accel_last_error(NULL));
        expect_tags(path, &opts[v], dtypes[d], c);
        expect_file_holds(path, &im.a);
        accel_buffer *b = NULL;
        ck_assert_msg(accel_tiff_load_image(NULL, path, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
        const accel_array got = view_of(b);
        char what[64];
        snprintf(what, sizeof what, "dtype %d, %lld channels, variant %d", (int)dtypes[d], (long long)c, v);
        expect_same_image(&got, &im.a, what);
        accel_buffer_destroy(b);
        free(im.mem);
      }
  /* the other dtypes, as stored */
  static const accel_dtype more[] = {ACCEL_DTYPE_I8, ACCEL_DTYPE_I16, ACCEL_DTYPE_U32, ACCEL_DTYPE_I32,
                                     ACCEL_DTYPE_F64};
  for (size_t d = 0; d < sizeof more / sizeof more[0]; d++) {
    strided_image im = make_strided(more[d], 20, 33, 3, seed++);
    ck_assert_int_eq(accel_tiff_save_image(NULL, path, &im.a, &opts[2]), ACCEL_OK);
    accel_buffer *b = NULL;
    ck_assert_int_eq(accel_tiff_load_image(NULL, path, &b), ACCEL_OK);
    const accel_array got = view_of(b);
    expect_same_image(&got, &im.a, accel__dtype_name(more[d]));
    accel_buffer_destroy(b);
    free(im.mem);
  }
  ck_assert_int_eq(count_files(), 1); /* no temporary left */
}
END_TEST

/* Images written in place (accel_tiff_create_image): U8, U16, F32 x 1..4
 * channels, classic and BigTIFF, one strip and several: the pixels written
 * into the mapping are what libtiff reads from the file, with the tags
 * accel_tiff_save_image writes; a writer given up leaves the previous file
 * and no temporary; refusals leave nothing either. */
START_TEST(tiff_images_written_in_place) {
  static const accel_dtype dtypes[] = {ACCEL_DTYPE_U8, ACCEL_DTYPE_U16, ACCEL_DTYPE_F32};
  accel_tiff_save_options opts[2];
  for (int v = 0; v < 2; v++) accel_tiff_save_options_init(&opts[v], sizeof opts[v]);
  opts[1].bigtiff = 1;
  char path[512]; /* tmp() reuses its buffer */
  snprintf(path, sizeof path, "%s", tmp("inplace.tif"));
  uint32_t seed = 7;
  for (size_t d = 0; d < 3; d++)
    for (int64_t c = 1; c <= 4; c++)
      for (int v = 0; v < 2; v++, seed++) {
        const bool tall = d == 2 && c == 4 && v == 0; /* 11200-byte rows: 93 rows a strip, 7 strips */
        const int64_t shape[3] = {tall ? 600 : 37 + v, tall ? 700 : 29 + 2 * v, c};
        const int32_t ndim = c == 1 ? 2 : 3;
        accel_tiff_writer *w = NULL;
        accel_array px;
        const accel_status s = accel_tiff_create_image(NULL, path, dtypes[d], ndim, shape, &opts[v], &w, &px);
        ck_assert_msg(s == ACCEL_OK, "%s: %s", accel_status_string(s), accel_last_error(NULL));
        const size_t bytes = (size_t)(shape[0] * shape[1] * c) * accel_dtype_size(dtypes[d]);
        ck_assert_int_eq(px.dtype, dtypes[d]);
        ck_assert_int_eq(px.ndim, ndim);
        ck_assert(px.shape[0] == shape[0] && px.shape[1] == shape[1]);
        uint8_t *want = malloc(bytes);
        fill_random(want, bytes, seed);
        if (dtypes[d] == ACCEL_DTYPE_F32) /* finite floats: random bytes make NaNs, which compare unequal */
          for (size_t i = 0; i < bytes / 4; i++) ((float *)(void *)want)[i] = (float)(want[4 * i] % 97) - 40.5f;
        memcpy(px.data, want, bytes);
        ck_assert_int_eq(accel_tiff_writer_commit(w), ACCEL_OK);
        const accel_array a = array_of(want, dtypes[d], ndim, shape);
        expect_tags(path, &opts[v], dtypes[d], c);
        expect_file_holds(path, &a);
        free(want);
      }
  ck_assert_int_eq(count_files(), 1);
  /* given up: the previous file stays, no temporary */
  unsigned char before[64], after[64];
  const size_t nb = file_bytes(path, before, sizeof before);
  accel_tiff_writer *w = NULL;
  accel_array px;
  ck_assert_int_eq(accel_tiff_create_image(NULL, path, ACCEL_DTYPE_U8, 2, (int64_t[]){40, 50}, NULL, &w, &px),
                   ACCEL_OK);
  memset(px.data, 9, 2000);
  accel_tiff_writer_destroy(w);
  ck_assert_uint_eq(file_bytes(path, after, sizeof after), nb);
  ck_assert_mem_eq(before, after, nb);
  ck_assert_int_eq(count_files(), 1);
  /* refusals: compressed or tiled, not an image, missing outputs */
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  o.compression = ACCEL_TIFF_COMPRESSION_DEFLATE;
  w = (accel_tiff_writer *)&o;
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4}, &o, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_ptr_null(w);
  ck_assert_ptr_null(px.data);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "uncompressed and in strips"));
  accel_tiff_save_options_init(&o, sizeof o);
  o.tile_size = 16;
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4}, &o, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 3, (int64_t[]){4, 4, 5}, NULL, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 1, (int64_t[]){4}, NULL, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 2, (int64_t[]){0, 4}, NULL, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_create_image(NULL, NULL, ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4}, NULL, &w, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_create_image(NULL, tmp("x.tif"), ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4}, NULL, NULL, &px),
                   ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(
      accel_tiff_create_image(NULL, tmp("nodir/x.tif"), ACCEL_DTYPE_U8, 2, (int64_t[]){4, 4}, NULL, &w, &px),
      ACCEL_ERR_IO);
  ck_assert_int_eq(accel_tiff_writer_commit(NULL), ACCEL_ERR_INVALID_ARG);
  accel_tiff_writer_destroy(NULL);
  ck_assert_int_eq(count_files(), 1);
  /* through a named temporary (no O_TMPFILE) */
  accel__atomic_named_only = true;
  const accel_status s = accel_tiff_create_image(NULL, path, ACCEL_DTYPE_U16, 2, (int64_t[]){30, 20}, NULL, &w, &px);
  if (!s) {
    for (int i = 0; i < 600; i++) ((uint16_t *)px.data)[i] = (uint16_t)(i * 97);
    ck_assert_int_eq(accel_tiff_writer_commit(w), ACCEL_OK);
  }
  accel__atomic_named_only = false;
  ck_assert_int_eq(s, ACCEL_OK);
  uint16_t want[600];
  for (int i = 0; i < 600; i++) want[i] = (uint16_t)(i * 97);
  const accel_array a = array_of(want, ACCEL_DTYPE_U16, 2, (int64_t[]){30, 20});
  expect_file_holds(path, &a);
  ck_assert_int_eq(count_files(), 1);
}
END_TEST

/* Classic TIFF while the file's size bound fits 32-bit offsets, BigTIFF
 * above (the bound lowered here: 4 GiB files are too slow for a test). */
START_TEST(tiff_images_switch_to_bigtiff) {
  uint8_t px[100 * 100];
  fill_random(px, sizeof px, 3);
  const accel_array a = array_of(px, ACCEL_DTYPE_U8, 2, (int64_t[]){100, 100});
  const uint64_t saved = accel__tiff_classic_max;
  accel__tiff_classic_max = 100000;
  const accel_status s1 = accel_tiff_save_image(NULL, tmp("small.tif"), &a, NULL);
  accel__tiff_classic_max = 10000;
  const accel_status s2 = accel_tiff_save_image(NULL, tmp("big.tif"), &a, NULL);
  accel__tiff_classic_max = saved;
  ck_assert_int_eq(s1, ACCEL_OK);
  ck_assert_int_eq(s2, ACCEL_OK);
  unsigned char head[4];
  ck_assert_uint_eq(file_bytes(tmp("small.tif"), head, 4), 4);
  ck_assert_int_eq(head[2] | head[3] << 8, 42);
  ck_assert_uint_eq(file_bytes(tmp("big.tif"), head, 4), 4);
  ck_assert_int_eq(head[2] | head[3] << 8, 43);
  expect_file_holds(tmp("big.tif"), &a);
}
END_TEST

/* A palette image of 8 bits whose colormap is missing (a damaged file):
 * libtiff reads it as min-is-black (RGB with 3 samples) without a word, and
 * it loaded as its colour indices. Made by saving a gray or RGB image,
 * classic TIFF and BigTIFF, and setting its Photometric entry to palette. */
START_TEST(tiff_palette_without_colormap_is_refused) {
  static uint8_t px[40 * 30 * 3]; /* zeros: no pixel bytes look like the entry */
  unsigned char file[8192];
  const uint64_t saved = accel__tiff_classic_max;
  for (int k = 0; k < 4; k++) {
    const bool big = k >= 2;
    const int64_t spp = k % 2 ? 3 : 1;
    const accel_array a = array_of(px, ACCEL_DTYPE_U8, spp == 1 ? 2 : 3, (int64_t[]){30, 40, spp});
    accel__tiff_classic_max = big ? 1000 : saved;
    const accel_status s = accel_tiff_save_image(NULL, tmp("pal.tif"), &a, NULL);
    accel__tiff_classic_max = saved;
    ck_assert_int_eq(s, ACCEL_OK);
    const size_t n = file_bytes(tmp("pal.tif"), file, sizeof file);
    ck_assert_uint_lt(n, sizeof file);
    /* the entry: tag 262, type SHORT, count 1 (4 bytes, or 8 in BigTIFF), then the value */
    const unsigned char entry[12] = {0x06, 0x01, 0x03, 0x00, 0x01};
    const size_t len = big ? 12 : 8;
    size_t at = 0;
    for (size_t i = 0; i + len + 2 <= n && !at; i++)
      if (!memcmp(file + i, entry, len)) at = i + len;
    ck_assert_msg(at > 0, "no Photometric entry found (BigTIFF %d)", (int)big);
    ck_assert_int_eq(file[at], spp == 1 ? 1 : 2);
    file[at] = 3; /* PHOTOMETRIC_PALETTE */
    FILE *f = fopen(tmp("pal.tif"), "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(file, 1, n, f), n);
    fclose(f);
    accel_buffer *b = NULL;
    ck_assert_int_eq(accel_tiff_load_image(NULL, tmp("pal.tif"), &b), ACCEL_ERR_FORMAT);
    ck_assert_msg(strstr(accel_last_error(NULL), "without its colormap"), "%s", accel_last_error(NULL));
    ck_assert_ptr_null(b);
  }
}
END_TEST

/* Refused: what the loader does not read (palette, bilevel, YCbCr JPEG),
 * hostile headers, truncated files at every length, arrays and options the
 * saver does not take. */
START_TEST(tiff_images_refuse_cleanly) {
  static const struct {
    const char *name, *why;
  } unsupported[] = {{"palette.tif", "palette"}, {"bilevel.tif", "1-bit"}, {"ycbcr_jpeg.tif", "YCbCr"}};
  accel_buffer *b = NULL;
  for (size_t i = 0; i < 3; i++) {
    const accel_status s = accel_tiff_load_image(NULL, tiff_fixture(unsupported[i].name), &b);
    ck_assert_msg(s == ACCEL_ERR_UNSUPPORTED, "%s: %s", unsupported[i].name, accel_status_string(s));
    ck_assert_msg(
        strstr(accel_last_error(NULL), unsupported[i].why) && strstr(accel_last_error(NULL), "accel_tiff_load_image"),
        "%s", accel_last_error(NULL));
    ck_assert_ptr_null(b);
  }
  ck_assert_int_eq(accel_tiff_load_image(NULL, "/nonexistent.tif", &b), ACCEL_ERR_IO);
  ck_assert_int_eq(accel_tiff_load_image(NULL, fixture("i16_3x4.npy"), &b), ACCEL_ERR_FORMAT);
  ck_assert_int_eq(accel_tiff_load_image(NULL, NULL, &b), ACCEL_ERR_INVALID_ARG);
  accel_ctx *ctx = ctx_with_pixel_limit(23 * 19 - 1);
  ck_assert_int_eq(accel_tiff_load_image(ctx, tiff_fixture("u8_3.tif"), &b), ACCEL_ERR_LIMIT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(ctx), "pixel limit"));
  accel_ctx_destroy(ctx);
  /* hostile headers, under a 1 GiB address-space limit */
  limit_address_space(1ull << 30);
  static const char *const hostile[] = {"bomb_30000.tif", "bomb_tiled_30000.tif", "tile_bomb.tif", "trunc_strip.tif",
                                        "trunc_tile.tif"};
  for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
    const accel_status s = accel_tiff_load_image(NULL, bad_file(hostile[i]), &b);
    ck_assert_msg(s == ACCEL_ERR_FORMAT, "%s: %s (%s)", hostile[i], accel_status_string(s), accel_last_error(NULL));
    ck_assert_ptr_null(b);
  }
  /* every truncation of a file with its directory first (strips cut) and
   * of one with it last (tiffcp's: the directory cut) */
  static const char *const cut[] = {"u16_3.tif", "u8_4_tz.tif", "f32_3_sl.tif"};
  static unsigned char whole[16384];
  for (size_t i = 0; i < 3; i++) {
    const size_t n = file_bytes(tiff_fixture(cut[i]), whole, sizeof whole);
    ck_assert_uint_lt(n, sizeof whole);
    for (size_t len = 0; len < n; len += len < 64 ? 1 : 37) {
      FILE *f = fopen(tmp("cut.tif"), "wb");
      ck_assert_ptr_nonnull(f);
      ck_assert_uint_eq(fwrite(whole, 1, len, f), len);
      fclose(f);
      const accel_status s = accel_tiff_load_image(NULL, tmp("cut.tif"), &b);
      EXPECT(s == ACCEL_ERR_FORMAT, "%s cut to %zu bytes: %s (%s)", cut[i], len, accel_status_string(s),
             accel_last_error(NULL));
    }
  }
}
END_TEST

START_TEST(tiff_save_refuses_bad_arguments) {
  uint8_t px[2 * 3 * 5] = {0};
  accel_tiff_save_options o;
  ck_assert_int_eq(accel_tiff_save_options_init(&o, 4), ACCEL_ERR_VERSION);
  ck_assert_int_eq(accel_tiff_save_options_init(NULL, sizeof o), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_save_options_init(&o, sizeof o), ACCEL_OK);
  ck_assert_int_eq(o.deflate_level, 6);
  ck_assert_int_eq(o.predictor, 1);
  const char *path = tmp("x.tif");
  accel_array a = array_of(px, ACCEL_DTYPE_U8, 3, (int64_t[]){2, 3, 5}); /* 5 channels */
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, NULL), ACCEL_ERR_INVALID_ARG);
  a = array_of(px, ACCEL_DTYPE_U8, 1, (int64_t[]){30});
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, NULL), ACCEL_ERR_INVALID_ARG);
  a = array_of(px, ACCEL_DTYPE_U64, 2, (int64_t[]){1, 3});
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, NULL), ACCEL_ERR_INVALID_ARG);
  a = array_of(px, ACCEL_DTYPE_U8, 2, (int64_t[]){0, 3});
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, NULL), ACCEL_ERR_INVALID_ARG);
  a = array_of(px, ACCEL_DTYPE_U8, 3, (int64_t[]){2, 3, 4});
  ck_assert_int_eq(accel_tiff_save_image(NULL, NULL, &a, NULL), ACCEL_ERR_INVALID_ARG);
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, NULL, NULL), ACCEL_ERR_INVALID_ARG);
  static const struct {
    int field, value;
    const char *name;
  } bad[] = {{0, 3, "compression"}, {1, 0, "deflate_level"}, {1, 10, "deflate_level"}, {2, 2, "predictor"},
             {3, 8, "tile_size"},   {3, 4112, "tile_size"},  {3, -16, "tile_size"},    {4, 2, "bigtiff"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    accel_tiff_save_options_init(&o, sizeof o);
    switch (bad[i].field) {
    case 0: o.compression = (accel_tiff_compression)bad[i].value; break;
    case 1: o.deflate_level = bad[i].value; break;
    case 2: o.predictor = bad[i].value; break;
    case 3: o.tile_size = bad[i].value; break;
    default: o.bigtiff = bad[i].value; break;
    }
    ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, &o), ACCEL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(accel_last_error(NULL), bad[i].name), "%s", accel_last_error(NULL));
  }
  accel_tiff_save_options_init(&o, sizeof o);
  o.struct_size = 4;
  ck_assert_int_eq(accel_tiff_save_image(NULL, path, &a, &o), ACCEL_ERR_VERSION);
  ck_assert_int_eq(count_files(), 0);
}
END_TEST

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* A PNG chunk: length, type, data, CRC of type and data (PNG 1.2, 3.2). */
static void put_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n) {
  uint8_t be[4];
  put_be32(be, n);
  fwrite(be, 1, 4, f);
  fwrite(type, 1, 4, f);
  if (n) fwrite(data, 1, n, f);
  uLong crc = crc32(crc32(0, (const Bytef *)type, 4), data, n);
  put_be32(be, (uint32_t)crc);
  fwrite(be, 1, 4, f);
}

/* A 16-bit gray PNG, every row with filter 0. */
static void write_png_gray16(const char *path, const uint16_t *px, uint32_t h, uint32_t w) {
  const size_t row = 1 + 2 * (size_t)w, n = row * h;
  uint8_t *raw = calloc(n, 1), ihdr[13] = {0};
  uLongf zn = compressBound((uLong)n);
  uint8_t *z = malloc(zn);
  ck_assert(raw && z);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      raw[y * row + 1 + 2 * x] = (uint8_t)(px[y * w + x] >> 8);
      raw[y * row + 2 + 2 * x] = (uint8_t)px[y * w + x];
    }
  ck_assert_int_eq(compress(z, &zn, raw, (uLong)n), Z_OK);
  put_be32(ihdr, w);
  put_be32(ihdr + 4, h);
  ihdr[8] = 16; /* bit depth; colour type 0 (gray), deflate, filter 0, no interlace */
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
  put_chunk(f, "IHDR", ihdr, 13);
  put_chunk(f, "IDAT", z, (uint32_t)zn);
  put_chunk(f, "IEND", NULL, 0);
  ck_assert_int_eq(fclose(f), 0);
  free(raw);
  free(z);
}

/* accel_image_load by signature: TIFF as stored; PNG and JPEG as Pillow
 * 9.4 converts them (tests/data/decode: its convert('RGB' or 'L') outputs),
 * gray modes to (H, W), colour modes to (H, W, 3); 16-bit gray PNG as U16. */
START_TEST(image_load_sniffs_the_format) {
  static const struct {
    const char *file, *ref;
  } cases[] = {{"hopper.jpg", "hopper.RGB"},     {"hopper_gray.jpg", "hopper_gray.L"},
               {"pil123p.png", "pil123p.RGB"},   {"pil_sample_cmyk.jpg", "pil_sample_cmyk.RGB"},
               {"gen_gray2.png", "gen_gray2.L"}, {"gen_adam7_rgba16.png", "gen_adam7_rgba16.RGB"}};
  char path[1024];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(path, sizeof path, "%s/hash/%s", test_data_dir(), cases[i].file);
    accel_buffer *b = NULL;
    ck_assert_msg(accel_image_load(NULL, path, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
    snprintf(path, sizeof path, "%s/decode", test_data_dir());
    accel_buffer *ref = must_load(path, cases[i].ref);
    const accel_array got = view_of(b), want = view_of(ref);
    expect_same_image(&got, &want, cases[i].file);
    accel_buffer_destroy(b);
    accel_buffer_destroy(ref);
  }
  /* 16-bit gray (Pillow's mode I): U16 as stored, in a PNG written here */
  enum { PW = 7, PH = 5 };
  uint16_t want16[PH * PW];
  for (int i = 0; i < PH * PW; i++) want16[i] = (uint16_t)(i * 1871 + 3);
  write_png_gray16(tmp("g16.png"), want16, PH, PW);
  accel_buffer *b = NULL;
  ck_assert_msg(accel_image_load(NULL, tmp("g16.png"), &b) == ACCEL_OK, "%s", accel_last_error(NULL));
  const accel_array got = view_of(b), want = array_of(want16, ACCEL_DTYPE_U16, 2, (int64_t[]){PH, PW});
  expect_same_image(&got, &want, "g16.png");
  accel_buffer_destroy(b);
  /* TIFF, classic and BigTIFF, either byte order */
  static const char *const tiffs[] = {"u16_3.tif", "u16_3_bb.tif", "f32_1_sl.tif"};
  for (int i = 0; i < 3; i++) {
    accel_buffer *t = NULL, *s = NULL;
    ck_assert_msg(accel_image_load(NULL, tiff_fixture(tiffs[i]), &t) == ACCEL_OK, "%s", accel_last_error(NULL));
    ck_assert_int_eq(accel_tiff_load_image(NULL, tiff_fixture(tiffs[i]), &s), ACCEL_OK);
    const accel_array tv = view_of(t), sv = view_of(s);
    expect_same_image(&tv, &sv, tiffs[i]);
    accel_buffer_destroy(t);
    accel_buffer_destroy(s);
  }
  /* neither; corrupt; over the pixel limit; missing */
  b = NULL;
  ck_assert_int_eq(accel_image_load(NULL, fixture("i16_3x4.npy"), &b), ACCEL_ERR_FORMAT);
  ck_assert_ptr_nonnull(strstr(accel_last_error(NULL), "neither TIFF, PNG nor JPEG"));
  ck_assert_ptr_null(b);
  static const char *const corrupt[] = {"truncated_jpeg.jpg", "broken.png", "truncated_image.png"}; /* Pillow fails */
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/hash/%s", test_data_dir(), corrupt[i]);
    ck_assert_int_eq(accel_image_load(NULL, path, &b), ACCEL_ERR_DECODE);
    ck_assert_ptr_null(b);
  }
  accel_ctx *ctx = ctx_with_pixel_limit(100);
  snprintf(path, sizeof path, "%s/hash/hopper.png", test_data_dir());
  ck_assert_int_eq(accel_image_load(ctx, path, &b), ACCEL_ERR_LIMIT);
  ck_assert_int_eq(accel_image_load(ctx, tiff_fixture("u8_1.tif"), &b), ACCEL_ERR_LIMIT);
  accel_ctx_destroy(ctx);
  ck_assert_int_eq(accel_image_load(NULL, "/nonexistent.png", &b), ACCEL_ERR_IO);
  ck_assert_int_eq(accel_image_load(NULL, path, NULL), ACCEL_ERR_INVALID_ARG);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
#define IO_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IO_UNDER_ASAN 1
#endif
#endif

/* A line "key: <n> kB" of /proc/self/status, in bytes; -1 without it. */
static int64_t proc_status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  const size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtoll(line + n + 1, NULL, 10) * 1024;
  fclose(f);
  return v;
}

/* How much the peak resident memory rises over a load (the peak is reset
 * first through /proc/self/clear_refs); -1 where that cannot be measured. */
static int64_t load_peak_growth(const char *path, accel_buffer **b) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return -1;
  const bool reset = fputs("5", f) >= 0;
  if (fclose(f) != 0 || !reset) return -1;
  const int64_t before = proc_status_bytes("VmRSS");
  const accel_status s = accel_tiff_load_image(NULL, path, b);
  ck_assert_msg(s == ACCEL_OK, "%s", accel_last_error(NULL));
  const int64_t peak = proc_status_bytes("VmHWM");
  return before < 0 || peak < 0 ? -1 : peak - before;
}

/* An RGB image in one strip of separate planes, written by libtiff itself. */
static void write_planes(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint16_t compression) {
  TIFF *tif = TIFFOpen(path, "w");
  ck_assert_ptr_nonnull(tif);
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_SEPARATE);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, h);
  uint8_t *line = malloc(w);
  ck_assert_ptr_nonnull(line);
  for (uint16_t k = 0; k < 3; k++)
    for (uint32_t y = 0; y < h; y++) {
      for (uint32_t x = 0; x < w; x++) line[x] = px[((size_t)y * w + x) * 3 + k];
      ck_assert_int_ge(TIFFWriteScanline(tif, line, y, k), 0);
    }
  free(line);
  TIFFClose(tif);
}

/* A 12-megapixel RGB image (36 MB) loads with a peak of about its size,
 * whatever the layout: deflate strips of 1 MiB and tiles (decoded straight
 * into the buffer), one strip of separate planes (12 MB a plane: read a
 * band of rows at a time; deflated, libtiff holds the compressed strip). */
START_TEST(tiff_load_peaks_near_the_image_size) {
#ifdef IO_UNDER_ASAN
  return; /* the shadow memory hides what the loader itself holds */
#endif
  enum { H = 3000, W = 4000 };
  const size_t size = (size_t)H * W * 3;
  uint8_t *px = malloc(size);
  ck_assert_ptr_nonnull(px);
  for (size_t i = 0; i < size; i++) px[i] = (uint8_t)((i / 3 % W) + (i / 3 / W) * 3 + (i % 3) * 50 + (i * 7919 >> 13));
  const accel_array a = array_of(px, ACCEL_DTYPE_U8, 3, (int64_t[]){H, W, 3});
  accel_tiff_save_options o;
  accel_tiff_save_options_init(&o, sizeof o);
  o.compression = ACCEL_TIFF_COMPRESSION_DEFLATE, o.deflate_level = 1;
  ck_assert_int_eq(accel_tiff_save_image(NULL, tmp("strips.tif"), &a, &o), ACCEL_OK);
  o.tile_size = 512;
  ck_assert_int_eq(accel_tiff_save_image(NULL, tmp("tiles.tif"), &a, &o), ACCEL_OK);
  write_planes(tmp("planes.tif"), px, H, W, COMPRESSION_NONE);
  write_planes(tmp("zplanes.tif"), px, H, W, COMPRESSION_ADOBE_DEFLATE);
  static const char *const names[] = {"strips.tif", "tiles.tif", "planes.tif", "zplanes.tif"};
  for (int i = 0; i < 4; i++) {
    accel_buffer *b = NULL;
    const int64_t growth = load_peak_growth(tmp(names[i]), &b);
    const accel_array got = view_of(b);
    ck_assert_mem_eq(got.data, px, size);
    accel_buffer_destroy(b);
    if (growth < 0) continue; /* no /proc/self/clear_refs here */
    if (getenv("ACCEL_TEST_VERBOSE"))
      printf("%s: peak +%.1f MB for a %.1f MB image\n", names[i], (double)growth / 1e6, (double)size / 1e6);
    ck_assert_msg(growth >= (int64_t)size * 9 / 10 && growth <= (int64_t)size * 12 / 10,
                  "%s: the peak rose by %lld bytes for a %zu-byte image", names[i], (long long)growth, size);
  }
  free(px);
}
END_TEST

/* ../shared/data/reg: the registration pairs (tifffile's uncompressed
 * strips, elastix's result written by ITK) load as libtiff's own RGBA
 * reader and the GeoTIFF loader read them. */
START_TEST(shared_reg_images_load) {
  static const char *const folders[] = {"tex_512_s1", "tex_1024_s2"};
  char path[1024];
  snprintf(path, sizeof path, "%s/reg/%s/moving_rgb.tif", SHARED_DATA_DIR, folders[_i]);
  accel_buffer *b = NULL;
  ck_assert_msg(accel_tiff_load_image(NULL, path, &b) == ACCEL_OK, "%s", accel_last_error(NULL));
  const accel_array rgb = view_of(b);
  ck_assert_int_eq(rgb.dtype, ACCEL_DTYPE_U8);
  ck_assert_int_eq(rgb.ndim, 3);
  ck_assert_int_eq(rgb.shape[2], 3);
  const uint32_t h = (uint32_t)rgb.shape[0], w = (uint32_t)rgb.shape[1];
  TIFF *tif = TIFFOpen(path, "r");
  ck_assert_ptr_nonnull(tif);
  uint32_t *abgr = malloc(sizeof *abgr * w * h);
  ck_assert_ptr_nonnull(abgr);
  ck_assert_int_eq(TIFFReadRGBAImageOriented(tif, w, h, abgr, ORIENTATION_TOPLEFT, 1), 1);
  TIFFClose(tif);
  const uint8_t *p = rgb.data;
  for (size_t i = 0; i < (size_t)w * h; i++)
    EXPECT(p[3 * i] == TIFFGetR(abgr[i]) && p[3 * i + 1] == TIFFGetG(abgr[i]) && p[3 * i + 2] == TIFFGetB(abgr[i]),
           "%s: pixel %zu differs", path, i);
  free(abgr);
  accel_buffer_destroy(b);
  static const char *const gray[] = {"fixed.tif", "moving.tif", "result.tif"};
  for (int g = 0; g < 3; g++) {
    snprintf(path, sizeof path, "%s/reg/%s/%s", SHARED_DATA_DIR, folders[_i], gray[g]);
    accel_buffer *f = NULL, *ref = NULL;
    ck_assert_msg(accel_tiff_load_image(NULL, path, &f) == ACCEL_OK, "%s", accel_last_error(NULL));
    ck_assert_int_eq(accel_tiff_load(NULL, path, &ref, NULL), ACCEL_OK);
    const accel_array a = view_of(f), r = view_of(ref);
    ck_assert_int_eq(a.dtype, ACCEL_DTYPE_F32);
    ck_assert_int_eq(a.ndim, 2);
    ck_assert(a.shape[0] == r.shape[0] && a.shape[1] == r.shape[1]);
    ck_assert_mem_eq(a.data, r.data, (size_t)(a.shape[0] * a.shape[1]) * 4);
    accel_buffer_destroy(f);
    accel_buffer_destroy(ref);
  }
}
END_TEST

static Suite *suite_io_shared(void) {
  return single_test_suite("io_shared", "reg_tiff", 120, shared_reg_images_load, 2);
}
#endif

Suite *suite_io(void) {
  TCase *tc = new_case("npy_pnm", 0, setup, teardown);
  tcase_add_test(tc, reads_what_numpy_wrote);
  tcase_add_test(tc, refuses_what_it_cannot_read);
  tcase_add_test(tc, every_truncation_is_an_error_not_a_crash);
  tcase_add_test(tc, writes_byte_identical_to_numpy);
  tcase_add_test(tc, saves_strided_views_in_c_order);
  tcase_add_test(tc, failed_save_keeps_the_previous_file);
  tcase_add_test(tc, pnm_round_trip_and_errors);
#if ACCEL_HAVE_TIFF
  tcase_add_test(tc, geotiff_round_trip);
  tcase_add_test(tc, hostile_tiffs_are_refused_before_allocating);
  tcase_add_loop_test(tc, tiff_images_from_other_writers, 0, 2);
  tcase_add_test(tc, tiff_fill_order_2_reads_the_same_mapped_or_not);
  tcase_add_test(tc, tiff_images_round_trip);
  tcase_add_test(tc, tiff_images_written_in_place);
  tcase_add_test(tc, tiff_images_switch_to_bigtiff);
  tcase_add_test(tc, tiff_images_refuse_cleanly);
  tcase_add_test(tc, tiff_palette_without_colormap_is_refused);
  tcase_add_test(tc, tiff_stack_loads_its_first_image_and_says_so);
  tcase_add_test(tc, tiff_save_refuses_bad_arguments);
  tcase_add_test(tc, tiff_load_peaks_near_the_image_size);
  tcase_add_test(tc, image_load_sniffs_the_format);
#endif
  tcase_add_test(tc, pnm_obeys_the_pixel_limit);
  tcase_add_test(tc, full_disks_never_replace_a_good_file);
  tcase_add_test(tc, saved_files_take_the_umask);
  tcase_add_test(tc, killed_saves_leave_no_temporary);
  tcase_add_test(tc, saves_sync_as_the_policy_says);
  return suite_of("io", tc);
}

#if ACCEL_HAVE_TIFF
static const shared_run IO_SHARED = {"--shared", SHARED_DATA_DIR "/reg/tex_512_s1/moving_rgb.tif",
                                     SHARED_DATA_DIR "/reg", suite_io_shared};
#else
static Suite *suite_io_no_shared(void) { return suite_create("io_shared"); }
static const shared_run IO_SHARED = {"--shared", SHARED_DATA_DIR "/reg/tex_512_s1/moving_rgb.tif",
                                     SHARED_DATA_DIR "/reg", suite_io_no_shared};
#endif

ACCEL_TEST_MAIN_SHARED(suite_io, IO_SHARED)
