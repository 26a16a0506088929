/*
 * lib/ct/cpu_npsort_impl.h - numpy 1.x's argsort (cpu_npsort.c) for one key
 * type, included once per type by cpu_npsort.c: NP_T (the key type) and
 * NP_FN(name) (the name with the type's suffix) are defined before, and
 * undefined after.
 */

static inline bool NP_FN(less)(NP_T a, NP_T b) { return a < b; } /* keys never NaN */

/* numpy's sift-down: tmp into the heap a[1..n] from position i. */
static void NP_FN(sift_down)(const NP_T *v, int64_t *a, int64_t i, int64_t n, int64_t tmp) {
  for (int64_t j = i << 1; j <= n;) {
    if (j < n && NP_FN(less)(v[a[j]], v[a[j + 1]])) j += 1;
    if (NP_FN(less)(v[tmp], v[a[j]])) {
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
static void NP_FN(arg_heapsort)(const NP_T *v, int64_t *order, int64_t n) {
  int64_t *a = order - 1;
  for (int64_t l = n >> 1; l > 0; --l) NP_FN(sift_down)(v, a, l, n, a[l]);
  for (; n > 1;) {
    const int64_t tmp = a[n];
    a[n] = a[1];
    n -= 1;
    NP_FN(sift_down)(v, a, 1, n, tmp);
  }
}

void NP_FN(accel__np_argsort)(const NP_T *v, int64_t *order, int64_t num) {
  for (int64_t i = 0; i < num; i++) order[i] = i;
  if (num < 2) return;
  enum { SMALL = 15, STACK = 128 };
  int64_t *pl = order, *pr = order + num - 1;
  int64_t *stack[STACK], **sptr = stack;
  int depth[STACK], *psdepth = depth;
  int cdepth = msb((uint64_t)num) * 2;
  for (;;) {
    if (cdepth < 0) {
      NP_FN(arg_heapsort)(v, pl, pr - pl + 1);
      goto stack_pop;
    }
    while (pr - pl > SMALL) {
      int64_t *pm = pl + ((pr - pl) >> 1);
      if (NP_FN(less)(v[*pm], v[*pl])) swap_idx(pm, pl);
      if (NP_FN(less)(v[*pr], v[*pm])) swap_idx(pr, pm);
      if (NP_FN(less)(v[*pm], v[*pl])) swap_idx(pm, pl);
      const NP_T vp = v[*pm];
      int64_t *pi = pl, *pj = pr - 1;
      swap_idx(pm, pj);
      for (;;) {
        do {
          ++pi;
        } while (NP_FN(less)(v[*pi], vp));
        do {
          --pj;
        } while (NP_FN(less)(vp, v[*pj]));
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
      const NP_T vp = v[vi];
      int64_t *pj = pi, *pk = pi - 1;
      while (pj > pl && NP_FN(less)(vp, v[*pk])) *pj-- = *pk--;
      *pj = vi;
    }
  stack_pop:
    if (sptr == stack) break;
    pr = *(--sptr);
    pl = *(--sptr);
    cdepth = *(--psdepth);
  }
}
