/* Status names and the per-thread, per-context last error. */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Each thread keeps the last message of a few contexts (least recently
 * written slot is reused). A context is identified by its serial, which is
 * never reused, so a destroyed context's message cannot leak into a new one.
 * Calls without a context use serial 0. */
enum { SLOTS = 4, MSG_MAX = 1024 };

typedef struct err_slot {
  uint64_t serial;
  uint64_t stamp; /* 0: empty */
  char msg[MSG_MAX];
} err_slot;

static _Thread_local err_slot tls_slots[SLOTS];
static _Thread_local uint64_t tls_clock;

static uint64_t serial_of(const accel_ctx *ctx) { return ctx ? ctx->serial : 0; }

static err_slot *slot_for(uint64_t serial, bool create) {
  err_slot *oldest = &tls_slots[0];
  for (int i = 0; i < SLOTS; i++) {
    err_slot *s = &tls_slots[i];
    if (s->stamp && s->serial == serial) return s;
    if (s->stamp < oldest->stamp) oldest = s;
  }
  if (!create) return NULL;
  oldest->serial = serial;
  return oldest;
}

/* The message is "<func>: <fmt's text>", or fmt's text alone without func.
 * It is formatted apart first: an argument may be the slot's old message
 * (a caller adding context to the error of a call it made). */
static void set_error(const accel_ctx *ctx, accel_status status, const char *func, const char *fmt, va_list ap) {
  char msg[MSG_MAX];
  size_t at = 0;
  if (func) {
    const int n = snprintf(msg, sizeof msg, "%s: ", func);
    at = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
  }
  vsnprintf(msg + at, sizeof msg - at, fmt, ap);
  err_slot *s = slot_for(serial_of(ctx), true);
  memcpy(s->msg, msg, strlen(msg) + 1);
  s->stamp = ++tls_clock;
  if (ctx) accel__log((accel_ctx *)ctx, ACCEL_LOG_DEBUG, "accel: %s: %s", accel_status_string(status), s->msg);
}

accel_status accel__fail(const accel_ctx *ctx, accel_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(ctx, status, NULL, fmt, ap);
  va_end(ap);
  return status;
}

accel_status accel__fail_in(const accel_ctx *ctx, const char *func, accel_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(ctx, status, func, fmt, ap);
  va_end(ap);
  return status;
}

const char *accel_last_error(const accel_ctx *ctx) {
  err_slot *s = slot_for(serial_of(ctx), false);
  return s ? s->msg : "";
}

typedef struct status_text {
  const char *name;
  const char *description;
} status_text;

static const status_text STATUS_TEXT[] = {
    [ACCEL_OK] = {"ACCEL_OK", "success"},
    [ACCEL_ERR_INVALID_ARG] = {"ACCEL_ERR_INVALID_ARG", "invalid argument"},
    [ACCEL_ERR_OUT_OF_MEMORY] = {"ACCEL_ERR_OUT_OF_MEMORY", "out of host memory"},
    [ACCEL_ERR_NO_DEVICE] = {"ACCEL_ERR_NO_DEVICE", "no usable GPU device"},
    [ACCEL_ERR_DEVICE] = {"ACCEL_ERR_DEVICE", "GPU device or driver error"},
    [ACCEL_ERR_DEVICE_MEMORY] = {"ACCEL_ERR_DEVICE_MEMORY", "out of GPU memory or over the memory budget"},
    [ACCEL_ERR_UNSUPPORTED] = {"ACCEL_ERR_UNSUPPORTED", "not supported"},
    [ACCEL_ERR_CANCELLED] = {"ACCEL_ERR_CANCELLED", "cancelled by the progress callback"},
    [ACCEL_ERR_IO] = {"ACCEL_ERR_IO", "input/output error"},
    [ACCEL_ERR_FORMAT] = {"ACCEL_ERR_FORMAT", "unreadable or unsupported file format"},
    [ACCEL_ERR_DECODE] = {"ACCEL_ERR_DECODE", "corrupt or truncated image data"},
    [ACCEL_ERR_LIMIT] = {"ACCEL_ERR_LIMIT", "input exceeds a configured limit"},
    [ACCEL_ERR_VERSION] = {"ACCEL_ERR_VERSION", "incompatible struct size or version"},
    [ACCEL_ERR_NOT_FOUND] = {"ACCEL_ERR_NOT_FOUND", "not found"},
    [ACCEL_ERR_INTERNAL] = {"ACCEL_ERR_INTERNAL", "internal error in libaccel"},
};

static const status_text *text_of(accel_status status) {
  unsigned v = (unsigned)status;
  if (v < sizeof STATUS_TEXT / sizeof STATUS_TEXT[0] && STATUS_TEXT[v].name) return &STATUS_TEXT[v];
  return NULL;
}

const char *accel_status_string(accel_status status) {
  const status_text *t = text_of(status);
  return t ? t->name : "ACCEL_ERR_UNKNOWN";
}

const char *accel_status_describe(accel_status status) {
  const status_text *t = text_of(status);
  return t ? t->description : "unknown status code";
}

bool accel__is_backend_failure(accel_status status) {
  switch (status) {
  case ACCEL_ERR_OUT_OF_MEMORY:
  case ACCEL_ERR_NO_DEVICE:
  case ACCEL_ERR_DEVICE:
  case ACCEL_ERR_DEVICE_MEMORY:
  case ACCEL_ERR_UNSUPPORTED:
  case ACCEL_ERR_INTERNAL: return true;
  default: return false; /* the caller's input or request: rerunning elsewhere cannot help */
  }
}
