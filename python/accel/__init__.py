"""libaccel for Python: contexts, the fallback policy, and image operations on
numpy arrays, over the library's stable C ABI (ctypes; no compilation).

    import accel, numpy as np
    with accel.Context(backend="auto") as ctx:
        gray = ctx.to_gray(rgb_uint8_array)      # Pillow's convert('L'), bit for bit
        print(ctx.stats()["image.gray"])         # where it ran, fallbacks, seconds
        h = ctx.hash_files(paths, kinds=("dhash", "ahash"))
        ix = accel.Index(ctx, nfields=2)         # exact Hamming search
        ix.add(np.arange(len(paths)), np.stack([h.u64("dhash"), h.u64("ahash")], axis=1))
        groups = ix.groups(thresholds=5)         # near-duplicates, rule "all"

Errors raise AccelError with the library's status name and message.
"""
import ctypes
import numbers
import os

from . import _native
from ._native import lib

__all__ = ["AccelError", "Context", "CT", "SVF", "HashResult", "Index", "groups_from_pairs", "version", "build_info",
           "backends", "devices", "hex_to_bits", "distance", "HASH_KINDS"]

HASH_KINDS = ("ahash", "dhash", "dhash_vertical", "phash", "whash", "colorhash")
DEFAULT_KINDS = ("ahash", "dhash", "phash", "whash")

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3, "off": 4}
LOG_LEVEL_NAMES = {v: k for k, v in LOG_LEVELS.items()}

# accel_dtype values (core.h) for numpy dtype strings
_DTYPES = {"uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "uint32": 5, "int32": 6,
           "uint64": 7, "int64": 8, "float32": 9, "float64": 10, "bool": 1}


class AccelError(RuntimeError):
    """A libaccel call failed. ``status`` is the accel_status value, ``name`` its
    enumerator name (e.g. "ACCEL_ERR_INVALID_ARG")."""

    def __init__(self, status, message):
        self.status = status
        self.name = lib.accel_status_string(status).decode()
        super().__init__("%s: %s" % (self.name, message))


def _check(status, ctx_handle=None):
    if status != 0:
        raise AccelError(status, lib.accel_last_error(ctx_handle).decode(errors="replace"))


def version():
    """The loaded library's version string, e.g. "0.1.0"."""
    return lib.accel_version_string().decode()


def build_info():
    """How the library was built (cuda=..., openmp=...)."""
    return lib.accel_build_info().decode()


def backends():
    """{name: {compiled, available, device_count, reason}} for "cpu" and "cuda"."""
    out = {}
    for kind in (1, 2):
        b = _native.BackendInfo()
        lib.accel_backend_info_init(ctypes.byref(b), ctypes.sizeof(b))
        _check(lib.accel_backend_query(kind, ctypes.byref(b)))
        out[b.name.decode()] = {"compiled": bool(b.compiled), "available": bool(b.available),
                                "device_count": b.device_count, "reason": b.reason.decode()}
    return out


