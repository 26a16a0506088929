#!/usr/bin/env python3
"""Run the peers' own test files against libaccel (the adapters).

    run.py [--work DIR] [--list] [SUITE ...]

Suites (default: all):
  imagehash          imagehash's tests of the installed release (from its
                     source distribution, fetched with pip into DIR)
  scipy              SciPy's test_morphology.py: distance_transform_edt and
                     binary_fill_holes
  skimage-watershed  scikit-image's segmentation/tests/test_watershed.py
  skimage-peak       scikit-image's feature/tests/test_peak.py

Each suite runs under pytest with ``peer_plugin`` (the adapters in place of
the peer's functions). A test the library cannot pass must be listed in
docs/peer-tests.md ("Known failures", a test pattern and the reason);
the run fails on any other failure, and on a listed test that now passes
(the list must be kept true). Exit 0, 1, or 77 when nothing could run (a
peer or pytest is missing). --list prints every failure with the peer's
message, to write the list from.
"""
import argparse
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DOCS = os.path.join(ROOT, "docs", "peer-tests.md")


def _installed(module, rel):
    m = importlib.import_module(module)
    return os.path.join(os.path.dirname(m.__file__), rel)


def _imagehash_tests(work):
    """imagehash's tests folder of the installed release, from its sdist,
    with the helper module the sdist leaves out (imagehash_utils.py)."""
    import imagehash
    version = imagehash.__version__
    dest = os.path.join(work, "imagehash-%s" % version)
    tests = os.path.join(dest, "tests")
    if not os.path.isdir(tests):
        dl = tempfile.mkdtemp(dir=work)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                            "--dest", dl, "ImageHash==%s" % version], capture_output=True, text=True)
        archives = [f for f in os.listdir(dl) if f.endswith((".tar.gz", ".zip"))] if r.returncode == 0 else []
        if not archives:
            raise RuntimeError("cannot fetch imagehash %s's source distribution: %s" % (version, r.stderr.strip()[-200:]))
        shutil.unpack_archive(os.path.join(dl, archives[0]), dl)
        src = [os.path.join(dl, d) for d in os.listdir(dl) if os.path.isdir(os.path.join(dl, d, "tests"))]
        if not src:
            raise RuntimeError("imagehash %s's source distribution has no tests folder" % version)
        shutil.copytree(src[0], dest)  # the tests, and the README one of them runs
        shutil.rmtree(dl)
    # the distribution leaves out the photo most of its tests hash; ../shared's corpus has it
    peppers = os.path.join(ROOT, "..", "shared", "data", "hash", "images", "peppers.png")
    if not os.path.exists(peppers):
        raise RuntimeError("imagehash's tests need peppers.png, which its source distribution lacks: "
                           "../shared/data/hash/images/peppers.png is absent")
    if not os.path.exists(os.path.join(tests, "data", "peppers.png")):
        shutil.copy(peppers, os.path.join(tests, "data", "peppers.png"))
    with open(os.path.join(tests, "__init__.py"), "w", encoding="utf-8") as f:
        f.write("from .utils import TestImageHash  # noqa: F401 (the tests import it from the package too)\n")
    shutil.copy(os.path.join(HERE, "imagehash_utils.py"), os.path.join(tests, "utils.py"))
    return [tests], [], dest


def _package_dir(module):
    return os.path.dirname(importlib.import_module(module).__file__)


def _scipy_tests(work):
    return ([_installed("scipy.ndimage", "tests/test_morphology.py")], ["-k", "distance_transform_edt or fill_holes"],
            _package_dir("scipy"))


def _watershed_tests(work):
    return [_installed("skimage.segmentation", "tests/test_watershed.py")], [], _package_dir("skimage")


def _peak_tests(work):
    return [_installed("skimage.feature", "tests/test_peak.py")], [], _package_dir("skimage")


SUITES = {"imagehash": _imagehash_tests, "scipy": _scipy_tests, "skimage-watershed": _watershed_tests,
          "skimage-peak": _peak_tests}
