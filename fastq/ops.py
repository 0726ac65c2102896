"""Declarative image ops.

An op is a small immutable description, validated when it is constructed (a bad
parameter raises ``ValueError`` naming the op, the parameter and the value).  A chain
of ops is packed for the C core and checked as a whole by :func:`compile_ops` (with the C
core's chain rules, ``fq_img_chain_check``).
Nothing here runs pixels: the chain is executed natively (``csrc/image/fq_image_ops.cpp``) on
uint8 images with OpenCV, and the last step (``Normalize`` + dtype + layout) is fused
into the write of the output row.

Conventions (torchvision's, unless stated; exact definitions in ``docs/ops.md``):

* images are RGB (or 1-channel gray when ``channels=1``), uint8, HWC while ops run;
* sizes are ``(height, width)``; an int size means a square, except for ``Resize``
  where an int is the length of the shorter side;
* random parameters of sample ``index`` come from a counter-based stream keyed by
  ``(seed, epoch, index)``, drawn in chain order; an op draws only what it needs;
* interpolation names: ``nearest``, ``bilinear``, ``bicubic``, ``area``, ``lanczos``
  (OpenCV's INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4;
  note that OpenCV's bilinear does not antialias when shrinking, use ``area`` for that).
"""
import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from fastq import _image

__all__ = [
    "Op", "RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "HorizontalFlip",
    "VerticalFlip", "ColorJitter", "RandomAffine", "Grayscale", "Normalize", "compile_ops",
    "CompiledOps", "FQ_OP_DTYPE", "IMAGENET_MEAN", "IMAGENET_STD", "DEFAULT_MAX_PIXELS",
]

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

INTERPOLATIONS = dict(_image.INTERPOLATIONS)  # nearest, bilinear, bicubic, area, lanczos
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


def _interp(op, name, allow_area=True):
    if name not in INTERPOLATIONS or (not allow_area and name == "area"):
        names = [n for n in INTERPOLATIONS if allow_area or n != "area"]
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


class Op:
    """Base class: ``kind`` (the C op kind, from ``_image.OP_KINDS`` by class name),
    ``fields()`` (the op's C parameters by field name: the descriptor of its record in
    ``csrc/image/fq_image_ops.cpp``, ``_image.OP_FIELDS``), ``pack()``.  What an op does to
    the image size and the rules of a chain are the C core's (its op records)."""

    kind = 0

    def fields(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        """The C parameters of this op as a dict keyed by the field names of its C
        descriptor (``_image.OP_FIELDS[type(self).__name__]``: names and shapes, all
        float64); ``fastq._image.pack_ops`` fills ``fq_op`` by those descriptors
        (tests/test_op_descriptors.py holds the two together)."""
        raise NotImplementedError

    def pack(self) -> Tuple[int, Tuple[Tuple[str, Any], ...]]:
        """``(kind, ((field, value), ...))``: the C ``fq_op`` of this op, by field name."""
        return self.kind, tuple(sorted(self.fields().items()))

    def __repr__(self):
        items = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if not k.startswith("_"))
        return f"{type(self).__name__}({items})"

    def __eq__(self, other):
        return type(self) is type(other) and self.pack() == other.pack()

    def __hash__(self):
        return hash(self.pack())


class RandomResizedCrop(Op):
    """Crop a random region, then resize it to ``size`` (torchvision semantics).

    Up to ``max_attempts`` tries (torchvision: 10; DALI's ResNet-50 uses 100): area fraction
    ``s ~ U(scale)``, aspect ``r = exp(U(log ratio))``, ``w = round(sqrt(s*A*r))``,
    ``h = round(sqrt(s*A/r))``; accepted if it fits, then top ``i ~ U{0..H-h}``, left
    ``j ~ U{0..W-w}``.  Otherwise a central crop with the aspect ratio clamped to ``ratio``.
    The box is then resized with ``interpolation``.
    """

    kind = K_RANDOM_RESIZED_CROP

    def __init__(self, size: Union[int, Tuple[int, int]], scale: Pair = (0.08, 1.0), ratio: Pair = (3 / 4, 4 / 3),
                 interpolation: str = "bilinear", max_attempts: int = 10) -> None:
        n = "RandomResizedCrop"
        self.size = _size(n, size)
        self.scale = _pair(n, scale, "scale")
        if not (0 < self.scale[0] <= self.scale[1] <= 1):
            _fail(n, "scale must satisfy 0 < min <= max <= 1", tuple(scale))
        self.ratio = _pair(n, ratio, "ratio")
        if not (0 < self.ratio[0] <= self.ratio[1]):
            _fail(n, "ratio must satisfy 0 < min <= max", tuple(ratio))
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation)
        if not (isinstance(max_attempts, numbers.Integral) and not isinstance(max_attempts, bool)
                and 1 <= max_attempts <= 1000):
            _fail(n, "max_attempts must be an int in [1, 1000]", max_attempts)
        self.max_attempts = int(max_attempts)

    def fields(self):
        return {"out_h": self.size[0], "out_w": self.size[1], "scale_lo": self.scale[0], "scale_hi": self.scale[1],
                "ratio_lo": self.ratio[0], "ratio_hi": self.ratio[1], "interp": self._interp,
                "max_attempts": self.max_attempts}


class Resize(Op):
    """Resize.  ``Resize(256)`` / ``Resize(shorter_side=256)``: the shorter side becomes
    256 and the longer ``int(256 * long / short)`` (truncated, like torchvision);
    ``Resize((h, w))``: exactly h x w (aspect not kept)."""

    kind = K_RESIZE

    def __init__(self, size: Optional[Union[int, Tuple[int, int]]] = None, *, shorter_side: Optional[int] = None,
                 interpolation: str = "bilinear") -> None:
        n = "Resize"
        if (size is None) == (shorter_side is None):
            _fail(n, "give exactly one of size and shorter_side", (size, shorter_side))
        if size is not None and not (isinstance(size, numbers.Integral) and not isinstance(size, bool)):
            self.size, self.shorter_side = _size(n, size), None
        else:
            side: Any = size if size is not None else shorter_side
            if not (isinstance(side, numbers.Integral) and not isinstance(side, bool) and 1 <= side <= MAX_SIDE):
                _fail(n, f"shorter_side must be a positive integer <= {MAX_SIDE}", side)
            self.size, self.shorter_side = None, int(side)
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation)

    def fields(self):
        if self.size is not None:
            return {"out_h": self.size[0], "out_w": self.size[1], "shorter_side": 0, "interp": self._interp}
        return {"out_h": 0, "out_w": 0, "shorter_side": self.shorter_side, "interp": self._interp}


class CenterCrop(Op):
    """Crop ``size`` from the centre: top = round((H - h) / 2) (Python rounding, as
    torchvision); an image smaller than the crop is zero-padded around it."""

    kind = K_CENTER_CROP

    def __init__(self, size: Union[int, Tuple[int, int]]) -> None:
        self.size = _size("CenterCrop", size)

    def fields(self):
        return {"out_h": self.size[0], "out_w": self.size[1]}


class RandomCrop(Op):
    """Pad by ``padding`` (int: all sides; (lr, tb); or (left, top, right, bottom)),
    optionally pad a too-small image (``pad_if_needed``: by the deficit on both sides,
    as torchvision), then crop ``size`` at top ``i ~ U{0..H-h}``, left ``j ~ U{0..W-w}``.
    ``padding_mode``: constant (``fill``), edge, reflect, symmetric.  A crop larger
    than the padded image fails the sample (``InvalidArgumentError``)."""

    kind = K_RANDOM_CROP

    def __init__(self, size: Union[int, Tuple[int, int]], padding: Union[int, Sequence[int]] = 0, pad_if_needed: bool = False,
                 fill: Fill = 0, padding_mode: str = "constant") -> None:
        n = "RandomCrop"
        self.size = _size(n, size)
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            pad: Any = (padding,) * 4
        else:
            try:
                pad = tuple(padding)
            except TypeError:
                _fail(n, "padding must be an int or a sequence of 2 or 4 ints", padding)
            if len(pad) == 2:
                pad = (pad[0], pad[1], pad[0], pad[1])
        if len(pad) != 4 or not all(isinstance(p, numbers.Integral) and 0 <= p <= MAX_SIDE for p in pad):
            _fail(n, "padding must be non-negative ints (1, 2 or 4 of them)", padding)
        self.padding = tuple(int(p) for p in pad)
        self.pad_if_needed = bool(pad_if_needed)
        self.fill = _fill(n, fill)
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            _fail(n, "padding_mode must be constant, edge, reflect or symmetric", padding_mode)
        self.padding_mode = padding_mode

    def fields(self):
        left, top, right, bottom = self.padding
        return {"out_h": self.size[0], "out_w": self.size[1], "pad_left": left, "pad_top": top,
                "pad_right": right, "pad_bottom": bottom, "pad_if_needed": int(self.pad_if_needed),
                "border": BORDERS[self.padding_mode], "fill": self.fill}


class HorizontalFlip(Op):
    """Mirror left-right with probability ``p`` (drawn: ``u < p``, u ~ U[0, 1))."""

    kind = K_HFLIP

    def __init__(self, p: float = 0.5) -> None:
        self.p = _prob("HorizontalFlip", p)

    def fields(self):
        return {"p": self.p}


class VerticalFlip(Op):
    """Mirror top-bottom with probability ``p``."""

    kind = K_VFLIP

    def __init__(self, p: float = 0.5) -> None:
        self.p = _prob("VerticalFlip", p)

    def fields(self):
        return {"p": self.p}


class Grayscale(Op):
    """With probability ``p``: gray = OpenCV RGB2GRAY (0.299 R + 0.587 G + 0.114 B,
    rounded), written to all 3 channels (``channels=3``); no-op for 1-channel output."""

    kind = K_GRAYSCALE

    def __init__(self, p: float = 1.0) -> None:
        self.p = _prob("Grayscale", p)

    def fields(self):
        return {"p": self.p}


