#!/bin/sh
# An installed tree used as its consumers use it, with no LD_LIBRARY_PATH:
#   1. the installed accel tool runs from its prefix, and again after the whole
#      tree is moved elsewhere (its RPATH is relative to itself);
#   2. the README's static-linking command, `cc app.c $(pkg-config --cflags
#      --libs accel-static)`, links libaccel.a (no libaccel.so needed) and the
#      program's gray output matches Pillow's;
#   3. a CMake project (examples/cpp) finds the package with find_package(accel),
#      builds info.cpp and dupes.cpp against accel::accel and info.cpp against
#      accel::accel_static, and they run: the sample photos' chelsea copies form
#      one group, and a version the package does not satisfy is refused.
#   install_consumers.sh BUILD_DIR SOURCE_DIR WORK_DIR SANITIZED(0|1)
set -eu
build=$1 src=$2 out=$3 sanitized=$4
if [ "$sanitized" = 1 ]; then echo "SKIP: sanitizer build (consumers would need the sanitizer runtime)"; exit 77; fi
work=$out/install-consumers
rm -rf "$work"
mkdir -p "$work"
meson install -C "$build" --destdir "$work/root" --no-rebuild >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
pc=$(find "$work/root" -name accel.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: accel.pc not installed"; exit 1; }
prefix=${pc%/lib/*}
hopper_phash=8c977c0983ce9e8d # imagehash 4.3.2's phash of samples/photos/hopper.jpg (tests/data/hash/reference.tsv)
grep -q "^hopper.jpg	.*	$hopper_phash	" "$src/tests/data/hash/reference.tsv" ||
  { echo "FAIL: the reference phash of hopper.jpg is not $hopper_phash"; exit 1; }

# 1. the tool, from the prefix and from a moved copy, with a bare environment
run_tool() { # accel-binary: it runs, and loads the libaccel.so.0 of its own tree (not one installed elsewhere)
  env -i PATH=/usr/bin:/bin "$1" --version >"$work/tool.out" 2>&1 || { cat "$work/tool.out"; return 1; }
  tree=$(cd "$(dirname "$1")/.." && pwd -P)
  loaded=$(env -i ldd "$1" | sed -n 's/.*libaccel\.so\.0 => \([^ ]*\).*/\1/p')
  case "$loaded" in
    "$tree"/*) ;;
    *) echo "FAIL: $1 loads '$loaded', not the library of its tree $tree"; return 1 ;;
  esac
  got=$(env -i PATH=/usr/bin:/bin "$1" hash --kinds phash "$src/samples/photos/hopper.jpg" | sed -n '2s/.*	//p')
  [ "$got" = "$hopper_phash" ] || { echo "FAIL: $1 hash gave '$got', expected $hopper_phash"; return 1; }
}
run_tool "$prefix/bin/accel" || exit 1
mkdir -p "$work/moved"
cp -a "$prefix" "$work/moved/elsewhere"
rm -rf "$work/root"
run_tool "$work/moved/elsewhere/bin/accel" || { echo "FAIL: the tool does not run from a moved prefix"; exit 1; }
prefix=$work/moved/elsewhere
echo "ok: the installed tool runs from its prefix and from a moved copy without LD_LIBRARY_PATH"

# 2. the README's static-linking command
if command -v pkg-config >/dev/null 2>&1; then
  pcdir=$(dirname "$(find "$prefix" -name accel-static.pc | head -1)")
  export PKG_CONFIG_PATH="$pcdir"
  PC="pkg-config --define-variable=prefix=$prefix"
  cc=${CC:-cc}
  # shellcheck disable=SC2046 # word splitting of pkg-config's output is intended
  $cc "$src/examples/c/gray.c" -o "$work/gray_static" $($PC --cflags --libs accel-static)
  if readelf -d "$work/gray_static" | grep -q 'libaccel'; then
    echo "FAIL: the README's static command links libaccel.so:"; readelf -d "$work/gray_static" | grep NEEDED; exit 1
  fi
  env -i "$work/gray_static" "$src/samples/astronaut.ppm" "$work/static.pgm"
  cmp "$work/static.pgm" "$src/tests/data/gray/astronaut.L.pgm"
  echo "ok: cc app.c \$(pkg-config --cflags --libs accel-static) links libaccel.a; gray output matches Pillow"
else
  echo "(pkg-config not installed: the static-linking command is not checked)"
fi

# 3. the CMake consumer
if ! command -v cmake >/dev/null 2>&1; then
  echo "SKIP: cmake is not installed (Debian: apt-get install cmake); the tool and the static command passed"
  exit 77
fi
cmake -S "$src/examples/cpp" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DACCEL_EXAMPLES_STATIC=ON \
  -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
grep 'accel 0' "$work/cmake.log"
cmake --build "$work/cmake" -j 2 >"$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; exit 1; }
env -i "$work/cmake/info" || { echo "FAIL: examples/cpp info (accel::accel)"; exit 1; }
env -i "$work/cmake/info_static" >/dev/null || { echo "FAIL: examples/cpp info (accel::accel_static)"; exit 1; }
if readelf -d "$work/cmake/info_static" | grep -q 'libaccel'; then echo "FAIL: accel::accel_static links libaccel.so"; exit 1; fi
env -i "$work/cmake/dupes" "$src"/samples/photos/* >"$work/dupes.tsv"
chelsea_groups=$(grep chelsea "$work/dupes.tsv" | cut -f1 | sort -u)
if [ "$(grep -c chelsea "$work/dupes.tsv")" != 3 ] || [ "$(echo "$chelsea_groups" | wc -l)" != 1 ]; then
  echo "FAIL: examples/cpp dupes did not put the three chelsea copies in one group:"; cat "$work/dupes.tsv"; exit 1
fi
# a request for a version this package does not satisfy fails at configure time
mkdir -p "$work/toonew"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(toonew LANGUAGES C)\nfind_package(accel 99 REQUIRED)\n' \
  >"$work/toonew/CMakeLists.txt"
if cmake -S "$work/toonew" -B "$work/toonew/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/toonew.log" 2>&1; then
  echo "FAIL: find_package(accel 99) succeeded"; exit 1
fi
grep -q 'version' "$work/toonew.log" || { cat "$work/toonew.log"; exit 1; }
echo "ok: find_package(accel) builds examples/cpp against accel::accel and accel::accel_static; they run"
