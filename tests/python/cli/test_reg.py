"""accel register and accel warp: flags, help, exit codes, the output lines, and
a registration of a synthetic pair with a known smooth deformation (made here,
standard library only): the field's axes and signs against the truth, the
transform file against transformix (when installed), warped images and layers,
and accel warp reproducing accel register's outputs."""
import array
import math
import os
import shutil
import struct
import subprocess
import unittest
import zlib

from common import SRC, CliTest, npy_bytes, run

H, W = 128, 128


def truth(x, y):
    """The deformation: T(x, y) = (x, y) + u, u in pixels (x = column, y = row)."""
    return 2.0 + 1.0 * math.sin(2 * math.pi * y / H), -1.5 + 0.8 * math.cos(2 * math.pi * x / W)


def scene(x, y):
    """A smooth texture, defined everywhere."""
    return (100 + 40 * math.sin(x / 7.0) * math.cos(y / 9.0) + 30 * math.sin((x + 2 * y) / 13.0) +
            20 * math.cos((3 * x - y) / 17.0))


def write_npy(path, shape, descr, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(header) + 1) % 64
    code = {"<f4": "f", "|u1": "B"}[descr]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + pad + 1) + header.encode() + b" " * pad + b"\n")
        f.write(struct.pack("<%d%s" % (len(values), code), *values))


