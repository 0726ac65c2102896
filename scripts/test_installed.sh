#!/usr/bin/env bash
# Runs fastq's test suite against an installed fastq (a wheel installed into a venv,
# or cibuildwheel's test environment) instead of the checkout's in-place build.
#
#   PYTHON=/path/to/venv/bin/python scripts/test_installed.sh [pytest args]
#
# $PYTHON must have fastq installed and the test requirements (requirements-dev.txt
# minus the build tools; torch and jax only for tests/device/test_dlpack.py, mypy only for
# tests/core/test_typing.py) plus Cython and setuptools for step 1.
#   1. scripts/build_testing_module.sh builds the test-only fastq._native._testing next to the
#      installed package (the wheel never contains it);
#   2. the checkout's tracked files are copied into a scratch tree without
#      fastq/__init__.py: the tests read files from the tree (docs, examples, csrc
#      headers, fastq/*.pxd), while `import fastq` - also in the subprocesses the tests
#      start with the tree on PYTHONPATH - finds the installed package (a directory
#      without __init__.py is only a namespace-package candidate, and a regular package
#      later on sys.path wins);
#   3. pytest runs there with -m "not wheel" (tests/wheel/test_build.py and tests/wheel/test_wheel.py
#      build fastq from the checkout themselves; markers: pyproject.toml) and without
#      the mypy run over the source tree (test_mypy_passes_on_the_package_and_examples:
#      the normal suite runs it; the check that mypy catches misuse through the
#      installed stubs does run).  FASTQ_TESTS_WITHOUT_TF=1 adds "not tf and not
#      tensorpack" (tests/conftest.py).  A -m among the arguments replaces "not wheel":
#      include it, e.g. -m "not wheel and not torch".
# The scratch tree is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
installed=$(cd / && "$PY" -c 'import fastq, os; print(os.path.dirname(fastq.__file__))')
case $installed in
    "$PWD"/*) echo "test_installed.sh: $PY imports fastq from this checkout ($installed), not an install" >&2
              exit 2 ;;
esac
echo "== fastq under test: $installed" >&2
PYTHON="$PY" bash scripts/build_testing_module.sh "$(dirname "$installed")" >&2
T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-installed.XXXXXX")
trap 'rm -rf "$T"' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$T"
else  # an exported tree (no .git): the parts the tests read
    cp -r README.md pyproject.toml setup.py csrc docs examples benchmarks fastq scripts tests "$T/"
    find "$T" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +
fi
rm "$T/fastq/__init__.py"
cd "$T"
got=$("$PY" -c 'import fastq; print(fastq.__file__)')
[ "$got" = "$installed/__init__.py" ] || { echo "test_installed.sh: the tree shadows the install ($got)" >&2; exit 1; }
PATH="$(dirname "$PY"):$PATH" "$PY" -m pytest -q -p no:cacheprovider tests -m "not wheel" \
    --deselect tests/core/test_typing.py::test_mypy_passes_on_the_package_and_examples "$@"
