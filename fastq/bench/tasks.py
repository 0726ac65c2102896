"""The benchmark tasks: defined once, used by ``fastq bench``, its peers, the
single-thread profile, ``python -m fastq.bench.demo`` and every script under
``benchmarks/``.

  reference  JPEG -> RGB -> RandomResizedCrop 224 (area 0.08-1, aspect 3/4-4/3,
             bilinear) -> random h-flip -> normalize (ImageNet mean/std) ->
             float32 NHWC batches of 64 (the reference task of docs/cli.md)
  train      reference + ColorJitter(brightness, contrast, saturation = 0.4)
             before normalizing
  eval       resize the shorter side to 256 (bilinear) -> center crop 224 ->
             normalize
  small-96   reference at 96 x 96
  hires      reference on camera-like files (generated set: 1800-3200 px, sensor
             noise, quality 92, ~1 MB; fastq.bench.testdata.make_hires_dataset)
  randaugment  RandomResizedCrop 224 -> h-flip -> RandAugment(2, 9) -> normalize ->
             RandomErasing(0.25) (torchvision's classification recipe), float32, batch 64
  fbresnet   tensorpack's fbresnet_augmentor (GoogleNet crop 224 bicubic, random
             order of brightness / contrast / saturation / PCA lighting, h-flip),
             uint8 NHWC batches of 64, no normalize (tensorpack's ImageNet example
             normalizes inside the model graph)
  detection  ResizeShortestEdge(800, max_size=1333) -> h-flip, boxes; each batch padded
             to its largest image (a multiple of 32: Pipeline(pad="batch")); uint8,
             batch 8, on the generated dense set (fastq.bench.dense)
  segmentation  RandomResizedCrop 512 -> h-flip, label maps (nearest); uint8, batch 8

The augmentation presets (``aug`` set) run only on the peers listed in
``Task.peers``; the others are reported as "not available for this task".

What each peer runs for a task is in :mod:`fastq.bench.peers`.  Nothing here
imports more than the standard library (fastq.ops only when the chain is built).
"""

__all__ = ["BATCH", "MEAN", "STD", "SCALE", "RATIO", "SIZE", "Task", "TASKS", "REFERENCE", "augment_chain",
           "task_from_dict"]

BATCH = 64
SIZE = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)


class Task:
    """One benchmark task: output size, geometry mode ("rrc" random-resized
    crop + flip, or "center": resize shorter side + center crop), jitter."""

    def __init__(self, name, size, mode="rrc", resize=None, jitter=0.0, batch=BATCH, data="jpeg", aug=None,
                 dtype="float32", peers=None, channels="RGB"):
        self.name, self.size, self.mode, self.resize, self.jitter, self.batch = \
            name, size, mode, resize, jitter, batch
        # the generated set it runs on when no DATA is given (fastq.bench.data.GENERATED)
        self.data = data
        # augmentation preset ("randaugment", "fbresnet") or None; output dtype;
        # the peers that implement it (None: every peer) -- the first ones are the default
        self.aug, self.dtype, self.peers = aug, dtype, list(peers) if peers else None
        self.channels = channels  # output channel order (fbresnet: BGR, as tensorpack's models take)

    def describe(self):
        if self.aug == "randaugment":
            return (f"RandomResizedCrop {self.size} -> h-flip -> RandAugment(2, 9) -> normalize -> "
                    f"RandomErasing(0.25) -> float32, batch {self.batch}")
        if self.aug == "fbresnet":
            return (f"tensorpack fbresnet_augmentor: GoogleNet crop {self.size} bicubic -> random order of "
                    f"brightness(0.6-1.4), contrast(0.6-1.4), saturation(0.4), lighting(0.1) -> h-flip -> "
                    f"uint8, batch {self.batch}")
        if self.aug == "detection":
            return (f"ResizeShortestEdge(800, max_size=1333) -> h-flip, boxes -> each batch padded to its "
                    f"largest image, a multiple of 32 (pad='batch') -> uint8, batch {self.batch}")
        if self.aug == "segmentation":
            return (f"RandomResizedCrop {self.size} -> h-flip, label maps (nearest) -> uint8, "
                    f"batch {self.batch}")
        if self.mode == "center":
            geo = f"resize shorter side {self.resize} -> center crop {self.size}"
        else:
            geo = f"RandomResizedCrop {self.size} (area 0.08-1, aspect 3/4-4/3) -> h-flip"
        jit = f" -> ColorJitter({self.jitter}, {self.jitter}, {self.jitter})" if self.jitter else ""
        return f"{geo}{jit} -> normalize -> float32 NHWC, batch {self.batch}"

    def to_dict(self):
        return dict(self.__dict__)

    def fastq_ops(self):
        """The task as a fastq op chain (a new list of fastq.ops objects)."""
        from fastq import ops
        if self.aug:
            return augment_chain(self)[0]
        if self.mode == "center":
            chain = [ops.Resize(shorter_side=self.resize), ops.CenterCrop(self.size)]
        else:
            chain = [ops.RandomResizedCrop(self.size, scale=SCALE, ratio=RATIO, interpolation="bilinear"),
                     ops.HorizontalFlip()]
        if self.jitter:
            chain.append(ops.ColorJitter(self.jitter, self.jitter, self.jitter))
        chain.append(ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD))
        return chain


