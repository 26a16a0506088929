#!/usr/bin/env python3
"""B-spline registration: `accel register` / `accel warp` against elastix 5.0.1
(the Debian package), side by side on the same pairs, one run.

    python3 bench/reg_bench.py [--build build] [--backend cpu|cuda] [--sizes 1024,4096,8192]
                               [--threads 1,all] [--repeat 1] [--skip-elastix] [--skip-accel]
                               [--big] [--big-size 17320] [--big-threads 2] [--big-repeat 1] [--big-elastix]
                               [--big-dtype float32|uint8|uint16]
                               [--data DIR] [--out bench/results] [--wait-quiet 60] [--keep] [--quick]

Pairs: printed woven fabric with a known B-spline + affine deformation, made
by ../shared/tools/make_reg_data.py (its docstring has the commands; run here
with --no-ref, so that the truth fields and the RGB layer are written and
elastix is run by this script, not by the generator):

    1024^2  the shared tex_1024_s2 (make_reg_data.py DIR 2 1024 1024 12)
    4096^2  make_reg_data.py DIR 3 4096 4096 20 --spacing 256
    8192^2  make_reg_data.py DIR 4 8192 8192 24 --spacing 256
    17320^2 make_reg_data.py DIR 5 17320 17320 24 --spacing 256   (--big: 300 MP)

Other sizes get seed 9, amplitude 24 and spacing 256. Generated pairs are
cached under --data (default $ACCEL_BENCH_DATA, else <build>/bench-reg-data;
never in git). Measured on 2 shared cores: 4096^2 takes 40 s, 0.8 GiB of
memory and 0.3 GB of disk; 8192^2 4 minutes, 2.5 GiB and 1.2 GB; 300 MP
about 30 minutes, 9.6 GiB and 5.7 GB; once.

Per pair and thread count (1 and all cores; --threads), each tool's
registration is timed (wall, best of --repeat) with its peak memory (max RSS
of the child, from getrusage in a wrapper process that runs only it; before
each timed run the script waits up to --wait-quiet seconds for the CPUs to
idle, and records how busy they were):

  * elastix -f fixed.tif -m moving.tif -p ../shared/tools/elastix_bspline_params.txt
    -out DIR -threads N  (4 levels, grid 64, 500 iterations of ASGD, 5000
    samples; writes its transform and the cubic resample of the moving image);
  * accel --threads N register --fixed fixed.tif --moving moving.tif
    --out-transform T.txt --out-warped W.tif  (the default options; the same
    two outputs).

Then the warp of each transform: transformix -in moving.tif (one gray
channel; transformix does not take RGB) and accel warp --interp cubic
moving_rgb.tif (uint8 RGB), timed the same way.

Accuracy, the same way for both tools: transformix -def all on the tool's
transform file gives the dense field u; over the interior (border = 64 px,
the final grid spacing) the error |u - u_truth| (Euclidean, px): mean, p95,
max and the share of points over 0.5 px; and the MSE between the tool's warped moving image and the fixed image.
At 300 MP the field is sampled by transformix -ipp at every 32nd pixel of the
interior in both axes instead.

--big: the 300 MP pair (17320^2) registered and its RGB layer warped end to
end by one command, accel --threads 2 register ... --warp moving_rgb.tif
OUT.tif (the fastest of --big-repeat runs; the kernel's page work moves a
run by seconds), against the budget of 15 s and 12 GiB on 2 cores; --big-dtype uint8
or uint16 registers integer copies of the gray pair instead (rounded, cached
beside it), as scanners write them. elastix is not run
at this size unless --big-elastix (it takes minutes); the issue's figures for
elastix at 8192^2 are 44-66 s on 2 threads and 3.7 GiB.

Results: bench/results/reg-<backend>-<date>.{md,json}. With --backend cuda
the accel rows run on the GPU (--strict: a GPU failure stops the row); the
elastix rows are its CPU runs.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

from benchenv import cpu_name, ensure_venv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
GENERATOR = os.path.join(SHARED, "tools", "make_reg_data.py")
PARAMS = os.path.join(SHARED, "tools", "elastix_bspline_params.txt")
BORDER = 64
BIG = 17320
BUDGET_S, BUDGET_GIB = 15.0, 12.0
# size -> (folder name, generator arguments after CASEDIR)
CASES = {512: ("tex_512_s1", "1 512 512 8"), 1024: ("tex_1024_s2", "2 1024 1024 12"),
         4096: ("tex_4096_s3", "3 4096 4096 20 --spacing 256"), 8192: ("tex_8192_s4", "4 8192 8192 24 --spacing 256"),
         BIG: ("tex_17320_s5", "5 17320 17320 24 --spacing 256")}
PAIR_FILES = ("fixed.tif", "moving.tif", "moving_rgb.tif", "truth_dx.npy", "truth_dy.npy", "meta.txt")
# Runs one command and reports its wall time and its own peak memory (the only child of this process).
WRAPPER = ("import resource, subprocess, sys, time\n"
           "t = time.perf_counter()\n"
           "rc = subprocess.run(sys.argv[1:]).returncode\n"
           "wall = time.perf_counter() - t\n"
           "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "sys.stderr.write('\\nBENCH-RUSAGE %d %.6f %.3f %.3f\\n' % (u.ru_maxrss, wall, u.ru_utime, u.ru_stime))\n"
           "sys.exit(rc)\n")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def case(n):
    if n in CASES:
        return CASES[n]
    return "tex_%d_s9" % n, "9 %d %d 24 --spacing 256" % (n, n)


def pair(n, data):
    """The folder of the n x n pair: the shared fixtures' when there, else generated into `data` once."""
    name, gen_args = case(n)
    shared = os.path.join(SHARED, "data", "reg", name)
    for folder in (shared, os.path.join(data, name)):
        if all(os.path.exists(os.path.join(folder, f)) for f in PAIR_FILES):
            return folder, "make_reg_data.py DIR %s --no-ref" % gen_args
    folder = os.path.join(data, name)
    if not os.path.exists(GENERATOR):
        raise SystemExit("bench: %s is absent: cannot make the %d^2 pair" % (GENERATOR, n))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(data, exist_ok=True)
    cmd = [sys.executable, GENERATOR, folder] + gen_args.split() + ["--no-ref"]
    log("bench: making the %d^2 pair (once): %s" % (n, " ".join(cmd)))
    m = measure(cmd, os.path.join(data, name + ".gen.log"))
    if m["rc"] != 0:
        raise SystemExit("bench: the generator failed (see %s)" % os.path.join(data, name + ".gen.log"))
    log("bench: made %s in %.0f s, peak %.0f MiB" % (folder, m["wall"], m["rss_mib"]))
    return folder, "make_reg_data.py DIR %s --no-ref" % gen_args


