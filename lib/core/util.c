/* Small utilities: time, overflow-checked sizes, thread count, strings. */
#include "internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

double accel__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool accel__mul_overflow(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }

int accel__default_threads(void) {
#ifdef _OPENMP
  int n = omp_get_max_threads();
#else
  long n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
  if (n > ACCEL_CPU_THREADS_MAX) n = ACCEL_CPU_THREADS_MAX; /* OMP_NUM_THREADS=100000 */
  return n > 0 ? (int)n : 1;
}

void accel__strlcpy(char *dst, const char *src, size_t size) {
  if (!size) return;
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

size_t accel__lower_bound_u64(const uint64_t *v, size_t n, uint64_t key) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

accel_status accel__parse_name(const char *name, const char *const *names, int n, const char *alias, int alias_index,
                               const char *what, const char *choices, int *index) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(name, names[i]) == 0) {
      *index = i;
      return ACCEL_OK;
    }
  if (alias && strcasecmp(name, alias) == 0) {
    *index = alias_index;
    return ACCEL_OK;
  }
  return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "unknown %s \"%s\" (%s)", what, name, choices);
}

static void vwhy(char *why, const char *fmt, va_list ap) {
  vsnprintf(why, ACCEL_REASON_MAX, fmt, ap);
  size_t n = strlen(why);
  while (n && (why[n - 1] == '.' || why[n - 1] == '\n' || why[n - 1] == ' ')) why[--n] = '\0';
}

void accel__why(char *why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwhy(why, fmt, ap);
  va_end(ap);
}

accel_status accel__decline(accel__call *call, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwhy(call->why, fmt, ap);
  va_end(ap);
  call->declined = true;
  return ACCEL_ERR_UNSUPPORTED;
}

/* The caller's struct_size, or ACCEL_ERR_VERSION if no version was ever that small. */
static accel_status struct_size_of(const accel_ctx *ctx, const char *func, const char *what, const void *theirs,
                                   size_t min_size, uint32_t *size) {
  memcpy(size, theirs, sizeof *size);
  if (*size < min_size)
    return accel__fail_in(ctx, func, ACCEL_ERR_VERSION,
                          "%s->struct_size is %u, smaller than any version's (%zu); call the matching _init function "
                          "first",
                          what, *size, min_size);
  return ACCEL_OK;
}

accel_status accel__versioned_in(const accel_ctx *ctx, const char *func, const char *what, const void *theirs,
                                 void *ours, size_t ours_size, size_t min_size) {
  uint32_t size;
  accel_status s = struct_size_of(ctx, func, what, theirs, min_size, &size);
  if (s) return s;
  if (size > ours_size) {
    const unsigned char *extra = (const unsigned char *)theirs + ours_size;
    for (size_t i = 0; i < size - ours_size; i++)
      if (extra[i])
        return accel__fail_in(ctx, func, ACCEL_ERR_VERSION,
                              "%s sets fields this libaccel (%s) does not know (struct_size %u > %zu)", what,
                              accel_version_string(), size, ours_size);
  }
  memcpy((char *)ours + sizeof size, (const char *)theirs + sizeof size,
         (size < ours_size ? size : ours_size) - sizeof size);
  return ACCEL_OK;
}

accel_status accel__versioned_out(const accel_ctx *ctx, const char *func, const char *what, void *theirs,
                                  const void *ours, size_t ours_size, size_t min_size) {
  uint32_t size;
  accel_status s = struct_size_of(ctx, func, what, theirs, min_size, &size);
  if (s) return s;
  size_t n = size < ours_size ? size : ours_size;
  memcpy((char *)theirs + sizeof size, (const char *)ours + sizeof size, n - sizeof size);
  if (size > ours_size) memset((char *)theirs + ours_size, 0, size - ours_size);
  return ACCEL_OK;
}

accel_status accel__versioned_init(const char *func, void *theirs, size_t size, const void *defaults, size_t ours_size,
                                   size_t min_size) {
  if (!theirs) return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "the struct pointer is NULL");
  if (size < min_size || size > UINT32_MAX)
    return accel__fail_in(NULL, func, ACCEL_ERR_VERSION,
                          "struct_size %zu is not a layout this libaccel (%s) knows (%zu bytes or more; pass sizeof "
                          "of the struct)",
                          size, accel_version_string(), min_size);
  const size_t n = size < ours_size ? size : ours_size;
  if (defaults) memcpy(theirs, defaults, n);
  else memset(theirs, 0, n);
  if (size > ours_size) memset((char *)theirs + ours_size, 0, size - ours_size);
  const uint32_t s32 = (uint32_t)size;
  memcpy(theirs, &s32, sizeof s32);
  return ACCEL_OK;
}

accel_status accel__parallel_units(accel__call *call, int64_t n, bool (*work)(void *user, int64_t i), void *user,
                                   const accel__units_progress *p, const char *oom_what) {
  int64_t done = 0, reported = 0;
  int stop = 0; /* 1: cancelled, 2: out of memory */
#pragma omp parallel for schedule(dynamic, 1) num_threads(call->threads)
  for (int64_t i = 0; i < n; i++) {
    int halt;
#pragma omp atomic read
    halt = stop;
    if (halt) continue;
    if (!work(user, i)) {
#pragma omp atomic write
      stop = 2;
      continue;
    }
    int64_t now;
#pragma omp atomic capture
    now = ++done;
#ifdef _OPENMP
    const bool caller = omp_get_thread_num() == 0;
#else
    const bool caller = true;
#endif
    if (!caller || !p || !p->fn) continue;
    if (p->reports > 0) {
      if (now * p->reports / n <= reported || now >= n) continue;
      reported = now * p->reports / n;
    }
    if (p->fn(p->user, p->stage, p->base + p->span * (double)now / (double)n)) {
#pragma omp atomic write
      stop = 1;
    }
  }
  if (stop == 1) {
    accel__why(call->why, "cancelled by the progress callback");
    return ACCEL_ERR_CANCELLED;
  }
  if (stop == 2) {
    accel__why(call->why, "out of memory for %s", oom_what);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return ACCEL_OK;
}
