/*
 * A cell's sums four samples at a time (x86-64 with AVX2): the same sums as
 * accel__reg_cell_eval (level_cell.h), bit for bit.
 *
 * The scalar evaluator spends about 1100 instructions per sample, nearly
 * all of them scalar arithmetic that does not depend on the other samples
 * of the cell: the B-spline weights of the sample in its cell, its
 * displacement, the cubic interpolation of the moving image and its
 * gradient. Here four consecutive samples of a cell take the four lanes of
 * a vector and every lane performs the scalar code's operations in the
 * scalar code's order (no fused multiply-adds: the library is built with
 * -ffp-contract=off, and only AVX2, not FMA, is enabled here), so each
 * lane's values are the scalar code's. The sums are then formed sample by
 * sample in sample order, as accel__reg_cell_add forms them; each sum's
 * terms are independent of the other sums', so the 16 gradient terms and
 * the rows of the Gauss-Newton block are added as vectors. The block's
 * terms are kept for up to 32 samples and then added a few rows at a time
 * (normal_flush), every entry still receiving its terms in sample order;
 * its rows are added from column 0 or 8 (the scalar code adds only the
 * upper triangle, t <= u, which is all that accel__reg_cell_L reads): the
 * upper triangle gets the same terms in the same order.
 *
 * Every level's cells take it on processors with AVX2: with an initial
 * linear part the fixed value of each lane is the scalar code's
 * (accel__reg_fixed_at), and an initial B-spline part is added to each
 * lane's displacement after the level's own, as the scalar code adds it.
 * Processors without AVX2 take the scalar code.
 */
#include "reg/cpu_lanes.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ACCEL_NO_LANES)
#include <immintrin.h>

#define LANES_TARGET __attribute__((target("avx2")))

/* Cubic B-spline weights (accel__reg_level_weights), per lane. */
LANES_TARGET static inline void lane_weights(__m256d t, __m256d w[4]) {
  const __m256d one = _mm256_set1_pd(1.0), sixth = _mm256_set1_pd(1.0 / 6.0);
  const __m256d s = _mm256_sub_pd(one, t), t2 = _mm256_mul_pd(t, t), t3 = _mm256_mul_pd(t2, t);
  w[0] = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(s, s), s), sixth);
  w[1] = _mm256_mul_pd(
      _mm256_add_pd(_mm256_sub_pd(_mm256_mul_pd(_mm256_set1_pd(3.0), t3), _mm256_mul_pd(_mm256_set1_pd(6.0), t2)),
                    _mm256_set1_pd(4.0)),
      sixth);
  __m256d a = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(-3.0), t3), _mm256_mul_pd(_mm256_set1_pd(3.0), t2));
  a = _mm256_add_pd(_mm256_add_pd(a, _mm256_mul_pd(_mm256_set1_pd(3.0), t)), one);
  w[2] = _mm256_mul_pd(a, sixth);
  w[3] = _mm256_mul_pd(t3, sixth);
}

/* Their derivatives (accel__reg_level_weights_d), per lane. */
LANES_TARGET static inline void lane_weights_d(__m256d t, __m256d d[4]) {
  const __m256d s = _mm256_sub_pd(_mm256_set1_pd(1.0), t), t2 = _mm256_mul_pd(t, t);
  d[0] = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(-0.5), s), s);
  d[1] = _mm256_sub_pd(_mm256_mul_pd(_mm256_set1_pd(1.5), t2), _mm256_mul_pd(_mm256_set1_pd(2.0), t));
  d[2] = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(-1.5), t2), t), _mm256_set1_pd(0.5));
  d[3] = _mm256_mul_pd(_mm256_set1_pd(0.5), t2);
}

/* accel__reg_frac01, per lane. */
LANES_TARGET static inline __m256d lane_frac01(__m256d t) {
  const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
  t = _mm256_blendv_pd(t, _mm256_set1_pd(0.9999999999999999), _mm256_cmp_pd(t, one, _CMP_GE_OQ));
  return _mm256_blendv_pd(t, zero, _mm256_cmp_pd(t, zero, _CMP_LT_OQ));
}

/* The 4 x 4 coefficients of one lane's interpolation: row j of the lane
 * in c[j] (4 floats). */
