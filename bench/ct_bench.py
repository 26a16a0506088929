#!/usr/bin/env python3
"""CT pore segmentation: libaccel against SciPy, the edt package and
scikit-image, side by side on the same volumes, one run.

    python3 bench/ct_bench.py [--build build] [--sizes 128,256,512] [--repeat 3] [--backend cpu|cuda] [--quick]

Installs the peers at pinned versions (bench/requirements-ct.txt) into a
virtual environment (build/bench-ct-venv). Volumes of the shared fixtures'
two kinds, resampled to N^3 (linear interpolation):

  * food: ../shared/data/ct/food_64x96x80_s1's int16 CT of a porous solid in
    air, threshold -300, pores = closed voids (fill_holes(solid) ^ solid);
  * sandstone: ../shared/data/ct/berea_pore's binary micro-CT, pores = every
    non-solid voxel.

Per stage, single thread (libaccel with one thread) and all cores (libaccel's
threads; the edt package with parallel=<cores>; SciPy and scikit-image have
no threads): fill holes (scipy.ndimage.binary_fill_holes), EDT
(scipy.ndimage.distance_transform_edt, edt.edt), markers
(skimage.measure.label + skimage.feature.peak_local_max), watershed
(skimage.segmentation.watershed), and the whole chain (libaccel's pipeline
against the peers' stages in sequence). Times are the best of --repeat runs
(one run at 512^3). Fill and EDT results must be identical to the peers';
markers and labels are compared with this scikit-image (whose tie order
differs from 0.19.3's, which libaccel reproduces: docs/ct.md) and the
agreement is reported.

Results: a Markdown table on stdout and bench/results/ct-<backend>-<date>.{md,json}.
"""
import argparse
import datetime
import json
import os
import sys
import time

from benchenv import cpu_name, ensure_venv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared", "data", "ct")


def make_volume(kind, n):
    import numpy as np
    import scipy.ndimage as ndi
    if kind == "food":
        src = np.load(os.path.join(SHARED, "food_64x96x80_s1", "input.npy")).astype(np.float32)
        vol = ndi.zoom(src, (n / 64, n / 96, n / 80), order=1)
        return np.round(vol).astype(np.int16), -300.0, "closed"
    src = np.load(os.path.join(SHARED, "berea_pore", "input.npy")).astype(np.float32)
    return (ndi.zoom(src, n / 110, order=1) > 0.5).astype(np.uint8), 0.0, "all"


def package_version(name):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def best(fn, repeat):
    t_best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, out


