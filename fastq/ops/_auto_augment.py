"""Policies: torchvision v2's RandAugment / TrivialAugmentWide / AutoAugment
(csrc/image/color/fq_image_aug_policy.cpp) and TF Model Garden's RandAugment / AutoAugment
(csrc/image/color/fq_image_aug_model_garden_policy.cpp)."""
from typing import Optional, Sequence

from fastq._native import _image
from fastq.ops._base import Fill, Op, _K, _fail, _fill, _int_in, _num, _prob

# the public names of this family (fastq.ops re-exports them)
__all__ = ["RandAugment", "TrivialAugmentWide", "AutoAugment", "POLICY_OPS", "TFRandAugment", "TFAutoAugment",
           "TF_POLICY_OPS", "TF_AUTOAUGMENT_POLICIES", "TimmRandAugment", "TimmAutoAugment", "TimmAugMix",
           "TIMM_OPS", "TIMM_AUTOAUGMENT_POLICIES"]


POLICY_OPS = ("Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
              "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize")


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

    @classmethod
    def _example(cls):
        return cls(3, 12, 21, fill=(1, 2, 3))


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

    @classmethod
    def _example(cls):
        return cls(15, fill=128)


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

    @classmethod
    def _example(cls):
        return cls(fill=(4, 5, 6))


# ---- TF Model Garden policies (csrc/image/color/fq_image_aug_model_garden*.cpp) ----------------------------

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

    @classmethod
    def _example(cls):
        return cls(3, 7.5, cutout_const=20, translate_const=50, prob_to_apply=0.5, fill=(1, 2, 3))


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

    @classmethod
    def _example(cls):
        return cls("reduced_imagenet", fill=100)


# ---- timm's policies (csrc/image/color/fq_image_aug_timm_policy.cpp) -------------------------

TIMM_OPS = _image.TIMM_OPS  # timm's op names fastq implements (timm.data.auto_augment.NAME_TO_OP)
# timm's _RAND_TRANSFORMS / _RAND_INCREASING_TRANSFORMS
TIMM_RAND_TRANSFORMS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd",
                        "Color", "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel",
                        "TranslateYRel")
TIMM_RAND_INCREASING_TRANSFORMS = ("AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing",
                                   "SolarizeIncreasing", "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing",
                                   "BrightnessIncreasing", "SharpnessIncreasing", "ShearX", "ShearY",
                                   "TranslateXRel", "TranslateYRel")
_TIMM_INTERP = {"bilinear": 0.0, "bicubic": 1.0, "random": 2.0}
# timm's _RAND_WEIGHTED_0 ("rand-...-tweights"): op -> weight
TIMM_RAND_WEIGHTS = {"Rotate": 3, "ShearX": 2, "ShearY": 2, "TranslateXRel": 1, "TranslateYRel": 1,
                     "ColorIncreasing": .25, "SharpnessIncreasing": 0.25, "AutoContrast": 0.25,
                     "SolarizeIncreasing": .05, "SolarizeAdd": .05, "ContrastIncreasing": .05,
                     "BrightnessIncreasing": .05, "Equalize": .05, "PosterizeIncreasing": 0.05, "Invert": 0.05}


def _timm_ops(op, ops):
    if isinstance(ops, str):
        _fail(op, "ops must be a list of timm op names, not a string", ops)
    try:
        names = list(ops)
    except TypeError:
        _fail(op, "ops must be a list of timm op names", ops)
    if not names:
        _fail(op, "ops must not be empty", ops)
    for n in names:
        if n not in TIMM_OPS:
            raise ValueError(f"{op}: ops: timm op {n!r} is not implemented (fastq has: {', '.join(TIMM_OPS)})")
    if len(set(names)) != len(names):
        _fail(op, "ops must not repeat a name (a repeated op weighs the uniform choice; not done)", ops)
    return tuple(names)


