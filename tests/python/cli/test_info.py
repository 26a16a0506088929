"""accel info, and the CUDA policy on a machine without a GPU."""
import re
import unittest

from common import SAMPLE, CliTest, run

FALLBACK_LINE = re.compile(r"^\[GPU\] ctx\.init failed: .+[^.]\. CPU fallback\.$", re.M)


def cuda_available():
    out = run("info").stdout
    return re.search(r"^  cuda\s+available", out, re.M) is not None


class CliInfo(CliTest):
    def test_info_lists_backends(self):
        r = run("info")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^libaccel \d+\.\d+\.\d+ \(ABI \d+\)")
        self.assertRegex(r.stdout, r"(?m)^build: cuda=(yes|no)")
        self.assertRegex(r.stdout, r"(?m)^  cpu\s+available")
        self.assertRegex(r.stdout,
                         r"(?m)^  cuda\s+(available|compiled in, unavailable: .+|not compiled in, unavailable: .+)$")
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
