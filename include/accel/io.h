/*
 * accel/io.h - reading and writing arrays in simple file formats (host only).
 *
 * NPY: numpy's .npy format, versions 1.0, 2.0 and 3.0, C order, little- or
 *      big-endian, dtypes u1 i1 u2 i2 u4 i4 u8 i8 f4 f8 (bool loads as u1).
 *      Fortran-ordered arrays, structured dtypes and object arrays are refused
 *      with ACCEL_ERR_FORMAT. Saved files are version 1.0 (2.0 when the header
 *      needs it), little-endian, C order.
 * Raw: the elements in C order, little-endian, nothing else (CT scanners and
 *      tools such as ImageJ write volumes this way): shape and dtype are given.
 * TIFF: GeoTIFF rasters of one band (float32, float64, 8/16/32-bit integers;
 *      strips or tiles, any compression libtiff reads) load as F32; GDAL's
 *      no-data value (tag 42113) loads as NaN. The georeferencing (the GeoTIFF
 *      tags 33550, 33922, 34264, 34735-34737) can be kept and written into
 *      rasters made from it. Saved files are
 *      uncompressed strips, F32 or U8. Before anything is allocated, the
 *      raster must be within the context's max_pixels, its strips or tiles
 *      must lie inside the file and hold enough bytes for their pixels (at
 *      the most their compression can expand), and a tile may not hold more
 *      pixels than the image rounded up to multiples of 16, or than 4096 x
 *      4096, whichever is more (a tile of 8192 x 8192 loads in an image as
 *      large; one of 256 x 256 in any image).
 *      Images (accel_tiff_load_image, accel_tiff_save_image): gray, gray and
 *      alpha, RGB, RGBA with samples as stored (8/16/32-bit integers, 32/64-
 *      bit floats), TIFF or BigTIFF, strips or tiles, uncompressed or deflate
 *      when saved; the same checks before allocating.
 * PNM: binary PGM (P5, gray) and PPM (P6, RGB), maxval 1..65535; maxval
 *      255 or less loads as U8 (values as stored), more as U16. Loads give
 *      (H, W) for PGM and (H, W, 3) for PPM.
 *
 * The `ctx` argument may be NULL; errors are then reported through
 * accel_last_error(NULL), and the pixel limit is ACCEL_DEFAULT_MAX_PIXELS.
 * NPY and raw loads are bounded by the file's size (the data must be in the
 * file). These functions do not use the backends (no stage, no fallback).
 *
 * Failures shared by every function below (core.h has the general rules):
 *  - loads: ACCEL_ERR_INVALID_ARG (a NULL path or out), ACCEL_ERR_IO (the
 *    path cannot be opened or is not a regular file), ACCEL_ERR_OUT_OF_MEMORY;
 *    on failure *out (and *geo) is NULL, unless a NULL argument left it alone.
 *  - saves: every file is written under a temporary name in the target's
 *    directory and renamed over `path` only when complete (and synced to
 *    the disk first where the context's accel_sync_policy says so), so a
 *    failed save leaves any previous file at `path` untouched and no
 *    temporary behind. ACCEL_ERR_INVALID_ARG (a malformed array, a NULL or
 *    empty path, a path ending in "/", "." or ".."), ACCEL_ERR_IO (creating,
 *    writing, syncing or renaming failed; the message has the system's
 *    reason), ACCEL_ERR_OUT_OF_MEMORY.
 *
 * Threads: every function may be called from several threads at once, with
 * one context or several. Concurrent saves to one path each write a whole
 * file; the last rename wins. An accel_geo is read-only once loaded: any
 * number of threads may use it until accel_geo_destroy.
 */
#ifndef ACCEL_IO_H
#define ACCEL_IO_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load a .npy file into a new buffer (free it with accel_buffer_destroy).
 * Errors: the loads' above, ACCEL_ERR_FORMAT (not a readable .npy: a bad
 * magic, version or header, an unsupported dtype or order, truncated data). */
ACCEL_API accel_status accel_npy_load(accel_ctx *ctx, const char *path, accel_buffer **out);

/* Save any array (any strides, any dtype) as a C-ordered little-endian .npy
 * file. Errors: the saves' above only. */
