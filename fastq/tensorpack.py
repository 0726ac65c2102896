"""tensorpack drop-in: ``fastq.tensorpack.QueueInput`` where ``tensorpack.QueueInput`` stood.

    # before
    config = TrainConfig(model=M(), data=QueueInput(df), ...)
    # after: the DataFlow runs on fastq's producer threads, batches go into
    # fastq's slot ring and reach the graph without a copy
    config = TrainConfig(model=M(), data=fastq.tensorpack.QueueInput(df, size=8), ...)
    # or, natively decoded and augmented:
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...])
    config = TrainConfig(model=M(), data=fastq.tensorpack.QueueInput(pipe), ...)
    # or, your imgaug augmentor list as it is (translate; docs/migrate.md):
    pipe = fastq.tensorpack.translate(fbresnet_augmentor(True)).pipeline(source, 64, shuffle=True)

tensorpack's QueueInput has a Python thread run the DataFlow and
``sess.run`` an enqueue op per datapoint into a ``tf.FIFOQueue`` (a copy in,
a copy out).  This one is a ``FeedfreeInput`` whose tensors come from a
v1 initializable iterator over :func:`fastq.tf.dataset` (repeated): the
dequeue is replaced by the dataset's own op, which hands TensorFlow the slot
memory itself (``FastqDataset``; a ``tf.numpy_function`` where fastq's
TensorFlow kernel cannot be built).  Works in tensorpack 0.11 on TensorFlow 2.x graph mode
(``launch_train_with_config`` disables eager execution itself).
"""
from typing import Any

import numpy as np

from fastq.pipeline import Pipeline
from fastq.sources import Iterable

__all__ = ["QueueInput", "fbresnet_augmentor", "translate"]


class _Batches:
    """A DataFlow of batches as fastq samples: every datapoint becomes one ring
    row, plus a last int32 field with its number of rows.  A datapoint with fewer
    rows than the first one (``BatchData(..., remainder=True)``'s last batch) is
    zero-padded to the first one's size; the graph slices the padding off again
    (an aliasing slice: the tensor still views the slot)."""

    def __init__(self, df):
        self.df = df
        self.rows = None      # rows of the first datapoint: every datapoint's capacity
        self.batched = None   # which fields have that leading dimension

    def reset_state(self):
        reset = getattr(self.df, "reset_state", None)
        if callable(reset):
            reset()

    def __len__(self):
        return len(self.df)

    def __iter__(self):
        for k, dp in enumerate(self.df):
            fields = [np.asarray(f) for f in (dp if isinstance(dp, (list, tuple)) else (dp,))]
            if not fields or fields[0].ndim == 0:
                raise ValueError(f"datapoint {k}: QueueInput (batch_size=None) takes datapoints that are "
                                 f"batches: arrays with a leading batch dimension")
            b = fields[0].shape[0]
            if self.rows is None:
                self.rows = b
                self.batched = [f.ndim >= 1 and f.shape[0] == b for f in fields]
            if b > self.rows:
                raise ValueError(f"datapoint {k} is a batch of {b}, larger than the first datapoint's {self.rows}; "
                                 f"only smaller batches (a remainder) can follow the first one")
            if b < self.rows:
                padded = []
                for i, (f, batched) in enumerate(zip(fields, self.batched)):
                    if batched:
                        if f.ndim < 1 or f.shape[0] != b:
                            raise ValueError(f"datapoint {k}, field {i}: shape {f.shape}, expected a leading "
                                             f"dimension of {b} like field 0")
                        g = np.zeros((self.rows,) + f.shape[1:], f.dtype)
                        g[:b] = f
                        f = g
                    padded.append(f)
                fields = padded
            fields.append(np.int32(b))
            yield fields


