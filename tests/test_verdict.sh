#!/bin/sh
# scripts/test-verdict.sh on made-up meson logs: a build that ran no test
# (no tests defined, everything skipped, no Check suite) must fail `make test`.
set -u
verdict=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
expect() { # want status log testlog description
  if "$verdict" "$2" "$3" "$4" >"$work/out" 2>&1; then got=pass; else got=fail; fi
  if [ "$got" != "$1" ]; then
    echo "FAIL: $5: expected $1, got $got ($(cat "$work/out"))"
    fails=$((fails + 1))
  else
    echo "ok: $5 -> $got $(cat "$work/out")"
  fi
}
printf '1/2 libaccel:check / core OK 0.1s\n\nOk:                 2\nFail:               0\n' >"$work/good.log"
printf '100%%: Checks: 24, Failures: 0, Errors: 0\n' >"$work/good.txt"
printf 'No tests defined.\n' >"$work/none.log"
: >"$work/empty.txt"
printf '1/1 libaccel:gpu / gpu SKIP 0.0s exit status 77\n\nOk:                 0\nSkipped:            1\n' >"$work/skipped.log"
printf '1/1 libaccel:cli / cli OK 1.0s\n\nOk:                 1\nFail:               0\n' >"$work/nocheck.log"
expect pass 0 "$work/good.log" "$work/good.txt" "tests ran and passed"
expect fail 1 "$work/good.log" "$work/good.txt" "meson test failed"
expect fail 0 "$work/none.log" "$work/empty.txt" "no tests defined (meson exits 0)"
expect fail 0 "$work/skipped.log" "$work/empty.txt" "every test skipped"
expect fail 0 "$work/nocheck.log" "$work/empty.txt" "no Check suite ran"
expect fail 0 "$work/missing.log" "$work/missing.txt" "no log at all"
[ "$fails" -eq 0 ]
