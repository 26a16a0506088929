"""`accel register` and `accel warp` against elastix 5.0.1 on the shared pairs
(../shared/data/reg, made by ../shared/tools/make_reg_data.py):

  * warp: `accel warp --interp cubic` with elastix's own TransformParameters
    file reproduces elastix's result.tif (its final cubic resample) to 1e-3 of
    the intensity range; result.tif is first checked to be what transformix
    makes of that file here (the reference itself); the RGB layer, warped as
    uint8, matches transformix's per-channel resample rounded;
  * interop: the transform `accel register` writes is read by transformix,
    whose dense field (-def all) equals accel's --out-field to 1e-3 px;
  * accuracy: accel's field against the true deformation and its warped
    moving image against the fixed one are no worse, over the interior, than
    elastix's figures recorded in meta.txt.

Reads TIFF files with tifffile (an independent reader) and transformix's
deformation fields (TIFF, MetaImage or NIfTI, whichever it writes) here.
Skips with one line when ../shared/data/reg, elastix's transformix, numpy or
tifffile is missing. A command that answers "not implemented" fails."""
import gzip
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from support import SRC, clean_environment

try:
    import numpy as np
    import tifffile
except ImportError as e:
    print("SKIP: %s (pip install -r python/requirements-test.txt)" % e)
    sys.exit(77)

clean_environment()
CLI = os.environ["ACCEL_CLI"]
SHARED_REG = os.path.join(SRC, "..", "shared", "data", "reg")
CASES = ("tex_512_s1", "tex_1024_s2")
TIMEOUT = 240


def run(cmd, what):
    """Run a command; a failure (or "not implemented") stops the test with its output."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s: no answer after %d s: %s" % (what, TIMEOUT, " ".join(cmd)))
    if r.returncode != 0:
        raise AssertionError("%s failed (exit status %d): %s\n%s%s" % (what, r.returncode, " ".join(cmd),
                                                                         r.stdout[-2000:], r.stderr[-2000:]))
    return r


def meta(folder):
    """elastix's figures from meta.txt: field error mean/p95, interior MSE after, interior bounds."""
    with open(os.path.join(folder, "meta.txt")) as f:
        text = f.read()
    err = re.search(r"elastix field error \|u_elastix - u_truth\| interior: mean ([\d.]+) p95 ([\d.]+)", text)
    mse = re.search(r"interior MSE before ([\d.]+) after ([\d.]+)", text)
    box = re.search(r"interior = \[(\d+), (\d+)\) x \[(\d+), (\d+)\)", text)
    if not (err and mse and box):
        raise AssertionError("%s/meta.txt lacks elastix's field error, MSE or interior line" % folder)
    return {"err_mean": err.group(1), "err_p95": err.group(2), "mse_after": mse.group(2),
            "rows": (int(box.group(1)), int(box.group(2))), "cols": (int(box.group(3)), int(box.group(4)))}


def slack(printed):
    """Half a unit of the last printed digit of a figure ("0.0457" -> 0.00005): its rounding."""
    decimals = len(printed.partition(".")[2])
    return 0.5 * 10.0 ** -decimals


def read_tiff(path):
    """A TIFF as (H, W) or (H, W, C), whether its channels are interleaved or planar."""
    with tifffile.TiffFile(path) as t:
        a = t.asarray()
        page = t.pages[0]
        if page.samplesperpixel > 1 and page.planarconfig == tifffile.PLANARCONFIG.SEPARATE:
            a = np.moveaxis(a, 0, -1)
    return a


def read_mhd(path):
    hdr = {}
    with open(path) as f:
        for line in f:
            k, sep, v = line.partition("=")
            if sep:
                hdr[k.strip()] = v.strip()
    dims = [int(v) for v in hdr["DimSize"].split()]
    channels = int(hdr.get("ElementNumberOfChannels", "1"))
    dtype = {"MET_FLOAT": "<f4", "MET_DOUBLE": "<f8"}[hdr["ElementType"]]
    if hdr.get("BinaryDataByteOrderMSB", "False") == "True":
        dtype = ">" + dtype[1:]
    raw = os.path.join(os.path.dirname(path), hdr["ElementDataFile"])
    return np.fromfile(raw, dtype).reshape(dims[1], dims[0], channels)


