"""The op base class and what every op family shares: the C core's constants (read
from the extension), the op kinds, and the argument checks that name the op, the
parameter and the value."""
import math
import numbers
from typing import Any, Dict, Sequence, Tuple, Union

from fastq._native import _image

# the public names of this family (fastq.ops re-exports them)
__all__ = ["Op", "FQ_OP_DTYPE", "IMAGENET_MEAN", "IMAGENET_STD", "DEFAULT_MAX_PIXELS"]

# The C core's constants (csrc/image/fq_image.h), read from the extension rather than retyped:
# FQ_OP_DTYPE is the numpy mirror of `struct fq_op` (kind, padding, the parameter union
# as 16 doubles "f"); DEFAULT_MAX_PIXELS = 2**26 = 67,108,864 pixels (e.g. 8192 x 8192).
FQ_OP_DTYPE = _image.FQ_OP_DTYPE
DEFAULT_MAX_PIXELS: int = _image.DEFAULT_MAX_PIXELS
MAX_OPS: int = _image.MAX_OPS
MAX_SIDE: int = _image.MAX_SIDE  # 32768

Pair = Tuple[float, float]
Range = Union[float, Tuple[float, float]]
Fill = Union[float, Sequence[float]]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# enum fq_op_kind, by op class name
_K = _image.OP_KINDS
K_RANDOM_RESIZED_CROP, K_RESIZE, K_CENTER_CROP, K_RANDOM_CROP = (
    _K["RandomResizedCrop"], _K["Resize"], _K["CenterCrop"], _K["RandomCrop"])
K_HFLIP, K_VFLIP, K_COLOR_JITTER, K_RANDOM_AFFINE, K_GRAYSCALE, K_NORMALIZE = (
    _K["HorizontalFlip"], _K["VerticalFlip"], _K["ColorJitter"], _K["RandomAffine"], _K["Grayscale"], _K["Normalize"])

# nearest, bilinear, bicubic, area, lanczos (OpenCV); pil_nearest, pil_bilinear, pil_bicubic, pil_lanczos,
# pil_box, pil_hamming (Pillow's Image.resize, bit for bit; resizes only, never a warp)
INTERPOLATIONS = dict(_image.INTERPOLATIONS)
PIL_INTERPOLATIONS = tuple(n for n in INTERPOLATIONS if n.startswith("pil_"))
BORDERS = dict(_image.BORDERS, edge=_image.BORDERS["replicate"])  # torchvision calls replicate "edge"


def _num(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _fail(op, what, value):
    raise ValueError(f"{op}: {what}, got {value!r}")


def _size(op, size, name="size"):
    """int -> (s, s); (h, w) -> (h, w); positive ints <= 32768."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        size = (int(size), int(size))
    try:
        h, w = size
    except (TypeError, ValueError):
        _fail(op, f"{name} must be an int or a (height, width) pair", size)
    for v in (h, w):
        if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and 1 <= v <= MAX_SIDE):
            _fail(op, f"{name} must be positive integers <= {MAX_SIDE}", size)
    return int(h), int(w)


def _pair(op, value, name):
    try:
        lo, hi = value
    except (TypeError, ValueError):
        _fail(op, f"{name} must be a (min, max) pair", value)
    if not (_num(lo) and _num(hi)):
        _fail(op, f"{name} must be finite numbers", value)
    return float(lo), float(hi)


def _prob(op, p):
    if not (_num(p) and 0 <= p <= 1):
        _fail(op, "p must be a probability in [0, 1]", p)
    return float(p)


def _interp(op, name, allow_area=True, resize=True):
    """The FQ_INTERP_* number of an interpolation name.  ``resize=False``: a warp
    (cv::warpAffine), which takes no pil_* name (they are Pillow's resize, not a sampler)."""
    if not resize and name in PIL_INTERPOLATIONS:
        _fail(op, f"{name} is Pillow's resize and only available to resize ops (Resize, RandomResizedCrop, "
                  "ResizeShortestEdge, ScaleJitter, TensorpackCrop), not to a warp; use nearest, bilinear, "
                  "bicubic or lanczos", name)
    if name not in INTERPOLATIONS or (not allow_area and name == "area"):
        names = [n for n in INTERPOLATIONS if (allow_area or n != "area") and (resize or n not in PIL_INTERPOLATIONS)]
        _fail(op, f"interpolation must be one of {names}", name)
    return INTERPOLATIONS[name]


def _fill(op, fill):
    if _num(fill):
        fill = (fill, fill, fill)
    try:
        vals = tuple(float(v) for v in fill)
    except (TypeError, ValueError):
        _fail(op, "fill must be a number or 3 numbers in [0, 255]", fill)
    if len(vals) != 3 or not all(0 <= v <= 255 for v in vals):
        _fail(op, "fill must be a number or 3 numbers in [0, 255]", fill)
    return vals


def _level(op, value, name, lo, hi):
    if _num(value):
        rng = (float(value), float(value))
    else:
        rng = _pair(op, value, name)
    if not (lo <= rng[0] <= rng[1] <= hi):
        _fail(op, f"{name} must be a number or a (min, max) pair with {lo} <= min <= max <= {hi}", value)
    return rng


def _int_in(op, name, v, lo, hi):
    if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and lo <= v <= hi):
        _fail(op, f"{name} must be an int in [{lo}, {hi}]", v)
    return int(v)


class Op:
    """Base class: ``kind`` (the C op kind, from ``_image.OP_KINDS`` by class name),
    ``fields()`` (the op's C parameters by field name: the descriptor of its record in
    ``csrc/image/api/fq_image_ops.cpp``, ``_image.OP_FIELDS``), ``pack()``.  What an op does to
    the image size and the rules of a chain are the C core's (its op records)."""

    kind = 0

    def fields(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        """The C parameters of this op as a dict keyed by the field names of its C
        descriptor (``_image.OP_FIELDS[type(self).__name__]``: names and shapes, all
        float64); ``fastq._native._image.pack_ops`` fills ``fq_op`` by those descriptors
        (tests/ops/test_op_descriptors.py holds the two together)."""
        raise NotImplementedError

    def pack(self) -> Tuple[int, Tuple[Tuple[str, Any], ...]]:
        """``(kind, ((field, value), ...))``: the C ``fq_op`` of this op, by field name."""
        return self.kind, tuple(sorted(self.fields().items()))

    @classmethod
    def _example(cls):
        """An instance of this op, with non-default arguments where it has them: what
        tests/ops/test_op_descriptors.py checks against the C descriptor, for every op
        class (a class whose defaults are its example needs no override)."""
        return cls()

    def __repr__(self):
        items = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if not k.startswith("_"))
        return f"{type(self).__name__}({items})"

    def __eq__(self, other):
        return type(self) is type(other) and self.pack() == other.pack()

    def __hash__(self):
        return hash(self.pack())
