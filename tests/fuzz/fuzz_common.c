/* The harnesses' shared context, input file and scratch directory. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void fuzz_fail(const char *file, int line, const char *what, const char *detail) {
  fprintf(stderr, "%s:%d: fuzz check failed: %s\n  last error: %s\n", file, line, what,
          detail && *detail ? detail : "(none)");
  fflush(stderr);
  abort();
}

accel_ctx *fuzz_ctx(void) {
  static accel_ctx *ctx;
  if (ctx) return ctx;
  accel_ctx_options o;
  if (accel_ctx_options_init(&o, sizeof o) != ACCEL_OK) fuzz_fail(__FILE__, __LINE__, "options init", NULL);
  o.backend = ACCEL_BACKEND_CPU;
  o.cpu_threads = 1;
  o.log_level = ACCEL_LOG_OFF;
  o.max_pixels = FUZZ_MAX_PIXELS;
  if (accel_ctx_create(&o, &ctx) != ACCEL_OK) fuzz_fail(__FILE__, __LINE__, "context", accel_last_error(NULL));
  return ctx;
}

/* ---------------------------------------------------------------- files */

static int input_fd = -1;
static char input_path[512];
static char scratch_dir[256];
static char scratch_file[512];

static void write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  off_t off = 0;
  while (size) {
    ssize_t k = pwrite(fd, p, size, off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fuzz_fail(__FILE__, __LINE__, "writing the input file", strerror(errno));
    p += k;
    off += k;
    size -= (size_t)k;
  }
}

static void remove_scratch(void) {
  if (!scratch_dir[0]) return;
  DIR *d = opendir(scratch_dir);
  if (d) {
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        const int n = snprintf(path, sizeof path, "%s/%s", scratch_dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof path) unlink(path);
      }
    closedir(d);
  }
  rmdir(scratch_dir);
  scratch_dir[0] = '\0';
}

/* Remove the scratch directories of processes that died without cleaning up
 * (a crash skips atexit): accel-fuzz-<pid>-XXXXXX whose pid no longer runs. */
static void sweep_stale(const char *base) {
  DIR *d = opendir(base);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    long pid = 0;
    if (sscanf(e->d_name, "accel-fuzz-%ld-", &pid) != 1 || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    const int n = snprintf(scratch_dir, sizeof scratch_dir, "%s/%s", base, e->d_name);
    if (n > 0 && (size_t)n < sizeof scratch_dir) remove_scratch();
    scratch_dir[0] = '\0';
  }
  closedir(d);
}

/* /dev/shm when it is usable (saves fsync their files: free on tmpfs), else $TMPDIR or /tmp. */
static void make_scratch(void) {
  const char *tmp = getenv("TMPDIR");
  const char *bases[] = {"/dev/shm", tmp && *tmp ? tmp : "/tmp", "/tmp"};
  for (size_t i = 0; i < sizeof bases / sizeof bases[0] && !scratch_dir[0]; i++) {
    sweep_stale(bases[i]);
    snprintf(scratch_dir, sizeof scratch_dir, "%s/accel-fuzz-%ld-XXXXXX", bases[i], (long)getpid());
    if (!mkdtemp(scratch_dir)) scratch_dir[0] = '\0';
  }
  if (!scratch_dir[0]) fuzz_fail(__FILE__, __LINE__, "creating a scratch directory", strerror(errno));
  atexit(remove_scratch);
}

const char *fuzz_input_path(const void *data, size_t size) {
  if (input_fd < 0) {
    input_fd = memfd_create("accel-fuzz-input", MFD_CLOEXEC);
    if (input_fd >= 0) {
      snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
    } else { /* no memfd: a file in the scratch directory */
      memcpy(input_path, fuzz_scratch_path("input"), sizeof input_path);
      input_fd = open(input_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (input_fd < 0) fuzz_fail(__FILE__, __LINE__, "creating the input file", strerror(errno));
    }
  }
  if (ftruncate(input_fd, 0) != 0) fuzz_fail(__FILE__, __LINE__, "truncating the input file", strerror(errno));
  write_all(input_fd, data, size);
  return input_path;
}

const char *fuzz_scratch_path(const char *name) {
  if (!scratch_dir[0]) make_scratch();
  const int n = snprintf(scratch_file, sizeof scratch_file, "%s/%s", scratch_dir, name);
  if (n < 0 || (size_t)n >= sizeof scratch_file) fuzz_fail(__FILE__, __LINE__, "scratch path too long", name);
  return scratch_file;
}

/* ---------------------------------------------------------------- checks */

bool fuzz_status_in(accel_status s, const accel_status *allowed) {
  for (; *allowed != ACCEL_OK; allowed++)
    if (s == *allowed) return true;
  return false;
}

void fuzz_check_failure(const char *file, int line, accel_status status, const accel_status *allowed, const void *out) {
  if (!fuzz_status_in(status, allowed)) {
    char what[128];
    snprintf(what, sizeof what, "status %s is not one the function documents for bad input",
             accel_status_string(status));
    fuzz_fail(file, line, what, accel_last_error(fuzz_ctx()));
  }
  if (out) fuzz_fail(file, line, "a failed call left an output behind", accel_last_error(fuzz_ctx()));
}

accel_array fuzz_view(const accel_buffer *buffer) {
  accel_array v;
  FUZZ_CHECK(buffer != NULL);
  FUZZ_CHECK(accel_buffer_view(buffer, &v) == ACCEL_OK);
  return v;
}

int64_t fuzz_count(const accel_array *v) {
  for (int i = 0; i < v->ndim; i++) /* an empty array may have huge other extents */
    if (v->shape[i] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
  return n;
}

bool fuzz_same_array(const accel_array *a, const accel_array *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  const int64_t n = fuzz_count(a);
  return n == 0 || memcmp(a->data, b->data, (size_t)n * accel_dtype_size(a->dtype)) == 0;
}

bool fuzz_load(fuzz_load_fn load, const uint8_t *data, size_t size, const accel_status *errors, accel_buffer **out) {
  *out = NULL;
  const accel_status s = load(fuzz_ctx(), fuzz_input_path(data, size), out);
  if (s != ACCEL_OK) FUZZ_CHECK_FAILURE(s, errors, *out);
  return s == ACCEL_OK;
}

void fuzz_check_round_trip(fuzz_load_fn load, fuzz_save_fn save, const char *name, const accel_array *v) {
  const char *out = fuzz_scratch_path(name);
  FUZZ_CHECK(save(fuzz_ctx(), out, v) == ACCEL_OK);
  accel_buffer *r = NULL;
  FUZZ_CHECK(load(fuzz_ctx(), out, &r) == ACCEL_OK);
  accel_array rv = fuzz_view(r);
  FUZZ_CHECK(fuzz_same_array(v, &rv));
  accel_buffer_destroy(r);
}

uint64_t fuzz_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

uint32_t fuzz_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
