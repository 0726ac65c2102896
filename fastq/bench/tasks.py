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

What each peer runs for a task is in :mod:`fastq.bench.peers`.  Nothing here
imports more than the standard library (fastq.ops only when the chain is built).
"""

__all__ = ["BATCH", "MEAN", "STD", "SCALE", "RATIO", "SIZE", "Task", "TASKS", "REFERENCE", "task_from_dict"]

BATCH = 64
SIZE = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)


class Task:
    """One benchmark task: output size, geometry mode ("rrc" random-resized
    crop + flip, or "center": resize shorter side + center crop), jitter."""

    def __init__(self, name, size, mode="rrc", resize=None, jitter=0.0, batch=BATCH, data="jpeg"):
        self.name, self.size, self.mode, self.resize, self.jitter, self.batch = \
            name, size, mode, resize, jitter, batch
        # the generated set it runs on when no DATA is given (fastq.bench.data.GENERATED)
        self.data = data

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
        """The task as a fastq op chain (a new list of fastq.ops objects)."""
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
    "reference": Task("reference", SIZE),
    "train": Task("train", SIZE, jitter=0.4),
    "eval": Task("eval", SIZE, mode="center", resize=256),
    "small-96": Task("small-96", 96),
    "hires": Task("hires", SIZE, data="hires"),
}
REFERENCE = TASKS["reference"]


def task_from_dict(d):
    t = Task(d["name"], d["size"])  # d may predate later fields: their defaults stay
    t.__dict__.update(d)
    return t
