#!/usr/bin/env bash
# Builds the wheel for every CPython this machine has (3.9 to 3.13) and smoke-tests
# each one in a fresh venv that holds only numpy and the wheel.  A release step, not
# part of CI (CI builds and fully tests the cp311 wheel: scripts/test.sh).
#
#   scripts/build_wheels_all.sh            # interpreters found on PATH / in pyenv
#   PYTHONS="/usr/bin/python3.11 ..." scripts/build_wheels_all.sh
#
# For each interpreter: a build venv with the build requirements (setuptools, wheel,
# Cython 3, numpy, build), scripts/build_wheel.sh with it (the static libraries of
# scripts/build_deps.sh are shared: built once, cached), then the smoke test below.
# Wheels land in ${FASTQ_WHEEL_DIR:-dist}; a table of results is printed last, and the
# exit status is 1 if any interpreter failed.  The smoke test checks, against numpy
# and against pixels it wrote itself: a pipeline over pixel arrays (crop, flip, uint8
# and float32 output), a PNG and an uncompressed TIFF written in pure Python (so the
# wheel's own libpng/zlib and libtiff decode them), and the exported symbols.
#
# FASTQ_TOOLCHAIN=zig (scripts/build_wheel.sh) makes manylinux2014 wheels; then
# FASTQ_ARCHS="x86_64 aarch64" (the default with zig) also cross-builds the aarch64 wheel
# for CPython 3.11 - the one version whose arm64 headers and sysconfig data Debian 12
# provides (scripts/aarch64_sysroot.sh) - and smoke-tests it under qemu-aarch64.
#
# Last, $OUT/simple/ is written: a PEP 503 index of the wheels in $OUT and of numpy's
# wheels for the same interpreters and platforms (downloaded into $OUT/deps), so that
#   pip install --index-url file://$PWD/dist/simple fastq-loader
# installs the right wheel for the interpreter and platform with nothing else to reach.
# The distribution is fastq-loader (the package imported is still fastq): the name "fastq"
# on PyPI belongs to an unrelated package (a FASTQ-format library, version 2.x).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${FASTQ_WHEEL_DIR:-dist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TOOLCHAIN=${FASTQ_TOOLCHAIN:-system}
if [ "$TOOLCHAIN" = zig ]; then ARCHS=${FASTQ_ARCHS:-x86_64 aarch64}; else ARCHS=$(uname -m); fi
# the numpy the aarch64 wheel is built against (its headers come from the sysroot's numpy)
AARCH64_NUMPY=$(sed -n 's/^NUMPY=${FASTQ_AARCH64_NUMPY:-\(.*\)}$/\1/p' scripts/aarch64_sysroot.sh)
T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-wheels.XXXXXX")
trap 'rm -rf "$T"' EXIT

if [ -z "${PYTHONS:-}" ]; then
    PYTHONS=""
    for minor in 9 10 11 12 13; do
        # a python3.X on PATH that runs (a pyenv shim of a version not selected does not),
        # else the newest pyenv build of 3.X
        for p in $(command -v "python3.$minor" 2>/dev/null) \
                 $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python 2>/dev/null | sort -V -r); do
            if "$p" -c 'import sys, venv' >/dev/null 2>&1; then
                PYTHONS="$PYTHONS $p"
                break
            fi
        done
    done
fi
[ -n "$PYTHONS" ] || { echo "build_wheels_all.sh: no CPython 3.9-3.13 found (set PYTHONS)" >&2; exit 2; }

SMOKE='
import os, struct, sys, tempfile, zlib
import numpy as np
import fastq
from fastq import ops
site = sys.argv[1]
assert fastq.__file__.startswith(site), fastq.__file__
rng = np.random.default_rng(3)
imgs = rng.integers(0, 256, (6, 20, 24, 3), dtype=np.uint8)
with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(6)), batch_size=3, dtype="uint8",
                    ops=[ops.CenterCrop(10), ops.HorizontalFlip(p=1.0)]) as p:
    got = np.concatenate([b[0] for b in p])
