/* suite_io: NPY against files numpy wrote (and byte-identical output), PNM,
 * error paths, atomic saves. */
#include "testutil.h"

#include "accel_config.h"
#if ACCEL_HAVE_TIFF
#include <math.h>
#include <tiffio.h>
#endif

#include "io/file.h"

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

enum { SAVE_NPY, SAVE_RAW, SAVE_PNM, SAVE_TIFF, SAVE_INDEX, SAVE_NETWORK, SAVE_KINDS };
static const char *const SAVE_NAMES[SAVE_KINDS] = {"a.npy", "a.raw", "a.pgm", "a.tif", "a.idx", "a.json"};

/* What the library writes, one kind at a time, from fixed content. */
typedef struct save_inputs {
  accel_ctx *ctx;
  uint8_t image[64 * 64];
  accel_index *index;
  accel_ct_network *network;
} save_inputs;

static void make_save_inputs(save_inputs *in) {
  fill_random(in->image, sizeof in->image, 7);
  accel_ctx *ctx = in->ctx = cpu_ctx();
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
  case SAVE_INDEX: return accel_index_save(in->index, path); /* the index's context */
  default: return accel_ct_network_save_json(in->ctx, in->network, path);
  }
}

static bool skip_kind(int kind) { return kind == SAVE_TIFF && !ACCEL_HAVE_TIFF; }

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
    if (accel__atomic_open(NULL, "test", path, &af) != ACCEL_OK) _exit(3);
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
#endif
  tcase_add_test(tc, pnm_obeys_the_pixel_limit);
  tcase_add_test(tc, full_disks_never_replace_a_good_file);
  tcase_add_test(tc, saved_files_take_the_umask);
  tcase_add_test(tc, killed_saves_leave_no_temporary);
  return suite_of("io", tc);
}

ACCEL_TEST_MAIN(suite_io)
