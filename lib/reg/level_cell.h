/*
 * lib/reg/level_cell.h - a level's metric over one cell of the control grid
 * (internal; C and CUDA, so that the CPU's evaluator and the GPU's form the
 * same sums from the same samples in the same order).
 *
 * A cell's samples share their 4 x 4 support nodes: its sums (the metric's,
 * 16 x 2 gradient terms, 16 x 16 x 3 Gauss-Newton terms) are formed in
 * sample order by accel__reg_cell_eval. The grid's arrays then take each
 * cell's terms in the order of the cells' colours (cell x mod 4, cell y mod
 * 4; colour = x mod 4 + 4 (y mod 4)): cells of one colour share no node, so
 * every entry receives at most one term per colour, and its sum is the same
 * whether the cells are scattered colour by colour (the CPU) or an entry
 * gathers its terms colour by colour (the GPU). The scalar sums are added
 * in cell order.
 */
#ifndef ACCEL_REG_LEVEL_CELL_H
#define ACCEL_REG_LEVEL_CELL_H

#include "reg/interp.h"
#include "reg/level.h"

#include <math.h>
#include <string.h>

/* MSE: sum r^2, -, -, -, -, matrix count, fixed count, inside count, count; NCC: f, m, ff, mm, fm, then the same
 * counts (the matrix count: the samples that added Gauss-Newton terms; the fixed count: the samples in the fixed
 * image and its mask, whether or not they then counted; the inside count: those in the fixed image, masked or not) */
enum { ACCEL__REG_SUMS = 9, ACCEL__REG_SUM_NORMAL = 5, ACCEL__REG_SUM_FIXED = 6, ACCEL__REG_SUM_INSIDE = 7 };

/* One cell's sums. */
typedef struct accel__reg_cell_acc {
  double s[ACCEL__REG_SUMS];
  double ga[2][16], gb[2][16], gc[2][16]; /* MSE: ga = sum r dm; NCC: f dm, m dm, dm */
  /* xx, xy, yy: single precision within a cell (a few hundred terms), double beyond; the block of nodes t, u is
   * symmetric and only L[.][t][u], t <= u, is formed (accel__reg_cell_L) */
  float L[3][16][16];
} accel__reg_cell_acc;

/* Entry m (xx, xy, yy) of a cell's Gauss-Newton block between its nodes t
 * and u. */
ACCEL__REG_HD float accel__reg_cell_L(const accel__reg_cell_acc *a, int m, int t, int u) {
  return t <= u ? a->L[m][t][u] : a->L[m][u][t];
}

/* What the cells read (host or device memory, as the backend needs). */
typedef struct accel__reg_cell_in {
  const accel__reg_geom *g; /* its axes' lattice ranges in the same memory */
  const float *fixed, *moving;
  const uint8_t *mask;
  accel__reg_xform base; /* base.params NULL: none */
  /* The fixed level image as the caller's own 8- or 16-bit pixels, read in
   * place (the CPU's unsmoothed finest level with samples on the fixed
   * pixels, g->identity: its float copy would hold the same values), or
   * NULL: `fixed` is read. */
  const uint8_t *fixed_u8;
  const uint16_t *fixed_u16;
} accel__reg_cell_in;

/* Pixel k of the fixed level image, whichever type holds it. */
ACCEL__REG_HD float accel__reg_fixed_pixel(const accel__reg_cell_in *e, int64_t k) {
  return e->fixed_u8 ? (float)e->fixed_u8[k] : e->fixed_u16 ? (float)e->fixed_u16[k] : e->fixed[k];
}

/* Its address (for the prefetches). */
ACCEL__REG_HD const void *accel__reg_fixed_address(const accel__reg_cell_in *e, int64_t k) {
  return e->fixed_u8    ? (const void *)(e->fixed_u8 + k)
         : e->fixed_u16 ? (const void *)(e->fixed_u16 + k)
                        : (const void *)(e->fixed + k);
}

