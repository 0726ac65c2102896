"""Batch-level MixUp / CutMix: ``fastq.Pipeline(..., mix=fastq.MixUpCutMix(...))``.

    mix = fastq.MixUpCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, switch_prob=0.5,
                            label_smoothing=0.1, num_classes=1000)
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...], mix=mix)
    for images, soft_labels in pipe:   # soft_labels: float32 (64, 1000), rows sum to 1
        ...

Semantics: torchvision.transforms.v2 MixUp / CutMix with timm's ``Mixup`` arguments
(see docs/mix.md and csrc/image/fq_batch_mix.h).  The partner of row i is row i - 1
(row 0's is the last row: torchvision's ``batch.roll(1, 0)``); MixUp blends the two
images with lambda ~ Beta(alpha, alpha), CutMix pastes a box of the partner and
corrects lambda to the pasted area (``correct_lam=False``: lambda stays the Beta draw;
``cutmix_minmax``: timm's box of uniform sizes, lambda always the area's); the integer
labels become one-hot rows with label smoothing, mixed with the same lambda.
``mode="batch"``: one draw per batch; ``mode="elem"``: one draw per row (applied or
not, MixUp or CutMix, lambda, box); ``mode="pair"`` (timm): rows i and n - 1 - i are
each other's partners and share one draw (CutMix swaps the box between them).

Every draw is a function of (seed, epoch, batch index) only, so the batches are
bit-identical for any number of workers and across ``state_dict`` /
``load_state_dict``.  The mixing runs in native code with the GIL released, in place
in the batch's slot, when the consumer takes the batch; the soft labels of a native
image source (Files, Bytes, Arrays, Folder, TFRecord, WebDataset) are written into
an extra output of the slot.  :meth:`fastq.Pipeline.explain_batch` returns the draws.
"""
import numbers
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from fastq.ops import layout_name

__all__ = ["MixUpCutMix", "MixUp", "CutMix"]

_MODES = ("batch", "elem", "pair")  # their index is enum fq_mix_mode (csrc/image/fq_batch_mix.h)


def _minmax(v):
    try:
        lo, hi = v
    except (TypeError, ValueError):
        raise ValueError(f"cutmix_minmax must be None or (min, max), got {v!r}") from None
    for x in (lo, hi):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(float(x)):
            raise ValueError(f"cutmix_minmax must be two finite numbers, got {v!r}")
    if not 0.0 <= float(lo) < float(hi) <= 1.0:
        raise ValueError(f"cutmix_minmax needs 0 <= min < max <= 1, got {v!r}")
    return (float(lo), float(hi))


