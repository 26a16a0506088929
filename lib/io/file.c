/* File helpers: atomic writes, chunked array output, checked opens. */
#include "io/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

accel_status accel__open_read(const accel_ctx *ctx, const char *func, const char *path, FILE **f, int64_t *size) {
  *f = NULL;
  if (!path) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "path is NULL");
  FILE *fp = fopen(path, "rb");
  if (!fp) return accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(fp);
    return accel__fail_in(ctx, func, ACCEL_ERR_IO, "%s is not a regular file", path);
  }
  *f = fp;
  *size = (int64_t)st.st_size;
  return ACCEL_OK;
}

accel_status accel__load(accel_ctx *ctx, const char *func, const char *path, accel__reader read, void *out) {
  FILE *f = NULL;
  int64_t size = 0;
  accel_status s = accel__open_read(ctx, func, path, &f, &size);
  if (s) return s;
  s = read(ctx, func, path, f, size, out);
  fclose(f);
  return s;
}

bool accel__atomic_named_only;
int64_t accel__atomic_syncs;

static unsigned next_serial(void) {
  static unsigned counter;
  return __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

bool accel__atomic_write(accel__atomic_file *af, const void *data, size_t n) {
  const char *p = data;
  while (n && !af->err) {
    const ssize_t k = write(af->fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      af->err = errno;
    } else {
      p += k;
      n -= (size_t)k;
    }
  }
  return !af->err;
}

static ssize_t cookie_write(void *user, const char *buf, size_t n) {
  return accel__atomic_write(user, buf, n) ? (ssize_t)n : 0; /* 0: stdio marks the stream in error */
}

/* "<name>.accel-tmp-", the prefix of this target's named temporaries (the
 * name cut to 200 bytes, so that the temporary's name stays legal). */
static void tmp_prefix(const char *name, char *out, size_t n) { snprintf(out, n, "%.200s.accel-tmp-", name); }

/* Remove this target's named temporaries left by processes that no longer
 * run (a save killed before its rename). */
static void remove_stale(int dir_fd, const char *name) {
  char prefix[256];
  tmp_prefix(name, prefix, sizeof prefix);
  const size_t plen = strlen(prefix);
  const int fd = dup(dir_fd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  const pid_t self = getpid();
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, prefix, plen) != 0) continue;
    char *end;
    const long pid = strtol(e->d_name + plen, &end, 10);
    if (end == e->d_name + plen || *end != '-' || pid <= 0 || pid == (long)self) continue;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlinkat(dir_fd, e->d_name, 0);
  }
  closedir(d);
}

static char *named_tmp(const char *name) {
  char prefix[256];
  tmp_prefix(name, prefix, sizeof prefix);
  const size_t n = strlen(prefix) + 32;
  char *t = malloc(n);
  if (t) snprintf(t, n, "%s%ld-%u", prefix, (long)getpid(), next_serial());
  return t;
}

