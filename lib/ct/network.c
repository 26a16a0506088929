/* The pore network of a label volume: regions, throats, porosity. */
#include "ct/ct.h"
#include "io/file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

struct accel_ct_network {
  size_t nregions, nthroats;
  accel_ct_region *regions;
  accel_ct_throat *throats;
  double porosity;
  double spacing[3]; /* of the volume it was built from */
};

typedef struct racc { /* a region's sums */
  uint64_t voxels;
  double sz, sy, sx;
  float maxedt;
} racc;

typedef struct tacc { /* a throat's sums; key = a << 32 | b, 0 = empty slot */
  uint64_t key;
  uint64_t faces[3]; /* faces normal to z, y, x */
  float radius;
} tacc;

typedef struct tmap {
  tacc *slot;
  size_t cap, n;
} tmap;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static tacc *tmap_get(tmap *m, uint64_t key) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    tacc *s = calloc(cap, sizeof *s);
    if (!s) return NULL;
    for (size_t i = 0; i < m->cap; i++)
      if (m->slot[i].key) {
        size_t j = mix(m->slot[i].key) & (cap - 1);
        while (s[j].key) j = (j + 1) & (cap - 1);
        s[j] = m->slot[i];
      }
    free(m->slot);
    m->slot = s;
    m->cap = cap;
  }
  size_t j = mix(key) & (m->cap - 1);
  while (m->slot[j].key && m->slot[j].key != key) j = (j + 1) & (m->cap - 1);
  if (!m->slot[j].key) {
    m->slot[j].key = key;
    m->n++;
  }
  return &m->slot[j];
}

static int cmp_u32(const void *a, const void *b) { return accel__cmp_u64(*(const uint32_t *)a, *(const uint32_t *)b); }

static int cmp_throat(const void *a, const void *b) {
  const accel_ct_throat *x = a, *y = b;
  return accel__cmp_u64_pair(x->a, x->b, y->a, y->b);
}

/* Labels to dense region numbers: a direct table when the largest label is
 * small enough, else the sorted distinct labels (binary search). */
typedef struct label_map {
  uint32_t *direct; /* label -> region + 1 (0: absent) */
  uint32_t *sorted; /* distinct labels */
  size_t nsorted;
} label_map;

static inline uint32_t region_of(const label_map *lm, uint32_t label) {
  if (lm->direct) return lm->direct[label] - 1;
  size_t lo = 0, hi = lm->nsorted;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (lm->sorted[mid] < label) lo = mid + 1;
    else hi = mid;
  }
  return (uint32_t)lo;
}

/* The label map of the labels > 0 among labels[0..n) (the largest maxl,
 * `labelled` of them); nreg: how many distinct labels. */
static accel_status map_labels(const int32_t *labels, uint64_t n, int32_t maxl, uint64_t labelled, label_map *lm,
                               size_t *nreg) {
  *nreg = 0;
  if ((uint64_t)maxl <= n + 1024) {
    lm->direct = calloc((size_t)maxl + 1, sizeof(uint32_t));
    if (!lm->direct) return ACCEL_ERR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < n; i++)
      if (labels[i] > 0) lm->direct[labels[i]] = 1;
    for (int32_t l = 1; l <= maxl; l++)
      if (lm->direct[l]) lm->direct[l] = (uint32_t)++ * nreg;
    return ACCEL_OK;
  }
  lm->sorted = malloc((labelled ? labelled : 1) * sizeof(uint32_t));
  if (!lm->sorted) return ACCEL_ERR_OUT_OF_MEMORY;
  for (uint64_t i = 0; i < n; i++)
    if (labels[i] > 0) lm->sorted[lm->nsorted++] = (uint32_t)labels[i];
  qsort(lm->sorted, lm->nsorted, sizeof(uint32_t), cmp_u32);
  for (size_t i = 0; i < lm->nsorted; i++)
    if (i == 0 || lm->sorted[i] != lm->sorted[*nreg - 1]) lm->sorted[(*nreg)++] = lm->sorted[i];
  lm->nsorted = *nreg;
  return ACCEL_OK;
}

