#!/bin/bash
# scripts/gpu-check.sh - the checks that need an NVIDIA GPU, in one run, with one report.
#
#   scripts/gpu-check.sh [--full]        (make gpu-check)
#
# 1. builds libaccel for the GPU present (its compute capability from nvidia-smi, e.g. 9.0 -> sm_90)
#    in build-gpu/ (GPU_CHECK_BUILD overrides the folder);
# 2. runs the GPU suite: meson test --suite gpu;
# 3. runs the suite again under compute-sanitizer: memcheck (with the leak check), racecheck,
#    initcheck, synccheck;
# 4. runs the GPU rows of the benchmarks (bench/*_bench.py --backend cuda, their quick sizes unless
#    --full) and times the accel tool on the bundled samples, on the CPU and on the GPU;
# 5. writes bench/results/gpu-check-<date>-<device>.md: the device, the driver, the toolkit, every
#    command with its result and time, the benchmark figures, and the end of the log of each failed step.
#
# On a machine that reaches no package registry, bring the build dependencies first:
#   source .devdeps/device-deps.sh use .devdeps        (../shared/tools/device-deps.sh fetches them)
# Without an NVIDIA GPU (or nvcc, or meson) it stops at once: exit status 1, one line saying why.
# Exit status 0 when the build, the suite and the four sanitizers pass. A benchmark that cannot run
# here (no numpy, no ../shared data, peers that cannot be installed) is reported as not run and does
# not fail the check; one that starts and fails does.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
die() {
  echo "gpu-check: $*" >&2
  exit 1
}

full=0
case "${1:-}" in
  --full) full=1 ;;
  "") ;;
  *) die "usage: scripts/gpu-check.sh [--full]" ;;
esac

# ---------------------------------------------------------------- the machine
command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA GPU on this machine (nvidia-smi not found: no NVIDIA driver)"
if ! query=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) ||
  [ -z "$query" ]; then
  die "no NVIDIA GPU on this machine (nvidia-smi: $(echo "$query" | head -1))"
fi
query=$(echo "$query" | head -1)
gpu_name=$(echo "$query" | cut -d, -f1 | sed 's/^ *//; s/ *$//')
driver=$(echo "$query" | cut -d, -f2 | tr -d ' ')
gpu_memory=$(echo "$query" | cut -d, -f3 | sed 's/^ *//')
gpu_count=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)

nvcc=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
[ -n "$nvcc" ] || die "nvcc not found (install the CUDA toolkit, or put its bin/ on PATH)"
cuda_bin=$(dirname "$nvcc")
nvcc_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')

cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
case "$cc" in
  [0-9]*.[0-9]*) arch=sm_$(echo "$cc" | tr -d .) ;;
  *) # drivers before R510 lack compute_cap: ask the toolkit's device query
    cc=$("$cuda_bin/__nvcc_device_query" 2>/dev/null | tr ',' '\n' | head -1)
    [ -n "$cc" ] || die "cannot tell the compute capability of $gpu_name (nvidia-smi and __nvcc_device_query)"
    arch=sm_$cc
    cc="${cc%?}.${cc#"${cc%?}"}" ;;
esac
command -v meson >/dev/null 2>&1 || die "meson not found (pip install meson ninja, or the Debian packages)"

sanitizer=$(command -v compute-sanitizer 2>/dev/null || { [ -x "$cuda_bin/compute-sanitizer" ] &&
  echo "$cuda_bin/compute-sanitizer"; } || { [ -x "$cuda_bin/../compute-sanitizer/compute-sanitizer" ] &&
  echo "$cuda_bin/../compute-sanitizer/compute-sanitizer"; })

# the driver a CUDA runtime needs (libaccel links the toolkit's runtime statically)
case "$nvcc_version" in
  13.*) need_driver=580 ;;
  12.*) need_driver=525 ;;
  *) need_driver=0 ;;
esac
driver_note="ok"
if [ "$need_driver" -gt 0 ] && [ "${driver%%.*}" -lt "$need_driver" ] 2>/dev/null; then
  driver_note="TOO OLD: the CUDA $nvcc_version runtime needs R$need_driver or newer"
fi

