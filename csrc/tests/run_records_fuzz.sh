#!/usr/bin/env bash
# Mutation-fuzzes the native dataset readers (TFRecord framing + Example parser,
# tar headers) under ASan+UBSan, then runs the read-ahead stress test under ASan+UBSan
# and TSan; any sanitizer report or failed check fails the run.
# Usage: bash csrc/tests/run_records_fuzz.sh [iterations]   (default 3000)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=csrc/tests/bin
mkdir -p "$out"
CC=${CC:-gcc}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc csrc/tests/fuzz_records.c csrc/records/*.c \
    csrc/core/*.c -o "$out/fuzz_records_asan" -pthread -lz
seed=$(mktemp -d)
trap 'rm -rf "$seed"' EXIT
${PYTHON:-python3} - "$seed/seed.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tf:
    for name, data in [("a/0001.jpg", b"\xff\xd8" + b"j" * 900), ("a/0001.cls", b"12\n"),
                       ("b/" + "n" * 130 + ".jpg", b"x" * 40), ("b/" + "n" * 130 + ".cls", b"-3")]:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
PY
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$out/fuzz_records_asan" "$seed/seed.tar" "${1:-3000}"

# The read-ahead (I/O threads + consumers) under ASan+UBSan and TSan.
RA="csrc/tests/test_readahead.c csrc/records/fq_readahead.c csrc/records/fq_spans.c $(echo csrc/core/*.c)"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc $RA -o "$out/test_readahead_asan" -pthread
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_readahead_asan"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -Icsrc $RA -o "$out/test_readahead_tsan" -pthread
TSAN_OPTIONS=halt_on_error=1 "$out/test_readahead_tsan"

# The lending table of remote reads (a fetcher, readers, demands, failed ranges)
# under ASan+UBSan and TSan.
SP="csrc/tests/test_spans.c csrc/records/fq_spans.c $(echo csrc/core/*.c)"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror $SAN -Icsrc $SP -o "$out/test_spans_asan" -pthread
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/test_spans_asan"
$CC -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -Icsrc $SP -o "$out/test_spans_tsan" -pthread
TSAN_OPTIONS=halt_on_error=1 "$out/test_spans_tsan"