def _make_class():
    import tensorflow as tf
    from tensorpack.callbacks.base import CallbackFactory
    from tensorpack.input_source.input_source import FeedfreeInput

    tfv1 = tf.compat.v1

    class QueueInput(FeedfreeInput):
        """A tensorpack InputSource fed by a fastq Pipeline or a DataFlow.

        Parameters
        ----------
        source : fastq.Pipeline, tensorpack DataFlow, or any iterable
            A Pipeline is used as it is (its batch_size and queue_size hold;
            ``size`` must be None or equal to its queue_size).  Anything else
            is wrapped as ``fastq.Pipeline(fastq.sources.Iterable(source),
            batch_size=..., queue_size=size)``, which this object owns and
            closes after training.
        size : int, optional
            Number of batch slots (default 8).  Unlike tensorpack's FIFO queue
            of 50 *datapoints*, each slot holds a whole batch in memory.
        batch_size : int, optional
            None (default): like tensorpack's QueueInput, every datapoint of
            the DataFlow is already a batch (e.g. from ``BatchData``); it goes
            into the ring as one slot and reaches the model unchanged.  An int:
            the DataFlow yields single samples and fastq batches them.
        queue : must be None
            tensorpack 0.11's ``QueueInput(ds, queue=None)`` takes a
            ``tf.FIFOQueue`` of datapoints (50 by default).  fastq has no TF
            queue: its ring of ``size`` batch slots replaces it, so passing a
            queue is a TypeError that says so.
        **pipeline_options
            Passed to fastq.Pipeline when wrapping a DataFlow (workers,
            stall_timeout, pin_memory, drop_remainder).

        The model's inputs (``ModelDesc.inputs()``) must match the pipeline's
        outputs in number and shape.  Where an input's dtype differs, integer
        and bool outputs (labels, indices) are cast in the graph (e.g. int64
        labels into a ``tf.int32`` input: a copy of a few bytes per batch);
        other differences (e.g. float32 images into a float16 input) are
        refused, since the cast would copy every batch: build the Pipeline
        with ``dtype=`` / ``label_dtype=`` instead.

        With ``batch_size=None`` the DataFlow's datapoints are batches; the
        first one fixes the slot size, and a later smaller one (the last batch
        of ``BatchData(..., remainder=True)``) reaches the model with its own
        number of rows.  tensorpack's "epoch" is
        ``steps_per_epoch`` steps; the underlying dataset repeats, running
        one pipeline epoch after another.
        """

        def __init__(self, source, size=None, *, batch_size=None, queue=None, **pipeline_options):
            if queue is not None:
                raise TypeError(
                    "fastq.tensorpack.QueueInput(queue=...): fastq has no TF queue. tensorpack's QueueInput "
                    "enqueues datapoints into that tf.FIFOQueue (50 by default); fastq's ring of batch slots "
                    "replaces it. Drop queue= and pass size=<number of batch slots> (default 8; each slot holds "
                    "one whole batch).")
            if isinstance(source, Pipeline):
                if batch_size is not None or pipeline_options:
                    raise TypeError("batch_size and pipeline options apply when wrapping a DataFlow; "
                                    "this Pipeline is already configured")
                if size is not None and size != source.queue_size:
                    raise ValueError(f"size={size} but the Pipeline has queue_size={source.queue_size}; "
                                     f"set queue_size on the Pipeline")
                self.pipeline = source
                self._owns = False
                self._unbatch = False
                self._dataflow = None
            else:
                if not hasattr(source, "__iter__"):
                    raise TypeError(f"QueueInput takes a fastq.Pipeline, a DataFlow or an iterable, "
                                    f"got {type(source).__name__}")
                size = 8 if size is None else size
                self._unbatch = batch_size is None
                wrapped = _Batches(source) if self._unbatch else source
                self.pipeline = Pipeline(Iterable(wrapped), batch_size=1 if batch_size is None else batch_size,
                                         queue_size=size, **pipeline_options)
                self._owns = True
                self._dataflow = source
            self._iterator = None
            self._init_op = None

        # -- InputSource interface ---------------------------------------------
        def _size(self):
            # batches per pipeline epoch: len(pipeline) (a DataFlow of batches: its len())
            try:
                return len(self.pipeline)
            except TypeError:
                raise NotImplementedError("the source has no len(); set TrainConfig(steps_per_epoch)") from None

        def _setup(self, input_signature):
            from fastq import tf as fqtf
            self._spec = list(input_signature)
            out = fqtf.element_spec(self.pipeline)
            if self._unbatch:
                out = out[:-1]  # the rows field of _Batches
                batched = self.pipeline.source.obj.batched or [True] * len(out)
                full = [s.shape[1:] for s in out]
                out = tuple(tf.TensorSpec(tf.TensorShape([None]).concatenate(s.shape[2:]) if b else s.shape[1:],
                                          s.dtype) for s, b in zip(out, batched))
            if len(out) != len(self._spec):
                raise ValueError(f"the model has {len(self._spec)} inputs but the fastq pipeline gives "
                                 f"{len(out)} outputs ({out})")
            self._casts = []
            for want, got in zip(self._spec, out):
                cast = None
                if want.dtype != got.dtype:
                    if (got.dtype.is_integer or got.dtype.is_bool) and \
                            (want.dtype.is_integer or want.dtype.is_floating or want.dtype.is_bool):
                        cast = want.dtype
                    else:
                        raise ValueError(
                            f"input '{want.name}' is {want.dtype.name} but the pipeline gives {got.dtype.name}; "
                            f"QueueInput casts only integer outputs (labels) in the graph, since casting images "
                            f"would copy every batch: build the Pipeline with dtype='{want.dtype.name}' (images) "
                            f"or label_dtype='{want.dtype.name}' (labels)")
                if not tf.TensorShape(want.shape).is_compatible_with(got.shape):
                    raise ValueError(f"input '{want.name}' has shape {want.shape} but the pipeline gives "
                                     f"{got.shape}")
                self._casts.append(cast)
            with self.cached_name_scope():
                ds = fqtf.dataset(self.pipeline)
                if self._unbatch:
                    flags = list(batched)

                    def drop_lead(*xs):
                        # reshape and a leading slice share the buffer: still no copy
                        n = tf.reshape(xs[-1], [])
                        res = []
                        for x, sh, b in zip(xs[:-1], full, flags):
                            x = tf.reshape(x, sh)
                            res.append(x[:n] if b else x)
                        return tuple(res)
                    ds = ds.map(drop_lead)
                ds = ds.repeat()
                self._iterator = tfv1.data.make_initializable_iterator(ds)
                self._init_op = self._iterator.initializer

        def _reset_state(self):
            self._init_op.run()

        def _get_input_tensors(self):
            with tf.device("/cpu:0"), self.cached_name_scope():
                ret = self._iterator.get_next()
            ret = list(ret) if isinstance(ret, (tuple, list)) else [ret]
            for i, (t, spec) in enumerate(zip(ret, self._spec)):
                t.set_shape(spec.shape)
                if self._casts[i] is not None:
                    ret[i] = tf.cast(t, self._casts[i], name=f"{spec.name}_as_{self._casts[i].name}")
            return ret

        def _get_callbacks(self):
            if not self._owns:
                return []
            return [CallbackFactory(after_train=lambda _: self.pipeline.close())]

    QueueInput.__module__ = __name__
    QueueInput.__qualname__ = "QueueInput"
    return QueueInput


