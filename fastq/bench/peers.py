"""The peers of ``fastq bench``: what each library runs for a task (see
:mod:`fastq.bench.tasks` for the tasks and :mod:`fastq.bench.runner` for the method).

Each peer runs a whole task (files -> decode -> augment -> float32 batches) in
its own fresh Python process (:mod:`fastq.bench.child`).  Nothing here is
imported by the parent process except the peer table, so a peer's imports
(TensorFlow, DALI, ...) never land in another peer's process.

What each peer runs for a task is written next to it below; the peers' color
jitter follows each library's own operators (torchvision-style factors for
fastq, cv2/numpy and DALI's color_twist; tf.image's adjust_* for tf.data), so
the train task compares like work, not bit-identical output.
"""
import math
import os
import random

from fastq.bench.data import PyRecords, TFRecordData
from fastq.bench.tasks import MEAN, RATIO, SCALE, STD

__all__ = ["PEERS", "TFRECORD_PEERS", "base_peer", "peer_label", "Cv2Sample", "rrc_box", "tfdata_load",
           "fastq_pipeline", "fbresnet_augmentors"]


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
# peers: each returns (run_epoch() -> images delivered, close or None, info() -> dict)
# ---------------------------------------------------------------------------

def _batch_epochs(batches, info):
    """(run_epoch, None, info) of a peer whose batches come as (images, labels) pairs
    from a re-iterable ``batches`` (a tf.data Dataset, a torch DataLoader, a tensorpack
    DataFlow): run_epoch iterates it once, counts the rows of each batch and drops it
    (after ``consume(images)`` when given: the feed benchmark's trainer);
    info() returns the dict ``info`` (the libraries' versions).

    ``run_epoch.settle()`` tears down the last epoch's tf.data iterator, for a caller
    to call after it stopped its clock (fastq.bench.child does).  With autotune on, a
    tf.data iterator's destructor waits for the autotune thread: 0.85-1.07 s per
    iterator for the reference task's map(AUTOTUNE) on 2 cores, against 1.6 s epochs of
    2000 images.  That is a cost per iterator, not per image, which a training loop
    over repeat() never pays, so it stays out of the images/s.  Not settled, it is paid
    at the start of the next epoch, as before."""
    held = []
    is_tf = type(batches).__module__.startswith("tensorflow")

    def run_epoch(consume=None):
        held.clear()
        n = 0
        it = iter(batches)
        for images, lab in it:
            n += int(images.shape[0])
            if consume is not None:
                consume(images)
            del images, lab  # release the batch at once
        if is_tf:
            held.append(it)
        return n
    run_epoch.batches = batches  # for a benchmark that iterates it its own way
    run_epoch.settle = held.clear
    return run_epoch, None, lambda: info


def peer_fastq(paths, workers, task, **pipeline_kw):
    """fastq.Pipeline(sources.Files, or sources.TFRecord for shards): :func:`fastq_pipeline`
    (``pipeline_kw``: more Pipeline arguments, e.g. worker_priority)."""
    if getattr(task, "aug", None) in ("detection", "segmentation"):  # fastq.bench.dense
        from fastq.bench.dense import dense_peer
        return dense_peer("fastq", paths, workers, task)
    import fastq
    if isinstance(paths, TFRecordData):  # native TFRecord reader, the parent's record index
        src = fastq.sources.TFRecord(paths.shards, image_key=paths.image_key, label_key=paths.label_key,
                                     index=paths.index_files)
    else:
        src = fastq.sources.Files(paths, list(range(len(paths))))
    return fastq_pipeline(src, workers, task, **pipeline_kw)


def peer_fastq_normal(paths, workers, task):
    """The fastq peer with ``worker_priority="normal"`` (workers at the process's priority,
    on every CPU): against ``fastq`` (the default, "background"), what the scheduling of
    fastq.scheduling costs a pipeline that runs alone."""
    return peer_fastq(paths, workers, task, worker_priority="normal")


