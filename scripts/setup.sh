#!/usr/bin/env bash
# Installs what fastq needs on Debian 12 / Ubuntu (as root, or with sudo) and builds the
# extension in place (editable install, linked against the system's OpenCV 4.6 and
# libjpeg-turbo).  Safe to re-run.
#
#   scripts/setup.sh          light: what the demo needs (scripts/demo.sh, the main job):
#                             a compiler, the OpenCV/libjpeg-turbo/zlib headers, and
#                             requirements-demo.txt (build requirements, cv2, scikit-image
#                             and scikit-learn for the demo's photos; about 150 MB).
#   scripts/setup.sh --full   everything (scripts/test.sh, the test command): also the wheel
#                             tools (nasm, cmake, ninja, auditwheel...), clang for the
#                             fuzzers, requirements-dev.txt (TensorFlow, torch, JAX, mypy...;
#                             several GB), and the test-only module fastq._native._testing.
#   scripts/setup.sh --wheel  only what scripts/build_wheel.sh needs (a compiler, nasm, xz,
#                             bzip2, patch, binutils; requirements-wheel.txt); builds nothing.
#   scripts/setup.sh --wait-for-apt   only waits until apt/dpkg are free (see below).
#
# apt/dpkg locks: on a freshly booted cloud machine the system's own updates
# (unattended-upgrades, cloud-init) hold dpkg's lock for a while.  setup.sh waits for it
# (FASTQ_APT_LOCK_TIMEOUT seconds, default 600, saying what it waits for) instead of
# failing, and gives apt-get the remaining time too (-o DPkg::Lock::Timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
FULL=0
WHEEL=0
WAIT_ONLY=0
case ${1:-} in
    --full) FULL=1 ;;
    --wheel) WHEEL=1 ;;
    --wait-for-apt) WAIT_ONLY=1 ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--full | --wheel | --wait-for-apt]" >&2; exit 2 ;;
esac
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The locks apt and dpkg take (fcntl locks; FASTQ_APT_LOCKS overrides the list, for tests).
APT_LOCKS=${FASTQ_APT_LOCKS:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}
APT_LOCK_TIMEOUT=${FASTQ_APT_LOCK_TIMEOUT:-600}
APT_T0=$SECONDS

