"""tensorpack ``imgaug`` augmentor lists as fastq pipelines (``fastq.tensorpack.translate``).

tensorpack's images are BGR HWC uint8 from ``cv2.imread``; its augmentors keep the dtype they
are given (``ToFloat32`` turns the rest of the chain to float32 until ``ToUint8``).  The
translator walks the list with that state (dtype, channel order, known image size) and maps
each augmentor to the native op with the same semantics; the pipeline writes BGR (or the order
a ``ColorSpace`` gave) in the dtype the chain ends with.

Augmentors are recognised by their exact class (module ``tensorpack.dataflow.imgaug``), so a
user's subclass, which may change the behaviour, runs in Python.  tensorpack itself is not
imported here; the Python tail calls the augmentors' own ``augment``.

Exactness rules (docs/migrate.md, "tensorpack"):

* the colour augmentors (BrightnessScale, Contrast, Saturation, Lighting) become
  :class:`fastq.ops.TensorpackColor`, which computes tensorpack's float32 formulas and truncates
  to uint8.  On a uint8 image each of them truncates by itself, so a lone one (or each child of
  a RandomOrderAug) is one TensorpackColor with the other three steps disabled (exact
  identities).  Between ``ToFloat32`` and ``ToUint8`` nothing is truncated until the end, so the
  float segment may hold one colour unit (one of them, or a RandomOrderAug of distinct ones,
  optionally under RandomApplyAug) plus crops and flips (which commute with the final
  truncation); a resize on float32, or a second colour unit, runs in Python;
* Saturation on a uint8 image takes cv2's rounded uint8 grey: no native op; Python;
* ``Contrast(rgb=None)`` (per-channel means), ``rgb`` not matching the channel order, or
  ``clip=False`` on float32: Python;
* ``CenterCrop`` puts its corner at ``int((side - crop) * 0.5)``; fastq's CenterCrop rounds half
  to even, so it is used only where the input size is known and both agree; right after a
  ``ResizeShortestEdge`` a square crop becomes ``TensorpackCrop(max_attempts=0, short_edge=...)``
  (tensorpack's rounding on both); anything else runs in Python.
"""
import copy
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fastq import ops as O
from fastq.translate._core import NotTranslatable, Step, Translation, TranslationError, split_at_first_python

__all__ = ["translate"]

# cv2 interpolation flags -> fastq names (cv2.INTER_NEAREST .. INTER_LANCZOS4 are 0..4)
_INTERP = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "area", 4: "lanczos"}
# cv2 colour conversion codes
_BGR2RGB = 4  # == cv2.COLOR_RGB2BGR
_BGR2GRAY = 6
_RGB2GRAY = 7

_COLOUR = ("BrightnessScale", "Contrast", "Saturation", "Lighting")
_COLOUR_KEY = {"BrightnessScale": "brightness", "Contrast": "contrast", "Saturation": "saturation",
               "Lighting": "lighting"}


def _kind(aug: Any) -> Optional[str]:
    """The tensorpack imgaug class name of ``aug`` when its type is exactly that class."""
    t = type(aug)
    if (t.__module__ or "").startswith("tensorpack.dataflow.imgaug"):
        return t.__name__
    return None


def _is_list(aug: Any) -> bool:
    """AugmentorList, or an object like it (a list of augmentors in ``.augmentors``)."""
    if _kind(aug) == "AugmentorList":
        return True
    return _kind(aug) is None and isinstance(getattr(aug, "augmentors", None), (list, tuple)) \
        and callable(getattr(aug, "augment", None))


def _flatten(augs: Any) -> List[Any]:
    if _is_list(augs):
        augs = augs.augmentors
    if not isinstance(augs, (list, tuple)):
        raise TypeError(f"fastq.tensorpack.translate takes a list of tensorpack imgaug augmentors or an "
                        f"AugmentorList, got {type(augs).__name__}")
    out: List[Any] = []
    for a in augs:
        if _is_list(a):
            out.extend(_flatten(a))
        else:
            out.append(a)
    return out


