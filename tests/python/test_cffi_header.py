"""cffi parses the preprocessed public header (no hand-written declarations)
and calls the library through it: the header is FFI-friendly."""
import os
import subprocess
import sys

from support import require

cffi = require("cffi")

cc = sys.argv[1] if len(sys.argv) > 1 else "cc"
include = os.path.join(os.environ["ACCEL_SOURCE_ROOT"], "include")
pre = subprocess.run([cc, "-E", "-std=c11", "-I", include, "-x", "c", os.path.join(include, "accel", "accel.h")],
                     check=True, capture_output=True, text=True).stdout
# keep only what comes from our headers (line markers name the file)
keep, lines = False, []
for line in pre.splitlines():
    if line.startswith("# "):
        keep = "/accel/" in line.split('"')[1] if '"' in line else keep
        continue
    if keep and line.strip():
        lines.append(line)
ffi = cffi.FFI()
ffi.cdef("\n".join(lines))
lib = ffi.dlopen(os.environ["ACCEL_LIBRARY"])
version = ffi.string(lib.accel_version_string()).decode()
assert version.count(".") == 2, version
opts = ffi.new("accel_ctx_options *")
assert lib.accel_ctx_options_init(opts, ffi.sizeof("accel_ctx_options")) == lib.ACCEL_OK
assert opts.struct_size == ffi.sizeof("accel_ctx_options")
opts.backend = lib.ACCEL_BACKEND_CPU
ctx = ffi.new("accel_ctx **")
assert lib.accel_ctx_create(opts, ctx) == lib.ACCEL_OK
rgb = ffi.new("uint8_t[6]", [255, 0, 0, 0, 0, 255])
gray = ffi.new("uint8_t[2]")
src, dst = ffi.new("accel_array *"), ffi.new("accel_array *")
assert lib.accel_array_init(src, rgb, lib.ACCEL_DTYPE_U8, 3, ffi.new("int64_t[3]", [1, 2, 3])) == 0
assert lib.accel_array_init(dst, gray, lib.ACCEL_DTYPE_U8, 2, ffi.new("int64_t[2]", [1, 2])) == 0
assert lib.accel_image_to_gray(ctx[0], src, dst) == lib.ACCEL_OK
assert list(gray) == [76, 29], list(gray)
lib.accel_ctx_destroy(ctx[0])

# The Python package's ctypes structs must have the C layout: the size the
# header gives (the struct_size Python passes) and every field's offset.
import ctypes  # noqa: E402
from accel import _native  # noqa: E402

# every module of the package declares the structs of its part of the ABI
modules = [m for name, m in sys.modules.items() if name == "accel" or name.startswith("accel.")]
structs = {c for m in modules for c in vars(m).values()
           if isinstance(c, type) and issubclass(c, ctypes.Structure) and c not in (ctypes.Structure, _native.Struct)}
missing = [c.__name__ for c in structs if c not in _native.C_NAMES]
assert not missing, "ctypes structs without a C name in _native.C_NAMES: %s" % missing
for cls, cname in _native.C_NAMES.items():
    assert ctypes.sizeof(cls) == ffi.sizeof(cname), (cname, ctypes.sizeof(cls), ffi.sizeof(cname))
    for field in cls._fields_:
        name = field[0]
        assert getattr(cls, name).offset == ffi.offsetof(cname, name), (cname, name)
    cfields = [f for f, _ in ffi.typeof(cname).fields]
    assert [f[0] for f in cls._fields_] == cfields, (cname, [f[0] for f in cls._fields_], cfields)
print("ok: %d ctypes structs match their C layouts" % len(_native.C_NAMES))
print("ok: cffi parsed %d declaration lines; libaccel %s called through them" % (len(lines), version))
