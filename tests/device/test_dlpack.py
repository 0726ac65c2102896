"""Runs tests/helpers/dlpack_cases.py (PyTorch and JAX through DLPack) in its own pytest
process, so that JAX's and torch's threads never share a process with the
suite's fork() tests."""
import os
import subprocess
import sys

import pytest

import jax  # noqa: F401  (test requirements: fail here, not in the child, when missing)
import torch  # noqa: F401

pytestmark = [pytest.mark.torch, pytest.mark.jax]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # a pytest process that imports torch and JAX (8 s)
def test_torch_and_jax_dlpack_cases():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          os.path.join(ROOT, "tests", "helpers", "dlpack_cases.py")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    assert "5 passed" in res.stdout, res.stdout[-3000:]