static inline void lane_coefficients(const float *coef, int64_t w, int64_t h, int64_t ix, int64_t iy, float c[4][4]) {
  const int64_t x0 = ix - 1, y0 = iy - 1;
  const bool inner = x0 >= 0 && x0 + 3 < w, inner_y = y0 >= 0 && y0 + 3 < h;
  if (inner && inner_y) {
    for (int j = 0; j < 4; j++) memcpy(c[j], coef + (y0 + j) * w + x0, 4 * sizeof(float));
    return;
  }
  int64_t xi[4], yi[4];
  for (int i = 0; i < 4; i++) xi[i] = inner ? x0 + i : accel__reg_mirror(x0 + i, w);
  for (int j = 0; j < 4; j++) yi[j] = inner_y ? y0 + j : accel__reg_mirror(y0 + j, h);
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) c[j][i] = coef[yi[j] * w + xi[i]];
}

/* What a group of (up to) four samples leaves for the sums, per lane. */
typedef struct lane_out {
  double w[4][16]; /* each lane's 16 B-spline weights */
  double mv[4], gx[4], gy[4], fv[4];
  double ux[4], uy[4]; /* the displacement (the prefetches' guess) */
  bool ok[4];
  int fixed, inside; /* the lanes in the fixed image and its mask, in the fixed image */
} lane_out;

/* Value and gradient of the moving image's cubic B-spline at (mx, my),
 * per lane (accel__reg_level_cubic). */
LANES_TARGET static void lane_cubic(const accel__reg_cell_in *e, __m256d mx, __m256d my, __m256d *v, __m256d *vx,
                                    __m256d *vy) {
  const accel__reg_geom *g = e->g;
  double fx[4], fy[4];
  const __m256d flx = _mm256_floor_pd(mx), fly = _mm256_floor_pd(my);
  _mm256_storeu_pd(fx, flx);
  _mm256_storeu_pd(fy, fly);
  __m256d wx[4], wy[4], dx[4], dy[4];
  lane_weights(_mm256_sub_pd(mx, flx), wx);
  lane_weights(_mm256_sub_pd(my, fly), wy);
  lane_weights_d(_mm256_sub_pd(mx, flx), dx);
  lane_weights_d(_mm256_sub_pd(my, fly), dy);
  float c[4][4][4]; /* lane, row, column */
  for (int l = 0; l < 4; l++) lane_coefficients(e->moving, g->mw, g->mh, (int64_t)fx[l], (int64_t)fy[l], c[l]);
  __m256d sv = _mm256_setzero_pd(), svx = _mm256_setzero_pd(), svy = _mm256_setzero_pd();
  for (int j = 0; j < 4; j++) {
    __m128 r0 = _mm_loadu_ps(c[0][j]), r1 = _mm_loadu_ps(c[1][j]), r2 = _mm_loadu_ps(c[2][j]),
           r3 = _mm_loadu_ps(c[3][j]);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* r_i: column i of the four lanes */
    const __m256d col[4] = {_mm256_cvtps_pd(r0), _mm256_cvtps_pd(r1), _mm256_cvtps_pd(r2), _mm256_cvtps_pd(r3)};
    __m256d r = _mm256_setzero_pd(), rd = _mm256_setzero_pd();
    for (int i = 0; i < 4; i++) {
      r = _mm256_add_pd(r, _mm256_mul_pd(wx[i], col[i]));
      rd = _mm256_add_pd(rd, _mm256_mul_pd(dx[i], col[i]));
    }
    sv = _mm256_add_pd(sv, _mm256_mul_pd(wy[j], r));
    svx = _mm256_add_pd(svx, _mm256_mul_pd(wy[j], rd));
    svy = _mm256_add_pd(svy, _mm256_mul_pd(dy[j], r));
  }
  *v = sv, *vx = svx, *vy = svy;
}

/* The per-sample part of up to four samples at lattice (ix[l], iy[l]):
 * lanes past `count` and samples that do not count get ok = false. */
