/*
 * lib/reg/prealign.h - the coarse pre-alignment of a registration by FFT
 * phase correlation (internal; C and CUDA C++).
 *
 * Translation: phase correlation (Kuglin & Hines 1975): the normalised
 * cross-power spectrum conj(F) G / |conj(F) G| of the windowed (Hann) images
 * is a pure phase ramp whose inverse transform peaks at the shift. Here the
 * spectrum is also multiplied by a Gaussian exp(-2 pi^2 sigma^2 |f|^2), so
 * that the peak is a sampled Gaussian of sigma pixels, whose sub-pixel
 * position a three-point fit of log values finds exactly.
 *
 * Rotation: the Fourier-Mellin method (Reddy & Chatterji 1996): the
 * magnitude spectra do not depend on translation and turn with the image;
 * resampled on a polar grid (angle over [0, pi), log radius), a rotation is a
 * circular shift along the angle, found by phase correlation as above. The
 * magnitude is pi-periodic, so both the angle and the angle + pi are tried
 * (the one whose translation correlation peaks higher wins). The estimate
 * is then refined: the moving image is resampled through the transform
 * found so far and the residual rotation and translation measured again,
 * which removes the bias of the window (a residual near 0 is measured
 * without it).
 *
 * Conventions (elastix's): T(q) = R(angle) (q - c) + c + t maps FIXED points
 * into the MOVING image, R(a) = [cos a, -sin a; sin a, cos a] on (x, y) =
 * (column, row). Level pixel q stands for the full-resolution point factor *
 * q + offset, so the level's rigid transform is the full resolution's with
 * the same angle, the centre mapped, and t scaled by factor.
 *
 * The algorithm (prealign.c) drives an engine that holds the images and the
 * spectra: the CPU's (kissfft) or the GPU's (kernels/reg_prealign.cu, cuFFT).
 * Both run the per-element code below, so they differ in their FFTs and,
 * on a device, in the last bits of cos, sin, exp, pow and log1p (CUDA's
 * math library, not glibc's: within an ulp or two): the shift and angle
 * they find agree to far below a pixel, not to the bit.
 */
#ifndef ACCEL_REG_PREALIGN_H
#define ACCEL_REG_PREALIGN_H

#include "reg/bspline.h"
#include "reg/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- the entry point */

/* Pre-align two level images (F32, contiguous, fw x fh and mw x mh; level
 * pixel q stands for the full-resolution point factor * q + offset):
 * mode 1 finds a translation, mode 2 a rotation and a translation. `centre`
 * is the centre of rotation in FULL-resolution pixels (the caller passes
 * the fixed image's centre, ((W - 1) / 2, (H - 1) / 2), which it also gives
 * accel_reg_transform_set_initial). On success params = (angle in radians,
 * tx, ty) in full-resolution pixels, elastix's EulerTransform parameters
 * about `centre` (angle 0 in mode 1: params + 1 are the TranslationTransform's).
 * Runs the stage "reg.prealign" through the dispatcher (CPU: kissfft; CUDA:
 * cuFFT). `func` names the public function in messages.
 *
 * Errors (recorded as "<func>: ..."): ACCEL_ERR_INVALID_ARG for NULL
 * pointers, sizes < 2, a factor < 1, an offset < 0, a mode other than 1 or
 * 2, a non-finite centre, an image with a non-finite value or without
 * contrast (constant: nothing to correlate); ACCEL_ERR_UNSUPPORTED when the
 * library was built without kissfft and no GPU took the stage;
 * ACCEL_ERR_OUT_OF_MEMORY; under ACCEL_FALLBACK_DENY the GPU's failure.
 * Thread-safe (no shared state). */
accel_status accel__reg_prealign(accel_ctx *ctx, const char *func, const float *fixed, int64_t fw, int64_t fh,
                                 const float *moving, int64_t mw, int64_t mh, int32_t factor, int32_t offset,
                                 int32_t mode, const double centre[2], double params[3]);