def write_tiff_f32(path, h, w, values):
    """A minimal little-endian float32 gray TIFF, one strip."""
    data = struct.pack("<%df" % len(values), *values)
    entries = [(256, 4, w), (257, 4, h), (258, 3, 32), (259, 3, 1), (262, 3, 1), (273, 4, 8 + 2 + 12 * 10 + 4),
               (277, 3, 1), (278, 4, h), (279, 4, len(data)), (339, 3, 3)]
    out = bytearray(b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", len(entries)))
    for tag, typ, value in entries:
        out += struct.pack("<HHIHH", tag, typ, 1, value, 0) if typ == 3 else struct.pack("<HHII", tag, typ, 1, value)
    out += struct.pack("<I", 0) + data
    with open(path, "wb") as f:
        f.write(out)


def write_png_gray(path, h, w, values):
    rows = b"".join(b"\x00" + bytes(values[r * w:(r + 1) * w]) for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def floats(path):
    shape, descr, data = npy_bytes(path)
    assert descr == "<f4", descr
    a = array.array("f")
    a.frombytes(data)
    return shape, a


def keys(stdout):
    return dict(l.split("\t", 1) for l in stdout.strip().split("\n"))


class CliReg(CliTest):
    prefix = "accel-reg-"

    def p(self, name):
        return os.path.join(self.tmp, name)

    def make_pair(self):
        """fixed(p) = scene(T(p)) as a float32 TIFF, moving = scene as float32
        .npy, the moving image as uint8 .npy, RGB uint8 .npy (channel k =
        moving + 20 k) and gray PNG."""
        fixed = [scene(*(a + b for a, b in zip((x, y), truth(x, y)))) for y in range(H) for x in range(W)]
        moving = [scene(x, y) for y in range(H) for x in range(W)]
        write_tiff_f32(self.p("fixed.tif"), H, W, fixed)
        write_npy(self.p("moving.npy"), (H, W), "<f4", moving)
        u8 = [max(0, min(255, int(v + 0.5))) for v in moving]
        write_npy(self.p("moving_u8.npy"), (H, W), "|u1", u8)
        write_npy(self.p("moving_rgb.npy"), (H, W, 3), "|u1", [min(255, v + 20 * k) for v in u8 for k in range(3)])
        write_png_gray(self.p("moving.png"), H, W, u8)

    def test_help(self):
        for cmd, flags in (("register", ("--fixed", "--moving", "--grid", "--levels", "--iterations", "--samples",
                                         "--metric", "--tolerance", "--seed", "--preset", "--out-transform",
                                         "--out-field", "--out-warped", "--warp", "--optimizer", "--bending",
                                         "--mask", "--window", "--prealign", "--interp", "--fill",
                                         "--tiff-compression")),
                           ("warp", ("--transform", "--interp", "--fill", "--region", "--out-field",
                                     "--tiff-compression"))):
            r = run(cmd, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertTrue(r.stdout.startswith("usage: accel"))
            for f in flags:
                self.assertIn(f, r.stdout, (cmd, f))

    def test_usage_errors(self):
        self.make_pair()
        fm = ["register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy")]
        for args in (["register"], ["register", "--fixed", self.p("fixed.tif")], fm + ["--levels", "-1"],
                     fm + ["--levels", "9"], fm + ["--grid", "0"], fm + ["--grid", "x"], fm + ["--iterations", "0"],
                     fm + ["--samples", "-1"], fm + ["--metric", "mi"], fm + ["--optimizer", "lbfgs"],
                     fm + ["--preset", "ants"], fm + ["--tolerance", "-1"], fm + ["--bending", "-0.5"],
                     fm + ["--seed", "1.5"], fm + ["--prealign", "affine"], fm + ["--interp", "nearest"],
                     fm + ["--fill", "nan"], fm + ["--window", "0"], fm + ["--bogus"], fm + ["extra"],
                     # the library's bounds are usage errors too (they were exit status 1, after loading)
                     fm + ["--tolerance", "1"], fm + ["--iterations", "1000001"], fm + ["--window", "100001"],
                     fm + ["--grid", "1e30"], fm + ["--validation-samples", "0"],
                     fm + ["--tiff-compression", "lzw"], fm + ["--tile", "70000"],
                     fm + ["--warp", self.p("moving.npy")], fm + ["--out-field", self.p("d.tif")],
                     fm + ["--out-warped", self.p("w.png")], fm + ["--out-warped", self.p("moving.npy")],
                     fm + ["--out-field", self.p("d.npy"), "--warp", self.p("moving.npy"), self.p("d.npy")],
                     ["register", "--fixed", self.p("fixed.bmp"), "--moving", self.p("moving.npy")],
                     ["warp"], ["warp", self.p("moving.npy"), self.p("o.npy")],
                     ["warp", "--transform", self.p("t.txt")], ["warp", "--transform", self.p("t.txt"), "a.npy"],
                     ["warp", "--transform", self.p("t.txt"), "--region", "0,0,0,5", "a.npy", "b.npy"],
                     ["warp", "--transform", self.p("t.txt"), "--region", "0,0,5", "a.npy", "b.npy"],
                     ["warp", "--transform", self.p("t.txt"), self.p("moving.npy"), self.p("moving.npy")],
                     ["warp", "--transform", self.p("t.txt"), "a.npy", "b.jpg"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))

    def translation_file(self, tx, ty, size=(W, H)):
        """An elastix TranslationTransform file over the fixed image (or an image of `size`), written here."""
        path = self.p("translation.txt")
        with open(path, "w") as f:
            f.write('(Transform "TranslationTransform")\n(NumberOfParameters 2)\n(TransformParameters %r %r)\n'
                    '(InitialTransformParametersFileName "NoInitialTransform")\n(HowToCombineTransforms "Compose")\n'
                    '(FixedImageDimension 2)\n(MovingImageDimension 2)\n(Size %d %d)\n(Index 0 0)\n(Spacing 1 1)\n'
                    '(Origin 0 0)\n(Direction 1 0 0 1)\n(UseDirectionCosines "true")\n' % ((tx, ty) + size))
        return path

    def test_layers_of_other_channel_counts(self):
        """5 channels: refused naming the channels, whatever the output's format (a TIFF output named
        the TIFF writer's limits instead), the other layers still warped."""
        self.make_pair()
        write_npy(self.p("five.npy"), (H, W, 5), "|u1", [7] * (H * W * 5))
        t = self.translation_file(1.0, 1.0)
        for out in ("o5.tif", "o5.npy"):
            r = run("warp", "--transform", t, self.p("five.npy"), self.p(out), self.p("moving_u8.npy"), self.p("ok.npy"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("has 5 channels", r.stderr)
            self.assertEqual(keys(r.stdout)["written"], "1")
            self.assertFalse(os.path.exists(self.p(out)))
        # float32 into PGM: refused before the warp, as PNM holds 8- and 16-bit pixels only
        r = run("warp", "--transform", t, self.p("moving.npy"), self.p("f.pgm"), self.p("moving_u8.npy"),
                self.p("u8.pgm"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("not floating-point pixels", r.stderr)
        self.assertEqual(keys(r.stdout)["written"], "1")
        self.assertFalse(os.path.exists(self.p("f.pgm")))

    def test_outputs_over_the_pixel_limit(self):
        """A transform over a 100000 x 100000 image: the field (80 GB) is refused at once, as the warped
        image is, not written until the disk is full; so is a --region whose pixel count wraps 2^64."""
        self.make_pair()
        t = self.translation_file(1.0, 1.0, (100000, 100000))
        for args in (("--out-field", self.p("D.npy")), (self.p("moving.npy"), self.p("o.npy")),
                     ("--region", "0,0,16777216,1099511627776", "--out-field", self.p("D.npy"))):
            r = run("warp", "--transform", t, *args)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn("ACCEL_ERR_LIMIT", r.stderr)
            self.assertIn(" pixels, over the context's max_pixels", r.stderr)
            self.assertFalse([n for n in os.listdir(self.tmp) if "D.npy" in n or "o.npy" in n])
        # --max-pixels sets the limit: the 128 x 128 pair is over 1000
        small = self.translation_file(1.0, 1.0)
        for args in (("warp", "--transform", small, self.p("moving.npy"), self.p("o.npy")),
                     ("register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"))):
            r = run("--max-pixels", "1000", *args)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn("ACCEL_ERR_LIMIT", r.stderr)
            self.assertFalse([n for n in os.listdir(self.tmp) if "D.npy" in n or "o.npy" in n])
        r = run("--max-pixels", "16384", "warp", "--transform", small, self.p("moving.npy"), self.p("o.npy"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # a displacement beyond float32 (a translation of 1e300) is an error, not a field of inf
        r = run("warp", "--transform", self.translation_file(1e300, 0.0), "--out-field", self.p("D.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("beyond float32's range", r.stderr)
        self.assertFalse([n for n in os.listdir(self.tmp) if "D.npy" in n])

    def test_warp_with_an_elastix_translation(self):
        """T(x, y) = (x + 2, y - 3): OUT[r][c] = IN[r - 3][c + 2], the fill outside."""
        self.make_pair()
        t = self.translation_file(2.0, -3.0)
        for interp in ("linear", "cubic"):
            r = run("warp", "--transform", t, "--interp", interp, "--fill", "7", self.p("moving_u8.npy"),
                    self.p("o_%s.npy" % interp), self.p("moving_rgb.npy"), self.p("rgb_%s.npy" % interp))
            self.assertEqual(r.returncode, 0, r.stderr)
            _, _, src = npy_bytes(self.p("moving_u8.npy"))
            shape, descr, out = npy_bytes(self.p("o_%s.npy" % interp))
            self.assertEqual((shape, descr), ((H, W), "|u1"))
            for y in range(H):
                for x in range(W):
                    inside = 0 <= y - 3 and x + 2 < W
                    self.assertEqual(out[y * W + x], src[(y - 3) * W + x + 2] if inside else 7, (interp, x, y))
            shape, _, rgb = npy_bytes(self.p("rgb_%s.npy" % interp))
            self.assertEqual(shape, (H, W, 3))
            self.assertEqual(rgb[0::3], out)

    def test_unreadable_inputs_exit_one(self):
        self.make_pair()
        # hostile files (tests/data/bad) are refused quickly, as inputs of either command
        for name in ("bomb_30000.tif", "bomb_tiled_30000.tif", "tile_bomb.tif", "trunc_strip.tif", "huge.npy",
                     "ovf_zero.npy", "wide_max_rgba16.png", "base_65000.jpg", "empty_idat.png"):
            bad = os.path.join(SRC, "tests", "data", "bad", name)
            for args in (("register", "--fixed", bad, "--moving", self.p("moving.npy")),
                         ("register", "--fixed", self.p("fixed.tif"), "--moving", bad),
                         ("register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"), "--mask", bad),
                         ("warp", "--transform", self.translation_file(1, 1), bad, self.p("o.npy"))):
                r = run(*args)
                self.assertEqual(r.returncode, 1, (args, r.stderr))
                self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))
        r = run("register", "--fixed", self.p("missing.tif"), "--moving", self.p("moving.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        # a mask of another size is named by its file (it was the library's "fixed_mask is ...")
        write_npy(self.p("mask_small.npy"), (H - 1, W), "|u1", [1] * ((H - 1) * W))
        r = run("register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"), "--mask",
                self.p("mask_small.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--mask %s is %d x %d pixels" % (self.p("mask_small.npy"), H - 1, W), r.stderr)
        r = run("warp", "--transform", self.p("missing.txt"), self.p("moving.npy"), self.p("o.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        # a --warp layer that cannot be read is reported before the registration, which writes nothing
        r = run("register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"), "--out-transform",
                self.p("T.txt"), "--warp", self.p("moving_u8.npy"), self.p("w1.npy"), "--warp",
                self.p("missing.npy"), self.p("w2.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("missing.npy: cannot read", r.stderr)
        self.assertNotIn("level", r.stdout)
        self.assertFalse(os.path.exists(self.p("T.txt")) or os.path.exists(self.p("w1.npy")))
        with open(self.p("bad.txt"), "w") as f:
            f.write("(Transform \"SplineKernelTransform\")\n")
        r = run("warp", "--transform", self.p("bad.txt"), self.p("moving.npy"), self.p("o.npy"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(self.p("o.npy")))

    def register(self, *extra):
        r = run("register", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"), "--grid", "32",
                "--levels", "3", "--iterations", "100", "--samples", "4000", "--seed", "5", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return keys(r.stdout)

    def check_field(self, path):
        """The field's axes and signs: D[0] = u_x, D[1] = u_y with T(p) = p + u(p)."""
        shape, d = floats(path)
        self.assertEqual(shape, (2, H, W))
        b, err, mean, want = 16, 0.0, [0.0, 0.0], [0.0, 0.0]
        n = (H - 2 * b) * (W - 2 * b)
        for y in range(b, H - b):
            for x in range(b, W - b):
                ux, uy = d[y * W + x], d[H * W + y * W + x]
                tx, ty = truth(x, y)
                err += math.hypot(ux - tx, uy - ty) / n
                mean[0] += ux / n
                mean[1] += uy / n
                want[0] += tx / n
                want[1] += ty / n
        self.assertAlmostEqual(want[0], 2.0, delta=0.01)  # x: +2 px, y: about -1.74 px over the interior
        self.assertAlmostEqual(want[1], -1.74, delta=0.01)
        self.assertAlmostEqual(mean[0], want[0], delta=0.1)
        self.assertAlmostEqual(mean[1], want[1], delta=0.1)
        self.assertLess(err, 0.2)
        return d

    def test_register_then_warp(self):
        self.make_pair()
        out = self.register("--out-transform", self.p("T.txt"), "--out-field", self.p("D.npy"), "--out-warped",
                            self.p("W.npy"), "--warp", self.p("moving_rgb.npy"), self.p("rgb_w.npy"), "--warp",
                            self.p("moving_u8.npy"), self.p("u8_w.npy"), "--warp", self.p("moving.npy"),
                            self.p("W.tif"), "--warp", self.p("moving.png"), self.p("png_w.pgm"))
        self.assertEqual(out["fixed_shape"], "%d,%d" % (H, W))
        self.assertEqual(out["moving_shape"], "%d,%d" % (H, W))
        self.assertEqual(out["grid_spacing"], "32")
        self.assertEqual(out["written"], "7")
        for lv in range(3):
            self.assertIn(out["level%d.stop" % lv], ("iterations", "converged", "stalled"))
            self.assertTrue(1 <= int(out["level%d.iterations" % lv]) <= 100)
        first, last = (float(v) for v in out["level0.metric"].split(","))
        self.assertLess(float(out["metric"]), first)
        d = self.check_field(self.p("D.npy"))
        # the warped moving image matches the fixed one inside
        _, w = floats(self.p("W.npy"))
        fixed = [scene(*(a + b for a, b in zip((x, y), truth(x, y)))) for y in range(H) for x in range(W)]
        inner = [y * W + x for y in range(16, H - 16) for x in range(16, W - 16)]
        self.assertLess(sum(abs(w[i] - fixed[i]) for i in inner) / len(inner), 1.0)
        # the TIFF output holds the same pixels, uncompressed
        with open(self.p("W.tif"), "rb") as f:
            self.assertIn(npy_bytes(self.p("W.npy"))[2], f.read())
        # layers keep their dtype and channels; channels are warped alike
        shape, descr, rgb = npy_bytes(self.p("rgb_w.npy"))
        self.assertEqual((shape, descr), ((H, W, 3), "|u1"))
        _, _, u8 = npy_bytes(self.p("u8_w.npy"))
        self.assertEqual(rgb[0::3], u8)
        with open(self.p("png_w.pgm"), "rb") as f:  # a gray PNG is read as gray
            self.assertEqual(f.read()[-H * W:], u8)
        # accel warp with the saved transform reproduces register's outputs
        r = run("warp", "--transform", self.p("T.txt"), "--out-field", self.p("D2.npy"), self.p("moving.npy"),
                self.p("W2.npy"), self.p("moving_rgb.npy"), self.p("rgb_w2.npy"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(keys(r.stdout), {"shape": "%d,%d" % (H, W), "written": "3"})
        # (the file's numbers read back as the same doubles: the same transform, bit for bit)
        _, w2 = floats(self.p("W2.npy"))
        self.assertEqual(w2, w)
        _, d2 = floats(self.p("D2.npy"))
        self.assertEqual(d2, d)
        self.assertEqual(npy_bytes(self.p("rgb_w2.npy"))[2], rgb)
        # deflate TIFF outputs hold the same pixels (read back through a zero translation, linear)
        r = run("warp", "--transform", self.p("T.txt"), "--tiff-compression", "deflate", self.p("moving_rgb.npy"),
                self.p("rgb_z.tif"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(os.path.getsize(self.p("rgb_z.tif")), 3 * H * W)
        r = run("warp", "--transform", self.translation_file(0, 0), "--interp", "linear", self.p("rgb_z.tif"),
                self.p("rgb_z.npy"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(npy_bytes(self.p("rgb_z.npy")), npy_bytes(self.p("rgb_w2.npy")))
        # a region of the fixed grid
        r = run("warp", "--transform", self.p("T.txt"), "--region", "10,20,30,40", self.p("moving.npy"),
                self.p("R.npy"), "--out-field", self.p("DR.npy"))
        self.assertEqual(r.returncode, 0, r.stderr)
        shape, part = floats(self.p("R.npy"))
        self.assertEqual(shape, (40, 30))
        self.assertEqual([part[r * 30 + c] for r in range(40) for c in range(30)],
                         [w2[(20 + r) * W + 10 + c] for r in range(40) for c in range(30)])
        shape, dr = floats(self.p("DR.npy"))
        self.assertEqual(shape, (2, 40, 30))
        self.assertEqual(dr[0], d2[20 * W + 10])
        self.assertEqual(dr[40 * 30], d2[H * W + 20 * W + 10])
        self.transformix_agrees(self.p("T.txt"), d2)

    def transformix_agrees(self, transform, d):
        """transformix's own field of T.txt (-def all) is the --out-field's."""
        exe = shutil.which("transformix")
        if not exe:
            return
        with open(transform) as f:
            text = f.read()
        tp = self.p("T_mhd.txt")
        with open(tp, "w") as f:
            f.write(text.replace('(ResultImageFormat "tif")', '(ResultImageFormat "mhd")'))
        out = self.p("transformix")
        os.makedirs(out)
        subprocess.run([exe, "-tp", tp, "-def", "all", "-out", out], capture_output=True, timeout=60, check=True)
        with open(os.path.join(out, "deformationField.mhd")) as f:
            meta = dict(l.strip().split(" = ", 1) for l in f if " = " in l)
        self.assertEqual(meta["DimSize"], "%d %d" % (W, H))
        v = array.array("f")
        with open(os.path.join(out, meta["ElementDataFile"]), "rb") as f:
            v.frombytes(f.read())
        n = H * W
        self.assertLess(max(max(abs(v[2 * i] - d[i]), abs(v[2 * i + 1] - d[n + i])) for i in range(n)), 1e-3)

    def test_presets_and_options_over_them(self):
        self.make_pair()
        out = self.register("--preset", "elastix", "--iterations", "30", "--pyramid", "downsample")
        self.assertEqual([out["level%d.iterations" % lv] for lv in range(3)], ["30"] * 3)  # no early stop
        # order-independent: the preset first, then the options
        r = run("register", "--iterations", "30", "--fixed", self.p("fixed.tif"), "--moving", self.p("moving.npy"),
                "--grid", "32", "--levels", "3", "--samples", "4000", "--seed", "5", "--pyramid", "downsample",
                "--preset", "elastix")
        self.assertEqual(r.returncode, 0, r.stderr)
        again = keys(r.stdout)
        self.assertEqual({k: v for k, v in again.items() if "seconds" not in k},
                         {k: v for k, v in out.items() if "seconds" not in k})

    def test_same_seed_same_result(self):
        self.make_pair()
        self.register("--out-field", self.p("a.npy"), "--metric", "ncc", "--mask", self.p("moving_u8.npy"))
        self.register("--out-field", self.p("b.npy"), "--metric", "ncc", "--mask", self.p("moving_u8.npy"),
                      "--threads", "1")
        self.assertEqual(npy_bytes(self.p("a.npy")), npy_bytes(self.p("b.npy")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