class TimmRandAugment(Op):
    """timm's ``RandAugment`` (``timm.data.auto_augment.rand_augment_transform``, timm 1.0)
    with timm's own ops, level functions and PIL semantics; the defaults are
    ``rand_augment_transform("rand-m9-mstd0.5-inc1", None)``.  Per layer (``num_layers``, at
    most 4): an op drawn uniformly from ``ops`` (with replacement, as
    ``np.random.choice(replace=True)``); the op is skipped if ``prob < 1`` and ``u > prob``;
    else its magnitude is ``magnitude``, ``gauss(magnitude, magnitude_std)`` when
    ``magnitude_std > 0`` (``inf``: ``uniform(0, magnitude)``), clipped to ``[0,
    magnitude_max]`` (``None``: 10); timm's level function gives the argument (signed ops
    negated if ``u > 0.5``); geometric ops resample ``"bilinear"``, ``"bicubic"`` or, with
    ``"random"``, one of the two per op, and fill with ``fill`` (timm's ``img_mean``).
    ``ops``: names of :data:`TIMM_OPS` (default: timm's ``_RAND_INCREASING_TRANSFORMS`` if
    ``increasing`` else ``_RAND_TRANSFORMS``).  ``PosterizeIncreasing`` at magnitude 10
    keeps 0 bits: an all-black image, as Pillow < 13 returned (Pillow 13's
    ``ImageOps.posterize`` raises there).  Explain ``policy``: per layer ``op`` (timm's
    name), ``applied`` and, when applied, ``magnitude`` (timm's argument), ``level`` (the
    magnitude drawn) and ``resample`` (geometric ops).  ``choice_weights="weights"``: timm's
    ``_RAND_WEIGHTED_0`` table (``"rand-...-tweights"``; ``ops`` default its 15 ops), drawn
    without replacement as ``np.random.choice(p=..., replace=False)`` (each layer
    proportional to the weights of the ops not drawn yet).  :meth:`from_timm` converts
    timm's object."""

    kind = _K["TimmRandAugment"]

    def __init__(self, num_layers: int = 2, magnitude: float = 9, prob: float = 0.5, magnitude_std: float = 0.5,
                 magnitude_max: Optional[float] = None, increasing: bool = True,
                 ops: Optional[Sequence[str]] = None, interpolation: str = "random",
                 fill: Fill = (128, 128, 128), translate_pct: float = 0.45, translate_const: float = 250,
                 choice_weights: Optional[str] = None) -> None:
        n = "TimmRandAugment"
        self.num_layers = _int_in(n, "num_layers", num_layers, 0, 4)
        if not (_num(magnitude) and 0 <= magnitude <= 1000):
            _fail(n, "magnitude must be a number in [0, 1000]", magnitude)
        self.magnitude = float(magnitude)
        if not (_num(prob) and 0 <= prob <= 1):
            _fail(n, "prob must be a probability in [0, 1]", prob)
        self.prob = float(prob)
        self.increasing = bool(increasing)
        if choice_weights not in (None, "weights"):
            _fail(n, "choice_weights must be None or 'weights' (timm's _RAND_WEIGHTED_0 table)", choice_weights)
        self.choice_weights = choice_weights
        if ops is None:
            ops = tuple(TIMM_RAND_WEIGHTS) if choice_weights else (
                TIMM_RAND_INCREASING_TRANSFORMS if self.increasing else TIMM_RAND_TRANSFORMS)
        self.ops = _timm_ops(n, ops)
        if choice_weights:
            outside = [o for o in self.ops if o not in TIMM_RAND_WEIGHTS]
            if outside:
                _fail(n, f"choice_weights='weights': ops {outside} have no weight in timm's table", ops)
            if self.num_layers > len(self.ops):
                _fail(n, "choice_weights='weights' draws without replacement: num_layers must be <= len(ops)",
                      num_layers)
        _timm_hparams(self, n, magnitude_std, magnitude_max, interpolation, fill, translate_pct, translate_const)

    def fields(self):
        return {"num_layers": self.num_layers, "magnitude": self.magnitude, "prob": self.prob,
                **_timm_hp_fields(self), "ops": float(sum(1 << TIMM_OPS.index(o) for o in self.ops)),
                "weighted": 1.0 if self.choice_weights else 0.0}

    def __repr__(self):
        return (f"TimmRandAugment(num_layers={self.num_layers}, magnitude={self.magnitude}, prob={self.prob}, "
                f"magnitude_std={self.magnitude_std}, magnitude_max={self.magnitude_max}, ops={list(self.ops)}, "
                f"interpolation={self.interpolation!r}, fill={self.fill}, translate_pct={self.translate_pct}, "
                f"translate_const={self.translate_const})")

    @classmethod
    def from_timm(cls, ra) -> "TimmRandAugment":
        """The op equivalent to timm's ``RandAugment`` object ``ra`` (as built by
        ``rand_augment_transform`` / ``create_transform(auto_augment="rand-...")``), read
        from its attributes; ``ValueError`` naming what fastq cannot do exactly: an op outside
        :data:`TIMM_OPS` (``Desaturate``, ``GaussianBlur``, ...), a repeated op, ops whose
        ``prob`` / ``magnitude`` / ``magnitude_std`` / ``magnitude_max`` / hparams differ,
        choice weights other than timm's ``"weights"`` table (``_RAND_WEIGHTED_0``),
        a resample other than bilinear / bicubic / a random choice of both, more than 4
        layers."""
        n = "TimmRandAugment.from_timm"
        for a in ("ops", "num_layers", "choice_weights"):
            if not hasattr(ra, a):
                raise ValueError(f"{n}: expected timm's RandAugment (with .{a}), got {type(ra).__name__}")
        weighted = None
        if not isinstance(ra.num_layers, int) or not 0 <= ra.num_layers <= 4:
            raise ValueError(f"{n}: num_layers must be an int in [0, 4], got {ra.num_layers!r}")
        ops = list(ra.ops)
        if not ops:
            raise ValueError(f"{n}: no ops")
        names = [getattr(o, "name", None) for o in ops]
        for nm in names:
            if nm not in TIMM_OPS:
                raise ValueError(f"{n}: timm op {nm!r} is not implemented (fastq has: {', '.join(TIMM_OPS)})")
        if len(set(names)) != len(names):
            raise ValueError(f"{n}: a repeated op ({names}) weighs timm's uniform choice; not supported")
        if ra.choice_weights is not None:
            import numpy as np
            cw = np.asarray(ra.choice_weights, dtype=np.float64)
            if any(nm not in TIMM_RAND_WEIGHTS for nm in names) or cw.shape != (len(names),):
                raise ValueError(f"{n}: choice_weights: only timm's 'weights' table (_RAND_WEIGHTED_0) is supported")
            want = np.array([TIMM_RAND_WEIGHTS[str(nm)] for nm in names], np.float64)
            if not np.allclose(cw, want / want.sum(), rtol=1e-12, atol=0):
                raise ValueError(f"{n}: choice_weights {cw.tolist()} are not timm's 'weights' table "
                                 "(_RAND_WEIGHTED_0, normalised); other weights are not supported")
            weighted = "weights"
        hp = _timm_shared(n, ops)
        return cls(num_layers=ra.num_layers, ops=names, choice_weights=weighted, **hp)

    @classmethod
    def _example(cls):
        return cls(3, 7.5, prob=0.7, magnitude_std=float("inf"), magnitude_max=12,
                   ops=["Rotate", "SolarizeAdd", "TranslateXRel"], interpolation="bicubic",
                   fill=(1, 2, 3), translate_pct=0.3, translate_const=100,
                   choice_weights="weights")


