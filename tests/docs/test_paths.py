"""Paths the docs and the code comments name exist, and the hand build lines run.

Every repository path written in docs/*.md, README.md, and in the comments, docstrings
and build lines of csrc/, fastq/, tests/, scripts/ and benchmarks/ (a token that starts
with csrc/, fastq/, tests/, scripts/, docs/ or benchmarks/ and ends in a file extension or
a slash) names a file or folder of the repository.  Tokens that are patterns rather than
paths (holding <, >, *, {, } or "...") are skipped; everything else is checked as written.

The build lines at the top of csrc/tests/test_ring.c, test_image.cpp and test_restart_crop.cpp
(the comment lines that show how to build each test by hand from the repository root)
are compiled and run as written, in a temporary folder that links csrc/ from the repo.
"""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOP = ("csrc", "fastq", "tests", "scripts", "docs", "benchmarks")
# A path token: one of the top folders, then path characters; it must end in
# ".ext" or "/" to count as a path (bare words like "fastq/ops" in prose are skipped).
_TOKEN = re.compile(r"(?<![\w./-])((?:%s)/[\w./<>*{}\-]*)" % "|".join(TOP))
_PATTERN_CHARS = set("<>*{}")
CODE_EXT = (".py", ".pyx", ".pxi", ".pxd", ".c", ".cc", ".cpp", ".h", ".sh")
SKIP_DIRS = {"__pycache__", "bin", "build", ".git"}
# Not checked: files other engineers own while they are being rewritten.
SKIP_FILES: set = set()
SKIP_PREFIXES: tuple = ()
# Paths the build makes (not in a checkout): the TF kernel sources setup.py copies into
# the package, and the C++ file Cython generates for the test module.
GENERATED = {"fastq/_tf_kernel/", "tests/native/_testing.cpp"}


def _candidates(text):
    for m in _TOKEN.finditer(text):
        tok = m.group(1)
        if "..." in tok or _PATTERN_CHARS & set(tok):
            continue
        tok = tok.rstrip(".")  # sentence end
        if tok.endswith("/"):
            yield tok
        elif re.search(r"\.[A-Za-z0-9]+$", tok.rsplit("/", 1)[-1]):
            yield tok


def _comments(path, text):
    """The comment and docstring text of a code file (string literals too for Python:
    docstrings and messages both name paths a reader follows)."""
    if path.endswith((".c", ".cc", ".cpp", ".h")):
        parts = re.findall(r"/\*.*?\*/", text, flags=re.S)
        parts += re.findall(r"//[^\n]*", text)
        return "\n".join(parts)
    if path.endswith(".sh"):
        return "\n".join(re.findall(r"#[^\n]*", text))
    # Python / Cython: comments and triple-quoted strings.
    parts = re.findall(r"#[^\n]*", text)
    parts += re.findall(r'"""(.*?)"""', text, flags=re.S)
    parts += re.findall(r"'''(.*?)'''", text, flags=re.S)
    return "\n".join(parts)


def _sources():
    """(relative path, text to scan) of every file the rule covers."""
    out = [("README.md", None)]
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if name.endswith(".md"):
            out.append(("docs/" + name, None))
    for top in ("csrc", "fastq", "tests", "scripts", "benchmarks"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith(CODE_EXT):
                    rel = os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/")
                    out.append((rel, "code"))
    for rel, kind in out:
        if rel in SKIP_FILES or rel.startswith(SKIP_PREFIXES):
            continue
        if not _tracked_or_present(rel):
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        yield rel, (_comments(rel, text) if kind == "code" else text)


def _generated(rel):
    """Build outputs are not the repository's text: Cython's C/C++ next to its .pyx (and, in
    a git checkout, any file git ignores)."""
    stem, ext = os.path.splitext(rel)
    if ext in (".c", ".cpp") and os.path.isfile(os.path.join(ROOT, stem + ".pyx")):
        return True
    return rel in _ignored()


_IGNORED = None


def _ignored():
    global _IGNORED
    if _IGNORED is None:
        _IGNORED = set()
        if os.path.exists(os.path.join(ROOT, ".git")):  # a checkout (a worktree has a .git file)
            import subprocess
            res = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard"], cwd=ROOT,
                                 capture_output=True, text=True)
            if res.returncode == 0:
                _IGNORED = set(res.stdout.split("\n"))
    return _IGNORED


def _tracked_or_present(rel):
    return os.path.isfile(os.path.join(ROOT, rel)) and not _generated(rel)


def _exists(tok):
    return os.path.exists(os.path.join(ROOT, tok.rstrip("/")))


def missing_paths():
    bad = []
    for rel, text in _sources():
        for tok in sorted(set(_candidates(text))):
            if tok not in GENERATED and not _exists(tok):
                bad.append(f"{rel}: {tok}")
    return bad


def test_named_paths_exist():
    bad = missing_paths()
    assert not bad, "paths named in docs/comments that do not exist:\n  " + "\n  ".join(bad)


def test_token_rule():
    # The rule itself: paths with an extension or a trailing slash count, patterns do not.
    found = list(_candidates("see csrc/ring/fq_ring.c, docs/ops.md. and tests/core/ and "
                             "fastq/ops/_<family>.py csrc/image/*.cpp fastq/ops and "
                             "docs/x.md... mytests/foo.py"))
    assert found == ["csrc/ring/fq_ring.c", "docs/ops.md", "tests/core/"]


# --- the hand build lines of csrc/tests/ -----------------------------------------------

BUILD_FILES = ("csrc/tests/test_ring.c", "csrc/tests/test_image.cpp", "csrc/tests/test_restart_crop.cpp")


def build_lines(rel):
    """The build command in the leading comment of a csrc/tests/ file: the lines from the
    first one that runs a compiler (or mkdir before it) through the last continuation."""
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        head = f.read().split("*/", 1)[0]
    lines = [re.sub(r"^\s*(/\*|\*)", "", ln) for ln in head.splitlines()]
    cmd, on = [], False
    for ln in lines:
        body = ln.strip()
        if not on and re.match(r"(mkdir|gcc|g\+\+|cc|clang)\b", body):
            on = True
        if on:
            cmd.append(body[:-1].rstrip() if body.endswith("\\") else body)
            if not body.endswith("\\"):
                break
    return " ".join(cmd)


@pytest.mark.parametrize("rel", BUILD_FILES)
def test_build_line_found(rel):
    cmd = build_lines(rel)
    assert re.search(r"\b(gcc|g\+\+)\b", cmd) and rel in cmd, cmd
    # Every csrc/ path of the command (after the shell expands nothing) exists.
    for tok in re.findall(r"(?<![\w./])\.{0,2}/?csrc/[\w./-]+", cmd):
        tok = re.sub(r"^(\.\./)+", "", tok)
        assert _exists(tok), f"{rel}: build line names {tok}, which does not exist"


def _have(tool, header=None):
    if shutil.which(tool) is None:
        return False
    return header is None or os.path.exists(header)


@pytest.mark.slow
@pytest.mark.parametrize("rel", BUILD_FILES)
def test_build_line_runs(rel, tmp_path):
    assert _have("gcc") and (rel.endswith(".c") or _have("g++", "/usr/include/opencv4/opencv2/core.hpp")), \
        "the build lines need gcc/g++ and OpenCV's headers: run scripts/setup.sh --full"
    cmd = build_lines(rel)
    os.symlink(os.path.join(ROOT, "csrc"), tmp_path / "csrc")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    r = subprocess.run(["bash", "-c", "set -e; " + cmd], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"{rel}: {cmd}\nexit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
