"""Keras's own loader vs fastq.keras.image_dataset_from_directory, same augmentation.

Keras: keras.utils.image_dataset_from_directory(224 px) + RandomFlip, RandomRotation(0.1),
RandomZoom(0.1) mapped over the batches in tf.data (AUTOTUNE) + prefetch.  fastq: the same
call on fastq.keras with augment=[the same layers] (fused into the native chain).  Over
generated JPEG photos (300-800 px) in 4 class folders; after one warm-up epoch each, the
median of 3 timed epochs, in one sitting; prints images/s, CPU ms per image (user + sys
of the process) and both ratios.

    python benchmarks/bench_migrate_keras.py            # 1024 images
    python benchmarks/bench_migrate_keras.py --quick    # 192 images, < 60 s
"""
import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time


def make_tree(root, n):
    from fastq.bench.testdata import make_jpeg_dataset
    flat = make_jpeg_dataset(os.path.join(root, "_flat"), n, seed=0)
    for i, p in enumerate(sorted(flat)):
        d = os.path.join(root, f"class{i % 4}")
        os.makedirs(d, exist_ok=True)
        shutil.move(p, os.path.join(d, os.path.basename(p)))
    shutil.rmtree(os.path.join(root, "_flat"))


def layers():
    import keras
    L = keras.layers
    return [L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1)]


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)  # all threads of this process
    return r.ru_utime + r.ru_stime


def epoch_time(ds):
    t, c = time.perf_counter(), _cpu()
    n = 0
    for x, y in ds:
        n += int(x.shape[0])
    return time.perf_counter() - t, n, _cpu() - c


def run(name, ds, epochs):
    """Median wall time of the epochs -> img/s, and the median CPU time (user + sys of the
    process) per image: on a shared machine the wall time follows the other tenants' load,
    the CPU time much less."""
    epoch_time(ds)  # warm-up
    times, cpus = [], []
    for _ in range(epochs):
        dt, n, cpu = epoch_time(ds)
        times.append(dt)
        cpus.append(cpu)
    med = statistics.median(times)
    cpu_ms = statistics.median(cpus) / n * 1e3
    print(f"{name:<8} {n} images/epoch, epochs {[round(t, 2) for t in times]} s, median {med:.2f} s = {n / med:.0f} img/s; "
          f"CPU {cpu_ms:.2f} ms/image", flush=True)
    return n / med, cpu_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="192 images (< 60 s)")
    ap.add_argument("--images", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=None, help="fastq workers (default: fastq's)")
    args = ap.parse_args()
    n = args.images or (192 if args.quick else 1024)
    import keras
    import tensorflow as tf

    import fastq.keras as fk
    root = tempfile.mkdtemp(prefix="fastq_bench_keras_")
    try:
        make_tree(root, n)
        kw = dict(image_size=(224, 224), batch_size=args.batch_size, seed=0, verbose=False)
        aug = keras.Sequential(layers())
        kds = keras.utils.image_dataset_from_directory(root, **kw)
        kds = kds.map(lambda x, y: (aug(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
        kds = kds.prefetch(tf.data.AUTOTUNE)
        fds = fk.image_dataset_from_directory(root, augment=layers(), workers=args.workers, **kw)
        print(fds.fastq_translation)
        print(f"{n} images, 224x224, batch {args.batch_size}, {os.cpu_count()} CPUs, TF {tf.__version__}, "
              f"Keras {keras.__version__}")
        k, kc = run("keras", kds, 3)
        f, fc = run("fastq", fds, 3)
        print(f"ratio fastq / keras: {f / k:.2f}x (wall); CPU per image keras / fastq: {kc / fc:.2f}x; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
