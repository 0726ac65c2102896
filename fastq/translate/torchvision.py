"""torchvision (v1 ``torchvision.transforms`` and v2 ``torchvision.transforms.v2``) pipelines
translated to fastq ops (docs/migrate.md, "PyTorch: torchvision and timm").

The walker follows the image's *type state* through the chain: a PIL image (what
``ImageFolder``'s loader gives), a uint8 CHW tensor (``PILToTensor``, ``ToImage``), or a
float CHW tensor whose values are ``a[c] * x + b[c]`` of the uint8 pixel ``x`` (``ToTensor``,
``ToDtype(float32, scale=...)``, ``Normalize``).  Native ops run on uint8 pixels, so a pixel
step is translated only in a uint8 state (PIL or uint8 tensor); in the float state only
the value map (folded into one ``ops.Normalize``) and ``RandomErasing`` (which fastq runs
on the output values) translate.  The final state gives the Pipeline's output: uint8 HWC
for PIL, uint8 NCHW for a uint8 tensor, float32 NCHW for a float tensor.

Every argument value is checked; a value fastq cannot run exactly makes the step (and
every later one) run in Python on the native prefix's output (warning once, or
``TranslationError`` with ``strict=True``).
"""
import math
import numbers
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from fastq import ops
from fastq.ops import _base
from fastq.translate._core import NotTranslatable, Step, Translation, split_at_first_python

__all__ = ["translate", "resize_interpolation", "flatten"]

_IDENTITY = ((1 / 255,) * 3, (0.0,) * 3)


class State:
    """The type of the image between two steps.  ``kind``: "pil", "u8" (uint8 CHW tensor),
    "numpy" (uint8 CHW numpy array, timm's ToNumpy) or "float" (float32 CHW tensor);
    ``affine``: in the float state, the per-channel ``(a, b)`` with value = a x + b;
    ``erased``: a RandomErasing has been placed (nothing native may follow it)."""

    __slots__ = ("kind", "affine", "erased", "affine_step", "step")

    def __init__(self, step: Optional[Callable[[Any, "State"], Tuple[List[Any], str]]] = None) -> None:
        self.kind = "pil"
        self.affine = _IDENTITY
        self.erased = False
        self.affine_step = -1  # the step that last changed the value map
        # the step translator (children of compositions go through it too): this module's
        # translate_step, or fastq.translate.timm's, which adds timm's classes
        self.step = step or translate_step

    def copy(self) -> "State":
        s = State(self.step)
        s.kind, s.affine, s.erased, s.affine_step = self.kind, self.affine, self.erased, self.affine_step
        return s

    @property
    def pixels(self) -> bool:
        return self.kind in ("pil", "u8", "numpy") and not self.erased

    def options(self) -> dict:
        if self.kind == "pil":
            return {"dtype": "uint8", "layout": "NHWC", "dct_scaling": False}
        if self.kind in ("u8", "numpy"):
            return {"dtype": "uint8", "layout": "NCHW", "dct_scaling": False}
        return {"dtype": "float32", "layout": "NCHW", "dct_scaling": False}


def flatten(transform: Any) -> List[Any]:
    """The steps of a (nested) torchvision v1/v2 ``Compose``, in order; a bare transform is
    a one-step list."""
    out: List[Any] = []
    ts = getattr(transform, "transforms", None)
    if type(transform).__name__ == "Compose" and isinstance(ts, (list, tuple)):
        for t in ts:
            out.extend(flatten(t))
    else:
        out.append(transform)
    return out


def _mode(m: Any) -> str:
    """An InterpolationMode (or its string / PIL int) as torchvision's name."""
    v = getattr(m, "value", m)
    if isinstance(v, numbers.Integral):
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.functional import _interpolation_modes_from_int
        v = _interpolation_modes_from_int(int(v)).value if not isinstance(m, InterpolationMode) else m.value
    return str(v).lower()


