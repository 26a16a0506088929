/*
 * The watershed's general flood: scikit-image 0.19.3's
 * skimage/segmentation/_watershed_cy.pyx with any connectivity, the
 * watershed line and the compact watershed, over float32 or float64 values
 * held as doubles (scikit-image floods a float64 copy of the image).
 *
 * - The volume is padded by one voxel on each axis of the image's rank; the
 *   padding is outside the mask, so no neighbour test leaves the volume.
 * - Neighbours: the offsets of scipy's generate_binary_structure(rank,
 *   connectivity), ordered as scikit-image orders them, by np.argsort of
 *   their distance to the centre (numpy 1.x's introsort, which is not stable
 *   past 16 entries: the 3-D orders are not the C order of the offsets).
 * - The heap is scikit-image's binary heap on (value, age); markers are
 *   pushed in C order with age 0 (ages 0, 1, ... with the stable tie rule),
 *   the other pushes count ages from 2.
 * - Plain flood: a neighbour in the mask and unlabelled takes the popped
 *   voxel's label when pushed. With the watershed line or compactness, a
 *   voxel is labelled when popped (skipped when labelled already, markers
 *   excepted), so it may be pushed more than once; with the watershed line,
 *   a popped voxel whose neighbours (still in the mask) carry two different
 *   nonzero labels leaves the mask, keeps its value (0, or its marker's
 *   label) and pushes nothing. With compactness a push's priority is
 *   value + compactness * |voxel - marker| (Euclidean, in voxels), summed
 *   over the axes in order as scikit-image does.
 */
#include "ct/ct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct witem {
  double value;
  uint64_t age;
  uint64_t index;  /* padded */
  uint64_t source; /* the marker's padded index */
} witem;

typedef struct wheap {
  witem *a;
  size_t n, cap;
} wheap;

static inline bool smaller(const witem *x, const witem *y) {
  if (x->value != y->value) return x->value < y->value;
  return x->age < y->age;
}

static bool wheap_push(wheap *h, witem it) {
  if (h->n == h->cap) {
    const size_t cap = h->cap ? 2 * h->cap : 4096;
    witem *a = realloc(h->a, cap * sizeof *a);
    if (!a) return false;
    h->a = a;
    h->cap = cap;
  }
  size_t c = h->n++;
  while (c > 0) { /* the parent moves down while the item is strictly smaller */
    const size_t p = (c + 1) / 2 - 1;
    if (!smaller(&it, &h->a[p])) break;
    h->a[c] = h->a[p];
    c = p;
  }
  h->a[c] = it;
  return true;
}

/* The last item goes to the root and sinks towards the smaller child (the
 * left one on ties) while that child is strictly smaller. */
static witem wheap_pop(wheap *h) {
  const witem top = h->a[0];
  const size_t n = --h->n;
  if (n == 0) return top;
  const witem last = h->a[n];
  size_t i = 0;
  for (;;) {
    const size_t l = 2 * i + 1;
    if (l >= n) break;
    size_t s = l;
    if (l + 1 < n && smaller(&h->a[l + 1], &h->a[l])) s = l + 1;
    if (!smaller(&h->a[s], &last)) break;
    h->a[i] = h->a[s];
    i = s;
  }
  h->a[i] = last;
  return top;
}

/* scikit-image's neighbour offsets for (rank, connectivity), as (dz, dy, dx)
 * with the axes past the rank's zero; returns their number (up to 26). */
static int neighbour_offsets(int rank, unsigned connectivity, int off[26][3]) {
  int cand[27][3], m = 0;
  float dist[27];
  int64_t order[27];
  const int n = rank == 1 ? 3 : rank == 2 ? 9 : 27;
  for (int i = 0; i < n; i++) { /* the footprint's C order, over the rank's axes */
    int o[3] = {0, 0, 0}, t = i, nonzero = 0;
    for (int a = rank - 1; a >= 0; a--) {
      o[a] = t % 3 - 1;
      t /= 3;
    }
    for (int a = 0; a < rank; a++) nonzero += o[a] != 0;
    if ((unsigned)nonzero > connectivity) continue;
    for (int a = 0; a < 3; a++) cand[m][a] = 0;
    for (int a = 0; a < rank; a++) cand[m][3 - rank + a] = o[a]; /* trailing axes */
    dist[m] = (float)nonzero;                                    /* the squared distance orders as the distance */
    m++;
  }
  accel__np_argsort_f32(dist, order, m);
  for (int k = 1; k < m; k++) memcpy(off[k - 1], cand[order[k]], sizeof off[0]); /* the centre sorts first */
  return m - 1;
}

