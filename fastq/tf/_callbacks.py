"""Keras callbacks over a Pipeline: :func:`stage_stats_callback` (where the input
pipeline's time goes, to TensorBoard) and ``EpochSync`` (pipeline epochs in step with
Keras epochs; a class made at first use, so that keras is imported only then)."""
from fastq.pipeline import Pipeline
from fastq.tf._generator_feed import flush_released


def _tf():
    import tensorflow as tf
    return tf


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

    EpochSync.__module__ = "fastq.tf"  # public there
    EpochSync.__qualname__ = "EpochSync"
    return EpochSync
