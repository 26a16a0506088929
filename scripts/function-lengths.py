#!/usr/bin/env python3
"""List the functions longer than a limit in the project's C, C++, CUDA and Python code.

    scripts/function-lengths.py [--max 120] [--top N] [SOURCE_ROOT]

A function's length counts the lines from its signature's first line to its
closing brace (Python: from `def` to its last line). Initialised data (tables:
`... = { ... }`) is not a function and is not counted. Exits 1 when a function
is longer than --max, listing each; --top N also prints the N longest.
"""
import argparse
import ast
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from csource import strip  # noqa: E402

C_EXT = (".c", ".h", ".cu", ".cpp", ".cuh")
SKIP = ("tests/fuzz/corpus/", "tests/data/", "build")


def c_functions(path):
    """(name, first line, last line) of every function body in a C/C++/CUDA file."""
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    found, stack, header_start = [], [], 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            in_function = any(kind == "function" for kind, _, _ in stack)
            inside_other = any(kind in ("data", "type") for kind, _, _ in stack)
            kind = "block"
            if not in_function and not inside_other:
                header = text[header_start:i]
                words = header.split()
                if re.search(r"\bextern\b|\bnamespace\b", header) and "(" not in header:
                    kind = "scope"  # extern "C" { ... }, namespace { ... }
                elif "=" in header.replace("==", "").replace("!=", "").replace("<=", "").replace(">=", ""):
                    kind = "data"
                elif "(" in header and not (words and words[0] in ("struct", "union", "enum", "typedef")):
                    kind = "function"
                else:
                    kind = "type"
            # a function starts at its signature's first non-blank line
            lead = text[header_start:i]
            start = line - lead.lstrip().count("\n") if kind == "function" else line
            stack.append((kind, start, text[header_start:i]))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start, header = stack.pop()
                if kind == "function":
                    m = re.findall(r"([A-Za-z_][A-Za-z_0-9:#]*)\s*\(", header)
                    found.append((m[0] if m else "?", start, line))
            header_start = i + 1
        elif c == ";" and not any(k in ("function", "data") for k, _, _ in stack):
            header_start = i + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # a preprocessor line ends whatever header came before it
            j = text.find("\n", i)
            while j > 0 and text[j - 1] == "\\":
                j = text.find("\n", j + 1)
            if not stack or stack[-1][0] == "scope":
                header_start = (j if j > 0 else len(text))
    return found


def py_functions(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    return [(node.name, node.lineno, node.end_lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def project_files(root):
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
    return sorted(f for f in out if f.endswith(C_EXT + (".py",)) and not f.startswith(SKIP))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--top", type=int, default=0)
    a = ap.parse_args()
    rows = []
    for f in project_files(a.root):
        p = os.path.join(a.root, f)
        if not os.path.isfile(p):
            continue
        fns = py_functions(p) if f.endswith(".py") else c_functions(p)
        rows += [(last - first + 1, f, first, name) for name, first, last in fns]
    rows.sort(reverse=True)
    for n, f, first, name in rows[:a.top]:
        print("%5d  %s:%d  %s" % (n, f, first, name))
    long = [r for r in rows if r[0] > a.max]
    for n, f, first, name in long:
        print("%s:%d: %s is %d lines (more than %d)" % (f, first, name, n, a.max))
    print("function lengths: %d functions in %d files; %d longer than %d lines"
          % (len(rows), len({r[1] for r in rows}), len(long), a.max))
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