BUILD=${GPU_CHECK_BUILD:-build-gpu}
OUT=$BUILD/gpu-check
rm -rf "$OUT"
mkdir -p "$OUT/bench" "$OUT/cli"
date_tag=$(date +%Y-%m-%d)
slug=$(echo "$gpu_name" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
report=bench/results/gpu-check-$date_tag-$slug.md
cpu_model=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
[ -n "$(git status --porcelain 2>/dev/null)" ] && commit="$commit (with local changes)"
echo "gpu-check: $gpu_name (compute capability $cc, driver $driver), nvcc $nvcc_version; logs in $OUT"

# ---------------------------------------------------------------- steps
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# Each step: a name, a command, its result (pass, FAIL, not run: why), its seconds and its log.
names=() cmds=() results=() secs=() logs=()
failed=0
step() { # name log command...: run, record; returns the command's status (stdout to $STDOUT if set)
  local name=$1 log=$2
  shift 2
  local t0 t1 rc
  echo "--- $name: $*"
  t0=$(date +%s.%N)
  if [ -n "${STDOUT:-}" ]; then
    "$@" >"$STDOUT" 2>"$log"
  else
    "$@" >"$log" 2>&1
  fi
  rc=$?
  t1=$(date +%s.%N)
  names+=("$name")
  cmds+=("$*")
  secs+=("$(elapsed "$t0" "$t1")")
  logs+=("$log")
  if [ $rc -eq 0 ]; then results+=("pass"); else results+=("FAIL (exit status $rc)"); fi
  echo "    ${results[-1]}"
  return $rc
}
fail_last() { # mark the last step failed, with why
  results[-1]="FAIL ($1)"
  echo "    ${results[-1]}"
}
not_run() { # name command why
  names+=("$1")
  cmds+=("$2")
  results+=("not run: $3")
  secs+=("-")
  logs+=("")
  echo "--- $1: not run: $3"
}

built=0
if [ -f "$BUILD/build.ninja" ]; then
  step "configure" "$OUT/01-configure.log" meson setup --reconfigure "$BUILD" -Dcuda=enabled -Dcuda-arch="$arch"
else
  step "configure" "$OUT/01-configure.log" meson setup "$BUILD" -Dcuda=enabled -Dcuda-arch="$arch"
fi && step "build" "$OUT/02-build.log" meson compile -C "$BUILD" && built=1

suite_ok=0
if [ $built = 1 ]; then
  if step "GPU suite" "$OUT/03-suite.log" meson test -C "$BUILD" --suite gpu --print-errorlogs; then
    if grep -q "SKIP" "$OUT/03-suite.log"; then
      fail_last "the suite skipped: $(grep -h '^SKIP' "$BUILD/meson-logs/testlog.txt" | head -1)"
    else
      suite_ok=1
    fi
  fi
  # under compute-sanitizer: the suite's program itself (its tests run in its own process)
  n=4
  for tool in memcheck racecheck initcheck synccheck; do
    if [ -z "$sanitizer" ]; then
      not_run "compute-sanitizer $tool" "compute-sanitizer --tool $tool" "compute-sanitizer not found beside nvcc"
      continue
    fi
    extra=()
    [ $tool = memcheck ] && extra=(--leak-check full)
    step "compute-sanitizer $tool" "$OUT/0$n-$tool.log" env ACCEL_TEST_UNDER_SANITIZER=$tool \
      timeout "${GPU_CHECK_SANITIZER_TIMEOUT:-5400}" "$sanitizer" --tool $tool "${extra[@]}" --error-exitcode 3 \
      --print-limit 100 "$BUILD/tests/test_gpu"
    n=$((n + 1))
  done
else
  for s in "GPU suite" "compute-sanitizer memcheck" "compute-sanitizer racecheck" "compute-sanitizer initcheck" \
    "compute-sanitizer synccheck"; do
    not_run "$s" "-" "the build failed"
  done
fi
for i in "${!results[@]}"; do
  case "${results[$i]}" in FAIL*) failed=1 ;; esac
done

# ---------------------------------------------------------------- benchmarks
bench_names=() bench_out=()
python=${PYTHON:-python3}
bench() { # name needs_dir command...
  local name=$1 needs=$2
  shift 2
  if [ $built = 0 ]; then
    not_run "bench $name" "$*" "the build failed"
  elif [ $suite_ok = 0 ]; then
    not_run "bench $name" "$*" "the GPU suite did not pass"
  elif ! command -v "$python" >/dev/null 2>&1 || ! "$python" -c "import numpy" >/dev/null 2>&1; then
    not_run "bench $name" "$*" "numpy is not importable by $python"
  elif [ -n "$needs" ] && [ ! -d "$needs" ]; then
    not_run "bench $name" "$*" "$needs is absent"
  else
    local out="$OUT/bench/$name.md"
    if STDOUT=$out step "bench $name" "$OUT/bench/$name.log" "$@"; then
      bench_names+=("$name")
      bench_out+=("$out")
    elif grep -q "^bench: creating" "$OUT/bench/$name.log" &&
      grep -qiE "pip|venv|No matching distribution|Could not find|Network|resolve" "$OUT/bench/$name.log"; then
      why=$(tail -1 "$OUT/bench/$name.log" | cut -c1-160)
      results[-1]="not run: its pinned peers could not be installed here ($why)"
      echo "    ${results[-1]}"
    else
      failed=1
    fi
  fi
}
shared=$ROOT/../shared/data
if [ $full = 1 ]; then
  bench hash "$shared/hash/images" "$python" bench/hash_bench.py --build "$BUILD" --backend cuda --out "$OUT/bench"
  bench ct "$shared/ct" "$python" bench/ct_bench.py --build "$BUILD" --backend cuda
  bench index "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda
  bench index-gpu-join "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda --algorithm brute_force \
    --sizes 1000000 --radii 4
  bench index-knn "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda --knn 1000000,10000000
  bench svf "" "$python" bench/svf_bench.py --build "$BUILD" --backend cuda --out "$OUT/bench"
  bench reg "$shared/reg" "$python" bench/reg_bench.py --build "$BUILD" --backend cuda --sizes 1024,4096,8192 --big \
    --out "$OUT/bench"
