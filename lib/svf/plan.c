/* UMEP's sky patches, ray steps and ring weights; tiles and their windows. */
#include "svf/svf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ patch tables */

typedef struct sky_table {
  int32_t option; /* 145, 153, 306, 612 */
  int bands;
  const double *annulino; /* bands + 1 ring bounds */
  const double *altitude;
  const int *count;
  const double *azistart;
} sky_table;

static const double annulino_8[] = {0, 12, 24, 36, 48, 60, 72, 84, 90};
static const double alt_8[] = {6, 18, 30, 42, 54, 66, 78, 90};
static const double azistart_8[] = {0, 4, 2, 5, 8, 0, 10, 0};
static const int count_145[] = {30, 30, 24, 24, 18, 12, 6, 1};
static const int count_153[] = {31, 30, 28, 24, 19, 13, 7, 1};
static const int count_306[] = {62, 60, 56, 48, 38, 26, 14, 1};
static const double annulino_15[] = {0, 4.5, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69, 75, 81, 90};
static const double alt_15[] = {3, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69, 75, 81, 90};
static const int count_612[] = {62, 62, 60, 60, 56, 56, 48, 48, 38, 38, 26, 26, 14, 14, 1};
static const double azistart_15[] = {0, 0, 4, 4, 2, 2, 5, 5, 8, 8, 0, 0, 10, 10, 0};

static const sky_table tables[] = {
    {145, 8, annulino_8, alt_8, count_145, azistart_8},
    {153, 8, annulino_8, alt_8, count_153, azistart_8},
    {306, 8, annulino_8, alt_8, count_306, azistart_8},
    {612, 15, annulino_15, alt_15, count_612, azistart_15},
};

static const sky_table *table_of(int32_t option) {
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (tables[i].option == option) return &tables[i];
  return NULL;
}

/* Patches per band as UMEP counts them: int(360 / (360 / n)). */
static int band_patches(int n) { return (int)(360.0 / (360.0 / n)); }

/* Rings of band b: numpy's arange(annulino[b] + 1, annulino[b + 1] + 1). */
static int band_rings(const sky_table *t, int b, double *first) {
  const double start = t->annulino[b] + 1.0, stop = t->annulino[b + 1] + 1.0;
  *first = start;
  return (int)ceil(stop - start);
}

static double patch_azimuth(const sky_table *t, int b, int k) {
  double az = k * (360.0 / t->count[b]) + t->azistart[b];
  if (az > 360.0) az -= 360.0;
  return az;
}

/* UMEP's annulus weight of ring k with n patches per band. */
static double annulus_weight(double k, double n) {
  const double pi = M_PI;
  const double steprad = (360.0 / n) * (pi / 180.0);
  const double ring = 91.0 - k;
  const double w = (1.0 / (2.0 * pi)) * sin(pi / (2.0 * 90.0)) * sin((pi * (2.0 * ring - 1.0)) / (2.0 * 90.0));
  return steprad * w;
}

int32_t accel__svf_patch_count(int32_t option) {
  const sky_table *t = table_of(option);
  int32_t n = 0;
  if (t)
    for (int b = 0; b < t->bands; b++) n += band_patches(t->count[b]);
  return n;
}

accel_status accel_svf_patches(int32_t option, int32_t *count, double *azimuth, double *altitude) {
  const sky_table *t = table_of(option);
  if (!t || !count) return ACCEL_ERR_INVALID_ARG;
  int32_t p = 0;
  for (int b = 0; b < t->bands; b++)
    for (int k = 0; k < band_patches(t->count[b]); k++, p++) {
      if (azimuth) azimuth[p] = patch_azimuth(t, b, k);
      if (altitude) altitude[p] = t->altitude[b];
    }
  *count = p;
  return ACCEL_OK;
}

/* ------------------------------------------------------------ ray steps */

/* UMEP's stepper towards (azimuth, altitude): offsets (dx rows, dy
 * columns) and drop dz of step `index`, stepping by whole pixels along the
 * major axis of the azimuth's octant. */
typedef struct stepper {
  bool ymajor;
  double ssin, scos, tanaz, ds, tab;
} stepper;

static double sign(double x) { return (double)((x > 0) - (x < 0)); }

static stepper stepper_make(double azimuth, double altitude, double pixel_size) {
  const double degrees = M_PI / 180.0;
  const double az = azimuth * degrees, alt = altitude * degrees;
  const double sinaz = sin(az), cosaz = cos(az), q = M_PI / 4.0;
  stepper s;
  s.tanaz = tan(az);
  s.ssin = sign(sinaz);
  s.scos = sign(cosaz);
  s.ymajor = (q <= az && az < 3.0 * q) || (5.0 * q <= az && az < 7.0 * q);
  s.ds = s.ymajor ? fabs(1.0 / sinaz) : fabs(1.0 / cosaz);
  s.tab = tan(alt) / (1.0 / pixel_size);
  return s;
}