/* Bilinear value (and, when gx is not NULL, gradient per level pixel) of
 * img (w x h) at (x, y), which lies in [0, w - 1] x [0, h - 1]. */
ACCEL__REG_HD float accel__reg_bilinear(const float *img, int64_t w, int64_t h, double x, double y, double *gx,
                                        double *gy) {
  int64_t x0 = (int64_t)x, y0 = (int64_t)y;
  if (x0 > w - 2) x0 = w > 1 ? w - 2 : 0;
  if (y0 > h - 2) y0 = h > 1 ? h - 2 : 0;
  const int64_t x1 = w > 1 ? x0 + 1 : x0, y1 = h > 1 ? y0 + 1 : y0;
  const double fx = x - (double)x0, fy = y - (double)y0;
  const double v00 = img[y0 * w + x0], v10 = img[y0 * w + x1], v01 = img[y1 * w + x0], v11 = img[y1 * w + x1];
  const double top = v00 + fx * (v10 - v00), bot = v01 + fx * (v11 - v01);
  if (gx) {
    *gx = (1 - fy) * (v10 - v00) + fy * (v11 - v01);
    *gy = bot - top;
  }
  return (float)(top + fy * (bot - top));
}

/* Where the sample at lattice (ix, iy) lies: ACCEL__REG_FIXED_IN (it
 * counts; *f its fixed value), ACCEL__REG_FIXED_MASKED (in the fixed image,
 * outside its mask) or ACCEL__REG_FIXED_OUT (outside the fixed image: the
 * initial linear part maps it there). */
enum { ACCEL__REG_FIXED_OUT = 0, ACCEL__REG_FIXED_MASKED = 1, ACCEL__REG_FIXED_IN = 2 };
/* The same decision from the geometry and the mask alone (no pixel read):
 * with a linear part, (*lx, *ly) is the sample's fixed level position. */
ACCEL__REG_HD int accel__reg_fixed_where(const accel__reg_geom *g, const uint8_t *mask, int64_t ix, int64_t iy,
                                         double qx, double qy, double *lx, double *ly) {
  if (g->identity) return mask && !mask[iy * g->fw + ix] ? ACCEL__REG_FIXED_MASKED : ACCEL__REG_FIXED_IN;
  const double px = g->inv[0] * qx + g->inv[1] * qy + g->invb[0], py = g->inv[2] * qx + g->inv[3] * qy + g->invb[1];
  *lx = (px - g->offset) / g->factor, *ly = (py - g->offset) / g->factor;
  if (!(*lx >= 0 && *lx <= (double)(g->fw - 1) && *ly >= 0 && *ly <= (double)(g->fh - 1))) return ACCEL__REG_FIXED_OUT;
  if (mask && !mask[(int64_t)floor(*ly + 0.5) * g->fw + (int64_t)floor(*lx + 0.5)]) return ACCEL__REG_FIXED_MASKED;
  return ACCEL__REG_FIXED_IN;
}

ACCEL__REG_HD int accel__reg_fixed_at(const accel__reg_cell_in *e, int64_t ix, int64_t iy, double qx, double qy,
                                      double *f) {
  const accel__reg_geom *g = e->g;
  double lx = 0, ly = 0;
  const int where = accel__reg_fixed_where(g, e->mask, ix, iy, qx, qy, &lx, &ly);
  if (where != ACCEL__REG_FIXED_IN) return where;
  *f = g->identity ? accel__reg_fixed_pixel(e, iy * g->fw + ix)
                   : accel__reg_bilinear(e->fixed, g->fw, g->fh, lx, ly, NULL, NULL);
  return ACCEL__REG_FIXED_IN;
}

ACCEL__REG_HD double accel__reg_frac01(double t) { return t < 0 ? 0 : t >= 1 ? 0.9999999999999999 : t; }

/* Whether a sample's moving position (level pixels) is too far from any
 * image to interpolate: a transform gone astray (an initial part of absurd
 * size). Its floor would not fit an int64_t, which a CPU and a GPU convert
 * differently; such a sample does not count, on every backend. */