def cpu_snap():
    """(all jiffies, idle jiffies) of the machine (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    except (OSError, ValueError, IndexError):
        return None


def cpu_busy(dt=2.0):
    """The fraction of the CPUs' time spent busy over the next dt seconds (nan without /proc/stat)."""
    a = cpu_snap()
    time.sleep(dt)
    b = cpu_snap()
    if a is None or b is None:
        return float("nan")
    return 1.0 - (b[1] - a[1]) / max(1, b[0] - a[0])


def wait_quiet(limit):
    """Wait up to `limit` seconds for the CPUs to idle (< 15 % busy over 2 s): the last figure."""
    t, busy = time.monotonic(), cpu_busy()
    while busy > 0.15 and time.monotonic() - t < limit:
        busy = cpu_busy()
    return busy


def measure(cmd, logfile, env=None, quiet=0.0):
    """Run cmd through the wrapper: rc, wall s, peak RSS MiB, cpu s, the CPUs' load before it (waiting up
    to `quiet` seconds for them to idle)."""
    busy = wait_quiet(quiet) if quiet > 0 else float("nan")
    load, before = os.getloadavg()[0], cpu_snap()
    with open(logfile, "w") as f:
        r = subprocess.run([sys.executable, "-c", WRAPPER] + cmd, stdout=f, stderr=subprocess.PIPE, text=True,
                           env=env)
        f.write(r.stderr)
    after = cpu_snap()
    m = re.search(r"BENCH-RUSAGE (\d+) ([\d.]+) ([\d.]+) ([\d.]+)", r.stderr)
    rss, wall, user, system = (int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))) if m \
        else (0, float("nan"), float("nan"), float("nan"))
    # the other work during the run: the machine's busy share less this run's own CPU time
    other = float("nan")
    if before and after and after[0] > before[0]:
        total = after[0] - before[0]
        used = total - (after[1] - before[1])
        tick = total / ((os.cpu_count() or 1) * max(wall, 1e-3))  # jiffies per CPU-second, about
        other = max(0.0, (used - (user + system) * tick) / total)
    return {"rc": r.returncode, "wall": wall, "rss_mib": rss / 1024.0, "cpu": user + system, "load_before": load,
            "busy_before": busy, "other_during": other,
            "tail": r.stderr.replace(m.group(0) if m else "", "").strip()[-400:]}


