#!/usr/bin/env bash
# Builds csrc/tests/fuzz_decode.cpp (libFuzzer + ASan + UBSan) against the csrc image
# sources and the system OpenCV / libjpeg-turbo, writes a seed corpus of small
# JPEG / PNG / WebP / BMP files made from fastq/bench/testdata.py's photos, and fuzzes the
# decoder entry point for a bounded time.  Exit status: 0 when the run ended without a
# finding; non-zero on any crash, sanitizer report, timeout, out-of-memory or broken
# contract, with the reproducer left in $FUZZ_OUT/artifacts/.
#
# Needs: clang/clang++ with libFuzzer (Debian: apt-get install clang), the build
# dependencies of fastq (OpenCV 4 + libjpeg-turbo headers), python3 with numpy,
# opencv-python-headless and scikit-image or scikit-learn (for the seed photos).
#
# Knobs (environment):
#   FUZZ_SECONDS  total fuzzing time (default 60)
#   FUZZ_OUT      work directory: binary, corpus, artifacts (default csrc/tests/bin/fuzz)
#   FUZZ_JOBS     parallel fuzzing processes (default 1)
#   FUZZ_SEED     libFuzzer's -seed (default 0: a random one)
#   FUZZ_RUNS     stop after this many inputs (libFuzzer's -runs; default: no count, only
#                 FUZZ_SECONDS).  scripts/test.sh fixes the seed and the count, so that
#                 CI tries the same inputs on every run on a given machine (CPUs whose
#                 SIMD paths differ cover different code, so not across machines)
#   FUZZ_NO_SANITIZE  checks to leave out while triaging past a known finding, e.g.
#                 "signed-integer-overflow" (passed as -fno-sanitize=...; never in CI)
# Reproduce a finding:  $FUZZ_OUT/fuzz_decode $FUZZ_OUT/artifacts/crash-...
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${FUZZ_OUT:-csrc/tests/bin/fuzz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
fuzz_seed=${FUZZ_SEED:-0}
fuzz_runs=${FUZZ_RUNS:--1}
CC=${FUZZ_CC:-clang}
CXX=${FUZZ_CXX:-clang++}
CV_INC=${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}
mkdir -p "$out/obj" "$out/corpus" "$out/artifacts" "$out/seeds"
rm -f "$out"/fuzz*.log

for tool in "$CC" "$CXX"; do
    command -v "$tool" >/dev/null || { echo "run_fuzz.sh: $tool not found (apt-get install clang)" >&2; exit 2; }
done

# -- build ---------------------------------------------------------------------------
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ -n "${FUZZ_NO_SANITIZE:-}" ]; then SAN="$SAN -fno-sanitize=$FUZZ_NO_SANITIZE"; fi
FLAGS="-O1 -g -Wall -Wextra -Werror $SAN -Icsrc"
objs=()
for src in csrc/core/*.c; do  # what image/ uses of core/ (errors, fq_read_file for the C API table)
    obj="$out/obj/$(basename "${src%.c}").o"
    "$CC" -std=c11 $FLAGS -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    objs+=("$obj")
done
for src in csrc/image/*/*.cpp; do
    obj="$out/obj/$(basename "${src%.cpp}").o"
    "$CXX" -std=c++17 $FLAGS -fsanitize=fuzzer-no-link -I"$CV_INC" -c "$src" -o "$obj"
    objs+=("$obj")
done
"$CXX" -std=c++17 $FLAGS -fsanitize=fuzzer -I"$CV_INC" csrc/tests/fuzz_decode.cpp "${objs[@]}" \
    -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o "$out/fuzz_decode"

# -- seed corpus ---------------------------------------------------------------------
# Byte 0 of every input picks the harness configuration (0..5); the rest is the file.
python3 - "$root" "$out/seeds" <<'EOF'
import importlib.util, os, sys
import numpy as np
import cv2
root, dst = sys.argv[1], sys.argv[2]
# fastq/bench/testdata.py is pure Python: load it without importing (or building) fastq
spec = importlib.util.spec_from_file_location("fastq_testdata", os.path.join(root, "fastq", "bench", "testdata.py"))
td = importlib.util.module_from_spec(spec)
spec.loader.exec_module(td)
tmp = os.path.join(dst, "_src")
paths = td.make_jpeg_dataset(tmp, 4, seed=7, min_side=24, max_side=72, quality=85)
imgs = [cv2.imread(p, cv2.IMREAD_COLOR) for p in paths]
seeds = []
for i, p in enumerate(paths):
    seeds.append(("jpeg%d" % i, open(p, "rb").read()))
