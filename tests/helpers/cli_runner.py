"""Running the `fastq` command as a user does (python -m fastq in a subprocess, with this
checkout's fastq first on PYTHONPATH), shared by the tests of tests/cli/ and
tests/sources/ (fastq prepare)."""
import importlib.util
import os
import subprocess
import sys

import fastq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))


def run_cli(*args, timeout=900):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.run([sys.executable, "-m", "fastq", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def installed(*mods):
    return all(importlib.util.find_spec(m) is not None for m in mods)
