"""TensorFlow integration: zero-copy ``tf.data`` datasets over a fastq Pipeline.

    import fastq, fastq.tf
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...])
    ds = fastq.tf.dataset(pipe)          # one pipeline epoch per dataset iteration
    model.fit(ds, epochs=10)

How a batch reaches TensorFlow
------------------------------
By default the dataset is the tf.data source op ``FastqDataset`` of fastq's
TensorFlow kernel library (fastq/tf/_native.py, csrc/tf/fq_tf_dataset.cc; built
against the installed TensorFlow at first use): its iterator takes each batch
from the ring in C++ and returns tensors whose buffer is the slot (a refcounted
TensorBuffer holding the slot's lease), with no Python and no GIL per batch.
Python runs once per epoch, to start and end the epoch's producers.  No byte is
copied between the native worker that wrote the batch and the tensor
TensorFlow reads (tests/tf/test_tf.py and tests/tf/test_tf_native.py check the
addresses).

Where the kernel cannot be built (no compiler, no TF headers) the dataset is
``tf.data.Dataset.from_generator`` with a ``TensorSpec`` signature, which runs
the generator through ``tf.numpy_function``.  The generator yields the
pipeline's batch arrays themselves (views of a ring slot).  The slot memory is
64-byte aligned, so TensorFlow's ndarray->Tensor conversion in the py_func
kernel wraps that memory instead of copying it, and keeps a reference to the
numpy array - and through it to the slot's ``Lease`` - for as long as the
tensor lives.  ``pipeline.stats()["tf_feed"]`` says which feed and why.

When a slot goes back to the ring
---------------------------------
When the last tensor aliasing it is freed: at once with the native op.  With
``from_generator``, TensorFlow frees a tensor from C++ threads without the GIL,
so it does not drop the numpy reference at once: it queues it, and the queue
is drained whenever an eager tensor is deallocated, a py_func returns or a v1
``Session.run`` starts.  That feeder drains it before each batch it fetches
and, while it waits for a batch, every 20 ms from one helper thread, so slots
freed by graph code always reach the producers.  :func:`flush_released` drains
it on demand (useful before reading ``pipeline.stats()["slots_leased"]``).

Slots held at a time = batches your code keeps (a loop variable included) +
elements in tf.data buffers after the feeder (``prefetch``, ``shuffle``,
``prefetch_to_device`` in flight, ...).  The feeder itself adds no buffer
(tf.data's automatic prefetch injection is turned off for it): the ring *is*
the prefetch buffer.  Any free slot takes the next batch, so the producers keep
working while fewer than ``queue_size`` slots are held; when all are held the
pipeline reports StalledError.  ``.cache()`` on the returned dataset copies each
element first (a cache keeps its elements forever); put ``.map(fastq.tf.copy)``
before a ``.cache()`` further down the chain.

Lifetime: the dataset object (and every dataset chained after it) keeps its
pipeline alive, but the op's feed registry (or the generator callable that TF
keeps in a process-wide registry) reaches it only weakly: once the pipeline is
closed and neither your code nor a dataset references it, it is collected, and
its slot memory is freed once no tensor aliases it.

Iterator checkpoints
--------------------
``tf.train.Checkpoint(iterator=it)`` saves the pipeline's (epoch, position) with the native
op, at every point: before the first batch (the epoch the iterator would begin), mid-epoch,
at and after the epoch's end; a restore, into the same iterator or a fresh pipeline's, goes
on with exactly the batches that followed (docs/tensorflow.md).  What cannot be restored
refuses to be saved: a Python-iterable source (InvalidArgumentError), and the
``from_generator`` feed, whose iterator TensorFlow does not save (FailedPreconditionError
"PyFunc is stateful"); save ``pipeline.state_dict()`` yourself there.

One iteration at a time
-----------------------
A Pipeline runs one epoch at a time.  A second tf.data iterator over the same
pipeline (from the same or another dataset made by :func:`dataset`) that
starts while the first is still live fails with :class:`ConcurrentIterationError`
at its first element; the first keeps going.  An iterator stops being live when
it is exhausted, fails, or is deleted.
"""
import contextlib
import os
import threading
import time
import weakref
from typing import Any, Callable, Optional, Tuple, Union