_CLASS = None


def __getattr__(name: str) -> Any:
    # tensorpack and TensorFlow are imported only when QueueInput is used.
    global _CLASS
    if name == "QueueInput":
        if _CLASS is None:
            _CLASS = _make_class()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- tensorpack: fbresnet_augmentor as fastq ops (csrc/image/color/fq_image_aug_tensorpack.cpp) -----------

def fbresnet_augmentor(size: int = 224, training: bool = True, max_attempts: int = 10) -> list:
    """tensorpack's ``fbresnet_augmentor(isTrain)`` (examples/ImageNetModels/imagenet_utils.py)
    as a fastq op chain, for a pipeline made with ``channels="BGR"`` (tensorpack's images are
    BGR from ``cv2.imread``; fastq decodes RGB and reverses the channels in the final write, so
    ``channels="BGR"`` is all that is needed: the colour op's grey weights and Lighting
    constants are those of the BGR image tensorpack sees)::

        pipe = fastq.Pipeline(source, batch_size=64, channels="BGR", dtype="uint8",
                              ops=fastq.tensorpack.fbresnet_augmentor(224, training=True))

    ``training=True``: ``GoogleNetRandomCropAndResize(interp=cv2.INTER_CUBIC)``
    (:class:`fastq.ops.TensorpackCrop`, ``max_attempts`` tries), ``ToFloat32`` +
    ``RandomOrderAug([BrightnessScale((0.6, 1.4)), Contrast((0.6, 1.4), rgb=False),
    Saturation(0.4, rgb=False), Lighting(0.1, <BGR constants>)])`` + ``ToUint8``
    (:class:`fastq.ops.TensorpackColor`), ``Flip(horiz=True)`` (:class:`fastq.ops.HorizontalFlip`).
    ``training=False``: ``ResizeShortestEdge(int(size * 256 / 224), cv2.INTER_CUBIC)`` +
    ``CenterCrop(size)`` with tensorpack's rounding (``TensorpackCrop(size, max_attempts=0,
    short_edge=...)``: no draw)."""
    from fastq import ops as O
    if training:
        return [O.TensorpackCrop(size, interpolation="bicubic", max_attempts=max_attempts),
                O.TensorpackColor(), O.HorizontalFlip(0.5)]
    return [O.TensorpackCrop(size, interpolation="bicubic", max_attempts=0, short_edge=int(size * 256 / 224))]


def translate(augmentors, strict: bool = False):
    """tensorpack ``imgaug`` augmentors (a list or ``AugmentorList``) as a
    :class:`fastq.translate.Translation`: each augmentor becomes the native op with its exact
    semantics, and ``.pipeline(source, batch_size, **kw)`` gives the images tensorpack's
    augmentors give on ``cv2.imread``'s BGR images (uint8, or float32 0..255 when the list ends
    in float32)::

        tr = fastq.tensorpack.translate(fbresnet_augmentor(isTrain=True))
        print(tr)                                    # each augmentor and what it became
        pipe = tr.pipeline(fastq.sources.Files(paths, labels), 64, shuffle=True, label_dtype="int32")
        config = TrainConfig(model=M(), data=fastq.tensorpack.QueueInput(pipe), ...)

    An augmentor without an exact native equivalent (an unknown class, ``MapImage``, an argument
    value the native op does not have) and every augmentor after it run in Python per sample on
    the native steps' output, with one ``UserWarning`` naming it; ``strict=True`` raises
    :class:`fastq.translate.TranslationError` instead (``fastq/translate/tensorpack.py``)."""
    from fastq.translate.tensorpack import translate as _translate
    return _translate(augmentors, strict=strict)
