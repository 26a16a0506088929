/*
 * lib/reg/level.h - one resolution level's optimisation, split into a
 * backend-neutral optimizer (level.c: Gauss-Newton and ASGD, early
 * stopping, progress, report) and a backend's evaluator of the metric
 * (cpu_level.c on the CPU; a device evaluator on a GPU), internal.
 *
 * The frame: the transform lives in full-resolution fixed-image coordinates
 * at every level. A level pixel i stands for the full-resolution point
 * factor * i + offset, in the fixed and in the moving image alike, so a
 * sample at level pixel i of the fixed image is the point p = factor * i +
 * offset, T(p) is a full-resolution moving point, and the moving level image
 * is read at (T(p) - offset) / factor (bilinear, with its gradient, which
 * is divided by factor to be per full-resolution pixel).
 *
 * The level's grid (geom.xf) is nested in the final grid: spacing
 * final * 2^(levels - 1 - level), nodes on final nodes, extended so that its
 * valid region covers the image and so that refinement to the next level
 * (the dyadic subdivision mask 1/8 [1 4 6 4 1] per axis) is exact.
 *
 * Node-block layout of the Gauss-Newton matrix ("normal"): node a = j nx + i
 * couples to the 7 x 7 nodes b = a + (dj nx + di), |di|, |dj| <= 3; entry
 * normal[(a * 49 + (dj + 3) * 7 + (di + 3)) * 3 + {0, 1, 2}] holds the 2 x 2
 * block between a's (x, y) parameters and b's: {xx, xy, yy} (symmetric:
 * the yx entry equals xy). Both (a, b) and (b, a) are stored; blocks to
 * nodes outside the grid are 0.
 *
 * The evaluator interface (one per backend):
 *
 *   eval(state, params, set, iteration, &value, count, grad, normal)
 *
 * evaluates the metric at `params` (2 n parameters, n = nx ny, the level
 * grid's layout: all x then all y) over the samples of `set`
 * (ACCEL__REG_SET_TRAIN and ACCEL__REG_SET_NORMAL: those of `iteration`,
 * or of iteration 0 without renewal; ACCEL__REG_SET_VALID: the fixed
 * validation set; ACCEL__REG_SET_EXACT: ASGD's estimation, those of
 * `iteration` always), drawn as sampler.h says, at accel__reg_density and
 * with accel__reg_stream. Iterations of the estimation's gradient
 * measurements are negative (-1 - i). It writes the metric's value (MSE: mean squared
 * difference; NCC: 1 - normalised correlation) and three counts: count[0]
 * the samples that counted, count[1] those in the fixed image and its mask
 * (count[1] - count[0] of them mapped outside the moving image, or
 * absurdly far from it, and did not count), count[2] those in the fixed
 * image, masked or not (the others the initial linear part maps off it);
 * when `grad` is not NULL, the metric's gradient with respect
 * to the parameters (2 n); when `normal` is not NULL, the Gauss-Newton
 * matrix (n * 49 * 3; MSE: (2 / N) sum J^T J, J the residual's Jacobian;
 * NCC: the same for the residual normalised by the moving samples'
 * deviation). With both `grad` and `normal` (Gauss-Newton's training
 * set), the matrix is formed from every g->normal_every-th sample of a
 * cell only (sampler.h's row-stratified order makes that a stratified
 * subset; where the cell draws every pixel, every k-th pixel in row order)
 * and scaled as if from all. Both are overwritten (not accumulated). Sums are formed
 * per cell in sample order and reduced in a fixed order, so results do not
 * depend on the number of threads. A failure returns a status and leaves
 * the reason in call->why.
 */
#ifndef ACCEL_REG_LEVEL_H
#define ACCEL_REG_LEVEL_H

#include "reg/ops.h"
#include "reg/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 7 x 7 neighbours, 3 values each. */
enum { ACCEL__REG_NB = 49, ACCEL__REG_NB3 = 147 };

