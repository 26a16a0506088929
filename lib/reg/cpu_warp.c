/* The CPU op reg.warp: the output tile by tile, in parallel; in each tile
 * the transform is evaluated from the control grid row by row (separably
 * when the initial part keeps the axes: the B-spline's y weights combine the
 * grid rows once per output row, its x weights are tabulated once per
 * column), then every pixel is interpolated with interp.h. */
#include "reg/cpu.h"
#include "reg/interp.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Two doubles, four floats: the same operations on each lane as the scalar
 * code would do (GCC's and Clang's vector extension). */
typedef double v2d __attribute__((vector_size(16)));

/* What every tile reads. */
typedef struct warp_geo {
  const accel__reg_warp_job *job;
  int64_t in_w, in_h, chans;
  const char *in;
  int64_t is0, is1, is2; /* bytes */
  char *out;
  int64_t os0, os1, os2; /* bytes; os2 = 0 for a 2-D output */
  int64_t out_w, out_h, tile, tiles_x;
  accel_dtype idt, odt;
  bool separable;
  float fill;
} warp_geo;

/* One tile's tables (per thread, sized for the tile's width). */
typedef struct tile_tab {
  int64_t w;
  double *qx;     /* the linear part's x per column (separable) */
  int64_t *i0;    /* the first grid node of each column's support less lo (0 outside the valid region) */
  int64_t lo, hi; /* the smallest and largest first node of the tile's columns (hi < 0: none) */
  double *wx;     /* 4 weights per column */
  double *rx;     /* the grid rows combined with one row's y weights, x then y */
  int64_t r_cap;  /* nodes rx has room for, per component */
  double *X, *Y;  /* one row's positions in the moving image */
  /* cubic: per pixel of the row, the support's first index in x and y
   * (floor - 1), inside or not, the 4 + 4 weights (plane k at wt + k w)
   * and the fractions (planes 8, 9) */
  int32_t *ix, *iy;
  uint8_t *ok;
  float *wt;
} tile_tab;

ALWAYS_INLINE float load_in(const char *p, accel_dtype d) {
  switch (d) {
  case ACCEL_DTYPE_U8: return (float)*(const uint8_t *)p;
  case ACCEL_DTYPE_U16: return (float)*(const uint16_t *)p;
  default: return *(const float *)p;
  }
}

ALWAYS_INLINE void store_out(char *p, accel_dtype d, float v) {
  switch (d) {
  case ACCEL_DTYPE_U8: *(uint8_t *)p = (uint8_t)accel__reg_to_int(v, 255.0f); break;
  case ACCEL_DTYPE_U16: *(uint16_t *)p = (uint16_t)accel__reg_to_int(v, 65535.0f); break;
  default: *(float *)p = v; break;
  }
}

/* ------------------------------------------------------------ positions */

/* The column tables of a tile whose first output column is the fixed image's
 * x = px0 (separable case): columns outside the grid's valid region get
 * weights 0 at the first node, which add exactly nothing. */
static void column_tables(const warp_geo *g, tile_tab *tt, int64_t px0) {
  const accel__reg_xform *x = &g->job->xf;
  tt->lo = INT64_MAX;
  tt->hi = -1;
  for (int64_t c = 0; c < tt->w; c++) {
    const double px = (double)(px0 + c);
    tt->qx[c] = x->m[0] * px + x->b[0];
    int64_t first;
    if (x->params && accel__reg_support(tt->qx[c], x->origin[0], x->spacing[0], x->nx, &first, tt->wx + 4 * c)) {
      tt->i0[c] = first;
      tt->lo = first < tt->lo ? first : tt->lo;
      tt->hi = first > tt->hi ? first : tt->hi;
    } else {
      tt->i0[c] = -1;
      for (int k = 0; k < 4; k++) tt->wx[4 * c + k] = 0.0;
    }
  }
  for (int64_t c = 0; c < tt->w; c++) tt->i0[c] = tt->i0[c] >= 0 ? tt->i0[c] - tt->lo : 0;
}

