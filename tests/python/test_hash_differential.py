"""Every hash against imagehash itself on 1,100 generated image files: every
Pillow mode a PNG or JPEG file carries (1, L, LA, P, PA, RGB, RGBA, I;16,
CMYK), sizes from 1x1 to 3000x5 and 5x3000, flat, striped, checkered,
graded and noisy content, hash sizes 2..64 (powers of two and odd ones) and
colorhash binbits 1..8. imagehash hashes ``Image.open(path)`` as its users
call it; libaccel hashes the same files (``ctx.hash.files``). No hash may
differ."""

import os
import sys
import tempfile
import unittest
import warnings

from support import require

np = require("numpy")
imagehash = require("imagehash")
Image = require("PIL.Image")
if not require("PIL").__version__.startswith("9.4."):
    print("SKIP: the hashes follow Pillow 9.4, not %s (python/requirements-test.txt)" % require("PIL").__version__)
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import accel  # noqa: E402

SHAPES = [(1, 1), (1, 2), (2, 1), (1, 9), (9, 1), (3, 5), (8, 8), (9, 8), (17, 13), (32, 32), (33, 31),
          (64, 64), (65, 7), (100, 3), (128, 96), (200, 150), (300, 5), (5, 300), (3000, 5), (5, 3000)]
PATTERNS = ["flat", "noise", "stripes", "checker", "gradient"]
MODES = [("1", "png"), ("L", "png"), ("LA", "png"), ("P", "png"), ("P+tRNS", "png"), ("RGB", "png"),
         ("RGBA", "png"), ("I;16", "png"), ("L", "jpg"), ("RGB", "jpg"), ("CMYK", "jpg")]
SIZES = [2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 17, 31, 32, 33, 48, 64]
PEER = {"ahash": imagehash.average_hash, "dhash": imagehash.dhash, "dhash_vertical": imagehash.dhash_vertical,
        "phash": imagehash.phash, "whash": imagehash.whash}


def content(rng, shape, pattern, channels):
    h, w = shape
    if pattern == "flat":
        a = np.full((h, w, channels), rng.integers(0, 256, channels), np.int64)
    elif pattern == "noise":
        a = rng.integers(0, 256, (h, w, channels))
    elif pattern == "stripes":
        period = int(rng.integers(1, 5))
        a = ((np.arange(w)[None, :, None] // period) % 2 * 255).repeat(h, 0).repeat(channels, 2)
    elif pattern == "checker":
        a = (((np.arange(h)[:, None] + np.arange(w)[None, :]) % 2) * 200 + 20)[:, :, None].repeat(channels, 2)
    else:
        a = ((np.arange(h)[:, None] * 7 + np.arange(w)[None, :] * 3) % 256)[:, :, None].repeat(channels, 2)
        a = a + rng.integers(0, 3, (h, w, channels))
    return np.clip(a, 0, 255).astype(np.uint8)


def make_image(rng, shape, pattern, mode):
    """A PIL image of `mode`, `shape` (h, w)."""
    if mode == "1":
        return Image.fromarray(content(rng, shape, pattern, 1)[:, :, 0] > 127)
    if mode == "I;16":
        a = content(rng, shape, pattern, 1)[:, :, 0].astype(np.uint16) * 257 + rng.integers(0, 200, shape)
        return Image.fromarray(a.astype(np.uint16), "I;16")
    if mode in ("L", "LA"):
        a = content(rng, shape, pattern, len(mode))
        return Image.fromarray(a[:, :, 0] if mode == "L" else a, mode)
    rgb = Image.fromarray(content(rng, shape, pattern, 3), "RGB")
    if mode == "RGB":
        return rgb
    if mode == "RGBA":
        alpha = Image.fromarray(content(rng, shape, "noise", 1)[:, :, 0], "L")
        return Image.merge("RGBA", rgb.split() + (alpha,))
    if mode.startswith("P"):
        p = rgb.quantize(int(rng.integers(2, 64)))
        if mode == "P+tRNS":
            p.info["transparency"] = 0  # palette entry 0 transparent (a tRNS chunk)
        return p
    return rgb.convert("CMYK")


def corpus(folder):
    """[(path, size, binbits)]: 5 images per (mode, shape, pattern) minus a few."""
    rng = np.random.default_rng(24)
    out = []
    k = 0
    for mode, ext in MODES:
        for shape in SHAPES:
            for pattern in PATTERNS:
                if ext == "jpg" and shape[0] * shape[1] > 100000:
                    continue  # keep the run short
                im = make_image(rng, shape, pattern, mode)
                path = os.path.join(folder, "%04d_%s_%dx%d_%s.%s" % (k, mode.replace(";", "").replace("+", ""),
                                                                      shape[0], shape[1],
                                                                      pattern, ext))
                im.save(path, quality=90) if ext == "jpg" else im.save(path)
                out.append((path, SIZES[k % len(SIZES)], 1 + k % 8))
                k += 1
    return out


class AgainstImagehash(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.images = corpus(cls.tmp.name)
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()
        cls.tmp.cleanup()

    def test_every_image_every_kind(self):
        self.assertGreaterEqual(len(self.images), 1000)
        diffs, compared = [], 0
        by_size = {}
        for path, size, binbits in self.images:
            by_size.setdefault((size, binbits), []).append(path)
        for (size, binbits), paths in sorted(by_size.items()):
            kinds = ["ahash", "dhash", "dhash_vertical", "phash", "colorhash"]
            if size & (size - 1) == 0:
                kinds.append("whash")
            r = self.ctx.hash.files(paths, kinds=kinds, size=size, binbits=binbits)
            for i, path in enumerate(paths):
                self.assertIsNone(r.error(i), path)
                with Image.open(path) as im, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for k in kinds:
                        want = str(imagehash.colorhash(im, binbits) if k == "colorhash" else PEER[k](im, size))
                        compared += 1
                        if r.hex(i, k) != want:
                            diffs.append("%s %s size %d binbits %d: %s vs imagehash %s"
                                         % (os.path.basename(path), k, size, binbits, r.hex(i, k), want))
        self.assertGreater(compared, 5000)
        self.assertEqual(diffs, [], "%d of %d hashes differ:\n%s" % (len(diffs), compared, "\n".join(diffs[:30])))


if __name__ == "__main__":
    unittest.main()
