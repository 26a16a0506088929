/*
 * scikit-image's peak_local_max with all of its parameters (accel_ct_markers
 * with second-version options; cpu_markers.c keeps the fast path of the
 * first version's case). The steps are peak_local_max's:
 *
 * 1. Regions: the labels' values (> 0), or the mask's components (full
 *    connectivity; numbered in C order of their first voxel, as label()
 *    numbers them), each without the excluded border, in increasing order,
 *    each with its bounding box; or, without either, the whole image as one
 *    region (border excluded only after step 2).
 * 2. Per voxel of a region: a candidate when it equals the maximum of the
 *    footprint's window, where the window sees the region's voxels, other
 *    voxels of the box as `background`, and beyond the box 0 (0.19's mode
 *    'constant') or the nearest voxel of the box (0.20 and later: 'nearest').
 *    A footprint or a box of one voxel: every voxel is a candidate. When every
 *    voxel of a region is (a flat region), none is; with regions, those that
 *    a binary opening (the cross of the image's rank, in the box) removes
 *    are instead.
 * 3. Candidates must exceed the threshold (compared in float32 for float32
 *    maps); without regions, the excluded border is dropped now.
 * 4. Per region, candidates in C order are sorted by decreasing value
 *    (numpy 1.x's quicksort, or 0.22's stable sort) and kept greedily when no
 *    kept one is closer than min_distance (the p-norm), at most
 *    num_peaks_per_label of them (num_peaks without regions).
 * 5. With regions, more than num_peaks peaks in all: step 4 again over all
 *    of them, at most num_peaks.
 */
#include "ct/ct.h"
#include "ct/peak_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef accel__ct_peak_region region;

struct accel__ct_peak_search {
  const double *v;
  accel__dims d;
  const accel__ct_peak_params *p;
  double bg;
  int64_t *rid; /* region of each voxel (-1: none); NULL: one region, the whole image */
  int32_t (*offs)[3];
  int noffs;
  bool center;    /* the footprint holds its centre */
  uint64_t fsize; /* the footprint's size, zeros included */
  region *reg;
  uint64_t nreg, *mem, nmem;
  uint8_t *cand, *state;
  uint64_t *res, nres; /* the peaks in peak_local_max's order */
};
typedef accel__ct_peak_search search;

static void coords_of(accel__dims d, uint64_t i, int64_t c[3]) {
  c[2] = (int64_t)(i % (uint64_t)d.nx);
  c[1] = (int64_t)((i / (uint64_t)d.nx) % (uint64_t)d.ny);
  c[0] = (int64_t)(i / ((uint64_t)d.nx * (uint64_t)d.ny));
}

static uint64_t index_of(accel__dims d, const int64_t c[3]) {
  return ((uint64_t)c[0] * (uint64_t)d.ny + (uint64_t)c[1]) * (uint64_t)d.nx + (uint64_t)c[2];
}

static bool interior(const search *s, const int64_t c[3]) {
  const int64_t n[3] = {s->d.nz, s->d.ny, s->d.nx};
  for (int a = 0; a < 3; a++)
    if (c[a] < s->p->border[a] || c[a] >= n[a] - s->p->border[a]) return false;
  return true;
}

/* The footprint's offsets (without the centre), from the array or the cube. */
static accel_status footprint_offsets(search *s, int md) {
  const accel__ct_peak_params *p = s->p;
  int64_t f[3] = {1, 1, 1};
  for (int a = 3 - p->rank; a < 3; a++) f[a] = p->footprint ? p->fshape[a] : 2 * (int64_t)md + 1;
  s->fsize = (uint64_t)(f[0] * f[1] * f[2]);
  s->offs = malloc(s->fsize * sizeof *s->offs);
  if (!s->offs) return ACCEL_ERR_OUT_OF_MEMORY;
  s->noffs = 0;
  s->center = false;
  uint64_t k = 0;
  for (int64_t z = 0; z < f[0]; z++)
    for (int64_t y = 0; y < f[1]; y++)
      for (int64_t x = 0; x < f[2]; x++, k++) {
        if (p->footprint && !p->footprint[k]) continue;
        const int dz = (int)(z - f[0] / 2), dy = (int)(y - f[1] / 2), dx = (int)(x - f[2] / 2);
        if (!dz && !dy && !dx) {
          s->center = true;
          continue;
        }
        s->offs[s->noffs][0] = dz;
        s->offs[s->noffs][1] = dy;
        s->offs[s->noffs][2] = dx;
        s->noffs++;
      }
  return ACCEL_OK;
}