/* Count (out == NULL) or write the steps: UMEP's loop runs while the previous
 * step's drop is at most amax and its offsets are inside the grid, so the
 * first step past any of these is still taken. */
static uint32_t steps_of(const stepper *s, int64_t rows, int64_t cols, double amax, int32_t *ox, int32_t *oy,
                         double *oz) {
  double dx = 0, dy = 0, dz = 0, index = 0;
  uint32_t n = 0;
  while (amax >= dz && fabs(dx) < (double)rows && fabs(dy) < (double)cols) {
    if (s->ymajor) {
      dy = s->ssin * index;
      dx = -1.0 * s->scos * fabs(rint(index / s->tanaz));
    } else {
      dy = s->ssin * fabs(rint(index * s->tanaz));
      dx = -1.0 * s->scos * index;
    }
    dz = (s->ds * index) * s->tab;
    if (ox) {
      ox[n] = (int32_t)dx;
      oy[n] = (int32_t)dy;
      oz[n] = dz;
    }
    n++;
    index += 1.0;
  }
  return n;
}

/* The plan and its arrays in one zeroed block: the plan, the patches, the
 * doubles, the offsets (every part stays 8-byte aligned). */
_Static_assert(sizeof(accel__svf_plan) % 8 == 0 && sizeof(accel__svf_patch) % 8 == 0, "svf plan block layout");
static accel__svf_plan *plan_alloc(int32_t npatch, uint32_t nsteps, uint32_t nrings) {
  const size_t ns = nsteps ? nsteps : 1, nr = nrings ? nrings : 1;
  const size_t bytes = sizeof(accel__svf_plan) + (size_t)npatch * sizeof(accel__svf_patch) +
                       (ns + 2 * nr) * sizeof(double) + 2 * ns * sizeof(int32_t);
  accel__svf_plan *p = calloc(1, bytes);
  if (!p) return NULL;
  p->npatch = npatch;
  p->nsteps = nsteps;
  p->nrings = nrings;
  p->patch = (accel__svf_patch *)(p + 1);
  p->dz = (double *)(p->patch + npatch);
  p->wfull = p->dz + ns;
  p->whalf = p->wfull + nr;
  p->dx = (int32_t *)(p->whalf + nr);
  p->dy = p->dx + ns;
  return p;
}

void accel__svf_plan_free(accel__svf_plan *p) { free(p); }

static uint32_t sides_of(double az) {
  uint32_t s = 0;
  if (0 <= az && az < 180) s |= ACCEL__SVF_SIDE_E;
  if (90 <= az && az < 270) s |= ACCEL__SVF_SIDE_S;
  if (180 <= az && az < 360) s |= ACCEL__SVF_SIDE_W;
  if (az >= 270 || az < 90) s |= ACCEL__SVF_SIDE_N;
  return s;
}

accel__svf_plan *accel__svf_plan_sky(int32_t option, int64_t rows, int64_t cols, double amax, double pixel_size) {
  const sky_table *t = table_of(option);
  if (!t) return NULL;
  const int32_t npatch = accel__svf_patch_count(option);
  uint32_t nsteps = 0, nrings = 0;
  for (int b = 0; b < t->bands; b++) {
    double first;
    const int rings = band_rings(t, b, &first);
    for (int k = 0; k < band_patches(t->count[b]); k++) {
      const stepper s = stepper_make(patch_azimuth(t, b, k), t->altitude[b], pixel_size);
      nsteps += steps_of(&s, rows, cols, amax, NULL, NULL, NULL);
      nrings += (uint32_t)rings;
    }
  }
  accel__svf_plan *p = plan_alloc(npatch, nsteps, nrings);
  if (!p) return NULL;
  uint32_t at = 0, ring_at = 0;
  int32_t i = 0;
  for (int b = 0; b < t->bands; b++) {
    double first;
    const int rings = band_rings(t, b, &first);
    const double n = t->count[b], nhalf = ceil(t->count[b] / 2.0);
    for (int k = 0; k < band_patches(t->count[b]); k++, i++) {
      accel__svf_patch *pa = &p->patch[i];
      pa->azimuth = patch_azimuth(t, b, k);
      pa->altitude = t->altitude[b];
      pa->sides = sides_of(pa->azimuth);
      const stepper s = stepper_make(pa->azimuth, pa->altitude, pixel_size);
      pa->first_step = at;
      pa->steps = steps_of(&s, rows, cols, amax, p->dx + at, p->dy + at, p->dz + at);
      at += pa->steps;
      pa->first_ring = ring_at;
      pa->rings = (uint32_t)rings;
      for (int j = 0; j < rings; j++) {
        p->wfull[ring_at + j] = annulus_weight(first + j, n);
        p->whalf[ring_at + j] = annulus_weight(first + j, nhalf);
      }
      ring_at += (uint32_t)rings;
    }
  }
  return p;
}

