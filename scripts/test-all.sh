#!/bin/sh
# `make test`: configure, build and test the three builds, warnings as errors:
#   build       the CUDA backend compiled in (when nvcc is found); on a machine
#               without a GPU every test goes through the CPU path
#   build-cpu   -Dcuda=disabled
#   build-asan  CPU path under AddressSanitizer + UndefinedBehaviorSanitizer
# Prints Check's summary lines for each, and a verdict per build.
set -u
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
cd "$(dirname "$0")/.."

nvcc=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
if [ -n "$nvcc" ]; then cuda_opt=-Dcuda=enabled; else cuda_opt=-Dcuda=disabled; fi
arch_opt=""
[ -n "${CUDA_ARCH:-}" ] && arch_opt="-Dcuda-arch=$CUDA_ARCH"

failed=""
run_build() { # dir label options...
  dir=$1 label=$2
  shift 2
  echo "=== $label ($dir)"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dpython="$python" "$@" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; failed="$failed $dir"; return; }
  fi
  meson compile -C "$dir" -j "$jobs" >"$dir.compile.log" 2>&1 ||
    { tail -40 "$dir.compile.log"; failed="$failed $dir"; return; }
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs >"$dir.test.log" 2>&1
  rc=$?
  grep -E '^ *[0-9]+/[0-9]+ ' "$dir.test.log"
  echo "--- Check summaries ($dir):"
  grep -h '^[0-9]*%: Checks:' "$dir/meson-logs/testlog.txt" || true
  grep -E '^(Ok|Fail|Skipped|Timeout): ' "$dir.test.log"
  if [ $rc -ne 0 ]; then
    sed -n '/Summary of Failures/,$p' "$dir.test.log"
    echo "--- full log: $dir/meson-logs/testlog.txt"
    failed="$failed $dir"
  fi
}

if [ -n "$nvcc" ]; then
  run_build build "CUDA-enabled build, CPU path (nvcc: $nvcc)" $cuda_opt $arch_opt
else
  echo "=== nvcc not found: the default build is CPU-only (install the CUDA toolkit for the CUDA build)"
  run_build build "default build (no nvcc)" $cuda_opt
fi
run_build build-cpu "CPU-only build" -Dcuda=disabled
run_build build-asan "AddressSanitizer + UndefinedBehaviorSanitizer build" -Dcuda=disabled \
  -Db_sanitize=address,undefined -Db_lundef=false

echo
if [ -n "$failed" ]; then
  echo "make test: FAILED in:$failed"
  exit 1
fi
echo "make test: all builds passed"