a, b = imgs[0], imgs[1]
enc = lambda ext, im, prm=(): cv2.imencode(ext, im, list(prm))[1].tobytes()
seeds += [
    ("progressive", enc(".jpg", a, [cv2.IMWRITE_JPEG_QUALITY, 80, cv2.IMWRITE_JPEG_PROGRESSIVE, 1])),
    ("gray_jpeg", enc(".jpg", cv2.cvtColor(b, cv2.COLOR_BGR2GRAY))),
    ("restart_jpeg", enc(".jpg", b, [cv2.IMWRITE_JPEG_RST_INTERVAL, 2])),
    ("png", enc(".png", a)),
    ("png16", enc(".png", a.astype(np.uint16) * 257)),
    ("rgba_png", enc(".png", np.dstack([b, b[:, :, 0]]))),
    ("gray_png", enc(".png", cv2.cvtColor(a, cv2.COLOR_BGR2GRAY))),
    ("webp", enc(".webp", a, [cv2.IMWRITE_WEBP_QUALITY, 70])),
    ("webp_lossless", enc(".webp", b, [cv2.IMWRITE_WEBP_QUALITY, 101])),
    ("bmp", enc(".bmp", b)),
]
# Headers that declare extreme sizes (the max_pixels guard and size arithmetic).
import struct
png_ihdr = lambda w, h: (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + struct.pack(">II", w, h)
                         + b"\x08\x02\x00\x00\x00" + b"\x00" * 4)
seeds += [
    ("png_dims_2p32", png_ihdr(0xFFFFFFFF, 0xFFFFFFFF)),
    ("png_dims_2p31", png_ihdr(0x80000000, 0x80000000)),
    ("bmp_dims_int32_min", enc(".bmp", b)[:18] + struct.pack("<ii", -2 ** 31, -2 ** 31) + enc(".bmp", b)[26:]),
    ("webp_vp8x_max", b"RIFF\x00\x01\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00" + b"\xff" * 6),
    # CI's finding: a 39-byte BMP info header (OpenCV reads 32-bit sizes from 36 bytes up)
    ("bmp_header_39", b"BM6(\x00\x00\x00\xf7\x00\x006\x00\x00\x00'\x00\x00\x00\x001\x00\x00\x00\x18\x01\x00"
                      b"\x84\x00 \x00\x00\x00\x00\x00\xfe\xfe\xfe\x90\x8a\x8a" + b"\x00" * 6 + b"\x16\x00..\x00\x89"),
    ("bmp_os2_dims_65535", b"BM" + struct.pack("<IHHIIHHHH", 26, 0, 0, 26, 12, 65535, 65535, 1, 24)),
    ("ppm_dims_big", b"P6\n# c\n30000 30000\n255\n" + bytes(16)),
    ("tiff_dims_big", b"II*\x00\x08\x00\x00\x00\x02\x00" + struct.pack("<HHIIHHII", 256, 4, 1, 30000, 257, 4, 1, 30000) + bytes(16)),
]
# PNM and TIFF, which OpenCV decodes too
small = cv2.resize(a, (24, 16))
seeds += [("ppm", enc(".ppm", small)), ("pgm", enc(".pgm", cv2.cvtColor(small, cv2.COLOR_BGR2GRAY))),
          ("tiff", enc(".tiff", small))]
jpg = bytearray(enc(".jpg", a))
sof = jpg.find(b"\xff\xc0")
jpg[sof + 5:sof + 9] = b"\xff\xff\xff\xff"  # 65535 x 65535
seeds.append(("jpeg_dims_65535", bytes(jpg)))
try:
    from PIL import Image
    import io
    buf = io.BytesIO()
    Image.fromarray(cv2.cvtColor(a, cv2.COLOR_BGR2RGB)).convert("CMYK").save(buf, "JPEG", quality=80)
    seeds.append(("cmyk_jpeg", buf.getvalue()))
except ImportError:
    pass
for k, (name, data) in enumerate(seeds):
    with open(os.path.join(dst, name), "wb") as f:
        f.write(bytes([k % 6]) + data)
for p in paths:
    os.remove(p)
os.rmdir(tmp)
print("run_fuzz.sh: %d seed files, largest %d bytes" % (len(seeds), max(len(d) for _, d in seeds)))
EOF

# -- fuzz ------------------------------------------------------------------------------
# detect_leaks=0: OpenCV keeps process-lifetime allocations (its thread pool, codec
# registries) that LeakSanitizer reports at exit; every other ASan/UBSan finding fails.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "run_fuzz.sh: fuzzing for ${seconds}s at most ($jobs job(s), seed $fuzz_seed, runs $fuzz_runs); findings go to $out/artifacts/"
# The decoders (libpng, OpenCV) print a line for every corrupt input on stderr: the
# full output goes to $out/fuzz.log, and only libFuzzer's progress and any finding
# are shown here.
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
set +e
(cd "$out" && ./fuzz_decode corpus seeds -max_total_time="$seconds" -seed="$fuzz_seed" -runs="$fuzz_runs" -timeout=20 -rss_limit_mb=2560 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/artifacts/" "${parallel[@]}") >"$out/fuzz.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    echo "run_fuzz.sh: FINDING (exit $rc); report from $out/fuzz.log:" >&2
    grep -n -m1 -E "ERROR: |runtime error|fuzz_decode: |deadly signal|timeout after|out-of-memory" "$out"/fuzz*.log >&2 || true
    for log in "$out"/fuzz*.log; do
        sed -n '/ERROR: \|runtime error\|fuzz_decode: \|deadly signal\|ALARM\|out-of-memory/,$p' "$log" \
            | grep -v -E "^(libpng |imdecode_)" | head -80 >&2
    done
    ls -l "$out/artifacts/" >&2
    exit "$rc"
fi
grep -E "^(INFO: +[0-9]+ files found|#[0-9]+ +(INITED|DONE)|Done |stat::)" "$out/fuzz.log" || true
echo "run_fuzz.sh: no finding"
