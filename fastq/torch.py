"""fastq batches on a PyTorch device, copied while the model computes.

A fastq batch is a tuple of numpy arrays viewing one slot of the ring; the slot goes
back to the producers when the last reference to it dies.  ``tensor.to("cuda",
non_blocking=True)`` only *starts* a DMA from that memory: if the caller then drops its
CPU tensor before the DMA has finished, the producers may write the next batch into the
slot while the GPU still reads it (a silently corrupt batch).  This module does the copy
so that this cannot happen, and so that the copy never makes the model wait:

* **Copies on a stream of fastq's, overlapping compute.**  The copy stream does not wait
  for anything the training loop queued: the H2D copy of batch N+1 runs while step N
  computes.  The destination tensors are allocated on the copy stream from PyTorch's
  caching allocator and marked (``record_stream``) as used by the consumer's stream, so the
  allocator hands their memory to a later copy only once the consumer's work that used
  them has finished: device buffers are reused safely without the copy ever waiting on
  compute.  The consumer's stream waits on one event per batch: its own batch's.
* **Slots go back as soon as their copy is done.**  A background thread waits (sleeping,
  not spinning: blocking-sync events) on the copies' events in order and drops each host
  batch the moment its copy has completed, however far the host runs ahead of the GPU.
  So queued copies hold slots for a copy's time (about a millisecond), not for a step.
* **uint8 on the wire, conversion on the device.**  ``normalize=``, ``dtype=`` and
  ``layout=`` convert the images after the copy, on the copy stream: a uint8 batch
  is a quarter of the bytes of float32 over host memory and PCIe.  The conversion is a
  gather from fastq's own Normalize table (:func:`fastq.ops.normalize_table`), so it
  equals what ``ops.Normalize`` writes on the host, bit for bit, in float32, float16 and
  bfloat16, NHWC, NCHW or channels_last.

Two ways in::

    import fastq, fastq.torch

    pipe = fastq.Pipeline(source, batch_size=64, ops=[ops.RandomResizedCrop(224), ops.HorizontalFlip()],
                          dtype="uint8")
    loader = fastq.torch.DeviceLoader(pipe, "cuda", normalize=True, dtype=torch.bfloat16,
                                      layout="channels_last")
    for epoch in range(10):
        for x, y in loader:          # device tensors, copied ahead on fastq's stream
            loss = step(x, y)

    # or, batch by batch from your own loop:
    for images, labels in pipe:
        x, y = fastq.torch.to_device((images, labels), "cuda", normalize=True)

:class:`DeviceLoader` issues the copies from a thread of its own, ``prefetch`` batches
ahead, so ``next()`` costs the training thread only an event wait; :func:`to_device` issues
them from the caller.  With ``pin_memory="auto"`` (the Pipeline's default) the slot arena
is page-locked where CUDA is present, so the copy is a real asynchronous DMA.

This module is ``fastq.torch``; its ``import torch`` is an absolute import and gets
PyTorch.  It is imported only when used (``import fastq`` does not import it).
"""
import collections
import queue
import threading
import time
from typing import Any, Deque, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch

from fastq.device.convert import ConversionSpec

__all__ = ["to_device", "DeviceCopier", "DeviceLoader", "Conversion", "convert", "translate", "DataLoader"]

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "uint8": torch.uint8}


def _host_tensor(a: np.ndarray) -> "torch.Tensor":
    """A torch CPU tensor sharing ``a``'s memory; it holds a reference to ``a``."""
    if a.dtype.name == "bfloat16":  # ml_dtypes.bfloat16: numpy's DLPack refuses it
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class Conversion(ConversionSpec):
    """What happens to the images (the batch's first array) on the device: see
    :class:`fastq.device.convert.ConversionSpec` for normalize, dtype (a torch dtype or a name),
    layout and input_layout.  Calling it converts a batch (:func:`convert`)."""

    def __init__(self, normalize: Any = None, dtype: Any = None, layout: Optional[str] = None,
                 input_layout: str = "NHWC") -> None:
        if isinstance(dtype, torch.dtype):
            names = {v: k for k, v in _DTYPES.items()}
            if dtype not in names:
                raise ValueError(f"fastq.torch: dtype must be one of {sorted(_DTYPES)}, got {dtype}")
            dtype = names[dtype]
        super().__init__(normalize, dtype, layout, input_layout, where="fastq.torch")
        self.torch_dtype = _DTYPES[self.dtype] if self.dtype is not None else None
        self._tables: Dict[Tuple[Any, Any], "torch.Tensor"] = {}

    def device_table(self, device: Any) -> "torch.Tensor":
        """The flat (3 * 256) lookup table in the output dtype, on `device` (cached)."""
        key = (str(device), self.torch_dtype)
        t = self._tables.get(key)
        if t is None:
            host = torch.from_numpy(self.table().reshape(-1))
            t = self._tables[key] = host.to(self.torch_dtype).to(device)  # to 16 bit: round to nearest even
        return t

    def __call__(self, x: "torch.Tensor") -> "torch.Tensor":
        return convert(x, self)


