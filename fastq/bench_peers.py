"""The tasks and peers of ``fastq bench`` (see :mod:`fastq.bench`).

Each peer runs a whole task (files -> decode -> augment -> float32 batches) in
its own fresh Python process: ``python -m fastq.bench_peers PEER WORKERS CFG``
prints one ``RESULT {json}`` line.  Nothing here is imported by the parent
process except the task table, so a peer's imports (TensorFlow, DALI, ...)
never land in another peer's process.

Tasks (``--task``):

  reference  JPEG -> RGB -> RandomResizedCrop 224 (area 0.08-1, aspect 3/4-4/3,
             bilinear) -> random h-flip -> normalize (ImageNet mean/std) ->
             float32 NHWC batches of 64 (the reference task of docs/cli.md)
  train      reference + ColorJitter(brightness, contrast, saturation = 0.4)
             before normalizing
  eval       resize the shorter side to 256 (bilinear) -> center crop 224 ->
             normalize
  small-96   reference at 96 x 96

What each peer runs for a task is written next to it below; the peers' color
jitter follows each library's own operators (torchvision-style factors for
fastq, cv2/numpy and DALI's color_twist; tf.image's adjust_* for tf.data), so
the train task compares like work, not bit-identical output.
"""
import json
import math
import os
import random
import sys
import time

BATCH = 64
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)


class Task:
    """One benchmark task: output size, geometry mode ("rrc" random-resized
    crop + flip, or "center": resize shorter side + center crop), jitter."""

    def __init__(self, name, size, mode="rrc", resize=None, jitter=0.0, batch=BATCH):
        self.name, self.size, self.mode, self.resize, self.jitter, self.batch = \
            name, size, mode, resize, jitter, batch

    def describe(self):
        if self.mode == "center":
            geo = f"resize shorter side {self.resize} -> center crop {self.size}"
        else:
            geo = f"RandomResizedCrop {self.size} (area 0.08-1, aspect 3/4-4/3) -> h-flip"
        jit = f" -> ColorJitter({self.jitter}, {self.jitter}, {self.jitter})" if self.jitter else ""
        return f"{geo}{jit} -> normalize -> float32 NHWC, batch {self.batch}"

    def to_dict(self):
        return dict(self.__dict__)

    def fastq_ops(self):
        from fastq import ops
        if self.mode == "center":
            chain = [ops.Resize(shorter_side=self.resize), ops.CenterCrop(self.size)]
        else:
            chain = [ops.RandomResizedCrop(self.size, scale=SCALE, ratio=RATIO, interpolation="bilinear"),
                     ops.HorizontalFlip()]
        if self.jitter:
            chain.append(ops.ColorJitter(self.jitter, self.jitter, self.jitter))
        chain.append(ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD))
        return chain


TASKS = {
    "reference": Task("reference", 224),
    "train": Task("train", 224, jitter=0.4),
    "eval": Task("eval", 224, mode="center", resize=256),
    "small-96": Task("small-96", 96),
}


def task_from_dict(d):
    t = Task(d["name"], d["size"])
    t.__dict__.update(d)
    return t


