"""libaccel for Python: contexts, the fallback policy, and image operations on
numpy arrays, over the library's stable C ABI (ctypes; no compilation).

    import accel, numpy as np
    with accel.Context(backend="auto") as ctx:
        gray = ctx.to_gray(rgb_uint8_array)      # Pillow's convert('L'), bit for bit
        print(ctx.stats()["image.gray"])         # where it ran, fallbacks, seconds
        h = ctx.hash.files(paths, kinds=("dhash", "ahash"))
        ix = accel.Index(ctx, nfields=2)         # exact Hamming search
        ix.add(np.arange(len(paths)), np.stack([h.u64("dhash"), h.u64("ahash")], axis=1))
        groups = ix.groups(thresholds=5)         # near-duplicates, rule "all"

Errors raise AccelError subclasses carrying the library's status and
message, which are also ValueError, OSError, MemoryError or
NotImplementedError as the failure calls for (see accel._errors); arrays may
be numpy arrays or host DLPack arrays (docs/python.md).

One module for each part of the library: context (Context, version, backends),
hash (ctx.hash), index (Index), ct (ctx.ct), svf (ctx.svf) and reg (ctx.reg,
Transform); _native loads the library and declares the core's C ABI, _errors
and _arrays serve them all.
"""
# Every name the package had before its split stays importable from it: the
# modules it imported and its private helpers too, under their old names.
import ctypes  # noqa: F401
import numbers  # noqa: F401
import os  # noqa: F401

from . import _native  # noqa: F401
from ._arrays import DTYPES as _DTYPES, DeviceArrayError, as_array as _as_array
from ._errors import (AccelError, AccelIOError, CancelledError, DecodeError, DeviceError, DeviceMemoryError,
                      FormatError, HashSizeAssertionError, InternalError, InvalidArgumentError, LimitError,
                      NoDeviceError, NotFoundError, OutOfMemoryError, UnsupportedError, VersionError, check as _check)
from ._native import lib, progress_fn as _progress_fn
from .context import (BACKENDS, BACKEND_NAMES, LOG_LEVELS, LOG_LEVEL_NAMES, Context, backends, build_info, devices,
                      version)
from .ct import COMPARES, CT, PORES, TIES, TRIMS, _network_dict
from .hash import DEFAULT_KINDS, HASH_KINDS, Hash, HashResult, _nbits, distance, hex_to_bits
from .index import ALGORITHMS, RULES, Index, _groups_out, _u64, groups_from_pairs
from .svf import SVF, SVF_GRIDS, SVF_MATRICES, _patch_count
from .reg import Reg, Transform

__version__ = version()

__all__ = ["__version__", "AccelError", "AccelIOError", "CancelledError", "DecodeError", "DeviceArrayError",
           "DeviceError", "DeviceMemoryError", "FormatError", "HashSizeAssertionError", "InternalError", "InvalidArgumentError", "LimitError",
           "NoDeviceError", "NotFoundError", "OutOfMemoryError", "UnsupportedError", "VersionError", "Context", "CT",
           "SVF", "Reg", "Transform", "Hash", "HashResult", "Index", "groups_from_pairs", "version", "build_info",
           "backends", "devices", "hex_to_bits", "distance", "HASH_KINDS"]