def read_nifti(path):
    """A NIfTI-1 vector image (dim = 5, x y 1 1 c): (y, x, c)."""
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    end = "<" if struct.unpack("<i", data[:4])[0] == 348 else ">"
    dim = struct.unpack(end + "8h", data[40:56])
    dtype = {16: "f4", 64: "f8"}[struct.unpack(end + "h", data[70:72])[0]]
    offset = int(struct.unpack(end + "f", data[108:112])[0])
    shape = dim[1:dim[0] + 1]
    a = np.frombuffer(data, end + dtype, int(np.prod(shape)), offset).reshape(shape[::-1])
    return np.moveaxis(a.reshape(shape[-1], shape[1], shape[0]), 0, -1)


def read_deformation_field(folder):
    """transformix -def all's output in `folder` (whatever ResultImageFormat made it): (H, W, 2) float64."""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith("deformationField."):
            if name.endswith((".tif", ".tiff")):
                field = read_tiff(path)
            elif name.endswith(".mhd"):
                field = read_mhd(path)
            elif name.endswith((".nii", ".nii.gz")):
                field = read_nifti(path)
            else:
                continue
            return field.astype(np.float64)
    raise AssertionError("transformix wrote no deformation field that this test reads: %s" % os.listdir(folder))


class RegElastix(unittest.TestCase):
    registered = None  # the one registration (b) and (c) share: (tmp folder, outputs) or the failure

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="accel-reg-elastix-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def need(self, *tools):
        if not os.path.isdir(SHARED_REG):
            self.skipTest("../shared/data/reg is absent")
        for t in tools:
            if shutil.which(t) is None:
                self.skipTest("%s is not installed (Debian package elastix)" % t)

    def folder(self, name):
        return os.path.join(SHARED_REG, name)

    def transformix(self, tp, out, image=None):
        os.makedirs(out, exist_ok=True)
        cmd = ["transformix", "-tp", tp, "-out", out, "-threads", "1"]
        cmd += ["-in", image] if image else ["-def", "all"]
        run(cmd, "transformix")
        return out

    def test_warp_reproduces_elastix_result(self):
        self.need("transformix")
        for case in CASES:
            with self.subTest(case=case):
                d = self.folder(case)
                tp = os.path.join(d, "TransformParameters.0.txt")
                ref = read_tiff(os.path.join(d, "result.tif")).astype(np.float64)
                span = float(ref.max() - ref.min())
                # the reference is what transformix makes of the file here
                out = self.transformix(tp, os.path.join(self.tmp, "tfx-" + case), os.path.join(d, "moving.tif"))
                again = read_tiff(os.path.join(out, "result.tif")).astype(np.float64)
                self.assertLessEqual(np.abs(again - ref).max() / span, 1e-5, "result.tif is not transformix's output")
                warped = os.path.join(self.tmp, "warp-%s.tif" % case)
                run([CLI, "warp", "--transform", tp, "--interp", "cubic", os.path.join(d, "moving.tif"), warped],
                    "accel warp")
                ours = read_tiff(warped)
                self.assertEqual((ours.dtype, ours.shape), (np.dtype(np.float32), ref.shape))
                rel = np.abs(ours.astype(np.float64) - ref).max() / span
                print("%s: accel warp vs elastix result.tif: max |diff| %.3g of the range" % (case, rel))
                self.assertLessEqual(rel, 1e-3)

    def test_warp_rgb_matches_transformix_per_channel(self):
        self.need("transformix")
        d = self.folder(CASES[0])
        tp = os.path.join(d, "TransformParameters.0.txt")
        rgb = read_tiff(os.path.join(d, "moving_rgb.tif"))
        self.assertEqual((rgb.dtype, rgb.ndim, rgb.shape[2]), (np.dtype(np.uint8), 3, 3))
        ref = np.empty(rgb.shape, np.float64)
        for k in range(3):
            channel = os.path.join(self.tmp, "rgb-%d.tif" % k)
            tifffile.imwrite(channel, rgb[..., k].astype(np.float32))
            out = self.transformix(tp, os.path.join(self.tmp, "tfx-rgb-%d" % k), channel)
            ref[..., k] = read_tiff(os.path.join(out, "result.tif"))
        warped = os.path.join(self.tmp, "warp-rgb.tif")
        run([CLI, "warp", "--transform", tp, "--interp", "cubic", os.path.join(d, "moving_rgb.tif"), warped],
            "accel warp")
        ours = read_tiff(warped)
        self.assertEqual((ours.dtype, ours.shape), (np.dtype(np.uint8), rgb.shape))
        diff = np.abs(ours.astype(np.float64) - np.clip(np.rint(ref), 0, 255))
        print("%s RGB: accel warp (uint8) vs transformix per channel, rounded: max |diff| %g, %.4f%% differ" % (
            CASES[0], diff.max(), 100.0 * np.mean(diff > 0)))
        self.assertLessEqual(diff.max(), 1.0)

    def registration(self):
        """accel register on tex_512_s1, run once for the tests that need it: {name: path}."""
        cls = type(self)
        if cls.registered is None:
            d = self.folder(CASES[0])
            out = {"T": os.path.join(self.tmp, "T.txt"), "D": os.path.join(self.tmp, "D.npy"),
                   "W": os.path.join(self.tmp, "W.tif")}
            try:
                run([CLI, "register", "--fixed", os.path.join(d, "fixed.tif"), "--moving", os.path.join(d, "moving.tif"),
                     "--out-transform", out["T"], "--out-field", out["D"], "--out-warped", out["W"]], "accel register")
                cls.registered = out
            except AssertionError as e:
                cls.registered = e
        if isinstance(cls.registered, AssertionError):
            raise cls.registered
        return cls.registered

    def field(self, path, shape):
        u = np.load(path)
        self.assertEqual((u.dtype, u.shape), (np.dtype(np.float32), (2,) + shape), "--out-field's layout")
        return u.astype(np.float64)

    def test_registered_transform_read_by_transformix(self):
        self.need("transformix")
        out = self.registration()
        shape = read_tiff(os.path.join(self.folder(CASES[0]), "fixed.tif")).shape
        ours = self.field(out["D"], shape)
        theirs = read_deformation_field(self.transformix(out["T"], os.path.join(self.tmp, "def")))
        self.assertEqual(theirs.shape, shape + (2,))
        diff = max(np.abs(theirs[..., 0] - ours[0]).max(), np.abs(theirs[..., 1] - ours[1]).max())
        print("%s: transformix -def all of accel's transform vs accel's field: max |diff| %.3g px" % (CASES[0], diff))
        self.assertLessEqual(diff, 1e-3)

    def test_registration_no_worse_than_elastix(self):
        self.need()
        d = self.folder(CASES[0])
        ref = meta(d)
        out = self.registration()
        fixed = read_tiff(os.path.join(d, "fixed.tif")).astype(np.float64)
        u = self.field(out["D"], fixed.shape)
        (r0, r1), (c0, c1) = ref["rows"], ref["cols"]
        inner = (slice(r0, r1), slice(c0, c1))
        truth = [np.load(os.path.join(d, "truth_d%s.npy" % a)).astype(np.float64) for a in "xy"]
        err = np.hypot(u[0] - truth[0], u[1] - truth[1])[inner]
        warped = read_tiff(out["W"]).astype(np.float64)
        self.assertEqual(warped.shape, fixed.shape)
        mse = float(np.mean((warped[inner] - fixed[inner]) ** 2))
        mean, p95 = float(err.mean()), float(np.percentile(err, 95))
        print("%s interior: field error mean %.4f p95 %.4f px (elastix %s %s), MSE after %.3f (elastix %s)" % (
            CASES[0], mean, p95, ref["err_mean"], ref["err_p95"], mse, ref["mse_after"]))
        self.assertLessEqual(mean, float(ref["err_mean"]) + slack(ref["err_mean"]))
        self.assertLessEqual(p95, float(ref["err_p95"]) + slack(ref["err_p95"]))
        self.assertLessEqual(mse, float(ref["mse_after"]) + slack(ref["mse_after"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
