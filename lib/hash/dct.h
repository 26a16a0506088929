/*
 * lib/hash/dct.h - scipy.fftpack.dct (type II, norm None) bit for bit, for
 * power-of-two lengths (internal; C and CUDA).
 *
 * scipy computes the DCT-II with pocketfft: a real backward FFT (radix-4
 * passes, one radix-2 pass first when the length is 2 * 4^k) between pre-
 * and post-processing steps, with twiddle factors built by pocketfft's
 * sincos_2pibyn (the angle pi / (4n) rounded from x87 long double, cos/sin of
 * multiples of it, and products of two table entries, so several twiddles are
 * one ulp away from the correctly rounded cosine). On flat images many DCT
 * coefficients are exactly 0 in scipy and +-1e-12 in a direct sum, which
 * decides phash bits at the median; so phash needs the same algorithm and
 * the same twiddles, evaluated without fused multiply-adds. The plan holds
 * the twiddles (built on the host); accel__dct2 runs on host and device.
 */
#ifndef ACCEL_HASH_DCT_H
#define ACCEL_HASH_DCT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ACCEL__DCT_HD static inline __host__ __device__
#else
#define ACCEL__DCT_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { ACCEL__DCT_MAX = 256, ACCEL__DCT_MAX_FACTORS = 8, ACCEL__DCT_MAX_TW = 512 };

typedef struct accel__dct_plan {
  int n;
  int nfact;
  int fact[ACCEL__DCT_MAX_FACTORS];   /* radices in the order the backward FFT applies them */
  int tw_off[ACCEL__DCT_MAX_FACTORS]; /* each factor's twiddles in tw[] */
  double tw[ACCEL__DCT_MAX_TW];
  double dct_tw[ACCEL__DCT_MAX]; /* post-processing twiddles */
} accel__dct_plan;

/* False unless n is a power of two in 2..ACCEL__DCT_MAX. */
bool accel__dct_plan_init(accel__dct_plan *plan, int n);

#ifdef __cplusplus
}
#endif

/* pocketfft's radix-2 backward pass. */
ACCEL__DCT_HD void accel__radb2(int ido, int l1, const double *cc, double *ch, const double *wa) {
#define CC(a, b, c) cc[(a) + ido * ((b) + 2 * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define WA(x, i) wa[(i) + (x) * (ido - 1)]
  for (int k = 0; k < l1; k++) {
    CH(0, k, 0) = CC(0, 0, k) + CC(ido - 1, 1, k);
    CH(0, k, 1) = CC(0, 0, k) - CC(ido - 1, 1, k);
  }
  if ((ido & 1) == 0)
    for (int k = 0; k < l1; k++) {
      CH(ido - 1, k, 0) = 2.0 * CC(ido - 1, 0, k);
      CH(ido - 1, k, 1) = -2.0 * CC(0, 1, k);
    }
  if (ido <= 2) return;
  for (int k = 0; k < l1; k++)
    for (int i = 2; i < ido; i += 2) {
      const int ic = ido - i;
      CH(i - 1, k, 0) = CC(i - 1, 0, k) + CC(ic - 1, 1, k);
      const double tr2 = CC(i - 1, 0, k) - CC(ic - 1, 1, k);
      const double ti2 = CC(i, 0, k) + CC(ic, 1, k);
      CH(i, k, 0) = CC(i, 0, k) - CC(ic, 1, k);
      CH(i, k, 1) = WA(0, i - 2) * ti2 + WA(0, i - 1) * tr2;
      CH(i - 1, k, 1) = WA(0, i - 2) * tr2 - WA(0, i - 1) * ti2;
    }
#undef CC
#undef CH
#undef WA
}

