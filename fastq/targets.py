"""fastq.targets - dense targets (boxes, keypoints, masks) that follow an image through
its op chain.

Every random draw of a sample is in its explain record (the dict ``process_array`` /
``process_encoded`` / ``Pipeline.explain`` return), so the targets of a sample are a pure
function of (explain record, targets): no second draw, the same draws by construction.
The native rules (csrc/image/fq_image_targets*.cpp) run with the GIL released.  Rules
per op, conventions and what is not done: docs/targets.md.

Coordinates are continuous pixels of the full-resolution source image (pixel (i, j)
covers [j, j+1) x [i, i+1)), also when the image was decoded by ROI or DCT scaling.
Ops without a target rule (RandAugment, TrivialAugmentWide, AutoAugment, any unknown
kind) raise ``fastq.errors`` UnsupportedError; pixel-only ops leave targets unchanged.
"""

from typing import Any, Dict, Optional, Sequence

import numpy as np

from fastq import _image

__all__ = ["transform_boxes", "transform_keypoints", "transform_mask", "image_info", "rule", "check_ops"]


def rule(op: Any) -> str:
    """``"geometric"``, ``"pixel"`` or ``"refused"``: what the targets do for an op
    (an ``fastq.ops`` instance, class or name)."""
    name = op if isinstance(op, str) else (op.__name__ if isinstance(op, type) else type(op).__name__)
    kind = _image.OP_KINDS.get(name, 0)
    return ("refused", "pixel", "geometric")[_image.targets_rule(kind)]


def check_ops(ops: Any) -> None:
    """Raise UnsupportedFormatError for the first op of ``ops`` (a list of ``fastq.ops``
    ops or a ``CompiledOps``) that targets cannot follow: the check a pipeline with
    targets makes once, before any sample."""
    from fastq import ops as _ops
    packed = ops.packed_ops if isinstance(ops, _ops.CompiledOps) else \
        _image.pack_ops((op.kind, op.fields()) for op in ([ops] if isinstance(ops, _ops.Op) else ops))
    _image.targets_check_ops(packed)


def transform_boxes(explain: Dict[str, Any], boxes: Any, classes: Any = None, *, max_boxes: int,
                    min_area: float = 0.0, min_visibility: float = 0.0, truncate: bool = True) -> Dict[str, Any]:
    """Move ``boxes`` ((N, 4) float xyxy, source pixels) through the sample's ops.

    Per geometric op: the axis-aligned box of the 4 transformed corners, clipped to the
    op's output (as torchvision v2).  A box is dropped when it is empty after clipping,
    its area is < ``min_area`` (output px^2) or its visibility (clipped area / area of the
    same box moved without clipping) is < ``min_visibility``.  The survivors, in input
    order, fill ``max_boxes`` slots; more survivors: ``truncate=True`` keeps the first
    ``max_boxes`` and counts the rest in ``"truncated"``, ``truncate=False`` raises.

    Returns ``{"boxes": (max_boxes, 4) float32 (0 after the count), "classes":
    (max_boxes,) int32 (-1 after), "index": (max_boxes,) int32 (input row, -1 after),
    "num_boxes": int, "truncated": int}``.  ``classes`` None: 0 for every box."""
    b, c, i, n, t = _image.targets_boxes(explain, boxes, classes, int(max_boxes), float(min_area),
                                         float(min_visibility), bool(truncate))
    return {"boxes": b, "classes": c, "index": i, "num_boxes": n, "truncated": t}


def transform_keypoints(explain: Dict[str, Any], keypoints: Any,
                        flip_index: Optional[Sequence[int]] = None) -> np.ndarray:
    """Move ``keypoints`` ((N, K, 3) float x, y, visibility) through the sample's ops ->
    (N, K, 3) float32.  Coordinates move with every geometric op (also of invisible
    points); a point outside the op's output ([0, w] x [0, h]) gets visibility 0.  On each
    applied horizontal flip, point j takes the place of ``flip_index[j]`` (left/right
    swap, e.g. COCO's); vertical flips swap nothing."""
    return _image.targets_keypoints(explain, keypoints, flip_index)


def transform_mask(explain: Dict[str, Any], mask: Any, fill: int = 0) -> np.ndarray:
    """Replay the sample's geometric ops on ``mask`` (HxW uint8 or uint16 at the source
    size) with nearest neighbour -> the output size, same dtype.  Whatever comes from
    outside the image (crop padding, Pad, affine borders) is ``fill`` (e.g. 255 =
    ignore), whatever the image's border mode.  Pixel ops do not touch it."""
    return _image.targets_mask(explain, mask, int(fill))


def image_info(explain: Dict[str, Any]) -> np.ndarray:
    """TF Model Garden's ``image_info`` (4, 2) float32: (original h, w), (scaled h, w),
    (y scale, x scale), (y offset, x offset), so that ``out = src * scale - offset``.
    Flips are ignored (TF flips before resize_and_crop_image); chains with an affine
    op (RandomAffine, Rotate, Shear*, Translate* when applied) raise UnsupportedError."""
    return _image.targets_image_info(explain)
