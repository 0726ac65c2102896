"""``fastq bench --task migrate`` (and benchmarks/bench_migrate_torch.py,
benchmarks/bench_migrate_keras.py): fastq's translations against the original libraries,
in one sitting, on the same generated photos (fastq.bench.testdata, seed 0, 300-800 px) laid
out as an ImageFolder tree of 10 class folders.

Rows (``ROWS``):

* "torchvision reference preset": ``torch.utils.data.DataLoader`` vs ``fastq.torch.DataLoader``
  over a torchvision ``ImageFolder`` with torchvision's (v2) reference training transform:
  RandomResizedCrop(224), RandomHorizontalFlip, TrivialAugmentWide, ToImage +
  ToDtype(float32, scale=True), Normalize, RandomErasing; batch 64, shuffle,
  ``num_workers=workers`` (torch's worker processes, fastq's native threads);
* "timm rand-m9-mstd0.5-inc1": the same with timm's ``create_transform(224, is_training=True,
  auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic", re_prob=0.25, re_mode="pixel")``;
* "keras flip+rotation+zoom": ``keras.utils.image_dataset_from_directory(224 px)`` + RandomFlip,
  RandomRotation(0.1), RandomZoom(0.1) mapped over the batches in tf.data (AUTOTUNE) + prefetch,
  vs ``fastq.keras.image_dataset_from_directory(augment=[the same layers], workers=workers)``;
  batch 32.  It runs in a child process of its own (``python -m fastq.bench.migrate keras
  CFG.json``), so that TensorFlow is never imported after torch / timm's torchvision in one
  process (and never into the process whose DataLoader forks its workers).

Method, per row: one untimed warm-up epoch of each loader, then ``rounds`` timed epochs per
loader, alternating peer and fastq epoch by epoch; the medians of images/s and of CPU time per
image (user + system of the process and its live descendants: torch's worker processes
included, fastq.bench.measure.cpu_snapshot).  Ratios: fastq / peer images/s, and peer / fastq
CPU per image (above 1: fastq spends less CPU per image).

``psnr_table`` (``bench_migrate_torch.py --psnr``): the PSNR of fastq's translation of each
deterministic torchvision step against torchvision on PIL images.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

from fastq.bench.measure import cpu_delta, cpu_snapshot

__all__ = ["ROWS", "MEAN", "STD", "image_folder", "torch_recipes", "allow_posterize_0_bits", "psnr", "psnr_table",
           "measure_torch", "measure_keras", "run", "print_table", "main"]

# row name -> (peer, recipe, batch size)
ROWS = {
    "torchvision reference preset": ("torch", "torchvision", 64),
    "timm rand-m9-mstd0.5-inc1": ("torch", "timm", 64),
    "keras flip+rotation+zoom": ("keras", "keras", 32),
}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLASSES = 10
QUICK_IMAGES, QUICK_BATCH = 96, 32


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------

def image_folder(paths, root, classes=CLASSES):
    """The photos as an ImageFolder tree (hard links) of ``classes`` class folders under root."""
    tree = os.path.join(root, f"migrate_tree_{len(paths)}")
    for i, p in enumerate(paths):
        d = os.path.join(tree, f"class{i % classes:02d}")
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, os.path.basename(p))
        if not os.path.exists(dst):
            try:
                os.link(p, dst)
            except OSError:
                import shutil
                shutil.copy(p, dst)
    return tree


# ---------------------------------------------------------------------------
# torch / timm
# ---------------------------------------------------------------------------

def torch_recipes(size=224):
    """{"torchvision": torchvision's v2 reference training transform, "timm": timm's RandAugment recipe}."""
    import torch
    from timm.data import create_transform
    from torchvision.transforms import v2
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


def without_pil_resize():
    """Translate as a build without Pillow's resize would (OpenCV bilinear / bicubic, not
    bit-exact with PIL): what exact resampling costs.  For the rest of this process."""
    from fastq.ops import INTERPOLATIONS
    for name in [n for n in INTERPOLATIONS if n.startswith("pil_")]:
        del INTERPOLATIONS[name]


def _epoch(loader):
    """(images, wall s, CPU s of this process and its descendants) of one epoch."""
    c0 = cpu_snapshot()
    n = 0
    for images, _ in loader:
        n += int(images.shape[0])
    d = cpu_delta(c0, cpu_snapshot())
    return n, d["wall_s"], d["own_cpu_s"]


def _alternate(loaders, rounds):
    """Warm-up epoch of each loader, then ``rounds`` timed epochs each, alternating ->
    {key: {"runs": [img/s], "images_per_s": median, "cpu_ms_per_image": median}}."""
    for loader in loaders.values():  # worker start, page cache, first-epoch allocations
        _epoch(loader)
    runs = {k: ([], []) for k in loaders}
    for _ in range(rounds):
        for key, loader in loaders.items():
            n, wall, cpu = _epoch(loader)
            if n <= 0:
                raise RuntimeError(f"{key}: an epoch delivered no images")
            runs[key][0].append(n / wall)
            runs[key][1].append(cpu / n * 1e3)
    return {k: {"runs": r, "images_per_s": statistics.median(r), "cpu_ms_per_image": statistics.median(c),
                "images_per_epoch": n} for k, (r, c) in runs.items()}


def measure_torch(tree, recipe, *, rounds=3, workers=2, batch_size=64, size=224, out=print):
    """One torch row: torch.utils.data.DataLoader vs fastq.torch.DataLoader on an ImageFolder
    of ``tree`` with the ``recipe`` ("torchvision" or "timm") -> the peer's and fastq's medians."""
    import torch
    from torchvision import datasets

    import fastq.torch as ft
    allow_posterize_0_bits()
    tf = torch_recipes(size)[recipe]
    ds = datasets.ImageFolder(tree, transform=tf)
    theirs = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = ft.DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers, seed=0)
    try:
        tr = ours.translation
        res = _alternate({"peer": theirs, "fastq": ours}, rounds)
    finally:
        ours.close()
        del theirs
    python = list(tr.python_steps)
    detail = f"fastq native ops: {', '.join(type(o).__name__ for o in tr.ops)}"
    if python:
        detail += (f"; in Python per sample: {', '.join(s.split('(')[0] for s in python)}"
                   f" ({'; '.join(str(w.message).split(';')[0] for w in caught)[:200]})")
    else:
        detail += "; fully native"
    out(f"{recipe}: {detail}", flush=True)
    return {"peer_name": f"torch {torch.__version__}", "peer": res["peer"], "fastq": res["fastq"],
            "detail": detail, "batch_size": batch_size, "workers": workers}


# ---------------------------------------------------------------------------
# keras
# ---------------------------------------------------------------------------

def keras_layers():
    import keras
    L = keras.layers
    return [L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1)]


def measure_keras(tree, *, rounds=3, workers=None, batch_size=32, size=224, out=print):
    """The Keras row, in this process (it imports TensorFlow: see keras_row)."""
    import keras
    import tensorflow as tf

    import fastq.keras as fk
    kw = dict(image_size=(size, size), batch_size=batch_size, seed=0, verbose=False)
    aug = keras.Sequential(keras_layers())
    kds = keras.utils.image_dataset_from_directory(tree, **kw)
    kds = kds.map(lambda x, y: (aug(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
    kds = kds.prefetch(tf.data.AUTOTUNE)
    fds = fk.image_dataset_from_directory(tree, augment=keras_layers(), workers=workers, **kw)
    detail = str(fds.fastq_translation)
    out(f"keras: {detail}", flush=True)
    res = _alternate({"peer": kds, "fastq": fds}, rounds)
    return {"peer_name": f"keras {keras.__version__} (TF {tf.__version__})", "peer": res["peer"],
            "fastq": res["fastq"], "detail": detail, "batch_size": batch_size, "workers": workers}


def keras_row(tree, *, rounds=3, workers=None, batch_size=32, size=224, timeout=900):
    """The Keras row in a child process of its own (``python -m fastq.bench.migrate keras CFG``)
    -> (row, None) or (None, why)."""
    from fastq.bench.runner import _child_env
    cfg = dict(tree=tree, rounds=rounds, workers=workers, batch_size=batch_size, size=size)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    try:
        r = subprocess.run([sys.executable, "-m", "fastq.bench.migrate", "keras", f.name], capture_output=True,
                           text=True, env=_child_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    finally:
        os.unlink(f.name)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
    return None, f"exit code {r.returncode}:\n{tail}"


def _keras_child(cfg_path):
    with open(cfg_path) as f:
        cfg = json.load(f)
    row = measure_keras(cfg["tree"], rounds=cfg["rounds"], workers=cfg["workers"], batch_size=cfg["batch_size"],
                        size=cfg["size"], out=lambda *a, **k: print(*a, file=sys.stderr, **k))
    sys.stdout.write("RESULT " + json.dumps(row) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# PSNR
# ---------------------------------------------------------------------------

def psnr(a, b):
    import numpy as np
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


def psnr_table(paths, out=print):
    """PSNR (0..1 pixel scale) of fastq's translation of each deterministic step against
    torchvision on PIL images; random crops are replayed from fastq's explain records."""
    import numpy as np
    import torchvision
    import torchvision.transforms.functional as F
    from PIL import Image
    from torchvision import transforms as T
    from torchvision.transforms import v2

    import fastq
    import fastq.torch as ft
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
    out(f"PSNR against torchvision {torchvision.__version__} on {len(paths)} photos (0..1 scale; inf = identical)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, tf, kw in cases:
            tr = ft.translate(tf)
            with tr.pipeline(src, len(paths), **kw) as pipe:
                got = np.array(next(iter(pipe))[0], dtype=np.float64)
            raw = [np.asarray(tf(Image.open(p).convert("RGB"))) for p in paths]
            ref = np.stack(raw).astype(np.float64)
            if "Normalize" in name:
                std, mean = np.asarray(STD)[:, None, None], np.asarray(MEAN)[:, None, None]
                got, ref = got * std + mean, ref * std + mean
            elif raw[0].dtype == np.uint8:
                got, ref = got / 255, ref / 255
            out(f"  {name:52s} {psnr(got, ref):7.2f} dB")
        for interp in (BIL, BIC):
            tf = T.Compose([T.RandomResizedCrop(224, interpolation=interp), T.PILToTensor()])
            tr = ft.translate(tf)
            with tr.pipeline(src, len(paths), seed=1) as pipe:
                got = np.array(next(iter(pipe))[0], dtype=np.float64) / 255
                ref = []
                for i, p in enumerate(paths):
                    x, y, w, h = pipe.explain(0, i)["ops"][0]["box"]
                    img = F.resized_crop(Image.open(p).convert("RGB"), y, x, h, w, [224, 224], interpolation=interp)
                    ref.append(np.asarray(F.pil_to_tensor(img), dtype=np.float64) / 255)
            out(f"  {'RandomResizedCrop(224) ' + interp.value + ' (boxes replayed)':52s} "
                f"{psnr(got, np.stack(ref)):7.2f} dB")


# ---------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------

def _ratios(row):
    row["ratio"] = row["fastq"]["images_per_s"] / row["peer"]["images_per_s"]
    row["cpu_ratio"] = row["peer"]["cpu_ms_per_image"] / row["fastq"]["cpu_ms_per_image"]
    return row


def run(tree, *, rows=None, rounds=3, workers=2, batch_size=None, size=224, timeout=900, out=print):
    """Measure the rows (names of ROWS; default all) on the ImageFolder ``tree`` ->
    {"rows": {name: row}, "skipped": {name: why}, ...}.  The torch rows run in this process,
    before the Keras row (in a child process); a row whose frameworks are missing is skipped."""
    import importlib.util
    names = list(ROWS) if rows is None else list(rows)
    for name in names:
        if name not in ROWS:
            raise ValueError(f"unknown row {name!r}; choose from {', '.join(ROWS)}")
    res = {"task": "migrate", "rounds": rounds, "workers": workers, "cpus": os.cpu_count(), "tree": tree,
           "rows": {}, "skipped": {}}
    for name in names:
        peer, recipe, default_batch = ROWS[name]
        need = ("torch", "torchvision", "timm") if peer == "torch" else ("keras", "tensorflow")
        missing = [m for m in need if importlib.util.find_spec(m) is None]
        if peer == "torch" and recipe == "torchvision":
            missing = [m for m in missing if m != "timm"]
        if missing:
            res["skipped"][name] = f"not installed: {', '.join(missing)}"
            continue
        bs = batch_size or default_batch
        t = time.perf_counter()
        if peer == "torch":
            try:
                row = measure_torch(tree, recipe, rounds=rounds, workers=workers or 2, batch_size=bs, size=size,
                                    out=out)
            except Exception as e:  # noqa: BLE001  (reported as a skipped row)
                res["skipped"][name] = f"{type(e).__name__}: {e}"
                continue
        else:
            row, why = keras_row(tree, rounds=rounds, workers=workers, batch_size=bs, size=size, timeout=timeout)
            if row is None:
                res["skipped"][name] = why
                continue
            out(f"keras: {row['detail']}", flush=True)
        row["seconds"] = time.perf_counter() - t
        res["rows"][name] = _ratios(row)
        out(f"{name}: fastq / peer {row['ratio']:.2f}x img/s, CPU per image peer / fastq {row['cpu_ratio']:.2f}x "
            f"({row['seconds']:.0f} s)", flush=True)
    return res


def print_table(res, out=print):
    out(f"\nmigrate: {res.get('images', '?')} photos, {res['rounds']} timed epoch(s) per loader after a warm-up, "
        f"alternating; workers={res['workers'] or 'default'}; {res['cpus']} CPUs")
    out(f"{'row':30s} {'peer img/s':>11s} {'fastq img/s':>12s} {'ratio':>7s} {'peer CPU ms/img':>16s} "
        f"{'fastq CPU ms/img':>17s} {'CPU ratio':>10s}")
    for name, r in res["rows"].items():
        out(f"{name:30s} {r['peer']['images_per_s']:11.1f} {r['fastq']['images_per_s']:12.1f} {r['ratio']:6.2f}x "
            f"{r['peer']['cpu_ms_per_image']:16.2f} {r['fastq']['cpu_ms_per_image']:17.2f} {r['cpu_ratio']:9.2f}x")
    for name, why in res["skipped"].items():
        out(f"{name:30s} {'-':>11s}   skipped: {why}")
    out("ratio: fastq / peer images/s (medians); CPU: user + system time of the process and its worker processes "
        "per image; CPU ratio: peer / fastq (above 1: fastq spends less)")


def main(images=None, rounds=3, workers=2, quick=False, rows=None, data_dir=None, batch_size=None, size=224,
         json_path=None, opencv_resize=False, psnr_only=False, progress=True, timeout=900, out=print):
    """The whole benchmark -> its results ({"rows": ..., "skipped": ...}); prints the table.
    quick: 96 photos, 1 timed epoch, batch 32.  psnr_only: print psnr_table on 64 photos instead
    (returns None)."""
    from fastq.bench.data import default_data_dir, generated_dataset
    data_dir = data_dir or default_data_dir()
    os.makedirs(data_dir, exist_ok=True)
    if opencv_resize:
        without_pil_resize()
    if psnr_only:
        paths = generated_dataset(200, data_dir, progress=progress, out=out)
        psnr_table(sorted(paths)[:64], out=out)
        return None
    if quick:
        images, rounds, batch_size = images or QUICK_IMAGES, 1, batch_size or QUICK_BATCH
    images = images or 2000
    paths = generated_dataset(images, data_dir, progress=progress, out=out)
    tree = image_folder(paths, data_dir)
    out(f"{images} photos (300-800 px) in {CLASSES} classes, {size}px, {rounds} timed epoch(s) per loader, "
        f"workers={workers or 'default'}, {os.cpu_count()} CPUs", flush=True)
    res = run(tree, rows=rows, rounds=rounds, workers=workers, batch_size=batch_size, size=size, timeout=timeout,
              out=out)
    res["images"] = images
    print_table(res, out=out)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)
        out(f"wrote {json_path}")
    return res


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "keras":
        _keras_child(sys.argv[2])
    else:
        sys.exit("usage: python -m fastq.bench.migrate keras CFG.json  (the Keras row's child process; "
                 "the benchmark is fastq bench --task migrate)")
