/* Image files hashed into a Hamming index, reusing an index file. */
#include "catalog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CHUNK = 512, META_FORMAT = 1 };

uint32_t catalog_bits(const char *cmd, const accel_hash_options *o) {
  uint32_t most = 0;
  for (uint32_t k = 0; k < o->nkinds; k++) {
    uint32_t b = 0;
    if (accel_hash_bits(o->kinds[k], o->hash_size, o->color_binbits, &b)) {
      cli_error("%s: %s", cmd, accel_last_error(NULL));
      return 0;
    }
    if (b > most) most = b;
  }
  if (most > 256) {
    cli_error("%s: hashes of %u bits; the index holds up to 256 bits a kind (--size 16 or less)", cmd, most);
    return 0;
  }
  return most <= 64 ? 64 : most <= 128 ? 128 : 256;
}

void catalog_meta(const accel_hash_options *o, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "accel-catalog %d kinds=", META_FORMAT);
  for (uint32_t k = 0; k < o->nkinds && at < n; k++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? "," : "", accel_hash_kind_name(o->kinds[k]));
  if (at < n)
    snprintf(buf + at, n - at, " size=%d binbits=%d fast=%d", (int)o->hash_size, (int)o->color_binbits, (int)o->fast);
}

bool catalog_parse_meta(const char *meta, accel_hash_options *o) {
  int format = 0, size = 0, binbits = 0, fast = 0, used = 0;
  char kinds[256];
  if (sscanf(meta, "accel-catalog %d kinds=%255s size=%d binbits=%d fast=%d%n", &format, kinds, &size, &binbits, &fast,
             &used) != 5 ||
      format != META_FORMAT || meta[used] != '\0')
    return false;
  accel_hash_options_init(o, sizeof *o);
  o->hash_size = size;
  o->color_binbits = binbits;
  o->fast = fast;
  o->nkinds = 0;
  char *save = NULL;
  for (char *t = strtok_r(kinds, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (o->nkinds == ACCEL_HASH_KIND_COUNT || accel_hash_kind_from_string(t, &o->kinds[o->nkinds])) return false;
    o->nkinds++;
  }
  size_t slot;
  return o->nkinds > 0 && accel_hash_slot_bytes(o, &slot) == ACCEL_OK;
}

bool catalog_fits(const accel_index *ix, const accel_hash_options *o) {
  uint32_t bits = 0, nfields = 0;
  if (accel_index_info(ix, &bits, &nfields, NULL)) return false;
  uint32_t want = 0;
  for (uint32_t k = 0; k < o->nkinds; k++) {
    uint32_t b = 0;
    if (accel_hash_bits(o->kinds[k], o->hash_size, o->color_binbits, &b)) return false;
    if (b > want) want = b;
  }
  want = want <= 64 ? 64 : want <= 128 ? 128 : want <= 256 ? 256 : 0;
  return want && bits == want && nfields == o->nkinds;
}

void catalog_codes(const uint8_t *slots, size_t slot_bytes, uint32_t nkinds, uint32_t bits, uint64_t *codes) {
  const uint32_t words = bits / 64;
  for (uint32_t k = 0; k < nkinds; k++) {
    const uint8_t *h = slots + k * slot_bytes;
    for (uint32_t w = 0; w < words; w++) {
      uint64_t v = 0;
      for (uint32_t b = 0; b < 8; b++) {
        const size_t at = (size_t)w * 8 + b;
        v = v << 8 | (at < slot_bytes ? h[at] : 0);
      }
      codes[k * words + w] = v;
    }
  }
}

const char *catalog_label(const accel_index *ix, uint64_t id) {
  size_t pos;
  const char *label = NULL;
  if (accel_index_find(ix, id, &pos) == ACCEL_OK) accel_index_get(ix, pos, NULL, NULL, &label, NULL);
  return label ? label : "?";
}

/* A file's size and modification time, mixed into one number. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t file_stamp(const struct stat *st) {
  const uint64_t t = (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
  return mix((uint64_t)st->st_size ^ mix(t + 0x9e3779b97f4a7c15ull)) | 1; /* never 0: 0 means "no stamp" */
}

typedef struct label_pos {
  const char *label;
  size_t pos;
} label_pos;

static int cmp_label(const void *a, const void *b) {
  return strcmp(((const label_pos *)a)->label, ((const label_pos *)b)->label);
}

