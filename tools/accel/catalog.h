/* tools/accel/catalog.h - image files hashed into a Hamming index (one field
 * per hash kind, label = path), reusing the entries of an index file whose
 * files have not changed since (same size and modification time). */
#ifndef ACCEL_CLI_CATALOG_H
#define ACCEL_CLI_CATALOG_H

#include "cli.h"

#include <stddef.h>
#include <stdint.h>

typedef struct catalog_options {
  const char *cmd;         /* the command, for messages */
  accel_hash_options hash; /* kinds, size, binbits, fast */
  const char *index_path;  /* an index file to reuse and update; NULL: none */
} catalog_options;

typedef struct catalog_stats {
  size_t reused, hashed, failed, removed;
} catalog_stats;

/* The index field width for these hash options: 64, 128 or 256 bits; 0 (with
 * a message) when a kind has more than 256 bits. */
uint32_t catalog_bits(const char *cmd, const accel_hash_options *o);

/* The string saved with an index: which hashes its fields hold. */
void catalog_meta(const accel_hash_options *o, char *buf, size_t n);
/* Back from that string; false if it is not one. */
bool catalog_parse_meta(const char *meta, accel_hash_options *o);

/* True if the index has exactly the fields these hash options make: one per
 * kind, of catalog_bits() width. An index whose metadata disagrees with its
 * fields must not be searched with codes sized from the metadata. */
bool catalog_fits(const accel_index *ix, const accel_hash_options *o);

/* Hash slots (accel_hash_* output, one per kind) to index codes: each kind
 * one field of bits / 64 words, read big-endian, zero-padded. */
void catalog_codes(const uint8_t *slots, size_t slot_bytes, uint32_t nkinds, uint32_t bits, uint64_t *codes);

/* An index holding exactly the given files that could be hashed (each path
 * once; ids are arbitrary, labels are the paths as given). Files that fail
 * are reported on stderr and left out. With o->index_path the file is read
 * first (entries of unchanged files are reused, others dropped) and written
 * back. Returns CLI_OK or CLI_SOME_FAILED (some files left out, or the index
 * file could not be written); when nothing is usable (the index file cannot
 * be read, no memory) *out is NULL and the status says why. */
int catalog_build(const cli_globals *g, accel_ctx *ctx, const catalog_options *o, const cli_paths *paths,
                  accel_index **out, catalog_stats *stats);

/* The label (path) of an entry id. */
const char *catalog_label(const accel_index *ix, uint64_t id);

#endif