class ColorJitter(Op):
    """Random brightness, contrast, saturation and hue, in a random order (torchvision).

    ``brightness=b`` -> factor in [max(0, 1-b), 1+b] (or give (min, max)); same for
    contrast and saturation; ``hue=h`` -> factor in [-h, h], h <= 0.5 (or (min, max)
    within [-0.5, 0.5]).  0 disables a component.  Per pixel, rounded and saturated
    to uint8: brightness ``f*x``; contrast ``f*x + (1-f)*mean(gray)``; saturation
    ``f*x + (1-f)*gray(x)`` (cv::addWeighted); hue: rotate H of OpenCV's
    RGB2HSV_FULL by round(256*f) (a full turn is 256), back with HSV2RGB_FULL.
    """

    kind = K_COLOR_JITTER

    def __init__(self, brightness: Range = 0, contrast: Range = 0, saturation: Range = 0, hue: Range = 0) -> None:
        n = "ColorJitter"
        self.brightness = self._factor(n, "brightness", brightness)
        self.contrast = self._factor(n, "contrast", contrast)
        self.saturation = self._factor(n, "saturation", saturation)
        if _num(hue):
            if not 0 <= hue <= 0.5:
                _fail(n, "hue must be in [0, 0.5]", hue)
            rng = (-float(hue), float(hue))
        else:
            rng = _pair(n, hue, "hue")
            if not -0.5 <= rng[0] <= rng[1] <= 0.5:
                _fail(n, "hue range must satisfy -0.5 <= min <= max <= 0.5", hue)
        self.hue = None if rng == (0.0, 0.0) else rng

    @staticmethod
    def _factor(n, name, v):
        if _num(v):
            if v < 0:
                _fail(n, f"{name} must be non-negative", v)
            rng = (max(0.0, 1.0 - v), 1.0 + v)
        else:
            rng = _pair(n, v, name)
            if not 0 <= rng[0] <= rng[1]:
                _fail(n, f"{name} range must satisfy 0 <= min <= max", v)
        return None if rng == (1.0, 1.0) else rng

    def fields(self):
        # indexed by enum fq_jitter: brightness, contrast, saturation, hue
        parts = ((self.brightness, 1.0), (self.contrast, 1.0), (self.saturation, 1.0), (self.hue, 0.0))
        return {"range": tuple(tuple(r) if r else (off, off) for r, off in parts),
                "enabled": tuple(int(r is not None) for r, _ in parts)}


class RandomAffine(Op):
    """Random rotation / translation / scale / shear about the image centre, output
    size = input size (cv::warpAffine).

    Draws (in this order): angle ~ U(degrees) (counter-clockwise positive as seen on
    screen); tx ~ round(U(-a*W, a*W)), ty ~ round(U(-b*H, b*H)) for ``translate=(a, b)``;
    scale ~ U(scale); shear_x ~ U(sx range), shear_y ~ U(sy range) (degrees).  With
    c = ((W-1)/2, (H-1)/2), R = [[cos, sin], [-sin, cos]], Sh = [[1, tan sx], [tan sy, 1]],
    the forward map is ``dst = R Sh s (src - c) + c + t``.  ``degrees``: number d ->
    (-d, d) or (min, max); ``shear``: number s -> x in (-s, s); (a, b) -> x; (a, b, c, d)
    -> x in (a, b), y in (c, d).  ``border``: constant (``fill``), reflect, replicate,
    symmetric.  ``interpolation``: not "area".
    """

    kind = K_RANDOM_AFFINE

    def __init__(self, degrees: Range, translate: Optional[Pair] = None, scale: Optional[Pair] = None,
                 shear: Union[None, float, Sequence[float]] = None, border: str = "constant", fill: Fill = 0,
                 interpolation: str = "bilinear") -> None:
        n = "RandomAffine"
        if _num(degrees):
            if degrees < 0:
                _fail(n, "degrees must be non-negative when a single number", degrees)
            self.degrees = (-float(degrees), float(degrees))
        else:
            self.degrees = _pair(n, degrees, "degrees")
            if self.degrees[0] > self.degrees[1]:
                _fail(n, "degrees must satisfy min <= max", degrees)
        if translate is None:
            self.translate = None
        else:
            self.translate = _pair(n, translate, "translate")
            if not all(0 <= t <= 1 for t in self.translate):
                _fail(n, "translate fractions must be in [0, 1]", translate)
        if scale is None:
            self.scale = None
        else:
            self.scale = _pair(n, scale, "scale")
            if not 0 < self.scale[0] <= self.scale[1]:
                _fail(n, "scale must satisfy 0 < min <= max", scale)
        if shear is None:
            self.shear = None
        else:
            sh: Any
            if _num(shear):
                if shear < 0:
                    _fail(n, "shear must be non-negative when a single number", shear)
                sh = (-float(shear), float(shear), 0.0, 0.0)
            else:
                try:
                    vals = tuple(shear)
                except TypeError:
                    _fail(n, "shear must be a number or 2 or 4 numbers", shear)
                if len(vals) == 2:
                    vals = (*vals, 0, 0)
                if len(vals) != 4 or not all(_num(v) for v in vals):
                    _fail(n, "shear must be a number or 2 or 4 numbers", shear)
                sh = tuple(float(v) for v in vals)
            if not (sh[0] <= sh[1] and sh[2] <= sh[3] and all(-90 < v < 90 for v in sh)):
                _fail(n, "shear ranges must satisfy -90 < min <= max < 90", shear)
            self.shear = sh
        if border not in ("constant", "reflect", "replicate", "symmetric"):
            _fail(n, "border must be constant, reflect, replicate or symmetric", border)
        self.border = border
        self.fill = _fill(n, fill)
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation, allow_area=False)

    def fields(self):
        sh = self.shear or (0.0, 0.0, 0.0, 0.0)
        return {"degrees": self.degrees, "translate": self.translate or (0.0, 0.0), "scale": self.scale or (1.0, 1.0),
                "shear_x": sh[:2], "shear_y": sh[2:], "border": BORDERS[self.border], "fill": self.fill,
                "interp": self._interp}


class Normalize(Op):
    """``out = (x / 255 - mean[c]) / std[c]`` per channel, computed in double and rounded
    once to the output dtype (a 256-entry table per channel, fused into the output
    write).  Must be the last op; needs a float dtype.  Without Normalize, float
    outputs are ``x / 255``.  Defaults: ImageNet mean/std (on the 0..1 scale).

    ``max_pixel_value`` (albumentations' name): the scale ``mean`` and ``std`` are given
    on: ``out = (x - mean * max_pixel_value) / (std * max_pixel_value)`` for ``x`` in
    0..255, i.e. ``(x / 255 - mean * m) / (std * m)`` with ``m = max_pixel_value / 255``.  With
    the default 255, mean/std are on the 0..1 scale; ``max_pixel_value=1.0`` takes them
    on the 0..255 scale (``mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375)``):
    ``out = (x - mean) / std``.  With the default scale, a mean above 1 or a std above 5
    almost always means 0..255 values were passed by mistake: that warns (``UserWarning``).
    """

    kind = K_NORMALIZE

    def __init__(self, mean: Union[float, Sequence[float]] = IMAGENET_MEAN,
                 std: Union[float, Sequence[float]] = IMAGENET_STD, max_pixel_value: float = 255.0) -> None:
        n = "Normalize"
        self.mean = self._three(n, "mean", mean)
        self.std = self._three(n, "std", std)
        if not all(s > 0 for s in self.std):
            _fail(n, "std must be positive", std)
        if not (_num(max_pixel_value) and max_pixel_value > 0):
            _fail(n, "max_pixel_value must be a positive number", max_pixel_value)
        self.max_pixel_value = float(max_pixel_value)
        # on the 0..1 scale |mean| <= 1 and a useful std is well below 1; 0..255 values are ~100 and ~60
        if self.max_pixel_value == 255.0 and (max(abs(m) for m in self.mean) > 1 or max(self.std) > 5):
            import warnings
            warnings.warn(
                f"Normalize(mean={self.mean}, std={self.std}): these look like values on the 0..255 "
                f"scale, but fastq's Normalize computes (x / 255 - mean) / std, so the output would be "
                f"far off (about -mean/std for every pixel). Pass max_pixel_value=1.0 to give mean/std "
                f"on the 0..255 scale, or divide them by 255.", UserWarning, stacklevel=2)

    @staticmethod
    def _three(n, name, v):
        if _num(v):
            return (float(v),) * 3
        try:
            vals = tuple(v)
        except TypeError:
            _fail(n, f"{name} must be a number or 3 numbers", v)
        if len(vals) == 1:
            vals = vals * 3
        if len(vals) != 3 or not all(_num(x) for x in vals):
            _fail(n, f"{name} must be a number or 3 numbers", v)
        return tuple(float(x) for x in vals)

    def fields(self):
        m = self.max_pixel_value / 255.0
        return {"mean": tuple(x * m for x in self.mean), "std": tuple(x * m for x in self.std)}


def normalize_table(normalize: Optional["Normalize"] = None) -> np.ndarray:
    """The float32 ``(3, 256)`` table fastq's output write maps uint8 values through:
    ``(v / 255 - mean[c]) / std[c]`` with `normalize`'s mean/std (as scaled by its
    max_pixel_value), or ``v / 255`` without one, computed in float64 and rounded once
    to float32 exactly as csrc builds it.  float16 / bfloat16 outputs are this table
    rounded to nearest even.  Device-side conversions (fastq.torch, fastq.jax,
    fastq.tf_ops.normalize) gather from it, so they equal the host's output bit for bit."""
    v = np.arange(256, dtype=np.float64) / 255.0
    if normalize is None:
        return np.stack([v.astype(np.float32)] * 3)
    f = normalize.fields()
    return np.stack([((v - f["mean"][c]) / f["std"][c]).astype(np.float32) for c in range(3)])


