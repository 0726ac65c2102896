"""Native image sources: files, encoded buffers and decoded arrays.

Samples are read, decoded and augmented by native worker threads that never
take the GIL; each result is written straight into its row of a batch slot.
"""
import os

import numpy as np

from fastq import _core
from fastq._source_base import Source

__all__ = ["ImageSource", "Files", "Bytes", "Arrays"]


def _labels_array(labels, n):
    if labels is None:
        return None
    arr = np.asarray(labels)
    if arr.dtype.kind in "iub" and arr.ndim == 1:
        arr = arr.astype(np.int64)
    if arr.ndim == 0 or arr.shape[0] != n:
        raise ValueError(f"labels must have a leading dimension equal to the number of samples ({n}), "
                         f"got shape {arr.shape}")
    if arr.dtype.hasobject or arr.dtype.fields is not None or arr.dtype.kind not in "iufb":
        raise TypeError(f"labels must be numeric, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))


class ImageSource(Source):
    """Base of the native sources.  ``indices`` are the dataset sample indices
    this source covers (all of them unless :meth:`shard` was used); a
    sample's random augmentation depends on its dataset index, never on
    which shard or worker produced it."""

    kind = None

    def __init__(self, items, labels, indices=None):
        self._items = items
        self.labels = _labels_array(labels, len(items))
        self.indices = np.arange(len(items), dtype=np.int64) if indices is None else indices

    def __len__(self):
        return len(self.indices)

    @property
    def num_samples(self):
        """Samples in the whole dataset (before sharding)."""
        return len(self._items)

    def shard(self, num_shards, index):
        """The subset of samples i with i % num_shards == index: shards are
        disjoint and together cover the source."""
        if not (isinstance(num_shards, int) and num_shards >= 1):
            raise ValueError(f"num_shards must be a positive int, got {num_shards!r}")
        if not (isinstance(index, int) and 0 <= index < num_shards):
            raise ValueError(f"shard index must be in [0, {num_shards}), got {index!r}")
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.indices = self.indices[index::num_shards].copy()
        if len(new.indices) == 0:
            raise ValueError(f"shard {index} of {num_shards} is empty: the source has only {len(self)} samples")
        return new

    def _task_items(self):
        return self._items

    def _raw(self, index):
        """Sample `index` as the Python side sees it (for error messages)."""
        return self._items[index]

    def _make_backend(self, pipeline, **options):
        return _ImageBackend(self, pipeline, **options)


class Files(ImageSource):
    """Image files (JPEG, PNG, BMP, TIFF, WebP, ... as OpenCV 4.6 decodes them).

    ``labels``: None, a sequence of ints, or an array whose leading dimension
    is the number of files (delivered as the second output).  ``io_threads`` > 0:
    that many threads read files up to ``read_ahead`` samples ahead of the
    decoding workers (slow storage; see docs/sources.md).
    """

    kind = "files"

    def __init__(self, paths, labels=None, io_threads=0, read_ahead=64):
        paths = [os.fsencode(p) for p in paths]
        if not paths:
            raise ValueError("Files: no paths given")
        super().__init__(paths, labels)
        from fastq.dataset_sources import _init_file_read_ahead  # io_threads: docs/sources.md
        _init_file_read_ahead(self, io_threads, read_ahead)

    def _task_items(self):
        from fastq.dataset_sources import _file_task_items
        return _file_task_items(self)

    def path(self, index):
        return os.fsdecode(self._items[index])


class Bytes(ImageSource):
    """Encoded images already in memory (bytes, bytearray, memoryview or uint8
    arrays).  The buffers are referenced, not copied: don't mutate them while
    a pipeline uses them."""

    kind = "bytes"

    def __init__(self, buffers, labels=None):
        bufs = []
        for i, b in enumerate(buffers):
            try:
                m = memoryview(b)
            except TypeError:
                raise TypeError(f"Bytes: buffer {i} is a {type(b).__name__}, not a bytes-like object") from None
            if not m.c_contiguous:
                raise ValueError(f"Bytes: buffer {i} is not contiguous")
            bufs.append(m.cast("B") if m.ndim != 1 or m.format != "B" else m)
        if not bufs:
            raise ValueError("Bytes: no buffers given")
        super().__init__(bufs, labels)


class Arrays(ImageSource):
    """Decoded uint8 images: an (N, H, W, C) array, or a list of (H, W, C) /
    (H, W) arrays of different sizes.  C = 1 (gray), 3 (RGB) or 4 (RGBA, alpha
    dropped).  The arrays are referenced, not copied."""

    kind = "arrays"

    def __init__(self, images, labels=None):
        items = []
        for i, im in enumerate(images):
            a = np.asarray(im)
            if a.dtype != np.uint8:
                raise TypeError(f"Arrays: image {i} has dtype {a.dtype}; decoded images must be uint8")
            if a.ndim == 2:
                a = a[:, :, None]
            if a.ndim != 3 or a.shape[2] not in (1, 3, 4) or a.shape[0] < 1 or a.shape[1] < 1:
                raise ValueError(f"Arrays: image {i} must be HxW or HxWxC with C in (1, 3, 4), got {a.shape}")
            if a.strides[2] != 1 or a.strides[1] != a.shape[2]:
                a = np.ascontiguousarray(a)
            items.append(a)
        if not items:
            raise ValueError("Arrays: no images given")
        super().__init__(items, labels)


class _ImageBackend:
    kind = "native"

    def __init__(self, source, pipeline, *, ops=(), dtype="float32", layout="NHWC", channels=3, seed=0,
                 shuffle=False, on_error="raise", max_pixels=None, dct_scaling=True, return_index=False,
                 max_attempts=16):
        from fastq import _image, ops as ops_mod
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        kw = {} if max_pixels is None else {"max_pixels": max_pixels}
        self.compiled = ops_mod.compile_ops(list(ops), dtype=dtype, layout=layout, channels=channels,
                                            dct_scaling=dct_scaling, **kw)
        self.spec = _image.ImageSpec(self.compiled)
        self.source = source
        self.batch_size = pipeline.batch_size
        self.drop_remainder = pipeline.drop_remainder
        self.workers = pipeline.workers or _default_workers()
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.return_index = bool(return_index)
        self.task = _image.ImageTask(self.spec, source.kind, source._task_items(), source.labels,
                                     workers=self.workers, on_error=on_error, max_attempts=max_attempts,
                                     with_index=self.return_index)
        self._resume = None  # (epoch, position) set by load_state_dict
        _image.set_opencv_threads(1)  # our workers are the parallelism

    def output_spec(self):
        np_dtype = np.dtype(self.compiled.dtype)
        out = [(tuple(self.spec.out_shape), np_dtype)]
        if self.source.labels is not None:
            out.append((self.source.labels.shape[1:], self.source.labels.dtype))
        out += getattr(self.source, "_extra_outputs", [])  # outputs a native reader writes (TFRecord labels...)
        if self.return_index:
            out.append(((), np.dtype(np.int64)))
        return out

    def order(self, epoch):
        idx = self.source.indices
        if self.shuffle:
            from fastq import _image
            return idx[_image.permutation(self.seed, epoch, len(idx))]
        return idx

    def batches_per_epoch(self):
        n = len(self.source)
        return n // self.batch_size if self.drop_remainder else -(-n // self.batch_size)

    def start(self, ring, run_id, epoch, position=0):
        order = self.order(epoch)[position * self.batch_size:]
        self.task.set_epoch(order, self.seed, epoch)
        ring.set_end(len(order))
        return _NativeProducers(ring, _core.NativeRun(ring, _core.ExternalTask(self.task), self.workers, len(order)))

    def translate(self, failure, producers):
        idx = None
        msg = failure.message
        exc = _core.make_error(failure.code, msg)
        # the C message starts with "sample N" (the dataset index)
        if msg.startswith("sample "):
            try:
                idx = int(msg[7:].split(",")[0].split(":")[0])
            except ValueError:
                idx = None
        exc.index = idx
        if idx is not None and hasattr(self.source, "path"):  # Files: the file; TFRecord/WebDataset: the shard
            exc.path = self.source.path(idx)
        return exc

    def explain(self, epoch, index):
        if not 0 <= index < self.source.num_samples:
            raise IndexError(f"sample index {index} out of range [0, {self.source.num_samples})")
        _, ex = self.task.sample(index, self.seed, epoch)
        ex["sample_index"] = index
        ex["epoch"] = epoch
        ex["seed"] = self.seed
        return ex

    def sample(self, epoch, index):
        return self.task.sample(index, self.seed, epoch)[0]

    def stats(self):
        return self.task.stats()


class _NativeProducers:
    def __init__(self, ring, run):
        self.ring = ring
        self.run = run

    def stop(self, timeout=None):
        # the caller cancelled the ring's run (or it finished): join the workers
        self.run.join()

    def stats(self):
        return self.run.stats()


def _default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1

