"""libaccel on Dask: surface models and image catalogs larger than one machine.

Shadows and sky view factors of a DSM held as a ``dask.array`` are computed
chunk by chunk with ``dask.array.map_overlap``, each chunk on its window (the
chunk and the library's own halo around it, from ``accel_svf_halo``), with
the whole grid's stop height: every pixel gets the value the single-machine
run gives it, to the bit. Image files listed in a ``dask.bag`` are hashed a
partition at a time on the workers, and the hashes feed an :class:`accel.Index`
on the client.

Dask is an optional dependency: ``pip install "libaccel[dask]"``.
Nothing here needs a cluster; with a ``dask.distributed.Client`` active the
work runs on its workers (docs/dask.md shows a real cluster).

Each worker process makes one library context per backend and thread count,
on first use, and keeps it: contexts never travel between processes.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.bag as db
except ImportError as e:  # pragma: no cover - exercised only without dask
    raise ImportError("accel.dask needs Dask: pip install \"dask[array,bag]\" distributed") from e

__all__ = ["halo", "surface_extent", "shadows", "sky", "hash_bag", "index_files", "SHADOW_GRIDS", "SKY_GRIDS"]

SHADOW_GRIDS = ("sh", "vegsh", "vbshvegsh")
SKY_GRIDS = ("svf", "svfE", "svfS", "svfW", "svfN",
             "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg",
             "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg")

ArrayLike = Union[np.ndarray, "da.Array"]

# ---------------------------------------------------------------- contexts

_contexts: Dict[Tuple[str, int], Any] = {}
_contexts_lock = threading.Lock()


def _context(backend: str, threads: int) -> Any:
    """This process's context for (backend, threads), made on first use."""
    key = (backend, int(threads))
    with _contexts_lock:
        ctx = _contexts.get(key)
        if ctx is None:
            from .context import Context
            ctx = _contexts[key] = Context(backend=backend, threads=int(threads))
        return ctx


# ---------------------------------------------------------------- the halo

