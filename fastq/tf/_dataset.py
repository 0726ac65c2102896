"""fastq.tf.dataset: the ``tf.data.Dataset`` over a Pipeline (the native FastqDataset op, or
the ``from_generator`` feed), its element spec and cardinality, and :func:`copy` for
caching (the feeds are described in fastq/tf/__init__.py)."""
import os
from typing import Any, Optional, Tuple, Union

import numpy as np

from fastq.errors import PipelineClosedError
from fastq.pipeline import Pipeline
from fastq.tf import _native
from fastq.tf._device import _conversion, _convert_images
from fastq.tf._generator_feed import _Feed


def _tf():
    import tensorflow as tf
    return tf


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
