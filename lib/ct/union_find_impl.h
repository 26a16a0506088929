/*
 * lib/ct/union_find_impl.h - the union-find of union_find.h for one label
 * type, included once per type by union_find.h: ACCEL__UF_T (uint32_t or
 * uint64_t), ACCEL__UF_ATOMIC_T (the type CUDA's atomics take for it) and
 * ACCEL__UF_FN(name) (the name with the type's suffix) are defined before.
 */

ACCEL__UF ACCEL__UF_T ACCEL__UF_FN(accel__uf_load)(ACCEL__UF_T *p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<ACCEL__UF_T, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

ACCEL__UF void ACCEL__UF_FN(accel__uf_store)(ACCEL__UF_T *p, ACCEL__UF_T v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<ACCEL__UF_T, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/* *p = min(*p, v); returns the value before. */
ACCEL__UF ACCEL__UF_T ACCEL__UF_FN(accel__uf_min)(ACCEL__UF_T *p, ACCEL__UF_T v) {
#if defined(__CUDA_ARCH__)
  return (ACCEL__UF_T)atomicMin((ACCEL__UF_ATOMIC_T *)p, (ACCEL__UF_ATOMIC_T)v);
#else
  ACCEL__UF_T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
#endif
}

/* *p = v if *p is still `expect`. */
ACCEL__UF void ACCEL__UF_FN(accel__uf_replace)(ACCEL__UF_T *p, ACCEL__UF_T expect, ACCEL__UF_T v) {
#if defined(__CUDA_ARCH__)
  atomicCAS((ACCEL__UF_ATOMIC_T *)p, (ACCEL__UF_ATOMIC_T)expect, (ACCEL__UF_ATOMIC_T)v);
#else
  __atomic_compare_exchange_n(p, &expect, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

/* The root of x, halving the path on the way: each element visited is
 * pointed at its grandparent, unless another thread moved it meanwhile. */
ACCEL__UF ACCEL__UF_T ACCEL__UF_FN(accel__uf_find)(ACCEL__UF_T *label, ACCEL__UF_T x) {
  ACCEL__UF_T parent = ACCEL__UF_FN(accel__uf_load)(&label[x]);
  while (parent != x) {
    const ACCEL__UF_T grand = ACCEL__UF_FN(accel__uf_load)(&label[parent]);
    if (grand != parent) ACCEL__UF_FN(accel__uf_replace)(&label[x], parent, grand);
    x = grand;
    parent = ACCEL__UF_FN(accel__uf_load)(&label[x]);
  }
  return x;
}

/* Join the components of a and b. */
ACCEL__UF void ACCEL__UF_FN(accel__uf_unite)(ACCEL__UF_T *label, ACCEL__UF_T a, ACCEL__UF_T b) {
  for (;;) {
    a = ACCEL__UF_FN(accel__uf_find)(label, a);
    b = ACCEL__UF_FN(accel__uf_find)(label, b);
    if (a == b) return;
    if (a > b) {
      const ACCEL__UF_T t = a;
      a = b;
      b = t;
    }
    ACCEL__UF_BEFORE_LINK();
    const ACCEL__UF_T old = ACCEL__UF_FN(accel__uf_min)(&label[b], a); /* link the larger root under the smaller */
    if (old == b) return;
    /* b was linked meanwhile (to old): a still has to join old's component */
    ACCEL__UF_RETRY();
    b = old;
  }
}

/* After every union: the element's root as its label. */
ACCEL__UF void ACCEL__UF_FN(accel__uf_flatten)(ACCEL__UF_T *label, ACCEL__UF_T x) {
  ACCEL__UF_FN(accel__uf_store)(&label[x], ACCEL__UF_FN(accel__uf_find)(label, x));
}