def resize_interpolation(mode: Any, antialias: Any, kind: str) -> str:
    """The fastq interpolation name for torchvision's resize of an image in state `kind`
    ("pil", or "u8" for a uint8 tensor) with `mode` and `antialias`; raises NotTranslatable
    for a value fastq cannot run.  This is the one place that decides.

    A PIL image is resampled by Pillow (antialiased, whatever ``antialias`` says): where
    fastq has Pillow's resize (the ``pil_*`` names in ``fastq.ops._base.INTERPOLATIONS``)
    every mode maps to its ``pil_*`` name, bit-exact; without them bilinear and bicubic map
    to OpenCV's (no antialiasing: docs/migrate.md gives the measured PSNR) and the other
    modes are refused.  A uint8 tensor with ``antialias=True`` (bilinear, bicubic) is
    resampled by torch with Pillow's scheme (within one level of it): ``pil_*`` again where
    available; ``antialias=False`` is OpenCV's plain ``bilinear`` / ``bicubic``; torch's
    legacy ``nearest`` is OpenCV's ``nearest``."""
    m = _mode(mode)
    have = _base.INTERPOLATIONS
    if kind == "pil":
        if antialias is False:
            raise NotTranslatable("antialias=False on a PIL image (Pillow always antialiases; torchvision ignores "
                                  "the argument for PIL images)")
        name = "nearest" if m == "nearest-exact" else m  # torchvision gives Pillow NEAREST for both
        if "pil_" + name in have:
            return "pil_" + name
        if name in ("bilinear", "bicubic"):
            return name
        if name == "nearest":
            raise NotTranslatable("interpolation=NEAREST on a PIL image (Pillow samples pixel centres; this "
                                  "build's nearest reads the top-left source pixel, as torch's tensor 'nearest')")
        raise NotTranslatable(f"interpolation={m!r} on a PIL image (this build has no Pillow-exact {m})")
    if m == "nearest":
        return "nearest"
    if m not in ("bilinear", "bicubic"):
        raise NotTranslatable(f"interpolation={m!r} on a tensor (fastq resizes tensors with nearest, bilinear or "
                              f"bicubic)")
    if antialias is False:
        return m
    return "pil_" + m if "pil_" + m in have else m


def _size_pair(size: Any, what: str = "size") -> Tuple[int, int]:
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    s = list(size)
    if len(s) == 1:
        return int(s[0]), int(s[0])
    if len(s) == 2:
        return int(s[0]), int(s[1])
    raise NotTranslatable(f"{what}={size!r}")


def _fill(fill: Any, kind: str = "u8") -> Any:
    """A torchvision fill (None, a number, a sequence) as fastq's (0..255 numbers)."""
    if fill is None:
        return 0
    if isinstance(fill, dict):
        raise NotTranslatable(f"fill={fill!r} (a per-type dict)")
    vals = [fill] if isinstance(fill, numbers.Real) else list(fill)
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or not all(isinstance(v, numbers.Real) and 0 <= float(v) <= 255 for v in vals):
        raise NotTranslatable(f"fill={fill!r} (fastq fills with 1 or 3 values in 0..255)")
    if kind == "pil" and not all(float(v).is_integer() for v in vals):
        raise NotTranslatable(f"fill={fill!r} (PIL truncates a fractional fill)")
    return tuple(float(v) for v in vals)


def _range(v: Any, center: float = 1.0) -> Optional[Tuple[float, float]]:
    if v is None:
        return None
    if isinstance(v, numbers.Real):
        return (max(0.0, center - float(v)), center + float(v))
    lo, hi = v
    return float(lo), float(hi)


def _need_pixels(state: State, name: str) -> None:
    if state.erased:
        raise NotTranslatable(f"{name} after RandomErasing (fastq erases in the final write, after every op)")
    if state.kind == "float":
        raise NotTranslatable(f"{name} on a float tensor (after ToTensor/ToDtype): fastq runs pixel ops on uint8, "
                              f"torchvision on the float values without rounding; move it before ToTensor")


# ---- one step --------------------------------------------------------------------------------

Handler = Callable[[Any, State], Tuple[List[Any], str]]