def best_of(repeat, make_cmd, logfile, env=None, quiet=0.0):
    """Run make_cmd(k)'s command `repeat` times; the fastest run, peak memory = the largest of all."""
    runs = []
    for k in range(repeat):
        m = measure(make_cmd(k), logfile + ".%d" % k, env, quiet)
        runs.append(m)
        if m["rc"] != 0:
            return m
    b = dict(min(runs, key=lambda m: m["wall"]))
    b["rss_mib"] = max(m["rss_mib"] for m in runs)
    b["walls"] = [m["wall"] for m in runs]
    return b


def accel_env():
    return {k: v for k, v in os.environ.items() if k not in ("ACCEL_BACKEND", "ACCEL_LOG")}


def accel_global(args, threads):
    g = ["--no-progress", "--threads", str(threads)]
    return g + (["--backend", "cuda", "--strict"] if args.backend == "cuda" else ["--backend", "cpu"])


def with_tif_output(tp):
    """A copy of transform file tp beside it whose transformix outputs are TIFF (its other keys unchanged)."""
    with open(tp) as f:
        text = f.read()
    text, n = re.subn(r'\(ResultImageFormat\s+"[^"]*"\)', '(ResultImageFormat "tif")', text)
    if n == 0:
        text += '\n(ResultImageFormat "tif")\n'
    copy = tp[:-4] + ".tif-out.txt" if tp.endswith(".txt") else tp + ".tif-out"
    with open(copy, "w") as f:
        f.write(text)
    return copy


def field_error_dense(folder, tp, work, threads):
    """transformix -def all of tp against the truth over the interior: error stats, or why not."""
    import numpy as np
    import tifffile
    out = os.path.join(work, "def")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = subprocess.run(["transformix", "-def", "all", "-tp", with_tif_output(tp), "-out", out, "-threads",
                        str(threads)], capture_output=True, text=True)
    path = os.path.join(out, "deformationField.tif")
    if r.returncode != 0 or not os.path.exists(path):
        return {"error": "transformix -def all failed: %s" % (r.stdout + r.stderr)[-300:]}
    field = tifffile.imread(path)
    shutil.rmtree(out, ignore_errors=True)
    tdx = np.load(os.path.join(folder, "truth_dx.npy"), mmap_mode="r")
    tdy = np.load(os.path.join(folder, "truth_dy.npy"), mmap_mode="r")
    h, w = tdx.shape
    if field.shape != (h, w, 2):
        return {"error": "transformix's field has shape %s, not %s" % (field.shape, (h, w, 2))}
    errs = []
    for r0 in range(BORDER, h - BORDER, 1024):
        r1 = min(r0 + 1024, h - BORDER)
        ex = field[r0:r1, BORDER:w - BORDER, 0].astype(np.float64) - tdx[r0:r1, BORDER:w - BORDER]
        ey = field[r0:r1, BORDER:w - BORDER, 1].astype(np.float64) - tdy[r0:r1, BORDER:w - BORDER]
        errs.append(np.hypot(ex, ey).astype(np.float32).ravel())
    return error_stats(np.concatenate(errs), "dense")