ACCEL_API accel_status accel_npy_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* Load a raw little-endian file of exactly offset + prod(shape) * size(dtype)
 * bytes, the first `offset` bytes skipped (a header): any other size is
 * ACCEL_ERR_FORMAT, naming both sizes. ndim 1..ACCEL_ARRAY_MAX_DIMS.
 * Errors: the loads' above, ACCEL_ERR_INVALID_ARG (also a NULL shape, an
 * invalid dtype, ndim out of range, a negative extent), ACCEL_ERR_LIMIT
 * (the shape's byte size overflows), ACCEL_ERR_FORMAT, ACCEL_ERR_IO (also
 * when a read fails). */
ACCEL_API accel_status accel_raw_load(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim,
                                      const int64_t *shape, uint64_t offset, accel_buffer **out);

/* Save any array (any strides) as raw little-endian C-ordered elements.
 * Errors: the saves' above only. */
ACCEL_API accel_status accel_raw_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* Load a binary PGM or PPM file into a new buffer.
 * Errors: the loads' above, ACCEL_ERR_FORMAT (not P5/P6, a malformed
 * header, truncated pixels), ACCEL_ERR_LIMIT (more pixels than the
 * context's max_pixels). */
ACCEL_API accel_status accel_pnm_load(accel_ctx *ctx, const char *path, accel_buffer **out);

/* Save an (H, W) or (H, W, 1) array as PGM, or (H, W, 3) as PPM; U8 with
 * maxval 255 or U16 with maxval 65535. Errors: the saves' above,
 * ACCEL_ERR_INVALID_ARG also for other dtypes or shapes and empty images. */
ACCEL_API accel_status accel_pnm_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* A raster's georeferencing: the GeoTIFF tags of a loaded file. */
typedef struct accel_geo accel_geo;

/* Load a one-band TIFF as an F32 (rows, cols) buffer; with `geo` not NULL
 * also its georeferencing (free with accel_geo_destroy; a file without
 * GeoTIFF tags gives an empty one). Errors: the loads' above,
 * ACCEL_ERR_FORMAT (not a TIFF, several bands, an unsupported sample type,
 * an empty raster, a damaged or truncated file, strips or tiles larger than
 * the file can hold), ACCEL_ERR_LIMIT (more pixels than the context's
 * max_pixels), ACCEL_ERR_UNSUPPORTED (built without libtiff). */
ACCEL_API accel_status accel_tiff_load(accel_ctx *ctx, const char *path, accel_buffer **out, accel_geo **geo);

/* Save a 2-D F32 or U8 array (any strides) as a one-band TIFF with the given
 * georeferencing (may be NULL). Errors: the saves' above,
 * ACCEL_ERR_INVALID_ARG also for other arrays, an empty one or sides over
 * 2^32 - 1, ACCEL_ERR_UNSUPPORTED (built without libtiff). */
ACCEL_API accel_status accel_tiff_save(accel_ctx *ctx, const char *path, const accel_array *array,
                                       const accel_geo *geo);

/* ------------------------------------------------------------ TIFF images
 *
 * Images of any size in TIFF and BigTIFF, pixels as stored: for registration
 * inputs and outputs (gray, RGB, RGBA scans; float32 fields). */

/* Load the first image of a TIFF or BigTIFF file, pixels as stored, into a
 * new buffer: (H, W) for one sample per pixel, (H, W, C) for C = 2 (gray
 * and alpha), 3 (RGB) or 4 (RGBA; alpha associated or not, as stored).
 * Samples of 8, 16 or 32 bits, unsigned or signed, and 32- or 64-bit floats
 * load as U8, U16, U32, I8, I16, I32, F32, F64 (registration takes U8, U16
 * and F32). Strips or tiles, samples interleaved or in separate planes,
 * either byte order, any compression libtiff decodes (none, LZW, deflate,
 * PackBits, ZSTD, LZMA where libtiff has them, with any predictor).
 * Photometric interpretation min-is-black (1 to 4 samples) or RGB (3 or 4);
 * the orientation tag is ignored (rows as stored). The checks of
 * accel_tiff_load come first (pixel limit, strips and tiles inside the
 * file and large enough, tile sizes). Memory: an uncompressed image of
 * 64 MiB or more whose strips follow one another in the file, samples
 * interleaved, in the host's byte order and starting at a multiple of the
 * sample size (what tifffile, libtiff and this library write by default)
 * is mapped (POSIX mmap, private: writing to the buffer never changes the
 * file), so that it costs no copy and no memory beyond the page cache;
 * the file must then not be truncated while the buffer lives. Other files
 * are read, and their pixels decoded straight into the buffer strip by
 * strip or tile by tile; the peak is the image plus one strip or tile
 * (plus its compressed bytes; strips of separate planes over 4 MiB are read
 * a band of rows at a time). Multi-image files: the first image only (a
 * warning in the context's log says so).
 * Errors: the loads' above, ACCEL_ERR_FORMAT (not a TIFF, an empty
 * image, a damaged or truncated file, strips or tiles larger than the file
 * can hold), ACCEL_ERR_LIMIT (more pixels than the context's max_pixels,
 * checked before any allocation), ACCEL_ERR_UNSUPPORTED (palette, bilevel,
 * YCbCr (JPEG-compressed photographs), CMYK, min-is-white and other
 * photometric interpretations; more than 4 samples a pixel; sample sizes
 * other than the above, e.g. 1, 4, 12 bits, 64-bit integers, 16-bit
 * floats, complex; a codec libtiff lacks; built without libtiff). */
ACCEL_API accel_status accel_tiff_load_image(accel_ctx *ctx, const char *path, accel_buffer **out);

typedef enum accel_tiff_compression {
  ACCEL_TIFF_COMPRESSION_NONE = 0,   /* uncompressed */
  ACCEL_TIFF_COMPRESSION_DEFLATE = 1 /* zlib deflate (TIFF compression 8, "Adobe deflate") */
} accel_tiff_compression;

typedef struct accel_tiff_save_options {
  uint32_t struct_size;               /* set by accel_tiff_save_options_init */
  accel_tiff_compression compression; /* default ACCEL_TIFF_COMPRESSION_NONE */
  int32_t deflate_level;              /* 1 (fastest) .. 9 (smallest); default 6 */
  /* With deflate: 1 (default) differences between neighbouring samples
   * before compression (TIFF predictor 2 for integers, 3, the floating-point
   * predictor, for floats), 0 none. Ignored without compression. */
  int32_t predictor;
  /* 0 (default): strips of about 1 MiB (at least one row); otherwise square
   * tiles of this side, a multiple of 16 from 16 to 4096. */
  int32_t tile_size;
  /* 0 (default): BigTIFF only when the file could exceed 4 GiB (classic
   * TIFF cannot address more); 1: always BigTIFF. */
  int32_t bigtiff;
  /* (Fields added in ABI 0 after the first release; a caller's older
   * struct_size leaves them at their defaults.)
   * NULL (default): no georeferencing; else the GeoTIFF tags of a raster
   * loaded with accel_tiff_load, written with a one-band (H, W) image. */
  const accel_geo *geo;
  /* 1: write GDAL's no-data tag (42113) with `nodata` ("%.17g"; NaN as
   * "nan"), which accel_tiff_load and GDAL read back; 0 (default): none. */
  int32_t has_nodata;
  double nodata;
} accel_tiff_save_options;

/* Fill `options` with the defaults. ACCEL_ERR_INVALID_ARG for NULL,
 * ACCEL_ERR_VERSION for a struct_size below the first release's. */
ACCEL_API accel_status accel_tiff_save_options_init(accel_tiff_save_options *options, size_t struct_size);

/* Save an image (any strides) as a TIFF that accel_tiff_load_image and
 * other readers (checked: libtiff 4.5, tifffile 2026.3) read back exactly:
 * (H, W) or (H, W, 1) gray, (H, W, 2) gray and alpha, (H, W, 3) RGB,
 * (H, W, 4) RGB and unassociated alpha (ExtraSamples 2); U8, I8, U16, I16,
 * U32, I32, F32 or F64; samples interleaved, native byte order. `options`
 * may be NULL (the defaults). The pixels are packed one strip or one tile
 * at a time: no copy of the whole image is made. Errors: the saves' above
 * (ACCEL_ERR_IO with libtiff's reason when libtiff refuses),
 * ACCEL_ERR_INVALID_ARG also for another dtype or shape, an empty image,
 * sides over 2^32 - 1, options out of range (each named in the message),
 * ACCEL_ERR_VERSION (options' struct_size), ACCEL_ERR_UNSUPPORTED (libtiff
 * without deflate; built without libtiff). */
ACCEL_API accel_status accel_tiff_save_image(accel_ctx *ctx, const char *path, const accel_array *image,
                                             const accel_tiff_save_options *options);

/* An image written in place into its TIFF file: for outputs too large to
 * hold twice (a 300-megapixel RGB layer), the pixels are written straight
 * into the file's pages instead of into a buffer that is then copied.
 *
 * accel_tiff_create_image lays out an uncompressed TIFF in strips of about
 * 1 MiB for an image of `dtype` and `shape` ((H, W) or (H, W, 1..4), the
 * dtypes and tags of accel_tiff_save_image, BigTIFF when needed or asked)
 * under a temporary name beside `path`, reserves its space on the disk and
 * maps its pixels: *pixels describes them, C-contiguous, zero until
 * written. Write every pixel (any threads), then accel_tiff_writer_commit
 * replaces `path` with the file (atomically; synced under
 * ACCEL_SYNC_ALL); accel_tiff_writer_destroy gives it up instead (nothing
 * is left at `path`'s place). `options` may be NULL; compression must be
 * none and tile_size 0 (ACCEL_ERR_INVALID_ARG otherwise); geo and nodata
 * are written. Errors: accel_tiff_save_image's, ACCEL_ERR_IO when the disk
 * lacks the space (reported here: on file systems whose fallocate reserves
 * the blocks, such as ext4, XFS and tmpfs, writing the pixels then cannot
 * fail for space; on copy-on-write ones such as btrfs or ZFS it can, as a
 * SIGBUS), and ACCEL_ERR_UNSUPPORTED where the file system cannot reserve
 * space, the file cannot be mapped or libtiff lays it out otherwise (save
 * a buffer with accel_tiff_save_image then), or libaccel was built without
 * libtiff. Errors of the later write-back to the disk are reported only
 * under ACCEL_SYNC_ALL (the commit's sync). *out is NULL and *pixels
 * zeroed on failure. */
typedef struct accel_tiff_writer accel_tiff_writer;
ACCEL_API accel_status accel_tiff_create_image(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim,
                                               const int64_t *shape, const accel_tiff_save_options *options,
                                               accel_tiff_writer **out, accel_array *pixels);
/* Finish the file and put it at its path; the writer is released either
 * way (its pixels are no longer valid). ACCEL_ERR_INVALID_ARG for NULL,
 * ACCEL_ERR_IO for a failed sync or rename. */
ACCEL_API accel_status accel_tiff_writer_commit(accel_tiff_writer *writer);
/* Give the file up and release the writer; accepts NULL. */
ACCEL_API void accel_tiff_writer_destroy(accel_tiff_writer *writer);

/* Load an image file by its signature, not its name: TIFF and BigTIFF as
 * accel_tiff_load_image does (samples as stored); PNG and JPEG decoded as
 * Pillow 9.4 opens them (accel_image_decode_file's decoders), then gray
 * modes (1, L, LA) as U8 (H, W) with Pillow's convert('L'), 16-bit gray
 * PNG (Pillow's mode I) as U16 (H, W) with the values as stored, and the
 * other modes (RGB, RGBA, P, CMYK) as U8 (H, W, 3) with Pillow's
 * convert('RGB'): alpha is dropped. A PNG or JPEG file is read into memory
 * whole, then decoded row by row into the buffer. The pixel limit is the
 * context's max_pixels. Errors: the loads' above, those of
 * accel_tiff_load_image for TIFF files, ACCEL_ERR_FORMAT (none of the
 * three, or a variant Pillow does not open), ACCEL_ERR_DECODE (a corrupt or
 * truncated PNG or JPEG), ACCEL_ERR_LIMIT. */
ACCEL_API accel_status accel_image_load(accel_ctx *ctx, const char *path, accel_buffer **out);

/* The pixel size (x, y) from the ModelPixelScale tag. ACCEL_ERR_NOT_FOUND
 * without one, for a NULL geo, and always without libtiff; then nothing is
 * written and no last-error message is set. Either pointer may be NULL. */
ACCEL_API accel_status accel_geo_pixel_size(const accel_geo *geo, double *x, double *y);

/* Release georeferencing; accepts NULL. */
ACCEL_API void accel_geo_destroy(accel_geo *geo);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IO_H */
