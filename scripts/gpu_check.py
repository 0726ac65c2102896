"""The GPU checks of scripts/gpu_check.sh (run it, not this file, which assumes a GPU).

Prints one section per check and a summary; exit 1 if a correctness check fails
(pinning refused with pin_memory=True, a batch whose GPU checksum differs from its host
checksum when copied with fastq.torch.to_device).  Speeds are reported, not judged.
"""
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import fastq
import fastq.torch as ftorch
from fastq import ops

FAILS = []


def section(title):
    print(f"\n== {title}", flush=True)


def fail(msg):
    FAILS.append(msg)
    print(f"   FAIL: {msg}", flush=True)


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def timed_copies(src, n=20):
    dst = torch.empty(src.shape, dtype=src.dtype, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return gbps(src.numel() * src.element_size() * n, time.perf_counter() - t0)


def check_pinning_and_bandwidth():
    section("pinning and host-to-device bandwidth")
    n = 64 * 3 * 224 * 224  # one float32 reference batch: 38.5 MB
    imgs = np.zeros((64, 224, 224, 3), np.uint8)
    with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(64)), batch_size=64, queue_size=2, workers=2,
                        dtype="float32", pin_memory=True) as p:
        st = p.stats()
        print(f"   Pipeline(pin_memory=True): " + ", ".join(f"{k}={v}" for k, v in st.items() if "pin" in k))
        batch = next(iter(p))
        slot = torch.from_numpy(batch[0])
        print(f"   torch sees the slot as pinned: {slot.is_pinned()}")
        if not slot.is_pinned():
            fail("the slot arena is not page-locked although pin_memory=True succeeded")
        slot_gbps = timed_copies(slot)
        del slot, batch
    pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
    pageable = torch.empty(n, dtype=torch.float32)
    a, b = timed_copies(pinned), timed_copies(pageable)
    print(f"   H2D GB/s, 38.5 MB: fastq slot {slot_gbps:.1f}   torch pinned {a:.1f}   pageable {b:.1f}")
    return {"slot": slot_gbps, "pinned": a, "pageable": b}


def check_event_guarded_copy(batches=200):
    section("event-guarded copies under slot pressure (queue_size=2, a busy GPU stream)")
    rng = np.random.default_rng(0)
    n = batches * 8
    imgs = rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8)
    results = {}
    for mode in ("fastq.torch.to_device", "naive .to(non_blocking=True), CPU tensor dropped"):
        bad = 0
        checks = []
        with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(n)), batch_size=8, queue_size=2, workers=4,
                            dtype="uint8", pin_memory=True, seed=1, shuffle=True) as p:
            for batch in p:
                host_sum = int(batch[0].astype(np.int64).sum())
                torch.cuda._sleep(2_000_000)  # keep the caller's stream busy: the copy waits behind it
                if mode.startswith("fastq"):
                    x, _ = ftorch.to_device(batch, "cuda")
                else:
                    x = torch.from_numpy(batch[0]).to("cuda", non_blocking=True)
                del batch
                checks.append((host_sum, x.to(torch.int64).sum()))
        torch.cuda.synchronize()
        for host_sum, dev_sum in checks:
            bad += int(dev_sum.item()) != host_sum
        results[mode] = bad
        print(f"   {mode}: {bad} of {len(checks)} batches differ on the GPU")
    if results["fastq.torch.to_device"]:
        fail(f"{results['fastq.torch.to_device']} batches corrupt with fastq.torch.to_device")
    return results


