#!/usr/bin/env bash
# The test command: set-up (scripts/setup.sh), then the C core's stress tests
# under AddressSanitizer+UBSan and ThreadSanitizer, then the pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
echo "== C core under sanitizers"
bash csrc/tests/run_sanitizers.sh
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
