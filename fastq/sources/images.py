"""Native image sources: files, encoded buffers and decoded arrays.

Samples are read, decoded and augmented by native worker threads that never
take the GIL; each result is written straight into its row of a batch slot.
"""
import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from fastq._native import _core
from fastq.sources.base import Source, default_order
from fastq.sources.readahead import _file_task_items, _init_file_read_ahead
from fastq.backend import Backend
from fastq.scheduling import usable_cpus

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = ["ImageSource", "Files", "Bytes", "Arrays", "IMAGE_OPTIONS", "image_options_doc"]

# The options a Pipeline over a native image source takes (Pipeline(source, ...,
# name=value)): name, default, description.  This one table is the source of the
# Pipeline docstring, of the typo check for unknown keywords, and of the defaults
# of _ImageBackend (tests/core/test_api.py checks that they agree).
IMAGE_OPTIONS: Tuple[Tuple[str, Any, str], ...] = (
    ("ops", (), "a list of fastq.ops ops (or a single op), run on each image in order "
                "(docs/ops.md).  It must end at a fixed size (a crop or Resize((h, w))), except "
                "for Arrays whose images all have one size, where any chain without a "
                "size-changing op (even an empty one) keeps that size."),
    ("dtype", "float32", "output dtype of the images: 'uint8', 'float32', 'float16' or 'bfloat16' "
                         "(a name, numpy dtype or tf.DType).  Float outputs are x / 255 unless the "
                         "chain ends with Normalize; the conversion is fused into the native write."),
    ("layout", "NHWC", "'NHWC' or 'NCHW' (any case)."),
    ("channels", 3, "3 or 'RGB', 'BGR' (the RGB channels reversed, fused into the native write; "
                    "Normalize's mean/std and RandomErasing's value stay given in RGB order and follow "
                    "their channel, as tensorpack users expect), 1 or 'gray'."),
    ("seed", 0, "non-negative int: with the epoch and the sample's dataset index it fixes every "
                "random choice (augmentation, shuffle order, replacements), whatever the number "
                "of workers."),
    ("shuffle", False, "visit the samples in a new random order each epoch (a function of seed and "
                       "epoch).  Off by default so that evaluate/predict pipelines keep the source "
                       "order, as in torch's DataLoader and tf.data; pass shuffle=True for training."),
    ("on_error", "raise", "'raise': a sample that cannot be read or decoded raises (naming the "
                          "sample and file) where its batch would come; 'skip': it is replaced by "
                          "another sample (deterministically) and counted in stats()."),
    ("max_attempts", 16, "with on_error='skip', how many replacement samples are tried for a bad "
                         "one before the batch fails anyway."),
    ("max_pixels", None, "encoded images declaring more pixels than this fail with "
                         "ImageTooLargeError before decoding (default 2**26)."),
    ("dct_scaling", True, "let the JPEG decoder downscale in the DCT domain when the first op is "
                          "RandomResizedCrop or Resize (faster, approximate; docs/ops.md)."),
    ("idct", "accurate", "the JPEG decoder's inverse DCT at full scale: 'accurate' (libjpeg's ISLOW, "
                         "what PIL and OpenCV decode with) or 'fast' (IFAST, tf.io.decode_jpeg's default "
                         "and so Keras's image_dataset_from_directory's; pixels up to a few levels apart)."),
    ("return_index", False, "add a third output: the dataset index (int64) of each row."),
    ("label_dtype", None, "numpy dtype of the labels output (e.g. 'int32' for models that declare "
                          "int32 labels, for tensorpack, or for JAX without x64); default: int64 "
                          "for integer labels, else the labels' own dtype.  Values that do not "
                          "fit are refused: given labels when the pipeline is built; TFRecord and "
                          "WebDataset labels, converted natively, fail their sample with a "
                          "DecodeError naming the record (on_error applies)."),
    ("pad", None, "None, or 'batch': the chain may end at a variable size bounded by a maximum fastq "
                  "derives from its ops (or max_image_size); each batch is one (B, Hb, Wb, C) array, "
                  "Hb, Wb the batch's largest image rounded up to pad_multiple, images at the top-left, "
                  "the rest pad_fill (masks: their mask_fill); adds the last output image_sizes (B, 2) "
                  "int32, each image's valid (h, w) (fastq.batchpad, docs/targets.md)."),
    ("pad_multiple", 1, "with pad='batch': Hb and Wb (and the capacity) are multiples of this (e.g. 32)."),
    ("pad_fill", 0, "with pad='batch': the padding's pixel value (0..255, one or 3 numbers, as Pad's "
                    "fill: Normalize and the dtype apply to it)."),
    ("max_image_size", None, "with pad='batch': (H, W), the largest chain output, instead of the bound "
                             "derived from the ops (needed when they have none); a larger image fails "
                             "its sample (on_error applies)."),
)


