/*
 * numpy 1.x's np.argsort(kind='quicksort') for float32 and float64 keys, reproduced so
 * that peak_local_max's order of equally high peaks (and so which of them
 * survives the minimum distance) is the one scikit-image users get. numpy
 * uses an introsort over the index array: median-of-three partitions while
 * more than 16 entries remain (the larger side stacked), an insertion sort
 * below, and a heapsort of a partition once the depth limit 2 * floor(log2 n)
 * is used up. Facts from numpy's npysort sources; the code is written here.
 */
#include "ct/ct.h"

static void swap_idx(int64_t *a, int64_t *b) {
  const int64_t t = *a;
  *a = *b;
  *b = t;
}

static int msb(uint64_t n) {
  int d = 0;
  while (n >>= 1) d++;
  return d;
}

#define NP_T float
#define NP_FN(name) name##_f32
#include "ct/cpu_npsort_impl.h"
#undef NP_T
#undef NP_FN

#define NP_T double
#define NP_FN(name) name##_f64
#include "ct/cpu_npsort_impl.h"
#undef NP_T
#undef NP_FN