def _t_resize(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "Resize")
    if getattr(t, "max_size", None) is not None:
        raise NotTranslatable(f"max_size={t.max_size} (fastq's Resize has no cap on the longer side)")
    size = t.size
    if size is None:
        raise NotTranslatable("size=None")
    interp = resize_interpolation(t.interpolation, getattr(t, "antialias", True), st.kind)
    if isinstance(size, numbers.Integral) or len(size) == 1:
        s = int(size) if isinstance(size, numbers.Integral) else int(size[0])
        return [ops.Resize(shorter_side=s, interpolation=interp)], ""
    return [ops.Resize(_size_pair(size), interpolation=interp)], ""


def _t_center_crop(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "CenterCrop")
    return [ops.CenterCrop(_size_pair(t.size))], ""


def _t_rrc(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomResizedCrop")
    interp = resize_interpolation(t.interpolation, getattr(t, "antialias", True), st.kind)
    return [ops.RandomResizedCrop(_size_pair(t.size), scale=tuple(t.scale), ratio=tuple(t.ratio),
                                  interpolation=interp)], ""


def _t_random_crop(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomCrop")
    pad = t.padding
    if pad is None:
        pad = 0
    elif not isinstance(pad, numbers.Integral):
        pad = list(pad)
        if len(pad) == 1:
            pad = int(pad[0])
        elif len(pad) == 4 and ".v2." in type(t).__module__:
            pad = [pad[0], pad[2], pad[1], pad[3]]  # v2 keeps (left, right, top, bottom)
    mode = str(t.padding_mode)
    if mode not in ("constant", "edge", "reflect", "symmetric"):
        raise NotTranslatable(f"padding_mode={mode!r}")
    return [ops.RandomCrop(_size_pair(t.size), padding=pad, pad_if_needed=bool(t.pad_if_needed),
                           fill=_fill(t.fill, st.kind), padding_mode=mode)], ""


def _t_hflip(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomHorizontalFlip")
    return [ops.HorizontalFlip(float(t.p))], ""


def _t_vflip(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomVerticalFlip")
    return [ops.VerticalFlip(float(t.p))], ""


def _t_jitter(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "ColorJitter")
    b, c, s = _range(t.brightness), _range(t.contrast), _range(t.saturation)
    h = _range(t.hue, 0.0)
    if h is not None and isinstance(t.hue, numbers.Real):
        h = (-float(t.hue), float(t.hue))
    return [ops.ColorJitter(brightness=b or 0, contrast=c or 0, saturation=s or 0, hue=h or 0)], ""


def _t_blur(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "GaussianBlur")
    kx, ky = (int(k) for k in t.kernel_size)
    lo, hi = (float(x) for x in t.sigma)
    return [ops.GaussianBlur((kx, ky), sigma=(lo, hi) if lo != hi else lo)], ""


def _check_center_nearest(t: Any, st: State, name: str) -> None:
    if getattr(t, "center", None) is not None:
        raise NotTranslatable(f"center={t.center} (fastq rotates about the image centre)")
    if _mode(t.interpolation) != "nearest":
        raise NotTranslatable(f"interpolation={_mode(t.interpolation)!r} (fastq's {name} samples with nearest)")


def _t_rotation(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomRotation")
    _check_center_nearest(t, st, "Rotate")
    if t.expand:
        raise NotTranslatable("expand=True (fastq keeps the image size)")
    lo, hi = (float(d) for d in t.degrees)
    return [ops.Rotate((lo, hi), fill=_fill(t.fill, st.kind))], ""


def _t_affine(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomAffine")
    if getattr(t, "center", None) is not None:
        raise NotTranslatable(f"center={t.center} (fastq's affine map is about the image centre)")
    if t.shear is not None and any(float(v) != 0 for v in t.shear):
        raise NotTranslatable(f"shear={list(t.shear)} (fastq's shear matrix is not torchvision's)")
    m = _mode(t.interpolation)
    if m not in ("nearest", "bilinear"):
        raise NotTranslatable(f"interpolation={m!r}")
    d_lo, d_hi = (float(d) for d in t.degrees)
    return [ops.RandomAffine((d_lo, d_hi),
                             translate=None if t.translate is None else tuple(t.translate),
                             scale=None if t.scale is None else tuple(t.scale),
                             fill=_fill(t.fill, st.kind), interpolation=m)], ""


def _t_grayscale(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "Grayscale")
    n = getattr(t, "num_output_channels", 3)
    if n != 3:
        raise NotTranslatable(f"num_output_channels={n} (fastq's Grayscale keeps 3 channels)")
    return [ops.Grayscale(1.0)], ""


def _t_random_grayscale(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomGrayscale")
    return [ops.Grayscale(float(t.p))], ""


def _t_posterize(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomPosterize")
    return [ops.Posterize(int(t.bits), p=float(t.p))], ""


def _t_solarize(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomSolarize")
    return [ops.Solarize(float(t.threshold), p=float(t.p))], ""


def _t_equalize(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomEqualize")
    return [ops.Equalize(p=float(t.p))], ""


def _t_autocontrast(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomAutocontrast")
    return [ops.AutoContrast(p=float(t.p))], ""


def _t_invert(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomInvert")
    return [ops.Invert(p=float(t.p))], ""


def _t_channel_permutation(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomChannelPermutation")
    return [ops.RandomChannelPermutation()], ""


def _t_sharpness(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomAdjustSharpness")
    return [ops.Sharpness(float(t.sharpness_factor), p=float(t.p))], ""


def _policy_common(t: Any, st: State, name: str) -> Any:
    _need_pixels(st, name)
    if _mode(t.interpolation) != "nearest":
        raise NotTranslatable(f"interpolation={_mode(t.interpolation)!r} (fastq's policies sample with nearest)")
    return _fill(t.fill, st.kind)


def _t_randaugment(t: Any, st: State) -> Tuple[List[Any], str]:
    fill = _policy_common(t, st, "RandAugment")
    return [ops.RandAugment(num_ops=int(t.num_ops), magnitude=int(t.magnitude),
                            num_magnitude_bins=int(t.num_magnitude_bins), fill=fill)], ""


def _t_trivial(t: Any, st: State) -> Tuple[List[Any], str]:
    fill = _policy_common(t, st, "TrivialAugmentWide")
    return [ops.TrivialAugmentWide(num_magnitude_bins=int(t.num_magnitude_bins), fill=fill)], ""


def _t_autoaugment(t: Any, st: State) -> Tuple[List[Any], str]:
    fill = _policy_common(t, st, "AutoAugment")
    pol = getattr(t.policy, "value", t.policy)
    if str(pol).lower() != "imagenet":
        raise NotTranslatable(f"policy={t.policy} (fastq has torchvision's IMAGENET policy only)")
    return [ops.AutoAugment("imagenet", fill=fill)], ""


def _to_float(st: State, name: str, scale: bool) -> str:
    if st.kind == "float":
        return "(already float)"
    if st.erased:
        raise NotTranslatable(f"{name} after RandomErasing")
    st.kind = "float"
    st.affine = _IDENTITY if scale else ((1.0,) * 3, (0.0,) * 3)
    return "output float32 NCHW, x / 255" if scale else "output float32 NCHW, x (0..255)"


def _t_to_tensor(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind == "u8" and type(t).__name__ == "ToTensor" and type(t).__module__.startswith("torchvision"):
        raise NotTranslatable("ToTensor on a uint8 tensor (torchvision's ToTensor takes PIL images or ndarrays)")
    if st.kind == "u8":  # timm's MaybeToTensor passes a tensor through unchanged
        return [], "(a tensor passes unchanged)"
    return [], _to_float(st, "ToTensor", True)


def _t_pil_to_tensor(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind in ("u8", "numpy"):
        return [], "(already a tensor)"
    if st.kind != "pil":
        raise NotTranslatable(f"{type(t).__name__} on a float tensor")
    st.kind = "u8"
    return [], "output uint8 NCHW"


def _float_dtype(dtype: Any, name: str) -> None:
    import torch
    if dtype is not torch.float32:
        raise NotTranslatable(f"dtype={dtype} (fastq converts to float32 exactly; torchvision computes {dtype} "
                              f"in that type)")


def _t_to_dtype(t: Any, st: State) -> Tuple[List[Any], str]:
    import torch
    dtype = t.dtype
    if isinstance(dtype, dict):
        from torchvision import tv_tensors
        img = [v for k, v in dtype.items() if k in (tv_tensors.Image, torch.Tensor)]
        if len(img) != 1:
            raise NotTranslatable(f"dtype={dtype} (no single image dtype)")
        dtype = img[0]
    if dtype is None:
        return [], "(no change)"
    if dtype is torch.uint8:
        if st.kind in ("u8", "pil", "numpy"):
            return [], "(already uint8)"
        raise NotTranslatable("ToDtype(uint8) on a float tensor")
    _float_dtype(dtype, "ToDtype")
    if st.kind == "float":
        return [], "(already float32)"
    if st.kind == "pil":
        raise NotTranslatable("ToDtype on a PIL image (torchvision passes it through unchanged)")
    return [], _to_float(st, "ToDtype", bool(getattr(t, "scale", False)))


def _t_convert_dtype(t: Any, st: State) -> Tuple[List[Any], str]:
    import torch
    if t.dtype is torch.uint8 and st.kind == "u8":
        return [], "(already uint8)"
    _float_dtype(t.dtype, "ConvertImageDtype")
    if st.kind == "float":
        return [], "(already float32)"
    if st.kind != "u8":
        raise NotTranslatable("ConvertImageDtype on a PIL image")
    return [], _to_float(st, "ConvertImageDtype", True)


def _t_normalize(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind != "float":
        raise NotTranslatable("Normalize on a uint8 image (torchvision raises: it needs a float tensor)")
    if st.erased:
        raise NotTranslatable("Normalize after RandomErasing (fastq writes the erased box last)")
    mean = [float(v) for v in np.asarray(t.mean, dtype=np.float64).reshape(-1)]
    std = [float(v) for v in np.asarray(t.std, dtype=np.float64).reshape(-1)]
    mean = mean * 3 if len(mean) == 1 else mean
    std = std * 3 if len(std) == 1 else std
    if len(mean) != 3 or len(std) != 3:
        raise NotTranslatable(f"mean/std of {len(mean)}/{len(std)} values (fastq writes 3 channels)")
    if not all(s > 0 for s in std):
        raise NotTranslatable(f"std={std} (fastq needs positive std)")
    a, b = st.affine
    st.affine = ((a[0] / std[0], a[1] / std[1], a[2] / std[2]),
                 ((b[0] - mean[0]) / std[0], (b[1] - mean[1]) / std[1], (b[2] - mean[2]) / std[2]))
    return [], f"(x - {mean}) / {std}, folded into the output write"


def _erasing_value(value: Any, st: State) -> Any:
    if isinstance(value, str):
        if value != "random":
            raise NotTranslatable(f"value={value!r}")
        if st.kind != "float":
            raise NotTranslatable("value='random' on a uint8 image")
        return "random"
    vals = [value] if isinstance(value, numbers.Real) else list(value)
    if st.kind != "float" and not all(float(v).is_integer() and 0 <= float(v) <= 255 for v in vals):
        raise NotTranslatable(f"value={value!r} on a uint8 image (torchvision casts it to uint8)")
    return tuple(float(v) for v in vals) if len(vals) > 1 else float(vals[0])


def _t_erasing(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.erased:
        raise NotTranslatable("a second RandomErasing (fastq erases one box, in the final write)")
    if st.kind == "pil":
        raise NotTranslatable("RandomErasing on a PIL image (torchvision needs a tensor)")
    val = t.value
    if val is None and ".v2." in type(t).__module__:
        val = "random"  # v2 keeps value="random" as None
    if isinstance(val, (list, tuple)) and len(val) == 1:
        val = val[0]
    value = _erasing_value(val, st)
    st.erased = True
    return [ops.RandomErasing(p=float(t.p), scale=tuple(t.scale), ratio=tuple(t.ratio), value=value)], ""


def _t_identity(t: Any, st: State) -> Tuple[List[Any], str]:
    return [], "(nothing to do)"


def _t_to_pure_tensor(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind == "pil":
        return [], "(a PIL image passes unchanged)"
    return [], "(plain tensor)"


def _compose_children(t: Any, st: State, name: str) -> List[List[Any]]:
    out = []
    for child in t.transforms:
        sub = st.copy()
        child_ops: List[Any] = []
        for c in flatten(child):
            o, _ = sub.step(c, sub)
            child_ops.extend(o)
        if sub.kind != st.kind or sub.affine != st.affine or sub.erased != st.erased:
            raise NotTranslatable(f"{type(child).__name__} inside {name} changes the image type or values")
        if any(isinstance(o, ops.RandomErasing) for o in child_ops):
            raise NotTranslatable(f"RandomErasing inside {name}")
        out.append(child_ops)
    return out


def _t_random_apply(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomApply")
    kids = [o for k in _compose_children(t, st, "RandomApply") for o in k]
    if not kids:
        return [], "(nothing to do)"
    return [ops.RandomApply(kids, p=float(t.p))], ""


def _single(kids: List[List[Any]], name: str) -> List[Any]:
    out = []
    for k in kids:
        if len(k) != 1:
            raise NotTranslatable(f"a child of {name} that is {len(k)} native ops (fastq's {name} takes one op "
                                  f"per alternative)")
        out.append(k[0])
    return out


def _t_random_choice(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomChoice")
    kids = _single(_compose_children(t, st, "RandomChoice"), "RandomChoice")
    p = getattr(t, "p", None)
    return [ops.RandomChoice(kids, p=None if p is None else [float(x) for x in p])], ""


def _t_random_order(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomOrder")
    kids = _single(_compose_children(t, st, "RandomOrder"), "RandomOrder")
    return [ops.RandomOrder(kids)], ""


_HANDLERS = {
    "Resize": _t_resize, "CenterCrop": _t_center_crop, "RandomResizedCrop": _t_rrc, "RandomCrop": _t_random_crop,
    "RandomHorizontalFlip": _t_hflip, "RandomVerticalFlip": _t_vflip, "ColorJitter": _t_jitter,
    "GaussianBlur": _t_blur, "RandomAffine": _t_affine, "RandomRotation": _t_rotation, "Grayscale": _t_grayscale,
    "RandomGrayscale": _t_random_grayscale, "RandomPosterize": _t_posterize, "RandomSolarize": _t_solarize,
    "RandomEqualize": _t_equalize, "RandomAutocontrast": _t_autocontrast, "RandomInvert": _t_invert,
    "RandomChannelPermutation": _t_channel_permutation, "RandomAdjustSharpness": _t_sharpness, "RandomErasing": _t_erasing, "RandAugment": _t_randaugment,
    "TrivialAugmentWide": _t_trivial, "AutoAugment": _t_autoaugment, "ToTensor": _t_to_tensor,
    "PILToTensor": _t_pil_to_tensor, "ToImage": _t_pil_to_tensor, "ToImageTensor": _t_pil_to_tensor,
    "ToDtype": _t_to_dtype, "ConvertImageDtype": _t_convert_dtype, "Normalize": _t_normalize,
    "RandomApply": _t_random_apply, "RandomChoice": _t_random_choice, "RandomOrder": _t_random_order,
    "Identity": _t_identity, "ToPureTensor": _t_to_pure_tensor,
}


def translate_step(t: Any, st: State) -> Tuple[List[Any], str]:
    """(native ops, what the step became in words) for one step in state `st` (updated in
    place); NotTranslatable when it has no exact native equivalent."""
    mod = type(t).__module__ or ""
    name = type(t).__name__
    if mod.startswith("timm."):
        raise NotTranslatable(f"{name} is timm's: translate with fastq.torch.translate (fastq.translate.timm)")
    if not mod.startswith("torchvision.transforms") or name not in _HANDLERS:
        raise NotTranslatable(f"{name} from {mod} has no native equivalent")
    return _HANDLERS[name](t, st)


# ---- the whole pipeline ----------------------------------------------------------------------

def build(transform: Any, framework: str, strict: bool,
          step: Optional[Callable[[Any, State], Tuple[List[Any], str]]] = None) -> Translation:
    """The Translation of a torchvision transform; ``step`` translates one step (default
    :func:`translate_step`; fastq.translate.timm passes its own, which adds timm's classes)."""
    steps_in = flatten(transform) if transform is not None else []
    st = State(step)
    rows: List[Any] = []  # (original, ops, becomes, python, reason)
    python_at: Optional[int] = None
    split_state: Optional[State] = None
    for i, t in enumerate(steps_in):
        if python_at is None:
            before = st.copy()
            try:
                o, becomes = st.step(t, st)
            except NotTranslatable as e:
                st = before
                python_at, split_state = i, before
                rows.append([t, [], "", True, e.reason])
                continue
            except (ValueError, TypeError) as e:  # an argument fastq's op refuses
                st = before
                python_at, split_state = i, before
                rows.append([t, [], "", True, f"{type(e).__name__}: {e}"])
                continue
            if st.affine != before.affine:
                st.affine_step = i
            if any(isinstance(x, ops.RandomErasing) for x in o):
                o = _normalize_ops(st) + o  # Normalize must come before the erasing
                st.affine_step = -2  # placed
            rows.append([t, o, becomes, False, ""])
        else:
            rows.append([t, [], "", True, "after an untranslated step"])
    final = split_state if split_state is not None else st
    if final.affine_step >= 0:  # the value map goes onto the step that last changed it
        rows[final.affine_step][1] = _normalize_ops(final)
    steps = [Step(r[0], ops=r[1], becomes=r[2] if not r[1] else "", python=r[3], reason=r[4]) for r in rows]
    steps = split_at_first_python(framework, steps, strict)
    opts = st.options()
    if python_at is None:
        return Translation(framework, steps, opts, notes=_notes(steps))
    remaining = steps_in[python_at:]
    prefix = final.options()
    tail = make_tail(remaining, final.kind)
    return Translation(framework, steps, opts, tail=tail, prefix_options=prefix, notes=_notes(steps))


def _normalize_ops(st: State) -> List[Any]:
    if st.kind != "float" or st.affine == _IDENTITY:
        return []
    a, b = st.affine
    if not all(x > 0 for x in a):
        raise NotTranslatable("a value map with a non-positive scale")
    std = tuple(1.0 / (255.0 * a[c]) for c in range(3))
    mean = tuple(-b[c] * std[c] for c in range(3))
    return [ops.Normalize(mean=mean, std=std)]


def _notes(steps: Sequence[Step]) -> List[str]:
    names = set(_base.INTERPOLATIONS)
    if "pil_bilinear" in names:
        return []
    uses = any(getattr(o, "interpolation", "") in ("bilinear", "bicubic") for s in steps for o in s.ops
               if isinstance(o, (ops.Resize, ops.RandomResizedCrop, ops.ResizeShortestEdge)))
    return ["note: resizes use OpenCV's bilinear/bicubic, which does not antialias when shrinking "
            "(PIL and torch do): docs/migrate.md gives the measured PSNR"] if uses else []


class _Tail:
    """Runs the untranslated steps on one native-prefix sample: the numpy image is turned
    into what those steps would have received (a PIL image, a uint8 or float CHW tensor)."""

    def __init__(self, transforms: Sequence[Any], kind: str) -> None:
        self.transforms = list(transforms)
        self.kind = kind

    def convert(self, image: np.ndarray) -> Any:
        if self.kind == "pil":
            from PIL import Image
            return Image.fromarray(np.ascontiguousarray(image))
        if self.kind == "numpy":
            return image
        import torch
        return torch.from_numpy(np.ascontiguousarray(image))

    def __call__(self, image: np.ndarray, label: Any) -> Tuple[Any, Any]:
        x = self.convert(image)
        for t in self.transforms:
            x = t(x)
        return x, label


def make_tail(transforms: Sequence[Any], kind: str) -> _Tail:
    return _Tail(transforms, kind)


def translate(transform: Any, strict: bool = False) -> Translation:
    """Translate a torchvision v1/v2 ``Compose`` (or one transform) into a
    :class:`fastq.translate.Translation`; timm's classes run in Python here
    (``fastq.torch.translate`` adds them: :func:`fastq.translate.timm.translate`)."""
    return build(transform, "torchvision", strict)
