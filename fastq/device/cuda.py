"""Pinned (page-locked) slot memory for fast, asynchronous host-to-device copies.

The whole slot arena of a pipeline is registered once with ``cudaHostRegister``
when its ring is created, and unregistered just before the arena is freed
(when the pipeline is closed and no batch still references it).  The CUDA
runtime is loaded at run time (``dlopen``), so fastq needs no CUDA at build
time and never fails on a machine without one:

* ``pin_memory="auto"``: pinned if a runtime loads and sees a device; otherwise
  unpinned, and ``Pipeline.stats()["pin_reason"]`` says why;
* ``pin_memory=True``: the same failure raises :class:`fastq.errors.PinMemoryError`.

Where the runtime is looked for: ``$FASTQ_CUDART`` if set; the
``nvidia-cuda-runtime`` wheel that ``tensorflow[and-cuda]`` installs
(``site-packages/nvidia/cuda_runtime/lib``); then the system's
``libcudart.so`` / ``libcudart.so.{13,12,11.0}``.
"""
import glob
import os
import site
import sys

from fastq.errors import FastqError, PinMemoryError

__all__ = ["pin_ring", "runtime_candidates", "available"]


def runtime_candidates():
    env = os.environ.get("FASTQ_CUDART")
    if env:
        return [env]
    out = []
    roots = list(sys.path)
    try:
        roots += site.getsitepackages()
    except AttributeError:
        pass
    for root in dict.fromkeys(roots):
        out += sorted(glob.glob(os.path.join(root, "nvidia", "cuda_runtime", "lib", "libcudart.so*")), reverse=True)
    out += ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
    return out


def _load():
    from fastq._native import _cuda
    _cuda.load(runtime_candidates())
    n = _cuda.device_count()
    if n < 1:
        raise FastqError("no CUDA device (the CUDA runtime loaded but sees no GPU)")
    return _cuda


def available():
    """(True, "") if slot memory can be pinned here, else (False, reason)."""
    try:
        _load()
    except (FastqError, ImportError, OSError) as e:
        return False, str(e)
    return True, ""


def pin_ring(ring, required=False):
    """Register `ring`'s arena as pinned memory.  Returns the status dict
    that Pipeline.stats() reports."""
    try:
        cu = _load()
        nbytes = cu.pin(ring)
    except (FastqError, ImportError, OSError) as e:
        reason = f"not pinned: {e}"
        if required:
            raise PinMemoryError(f"pin_memory=True but the slot memory cannot be pinned: {e}") from None
        return {"pinned": False, "pin_reason": reason}
    return {"pinned": True, "pin_reason": f"registered {nbytes} bytes with cudaHostRegister"}