def _timm_resample(n, rs):
    """PIL resample value(s) of timm's AugmentOp kwargs -> 'bilinear' / 'bicubic' / 'random'"""
    names = {2: "bilinear", 3: "bicubic"}  # PIL.Image.Resampling BILINEAR, BICUBIC
    vals = rs if isinstance(rs, tuple) else (rs,)
    try:
        got = [names[int(v)] for v in vals]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{n}: resample {rs!r}: only PIL's BILINEAR and BICUBIC (or a random choice of both) are "
                         "implemented") from None
    if isinstance(rs, tuple):
        if sorted(got) != ["bicubic", "bilinear"]:
            raise ValueError(f"{n}: resample choice {rs!r}: only a random choice of (BILINEAR, BICUBIC) is "
                             "implemented")
        return "random"
    return got[0]


# TimmAutoAugment's policies: timm's name -> the C table's index
TIMM_AUTOAUGMENT_POLICIES = {"original": 0, "originalr": 1, "v0": 2, "v0r": 3, "3a": 4}


class TimmAutoAugment(Op):
    """timm's ``AutoAugment`` (``auto_augment_transform("<policy>[-mstd<std>]", hparams)``,
    timm 1.0): ``policy`` one of :data:`TIMM_AUTOAUGMENT_POLICIES` ("original",
    "originalr", "v0", "v0r": timm's 25 two-op sub-policies; "3a": DeiT III's three one-op
    sub-policies Solarize, Desaturate, GaussianBlurRand); one drawn uniformly
    (``random.choice``), then its ``AugmentOp``s in order, each as in
    :class:`TimmRandAugment` (skipped if ``u > prob``; magnitude noise ``magnitude_std``,
    clip ``magnitude_max``; sign; resample ``interpolation``; ``fill``).  Explain: ``subpolicy`` and ``policy`` (both ops, as
    TimmRandAugment's)."""

    kind = _K["TimmAutoAugment"]

    def __init__(self, policy: str = "v0", magnitude_std: float = 0.0, magnitude_max: Optional[float] = None,
                 interpolation: str = "random", fill: Fill = (128, 128, 128), translate_pct: float = 0.45,
                 translate_const: float = 250) -> None:
        n = "TimmAutoAugment"
        if policy not in TIMM_AUTOAUGMENT_POLICIES:
            _fail(n, f"policy must be one of {', '.join(map(repr, TIMM_AUTOAUGMENT_POLICIES))}", policy)
        self.policy = policy
        _timm_hparams(self, n, magnitude_std, magnitude_max, interpolation, fill, translate_pct, translate_const)

    def fields(self):
        return {"policy": float(TIMM_AUTOAUGMENT_POLICIES[self.policy]), **_timm_hp_fields(self)}

    @classmethod
    def from_timm(cls, aa) -> "TimmAutoAugment":
        """The op equivalent to timm's ``AutoAugment`` object ``aa`` (``auto_augment_transform``
        / ``create_transform(auto_augment="original-mstd0.5")``): its ``policy`` must be one of
        timm's four tables (names, probs, magnitudes compared to
        ``timm.data.auto_augment.auto_augment_policy``) with one set of hparams; else
        ``ValueError`` naming what differs."""
        n = "TimmAutoAugment.from_timm"
        if not hasattr(aa, "policy") or isinstance(aa.policy, str):
            raise ValueError(f"{n}: expected timm's AutoAugment (with .policy), got {type(aa).__name__}")
        from timm.data import auto_augment as A
        got = [[(o.name, o.prob, o.magnitude) for o in sp] for sp in aa.policy]
        name = None
        for nm in TIMM_AUTOAUGMENT_POLICIES:
            want = [[(o.name, o.prob, o.magnitude) for o in sp] for sp in A.auto_augment_policy(nm, {})]
            if got == want:
                name = nm
                break
        if name is None:
            raise ValueError(f"{n}: the policy is not one of timm's {', '.join(TIMM_AUTOAUGMENT_POLICIES)} tables "
                             "(a custom policy is not supported)")
        hp = _timm_shared(n, [o for sp in aa.policy for o in sp], same_strength=False)
        return cls(policy=name, **hp)

    @classmethod
    def _example(cls):
        return cls("originalr", magnitude_std=0.5, magnitude_max=11, interpolation="bilinear",
                   fill=(4, 5, 6), translate_pct=0.2, translate_const=90)


