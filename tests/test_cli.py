"""The accel command-line tool: help and exit codes, global options, info, the
CUDA policy on a machine without a GPU, gray conversion against Pillow's own
output, and progress bars only on a terminal. Standard library only."""
import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import unittest

CLI = os.environ["ACCEL_CLI"]
SRC = os.environ["ACCEL_SOURCE_ROOT"]
DATA = os.path.join(SRC, "tests", "data", "gray")
SAMPLE = os.path.join(SRC, "samples", "astronaut.ppm")
FALLBACK_LINE = re.compile(r"^\[GPU\] ctx\.init failed: .+[^.]\. CPU fallback\.$", re.M)


def env(**extra):
    e = {k: v for k, v in os.environ.items() if k not in ("ACCEL_BACKEND", "ACCEL_LOG")}
    e.update(extra)
    return e


def run(*args, **extra):
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env(**extra), timeout=60)


def read_pgm(path):
    data = open(path, "rb").read()
    m = re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    w, h = int(m.group(1)), int(m.group(2))
    return w, h, data[m.end():m.end() + w * h]


def cuda_available():
    out = run("info").stdout
    return re.search(r"^  cuda\s+available", out, re.M) is not None


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_help_everywhere_exits_zero(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("commands:", r.stdout)
        commands = re.findall(r"^  (\w+)\s{2,}", r.stdout.split("commands:")[1].split("global options")[0], re.M)
        self.assertIn("info", commands)
        self.assertIn("gray", commands)
        for c in commands:
            for form in ([c, "--help"], [c, "-h"], ["help", c]):
                r = run(*form)
                self.assertEqual(r.returncode, 0, form)
                self.assertTrue(r.stdout.startswith("usage: accel"), (form, r.stdout[:60]))

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^accel \d+\.\d+\.\d+ \(libaccel \d+\.\d+\.\d+, ABI \d+\)$")

    def test_usage_errors_exit_two(self):
        for args in ([], ["bogus"], ["--bogus", "info"], ["--threads", "x", "info"], ["--threads"],
                     ["--backend", "gpu", "info"], ["--log-level", "loud", "info"], ["info", "extra"],
                     ["gray"], ["gray", "--format", "tiff", SAMPLE], ["gray", "-o", "x.pgm", SAMPLE, SAMPLE],
                     ["help", "bogus"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.strip(), args)
        r = run(*[], ACCEL_BACKEND="gpu")
        self.assertEqual(r.returncode, 2)
        r = run("info", ACCEL_BACKEND="gpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("ACCEL_BACKEND", r.stderr)

    def test_info_lists_backends(self):
        r = run("info")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^libaccel \d+\.\d+\.\d+ \(ABI \d+\)")
        self.assertRegex(r.stdout, r"(?m)^build: cuda=(yes|no)")
        self.assertRegex(r.stdout, r"(?m)^  cpu\s+available")
        self.assertRegex(r.stdout, r"(?m)^  cuda\s+(available|compiled in, unavailable: .+|not compiled in, unavailable: .+)$")
        self.assertRegex(r.stdout, r"(?m)^devices: \d+$")
        self.assertRegex(r.stdout, r"(?m)^context: backend (cpu|cuda)")
        r = run("--backend", "cpu", "--threads", "1", "--log-level", "error", "info")
        self.assertIn("context: backend cpu, fallback allow, 1 CPU threads, log level error", r.stdout)

    def test_cuda_without_device_strict_fails_else_falls_back(self):
        if cuda_available():
            self.skipTest("a CUDA device is present")
        for how in (dict(args=["--strict", "info"], env={"ACCEL_BACKEND": "cuda"}),
                    dict(args=["--backend", "cuda", "--strict", "info"], env={})):
            r = run(*how["args"], **how["env"])
            self.assertEqual(r.returncode, 2, how)
            self.assertIn("CUDA backend requested but unavailable", r.stderr)
            self.assertEqual(r.stdout, "")
        r = run("info", ACCEL_BACKEND="cuda")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(FALLBACK_LINE.findall(r.stderr)), 1, r.stderr)
        self.assertIn("context: backend cpu", r.stdout)
        r = run("--backend", "cuda", "gray", "--out", self.tmp, SAMPLE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(FALLBACK_LINE.findall(r.stderr)), 1, r.stderr)
        # --strict with ACCEL_BACKEND=cpu: the environment wins, nothing fails
        r = run("--strict", "--backend", "cuda", "info", ACCEL_BACKEND="cpu")
        self.assertEqual(r.returncode, 0, r.stderr)

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

    def _stderr_on_a_terminal(self, *args):
        master, slave = pty.openpty()
        p = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=slave, env=env())
        os.close(slave)
        chunks = []
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        p.communicate(timeout=30)
        os.close(master)
        return p.returncode, b"".join(chunks).decode(errors="replace")

    def test_progress_only_on_a_terminal(self):
        inputs = [SAMPLE] * 3
        r = run("gray", "--out", self.tmp, *inputs)
        self.assertEqual(r.returncode, 0)
        self.assertNotIn("\r", r.stderr)
        self.assertNotIn("[#", r.stderr)
        rc, err = self._stderr_on_a_terminal("gray", "--out", self.tmp, *inputs)
        self.assertEqual(rc, 0)
        self.assertRegex(err, r"gray \[[#.]{30}\]\s+\d+%")
        rc, err = self._stderr_on_a_terminal("--no-progress", "gray", "--out", self.tmp, *inputs)
        self.assertEqual(rc, 0)
        self.assertNotIn("[", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