/* The positions of one output row at the fixed image's y = py, when the
 * initial part keeps the axes: the B-spline's rows combined once, then 4
 * nodes a column. */
static void row_separable(const warp_geo *g, tile_tab *tt, double py) {
  const accel__reg_xform *x = &g->job->xf;
  const double qy = x->m[3] * py + x->b[1];
  const int64_t n = tt->w;
  int64_t j0;
  double wy[4];
  double *restrict X = tt->X, *restrict Y = tt->Y;
  const double *restrict qx = tt->qx;
  if (tt->hi < 0 || !accel__reg_support(qy, x->origin[1], x->spacing[1], x->ny, &j0, wy)) { /* no B-spline here */
    for (int64_t c = 0; c < n; c++) X[c] = qx[c], Y[c] = qy;
    return;
  }
  const int64_t nodes = tt->hi - tt->lo + 4, plane = x->nx * x->ny;
  double *restrict rx = tt->rx, *restrict ry = tt->rx + tt->r_cap;
  for (int64_t k = 0; k < nodes; k++) {
    const double *cx = x->params + j0 * x->nx + tt->lo + k;
    double sx = 0.0, sy = 0.0;
    for (int j = 0; j < 4; j++) {
      sx += wy[j] * cx[j * x->nx];
      sy += wy[j] * cx[j * x->nx + plane];
    }
    rx[k] = sx;
    ry[k] = sy;
  }
  const double *restrict wx = tt->wx;
  const int64_t *restrict first = tt->i0;
  for (int64_t c = 0; c < n; c++) {
    const double *w = wx + 4 * c;
    const int64_t k = first[c];
    X[c] = qx[c] + (w[0] * rx[k] + w[1] * rx[k + 1] + w[2] * rx[k + 2] + w[3] * rx[k + 3]);
    Y[c] = qy + (w[0] * ry[k] + w[1] * ry[k + 1] + w[2] * ry[k + 2] + w[3] * ry[k + 3]);
  }
}

/* The positions of one output row, any initial part: point by point, as
 * accel__reg_apply (bspline.h) but with the grid spacing's reciprocal and
 * the floor of interp.h (no division, no library call a point). */
static void row_general(const warp_geo *g, tile_tab *tt, int64_t px0, double py) {
  const accel__reg_xform *x = &g->job->xf;
  const double isx = 1.0 / x->spacing[0], isy = 1.0 / x->spacing[1];
  const double ex = (double)(x->nx - 2), ey = (double)(x->ny - 2);
  const int64_t plane = x->nx * x->ny;
  for (int64_t c = 0; c < tt->w; c++) {
    double qx, qy, ux = 0.0, uy = 0.0;
    accel__reg_linear(x, (double)(px0 + c), py, &qx, &qy);
    const double cx = (qx - x->origin[0]) * isx, cy = (qy - x->origin[1]) * isy;
    if (x->params && cx >= 1.0 && cx < ex && cy >= 1.0 && cy < ey) {
      const int64_t fx = accel__reg_floor(cx), fy = accel__reg_floor(cy);
      double wx[4], wy[4];
      accel__reg_weights(cx - (double)fx, wx);
      accel__reg_weights(cy - (double)fy, wy);
      const double *p = x->params + (fy - 1) * x->nx + fx - 1;
      v2d u = {0.0, 0.0}; /* x and y side by side */
      for (int j = 0; j < 4; j++, p += x->nx) {
        const v2d r = (v2d){wx[0], wx[0]} * (v2d){p[0], p[plane]} + (v2d){wx[1], wx[1]} * (v2d){p[1], p[plane + 1]} +
                      (v2d){wx[2], wx[2]} * (v2d){p[2], p[plane + 2]} + (v2d){wx[3], wx[3]} * (v2d){p[3], p[plane + 3]};
        u += (v2d){wy[j], wy[j]} * r;
      }
      ux = u[0];
      uy = u[1];
    }
    tt->X[c] = qx + ux;
    tt->Y[c] = qy + uy;
  }
}

/* ------------------------------------------------------------ interpolation */

