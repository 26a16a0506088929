"""pytest plugin of the peer runner (``run.py``): puts the adapters in place
of the peer's functions before the peer's test files are imported, and
records every test's outcome for the runner.

Environment: ACCEL_PEER_SUITE (a key of ``run.SUITES``), ACCEL_PEER_REPORT
(the JSON file the outcomes go to).
"""
import json
import os

import adapters

_OUTCOMES = {}


def _patch_imagehash():
    import imagehash
    for name, fn in adapters.IMAGEHASH.items():
        setattr(imagehash, name, fn)


def _patch_scipy():
    from scipy import ndimage
    try:  # SciPy's tests look up each function's array API capabilities by the function
        from scipy._lib._array_api import xp_capabilities_table as table
    except ImportError:
        table = {}
    for name, fn in adapters.SCIPY.items():
        if getattr(ndimage, name) in table:
            table[fn] = table[getattr(ndimage, name)]
        setattr(ndimage, name, fn)


def _patch_watershed():
    import skimage.segmentation
    import skimage.segmentation._watershed as w
    w.watershed = adapters.watershed
    skimage.segmentation.watershed = adapters.watershed


def _patch_peak():
    import skimage.feature
    import skimage.feature.peak as p
    p.peak_local_max = adapters.peak_local_max
    skimage.feature.peak_local_max = adapters.peak_local_max


PATCHES = {"imagehash": _patch_imagehash, "scipy": _patch_scipy, "skimage-watershed": _patch_watershed,
           "skimage-peak": _patch_peak}


def pytest_configure(config):
    PATCHES[os.environ["ACCEL_PEER_SUITE"]]()


def _key(nodeid):
    """file name :: the rest, independent of where the peer is installed."""
    path, _, rest = nodeid.partition("::")
    return os.path.basename(path) + "::" + rest


def pytest_runtest_logreport(report):
    key = _key(report.nodeid)
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        message = ""
        if report.failed and getattr(report, "longrepr", None) is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)[-300:]
        _OUTCOMES[key] = {"outcome": outcome, "message": message.splitlines()[0][:300] if message else ""}


def pytest_collectreport(report):
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr).strip().splitlines()[-1]
        _OUTCOMES[_key(report.nodeid) + "(collection)"] = {"outcome": "failed", "message": message[:300]}


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["ACCEL_PEER_REPORT"], "w", encoding="utf-8") as f:
        json.dump(_OUTCOMES, f, indent=1, sort_keys=True)
