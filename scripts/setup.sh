#!/usr/bin/env bash
# Installs everything fastq needs on Debian 12 / Ubuntu (as root, or with sudo)
# and builds the extension in place (editable install, linked against the system's
# OpenCV 4.6 and libjpeg-turbo).  Also installs the tools that build the
# self-contained wheel (scripts/build_wheel.sh).  Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# development build: compiler + the system libraries' headers
APT_PKGS="g++ make pkg-config libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libjpeg62-turbo-dev zlib1g-dev"
# wheel build (scripts/build_deps.sh, build_wheel.sh): libjpeg-turbo's SIMD needs nasm;
# sources come from the Debian archive through apt-get source; strip/readelf/nm come with binutils
APT_PKGS="$APT_PKGS nasm xz-utils bzip2 patch binutils util-linux"
# the decoder's libFuzzer harness (csrc/tests/run_fuzz.sh)
APT_PKGS="$APT_PKGS clang"
missing=""
for p in $APT_PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "== installing Debian packages:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
echo "== installing Python packages (requirements-dev.txt)"
$PY -m pip install -q --disable-pip-version-check -r requirements-dev.txt
echo "== building fastq (in place, system libraries; with the test-only module fastq._testing)"
FASTQ_TESTING=1 $PY -m pip install -q --disable-pip-version-check --no-build-isolation -e .
$PY -c "import fastq, fastq._core, fastq._image, fastq._testing; print('fastq', fastq.__version__, 'built OK')"
