"""Batches of fixed op chains over every image format, for comparing two builds of fastq
(x86-64 against aarch64 under qemu) bit for bit, op by op.

    python crossarch_batches.py make DIR         # writes the images (needs cv2; run on the host)
    python crossarch_batches.py run DIR OUT.npz  # runs every chain (needs only numpy + fastq)
    python crossarch_batches.py compare A.npz B.npz   # prints a table; exit 1 if a chain differs
                                                      # in a way not listed as expected

Used by scripts/test_aarch64.sh.  Each chain runs over the same files with the same
seed and 2 workers; the outputs of a chain are all its batches of one epoch.
"""
import json
import os
import sys

import numpy as np

FORMATS = [("jpg", []), ("png", []), ("webp", []), ("tif", []), ("bmp", []), ("ppm", []),
           ("progressive.jpg", "progressive")]


def make(d):
    import cv2
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(21)
    paths = []
    for i in range(12):
        h, w = int(rng.integers(200, 420)), int(rng.integers(200, 420))
        # a smooth image plus texture: decoders and resamplers both have work to do
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) * 127 // (w + h))], -1).astype(np.int32)
        img = np.clip(img + rng.integers(-40, 40, img.shape), 0, 255).astype(np.uint8)
        for ext, flag in FORMATS:
            name = f"{i:02d}.{ext}"
            params = []
            if ext.endswith("jpg"):
                params = [cv2.IMWRITE_JPEG_QUALITY, 90] + ([cv2.IMWRITE_JPEG_PROGRESSIVE, 1] if flag else [])
            ok, buf = cv2.imencode("." + ext.split(".")[-1], img, params)
            assert ok, name
            with open(os.path.join(d, name), "wb") as f:
                f.write(buf.tobytes())
            paths.append(name)
    with open(os.path.join(d, "files.json"), "w") as f:
        json.dump(paths, f)


def chains():
    from fastq import ops
    return {
        "decode+resize(nearest)": ([ops.Resize((96, 96), interpolation="nearest")], "uint8"),
        "resize(bilinear)": ([ops.Resize((96, 96))], "uint8"),
        "resize(area)": ([ops.Resize((64, 64), interpolation="area")], "uint8"),
        "random_resized_crop": ([ops.RandomResizedCrop(80)], "uint8"),
        "rrc+hflip": ([ops.RandomResizedCrop(80), ops.HorizontalFlip()], "uint8"),
        "center_crop": ([ops.Resize(100), ops.CenterCrop(80)], "uint8"),
        "color_jitter": ([ops.Resize((80, 80)), ops.ColorJitter(0.4, 0.4, 0.4)], "uint8"),
        "random_affine": ([ops.Resize((80, 80)), ops.RandomAffine(degrees=15, translate=(0.1, 0.1), scale=(0.9, 1.1))], "uint8"),
        "normalize(float32)": ([ops.RandomResizedCrop(80), ops.HorizontalFlip(), ops.Normalize()], "float32"),
        "reference(float32)": ([ops.RandomResizedCrop(224), ops.HorizontalFlip(), ops.Normalize()], "float32"),
    }


def run(d, out):
    import fastq
    with open(os.path.join(d, "files.json")) as f:
        names = json.load(f)
    res = {}
    for fmt, _ in FORMATS:
        paths = [os.path.join(d, n) for n in names if n.split(".", 1)[1] == fmt]
        for cname, (chain, dtype) in chains().items():
            with fastq.Pipeline(fastq.sources.Files(paths, labels=list(range(len(paths)))), batch_size=4,
                                queue_size=3, workers=2, ops=chain, dtype=dtype, seed=7, shuffle=True,
                                pin_memory=False) as p:
                batches = [b[0].copy() for b in p]
            res[f"{fmt}|{cname}"] = np.concatenate(batches)
    np.savez(out, **res)
    print(f"{len(res)} chains x formats -> {out}")


def compare(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    bad = 0
    print(f"{'format':16s} {'chain':24s} {'result':>14s} {'max |diff|':>11s} {'elements differing':>19s}")
    for k in sorted(a.files):
        fmt, chain = k.split("|")
        x, y = a[k], b[k]
        if x.shape != y.shape:
            print(f"{fmt:16s} {chain:24s} {'SHAPE':>14s} {str(x.shape) + ' vs ' + str(y.shape)}")
            bad += 1
            continue
        if np.array_equal(x, y):
            print(f"{fmt:16s} {chain:24s} {'bit-identical':>14s}")
            continue
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        print(f"{fmt:16s} {chain:24s} {'differs':>14s} {d.max():11.4g} {np.count_nonzero(d):10d} / {d.size}")
        bad += 1
    print(f"\n{len(a.files) - bad} of {len(a.files)} bit-identical")
    return bad


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "run":
        run(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        sys.exit(1 if compare(sys.argv[2], sys.argv[3]) else 0)
    else:
        sys.exit(__doc__)
