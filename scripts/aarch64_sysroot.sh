#!/usr/bin/env bash
# An arm64 (aarch64) Debian 12 userland with CPython 3.11, for two jobs:
#   * running fastq's aarch64 wheel on this x86-64 machine under `qemu-aarch64 -L SYSROOT`
#     (scripts/test_aarch64.sh);
#   * cross-building that wheel: the target's pyconfig.h and _sysconfigdata (extension
#     suffix, platform), and numpy's aarch64 headers (scripts/build_wheel.sh with
#     FASTQ_TARGET_ARCH=aarch64 sources `SYSROOT/cross-env.sh`).
#
#   scripts/aarch64_sysroot.sh        prints SYSROOT (built once, then cached)
#
# Nothing is installed into the host system: the arm64 .debs (python3.11 and its
# dependency closure, libpython3.11-dev for the headers) are resolved and downloaded by
# apt-get in a private apt state (its own lists, an empty dpkg status, APT::Architecture
# arm64) and unpacked with `dpkg -x`.  numpy's aarch64 wheel (manylinux_2_28 since 2.3) and the pure
# Python test dependencies (pytest and its requirements, hypothesis) come from pip
# (`pip download --platform ... --only-binary=:all:`) and are unzipped into
# SYSROOT/site, which the runner puts on PYTHONPATH.
#
# The cache key holds the package list, the numpy/pytest/hypothesis pins and this
# script; the Debian archive snapshot is whatever the machine's apt sources name.
# Needs: apt-get, dpkg, python3 with pip, qemu-user (for the check at the end).
# Knobs: FASTQ_DEPS_CACHE, FASTQ_APT_SOURCES (default /etc/apt/sources.list.d/debian.sources), PYTHON.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${FASTQ_DEPS_CACHE:-$HOME/.cache/fastq-deps}
APT_SOURCES=${FASTQ_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
PY=${PYTHON:-python3}
DEBS="python3.11 libpython3.11-dev libstdc++6"  # libstdc++6: numpy's C++ (fastq needs none)
# numpy: the version fastq's aarch64 wheel is built against (its headers) and run with.
NUMPY=${FASTQ_AARCH64_NUMPY:-2.4.6}
PURE="pytest==9.0.3 pluggy iniconfig packaging pygments hypothesis==6.155.2 attrs sortedcontainers"
KEY=$({ echo "$DEBS|$NUMPY|$PURE"; grep -v -E '^\s*#' "$HERE/aarch64_sysroot.sh"; } | sha256sum | cut -c1-12)
ROOT="$CACHE/aarch64-sysroot/$KEY"
log() { echo "[aarch64_sysroot] $*" >&2; }
die() { echo "[aarch64_sysroot] error: $*" >&2; exit 1; }

if [ -f "$ROOT/.complete" ]; then echo "$ROOT"; exit 0; fi
command -v dpkg >/dev/null && command -v apt-get >/dev/null || die "needs apt-get and dpkg (Debian/Ubuntu)"
[ -f "$APT_SOURCES" ] || die "no $APT_SOURCES (set FASTQ_APT_SOURCES to a deb822 .sources file of Debian 12)"
mkdir -p "$CACHE/aarch64-sysroot"
exec 9>"$CACHE/aarch64-sysroot/.lock"
flock 9 2>/dev/null || true
if [ -f "$ROOT/.complete" ]; then echo "$ROOT"; exit 0; fi
t0=$SECONDS

A="$CACHE/aarch64-sysroot/apt"
mkdir -p "$A/sources.list.d" "$A/lists/partial" "$A/cache/archives/partial" "$A/etc"
: >"$A/status"
sed -E 's/^Types:.*/Types: deb/' "$APT_SOURCES" >"$A/sources.list.d/arm64.sources"
APT=(apt-get -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64
     -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$A/sources.list.d"
     -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$A/etc"
     -o Dir::State::Lists="$A/lists" -o Dir::State::status="$A/status" -o Dir::Cache="$A/cache"
     -o Debug::NoLocking=1 -o APT::Install-Recommends=false)
log "apt-get update (arm64 lists, private state in $A)"
"${APT[@]}" update -qq >&2 || die "apt-get update (arm64) failed"
log "apt-get install --download-only $DEBS (arm64, with dependencies)"
"${APT[@]}" install --download-only -y -qq $DEBS >&2 || die "apt-get could not download $DEBS for arm64"

rm -rf "$ROOT.partial"
mkdir -p "$ROOT.partial/site"
n=0
for d in "$A"/cache/archives/*_arm64.deb "$A"/cache/archives/*_all.deb; do
    [ -f "$d" ] || continue
    dpkg -x "$d" "$ROOT.partial"
    n=$((n + 1))
done
log "unpacked $n packages"
# Debian's merged /usr: /lib -> usr/lib (the dynamic loader is /lib/ld-linux-aarch64.so.1)
for l in lib bin sbin; do
    [ -e "$ROOT.partial/$l" ] || ln -s "usr/$l" "$ROOT.partial/$l"
done
[ -x "$ROOT.partial/usr/bin/python3.11" ] || die "no usr/bin/python3.11 in the unpacked packages"

log "pip download numpy==$NUMPY (aarch64, cp311) and $PURE"
W=$(mktemp -d "${TMPDIR:-/tmp}/fastq-sysroot.XXXXXX")
trap 'rm -rf "$W"' EXIT
$PY -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 --python-version 3.11 --implementation cp --abi cp311 \
    -d "$W" "numpy==$NUMPY" >&2 || die "pip download numpy==$NUMPY for aarch64 failed"
# shellcheck disable=SC2086
$PY -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform any --python-version 3.11 -d "$W" $PURE >&2 || die "pip download of the test packages failed"
for w in "$W"/*.whl; do
    $PY -m zipfile -e "$w" "$ROOT.partial/site/" || die "cannot unzip $w"
done

# Cross-building for this Python: the target's sysconfig data (EXT_SUFFIX
# .cpython-311-aarch64-linux-gnu.so, platform linux-aarch64) and headers.
SCD=$(cd "$ROOT.partial/usr/lib/python3.11" && ls _sysconfigdata__*aarch64*.py | head -1)
[ -n "$SCD" ] || die "no _sysconfigdata for aarch64 in libpython3.11-stdlib"
mkdir -p "$ROOT.partial/cross/include"
cp "$ROOT.partial/usr/lib/python3.11/$SCD" "$ROOT.partial/cross/"
# The Python headers alone, with the target's pyconfig.h in place of Debian's multiarch
# wrapper: -I SYSROOT/usr/include would put the sysroot's glibc 2.36 headers in front of
# the glibc 2.17 ones of the zig target.
cp -r "$ROOT.partial/usr/include/python3.11" "$ROOT.partial/cross/include/"
cp "$ROOT.partial/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" "$ROOT.partial/cross/include/python3.11/pyconfig.h"
NPINC="$ROOT/site/numpy/_core/include"
cat >"$ROOT.partial/cross-env.sh" <<EOF
# generated by scripts/aarch64_sysroot.sh: source it (after the zig toolchain's env.sh)
# to cross-build CPython 3.11 extensions for aarch64 with the host's python3.11.
export _PYTHON_SYSCONFIGDATA_NAME=${SCD%.py}
export _PYTHON_HOST_PLATFORM=linux-aarch64
export PYTHONPATH="$ROOT/cross\${PYTHONPATH:+:\$PYTHONPATH}"
# the target's Python headers (with its pyconfig.h) and numpy's aarch64 headers come
# before the host's
export CPPFLAGS="-I$ROOT/cross/include/python3.11 -I$NPINC"
export FASTQ_AARCH64_SYSROOT="$ROOT"
EOF
rm -rf "$ROOT"
mv "$ROOT.partial" "$ROOT"
[ -d "$NPINC/numpy" ] || die "numpy's aarch64 wheel has no include dir at $NPINC"
if command -v qemu-aarch64 >/dev/null; then
    out=$(PYTHONPATH="$ROOT/site" qemu-aarch64 -L "$ROOT" "$ROOT/usr/bin/python3.11" -c \
        'import platform, numpy; print(platform.machine(), numpy.__version__)') || die "python3.11 does not run under qemu-aarch64"
    log "qemu-aarch64 python3.11: $out"
fi
touch "$ROOT/.complete"
log "done in $((SECONDS - t0)) s"
echo "$ROOT"
