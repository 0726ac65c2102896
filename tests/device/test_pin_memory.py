"""Pinned slot memory.  No GPU here, so the positive path is checked against
a stand-in CUDA runtime (a tiny C library exporting the three entry points
fastq uses, recording what it is asked), loaded through $FASTQ_CUDART in a
subprocess; the negative paths run against whatever this machine has."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastq
from fastq.errors import PinMemoryError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE_CUDART = r"""
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
static FILE *log_file(void) {
    static FILE *f;
    if (!f) f = fopen(getenv("FAKE_CUDART_LOG"), "a");
    return f;
}
int cudaGetDeviceCount(int *n) {  /* FAKE_CUDART_COUNT_RC: the error code to return instead */
    const char *rc = getenv("FAKE_CUDART_COUNT_RC");
    if (rc) return atoi(rc);
    *n = 1; return 0;
}
int cudaHostRegister(void *p, size_t n, unsigned int flags) {
    fprintf(log_file(), "register %p %zu %u\n", p, n, flags); fflush(log_file()); return 0;
}
int cudaHostUnregister(void *p) { fprintf(log_file(), "unregister %p\n", p); fflush(log_file()); return 0; }
const char *cudaGetErrorString(int e) { (void)e; return "fake"; }
"""


@pytest.fixture(scope="module")
def fake_cudart(tmp_path_factory):
    d = tmp_path_factory.mktemp("cudart")
    src = d / "fake.c"
    src.write_text(FAKE_CUDART)
    lib = d / "libcudart.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True)
    return lib


def run_py(code, env_extra):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)


def test_arena_is_registered_once_and_unregistered_before_it_is_freed(fake_cudart, tmp_path):
    log = tmp_path / "log.txt"
    res = run_py("""
        import gc, numpy as np, fastq
        from fastq._native import _testing
        p = fastq.Pipeline([(np.zeros(5, np.float32), 1)] * 12, batch_size=4, queue_size=3, pin_memory=True)
        kept = None
        for b in p:
            kept = b                      # a batch still alive after close()
        st = p.stats()
        ring = p._state.ring
        print("STATS", st["pinned"], hex(_testing.arena_address(ring)), ring.arena_bytes, flush=True)
        p.close()
        print("CLOSED", flush=True)
        del p, ring, b
        gc.collect()
        print("PIPELINE_GONE", flush=True)
        del kept
        gc.collect()
        print("BATCH_GONE", flush=True)
    """, {"FASTQ_CUDART": str(fake_cudart), "FAKE_CUDART_LOG": str(log)})
    assert res.returncode == 0, res.stderr
    out = res.stdout.split()
    assert out[0] == "STATS" and out[1] == "True"
    addr, nbytes = int(out[2], 16), int(out[3])
    assert addr % 4096 == 0
    lines = log.read_text().splitlines()
    assert lines[0] == f"register {hex(addr)} {nbytes} 0"
    assert lines[1] == f"unregister {hex(addr)}"
    assert len(lines) == 2


def test_pin_takes_a_ring_object_and_pins_it_once(fake_cudart, tmp_path):
    """_cuda.pin takes a typed Ring (no integer addresses); a second pin of the same
    ring is refused before anything is registered again."""
    log = tmp_path / "log.txt"
    res = run_py("""
        import numpy as np
        from fastq._native import _core
        from fastq.device import cuda
        cu = cuda._load()
        for bad in (12345, None, "ring"):
            try:
                cu.pin(bad)
            except TypeError as e:
                print("TYPEERROR", type(bad).__name__)
        ring = _core.Ring(2, 2, [np.uint8], [(8,)])
        print("PINNED", cu.pin(ring) == ring.arena_bytes)
        try:
            cu.pin(ring)
        except ValueError as e:
            print("TWICE", e)
        del ring
        print("COUNTS", *cu.counts())
    """, {"FASTQ_CUDART": str(fake_cudart), "FAKE_CUDART_LOG": str(log)})
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[:3] == ["TYPEERROR int", "TYPEERROR NoneType", "TYPEERROR str"], out
    assert out[3] == "PINNED True"
    assert out[4].startswith("TWICE this ring's arena is already pinned"), out
    assert out[5] == "COUNTS 1 1", out
    lines = log.read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["register", "unregister"], lines


def test_auto_without_a_usable_runtime_runs_unpinned_and_says_why(tmp_path):
    res = run_py("""
        import numpy as np, fastq
        p = fastq.Pipeline([(np.zeros(3),)] * 4, batch_size=2)
        assert len(list(p)) == 2
        st = p.stats()
        print(st["pinned"], "|", st["pin_reason"])
    """, {"FASTQ_CUDART": str(tmp_path / "no-such-libcudart.so")})
    assert res.returncode == 0, res.stderr
    pinned, reason = res.stdout.strip().split(" | ")
    assert pinned == "False"
    assert reason.startswith("not pinned:") and "no-such-libcudart.so" in reason


@pytest.mark.parametrize("rc,reason", [
    (35, "not pinned: no CUDA device (no NVIDIA driver this CUDA runtime can use: cudaGetDeviceCount returned 35)"),
    (100, "not pinned: no CUDA device (the CUDA runtime loaded but sees no GPU)")])
def test_stats_before_the_first_batch_and_without_a_cuda_device(fake_cudart, tmp_path, rc, reason):
    """Before the first batch nothing is decided: pinned None, "not allocated yet".  A
    runtime without a driver (cudaErrorInsufficientDriver, what a CPU-only machine with
    the CUDA wheel gives) or without a GPU (cudaErrorNoDevice) is "no CUDA device", not
    the runtime's raw error text; pin_memory=True raises with the same words."""
    res = run_py("""
        import numpy as np, fastq
        from fastq.errors import PinMemoryError
        p = fastq.Pipeline([(np.zeros(3),)] * 4, batch_size=2)
        st = p.stats()
        print(st["pinned"], "|", st["pin_reason"])
        assert len(list(p)) == 2
        st = p.stats()
        print(st["pinned"], "|", st["pin_reason"])
        p = fastq.Pipeline([(np.zeros(3),)] * 4, batch_size=2, pin_memory=True)
        st = p.stats()
        print(st["pinned"], "|", st["pin_reason"])
        try:
            list(p)
        except PinMemoryError as e:
            print("RAISED", e)
    """, {"FASTQ_CUDART": str(fake_cudart), "FAKE_CUDART_COUNT_RC": str(rc), "FAKE_CUDART_LOG": str(tmp_path / "log")})
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0] == out[2] == "None | not allocated yet (with the first batch)", out
    assert out[1] == f"False | {reason}", out
    assert out[3] == "RAISED pin_memory=True but the slot memory cannot be pinned: " + reason[len("not pinned: "):], out
    assert "insufficient" not in res.stdout


def test_required_pinning_without_a_runtime_is_a_clear_error(tmp_path):
    res = run_py("""
        import numpy as np, fastq
        from fastq.errors import PinMemoryError
        p = fastq.Pipeline([(np.zeros(3),)] * 4, batch_size=2, pin_memory=True)
        try:
            list(p)
        except PinMemoryError as e:
            print("RAISED", e)
    """, {"FASTQ_CUDART": str(tmp_path / "missing.so")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("RAISED pin_memory=True but the slot memory cannot be pinned")


def test_pin_memory_false_and_bad_value():
    p = fastq.Pipeline([(np.zeros(3),)] * 4, batch_size=2, pin_memory=False)
    assert len(list(p)) == 2
    assert p.stats()["pinned"] is False and p.stats()["pin_reason"] == "pin_memory=False"
    p.close()
    with pytest.raises(ValueError, match="pin_memory"):
        fastq.Pipeline([], batch_size=1, pin_memory="yes")
    assert issubclass(PinMemoryError, fastq.errors.FastqError)
