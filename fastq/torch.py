"""Host-to-GPU copies of fastq batches with PyTorch that never race the ring.

A fastq batch is a tuple of numpy arrays viewing one slot of the ring; the slot goes
back to the producers when the last reference to it dies.  ``tensor.to("cuda",
non_blocking=True)`` only *starts* a DMA from that memory.  If the caller then drops its
CPU tensor (or the batch) before the DMA has finished, the producers may write the next
batch into the slot while the GPU is still reading it: a silently corrupt batch.

:func:`to_device` closes that gap.  It issues the copies on a CUDA stream of its own,
records a ``torch.cuda.Event`` after them, and holds the batch - hence the slot lease -
until that event has completed; a background thread waits on the events in order and
drops each batch the moment its copy is done.  The caller may drop its batch at once.
The GPU tensors are ordered after the copy on the caller's current stream (it waits on
the event), so any work queued there sees the whole batch.

    import fastq, fastq.torch

    for images, labels in pipe:
        x, y = fastq.torch.to_device((images, labels), "cuda")
        loss = step(x, y)

With ``pin_memory="auto"`` (the Pipeline's default) the slot arena is page-locked, so the
copy is a real asynchronous DMA; from pageable memory CUDA copies through a staging
buffer, which is correct but slower.

This module is ``fastq.torch``; its ``import torch`` is an absolute import and gets
PyTorch.  It is imported only when used (``import fastq`` does not import it).
"""
import collections
import threading
from typing import Any, Deque, Dict, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ["to_device", "DeviceCopier"]


def _host_tensor(a: np.ndarray) -> "torch.Tensor":
    """A torch CPU tensor sharing ``a``'s memory; it holds a reference to ``a``."""
    if a.dtype.name == "bfloat16":  # ml_dtypes.bfloat16: numpy's DLPack refuses it
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


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
        return torch.cuda.Event()

    def copy(self, t: "torch.Tensor", non_blocking: bool) -> "torch.Tensor":
        return t.to(self.device, non_blocking=non_blocking)


class DeviceCopier:
    """Copies batches to one device on its own stream and keeps each batch (its slot
    lease) alive until the copy's event has completed.

    ``copier(batch)`` returns a tuple of device tensors, one per array of the batch.
    ``pending()`` counts batches still held; ``synchronize()`` waits until none is;
    ``close()`` does that and stops the waiter thread.  Thread-safe.
    """

    def __init__(self, device: Any = "cuda", *, _backend: Optional[Any] = None):
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
        self._backend = _backend if _backend is not None else _CudaBackend(self.device)
        self._stream = self._backend.new_stream()
        self._cv = threading.Condition()
        self._pending: Deque[Tuple[Any, Tuple[Any, ...]]] = collections.deque()
        self._closed = False
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._wait_loop, name="fastq-torch-copy-waiter", daemon=True)
        self._thread.start()

    def __call__(self, batch: Sequence[np.ndarray], non_blocking: bool = True) -> Tuple["torch.Tensor", ...]:
        if self._closed:
            raise RuntimeError("DeviceCopier is closed")
        if self._error is not None:
            raise RuntimeError(f"the copy waiter failed: {self._error!r}") from self._error
        arrays = tuple(batch)
        hosts = tuple(_host_tensor(np.asarray(a)) for a in arrays)
        caller = self._backend.current_stream()
        # The copy must not start before work the caller queued earlier on its stream
        # (e.g. a kernel still reading the destination's previous owner).
        self._stream.wait_stream(caller)
        with self._backend.stream_context(self._stream):
            outs = tuple(self._backend.copy(h, non_blocking) for h in hosts)
            event = self._backend.new_event()
            event.record(self._stream)
        caller.wait_event(event)          # the caller's later work sees the whole batch
        for o in outs:                    # allocated on our stream, used on the caller's
            o.record_stream(caller)
        with self._cv:
            # Hold the arrays (their base is the slot lease) and the CPU tensors.
            self._pending.append((event, (arrays, hosts)))
            self._cv.notify()
        return outs

    def _wait_loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if not self._pending:
                    return
                event = self._pending[0][0]  # not the batch: no local may keep it alive
            try:
                event.synchronize()      # torch releases the GIL while it waits
            except BaseException as e:   # pragma: no cover - a CUDA error; keep the batch held
                self._error = e
                return
            with self._cv:
                self._pending.popleft()  # drops the batch: the slot can go back to the ring
                self._cv.notify_all()

    def pending(self) -> int:
        """Batches whose copy has not been seen to complete yet (their slots stay leased)."""
        with self._cv:
            return len(self._pending)

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


def to_device(batch: Sequence[np.ndarray], device: Any = "cuda", non_blocking: bool = True) -> Tuple["torch.Tensor", ...]:
    """Copy a fastq batch (a tuple of numpy arrays viewing a slot) to a CUDA device.

    Returns one tensor per array.  The copy runs on a stream of fastq's and the batch -
    hence its ring slot - stays leased until a CUDA event recorded after the copy has
    completed, however soon the caller drops its own references; the returned tensors
    are ordered after the copy on the caller's current stream.  One DeviceCopier (and
    one stream) per device is made on first use.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        if not torch.cuda.is_available():
            raise RuntimeError("fastq.torch.to_device: torch.cuda.is_available() is False (no GPU or no CUDA build of torch)")
        dev = torch.device("cuda", torch.cuda.current_device())
    key = str(dev)
    with _copiers_lock:
        c = _copiers.get(key)
        if c is None:
            c = _copiers[key] = DeviceCopier(dev)
    return c(batch, non_blocking=non_blocking)
