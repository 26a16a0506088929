"""numpy arrays as accel_array descriptions (no copy), the library's own
buffers and result arrays copied out into numpy, and the inputs Python users
have turned into numpy arrays.

Inputs (see docs/python.md, "Arrays in and out"):

- numpy arrays are used as they are (any strides) when their dtype is one
  the call takes; otherwise converted by the call's documented rule.
- Objects with ``__dlpack__`` on the host (a PyTorch CPU tensor, a JAX CPU
  array, another numpy) are viewed through ``numpy.from_dlpack`` without a
  copy; the results come back as the same kind of array (through the
  ``from_dlpack`` of the input's module), sharing the result's memory.
- Device arrays (``__cuda_array_interface__``, or ``__dlpack_device__``
  naming a GPU): on a context whose backend is CUDA, the stages with a GPU
  path (ct.threshold, ct.fill_holes, ct.edt, ct.pipeline) use them in place
  (``device_in``: C-contiguous, a dtype the stage takes as it is, no mask)
  and allocate their results as the same kind of array on the same device
  (``device_empty``). Elsewhere, on a build or machine without a usable
  CUDA device they are refused with DeviceArrayError (a TypeError) that
  says how to move them to the host; with a device but a CPU context (or a
  stage without a device path, or an array it cannot take in place) they
  are staged through the host through their own library (CuPy's ``.get()``,
  PyTorch's ``.cpu()``) and the results are put back on the same device as
  the same kind of array.
- Anything else numpy can convert (lists, scalars, ``__array__``) goes
  through ``numpy.asarray``.
"""
import ctypes
import functools
import sys
from typing import Any, Callable, Tuple

from ._native import MAX_DIMS, P, c_status, c_struct, declare, lib

# accel_dtype values (core.h) for numpy dtype strings
DTYPES = {"uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "uint32": 5, "int32": 6,
          "uint64": 7, "int64": 8, "float32": 9, "float64": 10, "bool": 1}

Array = c_struct("accel_array", """
    void *data; accel_dtype dtype; int32_t ndim; int64_t shape[ACCEL_ARRAY_MAX_DIMS], strides[ACCEL_ARRAY_MAX_DIMS];""")

declare({
    "accel_array_on_device": (c_status, [P(Array)]),
    "accel_buffer_view": (c_status, [ctypes.c_void_p, P(Array)]),
    "accel_buffer_destroy": (None, [ctypes.c_void_p]),
    "accel_raw_load": (c_status, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int32,
                                  P(ctypes.c_int64), ctypes.c_uint64, P(ctypes.c_void_p)]),
    "accel_raw_save": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(Array)]),
})


def as_array(a, writable=False):
    """Describe a numpy array for the C side (no copy); keeps strides."""
    import numpy as np
    if not isinstance(a, np.ndarray):
        raise TypeError("expected a numpy.ndarray, got %s" % _kind_name(a))
    if a.dtype.name not in DTYPES or not a.dtype.isnative:
        raise TypeError("unsupported dtype %s (the library takes %s)" % (a.dtype, ", ".join(DTYPES)))
    if a.ndim > MAX_DIMS:
        raise ValueError("at most %d dimensions" % MAX_DIMS)
    if writable and not a.flags.writeable:
        raise ValueError("output array is read-only")
    d = Array()
    d.data = a.ctypes.data
    d.dtype = DTYPES[a.dtype.name]
    d.ndim = a.ndim
    for i in range(a.ndim):
        d.shape[i] = a.shape[i]
        d.strides[i] = a.strides[i]
    return d


def ref(a, writable=False):
    """A pointer to the description of numpy array `a` (None for None), to pass."""
    return None if a is None else ctypes.byref(as_array(a, writable))


def copy_out(address, ctype, count):
    """A numpy copy of `count` values of `ctype` the library wrote at `address`."""
    import numpy as np
    return np.ctypeslib.as_array((ctype * count).from_address(address)).copy()


def buffer_copy(buf):
    """A numpy copy of an accel_buffer of bytes, which is destroyed."""
    try:
        import numpy as np
        view = Array()
        lib.accel_buffer_view(buf, ctypes.byref(view))
        shape = tuple(view.shape[i] for i in range(view.ndim))
        return copy_out(view.data, ctypes.c_uint8, int(np.prod(shape))).reshape(shape)
    finally:
        lib.accel_buffer_destroy(buf)


# DLPack device types (dlpack.h): 1 is the host; the rest are devices. 3 is
# CUDA pinned host memory, which the host can read.
_DLPACK_HOST = (1, 3)


