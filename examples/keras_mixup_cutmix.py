"""Keras model.fit with RandAugment + batch-level MixUp / CutMix done by fastq.

    python examples/keras_mixup_cutmix.py [--images 96] [--epochs 2] [--size 64]

Builds a small JPEG dataset from the photos bundled with scikit-image /
scikit-learn in a temporary directory; fastq's native workers decode ->
RandomResizedCrop -> flip -> RandAugment -> normalize each image, then each batch
is mixed natively (MixUp or CutMix, timm's arguments) when it is taken from the
ring: the labels arrive as float32 soft labels (batch, num_classes), which Keras
trains on with CategoricalCrossentropy.  Every draw is a function of (seed, epoch,
batch index), so a run is reproducible for any number of workers.
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
    ap.add_argument("--mode", choices=("batch", "elem"), default="batch")
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
    mix = fastq.MixUpCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, switch_prob=0.5, prob=1.0, label_smoothing=0.1,
                            num_classes=args.classes, mode=args.mode)
    with tempfile.TemporaryDirectory(prefix="fastq_mix_") as tmp:
        paths = testdata.make_jpeg_dataset(tmp, args.images, seed=0, min_side=96, max_side=200)
        labels = np.arange(len(paths)) % args.classes
        pipe = fastq.Pipeline(
            fastq.sources.Files(paths, labels), batch_size=args.batch_size, queue_size=4, shuffle=True, seed=0,
            ops=[fops.RandomResizedCrop(args.size), fops.HorizontalFlip(), fops.RandAugment(num_ops=2, magnitude=9),
                 fops.Normalize(fops.IMAGENET_MEAN, fops.IMAGENET_STD)],
            mix=mix)
        with pipe:
            ds = fastq.tf.dataset(pipe)  # ((B, S, S, 3) float32, (B, classes) float32)
            print("element_spec:", ds.element_spec)
            ex = pipe.explain_batch(0, 0)
            print("epoch 0, batch 0:", {k: ex[k] for k in ("mode", "lam", "box")} if args.mode == "batch"
                  else [d["mode"] for d in ex["draws"]])
            x, y = next(iter(ds))
            print(f"soft labels: {tuple(y.shape)} {y.dtype.name}; row sums {np.round(y.numpy().sum(1), 5)}")
            del x, y
            model = tf.keras.Sequential([
                tf.keras.Input((args.size, args.size, 3)),
                tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
                tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                tf.keras.layers.GlobalAveragePooling2D(),
                tf.keras.layers.Dense(args.classes),
            ])
            model.compile(optimizer="adam", metrics=["categorical_accuracy"],
                          loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))
            t0 = time.perf_counter()
            hist = model.fit(ds, epochs=args.epochs, verbose=2, shuffle=False)  # fastq shuffles
            dt = time.perf_counter() - t0
            print(f"trained {args.epochs} epochs in {dt:.2f} s; final loss {hist.history['loss'][-1]:.4f}")
            fastq.tf.flush_released()
            print(f"slots still leased after training: {pipe.stats()['slots_leased']}")
            assert np.isfinite(hist.history["loss"]).all()
    print("OK")


if __name__ == "__main__":
    main(ARGS)
