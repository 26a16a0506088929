/* lib/io/file.h - file helpers shared by the format readers and writers (internal). */
#ifndef ACCEL_IO_FILE_H
#define ACCEL_IO_FILE_H

#include "core/internal.h"

#include <stdio.h>

/* A file written under a temporary name in the target's directory and renamed
 * over the target only when complete, so a failed save never leaves a
 * partial file nor destroys the previous one. */
typedef struct accel__atomic_file {
  FILE *f;
  char *tmp_path;
  char *path;
} accel__atomic_file;

accel_status accel__atomic_open(const accel_ctx *ctx, const char *func, const char *path, accel__atomic_file *af);
/* Flush, fsync and rename; on any error the temporary file is removed. */
accel_status accel__atomic_commit(const accel_ctx *ctx, const char *func, accel__atomic_file *af);
void accel__atomic_abort(accel__atomic_file *af);

/* Write the array's elements in C order (packing strided data in bounded
 * chunks). Returns false on a write error. */
bool accel__write_array_data(FILE *f, const accel_array *a);

/* Open for reading and return the file size. */
accel_status accel__open_read(const accel_ctx *ctx, const char *func, const char *path, FILE **f, int64_t *size);

#endif /* ACCEL_IO_FILE_H */
