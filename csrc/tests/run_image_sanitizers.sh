#!/usr/bin/env bash
# Builds csrc/tests/test_image.cpp (the fq_image C API driver) with ASan+UBSan and runs it;
# any sanitizer report fails the run.  Called by run_sanitizers.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=csrc/tests/bin
mkdir -p "$out"
CC=${CC:-gcc}
CXX=${CXX:-g++}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# core/ as image/ uses it (errors; fq_read_file, which the C API table in fq_capi.cpp exports;
# fq_cpu, the kernels' dispatch)
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -c csrc/core/fq_common.c -o "$out/fq_common_imgsan.o"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -c csrc/core/fq_io.c -o "$out/fq_io_imgsan.o"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -c csrc/core/fq_cpu.c -o "$out/fq_cpu_imgsan.o"
$CXX -std=c++17 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -I"${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}" \
    csrc/tests/test_image.cpp csrc/image/*/*.cpp "$out/fq_common_imgsan.o" "$out/fq_io_imgsan.o" "$out/fq_cpu_imgsan.o" \
    -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o "$out/test_image_asan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 "$out/test_image_asan"

# The segment-skipping crop decode (fq_image_restart_crop.cpp) against the plain ROI path.
$CXX -std=c++17 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -I"${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}" \
    csrc/tests/test_restart_crop.cpp csrc/image/*/*.cpp "$out/fq_common_imgsan.o" "$out/fq_io_imgsan.o" "$out/fq_cpu_imgsan.o" \
    -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o "$out/test_restart_crop_asan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$out/test_restart_crop_asan"

# Per-instance masks (fq_image_targets_inst.cpp): polygons, RLE, boxes, the error paths; leaks on.
$CXX -std=c++17 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc -I"${FASTQ_OPENCV_INCLUDE:-/usr/include/opencv4}" \
    csrc/tests/test_instance_masks.cpp csrc/image/*/*.cpp "$out/fq_common_imgsan.o" "$out/fq_io_imgsan.o" "$out/fq_cpu_imgsan.o" \
    -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o "$out/test_instance_masks_asan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$out/test_instance_masks_asan"