DTYPES = _image.DTYPES  # ("uint8", "float32", "float16", "bfloat16")
_LAYOUTS = {"NHWC": "NHWC", "HWC": "NHWC", "NCHW": "NCHW", "CHW": "NCHW"}


def dtype_name(dtype: Any, where: str = "compile_ops") -> str:
    """The output dtype's name: accepts "float32", ``np.float32``, ``np.dtype("float32")``,
    ``tf.float32``, ``ml_dtypes.bfloat16``/``jnp.bfloat16``..."""
    name = None
    if isinstance(dtype, str):
        name = dtype.lower()
    elif dtype is not None:
        np_dtype = getattr(dtype, "as_numpy_dtype", None)  # a tf.DType
        try:
            name = np.dtype(np_dtype if np_dtype is not None else dtype).name
        except TypeError:
            name = None
    if name not in DTYPES:
        raise ValueError(f"{where}: dtype must be one of {list(DTYPES)} (a name, a numpy dtype or a "
                         f"TensorFlow dtype), got {dtype!r}")
    return name


def layout_name(layout: str, where: str = "compile_ops") -> str:
    """"NHWC"/"NCHW" from any case of NHWC, NCHW, HWC, CHW."""
    key = layout.upper() if isinstance(layout, str) else None
    if key not in _LAYOUTS:
        raise ValueError(f"{where}: layout must be NHWC or NCHW (any case; HWC and CHW too), got {layout!r}")
    return _LAYOUTS[key]


@dataclass(frozen=True)
class CompiledOps:
    """A validated chain: what ``fastq._image.ImageSpec`` (and the pipeline) take.

    ``packed_ops`` is an ``FQ_OP_DTYPE`` array laid out exactly as ``fq_op[]``.
    ``out_shape`` is per sample: (h, w, c) for NHWC, (c, h, w) for NCHW."""

    ops: tuple
    packed_ops: np.ndarray
    channels: int
    dtype: str
    layout: str
    max_pixels: int
    dct_scaling: bool
    out_shape: tuple
    channel_order: str = "RGB"  # "BGR": the output channels reversed (channels="BGR")


def compile_ops(ops: Union["Op", Iterable["Op"], None], *, dtype: Any = "float32", layout: str = "NHWC",
                channels: int = 3, max_pixels: int = DEFAULT_MAX_PIXELS, dct_scaling: bool = True,
                input_size: Optional[Tuple[int, int]] = None) -> "CompiledOps":
    """Validate a chain of ops and pack it.

    Rules: at most 16 ops (one op alone is taken as a chain of one); the chain must
    give a fixed output size (its last size-changing op is a crop,
    ``RandomResizedCrop`` or ``Resize((h, w))``) unless ``input_size`` says every input
    image already has one ``(height, width)`` (``Arrays`` of equal-sized images): a
    chain without any size-changing op (even an empty one) then keeps that size.
    ``Normalize`` at most once and last, and only with a float dtype.  ``dtype``:
    uint8, float32, float16, bfloat16 (a name, numpy dtype or tf.DType); ``layout``:
    NHWC or NCHW (any case); ``channels``: 3 or "RGB", "BGR" (RGB reversed, fused into
    the write; Normalize's mean/std stay in RGB order and follow their channel), 1 or
    "gray"; ``max_pixels``:
    encoded images declaring more pixels fail with ImageTooLargeError before
    decoding; ``dct_scaling``: allow approximate JPEG DCT-domain downscaling when the
    first op is RandomResizedCrop or Resize (see docs/ops.md).
    """
    if isinstance(ops, Op):
        ops = (ops,)
    elif ops is None:
        ops = ()
    elif isinstance(ops, (str, bytes, dict)) or not hasattr(ops, "__iter__"):
        raise TypeError(f"compile_ops: ops must be a list of fastq.ops ops (or one op), got {type(ops).__name__}")
    ops = tuple(ops)
    if len(ops) > MAX_OPS:
        raise ValueError(f"compile_ops: at most {MAX_OPS} ops, got {len(ops)}")
    for i, op in enumerate(ops):
        if not isinstance(op, Op):
            raise ValueError(f"compile_ops: op {i} is not a fastq.ops op: {op!r}")
    dtype = dtype_name(dtype)
    layout = layout_name(layout)
    channels, channel_order = channels_order(channels)
    if not (isinstance(max_pixels, numbers.Integral) and max_pixels > 0):
        raise ValueError(f"compile_ops: max_pixels must be a positive int, got {max_pixels!r}")
    # the chain rules are the C core's (fq_img_chain_check); only the input_size case
    # and the wording of the advice are decided here
    packed = _image.pack_ops(_rows(ops))
    chain = _image.check_chain(packed, dtype)
    if chain["out_size"] is None and input_size is not None and chain["keeps_size"]:
        # every input is already input_size: an exact-size CenterCrop is the identity
        # and tells the C core the (fixed) output size
        if len(ops) >= MAX_OPS:
            raise ValueError(f"compile_ops: at most {MAX_OPS - 1} ops when the chain keeps the input size")
        ops = (CenterCrop(_size("compile_ops", input_size, "input_size")),) + ops
        packed = _image.pack_ops(_rows(ops))
        chain = _image.check_chain(packed, dtype)
    if chain["error"] is not None:
        if not ops:
            raise ValueError(
                "compile_ops: the op chain is empty and the images do not all have one size; it needs a "
                "crop or Resize((h, w)) (an empty chain is valid for Arrays of equal-sized images)")
        raise ValueError(f"compile_ops: {chain['error']}")
    size = chain["out_size"]
    h, w = size
    out_shape = (h, w, channels) if layout == "NHWC" else (channels, h, w)
    return CompiledOps(ops, packed, channels, dtype, layout, int(max_pixels), bool(dct_scaling), out_shape,
                       channel_order)


# ---- uint8 augmentation primitives (csrc/image/fq_image_aug.cpp) -----------------------
#
# torchvision.transforms.v2.functional semantics on uint8 tensors (SolarizeAdd: TF Model
# Garden), each applied with probability ``p`` (``u < p``; ``u`` is drawn even when p = 1).
# A level given as a number is used as is; a ``(min, max)`` pair is drawn uniformly per
# sample (only when the op is applied).  The level used is in the explain record
# (``magnitude``).  Exact definitions: docs/ops.md "Augmentation primitives".


def _level(op, value, name, lo, hi):
    if _num(value):
        rng = (float(value), float(value))
    else:
        rng = _pair(op, value, name)
    if not (lo <= rng[0] <= rng[1] <= hi):
        _fail(op, f"{name} must be a number or a (min, max) pair with {lo} <= min <= max <= {hi}", value)
    return rng


class _Prob(Op):
    def __init__(self, p: float = 1.0) -> None:
        self.p = _prob(type(self).__name__, p)

    def fields(self):
        return {"p": self.p}


class Invert(_Prob):
    """``255 - x`` with probability ``p``."""

    kind = _K["Invert"]


class AutoContrast(_Prob):
    """Per channel: stretch [min, max] to [0, 255]: ``trunc((x - min) / ((max - min) / 255))``
    in float32 (unchanged when max == min)."""

    kind = _K["AutoContrast"]


class Equalize(_Prob):
    """Per-channel histogram equalisation, PIL's / torchvision v2's integer algorithm."""

    kind = _K["Equalize"]


class Posterize(Op):
    """Keep the top ``bits`` (0..8) bits of every value: ``x & (0xFF << (8 - bits))``."""

    kind = _K["Posterize"]

    def __init__(self, bits: int, p: float = 1.0) -> None:
        n = "Posterize"
        if not (isinstance(bits, numbers.Integral) and not isinstance(bits, bool) and 0 <= bits <= 8):
            _fail(n, "bits must be an int in [0, 8]", bits)
        self.bits = int(bits)
        self.p = _prob(n, p)

    def fields(self):
        return {"bits": self.bits, "p": self.p}


class Solarize(Op):
    """``255 - x`` where ``x >= threshold`` (float compare), else ``x``; threshold in [0, 256]
    (a number, or a (min, max) range drawn per sample)."""

    kind = _K["Solarize"]

    def __init__(self, threshold: Range, p: float = 1.0) -> None:
        self.threshold = _level("Solarize", threshold, "threshold", 0, 256)
        self.p = _prob("Solarize", p)

    def fields(self):
        return {"level": self.threshold, "p": self.p}


class SolarizeAdd(Op):
    """TF Model Garden's ``solarize_add``: where ``x < threshold``, ``clip(x + addition, 0, 255)``,
    else ``x``.  ``addition``: int in [-255, 255]; ``threshold`` in [0, 256]."""

    kind = _K["SolarizeAdd"]

    def __init__(self, addition: int = 0, threshold: float = 128, p: float = 1.0) -> None:
        n = "SolarizeAdd"
        if not (isinstance(addition, numbers.Integral) and not isinstance(addition, bool) and -255 <= addition <= 255):
            _fail(n, "addition must be an int in [-255, 255]", addition)
        if not (_num(threshold) and 0 <= threshold <= 256):
            _fail(n, "threshold must be a number in [0, 256]", threshold)
        self.addition, self.threshold = int(addition), float(threshold)
        self.p = _prob(n, p)

    def fields(self):
        return {"addition": self.addition, "threshold": self.threshold, "p": self.p}


class _Factor(Op):
    def __init__(self, factor: Range, p: float = 1.0) -> None:
        n = type(self).__name__
        self.factor = _level(n, factor, "factor", 0, 1e6)
        self.p = _prob(n, p)

    def fields(self):
        return {"level": self.factor, "p": self.p}


class Brightness(_Factor):
    """``trunc(clamp(x * f))`` (torchvision ``adjust_brightness``)."""

    kind = _K["Brightness"]


class Color(_Factor):
    """Saturation blend with the gray image ``floor(0.2989 R + 0.587 G + 0.114 B)``:
    ``trunc(clamp(f x + (1 - f) gray))`` (``adjust_saturation``; no-op on 1 channel)."""

    kind = _K["Color"]