import numpy as np

from fastq.tf import _native
from fastq.tf._native import _CLAIMS, ConcurrentIterationError
from fastq.errors import PipelineClosedError
from fastq.pipeline import Pipeline

ConcurrentIterationError.__module__ = __name__  # public here (defined with the claims both feeds share)

__all__ = ["dataset", "element_spec", "distribute_dataset", "shard_source", "from_dlpack", "to_device",
           "flush_released", "copy", "ConcurrentIterationError", "EpochSync"]


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


def copy(*tensors):
    """A tuple of copies of `tensors` in new buffers (``tf.raw_ops.DeepCopy``),
    for ``ds.map(fastq.tf.copy).cache()`` on a dataset of tuples (as
    :func:`dataset` makes): elements that outlive an epoch (a cache) must not
    alias the ring's slots, or the slots never come back.  (For a dataset of
    single tensors use ``ds.map(lambda t: tf.raw_ops.DeepCopy(x=t))``.)"""
    tf = _tf()
    # (nested: the (images, {name: tensor}) elements of structure="features_labels")
    return tuple(tf.nest.map_structure(lambda t: tf.raw_ops.DeepCopy(x=t), tensors))


def _with_copying_cache(ds):
    """Make ``ds.cache(...)`` copy each element before caching it."""
    original = ds.cache

    def cache(filename="", name=None):
        return original.__func__(ds.map(copy), filename, name=name)

    cache.__doc__ = ("tf.data cache(), after copying each element out of the ring's slots "
                     "(a cache keeps its elements; aliased slots would never return to the producers).")
    object.__setattr__(ds, "cache", cache)
    return ds


def element_spec(pipeline: Pipeline) -> Tuple[Any, ...]:
    """The tuple of ``tf.TensorSpec`` a dataset over `pipeline` yields: one per
    output, batch dimension static when ``drop_remainder`` is True."""
    tf = _tf()
    batch = pipeline.batch_size if pipeline.drop_remainder else None
    specs = []
    for shape, dtype in pipeline.output_spec:
        specs.append(tf.TensorSpec((batch,) + tuple(shape), tf.as_dtype(np.dtype(dtype))))
    return tuple(specs)


def _cardinality(pipeline, cardinality):
    if cardinality is None:
        return None
    if cardinality != "auto":
        if isinstance(cardinality, bool) or not isinstance(cardinality, (int, np.integer)) or cardinality < 0:
            raise ValueError(f"cardinality must be 'auto', None or a non-negative int, got {cardinality!r}")
        return int(cardinality)
    if getattr(pipeline, "_resume_position", 0):
        # a mid-epoch resume is pending: the next iteration is shorter than the others
        return None
    try:
        return len(pipeline)
    except TypeError:  # an iterable source of unknown length
        return None


# -- uint8 on the wire, conversion on the device -------------------------------------

def _conversion(normalize, dtype, layout, input_layout):
    """The conversion asked for (fastq.device.convert.ConversionSpec), or None when there is none."""
    from fastq.device.convert import ConversionSpec
    spec = ConversionSpec(normalize, dtype, layout, input_layout, where="fastq.tf")
    if spec.layout == "channels_last":
        raise ValueError("fastq.tf: layout='channels_last' is PyTorch's memory format (an NCHW shape); TensorFlow "
                         "tensors have none: ask for 'NHWC' (Keras' channels_last) or 'NCHW'")
    return spec if spec.active else None