/* What step 2's test reads. */
static accel__ct_peak_window window_of(const search *s) {
  return (accel__ct_peak_window){.d = s->d,
                                 .v = s->v,
                                 .rid = s->rid,
                                 .reg = s->reg,
                                 .nreg = s->nreg,
                                 .offs = (const int32_t *)s->offs,
                                 .noffs = s->noffs,
                                 .center = s->center,
                                 .bg = s->bg,
                                 .nearest = s->p->rules_0_22,
                                 .mem = s->mem,
                                 .nmem = s->nmem};
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The region keys of every voxel (INT64_MIN: none): label values, or the
 * roots of the mask's components. */
static accel_status region_keys(search *s, const uint8_t *mask, int threads, int64_t *key) {
  const uint64_t n = accel__dims_count(s->d);
  if (s->p->labels) {
    for (uint64_t i = 0; i < n; i++) key[i] = s->p->labels[i] > 0 ? s->p->labels[i] : INT64_MIN;
    return ACCEL_OK;
  }
  uint64_t np = 0;
  uint64_t *list = accel__ct_mask_list_wide(mask, n, &np), *root = malloc((n ? n : 1) * sizeof(uint64_t));
  accel_status st =
      list && root ? accel__ct_components_list_wide(mask, s->d, list, np, 26, threads, root) : ACCEL_ERR_OUT_OF_MEMORY;
  if (!st)
    for (uint64_t i = 0; i < n; i++) key[i] = mask[i] ? (int64_t)root[i] : INT64_MIN;
  free(list);
  free(root);
  return st;
}

/* Step 1 with regions: rid[], the regions in key order and their voxels. */
static accel_status build_regions(search *s, const uint8_t *mask, int threads) {
  const uint64_t n = accel__dims_count(s->d);
  int64_t *key = malloc((n ? n : 1) * sizeof(int64_t)), *uniq = NULL;
  uint64_t *fill = NULL;
  accel_status st = key ? region_keys(s, mask, threads, key) : ACCEL_ERR_OUT_OF_MEMORY;
  if (st) goto done;
  uint64_t nk = 0;
  for (uint64_t i = 0; i < n; i++) {
    int64_t c[3];
    coords_of(s->d, i, c);
    if (key[i] != INT64_MIN && !interior(s, c)) key[i] = INT64_MIN;
    nk += key[i] != INT64_MIN;
  }
  st = ACCEL_ERR_OUT_OF_MEMORY;
  if (!(uniq = malloc((nk ? nk : 1) * sizeof(int64_t))) || !(s->mem = malloc((nk ? nk : 1) * sizeof(uint64_t))))
    goto done;
  nk = 0;
  for (uint64_t i = 0; i < n; i++)
    if (key[i] != INT64_MIN) uniq[nk++] = key[i];
  qsort(uniq, nk, sizeof *uniq, cmp_i64);
  uint64_t nr = 0;
  for (uint64_t k = 0; k < nk; k++)
    if (!nr || uniq[k] != uniq[nr - 1]) uniq[nr++] = uniq[k];
  if (!(s->reg = calloc(nr ? nr : 1, sizeof *s->reg)) || !(fill = calloc(nr ? nr : 1, sizeof *fill))) goto done;
  s->nreg = nr;
  s->nmem = nk;
  for (uint64_t r = 0; r < nr; r++)
    for (int a = 0; a < 3; a++) {
      s->reg[r].lo[a] = INT64_MAX;
      s->reg[r].hi[a] = -1;
    }
  for (uint64_t i = 0; i < n; i++) {
    if (key[i] == INT64_MIN) {
      s->rid[i] = -1;
      continue;
    }
    const int64_t *at = bsearch(&key[i], uniq, nr, sizeof *uniq, cmp_i64);
    region *g = &s->reg[at - uniq];
    s->rid[i] = at - uniq;
    g->count++;
    int64_t c[3];
    coords_of(s->d, i, c);
    for (int a = 0; a < 3; a++) {
      if (c[a] < g->lo[a]) g->lo[a] = c[a];
      if (c[a] > g->hi[a]) g->hi[a] = c[a];
    }
  }
  for (uint64_t r = 0, off = 0; r < nr; r++) {
    s->reg[r].off = off;
    off += s->reg[r].count;
  }
  for (uint64_t i = 0; i < n; i++)
    if (s->rid[i] >= 0) {
      region *g = &s->reg[s->rid[i]];
      s->mem[g->off + fill[s->rid[i]]++] = i;
    }
  st = ACCEL_OK;
done:
  free(key);
  free(uniq);
  free(fill);
  return st;
}

/* Step 1 without regions: the whole image, every voxel. */
static accel_status whole_region(search *s) {
  const uint64_t n = accel__dims_count(s->d);
  s->reg = calloc(1, sizeof *s->reg);
  s->mem = malloc((n ? n : 1) * sizeof(uint64_t));
  if (!s->reg || !s->mem) return ACCEL_ERR_OUT_OF_MEMORY;
  s->nreg = n ? 1 : 0;
  s->nmem = n;
  const int64_t ext[3] = {s->d.nz, s->d.ny, s->d.nx};
  for (int a = 0; a < 3; a++) s->reg[0].hi[a] = ext[a] - 1;
  s->reg[0].count = n;
  for (uint64_t i = 0; i < n; i++) s->mem[i] = i;
  return ACCEL_OK;
}

/* A flat region with regions: its voxels that the opening (the rank's
 * cross, within the box, outside it 0) removes become the candidates. */
static accel_status isolated(search *s, int64_t r) {
  const region *g = &s->reg[r];
  const int64_t b[3] = {g->hi[0] - g->lo[0] + 1, g->hi[1] - g->lo[1] + 1, g->hi[2] - g->lo[2] + 1};
  const uint64_t bn = (uint64_t)(b[0] * b[1] * b[2]);
  uint8_t *e = calloc(bn, 1);
  if (!e) return ACCEL_ERR_OUT_OF_MEMORY;
  const int first = 3 - s->p->rank;
#define IN_BOX(q) ((q)[0] >= 0 && (q)[1] >= 0 && (q)[2] >= 0 && (q)[0] < b[0] && (q)[1] < b[1] && (q)[2] < b[2])
#define BOX(q) (((uint64_t)(q)[0] * (uint64_t)b[1] + (uint64_t)(q)[1]) * (uint64_t)b[2] + (uint64_t)(q)[2])
#define GLOBAL(q)                                                                                                      \
  ((((uint64_t)((q)[0] + g->lo[0]) * (uint64_t)s->d.ny) + (uint64_t)((q)[1] + g->lo[1])) * (uint64_t)s->d.nx +         \
   (uint64_t)((q)[2] + g->lo[2]))
  for (uint64_t k = 0; k < g->count; k++) { /* erosion */
    int64_t c[3];
    coords_of(s->d, s->mem[g->off + k], c);
    for (int a = 0; a < 3; a++) c[a] -= g->lo[a];
    bool keep = true;
    for (int a = first; a < 3 && keep; a++)
      for (int sgn = -1; sgn <= 1 && keep; sgn += 2) {
        int64_t q[3] = {c[0], c[1], c[2]};
        q[a] += sgn;
        keep = IN_BOX(q) && s->rid[GLOBAL(q)] == r;
      }
    e[BOX(c)] = keep;
  }
  for (uint64_t k = 0; k < g->count; k++) { /* removed by the opening: not in the erosion's dilation */
    const uint64_t i = s->mem[g->off + k];
    int64_t c[3];
    coords_of(s->d, i, c);
    for (int a = 0; a < 3; a++) c[a] -= g->lo[a];
    bool opened = e[BOX(c)];
    for (int a = first; a < 3 && !opened; a++)
      for (int sgn = -1; sgn <= 1 && !opened; sgn += 2) {
        int64_t q[3] = {c[0], c[1], c[2]};
        q[a] += sgn;
        opened = IN_BOX(q) && e[BOX(q)];
      }
    s->cand[i] = !opened;
  }
#undef IN_BOX
#undef BOX
#undef GLOBAL
  free(e);
  return ACCEL_OK;
}

/* Is q closer to c than min_distance in the p-norm (q within the cube)?
 * numpy's norm: the sum of |d| for 1, sqrt of the squares for 2. */
static bool closer(const int64_t c[3], const int64_t q[3], int md, double p) {
  if (isinf(p)) return true;
  double sum = 0;
  for (int a = 0; a < 3; a++) {
    const double t = fabs((double)(q[a] - c[a]));
    sum += p == 1 ? t : p == 2 ? t * t : pow(t, p);
  }
  const double dist = p == 1 ? sum : p == 2 ? sqrt(sum) : pow(sum, 1.0 / p);
  return dist < md;
}

typedef struct keyed {
  double key;
  int64_t at;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->at > y->at) - (x->at < y->at);
}