# ---------------------------------------------------------------------------
# measuring a process
# ---------------------------------------------------------------------------

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
    """path -> float32 (size, size, 3) RGB normalized, with cv2 + numpy.

    rrc: imread -> cvtColor(BGR2RGB) -> torchvision's box sampling -> resize
    INTER_LINEAR -> flip p=0.5; center: resize shorter side INTER_LINEAR ->
    center crop; jitter (float32): brightness f*x, contrast f*x + (1-f)*mean(gray),
    saturation f*x + (1-f)*gray, clipped to [0, 255]; then subtract/multiply in place."""

    def __init__(self, task, seed=0):
        import cv2
        import numpy as np
        self.cv2, self.np, self.task = cv2, np, task
        self.rng = random.Random(seed)  # its methods are atomic under the GIL
        self.sub = np.array(MEAN, np.float32) * 255
        self.mul = 1 / (np.array(STD, np.float32) * 255)
        self.gray_w = np.array([0.299, 0.587, 0.114], np.float32)

    def __call__(self, path):
        img = self.cv2.imread(path, self.cv2.IMREAD_COLOR)
        if img is None:
            raise RuntimeError(f"cv2.imread failed: {path}")
        return self.augment(img)

    def from_bytes(self, data, where):
        """The same for an encoded image held in memory (a TFRecord record's image)."""
        img = self.cv2.imdecode(self.np.frombuffer(data, self.np.uint8), self.cv2.IMREAD_COLOR)
        if img is None:
            raise RuntimeError(f"cv2.imdecode failed: {where}")
        return self.augment(img)

    def augment(self, img):
        """BGR uint8 image (as cv2 decodes it) -> the task's float32 sample."""
        cv2, np, t = self.cv2, self.np, self.task
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        S = t.size
        if t.mode == "center":
            H, W = img.shape[:2]
            if H <= W:
                nh, nw = t.resize, int(t.resize * W / H)
            else:
                nh, nw = int(t.resize * H / W), t.resize
            img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
            top, left = int(round((nh - S) / 2)), int(round((nw - S) / 2))
            img = img[top:top + S, left:left + S]
        else:
            top, left, h, w = rrc_box(img.shape[0], img.shape[1], self.rng)
            img = cv2.resize(img[top:top + h, left:left + w], (S, S), interpolation=cv2.INTER_LINEAR)
            if self.rng.random() < 0.5:
                img = cv2.flip(img, 1)
        x = img.astype(np.float32)
        if t.jitter:
            lo, hi = max(0.0, 1 - t.jitter), 1 + t.jitter
            x *= self.rng.uniform(lo, hi)
            c = self.rng.uniform(lo, hi)
            x = x * c + float((x @ self.gray_w).mean()) * (1 - c)
            s = self.rng.uniform(lo, hi)
            x = x * s + (x @ self.gray_w)[..., None] * (1 - s)
            np.clip(x, 0, 255, out=x)
        x -= self.sub
        x *= self.mul
        return x



# ---------------------------------------------------------------------------
# TFRecord input (``fastq bench SHARDS``)
# ---------------------------------------------------------------------------

class TFRecordData:
    """The records one benchmark epoch reads from TFRecord shards: the first
    ``records`` records in shard order, located by one DALI-style text index
    per shard (``offset framed_size`` per line, written by the parent)."""

    def __init__(self, shards, index_files, records, all_jpeg, image_key, label_key):
        self.shards, self.index_files, self.records = list(shards), list(index_files), int(records)
        self.all_jpeg, self.image_key, self.label_key = all_jpeg, image_key, label_key

    def __len__(self):
        return self.records

    def locations(self):
        """[(shard number, payload offset, payload length)] for every record, in order."""
        out = []
        for k, idx in enumerate(self.index_files):
            with open(idx) as f:
                for line in f:
                    off, framed = (int(x) for x in line.split()[:2])
                    out.append((k, off + 12, framed - 16))
        return out


