/*
 * lib/ct/cpu_markers_impl.h - the peak search of cpu_markers.c for one
 * index type, included once per type by cpu_markers.c: CT_IDX (uint32_t or
 * uint64_t) and CT_FN(name) (the name with the type's suffix) are defined
 * before, and undefined after.
 */

typedef struct CT_FN(comp) {
  CT_IDX root;              /* its smallest voxel index */
  uint64_t voxels, maxima;  /* all voxels; those equal to their window's maximum */
  int64_t lo[3], hi[3];     /* bounding box, inclusive */
  uint64_t cand_off, ncand; /* its candidates in cand[] */
} CT_FN(comp);

/* Is voxel i = (z, y, x) of component c (comp[] holds component numbers at
 * mask voxels) at least as high as every voxel of c in its window? Checked
 * nearest first, so a lower voxel usually stops it early. */
static bool CT_FN(is_window_max)(const float *edt, const uint8_t *mask, const CT_IDX *comp, accel__dims d, uint64_t i,
                                 const int (*offs)[3], int noffs) {
  const int64_t x = (int64_t)(i % (uint64_t)d.nx), y = (int64_t)((i / (uint64_t)d.nx) % (uint64_t)d.ny),
                z = (int64_t)(i / ((uint64_t)d.nx * (uint64_t)d.ny));
  const float v = edt[i];
  const CT_IDX c = comp[i];
  for (int k = 0; k < noffs; k++) {
    const int64_t zz = z + offs[k][0], yy = y + offs[k][1], xx = x + offs[k][2];
    if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
    const uint64_t j = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
    if (mask[j] && comp[j] == c && edt[j] > v) return false;
  }
  return true;
}

/* Flat component: the voxels a binary opening with the cross removes,
 * computed on the component's bounding box (outside it counts as 0). */
static accel_status CT_FN(flat_candidates)(const uint8_t *mask, const CT_IDX *comp_of, CT_IDX c, const CT_FN(comp) * k,
                                           accel__dims d, uint8_t *cand) {
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
  ((((uint64_t)((z) + k->lo[0]) * (uint64_t)d.ny) + (uint64_t)((y) + k->lo[1])) * (uint64_t)d.nx +                     \
   (uint64_t)((x) + k->lo[2]))
  for (int64_t z = 0; z < bz; z++)
    for (int64_t y = 0; y < by; y++)
      for (int64_t x = 0; x < bx; x++) m[BOX(z, y, x)] = mask[VOL(z, y, x)] && comp_of[VOL(z, y, x)] == c;
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

accel_status CT_FN(accel__ct_peak_candidates_cpu)(const float *edt, const uint8_t *mask, accel__dims d, int md,
                                                  int threads, const CT_IDX *list, uint64_t np, CT_IDX *root,
                                                  uint8_t *cand) {
  accel_status st = CT_FN(accel__ct_components_list)(mask, d, list, np, 26, threads, root);
  if (st) return st;
  const int r = md < 1 ? 0 : md, w = 2 * r + 1;
  int(*offs)[3] = malloc((size_t)w * (size_t)w * (size_t)w * sizeof *offs);
  if (!offs) return ACCEL_ERR_OUT_OF_MEMORY;
  const int noffs = accel__ct_window_offsets(r, offs);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4096)
  for (uint64_t k = 0; k < np; k++)
    cand[list[k]] = CT_FN(is_window_max)(edt, mask, root, d, list[k], (const int(*)[3])offs, noffs);
  free(offs);
  return ACCEL_OK;
}

/* The kept peaks (cand 1) of the list, nm of them, numbered in C order into
 * out; ACCEL_ERR_LIMIT when their numbers would not fit its int32. */
static accel_status CT_FN(number_markers)(const CT_IDX *list, uint64_t np, const uint8_t *cand, uint64_t n, uint64_t nm,
                                          int32_t *out, uint32_t *count) {
  if (nm > INT32_MAX) return ACCEL_ERR_LIMIT;
  memset(out, 0, n * sizeof(int32_t));
  int32_t next = 0;
  for (uint64_t k = 0; k < np; k++)
    if (cand[list[k]] == 1) out[list[k]] = ++next;
  if (count) *count = (uint32_t)nm;
  return ACCEL_OK;
}