def convert(x: "torch.Tensor", conv: Conversion) -> "torch.Tensor":
    """Apply `conv` to a batch of images `x` (on any device: the kernels run where `x` is,
    on the current stream).  Two kernels for a float output: an int64 index per element
    (value + 256 * channel), written contiguously in the output layout, and a gather."""
    if not conv.active:
        return x
    perm, c, axis = conv.plan(tuple(x.shape))
    base = x.permute(*perm)  # a view
    if not conv.casts:  # a pure layout change
        out = base.contiguous()
    else:
        if x.dtype != torch.uint8:
            raise TypeError(f"fastq.torch: normalize/dtype on the device needs uint8 images, got {x.dtype}: build "
                            f"the Pipeline with dtype='uint8' and without ops.Normalize (the device does that)")
        shape = [1, 1, 1, 1]
        shape[axis] = c
        offs = torch.arange(0, 256 * c, 256, dtype=torch.int64, device=x.device).view(shape)
        idx = torch.empty(base.shape, dtype=torch.int64, device=x.device)
        torch.add(base, offs, out=idx)  # value + 256 * channel
        out = conv.device_table(x.device).take(idx)
    return out.permute(0, 3, 1, 2) if conv.layout == "channels_last" else out


class _CudaBackend:
    """The CUDA operations DeviceCopier needs (tests substitute a fake)."""

    def __init__(self, device: "torch.device"):
        if device.type != "cuda":
            raise ValueError(f"fastq.torch copies to a CUDA device, not {device!s}; on the CPU use "
                             "torch.from_dlpack(array), which shares the slot memory without a copy")
        if not torch.cuda.is_available():
            raise RuntimeError("fastq.torch.to_device: torch.cuda.is_available() is False (no GPU or no CUDA build of torch)")
        self.device = device

    def new_stream(self) -> Any:
        return torch.cuda.Stream(self.device)

    def current_stream(self) -> Any:
        return torch.cuda.current_stream(self.device)

    def stream_context(self, stream: Any) -> Any:
        return torch.cuda.stream(stream)

    def new_event(self) -> Any:
        # blocking: a thread that synchronizes on it sleeps instead of spinning a core
        return torch.cuda.Event(blocking=True)

    def copy(self, t: "torch.Tensor", non_blocking: bool) -> "torch.Tensor":
        return t.to(self.device, non_blocking=non_blocking)

    def record_stream(self, t: "torch.Tensor", stream: Any) -> None:
        t.record_stream(stream)


class _Issued:
    """A batch whose copies are queued: the device tensors and the event after them."""

    __slots__ = ("outs", "event")

    def __init__(self, outs: Tuple[Any, ...], event: Any):
        self.outs, self.event = outs, event


