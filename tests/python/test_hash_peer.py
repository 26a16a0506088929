"""The hash domain's corners against imagehash itself (4.3.x): bool arrays
hashed as imagehash hashes ``PIL.Image.fromarray(mask)`` (mode "1"), and the
Python types of the errors where imagehash refuses an argument."""

import os
import sys
import unittest
import warnings

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

PEER = {"ahash": imagehash.average_hash, "dhash": imagehash.dhash, "dhash_vertical": imagehash.dhash_vertical,
        "phash": imagehash.phash, "whash": imagehash.whash}


def peer_hex(kind, image, size=8, binbits=3):
    """imagehash's str() of `kind` on a PIL image."""
    if kind == "colorhash":
        return str(imagehash.colorhash(image, binbits))
    return str(PEER[kind](image, size))


def peer_error(kind, size=8, binbits=3):
    """The exception imagehash raises for `kind` at this size / binbits on an 8 x 8 image, or None."""
    image = Image.fromarray(np.zeros((8, 8), np.uint8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whash's log2 of 0 or of a negative size
        try:
            peer_hex(kind, image, size, binbits)
        except Exception as e:  # noqa: BLE001 - any type: the test compares them
            return e
    return None


class BoolImages(unittest.TestCase):
    """A bool (H, W) array is Pillow's mode "1": 0 and 255 once converted."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context()
        rng = np.random.default_rng(15)
        shapes = [(1, 1), (1, 9), (9, 1), (3, 5), (8, 8), (17, 9), (64, 64), (100, 7), (33, 48)]
        cls.masks = [rng.random(s) < p for s in shapes for p in (0.1, 0.5, 0.9)]
        cls.masks += [np.zeros((8, 8), bool), np.ones((8, 8), bool), np.eye(12, dtype=bool)]
        big = rng.random((40, 60)) < 0.5
        cls.masks += [big.T, big[::3, 1::2]]  # strided views

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def check(self, kinds, size=8, binbits=3):
        r = self.ctx.hash.arrays(self.masks, kinds=kinds, size=size, binbits=binbits)
        for i, m in enumerate(self.masks):
            image = Image.fromarray(m)
            self.assertEqual(image.mode, "1")
            for k in kinds:
                with self.subTest(kind=k, size=size, shape=m.shape, index=i):
                    self.assertEqual(r.hex(i, k), peer_hex(k, image, size, binbits))

    def test_every_kind_at_size_8(self):
        self.check(accel.HASH_KINDS)

    def test_other_sizes(self):
        for size in (2, 4, 16):
            self.check(("ahash", "dhash", "dhash_vertical", "phash", "whash"), size=size)
        for size in (3, 5, 13):  # every size: test_phash_peer.py
            self.check(("ahash", "dhash", "dhash_vertical", "phash"), size=size)

    def test_colorhash_binbits(self):
        for binbits in (1, 2, 5, 8):
            self.check(("colorhash",), binbits=binbits)

    def test_bool_is_the_uint8_image_of_0_and_255(self):
        m = self.masks[4]
        a = self.ctx.hash.arrays([m, m.astype(np.uint8) * 255], kinds=accel.HASH_KINDS)
        for k in accel.HASH_KINDS:
            self.assertEqual(a.hex(0, k), a.hex(1, k))
        # a gray 0/1 image is another image: colorhash calls all of it black
        gray01 = self.ctx.hash.arrays(m.astype(np.uint8), kinds="colorhash")
        self.assertNotEqual(gray01.hex(0, "colorhash"), a.hex(0, "colorhash"))

    def test_bool_of_another_shape_is_a_type_error_as_in_pillow(self):
        for shape in ((4, 4, 2), (4, 4, 3), (4, 4, 4)):
            m = np.zeros(shape, bool)
            with self.assertRaises(TypeError):
                Image.fromarray(m)
            with self.assertRaises(TypeError):
                self.ctx.hash.arrays(m, kinds="ahash")


class Ranges(unittest.TestCase):
    """Sizes and binbits imagehash takes beyond its usual ones: dhash_vertical
    and whash at size 1 (one bit), colorhash binbits above 8."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context()
        rng = np.random.default_rng(16)
        cls.images = []
        for shape in [(1, 1), (1, 2), (2, 1), (3, 5), (8, 8), (33, 17), (200, 301), (5, 300)]:
            for channels in ((), (2,), (3,), (4,)):
                cls.images.append(rng.integers(0, 256, shape + channels, dtype=np.uint8))
            y, x = np.mgrid[0:shape[0], 0:shape[1]]
            cls.images.append(np.stack([x * 7 % 256, y * 5 % 256, (x + y) * 3 % 256], -1).astype(np.uint8))
            cls.images.append(np.full(shape, 200, np.uint8))
            cls.images.append(rng.random(shape) < 0.5)

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def check(self, kinds, size=8, binbits=3):
        r = self.ctx.hash.arrays(self.images, kinds=kinds, size=size, binbits=binbits)
        for i, a in enumerate(self.images):
            image = Image.fromarray(a)
            for k in kinds:
                with self.subTest(kind=k, size=size, binbits=binbits, shape=a.shape, dtype=a.dtype):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # whash's log2(1) level arithmetic
                        self.assertEqual(r.hex(i, k), peer_hex(k, image, size, binbits))

    def test_size_1(self):
        self.check(("dhash_vertical", "whash"), size=1)

    def test_size_1_from_encoded_images(self):
        import io
        blobs = []
        for a in self.images[:10]:
            buf = io.BytesIO()
            Image.fromarray(a).save(buf, format="PNG")
            blobs.append(buf.getvalue())
        r = self.ctx.hash.bytes(blobs, kinds=["dhash_vertical", "whash"], size=1)
        for i, b in enumerate(blobs):
            image = Image.open(io.BytesIO(b))
            self.assertEqual(r.hex(i, "dhash_vertical"), str(imagehash.dhash_vertical(image, 1)))
            self.assertEqual(r.hex(i, "whash"), str(imagehash.whash(image, 1)))

    def test_size_1_still_refused_where_imagehash_refuses_it(self):
        for kind in ("ahash", "dhash", "phash"):
            self.assertIsInstance(peer_error(kind, 1), ValueError)
            with self.assertRaises(ValueError):
                self.ctx.hash.arrays(self.images[0], kinds=kind, size=1)

    def test_colorhash_binbits_above_8(self):
        for binbits in range(9, 25):
            self.check(("colorhash",), binbits=binbits)

    def test_colorhash_binbits_above_24_is_refused(self):
        with self.assertRaises(ValueError):
            self.ctx.hash.arrays(self.images[0], kinds="colorhash", binbits=25)


class LargeSizes(unittest.TestCase):
    """Hash sizes above 64 (up to ACCEL_HASH_SIZE_MAX, 256), as imagehash computes them."""

    def test_sizes_65_to_256(self):
        rng = np.random.default_rng(9)
        images = [rng.integers(0, 256, (300, 420, 3), dtype=np.uint8),
                  (np.arange(520)[None, :] // 7 % 2 * 255).repeat(270, 0).astype(np.uint8)]
        with accel.Context(backend="cpu") as ctx:
            for a in images:
                image = Image.fromarray(a)
                for size in (65, 100, 128, 256):
                    kinds = [k for k in PEER if k != "whash" or size & (size - 1) == 0]
                    r = ctx.hash.arrays(a, kinds=kinds, size=size)
                    for k in kinds:
                        with self.subTest(kind=k, size=size, shape=a.shape):
                            self.assertEqual(r.hex(0, k), str(PEER[k](image, size)))
            with self.assertRaises(ValueError):
                ctx.hash.arrays(images[0], kinds="ahash", size=257)


class WhashOptions(unittest.TestCase):
    """whash's image_scale and remove_max_haar_ll against imagehash's whash."""

    def test_image_scale_and_remove_max_haar_ll(self):
        rng = np.random.default_rng(77)
        diffs, n = [], 0
        with accel.Context(backend="cpu") as ctx:
            for t in range(40):
                h, w = (int(v) for v in rng.integers(1, 200, 2))
                a = rng.integers(0, 256, (h, w), dtype=np.uint8)
                if t % 3 == 0:  # stripes: ties at the median
                    a = (np.arange(w)[None, :] // 3 % 2 * 255).repeat(h, 0).astype(np.uint8)
                image = Image.fromarray(a)
                for size in (1, 2, 4, 8, 16):
                    for scale in (None, size, 2 * size, 128):
                        if scale is not None and scale < size:
                            continue
                        for remove in (True, False):
                            want = str(imagehash.whash(image, size, image_scale=scale, remove_max_haar_ll=remove))
                            got = ctx.hash.arrays(a, kinds="whash", size=size, whash_image_scale=scale,
                                                  whash_remove_max_haar_ll=remove).hex(0, "whash")
                            n += 1
                            if got != want:
                                diffs.append((a.shape, size, scale, remove, got, want))
        self.assertGreater(n, 1000)
        self.assertEqual(diffs, [])

    def test_db4(self):
        """mode="db4": (size + 6)^2 bits where image_scale >= 8 x size, as imagehash's."""
        rng = np.random.default_rng(78)
        diffs, n = [], 0
        with accel.Context(backend="cpu") as ctx, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pywt: "Level value of ... is too high"
            for t in range(12):
                h, w = (int(v) for v in rng.integers(16, 300, 2))
                a = rng.integers(0, 256, (h, w), dtype=np.uint8)
                if t % 3 == 0:
                    a = (np.arange(w)[None, :] // 5 % 2 * 255).repeat(h, 0).astype(np.uint8)
                image = Image.fromarray(a)
                natural = 2 ** int(np.log2(min(h, w)))
                for size in (1, 2, 4, 8):
                    for scale in (None, size, 2 * size, 4 * size, 8 * size, 16 * size, 64):
                        if scale is None and max(natural, size) < 8 * size:
                            continue  # refused: see below
                        if scale is not None and scale < size:
                            continue
                        for remove in (True, False):
                            want = str(imagehash.whash(image, size, image_scale=scale, mode="db4",
                                                       remove_max_haar_ll=remove))
                            got = ctx.hash.arrays(a, kinds="whash", size=size, whash_image_scale=scale,
                                                  whash_remove_max_haar_ll=remove, whash_mode="db4").hex(0, "whash")
                            n += 1
                            if got != want:
                                diffs.append((a.shape, size, scale, remove, got, want))
            small = ctx.hash.arrays(np.zeros((20, 20), np.uint8), kinds="whash", size=8, whash_mode="db4")
            self.assertEqual(small.error(0)[0], "ACCEL_ERR_UNSUPPORTED")  # image_scale 16 < 8 x 8
        self.assertGreater(n, 100)
        self.assertEqual(diffs, [])

    def test_image_scale_errors_as_imagehash(self):
        image = Image.fromarray(np.zeros((40, 40), np.uint8))
        with accel.Context(backend="cpu") as ctx:
            for scale, size, message in ((24, 8, "image_scale is not power of 2"), (4, 8, "hash_size in a wrong range")):
                with self.assertRaisesRegex(AssertionError, message):
                    imagehash.whash(image, size, image_scale=scale)
                with self.assertRaisesRegex(AssertionError, message):
                    ctx.hash.arrays(np.asarray(image), kinds="whash", size=size, whash_image_scale=scale)
            with self.assertRaisesRegex(AssertionError, "hash_size is not power of 2"):
                ctx.hash.arrays(np.asarray(image), kinds="whash", size=3)


class Errors(unittest.TestCase):
    """Where imagehash raises ValueError or AssertionError, the library raises
    an exception of that type too (and an AccelError)."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context()
        cls.image = np.zeros((8, 8), np.uint8)

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def check(self, kind, size=8, binbits=3):
        expected = peer_error(kind, size, binbits)
        self.assertIsNotNone(expected, "imagehash accepts %s size %d binbits %d" % (kind, size, binbits))
        with self.assertRaises(type(expected)) as caught:
            self.ctx.hash.arrays(self.image, kinds=kind, size=size, binbits=binbits)
        self.assertIsInstance(caught.exception, accel.AccelError)
        return caught.exception

    def test_sizes_below_2(self):
        for kind in ("ahash", "dhash", "phash"):
            for size in (1, 0, -1, -8):
                with self.subTest(kind=kind, size=size):
                    self.assertIsInstance(self.check(kind, size=size), ValueError)

    def test_dhash_vertical_sizes_below_1(self):
        for size in (0, -1, -8):
            with self.subTest(size=size):
                self.check("dhash_vertical", size=size)

    def test_colorhash_binbits_below_1(self):
        for binbits in (0, -1, -3):
            with self.subTest(binbits=binbits):
                self.check("colorhash", binbits=binbits)

    def test_whash_negative_size(self):
        self.assertIsInstance(self.check("whash", size=-2), ValueError)

    def test_whash_size_not_a_power_of_two_is_an_assertion_error(self):
        for size in (3, 5, 6, 12, 63):
            with self.subTest(size=size):
                self.assertIsInstance(peer_error("whash", size), AssertionError)
                e = self.check("whash", size=size)
                self.assertIsInstance(e, accel.HashSizeAssertionError)
                self.assertIsInstance(e, ValueError)
                self.assertIsInstance(e, accel.InvalidArgumentError)
                self.assertEqual(e.name, "ACCEL_ERR_INVALID_ARG")
                self.assertIn("power-of-two", str(e))

    def test_whash_size_with_other_kinds(self):
        with self.assertRaises(AssertionError):
            self.ctx.hash.arrays(self.image, kinds=["ahash", "whash"], size=6)
        # the same size without whash is hashed
        self.assertTrue(self.ctx.hash.arrays(self.image, kinds=["ahash", "dhash"], size=6).ok(0))

    def test_the_errors_pickle_as_their_class(self):
        import pickle
        try:
            self.ctx.hash.arrays(self.image, kinds="whash", size=3)
        except AssertionError as e:
            again = pickle.loads(pickle.dumps(e))
            self.assertIsInstance(again, accel.HashSizeAssertionError)
            self.assertEqual(str(again), str(e))


if __name__ == "__main__":
    unittest.main()
