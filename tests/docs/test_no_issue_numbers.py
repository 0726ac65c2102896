"""The docs and the shipped code read as a reference: no "issue N" in docs/, README, the
benchmarks, scripts, csrc/ or fastq/ (the dated history in docs/benchmarks.md names dates and
commits instead).  Tests may name the issue a regression test came from."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATTERN = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
TREES = ("docs", "benchmarks", "scripts", "csrc", "fastq", "examples", ".ci")
FILES = ("README.md", "setup.py", "pyproject.toml")
SUFFIXES = (".md", ".py", ".pyx", ".pxi", ".pxd", ".pyi", ".c", ".cpp", ".h", ".sh", ".toml", ".txt", "")


def _files():
    for name in FILES:
        yield os.path.join(ROOT, name)
    for tree in TREES:
        for d, dirs, names in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", "build")]
            for n in names:
                stem, ext = os.path.splitext(n)
                generated = ext == ".cpp" and os.path.exists(os.path.join(d, stem + ".pyx"))  # Cython's output
                if ext in SUFFIXES and not generated:
                    yield os.path.join(d, n)


def test_no_issue_numbers_in_docs_and_code():
    hits = []
    for path in _files():
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                if PATTERN.search(line):
                    hits.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()[:100]}")
    assert not hits, "say what the rule or target is, not which issue asked for it:\n" + "\n".join(hits)