LANES_TARGET static void lane_group(const accel__reg_cell_in *e, const double cpx[16], const double cpy[16], int64_t cx,
                                    int64_t cy, const int64_t ix[4], const int64_t iy[4], int count, lane_out *o) {
  const accel__reg_geom *g = e->g;
  const double f = g->factor, off = g->offset, inv_f = 1.0 / f;
  const double isx = 1.0 / g->xf.spacing[0], isy = 1.0 / g->xf.spacing[1];
  double qxs[4], qys[4];
  o->fixed = o->inside = 0;
  for (int l = 0; l < 4; l++) {
    const int m = l < count ? l : 0;
    qxs[l] = f * (double)ix[m] + off, qys[l] = f * (double)iy[m] + off;
    double fv = 0;
    const int where = l < count ? accel__reg_fixed_at(e, ix[m], iy[m], qxs[l], qys[l], &fv) : ACCEL__REG_FIXED_OUT;
    o->ok[l] = where == ACCEL__REG_FIXED_IN;
    o->fv[l] = fv;
    o->fixed += o->ok[l];
    o->inside += where != ACCEL__REG_FIXED_OUT;
  }
  const __m256d qx = _mm256_loadu_pd(qxs), qy = _mm256_loadu_pd(qys);
  __m256d wx[4], wy[4];
  lane_weights(
      lane_frac01(_mm256_sub_pd(_mm256_mul_pd(_mm256_sub_pd(qx, _mm256_set1_pd(g->xf.origin[0])), _mm256_set1_pd(isx)),
                                _mm256_set1_pd((double)(cx + 1)))),
      wx);
  lane_weights(
      lane_frac01(_mm256_sub_pd(_mm256_mul_pd(_mm256_sub_pd(qy, _mm256_set1_pd(g->xf.origin[1])), _mm256_set1_pd(isy)),
                                _mm256_set1_pd((double)(cy + 1)))),
      wy);
  __m256d ux = _mm256_setzero_pd(), uy = _mm256_setzero_pd();
  for (int j = 0; j < 4; j++) {
    __m256d r[4]; /* weights j * 4 + i, a lane each */
    for (int i = 0; i < 4; i++) {
      const __m256d w = r[i] = _mm256_mul_pd(wy[j], wx[i]);
      ux = _mm256_add_pd(ux, _mm256_mul_pd(w, _mm256_set1_pd(cpx[j * 4 + i])));
      uy = _mm256_add_pd(uy, _mm256_mul_pd(w, _mm256_set1_pd(cpy[j * 4 + i])));
    }
    /* transposed: lane l's weights j * 4 .. j * 4 + 3 side by side */
    const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    _mm256_storeu_pd(o->w[0] + j * 4, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(o->w[1] + j * 4, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(o->w[2] + j * 4, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(o->w[3] + j * 4, _mm256_permute2f128_pd(t1, t3, 0x31));
  }
  if (e->base.params) { /* the initial B-spline part, added after the level's own */
    double bx[4], by[4];
    for (int l = 0; l < 4; l++) accel__reg_bspline_at(&e->base, qxs[l], qys[l], &bx[l], &by[l]);
    ux = _mm256_add_pd(ux, _mm256_loadu_pd(bx));
    uy = _mm256_add_pd(uy, _mm256_loadu_pd(by));
  }
  _mm256_storeu_pd(o->ux, ux);
  _mm256_storeu_pd(o->uy, uy);
  const __m256d vf = _mm256_set1_pd(inv_f), voff = _mm256_set1_pd(off);
  __m256d mx = _mm256_mul_pd(_mm256_sub_pd(_mm256_add_pd(qx, ux), voff), vf);
  __m256d my = _mm256_mul_pd(_mm256_sub_pd(_mm256_add_pd(qy, uy), voff), vf);
  double mxs[4], mys[4];
  _mm256_storeu_pd(mxs, mx);
  _mm256_storeu_pd(mys, my);
  bool far = false;
  for (int l = 0; l < 4; l++) {
    if (accel__reg_moving_far(mxs[l], mys[l])) o->ok[l] = false, far = true, mxs[l] = mys[l] = 0;
    if (!g->keep_outside &&
        !(mxs[l] >= 0 && mxs[l] <= (double)(g->mw - 1) && mys[l] >= 0 && mys[l] <= (double)(g->mh - 1)))
      o->ok[l] = false;
  }
  if (far) /* such lanes do not count; their positions are only read */
    mx = _mm256_loadu_pd(mxs), my = _mm256_loadu_pd(mys);
  __m256d v, vx, vy;
  lane_cubic(e, mx, my, &v, &vx, &vy);
  _mm256_storeu_pd(o->mv, v);
  _mm256_storeu_pd(o->gx, _mm256_mul_pd(vx, vf));
  _mm256_storeu_pd(o->gy, _mm256_mul_pd(vy, vf));
}

/* The Gauss-Newton terms of up to NORMAL_BATCH samples, kept until they
 * are added to a cell's block (normal_flush): each sample's 16 weights and
 * its 3 gradient products, in float, in sample order. */
enum { NORMAL_BATCH = 32 };
typedef struct normal_batch {
  float w[NORMAL_BATCH][16];
  float G[NORMAL_BATCH][3];
  int n;
} normal_batch;

/* Add the batch's terms to the block: every entry L[m][t][u] (t <= u, as
 * accel__reg_cell_L reads) receives (w_t G_m) w_u of each sample in sample
 * order, the operations of accel__reg_cell_add, so its sums are the
 * scalar code's to the bit. Rows are taken a few at a time with all three
 * blocks m in registers, so that a sample's weights are loaded once and
 * the rows are read and written once a batch instead of once a sample. */
LANES_TARGET static void normal_flush(accel__reg_cell_acc *a, normal_batch *b) {
  for (int t0 = 0; t0 < 8; t0 += 2) { /* rows 0..7: both halves */
    __m256 acc[3][2][2];
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 2; i++)
        acc[m][i][0] = _mm256_loadu_ps(a->L[m][t0 + i]), acc[m][i][1] = _mm256_loadu_ps(a->L[m][t0 + i] + 8);
    for (int k = 0; k < b->n; k++) {
      const __m256 lo = _mm256_loadu_ps(b->w[k]), hi = _mm256_loadu_ps(b->w[k] + 8);
      for (int m = 0; m < 3; m++)
        for (int i = 0; i < 2; i++) {
          const __m256 at = _mm256_set1_ps(b->w[k][t0 + i] * b->G[k][m]);
          acc[m][i][0] = _mm256_add_ps(acc[m][i][0], _mm256_mul_ps(at, lo));
          acc[m][i][1] = _mm256_add_ps(acc[m][i][1], _mm256_mul_ps(at, hi));
        }
    }
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 2; i++)
        _mm256_storeu_ps(a->L[m][t0 + i], acc[m][i][0]), _mm256_storeu_ps(a->L[m][t0 + i] + 8, acc[m][i][1]);
  }
  for (int t0 = 8; t0 < 16; t0 += 4) { /* rows 8..15: columns 8..15 only */
    __m256 acc[3][4];
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 4; i++) acc[m][i] = _mm256_loadu_ps(a->L[m][t0 + i] + 8);
    for (int k = 0; k < b->n; k++) {
      const __m256 hi = _mm256_loadu_ps(b->w[k] + 8);
      for (int m = 0; m < 3; m++)
        for (int i = 0; i < 4; i++)
          acc[m][i] = _mm256_add_ps(acc[m][i], _mm256_mul_ps(_mm256_set1_ps(b->w[k][t0 + i] * b->G[k][m]), hi));
    }
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 4; i++) _mm256_storeu_ps(a->L[m][t0 + i] + 8, acc[m][i]);
  }
  b->n = 0;
}