/* The ops of the stage "reg.prealign" (accel__cpu_reg_ops, accel__cuda_reg_ops). */
accel_status accel__reg_cpu_prealign(accel__call *call, accel__reg_prealign_job *job);  /* prealign.c */
accel_status accel__reg_cuda_prealign(accel__call *call, accel__reg_prealign_job *job); /* kernels/reg_prealign.cu */

/* ---------------------------------------------------------------- the plan */

enum {
  ACCEL__REG_PA_CAP = 512,    /* the analysis grid's longest side, at most (level pixels are averaged in blocks) */
  ACCEL__REG_PA_ANGLES = 512, /* log-polar rows: angles over [0, pi) */
  ACCEL__REG_PA_RADII = 64    /* log-polar columns: log-spaced radii */
};

/* The sizes of one pre-alignment, the same for every engine. */
typedef struct accel__reg_pa_plan {
  int64_t fw, fh, mw, mh; /* the level images */
  int32_t block;          /* level pixels per analysis pixel, each way (averaged) */
  int32_t gw, gh;         /* the analysis grid over the fixed image: ceil(fw / block) x ceil(fh / block) */
  int32_t rows, cols;     /* the image FFTs: powers of two >= gh, gw (and >= 16) */
  int32_t nt, nr;         /* the log-polar FFTs: ACCEL__REG_PA_ANGLES x ACCEL__REG_PA_RADII */
  double rmin, rmax;      /* the log-polar radii, cycles per analysis pixel */
  double fmean, mmean;    /* the images' means (the value outside an image) */
  double lscale;          /* 1 / (the fixed image's standard deviation * sqrt(gw gh)): |S| of order 1 */
  double sigma;           /* the correlation peak's width, pixels of its grid */
} accel__reg_pa_plan;

/* Where an analysis pixel's block samples an image: level point (x, y) of
 * the fixed grid is read at (a0 x + a1 y + a2, a3 x + a4 y + a5). */
typedef struct accel__reg_pa_map {
  double a[6];
} accel__reg_pa_map;

/* The engine's spectra: complex, interleaved (re, im), rows x (cols / 2 + 1)
 * (the FFTs' half spectra, cuFFT's and kissfft's layout). Slots 0 and 1 are
 * image spectra (plan rows x cols), 2 and 3 log-polar ones (nt x nr). */
enum { ACCEL__REG_PA_FIXED = 0, ACCEL__REG_PA_MOVING = 1, ACCEL__REG_PA_LP_FIXED = 2, ACCEL__REG_PA_LP_MOVING = 3 };

/* What an engine does for the algorithm; each returns a status with the
 * reason in why on failure. */
typedef struct accel__reg_pa_engine {
  void *self;
  /* Slot (0 or 1) = the spectrum of the fixed (src 0) or moving (src 1)
   * image sampled through map, analysis pixels (accel__reg_pa_pixel). */
  accel_status (*spectrum)(void *self, int slot, int src, const accel__reg_pa_map *map, char *why);
  /* Slot 2 or 3 = the spectrum of the log-polar image of slot 0 or 1. */
  accel_status (*logpolar)(void *self, int slot, int from, char *why);
  /* out (host, rows x cols of the slots' grid) = the phase correlation of
   * slots a and b (0 and 1, or 2 and 3). */
  accel_status (*correlate)(void *self, int a, int b, float *out, char *why);
} accel__reg_pa_engine;

/* The plan of a job (never fails: the job is checked). */
void accel__reg_pa_plan_for(const accel__reg_prealign_job *job, accel__reg_pa_plan *plan);

/* The algorithm on an engine: job->result. */
accel_status accel__reg_pa_run(const accel__reg_pa_plan *plan, const accel__reg_pa_engine *e,
                               accel__reg_prealign_job *job, char *why);

/* ---------------------------------------------------------------- host FFTs */

/* A real 2-D FFT of rows x cols (even cols) by kissfft: forward (real to
 * half spectrum) and inverse (unnormalised, half spectrum to real). Used by
 * the CPU engine and by the GPU engine in host emulation (tests). Without
 * kissfft in the build, new fails with ACCEL_ERR_UNSUPPORTED. Not
 * thread-safe per plan (kissfft keeps scratch in it). */
