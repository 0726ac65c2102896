#!/usr/bin/env bash
# GPU checks for a machine with one NVIDIA GPU, Python 3.12, torch, JAX, CuPy and
# opencv-python-headless, and no TensorFlow (what this project's GPU machines have).
# A few minutes.  Where there is no GPU it says so and exits 0: CI stays green.
#
#   scripts/gpu_check.sh
#
#   1. fastq: FASTQ_WHEEL, or the wheel in dist/ for this Python and architecture
#      (scripts/build_wheels_all.sh makes them here), installed into a scratch directory
#      first on PYTHONPATH; without one, an in-place build (needs the development
#      packages of scripts/setup.sh);
#   2. scripts/gpu_check.py: pinning of the slot arena (pin_memory=True, torch's
#      is_pinned on a slot), host-to-device GB/s from a slot / torch-pinned / pageable
#      memory, fastq.torch.to_device under slot pressure (queue_size=2 and a busy stream:
#      every batch's checksum on the GPU against the host's; a naive non_blocking copy
#      whose CPU tensor is dropped is run too, to show what the guard prevents), CuPy /
#      JAX on the GPU batch, training steps of torchvision's ResNet-18 and ResNet-50 (bf16
#      autocast, channels_last, SGD, batch 64) on synthetic batches already on the GPU and fed
#      by fastq's defaults (uint8 over PCIe, fastq.torch.DeviceLoader normalizing to bf16 on the
#      GPU), printing fed / GPU-bound, and images/s to GPU tensors on the reference task (fastq +
#      to_device vs DataLoader(pin_memory=True) with cv2, and with torchvision if present).
#      GPU_CHECK_IMAGES (default 2048) sets the size of the generated JPEG set.
# Exit status: 0 all checks passed (or no GPU), 1 a correctness check failed, 2 set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

why=""
if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -e /dev/nvidia0 ]; then
    why="no nvidia-smi and no /dev/nvidia0"
elif ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "gpu_check: a GPU seems present but $PY has no torch (pip install torch)" >&2
    exit 2
elif ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    why="torch.cuda.is_available() is False ($("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'))"
fi
if [ -n "$why" ]; then
    echo "gpu_check: no usable NVIDIA GPU on this machine ($why): nothing to check; exiting 0"
    exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

T=$(mktemp -d "${TMPDIR:-/tmp}/fastq-gpu.XXXXXX")
trap 'rm -rf "$T"' EXIT
TAG=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
WHEEL=${FASTQ_WHEEL:-$(ls dist/fastq_loader-*-"$TAG"-"$TAG"-manylinux*_"$(uname -m)".whl 2>/dev/null | tail -1 || true)}
if [ -n "$WHEEL" ]; then
    echo "== fastq from $WHEEL"
    "$PY" -m pip install -q --no-deps --disable-pip-version-check --target "$T/site" "$WHEEL"
    export PYTHONPATH="$T/site${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "== no $TAG wheel in dist/: building fastq in place (system OpenCV/libjpeg-turbo)"
    "$PY" setup.py -q build_ext --inplace >"$T/build.log" 2>&1 || {
        tail -30 "$T/build.log" >&2
        echo "gpu_check: the in-place build failed; run scripts/setup.sh, or bring a wheel (FASTQ_WHEEL)" >&2
        exit 2; }
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
cd "$T"  # import the fastq named above, not the checkout's package directory
exec "$PY" "$OLDPWD/scripts/gpu_check.py"
