"""Perceptual hashes of images, bit-exact with imagehash (include/accel/hash.h,
docs/hash.md): ctx.hash.files / bytes / arrays, their HashResult, and the
hex strings imagehash prints."""
import ctypes
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._arrays import Array, DeviceView, as_array, device_in, host_only
from ._errors import AccelError, ContextCalls, HashSizeAssertionError, check, choice
from ._native import P, c_status, c_struct, declare, lib
from ._progress import Call, ProgressArg

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

HASH_KINDS = ("ahash", "dhash", "dhash_vertical", "phash", "whash", "colorhash")
DEFAULT_KINDS = ("ahash", "dhash", "phash", "whash")

HASH_KIND_COUNT = 6
HASH_ERROR_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p)

HashOptions = c_struct("accel_hash_options", """
    uint32_t struct_size; uint32_t nkinds; accel_hash_kind kinds[ACCEL_HASH_KIND_COUNT]; int32_t hash_size;
    int32_t color_binbits; int32_t fast; uint64_t max_pixels; accel_progress_fn progress; void *progress_user;
    accel_hash_error_fn on_error; void *error_user; int32_t phash_highfreq_factor;
    int32_t whash_image_scale; int32_t whash_keep_max_ll; int32_t whash_mode;""",
                       ACCEL_HASH_KIND_COUNT=HASH_KIND_COUNT, accel_hash_error_fn=HASH_ERROR_FN)

_OUTPUTS = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]  # hashes, slot bytes, statuses
declare({
    "accel_hash_options_init": (c_status, [P(HashOptions), ctypes.c_size_t]),
    "accel_hash_kind_from_string": (c_status, [ctypes.c_char_p, P(ctypes.c_int)]),
    "accel_hash_bits": (c_status, [ctypes.c_int, ctypes.c_int32, ctypes.c_int32, P(ctypes.c_uint32)]),
    "accel_hash_slot_bytes": (c_status, [P(HashOptions), P(ctypes.c_size_t)]),
    "accel_hash_kind_bits": (c_status, [P(HashOptions), ctypes.c_int, P(ctypes.c_uint32)]),
    "accel_hash_files": (c_status, [ctypes.c_void_p, P(ctypes.c_char_p), ctypes.c_size_t, P(HashOptions)] + _OUTPUTS),
    "accel_hash_buffers": (c_status, [ctypes.c_void_p, P(ctypes.c_void_p), P(ctypes.c_size_t), ctypes.c_size_t,
                                      P(HashOptions)] + _OUTPUTS),
    "accel_hash_arrays": (c_status, [ctypes.c_void_p, P(Array), ctypes.c_size_t, P(HashOptions)] + _OUTPUTS),
    "accel_hash_to_hex": (c_status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]),
    "accel_hash_from_hex": (c_status, [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]),
    "accel_hash_distance": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, P(ctypes.c_uint32)]),
})


def _nbits(kind: str, size: int, binbits: int) -> int:
    n = ctypes.c_uint32()
    check(lib.accel_hash_bits(HASH_KINDS.index(kind), size, binbits, ctypes.byref(n)))
    return n.value