/* Four floats, for the sums of interp.h done four lanes at a time (lanes
 * are the 4 columns of a gray pixel's support, or the channels of a colour
 * pixel); the same operations in the same order as accel__reg_cubic_sum. */
typedef float v4f __attribute__((vector_size(16)));

ALWAYS_INLINE v4f load4(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Column sums of one support: lanes = the 4 x taps (contiguous coefficients). */
ALWAYS_INLINE float cubic_gray(const float *coef, const int64_t oy[4], int64_t ox0, const float wy[4],
                               const float wx[4]) {
  const v4f col = (v4f){wy[0], wy[0], wy[0], wy[0]} * load4(coef + oy[0] + ox0) +
                  (v4f){wy[1], wy[1], wy[1], wy[1]} * load4(coef + oy[1] + ox0) +
                  (v4f){wy[2], wy[2], wy[2], wy[2]} * load4(coef + oy[2] + ox0) +
                  (v4f){wy[3], wy[3], wy[3], wy[3]} * load4(coef + oy[3] + ox0);
  const v4f p = col * (v4f){wx[0], wx[1], wx[2], wx[3]};
  return (p[0] + p[2]) + (p[1] + p[3]);
}

/* Lanes = channels (the 4th lane of a 3-channel pixel reads the next
 * coefficient: the buffer has room for it). */
ALWAYS_INLINE v4f cubic_colour(const float *coef, const int64_t oy[4], const int64_t ox[4], const float wy[4],
                               const float wx[4]) {
  v4f col[4];
  for (int i = 0; i < 4; i++)
    col[i] = (v4f){wy[0], wy[0], wy[0], wy[0]} * load4(coef + oy[0] + ox[i]) +
             (v4f){wy[1], wy[1], wy[1], wy[1]} * load4(coef + oy[1] + ox[i]) +
             (v4f){wy[2], wy[2], wy[2], wy[2]} * load4(coef + oy[2] + ox[i]) +
             (v4f){wy[3], wy[3], wy[3], wy[3]} * load4(coef + oy[3] + ox[i]);
  return ((v4f){wx[0], wx[0], wx[0], wx[0]} * col[0] + (v4f){wx[2], wx[2], wx[2], wx[2]} * col[2]) +
         ((v4f){wx[1], wx[1], wx[1], wx[1]} * col[1] + (v4f){wx[3], wx[3], wx[3], wx[3]} * col[3]);
}

/* Three channels of contiguous coefficients: each row of the support is
 * 12 floats (4 pixels x RGB), one 8-float and one 4-float vector (the
 * lanes hold the same products and sums as cubic_colour's, packed tighter),
 * then each pixel column moved into a 4-lane vector for cubic_colour's
 * final sums in its order. Lane 3 of the result is not a channel. */
typedef float v8f __attribute__((vector_size(32)));
/* The same at any float's address. */
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));