def _interp(name: str, interp: Any, allow_area: bool = True) -> str:
    try:
        code = int(interp)
    except (TypeError, ValueError):
        raise NotTranslatable(f"interp={interp!r} is not a cv2 interpolation flag") from None
    if code != interp or code not in _INTERP:
        raise NotTranslatable(f"interp={interp!r}: only cv2.INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, "
                              f"INTER_AREA and INTER_LANCZOS4 have a native resize")
    if not allow_area and code == 3:
        raise NotTranslatable(f"{name}: interp=cv2.INTER_AREA has no native equivalent in this position "
                              f"(TensorpackCrop resizes with nearest, linear, cubic or lanczos)")
    return _INTERP[code]


def _shape2d(name: str, arg: str, v: Any) -> Tuple[int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v), int(v)
    try:
        h, w = v
    except (TypeError, ValueError):
        raise NotTranslatable(f"{arg}={v!r} is not an int or (h, w)") from None
    if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) and int(x) >= 1 for x in (h, w)):
        raise NotTranslatable(f"{arg}={v!r}: fastq takes positive integer sizes")
    return int(h), int(w)


def _pair(name: str, arg: str, v: Any, lo: float, hi: float) -> Tuple[float, float]:
    try:
        a, b = (float(x) for x in v)
    except (TypeError, ValueError):
        raise NotTranslatable(f"{arg}={v!r} is not a (min, max) pair") from None
    if not (lo <= a <= b <= hi):
        raise NotTranslatable(f"{arg}={tuple(v)!r}: the native op takes {lo:g} <= min <= max <= {hi:g}")
    return a, b


class _State:
    """What tensorpack's image is at a point of the list."""

    def __init__(self) -> None:
        self.dtype = "uint8"     # "uint8" or "float32"
        self.order = "BGR"       # "BGR", "RGB" or "gray"
        self.size: Optional[Tuple[int, int]] = None  # (h, w) when known for every sample
        self.native_ops = 0      # native ops emitted so far (a grey conversion must come first)


