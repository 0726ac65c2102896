"""Per-op CPU time of tensorpack's fbresnet chain in fastq (the task of `fastq bench --task
fbresnet`): each op of fastq.tensorpack.fbresnet_augmentor(224) alone on one thread, in
microseconds per image (thread CPU time, median of runs), minus the cost of the same call
with no op (the Python call + explain record).  Inputs: 224x224 RGB arrays for the colour
op and the flip, generated ImageNet-like JPEGs (300-800 px) for the crop and the decode.
TensorpackColor is also timed on its scalar path (the same bytes; fastq._native._image.set_simd_tp), and
TensorpackCrop and the chain on OpenCV's cv::resize instead of fastq's AVX2 bicubic (the same
bytes; fastq._native._image.set_simd_resize), so the vectorized paths' gains are same-run ratios.  The crop's JPEG rows minus its array row is the
(region) decode.

Usage: python benchmarks/bench_tp_ops.py [--images 200] [--runs 5]
"""
import argparse
import os
import statistics
import time

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

import numpy as np  # noqa: E402

import fastq.tensorpack as ftp  # noqa: E402
from fastq import ops as O  # noqa: E402
from fastq._native._image import ImageSpec, set_opencv_threads, set_simd_resize, set_simd_tp  # noqa: E402
from fastq.bench.testdata import cached_jpeg_dataset  # noqa: E402


def spec(ops, **kw):
    return ImageSpec(O.compile_ops(ops, dtype="uint8", channels="BGR", **kw))


def per_image(fn, items, runs):
    """median over runs of thread CPU us per call of fn(item, index)"""
    for i, it in enumerate(items[:20]):
        fn(it, i)
    out = []
    for _ in range(runs):
        t = time.thread_time()
        for i, it in enumerate(items):
            fn(it, i)
        out.append((time.thread_time() - t) / len(items) * 1e6)
    return statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=200, help="JPEGs in the set, and arrays (default 200)")
    ap.add_argument("--runs", type=int, default=5, help="timed passes per op; the median is reported (default 5)")
    a = ap.parse_args(argv)
    n, runs = a.images, a.runs
    set_opencv_threads(1)
    paths = cached_jpeg_dataset(n)
    blobs = [open(p, "rb").read() for p in paths]
    rs = np.random.RandomState(0)
    arrays = [rs.randint(0, 256, (224, 224, 3), np.uint8) for _ in range(16)]
    arrays = (arrays * (n // 16 + 1))[:n]

    def arr(s):
        return lambda a, i: s.process_array(a, 1, 0, i)

    def enc(s):
        return lambda b, i: s.process_encoded(b, 1, 0, i)

    crop, color, flip = ftp.fbresnet_augmentor(224)
    rows = []
    sq = dict(input_size=(224, 224))
    base = per_image(arr(spec([O.HorizontalFlip(p=0.0)], **sq)), arrays, runs)
    rows.append(("call overhead (224x224 array, p=0 flip)", base, None))
    rows.append(("TensorpackColor (224x224)", per_image(arr(spec([color], **sq)), arrays, runs), base))
    set_simd_tp(False)
    rows.append(("TensorpackColor (224x224), scalar path (set_simd_tp(False))",
                 per_image(arr(spec([color], **sq)), arrays, runs), base))
    set_simd_tp(True)
    for k, name in enumerate(("brightness", "contrast", "saturation", "lighting")):
        only = [O.TensorpackColor(**{m: v for m, v in (("brightness", (1.0, 1.0)), ("contrast", (1.0, 1.0)),
                                                      ("saturation", 0.0), ("lighting_std", 0.0)) if m != name})]
        rows.append((f"  TensorpackColor, {name} varying (all 4 passes run)", per_image(arr(spec(only, **sq)), arrays, runs),
                     base))
    rows.append(("HorizontalFlip p=1 (224x224)", per_image(arr(spec([O.HorizontalFlip(p=1.0)], **sq)), arrays, runs), base))
    import cv2
    decoded = [cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1].copy() for b in blobs]
    rows.append(("array -> TensorpackCrop (bicubic resize of the box, or the fallback)",
                 per_image(arr(spec([crop])), decoded, runs), None))
    set_simd_resize(False)
    rows.append(("array -> TensorpackCrop, OpenCV's cv::resize (set_simd_resize(False))",
                 per_image(arr(spec([crop])), decoded, runs), None))
    rows.append(("JPEG -> whole chain, cv::resize (set_simd_resize(False))",
                 per_image(enc(spec([crop, color, flip])), blobs, runs), None))
    set_simd_resize(True)
    for dct in (False, True):
        rows.append((f"JPEG -> TensorpackCrop (ROI decode + bicubic, dct_scaling={dct})",
                     per_image(enc(spec([crop], dct_scaling=dct)), blobs, runs), None))
        rows.append((f"JPEG -> whole chain (dct_scaling={dct})",
                     per_image(enc(spec([crop, color, flip], dct_scaling=dct)), blobs, runs), None))
    set_simd_tp(False)
    rows.append(("JPEG -> whole chain, scalar TensorpackColor",
                 per_image(enc(spec([crop, color, flip])), blobs, runs), None))
    set_simd_tp(True)
    print(f"{n} images, {runs} runs, 1 thread; thread CPU us per image (median of runs); load average "
          f"{os.getloadavg()[0]:.2f}")
    for name, v, b in rows:
        extra = f"   (minus overhead: {v - b:7.1f})" if b is not None else ""
        print(f"  {name:70s} {v:8.1f}{extra}")


if __name__ == "__main__":
    main()
