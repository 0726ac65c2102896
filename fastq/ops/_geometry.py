"""Geometry ops: crops, resizes, flips, affine maps, the policy primitives Rotate /
Shear / Translate, the detection geometry ops (csrc/image/geometry/fq_image_detection.cpp) and
tensorpack's crop (csrc/image/color/fq_image_aug_tensorpack.cpp)."""
import numbers
from typing import Any, Optional, Sequence, Tuple, Union

from fastq.ops._base import (BORDERS, INTERPOLATIONS, K_CENTER_CROP, K_HFLIP, K_RANDOM_AFFINE, K_RANDOM_CROP, K_RANDOM_RESIZED_CROP,
                             K_RESIZE, K_VFLIP, MAX_SIDE, Fill, Op, Pair, Range, _K, _fail, _fill, _int_in, _interp,
                             _level, _num, _pair, _prob, _size)

# the public names of this family (fastq.ops re-exports them)
__all__ = ["RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "HorizontalFlip", "VerticalFlip",
           "RandomAffine", "Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "ResizeShortestEdge", "Pad",
           "ScaleJitter", "RandomZoomOut", "KerasRandomZoom", "KerasRandomTranslation", "KerasRandomRotation",
           "RandomIoUCrop", "TensorpackCrop"]


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

    @classmethod
    def _example(cls):
        return cls((10, 20), scale=(0.2, 0.9), ratio=(0.5, 2.0), interpolation="area")


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

    @classmethod
    def _example(cls):
        return cls((12, 14), interpolation="bicubic")


class CenterCrop(Op):
    """Crop ``size`` from the centre: top = round((H - h) / 2) (Python rounding, as
    torchvision); an image smaller than the crop is zero-padded around it."""

    kind = K_CENTER_CROP

    def __init__(self, size: Union[int, Tuple[int, int]]) -> None:
        self.size = _size("CenterCrop", size)

    def fields(self):
        return {"out_h": self.size[0], "out_w": self.size[1]}

    @classmethod
    def _example(cls):
        return cls((5, 7))


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

    @classmethod
    def _example(cls):
        return cls((4, 6), padding=(1, 2, 3, 4), pad_if_needed=True, fill=(5, 6, 7),
                   padding_mode="reflect")


class HorizontalFlip(Op):
    """Mirror left-right with probability ``p`` (drawn: ``u < p``, u ~ U[0, 1))."""

    kind = K_HFLIP

    def __init__(self, p: float = 0.5) -> None:
        self.p = _prob("HorizontalFlip", p)

    def fields(self):
        return {"p": self.p}

    @classmethod
    def _example(cls):
        return cls(0.25)


class VerticalFlip(Op):
    """Mirror top-bottom with probability ``p``."""

    kind = K_VFLIP

    def __init__(self, p: float = 0.5) -> None:
        self.p = _prob("VerticalFlip", p)

    def fields(self):
        return {"p": self.p}

    @classmethod
    def _example(cls):
        return cls(0.75)


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
    symmetric.  ``interpolation``: not "area", not a ``pil_*`` name (those are resizes).
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
        self._interp = _interp(n, interpolation, allow_area=False, resize=False)

    def fields(self):
        sh = self.shear or (0.0, 0.0, 0.0, 0.0)
        return {"degrees": self.degrees, "translate": self.translate or (0.0, 0.0), "scale": self.scale or (1.0, 1.0),
                "shear_x": sh[:2], "shear_y": sh[2:], "border": BORDERS[self.border], "fill": self.fill,
                "interp": self._interp}

    @classmethod
    def _example(cls):
        return cls(10, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(1, 2, 3, 4),
                   border="replicate", fill=9, interpolation="nearest")


# ---- policy primitives (csrc/image/geometry/fq_image_aug_geom.cpp): the conventions of the uint8
# augmentation primitives, fastq/ops/_color.py

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

    @classmethod
    def _example(cls):
        return cls((-30, 10), fill=(1, 2, 3), p=0.5)


