/*
 * The dispatcher: the one place that picks the backend for a stage, runs it,
 * and applies the fallback policy when a GPU backend fails.
 *
 *   GPU op succeeds                -> its result; counted as a GPU run
 *   GPU op has no implementation   -> CPU run (DEBUG line; not a fallback)
 *   GPU op declines this case      -> CPU run (DEBUG line with the reason;
 *                                     not a fallback, under either policy)
 *   GPU op fails, caller's fault   -> that error (INVALID_ARG, CANCELLED, ...)
 *   GPU op fails, backend's fault  -> ALLOW: WARN "[GPU] <stage> failed:
 *                                     <reason>. CPU fallback.", counted,
 *                                     CPU rerun;  DENY: the error
 */
#include "context.h"

#include <string.h>

static void strip_period(char *why) {
  size_t n = strlen(why);
  while (n && (why[n - 1] == '.' || why[n - 1] == ' ' || why[n - 1] == '\n')) why[--n] = '\0';
}

static int run_on(accel_ctx *ctx, const accel__backend *b, void *state, accel__stage_fn fn, void *job,
                  accel__call *call) {
  memset(call, 0, sizeof *call);
  call->ctx = ctx;
  call->state = state;
  call->threads = ctx->threads;
  return fn(b, call, job);
}

accel_status accel__dispatch(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job) {
  accel__stats_delta d = {.runs = 1};
  double t0 = accel__now();
  accel__call call;
  int rc;

  if (ctx->backend != &accel__cpu_backend) {
    rc = run_on(ctx, ctx->backend, ctx->backend_state, fn, job, &call);
    d.bytes_up = call.bytes_up, d.bytes_down = call.bytes_down; /* a failed attempt's copies count too */
    if (rc == ACCEL_OK) {
      d.gpu_runs = 1;
      goto done;
    }
    if (rc == ACCEL__NOT_IMPLEMENTED) {
      accel__log(ctx, ACCEL_LOG_DEBUG, "accel: %s has no %s implementation; running on the CPU", stage,
                 ctx->backend->name);
    } else if (call.declined) {
      strip_period(call.why);
      accel__log(ctx, ACCEL_LOG_DEBUG, "accel: %s is left to the CPU by %s: %s", stage, ctx->backend->name, call.why);
    } else {
      strip_period(call.why);
      const char *why = call.why[0] ? call.why : accel_status_describe((accel_status)rc);
      if (!accel__is_backend_failure((accel_status)rc)) {
        accel__fail(ctx, (accel_status)rc, "%s: %s", stage, why);
        d.failures = 1;
        goto done;
      }
      if (ctx->fallback == ACCEL_FALLBACK_DENY) {
        accel__fail(ctx, (accel_status)rc, "[GPU] %s failed: %s (fallback policy DENY)", stage, why);
        d.failures = 1;
        goto done;
      }
      accel__log(ctx, ACCEL_LOG_WARN, "[GPU] %s failed: %s. CPU fallback.", stage, why);
      d.fallbacks = 1;
    }
  }

  rc = run_on(ctx, &accel__cpu_backend, NULL, fn, job, &call);
  if (rc == ACCEL__NOT_IMPLEMENTED) {
    rc = accel__fail(ctx, ACCEL_ERR_INTERNAL, "%s: no CPU implementation", stage);
    d.failures = 1;
  } else if (rc != ACCEL_OK) {
    strip_period(call.why);
    accel__fail(ctx, (accel_status)rc, "%s: %s", stage,
                call.why[0] ? call.why : accel_status_describe((accel_status)rc));
    d.failures = 1;
  } else {
    d.cpu_runs = 1;
  }

done:
  d.seconds = accel__now() - t0;
  accel__stats_add(ctx, stage, &d);
  return (accel_status)rc;
}
