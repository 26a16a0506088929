/*
 * lib/hash/dct.h - scipy.fftpack.dct (type II, norm None) bit for bit, for
 * every length from 1 to ACCEL__DCT_MAX that pocketfft transforms without
 * Bluestein's algorithm (internal; C and CUDA).
 *
 * scipy (1.4 and later; checked against 1.17) computes the DCT-II with the C++
 * pocketfft: pre-processing, a real backward FFT, post-processing. The FFT
 * factors the length into 4s, then one 2 (applied first), then odd factors in
 * increasing order, and runs FFTPACK's backward pass of each factor: radix 2,
 * 3, 4 and 5 have their own passes, every larger factor the generic one
 * (radbg) with its own table of the factor's roots of unity. The twiddle
 * factors come from pocketfft's sincos_2pibyn (the angle pi / (4n) rounded
 * from x87 long double, cos/sin of multiples of it, and products of two table
 * entries, so several twiddles are one ulp away from the correctly rounded
 * cosine). On flat images, strips and stripes many DCT coefficients are
 * exactly 0 in scipy and +-1e-12 in a direct sum, which decides phash bits at
 * the median; so phash needs the same algorithm and the same twiddles,
 * evaluated in the same order without fused multiply-adds. The plan holds the
 * twiddles (built on the host); accel__dct2 runs on host and device.
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

/* MAX_TW bounds the FFT twiddles of every plannable length (checked when a plan is built). */
enum { ACCEL__DCT_MAX = 1024, ACCEL__DCT_MAX_FACTORS = 12, ACCEL__DCT_MAX_TW = 3 * ACCEL__DCT_MAX };

typedef struct accel__dct_plan {
  int n;
  int nfact;
  int fact[ACCEL__DCT_MAX_FACTORS];    /* radices in the order the backward FFT applies them */
  int tw_off[ACCEL__DCT_MAX_FACTORS];  /* each factor's twiddles in tw[] */
  int tws_off[ACCEL__DCT_MAX_FACTORS]; /* factors above 5: their 2 * ip roots of unity in tw[] */
  double tw[ACCEL__DCT_MAX_TW];
  double dct_tw[ACCEL__DCT_MAX]; /* post-processing twiddles */
} accel__dct_plan;

/* Whether pocketfft's real FFT of length n uses Bluestein's algorithm (which
 * this port does not reproduce; never below 191). */
bool accel__dct_bluestein(int n);
/* False (plan zeroed) unless 1 <= n <= ACCEL__DCT_MAX and pocketfft would
 * not use Bluestein's algorithm for n. */
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

/* pocketfft's radix-3 backward pass (ido is odd). */
ACCEL__DCT_HD void accel__radb3(int ido, int l1, const double *cc, double *ch, const double *wa) {
  const double taur = -0.5, taui = 0x1.bb67ae8584caap-1; /* sqrt(3) / 2 */
#define CC(a, b, c) cc[(a) + ido * ((b) + 3 * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define WA(x, i) wa[(i) + (x) * (ido - 1)]
  for (int k = 0; k < l1; k++) {
    const double tr2 = 2.0 * CC(ido - 1, 1, k);
    const double cr2 = CC(0, 0, k) + taur * tr2;
    CH(0, k, 0) = CC(0, 0, k) + tr2;
    const double ci3 = 2.0 * taui * CC(0, 2, k);
    CH(0, k, 2) = cr2 + ci3;
    CH(0, k, 1) = cr2 - ci3;
  }
  for (int k = 0; k < l1; k++)
    for (int i = 2, ic = ido - 2; i < ido; i += 2, ic -= 2) {
      const double tr2 = CC(i - 1, 2, k) + CC(ic - 1, 1, k), ti2 = CC(i, 2, k) - CC(ic, 1, k);
      const double cr2 = CC(i - 1, 0, k) + taur * tr2, ci2 = CC(i, 0, k) + taur * ti2;
      CH(i - 1, k, 0) = CC(i - 1, 0, k) + tr2;
      CH(i, k, 0) = CC(i, 0, k) + ti2;
      const double cr3 = taui * (CC(i - 1, 2, k) - CC(ic - 1, 1, k)), ci3 = taui * (CC(i, 2, k) + CC(ic, 1, k));
      const double dr3 = cr2 + ci3, dr2 = cr2 - ci3, di2 = ci2 + cr3, di3 = ci2 - cr3;
      CH(i, k, 1) = WA(0, i - 2) * di2 + WA(0, i - 1) * dr2;
      CH(i - 1, k, 1) = WA(0, i - 2) * dr2 - WA(0, i - 1) * di2;
      CH(i, k, 2) = WA(1, i - 2) * di3 + WA(1, i - 1) * dr3;
      CH(i - 1, k, 2) = WA(1, i - 2) * dr3 - WA(1, i - 1) * di3;
    }
#undef CC
#undef CH
#undef WA
}