class DeviceCopier:
    """Copies batches to one device on its own stream and keeps each batch (its slot
    lease) alive until the copy's event has completed.

    ``copier(batch)`` returns a tuple of device tensors, one per array of the batch,
    ordered after the copy on the caller's current stream.  ``pending()`` counts batches
    still held; ``synchronize()`` waits until none is; ``close()`` does that and stops the
    waiter thread.  ``stats()``: copies issued, batches held now, and how long host
    batches were held (copy latency as the waiter saw it).  Thread-safe.
    """

    def __init__(self, device: Any = "cuda", *, _backend: Optional[Any] = None):
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
        self._backend = _backend if _backend is not None else _CudaBackend(self.device)
        self._stream = self._backend.new_stream()
        self._cv = threading.Condition()
        self._pending: Deque[Tuple[Any, Any, float]] = collections.deque()
        self._closed = False
        self._error: Optional[BaseException] = None
        self._issued = 0
        self._held_s = 0.0
        self._thread = threading.Thread(target=self._wait_loop, name="fastq-torch-copy-waiter", daemon=True)
        self._thread.start()

    @property
    def stream(self) -> Any:
        """The stream the copies (and device-side conversions) run on."""
        return self._stream

    def issue(self, batch: Sequence[np.ndarray], non_blocking: bool = True,
              conversion: Optional[Conversion] = None) -> _Issued:
        """Queue the copies of `batch` (and `conversion` of its first array) on the copy
        stream and hold the batch until they are done.  Nothing is ordered on any other
        stream: hand the result to a consumer stream with :meth:`hand_over`."""
        if self._closed:
            raise RuntimeError("DeviceCopier is closed")
        if self._error is not None:
            raise RuntimeError(f"the copy waiter failed: {self._error!r}") from self._error
        arrays = tuple(batch)
        hosts = tuple(_host_tensor(np.asarray(a)) for a in arrays)
        # No wait on the consumer's stream: the copy overlaps its compute.  The outputs
        # are allocated on the copy stream; hand_over's record_stream keeps PyTorch's
        # allocator from reusing their memory before the consumer's work is done.
        with self._backend.stream_context(self._stream):
            outs = [self._backend.copy(h, non_blocking) for h in hosts]
            if conversion is not None and conversion.active and outs:
                outs[0] = conversion(outs[0])
            event = self._backend.new_event()
            event.record(self._stream)
        with self._cv:
            # Hold the arrays (their base is the slot lease) and the CPU tensors.
            self._pending.append((event, (arrays, hosts), time.monotonic()))
            self._issued += 1
            self._cv.notify()
        return _Issued(tuple(outs), event)

    def hand_over(self, issued: _Issued, stream: Any = None) -> Tuple["torch.Tensor", ...]:
        """Order `issued`'s tensors after their copy on `stream` (default: the caller's
        current stream) and return them."""
        stream = stream if stream is not None else self._backend.current_stream()
        stream.wait_event(issued.event)  # this stream's later work sees the whole batch
        for o in issued.outs:            # allocated on the copy stream, used on this one
            self._backend.record_stream(o, stream)
        return issued.outs

    def __call__(self, batch: Sequence[np.ndarray], non_blocking: bool = True, *, normalize: Any = None,
                 dtype: Any = None, layout: Optional[str] = None,
                 input_layout: str = "NHWC") -> Tuple["torch.Tensor", ...]:
        conv = Conversion(normalize, dtype, layout, input_layout) if (normalize is not None or dtype is not None
                                                                      or layout is not None) else None
        return self.hand_over(self.issue(batch, non_blocking, conv))

    def _wait_loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if not self._pending:
                    return
                event = self._pending[0][0]  # not the batch: no local may keep it alive
            try:
                event.synchronize()      # blocking-sync event: sleeps, and torch releases the GIL
            except BaseException as e:   # pragma: no cover - a CUDA error; keep the batch held
                self._error = e
                return
            with self._cv:
                # drops the batch (no local keeps it): the slot can go back to the ring
                self._held_s += time.monotonic() - self._pending.popleft()[2]
                self._cv.notify_all()

    def pending(self) -> int:
        """Batches whose copy has not been seen to complete yet (their slots stay leased)."""
        with self._cv:
            return len(self._pending)

    def stats(self) -> Dict[str, Any]:
        """copies: batches issued; pending: host batches held now; held_ms_mean: how long
        a host batch (its slot) stayed held on average, issue to copy done."""
        with self._cv:
            done = self._issued - len(self._pending)
            return {"copies": self._issued, "pending": len(self._pending),
                    "held_ms_mean": 1e3 * self._held_s / done if done else None}

    def synchronize(self, timeout: Optional[float] = None) -> bool:
        """Wait until every copy issued so far has completed and its batch is released.
        Returns False if `timeout` seconds passed first."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending or self._error is not None, timeout)

    def close(self) -> None:
        """Wait for the outstanding copies, then stop the waiter thread."""
        self.synchronize()
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join()


_copiers: Dict[str, DeviceCopier] = {}
_copiers_lock = threading.Lock()


def _resolve_device(device: Any) -> "torch.device":
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        if not torch.cuda.is_available():
            raise RuntimeError("fastq.torch.to_device: torch.cuda.is_available() is False (no GPU or no CUDA build of torch)")
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _copier_for(dev: "torch.device") -> DeviceCopier:
    key = str(dev)
    with _copiers_lock:
        c = _copiers.get(key)
        if c is None:
            c = _copiers[key] = DeviceCopier(dev)
    return c


def to_device(batch: Sequence[np.ndarray], device: Any = "cuda", non_blocking: bool = True, *,
              normalize: Any = None, dtype: Any = None, layout: Optional[str] = None,
              input_layout: str = "NHWC") -> Tuple["torch.Tensor", ...]:
    """Copy a fastq batch (a tuple of numpy arrays viewing a slot) to a CUDA device.

    Returns one tensor per array.  The copy runs on a stream of fastq's without waiting for
    the caller's queued work, and the batch - hence its ring slot - stays leased until a
    CUDA event recorded after the copy has completed, however soon the caller drops its own
    references; the returned tensors are ordered after the copy on the caller's current
    stream.  ``normalize`` / ``dtype`` / ``layout`` convert the images (the first array) on
    the device after the copy (:class:`Conversion`).  One DeviceCopier (and one stream) per
    device is made on first use.
    """
    return _copier_for(_resolve_device(device))(batch, non_blocking, normalize=normalize, dtype=dtype,
                                                 layout=layout, input_layout=input_layout)


def _pipeline_layout(pipeline: Any) -> str:
    compiled = getattr(getattr(pipeline, "_backend", None), "compiled", None)
    return getattr(compiled, "layout", "NHWC") or "NHWC"


class _End:
    """The loader thread's last message: the epoch ended (error None) or failed."""

    def __init__(self, error: Optional[BaseException]):
        self.error = error