class Contrast(_Factor):
    """Blend with the mean of the floored gray image: ``trunc(clamp(f x + (1 - f) mean))``
    (``adjust_contrast``)."""

    kind = _K["Contrast"]


class Sharpness(_Factor):
    """Blend with the 3x3 smoothing (1s around, 5 in the centre, / 13, rounded) on the
    interior; the 1-pixel border is kept (``adjust_sharpness``)."""

    kind = _K["Sharpness"]


class _Geom(Op):
    _limit = 1e6
    _name = "level"

    def __init__(self, level: Range, fill: Fill = 0, p: float = 1.0) -> None:
        n = type(self).__name__
        self.level = _level(n, level, self._name, -self._limit, self._limit)
        self.fill = _fill(n, fill)
        self.p = _prob(n, p)

    def fields(self):
        return {"level": self.level, "fill": self.fill, "p": self.p}


class Rotate(_Geom):
    """Rotate by ``angle`` degrees counter-clockwise about the image centre, same size,
    nearest neighbour, ``fill`` outside (``F.rotate``)."""

    kind = _K["Rotate"]
    _name = "angle"

    def __init__(self, angle: Range, fill: Fill = 0, p: float = 1.0) -> None:
        super().__init__(angle, fill, p)


class ShearX(_Geom):
    """``F.affine(shear=[degrees(atan(level)), 0], center=[0, 0])``: x' = x + level * y about
    the top-left corner, nearest, ``fill`` outside; level in [-100, 100]."""

    kind = _K["ShearX"]
    _limit = 100


class ShearY(_Geom):
    """As ShearX along y: y' = y + level * x."""

    kind = _K["ShearY"]
    _limit = 100


class TranslateX(_Geom):
    """Shift right by ``int(pixels)`` (truncated toward zero), ``fill`` where uncovered."""

    kind = _K["TranslateX"]
    _limit = MAX_SIDE
    _name = "pixels"

    def __init__(self, pixels: Range, fill: Fill = 0, p: float = 1.0) -> None:
        super().__init__(pixels, fill, p)


class TranslateY(TranslateX):
    """Shift down by ``int(pixels)``."""

    kind = _K["TranslateY"]


class Gamma(Op):
    """torchvision v2 ``adjust_gamma``: ``trunc(min(max((x/255)^gamma * gain, 0), 1) * 255.999)``
    in float32 (the clamp only when gain != 1); ``gamma`` a number or a (min, max) range."""

    kind = _K["Gamma"]

    def __init__(self, gamma: Range, gain: float = 1.0, p: float = 1.0) -> None:
        n = "Gamma"
        self.gamma = _level(n, gamma, "gamma", 0, 1e3)
        if not (_num(gain) and 0 <= gain <= 1e3):
            _fail(n, "gain must be a number in [0, 1000]", gain)
        self.gain = float(gain)
        self.p = _prob(n, p)

    def fields(self):
        return {"gamma": self.gamma, "gain": self.gain, "p": self.p}


class Cutout(Op):
    """TF Model Garden ``cutout(image, pad_size, replace)``: centre row ~ U{0..H-1}, column
    ~ U{0..W-1}; the square ``[c - pad_size, c + pad_size)`` (clipped to the image) is set
    to ``fill``.  Explain: ``box`` (x, y, w, h)."""

    kind = _K["Cutout"]

    def __init__(self, pad_size: int, fill: Fill = 128, p: float = 1.0) -> None:
        n = "Cutout"
        self.pad_size = _int_in(n, "pad_size", pad_size, 0, MAX_SIDE)
        self.fill = _fill(n, fill)
        self.p = _prob(n, p)

    def fields(self):
        return {"pad_size": self.pad_size, "fill": self.fill, "p": self.p}


# AlexNet's PCA lighting on ImageNet, RGB, 0..255 scale (tensorpack's fbresnet_augmentor)
LIGHTING_EIGVAL = tuple(v * 255.0 for v in (0.2175, 0.0188, 0.0045))
LIGHTING_EIGVEC = ((-0.5675, 0.7192, 0.4009), (-0.5808, -0.0045, -0.8140), (-0.5836, -0.6948, 0.4203))


def _eigen(op, eigval, eigvec, dtype):
    """(eigval, eigvec) of a PCA-noise op as tuples of floats (values rounded to dtype
    first), or a ValueError naming op: eigval 3 finite numbers, eigvec 3 x 3."""
    try:
        ev = np.asarray(eigval, dtype=dtype)
        evec = np.asarray(eigvec, dtype=dtype)
    except (TypeError, ValueError):
        _fail(op, "eigval must be 3 numbers and eigvec 3 x 3 numbers", (eigval, eigvec))
    if ev.shape != (3,) or not np.isfinite(ev).all():
        _fail(op, "eigval must be 3 finite numbers", eigval)
    if evec.shape != (3, 3) or not np.isfinite(evec).all():
        _fail(op, "eigvec must be 3 x 3 finite numbers", eigvec)
    return tuple(float(v) for v in ev), tuple(tuple(float(v) for v in row) for row in evec)


class Lighting(Op):
    """tensorpack ``imgaug.Lighting(std, eigval, eigvec)`` on uint8: ``alpha = float32(N(0,1)
    * std)`` (3 draws, Box-Muller), ``inc = eigvec @ (alpha * eigval)``, out =
    ``trunc(clip(x + inc[c], 0, 255))``.  Defaults: the ImageNet constants (RGB, 0..255).
    Explain: ``alpha``, ``increment``."""

    kind = _K["Lighting"]

    def __init__(self, std: float = 0.1, eigval: Sequence[float] = LIGHTING_EIGVAL,
                 eigvec: Sequence[Sequence[float]] = LIGHTING_EIGVEC, p: float = 1.0) -> None:
        n = "Lighting"
        if not (_num(std) and 0 <= std <= 1e3):
            _fail(n, "std must be a number in [0, 1000]", std)
        self.std = float(std)
        self.eigval, self.eigvec = _eigen(n, eigval, eigvec, np.float64)
        self.p = _prob(n, p)

    def fields(self):
        return {"std": self.std, "eigval": self.eigval, "eigvec": self.eigvec, "p": self.p}


class GaussianBlur(Op):
    """torchvision v2 ``GaussianBlur(kernel_size, sigma)``: sigma ~ U(sigma) per sample (a
    number: fixed); kernel ``softmax(-(x / sigma)^2)`` over ``x = linspace(-lim, lim, k)``,
    ``lim = (k - 1) / (2 sqrt 2)``, in float32; separable float32 convolution with
    reflect borders, rounded half to even.  ``kernel_size``: odd int or ``(kx, ky)``
    (width first, as torchvision); an image not larger than half the kernel is left as is."""

    kind = _K["GaussianBlur"]

    def __init__(self, kernel_size: Union[int, Tuple[int, int]], sigma: Range = (0.1, 2.0), p: float = 1.0) -> None:
        n = "GaussianBlur"
        ks: Any = (kernel_size, kernel_size) if isinstance(kernel_size, numbers.Integral) else kernel_size
        try:
            kx, ky = ks
        except (TypeError, ValueError):
            _fail(n, "kernel_size must be an odd int or a pair of odd ints", kernel_size)
        self.kernel_size = (_int_in(n, "kernel_size", kx, 1, 255), _int_in(n, "kernel_size", ky, 1, 255))
        if not all(k % 2 == 1 for k in self.kernel_size):
            _fail(n, "kernel_size must be odd", kernel_size)
        self.sigma = _level(n, sigma, "sigma", 1e-12, 1e3)
        self.p = _prob(n, p)

    def fields(self):
        return {"ksize": self.kernel_size, "sigma": self.sigma, "p": self.p}


__all__ += ["GaussianBlur", "Gamma", "Cutout", "Lighting", "LIGHTING_EIGVAL", "LIGHTING_EIGVEC"]
__all__ += ["Invert", "AutoContrast", "Equalize", "Posterize", "Solarize", "SolarizeAdd", "Brightness", "Color",
            "Contrast", "Sharpness", "Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY"]


# ---- policies (csrc/image/fq_image_aug_policy.cpp) -------------------------------------

POLICY_OPS = ("Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
              "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize")


def _int_in(op, name, v, lo, hi):
    if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and lo <= v <= hi):
        _fail(op, f"{name} must be an int in [{lo}, {hi}]", v)
    return int(v)


class RandAugment(Op):
    """torchvision v2 ``RandAugment(num_ops, magnitude, num_magnitude_bins, fill)`` with
    nearest interpolation: ``num_ops`` times, an op drawn uniformly from
    :data:`POLICY_OPS` at bin ``magnitude`` of its table (shear 0..0.3, translate
    0..150/331 of the size, rotate 0..30, enhance 1 +- 0..0.9, posterize
    ``8 - round(i / ((bins - 1) / 4))`` bits, solarize threshold 255 -> 0), the signed ops
    negated with probability 1/2.  ``num_ops`` <= 4.  The explain record lists the ops
    drawn (``policy``: op, magnitude, bin)."""

    kind = _K["RandAugment"]

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31, fill: Fill = 0) -> None:
        n = "RandAugment"
        self.num_ops = _int_in(n, "num_ops", num_ops, 0, 4)
        self.num_magnitude_bins = _int_in(n, "num_magnitude_bins", num_magnitude_bins, 2, 1000)
        self.magnitude = _int_in(n, "magnitude", magnitude, 0, self.num_magnitude_bins - 1)
        self.fill = _fill(n, fill)

    def fields(self):
        return {"num_ops": self.num_ops, "magnitude": self.magnitude, "num_bins": self.num_magnitude_bins,
                "fill": self.fill}


