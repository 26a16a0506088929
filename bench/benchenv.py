"""Shared by the benchmark scripts: the peers live in a virtual environment
with pinned versions, created on first use."""
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def ensure_venv(build, name, requirements):
    """Re-run the calling script inside ROOT/build/name, a venv holding the
    packages of bench/<requirements> (created the first time)."""
    venv = os.path.join(ROOT, build, name)
    py = os.path.join(venv, "bin", "python3")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(py):
        print("bench: creating %s with the pinned peers" % venv, file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "-r", os.path.join(HERE, requirements)], check=True)
    os.execv(py, [py] + sys.argv)


def cpu_name():
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