def devices():
    """A list of dicts describing the CUDA devices (empty without a GPU)."""
    n = ctypes.c_int32()
    _check(lib.accel_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        d = _native.DeviceInfo()
        lib.accel_device_info_init(ctypes.byref(d), ctypes.sizeof(d))
        _check(lib.accel_device_query(i, ctypes.byref(d)))
        out.append({"index": d.index, "name": d.name.decode(), "total_memory": d.total_memory,
                    "free_memory": d.free_memory, "compute_capability": (d.cc_major, d.cc_minor),
                    "multiprocessors": d.multiprocessors})
    return out


def _as_array(a, writable=False):
    """Describe a numpy array for the C side (no copy); keeps strides."""
    import numpy as np
    if not isinstance(a, np.ndarray):
        raise TypeError("expected a numpy.ndarray, got %s" % type(a).__name__)
    if a.dtype.name not in _DTYPES or not a.dtype.isnative:
        raise TypeError("unsupported dtype %s" % a.dtype)
    if a.ndim > _native.MAX_DIMS:
        raise ValueError("at most %d dimensions" % _native.MAX_DIMS)
    if writable and not a.flags.writeable:
        raise ValueError("output array is read-only")
    d = _native.Array()
    d.data = a.ctypes.data
    d.dtype = _DTYPES[a.dtype.name]
    d.ndim = a.ndim
    for i in range(a.ndim):
        d.shape[i] = a.shape[i]
        d.strides[i] = a.strides[i]
    return d


def _progress_fn(progress):
    """A C progress callback calling progress(stage, fraction); a true result,
    or an exception, cancels the call. None without a callable. Keep the
    result alive for the duration of the call."""
    if progress is None:
        return None

    def on_progress(user, stage, fraction, _p=progress):
        try:
            return 1 if _p(stage.decode(), fraction) else 0
        except Exception:  # never let a Python error unwind through C
            return 1
    return _native.PROGRESS_FN(on_progress)


def _nbits(kind, size, binbits):
    n = ctypes.c_uint32()
    _check(lib.accel_hash_bits(HASH_KINDS.index(kind), size, binbits, ctypes.byref(n)))
    return n.value


def hex_to_bits(hexstr, nbits):
    """imagehash's hex string of an nbits hash -> numpy bool array of nbits
    (row-major, as imagehash's hash.hash.flatten())."""
    import numpy as np
    buf = (ctypes.c_uint8 * ((nbits + 7) // 8))()
    _check(lib.accel_hash_from_hex(hexstr.encode(), nbits, buf, len(buf)))
    return np.unpackbits(np.frombuffer(bytes(buf), dtype=np.uint8))[:nbits].astype(bool)


def distance(hex_a, hex_b):
    """Hamming distance of two hashes given as imagehash hex strings of equal length."""
    if len(hex_a) != len(hex_b):
        raise ValueError("hashes of different lengths")
    nbits = 4 * len(hex_a)
    a = (ctypes.c_uint8 * ((nbits + 7) // 8))()
    b = (ctypes.c_uint8 * ((nbits + 7) // 8))()
    _check(lib.accel_hash_from_hex(hex_a.encode(), nbits, a, len(a)))
    _check(lib.accel_hash_from_hex(hex_b.encode(), nbits, b, len(b)))
    d = ctypes.c_uint32()
    _check(lib.accel_hash_distance(a, b, nbits, ctypes.byref(d)))
    return d.value


class HashResult:
    """Hashes of a batch. ``hashes`` is a uint8 array (n, nkinds, slot_bytes)
    of packed bits (MSB first, imagehash's row order); ``status`` an int32
    array of accel_status values (0 = ok); ``messages`` maps the index of each
    failed input to its error message."""

    def __init__(self, kinds, size, binbits, hashes, status, messages):
        self.kinds, self.size, self.binbits = tuple(kinds), size, binbits
        self.hashes, self.status, self.messages = hashes, status, messages

    def __len__(self):
        return len(self.status)

    def ok(self, i):
        return int(self.status[i]) == 0

    def error(self, i):
        """(status name, message) of a failed input, or None."""
        if self.ok(i):
            return None
        return lib.accel_status_string(int(self.status[i])).decode(), self.messages.get(i, "")

    def hex(self, i, kind):
        """imagehash's str() of input i's hash of `kind` (None if the input failed)."""
        if not self.ok(i):
            return None
        k = self.kinds.index(kind)
        nbits = _nbits(kind, self.size, self.binbits)
        out = ctypes.create_string_buffer((nbits + 3) // 4 + 1)
        row = self.hashes[i, k]
        _check(lib.accel_hash_to_hex(row.ctypes.data, nbits, out, len(out)))
        return out.value.decode()

    def u64(self, kind):
        """64-bit hashes as a uint64 array (int(str(hash), 16)); 0 for failed inputs."""
        import numpy as np
        if _nbits(kind, self.size, self.binbits) != 64:
            raise ValueError("%s at this size is not a 64-bit hash" % kind)
        k = self.kinds.index(kind)
        return np.ascontiguousarray(self.hashes[:, k, :8]).view(">u8").reshape(-1).astype(np.uint64)

    def to_dicts(self):
        """One dict per input: {kind: hex} or {"error": name, "message": text}."""
        out = []
        for i in range(len(self)):
            if self.ok(i):
                out.append({k: self.hex(i, k) for k in self.kinds})
            else:
                name, msg = self.error(i)
                out.append({"error": name, "message": msg})
        return out


class Context:
    """An accel_ctx: the backend choice, fallback policy, threads, logging and
    statistics for the calls made through it.

    backend: "auto" | "cpu" | "cuda"; strict: a GPU failure raises instead of
    falling back to the CPU; log: a callable(level_name, message) receiving
    the library's log lines at or above log_level (default: stderr).
    ACCEL_BACKEND / ACCEL_LOG in the environment override these, as in C.
    threads: CPU threads (0 = all cores, at most 1024); max_pixels: the largest
    image or raster (width x height) the loaders accept (0 = 2**30).
    """

    def __init__(self, backend="auto", strict=False, device=0, memory_budget=0, threads=0,
                 log=None, log_level="warn", max_pixels=0):
        o = _native.CtxOptions()
        _check(lib.accel_ctx_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        o.backend = BACKENDS[backend]
        o.fallback = 1 if strict else 0
        o.device = device
        o.device_memory_budget = memory_budget
        o.cpu_threads = threads
        o.max_pixels = max_pixels
        o.log_level = LOG_LEVELS[log_level]
        self._log_cb = None
        if log is not None:
            def trampoline(user, level, message, _log=log):
                try:
                    _log(LOG_LEVEL_NAMES.get(level, str(level)), message.decode(errors="replace"))
                except Exception:  # never let a Python error unwind through C
                    pass
            self._log_cb = _native.LOG_FN(trampoline)
            o.log_fn = self._log_cb
        handle = ctypes.c_void_p()
        _check(lib.accel_ctx_create(ctypes.byref(o), ctypes.byref(handle)))
        self._h = handle

    def close(self):
        if getattr(self, "_h", None):
            lib.accel_ctx_destroy(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        if not self._h:
            raise ValueError("the context is closed")
        return self._h

    def info(self):
        """What the context resolved: backend, device, fallback, budget, threads, log level."""
        i = _native.CtxInfo()
        lib.accel_ctx_info_init(ctypes.byref(i), ctypes.sizeof(i))
        _check(lib.accel_ctx_query(self.handle, ctypes.byref(i)), self.handle)
        return {"backend": BACKEND_NAMES[i.backend], "device": i.device,
                "fallback": "deny" if i.fallback else "allow",
                "device_memory_budget": i.device_memory_budget, "cpu_threads": i.cpu_threads,
                "log_level": LOG_LEVEL_NAMES[i.log_level]}

    def stats(self):
        """{stage: {runs, gpu_runs, cpu_runs, fallbacks, failures, seconds}}."""
        n = ctypes.c_size_t()
        _check(lib.accel_ctx_stats_count(self.handle, ctypes.byref(n)), self.handle)
        out = {}
        for k in range(n.value):
            s = _native.StageStats()
            lib.accel_stage_stats_init(ctypes.byref(s), ctypes.sizeof(s))
            _check(lib.accel_ctx_stats_get(self.handle, k, ctypes.byref(s)), self.handle)
            out[s.stage.decode()] = {f: getattr(s, f) for f in
                                     ("runs", "gpu_runs", "cpu_runs", "fallbacks", "failures", "seconds")}
        return out

    def reset_stats(self):
        _check(lib.accel_ctx_stats_reset(self.handle), self.handle)

    @property
    def ct(self):
        """The CT stages and pipeline on numpy volumes (z, y, x): see CT."""
        return CT(self)

    @property
    def svf(self):
        """Shadows and sky view factors of surface models (UMEP's): see SVF."""
        return SVF(self)

    # ------------------------------------------------------------ hashing

    def _hash(self, fn, args, n, kinds, size, binbits, fast, max_pixels, progress):
        import numpy as np
        kinds = tuple(kinds)
        o = _native.HashOptions()
        _check(lib.accel_hash_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        if not 1 <= len(kinds) <= len(HASH_KINDS):
            raise ValueError("between 1 and %d kinds" % len(HASH_KINDS))
        for i, k in enumerate(kinds):
            if k not in HASH_KINDS:
                raise ValueError("unknown hash kind %r (one of %s)" % (k, ", ".join(HASH_KINDS)))
            o.kinds[i] = HASH_KINDS.index(k)
        o.nkinds = len(kinds)
        o.hash_size = size
        o.color_binbits = binbits
        o.fast = 1 if fast else 0
        o.max_pixels = max_pixels
        messages = {}

        def on_error(user, index, status, message):
            messages[index] = message.decode(errors="replace")
        err_cb = _native.HASH_ERROR_FN(on_error)
        o.on_error = err_cb
        prog_cb = _progress_fn(progress)
        if prog_cb is not None:
            o.progress = prog_cb
        slot = ctypes.c_size_t()
        _check(lib.accel_hash_slot_bytes(ctypes.byref(o), ctypes.byref(slot)))
        hashes = np.zeros((n, len(kinds), slot.value), dtype=np.uint8)
        status = np.zeros(n, dtype=np.int32)
        _check(fn(self.handle, *args, n, ctypes.byref(o), hashes.ctypes.data, slot.value, status.ctypes.data),
               self.handle)
        return HashResult(kinds, size, binbits, hashes, status, messages)

    def hash_files(self, paths, kinds=DEFAULT_KINDS, size=8, binbits=3, fast=False, max_pixels=0, progress=None):
        """Hash image files (JPEG/PNG), each decoded once for all `kinds`; bit-exact
        with imagehash (see docs/hash.md). Returns a HashResult; a file that cannot
        be read or decoded gets an error status, never an exception."""
        paths = [os.fspath(p) for p in paths]
        arr = (ctypes.c_char_p * len(paths))(*[p.encode() for p in paths])
        return self._hash(lib.accel_hash_files, (arr,), len(paths), kinds, size, binbits, fast, max_pixels,
                          progress)

    def hash_bytes(self, blobs, kinds=DEFAULT_KINDS, size=8, binbits=3, fast=False, max_pixels=0, progress=None):
        """Hash encoded images given as bytes-like objects."""
        blobs = [bytes(b) for b in blobs]
        ptrs = (ctypes.c_void_p * len(blobs))(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in blobs])
        sizes = (ctypes.c_size_t * len(blobs))(*[len(b) for b in blobs])
        return self._hash(lib.accel_hash_buffers, (ptrs, sizes), len(blobs), kinds, size, binbits, fast,
                          max_pixels, progress)

    def hash_arrays(self, images, kinds=DEFAULT_KINDS, size=8, binbits=3, progress=None):
        """Hash decoded images: uint8 numpy arrays (H, W) "L", (H, W, 2) "LA",
        (H, W, 3) "RGB" or (H, W, 4) "RGBA", as imagehash hashes
        PIL.Image.fromarray(array)."""
        descs = [_as_array(a) for a in images]
        arr = (_native.Array * len(descs))(*descs)
        return self._hash(lib.accel_hash_arrays, (arr,), len(descs), kinds, size, binbits, False, 0, progress)

    def decode(self, source, gray=False, max_pixels=0):
        """Decode a JPEG/PNG (path or bytes) as Pillow does: uint8 (H, W, 3) RGB, or
        (H, W) with gray=True (Pillow's convert('L')). Returns (array, mode name)."""
        import numpy as np
        o = _native.DecodeOptions()
        lib.accel_decode_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.target = 0 if gray else 1
        o.max_pixels = max_pixels
        info = _native.ImageInfo()
        lib.accel_image_info_init(ctypes.byref(info), ctypes.sizeof(info))
        buf = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            _check(lib.accel_image_decode_buffer(self.handle, data, len(data), ctypes.byref(o), ctypes.byref(buf),
                                                 ctypes.byref(info)), self.handle)
        else:
            _check(lib.accel_image_decode_file(self.handle, os.fspath(source).encode(), ctypes.byref(o),
                                               ctypes.byref(buf), ctypes.byref(info)), self.handle)
        try:
            view = _native.Array()
            lib.accel_buffer_view(buf, ctypes.byref(view))
            shape = tuple(view.shape[i] for i in range(view.ndim))
            n = int(np.prod(shape))
            out = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(view.data)).reshape(shape).copy()
        finally:
            lib.accel_buffer_destroy(buf)
        return out, lib.accel_image_mode_name(info.mode).decode()

    def to_gray(self, image, out=None):
        """uint8 (H, W) or (H, W, C) with C in 1..4 -> uint8 (H, W), with Pillow's
        convert('L') arithmetic. Any strides; ``out`` may be given."""
        import numpy as np
        src = _as_array(image)
        if out is None:
            out = np.empty(image.shape[:2], dtype=np.uint8)
        dst = _as_array(out, writable=True)
        _check(lib.accel_image_to_gray(self.handle, ctypes.byref(src), ctypes.byref(dst)), self.handle)
        return out


# ---------------------------------------------------------------- the Hamming index

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
        _check(lib.accel_groups_view(handle, ctypes.byref(ng), ctypes.byref(off), ctypes.byref(mem)))
        offsets = np.ctypeslib.as_array((ctypes.c_uint64 * (ng.value + 1)).from_address(off.value)).copy()
        total = int(offsets[-1])
        members = (np.ctypeslib.as_array((ctypes.c_uint64 * total).from_address(mem.value)).copy()
                   if total else np.zeros(0, dtype=np.uint64))
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
    _check(lib.accel_groups_from_pairs(len(first), first.ctypes.data, second.ctypes.data, ctypes.byref(out)))
    return _groups_out(out)


class Index:
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

    def __init__(self, ctx, bits=64, nfields=1, _handle=None):
        self._ctx = ctx  # the context must outlive the index
        if _handle is not None:
            self._h = _handle
        else:
            o = _native.IndexOptions()
            _check(lib.accel_index_options_init(ctypes.byref(o), ctypes.sizeof(o)))
            o.bits = bits
            o.nfields = nfields
            h = ctypes.c_void_p()
            _check(lib.accel_index_create(ctx.handle, ctypes.byref(o), ctypes.byref(h)), ctx.handle)
            self._h = h
        b, f = ctypes.c_uint32(), ctypes.c_uint32()
        _check(lib.accel_index_info(self._h, ctypes.byref(b), ctypes.byref(f), None))
        self.bits, self.nfields = b.value, f.value
        self.words = self.bits // 64

    @classmethod
    def load(cls, ctx, path):
        """An index saved by save() (or by ``accel index build``)."""
        h = ctypes.c_void_p()
        _check(lib.accel_index_load(ctx.handle, os.fspath(path).encode(), ctypes.byref(h)), ctx.handle)
        return cls(ctx, _handle=h)

    def close(self):
        if getattr(self, "_h", None):
            lib.accel_index_destroy(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        if not getattr(self, "_h", None):
            raise ValueError("the index is closed")
        return self._h

    def _err(self, status):
        _check(status, self._ctx.handle)

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
        o = _native.SearchOptions()
        _check(lib.accel_search_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        if rule not in RULES:
            raise ValueError("rule must be 'all' or 'any'")
        if algorithm not in ALGORITHMS:
            raise ValueError("algorithm must be one of %s" % ", ".join(ALGORITHMS))
        o.rule = RULES[rule]
        o.algorithm = ALGORITHMS[algorithm]
        th = [int(thresholds)] * self.nfields if isinstance(thresholds, numbers.Integral) else [int(t) for t in thresholds]
        if len(th) != self.nfields:
            raise ValueError("%d thresholds for %d fields" % (len(th), self.nfields))
        for f, t in enumerate(th):
            if t < 0:
                raise ValueError("thresholds must be >= 0")
            o.thresholds[f] = t
        cb = _progress_fn(progress)
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
            first = np.ctypeslib.as_array((ctypes.c_uint64 * n.value).from_address(a.value)).copy()
            second = np.ctypeslib.as_array((ctypes.c_uint64 * n.value).from_address(b.value)).copy()
            dist = np.ctypeslib.as_array((ctypes.c_uint32 * (n.value * nf.value)).from_address(d.value)).copy()
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


# ---------------------------------------------------------------- CT

COMPARES = {">": 0, ">=": 1, "<": 2, "<=": 3}
PORES = {"closed": 0, "all": 1}
TIES = {"skimage": 0, "stable": 1}
TRIMS = {"saddles": 1, "nearby": 2}


class CT:
    """CT pore segmentation on numpy volumes indexed (z, y, x) (include/accel/ct.h).

    Masks come back as bool arrays; every stage accepts any strides. The
    semantics are SciPy's (fill_holes, edt) and scikit-image 0.19.3's
    (markers = peak_local_max, watershed), reproduced exactly."""

    def __init__(self, ctx):
        self._ctx = ctx

    def _h(self):
        return self._ctx.handle

    @staticmethod
    def _vol(a, dtypes, what):
        import numpy as np
        a = np.asarray(a)
        if a.ndim != 3:
            raise ValueError("%s must be a 3-D volume (z, y, x), not %d-D" % (what, a.ndim))
        if a.dtype == bool:
            return a
        if a.dtype.name not in dtypes:
            raise TypeError("%s must be %s, not %s" % (what, " or ".join(dtypes), a.dtype))
        return a

    @staticmethod
    def _spacing(spacing):
        if spacing is None:
            return None
        sp = (ctypes.c_double * 3)(*[float(x) for x in spacing])
        if len(spacing) != 3:
            raise ValueError("spacing has 3 values (z, y, x)")
        return sp

    def rescale(self, volume, slope=None, intercept=None):
        """int16/uint16 -> float32: volume * slope[z] + intercept[z] (DICOM's rescale);
        slope and intercept are per slice (or scalars)."""
        import numpy as np
        v = self._vol(volume, ("int16", "uint16"), "volume")
        nz = v.shape[0]
        sl = None if slope is None else np.ascontiguousarray(np.broadcast_to(np.asarray(slope, float), (nz,)))
        ic = None if intercept is None else np.ascontiguousarray(np.broadcast_to(np.asarray(intercept, float), (nz,)))
        out = np.empty(v.shape, np.float32)
        _check(lib.accel_ct_rescale(self._h(), ctypes.byref(_as_array(v)), None if sl is None else sl.ctypes.data,
                                    None if ic is None else ic.ctypes.data, ctypes.byref(_as_array(out, True))),
               self._h())
        return out

    def threshold(self, volume, threshold, compare=">"):
        """volume <compare> threshold as a bool volume; compare one of > >= < <=."""
        import numpy as np
        v = self._vol(volume, ("uint8", "int16", "uint16", "int32", "float32"), "volume")
        if v.dtype == bool:
            v = v.view(np.uint8)
        out = np.empty(v.shape, bool)
        _check(lib.accel_ct_threshold(self._h(), ctypes.byref(_as_array(v)), float(threshold), COMPARES[compare],
                                      ctypes.byref(_as_array(out, True))), self._h())
        return out

    def fill_holes(self, mask, connectivity=6):
        """scipy.ndimage.binary_fill_holes (connectivity 6, SciPy's default, or 26)."""
        import numpy as np
        m = self._vol(mask, ("uint8",), "mask")
        out = np.empty(m.shape, bool)
        _check(lib.accel_ct_fill_holes(self._h(), ctypes.byref(_as_array(m)), int(connectivity),
                                       ctypes.byref(_as_array(out, True))), self._h())
        return out

    def edt(self, mask, spacing=None):
        """scipy.ndimage.distance_transform_edt(mask, sampling=spacing) as float32."""
        import numpy as np
        m = self._vol(mask, ("uint8",), "mask")
        out = np.empty(m.shape, np.float32)
        _check(lib.accel_ct_edt(self._h(), ctypes.byref(_as_array(m)), self._spacing(spacing),
                                ctypes.byref(_as_array(out, True))), self._h())
        return out

    def markers(self, edt, mask, min_distance=3, smooth_sigma=0.0, trim=(), saddle_iterations=20,
                nearby_factor=1.0, spacing=None):
        """peak_local_max(edt, min_distance, exclude_border=False, labels=26-connected
        components of mask), numbered 1..n in C order: (int32 volume, n). smooth_sigma:
        the peak search sees gaussian_filter(edt, sigma). trim: any of "saddles",
        "nearby" (SNOW's trims, see trim_markers), applied to the peaks found."""
        import numpy as np
        e = self._vol(edt, ("float32",), "edt")
        m = self._vol(mask, ("uint8",), "mask")
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing)
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        out = np.empty(e.shape, np.int32)
        n = ctypes.c_uint32()
        _check(lib.accel_ct_markers(self._h(), ctypes.byref(_as_array(e)), ctypes.byref(_as_array(m)),
                                    ctypes.byref(o), ctypes.byref(_as_array(out, True)), ctypes.byref(n)),
               self._h())
        return out, n.value

    def trim_markers(self, edt, peaks, trim=("saddles", "nearby"), saddle_iterations=20, nearby_factor=1.0,
                     spacing=None):
        """SNOW's trims of given peaks (nonzero voxels) with PoreSpy 3's rules
        (trim_saddle_points, trim_nearby_peaks): (int32 volume numbered by 26-connected
        group in C order, n)."""
        import numpy as np
        e = self._vol(edt, ("float32",), "edt")
        pk = self._vol(peaks, ("int32",), "peaks")
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing)
        out = np.empty(e.shape, np.int32)
        n = ctypes.c_uint32()
        _check(lib.accel_ct_trim_markers(self._h(), ctypes.byref(_as_array(e)), ctypes.byref(_as_array(pk)),
                                         ctypes.byref(o), ctypes.byref(_as_array(out, True)), ctypes.byref(n)),
               self._h())
        return out, n.value

    @staticmethod
    def _trim_flags(trim):
        if isinstance(trim, str):
            trim = (trim,)
        flags = 0
        for t in trim:
            if t not in TRIMS:
                raise ValueError("unknown trim %r (saddles, nearby)" % (t,))
            flags |= TRIMS[t]
        return flags

    def _marker_options(self, trim, saddle_iterations, nearby_factor, spacing):
        o = _native.CtMarkerOptions()
        _check(lib.accel_ct_marker_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        if spacing is not None:
            for i in range(3):
                o.spacing[i] = float(spacing[i])
        return o

    def watershed(self, image, markers, mask=None, ties="skimage", progress=None):
        """skimage.segmentation.watershed(image, markers, mask=mask) (connectivity 1):
        int32 labels. ties: "skimage" (its heap's order of equal markers) or "stable"
        (equal markers in C order)."""
        import numpy as np
        im = self._vol(image, ("float32",), "image")
        mk = self._vol(markers, ("int32",), "markers")
        o = _native.CtWatershedOptions()
        _check(lib.accel_ct_watershed_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        o.ties = TIES[ties]
        cb = _progress_fn(progress)
        if cb is not None:
            o.progress = cb
        mdesc = None
        if mask is not None:
            mdesc = _as_array(self._vol(mask, ("uint8",), "mask"))
        out = np.empty(im.shape, np.int32)
        _check(lib.accel_ct_watershed(self._h(), ctypes.byref(_as_array(im)), ctypes.byref(_as_array(mk)),
                                      None if mdesc is None else ctypes.byref(mdesc), ctypes.byref(o),
                                      ctypes.byref(_as_array(out, True))), self._h())
        return out

    def network(self, labels, edt, spacing=None):
        """The pore network: {"porosity", "regions": [dict...], "throats": [dict...]}."""
        lab = self._vol(labels, ("int32",), "labels")
        e = self._vol(edt, ("float32",), "edt")
        h = ctypes.c_void_p()
        _check(lib.accel_ct_network_build(self._h(), ctypes.byref(_as_array(lab)), ctypes.byref(_as_array(e)),
                                          self._spacing(spacing), ctypes.byref(h)), self._h())
        return _network_dict(h)

    def pipeline(self, volume, threshold, compare=">", pores="closed", spacing=(1.0, 1.0, 1.0), min_distance=3,
                 smooth_sigma=0.0, ties="skimage", fill_connectivity=6, slope=None, intercept=None, markers=None,
                 outputs=("filled", "pores", "edt", "markers", "labels", "network"), progress=None, trim=(),
                 saddle_iterations=20, nearby_factor=1.0):
        """The whole chain in one call (one upload and one download per output on a GPU):
        a dict with the requested outputs among solid, filled, pores, edt, markers,
        labels, network, plus "marker_count"."""
        import numpy as np
        v = self._vol(volume, ("uint8", "int16", "uint16", "int32", "float32"), "volume")
        if v.dtype == bool:
            v = v.view(np.uint8)
        o = _native.CtPipelineOptions()
        _check(lib.accel_ct_pipeline_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        keep = []
        if slope is not None or intercept is not None:
            nz = v.shape[0]
            sl = np.ascontiguousarray(np.broadcast_to(np.asarray(1.0 if slope is None else slope, float), (nz,)))
            ic = np.ascontiguousarray(np.broadcast_to(np.asarray(0.0 if intercept is None else intercept, float),
                                                      (nz,)))
            keep += [sl, ic]
            o.slope = sl.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
            o.intercept = ic.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        o.threshold = float(threshold)
        o.compare = COMPARES[compare]
        o.fill_connectivity = int(fill_connectivity)
        o.pores = PORES[pores]
        for i in range(3):
            o.spacing[i] = float(spacing[i])
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        o.ties = TIES[ties]
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        cb = _progress_fn(progress)
        if cb is not None:
            o.progress = cb
        p = ctypes.c_void_p()
        _check(lib.accel_ct_pipeline_create(self._h(), ctypes.byref(o), ctypes.byref(p)), self._h())
        try:
            out = _native.CtOutputs()
            _check(lib.accel_ct_outputs_init(ctypes.byref(out), ctypes.sizeof(out)))
            kinds = {"solid": bool, "filled": bool, "pores": bool, "edt": np.float32, "markers": np.int32,
                     "labels": np.int32}
            result, descs = {}, []
            for name in outputs:
                if name == "network":
                    continue
                if name not in kinds:
                    raise ValueError("unknown output %r" % name)
                result[name] = np.empty(v.shape, kinds[name])
                d = _as_array(result[name], True)
                descs.append(d)
                setattr(out, name, ctypes.cast(ctypes.pointer(d), ctypes.c_void_p))
            net = ctypes.c_void_p()
            if "network" in outputs:
                out.network = ctypes.pointer(net)
            mk = None
            if markers is not None:
                mk = _as_array(self._vol(markers, ("int32",), "markers"))
            _check(lib.accel_ct_pipeline_run(p, ctypes.byref(_as_array(v)), None if mk is None else ctypes.byref(mk),
                                             ctypes.byref(out)), self._h())
            if "network" in outputs:
                result["network"] = _network_dict(net)
            result["marker_count"] = out.marker_count
            return result
        finally:
            lib.accel_ct_pipeline_destroy(p)


def _network_dict(h):
    try:
        nr, nt, por = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_double()
        _check(lib.accel_ct_network_info(h, ctypes.byref(nr), ctypes.byref(nt), ctypes.byref(por)))
        regions, throats = [], []
        for i in range(nr.value):
            r = _native.CtRegion()
            r.struct_size = ctypes.sizeof(r)
            _check(lib.accel_ct_network_region(h, i, ctypes.byref(r)))
            regions.append({"label": r.label, "voxels": r.voxels, "volume": r.volume,
                            "equivalent_radius": r.equivalent_radius, "centroid": tuple(r.centroid),
                            "inscribed_radius": r.inscribed_radius})
        for i in range(nt.value):
            t = _native.CtThroat()
            t.struct_size = ctypes.sizeof(t)
            _check(lib.accel_ct_network_throat(h, i, ctypes.byref(t)))
            throats.append({"a": t.a, "b": t.b, "faces": t.faces, "area": t.area,
                            "inscribed_radius": t.inscribed_radius})
        return {"porosity": por.value, "regions": regions, "throats": throats}
    finally:
        lib.accel_ct_network_destroy(h)


SVF_GRIDS = ("svf", "svfE", "svfS", "svfW", "svfN",
             "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg",
             "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg")
SVF_MATRICES = ("shmat", "vegshmat", "vbshvegshmat")


def _patch_count(option):
    n = ctypes.c_int32()
    if lib.accel_svf_patches(int(option), ctypes.byref(n), None, None) != 0:
        raise ValueError("patches: UMEP's options are 145, 153, 306 and 612, not %r" % (option,))
    return n.value


class SVF:
    """Shadows and sky view factors as UMEP's SOLWEIG computes them
    (include/accel/svf.h, docs/svf.md), on 2-D numpy grids (rows, cols),
    converted to float32. dsm: ground and buildings (m); cdsm: vegetation
    height above ground (None: none); tdsm: trunk-zone height (None:
    trunk_ratio * cdsm). pixel_size in metres is required."""

    def __init__(self, ctx):
        self._ctx = ctx

    def _h(self):
        return self._ctx.handle

    @staticmethod
    def _grid(a, what):
        import numpy as np
        if a is None:
            return None
        a = np.asarray(a, dtype=np.float32)
        if a.ndim != 2:
            raise ValueError("%s must be a 2-D grid (rows, cols), not %d-D" % (what, a.ndim))
        return a

    @staticmethod
    def _options(pixel_size, patches=153, trunk_ratio=0.25, max_height=0.0, tile=0, progress=None):
        o = _native.SvfOptions()
        _check(lib.accel_svf_options_init(ctypes.byref(o), ctypes.sizeof(o)))
        o.pixel_size = float(pixel_size)
        o.patches = int(patches)
        o.trunk_ratio = float(trunk_ratio)
        o.max_height = float(max_height)
        o.tile = int(tile)
        cb = _progress_fn(progress)
        if cb is not None:
            o.progress = cb
        return o, cb

    @staticmethod
    def patches(option=153):
        """(azimuth, altitude) in degrees of every patch of a patch option, in
        UMEP's order (the matrices' bit order)."""
        import numpy as np
        n = _patch_count(option)
        az, alt = np.empty(n), np.empty(n)
        _check(lib.accel_svf_patches(int(option), ctypes.byref(ctypes.c_int32()), az.ctypes.data, alt.ctypes.data),
               "accel_svf_patches")
        return az, alt

    def shadows(self, dsm, azimuth, altitude, pixel_size, cdsm=None, tdsm=None, trunk_ratio=0.25, max_height=0.0,
                tile=0, progress=None):
        """UMEP's shadowingfunction_20 for one sun position: a dict of float32
        grids "sh", "vegsh", "vbshvegsh" (1 = sunlit)."""
        import numpy as np
        d, c, t = self._grid(dsm, "dsm"), self._grid(cdsm, "cdsm"), self._grid(tdsm, "tdsm")
        o, keep = self._options(pixel_size, 153, trunk_ratio, max_height, tile, progress)
        out = {k: np.empty(d.shape, np.float32) for k in ("sh", "vegsh", "vbshvegsh")}
        arr = {k: _as_array(v, True) for k, v in out.items()}
        ca = _as_array(c) if c is not None else None
        ta = _as_array(t) if t is not None else None
        _check(lib.accel_svf_shadows(self._h(), ctypes.byref(_as_array(d)),
                                     ctypes.byref(ca) if ca is not None else None,
                                     ctypes.byref(ta) if ta is not None else None,
                                     float(azimuth), float(altitude), ctypes.byref(o), ctypes.byref(arr["sh"]),
                                     ctypes.byref(arr["vegsh"]), ctypes.byref(arr["vbshvegsh"])), self._h())
        del keep
        return out

    def sky(self, dsm, pixel_size, cdsm=None, tdsm=None, patches=153, trunk_ratio=0.25, max_height=0.0, tile=0,
            matrices=False, unpack=False, progress=None):
        """UMEP's svfForProcessing153: a dict of the float32 grids (the 5
        building grids, and the 10 vegetation ones with a cdsm). With
        matrices=True also "shmat" (and "vegshmat", "vbshvegshmat" with a
        cdsm): uint8 (rows, cols, ceil(P/8)) with patch p in bit p % 8 of
        byte p // 8, or with unpack=True uint8 0/1 (rows, cols, P) as
        np.unpackbits(m, axis=2, bitorder="little")[..., :P]."""
        import numpy as np
        d, c, t = self._grid(dsm, "dsm"), self._grid(cdsm, "cdsm"), self._grid(tdsm, "tdsm")
        o, keep = self._options(pixel_size, patches, trunk_ratio, max_height, tile, progress)
        n = _patch_count(patches)
        names = SVF_GRIDS if c is not None else SVF_GRIDS[:5]
        out = {k: np.empty(d.shape, np.float32) for k in names}
        keep_arrays = []
        grids = (ctypes.c_void_p * len(SVF_GRIDS))()
        for i, k in enumerate(SVF_GRIDS):
            if k in out:
                a = _as_array(out[k], True)
                keep_arrays.append(a)
                grids[i] = ctypes.addressof(a)
        mats = None
        if matrices:
            mats = (ctypes.c_void_p * 3)()
            for i, k in enumerate(SVF_MATRICES[:3 if c is not None else 1]):
                out[k] = np.zeros(d.shape + ((n + 7) // 8,), np.uint8)
                a = _as_array(out[k], True)
                keep_arrays.append(a)
                mats[i] = ctypes.addressof(a)
        ca = _as_array(c) if c is not None else None
        ta = _as_array(t) if t is not None else None
        _check(lib.accel_svf_sky(self._h(), ctypes.byref(_as_array(d)), ctypes.byref(ca) if ca is not None else None,
                                 ctypes.byref(ta) if ta is not None else None, ctypes.byref(o), grids, mats),
               self._h())
        del keep
        if matrices and unpack:
            for k in SVF_MATRICES:
                if k in out:
                    out[k] = np.unpackbits(out[k], axis=2, bitorder="little")[..., :n]
        return out
