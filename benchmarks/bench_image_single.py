"""Single-thread speed of the native per-sample image path (fastq._native._image) on the
reference task (fastq.bench.tasks.REFERENCE): JPEG 300-800 px -> RandomResizedCrop 224
bilinear -> HorizontalFlip -> Normalize (ImageNet) float32 NHWC.  Files are read into
memory first (decode + augment + write only).  The peer in the same run is the cv2 code
of ``fastq bench``'s Python-loop peer (fastq.bench.peers.Cv2Sample) on the same bytes.

Usage: python benchmarks/bench_image_single.py [--images 500] [--runs 3]
"""
import argparse
import statistics
import time

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq import ops as O  # noqa: E402
from fastq._native._image import ImageSpec, set_opencv_threads  # noqa: E402
from fastq.bench.peers import Cv2Sample  # noqa: E402
from fastq.bench.tasks import REFERENCE  # noqa: E402
from fastq.bench.testdata import cached_jpeg_dataset  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=500, help="JPEGs in the set (default 500)")
    ap.add_argument("--runs", type=int, default=3, help="timed passes over the set; the median is reported (default 3)")
    a = ap.parse_args(argv)
    n, runs = a.images, a.runs
    set_opencv_threads(1)
    paths = cached_jpeg_dataset(n)
    blobs = [open(p, "rb").read() for p in paths]
    for dct in (True, False):
        spec = ImageSpec(O.compile_ops(REFERENCE.fastq_ops(), dct_scaling=dct))
        for i, b in enumerate(blobs[:50]):  # warm-up
            spec.process_encoded(b, 0, 0, i)
        rates = []
        for r in range(runs):
            t = time.perf_counter()
            for i, b in enumerate(blobs):
                spec.process_encoded(b, 0, 1 + r, i)
            rates.append(len(blobs) / (time.perf_counter() - t))
        print(f"dct_scaling={dct!s:5}: {statistics.median(rates):7.0f} images/s single thread "
              f"(median of {runs} runs x {len(blobs)} images; runs {', '.join(f'{x:.0f}' for x in rates)})")
    # peer in the same run: Python + cv2 (full decode, crop + resize, flip, numpy normalize)
    import cv2
    cv2.setNumThreads(1)
    sample = Cv2Sample(REFERENCE, seed=0)
    t = time.perf_counter()
    for i, b in enumerate(blobs):
        sample.from_bytes(b, paths[i])
    print(f"peer python+cv2 loop: {len(blobs) / (time.perf_counter() - t):7.0f} images/s")


if __name__ == "__main__":
    main()
