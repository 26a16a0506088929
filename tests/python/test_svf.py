"""Shadows and sky view factors from Python against a numpy transcription of
UMEP's code (bench/umep_numpy.py, itself checked bit for bit against UMEP's
frozen outputs by bench/svf_bench.py): every patch option, the building-only
path, the matrices, sun positions on the octant boundaries, and pixel sizes
other than 1 m and 2 m."""
import gzip
import io
import os
import sys
import unittest

from support import SRC, clean_environment, require

np = require("numpy")
import accel  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "bench"))
import umep_numpy  # noqa: E402

clean_environment()

CITY = os.path.join(SRC, "tests", "data", "svf", "city_96x128_2m")


def load(name):
    with gzip.open(os.path.join(CITY, name + ".npy.gz")) as f:
        return np.load(io.BytesIO(f.read()))


class Svf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")
        # a 48 x 64 corner keeps UMEP's numpy runs short
        cls.dsm = load("dsm")[:48, :64].copy()
        cls.cdsm = load("cdsm")[:48, :64].copy()
        cls.tdsm = load("tdsm")[:48, :64].copy()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_every_patch_option_with_matrices(self):
        for option, count in ((145, 145), (153, 153), (306, 305), (612, 609)):
            ref = umep_numpy.svf(self.dsm, self.cdsm, self.tdsm, 2.0, patches=option, return_matrices=True)
            got = self.ctx.svf.sky(self.dsm, 2.0, self.cdsm, self.tdsm, patches=option, matrices=True, unpack=True)
            for k in accel.SVF_GRIDS:
                np.testing.assert_array_equal(got[k], ref[k], err_msg="%d %s" % (option, k))
            for k in accel.SVF_MATRICES:
                self.assertEqual(got[k].shape[2], count)
                np.testing.assert_array_equal(got[k], ref[k].astype(np.uint8), err_msg="%d %s" % (option, k))
            az, alt = accel.SVF.patches(option)
            self.assertEqual(len(az), count)
            np.testing.assert_array_equal(az, umep_numpy.patch_azimuths(umep_numpy.PATCH_OPTIONS[option]))

    def test_buildings_only(self):
        ref = umep_numpy.svf(self.dsm, None, None, 0.5)
        got = self.ctx.svf.sky(self.dsm, 0.5, matrices=True)
        self.assertEqual(sorted(got), sorted(list(accel.SVF_GRIDS[:5]) + ["shmat"]))
        for k in accel.SVF_GRIDS[:5]:
            np.testing.assert_array_equal(got[k], ref[k], err_msg=k)

    def test_shadows_on_octant_boundaries_and_odd_pixel_sizes(self):
        for pixel in (0.3, 1.0, 2.5):
            for az in (0, 30, 45, 90, 135, 180, 200, 225, 270, 315, 344.4, 360):
                for alt in (5, 33.3, 89):
                    ref = umep_numpy.shadows(self.dsm, self.cdsm, self.tdsm, az, alt, pixel)
                    got = self.ctx.svf.shadows(self.dsm, az, alt, pixel, self.cdsm, self.tdsm)
                    for k in ("sh", "vegsh", "vbshvegsh"):
                        np.testing.assert_array_equal(got[k], ref[k], err_msg="%g m az %g alt %g %s" % (
                            pixel, az, alt, k))

    def test_tiles_and_trunk_ratio(self):
        whole = self.ctx.svf.sky(self.dsm, 2.0, self.cdsm, trunk_ratio=0.4)
        tiled = self.ctx.svf.sky(self.dsm, 2.0, self.cdsm, trunk_ratio=0.4, tile=11)
        ref = umep_numpy.svfForProcessing153(self.dsm, self.cdsm, self.cdsm.astype(np.float64) * 0.4, 0.5, 1,
                                             keep_matrices=False)
        for k in accel.SVF_GRIDS:
            np.testing.assert_array_equal(whole[k], tiled[k], err_msg=k)
            np.testing.assert_array_equal(whole[k], ref[k].astype(np.float32), err_msg=k)

    def test_errors(self):
        with self.assertRaises(accel.AccelError) as e:
            self.ctx.svf.sky(self.dsm, 0.0)
        self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")
        with self.assertRaises(ValueError):
            self.ctx.svf.sky(self.dsm, 1.0, patches=100)
        with self.assertRaises(accel.AccelError):
            self.ctx.svf.shadows(self.dsm, 90, 95, 1.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