ALWAYS_INLINE v4f cubic_rgb(const float *coef, const int64_t oy[4], int64_t ox0, const float wy[4], const float wx[4]) {
  /* one variable a load (an array of them went through the stack) */
  const v8f a0 = *(const v8f_u *)(coef + oy[0] + ox0), a1 = *(const v8f_u *)(coef + oy[1] + ox0);
  const v8f a2 = *(const v8f_u *)(coef + oy[2] + ox0), a3 = *(const v8f_u *)(coef + oy[3] + ox0);
  const v4f b0 = *(const v4f_u *)(coef + oy[0] + ox0 + 8), b1 = *(const v4f_u *)(coef + oy[1] + ox0 + 8);
  const v4f b2 = *(const v4f_u *)(coef + oy[2] + ox0 + 8), b3 = *(const v4f_u *)(coef + oy[3] + ox0 + 8);
  const v8f A = (v8f){wy[0], wy[0], wy[0], wy[0], wy[0], wy[0], wy[0], wy[0]} * a0 +
                (v8f){wy[1], wy[1], wy[1], wy[1], wy[1], wy[1], wy[1], wy[1]} * a1 +
                (v8f){wy[2], wy[2], wy[2], wy[2], wy[2], wy[2], wy[2], wy[2]} * a2 +
                (v8f){wy[3], wy[3], wy[3], wy[3], wy[3], wy[3], wy[3], wy[3]} * a3;
  const v4f B = (v4f){wy[0], wy[0], wy[0], wy[0]} * b0 + (v4f){wy[1], wy[1], wy[1], wy[1]} * b1 +
                (v4f){wy[2], wy[2], wy[2], wy[2]} * b2 + (v4f){wy[3], wy[3], wy[3], wy[3]} * b3;
  const v4f col0 = __builtin_shufflevector(A, A, 0, 1, 2, 3), col1 = __builtin_shufflevector(A, A, 3, 4, 5, 6);
  const v4f high = __builtin_shufflevector(A, A, 4, 5, 6, 7), col2 = __builtin_shufflevector(high, B, 2, 3, 4, 5);
  const v4f col3 = __builtin_shufflevector(B, B, 1, 2, 3, 3);
  return ((v4f){wx[0], wx[0], wx[0], wx[0]} * col0 + (v4f){wx[2], wx[2], wx[2], wx[2]} * col2) +
         ((v4f){wx[1], wx[1], wx[1], wx[1]} * col1 + (v4f){wx[3], wx[3], wx[3], wx[3]} * col3);
}

/* The first C lanes of v stored as store_out stores them: for integers
 * clamped to 0..hi and rounded as accel__reg_to_int (the same comparisons,
 * NaN to 0, and the same sum, truncated: equal for every value). */
ALWAYS_INLINE void store_lanes(char *dst, int64_t os2, accel_dtype odt, v4f v, int64_t C) {
  if (odt == ACCEL_DTYPE_F32) {
    for (int64_t ch = 0; ch < C; ch++) *(float *)(dst + ch * os2) = v[ch];
    return;
  }
  typedef int32_t v4s __attribute__((vector_size(16)));
  const float hi = odt == ACCEL_DTYPE_U8 ? 255.0f : 65535.0f;
  const v4f zero = {0.0f, 0.0f, 0.0f, 0.0f}, top = {hi, hi, hi, hi}, half = {0.5f, 0.5f, 0.5f, 0.5f};
  v4s m = v >= zero; /* false for NaN */
  v = (v4f)((v4s)v & m);
  m = v > top;
  v = (v4f)(((v4s)top & m) | ((v4s)v & ~m));
  const v4s q = __builtin_convertvector(v + half, v4s);
  for (int64_t ch = 0; ch < C; ch++) {
    if (odt == ACCEL_DTYPE_U8) *(uint8_t *)(dst + ch * os2) = (uint8_t)q[ch];
    else *(uint16_t *)(dst + ch * os2) = (uint16_t)q[ch];
  }
}

/* Four doubles and their comparisons' masks, four int32 (cubic_setup). */
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
/* Lanewise m ? a : b for a comparison's mask m (every bit of a lane set or
 * none), bit for bit; a macro: 32-byte vectors are not passed to functions
 * in the baseline ABI. */
#define SELECT(m, a, b) ((v4d)(((v4l)(a) & (m)) | ((v4l)(b) & ~(m))))

ALWAYS_INLINE int64_t max4(const int64_t v[4]) {
  const int64_t a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
  return a > b ? a : b;
}

/* The setup of one row's pixels: inside or not, the support's first index
 * and the weights in each axis - accel__reg_inside and accel__reg_cubic_axis
 * (before mirroring), in loops the compiler can vectorise: positions are
 * clamped to [-1, n] first, NaN to -1 (enough for any inside one; the
 * others are filled) so that their floor fits 32 bits. Compiled for AVX2
 * as well (four doubles a step; the same bits). */