def _convert_images(images, spec):
    """uint8 images -> the spec's layout and dtype, normalized as fastq's Normalize writes it
    (bit for bit: a gather from fastq.ops.normalize_table), on the device the ops run on."""
    tf = _tf()
    from fastq.tf import ops as tf_ops
    if spec.casts and images.dtype != tf.uint8:
        raise TypeError(f"fastq.tf: normalize/dtype on the device needs uint8 images, got {images.dtype.name}: "
                        f"build the Pipeline with dtype='uint8' and without ops.Normalize (the device does that)")
    perm, _, axis = spec.plan(tuple(images.shape))
    if perm != (0, 1, 2, 3):  # uint8: a quarter of the bytes of the float result to move
        images = tf.transpose(images, perm)
    if not spec.casts:
        return images
    return tf_ops.gather_table(images, tf_ops.table_as(spec.table(), spec.dtype), axis)


def to_device(batch: Any, device: Optional[str] = None, *, normalize: Any = None, dtype: Any = None,
              layout: Optional[str] = None, input_layout: str = "NHWC") -> Any:
    """A batch ``(images, ...)`` (or an images tensor) on `device`, its uint8 images
    converted there (fastq.device.convert.ConversionSpec): ``normalize`` True (ImageNet),
    ``(mean, std)`` on the 0..1 scale or an ``ops.Normalize`` - the result equals the
    Pipeline's Normalize bit for bit; ``dtype`` float32 (the default when normalizing),
    bfloat16, float16 (without ``normalize``: ``x / 255``, as a Pipeline without Normalize
    writes); ``layout`` "NHWC" or "NCHW" (``input_layout``: the Pipeline's).  The other
    tensors are copied as they are.  Eager or inside a ``tf.function`` (a training step);
    ``device=None``: where TensorFlow places the ops.  The names of fastq.torch.to_device
    and fastq.jax.device_put."""
    tf = _tf()
    spec = _conversion(normalize, dtype, layout, input_layout)
    single = not isinstance(batch, (tuple, list))
    items = (batch,) if single else tuple(batch)
    with tf.device(device) if device else contextlib.nullcontext():
        first = tf.convert_to_tensor(items[0])
        first = first if spec is None else _convert_images(first, spec)
        out = (tf.identity(first),) + tuple(tf.nest.map_structure(tf.identity, x) for x in items[1:])
    return out[0] if single else out


def _pipeline_layout(pipeline):
    compiled = getattr(pipeline._backend, "compiled", None)
    return getattr(compiled, "layout", None) or "NHWC"


_LOGGED_REASONS: set = set()


def _native_dataset(pipeline, spec, n, native):
    """(the FastqDataset op's dataset or None, the feed record for stats()["tf_feed"])."""
    if native == "auto" and os.environ.get("FASTQ_TF_NATIVE", "") in ("0", "false", "no"):
        native = False
        why = "FASTQ_TF_NATIVE=0"
    else:
        why = "native=False"
    if native is not False:
        try:
            return _native.dataset(pipeline, spec, n), {"feed": "native", "op": "FastqDataset"}
        except Exception as e:  # noqa: BLE001 - any reason: the from_generator feed still works
            if native is True:
                raise
            why = f"{type(e).__name__}: {e}"
            if why not in _LOGGED_REASONS:  # once per reason and process
                _LOGGED_REASONS.add(why)
                _native.log.warning("fastq.tf.dataset: using the from_generator feed (a Python callback per "
                                       "batch; its iterators cannot be saved by tf.train.Checkpoint) instead of "
                                       "the native op: %s", why)
    return None, {"feed": "from_generator", "reason": why}


