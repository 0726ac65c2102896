"""tensorpack training with fastq in place of tensorpack's QueueInput.

    python examples/train_tensorpack.py [--source native|dataflow|both] [--images 64]

The classic tensorpack setup is

    df = <DataFlow reading + augmenting images in Python>
    df = BatchData(df, 32)
    config = TrainConfig(model=Model(), data=QueueInput(df), ...)

Here the same TrainConfig gets fastq.tensorpack.QueueInput instead:

* ``--source dataflow``: the same DataFlow, now run by fastq's producer threads
  into a ring of ``size`` batch slots (``QueueInput(df, size=8)``);
* ``--source native``: no Python per image at all: a fastq.Pipeline decodes
  and augments the JPEGs on native threads (``QueueInput(pipeline)``).

Either way the graph's input tensors are the ring slots themselves (no TF queue,
no copy).  JPEGs are built from bundled photos into a temporary directory.
"""
import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=["native", "dataflow", "both"], default="native")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    return ap.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()  # --help and bad arguments are answered before the frameworks load


import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorpack import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config  # noqa: E402
from tensorpack.dataflow import BatchData, DataFlow  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as fops  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.tensorpack import QueueInput  # noqa: E402

tfv1 = tf.compat.v1
SIZE, CLASSES = 48, 4
MEAN = np.array(fops.IMAGENET_MEAN, np.float32) * 255
STD = np.array(fops.IMAGENET_STD, np.float32) * 255


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec((None, SIZE, SIZE, 3), tf.float32, "image"),
                tf.TensorSpec((None,), tf.int64, "label")]

    def build_graph(self, image, label):
        def conv(x, name, cin, cout):
            w = tfv1.get_variable(name, [3, 3, cin, cout], initializer=tfv1.glorot_uniform_initializer())
            return tf.nn.relu(tf.nn.conv2d(x, w, strides=2, padding="SAME"))
        x = conv(image, "conv1", 3, 8)
        x = conv(x, "conv2", 8, 16)
        x = tf.reduce_mean(x, axis=[1, 2])
        w = tfv1.get_variable("fc", [16, CLASSES], initializer=tfv1.glorot_uniform_initializer())
        logits = tf.matmul(x, w)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits),
                              name="cost")

    def optimizer(self):
        return tfv1.train.MomentumOptimizer(0.01, 0.9)


class JpegFlow(DataFlow):
    """The Python way: cv2 decode + random crop + flip + normalize per image."""

    def __init__(self, paths, labels):
        self.paths, self.labels = paths, labels

    def __len__(self):
        return len(self.paths)

    def reset_state(self):
        super().reset_state()
        self.rng = np.random.default_rng(0)

    def __iter__(self):
        import cv2
        for i in self.rng.permutation(len(self.paths)):
            img = cv2.imread(self.paths[i])[:, :, ::-1]
            h, w = img.shape[:2]
            s = int(self.rng.integers(min(h, w) // 2, min(h, w) + 1))
            y, x = int(self.rng.integers(0, h - s + 1)), int(self.rng.integers(0, w - s + 1))
            img = cv2.resize(img[y:y + s, x:x + s], (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
            if self.rng.random() < 0.5:
                img = img[:, ::-1]
            yield [(img.astype(np.float32) - MEAN) / STD, np.int64(self.labels[i])]


def train(data, epochs, name):
    tfv1.reset_default_graph()
    config = TrainConfig(model=Model(), data=data, max_epoch=epochs, callbacks=[], monitors=[])
    t0 = time.perf_counter()
    launch_train_with_config(config, SimpleTrainer())
    dt = time.perf_counter() - t0
    st = data.pipeline.stats()
    print(f"[{name}] {epochs} epochs x {config.steps_per_epoch} steps in {dt:.2f} s; "
          f"batches from the ring: {st['batches_delivered']}")


def main(args):
    with tempfile.TemporaryDirectory(prefix="fastq_tp_") as tmp:
        paths = testdata.make_jpeg_dataset(tmp, args.images, seed=0, min_side=96, max_side=200)
        labels = np.arange(len(paths)) % CLASSES
        if args.source in ("dataflow", "both"):
            df = BatchData(JpegFlow(paths, labels), args.batch_size)       # datapoints are batches
            train(QueueInput(df, size=8), args.epochs, "dataflow")         # was: QueueInput(df)
        if args.source in ("native", "both"):
            pipe = fastq.Pipeline(
                fastq.sources.Files(paths, labels), batch_size=args.batch_size, queue_size=8, shuffle=True,
                ops=[fops.RandomResizedCrop(SIZE), fops.HorizontalFlip(),
                     fops.Normalize(fops.IMAGENET_MEAN, fops.IMAGENET_STD)])
            with pipe:
                train(QueueInput(pipe), args.epochs, "native")
    print("OK")


if __name__ == "__main__":
    main(ARGS)