def fastq_pipeline(src, workers, task, **pipeline_kw):
    """The fastq peer on any source: the task's op chain, queue_size 4, shuffle,
    pin_memory=False, ``pipeline_kw`` -> (run_epoch, close, info); run_epoch(consume=None)
    hands each batch's images to ``consume`` before dropping it.  Also used by
    benchmarks/bench_sources.py and the feed benchmark."""
    import fastq
    # pin_memory=False: a CPU benchmark; "auto" would load a CUDA runtime if one is
    # installed and put it into the peak RSS.
    dtype = getattr(task, "dtype", "float32")
    p = fastq.Pipeline(src, batch_size=task.batch, queue_size=4,
                       workers=workers, ops=task.fastq_ops(), dtype=dtype, seed=0, shuffle=True,
                       pin_memory=False, channels=getattr(task, "channels", "RGB"), **pipeline_kw)

    def run_epoch(consume=None):
        n = 0
        for images, lab in p:
            n += images.shape[0]
            if consume is not None:
                consume(images)
            del images, lab  # release the slot at once
        return n

    def info():
        s = p.stats()
        out = {k: s.get(k) for k in ("workers", "consumer_wait_s", "producer_wait_s",
                                     "samples_delivered", "skipped", "failed_samples", "scheduling")}
        out["stages"] = s.get("stages")
        out["fastq"] = fastq.__version__
        if getattr(task, "aug", None):
            from fastq.bench.tasks import augment_chain
            out["chain"] = [type(o).__name__ for o in task.fastq_ops()]
            out["note"] = augment_chain(task)[1]
        return out
    return run_epoch, p.close, info


def peer_tfdata_n(paths, workers, task):
    """tf.data with the map parallelism fixed to the number of cores (tf.data's
    AUTOTUNE rate was bimodal from one process to the next on 2 cores; the low mode
    turned out to be the iterator's teardown counted in the epoch, see
    :func:`_batch_epochs`)."""
    return peer_tfdata(paths, workers, task, parallel=workers)


def tfdata_load(tf, task, all_jpeg, normalize=True):
    """The task in tf.data native ops: ``load(encoded bytes, label) -> (float32
    image, label)``, for a ``Dataset.map``.  rrc: sample_distorted_bounding_box ->
    decode_and_crop_jpeg (decode_image + slice when not every file is a JPEG) ->
    resize bilinear -> random_flip_left_right; center: decode -> resize shorter
    side -> slice; jitter: x*U(b), random_contrast, random_saturation, clip;
    normalize.  Also used by benchmarks/bench_sources.py."""
    S = task.size
    mean = tf.constant([m * 255 for m in MEAN], tf.float32)
    inv_std = tf.constant([1 / (s * 255) for s in STD], tf.float32)
    no_boxes = tf.zeros([1, 0, 4], tf.float32)

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
        return ((img - mean) * inv_std if normalize else img), label
    return load


