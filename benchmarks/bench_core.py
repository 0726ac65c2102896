"""Microbenchmark of the core: handing batches from producers to a consumer.

Three measurements, side by side in one run, each repeated --repeats times
(median reported):

1. Consumer-side cost per batch (Python consumer), producers kept ahead:
   * fastq: native pattern producers -> ring -> Pipeline-level next_batch()
     (the time the consumer spends in the call, minus time it waited for a
     batch that was not ready yet)
   * queue.Queue: Python producer threads put ready-made numpy batches of
     the same size; the consumer's get().
2. Same producer work in Python (the Iterable path): a generator yields
   samples; fastq copies each into its slot row with the GIL released,
   queue.Queue producers np.stack() a batch and put() it.  Batches/s.
3. Native ring throughput: C producers -> C consumer (no Python per batch),
   slot handoffs per second.

Usage:  python benchmarks/bench_core.py [--repeats 5] [--batches 2000]

Needs a development build with the test-only module fastq._native._testing (the native
pattern producers): FASTQ_TESTING=1 python3 setup.py build_ext --inplace.
"""
import argparse
import json
import queue
import statistics
import threading
import time

import numpy as np

import _checkout  # noqa: F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)
import fastq  # noqa: E402
from fastq._native import _core  # noqa: E402

_testing = None  # the test-only native pattern producers, imported by main() after --help


def _import_testing():
    global _testing
    try:
        from fastq._native import _testing
    except ImportError:
        raise SystemExit("bench_core.py needs fastq._native._testing (not in the wheel): in a checkout, run "
                         "FASTQ_TESTING=1 python3 setup.py build_ext --inplace") from None


def fastq_consumer_cost(n_batches, batch, row_shape, workers=2, queue_size=8):
    ring = _core.Ring(queue_size, batch, [np.uint8, np.int64], [row_shape, ()])
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    ring.set_end(n_batches * batch)
    run = _core.NativeRun(ring, task, workers, n_batches * batch)
    # let producers fill the ring first
    while ring.stats()["slots_ready"] < queue_size - 1:
        time.sleep(0.001)
    w0 = ring.stats()["consumer_wait_s"]
    t0 = time.perf_counter()
    n = 0
    while True:
        r = ring.next_batch()
        if r is None:
            break
        n += 1
        del r
    t = time.perf_counter() - t0
    wait = ring.stats()["consumer_wait_s"] - w0
    run.join()
    return (t - wait) / n * 1e6, t / n * 1e6


def queue_consumer_cost(n_batches, batch, row_shape, workers=2, queue_size=8):
    q = queue.Queue(maxsize=queue_size)
    per = n_batches // workers
    proto = (np.zeros((batch,) + row_shape, np.uint8), np.zeros(batch, np.int64))

    def producer():
        for _ in range(per):
            q.put(proto)

    ts = [threading.Thread(target=producer) for _ in range(workers)]
    for t in ts:
        t.start()
    while q.qsize() < queue_size - 1:
        time.sleep(0.001)
    t0 = time.perf_counter()
    for _ in range(per * workers):
        q.get()
    t = time.perf_counter() - t0
    for th in ts:
        th.join()
    return t / (per * workers) * 1e6


def make_samples(n, row_shape):
    img = np.random.default_rng(0).integers(0, 255, row_shape, dtype=np.uint8)

    class Src:
        def __iter__(self):
            for i in range(n):
                yield img, i
    return Src()


def fastq_python_source(n_batches, batch, row_shape, workers=2):
    src = make_samples(n_batches * batch, row_shape)
    with fastq.Pipeline(src, batch_size=batch, queue_size=8, workers=workers) as p:
        t0 = time.perf_counter()
        n = sum(1 for _ in p)
        t = time.perf_counter() - t0
    return n / t


def queue_python_source(n_batches, batch, row_shape, workers=2):
    src = make_samples(n_batches * batch, row_shape)
    it = iter(src)
    lock = threading.Lock()
    q = queue.Queue(maxsize=8)
    done = object()

    def producer():
        while True:
            with lock:
                samples = []
                for _ in range(batch):
                    s = next(it, None)
                    if s is None:
                        break
                    samples.append(s)
            if len(samples) < batch:
                q.put(done)
                return
            q.put((np.stack([s[0] for s in samples]), np.array([s[1] for s in samples])))

    ts = [threading.Thread(target=producer) for _ in range(workers)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    n, finished = 0, 0
    while finished < workers:
        x = q.get()
        if x is done:
            finished += 1
        else:
            n += 1
    t = time.perf_counter() - t0
    for th in ts:
        th.join()
    return n / t


def native_ring_throughput(n_batches, batch=1, row_bytes=64, workers=2, queue_size=8):
    ring = _core.Ring(queue_size, batch, [np.uint8], [(row_bytes,)])
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    ring.set_end(n_batches * batch)
    run = _core.NativeRun(ring, task, workers, n_batches * batch)
    nb, nr, bad, secs = task.drain(ring, False)
    run.join()
    assert nb == n_batches and bad == 0
    return nb / secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    _import_testing()
    med = statistics.median
    row = (224, 224, 3)
    R = range(a.repeats)
    fq_over = [fastq_consumer_cost(a.batches, 64, (16,)) for _ in R]
    fq_over_img = [fastq_consumer_cost(max(a.batches // 10, 50), 64, row) for _ in R]
    q_over = [queue_consumer_cost(a.batches, 64, (16,)) for _ in R]
    n_py = max(a.batches // 20, 40)
    fq_py = [fastq_python_source(n_py, 64, row) for _ in R]
    q_py = [queue_python_source(n_py, 64, row) for _ in R]
    nat = [native_ring_throughput(a.batches * 50) for _ in R]
    res = {
        "consumer_us_per_batch_fastq_small": med(x[0] for x in fq_over),
        "consumer_us_per_batch_fastq_224x224x3": med(x[0] for x in fq_over_img),
        "consumer_us_per_batch_queue_small": med(q_over),
        "python_source_batches_per_s_fastq": med(fq_py),
        "python_source_batches_per_s_queue": med(q_py),
        "native_handoffs_per_s": med(nat),
    }
    print(f"fastq core microbenchmark (median of {a.repeats} runs)")
    print(f"{'measurement':58s} {'fastq':>12s} {'queue.Queue':>12s} {'ratio':>7s}")
    print(f"{'consumer-side cost per batch, 64x16 B rows (us)':58s} "
          f"{res['consumer_us_per_batch_fastq_small']:12.2f} {res['consumer_us_per_batch_queue_small']:12.2f} "
          f"{res['consumer_us_per_batch_queue_small'] / res['consumer_us_per_batch_fastq_small']:6.2f}x")
    print(f"{'consumer-side cost per batch, 64x224x224x3 u8 (us)':58s} "
          f"{res['consumer_us_per_batch_fastq_224x224x3']:12.2f} {'':>12s}")
    print(f"{'Python source -> batches of 64x224x224x3 u8 (batches/s)':58s} "
          f"{res['python_source_batches_per_s_fastq']:12.1f} {res['python_source_batches_per_s_queue']:12.1f} "
          f"{res['python_source_batches_per_s_fastq'] / res['python_source_batches_per_s_queue']:6.2f}x")
    print(f"{'native C producers -> C consumer (slot handoffs/s)':58s} {res['native_handoffs_per_s']:12.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
