"""tensorpack's fbresnet_augmentor, natively: a SimpleTrainer fed BGR uint8 batches by fastq.

    python examples/tensorpack_fbresnet.py [--images 64] [--size 224] [--steps 20]

tensorpack's ImageNet examples read BGR images with cv2.imread and run
``fbresnet_augmentor(isTrain=True)`` (GoogleNetRandomCropAndResize, ToFloat32,
RandomOrderAug(brightness, contrast, saturation, lighting), ToUint8, Flip) in Python processes.
Here ``fastq.tensorpack.fbresnet_augmentor(size)`` is the same chain as native ops, and the
pipeline is made with ``channels="BGR"`` (that is all the BGR convention needs); the model
normalises uint8 BGR input as tensorpack's ImageNetModel.image_preprocess does.

Before training, one sample is replayed through tensorpack's own augmentors (the crop box
and the colour draws from fastq's explain record) and the largest difference printed.
"""
import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    return ap.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()  # --help and bad arguments are answered before the frameworks load


import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorpack import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config  # noqa: E402
from tensorpack.dataflow import imgaug  # noqa: E402
from tensorpack.dataflow.imgaug.transform import CropTransform, FlipTransform, ResizeTransform  # noqa: E402

import fastq  # noqa: E402
from fastq._native import _image  # noqa: E402
from fastq import ops as fops  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.tensorpack import QueueInput, fbresnet_augmentor  # noqa: E402

tfv1 = tf.compat.v1
CLASSES = 4


def make_model(size):
    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec((None, size, size, 3), tf.uint8, "input"),
                    tf.TensorSpec((None,), tf.int64, "label")]

        def build_graph(self, image, label):
            # tensorpack ImageNetModel.image_preprocess with image_bgr=True
            mean = np.array([0.485, 0.456, 0.406][::-1], np.float32) * 255
            std = np.array([0.229, 0.224, 0.225][::-1], np.float32) * 255
            x = (tf.cast(image, tf.float32) - mean) / std
            for i, cout in enumerate((8, 16)):
                w = tfv1.get_variable(f"conv{i}", [3, 3, x.shape[-1], cout],
                                      initializer=tfv1.glorot_uniform_initializer())
                x = tf.nn.relu(tf.nn.conv2d(x, w, strides=2, padding="SAME"))
            x = tf.reduce_mean(x, axis=[1, 2])
            w = tfv1.get_variable("fc", [16, CLASSES], initializer=tfv1.glorot_uniform_initializer())
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label,
                                                                                  logits=tf.matmul(x, w)),
                                  name="cost")

        def optimizer(self):
            return tfv1.train.MomentumOptimizer(0.01, 0.9, use_nesterov=True)
    return Model()


def tensorpack_replay(path, size, rec_ops):
    """fbresnet_augmentor's steps with the drawn parameters, through tensorpack's classes."""
    crop, color, flip = rec_ops
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if crop["applied"]:
        x, y, w, h = crop["box"]
        img = ResizeTransform(h, w, size, size, cv2.INTER_CUBIC).apply_image(CropTransform(y, x, h, w).apply_image(bgr))
    else:
        img = imgaug.AugmentorList([imgaug.ResizeShortestEdge(size, cv2.INTER_CUBIC),
                                    imgaug.CenterCrop(size)]).augment(bgr)
    augs = {"brightness": (imgaug.BrightnessScale((0.6, 1.4)), color["brightness"]),
            "contrast": (imgaug.Contrast((0.6, 1.4), rgb=False), color["contrast"]),
            "saturation": (imgaug.Saturation(0.4, rgb=False), color["saturation"]),
            "lighting": (imgaug.Lighting(0.1, eigval=np.asarray(fops.TP_EIGVAL_BGR),
                                         eigvec=np.asarray(fops.TP_EIGVEC_BGR, np.float32)),
                         np.asarray(color["alpha"], np.float32))}
    img = imgaug.ToFloat32().augment(img)
    for name in color["order"]:
        aug, p = augs[name]
        img = aug._augment(img, p)
    img = imgaug.ToUint8().augment(img)
    return FlipTransform(size, size, horiz=True).apply_image(img) if flip["applied"] else img


def main(args):
    ops = fbresnet_augmentor(args.size, training=True)
    with tempfile.TemporaryDirectory(prefix="fastq_fbresnet_") as tmp:
        paths = testdata.make_jpeg_dataset(tmp, args.images, seed=0, min_side=96, max_side=320)
        labels = np.arange(len(paths)) % CLASSES

        spec = _image.ImageSpec(fops.compile_ops(ops, dtype="uint8", channels="BGR", dct_scaling=False))
        out, ex = spec.process_encoded(open(paths[0], "rb").read(), 0, 0, 0)
        d = np.abs(out.astype(int) - tensorpack_replay(paths[0], args.size, ex["ops"]).astype(int))
        print(f"parity: crop box, colour draws replayed through tensorpack: max diff {d.max()}, "
              f"mean {d.mean():.4f} (order {ex['ops'][1]['order']})")

        pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=args.batch_size, queue_size=4,
                              shuffle=True, ops=ops, channels="BGR", dtype="uint8")
        with pipe:
            tfv1.reset_default_graph()
            data = QueueInput(pipe)
            config = TrainConfig(model=make_model(args.size), data=data, max_epoch=1,
                                 steps_per_epoch=args.steps, callbacks=[], monitors=[])
            t0 = time.perf_counter()
            launch_train_with_config(config, SimpleTrainer())
            print(f"trained {args.steps} steps of {args.batch_size} BGR images in {time.perf_counter() - t0:.2f} s")
    print("OK")


if __name__ == "__main__":
    main(ARGS)