accel_status accel__atomic_open(const accel_ctx *ctx, const char *func, const char *path, bool index,
                                accel__atomic_file *af) {
  static const cookie_io_functions_t io = {.write = cookie_write};
  memset(af, 0, sizeof *af);
  af->fd = af->dir_fd = -1;
  af->sync = accel__ctx_syncs(ctx, index);
  if (!path || !*path) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "path is NULL or empty");
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "%s names a directory, not a file", path);
  struct stat st; /* refused now, not by the rename at the commit after all the writing */
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot replace %s: it is a directory", path);
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  af->path = strdup(path);
  af->name = strdup(name);
  if (!dir || !af->path || !af->name) {
    free(dir);
    accel__atomic_abort(af);
    return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  af->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = af->dir_fd < 0 ? errno : 0;
  free(dir);
  /* read and write: an image written in place maps the file (accel_tiff_create_image) */
  if (!err && !accel__atomic_named_only && access("/proc/self/fd", X_OK) == 0) /* linkat names it later */
    af->fd = openat(af->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (!err && af->fd < 0) { /* no O_TMPFILE here: a named temporary */
    remove_stale(af->dir_fd, af->name);
    if (!(af->tmp_name = named_tmp(af->name))) {
      accel__atomic_abort(af);
      return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
    }
    af->fd = openat(af->dir_fd, af->tmp_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (af->fd < 0) {
      err = errno;
      free(af->tmp_name);
      af->tmp_name = NULL;
    }
  }
  if (!err && !(af->f = fopencookie(af, "w", io))) err = errno ? errno : ENOMEM;
  if (err) {
    accel_status s =
        accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot create a file next to %s: %s", path, strerror(err));
    accel__atomic_abort(af);
    return s;
  }
  return ACCEL_OK;
}

void accel__atomic_abort(accel__atomic_file *af) {
  if (af->f) {
    af->err = af->err ? af->err : EIO; /* nothing more reaches the file */
    fclose(af->f);
  }
  if (af->fd >= 0) close(af->fd);
  if (af->tmp_name && af->dir_fd >= 0) unlinkat(af->dir_fd, af->tmp_name, 0);
  if (af->dir_fd >= 0) close(af->dir_fd);
  free(af->tmp_name);
  free(af->path);
  free(af->name);
  memset(af, 0, sizeof *af);
  af->fd = af->dir_fd = -1;
}

accel_status accel__atomic_fail(const accel_ctx *ctx, const char *func, accel__atomic_file *af) {
  if (af->f && fflush(af->f) != 0 && !af->err) af->err = EIO;
  const int err = af->err;
  accel_status s = err ? accel__fail_in(ctx, func, ACCEL_ERR_IO, "cannot write %s: %s", af->path, strerror(err))
                       : accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory writing %s", af->path);
  accel__atomic_abort(af);
  return s;
}

static int counted_fsync(int fd) {
  __atomic_add_fetch(&accel__atomic_syncs, 1, __ATOMIC_RELAXED);
  return fsync(fd);
}

accel_status accel__atomic_commit(const accel_ctx *ctx, const char *func, accel__atomic_file *af) {
  const char *step = "cannot write";
  if (fflush(af->f) != 0 && !af->err) af->err = EIO;
  if (ferror(af->f) && !af->err) af->err = EIO;
  fclose(af->f); /* the cookie has no close: the descriptor stays ours */
  af->f = NULL;
  int err = af->err;
  if (!err && af->sync && counted_fsync(af->fd) != 0) err = errno, step = "cannot sync";
  if (!err && !af->tmp_name) { /* the unnamed file gets a name, then replaces the target */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", af->fd);
    if (!(af->tmp_name = named_tmp(af->name))) err = ENOMEM;
    else if (linkat(AT_FDCWD, proc, af->dir_fd, af->tmp_name, AT_SYMLINK_FOLLOW) != 0) {
      err = errno, step = "cannot link";
      free(af->tmp_name);
      af->tmp_name = NULL;
    }
  }
  if (close(af->fd) != 0 && !err) err = errno, step = "cannot close";
  af->fd = -1;
  if (!err && renameat(af->dir_fd, af->tmp_name, af->dir_fd, af->name) != 0) err = errno, step = "cannot replace";
  if (!err) {
    free(af->tmp_name); /* renamed: nothing to remove any more */
    af->tmp_name = NULL;
    /* the rename is durable once the directory is (EINVAL: a file system without directory sync) */
    if (af->sync && counted_fsync(af->dir_fd) != 0 && errno != EINVAL)
      err = errno, step = "cannot sync the directory of";
  }
  accel_status s = ACCEL_OK;
  if (err) s = accel__fail_in(ctx, func, ACCEL_ERR_IO, "%s %s: %s", step, af->path, strerror(err));
  accel__atomic_abort(af);
  return s;
}

bool accel__write_array_data(FILE *f, const accel_array *a) {
  int64_t count = accel__array_count(a);
  if (count == 0) return true;
  size_t item = accel_dtype_size(a->dtype);
  if (accel__array_is_contiguous(a)) return fwrite(a->data, item, (size_t)count, f) == (size_t)count;
  if (a->ndim <= 1) { /* one strided row */
    char *buf = malloc((size_t)count * item);
    if (!buf) return false;
    accel__array_pack(a, buf);
    bool ok = fwrite(buf, item, (size_t)count, f) == (size_t)count;
    free(buf);
    return ok;
  }
  /* one sub-array of the leading axis at a time */
  accel_array sub = *a;
  sub.ndim = a->ndim - 1;
  memmove(sub.shape, a->shape + 1, sizeof(int64_t) * (size_t)sub.ndim);
  memmove(sub.strides, a->strides + 1, sizeof(int64_t) * (size_t)sub.ndim);
  size_t sub_count = (size_t)(count / a->shape[0]);
  char *buf = malloc(sub_count * item);
  if (!buf) return false;
  bool ok = true;
  for (int64_t i = 0; ok && i < a->shape[0]; i++) {
    sub.data = (char *)a->data + i * a->strides[0];
    accel__array_pack(&sub, buf);
    ok = fwrite(buf, item, sub_count, f) == sub_count;
  }
  free(buf);
  return ok;
}