def markdown(args, info, rows, skimage_version):
    """The report: the run's facts, one table per thread count, the agreement with the peers."""
    md = ["# CT pore segmentation: libaccel vs SciPy, edt and scikit-image", ""]
    md += ["- %s: %s" % (k, v) for k, v in info.items()]
    md += ["- times in seconds, best of %d runs (one at 512^3); ratio = peer / libaccel" % args.repeat,
           "- volumes: the shared fixtures resampled to N^3 (food: int16, closed pores; sandstone: binary,"
           " all pores)", ""]
    for threads in sorted({r["threads"] for r in rows}):
        md += ["## %s" % ("single thread" if threads == 1 else "all %d cores (SciPy and scikit-image: one)" % threads),
               "", "| volume | porosity | fill holes: SciPy / libaccel | EDT: SciPy / edt / libaccel | "
               "markers: skimage / libaccel | watershed: skimage / libaccel | chain: peers / pipeline |",
               "| --- | ---: | --- | --- | --- | --- | --- |"]
        for r in rows:
            if r["threads"] != threads:
                continue
            md.append("| %s %d^3 | %.4f | %.3f / %.3f = **%.1fx** | %.2f / %.3f / %.3f = **%.1fx** SciPy, "
                      "**%.1fx** edt | %.3f / %.3f = %.1fx | %.3f / %.3f = **%.1fx** | %.2f / %.3f = **%.1fx** |" % (
                          r["kind"], r["n"], r["porosity"], r["fill_scipy"], r["fill_accel"],
                          r["fill_scipy"] / r["fill_accel"], r["edt_scipy"], r["edt_pkg"], r["edt_accel"],
                          r["edt_scipy"] / r["edt_accel"], r["edt_pkg"] / r["edt_accel"], r["markers_skimage"],
                          r["markers_accel"], r["markers_skimage"] / r["markers_accel"], r["ws_skimage"],
                          r["ws_accel"], r["ws_skimage"] / r["ws_accel"], r["chain_peers"], r["chain_accel"],
                          r["chain_peers"] / r["chain_accel"]))
        md.append("")
    md += ["## Agreement with the peers (single-thread rows)", "",
           "| volume | fill = SciPy | EDT = SciPy | markers: libaccel / skimage %s / both | watershed voxels equal |"
           % skimage_version, "| --- | --- | --- | --- | ---: |"]
    for r in rows:
        if r["threads"] == 1:
            md.append("| %s %d^3 | %s | %s | %d / %d / %d | %.4f%% |" % (
                r["kind"], r["n"], "yes" if r["fill_same"] else "NO", "yes" if r["edt_same"] else "NO",
                r["markers_count"][0], r["markers_count"][1], r["markers_count"][2], 100 * r["ws_agree"]))
    md.append("")
    return "\n".join(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="128,256,512")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--quick", action="store_true", help="128^3 only, one run")
    args = ap.parse_args()
    ensure_venv(args.build, "bench-ct-venv", "requirements-ct.txt")

    import numpy as np
    import scipy
    import scipy.ndimage as ndi
    import skimage
    import edt as edt_pkg
    from skimage.feature import peak_local_max
    from skimage.measure import label
    from skimage.segmentation import watershed
    os.environ.setdefault("ACCEL_LIBRARY", os.path.join(ROOT, args.build, "libaccel.so.0"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import accel

    if not os.path.isdir(SHARED):
        print("bench: ../shared/data/ct is absent", file=sys.stderr)
        return 2
    sizes = [128] if args.quick else [int(x) for x in args.sizes.split(",")]
    cores = os.cpu_count() or 1
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for n in sizes:
        repeat = 1 if args.quick or n >= 512 else args.repeat
        for kind in ("food", "sandstone"):
            vol, thr, mode = make_volume(kind, n)
            solid = vol > thr
            for threads in (1, cores):
                # a GPU row runs on the GPU or stops (strict), never silently on the CPU
                ctx = accel.Context(backend=args.backend, strict=args.backend == "cuda", threads=threads)
                ct = ctx.ct
                r = {"n": n, "kind": kind, "threads": threads}
                # fill holes
                r["fill_scipy"], f_ref = best(lambda: ndi.binary_fill_holes(solid), repeat) if threads == 1 else \
                    (rows[-1]["fill_scipy"], None)
                r["fill_accel"], f_acc = best(lambda: ct.fill_holes(solid), repeat)
                if f_ref is not None:
                    r["fill_same"] = bool(np.array_equal(f_ref, f_acc))
                pores = (f_acc & ~solid) if mode == "closed" else ~solid
                r["porosity"] = float(pores.mean())
                # EDT
                if threads == 1:
                    r["edt_scipy"], e_ref = best(lambda: ndi.distance_transform_edt(pores), repeat)
                else:
                    r["edt_scipy"], e_ref = rows[-1]["edt_scipy"], None
                r["edt_pkg"], e_pkg = best(lambda: edt_pkg.edt(pores, parallel=threads), repeat)
                r["edt_accel"], e_acc = best(lambda: ct.edt(pores), repeat)
                if e_ref is not None:
                    r["edt_same"] = bool(np.array_equal(e_ref.astype(np.float32), e_acc))
                # markers
                def sk_markers():
                    lab = label(pores, connectivity=3)
                    return peak_local_max(e_acc, min_distance=3, exclude_border=False, labels=lab)
                if threads == 1:
                    r["markers_skimage"], pk = best(sk_markers, repeat)
                else:
                    r["markers_skimage"], pk = rows[-1]["markers_skimage"], None
                r["markers_accel"], (mk, count) = best(lambda: ct.markers(e_acc, pores), repeat)
                if pk is not None:
                    sk = np.zeros(pores.shape, bool)
                    sk[tuple(pk.T)] = True
                    r["markers_count"] = [int(count), int(len(pk)), int(((mk > 0) & sk).sum())]
                # watershed
                neg = -e_acc
                if threads == 1:
                    r["ws_skimage"], w_ref = best(lambda: watershed(neg, mk, mask=pores), repeat)
                else:
                    r["ws_skimage"], w_ref = rows[-1]["ws_skimage"], None
                r["ws_accel"], w_acc = best(lambda: ct.watershed(neg, mk, mask=pores), repeat)
                if w_ref is not None:
                    r["ws_agree"] = float((w_ref[pores] == w_acc[pores]).mean()) if pores.any() else 1.0
                # the chain
                r["chain_peers"] = r["fill_scipy"] * (mode == "closed") + r["edt_scipy"] + r["markers_skimage"] + \
                    r["ws_skimage"]
                r["chain_accel"], _ = best(lambda: ct.pipeline(vol, thr, pores=mode,
                                                               outputs=("labels", "network")), repeat)
                rows.append(r)
                log("%d %s threads %d: fill %.3f/%.3f edt %.3f/%.3f/%.3f markers %.3f/%.3f ws %.3f/%.3f chain %.3f/%.3f"
                    % (n, kind, threads, r["fill_scipy"], r["fill_accel"], r["edt_scipy"], r["edt_pkg"],
                       r["edt_accel"], r["markers_skimage"], r["markers_accel"], r["ws_skimage"], r["ws_accel"],
                       r["chain_peers"], r["chain_accel"]))
                ctx.close()

    info = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": "%s, %d cores" % (cpu_name(), cores),
        "backend": args.backend,
        "libaccel": accel.version(),
        "build": accel.build_info(),
        "peers": "SciPy %s, edt %s, scikit-image %s, numpy %s" % (
            scipy.__version__, package_version("edt"), skimage.__version__, np.__version__),
        "command": "bench/ct_bench.py " + " ".join(sys.argv[1:]),
    }
    text = markdown(args, info, rows, skimage.__version__)
    print(text)
    if not args.quick:
        out = os.path.join(HERE, "results", "ct-%s-%s" % (args.backend, datetime.date.today().isoformat()))
        with open(out + ".md", "w") as f:
            f.write(text + "\n")
        with open(out + ".json", "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
        print("bench: wrote %s.md and .json" % out, file=sys.stderr)
    ok = all(r.get("fill_same", True) and r.get("edt_same", True) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
