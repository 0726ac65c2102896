#!/usr/bin/env bash
# ASan + UBSan leg for the Python-level tests.
#
# Builds fastq's extensions with FASTQ_SANITIZE=address,undefined into a private copy of
# the sources (the checkout's in-place .so files are not touched), then runs the ring,
# iterable-pipeline, image-pipeline, decode, tar-reader and reader-label tests against
# that build with the ASan runtime preloaded into CPython.  Fails when a test fails or when the sanitizers
# report anything, in the test process or in any subprocess it starts.
#
#   scripts/test_asan.sh [extra pytest args]
#
# Environment:
#   ASAN_WORK   work directory (default: a fresh mktemp -d, removed on success)
#   ASAN_TESTS  test files to run (default: the list below)
#   JOBS        parallel compile jobs (default 2)
#   ASAN_REUSE=1  with ASAN_WORK: reuse the sanitized build already there (the tests
#               are copied again); for iterating locally, not for CI
#
# Why detect_leaks=0: CPython does not free everything at exit (interned strings,
# module state, numpy/OpenCV caches and their thread pools are released by the OS),
# so LeakSanitizer would report thousands of allocations that are not leaks.  Leaks in
# fastq's own C code are checked by the C drivers under LSan with detect_leaks=1
# (csrc/tests/run_sanitizers.sh).  Every other ASan check (out-of-bounds,
# use-after-free, double free, stack overflow of fixed-size arrays, ...) and every
# UBSan check stays on and stops the run at the first report.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PY=${PYTHON:-python3}
JOBS=${JOBS:-2}
TESTS=${ASAN_TESTS:-tests/core/test_ring.py tests/core/test_pipeline_iterable.py tests/image/test_image_pipeline.py tests/image/test_decode.py tests/sources/test_sources_webdataset.py tests/sources/test_reader_label_dtype.py tests/sources/test_sources_tfrecord.py tests/sources/test_sources_tfrecord_stream.py tests/ops/test_op_descriptors.py tests/ops/test_ops.py tests/ops/test_fuzz_policies.py tests/image/test_channels.py tests/ops/test_custom_op.py tests/targets/test_detection_ops.py tests/ops/test_compose.py tests/ops/test_erasing.py tests/ops/test_mix.py tests/ops/test_gaussian_noise.py tests/targets/test_instance_masks.py}
t0=$(date +%s)

CC=${CC:-gcc}
libasan=$($CC -print-file-name=libasan.so)  # unquoted: CC may be a command line ("ccache gcc")
if [ ! -e "$libasan" ] || [ "$libasan" = "libasan.so" ]; then
    echo "test_asan.sh: libasan.so not found for $CC (Debian: apt-get install libasan8 / gcc)" >&2
    exit 2
fi

own_work=0
if [ -z "${ASAN_WORK:-}" ]; then
    ASAN_WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastq-asan.XXXXXX")
    own_work=1
fi
src="$ASAN_WORK/src"
reports="$ASAN_WORK/reports"
rm -rf "$reports"
mkdir -p "$reports"

if [ "${ASAN_REUSE:-0}" = 1 ] && ls "$src"/fastq/_native/_core.*.so >/dev/null 2>&1; then
    echo "test_asan.sh: reusing the sanitized build in $src"
    rm -rf "$src/tests"
    cp -r tests "$src/"
else
    # -- a private copy of the sources, built with the sanitizers --------------------------
    # (tests/helpers/image_ref.py puts its own checkout on sys.path: the tests run from the copy so
    # that they import the sanitized build, never the checkout's in-place one)
    rm -rf "$src"
    mkdir -p "$src"
    cp -r setup.py pyproject.toml fastq csrc tests "$src/"
    find "$src" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +
    rm -f "$src"/fastq/_native/_*.cpp "$src"/fastq/_native/_*.c
    rm -rf "$src/csrc/tests/bin"
    echo "test_asan.sh: building the extensions with ASan+UBSan in $src"
    (cd "$src" && FASTQ_TESTING=1 FASTQ_SANITIZE=address,undefined FASTQ_DEBUG=1 nice -n 10 "$PY" setup.py -q build_ext --inplace \
        -j "$JOBS" > "$ASAN_WORK/build.log" 2>&1) || { tail -50 "$ASAN_WORK/build.log" >&2; exit 1; }
    for m in _core _image _testing; do
        so=$(ls "$src"/fastq/_native/$m.*.so)
        deps=$(ldd "$so")
        grep -q libasan <<<"$deps" || { echo "test_asan.sh: $so is not linked against libasan" >&2; exit 1; }
    done
fi
t1=$(date +%s)

# -- run the tests under the sanitizers ---------------------------------------------------
# halt_on_error/abort_on_error: the first report kills the process, so a report in
# pytest itself fails the run, and one in a child process fails the test that ran it.
# log_path: reports also go to files there (ASan honours it; gcc's UBSan prints to
# stderr regardless, which is why the output is searched too).
# libstdc++ right after libasan: otherwise ASan's __cxa_throw interceptor finds no real
# __cxa_throw when a C++ library (TensorFlow, imported by the tensorpack test) throws.
libstdcxx=$("${CXX:-g++}" -print-file-name=libstdc++.so.6)
export LD_PRELOAD="$libasan:$libstdcxx${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=0:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
export PYTHONMALLOC=malloc      # Python objects through malloc, where ASan sees them
export PYTHONPATH="$src"
export PYTHONDONTWRITEBYTECODE=1
set +e
(cd "$src" && "$PY" -m pytest -q -p no:cacheprovider $TESTS "$@") 2>&1 | env -u LD_PRELOAD tee "$ASAN_WORK/pytest.log"
rc=${PIPESTATUS[0]}
set -e
unset LD_PRELOAD
t2=$(date +%s)

# Reports land in $reports (log_path) or, for some UBSan checks, on stderr (also
# inside the output of a failed test that ran a subprocess): look in both.
if grep -n -E "runtime error:|ERROR: AddressSanitizer|AddressSanitizer: |UndefinedBehaviorSanitizer" \
        "$ASAN_WORK/pytest.log" >"$reports/from_output.txt"; then
    :
else
    rm -f "$reports/from_output.txt"
fi
found=$(find "$reports" -type f -size +0 | sort)
if [ -n "$found" ]; then
    echo "test_asan.sh: SANITIZER REPORTS:" >&2
    for f in $found; do
        echo "---- $f" >&2
        head -80 "$f" >&2
    done
    rc=1
fi
echo "test_asan.sh: build $((t1 - t0))s, tests $((t2 - t1))s, pytest exit $rc"
if [ "$rc" -eq 0 ] && [ "$own_work" -eq 1 ]; then
    rm -rf "$ASAN_WORK"
else
    echo "test_asan.sh: work directory kept: $ASAN_WORK"
fi
exit "$rc"