NEEDS = {"imagehash": ("imagehash", "PIL"), "scipy": ("scipy",), "skimage-watershed": ("skimage",),
         "skimage-peak": ("skimage",)}


def known_failures():
    """(suite, pattern, reason) rows of docs/peer-tests.md's Known failures table."""
    rows, inside = [], False
    for line in open(DOCS, encoding="utf-8"):
        if line.startswith("## "):
            inside = line.strip() == "## Known failures"
            continue
        m = re.match(r"\|\s*(\S+)\s*\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$", line) if inside else None
        if m and m.group(1) in SUITES:
            rows.append(m.groups())
    return rows


def run_suite(name, work):
    """{test: {"outcome", "message"}} of one suite's run."""
    paths, extra, rootdir = SUITES[name](work)
    report = os.path.join(work, "%s.json" % name)
    env = dict(os.environ, ACCEL_PEER_SUITE=name, ACCEL_PEER_REPORT=report)
    if env.get("ACCEL_LIBRARY"):  # pytest runs in the peer's folder
        env["ACCEL_LIBRARY"] = os.path.abspath(env["ACCEL_LIBRARY"])
    env["PYTHONPATH"] = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "peer_plugin", "-p", "no:cacheprovider", "--no-header",
           "-o", "addopts=", "--continue-on-collection-errors", "--rootdir", rootdir] + extra + paths
    if os.path.exists(report):
        os.remove(report)  # never judge an earlier run's outcomes
    r = subprocess.run(cmd, env=env, cwd=rootdir, capture_output=True, text=True)
    if not os.path.exists(report):
        raise RuntimeError("pytest wrote no outcomes (exit %d): %s" % (r.returncode, (r.stdout + r.stderr)[-600:]))
    with open(report, encoding="utf-8") as f:
        return json.load(f)


def matches(test, pattern):
    """`*` matches any run of characters; everything else itself (test ids hold brackets)."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), test) is not None


def judge(name, outcomes, rows):
    """Problems of one suite: unlisted failures and listed tests that pass."""
    mine = [(p, why) for s, p, why in rows if s == name]
    problems, used = [], set()
    for test, o in sorted(outcomes.items()):
        hit = [p for p, _ in mine if matches(test, p)]
        used.update(hit)
        if o["outcome"] == "failed" and not hit:
            problems.append("%s: FAILED, not in docs/peer-tests.md: %s" % (test, o["message"]))
        if o["outcome"] == "passed" and hit:
            problems.append("%s: passes, but docs/peer-tests.md lists it (%s)" % (test, hit[0]))
    problems += ["%s: docs/peer-tests.md lists `%s`, which matches no test" % (name, p)
                 for p, _ in mine if p not in used]
    return problems


def main():
    if os.environ.get("ACCEL_SANITIZED") == "1":
        print("SKIP: Python cannot load a sanitized library")
        return 77
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suites", nargs="*", choices=[[]] + list(SUITES), default=[])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "peer"))
    ap.add_argument("--list", action="store_true", help="print every failure with its message")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = known_failures()
    ran, problems = 0, []
    for name in a.suites or list(SUITES):
        try:
            for mod in ("pytest",) + NEEDS[name]:
                importlib.import_module(mod)
        except ImportError as e:
            print("%s: SKIP: %s" % (name, e))
            continue
        try:
            outcomes = run_suite(name, a.work)
        except RuntimeError as e:
            if name == "imagehash" and ("source distribution" in str(e) or "peppers" in str(e)):
                print("%s: SKIP: %s" % (name, e))  # no package index to fetch imagehash's tests from
                continue
            problems.append("%s: %s" % (name, e))
            continue
        ran += 1
        count = {}
        for o in outcomes.values():
            count[o["outcome"]] = count.get(o["outcome"], 0) + 1
        print("%s: %s" % (name, ", ".join("%d %s" % (v, k) for k, v in sorted(count.items()))))
        if a.list:
            for test, o in sorted(outcomes.items()):
                if o["outcome"] == "failed":
                    print("  %s  %s" % (test, o["message"]))
        problems += judge(name, outcomes, rows)
    for p in problems:
        print("  " + p)
    if not ran:
        return 77
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
