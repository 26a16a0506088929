"""ctx.ct.peak_local_max against scikit-image: every parameter, 1-D, 2-D and 3-D.

- The 0.19.3 rules (the default): against peaks scikit-image 0.19.3 itself
  found (tests/data/ct/peak_refs.npz, made by make_peak_refs.py there: 360
  random cases with plateaus, negative values, every parameter).
- The 0.22 rules (rules="0.22"): against the installed scikit-image
  (0.22 or later), live, on the same cases and on as many new random ones.
- The 0.19.3 rules on images without equal values against the installed
  scikit-image with its window put back to 0.19.3's mode 'constant' (equal
  values are the only other difference, and there are none).
- ctx.ct.markers on 2-D and 1-D maps against peak_local_max with the mask's
  components as labels; the arguments scikit-image refuses, refused.
"""
import os
import sys
import types
import unittest
import warnings

from support import require

np = require("numpy")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "data", "ct"))
import accel  # noqa: E402
import make_peak_refs  # noqa: E402

REFS = os.path.join(os.path.dirname(__file__), "..", "data", "ct", "peak_refs.npz")


def _skimage_0_22():
    """The installed scikit-image's peak_local_max when it has the 0.22 rules, else None."""
    try:
        import skimage
        from skimage.feature import peak_local_max
    except ImportError:
        return None
    major, minor = (int(x) for x in skimage.__version__.split(".")[:2])
    return peak_local_max if (major, minor) >= (0, 22) else None


class PeakLocalMax(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def search(self, image, rules="0.19", **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return self.ctx.ct.peak_local_max(image, rules=rules, **kw)

    def assert_same(self, got, ref, what):
        self.assertEqual(got.shape, ref.shape, what)
        np.testing.assert_array_equal(got, ref, err_msg=what)

    def test_equals_skimage_0_19_3(self):
        n = 0
        for k, (image, args, arrays, ref) in enumerate(make_peak_refs.load(REFS)):
            got = self.search(image, **args, **arrays)
            self.assert_same(got, ref, "case %d: %s %s %s %s" % (k, image.shape, image.dtype, args, sorted(arrays)))
            n += 1
        self.assertGreaterEqual(n, 300)

    def test_0_22_rules_equal_installed_skimage(self):
        ref_fn = _skimage_0_22()
        if ref_fn is None:
            self.skipTest("needs scikit-image 0.22 or later")
        stored = [(image, args, arrays) for image, args, arrays, _ in make_peak_refs.load(REFS)]
        rs = np.random.RandomState(7)
        fresh = [make_peak_refs.draw_case(rs) for _ in range(300)]
        for k, (image, args, arrays) in enumerate(stored + fresh):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = np.asarray(ref_fn(image, **args, **arrays))
            got = self.search(image, rules="0.22", **args, **arrays)
            self.assert_same(got, ref, "case %d: %s %s %s" % (k, image.shape, args, sorted(arrays)))

    def test_0_19_window_on_distinct_values(self):
        """The installed scikit-image with mode 'constant' is 0.19.3 where no two values are equal."""
        ref_fn = _skimage_0_22()
        if ref_fn is None:
            self.skipTest("needs scikit-image 0.22 or later")
        import scipy.ndimage as ndi
        import skimage.feature.peak as peak

        def constant(image, footprint=None, mode=None, **kw):
            return ndi.maximum_filter(image, footprint=footprint, mode="constant", **kw)
        saved = peak.ndi
        peak.ndi = types.SimpleNamespace(**{n: getattr(ndi, n) for n in dir(ndi) if not n.startswith("_")})
        peak.ndi.maximum_filter = constant
        try:
            rs = np.random.RandomState(11)
            for k in range(150):
                image, args, arrays = make_peak_refs.draw_case(rs)
                image = rs.permutation(image.size).reshape(image.shape) - image.size / 2.0
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ref = np.asarray(peak.peak_local_max(image, **args, **arrays))
                self.assert_same(self.search(image, **args, **arrays), ref, "case %d: %s %s" % (k, image.shape, args))
        finally:
            peak.ndi = saved

    def test_markers_in_2d_and_1d(self):
        try:
            from skimage.measure import label
        except ImportError:
            self.skipTest("needs scikit-image")
        rs = np.random.RandomState(3)
        for k in range(60):
            shape = (int(rs.randint(5, 40)),) if k % 3 == 0 else tuple(rs.randint(4, 20, 2))
            mask = rs.randint(0, 4, shape) > 0
            edt = (rs.randint(0, 4, shape) * mask).astype(np.float32)
            md = int(rs.randint(0, 4))
            out, n = self.ctx.ct.markers(edt, mask, min_distance=md)
            ref = self.search(edt, min_distance=md, exclude_border=False, labels=label(mask, connectivity=mask.ndim))
            expected = np.zeros(shape, np.int32)
            if len(ref):
                expected[tuple(np.asarray(ref).T)] = 1
            self.assertEqual(n, len(ref))
            np.testing.assert_array_equal(out > 0, expected > 0, err_msg="case %d" % k)
            np.testing.assert_array_equal(out[out > 0], np.arange(1, n + 1))  # numbered in C order

    def test_documented_examples(self):
        img = np.zeros((7, 7))
        img[3, 4], img[3, 2] = 1, 1.5
        self.assertEqual(self.search(img, min_distance=1).tolist(), [[3, 2], [3, 4]])
        self.assertEqual(self.search(img, min_distance=2).tolist(), [[3, 2]])
        img2 = np.zeros((20, 20, 20))
        img2[10, 10, 10] = img2[15, 15, 15] = 1
        self.assertEqual(self.search(img2, exclude_border=0).tolist(), [[10, 10, 10], [15, 15, 15]])

    def test_refused(self):
        image = np.zeros((5, 5))
        for bad, err in (((1,), ValueError), (1.0, TypeError), ((1, "a"), ValueError), ((1, -1), ValueError),
                         (-1, ValueError)):
            with self.assertRaises(err):
                self.search(image, exclude_border=bad)
        with self.assertRaises(NotImplementedError):
            self.search(np.zeros((3, 3, 3, 3)))
        with self.assertRaises(ValueError):
            self.search(image, p_norm=0.5)
        with self.assertRaises(ValueError):
            self.search(image, num_peaks=-1)
        with self.assertRaises(ValueError):
            self.search(np.full((4, 4), np.nan))
        with self.assertRaises(NotImplementedError):
            self.search(np.zeros((4, 4), np.uint8), threshold_abs=-1)
        with self.assertRaises(TypeError):
            self.search(image, labels=np.ones((5, 5)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
