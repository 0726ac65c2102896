"""Pipeline(pad="batch"): variable-size images, each batch padded to its own largest image.

A detection chain ends at a variable size (``ResizeShortestEdge(800, max_size=1333)``,
``Pad(multiple=32)``).  With ``pad="batch"`` the chain may end there: every batch comes out
as ONE contiguous array ``(B, Hb, Wb, C)`` (NCHW: ``(B, C, Hb, Wb)``), where ``Hb, Wb`` is
the batch's largest image rounded up to ``pad_multiple``; each image sits at the top-left,
the rest is ``pad_fill`` (masks: the targets' ``mask_fill``).  One more output,
``image_sizes`` (B, 2) int32, gives each image's valid (h, w): the chain's output size.

How (docs/architecture.md "Batch padding"):

* the slot's capacity ``(cap_h, cap_w)`` is the largest size the chain can give, derived
  from its ops by :func:`chain_bound` (or ``max_image_size=(H, W)``), rounded up to
  ``pad_multiple``; the ring's slots are sized by it, once, as for a fixed-size chain;
* fastq appends ``Pad(size=(cap_h, cap_w), fill=pad_fill)`` to the chain (before a final
  ``Normalize``), so each worker writes its sample at the capacity stride with the padding
  already filled, exactly as a fixed ``Pad`` chain does, and its valid size (the input size
  of that Pad's explain record) into ``image_sizes``;
* when the consumer takes the batch, :meth:`BatchPad.apply` repacks the images (and the
  masks) in place, natively with the GIL released (``fq_batch_pad_compact``: a forward
  move of lines, never reading what it already overwrote), to ``(B, Hb, Wb, C)`` at the
  start of the slot's image block, and hands out numpy views of it: zero copy, the arrays
  keep the slot's lease like every batch.

So a batch equals the fixed-``Pad(size=capacity)`` batch cropped to ``(Hb, Wb)``, bit for
bit.  Boxes, keypoints and ``image_info`` are those of the chain (Pad moves nothing).
"""
import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["chain_bound", "pad_chain", "BatchPad", "UnboundedChainError"]


class UnboundedChainError(ValueError):
    """pad="batch" over a chain whose output size has no upper bound."""


