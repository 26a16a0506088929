"""The exact Hamming index over binary codes (include/accel/index.h,
docs/index.md): Index, its pairs and groups, and groups_from_pairs."""
import ctypes
import numbers
import os
import tempfile
from typing import Any, List, Optional, Sequence, Tuple, Union

from ._arrays import Array, _device_kind, copy_out, device_empty, device_in, host, host_only
from ._errors import check, choice
from ._native import Handle, P, c_status, c_struct, declare, lib
from ._progress import Call, ProgressArg

Thresholds = Union[int, Sequence[int]]

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
    "accel_index_knn_arrays": (c_status, [ctypes.c_void_p, P(Array), ctypes.c_uint32, ctypes.c_uint32, P(Array),
                                          P(Array)]),
    "accel_pairs_view": (c_status, [ctypes.c_void_p, _SIZE_P, _ADDR_P, _ADDR_P, _ADDR_P, P(ctypes.c_uint32)]),
    "accel_pairs_destroy": (None, [ctypes.c_void_p]),
    "accel_groups_from_pairs": (c_status, [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, _ADDR_P]),
    "accel_index_group": (c_status, [ctypes.c_void_p, P(SearchOptions), _ADDR_P]),
    "accel_groups_view": (c_status, [ctypes.c_void_p, _SIZE_P, _ADDR_P, _ADDR_P]),
    "accel_groups_destroy": (None, [ctypes.c_void_p]),
})

RULES = {"all": 0, "any": 1}
ALGORITHMS = {"auto": 0, "brute_force": 1, "multi_index": 2}


def _u64(a: Any, what: str) -> Any:
    import numpy as np
    if hasattr(a, "__dlpack__") or hasattr(a, "__cuda_array_interface__"):
        a = host_only(a, what)
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