ACCEL__CLONES("avx2", "default") static void cubic_setup(const warp_geo *g, tile_tab *tt, bool plain) {
  const int64_t n = tt->w;
  const double *restrict X = tt->X, *restrict Y = tt->Y;
  int32_t *restrict ix = tt->ix, *restrict iy = tt->iy;
  uint8_t *restrict ok = tt->ok;
  float *restrict wt = tt->wt, *restrict tx = tt->wt + 8 * n, *restrict ty = tt->wt + 9 * n;
  const double wl = (double)g->in_w, hl = (double)g->in_h;
  int64_t c = 0;
  /* four pixels at a time with the same operations on each lane (the
   * compiler makes a branch per comparison of the scalar loop) */
  const v4d lo = {-1.0, -1.0, -1.0, -1.0}, half = {-0.5, -0.5, -0.5, -0.5};
  const v4d wv = {wl, wl, wl, wl}, hv = {hl, hl, hl, hl}, wh = wv + half, hh = hv + half;
  for (; c + 4 <= n && !plain; c += 4) {
    v4d x, y;
    memcpy(&x, X + c, sizeof x);
    memcpy(&y, Y + c, sizeof y);
    const v4l in = (x >= half) & (x < wh) & (y >= half) & (y < hh);
    const v4d cx = SELECT(x >= lo, SELECT(x > wv, wv, x), lo), cy = SELECT(y >= lo, SELECT(y > hv, hv, y), lo);
    v4i i = __builtin_convertvector(cx, v4i), j = __builtin_convertvector(cy, v4i);
    i += __builtin_convertvector(__builtin_convertvector(i, v4d) > cx, v4i); /* -1 where the truncation rounded up */
    j += __builtin_convertvector(__builtin_convertvector(j, v4d) > cy, v4i);
    const v4i one = {1, 1, 1, 1}, i1 = i - one, j1 = j - one;
    const v4f fx = __builtin_convertvector(cx - __builtin_convertvector(i, v4d), v4f);
    const v4f fy = __builtin_convertvector(cy - __builtin_convertvector(j, v4d), v4f);
    memcpy(ix + c, &i1, sizeof i1);
    memcpy(iy + c, &j1, sizeof j1);
    memcpy(tx + c, &fx, sizeof fx);
    memcpy(ty + c, &fy, sizeof fy);
    for (int k = 0; k < 4; k++) ok[c + k] = (uint8_t)(in[k] & 1);
  }
  for (; c < n; c++) {
    const double x = X[c], y = Y[c];
    ok[c] = (uint8_t)((x >= -0.5) & (x < wl - 0.5) & (y >= -0.5) & (y < hl - 0.5));
    const double cx = x >= -1.0 ? (x > wl ? wl : x) : -1.0, cy = y >= -1.0 ? (y > hl ? hl : y) : -1.0;
    int32_t i = (int32_t)cx, j = (int32_t)cy;
    i -= (double)i > cx;
    j -= (double)j > cy;
    ix[c] = i - 1;
    iy[c] = j - 1;
    tx[c] = (float)(cx - (double)i);
    ty[c] = (float)(cy - (double)j);
  }
  for (c = 0; c < n; c++) {
    float w[4];
    accel__reg_cubic_weights(tx[c], w);
    wt[c] = w[0], wt[n + c] = w[1], wt[2 * n + c] = w[2], wt[3 * n + c] = w[3];
  }
  for (c = 0; c < n; c++) {
    float w[4];
    accel__reg_cubic_weights(ty[c], w);
    wt[4 * n + c] = w[0], wt[5 * n + c] = w[1], wt[6 * n + c] = w[2], wt[7 * n + c] = w[3];
  }
}

/* One row of a cubic warp; C (channels) and odt are constants in each copy.
 * Everything the loop reads is in locals: the stores through char * could
 * otherwise alias it. */
