"""Erasing and noise: Cutout (TF Model Garden), RandomErasing (on the output values;
csrc/image/color/fq_image_aug_erase.cpp), GaussianBlur and GaussianNoise
(csrc/image/color/fq_image_aug_filter.cpp, fq_image_aug_model_garden.cpp)."""
import numbers
from typing import Any, Sequence, Tuple, Union

from fastq.ops._base import MAX_SIDE, Fill, Op, Pair, Range, _K, _fail, _fill, _int_in, _level, _num, _pair, _prob

# the public names of this family (fastq.ops re-exports them)
__all__ = ["GaussianBlur", "Cutout", "RandomErasing", "GaussianNoise"]


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

    @classmethod
    def _example(cls):
        return cls(16, fill=(1, 2, 3), p=0.5)


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

    @classmethod
    def _example(cls):
        return cls((5, 3), sigma=(0.5, 1.5), p=0.5)


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

    @classmethod
    def _example(cls):
        return cls(0.7, scale=(0.1, 0.2), ratio=(0.5, 2.0), value=(0.5, -1.0, 2.0))


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

    @classmethod
    def _example(cls):
        return cls(0.01, 0.2, clip=False, p=0.5)