class TrivialAugmentWide(Op):
    """torchvision v2 ``TrivialAugmentWide(num_magnitude_bins, fill)``, nearest: one op
    drawn uniformly from :data:`POLICY_OPS`, its bin uniformly from the bins (wide
    ranges: shear 0.99, translate 32 px, rotate 135, enhance 0.99, posterize
    ``8 - round(i / ((bins - 1) / 6))``), signed ops negated with probability 1/2."""

    kind = _K["TrivialAugmentWide"]

    def __init__(self, num_magnitude_bins: int = 31, fill: Fill = 0) -> None:
        n = "TrivialAugmentWide"
        self.num_magnitude_bins = _int_in(n, "num_magnitude_bins", num_magnitude_bins, 2, 1000)
        self.fill = _fill(n, fill)

    def fields(self):
        return {"num_bins": self.num_magnitude_bins, "fill": self.fill}


class AutoAugment(Op):
    """torchvision v2 ``AutoAugment(AutoAugmentPolicy.IMAGENET, fill)``, nearest: one of the
    25 two-op sub-policies drawn uniformly; each op applied if ``u <= p``, at its bin of
    10 (the RandAugment tables with 10 bins; Invert too), signed ops negated with
    probability 1/2.  Explain: ``subpolicy`` and ``policy`` (the ops applied)."""

    kind = _K["AutoAugment"]

    def __init__(self, policy: str = "imagenet", fill: Fill = 0) -> None:
        n = "AutoAugment"
        if policy != "imagenet":
            _fail(n, "policy must be 'imagenet' (the only one implemented)", policy)
        self.policy = policy
        self.fill = _fill(n, fill)

    def fields(self):
        return {"policy": 0, "fill": self.fill}


__all__ += ["RandAugment", "TrivialAugmentWide", "AutoAugment", "POLICY_OPS"]


# ---- output channel order and RandomErasing (topic: write; csrc/image/fq_image_write.cpp,
# csrc/image/fq_image_aug_erase.cpp) -------------------------------------------------------

def channels_order(channels: Any, where: str = "compile_ops") -> Tuple[int, str]:
    """``(channels, channel_order)`` from the ``channels`` option: 3 or "RGB" -> (3, "RGB"),
    "BGR" -> (3, "BGR"), 1 or "gray" -> (1, "RGB") (names in any case)."""
    if isinstance(channels, str):
        key = channels.upper()
        if key in ("RGB", "BGR"):
            return 3, key
        if key == "GRAY":
            return 1, "RGB"
    elif isinstance(channels, numbers.Integral) and not isinstance(channels, bool) and int(channels) in (1, 3):
        return int(channels), "RGB"
    raise ValueError(f"{where}: channels must be 3, 1, 'RGB', 'BGR' or 'gray', got {channels!r}")


class RandomErasing(Op):
    """torchvision v2 ``RandomErasing(p, scale, ratio, value)`` on the OUTPUT values (after
    ``Normalize``; it must be the last op of the chain).  With probability ``p``, up to 10
    tries: ``area = H W U(scale)``, ``r = exp(U(log ratio))`` (``ratio`` is height / width),
    ``h = round(sqrt(area r))``, ``w = round(sqrt(area / r))``, accepted if ``h < H`` and
    ``w < W``; then top ~ U{0..H-h}, left ~ U{0..W-w}.  No accepted try: nothing is erased
    (``applied`` False).  The box is written with ``value`` instead of the output values:
    a number, 3 numbers (per channel, RGB order: with ``channels="BGR"`` each value follows
    its channel, as Normalize's mean/std), or ``"random"``: per-element standard normal
    values (Box-Muller on the sample's own random stream; torchvision's exact numbers cannot
    be reproduced).  uint8 output: the value rounded half to even and clipped to 0..255.
    ``channels=1`` needs one value.  Every draw happens at plan time, in chain order.
    Explain: ``applied``, ``box`` (x, y, w, h in output coordinates), ``value``, ``tries``."""

    kind = _K["RandomErasing"]

    def __init__(self, p: float = 0.5, scale: Pair = (0.02, 0.33), ratio: Pair = (0.3, 3.3),
                 value: Union[float, Sequence[float], str] = 0) -> None:
        n = "RandomErasing"
        self.p = _prob(n, p)
        self.scale = _pair(n, scale, "scale")
        if not (0 <= self.scale[0] <= self.scale[1] <= 1):
            _fail(n, "scale must satisfy 0 <= min <= max <= 1", scale)
        self.ratio = _pair(n, ratio, "ratio")
        if not (0 < self.ratio[0] <= self.ratio[1] <= 1e6):
            _fail(n, "ratio must satisfy 0 < min <= max <= 1e6", ratio)
        if isinstance(value, str):
            if value != "random":
                _fail(n, "value must be a number, 3 numbers or 'random'", value)
            self.value: Any = "random"
        else:
            vals: Any = (value,) if _num(value) else value
            try:
                vals = tuple(vals)
            except TypeError:
                _fail(n, "value must be a number, 3 numbers or 'random'", value)
            if len(vals) == 1:
                vals = vals * 3
            if len(vals) != 3 or not all(_num(v) and abs(v) <= 1e30 for v in vals):
                _fail(n, "value must be a number, 3 numbers or 'random'", value)
            self.value = tuple(float(v) for v in vals)

    def fields(self):
        rnd = self.value == "random"
        return {"p": self.p, "scale": self.scale, "ratio": self.ratio,
                "value": (0.0, 0.0, 0.0) if rnd else self.value, "random": 1.0 if rnd else 0.0}


__all__ += ["RandomErasing", "channels_order"]
# ---- custom ops: CustomOp, PyFunc (csrc/image/fq_image_custom.cpp, docs/custom_ops.md) ----


class CustomOp(Op):
    """A C function of your own shared library, run in place on the uint8 HxWxC image
    by the native workers, GIL-free: ``CustomOp(library="/path/libmyop.so",
    symbol="my_op", params=[...], p=1.0)``.  The library implements the ABI of
    ``fastq_custom_op.h`` (in ``fastq.get_include()``); it is loaded with
    ``dlopen(RTLD_NOW | RTLD_LOCAL)`` when a pipeline (an ``ImageSpec``) is created,
    which fails naming the library, the symbol or the ABI version that does not fit
    (:meth:`check` does the same now).  ``params`` (any number of floats) go to
    ``symbol_init`` and to every call.  Applied with probability ``p``; its random
    draws come from the sample's stream (explain: ``rng_key``), so outputs are
    identical for any number of workers.  A non-zero return fails the sample with the
    function's message; the pipeline's ``on_error`` applies."""

    kind = _K["CustomOp"]

    def __init__(self, library, symbol: str, params: Sequence[float] = (), p: float = 1.0) -> None:
        n = "CustomOp"
        import os
        try:
            library = os.fspath(library)
        except TypeError:
            _fail(n, "library must be a path", library)
        if not library or (isinstance(library, str) and "\0" in library):
            _fail(n, "library must be a non-empty path", library)
        if not (isinstance(symbol, str) and symbol.isidentifier() and symbol.isascii()):
            _fail(n, "symbol must be a C identifier", symbol)
        try:
            vals = tuple(float(v) for v in params)
        except (TypeError, ValueError):
            _fail(n, "params must be a sequence of numbers", params)
        if not all(math.isfinite(v) for v in vals):
            _fail(n, "params must be finite numbers", params)
        self.library = library
        self.symbol = symbol
        self.params = vals
        self.p = _prob(n, p)

    def fields(self):
        # slot: the op's place in the spec's custom table, set when a spec binds it
        return {"slot": 0, "p": self.p}

    def check(self) -> None:
        """Load the library and check the symbol and its ABI version now (init is not run)."""
        _image.probe_custom(self.library, self.symbol)

    def _key(self):
        return (self.library, self.symbol, self.params, self.p)

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


class PyFunc(Op):
    """A Python function run on each sample: ``fn(image, rng)`` with ``image`` a
    writable uint8 HxWxC numpy view of the sample's current pixels (valid only during
    the call) and ``rng`` a ``numpy.random.Generator`` seeded from the sample's
    ``(seed, epoch, index)``; it edits ``image`` in place and returns None, or returns
    a uint8 array of the same shape.  Applied with probability ``p``.  It runs on the
    native worker threads but takes the GIL for each call (a cost: see
    docs/custom_ops.md and benchmarks/bench_pyfunc.py).  An exception fails the sample
    with its traceback in the message; the pipeline's ``on_error`` applies."""

    kind = _K["PyFunc"]

    def __init__(self, fn, p: float = 1.0) -> None:
        if not callable(fn):
            _fail("PyFunc", "fn must be callable", fn)
        self.fn = fn
        self.p = _prob("PyFunc", p)

    @property
    def name(self) -> str:
        return f"PyFunc({getattr(self.fn, '__qualname__', None) or type(self.fn).__name__})"

    def fields(self):
        return {"slot": 0, "p": self.p}

    def __eq__(self, other):
        return type(self) is type(other) and self.fn is other.fn and self.p == other.p

    def __hash__(self):
        return hash((id(self.fn), self.p))


__all__ += ["CustomOp", "PyFunc"]
# ---- compose: compositions (csrc/image/fq_image_compose.cpp) ---------------------------
#
# torchvision.transforms.v2 RandomApply / RandomChoice / RandomOrder.  Packed flat: the
# composition's record (its number of direct children first) followed by each child's
# rows (a child may be a composition: nesting is allowed).  Every record takes one of the
# MAX_OPS (16) places.  The composition draws first (one uniform; RandomOrder a Fisher-Yates
# permutation), then the children that run draw, in the order they run; children that do
# not run draw nothing.  Size rule (checked by the C core, naming the op): the children of
# RandomApply and RandomOrder keep the image size; the alternatives of RandomChoice all keep
# it or all give one fixed size.  Explain: docs/ops.md "Composition".


def _rows(ops):
    """The ``(kind, fields)`` rows of a chain, compositions flattened depth first (what
    ``_image.pack_ops`` packs)."""
    for op in ops:
        yield op.kind, op.fields()
        if isinstance(op, _Compose):
            yield from _rows(op.transforms)