ALWAYS_INLINE void cubic_row(const warp_geo *g, tile_tab *tt, char *o, accel_dtype odt, int64_t C) {
  const int64_t w = g->in_w, h = g->in_h, n = tt->w, os1 = g->os1, os2 = g->os2;
  const int64_t row = w * C, y0 = g->job->coef_y0, rows = g->job->coef_rows, limit = rows * row;
  const float fill = g->fill, *coef = g->job->coef;
  const bool plain = accel__reg_warp_plain;
  cubic_setup(g, tt, plain);
  const uint8_t *restrict ok = tt->ok;
  const int32_t *restrict ix = tt->ix, *restrict iy = tt->iy;
  const float *restrict wt = tt->wt;
  for (int64_t c = 0; c < n; c++) {
    char *dst = o + c * os1;
    if (!ok[c]) {
      for (int64_t ch = 0; ch < C; ch++) store_out(dst + ch * os2, odt, fill);
      continue;
    }
    const int64_t i = ix[c], j = iy[c];
    const bool inner_x = i >= 0 && i + 3 < w, inner_y = j >= 0 && j + 3 < h;
    if (inner_x && j + 4 - y0 >= 0 && j + 4 - y0 < rows) /* the row the next output row will need */
      __builtin_prefetch(coef + (j + 4 - y0) * row + i * C);
    int64_t ox[4], oy[4];
    const float wx[4] = {wt[c], wt[n + c], wt[2 * n + c], wt[3 * n + c]};
    const float wy[4] = {wt[4 * n + c], wt[5 * n + c], wt[6 * n + c], wt[7 * n + c]};
    for (int k = 0; k < 4; k++) {
      ox[k] = (inner_x ? i + k : accel__reg_mirror(i + k, w)) * C;
      oy[k] = ((inner_y ? j + k : accel__reg_mirror(j + k, h)) - y0) * row;
    }
    if (C == 1) {
      store_out(dst, odt, inner_x ? cubic_gray(coef, oy, ox[0], wy, wx) : accel__reg_cubic_sum(coef, oy, ox, wy, wx));
    } else if (C == 3 && inner_x && !plain) {
      store_lanes(dst, os2, odt, cubic_rgb(coef, oy, ox[0], wy, wx), 3);
    } else if (C == 4 || max4(oy) + max4(ox) + 4 <= limit) {
      const v4f v = cubic_colour(coef, oy, ox, wy, wx);
      if (plain)
        for (int64_t ch = 0; ch < C; ch++) store_out(dst + ch * os2, odt, v[ch]);
      else store_lanes(dst, os2, odt, v, C);
    } else { /* the image's last pixel: the 4th lane would read past the coefficients */
      for (int64_t ch = 0; ch < C; ch++)
        store_out(dst + ch * os2, odt, accel__reg_cubic_sum(coef + ch, oy, ox, wy, wx));
    }
  }
}

/* The cubic row for each output type and channel count. */
#define CUBIC_FOR_CHANNELS(odt)                                                                                        \
  switch (g->chans) {                                                                                                  \
  case 1: cubic_row(g, tt, o, odt, 1); break;                                                                          \
  case 3: cubic_row(g, tt, o, odt, 3); break;                                                                          \
  default: cubic_row(g, tt, o, odt, 4); break;                                                                         \
  }

ALWAYS_INLINE void linear_row(const warp_geo *g, const tile_tab *tt, char *o, accel_dtype idt, accel_dtype odt) {
  const int64_t C = g->chans, w = g->in_w, h = g->in_h;
  for (int64_t c = 0; c < tt->w; c++) {
    char *dst = o + c * g->os1;
    if (!accel__reg_inside(tt->X[c], tt->Y[c], w, h)) {
      for (int64_t ch = 0; ch < C; ch++) store_out(dst + ch * g->os2, odt, g->fill);
      continue;
    }
    int64_t ox[2], oy[2];
    float tx, ty;
    accel__reg_linear_axis(tt->X[c], w, g->is1, ox, &tx);
    accel__reg_linear_axis(tt->Y[c], h, g->is0, oy, &ty);
    for (int64_t ch = 0; ch < C; ch++) {
      const char *p = g->in + ch * g->is2;
      const float v = accel__reg_linear_mix(load_in(p + oy[0] + ox[0], idt), load_in(p + oy[0] + ox[1], idt),
                                            load_in(p + oy[1] + ox[0], idt), load_in(p + oy[1] + ox[1], idt), tx, ty);
      store_out(dst + ch * g->os2, odt, v);
    }
  }
}

