"""The library and its contexts: version, build, backends and devices; Context,
with image decoding and gray conversion, and the domains' operations as
ctx.hash, ctx.ct, ctx.svf and ctx.reg."""
import ctypes
import functools
import importlib
import os

from ._arrays import Array, as_array, buffer_copy
from ._errors import check
from ._native import BackendInfo, CtxInfo, CtxOptions, DeviceInfo, Handle, LOG_FN, P, StageStats, c_status, c_struct
from ._native import declare, lib
from .hash import Hash

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3, "off": 4}
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
        b = BackendInfo.defaults()
        check(lib.accel_backend_query(kind, ctypes.byref(b)))
        out[b.name.decode()] = {"compiled": bool(b.compiled), "available": bool(b.available),
                                "device_count": b.device_count, "reason": b.reason.decode()}
    return out


def devices():
    """A list of dicts describing the CUDA devices (empty without a GPU)."""
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
    return property(get, doc=doc + ": see accel.%s." % cls)


def _hash_alias(method):
    """ctx.hash_<name>, the name ctx.hash.<name> had before ctx.hash: the same call."""
    @functools.wraps(method)
    def alias(self, *args, **kwargs):
        return method(self.hash, *args, **kwargs)
    alias.__name__ = "hash_" + method.__name__
    alias.__qualname__ = "Context." + alias.__name__
    return alias


class Context(Handle):
    """An accel_ctx: the backend choice, fallback policy, threads, logging and
    statistics for the calls made through it.

    backend: "auto" | "cpu" | "cuda"; strict: a GPU failure raises instead of
    falling back to the CPU; log: a callable(level_name, message) receiving
    the library's log lines at or above log_level (default: stderr).
    ACCEL_BACKEND / ACCEL_LOG in the environment override these, as in C.
    threads: CPU threads (0 = all cores, at most 1024); max_pixels: the largest
    image or raster (width x height) the loaders accept (0 = 2**30).
    """

    _what = "context"

    def __init__(self, backend="auto", strict=False, device=0, memory_budget=0, threads=0,
                 log=None, log_level="warn", max_pixels=0):
        o = CtxOptions.defaults()
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
            self._log_cb = LOG_FN(trampoline)
            o.log_fn = self._log_cb
        handle = ctypes.c_void_p()
        check(lib.accel_ctx_create(ctypes.byref(o), ctypes.byref(handle)))
        self._h = handle

    def _destroy(self, h):
        lib.accel_ctx_destroy(h)

    def info(self):
        """What the context resolved: backend, device, fallback, budget, threads, log level."""
        i = CtxInfo.defaults()
        check(lib.accel_ctx_query(self.handle, ctypes.byref(i)), self.handle)
        return {"backend": BACKEND_NAMES[i.backend], "device": i.device,
                "fallback": "deny" if i.fallback else "allow",
                "device_memory_budget": i.device_memory_budget, "cpu_threads": i.cpu_threads,
                "log_level": LOG_LEVEL_NAMES[i.log_level]}

    def stats(self):
        """{stage: {runs, gpu_runs, cpu_runs, fallbacks, failures, seconds}}."""
        n = ctypes.c_size_t()
        check(lib.accel_ctx_stats_count(self.handle, ctypes.byref(n)), self.handle)
        out = {}
        for k in range(n.value):
            s = StageStats.defaults()
            check(lib.accel_ctx_stats_get(self.handle, k, ctypes.byref(s)), self.handle)
            out[s.stage.decode()] = {f: getattr(s, f) for f in
                                     ("runs", "gpu_runs", "cpu_runs", "fallbacks", "failures", "seconds")}
        return out

    def reset_stats(self):
        check(lib.accel_ctx_stats_reset(self.handle), self.handle)

    # The domains, one line each: ctx.<name> holds the domain's calls.
    hash = _domain("hash", "Hash", "Perceptual hashes of image files, encoded images and arrays")
    ct = _domain("ct", "CT", "The CT stages and pipeline on numpy volumes (z, y, x)")
    svf = _domain("svf", "SVF", "Shadows and sky view factors of surface models (UMEP's)")
    reg = _domain("reg", "Reg", "B-spline registration of 2-D images and warping (elastix's model and files)")

    hash_files = _hash_alias(Hash.files)
    hash_bytes = _hash_alias(Hash.bytes)
    hash_arrays = _hash_alias(Hash.arrays)

    def decode(self, source, gray=False, max_pixels=0):
        """Decode a JPEG/PNG (path or bytes) as Pillow does: uint8 (H, W, 3) RGB, or
        (H, W) with gray=True (Pillow's convert('L')). Returns (array, mode name)."""
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

    def to_gray(self, image, out=None):
        """uint8 (H, W) or (H, W, C) with C in 1..4 -> uint8 (H, W), with Pillow's
        convert('L') arithmetic. Any strides; ``out`` may be given."""
        import numpy as np
        src = as_array(image)
        if out is None:
            out = np.empty(image.shape[:2], dtype=np.uint8)
        dst = as_array(out, writable=True)
        check(lib.accel_image_to_gray(self.handle, ctypes.byref(src), ctypes.byref(dst)), self.handle)
        return out
