"""Typing: py.typed, stubs for the Cython modules that match them, and mypy over
the package and the examples (the same command CI runs: `python -m mypy fastq examples`)."""
import ast
import os
import subprocess
import sys

import pytest

import fastq
from fastq._native import _core, _cuda, _image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_mypy(*args, cwd=ROOT):
    # MYPYPATH: mypy resolves `import fastq` from a file outside the checkout even when
    # fastq is an editable install (whose import hook mypy does not follow).  An installed
    # fastq (a wheel: scripts/test_installed.sh) is found through its py.typed marker, and
    # mypy refuses a site-packages directory on MYPYPATH.
    where = os.path.dirname(os.path.dirname(fastq.__file__))
    env = dict(os.environ)
    if os.path.basename(where) not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = where
    return subprocess.run([sys.executable, "-m", "mypy", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env=env)


def test_package_is_marked_typed():
    assert os.path.exists(os.path.join(os.path.dirname(fastq.__file__), "py.typed"))


@pytest.mark.parametrize("mod", [_core, _image, _cuda], ids=lambda m: m.__name__)
def test_stubs_name_what_the_compiled_module_has(mod):
    stub = os.path.join(ROOT, *mod.__name__.split(".")) + ".pyi"
    tree = ast.parse(open(stub).read())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assert hasattr(mod, node.name), f"{stub}: {node.name} is not in {mod.__name__}"
            if isinstance(node, ast.ClassDef):
                cls = getattr(mod, node.name)
                for item in node.body:
                    name = item.name if isinstance(item, ast.FunctionDef) else \
                        item.target.id if isinstance(item, ast.AnnAssign) else None
                    if issubclass(cls, BaseException) and isinstance(item, ast.AnnAssign):
                        continue  # set per instance by __init__
                    if name and name != "__init__":
                        assert name in dir(cls), f"{stub}: {node.name}.{name} is not in the compiled class"
    public = {n for n in dir(mod) if not n.startswith("_") and (callable(getattr(mod, n)))}
    named = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert public - named - {"error_for_code"} <= {"np", "threading"}, public - named


def test_mypy_passes_on_the_package_and_examples():
    res = run_mypy("fastq", "examples")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.tf
def test_mypy_catches_misuse_of_the_public_api(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import fastq\n"
        "import fastq.tf\n"
        "from fastq import ops\n"
        "src = fastq.sources.Files(['a.jpg'], [0])\n"
        "p = fastq.Pipeline(src, batch_size='4')\n"
        "ops.CenterCrop(size='big')\n"
        "n: str = len(p)\n"
        "fastq.tf.dataset(p, device=0)\n")
    res = run_mypy("--config-file", os.path.join(ROOT, "pyproject.toml"), str(bad),
                   cwd=str(tmp_path))
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    assert 'bad.py:5: error: Argument "batch_size" to "Pipeline" has incompatible type "str"' in out
    assert "bad.py:6: error" in out and "bad.py:7: error" in out and "bad.py:8: error" in out
