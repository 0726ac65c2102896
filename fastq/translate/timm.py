"""timm's transform classes (what ``timm.data.create_transform`` builds) translated to fastq
ops; the torchvision classes in the same ``Compose`` go through
:mod:`fastq.translate.torchvision`, which calls :func:`translate_step` here for every class
defined in ``timm``.  docs/migrate.md, "PyTorch: torchvision and timm", lists each class and
its refused argument values.

timm's RandAugment, AutoAugment and AugMix become the native ops ``fastq.ops.TimmRandAugment``,
``TimmAutoAugment`` and ``TimmAugMix`` where this build has them (their ``from_timm(obj)``
converts timm's policy object or raises ``ValueError`` naming what it cannot do); otherwise
they run in Python.
"""
import math
from typing import Any, List, Tuple

import fastq.ops as ops
from fastq.translate._core import NotTranslatable, Translation
from fastq.translate.torchvision import (State, _fill, _need_pixels, _size_pair, _t_pil_to_tensor, _t_to_tensor,
                                         build, flatten, resize_interpolation)
from fastq.translate.torchvision import translate_step as tv_translate_step

__all__ = ["translate", "translate_step"]


def _rrc(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "RandomResizedCropAndInterpolation")
    size = _size_pair(t.size)
    s_lo, s_hi = (float(v) for v in t.scale)
    r_lo, r_hi = (float(v) for v in t.ratio)
    scale, ratio = (s_lo, s_hi), (r_lo, r_hi)
    if isinstance(t.interpolation, (list, tuple)):
        # interpolation='random': timm draws the box, then random.choice of the modes; the two
        # draws are independent, so a RandomChoice of one crop per mode has the same distribution
        alts = [ops.RandomResizedCrop(size, scale=scale, ratio=ratio,
                                      interpolation=resize_interpolation(m, True, st.kind)) for m in t.interpolation]
        return [ops.RandomChoice(alts)], ""
    return [ops.RandomResizedCrop(size, scale=scale, ratio=ratio,
                                  interpolation=resize_interpolation(t.interpolation, True, st.kind))], ""


def _resize_keep_ratio(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "ResizeKeepRatio")
    if t.random_scale_prob > 0 or t.random_aspect_prob > 0:
        raise NotTranslatable(f"random_scale_prob={t.random_scale_prob}, random_aspect_prob={t.random_aspect_prob} "
                              f"(fastq has no random-scale resize of this kind)")
    th, tw = _size_pair(t.size)
    if th != tw:
        raise NotTranslatable(f"size={t.size} (fastq keeps the ratio for a square target only)")
    interp = resize_interpolation(t.interpolation, True, st.kind)
    if float(t.longest) == 0.0:
        # shorter side -> size, the other round(side * size / shorter): ResizeShortestEdge rounds
        # x + 0.5 down where Python rounds half to even (a side of exactly k + 0.5 pixels)
        return [ops.ResizeShortestEdge(th, interpolation=interp)], ""
    raise NotTranslatable(f"longest={t.longest} (fastq resizes by the shorter side only)")


def _center_crop_or_pad(t: Any, st: State) -> Tuple[List[Any], str]:
    _need_pixels(st, "CenterCropOrPad")
    if t.padding_mode != "constant":
        raise NotTranslatable(f"padding_mode={t.padding_mode!r} (fastq's CenterCrop pads with zeros)")
    if _fill(t.fill, st.kind) != (0.0, 0.0, 0.0) and _fill(t.fill, st.kind) != 0:
        raise NotTranslatable(f"fill={t.fill!r} (fastq's CenterCrop pads with zeros)")
    return [ops.CenterCrop(_size_pair(t.size))], ""


def _to_numpy(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind != "pil":
        raise NotTranslatable("ToNumpy on a tensor")
    st.kind = "numpy"
    return [], "output uint8 NCHW (numpy, as timm's ToNumpy)"


def _random_erasing(t: Any, st: State) -> Tuple[List[Any], str]:
    if st.kind != "float":
        raise NotTranslatable("timm RandomErasing on a uint8 image (it erases a float tensor)")
    if st.erased:
        raise NotTranslatable("a second RandomErasing (fastq erases one box, in the final write)")
    if t.num_splits:
        raise NotTranslatable(f"num_splits={t.num_splits} (a batch-level split)")
    if t.max_count != 1 or t.min_count != 1:
        raise NotTranslatable(f"min_count={t.min_count}, max_count={t.max_count} (fastq erases one box)")
    if t.rand_color:
        raise NotTranslatable("mode='rand' (one normal value per channel; fastq has a constant or per-pixel "
                              "normal values)")
    value: Any = "random" if t.per_pixel else 0.0
    lo, hi = (math.exp(v) for v in t.log_aspect_ratio)
    st.erased = True
    return [ops.RandomErasing(p=float(t.probability), scale=(float(t.min_area), float(t.max_area)),
                              ratio=(lo, hi), value=value)], ""


def _policy(op_name: str, what: str):
    def handler(t: Any, st: State) -> Tuple[List[Any], str]:
        _need_pixels(st, what)
        op_cls = getattr(ops, op_name, None)
        if op_cls is None:
            raise NotTranslatable(f"no native timm {what} in this build")
        try:
            op = op_cls.from_timm(t)
        except ValueError as e:
            raise NotTranslatable(str(e)) from None
        return [op], ""
    return handler


_HANDLERS = {
    "RandomResizedCropAndInterpolation": _rrc, "ResizeKeepRatio": _resize_keep_ratio,
    "CenterCropOrPad": _center_crop_or_pad, "MaybeToTensor": _t_to_tensor, "MaybePILToTensor": _t_pil_to_tensor,
    "ToNumpy": _to_numpy, "RandomErasing": _random_erasing,
    "RandAugment": _policy("TimmRandAugment", "RandAugment"),
    "AutoAugment": _policy("TimmAutoAugment", "AutoAugment"),
    "AugMixAugment": _policy("TimmAugMix", "AugMix"),
}


def translate_step(t: Any, st: State) -> Tuple[List[Any], str]:
    """(native ops, words) for one step in state `st` (updated in place): timm's classes
    here, every other one through :func:`fastq.translate.torchvision.translate_step`."""
    if not (type(t).__module__ or "").startswith("timm."):
        return tv_translate_step(t, st)
    name = type(t).__name__
    h = _HANDLERS.get(name)
    if h is None:
        raise NotTranslatable(f"{name} from {type(t).__module__} has no native equivalent")
    return h(t, st)


def translate(transform: Any, strict: bool = False) -> Translation:
    """Translate a torchvision ``Compose`` that may hold timm's classes (what
    ``timm.data.create_transform`` returns); the framework is named "timm" when it does."""
    framework = "timm" if any((type(t).__module__ or "").startswith("timm.") for t in flatten(transform)) \
        else "torchvision"
    return build(transform, framework, strict, step=translate_step)
