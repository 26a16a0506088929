"""The exact Hamming index over binary codes (include/accel/index.h,
docs/index.md): Index, its pairs and groups, and groups_from_pairs."""
import ctypes
import numbers
import os

from ._arrays import copy_out
from ._errors import check
from ._native import Handle, P, c_status, c_struct, declare, lib, progress_fn

INDEX_MAX_FIELDS = 8

IndexOptions = c_struct("accel_index_options", "uint32_t struct_size; uint32_t bits; uint32_t nfields;")
SearchOptions = c_struct("accel_search_options", """
    uint32_t struct_size; accel_index_rule rule; uint32_t thresholds[ACCEL_INDEX_MAX_FIELDS];
    accel_index_algorithm algorithm; accel_progress_fn progress; void *progress_user;""",
                         ACCEL_INDEX_MAX_FIELDS=INDEX_MAX_FIELDS)

_SIZE_P, _ADDR_P = P(ctypes.c_size_t), P(ctypes.c_void_p)
declare({
    "accel_index_options_init": (c_status, [P(IndexOptions), ctypes.c_size_t]),
    "accel_index_create": (c_status, [ctypes.c_void_p, P(IndexOptions), _ADDR_P]),
    "accel_index_destroy": (None, [ctypes.c_void_p]),
    "accel_index_info": (c_status, [ctypes.c_void_p, P(ctypes.c_uint32), P(ctypes.c_uint32), _SIZE_P]),
    "accel_index_add": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                   P(ctypes.c_char_p), ctypes.c_void_p]),
    "accel_index_remove": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _SIZE_P]),
    "accel_index_get": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(ctypes.c_uint64), ctypes.c_void_p,
                                   P(ctypes.c_char_p), P(ctypes.c_uint64)]),
    "accel_index_find": (c_status, [ctypes.c_void_p, ctypes.c_uint64, _SIZE_P]),
    "accel_index_set_meta": (c_status, [ctypes.c_void_p, ctypes.c_char_p]),
    "accel_index_get_meta": (c_status, [ctypes.c_void_p, P(ctypes.c_char_p)]),
    "accel_index_save": (c_status, [ctypes.c_void_p, ctypes.c_char_p]),
    "accel_index_load": (c_status, [ctypes.c_void_p, ctypes.c_char_p, _ADDR_P]),
    "accel_search_options_init": (c_status, [P(SearchOptions), ctypes.c_size_t]),
    "accel_index_self_join": (c_status, [ctypes.c_void_p, P(SearchOptions), _ADDR_P]),
    "accel_index_range": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, P(SearchOptions), _ADDR_P]),
    "accel_index_knn": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint32,
                                   ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]),
    "accel_pairs_view": (c_status, [ctypes.c_void_p, _SIZE_P, _ADDR_P, _ADDR_P, _ADDR_P, P(ctypes.c_uint32)]),
    "accel_pairs_destroy": (None, [ctypes.c_void_p]),
    "accel_groups_from_pairs": (c_status, [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, _ADDR_P]),
    "accel_index_group": (c_status, [ctypes.c_void_p, P(SearchOptions), _ADDR_P]),
    "accel_groups_view": (c_status, [ctypes.c_void_p, _SIZE_P, _ADDR_P, _ADDR_P]),
    "accel_groups_destroy": (None, [ctypes.c_void_p]),
})

RULES = {"all": 0, "any": 1}
ALGORITHMS = {"auto": 0, "brute_force": 1, "multi_index": 2}


def _u64(a, what):
    import numpy as np
    if not isinstance(a, np.ndarray):  # lists mixing numpy and Python ints would become float64
        try:
            a = np.asarray(a, dtype=np.uint64)
        except (OverflowError, TypeError, ValueError) as e:
            raise TypeError("%s must be non-negative integers (uint64): %s" % (what, e)) from None
    if a.dtype.kind not in "ui":
        raise TypeError("%s must be integers (uint64), not %s" % (what, a.dtype))
    return np.ascontiguousarray(a.astype(np.uint64, copy=False))


def _groups_out(handle):
    import numpy as np
    try:
        ng = ctypes.c_size_t()
        off = ctypes.c_void_p()
        mem = ctypes.c_void_p()
        check(lib.accel_groups_view(handle, ctypes.byref(ng), ctypes.byref(off), ctypes.byref(mem)))
        offsets = copy_out(off.value, ctypes.c_uint64, ng.value + 1)
        total = int(offsets[-1])
        members = copy_out(mem.value, ctypes.c_uint64, total) if total else np.zeros(0, dtype=np.uint64)
    finally:
        lib.accel_groups_destroy(handle)
    return [members[offsets[g]:offsets[g + 1]] for g in range(ng.value)]


