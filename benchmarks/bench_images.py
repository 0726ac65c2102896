"""End-to-end images/s on the reference image task, fastq against its peers, one run.

The task (shared/DESIGN.md "Reference task"): JPEG file -> decode RGB ->
RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3, bilinear) -> random horizontal
flip -> normalize float32 with ImageNet mean/std -> batches of 64, NHWC, last partial
batch dropped, file order shuffled every epoch.  The JPEGs (300-800 px, quality 90)
are generated from the photos bundled with scikit-image / scikit-learn by
``fastq.testdata.make_jpeg_dataset`` (seed 0) and cached in ``<repo>/bench_data/``.

Peers (each one runs in its own fresh Python process, so that threads, imports and
peak RSS of one cannot touch another):

  fastq(cores)   fastq.Pipeline(sources.Files), workers = usable cores
  fastq(1)       the same, workers = 1
  tf.data        native TF ops: read_file + sample_distorted_bounding_box +
                 decode_and_crop_jpeg + resize bilinear + random_flip_left_right +
                 normalize, map(num_parallel_calls=AUTOTUNE), batch(64), prefetch(AUTOTUNE)
  tensorpack     DataFromList -> MultiThreadMapData(2 threads, cv2 per-sample code)
                 -> BatchData(64)
  python+cv2     a plain Python loop over the same cv2 per-sample code, np.stack per 64
  DALI CPU       NVIDIA DALI CPU pipeline, only when ``nvidia.dali`` imports

Method: the run is made of ``--repeats`` rounds; in each round every peer runs once,
in a fresh process, in a rotated order: one warm-up epoch (not timed) and one timed
epoch.  An epoch is timed from the creation of its iterator to the last batch; the
consumer only counts the rows of each batch and drops it.  A peer's figure is the
MEDIAN of its rounds.  Ratios are fastq(cores) / peer in the same run.  CPU taken by
other processes (and hypervisor steal) during each timed epoch is read from
/proc/stat and shown; a round where it exceeded 0.25 cores is measured again
(--retry-busy) and flagged if it stays contended.

Usage:
  python benchmarks/bench_images.py                 # 2000 images, 3 rounds
  python benchmarks/bench_images.py --quick         # ~256 images, a smoke test
  python benchmarks/bench_images.py --profile       # + single-thread stage profile
  python benchmarks/bench_images.py --peers fastq,fastq1 --images 4000 --json out.json
"""
import argparse
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BATCH = 64
SIZE = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)

