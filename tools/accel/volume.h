/* tools/accel/volume.h - CT volumes in the forms users keep them: .npy (C or
 * Fortran order), a member of an .npz archive, a multi-page TIFF stack, a
 * directory of TIFF slices, or raw little-endian voxels. */
#ifndef ACCEL_CLI_VOLUME_H
#define ACCEL_CLI_VOLUME_H

#include "cli.h"

typedef enum volume_kind {
  VOLUME_NPY = 1,  /* .npy, C or Fortran order (Fortran order is reordered to C order) */
  VOLUME_NPZ,      /* FILE.npz[:MEMBER], stored or deflated members */
  VOLUME_TIFF,     /* .tif/.tiff: each page one z slice */
  VOLUME_TIFF_DIR, /* a directory: its .tif/.tiff files in byte order of their names, one z slice each */
  VOLUME_RAW       /* anything else: --shape and --dtype */
} volume_kind;

/* Where the volume is: the file (the INPUT, less a ":MEMBER" suffix of an
 * .npz that does not name an existing file) and the member. */
typedef struct volume_source {
  volume_kind kind;
  char *path;         /* owned */
  const char *member; /* NPZ: the member ("name" or "name.npy"), NULL: the only one */
} volume_source;

/* What INPUT names; member is --member (NULL if not given, which an INPUT
 * "F.npz:NAME" may supply). False (printed) for a --member without an .npz,
 * or out of memory. */
bool volume_source_of(const char *cmd, const char *input, const char *member, volume_source *src);
void volume_source_free(volume_source *src);

/* A volume (not raw) loaded into a new buffer: C order, the dtype stored.
 * Prints why and returns false when it cannot be read. */
bool volume_load(accel_ctx *ctx, const char *cmd, const volume_source *src, accel_buffer **out);

#endif