class ShearX(_Geom):
    """``F.affine(shear=[degrees(atan(level)), 0], center=[0, 0])``: x' = x + level * y about
    the top-left corner, nearest, ``fill`` outside; level in [-100, 100]."""

    kind = _K["ShearX"]
    _limit = 100

    @classmethod
    def _example(cls):
        return cls(0.3, fill=7, p=0.5)


class ShearY(_Geom):
    """As ShearX along y: y' = y + level * x."""

    kind = _K["ShearY"]
    _limit = 100

    @classmethod
    def _example(cls):
        return cls((-0.3, 0.2), p=0.5)


class TranslateX(_Geom):
    """Shift right by ``int(pixels)`` (truncated toward zero), ``fill`` where uncovered."""

    kind = _K["TranslateX"]
    _limit = MAX_SIDE
    _name = "pixels"

    def __init__(self, pixels: Range, fill: Fill = 0, p: float = 1.0) -> None:
        super().__init__(pixels, fill, p)

    @classmethod
    def _example(cls):
        return cls((-5, 9), fill=4, p=0.5)


class TranslateY(TranslateX):
    """Shift down by ``int(pixels)``."""

    kind = _K["TranslateY"]

    @classmethod
    def _example(cls):
        return cls(-3, p=0.5)


# ---- targets: detection geometry ops (csrc/image/geometry/fq_image_detection.cpp) ------------


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

    @classmethod
    def _example(cls):
        return cls([640, 672, 800], max_size=1333, interpolation="bicubic")


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

    @classmethod
    def _example(cls):
        return cls((1344, 1344), fill=(1, 2, 3))


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

    @classmethod
    def _example(cls):
        return cls((640, 512), scale=(0.5, 1.5), interpolation="nearest", fill=7)


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

    @classmethod
    def _example(cls):
        return cls(fill=(1, 2, 3), side_range=(1.0, 2.5), p=0.7)


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

    @classmethod
    def _example(cls):
        return cls(0.4, 0.9, 0.6, 1.8, sampler_options=(0.0, 0.5, 1.0), trials=7)


# ---- tensorpack: fbresnet_augmentor's crop (csrc/image/color/fq_image_aug_tensorpack.cpp) ----------------

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

    @classmethod
    def _example(cls):
        return cls(64, crop_area_fraction=(0.1, 0.9), aspect_ratio_range=(0.5, 2.0),
                   max_attempts=20, short_edge=80)


# ---- Keras 3 layers (csrc/image/geometry/fq_image_keras_geom.cpp) ----------------------

_KERAS_FILL = {"reflect": 0, "wrap": 1, "constant": 2, "nearest": 3}


def _keras_factor(op, value, name, lo, hi, lo_open=False):
    """Keras's _set_factor: a number f -> (-|f|, |f|), a pair -> sorted; each in [lo, hi]."""
    if _num(value):
        rng = (-abs(float(value)), abs(float(value)))
    else:
        a, b = _pair(op, value, name)
        rng = (min(a, b), max(a, b))
    if not (lo <= rng[0] and rng[1] <= hi) or (lo_open and rng[0] <= lo):
        _fail(op, f"{name} must be a number or a pair within {'(' if lo_open else '['}{lo}, {hi}]", value)
    return rng


class _KerasWarp(Op):
    def _common(self, n, fill_mode, interpolation, fill_value, sampling):
        if sampling not in ("tf", "opencv"):
            _fail(n, "sampling must be 'tf' or 'opencv'", sampling)
        self.sampling = sampling
        if fill_mode not in _KERAS_FILL:
            _fail(n, f"fill_mode must be one of {list(_KERAS_FILL)}", fill_mode)
        if interpolation not in ("bilinear", "nearest"):
            _fail(n, "interpolation must be bilinear or nearest", interpolation)
        if not (_num(fill_value) and float(fill_value).is_integer() and 0 <= fill_value <= 255):
            _fail(n, "fill_value must be an integer in [0, 255] (uint8 pixels)", fill_value)
        self.fill_mode, self.interpolation, self.fill_value = fill_mode, interpolation, float(fill_value)

    def _fields(self, height, width, same):
        return {"height": height, "width": width, "same": float(same), "fill_mode": float(_KERAS_FILL[self.fill_mode]),
                "fill_value": self.fill_value, "interp": float(INTERPOLATIONS[self.interpolation]),
                "exact": 1.0 if self.sampling == "tf" else 0.0}


