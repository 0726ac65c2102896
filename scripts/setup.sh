#!/usr/bin/env bash
# Installs everything fastq needs on Debian 12 / Ubuntu (as root, or with sudo)
# and builds the extension in place (editable install).  Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
APT_PKGS="g++ pkg-config libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libturbojpeg0-dev libjpeg62-turbo-dev"
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
echo "== building fastq"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation -e .
$PY -c "import fastq, fastq._core; print('fastq', fastq.__version__, 'built OK')"