def _prob(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 <= float(v) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    return float(v)


class MixUpCutMix:
    """MixUp and/or CutMix over whole batches (timm ``Mixup`` argument names).

    Parameters
    ----------
    mixup_alpha : float
        Beta(alpha, alpha) of MixUp's lambda; 0 disables MixUp.
    cutmix_alpha : float
        Beta(alpha, alpha) of CutMix's lambda; 0 disables CutMix.
    cutmix_minmax : None or (min, max)
        timm's ``cutmix_minmax``: the CutMix box is ``cut_h = randint(int(H * min),
        int(H * max))`` (end-exclusive), ``cut_w`` likewise, its corner uniform among
        the positions inside the image (timm's ``rand_bbox_minmax``), no Beta draw,
        and lambda is the area's whatever ``correct_lam`` says.  As in timm, it
        enables CutMix: ``cutmix_alpha`` becomes 1.0.  Needs ``0 <= min < max <= 1``
        and, for the image size, ``int(size * min) < int(size * max)`` (ValueError
        when the Pipeline is built; Python sources: at the first batch).
    switch_prob : float
        With both enabled, the probability of CutMix (else MixUp).
    prob : float
        Probability that a batch (mode "batch") or a row (mode "elem") is mixed at
        all; otherwise its images are left as they are and its labels are the
        smoothed one-hot rows.
    label_smoothing : float
        timm's smoothing: off = s / num_classes, on = 1 - s + off.
    num_classes : int
        Required: the width of the soft labels (float32, per-sample shape
        ``(num_classes,)``).  A label outside ``[0, num_classes)`` is a ValueError
        naming the sample.
    mode : "batch", "elem" or "pair"
        One draw per batch (torchvision, timm "batch"), one per row (timm "elem";
        the partner is still the previous row) or one per pair (timm "pair": rows i
        and n - 1 - i, i < n / 2, are mixed with each other with one draw; the batch
        size must be even, and so must a final partial batch: ValueError when the
        Pipeline is built where the sizes are known, else at that batch).
    correct_lam : bool
        True (timm's default, torchvision): CutMix's lambda is corrected to the pasted
        area.  False: it stays the Beta draw (timm ``correct_lam=False``), so the labels
        no longer follow the clipped box.
    seed : int or None
        Seed of the draws; None: the source's ``seed`` option (0 for sources
        without one).
    layout : None, "NHWC" or "NCHW"
        Only for a Python iterable source (native image sources know their layout);
        None means NHWC.

    The partner (roll, not timm's flip) and the Beta CutMix box (torchvision's
    ``make_params``, not timm's ``rand_bbox``) follow torchvision in modes "batch" and
    "elem"; mode "pair" is timm's flip by construction.
    """

    mixup_alpha: float
    cutmix_alpha: float
    switch_prob: float
    prob: float
    label_smoothing: float
    num_classes: int
    mode: str
    correct_lam: bool
    cutmix_minmax: Optional[Tuple[float, float]]
    seed: Optional[int]
    layout: Optional[str]

    def __init__(self, mixup_alpha: float = 1.0, cutmix_alpha: float = 0.0, switch_prob: float = 0.5,
                 prob: float = 1.0, label_smoothing: float = 0.1, *, num_classes: Optional[int] = None,
                 mode: str = "batch", correct_lam: bool = True,
                 cutmix_minmax: Optional[Tuple[float, float]] = None, seed: Optional[int] = None,
                 layout: Optional[str] = None) -> None:
        for name, v in (("mixup_alpha", mixup_alpha), ("cutmix_alpha", cutmix_alpha)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if cutmix_minmax is not None:
            cutmix_minmax = _minmax(cutmix_minmax)
            cutmix_alpha = 1.0  # timm: "force cutmix alpha == 1.0 when minmax active"
        if not isinstance(correct_lam, (bool, np.bool_)):
            raise ValueError(f"correct_lam must be True or False, got {correct_lam!r}")
        if mixup_alpha <= 0 and cutmix_alpha <= 0:
            raise ValueError("MixUpCutMix: mixup_alpha or cutmix_alpha must be > 0 (0 disables that one)")
        if num_classes is None:
            raise ValueError("MixUpCutMix: num_classes is required (the width of the soft labels)")
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
            raise ValueError(f"num_classes must be an int >= 1, got {num_classes!r}")
        ls = label_smoothing
        if isinstance(ls, bool) or not isinstance(ls, numbers.Real) or not 0.0 <= float(ls) < 1.0:
            raise ValueError(f"label_smoothing must be a number in [0, 1), got {ls!r}")
        if mode not in _MODES:
            raise ValueError(f"mode must be 'batch', 'elem' or 'pair', got {mode!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
        if layout is not None:
            layout = layout_name(layout, "MixUpCutMix")
        self.mixup_alpha = float(mixup_alpha)
        self.cutmix_alpha = float(cutmix_alpha)
        self.switch_prob = _prob("switch_prob", switch_prob)
        self.prob = _prob("prob", prob)
        self.label_smoothing = float(ls)
        self.num_classes = int(num_classes)
        self.mode = mode
        self.correct_lam = bool(correct_lam)
        self.cutmix_minmax = cutmix_minmax
        self.seed = None if seed is None else int(seed)
        self.layout = layout

    def _params(self) -> Tuple[Any, ...]:
        return (self.mixup_alpha, self.cutmix_alpha, self.switch_prob, self.prob, self.label_smoothing,
                self.num_classes, _MODES.index(self.mode), self.correct_lam, self.cutmix_minmax)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(mixup_alpha={self.mixup_alpha}, cutmix_alpha={self.cutmix_alpha}, "
                f"cutmix_minmax={self.cutmix_minmax}, switch_prob={self.switch_prob}, prob={self.prob}, "
                f"label_smoothing={self.label_smoothing}, num_classes={self.num_classes}, mode={self.mode!r}, "
                f"correct_lam={self.correct_lam}, seed={self.seed})")


def MixUp(alpha: float = 1.0, *, num_classes: Optional[int] = None, label_smoothing: float = 0.0,
          prob: float = 1.0, mode: str = "batch", seed: Optional[int] = None,
          layout: Optional[str] = None) -> MixUpCutMix:
    """MixUp alone (torchvision.transforms.v2.MixUp: alpha 1.0, no smoothing)."""
    return MixUpCutMix(mixup_alpha=alpha, cutmix_alpha=0.0, prob=prob, label_smoothing=label_smoothing,
                       num_classes=num_classes, mode=mode, seed=seed, layout=layout)


def CutMix(alpha: float = 1.0, *, num_classes: Optional[int] = None, label_smoothing: float = 0.0,
           prob: float = 1.0, mode: str = "batch", correct_lam: bool = True,
           cutmix_minmax: Optional[Tuple[float, float]] = None, seed: Optional[int] = None,
           layout: Optional[str] = None) -> MixUpCutMix:
    """CutMix alone (torchvision.transforms.v2.CutMix: alpha 1.0, no smoothing)."""
    return MixUpCutMix(mixup_alpha=0.0, cutmix_alpha=alpha, prob=prob, label_smoothing=label_smoothing,
                       num_classes=num_classes, mode=mode, correct_lam=correct_lam, cutmix_minmax=cutmix_minmax,
                       seed=seed, layout=layout)


def _has_no_labels(backend, native):
    """True when the backend surely writes no labels (its output 1 would be
    something else, e.g. the sample index).  ``native``: a native image backend
    (fastq.sources.images; the Pipeline says which, so this module imports no source)."""
    if native:
        return backend.labels is None and getattr(backend.source, "_label_output", None) is None
    if hasattr(backend, "label_spec"):  # Stream
        return not backend.label_spec
    return False


def _num_samples(backend, native):
    """Samples per epoch of a native image backend, or None when unknown."""
    if not native:
        return None
    try:
        return len(backend.source)
    except TypeError:
        return None


class _BoundMix:
    """A MixUpCutMix bound to one Pipeline's backend: which outputs are the image
    and the labels, the soft-label output, and the per-batch native call.  ``native``:
    the backend is a native image backend (``fastq.sources.images._ImageBackend``)."""

    LABEL = 1  # the labels are the output after the image (every fastq source)

    def __init__(self, mix: MixUpCutMix, backend: Any, batch_size: int, native: bool) -> None:
        from fastq._native import _image
        self.mix = mix
        self.backend = backend
        self.batch_size = batch_size
        self.params = mix._params()
        specs = backend.output_spec()
        src = getattr(backend, "source", None)
        what = type(getattr(src, "obj", src)).__name__ if src is not None else "the source"
        if _has_no_labels(backend, native) or len(specs) < 2:
            raise ValueError(f"mix=MixUpCutMix needs class labels, but {what} gives no labels "
                             f"(pass labels=... to the source, or label_key for TFRecord)")
        (ishape, idt), (lshape, ldt) = specs[0], specs[1]
        ldt = np.dtype(ldt)
        if ldt.name not in _image.MIX_LABEL_TYPES or tuple(lshape) not in ((), (1,)):
            raise ValueError(f"mix=MixUpCutMix needs one integer class label per sample as the output after the "
                             f"image; {what}'s output 1 is {ldt} with per-sample shape {tuple(lshape)}")
        idt = np.dtype(idt)
        if idt.name not in _image.MIX_DTYPES or len(ishape) != 3:
            raise ValueError(f"mix=MixUpCutMix needs images of rank 3 (per sample) and dtype uint8, float32, "
                             f"float16 or bfloat16; the source gives {idt} {tuple(ishape)}")
        compiled = getattr(backend, "compiled", None)
        layout = getattr(compiled, "layout", None) or mix.layout or "NHWC"
        self.layout = layout
        self.layout_code = 0 if layout == "NHWC" else 1
        self.hw = (ishape[0], ishape[1]) if layout == "NHWC" else (ishape[1], ishape[2])
        self.dtype_code = _image.MIX_DTYPES[idt.name]
        self.ltype = _image.MIX_LABEL_TYPES[ldt.name]
        self.seed = mix.seed if mix.seed is not None else int(getattr(backend, "seed", 0) or 0)
        # native image tasks write only their own outputs: the slot can hold one more
        # (the soft labels); Python producers copy whole samples, so they get none
        self.in_ring = bool(native)
        self.soft_spec = ((mix.num_classes,), np.dtype(np.float32))
        mm = mix.cutmix_minmax
        if mm is not None and any(int(s * mm[0]) >= int(s * mm[1]) for s in self.hw):
            raise ValueError(f"MixUpCutMix: cutmix_minmax={mm} gives no box size for {self.hw[0]} x {self.hw[1]} "
                             f"images: int(size * min) must be < int(size * max) for the height and the width "
                             f"(timm's randint(int(size * min), int(size * max)) raises there too)")
        if mix.mode == "pair":
            if batch_size % 2:
                raise ValueError(f"MixUpCutMix(mode='pair') needs an even batch_size (pairs of rows i and "
                                 f"n - 1 - i, as timm), got batch_size={batch_size}")
            total = _num_samples(backend, native)
            if total is not None and not getattr(backend, "drop_remainder", True) and total % batch_size % 2:
                raise ValueError(f"MixUpCutMix(mode='pair') needs even batches, but the last batch of each epoch "
                                 f"has {total % batch_size} rows ({total} samples, batch_size={batch_size}): "
                                 f"pass drop_remainder=True")

    def public_spec(self, specs: List[Tuple[Tuple[int, ...], np.dtype]]) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        out = list(specs)
        out[self.LABEL] = self.soft_spec
        return out

    def ring_spec(self, specs: List[Tuple[Tuple[int, ...], np.dtype]]) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        return list(specs) + [self.soft_spec] if self.in_ring else list(specs)

    def apply(self, arrays: Tuple[np.ndarray, ...], epoch: int, batch_index: int) -> Tuple[np.ndarray, ...]:
        from fastq._native import _image
        images, labels = arrays[0], arrays[self.LABEL]
        n = images.shape[0]
        self._check_rows(n, epoch, batch_index)
        if self.in_ring:
            soft = arrays[-1]
            arrays = arrays[:-1]
        else:
            soft = np.empty((n, self.mix.num_classes), np.float32)
        row, msg = _image.mix_apply(self.params, self.seed, epoch, batch_index, images, self.dtype_code,
                                    self.layout_code, labels.reshape(n), self.ltype, soft)
        if row >= 0:
            bad = int(labels.reshape(n)[row])
            raise ValueError(f"MixUpCutMix: label {bad} of {self._name(epoch, batch_index, row)} is outside "
                             f"[0, num_classes={self.mix.num_classes}) (batch {batch_index} of epoch {epoch}, row {row})")
        out = list(arrays)
        out[self.LABEL] = soft
        return tuple(out)

    def _check_rows(self, n, epoch, batch_index):
        if self.mix.mode == "pair" and n % 2:
            raise ValueError(f"MixUpCutMix(mode='pair') needs even batches, but batch {batch_index} of epoch {epoch} "
                             f"has {n} rows (a final partial batch): pass drop_remainder=True")

    def _name(self, epoch, batch_index, row):
        b = self.backend
        if hasattr(b, "order"):
            index = int(b.order(epoch)[batch_index * self.batch_size + row])
            src = b.source
            where = ""
            if hasattr(src, "path"):
                try:
                    where = f" ({src.path(index)})"
                except Exception:  # noqa: BLE001 - the path is a courtesy
                    where = ""
            return f"sample {index}{where}"
        return f"the sample in row {row}"

    def explain(self, epoch: int, batch_index: int, rows: int) -> Dict[str, Any]:
        from fastq._native import _image
        h, w = self.hw
        self._check_rows(rows, epoch, batch_index)
        draws = _image.mix_draws(self.params, self.seed, epoch, batch_index, rows, h, w)
        pair = self.mix.mode == "pair"
        partner = [rows - 1 - i if pair else (i - 1) % rows for i in range(rows)]
        out: Dict[str, Any] = {"epoch": epoch, "batch_index": batch_index, "seed": self.seed, "rows": rows,
                               "per": self.mix.mode, "partner": partner,
                               "num_classes": self.mix.num_classes, "label_smoothing": self.mix.label_smoothing,
                               "image_size": (h, w), "layout": self.layout}
        if self.mix.mode == "batch":
            out.update(draws[0])
        else:  # per row; in mode pair rows i and n - 1 - i share draw i
            out["draws"] = draws if not pair else [dict(draws[min(i, rows - 1 - i)]) for i in range(rows)]
        return out
