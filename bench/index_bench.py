#!/usr/bin/env python3
"""Hamming similarity search: libaccel's self-join against faiss-cpu and a
numpy brute force, side by side on the same codes, one run.

    python3 bench/index_bench.py [--build build] [--sizes 10000,100000,1000000]
                                 [--radii 0-10] [--backend cpu|cuda] [--quick]

Installs the peers at pinned versions (bench/requirements-index.txt) into a
virtual environment (build/bench-index-venv). For every N, r and data set
(random 64-bit codes; clustered: near-duplicate groups of 1 to 8 codes a few
bits apart, a fifth of them exact copies) it finds every pair within r
(inclusive) and times, including building each index:

  * libaccel: accel.Index + self_join (the algorithm chosen automatically);
  * faiss IndexBinaryFlat: range_search of every code against all (radius
    r + 1: faiss's range search is strict, d < radius);
  * faiss IndexBinaryMultiHash: the same with the fastest exact setting
    (nhash substrings searched within nflip bits, nhash * (nflip + 1) > r),
    picked per r on 200 of the queries;
  * numpy: blocked XOR + np.bitwise_count over the upper triangle, one
    thread (its cost does not depend on r: measured once per N and data set
    at the largest r).

Runs that would take longer than --budget seconds are measured on a sample of
the queries (every code still searched against all) and extrapolated
linearly; such cells are marked "est.". Every full run's pair set is checked
against libaccel's (and sampled runs' neighbour counts).

Results: a Markdown table on stdout and bench/results/index-<backend>-<date>.{md,json}.

    python3 bench/index_bench.py --scale 1000000,3000000,10000000 [--scale-r 4]
                                 [--scale-threads 1,2] [--scale-data random,clustered]

times the self-join at scale instead (no peers, no Python in the loop):
bench/index_scale.c is compiled against the build and run per N, data set
(random; clustered: groups of ten codes, each its group's centre with 0 to 6
bits flipped) and thread count; each run checks 100 sampled entries (20 from
50 million codes on) against a brute-force scan of every code. Results:
bench/results/index-scale-cpu-<date>.{md,json}, with the load average before
and after each run (the machine may be shared). Clustered sets above 10
million codes are skipped (their pair sets alone need about 10 GB), and from
50 million codes on only the last thread count runs.

    python3 bench/index_bench.py --knn 1000000,10000000 [--knn-queries 10000] [--knn-k 10]
                                 [--backend cpu|cuda]

times k-nearest search instead: the first Q of N random 64-bit codes as
queries against all N, libaccel (accel.Index.knn, exact; ties by id)
beside faiss IndexBinaryFlat.search (exact, all cores), both including the
index build; the distances of every query's k nearest must be equal (faiss
orders ties its own way, so ids are compared only where a distance is not
tied). The full self-kNN's time is extrapolated from the Q queries.
Results: bench/results/index-knn-<backend>-<date>.{md,json}.

--algorithm brute_force|multi_index picks the self-join's algorithm (default
auto; a GPU context runs brute force only, so --backend cuda --algorithm
brute_force times the GPU's join where auto would hand it to the CPU).
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


# ---------------------------------------------------------------- data

def codes_random(n, seed):
    import numpy as np
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)


def codes_clustered(n, seed):
    """Groups of 1..8 codes (geometric sizes): each member its group's centre
    with 0..6 random bits flipped, or (one in five) an exact copy of a member."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = np.empty(n, dtype=np.uint64)
    i = 0
    while i < n:
        size = min(int(rng.geometric(0.45)), 8, n - i)
        centre = rng.integers(0, 2**64, dtype=np.uint64)
        for k in range(size):
            if k and rng.random() < 0.2:
                out[i + k] = out[i + int(rng.integers(0, k))]
                continue
            c = int(centre)
            for b in rng.choice(64, size=int(rng.integers(0, 7)), replace=False):
                c ^= 1 << int(b)
            out[i + k] = c
        i += size
    perm = rng.permutation(n)
    return out[perm]