#define ACCEL__REG_FAR 1e12
ACCEL__REG_HD bool accel__reg_moving_far(double mx, double my) {
  return !(fabs(mx) < ACCEL__REG_FAR && fabs(my) < ACCEL__REG_FAR);
}

/* Add one sample's terms to a cell's sums. */
ACCEL__REG_HD void accel__reg_cell_add(accel__reg_cell_acc *a, bool ncc, double fv, double mv, double gx, double gy,
                                       const double w[16], bool grad, bool normal) {
  a->s[ACCEL__REG_SUMS - 1] += 1;
  if (ncc) {
    a->s[0] += fv, a->s[1] += mv, a->s[2] += fv * fv, a->s[3] += mv * mv, a->s[4] += fv * mv;
  } else {
    a->s[0] += (mv - fv) * (mv - fv);
  }
  if (grad) {
    const double ca = ncc ? fv : mv - fv;
    for (int t = 0; t < 16; t++) {
      a->ga[0][t] += ca * gx * w[t], a->ga[1][t] += ca * gy * w[t];
      if (ncc) {
        a->gb[0][t] += mv * gx * w[t], a->gb[1][t] += mv * gy * w[t];
        a->gc[0][t] += gx * w[t], a->gc[1][t] += gy * w[t];
      }
    }
  }
  if (normal) {
    a->s[ACCEL__REG_SUM_NORMAL] += 1;
    float wf[16];
    for (int t = 0; t < 16; t++) wf[t] = (float)w[t];
    const float G0 = (float)(gx * gx), G1 = (float)(gx * gy), G2 = (float)(gy * gy);
    for (int t = 0; t < 16; t++) {
      const float a0 = wf[t] * G0, a1 = wf[t] * G1, a2 = wf[t] * G2;
      for (int u = t; u < 16; u++) a->L[0][t][u] += a0 * wf[u];
      for (int u = t; u < 16; u++) a->L[1][t][u] += a1 * wf[u];
      for (int u = t; u < 16; u++) a->L[2][t][u] += a2 * wf[u];
    }
  }
}

/* The cubic B-spline weights of t in [0, 1] (accel__reg_weights) and their
 * derivatives, with products for the divisions (a
 * level evaluates them four times a sample). */
ACCEL__REG_HD void accel__reg_level_weights(double t, double w[4]) {
  const double s = 1.0 - t, t2 = t * t, t3 = t2 * t, sixth = 1.0 / 6.0;
  w[0] = s * s * s * sixth;
  w[1] = (3.0 * t3 - 6.0 * t2 + 4.0) * sixth;
  w[2] = (-3.0 * t3 + 3.0 * t2 + 3.0 * t + 1.0) * sixth;
  w[3] = t3 * sixth;
}

ACCEL__REG_HD void accel__reg_level_weights_d(double t, double d[4]) {
  const double s = 1.0 - t, t2 = t * t;
  d[0] = -0.5 * s * s;
  d[1] = 1.5 * t2 - 2.0 * t;
  d[2] = -1.5 * t2 + t + 0.5;
  d[3] = 0.5 * t2;
}

/* Value and gradient (per level pixel) of the cubic B-spline with
 * coefficients c (w x h; the samples prefiltered as Unser, Aldroubi and
 * Eden 1991 describe, mirror boundaries: accel__reg_prefilter in
 * cpu_pyramid.c) at (x, y), mirrored about the edges only where needed. */
