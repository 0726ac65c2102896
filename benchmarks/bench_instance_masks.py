"""Per-instance masks (Mask R-CNN targets, docs/targets.md "Instance masks"): what they cost
in a fastq pipeline, against the usual Python path.

A COCO file is built from the bundled photos (JPEGs of --width x --height, --objects polygon
objects per image of 24 vertices).  fastq runs ResizeShortestEdge(--short, --max-size) +
HorizontalFlip + Pad with three target sets: boxes only, boxes + instance masks at the output
size, boxes + instance masks at 28 x 28 in their boxes (``instance_mask_size``).  The peer
makes the same full-size masks per image in Python (pycocotools ``annToMask`` at the source
size, ``cv2.resize`` INTER_NEAREST, flip, pad), without decoding images, so its time is the
masks' alone.  Reported: medians over --repeats of CPU time per image (process time: fastq's
worker threads are in the process) and wall time per image; load average.

    python benchmarks/bench_instance_masks.py --images 64 --repeats 3
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)


def make_coco(root, n, w, h, objects, rng):
    import cv2

    from fastq.bench.testdata import source_photos

    os.makedirs(os.path.join(root, "img"), exist_ok=True)
    photos = [img for img in (cv2.imread(p) for p in source_photos()[:8]) if img is not None]
    images, anns, aid = [], [], 1
    for k in range(n):
        cv2.imwrite(os.path.join(root, "img", f"{k:03d}.jpg"), cv2.resize(photos[k % len(photos)], (w, h)))
        images.append({"id": k, "file_name": f"img/{k:03d}.jpg", "height": h, "width": w})
        for _ in range(objects):
            cx, cy, r = rng.uniform(0.15 * w, 0.85 * w), rng.uniform(0.15 * h, 0.85 * h), rng.uniform(0.03, 0.12) * w
            a = np.sort(rng.uniform(0, 2 * np.pi, 24))
            xy = np.stack([np.clip(cx + r * np.cos(a), 0, w), np.clip(cy + r * np.sin(a), 0, h)], 1)
            (x0, y0), (x1, y1) = xy.min(0), xy.max(0)
            anns.append({"id": aid, "image_id": k, "category_id": 1, "iscrowd": 0, "area": 1.0,
                         "bbox": [x0, y0, x1 - x0, y1 - y0], "segmentation": [xy.ravel().tolist()]})
            aid += 1
    path = os.path.join(root, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}]}, f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--objects", type=int, default=7)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--short", type=int, default=512)
    ap.add_argument("--max-size", type=int, default=853)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import torchvision  # noqa: F401  (imported before anything that may import TensorFlow)

    import cv2

    import fastq
    from fastq import ops as O
    from fastq import targets as T
    from fastq.annotations.coco import load_coco

    work = tempfile.mkdtemp(prefix="fastq-inst-")
    path = make_coco(work, a.images, a.width, a.height, a.objects, np.random.default_rng(0))
    ann = load_coco(path)
    s = min(a.short / min(a.width, a.height), a.max_size / max(a.width, a.height))
    oh, ow = int(round(a.height * s)), int(round(a.width * s))
    ph, pw = -(-oh // 32) * 32, -(-ow // 32) * 32
    ops = [O.ResizeShortestEdge(a.short, a.max_size), O.HorizontalFlip(), O.Pad(size=(ph, pw))]
    modes = {"fastq boxes": {}, "fastq boxes + instance masks": {"instance_masks": True},
             "fastq boxes + instance masks 28x28": {"instance_masks": True, "instance_mask_size": 28}}
    res = {m: [] for m in modes}
    res["Python peer: masks only"] = []
    try:
        from pycocotools.coco import COCO
        coco = COCO(path)
    except ImportError:
        coco = None

    def peer():
        for k in range(a.images):
            im = coco.imgs[k]
            out = np.zeros((a.objects, ph, pw), np.uint8)
            for i, o in enumerate(coco.loadAnns(coco.getAnnIds(imgIds=[k]))):
                m = cv2.resize(coco.annToMask(o), (ow, oh), interpolation=cv2.INTER_NEAREST)
                out[i, :oh, :ow] = m[:, ::-1] if k % 2 else m
            assert im["height"] == a.height

    for rep in range(a.repeats):
        for m, kw in modes.items():
            tg = T.Targets.from_annotations(ann, image_info=False, **kw)
            with fastq.Pipeline(fastq.sources.Files(ann.keys, targets=tg), batch_size=a.batch, ops=ops,
                                dtype="uint8", workers=a.workers, seed=rep) as p:
                for _ in p:  # warm-up epoch
                    pass
                c0, t0 = time.process_time(), time.perf_counter()
                n = sum(len(b[0]) for b in p)
                res[m].append(((time.process_time() - c0) / n, (time.perf_counter() - t0) / n))
        if coco is not None:
            c0, t0 = time.process_time(), time.perf_counter()
            peer()
            res["Python peer: masks only"].append(((time.process_time() - c0) / a.images,
                                                   (time.perf_counter() - t0) / a.images))
    out = {}
    print(f"{a.images} images {a.width}x{a.height}, {a.objects} polygons each, output {ph}x{pw}, "
          f"batch {a.batch}, workers {a.workers}, {a.repeats} repeats")
    for m, v in res.items():
        if not v:
            print(f"{m:38s} unavailable (pycocotools not installed)")
            continue
        cpu, wall = float(np.median([c for c, _ in v])) * 1e3, float(np.median([w for _, w in v])) * 1e3
        out[m] = {"cpu_ms_per_image": cpu, "wall_ms_per_image": wall}
        print(f"{m:38s} CPU {cpu:6.2f} ms/image   wall {wall:6.2f} ms/image")
    print("load average", os.getloadavg())
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": out, "load": os.getloadavg()}, f)


if __name__ == "__main__":
    main()
