#!/bin/sh
# Rust: bindgen generates bindings from the public header (accel_* functions
# and the types they use), rustc compiles examples/rust/main.rs against them,
# and the program links the shared library and calls it.
set -eu
src=$1 out=$2 libdir=$3 sanitized=$4
if [ "$sanitized" = 1 ]; then echo "SKIP: sanitizer build (rustc would need the sanitizer runtime)"; exit 77; fi
command -v bindgen >/dev/null 2>&1 || { echo "SKIP: bindgen is not installed (Debian package bindgen)"; exit 77; }
command -v rustc >/dev/null 2>&1 || { echo "SKIP: rustc is not installed"; exit 77; }
work=$out/rust
rm -rf "$work"
mkdir -p "$work"
bindgen "$src/include/accel/accel.h" --allowlist-function 'accel_.*' --allowlist-var 'ACCEL_.*' \
  -o "$work/bindings.rs" -- -I"$src/include"
ACCEL_BINDINGS="$work/bindings.rs" rustc --edition 2021 -O "$src/examples/rust/main.rs" \
  -o "$work/accel_rust" -L "$libdir" -l accel
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/accel_rust"
