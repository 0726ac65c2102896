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
#                             several GB), and the test-only module fastq._testing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
FULL=0
case ${1:-} in
    --full) FULL=1 ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--full]" >&2; exit 2 ;;
esac
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# development build: compiler + the system libraries' headers
APT_PKGS="g++ make pkg-config libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libjpeg62-turbo-dev zlib1g-dev"
if [ $FULL = 1 ]; then
    # wheel build (scripts/build_deps.sh, build_wheel.sh): libjpeg-turbo's SIMD needs nasm;
    # sources come from the Debian archive through apt-get source; strip/readelf/nm come with binutils
    APT_PKGS="$APT_PKGS nasm xz-utils bzip2 patch binutils util-linux"
    # the decoder's libFuzzer harness (csrc/tests/run_fuzz.sh); llvm-strip for the
    # cross-built aarch64 wheel (the host's binutils know only x86)
    APT_PKGS="$APT_PKGS clang llvm"
fi
missing=""
for p in $APT_PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "== installing Debian packages:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
if [ $FULL = 1 ]; then
    REQ=requirements-dev.txt
    BUILD_ENV="FASTQ_TESTING=1"  # adds the test-only module fastq._testing
    CHECK="import fastq, fastq._core, fastq._image, fastq._testing"
    WHAT="in place, system libraries; with the test-only module fastq._testing"
else
    REQ=requirements-demo.txt
    BUILD_ENV="FASTQ_TESTING="
    CHECK="import fastq, fastq._core, fastq._image"
    WHAT="in place, system libraries"
fi
echo "== installing Python packages ($REQ)"
$PY -m pip install -q --disable-pip-version-check -r $REQ
# The distribution was called "fastq" before issue 29 (now fastq-loader): an editable
# install of this checkout under the old name would sit beside the new one.  Remove it,
# and only it (a "fastq" installed from elsewhere is another project's).
if [ "$($PY -m pip show fastq 2>/dev/null | sed -n 's/^Editable project location: //p')" = "$PWD" ]; then
    echo "== removing this checkout's editable install under the old distribution name fastq"
    $PY -m pip uninstall -y -q --disable-pip-version-check fastq
fi
echo "== building fastq ($WHAT)"
env $BUILD_ENV $PY -m pip install -q --disable-pip-version-check --no-build-isolation -e .
$PY -c "$CHECK; print('fastq', fastq.__version__, 'built OK')"