def image_options_markdown() -> str:
    """The IMAGE_OPTIONS table as the markdown table of docs/ops.md ("Pipeline options");
    tests/core/test_api.py checks that the file holds exactly this text."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for name, default, text in IMAGE_OPTIONS:
        rows.append(f"| `{name}` | `{default!r}` | {text} |")
    return "\n".join(rows)


def image_options_doc(indent: str = "        ") -> str:
    """The IMAGE_OPTIONS table as numpydoc parameter entries."""
    import textwrap
    out = []
    for name, default, text in IMAGE_OPTIONS:
        out.append(f"{indent}{name} : default {default!r}")
        out.extend(textwrap.wrap(text, 96 - len(indent), initial_indent=indent + "    ",
                                 subsequent_indent=indent + "    "))
    return "\n".join(out)


def _labels_array(labels, n, label_dtype=None):
    if labels is None:
        return None
    arr = np.asarray(labels)
    if label_dtype is None and arr.dtype.kind in "iub" and arr.ndim == 1:
        arr = arr.astype(np.int64)
    if arr.ndim == 0 or arr.shape[0] != n:
        raise ValueError(f"labels must have a leading dimension equal to the number of samples ({n}), "
                         f"got shape {arr.shape}")
    if arr.dtype.hasobject or arr.dtype.fields is not None or arr.dtype.kind not in "iufb":
        raise TypeError(f"labels must be numeric, got dtype {arr.dtype}")
    if label_dtype is not None:
        arr = _cast_labels(arr, label_dtype)
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))


def _label_dtype(label_dtype):
    """label_dtype (a numpy or TF dtype, or a name) as a numeric numpy dtype."""
    try:
        want = np.dtype(getattr(label_dtype, "as_numpy_dtype", label_dtype))
    except TypeError:
        raise TypeError(f"label_dtype must be a numeric numpy dtype (e.g. 'int32'), got {label_dtype!r}") from None
    if want.hasobject or want.fields is not None or want.kind not in "iufb":
        raise TypeError(f"label_dtype must be a numeric numpy dtype (e.g. 'int32'), got {want}")
    return want


def _cast_labels(arr, label_dtype):
    want = _label_dtype(label_dtype)
    if arr.dtype == want:
        return arr
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(want)
        if want.kind == "f":  # rounding is expected; overflow is not
            wrong = np.isfinite(arr) & ~np.isfinite(out)
        else:                 # integers: exact round trip
            wrong = out.astype(arr.dtype) != arr
    if wrong.any():
        bad = np.flatnonzero(wrong.reshape(len(arr), -1).any(axis=1))
        i = int(bad[0])
        raise ValueError(f"label_dtype={want}: label of sample {i} ({arr[i]!r}) does not fit in {want} "
                         f"({len(bad)} samples do not)")
    return out


def _targets(targets, n):
    """targets= of a native source: None, a fastq.targets.Targets, or one dict per sample."""
    if targets is None:
        return None
    from fastq.targets import Targets
    if not isinstance(targets, Targets):
        targets = Targets.from_dicts(list(targets))
    if targets.n != n:
        raise ValueError(f"targets: {targets.n} samples of targets for {n} images")
    return targets


def _image_mod():
    from fastq._native import _image
    return _image


class ImageSource(Source):
    """Base of the native sources.  ``indices`` are the dataset sample indices
    this source covers (all of them unless :meth:`shard` was used); a
    sample's random augmentation depends on its dataset index, never on
    which shard or worker produced it."""

    kind: Optional[str] = None
    _remote: Any = None  # fastq.sources.fetch.RemoteSet of a source read from object storage

    def __init__(self, items, labels, indices=None, targets=None):
        self._items = items
        self.targets = _targets(targets, len(items))
        self._labels_given = labels
        self.labels = _labels_array(labels, len(items))
        self.indices = np.arange(len(items), dtype=np.int64) if indices is None else indices

    def __len__(self):
        return len(self.indices)

    @property
    def num_samples(self) -> int:
        """Samples in the whole dataset (before sharding)."""
        return len(self._items)

    def shard(self, num_shards: int, index: int) -> "ImageSource":
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

    def _fixed_size(self):
        """(height, width) shared by every image when the source knows it, else None."""
        return None

    def _labels_as(self, label_dtype):
        """The labels array with dtype label_dtype (validated), or the default one."""
        if label_dtype is None or self.labels is None:
            return self.labels
        return _labels_array(self._labels_given, len(self._items), label_dtype)

    def _make_backend(self, config, **options):
        if self._remote is not None:
            return _RemoteBackend(self, config, **options)
        return _ImageBackend(self, config, **options)


class Files(ImageSource):
    """Image files (JPEG, PNG, BMP, TIFF, WebP, ... as OpenCV 4.6 decodes them).

    ``labels``: None, a sequence of ints, or an array whose leading dimension
    is the number of files (delivered as the second output).  ``io_threads`` > 0:
    that many threads read files up to ``read_ahead`` samples ahead of the
    decoding workers (slow storage; see docs/sources.md).

    Object storage: paths may be URLs (``s3://bucket/key.jpg``, ``gs://``,
    ``az://``, ``abfs://``, ``http(s)://``; ``file://`` is a local path), all of
    them remote then.  Each object is fetched whole, up to ``remote.max_in_flight``
    at once ahead of the workers, and decoded from the fetched buffer.
    ``storage_options``: the store's configuration, overriding the environment
    (``AWS_ENDPOINT_URL``...); ``cache_dir`` / ``cache_limit``: keep fetched objects
    on local disk (bytes; None: no limit); ``remote``: a
    :class:`fastq.sources.RemoteOptions`.  See docs/cloud.md.
    """

    kind = "files"

    def __init__(self, paths: Sequence[PathLike], labels: Any = None, io_threads: int = 0,
                 read_ahead: int = 64, targets: Any = None, storage_options: Optional[dict] = None,
                 cache_dir: Optional[PathLike] = None, cache_limit: Optional[int] = None,
                 remote: Any = None, _objects: Any = None) -> None:
        if isinstance(paths, (str, bytes, os.PathLike)):
            raise TypeError(
                f"Files takes a list of file paths, got a single path {os.fsdecode(paths)!r} (a string "
                f"would be read as one path per character). Pass [path] for one file; for a folder, "
                f"list its images, e.g. sorted(glob.glob(os.path.join(folder, '*.jpg'))).")
        from fastq.sources import remote as remote_mod
        paths = [remote_mod.local_path(p) for p in paths]
        n_url = sum(remote_mod.is_url(p) for p in paths)
        if n_url:
            if n_url != len(paths):
                raise ValueError("Files: paths mix URLs and local paths; give one kind (file:// URLs are local)")
            if io_threads:
                raise ValueError("Files: io_threads applies to local files; remote reads are tuned by "
                                 "remote=fastq.sources.RemoteOptions(...) (docs/cloud.md)")
            rs = remote_mod.files_remote(paths, storage_options, cache_dir, cache_limit, remote, objects=_objects)
            super().__init__([os.fsencode(p) for p in paths], labels, targets=targets)
            remote_mod.attach(self, rs)
            return
        if storage_options is not None or cache_dir is not None or remote is not None:
            raise ValueError("Files: storage_options, cache_dir and remote apply to URLs only")
        paths = [os.fsencode(p) for p in paths]
        if not paths:
            raise ValueError("Files: no paths given")
        super().__init__(paths, labels, targets=targets)
        _init_file_read_ahead(self, io_threads, read_ahead)  # io_threads: docs/sources.md

    def _task_items(self):
        if self._remote is not None:
            from fastq.sources import remote as remote_mod
            return remote_mod.task_reader(self, lambda spans: _image_mod().FileReader(list(self._items), spans=spans))
        return _file_task_items(self)

    def path(self, index: int) -> str:
        return os.fsdecode(self._items[index])


class Bytes(ImageSource):
    """Encoded images already in memory (bytes, bytearray, memoryview or uint8
    arrays).  The buffers are referenced, not copied: don't mutate them while
    a pipeline uses them."""

    kind = "bytes"

    def __init__(self, buffers: Sequence[Any], labels: Any = None, targets: Any = None) -> None:
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
        super().__init__(bufs, labels, targets=targets)


class Arrays(ImageSource):
    """Decoded uint8 images: an (N, H, W, C) array, or a list of (H, W, C) /
    (H, W) arrays of different sizes.  C = 1 (gray), 3 (RGB) or 4 (RGBA, alpha
    dropped).  The arrays are referenced, not copied."""

    kind = "arrays"

    def __init__(self, images: Any, labels: Any = None, targets: Any = None) -> None:
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
        super().__init__(items, labels, targets=targets)
        sizes = {a.shape[:2] for a in items}
        self._size = sizes.pop() if len(sizes) == 1 else None

    def _fixed_size(self):
        return self._size


class _ImageBackend(Backend):
    # keep in step with IMAGE_OPTIONS (tests/core/test_api.py checks it)
    def __init__(self, source, config, *, ops=(), dtype="float32", layout="NHWC", channels=3, seed=0,
                 shuffle=False, on_error="raise", max_attempts=16, max_pixels=None, dct_scaling=True,
                 idct="accurate", return_index=False, label_dtype=None, pad=None, pad_multiple=1, pad_fill=0, max_image_size=None):
        from fastq._native import _image
        from fastq import ops as ops_mod
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        if not isinstance(max_attempts, (int, np.integer)) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise ValueError(f"max_attempts must be a positive int, got {max_attempts!r}")
        kw = {} if max_pixels is None else {"max_pixels": max_pixels}
        sizes_op, cap = -1, None
        if pad is not None:  # Pipeline(pad="batch"): a Pad to the capacity ends the chain (fastq/batchpad.py)
            if pad != "batch":
                raise ValueError(f"pad must be None or 'batch', got {pad!r}")
            from fastq import batchpad
            ops, cap, sizes_op = batchpad.pad_chain(ops, input_size=source._fixed_size(), pad_multiple=pad_multiple,
                                                    pad_fill=pad_fill, max_image_size=max_image_size)
        elif (pad_multiple, pad_fill, max_image_size) != (1, 0, None):
            raise ValueError("pad_multiple, pad_fill and max_image_size apply only with pad='batch'")
        self.compiled = ops_mod.compile_ops(ops, dtype=dtype, layout=layout, channels=channels,
                                            dct_scaling=dct_scaling, input_size=source._fixed_size(), idct=idct,
                                            **kw)
        # outputs a native reader writes after the image (TFRecord / WebDataset labels, features)
        self.extra_outputs = list(getattr(source, "_extra_outputs", []))
        # their names: the reader's ("labels", feature keys), then the targets'
        self.extra_names = list(getattr(source, "_extra_names", [])) or \
            [f"output_{k + 1}" for k in range(len(self.extra_outputs))]
        extra_types = None
        if label_dtype is not None and source.labels is None:
            k = getattr(source, "_label_output", None)  # which reader output is the label (int64)
            if k is None:
                raise ValueError(f"label_dtype={label_dtype!r} but the source has no labels")
            want = _label_dtype(label_dtype)
            if want.name not in _image.NUM_TYPES:
                raise ValueError(f"label_dtype={want}: {type(source).__name__} converts its labels natively to one "
                                 f"of {sorted(_image.NUM_TYPES)}")
            extra_types = [0] * len(self.extra_outputs)
            extra_types[k] = _image.NUM_TYPES[want.name]
            self.extra_outputs[k] = (self.extra_outputs[k][0], want)
        targets = getattr(source, "targets", None)  # fastq.targets.Targets: outputs after the reader's
        if (self.compiled.packed_ops["kind"] == ops_mod.RandomIoUCrop.kind).any() and \
                getattr(targets, "max_boxes", 0) < 1:  # its crop is drawn from the sample's boxes
            raise ValueError("RandomIoUCrop needs targets with boxes: a source with targets=Targets(boxes, ...) "
                             "(Files / Bytes / Arrays) or TFRecord(..., targets=OdapiTargets(...))")
        if targets is not None:
            from fastq import targets as targets_mod
            targets_mod.check_ops(self.compiled)  # refuse policies before any sample
            shape = self.compiled.out_shape
            self.extra_outputs += targets.output_spec(shape[:2] if self.compiled.layout == "NHWC" else shape[1:])
            self.extra_names += targets.output_names()
        self.labels = source._labels_as(label_dtype)
        self.spec = _image.ImageSpec(self.compiled)
        self.source = source
        self.batch_size = config.batch_size
        self.drop_remainder = config.drop_remainder
        self.scheduling = config.scheduling
        self.scheduled = config.scheduling is not None
        self.workers = config.workers or (config.scheduling.default_workers if config.scheduling is not None
                                          else len(usable_cpus()))
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.return_index = bool(return_index)
        self.sizes_op = sizes_op
        self.task = _image.ImageTask(self.spec, source.kind, source._task_items(), self.labels,
                                     workers=self.workers, on_error=on_error, max_attempts=int(max_attempts),
                                     with_index=self.return_index, extra_types=extra_types,
                                     targets=None if targets is None else targets.task_args(),
                                     **({"sizes_op": sizes_op} if sizes_op >= 0 else {}))
        _image.set_opencv_threads(1)  # our workers are the parallelism
        self.batch_pad = None
        if cap is not None:
            from fastq.batchpad import BatchPad
            specs, names = self.output_spec(), self.output_names()
            planes = [(k, specs[k][0], specs[k][1]) for k, name in enumerate(names)
                      if k == 0 or (name in BatchPad.PLANE_OUTPUTS and tuple(specs[k][0][-2:]) == cap)]
            self.batch_pad = BatchPad(cap, int(pad_multiple), len(specs) - 1, planes, self.compiled.layout)

    def output_spec(self):
        from fastq._native import _image
        np_dtype = _image.numpy_dtype(self.compiled.dtype)
        out = [(tuple(self.spec.out_shape), np_dtype)]
        if self.labels is not None:
            out.append((self.labels.shape[1:], self.labels.dtype))
        out += self.extra_outputs  # outputs a native reader writes (TFRecord labels...)
        if self.return_index:
            out.append(((), np.dtype(np.int64)))
        if self.sizes_op >= 0:  # pad="batch": each image's valid (h, w), the last output
            out.append(((2,), np.dtype(np.int32)))
        return out

    def output_names(self):
        """One name per output_spec entry: "images", "labels", the reader's feature keys,
        the targets' ("boxes", "classes", "num_boxes", "image_info", "keypoints",
        "masks"), "index"."""
        return (["images"] + (["labels"] if self.labels is not None else []) + self.extra_names +
                (["index"] if self.return_index else []) + (["image_sizes"] if self.sizes_op >= 0 else []))

    def order(self, epoch):
        hook = getattr(self.source, "_epoch_order", None)  # a source with an order of its own
        if hook is not None:
            return hook(self.seed, epoch, self.shuffle)
        return default_order(self.source.indices, self.seed, epoch, self.shuffle)

    def batches_per_epoch(self):
        n = len(self.source)
        return n // self.batch_size if self.drop_remainder else -(-n // self.batch_size)

    def start(self, ring, run_id, epoch, position=0):
        order = self.order(epoch)[position * self.batch_size:]
        self.task.set_epoch(order, self.seed, epoch)
        ring.set_end(len(order))
        sched = self.scheduling.run_args() if self.scheduling is not None else {}
        return _NativeProducers(ring, _core.NativeRun(ring, self.task, self.workers, len(order), **sched))

    def sample_error(self, failure, producers):
        """A failed sample's error (``failure.index``: its dataset index, carried
        by the slot's error record), with the file that holds it."""
        if hasattr(self.source, "path"):  # Files: the file; TFRecord/WebDataset: the shard
            failure.path = self.source.path(failure.index)
        return failure

    def explain(self, epoch, index):
        if not 0 <= index < self.source.num_samples:
            raise IndexError(f"sample index {index} out of range [0, {self.source.num_samples})")
        _, ex = self.task.sample(index, self.seed, epoch)
        ex["sample_index"] = index
        ex["epoch"] = epoch
        ex["seed"] = self.seed
        return ex

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




