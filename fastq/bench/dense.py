"""The dense-prediction presets of ``fastq bench`` (tasks ``detection`` and ``segmentation``,
fastq.bench.tasks) and their peers, on the generated ``dense`` set:

  detection     ResizeShortestEdge(800, max_size=1333) -> h-flip, boxes moved with the image
                (at most MAX_BOXES per image, padded); each batch padded to its largest image
                rounded up to a multiple of 32 (fastq: Pipeline(pad="batch", pad_multiple=32));
                uint8, batch 8.
  segmentation  RandomResizedCrop(512) -> h-flip, the label map moved by nearest neighbour;
                uint8, batch 8.

Peers (each in its own process, fastq.bench.child):
  fastq   Files(targets=Targets(boxes | masks)) with the chain above;
  torch   torchvision v2 on tv_tensors.BoundingBoxes / Mask in DataLoader(num_workers=W), a
          collate that pads to the batch maximum (multiple of 32);
  dali    (detection) DALI CPU: external_source of the encoded files and normalized boxes ->
          decoders.image -> resize(resize_shorter, max_size) -> flip + bb_flip -> pad(align=32)
          to the batch maximum;
  pyloop  cv2 + numpy in one Python thread, the same padding.

The set (fastq.bench.testdata.make_dense_dataset): COCO/VOC-like JPEGs (360-640 px) from the
bundled photos, 1-8 random boxes each and a random label map (PNG, 21 classes), whose
annotations are in ``dense_annotations.json`` next to the images.
"""
import json
import os
import random

__all__ = ["DENSE_TASKS", "MAX_BOXES", "load_annotations", "dense_peer"]

DENSE_TASKS = ("detection", "segmentation")
MAX_BOXES = 8
ANNOTATIONS = "dense_annotations.json"


def load_annotations(paths):
    """{"boxes": [(k, 4) float32], "classes": [(k,) int32], "mask_paths": [...]} for the paths
    of a generated dense set (BenchInputError-like ValueError when the file is missing)."""
    import numpy as np
    d = os.path.dirname(os.path.abspath(paths[0]))
    f = os.path.join(d, ANNOTATIONS)
    if not os.path.exists(f):
        raise ValueError(f"the detection and segmentation tasks need boxes and label maps: {f} is missing "
                         f"(run them on the generated set: fastq bench --task detection, without DATA)")
    with open(f) as fh:
        ann = json.load(fh)
    by_name = {a["file"]: a for a in ann["images"]}
    out = {"boxes": [], "classes": [], "mask_paths": []}
    for p in paths:
        a = by_name[os.path.basename(p)]
        out["boxes"].append(np.asarray(a["boxes"], np.float32).reshape(-1, 4))
        out["classes"].append(np.asarray(a["classes"], np.int32).reshape(-1))
        out["mask_paths"].append(os.path.join(d, a["mask"]))
    return out


