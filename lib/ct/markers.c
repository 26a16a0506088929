/*
 * Markers as scikit-image 0.19.3's peak_local_max(edt, min_distance=d,
 * exclude_border=False, labels=<26-connected components of mask>) finds them:
 *
 * 1. Per component, a voxel is a candidate when no voxel of the same
 *    component within the (2d+1)^3 window is higher (other components and
 *    the volume's outside never count: peak_local_max masks them with the
 *    lowest float and pads with 0, below every positive distance; so the
 *    map must not be negative). With d = 0 every voxel is a candidate.
 * 2. If every voxel of a component is a candidate (a flat component), the
 *    candidates become the voxels that a binary opening (cross structure,
 *    within the component's bounding box) removes.
 * 3. Candidates must exceed the global minimum of edt.
 * 4. Per component, candidates in C order are sorted by decreasing value with
 *    numpy 1.x's quicksort (accel__np_argsort_f32), and kept greedily: a
 *    candidate within Chebyshev distance < d of a kept one is dropped.
 * 5. The kept peaks of all components are numbered 1..n in C order.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct comp {
  uint32_t root;            /* its smallest voxel index */
  uint64_t voxels, maxima;  /* all voxels; those equal to their window's maximum */
  int64_t lo[3], hi[3];     /* bounding box, inclusive */
  uint64_t cand_off, ncand; /* its candidates in cand[] */
} comp;

/* Separable running maximum of a window of radius r along one axis, over the
 * pore voxels (others count as -inf); out may not alias in. */
static void max_along(const float *in, float *out, accel__dims d, int axis, int r, int threads) {
  const int64_t n = axis == 0 ? d.nz : axis == 1 ? d.ny : d.nx;
  const int64_t stride = axis == 0 ? d.ny * d.nx : axis == 1 ? d.nx : 1;
  const int64_t lines = (int64_t)(accel__dims_count(d) / (uint64_t)n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t l = 0; l < lines; l++) {
    int64_t base;
    if (axis == 2) base = l * d.nx;
    else if (axis == 1) base = (l / d.nx) * d.ny * d.nx + l % d.nx;
    else base = l;
    for (int64_t i = 0; i < n; i++) {
      float m = -INFINITY;
      const int64_t a = i - r < 0 ? 0 : i - r, b = i + r >= n ? n - 1 : i + r;
      for (int64_t j = a; j <= b; j++) {
        const float v = in[base + j * stride];
        if (v > m) m = v;
      }
      out[base + i * stride] = m;
    }
  }
}

/* Is voxel (z, y, x) of component c at least as high as every voxel of c in
 * its window? Checked nearest first, so a lower voxel usually stops early. */
static bool is_window_max(const float *edt, const uint32_t *root, accel__dims d, int64_t z, int64_t y, int64_t x,
                          const int (*offs)[3], int noffs) {
  const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
  const float v = edt[i];
  const uint32_t c = root[i];
  for (int k = 0; k < noffs; k++) {
    const int64_t zz = z + offs[k][0], yy = y + offs[k][1], xx = x + offs[k][2];
    if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
    const uint64_t j = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
    if (root[j] == c && edt[j] > v) return false;
  }
  return true;
}

static int cmp_offset(const void *a, const void *b) {
  const int *p = a, *q = b;
  const int dp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2], dq = q[0] * q[0] + q[1] * q[1] + q[2] * q[2];
  return (dp > dq) - (dp < dq);
}

/* Flat component: the voxels a binary opening with the cross removes,
 * computed on the component's bounding box (outside it counts as 0). */