class _SvfOptions(ctypes.Structure):
    """accel_svf_options (include/accel/svf.h), as far as accel_svf_halo reads it."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("pixel_size", ctypes.c_double), ("patches", ctypes.c_int32),
                ("trunk_ratio", ctypes.c_double), ("max_height", ctypes.c_double), ("tile", ctypes.c_int64),
                ("progress", ctypes.c_void_p), ("progress_user", ctypes.c_void_p)]


def halo(shape: Tuple[int, int], pixel_size: float, lowest: float, highest: float, max_height: float = 0.0,
         patches: int = 153, sun: Optional[Tuple[float, float]] = None) -> Tuple[int, int]:
    """The library's halo for tiles of a grid (``accel_svf_halo``).

    Parameters
    ----------
    shape : tuple of int
        The whole grid's (rows, cols).
    pixel_size : float
        Metres per pixel.
    lowest, highest : float
        The grid's lowest DSM height and highest top (DSM, CDSM + DSM, TDSM +
        DSM), no-data cells counting as 0, after any raise of a negative DSM;
        :func:`surface_extent` computes them.
    max_height : float, optional
        The rays' stop height; 0 stands for `highest` (never a smaller halo).
    patches : int, optional
        The sky's patch option (145, 153, 306, 612) when `sun` is None.
    sun : tuple of float, optional
        (azimuth, altitude) in degrees for the shadows of that sun.

    Returns
    -------
    tuple of int
        Rows and columns a window needs beyond its tile on each side.

    Raises
    ------
    accel.AccelError
        With the library's status and message for an argument it refuses.

    Examples
    --------
    >>> halo((100, 100), 1.0, 0.0, 5.0, sun=(180.0, 45.0))
    (6, 0)
    """
    from ._errors import check
    from ._native import lib
    if not hasattr(lib, "accel_svf_halo"):
        raise NotImplementedError("the loaded libaccel has no accel_svf_halo; accel.dask needs a newer library")
    # prototypes of their own: the package's declarations of these functions stay untouched
    init = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)(("accel_svf_options_init", lib))
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                          ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("accel_svf_halo", lib))
    o = _SvfOptions()
    check(init(ctypes.addressof(o), ctypes.sizeof(o)))
    o.pixel_size, o.patches, o.max_height = float(pixel_size), int(patches), float(max_height)
    s = (ctypes.c_double * 2)(*sun) if sun is not None else None
    hr, hc = ctypes.c_int64(), ctypes.c_int64()
    check(fn(ctypes.addressof(o), int(shape[0]), int(shape[1]), float(lowest), float(highest),
             ctypes.addressof(s) if s is not None else None, ctypes.addressof(hr), ctypes.addressof(hc)))
    return hr.value, hc.value


# ---------------------------------------------------------------- surfaces

def _grid(a: Optional[ArrayLike], what: str, like: Optional["da.Array"] = None) -> Optional["da.Array"]:
    """A 2-D float32 dask array (chunked like `like`), or None."""
    if a is None:
        return None
    x = a if isinstance(a, da.Array) else da.from_array(np.asarray(a), chunks=like.chunks if like is not None else
                                                        "auto")
    if x.ndim != 2:
        raise ValueError("%s must be a 2-D grid (rows, cols), not %d-D" % (what, x.ndim))
    if like is not None:
        if x.shape != like.shape:
            raise ValueError("%s is %s, the DSM %s" % (what, x.shape, like.shape))
        if x.chunks != like.chunks:
            x = x.rechunk(like.chunks)
    return x.astype(np.float32)


def surface_extent(dsm: "da.Array", cdsm: Optional["da.Array"] = None, tdsm: Optional["da.Array"] = None,
                   trunk_ratio: float = 0.25) -> Dict[str, float]:
    """What the whole grid's run derives from all of its cells, computed on Dask.

    As the library prepares a surface (docs/svf.md): no-data (NaN) cells count
    as 0, the canopy is CDSM + DSM and the trunk zone TDSM + DSM (without a
    TDSM, `trunk_ratio` x CDSM), each 0 where it adds nothing to the DSM.

    Parameters
    ----------
    dsm, cdsm, tdsm : dask.array.Array
        The surface (2-D); cdsm and tdsm may be None.
    trunk_ratio : float, optional
        TDSM = trunk_ratio x CDSM when no TDSM is given.

    Returns
    -------
    dict
        ``raise_by`` (how much a DSM below 0 must be raised, else 0),
        ``lowest`` and ``highest`` (after that raise), ``max_height``
        (UMEP's stop height: max(max DSM, max CDSM), after the raise).

    Raises
    ------
    ValueError
        For an infinite cell, which the library refuses.

    Examples
    --------
    >>> import dask.array as da
    >>> e = surface_extent(da.from_array(np.array([[1.0, 4.0], [2.0, 3.0]], np.float32)))
    >>> (e["lowest"], e["highest"], e["max_height"])
    (1.0, 4.0, 4.0)
    """
    grids = [g for g in (dsm, cdsm, tdsm) if g is not None]
    infinite, lo, hi, chi = dask.compute(
        da.stack([da.isinf(g).any() for g in grids]).any(),
        da.where(da.isnan(dsm), 0, dsm).astype(np.float64).min(),
        da.where(da.isnan(dsm), 0, dsm).astype(np.float64).max(),
        (da.where(da.isnan(cdsm), 0, cdsm).astype(np.float64).max() if cdsm is not None else 0.0))
    if infinite:
        raise ValueError("the surface holds infinite heights; the library refuses them (NaN marks no data)")
    up = -float(lo) if lo < 0 else 0.0
    hi = float(hi) + up
    top = hi
    if cdsm is not None:
        d = da.where(da.isnan(dsm), 0, dsm).astype(np.float64) + up
        c = da.where(da.isnan(cdsm), 0, cdsm).astype(np.float64)
        t = da.where(da.isnan(tdsm), 0, tdsm).astype(np.float64) if tdsm is not None else c * trunk_ratio
        canopy, trunk = c + d, t + d
        top = float(da.maximum(da.where(canopy == d, 0, canopy), da.where(trunk == d, 0, trunk)).max().compute())
        top = max(top, hi)
    return {"raise_by": up, "lowest": float(lo) + up, "highest": top,
            "max_height": max(hi, float(chi)) if cdsm is not None else hi}


def _depth(x: "da.Array", hr: int, hc: int) -> Tuple["da.Array", Dict[int, int]]:
    """The overlap depth {0: hr, 1: hc} for x, and x rechunked so that it
    holds: an axis no longer than its halo becomes one chunk (its windows
    would be the whole axis anyway), elsewhere every chunk is at least the halo."""
    depth, chunks = {}, []
    for axis, h in ((0, hr), (1, hc)):
        size, c = x.shape[axis], x.chunks[axis]
        if h >= size:
            depth[axis], c = 0, (size,)
        else:
            depth[axis] = h
            if min(c) < h:
                from dask.array.overlap import ensure_minimum_chunksize
                c = ensure_minimum_chunksize(h, c)
        chunks.append(c)
    if tuple(chunks) != x.chunks:
        x = x.rechunk(tuple(chunks))
    return x, depth


def _prepare(dsm: ArrayLike, cdsm: Optional[ArrayLike], tdsm: Optional[ArrayLike], trunk_ratio: float,
             max_height: float):
    """The grids as float32 dask arrays of one chunking, the DSM raised when
    it goes below 0, and the whole grid's extent."""
    if tdsm is not None and cdsm is None:
        raise ValueError("a TDSM without a CDSM")
    d = _grid(dsm, "dsm")
    c, t = _grid(cdsm, "cdsm", d), _grid(tdsm, "tdsm", d)
    extent = surface_extent(d, c, t, trunk_ratio)
    if extent["raise_by"] > 0:
        # each window would otherwise be raised by its own minimum (docs/dask.md)
        d = (da.where(da.isnan(d), np.float32(0), d) + np.float32(extent["raise_by"])).astype(np.float32)
    if max_height > 0:
        extent["max_height"] = float(max_height)
    return d, c, t, extent


def _run_block(kind: str, names: Sequence[str], params: Dict[str, Any], dsm: np.ndarray,
               cdsm: Optional[np.ndarray] = None, tdsm: Optional[np.ndarray] = None) -> np.ndarray:
    """One window on this worker's context: the grids as one structured array."""
    ctx = _context(params["backend"], params["threads"])
    out = np.empty(dsm.shape, np.dtype([(n, np.float32) for n in names]))
    if dsm.size == 0:
        return out
    if kind == "shadows":
        got = ctx.svf.shadows(dsm, params["azimuth"], params["altitude"], params["pixel_size"], cdsm=cdsm,
                              tdsm=tdsm, trunk_ratio=params["trunk_ratio"], max_height=params["max_height"])
    else:
        got = ctx.svf.sky(dsm, params["pixel_size"], cdsm=cdsm, tdsm=tdsm, patches=params["patches"],
                          trunk_ratio=params["trunk_ratio"], max_height=params["max_height"])
    for n in names:
        out[n] = got[n]
    return out


def _overlapped(kind: str, names: Sequence[str], d: "da.Array", c: Optional["da.Array"], t: Optional["da.Array"],
                extent: Dict[str, float], params: Dict[str, Any], sun: Optional[Tuple[float, float]]):
    hr, hc = halo(d.shape, params["pixel_size"], extent["lowest"], extent["highest"], extent["max_height"],
                  params.get("patches", 153), sun)
    d, depth = _depth(d, hr, hc)
    args = [x.rechunk(d.chunks) for x in (d, c, t) if x is not None]
    params = dict(params, max_height=extent["max_height"])
    dtype = np.dtype([(n, np.float32) for n in names])
    block = functools.partial(_run_block, kind, tuple(names), params)
    out = da.map_overlap(block, *args, depth=depth, boundary="none", trim=True, dtype=dtype,
                         meta=np.empty((0, 0), dtype))
    return {n: out[n] for n in names}


def shadows(dsm: ArrayLike, azimuth: float, altitude: float, pixel_size: float, cdsm: Optional[ArrayLike] = None,
            tdsm: Optional[ArrayLike] = None, trunk_ratio: float = 0.25, max_height: float = 0.0,
            backend: str = "auto", threads: int = 0) -> Dict[str, "da.Array"]:
    """UMEP's shadows for one sun position, chunk by chunk on Dask.

    The grids equal ``ctx.svf.shadows`` of the whole grid, bit for bit. The
    whole grid's extent (lowest height, highest top, stop height) is computed
    first; the result is lazy.

    Parameters
    ----------
    dsm : dask.array.Array or numpy.ndarray
        Ground plus buildings, metres, 2-D (rows, cols); its chunks are kept
        where they are at least the halo.
    azimuth, altitude : float
        The sun, degrees (azimuth clockwise from north, altitude in (0, 90]).
    pixel_size : float
        Metres per pixel.
    cdsm, tdsm : array, optional
        Vegetation canopy and trunk-zone heights above ground.
    trunk_ratio : float, optional
        TDSM = trunk_ratio x CDSM without a TDSM.
    max_height : float, optional
        The rays' stop height; 0: UMEP's rule over the whole grid.
    backend : str, optional
        "auto", "cpu" or "cuda": the workers' contexts.
    threads : int, optional
        CPU threads per worker context (0: all cores).

    Returns
    -------
    dict of dask.array.Array
        "sh", "vegsh", "vbshvegsh": float32, 1 where sunlit.

    Notes
    -----
    A DSM that goes below 0 is raised by |min| (in float32) before it is cut,
    as UMEP raises it; the grids then equal the single-machine run on that
    raised DSM, which can differ from raising in double in the last bit of
    heights.

    Examples
    --------
    >>> dsm = np.zeros((64, 64), np.float32); dsm[30:34, 30:34] = 10
    >>> g = shadows(da.from_array(dsm, chunks=32), 180.0, 45.0, 1.0, backend="cpu")
    >>> int((g["sh"].compute() == 0).sum())
    40
    """
    d, c, t, extent = _prepare(dsm, cdsm, tdsm, trunk_ratio, max_height)
    params = {"kind": "shadows", "azimuth": float(azimuth), "altitude": float(altitude),
              "pixel_size": float(pixel_size), "trunk_ratio": float(trunk_ratio), "backend": backend,
              "threads": threads}
    return _overlapped("shadows", SHADOW_GRIDS, d, c, t, extent, params, (float(azimuth), float(altitude)))


def sky(dsm: ArrayLike, pixel_size: float, cdsm: Optional[ArrayLike] = None, tdsm: Optional[ArrayLike] = None,
        patches: int = 153, trunk_ratio: float = 0.25, max_height: float = 0.0, backend: str = "auto",
        threads: int = 0) -> Dict[str, "da.Array"]:
    """UMEP's sky view factors, chunk by chunk on Dask.

    The grids equal ``ctx.svf.sky`` of the whole grid, bit for bit (see
    :func:`shadows` for the parameters and the raise of a negative DSM).

    Parameters
    ----------
    dsm : dask.array.Array or numpy.ndarray
        Ground plus buildings, metres, 2-D.
    pixel_size : float
        Metres per pixel.
    cdsm, tdsm : array, optional
        Vegetation canopy and trunk-zone heights above ground.
    patches : int, optional
        145, 153 (default), 306 or 612.
    trunk_ratio, max_height, backend, threads
        As for :func:`shadows`.

    Returns
    -------
    dict of dask.array.Array
        The 5 building grids ("svf", "svfE", ...), and with a CDSM the 10
        vegetation grids: float32.

    Examples
    --------
    >>> g = sky(da.zeros((40, 40), np.float32, chunks=20), 1.0, backend="cpu")
    >>> float(g["svf"].min().compute())
    1.0
    """
    d, c, t, extent = _prepare(dsm, cdsm, tdsm, trunk_ratio, max_height)
    params = {"kind": "sky", "pixel_size": float(pixel_size), "patches": int(patches),
              "trunk_ratio": float(trunk_ratio), "backend": backend, "threads": threads}
    names = SKY_GRIDS if c is not None else SKY_GRIDS[:5]
    return _overlapped("sky", names, d, c, t, extent, params, None)


# ---------------------------------------------------------------- catalogs

def _hash_partition(paths: Iterable[str], kinds: Tuple[str, ...], size: int, binbits: int, fast: bool,
                    backend: str, threads: int) -> List[Dict[str, Any]]:
    """One partition's files hashed as one batch on this worker's context."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        return []
    r = _context(backend, threads).hash.files(paths, kinds=kinds, size=size, binbits=binbits, fast=fast)
    out = []
    for i, p in enumerate(paths):
        if r.ok(i):
            out.append(dict({"path": p, "error": None, "message": None}, **{k: r.hex(i, k) for k in kinds}))
        else:
            name, message = r.error(i)
            out.append(dict({"path": p, "error": name, "message": message}, **{k: None for k in kinds}))
    return out


def hash_bag(paths: Union[Sequence[Union[str, os.PathLike]], "db.Bag"], kinds: Sequence[str] = ("dhash",),
             size: int = 8, binbits: int = 3, fast: bool = False, partition_size: int = 256,
             backend: str = "auto", threads: int = 0) -> "db.Bag":
    """Hash image files on Dask, a partition (one batch) per task.

    Parameters
    ----------
    paths : sequence of path or dask.bag.Bag
        The files; a sequence is cut into partitions of `partition_size`.
        A single ``str`` or path is refused (it would be split into characters).
    kinds : sequence of str, optional
        Hash kinds ("ahash", "dhash", "dhash_vertical", "phash", "whash",
        "colorhash").
    size, binbits, fast
        As for ``ctx.hash.files``.
    partition_size : int, optional
        Files per partition when `paths` is a sequence.
    backend, threads
        The workers' contexts.

    Returns
    -------
    dask.bag.Bag
        One dict per file, in order: "path", one imagehash hex string per
        kind (None when the file failed), "error" (the status name or None)
        and "message".

    Examples
    --------
    >>> records = hash_bag(["a.jpg", "b.png"], kinds=("dhash",)).compute()  # doctest: +SKIP
    >>> records[0]["dhash"]  # doctest: +SKIP
    '0f2d0c0c4e4f3b1f'
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError("paths must be a sequence of paths or a dask.bag.Bag, not one path %r" % (paths,))
    kinds = tuple(kinds)
    if isinstance(kinds, str) or not kinds:
        raise TypeError("kinds must be a non-empty sequence of kind names")
    bag = paths if isinstance(paths, db.Bag) else db.from_sequence([os.fspath(p) for p in paths],
                                                                   partition_size=int(partition_size))
    return bag.map_partitions(_hash_partition, kinds, int(size), int(binbits), bool(fast), backend, int(threads))


def _hash_bits(kind: str, size: int, binbits: int) -> int:
    """Bits of one hash of `kind` (``accel_hash_bits``; its own prototypes, as in :func:`halo`)."""
    from ._errors import check
    from ._native import lib
    parse = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(("accel_hash_kind_from_string", lib))
    bits = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                            ctypes.c_void_p)(("accel_hash_bits", lib))
    k, n = ctypes.c_int(), ctypes.c_uint32()
    check(parse(kind.encode(), ctypes.addressof(k)))
    check(bits(k.value, int(size), int(binbits), ctypes.addressof(n)))
    return n.value


