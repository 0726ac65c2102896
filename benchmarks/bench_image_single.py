"""Single-thread speed of the native per-sample image path (fastq._image) on the
reference task: JPEG 300-800 px -> RandomResizedCrop 224 bilinear -> HorizontalFlip ->
Normalize (ImageNet) float32 NHWC.  Files are read into memory first (decode +
augment + write only).  Usage: python benchmarks/bench_image_single.py [n] [runs]
"""
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from fastq import ops as O
from fastq._image import ImageSpec, set_opencv_threads
from fastq.testdata import make_jpeg_dataset


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    set_opencv_threads(1)
    d = os.path.join(tempfile.gettempdir(), f"fastq_bench_jpegs_{n}")
    paths = sorted(os.path.join(d, f) for f in os.listdir(d)) if os.path.isdir(d) else []
    if len(paths) != n:
        paths = make_jpeg_dataset(d, n, seed=0)
    blobs = [open(p, "rb").read() for p in paths]
    chain = [O.RandomResizedCrop(224), O.HorizontalFlip(), O.Normalize()]
    for dct in (True, False):
        spec = ImageSpec(O.compile_ops(chain, dct_scaling=dct))
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
    # peer in the same run: Python + cv2 (full decode, resize, flip, numpy normalize)
    import cv2
    cv2.setNumThreads(1)
    mean = np.array(O.IMAGENET_MEAN, np.float32) * 255
    std = np.array(O.IMAGENET_STD, np.float32) * 255
    t = time.perf_counter()
    for b in blobs:
        img = cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
        h, w = img.shape[:2]
        img = cv2.resize(img[h // 4: h // 4 + h // 2, w // 4: w // 4 + w // 2], (224, 224))
        out = (img[:, ::-1].astype(np.float32) - mean) / std
    print(f"peer python+cv2 loop: {len(blobs) / (time.perf_counter() - t):7.0f} images/s")


if __name__ == "__main__":
    main()
