"""Which fastq the scripts of this folder measure (imported first by each of them).

Run from a checkout (``python benchmarks/bench_<name>.py``): when the checkout's fastq is built
in place (its compiled modules in fastq/_native/), the checkout goes first on
sys.path, so that its own build is measured.  When it is not built, the checkout is kept
off sys.path and the installed fastq (the wheel, for example) is used; a line on stderr
says which.  With neither, the script stops and says what to run.  A copy of this folder
outside a checkout uses the installed fastq.  Not a benchmark itself.
"""
import importlib.machinery
import importlib.util
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(REPO, "fastq")


def built(pkg=PKG):
    """True when pkg holds the compiled modules fastq needs (fastq._native._core, fastq._native._image)."""
    return all(any(os.path.exists(os.path.join(pkg, "_native", m + s)) for s in importlib.machinery.EXTENSION_SUFFIXES)
               for m in ("_core", "_image"))


def _is_repo(entry):
    return os.path.abspath(entry or os.getcwd()) == REPO


def choose(script):
    """Put this checkout's fastq first when it is built; else use the installed one, or exit."""
    if not os.path.isfile(os.path.join(PKG, "__init__.py")):
        return  # not a checkout: whatever fastq is installed
    if built():
        if REPO not in sys.path:
            sys.path.insert(0, REPO)
        return
    sys.path[:] = [p for p in sys.path if not _is_repo(p)]  # PYTHONPATH or the current directory
    spec = importlib.util.find_spec("fastq")
    origin = spec.origin if spec is not None else None
    if not origin or os.path.abspath(origin).startswith(PKG + os.sep):
        sys.exit(f"{script}: the fastq of this checkout ({PKG}) is not built (no compiled fastq._native._core / "
                 f"fastq._native._image in it), and no installed fastq was found.  Either build it in place:\n"
                 f"    cd {REPO} && python setup.py build_ext --inplace    (scripts/setup.sh installs what "
                 f"the build needs)\nor install the wheel:\n"
                 f"    pip install dist/fastq_loader-*.whl    (from bash scripts/build_wheel.sh)")
    sys.stderr.write(f"{script}: the fastq of this checkout is not built; using the installed fastq "
                     f"({os.path.dirname(origin)})\n")


choose(os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "benchmarks")
