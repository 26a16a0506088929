/*
 * SNOW's peak trimming, with the rules of PoreSpy 3's trim_saddle_points and
 * trim_nearby_peaks (Gostick, Phys. Rev. E 96, 023307, 2017), on a marker
 * volume (nonzero = a peak voxel) and the distance map:
 *
 * Saddles. Per 6-connected group of peak voxels P, at most `iterations`
 * times: D = P dilated by the 3x3x3 cube (within the volume), M = the
 * highest map value in D, E = the voxels of D whose value is M (and > 0).
 * E == P: a true peak, E is kept. E and P disjoint: a saddle or a ridge
 * climbing away, dropped. Otherwise P = E (a plateau grows) and again. A
 * group still undecided after the last iteration is dropped. Peak voxels
 * that lie in some kept E survive.
 *
 * Nearby peaks. Per 26-connected group i (numbered in C order of their first
 * voxel): c_i = its centroid, truncated to whole voxels; L_i = map[c_i] +
 * i * 1e-6 (the jitter that orders equal values); n_i = the nearest other
 * group by the distance between the c's (times the spacing). Where
 * |c_i - c_n| <= f * L_i, the one of i and n_i with the smaller L is dropped
 * (n_i when equal). Equally near neighbours: the lowest-numbered one (SciPy's
 * KD-tree leaves that order unspecified).
 *
 * The survivors are numbered by 26-connected group in C order.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

typedef struct coord {
  int64_t z, y, x;
} coord;

static coord coord_of(uint64_t i, accel__dims d) {
  coord c = {(int64_t)(i / ((uint64_t)d.ny * (uint64_t)d.nx)), (int64_t)((i / (uint64_t)d.nx) % (uint64_t)d.ny),
             (int64_t)(i % (uint64_t)d.nx)};
  return c;
}

/* Position of voxel v in the sorted list, or -1. */
static int64_t find(const uint64_t *list, uint64_t n, uint64_t v) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (list[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && list[lo] == v ? (int64_t)lo : -1;
}

/* Positions in the list of peak voxels, and group numbers, are uint64: the
 * list may hold more than 2^32 voxels of a large volume. */
static uint64_t uf_find(uint64_t *parent, uint64_t a) {
  while (parent[a] != a) {
    parent[a] = parent[parent[a]];
    a = parent[a];
  }
  return a;
}

static void uf_union(uint64_t *parent, uint64_t a, uint64_t b) {
  a = uf_find(parent, a);
  b = uf_find(parent, b);
  if (a < b) parent[b] = a;
  else if (b < a) parent[a] = b;
}

/* Groups of the sorted voxel list (6- or 26-connected): group[k] = 0, 1, ...
 * numbered in the order of their first voxel. Returns the group count, or
 * UINT64_MAX when out of memory. */
static uint64_t group_voxels(const uint64_t *list, uint64_t n, accel__dims d, int conn, uint64_t *group) {
  uint64_t *parent = malloc((n ? n : 1) * sizeof *parent);
  if (!parent) return UINT64_MAX;
  for (uint64_t k = 0; k < n; k++) parent[k] = k;
  for (uint64_t k = 0; k < n; k++) {
    const coord c = coord_of(list[k], d);
    /* the neighbours that come later in C order */
    for (int dz = 0; dz <= 1; dz++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
          if (dz == 0 && (dy < 0 || (dy == 0 && dx <= 0))) continue;
          if (conn == 6 && abs(dz) + abs(dy) + abs(dx) != 1) continue;
          const int64_t z = c.z + dz, y = c.y + dy, x = c.x + dx;
          if (z >= d.nz || y < 0 || y >= d.ny || x < 0 || x >= d.nx) continue;
          const int64_t j = find(list, n, ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x);
          if (j >= 0) uf_union(parent, k, (uint64_t)j);
        }
  }
  uint64_t groups = 0;
  for (uint64_t k = 0; k < n; k++) {
    const uint64_t r = uf_find(parent, k);
    group[k] = r == k ? groups++ : group[r]; /* a root is its group's first voxel */
  }
  free(parent);
  return groups;
}

/* ------------------------------------------------------------ saddles */

/* A set of voxel indices with generation stamps (cleared in O(1)). */
typedef struct vset {
  uint64_t *keys;
  uint32_t *stamp;
  uint64_t cap; /* a power of two */
  uint32_t gen;
  uint64_t *items; /* the members, in insertion order */
  uint64_t count, items_cap;
} vset;

static void vset_free(vset *s) {
  free(s->keys);
  free(s->stamp);
  free(s->items);
  memset(s, 0, sizeof *s);
}

/* Empty, with room for `want` members at a load under 1/2. */
static bool vset_reset(vset *s, uint64_t want) {
  if (want * 2 > s->cap) {
    uint64_t cap = 64;
    while (cap < want * 2) cap *= 2;
    free(s->keys);
    free(s->stamp);
    s->keys = malloc(cap * sizeof *s->keys);
    s->stamp = calloc(cap, sizeof *s->stamp);
    if (!s->keys || !s->stamp) return false;
    s->cap = cap;
    s->gen = 0;
  }
  if (want > s->items_cap) {
    free(s->items);
    if (!(s->items = malloc(want * sizeof *s->items))) return false;
    s->items_cap = want;
  }
  if (++s->gen == 0) { /* wrapped: clear the stamps once */
    memset(s->stamp, 0, s->cap * sizeof *s->stamp);
    s->gen = 1;
  }
  s->count = 0;
  return true;
}

static void vset_add(vset *s, uint64_t v) {
  uint64_t h = (v * UINT64_C(0x9E3779B97F4A7C15)) >> 17;
  for (;; h++) {
    const uint64_t at = h & (s->cap - 1);
    if (s->stamp[at] != s->gen) {
      s->stamp[at] = s->gen;
      s->keys[at] = v;
      s->items[s->count++] = v;
      return;
    }
    if (s->keys[at] == v) return;
  }
}

/* Decide one group (P: np voxels in p, which it may replace by a larger
 * buffer). Returns 1 = kept (the final set in *p, *np), 0 = dropped, -1 =
 * out of memory. */
static int saddle_group(const float *map, accel__dims d, int iterations, vset *dil, uint64_t **p, uint64_t *np,
                        uint64_t *pcap) {
  for (int it = 0; it < iterations; it++) {
    if (!vset_reset(dil, *np * 27)) return -1;
    for (uint64_t k = 0; k < *np; k++) {
      const coord c = coord_of((*p)[k], d);
      for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++)
          for (int dx = -1; dx <= 1; dx++) {
            const int64_t z = c.z + dz, y = c.y + dy, x = c.x + dx;
            if (z < 0 || y < 0 || x < 0 || z >= d.nz || y >= d.ny || x >= d.nx) continue;
            vset_add(dil, ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x);
          }
    }
    float m = -INFINITY;
    for (uint64_t k = 0; k < dil->count; k++)
      if (map[dil->items[k]] > m) m = map[dil->items[k]];
    if (!(m > 0)) return 0; /* nothing of value > 0 around: E is empty */
    uint64_t in_p = 0, ext = 0;
    for (uint64_t k = 0; k < *np; k++) in_p += map[(*p)[k]] == m;
    for (uint64_t k = 0; k < dil->count; k++) ext += map[dil->items[k]] == m;
    if (in_p == *np && ext == *np) return 1; /* E == P (P is inside D) */
    if (in_p == 0) return 0;                 /* disjoint: a saddle */
    if (ext > *pcap) {
      uint64_t *grown = realloc(*p, ext * sizeof **p);
      if (!grown) return -1;
      *p = grown;
      *pcap = ext;
    }
    *np = 0;
    for (uint64_t k = 0; k < dil->count; k++)
      if (map[dil->items[k]] == m) (*p)[(*np)++] = dil->items[k];
  }
  return 0; /* undecided: dropped */
}

