"""numpy arrays as accel_array descriptions (no copy), and the library's own
buffers and result arrays copied out into numpy."""
import ctypes

from ._native import MAX_DIMS, P, c_status, c_struct, declare, lib

# accel_dtype values (core.h) for numpy dtype strings
DTYPES = {"uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "uint32": 5, "int32": 6,
          "uint64": 7, "int64": 8, "float32": 9, "float64": 10, "bool": 1}

Array = c_struct("accel_array", """
    void *data; accel_dtype dtype; int32_t ndim; int64_t shape[ACCEL_ARRAY_MAX_DIMS], strides[ACCEL_ARRAY_MAX_DIMS];""")

declare({
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
        raise TypeError("expected a numpy.ndarray, got %s" % type(a).__name__)
    if a.dtype.name not in DTYPES or not a.dtype.isnative:
        raise TypeError("unsupported dtype %s" % a.dtype)
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
