"""Keras model.fit on a segmentation dataset (image / label-map pairs) fed by fastq.

    python examples/keras_segmentation.py [--images 48] [--epochs 2] [--size 64]

Writes a small dataset in the plain ``images/`` + ``masks/`` layout into a temporary
directory. Each image is a bundled photo with a few filled shapes drawn on it, and
its label map holds each shape's class (0 = background). fastq.annotations pairs the
files, and fastq.targets moves each label map with its image through the same draws
(RandomResizedCrop and flip; nearest neighbour, 255 = ignore outside the image). A
tiny fully convolutional net is then trained with a loss that ignores label 255.
"""
import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=48)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--classes", type=int, default=4)
    return ap.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()  # --help and bad arguments are answered before the frameworks load


import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as fops  # noqa: E402
import fastq.tf  # noqa: E402
from fastq.annotations.segmentation import segmentation_pairs  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.targets import Targets  # noqa: E402

IGNORE = 255


def make_dataset(root, n, classes, seed=0):
    """n JPEG images with `classes - 1` kinds of filled shapes, and their PNG label maps."""
    rng = np.random.default_rng(seed)
    photos = [p for p in (cv2.imread(f, cv2.IMREAD_COLOR) for f in testdata.source_photos()) if p is not None]
    os.makedirs(os.path.join(root, "images"))
    os.makedirs(os.path.join(root, "masks"))
    for i in range(n):
        h, w = int(rng.integers(80, 160)), int(rng.integers(80, 160))
        img = cv2.resize(photos[i % len(photos)], (w, h))
        label = np.zeros((h, w), np.uint8)
        for _ in range(int(rng.integers(1, 4))):
            c = int(rng.integers(1, classes))
            colour = tuple(int(v) for v in (60 * c % 256, 255 - 70 * c % 256, 40 * c % 256))
            cx, cy, r = int(rng.integers(0, w)), int(rng.integers(0, h)), int(rng.integers(8, 30))
            if c % 2:
                cv2.circle(img, (cx, cy), r, colour, -1)
                cv2.circle(label, (cx, cy), r, c, -1)
            else:
                cv2.rectangle(img, (cx - r, cy - r), (cx + r, cy + r), colour, -1)
                cv2.rectangle(label, (cx - r, cy - r), (cx + r, cy + r), c, -1)
        cv2.imwrite(os.path.join(root, "images", f"{i:04d}.jpg"), img)
        cv2.imwrite(os.path.join(root, "masks", f"{i:04d}.png"), label)


def masked_loss(y_true, y_pred):
    """Sparse cross-entropy over the pixels whose label is not IGNORE."""
    y = tf.cast(y_true, tf.int32)
    valid = tf.cast(tf.not_equal(y, IGNORE), tf.float32)
    per_pixel = tf.keras.losses.sparse_categorical_crossentropy(tf.where(y == IGNORE, 0, y), y_pred,
                                                                from_logits=True)
    return tf.reduce_sum(per_pixel * valid) / tf.maximum(tf.reduce_sum(valid), 1.0)


def main(args):
    with tempfile.TemporaryDirectory(prefix="fastq_seg_") as tmp:
        make_dataset(tmp, args.images, args.classes)
        ann = segmentation_pairs(tmp)
        targets = Targets.from_annotations(ann, mask_fill=IGNORE, image_info=False)
        src = fastq.sources.Files(ann.keys, targets=targets)
        ops = [fops.RandomResizedCrop(args.size, scale=(0.3, 1.0)), fops.HorizontalFlip(),
               fops.Normalize(fops.IMAGENET_MEAN, fops.IMAGENET_STD)]
        with fastq.Pipeline(src, batch_size=args.batch_size, shuffle=True, seed=0, ops=ops) as pipe:
            ds = fastq.tf.dataset(pipe)  # ((B, S, S, 3) float32, (B, S, S) uint8)
            print("element_spec:", ds.element_spec)
            inp = tf.keras.Input((args.size, args.size, 3))
            x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
            x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(x)
            out = tf.keras.layers.Conv2D(args.classes, 1)(x)
            model = tf.keras.Model(inp, out)
            model.compile(optimizer="adam", loss=masked_loss)
            hist = model.fit(ds, epochs=args.epochs, verbose=2)
            losses = hist.history["loss"]
            print(f"trained {args.epochs} epochs on {len(ann)} image / label-map pairs; loss {losses[0]:.4f} -> "
                  f"{losses[-1]:.4f}")
            assert np.isfinite(losses).all()
            fastq.tf.flush_released()
    print("OK")


if __name__ == "__main__":
    main(ARGS)
