/* Contexts: options, environment overrides, backend choice, lifetime. */
#include "context.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Sizes of the first released version of each struct: callers compiled
 * against that version pass these. Fields added later get defaults. */
enum {
  CTX_OPTIONS_V1_SIZE = offsetof(accel_ctx_options, max_pixels),
  CTX_INFO_V1_SIZE = offsetof(accel_ctx_info, max_pixels)
};

static uint64_t next_serial(void) {
  static uint64_t counter;
  return __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ names */

static const char *const BACKEND_NAMES[] = {"auto", "cpu", "cuda"};
static const char *const LEVEL_NAMES[] = {"debug", "info", "warn", "error", "off"};

const char *accel_backend_name(accel_backend_kind kind) { return (unsigned)kind < 3 ? BACKEND_NAMES[kind] : "unknown"; }

const char *accel_log_level_name(accel_log_level level) { return (unsigned)level < 5 ? LEVEL_NAMES[level] : "unknown"; }

accel_status accel_backend_from_string(const char *name, accel_backend_kind *kind) {
  REQUIRE(NULL, name && kind, ACCEL_ERR_INVALID_ARG, "NULL argument");
  int i = 0;
  accel_status s = accel__parse_name(name, BACKEND_NAMES, 3, NULL, 0, "backend", "expected auto, cpu or cuda", &i);
  if (!s) *kind = (accel_backend_kind)i;
  return s;
}

accel_status accel_log_level_from_string(const char *name, accel_log_level *level) {
  REQUIRE(NULL, name && level, ACCEL_ERR_INVALID_ARG, "NULL argument");
  int i = 0;
  accel_status s = accel__parse_name(name, LEVEL_NAMES, 5, "warning", ACCEL_LOG_WARN, "log level",
                                     "expected debug, info, warn, error or off", &i);
  if (!s) *level = (accel_log_level)i;
  return s;
}

/* ---------------------------------------------------------- options */

accel_status accel_ctx_options_init(accel_ctx_options *opts, size_t struct_size) {
  static const accel_ctx_options DEFAULTS = {
      .backend = ACCEL_BACKEND_AUTO, .fallback = ACCEL_FALLBACK_ALLOW, .log_level = ACCEL_LOG_WARN};
  return accel__versioned_init(__func__, opts, struct_size, &DEFAULTS, sizeof DEFAULTS, CTX_OPTIONS_V1_SIZE);
}

static accel_status read_options(const char *func, const accel_ctx_options *in, accel_ctx_options *o) {
  accel_ctx_options_init(o, sizeof *o);
  if (in) {
    accel_status s = accel__versioned_in(NULL, func, "opts", in, o, sizeof *o, CTX_OPTIONS_V1_SIZE);
    if (s) return s;
  }
  if ((unsigned)o->backend > ACCEL_BACKEND_CUDA)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "unknown backend %d", (int)o->backend);
  if ((unsigned)o->fallback > ACCEL_FALLBACK_DENY)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "unknown fallback policy %d", (int)o->fallback);
  if ((unsigned)o->log_level > ACCEL_LOG_OFF)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "unknown log level %d", (int)o->log_level);
  if ((unsigned)o->sync > ACCEL_SYNC_NONE)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG,
                          "unknown sync policy %d (ACCEL_SYNC_INDEX, ACCEL_SYNC_ALL or ACCEL_SYNC_NONE)", (int)o->sync);
  if (o->device < 0)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "device index %d is negative", (int)o->device);
  if (o->cpu_threads < 0 || o->cpu_threads > ACCEL_CPU_THREADS_MAX)
    return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG,
                          "cpu_threads %d is out of range (0 = all cores, else 1..%d)", (int)o->cpu_threads,
                          (int)ACCEL_CPU_THREADS_MAX);
  return ACCEL_OK;
}

/* ACCEL_BACKEND and ACCEL_LOG override the program's choice. */
static accel_status apply_environment(accel_ctx_options *o, int *log_env_level) {
  *log_env_level = -1;
  const char *v = getenv("ACCEL_BACKEND");
  if (v && *v) {
    accel_backend_kind k;
    if (accel_backend_from_string(v, &k))
      return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "ACCEL_BACKEND=\"%s\" is not auto, cpu or cuda", v);
    o->backend = k;
  }
  v = getenv("ACCEL_LOG");
  if (v && *v) {
    accel_log_level l;
    if (accel_log_level_from_string(v, &l))
      return accel__fail(NULL, ACCEL_ERR_INVALID_ARG, "ACCEL_LOG=\"%s\" is not debug, info, warn, error or off", v);
    o->log_level = l;
    *log_env_level = (int)l;
  }
  return ACCEL_OK;
}

/* ---------------------------------------------------------- backend */

