"""Feeder overhead: images/s of iterating a fastq Pipeline directly vs iterating
fastq.tf.dataset(pipeline), in one run, on the reference task.

Reference task (fastq.bench.tasks.REFERENCE): JPEG files (300-800 px, from
fastq.bench.testdata) -> decode ->
RandomResizedCrop 224 (bilinear) -> random horizontal flip -> Normalize
(ImageNet mean/std) float32 NHWC, batch 64, native workers = usable cores.

Method: one warm-up epoch of each, then `--repeats` epochs of each, alternating
(direct, tf, direct, tf, ...) so that load from other processes hits both
alike.  The consumer does nothing but drop the batch (direct: the numpy arrays;
tf: the eager tensors of an eager ``for`` loop over the dataset), so the
difference is the cost of the TensorFlow handoff.  With ``--graph`` a third
variant consumes the dataset inside a ``tf.function`` (as Keras does).
Prints medians and the ratio tf/direct (target >= 0.95).

    python benchmarks/bench_tf.py [--images 2000] [--repeats 5] [--workers N] [--graph]

Data: the first N files of bench_data/jpeg_<M>_seed0 (M >= N) if present, else
built once into $TMPDIR/fastq_bench_jpegs_<N> (deterministic, seed 0).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)


def dataset_paths(n):
    bd = os.path.join(ROOT, "bench_data")
    if os.path.isdir(bd):
        for name in sorted(os.listdir(bd)):
            if name.startswith("jpeg_") and name.endswith("_seed0"):
                d = os.path.join(bd, name)
                files = sorted(f for f in os.listdir(d) if f.endswith(".jpg"))
                if len(files) >= n:
                    return [os.path.join(d, f) for f in files[:n]], d
    from fastq.bench.testdata import cached_jpeg_dataset
    paths = cached_jpeg_dataset(n)
    return paths, os.path.dirname(paths[0])


from fastq.bench.tasks import REFERENCE  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=REFERENCE.batch)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--queue-size", type=int, default=4)
    ap.add_argument("--graph", action="store_true", help="also time a tf.function consumer")
    args = ap.parse_args()

    import tensorflow as tf

    import fastq
    import fastq.tf as fqtf

    paths, where = dataset_paths(args.images)
    labels = list(range(len(paths)))
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=args.batch_size,
                          queue_size=args.queue_size, workers=args.workers, shuffle=True, seed=0,
                          ops=REFERENCE.fastq_ops())
    ds = fqtf.dataset(pipe)

    def direct():
        n = 0
        for images, _ in pipe:
            n += images.shape[0]
        return n

    def via_tf():
        n = 0
        for images, _ in ds:
            n += int(images.shape[0])
        return n

    @tf.function
    def graph_loop(ds):
        n = tf.constant(0)
        for images, _ in ds:
            n += tf.shape(images)[0]
        return n

    def via_graph():
        return int(graph_loop(ds))

    variants = [("direct", direct), ("tf.data eager", via_tf)]
    if args.graph:
        variants.append(("tf.data tf.function", via_graph))
    rates = {name: [] for name, _ in variants}
    expected = (len(paths) // args.batch_size) * args.batch_size
    for r in range(args.repeats + 1):
        for name, fn in variants:
            t = time.perf_counter()
            n = fn()
            dt = time.perf_counter() - t
            if n != expected:
                raise SystemExit(f"{name}: got {n} images, expected {expected}")
            if r > 0:  # r == 0 is the warm-up epoch
                rates[name].append(n / dt)
    st = pipe.stats()
    print(f"fastq {fastq.__version__}, TensorFlow {tf.__version__}; {len(paths)} JPEGs from {where}")
    print(f"task: decode -> RandomResizedCrop 224 -> flip -> normalize float32, batch {args.batch_size}, "
          f"workers {st['workers']}, queue_size {args.queue_size}, {os.cpu_count()} CPUs visible; "
          f"{args.repeats} epochs each after 1 warm-up, alternating")
    base = statistics.median(rates["direct"])
    for name, _ in variants:
        med = statistics.median(rates[name])
        runs = ", ".join(f"{x:.0f}" for x in rates[name])
        print(f"  {name:20s} median {med:7.1f} images/s  ratio {med / base:5.3f}   (runs: {runs})")
    ratio = statistics.median(rates["tf.data eager"]) / base
    print(f"tf.data / direct = {ratio:.3f} ({'meets' if ratio >= 0.95 else 'BELOW'} the 0.95 target)")
    pipe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
