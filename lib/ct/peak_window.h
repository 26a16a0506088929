/*
 * lib/ct/peak_window.h - step 2 of peak_local_max's general search (see
 * lib/ct/cpu_markers_general.c): the window test of one voxel, over data a
 * GPU can hold, shared by the CPU and the GPU (kernels/ct.cu) so that both
 * compare the same values.
 */
#ifndef ACCEL_CT_PEAK_WINDOW_H
#define ACCEL_CT_PEAK_WINDOW_H

#include "ct/ct.h"

#include <stdbool.h>
#include <stdint.h>

#include "ct/hd.h"

/* A region of the search: its bounding box (inclusive) and its voxels,
 * mem[off .. off + count) of the search's list. */
typedef struct accel__ct_peak_region {
  int64_t lo[3], hi[3];
  uint64_t off, count;
} accel__ct_peak_region;

/* What the window test reads. */
typedef struct accel__ct_peak_window {
  accel__dims d;
  const double *v;                  /* the image */
  const int64_t *rid;               /* region of each voxel (-1: none); NULL: one region, the whole image */
  const accel__ct_peak_region *reg; /* nreg regions */
  uint64_t nreg;
  const int32_t *offs; /* the footprint's offsets without its centre, 3 (z, y, x) each */
  int noffs;
  bool center;         /* the footprint holds its centre */
  double bg;           /* what other regions' voxels of the box count as */
  bool nearest;        /* beyond the box: its nearest voxel (0.20 on), else 0 */
  const uint64_t *mem; /* the regions' voxels, region by region */
  uint64_t nmem;
} accel__ct_peak_window;

/* 1 when voxel i of region r equals the maximum of its footprint's window:
 * the window sees the region's voxels, other voxels of the box as bg, and
 * beyond the box 0 or the box's nearest voxel. */
static inline ACCEL__CT_HD uint8_t accel__ct_peak_window_test(const accel__ct_peak_window *w, uint64_t i, int64_t r) {
  const accel__ct_peak_region *g = &w->reg[r];
  const uint64_t plane = (uint64_t)w->d.ny * (uint64_t)w->d.nx;
  const int64_t c[3] = {(int64_t)(i / plane), (int64_t)(i % plane / (uint64_t)w->d.nx),
                        (int64_t)(i % (uint64_t)w->d.nx)};
  const double v = w->v[i];
  bool equal = w->center;
  for (int k = 0; k < w->noffs; k++) {
    bool outside = false;
    int64_t q[3];
    for (int a = 0; a < 3; a++) {
      q[a] = c[a] + w->offs[3 * k + a];
      if (q[a] < g->lo[a] || q[a] > g->hi[a]) {
        outside = true;
        q[a] = q[a] < g->lo[a] ? g->lo[a] : g->hi[a];
      }
    }
    double x;
    if (outside && !w->nearest) {
      x = 0.0;
    } else {
      const uint64_t j = ((uint64_t)q[0] * (uint64_t)w->d.ny + (uint64_t)q[1]) * (uint64_t)w->d.nx + (uint64_t)q[2];
      x = w->rid && w->rid[j] != r ? w->bg : w->v[j];
    }
    if (x > v) return 0;
    equal = equal || x == v;
  }
  return equal;
}

#ifdef __cplusplus
extern "C" {
#endif

/* The general search (accel__ct_peaks_general_cpu) in two parts, for a GPU
 * that runs the window test between them: begin takes step 1 (the regions,
 * the footprint) and describes in *w what the test reads (valid until the
 * search is freed); finish takes steps 2 to 5 with window[i] the test's
 * result at every voxel of w->mem (NULL: the test runs here). The image
 * must stay valid until then. */
typedef struct accel__ct_peak_search accel__ct_peak_search;
accel_status accel__ct_peak_search_begin(const double *image, const uint8_t *mask, accel__dims d, int md,
                                         const accel__ct_peak_params *p, int threads, accel__ct_peak_search **s,
                                         accel__ct_peak_window *w);
accel_status accel__ct_peak_search_finish(accel__ct_peak_search *s, const uint8_t *window, int md, int threads,
                                          int32_t *out, uint32_t *count);
void accel__ct_peak_search_free(accel__ct_peak_search *s);

#ifdef __cplusplus
}
#endif

#endif
