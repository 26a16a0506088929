"""Reference labels for the watershed's options, made with scikit-image 0.19.3.

Writes OUT (an .npz) with, for every case k, ``k_image``, ``k_markers``
(an int32 array, or a 0-d int32 count, or absent for None), ``k_mask``
(absent for None), ``k_args`` (connectivity, watershed_line, compactness as
float64) and ``k_labels``: skimage.segmentation.watershed(image, markers,
connectivity=..., mask=..., compactness=..., watershed_line=...). The real
cases flood -edt of a 32^3 corner of the berea_pore fixture from its
reference markers within its pores (edt > 0); they store no image (the test
crops the fixture's edt.npy.gz).

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


def add(out, k, image, markers, mask, conn, opts, store_image=True):
    labels = watershed(image, markers, connectivity=conn, mask=mask, **opts)
    if store_image:
        out["%d_image" % k] = image
    if isinstance(markers, np.ndarray):
        out["%d_markers" % k] = markers.astype(np.int32)
    elif markers is not None:
        out["%d_markers" % k] = np.int32(markers)
    if mask is not None:
        out["%d_mask" % k] = mask.astype(bool)
    out["%d_args" % k] = np.array([conn, opts.get("watershed_line", False), opts.get("compactness", 0.0)], float)
    out["%d_labels" % k] = labels.astype(np.int32)
    return k + 1


def synthetic(out, k, rng):
    for shape in ((23, 29), (9, 10, 11)):
        for conn in range(1, len(shape) + 1):
            for opts in OPTIONS:
                distinct = rng.permutation(int(np.prod(shape))).reshape(shape) / 9.0
                ties = rng.integers(0, 4, shape).astype(np.float64)  # plateaus: the heap's tie order
                fine = 1.0 + rng.random(shape) * 1e-9  # differences below float32's resolution
                mask = rng.random(shape) > 0.15
                markers = np.zeros(shape, np.int32)
                for label, p in enumerate(rng.choice(markers.size, 6, replace=False), 1):
                    markers.flat[p] = label
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
    for conn in (1, 2, 3):
        for opts in OPTIONS[:3]:
            k = add(out, k, -edt, markers, edt > 0, conn, opts, store_image=False)
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
    out["real_first"] = np.int32(k)
    k = real(out, k)
    out["count"] = np.int32(k)
    np.savez_compressed(sys.argv[1], **out)
    print("%d cases" % k)


if __name__ == "__main__":
    main()
