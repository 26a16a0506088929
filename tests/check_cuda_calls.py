#!/usr/bin/env python3
"""Every CUDA call in kernels/*.cu goes through the one check.

    check_cuda_calls.py KERNELS_DIR

kernels/cuda_util.h holds the only raw launches and the executor's raw
calls; a stage file checks what each call returned with accel__cuda_check
(never cudaGetLastError, whose answer may be an earlier call's), and takes
device and pinned memory through the buffers there (dbuf, hbuf), which
check and release it. Fails, one line per finding, when a kernels/*.cu file
  * launches a kernel with <<<...>>> (accel__cuda_launch returns the
    launch's own error),
  * calls cudaGetLastError or cudaPeekAtLastError,
  * calls a cuda* runtime function (but cudaGetErrorName and
    cudaGetErrorString, which return no error), accel__cuda_launch, or one of the
    executor's CUDA calls (upload, download, zero, sync, host_alloc, copy2d,
    launch) anywhere but inside the arguments of accel__cuda_check(...),
  * calls the executor's alloc, release, host_alloc or host_free itself
    instead of using dbuf and hbuf (all but backend.cu, which implements
    them), or reaches past the executor to the device state (its st).
"""
import os
import re
import sys

# the shared reader of C sources (comments and literals blanked)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from csource import strip  # noqa: E402

CHECK = "accel__cuda_check"
EXECUTOR_CALLS = {"upload", "download", "zero", "sync", "host_alloc", "copy2d", "launch"}
BUFFER_CALLS = {"alloc", "release", "host_alloc", "host_free"}  # dbuf and hbuf make these
BACKEND = "backend.cu"  # the backend itself: device state, pool and scope
FORBIDDEN = {"cudaGetLastError", "cudaPeekAtLastError"}
DESCRIBE = {"cudaGetErrorName", "cudaGetErrorString"}  # they describe an error and return none
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def findings(path):
    text = strip(open(path, encoding="utf-8").read())
    line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    stage_file = os.path.basename(path) != BACKEND
    found = []
    for m in re.finditer(r"<<<", text):
        found.append((line_of(m.start()), "a kernel launched with <<<...>>> (use accel__cuda_launch)"))
    if stage_file:
        for m in re.finditer(r"(?:->|\.)\s*st\b", text):
            found.append((line_of(m.start()), "the device state used directly (the executor's calls reach it)"))
    stack = []  # the callee of each open parenthesis
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        m = IDENT.match(text, i) if (c.isalpha() or c == "_") and (i == 0 or not (text[i - 1].isalnum() or
                                                                                 text[i - 1] == "_")) else None
        if m:
            name, j = m.group(0), m.end()
            while j < n and text[j] in " \t\n":
                j += 1
            if j < n and text[j] == "(":
                member = text[:i].rstrip().endswith(("->", "."))
                checked_kind = ((re.match(r"cuda[A-Z]", name) and name not in DESCRIBE) or
                                name == "accel__cuda_launch" or (member and name in EXECUTOR_CALLS))
                if name in FORBIDDEN:
                    found.append((line_of(i), "%s: a stale error may answer it (the calls' own errors only)" % name))
                elif stage_file and member and name in BUFFER_CALLS:
                    found.append((line_of(i), "%s(...): device and pinned memory come from dbuf and hbuf" % name))
                elif checked_kind and CHECK not in stack:
                    found.append((line_of(i), "%s(...) is not checked with %s" % (name, CHECK)))
                stack.append(name)
                i = j + 1
                continue
            i = m.end()
            continue
        if c == "(":
            stack.append("")
        elif c == ")" and stack:
            stack.pop()
        elif c in ";{}":
            stack.clear()  # a statement ended: no call is still open (lambda bodies inside a call excepted below)
        i += 1
    return sorted(found)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    files = sorted(f for f in os.listdir(root) if f.endswith(".cu"))
    if not files:
        sys.exit("check_cuda_calls: no .cu files in %s" % root)
    bad = 0
    for f in files:
        for line, what in findings(os.path.join(root, f)):
            print("%s:%d: %s" % (os.path.join(root, f), line, what))
            bad += 1
    print("check_cuda_calls: %d .cu files, %d findings" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