class DeviceLoader:
    """Iterates a Pipeline's epochs as device tensors, copied ``prefetch`` batches ahead.

    Each ``iter()`` runs one pipeline epoch.  A thread of fastq's takes the host batches,
    queues their copies (and the conversion) on fastq's copy stream and hands them over in
    order; ``next()`` makes the caller's current stream wait on that batch's copy event
    and returns its tensors.  Host slots go back to the ring as soon as each copy is done.
    ``prefetch`` bounds the device batches queued ahead (device memory: ``prefetch`` + the
    ones your step holds).  Errors of the pipeline (a bad sample, a stall, closing) are
    raised by ``next()``.  ``stats()`` says where the time went: how long ``next()`` waited
    for a batch (the training loop starved), the pipeline's and the copier's counters.

    The arguments of :class:`Conversion` (normalize, dtype, layout) apply to the images.
    """

    def __init__(self, pipeline: Any, device: Any = "cuda", *, prefetch: int = 2, normalize: Any = None,
                 dtype: Any = None, layout: Optional[str] = None, non_blocking: bool = True,
                 _backend: Optional[Any] = None) -> None:
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be an int >= 1, got {prefetch!r}")
        self.pipeline = pipeline
        self.prefetch = prefetch
        self.non_blocking = non_blocking
        self.conversion = Conversion(normalize, dtype, layout, _pipeline_layout(pipeline))
        dev = torch.device(device) if _backend is not None else _resolve_device(device)
        self.copier = DeviceCopier(dev, _backend=_backend) if _backend is not None else _copier_for(dev)
        self._own_copier = _backend is not None
        self._wait_s = 0.0
        self._batches = 0
        self._active: Optional["_LoaderEpoch"] = None

    def __len__(self) -> int:
        return len(self.pipeline)

    def __iter__(self) -> Iterator[Tuple["torch.Tensor", ...]]:
        """One pipeline epoch."""
        return self._start(None)

    def repeat(self, epochs: Optional[int] = None) -> Iterator[Tuple["torch.Tensor", ...]]:
        """`epochs` epochs (forever if None) as one stream: fastq's thread starts the next
        epoch as soon as the last host batch of the current one is copied, while the
        batches copied ahead still feed the model, so an epoch boundary is not a pause."""
        return self._start(epochs if epochs is not None else -1)

    def _start(self, epochs: Optional[int]) -> "_LoaderEpoch":
        if self._active is not None:
            self._active.close()
        self._active = _LoaderEpoch(self, epochs)
        return self._active

    def stats(self) -> Dict[str, Any]:
        """batches delivered, wait_s (time next() blocked: the training loop waited for
        input), copier (see DeviceCopier.stats) and the pipeline's own stats()."""
        return {"batches": self._batches, "wait_s": self._wait_s, "prefetch": self.prefetch,
                "copier": self.copier.stats(), "pipeline": self.pipeline.stats()}

    def close(self) -> None:
        """Stop the running epoch (if any); a copier of its own is closed too."""
        if self._active is not None:
            self._active.close()
            self._active = None
        if self._own_copier:
            self.copier.close()


