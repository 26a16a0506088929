"""accel dupes: groups against connected components computed here from imagehash's
values, pairs, JSON, the index file it keeps, and the usage errors of dupes and index."""
import json
import os
import shutil
import unittest

from common import HASHDATA, SRC, DupesTest, components, hamming, parse_tsv, run

SHARED_HASH = os.path.join(SRC, "..", "shared", "data", "hash")


def parse_groups(text, strip=None):
    header, rows = parse_tsv(text)
    assert header == ["group", "path"], header
    groups = {}
    for row in rows:
        groups.setdefault(int(row["group"]), []).append(os.path.basename(row["path"]) if strip else row["path"])
    numbers = sorted(groups)
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    return [groups[n] for n in numbers]


class CliDupes(DupesTest):
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
            (["--kinds", "phash,whash", "--size", "16", "--threshold", "40,30"], ["phash16", "whash16"], [40, 30],
             "all"),
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