class KerasRandomZoom(_KerasWarp):
    """Keras 3's ``RandomZoom``: zoom_h = 1 + U(height_factor), zoom_w = 1 + U(width_factor)
    (drawn after it; ``width_factor=None``: zoom_w = zoom_h), float32; the output -> input
    map x_in = zoom_w x + (W - 1) / 2 (1 - zoom_w) (y alike), sampled as TF's
    ImageProjectiveTransformV3 (pixel centres at integers; ``fill_mode`` reflect
    ``dcba|abcd|dcba``, wrap, constant ``fill_value``, nearest; bilinear or nearest).
    A factor f means (-f, f), a pair (min, max), within (-1, 1]; positive zooms out.
    ``sampling``: "tf" (TF's float32 arithmetic: byte-equal to TF's result rounded) or
    "opencv" (bilinear with reflect / nearest / constant by cv::warpAffine on the same matrix,
    coordinates quantized to 1/32 pixel, about 3x faster for rotations; wrap and nearest
    interpolation stay "tf").  docs/ops.md."""

    kind = _K["KerasRandomZoom"]

    def __init__(self, height_factor: Range, width_factor: Optional[Range] = None, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", fill_value: float = 0.0, sampling: str = "tf") -> None:
        n = "KerasRandomZoom"
        self.height_factor = _keras_factor(n, height_factor, "height_factor", -1.0, 1.0, lo_open=True)
        self.width_factor = (None if width_factor is None else
                             _keras_factor(n, width_factor, "width_factor", -1.0, 1.0, lo_open=True))
        self._common(n, fill_mode, interpolation, fill_value, sampling)

    def fields(self):
        w = self.width_factor
        return self._fields(self.height_factor, w if w is not None else (0.0, 0.0), w is None)

    @classmethod
    def _example(cls):
        return cls((-0.2, 0.3), (0.1, 0.4), fill_mode="constant", interpolation="nearest",
                   fill_value=9)


class KerasRandomTranslation(_KerasWarp):
    """Keras 3's ``RandomTranslation``: dy = U(height_factor) * H, then dx = U(width_factor)
    * W (float32, sub-pixel); the output -> input map (x - dx, y - dy), sampled as
    KerasRandomZoom.  Factors within [-1, 1]; f means (-f, f)."""

    kind = _K["KerasRandomTranslation"]

    def __init__(self, height_factor: Range, width_factor: Range, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", fill_value: float = 0.0, sampling: str = "tf") -> None:
        n = "KerasRandomTranslation"
        self.height_factor = _keras_factor(n, height_factor, "height_factor", -1.0, 1.0)
        self.width_factor = _keras_factor(n, width_factor, "width_factor", -1.0, 1.0)
        self._common(n, fill_mode, interpolation, fill_value, sampling)

    def fields(self):
        return self._fields(self.height_factor, self.width_factor, False)

    @classmethod
    def _example(cls):
        return cls((-0.1, 0.2), 0.3, fill_mode="wrap")


class KerasRandomRotation(_KerasWarp):
    """Keras 3's ``RandomRotation``: angle = U(factor) * 360 degrees (float32, counter-clockwise
    positive); Keras's float32 output -> input matrix about ((W-1)/2, (H-1)/2), sampled as
    KerasRandomZoom.  f means (-f, f)."""

    kind = _K["KerasRandomRotation"]

    def __init__(self, factor: Range, fill_mode: str = "reflect", interpolation: str = "bilinear",
                 fill_value: float = 0.0, sampling: str = "tf") -> None:
        n = "KerasRandomRotation"
        self.factor = _keras_factor(n, factor, "factor", -1000.0, 1000.0)
        self._common(n, fill_mode, interpolation, fill_value, sampling)

    def fields(self):
        return self._fields(self.factor, (0.0, 0.0), False)

    @classmethod
    def _example(cls):
        return cls((-0.05, 0.1), fill_mode="nearest")