static accel_status choose_backend(accel_ctx *ctx, const accel_ctx_options *o, const accel__backend *gpu) {
  ctx->backend = &accel__cpu_backend;
  ctx->device = -1;
  if (o->backend == ACCEL_BACKEND_CPU) return ACCEL_OK;

  char why[ACCEL_REASON_MAX] = "";
  accel_status s = ACCEL_ERR_NO_DEVICE;
  if (gpu) {
    accel__backend_config cfg = {
        .device = o->device, .memory_budget = o->device_memory_budget, .threads = ctx->threads};
    void *state = NULL;
    s = gpu->open(&cfg, &state, why);
    if (s == ACCEL_OK) {
      ctx->backend = gpu;
      ctx->backend_state = state;
      ctx->device = cfg.device;
      ctx->memory_budget = cfg.memory_budget;
      return ACCEL_OK;
    }
    if (!why[0]) accel__strlcpy(why, accel_status_describe(s), sizeof why);
  } else {
    accel__strlcpy(why, "this libaccel was built without CUDA", sizeof why);
  }

  if (o->backend == ACCEL_BACKEND_AUTO) {
    accel__log(ctx, ACCEL_LOG_INFO, "accel: CUDA backend not used: %s; running on the CPU", why);
    return ACCEL_OK;
  }
  /* An explicit CUDA request that cannot be met is a GPU failure like any other. */
  if (o->fallback == ACCEL_FALLBACK_DENY)
    return accel__fail(NULL, ACCEL_ERR_NO_DEVICE, "CUDA backend requested but unavailable: %s (fallback policy DENY)",
                       why);
  accel__log(ctx, ACCEL_LOG_WARN, "[GPU] ctx.init failed: %s. CPU fallback.", why);
  accel__stats_delta d = {.runs = 1, .cpu_runs = 1, .fallbacks = 1};
  accel__stats_add(ctx, "ctx.init", &d);
  return ACCEL_OK;
}

/* ---------------------------------------------------------- lifetime */

accel_status accel__ctx_create_with(const accel_ctx_options *opts, const accel__backend *gpu, accel_ctx **out) {
  static const char func[] = "accel_ctx_create"; /* the public function, in messages */
  if (!out) return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  accel_ctx_options o;
  int log_env_level;
  accel_status s = read_options(func, opts, &o);
  if (!s) s = apply_environment(&o, &log_env_level);
  if (s) return s;

  accel_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return accel__fail_in(NULL, func, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->serial = next_serial();
  pthread_mutex_init(&ctx->log_mu, NULL);
  pthread_mutex_init(&ctx->stats_mu, NULL);
  ctx->log_fn = o.log_fn;
  ctx->log_user = o.log_user;
  ctx->log_level = o.log_level;
  ctx->log_env_level = log_env_level;
  ctx->fallback = o.fallback;
  ctx->threads = o.cpu_threads ? o.cpu_threads : accel__default_threads();
  ctx->max_pixels = o.max_pixels ? o.max_pixels : (uint64_t)ACCEL_DEFAULT_MAX_PIXELS;
  ctx->sync = o.sync;

  s = choose_backend(ctx, &o, gpu);
  if (s) {
    accel_ctx_destroy(ctx);
    return s;
  }
  accel__log(ctx, ACCEL_LOG_DEBUG, "accel: context ready: libaccel %s, backend %s, %d CPU threads",
             accel_version_string(), ctx->backend->name, ctx->threads);
  *out = ctx;
  return ACCEL_OK;
}

accel_status accel_ctx_create(const accel_ctx_options *opts, accel_ctx **out) {
#if ACCEL_HAVE_CUDA
  /* Test-only (docs/backends.md): the CUDA backend's ops in host emulation,
   * for tests of bindings that cannot reach accel__cuda_emulated_backend. */
  const char *emulate = getenv("ACCEL_CUDA_EMULATE");
  if (emulate && strcmp(emulate, "1") == 0) return accel__ctx_create_with(opts, accel__cuda_emulated_backend(), out);
  return accel__ctx_create_with(opts, &accel__cuda_backend, out);
#else
  return accel__ctx_create_with(opts, NULL, out);
#endif
}

void accel_ctx_destroy(accel_ctx *ctx) {
  if (!ctx) return;
  if (ctx->backend && ctx->backend->close && ctx->backend_state) ctx->backend->close(ctx->backend_state);
  free(ctx->stages);
  pthread_mutex_destroy(&ctx->log_mu);
  pthread_mutex_destroy(&ctx->stats_mu);
  free(ctx);
}

int accel__ctx_threads(const accel_ctx *ctx) { return ctx->threads; }

bool accel__ctx_on_gpu(const accel_ctx *ctx) { return ctx && ctx->backend && ctx->backend != &accel__cpu_backend; }

bool accel__ctx_syncs(const accel_ctx *ctx, bool index) {
  const accel_sync_policy p = ctx ? ctx->sync : ACCEL_SYNC_INDEX;
  return p == ACCEL_SYNC_ALL || (p == ACCEL_SYNC_INDEX && index);
}

uint64_t accel__ctx_max_pixels(const accel_ctx *ctx) {
  return ctx ? ctx->max_pixels : (uint64_t)ACCEL_DEFAULT_MAX_PIXELS;
}

accel_status accel_ctx_info_init(accel_ctx_info *info, size_t struct_size) {
  return accel__versioned_init(__func__, info, struct_size, NULL, sizeof *info, CTX_INFO_V1_SIZE);
}

accel_status accel_ctx_query(const accel_ctx *ctx, accel_ctx_info *info) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, info, ACCEL_ERR_INVALID_ARG, "info is NULL");
  accel_ctx_info i;
  accel_ctx_info_init(&i, sizeof i);
  i.backend = ctx->backend->kind;
  i.device = ctx->device;
  i.fallback = ctx->fallback;
  i.device_memory_budget = ctx->memory_budget;
  i.cpu_threads = ctx->threads;
  i.max_pixels = ctx->max_pixels;
  accel_ctx *c = (accel_ctx *)ctx;
  pthread_mutex_lock(&c->log_mu);
  i.log_level = c->log_level;
  pthread_mutex_unlock(&c->log_mu);
  return accel__versioned_out(ctx, __func__, "info", info, &i, sizeof i, CTX_INFO_V1_SIZE);
}
