#!/bin/sh
# The shared library exports exactly the accel_* functions the public headers
# declare (nothing internal, nothing from the static CUDA runtime), has the
# soname libaccel.so.<ABI>, and never links the NVIDIA driver or the shared
# CUDA runtime, so it loads on machines without them.
set -eu
lib=$1
headers=$2
fail=0

exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
declared=$(grep -h 'ACCEL_API' "$headers"/*.h | grep -v '#define' |
           sed -E 's/.*[ *](accel_[a-z0-9_]+)\(.*/\1/' | sort -u)

stray=$(printf '%s\n' "$exported" | grep -Ev '^accel_[a-z0-9]' || true)
internal=$(printf '%s\n' "$exported" | grep -E '^accel__' || true)
if [ -n "$stray$internal" ]; then
  echo "FAIL: symbols exported that are not public accel_ functions:"; printf '%s\n' $stray $internal; fail=1
fi
missing=$(printf '%s\n' "$declared" | grep -vxF "$exported" || true)
if [ -n "$missing" ]; then echo "FAIL: declared ACCEL_API but not exported:"; printf '%s\n' $missing; fail=1; fi
extra=$(printf '%s\n' "$exported" | grep -vxF "$declared" || true)
if [ -n "$extra" ]; then echo "FAIL: exported but not declared in a public header:"; printf '%s\n' $extra; fail=1; fi

abi=$(sed -n 's/^#define ACCEL_ABI_VERSION \([0-9]*\)$/\1/p' "$headers/core.h")
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libaccel.so.$abi" ] || { echo "FAIL: soname '$soname', expected libaccel.so.$abi"; fail=1; }
if readelf -d "$lib" | grep NEEDED | grep -Eq 'libcuda\.|libcudart\.|libnvidia'; then
  echo "FAIL: links the NVIDIA driver or the shared CUDA runtime:"; readelf -d "$lib" | grep NEEDED; fail=1
fi
n=$(printf '%s\n' "$exported" | wc -l)
[ $fail -eq 0 ] && echo "ok: $n accel_ symbols exported, all declared; soname $soname; no driver dependency"
exit $fail
