#!/usr/bin/env bash
# The main job: set-up (scripts/setup.sh), then the demo on a small JPEG set it
# builds itself.  Extra arguments go to `python -m fastq.bench.demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec ${PYTHON:-python3} -m fastq.bench.demo "$@"
