"""fastq.torch.DataLoader against torch.utils.data.DataLoader on the same ImageFolder and
the same transform object, for two training recipes:

* torchvision (v2) reference: RandomResizedCrop(224), RandomHorizontalFlip,
  TrivialAugmentWide, ToImage + ToDtype(float32, scale=True), Normalize, RandomErasing;
* timm: create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
  interpolation="bicubic", re_prob=0.25, re_mode="pixel").

Both loaders: batch_size 64, shuffle, num_workers (default 2: torch's worker processes,
fastq's native threads).  One untimed warm-up epoch each, then `--epochs` timed epochs per
loader, alternating torch and fastq epoch by epoch; the medians and their ratio are printed
with what fastq ran natively and what stayed in Python.

    python3 benchmarks/bench_migrate_torch.py            # 2000 photos of 300-800 px
    python3 benchmarks/bench_migrate_torch.py --quick    # 96 photos, 1 timed epoch (< 60 s)
    python3 benchmarks/bench_migrate_torch.py --psnr     # PSNR of each deterministic step vs torchvision
    python3 benchmarks/bench_migrate_torch.py --opencv-resize   # resizes as without Pillow's (not exact)
"""
import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fastq.bench.testdata import make_jpeg_dataset  # noqa: E402

# the frameworks, imported by _import_frameworks() once the arguments are parsed (so that
# --help needs only numpy and fastq): torch and timm before anything that may import tensorflow
timm = torch = create_transform = datasets = v2 = ft = None


def _import_frameworks():
    global timm, torch, create_transform, datasets, v2, ft
    import timm
    import torch
    from timm.data import create_transform
    from torchvision import datasets
    from torchvision.transforms import v2
    import fastq.torch as ft

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def recipes(size):
    tv = v2.Compose([v2.RandomResizedCrop(size), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(), v2.ToImage(),
                     v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD), v2.RandomErasing()])
    tm = create_transform(size, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic",
                          re_prob=0.25, re_mode="pixel")
    return {"torchvision": tv, "timm": tm}


def allow_posterize_0_bits():
    """timm 1.0's rand-m9-mstd0.5 RandAugment can draw PosterizeIncreasing at the top level,
    which asks PIL for 0 bits; Pillow >= 10 raises there (older Pillow gave a black image).
    Both loaders run timm's policy in Python here, so both get the old behaviour back (torch's
    forked workers inherit it)."""
    from PIL import ImageOps
    orig = ImageOps.posterize
    if getattr(orig, "_zero_bits", False):
        return

    def posterize(image, bits):
        if bits == 0:
            return orig(image, 1).point(lambda v: 0)
        return orig(image, bits)

    posterize._zero_bits = True
    ImageOps.posterize = posterize


def image_folder(root, n, classes=10):
    """`n` generated photos (300-800 px) as an ImageFolder tree of `classes` classes."""
    tree = os.path.join(root, f"tree{n}")
    if not os.path.isdir(tree):
        paths = make_jpeg_dataset(os.path.join(root, f"raw{n}"), n)
        for i, p in enumerate(paths):
            d = os.path.join(tree, f"class{i % classes:02d}")
            os.makedirs(d, exist_ok=True)
            dst = os.path.join(d, os.path.basename(p))
            if not os.path.exists(dst):
                os.link(p, dst)
    return tree


def psnr(a, b):
    import numpy as np
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