def field_error_sparse(folder, tp, work, threads, stride=32):
    """The same from transformix -ipp at every `stride`-th pixel of the interior (for 300 MP)."""
    import numpy as np
    tdx = np.load(os.path.join(folder, "truth_dx.npy"), mmap_mode="r")
    tdy = np.load(os.path.join(folder, "truth_dy.npy"), mmap_mode="r")
    h, w = tdx.shape
    ys, xs = np.arange(BORDER, h - BORDER, stride), np.arange(BORDER, w - BORDER, stride)
    gy, gx = np.meshgrid(ys, xs, indexing="ij")
    pts = os.path.join(work, "points.txt")
    with open(pts, "w") as f:
        f.write("point\n%d\n" % gx.size)
        np.savetxt(f, np.stack([gx.ravel(), gy.ravel()], 1), fmt="%d")
    out = os.path.join(work, "ipp")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = subprocess.run(["transformix", "-ipp", pts, "-tp", tp, "-out", out, "-threads", str(threads)],
                       capture_output=True, text=True)
    path = os.path.join(out, "outputpoints.txt")
    if r.returncode != 0 or not os.path.exists(path):
        return {"error": "transformix -ipp failed: %s" % (r.stdout + r.stderr)[-300:]}
    with open(path) as f:
        d = np.array([[float(v) for v in re.search(r"Deformation = \[ *([^ ]+) +([^ ]+) *\]", line).groups()]
                      for line in f])
    u = np.asarray(tdx)[gy, gx].ravel().astype(np.float64), np.asarray(tdy)[gy, gx].ravel().astype(np.float64)
    return error_stats(np.hypot(d[:, 0] - u[0], d[:, 1] - u[1]), "a %d-pixel grid" % stride)


def error_stats(err, how):
    import numpy as np
    return {"mean": float(err.mean()), "p95": float(np.percentile(err, 95)), "max": float(err.max()),
            "over_half_px": float(np.mean(err > 0.5)), "points": int(err.size), "sampling": how}


def interior_mse(folder, warped):
    """MSE of warped (a TIFF over the fixed grid) against fixed.tif over the interior, or None."""
    import numpy as np
    import tifffile
    if not os.path.exists(warped):
        return None
    a = tifffile.imread(os.path.join(folder, "fixed.tif"))
    b = tifffile.imread(warped)
    if a.shape != b.shape:
        return None
    h, w = a.shape
    total = 0.0
    for r0 in range(BORDER, h - BORDER, 1024):
        r1 = min(r0 + 1024, h - BORDER)
        d = a[r0:r1, BORDER:w - BORDER].astype(np.float64) - b[r0:r1, BORDER:w - BORDER]
        total += float(np.sum(d * d))
    return total / ((h - 2 * BORDER) * (w - 2 * BORDER))


def run_elastix(folder, threads, work, repeat, quiet, sparse=False):
    """elastix's registration (timed), transformix's gray warp (timed), and the accuracy of both."""
    def cmd(k):
        out = os.path.join(work, "elastix-t%d-%d" % (threads, k))
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        return ["elastix", "-f", os.path.join(folder, "fixed.tif"), "-m", os.path.join(folder, "moving.tif"), "-p",
                PARAMS, "-out", out, "-threads", str(threads)]
    m = best_of(repeat, cmd, os.path.join(work, "elastix-t%d.log" % threads), quiet=quiet)
    out = os.path.join(work, "elastix-t%d-0" % threads)
    tp = os.path.join(out, "TransformParameters.0.txt")
    if m["rc"] != 0 or not os.path.exists(tp):
        return {"run": m, "error": "elastix failed: " + m["tail"]}
    res = {"run": m, "mse": interior_mse(folder, os.path.join(out, "result.0.tif"))}
    wdir = os.path.join(work, "transformix-t%d" % threads)
    os.makedirs(wdir, exist_ok=True)
    res["warp"] = measure(["transformix", "-in", os.path.join(folder, "moving.tif"), "-tp", tp, "-out", wdir,
                           "-threads", str(threads)], wdir + ".log", quiet=quiet)
    shutil.rmtree(wdir, ignore_errors=True)
    res["field"] = (field_error_sparse if sparse else field_error_dense)(folder, tp, work, threads)
    for k in range(repeat):
        shutil.rmtree(os.path.join(work, "elastix-t%d-%d" % (threads, k)), ignore_errors=True)
    return res