PEERS = {  # key -> label, in table order
    "fastq": "fastq (workers=cores)",
    "fastq1": "fastq (workers=1)",
    "tfdata": "tf.data native (AUTOTUNE)",
    "tfdata_n": "tf.data native (map parallel = cores)",
    "dali": "NVIDIA DALI CPU",
    "tensorpack": "tensorpack MultiThreadMapData(2)+cv2",
    "pyloop": "Python loop + cv2",
}
# From shared/DESIGN.md (another sitting on a 2-core machine of this kind): shown
# only as a labelled reference when DALI cannot be measured here.  Never a result.
DALI_DESIGN_REFERENCE = 1024.0
TARGETS = (  # (name, numerator, denominator, target)
    ("fastq / tf.data native", "fastq", "tfdata", 2.5),
    ("fastq / tf.data native, parallel = cores", "fastq", "tfdata_n", 2.5),
    ("fastq / DALI CPU", "fastq", "dali", 2.0),
    ("fastq(cores) / fastq(1)", "fastq", "fastq1", 1.8),
)


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def proc_status_kb(field):
    """VmRSS / VmHWM of this process in kB (0 where /proc is not available)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    if field == "VmHWM":
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return 0


def cpu_snapshot():
    """(machine busy s, machine steal s, this process's CPU s, wall s).  Busy and steal
    come from /proc/stat (all CPUs of this machine); steal is time the hypervisor gave
    to other guests.  None for the first two where /proc/stat is missing."""
    busy = steal = None
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz
        steal = v[7] / hz
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return busy, steal, t.user + t.system, time.perf_counter()


def cpu_delta(a, b):
    """Cores in use during [a, b]: this process, other processes, hypervisor steal."""
    wall = b[3] - a[3]
    own = (b[2] - a[2]) / wall
    other = None if a[0] is None else max(0.0, (b[0] - a[0]) / wall - own)
    steal = None if a[1] is None else (b[1] - a[1]) / wall
    return {"wall_s": wall, "own_cores": own, "other_cores": other, "steal_cores": steal,
            "own_cpu_s": b[2] - a[2]}


# ---------------------------------------------------------------------------
# dataset
# ---------------------------------------------------------------------------

def dataset(n, data_dir):
    """Paths of n JPEGs (built once, then reused from data_dir/jpeg_<n>_seed0)."""
    d = os.path.join(data_dir, f"jpeg_{n}_seed0")
    manifest = os.path.join(d, "MANIFEST.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
        paths = [os.path.join(d, p) for p in m["files"]]
        if len(paths) == n and all(os.path.getsize(p) == s for p, s in zip(paths, m["sizes"])):
            return paths
    except (OSError, ValueError, KeyError):
        pass
    from fastq import testdata
    print(f"building {n} JPEGs in {d} (fastq.testdata, seed 0) ...", flush=True)
    t = time.perf_counter()
    paths = testdata.make_jpeg_dataset(d, n, seed=0)
    with open(manifest, "w") as f:
        json.dump({"files": [os.path.basename(p) for p in paths],
                   "sizes": [os.path.getsize(p) for p in paths],
                   "photos": [os.path.basename(p) for p in testdata.source_photos()]}, f)
    print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
    return paths


# ---------------------------------------------------------------------------
# the cv2 per-sample code shared by the tensorpack and Python-loop peers
# ---------------------------------------------------------------------------

def rrc_box(H, W, rng):
    """torchvision RandomResizedCrop.get_params: (top, left, h, w)."""
    area = H * W
    lr = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        ar = math.exp(rng.uniform(*lr))
        w = int(round(math.sqrt(target * ar)))
        h = int(round(math.sqrt(target / ar)))
        if 0 < w <= W and 0 < h <= H:
            return rng.randint(0, H - h), rng.randint(0, W - w), h, w
    in_ratio = W / H
    if in_ratio < RATIO[0]:
        w, h = W, int(round(W / RATIO[0]))
    elif in_ratio > RATIO[1]:
        h, w = H, int(round(H * RATIO[1]))
    else:
        w, h = W, H
    return (H - h) // 2, (W - w) // 2, h, w


class Cv2Sample:
    """path -> float32 (224, 224, 3) RGB normalized, with cv2 + numpy."""

    def __init__(self, seed=0):
        import cv2
        import numpy as np
        self.cv2, self.np = cv2, np
        self.rng = random.Random(seed)  # its methods are atomic under the GIL
        self.sub = np.array(MEAN, np.float32) * 255
        self.mul = 1 / (np.array(STD, np.float32) * 255)

    def __call__(self, path):
        cv2, np = self.cv2, self.np
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise RuntimeError(f"cv2.imread failed: {path}")
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        top, left, h, w = rrc_box(img.shape[0], img.shape[1], self.rng)
        img = cv2.resize(img[top:top + h, left:left + w], (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
        if self.rng.random() < 0.5:
            img = cv2.flip(img, 1)
        x = img.astype(np.float32)
        x -= self.sub
        x *= self.mul
        return x


# ---------------------------------------------------------------------------
# peers: each returns an "epoch runner": run_epoch() -> images delivered
# ---------------------------------------------------------------------------

def peer_fastq(paths, workers):
    import fastq
    from fastq import ops
    chain = [ops.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="bilinear"),
             ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
    labels = list(range(len(paths)))
    # pin_memory=False: a CPU benchmark; "auto" would load a CUDA runtime if one is
    # installed and put it into the peak RSS.
    p = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=BATCH, queue_size=4,
                       workers=workers, ops=chain, dtype="float32", seed=0, shuffle=True,
                       pin_memory=False)

    def run_epoch():
        n = 0
        for images, lab in p:
            n += images.shape[0]
            del images, lab  # release the slot at once
        return n

    def info():
        s = p.stats()
        return {k: s.get(k) for k in ("workers", "consumer_wait_s", "producer_wait_s",
                                      "samples_delivered", "skipped", "failed_samples")}
    return run_epoch, p.close, info


def peer_tfdata_n(paths, workers):
    """tf.data with the map parallelism fixed to the number of cores.  On this
    machine tf.data's rate is bimodal from one process to the next (about 780
    images/s with one core busy, or about 1500 with two), with AUTOTUNE and
    with a fixed parallelism alike; the median over rounds and this variant
    make it visible in the table."""
    return peer_tfdata(paths, workers, parallel=workers)


def peer_tfdata(paths, workers, parallel=None):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.random.set_seed(0)
    mean = tf.constant([m * 255 for m in MEAN], tf.float32)
    inv_std = tf.constant([1 / (s * 255) for s in STD], tf.float32)
    no_boxes = tf.zeros([1, 0, 4], tf.float32)

    def load(path, label):
        data = tf.io.read_file(path)
        shape = tf.image.extract_jpeg_shape(data)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=no_boxes, min_object_covered=0.0,
            aspect_ratio_range=RATIO, area_range=SCALE, max_attempts=10,
            use_image_if_no_bounding_boxes=True, seed=0)
        oy, ox, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        img = tf.image.decode_and_crop_jpeg(data, tf.stack([oy, ox, h, w]), channels=3)
        img = tf.image.resize(img, [SIZE, SIZE], method="bilinear", antialias=False)
        img = tf.image.random_flip_left_right(img, seed=0)
        return (img - mean) * inv_std, label

    ds = tf.data.Dataset.from_tensor_slices((paths, list(range(len(paths)))))
    ds = ds.shuffle(len(paths), seed=0, reshuffle_each_iteration=True)
    ds = ds.map(load, num_parallel_calls=parallel or tf.data.AUTOTUNE)
    ds = ds.batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def run_epoch():
        n = 0
        for images, lab in ds:  # EagerTensors: no conversion to numpy
            n += int(images.shape[0])
            del images, lab
        return n
    return run_epoch, None, lambda: {"tensorflow": tf.__version__}


def peer_tensorpack(paths, workers):
    import numpy as np
    from tensorpack.dataflow import BatchData, DataFromList, MultiThreadMapData
    sample = Cv2Sample(0)
    ds = DataFromList([[p, i] for i, p in enumerate(paths)], shuffle=True)
    ds = MultiThreadMapData(ds, num_thread=2, map_func=lambda dp: [sample(dp[0]), dp[1]],
                            buffer_size=200, strict=True)
    ds = BatchData(ds, BATCH, remainder=False, use_list=False)
    ds.reset_state()

    def run_epoch():
        n = 0
        for images, lab in ds:
            n += images.shape[0]
            del images, lab
        return n
    import tensorpack
    return run_epoch, None, lambda: {"tensorpack": tensorpack.__version__, "numpy": np.__version__}


def peer_pyloop(paths, workers):
    import numpy as np
    sample = Cv2Sample(0)
    order = random.Random(1)
    labels = np.arange(len(paths))

    def run_epoch():
        idx = list(range(len(paths)))
        order.shuffle(idx)
        n = 0
        for b in range(len(idx) // BATCH):
            rows = idx[b * BATCH:(b + 1) * BATCH]
            images = np.stack([sample(paths[i]) for i in rows])
            lab = labels[rows]
            n += images.shape[0]
            del images, lab
        return n
    return run_epoch, None, lambda: {}


def peer_dali(paths, workers):
    # Written against DALI's documented API (fn.readers.file, decoders.image_random_crop,
    # resize, crop_mirror_normalize; device_id=None = CPU only).  Not exercised here:
    # DALI is not installed on the machine this benchmark was written on.
    import numpy as np
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=workers, device_id=None, seed=0)
    def pipe():
        jpegs, labels = fn.readers.file(files=list(paths), labels=list(range(len(paths))),
                                        random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=list(SCALE), random_aspect_ratio=list(RATIO),
                                               num_attempts=10)
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE, interp_type=types.INTERP_LINEAR,
                           antialias=False)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    p = pipe()
    p.build()
    steps = len(paths) // BATCH

    def run_epoch():
        n = 0
        for _ in range(steps):
            images, lab = p.run()
            n += len(images)
            del images, lab
        return n
    return run_epoch, None, lambda: {"numpy": np.__version__}


PEER_IMPORTS = {"fastq": ["numpy", "fastq"], "fastq1": ["numpy", "fastq"], "tfdata": ["tensorflow"], "tfdata_n": ["tensorflow"],
                "tensorpack": ["cv2", "tensorpack.dataflow"], "pyloop": ["cv2"], "dali": ["nvidia.dali"]}
PEER_FUNCS = {"fastq": peer_fastq, "fastq1": peer_fastq, "tfdata": peer_tfdata, "tfdata_n": peer_tfdata_n,
              "tensorpack": peer_tensorpack, "pyloop": peer_pyloop, "dali": peer_dali}


def child_main(peer, cfg_path):
    """One peer in this (fresh) process: warm-up epoch + timed epochs -> JSON line."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    paths = cfg["paths"]
    workers = 1 if peer == "fastq1" else cfg["workers"]
    rss_start = proc_status_kb("VmRSS")
    for mod in PEER_IMPORTS[peer]:  # so that rss_import_kb is the frameworks' own share
        try:
            __import__(mod)
        except ImportError:
            pass
    rss_import = proc_status_kb("VmRSS")
    t = time.perf_counter()
    run_epoch, close, info = PEER_FUNCS[peer](paths, workers)
    setup_s = time.perf_counter() - t
    rss_built = proc_status_kb("VmRSS")  # imports + pipeline object, before any epoch
    t = time.perf_counter()
    warm_n = run_epoch()
    warm_s = time.perf_counter() - t
    rates, counts, cpu = [], [], []
    for _ in range(cfg["epochs"]):
        c0 = cpu_snapshot()
        n = run_epoch()
        c1 = cpu_snapshot()
        d = cpu_delta(c0, c1)
        rates.append(n / d["wall_s"])
        counts.append(n)
        d["cpu_us_per_image"] = d["own_cpu_s"] / n * 1e6
        cpu.append(d)
    out = {"peer": peer, "workers": workers, "rates": rates, "images_per_epoch": counts, "cpu": cpu,
           "warmup_rate": warm_n / warm_s, "setup_s": setup_s,
           "rss_start_kb": rss_start, "rss_import_kb": rss_import, "rss_built_kb": rss_built,
           "peak_rss_kb": proc_status_kb("VmHWM"), "info": info()}
    if close is not None:
        close()
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# single-thread per-stage profile
# ---------------------------------------------------------------------------