class _LoaderEpoch:
    def __init__(self, loader: DeviceLoader, epochs: Optional[int]):
        self._loader = loader
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=loader.prefetch)
        self._stop = threading.Event()
        self._done = False
        # started here, in the consumer's thread: the epoch belongs to this iteration
        p = loader.pipeline
        self._host_iter: Any = iter(p) if epochs is None else iter(p.repeat(None if epochs < 0 else epochs))
        self._thread = threading.Thread(target=self._run, name="fastq-torch-loader", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        ld = self._loader
        it = self._host_iter
        try:
            for batch in it:
                issued = ld.copier.issue(batch, ld.non_blocking, ld.conversion)
                del batch  # the copier holds it until the copy is done
                if not self._put(issued):
                    break
            else:
                self._put(_End(None))
                return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer's next()
            self._put(_End(e))
            return
        finally:
            if self._stop.is_set():
                it.close()

    def __iter__(self) -> "_LoaderEpoch":
        return self

    def __next__(self) -> Tuple["torch.Tensor", ...]:
        if self._done:
            raise StopIteration
        t0 = time.perf_counter()
        item = self._queue.get()
        self._loader._wait_s += time.perf_counter() - t0
        if isinstance(item, _End):
            self._done = True
            self._thread.join()
            if item.error is not None:
                raise item.error
            raise StopIteration
        self._loader._batches += 1
        return self._loader.copier.hand_over(item)

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        self._stop.set()
        while True:  # unblock a put, drop the queued device batches
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=max(1.0, float(getattr(self._loader.pipeline, "stall_timeout", 60.0))))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---- torchvision / timm pipelines: translate, DataLoader (docs/migrate.md) -------------------

def translate(transform: Any, strict: bool = False):
    """Translate a torchvision v1/v2 ``Compose`` (or one transform), including the timm
    classes ``timm.data.create_transform`` uses, into a :class:`fastq.translate.Translation`:
    the native ops, the steps left to Python (warned once, or ``TranslationError`` with
    ``strict=True``) and ``.pipeline(source, batch_size, ...)`` giving torch's layout and
    dtype (float32 NCHW after ToTensor, uint8 NCHW after PILToTensor/ToImage, uint8 HWC for
    a PIL output).  Every step and argument is listed in docs/migrate.md."""
    from fastq.translate.timm import translate as _tr  # torchvision's classes and timm's
    return _tr(transform, strict=strict)


def _default_loaders() -> Tuple[Any, ...]:
    from torchvision.datasets import folder
    return (folder.default_loader, folder.pil_loader)


_REFUSED = {
    "collate_fn": "fastq writes each batch into one slot in the layout of torch's default collate; "
                  "apply your collate to the batches it yields instead",
    "batch_sampler": "give batch_size / drop_last (and shuffle or a DistributedSampler) instead",
    "worker_init_fn": "fastq's workers are native threads with no Python state; seed Python-side steps "
                      "through seed= (each sample's Python steps are seeded from (seed, epoch, index))",
}


class _SamplerFiles:
    """Builds a fastq.sources.Files whose epoch order is a torch sampler's (DistributedSampler:
    the rank's indices for the sampler's current epoch, padding included)."""

    @staticmethod
    def make(paths: Sequence[str], labels: Sequence[int], sampler: Any) -> Any:
        from fastq.sources import Files

        class SamplerFiles(Files):
            def _epoch_order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
                order = np.asarray(list(iter(sampler)), dtype=np.int64)
                if len(order) != len(self.indices):
                    raise RuntimeError(f"fastq.torch.DataLoader: the sampler gave {len(order)} indices, "
                                       f"{len(self.indices)} expected (len(sampler) changed)")
                return order

        src = SamplerFiles(list(paths), labels=np.asarray(labels, dtype=np.int64))
        src.indices = np.asarray(list(iter(sampler)), dtype=np.int64)
        return src


def _new_cuda_event() -> Any:
    return torch.cuda.Event(blocking=True)


