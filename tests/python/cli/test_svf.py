"""accel shadow and accel svf against UMEP's grids (tests/data/svf, ../shared/data/svf)."""
import gzip
import os
import unittest

from common import SRC, CliTest, npy_bytes, run

SVFDATA = os.path.join(SRC, "tests", "data", "svf")
SHARED_SVF = os.path.join(SRC, "..", "shared", "data", "svf")


class CliSvf(CliTest):
    """accel shadow / accel svf against UMEP's grids (tests/data/svf, ../shared/data/svf)."""

    prefix = "accel-svf-"

    def inputs(self, folder):
        """The city's dsm/cdsm/tdsm as plain .npy files in tmp; its pixel size."""
        paths = {}
        for name in ("dsm", "cdsm", "tdsm"):
            src = os.path.join(folder, name + ".npy")
            dst = os.path.join(self.tmp, name + ".npy")
            if not os.path.exists(src):
                src += ".gz"
            with open(dst, "wb") as f, (gzip.open(src) if src.endswith(".gz") else open(src, "rb")) as g:
                f.write(g.read())
            paths[name] = dst
        with open(os.path.join(folder, "meta.txt")) as f:
            pixel = dict(l.strip().partition(" ")[::2] for l in f)["pixel_size_m"]
        return paths, pixel

    @staticmethod
    def ref(folder, name):
        p = os.path.join(folder, name + ".npy")
        return npy_bytes(p if os.path.exists(p) else p + ".gz")

    def check_folder(self, folder, tile=None):
        paths, pixel = self.inputs(folder)
        out = os.path.join(self.tmp, "out")
        for az, alt in (("90", "30"), ("180", "60"), ("247.5", "12")):
            r = run("shadow", "--dsm", paths["dsm"], "--cdsm", paths["cdsm"], "--tdsm", paths["tdsm"],
                    "--pixel-size", pixel, "--azimuth", az, "--altitude", alt, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("written\t3\n", r.stdout)
            for kind in ("sh", "vegsh", "vbshvegsh"):
                name = "shadow_az%s_alt%s_%s" % (az, alt, kind)
                self.assertEqual(npy_bytes(os.path.join(out, name + ".npy"))[2], self.ref(folder, name)[2], name)
        args = ["svf", "--dsm", paths["dsm"], "--cdsm", paths["cdsm"], "--pixel-size", pixel, "--out", out,
                "--shadow-matrices"]
        if tile:
            args += ["--tile", str(tile)]
        r = run(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("patches\t153\n", r.stdout)
        self.assertIn("written\t18\n", r.stdout)
        for g in ("svf", "svfE", "svfS", "svfW", "svfN", "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg",
                  "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg"):
            self.assertEqual(npy_bytes(os.path.join(out, "svf_" + g + ".npy"))[2], self.ref(folder, "svf_" + g)[2], g)
        shape, descr, _ = npy_bytes(os.path.join(out, "shmat.npy"))
        self.assertEqual((shape[2], descr), (20, "|u1"))

    def test_committed_city(self):
        self.check_folder(os.path.join(SVFDATA, "city_96x128_2m"), tile=33)

    def test_shared_cities(self):
        if not os.path.isdir(SHARED_SVF):
            self.skipTest("../shared/data/svf is absent")
        for name in ("city_120x100_1m", "city_96x128_2m"):
            self.check_folder(os.path.join(SHARED_SVF, name))

    @staticmethod
    def write_geotiff(path, shape, data, pixel):
        """A minimal little-endian float32 TIFF, one strip, with a GeoTIFF pixel scale."""
        import struct
        h, w = shape
        scale = struct.pack("<3d", pixel, pixel, 0.0)
        entries = [(256, 4, 1, w), (257, 4, 1, h), (258, 3, 1, 32), (259, 3, 1, 1), (262, 3, 1, 1),
                   (273, 4, 1, None), (277, 3, 1, 1), (278, 4, 1, h), (279, 4, 1, len(data)), (339, 3, 1, 3),
                   (33550, 12, 3, None)]
        ifd_at = 8
        ifd_size = 2 + 12 * len(entries) + 4
        scale_at = ifd_at + ifd_size
        data_at = scale_at + len(scale)
        out = bytearray(b"II*\x00" + struct.pack("<I", ifd_at))
        out += struct.pack("<H", len(entries))
        for tag, typ, count, value in entries:
            if tag == 273:
                value = data_at
            if tag == 33550:
                out += struct.pack("<HHII", tag, typ, count, scale_at)
            elif typ == 3:
                out += struct.pack("<HHIHH", tag, typ, count, value, 0)
            else:
                out += struct.pack("<HHII", tag, typ, count, value)
        out += struct.pack("<I", 0) + scale + data
        with open(path, "wb") as f:
            f.write(out)

    def test_geotiff_in_and_out(self):
        import struct
        folder = os.path.join(SVFDATA, "city_96x128_2m")
        shape, descr, data = self.ref(folder, "dsm")
        self.assertEqual(descr, "<f4")
        dsm = os.path.join(self.tmp, "dsm.tif")
        self.write_geotiff(dsm, shape, data, 2.0)
        out = os.path.join(self.tmp, "g")
        r = run("shadow", "--dsm", dsm, "--pixel-size", "2", "--azimuth", "180", "--altitude", "60", "--out", out,
                "--compression", "none")
        self.assertEqual(r.returncode, 0, r.stderr)
        r2 = run("shadow", "--dsm", dsm, "--pixel-size", "2", "--azimuth", "180", "--altitude", "60", "--out", out,
                 "--format", "npy")
        self.assertEqual(r2.returncode, 0, r2.stderr)
        for kind in ("sh", "vegsh", "vbshvegsh"):
            with open(os.path.join(out, "shadow_az180_alt60_%s.tif" % kind), "rb") as f:
                tif = f.read()
            grid = npy_bytes(os.path.join(out, "shadow_az180_alt60_%s.npy" % kind))[2]
            self.assertIn(grid, tif)                                   # the grid, uncompressed
            self.assertIn(struct.pack("<3d", 2.0, 2.0, 0.0), tif)      # the DSM's pixel scale
        # a pixel size that disagrees with the file's is allowed, with a warning
        r = run("shadow", "--dsm", dsm, "--pixel-size", "1", "--azimuth", "180", "--altitude", "60", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning", r.stderr)

    def test_buildings_only_and_help(self):
        paths, pixel = self.inputs(os.path.join(SVFDATA, "city_96x128_2m"))
        out = os.path.join(self.tmp, "b")
        r = run("svf", "--dsm", paths["dsm"], "--pixel-size", pixel, "--out", out, "--patches", "145")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(out)), sorted("svf_%s.npy" % g for g in ("svf", "svfE", "svfS", "svfW",
                                                                                     "svfN")))
        for cmd in ("shadow", "svf"):
            r = run(cmd, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertIn("--pixel-size", r.stdout)

    def test_errors(self):
        paths, pixel = self.inputs(os.path.join(SVFDATA, "city_96x128_2m"))
        out = os.path.join(self.tmp, "e")
        d = ["--dsm", paths["dsm"]]
        for args in (["svf"], ["svf", "--dsm", paths["dsm"], "--out", out],
                     ["svf", *d, "--pixel-size", "0", "--out", out],
                     ["svf", *d, "--pixel-size", "x", "--out", out],
                     ["svf", *d, "--pixel-size", "1", "--out", out, "--patches", "150"],
                     ["svf", *d, "--pixel-size", "1", "--out", out, "--tile", "0"],
                     ["svf", *d, "--pixel-size", "1", "--out", out, "--tdsm", paths["tdsm"]],
                     ["svf", *d, "--pixel-size", "1", "--out", out, "--format", "png"],
                     ["shadow", *d, "--pixel-size", "1", "--out", out, "--azimuth", "90"],
                     ["shadow", *d, "--pixel-size", "1", "--out", out, "--azimuth", "90", "--altitude", "0"],
                     ["shadow", *d, "--pixel-size", "1", "--out", out, "--azimuth", "400", "--altitude", "10"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))
        r = run("svf", "--dsm", os.path.join(self.tmp, "missing.npy"), "--pixel-size", "1", "--out", out)
        self.assertEqual(r.returncode, 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