def _pad_to(n, m=32):
    return -(-n // m) * m


# ---------------------------------------------------------------------------- fastq

def _fastq(paths, workers, task):
    import numpy as np

    import fastq
    from fastq.targets import Targets
    ann = load_annotations(paths)
    if task.aug == "detection":
        tg = Targets(ann["boxes"], ann["classes"], max_boxes=MAX_BOXES)
        opts = dict(pad="batch", pad_multiple=32)
    else:
        import cv2
        masks = [cv2.imread(m, cv2.IMREAD_UNCHANGED) for m in ann["mask_paths"]]
        tg = Targets([np.zeros((0, 4), np.float32)] * len(paths), max_boxes=0, image_info=False, masks=masks,
                     mask_fill=255)
        opts = {}
    p = fastq.Pipeline(fastq.sources.Files(paths, targets=tg), batch_size=task.batch, queue_size=4, workers=workers,
                       ops=task.fastq_ops(), dtype="uint8", seed=0, shuffle=True, pin_memory=False, **opts)

    def run_epoch():
        n = 0
        for b in p:
            n += len(b[0])
            del b  # release the slot at once
        return n

    def info():
        s = p.stats()
        return {"fastq": fastq.__version__, "chain": [type(o).__name__ for o in task.fastq_ops()], "options": opts,
                "stages": s.get("stages"), "skipped": s.get("skipped")}
    return run_epoch, p.close, info


# ---------------------------------------------------------------------------- torchvision

def _torch(paths, workers, task):
    import torch
    import torchvision
    from torchvision import io, tv_tensors
    from torchvision.transforms import v2
    ann = load_annotations(paths)
    det = task.aug == "detection"

    class Data(torch.utils.data.Dataset):
        t = None

        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            if self.t is None:
                geo = (v2.Resize(800, max_size=1333, antialias=False) if det
                       else v2.RandomResizedCrop(task.size, antialias=False))
                self.t = v2.Compose([geo, v2.RandomHorizontalFlip()])
            img = io.decode_jpeg(io.read_file(paths[i]))
            if det:
                h, w = img.shape[1:]
                boxes = tv_tensors.BoundingBoxes(torch.from_numpy(ann["boxes"][i]), format="XYXY",
                                                 canvas_size=(h, w))
                img, boxes = self.t(tv_tensors.Image(img), boxes)
                b = torch.zeros((MAX_BOXES, 4))
                b[:len(boxes)] = boxes[:MAX_BOXES]
                c = torch.full((MAX_BOXES,), -1, dtype=torch.int32)
                c[:len(boxes)] = torch.from_numpy(ann["classes"][i][:MAX_BOXES])
                return img, b, c, min(len(boxes), MAX_BOXES)
            mask = io.decode_png(io.read_file(ann["mask_paths"][i]))[0]
            img, mask = self.t(tv_tensors.Image(img), tv_tensors.Mask(mask))
            return img, mask

    def collate(rows):
        if not det:
            return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])
        hb = _pad_to(max(r[0].shape[1] for r in rows))
        wb = _pad_to(max(r[0].shape[2] for r in rows))
        out = torch.zeros((len(rows), 3, hb, wb), dtype=torch.uint8)
        for k, r in enumerate(rows):
            out[k, :, :r[0].shape[1], :r[0].shape[2]] = r[0]
        return (out, torch.stack([r[1] for r in rows]), torch.stack([r[2] for r in rows]),
                torch.tensor([r[3] for r in rows]))

    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Data(), batch_size=task.batch, shuffle=True, drop_last=True,
                                         num_workers=workers, persistent_workers=True, collate_fn=collate)

    def run_epoch():
        n = 0
        for b in loader:
            n += b[0].shape[0]
            del b
        return n
    return run_epoch, None, lambda: {"torch": torch.__version__, "torchvision": torchvision.__version__}


# ---------------------------------------------------------------------------- DALI (detection)

def _dali(paths, workers, task):
    if task.aug != "detection":
        raise ValueError("the DALI peer implements the detection preset only")
    import cv2
    import numpy as np
    from nvidia.dali import fn, pipeline_def, types
    ann = load_annotations(paths)
    enc = [np.fromfile(p, np.uint8) for p in paths]
    rel = []
    for i, p in enumerate(paths):
        h, w = cv2.imread(p).shape[:2]  # setup, not timed
        rel.append(np.clip(ann["boxes"][i] / np.float32([w, h, w, h]), 0, 1).astype(np.float32))
    rng = np.random.default_rng(0)
    B = task.batch
    state = {"order": rng.permutation(len(paths))}

    def source(info):
        order = state["order"]
        if (info.iteration + 1) * B > len(order):
            state["order"] = rng.permutation(len(paths))
            raise StopIteration
        idx = order[info.iteration * B:(info.iteration + 1) * B]
        return [enc[i] for i in idx], [rel[i] for i in idx]

    @pipeline_def(batch_size=B, num_threads=workers, device_id=None, exec_dynamic=True)
    def pipe():
        jpegs, bb = fn.external_source(source=source, num_outputs=2, batch_info=True,
                                       dtype=[types.UINT8, types.FLOAT])
        img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_shorter=800, max_size=1333)
        flip = fn.random.coin_flip()
        img = fn.flip(img, horizontal=flip)
        bb = fn.bb_flip(bb, ltrb=True, horizontal=flip)
        img = fn.pad(img, axes=(0, 1), align=(32, 32))  # to the batch maximum, a multiple of 32
        return img, bb

    p = pipe()
    p.build()

    def run_epoch():
        n = 0
        while True:
            try:
                out = p.run()
            except StopIteration:
                p.reset()
                break
            n += len(out[0])
        return n
    import nvidia.dali
    return run_epoch, None, lambda: {"dali": nvidia.dali.__version__}


