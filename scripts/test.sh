#!/usr/bin/env bash
# The test command: set-up (scripts/setup.sh: packages + the in-place development
# build), the self-contained wheel (scripts/build_wheel.sh: its static libraries are
# built once per machine and cached under ${FASTQ_DEPS_CACHE:-~/.cache/fastq-deps}),
# the C core's stress tests under AddressSanitizer+UBSan and ThreadSanitizer, the
# readers' and the decoder's bounded fuzzers, an ASan+UBSan build of the extensions
# running the ring/pipeline/decode tests, then the pytest suite.  The suite runs against the in-place build, and
# tests/wheel/test_wheel.py installs the wheel (FASTQ_WHEEL) into a fresh venv and tests it
# there, as users get it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --full
PY=${PYTHON:-python3}
echo "== wheel (scripts/build_wheel.sh, FASTQ_TOOLCHAIN=zig: the manylinux2014 release build)"
FASTQ_WHEEL=$(FASTQ_TOOLCHAIN=zig bash scripts/build_wheel.sh | tail -1)
export FASTQ_WHEEL
echo "   $FASTQ_WHEEL"
echo "== aarch64: cross-built wheel, reduced suite and cross-arch batches under qemu (scripts/test_aarch64.sh)"
bash scripts/test_aarch64.sh
echo "== C core under sanitizers"
bash csrc/tests/run_sanitizers.sh
echo "== dataset readers: mutation fuzzing under ASan+UBSan, read-ahead under ASan and TSan"
bash csrc/tests/run_records_fuzz.sh
echo "== decoder: libFuzzer under ASan+UBSan (bounded)"
FUZZ_SECONDS=${FUZZ_SECONDS:-60} bash csrc/tests/run_fuzz.sh
echo "== ring, iterable and image pipeline pytest under ASan+UBSan"
bash scripts/test_asan.sh
echo "== pytest"
set +e
$PY -m pytest -q tests "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
    echo "pytest collected no tests: treating as failure"
    exit 1
fi
exit $rc
