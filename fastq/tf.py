"""TensorFlow integration: zero-copy ``tf.data`` datasets over a fastq Pipeline.

    import fastq, fastq.tf
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...])
    ds = fastq.tf.dataset(pipe)          # one pipeline epoch per dataset iteration
    model.fit(ds, epochs=10)

How a batch reaches TensorFlow
------------------------------
The dataset is ``tf.data.Dataset.from_generator`` with a ``TensorSpec``
signature, which runs the generator through ``tf.numpy_function``.  The
generator yields the pipeline's batch arrays themselves (views of a ring
slot).  The slot memory is 64-byte aligned, so TensorFlow's ndarray->Tensor
conversion in the py_func kernel wraps that memory instead of copying it, and
keeps a reference to the numpy array - and through it to the slot's ``Lease`` -
for as long as the tensor lives.  No byte is copied between the native worker
that wrote the batch and the tensor TensorFlow reads (tests/test_tf.py checks
the addresses).

When a slot goes back to the ring
---------------------------------
When the last tensor aliasing it is freed.  TensorFlow frees a tensor from C++
threads without the GIL, so it does not drop the numpy reference at once: it
queues it, and the queue is drained whenever an eager tensor is deallocated, a
py_func returns or a v1 ``Session.run`` starts.  The fastq feeder drains it
before each batch it fetches and, while it waits for a batch, every 20 ms from one
helper thread, so slots freed by graph code always reach the producers.
:func:`flush_released` drains it on demand (useful before reading
``pipeline.stats()["slots_leased"]``).

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
pipeline alive, but the generator callable that TF keeps in a process-wide
registry reaches it only weakly: once the pipeline is closed and neither your
code nor a dataset references it, it is collected, and its slot memory is
freed once no tensor aliases it.

One iteration at a time
-----------------------
A Pipeline runs one epoch at a time.  A second tf.data iterator over the same
pipeline (from the same or another dataset made by :func:`dataset`) that
starts while the first is still live fails with :class:`ConcurrentIterationError`
at its first element; the first keeps going.  An iterator stops being live when
it is exhausted, fails, or is deleted.
"""
import os
import threading
import time
import weakref

import numpy as np

from fastq.errors import FastqError, PipelineClosedError
from fastq.pipeline import Pipeline

__all__ = ["dataset", "element_spec", "distribute_dataset", "shard_source", "from_dlpack",
           "flush_released", "copy", "ConcurrentIterationError"]


class ConcurrentIterationError(FastqError):
    """A tf.data iterator tried to read a Pipeline that another live tf.data
    iterator is already reading."""


def _tf():
    import tensorflow as tf
    return tf


# -- TensorFlow's delayed numpy decref queue ----------------------------------

_ONE = np.zeros((1,), np.int8)


def flush_released():
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


# -- one live tf.data iteration per pipeline ----------------------------------

class _Claims:
    """Which tf.data iteration, if any, is reading each pipeline."""

    def __init__(self):
        self._lock = threading.Lock()
        self._owner = weakref.WeakKeyDictionary()  # Pipeline -> description
        self._count = 0

    def claim(self, pipeline):
        with self._lock:
            held = self._owner.get(pipeline)
            if held is not None:
                raise ConcurrentIterationError(
                    f"this fastq Pipeline is already being read by another live tf.data iterator ({held}). "
                    f"A Pipeline runs one epoch at a time: finish or delete the other iterator first "
                    f"(del it; for Keras, let fit/evaluate return), or build a second Pipeline for a "
                    f"second stream.")
            self._count += 1
            token = f"tf.data iteration #{self._count}, pipeline epoch {pipeline.epoch}"
            self._owner[pipeline] = token
            return token

    def release(self, pipeline, token):
        with self._lock:
            if self._owner.get(pipeline) == token:
                del self._owner[pipeline]


_CLAIMS = _Claims()


def _named(exc):
    """The same error, with the file in the message if fastq knows it (TF only
    keeps the message when it turns the exception into an OpError)."""
    path = getattr(exc, "path", None)
    if path and path not in str(exc):
        new = type(exc)(f"{exc} (file: {path})", getattr(exc, "code", None),
                        index=getattr(exc, "index", None), path=path)
        return new
    return exc


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
        except FastqError as e:
            self._close()
            raise _named(e) from None
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
    return tuple(tf.raw_ops.DeepCopy(x=t) for t in tensors)


def _with_copying_cache(ds):
    """Make ``ds.cache(...)`` copy each element before caching it."""
    original = ds.cache

    def cache(filename="", name=None):
        return original.__func__(ds.map(copy), filename, name=name)

    cache.__doc__ = ("tf.data cache(), after copying each element out of the ring's slots "
                     "(a cache keeps its elements; aliased slots would never return to the producers).")
    object.__setattr__(ds, "cache", cache)
    return ds


def element_spec(pipeline):
    """The tuple of ``tf.TensorSpec`` a dataset over `pipeline` yields: one per
    output, batch dimension static when ``drop_remainder`` is True."""
    tf = _tf()
    batch = pipeline.batch_size if pipeline.drop_remainder else None
    specs = []
    for shape, dtype in pipeline.output_spec:
        specs.append(tf.TensorSpec((batch,) + tuple(shape), tf.as_dtype(np.dtype(dtype))))
    return tuple(specs)


def dataset(pipeline, *, device=None, device_buffer_size=None):
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
        a no-op.
    """
    tf = _tf()
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"fastq.tf.dataset needs a fastq.Pipeline, got {type(pipeline).__name__}")
    if pipeline.closed:
        raise PipelineClosedError("this Pipeline is closed")
    spec = element_spec(pipeline)
    ds = tf.data.Dataset.from_generator(_Feed(pipeline), output_signature=spec)
    opts = tf.data.Options()
    # The ring already buffers queue_size batches: an injected autotuned
    # prefetch would only hold slots, and the autotuning model has nothing to
    # tune here while its thread costs CPU and delays iterator teardown
    # (measured: up to ~70 ms per epoch).  Both can be turned back on with a
    # later ds.with_options(...) (the later setting wins).
    opts.experimental_optimization.inject_prefetch = False
    opts.autotune.enabled = False
    ds = _with_copying_cache(ds.with_options(opts))
    # The dataset object (and every dataset chained after it, which keeps its
    # input) keeps the pipeline alive; TF's generator registry does not.
    object.__setattr__(ds, "_fastq_pipeline", pipeline)
    if device is not None:
        dev = tf.DeviceSpec.from_string(device)
        kind = (dev.device_type or "").upper()
        if kind == "GPU":
            if not tf.config.list_physical_devices("GPU"):
                raise ValueError(f"fastq.tf.dataset(device={device!r}): TensorFlow sees no GPU here "
                                 f"(tf.config.list_physical_devices('GPU') is empty); pass device=None "
                                 f"to stay on the CPU")
            ds = ds.apply(tf.data.experimental.prefetch_to_device(device, device_buffer_size))
        elif kind not in ("CPU", ""):
            raise ValueError(f"fastq.tf.dataset: unsupported device {device!r} (GPU or CPU)")
    return ds


# -- tf.distribute --------------------------------------------------------------

def shard_source(source, input_context):
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


def distribute_dataset(strategy, make_pipeline, global_batch_size, *, options=None):
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

def from_dlpack(array):
    """A TF tensor viewing `array` (e.g. one array of a fastq batch) through
    DLPack, without a copy.  The DLPack capsule holds a reference to the array,
    so the tensor keeps the batch's slot leased until TensorFlow frees it."""
    tf = _tf()
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
