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

#include <stdlib.h>
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

/* Device arrays for a CPU run: each slot's host copy (inputs copied down),
 * the job's pointer moved to it. On failure (call->why set) everything
 * is undone. */
static accel_status stage_down(accel_ctx *ctx, const accel__device_slot *slots, int n, void **host, accel__call *call) {
  accel_status s = ACCEL_OK;
  for (int i = 0; i < n; i++) host[i] = NULL;
  for (int i = 0; i < n && !s; i++) {
    if (!(host[i] = malloc(slots[i].bytes ? slots[i].bytes : 1))) {
      accel__why(call->why, "out of host memory for a copy of a device array");
      s = ACCEL_ERR_OUT_OF_MEMORY;
    } else if (slots[i].in && slots[i].bytes) {
      s = ctx->backend->copy(call, host[i], *slots[i].ptr, slots[i].bytes, false);
    }
  }
  if (s) {
    for (int i = 0; i < n; i++) free(host[i]);
    return s;
  }
  for (int i = 0; i < n; i++) {
    void *dev = *slots[i].ptr;
    *slots[i].ptr = host[i];
    host[i] = dev; /* host[] now keeps the device pointers to restore */
  }
  return ACCEL_OK;
}

/* After the CPU run: outputs copied up (when it succeeded), the job's
 * pointers restored, the host copies freed. */
static accel_status stage_up(accel_ctx *ctx, const accel__device_slot *slots, int n, void **dev, accel__call *call,
                             accel_status s) {
  for (int i = 0; i < n; i++) {
    void *h = *slots[i].ptr;
    if (!s && slots[i].out && slots[i].bytes) s = ctx->backend->copy(call, dev[i], h, slots[i].bytes, true);
    *slots[i].ptr = dev[i];
    free(h);
  }
  return s;
}

/* The CPU run of a stage whose job holds device arrays (slots), staged
 * through host copies with the GPU backend's copies, counted in d. */
static int run_cpu_staged(accel_ctx *ctx, accel__stage_fn fn, void *job, const accel__device_slot *slots, int n,
                          accel__call *call, accel__stats_delta *d) {
  void *few[ACCEL__DEVICE_SLOTS_MAX], **ptrs = n > ACCEL__DEVICE_SLOTS_MAX ? malloc(sizeof(void *) * (size_t)n) : few;
  accel__call xfer;
  memset(&xfer, 0, sizeof xfer);
  xfer.ctx = ctx;
  xfer.state = ctx->backend_state;
  xfer.threads = ctx->threads;
  if (!ptrs || !ctx->backend->copy) {
    memset(call, 0, sizeof *call);
    accel__why(call->why, ptrs ? "device arrays on a backend without copies" : "out of host memory");
    if (ptrs != few) free(ptrs);
    return ptrs ? ACCEL_ERR_INTERNAL : ACCEL_ERR_OUT_OF_MEMORY;
  }
  int rc = stage_down(ctx, slots, n, ptrs, &xfer);
  if (rc == ACCEL_OK) {
    rc = run_on(ctx, &accel__cpu_backend, NULL, fn, job, call);
    if (rc == ACCEL__NOT_IMPLEMENTED) { /* restore the pointers; the caller reports it */
      stage_up(ctx, slots, n, ptrs, &xfer, ACCEL_ERR_INTERNAL);
    } else {
      const accel_status up = stage_up(ctx, slots, n, ptrs, &xfer, (accel_status)rc);
      if (rc == ACCEL_OK && up != ACCEL_OK) rc = up, accel__strlcpy(call->why, xfer.why, sizeof call->why);
    }
  } else {
    memset(call, 0, sizeof *call);
    accel__strlcpy(call->why, xfer.why, sizeof call->why);
  }
  d->bytes_up += xfer.bytes_up, d->bytes_down += xfer.bytes_down;
  if (ptrs != few) free(ptrs);
  return rc;
}

accel_status accel__dispatch(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job) {
  return accel__dispatch_device(ctx, stage, fn, job, NULL, 0);
}

accel_status accel__dispatch_device(accel_ctx *ctx, const char *stage, accel__stage_fn fn, void *job,
                                    const accel__device_slot *slots, int nslots) {
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

  rc = nslots ? run_cpu_staged(ctx, fn, job, slots, nslots, &call, &d)
              : run_on(ctx, &accel__cpu_backend, NULL, fn, job, &call);
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