def seed_args(args):
    """accel register's --seed, when the run names one (the samples' seed: accuracy over seeds)."""
    return [] if args.seed is None else ["--seed", str(args.seed)]


def run_accel(args, folder, threads, work, repeat):
    """accel register (timed), accel warp of the RGB layer (timed), and the accuracy of its transform."""
    tp, warped = os.path.join(work, "T-t%d.txt" % threads), os.path.join(work, "W-t%d.tif" % threads)
    base = [args.cli] + accel_global(args, threads)

    def cmd(k):
        return base + ["register", "--fixed", os.path.join(folder, "fixed.tif"), "--moving",
                       os.path.join(folder, "moving.tif"), "--out-transform", tp, "--out-warped",
                       warped] + seed_args(args)
    m = best_of(repeat, cmd, os.path.join(work, "accel-t%d.log" % threads), accel_env(), args.wait_quiet)
    if m["rc"] != 0:
        return {"run": m, "error": "accel register failed: " + m["tail"]}
    res = {"run": m, "mse": interior_mse(folder, warped)}
    rgb = os.path.join(work, "rgb-t%d.tif" % threads)
    res["warp"] = measure(base + ["warp", "--transform", tp, "--interp", "cubic", os.path.join(folder, "moving_rgb.tif"),
                                  rgb], os.path.join(work, "accel-warp-t%d.log" % threads), accel_env(),
                       args.wait_quiet)
    res["field"] = field_error_dense(folder, tp, work, threads)
    for p in (warped, rgb):
        if os.path.exists(p):
            os.remove(p)
    return res


def integer_copy(folder, name, dtype):
    """PAIR/<name>.tif (float32) as <name>_<dtype>.tif: rounded, clipped to 0..255 and, for uint16, times
    257 (the 8-bit scale stretched over 16 bits); made once, row band by row band."""
    import numpy as np
    import tifffile
    out = os.path.join(folder, "%s_%s.tif" % (name, dtype))
    if os.path.exists(out):
        return out
    src = tifffile.memmap(os.path.join(folder, name + ".tif"), mode="r")
    tmp = out + ".part"
    dst = tifffile.memmap(tmp, shape=src.shape, dtype=dtype)
    for r in range(0, src.shape[0], 1024):
        v = np.clip(np.rint(np.asarray(src[r:r + 1024], dtype=np.float32)), 0, 255)
        dst[r:r + 1024] = v.astype(dtype) * (257 if dtype == "uint16" else 1)
    dst.flush()
    del dst
    os.replace(tmp, out)
    return out


def run_big(args, data, work):
    """The 300 MP case: one accel command registers the pair and warps its RGB layer; the budget."""
    folder, gen = pair(args.big_size, data)
    t = args.big_threads
    tp, rgb = os.path.join(work, "T-big.txt"), os.path.join(work, "rgb-big.tif")
    if args.big_dtype == "float32":
        fixed, moving = os.path.join(folder, "fixed.tif"), os.path.join(folder, "moving.tif")
    else:
        fixed, moving = (integer_copy(folder, n, args.big_dtype) for n in ("fixed", "moving"))
    cmd = [args.cli] + accel_global(args, t) + [
        "register", "--fixed", fixed, "--moving", moving,
        "--out-transform", tp, "--warp", os.path.join(folder, "moving_rgb.tif"), rgb] + seed_args(args)
    shown = " ".join(cmd[1:]).replace(folder + os.sep, "PAIR/").replace(work + os.sep, "")
    res = {"size": args.big_size, "pair": folder, "generator": gen, "threads": t, "command": shown,
           "dtype": args.big_dtype}
    m = best_of(args.big_repeat, lambda k: cmd, os.path.join(work, "accel-big.log"), accel_env(), args.wait_quiet)
    res["accel"] = {"run": m}
    if m["rc"] != 0:
        res["accel"]["error"] = "accel register failed: " + m["tail"]
    else:
        res["accel"]["field"] = field_error_sparse(folder, tp, work, t)
        res["accel"]["within_budget"] = m["wall"] <= BUDGET_S and m["rss_mib"] <= BUDGET_GIB * 1024
    if os.path.exists(rgb):
        os.remove(rgb)
    if args.big_elastix and not args.skip_elastix:
        res["elastix"] = run_elastix(folder, t, work, 1, args.wait_quiet, sparse=True)
    log("bench: 300 MP: %s" % json.dumps(res["accel"].get("run")))
    return res