/* One MSE sample's terms (accel__reg_cell_add with ncc false): the metric
 * and gradient here, the Gauss-Newton terms into the batch. */
LANES_TARGET static void lane_add_mse(accel__reg_cell_acc *a, normal_batch *nb, double fv, double mv, double gx,
                                      double gy, const double w[16], bool grad, bool normal) {
  a->s[ACCEL__REG_SUMS - 1] += 1;
  a->s[0] += (mv - fv) * (mv - fv);
  if (grad) {
    const double ca = mv - fv;
    const __m256d cgx = _mm256_set1_pd(ca * gx), cgy = _mm256_set1_pd(ca * gy);
    for (int t = 0; t < 16; t += 4) {
      const __m256d wt = _mm256_loadu_pd(w + t);
      _mm256_storeu_pd(a->ga[0] + t, _mm256_add_pd(_mm256_loadu_pd(a->ga[0] + t), _mm256_mul_pd(cgx, wt)));
      _mm256_storeu_pd(a->ga[1] + t, _mm256_add_pd(_mm256_loadu_pd(a->ga[1] + t), _mm256_mul_pd(cgy, wt)));
    }
  }
  if (!normal) return;
  a->s[ACCEL__REG_SUM_NORMAL] += 1;
  float *wf = nb->w[nb->n], *G = nb->G[nb->n];
  for (int t = 0; t < 16; t++) wf[t] = (float)w[t];
  G[0] = (float)(gx * gx), G[1] = (float)(gx * gy), G[2] = (float)(gy * gy);
  if (++nb->n == NORMAL_BATCH) normal_flush(a, nb);
}