/* pocketfft's radix-5 backward pass (ido is odd). */
ACCEL__DCT_HD void accel__radb5(int ido, int l1, const double *cc, double *ch, const double *wa) {
  /* cos(2 pi / 5), sin(2 pi / 5), cos(4 pi / 5), sin(4 pi / 5) */
  const double tr11 = 0x1.3c6ef372fe95p-2, ti11 = 0x1.e6f0e134454ffp-1;
  const double tr12 = -0x1.9e3779b97f4a8p-1, ti12 = 0x1.2cf2304755a5ep-1;
#define CC(a, b, c) cc[(a) + ido * ((b) + 5 * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define WA(x, i) wa[(i) + (x) * (ido - 1)]
  for (int k = 0; k < l1; k++) {
    const double ti5 = CC(0, 2, k) + CC(0, 2, k), ti4 = CC(0, 4, k) + CC(0, 4, k);
    const double tr2 = CC(ido - 1, 1, k) + CC(ido - 1, 1, k), tr3 = CC(ido - 1, 3, k) + CC(ido - 1, 3, k);
    CH(0, k, 0) = CC(0, 0, k) + tr2 + tr3;
    const double cr2 = CC(0, 0, k) + tr11 * tr2 + tr12 * tr3, cr3 = CC(0, 0, k) + tr12 * tr2 + tr11 * tr3;
    const double ci5 = ti5 * ti11 + ti4 * ti12, ci4 = ti5 * ti12 - ti4 * ti11;
    CH(0, k, 4) = cr2 + ci5;
    CH(0, k, 1) = cr2 - ci5;
    CH(0, k, 3) = cr3 + ci4;
    CH(0, k, 2) = cr3 - ci4;
  }
  for (int k = 0; k < l1; k++)
    for (int i = 2, ic = ido - 2; i < ido; i += 2, ic -= 2) {
      const double tr2 = CC(i - 1, 2, k) + CC(ic - 1, 1, k), tr5 = CC(i - 1, 2, k) - CC(ic - 1, 1, k);
      const double ti5 = CC(i, 2, k) + CC(ic, 1, k), ti2 = CC(i, 2, k) - CC(ic, 1, k);
      const double tr3 = CC(i - 1, 4, k) + CC(ic - 1, 3, k), tr4 = CC(i - 1, 4, k) - CC(ic - 1, 3, k);
      const double ti4 = CC(i, 4, k) + CC(ic, 3, k), ti3 = CC(i, 4, k) - CC(ic, 3, k);
      CH(i - 1, k, 0) = CC(i - 1, 0, k) + tr2 + tr3;
      CH(i, k, 0) = CC(i, 0, k) + ti2 + ti3;
      const double cr2 = CC(i - 1, 0, k) + tr11 * tr2 + tr12 * tr3, ci2 = CC(i, 0, k) + tr11 * ti2 + tr12 * ti3;
      const double cr3 = CC(i - 1, 0, k) + tr12 * tr2 + tr11 * tr3, ci3 = CC(i, 0, k) + tr12 * ti2 + tr11 * ti3;
      const double cr5 = tr5 * ti11 + tr4 * ti12, cr4 = tr5 * ti12 - tr4 * ti11;
      const double ci5 = ti5 * ti11 + ti4 * ti12, ci4 = ti5 * ti12 - ti4 * ti11;
      const double dr4 = cr3 + ci4, dr3 = cr3 - ci4, di3 = ci3 + cr4, di4 = ci3 - cr4;
      const double dr5 = cr2 + ci5, dr2 = cr2 - ci5, di2 = ci2 + cr5, di5 = ci2 - cr5;
      const double dr[4] = {dr2, dr3, dr4, dr5}, di[4] = {di2, di3, di4, di5};
      for (int j = 0; j < 4; j++) {
        CH(i, k, j + 1) = WA(j, i - 2) * di[j] + WA(j, i - 1) * dr[j];
        CH(i - 1, k, j + 1) = WA(j, i - 2) * dr[j] - WA(j, i - 1) * di[j];
      }
    }
#undef CC
#undef CH
#undef WA
}