class _CopyGuard:
    """Keeps each batch a DataLoader yielded (its slot lease) until the work the caller had
    queued on its current CUDA stream when it asked for the next batch has completed: the
    ``x.to("cuda", non_blocking=True)`` of a pinned slot is then finished before producers may
    write the slot again (torch's pinned allocator gives the same guarantee for its own
    buffers).  At most ``limit`` batches are kept; beyond that the oldest event is waited for
    (the ring needs free slots).  Copies queued on another stream are not covered."""

    def __init__(self, limit: int, new_event: Any) -> None:
        self.limit = limit
        self.new_event = new_event
        self.held: Deque[Tuple[Any, Any]] = collections.deque()

    def retire(self, batch: Any) -> None:
        ev = self.new_event()
        ev.record()  # on the current stream, after the caller's copies of this batch
        self.held.append((batch, ev))
        while self.held and self.held[0][1].query():
            self.held.popleft()
        while len(self.held) > self.limit:
            self.held[0][1].synchronize()
            self.held.popleft()

    def drain(self) -> None:
        while self.held:
            self.held[0][1].synchronize()
            self.held.popleft()


class DataLoader:
    """``torch.utils.data.DataLoader`` for torchvision image datasets, run by fastq: the
    dataset's ``transform`` is translated (:func:`translate`) and run by native worker
    threads; what it yields is what torch's DataLoader with the default collate yields for
    the same dataset: ``[images, labels]``, images in the transform's output form (float32
    NCHW after ToTensor + Normalize...), labels int64, same ``len()``.

    The dataset needs ``samples`` (a list of ``(path, target)``), ``transform``,
    ``target_transform`` and ``loader`` (``ImageFolder`` / ``DatasetFolder`` have them).  A
    dataset without ``samples`` or with a loader other than torchvision's default PIL RGB
    loader runs entirely in torch's own DataLoader (a warning; ``strict=True`` raises).

    ``num_workers``: native worker threads (0 -> 1); ``prefetch_factor``: batches queued per
    worker (the ring holds ``prefetch_factor * workers`` slots, at least 2); ``pin_memory``:
    pinned slots where CUDA is there, each yielded batch's slot kept until the copies queued on
    the current stream before the next ``next()`` have completed (so ``x.cuda(non_blocking=True)``
    is safe); ``shuffle``: fastq's per-epoch permutation of ``(seed, epoch)``;
    ``sampler``: ``SequentialSampler``, ``RandomSampler`` (without replacement, all samples) or
    ``DistributedSampler`` (its exact indices per rank and epoch: ``set_epoch`` is honoured,
    padding and ``drop_last`` as torch); ``seed``: fixes every random draw (default: drawn
    from ``generator`` or torch's global generator, as torch draws its base seed).
    ``collate_fn``, ``batch_sampler``, ``worker_init_fn``, ``in_order=False`` and other
    samplers are refused with what to do instead; ``persistent_workers``,
    ``multiprocessing_context`` and ``pin_memory_device`` are accepted and have nothing to do
    (the workers are threads that live with the loader).

    The images tensor of a batch views a ring slot (no copy); the slot is reused once the
    tensor is gone, so keeping more batches than the ring has slots stalls the loader
    (``StalledError``): ``.clone()`` images kept across steps.  Labels are copies.
    """

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0, collate_fn: Any = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0, worker_init_fn: Any = None,
                 multiprocessing_context: Any = None, generator: Any = None, *, prefetch_factor: Optional[int] = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True,
                 seed: Optional[int] = None, strict: bool = False) -> None:
        from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler
        for name, value in (("collate_fn", collate_fn), ("batch_sampler", batch_sampler),
                            ("worker_init_fn", worker_init_fn)):
            if value is not None:
                raise ValueError(f"fastq.torch.DataLoader: {name} is not supported: {_REFUSED[name]}")
        if batch_size is None:
            raise ValueError("fastq.torch.DataLoader: batch_size=None (unbatched samples) is not supported; "
                             "give a batch size")
        if not in_order:
            raise ValueError("fastq.torch.DataLoader: in_order=False is not supported (fastq's batches are "
                             "always in order)")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if prefetch_factor is not None and num_workers == 0:
            raise ValueError("prefetch_factor needs num_workers > 0 (as in torch's DataLoader); leave it None "
                             "with num_workers=0")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self.num_workers = num_workers
        self.sampler = sampler
        self.strict = strict
        self._torch_loader = None
        self.target_transform = getattr(dataset, "target_transform", None)
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self._order_sampler = None
        if sampler is not None:
            if isinstance(sampler, DistributedSampler):
                self._order_sampler = sampler
            elif type(sampler) is SequentialSampler:
                shuffle = False
            elif type(sampler) is RandomSampler and not sampler.replacement and sampler._num_samples is None:
                shuffle = True
            else:
                raise ValueError(f"fastq.torch.DataLoader: sampler {type(sampler).__name__} is not supported "
                                 f"(SequentialSampler, RandomSampler without replacement and DistributedSampler "
                                 f"are); use shuffle=True, or torch.utils.data.DataLoader for this sampler")
        reason = self._python_reason(dataset)
        if reason is not None:
            from fastq.translate._core import TranslationError
            if strict:
                raise TranslationError(f"fastq.torch.DataLoader: {reason}")
            import warnings
            warnings.warn(f"fastq.torch.DataLoader: {reason}; the whole dataset runs in torch's DataLoader "
                          f"(strict=True raises instead)", UserWarning, stacklevel=2)
            from torch.utils.data import DataLoader as _TorchLoader
            self._torch_loader = _TorchLoader(
                dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler, num_workers=num_workers,
                pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                multiprocessing_context=multiprocessing_context, generator=generator,
                prefetch_factor=prefetch_factor, persistent_workers=persistent_workers)
            self.translation = None
            self.pipeline = None
            return
        if seed is None:
            seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item()) & 0x7FFFFFFF
        self.seed = int(seed)
        self.translation = translate(getattr(dataset, "transform", None), strict=strict)
        paths = [str(p) for p, _ in dataset.samples]
        labels = [int(t) for _, t in dataset.samples]
        import fastq.sources as fsrc
        if self._order_sampler is not None:
            source = _SamplerFiles.make(paths, labels, self._order_sampler)
            shuffle = False
        else:
            source = fsrc.Files(paths, labels=np.asarray(labels, dtype=np.int64))
        workers = max(1, int(num_workers))
        queue_size = max(2, (prefetch_factor if prefetch_factor is not None else 2) * workers)
        # pin_memory=True: pinned where a CUDA runtime is there ("auto"; torch warns and goes on without one)
        self.pin_memory = bool(pin_memory)
        kw: Dict[str, Any] = dict(shuffle=shuffle, seed=self.seed, workers=workers, queue_size=queue_size,
                                  drop_remainder=self.drop_last, pin_memory="auto" if pin_memory else False)
        if timeout and timeout > 0:
            kw["stall_timeout"] = float(timeout)
        self.pipeline = self.translation.pipeline(source, self.batch_size, **kw)

    @staticmethod
    def _python_reason(dataset: Any) -> Optional[str]:
        samples = getattr(dataset, "samples", None)
        if not isinstance(samples, (list, tuple)):
            return f"{type(dataset).__name__} has no .samples list of (path, target)"
        loader = getattr(dataset, "loader", None)
        if loader is not None and loader not in _default_loaders():
            return (f"{type(dataset).__name__}.loader is {getattr(loader, '__name__', loader)!r}, not torchvision's "
                    f"default PIL RGB loader")
        return None

    def __len__(self) -> int:
        if self._torch_loader is not None:
            return len(self._torch_loader)
        assert self.pipeline is not None
        return len(self.pipeline)

    def __iter__(self) -> Iterator[Any]:
        if self._torch_loader is not None:
            yield from self._torch_loader
            return
        tt = self.target_transform
        assert self.pipeline is not None
        keeper = None
        if self.pin_memory and torch.cuda.is_available():
            keeper = _CopyGuard(max(0, self.pipeline.queue_size - 2), _new_cuda_event)
        prev = None
        it = iter(self.pipeline)
        try:
            while True:
                if keeper is not None and prev is not None:  # the caller asked for the next batch: its
                    keeper.retire(prev)                          # copies of this one are queued by now
                    prev = None
                try:
                    batch = next(it)
                except StopIteration:
                    break
                images = _host_tensor(batch[0])
                if tt is None:  # a copy (B values): kept labels must not hold the slot
                    labels = torch.from_numpy(np.array(batch[1]))
                else:
                    from torch.utils.data import default_collate
                    labels = default_collate([tt(int(v)) for v in batch[1]])
                if keeper is not None:
                    prev = batch
                del batch
                yield [images, labels]
                del images, labels
        finally:
            if keeper is not None:
                keeper.drain()

    def stats(self) -> Dict[str, Any]:
        """The pipeline's stats() (with ``translation`` when steps run in Python)."""
        return self.pipeline.stats() if self.pipeline is not None else {}

    def close(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
