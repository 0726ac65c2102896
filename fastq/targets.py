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

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fastq._native import _image

__all__ = ["transform_boxes", "transform_keypoints", "transform_mask", "image_info", "rule", "check_ops", "Targets",
           "transform_polygons", "transform_rle", "MASK_SAMPLINGS"]

# How masks, label maps and bitmap instances are resampled by resizes (csrc
# fq_image_targets.h FQ_TGT_*): "center" takes the source pixel under each output
# pixel's centre, where the image's own resampling puts it (TensorFlow's
# tf.image.resize(method="nearest"), bit for bit); "legacy" is OpenCV's INTER_NEAREST,
# floor(x * in / out), as torch's legacy "nearest": labels land up to half an output
# pixel down and right of the image; for parity with pipelines built on it.
MASK_SAMPLINGS = {"center": 0, "legacy": 1}


def _sampling(value: str, where: str) -> int:
    if value not in MASK_SAMPLINGS:
        raise ValueError(f"{where} must be one of {sorted(MASK_SAMPLINGS)}, got {value!r}")
    return MASK_SAMPLINGS[value]


class Targets:
    """Per-sample targets for a native source (``Files`` / ``Bytes`` / ``Arrays(...,
    targets=Targets(...))``): the pipeline then moves each sample's targets with its image
    (natively, in the worker that made the image, from its explain record) and adds
    outputs after the labels: ``boxes`` (max_boxes, 4) float32, ``classes`` (max_boxes,)
    int32 (-1 after the count), ``num_boxes`` () int32, then ``image_info`` (4, 2) float32
    (``image_info=True``; the three box outputs are left out when ``max_boxes=0``, for
    label maps alone), ``keypoints`` (max_boxes, K, 3) float32 of the kept boxes
    (``keypoints`` given) and the mask (out_h, out_w) (``masks`` given); see
    :func:`transform_boxes`, :func:`transform_keypoints`, :func:`transform_mask`,
    :func:`image_info`.

    ``boxes[i]``: an (n_i, 4) array of xyxy source pixels for sample i (n_i may be 0), or
    with ``normalized=True`` fractions of the source image's width and height (the OD-API /
    TF convention: the worker multiplies them by the decoded image's size, in float64
    rounded to float32, before the ops' rules; outputs are in output pixels either way);
    ``classes[i]``: n_i ints (None: 0); ``keypoints[i]``: (n_i, K, 3) (x, y, visibility)
    of each box's instance; ``masks[i]``: an HxW uint8 / uint16 array at the source size.
    A sample whose targets are bad (NaN, outside the image, a mask of another size) or
    too many with ``truncate=False`` fails like a bad image (``on_error`` applies).

    Per-instance masks (Mask R-CNN), one entry per box (None: no mask, an empty one):
    ``instance_polygons[i][k]``: the rings of box k (each (P, 2) or a flat x, y list,
    source pixels), moved with the ops' forward maps and rasterized at the output size
    with pycocotools' algorithm (kept where the image shows the source, not in its fill);
    ``instance_rles[i][k]``: a COCO RLE dict or uint32 runs (column-major, zeros first) at
    the source size; or ``instance_masks[i]``: an (n_i, H, W) array of bitmaps
    (run-length encoded now).  Bitmaps are decoded in the worker and moved with the
    nearest-neighbour mask rule (fill 0).  Output ``instance_masks``
    (max_boxes, out_h, out_w) uint8 of the kept boxes, zeros after the count: B x
    max_boxes x out_h x out_w bytes per batch (docs/targets.md "Instance masks").
    ``instance_mask_size=M`` or ``(M_h, M_w)``: each kept instance inside its output box
    at M_h x M_w instead (Mask R-CNN's mask targets; see :func:`transform_polygons`,
    :func:`transform_rle` with ``box``).

    ``mask_sampling`` ("center", the default, or "legacy"): how resizes pick the label of
    each mask / bitmap instance pixel; see :func:`transform_mask`."""

    def __init__(self, boxes: Sequence[Any], classes: Optional[Sequence[Any]] = None, *, max_boxes: int = 100,
                 min_area: float = 0.0, min_visibility: float = 0.0, truncate: bool = True,
                 image_info: bool = True, keypoints: Optional[Sequence[Any]] = None,
                 flip_index: Optional[Sequence[int]] = None, masks: Optional[Sequence[Any]] = None,
                 mask_fill: int = 0, instance_polygons: Optional[Sequence[Any]] = None,
                 instance_rles: Optional[Sequence[Any]] = None, instance_masks: Optional[Sequence[Any]] = None,
                 instance_mask_size: Any = None, normalized: bool = False, mask_sampling: str = "center",
                 _instances: Optional[Dict[str, np.ndarray]] = None) -> None:
        rows = [np.asarray(b, np.float32).reshape(-1, 4) for b in boxes]
        self.normalized = bool(normalized)
        if self.normalized and (keypoints is not None or instance_polygons is not None):
            raise ValueError("Targets: normalized=True applies to boxes only; give keypoints and instance "
                             "polygons in source pixels (or boxes in pixels too)")
        if classes is None:
            cls = [np.zeros(len(r), np.int32) for r in rows]
        else:
            if len(classes) != len(rows):
                raise ValueError(f"Targets: {len(rows)} samples of boxes but {len(classes)} of classes")
            cls = [np.asarray(c).reshape(-1) for c in classes]
            for i, (r, c) in enumerate(zip(rows, cls)):
                if len(c) != len(r) or (len(c) and c.dtype.kind not in "iu"):
                    raise ValueError(f"Targets: sample {i}: {len(r)} boxes need as many integer classes, got {c!r}")
        if not (isinstance(max_boxes, int) and 0 <= max_boxes <= 1 << 20):
            raise ValueError(f"Targets: max_boxes must be an int in [0, 2**20], got {max_boxes!r}")
        if not (min_area >= 0 and 0 <= min_visibility <= 1):
            raise ValueError("Targets: min_area must be >= 0 and min_visibility in [0, 1]")
        self.n = len(rows)
        self.boxes = np.concatenate(rows) if rows else np.zeros((0, 4), np.float32)
        self.classes = (np.concatenate(cls) if cls else np.zeros(0)).astype(np.int32)
        self.offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=self.offsets[1:])
        self.max_boxes, self.min_area, self.min_visibility = max_boxes, float(min_area), float(min_visibility)
        self.truncate, self.image_info = bool(truncate), bool(image_info)
        self.keypoints = None
        self.flip_index = None if flip_index is None else np.asarray(flip_index, np.int32)
        if keypoints is not None:
            if len(keypoints) != self.n:
                raise ValueError(f"Targets: {self.n} samples of boxes but {len(keypoints)} of keypoints")
            kps = [np.asarray(k, np.float32) for k in keypoints]
            ks = {k.shape[1] for k in kps if k.ndim == 3 and k.shape[0] > 0}
            kk = ks.pop() if len(ks) == 1 else (len(self.flip_index) if self.flip_index is not None and not ks else 0)
            for i, (k, r) in enumerate(zip(kps, rows)):
                if k.size and (k.ndim != 3 or k.shape != (len(r), kk, 3)) or (not k.size and len(r)):
                    raise ValueError(f"Targets: sample {i}: keypoints must be ({len(r)}, K, 3) with one K for all, "
                                     f"got {k.shape}")
            if kk < 1:
                raise ValueError("Targets: keypoints need K >= 1 points per instance")
            self.keypoints = np.concatenate([k.reshape(-1, kk, 3) for k in kps])
        if self.max_boxes == 0 and (len(self.boxes) or self.keypoints is not None):
            raise ValueError("Targets: max_boxes=0 means no box outputs (label maps only), but boxes or keypoints "
                             "were given")
        self.masks = None if masks is None else [np.asarray(m) for m in masks]
        if self.masks is not None and len(self.masks) != self.n:
            raise ValueError(f"Targets: {self.n} samples of boxes but {len(self.masks)} masks")
        if self.masks is not None and (self.masks[0].dtype not in (np.uint8, np.uint16) or
                                       any(m.dtype != self.masks[0].dtype or m.ndim != 2 for m in self.masks)):
            raise ValueError("Targets: masks must be HxW arrays of one dtype, uint8 or uint16")
        self.mask_fill = int(mask_fill)
        self.mask_sampling = mask_sampling
        self._mask_sampling = _sampling(mask_sampling, "Targets: mask_sampling")
        self._out_hw: Optional[Tuple[int, int]] = None
        self.instances = _instances
        if instance_polygons is not None or instance_rles is not None or instance_masks is not None:
            if _instances is not None:
                raise ValueError("Targets: instances given twice")
            self.instances = _build_instances([len(r) for r in rows], instance_polygons, instance_rles,
                                              instance_masks)
        if self.instances is not None and self.max_boxes == 0:
            raise ValueError("Targets: instance masks need boxes (max_boxes >= 1): their rows follow the kept boxes")
        self.instance_mask_size: Optional[Tuple[int, int]] = None
        if instance_mask_size is not None:
            ms = (instance_mask_size, instance_mask_size) if isinstance(instance_mask_size, int) else \
                tuple(instance_mask_size)
            if len(ms) != 2 or not all(isinstance(v, int) and 1 <= v <= 65536 for v in ms):
                raise ValueError(f"Targets: instance_mask_size must be M or (M_h, M_w) in [1, 65536], got "
                                 f"{instance_mask_size!r}")
            if self.instances is None:
                raise ValueError("Targets: instance_mask_size without instance masks")
            self.instance_mask_size = (int(ms[0]), int(ms[1]))

    @classmethod
    def from_dicts(cls, targets: Sequence[Dict[str, Any]], **options: Any) -> "Targets":
        """One dict per sample: ``{"boxes": (n, 4), "classes": (n,), "keypoints": (n, K, 3),
        "mask": (H, W)}`` (classes, keypoints and mask optional, the same keys for all)."""
        def cls_of(t):
            return t.get("classes", np.zeros(len(np.asarray(t["boxes"]).reshape(-1, 4)), np.int32))
        kw: Dict[str, Any] = dict(options)
        if targets and "keypoints" in targets[0]:
            kw["keypoints"] = [t["keypoints"] for t in targets]
        if targets and "mask" in targets[0]:
            kw["masks"] = [t["mask"] for t in targets]
        return cls([t["boxes"] for t in targets], [cls_of(t) for t in targets], **kw)

    @classmethod
    def from_annotations(cls, ann: Any, *, crowd: str = "keep", masks: Optional[bool] = None,
                         instance_masks: bool = False, **options: Any) -> "Targets":
        """The targets of a :class:`fastq.annotations.Annotations` table (COCO, OD-API,
        segmentation pairs), for a source over ``ann.keys`` in the same order:
        ``fastq.sources.Files(ann.keys, targets=Targets.from_annotations(ann))``.

        ``crowd="drop"`` leaves out the objects flagged ``iscrowd`` (their boxes are not
        training targets for most detectors); ``"keep"`` keeps them.  ``max_boxes``
        defaults to the table's largest object count.  ``masks`` (default: when the
        table has label maps) reads every label map (``ann.mask_keys``, 8- or 16-bit
        single-channel PNG; palette PNGs give their indices:
        :func:`fastq.annotations.segmentation.read_label_map`) into memory now; a file
        that cannot be read raises naming it.  ``instance_masks=True``: the
        objects' polygons / RLE masks (COCO ``segmentation``; crowd objects' RLE too when
        kept) become the ``instance_masks`` output, rows aligned with the kept boxes; an
        object without a segmentation gets an empty mask."""
        if crowd not in ("keep", "drop"):
            raise ValueError(f"Targets.from_annotations: crowd must be 'keep' or 'drop', got {crowd!r}")
        boxes, classes = [], []
        for i in range(len(ann)):
            a, b = int(ann.box_offsets[i]), int(ann.box_offsets[i + 1])
            keep = slice(None) if crowd == "keep" else (ann.iscrowd[a:b] == 0)
            boxes.append(ann.boxes[a:b][keep])
            classes.append(ann.classes[a:b][keep])
        kw: Dict[str, Any] = dict(options)
        if instance_masks:
            if ann.seg_kind is None:
                raise ValueError("Targets.from_annotations: instance_masks=True but the annotations have no "
                                 "segmentations (load_coco(..., masks=True))")
            sel = np.arange(len(ann.boxes)) if crowd == "keep" else np.flatnonzero(ann.iscrowd == 0)
            kw["_instances"] = _instances_of(ann, sel)
        kw.setdefault("max_boxes", max([len(b) for b in boxes], default=0))
        if masks is None:
            masks = ann.mask_keys is not None
        if masks:
            if ann.mask_keys is None:
                raise ValueError("Targets.from_annotations: masks=True but the annotations have no label maps")
            from fastq.annotations.segmentation import read_label_map
            kw["masks"] = [read_label_map(path, f"Targets.from_annotations: image {k!r}")
                           for k, path in zip(ann.keys, ann.mask_keys)]
        return cls(boxes, classes, **kw)

    def output_spec(self, out_hw: Tuple[int, int]) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        """The outputs this adds, for images of out_hw = (h, w)."""
        out: List[Tuple[Tuple[int, ...], np.dtype]] = []
        if self.max_boxes > 0:
            out += [((self.max_boxes, 4), np.dtype(np.float32)), ((self.max_boxes,), np.dtype(np.int32)),
                    ((), np.dtype(np.int32))]
        if self.image_info:
            out.append(((4, 2), np.dtype(np.float32)))
        if self.keypoints is not None:
            out.append(((self.max_boxes, self.keypoints.shape[1], 3), np.dtype(np.float32)))
        if self.masks is not None:
            out.append((tuple(out_hw), self.masks[0].dtype))
        if self.instances is not None:
            self._out_hw = (int(out_hw[0]), int(out_hw[1]))
            mh, mw = self.instance_mask_size or self._out_hw
            out.append(((self.max_boxes, mh, mw), np.dtype(np.uint8)))
        return out

    def output_names(self) -> List[str]:
        """The names of :meth:`output_spec`'s outputs, in order (TF Model Garden's)."""
        return ((["boxes", "classes", "num_boxes"] if self.max_boxes > 0 else []) +
                (["image_info"] if self.image_info else []) + (["keypoints"] if self.keypoints is not None else []) +
                (["masks"] if self.masks is not None else []) +
                (["instance_masks"] if self.instances is not None else []))

    def task_args(self) -> Dict[str, Any]:
        if self.instances is not None and self._out_hw is None:
            raise ValueError("Targets: output_spec(out_hw) must come before task_args (the instance masks' size)")
        return {"boxes": self.boxes, "classes": self.classes, "offsets": self.offsets, "max_boxes": self.max_boxes,
                "normalized": self.normalized,
                "min_area": self.min_area, "min_visibility": self.min_visibility, "truncate": self.truncate,
                "image_info": self.image_info, "keypoints": self.keypoints, "flip_index": self.flip_index,
                "masks": self.masks, "mask_fill": self.mask_fill, "mask_sampling": self._mask_sampling,
                "instances": self.instances,
                "instance_out_hw": self._out_hw, "instance_mask_size": self.instance_mask_size}


