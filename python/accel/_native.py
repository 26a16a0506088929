"""Loading libaccel and describing its C ABI to ctypes.

The library is found, in order, at $ACCEL_LIBRARY, beside this module (where
a wheel installed by pip puts it), by the system's library search
(``ctypes.util.find_library('accel')``), or as ``libaccel.so.0``.

Each module declares the structs and functions of its part of the ABI with
``c_struct`` and ``declare``: the core's are here, a domain's in its module.
Struct layouts mirror include/accel/*.h; they only ever grow at the end.
"""
import ctypes
import ctypes.util
import os
import re

ABI_VERSION = 0

c_status = ctypes.c_int
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double)

MAX_DIMS = 8
STAGE_NAME_MAX = 48
DEVICE_NAME_MAX = 256
REASON_MAX = 256

# Each ctypes struct and the C type it mirrors; the binding tests compare
# their sizes and every field's offset with the C declarations.
C_NAMES = {}

# What the declarations of c_struct may name besides the numeric C types:
# constants of the headers, and the callback types. Any other accel_ type
# without a star is an enum (an int).
KNOWN = {"ACCEL_ARRAY_MAX_DIMS": MAX_DIMS, "ACCEL_STAGE_NAME_MAX": STAGE_NAME_MAX,
         "ACCEL_DEVICE_NAME_MAX": DEVICE_NAME_MAX, "ACCEL_REASON_MAX": REASON_MAX,
         "accel_log_fn": LOG_FN, "accel_progress_fn": PROGRESS_FN}
_NUMBERS = {"char": ctypes.c_char, "int": ctypes.c_int, "double": ctypes.c_double,
            "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64,
            "uint64_t": ctypes.c_uint64}
_DECLARATOR = re.compile(r"^(\**)(\w+)(?:\[(\w+)\])?$")


def _field_type(base, stars, known):
    """ctypes type of a C type: numbers as themselves, a pointer to a number as a
    POINTER, any other pointer as an address, a pointer to a pointer as a
    POINTER to an address."""
    if stars == 2:
        return ctypes.POINTER(ctypes.c_void_p)
    if stars == 1:
        return ctypes.POINTER(_NUMBERS[base]) if base in _NUMBERS else ctypes.c_void_p
    if base in _NUMBERS:
        return _NUMBERS[base]
    if base in known:
        return known[base]
    if base.startswith("accel_"):
        return ctypes.c_int
    raise ValueError("unknown C type %r" % base)


def _fields(declarations, known):
    """ctypes _fields_ of C member declarations ("uint32_t a, b; double *c; char d[N];")."""
    fields = []
    for decl in filter(None, (d.strip() for d in declarations.split(";"))):
        base, rest = re.sub(r"\bconst\s+", "", decl).split(None, 1)
        for declarator in rest.split(","):
            stars, name, count = _DECLARATOR.match(declarator.replace(" ", "")).groups()
            t = _field_type(base, len(stars), known)
            if count:
                t = t * (int(count) if count.isdigit() else known[count])
            fields.append((name, t))
    return fields


class Struct(ctypes.Structure):
    """A struct of the C ABI: c_name is its C type."""
    c_name = None

    @classmethod
    def defaults(cls):
        """An instance set to the library's defaults by <c_name>_init."""
        from ._errors import check
        s = cls()
        check(getattr(lib, cls.c_name + "_init")(ctypes.byref(s), ctypes.sizeof(s)))
        return s


def c_struct(c_name, declarations, **known):
    """The ctypes struct mirroring C struct `c_name`, from its member declarations
    as the header writes them; `known` adds constants and callback types. Named
    in CamelCase without the accel_ prefix (accel_ct_region: CtRegion)."""
    name = "".join(w.capitalize() for w in c_name[len("accel_"):].split("_"))
    cls = type(name, (Struct,), {"c_name": c_name, "_fields_": _fields(declarations, dict(KNOWN, **known))})
    C_NAMES[cls] = c_name
    return cls


CtxOptions = c_struct("accel_ctx_options", """
    uint32_t struct_size; accel_backend_kind backend; int32_t device; accel_fallback_policy fallback;
    uint64_t device_memory_budget; int32_t cpu_threads; accel_log_level log_level; accel_log_fn log_fn;
    void *log_user; uint64_t max_pixels; accel_sync_policy sync;""")
CtxInfo = c_struct("accel_ctx_info", """
    uint32_t struct_size; accel_backend_kind backend; int32_t device; accel_fallback_policy fallback;
    uint64_t device_memory_budget; int32_t cpu_threads; accel_log_level log_level; uint64_t max_pixels;""")
StageStats = c_struct("accel_stage_stats", """
    uint32_t struct_size; char stage[ACCEL_STAGE_NAME_MAX];
    uint64_t runs, gpu_runs, cpu_runs, fallbacks, failures; double seconds;
    uint64_t bytes_uploaded, bytes_downloaded;""")
