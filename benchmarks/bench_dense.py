"""Detection and segmentation input pipelines: fastq against torchvision v2, DALI
(CPU) and a plain Python + cv2 loop, in the same run, alternating, medians.

    python benchmarks/bench_dense.py [--task detection|segmentation|both] [--images 96]
                                     [--workers 2] [--repeats 3] [--json out.json]

detection    ResizeShortestEdge(short, max_size) + HorizontalFlip + Pad to a fixed
             square (a multiple of 32 above max_size), boxes moved with the image and
             padded to max_boxes; uint8 NHWC, batch 8.  "fastq pad='batch'": the same
             chain padded per batch to its largest image (a multiple of 32) instead of
             the fixed square (the `fastq bench --task detection` preset).  Peers: torchvision v2 (read_file
             + decode_jpeg, Resize(short, max_size=...) and RandomHorizontalFlip on
             tv_tensors.BoundingBoxes, pad) in DataLoader(num_workers=W); DALI CPU
             (decoders.image, resize(resize_shorter, max_size), flip + bb_flip, pad);
             cv2 + numpy in one Python thread.
segmentation RandomResizedCrop(S) + HorizontalFlip with the label map moved by nearest
             neighbour; uint8, batch 8.  Peers: torchvision v2 with tv_tensors.Mask in
             DataLoader(num_workers=W); cv2 + numpy in one Python thread.

The data are JPEGs built from the bundled photos (360-640 px, like COCO / VOC) with
random boxes and random label maps (PNG).  Each peer that cannot run (not installed,
an error) is listed with the reason.  Ratios are fastq / peer in this run.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastq  # noqa: E402
from fastq import ops as O  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.targets import Targets  # noqa: E402

BATCH = 8


def make_data(root, n, seed=0):
    import cv2
    paths = testdata.make_jpeg_dataset(os.path.join(root, "images"), n, seed=seed, min_side=360, max_side=640)
    rng = np.random.default_rng(seed)
    boxes, classes, masks, mask_paths = [], [], [], []
    os.makedirs(os.path.join(root, "masks"), exist_ok=True)
    for i, p in enumerate(paths):
        h, w = cv2.imread(p, cv2.IMREAD_REDUCED_GRAYSCALE_2).shape[:2]
        h, w = h * 2, w * 2
        img_h, img_w = cv2.imread(p).shape[:2]
        k = int(rng.integers(1, 9))
        x0, y0 = rng.uniform(0, img_w * 0.8, k), rng.uniform(0, img_h * 0.8, k)
        b = np.stack([x0, y0, np.minimum(x0 + rng.uniform(8, img_w / 3, k), img_w),
                      np.minimum(y0 + rng.uniform(8, img_h / 3, k), img_h)], 1).astype(np.float32)
        boxes.append(b)
        classes.append(rng.integers(1, 81, k).astype(np.int32))
        m = (rng.integers(0, 21, (img_h // 16 + 1, img_w // 16 + 1))).astype(np.uint8)
        m = cv2.resize(m, (img_w, img_h), interpolation=cv2.INTER_NEAREST)
        mp = os.path.join(root, "masks", f"{i:06d}.png")
        cv2.imwrite(mp, m)
        masks.append(m)
        mask_paths.append(mp)
    return paths, boxes, classes, masks, mask_paths


# ---------------------------------------------------------------------------- fastq

def fastq_detection(d, a, max_boxes):
    tg = Targets(d["boxes"], d["classes"], max_boxes=max_boxes)
    ops = [O.ResizeShortestEdge(a.short, a.max_size), O.HorizontalFlip(), O.Pad(size=(a.pad, a.pad))]
    pipe = fastq.Pipeline(fastq.sources.Files(d["paths"], targets=tg), batch_size=BATCH, ops=ops, dtype="uint8",
                          workers=a.workers, shuffle=True, seed=0, drop_remainder=False)
    return pipe


def fastq_detection_batch_pad(d, a, max_boxes):
    """The same chain without the fixed Pad: each batch padded to its largest image, a
    multiple of 32 (Pipeline(pad="batch"); `fastq bench --task detection` runs this one)."""
    tg = Targets(d["boxes"], d["classes"], max_boxes=max_boxes)
    ops = [O.ResizeShortestEdge(a.short, a.max_size), O.HorizontalFlip()]
    return fastq.Pipeline(fastq.sources.Files(d["paths"], targets=tg), batch_size=BATCH, ops=ops, dtype="uint8",
                          workers=a.workers, shuffle=True, seed=0, drop_remainder=False, pad="batch",
                          pad_multiple=32)


def fastq_segmentation(d, a):
    tg = Targets([np.zeros((0, 4), np.float32)] * len(d["paths"]), max_boxes=0, image_info=False,
                 masks=d["masks"], mask_fill=255)
    ops = [O.RandomResizedCrop(a.seg_size), O.HorizontalFlip()]
    return fastq.Pipeline(fastq.sources.Files(d["paths"], targets=tg), batch_size=BATCH, ops=ops, dtype="uint8",
                          workers=a.workers, shuffle=True, seed=0, drop_remainder=False)


def epochs_fastq(pipe):
    """One call = one timed epoch of an already built pipeline."""
    def epoch():
        n = 0
        t0 = time.perf_counter()
        for b in pipe:
            n += len(b[0])
            del b
        return n / (time.perf_counter() - t0)
    return epoch


# ---------------------------------------------------------------------------- torchvision

class _TvDet:
    def __init__(self, d, a, max_boxes):
        self.d, self.a, self.max_boxes = d, a, max_boxes
        self.t = None

    def __len__(self):
        return len(self.d["paths"])

    def __getitem__(self, i):
        import torch
        from torchvision import io, tv_tensors
        from torchvision.transforms import v2
        if self.t is None:
            self.t = v2.Compose([v2.Resize(self.a.short, max_size=self.a.max_size, antialias=False),
                                 v2.RandomHorizontalFlip()])
        img = io.decode_jpeg(io.read_file(self.d["paths"][i]))
        h, w = img.shape[1:]
        boxes = tv_tensors.BoundingBoxes(torch.from_numpy(self.d["boxes"][i]), format="XYXY", canvas_size=(h, w))
        img, boxes = self.t(tv_tensors.Image(img), boxes)
        out = torch.zeros((3, self.a.pad, self.a.pad), dtype=torch.uint8)
        out[:, :img.shape[1], :img.shape[2]] = img
        b = torch.zeros((self.max_boxes, 4))
        b[:len(boxes)] = boxes[:self.max_boxes]
        c = torch.full((self.max_boxes,), -1, dtype=torch.int32)
        c[:len(boxes)] = torch.from_numpy(self.d["classes"][i][:self.max_boxes])
        return out, b, c, min(len(boxes), self.max_boxes)


class _TvSeg:
    def __init__(self, d, a):
        self.d, self.a = d, a
        self.t = None

    def __len__(self):
        return len(self.d["paths"])

    def __getitem__(self, i):
        from torchvision import io, tv_tensors
        from torchvision.transforms import v2
        if self.t is None:
            self.t = v2.Compose([v2.RandomResizedCrop(self.a.seg_size, antialias=False), v2.RandomHorizontalFlip()])
        img = io.decode_jpeg(io.read_file(self.d["paths"][i]))
        mask = io.decode_png(io.read_file(self.d["mask_paths"][i]))[0]
        img, mask = self.t(tv_tensors.Image(img), tv_tensors.Mask(mask))
        return img, mask


def epochs_torch(ds, workers):
    """persistent_workers: the worker processes start once (before the warm-up epoch)."""
    import torch
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                                     persistent_workers=workers > 0)

    def epoch():
        n = 0
        t0 = time.perf_counter()
        for b in dl:
            n += len(b[0])
        return n / (time.perf_counter() - t0)
    return epoch


# ---------------------------------------------------------------------------- DALI

def epochs_dali_detection(d, a, max_boxes):
    from nvidia.dali import fn, pipeline_def, types
    paths, boxes = d["paths"], d["boxes"]
    sizes = [None] * len(paths)
    import cv2
    for i, p in enumerate(paths):
        sizes[i] = cv2.imread(p, cv2.IMREAD_REDUCED_GRAYSCALE_8).shape[:2]
    enc = [np.fromfile(p, np.uint8) for p in paths]
    rel = []
    for i, p in enumerate(paths):
        h, w = cv2.imread(p).shape[:2]
        rel.append((boxes[i] / np.float32([w, h, w, h])).astype(np.float32))
    order = np.random.default_rng(0).permutation(len(paths))

    def source(info):
        if info.iteration * BATCH >= len(order):
            raise StopIteration
        idx = order[info.iteration * BATCH:(info.iteration + 1) * BATCH]
        return [enc[i] for i in idx], [rel[i] for i in idx]

    @pipeline_def(batch_size=BATCH, num_threads=a.workers, device_id=None, exec_dynamic=True)
    def pipe():
        jpegs, bb = fn.external_source(source=source, num_outputs=2, batch_info=True, dtype=[types.UINT8,
                                                                                           types.FLOAT])
        img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_shorter=a.short, max_size=a.max_size)
        flip = fn.random.coin_flip()
        img = fn.flip(img, horizontal=flip)
        bb = fn.bb_flip(bb, ltrb=True, horizontal=flip)
        img = fn.pad(img, axes=(0, 1), shape=(a.pad, a.pad))
        return img, bb

    p = pipe()
    p.build()

    def epoch():
        n = 0
        t0 = time.perf_counter()
        while True:
            try:
                out = p.run()
            except StopIteration:
                p.reset()
                break
            n += len(out[0])
        return n / (time.perf_counter() - t0)
    return epoch


# ---------------------------------------------------------------------------- Python + cv2

def run_cv2_detection(d, a, max_boxes, rng):
    import cv2
    n = 0
    t0 = time.perf_counter()
    order = rng.permutation(len(d["paths"]))
    for s in range(0, len(order), BATCH):
        imgs, bxs = [], []
        for i in order[s:s + BATCH]:
            img = cv2.imread(d["paths"][i])[:, :, ::-1]
            h, w = img.shape[:2]
            sc = a.short / min(h, w)
            if max(h, w) * sc > a.max_size:
                sc = a.max_size / max(h, w)
            nh, nw = int(h * sc + 0.5), int(w * sc + 0.5)
            img = cv2.resize(img, (nw, nh))
            b = d["boxes"][i] * np.float32([nw / w, nh / h, nw / w, nh / h])
            if rng.random() < 0.5:
                img = img[:, ::-1]
                b = np.stack([nw - b[:, 2], b[:, 1], nw - b[:, 0], b[:, 3]], 1)
            out = np.zeros((a.pad, a.pad, 3), np.uint8)
            out[:nh, :nw] = img
            pb = np.zeros((max_boxes, 4), np.float32)
            pb[:len(b)] = b[:max_boxes]
            imgs.append(out)
            bxs.append(pb)
        np.stack(imgs), np.stack(bxs)
        n += len(imgs)
    return n / (time.perf_counter() - t0)


def run_cv2_segmentation(d, a, rng):
    import cv2
    n = 0
    t0 = time.perf_counter()
    order = rng.permutation(len(d["paths"]))
    S = a.seg_size
    for s in range(0, len(order), BATCH):
        imgs, ms = [], []
        for i in order[s:s + BATCH]:
            img = cv2.imread(d["paths"][i])[:, :, ::-1]
            m = cv2.imread(d["mask_paths"][i], cv2.IMREAD_UNCHANGED)
            h, w = img.shape[:2]
            area = h * w * rng.uniform(0.08, 1.0)
            r = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            cw, ch = min(w, int(round(np.sqrt(area * r)))), min(h, int(round(np.sqrt(area / r))))
            x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            img = cv2.resize(img[y:y + ch, x:x + cw], (S, S))
            m = cv2.resize(m[y:y + ch, x:x + cw], (S, S), interpolation=cv2.INTER_NEAREST)
            if rng.random() < 0.5:
                img, m = img[:, ::-1], m[:, ::-1]
            imgs.append(img)
            ms.append(m)
        np.stack(imgs), np.stack(ms)
        n += len(imgs)
    return n / (time.perf_counter() - t0)


# ---------------------------------------------------------------------------- main

def measure(task, d, a):
    """Each peer is built once and runs one warm-up epoch (worker start-up, first-call
    costs); then its timed epochs alternate with the others'."""
    max_boxes = max(len(b) for b in d["boxes"])
    rng = np.random.default_rng(0)
    if task == "detection":
        makers = {"fastq": lambda: epochs_fastq(fastq_detection(d, a, max_boxes)),
                  "fastq pad='batch'": lambda: epochs_fastq(fastq_detection_batch_pad(d, a, max_boxes)),
                  f"torchvision v2 DataLoader({a.workers})": lambda: epochs_torch(_TvDet(d, a, max_boxes), a.workers),
                  "DALI CPU": lambda: epochs_dali_detection(d, a, max_boxes),
                  "Python + cv2 loop": lambda: lambda: run_cv2_detection(d, a, max_boxes, rng)}
    else:
        makers = {"fastq": lambda: epochs_fastq(fastq_segmentation(d, a)),
                  f"torchvision v2 DataLoader({a.workers})": lambda: epochs_torch(_TvSeg(d, a), a.workers),
                  "Python + cv2 loop": lambda: lambda: run_cv2_segmentation(d, a, rng)}
    epochs, unavailable = {}, {}
    for name, make in makers.items():
        try:
            epochs[name] = make()
            epochs[name]()  # warm-up
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            epochs.pop(name, None)
            unavailable[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    rates = {k: [] for k in epochs}
    for _ in range(a.repeats):
        for name, epoch in epochs.items():  # alternating: drift hits every peer alike
            rates[name].append(epoch())
    med = {k: statistics.median(v) for k, v in rates.items() if v}
    return {"median_img_s": med, "runs": rates, "unavailable": unavailable,
            "ratio_fastq_over": {k: med["fastq"] / v for k, v in med.items() if k != "fastq" and "fastq" in med}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["detection", "segmentation", "both"], default="both")
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--short", type=int, default=800)
    ap.add_argument("--max-size", type=int, default=1333)
    ap.add_argument("--seg-size", type=int, default=512)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    a.pad = -(-a.max_size // 32) * 32
    with tempfile.TemporaryDirectory(prefix="fastq_dense_") as tmp:
        paths, boxes, classes, masks, mask_paths = make_data(tmp, a.images)
        d = {"paths": paths, "boxes": boxes, "classes": classes, "masks": masks, "mask_paths": mask_paths}
        tasks = ["detection", "segmentation"] if a.task == "both" else [a.task]
        res = {}
        load = os.getloadavg()[0]
        for task in tasks:
            res[task] = r = measure(task, d, a)
            print(f"{task}: {a.images} images, batch {BATCH}, workers {a.workers}, {a.repeats} repeats, "
                  f"load {load:.1f} (medians, images/s)")
            for k, v in r["median_img_s"].items():
                ratio = f"   fastq x{r['ratio_fastq_over'][k]:.2f}" if k in r["ratio_fastq_over"] else ""
                print(f"  {k:34s} {v:9.1f}{ratio}")
            for k, why in r["unavailable"].items():
                print(f"  {k:34s} not available: {why}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
