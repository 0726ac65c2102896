"""tensorpack drop-in: ``fastq.tensorpack.QueueInput`` where ``tensorpack.QueueInput`` stood.

    # before
    config = TrainConfig(model=M(), data=QueueInput(df), ...)
    # after: the DataFlow runs on fastq's producer threads, batches go into
    # fastq's slot ring and reach the graph without a copy
    config = TrainConfig(model=M(), data=fastq.tensorpack.QueueInput(df, size=8), ...)
    # or, natively decoded and augmented:
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...])
    config = TrainConfig(model=M(), data=fastq.tensorpack.QueueInput(pipe), ...)

tensorpack's QueueInput has a Python thread run the DataFlow and
``sess.run`` an enqueue op per datapoint into a ``tf.FIFOQueue`` (a copy in,
a copy out).  This one is a ``FeedfreeInput`` whose tensors come from a
v1 initializable iterator over :func:`fastq.tf.dataset` (repeated): the
dequeue is replaced by a ``tf.numpy_function`` that hands TensorFlow the slot
memory itself.  Works in tensorpack 0.11 on TensorFlow 2.x graph mode
(``launch_train_with_config`` disables eager execution itself).
"""
from fastq.pipeline import Pipeline
from fastq.sources import Iterable

__all__ = ["QueueInput"]


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
        queue : not supported
            A TF queue has nothing to do here; passing one is a TypeError.
        **pipeline_options
            Passed to fastq.Pipeline when wrapping a DataFlow (workers,
            stall_timeout, pin_memory, drop_remainder).

        The model's inputs (``ModelDesc.inputs()``) must match the pipeline's
        outputs in number, dtype and shape.  tensorpack's "epoch" is
        ``steps_per_epoch`` steps; the underlying dataset repeats, running
        one pipeline epoch after another.
        """

        def __init__(self, source, size=None, *, batch_size=None, queue=None, **pipeline_options):
            if queue is not None:
                raise TypeError("fastq.tensorpack.QueueInput has no TF queue: fastq's slot ring replaces it. "
                                "Pass size=<number of batch slots> instead of queue=")
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
                self.pipeline = Pipeline(Iterable(source), batch_size=1 if batch_size is None else batch_size,
                                         queue_size=size, **pipeline_options)
                self._owns = True
                self._dataflow = source
            self._iterator = None
            self._init_op = None

        # -- InputSource interface ---------------------------------------------
        def _size(self):
            p = self.pipeline
            if self._dataflow is not None:
                try:
                    n = len(self._dataflow)
                except (TypeError, NotImplementedError):
                    raise NotImplementedError("the DataFlow has no len(); set TrainConfig(steps_per_epoch)") from None
                if self._unbatch:
                    return n
            else:
                src = p.source
                try:
                    n = len(src.obj) if isinstance(src, Iterable) else len(src)
                except (TypeError, NotImplementedError):
                    raise NotImplementedError("the source has no len(); set TrainConfig(steps_per_epoch)") from None
            return n // p.batch_size if p.drop_remainder else -(-n // p.batch_size)

        def _setup(self, input_signature):
            from fastq import tf as fqtf
            self._spec = list(input_signature)
            out = fqtf.element_spec(self.pipeline)
            if self._unbatch:
                out = tuple(tf.TensorSpec(s.shape[1:], s.dtype) for s in out)
            if len(out) != len(self._spec):
                raise ValueError(f"the model has {len(self._spec)} inputs but the fastq pipeline gives "
                                 f"{len(out)} outputs ({out})")
            for want, got in zip(self._spec, out):
                if want.dtype != got.dtype:
                    raise ValueError(f"input '{want.name}' is {want.dtype.name} but the pipeline gives "
                                     f"{got.dtype.name}")
                if not tf.TensorShape(want.shape).is_compatible_with(got.shape):
                    raise ValueError(f"input '{want.name}' has shape {want.shape} but the pipeline gives "
                                     f"{got.shape}")
            with self.cached_name_scope():
                ds = fqtf.dataset(self.pipeline)
                if self._unbatch:
                    shapes = [s.shape for s in out]

                    def drop_lead(*xs):
                        # reshape shares the buffer: still no copy
                        return tuple(tf.reshape(x, sh) for x, sh in zip(xs, shapes))
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
            for t, spec in zip(ret, self._spec):
                t.set_shape(spec.shape)
            return ret

        def _get_callbacks(self):
            if not self._owns:
                return []
            return [CallbackFactory(after_train=lambda _: self.pipeline.close())]

    QueueInput.__module__ = __name__
    QueueInput.__qualname__ = "QueueInput"
    return QueueInput


_CLASS = None


def __getattr__(name):
    # tensorpack and TensorFlow are imported only when QueueInput is used.
    global _CLASS
    if name == "QueueInput":
        if _CLASS is None:
            _CLASS = _make_class()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