def tool_version(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def cell_time(res):
    if res is None:
        return "not run"
    if "error" in res:
        return "failed"
    return "%.2f" % res["run"]["wall"]


def cell_field(res):
    f = (res or {}).get("field")
    if not f:
        return "-"
    if "error" in f:
        return "failed"
    return "%.4f / %.4f / %.3f / %.2f%%" % (f["mean"], f["p95"], f["max"], 100 * f["over_half_px"])


def ratio(a, b, key):
    """elastix's figure over accel's, bold; '-' when either is missing."""
    try:
        x, y = a["run"][key], b["run"][key]
        if "error" in a or "error" in b or not y:
            return "-"
        return "**%.1fx**" % (x / y)
    except (TypeError, KeyError):
        return "-"


def table_rows(rows):
    md = ["| pair | threads | elastix s | accel s | speed-up | elastix peak MiB | accel peak MiB | memory ratio | "
          "field error elastix: mean / p95 / max px / share over 0.5 px | accel | MSE after: elastix | accel | "
          "warp: transformix gray s | accel RGB s | other load: before, during |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        e, a = r.get("elastix"), r.get("accel")
        peak = lambda x: "%.0f" % x["run"]["rss_mib"] if x and "error" not in x else "-"  # noqa: E731
        mse = lambda x: "%.3f" % x["mse"] if x and x.get("mse") is not None else "-"  # noqa: E731
        warp = lambda x: "%.2f" % x["warp"]["wall"] if x and "warp" in x and x["warp"]["rc"] == 0 else "-"  # noqa
        busy = " / ".join("%.0f%%, %.0f%%" % (100 * x["run"]["busy_before"], 100 * x["run"]["other_during"])
                          if x and "error" not in x else "-" for x in (e, a))
        md.append("| %d^2 | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["size"], r["threads"], cell_time(e), cell_time(a), ratio(e, a, "wall"), peak(e), peak(a),
            ratio(e, a, "rss_mib"), cell_field(e), cell_field(a), mse(e), mse(a), warp(e), warp(a), busy))
    return md


def markdown(args, info, rows, pairs, big, notes):
    md = ["# B-spline registration: libaccel vs elastix 5.0.1", ""]
    md += ["- %s: %s" % (k, v) for k, v in info.items()]
    md += ["- times: wall seconds of the registration (best of %d), transform and warped image written; peak = the "
           "process's max RSS; speed-up and memory ratio = elastix / accel" % args.repeat,
           "- other load (elastix / accel): how busy the CPUs were in the 2 s before the registration (each run "
           "waits up to %g s for less than 15 %%), and with other work than the run during it (the machine's busy "
           "share less the run's own CPU time; the fastest run's figures)" % args.wait_quiet,
           "- accuracy over the interior (border %d px): |u - u_truth| from transformix -def all of each tool's "
           "transform file (the share over 0.5 px counts local misregistrations that the mean and p95 hide: "
           "regions locked one weave period off, borders the moving image does not cover); MSE after = the "
           "tool's warped moving image against the fixed image" % BORDER, ""]
    md += ["| pair | generator (../shared/tools/) | truth max |u| px | interior MSE before |",
           "| --- | --- | ---: | ---: |"]
    md += ["| %d^2 | `%s` | %s | %s |" % (p["size"], p["generator"], p["max_u"], "%.2f" % p["mse_before"])
           for p in pairs]
    md += [""] + table_rows(rows)
    if big:
        a = big["accel"]
        md += ["", "## %d^2 (%.0f MP): register and warp the RGB layer end to end" % (big["size"], big["size"] ** 2 / 1e6),
               "", "- command: `accel %s`" % big["command"], "- PAIR: `%s`" % big["generator"]]
        if big.get("dtype", "float32") != "float32":
            md.append("- the gray pair as %s TIFFs (--big-dtype): the generator's float32 images rounded and clipped to "
                      "0..255%s" % (big["dtype"], ", times 257" if big["dtype"] == "uint16" else ""))
        if "error" in a:
            md.append("- accel: %s" % a["error"])
        else:
            f = a.get("field", {})
            walls = a["run"].get("walls", [])
            runs = " (best of %d: %s s)" % (len(walls), ", ".join("%.2f" % w for w in walls)) if len(walls) > 1 else ""
            md.append("- accel: %.2f s wall%s, %.2f GiB peak, %.1f s CPU; budget %g s and %g GiB on %d cores: **%s**" % (
                a["run"]["wall"], runs, a["run"]["rss_mib"] / 1024, a["run"]["cpu"], BUDGET_S, BUDGET_GIB,
                big["threads"], "within" if a["within_budget"] else "OVER"))
            if "mean" in f:
                md.append("- accel field error (%s of the interior, %d points): mean %.4f p95 %.4f max %.3f px, "
                          "%.2f%% of the points over 0.5 px" % (f["sampling"], f["points"], f["mean"], f["p95"],
                                                                f["max"], 100 * f["over_half_px"]))
        e = big.get("elastix")
        if e and "error" not in e:
            md.append("- elastix: %.1f s wall, %.2f GiB peak, field error mean %s" % (
                e["run"]["wall"], e["run"]["rss_mib"] / 1024, cell_field(e)))
        else:
            md.append("- elastix: not run at this size (--big-elastix runs it); the issue's figures at 8192^2: "
                      "44-66 s on 2 threads, 3.7 GiB")
    if notes:
        md += ["", "## Notes", ""] + ["- " + n for n in notes]
    return md


def parse_threads(spec, cores):
    out = []
    for t in spec.split(","):
        n = cores if t.strip() == "all" else int(t)
        if n not in out:
            out.append(n)
    return out


def pair_info(n, folder, gen):
    """The pair's facts for the report: its generator command, max |u| and the interior MSE before."""
    with open(os.path.join(folder, "meta.txt")) as f:
        m = re.search(r"truth_total max \|u\| ([\d.]+) px", f.read())
    return {"size": n, "folder": folder, "generator": gen, "max_u": m.group(1) if m else "?",
            "mse_before": interior_mse(folder, os.path.join(folder, "moving.tif"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", default="1024,4096,8192", help="comma list of N (pairs N x N); '' for none")
    ap.add_argument("--threads", default="1,all", help="comma list of thread counts ('all' = every core)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row, the fastest kept")
    ap.add_argument("--skip-elastix", action="store_true")
    ap.add_argument("--skip-accel", action="store_true")
    ap.add_argument("--big", action="store_true", help="also the 300 MP case (register + RGB warp, accel)")
    ap.add_argument("--big-size", type=int, default=BIG)
    ap.add_argument("--big-threads", type=int, default=2)
    ap.add_argument("--big-elastix", action="store_true", help="run elastix on the 300 MP pair too (minutes)")
    ap.add_argument("--big-dtype", default="float32", choices=["float32", "uint8", "uint16"],
                    help="the 300 MP gray pair as generated (float32) or as integer TIFFs made from it (as scans are)")
    ap.add_argument("--big-repeat", type=int, default=1,
                    help="runs of the 300 MP command, the fastest kept (its spread from run to run is seconds)")
    ap.add_argument("--data", default=os.environ.get("ACCEL_BENCH_DATA"),
                    help="where generated pairs are cached (default $ACCEL_BENCH_DATA, else <build>/bench-reg-data)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true", help="1024^2 only, all cores only")
    ap.add_argument("--seed", type=int, default=None, help="accel register --seed S (default: the tool's, 1)")
    ap.add_argument("--keep", action="store_true", help="keep the runs' files (DATA/runs)")
    ap.add_argument("--wait-quiet", type=float, default=60.0,
                    help="before each timed run, wait up to this many seconds for the CPUs to idle (0: never)")
    args = ap.parse_args()
    ensure_venv(args.build, "bench-reg-venv", "requirements-reg.txt")
    return run_all(args)


def run_all(args):
    """Every pair and thread count, both tools; then the 300 MP case; then the report."""
    cores = os.cpu_count() or 1
    started, start_load = datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), os.getloadavg()[0]
    data = os.path.abspath(args.data or os.path.join(ROOT, args.build, "bench-reg-data"))
    args.cli = os.path.join(ROOT, args.build, "tools", "accel", "accel")
    sizes = [1024] if args.quick else [int(x) for x in args.sizes.split(",") if x.strip()]
    threads = [cores] if args.quick else parse_threads(args.threads, cores)
    notes = []
    elastix_ok = not args.skip_elastix and all(shutil.which(t) for t in ("elastix", "transformix"))
    if not args.skip_elastix and not elastix_ok:
        notes.append("elastix not run: elastix/transformix not installed (apt-get install elastix)")
    accel_why = "--skip-accel" if args.skip_accel else None
    if accel_why is None and not os.access(args.cli, os.X_OK):
        accel_why = "%s is not built" % args.cli
    if accel_why is None and not shutil.which("transformix"):
        notes.append("accel's accuracy not measured: transformix is not installed")
    rows, pairs = [], []
    for n in sizes:
        folder, gen = pair(n, data)
        pairs.append(pair_info(n, folder, gen))
        work = os.path.join(data, "runs", os.path.basename(folder))
        os.makedirs(work, exist_ok=True)
        for t in threads:
            row = {"size": n, "threads": t, "pair": folder}
            if elastix_ok:
                log("bench: elastix %d^2, %d thread(s)" % (n, t))
                row["elastix"] = run_elastix(folder, t, work, args.repeat, args.wait_quiet)
            gpu_skip = args.backend == "cuda" and t != threads[-1]  # the GPU: one row, with every core
            if accel_why is None and not gpu_skip:
                log("bench: accel %d^2, %d thread(s)" % (n, t))
                row["accel"] = run_accel(args, folder, t, work, args.repeat)
                if "not implemented" in row["accel"].get("error", ""):
                    accel_why = "accel register is not implemented in this build"
            log("bench: %s" % " ".join(table_rows([row])[-1:]))
            rows.append(row)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if accel_why:
        notes.append("accel not run (or stopped): %s" % accel_why)
    big = None
    if args.big and accel_why is None:
        work = os.path.join(data, "runs", "big")
        os.makedirs(work, exist_ok=True)
        big = run_big(args, data, work)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    elif args.big:
        notes.append("the 300 MP case not run: %s" % accel_why)
    for r in rows:
        for tool in ("elastix", "accel"):
            if r.get(tool, {}).get("error"):
                notes.append("%s %d^2 %d thread(s): %s" % (tool, r["size"], r["threads"], r[tool]["error"][-300:]))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    info = {"date": started, "machine": "%s, %d cores, load average %.2f at the start" % (cpu_name(), cores, start_load),
            "backend": args.backend,
            "libaccel": "%s, commit %s%s" % (tool_version([args.cli, "--version"]), commit.stdout.strip() or "?",
                                             " (with local changes)" if dirty else ""),
            "elastix": "%s (Debian), parameters ../shared/tools/elastix_bspline_params.txt" % tool_version(
                ["elastix", "--version"]).replace("elastix version: ", ""),
            "command": "bench/reg_bench.py %s" % " ".join(sys.argv[1:])}
    md = markdown(args, info, rows, pairs, big, notes)
    date = datetime.date.today().isoformat()
    out_md = os.path.join(args.out, "reg-%s-%s.md" % (args.backend, date))
    os.makedirs(args.out, exist_ok=True)
    with open(out_md, "w") as f:
        f.write("\n".join(md) + "\n")
    with open(out_md[:-3] + ".json", "w") as f:
        json.dump({"info": info, "pairs": pairs, "rows": rows, "big": big, "notes": notes}, f, indent=1)
    print("\n".join(md))
    log("bench: wrote %s and .json" % out_md)
    failed = [r for r in rows for tool in ("elastix", "accel") if r.get(tool, {}).get("error")]
    return 1 if failed or (big and "error" in big["accel"]) else 0


if __name__ == "__main__":
    sys.exit(main())