def augment_chain(task):
    """(fastq op list, note or None) for an augmentation preset (the note, printed by
    fastq bench and written to its JSON, would name what the chain lacks against the
    task's definition; both presets are exact now)."""
    from fastq import ops
    if task.aug == "randaugment":
        chain = [ops.RandomResizedCrop(task.size, scale=SCALE, ratio=RATIO, interpolation="bilinear"),
                 ops.HorizontalFlip(), ops.RandAugment(2, 9), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD),
                 ops.RandomErasing(p=0.25)]
        return chain, None
    if task.aug == "fbresnet":
        # tensorpack parity (tests/tensorpack/test_tensorpack_parity.py); BGR output like tensorpack's
        # (the task's `channels`)
        from fastq.tensorpack import fbresnet_augmentor
        return list(fbresnet_augmentor(task.size)), None
    if task.aug == "detection":  # + Pipeline(pad="batch", pad_multiple=32) (fastq.bench.dense)
        return [ops.ResizeShortestEdge(800, max_size=1333), ops.HorizontalFlip()], None
    if task.aug == "segmentation":
        return [ops.RandomResizedCrop(task.size, scale=SCALE, ratio=RATIO), ops.HorizontalFlip()], None
    raise ValueError(f"task {task.name!r} has no augmentation preset")


TASKS = {
    "reference": Task("reference", SIZE),
    "train": Task("train", SIZE, jitter=0.4),
    "eval": Task("eval", SIZE, mode="center", resize=256),
    "small-96": Task("small-96", 96),
    "hires": Task("hires", SIZE, data="hires"),
    "randaugment": Task("randaugment", SIZE, aug="randaugment",
                        peers=["fastq", "dali", "torch", "tfdata", "tfdata_n"]),
    "fbresnet": Task("fbresnet", SIZE, aug="fbresnet", dtype="uint8", channels="BGR",
                     peers=["fastq", "tensorpack", "tensorpack_zmq"]),
    "detection": Task("detection", 1344, aug="detection", dtype="uint8", batch=8, data="dense",
                      peers=["fastq", "torch", "dali", "pyloop"]),
    "segmentation": Task("segmentation", 512, aug="segmentation", dtype="uint8", batch=8, data="dense",
                         peers=["fastq", "torch", "pyloop"]),
}
REFERENCE = TASKS["reference"]


def task_from_dict(d):
    t = Task(d["name"], d["size"])  # d may predate later fields: their defaults stay
    t.__dict__.update(d)
    return t
