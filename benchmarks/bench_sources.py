"""Dataset sources, side by side in one run: fastq TFRecord vs tf.data reading the
same TFRecord shards, and fastq Folder vs fastq Files on the same JPEGs.

Task: the reference task (fastq.bench.tasks.REFERENCE): JPEG -> RandomResizedCrop 224
(scale 0.08-1, ratio 3/4-4/3, bilinear) -> random horizontal flip -> Normalize
(ImageNet mean/std) float32 NHWC, batches of 64 (``--batch-size``), last partial batch
dropped, order shuffled every epoch.

Peers (each runs whole epochs; the consumer only drops the batch):
* ``fastq-tfrecord``: ``fastq.sources.TFRecord(shards)`` (index built before timing).
* ``tfdata-tfrecord``: ``tf.data.Dataset.list_files(shuffle) -> interleave(TFRecordDataset,
  parallel) -> shuffle(1024) -> map(parse_single_example + the task in tf.data native
  ops of ``fastq bench``'s tf.data peer (fastq.bench.peers.tfdata_load), AUTOTUNE) ->
  batch -> prefetch``.
* ``fastq-folder``: ``fastq.sources.Folder(root)`` on a class-per-subfolder tree of hard
  links to the JPEGs; ``fastq-files``: ``fastq.sources.Files`` on the same paths and labels.

Method: one warm-up epoch of each, then ``--repeats`` rounds; each round runs one epoch
of every peer in turn (so load from other processes hits all alike).  Prints the
median images/s of each peer and the ratios tfrecord/tf.data (target >= 2) and
folder/files (target >= 0.97), and the median process CPU time per 1000 images of each
peer (all peers run in this process; a ratio of CPU costs still means something on a
machine shared with other load, where images/s does not).

    python benchmarks/bench_sources.py [--images 1000] [--shards 8] [--repeats 5] [--workers N]
                                       [--batch-size 64] [--data-dir DIR]
    python benchmarks/bench_sources.py --latency [--images 1000] [--repeats 3]

``--latency``: the storage-latency curve instead: Folder whose native file reader sleeps
0 / 2 / 5 ms before every read (a stand-in for network storage), with io_threads 0, 2, 4,
8, 16 (read_ahead max(64, 4 x io_threads)); median images/s per configuration.

Data: the JPEGs of bench_images.py (bench_data/jpeg_<n>_seed0, built once by
fastq.bench.generated_dataset), written once into bench_data/tfrecord_<n>_<shards>/
(tf.train.Example records with image/encoded, image/format and image/class/label,
written with fastq.tfrecord_codec, byte for byte what tf.io.TFRecordWriter writes) and linked
into bench_data/folder_<n>/class_<k>/.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq.bench import generated_dataset, usable_cores  # noqa: E402
from fastq.bench.tasks import REFERENCE, task_from_dict  # noqa: E402

CLASSES = 10


def make_tfrecords(paths, shards, d):
    from fastq.tfrecord_codec import encode_example, tfrecord_frame
    done = os.path.join(d, "DONE")
    out = [os.path.join(d, f"train-{s:05d}-of-{shards:05d}") for s in range(shards)]
    if os.path.exists(done):
        return out
    os.makedirs(d, exist_ok=True)
    per = -(-len(paths) // shards)
    for s, p in enumerate(out):
        with open(p, "wb") as w:
            for i in range(s * per, min(len(paths), (s + 1) * per)):
                with open(paths[i], "rb") as f:
                    data = f.read()
                w.write(tfrecord_frame(encode_example({"image/encoded": data, "image/format": b"jpeg",
                                                       "image/class/label": i % CLASSES})))
    open(done, "w").close()
    return out


def make_folder(paths, d):
    for i, p in enumerate(paths):
        cdir = os.path.join(d, f"class_{i % CLASSES:02d}")
        os.makedirs(cdir, exist_ok=True)
        q = os.path.join(cdir, os.path.basename(p))
        if not os.path.exists(q):
            try:
                os.link(p, q)
            except OSError:
                import shutil
                shutil.copy(p, q)
    return d


def fastq_runner(source, workers, batch):
    """(run_epoch, close) of fastq bench's fastq peer on `source`, the reference task."""
    from fastq.bench.peers import fastq_pipeline
    run_epoch, close, _ = fastq_pipeline(source, workers, task_from_dict(dict(REFERENCE.to_dict(), batch=batch)))
    return run_epoch, close


def tfdata_runner(shards, workers, batch):
    import tensorflow as tf
    from fastq.bench.peers import tfdata_load
    tf.random.set_seed(0)
    load_image = tfdata_load(tf, REFERENCE, all_jpeg=True)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def load(record):
        ex = tf.io.parse_single_example(record, spec)
        return load_image(ex["image/encoded"], ex["image/class/label"])

    ds = tf.data.Dataset.from_tensor_slices(shards).shuffle(len(shards), seed=0, reshuffle_each_iteration=True)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(shards), max(2, workers)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    ds = ds.shuffle(1024, seed=0, reshuffle_each_iteration=True)
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def run_epoch():
        n = 0
        for images, lab in ds:
            n += int(images.shape[0])
            del images, lab
        return n
    return run_epoch, None