class DeviceArrayError(TypeError):
    """A GPU array was given where this build or machine can only take host memory.

    Examples
    --------
    >>> import accel
    >>> class FakeCupy:
    ...     __cuda_array_interface__ = {"shape": (2, 2), "typestr": "|u1", "data": (0, False), "version": 3}
    >>> try:
    ...     accel.Context().ct.edt(FakeCupy())
    ... except TypeError as e:
    ...     print(type(e).__name__)
    DeviceArrayError
    """


def _identity(a: Any) -> Any:
    return a


def _device_kind(obj: Any) -> int:
    """0 for host data, else the DLPack device type of a device array (2 for CUDA)."""
    try:
        cuda = hasattr(obj, "__cuda_array_interface__")
    except Exception:  # a property that refuses (PyTorch: a tensor that requires grad) still names a GPU array
        cuda = True
    if cuda:
        return 2
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and hasattr(obj, "__dlpack__"):
        try:
            kind = int(dev()[0])
        except Exception:  # an object that cannot say: treat it as the host's
            return 0
        return 0 if kind in _DLPACK_HOST else kind
    return 0


def cuda_usable() -> bool:
    """Whether this library build found a usable CUDA device."""
    from .context import backends
    return bool(backends()["cuda"]["available"])


def _kind_name(obj: Any) -> str:
    t = type(obj)
    return "%s.%s" % (t.__module__, t.__qualname__)


def _from_device(obj: Any, what: str) -> Tuple[Any, Callable[[Any], Any]]:
    """A device array staged to the host through its own library, and how to
    put a result back on its device as the same kind of array."""
    import numpy as np
    name = _kind_name(obj)
    if not cuda_usable():
        raise DeviceArrayError(
            "%s is a GPU array (%s), but this libaccel has no usable CUDA device (%s); "
            "pass host memory instead, e.g. cupy.asnumpy(a) or a.cpu().numpy()"
            % (what, name, _cuda_reason()))
    module = sys.modules.get(type(obj).__module__.split(".")[0])
    if hasattr(obj, "get") and module is not None and hasattr(module, "asarray"):  # CuPy and alike
        host = np.asarray(obj.get())
        device = getattr(obj, "device", None)

        def back(a: Any) -> Any:
            if device is not None and hasattr(device, "__enter__"):
                with device:
                    return module.asarray(a)
            return module.asarray(a)
        return host, back
    from_numpy = getattr(module, "from_numpy", None)
    if hasattr(obj, "cpu") and hasattr(obj, "device") and from_numpy is not None:  # PyTorch
        host = obj.detach().cpu().numpy()
        device = obj.device
        return host, lambda a: from_numpy(np.ascontiguousarray(a)).to(device)
    raise DeviceArrayError("%s is a GPU array (%s) of a library this package cannot copy from; "
                           "copy it to the host first" % (what, name))


def _cuda_reason() -> str:
    from .context import backends
    b = backends()["cuda"]
    if not b["compiled"]:
        return "built without CUDA"
    return b["reason"] or "no device"


def host(obj: Any, what: str = "array") -> Tuple[Any, Callable[[Any], Any]]:
    """(numpy array, back): obj as a numpy array (no copy where it can be
    avoided), and a function turning a numpy result into obj's kind of array."""
    import numpy as np
    if isinstance(obj, np.ndarray):
        return obj, _identity
    if _device_kind(obj):
        return _from_device(obj, what)
    if hasattr(obj, "__dlpack__"):
        a = np.from_dlpack(obj)
        module = sys.modules.get(type(obj).__module__.split(".")[0])
        convert = getattr(module, "from_dlpack", None)
        if convert is None or module is np:
            return a, _identity
        return a, convert
    try:
        return np.asarray(obj), _identity
    except TypeError as e:  # numpy's message names the object; say what was expected
        raise TypeError("%s must be an array, not %s (%s)" % (what, type(obj).__name__, e)) from None


def host_only(obj: Any, what: str = "array") -> Any:
    """obj as a numpy array without converting the result back."""
    return host(obj, what)[0]


def mask_u8(a: Any, what: str = "mask") -> Any:
    """A mask as the library takes it (U8, nonzero = true): bool viewed as
    uint8 and uint8 as it is (no copy); any other numeric dtype as a != 0,
    numpy's conversion to bool (NaN is true)."""
    import numpy as np
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype == np.uint8:
        return a
    if a.dtype.kind not in "iufc":
        raise TypeError("%s must be numeric or bool, not %s" % (what, a.dtype))
    return (a != 0).view(np.uint8)