/* Voxel i at (z, y, x) into its region's sums and, with each next
 * neighbour of another region, into their throat's. False: out of memory. */
static bool add_voxel(const int32_t *labels, const float *edt, accel__dims d, const label_map *lm, racc *mine, tmap *tm,
                      int64_t z, int64_t y, int64_t x) {
  const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
  const int32_t a = labels[i];
  if (a <= 0) return true;
  racc *r = &mine[region_of(lm, (uint32_t)a)];
  r->voxels++;
  r->sz += (double)z;
  r->sy += (double)y;
  r->sx += (double)x;
  if (edt[i] > r->maxedt) r->maxedt = edt[i];
  const int64_t step[3] = {d.ny * d.nx, d.nx, 1};
  const bool inside[3] = {z + 1 < d.nz, y + 1 < d.ny, x + 1 < d.nx};
  bool ok = true;
  for (int ax = 0; ax < 3; ax++) {
    if (!inside[ax]) continue;
    const uint64_t j = i + (uint64_t)step[ax];
    const int32_t b = labels[j];
    if (b <= 0 || b == a) continue;
    const uint32_t lo = (uint32_t)(a < b ? a : b), hi = (uint32_t)(a < b ? b : a);
    tacc *th = tmap_get(tm, (uint64_t)lo << 32 | hi);
    if (!th) {
      ok = false;
      continue;
    }
    th->faces[ax]++;
    const float m = edt[i] < edt[j] ? edt[i] : edt[j];
    if (m > th->radius) th->radius = m;
  }
  return ok;
}

/* Each thread's region sums ra[t * nreg ..] and throat map maps[t], over
 * whole z planes. False: out of memory. */
static bool accumulate(const int32_t *labels, const float *edt, accel__dims d, const label_map *lm, size_t nreg, int nt,
                       racc *ra, tmap *maps) {
  (void)nt; /* unused without OpenMP */
  int oom_flag = 0;
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num();
#else
    const int t = 0;
#endif
    racc *mine = ra + (size_t)t * nreg;
    tmap *tm = &maps[t];
#pragma omp for schedule(dynamic, 1)
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++)
        for (int64_t x = 0; x < d.nx; x++)
          if (!add_voxel(labels, edt, d, lm, mine, tm, z, y, x)) __atomic_store_n(&oom_flag, 1, __ATOMIC_RELAXED);
  }
  return !oom_flag;
}

/* The regions: the threads' sums added in thread order (deterministic). */
static accel_status make_regions(accel_ct_network *net, const racc *ra, int nt, size_t nreg, const label_map *lm,
                                 int32_t maxl, const double spacing[3]) {
  net->regions = calloc(nreg ? nreg : 1, sizeof(accel_ct_region));
  if (!net->regions) return ACCEL_ERR_OUT_OF_MEMORY;
  net->nregions = nreg;
  const double cell = spacing[0] * spacing[1] * spacing[2];
  for (size_t r = 0; r < nreg; r++) {
    racc sum = {0, 0, 0, 0, 0};
    for (int t = 0; t < nt; t++) {
      const racc *q = &ra[(size_t)t * nreg + r];
      sum.voxels += q->voxels;
      sum.sz += q->sz;
      sum.sy += q->sy;
      sum.sx += q->sx;
      if (q->maxedt > sum.maxedt) sum.maxedt = q->maxedt;
    }
    accel_ct_region *g = &net->regions[r];
    g->struct_size = sizeof *g;
    g->label = lm->direct ? 0 : lm->sorted[r];
    g->voxels = sum.voxels;
    g->volume = (double)sum.voxels * cell;
    g->equivalent_radius = cbrt(3.0 * g->volume / (4.0 * M_PI));
    const double v = sum.voxels ? (double)sum.voxels : 1.0;
    g->centroid[0] = sum.sz / v * spacing[0];
    g->centroid[1] = sum.sy / v * spacing[1];
    g->centroid[2] = sum.sx / v * spacing[2];
    g->inscribed_radius = sum.maxedt;
  }
  if (lm->direct)
    for (int32_t l = 1; l <= maxl; l++)
      if (lm->direct[l]) net->regions[lm->direct[l] - 1].label = (uint32_t)l;
  return ACCEL_OK;
}

