"""The library and its contexts: version, build, backends and devices; Context,
with image decoding and gray conversion, and the domains' operations as
ctx.hash, ctx.ct, ctx.svf and ctx.reg."""
import ctypes
import functools
import importlib
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._arrays import Array, as_array, buffer_copy, host
from ._errors import check, choice
from ._native import BackendInfo, CtxInfo, CtxOptions, DeviceInfo, Handle, LOG_FN, P, StageStats, c_status, c_struct
from ._native import declare, lib
from .hash import Hash

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3, "off": 4}
SYNC_POLICIES = {"index": 0, "all": 1, "none": 2}
LOG_LEVEL_NAMES = {v: k for k, v in LOG_LEVELS.items()}

DecodeOptions = c_struct("accel_decode_options", """
    uint32_t struct_size; accel_decode_target target; uint64_t max_pixels;""")
ImageInfo = c_struct("accel_image_info", """
    uint32_t struct_size; accel_image_format format; accel_image_mode mode; int64_t width, height;""")

declare({
    "accel_image_to_gray": (c_status, [ctypes.c_void_p, P(Array), P(Array)]),
    "accel_decode_options_init": (c_status, [P(DecodeOptions), ctypes.c_size_t]),
    "accel_image_info_init": (c_status, [P(ImageInfo), ctypes.c_size_t]),
    "accel_image_mode_name": (ctypes.c_char_p, [ctypes.c_int]),
    "accel_image_decode_file": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(DecodeOptions), P(ctypes.c_void_p),
                                           P(ImageInfo)]),
    "accel_image_decode_buffer": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, P(DecodeOptions),
                                             P(ctypes.c_void_p), P(ImageInfo)]),
})


def version() -> str:
    """The loaded library's version string.

    Returns
    -------
    str
        e.g. ``"0.1.0"``; ``accel.__version__`` is the same string.

    Examples
    --------
    >>> import accel
    >>> accel.version() == accel.__version__
    True
    """
    return lib.accel_version_string().decode()


def build_info() -> str:
    """How the library was built.

    Returns
    -------
    str
        Space-separated ``key=value`` pairs (cuda=..., openmp=..., tiff=...).

    Examples
    --------
    >>> import accel
    >>> "openmp=" in accel.build_info()
    True
    """
    return lib.accel_build_info().decode()


def backends() -> Dict[str, Dict[str, Any]]:
    """The backends this build has and whether they can run here.

    Returns
    -------
    dict
        ``{name: {"compiled", "available", "device_count", "reason"}}`` for
        ``"cpu"`` and ``"cuda"``.

    Examples
    --------
    >>> import accel
    >>> accel.backends()["cpu"]["available"]
    True
    """
    out = {}
    for kind in (1, 2):
        b = BackendInfo.defaults()
        check(lib.accel_backend_query(kind, ctypes.byref(b)))
        out[b.name.decode()] = {"compiled": bool(b.compiled), "available": bool(b.available),
                                "device_count": b.device_count, "reason": b.reason.decode()}
    return out