def dataset(pipeline: Pipeline, *, device: Optional[str] = None, device_buffer_size: Optional[int] = None,
            cardinality: Union[str, int, None] = "auto", structure: str = "tuple",
            native: Union[str, bool] = "auto", normalize: Any = None, dtype: Any = None,
            layout: Optional[str] = None) -> Any:
    """A ``tf.data.Dataset`` of the pipeline's batches, without copies.

    Elements are tuples of tensors, one per pipeline output (the same tuple a
    Python loop over the pipeline gives), with :func:`element_spec` as
    ``element_spec``.  Every iteration of the dataset (``iter(ds)``, a Keras
    epoch, a ``for`` loop inside ``tf.function``, ``.repeat()``) runs the
    pipeline's next epoch.  Works eagerly, in ``model.fit``, inside
    ``tf.function`` and in v1 graph mode.

    device : None or a device string
        ``"/gpu:0"`` ends the dataset with
        ``tf.data.experimental.prefetch_to_device(device, device_buffer_size)``
        so host-to-device copies (from pinned slots when the pipeline is
        pinned) overlap compute; nothing may be chained after it.  A GPU
        device when TensorFlow sees no GPU is a ValueError; a CPU device is
        a no-op (unless a conversion is asked, below).
    normalize, dtype, layout
        uint8 on the wire, conversion on the device: the images (uint8: a
        Pipeline with ``dtype="uint8"`` and no Normalize) are copied to
        `device` as they are, then converted there by :func:`to_device`'s
        ops (fastq.device.convert.ConversionSpec: ``normalize`` True / (mean, std) /
        ``ops.Normalize``, equal to the Pipeline's Normalize bit for bit;
        ``dtype`` float32 / bfloat16 / float16; ``layout`` NHWC / NCHW).  The
        dataset ends with
        ``copy_to_device(device)``, then, under ``tf.device(device)``, the
        conversion ``map`` and ``prefetch(device_buffer_size or 1)``.  Without
        `device` the conversion runs on the host's CPU (slow there: prefer the
        Pipeline's own Normalize on a CPU-only machine).
    native : "auto", True or False
        The feed.  "auto" (default): the FastqDataset op (fastq's TensorFlow
        kernel, built at first use: batches taken from the ring in C++, no
        Python per batch), and ``from_generator`` (a Python callback per
        batch) when the kernel cannot be built or loaded, or for a pipeline
        it does not take; ``pipeline.stats()["tf_feed"]`` says which and why,
        and the first fallback per reason is logged.  True: the op or an
        error.  False: ``from_generator``.  ``FASTQ_TF_NATIVE=0`` in the
        environment makes "auto" mean False.
    cardinality : "auto", None or int
        The number of batches per iteration, declared to tf.data (by the op,
        or with ``assert_cardinality``) so that ``ds.cardinality()`` and ``len(ds)``
        are known and Keras shows progress bars with a total and does not
        warn "Your input ran out of data".  "auto" (default): ``len(pipeline)``
        when it is known (native sources; an iterable source with ``__len__``)
        and no mid-epoch resume (``load_state_dict`` with position > 0) is
        pending, else unknown.  TensorFlow checks the number: an iteration
        that yields another number of batches fails at its end.  None: leave
        it unknown.
    structure : "tuple" or "features_labels"
        "tuple" (default): one tensor per output, in order.  "features_labels":
        ``(images, {name: tensor})`` with the other outputs by name
        (:attr:`Pipeline.output_names`: "labels", "boxes", "classes", "num_boxes",
        "image_info", "masks", ...), the ``(features, labels)`` pair that
        ``model.fit`` and TF Model Garden's detection and segmentation tasks take.
        The dict is built by a ``map`` that moves no data (the tensors are the
        same).
    """
    tf = _tf()
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"fastq.tf.dataset needs a fastq.Pipeline, got {type(pipeline).__name__}")
    if pipeline.closed:
        raise PipelineClosedError("this Pipeline is closed")
    if structure not in ("tuple", "features_labels"):
        raise ValueError(f"fastq.tf.dataset: structure must be 'tuple' or 'features_labels', got {structure!r}")
    names = pipeline.output_names if structure == "features_labels" else None
    if structure == "features_labels" and (names is None or len(names) < 2 or names[0] != "images"):
        raise ValueError("fastq.tf.dataset(structure='features_labels') needs a native image source with at "
                         f"least one output after the images (its outputs: {names})")
    if native not in ("auto", True, False):
        raise ValueError(f"fastq.tf.dataset: native must be 'auto', True or False, got {native!r}")
    conv = _conversion(normalize, dtype, layout, _pipeline_layout(pipeline))
    spec = element_spec(pipeline)
    if conv is not None and conv.casts and spec[0].dtype != tf.uint8:
        raise ValueError(f"fastq.tf.dataset(normalize/dtype/layout=...): the conversion on the device takes uint8 "
                         f"images, this Pipeline writes {spec[0].dtype.name}; build it with dtype='uint8' and "
                         f"without Normalize (the conversion does that on the device)")
    n = _cardinality(pipeline, cardinality)
    ds, feed = _native_dataset(pipeline, spec, n, native)
    pipeline._tf_feed = feed
    if ds is None:
        ds = tf.data.Dataset.from_generator(_Feed(pipeline), output_signature=spec)
        if n is not None:  # (the native op declares it itself, and checks it at the end of each epoch)
            ds = ds.apply(tf.data.experimental.assert_cardinality(n))
    opts = tf.data.Options()
    # The ring already buffers queue_size batches: an injected autotuned
    # prefetch would only hold slots, and the autotuning model has nothing to
    # tune here while its thread costs CPU and delays iterator teardown
    # (measured: up to ~70 ms per epoch).  Both can be turned back on with a
    # later ds.with_options(...) (the later setting wins).
    opts.experimental_optimization.inject_prefetch = False
    opts.autotune.enabled = False
    ds = ds.with_options(opts)
    if names is not None:
        rest = names[1:]
        ds = ds.map(lambda images, *xs: (images, dict(zip(rest, xs))))
    ds = _with_copying_cache(ds)
    # The dataset object (and every dataset chained after it, which keeps its
    # input) keeps the pipeline alive; TF's generator registry does not.
    object.__setattr__(ds, "_fastq_pipeline", pipeline)
    convert = None
    if conv is not None:
        def convert(images, *rest):
            return (_convert_images(images, conv),) + rest
    kind = None
    if device is not None:
        kind = (tf.DeviceSpec.from_string(device).device_type or "").upper()
        if kind == "GPU" and not tf.config.list_physical_devices("GPU"):
            raise ValueError(f"fastq.tf.dataset(device={device!r}): TensorFlow sees no GPU here "
                             f"(tf.config.list_physical_devices('GPU') is empty); pass device=None "
                             f"to stay on the CPU")
        if kind not in ("GPU", "CPU", ""):
            raise ValueError(f"fastq.tf.dataset: unsupported device {device!r} (GPU or CPU)")
        kind = kind or None  # no device type: where TensorFlow places ops, as device=None
    if convert is not None and kind is not None:
        # the uint8 batch is what crosses to the device; the map runs there
        ds = ds.apply(tf.data.experimental.copy_to_device(device))
        with tf.device(device):
            ds = ds.map(convert).prefetch(device_buffer_size or 1)
    elif convert is not None:
        ds = ds.map(convert)
    elif kind == "GPU":
        ds = ds.apply(tf.data.experimental.prefetch_to_device(device, device_buffer_size))
    return ds