def groups_from_pairs(first: Any, second: Any) -> List[Any]:
    """Connected components (union-find) of the graph with edges first[i] - second[i].

    Parameters
    ----------
    first, second : array of uint64
        The edges' ends (ids), of equal length.

    Returns
    -------
    list of numpy.ndarray
        uint64 groups of two or more, members sorted, groups sorted by their
        first member.

    Examples
    --------
    >>> import accel
    >>> [g.tolist() for g in accel.groups_from_pairs([1, 2, 7], [2, 3, 9])]
    [[1, 2, 3], [7, 9]]
    """
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

    Parameters
    ----------
    ctx : Context
        The context its calls use; it must outlive the index.
    bits : {64, 128, 256}
        The size of each code.
    nfields : int
        Codes per entry (1 to 8).

    Notes
    -----
    An index pickles as its bytes (:meth:`to_bytes`) with its context, and
    is rebuilt where it is unpickled.

    Examples
    --------
    >>> import accel, numpy as np
    >>> with accel.Context() as ctx:
    ...     ix = accel.Index(ctx)
    ...     ix.add([10, 11, 12], np.array([0b0000, 0b0011, 0b1111], np.uint64))
    ...     [g.tolist() for g in ix.groups(thresholds=2)]
    [[10, 11, 12]]
    """

    _what = "index"

    def __init__(self, ctx: Any, bits: int = 64, nfields: int = 1, _handle: Any = None) -> None:
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
    def load(cls, ctx: Any, path: Union[str, "os.PathLike[str]"]) -> "Index":
        """An index saved by :meth:`save` (or by ``accel index build``).

        Parameters
        ----------
        ctx : Context
        path : str or os.PathLike

        Returns
        -------
        Index

        Raises
        ------
        OSError
            The file cannot be read.
        ValueError
            It is not an index file (FormatError) or of a newer version.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index.load(ctx, "photos.idx")  # doctest: +SKIP
        """
        h = ctypes.c_void_p()
        check(lib.accel_index_load(ctx.handle, os.fsencode(path), ctypes.byref(h)), ctx.handle)
        return cls(ctx, _handle=h)

    def to_bytes(self) -> bytes:
        """The index in the file format of :meth:`save`, as bytes.

        Returns
        -------
        bytes

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1], [5])
        ...     len(accel.Index.from_bytes(ctx, ix.to_bytes()))
        1
        """
        with tempfile.TemporaryDirectory(prefix="accel-index-") as d:
            path = os.path.join(d, "index")
            self.save(path)
            with open(path, "rb") as f:
                return f.read()

    @classmethod
    def from_bytes(cls, ctx: Any, data: Union[bytes, bytearray, memoryview]) -> "Index":
        """An index from the bytes of :meth:`to_bytes` (or of a saved file).

        Parameters
        ----------
        ctx : Context
        data : bytes-like

        Returns
        -------
        Index

        Raises
        ------
        ValueError
            Bytes that are not an index (FormatError).

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     accel.Index.from_bytes(ctx, b"junk")
        Traceback (most recent call last):
        ...
        accel._errors.FormatError: ACCEL_ERR_FORMAT: ...
        """
        with tempfile.TemporaryDirectory(prefix="accel-index-") as d:
            path = os.path.join(d, "index")
            with open(path, "wb") as f:
                f.write(bytes(data))
            return cls.load(ctx, path)

    def merge(self, other: "Index") -> None:
        """Add every entry of another index (ids, codes, labels and stamps).

        Parameters
        ----------
        other : Index
            Of the same bits and nfields.

        Raises
        ------
        ValueError
            Different bits or nfields, or an id both have (then nothing is added).

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     a, b = accel.Index(ctx), accel.Index(ctx)
        ...     a.add([1], [0]); b.add([2, 3], [1, 3])
        ...     a.merge(b)
        ...     len(a)
        3
        """
        if not isinstance(other, Index):
            raise TypeError("can only merge an Index, not %s" % type(other).__name__)
        if (other.bits, other.nfields) != (self.bits, self.nfields):
            raise ValueError("cannot merge an index of %d-bit x %d codes into one of %d-bit x %d"
                             % (other.bits, other.nfields, self.bits, self.nfields))
        ids, codes, labels, stamps = other.entries()
        if len(ids):
            self.add(ids, codes, labels if any(x is not None for x in labels) else None, stamps)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_index_from_bytes, (self._ctx, self.to_bytes()))

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

    def add(self, ids: Any, codes: Any, labels: Optional[Union[str, Sequence[Optional[str]]]] = None,
            stamps: Any = None) -> None:
        """Add entries; all or nothing.

        Parameters
        ----------
        ids : int or array of uint64
            Unique ids.
        codes : array of uint64
            As the class says.
        labels : str or sequence of str, optional
            A label per entry (a path, say); one str alone is one label.
        stamps : array of uint64, optional
            A stamp per entry (a modification time, say).

        Raises
        ------
        ValueError
            A duplicate id (then none is added), or lengths that differ.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add(7, 0xff, labels="a.jpg")
        ...     ix.entries()[2]
        ['a.jpg']
        """
        ids = _u64(ids, "ids").reshape(-1)
        c = self._codes(codes, len(ids))
        lab = None
        if labels is not None:
            labels = [labels] if isinstance(labels, (str, bytes, os.PathLike)) else list(labels)
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

    def remove(self, ids: Any) -> int:
        """Remove entries by id (unknown ids are ignored).

        Returns
        -------
        int
            How many were removed.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1, 2], [0, 0])
        ...     ix.remove([2, 3]), len(ix)
        (1, 1)
        """
        ids = _u64(ids, "ids").reshape(-1)
        n = ctypes.c_size_t()
        self._err(lib.accel_index_remove(self.handle, len(ids), ids.ctypes.data, ctypes.byref(n)))
        return n.value

    def __contains__(self, id_):
        pos = ctypes.c_size_t()
        return lib.accel_index_find(self.handle, int(id_), ctypes.byref(pos)) == 0

    def entries(self) -> Tuple[Any, Any, List[Optional[str]], Any]:
        """Every entry, in index order.

        Returns
        -------
        (ids, codes, labels, stamps)
            uint64 (n,), uint64 (n, nfields, words), a list of str or None,
            uint64 (n,).

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([4], [9])
        ...     ix.entries()[1].tolist()
        [[[9]]]
        """
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
    def meta(self) -> str:
        """A free-form string saved with the index.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.meta = "dhash of /photos"
        ...     ix.meta
        'dhash of /photos'
        """
        m = ctypes.c_char_p()
        self._err(lib.accel_index_get_meta(self.handle, ctypes.byref(m)))
        return (m.value or b"").decode(errors="replace")

    @meta.setter
    def meta(self, value: str) -> None:
        self._err(lib.accel_index_set_meta(self.handle, value.encode()))

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write to a file (atomically: a failed save leaves the previous file).

        Raises
        ------
        OSError
            The file cannot be written.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     accel.Index(ctx).save("photos.idx")  # doctest: +SKIP
        """
        self._err(lib.accel_index_save(self.handle, os.fsencode(path)))

    def _search(self, thresholds, rule, algorithm):
        o = SearchOptions.defaults()
        o.rule = choice("rule", RULES, rule)
        o.algorithm = choice("algorithm", ALGORITHMS, algorithm)
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
        return o

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

    def self_join(self, thresholds: Thresholds = 0, rule: str = "all", algorithm: str = "auto",
                  progress: ProgressArg = None) -> Tuple[Any, Any, Any]:
        """Every pair of entries within the thresholds, each once.

        Parameters
        ----------
        thresholds : int or sequence of int
            Inclusive, one for all fields or one per field.
        rule : {"all", "any"}
        algorithm : {"auto", "brute_force", "multi_index"}
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        (first, second, distances)
            uint64 ids with first < second, sorted; uint32 (npairs, nfields).

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1, 2, 3], [0, 1, 255])
        ...     first, second, d = ix.self_join(thresholds=1)
        >>> first.tolist(), second.tolist(), d.tolist()
        ([1], [2], [[1]])
        """
        o = self._search(thresholds, rule, algorithm)
        out = ctypes.c_void_p()
        with Call(progress) as c:
            o.progress = c.fn
            self._err(lib.accel_index_self_join(self.handle, ctypes.byref(o), ctypes.byref(out)))
        return self._pairs_out(out)

    def range(self, queries: Any, thresholds: Thresholds = 0, rule: str = "all", algorithm: str = "auto",
              progress: ProgressArg = None) -> Tuple[Any, Any, Any]:
        """Every entry within the thresholds of each query.

        Parameters
        ----------
        queries : array of uint64
            Codes, as for :meth:`add`.
        thresholds, rule, algorithm, progress
            As for :meth:`self_join`.

        Returns
        -------
        (query_number, id, distances)
            Sorted by query then id.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1, 2], [0, 255])
        ...     ix.range([1], thresholds=2)[1].tolist()
        [1]
        """
        back = None
        if _device_kind(queries):  # staged; the results back as its kind of array, on its device
            queries, back = host(queries, "queries")
        q = self._codes(queries, what="queries")
        o = self._search(thresholds, rule, algorithm)
        out = ctypes.c_void_p()
        with Call(progress) as c:
            o.progress = c.fn
            self._err(lib.accel_index_range(self.handle, len(q), q.ctypes.data, ctypes.byref(o),
                                            ctypes.byref(out)))
        found = self._pairs_out(out)
        return tuple(back(a) for a in found) if back is not None else found

    def knn(self, queries: Any, k: int, field: int = 0) -> Tuple[Any, Any]:
        """The k nearest entries of each query by one field's distance.

        Parameters
        ----------
        queries : array of uint64
        k : int
        field : int
            The field whose distance ranks.

        Returns
        -------
        (ids, distances)
            (nq, k) each, nearest first, ties by smaller id; missing results
            are id 2**64-1, distance 2**32-1. numpy arrays for host
            queries; for queries in GPU memory (CuPy, PyTorch, DLPack CUDA)
            arrays of their kind on their device. On a CUDA context uint64
            C-contiguous GPU queries, shaped as host queries are, are read
            in place (``accel_index_knn_arrays``); others are staged
            through the host.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1, 2, 3], [0, 7, 1])
        ...     ix.knn([0], 2)[0].tolist()
        [[1, 3]]
        """
        import numpy as np
        dv = device_in(self._ctx, queries, ("uint64",), (1, 2, 3), as3d=False)
        if dv is not None:  # in place; the results on the queries' device
            if not isinstance(k, numbers.Integral) or not 1 <= k <= 4096:
                raise ValueError("k must be an integer in 1..4096, not %r" % (k,))
            ids_d = device_empty(queries, (dv.shape[0], int(k)), "uint64", as3d=False)
            dist_d = device_empty(queries, (dv.shape[0], int(k)), "uint32", as3d=False)
            self._err(lib.accel_index_knn_arrays(self.handle, dv.ref(), k, field, ids_d.ref(), dist_d.ref()))
            return ids_d.obj, dist_d.obj
        back = None
        if _device_kind(queries):  # not usable in place: staged, the results back as its kind
            queries, back = host(queries, "queries")
        q = self._codes(queries, what="queries")
        ids = np.zeros((len(q), k), dtype=np.uint64)
        dist = np.zeros((len(q), k), dtype=np.uint32)
        self._err(lib.accel_index_knn(self.handle, len(q), q.ctypes.data, k, field, ids.ctypes.data,
                                      dist.ctypes.data))
        return (back(ids), back(dist)) if back is not None else (ids, dist)

    def groups(self, thresholds: Thresholds = 0, rule: str = "all", algorithm: str = "auto",
               progress: ProgressArg = None) -> List[Any]:
        """Groups of near-duplicates: connected components of the self-join.

        Parameters
        ----------
        thresholds, rule, algorithm, progress
            As for :meth:`self_join`.

        Returns
        -------
        list of numpy.ndarray
            uint64 ids, members sorted, groups by first member.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ix = accel.Index(ctx)
        ...     ix.add([1, 2, 3, 4], [0, 1, 3, 255])
        ...     [g.tolist() for g in ix.groups(thresholds=1)]
        [[1, 2, 3]]
        """
        o = self._search(thresholds, rule, algorithm)
        out = ctypes.c_void_p()
        with Call(progress) as c:
            o.progress = c.fn
            self._err(lib.accel_index_group(self.handle, ctypes.byref(o), ctypes.byref(out)))
        return _groups_out(out)


def _index_from_bytes(ctx: Any, data: bytes) -> Index:
    """An Index unpickled: its bytes loaded with its (recreated) context."""
    return Index.from_bytes(ctx, data)
