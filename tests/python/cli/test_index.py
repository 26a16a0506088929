"""accel index build and query (ranges and k nearest) against distances computed
here from imagehash's values."""
import json
import os
import unittest

from common import HASHDATA, DupesTest, hamming, parse_tsv, run


class CliIndex(DupesTest):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
