#!/usr/bin/env python3
"""Perceptual hashing: libaccel against imagehash + Pillow, side by side, one run.

    python3 bench/hash_bench.py [--build build] [--repeat 3] [--backend cpu|cuda] [--quick]

Installs the peers at pinned versions (bench/requirements-hash.txt) into a
virtual environment (build/bench-venv), makes 12-megapixel JPEGs from the
sample photos of ../shared/data/hash (resized to 4000x3000, with sensor-like
noise so that they decode like real photos) and 2560x1600 baseline JPEGs, and
measures on each corpus:

  * per kind, single thread: imagehash as users call it (Image.open + the hash
    function, so each kind decodes the file again) against accel_hash_files
    with one thread and that one kind;
  * per image: all default kinds (ahash, dhash, phash, whash) and all six kinds;
    imagehash both as users call it and in its best case (decode once, then every
    kind from the loaded image);
  * all cores: imagehash in a multiprocessing pool against libaccel's threads;
  * fast mode (DCT-scaled JPEG decoding): its speed and its agreement with the
    exact hashes (share identical, mean Hamming distance);
  * the exact hashes against imagehash's, image by image and kind by kind.

Times are the best of --repeat runs. Results: a Markdown table on stdout and
bench/results/hash-<backend>-<date>.{md,json}.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import sys
import time
import warnings

from benchenv import cpu_name, ensure_venv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KINDS = ["ahash", "dhash", "dhash_vertical", "phash", "whash", "colorhash"]
DEFAULT_KINDS = ["ahash", "dhash", "phash", "whash"]
BAD = {"broken.png", "broken_data_stream.png", "truncated_end_chunk.png", "truncated_image.png", "truncated_jpeg.jpg"}


def make_12mp(src_dir, out_dir, size=(4000, 3000), quality=92, noise=6, tag="12mp"):
    """4000x3000 JPEGs (quality 92, 4:2:0) from the corpus's original photos
    (or another size: baseline JPEGs as cameras and phones write them)."""
    import numpy as np
    from PIL import Image
    os.makedirs(out_dir, exist_ok=True)
    stems = sorted({f.split("__")[0] for f in os.listdir(src_dir) if "__" in f})
    out = []
    rng = np.random.default_rng(12)
    for stem in stems:
        src = next((os.path.join(src_dir, stem + e) for e in (".png", ".jpg") if
                    os.path.exists(os.path.join(src_dir, stem + e))), None)
        if not src:
            continue
        dst = os.path.join(out_dir, "%s_%s.jpg" % (stem, tag))
        if not os.path.exists(dst):
            im = Image.open(src).convert("RGB").resize(size, Image.LANCZOS)
            a = np.asarray(im).astype(np.int16) + rng.normal(0, noise, (size[1], size[0], 3)).astype(np.int16)
            Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(dst, quality=quality)
        out.append(dst)
    return out


def best_of(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def imagehash_fn(kind):
    import imagehash
    return {"ahash": imagehash.average_hash, "dhash": imagehash.dhash, "dhash_vertical": imagehash.dhash_vertical,
            "phash": imagehash.phash, "whash": imagehash.whash, "colorhash": imagehash.colorhash}[kind]


def peer_as_users_call_it(paths, kinds):
    """Each kind from a fresh Image.open (each decodes the file)."""
    from PIL import Image
    fns = [imagehash_fn(k) for k in kinds]
    for p in paths:
        for f in fns:
            f(Image.open(p))


def peer_decode_once(paths, kinds):
    from PIL import Image
    fns = [imagehash_fn(k) for k in kinds]
    for p in paths:
        im = Image.open(p)
        im.load()
        for f in fns:
            f(im)


def decode_only(paths):
    """The decode alone, the limit of exact hashing: Pillow's libjpeg-turbo (or
    zlib) with the settings libaccel decodes with (ISLOW IDCT, fancy
    upsampling, full size), to RGB or L as the file holds."""
    from PIL import Image
    for p in paths:
        Image.open(p).load()


def _pool_one(args):
    path, kinds = args
    warnings.filterwarnings("ignore")
    peer_as_users_call_it([path], kinds)


def measure_corpus(name, paths, ctx1, ctxn, repeat, cores):
    rows = []
    td = best_of(lambda: decode_only(paths), repeat)

    def ours(ctx, kinds, fast=False):
        return lambda: ctx.hash.files(paths, kinds=kinds, fast=fast)

    for kind in KINDS:
        tp = best_of(lambda: peer_as_users_call_it(paths, [kind]), repeat)
        to = best_of(ours(ctx1, [kind]), repeat)
        rows.append({"what": kind, "peer_s": tp, "ours_s": to})
    for label, kinds in (("default kinds (ahash, dhash, phash, whash)", DEFAULT_KINDS), ("all six kinds", KINDS)):
        tp = best_of(lambda: peer_as_users_call_it(paths, kinds), repeat)
        tb = best_of(lambda: peer_decode_once(paths, kinds), repeat)
        to = best_of(ours(ctx1, kinds), repeat)
        rows.append({"what": "per image: " + label, "peer_s": tp, "peer_decode_once_s": tb, "ours_s": to})
    # all cores: each kind, the default kinds, all six
    allcores = []
    with multiprocessing.Pool(cores) as pool:
        for label, kinds in [(k, [k]) for k in KINDS] + [("per image: default kinds", DEFAULT_KINDS),
                                                          ("per image: all six kinds", KINDS)]:
            tp = best_of(lambda: pool.map(_pool_one, [(p, kinds) for p in paths], chunksize=1), repeat)
            to = best_of(ours(ctxn, kinds), repeat)
            allcores.append({"what": label, "peer_s": tp, "ours_s": to})
    # fast mode
    exact = ctx1.hash.files(paths, kinds=KINDS)
    fast = ctx1.hash.files(paths, kinds=KINDS, fast=True)
    tf = best_of(ours(ctx1, DEFAULT_KINDS, fast=True), repeat)
    te = next(r["ours_s"] for r in rows if r["what"].startswith("per image: default"))
    agree = {}
    import accel
    for k in KINDS:
        same = dist = n = 0
        for i in range(len(paths)):
            if not exact.ok(i):
                continue
            a, b = exact.hex(i, k), fast.hex(i, k)
            n += 1
            same += a == b
            dist += accel.distance(a, b)
        agree[k] = {"identical": same / max(n, 1), "mean_distance": dist / max(n, 1)}
    return {"corpus": name, "images": len(paths), "rows": rows, "decode_only_s": td, "all_cores": allcores,
            "cores": cores, "exact_vs_imagehash": exact_vs_imagehash(paths, exact),
            "fast": {"speedup_over_exact": te / tf, "ours_fast_s": tf, "agreement": agree}}


def exact_vs_imagehash(paths, exact):
    """Per kind: how many of the exact hashes equal imagehash's (str of its
    hash, each image decoded once), and which images differ."""
    from PIL import Image
    out = {}
    for k in KINDS:
        out[k] = {"equal": 0, "compared": 0, "differ": []}
    for i, p in enumerate(paths):
        if not exact.ok(i):
            continue
        im = Image.open(p)
        im.load()
        for k in KINDS:
            theirs = str(imagehash_fn(k)(im))
            out[k]["compared"] += 1
            if exact.hex(i, k) == theirs:
                out[k]["equal"] += 1
            else:
                out[k]["differ"].append(os.path.basename(p))
    return out


def markdown(results, meta):
    out = ["# Perceptual hashing: libaccel vs imagehash + Pillow", "",
           "- date: %s" % meta["date"], "- machine: %s, %d cores" % (meta["cpu"], meta["cores"]),
           "- device: %s" % meta["device"], "- backend: %s" % meta["backend"],
           "- peers: %s" % meta["peers"], "- libaccel: %s (%s)" % (meta["libaccel"], meta["build_info"]),
           "- command: `%s`" % meta["command"], "- times: best of %d runs; img/s = images per second" % meta["repeat"], ""]
    for r in results:
        out += ["## %s (%d images)" % (r["corpus"], r["images"]), "",
                "| single thread | imagehash img/s | libaccel img/s | ratio | libaccel time / decode only |",
                "| --- | ---: | ---: | ---: | ---: |"]
        n = r["images"]
        td = r.get("decode_only_s")
        for row in r["rows"]:
            extra = ""
            if "peer_decode_once_s" in row:
                extra = " (decode-once best case: %.2f img/s, ratio %.1fx)" % (
                    n / row["peer_decode_once_s"], row["peer_decode_once_s"] / row["ours_s"])
            out.append("| %s%s | %.2f | %.2f | **%.1fx** | %s |" % (
                row["what"], extra, n / row["peer_s"], n / row["ours_s"], row["peer_s"] / row["ours_s"],
                "%.2fx" % (row["ours_s"] / td) if td else "-"))
        if td:
            out.append("| decode only (Pillow's libjpeg-turbo / zlib, the same settings) | | %.2f | | 1.00x |" % (n / td))
        out += ["", "| all %d cores (imagehash: a process pool) | imagehash img/s | libaccel img/s | ratio |" % r["cores"],
                "| --- | ---: | ---: | ---: |"]
        for a in r["all_cores"]:
            out.append("| %s | %.2f | %.2f | **%.1fx** |" % (a["what"], n / a["peer_s"], n / a["ours_s"],
                                                              a["peer_s"] / a["ours_s"]))
        ev = r.get("exact_vs_imagehash")
        if ev:
            out += ["", "Exact hashes equal to imagehash's (each image decoded once by Pillow): " + ", ".join(
                "%s %d/%d" % (k, v["equal"], v["compared"]) for k, v in ev.items()) + "."]
            for k, v in ev.items():
                if v["differ"]:
                    out.append("- %s differs on: %s" % (k, ", ".join(v["differ"][:10])))
        f = r["fast"]
        out += ["", "Fast mode (default kinds, one thread): %.2f img/s, %.1fx the exact mode." % (
            n / f["ours_fast_s"], f["speedup_over_exact"]), "",
            "| kind | fast = exact | mean Hamming distance |", "| --- | ---: | ---: |"]
        for k, v in f["agreement"].items():
            out.append("| %s | %.1f%% | %.2f |" % (k, 100 * v["identical"], v["mean_distance"]))
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="meson build directory holding libaccel.so")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--quick", action="store_true", help="a third of each corpus, one repeat")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    ensure_venv(args.build, "bench-venv", "requirements-hash.txt")
    warnings.filterwarnings("ignore")
    lib = os.path.join(ROOT, args.build, "libaccel.so")
    if not os.path.exists(lib):
        sys.exit("bench: %s not found; build first (make demo)" % lib)
    os.environ["ACCEL_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import accel
    import imagehash
    import numpy
    import PIL
    import pywt
    import scipy

    src = os.path.join(ROOT, "..", "shared", "data", "hash", "images")
    if not os.path.isdir(src):
        sys.exit("bench: %s is missing (../shared beside the checkout)" % src)
    corpus = sorted(os.path.join(src, f) for f in os.listdir(src) if f not in BAD)
    big = make_12mp(src, os.path.join(ROOT, args.build, "bench-data", "12mp"))
    wide = make_12mp(src, os.path.join(ROOT, args.build, "bench-data", "2560"), (2560, 1600), 90, 4, "2560")
    if args.quick:
        corpus, big, wide, args.repeat = corpus[::3], big[::3], wide[::3], 1
    cores = os.cpu_count() or 1
    ctx1 = accel.Context(backend=args.backend, strict=True, threads=1)
    ctxn = accel.Context(backend=args.backend, strict=True, threads=0)
    photos = [p for p in corpus if "__" in os.path.basename(p) or
              any(os.path.basename(q).startswith(os.path.splitext(os.path.basename(p))[0] + "__") for q in corpus)]
    results = [measure_corpus("corpus (../shared/data/hash, all decodable images)", corpus, ctx1, ctxn, args.repeat,
                              cores),
               measure_corpus("corpus photos (the nine photos and their near-duplicate variants)", photos, ctx1, ctxn,
                              args.repeat, cores),
               measure_corpus("12-megapixel JPEGs (4000x3000, made from the corpus photos)", big, ctx1, ctxn,
                              args.repeat, cores),
               measure_corpus("2560x1600 baseline JPEGs (quality 90, made from the corpus photos)", wide, ctx1,
                              ctxn, args.repeat, cores)]
    cpu = cpu_name()
    devs = accel.devices()
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpu": cpu, "cores": cores,
            "device": devs[0]["name"] if devs and args.backend == "cuda" else "none (CPU)",
            "backend": args.backend, "repeat": args.repeat,
            "peers": "ImageHash %s, Pillow %s, numpy %s, scipy %s, PyWavelets %s" % (
                imagehash.__version__, PIL.__version__, numpy.__version__, scipy.__version__, pywt.__version__),
            "libaccel": accel.version(), "build_info": accel.build_info(), "command": " ".join(sys.argv)}
    md = markdown(results, meta)
    print(md)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "hash-%s-%s" % (args.backend, datetime.date.today().isoformat()))
    with open(stem + ".md", "w") as f:
        f.write(md + "\n")
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print("bench: wrote %s.md and .json" % stem, file=sys.stderr)


if __name__ == "__main__":
    main()