/* radbg's sums over the input pairs j (jc = ip - j) for output pair l, in
 * pocketfft's grouping: four terms a statement, then two, then one. */
ACCEL__DCT_HD void accel__radbg_sums(int ip, int idl1, int l, double *cc, const double *ch, const double *csarr) {
  const int ipph = (ip + 1) / 2, lc = ip - l;
#define C2(a, b) cc[(a) + idl1 * (b)]
#define CH2(a, b) ch[(a) + idl1 * (b)]
  for (int ik = 0; ik < idl1; ik++) {
    C2(ik, l) = CH2(ik, 0) + csarr[2 * l] * CH2(ik, 1) + csarr[4 * l] * CH2(ik, 2);
    C2(ik, lc) = csarr[2 * l + 1] * CH2(ik, ip - 1) + csarr[4 * l + 1] * CH2(ik, ip - 2);
  }
  int iang = 2 * l, j = 3, jc = ip - 3;
  for (; j < ipph - 3; j += 4, jc -= 4) {
    double ar[4], ai[4];
    for (int t = 0; t < 4; t++) {
      iang += l;
      if (iang > ip) iang -= ip;
      ar[t] = csarr[2 * iang];
      ai[t] = csarr[2 * iang + 1];
    }
    for (int ik = 0; ik < idl1; ik++) {
      C2(ik, l) += ar[0] * CH2(ik, j) + ar[1] * CH2(ik, j + 1) + ar[2] * CH2(ik, j + 2) + ar[3] * CH2(ik, j + 3);
      C2(ik, lc) += ai[0] * CH2(ik, jc) + ai[1] * CH2(ik, jc - 1) + ai[2] * CH2(ik, jc - 2) + ai[3] * CH2(ik, jc - 3);
    }
  }
  for (; j < ipph - 1; j += 2, jc -= 2) {
    iang += l;
    if (iang > ip) iang -= ip;
    const double ar1 = csarr[2 * iang], ai1 = csarr[2 * iang + 1];
    iang += l;
    if (iang > ip) iang -= ip;
    const double ar2 = csarr[2 * iang], ai2 = csarr[2 * iang + 1];
    for (int ik = 0; ik < idl1; ik++) {
      C2(ik, l) += ar1 * CH2(ik, j) + ar2 * CH2(ik, j + 1);
      C2(ik, lc) += ai1 * CH2(ik, jc) + ai2 * CH2(ik, jc - 1);
    }
  }
  for (; j < ipph; j++, jc--) {
    iang += l;
    if (iang > ip) iang -= ip;
    const double war = csarr[2 * iang], wai = csarr[2 * iang + 1];
    for (int ik = 0; ik < idl1; ik++) {
      C2(ik, l) += war * CH2(ik, j);
      C2(ik, lc) += wai * CH2(ik, jc);
    }
  }
#undef C2
#undef CH2
}

