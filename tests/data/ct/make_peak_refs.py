"""Reference peaks for peak_local_max's parameters, made with scikit-image 0.19.3.

Writes OUT (an .npz): ``cases``, JSON with per case its arguments, the
image's shape and dtype (float64, float32, uint8 or int16), the labels'
dtype and the footprint's shape when it has them, and the shape of the
coordinates skimage.feature.peak_local_max returned ((n, ndim), or
scikit-image's (0, 2) for labels without a region); then the images, labels,
footprints and coordinates of all cases raveled one after another
(``images`` as float64, which holds every value exactly, ``labels`` int64,
``footprints`` uint8, ``refs`` int64). load() reads them back. The cases are random
(numpy's legacy RandomState, the same stream on every numpy): 1-D, 2-D and
3-D images with plateaus (small integers), negative values and distinct
values, with every parameter drawn: min_distance 0..5, exclude_border as a
bool, an int or a tuple, threshold_abs, threshold_rel, num_peaks,
num_peaks_per_label, footprints of odd and even extents with and without
their centre, labels whose regions are not connected, p_norm 1, 1.5, 2, 3, inf.

scikit-image 0.19.3 builds with numpy 1.26, Cython < 3 and Python 3.11 (see
make_watershed_refs.py):

    python -m venv v && v/bin/pip install numpy==1.26.4 scipy==1.11.4 "cython<3" "setuptools<65" wheel pythran
    v/bin/pip install --no-build-isolation --no-deps scikit-image==0.19.3
    NPY_DISABLE_CPU_FEATURES="AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL" \\
        v/bin/python make_peak_refs.py peak_refs.npz

The variable keeps numpy's portable introsort, whose order of equal values
scikit-image 0.19.3 returned with the numpy of its time (the script checks
that argsort is not stable on a case where the introsort is not).
"""
import json
import sys
import warnings

import numpy as np

CASES = 360


def draw_image(rs, shape):
    kind = rs.randint(5)
    if kind == 0:
        return rs.randint(0, 5, shape).astype(np.float64)  # plateaus
    if kind == 1:
        return (rs.randint(0, 4, shape) - 3).astype(np.float64)  # negative plateaus
    if kind == 2:
        n = int(np.prod(shape))
        return (rs.permutation(n).reshape(shape) - n / 2) * 0.25  # distinct, negative too
    if kind == 3:
        return rs.randint(0, 4, shape).astype(np.float32) * np.float32(0.7)
    return rs.randint(0, 4, shape).astype(np.uint8 if rs.randint(2) else np.int16)


def draw_border(rs, ndim):
    k = rs.randint(4)
    if k == 0:
        return bool(rs.randint(2))
    if k == 1:
        return int(rs.randint(0, 3))
    if k == 2:
        return tuple(int(rs.randint(0, 3)) for _ in range(ndim))
    return False


def draw_case(rs):
    ndim = rs.randint(1, 4)
    shape = {1: (rs.randint(5, 40),), 2: tuple(rs.randint(4, 17, 2)), 3: tuple(rs.randint(3, 9, 3))}[ndim]
    image = draw_image(rs, shape)
    args = {"min_distance": int(rs.randint(0, 6)), "exclude_border": draw_border(rs, ndim)}
    if rs.randint(4) == 0:
        args["threshold_abs"] = float(rs.randint(0, 3)) if image.dtype == np.uint8 else float(rs.randint(-2, 3))
    if rs.randint(4) == 0:
        args["threshold_rel"] = float(rs.choice([0.0, 0.3, 0.5, 0.9]))
    if rs.randint(4) == 0:
        args["num_peaks"] = int(rs.randint(0, 6))
    if rs.randint(4) == 0:
        args["num_peaks_per_label"] = int(rs.randint(0, 4))
    if rs.randint(4) == 0:
        args["p_norm"] = float(rs.choice([1.0, 1.5, 2.0, 3.0]))
    arrays = {}
    if rs.randint(3) == 0:
        fp = rs.randint(0, 2, tuple(rs.randint(1, 5, ndim))).astype(bool)
        if not fp.any():
            fp.flat[0] = True
        arrays["footprint"] = fp
    if rs.randint(2) == 0:
        values = rs.choice([1, 2, 3, 7, 100], size=3, replace=False)
        labels = np.where(rs.randint(0, 4, shape) > 0, values[rs.randint(0, 3, shape)], 0)
        arrays["labels"] = labels.astype(np.int32 if rs.randint(2) else np.int64)
    return image, args, arrays


def main(out):
    from skimage.feature import peak_local_max
    import skimage
    assert skimage.__version__ == "0.19.3", skimage.__version__
    keys = np.zeros(40)
    keys[::3] = 1
    assert not np.array_equal(np.argsort(-keys), np.argsort(-keys, kind="stable")), "numpy's argsort is stable here"
    rs = np.random.RandomState(20261124)
    cases, images, labels, footprints, refs = [], [], [], [], []
    for _ in range(CASES):
        image, args, arrays = draw_case(rs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = np.asarray(peak_local_max(image, **args, **arrays), np.int64)
        case = {"args": args, "shape": image.shape, "dtype": image.dtype.name, "ref": ref.shape}
        images.append(image.ravel().astype(np.float64))
        refs.append(ref.ravel())
        if "labels" in arrays:
            case["labels"] = arrays["labels"].dtype.name
            labels.append(arrays["labels"].ravel().astype(np.int64))
        if "footprint" in arrays:
            case["footprint"] = arrays["footprint"].shape
            footprints.append(arrays["footprint"].ravel().astype(np.uint8))
        cases.append(case)
    np.savez_compressed(out, cases=np.array(json.dumps(cases)), images=np.concatenate(images),
                        labels=np.concatenate(labels), footprints=np.concatenate(footprints),
                        refs=np.concatenate(refs))


def load(path):
    """The cases of a file main() wrote: (image, args, arrays, ref) each."""
    with np.load(path) as f:
        cases, images, labels = json.loads(str(f["cases"])), f["images"], f["labels"]
        footprints, refs = f["footprints"], f["refs"]
    at = {"image": 0, "labels": 0, "footprint": 0, "ref": 0}

    def take(name, data, shape, dtype):
        n = int(np.prod(shape))
        a = data[at[name]:at[name] + n].reshape(shape).astype(dtype)
        at[name] += n
        return a
    for case in cases:
        args = case["args"]
        if isinstance(args["exclude_border"], list):
            args["exclude_border"] = tuple(args["exclude_border"])
        shape = tuple(case["shape"])
        image = take("image", images, shape, case["dtype"])
        arrays = {}
        if "labels" in case:
            arrays["labels"] = take("labels", labels, shape, case["labels"])
        if "footprint" in case:
            arrays["footprint"] = take("footprint", footprints, tuple(case["footprint"]), bool)
        yield image, args, arrays, take("ref", refs, tuple(case["ref"]), np.int64)


if __name__ == "__main__":
    main(sys.argv[1])