class _Compose(Op):
    _name = "?"

    def _children(self, transforms, one_ok=False):
        n = self._name
        if isinstance(transforms, Op) and one_ok:
            transforms = [transforms]
        if isinstance(transforms, (str, bytes, dict, Op)) or not hasattr(transforms, "__iter__"):
            _fail(n, "transforms must be a list of fastq.ops ops", transforms)
        transforms = tuple(transforms)
        if not transforms:
            _fail(n, "transforms must not be empty", list(transforms))
        for k, t in enumerate(transforms):
            if not isinstance(t, Op):
                _fail(n, f"transforms[{k}] is not a fastq.ops op", t)
            if isinstance(t, Normalize):
                _fail(n, f"transforms[{k}]: Normalize cannot be inside a composition (it must be the last op)", t)
        flat = sum(1 for _ in _rows(transforms))
        if flat > MAX_OPS - 1:
            raise ValueError(f"{n}: at most {MAX_OPS - 1} child ops (counting the ops inside nested compositions), "
                             f"got {flat}")
        return transforms

    def pack(self):
        return self.kind, tuple(sorted(self.fields().items())), tuple(t.pack() for t in self.transforms)

    def _extra(self):
        return ""

    def __repr__(self):
        return f"{type(self).__name__}([{', '.join(map(repr, self.transforms))}]{self._extra()})"


class RandomApply(_Compose):
    """torchvision v2 ``RandomApply(transforms, p=0.5)``: with probability ``p`` (``u < p``,
    one uniform drawn per sample) run all ``transforms`` in order, else none of them (they
    then draw nothing).  ``transforms``: one op or a list; each must keep the image size.
    Explain: ``applied``, ``children``, ``ran``."""

    kind = _K["RandomApply"]
    _name = "RandomApply"

    def __init__(self, transforms: Union["Op", Sequence["Op"]], p: float = 0.5) -> None:
        self.transforms = self._children(transforms, one_ok=True)
        self.p = _prob(self._name, p)

    def fields(self):
        return {"n": len(self.transforms), "p": self.p}

    def _extra(self):
        return f", p={self.p!r}"


class RandomChoice(_Compose):
    """torchvision v2 ``RandomChoice(transforms, p=None)``: run exactly one of
    ``transforms``, drawn with probabilities ``p`` (uniform when None; normalised to sum 1;
    non-negative, not all zero, one per op; at most 15 ops).  The alternatives must all keep
    the image size or all give one fixed size.  Explain: ``chosen`` (its position),
    ``children``, ``ran``."""

    kind = _K["RandomChoice"]
    _name = "RandomChoice"

    def __init__(self, transforms: Sequence["Op"], p: Optional[Sequence[float]] = None) -> None:
        n = self._name
        self.transforms = self._children(transforms)
        k = len(self.transforms)
        if p is None:
            probs = [1.0] * k
        else:
            if isinstance(p, (str, bytes)) or not hasattr(p, "__len__"):
                _fail(n, "p must be None or a list of probabilities, one per op", p)
            if len(p) != k:
                _fail(n, f"p must have one probability per op ({k})", p)
            if not all(_num(v) and v >= 0 for v in p) or not sum(p) > 0:
                _fail(n, "p must be finite numbers >= 0, not all zero", p)
            probs = [float(v) for v in p]
        total = math.fsum(probs)
        self.p = tuple(v / total for v in probs)

    def fields(self):
        return {"n": len(self.transforms), "p": self.p + (0.0,) * (MAX_OPS - 1 - len(self.p))}

    def _extra(self):
        return f", p={list(self.p)!r}"


class RandomOrder(_Compose):
    """torchvision v2 ``RandomOrder(transforms)``: run all ``transforms`` in a random
    order (a Fisher-Yates permutation on the sample's stream, as ColorJitter draws its
    order); each must keep the image size.  Explain: ``order`` (positions, in the order
    run), ``children``, ``ran``."""

    kind = _K["RandomOrder"]
    _name = "RandomOrder"

    def __init__(self, transforms: Sequence["Op"]) -> None:
        self.transforms = self._children(transforms)

    def fields(self):
        return {"n": len(self.transforms)}


__all__ += ["RandomApply", "RandomChoice", "RandomOrder"]
# ---- targets (issue 19): detection geometry ops (csrc/image/fq_image_det.cpp) ------------

class ResizeShortestEdge(Op):
    """detectron2 ``ResizeShortestEdge`` / tensorpack ``CustomResize``: the shorter side
    becomes ``short`` (a list: one of them drawn uniformly per sample), the longer side is
    capped at ``max_size`` (scale ``min(short / min(h, w), max_size / max(h, w))``, in
    double), each side rounded ``int(x + 0.5)``.  Boxes scale by ``new / old`` per axis
    (docs/targets.md).  Variable output size: follow it with ``Pad(size=...)``."""

    kind = _K["ResizeShortestEdge"]

    def __init__(self, short: Union[int, Sequence[int]], max_size: Optional[int] = None,
                 interpolation: str = "bilinear") -> None:
        n = "ResizeShortestEdge"
        sizes = [short] if isinstance(short, numbers.Integral) else list(short)
        if not 1 <= len(sizes) <= 8:
            _fail(n, "short must be an int or a list of 1 to 8 ints", short)
        self.short = tuple(_int_in(n, "short", s, 1, MAX_SIDE) for s in sizes)
        self.max_size = None if max_size is None else _int_in(n, "max_size", max_size, 1, MAX_SIDE)
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation)

    def fields(self):
        return {"sizes": self.short + (0,) * (8 - len(self.short)), "n_sizes": len(self.short),
                "max_size": self.max_size or 0, "interp": self._interp}


class Pad(Op):
    """Place the image at the top-left of a ``size`` = (h, w) canvas (an image larger than
    ``size`` is an error: Pad never crops), or of the next multiple of ``multiple`` per
    side; ``fill`` (per channel) elsewhere.  Coordinates (boxes, keypoints) are unchanged;
    with ``size`` a variable-size chain gets a fixed output size."""

    kind = _K["Pad"]

    def __init__(self, size: Optional[Union[int, Tuple[int, int]]] = None, *, multiple: Optional[int] = None,
                 fill: Fill = 0) -> None:
        n = "Pad"
        if (size is None) == (multiple is None):
            _fail(n, "give exactly one of size and multiple", (size, multiple))
        self.size = None if size is None else _size(n, size)
        self.multiple = None if multiple is None else _int_in(n, "multiple", multiple, 1, 4096)
        self.fill = _fill(n, fill)

    def fields(self):
        h, w = self.size or (0, 0)
        return {"out_h": h, "out_w": w, "multiple": self.multiple or 0, "fill": self.fill}


class ScaleJitter(Op):
    """TF Model Garden ``resize_and_crop_image(desired_size=output_size,
    padded_size=output_size, aug_scale_min, aug_scale_max)``: ``s ~ U(scale)`` (no draw
    for ``scale=(1, 1)``), target ``round(s * output_size)``; the image is resized by
    ``min(target_h / h, target_w / w)`` to ``round(size * scale)`` (aspect kept, rounding
    half to even), a window of ``output_size`` is cut at offset ``int(max(scaled - out,
    0) * U(0, 1))`` (y then x), padded bottom/right with ``fill``.  Fixed output size.
    Explain: ``box`` = (x offset, y offset, scaled w, scaled h), ``magnitude`` = s."""

    kind = _K["ScaleJitter"]

    def __init__(self, output_size: Union[int, Tuple[int, int]], scale: Pair = (0.1, 2.0),
                 interpolation: str = "bilinear", fill: Fill = 0) -> None:
        n = "ScaleJitter"
        self.output_size = _size(n, output_size, "output_size")
        self.scale = _pair(n, scale, "scale")
        if not (0 < self.scale[0] <= self.scale[1] <= 100):
            _fail(n, "scale must satisfy 0 < min <= max <= 100", scale)
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation)
        self.fill = _fill(n, fill)

    def fields(self):
        return {"out_h": self.output_size[0], "out_w": self.output_size[1], "scale": self.scale,
                "interp": self._interp, "fill": self.fill}


class RandomZoomOut(Op):
    """torchvision v2 ``RandomZoomOut(fill, side_range, p)``: with probability ``p``, ``r ~
    U(side_range)``, the image is placed on an ``int(W r) x int(H r)`` canvas of ``fill`` at
    ``left = int((cw - W) U)``, ``top = int((ch - H) U)``.  Variable output size: follow
    it with a resize / crop.  Explain: ``pad`` (left, top, right, bottom), ``applied``,
    ``magnitude`` = r."""

    kind = _K["RandomZoomOut"]

    def __init__(self, fill: Fill = 0, side_range: Pair = (1.0, 4.0), p: float = 0.5) -> None:
        n = "RandomZoomOut"
        self.fill = _fill(n, fill)
        self.side_range = _pair(n, side_range, "side_range")
        if not 1 <= self.side_range[0] <= self.side_range[1] <= 64:
            _fail(n, "side_range must satisfy 1 <= min <= max <= 64", side_range)
        self.p = _prob(n, p)

    def fields(self):
        return {"fill": self.fill, "side_range": self.side_range, "p": self.p}


__all__ += ["ResizeShortestEdge", "Pad", "ScaleJitter", "RandomZoomOut"]


