"""The accel tool as a whole: help and exit codes, the version, usage errors, and
progress bars only on a terminal."""
import os
import pty
import re
import select
import shutil
import subprocess
import unittest

from common import CLI, SAMPLE, CliTest, env, run


class Cli(CliTest):
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

    def test_global_options_after_the_command(self):
        before = run("--threads", "3", "--backend", "cpu", "--log-level", "error", "info")
        after = run("info", "--threads", "3", "--backend", "cpu", "--log-level", "error")
        self.assertEqual(before.returncode, 0, before.stderr)
        self.assertEqual(after.returncode, 0, after.stderr)
        self.assertIn("context: backend cpu, fallback allow, 3 CPU threads, log level error", after.stdout)
        self.assertEqual(before.stdout, after.stdout)
        photos = os.path.join(os.path.dirname(SAMPLE), "photos")
        plain = run("hash", "--kinds", "ahash", photos)
        mixed = run("hash", photos, "--threads", "2", "--kinds", "ahash", "--strict", "--no-progress")
        self.assertEqual(mixed.returncode, 0, mixed.stderr)
        self.assertEqual(plain.stdout, mixed.stdout)
        # a bad value is a usage error wherever it stands; after "--" nothing is an option
        r = run("hash", "--threads", "x", photos)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--threads", r.stderr)
        r = run("hash", "--kinds", "ahash", "--", photos, "--threads")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--threads", r.stderr)

    def test_sync_policy(self):
        """--sync index|all|none: the same file whatever the policy; strace (where
        installed) sees fsync only where the policy asks for it."""
        r = run("--sync", "sometimes", "info")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--sync", r.stderr)
        # (LeakSanitizer cannot run under ptrace: no strace in a sanitizer build)
        strace = None if os.environ.get("ACCEL_SANITIZED") == "1" else shutil.which("strace")
        outputs = {}
        transform = os.path.join(os.path.dirname(SAMPLE), "..", "tests", "data", "reg", "elastix_translation.txt")
        for policy, syncs in (("index", False), ("all", True), ("none", False)) * 2:
            field = len(outputs) >= 3  # the library's save (gray), then the tool's own (warp --out-field)
            out = os.path.join(self.tmp, policy + (".npy" if field else ".pgm"))
            cmd = [CLI, "--sync", policy, "warp", "--transform", transform, "--out-field", out] if field else \
                [CLI, "--sync", policy, "gray", "-o", out, SAMPLE]
            if strace:
                cmd = [strace, "-f", "-qq", "-e", "trace=fsync", "-o", out + ".trace"] + cmd
            r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                outputs[(policy, field)] = f.read()
            if strace:
                with open(out + ".trace") as f:
                    self.assertEqual("fsync(" in f.read(), syncs, policy)
        for field in (False, True):
            self.assertEqual(outputs[("index", field)], outputs[("all", field)])
            self.assertEqual(outputs[("index", field)], outputs[("none", field)])

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