class _RemoteBackend(_ImageBackend):
    """A native image source read from object storage: each run also runs a
    fetcher (fastq/sources/fetch.py) that brings the run's bytes ahead of the
    workers into the reader's spans table."""

    def __init__(self, source, config, **options):
        self._spans = None
        super().__init__(source, config, **options)  # calls source._task_items(), which sets _taken_spans
        self._spans = source.__dict__.pop("_taken_spans")
        self._run = None  # the last run; its fetcher holds what it prefetched for the next epoch

    def start(self, ring, run_id, epoch, position=0):
        from fastq.sources.fetch import Fetcher, RemoteRun
        order = self.order(epoch)[position * self.batch_size:]
        release = getattr(self.source._remote.cache, "release", None)
        if epoch >= 1 and release is not None:
            release()  # the first epoch's spool (cache.Spool): later epochs read remotely
        prev = None
        if self._run is not None:
            if self._run.epoch + 1 == epoch and position == 0:
                prev = self._run.fetcher  # the new fetcher takes what it prefetched
            else:
                self._run.fetcher.abandon()
        fetcher = Fetcher(self.source._remote, self._spans, order, next_order=self.order(epoch + 1),
                          carry=prev).start()
        try:
            native = super().start(ring, run_id, epoch, position)
        except BaseException:
            fetcher.stop()
            fetcher.abandon()
            self._spans.reset()
            raise
        self._run = RemoteRun(native, fetcher, self._spans, epoch)
        return self._run

    def release(self):
        """Drop what the last run fetched ahead for the next epoch (the pipeline closed)."""
        if self._run is not None:
            self._run.fetcher.abandon()

    def explain(self, epoch, index):
        run = self._run
        if run is not None and not run.fetcher.stopping:
            return super().explain(epoch, index)  # the run's fetcher answers the demand
        from fastq.sources.fetch import Fetcher
        fetcher = Fetcher(self.source._remote, self._spans, None).start()
        try:
            return super().explain(epoch, index)
        finally:
            fetcher.stop()
            self._spans.reset()

    def stats(self):
        out = super().stats()
        rs = self.source._remote
        rem = rs.counters.snapshot()
        rem.update({"lent_" + k: v for k, v in self._spans.stats().items()})
        rem["bytes_cap"] = rs.opts.max_bytes
        run = self._run
        if run is not None:
            rem.update(run.stats()["fetch"])
        out["remote"] = rem
        return out