/* Each combination of types gets its own copy of the pixel loop. */
#define LINEAR_FOR_OUT(idt)                                                                                            \
  switch (g->odt) {                                                                                                    \
  case ACCEL_DTYPE_U8: linear_row(g, tt, o, idt, ACCEL_DTYPE_U8); break;                                               \
  case ACCEL_DTYPE_U16: linear_row(g, tt, o, idt, ACCEL_DTYPE_U16); break;                                             \
  default: linear_row(g, tt, o, idt, ACCEL_DTYPE_F32); break;                                                          \
  }

/* One output row. Compiled for AVX2 as well (the pixel loops' vector
 * operations in VEX form; each value's operations unchanged, no
 * contraction: 10% less CPU time for a 300 MP RGB warp, the same bits). */
ACCEL__CLONES("avx2", "default") static void interp_row(const warp_geo *g, tile_tab *tt, char *o) {
  if (g->job->interp == ACCEL_REG_INTERP_CUBIC) {
    switch (g->odt) {
    case ACCEL_DTYPE_U8: CUBIC_FOR_CHANNELS(ACCEL_DTYPE_U8) break;
    case ACCEL_DTYPE_U16: CUBIC_FOR_CHANNELS(ACCEL_DTYPE_U16) break;
    default: CUBIC_FOR_CHANNELS(ACCEL_DTYPE_F32) break;
    }
    return;
  }
  switch (g->idt) {
  case ACCEL_DTYPE_U8: LINEAR_FOR_OUT(ACCEL_DTYPE_U8) break;
  case ACCEL_DTYPE_U16: LINEAR_FOR_OUT(ACCEL_DTYPE_U16) break;
  default: LINEAR_FOR_OUT(ACCEL_DTYPE_F32) break;
  }
}

/* ------------------------------------------------------------ tiles */

static void tab_free(tile_tab *tt) {
  free(tt->qx);
  free(tt->i0);
  free(tt->wx);
  free(tt->rx);
  free(tt->X);
  free(tt->Y);
  free(tt->ix);
  free(tt->iy);
  free(tt->ok);
  free(tt->wt);
}

/* Tables for tiles of width w; false when out of memory. */
static bool tab_alloc(const warp_geo *g, tile_tab *tt, int64_t w) {
  memset(tt, 0, sizeof *tt);
  const accel__reg_xform *x = &g->job->xf;
  tt->w = w;
  /* the nodes one row of a tile can reach: its extent in the grid, plus the support */
  const double reach = fabs(x->m[0]) * (double)w / x->spacing[0] + 6.0;
  tt->r_cap = reach < (double)x->nx + 4 ? (int64_t)reach : x->nx + 4;
  tt->qx = malloc((size_t)w * sizeof *tt->qx);
  tt->i0 = malloc((size_t)w * sizeof *tt->i0);
  tt->wx = malloc((size_t)w * 4 * sizeof *tt->wx);
  tt->rx = malloc((size_t)tt->r_cap * 2 * sizeof *tt->rx);
  tt->X = malloc((size_t)w * sizeof *tt->X);
  tt->Y = malloc((size_t)w * sizeof *tt->Y);
  tt->ix = malloc((size_t)w * sizeof *tt->ix);
  tt->iy = malloc((size_t)w * sizeof *tt->iy);
  tt->ok = malloc((size_t)w);
  tt->wt = malloc((size_t)w * 10 * sizeof *tt->wt);
  if (tt->qx && tt->i0 && tt->wx && tt->rx && tt->X && tt->Y && tt->ix && tt->iy && tt->ok && tt->wt) return true;
  tab_free(tt);
  return false;
}

static bool run_tile(const warp_geo *g, int64_t index) {
  const int64_t r0 = index / g->tiles_x * g->tile, c0 = index % g->tiles_x * g->tile;
  const int64_t w = g->out_w - c0 < g->tile ? g->out_w - c0 : g->tile;
  const int64_t h = g->out_h - r0 < g->tile ? g->out_h - r0 : g->tile;
  const int64_t px0 = g->job->x0 + c0;
  tile_tab tt;
  if (!tab_alloc(g, &tt, w)) return false;
  if (g->separable) column_tables(g, &tt, px0);
  for (int64_t r = 0; r < h; r++) {
    const double py = (double)(g->job->y0 + r0 + r);
    if (g->separable) row_separable(g, &tt, py);
    else row_general(g, &tt, px0, py);
    interp_row(g, &tt, g->out + (r0 + r) * g->os0 + c0 * g->os1);
  }
  tab_free(&tt);
  return true;
}

