"""fastq.torch.DeviceCopier / to_device: the slot of a batch copied to the GPU stays
leased until the CUDA event recorded after the copy has completed, however soon the
caller drops the batch (issue 21).

No GPU here: a fake backend stands in for CUDA.  Its "copy" is deferred like a DMA - the
destination is filled only when the test completes the copy's event - so a slot released
too early is caught twice: by the ring's lease counter, and by the copy reading memory the
producers have already overwritten (a wrong batch).  Reference: Arrays of numbered
samples, so each batch's content is known without fastq.
"""
import ctypes
import os
import subprocess
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fastq.torch needs PyTorch (requirements-dev.txt)")

import fastq  # noqa: E402
import fastq.torch as ftorch  # noqa: E402


class FakeStream:
    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass


class FakeEvent:
    """Completes when the test says so; copies recorded before it run then (a DMA)."""

    def __init__(self, backend):
        self.backend = backend
        self.done = threading.Event()
        self.copies = []

    def record(self, stream):
        self.copies, self.backend.unrecorded = self.backend.unrecorded, []

    def complete(self):
        for src, dst in self.copies:  # the "DMA" reads the slot memory now
            dst.copy_(torch.from_numpy(src.read()))
        self.copies = []
        self.done.set()

    def synchronize(self):
        self.done.wait()


class RawSource:
    """The source of a DMA: an address, no reference to the tensor or its owner - as a
    GPU copy engine sees it.  If the slot went back to the ring too early, the bytes
    read here are those of a later batch."""

    def __init__(self, t):
        a = t.numpy()
        self.dtype, self.shape = a.dtype, a.shape
        self.raw = (ctypes.c_char * a.nbytes).from_address(a.ctypes.data)

    def read(self):
        return np.frombuffer(self.raw, self.dtype).reshape(self.shape).copy()


class FakeOut:
    """Stands for a GPU tensor: filled when the copy's event completes."""

    def __init__(self, t):
        self.t = torch.empty_like(t)

    def copy_(self, src):
        self.t.copy_(src)

    def record_stream(self, stream):
        pass


class FakeBackend:
    def __init__(self):
        self.events = []
        self.unrecorded = []

    def new_stream(self):
        return FakeStream()

    def current_stream(self):
        return FakeStream()

    def stream_context(self, stream):
        import contextlib
        return contextlib.nullcontext()

    def new_event(self):
        e = FakeEvent(self)
        self.events.append(e)
        return e

    def copy(self, t, non_blocking):
        out = FakeOut(t)
        self.unrecorded.append((RawSource(t), out))
        return out


def numbered_pipe(n=40, batch_size=4, queue_size=2):
    imgs = np.stack([np.full((6, 5, 3), i, np.uint8) for i in range(n)])
    return fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(n, dtype=np.int64)), batch_size=batch_size,
                          queue_size=queue_size, workers=2, stall_timeout=10, pin_memory=False, dtype="uint8")


def wait_until(cond, timeout=10.0):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            return False
        time.sleep(0.01)
    return True


def test_slot_held_until_the_copy_event_completes():
    be = FakeBackend()
    copier = ftorch.DeviceCopier("cpu", _backend=be)
    with numbered_pipe() as p:
        it = iter(p)
        batch = next(it)
        out_img, out_lab = copier(batch)
        del batch                                  # the caller drops the CPU side at once
        time.sleep(0.2)
        assert copier.pending() == 1
        assert p.stats()["slots_leased"] == 1      # held by the copier, not by the caller
        be.events[0].complete()
        assert copier.synchronize(timeout=10)
        assert wait_until(lambda: p.stats()["slots_leased"] == 0), p.stats()["slots_leased"]
        np.testing.assert_array_equal(out_lab.t.numpy(), np.arange(4))
        np.testing.assert_array_equal(out_img.t.numpy()[:, 0, 0, 0], np.arange(4))
        it.close()
    copier.close()


def test_every_batch_intact_under_slot_pressure():
    """queue_size=2 and copies completed late, in order: the producers want every slot
    back, and each copy must still read its own batch (a checksum per batch)."""
    be = FakeBackend()
    copier = ftorch.DeviceCopier("cpu", _backend=be)
    outs = []
    with numbered_pipe(n=48, batch_size=4, queue_size=3) as p:
        for k, batch in enumerate(p):
            outs.append(copier(batch))
            del batch
            if k >= 1:                  # complete the previous copy one batch late,
                time.sleep(0.03)        # after the producers had time to refill free slots
                be.events[k - 1].complete()
        be.events[-1].complete()
        assert copier.synchronize(timeout=10)
    copier.close()
    assert len(outs) == 12
    for k, (img, lab) in enumerate(outs):
        want = np.arange(4 * k, 4 * k + 4)
        np.testing.assert_array_equal(lab.t.numpy(), want)
        np.testing.assert_array_equal(img.t.numpy().reshape(4, -1).astype(np.int64).sum(1), want * 6 * 5 * 3)


def test_bfloat16_batch_goes_through_an_int16_view():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 batches need ml_dtypes")
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    t = ftorch._host_tensor(a)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(t.float().numpy(), np.arange(6, dtype=np.float32))


def test_cpu_device_without_a_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA device"):
        ftorch.DeviceCopier("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message; this machine has a GPU")
def test_to_device_without_cuda_says_so():
    with pytest.raises(RuntimeError, match="cuda.is_available"):
        ftorch.to_device((np.zeros(3, np.float32),), "cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit; this machine has a GPU")
def test_gpu_check_script_exits_cleanly_without_a_gpu():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(["bash", os.path.join(root, "scripts", "gpu_check.sh")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "no usable NVIDIA GPU" in r.stdout