def _timm_hparams(self, n, magnitude_std, magnitude_max, interpolation, fill, translate_pct, translate_const):
    if not (magnitude_std == float("inf") or (_num(magnitude_std) and 0 <= magnitude_std <= 1000)):
        _fail(n, "magnitude_std must be a number in [0, 1000] or inf", magnitude_std)
    self.magnitude_std = float(magnitude_std)
    if magnitude_max is not None and not (_num(magnitude_max) and 0 < magnitude_max <= 1000):
        _fail(n, "magnitude_max must be None or a number in (0, 1000]", magnitude_max)
    self.magnitude_max = None if magnitude_max is None else float(magnitude_max)
    if interpolation not in _TIMM_INTERP:
        _fail(n, "interpolation must be 'bilinear', 'bicubic' or 'random'", interpolation)
    self.interpolation = interpolation
    self.fill = _tf_fill(n, fill)
    if not (_num(translate_pct) and abs(translate_pct) <= 100):
        _fail(n, "translate_pct must be a number in [-100, 100]", translate_pct)
    self.translate_pct = float(translate_pct)
    if not (_num(translate_const) and abs(translate_const) <= 1e5):
        _fail(n, "translate_const must be a number in [-1e5, 1e5]", translate_const)
    self.translate_const = float(translate_const)


