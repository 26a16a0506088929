#!/bin/sh
# Make sure what `make demo`, `make test` or `make fuzz` needs is installed (Debian).
#   scripts/ensure-deps.sh demo|test|fuzz [PYTHON]
# As root, missing Debian packages are installed with apt-get; otherwise the
# missing ones are listed and the script fails. Python packages for the test
# suite come from python/requirements-test.txt through pip.
set -eu
what=${1:-demo}
python=${2:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)

pkgs="gcc g++ libc6-dev make pkg-config meson ninja-build libjpeg62-turbo-dev libpng-dev zlib1g-dev libtiff-dev libkissfft-dev"
if [ "$what" = test ]; then
  # clang (with its sanitizer runtimes and OpenMP) builds the ASan+UBSan configuration
  pkgs="$pkgs check libsubunit-dev binutils bindgen libclang-dev python3 python3-pip clang libclang-rt-dev libomp-dev"
  pkgs="$pkgs clang-format" # the style check (scripts/format-check.sh)
  pkgs="$pkgs elastix"      # elastix/transformix: the reference of the registration tests
  pkgs="$pkgs cmake python3-venv patchelf" # tests/packaging: the CMake consumer, the wheel in a fresh venv
  pkgs="$pkgs chromium"     # headless: the test of accel dupes --html opens the report
  command -v rustc >/dev/null 2>&1 || pkgs="$pkgs rustc"
  # cargo and the crates rust/ builds with, offline (tests/rust_crates.sh)
  command -v cargo >/dev/null 2>&1 || pkgs="$pkgs cargo"
  pkgs="$pkgs librust-bindgen-dev librust-pkg-config-dev"
fi
# libFuzzer and the sanitizer runtimes come with clang's runtime package; llvm
# brings llvm-symbolizer for readable stacks
if [ "$what" = fuzz ]; then
  pkgs="$pkgs clang libclang-rt-dev llvm"
fi

missing=""
if command -v dpkg-query >/dev/null 2>&1; then
  for p in $pkgs; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
  done
else
  echo "ensure-deps: not a Debian system; assuming these are installed:$pkgs" >&2
fi

if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends $missing >/tmp/accel-apt.log 2>&1 ||
      { apt-get update -q >/tmp/accel-apt.log 2>&1 &&
        apt-get install -y -q --no-install-recommends $missing >>/tmp/accel-apt.log 2>&1; } ||
      { tail -20 /tmp/accel-apt.log; echo "ensure-deps: apt-get failed" >&2; exit 1; }
  else
    echo "ensure-deps: missing Debian packages:$missing" >&2
    echo "ensure-deps: install them with: sudo apt-get install$missing" >&2
    exit 1
  fi
fi

if [ "$what" = test ]; then
  if ! "$python" -c 'import numpy, cffi, tifffile, dask.array, dask.bag, distributed' >/dev/null 2>&1; then
    echo "ensure-deps: installing Python test packages for $python"
    "$python" -m pip install -q -r "$here/python/requirements-test.txt" 2>&1 | grep -v -i 'warning' || true
    "$python" -c 'import numpy, cffi, tifffile' >/dev/null 2>&1 ||
      echo "ensure-deps: numpy/cffi/tifffile unavailable for $python: the Python tests that need them will be skipped" >&2
  fi
fi
