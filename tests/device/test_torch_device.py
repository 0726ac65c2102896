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

    def record_stream(self, t, stream):
        t.record_stream(stream)


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
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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

    def record_stream(self, t, stream):
        t.record_stream(stream)

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


# -- uint8 on the wire, conversion on the device (CPU tensors stand in for the GPU) -------

def photo_arrays(n=24, seed=5):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (n, 9, 11, 3), dtype=np.uint8)
    return np.repeat(np.repeat(base, 4, axis=1), 4, axis=2)  # 36 x 44, smooth-ish


def host_batches(layout="NHWC", dtype="uint8", normalize=None, workers=2, n=24):
    chain = [fastq.ops.RandomResizedCrop((20, 24)), fastq.ops.HorizontalFlip()]
    if normalize is not None:
        chain.append(normalize)
    with fastq.Pipeline(fastq.sources.Arrays(photo_arrays(n), np.arange(n)), batch_size=8, queue_size=3,
                        workers=workers, ops=chain, dtype=dtype, layout=layout, seed=11, shuffle=True,
                        pin_memory=False) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a


def as_numpy(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.contiguous().numpy() if t.dtype != torch.float16 else t.contiguous().numpy().view(np.uint16)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("normalize", [fastq.ops.Normalize(), fastq.ops.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)),
                                       fastq.ops.Normalize((123.675, 116.28, 103.53), (58.395, 57.12, 57.375),
                                                           max_pixel_value=1.0), None])
def test_device_conversion_equals_the_hosts_normalize(dtype, normalize):
    """uint8 batches converted by fastq.torch equal batches fastq normalized on the host, bit for
    bit (the reference: fastq's own native Normalize write, an independent code path in C++)."""
    host_u8 = host_batches("NHWC", "uint8")
    extra = {} if normalize is None else {"normalize": normalize}
    for layout in ("NHWC", "NCHW"):
        want = host_batches(layout, dtype, **extra)
        conv = ftorch.Conversion(normalize, dtype, layout)
        for (u8, lab), (ref, ref_lab) in zip(host_u8, want):
            got = conv(torch.from_numpy(u8))
            assert tuple(got.shape) == ref.shape
            np.testing.assert_array_equal(as_numpy(got), bits(ref))
            np.testing.assert_array_equal(lab, ref_lab)


def test_channels_last_is_nchw_shaped_nhwc_memory():
    u8 = host_batches("NHWC", "uint8")[0][0]
    ref = host_batches("NCHW", "float32", normalize=fastq.ops.Normalize())[0][0]
    got = ftorch.Conversion(True, torch.float32, "channels_last")(torch.from_numpy(u8))
    assert got.shape == ref.shape and got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(got.numpy(), ref)


def test_from_an_nchw_pipeline_and_pure_layout_changes():
    u8_nchw = host_batches("NCHW", "uint8")[0][0]
    u8_nhwc = host_batches("NHWC", "uint8")[0][0]
    ref = host_batches("NCHW", "bfloat16", normalize=fastq.ops.Normalize())[0][0]
    got = ftorch.Conversion(True, "bfloat16", "NCHW", input_layout="NCHW")(torch.from_numpy(u8_nchw))
    np.testing.assert_array_equal(as_numpy(got), bits(ref))
    # uint8 NHWC -> NCHW / channels_last without a dtype change: a transposition only
    np.testing.assert_array_equal(ftorch.Conversion(layout="NCHW")(torch.from_numpy(u8_nhwc)).numpy(), u8_nchw)
    cl = ftorch.Conversion(layout="channels_last")(torch.from_numpy(u8_nhwc))
    assert cl.dtype == torch.uint8 and cl.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(cl.numpy(), u8_nchw)
    assert not ftorch.Conversion().active  # nothing asked: the batch passes through


def test_one_channel_images_use_channel_0s_table():
    rng = np.random.default_rng(0)
    u8 = rng.integers(0, 256, (4, 5, 6, 1), dtype=np.uint8)
    t = fastq.ops.normalize_table(fastq.ops.Normalize())
    got = ftorch.Conversion(True)(torch.from_numpy(u8)).numpy()
    np.testing.assert_array_equal(got, t[0][u8])


@pytest.mark.parametrize("kw, err, match", [
    ({"normalize": True, "dtype": "uint8"}, ValueError, "needs a float dtype"),
    ({"normalize": "imagenet"}, TypeError, "normalize must be"),
    ({"layout": "HWCN"}, ValueError, "layout must be one of"),
    ({"dtype": "int32"}, ValueError, "dtype must be one of"),
])
def test_conversion_arguments_are_checked(kw, err, match):
    with pytest.raises(err, match=match):
        ftorch.Conversion(**kw)


def test_float_images_cannot_be_normalized_twice():
    with pytest.raises(TypeError, match="needs uint8 images"):
        ftorch.Conversion(True)(torch.zeros((1, 4, 4, 3), dtype=torch.float32))


# -- DeviceLoader, with a synchronous CPU stand-in for the device --------------------------

class CpuStandIn:
    """Copies are synchronous clones; events are complete when recorded."""

    class Stream:
        def wait_stream(self, other):
            pass

        def wait_event(self, event):
            pass

    class Event:
        def record(self, stream):
            pass

        def synchronize(self):
            pass

    def new_stream(self):
        return self.Stream()

    def current_stream(self):
        return self.Stream()

    def stream_context(self, stream):
        import contextlib
        return contextlib.nullcontext()

    def new_event(self):
        return self.Event()

    def copy(self, t, non_blocking):
        return t.clone()

    def record_stream(self, t, stream):
        pass



