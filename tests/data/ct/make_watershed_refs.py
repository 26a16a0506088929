"""Reference labels for the watershed's options, made with scikit-image 0.19.3.

Writes OUT (an .npz) with the inputs once each as ``array_<n>``, and per
case k (in order): ``refs[k]`` (the image's n, the markers' n or -1, the
mask's n or -1, the marker count when markers are a count, else 0),
``args[k]`` (connectivity, watershed_line, compactness) and the labels of
skimage.segmentation.watershed(image, markers, connectivity=..., mask=...,
compactness=..., watershed_line=...) (markers None when neither an array nor
a count), raveled one after another in ``labels`` (int16). The real cases
flood -edt of a 32^3 corner of the berea_pore fixture (image n = -1: the
test crops the fixture's edt.npy.gz) from its reference markers within its
pores (edt > 0).

scikit-image 0.19.3 builds with numpy 1.26, Cython < 3 and Python 3.11:

    python -m venv v && v/bin/pip install numpy==1.26.4 scipy==1.11.4 "cython<3" "setuptools<65" wheel pythran
    v/bin/pip install --no-build-isolation --no-deps scikit-image==0.19.3
    NPY_DISABLE_CPU_FEATURES="AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL" \
        v/bin/python make_watershed_refs.py watershed_refs.npz

numpy 1.25 and later sort with x86-simd-sort on AVX-512 processors, and
scikit-image orders a voxel's neighbours with np.argsort of their distances:
the variable keeps numpy's portable introsort, the order scikit-image 0.19.3
had with the numpy of its time (the script checks it).
"""
import gzip
import os
import sys

import numpy as np
import skimage
from skimage.segmentation import watershed

OPTIONS = ({}, {"watershed_line": True}, {"compactness": 0.01}, {"compactness": 1.0},
           {"compactness": 0.5, "watershed_line": True})


def load(name):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "berea_pore")
    with gzip.open(os.path.join(here, name + ".npy.gz"), "rb") as f:
        return np.load(f)


def pool(out, a):
    """The index n of array a in OUT ("array_<n>"), each array stored once."""
    arrays = out.setdefault("_arrays", [])
    for n, b in enumerate(arrays):
        if b is a:
            return n
    arrays.append(a)
    out["array_%d" % (len(arrays) - 1)] = a
    return len(arrays) - 1


def add(out, k, image, markers, mask, conn, opts, store_image=True):
    labels = watershed(image, markers, connectivity=conn, mask=mask, **opts)
    count = markers if markers is not None and not isinstance(markers, np.ndarray) else 0
    out.setdefault("_refs", []).append([pool(out, image) if store_image else -1,
                                        pool(out, markers) if isinstance(markers, np.ndarray) else -1,
                                        pool(out, mask) if mask is not None else -1, count])
    out.setdefault("_args", []).append([conn, opts.get("watershed_line", False), opts.get("compactness", 0.0)])
    out.setdefault("_labels", []).append(labels.ravel())
    return k + 1


def synthetic(out, k, rng):
    for shape in ((37,), (23, 29), (9, 10, 11)):
        distinct = rng.permutation(int(np.prod(shape))).reshape(shape) / 9.0
        ties = rng.integers(0, 4, shape).astype(np.float64)  # plateaus: the heap's tie order
        fine = 1.0 + rng.random(shape) * 1e-9  # differences below float32's resolution
        mask = rng.random(shape) > 0.15
        markers = np.zeros(shape, np.int32)
        for label, p in enumerate(rng.choice(markers.size, 6, replace=False), 1):
            markers.flat[p] = label
        for conn in range(1, len(shape) + 1):
            for opts in OPTIONS:
                for image in (distinct, ties, fine):
                    for m in (None, mask):
                        k = add(out, k, image, markers, m, conn, opts)
                k = add(out, k, distinct, None, None, conn, opts)
                k = add(out, k, ties, None, mask, conn, opts)
                k = add(out, k, distinct, 7, None, conn, opts)
                k = add(out, k, distinct, 5, mask, conn, opts)
    return k


def real(out, k):
    edt = load("edt")[:32, :32, :32]
    markers = load("markers")[:32, :32, :32]
    pores = edt > 0
    for conn in (1, 2, 3):
        for opts in OPTIONS[:3]:
            k = add(out, k, -edt, markers, pores, conn, opts, store_image=False)
    return k


def main():
    if skimage.__version__ != "0.19.3":
        sys.exit("scikit-image 0.19.3 is the reference, not %s" % skimage.__version__)
    from skimage.morphology._util import _offsets_to_raveled_neighbors
    documented = [2, -6, 1, -1, 6, -2, 3, 8, -3, -4, 7, -5, -7, -8, 5, 4, -9, 9]  # its docstring's example
    if _offsets_to_raveled_neighbors((2, 3, 2), np.ones((3, 3, 3)), (1, 1, 1)).tolist() != documented:
        sys.exit("numpy's argsort is not the portable introsort: set NPY_DISABLE_CPU_FEATURES (see above)")
    out = {}
    k = synthetic(out, 0, np.random.default_rng(20260501))
    k = real(out, k)
    out["count"] = np.int32(k)
    out.pop("_arrays")
    out["refs"] = np.array(out.pop("_refs"), np.int32)
    out["args"] = np.array(out.pop("_args"), np.float64)
    labels = np.concatenate(out.pop("_labels"))
    assert 0 <= labels.min() and labels.max() < 2 ** 15
    out["labels"] = labels.astype(np.int16)
    np.savez_compressed(sys.argv[1], **out)
    print("%d cases" % k)


if __name__ == "__main__":
    main()