/* Step 4 over the candidates cl[0..nc) (C order): the kept ones appended to
 * s->res, at most max_out (-1: any number). */
static accel_status select_peaks(search *s, const uint64_t *cl, uint64_t nc, int md, int64_t max_out) {
  double *keys = calloc(nc ? nc : 1, sizeof(double));
  int64_t *order = malloc((nc ? nc : 1) * sizeof(int64_t));
  keyed *kd = s->p->rules_0_22 ? malloc((nc ? nc : 1) * sizeof(keyed)) : NULL;
  if (!keys || !order || (s->p->rules_0_22 && !kd)) {
    free(keys);
    free(order);
    free(kd);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  for (uint64_t j = 0; j < nc; j++) keys[j] = -s->v[cl[j]];
  if (s->p->rules_0_22) {
    for (uint64_t j = 0; j < nc; j++) kd[j] = (keyed){keys[j], (int64_t)j};
    qsort(kd, nc, sizeof *kd, cmp_keyed);
    for (uint64_t j = 0; j < nc; j++) order[j] = kd[j].at;
  } else {
    accel__np_argsort_f64(keys, order, (int64_t)nc);
  }
  for (uint64_t j = 0; j < nc; j++) s->state[cl[j]] = 1;
  /* within the cube of radius md - 1 every voxel is closer than md; a finite
   * p-norm's root may round an axis-aligned md to just below md (numpy's
   * pow(pow(4, 3), 1 / 3.) < 4), so the cube grows to md for those */
  const int near = isinf(s->p->p_norm) ? md - 1 : md, first = 3 - s->p->rank;
  const int64_t ext[3] = {s->d.nz, s->d.ny, s->d.nx};
  int64_t kept = 0;
  for (uint64_t j = 0; j < nc && (max_out < 0 || kept < max_out); j++) {
    const uint64_t i = cl[order[j]];
    if (s->state[i] != 1) continue;
    s->state[i] = 3;
    s->res[s->nres++] = i;
    kept++;
    if (near < 1) continue;
    int64_t c[3], lo[3], hi[3], q[3];
    coords_of(s->d, i, c);
    for (int a = 0; a < 3; a++) {
      lo[a] = a < first ? c[a] : c[a] - near < 0 ? 0 : c[a] - near;
      hi[a] = a < first ? c[a] : c[a] + near >= ext[a] ? ext[a] - 1 : c[a] + near;
    }
    for (q[0] = lo[0]; q[0] <= hi[0]; q[0]++)
      for (q[1] = lo[1]; q[1] <= hi[1]; q[1]++)
        for (q[2] = lo[2]; q[2] <= hi[2]; q[2]++) {
          const uint64_t k = index_of(s->d, q);
          if (s->state[k] == 1 && closer(c, q, md, s->p->p_norm)) s->state[k] = 2;
        }
  }
  for (uint64_t j = 0; j < nc; j++) s->state[cl[j]] = 0;
  free(keys);
  free(order);
  free(kd);
  return ACCEL_OK;
}

/* Step 3's threshold: the image's minimum or threshold_abs, raised to
 * threshold_rel times its maximum (NumPy 1.x computes that product in
 * double, NumPy 2 in the image's float32). */
static double threshold_of(const search *s, uint64_t n) {
  double lo = INFINITY, hi = -INFINITY;
  for (uint64_t i = 0; i < n; i++) {
    if (s->v[i] < lo) lo = s->v[i];
    if (s->v[i] > hi) hi = s->v[i];
  }
  double t = isnan(s->p->threshold_abs) ? lo : s->p->threshold_abs;
  if (!isnan(s->p->threshold_rel)) {
    const double rel =
        s->p->f32 && s->p->rules_0_22 ? (double)((float)s->p->threshold_rel * (float)hi) : s->p->threshold_rel * hi;
    if (rel > t) t = rel;
  }
  return t;
}

/* Steps 2 to 4 for region r; cl: room for its candidates. */
static accel_status region_peaks(search *s, int64_t r, double t, int md, uint64_t *cl) {
  const region *g = &s->reg[r];
  const uint64_t *m = s->mem + g->off;
  const uint64_t box = (uint64_t)((g->hi[0] - g->lo[0] + 1) * (g->hi[1] - g->lo[1] + 1) * (g->hi[2] - g->lo[2] + 1));
  uint64_t all = 0;
  for (uint64_t k = 0; k < g->count; k++) all += s->cand[m[k]];
  const bool single = s->fsize == 1 || box == 1; /* every voxel a candidate */
  if (single)
    for (uint64_t k = 0; k < g->count; k++) s->cand[m[k]] = 1;
  else if (all == g->count) {
    if (s->rid) {
      accel_status st = isolated(s, r);
      if (st) return st;
    } else {
      for (uint64_t k = 0; k < g->count; k++) s->cand[m[k]] = 0;
    }
  }
  uint64_t nc = 0;
  for (uint64_t k = 0; k < g->count; k++) {
    const uint64_t i = m[k];
    const bool above = s->p->f32 ? (float)s->v[i] > (float)t : s->v[i] > t;
    int64_t c[3];
    coords_of(s->d, i, c);
    if (s->cand[i] && above && (s->rid || interior(s, c))) cl[nc++] = i;
  }
  return select_peaks(s, cl, nc, md, s->rid ? s->p->per_label : s->p->num_peaks);
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Steps 2 to 5 over the regions, then the numbering; window: step 2's
 * results, or NULL to compute them. */
static accel_status search_all(search *s, const uint8_t *window, int md, int threads, int32_t *out, uint32_t *count) {
  (void)threads; /* read by OpenMP pragmas only */
  const uint64_t n = accel__dims_count(s->d);
  const double t = threshold_of(s, n);
  const accel__ct_peak_window w = window_of(s);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4096)
  for (uint64_t k = 0; k < s->nmem; k++) {
    const uint64_t i = s->mem[k];
    s->cand[i] = window ? window[i] : accel__ct_peak_window_test(&w, i, s->rid ? s->rid[i] : 0);
  }
  uint64_t *cl = malloc((s->nmem ? s->nmem : 1) * sizeof(uint64_t));
  accel_status st = cl ? ACCEL_OK : ACCEL_ERR_OUT_OF_MEMORY;
  for (uint64_t r = 0; r < s->nreg && !st; r++) st = region_peaks(s, (int64_t)r, t, md, cl);
  if (!st && s->rid && s->p->num_peaks >= 0 && s->nres > (uint64_t)s->p->num_peaks) {
    memcpy(cl, s->res, s->nres * sizeof(uint64_t));
    qsort(cl, s->nres, sizeof *cl, cmp_u64);
    const uint64_t nc = s->nres;
    s->nres = 0;
    st = select_peaks(s, cl, nc, md, s->p->num_peaks);
  }
  free(cl);
  if (st) return st;
  if (s->nres > INT32_MAX) return ACCEL_ERR_LIMIT;
  memset(out, 0, n * sizeof(int32_t));
  if (!s->p->sorted) qsort(s->res, s->nres, sizeof *s->res, cmp_u64);
  for (uint64_t k = 0; k < s->nres; k++) out[s->res[k]] = (int32_t)(k + 1);
  if (count) *count = (uint32_t)s->nres;
  return ACCEL_OK;
}

void accel__ct_peak_search_free(search *s) {
  if (!s) return;
  free(s->cand);
  free(s->state);
  free(s->res);
  free(s->rid);
  free(s->offs);
  free(s->reg);
  free(s->mem);
  free(s);
}

accel_status accel__ct_peak_search_begin(const double *image, const uint8_t *mask, accel__dims d, int md,
                                         const accel__ct_peak_params *p, int threads, search **out,
                                         accel__ct_peak_window *w) {
  const uint64_t n = accel__dims_count(d), nb = n ? n : 1;
  *out = NULL;
  search *s = calloc(1, sizeof *s);
  if (!s) return ACCEL_ERR_OUT_OF_MEMORY;
  *s = (search){.v = image, .d = d, .p = p, .bg = p->background};
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  s->cand = calloc(nb, 1);
  s->state = calloc(nb, 1);
  s->res = malloc(nb * sizeof(uint64_t));
  const bool regions = p->labels || mask;
  if (regions && !(s->rid = malloc(nb * sizeof(int64_t)))) goto fail;
  if (!s->cand || !s->state || !s->res || (st = footprint_offsets(s, md))) goto fail;
  if ((st = regions ? build_regions(s, mask, threads) : whole_region(s))) goto fail;
  *w = window_of(s);
  *out = s;
  return ACCEL_OK;
fail:
  accel__ct_peak_search_free(s);
  return st;
}

accel_status accel__ct_peak_search_finish(search *s, const uint8_t *window, int md, int threads, int32_t *out,
                                          uint32_t *count) {
  return search_all(s, window, md, threads, out, count);
}

accel_status accel__ct_peaks_general_cpu(const double *image, const uint8_t *mask, accel__dims d, int md,
                                         const accel__ct_peak_params *p, int threads, int32_t *out, uint32_t *count) {
  search *s = NULL;
  accel__ct_peak_window w;
  accel_status st = accel__ct_peak_search_begin(image, mask, d, md, p, threads, &s, &w);
  if (!st) st = search_all(s, p->window, md, threads, out, count);
  accel__ct_peak_search_free(s);
  return st;
}