# ---------------------------------------------------------------------------- Python + cv2

def _pyloop(paths, workers, task):
    import cv2
    import numpy as np
    ann = load_annotations(paths)
    rng = random.Random(1)
    B, det = task.batch, task.aug == "detection"

    def detection(i):
        img = cv2.imread(paths[i])[:, :, ::-1]
        h, w = img.shape[:2]
        sc = 800 / min(h, w)
        if max(h, w) * sc > 1333:
            sc = 1333 / max(h, w)
        nh, nw = int(h * sc + 0.5), int(w * sc + 0.5)
        img = cv2.resize(img, (nw, nh))
        b = ann["boxes"][i] * np.float32([nw / w, nh / h, nw / w, nh / h])
        if rng.random() < 0.5:
            img = img[:, ::-1]
            b = np.stack([nw - b[:, 2], b[:, 1], nw - b[:, 0], b[:, 3]], 1)
        pb = np.zeros((MAX_BOXES, 4), np.float32)
        pb[:len(b)] = b[:MAX_BOXES]
        return img, pb

    def segmentation(i):
        img = cv2.imread(paths[i])[:, :, ::-1]
        m = cv2.imread(ann["mask_paths"][i], cv2.IMREAD_UNCHANGED)
        h, w = img.shape[:2]
        S = task.size
        area = h * w * rng.uniform(0.08, 1.0)
        r = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        cw, ch = min(w, int(round(np.sqrt(area * r)))), min(h, int(round(np.sqrt(area / r))))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        img = cv2.resize(img[y:y + ch, x:x + cw], (S, S))
        m = cv2.resize(m[y:y + ch, x:x + cw], (S, S), interpolation=cv2.INTER_NEAREST)
        if rng.random() < 0.5:
            img, m = img[:, ::-1], m[:, ::-1]
        return img, m

    def run_epoch():
        idx = list(range(len(paths)))
        rng.shuffle(idx)
        n = 0
        for s in range(0, len(idx) - B + 1, B):
            rows = [(detection if det else segmentation)(i) for i in idx[s:s + B]]
            if det:
                hb = _pad_to(max(r[0].shape[0] for r in rows))
                wb = _pad_to(max(r[0].shape[1] for r in rows))
                images = np.zeros((B, hb, wb, 3), np.uint8)
                for k, r in enumerate(rows):
                    images[k, :r[0].shape[0], :r[0].shape[1]] = r[0]
                other = np.stack([r[1] for r in rows])
            else:
                images, other = np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
            n += len(images)
            del images, other
        return n
    return run_epoch, None, lambda: {"cv2": cv2.__version__}


_PEERS = {"fastq": _fastq, "torch": _torch, "dali": _dali, "pyloop": _pyloop}


def dense_peer(name, paths, workers, task):
    """(run_epoch, close, info) of peer `name` for a dense task (fastq.bench.peers calls it)."""
    if name not in _PEERS:
        raise ValueError(f"peer {name!r} does not implement the {task.aug} preset")
    return _PEERS[name](paths, workers, task)
