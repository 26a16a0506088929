"""libaccel for Python: contexts, the fallback policy, and image operations on
numpy arrays, over the library's stable C ABI (ctypes; no compilation).

    import accel, numpy as np
    with accel.Context(backend="auto") as ctx:
        gray = ctx.to_gray(rgb_uint8_array)      # Pillow's convert('L'), bit for bit
        print(ctx.stats()["image.gray"])         # where it ran, fallbacks, seconds

Errors raise AccelError with the library's status name and message.
"""
import ctypes

from . import _native
from ._native import lib

__all__ = ["AccelError", "Context", "version", "build_info", "backends", "devices"]

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
        lib.accel_backend_info_init(ctypes.byref(b))
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
        lib.accel_device_info_init(ctypes.byref(d))
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


class Context:
    """An accel_ctx: the backend choice, fallback policy, threads, logging and
    statistics for the calls made through it.

    backend: "auto" | "cpu" | "cuda"; strict: a GPU failure raises instead of
    falling back to the CPU; log: a callable(level_name, message) receiving
    the library's log lines at or above log_level (default: stderr).
    ACCEL_BACKEND / ACCEL_LOG in the environment override these, as in C.
    """

    def __init__(self, backend="auto", strict=False, device=0, memory_budget=0, threads=0,
                 log=None, log_level="warn"):
        o = _native.CtxOptions()
        _check(lib.accel_ctx_options_init(ctypes.byref(o)))
        o.backend = BACKENDS[backend]
        o.fallback = 1 if strict else 0
        o.device = device
        o.device_memory_budget = memory_budget
        o.cpu_threads = threads
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
        lib.accel_ctx_info_init(ctypes.byref(i))
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
            lib.accel_stage_stats_init(ctypes.byref(s))
            _check(lib.accel_ctx_stats_get(self.handle, k, ctypes.byref(s)), self.handle)
            out[s.stage.decode()] = {f: getattr(s, f) for f in
                                     ("runs", "gpu_runs", "cpu_runs", "fallbacks", "failures", "seconds")}
        return out

    def reset_stats(self):
        _check(lib.accel_ctx_stats_reset(self.handle), self.handle)

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
