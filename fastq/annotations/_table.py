"""The annotation table (:class:`Annotations`) and its builder, shared by the readers
(fastq.annotations.coco, .odapi, .segmentation); public through :mod:`fastq.annotations`."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["Annotations", "SEG_NONE", "SEG_POLYGONS", "SEG_RLE"]

SEG_NONE, SEG_POLYGONS, SEG_RLE = 0, 1, 2


def _offsets(counts):
    """(n + 1,) int64 start offsets of n runs of the given lengths."""
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(np.asarray(counts, np.int64), out=out[1:])
    return out


@dataclass(frozen=True)
class Annotations:
    """Images and their objects, as flat arrays.

    Image ``i`` is ``keys[i]`` (a file path, or ``"shard:record"`` for TFRecord
    shards), ``heights[i]`` x ``widths[i]`` pixels as the annotation file states (0
    when it does not).  Its objects are rows ``box_offsets[i]:box_offsets[i + 1]`` of
    ``boxes`` (float32 ``(M, 4)``, ``x0, y0, x1, y1``, absolute pixels), ``classes``
    (int32) and ``iscrowd`` (uint8).  The COCO reader numbers classes contiguously
    (``category_ids[classes[k] - first_class]`` is the dataset's own id); OD-API
    shards keep the label ids as stored (``category_ids`` lists those present).

    Instance masks, when the dataset has them: ``seg_kind[k]`` is ``SEG_NONE``,
    ``SEG_POLYGONS`` or ``SEG_RLE``.  Polygons of object k are rings
    ``poly_offsets[k]:poly_offsets[k + 1]``; ring r is points
    ``ring_offsets[r]:ring_offsets[r + 1]`` of ``poly_xy`` (float32 ``(P, 2)``, x, y
    in pixels).  Run-length masks of object k are ``rle_counts[rle_offsets[k]:
    rle_offsets[k + 1]]`` (uint32, COCO's column-major runs starting with zeros) of
    an image-sized mask.  ``mask_keys[i]``: the semantic mask file of image i (segmentation
    datasets), else None.
    """
    keys: List[str]
    heights: np.ndarray
    widths: np.ndarray
    box_offsets: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    iscrowd: np.ndarray
    category_ids: np.ndarray
    category_names: List[str]
    first_class: int = 0
    image_ids: Optional[np.ndarray] = None
    seg_kind: Optional[np.ndarray] = None
    poly_offsets: Optional[np.ndarray] = None
    ring_offsets: Optional[np.ndarray] = None
    poly_xy: Optional[np.ndarray] = None
    rle_offsets: Optional[np.ndarray] = None
    rle_counts: Optional[np.ndarray] = None
    mask_keys: Optional[List[Optional[str]]] = None
    stats: Dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.keys)
        if self.box_offsets.shape != (n + 1,) or self.box_offsets[-1] != len(self.boxes):
            raise ValueError("Annotations: box_offsets do not match keys and boxes")
        m = len(self.boxes)
        for name in ("classes", "iscrowd"):
            if len(getattr(self, name)) != m:
                raise ValueError(f"Annotations: {name} has {len(getattr(self, name))} rows, boxes {m}")

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def num_classes(self) -> int:
        """Number of categories (contiguous ids run first_class .. first_class + K - 1)."""
        return len(self.category_ids)

    @property
    def max_boxes(self) -> int:
        """The largest number of objects of one image."""
        return int(np.diff(self.box_offsets).max()) if len(self.keys) else 0

    def num_boxes(self, i: int) -> int:
        return int(self.box_offsets[i + 1] - self.box_offsets[i])

    def polygons(self, k: int) -> List[np.ndarray]:
        """The rings of object k (global object index) as float32 (n, 2) arrays."""
        if self.seg_kind is None or self.seg_kind[k] != SEG_POLYGONS:
            return []
        assert self.poly_offsets is not None and self.ring_offsets is not None and self.poly_xy is not None
        r0, r1 = self.poly_offsets[k], self.poly_offsets[k + 1]
        return [self.poly_xy[self.ring_offsets[r]:self.ring_offsets[r + 1]] for r in range(r0, r1)]

    def rle(self, k: int) -> Optional[np.ndarray]:
        """The run lengths of object k's mask (uint32), or None."""
        if self.seg_kind is None or self.seg_kind[k] != SEG_RLE:
            return None
        assert self.rle_offsets is not None and self.rle_counts is not None
        return self.rle_counts[self.rle_offsets[k]:self.rle_offsets[k + 1]]

    def sample(self, i: int) -> Dict[str, Any]:
        """Image i's annotations as a dict of arrays (views, not copies)."""
        a, b = int(self.box_offsets[i]), int(self.box_offsets[i + 1])
        out: Dict[str, Any] = {"key": self.keys[i], "height": int(self.heights[i]), "width": int(self.widths[i]),
                               "boxes": self.boxes[a:b], "classes": self.classes[a:b], "iscrowd": self.iscrowd[a:b]}
        if self.image_ids is not None:
            out["image_id"] = int(self.image_ids[i])
        if self.seg_kind is not None:
            out["segmentation"] = [self.polygons(k) if self.seg_kind[k] == SEG_POLYGONS else self.rle(k)
                                   for k in range(a, b)]
        if self.mask_keys is not None:
            out["mask_key"] = self.mask_keys[i]
        return out

    def instance_mask(self, k: int, height: int, width: int) -> np.ndarray:
        """Object k's mask as a uint8 (height, width) array of 0 / 1: RLE decoded
        exactly; polygons filled with OpenCV (``cv2.fillPoly``, pixel centres; differs
        from pycocotools' rasterizer on boundary pixels only, see docs/targets.md)."""
        from fastq.annotations.rle import rle_decode, fill_polygons
        if self.seg_kind is None or self.seg_kind[k] == SEG_NONE:
            raise ValueError(f"object {k} has no mask")
        if self.seg_kind[k] == SEG_RLE:
            counts = self.rle(k)
            assert counts is not None
            return rle_decode(counts, height, width)
        return fill_polygons(self.polygons(k), height, width)


def build(keys: Sequence[str], heights, widths, per_image_boxes, per_image_classes, per_image_crowd,
          category_ids, category_names, first_class=0, **extra) -> Annotations:
    """An Annotations table from per-image lists (used by the readers)."""
    counts = [len(b) for b in per_image_boxes]
    boxes = (np.concatenate([np.asarray(b, np.float32).reshape(-1, 4) for b in per_image_boxes])
             if per_image_boxes else np.zeros((0, 4), np.float32))
    classes = (np.concatenate([np.asarray(c, np.int32).reshape(-1) for c in per_image_classes])
               if per_image_classes else np.zeros(0, np.int32))
    crowd = (np.concatenate([np.asarray(c, np.uint8).reshape(-1) for c in per_image_crowd])
             if per_image_crowd else np.zeros(0, np.uint8))
    return Annotations(keys=list(keys), heights=np.asarray(heights, np.int32), widths=np.asarray(widths, np.int32),
                       box_offsets=_offsets(counts), boxes=boxes.reshape(-1, 4), classes=classes, iscrowd=crowd,
                       category_ids=np.asarray(category_ids, np.int64), category_names=list(category_names),
                       first_class=int(first_class), **extra)