accel__svf_plan *accel__svf_plan_sun(double azimuth, double altitude, int64_t rows, int64_t cols, double amax,
                                     double pixel_size) {
  const stepper s = stepper_make(azimuth, altitude, pixel_size);
  const uint32_t n = steps_of(&s, rows, cols, amax, NULL, NULL, NULL);
  accel__svf_plan *p = plan_alloc(1, n, 0);
  if (!p) return NULL;
  p->patch[0].azimuth = azimuth;
  p->patch[0].altitude = altitude;
  p->patch[0].steps = steps_of(&s, rows, cols, amax, p->dx, p->dy, p->dz);
  return p;
}

/* A pixel at height >= amin can only be changed by steps whose previous drop
 * is below hmax - amin: the halo is the largest offset of those steps. */
void accel__svf_plan_halo(accel__svf_plan *p, double hmax, double amin) {
  const double lim = hmax - amin;
  int64_t hr = 0, hc = 0;
  for (int32_t i = 0; i < p->npatch; i++) {
    const accel__svf_patch *pa = &p->patch[i];
    double dzprev = 0;
    for (uint32_t s = 0; s < pa->steps; s++) {
      if (!(dzprev < lim)) break;
      const uint32_t k = pa->first_step + s;
      const int64_t ax = llabs((long long)p->dx[k]), ay = llabs((long long)p->dy[k]);
      if (ax > hr) hr = ax;
      if (ay > hc) hc = ay;
      dzprev = p->dz[k];
    }
  }
  p->halo_rows = hr;
  p->halo_cols = hc;
}

/* ------------------------------------------------------------ tiles */

int64_t accel__svf_tile_count(const accel__svf_job *job, int64_t side) {
  if (side <= 0) return 1;
  return ((job->rows + side - 1) / side) * ((job->cols + side - 1) / side);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void accel__svf_tile_at(const accel__svf_job *job, int64_t side, int64_t i, accel__svf_tile *t) {
  if (side <= 0) {
    *t = (accel__svf_tile){0, job->rows, 0, job->cols, 0, job->rows, 0, job->cols};
    return;
  }
  const int64_t across = (job->cols + side - 1) / side;
  t->r0 = (i / across) * side;
  t->c0 = (i % across) * side;
  t->r1 = min64(t->r0 + side, job->rows);
  t->c1 = min64(t->c0 + side, job->cols);
  t->wr0 = max64(t->r0 - job->plan->halo_rows, 0);
  t->wr1 = min64(t->r1 + job->plan->halo_rows, job->rows);
  t->wc0 = max64(t->c0 - job->plan->halo_cols, 0);
  t->wc1 = min64(t->c1 + job->plan->halo_cols, job->cols);
}

void accel__svf_window_copy(const accel__svf_job *job, const accel__svf_tile *t, double *dsm, double *canopy,
                            double *trunk, accel__svf_window *w) {
  const int64_t wc = t->wc1 - t->wc0, pitch = wc + 2 * ACCEL__SVF_PAD;
  const accel__svf_window *g = &job->grid;
  const double *src[3] = {g->dsm, g->canopy, g->trunk};
  double *dst[3] = {dsm, canopy, trunk};
  for (int a = 0; a < (job->veg ? 3 : 1); a++)
    for (int64_t r = t->wr0; r < t->wr1; r++) {
      double *row = dst[a] + (r - t->wr0) * pitch;
      memset(row, 0, sizeof(double) * ACCEL__SVF_PAD);
      memcpy(row + ACCEL__SVF_PAD, src[a] + (r - g->r0) * g->pitch + (t->wc0 - g->c0) + ACCEL__SVF_PAD,
             sizeof(double) * (size_t)wc);
      memset(row + ACCEL__SVF_PAD + wc, 0, sizeof(double) * ACCEL__SVF_PAD);
    }
  *w = (accel__svf_window){dsm,   job->veg ? canopy : NULL, job->veg ? trunk : NULL, pitch, t->wr0, t->wr1, t->wc0,
                           t->wc1};
}
