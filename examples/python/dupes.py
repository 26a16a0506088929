"""Group near-duplicate photos with the exact Hamming index.

    python3 examples/python/dupes.py [DIR] [THRESHOLD]

Hashes every JPEG/PNG in DIR (default: samples/photos) with dhash and ahash
(imagehash's values), puts them in an accel.Index (two 64-bit fields) and
prints the groups whose members are within THRESHOLD bits (default 5) on both
kinds: the connected components of the matching pairs. The same search scales
to millions of hashes (docs/index.md).
"""
import os
import sys

from samples import photo_paths, require_numpy

np = require_numpy()
import accel  # noqa: E402


def main():
    paths = photo_paths(sys.argv[1] if len(sys.argv) > 1 else None)
    threshold = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with accel.Context() as ctx:
        h = ctx.hash.files(paths, kinds=["dhash", "ahash"])
        ok = np.array([h.ok(i) for i in range(len(paths))])
        for i in np.flatnonzero(~ok):
            print("skipped %s: %s" % (paths[i], h.error(i)), file=sys.stderr)
        index = accel.Index(ctx, bits=64, nfields=2)
        ids = np.flatnonzero(ok).astype(np.uint64)  # id = the file's number
        codes = np.stack([h.u64("dhash"), h.u64("ahash")], axis=1)[ok]
        index.add(ids, codes, labels=[paths[i] for i in ids])
        groups = index.groups(thresholds=threshold, rule="all")
        first, second, dist = index.self_join(thresholds=threshold)
    for g, members in enumerate(groups, 1):
        print("group %d:" % g)
        for m in members:
            print("  " + os.path.basename(paths[int(m)]))
    print("%d pairs within %d bits on dhash and ahash" % (len(first), threshold))
    for a, b, d in zip(first, second, dist):
        print("  %s ~ %s  (dhash %d, ahash %d)" % (os.path.basename(paths[int(a)]), os.path.basename(paths[int(b)]),
                                                  d[0], d[1]))
    # the chelsea variants are copies of one photo: they must be grouped
    names = [{os.path.basename(paths[int(m)]) for m in g} for g in groups]
    assert any({"chelsea__half.jpg", "chelsea__q40.jpg"} <= g for g in names), "expected the chelsea copies"
    return 0


if __name__ == "__main__":
    sys.exit(main())