/* pocketfft's generic backward pass for an odd factor ip > 5 (ido is odd);
 * cc is overwritten, the result is in ch. */
ACCEL__DCT_HD void accel__radbg(int ido, int ip, int l1, double *cc, double *ch, const double *wa,
                                const double *csarr) {
  const int ipph = (ip + 1) / 2, idl1 = ido * l1;
#define CC(a, b, c) cc[(a) + ido * ((b) + ip * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define C1(a, b, c) cc[(a) + ido * ((b) + l1 * (c))]
  for (int k = 0; k < l1; k++)
    for (int i = 0; i < ido; i++) CH(i, k, 0) = CC(i, 0, k);
  for (int j = 1, jc = ip - 1; j < ipph; j++, jc--)
    for (int k = 0; k < l1; k++) {
      CH(0, k, j) = 2.0 * CC(ido - 1, 2 * j - 1, k);
      CH(0, k, jc) = 2.0 * CC(0, 2 * j, k);
    }
  for (int j = 1, jc = ip - 1; j < ipph; j++, jc--)
    for (int k = 0; k < l1; k++)
      for (int i = 1, ic = ido - 3; i <= ido - 2; i += 2, ic -= 2) {
        CH(i, k, j) = CC(i, 2 * j, k) + CC(ic, 2 * j - 1, k);
        CH(i, k, jc) = CC(i, 2 * j, k) - CC(ic, 2 * j - 1, k);
        CH(i + 1, k, j) = CC(i + 1, 2 * j, k) - CC(ic + 1, 2 * j - 1, k);
        CH(i + 1, k, jc) = CC(i + 1, 2 * j, k) + CC(ic + 1, 2 * j - 1, k);
      }
  for (int l = 1; l < ipph; l++) accel__radbg_sums(ip, idl1, l, cc, ch, csarr);
  for (int j = 1; j < ipph; j++)
    for (int ik = 0; ik < idl1; ik++) ch[ik] += ch[ik + idl1 * j];
  for (int j = 1, jc = ip - 1; j < ipph; j++, jc--)
    for (int k = 0; k < l1; k++) {
      CH(0, k, jc) = C1(0, k, j) + C1(0, k, jc);
      CH(0, k, j) = C1(0, k, j) - C1(0, k, jc);
    }
  for (int j = 1, jc = ip - 1; j < ipph; j++, jc--)
    for (int k = 0; k < l1; k++)
      for (int i = 1; i <= ido - 2; i += 2) {
        CH(i, k, j) = C1(i, k, j) - C1(i + 1, k, jc);
        CH(i, k, jc) = C1(i, k, j) + C1(i + 1, k, jc);
        CH(i + 1, k, j) = C1(i + 1, k, j) + C1(i, k, jc);
        CH(i + 1, k, jc) = C1(i + 1, k, j) - C1(i, k, jc);
      }
  for (int j = 1; j < ip; j++)
    for (int k = 0; k < l1; k++)
      for (int i = 1, idij = (j - 1) * (ido - 1); i <= ido - 2; i += 2, idij += 2) {
        const double t1 = CH(i, k, j), t2 = CH(i + 1, k, j);
        CH(i, k, j) = wa[idij] * t1 - wa[idij + 1] * t2;
        CH(i + 1, k, j) = wa[idij] * t2 + wa[idij + 1] * t1;
      }
#undef CC
#undef CH
#undef C1
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
    const double *wa = p->tw + p->tw_off[f];
    if (ip == 4) accel__radb4(ido, l1, p1, p2, wa);
    else if (ip == 2) accel__radb2(ido, l1, p1, p2, wa);
    else if (ip == 3) accel__radb3(ido, l1, p1, p2, wa);
    else if (ip == 5) accel__radb5(ido, l1, p1, p2, wa);
    else accel__radbg(ido, ip, l1, p1, p2, wa, p->tw + p->tws_off[f]);
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
