"""What the Python tests share: skipping where they cannot run (77 is meson's
skip status), a clean environment, and the committed hash fixtures' reference
values. Standard library only: the command-line tests use it too."""
import importlib
import os
import sys

SRC = os.environ["ACCEL_SOURCE_ROOT"]
HASHDATA = os.path.join(SRC, "tests", "data", "hash")


def require(module=None):
    """Exit as skipped where the package cannot be tested: a library built with
    sanitizers (Python cannot load it without preloading their runtimes), or
    `module` not installed. Returns the module, imported."""
    if os.environ.get("ACCEL_SANITIZED") == "1":
        print("SKIP: the library is built with sanitizers; Python cannot load it without preloading their runtimes")
        sys.exit(77)
    if module is None:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        print("SKIP: %s is not installed for %s" % (module, sys.executable))
        sys.exit(77)


def clean_environment():
    """Without ACCEL_BACKEND and ACCEL_LOG, which would override what the tests ask for."""
    for k in ("ACCEL_BACKEND", "ACCEL_LOG"):
        os.environ.pop(k, None)


def hash_reference_rows():
    """imagehash's values for the committed hash fixtures: {file: {column: value}}."""
    rows = {}
    for name in ("reference.tsv", "generated.tsv"):
        with open(os.path.join(HASHDATA, name)) as f:
            lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
        header = lines[0].split("\t")
        for line in lines[1:]:
            cols = dict(zip(header, line.split("\t")))
            rows[cols["file"]] = cols
    return rows
