/* lib/io/file.h - file helpers shared by the format readers and writers (internal). */
#ifndef ACCEL_IO_FILE_H
#define ACCEL_IO_FILE_H

#include "core/internal.h"

#include <stdio.h>
#include <sys/types.h>

/* Every file the library writes goes through this: the data goes to a
 * temporary file in the target's directory, and only a complete file
 * replaces the target:
 *
 *   open    an unnamed file (O_TMPFILE) in the target's directory, or, where
 *           the file system has none, one named "<name>.accel-tmp-<pid>-<n>";
 *           mode 0666 less the umask, as any new file
 *   write   through `f` (buffered) or accel__atomic_write (unbuffered, for
 *           writers with their own buffering); the first failure's errno is
 *           kept in `err`
 *   commit  flush, check every write and the close, fsync the file (when the
 *           context's accel_sync_policy syncs this kind of save), give it a
 *           name (linkat) if it has none, rename it over the target, fsync
 *           the directory (when synced); on any error the temporary is
 *           removed, the old file is untouched and ACCEL_ERR_IO carries the
 *           reason
 *
 * A process killed during a save leaves nothing behind with O_TMPFILE; named
 * temporaries of processes that no longer run are removed by the next save
 * into the same directory of the same target. */
typedef struct accel__atomic_file {
  FILE *f;        /* buffered writer on fd */
  int fd;         /* the temporary file */
  int dir_fd;     /* the target's directory */
  int err;        /* errno of the first failed write or close, 0 if none */
  char *path;     /* the target, as given */
  char *name;     /* the target's name in its directory */
  char *tmp_name; /* the temporary's name in the directory; NULL while it has none */
  bool sync;      /* fsync the file and its directory at commit */
} accel__atomic_file;

/* Start a save of `path`; `index`: an index file (synced by default, see
 * accel_sync_policy), else any other file. A path ending in "/", "." or
 * ".." is ACCEL_ERR_INVALID_ARG, an existing directory ACCEL_ERR_IO (as its
 * rename would fail), both before anything is written. */
accel_status accel__atomic_open(const accel_ctx *ctx, const char *func, const char *path, bool index,
                                accel__atomic_file *af);
/* Write n bytes to the temporary, bypassing `f` (do not mix the two without
 * fflush). Returns false (and keeps errno in af->err) on failure. */
bool accel__atomic_write(accel__atomic_file *af, const void *data, size_t n);
/* Flush, sync, and replace the target; on any error nothing changes but the
 * temporary's removal. ACCEL_ERR_IO with the reason. */
accel_status accel__atomic_commit(const accel_ctx *ctx, const char *func, accel__atomic_file *af);
/* Give up a save whose writing failed: the temporary is removed; returns
 * ACCEL_ERR_IO with the first write error's reason, or ACCEL_ERR_OUT_OF_MEMORY
 * when no write failed (the writer ran out of memory). */
accel_status accel__atomic_fail(const accel_ctx *ctx, const char *func, accel__atomic_file *af);
/* Remove the temporary and release everything (no error is reported). */
void accel__atomic_abort(accel__atomic_file *af);

/* Tests only: never use O_TMPFILE (exercises the named temporaries). */
extern bool accel__atomic_named_only;
/* Tests only: the fsync calls of commits so far (files and directories). */
extern int64_t accel__atomic_syncs;

/* Write the array's elements in C order (packing strided data in bounded
 * chunks). Returns false on a write error or when out of memory. */
bool accel__write_array_data(FILE *f, const accel_array *a);

/* Open for reading and return the file size. */
accel_status accel__open_read(const accel_ctx *ctx, const char *func, const char *path, FILE **f, int64_t *size);

/* A loader's reading of the open file `path` of `size` bytes into `out`
 * (its own type); its errors name the public function `func`. */
typedef accel_status (*accel__reader)(accel_ctx *ctx, const char *func, const char *path, FILE *f, int64_t size,
                                      void *out);
/* Open `path` (errors as func's), read it with `read`, close it. */
accel_status accel__load(accel_ctx *ctx, const char *func, const char *path, accel__reader read, void *out);

#endif /* ACCEL_IO_FILE_H */
