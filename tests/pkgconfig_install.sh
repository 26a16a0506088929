#!/bin/sh
# Install into a scratch root, then build examples/c/gray.c (and dupes.c) the way a user
# does, with nothing but `pkg-config --cflags --libs accel`, against the shared
# library; run them and the installed accel tool; compare the gray output with
# Pillow's. (Static linking and the moved tree: tests/packaging/install_consumers.sh.)
set -eu
build=$1 src=$2 out=$3 sanitized=$4 cuda=$5
if [ "$sanitized" = 1 ]; then echo "SKIP: sanitizer build (consumers would need the sanitizer runtime)"; exit 77; fi
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config is not installed"; exit 77; }
work=$out/pkgconfig-install
rm -rf "$work"
mkdir -p "$work"
meson install -C "$build" --destdir "$work/root" --no-rebuild >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
pc=$(find "$work/root" -name accel.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: accel.pc not installed"; exit 1; }
prefix=${pc%/lib/*}
pcdir=$(dirname "$pc")
PC="pkg-config --define-variable=prefix=$prefix"
export PKG_CONFIG_PATH="$pcdir"
libdir=$($PC --variable=libdir accel)
for h in accel.h core.h ct.h hash.h image.h index.h io.h; do
  [ -f "$prefix/include/accel/$h" ] || { echo "FAIL: include/accel/$h not installed"; exit 1; }
done
[ -x "$prefix/bin/accel" ] || { echo "FAIL: bin/accel not installed"; exit 1; }
[ -f "$libdir/libaccel.a" ] || { echo "FAIL: libaccel.a not installed"; exit 1; }
[ "$($PC --variable=cuda accel)" = "$cuda" ] || { echo "FAIL: accel.pc cuda=$($PC --variable=cuda accel), built cuda=$cuda"; exit 1; }
[ "$($PC --modversion accel)" = "$(sed -n 's/^#define ACCEL_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/accel/core.h")" ]

cc=${CC:-cc}
# shared
$cc -std=c11 -Wall -Wextra -Werror $($PC --cflags accel) "$src/examples/c/gray.c" -o "$work/gray_shared" $($PC --libs accel)
LD_LIBRARY_PATH="$libdir" "$work/gray_shared" "$src/samples/astronaut.ppm" "$work/shared.pgm"
cmp "$work/shared.pgm" "$src/tests/data/gray/astronaut.L.pgm"
# static linking (accel-static.pc, the README's command): tests/packaging/install_consumers.sh
# the duplicate-grouping example on the sample photos: the chelsea copies form one group
$cc -std=c11 -Wall -Wextra -Werror $($PC --cflags accel) "$src/examples/c/dupes.c" -o "$work/dupes" $($PC --libs accel)
LD_LIBRARY_PATH="$libdir" "$work/dupes" "$src"/samples/photos/* >"$work/dupes.tsv"
[ "$(grep -c chelsea "$work/dupes.tsv")" = 3 ] || { echo "FAIL: dupes example:"; cat "$work/dupes.tsv"; exit 1; }
# the installed tool
LD_LIBRARY_PATH="$libdir" "$prefix/bin/accel" --version
echo "ok: installed under $prefix; examples built with pkg-config match Pillow"