def peer_tfdata(paths, workers, task, parallel=None):
    """tf.data native ops (:func:`tfdata_load`): map(AUTOTUNE) -> batch(drop_remainder)
    -> prefetch(AUTOTUNE).  TFRecord shards: TFRecordDataset(shards).take(records) ->
    shuffle(buffer min(records, 1024)) -> map(parse_single_example + the same ops)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.random.set_seed(0)
    tfr = paths if isinstance(paths, TFRecordData) else None
    all_jpeg = tfr.all_jpeg if tfr else all(p.lower().endswith((".jpg", ".jpeg")) for p in paths)
    load = tfdata_load(tf, task, all_jpeg)
    info = {"tensorflow": tf.__version__}
    if getattr(task, "aug", None) == "randaugment":
        load, info["keras"] = _keras_randaugment(tf, task, all_jpeg)

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
    return _batch_epochs(ds, info)  # EagerTensors: no conversion to numpy


def _keras_randaugment(tf, task, all_jpeg):
    """The randaugment task in tf.data: the reference crop + flip (tfdata_load's ops, no
    normalize) -> ``keras.layers.RandAugment(value_range=(0, 255), num_ops=2, factor=9/30,
    interpolation="nearest")`` (Keras 3 on the TensorFlow backend; ``factor`` is the
    magnitude as a fraction of the strongest: torchvision's bin 9 of 0..30) -> normalize
    -> RandomErasing(p=0.25, scale 0.02-0.33, ratio 0.3-3.3, value 0) in tf ops
    (one try, boxes clipped to the image)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    from fastq.bench.tasks import Task
    S = task.size
    crop = tfdata_load(tf, Task("crop", S), all_jpeg, normalize=False)  # reference crop + flip
    mean = tf.constant([m * 255 for m in MEAN], tf.float32)
    std = tf.constant([s * 255 for s in STD], tf.float32)
    ra = keras.layers.RandAugment(value_range=(0, 255), num_ops=2, factor=9 / 30, interpolation="nearest", seed=0)

    def load(data, label):
        img, label = crop(data, label)
        img = tf.clip_by_value(tf.round(img), 0, 255)  # uint8 values, as torchvision / DALI see
        img = ra(img, training=True)
        img = (tf.cast(img, tf.float32) - mean) / std
        area = S * S * tf.random.uniform([], 0.02, 0.33)
        r = tf.exp(tf.random.uniform([], math.log(0.3), math.log(3.3)))
        h = tf.minimum(tf.cast(tf.round(tf.sqrt(area * r)), tf.int32), S)
        w = tf.minimum(tf.cast(tf.round(tf.sqrt(area / r)), tf.int32), S)
        top = tf.random.uniform([], 0, S - h + 1, tf.int32)
        left = tf.random.uniform([], 0, S - w + 1, tf.int32)
        ys = tf.range(S)[:, None]
        xs = tf.range(S)[None, :]
        box = (ys >= top) & (ys < top + h) & (xs >= left) & (xs < left + w)
        box = box & (tf.random.uniform([]) < 0.25)
        return tf.where(box[..., None], 0.0, img), label
    return load, keras.__version__


def fbresnet_augmentors(size=224):
    """tensorpack's ``fbresnet_augmentor(isTrain=True)``, copied from tensorpack's
    examples/ImageNetModels/imagenet_utils.py (github.com/tensorpack/tensorpack, commit
    02c38f26d938cf6cdad4a09ada754ed950d024d7), for BGR uint8 images; ``size`` is the
    GoogleNetRandomCropAndResize target (224 there)."""
    import cv2
    import numpy as np
    from tensorpack.dataflow import imgaug
    interpolation = cv2.INTER_CUBIC
    return [
        imgaug.GoogleNetRandomCropAndResize(target_shape=size, interp=interpolation),
        imgaug.RandomOrderAug(
            [imgaug.BrightnessScale((0.6, 1.4), clip=False),
             imgaug.Contrast((0.6, 1.4), rgb=False, clip=False),
             imgaug.Saturation(0.4, rgb=False),
             # rgb-bgr conversion for the constants copied from fb.resnet.torch
             imgaug.Lighting(0.1,
                             eigval=np.asarray([0.2175, 0.0188, 0.0045][::-1]) * 255.0,
                             eigvec=np.array([[-0.5675, 0.7192, 0.4009],
                                              [-0.5808, -0.0045, -0.8140],
                                              [-0.5836, -0.6948, 0.4203]], dtype="float32")[::-1, ::-1])]),
        imgaug.Flip(horiz=True),
    ]


def _tensorpack_map(paths, task):
    """(DataFromList, map_func) for the tensorpack peers: the cv2 code of
    :class:`Cv2Sample`, or for the fbresnet task cv2.imread + tensorpack's own
    fbresnet augmentors (:func:`fbresnet_augmentors`, uint8 BGR out, as in
    tensorpack's ImageNet example)."""
    from tensorpack.dataflow import DataFromList
    if getattr(task, "aug", None) == "fbresnet":
        import cv2
        import numpy as np
        from tensorpack.dataflow import imgaug
        aug = imgaug.AugmentorList(fbresnet_augmentors(task.size))

        def map_func(dp):
            im = cv2.imread(dp[0], cv2.IMREAD_COLOR)
            if im is None:
                raise RuntimeError(f"cv2.imread failed: {dp[0]}")
            # the float augmentors (clip=False) leave float32; uint8 out as fastq's
            return [np.clip(aug.augment(im), 0, 255).astype(np.uint8), dp[1]]
        return DataFromList([[p, i] for i, p in enumerate(paths)], shuffle=True), map_func
    sample = Cv2Sample(task, 0)
    if isinstance(paths, TFRecordData):
        recs = PyRecords(paths)

        def map_func(dp):
            data, label = recs.read(dp[0])
            return [sample.from_bytes(data, recs.where(dp[0])), label]
        return DataFromList([[i] for i in range(len(recs))], shuffle=True), map_func

    def map_func(dp):
        return [sample(dp[0]), dp[1]]
    return DataFromList([[p, i] for i, p in enumerate(paths)], shuffle=True), map_func


def _tensorpack_peer(paths, task, parallel_map, **workers):
    """(run_epoch, None, info) of a tensorpack peer: :func:`_tensorpack_map`'s
    DataFromList -> ``parallel_map`` (a tensorpack parallel map DataFlow class) with its
    mapped function, buffer 200, strict, ``**workers`` -> BatchData(no remainder)."""
    import numpy as np
    import tensorpack
    from tensorpack.dataflow import BatchData
    ds, map_func = _tensorpack_map(paths, task)
    ds = parallel_map(ds, map_func=map_func, buffer_size=200, strict=True, **workers)
    ds = BatchData(ds, task.batch, remainder=False, use_list=False)
    ds.reset_state()
    return _batch_epochs(ds, {"tensorpack": tensorpack.__version__, "numpy": np.__version__})


def peer_tensorpack(paths, workers, task):
    """DataFromList(shuffle) -> MultiThreadMapData(2 threads, the cv2 code) -> BatchData.
    TFRecord shards: the records are read with :class:`PyRecords` (os.pread +
    a pure-Python Example parser) inside the mapped function.  fbresnet task:
    tensorpack's own augmentors (:func:`_tensorpack_map`)."""
    from tensorpack.dataflow import MultiThreadMapData
    return _tensorpack_peer(paths, task, MultiThreadMapData, num_thread=2)


def peer_tensorpack_zmq(paths, workers, task):
    """DataFromList(shuffle) -> MultiProcessMapDataZMQ(2 processes, the same mapped
    function as :func:`peer_tensorpack`) -> BatchData."""
    from tensorpack.dataflow import MultiProcessMapDataZMQ
    return _tensorpack_peer(paths, task, MultiProcessMapDataZMQ, num_proc=2)


def peer_torch(paths, workers, task):
    """torch.utils.data.DataLoader(num_workers=workers, batch 64, shuffle, drop_last)
    over a map-style dataset: torchvision.io.decode_image(read_file) (RGB uint8 CHW) ->
    torchvision.transforms.v2: RandomResizedCrop (bilinear, antialias=True, the v2
    default) or Resize + CenterCrop -> RandomHorizontalFlip -> [ColorJitter] ->
    [RandAugment(2, 9)] -> ToDtype(float32, scale) -> Normalize -> [RandomErasing(0.25)];
    float32 NCHW batches (torch's layout)."""
    if getattr(task, "aug", None) in ("detection", "segmentation"):  # fastq.bench.dense
        from fastq.bench.dense import dense_peer
        return dense_peer("torch", paths, workers, task)
    import torch
    import torchvision
    from torchvision.io import ImageReadMode, decode_image, read_file
    from torchvision.transforms import v2
    S = task.size
    if task.mode == "center":
        tr = [v2.Resize(task.resize), v2.CenterCrop(S)]
    else:
        tr = [v2.RandomResizedCrop(S, scale=SCALE, ratio=RATIO), v2.RandomHorizontalFlip()]
    if task.jitter:
        tr.append(v2.ColorJitter(task.jitter, task.jitter, task.jitter))
    if getattr(task, "aug", None) == "randaugment":
        tr.append(v2.RandAugment(num_ops=2, magnitude=9))
    tr += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(MEAN), list(STD))]
    if getattr(task, "aug", None) == "randaugment":
        tr.append(v2.RandomErasing(p=0.25))
    transform = v2.Compose(tr)

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            return transform(decode_image(read_file(paths[i]), mode=ImageReadMode.RGB)), i

    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Files(), batch_size=task.batch, shuffle=True, drop_last=True,
                                         num_workers=workers, persistent_workers=True, prefetch_factor=2)
    return _batch_epochs(loader, {"torch": torch.__version__, "torchvision": torchvision.__version__})


