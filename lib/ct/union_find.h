/*
 * lib/ct/union_find.h - the concurrent union-find of the GPU's connected
 * components (kernels/ct.cu: fill holes, the peak search's labels), one
 * source for the device and the host. The host emulation runs it in loops;
 * tests/test_ct.c runs it with real threads, which is how its concurrent
 * branches are tested without a GPU.
 *
 * Labels are element indices (uint32, or uint64 in the _wide functions for
 * volumes beyond accel__ct_index_limit), a root is its own label (Playne and Hawick's
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

/* The functions for uint32 labels (accel__uf_find, ...) and for uint64
 * labels (accel__uf_find_wide, ...), from one source. */
#define ACCEL__UF_T uint32_t
#define ACCEL__UF_ATOMIC_T unsigned int
#define ACCEL__UF_FN(name) name
#include "ct/union_find_impl.h"
#undef ACCEL__UF_T
#undef ACCEL__UF_ATOMIC_T
#undef ACCEL__UF_FN

#define ACCEL__UF_T uint64_t
#define ACCEL__UF_ATOMIC_T unsigned long long
#define ACCEL__UF_FN(name) name##_wide
#include "ct/union_find_impl.h"
#undef ACCEL__UF_T
#undef ACCEL__UF_ATOMIC_T
#undef ACCEL__UF_FN

#endif /* ACCEL_CT_UNION_FIND_H */
