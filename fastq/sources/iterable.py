"""fastq.sources.Iterable: any Python iterable of samples (tuples/lists of
arrays or scalars), including a tensorpack DataFlow.  Python threads pull from
it and copy each sample into its slot row with the GIL released during the copy.
"""
from typing import Any

import numpy as np

from fastq.sources.base import PullThreads, Source
from fastq.backend import Backend

__all__ = ["Iterable"]


class Iterable(Source):
    """Wrap any Python iterable (or tensorpack DataFlow) as a fastq source.

    Each item must be a tuple or list of fields (numpy arrays or scalars); a
    bare array is taken as a one-field sample.  The shape and dtype of every
    field are taken from the first sample; later samples must have the same
    shapes, and dtypes that cast safely ('same_kind') to the first one's.

    Every epoch calls ``iter(obj)`` again; if the object has ``reset_state()``
    (a tensorpack DataFlow) it is called once, before the first epoch.
    The iterator is only ever advanced by one thread at a time.

    Stopping (``close()``, a new epoch, abandoning an epoch) waits for the
    sample the iterator is producing at that moment, at most one sample per
    producer thread (producers re-check between samples).  A sample that takes
    longer than 5 s is abandoned: its thread can no longer write into the ring.
    """

    def __init__(self, obj: Any) -> None:
        if not hasattr(obj, "__iter__"):
            raise TypeError(f"fastq.sources.Iterable needs an iterable, got {type(obj).__name__}")
        self.obj = obj
        self._reset_done = False

    def _open(self):
        if not self._reset_done:
            reset = getattr(self.obj, "reset_state", None)
            if callable(reset):
                reset()
            self._reset_done = True
        return iter(self.obj)

    def _make_backend(self, config, **options):
        if options:
            raise TypeError(f"options {sorted(options)} apply to native image sources (Files, Bytes, Arrays), "
                            f"not to a Python iterable")
        return _PythonBackend(self, config)


class FieldSpec:
    """Shape and dtype of one output field (per sample)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)

    def __repr__(self):
        return f"FieldSpec(shape={self.shape}, dtype={self.dtype})"


def _spec_from_sample(sample):
    fields = [np.asarray(f) for f in (sample if isinstance(sample, (tuple, list)) else (sample,))]
    if not fields:
        raise ValueError("the first sample has no fields")
    specs = []
    for i, f in enumerate(fields):
        if f.dtype.hasobject or f.dtype.fields is not None:
            raise TypeError(f"sample 0, field {i}: dtype {f.dtype} cannot be batched natively "
                            f"(use numeric arrays or scalars)")
        specs.append(FieldSpec(f.shape, f.dtype.newbyteorder("=")))
    return specs


def _convert(sample, specs, index):
    """Contiguous arrays matching `specs`, or a clear ValueError naming the sample."""
    fields = sample if isinstance(sample, (tuple, list)) else (sample,)
    if len(fields) != len(specs):
        raise ValueError(f"sample {index} has {len(fields)} fields but the first sample had {len(specs)}")
    out = []
    for i, (f, spec) in enumerate(zip(fields, specs)):
        a = f if type(f) is np.ndarray else np.asarray(f)
        if a.dtype != spec.dtype or a.shape != spec.shape or not a.flags.c_contiguous:
            if a.shape != spec.shape:
                raise ValueError(f"sample {index}, field {i}: shape {a.shape} does not match the first "
                                 f"sample's shape {spec.shape}")
            if a.dtype != spec.dtype and not np.can_cast(a.dtype, spec.dtype, "same_kind"):
                raise ValueError(f"sample {index}, field {i}: dtype {a.dtype} cannot be stored as the "
                                 f"first sample's dtype {spec.dtype}")
            try:
                a = np.ascontiguousarray(a, dtype=spec.dtype)
            except (ValueError, TypeError, OverflowError, UnicodeError) as e:
                raise ValueError(f"sample {index}, field {i}: cannot store {a.dtype} values as the first "
                                 f"sample's dtype {spec.dtype}: {e}") from e
        out.append(a)
    return out


class _PythonBackend(Backend):
    """Feeds a ring from a Python iterable with `workers` Python threads."""

    def __init__(self, source, config):
        self.source = source
        self.workers = config.workers or 2
        self.specs = None
        self._pending = None  # (iterator, first_sample) opened by spec discovery

    def discover(self):
        """Open the first epoch's iterator and read the first sample to learn
        the output spec.  Returns False if the iterable is empty."""
        if self.specs is not None:
            return True
        it = self.source._open()
        try:
            first = next(it)
        except StopIteration:
            return False
        self.specs = _spec_from_sample(first)
        self._pending = (it, first)
        return True

    def output_spec(self):
        if not self.discover():
            raise ValueError("the iterable source is empty: cannot infer the output shapes")
        return [(s.shape, s.dtype) for s in self.specs]

    def start(self, ring, run_id, epoch, position=0):
        if position:
            raise TypeError("a Python iterable source cannot resume at a position")
        if self._pending is not None:
            it, first = self._pending
            self._pending = None
        else:
            it, first = self.source._open(), _NOTHING
        return _PyProducers(ring, run_id, it, first, self.specs, self.workers)

    def sample_error(self, failure, producers):
        """The exception to raise for a failed sample: the user's own exception
        (``failure.index`` is the item's position in the iteration)."""
        exc = producers.errors.pop(failure.index, None) if producers is not None else None
        return failure if exc is None else exc


_NOTHING = object()


class _PyProducers(PullThreads):
    def __init__(self, ring, run_id, iterator, first, specs, n_threads):
        super().__init__(ring, run_id, iterator, n_threads, "fastq-source")
        self.first = first
        self.specs = specs
        self._start()

    # Samples claimed per lock acquisition: fewer lock round trips, and the
    # claimed items stay consecutive so batch order never depends on timing.
    CHUNK = 8

    def _loop(self):
        ring, run_id = self.ring, self.run_id
        while True:
            failure = None
            claimed = []
            with self.lock:
                if self.done:
                    return
                k = self.next_item
                for _ in range(self.CHUNK):
                    if self.done:  # stop() while we pulled: at most one sample's wait
                        break
                    try:
                        if self.first is not _NOTHING:
                            sample, self.first = self.first, _NOTHING
                        else:
                            sample = next(self.it)
                        claimed.append(_convert(sample, self.specs, k))
                    except StopIteration:
                        self.done = True
                        ring.set_end(k)
                        break
                    except BaseException as e:  # noqa: B902 - forwarded to the consumer
                        self.done = True
                        self.errors[k] = e
                        failure = e
                        break
                    k += 1
                first_item = self.next_item
                self.next_item = k + (1 if failure is not None else 0)
            if claimed and not ring.put_many(run_id, first_item, claimed):
                return
            if failure is not None:
                self._end_with_failure(k, f"sample {k}: {type(failure).__name__}: {failure}")
                return
            if self.done and not claimed:
                return
