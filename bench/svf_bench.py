#!/usr/bin/env python3
"""Sky view factors and shadows: libaccel against UMEP's numpy algorithm.

UMEP's own numpy code (svfForProcessing153, shadowingfunction_20) is not on
PyPI; bench/umep_numpy.py is a faithful transcription of it, and this script
first checks that transcription against the frozen UMEP outputs of
../shared/data/svf (bit for bit) before timing it. The grids are synthetic
cities (terrain, buildings, trees) of N x N pixels, the same for both sides,
one run each (UMEP's run takes minutes). libaccel runs single-threaded and
on all cores; UMEP's numpy code is single-threaded (elementwise numpy).

The `solweig-gpu` package (PyPI) needs PyTorch and, for its speed, a CUDA
GPU; it is reported as not run unless it imports.

    python3 bench/svf_bench.py [--size 1000] [--pixel 1.0] [--build build] [--backend cpu|cuda]
                               [--skip-umep] [--out bench/results]

writes <out>/svf-<backend>-<date>.md and .json. With --backend cuda the
libaccel column is one run on the GPU (the fallback policy is strict: a GPU
failure stops the bench instead of timing the CPU).
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchenv import cpu_name  # noqa: E402


def city(n, seed=1):
    """A synthetic city of n x n pixels: sloped terrain (10-25 m), blocks of
    buildings 6-40 m tall, and trees (crowns 4-15 m) in the open space."""
    import numpy as np
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n].astype(np.float64)
    ground = 10 + 15 * (x + 0.5 * y) / (1.5 * n)
    dsm = ground.copy()
    built = np.zeros((n, n), bool)
    for _ in range(n * n // 900):
        h, w = rng.integers(8, 40, 2)
        r, c = rng.integers(0, n - h), rng.integers(0, n - w)
        if built[max(r - 4, 0):r + h + 4, max(c - 4, 0):c + w + 4].any():
            continue
        built[r:r + h, c:c + w] = True
        dsm[r:r + h, c:c + w] = ground[r:r + h, c:c + w].max() + rng.uniform(6, 40)
    cdsm = np.zeros((n, n))
    for _ in range(n * n // 400):
        r, c = rng.integers(0, n, 2)
        rad = rng.uniform(2, 5)
        yy, xx = np.ogrid[-6:7, -6:7]
        disc = (yy * yy + xx * xx) <= rad * rad
        r0, c0 = max(r - 6, 0), max(c - 6, 0)
        sub = disc[r0 - (r - 6):, c0 - (c - 6):][:n - r0, :n - c0]
        win = (slice(r0, r0 + sub.shape[0]), slice(c0, c0 + sub.shape[1]))
        ok = sub & ~built[win]
        cdsm[win][ok] = np.maximum(cdsm[win][ok], rng.uniform(4, 15))
    return dsm.astype(np.float32), cdsm.astype(np.float32)


def check_transcription():
    import umep_numpy
    shared = os.path.join(ROOT, "..", "shared", "data", "svf")
    if not os.path.isdir(shared):
        return "not checked (../shared/data/svf absent)"
    folders = sorted(os.path.join(shared, f) for f in os.listdir(shared))
    ok = all(umep_numpy.check_folder(f) for f in folders)
    return "identical to UMEP's outputs in %s" % ", ".join(os.path.basename(f) for f in folders) if ok \
        else "DIFFERS from the references"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--pixel", type=float, default=1.0)
    ap.add_argument("--build", default="build")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--skip-umep", action="store_true", help="time libaccel only")
    ap.add_argument("--umep-buildings", action="store_true",
                    help="also time UMEP's building-only SVF (about half the time of the vegetation run)")
    args = ap.parse_args()
    os.environ.setdefault("ACCEL_LIBRARY", os.path.join(ROOT, args.build, "libaccel.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import accel
    import umep_numpy

    transcription = check_transcription()
    print("umep_numpy.py:", transcription, flush=True)
    dsm, cdsm = city(args.size)
    n = args.size
    rows = []
    cores = os.cpu_count() or 1
    times = {}
    gpu = args.backend == "cuda"
    runs = (1,) if gpu else (1, cores)  # the GPU row: one context (the threads of the CPU parts: all)
    for threads in runs:
        with accel.Context(backend=args.backend, strict=gpu, threads=0 if gpu else threads) as ctx:
            t = time.perf_counter()
            ours = ctx.svf.sky(dsm, args.pixel, cdsm)
            times[("sky", threads)] = time.perf_counter() - t
            t = time.perf_counter()
            ours_b = ctx.svf.sky(dsm, args.pixel)
            times[("sky_b", threads)] = time.perf_counter() - t
            t = time.perf_counter()
            sh = ctx.svf.shadows(dsm, 247.5, 12, args.pixel, cdsm)
            times[("shadow", threads)] = time.perf_counter() - t
        print("libaccel %s: sky+veg %.2f s, sky %.2f s, shadow %.3f s" % (
            "CUDA" if gpu else "%d thread(s)" % threads, times[("sky", threads)], times[("sky_b", threads)],
            times[("shadow", threads)]), flush=True)
    umep = {}
    agree = {}
    if not args.skip_umep:
        t = time.perf_counter()
        ref_sh = umep_numpy.shadows(dsm, cdsm, cdsm * np.float32(0.25), 247.5, 12, args.pixel)
        umep["shadow"] = time.perf_counter() - t
        agree["shadow"] = all(bool((ref_sh[k] == sh[k]).all()) for k in ("sh", "vegsh", "vbshvegsh"))
        print("UMEP numpy shadow %.2f s (identical: %s)" % (umep["shadow"], agree["shadow"]), flush=True)
        if args.umep_buildings:
            t = time.perf_counter()
            ref_b = umep_numpy.svf(dsm, None, None, args.pixel)
            umep["sky_b"] = time.perf_counter() - t
            agree["sky_b"] = max(float(np.abs(ref_b[k] - ours_b[k]).max()) for k in accel.SVF_GRIDS[:5])
            print("UMEP numpy sky %.1f s (max |diff| %g)" % (umep["sky_b"], agree["sky_b"]), flush=True)
        t = time.perf_counter()
        ref = umep_numpy.svf(dsm, cdsm, None, args.pixel)
        umep["sky"] = time.perf_counter() - t
        agree["sky"] = max(float(np.abs(ref[k] - ours[k]).max()) for k in accel.SVF_GRIDS)
        print("UMEP numpy sky+veg %.1f s (max |diff| %g)" % (umep["sky"], agree["sky"]), flush=True)

    try:
        import solweig_gpu  # noqa: F401
        solweig = "importable, not timed (needs its own file layout and a CUDA GPU)"
    except Exception as e:  # not installed, or torch missing
        solweig = ("not run: %s (solweig-gpu needs PyTorch and, for its speed, a CUDA GPU; install it with "
                   "pip to include it)" % (str(e).splitlines()[0] if str(e) else type(e).__name__))

    date = datetime.date.today().isoformat()
    out_md = os.path.join(args.out, "svf-%s-%s.md" % (args.backend, date))
    cpu = cpu_name()
    lines = ["# Sky view factors and shadows: libaccel vs UMEP's numpy algorithm", "",
             "- date: %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
             "- machine: %s, %d cores" % (cpu, cores),
             "- backend: %s%s" % (args.backend, " (%s)" % accel.devices()[0]["name"] if gpu else ""),
             "- libaccel: %s (%s)" % (accel.version(), accel.build_info()),
             "- peer: UMEP's numpy code as bench/umep_numpy.py (%s), numpy %s" % (transcription, np.__version__),
             "- solweig-gpu: %s" % solweig,
             "- command: bench/svf_bench.py %s" % " ".join(sys.argv[1:]),
             "- grid: synthetic city %d x %d, pixel %g m, DSM %.1f-%.1f m, CDSM up to %.1f m, TDSM 0.25 CDSM" % (
                 n, n, args.pixel, dsm.min(), dsm.max(), cdsm.max()),
             "- one run each; UMEP single-threaded; ratio = UMEP / libaccel", ""]
    if gpu:
        lines += ["| task | UMEP numpy | libaccel CUDA | ratio | max abs diff |", "| --- | ---: | ---: | ---: | --- |"]
    else:
        lines += ["| task | UMEP numpy | libaccel 1 thread | ratio | libaccel %d threads | ratio | max abs diff |"
                  % cores, "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    names = {"sky": "SVF, 153 patches, with vegetation (15 grids)", "sky_b": "SVF, 153 patches, buildings (5 grids)",
             "shadow": "shadows, az 247.5 alt 12, with vegetation"}
    for k in ("sky", "sky_b", "shadow"):
        u = umep.get(k)
        t1, tn = times[(k, 1)], times[(k, runs[-1])]
        ratio1 = "**%.1fx**" % (u / t1) if u else "-"
        ration = "**%.1fx**" % (u / tn) if u else "-"
        diff = agree.get(k, "-")
        diff = ("identical" if diff is True else "DIFFER") if isinstance(diff, bool) else diff
        if gpu:
            lines.append("| %s | %s | %.3f s | %s | %s |" % (names[k], "%.1f s" % u if u else "not run", t1, ratio1,
                                                              diff))
            rows.append({"task": k, "umep_s": u, "accel_cuda_s": t1, "agreement": agree.get(k)})
            continue
        lines.append("| %s | %s | %.2f s | %s | %.2f s | %s | %s |" % (
            names[k], "%.1f s" % u if u else "not run", t1, ratio1, tn, ration, diff))
        rows.append({"task": k, "umep_s": u, "accel_1_s": t1, "accel_all_s": tn, "threads": cores,
                     "agreement": agree.get(k)})
    os.makedirs(os.path.dirname(out_md), exist_ok=True)
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out_md[:-3] + ".json", "w") as f:
        json.dump({"size": n, "pixel": args.pixel, "backend": args.backend, "rows": rows, "solweig_gpu": solweig,
                   "transcription": transcription}, f, indent=1)
    print("\n".join(lines))
    print("bench: wrote", out_md, "and .json")


if __name__ == "__main__":
    main()
