#!/bin/sh
# Rust: `cargo test --offline` of the crates in rust/ (libaccel-sys, whose
# build script generates the bindings from the headers with bindgen and finds
# the library through pkg-config, and the safe wrapper libaccel) against the
# crates Debian packages (librust-*-dev under /usr/share/cargo/registry),
# linked with the library of this build.
set -eu
src=$1 out=$2 libdir=$3 sanitized=$4 version=$5
registry=/usr/share/cargo/registry
if [ "$sanitized" = 1 ]; then echo "SKIP: sanitizer build (rustc would need the sanitizer runtime)"; exit 77; fi
command -v cargo >/dev/null 2>&1 || { echo "SKIP: cargo is not installed (Debian package cargo)"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config is not installed"; exit 77; }
for crate in bindgen pkg-config; do
  ls -d "$registry/$crate"-0.* >/dev/null 2>&1 ||
    { echo "SKIP: no $crate crate in $registry (Debian package librust-$crate-dev)"; exit 77; }
done
work=$out/rust-crates
mkdir -p "$work/pkgconfig"
# accel.pc for this build tree: the headers of the source tree, the library
# of the build directory
cat >"$work/pkgconfig/accel.pc" <<PC
Name: accel
Description: libaccel, uninstalled build
Version: $version
Libs: -L$libdir -laccel
Cflags: -I$src/include
PC
# A copy of the crates (mtimes kept, so that cargo rebuilds only what
# changed): cargo writes Cargo.lock next to the workspace, never in the
# source tree.
rm -rf "$work/src"
cp -Rp "$src/rust" "$work/src"
cd "$work/src"
PKG_CONFIG_PATH="$work/pkgconfig" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  CARGO_TARGET_DIR="$work/target" ACCEL_TEST_DATA="$src/tests/data" \
  cargo --config debian-registry.toml test --offline --no-fail-fast --jobs 2 2>&1
