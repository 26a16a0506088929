/* Per-stage statistics of a context. */
#include "context.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { STAGE_STATS_V1_SIZE = offsetof(accel_stage_stats, bytes_uploaded) };

void accel__stats_add(accel_ctx *ctx, const char *stage, const accel__stats_delta *d) {
  pthread_mutex_lock(&ctx->stats_mu);
  accel__stage_record *r = NULL;
  for (size_t i = 0; i < ctx->nstages; i++)
    if (strcmp(ctx->stages[i].name, stage) == 0) {
      r = &ctx->stages[i];
      break;
    }
  if (!r) {
    if (ctx->nstages == ctx->stages_cap) {
      size_t cap = ctx->stages_cap ? 2 * ctx->stages_cap : 16;
      accel__stage_record *grown = realloc(ctx->stages, cap * sizeof *grown);
      if (!grown) { /* statistics are best effort; never fail a stage for them */
        pthread_mutex_unlock(&ctx->stats_mu);
        return;
      }
      ctx->stages = grown;
      ctx->stages_cap = cap;
    }
    r = &ctx->stages[ctx->nstages++];
    memset(r, 0, sizeof *r);
    accel__strlcpy(r->name, stage, sizeof r->name);
  }
  r->total.runs += d->runs;
  r->total.gpu_runs += d->gpu_runs;
  r->total.cpu_runs += d->cpu_runs;
  r->total.fallbacks += d->fallbacks;
  r->total.failures += d->failures;
  r->total.seconds += d->seconds;
  r->total.bytes_up += d->bytes_up;
  r->total.bytes_down += d->bytes_down;
  pthread_mutex_unlock(&ctx->stats_mu);
}

accel_status accel_stage_stats_init(accel_stage_stats *stats, size_t struct_size) {
  return accel__versioned_init(__func__, stats, struct_size, NULL, sizeof *stats, STAGE_STATS_V1_SIZE);
}

static accel_status check_out(const accel_ctx *ctx, const char *func, const accel_stage_stats *s) {
  if (!ctx) return accel__fail_in(NULL, func, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  if (!s) return accel__fail_in(ctx, func, ACCEL_ERR_INVALID_ARG, "stats is NULL");
  if (s->struct_size < STAGE_STATS_V1_SIZE)
    return accel__fail_in(ctx, func, ACCEL_ERR_VERSION,
                          "stats->struct_size is %u, smaller than any version's (%zu); call accel_stage_stats_init "
                          "first",
                          s->struct_size, (size_t)STAGE_STATS_V1_SIZE);
  return ACCEL_OK;
}

static void fill(accel_stage_stats *out, const accel__stage_record *r) {
  accel_stage_stats s;
  accel_stage_stats_init(&s, sizeof s);
  accel__strlcpy(s.stage, r->name, sizeof s.stage);
  s.runs = r->total.runs;
  s.gpu_runs = r->total.gpu_runs;
  s.cpu_runs = r->total.cpu_runs;
  s.fallbacks = r->total.fallbacks;
  s.failures = r->total.failures;
  s.seconds = r->total.seconds;
  s.bytes_uploaded = r->total.bytes_up;
  s.bytes_downloaded = r->total.bytes_down;
  accel__versioned_out(NULL, "", "", out, &s, sizeof s, STAGE_STATS_V1_SIZE); /* size checked by check_out */
}

accel_status accel_ctx_stats_count(const accel_ctx *ctx, size_t *count) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  REQUIRE(ctx, count, ACCEL_ERR_INVALID_ARG, "count is NULL");
  accel_ctx *c = (accel_ctx *)ctx;
  pthread_mutex_lock(&c->stats_mu);
  *count = c->nstages;
  pthread_mutex_unlock(&c->stats_mu);
  return ACCEL_OK;
}

accel_status accel_ctx_stats_get(const accel_ctx *ctx, size_t index, accel_stage_stats *stats) {
  accel_status s = check_out(ctx, __func__, stats);
  if (s) return s;
  accel_ctx *c = (accel_ctx *)ctx;
  pthread_mutex_lock(&c->stats_mu);
  if (index < c->nstages) fill(stats, &c->stages[index]);
  else s = FAIL(ctx, ACCEL_ERR_NOT_FOUND, "index %zu, only %zu stages", index, c->nstages);
  pthread_mutex_unlock(&c->stats_mu);
  return s;
}

accel_status accel_ctx_stats_find(const accel_ctx *ctx, const char *stage, accel_stage_stats *stats) {
  accel_status s = check_out(ctx, __func__, stats);
  if (s) return s;
  REQUIRE(ctx, stage, ACCEL_ERR_INVALID_ARG, "stage is NULL");
  accel_ctx *c = (accel_ctx *)ctx;
  s = ACCEL_ERR_NOT_FOUND;
  pthread_mutex_lock(&c->stats_mu);
  for (size_t i = 0; i < c->nstages; i++)
    if (strcmp(c->stages[i].name, stage) == 0) {
      fill(stats, &c->stages[i]);
      s = ACCEL_OK;
      break;
    }
  pthread_mutex_unlock(&c->stats_mu);
  if (s) return FAIL(ctx, s, "stage \"%s\" has not run", stage);
  return ACCEL_OK;
}

accel_status accel_ctx_stats_reset(accel_ctx *ctx) {
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  pthread_mutex_lock(&ctx->stats_mu);
  ctx->nstages = 0;
  pthread_mutex_unlock(&ctx->stats_mu);
  return ACCEL_OK;
}
