"""What the tests of the accel command-line tool share: running it, the fixtures'
paths, readers of its outputs, and test cases with a temporary folder.
Standard library only."""
import ast
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support import HASHDATA, SRC, hash_reference_rows as reference_rows  # noqa: E402,F401

CLI = os.environ["ACCEL_CLI"]
SAMPLE = os.path.join(SRC, "samples", "astronaut.ppm")


def env(**extra):
    e = {k: v for k, v in os.environ.items() if k not in ("ACCEL_BACKEND", "ACCEL_LOG")}
    e.update(extra)
    return e


def run(*args, **extra):
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env(**extra), timeout=60)


def parse_tsv(text):
    lines = text.rstrip("\n").split("\n")
    header = lines[0].split("\t")
    return header, [dict(zip(header, l.split("\t"))) for l in lines[1:]]


def hamming(a, b):
    return bin(int(a, 16) ^ int(b, 16)).count("1")


def components(rows, columns, thresholds, rule):
    """Groups of two or more files: connected components of the pairs whose
    values (hex, by column) are within the thresholds by the rule; every pair
    compared, union-find. Returns sorted lists of file names, sorted."""
    names = sorted(rows)
    parent = list(range(len(names)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            within = [hamming(rows[names[i]][c], rows[names[j]][c]) <= t for c, t in zip(columns, thresholds)]
            if all(within) if rule == "all" else any(within):
                parent[find(i)] = find(j)
    groups = {}
    for i, n in enumerate(names):
        groups.setdefault(find(i), []).append(n)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def npy_bytes(path):
    """(shape, descr, raw little-endian data) of a .npy or .npy.gz file, parsed here."""
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    hlen = int.from_bytes(data[8:10] if major == 1 else data[8:12], "little")
    start = (10 if major == 1 else 12)
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    assert not header["fortran_order"]
    return tuple(header["shape"]), header["descr"], data[start + hlen:]


class CliTest(unittest.TestCase):
    """A test with a temporary folder of its own, self.tmp, named with `prefix`."""
    prefix = "accel-cli-"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class DupesTest(CliTest):
    """self.ref: imagehash's values of the hash fixtures that decode."""
    prefix = "accel-dupes-"

    def setUp(self):
        super().setUp()
        self.ref = {f: r for f, r in reference_rows().items() if r["ahash8"] != "error"}