class RandomIoUCrop(Op):
    """torchvision v2 ``RandomIoUCrop(min_scale, max_scale, min_aspect_ratio,
    max_aspect_ratio, sampler_options, trials)``, the SSD crop, drawn from the sample's boxes
    as they enter the op (so the pipeline needs targets with boxes: ``Targets`` of a
    ``Files`` / ``Bytes`` / ``Arrays`` source, or ``OdapiTargets`` of a ``TFRecord``; every op
    before it must have a target rule).  torchvision's algorithm on fastq's per-sample
    stream: per round an option (``randint``); ``>= 1``: no crop; else up to ``trials``
    trials of ``new_w = int(W r0)``, ``new_h = int(H r1)``, ``r ~ min_scale + (max_scale -
    min_scale) U`` (float32), the aspect ratio ``new_w / new_h`` in range, ``left = int((W -
    new_w) U)``, ``top = int((H - new_h) U)``; a crop is taken when some box's centre is
    strictly inside it and the largest IoU of those boxes with it is ``>= option``.  fastq
    stops after 1000 rounds (torchvision: no limit) with no crop; a sample with no boxes
    is not cropped.  Boxes whose centre is outside the crop are dropped (torchvision marks
    them for ``SanitizeBoundingBoxes``).  Variable output size: follow it with a
    ``Resize((h, w))`` or ``Pad``.  Explain: ``box`` (x, y, w, h; the whole image when not
    applied), ``applied``, ``magnitude`` (the option that ended the draw), ``rounds``,
    ``trials``, ``iou`` (docs/ops.md)."""

    kind = _K["RandomIoUCrop"]

    def __init__(self, min_scale: float = 0.3, max_scale: float = 1.0, min_aspect_ratio: float = 0.5,
                 max_aspect_ratio: float = 2.0, sampler_options: Optional[Sequence[float]] = None,
                 trials: int = 40) -> None:
        n = "RandomIoUCrop"
        self.min_scale, self.max_scale = _pair(n, (min_scale, max_scale), "(min_scale, max_scale)")
        if not 0 < self.min_scale <= self.max_scale <= 1:
            _fail(n, "scale must satisfy 0 < min_scale <= max_scale <= 1", (min_scale, max_scale))
        self.min_aspect_ratio, self.max_aspect_ratio = _pair(
            n, (min_aspect_ratio, max_aspect_ratio), "(min_aspect_ratio, max_aspect_ratio)")
        if not 0 < self.min_aspect_ratio <= self.max_aspect_ratio:
            _fail(n, "aspect ratio must satisfy 0 < min_aspect_ratio <= max_aspect_ratio",
                  (min_aspect_ratio, max_aspect_ratio))
        opts = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] if sampler_options is None else list(sampler_options)
        if not (1 <= len(opts) <= 10 and all(_num(o) and o >= 0 for o in opts)):
            _fail(n, "sampler_options must be 1 to 10 finite numbers >= 0", sampler_options)
        self.sampler_options = tuple(float(o) for o in opts)
        self.trials = _int_in(n, "trials", trials, 1, 1000)

    def fields(self):
        return {"min_scale": self.min_scale, "max_scale": self.max_scale, "min_aspect": self.min_aspect_ratio,
                "max_aspect": self.max_aspect_ratio,
                "options": self.sampler_options + (0.0,) * (10 - len(self.sampler_options)),
                "n_options": len(self.sampler_options), "trials": self.trials}


__all__ += ["RandomIoUCrop"]


# ---- tensorpack: fbresnet_augmentor's ops (csrc/image/fq_image_aug_tp.cpp) ----------------

# fbresnet_augmentor's Lighting constants, for the BGR images tensorpack sees: LIGHTING_EIGVAL
# reversed and LIGHTING_EIGVEC[::-1, ::-1]
TP_EIGVAL_BGR = tuple(LIGHTING_EIGVAL[::-1])
TP_EIGVEC_BGR = tuple(tuple(row[::-1]) for row in LIGHTING_EIGVEC[::-1])


class TensorpackCrop(Op):
    """tensorpack ``imgaug.GoogleNetRandomCropAndResize(crop_area_fraction, aspect_ratio_range,
    target_shape=size, interp)``, bicubic by default as ``fbresnet_augmentor``.

    Up to ``max_attempts`` tries (tensorpack: 10): ``targetArea = U(crop_area_fraction) * H * W``,
    ``aspectR = U(aspect_ratio_range)`` (uniform, not log-uniform), ``ww = int(sqrt(targetArea *
    aspectR) + 0.5)``, ``hh = int(sqrt(targetArea / aspectR) + 0.5)``, swapped when ``U(0, 1) <
    0.5``; accepted if ``hh <= H and ww <= W`` (and both >= 1), then ``x0 = U{0..W-ww}``, ``y0 =
    U{0..H-hh}`` (drawn in that order) and the box is resized to ``size x size``.  Otherwise
    ``ResizeShortestEdge(short_edge or size)`` (the other side ``int(scale * side + 0.5)``) and
    ``CenterCrop(size)`` at ``int((side - size) * 0.5)``.  ``max_attempts=0,
    short_edge=256``: tensorpack's validation chain (``ResizeShortestEdge(256)`` +
    ``CenterCrop(224)``).  As op 0 of a JPEG chain a sampled box is decoded like
    RandomResizedCrop's (region of interest, DCT scaling when allowed).  Explain: ``applied``
    (a box was found), ``box`` (source coordinates; the fallback: the centre crop in the
    resized image), ``tries``, ``resized_shape`` (the fallback's)."""

    kind = _K["TensorpackCrop"]

    def __init__(self, size: int = 224, crop_area_fraction: Pair = (0.08, 1.0),
                 aspect_ratio_range: Pair = (0.75, 1.333), interpolation: str = "bicubic",
                 max_attempts: int = 10, short_edge: int = 0) -> None:
        n = "TensorpackCrop"
        if not (isinstance(size, numbers.Integral) and not isinstance(size, bool) and 1 <= size <= MAX_SIDE):
            _fail(n, f"size must be an int in [1, {MAX_SIDE}]", size)
        self.size = int(size)
        self.crop_area_fraction = _pair(n, crop_area_fraction, "crop_area_fraction")
        if not (0 < self.crop_area_fraction[0] <= self.crop_area_fraction[1] <= 1):
            _fail(n, "crop_area_fraction must satisfy 0 < min <= max <= 1", crop_area_fraction)
        self.aspect_ratio_range = _pair(n, aspect_ratio_range, "aspect_ratio_range")
        if not (0 < self.aspect_ratio_range[0] <= self.aspect_ratio_range[1]):
            _fail(n, "aspect_ratio_range must satisfy 0 < min <= max", aspect_ratio_range)
        self.interpolation = interpolation
        self._interp = _interp(n, interpolation, allow_area=False)
        if not (isinstance(max_attempts, numbers.Integral) and not isinstance(max_attempts, bool)
                and 0 <= max_attempts <= 1000):
            _fail(n, "max_attempts must be an int in [0, 1000]", max_attempts)
        self.max_attempts = int(max_attempts)
        if not (isinstance(short_edge, numbers.Integral) and not isinstance(short_edge, bool)
                and (short_edge == 0 or self.size <= short_edge <= MAX_SIDE)):
            _fail(n, f"short_edge must be 0 or an int in [size, {MAX_SIDE}]", short_edge)
        self.short_edge = int(short_edge)

    def fields(self):
        return {"size": self.size, "area": self.crop_area_fraction, "aspect": self.aspect_ratio_range,
                "interp": self._interp, "max_attempts": self.max_attempts, "short_edge": self.short_edge}


class TensorpackColor(Op):
    """``fbresnet_augmentor``'s colour stage, fused: ``ToFloat32``, ``RandomOrderAug([
    BrightnessScale(brightness), Contrast(contrast, rgb=False), Saturation(saturation,
    rgb=False), Lighting(lighting_std, eigval, eigvec)])`` (all ``clip=True``, tensorpack's
    default there), ``ToUint8`` (``clip(0, 255).astype(uint8)``: truncation).

    Draws (sample stream): the order (a Fisher-Yates permutation), then in list order
    brightness ``b ~ U(brightness)``, contrast ``r ~ U(contrast)``, saturation ``v = 1 +
    U(-saturation, saturation)``, lighting ``alpha_k = float32(N(0, 1) * lighting_std)``.
    Float32 steps as numpy does them: ``x * f32(b)``; ``x * f32(r) + f32(mean(grey) *
    f32(1 - r))``; ``x * f32(v) + grey * f32(1 - v)`` per pixel; ``x + inc`` with ``inc =
    eigvec @ (alpha * eigval)`` (float32); each clipped to [0, 255].  ``grey`` is cv2's float
    BGR2GRAY of the image tensorpack sees (0.299 R + 0.587 G + 0.114 B).

    ``bgr=True``: tensorpack sees fastq's image with its channels reversed (a pipeline made
    with ``channels="BGR"``); ``eigval`` / ``eigvec`` are in that order (defaults:
    ``fbresnet_augmentor``'s, :data:`TP_EIGVAL_BGR` / :data:`TP_EIGVEC_BGR`).  Packed as
    ``eigvec[i][j] * eigval[j]`` (float32 factors, exact in double).  Explain: ``order``,
    ``brightness``, ``contrast``, ``saturation``, ``alpha`` (tensorpack's ``v``), ``contrast_mean``."""

    kind = _K["TensorpackColor"]

    def __init__(self, brightness: Pair = (0.6, 1.4), contrast: Pair = (0.6, 1.4), saturation: float = 0.4,
                 lighting_std: float = 0.1, eigval: Sequence[float] = TP_EIGVAL_BGR,
                 eigvec: Sequence[Sequence[float]] = TP_EIGVEC_BGR, bgr: bool = True) -> None:
        n = "TensorpackColor"
        self.brightness = _pair(n, brightness, "brightness")
        self.contrast = _pair(n, contrast, "contrast")
        for name, (lo, hi) in (("brightness", self.brightness), ("contrast", self.contrast)):
            if not (0 <= lo <= hi <= 1e3):
                _fail(n, f"{name} must satisfy 0 <= min <= max <= 1000", (lo, hi))
        if not (_num(saturation) and 0 <= saturation < 1):
            _fail(n, "saturation must be a number in [0, 1)", saturation)
        self.saturation = float(saturation)
        if not (_num(lighting_std) and 0 <= lighting_std <= 1e3):
            _fail(n, "lighting_std must be a number in [0, 1000]", lighting_std)
        self.lighting_std = float(lighting_std)
        self.eigval, self.eigvec = _eigen(n, eigval, eigvec, np.float32)
        self.bgr = bool(bgr)

    def fields(self):
        pca = tuple(tuple(self.eigvec[i][j] * self.eigval[j] for j in range(3)) for i in range(3))
        return {"brightness": self.brightness, "contrast": self.contrast, "saturation": self.saturation,
                "lighting_std": self.lighting_std, "pca": pca, "bgr": int(self.bgr)}


