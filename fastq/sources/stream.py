"""fastq.sources.Stream: encoded images from a Python iterable, decoded natively.

For data that only a Python client can fetch (fsspec / gcsfs / boto3 ...): the
iterable yields ``(encoded_bytes, label)`` (or bare encoded bytes); fastq's
producer threads pull from it one chunk at a time under a lock and decode and
augment each image with the GIL released, straight into the batch.  The
iterable's own I/O threads (if any) overlap with the decoding.
"""
import threading

import numpy as np

from fastq._native import _core
from fastq.sources.base import PullThreads, Source
from fastq.sources.images import _cast_labels, _label_dtype
from fastq.backend import Backend
from fastq.errors import FastqError

__all__ = ["Stream"]

_CHUNK = 8  # items claimed per lock acquisition; chunks are fixed, so results never depend on timing


class Stream(Source):
    """A Python iterable of encoded images (JPEG, PNG, ... bytes-like) with
    optional labels, decoded and augmented natively.

    Items: ``(encoded, label)`` or bare ``encoded``; labels numeric, all of the
    first label's shape.  Every epoch calls ``iter(obj)`` again.  Sample ``k`` of
    an epoch (its position in the iterable) is augmented with ``(seed, epoch,
    k)``: a deterministic iterable gives identical batches for any number of
    workers.  The order is the iterable's (``shuffle`` is not available: shuffle
    or shard in the iterable), and a Stream cannot ``shard``, ``explain`` or resume
    from a ``state_dict``.

    Errors: an image that does not decode raises an error naming its stream
    position when its batch is reached; with ``on_error="skip"`` it is replaced
    by the next item of its chunk of 8 that decodes (counted in ``stats()``).  An
    exception raised by the iterable ends the epoch with that exception.
    """

    def __init__(self, iterable):
        if not hasattr(iterable, "__iter__"):
            raise TypeError(f"Stream needs an iterable, got {type(iterable).__name__}")
        self.obj = iterable

    def _make_backend(self, config, **options):
        return _StreamBackend(self, config, **options)


def _split(item, k):
    if isinstance(item, tuple) and len(item) == 2:
        return item[0], item[1]
    if isinstance(item, (bytes, bytearray, memoryview, np.ndarray)):
        return item, None
    raise TypeError(f"stream item {k}: expected (encoded_bytes, label) or encoded bytes, got {type(item).__name__}")


class _StreamBackend(Backend):
    def __init__(self, source, config, *, ops=(), dtype="float32", layout="NHWC", channels=3, seed=0,
                 shuffle=False, on_error="raise", max_pixels=None, dct_scaling=True, idct="accurate",
                 return_index=False, max_attempts=16, label_dtype=None):
        from fastq._native import _image
        from fastq import ops as ops_mod
        if shuffle:
            raise ValueError("a Stream source is read in the iterable's order: shuffle in the iterable")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        del max_attempts  # the skip policy replaces from the item's chunk
        kw = {} if max_pixels is None else {"max_pixels": max_pixels}
        self.compiled = ops_mod.compile_ops(list(ops), dtype=dtype, layout=layout, channels=channels,
                                            dct_scaling=dct_scaling, idct=idct, **kw)
        self.spec = _image.ImageSpec(self.compiled)
        self.np_dtype = np.dtype(self.compiled.dtype)
        self.source = source
        self.batch_size = config.batch_size
        self.workers = config.workers or 2
        self.seed = int(seed)
        self.skip = on_error == "skip"
        self.return_index = bool(return_index)
        self.label_spec = None  # (shape, dtype) or () when unlabeled
        self.label_dtype = None if label_dtype is None else _label_dtype(label_dtype)
        self._pending = None
        self._stats_lock = threading.Lock()
        self._skipped = {}
        self._last = {}
        _image.set_opencv_threads(1)

    def discover(self):
        if self.label_spec is not None:
            return True
        it = iter(self.source.obj)
        try:
            first = next(it)
        except StopIteration:
            return False
        _, label = _split(first, 0)
        if label is None:
            if self.label_dtype is not None:
                raise ValueError(f"label_dtype={self.label_dtype} but the stream's first item has no label")
            self.label_spec = ()
        else:
            a = np.asarray(label)
            if a.dtype.kind in "iub":
                a = a.astype(np.int64)
            if a.dtype.kind not in "iufb":
                raise TypeError(f"stream item 0: label must be numeric, got dtype {a.dtype}")
            self.label_spec = (a.shape, self.label_dtype or a.dtype.newbyteorder("="))
        self._pending = (it, first)
        return True

    def output_spec(self):
        if not self.discover():
            raise ValueError("the Stream is empty: cannot infer the output shapes")
        out = [(tuple(self.spec.out_shape), self.np_dtype)]
        if self.label_spec:
            out.append(self.label_spec)
        if self.return_index:
            out.append(((), np.dtype(np.int64)))
        return out

    def start(self, ring, run_id, epoch, position=0):
        if position:
            raise TypeError("a Stream source cannot resume at a position")
        if self._pending is not None:
            it, first = self._pending
            self._pending = None
            prefix = [first]
        else:
            it, prefix = iter(self.source.obj), []
        return _StreamProducers(self, ring, run_id, it, prefix, epoch)

    def sample_error(self, failure, producers):
        """The exception to raise for a failed item: the one the stream raised
        (``failure.index`` is the item's position in the stream)."""
        exc = producers.errors.pop(failure.index, None) if producers is not None else None
        return failure if exc is None else exc

    def _count_skip(self, exc):
        with self._stats_lock:
            self._skipped[exc.code] = self._skipped.get(exc.code, 0) + 1
            self._last[exc.code] = str(exc)

    def stats(self):
        with self._stats_lock:
            return {"skipped": sum(self._skipped.values()), "skipped_by_reason": dict(self._skipped),
                    "last_skip_message": dict(self._last)}


