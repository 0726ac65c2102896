"""High-resolution sources: the ``hires`` task's camera-like JPEGs
(fastq.bench.testdata.make_hires_dataset: 1800-3200 px, sensor noise, quality 92)
as they are, ``fastq prepare``d losslessly, and as training-resolution copies
(``fastq prepare --max-side N``), in one run (docs/prepare.md).

For each set it reports:

1. bytes per image (mean file size);
2. single-thread CPU-µs per image of the reference chain (RandomResizedCrop 224 +
   flip + Normalize, float32; ImageSpec.process_encoded from bytes, thread CPU time,
   paired and interleaved per image, median of --passes passes), and for the
   lossless copy also with segment decoding switched off;
3. entropy-coded bytes per image the crop decode has to read: on a file with
   restart segments that tile each MCU row, the segments that cover the crop box
   (counted exactly from the RST marker offsets); on a file without them, every
   byte of the scan down to the crop's bottom MCU row (estimated as that row's share
   of the scan) - against the crop's share of the file's pixels;
4. for each --max-side copy: how far RandomResizedCrop(224) outputs made from the
   copy differ from those made from the original for the same crop boxes (box
   sampled torchvision-style in the original, the same box in relative coordinates
   on the copy; both rendered by the same resampler: cv2.resize INTER_AREA of the
   whole image to the size that makes the box 224 x 224, then the crop), as PSNR
   (dB) and SSIM (skimage.metrics.structural_similarity), median and 5th
   percentile over images x --crops, and the share of crops that the copy has to
   upsample.  (fastq bench --task hires --hires-forms measures the same against
   DALI CPU in one run: fastq.bench.hires.)

Usage: python benchmarks/bench_hires.py [--images 60] [--max-side 512,1024]
       [--quality 90] [--passes 3] [--crops 8] [--data-dir DIR] [--json out.json]
Tiny (tests/bench/test_benchmarks.py): --images 3 --passes 1 --crops 2 --min-width 300 --max-width 400
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

import numpy as np  # noqa: E402

from fastq.bench.entropy import entropy_bytes, scan_layout  # noqa: E402,F401  (scan_layout: the script's API)
from fastq.bench.hires import psnr, render, rrc_box  # noqa: E402,F401  (shared with fastq bench --hires-forms)
from fastq.bench.tasks import REFERENCE, SIZE  # noqa: E402


def single_thread(sets, passes):
    """Median over passes of the mean thread-CPU-µs/image per config {name: (blobs, segment decode)}."""
    from fastq._native import _image
    from fastq import ops as O
    _image.set_opencv_threads(1)
    spec = _image.ImageSpec(O.compile_ops(REFERENCE.fastq_ops()))
    names = list(sets)
    n = len(sets[names[0]][0])
    res = {k: [] for k in names}
    for ps in range(passes + 1):  # pass 0: warm-up
        acc = dict.fromkeys(names, 0.0)
        for i in range(n):
            r = (i + ps) % len(names)
            for k in names[r:] + names[:r]:
                blobs, seg = sets[k]
                _image.set_segment_decode(seg)
                t = time.thread_time()
                spec.process_encoded(blobs[i], 0, 1, i)
                acc[k] += time.thread_time() - t
        if ps:
            for k in names:
                res[k].append(acc[k] / n * 1e6)
    _image.set_segment_decode(True)
    return {k: statistics.median(v) for k, v in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=60)
    ap.add_argument("--max-side", default="512,1024", help="comma-separated --max-side values")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--intervals", default="",
                    help="also lossless copies with these restart interval targets (MCUs), e.g. 2,8,16 "
                         "(the default copy uses fastq prepare's default)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--crops", type=int, default=8, help="RRC boxes per image for the PSNR")
    ap.add_argument("--min-width", type=int, default=1800)
    ap.add_argument("--max-width", type=int, default=3200)
    ap.add_argument("--data-dir", default=None, help="where the sets are written (default: a temporary folder)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import cv2
    from skimage.metrics import structural_similarity
    from fastq._native import _image
    from fastq import ops as O
    from fastq.bench import testdata
    from fastq.prepare import prepare_tree
    sides = [int(s) for s in a.max_side.split(",") if s]
    root = a.data_dir or tempfile.mkdtemp(prefix="bench_hires_")
    src = os.path.join(root, f"hires_{a.images}_{a.min_width}_{a.max_width}_seed0")
    t = time.perf_counter()
    names = [f"{i:06d}.jpg" for i in range(a.images)]
    if a.data_dir and all(os.path.isfile(os.path.join(src, n)) for n in names):
        paths = [os.path.join(src, n) for n in names]  # made by an earlier run with these arguments (seeded)
    else:
        paths = testdata.make_hires_dataset(src, a.images, seed=0, min_width=a.min_width,
                                            max_width=a.max_width)
    print(f"{a.images} camera-like JPEGs in {src} ({time.perf_counter() - t:.1f} s); load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    names = [os.path.basename(p) for p in paths]
    sets = {"original": src}
    extra = [(f"lossless interval {k}", {"interval": int(k)}) for k in a.intervals.split(",") if k]
    for label, kw in [("lossless", {})] + extra + [(f"max-side {s}", {"max_side": s, "quality": a.quality}) for s in sides]:
        dst = os.path.join(root, "prep_" + label.replace(" ", "_"))
        t = time.perf_counter()
        st = prepare_tree(src, dst, progress=False, **kw)
        print(f"prepare {label}: {time.perf_counter() - t:.1f} s ({st['rewritten']} lossless, "
              f"{st['resized']} shrunk, {st['kept']} kept)")
        sets[label] = dst
    blobs = {k: [open(os.path.join(d, n), "rb").read() for n in names] for k, d in sets.items()}
    res = {"images": a.images, "quality": a.quality, "load": os.getloadavg()[0], "sets": {}}
    configs = {k: (b, True) for k, b in blobs.items()}
    configs["lossless, segment decode off"] = (blobs["lossless"], False)
    us = single_thread(configs, a.passes)
    spec = _image.ImageSpec(O.compile_ops(REFERENCE.fastq_ops()))
    print(f"\n{'set':32s} {'kB/img':>8s} {'µs/img':>8s} {'x orig':>7s} {'entropy kB read':>16s} {'crop px share':>14s}")
    for k in configs:
        bl = configs[k][0]
        read, px = [], []
        if configs[k][1]:
            for i, b in enumerate(bl):
                _, ex = spec.process_encoded(b, 0, 1, i)
                box = ex["crop_src"]
                H, W = ex["src_shape"]
                read.append(entropy_bytes(b, box)[0])
                px.append(box[2] * box[3] / (W * H))
        row = {"kB_per_image": statistics.mean(len(b) for b in bl) / 1e3, "us_per_image": us[k],
               "speedup_vs_original": us["original"] / us[k]}
        if read:
            row["entropy_kB_read"] = statistics.mean(read) / 1e3
            row["crop_pixel_share"] = statistics.mean(px)
        res["sets"][k] = row
        print(f"{k:32s} {row['kB_per_image']:8.1f} {us[k]:8.0f} {row['speedup_vs_original']:7.2f} "
              f"{row.get('entropy_kB_read', float('nan')):16.1f} {row.get('crop_pixel_share', float('nan')):14.3f}")
    # quality of the copies: the same RRC boxes from the original and from each copy
    rng = np.random.default_rng(0)
    origs = [cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR) for b in blobs["original"]]
    boxes = []
    for img in origs:
        H, W = img.shape[:2]
        boxes.append([(x / W, y / H, w / W, h / H) for x, y, w, h in (rrc_box(rng, H, W) for _ in range(a.crops))])
    print(f"\nRandomResizedCrop({SIZE}) from the copy vs from the original, same boxes "
          f"({a.images} images x {a.crops} crops):")
    for s in sides:
        k = f"max-side {s}"
        vals, ssim, up = [], [], 0
        for img, b, rels in zip(origs, blobs[k], boxes):
            cp = cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
            for rel in rels:
                ra, rb = render(img, rel), render(cp, rel)
                vals.append(psnr(ra, rb))
                ssim.append(float(structural_similarity(ra, rb, channel_axis=2, data_range=255)))
                up += rel[2] * cp.shape[1] < SIZE or rel[3] * cp.shape[0] < SIZE
        q = {"psnr_median_db": float(np.median(vals)), "psnr_p5_db": float(np.percentile(vals, 5)),
             "ssim_median": float(np.median(ssim)), "ssim_p5": float(np.percentile(ssim, 5)),
             "upsampled_share": up / len(vals)}
        res["sets"][k].update(q)
        print(f"  {k:14s} PSNR median {q['psnr_median_db']:.1f} dB, 5th percentile {q['psnr_p5_db']:.1f} dB; "
              f"SSIM median {q['ssim_median']:.4f}, 5th percentile {q['ssim_p5']:.4f}; "
              f"{100 * q['upsampled_share']:.0f} % of the crops are upsampled from the copy")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
