#!/usr/bin/env bash
# Builds fastq's test-only extension, fastq._native._testing (tests/native/_testing.pyx), next to
# an installed fastq - e.g. one installed from the wheel, which never contains it - so
# that the ring tests can run against that install.
#
#   scripts/build_testing_module.sh [SITE_DIR]
#
# SITE_DIR is the directory that holds the installed fastq/ package (default: where
# $PYTHON imports fastq from, run outside the checkout).  $PYTHON (default python3)
# needs Cython, numpy and setuptools, and must be the same CPython version as the
# install.  The build comes from this checkout, which must be the source of the
# installed fastq (fastq._native._testing cimports fastq._native._core.Ring: the layouts must match;
# importing a mismatched build fails with Cython's "size changed" error).
# A development checkout does not need this: scripts/setup.sh builds the module in
# place with FASTQ_TESTING=1.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${1:-$(cd / && $PY -c 'import fastq, os; print(os.path.dirname(os.path.dirname(fastq.__file__)))')}
[ -d "$SITE/fastq" ] || { echo "build_testing_module.sh: no fastq package in $SITE" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastq-testing.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# Build from a private copy of what the module needs: Cython's output depends on the
# numpy of $PYTHON, so a generated tests/native/_testing.cpp of the checkout (made with
# another numpy) must not be reused, and the checkout is left untouched.
mkdir -p "$WORK/src/fastq/_native" "$WORK/src/tests/native"
cp setup.py pyproject.toml "$WORK/src/"
cp -r csrc "$WORK/src/"
cp fastq/__init__.py "$WORK/src/fastq/"
cp fastq/_native/__init__.py fastq/_native/*.pxd "$WORK/src/fastq/_native/"
cp -r fastq/_native/includes "$WORK/src/fastq/_native/"
cp tests/native/_testing.pyx tests/native/*.pxd "$WORK/src/tests/native/"
(cd "$WORK/src" && FASTQ_TESTING=1 FASTQ_ONLY=_testing $PY setup.py -q build_clib -b "$WORK/lib" -t "$WORK/tmp" \
    build_ext -b "$SITE" -t "$WORK/tmp") >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }
ls "$SITE"/fastq/_native/_testing.*.so