/* The throats: the threads' maps merged, sorted by (a, b). */
static accel_status make_throats(accel_ct_network *net, const tmap *maps, int nt, const double spacing[3]) {
  tmap all = {NULL, 0, 0};
  accel_status st = ACCEL_OK;
  for (int t = 0; t < nt && !st; t++)
    for (size_t i = 0; i < maps[t].cap && !st; i++) {
      const tacc *q = &maps[t].slot[i];
      if (!q->key) continue;
      tacc *th = tmap_get(&all, q->key);
      if (!th) {
        st = ACCEL_ERR_OUT_OF_MEMORY;
        continue;
      }
      for (int ax = 0; ax < 3; ax++) th->faces[ax] += q->faces[ax];
      if (q->radius > th->radius) th->radius = q->radius;
    }
  if (!st && !(net->throats = calloc(all.n ? all.n : 1, sizeof(accel_ct_throat)))) st = ACCEL_ERR_OUT_OF_MEMORY;
  const double area[3] = {spacing[1] * spacing[2], spacing[0] * spacing[2], spacing[0] * spacing[1]};
  for (size_t i = 0; i < all.cap && !st; i++) {
    const tacc *q = &all.slot[i];
    if (!q->key) continue;
    accel_ct_throat *th = &net->throats[net->nthroats++];
    th->struct_size = sizeof *th;
    th->a = (uint32_t)(q->key >> 32);
    th->b = (uint32_t)q->key;
    th->faces = q->faces[0] + q->faces[1] + q->faces[2];
    th->area = (double)q->faces[0] * area[0] + (double)q->faces[1] * area[1] + (double)q->faces[2] * area[2];
    th->inscribed_radius = q->radius;
  }
  free(all.slot);
  if (!st) qsort(net->throats, net->nthroats, sizeof(accel_ct_throat), cmp_throat);
  return st;
}

accel_status accel__ct_network_cpu(const int32_t *labels, const float *edt, accel__dims d, const double spacing[3],
                                   int threads, accel_ct_network **out) {
  const uint64_t n = accel__dims_count(d);
  accel_ct_network *net = calloc(1, sizeof *net);
  if (!net) return ACCEL_ERR_OUT_OF_MEMORY;
  int32_t maxl = 0;
  uint64_t labelled = 0;
  for (uint64_t i = 0; i < n; i++)
    if (labels[i] > 0) {
      labelled++;
      if (labels[i] > maxl) maxl = labels[i];
    }
  net->porosity = n ? (double)labelled / (double)n : 0.0;
  for (int a = 0; a < 3; a++) net->spacing[a] = spacing ? spacing[a] : 1.0;
  label_map lm = {NULL, NULL, 0};
  size_t nreg = 0;
  accel_status st = map_labels(labels, n, maxl, labelled, &lm, &nreg);
  const int nt = threads < 1 ? 1 : threads;
  racc *ra = st ? NULL : calloc((size_t)nt * (nreg ? nreg : 1), sizeof *ra);
  tmap *maps = st ? NULL : calloc((size_t)nt, sizeof *maps);
  if (!st && (!ra || !maps || !accumulate(labels, edt, d, &lm, nreg, nt, ra, maps))) st = ACCEL_ERR_OUT_OF_MEMORY;
  if (!st) st = make_regions(net, ra, nt, nreg, &lm, maxl, spacing);
  if (!st) st = make_throats(net, maps, nt, spacing);
  free(lm.direct);
  free(lm.sorted);
  free(ra);
  for (int t = 0; maps && t < nt; t++) free(maps[t].slot);
  free(maps);
  if (st) accel_ct_network_destroy(net);
  else *out = net;
  return st;
}

