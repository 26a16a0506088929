"""The peers' functions, with their signatures, computed by libaccel.

Each adapter takes the peer's arguments, checks them as the peer does where
the peer's own tests expect its errors, hands the work to libaccel's Python
API and returns what the peer returns (an ``imagehash.ImageHash``, a numpy
array of the peer's dtype). A parameter the library does not implement
raises NotImplementedError naming it: the runner (``run.py``) then reports
the peer's test as failed, and ``docs/peer-tests.md`` lists it with that
reason. Nothing here computes a result itself.

The runner installs these in place of the peers' functions
(``plugin.py``); they are also usable on their own::

    from adapters import IMAGEHASH
    IMAGEHASH["average_hash"](PIL.Image.open("a.jpg"))
"""
import os
import sys
from typing import Any, Callable, Dict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import accel  # noqa: E402

_CTX = None


def ctx() -> Any:
    """One CPU context for the whole run (results do not depend on it)."""
    global _CTX
    if _CTX is None:
        _CTX = accel.Context(backend=os.environ.get("ACCEL_PEER_BACKEND", "cpu"))
    return _CTX


# ------------------------------------------------------------ imagehash

def _pixels(image: Any) -> Any:
    """A PIL image as the array libaccel hashes as imagehash hashes the image.

    Modes 1, L, LA, RGB and RGBA go as they are (the library converts them
    to gray, and to HSV for colorhash, as Pillow does). Other modes are
    converted by Pillow first, to RGB(A) for their colours, as imagehash's
    own first step (``image.convert("L")``/``("HSV")``) reads them.
    """
    if image.mode not in ("1", "L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    return np.asarray(image)


def _imagehash(kind: str, image: Any, size: int, binbits: int = 3, **options: Any) -> Any:
    """`kind` of one PIL image through ctx.hash.arrays (options: its keywords)."""
    import imagehash
    r = ctx().hash.arrays([_pixels(image)], kinds=(kind,), size=size, binbits=binbits, **options)
    err = r.error(0)
    if err is not None:
        raise ValueError("%s: %s" % err)
    if kind == "colorhash":
        bits = accel.hex_to_bits(r.hex(0, kind), 14 * binbits)
        return imagehash.ImageHash(bits.reshape((-1, binbits)))
    side = size + 6 if kind == "whash" and options.get("whash_mode") == "db4" else size
    bits = accel.hex_to_bits(r.hex(0, kind), side * side)
    return imagehash.ImageHash(bits.reshape((side, side)))


def average_hash(image: Any, hash_size: int = 8, mean: Callable[[Any], Any] = np.mean) -> Any:
    if mean is not np.mean:
        raise NotImplementedError("average_hash's mean= other than numpy.mean")
    return _imagehash("ahash", image, hash_size)


def phash(image: Any, hash_size: int = 8, highfreq_factor: int = 4) -> Any:
    return _imagehash("phash", image, hash_size, highfreq_factor=highfreq_factor)


def dhash(image: Any, hash_size: int = 8) -> Any:
    return _imagehash("dhash", image, hash_size)


def dhash_vertical(image: Any, hash_size: int = 8) -> Any:
    return _imagehash("dhash_vertical", image, hash_size)


def whash(image: Any, hash_size: int = 8, image_scale: Any = None, mode: str = "haar",
          remove_max_haar_ll: bool = True) -> Any:
    return _imagehash("whash", image, hash_size, whash_image_scale=image_scale,
                      whash_remove_max_haar_ll=remove_max_haar_ll, whash_mode=mode)


def colorhash(image: Any, binbits: int = 3) -> Any:
    return _imagehash("colorhash", image, 8, binbits)


IMAGEHASH: Dict[str, Callable[..., Any]] = {
    "average_hash": average_hash, "phash": phash, "dhash": dhash, "dhash_vertical": dhash_vertical,
    "whash": whash, "colorhash": colorhash}


# ------------------------------------------------------------ scipy.ndimage

def distance_transform_edt(input: Any, sampling: Any = None, return_distances: bool = True,
                           return_indices: bool = False, distances: Any = None, indices: Any = None) -> Any:
    # SciPy's argument rules and messages (its tests expect them)
    want_d = return_distances and distances is None
    want_i = return_indices and indices is None
    if not return_distances and not return_indices:
        raise RuntimeError("at least one of return_distances/return_indices must be True")
    a = np.atleast_1d(np.asarray(input))  # as SciPy: a 0-d input gives a 1-element result
    if distances is not None:
        if distances.shape != a.shape or distances.dtype != np.float64:
            raise RuntimeError("distances array has wrong shape or must be float64")
    if indices is not None:
        if indices.shape != (a.ndim,) + a.shape or indices.dtype != np.int32:
            raise RuntimeError("indices array has wrong shape or must be int32")
    r = ctx().ct.edt(a != 0, sampling=sampling, dtype=np.float64, return_distances=return_distances,
                     return_indices=return_indices)
    d, i = (r if return_distances and return_indices else
            (r, None) if return_distances else (None, r))
    if distances is not None:
        distances[...] = d
    if indices is not None:
        indices[...] = i
    out = [x for x, want in ((d, want_d), (i, want_i)) if want]
    return tuple(out) if len(out) == 2 else out[0] if out else None


def binary_fill_holes(input: Any, structure: Any = None, output: Any = None, origin: Any = 0, *,
                      axes: Any = None) -> Any:
    a = np.asarray(input)
    if np.any(np.asarray(origin) != 0):
        raise NotImplementedError("binary_fill_holes' origin other than 0")
    filled = ctx().ct.fill_holes(a != 0, structure=structure, axes=axes)
    if output is not None:
        output[...] = filled
        return None
    return filled


SCIPY: Dict[str, Callable[..., Any]] = {
    "distance_transform_edt": distance_transform_edt, "binary_fill_holes": binary_fill_holes}


# ------------------------------------------------------------ scikit-image

def watershed(image: Any, markers: Any = None, connectivity: int = 1, offset: Any = None, mask: Any = None,
              compactness: float = 0, watershed_line: bool = False) -> Any:
    if offset is not None:
        raise NotImplementedError("watershed's offset")
    image = np.asarray(image)
    if markers is not None and not np.isscalar(markers):
        markers = np.asarray(markers)
        if markers.shape != image.shape:
            raise ValueError("markers (shape %s) must have same shape as image (shape %s)"
                             % (markers.shape, image.shape))
    if mask is not None and np.asarray(mask).shape != image.shape:
        raise ValueError("mask (shape %s) must have same shape as image (shape %s)"
                         % (np.asarray(mask).shape, image.shape))
    out = ctx().ct.watershed(image, markers, mask=mask, connectivity=connectivity,
                             watershed_line=watershed_line, compactness=compactness)
    # scikit-image returns the labels in the markers' integer dtype
    if isinstance(markers, np.ndarray) and markers.dtype.kind in "iu":
        out = out.astype(markers.dtype)
    return out


def peak_local_max(image: Any, min_distance: int = 1, threshold_abs: Any = None, threshold_rel: Any = None,
                   exclude_border: Any = True, num_peaks: Any = np.inf, footprint: Any = None, labels: Any = None,
                   num_peaks_per_label: Any = np.inf, p_norm: float = np.inf) -> Any:
    """Every parameter passes through; the library follows scikit-image 0.19.3 (docs/ct.md)."""
    return ctx().ct.peak_local_max(image, min_distance=min_distance, threshold_abs=threshold_abs,
                                   threshold_rel=threshold_rel, exclude_border=exclude_border, num_peaks=num_peaks,
                                   footprint=footprint, labels=labels, num_peaks_per_label=num_peaks_per_label,
                                   p_norm=p_norm)


SKIMAGE: Dict[str, Callable[..., Any]] = {"watershed": watershed, "peak_local_max": peak_local_max}
