"""The CT stages against SciPy and scikit-image themselves on random 1-D, 2-D
and 3-D arrays: fill holes with every generate_binary_structure, the EDT
(float32, float64 and the feature transform) with random sampling, and the
watershed with random markers, masks, connectivities, watershed lines and
compactness on plateau-rich integer images and on continuous ones. No result
may differ.

The watershed follows scikit-image 0.19.3, which visits a voxel's neighbours
in the order numpy 1.x's introsort left its footprint's offsets; releases
from 0.20 on sort them stably. The orders agree wherever the footprint has
fewer than 16 entries (1-D, 2-D, and 3-D faces), so those are compared with
the installed release; 3-D's 18- and 26-neighbourhoods are compared with
0.19.3's own labels in test_watershed_options.py."""

import os
import sys
import unittest

from support import require

np = require("numpy")
ndimage = require("scipy.ndimage")
segmentation = require("skimage.segmentation")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import accel  # noqa: E402

CASES = 400


def shape_of(rng, nd):
    return tuple(int(v) for v in rng.integers(1, 12 if nd == 3 else 40, nd))


class AgainstSciPyAndScikitImage(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_fill_holes(self):
        rng = np.random.default_rng(101)
        diffs = []
        for t in range(CASES):
            nd = 1 + t % 3
            m = rng.random(shape_of(rng, nd)) > rng.uniform(0.3, 0.7)
            for k in range(1, nd + 1):
                st = ndimage.generate_binary_structure(nd, k)
                if not np.array_equal(self.ctx.ct.fill_holes(m, structure=st), ndimage.binary_fill_holes(m, st)):
                    diffs.append((m.shape, k))
        self.assertEqual(diffs, [])

    def test_edt(self):
        rng = np.random.default_rng(102)
        diffs = []
        for t in range(CASES):
            nd = 1 + t % 3
            m = rng.random(shape_of(rng, nd)) > rng.uniform(0.05, 0.95)
            if m.all():
                continue
            sampling = tuple(rng.choice([0.5, 1.0, 1.25, 2.0], nd))
            want, ind = ndimage.distance_transform_edt(m, sampling=sampling, return_indices=True)
            got64, got_ind = self.ctx.ct.edt(m, sampling=sampling, dtype=np.float64, return_indices=True)
            got32 = self.ctx.ct.edt(m, sampling=sampling)
            if not (np.array_equal(got64, want) and np.array_equal(got_ind, ind)
                    and np.array_equal(got32, want.astype(np.float32))):
                diffs.append((m.shape, sampling))
        self.assertEqual(diffs, [])

    def test_watershed(self):
        rng = np.random.default_rng(103)
        diffs = []
        for t in range(CASES):
            nd = 1 + t % 3
            shape = tuple(int(v) for v in rng.integers(3, 14 if nd == 3 else 30, nd))
            image = rng.integers(0, 6, shape).astype(np.float64) if t % 2 else rng.random(shape)
            markers = np.zeros(shape, np.int32)
            for label, p in enumerate(rng.choice(markers.size, 3, replace=False), 1):
                markers.flat[p] = label
            mask = None if t % 4 < 2 else rng.random(shape) > 0.2
            # 3-D: faces only (see the module's docstring)
            opts = dict(connectivity=int(rng.integers(1, nd + 1)) if nd < 3 else 1, watershed_line=t % 5 == 0,
                        compactness=0.0 if t % 7 else 0.5)
            got = self.ctx.ct.watershed(image, markers, mask=mask, **opts)
            want = segmentation.watershed(image, markers, mask=mask, **opts)
            if not np.array_equal(got, want):
                diffs.append((shape, opts))
        self.assertEqual(diffs, [])


class Pipeline2D(unittest.TestCase):
    """The pipeline of a 2-D image against SciPy and scikit-image stage by stage."""

    def test_against_scipy_and_scikit_image(self):
        rng = np.random.default_rng(104)
        with accel.Context(backend="cpu") as ctx:
            for t in range(6):
                image = (ndimage.gaussian_filter(rng.random((60 + 7 * t, 90 - 5 * t)), 2 + t % 3) * 1000)
                image = image.astype(np.float32)
                thr = float(np.percentile(image, 40 + 3 * t))
                closed = t % 2 == 0
                sp = (1.0, 0.5 + 0.25 * t)
                r = ctx.ct.pipeline(image, thr, pores="closed" if closed else "all", spacing=sp,
                                    fill_connectivity=6 if t < 3 else 26,
                                    outputs=("solid", "filled", "pores", "edt", "markers", "labels"))
                solid = image > thr
                filled = ndimage.binary_fill_holes(solid, ndimage.generate_binary_structure(2, 1 if t < 3 else 2))
                pores = filled & ~solid if closed else ~solid
                edt = ndimage.distance_transform_edt(pores, sampling=sp).astype(np.float32)
                np.testing.assert_array_equal(r["solid"], solid)
                np.testing.assert_array_equal(r["filled"], filled)
                np.testing.assert_array_equal(r["pores"], pores)
                np.testing.assert_array_equal(r["edt"], edt)
                self.assertEqual(r["marker_count"], int(np.count_nonzero(r["markers"])))
                np.testing.assert_array_equal(r["labels"], segmentation.watershed(-edt, r["markers"], mask=pores))
            with self.assertRaises(NotImplementedError):  # smoothing stays 3-D
                ctx.ct.pipeline(np.zeros((8, 8), np.uint8), 1, smooth_sigma=1.0, outputs=("labels",))


if __name__ == "__main__":
    unittest.main()
