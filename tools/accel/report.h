/* tools/accel/report.h - accel dupes --html: the groups as a web page. */
#ifndef ACCEL_CLI_REPORT_H
#define ACCEL_CLI_REPORT_H

#include "cli.h"

/* One image of a group: its path (the index's label) and its id. */
typedef struct report_member {
  const char *path;
  uint64_t id;
} report_member;

typedef struct report_group {
  report_member *m; /* sorted by path */
  size_t n;
} report_group;

/* The page at `path` (written atomically): a heading, then one
 * <div class="group"> a group, in order, each a row of <figure>s with a
 * thumbnail (a PNG data: URI, at most REPORT_THUMB pixels a side), the
 * path, the file's size in bytes and pixels, and the Hamming distance of
 * each kind to the group's first image. Self-contained: nothing else is
 * read. False (printed) if it cannot be written; an image that cannot be
 * read again gets a placeholder with the reason. */
enum { REPORT_THUMB = 160 };
bool report_write(accel_ctx *ctx, const char *cmd, const char *path, const accel_index *ix, const accel_hash_options *o,
                  const uint32_t *thresholds, const report_group *groups, size_t ngroups);

#endif