def test_device_loader_epochs_equal_the_host_pipeline():
    want = host_batches("NCHW", "float32", normalize=fastq.ops.Normalize(), workers=1)
    chain = [fastq.ops.RandomResizedCrop((20, 24)), fastq.ops.HorizontalFlip()]
    with fastq.Pipeline(fastq.sources.Arrays(photo_arrays(24), np.arange(24)), batch_size=8, queue_size=2,
                        workers=2, ops=chain, dtype="uint8", seed=11, shuffle=True, pin_memory=False) as p:
        loader = ftorch.DeviceLoader(p, "cpu", normalize=True, layout="NCHW", prefetch=2, _backend=CpuStandIn())
        assert len(loader) == 3
        got = [(x.clone(), y.clone()) for x, y in loader]
        assert wait_until(lambda: p.stats()["slots_leased"] == 0)
        for (x, y), (rx, ry) in zip(got, want):
            np.testing.assert_array_equal(x.numpy(), rx)
            np.testing.assert_array_equal(y.numpy(), ry)
        second = [y.clone() for _, y in loader]       # the next epoch: another permutation
        assert len(second) == 3 and not all(torch.equal(a, b) for a, (_, b) in zip(second, got))
        assert loader.copier.synchronize(timeout=10)
        st = loader.stats()
        assert st["batches"] == 6 and st["copier"]["copies"] == 6 and st["copier"]["pending"] == 0
        assert st["wait_s"] >= 0 and st["pipeline"]["epoch"] == 2
        loader.close()


def test_device_loader_abandoned_epoch_stops_its_thread_and_frees_the_slots():
    imgs = np.zeros((200, 8, 8, 3), np.uint8)
    with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(200)), batch_size=4, queue_size=2, workers=2,
                        dtype="uint8", pin_memory=False) as p:
        loader = ftorch.DeviceLoader(p, "cpu", prefetch=3, _backend=CpuStandIn())
        for k, (x, y) in enumerate(loader):
            if k == 2:
                break
        del x, y
        loader.close()
        assert not [t for t in threading.enumerate() if t.name == "fastq-torch-loader" and t.is_alive()]
        assert wait_until(lambda: p.stats()["slots_leased"] == 0)
        # the pipeline is usable again: a full epoch of 50 batches
        assert sum(1 for _ in ftorch.DeviceLoader(p, "cpu", _backend=CpuStandIn())) == 50


def test_device_loader_raises_the_pipelines_error_naming_the_sample():
    good = cv2_png(np.zeros((8, 8, 3), np.uint8))
    data = [good] * 10 + [b"\xff\xd8 not a jpeg"] + [good] * 5
    with fastq.Pipeline(fastq.sources.Bytes(data, labels=list(range(16))), batch_size=4, queue_size=2, workers=2,
                        ops=[fastq.ops.Resize((8, 8))], dtype="uint8", pin_memory=False) as p:
        loader = ftorch.DeviceLoader(p, "cpu", _backend=CpuStandIn())
        seen = 0
        with pytest.raises(fastq.errors.FastqError, match="sample 10") as ei:
            for _ in loader:
                seen += 1
        assert seen == 2 and getattr(ei.value, "index", None) == 10
        loader.close()


def cv2_png(img):
    import zlib
    import struct
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_device_loader_arguments():
    with numbered_pipe() as p:
        with pytest.raises(ValueError, match="prefetch must be"):
            ftorch.DeviceLoader(p, "cpu", prefetch=0, _backend=CpuStandIn())


def test_device_loader_repeat_streams_epochs_back_to_back():
    imgs = np.stack([np.full((4, 4, 3), i, np.uint8) for i in range(20)])
    with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(20)), batch_size=4, queue_size=2, workers=2,
                        dtype="uint8", pin_memory=False) as p:
        loader = ftorch.DeviceLoader(p, "cpu", _backend=CpuStandIn())
        labels = [y.clone() for _, y in loader.repeat(3)]
        assert len(labels) == 15 and p.epoch == 3
        assert torch.equal(torch.cat(labels), torch.arange(20).repeat(3))
        for k, _ in enumerate(loader.repeat()):  # forever, until the consumer stops
            if k == 12:
                break
        loader.close()
        assert wait_until(lambda: p.stats()["slots_leased"] == 0)
        assert not [t for t in threading.enumerate() if t.name == "fastq-torch-loader" and t.is_alive()]


@pytest.mark.slow  # runs scripts/gpu_check.py's training section (5 s)
def test_gpu_check_training_section_runs_on_the_cpu(tmp_path, monkeypatch):
    """scripts/gpu_check.py's training section cannot run here for real (no GPU); run its
    code path on the CPU, tiny, so that the one GPU run a session may get does not die on
    a typo."""
    pytest.importorskip("torchvision", reason="the training section builds torchvision's ResNets")
    pytest.importorskip("cv2", reason="gpu_check makes its JPEGs with cv2")
    import importlib
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.syspath_prepend(os.path.join(root, "scripts"))  # its JPEG makers are spawned processes
    gc = importlib.import_module("gpu_check")
    paths = gc.make_jpegs(str(tmp_path), n=12)
    res = gc.training_rates(paths, models=("resnet18",), device="cpu", batch=4, steps=2, rounds=1, warmup=1,
                            _backend=CpuStandIn())
    r = res["resnet18"]
    assert r["synthetic"] > 0 and r["fed"] > 0 and r["wait_s"] >= 0
    assert r["scheduling"]["priority"] == "background"
