/* File helpers: atomic writes, chunked array output, checked opens. */
#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

accel_status accel__open_read(const accel_ctx *ctx, const char *func, const char *path, FILE **f, int64_t *size) {
  *f = NULL;
  if (!path) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: path is NULL", func);
  FILE *fp = fopen(path, "rb");
  if (!fp) return accel__fail(ctx, ACCEL_ERR_IO, "%s: cannot open %s: %s", func, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(fp);
    return accel__fail(ctx, ACCEL_ERR_IO, "%s: %s is not a regular file", func, path);
  }
  *f = fp;
  *size = (int64_t)st.st_size;
  return ACCEL_OK;
}

accel_status accel__atomic_open(const accel_ctx *ctx, const char *func, const char *path, accel__atomic_file *af) {
  static unsigned counter;
  memset(af, 0, sizeof *af);
  if (!path || !*path) return accel__fail(ctx, ACCEL_ERR_INVALID_ARG, "%s: path is NULL or empty", func);
  size_t n = strlen(path) + 64;
  af->tmp_path = malloc(n);
  af->path = strdup(path);
  if (!af->tmp_path || !af->path) {
    accel__atomic_abort(af);
    return accel__fail(ctx, ACCEL_ERR_OUT_OF_MEMORY, "%s: out of memory", func);
  }
  snprintf(af->tmp_path, n, "%s.tmp.%ld.%u", path, (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
  int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 || !(af->f = fdopen(fd, "wb"))) {
    int err = errno;
    if (fd >= 0) close(fd);
    free(af->tmp_path);
    af->tmp_path = NULL;
    accel__atomic_abort(af);
    return accel__fail(ctx, ACCEL_ERR_IO, "%s: cannot create a file next to %s: %s", func, path, strerror(err));
  }
  return ACCEL_OK;
}

void accel__atomic_abort(accel__atomic_file *af) {
  if (af->f) fclose(af->f);
  if (af->tmp_path) unlink(af->tmp_path);
  free(af->tmp_path);
  free(af->path);
  memset(af, 0, sizeof *af);
}

accel_status accel__atomic_commit(const accel_ctx *ctx, const char *func, accel__atomic_file *af) {
  int err = 0;
  if (fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0) err = errno ? errno : EIO;
  if (fclose(af->f) != 0 && !err) err = errno;
  af->f = NULL;
  if (!err && rename(af->tmp_path, af->path) != 0) err = errno;
  if (err) {
    accel_status s = accel__fail(ctx, ACCEL_ERR_IO, "%s: cannot write %s: %s", func, af->path, strerror(err));
    accel__atomic_abort(af);
    return s;
  }
  free(af->tmp_path);
  free(af->path);
  memset(af, 0, sizeof *af);
  return ACCEL_OK;
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