def integer_as(a: Any, dtype: str, what: str) -> Any:
    """An integer (or bool) array as `dtype` where every value fits (no copy
    when it is already); a TypeError for other kinds, a ValueError when a
    value does not fit."""
    import numpy as np
    if a.dtype == np.dtype(dtype) and a.dtype.isnative:
        return a
    if a.dtype == np.bool_:
        return a.astype(dtype)
    if a.dtype.kind not in "iu":
        raise TypeError("%s must be integers, not %s" % (what, a.dtype))
    info = np.iinfo(dtype)
    if a.size and (int(a.min()) < info.min or int(a.max()) > info.max):
        raise ValueError("%s has values outside %s's range [%d, %d]" % (what, dtype, info.min, info.max))
    return a.astype(dtype)


def real_as_f32(a: Any, what: str) -> Any:
    """A real array as float32: as it is when it is, else converted (round to
    nearest); a TypeError for complex and non-numeric dtypes."""
    import numpy as np
    if a.dtype == np.float32 and a.dtype.isnative:
        return a
    if a.dtype.kind not in "biuf":
        raise TypeError("%s must be real numbers, not %s" % (what, a.dtype))
    return a.astype(np.float32)


# ------------------------------------------------------------ device arrays in place


def _cuda_interface(obj: Any) -> Any:
    """obj's ``__cuda_array_interface__`` (of its detached view for a PyTorch
    tensor that requires grad), or None."""
    try:
        return obj.__cuda_array_interface__
    except AttributeError:
        return None
    except RuntimeError:  # PyTorch: a tensor that requires grad
        detach = getattr(obj, "detach", None)
        return None if detach is None else getattr(detach(), "__cuda_array_interface__", None)


def _module_of(obj: Any) -> Any:
    return sys.modules.get(type(obj).__module__.split(".")[0])


def _can_allocate_like(obj: Any) -> bool:
    """Whether results of obj's kind can be allocated (device_empty)."""
    module = _module_of(obj)
    return module is not None and callable(getattr(module, "empty", None))


def on_cuda(ctx: Any) -> bool:
    """Whether the context runs stages on a CUDA backend (a GPU, or its host
    emulation in the test suites)."""
    return ctx.info()["backend"] == "cuda"


def _device_index(obj: Any) -> Any:
    """The CUDA device index obj says it lives on (CuPy's device.id, PyTorch's
    device.index, DLPack's device id), or None when it does not say."""
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):
        value = getattr(dev, attr, None)
        if isinstance(value, int):
            return value
    try:
        return int(obj.__dlpack_device__()[1])
    except Exception:  # no DLPack, or a producer that cannot say
        return None


def _same_device(ctx: Any, obj: Any) -> bool:
    """Whether obj is on the context's CUDA device (or does not say)."""
    index = _device_index(obj)
    return index is None or index == ctx.info()["device"]


class DeviceView:
    """A device array described for the C side in place: its accel_array
    (marked with accel_array_on_device, as 3-D when asked), its own shape
    and its numpy dtype name.

    Examples
    --------
    >>> DeviceView.__name__
    'DeviceView'
    """

    def __init__(self, obj: Any, pointer: int, shape: Tuple[int, ...], dtype: str, as3d: bool) -> None:
        import numpy as np
        self.obj, self.shape, self.dtype = obj, shape, dtype
        self.keep: Any = None  # what must live while the library reads the array (a DLPack capsule)
        full = (1,) * (3 - len(shape)) + shape if as3d else shape
        self.array = Array()
        self.array.data = pointer
        self.array.dtype = DTYPES[dtype]
        self.array.ndim = len(full)
        stride = np.dtype(dtype).itemsize
        for i in reversed(range(len(full))):
            self.array.shape[i] = full[i]
            self.array.strides[i] = stride
            stride *= full[i]
        check_status = lib.accel_array_on_device(ctypes.byref(self.array))
        if check_status:
            raise ValueError("cannot mark %s as device memory (status %d)" % (dtype, check_status))

    def ref(self) -> Any:
        """A pointer to the description, to pass."""
        return ctypes.byref(self.array)


def _contiguous(shape: Tuple[int, ...], strides: Any, itemsize: int) -> bool:
    if strides is None:
        return True
    expect = itemsize
    for n, st in zip(reversed(shape), reversed(tuple(strides))):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


@functools.lru_cache(maxsize=None)
def _dl_tensor() -> Any:
    """dlpack.h's DLTensor as a ctypes struct (made here, not at module level:
    the package's module-level structs are those of libaccel's ABI)."""
    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
    return DLTensor