ACCEL__REG_HD double accel__reg_level_cubic(const float *c, int64_t w, int64_t h, double x, double y, double *gx,
                                            double *gy) {
  const int64_t ix = accel__reg_floor(x), iy = accel__reg_floor(y);
  double wx[4], wy[4], dx[4], dy[4];
  accel__reg_level_weights(x - (double)ix, wx);
  accel__reg_level_weights(y - (double)iy, wy);
  accel__reg_level_weights_d(x - (double)ix, dx);
  accel__reg_level_weights_d(y - (double)iy, dy);
  const int64_t x0 = ix - 1, y0 = iy - 1;
  int64_t xi[4], yi[4];
  const bool inner = x0 >= 0 && x0 + 3 < w, inner_y = y0 >= 0 && y0 + 3 < h;
  for (int i = 0; i < 4; i++) xi[i] = inner ? x0 + i : accel__reg_mirror(x0 + i, w);
  for (int j = 0; j < 4; j++) yi[j] = inner_y ? y0 + j : accel__reg_mirror(y0 + j, h);
  double v = 0, vx = 0, vy = 0;
  for (int j = 0; j < 4; j++) {
    const float *row = c + yi[j] * w;
    double r = 0, rd = 0;
    for (int i = 0; i < 4; i++) {
      r += wx[i] * row[xi[i]];
      rd += dx[i] * row[xi[i]];
    }
    v += wy[j] * r;
    vx += wy[j] * rd;
    vy += dy[j] * r;
  }
  *gx = vx;
  *gy = vy;
  return v;
}

/* How many samples ahead a cell's loop asks the memory for the fixed pixel
 * and the moving coefficients (CPU only: the samples lie at random columns,
 * so every one misses the caches, and the loads are what the loop waits
 * for). The moving position is predicted with the last sample's
 * displacement, which varies slowly within a cell. */
#define ACCEL__REG_AHEAD 8
#if defined(__CUDA_ARCH__) || !(defined(__GNUC__) || defined(__clang__))
#define ACCEL__REG_PREFETCH(p) ((void)(p))
#elif defined(__x86_64__)
/* (GCC 12 drops __builtin_prefetch here as dead code.) */
#define ACCEL__REG_PREFETCH(p) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#else
#define ACCEL__REG_PREFETCH(p) __builtin_prefetch(p)
#endif

ACCEL__REG_HD int64_t accel__reg_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Ask for the memory of the sample at lattice (ix, iy), displaced by about
 * (ux, uy). */
ACCEL__REG_HD void accel__reg_cell_prefetch(const accel__reg_cell_in *e, int64_t ix, int64_t iy, double ux, double uy) {
  const accel__reg_geom *g = e->g;
  const double f = g->factor, off = g->offset, inv_f = 1.0 / f, qx = f * (double)ix + off, qy = f * (double)iy + off;
  if (g->identity) {
    ACCEL__REG_PREFETCH(accel__reg_fixed_address(e, iy * g->fw + ix));
  } else {
    const double px = g->inv[0] * qx + g->inv[1] * qy + g->invb[0], py = g->inv[2] * qx + g->inv[3] * qy + g->invb[1];
    /* the bilinear read's two rows and two columns (accel__reg_fixed_at),
     * clamped before the conversion */
    const double lxd = (px - off) * inv_f, lyd = (py - off) * inv_f;
    const int64_t lx = !(lxd > 0) ? 0 : lxd < (double)(g->fw - 1) ? (int64_t)lxd : g->fw - 1;
    const int64_t ly = !(lyd > 0) ? 0 : lyd < (double)(g->fh - 1) ? (int64_t)lyd : g->fh - 1;
    const int64_t lx1 = lx + 1 < g->fw ? lx + 1 : lx, ly1 = ly + 1 < g->fh ? ly + 1 : ly;
    ACCEL__REG_PREFETCH(e->fixed + ly * g->fw + lx);
    ACCEL__REG_PREFETCH(e->fixed + ly * g->fw + lx1);
    ACCEL__REG_PREFETCH(e->fixed + ly1 * g->fw + lx);
    ACCEL__REG_PREFETCH(e->fixed + ly1 * g->fw + lx1);
  }
  const double mx = (qx + ux - off) * inv_f, my = (qy + uy - off) * inv_f;
  if (!(mx > -4.0 && mx < (double)g->mw + 4.0 && my > -4.0 && my < (double)g->mh + 4.0)) return;
  const int64_t x0 = accel__reg_clamp((int64_t)mx - 1, 0, g->mw - 1), x3 = accel__reg_clamp(x0 + 3, 0, g->mw - 1);
  const int64_t y0 = (int64_t)my - 1;
  for (int j = 0; j < 4; j++) {
    const float *row = e->moving + accel__reg_clamp(y0 + j, 0, g->mh - 1) * g->mw;
    ACCEL__REG_PREFETCH(row + x0);
    ACCEL__REG_PREFETCH(row + x3);
  }
}