def psnr_table(paths):
    """PSNR (0..1 pixel scale) of fastq's translation of each deterministic step against
    torchvision on PIL images; random crops are replayed from fastq's explain records."""
    import numpy as np
    from PIL import Image
    from torchvision import transforms as T
    import torchvision.transforms.functional as F
    import fastq
    BIL, BIC = T.InterpolationMode.BILINEAR, T.InterpolationMode.BICUBIC
    cases = [
        ("decode + CenterCrop(224) + PILToTensor", T.Compose([T.CenterCrop(224), T.PILToTensor()]), {}),
        ("HorizontalFlip(p=1) + VerticalFlip(p=1)", T.Compose([T.CenterCrop(224), T.RandomHorizontalFlip(1.0),
                                                               T.RandomVerticalFlip(1.0), T.PILToTensor()]), {}),
        ("ToTensor (x / 255)", T.Compose([T.CenterCrop(224), T.ToTensor()]), {}),
        ("ToTensor + Normalize", T.Compose([T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]), {}),
        ("Resize(256) bilinear + CenterCrop(224)", T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]), {}),
        ("Resize(256) bicubic + CenterCrop(224)", T.Compose([T.Resize(256, BIC), T.CenterCrop(224),
                                                             T.PILToTensor()]), {}),
        ("Resize(256) bilinear + CenterCrop, dct_scaling=True", T.Compose([T.Resize(256), T.CenterCrop(224),
                                                                           T.PILToTensor()]), {"dct_scaling": True}),
        ("Resize((224, 224)) bilinear", T.Compose([T.Resize((224, 224)), T.PILToTensor()]), {}),
        ("Resize((224, 224)) bicubic", T.Compose([T.Resize((224, 224), BIC), T.PILToTensor()]), {}),
        ("Resize(96) bilinear + CenterCrop(96)", T.Compose([T.Resize(96), T.CenterCrop(96), T.PILToTensor()]), {}),
        ("v2 PILToTensor + Resize(256) (torch antialias) + CenterCrop", v2.Compose([
            v2.PILToTensor(), v2.Resize(256), v2.CenterCrop(224)]), {}),
        ("Grayscale(3)", T.Compose([T.CenterCrop(224), T.Grayscale(3), T.PILToTensor()]), {}),
        ("RandomEqualize(p=1)", T.Compose([T.CenterCrop(224), T.RandomEqualize(1.0), T.PILToTensor()]), {}),
        ("RandomAutocontrast(p=1)", T.Compose([T.CenterCrop(224), T.RandomAutocontrast(1.0), T.PILToTensor()]), {}),
        ("RandomPosterize(4, p=1)", T.Compose([T.CenterCrop(224), T.RandomPosterize(4, 1.0), T.PILToTensor()]), {}),
        ("RandomSolarize(128, p=1)", T.Compose([T.CenterCrop(224), T.RandomSolarize(128, 1.0), T.PILToTensor()]), {}),
        ("RandomAdjustSharpness(2, p=1)", T.Compose([T.CenterCrop(224), T.RandomAdjustSharpness(2.0, 1.0),
                                                     T.PILToTensor()]), {}),
        ("GaussianBlur(5, sigma=1.0)", T.Compose([T.CenterCrop(224), T.GaussianBlur(5, 1.0), T.PILToTensor()]), {}),
    ]
    src = fastq.sources.Files(paths, labels=[0] * len(paths))
    print(f"PSNR against torchvision {__import__('torchvision').__version__} on {len(paths)} photos "
          f"(0..1 scale; inf = identical)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, tf, kw in cases:
            tr = ft.translate(tf)
            with tr.pipeline(src, len(paths), **kw) as pipe:
                out = np.array(next(iter(pipe))[0], dtype=np.float64)
            raw = [np.asarray(tf(Image.open(p).convert("RGB"))) for p in paths]
            ref = np.stack(raw).astype(np.float64)
            if "Normalize" in name:
                std, mean = np.asarray(STD)[:, None, None], np.asarray(MEAN)[:, None, None]
                out, ref = out * std + mean, ref * std + mean
            elif raw[0].dtype == np.uint8:
                out, ref = out / 255, ref / 255
            print(f"  {name:52s} {psnr(out, ref):7.2f} dB")
        for interp in (BIL, BIC):
            tf = T.Compose([T.RandomResizedCrop(224, interpolation=interp), T.PILToTensor()])
            tr = ft.translate(tf)
            with tr.pipeline(src, len(paths), seed=1) as pipe:
                out = np.array(next(iter(pipe))[0], dtype=np.float64) / 255
                ref = []
                for i, p in enumerate(paths):
                    x, y, w, h = pipe.explain(0, i)["ops"][0]["box"]
                    img = F.resized_crop(Image.open(p).convert("RGB"), y, x, h, w, [224, 224], interpolation=interp)
                    ref.append(np.asarray(F.pil_to_tensor(img), dtype=np.float64) / 255)
            print(f"  {'RandomResizedCrop(224) ' + interp.value + ' (boxes replayed)':52s} "
                  f"{psnr(out, np.stack(ref)):7.2f} dB")


def epoch_seconds(loader):
    t0 = time.perf_counter()
    n = 0
    for images, labels in loader:
        n += images.shape[0]
    return time.perf_counter() - t0, n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="96 photos, 1 timed epoch")
    ap.add_argument("--n", type=int, default=2000, help="photos (default 2000)")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per loader (median)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--root", default="/tmp/fastq-bench-migrate-torch")
    ap.add_argument("--recipe", choices=["torchvision", "timm", "both"], default="both")
    ap.add_argument("--psnr", action="store_true", help="print the PSNR of each deterministic step and exit")
    ap.add_argument("--opencv-resize", action="store_true",
                    help="translate as a build without Pillow's resize would (OpenCV bilinear/bicubic, not "
                         "bit-exact with PIL): what exact resampling costs")
    args = ap.parse_args(argv)
    _import_frameworks()
    if args.opencv_resize:
        from fastq.ops import _base
        for name in [n for n in _base.INTERPOLATIONS if n.startswith("pil_")]:
            del _base.INTERPOLATIONS[name]
    if args.psnr:
        tree = image_folder(args.root, 200)
        paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs)[:64]
        psnr_table(paths)
        return None
    if args.quick:
        args.n, args.epochs, args.batch_size = 96, 1, 32
    tree = image_folder(args.root, args.n)
    allow_posterize_0_bits()
    print(f"{args.n} photos, batch {args.batch_size}, num_workers={args.workers}, {args.size}px, "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")
    results = {}
    for name, tf in recipes(args.size).items():
        if args.recipe not in ("both", name):
            continue
        ds = datasets.ImageFolder(tree, transform=tf)
        theirs = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                             persistent_workers=args.workers > 0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = ft.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, seed=0)
        tr = ours.translation
        python = tr.python_steps
        times = {"torch": [], "fastq": []}
        for loader in (theirs, ours):  # warm-up: worker start, page cache, first-epoch allocations
            epoch_seconds(loader)
        for _ in range(args.epochs):
            for key, loader in (("torch", theirs), ("fastq", ours)):
                s, n = epoch_seconds(loader)
                times[key].append(n / s)
        ours.close()
        del theirs
        med = {k: statistics.median(v) for k, v in times.items()}
        results[name] = med
        print(f"\n{name}: fastq native ops: {', '.join(type(o).__name__ for o in tr.ops)}")
        if python:
            print(f"  in Python per sample: {', '.join(s.split('(')[0] for s in python)}"
                  f" ({'; '.join(str(w.message).split(';')[0] for w in caught)[:200]})")
        else:
            print("  fully native")
        for k in ("torch", "fastq"):
            print(f"  {k:6s} images/s: median {med[k]:8.1f}  (epochs: {', '.join(f'{v:.1f}' for v in times[k])})")
        print(f"  ratio fastq / torch: {med['fastq'] / med['torch']:.2f}x")
    return results


if __name__ == "__main__":
    main()
