"""The Python package over the built shared library: version, contexts, the
log callback, errors, statistics and gray conversion on numpy arrays."""
import os
import sys
import unittest

if os.environ.get("ACCEL_SANITIZED") == "1":
    print("SKIP: the library is built with sanitizers; Python cannot load it without preloading their runtimes")
    sys.exit(77)
try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable)
    sys.exit(77)

import accel  # noqa: E402

for k in ("ACCEL_BACKEND", "ACCEL_LOG"):
    os.environ.pop(k, None)


def pillow_luma(rgb):
    """Pillow's convert('L') written with numpy: weights 0.299/0.587/0.114 in 16-bit fixed point."""
    w = [int(c * 65536 + 0.5) for c in (0.299, 0.587, 0.114)]
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * w[0] + g * w[1] + b * w[2] + 32768) >> 16).astype(np.uint8)


class Bindings(unittest.TestCase):
    def test_version_matches_header(self):
        src = os.environ["ACCEL_SOURCE_ROOT"]
        with open(os.path.join(src, "include", "accel", "core.h")) as f:
            header = f.read()
        want = header.split('#define ACCEL_VERSION_STRING "')[1].split('"')[0]
        self.assertEqual(accel.version(), want)
        self.assertIn("cuda=", accel.build_info())

    def test_context_and_log_callback(self):
        lines = []
        with accel.Context(backend="cpu", threads=2, log=lambda lvl, msg: lines.append((lvl, msg)),
                           log_level="debug") as ctx:
            info = ctx.info()
            self.assertEqual(info["backend"], "cpu")
            self.assertEqual(info["cpu_threads"], 2)
            self.assertEqual(info["log_level"], "debug")
        self.assertTrue(any(lvl == "debug" and "context ready" in msg for lvl, msg in lines), lines)

    def test_cuda_request_without_device_logs_the_fallback_line(self):
        if accel.backends()["cuda"]["available"]:
            self.skipTest("a CUDA device is present")
        lines = []
        with accel.Context(backend="cuda", log=lambda lvl, msg: lines.append((lvl, msg))) as ctx:
            self.assertEqual(ctx.info()["backend"], "cpu")
            self.assertEqual(ctx.stats()["ctx.init"]["fallbacks"], 1)
        warns = [m for lvl, m in lines if lvl == "warn"]
        self.assertEqual(len(warns), 1)
        self.assertRegex(warns[0], r"^\[GPU\] ctx\.init failed: .+[^.]\. CPU fallback\.$")
        with self.assertRaises(accel.AccelError) as e:
            accel.Context(backend="cuda", strict=True)
        self.assertEqual(e.exception.name, "ACCEL_ERR_NO_DEVICE")

    def test_to_gray_matches_pillow_arithmetic(self):
        rng = np.random.default_rng(1)
        with accel.Context(backend="cpu") as ctx:
            for c in (3, 4):
                img = rng.integers(0, 256, size=(37, 53, c), dtype=np.uint8)
                np.testing.assert_array_equal(ctx.to_gray(img), pillow_luma(img))
            gray = rng.integers(0, 256, size=(9, 11), dtype=np.uint8)
            np.testing.assert_array_equal(ctx.to_gray(gray), gray)
            # numpy views: flipped, BGR-reversed, sliced; output into a strided view
            img = rng.integers(0, 256, size=(40, 60, 3), dtype=np.uint8)
            view = img[::-1, ::2, ::-1]
            out = np.zeros((40, 60), dtype=np.uint8)[:, ::2]
            ctx.to_gray(view, out=out)
            np.testing.assert_array_equal(out, pillow_luma(np.ascontiguousarray(view)))
            st = ctx.stats()["image.gray"]
            self.assertEqual(st["runs"], st["cpu_runs"])
            self.assertGreaterEqual(st["runs"], 4)

    def test_errors_raise_with_status_and_message(self):
        with accel.Context(backend="cpu") as ctx:
            with self.assertRaises(accel.AccelError) as e:
                ctx.to_gray(np.zeros((4, 4, 3), dtype=np.uint8), out=np.zeros((5, 4), dtype=np.uint8))
            self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")
            self.assertIn("dst is 5x4 but src is 4x4", str(e.exception))
            with self.assertRaises(accel.AccelError):
                ctx.to_gray(np.zeros((4, 4, 3), dtype=np.float32), out=np.zeros((4, 4), dtype=np.uint8))
            with self.assertRaises(TypeError):
                ctx.to_gray([[1, 2]])
        with self.assertRaises(accel.AccelError) as e:
            accel.Context(threads=-1)
        self.assertIn("cpu_threads", str(e.exception))


