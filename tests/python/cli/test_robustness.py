"""Hostile inputs and careless command lines, every command: the exit status rule,
outputs that would destroy inputs, lost standard output, numbers, directory walks."""
import json
import os
import shutil
import subprocess
import unittest

from common import CLI, HASHDATA, SAMPLE, SRC, CliTest, env, npy_bytes, parse_tsv, run

BAD = os.path.join(SRC, "tests", "data", "bad")
PHOTOS = os.path.join(SRC, "samples", "photos")


def write_npy(path, descr, shape, data):
    """A version 1.0 .npy file, written here (C order)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1") + data)


def has_tiff():
    return "tiff=yes" in run("info").stdout


class CliRobustness(CliTest):
    """Hostile inputs and careless command lines: the exit status rule, outputs that
    would destroy inputs, lost standard output, integer options, directory walks."""

    prefix = "accel-robust-"

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def volume(self, name="vol.npy", descr="<i2", shape=(4, 5, 6)):
        n = shape[0] * shape[1] * shape[2]
        size = int(descr[-1])
        vals = [(-1000 if i % 7 == 0 else 500) for i in range(n)]
        if descr == "<i2":
            data = b"".join(v.to_bytes(2, "little", signed=True) for v in vals)
        elif descr == "<f8":
            import struct
            data = b"".join(struct.pack("<d", v) for v in vals)
        else:
            data = b"\x01" * (n * size)
        p = self.path(name)
        write_npy(p, descr, shape, data)
        return p

    def grid(self, name, rows, cols, value=10.0, special=None):
        import struct
        vals = [value] * (rows * cols)
        if special is not None and vals:
            vals[len(vals) // 2] = special
        p = self.path(name)
        write_npy(p, "<f4", (rows, cols), b"".join(struct.pack("<f", v) for v in vals))
        return p

    def test_exit_status_rule(self):
        """2: the command line or the set-up is wrong; 1: an input could not be read or its
        content was refused. Every subcommand is held to it."""
        vol = self.volume()
        f64 = self.volume("f64.npy", "<f8")
        i16markers = self.volume("m16.npy", "<i2")
        dsm = self.grid("dsm.npy", 8, 9)
        inf_dsm = self.grid("inf.npy", 8, 9, special=float("inf"))
        empty = self.grid("empty.npy", 0, 9)
        cdsm_small = self.grid("cdsm.npy", 7, 9, value=0.0)
        out = self.path("out")
        broken = os.path.join(BAD, "empty_idat.png")
        gray16 = self.path("g16.pgm")
        with open(gray16, "wb") as f:
            f.write(b"P5 2 2 65535\n" + b"\x00\x01" * 4)
        usage = [["info", "extra"], ["hash", "--size", "x", PHOTOS], ["hash", "--jobs", "5000", PHOTOS],
                 ["dupes", "--threshold", "x", PHOTOS], ["index", "bogus"], ["gray", "--format", "png", vol],
                 ["ct", "segment", vol, "--threshold", "x"],
                 ["ct", "segment", vol, "--threshold", "0", "--offset", "1"],
                 ["shadow", "--dsm", dsm, "--pixel-size", "1", "--azimuth", "400", "--altitude", "10", "--out", out],
                 ["svf", "--dsm", dsm, "--pixel-size", "1", "--out", out, "--patches", "150"],
                 ["svf", "--dsm", dsm, "--pixel-size", "1", "--out", out, "--trunk-ratio", "-1"]]
        inputs = [["hash", broken], ["hash", self.path("missing.jpg")], ["dupes", self.path("missing.png")],
                  ["index", "info", self.path("missing.idx")],
                  ["index", "query", os.path.join(BAD, "meta_mismatch.idx"), PHOTOS],
                  ["gray", "--out", out, self.path("missing.pgm")], ["gray", "--out", out, gray16],
                  ["ct", "segment", f64, "--threshold", "0"],
                  ["ct", "segment", vol, "--threshold", "0", "--markers", i16markers,
                   "--out-labels", self.path("l.npy")],
                  ["ct", "segment", self.path("missing.npy"), "--threshold", "0"],
                  ["shadow", "--dsm", inf_dsm, "--pixel-size", "1", "--azimuth", "90", "--altitude", "30",
                   "--out", out],
                  ["svf", "--dsm", inf_dsm, "--pixel-size", "1", "--out", out],
                  ["svf", "--dsm", empty, "--pixel-size", "1", "--out", out],
                  ["svf", "--dsm", dsm, "--cdsm", cdsm_small, "--pixel-size", "1", "--out", out],
                  ["shadow", "--dsm", dsm, "--cdsm", cdsm_small, "--pixel-size", "1", "--azimuth", "90",
                   "--altitude", "30", "--out", out]]
        for args, want in [(a, 2) for a in usage] + [(a, 1) for a in inputs]:
            r = run(*args)
            self.assertEqual(r.returncode, want, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))
            self.assertNotIn("Sanitizer", r.stderr, args)

    def test_hostile_inputs_are_errors_not_crashes(self):
        r = run("hash", *(os.path.join(BAD, f) for f in ("empty_idat.png", "wide_rgba16.png", "wide_max_rgba16.png",
                                                          "base_65000.jpg")))
        self.assertEqual(r.returncode, 1, r.stderr)
        header, rows = parse_tsv(r.stdout)
        self.assertEqual([x["ahash"] for x in rows], ["error:ACCEL_ERR_DECODE", "error:ACCEL_ERR_LIMIT",
                                                       "error:ACCEL_ERR_LIMIT", "error:ACCEL_ERR_LIMIT"])
        r = run("index", "query", os.path.join(BAD, "meta_mismatch.idx"), PHOTOS)
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not describe its 8 fields of 256 bits", r.stderr)
        for tif in ("bomb_30000.tif", "tile_bomb.tif", "trunc_strip.tif"):
            r = run("svf", "--dsm", os.path.join(BAD, tif), "--pixel-size", "1", "--out", self.path("o"))
            self.assertEqual(r.returncode, 1, (tif, r.stderr))  # refused from the header, or no libtiff
            self.assertIn(tif if has_tiff() else "without libtiff", r.stderr)

    def test_volume_sizes_are_judged_by_memory_not_by_32_bit_labels(self):
        # 2^32 voxels and more are read (the header is believed; the missing data is the error); a size
        # that overflows is a corrupt header
        cases = (((1300, 1300, 2600), "the header announces 4394000000 bytes of data, 0 remain"),
                 ((2**22, 2**22, 2**22), "truncated or its header is corrupt"))
        for shape, message in cases:
            p = self.path("big.npy")
            write_npy(p, "|u1", shape, b"")
            r = run("ct", "segment", p, "--threshold", "0", "--out-labels", self.path("l.npy"))
            self.assertEqual(r.returncode, 1, (shape, r.stderr))
            self.assertIn(message, r.stderr, shape)

    def test_outputs_never_overwrite_inputs(self):
        vol = self.volume()
        original = open(vol, "rb").read()
        for args in (["--out-labels", vol], ["--out-edt", self.path("x.npy"), "--out-labels", self.path("x.npy")],
                     ["--out-labels", self.path("x.tif")], ["--out-labels", self.path("labels")],
                     ["--network", self.path("net.txt")], ["--out-labels", os.path.join(self.tmp, ".", "vol.npy")],
                     ["--markers", vol, "--out-markers", vol]):
            r = run("ct", "segment", vol, "--threshold", "0", *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: ct segment: "), r.stderr)
        os.link(vol, self.path("hard.npy"))
        os.symlink("vol.npy", self.path("soft.npy"))
        for alias in ("hard.npy", "soft.npy"):
            r = run("ct", "segment", vol, "--threshold", "0", "--out-labels", self.path(alias))
            self.assertEqual(r.returncode, 2, (alias, r.stderr))
            self.assertIn("which is the input", r.stderr)
        self.assertEqual(open(vol, "rb").read(), original)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["hard.npy", "soft.npy", "vol.npy"])
        # .raw writes raw values; .npy the same values with a header
        r = run("ct", "segment", vol, "--threshold", "0", "--out-labels", self.path("l.raw"),
                "--out-markers", self.path("m.npy"), "--network", self.path("n.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r2 = run("ct", "segment", vol, "--threshold", "0", "--out-labels", self.path("l.npy"))
        self.assertEqual(open(self.path("l.raw"), "rb").read(), npy_bytes(self.path("l.npy"))[2])
        json.load(open(self.path("n.json")))
        # gray: the input itself, two inputs mapping to one output, a name that is not a format
        os.makedirs(self.path("a"))
        os.makedirs(self.path("b"))
        jpg = self.path("a", "x.jpg")
        shutil.copy(os.path.join(HASHDATA, "hopper.jpg"), jpg)
        shutil.copy(os.path.join(HASHDATA, "hopper.png"), self.path("b", "x.png"))
        before = open(jpg, "rb").read()
        for args in (["-o", jpg, jpg], ["--out", self.path("g"), jpg, self.path("b", "x.png")],
                     ["-o", self.path("g.png"), jpg], ["--format", "npy", "-o", self.path("g.pgm"), jpg]):
            r = run("gray", *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
        self.assertEqual(open(jpg, "rb").read(), before)
        self.assertFalse(os.path.exists(self.path("g")))
        r = run("gray", "-o", self.path("g.tif"), jpg)
        if has_tiff():
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(open(self.path("g.tif"), "rb").read(4), b"II*\x00")
        # svf: an output named like an input
        os.makedirs(self.path("city"))
        dsm = self.grid(os.path.join("city", "svf_svf.npy"), 6, 7)
        r = run("svf", "--dsm", dsm, "--pixel-size", "1", "--out", self.path("city"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("which is the input", r.stderr)

    def test_lost_standard_output_is_an_error(self):
        vol = self.volume()
        dsm = self.grid("dsm.npy", 6, 7)
        idx = self.path("c.idx")
        self.assertEqual(run("index", "build", idx, PHOTOS).returncode, 0)
        for args in (["hash", PHOTOS], ["dupes", PHOTOS], ["index", "info", idx], ["index", "query", idx, PHOTOS],
                     ["info"], ["--version"], ["ct", "segment", vol, "--threshold", "0"],
                     ["svf", "--dsm", dsm, "--pixel-size", "1", "--out", self.path("o")],
                     ["gray", "--out", self.path("g"), SAMPLE]):
            with open("/dev/full", "w") as full:
                p = subprocess.run([CLI, *args], stdout=full, stderr=subprocess.PIPE, text=True, env=env(), timeout=60)
            self.assertEqual(p.returncode, 1, (args, p.stderr))
            self.assertIn("cannot write the standard output: " + os.strerror(28), p.stderr, args)

    def test_numbers_are_parsed_exactly(self):
        raw = self.path("v.raw")
        with open(raw, "wb") as f:
            f.write(b"\x00\x01" * 60)
        base = ["ct", "segment", raw, "--shape", "2,6,5", "--dtype", "int16", "--threshold", "0"]
        self.assertEqual(run(*base).returncode, 0)
        for extra in (["--offset", "18446744073709551616"], ["--offset", "-1"], ["--offset", "1e3"],
                      ["--offset", " 4"], ["--rescale", "nan,0"], ["--rescale", "1,inf"], ["--threshold", "nan"],
                      ["--min-distance", "3.0"], ["--spacing", "1,1,nan"]):
            r = run(*base, *extra)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
        bad_shape = ["ct", "segment", raw, "--shape", "99999999999999999999,1,1", "--dtype", "int16",
                     "--threshold", "0"]
        self.assertEqual(run(*bad_shape).returncode, 2)
        r = run(*base, "--offset", "18446744073709551615")
        self.assertEqual(r.returncode, 2)
        r = run(*base, "--offset", "20")  # a header skip the file is too short for
        self.assertEqual(r.returncode, 1)  # 120 bytes cannot hold 20 + 120
        self.assertIn("bytes", r.stderr)
        for args in (["--threads", "100000", "info"], ["--threads", "-1", "info"],
                     ["--threads", "99999999999999999999", "info"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("0..1024", r.stderr)
        dsm = self.grid("dsm.npy", 6, 7)
        for tile in ("1e3", "33.0", "0x10", "99999999999999999999"):
            r = run("svf", "--dsm", dsm, "--pixel-size", "1", "--out", self.path("o"), "--tile", tile)
            self.assertEqual(r.returncode, 2, (tile, r.stderr))

    @unittest.skipIf(os.environ.get("ACCEL_SANITIZED") == "1", "a thousand threads under the sanitizers")
    def test_absurd_openmp_thread_count_is_capped(self):
        r = run("hash", os.path.join(PHOTOS, sorted(os.listdir(PHOTOS))[0]), OMP_NUM_THREADS="100000")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_walks_count_each_file_once_and_never_loop(self):
        lib = self.path("lib")
        os.makedirs(os.path.join(lib, "sub"))
        shutil.copy(os.path.join(HASHDATA, "hopper.jpg"), os.path.join(lib, "a.jpg"))
        shutil.copy(os.path.join(HASHDATA, "tiny.png"), os.path.join(lib, "sub", "b.png"))
        os.symlink(".", os.path.join(lib, "loop"))
        os.symlink("..", os.path.join(lib, "sub", "up"))
        os.symlink(lib, os.path.join(lib, "sub", "abs"))
        os.symlink("a.jpg", os.path.join(lib, "alias.jpg"))
        os.link(os.path.join(lib, "a.jpg"), os.path.join(lib, "sub", "hard.jpg"))
        for extra in ([], ["--follow-links"]):
            r = run("hash", "--kinds", "ahash", lib, *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            header, rows = parse_tsv(r.stdout)
            self.assertEqual([x["path"] for x in rows], [os.path.join(lib, "a.jpg"), os.path.join(lib, "sub", "b.png")],
                             extra)
            d = run("dupes", lib, *extra)
            self.assertEqual(d.returncode, 0, d.stderr)
            self.assertEqual(d.stdout, "group\tpath\n", extra)  # no file is its own duplicate
        # a linked directory is entered only when asked
        other = self.path("other")
        os.makedirs(other)
        shutil.copy(os.path.join(HASHDATA, "pil123p.png"), os.path.join(other, "c.png"))
        os.symlink(other, os.path.join(lib, "more"))
        plain = parse_tsv(run("hash", "--kinds", "ahash", lib).stdout)[1]
        followed = parse_tsv(run("hash", "--kinds", "ahash", "--follow-links", lib).stdout)[1]
        self.assertEqual(len(plain), 2)
        self.assertEqual([x["path"] for x in followed], [os.path.join(lib, "a.jpg"), os.path.join(lib, "more", "c.png"),
                                                         os.path.join(lib, "sub", "b.png")])
        # the same file named twice on the command line counts once
        r = run("hash", "--kinds", "ahash", os.path.join(lib, "a.jpg"), os.path.join(lib, "alias.jpg"))
        self.assertEqual(len(parse_tsv(r.stdout)[1]), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
