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
difference is the cost of the TensorFlow handoff.  Two feeds are timed:
``native`` (the FastqDataset op: batches taken from the ring in C++) and
``from_generator`` (the Python callback per batch it replaces; what
``fastq.tf.dataset`` falls back to without a compiler).  With ``--graph`` each
is also consumed inside a ``tf.function`` (as Keras does).  With ``--fit`` one
Keras ``model.fit`` epoch of a small CNN is timed per feed and per round, and
over the same task in tf.data's own ops (fastq.bench.peers.tfdata_load,
AUTOTUNE) as the peer.  Prints medians and ratios (targets: native /
direct >= 0.98; fit: native >= from_generator); the ratios are also given
paired (the median of each round's own ratio, which cancels load that drifts
between rounds on a shared machine), with the process CPU time per image.

With ``--handoff`` the handoff alone is timed first: per batch (tiny uint8 batches)
and per epoch (epochs of two batches), each feed eager and in a tf.function.

    python benchmarks/bench_tf.py [--images 2000] [--repeats 5] [--workers N] [--graph] [--fit] [--handoff]

Data: the first N files of bench_data/jpeg_<M>_seed0 (M >= N) if present, else
built once into $TMPDIR/fastq_bench_jpegs_<N> (deterministic, seed 0).
"""
import argparse
import os
import resource
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


def small_model(tf, size, classes=10):
    """A small CNN (one strided conv, pooling, a dense head): the input feed matters."""
    return tf.keras.Sequential([tf.keras.Input((size, size, 3)),
                                tf.keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
                                tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(classes)])


def handoff(tf, fastq, fqtf, repeats):
    """Per-batch and per-epoch cost of the handoff alone: tiny uint8 batches (4 images of
    4x4x3 from an Arrays source), so the time is the feed's, not the producers'."""
    import numpy as np
    x = np.zeros((4096, 4, 4, 3), np.uint8)
    y = np.arange(4096)

    def pipe(n):
        return fastq.Pipeline(fastq.sources.Arrays(x[:n], y[:n]), batch_size=4, queue_size=8, workers=1,
                              dtype="uint8")

    @tf.function
    def graph(ds):
        n = tf.constant(0)
        for _ in ds:
            n += 1
        return n

    def eager(ds):
        for _ in ds:
            pass

    for label, n, unit, scale in (("per batch (1024 batches per epoch)", 4096, "us/batch", 1e6 / 1024),
                                  ("per epoch (2 batches)", 8, "ms/epoch", 1e3)):
        p = pipe(n)
        variants = {"direct": lambda: eager(p)}
        for k in ("native", "from_generator"):
            ds = fqtf.dataset(p, native=k == "native")
            variants[f"{k} eager"] = lambda ds=ds: eager(ds)
            variants[f"{k} tf.function"] = lambda ds=ds: graph(ds)
        times = {k: [] for k in variants}
        rounds = repeats + 1 if n > 8 else 20 * repeats + 1
        for r in range(rounds):
            for k, fn in variants.items():
                t = time.perf_counter()
                fn()
                if r:
                    times[k].append((time.perf_counter() - t) * scale)
        print(f"handoff {label}: " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in times.items())
              + f" {unit}")
        p.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=REFERENCE.batch)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--queue-size", type=int, default=4)
    ap.add_argument("--graph", action="store_true", help="also time a tf.function consumer")
    ap.add_argument("--fit", action="store_true", help="also time Keras model.fit (small CNN), and tf.data's own")
    ap.add_argument("--handoff", action="store_true", help="also time the handoff alone (tiny batches, epochs)")
    args = ap.parse_args()

    import tensorflow as tf

    import fastq
    import fastq.tf as fqtf

    if args.handoff:
        handoff(tf, fastq, fqtf, args.repeats)

    paths, where = dataset_paths(args.images)
    labels = list(range(len(paths)))
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=args.batch_size,
                          queue_size=args.queue_size, workers=args.workers, shuffle=True, seed=0,
                          ops=REFERENCE.fastq_ops())
    feeds = {"native": fqtf.dataset(pipe, native=True)}
    feeds["from_generator"] = fqtf.dataset(pipe, native=False)

    def direct():
        n = 0
        for images, _ in pipe:
            n += images.shape[0]
        return n

    def eager(ds):
        def run():
            n = 0
            for images, _ in ds:
                n += int(images.shape[0])
            return n
        return run

    @tf.function
    def graph_loop(ds):
        n = tf.constant(0)
        for images, _ in ds:
            n += tf.shape(images)[0]
        return n

    variants = [("direct", direct)] + [(f"{k} eager", eager(ds)) for k, ds in feeds.items()]
    if args.graph:
        variants += [(f"{k} tf.function", (lambda ds=ds: int(graph_loop(ds)))) for k, ds in feeds.items()]
    expected = (len(paths) // args.batch_size) * args.batch_size
    if args.fit:
        from fastq.bench.peers import tfdata_load
        size = REFERENCE.size
        load = tfdata_load(tf, REFERENCE, all(p.endswith(".jpg") for p in paths))
        peer = (tf.data.Dataset.from_tensor_slices((paths, labels)).shuffle(len(paths), seed=0)
                .map(lambda path, y: load(tf.io.read_file(path), y), num_parallel_calls=tf.data.AUTOTUNE)
                .batch(args.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
        fit_sets = {k: ds.map(lambda x, y: (x, y % 10)) for k, ds in feeds.items()}
        fit_sets["tf.data native ops"] = peer.map(lambda x, y: (x, y % 10))
        for name, ds in fit_sets.items():
            model = small_model(tf, size)
            model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

            def fit(model=model, ds=ds):
                model.fit(ds, epochs=1, verbose=0, shuffle=False)
                return expected
            variants.append((f"fit {name}", fit))
    rates = {name: [] for name, _ in variants}
    cpu = {name: [] for name, _ in variants}  # process CPU seconds per image (workers included)
    for r in range(args.repeats + 1):
        for name, fn in variants:
            c = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            n = fn()
            dt = time.perf_counter() - t
            c2 = resource.getrusage(resource.RUSAGE_SELF)
            if n != expected:
                raise SystemExit(f"{name}: got {n} images, expected {expected}")
            if r > 0:  # r == 0 is the warm-up epoch
                rates[name].append(n / dt)
                cpu[name].append((c2.ru_utime + c2.ru_stime - c.ru_utime - c.ru_stime) / n)
    st = pipe.stats()
    print(f"fastq {fastq.__version__}, TensorFlow {tf.__version__}; {len(paths)} JPEGs from {where}")
    print(f"task: decode -> RandomResizedCrop 224 -> flip -> normalize float32, batch {args.batch_size}, "
          f"workers {st['workers']}, queue_size {args.queue_size}, {os.cpu_count()} CPUs visible; "
          f"{args.repeats} epochs each after 1 warm-up, alternating")
    base = statistics.median(rates["direct"])

    def paired(name):  # the median of the rounds' own ratios: load drifting between rounds cancels
        return statistics.median(a / b for a, b in zip(rates[name], rates["direct"]))
    print("  (ratio: median images/s over direct's; paired: median of each round's ratio; cpu: process CPU "
          "per image, workers included)")
    for name, _ in variants:
        med = statistics.median(rates[name])
        runs = ", ".join(f"{x:.0f}" for x in rates[name])
        print(f"  {name:30s} median {med:7.1f} images/s  ratio {med / base:5.3f}  paired {paired(name):5.3f}  "
              f"cpu {statistics.median(cpu[name]) * 1e3:.3f} ms  (runs: {runs})")
    for k in feeds:
        ratio = paired(f"{k} eager")
        target = 0.98 if k == "native" else 0.95
        print(f"{k} tf.data / direct = {ratio:.3f} paired ({'meets' if ratio >= target else 'BELOW'} the "
              f"{target} target)")
    if args.fit:
        peer_rate = statistics.median(rates["fit tf.data native ops"])
        for k in feeds:
            print(f"fit: {k} / tf.data native ops = {statistics.median(rates[f'fit {k}']) / peer_rate:.2f}x")
    pipe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