def _timm_hp_fields(self):
    return {"magnitude_std": -1.0 if self.magnitude_std == float("inf") else self.magnitude_std,
            "magnitude_max": 10.0 if not self.magnitude_max else self.magnitude_max,
            "translate_pct": self.translate_pct, "translate_const": self.translate_const,
            "interp": _TIMM_INTERP[self.interpolation], "fill": self.fill}


def _timm_shared(n, ops, same_strength=True):
    """the values timm's AugmentOps `ops` must share for fastq (prob and magnitude too when
    same_strength) -> TimmRandAugment / TimmAutoAugment keyword arguments; ValueError naming
    the first that differs"""
    seen = {}
    for o in ops:
        hp = o.hparams
        rs = o.kwargs.get("resample")
        fc = o.kwargs.get("fillcolor")
        key = {"magnitude_std": o.magnitude_std, "magnitude_max": o.magnitude_max,
               "resample": tuple(rs) if isinstance(rs, (list, tuple)) else rs,
               "fillcolor": tuple(fc) if isinstance(fc, (list, tuple)) else fc,
               "translate_pct": hp.get("translate_pct", 0.45), "translate_const": hp.get("translate_const", 250)}
        if same_strength:
            key = {"prob": o.prob, "magnitude": o.magnitude, **key}
        for k, v in key.items():
            if k in seen and seen[k] != v:
                raise ValueError(f"{n}: the ops' {k} differ ({seen[k]!r} vs {v!r} for {o.name}); fastq shares one "
                                 "value")
            seen[k] = v
    out = {"interpolation": _timm_resample(n, seen.pop("resample"))}
    fc = seen.pop("fillcolor")
    fill = (fc,) * 3 if _num(fc) else fc
    if not (isinstance(fill, tuple) and len(fill) == 3 and all(_num(v) and float(v).is_integer() for v in fill)):
        raise ValueError(f"{n}: fillcolor must be 3 integers (or one), got {fc!r}")
    out["fill"] = fill
    mstd = seen.pop("magnitude_std")
    out["magnitude_std"] = 0.0 if not mstd or mstd < 0 else float(mstd)  # timm: only > 0 draws
    out["magnitude_max"] = seen.pop("magnitude_max") or None
    out.update(seen)
    return out


# timm's _AUGMIX_TRANSFORMS
TIMM_AUGMIX_TRANSFORMS = ("AutoContrast", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing",
                          "SharpnessIncreasing", "Equalize", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
                          "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")