class _Translator:
    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.st = _State()
        self.steps: List[Step] = []
        self.python = False  # a step already went to Python: the rest follows
        # the open float segment: the colour unit's step (its ops filled at ToUint8) and its op
        self.colour_step: Optional[int] = None
        self.colour_op: Any = None
        self.colour_name = ""
        self.prefix_state: Optional[Tuple[str, str]] = None  # (dtype, channel order) at the split

    # -- building steps ------------------------------------------------------------------------
    def add(self, aug: Any, ops: Sequence[Any] = (), becomes: str = "") -> None:
        self.steps.append(Step(aug, ops, becomes))
        self.st.native_ops += len(ops)

    def fail(self, aug: Any, reason: str) -> None:
        """``aug`` runs in Python, and so does everything after it.  In an open float segment the
        split moves back to the colour unit, whose float32 result is not truncated natively."""
        if self.colour_step is not None:
            self._close_colour(f"{self.colour_name} on float32 is followed, before a ToUint8, by {reason}; so its "
                               f"float32 result is not truncated natively and has no native equivalent")
        else:
            self.prefix_state = (self.st.dtype, self.st.order)
        self.python = True
        self.steps.append(Step(aug, python=True, reason=reason))

    def _close_colour(self, reason: str) -> None:
        """Split at the open colour unit (the image before it was float32)."""
        i = self.colour_step
        assert i is not None
        self.colour_step = None
        old = self.steps[i]
        self.prefix_state = ("float32", self.st.order)
        self.python = True
        self.steps[i] = Step(old.original, python=True, name=old.name, reason=reason)

    # -- the walk ------------------------------------------------------------------------------
    def run(self, augs: List[Any]) -> None:
        for aug in augs:
            if self.python:
                self.steps.append(Step(aug, python=True, reason="after an untranslated step"))
                continue
            try:
                self.one(aug)
            except NotTranslatable as e:
                self.fail(aug, f"{type(aug).__name__}: {e.reason}")
        if not self.python and self.colour_step is not None:
            self._close_colour(f"{self.colour_name} on float32 with no ToUint8 after it: its float32 output "
                               f"(not truncated) has no native equivalent")

    def one(self, aug: Any) -> None:
        k = _kind(aug)
        st = self.st
        if k is None:
            raise NotTranslatable("not a tensorpack imgaug class (a subclass or a user's augmentor)")
        if k == "Identity":
            self.add(aug, becomes="(nothing to do)")
        elif k == "ToFloat32":
            st.dtype = "float32"
            self.add(aug, becomes="float32 (values stay whole until ToUint8 or the output)")
        elif k == "ToUint8":
            self.to_uint8(aug)
        elif k == "Clip":
            self.clip(aug)
        elif k in ("Resize", "ResizeShortestEdge", "GoogleNetRandomCropAndResize"):
            if st.dtype == "float32":
                raise NotTranslatable("resizes a float32 image (after ToFloat32): cv2.resize keeps its fractions, "
                                      "the native resize works on uint8")
            getattr(self, k)(aug)
        elif k in ("CenterCrop", "RandomCrop"):
            getattr(self, k)(aug)
        elif k == "Flip":
            self.add(aug, [self.flip(aug)])
        elif k in ("ColorSpace", "Grayscale"):
            self.colorspace(aug, k)
        elif k in _COLOUR or k in ("RandomOrderAug", "RandomApplyAug"):
            self.composite(aug, k)
        elif k == "Brightness":
            raise NotTranslatable("adds a random delta; fastq's native brightness ops multiply (BrightnessScale "
                                  "translates)")
        else:
            raise NotTranslatable(f"no native op does what imgaug.{k} does")

    # -- geometry --------------------------------------------------------------------------------
    def Resize(self, aug: Any) -> None:
        h, w = _shape2d("Resize", "shape", aug.shape)
        op = O.Resize((h, w), interpolation=_interp("Resize", aug.interp))
        self.st.size = (h, w)
        self.add(aug, [op])

    def ResizeShortestEdge(self, aug: Any) -> None:
        size = aug.size
        if not (isinstance(size, numbers.Integral) and int(size) >= 1):
            raise NotTranslatable(f"size={size!r} is not a positive int")
        op = O.ResizeShortestEdge(int(size), interpolation=_interp("ResizeShortestEdge", aug.interp))
        self.st.size = None
        self.add(aug, [op])

    def GoogleNetRandomCropAndResize(self, aug: Any) -> None:
        t = aug.target_shape
        if not (isinstance(t, numbers.Integral) and not isinstance(t, bool) and int(t) >= 1):
            raise NotTranslatable(f"target_shape={t!r}: tensorpack resizes to (target_shape, target_shape), an int")
        area = _pair("GoogleNetRandomCropAndResize", "crop_area_fraction", aug.crop_area_fraction, 1e-12, 1.0)
        aspect = _pair("GoogleNetRandomCropAndResize", "aspect_ratio_range", aug.aspect_ratio_range, 1e-12, 1e12)
        interp = _interp("GoogleNetRandomCropAndResize", aug.interp, allow_area=False)
        op = O.TensorpackCrop(int(t), crop_area_fraction=area, aspect_ratio_range=aspect, interpolation=interp,
                              max_attempts=10)
        self.st.size = (int(t), int(t))
        self.add(aug, [op])

    def CenterCrop(self, aug: Any) -> None:
        h, w = _shape2d("CenterCrop", "crop_shape", aug.crop_shape)
        st = self.st
        if st.size is not None:
            H, W = st.size
            if H < h or W < w:
                raise NotTranslatable(f"crop_shape={(h, w)} is larger than the {H}x{W} image "
                                      f"(tensorpack asserts)")
            tp = (int((H - h) * 0.5), int((W - w) * 0.5))
            fq = (round((H - h) / 2), round((W - w) / 2))
            if tp != fq:
                raise NotTranslatable(f"on the {H}x{W} image tensorpack's corner int((side - crop) * 0.5) = {tp} "
                                      f"differs from fastq CenterCrop's round-half-even {fq}")
            st.size = (h, w)
            self.add(aug, [O.CenterCrop((h, w))])
            return
        prev = self.steps[-1] if self.steps else None
        if (prev is not None and not prev.python and len(prev.ops) == 1
                and isinstance(prev.ops[0], O.ResizeShortestEdge)
                and _kind(prev.original) == "ResizeShortestEdge"):
            rse = prev.ops[0]
            s = rse.short[0]
            if h != w:
                raise NotTranslatable(f"crop_shape={(h, w)} after ResizeShortestEdge: the native fused crop "
                                      f"(TensorpackCrop) is square; fastq's CenterCrop rounds the corner otherwise")
            if h > s:
                raise NotTranslatable(f"crop_shape={(h, w)} is larger than ResizeShortestEdge's {s} "
                                      f"(tensorpack asserts)")
            if rse.interpolation == "area":
                raise NotTranslatable("after ResizeShortestEdge(interp=cv2.INTER_AREA): the fused native crop "
                                      "(TensorpackCrop) does not resize with area")
            op = O.TensorpackCrop(h, interpolation=rse.interpolation, max_attempts=0, short_edge=s)
            self.steps[-1] = Step(prev.original, (), becomes=f"with the next CenterCrop: {_op_text(op)}")
            st.size = (h, w)
            self.add(aug, [op], becomes=f"{_op_text(op)} (ResizeShortestEdge + CenterCrop, tensorpack's rounding)")
            return
        raise NotTranslatable("the image size is not known here, and fastq's CenterCrop rounds the corner half to "
                              "even where tensorpack floors it (exact only right after ResizeShortestEdge or where "
                              "the size is fixed)")

    def RandomCrop(self, aug: Any) -> None:
        h, w = _shape2d("RandomCrop", "crop_shape", aug.crop_shape)
        if self.st.size is not None and (self.st.size[0] < h or self.st.size[1] < w):
            raise NotTranslatable(f"crop_shape={(h, w)} is larger than the {self.st.size} image (tensorpack asserts)")
        self.st.size = (h, w)
        self.add(aug, [O.RandomCrop((h, w))])

    def flip(self, aug: Any) -> Any:
        if bool(aug.horiz) == bool(aug.vert):
            raise NotTranslatable("needs exactly one of horiz and vert")
        p = float(aug.prob)
        if not 0 <= p <= 1:
            raise NotTranslatable(f"prob={aug.prob!r} is not in [0, 1]")
        return O.HorizontalFlip(p) if aug.horiz else O.VerticalFlip(p)

    # -- dtype and colour space ------------------------------------------------------------------
    def to_uint8(self, aug: Any) -> None:
        st = self.st
        if st.dtype == "float32" and self.colour_step is not None:
            i = self.colour_step
            old = self.steps[i]
            self.steps[i] = Step(old.original, [self.colour_op], name=old.name)
            st.native_ops += 1
            self.colour_step = None
            self.add(aug, becomes=f"truncation to uint8 (inside {_op_text(self.colour_op).split('(')[0]})")
        else:
            self.add(aug, becomes="(nothing to do: the values are whole numbers in [0, 255])")
        st.dtype = "uint8"

    def clip(self, aug: Any) -> None:
        """Clip is kept only where it is the identity: images here hold values in [0, 255]."""
        probe = np.array([[[0, 255, 128]]], dtype=np.uint8 if self.st.dtype == "uint8" else np.float32)
        try:
            out = np.clip(probe, aug.min, aug.max)
        except Exception as e:  # noqa: BLE001 - numpy refuses the bounds for this dtype
            raise NotTranslatable(f"min={aug.min!r}, max={aug.max!r}: numpy refuses them ({e})") from None
        if out.dtype != probe.dtype or not np.array_equal(out, probe):
            raise NotTranslatable(f"min={aug.min!r}, max={aug.max!r} changes values in [0, 255] (or the dtype); "
                                  f"only Clip(min <= 0, max >= 255) is an identity here")
        self.add(aug, becomes="(nothing to do: the values are already in [0, 255])")

    def colorspace(self, aug: Any, k: str) -> None:
        st = self.st
        mode = getattr(aug, "mode", None)
        if k == "Grayscale" and getattr(aug, "keepshape", False):
            want = "RGB" if aug.rgb else "BGR"
            if st.order != want or st.dtype != "uint8":
                raise NotTranslatable(f"keepshape=True with rgb={aug.rgb} on a {st.dtype} {st.order} image: only "
                                      f"the uint8 grey of the matching order is native (Grayscale)")
            self.add(aug, [O.Grayscale(1.0)])
            return
        if mode == _BGR2RGB:
            if st.order == "gray":
                raise NotTranslatable("BGR2RGB on a grey image")
            st.order = "RGB" if st.order == "BGR" else "BGR"
            self.add(aug, becomes=f"channels={st.order!r} (the channel order of the output)")
            return
        if mode in (_BGR2GRAY, _RGB2GRAY):
            want = "BGR" if mode == _BGR2GRAY else "RGB"
            if not aug.keepdims:
                raise NotTranslatable("keepdims=False gives 2-D images; fastq's grey output is (H, W, 1)")
            if st.order != want:
                raise NotTranslatable(f"mode {'BGR2GRAY' if mode == _BGR2GRAY else 'RGB2GRAY'} on a {st.order} "
                                      f"image (the wrong weights for its channels)")
            if st.native_ops or st.dtype != "uint8" or any(s.ops for s in self.steps):
                raise NotTranslatable("a grey conversion after other steps: fastq converts to grey only when it "
                                      "decodes (channels='gray'), so it is native only as the first augmentor")
            st.order = "gray"
            self.add(aug, becomes="channels='gray' (decoded as grey: libjpeg's luma for JPEGs)")
            return
        raise NotTranslatable(f"mode={mode!r}: only cv2.COLOR_BGR2RGB / RGB2BGR and a first BGR2GRAY / RGB2GRAY "
                              f"are native")

    # -- colour ------------------------------------------------------------------------------
    def composite(self, aug: Any, k: str) -> None:
        st = self.st
        if st.dtype == "uint8":
            op = self.uint8_op(aug)
            self.add(aug, [op])
            return
        # float32: flips (and RandomApplyAug of them) are index ops; anything else is the colour unit
        if k == "RandomApplyAug" and _kind(aug.aug) == "Flip":
            self.add(aug, [O.RandomApply([self.flip(aug.aug)], p=self._prob(aug))])
            return
        if self.colour_step is not None:
            raise NotTranslatable(f"a second colour step on float32 before ToUint8 (after {self.colour_name}): "
                                  f"the native colour op truncates once, at its end")
        self.colour_op = self.colour_unit(aug)
        self.colour_name = type(aug).__name__
        self.steps.append(Step(aug, becomes="(pending ToUint8)"))
        self.colour_step = len(self.steps) - 1

    @staticmethod
    def _prob(aug: Any) -> float:
        p = aug.prob
        if not (isinstance(p, numbers.Real) and 0 <= float(p) <= 1):
            raise NotTranslatable(f"prob={p!r} is not in [0, 1]")
        return float(p)

    def uint8_op(self, aug: Any) -> Any:
        """One size-keeping op for ``aug`` on a uint8 image (each step truncates by itself)."""
        k = _kind(aug)
        if k == "Flip":
            return self.flip(aug)
        if k in _COLOUR:
            if k == "Saturation":
                raise NotTranslatable("on a uint8 image tensorpack's grey is cv2's rounded uint8 BGR2GRAY; the "
                                      "native colour op uses the float32 grey (put ToFloat32 before it, as "
                                      "fbresnet_augmentor does)")
            return self.colour_op_for({_COLOUR_KEY[k]: aug}, uint8=True)
        if k == "RandomApplyAug":
            return O.RandomApply([self.uint8_op(aug.aug)], p=self._prob(aug))
        if k == "RandomOrderAug":
            children = list(aug.aug_lists)
            if not children:
                raise NotTranslatable("an empty list")
            ops = [self.uint8_op(c) for c in children]
            return ops[0] if len(ops) == 1 else O.RandomOrder(ops)
        if k == "Grayscale" and getattr(aug, "keepshape", False) and self.st.order == ("RGB" if aug.rgb else "BGR"):
            return O.Grayscale(1.0)
        raise NotTranslatable(f"{type(aug).__name__} inside a RandomApplyAug / RandomOrderAug has no size-keeping "
                              f"native op")

    def colour_unit(self, aug: Any) -> Any:
        """The float32 colour unit: one colour augmentor, a RandomOrderAug of distinct ones, or a
        RandomApplyAug of either."""
        k = _kind(aug)
        if k == "RandomApplyAug":
            return O.RandomApply([self.colour_unit(aug.aug)], p=self._prob(aug))
        if k in _COLOUR:
            return self.colour_op_for({_COLOUR_KEY[k]: aug}, uint8=False)
        if k == "RandomOrderAug":
            parts: Dict[str, Any] = {}
            for c in aug.aug_lists:
                ck = _kind(c)
                if ck not in _COLOUR:
                    raise NotTranslatable(f"on float32 the native RandomOrderAug is fbresnet's colour set "
                                          f"(BrightnessScale, Contrast, Saturation, Lighting); it holds "
                                          f"{type(c).__name__}")
                if _COLOUR_KEY[ck] in parts:
                    raise NotTranslatable(f"{ck} twice in one RandomOrderAug")
                parts[_COLOUR_KEY[ck]] = c
            if not parts:
                raise NotTranslatable("an empty list")
            return self.colour_op_for(parts, uint8=False)
        raise NotTranslatable(f"{type(aug).__name__} on float32: only flips, crops and fbresnet's colour "
                              f"augmentors are native between ToFloat32 and ToUint8")

    def colour_op_for(self, parts: Dict[str, Any], uint8: bool) -> Any:
        """TensorpackColor with the given steps; the others disabled (exact identities)."""
        st = self.st
        if st.order == "gray":
            raise NotTranslatable("on a grey image (tensorpack's colour augmentors need 3 channels)")
        kw: Dict[str, Any] = dict(brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=0.0, lighting_std=0.0,
                                  bgr=st.order == "BGR")
        for key, a in parts.items():
            name = type(a).__name__
            if not uint8 and not getattr(a, "clip", True):
                raise NotTranslatable(f"{name}(clip=False) on float32: the native op clips every step to [0, 255]")
            if key in ("contrast", "saturation"):
                rgb = a.rgb
                if rgb is None:
                    raise NotTranslatable(f"{name}(rgb=None) takes per-channel means; the native op uses the grey mean")
                if st.order != "BGR" or bool(rgb):
                    raise NotTranslatable(f"{name}(rgb={rgb!r}) on a {st.order} image: the native op's grey is "
                                          f"cv2's BGR2GRAY of a BGR image (rgb=False)")
            if key == "brightness":
                kw["brightness"] = _pair(name, "range", a.range, 0.0, 1e3)
            elif key == "contrast":
                kw["contrast"] = _pair(name, "factor_range", a.factor_range, 0.0, 1e3)
            elif key == "saturation":
                alpha = a.alpha
                if not (isinstance(alpha, numbers.Real) and 0 <= float(alpha) < 1):
                    raise NotTranslatable(f"alpha={alpha!r}: the native op takes 0 <= alpha < 1")
                kw["saturation"] = float(alpha)
            else:
                std = a.std
                if not (isinstance(std, numbers.Real) and 0 <= float(std) <= 1e3):
                    raise NotTranslatable(f"std={std!r}: the native op takes 0 <= std <= 1000")
                ev = np.asarray(a.eigval, dtype=np.float32)
                evec = np.asarray(a.eigvec, dtype=np.float32)
                if ev.shape != (3,) or evec.shape != (3, 3):
                    raise NotTranslatable(f"eigval {ev.shape} / eigvec {evec.shape}: 3 and 3x3 expected")
                kw["lighting_std"] = float(std)
                kw["eigval"] = tuple(float(x) for x in ev)
                kw["eigvec"] = tuple(tuple(float(x) for x in row) for row in evec)
        try:
            return O.TensorpackColor(**kw)
        except ValueError as e:
            raise NotTranslatable(str(e)) from None