typedef struct accel__reg_fft accel__reg_fft;
accel_status accel__reg_fft_new(int32_t rows, int32_t cols, accel__reg_fft **out, char *why);
void accel__reg_fft_forward(accel__reg_fft *f, const float *in, float *out);
void accel__reg_fft_inverse(accel__reg_fft *f, const float *in, float *out);
void accel__reg_fft_free(accel__reg_fft *f);

/* ---------------------------------------------------------------- per element (host and device) */

/* Keys' cubic convolution weights (a = -0.5, Catmull-Rom) of the four
 * samples around a point at fraction f past the second. Its phase error is
 * far below linear interpolation's, which would pull sub-pixel shifts. */
ACCEL__REG_HD void accel__reg_pa_keys(double f, double *w) {
  const double f2 = f * f, f3 = f2 * f;
  w[0] = -0.5 * f3 + f2 - 0.5 * f;
  w[1] = 1.5 * f3 - 2.5 * f2 + 1.0;
  w[2] = -1.5 * f3 + 2.0 * f2 + 0.5 * f;
  w[3] = 0.5 * f3 - 0.5 * f2;
}

/* Cubic-convolution value of img (w x h) at (x, y), the edge pixels repeated
 * beyond the edges; `fill` outside [0, w-1] x [0, h-1]. */
ACCEL__REG_HD double accel__reg_pa_sample(const float *img, int64_t w, int64_t h, double x, double y, double fill) {
  if (!(x >= 0.0 && y >= 0.0 && x <= (double)(w - 1) && y <= (double)(h - 1))) return fill;
  const int64_t x0 = (int64_t)x, y0 = (int64_t)y;
  if ((double)x0 == x && (double)y0 == y) return (double)img[y0 * w + x0]; /* a pixel itself */
  double wx[4], wy[4];
  accel__reg_pa_keys(x - (double)x0, wx);
  accel__reg_pa_keys(y - (double)y0, wy);
  double acc = 0.0;
  for (int i = 0; i < 4; i++) {
    int64_t r = y0 - 1 + i;
    r = r < 0 ? 0 : r >= h ? h - 1 : r;
    double row = 0.0;
    for (int j = 0; j < 4; j++) {
      int64_t c = x0 - 1 + j;
      c = c < 0 ? 0 : c >= w ? w - 1 : c;
      row += wx[j] * (double)img[r * w + c];
    }
    acc += wy[i] * row;
  }
  return acc;
}

/* The periodic Hann window's value at sample i of n (centred samples). */
ACCEL__REG_HD double accel__reg_pa_hann(int64_t i, int64_t n) {
  return 0.5 - 0.5 * cos(2.0 * 3.14159265358979323846 * ((double)i + 0.5) / (double)n);
}

/* Analysis pixel (r, c) of the padded rows x cols input of an image FFT:
 * the mean over its block of level pixels (block x block from (c block,
 * r block) of the fixed grid) of the image read through map from img (w x
 * h; `mean` outside it), minus `mean`, times the Hann window of the gh x gw
 * grid; 0 in the padding. Blocks over 4 pixels a side are sampled at 4 x 4
 * evenly spread points (a level that large is a smoothed full-size image). */
ACCEL__REG_HD float accel__reg_pa_pixel(const accel__reg_pa_plan *p, const float *img, int64_t w, int64_t h,
                                        const accel__reg_pa_map *m, double mean, int64_t r, int64_t c) {
  if (r >= p->gh || c >= p->gw) return 0.0f;
  const int64_t k = p->block, ns = k < 4 ? k : 4;
  const double step = (double)k / (double)ns;
  double sum = 0.0;
  for (int64_t i = 0; i < ns; i++)
    for (int64_t j = 0; j < ns; j++) {
      const double x = (double)(c * k) + ((double)j + 0.5) * step - 0.5;
      const double y = (double)(r * k) + ((double)i + 0.5) * step - 0.5;
      sum += accel__reg_pa_sample(img, w, h, m->a[0] * x + m->a[1] * y + m->a[2], m->a[3] * x + m->a[4] * y + m->a[5],
                                  mean);
    }
  return (float)((sum / (double)(ns * ns) - mean) * accel__reg_pa_hann(r, p->gh) * accel__reg_pa_hann(c, p->gw));
}