# ---------------------------------------------------------------- runners

def pair_keys(first, second, n):
    import numpy as np
    a = np.minimum(first, second).astype(np.uint64)
    b = np.maximum(first, second).astype(np.uint64)
    return np.sort(a * np.uint64(n) + b)


def run_libaccel(accel, ctx, codes, r, algorithm="auto"):
    """Build + self-join; ids are positions. Returns (seconds, sorted pair keys)."""
    import numpy as np
    t = time.perf_counter()
    ix = accel.Index(ctx)
    ix.add(np.arange(len(codes), dtype=np.uint64), codes)
    first, second, _ = ix.self_join(r, algorithm=algorithm)
    dt = time.perf_counter() - t
    ix.close()
    return dt, first * np.uint64(len(codes)) + second  # already sorted by (first, second)


def faiss_bytes(codes):
    import numpy as np
    return np.ascontiguousarray(codes).view(np.uint8).reshape(len(codes), 8)


def faiss_pairs(lims, I, q0, n):
    """(query, neighbour) of a range search over queries q0.. -> keys of pairs i < j."""
    import numpy as np
    q = np.repeat(np.arange(q0, q0 + len(lims) - 1, dtype=np.int64), np.diff(lims).astype(np.int64))
    keep = I > q
    return np.sort(q[keep].astype(np.uint64) * np.uint64(n) + I[keep].astype(np.uint64))


def neighbour_count(keys, n, q1):
    """How many neighbours queries 0..q1-1 have among the pairs (both ends)."""
    import numpy as np
    a, b = keys // np.uint64(n), keys % np.uint64(n)
    return int(np.count_nonzero(a < q1) + np.count_nonzero(b < q1))


def run_faiss_flat(faiss, codes, r, queries):
    """(seconds to build, seconds to search `queries` codes, lims, I)."""
    xb = faiss_bytes(codes)
    t = time.perf_counter()
    ix = faiss.IndexBinaryFlat(64)
    ix.add(xb)
    t_add = time.perf_counter() - t
    t = time.perf_counter()
    lims, _, I = ix.range_search(xb[:queries], r + 1)
    return t_add, time.perf_counter() - t, lims, I


def multihash_settings(r):
    """Exact (nhash, b, nflip): a code within r differs in at most r bits, so
    some substring of nhash differs in at most r // nhash <= nflip bits."""
    out = []
    for nhash in sorted({r + 1, 2, 3, 4, 6, 8}):
        if nhash > 64 or nhash < 1:
            continue
        b = 64 // nhash
        nflip = r // nhash
        if b < 1 or nflip > 3 or b > 32 and nflip > 1:
            continue
        out.append((nhash, b, nflip))
    return out


def run_faiss_multihash(faiss, codes, r, queries, setting):
    nhash, b, nflip = setting
    xb = faiss_bytes(codes)
    t = time.perf_counter()
    ix = faiss.IndexBinaryMultiHash(64, nhash, b)
    ix.nflip = nflip
    ix.add(xb)
    t_add = time.perf_counter() - t
    t = time.perf_counter()
    lims, _, I = ix.range_search(xb[:queries], r + 1)
    return t_add, time.perf_counter() - t, lims, I


def run_numpy(codes, r, rows):
    """Upper triangle over the first `rows` rows, blocks of 1024 x 8192."""
    import numpy as np
    n = len(codes)
    t = time.perf_counter()
    keys = []
    for i0 in range(0, rows, 1024):
        i1 = min(i0 + 1024, rows)
        a = codes[i0:i1, None]
        for j0 in range(i0, n, 8192):
            j1 = min(j0 + 8192, n)
            d = np.bitwise_count(a ^ codes[None, j0:j1])
            ii, jj = np.nonzero(d <= r)
            ii += i0
            jj += j0
            keep = jj > ii
            keys.append(ii[keep].astype(np.uint64) * np.uint64(n) + jj[keep].astype(np.uint64))
    dt = time.perf_counter() - t
    return dt, np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.uint64)