def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of one protobuf message; value is a
    memoryview for length-delimited fields, an int otherwise."""
    i, n = 0, len(buf)
    while i < n:
        tag, i = _varint(buf, i)
        wt = tag & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            ln, i = _varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        if i > n:
            raise ValueError("truncated protobuf message")
        yield tag >> 3, wt, v


def parse_example(data, keys):
    """A minimal pure-Python tf.train.Example reader (no TensorFlow): {key: value}
    for the requested keys; bytes features -> list of bytes, int64 -> list of int
    (two's complement), float -> list of float."""
    import struct
    out = {}
    for f, wt, features in _fields(memoryview(data)):
        if f != 1 or wt != 2:
            continue
        for g, wt2, entry in _fields(features):
            if g != 1 or wt2 != 2:
                continue
            key, feature = None, None
            for h, _, v in _fields(entry):
                if h == 1:
                    key = bytes(v).decode()
                elif h == 2:
                    feature = v
            if key not in keys or feature is None:
                continue
            vals = []
            for kind, wt3, lst in _fields(feature):
                for h, wt4, v in _fields(lst):
                    if h != 1:
                        continue
                    if kind == 1:
                        vals.append(bytes(v))
                    elif kind == 3:
                        if wt4 == 2:
                            j = 0
                            while j < len(v):
                                x, j = _varint(v, j)
                                vals.append(x - (1 << 64) if x >= 1 << 63 else x)
                        else:
                            vals.append(v - (1 << 64) if v >= 1 << 63 else v)
                    elif kind == 2:
                        if wt4 == 2:
                            vals += list(struct.unpack(f"<{len(v) // 4}f", v))
                        else:
                            vals.append(struct.unpack("<f", v.to_bytes(4, "little"))[0])
            out[key] = vals
    return out


class PyRecords:
    """Records read with plain Python (os.pread on the shards, thread-safe), the
    Example parsed by :func:`parse_example`: how the cv2 peers read TFRecord."""

    def __init__(self, data):
        self.data = data
        self.fds = [os.open(p, os.O_RDONLY) for p in data.shards]
        self.locs = data.locations()
        self.keys = {data.image_key, data.label_key}

    def __len__(self):
        return len(self.locs)

    def read(self, i):
        """(encoded image bytes, label) of record i."""
        k, off, ln = self.locs[i]
        buf = os.pread(self.fds[k], ln, off)
        if len(buf) != ln:
            raise RuntimeError(f"{self.data.shards[k]}: short read of the record at offset {off}")
        ex = parse_example(buf, self.keys)
        img, lab = ex.get(self.data.image_key), ex.get(self.data.label_key)
        if not img or not lab:
            raise RuntimeError(f"{self.data.shards[k]}: the record at offset {off} has no "
                               f"{self.data.image_key!r} / {self.data.label_key!r}")
        return img[0], lab[0]

    def where(self, i):
        k, off, _ = self.locs[i]
        return f"{self.data.shards[k]} (record at offset {off - 12})"

    def close(self):
        for fd in self.fds:
            os.close(fd)

# ---------------------------------------------------------------------------
# peers: each returns (run_epoch() -> images delivered, close or None, info() -> dict)
# ---------------------------------------------------------------------------

def peer_fastq(paths, workers, task):
    """fastq.Pipeline(sources.Files, or sources.TFRecord for shards), queue_size 4,
    shuffle, pin_memory=False."""
    import fastq
    if isinstance(paths, TFRecordData):  # native TFRecord reader, the parent's record index
        src = fastq.sources.TFRecord(paths.shards, image_key=paths.image_key, label_key=paths.label_key,
                                     index=paths.index_files)
    else:
        src = fastq.sources.Files(paths, list(range(len(paths))))
    # pin_memory=False: a CPU benchmark; "auto" would load a CUDA runtime if one is
    # installed and put it into the peak RSS.
    p = fastq.Pipeline(src, batch_size=task.batch, queue_size=4,
                       workers=workers, ops=task.fastq_ops(), dtype="float32", seed=0, shuffle=True,
                       pin_memory=False)

    def run_epoch():
        n = 0
        for images, lab in p:
            n += images.shape[0]
            del images, lab  # release the slot at once
        return n

    def info():
        s = p.stats()
        out = {k: s.get(k) for k in ("workers", "consumer_wait_s", "producer_wait_s",
                                     "samples_delivered", "skipped", "failed_samples")}
        out["stages"] = s.get("stages")
        out["fastq"] = fastq.__version__
        return out
    return run_epoch, p.close, info


def peer_tfdata_n(paths, workers, task):
    """tf.data with the map parallelism fixed to the number of cores (tf.data's
    AUTOTUNE rate was bimodal from one process to the next on 2 cores)."""
    return peer_tfdata(paths, workers, task, parallel=workers)


def peer_tfdata(paths, workers, task, parallel=None):
    """tf.data native ops.  rrc: read_file -> sample_distorted_bounding_box ->
    decode_and_crop_jpeg (decode_image + slice for non-JPEG files) -> resize
    bilinear -> random_flip_left_right; center: decode -> resize shorter side ->
    slice; jitter: x*U(b) , random_contrast, random_saturation, clip; normalize;
    map(AUTOTUNE) -> batch(drop_remainder) -> prefetch(AUTOTUNE).
    TFRecord shards: TFRecordDataset(shards).take(records) -> shuffle(buffer
    min(records, 1024)) -> map(parse_single_example + the same ops)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.random.set_seed(0)
    S = task.size
    mean = tf.constant([m * 255 for m in MEAN], tf.float32)
    inv_std = tf.constant([1 / (s * 255) for s in STD], tf.float32)
    no_boxes = tf.zeros([1, 0, 4], tf.float32)
    tfr = paths if isinstance(paths, TFRecordData) else None
    all_jpeg = tfr.all_jpeg if tfr else all(p.lower().endswith((".jpg", ".jpeg")) for p in paths)

    def decode_full(data):
        if all_jpeg:
            return tf.io.decode_jpeg(data, channels=3)
        return tf.io.decode_image(data, channels=3, expand_animations=False)

    def load(data, label):
        if task.mode == "center":
            img = decode_full(data)
            sh = tf.shape(img)
            h, w = sh[0], sh[1]
            short = tf.minimum(h, w)
            nh = tf.where(h <= w, task.resize, (task.resize * h) // short)
            nw = tf.where(h <= w, (task.resize * w) // short, task.resize)
            img = tf.image.resize(img, tf.stack([nh, nw]), method="bilinear", antialias=False)
            top = (nh - S) // 2
            left = (nw - S) // 2
            img = img[top:top + S, left:left + S, :]
        else:
            shape = tf.image.extract_jpeg_shape(data) if all_jpeg else None
            if shape is None:
                full = decode_full(data)
                shape = tf.shape(full)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                shape, bounding_boxes=no_boxes, min_object_covered=0.0,
                aspect_ratio_range=RATIO, area_range=SCALE, max_attempts=10,
                use_image_if_no_bounding_boxes=True, seed=0)
            oy, ox, _ = tf.unstack(begin)
            h, w, _ = tf.unstack(size)
            if all_jpeg:
                img = tf.image.decode_and_crop_jpeg(data, tf.stack([oy, ox, h, w]), channels=3)
            else:
                img = full[oy:oy + h, ox:ox + w, :]
            img = tf.image.resize(img, [S, S], method="bilinear", antialias=False)
            img = tf.image.random_flip_left_right(img, seed=0)
        if task.jitter:
            lo, hi = max(0.0, 1 - task.jitter), 1 + task.jitter
            img = img * tf.random.uniform([], lo, hi)
            img = tf.image.random_contrast(img, lo, hi)
            img = tf.image.random_saturation(img, lo, hi)
            img = tf.clip_by_value(img, 0.0, 255.0)
        return (img - mean) * inv_std, label

    if tfr is not None:
        spec = {tfr.image_key: tf.io.FixedLenFeature([], tf.string),
                tfr.label_key: tf.io.FixedLenFeature([], tf.int64)}

        def parse_load(record):
            ex = tf.io.parse_single_example(record, spec)
            return load(ex[tfr.image_key], ex[tfr.label_key])
        ds = tf.data.TFRecordDataset(tfr.shards).take(tfr.records)
        ds = ds.shuffle(min(tfr.records, 1024), seed=0, reshuffle_each_iteration=True)
        ds = ds.map(parse_load, num_parallel_calls=parallel or tf.data.AUTOTUNE)
    else:
        ds = tf.data.Dataset.from_tensor_slices((paths, list(range(len(paths)))))
        ds = ds.shuffle(len(paths), seed=0, reshuffle_each_iteration=True)
        ds = ds.map(lambda path, label: load(tf.io.read_file(path), label),
                    num_parallel_calls=parallel or tf.data.AUTOTUNE)
    ds = ds.batch(task.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def run_epoch():
        n = 0
        for images, lab in ds:  # EagerTensors: no conversion to numpy
            n += int(images.shape[0])
            del images, lab
        return n
    return run_epoch, None, lambda: {"tensorflow": tf.__version__}


def peer_tensorpack(paths, workers, task):
    """DataFromList(shuffle) -> MultiThreadMapData(2 threads, the cv2 code) -> BatchData.
    TFRecord shards: the records are read with :class:`PyRecords` (os.pread +
    a pure-Python Example parser) inside the mapped function."""
    import numpy as np
    from tensorpack.dataflow import BatchData, DataFromList, MultiThreadMapData
    sample = Cv2Sample(task, 0)
    if isinstance(paths, TFRecordData):
        recs = PyRecords(paths)

        def map_func(dp):
            data, label = recs.read(dp[0])
            return [sample.from_bytes(data, recs.where(dp[0])), label]
        ds = DataFromList([[i] for i in range(len(recs))], shuffle=True)
    else:
        def map_func(dp):
            return [sample(dp[0]), dp[1]]
        ds = DataFromList([[p, i] for i, p in enumerate(paths)], shuffle=True)
    ds = MultiThreadMapData(ds, num_thread=2, map_func=map_func, buffer_size=200, strict=True)
    ds = BatchData(ds, task.batch, remainder=False, use_list=False)
    ds.reset_state()

    def run_epoch():
        n = 0
        for images, lab in ds:
            n += images.shape[0]
            del images, lab
        return n
    import tensorpack
    return run_epoch, None, lambda: {"tensorpack": tensorpack.__version__, "numpy": np.__version__}


def peer_pyloop(paths, workers, task):
    """The cv2 code in one Python thread, np.stack per batch (TFRecord shards:
    records read with :class:`PyRecords`)."""
    import numpy as np
    sample = Cv2Sample(task, 0)
    order = random.Random(1)
    B = task.batch
    if isinstance(paths, TFRecordData):
        recs = PyRecords(paths)

        def one(i):
            data, label = recs.read(i)
            return sample.from_bytes(data, recs.where(i)), label
    else:
        def one(i):
            return sample(paths[i]), i

    def run_epoch():
        idx = list(range(len(paths)))
        order.shuffle(idx)
        n = 0
        for b in range(len(idx) // B):
            rows = idx[b * B:(b + 1) * B]
            got = [one(i) for i in rows]
            images = np.stack([g[0] for g in got])
            lab = np.array([g[1] for g in got], np.int64)
            n += images.shape[0]
            del images, lab
        return n
    return run_epoch, None, lambda: {}


def peer_dali(paths, workers, task):
    """NVIDIA DALI CPU pipeline (device_id=None).  rrc: readers.file ->
    decoders.image_random_crop -> resize (linear, no antialias); center:
    decoders.image -> resize(resize_shorter) ; jitter: color_twist with uniform
    factors; crop_mirror_normalize (float, HWC, random mirror for rrc)."""
    from nvidia.dali import fn, pipeline_def, types
    import nvidia.dali
    S = task.size

    @pipeline_def(batch_size=task.batch, num_threads=workers, device_id=None, seed=0)
    def pipe():
        jpegs, labels = fn.readers.file(files=list(paths), labels=list(range(len(paths))),
                                        random_shuffle=True, name="Reader")
        if task.mode == "center":
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=task.resize, interp_type=types.INTERP_LINEAR,
                               antialias=False)
            mirror = 0
            crop = (S, S)
        else:
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=list(SCALE), random_aspect_ratio=list(RATIO),
                                                   num_attempts=10)
            images = fn.resize(images, resize_x=S, resize_y=S, interp_type=types.INTERP_LINEAR,
                               antialias=False)
            mirror = fn.random.coin_flip(probability=0.5)
            crop = None
        if task.jitter:
            lo, hi = max(0.0, 1 - task.jitter), 1 + task.jitter
            images = fn.color_twist(images, brightness=fn.random.uniform(range=[lo, hi]),
                                    contrast=fn.random.uniform(range=[lo, hi]),
                                    saturation=fn.random.uniform(range=[lo, hi]))
        kw = {"crop": crop} if crop else {}
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=mirror, **kw)
        return images, labels

    p = pipe()
    p.build()
    steps = len(paths) // task.batch

    def run_epoch():
        n = 0
        for _ in range(steps):
            images, lab = p.run()
            n += len(images)
            del images, lab
        return n
    return run_epoch, None, lambda: {"dali": nvidia.dali.__version__}


# key -> (label, function, modules that must import, modules imported before timing RSS)
PEERS = {
    "fastq": ("fastq", peer_fastq, ["fastq._image"], ["numpy", "fastq"]),
    "tfdata": ("tf.data native (AUTOTUNE)", peer_tfdata, ["tensorflow"], ["tensorflow"]),
    "tfdata_n": ("tf.data native (map parallel = cores)", peer_tfdata_n, ["tensorflow"], ["tensorflow"]),
    "dali": ("NVIDIA DALI CPU", peer_dali, ["nvidia.dali"], ["nvidia.dali"]),
    "tensorpack": ("tensorpack MultiThreadMapData(2)+cv2", peer_tensorpack, ["tensorpack", "cv2"],
                   ["cv2", "tensorpack.dataflow"]),
    "pyloop": ("Python loop + cv2", peer_pyloop, ["cv2"], ["cv2"]),
}


# peers that read TFRecord shards (natively, or for the cv2 peers with PyRecords);
# the others are reported as "not available for TFRecord input".
TFRECORD_PEERS = {"fastq": "fastq.sources.TFRecord (native reader)",
                  "tfdata": "tf.data.TFRecordDataset + parse_single_example",
                  "tfdata_n": "tf.data.TFRecordDataset + parse_single_example",
                  "tensorpack": "Python reader (os.pread + pure-Python Example parser)",
                  "pyloop": "Python reader (os.pread + pure-Python Example parser)"}


def base_peer(key):
    """'fastq@2' -> 'fastq'."""
    return key.split("@")[0]


def peer_label(key, workers=None):
    base = base_peer(key)
    if base == "fastq":
        w = key.split("@")[1] if "@" in key else workers
        return f"fastq (workers={w})" if w is not None else "fastq"
    return PEERS[base][0]


# ---------------------------------------------------------------------------
# child process
# ---------------------------------------------------------------------------

def child_main(peer, workers, cfg_path):
    """One peer in this (fresh) process: warm-up epoch + timed epochs -> RESULT line."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    paths = TFRecordData(**cfg["tfrecord"]) if cfg.get("tfrecord") else cfg["paths"]
    task = task_from_dict(cfg["task"])
    base = base_peer(peer)
    _, fn, _, imports = PEERS[base]
    rss_start = proc_status_kb("VmRSS")
    for mod in imports:  # so that rss_import_kb is the frameworks' own share
        try:
            __import__(mod)
        except ImportError:
            pass
    rss_import = proc_status_kb("VmRSS")
    t = time.perf_counter()
    run_epoch, close, info = fn(paths, workers, task)
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
        if n <= 0:
            raise RuntimeError(f"{peer}: an epoch delivered no images")
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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "profile":
        from fastq.bench_profile import profile_main
        profile_main(sys.argv[2])
    elif len(sys.argv) == 4:
        child_main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit("usage: python -m fastq.bench_peers PEER WORKERS CFG.json | profile CFG.json")