# DLPack's type codes (dlpack.h: kDLInt, kDLUInt, kDLFloat, kDLBool) as numpy kinds
_DL_KINDS = {0: "int", 1: "uint", 2: "float", 6: "bool"}
_DLPACK_CUDA = 2  # kDLCUDA


def _dlpack_interface(obj: Any) -> Any:
    """A CUDA array interface (version 3) read from obj's DLPack capsule, for
    a device array of kind CUDA that has no ``__cuda_array_interface__``; the
    capsule is kept in "capsule" (its producer frees the tensor with it).
    None when obj is no such array or the capsule cannot be read."""
    try:
        dev = obj.__dlpack_device__()
        if int(dev[0]) != _DLPACK_CUDA:
            return None
        try:
            capsule = obj.__dlpack__(stream=1)  # ordered after the legacy default stream
        except (TypeError, BufferError, RuntimeError):
            capsule = obj.__dlpack__()
    except Exception:  # not a DLPack producer, or one that refuses: the host rules decide
        return None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        address = get(capsule, b"dltensor")
    except ValueError:  # a capsule of another name (used, or versioned)
        return None
    t = _dl_tensor().from_address(address)  # DLManagedTensor begins with its DLTensor
    kind = _DL_KINDS.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        return None
    typestr = "|b1" if kind == "bool" else "%s%s%d" % ("<" if sys.byteorder == "little" else ">",
                                                      {"int": "i", "uint": "u", "float": "f"}[kind],
                                                      t.dtype.bits // 8)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    item = max(t.dtype.bits // 8, 1)
    strides = None if not t.strides else tuple(t.strides[i] * item for i in range(t.ndim))
    return {"shape": shape, "typestr": typestr, "data": ((t.data or 0) + t.byte_offset, False),
            "strides": strides, "version": 3, "capsule": capsule}


def device_in(ctx: Any, obj: Any, dtypes: Tuple[str, ...], ndims: Tuple[int, ...] = (3,),
              as3d: bool = True, bool_as_uint8: bool = True) -> Any:
    """A DeviceView of `obj` when it is a device array this context can use in
    place: a CUDA context, on its device (as far as obj says),
    ``__cuda_array_interface__`` version 2 or later without a mask (or a
    DLPack array of device kind CUDA), C-contiguous, one of `dtypes` (bool
    counts as uint8 when uint8 is one and `bool_as_uint8`), `ndims`
    dimensions, and results of
    its kind can be allocated. None otherwise (the caller
    then takes the host path)."""
    import numpy as np
    if _device_kind(obj) != _DLPACK_CUDA or not _can_allocate_like(obj) or not on_cuda(ctx):
        return None
    if not _same_device(ctx, obj):
        return None  # another device's memory: staged through the host
    iface = _cuda_interface(obj)
    if iface is None:
        iface = _dlpack_interface(obj)
    if iface is None or int(iface.get("version", 0)) < 2 or iface.get("mask") is not None:
        return None
    shape = tuple(int(n) for n in iface["shape"])
    try:
        dt = np.dtype(iface["typestr"])
    except TypeError:
        return None
    name = "uint8" if dt == np.bool_ and "uint8" in dtypes and bool_as_uint8 else dt.name
    if name not in dtypes or not dt.isnative or len(shape) not in ndims:
        return None
    if not _contiguous(shape, iface.get("strides"), dt.itemsize):
        return None
    view = DeviceView(obj, int(iface["data"][0]), shape, name, as3d)  # read-only is fine: an input
    view.keep = iface.get("capsule")
    return view


def device_empty(like: Any, shape: Tuple[int, ...], dtype: str, as3d: bool = True) -> DeviceView:
    """A new array of `like`'s kind on its device (CuPy: cupy.empty under
    its device; PyTorch: torch.empty(device=...); another library: its
    module's ``empty``), described for the C side as an output."""
    import numpy as np
    module = _module_of(like)
    if module is not None and module.__name__ == "torch":
        arr = module.empty(shape, dtype=getattr(module, dtype), device=like.device)
    else:
        device = getattr(like, "device", None)
        if device is not None and hasattr(device, "__enter__"):
            with device:
                arr = module.empty(shape, dtype=np.dtype(dtype))
        else:
            arr = module.empty(shape, dtype=np.dtype(dtype))
    iface = _cuda_interface(arr)
    if iface is None:
        iface = _dlpack_interface(arr)
    if iface is None:
        raise DeviceArrayError("%s.empty made no CUDA array" % module.__name__)
    name = "uint8" if dtype == "bool" else dtype
    view = DeviceView(arr, int(iface["data"][0]), tuple(shape), name, as3d)
    view.keep = iface.get("capsule")
    return view
