#!/usr/bin/env bash
# The aarch64 CI leg: cross-builds fastq's aarch64 wheel (zig, glibc 2.17) and tests it
# on this x86-64 machine under qemu-user, with Debian 12's arm64 CPython 3.11 and numpy's
# aarch64 wheel (scripts/aarch64_sysroot.sh).
#
#   scripts/test_aarch64.sh [pytest args]
#
#   1. the wheel: FASTQ_TOOLCHAIN=zig FASTQ_TARGET_ARCH=aarch64 scripts/build_wheel.sh
#      (or FASTQ_AARCH64_WHEEL=path to test a given one); `auditwheel show` must say
#      manylinux_2_17_aarch64;
#   2. it is unzipped into a scratch site dir, with fastq._native._testing cross-built next to it
#      (scripts/build_testing_module.sh in the cross environment);
#   3. under `qemu-aarch64 -L SYSROOT`: import, then scripts/crossarch_batches.py runs
#      fixed op chains over JPEG, progressive JPEG, PNG, WebP, TIFF, BMP and PPM files and
#      the batches are compared bit for bit with the x86-64 wheel's (FASTQ_WHEEL, default
#      the manylinux2014 x86-64 wheel in dist/, built with the same toolchain if missing);
#   4. the reduced suite under qemu: the test files that need neither cv2, scikit-image nor
#      a framework - the ring, held batches, lifecycle, Python iterable sources, error
#      codes, backend, the frozen golden vectors (RNG, shuffle, explain records: the
#      x86-64 literals) and the property tests (determinism for any worker count,
#      resume) - less 8 tests listed below (subprocesses of sys.executable; cv2; tensorpack).
# Everything is cached: the static libraries and the sysroot by their keys, zig by version.
# Needs: qemu-user (apt-get install qemu-user), llvm-strip (apt-get install llvm or clang),
# and what scripts/build_wheel.sh needs.  PYTHON must be a CPython 3.11 (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
T0=$SECONDS
[ "$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.11 ] ||
    { echo "test_aarch64.sh: PYTHON must be CPython 3.11 (the arm64 Debian 12 Python it cross-builds for)" >&2; exit 2; }
missing=""
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-user"
command -v llvm-strip >/dev/null || missing="$missing llvm"
if [ -n "$missing" ]; then
    echo "== installing$missing" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
fi
SYSROOT=$(bash scripts/aarch64_sysroot.sh)
echo "== sysroot $SYSROOT ($((SECONDS - T0)) s)" >&2

WHEEL=${FASTQ_AARCH64_WHEEL:-}
if [ -z "$WHEEL" ]; then
    WHEEL=$(FASTQ_TOOLCHAIN=zig FASTQ_TARGET_ARCH=aarch64 PYTHON=$PY bash scripts/build_wheel.sh | tail -1)
fi
echo "== aarch64 wheel $WHEEL ($((SECONDS - T0)) s)" >&2
show=$(auditwheel show "$WHEEL")
echo "$show" >&2
echo "$show" | tr -s ' \n' ' ' | grep -q 'platform tag: "manylinux_2_17_aarch64"' ||
    { echo "test_aarch64.sh: $WHEEL is not manylinux_2_17_aarch64" >&2; exit 1; }
X86=${FASTQ_WHEEL:-$(ls dist/fastq_loader-*-cp311-cp311-*manylinux_2_17_x86_64*.whl 2>/dev/null | tail -1 || true)}
if [ -z "$X86" ]; then
    X86=$(FASTQ_TOOLCHAIN=zig PYTHON=$PY bash scripts/build_wheel.sh | tail -1)
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-aarch64.XXXXXX")
trap 'rm -rf "$T"' EXIT
$PY -m zipfile -e "$WHEEL" "$T/site"
(
    # shellcheck disable=SC1091
    . "$(bash scripts/zig_toolchain.sh aarch64)/env.sh"
    # shellcheck disable=SC1091
    . "$SYSROOT/cross-env.sh"
    PYTHON=$PY bash scripts/build_testing_module.sh "$T/site" >/dev/null
)
$PY -m pip install -q --no-deps --disable-pip-version-check --target "$T/x86" "$X86"

# An arm64 process: QEMU_LD_PREFIX is the -L of qemu-aarch64; PYTHONPATH: the wheel, then
# numpy/pytest/hypothesis of the sysroot.
arm() { QEMU_LD_PREFIX=$SYSROOT PYTHONPATH="$T/site:$SYSROOT/site${ARM_PYTHONPATH:+:$ARM_PYTHONPATH}" \
        qemu-aarch64 "$SYSROOT/usr/bin/python3.11" "$@"; }
echo "== import under qemu-aarch64" >&2
(cd "$T" && arm -c 'import platform, fastq, fastq._native._core, fastq._native._image, fastq._native._testing; print(platform.machine(), fastq.__version__, fastq.__file__)')

echo "== every format, op by op: aarch64 (qemu) vs x86-64, same seed" >&2
t=$SECONDS
$PY scripts/crossarch_batches.py make "$T/img"
(cd "$T" && PYTHONPATH="$T/x86" $PY "$OLDPWD/scripts/crossarch_batches.py" run "$T/img" "$T/x86.npz")
(cd "$T" && arm "$OLDPWD/scripts/crossarch_batches.py" run "$T/img" "$T/arm.npz")
set +e
$PY scripts/crossarch_batches.py compare "$T/x86.npz" "$T/arm.npz"
SAME=$?
set -e
echo "   ($((SECONDS - t)) s)" >&2

echo "== reduced suite under qemu-aarch64" >&2
t=$SECONDS
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$T" --one-top-level=tree
rm "$T/tree/fastq/__init__.py"  # `import fastq` finds the aarch64 install (see test_installed.sh)
# Left out: tests that start `sys.executable` in a subprocess (without binfmt_misc the
# host kernel cannot exec an arm64 binary: "Exec format error"), and those that need cv2
# or tensorpack, which the sysroot does not have.
(cd "$T/tree" && arm -m pytest -q -p no:cacheprovider \
    tests/core/test_ring.py tests/core/test_held_batches.py tests/core/test_lifecycle.py tests/core/test_pipeline_iterable.py \
    tests/core/test_error_codes.py tests/core/test_backend.py tests/image/test_golden.py tests/core/test_properties.py \
    --deselect tests/core/test_lifecycle.py::test_fork_child_that_never_used_the_pipeline_exits_silently \
    --deselect tests/core/test_lifecycle.py::test_close_gives_the_arena_back_even_when_malloc_would_keep_it \
    --deselect tests/core/test_pipeline_iterable.py::test_interpreter_exit_with_a_running_pipeline_is_clean \
    --deselect tests/core/test_properties.py::test_up_to_31_sample_dimensions_work \
    --deselect tests/core/test_properties.py::test_more_than_32_sample_dimensions_raise_valueerror_not_crash \
    --deselect tests/image/test_golden.py::test_jpeg_decode_plan_is_frozen \
    --deselect tests/core/test_properties.py::test_mutated_images_decode_or_fail_cleanly_and_the_same_for_1_and_2_workers \
    --deselect tests/core/test_properties.py::test_every_format_decodes_unmutated \
    --deselect tests/core/test_pipeline_iterable.py::test_tensorpack_dataflow_as_source "$@")
echo "   ($((SECONDS - t)) s)" >&2
echo "== aarch64 leg done in $((SECONDS - T0)) s; batches bit-identical to x86-64: $([ $SAME = 0 ] && echo all || echo 'not all, see the table')" >&2
