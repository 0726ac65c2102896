"""Trains tiny tensorpack models with fastq.tensorpack.QueueInput (run in a
subprocess by test_tensorpack.py: tensorpack's launcher disables eager
execution for the whole process).  Prints one JSON line per scenario."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorpack import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config  # noqa: E402
from tensorpack.dataflow import BatchData, DataFromList  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
from fastq.tensorpack import QueueInput  # noqa: E402
from helpers.native_helpers import slot_addresses  # noqa: E402

tfv1 = tf.compat.v1
ADDRS = []
ROWS = []
LABELS = []
SLOTS = set()      # slot block addresses of the pipeline being trained on
CURRENT = [None]   # that pipeline (its ring is freed at close, so addresses are taken while it runs)


def _record(a, y):
    ADDRS.append(int(a.ctypes.data))
    ROWS.append(int(a.shape[0]))
    LABELS.append((str(y.dtype), [int(v) for v in y]))
    if CURRENT[0] is not None and CURRENT[0]._state.ring is not None:
        SLOTS.update(slot_addresses(CURRENT[0]))
    return np.int64(0)


class Model(ModelDesc):
    def __init__(self, shape, dtype=tf.float32, ydtype=tf.int64):
        self.shape, self.dtype, self.ydtype = shape, dtype, ydtype

    def inputs(self):
        return [tf.TensorSpec((None,) + self.shape, self.dtype, "x"), tf.TensorSpec((None,), self.ydtype, "y")]

    def build_graph(self, x, y):
        # records the address of the input tensor's buffer (and the rows, labels) each step
        probe = tf.numpy_function(_record, [x, y], tf.int64)
        feats = tf.reshape(tf.cast(x, tf.float32), (tf.shape(x)[0], -1))
        w = tfv1.get_variable("w", [int(np.prod(self.shape)), 3], initializer=tfv1.zeros_initializer())
        logits = tf.matmul(feats, w)
        with tf.control_dependencies([probe]):
            cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(y, tf.int64) % 3,
                                                                                  logits=logits),
                                  name="cost")
        return cost

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)




def train(model, data, epochs=2, steps=None):
    tfv1.reset_default_graph()
    ADDRS.clear()
    ROWS.clear()
    LABELS.clear()
    SLOTS.clear()
    CURRENT[0] = getattr(data, "pipeline", None)
    cfg = TrainConfig(model=model, data=data, max_epoch=epochs, steps_per_epoch=steps, callbacks=[], monitors=[])
    launch_train_with_config(cfg, SimpleTrainer())


def report(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def main(img_dir):
    from fastq.bench import testdata
    paths = testdata.make_jpeg_dataset(img_dir, 16, seed=2, min_side=64, max_side=96)

    # 1. a native fastq Pipeline in place of QueueInput(df)
    p = fastq.Pipeline(fastq.sources.Files(paths, list(range(16))), batch_size=4, queue_size=3, workers=1,
                       ops=[fastq.ops.RandomResizedCrop(24)])
    qi = QueueInput(p)
    train(Model((24, 24, 3)), qi, epochs=2)
    report(name="pipeline", size=qi.size(), steps=len(ADDRS), epoch=p.epoch,
           aliased=set(ADDRS) <= SLOTS, n_addr=len(set(ADDRS)),
           delivered=p.stats()["batches_delivered"])
    p.close()

    # 2. a batched DataFlow, like tensorpack's QueueInput(df)
    rng = np.random.RandomState(0)
    df = BatchData(DataFromList([[rng.rand(5, 2).astype("float32"), np.int64(i)] for i in range(40)],
                                shuffle=False), 8)
    qi = QueueInput(df, size=4)
    train(Model((5, 2)), qi, epochs=3)
    report(name="dataflow_batched", size=qi.size(), steps=len(ADDRS), queue_size=qi.pipeline.queue_size,
           aliased=set(ADDRS) <= SLOTS, closed=qi.pipeline.closed)

    # 3. an unbatched DataFlow, batched by fastq
    df = DataFromList([[np.full((3, 3), i, np.uint8), np.int64(i)] for i in range(30)], shuffle=False)
    qi = QueueInput(df, size=3, batch_size=6)
    train(Model((3, 3), tf.uint8), qi, epochs=2)
    report(name="dataflow_unbatched", size=qi.size(), steps=len(ADDRS),
           aliased=set(ADDRS) <= SLOTS)

    # 4. misuse
    try:
        QueueInput(df, queue=object())
        report(name="queue_arg", raised=None)
    except TypeError as e:
        report(name="queue_arg", raised=str(e))
    tfv1.reset_default_graph()
    bad = QueueInput(fastq.Pipeline(fastq.sources.Files(paths, list(range(16))), batch_size=4, workers=1,
                                    ops=[fastq.ops.RandomResizedCrop(24)]))
    try:
        train(Model((32, 32, 3)), bad, epochs=1)
        report(name="shape_mismatch", raised=None)
    except ValueError as e:
        report(name="shape_mismatch", raised=str(e))

    # 5. BatchData(..., remainder=True): a smaller last batch reaches the model with its own size
    # (rows of 64 bytes: TF's leading-dimension slice aliases when the slice's byte size is a
    # multiple of 64, so the partial batch is a view of its slot too)
    df = BatchData(DataFromList([[np.full((4, 4), i, np.float32), np.int64(i)] for i in range(42)],
                                shuffle=False), 8, remainder=True)
    qi = QueueInput(df, size=3)
    train(Model((4, 4)), qi, epochs=2)
    report(name="remainder", size=qi.size(), rows=ROWS, labels=[lab for _, lab in LABELS],
           aliased=set(ADDRS) <= SLOTS)

    # 6. int64 labels into a model that declares tf.int32 labels: cast in the graph
    p = fastq.Pipeline(fastq.sources.Files(paths, list(range(16))), batch_size=4, workers=1,
                       ops=[fastq.ops.RandomResizedCrop(24)])
    train(Model((24, 24, 3), ydtype=tf.int32), QueueInput(p), epochs=1)
    report(name="label_cast", steps=len(ADDRS), dtypes=sorted({d for d, _ in LABELS}),
           labels=sorted(v for _, lab in LABELS for v in lab), aliased=set(ADDRS) <= SLOTS)
    p.close()

    # 7. label_dtype="int32": the pipeline itself gives int32 labels (no cast)
    p = fastq.Pipeline(fastq.sources.Files(paths, list(range(16))), batch_size=4, workers=1, label_dtype="int32",
                       ops=[fastq.ops.RandomResizedCrop(24)])
    qi = QueueInput(p)
    train(Model((24, 24, 3), ydtype=tf.int32), qi, epochs=1)
    report(name="label_dtype", steps=len(ADDRS), dtypes=sorted({d for d, _ in LABELS}), casts=qi._casts)
    p.close()

    # 8. a float cast of the images is refused with the reason
    tfv1.reset_default_graph()
    p = fastq.Pipeline(fastq.sources.Files(paths, list(range(16))), batch_size=4, workers=1,
                       ops=[fastq.ops.RandomResizedCrop(24)])
    try:
        train(Model((24, 24, 3), dtype=tf.float16), QueueInput(p), epochs=1)
        report(name="image_cast", raised=None)
    except ValueError as e:
        report(name="image_cast", raised=str(e))
    p.close()


if __name__ == "__main__":
    main(sys.argv[1])