def groups_from_pairs(first, second):
    """Connected components (union-find) of the graph with edges first[i] -
    second[i] (uint64 ids): a list of uint64 arrays, groups of two or more,
    members sorted, groups sorted by their first member."""
    first, second = _u64(first, "first").reshape(-1), _u64(second, "second").reshape(-1)
    if first.shape != second.shape:
        raise ValueError("first and second differ in length")
    out = ctypes.c_void_p()
    check(lib.accel_groups_from_pairs(len(first), first.ctypes.data, second.ctypes.data, ctypes.byref(out)))
    return _groups_out(out)


class Index(Handle):
    """An exact Hamming index over binary codes (include/accel/index.h).

    Entries have ``nfields`` codes of ``bits`` bits (64, 128 or 256): one per
    hash kind, e.g. dhash and ahash. Codes are numpy uint64 arrays of shape
    (n,) for one 64-bit field, or (n, nfields, bits // 64) (also (n, nfields)
    or (n, bits // 64) where that is unambiguous): word w holds bits 64w ..
    64w + 63, the first in the most significant bit, so a 64-bit imagehash is
    int(str(hash), 16) and HashResult.u64() gives them directly.

    Thresholds are inclusive (distance <= t), one per field or one for all;
    the rule "all" needs every field within its threshold, "any" one.
    """

    _what = "index"

    def __init__(self, ctx, bits=64, nfields=1, _handle=None):
        self._ctx = ctx  # the context must outlive the index
        if _handle is not None:
            self._h = _handle
        else:
            o = IndexOptions.defaults()
            o.bits = bits
            o.nfields = nfields
            h = ctypes.c_void_p()
            check(lib.accel_index_create(ctx.handle, ctypes.byref(o), ctypes.byref(h)), ctx.handle)
            self._h = h
        b, f = ctypes.c_uint32(), ctypes.c_uint32()
        check(lib.accel_index_info(self._h, ctypes.byref(b), ctypes.byref(f), None))
        self.bits, self.nfields = b.value, f.value
        self.words = self.bits // 64

    @classmethod
    def load(cls, ctx, path):
        """An index saved by save() (or by ``accel index build``)."""
        h = ctypes.c_void_p()
        check(lib.accel_index_load(ctx.handle, os.fspath(path).encode(), ctypes.byref(h)), ctx.handle)
        return cls(ctx, _handle=h)

    def _destroy(self, h):
        lib.accel_index_destroy(h)

    def _err(self, status):
        check(status, self._ctx.handle)

    def __len__(self):
        n = ctypes.c_size_t()
        self._err(lib.accel_index_info(self.handle, None, None, ctypes.byref(n)))
        return n.value

    def _codes(self, codes, n_expected=None, what="codes"):
        c = _u64(codes, what)
        per = self.nfields * self.words
        if c.ndim == 1 and per == 1:
            c = c.reshape(-1, 1)
        if c.ndim == 3 and c.shape[1:] != (self.nfields, self.words):
            raise ValueError("%s of shape %s: expected (n, %d, %d)" % (what, c.shape, self.nfields, self.words))
        if c.ndim == 2 and c.shape[1] != per:
            raise ValueError("%s of shape %s: expected (n, %d)" % (what, c.shape, per))
        if c.ndim not in (2, 3):
            raise ValueError("%s must be 1-D (one 64-bit field), 2-D or 3-D" % what)
        c = c.reshape(len(c), per)
        if n_expected is not None and len(c) != n_expected:
            raise ValueError("%d %s for %d ids" % (len(c), what, n_expected))
        return c

    def add(self, ids, codes, labels=None, stamps=None):
        """Add entries: ids (unique uint64), codes, optional labels (str) and
        stamps (uint64). All or nothing: a duplicate id raises and adds none."""
        ids = _u64(ids, "ids").reshape(-1)
        c = self._codes(codes, len(ids))
        lab = None
        if labels is not None:
            labels = list(labels)
            if len(labels) != len(ids):
                raise ValueError("%d labels for %d ids" % (len(labels), len(ids)))
            lab = (ctypes.c_char_p * len(labels))(*[None if x is None else os.fsencode(x) for x in labels])
        st = None
        if stamps is not None:
            st = _u64(stamps, "stamps").reshape(-1)
            if len(st) != len(ids):
                raise ValueError("%d stamps for %d ids" % (len(st), len(ids)))
        self._err(lib.accel_index_add(self.handle, len(ids), ids.ctypes.data, c.ctypes.data, lab,
                                      None if st is None else st.ctypes.data))

    def remove(self, ids):
        """Remove entries by id (unknown ids are ignored); returns how many were removed."""
        ids = _u64(ids, "ids").reshape(-1)
        n = ctypes.c_size_t()
        self._err(lib.accel_index_remove(self.handle, len(ids), ids.ctypes.data, ctypes.byref(n)))
        return n.value

    def __contains__(self, id_):
        pos = ctypes.c_size_t()
        return lib.accel_index_find(self.handle, int(id_), ctypes.byref(pos)) == 0

    def entries(self):
        """(ids, codes (n, nfields, words), labels, stamps) of every entry, in index order."""
        import numpy as np
        n = len(self)
        ids = np.zeros(n, dtype=np.uint64)
        codes = np.zeros((n, self.nfields, self.words), dtype=np.uint64)
        stamps = np.zeros(n, dtype=np.uint64)
        labels = []
        i, st, lab = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_char_p()
        for p in range(n):
            self._err(lib.accel_index_get(self.handle, p, ctypes.byref(i), codes[p].ctypes.data, ctypes.byref(lab),
                                          ctypes.byref(st)))
            ids[p], stamps[p] = i.value, st.value
            labels.append(None if lab.value is None else os.fsdecode(lab.value))
        return ids, codes, labels, stamps

    @property
    def meta(self):
        """A free-form string saved with the index."""
        m = ctypes.c_char_p()
        self._err(lib.accel_index_get_meta(self.handle, ctypes.byref(m)))
        return m.value.decode(errors="replace")

    @meta.setter
    def meta(self, value):
        self._err(lib.accel_index_set_meta(self.handle, value.encode()))

    def save(self, path):
        """Write to a file (atomically: a failed save leaves the previous file)."""
        self._err(lib.accel_index_save(self.handle, os.fspath(path).encode()))

    def _search(self, thresholds, rule, algorithm, progress):
        o = SearchOptions.defaults()
        if rule not in RULES:
            raise ValueError("rule must be 'all' or 'any'")
        if algorithm not in ALGORITHMS:
            raise ValueError("algorithm must be one of %s" % ", ".join(ALGORITHMS))
        o.rule = RULES[rule]
        o.algorithm = ALGORITHMS[algorithm]
        if isinstance(thresholds, numbers.Integral):
            th = [int(thresholds)] * self.nfields
        else:
            th = [int(t) for t in thresholds]
        if len(th) != self.nfields:
            raise ValueError("%d thresholds for %d fields" % (len(th), self.nfields))
        for f, t in enumerate(th):
            if t < 0:
                raise ValueError("thresholds must be >= 0")
            o.thresholds[f] = t
        cb = progress_fn(progress)
        if cb is not None:
            o.progress = cb
        return o, cb

    def _pairs_out(self, handle):
        import numpy as np
        try:
            n, nf = ctypes.c_size_t(), ctypes.c_uint32()
            a, b, d = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
            self._err(lib.accel_pairs_view(handle, ctypes.byref(n), ctypes.byref(a), ctypes.byref(b), ctypes.byref(d),
                                           ctypes.byref(nf)))
            if n.value == 0:
                return (np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros((0, self.nfields), np.uint32))
            first = copy_out(a.value, ctypes.c_uint64, n.value)
            second = copy_out(b.value, ctypes.c_uint64, n.value)
            dist = copy_out(d.value, ctypes.c_uint32, n.value * nf.value)
        finally:
            lib.accel_pairs_destroy(handle)
        return first, second, dist.reshape(n.value, nf.value)

    def self_join(self, thresholds=0, rule="all", algorithm="auto", progress=None):
        """Every pair of entries within the thresholds, each once: (first, second,
        distances) with first < second (ids), sorted, distances (npairs, nfields)."""
        o, _cb = self._search(thresholds, rule, algorithm, progress)
        out = ctypes.c_void_p()
        self._err(lib.accel_index_self_join(self.handle, ctypes.byref(o), ctypes.byref(out)))
        return self._pairs_out(out)

    def range(self, queries, thresholds=0, rule="all", algorithm="auto", progress=None):
        """Every entry within the thresholds of each query: (query_number, id,
        distances), sorted by query then id."""
        q = self._codes(queries, what="queries")
        o, _cb = self._search(thresholds, rule, algorithm, progress)
        out = ctypes.c_void_p()
        self._err(lib.accel_index_range(self.handle, len(q), q.ctypes.data, ctypes.byref(o), ctypes.byref(out)))
        return self._pairs_out(out)

    def knn(self, queries, k, field=0):
        """The k nearest entries of each query by one field's distance, nearest
        first, ties by smaller id: (ids (nq, k), distances (nq, k)); missing
        results are id 2**64-1, distance 2**32-1."""
        import numpy as np
        q = self._codes(queries, what="queries")
        ids = np.zeros((len(q), k), dtype=np.uint64)
        dist = np.zeros((len(q), k), dtype=np.uint32)
        self._err(lib.accel_index_knn(self.handle, len(q), q.ctypes.data, k, field, ids.ctypes.data,
                                      dist.ctypes.data))
        return ids, dist

    def groups(self, thresholds=0, rule="all", algorithm="auto", progress=None):
        """Groups of near-duplicates: connected components of the self-join
        (without keeping its pairs), as uint64 id arrays, members sorted, groups
        by first member."""
        o, _cb = self._search(thresholds, rule, algorithm, progress)
        out = ctypes.c_void_p()
        self._err(lib.accel_index_group(self.handle, ctypes.byref(o), ctypes.byref(out)))
        return _groups_out(out)