def _op_text(op: Any) -> str:
    from fastq.translate._core import op_text
    return op_text(op)


def _copy_augs(augs: Sequence[Any]) -> List[Any]:
    """Private copies of the Python steps (their ``rng`` is reseeded per sample); the
    originals where a copy fails."""
    out = []
    for a in augs:
        try:
            out.append(copy.deepcopy(a))
        except Exception:  # noqa: BLE001 - an augmentor holding something that does not copy
            out.append(a)
    return out


def _reseed(aug: Any, seen: set) -> None:
    """Give ``aug`` and the augmentors inside it a RandomState drawn from numpy's global
    generator (which the tail seeds per sample from (seed, epoch, index))."""
    if id(aug) in seen:
        return
    seen.add(id(aug))
    if hasattr(aug, "rng") and isinstance(getattr(aug, "rng"), np.random.RandomState):
        aug.rng = np.random.RandomState(np.random.randint(0, 2 ** 31 - 1))
    for attr in ("augmentors", "aug_lists"):
        for c in getattr(aug, attr, None) or ():
            _reseed(c, seen)
    inner = getattr(aug, "aug", None)
    if inner is not None and hasattr(inner, "augment"):
        _reseed(inner, seen)


class _Tail:
    """Runs the Python steps on one sample of the native prefix (uint8, in the prefix's channel
    order), first as float32 when tensorpack's image was float32 there."""

    def __init__(self, augs: Sequence[Any], float_input: bool) -> None:
        self.augs = _copy_augs(augs)
        self.float_input = float_input

    def __call__(self, image: np.ndarray, label: Any, *_: Any) -> Tuple[np.ndarray, Any]:
        img = np.ascontiguousarray(image)
        if self.float_input:
            img = img.astype(np.float32)
        seen: set = set()
        for a in self.augs:
            _reseed(a, seen)
        for a in self.augs:
            img = a.augment(img)
        return img, label