typedef struct wvol {
  int64_t pz, py, px; /* padded extents */
  int64_t lz, ly, lx; /* padding on each axis: 1 within the rank, else 0 */
  uint64_t pn;
  double *val;
  int32_t *lab;
  uint8_t *msk;
} wvol;

static double euclid(const wvol *w, uint64_t a, uint64_t b) {
  const uint64_t plane = (uint64_t)w->py * (uint64_t)w->px;
  const int64_t za = (int64_t)(a / plane), zb = (int64_t)(b / plane);
  const int64_t ya = (int64_t)(a % plane / (uint64_t)w->px), yb = (int64_t)(b % plane / (uint64_t)w->px);
  const int64_t xa = (int64_t)(a % (uint64_t)w->px), xb = (int64_t)(b % (uint64_t)w->px);
  double r = 0, c = (double)(za - zb);
  r += c * c;
  c = (double)(ya - yb);
  r += c * c;
  c = (double)(xa - xb);
  r += c * c;
  return sqrt(r);
}

/* scikit-image 0.19.3's test: the neighbours still in the mask carry two
 * different nonzero labels (then the voxel leaves the mask). */
static bool diff_neighbours(wvol *w, const int64_t *nb, int nnb, uint64_t i) {
  if (!w->msk[i]) return true;
  int32_t first = 0;
  for (int k = 0; k < nnb; k++) {
    const uint64_t j = (uint64_t)((int64_t)i + nb[k]);
    if (!w->msk[j]) continue;
    const int32_t l = w->lab[j];
    if (!first) first = l;
    else if (l && l != first) {
      w->msk[i] = 0;
      return true;
    }
  }
  return false;
}

typedef struct wflood {
  const int64_t *nb;
  int nnb;
  bool wsl, stable;
  double compactness;
  uint64_t total;
  accel_progress_fn progress;
  void *user;
} wflood;

static accel_status flood(wvol *w, const wflood *f, const uint64_t *seeds, uint64_t nseeds) {
  wheap h = {NULL, 0, 0};
  const bool compact = f->compactness > 0, late = compact || f->wsl;
  for (uint64_t k = 0; k < nseeds; k++) {
    const witem it = {w->val[seeds[k]], f->stable ? k : 0, seeds[k], seeds[k]};
    if (!wheap_push(&h, it)) goto oom;
  }
  uint64_t age = f->stable ? nseeds : 1, popped = 0;
  while (h.n) {
    const witem e = wheap_pop(&h);
    if (late) {
      if (w->lab[e.index] && e.index != e.source) continue;
      if (f->wsl && diff_neighbours(w, f->nb, f->nnb, e.index)) continue;
      w->lab[e.index] = w->lab[e.source];
    }
    for (int k = 0; k < f->nnb; k++) {
      const uint64_t j = (uint64_t)((int64_t)e.index + f->nb[k]);
      if (!w->msk[j] || w->lab[j]) continue;
      witem it = {w->val[j], ++age, j, e.source};
      if (compact) it.value += f->compactness * euclid(w, j, e.source);
      else if (!f->wsl) w->lab[j] = w->lab[e.index];
      if (!wheap_push(&h, it)) goto oom;
    }
    if (f->progress && (++popped & 0xfffff) == 0) {
      const double done = (double)popped / (double)(f->total ? f->total : 1);
      if (f->progress(f->user, "ct.watershed", done < 1 ? done : 1)) {
        free(h.a);
        return ACCEL_ERR_CANCELLED;
      }
    }
  }
  free(h.a);
  return ACCEL_OK;
oom:
  free(h.a);
  return ACCEL_ERR_OUT_OF_MEMORY;
}