def _from_hex(hexstr: str, nbits: int) -> Any:
    buf = (ctypes.c_uint8 * ((nbits + 7) // 8))()
    check(lib.accel_hash_from_hex(hexstr.encode(), nbits, buf, len(buf)))
    return buf


def hex_to_bits(hexstr: str, nbits: int) -> Any:
    """The bits of a hash given as imagehash's hex string.

    Parameters
    ----------
    hexstr : str
        ``str(hash)`` of an imagehash hash.
    nbits : int
        The hash's size in bits (64 for an 8 x 8 hash).

    Returns
    -------
    numpy.ndarray
        bool (nbits,), row-major as imagehash's ``hash.hash.flatten()``.

    Examples
    --------
    >>> import accel
    >>> accel.hex_to_bits("8000000000000001", 64).nonzero()[0].tolist()
    [0, 63]
    """
    import numpy as np
    buf = _from_hex(hexstr, nbits)
    return np.unpackbits(np.frombuffer(bytes(buf), dtype=np.uint8))[:nbits].astype(bool)


def distance(hex_a: str, hex_b: str) -> int:
    """Hamming distance of two hashes given as imagehash hex strings.

    Parameters
    ----------
    hex_a, hex_b : str
        Hex strings of equal length (``str(hash)``).

    Returns
    -------
    int
        The number of differing bits, as imagehash's ``h1 - h2``.

    Raises
    ------
    ValueError
        For strings of different lengths or that are not hex.

    Examples
    --------
    >>> import accel
    >>> accel.distance("ff00", "0f01")
    5
    """
    if len(hex_a) != len(hex_b):
        raise ValueError("hashes of different lengths")
    nbits = 4 * len(hex_a)
    a, b = _from_hex(hex_a, nbits), _from_hex(hex_b, nbits)
    d = ctypes.c_uint32()
    check(lib.accel_hash_distance(a, b, nbits, ctypes.byref(d)))
    return d.value


class HashResult:
    """Hashes of a batch, one row per input in the order given.

    Attributes
    ----------
    kinds : tuple of str
        The hash kinds, in the order of the second axis of ``hashes``.
    hashes : numpy.ndarray
        uint8 (n, nkinds, slot_bytes) of packed bits (MSB first, imagehash's
        row order).
    status : numpy.ndarray
        int32 (n,) ``accel_status`` values (0 = ok).
    messages : dict
        The error message of each failed input, by index.

    Examples
    --------
    >>> import accel, numpy as np
    >>> with accel.Context() as ctx:
    ...     r = ctx.hash.arrays(np.zeros((8, 8), np.uint8), kinds="ahash")
    >>> len(r), r.ok(0), r.hex(0, "ahash")
    (1, True, '0000000000000000')
    """

    def __init__(self, kinds: Sequence[str], size: int, binbits: int, hashes: Any, status: Any,
                 messages: Dict[int, str], bits: Optional[Dict[str, int]] = None) -> None:
        self.kinds, self.size, self.binbits = tuple(kinds), size, binbits
        self.hashes, self.status, self.messages = hashes, status, messages
        self.bits = bits or {}  # each kind's bits under the batch's options (whash db4's differ)

    def _bits(self, kind: str) -> int:
        return self.bits[kind] if kind in self.bits else _nbits(kind, self.size, self.binbits)

    def __len__(self) -> int:
        return len(self.status)

    def ok(self, i: int) -> bool:
        """Whether input ``i`` was hashed.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ctx.hash.bytes(b"not an image").ok(0)
        False
        """
        return int(self.status[i]) == 0

    def error(self, i: int) -> Optional[Tuple[str, str]]:
        """(status name, message) of a failed input, or None.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     ctx.hash.bytes(b"not an image").error(0)[0]
        'ACCEL_ERR_FORMAT'
        """
        if self.ok(i):
            return None
        return lib.accel_status_string(int(self.status[i])).decode(), self.messages.get(i, "")

    def hex(self, i: int, kind: str) -> Optional[str]:
        """imagehash's ``str()`` of input i's hash of `kind` (None if the input failed).

        Examples
        --------
        >>> import accel, numpy as np
        >>> img = np.tile(np.arange(8, dtype=np.uint8) * 30, (8, 1))
        >>> with accel.Context() as ctx:
        ...     ctx.hash.arrays(img, kinds="dhash").hex(0, "dhash")
        'ffffffffffffffff'
        """
        if not self.ok(i):
            return None
        k = self.kinds.index(kind)
        nbits = self._bits(kind)
        out = ctypes.create_string_buffer((nbits + 3) // 4 + 1)
        row = self.hashes[i, k]
        check(lib.accel_hash_to_hex(row.ctypes.data, nbits, out, len(out)))
        return out.value.decode()

    def u64(self, kind: str) -> Any:
        """64-bit hashes as a uint64 array (``int(str(hash), 16)``); 0 for failed inputs.

        Examples
        --------
        >>> import accel, numpy as np
        >>> img = np.tile(np.arange(8, dtype=np.uint8) * 30, (8, 1))
        >>> with accel.Context() as ctx:
        ...     ctx.hash.arrays([img, img.T], kinds="dhash").u64("dhash").tolist()
        [18446744073709551615, 0]
        """
        import numpy as np
        if self._bits(kind) != 64:
            raise ValueError("%s at this size is not a 64-bit hash" % kind)
        k = self.kinds.index(kind)
        return np.ascontiguousarray(self.hashes[:, k, :8]).view(">u8").reshape(-1).astype(np.uint64)

    def to_dicts(self) -> List[Dict[str, Optional[str]]]:
        """One dict per input: {kind: hex} or {"error": name, "message": text}.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     ctx.hash.arrays(np.zeros((8, 8), np.uint8), kinds=["ahash"]).to_dicts()
        [{'ahash': '0000000000000000'}]
        """
        out = []
        for i in range(len(self)):
            if self.ok(i):
                out.append({k: self.hex(i, k) for k in self.kinds})
            else:
                name, msg = self.error(i) or ("", "")
                out.append({"error": name, "message": msg})
        return out


def _kinds(kinds: Union[str, Iterable[str]]) -> Tuple[str, ...]:
    """Hash kinds as a tuple; one name alone is one kind."""
    return (kinds,) if isinstance(kinds, str) else tuple(kinds)


ACCEL_ERR_INVALID_ARG = 1


def _check_whash_size(kinds: Sequence[str], size: Any) -> None:
    """Raise HashSizeAssertionError (a ValueError and an AssertionError) for a
    whash size that is not a power of two, where imagehash's whash asserts."""
    if "whash" in kinds and isinstance(size, int) and size > 0 and size & (size - 1):
        raise HashSizeAssertionError(ACCEL_ERR_INVALID_ARG, "hash_size is not power of 2: whash needs a power-of-two "
                                     "hash_size, not %d" % size)


def _as_mode_1(a: Any) -> Any:
    """A bool image as imagehash sees ``PIL.Image.fromarray(mask)``: mode "1",
    which every hash converts to "L" (or "HSV") with 0 and 255, never 0 and 1.
    Pillow has no mode for bool arrays of other shapes, nor has this."""
    import numpy as np
    if a.ndim != 2:
        raise TypeError("bool images must be 2-D (H, W), as Pillow's mode \"1\", not of shape %s" % (a.shape,))
    return a.astype(np.uint8) * np.uint8(255)


def _check_highfreq(highfreq_factor: Any) -> None:
    """Refuse a phash highfreq_factor below 1 (imagehash: Pillow's ValueError
    for the empty resize), which the library would read as its default."""
    if isinstance(highfreq_factor, int) and highfreq_factor < 1:
        raise AccelError(ACCEL_ERR_INVALID_ARG, "highfreq_factor %d: phash needs a factor of at least 1"
                         % highfreq_factor)


def _check_whash_scale(kinds: Sequence[str], size: Any, scale: Any) -> None:
    """imagehash's assertions on whash's image_scale, with its messages."""
    if scale is None or "whash" not in kinds:
        return
    if not isinstance(scale, int) or scale < 1 or scale & (scale - 1):
        raise HashSizeAssertionError(ACCEL_ERR_INVALID_ARG, "image_scale is not power of 2")
    if isinstance(size, int) and size > scale:
        raise HashSizeAssertionError(ACCEL_ERR_INVALID_ARG, "hash_size in a wrong range")


WHASH_MODES = {"haar": 0, "db4": 1}


def _options(kinds, size, binbits, fast, max_pixels, highfreq_factor=4, whash_image_scale=None,
             whash_remove_max_haar_ll=True, whash_mode="haar"):
    o = HashOptions.defaults()
    if not 1 <= len(kinds) <= len(HASH_KINDS):
        raise ValueError("between 1 and %d kinds" % len(HASH_KINDS))
    for i, k in enumerate(kinds):
        if k not in HASH_KINDS:
            raise ValueError("unknown hash kind %r (one of %s)" % (k, ", ".join(repr(x) for x in HASH_KINDS)))
        o.kinds[i] = HASH_KINDS.index(k)
    _check_whash_size(kinds, size)
    o.nkinds = len(kinds)
    o.hash_size = size
    o.color_binbits = binbits
    o.fast = 1 if fast else 0
    o.max_pixels = max_pixels
    _check_highfreq(highfreq_factor)
    o.phash_highfreq_factor = highfreq_factor
    _check_whash_scale(kinds, size, whash_image_scale)
    o.whash_image_scale = whash_image_scale or 0
    o.whash_keep_max_ll = 0 if whash_remove_max_haar_ll else 1
    o.whash_mode = choice("whash_mode", WHASH_MODES, whash_mode)
    return o


def _one_or_many(items: Any, single: Tuple[type, ...], what: str) -> List[Any]:
    """A list of inputs: one item of the `single` types alone is one input,
    never its characters, bytes or rows."""
    if isinstance(items, single):
        return [items]
    try:
        return list(items)
    except TypeError:
        raise TypeError("%s must be one %s or an iterable of them, not %s"
                        % (what, " / ".join(t.__name__ for t in single), type(items).__name__)) from None


_KINDS_DOC = """kinds : str or sequence of str
        Hash kinds among ``accel.HASH_KINDS`` (default ahash, dhash, phash,
        whash); each input is decoded once for all of them.
    size : int
        The hash size (8: 64-bit hashes).
    binbits : int
        colorhash's bin bits.
    highfreq_factor : int
        phash's ``highfreq_factor`` (imagehash's default 4): the image is
        resized to ``size * highfreq_factor`` pixels square for the DCT;
        1 to 16 (larger ones raise :class:`accel.UnsupportedError`, a
        NotImplementedError).
    whash_image_scale : int, optional
        whash's ``image_scale``: the side of the square the image is
        resized to (a power of two, not below `size`; else
        :class:`accel.HashSizeAssertionError` with imagehash's message).
        Default: imagehash's, from the image's smaller side.
    whash_remove_max_haar_ll : bool
        whash's ``remove_max_haar_ll`` (default True).
    whash_mode : {"haar", "db4"}
        whash's ``mode``: Haar (default) or Daubechies-4 wavelets (on the
        CPU), whose hash has as many bits as imagehash's: ``(size + 6) ** 2``,
        or less for an explicit `whash_image_scale` below ``8 * size``;
        without one, an image whose own image_scale is below ``8 * size``
        fails with ACCEL_ERR_UNSUPPORTED (its hash would be smaller)."""


class Hash(ContextCalls):
    """Hashing through a context (``ctx.hash``), bit-exact with imagehash.

    Every input is decoded once for all `kinds` and hashed as imagehash does
    (docs/hash.md); an input that cannot be read or decoded gets an error
    status in the HashResult, never an exception. One path, one bytes object
    or one array is one input; to hash several, pass a list.

    Examples
    --------
    >>> import accel, numpy as np
    >>> with accel.Context() as ctx:
    ...     ctx.hash.arrays(np.zeros((8, 8), np.uint8), kinds="ahash").hex(0, "ahash")
    '0000000000000000'
    """

    def _run(self, fn, inputs, n, kinds, size, binbits, fast, max_pixels, progress, highfreq_factor=4,
             whash=(None, True, "haar")):
        import numpy as np
        kinds = _kinds(kinds)
        o = _options(kinds, size, binbits, fast, max_pixels, highfreq_factor, *whash)
        messages = {}

        def on_error(user, index, status, message):
            messages[index] = message.decode(errors="replace")
        err_cb = HASH_ERROR_FN(on_error)
        o.on_error = err_cb
        slot = ctypes.c_size_t()
        check(lib.accel_hash_slot_bytes(ctypes.byref(o), ctypes.byref(slot)))
        hashes = np.zeros((n, len(kinds), slot.value), dtype=np.uint8)
        status = np.zeros(n, dtype=np.int32)
        with Call(progress) as c:
            o.progress = c.fn
            self._call(fn, *inputs, n, ctypes.byref(o), hashes.ctypes.data, slot.value, status.ctypes.data)
        bits = {}
        for k in kinds:
            nb = ctypes.c_uint32()
            check(lib.accel_hash_kind_bits(ctypes.byref(o), HASH_KINDS.index(k), ctypes.byref(nb)))
            bits[k] = nb.value
        return HashResult(kinds, size, binbits, hashes, status, messages, bits)

    def files(self, paths: Union[PathLike, Iterable[PathLike]], kinds: Union[str, Sequence[str]] = DEFAULT_KINDS,
              size: int = 8, binbits: int = 3, fast: bool = False, max_pixels: int = 0,
              progress: ProgressArg = None, highfreq_factor: int = 4, whash_image_scale: Optional[int] = None,
              whash_remove_max_haar_ll: bool = True, whash_mode: str = "haar") -> HashResult:
        """Hash image files (JPEG, PNG, TIFF), bit-exact with imagehash.

        Parameters
        ----------
        paths : str, bytes, os.PathLike or iterable of them
            The files; one path alone is one file.
        {kinds}
        fast : bool
            A faster, inexact JPEG decode (DCT scaling).
        max_pixels : int
            The largest image accepted (0: the context's limit).
        progress : None, True or callable(stage, fraction)
            True shows a progress bar; a callable returning true cancels.

        Returns
        -------
        HashResult
            One row per path; a file that cannot be read or decoded gets an
            error status there, never an exception.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     r = ctx.hash.files("photo.jpg", kinds="phash")  # doctest: +SKIP
        >>> r.hex(0, "phash")  # doctest: +SKIP
        'c5b6d2f0c9a98e36'
        """
        encoded: List[bytes] = [os.fsencode(p) for p in _one_or_many(paths, (str, bytes, os.PathLike), "paths")]
        arr = (ctypes.c_char_p * len(encoded))(*encoded)
        return self._run(lib.accel_hash_files, (arr,), len(encoded), kinds, size, binbits, fast, max_pixels, progress,
                         highfreq_factor, (whash_image_scale, whash_remove_max_haar_ll, whash_mode))

    def bytes(self, blobs: Any, kinds: Union[str, Sequence[str]] = DEFAULT_KINDS, size: int = 8, binbits: int = 3,
              fast: bool = False, max_pixels: int = 0, progress: ProgressArg = None,
              highfreq_factor: int = 4, whash_image_scale: Optional[int] = None,
              whash_remove_max_haar_ll: bool = True, whash_mode: str = "haar") -> HashResult:
        """Hash encoded images (the bytes of JPEG, PNG or TIFF files).

        Parameters
        ----------
        blobs : bytes-like or iterable of bytes-like
            One bytes, bytearray or memoryview alone is one image.
        {kinds}
        fast, max_pixels, progress
            As for :meth:`files`.

        Returns
        -------
        HashResult

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     r = ctx.hash.bytes(open("photo.jpg", "rb").read())  # doctest: +SKIP
        """
        blobs = [bytes(b) for b in _one_or_many(blobs, (bytes, bytearray, memoryview), "blobs")]
        ptrs = (ctypes.c_void_p * len(blobs))(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in blobs])
        sizes = (ctypes.c_size_t * len(blobs))(*[len(b) for b in blobs])
        return self._run(lib.accel_hash_buffers, (ptrs, sizes), len(blobs), kinds, size, binbits, fast, max_pixels,
                         progress, highfreq_factor, (whash_image_scale, whash_remove_max_haar_ll, whash_mode))

    def arrays(self, images: Any, kinds: Union[str, Sequence[str]] = DEFAULT_KINDS, size: int = 8,
               binbits: int = 3, progress: ProgressArg = None, highfreq_factor: int = 4,
               whash_image_scale: Optional[int] = None, whash_remove_max_haar_ll: bool = True, whash_mode: str = "haar") -> HashResult:
        """Hash decoded images, as imagehash hashes ``PIL.Image.fromarray(array)``.

        Parameters
        ----------
        images : array or sequence of arrays
            uint8 (H, W) "L", (H, W, 2) "LA", (H, W, 3) "RGB" or (H, W, 4)
            "RGBA", or bool (H, W) "1" (hashed as 0 and 255, as imagehash
            hashes ``PIL.Image.fromarray(mask)``); numpy arrays or host DLPack arrays, any strides. One array
            alone is one image, never a stack: pass ``list(stack)`` to hash
            the images of a (N, H, W) stack.
        {kinds}
        progress
            As for :meth:`files`.

        Returns
        -------
        HashResult

        Raises
        ------
        TypeError
            An image that is not uint8 (imagehash would see another mode), or
            a bool image that is not 2-D (Pillow has no mode for it).
        ValueError
            A size or binbits the library refuses, or a highfreq_factor
            below 1; for whash, a size that is not a power of two raises
            :class:`accel.HashSizeAssertionError`, also an AssertionError as
            imagehash's.
        NotImplementedError
            A highfreq_factor above 16 (:class:`accel.UnsupportedError`).

        Examples
        --------
        >>> import accel, numpy as np
        >>> rgb = np.zeros((32, 32, 3), np.uint8)
        >>> with accel.Context() as ctx:
        ...     len(ctx.hash.arrays(rgb)), len(ctx.hash.arrays([rgb, rgb]))
        (1, 2)
        """
        import numpy as np
        if isinstance(images, np.ndarray) or hasattr(images, "__dlpack__") \
                or hasattr(images, "__cuda_array_interface__"):
            images = [images]
        # uint8 GPU arrays on this context's device are read in place; others through the host
        views = [device_in(self._ctx, a, ("uint8",), (2, 3), as3d=False, bool_as_uint8=False) for a in images]
        arrays = [v if v is not None else host_only(a, "image") for v, a in zip(views, images)]
        for a in arrays:
            if a.dtype not in (np.uint8, np.bool_, "uint8"):
                raise TypeError("images must be uint8 (imagehash hashes other dtypes in other modes), not %s"
                                % a.dtype)
        arrays = [_as_mode_1(a) if getattr(a, "dtype", None) == np.bool_ else a for a in arrays]
        descs = [a.array if isinstance(a, DeviceView) else as_array(a) for a in arrays]
        arr = (Array * len(descs))(*descs)
        return self._run(lib.accel_hash_arrays, (arr,), len(descs), kinds, size, binbits, False, 0, progress,
                         highfreq_factor, (whash_image_scale, whash_remove_max_haar_ll, whash_mode))

    for _m in (files, bytes, arrays):
        _m.__doc__ = (_m.__doc__ or "").replace("{kinds}", _KINDS_DOC)
    del _m
