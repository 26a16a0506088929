#!/bin/sh
# `make fuzz`: build the libFuzzer harnesses with clang under AddressSanitizer
# + UndefinedBehaviorSanitizer (build-fuzz, -Dfuzzing=true) and run each for
# FUZZ_SECONDS (default 60) from its committed corpus, tests/fuzz/corpus/<name>.
#   tests/fuzz/run.sh [harness...]        (default: all of them)
# Environment: FUZZ_SECONDS, FUZZ_JOBS (parallel fuzzing jobs per harness,
# default 1), JOBS (compile jobs).
#
# libFuzzer runs in fork mode and goes on after a crash, a timeout (10 s) or
# an out-of-memory (one allocation over 512 MiB, or 2 GiB resident), so one
# run reports everything it meets. Under build-fuzz/fuzz/:
#   corpus/<name>/      new inputs (kept between runs; the committed corpus
#                       is never written)
#   artifacts/<name>/   crash-*, timeout-*, oom-*: the inputs that failed
#                       (emptied at the start of each run)
#   <name>.log          libFuzzer's output
# Prints the executions of each harness and, for each failing input, what
# the sanitizer said; exits 1 if any harness found one.
set -u
seconds=${FUZZ_SECONDS:-60}
fork=${FUZZ_JOBS:-1}
jobs=${JOBS:-$(nproc)}
cd "$(dirname "$0")/../.."
build=build-fuzz
work=$build/fuzz

if [ ! -f $build/build.ninja ]; then
  CC=clang CXX=clang++ meson setup $build -Dcuda=disabled -Dopenmp=disabled -Dtests=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dfuzzing=true >$build.setup.log 2>&1 ||
    { cat $build.setup.log; exit 1; }
fi
meson compile -C $build -j "$jobs" >$build.compile.log 2>&1 || { tail -40 $build.compile.log; exit 1; }

harnesses=${*:-npy raw pnm tiff tiff_image elastix image index}
found=""
summary=""
verdict='ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [^(]*|runtime error: .*|fuzz check failed: .*'
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# one allocation over 512 MiB is an error, as in the replay tests; refused before ASan maps it
export ASAN_OPTIONS="max_allocation_size_mb=512${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
for h in $harnesses; do
  bin=$build/tests/fuzz/fuzz_$h
  [ -x "$bin" ] || { echo "fuzz: no harness '$h'"; exit 1; }
  rm -rf "$work/artifacts/$h"
  mkdir -p "$work/corpus/$h" "$work/artifacts/$h"
  log=$work/$h.log
  echo "=== fuzz_$h: $seconds s"
  # the first corpus directory receives the new inputs
  timeout -k 10 $((seconds + 120)) "$bin" -fork="$fork" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$h/" "$work/corpus/$h" "tests/fuzz/corpus/$h" >"$log" 2>&1
  rc=$?
  # fork mode: the last "#N: cov: ..." line counts every execution of every job
  execs=$(sed -n 's/^#\([0-9][0-9]*\): cov:.*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(find "$work/corpus/$h" -type f | wc -l)
  artifacts=$(find "$work/artifacts/$h" -type f | wc -l)
  line=$(printf '%-6s %10s executions  %5s corpus inputs  %3s failing inputs' "$h" "${execs:-?}" "$corpus" "$artifacts")
  echo "$line"
  summary="$summary$line
"
  # libFuzzer's status is not 0 when it found something; otherwise it failed itself
  [ $rc -eq 0 ] || [ "$artifacts" -gt 0 ] || { echo "fuzz_$h failed (status $rc): see $log"; found="$found $h"; }
  # replay each failing input alone; group them by the sanitizer's verdict and the first frame in the
  # project's sources (the same defect is often found many times)
  : >"$work/$h.triage"
  for a in "$work/artifacts/$h"/*; do
    [ -f "$a" ] || continue
    found="$found $h"
    # the slow unwinder sees through libpng/libjpeg/libtiff, built without frame pointers
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" \
      "$bin" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 "$a" >"$work/replay.log" 2>&1
    what=$(grep -m1 -o -E "$verdict" "$work/replay.log" | sed -E 's/0x[0-9a-f]+|[0-9]+/N/g')
    where=$(grep -o -E '[^ /]*/?\.\./(lib|tests/fuzz)/[^ ]*:[0-9]+' "$work/replay.log" |
      grep -v 'fuzz_common.c' | sed 's|.*\.\./||' | awk '!seen[$0]++' | head -3 | tr '\n' ' ')
    printf '%s\t%s\t%s\n' "${what:-no failure on replay}" "${where:-?}" "$a" >>"$work/$h.triage"
  done
  sort "$work/$h.triage" | awk -F '\t' '
    { key = $1 "\t" $2; if (!(key in n)) { order[++k] = key; first[key] = $3 } n[key]++ }
    END { for (i = 1; i <= k; i++) { split(order[i], p, "\t")
            printf "  %d x %s\n      at %s\n      e.g. %s\n", n[order[i]], p[1], p[2], first[order[i]] } }'
done

echo
echo "=== fuzz summary ($seconds s per harness)"
printf '%s' "$summary"
if [ -n "$found" ]; then
  echo "make fuzz: failing inputs found by:$(echo "$found" | tr ' ' '\n' | sort -u | tr '\n' ' ')"
  echo "(under $work/artifacts/)"
  exit 1
fi
echo "make fuzz: no failing input found"
