"""Digests of fixed op chains over every family of fastq's CPU-specific kernels, for
comparing runs under different CPU feature sets: the FASTQ_CPU masks
(tests/image/test_cpu_dispatch.py) and CPU models under qemu-x86_64
(scripts/test_cpu_models.sh).  Every kernel must give the baseline code's bytes, so the
digests of all runs must be equal.

    python cpu_dispatch_batches.py make DIR           # small JPEGs + a TFRecord shard (host)
    python cpu_dispatch_batches.py run DIR OUT.json   # digests + fastq._native._image.cpu_dispatch()
    python cpu_dispatch_batches.py compare A.json B.json ...   # exit 1 if a digest differs

`run` needs numpy and fastq only (no cv2), so it runs under qemu-x86_64 -cpu MODEL.
Families covered (kernel in brackets): colour table ops and policies [AVX-512 VBMI
lut], the warp / Sharpness / Color / Contrast mean [AVX2], random erasing, TensorpackColor
[AVX2] and TensorpackCrop's bicubic resize [AVX2], Pillow's resize (pil_*) and timm's
Pillow affine sampler [AVX2], timm's policies and the Keras layers (their
scalar kernels, on every level), the float32 write [AVX2+FMA], MixUp /
CutMix in float16 [F16C], and the TFRecord reader's CRC-32C [SSE4.2].
"""
import hashlib
import json
import os
import sys

import numpy as np

N_IMAGES = 8


def make(d):
    import cv2
    from fastq import tfrecord_codec
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(44)
    names, frames = [], []
    for i in range(N_IMAGES):
        h, w = int(rng.integers(70, 130)), int(rng.integers(70, 130))
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) * 127 // (w + h))], -1).astype(np.int32)
        img = np.clip(img + rng.integers(-40, 40, img.shape), 0, 255).astype(np.uint8)
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        name = f"{i:02d}.jpg"
        with open(os.path.join(d, name), "wb") as f:
            f.write(buf.tobytes())
        names.append(name)
        frames.append(tfrecord_codec.tfrecord_frame(tfrecord_codec.encode_example(
            {"image/encoded": buf.tobytes(), "image/class/label": [i % 3]})))
    with open(os.path.join(d, "data.tfrecord"), "wb") as f:
        f.write(b"".join(frames))
    with open(os.path.join(d, "files.json"), "w") as f:
        json.dump(names, f)


def chains():
    from fastq import ops as O
    R = O.Resize((64, 64))
    return {
        "color_lut": ([R, O.AutoContrast(), O.Equalize(), O.Posterize(5), O.Solarize(100), O.Invert()], "uint8"),
        "color_blend": ([R, O.Color((0.2, 1.8)), O.Contrast((0.3, 1.7)), O.Brightness((0.5, 1.5)),
                         O.Sharpness((0.1, 1.9))], "uint8"),
        "geometry": ([R, O.Rotate((-30, 30), fill=(10, 20, 30)), O.ShearX((-0.3, 0.3)), O.TranslateY((-9, 9)),
                      O.HorizontalFlip()], "uint8"),
        "autoaugment": ([R, O.AutoAugment()], "uint8"),
        "randaugment": ([R, O.RandAugment(num_ops=3, magnitude=12)], "uint8"),
        "trivialaugment": ([R, O.TrivialAugmentWide()], "uint8"),
        "tf_autoaugment": ([R, O.TFAutoAugment("v0", translate_const=20, cutout_const=10)], "uint8"),
        "erasing": ([R, O.Cutout(8), O.RandomErasing(p=1.0, value="random")], "uint8"),
        "tensorpack": ([O.TensorpackCrop(56), O.TensorpackColor()], "uint8"),
        "resize_bicubic": ([O.Resize((77, 61), interpolation="bicubic")], "uint8"),
        "resize_pil": ([O.Resize((77, 61), interpolation="pil_bicubic"),
                        O.Resize((40, 90), interpolation="pil_bilinear")], "uint8"),
        "pil_affine": ([R, O.TimmRandAugment(num_layers=2, magnitude=9, prob=1.0,
                                             ops=["Rotate", "ShearX", "TranslateYRel"])], "uint8"),
        "timm_policies": ([R, O.TimmRandAugment(), O.TimmAugMix()], "uint8"),
        "keras_layers": ([R, O.KerasRandomRotation(0.1), O.KerasRandomZoom(0.2), O.KerasRandomContrast(0.3),
                          O.KerasRandomBrightness(0.2)], "uint8"),
        "write_float32": ([O.RandomResizedCrop(48), O.HorizontalFlip(), O.Normalize()], "float32"),
        "write_float32_plain": ([O.Resize((40, 40))], "float32"),
    }