/* The padded copies; the seeds (padded indices, C order) into *seeds. */
static accel_status fill_volume(wvol *w, const accel__ct_watershed_src *src, accel__dims d, const int32_t *labels,
                                uint64_t **seeds, uint64_t *nseeds, uint64_t *inmask) {
  uint64_t cap = 1024, ns = 0, in = 0;
  uint64_t *s = malloc(cap * sizeof *s);
  if (!s) return ACCEL_ERR_OUT_OF_MEMORY;
  for (int64_t z = 0; z < d.nz; z++)
    for (int64_t y = 0; y < d.ny; y++)
      for (int64_t x = 0; x < d.nx; x++) {
        const uint64_t i = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx + (uint64_t)x;
        const uint64_t p =
            ((uint64_t)(z + w->lz) * (uint64_t)w->py + (uint64_t)(y + w->ly)) * (uint64_t)w->px + (uint64_t)(x + w->lx);
        if (src->mask && !src->mask[i]) continue;
        in++;
        w->msk[p] = 1;
        w->val[p] = src->f64 ? src->f64[i] : (double)src->f32[i];
        w->lab[p] = labels[i];
        if (!labels[i]) continue;
        if (ns == cap) {
          uint64_t *more = realloc(s, 2 * cap * sizeof *s);
          if (!more) {
            free(s);
            return ACCEL_ERR_OUT_OF_MEMORY;
          }
          s = more;
          cap *= 2;
        }
        s[ns++] = p;
      }
  *seeds = s;
  *nseeds = ns;
  *inmask = in;
  return ACCEL_OK;
}

accel_status accel__ct_watershed_ext_cpu(const accel__ct_watershed_src *src, accel__dims d,
                                         const accel__ct_watershed_rule *rule, int32_t *labels,
                                         accel_progress_fn progress, void *progress_user) {
  const int rank = rule->rank;
  wvol w = {.lz = rank >= 3, .ly = rank >= 2, .lx = 1};
  w.pz = d.nz + 2 * w.lz;
  w.py = d.ny + 2 * w.ly;
  w.px = d.nx + 2 * w.lx;
  w.pn = (uint64_t)w.pz * (uint64_t)w.py * (uint64_t)w.px;
  int off[26][3];
  int64_t nb[26];
  const unsigned conn = rule->connectivity < (unsigned)rank ? rule->connectivity : (unsigned)rank;
  const int nnb = neighbour_offsets(rank, conn, off);
  for (int k = 0; k < nnb; k++) nb[k] = ((int64_t)off[k][0] * w.py + off[k][1]) * w.px + off[k][2];
  w.val = malloc(w.pn * sizeof *w.val);
  w.lab = calloc(w.pn, sizeof *w.lab);
  w.msk = calloc(w.pn, 1);
  uint64_t *seeds = NULL, nseeds = 0, inmask = 0;
  accel_status st = ACCEL_ERR_OUT_OF_MEMORY;
  if (w.val && w.lab && w.msk && !(st = fill_volume(&w, src, d, labels, &seeds, &nseeds, &inmask))) {
    const wflood f = {nb, nnb, rule->watershed_line, rule->stable, rule->compactness, inmask, progress, progress_user};
    st = flood(&w, &f, seeds, nseeds);
  }
  if (!st) {
    for (int64_t z = 0; z < d.nz; z++)
      for (int64_t y = 0; y < d.ny; y++) {
        const uint64_t dst = ((uint64_t)z * (uint64_t)d.ny + (uint64_t)y) * (uint64_t)d.nx;
        const uint64_t from = ((uint64_t)(z + w.lz) * (uint64_t)w.py + (uint64_t)(y + w.ly)) * (uint64_t)w.px + 1;
        memcpy(labels + dst, w.lab + from, (size_t)d.nx * sizeof *labels);
      }
    if (progress) progress(progress_user, "ct.watershed", 1.0);
  }
  free(seeds);
  free(w.val);
  free(w.lab);
  free(w.msk);
  return st;
}