# Wait until no other process holds one of $APT_LOCKS (as apt itself tests them: a
# non-blocking fcntl lock, taken and dropped at once), at most what is left of
# APT_LOCK_TIMEOUT; says once what it waits for.  Fails with a message after the timeout.
wait_for_apt() {
    local left=$((APT_LOCK_TIMEOUT - (SECONDS - APT_T0)))
    [ "$left" -gt 0 ] || left=1
    if ! command -v "$PY" >/dev/null 2>&1; then
        return 0  # no Python yet: apt-get's own DPkg::Lock::Timeout (below) waits
    fi
    # shellcheck disable=SC2086
    $SUDO "$PY" - "$left" $APT_LOCKS <<'PYEOF'
import fcntl, os, sys, time
timeout, locks = float(sys.argv[1]), sys.argv[2:]
t0 = time.monotonic()
told = False

def holder(path):
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    except PermissionError:
        sys.exit(f"setup.sh: cannot open {path} (run as root or with sudo)")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    except OSError:
        return path
    finally:
        os.close(fd)

while True:
    busy = [p for p in locks if holder(p)]
    if not busy:
        if told:
            print(f"setup.sh: apt/dpkg are free after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        sys.exit(0)
    waited = time.monotonic() - t0
    if waited >= timeout:
        sys.exit(f"setup.sh: another package manager still holds {', '.join(busy)} after {waited:.0f} s "
                 f"(a system update?). Let it finish (ps -C apt-get,apt,dpkg,unattended-upgr) and run "
                 f"setup.sh again, or wait longer: FASTQ_APT_LOCK_TIMEOUT=<seconds>")
    if not told:
        print(f"setup.sh: another package manager holds {', '.join(busy)} (a system update?); waiting for "
              f"it, at most {timeout:.0f} s (FASTQ_APT_LOCK_TIMEOUT)", file=sys.stderr, flush=True)
        told = True
    time.sleep(min(1.0, max(0.05, timeout - waited)))
PYEOF
}

# apt-get, after the locks are free, and told to wait for them itself (apt >= 1.9) with the
# time that is left: another update may start between the check and apt's own lock.
apt_get() {
    wait_for_apt
    local left=$((APT_LOCK_TIMEOUT - (SECONDS - APT_T0)))
    [ "$left" -gt 0 ] || left=1
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout="$left" "$@"
}

if [ $WAIT_ONLY = 1 ]; then
    wait_for_apt
    exit 0
fi
# development build: compiler + the system libraries' headers
APT_PKGS="g++ make pkg-config libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libjpeg62-turbo-dev zlib1g-dev"
if [ $WHEEL = 1 ]; then
    # scripts/build_wheel.sh and build_deps.sh: make/tar/sha256sum are in every Debian base
    # system; gcc for zig's x86-64 build (libgcc.a); strip from binutils
    APT_PKGS="g++ make nasm xz-utils bzip2 patch binutils"
fi
if [ $FULL = 1 ]; then
    # wheel build (scripts/build_deps.sh, build_wheel.sh): libjpeg-turbo's SIMD needs nasm;
    # sources come from the Debian archive through apt-get source; strip/readelf/nm come with binutils
    APT_PKGS="$APT_PKGS nasm xz-utils bzip2 patch binutils util-linux"
    # the decoder's libFuzzer harness (csrc/tests/run_fuzz.sh); llvm-strip for the
    # cross-built aarch64 wheel (the host's binutils know only x86)
    APT_PKGS="$APT_PKGS clang llvm"
    # the remote sources' tests against a server fastq did not write
    # (tests/sources/test_sources_remote_servers.py starts nginx on 127.0.0.1 itself), and
    # the openssl command for their https:// certificates (fastq.bench.servers.make_test_ca)
    APT_PKGS="$APT_PKGS nginx openssl"
    # qemu-user: the aarch64 leg (qemu-aarch64) and the x86-64 CPU-models leg (qemu-x86_64
    # -cpu Haswell / SandyBridge / Nehalem: scripts/test_cpu_models.sh)
    APT_PKGS="$APT_PKGS qemu-user"
fi
missing=""
for p in $APT_PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "== installing Debian packages:$missing"
    apt_get update -qq
    # shellcheck disable=SC2086
    apt_get install -y -qq $missing
fi
if [ $WHEEL = 1 ]; then
    echo "== installing Python packages (requirements-wheel.txt)"
    $PY -m pip install -q --disable-pip-version-check -r requirements-wheel.txt
    bash scripts/build_wheel.sh --check
    exit 0
fi
if [ $FULL = 1 ]; then
    REQ=requirements-dev.txt
    BUILD_ENV="FASTQ_TESTING=1"  # adds the test-only module fastq._native._testing
    CHECK="import fastq, fastq._native._core, fastq._native._image, fastq._native._testing"
    WHAT="in place, system libraries; with the test-only module fastq._native._testing"
else
    REQ=requirements-demo.txt
    BUILD_ENV="FASTQ_TESTING="
    CHECK="import fastq, fastq._native._core, fastq._native._image"
    WHAT="in place, system libraries"
fi
echo "== installing Python packages ($REQ)"
$PY -m pip install -q --disable-pip-version-check -r $REQ
# The distribution was called "fastq" before it became fastq-loader: an editable
# install of this checkout under the old name would sit beside the new one.  Remove it,
# and only it (a "fastq" installed from elsewhere is another project's).
if [ "$($PY -m pip show fastq 2>/dev/null | sed -n 's/^Editable project location: //p')" = "$PWD" ]; then
    echo "== removing this checkout's editable install under the old distribution name fastq"
    $PY -m pip uninstall -y -q --disable-pip-version-check fastq
fi
echo "== building fastq ($WHAT)"
env $BUILD_ENV $PY -m pip install -q --disable-pip-version-check --no-build-isolation -e .
$PY -c "$CHECK; print('fastq', fastq.__version__, 'built OK')"