/* pocketfft's radix-4 backward pass. */
ACCEL__DCT_HD void accel__radb4(int ido, int l1, const double *cc, double *ch, const double *wa) {
  const double sqrt2 = 1.4142135623730951;
#define CC(a, b, c) cc[(a) + ido * ((b) + 4 * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define WA(x, i) wa[(i) + (x) * (ido - 1)]
  for (int k = 0; k < l1; k++) {
    const double tr2 = CC(0, 0, k) + CC(ido - 1, 3, k), tr1 = CC(0, 0, k) - CC(ido - 1, 3, k);
    const double tr3 = 2.0 * CC(ido - 1, 1, k), tr4 = 2.0 * CC(0, 2, k);
    CH(0, k, 0) = tr2 + tr3;
    CH(0, k, 2) = tr2 - tr3;
    CH(0, k, 3) = tr1 + tr4;
    CH(0, k, 1) = tr1 - tr4;
  }
  if ((ido & 1) == 0)
    for (int k = 0; k < l1; k++) {
      const double ti1 = CC(0, 3, k) + CC(0, 1, k), ti2 = CC(0, 3, k) - CC(0, 1, k);
      const double tr2 = CC(ido - 1, 0, k) + CC(ido - 1, 2, k), tr1 = CC(ido - 1, 0, k) - CC(ido - 1, 2, k);
      CH(ido - 1, k, 0) = tr2 + tr2;
      CH(ido - 1, k, 1) = sqrt2 * (tr1 - ti1);
      CH(ido - 1, k, 2) = ti2 + ti2;
      CH(ido - 1, k, 3) = -sqrt2 * (tr1 + ti1);
    }
  if (ido <= 2) return;
  for (int k = 0; k < l1; k++)
    for (int i = 2; i < ido; i += 2) {
      const int ic = ido - i;
      const double tr2 = CC(i - 1, 0, k) + CC(ic - 1, 3, k), tr1 = CC(i - 1, 0, k) - CC(ic - 1, 3, k);
      const double ti1 = CC(i, 0, k) + CC(ic, 3, k), ti2 = CC(i, 0, k) - CC(ic, 3, k);
      const double tr4 = CC(i, 2, k) + CC(ic, 1, k), ti3 = CC(i, 2, k) - CC(ic, 1, k);
      const double tr3 = CC(i - 1, 2, k) + CC(ic - 1, 1, k), ti4 = CC(i - 1, 2, k) - CC(ic - 1, 1, k);
      CH(i - 1, k, 0) = tr2 + tr3;
      const double cr3 = tr2 - tr3;
      CH(i, k, 0) = ti2 + ti3;
      const double ci3 = ti2 - ti3;
      const double cr4 = tr1 + tr4, cr2 = tr1 - tr4;
      const double ci2 = ti1 + ti4, ci4 = ti1 - ti4;
      CH(i, k, 1) = WA(0, i - 2) * ci2 + WA(0, i - 1) * cr2;
      CH(i - 1, k, 1) = WA(0, i - 2) * cr2 - WA(0, i - 1) * ci2;
      CH(i, k, 2) = WA(1, i - 2) * ci3 + WA(1, i - 1) * cr3;
      CH(i - 1, k, 2) = WA(1, i - 2) * cr3 - WA(1, i - 1) * ci3;
      CH(i, k, 3) = WA(2, i - 2) * ci4 + WA(2, i - 1) * cr4;
      CH(i - 1, k, 3) = WA(2, i - 2) * cr4 - WA(2, i - 1) * ci4;
    }
#undef CC
#undef CH
#undef WA
}

/* DCT-II of c[0..n) in place (scratch: n doubles), as scipy.fftpack.dct. */
ACCEL__DCT_HD void accel__dct2(const accel__dct_plan *p, double *c, double *scratch) {
  const int n = p->n;
  c[0] *= 2.0;
  if ((n & 1) == 0) c[n - 1] *= 2.0;
  for (int k = 1; k < n - 1; k += 2) {
    const double t = c[k + 1];
    c[k + 1] = t - c[k];
    c[k] = c[k] + t;
  }
  /* the real backward FFT, passes ping-ponging between c and scratch */
  double *p1 = c, *p2 = scratch;
  int l1 = 1;
  for (int f = 0; f < p->nfact; f++) {
    const int ip = p->fact[f], ido = n / (ip * l1);
    if (ip == 4) accel__radb4(ido, l1, p1, p2, p->tw + p->tw_off[f]);
    else accel__radb2(ido, l1, p1, p2, p->tw + p->tw_off[f]);
    double *t = p1;
    p1 = p2;
    p2 = t;
    l1 *= ip;
  }
  if (p1 != c)
    for (int i = 0; i < n; i++) c[i] = p1[i];
  const int ns2 = (n + 1) / 2;
  for (int k = 1, kc = n - 1; k < ns2; k++, kc--) {
    const double t1 = p->dct_tw[k - 1] * c[kc] + p->dct_tw[kc - 1] * c[k];
    const double t2 = p->dct_tw[k - 1] * c[k] - p->dct_tw[kc - 1] * c[kc];
    c[k] = 0.5 * (t1 + t2);
    c[kc] = 0.5 * (t1 - t2);
  }
  if ((n & 1) == 0) c[ns2] *= p->dct_tw[ns2 - 1];
}

#endif /* ACCEL_HASH_DCT_H */