else
  bench hash "$shared/hash/images" "$python" bench/hash_bench.py --build "$BUILD" --backend cuda --quick \
    --out "$OUT/bench"
  bench ct "$shared/ct" "$python" bench/ct_bench.py --build "$BUILD" --backend cuda --quick
  bench index "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda --quick
  bench index-gpu-join "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda --algorithm brute_force \
    --quick
  bench index-knn "" "$python" bench/index_bench.py --build "$BUILD" --backend cuda --knn 1000000 --knn-queries 2000
  bench svf "" "$python" bench/svf_bench.py --build "$BUILD" --backend cuda --size 500 --skip-umep --out "$OUT/bench"
  bench reg "$shared/reg" "$python" bench/reg_bench.py --build "$BUILD" --backend cuda --quick --skip-elastix \
    --out "$OUT/bench"
fi

# the accel tool on the bundled samples: CPU, then CUDA (strict: a GPU failure is an error)
cli_rows=()
accel=$BUILD/tools/accel/accel
if [ $suite_ok = 1 ] && [ -x "$accel" ]; then
  cli() { # label args...
    local label=$1 cpu_s gpu_s t0
    shift
    t0=$(date +%s.%N)
    if "$accel" --backend cpu --no-progress "$@" >"$OUT/cli/$label.cpu.log" 2>&1; then
      cpu_s=$(elapsed "$t0" "$(date +%s.%N)")
    else
      cpu_s="FAIL"
    fi
    t0=$(date +%s.%N)
    if "$accel" --backend cuda --strict --no-progress "$@" >"$OUT/cli/$label.cuda.log" 2>&1; then
      gpu_s=$(elapsed "$t0" "$(date +%s.%N)")
    else
      gpu_s="FAIL: $(tail -1 "$OUT/cli/$label.cuda.log" | cut -c1-200)"
      failed=1
    fi
    cli_rows+=("| \`accel $*\` | $cpu_s | $gpu_s |")
    echo "--- accel $*: CPU $cpu_s s, CUDA $gpu_s s"
  }
  cli hash hash --kinds ahash,dhash,phash,whash,colorhash samples/photos
  cli gray gray --out "$OUT/cli" samples/astronaut.ppm
  cli ct ct segment samples/ct/food_aniso_64x96x80.npy --threshold -300 --spacing 2,0.5,0.5 \
    --out-labels "$OUT/cli/food.labels.npy"
  cli shadow shadow --dsm samples/svf/city_dsm.npy --cdsm samples/svf/city_cdsm.npy --pixel-size 1 \
    --azimuth 247.5 --altitude 12 --out "$OUT/cli"
  cli svf svf --dsm samples/svf/city_dsm.npy --cdsm samples/svf/city_cdsm.npy --pixel-size 1 --out "$OUT/cli"
fi

# ---------------------------------------------------------------- the report
verdict=PASS
[ $failed = 1 ] && verdict=FAIL
mkdir -p bench/results
{
  echo "# GPU check: $gpu_name, $date_tag"
  echo
  echo "- verdict: **$verdict**"
  echo "- device: $gpu_name (device 0 of $gpu_count), compute capability $cc, $gpu_memory"
  echo "- driver: $driver ($driver_note; libaccel's CUDA $nvcc_version runtime needs R$need_driver or newer)"
  echo "- CUDA toolkit: nvcc $nvcc_version ($nvcc); compute-sanitizer: ${sanitizer:-not found}"
  echo "- libaccel: commit $commit, built in $BUILD with -Dcuda=enabled -Dcuda-arch=$arch"
  echo "- host: ${cpu_model:-?}, $(nproc) cores; $(uname -sr)"
  echo "- command: scripts/gpu-check.sh${1:+ $1}"
  echo
  echo "## Steps"
  echo
  echo "| step | command | result | seconds |"
  echo "| --- | --- | --- | ---: |"
  for i in "${!names[@]}"; do
    printf '| %s | `%s` | %s | %s |\n' "${names[$i]}" "${cmds[$i]}" "${results[$i]}" "${secs[$i]}"
  done
  if [ ${#cli_rows[@]} -gt 0 ]; then
    echo
    echo "## The accel tool on the bundled samples (wall seconds, one run each, start-up included)"
    echo
    echo "| command | CPU | CUDA |"
    echo "| --- | ---: | ---: |"
    printf '%s\n' "${cli_rows[@]}"
  fi
  for i in "${!bench_names[@]}"; do
    echo
    echo "## Benchmark: ${bench_names[$i]} (GPU rows)"
    echo
    sed 's/^#/###/' "${bench_out[$i]}"
  done
  for i in "${!names[@]}"; do
    case "${results[$i]}" in
      FAIL*)
        echo
        echo "## ${names[$i]}: the end of ${logs[$i]}"
        echo
        echo '```'
        tail -40 "${logs[$i]}"
        echo '```' ;;
    esac
  done
} >"$report"
echo "gpu-check: $verdict; report: $report"
[ $verdict = PASS ]
