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


# -- issue 28: copies overlap compute; the consumer waits only for its own batch ----------

class Work:
    """One item of work queued on a fake stream: done when its stream predecessor and
    every event it waits for are done (copies: by the fake DMA engine; kernels: by the test)."""

    def __init__(self, kind, deps, src=None, dst=None):
        self.kind, self.deps, self.src, self.dst = kind, deps, src, dst
        self.done = threading.Event()

    def ready(self):
        return all(d is None or d.done.is_set() for d in self.deps)


class GStream:
    def __init__(self, be, name):
        self.be, self.name = be, name
        self.last = None       # the last Work queued here
        self.pending = []      # what the next Work must wait for (wait_stream / wait_event)

    def enqueue(self, kind, src=None, dst=None):
        w = Work(kind, [self.last] + self.pending, src, dst)
        self.pending = []
        self.last = w
        with self.be.lock:
            self.be.work.append(w)
        return w

    def wait_stream(self, other):
        self.be.log.append(("wait_stream", self.name, other.name))
        self.pending.append(other.last)

    def wait_event(self, event):
        self.be.log.append(("wait_event", self.name, event.id))
        self.pending.append(event.marker)


class GEvent:
    def __init__(self, be, i):
        self.be, self.id, self.marker = be, i, None

    def record(self, stream):
        self.marker = stream.last
        self.be.log.append(("record", stream.name, self.id))

    def query(self):
        return self.marker is None or self.marker.done.is_set()

    def synchronize(self):
        assert self.marker is None or self.marker.done.wait(20), f"event {self.id} never completed"


class GOut(FakeOut):
    def __init__(self, t, be):
        super().__init__(t)
        self.be = be
        self.used_on = []

    def record_stream(self, stream):
        self.used_on.append(stream.name)


class GraphBackend:
    """Streams with real dependencies: a copy completes (read from the slot by address, as
    a DMA) only after whatever its stream was told to wait for; kernels queued on the
    compute stream complete only when the test finishes them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.log, self.work, self.n_events = [], [], 0
        self.compute = GStream(self, "compute")
        self.current = self.compute
        self.stop = threading.Event()
        self.dma = threading.Thread(target=self._dma, daemon=True)
        self.dma.start()

    def _dma(self):
        while not self.stop.is_set():
            with self.lock:
                todo = [w for w in self.work if w.kind == "copy" and not w.done.is_set() and w.ready()]
            for w in todo:
                w.dst.copy_(torch.from_numpy(w.src.read()))
                w.done.set()
            time.sleep(0.002)

    def new_stream(self):
        return GStream(self, "copy")

    def current_stream(self):
        return self.compute

    def stream_context(self, stream):
        import contextlib
        be = self

        @contextlib.contextmanager
        def ctx():
            prev, be.current = be.current, stream
            try:
                yield
            finally:
                be.current = prev
        return ctx()

    def new_event(self):
        self.n_events += 1
        return GEvent(self, self.n_events - 1)

    def copy(self, t, non_blocking):
        out = GOut(t, self)
        self.current.enqueue("copy", RawSource(t), out)
        return out

    def launch_step(self):
        """A training step's kernels on the compute stream (after the batch's event wait)."""
        return self.compute.enqueue("kernel")

    def finish_compute(self):
        with self.lock:
            for w in self.work:
                if w.kind == "kernel":
                    w.done.set()

    def close(self):
        self.stop.set()
        self.dma.join()


def test_copies_run_while_compute_is_busy_and_slots_come_back():
    """Every step's kernels stay queued (a GPU that is far behind the host).  Copies must
    not wait for them: all 10 batches arrive, the slots go back as each copy finishes, so
    queue_size=2 never stalls the producers; the compute stream waits for each batch's own
    copy event before its step; the copy stream waits for nothing."""
    be = GraphBackend()
    copier = ftorch.DeviceCopier("cpu", _backend=be)
    outs = []
    try:
        with numbered_pipe(n=40, batch_size=4, queue_size=2) as p:
            for k, batch in enumerate(p):
                img, lab = copier(batch)
                del batch
                be.launch_step()           # step k, queued after its wait on copy k's event
                outs.append((img, lab))
                if k == 9:
                    break
            assert copier.synchronize(timeout=10), "a copy waited for the busy compute stream"
            assert wait_until(lambda: p.stats()["slots_leased"] == 0)
            assert all(not w.done.is_set() for w in be.work if w.kind == "kernel")  # compute still busy
    finally:
        be.finish_compute()
        copier.close()
        be.close()
    for k, (img, lab) in enumerate(outs):
        np.testing.assert_array_equal(lab.t.numpy(), np.arange(4 * k, 4 * k + 4))
        np.testing.assert_array_equal(img.t.numpy()[:, 0, 0, 0], np.arange(4 * k, 4 * k + 4))
        assert img.used_on == ["compute"] and lab.used_on == ["compute"]  # allocator: reuse after compute
    waits = [e for e in be.log if e[0].startswith("wait")]
    assert not [e for e in waits if e[1] == "copy"], waits           # the copy stream never waits
    assert waits == [("wait_event", "compute", k) for k in range(10)]  # compute waits for its own copy only
    records = [e for e in be.log if e[0] == "record"]
    assert records == [("record", "copy", k) for k in range(10)]


def test_the_old_serialized_copy_would_have_stalled(monkeypatch):
    """The check above can fail: a copier whose stream waits for the compute stream
    (the behaviour before issue 28) holds every slot behind the queued steps."""
    be = GraphBackend()
    copier = ftorch.DeviceCopier("cpu", _backend=be)
    orig = copier.issue

    def serialized(batch, non_blocking=True, conversion=None):
        copier.stream.wait_stream(be.compute)
        return orig(batch, non_blocking, conversion)

    monkeypatch.setattr(copier, "issue", serialized)
    try:
        with numbered_pipe(n=40, batch_size=4, queue_size=2) as p:
            it = iter(p)
            be.launch_step()                            # the step before: still running
            for k in range(2):
                copier(next(it))
                be.launch_step()
            assert not copier.synchronize(timeout=0.5)  # held behind compute
            assert p.stats()["slots_leased"] == 2       # both slots: the producers have nowhere to write
            be.finish_compute()
            assert copier.synchronize(timeout=10)
            it.close()
    finally:
        be.finish_compute()
        copier.close()
        be.close()