LANES_TARGET static void cell_eval_lanes(const accel__reg_cell_in *e, const double *params, int64_t cx, int64_t cy,
                                         double density, uint64_t stream, bool grad, bool normal,
                                         accel__reg_cell_acc *a) {
  const accel__reg_geom *g = e->g;
  const int64_t nx = g->xf.nx, n = nx * g->xf.ny;
  const int64_t P = (g->ax.first[cx + 1] - g->ax.first[cx]) * (g->ay.first[cy + 1] - g->ay.first[cy]);
  const int64_t ns = accel__reg_cell_samples(P, density);
  const bool ncc = g->metric == ACCEL_REG_METRIC_NCC;
  double cpx[16], cpy[16];
  for (int t = 0; t < 16; t++) {
    const int64_t node = (cy + t / 4) * nx + cx + t % 4;
    cpx[t] = params[node], cpy[t] = params[n + node];
  }
  const int64_t every = grad && normal ? g->normal_every : 1;
  const uint64_t key = accel__reg_cell_key(g->seed, g->level, stream, cy * g->ax.cells + cx);
  enum { RING = 16 }; /* the group being evaluated and the next ACCEL__REG_AHEAD samples */
  int64_t ring[RING][2];
  double ux = cpx[5], uy = cpy[5]; /* the prefetches' guess of the displacement */
  for (int64_t k = 0; k < ns && k < 4 + ACCEL__REG_AHEAD; k++) {
    accel__reg_sample_key(&g->ax, &g->ay, cx, cy, k, ns, density, key, &ring[k % RING][0], &ring[k % RING][1]);
    accel__reg_cell_prefetch(e, ring[k % RING][0], ring[k % RING][1], ux, uy);
  }
  lane_out o;
  normal_batch nb;
  nb.n = 0;
  for (int64_t k0 = 0; k0 < ns; k0 += 4) {
    const int count = ns - k0 < 4 ? (int)(ns - k0) : 4;
    int64_t ix[4] = {0}, iy[4] = {0};
    for (int l = 0; l < count; l++) ix[l] = ring[(k0 + l) % RING][0], iy[l] = ring[(k0 + l) % RING][1];
    for (int64_t k = k0 + 4 + ACCEL__REG_AHEAD; k < ns && k < k0 + 8 + ACCEL__REG_AHEAD; k++) {
      accel__reg_sample_key(&g->ax, &g->ay, cx, cy, k, ns, density, key, &ring[k % RING][0], &ring[k % RING][1]);
      accel__reg_cell_prefetch(e, ring[k % RING][0], ring[k % RING][1], ux, uy);
    }
    lane_group(e, cpx, cpy, cx, cy, ix, iy, count, &o);
    a->s[ACCEL__REG_SUM_FIXED] += o.fixed;
    a->s[ACCEL__REG_SUM_INSIDE] += o.inside;
    for (int l = 0; l < count; l++) {
      if (!o.ok[l]) continue;
      const double *w = o.w[l];
      const bool nl = normal && (k0 + l) % every == 0;
      if (ncc) accel__reg_cell_add(a, true, o.fv[l], o.mv[l], o.gx[l], o.gy[l], w, grad, nl);
      else lane_add_mse(a, &nb, o.fv[l], o.mv[l], o.gx[l], o.gy[l], w, grad, nl);
    }
    ux = o.ux[count - 1], uy = o.uy[count - 1];
  }
  if (nb.n) normal_flush(a, &nb);
}

bool accel__reg_have_avx2(void) {
  static int cached = -1;
  if (cached < 0) cached = __builtin_cpu_supports("avx2") ? 1 : 0;
  return cached == 1;
}

bool accel__reg_cell_eval_lanes(const accel__reg_cell_in *e, const double *params, int64_t cx, int64_t cy,
                                double density, uint64_t stream, bool grad, bool normal, accel__reg_cell_acc *a) {
  if (accel__reg_lanes_off || !accel__reg_have_avx2()) return false;
  cell_eval_lanes(e, params, cx, cy, density, stream, grad, normal, a);
  return true;
}

#else

bool accel__reg_have_avx2(void) { return false; }

bool accel__reg_cell_eval_lanes(const accel__reg_cell_in *e, const double *params, int64_t cx, int64_t cy,
                                double density, uint64_t stream, bool grad, bool normal, accel__reg_cell_acc *a) {
  (void)e, (void)params, (void)cx, (void)cy, (void)density, (void)stream, (void)grad, (void)normal, (void)a;
  return false;
}

#endif

bool accel__reg_lanes_off = false;
