"""What the tool reads and how it reports: path lists (-, --files-from, -0),
TSV escaping, --format json on every command, CT volumes from TIFF stacks,
directories of slices, .npz members and Fortran-order NPY (against the
scikit-image reference labels), GeoTIFF pixel sizes and compressed GeoTIFF
outputs with a no-data value."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import unittest

from common import CLI, SRC, CliTest, env, parse_tsv, reference_rows, run

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support import HASHDATA  # noqa: E402

try:
    import numpy as np
except ImportError:  # the tests that need numpy say so
    np = None
try:
    import tifffile
except ImportError:
    tifffile = None

CT = os.path.join(SRC, "tests", "data", "ct", "food_aniso_64x96x80_s1")
SVF = os.path.join(SRC, "tests", "data", "svf", "city_96x128_2m")


def run_input(args, data):
    """The tool with `data` (bytes) on its standard input."""
    return subprocess.run([CLI, *args], input=data, capture_output=True, env=env(), timeout=60)


def tsv_unescape(field):
    """The escaping docs/cli.md describes, undone: \\\\ \\t \\n \\r."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 1 < len(field):
            out.append({"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[field[i + 1]])
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def load_gz(path):
    with gzip.open(path) as f:
        return np.load(f)


class PathLists(CliTest):
    prefix = "accel-inputs-"

    def setUp(self):
        super().setUp()
        self.ref = {f: r for f, r in reference_rows().items() if r["ahash8"] != "error"}
        self.names = sorted(self.ref)[:4]

    def test_stdin_and_files_from_with_nul(self):
        paths = [os.path.join(HASHDATA, n) for n in self.names]
        r = run_input(["hash", "--kinds", "ahash", "-"], "\n".join(paths).encode() + b"\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        _, rows = parse_tsv(r.stdout.decode())
        self.assertEqual([x["path"] for x in rows], paths)
        for x in rows:
            self.assertEqual(x["ahash"], self.ref[os.path.basename(x["path"])]["ahash8"])
        lst = os.path.join(self.tmp, "list0")
        with open(lst, "wb") as f:
            f.write(b"\0".join(p.encode() for p in paths[1:]) + b"\0")
        r = run("hash", "--kinds", "ahash", "--files-from", lst, "-0", paths[0])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([x["path"] for x in parse_tsv(r.stdout)[1]], paths)
        # dupes and index take the same lists
        r = run_input(["dupes", "--files-from", "-", "-0", "--format", "json"], b"\0".join(p.encode() for p in paths))
        self.assertEqual(r.returncode, 0, r.stderr)
        json.loads(r.stdout)
        ix = os.path.join(self.tmp, "x.idx")
        r = run_input(["index", "build", ix, "-"], "\n".join(paths).encode())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("entries\t%d" % len(paths), run("index", "info", ix).stdout)
        r = run_input(["index", "query", ix, "--k", "1", "-"], paths[0].encode())
        self.assertEqual(parse_tsv(r.stdout.decode())[1][0]["path"], paths[0])
        # a list that cannot be read is a usage error; stdin is read once
        r = run("hash", "--files-from", os.path.join(self.tmp, "missing"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing", r.stderr)
        r = run_input(["hash", "--files-from", "-", "-"], b"")
        self.assertEqual(r.returncode, 2)

    def test_any_file_name_survives_tsv(self):
        src = os.path.join(HASHDATA, self.names[0])
        ext = os.path.splitext(src)[1]
        weird = ["tab\there" + ext, "new\nline" + ext, "back\\slash" + ext, "cr\rx" + ext]
        for w in weird:
            shutil.copy(src, os.path.join(self.tmp, w))
        r = run("dupes", "--threshold", "0", self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.rstrip("\n").split("\n")
        self.assertEqual(lines[0], "group\tpath")
        got = sorted(tsv_unescape(l.split("\t")[1]) for l in lines[1:])
        self.assertEqual(got, sorted(os.path.join(self.tmp, w) for w in weird))
        self.assertTrue(all(l.count("\t") == 1 for l in lines[1:]))
        r = run("hash", "--kinds", "ahash", self.tmp)
        rows = r.stdout.rstrip("\n").split("\n")[1:]
        self.assertEqual(len(rows), len(weird))
        for row in rows:
            path, value = row.split("\t")
            self.assertIn(os.path.basename(tsv_unescape(path)), weird)
            self.assertEqual(value, self.ref[self.names[0]]["ahash8"])


class JsonEverywhere(CliTest):
    prefix = "accel-json-"

    def check(self, args, rc=0):
        r = run(*args, "--format", "json")
        self.assertEqual(r.returncode, rc, (args, r.stderr))
        return json.loads(r.stdout)

    def test_every_command(self):
        doc = self.check(["info"])
        self.assertEqual((doc["exit_status"], doc["errors"], doc["context.backend"]), (0, [], "cpu"))
        photo = os.path.join(HASHDATA, sorted(os.listdir(HASHDATA))[0])
        ix = os.path.join(self.tmp, "x.idx")
        self.assertEqual(self.check(["index", "build", ix, os.path.join(SRC, "samples", "photos")])["failed"], 0)
        info = self.check(["index", "info", ix])
        self.assertEqual((info["kinds"], info["bits"]), ("dhash,ahash", 64))
        gray = self.check(["gray", "--out", self.tmp, os.path.join(SRC, "samples", "astronaut.ppm")])
        self.assertEqual(gray["outputs"], [os.path.join(self.tmp, "astronaut.gray.pgm")])
        self.assertIsInstance(self.check(["dupes", os.path.join(SRC, "samples", "photos")]), list)
        self.assertIsInstance(self.check(["index", "query", ix, photo], rc=1 if photo.endswith("broken.png") else 0),
                              list)
        warp = self.check(["warp", "--transform", os.path.join(self.tmp, "none.txt"), "a.tif", "b.tif"], rc=1)
        self.assertEqual(warp["exit_status"], 1)
        self.assertIn("none.txt", warp["errors"][0])

    def test_errors_carry_their_messages(self):
        # a usage error before anything ran: the messages, the exit status
        for args in (["hash", "--kinds", "nope", "x.png"], ["dupes", "--threshold", "x", "."],
                     ["ct", "segment", "--threshold", "1"], ["svf", "--out", self.tmp],
                     ["index", "query", os.path.join(self.tmp, "missing.idx"), "x.png"], ["register"]):
            r = run(*args, "--format", "json")
            doc = json.loads(r.stdout)
            self.assertEqual(doc["exit_status"], r.returncode, args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertTrue(doc["errors"], args)
            self.assertIn(doc["errors"][0], r.stderr, args)   # the message printed on stderr, verbatim
        # names that are not UTF-8 stay valid JSON: each stray byte is U+FFFD
        bad = os.path.join(self.tmp.encode(), b"caf\xe9\xff.png")
        r = subprocess.run([CLI.encode(), b"hash", b"--format", b"json", bad], capture_output=True, env=env(),
                           timeout=60)
        self.assertEqual(json.loads(r.stdout.decode("utf-8"))[0]["path"], self.tmp + "/caf\ufffd\ufffd.png")
        # per-file errors in the hash report
        r = run("hash", "--format=json", os.path.join(self.tmp, "nope.png"))
        self.assertEqual(r.returncode, 1)
        entry = json.loads(r.stdout)[0]
        self.assertEqual(entry["error"], "ACCEL_ERR_IO")
        self.assertIn("nope.png", entry["message"])


@unittest.skipIf(np is None, "numpy is not installed")
class CtInputs(CliTest):
    prefix = "accel-ctin-"

    def setUp(self):
        super().setUp()
        self.vol = load_gz(os.path.join(CT, "input.npy.gz"))
        self.labels = load_gz(os.path.join(CT, "labels.npy.gz"))

    def segment(self, source, *extra):
        out = os.path.join(self.tmp, "labels.npy")
        r = run("ct", "segment", source, "--threshold", "-300", "--pores", "closed", "--spacing", "2,0.5,0.5",
                "--out-labels", out, *extra)
        self.assertEqual(r.returncode, 0, (source, r.stderr))
        got = np.load(out)
        os.unlink(out)
        return got

    def test_npy_orders_and_npz_members(self):
        t = self.tmp
        np.save(os.path.join(t, "f.npy"), np.asfortranarray(self.vol))
        np.save(os.path.join(t, "be.npy"), self.vol.astype(">i2"))
        np.savez(os.path.join(t, "s.npz"), volume=self.vol, other=self.vol[:1])
        np.savez_compressed(os.path.join(t, "c.npz"), np.asfortranarray(self.vol))
        for source, extra in ((os.path.join(t, "f.npy"), ()), (os.path.join(t, "be.npy"), ()),
                              (os.path.join(t, "s.npz") + ":volume", ()), (os.path.join(t, "s.npz"), ("--member",
                                                                                                      "volume.npy")),
                              (os.path.join(t, "c.npz"), ())):
            np.testing.assert_array_equal(self.segment(source, *extra), self.labels, err_msg=source)
        r = run("ct", "segment", os.path.join(t, "s.npz"), "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("volume.npy", r.stderr)   # several members: they are listed
        r = run("ct", "segment", os.path.join(t, "s.npz:nope"), "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        with open(os.path.join(t, "bad.npz"), "wb") as f:
            f.write(b"PK\3\4 not a zip")
        r = run("ct", "segment", os.path.join(t, "bad.npz"), "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a readable .npz", r.stderr)

    @unittest.skipIf(tifffile is None, "tifffile is not installed")
    def test_tiff_stack_and_slices(self):
        stack = os.path.join(self.tmp, "stack.tif")
        tifffile.imwrite(stack, self.vol, compression="zlib")
        np.testing.assert_array_equal(self.segment(stack), self.labels)
        d = os.path.join(self.tmp, "slices")
        os.mkdir(d)
        for z in range(self.vol.shape[0]):
            tifffile.imwrite(os.path.join(d, "z%04d.tif" % z), self.vol[z])
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("ignored")
        np.testing.assert_array_equal(self.segment(d), self.labels)
        tifffile.imwrite(os.path.join(d, "z9999.tif"), self.vol[0, :5])   # a slice of another size
        r = run("ct", "segment", d, "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("z9999.tif", r.stderr)


@unittest.skipIf(np is None or tifffile is None, "numpy and tifffile are needed")
class GeoTiff(CliTest):
    prefix = "accel-geo-"

    def write(self, name, data, scale=(2.0, 2.0), nodata=None):
        tags = [(33550, 12, 3, (scale[0], scale[1], 0.0), False)]
        if nodata is not None:
            tags.append((42113, 2, 0, nodata, False))
        path = os.path.join(self.tmp, name)
        tifffile.imwrite(path, data.astype(np.float32), extratags=tags)
        return path

    def test_pixel_size_nodata_and_compression(self):
        dsm = load_gz(os.path.join(SVF, "dsm.npy.gz")) if os.path.exists(os.path.join(SVF, "dsm.npy.gz")) else \
            np.load(os.path.join(SVF, "dsm.npy"))
        dsm = dsm.astype(np.float32)
        npy = os.path.join(self.tmp, "dsm.npy")
        np.save(npy, dsm)
        holed = dsm.copy()
        holed[:2, :3] = -9999
        tif = self.write("dsm.tif", holed, nodata="-9999")
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        sun = ("--azimuth", "135", "--altitude", "40")
        r = run("shadow", "--dsm", tif, *sun, "--out", a, "--nodata", "-1")   # the pixel size from the file
        self.assertEqual(r.returncode, 0, r.stderr)
        holed_npy = os.path.join(self.tmp, "holed.npy")
        np.save(holed_npy, np.where(holed == -9999, 0, holed).astype(np.float32))   # no-data counts as 0
        r = run("shadow", "--dsm", holed_npy, "--pixel-size", "2", *sun, "--out", b)
        self.assertEqual(r.returncode, 0, r.stderr)
        with tifffile.TiffFile(os.path.join(a, "shadow_az135_alt40_sh.tif")) as f:
            page = f.pages[0]
            self.assertEqual(page.compression, 8)                      # DEFLATE
            self.assertEqual(page.tags[42113].value, "-1")             # GDAL_NODATA
            self.assertEqual(tuple(page.tags[33550].value), (2.0, 2.0, 0.0))
            got = page.asarray()
        want = np.load(os.path.join(b, "shadow_az135_alt40_sh.npy"))
        want[:2, :3] = -1
        np.testing.assert_array_equal(got, want)
        # missing, non-square and disagreeing pixel sizes are refused
        for dsm_path, cdsm in ((self.write("none.tif", dsm, scale=(0, 0)), None),
                               (self.write("ns.tif", dsm, scale=(2.0, 1.0)), None),
                               (tif, self.write("cdsm.tif", np.zeros_like(dsm), scale=(1.0, 1.0)))):
            args = ["svf", "--dsm", dsm_path, "--out", a] + (["--cdsm", cdsm] if cdsm else [])
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: svf: "), r.stderr)
        r = run("svf", "--dsm", npy, "--out", a)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pixel-size is required", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
