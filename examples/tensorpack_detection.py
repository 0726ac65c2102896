"""tensorpack SimpleTrainer on detection batches (image, gt_boxes, gt_labels, num_boxes) from fastq.

    python examples/tensorpack_detection.py [--images 48] [--epochs 2] [--size 96]

tensorpack's Faster R-CNN example reads datapoints of ``image`` (H x W x 3, BGR),
``gt_boxes`` (N x 4, x0 y0 x1 y1 pixels) and ``gt_labels`` (N,), and resizes the
shortest edge in Python (``CustomResize``) before padding. Here a fastq.Pipeline does
that natively: ResizeShortestEdge + flip + Pad to a fixed size, in BGR. The boxes are
moved by the same draws as the image. Each batch reaches the graph through
``fastq.tensorpack.QueueInput``, padded to ``max_boxes`` boxes with a count. The data
is a small generated set of photos with filled rectangles (the objects, class =
colour). The model is deliberately tiny: it regresses the first object's box and
classifies it, masked by ``num_boxes``. It shows the input layout, not a detector.
"""
import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=48)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--batch-size", type=int, default=8)
    return ap.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()  # --help and bad arguments are answered before the frameworks load


import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorpack import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as fops  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.targets import Targets  # noqa: E402
from fastq.tensorpack import QueueInput  # noqa: E402

tfv1 = tf.compat.v1
CLASSES, MAX_BOXES = 3, 4
COLOURS = [(0, 0, 255), (0, 255, 0), (255, 0, 0)]  # BGR, one per class


def make_dataset(root, n, seed=0):
    """JPEGs of photos with 1-3 filled rectangles each; returns paths, boxes, classes."""
    rng = np.random.default_rng(seed)
    photos = [p for p in (cv2.imread(f, cv2.IMREAD_COLOR) for f in testdata.source_photos()) if p is not None]
    paths, boxes, classes = [], [], []
    for i in range(n):
        h, w = int(rng.integers(90, 180)), int(rng.integers(90, 180))
        img = cv2.resize(photos[i % len(photos)], (w, h))
        bs, cs = [], []
        for _ in range(int(rng.integers(1, 4))):
            c = int(rng.integers(0, CLASSES))
            bw, bh = int(rng.integers(12, w // 2)), int(rng.integers(12, h // 2))
            x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
            cv2.rectangle(img, (x0, y0), (x0 + bw - 1, y0 + bh - 1), COLOURS[c], -1)
            bs.append((x0, y0, x0 + bw, y0 + bh))
            cs.append(c + 1)  # 0 = background, as tensorpack's detectors count
        path = os.path.join(root, f"{i:04d}.jpg")
        cv2.imwrite(path, img)
        paths.append(path)
        boxes.append(np.float32(bs))
        classes.append(np.int32(cs))
    return paths, boxes, classes


class Model(ModelDesc):
    def __init__(self, size):
        self.size = size

    def inputs(self):
        s = self.size
        return [tf.TensorSpec((None, s, s, 3), tf.float32, "image"),
                tf.TensorSpec((None, MAX_BOXES, 4), tf.float32, "gt_boxes"),
                tf.TensorSpec((None, MAX_BOXES), tf.int32, "gt_labels"),
                tf.TensorSpec((None,), tf.int32, "num_boxes")]

    def build_graph(self, image, gt_boxes, gt_labels, num_boxes):
        def conv(x, name, cin, cout):
            w = tfv1.get_variable(name, [3, 3, cin, cout], initializer=tfv1.glorot_uniform_initializer())
            return tf.nn.relu(tf.nn.conv2d(x, w, strides=2, padding="SAME"))
        x = conv(image, "conv1", 3, 8)
        x = conv(x, "conv2", 8, 16)
        x = tf.reduce_mean(x, axis=[1, 2])
        w = tfv1.get_variable("head", [16, 4 + CLASSES + 1], initializer=tfv1.glorot_uniform_initializer())
        out = tf.matmul(x, w)
        has = tf.cast(num_boxes > 0, tf.float32)  # images whose every box was cropped away have none
        box_loss = tf.reduce_sum(tf.abs(out[:, :4] - gt_boxes[:, 0] / self.size), axis=1)
        cls_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(gt_labels[:, 0], 0),
                                                                  logits=out[:, 4:])
        return tf.identity(tf.reduce_sum((box_loss + cls_loss) * has) / tf.maximum(tf.reduce_sum(has), 1.0),
                           name="cost")

    def optimizer(self):
        return tfv1.train.MomentumOptimizer(0.01, 0.9)


def main(args):
    with tempfile.TemporaryDirectory(prefix="fastq_tpdet_") as tmp:
        paths, boxes, classes = make_dataset(tmp, args.images)
        targets = Targets(boxes, classes, max_boxes=MAX_BOXES, min_area=4.0, image_info=False)
        s = args.size
        ops = [fops.ResizeShortestEdge(s * 2 // 3, s), fops.HorizontalFlip(), fops.Pad(size=(s, s)),
               fops.Normalize(fops.IMAGENET_MEAN, fops.IMAGENET_STD)]
        pipe = fastq.Pipeline(fastq.sources.Files(paths, targets=targets), batch_size=args.batch_size,
                              queue_size=8, shuffle=True, seed=0, ops=ops, channels="BGR")
        with pipe:
            images, gt_boxes, gt_labels, num = next(iter(pipe))
            print(f"batch: image {images.shape} {images.dtype}, gt_boxes {gt_boxes.shape}, gt_labels "
                  f"{gt_labels.shape}, num_boxes {num.tolist()}")
            del images, gt_boxes, gt_labels, num
            tfv1.reset_default_graph()
            data = QueueInput(pipe)
            config = TrainConfig(model=Model(s), data=data, max_epoch=args.epochs, callbacks=[], monitors=[])
            t0 = time.perf_counter()
            launch_train_with_config(config, SimpleTrainer())
            print(f"trained {args.epochs} epochs x {config.steps_per_epoch} steps in {time.perf_counter() - t0:.2f} s")
    print("OK")


if __name__ == "__main__":
    main(ARGS)