class _StreamProducers(PullThreads):
    def __init__(self, backend, ring, run_id, iterator, prefix, epoch):
        super().__init__(ring, run_id, iterator, backend.workers, "fastq-stream")
        self.b = backend
        self.prefix = prefix
        self.epoch = epoch
        self._start()

    def _claim(self):
        """Up to _CHUNK items (under the lock) -> (first item, items, iterator exception)."""
        items, failure = [], None
        with self.lock:
            if self.done:
                return None
            first = self.next_item
            while len(items) < _CHUNK:
                try:
                    items.append(self.prefix.pop(0) if self.prefix else next(self.it))
                except StopIteration:
                    self.done = True
                    self.ring.set_end(first + len(items))
                    break
                except BaseException as e:  # noqa: B902 - forwarded to the consumer
                    self.done = True
                    failure = e
                    break
            self.next_item = first + len(items) + (1 if failure is not None else 0)
        return first, items, failure

    def _sample(self, decoder, k, item):
        data, label = _split(item, k)
        b = self.b
        img = np.empty(b.spec.out_shape, b.np_dtype)
        decoder.decode_into(data, img, b.seed, self.epoch, k)
        row = [img]
        if b.label_spec:
            shape, dtype = b.label_spec
            if label is None:
                raise TypeError(f"stream item {k} has no label but the first item had one")
            lab = np.asarray(label)
            if b.label_dtype is not None:  # the user's dtype: any numeric label whose values fit
                if lab.shape != shape:
                    raise ValueError(f"stream item {k}: label of shape {lab.shape} does not match the first "
                                     f"item's {shape}")
                try:
                    lab = _cast_labels(lab.reshape((1,) + lab.shape), dtype)[0]
                except ValueError as e:
                    raise ValueError(f"stream item {k}: label {label!r} does not fit in label_dtype {dtype}") from e
            elif lab.shape != shape or not np.can_cast(lab.dtype, dtype, "same_kind"):
                raise ValueError(f"stream item {k}: label of shape {lab.shape} / dtype {lab.dtype} does not match "
                                 f"the first item's {shape} / {dtype}")
            row.append(np.ascontiguousarray(lab, dtype=dtype))
        if b.return_index:
            row.append(np.array(k, np.int64))
        return row

    def _loop(self):
        from fastq._native import _image
        decoder = _image.Decoder(self.b.spec)
        ring, run_id = self.ring, self.run_id
        while True:
            got = self._claim()
            if got is None:
                return
            first, items, failure = got
            rows, errs = [], {}
            for j, item in enumerate(items):
                k = first + j
                try:
                    rows.append(self._sample(decoder, k, item))
                except FastqError as e:  # the image: skippable
                    rows.append(None)
                    errs[j] = _core.make_error(_core.CODES.get(str(e.code)[5:], _core.CODES["DECODE"]),
                                               f"stream item {k}: {e}", index=k)
                except Exception as e:  # noqa: BLE001 - a malformed item (type, label): not skippable
                    rows.append(None)
                    e.index = k
                    errs[j] = e
            if errs and self.b.skip:
                good = [j for j in range(len(items)) if rows[j] is not None]
                for j, err_j in list(errs.items()):
                    if not isinstance(err_j, FastqError):
                        continue
                    self.b._count_skip(err_j)
                    if good:  # the next good item of the chunk, cyclically
                        alt = min(good, key=lambda g: (g - j) % len(items))
                        rows[j] = rows[alt]
                        errs[j] = None
            ok = True
            j0 = 0
            while j0 < len(items) and ok:  # runs of good rows go in one put_many
                j1 = j0
                while j1 < len(items) and rows[j1] is not None:
                    j1 += 1
                if j1 > j0:
                    ok = ring.put_many(run_id, first + j0, rows[j0:j1])
                if ok and j1 < len(items):
                    err_j = errs[j1]
                    self.errors[first + j1] = err_j
                    acq = ring.acquire(run_id, first + j1)
                    if acq is None:
                        return
                    code = _core.CODES.get(str(err_j.code)[5:], 0) if isinstance(err_j, FastqError) else 0
                    ring.commit(run_id, acq[0], acq[1], code or _core.CODES["SOURCE"], str(err_j), first + j1)
                    j1 += 1
                j0 = j1
            if not ok:
                return
            if failure is not None:
                k = first + len(items)
                self.errors[k] = failure
                self._end_with_failure(k, f"stream item {k}: {type(failure).__name__}: {failure}")
                return
