"""accel hash against imagehash's values, its options, formats and directory walks."""
import json
import os
import shutil
import unittest

from common import HASHDATA, CliTest, parse_tsv, reference_rows, run


class CliHash(CliTest):
    prefix = "accel-hash-"

    def setUp(self):
        super().setUp()
        self.ref = reference_rows()

    def test_tsv_matches_imagehash_and_flags_errors(self):
        r = run("hash", HASHDATA)
        self.assertEqual(r.returncode, 1, r.stderr)  # the fixtures include broken files
        header, rows = parse_tsv(r.stdout)
        self.assertEqual(header, ["path", "ahash", "dhash", "phash", "whash"])
        images = sorted(f for f in os.listdir(HASHDATA) if f.lower().endswith((".png", ".jpg", ".jpeg")))
        self.assertEqual([os.path.basename(row["path"]) for row in rows], images)
        errors = 0
        for row in rows:
            ref = self.ref[os.path.basename(row["path"])]
            for kind in header[1:]:
                if ref["mode"] == "error":
                    self.assertEqual(row[kind], "error:ACCEL_ERR_DECODE", row["path"])
                else:
                    self.assertEqual(row[kind], ref[kind + "8"], (row["path"], kind))
            if ref["mode"] == "error":
                errors += 1
                self.assertIn(os.path.basename(row["path"]) + ": ACCEL_ERR_DECODE", r.stderr)
        self.assertEqual(errors, 5)

    def test_kinds_order_size_and_json(self):
        files = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil_sample_cmyk.jpg", "gen_adam7_rgba16.png")]
        r = run("hash", "--kinds", "colorhash,dhash_vertical,whash", "--size", "16", *files)
        self.assertEqual(r.returncode, 0, r.stderr)
        header, rows = parse_tsv(r.stdout)
        self.assertEqual(header, ["path", "colorhash", "dhash_vertical", "whash"])
        self.assertEqual([row["path"] for row in rows], files)  # files keep the order given
        for row in rows:
            ref = self.ref[os.path.basename(row["path"])]
            self.assertEqual(row["colorhash"], ref["colorhash8"])
            self.assertEqual(row["dhash_vertical"], ref["dhash_vertical16"])
            self.assertEqual(row["whash"], ref["whash16"])
        r = run("hash", "--format", "json", "--kinds", "ahash,phash", files[0], "/no/such.png")
        self.assertEqual(r.returncode, 1)
        doc = json.loads(r.stdout)
        self.assertEqual(doc[0], {"path": files[0], "ahash": self.ref["hopper.jpg"]["ahash8"],
                                  "phash": self.ref["hopper.jpg"]["phash8"]})
        self.assertEqual(doc[1], {"path": "/no/such.png", "error": "ACCEL_ERR_IO",
                                  "message": "cannot open /no/such.png: No such file or directory"})
        self.assertEqual(json.loads(run("hash", "--format", "json", os.path.join(self.tmp)).stdout), [])

    def test_colorhash_binbits_beyond_8_as_imagehash(self):
        try:
            import PIL
            import imagehash
            from PIL import Image
        except ImportError:
            self.skipTest("imagehash is not installed")
        if not PIL.__version__.startswith("9.4."):
            self.skipTest("the hashes follow Pillow 9.4's resampling, not %s" % PIL.__version__)
        files = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil_sample_cmyk.jpg", "gen_adam7_rgba16.png")]
        for binbits in (9, 12, 24):
            r = run("hash", "--kinds", "colorhash", "--binbits", str(binbits), *files)
            self.assertEqual(r.returncode, 0, r.stderr)
            _, rows = parse_tsv(r.stdout)
            for row in rows:
                with Image.open(row["path"]) as im:
                    self.assertEqual(row["colorhash"], str(imagehash.colorhash(im, binbits=binbits)),
                                     (row["path"], binbits))
        self.assertEqual(run("hash", "--kinds", "colorhash", "--binbits", "25", files[0]).returncode, 2)

    def test_phash_highfreq_as_imagehash(self):
        try:
            import PIL
            import imagehash
            from PIL import Image
        except ImportError:
            self.skipTest("imagehash is not installed")
        if not PIL.__version__.startswith("9.4."):
            self.skipTest("the hashes follow Pillow 9.4's resampling, not %s" % PIL.__version__)
        files = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil_sample_cmyk.jpg", "gen_adam7_rgba16.png")]
        for size, highfreq in ((8, 1), (5, 3), (12, 7)):
            r = run("hash", "--kinds", "phash", "--size", str(size), "--highfreq", str(highfreq), *files)
            self.assertEqual(r.returncode, 0, r.stderr)
            _, rows = parse_tsv(r.stdout)
            for row in rows:
                with Image.open(row["path"]) as im:
                    self.assertEqual(row["phash"], str(imagehash.phash(im, size, highfreq)),
                                     (row["path"], size, highfreq))
        for bad in ("0", "17"):
            self.assertEqual(run("hash", "--kinds", "phash", "--highfreq", bad, files[0]).returncode, 2)

    def test_whash_options_as_imagehash(self):
        try:
            import warnings
            import PIL
            import imagehash
            from PIL import Image
        except ImportError:
            self.skipTest("imagehash is not installed")
        if not PIL.__version__.startswith("9.4."):
            self.skipTest("the hashes follow Pillow 9.4's resampling, not %s" % PIL.__version__)
        files = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil_sample_cmyk.jpg")]
        cases = (([], dict()), (["--whash-scale", "64"], dict(image_scale=64)),
                 (["--whash-keep-ll"], dict(remove_max_haar_ll=False)),
                 (["--whash-mode", "db4"], dict(mode="db4")),
                 (["--whash-mode", "db4", "--whash-scale", "128", "--whash-keep-ll"],
                  dict(mode="db4", image_scale=128, remove_max_haar_ll=False)))
        for args, kw in cases:
            r = run("hash", "--kinds", "whash", "--size", "8", *args, *files)
            self.assertEqual(r.returncode, 0, r.stderr)
            _, rows = parse_tsv(r.stdout)
            for row in rows:
                with Image.open(row["path"]) as im, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.assertEqual(row["whash"], str(imagehash.whash(im, 8, **kw)), (row["path"], args))
        self.assertEqual(run("hash", "--kinds", "whash", "--whash-scale", "24", files[0]).returncode, 2)
        self.assertEqual(run("hash", "--kinds", "whash", "--whash-mode", "db6", files[0]).returncode, 2)

    def test_directories_are_walked_recursively_in_order(self):
        os.makedirs(os.path.join(self.tmp, "b", "deep"))
        os.makedirs(os.path.join(self.tmp, "a"))
        for rel, src in (("b/deep/Z.JPG", "hopper.jpg"), ("a/x.Png", "hopper.png"), ("top.jpeg", "hopper.jpg"),
                         ("a/notes.txt", None), ("b/pic.gif", None)):
            dst = os.path.join(self.tmp, rel)
            if src:
                shutil.copy(os.path.join(HASHDATA, src), dst)
            else:
                with open(dst, "w") as f:
                    f.write("not an image")
        r = run("--threads", "1", "hash", "--kinds", "ahash", self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, rows = parse_tsv(r.stdout)
        self.assertEqual([os.path.relpath(row["path"], self.tmp) for row in rows],
                         ["a/x.Png", "b/deep/Z.JPG", "top.jpeg"])
        self.assertEqual({row["ahash"] for row in rows}, {self.ref["hopper.jpg"]["ahash8"]})
        same = run("hash", "--jobs", "2", "--kinds", "ahash", self.tmp)
        self.assertEqual(same.stdout, r.stdout)

    def test_fast_mode_and_usage_errors(self):
        r = run("hash", "--fast", os.path.join(HASHDATA, "hopper.jpg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(parse_tsv(r.stdout)[1]), 1)
        for args in (["hash"], ["hash", "--kinds", "md5", HASHDATA], ["hash", "--size", "1", HASHDATA],
                     ["hash", "--kinds", "whash", "--size", "12", HASHDATA], ["hash", "--format", "xml", HASHDATA],
                     ["hash", "--kinds", "ahash,ahash", HASHDATA], ["hash", "--bogus", HASHDATA]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