np.testing.assert_array_equal(got, imgs[:, 5:15, 7:17][:, :, ::-1])
with fastq.Pipeline(fastq.sources.Arrays(imgs), batch_size=2, ops=[ops.CenterCrop(8)]) as p:
    x = next(iter(p))[0]
np.testing.assert_array_equal(x, imgs[:2, 6:14, 8:16].astype(np.float32) / 255)

def png(a):
    h, w, _ = a.shape
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

def tiff(a):  # baseline RGB, one strip, no compression, little-endian
    h, w, _ = a.shape
    data = a.tobytes()
    tags = [(256, 4, 1, w), (257, 4, 1, h), (258, 3, 3, 8 + len(data) + 0), (259, 3, 1, 1), (262, 3, 1, 2),
            (273, 4, 1, 0), (277, 3, 1, 3), (278, 4, 1, h), (279, 4, 1, len(data))]
    ifd_off = 8 + len(data) + 6            # header, pixels, BitsPerSample values (3 x uint16)
    out = bytearray(b"II*\0" + struct.pack("<I", ifd_off) + data + struct.pack("<3H", 8, 8, 8))
    out += struct.pack("<H", len(tags))
    for tag, typ, n, val in tags:
        if tag == 258:
            val = 8 + len(data)           # offset of the three BitsPerSample values
        if tag == 273:
            val = 8                       # the strip starts right after the header
        out += struct.pack("<HHI", tag, typ, n) + (struct.pack("<HH", val, 0) if typ == 3 and n == 1
                                                   else struct.pack("<I", val))
    return bytes(out + struct.pack("<I", 0))

with tempfile.TemporaryDirectory() as d:
    paths = []
    for name, enc in (("a.png", png), ("a.tiff", tiff)):
        paths.append(os.path.join(d, name))
        with open(paths[-1], "wb") as f:
            f.write(enc(imgs[0]))
    with fastq.Pipeline(fastq.sources.Files(paths), batch_size=2, dtype="uint8", ops=[ops.CenterCrop((20, 24))]) as p:
        both = next(iter(p))[0]
np.testing.assert_array_equal(both[0], imgs[0])
np.testing.assert_array_equal(both[1], imgs[0])
print("OK", sys.version.split()[0], np.__version__)
'

