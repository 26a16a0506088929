"""Perceptual hashes of images, bit-exact with imagehash (include/accel/hash.h,
docs/hash.md): ctx.hash.files / bytes / arrays, their HashResult, and the
hex strings imagehash prints."""
import ctypes
import os

from ._arrays import Array, as_array
from ._errors import ContextCalls, check
from ._native import P, c_status, c_struct, declare, lib, progress_fn

HASH_KINDS = ("ahash", "dhash", "dhash_vertical", "phash", "whash", "colorhash")
DEFAULT_KINDS = ("ahash", "dhash", "phash", "whash")

HASH_KIND_COUNT = 6
HASH_ERROR_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p)

HashOptions = c_struct("accel_hash_options", """
    uint32_t struct_size; uint32_t nkinds; accel_hash_kind kinds[ACCEL_HASH_KIND_COUNT]; int32_t hash_size;
    int32_t color_binbits; int32_t fast; uint64_t max_pixels; accel_progress_fn progress; void *progress_user;
    accel_hash_error_fn on_error; void *error_user;""",
                       ACCEL_HASH_KIND_COUNT=HASH_KIND_COUNT, accel_hash_error_fn=HASH_ERROR_FN)

_OUTPUTS = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]  # hashes, slot bytes, statuses
declare({
    "accel_hash_options_init": (c_status, [P(HashOptions), ctypes.c_size_t]),
    "accel_hash_kind_from_string": (c_status, [ctypes.c_char_p, P(ctypes.c_int)]),
    "accel_hash_bits": (c_status, [ctypes.c_int, ctypes.c_int32, ctypes.c_int32, P(ctypes.c_uint32)]),
    "accel_hash_slot_bytes": (c_status, [P(HashOptions), P(ctypes.c_size_t)]),
    "accel_hash_files": (c_status, [ctypes.c_void_p, P(ctypes.c_char_p), ctypes.c_size_t, P(HashOptions)] + _OUTPUTS),
    "accel_hash_buffers": (c_status, [ctypes.c_void_p, P(ctypes.c_void_p), P(ctypes.c_size_t), ctypes.c_size_t,
                                      P(HashOptions)] + _OUTPUTS),
    "accel_hash_arrays": (c_status, [ctypes.c_void_p, P(Array), ctypes.c_size_t, P(HashOptions)] + _OUTPUTS),
    "accel_hash_to_hex": (c_status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]),
    "accel_hash_from_hex": (c_status, [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]),
    "accel_hash_distance": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, P(ctypes.c_uint32)]),
})


def _nbits(kind, size, binbits):
    n = ctypes.c_uint32()
    check(lib.accel_hash_bits(HASH_KINDS.index(kind), size, binbits, ctypes.byref(n)))
    return n.value


def _from_hex(hexstr, nbits):
    buf = (ctypes.c_uint8 * ((nbits + 7) // 8))()
    check(lib.accel_hash_from_hex(hexstr.encode(), nbits, buf, len(buf)))
    return buf


def hex_to_bits(hexstr, nbits):
    """imagehash's hex string of an nbits hash -> numpy bool array of nbits
    (row-major, as imagehash's hash.hash.flatten())."""
    import numpy as np
    buf = _from_hex(hexstr, nbits)
    return np.unpackbits(np.frombuffer(bytes(buf), dtype=np.uint8))[:nbits].astype(bool)


def distance(hex_a, hex_b):
    """Hamming distance of two hashes given as imagehash hex strings of equal length."""
    if len(hex_a) != len(hex_b):
        raise ValueError("hashes of different lengths")
    nbits = 4 * len(hex_a)
    a, b = _from_hex(hex_a, nbits), _from_hex(hex_b, nbits)
    d = ctypes.c_uint32()
    check(lib.accel_hash_distance(a, b, nbits, ctypes.byref(d)))
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
        check(lib.accel_hash_to_hex(row.ctypes.data, nbits, out, len(out)))
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


def _options(kinds, size, binbits, fast, max_pixels):
    o = HashOptions.defaults()
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
    return o


class Hash(ContextCalls):
    """Hashing through a context (ctx.hash): every input is decoded once for all
    `kinds`, hashed as imagehash does (docs/hash.md); an input that cannot be
    read or decoded gets an error status in the HashResult, never an exception.
    size: the hash size (8: 64-bit hashes); binbits: colorhash's bin bits;
    fast: a faster, inexact decode; progress: callable(stage, fraction)."""

    def _run(self, fn, inputs, n, kinds, size, binbits, fast, max_pixels, progress):
        import numpy as np
        kinds = tuple(kinds)
        o = _options(kinds, size, binbits, fast, max_pixels)
        messages = {}

        def on_error(user, index, status, message):
            messages[index] = message.decode(errors="replace")
        err_cb = HASH_ERROR_FN(on_error)
        o.on_error = err_cb
        prog_cb = progress_fn(progress)
        if prog_cb is not None:
            o.progress = prog_cb
        slot = ctypes.c_size_t()
        check(lib.accel_hash_slot_bytes(ctypes.byref(o), ctypes.byref(slot)))
        hashes = np.zeros((n, len(kinds), slot.value), dtype=np.uint8)
        status = np.zeros(n, dtype=np.int32)
        self._call(fn, *inputs, n, ctypes.byref(o), hashes.ctypes.data, slot.value, status.ctypes.data)
        return HashResult(kinds, size, binbits, hashes, status, messages)

    def files(self, paths, kinds=DEFAULT_KINDS, size=8, binbits=3, fast=False, max_pixels=0, progress=None):
        """Hash image files (JPEG/PNG), each decoded once for all `kinds`; bit-exact
        with imagehash (see docs/hash.md). Returns a HashResult; a file that cannot
        be read or decoded gets an error status, never an exception."""
        paths = [os.fspath(p) for p in paths]
        arr = (ctypes.c_char_p * len(paths))(*[p.encode() for p in paths])
        return self._run(lib.accel_hash_files, (arr,), len(paths), kinds, size, binbits, fast, max_pixels, progress)

    def bytes(self, blobs, kinds=DEFAULT_KINDS, size=8, binbits=3, fast=False, max_pixels=0, progress=None):
        """Hash encoded images given as bytes-like objects."""
        blobs = [bytes(b) for b in blobs]
        ptrs = (ctypes.c_void_p * len(blobs))(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in blobs])
        sizes = (ctypes.c_size_t * len(blobs))(*[len(b) for b in blobs])
        return self._run(lib.accel_hash_buffers, (ptrs, sizes), len(blobs), kinds, size, binbits, fast, max_pixels,
                         progress)

    def arrays(self, images, kinds=DEFAULT_KINDS, size=8, binbits=3, progress=None):
        """Hash decoded images: uint8 numpy arrays (H, W) "L", (H, W, 2) "LA",
        (H, W, 3) "RGB" or (H, W, 4) "RGBA", as imagehash hashes
        PIL.Image.fromarray(array)."""
        descs = [as_array(a) for a in images]
        arr = (Array * len(descs))(*descs)
        return self._run(lib.accel_hash_arrays, (arr,), len(descs), kinds, size, binbits, False, 0, progress)
