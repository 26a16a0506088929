/* Twiddle tables of scipy's DCT-II, built as pocketfft builds them. */
#include "hash/dct.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* cos and sin of 2*pi*x/n from the angle step ang = pi / (4n): octant
 * symmetries keep the argument of cos/sin within pi/4. */
static void octant(size_t x, size_t n, double ang, double *re, double *im) {
  x <<= 3;
  const bool conj = x >= 4 * n; /* the second half: the conjugate of the mirrored angle */
  if (conj) x = 8 * n - x;
  if (x < 2 * n) {
    if (x < n) {
      *re = cos((double)x * ang);
      *im = sin((double)x * ang);
    } else {
      *re = sin((double)(2 * n - x) * ang);
      *im = cos((double)(2 * n - x) * ang);
    }
  } else {
    x -= 2 * n;
    if (x < n) {
      *re = -sin((double)x * ang);
      *im = cos((double)x * ang);
    } else {
      *re = -cos((double)(2 * n - x) * ang);
      *im = sin((double)(2 * n - x) * ang);
    }
  }
  if (conj) *im = -*im;
}

/* e^(2 pi i idx / n) as pocketfft's sincos_2pibyn gives it: a product of a
 * fine-table and a coarse-table entry (conjugated past n/2). */
typedef struct twiddle_table {
  size_t n, mask, shift;
  double v1[2][64], v2[2][64]; /* [re/im][index]; enough for n <= 1024 */
} twiddle_table;

static void sincos_init(twiddle_table *t, size_t n) {
  const long double pi = 3.141592653589793238462643383279502884197L;
  const double ang = (double)(0.25L * pi / (long double)n);
  const size_t nval = (n + 2) / 2;
  t->n = n;
  t->shift = 1;
  while (((size_t)1 << t->shift) * ((size_t)1 << t->shift) < nval) t->shift++;
  t->mask = ((size_t)1 << t->shift) - 1;
  t->v1[0][0] = 1.0;
  t->v1[1][0] = 0.0;
  for (size_t i = 1; i <= t->mask; i++) octant(i, n, ang, &t->v1[0][i], &t->v1[1][i]);
  const size_t n2 = (nval + t->mask) / (t->mask + 1);
  t->v2[0][0] = 1.0;
  t->v2[1][0] = 0.0;
  for (size_t i = 1; i < n2; i++) octant(i * (t->mask + 1), n, ang, &t->v2[0][i], &t->v2[1][i]);
}

static void sincos_get(const twiddle_table *t, size_t idx, double *re, double *im) {
  bool conj = false;
  if (2 * idx > t->n) {
    idx = t->n - idx;
    conj = true;
  }
  const double ar = t->v1[0][idx & t->mask], ai = t->v1[1][idx & t->mask];
  const double br = t->v2[0][idx >> t->shift], bi = t->v2[1][idx >> t->shift];
  *re = ar * br - ai * bi;
  const double i = ar * bi + ai * br;
  *im = conj ? -i : i;
}

bool accel__dct_plan_init(accel__dct_plan *p, int n) {
  memset(p, 0, sizeof *p);
  if (n < 2 || n > ACCEL__DCT_MAX || (n & (n - 1))) return false;
  p->n = n;
  /* pocketfft's factorization: 4s, then a 2 moved to the front */
  int len = n;
  while (len % 4 == 0) {
    p->fact[p->nfact++] = 4;
    len /= 4;
  }
  if (len % 2 == 0) {
    p->fact[p->nfact++] = 2;
    int t = p->fact[0];
    p->fact[0] = p->fact[p->nfact - 1];
    p->fact[p->nfact - 1] = t;
  }
  twiddle_table fft_tw;
  sincos_init(&fft_tw, (size_t)n);
  int off = 0, l1 = 1;
  for (int k = 0; k < p->nfact; k++) {
    const int ip = p->fact[k], ido = n / (l1 * ip);
    p->tw_off[k] = off;
    if (k < p->nfact - 1) { /* the last factor needs none */
      for (int j = 1; j < ip; j++)
        for (int i = 1; i <= (ido - 1) / 2; i++) {
          double re, im;
          sincos_get(&fft_tw, (size_t)(j * l1 * i), &re, &im);
          p->tw[off + (j - 1) * (ido - 1) + 2 * i - 2] = re;
          p->tw[off + (j - 1) * (ido - 1) + 2 * i - 1] = im;
        }
      off += (ip - 1) * (ido - 1);
    }
    l1 *= ip;
  }
  twiddle_table dct_tw;
  sincos_init(&dct_tw, (size_t)(4 * n));
  for (int i = 0; i < n; i++) {
    double re, im;
    sincos_get(&dct_tw, (size_t)(i + 1), &re, &im);
    p->dct_tw[i] = re;
  }
  return true;
}