static accel_status flat_candidates(const uint32_t *root, uint32_t c, const comp *k, accel__dims d, uint8_t *cand) {
  const int64_t bz = k->hi[0] - k->lo[0] + 1, by = k->hi[1] - k->lo[1] + 1, bx = k->hi[2] - k->lo[2] + 1;
  const uint64_t bn = (uint64_t)(bz * by * bx);
  uint8_t *m = malloc(bn), *e = malloc(bn);
  if (!m || !e) {
    free(m);
    free(e);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
#define BOX(z, y, x) (((uint64_t)(z) * (uint64_t)by + (uint64_t)(y)) * (uint64_t)bx + (uint64_t)(x))
#define VOL(z, y, x)                                                                                                   \
  ((((uint64_t)((z) + k->lo[0]) * (uint64_t)d.ny) + (uint64_t)((y) + k->lo[1])) * (uint64_t)d.nx +                    \
   (uint64_t)((x) + k->lo[2]))
  for (int64_t z = 0; z < bz; z++)
    for (int64_t y = 0; y < by; y++)
      for (int64_t x = 0; x < bx; x++) m[BOX(z, y, x)] = root[VOL(z, y, x)] == c;
  static const int cross[6][3] = {{-1, 0, 0}, {1, 0, 0}, {0, -1, 0}, {0, 1, 0}, {0, 0, -1}, {0, 0, 1}};
  for (int64_t z = 0; z < bz; z++) /* erosion */
    for (int64_t y = 0; y < by; y++)
      for (int64_t x = 0; x < bx; x++) {
        uint8_t keep = m[BOX(z, y, x)];
        for (int n = 0; n < 6 && keep; n++) {
          const int64_t zz = z + cross[n][0], yy = y + cross[n][1], xx = x + cross[n][2];
          keep = zz >= 0 && yy >= 0 && xx >= 0 && zz < bz && yy < by && xx < bx && m[BOX(zz, yy, xx)];
        }
        e[BOX(z, y, x)] = keep;
      }
  for (int64_t z = 0; z < bz; z++) /* dilation of the erosion; removed = m & !opened */
    for (int64_t y = 0; y < by; y++)
      for (int64_t x = 0; x < bx; x++) {
        if (!m[BOX(z, y, x)]) continue;
        uint8_t opened = e[BOX(z, y, x)];
        for (int n = 0; n < 6 && !opened; n++) {
          const int64_t zz = z + cross[n][0], yy = y + cross[n][1], xx = x + cross[n][2];
          opened = zz >= 0 && yy >= 0 && xx >= 0 && zz < bz && yy < by && xx < bx && e[BOX(zz, yy, xx)];
        }
        cand[VOL(z, y, x)] = !opened;
      }
#undef BOX
#undef VOL
  free(m);
  free(e);
  return ACCEL_OK;
}

accel_status accel__ct_markers_cpu(const float *edt, const uint8_t *mask, accel__dims d, int md, int threads,
                                   int32_t *out, uint32_t *count) {
  const uint64_t n = accel__dims_count(d);
  accel_status st = ACCEL_OK;
  uint32_t *root = malloc((n ? n : 1) * sizeof(uint32_t));
  uint32_t *cid = NULL;
  float *mx = malloc((n ? n : 1) * sizeof(float)), *tmp = malloc((n ? n : 1) * sizeof(float));
  uint8_t *cand = calloc(n ? n : 1, 1);
  comp *comps = NULL;
  uint32_t *cand_list = NULL;
  int64_t *order = NULL;
  float *keys = NULL;
  int (*offs)[3] = NULL;
  if (!root || !mx || !tmp || !cand) goto oom;
  if ((st = accel__ct_components(mask, d, true, 26, threads, root))) goto done;

  /* the global minimum: peaks must exceed it */
  float thr = INFINITY;
  for (uint64_t i = 0; i < n; i++)
    if (edt[i] < thr) thr = edt[i];

  /* components numbered in order of their smallest voxel */
  cid = malloc((n ? n : 1) * sizeof(uint32_t));
  if (!cid) goto oom;
  uint32_t ncomp = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (root[i] == ACCEL__CT_NONE) continue;
    cid[i] = root[i] == i ? ncomp++ : cid[root[i]];
  }
  comps = calloc(ncomp ? ncomp : 1, sizeof(comp));
  if (!comps) goto oom;
  for (uint32_t c = 0; c < ncomp; c++)
    for (int a = 0; a < 3; a++) {
      comps[c].lo[a] = INT64_MAX;
      comps[c].hi[a] = -1;
    }

  /* an upper bound of each window's maximum over all pore voxels */
  const int r = md < 1 ? 0 : md;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (uint64_t i = 0; i < n; i++) tmp[i] = root[i] == ACCEL__CT_NONE ? -INFINITY : edt[i];
  max_along(tmp, mx, d, 2, r, threads);
  max_along(mx, tmp, d, 1, r, threads);
  max_along(tmp, mx, d, 0, r, threads);

  const int w = 2 * r + 1;
  offs = malloc((size_t)w * (size_t)w * (size_t)w * sizeof *offs);
  if (!offs) goto oom;
  int noffs = 0;
  for (int dz = -r; dz <= r; dz++)
    for (int dy = -r; dy <= r; dy++)
      for (int dx = -r; dx <= r; dx++)
        if (dz || dy || dx) {
          offs[noffs][0] = dz;
          offs[noffs][1] = dy;
          offs[noffs][2] = dx;
          noffs++;
        }
  qsort(offs, (size_t)noffs, sizeof *offs, cmp_offset);

  /* window maxima per voxel; per component counts and bounding boxes */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t x = 0; x < d.nx; x++) {
        const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
        if (root[i] == ACCEL__CT_NONE) continue;
        /* the unrestricted maximum equal to the value settles it; otherwise
         * only same-component voxels may be higher */
        cand[i] = edt[i] == mx[i] || is_window_max(edt, root, d, z, y, x, (const int(*)[3])offs, noffs);
      }
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t x = 0; x < d.nx; x++) {
        const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
        if (root[i] == ACCEL__CT_NONE) continue;
        comp *k = &comps[cid[i]];
        k->root = root[i];
        k->voxels++;
        k->maxima += cand[i];
        const int64_t c3[3] = {z, y, x};
        for (int a = 0; a < 3; a++) {
          if (c3[a] < k->lo[a]) k->lo[a] = c3[a];
          if (c3[a] > k->hi[a]) k->hi[a] = c3[a];
        }
      }
  if (r > 0) /* a 1-voxel window (min_distance 0) has no flat-image rule */
    for (uint32_t c = 0; c < ncomp; c++) /* flat components */
      if (comps[c].maxima == comps[c].voxels && (st = flat_candidates(root, comps[c].root, &comps[c], d, cand)))
        goto done;

  /* candidates above the minimum, per component in C order */
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (root[i] == ACCEL__CT_NONE) continue;
    cand[i] = cand[i] && edt[i] > thr;
    if (cand[i]) {
      comps[cid[i]].ncand++;
      total++;
    }
  }
  for (uint32_t c = 0, off = 0; c < ncomp; c++) {
    comps[c].cand_off = off;
    off += (uint32_t)comps[c].ncand;
    comps[c].ncand = 0;
  }
  cand_list = malloc((total ? total : 1) * sizeof(uint32_t));
  if (!cand_list) goto oom;
  for (uint64_t i = 0; i < n; i++)
    if (root[i] != ACCEL__CT_NONE && cand[i]) {
      comp *k = &comps[cid[i]];
      cand_list[k->cand_off + k->ncand++] = (uint32_t)i;
    }

  /* per component: strongest first (numpy's order of ties), then the minimum
   * distance; cand[] becomes "kept", blocked voxels are marked 2 */
  memset(cand, 0, n);
  uint64_t maxc = 0;
  for (uint32_t c = 0; c < ncomp; c++)
    if (comps[c].ncand > maxc) maxc = comps[c].ncand;
  order = malloc((maxc ? maxc : 1) * sizeof(int64_t));
  keys = malloc((maxc ? maxc : 1) * sizeof(float));
  if (!order || !keys) goto oom;
  const int near = md - 1; /* |dz|,|dy|,|dx| <= near is closer than md */
  for (uint32_t c = 0; c < ncomp; c++) {
    const comp *k = &comps[c];
    const uint32_t *cl = cand_list + k->cand_off;
    for (uint64_t j = 0; j < k->ncand; j++) keys[j] = -edt[cl[j]];
    accel__np_argsort_f32(keys, order, (int64_t)k->ncand);
    for (uint64_t j = 0; j < k->ncand; j++) {
      const uint32_t i = cl[order[j]];
      if (cand[i] == 2) continue; /* too close to a kept peak */
      cand[i] = 1;
      if (near < 0) continue;
      const int64_t z = i / (d.ny * d.nx), y = (i / d.nx) % d.ny, x = i % d.nx;
      for (int64_t zz = z - near; zz <= z + near; zz++)
        for (int64_t yy = y - near; yy <= y + near; yy++)
          for (int64_t xx = x - near; xx <= x + near; xx++) {
            if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
            const uint64_t q = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
            if (q != i && root[q] == root[i] && cand[q] != 1) cand[q] = 2;
          }
    }
  }
  uint32_t nm = 0;
  for (uint64_t i = 0; i < n; i++) out[i] = cand[i] == 1 ? (int32_t)++nm : 0;
  if (count) *count = nm;
  goto done;
oom:
  st = ACCEL_ERR_OUT_OF_MEMORY;
done:
  free(root);
  free(cid);
  free(mx);
  free(tmp);
  free(cand);
  free(comps);
  free(cand_list);
  free(order);
  free(keys);
  free(offs);
  return st;
}
