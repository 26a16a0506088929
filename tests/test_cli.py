"""The accel command-line tool: help and exit codes, global options, info, the
CUDA policy on a machine without a GPU, gray conversion against Pillow's own
output, hashes against imagehash's, duplicate groups against connected
components computed here from imagehash's values, and progress bars only on a
terminal. Standard library only."""
import ast
import gzip
import json
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
HASHDATA = os.path.join(SRC, "tests", "data", "hash")
SAMPLE = os.path.join(SRC, "samples", "astronaut.ppm")
SHARED_HASH = os.path.join(SRC, "..", "shared", "data", "hash")
CTDATA = os.path.join(SRC, "tests", "data", "ct")
SHARED_CT = os.path.join(SRC, "..", "shared", "data", "ct")
SVFDATA = os.path.join(SRC, "tests", "data", "svf")
SHARED_SVF = os.path.join(SRC, "..", "shared", "data", "svf")
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


def reference_rows():
    """imagehash's values for the committed hash fixtures: {file: {column: value}}."""
    rows = {}
    for name in ("reference.tsv", "generated.tsv"):
        with open(os.path.join(HASHDATA, name)) as f:
            lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
        header = lines[0].split("\t")
        for line in lines[1:]:
            cols = dict(zip(header, line.split("\t")))
            rows[cols["file"]] = cols
    return rows


def parse_tsv(text):
    lines = text.rstrip("\n").split("\n")
    header = lines[0].split("\t")
    return header, [dict(zip(header, l.split("\t"))) for l in lines[1:]]


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


