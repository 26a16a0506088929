/* The index container: entries, the id map, labels, metadata. */
#include "index/index.h"

#include "index/mih.h"

#include <stdlib.h>
#include <string.h>

enum { INDEX_OPTIONS_V1_SIZE = sizeof(accel_index_options), META_MAX = 4095 };

accel_status accel_index_options_init(accel_index_options *o, size_t struct_size) {
  static const accel_index_options DEFAULTS = {.bits = 64, .nfields = 1};
  return accel__versioned_init(__func__, o, struct_size, &DEFAULTS, sizeof DEFAULTS, INDEX_OPTIONS_V1_SIZE);
}

/* ------------------------------------------------------------ the id map */

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static size_t map_slot(const accel_index *ix, uint64_t id) {
  size_t mask = ix->map_cap - 1, i = (size_t)mix(id) & mask;
  while (ix->map_pos[i] && ix->map_ids[i] != id) i = (i + 1) & mask;
  return i;
}

static bool map_find(const accel_index *ix, uint64_t id, size_t *pos) {
  if (!ix->map_cap) return false;
  size_t i = map_slot(ix, id);
  if (!ix->map_pos[i]) return false;
  *pos = (size_t)(ix->map_pos[i] - 1);
  return true;
}

static void map_put(accel_index *ix, uint64_t id, size_t pos) {
  size_t i = map_slot(ix, id);
  ix->map_ids[i] = id;
  ix->map_pos[i] = pos + 1;
}

/* Delete with backward shift (linear probing stays correct without tombstones). */
static void map_del(accel_index *ix, uint64_t id) {
  size_t mask = ix->map_cap - 1, i = map_slot(ix, id);
  if (!ix->map_pos[i]) return;
  ix->map_pos[i] = 0;
  for (size_t j = (i + 1) & mask; ix->map_pos[j]; j = (j + 1) & mask) {
    size_t home = (size_t)mix(ix->map_ids[j]) & mask;
    /* move j back to i if i lies cyclically in [home, j) */
    if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
      ix->map_ids[i] = ix->map_ids[j];
      ix->map_pos[i] = ix->map_pos[j];
      ix->map_pos[j] = 0;
      i = j;
    }
  }
}

static bool map_grow(accel_index *ix, size_t need) {
  if (need * 2 <= ix->map_cap) return true;
  size_t cap = ix->map_cap ? ix->map_cap : 64;
  while (cap < need * 2) cap *= 2;
  uint64_t *ids = calloc(cap, sizeof(uint64_t)), *pos = calloc(cap, sizeof(uint64_t));
  if (!ids || !pos) {
    free(ids);
    free(pos);
    return false;
  }
  uint64_t *old_ids = ix->map_ids, *old_pos = ix->map_pos;
  size_t old_cap = ix->map_cap;
  ix->map_ids = ids;
  ix->map_pos = pos;
  ix->map_cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old_pos[i]) map_put(ix, old_ids[i], (size_t)(old_pos[i] - 1));
  free(old_ids);
  free(old_pos);
  return true;
}

/* ------------------------------------------------------------ storage */

/* Grow to hold `need` entries; all or nothing, so every field keeps one stride. */
static bool reserve(accel_index *ix, size_t need) {
  if (need <= ix->cap) return true;
  size_t cap = ix->cap ? ix->cap : 1024;
  while (cap < need) cap *= 2;
  uint64_t *fresh[ACCEL_INDEX_MAX_FIELDS] = {0};
  bool ok = true;
  for (uint32_t f = 0; f < ix->nfields && ok; f++) ok = (fresh[f] = malloc(cap * ix->words * sizeof(uint64_t))) != NULL;
  uint64_t *ids = ok ? realloc(ix->ids, cap * sizeof(uint64_t)) : NULL;
  if (ids) ix->ids = ids;
  uint64_t *stamps = ids ? realloc(ix->stamps, cap * sizeof(uint64_t)) : NULL;
  if (stamps) ix->stamps = stamps;
  char **labels = stamps ? realloc(ix->labels, cap * sizeof(char *)) : NULL;
  if (labels) ix->labels = labels;
  if (!labels) { /* the realloc'ed arrays are merely larger: harmless */
    for (uint32_t f = 0; f < ix->nfields; f++) free(fresh[f]);
    return false;
  }
  for (uint32_t f = 0; f < ix->nfields; f++) { /* word-major: rows move to the new stride */
    for (uint32_t w = 0; w < ix->words; w++)
      if (ix->n) memcpy(fresh[f] + w * cap, ix->codes[f] + w * ix->cap, ix->n * sizeof(uint64_t));
    free(ix->codes[f]);
    ix->codes[f] = fresh[f];
  }
  ix->cap = cap;
  return true;
}

