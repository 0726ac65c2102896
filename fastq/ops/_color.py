"""Colour (pixel value) ops: Grayscale, ColorJitter, Normalize (and its table), the uint8
augmentation primitives (csrc/image/fq_image_aug*.cpp), Gamma, PCA Lighting and
tensorpack's colour stage."""
import numbers
from typing import Optional, Sequence, Union

import numpy as np

from fastq.ops._base import (IMAGENET_MEAN, IMAGENET_STD, K_COLOR_JITTER, K_GRAYSCALE, K_NORMALIZE, Op, Pair, Range, _K,
                             _fail, _level, _num, _pair, _prob)

# the public names of this family (fastq.ops re-exports them)
__all__ = ["ColorJitter", "Grayscale", "Normalize", "Gamma", "Lighting", "LIGHTING_EIGVAL", "LIGHTING_EIGVEC",
           "Invert", "AutoContrast", "Equalize", "Posterize", "Solarize", "SolarizeAdd", "Brightness", "Color",
           "Contrast", "Sharpness", "KerasRandomContrast", "KerasRandomBrightness", "TensorpackColor",
           "TP_EIGVAL_BGR", "TP_EIGVEC_BGR", "RandomChannelPermutation"]


class Grayscale(Op):
    """With probability ``p``: gray = OpenCV RGB2GRAY (0.299 R + 0.587 G + 0.114 B,
    rounded), written to all 3 channels (``channels=3``); no-op for 1-channel output."""

    kind = K_GRAYSCALE

    def __init__(self, p: float = 1.0) -> None:
        self.p = _prob("Grayscale", p)

    def fields(self):
        return {"p": self.p}

    @classmethod
    def _example(cls):
        return cls(0.5)


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

    @classmethod
    def _example(cls):
        return cls(brightness=0.4, contrast=(0.5, 1.5), saturation=0.2, hue=0.1)


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

    @classmethod
    def _example(cls):
        return cls(mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6))


def normalize_table(normalize: Optional["Normalize"] = None) -> np.ndarray:
    """The float32 ``(3, 256)`` table fastq's output write maps uint8 values through:
    ``(v / 255 - mean[c]) / std[c]`` with `normalize`'s mean/std (as scaled by its
    max_pixel_value), or ``v / 255`` without one, computed in float64 and rounded once
    to float32 exactly as csrc builds it.  float16 / bfloat16 outputs are this table
    rounded to nearest even.  Device-side conversions (fastq.torch, fastq.jax,
    fastq.tf.ops.normalize) gather from it, so they equal the host's output bit for bit."""
    v = np.arange(256, dtype=np.float64) / 255.0
    if normalize is None:
        return np.stack([v.astype(np.float32)] * 3)
    f = normalize.fields()
    return np.stack([((v - f["mean"][c]) / f["std"][c]).astype(np.float32) for c in range(3)])


# ---- uint8 augmentation primitives (csrc/image/color/fq_image_aug.cpp) -----------------------
#
# torchvision.transforms.v2.functional semantics on uint8 tensors (SolarizeAdd: TF Model
# Garden), each applied with probability ``p`` (``u < p``; ``u`` is drawn even when p = 1).
# A level given as a number is used as is; a ``(min, max)`` pair is drawn uniformly per
# sample (only when the op is applied).  The level used is in the explain record
# (``magnitude``).  Exact definitions: docs/ops.md "Augmentation primitives".


class _Prob(Op):
    def __init__(self, p: float = 1.0) -> None:
        self.p = _prob(type(self).__name__, p)

    def fields(self):
        return {"p": self.p}


class Invert(_Prob):
    """``255 - x`` with probability ``p``."""

    kind = _K["Invert"]

    @classmethod
    def _example(cls):
        return cls(0.5)


class AutoContrast(_Prob):
    """Per channel: stretch [min, max] to [0, 255]: ``trunc((x - min) / ((max - min) / 255))``
    in float32 (unchanged when max == min)."""

    kind = _K["AutoContrast"]

    @classmethod
    def _example(cls):
        return cls(0.25)


class Equalize(_Prob):
    """Per-channel histogram equalisation, PIL's / torchvision v2's integer algorithm."""

    kind = _K["Equalize"]

    @classmethod
    def _example(cls):
        return cls(0.75)


class RandomChannelPermutation(_Prob):
    """torchvision v2 ``RandomChannelPermutation``: the 3 channels in a random order, drawn per
    sample (Fisher-Yates over the sample's stream; every permutation has probability 1/6),
    applied with probability ``p`` (torchvision has no ``p``: the default 1).  Output channel
    ``c`` is input channel ``perm[c]``; explain: ``magnitude`` = ``100 perm[0] + 10 perm[1] +
    perm[2]``.  Targets: unchanged (pixel-only).  A 1-channel image is left as it is."""

    kind = _K["RandomChannelPermutation"]

    @classmethod
    def _example(cls):
        return cls(p=0.5)


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

    @classmethod
    def _example(cls):
        return cls(3, p=0.5)


class Solarize(Op):
    """``255 - x`` where ``x >= threshold`` (float compare), else ``x``; threshold in [0, 256]
    (a number, or a (min, max) range drawn per sample)."""

    kind = _K["Solarize"]

    def __init__(self, threshold: Range, p: float = 1.0) -> None:
        self.threshold = _level("Solarize", threshold, "threshold", 0, 256)
        self.p = _prob("Solarize", p)

    def fields(self):
        return {"level": self.threshold, "p": self.p}

    @classmethod
    def _example(cls):
        return cls((10, 200), p=0.5)


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

    @classmethod
    def _example(cls):
        return cls(-30, 99, p=0.5)


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

    @classmethod
    def _example(cls):
        return cls((0.5, 1.5), p=0.5)


