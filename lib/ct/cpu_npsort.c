/*
 * numpy 1.x's np.argsort(kind='quicksort') for float32 keys, reproduced so
 * that peak_local_max's order of equally high peaks (and so which of them
 * survives the minimum distance) is the one scikit-image users get. numpy
 * uses an introsort over the index array: median-of-three partitions while
 * more than 16 entries remain (the larger side stacked), an insertion sort
 * below, and a heapsort of a partition once the depth limit 2 * floor(log2 n)
 * is used up. Facts from numpy's npysort sources; the code is written here.
 */
#include "ct/ct.h"

static inline bool less(float a, float b) { return a < b; } /* keys never NaN */

static void swap_idx(int64_t *a, int64_t *b) {
  const int64_t t = *a;
  *a = *b;
  *b = t;
}

/* numpy's sift-down: tmp into the heap a[1..n] from position i. */
static void sift_down(const float *v, int64_t *a, int64_t i, int64_t n, int64_t tmp) {
  for (int64_t j = i << 1; j <= n;) {
    if (j < n && less(v[a[j]], v[a[j + 1]])) j += 1;
    if (less(v[tmp], v[a[j]])) {
      a[i] = a[j];
      i = j;
      j += j;
    } else {
      break;
    }
  }
  a[i] = tmp;
}

/* numpy's argsort heapsort of order[0..n), 1-based internally. */
static void arg_heapsort(const float *v, int64_t *order, int64_t n) {
  int64_t *a = order - 1;
  for (int64_t l = n >> 1; l > 0; --l) sift_down(v, a, l, n, a[l]);
  for (; n > 1;) {
    const int64_t tmp = a[n];
    a[n] = a[1];
    n -= 1;
    sift_down(v, a, 1, n, tmp);
  }
}

static int msb(uint64_t n) {
  int d = 0;
  while (n >>= 1) d++;
  return d;
}

void accel__np_argsort_f32(const float *v, int64_t *order, int64_t num) {
  for (int64_t i = 0; i < num; i++) order[i] = i;
  if (num < 2) return;
  enum { SMALL = 15, STACK = 128 };
  int64_t *pl = order, *pr = order + num - 1;
  int64_t *stack[STACK], **sptr = stack;
  int depth[STACK], *psdepth = depth;
  int cdepth = msb((uint64_t)num) * 2;
  for (;;) {
    if (cdepth < 0) {
      arg_heapsort(v, pl, pr - pl + 1);
      goto stack_pop;
    }
    while (pr - pl > SMALL) {
      int64_t *pm = pl + ((pr - pl) >> 1);
      if (less(v[*pm], v[*pl])) swap_idx(pm, pl);
      if (less(v[*pr], v[*pm])) swap_idx(pr, pm);
      if (less(v[*pm], v[*pl])) swap_idx(pm, pl);
      const float vp = v[*pm];
      int64_t *pi = pl, *pj = pr - 1;
      swap_idx(pm, pj);
      for (;;) {
        do {
          ++pi;
        } while (less(v[*pi], vp));
        do {
          --pj;
        } while (less(vp, v[*pj]));
        if (pi >= pj) break;
        swap_idx(pi, pj);
      }
      int64_t *pk = pr - 1;
      swap_idx(pi, pk);
      if (pi - pl < pr - pi) { /* stack the larger side */
        *sptr++ = pi + 1;
        *sptr++ = pr;
        pr = pi - 1;
      } else {
        *sptr++ = pl;
        *sptr++ = pi - 1;
        pl = pi + 1;
      }
      *psdepth++ = --cdepth;
    }
    for (int64_t *pi = pl + 1; pi <= pr; ++pi) { /* insertion sort */
      const int64_t vi = *pi;
      const float vp = v[vi];
      int64_t *pj = pi, *pk = pi - 1;
      while (pj > pl && less(vp, v[*pk])) *pj-- = *pk--;
      *pj = vi;
    }
  stack_pop:
    if (sptr == stack) break;
    pr = *(--sptr);
    pl = *(--sptr);
    cdepth = *(--psdepth);
  }
}
