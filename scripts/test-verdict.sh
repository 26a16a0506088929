#!/bin/sh
# The verdict on one build's `meson test` run, for scripts/test-all.sh:
#   scripts/test-verdict.sh STATUS TEST_LOG TESTLOG_TXT
# STATUS is meson test's exit status, TEST_LOG its console output and
# TESTLOG_TXT the build's meson-logs/testlog.txt. Passes (exit 0) only when
# meson test succeeded, at least one test passed and at least one Check suite
# printed its summary: a build configured without its tests ("No tests
# defined", which meson answers with success) or one whose tests were all
# skipped must not count as passed. Prints one line saying why it fails.
set -u
status=$1 log=$2 testlog=$3
if [ "$status" -ne 0 ]; then
  echo "meson test failed (exit status $status)"
  exit 1
fi
if grep -q 'No tests defined' "$log" 2>/dev/null; then
  echo "no tests defined: the build was configured without its tests"
  exit 1
fi
ok=$(sed -n 's/^Ok: *\([0-9][0-9]*\).*/\1/p' "$log" 2>/dev/null | tail -n 1)
if [ -z "$ok" ] || [ "$ok" -eq 0 ]; then
  echo "no test passed (Ok: ${ok:-none}): nothing was tested"
  exit 1
fi
checks=$(grep -c '^[0-9]*%: Checks: [1-9]' "$testlog" 2>/dev/null)
if [ "${checks:-0}" -eq 0 ]; then
  echo "no Check suite ran"
  exit 1
fi
exit 0
