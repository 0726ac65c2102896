"""fastq.tf.dataset's ``from_generator`` feed (the fallback when the native op cannot be
built), and what frees its slots: TensorFlow frees a tensor from C++ threads without the
GIL and queues the numpy reference it held; :func:`flush_released` drains that queue, a
helper thread drains it while a feeder waits (fastq/tf/__init__.py, "When a slot goes back
to the ring")."""
import os
import threading
import time
import weakref

import numpy as np

from fastq.errors import PipelineClosedError
from fastq.tf._native import _CLAIMS


def _tf():
    import tensorflow as tf
    return tf


# -- TensorFlow's delayed numpy decref queue ----------------------------------

_ONE = np.zeros((1,), np.int8)


def flush_released() -> None:
    """Drain TensorFlow's queue of numpy arrays whose tensors were freed
    without the GIL, so that their slots return to the ring now.

    TensorFlow drains that queue when an EagerTensor is deallocated; this
    creates and drops one (in eager mode, whatever the calling thread's mode).
    """
    from tensorflow.python.eager import context
    if context.executing_eagerly():
        _tf().constant(_ONE)  # a non-scalar: scalars come from a cache and are never freed
    else:
        with context.eager_mode():
            _tf().constant(_ONE)


class _Drainer:
    """One daemon thread that calls flush_released() every `interval` seconds
    while at least one feeder is waiting for a batch."""

    def __init__(self, interval=0.02):
        self.interval = interval
        self._reset()

    def _reset(self):
        self._pid = os.getpid()
        self._cv = threading.Condition()
        self._waiting = 0
        self._thread = None

    def __enter__(self):
        if self._pid != os.getpid():  # a forked child has no helper thread
            self._reset()
        with self._cv:
            self._waiting += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fastq-tf-drain", daemon=True)
                self._thread.start()
            elif self._waiting == 1:
                self._cv.notify()

    def __exit__(self, *exc):
        with self._cv:
            self._waiting -= 1
        return False

    def _run(self):
        while True:
            with self._cv:
                while self._waiting == 0:
                    self._cv.wait()
            time.sleep(self.interval)
            if self._waiting:
                try:
                    flush_released()
                except Exception:  # noqa: BLE001 - interpreter shutdown; never kill the thread loudly
                    pass


_DRAINER = _Drainer()


class _Feed:
    """The callable given to from_generator: each call starts one epoch.

    TF keeps this object in a process-wide registry for as long as the
    process lives, so it holds the pipeline only weakly."""

    def __init__(self, pipeline):
        self._pipeline = weakref.ref(pipeline)

    def __call__(self):
        p = self._pipeline()
        if p is None:
            raise PipelineClosedError("the fastq Pipeline of this dataset was closed and garbage-collected")
        return _FeedIterator(p)


class _FeedIterator:
    """One tf.data iteration = one pipeline epoch.

    A class rather than a generator function: a generator suspended at
    ``yield batch`` would keep the batch it just handed over alive in its frame
    (one slot more held than the user holds)."""

    def __init__(self, pipeline):
        self._pipeline = pipeline
        self._token = None
        self._it = None
        self._token = _CLAIMS.claim(pipeline)
        try:
            self._it = iter(pipeline)
        except BaseException:
            self._close()
            raise

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            raise StopIteration
        flush_released()  # slots TF freed since our last call go back first
        try:
            with _DRAINER:
                return next(self._it)
        except StopIteration:
            self._close()
            raise
        except BaseException:
            self._close()
            raise

    def _close(self):
        it, self._it = self._it, None
        if it is not None:
            it.close()  # abandoned mid-epoch: stop the producers
        token, self._token = self._token, None
        if token is not None:
            _CLAIMS.release(self._pipeline, token)
        self._pipeline = None

    def __del__(self):
        # TF drops the iterator when its tf.data iterator is destroyed
        # (finalize_fn of from_generator) or exhausted.
        try:
            self._close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, closed pipeline
            pass
