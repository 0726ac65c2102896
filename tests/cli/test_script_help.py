"""Every script under benchmarks/ and examples/ takes named arguments and answers --help
before it loads a framework, also from a copy outside the checkout; run from a checkout
whose fastq is not built, a benchmark uses the installed fastq or says what to run
(issue 29: bench_image_single.py and bench_tp_ops.py died on --help, and every benchmark
put an unbuilt checkout first on sys.path and failed with a circular-import error).
tests/wheel/test_wheel.py runs the same --help check against the installed wheel, in a venv
that holds nothing but numpy."""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fastq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the fastq under test: this checkout's build, or the installed one (scripts/test_installed.sh)
PKG = os.path.dirname(os.path.abspath(fastq.__file__))


def scripts():
    """benchmarks/*.py and examples/*.py, without the helper modules (_*.py)."""
    return sorted(os.path.relpath(p, ROOT) for d in ("benchmarks", "examples")
                  for p in glob.glob(os.path.join(ROOT, d, "*.py")) if not os.path.basename(p).startswith("_"))


def copy_scripts(dst):
    for d in ("benchmarks", "examples"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(dst, d), ignore=shutil.ignore_patterns("__pycache__"))


def numpy_only(tmp_path, with_fastq=False):
    """A directory holding numpy alone (links), and the fastq under test with_fastq, for
    `python -S` with it on PYTHONPATH: no site-packages, so no framework."""
    d = tmp_path / ("numpy_fastq" if with_fastq else "numpy_only")
    d.mkdir()
    site = os.path.dirname(os.path.dirname(np.__file__))
    for name in ("numpy", "numpy.libs"):
        if os.path.exists(os.path.join(site, name)):
            os.symlink(os.path.join(site, name), d / name)
    if with_fastq:
        os.symlink(PKG, d / "fastq")
    return str(d)


def run(args, cwd, pythonpath, isolated=False):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = pythonpath
    cmd = [sys.executable] + (["-S"] if isolated else []) + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=str(cwd))


def test_there_are_scripts_to_check():
    names = scripts()
    assert "benchmarks/bench_image_single.py" in names and "examples/train_keras.py" in names, names
    assert len(names) >= 19, names


@pytest.mark.parametrize("script", scripts())
def test_help_from_a_copy_with_numpy_and_fastq_only(script, tmp_path):
    """A copy of benchmarks/ and examples/ outside the checkout, run by a Python that sees
    numpy and the fastq under test and nothing else (no TensorFlow, cv2, torch...)."""
    copy_scripts(tmp_path)
    r = run([script, "--help"], tmp_path, numpy_only(tmp_path, with_fastq=True), isolated=True)
    assert r.returncode == 0, f"{script} --help: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert r.stdout.startswith("usage: " + os.path.basename(script)), r.stdout[:300]
    assert "Traceback" not in r.stderr, r.stderr


def unbuilt_checkout(tmp_path):
    """fastq's Python files (of the fastq under test) and the benchmarks, without any
    compiled module."""
    d = tmp_path / "checkout"
    shutil.copytree(PKG, d / "fastq", ignore=shutil.ignore_patterns("*.so", "*.c", "*.cpp", "*.o", "__pycache__"))
    copy_scripts(d)
    assert not glob.glob(str(d / "fastq" / "_native" / "*.so")) and (d / "fastq" / "__init__.py").exists()
    return d


def test_an_unbuilt_checkout_says_what_to_run(tmp_path):
    """No installed fastq either: the script stops, naming the problem and both ways out
    (not Python's 'cannot import name _core from partially initialized module')."""
    d = unbuilt_checkout(tmp_path)
    numpy_dir = numpy_only(tmp_path)
    for script in ("benchmarks/bench_images.py", "benchmarks/bench_tp_ops.py"):
        for pythonpath in (numpy_dir, str(d)):  # also with the checkout itself on PYTHONPATH
            r = run([script, "--help"], d, pythonpath, isolated=True)
            assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
            assert f"the fastq of this checkout ({d / 'fastq'}) is not built" in r.stderr, r.stderr
            assert "python setup.py build_ext --inplace" in r.stderr and "fastq_loader" in r.stderr, r.stderr


def test_an_unbuilt_checkout_uses_the_installed_fastq(tmp_path):
    """With a fastq importable from elsewhere (the fastq under test: the installed one, or
    this checkout's build standing in for it), the unbuilt checkout is kept off sys.path,
    also when PYTHONPATH names it, and a line says which fastq runs."""
    d = unbuilt_checkout(tmp_path)
    probe = d / "benchmarks" / "which_fastq.py"
    probe.write_text("import _checkout  # noqa: F401\nimport fastq\nprint(fastq.__file__)\n")
    pythonpath = str(d) + os.pathsep + os.path.dirname(PKG)
    r = run(["benchmarks/which_fastq.py"], d, pythonpath)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(PKG, "__init__.py"), r.stdout
    assert f"not built; using the installed fastq ({PKG})" in r.stderr, r.stderr
    r = run(["benchmarks/bench_image_single.py", "--help"], d, pythonpath)
    assert r.returncode == 0 and r.stdout.startswith("usage: bench_image_single.py"), r.stderr


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "fastq", "__init__.py")),
                    reason="the suite runs against an installed fastq (scripts/test_installed.sh): no checkout build")
def test_a_built_checkout_measures_its_own_build(tmp_path):
    """This checkout (built in place) goes first, whatever else is installed."""
    probe_dir = tmp_path / "elsewhere"
    probe_dir.mkdir()
    probe = os.path.join(ROOT, "benchmarks", "_checkout.py")
    r = run(["-c", f"import runpy, sys; sys.argv = ['x']; runpy.run_path({probe!r}); import fastq; "
                   f"print(fastq.__file__)"], probe_dir, "")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(ROOT, "fastq", "__init__.py"), r.stdout
