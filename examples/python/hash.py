"""Hash the sample photos and list the pairs that look alike.

    python3 examples/python/hash.py [DIR]

Prints imagehash-compatible hashes (dhash and phash) of every JPEG/PNG in DIR
(default: samples/photos) and the pairs whose dhash and phash are both
within 10 bits: near-duplicates (resized, recompressed, brightened copies).
"""
import itertools
import os
import sys

from samples import photo_paths, require_numpy

require_numpy()  # the package returns numpy arrays
import accel  # noqa: E402


def main():
    paths = photo_paths(sys.argv[1] if len(sys.argv) > 1 else None)
    with accel.Context() as ctx:
        r = ctx.hash.files(paths, kinds=["dhash", "phash"])
    for i, p in enumerate(paths):
        print("%-28s %s" % (os.path.basename(p), r.error(i) or "dhash %s  phash %s" % (r.hex(i, "dhash"),
                                                                                      r.hex(i, "phash"))))
    ok = [i for i in range(len(paths)) if r.ok(i)]
    pairs = [(a, b) for a, b in itertools.combinations(ok, 2)
             if accel.distance(r.hex(a, "dhash"), r.hex(b, "dhash")) <= 10
             and accel.distance(r.hex(a, "phash"), r.hex(b, "phash")) <= 10]
    print("near-duplicate pairs (dhash and phash within 10 bits):")
    for a, b in pairs:
        print("  %s ~ %s" % (os.path.basename(paths[a]), os.path.basename(paths[b])))
    # the chelsea variants are copies of one photo: they must be found
    names = {os.path.basename(paths[a]) for pair in pairs for a in pair}
    assert {"chelsea__half.jpg", "chelsea__q40.jpg"} <= names, "expected the chelsea copies to pair up"
    return 0


if __name__ == "__main__":
    sys.exit(main())
