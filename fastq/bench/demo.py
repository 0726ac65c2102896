"""fastq demo: build a small ImageNet-like JPEG set from bundled photos, then
read it through fastq and through a plain Python + cv2 loop doing the same
work, and print images/s for both (median of a few epochs).

    python -m fastq.bench.demo [--images 512] [--epochs 3] [--workers N]
"""
import argparse
import statistics
import tempfile
import time

import numpy as np

import fastq
from fastq.bench import testdata
from fastq.bench.peers import Cv2Sample
from fastq.bench.tasks import REFERENCE


def python_loop(paths, batch_size, seed):
    """The per-sample work of the reference task in Python + cv2 (the pyloop peer's
    code, fastq.bench.peers.Cv2Sample), np.stack per batch."""
    sample = Cv2Sample(REFERENCE, seed)
    n = 0
    batch = []
    for p in paths:
        batch.append(sample(p))
        if len(batch) == batch_size:
            np.stack(batch)
            n += batch_size
            batch = []
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description="fastq demo on a small generated JPEG dataset")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--data", default=None, help="dataset directory (default: a temporary one)")
    a = ap.parse_args(argv)
    tmp = None
    if a.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="fastq-demo-")
        a.data = tmp.name
    print(f"building {a.images} JPEGs (300-800 px, q90) from bundled photos in {a.data} ...", flush=True)
    paths = testdata.make_jpeg_dataset(a.data, a.images, seed=0)
    labels = np.arange(len(paths)) % 1000
    chain = REFERENCE.fastq_ops()
    src = fastq.sources.Files(paths, labels=labels)
    rates = []
    with fastq.Pipeline(src, batch_size=a.batch_size, queue_size=4, workers=a.workers, ops=chain,
                        seed=0, shuffle=True) as p:
        for epoch in range(a.epochs + 1):  # epoch 0 warms the page cache
            t0 = time.perf_counter()
            n = 0
            for images, labs in p:
                n += images.shape[0]
            dt = time.perf_counter() - t0
            if epoch:
                rates.append(n / dt)
        st = p.stats()
        ex = p.explain(0, 0)
    py_rates = []
    for epoch in range(2):
        t0 = time.perf_counter()
        n = python_loop(paths, a.batch_size, epoch)
        py_rates.append(n / (time.perf_counter() - t0))
    fq, py = statistics.median(rates), statistics.median(py_rates)
    print(f"\nreference task: JPEG -> RandomResizedCrop 224 -> flip -> normalize float32, batch {a.batch_size}")
    print(f"  fastq ({st['workers']} native workers): {fq:8.0f} images/s  (median of {len(rates)} epochs)")
    print(f"  Python + cv2 loop (1 thread):   {py:8.0f} images/s")
    print(f"  ratio: {fq / py:.2f}x")
    print(f"  consumer waited {st['consumer_wait_s']:.2f} s in total, producers waited {st['producer_wait_s']:.2f} s; "
          f"{st['batches_delivered']} batches; pinned: {st['pinned']} ({st['pin_reason']})")
    print(f"  sample 0 of epoch 0 was: crop {ex['crop_src']} of {ex['src_shape']}, decoded at scale "
          f"{ex['decode_scale'][0]}/{ex['decode_scale'][1]}, roi_used={ex['roi_used']}, hflip={ex['hflip']}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
