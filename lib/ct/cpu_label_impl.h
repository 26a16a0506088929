/*
 * lib/ct/cpu_label_impl.h - the connected components of cpu_label.c for one
 * index type, included once per type by cpu_label.c: CT_IDX (uint32_t or
 * uint64_t), CT_NONE (its "no component" value) and CT_FN(name) (the name
 * with the type's suffix) are defined before, and undefined after.
 */

static inline CT_IDX CT_FN(find_root)(CT_IDX *p, CT_IDX x) {
  while (p[x] != x) {
    p[x] = p[p[x]]; /* path halving */
    x = p[x];
  }
  return x;
}

static inline void CT_FN(unite)(CT_IDX *p, CT_IDX a, CT_IDX b) {
  a = CT_FN(find_root)(p, a);
  b = CT_FN(find_root)(p, b);
  if (a < b) p[b] = a;
  else if (b < a) p[a] = b;
}

/* Union voxel (z, y, x) with its selected backward neighbours whose z is at
 * least zmin. */
static inline void CT_FN(scan_voxel)(const uint8_t *mask, accel__dims d, bool want_set, const back_nb *b, int64_t zmin,
                                     int64_t z, int64_t y, int64_t x, CT_IDX *p) {
  const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
  for (int k = 0; k < b->n; k++) {
    const int64_t zz = z + b->dz[k], yy = y + b->dy[k], xx = x + b->dx[k];
    if (zz < zmin || yy < 0 || yy >= d.ny || xx < 0 || xx >= d.nx) continue;
    const uint64_t j = ((uint64_t)zz * (uint64_t)d.ny + (uint64_t)yy) * (uint64_t)d.nx + (uint64_t)xx;
    if (selected(mask, j, want_set)) CT_FN(unite)(p, (CT_IDX)i, (CT_IDX)j);
  }
}

/* First list entry with index >= v (the list is increasing). */
static uint64_t CT_FN(lower)(const CT_IDX *list, uint64_t count, uint64_t v) {
  uint64_t lo = 0, hi = count;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (list[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* scan_voxel at the voxels of `list` in planes [z0, z1), looking no lower
 * than plane zmin; `init` first makes each of them its own root. */
static void CT_FN(scan_planes)(const uint8_t *mask, accel__dims d, const back_nb *b, const CT_IDX *list, uint64_t count,
                               int64_t z0, int64_t z1, int64_t zmin, bool init, CT_IDX *p) {
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
  const uint64_t k0 = CT_FN(lower)(list, count, (uint64_t)z0 * plane),
                 k1 = CT_FN(lower)(list, count, (uint64_t)z1 * plane);
  for (uint64_t k = k0; k < k1 && init; k++) p[list[k]] = list[k];
  for (uint64_t k = k0; k < k1; k++) {
    int64_t z, y, x;
    coords(list[k], d, &z, &y, &x);
    CT_FN(scan_voxel)(mask, d, true, b, zmin, z, y, x, p);
  }
}

accel_status CT_FN(accel__ct_components_list)(const uint8_t *mask, accel__dims d, const CT_IDX *list, uint64_t count,
                                              int connectivity, int threads, CT_IDX *p) {
  if (accel__dims_count(d) >= CT_NONE) return ACCEL_ERR_LIMIT;
  const back_nb b = backward_neighbours(connectivity);
  const int nslabs = slab_count(threads, d);
#pragma omp parallel for num_threads(nslabs) schedule(static, 1)
  for (int s = 0; s < nslabs; s++) {
    const int64_t z0 = d.nz * s / nslabs, z1 = d.nz * (s + 1) / nslabs;
    CT_FN(scan_planes)(mask, d, &b, list, count, z0, z1, z0, true, p);
  }
  for (int s = 1; s < nslabs; s++) { /* the slab boundaries */
    const int64_t z = d.nz * s / nslabs;
    CT_FN(scan_planes)(mask, d, &b, list, count, z, z + 1, z - 1, false, p);
  }
  for (uint64_t k = 0; k < count; k++) p[list[k]] = p[p[list[k]]]; /* flatten, in increasing order */
  return ACCEL_OK;
}

/* scan_voxel at the selected voxels of plane z, looking no lower than zmin. */
static void CT_FN(scan_plane)(const uint8_t *mask, accel__dims d, bool want_set, const back_nb *b, int64_t z,
                              int64_t zmin, CT_IDX *p) {
  for (int64_t y = 0; y < d.ny; y++)
    for (int64_t x = 0; x < d.nx; x++) {
      const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
      if (p[i] != CT_NONE) CT_FN(scan_voxel)(mask, d, want_set, b, zmin, z, y, x, p);
    }
}

accel_status CT_FN(accel__ct_components)(const uint8_t *mask, accel__dims d, bool want_set, int connectivity,
                                         int threads, CT_IDX *p) {
  const uint64_t n = accel__dims_count(d);
  if (n >= CT_NONE) return ACCEL_ERR_LIMIT;
  const back_nb b = backward_neighbours(connectivity);
  const uint64_t plane = (uint64_t)d.ny * (uint64_t)d.nx;
  const int nslabs = slab_count(threads, d);
#pragma omp parallel for num_threads(nslabs) schedule(static, 1)
  for (int s = 0; s < nslabs; s++) {
    const int64_t z0 = d.nz * s / nslabs, z1 = d.nz * (s + 1) / nslabs;
    for (uint64_t i = (uint64_t)z0 * plane; i < (uint64_t)z1 * plane; i++)
      p[i] = selected(mask, i, want_set) ? (CT_IDX)i : CT_NONE;
    for (int64_t z = z0; z < z1; z++) CT_FN(scan_plane)(mask, d, want_set, &b, z, z0, p);
  }
  /* the slab boundaries: the first plane of each slab against the plane before */
  for (int s = 1; s < nslabs; s++)
    CT_FN(scan_plane)(mask, d, want_set, &b, d.nz * s / nslabs, d.nz * s / nslabs - 1, p);
  /* flatten: parents are smaller, so theirs are final already */
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != CT_NONE) p[i] = p[p[i]];
  return ACCEL_OK;
}
