/* tests/fuzz/fuzz.h - what the fuzz harnesses share.
 *
 * Each harness defines LLVMFuzzerTestOneInput. Built with -Dfuzzing=true it
 * links libFuzzer; in every other build it links replay.c, which runs it on
 * files (the committed corpus, the hostile inputs of tests/data/bad).
 * A harness aborts (through FUZZ_CHECK) when the library breaks a promise of
 * its headers; crashes and sanitizer reports speak for themselves.
 */
#ifndef ACCEL_FUZZ_H
#define ACCEL_FUZZ_H

#include <accel/accel.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The pixel limit of the harnesses' context: large enough for every seed,
 * small enough that no input can make a loader allocate gigabytes. */
enum { FUZZ_MAX_PIXELS = 1 << 22 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's one context: CPU backend, one thread, logging off,
 * FUZZ_MAX_PIXELS. Created on first use, never destroyed. */
accel_ctx *fuzz_ctx(void);

/* A path naming a file that holds exactly data[0, size): an in-memory file
 * (memfd) reopened through /proc/self/fd, rewritten by every call. */
const char *fuzz_input_path(const void *data, size_t size);

/* A path for `name` (a plain file name) in the process's scratch directory,
 * for the save-and-reload checks. Valid until the next call. */
const char *fuzz_scratch_path(const char *name);

/* Report a broken expectation and abort (a crash for libFuzzer, a failed
 * test for the replay). */
_Noreturn void fuzz_fail(const char *file, int line, const char *what, const char *detail);

#define FUZZ_CHECK(cond)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond, accel_last_error(fuzz_ctx()));                                   \
  } while (0)

/* Is `s` one of the statuses a function documents for a bad input? `allowed`
 * lists them, ended by ACCEL_OK. */
bool fuzz_status_in(accel_status s, const accel_status *allowed);

/* Check that a call failed cleanly: its status is one of `allowed` (ended by
 * ACCEL_OK) and it left no output behind. */
void fuzz_check_failure(const char *file, int line, accel_status status, const accel_status *allowed, const void *out);
#define FUZZ_CHECK_FAILURE(status, allowed, out) fuzz_check_failure(__FILE__, __LINE__, (status), (allowed), (out))

/* A loader and a saver of one file format, as io.h declares them. */
typedef accel_status (*fuzz_load_fn)(accel_ctx *ctx, const char *path, accel_buffer **out);
typedef accel_status (*fuzz_save_fn)(accel_ctx *ctx, const char *path, const accel_array *array);

/* `load` on the input data[0, size) into *out: true when it loads; a failure
 * must be clean (FUZZ_CHECK_FAILURE with `errors`, ended by ACCEL_OK). */
bool fuzz_load(fuzz_load_fn load, const uint8_t *data, size_t size, const accel_status *errors, accel_buffer **out);

/* `v` saved with `save` as the scratch file `name` and loaded again with
 * `load` comes back unchanged (fuzz_same_array). */
void fuzz_check_round_trip(fuzz_load_fn load, fuzz_save_fn save, const char *name, const accel_array *v);

/* The view of a buffer the library returned (aborts if it cannot be had). */
accel_array fuzz_view(const accel_buffer *buffer);

/* Elements of a view (the product of its shape). */
int64_t fuzz_count(const accel_array *view);

/* Same dtype, shape and bytes (both C-contiguous, as buffers are). */
bool fuzz_same_array(const accel_array *a, const accel_array *b);

/* Little-endian integers from untrusted bytes. */
uint64_t fuzz_le64(const uint8_t *p);
uint32_t fuzz_le32(const uint8_t *p);

#endif