class TimmAugMix(Op):
    """timm's ``AugMixAugment`` (``augment_and_mix_transform("augmix-m<M>-w<W>-d<D>-a<A>[-mstd<S>]",
    hparams)``, timm 1.0, ``blended=False``); the defaults are ``augment_and_mix_transform("augmix",
    None)`` (magnitude 3, width 3, depth -1, alpha 1, magnitude_std inf).  weights =
    float32(Dirichlet([alpha] * width)) (gammas normalised; alpha 1: exponentials), m =
    float32(Beta(alpha, alpha)); ``width`` (<= 4) chains of depth ``depth`` (-1: U{1..3}
    per chain) of ops drawn uniformly from ``ops`` (default timm's ``_AUGMIX_TRANSFORMS``)
    with replacement, each a timm AugmentOp with prob 1 at ``magnitude`` (noise
    ``magnitude_std``, inf: uniform(0, magnitude); clip ``magnitude_max``), applied to the
    original; ``mixed = sum_j w_j * float32(chain_j)`` in float32, clipped, truncated to
    uint8; the output is PIL's ``Image.blend(image, mixed, m)``.  Explain: ``weights``,
    ``m``, ``chains`` (the op names of each chain) and ``rng_key`` (the stream the ops'
    magnitudes, signs and resamples are drawn from; the record has no room for them)."""

    kind = _K["TimmAugMix"]

    def __init__(self, magnitude: float = 3, width: int = 3, depth: int = -1, alpha: float = 1.0,
                 magnitude_std: float = float("inf"), magnitude_max: Optional[float] = None,
                 ops: Optional[Sequence[str]] = None, interpolation: str = "random", fill: Fill = (128, 128, 128),
                 translate_pct: float = 0.45, translate_const: float = 250) -> None:
        n = "TimmAugMix"
        if not (_num(magnitude) and 0 <= magnitude <= 1000):
            _fail(n, "magnitude must be a number in [0, 1000]", magnitude)
        self.magnitude = float(magnitude)
        self.width = _int_in(n, "width", width, 1, 4)
        if depth != -1:
            depth = _int_in(n, "depth (-1: random 1..3)", depth, 1, 3)
        self.depth = int(depth)
        if not (_num(alpha) and 0.05 <= alpha <= 100):
            _fail(n, "alpha must be a number in [0.05, 100]", alpha)
        self.alpha = float(alpha)
        self.ops = _timm_ops(n, TIMM_AUGMIX_TRANSFORMS if ops is None else ops)
        _timm_hparams(self, n, magnitude_std, magnitude_max, interpolation, fill, translate_pct, translate_const)

    def fields(self):
        return {"magnitude": self.magnitude, "width": float(self.width), "depth": float(self.depth),
                "alpha": self.alpha, **_timm_hp_fields(self),
                "ops": float(sum(1 << TIMM_OPS.index(o) for o in self.ops))}

    @classmethod
    def from_timm(cls, am) -> "TimmAugMix":
        """The op equivalent to timm's ``AugMixAugment`` object ``am`` (``augment_and_mix_transform``
        / ``create_transform(auto_augment="augmix-m5-w4-d2")``); ``ValueError`` naming what fastq
        cannot do exactly: ``blended=True``, width > 4, depth > 3, an op outside
        :data:`TIMM_OPS` or repeated, ops with prob < 1 or differing magnitude / hparams."""
        n = "TimmAugMix.from_timm"
        for a in ("ops", "alpha", "width", "depth", "blended"):
            if not hasattr(am, a):
                raise ValueError(f"{n}: expected timm's AugMixAugment (with .{a}), got {type(am).__name__}")
        if am.blended:
            raise ValueError(f"{n}: blended=True (timm's per-chain blend mode) is not supported")
        if not (isinstance(am.width, int) and 1 <= am.width <= 4):
            raise ValueError(f"{n}: width must be an int in [1, 4], got {am.width!r}")
        depth = am.depth if am.depth > 0 else -1
        if not (depth == -1 or depth <= 3):
            raise ValueError(f"{n}: depth must be <= 3 (or <= 0: random 1..3), got {am.depth!r}")
        ops = list(am.ops)
        names = [getattr(o, "name", None) for o in ops]
        for nm in names:
            if nm not in TIMM_OPS:
                raise ValueError(f"{n}: timm op {nm!r} is not implemented (fastq has: {', '.join(TIMM_OPS)})")
        if not names or len(set(names)) != len(names):
            raise ValueError(f"{n}: the ops must be distinct and not empty, got {names}")
        hp = _timm_shared(n, ops)
        if hp.pop("prob") < 1.0:
            raise ValueError(f"{n}: ops with prob < 1 are not supported (timm's augmix_ops use 1)")
        return cls(width=am.width, depth=depth, alpha=am.alpha, ops=names, **hp)

    @classmethod
    def _example(cls):
        return cls(5, width=4, depth=2, alpha=0.5, magnitude_std=0.5, magnitude_max=12,
                   ops=["Rotate", "Equalize"], interpolation="bicubic", fill=7, translate_pct=0.3,
                   translate_const=11)
