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
  double v1[2][64], v2[2][64]; /* [re/im][index]; enough for n <= 8190 (4 * ACCEL__DCT_MAX) */
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

/* pocketfft's util::largest_prime_factor, cost_guess and good_size_cmplx:
 * what its real FFT plan weighs to choose Bluestein's algorithm. */
static size_t largest_prime_factor(size_t n) {
  size_t res = 1;
  while ((n & 1) == 0) {
    res = 2;
    n >>= 1;
  }
  for (size_t x = 3; x * x <= n; x += 2)
    while (n % x == 0) {
      res = x;
      n /= x;
    }
  return n > 1 ? n : res;
}

static double cost_guess(size_t n) {
  const double lfp = 1.1; /* pocketfft's penalty for factors without their own pass */
  const size_t ni = n;
  double result = 0.0;
  while ((n & 1) == 0) {
    result += 2;
    n >>= 1;
  }
  for (size_t x = 3; x * x <= n; x += 2)
    while (n % x == 0) {
      result += x <= 5 ? (double)x : lfp * (double)x;
      n /= x;
    }
  if (n > 1) result += n <= 5 ? (double)n : lfp * (double)n;
  return result * (double)ni;
}

/* The smallest 2^a 3^b 5^c 7^d 11^e >= n. */
static size_t good_size_cmplx(size_t n) {
  if (n <= 12) return n;
  size_t best = 2 * n;
  for (size_t f11 = 1; f11 < best; f11 *= 11)
    for (size_t f117 = f11; f117 < best; f117 *= 7)
      for (size_t f1175 = f117; f1175 < best; f1175 *= 5) {
        size_t x = f1175;
        while (x < n) x *= 2;
        for (;;) {
          if (x < n) {
            x *= 3;
          } else if (x > n) {
            if (x < best) best = x;
            if (x & 1) break;
            x >>= 1;
          } else {
            return n;
          }
        }
      }
  return best;
}

bool accel__dct_bluestein(int n) {
  const size_t len = (size_t)n, lpf = len < 50 ? 0 : largest_prime_factor(len);
  if (lpf * lpf <= len) return false;
  const double direct = 0.5 * cost_guess(len);
  const double blue = 1.5 * (2 * cost_guess(good_size_cmplx(2 * len - 1)));
  return blue < direct;
}

/* pocketfft's factorization: 4s, one 2 moved to the front, then odd factors ascending. */
static void factorize(accel__dct_plan *p) {
  int len = p->n;
  while (len % 4 == 0) {
    p->fact[p->nfact++] = 4;
    len /= 4;
  }
  if (len % 2 == 0) {
    len /= 2;
    p->fact[p->nfact++] = 2;
    const int t = p->fact[0];
    p->fact[0] = p->fact[p->nfact - 1];
    p->fact[p->nfact - 1] = t;
  }
  for (int d = 3; d * d <= len; d += 2)
    while (len % d == 0) {
      p->fact[p->nfact++] = d;
      len /= d;
    }
  if (len > 1) p->fact[p->nfact++] = len;
}

/* The FFT twiddles of each factor but the last, and the roots of unity of
 * each factor above 5, from the table of e^(2 pi i k / n). False if they
 * would not fit tw[]. */
static bool fft_twiddles(accel__dct_plan *p, const twiddle_table *t) {
  const int n = p->n;
  int off = 0, l1 = 1;
  for (int k = 0; k < p->nfact; k++) {
    const int ip = p->fact[k], ido = n / (l1 * ip);
    const int need = (k < p->nfact - 1 ? (ip - 1) * (ido - 1) : 0) + (ip > 5 ? 2 * ip : 0);
    if (off + need > ACCEL__DCT_MAX_TW) return false;
    p->tw_off[k] = off;
    if (k < p->nfact - 1) {
      for (int j = 1; j < ip; j++)
        for (int i = 1; i <= (ido - 1) / 2; i++) {
          double re, im;
          sincos_get(t, (size_t)(j * l1 * i), &re, &im);
          p->tw[off + (j - 1) * (ido - 1) + 2 * i - 2] = re;
          p->tw[off + (j - 1) * (ido - 1) + 2 * i - 1] = im;
        }
      off += (ip - 1) * (ido - 1);
    }
    if (ip > 5) {
      double *ws = p->tw + off;
      p->tws_off[k] = off;
      ws[0] = 1.0;
      ws[1] = 0.0;
      for (int i = 2, ic = 2 * ip - 2; i <= ic; i += 2, ic -= 2) {
        double re, im;
        sincos_get(t, (size_t)(i / 2 * (n / ip)), &re, &im);
        ws[i] = re;
        ws[i + 1] = im;
        ws[ic] = re;
        ws[ic + 1] = -im;
      }
      off += 2 * ip;
    }
    l1 *= ip;
  }
  return true;
}

bool accel__dct_plan_init(accel__dct_plan *p, int n) {
  memset(p, 0, sizeof *p);
  if (n < 1 || n > ACCEL__DCT_MAX || accel__dct_bluestein(n)) return false;
  p->n = n;
  if (n > 1) factorize(p); /* pocketfft transforms length 1 as the identity */
  twiddle_table fft_tw;
  sincos_init(&fft_tw, (size_t)n);
  if (!fft_twiddles(p, &fft_tw)) {
    memset(p, 0, sizeof *p);
    return false;
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