/* The signed frequency of bin i of n, cycles per sample. */
ACCEL__REG_HD double accel__reg_pa_freq(int64_t i, int64_t n) { return (double)(2 * i <= n ? i : i - n) / (double)n; }

/* Bin (r, c) of the normalised cross-power spectrum conj(a) b of two half
 * spectra (rows x (cols / 2 + 1)), tapered by the Gaussian of a peak of
 * sigma pixels, scaled by 1 / (rows cols) (the inverse FFT's normalisation):
 * out[0], out[1]. 0 where the product vanishes. */
ACCEL__REG_HD void accel__reg_pa_cross(const float *a, const float *b, int64_t rows, int64_t cols, double sigma,
                                       int64_t r, int64_t c, float *out) {
  const int64_t i = 2 * (r * (cols / 2 + 1) + c);
  const double ar = a[i], ai = a[i + 1], br = b[i], bi = b[i + 1];
  const double re = ar * br + ai * bi, im = ar * bi - ai * br, mag = sqrt(re * re + im * im);
  if (!(mag > 1e-30)) {
    out[0] = out[1] = 0.0f;
    return;
  }
  const double fr = accel__reg_pa_freq(r, rows), fc = (double)c / (double)cols, pi = 3.14159265358979323846;
  const double g = exp(-2.0 * pi * pi * sigma * sigma * (fr * fr + fc * fc)) / ((double)rows * (double)cols);
  out[0] = (float)(re / mag * g);
  out[1] = (float)(im / mag * g);
}

/* The magnitude of half spectrum s (rows x (cols / 2 + 1)) at the signed
 * bin (v, u), u >= 0, v wrapping: |S| at the nearest stored bins, bilinear. */
ACCEL__REG_HD double accel__reg_pa_magnitude(const float *s, int64_t rows, int64_t cols, double v, double u) {
  const int64_t half = cols / 2 + 1;
  const int64_t u0 = (int64_t)floor(u), v0 = (int64_t)floor(v);
  const double fu = u - (double)u0, fv = v - (double)v0;
  double acc = 0.0;
  for (int dv = 0; dv < 2; dv++)
    for (int du = 0; du < 2; du++) {
      const int64_t uu = u0 + du < half ? u0 + du : half - 1;
      const int64_t vv = (((v0 + dv) % rows) + rows) % rows;
      const int64_t i = 2 * (vv * half + uu);
      const double wgt = (du ? fu : 1.0 - fu) * (dv ? fv : 1.0 - fv);
      acc += wgt * sqrt((double)s[i] * (double)s[i] + (double)s[i + 1] * (double)s[i + 1]);
    }
  return acc;
}

/* Log-polar pixel (t, j) (t: angle pi t / nt, j: radius rmin (rmax /
 * rmin)^(j / (nr - 1))) of the half spectrum s (plan rows x cols): log(1 +
 * lscale |S|) at that frequency (|S(-f)| = |S(f)| covers u < 0), high-passed by
 * (1 - cos(pi rho / rmax)) (low frequencies carry the window's and the
 * borders' spectrum, not the texture's), times a Hann window along the
 * radius (it is not periodic; the angle is). */
ACCEL__REG_HD float accel__reg_pa_logpolar(const accel__reg_pa_plan *p, const float *s, int64_t t, int64_t j) {
  const double pi = 3.14159265358979323846;
  const double phi = pi * (double)t / (double)p->nt;
  const double rho = p->rmin * pow(p->rmax / p->rmin, (double)j / (double)(p->nr - 1));
  double u = rho * cos(phi) * (double)p->cols, v = rho * sin(phi) * (double)p->rows;
  if (u < 0.0) {
    u = -u;
    v = -v;
  }
  const double mag = accel__reg_pa_magnitude(s, p->rows, p->cols, v, u);
  const double hp = 1.0 - cos(pi * rho / p->rmax);
  return (float)(log1p(mag * p->lscale) * hp * accel__reg_pa_hann(j, p->nr));
}

#ifdef __cplusplus
}
#endif

#endif
