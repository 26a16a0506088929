/*
 * Replays inputs through a harness's LLVMFuzzerTestOneInput without libFuzzer
 * (the meson tests of suite 'fuzz', any compiler):
 *
 *   replay_<harness> [--ext .a,.b] [--may-be-empty] [--no-fork] PATH...
 *
 * Each PATH is a file or a directory (its regular files, in name order;
 * --ext keeps those whose names end in one of the suffixes). Finding no input
 * is an error unless --may-be-empty is given. Every input runs
 * in a child process, so that one crash does not hide the others; a line per
 * input says ok or how it failed, and the exit status is 1 if any failed.
 * --no-fork runs them in this process (for a debugger).
 *
 * Inputs must not make the library allocate without bound: one allocation of
 * more than 512 MiB is an error (AddressSanitizer's max_allocation_size_mb;
 * without it, glibc's allocation functions wrapped here), and a child may
 * hold at most 2 GiB of address space (without AddressSanitizer).
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_ASAN 1
#endif
#endif

enum { INPUT_SECONDS = 60 };
#define MAX_ALLOCATION ((size_t)512 << 20)

#ifdef REPLAY_ASAN
/* Read by AddressSanitizer at start-up; ASAN_OPTIONS can still override. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=512:allocator_may_return_null=0"; }
#else
/* glibc's allocator, under the names it exports for wrappers like these,
 * which replace malloc and friends for the library and libtiff/libpng/libjpeg
 * too (the executable's definitions come first in symbol lookup). */
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);

static void check_size(size_t n, size_t size) {
  static volatile int failing;
  if (!size || n <= MAX_ALLOCATION / size || failing) return; /* n * size <= MAX_ALLOCATION */
  failing = 1;
  char msg[160];
  const int k = snprintf(msg, sizeof msg, "replay: an allocation of %zu x %zu bytes, over the limit of %zu MiB\n", n,
                         size, MAX_ALLOCATION >> 20);
  if (k > 0 && write(2, msg, (size_t)k) < 0) abort();
  void *frames[32];
  backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
  abort();
}

void *malloc(size_t size) {
  check_size(1, size);
  return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
  check_size(n, size);
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size) {
  check_size(1, size);
  return __libc_realloc(p, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
  check_size(1, size);
  void *p = __libc_memalign(align, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void *aligned_alloc(size_t align, size_t size) {
  check_size(1, size);
  return __libc_memalign(align, size);
}
#endif

typedef struct list {
  char **items;
  size_t n, cap;
} list;

static void push(list *l, char *s) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->items = realloc(l->items, l->cap * sizeof *l->items);
    if (!l->items) abort();
  }
  l->items[l->n++] = s;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool wanted(const char *name, const char *exts) {
  if (!exts) return true;
  const size_t n = strlen(name);
  for (const char *e = exts; *e;) {
    const char *end = strchr(e, ',');
    const size_t k = end ? (size_t)(end - e) : strlen(e);
    if (k && k <= n && strncmp(name + n - k, e, k) == 0) return true;
    e += k + (end != NULL);
  }
  return false;
}

static void collect(const char *path, const char *exts, list *out) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    push(out, strdup(path));
    return;
  }
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  list found = {0};
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !wanted(e->d_name, exts)) continue;
    const size_t n = strlen(path) + strlen(e->d_name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", path, e->d_name);
    if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) push(&found, p);
    else free(p);
  }
  closedir(d);
  if (found.n) qsort(found.items, found.n, sizeof *found.items, by_name);
  for (size_t i = 0; i < found.n; i++) push(out, found.items[i]);
  free(found.items);
}

static void run_one(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  uint8_t *data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 1 << 16;
      if (!(data = realloc(data, cap))) abort();
    }
    const size_t k = fread(data + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  /* an exact-size copy, so that reads past the input are caught */
  uint8_t *input = malloc(n ? n : 1);
  if (!input) abort();
  if (n) memcpy(input, data, n);
  free(data);
  LLVMFuzzerTestOneInput(input, n);
  free(input);
}

static void limit_memory(void) {
#ifndef REPLAY_ASAN
  const struct rlimit r = {(rlim_t)2 << 30, (rlim_t)2 << 30};
  setrlimit(RLIMIT_AS, &r);
#endif
}

int main(int argc, char **argv) {
  const char *exts = NULL;
  bool fork_each = true, may_be_empty = false;
  list inputs = {0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ext") == 0 && i + 1 < argc) exts = argv[++i];
    else if (strcmp(argv[i], "--no-fork") == 0) fork_each = false;
    else if (strcmp(argv[i], "--may-be-empty") == 0) may_be_empty = true;
    else collect(argv[i], exts, &inputs);
  }
  if (inputs.n == 0) {
    if (may_be_empty) {
      printf("no inputs\n");
      return 0;
    }
    fprintf(stderr, "usage: %s [--ext .a,.b] [--may-be-empty] [--no-fork] FILE|DIR...   (no inputs found)\n", argv[0]);
    return 2;
  }
  size_t failed = 0;
  for (size_t i = 0; i < inputs.n; i++) {
    const char *p = inputs.items[i];
    if (!fork_each) {
      run_one(p);
      printf("ok      %s\n", p);
      continue;
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      perror("replay: fork");
      return 2;
    }
    if (pid == 0) {
      limit_memory();
      alarm(INPUT_SECONDS);
      run_one(p);
      exit(0); /* exit, not _exit: LeakSanitizer checks at exit */
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) continue;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      printf("ok      %s\n", p);
      continue;
    }
    failed++;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) printf("FAILED  %s (no result after %d s)\n", p, INPUT_SECONDS);
    else if (WIFSIGNALED(st)) printf("FAILED  %s (signal %d: %s)\n", p, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else printf("FAILED  %s (exit status %d)\n", p, WEXITSTATUS(st));
  }
  printf("%zu of %zu inputs failed\n", failed, inputs.n);
  for (size_t i = 0; i < inputs.n; i++) free(inputs.items[i]);
  free(inputs.items);
  return failed ? 1 : 0;
}