def _field_bits(nbits: int) -> int:
    for b in (64, 128, 256):
        if nbits <= b:
            return b
    raise ValueError("a %d-bit hash is wider than an index field (at most 256 bits)" % nbits)


def index_files(ctx: Any, paths: Union[Sequence[Union[str, os.PathLike]], "db.Bag"],
                kinds: Sequence[str] = ("dhash",), size: int = 8, binbits: int = 3, fast: bool = False,
                partition_size: int = 256, backend: str = "auto", threads: int = 0):
    """Hash files on Dask and put their hashes into a new :class:`accel.Index`.

    The hashing runs on the workers (:func:`hash_bag`); the hashes, a few
    bytes per file, come back to the client, where the index is built with
    `ctx`. Entry ids are the files' positions in `paths`, labels their paths.

    Parameters
    ----------
    ctx : accel.Context
        The client's context, which the index keeps.
    paths, kinds, size, binbits, fast, partition_size, backend, threads
        As for :func:`hash_bag`; one index field per kind.

    Returns
    -------
    index : accel.Index
        One entry per file that was hashed.
    failures : dict
        {path: (status name, message)} of the files that failed.

    Examples
    --------
    >>> index, failures = index_files(ctx, paths, kinds=("dhash", "ahash"))  # doctest: +SKIP
    >>> groups = index.groups(thresholds=4)  # doctest: +SKIP
    """
    from .index import Index
    kinds = tuple(kinds)
    records = hash_bag(paths, kinds, size, binbits, fast, partition_size, backend, threads).compute()
    nbits = [_hash_bits(k, size, binbits) for k in kinds]
    bits = _field_bits(max(nbits))
    words = bits // 64
    ids, codes, labels, failures = [], [], [], {}
    for i, r in enumerate(records):
        if r["error"] is not None:
            failures[r["path"]] = (r["error"], r["message"])
            continue
        ids.append(i)
        labels.append(r["path"])
        row = []
        for k, n in zip(kinds, nbits):
            v = int(r[k], 16) << (bits - n)  # the first bit in the most significant place
            row.extend((v >> (64 * (words - 1 - w))) & 0xFFFFFFFFFFFFFFFF for w in range(words))
        codes.append(row)
    index = Index(ctx, bits=bits, nfields=len(kinds))
    if ids:
        index.add(np.asarray(ids, np.uint64), np.asarray(codes, np.uint64).reshape(len(ids), len(kinds), words),
                  labels=labels)
    return index, failures