/* Accumulate the samples of cell (cx, cy) of a set (density, stream) at
 * `params` into a (which starts at 0): the metric's sums, with `grad` the
 * gradient's terms, with `normal` the Gauss-Newton terms - of every sample,
 * or, with `grad` too, of every g->normal_every-th sample of the cell (a
 * subset stratified by rows as the samples are; where the cell draws every
 * pixel, every k-th pixel in row order). */
ACCEL__REG_HD void accel__reg_cell_eval(const accel__reg_cell_in *e, const double *params, int64_t cx, int64_t cy,
                                        double density, uint64_t stream, bool grad, bool normal,
                                        accel__reg_cell_acc *a) {
  const accel__reg_geom *g = e->g;
  const int64_t nx = g->xf.nx, n = nx * g->xf.ny;
  const int64_t P = (g->ax.first[cx + 1] - g->ax.first[cx]) * (g->ay.first[cy + 1] - g->ay.first[cy]);
  const int64_t ns = accel__reg_cell_samples(P, density);
  const double f = g->factor, off = g->offset, inv_f = 1.0 / f; /* factor: a power of 2 */
  const double isx = 1.0 / g->xf.spacing[0], isy = 1.0 / g->xf.spacing[1];
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC;
  double cpx[16], cpy[16];
  for (int t = 0; t < 16; t++) {
    const int64_t node = (cy + t / 4) * nx + cx + t % 4;
    cpx[t] = params[node], cpy[t] = params[n + node];
  }
  const int64_t every = grad && normal ? g->normal_every : 1;
  int64_t ring[ACCEL__REG_AHEAD][2];
  double ux = cpx[5], uy = cpy[5]; /* the last displacement: the prefetches' guess */
  for (int64_t k = 0; k < ns && k < ACCEL__REG_AHEAD; k++) {
    accel__reg_sample_at(&g->ax, &g->ay, cx, cy, k, ns, density, g->seed, g->level, stream, &ring[k][0], &ring[k][1]);
    accel__reg_cell_prefetch(e, ring[k][0], ring[k][1], ux, uy);
  }
  for (int64_t k = 0; k < ns; k++) {
    int64_t *slot = ring[k % ACCEL__REG_AHEAD];
    const int64_t ix = slot[0], iy = slot[1];
    if (k + ACCEL__REG_AHEAD < ns) {
      accel__reg_sample_at(&g->ax, &g->ay, cx, cy, k + ACCEL__REG_AHEAD, ns, density, g->seed, g->level, stream,
                           &slot[0], &slot[1]);
      accel__reg_cell_prefetch(e, slot[0], slot[1], ux, uy);
    }
    const double qx = f * (double)ix + off, qy = f * (double)iy + off;
    double fv;
    const int where = accel__reg_fixed_at(e, ix, iy, qx, qy, &fv);
    if (where != ACCEL__REG_FIXED_OUT) a->s[ACCEL__REG_SUM_INSIDE] += 1;
    if (where != ACCEL__REG_FIXED_IN) continue;
    a->s[ACCEL__REG_SUM_FIXED] += 1;
    double wx[4], wy[4], w[16];
    accel__reg_level_weights(accel__reg_frac01((qx - g->xf.origin[0]) * isx - (double)(cx + 1)), wx);
    accel__reg_level_weights(accel__reg_frac01((qy - g->xf.origin[1]) * isy - (double)(cy + 1)), wy);
    ux = 0, uy = 0;
    for (int j = 0; j < 4; j++) {
      for (int i = 0; i < 4; i++) {
        w[j * 4 + i] = wy[j] * wx[i];
        ux += w[j * 4 + i] * cpx[j * 4 + i];
        uy += w[j * 4 + i] * cpy[j * 4 + i];
      }
    }
    if (e->base.params) {
      double bx, by;
      accel__reg_bspline_at(&e->base, qx, qy, &bx, &by);
      ux += bx, uy += by;
    }
    const double mx = (qx + ux - off) * inv_f, my = (qy + uy - off) * inv_f;
    if (accel__reg_moving_far(mx, my)) continue;
    if (!g->keep_outside && !(mx >= 0 && mx <= (double)(g->mw - 1) && my >= 0 && my <= (double)(g->mh - 1))) continue;
    double gx, gy;
    const double mv = accel__reg_level_cubic(e->moving, g->mw, g->mh, mx, my, &gx, &gy);
    gx *= inv_f, gy *= inv_f;
    accel__reg_cell_add(a, ncc, fv, mv, gx, gy, w, grad, normal && k % every == 0);
  }
}