class Color(_Factor):
    """Saturation blend with the gray image ``floor(0.2989 R + 0.587 G + 0.114 B)``:
    ``trunc(clamp(f x + (1 - f) gray))`` (``adjust_saturation``; no-op on 1 channel)."""

    kind = _K["Color"]

    @classmethod
    def _example(cls):
        return cls(0.4, p=0.5)


class Contrast(_Factor):
    """Blend with the mean of the floored gray image: ``trunc(clamp(f x + (1 - f) mean))``
    (``adjust_contrast``)."""

    kind = _K["Contrast"]

    @classmethod
    def _example(cls):
        return cls((0.2, 1.2), p=0.5)


class Sharpness(_Factor):
    """Blend with the 3x3 smoothing (1s around, 5 in the centre, / 13, rounded) on the
    interior; the 1-pixel border is kept (``adjust_sharpness``)."""

    kind = _K["Sharpness"]

    @classmethod
    def _example(cls):
        return cls(1.9, p=0.5)


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

    @classmethod
    def _example(cls):
        return cls((0.5, 2.0), gain=1.5, p=0.5)


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

    @classmethod
    def _example(cls):
        return cls(0.2, p=0.5)


# ---- tensorpack: fbresnet_augmentor's colour stage (csrc/image/color/fq_image_aug_tensorpack.cpp) --------

# fbresnet_augmentor's Lighting constants, for the BGR images tensorpack sees: LIGHTING_EIGVAL
# reversed and LIGHTING_EIGVEC[::-1, ::-1]
TP_EIGVAL_BGR = tuple(LIGHTING_EIGVAL[::-1])
TP_EIGVEC_BGR = tuple(tuple(row[::-1]) for row in LIGHTING_EIGVEC[::-1])


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

    @classmethod
    def _example(cls):
        return cls(brightness=(0.7, 1.2), contrast=(0.5, 1.5), saturation=0.3,
                   lighting_std=0.2, bgr=False)


# ---- Keras 3 layers (csrc/image/color/fq_image_keras_color.cpp) -------------------------

def _keras_value_range(op, value_range):
    try:
        lo, hi = sorted(value_range)
    except (TypeError, ValueError):
        raise ValueError(f"{op}: value_range must be a (min, max) pair, got {value_range!r}") from None
    if not (_num(lo) and _num(hi) and float(lo).is_integer() and float(hi).is_integer() and 0 <= lo < hi <= 255):
        raise ValueError(f"{op}: value_range must be integers 0 <= min < max <= 255 (uint8 pixels), got {value_range!r}")
    return float(lo), float(hi)


def _keras_set_factor(op, factor, lo, hi):
    """Keras's BaseImagePreprocessingLayer._set_factor with _FACTOR_BOUNDS (lo, hi)."""
    if _num(factor):
        if not lo <= factor <= hi:
            raise ValueError(f"{op}: factor must be in [{lo}, {hi}], got {factor!r}")
        f = abs(float(factor))
        return max(-f, float(lo)), f
    try:
        a, b = sorted(float(v) for v in factor)
    except (TypeError, ValueError):
        raise ValueError(f"{op}: factor must be a number or a pair, got {factor!r}") from None
    if a > hi or b < lo or not (_num(a) and _num(b)):
        raise ValueError(f"{op}: factor must be within [{lo}, {hi}], got {factor!r}")
    return a, b


class KerasRandomContrast(Op):
    """Keras 3's ``RandomContrast``: per image f ~ U(1 - lower, 1 + upper) (float32), where
    (lower, upper) is Keras's ``factor`` (a number f gives (0, f): Keras's bounds are
    [0, 1]); each channel c blended to its own mean m_c over the image: ``clip((x - m_c) f +
    m_c, value_range)`` in float32, rounded half to even to uint8."""

    kind = _K["KerasRandomContrast"]

    def __init__(self, factor: Range, value_range: Pair = (0, 255)) -> None:
        n = "KerasRandomContrast"
        self.factor = _keras_set_factor(n, factor, 0, 1)
        self.value_range = _keras_value_range(n, value_range)

    def fields(self):
        return {"factor": (1.0 - self.factor[0], 1.0 + self.factor[1]), "value_range": self.value_range}

    @classmethod
    def _example(cls):
        return cls((0.1, 0.4), value_range=(5, 250))


class KerasRandomBrightness(Op):
    """Keras 3's ``RandomBrightness``: per image delta = U(factor) * (max - min of
    ``value_range``) (float32; a number f gives (-f, f), within [-1, 1]) added to every
    pixel, ``clip(x + delta, value_range)``, rounded half to even to uint8."""

    kind = _K["KerasRandomBrightness"]

    def __init__(self, factor: Range, value_range: Pair = (0, 255)) -> None:
        n = "KerasRandomBrightness"
        self.factor = _keras_set_factor(n, factor, -1, 1)
        self.value_range = _keras_value_range(n, value_range)

    def fields(self):
        return {"factor": self.factor, "value_range": self.value_range}

    @classmethod
    def _example(cls):
        return cls(0.2)
