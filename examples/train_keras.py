"""Keras model.fit on images decoded and augmented by fastq, fed zero-copy.

    python examples/train_keras.py [--images 96] [--epochs 2] [--size 64]

Builds ImageNet-like JPEGs from the photos bundled with scikit-image /
scikit-learn into a temporary directory, then trains a small CNN on them:
fastq's native workers decode -> RandomResizedCrop -> flip -> normalize into
ring slots, and fastq.tf.dataset hands the slots to Keras without a copy.
"""
import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--classes", type=int, default=4)
    return ap.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()  # --help and bad arguments are answered before the frameworks load


import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as fops  # noqa: E402
import fastq.tf  # noqa: E402
from fastq.bench import testdata  # noqa: E402


def main(args):
    with tempfile.TemporaryDirectory(prefix="fastq_keras_") as tmp:
        paths = testdata.make_jpeg_dataset(tmp, args.images, seed=0, min_side=96, max_side=200)
        labels = np.arange(len(paths)) % args.classes
        pipe = fastq.Pipeline(
            fastq.sources.Files(paths, labels), batch_size=args.batch_size, queue_size=4, shuffle=True, seed=0,
            ops=[fops.RandomResizedCrop(args.size), fops.HorizontalFlip(),
                 fops.Normalize(fops.IMAGENET_MEAN, fops.IMAGENET_STD)])
        with pipe:
            ds = fastq.tf.dataset(pipe)          # ((B, S, S, 3) float32, (B,) int64); one epoch per Keras epoch
            print("element_spec:", ds.element_spec)
            model = tf.keras.Sequential([
                tf.keras.Input((args.size, args.size, 3)),
                tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
                tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                tf.keras.layers.GlobalAveragePooling2D(),
                tf.keras.layers.Dense(args.classes),
            ])
            model.compile(optimizer="adam", metrics=["accuracy"],
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            t0 = time.perf_counter()
            hist = model.fit(ds, epochs=args.epochs, verbose=2, shuffle=False)  # fastq shuffles
            dt = time.perf_counter() - t0
            st = pipe.stats()
            print(f"trained {args.epochs} epochs, {st['samples_delivered']} images in {dt:.2f} s; "
                  f"final loss {hist.history['loss'][-1]:.4f}")
            print(f"pipeline: batches={st['batches_delivered']} pinned={st['pinned']} ({st['pin_reason']})")
            fastq.tf.flush_released()
            print(f"slots still leased after training: {pipe.stats()['slots_leased']}")
            assert np.isfinite(hist.history["loss"]).all()
    print("OK")


if __name__ == "__main__":
    main(ARGS)
