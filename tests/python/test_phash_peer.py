"""phash against imagehash itself (4.3.x on Pillow 9.4) at every hash size from 2
to 64 and several highfreq_factor values, on the images whose DCT has exact
zeros in scipy (flat images, 1 x N and N x 1 strips, stripes, checkerboards)
and on random ones: zero differences allowed. Then the Python types of the
errors for the factors imagehash refuses."""

import os
import sys
import unittest

from support import require

np = require("numpy")
imagehash = require("imagehash")
Image = require("PIL.Image")
if not require("PIL").__version__.startswith("9.4."):
    # imagehash's values are Pillow's resampling, which later releases changed (docs/hash.md)
    print("SKIP: the hashes follow Pillow 9.4, not %s (python/requirements-test.txt)" % require("PIL").__version__)
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import accel  # noqa: E402


def images():
    """Flat, strips, stripes, checkerboards (where pocketfft's DCT has exact
    zeros and the median ties), a gradient and random pixels."""
    rng = np.random.default_rng(12)
    y, x = np.mgrid[0:12, 0:12]
    return [
        np.full((8, 8), 128, np.uint8),
        np.full((5, 9), 0, np.uint8),
        rng.integers(0, 256, (1, 23), dtype=np.uint8),
        rng.integers(0, 256, (17, 1), dtype=np.uint8),
        np.tile((np.arange(16) % 2 * 255).astype(np.uint8), (16, 1)),  # vertical stripes, 1 pixel
        ((y // 3) % 2 * 200).astype(np.uint8),  # horizontal stripes, 3 pixels
        ((x + y) % 2 * 255).astype(np.uint8),  # checkerboard
        (((x // 2) + (y // 2)) % 2 * 255).astype(np.uint8),  # checkerboard of 2 x 2 squares
        (x * 20 + y).astype(np.uint8),
        rng.integers(0, 256, (40, 31), dtype=np.uint8),
        rng.integers(0, 256, (30, 30, 3), dtype=np.uint8),
    ]


class PhashEverySize(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context()
        cls.arrays = images()
        cls.pil = [Image.fromarray(a) for a in cls.arrays]

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def check(self, sizes, highfreq_factor):
        differ = []
        for size in sizes:
            r = self.ctx.hash.arrays(self.arrays, kinds="phash", size=size, highfreq_factor=highfreq_factor)
            for i, im in enumerate(self.pil):
                want = str(imagehash.phash(im, size, highfreq_factor))
                if r.hex(i, "phash") != want:
                    differ.append((size, highfreq_factor, i, self.arrays[i].shape))
        self.assertEqual(differ, [])

    def test_every_size_at_the_default_factor(self):
        self.check(range(2, 65), 4)

    def test_other_factors(self):
        sizes = (2, 3, 5, 6, 7, 11, 12, 13, 17, 24, 31, 37, 47, 61, 64)
        for f in (1, 2, 3, 5, 7):
            self.check(sizes, f)
        self.check((2, 3, 5, 6, 12), 16)

    def test_the_default_is_imagehash_default(self):
        a = self.ctx.hash.arrays(self.arrays, kinds="phash", size=12)
        b = self.ctx.hash.arrays(self.arrays, kinds="phash", size=12, highfreq_factor=4)
        self.assertEqual(a.to_dicts(), b.to_dicts())
        self.assertEqual(a.hex(0, "phash"), "800000000000000000000000000000000000")  # the flat 8 x 8 image

    def test_factors_imagehash_refuses(self):
        for f in (0, -1, -4):
            with self.subTest(highfreq_factor=f):
                with self.assertRaises(ValueError):
                    imagehash.phash(self.pil[0], 8, f)
                with self.assertRaises(ValueError) as caught:
                    self.ctx.hash.arrays(self.arrays[0], kinds="phash", highfreq_factor=f)
                self.assertIsInstance(caught.exception, accel.AccelError)
        for f in (1.5, "4", None):
            with self.subTest(highfreq_factor=f):
                with self.assertRaises(TypeError):
                    imagehash.phash(self.pil[0], 8, f)
                with self.assertRaises(TypeError):
                    self.ctx.hash.arrays(self.arrays[0], kinds="phash", highfreq_factor=f)

    def test_factors_beyond_16_are_not_implemented(self):
        with self.assertRaises(NotImplementedError) as caught:
            self.ctx.hash.arrays(self.arrays[0], kinds="phash", highfreq_factor=17)
        self.assertIsInstance(caught.exception, accel.UnsupportedError)


if __name__ == "__main__":
    unittest.main()
