"""accel gray against Pillow's own output, and inputs failing among others."""
import os
import re
import unittest

from common import SAMPLE, SRC, CliTest, run

DATA = os.path.join(SRC, "tests", "data", "gray")


def read_pgm(path):
    data = open(path, "rb").read()
    m = re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    w, h = int(m.group(1)), int(m.group(2))
    return w, h, data[m.end():m.end() + w * h]


class CliGray(CliTest):
    def test_gray_matches_pillow(self):
        r = run("gray", "--out", self.tmp, SAMPLE, os.path.join(DATA, "chelsea_37x23.ppm"))
        self.assertEqual(r.returncode, 0, r.stderr)
        outs = r.stdout.split()
        self.assertEqual(outs, [os.path.join(self.tmp, "astronaut.gray.pgm"),
                                os.path.join(self.tmp, "chelsea_37x23.gray.pgm")])
        self.assertEqual(read_pgm(outs[0]), read_pgm(os.path.join(DATA, "astronaut.L.pgm")))
        self.assertEqual(read_pgm(outs[1]), read_pgm(os.path.join(DATA, "chelsea_37x23.L.pgm")))
        one = os.path.join(self.tmp, "one.pgm")
        r = run("--threads", "1", "gray", "-o", one, os.path.join(DATA, "chelsea_37x23.ppm"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_pgm(one), read_pgm(os.path.join(DATA, "chelsea_37x23.L.pgm")))
        npy = os.path.join(self.tmp, "rgba.npy")
        r = run("gray", "--format", "npy", "-o", npy, os.path.join(DATA, "coffee_rgba_29x17.npy"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # numpy wrote the reference: the whole file, header included, is identical
        self.assertEqual(open(npy, "rb").read(), open(os.path.join(DATA, "coffee_rgba_29x17.L.npy"), "rb").read())

    def test_some_inputs_failing_exits_one(self):
        broken = os.path.join(self.tmp, "broken.ppm")
        with open(broken, "wb") as f:
            f.write(b"P6\n10 10\n255\n" + b"\x00" * 17)
        r = run("gray", "--out", self.tmp, broken, SAMPLE, os.path.join(self.tmp, "missing.pgm"))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout.split(), [os.path.join(self.tmp, "astronaut.gray.pgm")])
        self.assertIn("broken.ppm: ACCEL_ERR_FORMAT", r.stderr)
        self.assertIn("missing.pgm: ACCEL_ERR_IO", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "broken.gray.pgm")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