static void geo_of(const accel__reg_warp_job *job, warp_geo *g) {
  const accel_array *in = job->in, *out = job->out;
  memset(g, 0, sizeof *g);
  g->job = job;
  g->in_h = in->shape[0];
  g->in_w = in->shape[1];
  g->chans = in->ndim == 3 ? in->shape[2] : 1;
  g->in = in->data;
  g->is0 = in->strides[0];
  g->is1 = in->strides[1];
  g->is2 = in->ndim == 3 ? in->strides[2] : 0;
  g->out = out->data;
  g->out_h = out->shape[0];
  g->out_w = out->shape[1];
  g->os0 = out->strides[0];
  g->os1 = out->strides[1];
  g->os2 = out->ndim == 3 ? out->strides[2] : 0;
  g->idt = in->dtype;
  g->odt = out->dtype;
  g->tile = job->tile > 0 ? job->tile : 128;
  g->tiles_x = (g->out_w + g->tile - 1) / g->tile;
  g->separable = job->xf.m[1] == 0.0 && job->xf.m[2] == 0.0;
  g->fill = (float)job->fill;
}

static bool warp_tile(void *user, int64_t index) { return run_tile(user, index); }

bool accel__reg_warp_plain = false;

/* A cubic job without coefficients (a device layer's, here from its host
 * copy): those of the whole layer, in *own (freed by the caller). */
static accel_status own_coefficients(accel__call *call, const accel__reg_warp_job *job, accel__reg_warp_job *whole,
                                     float **own) {
  const accel_array *in = job->in;
  const int64_t h = in->shape[0], n = in->shape[1] * (in->ndim == 3 ? in->shape[2] : 1);
  size_t bytes;
  if (accel__mul_overflow((size_t)(h * n), sizeof(float), &bytes) || !(*own = malloc(bytes))) {
    accel__why(call->why, "no memory for the %lld x %lld B-spline coefficients", (long long)h, (long long)n);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  int64_t bad;
  const int rc = accel__reg_layer_coefficients(in, *own, call->threads, &bad);
  if (rc == 2) accel__why(call->why, "no memory for the prefilter's lines");
  else if (rc == 1) accel__why(call->why, "the layer has a non-finite value in row %lld", (long long)bad);
  if (rc) return rc == 2 ? ACCEL_ERR_OUT_OF_MEMORY : ACCEL_ERR_INVALID_ARG;
  *whole = *job;
  whole->coef = *own, whole->coef_y0 = 0, whole->coef_rows = h;
  return ACCEL_OK;
}

accel_status accel__reg_cpu_warp(accel__call *call, accel__reg_warp_job *job) {
  float *own = NULL;
  accel__reg_warp_job whole;
  if (job->interp == ACCEL_REG_INTERP_CUBIC && !job->coef) {
    const accel_status s = own_coefficients(call, job, &whole, &own);
    if (s) {
      free(own);
      return s;
    }
    job = &whole;
  }
  warp_geo g;
  geo_of(job, &g);
  const int64_t tiles = g.tiles_x * ((g.out_h + g.tile - 1) / g.tile);
  /* at most about 100 calls a job, from the calling thread */
  const accel__units_progress p = {job->progress,      job->progress_user, "reg.warp",
                                   job->progress_base, job->progress_span, 100};
  accel_status s = accel__parallel_units(call, tiles, warp_tile, &g, &p, "the tile tables");
  if (!s && job->progress && job->progress(job->progress_user, "reg.warp", job->progress_base + job->progress_span)) {
    accel__why(call->why, "cancelled by the progress callback");
    s = ACCEL_ERR_CANCELLED;
  }
  free(own);
  return s;
}