def _make_jpeg(args):
    import cv2
    d, i, seed = args
    rng = np.random.default_rng([seed, i])
    h, w = int(rng.integers(300, 800)), int(rng.integers(300, 800))
    small = rng.integers(0, 256, (h // 16 + 1, w // 16 + 1, 3), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    img = np.clip(img.astype(np.int16) + rng.integers(-12, 12, img.shape), 0, 255).astype(np.uint8)
    p = os.path.join(d, f"{i:05d}.jpg")
    cv2.imwrite(p, img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    return p


def make_jpegs(d, n=1024, seed=0):
    """n ImageNet-like JPEGs, made by one process per core."""
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(min(16, os.cpu_count() or 1)) as pool:
        return pool.map(_make_jpeg, [(d, i, seed) for i in range(n)], chunksize=16)


def fastq_rate(paths, workers):
    chain = [ops.RandomResizedCrop(224), ops.HorizontalFlip(), ops.Normalize()]
    with fastq.Pipeline(fastq.sources.Files(paths, labels=list(range(len(paths)))), batch_size=64, queue_size=6,
                        workers=workers, ops=chain, dtype="float32", seed=0, shuffle=True,
                        worker_priority="normal") as p:  # fastq alone: every core, as the DataLoaders get
        for b in p:  # warm-up epoch
            ftorch.to_device(b, "cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = 0
        for b in p:
            x, y = ftorch.to_device(b, "cuda")
            n += x.shape[0]
        torch.cuda.synchronize()
        return n / (time.perf_counter() - t0)


class _CvDataset(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.mean = np.array([0.485, 0.456, 0.406], np.float32) * 255
        self.std = np.array([0.229, 0.224, 0.225], np.float32) * 255

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import cv2
        img = cv2.cvtColor(cv2.imread(self.paths[i], cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        h, w = img.shape[:2]
        rng = np.random.default_rng(i)
        area = h * w * rng.uniform(0.08, 1.0)
        r = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        cw, ch = min(w, int(round(np.sqrt(area * r)))), min(h, int(round(np.sqrt(area / r))))
        x, y = rng.integers(0, w - cw + 1), rng.integers(0, h - ch + 1)
        out = cv2.resize(img[y:y + ch, x:x + cw], (224, 224), interpolation=cv2.INTER_LINEAR)
        if rng.random() < 0.5:
            out = out[:, ::-1]
        return torch.from_numpy(((out.astype(np.float32) - self.mean) / self.std)), i


def _tv_dataset(paths):
    from torchvision import transforms
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    tf = transforms.Compose([transforms.RandomResizedCrop(224, antialias=False), transforms.RandomHorizontalFlip(),
                             transforms.ConvertImageDtype(torch.float32),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    class D(torch.utils.data.Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            return tf(decode_jpeg(read_file(paths[i]), mode=ImageReadMode.RGB)), i
    return D()


def loader_rate(ds, workers):
    dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers, pin_memory=True,
                                     drop_last=True, persistent_workers=True)
    for x, y in dl:  # warm-up epoch
        x.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    for x, y in dl:
        x = x.to("cuda", non_blocking=True)
        n += x.shape[0]
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def check_throughput(paths):
    workers = min(16, os.cpu_count() or 1)
    section(f"images/s to GPU tensors, reference task ({len(paths)} JPEGs, batch 64, {workers} workers, "
            "median of 3 epochs after a warm-up)")
    out = {}
    out["fastq + to_device"] = statistics.median(fastq_rate(paths, workers) for _ in range(3))
    print(f"   fastq + fastq.torch.to_device: {out['fastq + to_device']:.0f} images/s", flush=True)
    out["DataLoader(cv2)"] = statistics.median(loader_rate(_CvDataset(paths), workers) for _ in range(3))
    print(f"   DataLoader(cv2, pin_memory=True): {out['DataLoader(cv2)']:.0f} images/s", flush=True)
    try:
        ds = _tv_dataset(paths)
    except ImportError as e:
        print(f"   torchvision: not installed ({e}); skipped")
    else:
        out["DataLoader(torchvision)"] = statistics.median(loader_rate(ds, workers) for _ in range(3))
        print(f"   torchvision + DataLoader(pin_memory=True): {out['DataLoader(torchvision)']:.0f} images/s")
    return out


def check_cupy_jax():
    section("CuPy and JAX see the GPU batch")
    x = torch.arange(12, dtype=torch.float32, device="cuda")
    try:
        import cupy
        c = cupy.from_dlpack(x)
        print(f"   CuPy {cupy.__version__}: from_dlpack shares memory: {c.data.ptr == x.data_ptr()}")
    except ImportError:
        print("   CuPy: not installed")
    try:
        import jax
        devs = [d for d in jax.devices() if d.platform == "gpu"]
        print(f"   JAX {jax.__version__}: GPU devices {devs}")
        if devs:
            imgs = np.zeros((64, 32, 32, 3), np.uint8)
            with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(64)), batch_size=64, queue_size=2,
                                dtype="float32", pin_memory=True) as p:
                b = next(iter(p))
                y = jax.device_put(b[0], devs[0])
                y.block_until_ready()
                print(f"   jax.device_put of a batch: {y.shape} {y.dtype} on {y.devices()}")
    except ImportError:
        print("   JAX: not installed")


# -- training: is the GPU ever waiting for fastq? --------------------------------------

def train_step_fn(model, opt, device_type):
    """One bf16-autocast SGD step (channels_last model), launched from this thread."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def make_model(name, device):
    import torchvision
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000).to(device)
    model = model.to(memory_format=torch.channels_last).train()
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def rate_synthetic(step, batch, steps, device, sync, warmup):
    """Images/s of `step` on batches already on the device (the GPU-bound rate)."""
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    for _ in range(warmup):
        step(x, y)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    sync()
    return batch * steps / (time.perf_counter() - t0)


def rate_fed(step, loader, batch, steps, sync, warmup):
    """Images/s of `step` fed by a fastq DeviceLoader (epochs back to back), and the
    seconds the training thread waited for input during the timed steps."""
    stream = loader.repeat()
    for _ in range(warmup):
        step(*next(stream))
    sync()
    w0 = loader.stats()["wait_s"]
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = next(stream)
        step(x, y.long())
    sync()
    dt = time.perf_counter() - t0
    waited = loader.stats()["wait_s"] - w0
    stream.close()
    return batch * steps / dt, waited


def training_rates(paths, models=("resnet18", "resnet50"), device="cuda", batch=64, steps=None, rounds=3,
                   warmup=15, _backend=None):
    """Per model: GPU-bound images/s (synthetic batches on the device) and images/s fed by
    fastq with its defaults (uint8 over PCIe, normalize to bf16 channels_last on the
    device, DeviceLoader), alternated, `rounds` each; returns {model: {...medians}}."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    steps = steps or {"resnet18": 150, "resnet50": 60}
    out = {}
    for name in models:
        model, opt = make_model(name, device)
        step = train_step_fn(model, opt, "cuda" if device == "cuda" else "cpu")
        n = steps[name] if isinstance(steps, dict) else steps
        chain = [ops.RandomResizedCrop(224), ops.HorizontalFlip()]
        with fastq.Pipeline(fastq.sources.Files(paths, labels=[i % 1000 for i in range(len(paths))]),
                            batch_size=batch, ops=chain, dtype="uint8", seed=0, shuffle=True) as pipe:
            loader = ftorch.DeviceLoader(pipe, device, normalize=True, dtype=torch.bfloat16, layout="channels_last",
                                         _backend=_backend)
            syn, fed, waits = [], [], []
            for _ in range(rounds):
                syn.append(rate_synthetic(step, batch, n, device, sync, warmup))
                r, w = rate_fed(step, loader, batch, n, sync, warmup)
                fed.append(r)
                waits.append(w)
            st = pipe.stats()
            loader.close()
        out[name] = {"synthetic": statistics.median(syn), "fed": statistics.median(fed),
                     "wait_s": statistics.median(waits), "workers": st["workers"],
                     "scheduling": st.get("scheduling")}
        del model, opt, step
    return out


def check_training(paths):
    section("training steps (bf16 autocast, channels_last, SGD, batch 64): GPU-bound vs fed by fastq's defaults "
            "(uint8 -> DeviceLoader(normalize=True, bfloat16, channels_last)); medians of 3 alternated rounds")
    res = training_rates(paths)
    for name, r in res.items():
        print(f"   {name}: GPU-bound {r['synthetic']:.0f} img/s, fed {r['fed']:.0f} img/s, "
              f"fed / GPU-bound {r['fed'] / r['synthetic']:.3f} (the loop waited {r['wait_s'] * 1e3:.0f} ms for "
              f"input per round); {r['workers']} workers, {r['scheduling']}", flush=True)
    return res


def main():
    t0 = time.perf_counter()
    print(f"fastq {fastq.__version__} from {os.path.dirname(fastq.__file__)}; torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    check_pinning_and_bandwidth()
    check_event_guarded_copy()
    check_cupy_jax()
    with tempfile.TemporaryDirectory(prefix="fastq-gpu-") as d:
        t1 = time.perf_counter()
        paths = make_jpegs(d, int(os.environ.get("GPU_CHECK_IMAGES", "2048")))
        print(f"\n   made {len(paths)} JPEGs in {time.perf_counter() - t1:.1f} s", flush=True)
        check_training(paths)
        check_throughput(paths)
    section(f"done in {time.perf_counter() - t0:.0f} s: " + ("all correctness checks passed" if not FAILS
                                                              else f"{len(FAILS)} FAILED: " + "; ".join(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