static int cmp_u64(const void *a, const void *b) { return accel__cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b); }

/* alive[k] = whether list[k] survives the saddle trim. */
static accel_status trim_saddles(const float *map, accel__dims d, const uint64_t *list, uint64_t n, int iterations,
                                 int threads, uint8_t *alive) {
  (void)threads; /* read by OpenMP pragmas only */
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  uint64_t *group = malloc((n ? n : 1) * sizeof *group);
  uint64_t *start = NULL, *members = NULL, *kept = NULL, *kept_off = NULL;
  uint64_t **sets = NULL;
  uint64_t ng = 0;
  if (!group || (ng = group_voxels(list, n, d, 6, group)) == UINT64_MAX) goto done;
  start = calloc((size_t)ng + 1, sizeof *start);
  members = malloc((n ? n : 1) * sizeof *members);
  sets = calloc(ng ? ng : 1, sizeof *sets);
  kept_off = calloc((size_t)ng + 1, sizeof *kept_off); /* kept set sizes, then offsets */
  if (!start || !members || !sets || !kept_off) goto done;
  for (uint64_t k = 0; k < n; k++) start[group[k] + 1]++;
  for (uint64_t g = 0; g < ng; g++) start[g + 1] += start[g];
  {
    uint64_t *fill = malloc(((size_t)ng + 1) * sizeof *fill);
    if (!fill) goto done;
    memcpy(fill, start, ((size_t)ng + 1) * sizeof *fill);
    for (uint64_t k = 0; k < n; k++) members[fill[group[k]]++] = list[k];
    free(fill);
  }
  bool failed = false;
#pragma omp parallel num_threads(threads)
  {
    vset dil = {0};
#pragma omp for schedule(dynamic, 1)
    for (uint64_t g = 0; g < ng; g++) {
      bool bad;
#pragma omp atomic read
      bad = failed;
      if (bad) continue;
      uint64_t np = start[g + 1] - start[g], cap = np;
      uint64_t *p = malloc(np * sizeof *p);
      int r = -1;
      if (p) {
        memcpy(p, members + start[g], np * sizeof *p);
        r = saddle_group(map, d, iterations, &dil, &p, &np, &cap);
      }
      if (r == 1) {
        sets[g] = p;
        kept_off[g + 1] = np;
      } else {
        free(p);
        if (r < 0) {
#pragma omp atomic write
          failed = true;
        }
      }
    }
    vset_free(&dil);
  }
  if (failed) goto done;
  for (uint64_t g = 0; g < ng; g++) kept_off[g + 1] += kept_off[g];
  const uint64_t nk = kept_off[ng];
  if (!(kept = malloc((nk ? nk : 1) * sizeof *kept))) goto done;
  for (uint64_t g = 0; g < ng; g++)
    if (sets[g]) memcpy(kept + kept_off[g], sets[g], (kept_off[g + 1] - kept_off[g]) * sizeof *kept);
  qsort(kept, nk, sizeof *kept, cmp_u64);
  for (uint64_t k = 0; k < n; k++) alive[k] = find(kept, nk, list[k]) >= 0;
  st = ACCEL_OK;
done:
  if (sets)
    for (uint64_t g = 0; g < ng; g++) free(sets[g]);
  free(sets);
  free(group);
  free(start);
  free(members);
  free(kept);
  free(kept_off);
  return st;
}