/* Open the index file if there is one with the same hashes; else a new index. */
static int open_index(accel_ctx *ctx, const catalog_options *o, uint32_t bits, const char *meta, accel_index **out,
                      bool *fresh) {
  *out = NULL;
  *fresh = true;
  if (o->index_path && access(o->index_path, F_OK) == 0) {
    accel_index *ix = NULL;
    if (accel_index_load(ctx, o->index_path, &ix)) {
      cli_error("%s: %s (remove the file or name another --index)", o->cmd, accel_last_error(ctx));
      return CLI_SOME_FAILED; /* an input refused */
    }
    const char *m = "";
    accel_index_get_meta(ix, &m);
    if (strcmp(m, meta) == 0 && catalog_fits(ix, &o->hash)) {
      *out = ix;
      *fresh = false;
      return CLI_OK;
    }
    if (strncmp(m, "accel-catalog ", 14) != 0) {
      cli_error("%s: %s is an index but not one of image hashes (meta '%s'); name another --index", o->cmd,
                o->index_path, m);
      accel_index_destroy(ix);
      return CLI_SOME_FAILED;
    }
    cli_error("%s: %s holds other hashes (%s); rebuilding it with %s", o->cmd, o->index_path, m, meta);
    accel_index_destroy(ix);
  }
  accel_index_options io;
  accel_index_options_init(&io, sizeof io);
  io.bits = bits;
  io.nfields = o->hash.nkinds;
  if (accel_index_create(ctx, &io, out) || accel_index_set_meta(*out, meta)) {
    cli_error("%s: %s", o->cmd, accel_last_error(ctx));
    accel_index_destroy(*out);
    *out = NULL;
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* The work of one catalog_build. */
typedef struct build {
  const catalog_options *o;
  accel_index *ix;
  uint32_t bits;
  size_t slot;
  uint64_t next_id; /* for new entries */
  char **todo;      /* the files to hash, */
  uint64_t *stamps; /* with their stamps */
  size_t ntodo;
  bool changed; /* the index differs from its file */
} build;

/* Each path once, in byte order (the caller's strings); NULL when out of memory. */
static char **unique_paths(const cli_paths *paths, size_t *n) {
  char **want = malloc((paths->n ? paths->n : 1) * sizeof(char *));
  *n = 0;
  if (!want) return NULL;
  if (paths->n) memcpy(want, paths->v, paths->n * sizeof(char *));
  if (paths->n) qsort(want, paths->n, sizeof(char *), cli_cmp_str);
  for (size_t i = 0; i < paths->n; i++)
    if (i == 0 || strcmp(want[i], want[*n - 1])) want[(*n)++] = want[i];
  return want;
}

/* The labelled entries of the index, sorted by label (have[0..*nhave));
 * the next free id. */
static void list_entries(build *b, size_t count, label_pos *have, size_t *nhave) {
  b->next_id = 1;
  *nhave = 0;
  for (size_t p = 0; p < count; p++) {
    uint64_t id;
    const char *label;
    accel_index_get(b->ix, p, &id, NULL, &label, NULL);
    if (id >= b->next_id) b->next_id = id + 1;
    if (label) have[(*nhave)++] = (label_pos){label, p};
  }
  if (*nhave) qsort(have, *nhave, sizeof *have, cmp_label);
}

/* Each wanted file: kept if its entry is current, else to hash (todo);
 * entries of files that changed or were not asked for are dropped. */
static int sort_out(build *b, char **want, size_t nwant, catalog_stats *stats) {
  size_t count = 0, nhave = 0, ndrop = 0;
  accel_index_info(b->ix, NULL, NULL, &count);
  label_pos *have = malloc((count ? count : 1) * sizeof *have);
  unsigned char *keep = calloc(count ? count : 1, 1);
  uint64_t *drop = malloc((count ? count : 1) * sizeof(uint64_t));
  b->todo = malloc((nwant ? nwant : 1) * sizeof(char *));
  b->stamps = malloc((nwant ? nwant : 1) * sizeof(uint64_t));
  const bool ok = have && keep && drop && b->todo && b->stamps;
  if (!ok) cli_error("out of memory");
  if (ok) list_entries(b, count, have, &nhave);
  for (size_t i = 0; ok && i < nwant; i++) {
    struct stat sb;
    if (stat(want[i], &sb) != 0) {
      cli_error("%s: %s: %s", b->o->cmd, want[i], strerror(errno));
      stats->failed++;
      continue;
    }
    const uint64_t stamp = file_stamp(&sb);
    const label_pos key = {want[i], 0};
    const label_pos *hit = nhave ? bsearch(&key, have, nhave, sizeof *have, cmp_label) : NULL;
    uint64_t old = 0;
    if (hit) accel_index_get(b->ix, hit->pos, NULL, NULL, NULL, &old);
    if (hit && old == stamp) {
      keep[hit->pos] = 1;
      stats->reused++;
    } else {
      b->stamps[b->ntodo] = stamp;
      b->todo[b->ntodo++] = want[i];
    }
  }
  for (size_t p = 0; ok && p < count; p++)
    if (!keep[p]) accel_index_get(b->ix, p, &drop[ndrop++], NULL, NULL, NULL);
  if (ndrop) accel_index_remove(b->ix, ndrop, drop, &stats->removed);
  b->changed = b->changed || ndrop;
  free(have);
  free(keep);
  free(drop);
  return ok ? CLI_OK : CLI_USAGE;
}

/* The buffers of one chunk of files hashed into new entries. */
typedef struct chunk {
  uint8_t *hashes;
  accel_status *st;
  uint64_t *codes, *ids, *stamps;
  const char **labels;
} chunk;

/* The hashes of todo[off..off+n) into new entries (those that could be hashed). */
static int add_chunk(accel_ctx *ctx, build *b, const accel_hash_options *ho, size_t off, size_t n, chunk *c,
                     catalog_stats *stats) {
  const uint32_t nkinds = b->o->hash.nkinds, wpe = nkinds * b->bits / 64;
  if (accel_hash_files(ctx, (const char *const *)b->todo + off, n, ho, c->hashes, b->slot, c->st)) {
    cli_error("%s: %s", b->o->cmd, accel_last_error(ctx));
    return CLI_USAGE;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (c->st[i] != ACCEL_OK) {
      stats->failed++;
      continue;
    }
    catalog_codes(c->hashes + i * nkinds * b->slot, b->slot, nkinds, b->bits, c->codes + m * wpe);
    c->ids[m] = b->next_id++;
    c->labels[m] = b->todo[off + i];
    c->stamps[m++] = b->stamps[off + i];
  }
  if (m && accel_index_add(b->ix, m, c->ids, c->codes, c->labels, c->stamps)) {
    cli_error("%s: %s", b->o->cmd, accel_last_error(ctx));
    return CLI_USAGE;
  }
  stats->hashed += m;
  b->changed = b->changed || m > 0;
  return CLI_OK;
}

/* The files to do, hashed in chunks into new entries. */
static int hash_todo(const cli_globals *g, accel_ctx *ctx, build *b, catalog_stats *stats) {
  const uint32_t nkinds = b->o->hash.nkinds, wpe = nkinds * b->bits / 64;
  chunk c = {malloc((size_t)CHUNK * nkinds * b->slot),
             malloc(CHUNK * sizeof(accel_status)),
             malloc((size_t)CHUNK * wpe * sizeof(uint64_t)),
             malloc(CHUNK * sizeof(uint64_t)),
             malloc(CHUNK * sizeof(uint64_t)),
             malloc(CHUNK * sizeof(char *))};
  int rc = c.hashes && c.st && c.codes && c.ids && c.stamps && c.labels ? CLI_OK : CLI_USAGE;
  if (rc) cli_error("out of memory");
  cli_progress bar;
  accel_hash_options ho = b->o->hash;
  cli_file_errors errors = {b->o->cmd, NULL};
  ho.on_error = cli_file_error;
  ho.error_user = &errors;
  ho.progress = cli_progress_callback;
  ho.progress_user = &bar;
  for (size_t off = 0; !rc && off < b->ntodo; off += CHUNK) {
    char label[64];
    snprintf(label, sizeof label, "hash %zu/%zu", off, b->ntodo);
    cli_progress_begin(&bar, label, g->progress);
    errors.paths = b->todo + off;
    rc = add_chunk(ctx, b, &ho, off, b->ntodo - off < CHUNK ? b->ntodo - off : CHUNK, &c, stats);
    cli_progress_end(&bar);
  }
  free(c.hashes);
  free(c.st);
  free(c.codes);
  free(c.ids);
  free(c.stamps);
  free(c.labels);
  return rc;
}

int catalog_build(const cli_globals *g, accel_ctx *ctx, const catalog_options *o, const cli_paths *paths,
                  accel_index **out, catalog_stats *stats) {
  memset(stats, 0, sizeof *stats);
  *out = NULL;
  build b = {.o = o, .bits = catalog_bits(o->cmd, &o->hash)};
  if (!b.bits || accel_hash_slot_bytes(&o->hash, &b.slot)) {
    if (b.bits) cli_error("%s: %s", o->cmd, accel_last_error(NULL));
    return CLI_USAGE;
  }
  char meta[512];
  catalog_meta(&o->hash, meta, sizeof meta);
  bool fresh;
  int rc = open_index(ctx, o, b.bits, meta, &b.ix, &fresh);
  if (rc) return rc;
  b.changed = fresh;
  size_t nwant;
  char **want = unique_paths(paths, &nwant);
  if (!want) cli_error("out of memory");
  rc = want ? sort_out(&b, want, nwant, stats) : CLI_USAGE;
  if (!rc) rc = hash_todo(g, ctx, &b, stats);
  free(want);
  free(b.todo);
  free(b.stamps);
  if (rc) { /* nothing usable */
    accel_index_destroy(b.ix);
    return rc;
  }
  if (o->index_path && b.changed && accel_index_save(b.ix, o->index_path)) {
    cli_error("%s: %s", o->cmd, accel_last_error(ctx));
    rc = CLI_SOME_FAILED; /* the results are still right; the cache was not written */
  }
  if (!rc && stats->failed) rc = CLI_SOME_FAILED;
  *out = b.ix;
  return rc;
}