def peer_pyloop(paths, workers, task):
    """The cv2 code in one Python thread, np.stack per batch (TFRecord shards:
    records read with :class:`PyRecords`)."""
    if getattr(task, "aug", None) in ("detection", "segmentation"):  # fastq.bench.dense
        from fastq.bench.dense import dense_peer
        return dense_peer("pyloop", paths, workers, task)
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
    factors; crop_mirror_normalize (float, HWC, random mirror for rrc).
    randaugment task: :func:`_dali_randaugment`."""
    if getattr(task, "aug", None) in ("detection", "segmentation"):  # fastq.bench.dense
        from fastq.bench.dense import dense_peer
        return dense_peer("dali", paths, workers, task)
    from nvidia.dali import fn, pipeline_def, types
    import nvidia.dali
    S = task.size
    if getattr(task, "aug", None) == "randaugment":
        pipe = _dali_randaugment(paths, workers, task)
    else:
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


def _dali_randaugment(paths, workers, task):
    """The randaugment task as a DALI CPU pipeline (conditionals on): readers.file ->
    decoders.image_random_crop -> resize S x S (linear, no antialias) -> flip p=0.5 ->
    ``nvidia.dali.auto_aug.rand_augment.rand_augment(n=2, m=9, shape=(S, S), fill_value=0,
    interp_type=INTERP_NN)`` (torchvision's nearest and fill 0) -> crop_mirror_normalize
    (float, HWC) -> RandomErasing(p=0.25): a coin flip; area 0.02-0.33, log-uniform
    aspect 0.3-3.3 (one try, clipped to the image), uniform position, fn.erase with 0."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali import math as dmath
    from nvidia.dali.auto_aug import rand_augment
    S = task.size

    @pipeline_def(enable_conditionals=True, batch_size=task.batch, num_threads=workers,
                               device_id=None, seed=0)
    def pipe():
        jpegs, labels = fn.readers.file(files=list(paths), labels=list(range(len(paths))),
                                        random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=list(SCALE), random_aspect_ratio=list(RATIO),
                                               num_attempts=10)
        images = fn.resize(images, resize_x=S, resize_y=S, interp_type=types.INTERP_LINEAR, antialias=False)
        images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))
        images = rand_augment.rand_augment(images, n=2, m=9, shape=(S, S), fill_value=0,
                                           interp_type=types.INTERP_NN)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        if fn.random.coin_flip(probability=0.25, dtype=types.BOOL):
            area = fn.random.uniform(range=[0.02, 0.33])
            r = dmath.exp(fn.random.uniform(range=[math.log(0.3), math.log(3.3)]))
            h = dmath.min(dmath.sqrt(area * r), 1.0)
            w = dmath.min(dmath.sqrt(area / r), 1.0)
            top = fn.random.uniform(range=[0.0, 1.0]) * (1.0 - h)
            left = fn.random.uniform(range=[0.0, 1.0]) * (1.0 - w)
            images = fn.erase(images, anchor=fn.stack(top, left), shape=fn.stack(h, w), axis_names="HW",
                              normalized_anchor=True, normalized_shape=True, fill_value=0.0)
        return images, labels
    return pipe