def translate(augmentors: Any, strict: bool = False) -> Translation:
    """A tensorpack ``imgaug`` augmentor list (a list, tuple or ``AugmentorList``; nested lists
    are flattened) as a :class:`fastq.translate.Translation` whose pipeline gives tensorpack's
    images: BGR (or the order a ``ColorSpace`` set), uint8, or float32 0..255 values when the
    list ends after ``ToFloat32``, NHWC.

    Each augmentor becomes the native op with its exact semantics (docs/migrate.md has the
    table).  The first one without one, and every one after it, runs in Python per sample
    (``aug.augment(image)`` on the native prefix's BGR numpy image), with one ``UserWarning``
    naming it; ``strict=True`` raises :class:`fastq.translate.TranslationError` instead."""
    augs = _flatten(augmentors)
    if not augs:
        raise TranslationError("fastq.tensorpack: an empty augmentor list leaves the image size open; "
                               "fastq needs a chain that ends at a fixed size")
    tr = _Translator(strict)
    tr.run(augs)
    steps = split_at_first_python("tensorpack", tr.steps, strict)
    st = tr.st
    tail = None
    prefix: Dict[str, Any] = {}
    notes: List[str] = []
    if any(s.python for s in steps):
        dtype, order = tr.prefix_state or (st.dtype, st.order)
        python_augs = [s.original for s in steps if s.python]
        tail = _Tail(python_augs, float_input=dtype == "float32")
        # dct_scaling=False: tensorpack resizes cv2.imread's full decode (a DCT-scaled decode is not that)
        prefix = {"dtype": "uint8", "layout": "NHWC", "channels": order, "dct_scaling": False}
        native_ops = [op for s in steps if not s.python for op in s.ops]
        if not _ends_fixed(native_ops):
            prefix["pad"] = "batch"
            notes.append("the native steps end at a variable size: they run with pad='batch' (give "
                         "max_image_size=(H, W) to pipeline() when fastq cannot bound the size)")
        options: Dict[str, Any] = {"layout": "NHWC"}
    else:
        options = {"dtype": st.dtype, "layout": "NHWC", "channels": st.order, "dct_scaling": False}
        if st.dtype == "float32":
            # tensorpack's float32 images hold 0..255: an identity Normalize on the 0..255 scale
            norm = O.Normalize(mean=0.0, std=1.0, max_pixel_value=1.0)
            steps.append(Step(None, [norm], name="(output)",
                              becomes="float32 0..255: Normalize(mean=0, std=1, max_pixel_value=1)"))
    return Translation("tensorpack", steps, options, tail=tail, prefix_options=prefix, notes=notes)


_FIXED = (O.Resize, O.CenterCrop, O.RandomCrop, O.TensorpackCrop)


def _ends_fixed(ops: Sequence[Any]) -> bool:
    """Whether the native chain ends at a fixed size (its last size-changing op fixes it)."""
    for op in reversed(ops):
        if isinstance(op, O.ResizeShortestEdge):
            return False
        if isinstance(op, O.Resize):
            return op.size is not None
        if isinstance(op, _FIXED):
            return True
    return False