def sampled_agrees(lims, I, q, keys, n):
    """A range search of queries 0..q-1 against all agrees with libaccel's
    pairs: the same pair set when q = n, else the same neighbour count."""
    import numpy as np
    if q == n:
        return bool(np.array_equal(faiss_pairs(lims, I, 0, n), keys))
    own = np.arange(q).repeat(np.diff(lims).astype(np.int64))
    return int(np.count_nonzero(I != own)) == neighbour_count(keys, n, q)


def triangle_share(rows, n):
    """Share of the upper triangle's pairs in the first `rows` rows."""
    return (rows * n - rows * (rows + 1) / 2) / (n * (n - 1) / 2)


def quickest(fn, *args):
    """fn(*args) -> (seconds, ...): runs taking under 2 s are repeated (best of 3)."""
    out = fn(*args)
    for _ in range(2):
        if out[0] >= 2.0:
            break
        again = fn(*args)
        if again[0] < out[0]:
            out = again
    return out


def faiss_total(fn):
    """Adapt a faiss runner to return (build + search seconds, lims, I)."""
    def run(*args):
        t_add, t_q, lims, I = fn(*args)
        return t_add + t_q, t_add, t_q, lims, I
    return run


# ---------------------------------------------------------------- main

def fmt_t(t, est=False):
    if t is None:
        return "-"
    s = "%.3f" % t if t < 10 else "%.1f" % t
    return s + (" est." if est else "")