# key -> (label, function, modules that must import, modules imported before timing RSS)
PEERS = {
    "fastq": ("fastq", peer_fastq, ["fastq._native._image"], ["numpy", "fastq"]),
    "fastq_normal": ('fastq, worker_priority="normal"', peer_fastq_normal, ["fastq._native._image"], ["numpy", "fastq"]),
    "tfdata": ("tf.data native (AUTOTUNE)", peer_tfdata, ["tensorflow"], ["tensorflow"]),
    "tfdata_n": ("tf.data native (map parallel = cores)", peer_tfdata_n, ["tensorflow"], ["tensorflow"]),
    "dali": ("NVIDIA DALI CPU", peer_dali, ["nvidia.dali"], ["nvidia.dali"]),
    "tensorpack": ("tensorpack MultiThreadMapData(2)+cv2", peer_tensorpack, ["tensorpack", "cv2"],
                   ["cv2", "tensorpack.dataflow"]),
    "tensorpack_zmq": ("tensorpack MultiProcessMapDataZMQ(2)+cv2", peer_tensorpack_zmq,
                       ["tensorpack", "cv2", "zmq"], ["cv2", "tensorpack.dataflow"]),
    "torch": ("torch DataLoader + torchvision v2", peer_torch, ["torch", "torchvision"],
              ["torch", "torchvision"]),
    "pyloop": ("Python loop + cv2", peer_pyloop, ["cv2"], ["cv2"]),
}


# peers that read TFRecord shards (natively, or for the cv2 peers with PyRecords);
# the others are reported as "not available for TFRecord input".
TFRECORD_PEERS = {"fastq": "fastq.sources.TFRecord (native reader)",
                  "fastq_normal": "fastq.sources.TFRecord (native reader)",
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
    if base == "fastq_normal" and workers is not None:
        return f"fastq (workers={workers}, normal priority)"
    return PEERS[base][0]