def profile_main(cfg_path):
    """Mean µs per image, one thread: the cv2 stage split and fastq's own per-sample path."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    import cv2
    import numpy as np
    from fastq import ops as O
    from fastq._image import ImageSpec, set_opencv_threads
    cv2.setNumThreads(1)
    set_opencv_threads(1)
    paths = cfg["paths"][:cfg["profile_images"]]
    passes = cfg["profile_passes"]
    blobs = [open(p, "rb").read() for p in paths]
    rrc = O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="bilinear")
    full = [rrc, O.HorizontalFlip(), O.Normalize(O.IMAGENET_MEAN, O.IMAGENET_STD)]
    specs = {
        "fq_full": ImageSpec(O.compile_ops(full)),
        "fq_full_nodct": ImageSpec(O.compile_ops(full, dct_scaling=False)),
        "fq_rrc_u8": ImageSpec(O.compile_ops([rrc], dtype="uint8")),
        "fq_rrc_nearest_u8": ImageSpec(O.compile_ops(
            [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")], dtype="uint8")),
        "fq_rrc_nearest_u8_nodct": ImageSpec(O.compile_ops(
            [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")], dtype="uint8",
            dct_scaling=False)),
    }
    EPOCH = 1
    explains = [specs["fq_full"].process_encoded(b, 0, EPOCH, i)[1] for i, b in enumerate(blobs)]
    for k in ("fq_rrc_nearest_u8", "fq_full_nodct"):  # the scale/ROI choice must not depend on these
        for i, b in enumerate(blobs[:50]):
            e = specs[k].process_encoded(b, 0, EPOCH, i)[1]
            assert e["crop_src"] == explains[i]["crop_src"], (k, i)
            if k == "fq_rrc_nearest_u8":
                assert e["decode_scale"] == explains[i]["decode_scale"], (k, i)
    reduced = {8: cv2.IMREAD_COLOR, 4: cv2.IMREAD_REDUCED_COLOR_2, 2: cv2.IMREAD_REDUCED_COLOR_4,
               1: cv2.IMREAD_REDUCED_COLOR_8}
    sub = np.array(MEAN, np.float32) * 255
    mul = 1 / (np.array(STD, np.float32) * 255)
    batch = np.empty((BATCH, SIZE, SIZE, 3), np.float32)
    pc = time.perf_counter
    stages = ["read", "imdecode_full", "cvtColor", "crop_resize", "flip", "normalize", "copy_row",
              "imdecode_scaled_cv2", "fq_full", "fq_full_nodct", "fq_rrc_u8", "fq_rrc_nearest_u8",
              "fq_rrc_nearest_u8_nodct"]
    per_pass = {s: [] for s in stages}
    for ps in range(passes + 1):  # pass 0 is a warm-up
        acc = dict.fromkeys(stages, 0.0)
        for i, (p, b) in enumerate(zip(paths, blobs)):
            ex = explains[i]
            t0 = pc()
            with open(p, "rb") as f:
                data = f.read()
            t1 = pc()
            buf = np.frombuffer(data, np.uint8)
            bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
            t2 = pc()
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            t3 = pc()
            x, y, w, h = ex["crop_src"]  # the same box fastq drew for this sample
            img = cv2.resize(rgb[y:y + h, x:x + w], (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
            t4 = pc()
            if ex["hflip"]:
                img = cv2.flip(img, 1)
            t5 = pc()
            xf = img.astype(np.float32)
            xf -= sub
            xf *= mul
            t6 = pc()
            batch[i % BATCH] = xf
            t7 = pc()
            cv2.imdecode(buf, reduced[ex["decode_scale"][0]])
            t8 = pc()
            for d, v in zip(stages[:8], (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7)):
                acc[d] += v
            for k, spec in specs.items():
                t = pc()
                spec.process_encoded(b, 0, EPOCH, i)
                acc[k] += pc() - t
        if ps:
            for s in stages:
                per_pass[s].append(acc[s] / len(paths) * 1e6)
    us = {s: statistics.median(v) for s, v in per_pass.items()}
    full_px = [e["src_shape"][0] * e["src_shape"][1] for e in explains]
    dec_px = [e["roi"][2] * e["roi"][3] if e["roi_used"] else e["decoded_shape"][0] * e["decoded_shape"][1]
              for e in explains]
    scales = {}
    for e in explains:
        k = f"{e['decode_scale'][0]}/{e['decode_scale'][1]}"
        scales[k] = scales.get(k, 0) + 1
    out = {"images": len(paths), "passes": passes, "us_per_image": us,
           "roi_used_fraction": sum(e["roi_used"] for e in explains) / len(explains),
           "decode_scale_counts": scales,
           "mean_source_mpx": statistics.mean(full_px) / 1e6,
           "mean_decoded_mpx_fastq": statistics.mean(dec_px) / 1e6,
           "mean_file_kb": statistics.mean(len(b) for b in blobs) / 1024}
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# parent: orchestration, table
# ---------------------------------------------------------------------------

def run_child(args, cfg_path, timeout):
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if any(f.startswith("_core") and f.endswith(".so") for f in os.listdir(os.path.join(REPO, "fastq"))):
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", *args, cfg_path]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
    return None, f"exit code {r.returncode}:\n{tail}"


BUSY_LIMIT = 0.25  # cores used by others (other processes + steal) that make a run "contended"


def contention(c):
    return (c["other_cores"] or 0.0) + (c["steal_cores"] or 0.0)


def available(peer):
    mod = {"tfdata": "tensorflow", "tfdata_n": "tensorflow", "tensorpack": "tensorpack", "pyloop": "cv2", "dali": "nvidia.dali"}.get(peer)
    if mod is None:
        return True
    import importlib.util
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


def _median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def verdict(value, target):
    if value >= target:
        return f"met (>= {target:.1f}x)"
    return f"MISSED: {value:.2f}x vs {target:.1f}x target, short by {target - value:.2f}x ({(1 - value / target) * 100:.0f} %)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=2000, help="images per epoch (default 2000)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 256 images")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the median is reported (default 3)")
    ap.add_argument("--workers", type=int, default=None, help="workers of fastq(cores) (default: usable cores)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated subset of {','.join(PEERS)} (empty: none)")
    ap.add_argument("--profile", action="store_true", help="also run the single-thread per-stage profile")
    ap.add_argument("--profile-images", type=int, default=300, help="images in the profile (default 300)")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"),
                    help="dataset cache (default <repo>/bench_data, gitignored)")
    ap.add_argument("--retry-busy", type=int, default=1,
                    help="measure a peer's round again (fresh process) up to this many times when other "
                         f"processes or the hypervisor took > {BUSY_LIMIT} cores during its timed epoch (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed per peer process")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--_child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:
        if a._child[0] == "profile":
            return profile_main(a._child[1])
        return child_main(a._child[0], a._child[1])

    if a.quick:
        a.images = 256
    if a.images < BATCH:
        ap.error(f"--images must be at least {BATCH}")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    peers = [p for p in a.peers.split(",") if p]
    bad = [p for p in peers if p not in PEERS]
    if bad:
        ap.error(f"unknown peer(s) {bad}; choose from {list(PEERS)}")
    cores = usable_cores()
    workers = a.workers or cores
    paths = dataset(a.images, a.data_dir)
    load0 = os.getloadavg()
    print(f"reference task: {a.images} JPEGs/epoch, batch {BATCH}, {SIZE}x{SIZE} float32 NHWC; "
          f"{a.repeats} round(s) x (warm-up + 1 timed epoch), median; {cores} usable core(s), "
          f"fastq(cores) workers={workers}; load average {load0[0]:.2f} {load0[1]:.2f}", flush=True)

    skipped = {}
    todo = []
    for p in peers:
        if available(p):
            todo.append(p)
        elif p == "dali":
            skipped[p] = "DALI not installed: skipped"
        else:
            skipped[p] = f"{p}: its framework is not installed: skipped"
    for msg in skipped.values():
        print(msg, flush=True)

    results = {p: [] for p in todo}
    failed = {}
    with tempfile.TemporaryDirectory(prefix="fastq_bench_") as tmp:
        cfg_path = os.path.join(tmp, "cfg.json")
        with open(cfg_path, "w") as f:
            json.dump({"paths": paths, "workers": workers, "epochs": 1,
                       "profile_images": min(a.profile_images, len(paths)), "profile_passes": 3}, f)
        for r in range(a.repeats):
            order = todo[r % len(todo):] + todo[:r % len(todo)] if todo else []
            for p in order:
                if p in failed:
                    continue
                for attempt in range(a.retry_busy + 1):
                    res, err = run_child([p], cfg_path, a.timeout)
                    if res is None:
                        failed[p] = err
                        print(f"  round {r + 1}: {PEERS[p]}: FAILED ({err})", flush=True)
                        break
                    c = res["cpu"][0]
                    busy = contention(c)
                    res["contended"] = busy > BUSY_LIMIT
                    res["attempts"] = attempt + 1
                    oth = "" if c["other_cores"] is None else \
                        f", other processes {c['other_cores']:.2f}, steal {c['steal_cores']:.2f}"
                    again = res["contended"] and attempt < a.retry_busy
                    print(f"  round {r + 1}: {PEERS[p]:38s} {res['rates'][0]:8.0f} images/s "
                          f"(warm-up {res['warmup_rate']:.0f}; cores used: own {c['own_cores']:.2f}{oth})"
                          f"{'  -> busy machine, measuring again' if again else ''}", flush=True)
                    if not again:
                        results[p].append(res)
                        break
        prof = None
        if a.profile:
            print("profiling (one thread) ...", flush=True)
            prof, err = run_child(["profile"], cfg_path, a.timeout)
            if prof is None:
                print(f"  profile FAILED ({err})", flush=True)
    load1 = os.getloadavg()

    summary = {}
    for p, runs in results.items():
        if not runs:
            continue
        rates = [x for res in runs for x in res["rates"]]
        summary[p] = {
            "label": PEERS[p], "images_per_s": statistics.median(rates), "runs": rates,
            "images_per_epoch": runs[0]["images_per_epoch"][0], "workers": runs[0]["workers"],
            "peak_rss_mb": max(res["peak_rss_kb"] for res in runs) / 1024,
            "rss_after_setup_mb": statistics.median(res["rss_built_kb"] for res in runs) / 1024,
            "rss_bare_python_mb": statistics.median(res["rss_start_kb"] for res in runs) / 1024,
            "rss_after_import_mb": statistics.median(res["rss_import_kb"] for res in runs) / 1024,
            "info": runs[-1]["info"],
            "cpu_us_per_image": statistics.median(c["cpu_us_per_image"] for res in runs for c in res["cpu"]),
            "own_cores": statistics.median(c["own_cores"] for res in runs for c in res["cpu"]),
            "other_cores": _median_or_none(c["other_cores"] for res in runs for c in res["cpu"]),
            "steal_cores": _median_or_none(c["steal_cores"] for res in runs for c in res["cpu"]),
            "contended_runs": sum(res["contended"] for res in runs),
            "measurements": sum(res["attempts"] for res in runs),
        }
    fq = summary.get("fastq", {}).get("images_per_s")

    print()
    print(f"{'peer':40s} {'images/s':>9s} {'runs (min-max)':>15s} {'fastq/peer':>10s} {'peak RSS':>9s}"
          f" {'CPU us/img':>10s} {'cores own/others':>16s}")
    for p in PEERS:
        if p in summary:
            s = summary[p]
            ratio = f"{fq / s['images_per_s']:9.2f}x" if fq else "         -"
            oth = "-" if s["other_cores"] is None else f"{s['other_cores'] + (s['steal_cores'] or 0):.2f}"
            print(f"{s['label']:40s} {s['images_per_s']:9.0f} {min(s['runs']):7.0f}-{max(s['runs']):<7.0f} "
                  f"{ratio} {s['peak_rss_mb']:7.0f}MB {s['cpu_us_per_image']:10.0f} "
                  f"{s['own_cores']:8.2f}/{oth:<7s}")
        elif p in skipped or p in failed:
            why = "not installed, skipped" if p in skipped else "FAILED"
            print(f"{PEERS[p]:40s} {'-':>9s} {why:>15s}")
    if "dali" in skipped and "dali" in peers:
        print(f"{'  DALI CPU, DESIGN.md (other sitting)':40s} {DALI_DESIGN_REFERENCE:9.0f} "
              f"{'REFERENCE ONLY':>15s}  not measured here")
    if "fastq" in summary:
        s = summary["fastq"]
        print(f"\nfastq(cores) peak RSS: {s['peak_rss_mb']:.0f} MB for the whole process "
              f"({s['rss_after_import_mb']:.0f} MB after importing fastq+numpy, "
              f"{s['rss_after_setup_mb']:.0f} MB with the Pipeline built, before the first epoch); "
              f"the ring alone is 4 slots x {BATCH * SIZE * SIZE * 3 * 4 / 2**20:.1f} MB.")

    ratios = {}
    print("\nratios (same run):")
    for name, num, den, target in TARGETS:
        if num in summary and den in summary:
            v = summary[num]["images_per_s"] / summary[den]["images_per_s"]
            ratios[name] = {"value": v, "target": target, "met": v >= target}
            need = target * summary[den]["images_per_s"]
            extra = "" if v >= target else f"; fastq would need {need:.0f} images/s"
            if den == "fastq1" and workers < 2:
                extra += " (only 1 worker: this target needs >= 2 cores)"
            print(f"  {name:26s} {v:5.2f}x  target >= {target:.1f}x: {verdict(v, target)}{extra}")
        elif den == "dali" and "dali" in peers and num in summary:
            v = summary[num]["images_per_s"] / DALI_DESIGN_REFERENCE
            ratios[name] = {"value": None, "target": target, "met": None,
                            "reference_only": v, "note": "DALI not installed; fastq here / DESIGN.md's DALI figure"}
            print(f"  {name:26s}   n/a  target >= {target:.1f}x: NOT MEASURED (DALI not installed). "
                  f"Reference only: fastq here / DESIGN.md's {DALI_DESIGN_REFERENCE:.0f} images/s "
                  f"from another sitting = {v:.2f}x")
        else:
            print(f"  {name:26s}   n/a  (a peer is missing)")
    print(f"load average at start {load0[0]:.2f}, at end {load1[0]:.2f} (1 min; other users share the cores)")
    for p, s in summary.items():
        if s["contended_runs"]:
            print(f"note: {s['contended_runs']} of {len(s['runs'])} runs of {s['label']} shared the CPUs with "
                  f"other work (> {BUSY_LIMIT} cores) even after re-measuring; those runs read low")
    print("columns: runs = timed epochs of the rounds; CPU us/img = this peer's process CPU time per image "
          "(all its threads);\n  cores own/others = cores busy with this peer / with other processes "
          "+ hypervisor steal, during its timed epochs (medians).")

    if prof:
        print_profile(prof, summary, workers)
    if failed:
        print("\nfailed peers:")
        for p, err in failed.items():
            print(f"  {PEERS[p]}: {err}")

    if a.json:
        out = {"task": {"images": a.images, "batch": BATCH, "size": SIZE, "dtype": "float32", "layout": "NHWC",
                        "scale": SCALE, "ratio": RATIO, "repeats": a.repeats},
               "machine": {"usable_cores": cores, "fastq_workers": workers, "python": platform.python_version(),
                           "platform": platform.platform(), "loadavg_start": load0, "loadavg_end": load1},
               "peers": summary, "skipped": skipped, "failed": failed, "ratios": ratios,
               "dali_design_reference_not_measured": DALI_DESIGN_REFERENCE, "profile": prof}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\nwrote {a.json}")


def print_profile(prof, summary, workers):
    u = prof["us_per_image"]
    print(f"\nper-stage profile, one thread, mean µs per image over {prof['images']} images "
          f"(median of {prof['passes']} passes; files in page cache; mean file {prof['mean_file_kb']:.0f} kB, "
          f"mean source {prof['mean_source_mpx']:.3f} Mpx):")
    print("  cv2 path (what the tensorpack / Python-loop peers do; same crop boxes as fastq):")
    cv2_rows = [("file read", "read"), ("JPEG decode, full (cv2.imdecode)", "imdecode_full"),
                ("BGR->RGB (cvtColor)", "cvtColor"), ("crop + resize 224 bilinear", "crop_resize"),
                ("h-flip (when drawn)", "flip"), ("normalize (numpy, float32)", "normalize"),
                ("copy float32 row into a batch", "copy_row")]
    for label, k in cv2_rows:
        print(f"    {label:46s} {u[k]:8.0f}")
    total = sum(u[k] for _, k in cv2_rows)
    print(f"    {'total':46s} {total:8.0f}   -> {1e6 / total:.0f} images/s per core")
    print(f"    {'(JPEG decode at fastq scale, full frame, cv2)':46s} {u['imdecode_scaled_cv2']:8.0f}")
    print("  fastq per-sample path (ImageSpec.process_encoded from bytes; differences of variants):")
    dec = u["fq_rrc_nearest_u8"]
    rows = [("decode: ROI + DCT-scaled (+ nearest 224 sample)", dec),
            ("decode: ROI only, full scale (+ nearest sample)", u["fq_rrc_nearest_u8_nodct"]),
            ("resample 224 bilinear (RRC u8 - nearest)", u["fq_rrc_u8"] - dec),
            ("flip + normalize + float32 write (fused)", u["fq_full"] - u["fq_rrc_u8"])]
    for label, v in rows:
        print(f"    {label:46s} {v:8.0f}")
    print(f"    {'total, dct_scaling=True (what Pipeline runs)':46s} {u['fq_full']:8.0f}")
    print(f"    {'total, dct_scaling=False':46s} {u['fq_full_nodct']:8.0f}")
    per_img = u["read"] + u["fq_full"]
    print(f"    {'+ file read':46s} {per_img:8.0f}   -> {1e6 / per_img:.0f} images/s per core, "
          f"{workers * 1e6 / per_img:.0f} with {workers} ideal workers")
    sc = ", ".join(f"{k}: {v}" for k, v in sorted(prof["decode_scale_counts"].items()))
    print(f"  fastq decode choices: ROI used for {prof['roi_used_fraction'] * 100:.0f} % of images; "
          f"DCT scale counts {{{sc}}}; pixels decoded {prof['mean_decoded_mpx_fastq']:.3f} Mpx "
          f"vs {prof['mean_source_mpx']:.3f} Mpx full ({prof['mean_decoded_mpx_fastq'] / prof['mean_source_mpx'] * 100:.0f} %)")
    floor = u["read"] + dec
    bound = workers * 1e6 / floor
    line = (f"  file read + decode = {floor:.0f} of those {per_img:.0f} µs ({floor / per_img * 100:.0f} %): with every "
            f"other stage free, {workers} workers could reach at most ~{bound:.0f} images/s")
    if "tfdata" in summary:
        line += f" = {bound / summary['tfdata']['images_per_s']:.2f}x tf.data native of this run"
    print(line)
    if "fastq" in summary:
        ideal = workers * 1e6 / per_img
        got = summary["fastq"]["images_per_s"]
        print(f"  fastq(cores) measured {got:.0f} images/s = {got / ideal * 100:.0f} % of the ideal "
              f"{workers} x single-thread rate")
    if "fastq1" in summary:
        got = summary["fastq1"]["images_per_s"]
        print(f"  fastq(1) measured {got:.0f} images/s = {got / (1e6 / per_img) * 100:.0f} % of the "
              f"single-thread rate")


if __name__ == "__main__":
    main()
