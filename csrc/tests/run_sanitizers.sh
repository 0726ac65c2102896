#!/usr/bin/env bash
# Builds the C core's stress test (test_ring.c) with ASan+UBSan and with TSan
# and runs both; any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=csrc/tests/bin
mkdir -p "$out"
SRC="csrc/fq_common.c csrc/fq_ring.c csrc/fq_pool.c csrc/fq_testtask.c csrc/tests/test_ring.c"
CC=${CC:-gcc}
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=all -Icsrc $SRC -o "$out/test_ring_asan" -pthread
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_ring_asan"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -Icsrc $SRC -o "$out/test_ring_tsan" -pthread
TSAN_OPTIONS=halt_on_error=1 "$out/test_ring_tsan"
if [ -f csrc/tests/test_image.cpp ] && [ -f csrc/tests/run_image_sanitizers.sh ]; then
    bash csrc/tests/run_image_sanitizers.sh
fi