# -- tf.distribute --------------------------------------------------------------

def shard_source(source: Any, input_context: Any) -> Any:
    """`source` restricted to this input pipeline's shard
    (``input_context.input_pipeline_id`` of ``num_input_pipelines``), for
    fastq's native sources (Files, Bytes, Arrays)."""
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    if n == 1:
        return source
    if not hasattr(source, "shard"):
        raise TypeError(f"{type(source).__name__} cannot be sharded by fastq; shard the data yourself "
                        f"(input pipeline {i} of {n})")
    return source.shard(n, i)


def distribute_dataset(strategy: Any, make_pipeline: Callable[[Any, int], Pipeline], global_batch_size: int, *,
                       options: Any = None) -> Any:
    """A distributed dataset for `strategy`, one fastq Pipeline per input pipeline.

    Calls ``strategy.distribute_datasets_from_function``; for each input
    pipeline (one per worker) it calls ``make_pipeline(input_context,
    per_replica_batch_size)``, which must return a new :class:`fastq.Pipeline`
    that

    * reads only its shard: e.g. ``shard_source(source, input_context)``, i.e.
      ``source.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)``;
    * has ``batch_size == per_replica_batch_size``
      (``input_context.get_per_replica_batch_size(global_batch_size)``);
    * should use ``drop_remainder=True`` so every worker runs the same number
      of steps (collectives need that) and shapes are static.

    The pipelines made are kept in the returned object's ``fastq_pipelines``
    attribute (for stats and close) when it accepts attributes.
    """
    pipelines = []

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(global_batch_size)
        p = make_pipeline(input_context, per_replica)
        if not isinstance(p, Pipeline):
            raise TypeError(f"make_pipeline must return a fastq.Pipeline, got {type(p).__name__}")
        if p.batch_size != per_replica:
            raise ValueError(f"make_pipeline returned a Pipeline with batch_size={p.batch_size}; this input "
                             f"pipeline needs the per-replica batch size {per_replica} "
                             f"(global {global_batch_size} / {input_context.num_replicas_in_sync} replicas)")
        pipelines.append(p)
        return dataset(p)

    dist = strategy.distribute_datasets_from_function(dataset_fn, options)
    try:
        dist.fastq_pipelines = pipelines
    except AttributeError:
        pass
    return dist