declare -a RESULTS NUMPY_FOR
status=0
for py in $PYTHONS; do
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || continue
    log="$T/build-$ver.log"
    echo "== CPython $ver ($py)" >&2
    res="FAILED (see above)"
    if "$py" -m venv "$T/b$ver" >"$log" 2>&1 &&
        "$T/b$ver/bin/python" -m pip install -q -U --disable-pip-version-check pip setuptools wheel "Cython>=3.0,<4" \
            numpy build >>"$log" 2>&1 &&
        PYTHON="$T/b$ver/bin/python" FASTQ_WHEEL_DIR="$T/out$ver" bash scripts/build_wheel.sh >"$T/wheel-$ver" 2>>"$log"; then
        whl=$(tail -1 "$T/wheel-$ver")
        cp "$whl" "$OUT/"
        if "$py" -m venv "$T/t$ver" >>"$log" 2>&1 &&
            "$T/t$ver/bin/python" -m pip install -q --disable-pip-version-check numpy "$whl" >>"$log" 2>&1; then
            site=$("$T/t$ver/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
            if out=$(cd "$T" && "$T/t$ver/bin/python" -I -c "$SMOKE" "$site" 2>>"$log"); then
                res="$(basename "$whl") ($(du -h "$whl" | cut -f1)): $out"
            fi
        fi
    fi
    case $res in FAILED*) status=1; tail -30 "$log" >&2 ;; esac
    RESULTS+=("$ver x86_64  $res")
    NUMPY_FOR+=("$ver")
    if [ "$ver" = 3.11 ] && [[ " $ARCHS " == *" aarch64 "* ]]; then
        echo "== CPython 3.11 aarch64 (cross, zig; smoke test under qemu-aarch64)" >&2
        res="FAILED (see above)"
        if "$T/b$ver/bin/python" -m pip install -q --disable-pip-version-check "numpy==$AARCH64_NUMPY" >>"$log" 2>&1 &&
            PYTHON="$T/b$ver/bin/python" FASTQ_TARGET_ARCH=aarch64 FASTQ_WHEEL_DIR="$T/arm$ver" \
                bash scripts/build_wheel.sh >"$T/wheel-arm$ver" 2>>"$log"; then
            whl=$(tail -1 "$T/wheel-arm$ver")
            cp "$whl" "$OUT/"
            sysroot=$(bash scripts/aarch64_sysroot.sh 2>>"$log")
            rm -rf "$T/armsite" && "$py" -m zipfile -e "$whl" "$T/armsite"
            if out=$(cd "$T" && QEMU_LD_PREFIX=$sysroot PYTHONPATH="$T/armsite:$sysroot/site" \
                    qemu-aarch64 "$sysroot/usr/bin/python3.11" -c "$SMOKE" "$T/armsite" 2>>"$log"); then
                res="$(basename "$whl") ($(du -h "$whl" | cut -f1)): $out (qemu)"
            fi
        fi
        case $res in FAILED*) status=1; tail -30 "$log" >&2 ;; esac
        RESULTS+=("$ver aarch64 $res")
    fi
done

# numpy for each interpreter and architecture built (fastq's one dependency)
mkdir -p "$OUT/deps"
for ver in "${NUMPY_FOR[@]}"; do
    for arch in $ARCHS; do
        [ "$arch" = x86_64 ] || [ "$ver" = 3.11 ] || continue
        python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$OUT/deps" \
            --python-version "$ver" --implementation cp --platform "manylinux2014_$arch" \
            --platform "manylinux_2_28_$arch" "numpy>=1.23" >&2 || { echo "numpy for $ver $arch: download failed" >&2; status=1; }
    done
done
index_page() {  # dir-of-files name-glob -> the links of a PEP 503 project page
    echo '<!DOCTYPE html><html><body>'
    for f in $1/$2; do
        [ -f "$f" ] || continue
        echo "<a href=\"../../${f#"$OUT"/}#sha256=$(sha256sum "$f" | cut -d' ' -f1)\">$(basename "$f")</a><br>"
    done
    echo '</body></html>'
}
mkdir -p "$OUT/simple/numpy"
index_page "$OUT/deps" "numpy-*.whl" >"$OUT/simple/numpy/index.html"

# PEP 503 simple index: dist/simple/index.html -> fastq-loader/index.html (the normalized
# distribution name) -> ../../<file>#sha256=
mkdir -p "$OUT/simple/fastq-loader"
{
    echo '<!DOCTYPE html><html><body>'
    for f in "$OUT"/fastq_loader-*.whl "$OUT"/fastq_loader-*.tar.gz "$OUT"/fastq-loader-*.tar.gz; do
        [ -f "$f" ] || continue
        b=$(basename "$f")
        echo "<a href=\"../../$b#sha256=$(sha256sum "$f" | cut -d' ' -f1)\" data-requires-python=\"&gt;=3.9\">$b</a><br>"
    done
    echo '</body></html>'
} >"$OUT/simple/fastq-loader/index.html"
printf '<!DOCTYPE html><html><body><a href="fastq-loader/">fastq-loader</a><br><a href="numpy/">numpy</a></body></html>\n' >"$OUT/simple/index.html"
echo
printf '%s\n' "${RESULTS[@]}"
echo "simple index: $OUT/simple ($(grep -c '<a href' "$OUT/simple/fastq-loader/index.html") files)"
exit $status