__all__ += ["TensorpackCrop", "TensorpackColor", "TP_EIGVAL_BGR", "TP_EIGVEC_BGR"]


# ---- topic tfpolicy: GaussianNoise, TF Model Garden policies (csrc/image/fq_image_aug_tf*.cpp) ----

class GaussianNoise(Op):
    """torchvision 0.29 v2 ``GaussianNoise(mean, sigma, clip)`` on uint8 (its uint8 kernel,
    which works in 0..255 units): per element ``noise = int16(trunc(f32(mean * 255) + z *
    f32(sigma * 255)))`` (float32, torch's mul then add), ``out = x + noise`` clamped to
    [0, 255] when ``clip``, else wrapped modulo 256 as torch does.  On the [0, 1] scale this
    is ``x / 255 + N(mean, sigma)`` with the noise truncated toward zero to whole levels.
    ``z = f32(sqrt(-2 ln(1 - u1)) cos(2 pi u2))`` (Box-Muller, two uniforms per element)
    from the op's own stream, keyed by one draw of the sample's stream (explain
    ``rng_key``); elements in row-major (row, column, channel) order.  ``|mean|``,
    ``sigma`` <= 10.  Explain: ``applied``, ``magnitude`` (sigma), ``rng_key``."""

    kind = _K["GaussianNoise"]

    def __init__(self, mean: float = 0.0, sigma: float = 0.1, clip: bool = True, p: float = 1.0) -> None:
        n = "GaussianNoise"
        if not (_num(mean) and abs(mean) <= 10):
            _fail(n, "mean must be a number in [-10, 10]", mean)
        if not (_num(sigma) and 0 <= sigma <= 10):
            _fail(n, "sigma must be a number in [0, 10]", sigma)
        if not isinstance(clip, bool):
            _fail(n, "clip must be a bool", clip)
        self.mean, self.sigma, self.clip = float(mean), float(sigma), clip
        self.p = _prob(n, p)

    def fields(self):
        return {"mean": self.mean, "sigma": self.sigma, "clip": 1.0 if self.clip else 0.0, "p": self.p}


__all__ += ["GaussianNoise"]

TF_POLICY_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "Color", "Contrast",
                 "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateX", "TranslateY", "Cutout", "SolarizeAdd")


def _tf_const(op, name, v):
    if not (_num(v) and 0 <= v <= 1e4):
        _fail(op, f"{name} must be a number in [0, 10000]", v)
    return float(v)


def _tf_fill(op, fill):
    f = _fill(op, fill)
    if not all(float(v).is_integer() for v in (f if isinstance(f, tuple) else (f,))):
        _fail(op, "fill must be integers in [0, 255]", fill)
    return f


def _tf_exclude(op, exclude_ops):
    """exclude_ops (names of TF_POLICY_OPS) -> (tuple in TF's order, bit mask)"""
    if exclude_ops is None:
        return (), 0
    if isinstance(exclude_ops, str):  # TF's `op not in exclude_ops` would test substrings
        _fail(op, "exclude_ops must be a list of op names, not a string", exclude_ops)
    try:
        names = list(exclude_ops)
    except TypeError:
        _fail(op, "exclude_ops must be a list of op names", exclude_ops)
    for n in names:
        if n not in TF_POLICY_OPS:
            raise ValueError(f"{op}: exclude_ops: unknown op {n!r} (TF's ops: {', '.join(TF_POLICY_OPS)})")
    return tuple(n for n in TF_POLICY_OPS if n in names), sum(1 << i for i, n in enumerate(TF_POLICY_OPS) if n in names)


class TFRandAugment(Op):
    """TF Model Garden ``RandAugment(num_layers, magnitude, cutout_const, translate_const,
    magnitude_std, prob_to_apply, exclude_ops)`` (official/vision/ops/augment.py,
    tf-models-official 2.20) with TF's own op definitions: per layer an op drawn uniformly
    from the 16 of :data:`TF_POLICY_OPS` less ``exclude_ops``, plus identity (TF's
    ``switch_case`` default), at ``magnitude`` (0..10: rotate ``M/10*30``, shear
    ``M/10*0.3``, translate ``M/10*translate_const`` px, enhance ``M/10*1.8+0.1``, posterize
    ``int(M/10*4)``, solarize ``int(M/10*256)``, solarize-add ``int(M/10*110)``, cutout
    ``int(M/10*cutout_const)``), geometric ops negated with probability 1/2; with
    ``prob_to_apply`` each layer is kept with that probability.  ``magnitude_std > 0``: the
    op's level is ``clip(magnitude + N(0, 1), 0, 10)``, drawn per op applied, and its
    argument computed in float32 -- as TF 2.20, whose ``_parse_policy_info`` adds a
    *standard* normal (``magnitude_std`` only switches the draw on; it does not scale it).
    ``exclude_ops``: names of :data:`TF_POLICY_OPS` (an unknown name raises; TF ignores
    it).  ``fill``: Cutout's value (TF's replace 128; the geometric ops reflect, as TF's
    ``fill_mode='reflect'``).  A separate class (not ``RandAugment(variant="tf")``):
    different parameters, ops and op definitions.  Explain: ``policy`` (op, TF's argument;
    ``bin``: Cutout's centre ``cy * 65536 + cx``)."""

    kind = _K["TFRandAugment"]

    def __init__(self, num_layers: int = 2, magnitude: float = 10.0, cutout_const: float = 40.0,
                 translate_const: float = 100.0, prob_to_apply: Optional[float] = None, fill: Fill = 128,
                 magnitude_std: float = 0.0, exclude_ops: Optional[Sequence[str]] = None) -> None:
        n = "TFRandAugment"
        self.num_layers = _int_in(n, "num_layers", num_layers, 0, 4)
        if not (_num(magnitude) and 0 <= magnitude <= 10):
            _fail(n, "magnitude must be a number in [0, 10]", magnitude)
        self.magnitude = float(magnitude)
        self.cutout_const = _tf_const(n, "cutout_const", cutout_const)
        self.translate_const = _tf_const(n, "translate_const", translate_const)
        self.prob_to_apply = None if prob_to_apply is None else _prob(n, prob_to_apply)
        self.fill = _tf_fill(n, fill)
        if not (_num(magnitude_std) and 0 <= magnitude_std <= 10):
            _fail(n, "magnitude_std must be a number in [0, 10]", magnitude_std)
        self.magnitude_std = float(magnitude_std)
        self.exclude_ops, self._exclude = _tf_exclude(n, exclude_ops)

    def fields(self):
        return {"num_layers": self.num_layers, "magnitude": self.magnitude, "cutout_const": self.cutout_const,
                "translate_const": self.translate_const,
                "prob_to_apply": -1.0 if self.prob_to_apply is None else self.prob_to_apply, "fill": self.fill,
                "magnitude_std": self.magnitude_std, "exclude": float(self._exclude)}


# TFAutoAugment's policies: TF's augmentation_name -> the C table's index
TF_AUTOAUGMENT_POLICIES = {"v0": 0, "reduced_imagenet": 1, "simple": 2, "reduced_cifar10": 3, "svhn": 4,
                           "panoptic_deeplab_policy": 5, "vit": 6, "test": 7, "deit3_three_augment": 8}


class TFAutoAugment(Op):
    """TF Model Garden ``AutoAugment(augmentation_name, cutout_const=100,
    translate_const=250)``: ``policy`` one of :data:`TF_AUTOAUGMENT_POLICIES` -- "v0"
    (``policy_v0``), "reduced_imagenet" (also spelled "imagenet"), "simple",
    "reduced_cifar10", "svhn" (25, 25, 13, 25, 25 two-op sub-policies),
    "panoptic_deeplab_policy" (5), "vit" (9 three-op sub-policies), "test" (1),
    "deit3_three_augment" (3 one-op: TF's grayscale, solarize 128, or its Gaussian_Noise, a
    3x3 Gaussian blur with sigma ~ U(0.1, translate_const / 10), explained as
    ``GaussianBlur``); one drawn uniformly; each op applied if ``u < prob`` at its level
    (TF's level_to_arg, as :class:`TFRandAugment`), geometric ops negated with probability
    1/2.  Not done: TF's "detection_v0" (box-aware ops) and a custom ``policies`` list.
    Explain: ``subpolicy``, ``policy`` (the ops applied)."""

    kind = _K["TFAutoAugment"]

    def __init__(self, policy: str = "v0", cutout_const: float = 100.0, translate_const: float = 250.0,
                 fill: Fill = 128) -> None:
        n = "TFAutoAugment"
        if policy == "imagenet":
            policy = "reduced_imagenet"
        if policy not in TF_AUTOAUGMENT_POLICIES:
            _fail(n, f"policy must be one of {', '.join(map(repr, TF_AUTOAUGMENT_POLICIES))} ('imagenet')", policy)
        self.policy = policy
        self.cutout_const = _tf_const(n, "cutout_const", cutout_const)
        self.translate_const = _tf_const(n, "translate_const", translate_const)
        self.fill = _tf_fill(n, fill)

    def fields(self):
        return {"policy": float(TF_AUTOAUGMENT_POLICIES[self.policy]), "cutout_const": self.cutout_const,
                "translate_const": self.translate_const, "fill": self.fill}


__all__ += ["TFRandAugment", "TFAutoAugment", "TF_POLICY_OPS", "TF_AUTOAUGMENT_POLICIES"]
