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
 *      the most their compression can expand), and tiles may not exceed the
 *      image (rounded up to 16) or 4096 x 4096 pixels.
 * PNM: binary PGM (P5, gray) and PPM (P6, RGB), maxval 1..65535; maxval
 *      255 or less loads as U8 (values as stored), more as U16. Loads give
 *      (H, W) for PGM and (H, W, 3) for PPM.
 *
 * The `ctx` argument may be NULL; errors are then reported through
 * accel_last_error(NULL), and the pixel limit is ACCEL_DEFAULT_MAX_PIXELS.
 * NPY and raw loads are bounded by the file's size (the data must be in the
 * file). These functions do not use the backends.
 */
#ifndef ACCEL_IO_H
#define ACCEL_IO_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load a .npy file into a new buffer (free it with accel_buffer_destroy).
 * Errors: ACCEL_ERR_IO (open/read), ACCEL_ERR_FORMAT (not a readable .npy,
 * truncated data included), ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_npy_load(accel_ctx *ctx, const char *path, accel_buffer **out);

/* Save any array (any strides) as a C-ordered little-endian .npy file. The
 * file is written under a temporary name and renamed, so a failed save never
 * leaves a partial file at `path`. Errors: ACCEL_ERR_INVALID_ARG, ACCEL_ERR_IO. */
ACCEL_API accel_status accel_npy_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* Load a raw little-endian file of exactly offset + prod(shape) * size(dtype)
 * bytes, the first `offset` bytes skipped (a header): any other size is
 * ACCEL_ERR_FORMAT, naming both sizes. ndim 1..ACCEL_ARRAY_MAX_DIMS.
 * Errors: ACCEL_ERR_INVALID_ARG, ACCEL_ERR_IO, ACCEL_ERR_FORMAT,
 * ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_raw_load(accel_ctx *ctx, const char *path, accel_dtype dtype, int32_t ndim,
                                      const int64_t *shape, uint64_t offset, accel_buffer **out);

/* Save any array (any strides) as raw little-endian C-ordered elements,
 * atomically like accel_npy_save. */
ACCEL_API accel_status accel_raw_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* Load a binary PGM or PPM file into a new buffer.
 * Errors: ACCEL_ERR_IO, ACCEL_ERR_FORMAT, ACCEL_ERR_LIMIT (more pixels than
 * the context's max_pixels), ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_pnm_load(accel_ctx *ctx, const char *path, accel_buffer **out);

/* Save an (H, W) or (H, W, 1) array as PGM, or (H, W, 3) as PPM; U8 with
 * maxval 255 or U16 with maxval 65535. Written atomically like accel_npy_save.
 * Errors: ACCEL_ERR_INVALID_ARG (other dtypes or shapes), ACCEL_ERR_IO. */
ACCEL_API accel_status accel_pnm_save(accel_ctx *ctx, const char *path, const accel_array *array);

/* A raster's georeferencing: the GeoTIFF tags of a loaded file. */
typedef struct accel_geo accel_geo;

/* Load a one-band TIFF as an F32 (rows, cols) buffer; with `geo` not NULL
 * also its georeferencing (free with accel_geo_destroy; a file without
 * GeoTIFF tags gives an empty one). Errors: ACCEL_ERR_IO (open), ACCEL_ERR_FORMAT
 * (not a TIFF, several bands, an unsupported sample type, a damaged or
 * truncated file, strips or tiles larger than the file can hold),
 * ACCEL_ERR_LIMIT (more pixels than the context's max_pixels),
 * ACCEL_ERR_OUT_OF_MEMORY. */
ACCEL_API accel_status accel_tiff_load(accel_ctx *ctx, const char *path, accel_buffer **out, accel_geo **geo);

/* Save a 2-D F32 or U8 array (any strides) as a one-band TIFF with the given
 * georeferencing (may be NULL), atomically like accel_npy_save.
 * Errors: ACCEL_ERR_INVALID_ARG, ACCEL_ERR_IO. */
ACCEL_API accel_status accel_tiff_save(accel_ctx *ctx, const char *path, const accel_array *array,
                                       const accel_geo *geo);

/* The pixel size (x, y) from the ModelPixelScale tag; ACCEL_ERR_NOT_FOUND
 * without one. Either pointer may be NULL. */
ACCEL_API accel_status accel_geo_pixel_size(const accel_geo *geo, double *x, double *y);

ACCEL_API void accel_geo_destroy(accel_geo *geo);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_IO_H */
