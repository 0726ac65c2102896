"""fastq.sources.Source: the base class of every source (the other modules of
this package derive from it), and the Python producer threads that the
Iterable and Stream sources share."""
import os
import threading

from fastq._native import _core


class Source:
    """Base class of fastq sources: something that can make a Pipeline backend."""

    def _make_backend(self, config, **options):  # pragma: no cover - abstract
        """A fastq.backend.Backend feeding a Pipeline with ``config``
        (fastq.backend.BackendConfig) and the user's source ``options``."""
        raise TypeError(f"{type(self).__name__} cannot feed a Pipeline")


class PullThreads:
    """Python producer threads that take consecutive items of one iterator under a
    lock, a chunk at a time (so the batch order never depends on timing), and
    write them into the ring's run `run_id`.  A subclass sets its own state, then
    calls _start(); its _loop() runs in each thread.  ``errors`` maps an item to
    the exception its source raised, for the consumer to re-raise."""

    def __init__(self, ring, run_id, iterator, n_threads, name):
        self.ring = ring
        self.run_id = run_id
        self.it = iterator
        self.lock = threading.Lock()
        self.next_item = 0
        self.done = False
        self.errors = {}
        self.threads = [threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True)
                        for i in range(n_threads)]

    def _start(self):
        for t in self.threads:
            t.start()

    def _loop(self):  # pragma: no cover - every subclass defines it
        raise TypeError(f"{type(self).__name__} does not define _loop()")

    def _end_with_failure(self, k, message):
        """Item k failed in the source itself (its iterator raised): the consumer
        gets the error at item k, and the run ends after it."""
        got = self.ring.acquire(self.run_id, k)
        if got is None:
            return
        self.ring.commit(self.run_id, got[0], got[1], _core.CODES["SOURCE"], message, k)
        self.ring.set_end(k + 1, keep_partial=True)

    def stop(self, timeout=5.0):
        """Stop pulling (the caller cancels the ring run) and join.  A thread still
        alive after `timeout` is stuck inside the user's iterator; the run id it
        carries is stale, so it can no longer write into the ring."""
        self.done = True  # read under the lock by the producers; a plain store is atomic
        for t in self.threads:
            t.join(timeout)


def _expand_paths(paths, what):
    """Shard paths from a path, a glob pattern (sorted matches) or a sequence of
    paths; ValueError naming the source `what` when there are none (TFRecord,
    WebDataset)."""
    import glob
    if isinstance(paths, (str, bytes, os.PathLike)):
        p = os.fsdecode(paths)
        paths = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
    paths = [os.fsdecode(p) for p in paths]
    if not paths:
        raise ValueError(f"{what}: no shard paths given (or the pattern matched nothing)")
    return paths


def _check_shuffle_buffer(shuffle_buffer, what, default=None):
    """shuffle_buffer= of a shard source: None (-> default) or an int in [1, 2**24]."""
    sb = default if shuffle_buffer is None else shuffle_buffer
    if sb is not None and (not isinstance(sb, int) or isinstance(sb, bool) or not 1 <= sb <= 1 << 24):
        raise ValueError(f"{what}: shuffle_buffer must be an int in [1, 2**24], got {shuffle_buffer!r}")
    return sb


def stream_order(counts, shuffle_buffer, seed, epoch, shuffle=True):
    """The streaming order over shards holding counts[s] samples (numbered in shard
    order): without shuffle, every sample in shard order; with it, the shards
    permuted and a shuffle buffer of shuffle_buffer samples, both drawn from (seed,
    epoch).  docs/sources.md gives the exact rule (TFRecord(index=False),
    WebDataset(shuffle_buffer=N))."""
    import numpy as np
    from fastq._native import _image
    counts = np.asarray(counts, np.int64)
    base = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if not shuffle:
        return np.arange(base[-1], dtype=np.int64)
    rng = np.random.default_rng([int(seed), int(epoch), 0x54465253])  # "TFRS"
    perm = rng.permutation(len(counts))
    stream = np.concatenate([np.arange(base[s], base[s + 1], dtype=np.int64) for s in perm])
    b = min(shuffle_buffer, len(stream))
    fill = rng.integers(0, b, size=len(stream) - b, dtype=np.int64)
    drain = rng.integers(0, np.arange(b, 0, -1, dtype=np.int64), dtype=np.int64)
    return _image.shuffle_buffer_apply(stream, fill, drain)


def restrict(order, indices, n):
    """order without the samples that are not in indices (a source after shard())."""
    import numpy as np
    if len(indices) == n:
        return order
    mask = np.zeros(n, bool)
    mask[indices] = True
    return order[mask[order]]


def default_order(indices, seed, epoch, shuffle):
    """A native source's default epoch order: its samples, permuted by (seed, epoch)
    with shuffle (fastq.sources.images._ImageBackend.order's rule)."""
    if not shuffle:
        return indices
    from fastq._native import _image
    return indices[_image.permutation(seed, epoch, len(indices))]
