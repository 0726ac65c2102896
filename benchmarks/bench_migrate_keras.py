"""Keras's own loader vs fastq.keras.image_dataset_from_directory, same augmentation.

Keras: keras.utils.image_dataset_from_directory(224 px) + RandomFlip, RandomRotation(0.1),
RandomZoom(0.1) mapped over the batches in tf.data (AUTOTUNE) + prefetch.  fastq: the same
call on fastq.keras with augment=[the same layers] (fused into the native chain).  A thin
wrapper over ``fastq.bench.migrate`` (the code behind ``fastq bench --task migrate``, whose
row "keras flip+rotation+zoom" this is; it runs in a child process of its own).  Over
generated JPEG photos (300-800 px) in class folders; after one warm-up epoch each, the
median of 3 timed epochs, alternating, in one sitting; prints images/s, CPU ms per image
(user + sys of the process) and both ratios.

    python benchmarks/bench_migrate_keras.py            # 1024 images
    python benchmarks/bench_migrate_keras.py --quick    # 192 images, < 60 s
"""
import argparse
import shutil
import sys
import tempfile

ROW = "keras flip+rotation+zoom"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="192 images (< 60 s)")
    ap.add_argument("--images", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=None, help="fastq workers (default: fastq's)")
    args = ap.parse_args(argv)
    n = args.images or (192 if args.quick else 1024)

    import _checkout  # noqa: F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)
    from fastq.bench import migrate
    root = tempfile.mkdtemp(prefix="fastq_bench_keras_")
    try:
        return migrate.main(images=n, rounds=3, workers=args.workers, rows=[ROW], data_dir=root,
                            batch_size=args.batch_size, progress=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(0 if main()["rows"] else 1)