static void changed(accel_index *ix) {
  ix->version++;
  accel__mih_invalidate(ix);
}

accel__codes accel__index_codes(const accel_index *ix) {
  accel__codes c;
  memset(&c, 0, sizeof c);
  c.words = ix->words;
  c.nfields = ix->nfields;
  c.n = ix->n;
  c.stride = ix->cap;
  for (uint32_t f = 0; f < ix->nfields; f++) c.field[f] = ix->codes[f];
  return c;
}

accel_status accel__codes_from_rows(const uint64_t *rows, size_t nq, uint32_t nfields, uint32_t words, accel__codes *v,
                                    uint64_t **storage) {
  memset(v, 0, sizeof *v);
  v->words = words;
  v->nfields = nfields;
  v->n = nq;
  v->stride = nq;
  *storage = malloc((nq ? nq : 1) * nfields * words * sizeof(uint64_t));
  if (!*storage) return ACCEL_ERR_OUT_OF_MEMORY;
  for (uint32_t f = 0; f < nfields; f++) {
    uint64_t *c = *storage + (size_t)f * words * nq;
    for (size_t i = 0; i < nq; i++)
      for (uint32_t w = 0; w < words; w++) c[w * nq + i] = rows[(i * nfields + f) * words + w];
    v->field[f] = c;
  }
  return ACCEL_OK;
}

accel_status accel_index_create(accel_ctx *ctx, const accel_index_options *in, accel_index **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE(NULL, ctx, ACCEL_ERR_INVALID_ARG, "ctx is NULL");
  accel_index_options o;
  accel_index_options_init(&o, sizeof o);
  if (in) {
    accel_status s = accel__versioned_in(ctx, __func__, "options", in, &o, sizeof o, INDEX_OPTIONS_V1_SIZE);
    if (s) return s;
  }
  if (o.bits != 64 && o.bits != 128 && o.bits != 256)
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "bits must be 64, 128 or 256, not %u", o.bits);
  if (o.nfields < 1 || o.nfields > ACCEL_INDEX_MAX_FIELDS)
    return FAIL(ctx, ACCEL_ERR_INVALID_ARG, "nfields %u outside 1..%d", o.nfields, ACCEL_INDEX_MAX_FIELDS);
  accel_index *ix = calloc(1, sizeof *ix);
  REQUIRE(ctx, ix, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  ix->ctx = ctx;
  ix->bits = o.bits;
  ix->words = o.bits / 64;
  ix->nfields = o.nfields;
  pthread_mutex_init(&ix->mu, NULL);
  *out = ix;
  return ACCEL_OK;
}

void accel_index_destroy(accel_index *ix) {
  if (!ix) return;
  accel__mih_invalidate(ix);
  for (size_t i = 0; i < ix->n; i++) free(ix->labels[i]);
  for (uint32_t f = 0; f < ix->nfields; f++) free(ix->codes[f]);
  free(ix->ids);
  free(ix->stamps);
  free(ix->labels);
  free(ix->map_ids);
  free(ix->map_pos);
  free(ix->meta);
  pthread_mutex_destroy(&ix->mu);
  free(ix);
}

accel_status accel_index_info(const accel_index *ix, uint32_t *bits, uint32_t *nfields, size_t *count) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  if (bits) *bits = ix->bits;
  if (nfields) *nfields = ix->nfields;
  if (count) *count = ix->n;
  return ACCEL_OK;
}

