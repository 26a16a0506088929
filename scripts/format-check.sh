#!/bin/sh
# Check (or with --fix, apply) the C, C++ and CUDA style of .clang-format.
#   scripts/format-check.sh [--fix] [SOURCE_ROOT]
# The style is pinned to Debian 12's clang-format 14: other versions format some
# constructs differently, so without version 14 the check is skipped (exit 77,
# meson's "skipped"), saying why. `make test` installs clang-format first.
set -eu
fix=0
if [ "${1:-}" = --fix ]; then fix=1; shift; fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -q 'version 14\.'; then cf=$c; break; fi
done
if [ -z "$cf" ]; then
  echo "format check skipped: clang-format 14 (Debian 12's clang-format package) is not installed"
  exit 77
fi

# the project's own C/C++/CUDA sources (not the fuzz corpora or test data)
if [ -d .git ] || [ -f .git ]; then
  files=$(git ls-files -co --exclude-standard -- '*.c' '*.h' '*.cu' '*.cpp' '*.hpp' | grep -v '^tests/fuzz/corpus/\|^tests/data/')
else
  files=$(find include lib kernels tools tests examples -name '*.[ch]' -o -name '*.cu' -o -name '*.cpp' -o -name '*.hpp' |
          grep -v '^tests/fuzz/corpus/\|^tests/data/')
fi

if [ $fix = 1 ]; then
  # shellcheck disable=SC2086
  "$cf" -i --style=file $files
  exit 0
fi
bad=0
for f in $files; do
  if ! "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted as .clang-format says; first differences:"
    "$cf" --style=file "$f" | diff -u "$f" - | sed -n '3,14p'
    bad=$((bad + 1))
  fi
done
if [ $bad -gt 0 ]; then
  echo "format check: $bad file(s) differ; run scripts/format-check.sh --fix"
  exit 1
fi
echo "format check: $(echo "$files" | wc -l) files follow .clang-format ($cf)"