def measure_row(args, accel, ctx, faiss, np, codes, n, data, r, rows, np_keys, np_time, np_est):
    """One (N, data, r) row: libaccel, faiss flat and multihash, numpy's sampled agreement."""
    row = {"n": n, "data": data, "r": r}
    t_lib, keys = quickest(run_libaccel, accel, ctx, codes, r, args.algorithm)
    row["libaccel"] = t_lib
    row["pairs"] = int(len(keys))
    # numpy agreement on its (sampled) rows
    sub = np_keys[np.bitwise_count(
        (codes[(np_keys // np.uint64(n)).astype(np.int64)] ^
         codes[(np_keys % np.uint64(n)).astype(np.int64)])) <= r] if len(np_keys) else np_keys
    lib_rows = keys[(keys // np.uint64(n)) < np.uint64(rows)]
    row["numpy"], row["numpy_est"] = np_time, np_est
    row["numpy_agrees"] = bool(np.array_equal(sub, lib_rows))
    # faiss flat: 1% of the queries first; all of them if that fits the budget
    q = max(1, n // 100)
    t_add, t_q, lims, I = run_faiss_flat(faiss, codes, r, q)
    est = t_add + t_q * n / q
    if est <= args.budget and q < n:
        est, t_add, t_q, lims, I = quickest(faiss_total(run_faiss_flat), faiss, codes, r, n)
        q = n
    row["flat"], row["flat_est"] = est, q < n
    row["flat_agrees"] = sampled_agrees(lims, I, q, keys, n)
    # faiss multihash: every exact setting on 200 queries, the fastest on 1% of them,
    # then on all if that fits the budget
    trials = []
    for setting in multihash_settings(r):
        qs = min(n, 200)
        t_add, t_q, lims, I = run_faiss_multihash(faiss, codes, r, qs, setting)
        trials.append((t_add + t_q * n / qs, setting))
    e, setting = min(trials)
    qs = max(1, n // 100)
    t_add, t_q, lims, I = run_faiss_multihash(faiss, codes, r, qs, setting)
    e = t_add + t_q * n / qs
    if e <= args.budget and qs < n:
        e, t_add, t_q, lims, I = quickest(faiss_total(run_faiss_multihash), faiss, codes, r, n, setting)
        qs = n
    row["multihash"], row["multihash_est"] = e, qs < n
    row["multihash_setting"] = "nhash=%d b=%d nflip=%d" % setting
    row["multihash_agrees"] = sampled_agrees(lims, I, qs, keys, n)
    peers = [row["flat"], row["multihash"]]
    row["ratio_faiss_best"] = min(peers) / t_lib
    row["ratio_numpy"] = np_time / t_lib
    return row


def measure_targets(args, accel, ctx, faiss, np, results):
    """The acceptance targets: 87,500 codes r = 5 under 1 s; 1,000,000 codes r <= 4 under 30 s."""
    targets = []
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    for data, make in (("random", codes_random), ("clustered", codes_clustered)):
        codes = make(87500, 87500)
        t_lib, keys = quickest(run_libaccel, accel, ctx, codes, 5)
        best = None
        for setting in multihash_settings(5):
            t, _, _, lims, I = quickest(faiss_total(run_faiss_multihash), faiss, codes, 5, 87500, setting)
            if best is None or t < best[0]:
                best = (t, setting, faiss_pairs(lims, I, 0, 87500))
        t_flat, _, _, lims, I = quickest(faiss_total(run_faiss_flat), faiss, codes, 5, 87500)
        agree = bool(np.array_equal(best[2], keys)) and bool(np.array_equal(faiss_pairs(lims, I, 0, 87500), keys))
        targets.append({"case": "87,500 codes, r = 5, %s" % data, "libaccel": t_lib, "limit": 1.0,
                        "faiss_best": min(best[0], t_flat), "pairs": int(len(keys)), "agrees": agree})
        log("target 87500 %s: %.3fs (faiss best %.3fs)" % (data, t_lib, min(best[0], t_flat)))
    for row in results:
        if row["n"] == 1000000 and row["r"] <= 4:
            targets.append({"case": "1,000,000 codes, r = %d, %s" % (row["r"], row["data"]),
                            "libaccel": row["libaccel"], "limit": 30.0,
                            "faiss_best": min(row["flat"], row["multihash"]), "pairs": row["pairs"],
                            "agrees": row["flat_agrees"] and row["multihash_agrees"]})
    return targets


def markdown(info, results, targets, sizes):
    """The report: the run's facts, the targets, one table per (N, data)."""
    md = ["# Hamming self-join: libaccel vs faiss-cpu and numpy", ""]
    md += ["- %s: %s" % (k, v) for k, v in info.items()]
    md += ["- times: seconds to build the index and find every pair within r (inclusive); runs under 2 s",
           "  are the best of 3;",
           "  faiss with radius r + 1 (its range search is strict); \"est.\" = measured on 1% of the",
           "  queries (or rows) and extrapolated; ratio = the faster faiss index's time / libaccel's",
           "- agreement: every full run's pair set equals libaccel's (sampled runs: neighbour counts)", ""]
    if targets:
        md += ["## Targets", "", "| case | libaccel s | limit | faiss best s | ratio | pairs | same pairs |",
               "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for t in targets:
            md.append("| %s | %.3f | %s | %s | **%.0fx** | %d | %s |" % (
                t["case"], t["libaccel"], "%.0f s %s" % (t["limit"], "ok" if t["libaccel"] < t["limit"] else "MISSED"),
                fmt_t(t["faiss_best"]), t["faiss_best"] / t["libaccel"], t["pairs"], "yes" if t["agrees"] else "NO"))
        md.append("")
    for n in sizes:
        for data in ("random", "clustered"):
            rows = [r for r in results if r["n"] == n and r["data"] == data]
            if not rows:
                continue
            md += ["## N = %d, %s codes" % (n, data), "",
                   "| r | pairs | libaccel s | faiss flat s | faiss multihash s (setting) | numpy s | "
                   "vs faiss best | vs numpy | same pairs |",
                   "| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
            for r in rows:
                md.append("| %d | %d | %s | %s | %s (%s) | %s | **%.0fx** | %.0fx | %s |" % (
                    r["r"], r["pairs"], fmt_t(r["libaccel"]), fmt_t(r["flat"], r["flat_est"]),
                    fmt_t(r["multihash"], r["multihash_est"]), r["multihash_setting"],
                    fmt_t(r["numpy"], r["numpy_est"]), r["ratio_faiss_best"], r["ratio_numpy"],
                    "yes" if r["numpy_agrees"] and r["flat_agrees"] and r["multihash_agrees"] else "NO"))
            md.append("")
    return "\n".join(md)


def scale_runs(args):
    """--scale: the C driver per N, data set and thread count; returns rows."""
    import subprocess
    build = os.path.join(ROOT, args.build)
    exe = os.path.join(build, "index_scale")
    subprocess.run(["cc", "-O2", "-std=c11", os.path.join(HERE, "index_scale.c"), "-I", os.path.join(ROOT, "include"),
                    "-L", build, "-laccel", "-o", exe], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=build)
    rows = []
    for n in [int(x) for x in args.scale.split(",")]:
        for data in args.scale_data.split(","):
            if data == "clustered" and n > 10_000_000:
                continue  # 160 million pairs and more: about 10 GB for the pair set alone
            for threads in args.scale_threads.split(","):
                if n >= 50_000_000 and threads != args.scale_threads.split(",")[-1]:
                    continue  # the largest sets with the last thread count only
                before = os.getloadavg()[0]
                out = subprocess.run([exe, str(n), str(args.scale_r), threads, data, "100" if n < 50_000_000 else "20"],
                                     env=env, capture_output=True, text=True)
                if out.returncode not in (0, 1) or not out.stdout.strip():
                    raise SystemExit("index_scale failed: " + out.stderr)
                row = json.loads(out.stdout)
                row["load_before"], row["load_after"] = before, os.getloadavg()[0]
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def scale_markdown(info, rows):
    lines = ["# Hamming self-join at scale: libaccel, r = %d" % rows[0]["r"] if rows else "# (no runs)", ""]
    lines += ["- %s: %s" % (k, v) for k, v in info.items()]
    lines += ["- times: seconds; add = accel_index_add, join = accel_index_self_join (bucket tables included);",
              "  sampled = entries whose pairs were compared with a brute-force scan of every code",
              "- load: the 1-minute load average before and after the run (2 cores, shared)", "",
              "| N | data | threads | add s | join s | total s | pairs | sampled equal | load |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append("| {:,} | {} | {} | {:.3f} | {:.3f} | **{:.3f}** | {:,} | {} of {} | {:.1f} .. {:.1f} |".format(
            r["n"], r["data"], r["threads"], r["add_s"], r["join_s"], r["total_s"], r["pairs"],
            "all" if r["sampled_equal"] else "NOT", r["sampled"], r["load_before"], r["load_after"]))
    return "\n".join(lines)


def main_scale(args):
    rows = scale_runs(args)
    info = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": "%s, %d cores" % (cpu_name(), os.cpu_count()),
            "command": "bench/index_bench.py " + " ".join(sys.argv[1:])}
    text = scale_markdown(info, rows)
    print(text)
    out = os.path.join(HERE, "results", "index-scale-cpu-%s" % datetime.date.today().isoformat())
    with open(out + ".md", "w") as f:
        f.write(text + "\n")
    with open(out + ".json", "w") as f:
        json.dump({"info": info, "results": rows}, f, indent=1)
    return 0 if all(r["sampled_equal"] for r in rows) else 1


def knn_run(args, accel, ctx, faiss, np, n):
    """One --knn row: Q queries against N random codes, libaccel and faiss."""
    codes = codes_random(n, 2000 + n)
    q, k = min(args.knn_queries, n), args.knn_k
    t = time.perf_counter()
    ix = accel.Index(ctx)
    ix.add(np.arange(n, dtype=np.uint64), codes)
    t_add = time.perf_counter() - t
    t = time.perf_counter()
    ids, dist = ix.knn(codes[:q], k)
    t_lib = time.perf_counter() - t
    ix.close()
    xb = faiss_bytes(codes)
    t = time.perf_counter()
    fx = faiss.IndexBinaryFlat(64)
    fx.add(xb)
    t_fadd = time.perf_counter() - t
    t = time.perf_counter()
    fd, fi = fx.search(xb[:q], k)
    t_faiss = time.perf_counter() - t
    fd = fd.astype(np.int64)
    dist = np.asarray(dist).astype(np.int64)
    ids = np.asarray(ids).astype(np.int64)
    untied = np.ones_like(fd, dtype=bool)  # a distance seen once in the row (and not the last: more may tie it)
    for c in range(k):
        same = (fd == fd[:, [c]]).sum(axis=1) > 1
        untied[:, c] = ~same & (fd[:, c] < fd[:, -1])
    agrees = bool(np.array_equal(dist, fd) and np.array_equal(ids[untied], fi[untied]))
    return {"n": n, "queries": q, "k": k, "libaccel_add": t_add, "libaccel_knn": t_lib, "faiss_add": t_fadd,
            "faiss_knn": t_faiss, "libaccel_full_est": t_add + t_lib * n / q, "faiss_full_est": t_fadd + t_faiss * n / q,
            "ratio": (t_fadd + t_faiss * n / q) / (t_add + t_lib * n / q), "agrees": agrees}


def load_modules(args):
    """numpy, faiss (from the bench's virtual environment) and the build's accel."""
    ensure_venv(args.build, "bench-index-venv", "requirements-index.txt")
    import numpy as np
    import faiss
    os.environ.setdefault("ACCEL_LIBRARY", os.path.join(ROOT, args.build, "libaccel.so.0"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import accel
    return np, faiss, accel


def main_knn(args):
    np, faiss, accel = load_modules(args)
    ctx = accel.Context(backend=args.backend, strict=args.backend == "cuda")
    rows = []
    for n in [int(x) for x in args.knn.split(",")]:
        rows.append(knn_run(args, accel, ctx, faiss, np, n))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    info = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": "%s, %d cores" % (cpu_name(), os.cpu_count()), "backend": args.backend,
            "libaccel": accel.version(), "build": accel.build_info(),
            "peers": "faiss-cpu %s (%d OpenMP threads)" % (faiss.__version__, faiss.omp_get_max_threads()),
            "command": "bench/index_bench.py " + " ".join(sys.argv[1:])}
    lines = ["# Hamming k-nearest: libaccel (%s) and faiss IndexBinaryFlat" % args.backend, ""]
    lines += ["- %s: %s" % (key, v) for key, v in info.items()]
    lines += ["- seconds; Q queries (the first Q codes) against all N; full = the self-kNN of all N codes,",
              "  extrapolated from the Q queries (build included); equal = the same k distances per query",
              "  and the same ids where a distance is not tied", "",
              "| N | Q | k | libaccel add s | libaccel knn s | faiss add s | faiss knn s | full libaccel s (est.) "
              "| full faiss s (est.) | faiss / libaccel | equal |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append("| {:,} | {:,} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.1f} | **{:.1f}x** | {} |".format(
            r["n"], r["queries"], r["k"], r["libaccel_add"], r["libaccel_knn"], r["faiss_add"], r["faiss_knn"],
            r["libaccel_full_est"], r["faiss_full_est"], r["ratio"], "yes" if r["agrees"] else "NO"))
    text = "\n".join(lines)
    print(text)
    out = os.path.join(HERE, "results", "index-knn-%s-%s" % (args.backend, datetime.date.today().isoformat()))
    with open(out + ".md", "w") as f:
        f.write(text + "\n")
    with open(out + ".json", "w") as f:
        json.dump({"info": info, "results": rows}, f, indent=1)
    return 0 if all(r["agrees"] for r in rows) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--radii", default="0-10")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds a peer's full run may take")
    ap.add_argument("--quick", action="store_true", help="N = 10000 only, r = 0, 5, 10")
    ap.add_argument("--scale", help="sizes for the C driver at scale (no peers), e.g. 1000000,10000000")
    ap.add_argument("--scale-r", type=int, default=4)
    ap.add_argument("--scale-threads", default="1,2")
    ap.add_argument("--scale-data", default="random,clustered")
    ap.add_argument("--algorithm", default="auto", choices=["auto", "brute_force", "multi_index"])
    ap.add_argument("--knn", help="sizes for k-nearest instead of the self-join, e.g. 1000000,10000000")
    ap.add_argument("--knn-queries", type=int, default=10000)
    ap.add_argument("--knn-k", type=int, default=10)
    args = ap.parse_args()
    if args.scale:
        return main_scale(args)
    if args.knn:
        return main_knn(args)
    np, faiss, accel = load_modules(args)

    sizes = [int(x) for x in args.sizes.split(",")]
    lo, _, hi = args.radii.partition("-")
    radii = list(range(int(lo), int(hi or lo) + 1))
    if args.quick:
        sizes, radii = [10000], [0, 5, 10]
    ctx = accel.Context(backend=args.backend, strict=args.backend == "cuda")  # a GPU row never times the CPU
    threads = faiss.omp_get_max_threads()
    results = []
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    for n in sizes:
        for data, make in (("random", codes_random), ("clustered", codes_clustered)):
            codes = make(n, 1000 + n)
            # numpy: once per data set, at the largest r (its cost does not depend on r)
            est_pairs = n * (n - 1) / 2 / 1.5e8  # ~1.5e8 pairs/s: seconds for the whole triangle
            rows = n if est_pairs <= args.budget else max(1024, int(n * args.budget / est_pairs / 4) // 1024 * 1024)
            t_np, np_keys = run_numpy(codes, max(radii), min(rows, n))
            np_share = triangle_share(min(rows, n), n)
            np_time, np_est = t_np / np_share, rows < n
            log("n=%d %s numpy %.2fs%s" % (n, data, np_time, " est" if np_est else ""))
            for r in radii:
                row = measure_row(args, accel, ctx, faiss, np, codes, n, data, r, rows, np_keys, np_time, np_est)
                results.append(row)
                log("n=%d %s r=%d: libaccel %.3fs, flat %s, multihash %s (%s), pairs %d, agree %s/%s/%s" % (
                    n, data, r, row["libaccel"], fmt_t(row["flat"], row["flat_est"]),
                    fmt_t(row["multihash"], row["multihash_est"]), row["multihash_setting"], row["pairs"],
                    row["numpy_agrees"], row["flat_agrees"], row["multihash_agrees"]))

    targets = [] if args.quick else measure_targets(args, accel, ctx, faiss, np, results)

    info = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": "%s, %d cores" % (cpu_name(), os.cpu_count()),
        "backend": args.backend,
        "libaccel": accel.version(),
        "build": accel.build_info(),
        "peers": "faiss-cpu %s (%d OpenMP threads), numpy %s (one thread)" % (faiss.__version__, threads,
                                                                             np.__version__),
        "command": "bench/index_bench.py " + " ".join(sys.argv[1:]),
    }
    text = markdown(info, results, targets, sizes)
    print(text)
    if not args.quick:
        out = os.path.join(HERE, "results", "index-%s-%s" % (args.backend, datetime.date.today().isoformat()))
        with open(out + ".md", "w") as f:
            f.write(text + "\n")
        with open(out + ".json", "w") as f:
            json.dump({"info": info, "results": results, "targets": targets}, f, indent=1)
        print("bench: wrote %s.md and .json" % out, file=sys.stderr)
    ok = all(r["numpy_agrees"] and r["flat_agrees"] and r["multihash_agrees"] for r in results)
    ok = ok and all(t["agrees"] for t in targets)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
