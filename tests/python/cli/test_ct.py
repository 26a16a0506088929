"""accel ct segment against the frozen CT fixtures (tests/data/ct, ../shared/data/ct)."""
import gzip
import json
import os
import unittest

from common import SRC, CliTest, npy_bytes, run

CTDATA = os.path.join(SRC, "tests", "data", "ct")
SHARED_CT = os.path.join(SRC, "..", "shared", "data", "ct")


def fixture_meta(folder):
    meta = {}
    with open(os.path.join(folder, "meta.txt")) as f:
        for line in f:
            key, _, value = line.strip().partition(" ")
            meta[key] = value
    spacing = ",".join(x.strip() for x in meta["sampling"].strip("()").split(","))
    return meta["threshold"], meta["pores"], spacing


class CliCt(CliTest):
    prefix = "accel-ct-"

    def source(self, folder, name):
        for ext in (".npy", ".npy.gz"):
            p = os.path.join(folder, name + ext)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(os.path.join(folder, name))

    def check_folder(self, folder):
        threshold, pores, spacing = fixture_meta(folder)
        src = self.source(folder, "input")
        inp = os.path.join(self.tmp, "input.npy")
        with open(inp, "wb") as f, (gzip.open(src) if src.endswith(".gz") else open(src, "rb")) as g:
            f.write(g.read())
        outs = {k: os.path.join(self.tmp, k + ".npy") for k in ("filled", "pores", "edt", "markers", "labels")}
        args = ["ct", "segment", inp, "--threshold", threshold, "--pores", pores, "--spacing", spacing,
                "--network", os.path.join(self.tmp, "net.json")]
        for k, p in outs.items():
            args += ["--out-" + k, p]
        r = run(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = dict(l.split("\t") for l in r.stdout.strip().split("\n"))
        for k, p in outs.items():
            got, want = npy_bytes(p), npy_bytes(self.source(folder, k))
            self.assertEqual(got[0], want[0], k)
            self.assertEqual(got[2], want[2], "%s: %s differs from the reference" % (folder, k))
        shape, _, labels = npy_bytes(outs["labels"])
        lab = memoryview(labels).cast("i")
        labelled = sum(1 for v in lab if v > 0)
        with open(os.path.join(self.tmp, "net.json")) as f:
            net = json.load(f)
        self.assertAlmostEqual(net["porosity"], labelled / len(lab), places=12)
        self.assertEqual(len(net["regions"]), max(lab))
        self.assertEqual(summary["regions"], str(max(lab)))
        self.assertEqual(summary["markers"], str(max(memoryview(npy_bytes(outs["markers"])[2]).cast("i"))))
        self.assertEqual(sum(r["voxels"] for r in net["regions"]), labelled)
        for t in net["throats"]:
            self.assertLess(t["a"], t["b"])
            self.assertGreater(t["faces"], 0)
        return inp, threshold, pores, spacing

    def test_committed_fixtures(self):
        for name in sorted(os.listdir(CTDATA)):
            if os.path.isdir(os.path.join(CTDATA, name)):
                self.check_folder(os.path.join(CTDATA, name))

    def test_shared_fixtures(self):
        if not os.path.isdir(SHARED_CT):
            self.skipTest("../shared/data/ct is absent")
        for name in ("berea_pore", "food_64x96x80_s1", "food_aniso_64x96x80_s1"):
            self.check_folder(os.path.join(SHARED_CT, name))

    def test_raw_input_given_markers_and_stable_ties(self):
        folder = os.path.join(CTDATA, "food_aniso_64x96x80_s1")
        inp, threshold, pores, spacing = self.check_folder(folder)
        shape, descr, data = npy_bytes(inp)
        self.assertEqual(descr, "<i2")
        raw = os.path.join(self.tmp, "input.raw")
        with open(raw, "wb") as f:
            f.write(b"H" * 16 + data)  # a 16-byte header
        markers = os.path.join(self.tmp, "ref_markers.npy")
        with open(markers, "wb") as f, gzip.open(self.source(folder, "markers")) as g:
            f.write(g.read())
        labels = os.path.join(self.tmp, "l.npy")
        r = run("ct", "segment", raw, "--shape", ",".join(map(str, shape)), "--dtype", "int16", "--offset", "16",
                "--threshold", threshold, "--pores", pores, "--spacing", spacing, "--markers", markers,
                "--out-labels", labels, "--ties", "stable")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(npy_bytes(labels)[2], npy_bytes(self.source(folder, "labels"))[2])
        # the rescale: slope 1, intercept +300 moves the threshold by 300
        r = run("ct", "segment", inp, "--threshold", str(float(threshold) + 300), "--rescale", "1,300", "--pores",
                pores, "--spacing", spacing, "--out-labels", labels)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(npy_bytes(labels)[2], npy_bytes(self.source(folder, "labels"))[2])

    def test_trims_equal_porespy(self):
        folder = os.path.join(CTDATA, "berea_pore")
        inp = os.path.join(self.tmp, "input.npy")
        with open(inp, "wb") as f, gzip.open(self.source(folder, "input")) as g:
            f.write(g.read())
        markers = os.path.join(self.tmp, "m.npy")
        for trim, ref in (("saddles", "trim_saddles"), ("nearby", "trim_nearby"), ("all", "trim_both"),
                          ("nearby,saddles", "trim_both")):
            r = run("ct", "segment", inp, "--threshold", "0", "--pores", "all", "--trim", trim, "--out-markers",
                    markers)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(npy_bytes(markers)[2], npy_bytes(self.source(folder, ref))[2], trim)
            want = max(memoryview(npy_bytes(self.source(folder, ref))[2]).cast("i"))
            self.assertIn("markers\t%d\n" % want, r.stdout)

    def test_errors(self):
        inp = os.path.join(self.tmp, "x.npy")
        with open(inp, "wb") as f, gzip.open(self.source(os.path.join(CTDATA, "berea_pore"), "input")) as g:
            f.write(g.read())
        for args in (["ct"], ["ct", "bogus"], ["ct", "segment"], ["ct", "segment", inp],
                     ["ct", "segment", inp, "--threshold", "x"],
                     ["ct", "segment", inp, "--threshold", "0", "--pores", "some"],
                     ["ct", "segment", inp, "--threshold", "0", "--spacing", "1,1"],
                     ["ct", "segment", inp, "--threshold", "0", "--shape", "1,2,3"],
                     ["ct", "segment", "vol.raw", "--threshold", "0"],
                     ["ct", "segment", inp, inp, "--threshold", "0"],
                     ["ct", "segment", inp, "--threshold", "0", "--spacing", "1,0,1"],
                     ["ct", "segment", inp, "--threshold", "0", "--trim", "peaks"],
                     ["ct", "segment", inp, "--threshold", "0", "--trim", "saddles,"],
                     ["ct", "segment", inp, "--threshold", "0", "--saddle-iterations", "0"],
                     ["ct", "segment", inp, "--threshold", "0", "--nearby-factor", "-1"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))
        r = run("ct", "segment", os.path.join(self.tmp, "missing.npy"), "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        raw = os.path.join(self.tmp, "short.raw")
        with open(raw, "wb") as f:
            f.write(b"\0" * 10)
        r = run("ct", "segment", raw, "--shape", "2,2,2", "--dtype", "int16", "--threshold", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("10 bytes", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