/* Gauss-Newton's least numbers of training samples (metric and gradient)
 * and of the matrix's samples (a subset of the training samples) per grid
 * node. */
#define ACCEL__REG_GN_PER_NODE 192
/* Tests set this to have Gauss-Newton's products read the whole matrix
 * rather than its upper half (level.c), to compare. */
extern bool accel__reg_normal_full;

#define ACCEL__REG_GN_NORMAL_PER_NODE 48

/* The least validation samples of a level (all its pixels where it has
 * fewer): a step is taken when the objective on them falls, and with
 * fewer the sampling noise decides (the 1024^2 shared pair: 1000 of them
 * left 1.5% of the points over 0.5 px off, 5000 0.05%). */
#define ACCEL__REG_VALID_MIN 5000

/* A level's geometry, as the optimizer and every evaluator see it. */
typedef struct accel__reg_geom {
  accel__reg_xform xf;    /* the level grid and linear part; params = NULL (eval gets them) */
  double inv[4], invb[2]; /* L^-1: p = inv q + invb */
  bool identity;          /* L is the identity: samples lie on fixed pixels */
  int32_t factor, offset, level;
  int64_t fw, fh, mw, mh;       /* level image sizes */
  accel__reg_axis ax, ay;       /* the cells' lattice ranges (host memory); lattice index i is q = factor i + offset */
  int64_t candidates;           /* lattice points in all cells */
  int64_t train, valid, normal; /* samples per set (training and normal: per iteration) */
  double train_density, valid_density, normal_density;
  int64_t normal_every; /* Gauss-Newton: the matrix's terms from every normal_every-th training sample */
  double exact_density, jacobian_density; /* ASGD's parameter estimation */
  uint64_t seed;
  int renew;
  accel_reg_metric metric;
  double cap; /* Gauss-Newton's longest step of a node, full-resolution pixels */
  /* Samples whose T(p) falls outside the moving image: skipped (false, as
   * elastix does; ASGD) or read from its mirrored extension (Gauss-Newton:
   * otherwise a step can lower the metric by pushing badly matched samples
   * out of the image, and border nodes run off). */
  bool keep_outside;
} accel__reg_geom;

typedef struct accel__reg_evaluator {
  void *state;
  accel_status (*eval)(accel__call *call, void *state, const double *params, int set, int32_t iteration, double *value,
                       int64_t count[3], double *grad, double *normal);
} accel__reg_evaluator;

/* Fill `g` for a level job: the linear part's inverse, the cells and their
 * lattice ranges (allocated; accel__reg_geom_free), the sample densities
 * (Gauss-Newton: at least ACCEL__REG_GN_PER_NODE training samples per
 * node). ACCEL_ERR_OUT_OF_MEMORY with call->why. */
accel_status accel__reg_geom_init(accel__call *call, const accel__reg_level_job *job, accel__reg_geom *g);
void accel__reg_geom_free(accel__reg_geom *g);

/* The stream word of a set and iteration for accel__reg_hash. */
static inline uint64_t accel__reg_stream(const accel__reg_geom *g, int set, int32_t iteration) {
  const bool renew = set == ACCEL__REG_SET_EXACT || (set != ACCEL__REG_SET_VALID && g->renew);
  return ((uint64_t)set << 32) | (uint32_t)(renew ? iteration : 0);
}

/* The density of a set's samples among the candidates. */
static inline double accel__reg_density(const accel__reg_geom *g, int set) {
  return set == ACCEL__REG_SET_VALID    ? g->valid_density
         : set == ACCEL__REG_SET_NORMAL ? g->normal_density
                                        : g->train_density;
}

/* Run the optimizer of job->options on one level with an evaluator:
 * job->params in and out, job->report filled, the progress callback called
 * after every iteration (ACCEL_ERR_CANCELLED when it asks). */
accel_status accel__reg_optimize(accel__call *call, accel__reg_level_job *job, const accel__reg_geom *g,
                                 const accel__reg_evaluator *ev);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_REG_LEVEL_H */