HASHDATA = os.path.join(os.environ["ACCEL_SOURCE_ROOT"], "tests", "data", "hash")


def reference():
    rows = {}
    for name in ("reference.tsv", "generated.tsv"):
        with open(os.path.join(HASHDATA, name)) as f:
            lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
        header = lines[0].split("\t")
        for line in lines[1:]:
            cols = dict(zip(header, line.split("\t")))
            rows[cols["file"]] = cols
    return rows


class Hashing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref = reference()
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_files_match_imagehash(self):
        names = sorted(self.ref)
        r = self.ctx.hash_files([os.path.join(HASHDATA, n) for n in names], kinds=accel.HASH_KINDS)
        for i, n in enumerate(names):
            if self.ref[n]["mode"] == "error":
                self.assertEqual(r.error(i)[0], "ACCEL_ERR_DECODE", n)
                self.assertIsNone(r.hex(i, "ahash"))
                continue
            for k in accel.HASH_KINDS:
                self.assertEqual(r.hex(i, k), self.ref[n][k + "8"], (n, k))
        ok = [i for i, n in enumerate(names) if self.ref[n]["mode"] != "error"]
        u = r.u64("dhash")
        self.assertEqual(u.dtype, np.uint64)
        for i in ok:
            self.assertEqual(int(u[i]), int(self.ref[names[i]]["dhash8"], 16))
        with self.assertRaises(ValueError):
            r.u64("colorhash")
        d = r.to_dicts()
        self.assertEqual(set(d[ok[0]]), set(accel.HASH_KINDS))

    def test_bytes_and_size_16(self):
        names = ["hopper.jpg", "pil123p.png", "pil_sample_cmyk.jpg"]
        blobs = []
        for n in names:
            with open(os.path.join(HASHDATA, n), "rb") as f:
                blobs.append(f.read())
        r = self.ctx.hash_bytes(blobs + [b"garbage"], kinds=["phash", "whash"], size=16)
        for i, n in enumerate(names):
            self.assertEqual(r.hex(i, "phash"), self.ref[n]["phash16"])
            self.assertEqual(r.hex(i, "whash"), self.ref[n]["whash16"])
        self.assertEqual(r.error(3)[0], "ACCEL_ERR_FORMAT")

    def test_numpy_arrays_hash_like_pil_fromarray(self):
        rgb, mode = self.ctx.decode(os.path.join(HASHDATA, "hopper.png"))
        self.assertEqual((rgb.shape, rgb.dtype, mode), ((128, 128, 3), np.uint8, "RGB"))
        gray, mode = self.ctx.decode(os.path.join(HASHDATA, "hopper_gray.jpg"), gray=True)
        self.assertEqual((gray.ndim, mode), (2, "L"))
        rgba = np.dstack([rgb, np.arange(128 * 128, dtype=np.uint32).reshape(128, 128).astype(np.uint8)])
        r = self.ctx.hash_arrays([rgb, gray, rgba, rgb[::-1, :, ::-1][::-1, :, ::-1]], kinds=accel.HASH_KINDS)
        for k in accel.HASH_KINDS:
            self.assertEqual(r.hex(0, k), self.ref["hopper.png"][k + "8"])
            self.assertEqual(r.hex(1, k), self.ref["hopper_gray.jpg"][k + "8"])
            self.assertEqual(r.hex(2, k), r.hex(0, k))  # alpha is ignored
            self.assertEqual(r.hex(3, k), r.hex(0, k))  # a strided view of the same pixels
        with self.assertRaises(accel.AccelError):
            self.ctx.hash_arrays([np.zeros((4, 4, 5), np.uint8)])
        with self.assertRaises(ValueError):
            self.ctx.hash_files([os.path.join(HASHDATA, "hopper.png")], kinds=["md5"])

    def test_helpers(self):
        self.assertEqual(accel.distance("8100000000000001", "0100000000000000"), 2)
        bits = accel.hex_to_bits("8100000000000001", 64)
        self.assertEqual(np.flatnonzero(bits).tolist(), [0, 7, 63])
        calls = []
        r = self.ctx.hash_files([os.path.join(HASHDATA, "hopper.png")] * 3,
                                progress=lambda stage, f: calls.append((stage, f)))
        self.assertTrue(all(r.ok(i) for i in range(3)))
        self.assertEqual(calls[-1], ("hash.batch", 1.0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
