"""Compositions: RandomApply / RandomChoice / RandomOrder (csrc/image/api/fq_image_compose.cpp)."""
import math
from typing import Optional, Sequence, Union

from fastq.ops._base import MAX_OPS, Op, _K, _fail, _num, _prob
from fastq.ops._color import Normalize

# the public names of this family (fastq.ops re-exports them)
__all__ = ["RandomApply", "RandomChoice", "RandomOrder"]

#
# torchvision.transforms.v2 RandomApply / RandomChoice / RandomOrder.  Packed flat: the
# composition's record (its number of direct children first) followed by each child's
# rows (a child may be a composition: nesting is allowed).  Every record takes one of the
# MAX_OPS (16) places.  The composition draws first (one uniform; RandomOrder a Fisher-Yates
# permutation), then the children that run draw, in the order they run; children that do
# not run draw nothing.  Size rule (checked by the C core, naming the op): the children of
# RandomApply and RandomOrder keep the image size; the alternatives of RandomChoice all keep
# it or all give one fixed size.  Explain: docs/ops.md "Compositions".


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

    @classmethod
    def _example(cls):
        from fastq.ops._color import Invert
        from fastq.ops._geometry import HorizontalFlip
        return cls([Invert(0.5), HorizontalFlip()], p=0.3)


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

    @classmethod
    def _example(cls):
        from fastq.ops._color import Equalize, Invert, Posterize
        return cls([Invert(), Equalize(), Posterize(3)], p=[1, 2, 1])


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

    @classmethod
    def _example(cls):
        from fastq.ops._color import Equalize, Invert
        return cls([Invert(), RandomApply(Equalize(), 0.5)])
