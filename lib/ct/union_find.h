/*
 * lib/ct/union_find.h - the concurrent union-find of the GPU's connected
 * components (kernels/ct.cu: fill holes, the peak search's labels), one
 * source for the device and the host. The host emulation runs it in loops;
 * tests/test_ct.c runs it with real threads, which is how its concurrent
 * branches are tested without a GPU.
 *
 * Labels are element indices, a root is its own label (Playne and Hawick's
 * scheme). A label only ever decreases and always stays in its element's
 * component: a union links the larger root under the smaller, a halving step
 * points an element at its grandparent. So every find ends, and once the
 * unions are done each component's root is its smallest element, whatever
 * the order in which threads ran. Labels are read with relaxed atomic loads
 * and changed only by atomic operations (min, compare-and-swap, and the
 * final store of a root), so concurrent threads never race on them and no
 * link is lost. Relaxed order is enough: each label's own history is
 * decreasing, and no thread acts on one label because of another's value.
 */
#ifndef ACCEL_CT_UNION_FIND_H
#define ACCEL_CT_UNION_FIND_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif

#if defined(__CUDACC__)
#define ACCEL__UF static inline __host__ __device__
#else
#define ACCEL__UF static inline
#endif

/* Test hooks: ACCEL__UF_RETRY runs each time a union finds that its root
 * was linked by another thread in the meantime and goes on from where it now
 * points (tests count them); ACCEL__UF_BEFORE_LINK runs between a union's
 * finds and its link (tests yield there, to make such races common). */
#ifndef ACCEL__UF_RETRY
#define ACCEL__UF_RETRY() ((void)0)
#endif
#ifndef ACCEL__UF_BEFORE_LINK
#define ACCEL__UF_BEFORE_LINK() ((void)0)
#endif

ACCEL__UF uint32_t accel__uf_load(uint32_t *p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

ACCEL__UF void accel__uf_store(uint32_t *p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/* *p = min(*p, v); returns the value before. */
ACCEL__UF uint32_t accel__uf_min(uint32_t *p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  return atomicMin(p, v);
#else
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
#endif
}

/* *p = v if *p is still `expect`. */
ACCEL__UF void accel__uf_replace(uint32_t *p, uint32_t expect, uint32_t v) {
#if defined(__CUDA_ARCH__)
  atomicCAS(p, expect, v);
#else
  __atomic_compare_exchange_n(p, &expect, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

/* The root of x, halving the path on the way: each element visited is
 * pointed at its grandparent, unless another thread moved it meanwhile. */
ACCEL__UF uint32_t accel__uf_find(uint32_t *label, uint32_t x) {
  uint32_t parent = accel__uf_load(&label[x]);
  while (parent != x) {
    const uint32_t grand = accel__uf_load(&label[parent]);
    if (grand != parent) accel__uf_replace(&label[x], parent, grand);
    x = grand;
    parent = accel__uf_load(&label[x]);
  }
  return x;
}

/* Join the components of a and b. */
ACCEL__UF void accel__uf_unite(uint32_t *label, uint32_t a, uint32_t b) {
  for (;;) {
    a = accel__uf_find(label, a);
    b = accel__uf_find(label, b);
    if (a == b) return;
    if (a > b) {
      const uint32_t t = a;
      a = b;
      b = t;
    }
    ACCEL__UF_BEFORE_LINK();
    const uint32_t old = accel__uf_min(&label[b], a); /* link the larger root under the smaller */
    if (old == b) return;
    /* b was linked meanwhile (to old): a still has to join old's component */
    ACCEL__UF_RETRY();
    b = old;
  }
}

/* After every union: the element's root as its label. */
ACCEL__UF void accel__uf_flatten(uint32_t *label, uint32_t x) { accel__uf_store(&label[x], accel__uf_find(label, x)); }

#endif /* ACCEL_CT_UNION_FIND_H */
