#!/usr/bin/env bash
# Same-run speed of the two builds of fastq on the reference task
# (benchmarks/bench_images.py, peers fastq and fastq1): the self-contained wheel
# (static OpenCV / libjpeg-turbo from scripts/build_deps.sh) against the in-place
# development build linked to Debian's shared libraries.  Rounds alternate the two
# builds (and their order), each round a fresh bench_images.py run (warm-up + one
# timed epoch per peer); the medians and the ratio vendored / Debian are printed.
#   FASTQ_WHEEL (default: the manylinux wheel in dist/), ROUNDS (5), IMAGES (2000)
#   FASTQ_BASE_WHEEL: compare against this wheel instead of the Debian in-place build
#   (e.g. the gcc-built manylinux_2_34 wheel against the zig-built manylinux2014 one);
#   the "debian" rows are then that wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEEL=${FASTQ_WHEEL:-$(ls dist/fastq_loader-*-manylinux*_x86_64.whl | tail -1)}
ROUNDS=${ROUNDS:-5}
IMAGES=${IMAGES:-2000}
T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-benchwheel.XXXXXX")
trap 'rm -rf "$T"' EXIT
$PY -m pip install -q --no-deps --disable-pip-version-check --target "$T/vendored" "$WHEEL"
BASE=$PWD
if [ -n "${FASTQ_BASE_WHEEL:-}" ]; then
    $PY -m pip install -q --no-deps --disable-pip-version-check --target "$T/base" "$FASTQ_BASE_WHEEL"
    BASE=$T/base
    echo "baseline (\"debian\" rows): $FASTQ_BASE_WHEEL; vendored: $WHEEL"
else
    ls fastq/_native/_image*.so >/dev/null 2>&1 || { echo "build fastq in place first (python3 setup.py build_ext --inplace)" >&2; exit 1; }
fi
# a copy of the benchmark outside the checkout, so that its children import the fastq
# named by PYTHONPATH (the in-tree script prefers the checkout's in-place build)
mkdir -p "$T/tree/benchmarks" "$T/tree/fastq"
cp benchmarks/bench_images.py "$T/tree/benchmarks/"
REPO=$PWD
declare -A PP=([debian]="$BASE" [vendored]="$T/vendored")
cd "$T"  # nothing of the checkout on sys.path but what PYTHONPATH names
for b in debian vendored; do
    echo "$b: $(PYTHONPATH=${PP[$b]} $PY -c 'import fastq._native._image as m; print(m.__file__)')"
done
for r in $(seq "$ROUNDS"); do
    order="debian vendored"
    [ $((r % 2)) -eq 0 ] && order="vendored debian"
    for b in $order; do
        echo "== round $r: $b"
        PYTHONPATH=${PP[$b]} $PY "$T/tree/benchmarks/bench_images.py" --peers fastq,fastq1 --repeats 1 \
            --images "$IMAGES" --data-dir "$REPO/bench_data" --json "$T/$b.$r.json" | grep "round 1:"
    done
done
$PY - "$T" "$ROUNDS" <<'PY'
import json, statistics, sys
t, rounds = sys.argv[1], int(sys.argv[2])
rate, cpu = {}, {}
for b in ("debian", "vendored"):
    for r in range(1, rounds + 1):
        peers = json.load(open(f"{t}/{b}.{r}.json"))["peers"]
        for p in ("fastq", "fastq1"):
            # the one-worker peer is keyed "fastq1" or "fastq@1" depending on the bench version
            keys = [p] if p == "fastq" else ["fastq1", "fastq@1"]
            v = next((peers[k] for k in keys if k in peers), None)
            if v is None:
                sys.exit(f"bench_wheel.sh: no {keys} in the results (peers: {sorted(peers)})")
            rate.setdefault((b, p), []).append(v["images_per_s"])
            cpu.setdefault((b, p), []).append(v["cpu_us_per_image"])
med = lambda d, k: statistics.median(d[k])  # noqa: E731
print(f"\nreference task, median of {rounds} rounds (same run); on a shared machine the CPU time")
print("per image is the steadier figure (images/s moves with what other processes take)")
print(f"{'peer':8s} {'images/s Debian':>16s} {'vendored':>9s} {'ratio':>6s}   {'CPU us/image Debian':>20s} {'vendored':>9s} {'speed ratio':>11s}")
for p in ("fastq", "fastq1"):
    a, b = med(rate, ("debian", p)), med(rate, ("vendored", p))
    ca, cb = med(cpu, ("debian", p)), med(cpu, ("vendored", p))
    print(f"{p:8s} {a:16.0f} {b:9.0f} {b / a:5.2f}x   {ca:20.0f} {cb:9.0f} {ca / cb:10.2f}x")
PY