def latency_curve(root, workers, repeats, batch, delays_ms=(0, 2, 5), io_list=(0, 2, 4, 8, 16)):
    """images/s of Folder when every file read first sleeps `delay` ms (in the native
    reader: a stand-in for network storage) for each io_threads; configurations
    alternate within each round; medians."""
    import fastq
    configs = [(d, io) for d in delays_ms for io in io_list]
    runners = {c: fastq_runner(fastq.sources.Folder(root, io_threads=c[1], read_ahead=max(64, 4 * c[1]),
                                                    _read_delay_us=int(c[0] * 1000)), workers, batch)
               for c in configs}
    rates = {c: [] for c in configs}
    for run, _ in runners.values():
        run()
    for r in range(repeats):
        for c, (run, _) in runners.items():
            t = time.perf_counter()
            n = run()
            rates[c].append(n / (time.perf_counter() - t))
        print(f"latency round {r + 1} done", flush=True)
    for run, close in runners.values():
        close()
    base = statistics.median(rates[(0, 0)])
    print(f"\nstorage latency (sleep per file read) vs io_threads: median images/s, workers={workers}")
    print("delay  " + "".join(f"io={io:<8d}" for io in io_list))
    for d in delays_ms:
        print(f"{d:3d} ms " + "".join(f"{statistics.median(rates[(d, io)]):<11.0f}" for io in io_list))
    print(f"(no latency, no io_threads: {base:.0f} images/s = 1.00; best with latency: " + ", ".join(
        f"{d} ms -> {max(statistics.median(rates[(d, io)]) for io in io_list) / base:.2f}"
        for d in delays_ms if d) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=REFERENCE.batch,
                    help=f"batch size (default {REFERENCE.batch}, the reference task's)")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"))
    ap.add_argument("--latency", action="store_true",
                    help="instead: the storage-latency curve (Folder, sleep 0/2/5 ms per read, io_threads 0..16)")
    args = ap.parse_args()
    workers = args.workers or usable_cores()
    os.makedirs(args.data_dir, exist_ok=True)
    paths = generated_dataset(args.images, args.data_dir)
    if len(paths) < args.batch_size:
        ap.error(f"--images {args.images} is less than one batch of {args.batch_size}")
    batch = args.batch_size
    shards = make_tfrecords(paths, args.shards, os.path.join(args.data_dir, f"tfrecord_{args.images}_{args.shards}"))
    root = make_folder(paths, os.path.join(args.data_dir, f"folder_{args.images}"))

    if args.latency:
        latency_curve(root, workers, args.repeats, batch)
        return
    import fastq
    t = time.perf_counter()
    tfr = fastq.sources.TFRecord(shards, cache_index=False)
    index_s = time.perf_counter() - t
    folder = fastq.sources.Folder(root)
    files = fastq.sources.Files(folder.paths, folder.labels)
    peers = {
        "fastq-tfrecord": fastq_runner(tfr, workers, batch),
        "tfdata-tfrecord": tfdata_runner(shards, workers, batch),
        "fastq-folder": fastq_runner(folder, workers, batch),
        "fastq-files": fastq_runner(files, workers, batch),
    }
    rates = {k: [] for k in peers}
    cpu = {k: [] for k in peers}  # process CPU seconds (all threads) per 1000 images: robust to other load
    print(f"{args.images} images in {args.shards} shards, workers={workers}, batch {batch}, "
          f"TFRecord index built in {index_s * 1000:.1f} ms", flush=True)
    for k, (run, _) in peers.items():  # warm-up
        run()
    for r in range(args.repeats):
        for k, (run, _) in peers.items():
            t, c = time.perf_counter(), time.process_time()
            n = run()
            rates[k].append(n / (time.perf_counter() - t))
            cpu[k].append((time.process_time() - c) * 1000 / n)
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1]:.0f}" for k, v in rates.items()), flush=True)
    for _, close in peers.values():
        if close:
            close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    print("\nmedians over", args.repeats, "rounds:   images/s   CPU s per 1000 images")
    for k, v in med.items():
        print(f"  {k:16s} {v:8.1f}   {cmed[k]:8.2f}")
    r1 = med["fastq-tfrecord"] / med["tfdata-tfrecord"]
    r2 = med["fastq-folder"] / med["fastq-files"]
    print(f"\nfastq TFRecord / tf.data TFRecord = {r1:.2f}x (target >= 2)")
    print(f"fastq Folder / fastq Files       = {r2:.3f}x (target >= 0.97)")
    print(f"CPU per image, tf.data / fastq TFRecord = "
          f"{cmed['tfdata-tfrecord'] / cmed['fastq-tfrecord']:.2f}x; Files / Folder = "
          f"{cmed['fastq-files'] / cmed['fastq-folder']:.3f}x")


if __name__ == "__main__":
    main()
