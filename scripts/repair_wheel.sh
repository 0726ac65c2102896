#!/usr/bin/env bash
# Finishes a wheel built with FASTQ_VENDORED_PREFIX: strips the extension modules,
# drops generated C/C++ files, adds the licence files of fastq and of every vendored
# library (<dist-info>/licenses/), then runs `auditwheel repair`, which checks the
# wheel against the manylinux policies and gives it the lowest tag it allows.
# Used by scripts/build_wheel.sh and as cibuildwheel's repair-wheel-command.
#   usage: repair_wheel.sh WHEEL OUT_DIR [VENDORED_PREFIX]   (prefix default: $FASTQ_VENDORED_PREFIX)
# STRIP names the strip tool (default strip; the zig toolchain's env.sh sets it, llvm-strip
# for aarch64).  FASTQ_WHEEL_PLAT, if set, is passed as --plat (e.g. manylinux2014_x86_64:
# auditwheel then fails unless the wheel really is within that policy).
set -euo pipefail
RAW=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OUT=$2
PREFIX=${3:-${FASTQ_VENDORED_PREFIX:?repair_wheel.sh: give the vendored prefix (or set FASTQ_VENDORED_PREFIX)}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/fastq-repair.XXXXXX")
trap 'rm -rf "$W"' EXIT
for f in "$PREFIX"/licenses/opencv.LICENSE "$PREFIX/BUILDINFO.txt" "$ROOT/LICENSE" "$ROOT/THIRD_PARTY_NOTICES.md"; do
    [ -f "$f" ] || { echo "repair_wheel.sh: missing $f" >&2; exit 1; }
done
$PY -m wheel unpack -d "$W/unpacked" "$RAW" >/dev/null
TREE=$(ls -d "$W"/unpacked/fastq_loader-*)
DIST_INFO=$(ls -d "$TREE"/fastq_loader-*.dist-info)
find "$TREE" -name "*.so" -exec ${STRIP:-strip} --strip-unneeded {} +
find "$TREE/fastq" \( -name "*.cpp" -o -name "*.c" -o -name "*.o" \) -delete
mkdir -p "$DIST_INFO/licenses/vendored"
cp "$ROOT/LICENSE" "$ROOT/THIRD_PARTY_NOTICES.md" "$DIST_INFO/licenses/"
cp "$PREFIX"/licenses/*.LICENSE "$PREFIX/BUILDINFO.txt" "$DIST_INFO/licenses/vendored/"
mkdir -p "$W/packed"
$PY -m wheel pack -d "$W/packed" "$TREE" >/dev/null
mkdir -p "$OUT"
auditwheel repair ${FASTQ_WHEEL_PLAT:+--plat "$FASTQ_WHEEL_PLAT"} -w "$OUT" "$W"/packed/fastq_loader-*.whl >&2