def devices() -> List[Dict[str, Any]]:
    """The CUDA devices.

    Returns
    -------
    list of dict
        index, name, total_memory, free_memory, compute_capability,
        multiprocessors of each device; empty without a GPU.

    Examples
    --------
    >>> import accel
    >>> isinstance(accel.devices(), list)
    True
    """
    n = ctypes.c_int32()
    check(lib.accel_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        d = DeviceInfo.defaults()
        check(lib.accel_device_query(i, ctypes.byref(d)))
        out.append({"index": d.index, "name": d.name.decode(), "total_memory": d.total_memory,
                    "free_memory": d.free_memory, "compute_capability": (d.cc_major, d.cc_minor),
                    "multiprocessors": d.multiprocessors})
    return out


def _domain(module, cls, doc):
    """ctx.<domain>: an instance of python/accel/<module>.py's class `cls` for this
    context (imported when first used), documented by `doc`."""
    def get(self):
        return getattr(importlib.import_module("." + module, __package__), cls)(self)
    example = ("\n\n    Examples\n    --------\n    >>> import accel\n    >>> accel.Context().%s\n"
               "    <accel.%s.%s object at ...>\n" % (module, module, cls))
    return property(get, doc=doc + ": see accel.%s." % cls + example)


def _hash_alias(method):
    """ctx.hash_<name>, the name ctx.hash.<name> had before ctx.hash: the same call."""
    @functools.wraps(method)
    def alias(self, *args, **kwargs):
        return method(self.hash, *args, **kwargs)
    alias.__name__ = "hash_" + method.__name__
    alias.__qualname__ = "Context." + alias.__name__
    return alias


class Context(Handle):
    """An ``accel_ctx``: the backend choice, fallback policy, threads, logging
    and statistics for the calls made through it.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda"}
        Where stages run; "auto" uses a GPU when one is usable.
    strict : bool
        A GPU failure raises instead of falling back to the CPU.
    device : int
        The CUDA device.
    memory_budget : int
        Device memory the context may hold, bytes (0: 90% of the free memory).
    threads : int
        CPU threads (0: all cores, at most 1024).
    log : callable(level_name, message), optional
        Receives the library's log lines at or above `log_level` (default:
        they go to stderr).
    log_level : {"debug", "info", "warn", "error", "off"}
    max_pixels : int
        The largest image or raster (width x height) the loaders accept
        (0: 2**30).
    sync : {"index", "all", "none"}
        Which saved files are fsync'd before they replace their target:
        index files only (default), every file, or none. Every save is
        atomic either way (a complete file or the previous one, never a
        partial one); the sync makes it survive a power failure that follows
        it, at the cost of the disk's time for the whole file.

    Notes
    -----
    ACCEL_BACKEND and ACCEL_LOG in the environment override `backend` and
    `log_level`, as in C. A context pickles as its parameters and is
    recreated, with a library context of its own, where it is unpickled (a
    `log` callable must be picklable itself). The domains' calls are
    ``ctx.hash``, ``ctx.ct``, ``ctx.svf`` and ``ctx.reg``.

    Examples
    --------
    >>> import accel, pickle
    >>> with accel.Context(backend="cpu", threads=2) as ctx:
    ...     copy = pickle.loads(pickle.dumps(ctx))
    ...     copy.info()["backend"], copy.info()["cpu_threads"]
    ('cpu', 2)
    """

    _what = "context"

    def __init__(self, backend: str = "auto", strict: bool = False, device: int = 0, memory_budget: int = 0,
                 threads: int = 0, log: Optional[Callable[[str, str], Any]] = None, log_level: str = "warn",
                 max_pixels: int = 0, sync: str = "index") -> None:
        self._args = dict(backend=backend, strict=strict, device=device, memory_budget=memory_budget,
                          threads=threads, log=log, log_level=log_level, max_pixels=max_pixels, sync=sync)
        o = CtxOptions.defaults()
        o.backend = choice("backend", BACKENDS, backend)
        o.fallback = 1 if strict else 0
        o.device = device
        o.device_memory_budget = memory_budget
        o.cpu_threads = threads
        o.max_pixels = max_pixels
        o.sync = choice("sync", SYNC_POLICIES, sync)
        o.log_level = choice("log_level", LOG_LEVELS, log_level)
        self._log_cb = None
        if log is not None:
            if not callable(log):
                raise TypeError("log must be a callable(level_name, message), not %s" % type(log).__name__)

            def trampoline(user, level, message, _log=log):
                try:
                    _log(LOG_LEVEL_NAMES.get(level, str(level)), message.decode(errors="replace"))
                except Exception:  # never let a Python error unwind through C
                    pass
            self._log_cb = LOG_FN(trampoline)
            o.log_fn = self._log_cb
        handle = ctypes.c_void_p()
        check(lib.accel_ctx_create(ctypes.byref(o), ctypes.byref(handle)))
        self._h = handle

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_recreate_context, (self._args,))

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % kv for kv in self._args.items() if kv[0] != "log")
        return "accel.Context(%s)%s" % (shown, "" if getattr(self, "_h", None) else " (closed)")

    def _destroy(self, h):
        lib.accel_ctx_destroy(h)

    def info(self) -> Dict[str, Any]:
        """What the context resolved.

        Returns
        -------
        dict
            backend (the one in use), device, fallback ("allow" or "deny"),
            device_memory_budget, cpu_threads, log_level.

        Examples
        --------
        >>> import accel
        >>> with accel.Context(backend="cpu") as ctx:
        ...     ctx.info()["backend"]
        'cpu'
        """
        i = CtxInfo.defaults()
        check(lib.accel_ctx_query(self.handle, ctypes.byref(i)), self.handle)
        return {"backend": BACKEND_NAMES[i.backend], "device": i.device,
                "fallback": "deny" if i.fallback else "allow",
                "device_memory_budget": i.device_memory_budget, "cpu_threads": i.cpu_threads,
                "log_level": LOG_LEVEL_NAMES[i.log_level]}

    def stats(self) -> Dict[str, Dict[str, Any]]:
        """Per-stage statistics of the calls made through this context.

        Returns
        -------
        dict
            ``{stage: {runs, gpu_runs, cpu_runs, fallbacks, failures, seconds,
            bytes_uploaded, bytes_downloaded}}``: the bytes are what the
            stage's GPU work copied to the device and back (0 on the CPU).

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context(backend="cpu") as ctx:
        ...     _ = ctx.to_gray(np.zeros((4, 4, 3), np.uint8))
        ...     ctx.stats()["image.gray"]["cpu_runs"]
        1
        """
        n = ctypes.c_size_t()
        check(lib.accel_ctx_stats_count(self.handle, ctypes.byref(n)), self.handle)
        out = {}
        for k in range(n.value):
            s = StageStats.defaults()
            check(lib.accel_ctx_stats_get(self.handle, k, ctypes.byref(s)), self.handle)
            out[s.stage.decode()] = {f: getattr(s, f) for f in
                                     ("runs", "gpu_runs", "cpu_runs", "fallbacks", "failures", "seconds",
                                      "bytes_uploaded", "bytes_downloaded")}
        return out

    def reset_stats(self) -> None:
        """Set every stage's statistics back to zero.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context(backend="cpu") as ctx:
        ...     _ = ctx.to_gray(np.zeros((4, 4, 3), np.uint8))
        ...     ctx.reset_stats()
        ...     ctx.stats().get("image.gray", {}).get("runs", 0)
        0
        """
        check(lib.accel_ctx_stats_reset(self.handle), self.handle)

    # The domains, one line each: ctx.<name> holds the domain's calls.
    hash = _domain("hash", "Hash", "Perceptual hashes of image files, encoded images and arrays")
    ct = _domain("ct", "CT", "The CT stages and pipeline on numpy volumes (z, y, x)")
    svf = _domain("svf", "SVF", "Shadows and sky view factors of surface models (UMEP's)")
    reg = _domain("reg", "Reg", "B-spline registration of 2-D images and warping (elastix's model and files)")

    hash_files = _hash_alias(Hash.files)
    hash_bytes = _hash_alias(Hash.bytes)
    hash_arrays = _hash_alias(Hash.arrays)

    def decode(self, source: Union[str, bytes, "os.PathLike[str]", bytearray, memoryview], gray: bool = False,
               max_pixels: int = 0) -> Tuple[Any, str]:
        """Decode a JPEG, PNG or TIFF image as Pillow does.

        Parameters
        ----------
        source : str, os.PathLike, bytes, bytearray or memoryview
            A path (str or PathLike) or the encoded bytes.
        gray : bool
            Return (H, W) gray (Pillow's ``convert('L')``) instead of RGB.
        max_pixels : int
            The largest image accepted (0: the context's limit).

        Returns
        -------
        (numpy.ndarray, str)
            uint8 (H, W, 3) RGB or (H, W), and the file's mode name ("RGB", "L", ...).

        Raises
        ------
        OSError
            The file cannot be read (AccelIOError).
        ValueError
            Not an image, or corrupt (FormatError, DecodeError).

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     img, mode = ctx.decode("photo.jpg")  # doctest: +SKIP
        """
        o = DecodeOptions.defaults()
        o.target = 0 if gray else 1
        o.max_pixels = max_pixels
        info = ImageInfo.defaults()
        buf = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            check(lib.accel_image_decode_buffer(self.handle, data, len(data), ctypes.byref(o), ctypes.byref(buf),
                                                ctypes.byref(info)), self.handle)
        else:
            check(lib.accel_image_decode_file(self.handle, os.fspath(source).encode(), ctypes.byref(o),
                                              ctypes.byref(buf), ctypes.byref(info)), self.handle)
        return buffer_copy(buf), lib.accel_image_mode_name(info.mode).decode()

    def to_gray(self, image: Any, out: Any = None) -> Any:
        """Gray conversion with Pillow's ``convert('L')`` arithmetic.

        Parameters
        ----------
        image : array
            uint8 (H, W) or (H, W, C) with C in 1..4; a numpy array (any
            strides) or a host DLPack array.
        out : numpy.ndarray, optional
            uint8 (H, W) to write into.

        Returns
        -------
        array
            uint8 (H, W): `out` when given, else a new array of the input's kind.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     ctx.to_gray(np.full((1, 2, 3), 255, np.uint8)).tolist()
        [[255, 255]]
        """
        import numpy as np
        back = None
        if not isinstance(image, np.ndarray) and (hasattr(image, "__dlpack__")
                                                  or hasattr(image, "__cuda_array_interface__")):
            image, back = host(image, "image")
        src = as_array(image)
        if out is None:
            out = np.empty(image.shape[:2], dtype=np.uint8)
            if back is not None:
                dst = as_array(out, writable=True)
                check(lib.accel_image_to_gray(self.handle, ctypes.byref(src), ctypes.byref(dst)), self.handle)
                return back(out)
        dst = as_array(out, writable=True)
        check(lib.accel_image_to_gray(self.handle, ctypes.byref(src), ctypes.byref(dst)), self.handle)
        return out


def _recreate_context(args: Dict[str, Any]) -> Context:
    """A Context made anew from the parameters of a pickled one."""
    return Context(**args)
