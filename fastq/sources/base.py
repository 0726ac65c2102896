"""fastq.sources.Source: the base class of every source (the other modules of
this package derive from it), and the Python producer threads that the
Iterable and Stream sources share."""
import os
import threading

from fastq import _core


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