def _round_up(v: int, m: int) -> int:
    return -(-int(v) // m) * m


def _rse_size(h: int, w: int, s: float, max_size: int) -> Tuple[int, int]:
    """ResizeShortestEdge's output size (fq_image_detection.cpp rse_plan, the same double arithmetic)."""
    scale = s / min(h, w)
    nh, nw = (s, scale * w) if h < w else (scale * h, s)
    if max_size > 0 and max(nh, nw) > max_size:
        k = max_size / max(nh, nw)
        nh, nw = nh * k, nw * k
    return max(1, int(nh + 0.5)), max(1, int(nw + 0.5))


def _op_bound(op: Any, hw: Optional[Tuple[int, int]], exact: bool) -> Tuple[Optional[Tuple[int, int]], bool, str]:
    """(the largest output size of `op` for inputs of at most hw, or None: unbounded; whether every
    output has that size; why unbounded).  exact: every input is exactly hw."""
    from fastq._native import _image
    from fastq import ops as O
    name = type(op).__name__
    if isinstance(op, O.ResizeShortestEdge):
        m = op.max_size or 0
        if hw is not None and exact:  # the sizes it gives for this one input size
            outs = [_rse_size(hw[0], hw[1], s, m) for s in op.short]
            return (max(o[0] for o in outs), max(o[1] for o in outs)), len(set(outs)) == 1, ""
        if m:
            return (m, m), False, ""
        return None, False, f"{name}({list(op.short)}) without max_size does not bound the longer side"
    if isinstance(op, O.Resize) and op.shorter_side is not None:
        if hw is not None and exact:  # torchvision: the longer side int(s * long / short)
            s, (h, w) = op.shorter_side, hw
            return ((s, int(s * w / h)) if h <= w else (int(s * h / w), s)), True, ""
        return None, False, f"Resize(shorter_side={op.shorter_side}) does not bound the longer side"
    if isinstance(op, O.Pad) and op.multiple:
        if hw is None:
            return None, False, "Pad(multiple=...) of an unbounded size"
        return (_round_up(hw[0], op.multiple), _round_up(hw[1], op.multiple)), exact, ""
    if isinstance(op, O.RandomZoomOut):
        if hw is None:
            return None, False, "RandomZoomOut of an unbounded size"
        r = op.side_range[1]
        return (max(hw[0], int(hw[0] * r)), max(hw[1], int(hw[1] * r))), False, ""
    if isinstance(op, O.RandomIoUCrop):  # a crop inside its input, or no crop
        return hw, False, "RandomIoUCrop of an unbounded size"
    chain = _image.check_chain(_image.pack_ops(list(O._rows([op]))), "float32")
    if chain["out_size"] is not None:  # a crop, Resize((h, w)), Pad(size), ScaleJitter, ...
        return (int(chain["out_size"][0]), int(chain["out_size"][1])), True, ""
    if chain["keeps_size"]:
        return hw, exact, "the chain keeps the source's size, which is not bounded (Files, Bytes, TFRecord, ...)"
    return None, False, f"{name} gives a variable size that fastq.batchpad has no bound for"


def chain_bound(ops: Sequence[Any], input_size: Optional[Tuple[int, int]] = None) -> Tuple[int, int]:
    """The largest (h, w) the chain can output, from its ops, for any input image (or for
    inputs that all have ``input_size``, e.g. Arrays of one size).  Each dimension is
    bounded separately (a ResizeShortestEdge(max_size=M) bounds both by M).  Raises
    UnboundedChainError naming the op that leaves a side unbounded."""
    hw = None if input_size is None else (int(input_size[0]), int(input_size[1]))
    exact = hw is not None
    culprit = None
    why = "the chain keeps the source's size, which is not bounded (Files, Bytes, TFRecord, ...)"
    for i, op in enumerate(ops):
        nhw, exact, reason = _op_bound(op, hw, exact)
        if nhw is None and (hw is not None or culprit is None):
            culprit, why = (i, type(op).__name__), reason
        hw = nhw
    if hw is None:
        where = f"op {culprit[0]} ({culprit[1]}): " if culprit else ""
        raise UnboundedChainError(
            f"pad='batch': the op chain's output size has no upper bound ({where}{why}), so the batch "
            f"slots cannot be sized; end the chain with a bounded op (ResizeShortestEdge(..., max_size=M), "
            f"Resize((h, w)), a crop, Pad(size=...)) or pass max_image_size=(H, W)")
    return hw


def _size2(name: str, v: Any) -> Tuple[int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (v, v)
    try:
        h, w = v
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an int or (height, width), got {v!r}") from None
    for x in (h, w):
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 1 <= int(x) <= 32768:
            raise ValueError(f"{name} must be positive ints <= 32768, got {v!r}")
    return int(h), int(w)


def pad_chain(ops: Any, *, input_size: Optional[Tuple[int, int]], pad_multiple: int, pad_fill: Any,
              max_image_size: Optional[Any]) -> Tuple[Tuple[Any, ...], Tuple[int, int], int]:
    """(the chain with Pad(size=capacity) appended, capacity (h, w), explain index of that Pad)."""
    from fastq import ops as O
    if isinstance(ops, O.Op):
        ops = (ops,)
    ops = tuple(ops or ())
    for i, op in enumerate(ops):
        if not isinstance(op, O.Op):
            raise ValueError(f"compile_ops: op {i} is not a fastq.ops op: {op!r}")
    if len(list(O._rows(ops))) >= O.MAX_OPS:
        raise ValueError(f"pad='batch' appends a Pad to the chain: at most {O.MAX_OPS - 1} ops (each op inside "
                         f"a composition counts)")
    if isinstance(pad_multiple, bool) or not isinstance(pad_multiple, numbers.Integral) or \
            not 1 <= pad_multiple <= 4096:
        raise ValueError(f"pad_multiple must be an int in [1, 4096], got {pad_multiple!r}")
    if ops and isinstance(ops[-1], O.RandomErasing):
        raise ValueError("pad='batch' does not take RandomErasing (it draws its box on the whole output, "
                         "which would include the batch padding)")
    tail: Tuple[Any, ...] = ()
    if ops and isinstance(ops[-1], O.Normalize):
        ops, tail = ops[:-1], ops[-1:]
    if max_image_size is not None:
        bound = _size2("max_image_size", max_image_size)
    else:
        bound = chain_bound(ops, input_size)
    cap = (_round_up(bound[0], pad_multiple), _round_up(bound[1], pad_multiple))
    if max(cap) > 32768:
        raise ValueError(f"pad='batch': the capacity {cap} is over 32768 per side")
    sizes_op = len(list(O._rows(ops)))
    return ops + (O.Pad(size=cap, fill=pad_fill),) + tail, cap, sizes_op


class BatchPad:
    """What the consumer does to each batch of a pad="batch" pipeline (see the module doc).
    ``outputs``: for each output to repack, (its index, its per-sample shape in the ring, dtype):
    the images (output 0) and the outputs named in PLANE_OUTPUTS whose last two dimensions
    are the capacity."""

    PLANE_OUTPUTS = ("masks", "instance_masks")

    def __init__(self, cap: Tuple[int, int], multiple: int, sizes_index: int,
                 outputs: List[Tuple[int, Tuple[int, ...], np.dtype]], layout: str) -> None:
        self.cap = cap
        self.multiple = multiple
        self.sizes_index = sizes_index
        self.layout = layout
        self.outputs = outputs  # (index, ring shape per sample, dtype) of the images, masks

    def public_spec(self, specs: List[Tuple[Tuple[int, ...], np.dtype]]) -> List[Tuple[Tuple[Optional[int], ...], np.dtype]]:
        """output_spec with None for the variable height / width."""
        out: List[Tuple[Tuple[Optional[int], ...], np.dtype]] = list(specs)
        for k, shape, _ in self.outputs:
            s: List[Optional[int]] = list(specs[k][0])
            s[self._hdim(k, shape)], s[self._hdim(k, shape) + 1] = None, None
            out[k] = (tuple(s), specs[k][1])
        return out

    def _hdim(self, k: int, shape: Tuple[int, ...]) -> int:
        """Where H is in the per-sample shape: images NHWC (H, W, C): 0; else the last two."""
        return 0 if k == 0 and self.layout == "NHWC" else len(shape) - 2

    def batch_size_of(self, sizes: np.ndarray) -> Tuple[int, int]:
        """(Hb, Wb): the largest valid size of the batch, rounded up to the multiple."""
        m = self.multiple
        return _round_up(int(sizes[:, 0].max()), m), _round_up(int(sizes[:, 1].max()), m)

    def apply(self, batch: Tuple[np.ndarray, ...]) -> Tuple[np.ndarray, ...]:
        """Repack the batch in place (GIL released) and return views of the slot."""
        from fastq._native import _image
        sizes = batch[self.sizes_index]
        n = sizes.shape[0]
        if n == 0:
            return batch
        hb, wb = self.batch_size_of(sizes)
        cap_h, cap_w = self.cap
        out = list(batch)
        for k, shape, _ in self.outputs:
            arr = batch[k]
            h0 = self._hdim(k, shape)
            lead = int(np.prod(shape[:h0], dtype=np.int64))   # planes per sample before H
            trail = int(np.prod(shape[h0 + 2:], dtype=np.int64))  # values per pixel after W
            px = trail * arr.itemsize
            _image.batch_pad_compact(arr, n * lead, cap_h, cap_w, hb, wb, px)
            new_shape = (n,) + tuple(shape[:h0]) + (hb, wb) + tuple(shape[h0 + 2:])
            count = int(np.prod(new_shape, dtype=np.int64))
            out[k] = arr.reshape(-1)[:count].reshape(new_shape)
        return tuple(out)
