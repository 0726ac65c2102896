#!/usr/bin/env bash
# Builds the C core's stress tests (test_ring.c, and test_http_pool.c for csrc/net) with
# ASan+UBSan and with TSan and runs them; any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=csrc/tests/bin
mkdir -p "$out"
SRC="$(echo csrc/core/*.c csrc/ring/*.c) csrc/tests/fq_testtask.c csrc/tests/test_ring.c"
CC=${CC:-gcc}
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=all -Icsrc $SRC -o "$out/test_ring_asan" -pthread
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_ring_asan"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -Icsrc $SRC -o "$out/test_ring_tsan" -pthread
TSAN_OPTIONS=halt_on_error=1 "$out/test_ring_tsan"
# the HTTP client's pool and channels (csrc/net) against a server in the test's process
SRC_NET="$(echo csrc/core/*.c csrc/net/*.c) csrc/tests/test_http_pool.c"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=all -Icsrc $SRC_NET -o "$out/test_http_pool_asan" -pthread -ldl
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_http_pool_asan"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -Icsrc $SRC_NET -o "$out/test_http_pool_tsan" -pthread -ldl
TSAN_OPTIONS=halt_on_error=1 "$out/test_http_pool_tsan"
bash csrc/tests/run_image_sanitizers.sh

# The whole native image pipeline (task + pool + ring + image path) under TSan
# and ASan+UBSan, on JPEGs made by fastq.bench.testdata (needs the built package).
jpgs=$(mktemp -d)
trap 'rm -rf "$jpgs"' EXIT
${PYTHON:-python3} -c "from fastq.bench import testdata; testdata.make_jpeg_dataset('$jpgs', 12, seed=1, min_side=100, max_side=260)" 2>/dev/null
CXX=${CXX:-g++}
for san in thread address,undefined; do
    tag=${san//,/}
    objs="$out/obj_$tag"
    rm -rf "$objs"
    mkdir -p "$objs"
    for f in csrc/core/*.c csrc/ring/*.c csrc/task/*.c csrc/tests/test_imgtask.c; do
        $CC -std=c11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fsanitize=$san -Icsrc \
            -c "$f" -o "$objs/$(basename "$f").o"
    done
    $CXX -std=c++17 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -fsanitize=$san -Icsrc \
        -I"${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}" csrc/image/*/*.cpp "$objs"/*.o \
        -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -pthread -o "$out/test_imgtask_$tag"
    TSAN_OPTIONS=halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_imgtask_$tag" "$jpgs"/*.jpg
done
