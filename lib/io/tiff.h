/* lib/io/tiff.h - what the tests may change in the TIFF writer (internal). */
#ifndef ACCEL_IO_TIFF_H
#define ACCEL_IO_TIFF_H

#include <stdint.h>

/* accel_tiff_save_image writes classic TIFF while a bound on the file's size
 * stays at or below this (UINT32_MAX: classic TIFF's 32-bit offsets), BigTIFF
 * above. Tests lower it to see the switch without writing 4 GiB. */
extern uint64_t accel__tiff_classic_max;
/* Uncompressed images of at least this many bytes, laid out as the raster,
 * are mapped rather than read (tests lower it). */
extern uint64_t accel__tiff_map_min;

#endif /* ACCEL_IO_TIFF_H */