def _digest(batches):
    h = hashlib.sha256()
    for b in batches:
        for a in b:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:24]


def run(d, out):
    import fastq
    from fastq._native import _image
    with open(os.path.join(d, "files.json")) as f:
        paths = [os.path.join(d, n) for n in json.load(f)]
    labels = [i % 3 for i in range(len(paths))]
    res = {}

    stats = {}

    def epoch(name, src, **kw):
        """the digest of one epoch, or the error it raised (a digest that differs too)"""
        try:
            with fastq.Pipeline(src(), batch_size=4, queue_size=2, workers=2, seed=7, shuffle=True,
                                pin_memory=False, **kw) as p:
                batches = [tuple(x.copy() for x in b) for b in p]
                stats.update(p.stats())
            res[name] = _digest(batches)
        except Exception as e:  # noqa: BLE001 - recorded, compared
            res[name] = f"error: {type(e).__name__}: {e}"[:200]
    files = lambda: fastq.sources.Files(paths, labels=labels)  # noqa: E731
    for name, (chain, dtype) in chains().items():
        epoch(name, files, ops=chain, dtype=dtype)
    mix = fastq.MixUpCutMix(mixup_alpha=0.5, cutmix_alpha=0.0, num_classes=3, label_smoothing=0.0, seed=3)
    epoch("mix_float16", files, ops=[fastq.ops.Resize((40, 40))], dtype="float16", mix=mix)
    epoch("tfrecord_crc32c", lambda: fastq.sources.TFRecord(os.path.join(d, "data.tfrecord"), cache_index=False),
          ops=[fastq.ops.Resize((32, 32))], dtype="uint8")
    blob = np.random.default_rng(5).integers(0, 256, 4099, dtype=np.uint8).tobytes()
    res["crc32c"] = ",".join(str(_image.masked_crc32c(blob[:n])) for n in (0, 1, 7, 8, 9, 63, 64, 1000, 4099))
    doc = {"digests": res, "cpu": _image.cpu_dispatch(), "stats_cpu": stats.get("cpu")}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    k = doc["cpu"]
    print(f"{len(res)} digests -> {out}; kernels: {k['level']} (mask {k['mask']}, in effect: "
          f"{' '.join(k['effective']) or 'none'})")


def compare(paths):
    docs = [json.load(open(p)) for p in paths]
    ref = docs[0]["digests"]
    bad = 0
    print(f"{'digest':22s} " + " ".join(f"{os.path.basename(p)[:18]:>18s}" for p in paths))
    for k in ref:
        vals = [d["digests"].get(k) for d in docs]
        same = all(v == ref[k] for v in vals)
        bad += not same
        print(f"{k:22s} " + " ".join(f"{'same' if v == ref[k] else 'DIFFERS':>18s}" for v in vals))
    print("levels: " + ", ".join(f"{os.path.basename(p)}={d['cpu']['level']}" for p, d in zip(paths, docs)))
    print(f"{len(ref) - bad} of {len(ref)} digests equal in all {len(paths)} runs")
    return bad


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "run":
        run(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        sys.exit(1 if compare(sys.argv[2:]) else 0)
    else:
        sys.exit(__doc__)
