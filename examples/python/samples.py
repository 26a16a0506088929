"""What the examples share: stepping aside where they cannot run, and the
bundled sample images (samples/ at the top of the source tree)."""
import os
import sys

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples")


def require_numpy():
    """numpy, or exit with status 77 (the test suite's "skipped") where an example
    cannot run: without numpy, or on a library built with sanitizers."""
    if os.environ.get("ACCEL_SANITIZED") == "1":
        print("SKIP: sanitizer build")
        sys.exit(77)
    try:
        import numpy
    except ImportError:
        print("SKIP: numpy is not installed")
        sys.exit(77)
    return numpy


def photo_paths(folder=None):
    """The JPEG and PNG files of `folder` (default: samples/photos), sorted."""
    folder = folder or os.path.join(SAMPLES, "photos")
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg", ".png")))
