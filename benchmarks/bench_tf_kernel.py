"""fastq's TensorFlow op (fastq.tf.ops.decode_augment[_files]) in Dataset.map vs fastq.tf.dataset
vs tf.data native ops, in one run, on the reference task; and the cost of serving
batches through tf.data service on localhost.

Reference task: JPEG files (300-800 px, fastq.bench.testdata) -> decode -> RandomResizedCrop
224 (bilinear, area .08-1, aspect 3/4-4/3) -> random horizontal flip -> Normalize
(ImageNet mean/std) float32 NHWC, batch 64.

Local peers (images/s, median of --repeats epochs after one warm-up epoch each, run in
turns so background load hits all alike; a round's clock stops at its last batch, before
its iterator is torn down, which tf.data's autotune can delay by up to 0.5 s):
  kernel        from_tensor_slices(paths) -> map(read_file, parallel=cores) -> batch(64)
                -> map(decode_augment float32 + Normalize, num_parallel_calls=2)
                -> prefetch(1); the op's own threads = cores
  kernel_files  from_tensor_slices(paths) -> batch(64) -> map(decode_augment_files
                float32 + Normalize, num_parallel_calls=2) -> prefetch(1): the op reads
                the files (one tf.data element per batch, not one read_file per image)
  kernel_uint8  the same, uint8 out (what a service worker ships; normalizing is the
                accelerator's job: fqt.normalize's CPU cost per batch is reported apart)
  fastq_tf      fastq.tf.dataset(Pipeline(Files, same ops, workers=cores))
  tfdata        tf.data native (fastq.bench peers: sample_distorted_bounding_box +
                decode_and_crop_jpeg + resize + flip + normalize, map parallel=cores)
Targets: the op path (kernel_files for files; kernel where the bytes come from elsewhere,
e.g. TFRecords) >= 0.95 x fastq_tf, and >= 2 x tfdata.

--service: also start a dispatcher and one worker (`fastq serve-*`, separate processes,
127.0.0.1) and time the same kernel dataset served with DYNAMIC sharding: uint8 vs
float32 batches, compression AUTO vs None; per-batch time minus the local per-batch time
of the same dataset, and bytes per image.  On a 2-core machine the worker and the
trainer share the cores, so this shows cost, not speed-up.

    python benchmarks/bench_tf_kernel.py [--images 2000] [--repeats 3] [--service] [--json out.json]
    python benchmarks/bench_tf_kernel.py --tiny      # a seconds-long smoke run (tests)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

def dataset_paths(n, min_side=300, max_side=800):
    from fastq.bench.testdata import cached_jpeg_dataset
    return cached_jpeg_dataset(n, min_side=min_side, max_side=max_side)


def cores():
    return len(os.sched_getaffinity(0))


def chain(size, normalize=True):
    """The reference task's chain (fastq.bench.tasks, defined once) at `size`; without
    its Normalize for the uint8 output."""
    from fastq.bench.tasks import Task
    c = Task("reference", size).fastq_ops()
    return c if normalize else c[:-1]


def kernel_dataset(tf, paths, size, batch, *, uint8=False, epoch=0, parallel=2, files=False):
    """The op path; files=True: decode_augment_files on batches of paths, else read_file
    per image, batch, decode_augment."""
    import fastq.tf.ops as fqt
    n = len(paths)
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(paths), tf.range(n, dtype=tf.int64)))
    if not files:
        ds = ds.map(lambda p, i: (tf.io.read_file(p), i), num_parallel_calls=cores())
    ds = ds.batch(batch, drop_remainder=True)
    c = chain(size, normalize=not uint8)
    op = fqt.decode_augment_files if files else fqt.decode_augment
    ds = ds.map(lambda enc, i: (op(enc, i, ops=c, seed=0, epoch=epoch, dtype="uint8" if uint8 else "float32"), i),
                num_parallel_calls=parallel)
    return ds.prefetch(1)


def tfdata_peer(paths, size, batch):
    from fastq.bench import peers as bp
    from fastq.bench.tasks import Task
    run_epoch, _, _ = bp.peer_tfdata(paths, cores(), Task("reference", size, batch=batch), parallel=cores())
    return run_epoch.batches  # its tf.data Dataset


def local(args, tf, paths):
    import fastq
    import fastq.tf as fqtf
    import fastq.tf.ops as fqt
    size, batch = args.size, args.batch_size

    kds = kernel_dataset(tf, paths, size, batch)
    kfs = kernel_dataset(tf, paths, size, batch, files=True)
    kds8 = kernel_dataset(tf, paths, size, batch, uint8=True)
    pipe = fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=batch, workers=cores(),
                          ops=chain(size), seed=0)
    fds = fqtf.dataset(pipe)

    def epoch(ds):
        """One epoch through a fresh iterator; returns (images, the exhausted iterator) so
        that the caller stops the clock before the iterator goes: tf.data's iterator
        teardown, with autotune on (the default), waits for the autotune thread, 0.04-0.5 s
        per iterator on this machine (up to 40 % of a 2000-image epoch), in whichever peer
        it happens to hit; a training loop over repeat() never pays it.  Only one iterator
        is alive at a time, so no peer prefetches while another is timed."""
        def run():
            it, n = iter(ds), 0
            for x, _ in it:
                n += int(x.shape[0])
            return n, it
        return run

    peers = {"kernel": epoch(kds), "kernel_files": epoch(kfs), "kernel_uint8": epoch(kds8),
             "fastq_tf": epoch(fds), "tfdata": epoch(tfdata_peer(paths, size, batch))}
    rates = {k: [] for k in peers}
    for name, run in peers.items():  # warm-up
        run()
    for _ in range(args.repeats):
        for name, run in peers.items():
            t = time.perf_counter()
            n, it = run()
            rates[name].append(n / (time.perf_counter() - t))
            del it  # the teardown, untimed
    med = {k: statistics.median(v) for k, v in rates.items()}
    # per-image CPU cost of the op alone (both cores busy): process CPU seconds per image
    t0, c0 = time.perf_counter(), time.process_time()
    n, it = peers["kernel_uint8"]()
    cpu_per_image = (time.process_time() - c0) / n
    pipe.close()
    x = next(iter(kds8))[0]
    from fastq.bench import tasks
    norm = tf.function(lambda x: fqt.normalize(x, tasks.MEAN, tasks.STD))
    norm(x)
    t = time.perf_counter()
    for _ in range(5):
        norm(x).numpy()
    norm_ms = (time.perf_counter() - t) / 5 * 1e3
    return {"images_per_s": med, "normalize_ms_per_batch_on_cpu": norm_ms, "all": rates,
            "kernel_vs_fastq_tf": med["kernel"] / med["fastq_tf"],
            "kernel_files_vs_fastq_tf": med["kernel_files"] / med["fastq_tf"],
            "kernel_vs_tfdata": med["kernel"] / med["tfdata"],
            "cpu_s_per_image_uint8": cpu_per_image, "wall_s_uint8_epoch": time.perf_counter() - t0}


class Server:
    def __init__(self, args):
        import fastq
        site = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))  # the fastq this script uses
        env = dict(os.environ, PYTHONPATH=site + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.p = subprocess.Popen([sys.executable, "-m", "fastq", *args, "--timeout", "900"], cwd=site, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def wait(self, text, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            if text in line:
                return line.strip()
        raise RuntimeError(f"server did not print {text!r}")

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()


def service(args, tf, paths):
    import fastq.tf.ops as fqt
    from fastq.tf.serve import iterate
    fqt.build()
    d = Server(["serve-dispatcher", "--port", "0"])
    workers = []
    try:
        address = "127.0.0.1:" + d.wait("ready").rsplit(":", 1)[1]
        workers.append(Server(["serve-worker", "--dispatcher", address, "--advertise", "127.0.0.1"]))
        workers[0].wait("ready")
        d.wait("1 worker(s) registered")
        out = {}
        for uint8 in (True, False):
            local_ds = kernel_dataset(tf, paths, args.size, args.batch_size, uint8=uint8)
            t = time.perf_counter()
            nb = sum(1 for _ in local_ds)
            local_ms = (time.perf_counter() - t) / nb * 1e3
            for comp in ("AUTO", None):
                times = []
                for r in range(args.repeats):
                    ds = kernel_dataset(tf, paths, args.size, args.batch_size, uint8=uint8).apply(
                        tf.data.experimental.service.distribute(
                            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
                            service=f"grpc://{address}", compression=comp, job_name=f"bench-{uint8}-{comp}-{r}"))
                    t = time.perf_counter()
                    nb = 0
                    for x, _ in iterate(ds, stall_timeout=120):
                        nb += 1
                        item_bytes = x.numpy().nbytes / x.shape[0]
                    times.append((time.perf_counter() - t) / nb * 1e3)
                ms = statistics.median(times)
                out[f"{'uint8' if uint8 else 'float32'}_compression_{comp or 'none'}"] = {
                    "served_ms_per_batch": ms, "local_ms_per_batch": local_ms, "overhead_ms_per_batch": ms - local_ms,
                    "bytes_per_image": item_bytes}
        return out
    finally:
        for w in workers:
            w.stop()
        d.stop()


def model(cpu_s_per_image, bytes_per_image, gpus=8, per_gpu=3000):
    need = gpus * per_gpu
    cores_needed = need * cpu_s_per_image
    return {"images_per_s": need, "cpu_cores": cores_needed,
            "hosts_of_32_cores_at_80pct": cores_needed / (32 * 0.8),
            "network_gbit_s_uint8": need * bytes_per_image * 8 / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--service", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="64 small images, 32 px, batch 8, 1 repeat")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.tiny:
        args.images, args.batch_size, args.size, args.repeats = 64, 8, 32, 1
        paths = dataset_paths(args.images, 64, 128)
    else:
        paths = dataset_paths(args.images)
    import tensorflow as tf
    import fastq.tf.ops as fqt
    fqt.load()
    res = {"tensorflow": tf.__version__, "cores": cores(), "images": len(paths), "size": args.size,
           "batch": args.batch_size}
    res["local"] = local(args, tf, paths)
    bpi = args.size * args.size * 3
    res["model_8gpu_3000"] = model(res["local"]["cpu_s_per_image_uint8"], bpi)
    if args.service:
        res["service"] = service(args, tf, paths)
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