BackendInfo = c_struct("accel_backend_info", """
    uint32_t struct_size; accel_backend_kind kind; char name[16];
    int32_t compiled, available, device_count; char reason[ACCEL_REASON_MAX];""")
DeviceInfo = c_struct("accel_device_info", """
    uint32_t struct_size; int32_t index; char name[ACCEL_DEVICE_NAME_MAX]; uint64_t total_memory, free_memory;
    int32_t cc_major, cc_minor, multiprocessors, driver_version, runtime_version;""")


def _load():
    candidates = []
    if os.environ.get("ACCEL_LIBRARY"):
        candidates.append(os.environ["ACCEL_LIBRARY"])
    # in an installed wheel the library lies in the package itself (loaded by
    # its path: no search path or environment variable is involved)
    packaged = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libaccel.so.%d" % ABI_VERSION)
    if os.path.isfile(packaged):
        candidates.append(packaged)
    found = ctypes.util.find_library("accel")
    if found:
        candidates.append(found)
    candidates.append("libaccel.so.%d" % ABI_VERSION)
    errors = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("cannot load libaccel (set ACCEL_LIBRARY to its path): " + "; ".join(errors))


lib = _load()


def declare(signatures):
    """Give lib's functions their types: {name: (result type, [argument types])}."""
    for name, (result, args) in signatures.items():
        f = getattr(lib, name)
        f.restype = result
        f.argtypes = args


P = ctypes.POINTER
declare({
    "accel_version_number": (ctypes.c_uint32, []),
    "accel_version_string": (ctypes.c_char_p, []),
    "accel_abi_version": (ctypes.c_uint32, []),
    "accel_build_info": (ctypes.c_char_p, []),
    "accel_status_string": (ctypes.c_char_p, [c_status]),
    "accel_status_describe": (ctypes.c_char_p, [c_status]),
    "accel_ctx_options_init": (c_status, [P(CtxOptions), ctypes.c_size_t]),
    "accel_ctx_create": (c_status, [P(CtxOptions), P(ctypes.c_void_p)]),
    "accel_ctx_destroy": (None, [ctypes.c_void_p]),
    "accel_last_error": (ctypes.c_char_p, [ctypes.c_void_p]),
    "accel_set_log": (c_status, [ctypes.c_void_p, LOG_FN, ctypes.c_void_p, ctypes.c_int]),
    "accel_ctx_info_init": (c_status, [P(CtxInfo), ctypes.c_size_t]),
    "accel_ctx_query": (c_status, [ctypes.c_void_p, P(CtxInfo)]),
    "accel_stage_stats_init": (c_status, [P(StageStats), ctypes.c_size_t]),
    "accel_ctx_stats_count": (c_status, [ctypes.c_void_p, P(ctypes.c_size_t)]),
    "accel_ctx_stats_get": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(StageStats)]),
    "accel_ctx_stats_reset": (c_status, [ctypes.c_void_p]),
    "accel_backend_info_init": (c_status, [P(BackendInfo), ctypes.c_size_t]),
    "accel_backend_query": (c_status, [ctypes.c_int, P(BackendInfo)]),
    "accel_device_info_init": (c_status, [P(DeviceInfo), ctypes.c_size_t]),
    "accel_device_count": (c_status, [P(ctypes.c_int32)]),
    "accel_device_query": (c_status, [ctypes.c_int32, P(DeviceInfo)]),
    "accel_backend_from_string": (c_status, [ctypes.c_char_p, P(ctypes.c_int)]),
    "accel_log_level_from_string": (c_status, [ctypes.c_char_p, P(ctypes.c_int)]),
})

if lib.accel_abi_version() != ABI_VERSION:
    raise ImportError(
        "libaccel ABI %d found, this package speaks ABI %d" % (lib.accel_abi_version(), ABI_VERSION))


def progress_fn(progress):
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
    return PROGRESS_FN(on_progress)


class Handle:
    """An object owning a library handle (self._h), released by close(), on
    leaving a with block, or when collected; ``handle`` raises once closed."""
    _what = "object"

    def _destroy(self, h):
        raise NotImplementedError

    def close(self):
        """Release the library handle now (later calls raise ValueError); idempotent.

        Examples
        --------
        >>> import accel
        >>> ctx = accel.Context()
        >>> ctx.close(); ctx.close()
        """
        if getattr(self, "_h", None):
            self._destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        """The library handle (a ctypes c_void_p), for calls through ``accel.lib``.

        Examples
        --------
        >>> import accel
        >>> bool(accel.Context().handle)
        True
        """
        if not getattr(self, "_h", None):
            raise ValueError("the %s is closed" % self._what)
        return self._h
