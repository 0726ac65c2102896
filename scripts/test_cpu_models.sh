#!/usr/bin/env bash
# The CPU-models CI leg: fastq's ISA-specific kernels (AVX2, AVX-512 VBMI, F16C,
# SSE4.2) must run only on CPUs that have them, and every CPU must get the same bytes.
# This machine is one CPU; qemu-user's x86-64 emulator (TCG) runs the same x86-64 binaries
# as other CPU models, whose CPUID lacks what they lack and which raise SIGILL on such an
# instruction:
#   Haswell      AVX2 + FMA + F16C, no AVX-512
#   SandyBridge  AVX, no AVX2 / FMA / F16C
#   Nehalem      SSE4.2, no AVX  (the C driver only: numpy's own x86-64 wheel stops with
#                SIGILL under qemu's Nehalem model before fastq is imported)
#
#   1. the fq_image C driver (csrc/tests/test_image.cpp, built here without sanitizers:
#      ASan's shadow memory does not fit under qemu-user) natively and under each model:
#      no signal, and the same "all N checks passed";
#      (the SIGILL once reported: a kernel that checks the CPU inside itself, faulted only in
#      the ASan build, whose stack poisoning runs at the function's entry; without ASan the
#      check comes first.  That pattern is caught statically by
#      tests/image/test_cpu_dispatch.py; this leg catches a kernel called without its check,
#      or with the wrong one, and ISA code outside the kernels.)
#   2. scripts/cpu_dispatch_batches.py (small JPEGs through every kernel family: colour
#      tables, warp, blends, policies, erasing, TensorpackColor / TensorpackCrop, bicubic
#      resize, the float32 write, float16 MixUp, CRC-32C of TFRecord reading) natively and
#      under Haswell and SandyBridge with this checkout's in-place build: the digests must
#      equal the native run's, and the kernels each run reports must be the model's.
#
#   scripts/test_cpu_models.sh
#
# Needs: qemu-user (installed when missing), the in-place build (setup.py build_ext
# --inplace), g++ and the OpenCV / libjpeg headers, and cv2 (the test images).  About 2-4
# minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
T0=$SECONDS
if ! command -v qemu-x86_64 >/dev/null; then
    echo "== installing qemu-user" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user >&2
fi
PYBIN=$($PY -c 'import sys; print(sys.executable)')
# qemu warns on stderr for each CPUID bit of a model that TCG cannot emulate (pcid, x2apic, ...)
q() { local model=$1; shift; qemu-x86_64 -cpu "$model" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2); }

T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-cpu-models.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0

echo "== C driver (csrc/tests/test_image.cpp, -O1, no sanitizers)" >&2
CC=${CC:-gcc}
CXX=${CXX:-g++}
CVI=${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}
mkdir -p "$T/obj"
for f in csrc/core/fq_common.c csrc/core/fq_io.c csrc/core/fq_cpu.c; do
    $CC -std=c11 -O1 -g -Wall -Wextra -Werror -Icsrc -c "$f" -o "$T/obj/$(basename "$f").o"
done
# the image sources, two at a time
printf '%s\n' csrc/image/*/*.cpp csrc/tests/test_image.cpp |
    CXX=$CXX CVI=$CVI OBJ=$T/obj xargs -P "${FASTQ_JOBS:-2}" -I{} sh -c \
        '$CXX -std=c++17 -O1 -g -Wall -Wextra -Werror -Icsrc -I"$CVI" -c "{}" -o "$OBJ/$(basename "{}").o"'
$CXX "$T"/obj/*.o -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -pthread -o "$T/test_image"
native=$("$T/test_image" 2>/dev/null | tail -1)
echo "   native: $native" >&2
for model in Haswell SandyBridge Nehalem; do
    set +e
    got=$(q "$model" "$T/test_image" 2>"$T/driver_$model.err" | tail -1)
    rc=$?
    set -e
    if [ $rc -ne 0 ] || [ "$got" != "$native" ]; then
        echo "   $model: FAILED (exit $rc, \"$got\")" >&2
        grep -v "TCG doesn't support" "$T/driver_$model.err" | tail -5 >&2
        fail=1
    else
        echo "   $model: $got" >&2
    fi
done

echo "== Python: every kernel family, digests vs the native run" >&2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ "$(cd "$T" && $PY -c 'import fastq, os; print(os.path.dirname(os.path.dirname(fastq.__file__)))')" = "$PWD" ] ||
    { echo "test_cpu_models.sh: import fastq does not find this checkout (build it in place first)" >&2; exit 2; }
$PY scripts/cpu_dispatch_batches.py make "$T/img"
(cd "$T" && $PY "$OLDPWD/scripts/cpu_dispatch_batches.py" run "$T/img" "$T/native.json")
runs=("$T/native.json")
for model in Haswell SandyBridge; do
    t=$SECONDS
    set +e
    (cd "$T" && q "$model" "$PYBIN" "$OLDPWD/scripts/cpu_dispatch_batches.py" run "$T/img" "$T/$model.json")
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then
        echo "   $model: FAILED (exit $rc)" >&2
        fail=1
        continue
    fi
    runs+=("$T/$model.json")
    want=$([ "$model" = Haswell ] && echo avx2 || echo baseline)
    level=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["cpu"]["level"])' "$T/$model.json")
    echo "   $model: kernels $level ($((SECONDS - t)) s)" >&2
    [ "$level" = "$want" ] || { echo "   $model: expected the $want kernels, the run reports $level" >&2; fail=1; }
done
$PY scripts/cpu_dispatch_batches.py compare "${runs[@]}" || fail=1
echo "== CPU models leg done in $((SECONDS - T0)) s: $([ $fail = 0 ] && echo passed || echo FAILED)" >&2
exit $fail