void accel_ct_network_destroy(accel_ct_network *net) {
  if (!net) return;
  free(net->regions);
  free(net->throats);
  free(net);
}

accel_status accel_ct_network_info(const accel_ct_network *net, size_t *regions, size_t *throats, double *porosity) {
  REQUIRE(NULL, net, ACCEL_ERR_INVALID_ARG, "network is NULL");
  if (regions) *regions = net->nregions;
  if (throats) *throats = net->nthroats;
  if (porosity) *porosity = net->porosity;
  return ACCEL_OK;
}

accel_status accel_ct_network_region(const accel_ct_network *net, size_t i, accel_ct_region *out) {
  REQUIRE(NULL, net && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  if (i >= net->nregions) return FAIL(NULL, ACCEL_ERR_NOT_FOUND, "region %zu of %zu", i, net->nregions);
  return accel__versioned_out(NULL, __func__, "region", out, &net->regions[i], sizeof *out, sizeof *out);
}

accel_status accel_ct_network_throat(const accel_ct_network *net, size_t i, accel_ct_throat *out) {
  REQUIRE(NULL, net && out, ACCEL_ERR_INVALID_ARG, "NULL argument");
  if (i >= net->nthroats) return FAIL(NULL, ACCEL_ERR_NOT_FOUND, "throat %zu of %zu", i, net->nthroats);
  return accel__versioned_out(NULL, __func__, "throat", out, &net->throats[i], sizeof *out, sizeof *out);
}

/* JSON numbers: the shortest text that reads back as the same double;
 * non-finite values (none expected) as null. */
static void json_double(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.17g", v);
  else fputs("null", f);
}

accel_status accel_ct_network_save_json(accel_ctx *ctx, const accel_ct_network *net, const char *path) {
  REQUIRE(ctx, net && path, ACCEL_ERR_INVALID_ARG, "network and path are required");
  accel__atomic_file af;
  accel_status s = accel__atomic_open(ctx, __func__, path, false, &af);
  if (s) return s;
  FILE *f = af.f;
  fprintf(f, "{\n  \"porosity\": ");
  json_double(f, net->porosity);
  fprintf(f, ",\n  \"spacing\": [%.17g, %.17g, %.17g],\n  \"regions\": [", net->spacing[0], net->spacing[1],
          net->spacing[2]);
  for (size_t i = 0; i < net->nregions && !af.err; i++) {
    const accel_ct_region *r = &net->regions[i];
    fprintf(f, "%s\n    {\"label\": %u, \"voxels\": %llu, \"volume\": ", i ? "," : "", r->label,
            (unsigned long long)r->voxels);
    json_double(f, r->volume);
    fprintf(f, ", \"equivalent_radius\": ");
    json_double(f, r->equivalent_radius);
    fprintf(f, ", \"centroid\": [");
    for (int a = 0; a < 3; a++) {
      if (a) fputs(", ", f);
      json_double(f, r->centroid[a]);
    }
    fprintf(f, "], \"inscribed_radius\": ");
    json_double(f, r->inscribed_radius);
    fputc('}', f);
  }
  fprintf(f, "%s],\n  \"throats\": [", net->nregions ? "\n  " : "");
  for (size_t i = 0; i < net->nthroats && !af.err; i++) {
    const accel_ct_throat *t = &net->throats[i];
    fprintf(f, "%s\n    {\"a\": %u, \"b\": %u, \"faces\": %llu, \"area\": ", i ? "," : "", t->a, t->b,
            (unsigned long long)t->faces);
    json_double(f, t->area);
    fprintf(f, ", \"inscribed_radius\": ");
    json_double(f, t->inscribed_radius);
    fputc('}', f);
  }
  fprintf(f, "%s]\n}\n", net->nthroats ? "\n  " : "");
  return accel__atomic_commit(ctx, __func__, &af);
}
