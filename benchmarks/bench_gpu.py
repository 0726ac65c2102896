"""Host-to-device: fastq batches from pinned vs unpinned slot memory.

    python benchmarks/bench_gpu.py [--images 1000] [--copies 20] [--repeats 3]

1. Bandwidth: one reference batch (64x224x224x3 float32, 38.5 MB) held in a
   ring slot is viewed as a CPU tensor without a copy (DLPack) and copied to
   the GPU ``--copies`` times (a fresh view each time, so no cached mirror) (``tf.identity`` under ``tf.device('/GPU:0')``,
   ``tf.test.experimental.sync_devices()`` before the clock stops): GB/s for a
   pipeline with ``pin_memory="auto"`` (slot arena registered with
   cudaHostRegister when the CUDA runtime loads) and one with
   ``pin_memory=False``.  A plain numpy array (pageable) is the peer.
2. End to end: images/s of one epoch of the reference task
   (fastq.bench.tasks.REFERENCE: decode -> RandomResizedCrop 224 -> flip -> normalize) through
   ``fastq.tf.dataset(p, device="/gpu:0")`` (prefetch_to_device) into GPU
   memory, each batch reduced on the GPU, pinned vs unpinned, medians of
   ``--repeats`` epochs after a warm-up.

Without a GPU visible to TensorFlow it prints "no GPU: skipped" and exits 0.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # bench_tf (its data)
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)


from fastq.bench.tasks import REFERENCE  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=REFERENCE.batch)
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        print("no GPU: skipped (TensorFlow sees no GPU; tf.config.list_physical_devices('GPU') is empty)")
        return 0
    for g in gpus:
        tf.config.experimental.set_memory_growth(g, True)

    import numpy as np

    import fastq
    import fastq.tf as fqtf
    from bench_tf import dataset_paths

    paths, where = dataset_paths(args.images)
    ops = REFERENCE.fastq_ops()

    def make(pin):
        return fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=args.batch_size,
                              queue_size=6, pin_memory=pin, shuffle=True, seed=0, ops=ops)

    def h2d_gbps(array):
        # A fresh zero-copy CPU tensor per copy: an eager handle may cache a
        # device mirror of itself, which would skip the copy on reuse.
        nbytes = array.nbytes
        with tf.device("/GPU:0"):
            tf.identity(fqtf.from_dlpack(array))  # warm-up (allocator, streams)
        tf.test.experimental.sync_devices()
        rates = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            with tf.device("/GPU:0"):
                for _ in range(args.copies):
                    g = tf.identity(fqtf.from_dlpack(array))
            tf.test.experimental.sync_devices()
            rates.append(args.copies * nbytes / (time.perf_counter() - t) / 1e9)
            del g
        return statistics.median(rates)

    def aligned_pageable(shape):
        n = int(np.prod(shape)) * 4
        raw = np.empty(n + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        a = raw[off:off + n].view(np.float32).reshape(shape)
        a[...] = 0.5
        return a

    print(f"TensorFlow {tf.__version__}, GPU: {gpus[0].name}; {len(paths)} JPEGs from {where}")
    pipes = {"pinned (auto)": make("auto"), "unpinned": make(False)}
    print(f"1. host-to-device bandwidth of one {args.batch_size}x{REFERENCE.size}x{REFERENCE.size}x3 float32 batch:")
    for name, p in pipes.items():
        it = iter(p)
        images, _ = next(it)
        st = p.stats()
        print(f"  fastq slot, {name:14s}: {h2d_gbps(images):6.2f} GB/s   pinned={st['pinned']} ({st['pin_reason']})")
        del images
        it.close()
    pageable = aligned_pageable((args.batch_size, REFERENCE.size, REFERENCE.size, 3))
    print(f"  plain numpy array (pageable)  : {h2d_gbps(pageable):6.2f} GB/s")
    del pageable

    print("2. end to end, images/s into GPU memory (fastq.tf.dataset(p, device='/gpu:0')):")

    @tf.function
    def consume(ds):
        s = tf.constant(0.0)
        n = tf.constant(0)
        for images, _ in ds:
            s += tf.reduce_sum(images[:, :1, :1, :1])
            n += tf.shape(images)[0]
        return n, s

    for name, p in pipes.items():
        ds = fqtf.dataset(p, device="/gpu:0", device_buffer_size=2)
        rates = []
        for r in range(args.repeats + 1):
            t = time.perf_counter()
            n, _ = consume(ds)
            n = int(n)
            if r:
                rates.append(n / (time.perf_counter() - t))
        print(f"  {name:14s}: median {statistics.median(rates):7.1f} images/s  "
              f"(runs: {', '.join(f'{x:.0f}' for x in rates)}; pinned={p.stats()['pinned']})")
        p.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