/* The colour of cell (cx, cy): the round in which its terms are added. */
ACCEL__REG_HD int accel__reg_cell_colour(int64_t cx, int64_t cy) { return (int)(cx % 4 + 4 * (cy % 4)); }

/* The cell of colour `colour` whose support holds node (i, j), and the
 * node's place t in it; false when that cell is not one of the cx_n x cy_n
 * cells. */
ACCEL__REG_HD bool accel__reg_cell_of(int64_t i, int64_t j, int colour, int64_t cx_n, int64_t cy_n, int64_t *cx,
                                      int64_t *cy, int *t) {
  *cx = i - (((i - colour % 4) % 4 + 4) % 4);
  *cy = j - (((j - colour / 4) % 4 + 4) % 4);
  *t = (int)((j - *cy) * 4 + (i - *cx));
  return *cx >= 0 && *cx < cx_n && *cy >= 0 && *cy < cy_n;
}

/* The metric and its derivatives from the summed terms: s (the sums of all
 * cells), grad (MSE: the summed ga terms, 2n) or gf, gm, g1 (NCC), normal
 * (n * ACCEL__REG_NB3, or NULL), scaled in place (the matrix as if all the
 * samples had added its terms: by N / the matrix count more). */
static inline void accel__reg_finish(const accel__reg_geom *g, const double *s, const double *gf, const double *gm,
                                     const double *g1, double *value, double *grad, double *normal) {
  const int64_t n = g->xf.nx * g->xf.ny;
  const double N = s[ACCEL__REG_SUMS - 1];
  if (!(N > 0)) {
    *value = 1e300;
    if (grad) memset(grad, 0, sizeof(double) * (size_t)(2 * n));
    return;
  }
  double scale = 2.0 / N;
  if (g->metric == ACCEL_REG_METRIC_NCC) {
    const double mf = s[0] / N, mm = s[1] / N, sff = s[2] - N * mf * mf, smm = s[3] - N * mm * mm,
                 sfm = s[4] - N * mf * mm;
    const double den = sqrt(sff * smm);
    *value = den > 0 ? 1.0 - sfm / den : 1.0;
    if (grad)
      for (int64_t k = 0; k < 2 * n; k++)
        grad[k] = den > 0 ? -((gf[k] - mf * g1[k]) - (sfm / smm) * (gm[k] - mm * g1[k])) / den : 0.0;
    scale = smm > 0 ? 1.0 / smm : 0.0;
  } else {
    *value = s[0] / N;
    if (grad)
      for (int64_t k = 0; k < 2 * n; k++) grad[k] *= scale;
  }
  const double Nn = s[ACCEL__REG_SUM_NORMAL];
  scale *= Nn > 0 ? N / Nn : 0.0;
  if (normal)
    for (int64_t k = 0; k < n * ACCEL__REG_NB3; k++) normal[k] *= scale;
}

#endif /* ACCEL_REG_LEVEL_CELL_H */