# --- per-instance masks: the flat arrays the image task reads (fq_imgtask_targets.inst_*) ----

_NONE, _POLYGONS, _RLE = 0, 1, 2  # fastq.annotations.SEG_*, enum fq_inst_kind


def _offsets(counts: Sequence[int]) -> np.ndarray:
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(np.asarray(counts, np.int64), out=out[1:])
    return out


def _gather(offsets: np.ndarray, sel: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Ranges offsets[s]:offsets[s + 1] for s in sel: (their new offsets, the flat indices)."""
    starts = offsets[sel]
    lens = offsets[sel + 1] - starts
    new = _offsets(lens)
    return new, np.repeat(starts - new[:-1], lens) + np.arange(new[-1], dtype=np.int64)


def _instances_of(ann: Any, sel: np.ndarray) -> Dict[str, np.ndarray]:
    """The instance arrays of objects sel (global rows, in order) of an Annotations table."""
    sel = np.asarray(sel, np.int64)
    poly, ring_idx = _gather(np.asarray(ann.poly_offsets, np.int64), sel)
    ring, pt_idx = _gather(np.asarray(ann.ring_offsets, np.int64), ring_idx)
    rle, c_idx = _gather(np.asarray(ann.rle_offsets, np.int64), sel)
    hw = np.stack([np.asarray(ann.heights, np.int32), np.asarray(ann.widths, np.int32)], 1)
    return {"kind": np.asarray(ann.seg_kind, np.uint8)[sel], "poly": poly, "ring": ring,
            "xy": np.asarray(ann.poly_xy, np.float32).reshape(-1, 2)[pt_idx], "rle": rle,
            "counts": np.asarray(ann.rle_counts, np.uint32)[c_idx], "hw": hw.reshape(-1)}


def _build_instances(n_boxes: List[int], polygons: Optional[Sequence[Any]], rles: Optional[Sequence[Any]],
                     bitmaps: Optional[Sequence[Any]]) -> Dict[str, np.ndarray]:
    """Targets(instance_polygons=, instance_rles=, instance_masks=) -> the flat arrays."""
    from fastq.annotations.rle import RleError, rle_encode, rle_from_object
    if rles is not None and bitmaps is not None:
        raise ValueError("Targets: give instance_rles or instance_masks, not both")
    n = len(n_boxes)
    for name, per in (("instance_polygons", polygons), ("instance_rles", rles), ("instance_masks", bitmaps)):
        if per is not None and len(per) != n:
            raise ValueError(f"Targets: {n} samples of boxes but {len(per)} of {name}")
    kinds: List[int] = []
    ring_counts: List[int] = []
    rings: List[np.ndarray] = []
    runs: List[np.ndarray] = []
    hw = np.zeros((n, 2), np.int32)
    for i in range(n):
        nb = n_boxes[i]
        ps = list(polygons[i]) if polygons is not None and polygons[i] is not None else [None] * nb
        if bitmaps is not None and bitmaps[i] is not None:
            bm = np.asarray(bitmaps[i]) if not isinstance(bitmaps[i], (list, tuple)) or len(bitmaps[i]) else \
                np.zeros((0, 0, 0), np.uint8)
            if bm.ndim != 3 or len(bm) != nb:
                raise ValueError(f"Targets: sample {i}: instance_masks must be ({nb}, H, W), one mask per box, "
                                 f"got shape {bm.shape}")
            hw[i] = bm.shape[1:]
            rs: List[Any] = [rle_encode(m) for m in bm]
        elif rles is not None and rles[i] is not None:
            rs = list(rles[i])
        else:
            rs = [None] * nb
        for what, got in (("instance polygons", ps), ("instance RLE masks", rs)):
            if len(got) != nb:
                raise ValueError(f"Targets: sample {i}: {nb} boxes but {len(got)} {what} (one per box; None: "
                                 f"no mask)")
        for k in range(nb):
            p, r = ps[k], rs[k]
            has_p = p is not None and len(p) > 0
            if has_p and r is not None:
                raise ValueError(f"Targets: sample {i}: instance {k} has both a polygon and an RLE mask")
            if has_p:
                obj = []
                for ring in (p if p is not None else []):
                    a = np.asarray(ring, np.float32).reshape(-1)
                    if a.size % 2:
                        raise ValueError(f"Targets: sample {i}: instance {k}: a polygon needs x, y pairs, got "
                                         f"{a.size} values")
                    obj.append(a.reshape(-1, 2))
                kinds.append(_POLYGONS)
                ring_counts.append(len(obj))
                rings += obj
                runs.append(np.zeros(0, np.uint32))
            elif r is not None:
                if isinstance(r, dict):
                    size = r.get("size")
                    if size is None or len(size) != 2:
                        raise ValueError(f"Targets: sample {i}: instance {k}: RLE without a [height, width] size")
                    if hw[i].any() and tuple(hw[i]) != (int(size[0]), int(size[1])):
                        raise ValueError(f"Targets: sample {i}: instance {k}: RLE size {list(size)} differs from "
                                         f"its sample's other masks {hw[i].tolist()}")
                    try:
                        c = rle_from_object(r, int(size[0]), int(size[1]), f"sample {i}: instance {k}")
                    except RleError as e:
                        raise ValueError(f"Targets: {e}") from None
                    hw[i] = (int(size[0]), int(size[1]))
                else:
                    c = np.asarray(r).reshape(-1)
                    if c.size and (c.dtype.kind not in "iu" or c.min() < 0 or c.max() > 0xFFFFFFFF):
                        raise ValueError(f"Targets: sample {i}: instance {k}: RLE run lengths must be integers in "
                                         f"[0, 2**32)")
                kinds.append(_RLE)
                ring_counts.append(0)
                runs.append(np.asarray(c, np.uint32))
            else:
                kinds.append(_NONE)
                ring_counts.append(0)
                runs.append(np.zeros(0, np.uint32))
    return {"kind": np.asarray(kinds, np.uint8), "poly": _offsets(ring_counts),
            "ring": _offsets([len(r) for r in rings]),
            "xy": np.concatenate(rings) if rings else np.zeros((0, 2), np.float32),
            "rle": _offsets([len(r) for r in runs]),
            "counts": np.concatenate(runs) if runs else np.zeros(0, np.uint32), "hw": hw.reshape(-1)}


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


def transform_mask(explain: Dict[str, Any], mask: Any, fill: int = 0, sampling: str = "center") -> np.ndarray:
    """Replay the sample's geometric ops on ``mask`` (HxW uint8 or uint16 at the source
    size) with nearest neighbour -> the output size, same dtype.  Whatever comes from
    outside the image (crop padding, Pad, affine borders) is ``fill`` (e.g. 255 =
    ignore), whatever the image's border mode.  Pixel ops do not touch it.

    ``sampling="center"``: a resized mask pixel takes the label of the source pixel under
    its centre, ``floor((x + 0.5) * in / out)`` in float32: where the image's own
    resampling puts that pixel, and bit for bit ``tf.image.resize(method="nearest")``.
    ``"legacy"``: OpenCV's ``INTER_NEAREST``, ``floor(x * in / out)`` (torch's legacy
    ``nearest``), which reads up-left of the centre, so that labels land up to half an
    output pixel down and right of the image; only for parity with pipelines that
    resized masks so.  Crops, pads, flips and the affine ops sample
    the same way in both."""
    return _image.targets_mask(explain, mask, int(fill), _sampling(sampling, "transform_mask: sampling"))


def transform_polygons(explain: Dict[str, Any], rings: Sequence[Any], box: Any = None,
                       size: Any = None) -> np.ndarray:
    """One instance's polygon rings (each (P, 2) or a flat x0, y0, x1, ... list, source
    pixels) -> its (out_h, out_w) uint8 0 / 1 mask: the vertices move with every geometric
    op's forward map (as boxes and keypoints, no clipping), then each ring is rasterized
    at the output size with pycocotools' algorithm (``frPyObjects`` + ``decode``: a pixel
    is inside when its centre is, up to pycocotools' 1/5 px tracing); rings unite.  The
    mask is then kept where the output shows the source image (``transform_mask`` of an
    all-ones mask): a part that a crop cut off does not come back in a later op's padding
    or border fill.

    With ``box`` (x0, y0, x1, y1 in output pixels, e.g. the instance's transformed box) and
    ``size`` (M_h, M_w): the mask inside the box at M_h x M_w (Mask R-CNN targets), the
    moved vertices taken to ``(x - x0) * M_w / max(x1 - x0, 0.1)`` (likewise y) before
    rasterizing, as detectron2's ``PolygonMasks.crop_and_resize``."""
    rs = [np.asarray(r, np.float32).reshape(-1, 2) for r in rings]
    if box is None:
        return _image.targets_polygons(explain, rs)
    return _image.targets_polygons(explain, rs, box, _mask_size(size))


def _mask_size(size: Any) -> Tuple[int, int]:
    ms = (size, size) if isinstance(size, int) else tuple(size)
    if len(ms) != 2 or min(ms) < 1:
        raise ValueError(f"size must be M or (M_h, M_w) >= 1, got {size!r}")
    return int(ms[0]), int(ms[1])


def transform_rle(explain: Dict[str, Any], counts: Any, height: int, width: int, box: Any = None,
                  size: Any = None, sampling: str = "center") -> np.ndarray:
    """One instance's run-length mask (COCO order: column-major runs, zeros first) of a
    height x width mask at the source size -> its (out_h, out_w) uint8 0 / 1 mask, moved
    like :func:`transform_mask` (nearest neighbour, fill 0, ``sampling``).  With ``box`` and ``size``:
    that mask sampled in the box at M_h x M_w, nearest (cell (i, j) takes the output pixel
    under ``(x0 + (j + 0.5) (x1 - x0) / M_w, y0 + (i + 0.5) (y1 - y0) / M_h)``, clamped)."""
    full = _image.targets_rle(explain, counts, int(height), int(width),
                              _sampling(sampling, "transform_rle: sampling"))
    if box is None:
        return full
    return _image.targets_mask_box(full, box, _mask_size(size))


def image_info(explain: Dict[str, Any]) -> np.ndarray:
    """TF Model Garden's ``image_info`` (4, 2) float32: (original h, w), (scaled h, w),
    (y scale, x scale), (y offset, x offset), so that ``out = src * scale - offset``.
    Flips are ignored (TF flips before resize_and_crop_image); chains with an affine
    op (RandomAffine, Rotate, Shear*, Translate* when applied) raise UnsupportedError."""
    return _image.targets_image_info(explain)


# --- OD-API targets read natively by fastq.sources.TFRecord -------------

class OdapiTargets:
    """Detection targets that come with each record of a native TFRecord source:
    ``fastq.sources.TFRecord(shards, targets=OdapiTargets(max_boxes=100))``.

    Each record's ``image/object/bbox/xmin|ymin|xmax|ymax`` (variable-length float
    lists) and ``image/object/class/label`` (variable-length int64 list) are parsed by the
    reader in the worker that decodes the image and moved through the sample's ops from its
    explain record exactly as :class:`Targets` does (no per-sample Python): the outputs
    ``boxes`` (max_boxes, 4) float32, ``classes`` (max_boxes,) int32 (-1 after the count),
    ``num_boxes`` () int32 and ``image_info`` (4, 2) float32 (``image_info=True``) follow
    the source's other outputs.

    ``normalized=True`` (the OD-API convention): coordinates are fractions of the image and
    are multiplied by the DECODED source width / height (float64 product rounded to
    float32, as :func:`fastq.annotations.odapi.load_odapi` does with ``image/height`` and
    ``image/width``); ``False``: absolute pixels.  ``max_objects`` (default
    ``max(max_boxes, 1000)``, at most 2**20): the most objects a record may hold (the
    reader's per-worker capacity: 24 bytes per object and worker); a record with more fails, or with ``truncate=True`` keeps its first
    ``max_objects`` (counted in ``stats()["boxes_truncated"]``, like survivors beyond
    ``max_boxes``).  Bad records (the five lists of different lengths, a non-finite
    coordinate, x1 < x0, a list of the wrong type, a class beyond int32) fail naming the
    shard and record; ``on_error="skip"`` replaces them (counted)."""

    keypoints = None
    masks = None

    def __init__(self, *, max_boxes: int = 100, min_area: float = 0.0, min_visibility: float = 0.0,
                 truncate: bool = True, image_info: bool = True, normalized: bool = True,
                 max_objects: Optional[int] = None, bbox_keys: Optional[Sequence[str]] = None,
                 class_key: str = "image/object/class/label") -> None:
        if not (isinstance(max_boxes, int) and 1 <= max_boxes <= 1 << 20):
            raise ValueError(f"OdapiTargets: max_boxes must be an int in [1, 2**20], got {max_boxes!r}")
        if not (min_area >= 0 and 0 <= min_visibility <= 1):
            raise ValueError("OdapiTargets: min_area must be >= 0 and min_visibility in [0, 1]")
        cap = max(max_boxes, 1000) if max_objects is None else max_objects
        if not (isinstance(cap, int) and max_boxes <= cap <= 1 << 20):
            raise ValueError(f"OdapiTargets: max_objects must be an int in [max_boxes, 2**20], got {max_objects!r}")
        keys = tuple(bbox_keys) if bbox_keys is not None else (
            "image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax")
        if len(keys) != 4:
            raise ValueError("OdapiTargets: bbox_keys must be the xmin, ymin, xmax, ymax keys")
        self.max_boxes, self.max_objects = max_boxes, cap
        self.min_area, self.min_visibility = float(min_area), float(min_visibility)
        self.truncate, self.image_info, self.normalized = bool(truncate), bool(image_info), bool(normalized)
        self.bbox_keys, self.class_key = keys, class_key

    def reader_features(self) -> List[Tuple[str, str, int, int]]:
        """The reader's five variable-length features (they come last; not outputs)."""
        flags = _image.TFR_VARLEN | (_image.TFR_TRUNCATE if self.truncate else 0)
        return [(k, "float32", self.max_objects, flags) for k in self.bbox_keys] + \
            [(self.class_key, "int64", self.max_objects, flags)]

    def output_spec(self, out_hw: Tuple[int, int]) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        out = [((self.max_boxes, 4), np.dtype(np.float32)), ((self.max_boxes,), np.dtype(np.int32)),
               ((), np.dtype(np.int32))]
        if self.image_info:
            out.append(((4, 2), np.dtype(np.float32)))
        return out

    def output_names(self) -> List[str]:
        return ["boxes", "classes", "num_boxes"] + (["image_info"] if self.image_info else [])

    def task_args(self) -> Dict[str, Any]:
        return {"from_reader": True, "normalized": self.normalized, "max_boxes": self.max_boxes,
                "min_area": self.min_area, "min_visibility": self.min_visibility, "truncate": self.truncate,
                "image_info": self.image_info}


__all__.append("OdapiTargets")