accel_status accel_index_add(accel_index *ix, size_t n, const uint64_t *ids, const uint64_t *codes,
                             const char *const *labels, const uint64_t *stamps) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  if (n == 0) return ACCEL_OK;
  REQUIRE(ix->ctx, ids && codes, ACCEL_ERR_INVALID_ARG, "ids or codes is NULL");
  if (ix->n + n > UINT32_MAX) return FAIL(ix->ctx, ACCEL_ERR_LIMIT, "an index holds at most %u entries", UINT32_MAX);
  for (size_t i = 0; i < n; i++)
    if (ids[i] == UINT64_MAX)
      return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG,
                  "id %llu (UINT64_MAX) is reserved: it marks a missing k-nearest result",
                  (unsigned long long)UINT64_MAX);
  if (!reserve(ix, ix->n + n) || !map_grow(ix, ix->n + n))
    return FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for %zu entries", ix->n + n);
  /* all or nothing: check every id first (a duplicate within the call shows
   * up as soon as the first copy is in the map, so insert as we check and
   * undo on failure) */
  size_t added = 0, pos;
  for (; added < n; added++) {
    if (map_find(ix, ids[added], &pos)) break;
    map_put(ix, ids[added], ix->n + added);
  }
  if (added < n) {
    uint64_t dup = ids[added];
    for (size_t i = 0; i < added; i++) map_del(ix, ids[i]);
    return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG, "id %llu is already in the index%s", (unsigned long long)dup,
                pos >= ix->n ? " (given twice)" : "");
  }
  char **copies = calloc(n, sizeof(char *));
  bool oom = !copies;
  for (size_t i = 0; i < n && !oom; i++)
    if (labels && labels[i] && !(copies[i] = strdup(labels[i]))) oom = true;
  if (oom) {
    for (size_t i = 0; copies && i < n; i++) free(copies[i]);
    free(copies);
    for (size_t i = 0; i < n; i++) map_del(ix, ids[i]);
    return FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory for labels");
  }
  for (size_t i = 0; i < n; i++) {
    const size_t p = ix->n + i;
    ix->ids[p] = ids[i];
    ix->stamps[p] = stamps ? stamps[i] : 0;
    ix->labels[p] = copies[i];
    for (uint32_t f = 0; f < ix->nfields; f++)
      for (uint32_t w = 0; w < ix->words; w++)
        ix->codes[f][w * ix->cap + p] = codes[(i * ix->nfields + f) * ix->words + w];
  }
  free(copies);
  ix->n += n;
  changed(ix);
  return ACCEL_OK;
}

accel_status accel_index_remove(accel_index *ix, size_t n, const uint64_t *ids, size_t *removed) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  if (n && !ids) return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG, "ids is NULL");
  size_t count = 0;
  for (size_t k = 0; k < n; k++) {
    size_t p;
    if (!map_find(ix, ids[k], &p)) continue;
    map_del(ix, ids[k]);
    free(ix->labels[p]);
    const size_t last = ix->n - 1;
    if (p != last) { /* the last entry fills the hole */
      ix->ids[p] = ix->ids[last];
      ix->stamps[p] = ix->stamps[last];
      ix->labels[p] = ix->labels[last];
      for (uint32_t f = 0; f < ix->nfields; f++)
        for (uint32_t w = 0; w < ix->words; w++) ix->codes[f][w * ix->cap + p] = ix->codes[f][w * ix->cap + last];
      map_put(ix, ix->ids[p], p);
    }
    ix->n--;
    count++;
  }
  if (count) changed(ix);
  if (removed) *removed = count;
  return ACCEL_OK;
}

accel_status accel_index_get(const accel_index *ix, size_t position, uint64_t *id, uint64_t *codes, const char **label,
                             uint64_t *stamp) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  if (position >= ix->n) return FAIL(ix->ctx, ACCEL_ERR_NOT_FOUND, "position %zu, only %zu entries", position, ix->n);
  if (id) *id = ix->ids[position];
  if (stamp) *stamp = ix->stamps[position];
  if (label) *label = ix->labels[position];
  if (codes)
    for (uint32_t f = 0; f < ix->nfields; f++)
      for (uint32_t w = 0; w < ix->words; w++) codes[f * ix->words + w] = ix->codes[f][w * ix->cap + position];
  return ACCEL_OK;
}

accel_status accel_index_find(const accel_index *ix, uint64_t id, size_t *position) {
  REQUIRE(NULL, ix && position, ACCEL_ERR_INVALID_ARG, "NULL argument");
  if (!map_find(ix, id, position))
    return FAIL(ix->ctx, ACCEL_ERR_NOT_FOUND, "no entry with id %llu", (unsigned long long)id);
  return ACCEL_OK;
}

accel_status accel_index_set_meta(accel_index *ix, const char *meta) {
  REQUIRE(NULL, ix, ACCEL_ERR_INVALID_ARG, "index is NULL");
  if (meta && strlen(meta) > META_MAX) return FAIL(ix->ctx, ACCEL_ERR_INVALID_ARG, "at most %d bytes", META_MAX);
  char *copy = meta ? strdup(meta) : NULL;
  if (meta && !copy) return FAIL(ix->ctx, ACCEL_ERR_OUT_OF_MEMORY, "out of memory");
  free(ix->meta);
  ix->meta = copy;
  return ACCEL_OK;
}

accel_status accel_index_get_meta(const accel_index *ix, const char **meta) {
  REQUIRE(NULL, ix && meta, ACCEL_ERR_INVALID_ARG, "NULL argument");
  *meta = ix->meta ? ix->meta : "";
  return ACCEL_OK;
}