class CliHash(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-hash-")
        self.ref = reference_rows()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_tsv_matches_imagehash_and_flags_errors(self):
        r = run("hash", HASHDATA)
        self.assertEqual(r.returncode, 1, r.stderr)  # the fixtures include broken files
        header, rows = parse_tsv(r.stdout)
        self.assertEqual(header, ["path", "ahash", "dhash", "phash", "whash"])
        images = sorted(f for f in os.listdir(HASHDATA) if f.lower().endswith((".png", ".jpg", ".jpeg")))
        self.assertEqual([os.path.basename(row["path"]) for row in rows], images)
        errors = 0
        for row in rows:
            ref = self.ref[os.path.basename(row["path"])]
            for kind in header[1:]:
                if ref["mode"] == "error":
                    self.assertEqual(row[kind], "error:ACCEL_ERR_DECODE", row["path"])
                else:
                    self.assertEqual(row[kind], ref[kind + "8"], (row["path"], kind))
            if ref["mode"] == "error":
                errors += 1
                self.assertIn(os.path.basename(row["path"]) + ": ACCEL_ERR_DECODE", r.stderr)
        self.assertEqual(errors, 5)

    def test_kinds_order_size_and_json(self):
        files = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil_sample_cmyk.jpg", "gen_adam7_rgba16.png")]
        r = run("hash", "--kinds", "colorhash,dhash_vertical,whash", "--size", "16", *files)
        self.assertEqual(r.returncode, 0, r.stderr)
        header, rows = parse_tsv(r.stdout)
        self.assertEqual(header, ["path", "colorhash", "dhash_vertical", "whash"])
        self.assertEqual([row["path"] for row in rows], files)  # files keep the order given
        for row in rows:
            ref = self.ref[os.path.basename(row["path"])]
            self.assertEqual(row["colorhash"], ref["colorhash8"])
            self.assertEqual(row["dhash_vertical"], ref["dhash_vertical16"])
            self.assertEqual(row["whash"], ref["whash16"])
        r = run("hash", "--format", "json", "--kinds", "ahash,phash", files[0], "/no/such.png")
        self.assertEqual(r.returncode, 1)
        doc = json.loads(r.stdout)
        self.assertEqual(doc[0], {"path": files[0], "ahash": self.ref["hopper.jpg"]["ahash8"],
                                  "phash": self.ref["hopper.jpg"]["phash8"]})
        self.assertEqual(doc[1], {"path": "/no/such.png", "error": "ACCEL_ERR_IO"})
        self.assertEqual(json.loads(run("hash", "--format", "json", os.path.join(self.tmp)).stdout), [])

    def test_directories_are_walked_recursively_in_order(self):
        os.makedirs(os.path.join(self.tmp, "b", "deep"))
        os.makedirs(os.path.join(self.tmp, "a"))
        for rel, src in (("b/deep/Z.JPG", "hopper.jpg"), ("a/x.Png", "hopper.png"), ("top.jpeg", "hopper.jpg"),
                         ("a/notes.txt", None), ("b/pic.gif", None)):
            dst = os.path.join(self.tmp, rel)
            if src:
                shutil.copy(os.path.join(HASHDATA, src), dst)
            else:
                with open(dst, "w") as f:
                    f.write("not an image")
        r = run("--threads", "1", "hash", "--kinds", "ahash", self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, rows = parse_tsv(r.stdout)
        self.assertEqual([os.path.relpath(row["path"], self.tmp) for row in rows],
                         ["a/x.Png", "b/deep/Z.JPG", "top.jpeg"])
        self.assertEqual({row["ahash"] for row in rows}, {self.ref["hopper.jpg"]["ahash8"]})
        same = run("hash", "--jobs", "2", "--kinds", "ahash", self.tmp)
        self.assertEqual(same.stdout, r.stdout)

    def test_fast_mode_and_usage_errors(self):
        r = run("hash", "--fast", os.path.join(HASHDATA, "hopper.jpg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(parse_tsv(r.stdout)[1]), 1)
        for args in (["hash"], ["hash", "--kinds", "md5", HASHDATA], ["hash", "--size", "1", HASHDATA],
                     ["hash", "--kinds", "whash", "--size", "12", HASHDATA], ["hash", "--format", "xml", HASHDATA],
                     ["hash", "--kinds", "ahash,ahash", HASHDATA], ["hash", "--bogus", HASHDATA]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), args)


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


def parse_groups(text, strip=None):
    header, rows = parse_tsv(text)
    assert header == ["group", "path"], header
    groups = {}
    for row in rows:
        groups.setdefault(int(row["group"]), []).append(os.path.basename(row["path"]) if strip else row["path"])
    numbers = sorted(groups)
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    return [groups[n] for n in numbers]


class CliDupes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-dupes-")
        self.ref = {f: r for f, r in reference_rows().items() if r["ahash8"] != "error"}

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_groups(self, args, columns, thresholds, rule):
        r = run("dupes", HASHDATA, *args)
        self.assertEqual(r.returncode, 1, r.stderr)  # the fixtures include five broken files
        self.assertEqual(r.stderr.count("ACCEL_ERR_DECODE"), 5, r.stderr)
        got = parse_groups(r.stdout, strip=True)
        want = components(self.ref, columns, thresholds, rule)
        self.assertEqual(got, want, args)
        # paths sorted within groups, groups by first path (full paths, byte order)
        full = parse_groups(r.stdout)
        self.assertEqual(full, sorted(sorted(g) for g in full))
        return got

    def test_groups_equal_connected_components_of_imagehash_values(self):
        cases = [
            (["--kinds", "ahash,dhash", "--threshold", "5", "--rule", "all"], ["ahash8", "dhash8"], [5, 5], "all"),
            ([], ["dhash8", "ahash8"], [5, 5], "all"),  # the defaults
            (["--kinds", "ahash,dhash", "--threshold", "2,12", "--rule", "any"], ["ahash8", "dhash8"], [2, 12], "any"),
            (["--kinds", "phash", "--threshold", "10"], ["phash8"], [10], "all"),
            (["--kinds", "phash,whash", "--size", "16", "--threshold", "40,30"], ["phash16", "whash16"], [40, 30], "all"),
            (["--kinds", "colorhash,dhash_vertical", "--threshold", "3,20", "--rule", "any"],
             ["colorhash8", "dhash_vertical8"], [3, 20], "any"),
            (["--kinds", "ahash", "--threshold", "0", "--algorithm", "mih"], ["ahash8"], [0], "all"),
            (["--kinds", "ahash", "--threshold", "9", "--algorithm", "brute"], ["ahash8"], [9], "all"),
        ]
        nonempty = 0
        for args, columns, thresholds, rule in cases:
            nonempty += bool(self.check_groups(args, columns, thresholds, rule))
        self.assertGreaterEqual(nonempty, 6)  # the cases do group something

    def test_shared_corpus_groups_equal_components_of_reference_tsv(self):
        ref_path = os.path.join(SHARED_HASH, "reference.tsv")
        if not os.path.exists(ref_path):
            self.skipTest("../shared/data/hash is absent")
        with open(ref_path) as f:
            lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
        header = lines[0].split("\t")
        rows = {}
        for line in lines[1:]:
            cols = dict(zip(header, line.split("\t")))
            if cols["ahash8"] != "error":
                rows[cols["file"]] = cols
        images = os.path.join(SHARED_HASH, "images")
        r = run("dupes", images, "--kinds", "ahash,dhash", "--threshold", "5", "--rule", "all")
        errors = len(lines) - 1 - len(rows)
        self.assertEqual(r.returncode, 1 if errors else 0, r.stderr)
        self.assertEqual(len(r.stderr.strip().split("\n")), errors, r.stderr)
        want = components(rows, ["ahash8", "dhash8"], [5, 5], "all")
        self.assertEqual(parse_groups(r.stdout, strip=True), want)
        self.assertGreater(len(want), 5)

    def test_pairs_and_json(self):
        r = run("dupes", "--pairs", "--kinds", "ahash,dhash", "--threshold", "4", HASHDATA)
        header, rows = parse_tsv(r.stdout)
        self.assertEqual(header, ["path1", "path2", "ahash", "dhash"])
        got = {(os.path.basename(x["path1"]), os.path.basename(x["path2"])): (int(x["ahash"]), int(x["dhash"]))
               for x in rows}
        names = sorted(self.ref)
        want = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                d = (hamming(self.ref[a]["ahash8"], self.ref[b]["ahash8"]),
                     hamming(self.ref[a]["dhash8"], self.ref[b]["dhash8"]))
                if max(d) <= 4:
                    want[(a, b)] = d
        self.assertEqual(got, want)
        self.assertGreater(len(want), 3)
        doc = json.loads(run("dupes", "--format", "json", HASHDATA).stdout)
        tsv = parse_groups(run("dupes", HASHDATA).stdout)
        self.assertEqual([g["paths"] for g in doc], tsv)
        self.assertEqual([g["group"] for g in doc], list(range(1, len(tsv) + 1)))
        self.assertEqual(json.loads(run("dupes", "--format", "json", self.tmp).stdout), [])
        self.assertEqual(run("dupes", self.tmp).stdout, "group\tpath\n")

    def test_index_file_is_reused_and_kept_current(self):
        lib = os.path.join(self.tmp, "photos")
        os.makedirs(lib)
        for name in ("hopper.jpg", "hopper__q40.jpg", "hopper__quarter.png", "hopper_gray.jpg", "pil123p.png",
                     "tiny.png"):
            shutil.copy(os.path.join(HASHDATA, name), lib)
        idx = os.path.join(self.tmp, "catalog.idx")
        first = run("--log-level", "info", "dupes", lib, "--index", idx)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertIn("0 hashes reused, 6 computed, 0 dropped", first.stderr)
        again = run("--log-level", "info", "dupes", lib, "--index", idx)
        self.assertIn("6 hashes reused, 0 computed, 0 dropped", again.stderr)
        self.assertEqual(again.stdout, first.stdout)
        hoppers = components({n: self.ref[n] for n in os.listdir(lib)}, ["dhash8", "ahash8"], [5, 5], "all")
        self.assertEqual(parse_groups(first.stdout, strip=True), hoppers)
        # a changed file is hashed again, a vanished one dropped
        os.remove(os.path.join(lib, "tiny.png"))
        shutil.copy(os.path.join(HASHDATA, "palette_gray.png"), os.path.join(lib, "pil123p.png"))
        os.utime(os.path.join(lib, "pil123p.png"), (1, 1))
        third = run("--log-level", "info", "dupes", lib, "--index", idx)
        self.assertIn("4 hashes reused, 1 computed, 2 dropped", third.stderr)
        info = dict(l.split("\t") for l in run("index", "info", idx).stdout.strip().split("\n"))
        self.assertEqual(info["entries"], "5")
        self.assertEqual(info["kinds"], "dhash,ahash")
        # other kinds: rebuilt, with a notice
        other = run("dupes", lib, "--index", idx, "--kinds", "phash")
        self.assertEqual(other.returncode, 0, other.stderr)
        self.assertIn("holds other hashes", other.stderr)
        # a corrupt file is an error, never a crash, and is left alone
        with open(idx, "r+b") as f:
            f.seek(40)
            f.write(b"\xff\xff")
        bad = run("dupes", lib, "--index", idx)
        self.assertEqual(bad.returncode, 1)  # an input (the index file) refused
        self.assertIn(idx, bad.stderr)
        self.assertIn("remove the file", bad.stderr)
        self.assertEqual(run("index", "info", idx).returncode, 1)

    def test_index_build_query_and_knn(self):
        idx = os.path.join(self.tmp, "c.idx")
        r = run("index", "build", idx, HASHDATA, "--kinds", "ahash,phash")
        self.assertEqual(r.returncode, 1, r.stderr)  # broken files
        self.assertIn("%d entries" % len(self.ref), r.stderr)
        queries = [os.path.join(HASHDATA, f) for f in ("hopper.jpg", "pil123rgba.png")]
        q = run("index", "query", idx, *queries, "--threshold", "6,12")
        self.assertEqual(q.returncode, 0, q.stderr)
        header, rows = parse_tsv(q.stdout)
        self.assertEqual(header, ["query", "path", "ahash", "phash"])
        want = []
        for query in queries:
            qn = os.path.basename(query)
            for name in sorted(self.ref):
                d = (hamming(self.ref[qn]["ahash8"], self.ref[name]["ahash8"]),
                     hamming(self.ref[qn]["phash8"], self.ref[name]["phash8"]))
                if d[0] <= 6 and d[1] <= 12:
                    want.append((query, name, d))
        got = [(x["query"], os.path.basename(x["path"]), (int(x["ahash"]), int(x["phash"]))) for x in rows]
        self.assertEqual(got, want)
        k = run("index", "query", idx, queries[0], "--k", "4", "--by", "phash", "--format", "json")
        doc = json.loads(k.stdout)
        dists = sorted(hamming(self.ref["hopper.jpg"]["phash8"], self.ref[n]["phash8"]) for n in self.ref)
        self.assertEqual([x["phash"] for x in doc], dists[:4])
        self.assertEqual([x["rank"] for x in doc], [1, 2, 3, 4])
        for x in doc:
            self.assertEqual(hamming(self.ref["hopper.jpg"]["phash8"], self.ref[os.path.basename(x["path"])]["phash8"]),
                             x["phash"])
        # build again without --kinds keeps the file's kinds
        r = run("index", "build", idx, os.path.join(HASHDATA, "hopper.jpg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 entries (1 reused", r.stderr)
        info = dict(l.split("\t") for l in run("index", "info", idx).stdout.strip().split("\n"))
        self.assertEqual((info["entries"], info["kinds"]), ("1", "ahash,phash"))

    def test_usage_errors_exit_two(self):
        for args in (["dupes"], ["dupes", "--threshold", "x", HASHDATA], ["dupes", "--rule", "most", HASHDATA],
                     ["dupes", "--size", "17", HASHDATA], ["dupes", "--threshold", "1,2,3", HASHDATA],
                     ["dupes", "--threshold", "65", "--kinds", "ahash", HASHDATA],
                     ["dupes", "--algorithm", "fast", HASHDATA], ["dupes", HASHDATA, "--threshold"],
                     ["index"], ["index", "bogus"], ["index", "query"], ["index", "build", "x.idx"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))
        for args in (["index", "info", "/no/such.idx"], ["index", "query", "/no/such.idx", HASHDATA]):
            r = run(*args)  # an input that cannot be read: 1
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("accel: "), (args, r.stderr))


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


def fixture_meta(folder):
    meta = {}
    with open(os.path.join(folder, "meta.txt")) as f:
        for line in f:
            key, _, value = line.strip().partition(" ")
            meta[key] = value
    spacing = ",".join(x.strip() for x in meta["sampling"].strip("()").split(","))
    return meta["threshold"], meta["pores"], spacing


class CliCt(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-ct-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

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
                     ["ct", "segment", inp, "--threshold", "x"], ["ct", "segment", inp, "--threshold", "0", "--pores", "some"],
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



class CliSvf(unittest.TestCase):
    """accel shadow / accel svf against UMEP's grids (tests/data/svf, ../shared/data/svf)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-svf-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

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
        r = run("shadow", "--dsm", dsm, "--pixel-size", "2", "--azimuth", "180", "--altitude", "60", "--out", out)
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

def write_npy(path, descr, shape, data):
    """A version 1.0 .npy file, written here (C order)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1") + data)


BAD = os.path.join(SRC, "tests", "data", "bad")


def has_tiff():
    return "tiff=yes" in run("info").stdout
PHOTOS = os.path.join(SRC, "samples", "photos")


class CliRobustness(unittest.TestCase):
    """Hostile inputs and careless command lines: the exit status rule, outputs that
    would destroy inputs, lost standard output, integer options, directory walks."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accel-robust-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

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
                 ["ct", "segment", vol, "--threshold", "x"], ["ct", "segment", vol, "--threshold", "0", "--offset", "1"],
                 ["shadow", "--dsm", dsm, "--pixel-size", "1", "--azimuth", "400", "--altitude", "10", "--out", out],
                 ["svf", "--dsm", dsm, "--pixel-size", "1", "--out", out, "--patches", "150"],
                 ["svf", "--dsm", dsm, "--pixel-size", "1", "--out", out, "--trunk-ratio", "-1"]]
        inputs = [["hash", broken], ["hash", self.path("missing.jpg")], ["dupes", self.path("missing.png")],
                  ["index", "info", self.path("missing.idx")],
                  ["index", "query", os.path.join(BAD, "meta_mismatch.idx"), PHOTOS],
                  ["gray", "--out", out, self.path("missing.pgm")], ["gray", "--out", out, gray16],
                  ["ct", "segment", f64, "--threshold", "0"],
                  ["ct", "segment", vol, "--threshold", "0", "--markers", i16markers, "--out-labels", self.path("l.npy")],
                  ["ct", "segment", self.path("missing.npy"), "--threshold", "0"],
                  ["shadow", "--dsm", inf_dsm, "--pixel-size", "1", "--azimuth", "90", "--altitude", "30", "--out", out],
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
        bad_shape = ["ct", "segment", raw, "--shape", "99999999999999999999,1,1", "--dtype", "int16", "--threshold", "0"]
        self.assertEqual(run(*bad_shape).returncode, 2)
        r = run(*base, "--offset", "18446744073709551615")
        self.assertEqual(r.returncode, 2)
        r = run(*base, "--offset", "20")  # a header skip the file is too short for
        self.assertEqual(r.returncode, 1)  # 120 bytes cannot hold 20 + 120
        self.assertIn("bytes", r.stderr)
        for args in (["--threads", "100000", "info"], ["--threads", "-1", "info"], ["--threads", "99999999999999999999", "info"]):
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
