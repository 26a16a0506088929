/* Logging: one callback per context, a level threshold, serialized calls. */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void stderr_writer(const char *message) {
  /* one fputs of the whole line keeps lines from interleaving */
  char line[1100];
  snprintf(line, sizeof line, "%s\n", message);
  fputs(line, stderr);
}

bool accel__log_enabled(accel_ctx *ctx, accel_log_level level) {
  if (!ctx || level >= ACCEL_LOG_OFF) return false;
  pthread_mutex_lock(&ctx->log_mu);
  bool on = level >= ctx->log_level;
  pthread_mutex_unlock(&ctx->log_mu);
  return on;
}

void accel__log(accel_ctx *ctx, accel_log_level level, const char *fmt, ...) {
  if (!ctx || level >= ACCEL_LOG_OFF) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';

  pthread_mutex_lock(&ctx->log_mu);
  if (level >= ctx->log_level) {
    if (ctx->log_fn) ctx->log_fn(ctx->log_user, level, msg);
    else stderr_writer(msg);
  }
  pthread_mutex_unlock(&ctx->log_mu);
}

accel_status accel_set_log(accel_ctx *ctx, accel_log_fn fn, void *user, accel_log_level level) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  if ((unsigned)level > ACCEL_LOG_OFF) return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "unknown log level %d", (int)level);
  pthread_mutex_lock(&ctx->log_mu);
  ctx->log_fn = fn;
  ctx->log_user = user;
  ctx->log_level = ctx->log_env_level >= 0 ? (accel_log_level)ctx->log_env_level : level;
  pthread_mutex_unlock(&ctx->log_mu);
  return ACCEL_OK;
}