/* ------------------------------------------------------------ nearby peaks */

typedef struct peak {
  coord c;  /* truncated centroid */
  double L; /* map value there plus the jitter */
} peak;

/* For every peak the nearest other (by squared distance in spacing units,
 * ties to the lowest index) through a uniform grid of cells: nn[i], dist[i]
 * (the distance, +inf when alone). */
static accel_status nearest_others(const peak *pk, uint64_t n, accel__dims d, const double sp[3], int threads,
                                   uint64_t *nn, double *dist) {
  (void)threads; /* read by OpenMP pragmas only */
  if (n < 2) {
    for (uint64_t i = 0; i < n; i++) {
      nn[i] = UINT64_MAX;
      dist[i] = INFINITY;
    }
    return ACCEL_OK;
  }
  /* cells of about two peaks each, cubes in voxels along the finest axis */
  const double volume = (double)d.nz * (double)d.ny * (double)d.nx;
  int64_t side = (int64_t)ceil(cbrt(volume * 2.0 / n));
  if (side < 1) side = 1;
  const int64_t gz = (d.nz + side - 1) / side, gy = (d.ny + side - 1) / side, gx = (d.nx + side - 1) / side;
  const uint64_t cells = (uint64_t)gz * (uint64_t)gy * (uint64_t)gx;
  uint64_t *cell_start = calloc(cells + 1, sizeof *cell_start), *cell_items = malloc(n * sizeof *cell_items);
  if (!cell_start || !cell_items) {
    free(cell_start);
    free(cell_items);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
#define CELL_OF(p)                                                                                                     \
  (((uint64_t)((p).z / side) * (uint64_t)gy + (uint64_t)((p).y / side)) * (uint64_t)gx + (uint64_t)((p).x / side))
  for (uint64_t i = 0; i < n; i++) cell_start[CELL_OF(pk[i].c) + 1]++;
  for (uint64_t c = 0; c < cells; c++) cell_start[c + 1] += cell_start[c];
  for (uint64_t i = 0; i < n; i++) { /* increasing i within each cell */
    const uint64_t c = CELL_OF(pk[i].c);
    cell_items[cell_start[c]++] = i;
  }
  for (uint64_t c = cells; c > 0; c--) cell_start[c] = cell_start[c - 1];
  cell_start[0] = 0;
  const double smin = fmin(sp[0], fmin(sp[1], sp[2]));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
  for (uint64_t i = 0; i < n; i++) {
    const coord c = pk[i].c;
    const int64_t cz = c.z / side, cy = c.y / side, cx = c.x / side;
    double best = INFINITY;
    uint64_t who = UINT64_MAX;
    for (int64_t ring = 0;; ring++) {
      /* every point outside rings 0..ring-1 is at least (ring-1)*side voxels
       * away along some axis */
      if (ring > 0 && who != UINT64_MAX) {
        const double reach = (double)(ring - 1) * (double)side * smin;
        if (reach * reach > best) break;
      }
      if (ring > gz && ring > gy && ring > gx) break;
      for (int64_t z = cz - ring; z <= cz + ring; z++) {
        if (z < 0 || z >= gz) continue;
        for (int64_t y = cy - ring; y <= cy + ring; y++) {
          if (y < 0 || y >= gy) continue;
          const bool shell = z == cz - ring || z == cz + ring || y == cy - ring || y == cy + ring;
          for (int64_t x = cx - ring; x <= cx + ring; x += shell ? 1 : 2 * ring) {
            if (x >= 0 && x < gx) {
              const uint64_t cell = ((uint64_t)z * (uint64_t)gy + (uint64_t)y) * (uint64_t)gx + (uint64_t)x;
              for (uint64_t t = cell_start[cell]; t < cell_start[cell + 1]; t++) {
                const uint64_t j = cell_items[t];
                if (j == i) continue;
                const double dz = (double)(pk[j].c.z - c.z) * sp[0], dy = (double)(pk[j].c.y - c.y) * sp[1],
                             dx = (double)(pk[j].c.x - c.x) * sp[2];
                const double q = dz * dz + dy * dy + dx * dx;
                if (q < best || (q == best && j < who)) {
                  best = q;
                  who = j;
                }
              }
            }
            if (ring == 0) break;
          }
        }
      }
    }
    nn[i] = who;
    dist[i] = sqrt(best);
  }
#undef CELL_OF
  free(cell_start);
  free(cell_items);
  return ACCEL_OK;
}

/* alive[k] (for the voxels alive on entry) = whether list[k] survives. */
static accel_status trim_nearby(const float *map, accel__dims d, const uint64_t *list, uint64_t n, double factor,
                                const double sp[3], int threads, uint8_t *alive) {
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  uint64_t m = 0;
  for (uint64_t k = 0; k < n; k++) m += alive[k];
  uint64_t *sub = malloc((m ? m : 1) * sizeof *sub), *back = malloc((m ? m : 1) * sizeof *back);
  uint64_t *group = malloc((m ? m : 1) * sizeof *group), *nn = NULL;
  peak *pk = NULL;
  uint64_t *sums = NULL;
  double *dist = NULL;
  uint8_t *drop = NULL;
  uint64_t ng = 0;
  if (!sub || !back || !group) goto done;
  m = 0;
  for (uint64_t k = 0; k < n; k++)
    if (alive[k]) {
      back[m] = k;
      sub[m++] = list[k];
    }
  if ((ng = group_voxels(sub, m, d, 26, group)) == UINT64_MAX) goto done;
  sums = calloc((size_t)ng * 4 + 1, sizeof *sums);
  pk = malloc((ng ? ng : 1) * sizeof *pk);
  nn = malloc((ng ? ng : 1) * sizeof *nn);
  dist = malloc((ng ? ng : 1) * sizeof *dist);
  drop = calloc(ng ? ng : 1, 1);
  if (!sums || !pk || !nn || !dist || !drop) goto done;
  for (uint64_t k = 0; k < m; k++) {
    const coord c = coord_of(sub[k], d);
    uint64_t *s = sums + (size_t)group[k] * 4;
    s[0] += (uint64_t)c.z;
    s[1] += (uint64_t)c.y;
    s[2] += (uint64_t)c.x;
    s[3]++;
  }
  for (uint64_t g = 0; g < ng; g++) {
    const uint64_t *s = sums + (size_t)g * 4;
    /* the mean truncated: integer division is exact where numpy's float
     * mean then astype(int) could differ only for sums beyond 2^53 */
    pk[g].c = (coord){(int64_t)(s[0] / s[3]), (int64_t)(s[1] / s[3]), (int64_t)(s[2] / s[3])};
    const uint64_t at =
        ((uint64_t)pk[g].c.z * (uint64_t)d.ny + (uint64_t)pk[g].c.y) * (uint64_t)d.nx + (uint64_t)pk[g].c.x;
    pk[g].L = (double)map[at] + (double)g * 1e-6;
  }
  if ((st = nearest_others(pk, ng, d, sp, threads, nn, dist))) goto done;
  for (uint64_t g = 0; g < ng; g++) {
    if (nn[g] == UINT64_MAX || !(dist[g] <= factor * pk[g].L)) continue;
    drop[pk[g].L < pk[nn[g]].L ? g : nn[g]] = 1;
  }
  for (uint64_t k = 0; k < m; k++)
    if (drop[group[k]]) alive[back[k]] = 0;
  st = ACCEL_OK;
done:
  free(sub);
  free(back);
  free(group);
  free(sums);
  free(pk);
  free(nn);
  free(dist);
  free(drop);
  return st;
}

/* ------------------------------------------------------------ entry */

accel_status accel__ct_trim_markers_cpu(const float *map, accel__dims d, unsigned trim, int iterations, double factor,
                                        const double spacing[3], int threads, int32_t *markers, uint32_t *count) {
  const uint64_t total = accel__dims_count(d);
  uint64_t n = 0;
  for (uint64_t i = 0; i < total; i++) n += markers[i] != 0;
  uint64_t *list = malloc((n ? n : 1) * sizeof *list);
  uint8_t *alive = malloc(n ? n : 1);
  uint64_t *group = malloc((n ? n : 1) * sizeof *group);
  uint64_t *sub = malloc((n ? n : 1) * sizeof *sub);
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  if (!list || !alive || !group || !sub) goto done;
  n = 0;
  for (uint64_t i = 0; i < total; i++)
    if (markers[i]) list[n++] = i;
  memset(alive, 1, n);
  if ((trim & ACCEL_CT_TRIM_SADDLES) && (st = trim_saddles(map, d, list, n, iterations, threads, alive))) goto done;
  if ((trim & ACCEL_CT_TRIM_NEARBY) && (st = trim_nearby(map, d, list, n, factor, spacing, threads, alive))) goto done;
  /* the survivors, numbered by 26-connected group in C order */
  uint64_t m = 0;
  for (uint64_t k = 0; k < n; k++)
    if (alive[k]) sub[m++] = list[k];
  const uint64_t ng = group_voxels(sub, m, d, 26, group);
  if (ng == UINT64_MAX || ng > INT32_MAX) { /* out of memory; numbers beyond the I32 output */
    st = ng == UINT64_MAX ? ACCEL_ERR_OUT_OF_MEMORY : ACCEL_ERR_LIMIT;
    goto done;
  }
  for (uint64_t k = 0; k < n; k++) markers[list[k]] = 0;
  for (uint64_t k = 0; k < m; k++) markers[sub[k]] = (int32_t)group[k] + 1;
  if (count) *count = (uint32_t)ng;
  st = ACCEL_OK;
done:
  free(list);
  free(alive);
  free(group);
  free(sub);
  return st;
}