# -- DLPack ---------------------------------------------------------------------

def from_dlpack(array: np.ndarray) -> Any:
    """A TF tensor viewing `array` (e.g. one array of a fastq batch) through
    DLPack, without a copy.  The DLPack capsule holds a reference to the array,
    so the tensor keeps the batch's slot leased until TensorFlow frees it."""
    tf = _tf()
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


# -- TensorBoard: where the input pipeline's time goes ----------------------------

def stage_stats_callback(pipeline, log_dir, *, every_n_batches=None):
    """A Keras callback that writes ``pipeline.stats()["stages"]`` (see
    fastq.stages) to TensorBoard summaries in `log_dir`: ``fastq/stage_s/<stage>``
    (read, decode, ops, write: seconds summed over workers),
    ``fastq/worker_wait_fraction``, ``fastq/consumer_wait_fraction`` and the
    verdict as text ``fastq/verdict``, at the end of every epoch and, if
    `every_n_batches` is set, every that many training batches.  The step is
    the number of training batches seen so far.

        model.fit(fastq.tf.dataset(p), callbacks=[fastq.tf.stage_stats_callback(p, "logs/fastq")])
    """
    tf = _tf()
    if every_n_batches is not None and (not isinstance(every_n_batches, int) or every_n_batches < 1):
        raise ValueError(f"every_n_batches must be a positive int or None, got {every_n_batches!r}")
    writer = tf.summary.create_file_writer(log_dir)
    # tf.summary.write with the metadata TensorBoard's scalar / text plugins write
    # (tf.summary.scalar itself needs the tensorboard package installed)
    from tensorflow.core.framework import summary_pb2
    scalar_md, text_md = summary_pb2.SummaryMetadata(), summary_pb2.SummaryMetadata()
    scalar_md.plugin_data.plugin_name, scalar_md.data_class = "scalars", summary_pb2.DATA_CLASS_SCALAR
    text_md.plugin_data.plugin_name, text_md.data_class = "text", summary_pb2.DATA_CLASS_TENSOR

    def scalar(tag, value):
        tf.summary.write(tag, tf.constant(float(value), tf.float32), metadata=scalar_md)

    class StageStatsCallback(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.pipeline, self.writer, self.every_n_batches, self.step = pipeline, writer, every_n_batches, 0

        def log_now(self):
            rep = self.pipeline.stats()["stages"]
            with self.writer.as_default(step=self.step):
                for k, v in (rep["stage_s"] or {}).items():
                    scalar(f"fastq/stage_s/{k}", v)
                for k in ("worker_wait_fraction", "consumer_wait_fraction"):
                    if rep[k] is not None:
                        scalar(f"fastq/{k}", rep[k])
                tf.summary.write("fastq/verdict", tf.constant(rep["verdict"]), metadata=text_md)
            self.writer.flush()
            return rep

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if self.every_n_batches and self.step % self.every_n_batches == 0:
                self.log_now()

        def on_epoch_end(self, epoch, logs=None):
            self.log_now()

    return StageStatsCallback()

# -- Keras: keep pipeline epochs in step with Keras epochs ------------------------

def _epoch_sync_class():
    import keras

    class EpochSync(keras.callbacks.Callback):
        """A Keras callback that makes Keras epoch ``e`` read pipeline epoch ``e``.

        Under a ``tf.distribute`` strategy (MirroredStrategy, ...), Keras 3's
        ``fit``/``evaluate``/``predict`` first open an iterator of the dataset only
        to learn the batch's shapes (``_maybe_symbolic_build``): it takes a batch
        (the distributed iterator prefetches a few) and drops it.  Over a fastq
        dataset that probe runs, and abandons, one pipeline epoch, so training
        would see pipeline epochs 1, 2, ... and ``pipeline.epoch`` /
        ``state_dict()`` would be one ahead.  At each ``on_epoch_begin(e)`` this
        callback sets the pipeline back to epoch ``e`` (``load_state_dict``), so
        the shuffle order, augmentation and resume points are those of epoch
        ``e`` whatever ran before.  A resume point loaded before ``fit`` (epoch
        ``k``, position ``j``) is kept for ``fit(initial_epoch=k)``: create the
        callback after ``load_state_dict``.  Needs a native source (Files,
        Bytes, Arrays).  Without a strategy it changes nothing.

            model.fit(fastq.tf.dataset(pipe), epochs=3, callbacks=[fastq.tf.EpochSync(pipe)])
        """

        def __init__(self, pipeline):
            super().__init__()
            if not isinstance(pipeline, Pipeline):
                raise TypeError(f"EpochSync needs a fastq.Pipeline, got {type(pipeline).__name__}")
            if pipeline._backend.batches_per_epoch() is None:
                raise TypeError("EpochSync needs a native source (Files, Bytes, Arrays): an iterable source "
                                "cannot be rewound to an epoch")
            self.pipeline = pipeline
            sd = pipeline.state_dict()
            self._pending = (sd["epoch"], sd["position"])  # a resume point loaded before fit

        def on_epoch_begin(self, epoch, logs=None):
            p = self.pipeline
            position = 0
            if self._pending is not None and self._pending[0] == epoch:
                position = self._pending[1]
            self._pending = None
            it = p._active
            if it is None and p.epoch == epoch and p._resume_position == position:
                return  # already there (no strategy probe ran)
            flush_released()
            sd = p.state_dict()
            sd.update(epoch=int(epoch), position=int(position))
            p.load_state_dict(sd)

    EpochSync.__module__ = __name__
    EpochSync.__qualname__ = "EpochSync"
    return EpochSync


_LAZY: dict = {}


def __getattr__(name: str) -> Any:
    if name == "ops":  # the submodule fastq.tf.ops (the native TensorFlow op), imported on first use
        import importlib
        return importlib.import_module(__name__ + ".ops")
    # keras is imported only when EpochSync is used
    if name == "EpochSync":
        if name not in _LAZY:
            _LAZY[name] = _epoch_sync_class()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
