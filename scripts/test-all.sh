#!/bin/sh
# `make test`: configure, build and test the three builds, warnings as errors:
#   build       the CUDA backend compiled in (when nvcc is found); on a machine
#               without a GPU every test goes through the CPU path
#   build-cpu   -Dcuda=disabled
#   build-asan  CPU path under AddressSanitizer + UndefinedBehaviorSanitizer
#               (clang when installed)
# Prints Check's summary lines for each, and a verdict per build: a build
# fails when a test fails, and also when it ran no test (scripts/test-verdict.sh).
set -u
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
cd "$(dirname "$0")/.."

nvcc=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
if [ -n "$nvcc" ]; then cuda_opt=-Dcuda=enabled; else cuda_opt=-Dcuda=disabled; fi
arch_opt=""
[ -n "${CUDA_ARCH:-}" ] && arch_opt="-Dcuda-arch=$CUDA_ARCH"

# The sanitizer build uses clang when it is installed: its UndefinedBehaviorSanitizer
# checks more than GCC's (e.g. arithmetic on a NULL pointer).
if command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1; then
  asan_cc=clang asan_cxx=clang++
else
  asan_cc=cc asan_cxx=c++
fi

# The C compiler a configured build directory uses ("gcc", "clang", ...), from
# meson's log ("C compiler for the host machine: cc (gcc 12.2.0 ..."); "" if unknown.
compiler_of() {
  sed -n 's/^C compiler for the host machine: [^ ]* (\([a-z]*\) .*/\1/p' "$1/meson-logs/meson-log.txt" 2>/dev/null |
    tail -n 1
}

failed=""
run_build() { # dir label cc cxx options...
  dir=$1 label=$2 bcc=$3 bcxx=$4
  shift 4
  echo "=== $label ($dir)"
  want=$("$bcc" --version 2>/dev/null | head -n 1 | grep -q clang && echo clang || echo gcc)
  have=$(compiler_of "$dir")
  if [ -f "$dir/build.ninja" ] && [ -n "$have" ] && [ "$have" != "$want" ]; then
    echo "($dir was configured with another compiler: configuring it afresh)"
    rm -rf "$dir"
  fi
  # Tests are required (-Dtests=enabled): a missing Check is a set-up error, never
  # a build without tests. A directory that exists (made by `make demo` before
  # Check was installed, say) is reconfigured to require them too.
  if [ ! -f "$dir/build.ninja" ]; then
    CC=$bcc CXX=$bcxx meson setup "$dir" -Dpython="$python" -Dtests=enabled "$@" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; failed="$failed $dir"; return; }
  else
    meson configure "$dir" -Dpython="$python" -Dtests=enabled "$@" >"$dir.setup.log" 2>&1 ||
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
  if ! why=$(scripts/test-verdict.sh "$rc" "$dir.test.log" "$dir/meson-logs/testlog.txt"); then
    sed -n '/Summary of Failures/,$p' "$dir.test.log"
    echo "--- $dir FAILED: $why"
    echo "--- full log: $dir/meson-logs/testlog.txt"
    failed="$failed $dir"
  fi
}

if [ -n "$nvcc" ]; then
  run_build build "CUDA-enabled build, CPU path (nvcc: $nvcc)" cc c++ $cuda_opt $arch_opt
else
  echo "=== nvcc not found: the default build is CPU-only (install the CUDA toolkit for the CUDA build)"
  run_build build "default build (no nvcc)" cc c++ $cuda_opt
fi
run_build build-cpu "CPU-only build" cc c++ -Dcuda=disabled
run_build build-asan "AddressSanitizer + UndefinedBehaviorSanitizer build ($asan_cc)" "$asan_cc" "$asan_cxx" \
  -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false

echo
if [ -n "$failed" ]; then
  echo "make test: FAILED in:$failed"
  exit 1
fi
echo "make test: all builds passed"