accel_status CT_FN(accel__ct_markers_finish)(const float *edt, const uint8_t *mask, accel__dims d, int md,
                                             const CT_IDX *list, uint64_t np, CT_IDX *comp_of, uint8_t *cand,
                                             int32_t *out, uint32_t *count) {
  const uint64_t n = accel__dims_count(d);
  accel_status st = ACCEL_OK;
  CT_FN(comp) *comps = NULL;
  CT_IDX *cand_list = NULL;
  int64_t *order = NULL;
  float *keys = NULL;
  /* roots (smallest voxels) to component numbers 0, 1, ... in that order: a
   * root comes before its members, so its number is known when they come */
  CT_IDX ncomp = 0;
  for (uint64_t k = 0; k < np; k++) {
    const CT_IDX i = list[k], r = comp_of[i];
    comp_of[i] = r == i ? ncomp++ : comp_of[r];
  }
  /* the global minimum: peaks must exceed it */
  float thr = INFINITY;
  for (uint64_t i = 0; i < n; i++)
    if (edt[i] < thr) thr = edt[i];
  comps = calloc(ncomp ? ncomp : 1, sizeof *comps);
  if (!comps) goto oom;
  for (CT_IDX c = 0; c < ncomp; c++)
    for (int a = 0; a < 3; a++) {
      comps[c].lo[a] = INT64_MAX;
      comps[c].hi[a] = -1;
    }
  /* per component counts and bounding boxes */
  for (uint64_t k = 0; k < np; k++) {
    const CT_IDX i = list[k];
    CT_FN(comp) *c = &comps[comp_of[i]];
    c->root = comp_of[i];
    c->voxels++;
    c->maxima += cand[i];
    const int64_t c3[3] = {(int64_t)(i / ((uint64_t)d.ny * (uint64_t)d.nx)),
                           (int64_t)((i / (uint64_t)d.nx) % (uint64_t)d.ny), (int64_t)(i % (uint64_t)d.nx)};
    for (int a = 0; a < 3; a++) {
      if (c3[a] < c->lo[a]) c->lo[a] = c3[a];
      if (c3[a] > c->hi[a]) c->hi[a] = c3[a];
    }
  }
  if (md > 0)                          /* a 1-voxel window (min_distance 0) has no flat-image rule */
    for (CT_IDX c = 0; c < ncomp; c++) /* flat components */
      if (comps[c].maxima == comps[c].voxels && (st = CT_FN(flat_candidates)(mask, comp_of, c, &comps[c], d, cand)))
        goto done;

  /* candidates above the minimum, per component in C order */
  uint64_t total = 0;
  for (uint64_t k = 0; k < np; k++) {
    const CT_IDX i = list[k];
    cand[i] = cand[i] && edt[i] > thr;
    if (cand[i]) {
      comps[comp_of[i]].ncand++;
      total++;
    }
  }
  for (uint64_t c = 0, off = 0; c < ncomp; c++) {
    comps[c].cand_off = off;
    off += comps[c].ncand;
    comps[c].ncand = 0;
  }
  cand_list = malloc((total ? total : 1) * sizeof(CT_IDX));
  if (!cand_list) goto oom;
  for (uint64_t k = 0; k < np; k++) {
    const CT_IDX i = list[k];
    if (!cand[i]) continue;
    CT_FN(comp) *c = &comps[comp_of[i]];
    cand_list[c->cand_off + c->ncand++] = i;
  }

  /* per component: strongest first (numpy's order of ties), then the minimum
   * distance; cand[] becomes 1 = kept, 2 = too close to a kept peak */
  for (uint64_t k = 0; k < np; k++) cand[list[k]] = 0;
  uint64_t maxc = 0;
  for (CT_IDX c = 0; c < ncomp; c++)
    if (comps[c].ncand > maxc) maxc = comps[c].ncand;
  order = malloc((maxc ? maxc : 1) * sizeof(int64_t));
  keys = malloc((maxc ? maxc : 1) * sizeof(float));
  if (!order || !keys) goto oom;
  const int near = md - 1; /* |dz|,|dy|,|dx| <= near is closer than md */
  uint64_t nm = 0;
  for (CT_IDX c = 0; c < ncomp; c++) {
    const CT_FN(comp) *k = &comps[c];
    const CT_IDX *cl = cand_list + k->cand_off;
    for (uint64_t j = 0; j < k->ncand; j++) keys[j] = -edt[cl[j]];
    accel__np_argsort_f32(keys, order, (int64_t)k->ncand);
    for (uint64_t j = 0; j < k->ncand; j++) {
      const CT_IDX i = cl[order[j]];
      if (cand[i] == 2) continue;
      cand[i] = 1;
      nm++;
      if (near < 0) continue;
      const int64_t z = i / (d.ny * d.nx), y = (i / d.nx) % d.ny, x = i % d.nx;
      for (int64_t zz = z - near; zz <= z + near; zz++)
        for (int64_t yy = y - near; yy <= y + near; yy++)
          for (int64_t xx = x - near; xx <= x + near; xx++) {
            if (zz < 0 || yy < 0 || xx < 0 || zz >= d.nz || yy >= d.ny || xx >= d.nx) continue;
            const uint64_t q = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
            if (q != i && mask[q] && comp_of[q] == c && cand[q] != 1) cand[q] = 2;
          }
    }
  }
  st = CT_FN(number_markers)(list, np, cand, n, nm, out, count);
  goto done;
oom:
  st = ACCEL_ERR_OUT_OF_MEMORY;
done:
  free(comps);
  free(cand_list);
  free(order);
  free(keys);
  return st;
}

static accel_status CT_FN(markers_cpu)(const float *edt, const uint8_t *mask, accel__dims d, int md, int threads,
                                       int32_t *out, uint32_t *count) {
  const uint64_t n = accel__dims_count(d);
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  CT_IDX *list = NULL, *root = malloc((n ? n : 1) * sizeof(CT_IDX)); /* at mask voxels only */
  uint8_t *cand = calloc(n ? n : 1, 1);
  uint64_t np = 0;
  if (!root || !cand || !(list = CT_FN(accel__ct_mask_list)(mask, n, &np))) goto done;
  if (!(st = CT_FN(accel__ct_peak_candidates_cpu)(edt, mask, d, md, threads, list, np, root, cand)))
    st = CT_FN(accel__ct_markers_finish)(edt, mask, d, md, list, np, root, cand, out, count);
done:
  free(list);
  free(root);
  free(cand);
  return st;
}

CT_IDX *CT_FN(accel__ct_mask_list)(const uint8_t *mask, uint64_t n, uint64_t *count) {
  uint64_t np = 0;
  for (uint64_t i = 0; i < n; i++) np += mask[i] != 0;
  CT_IDX *list = calloc(np ? np : 1, sizeof(CT_IDX));
  if (!list) return NULL;
  np = 0;
  for (uint64_t i = 0; i < n; i++)
    if (mask[i]) list[np++] = (CT_IDX)i;
  *count = np;
  return list;
}
