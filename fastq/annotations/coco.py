"""COCO detection / instance-segmentation annotations (``instances_*.json``).

:func:`load_coco` parses the JSON once (the standard library's ``json``; pycocotools
is not needed) into an :class:`~fastq.annotations.Annotations` table:

* images in the file's ``images`` order; ``keys`` are ``image_root / file_name``;
* boxes: COCO's ``[x, y, width, height]`` becomes ``x0, y0, x1 = x + width,
  y1 = y + height`` (absolute pixels, float32);
* categories: sorted by id, numbered ``first_class, first_class + 1, ...``
  (``category_ids`` keeps COCO's ids: 80 classes with ids 1..90 in COCO 2017);
* ``iscrowd``: kept and flagged by default (``crowd="keep"``), like TF Model Garden's
  ``is_crowd``; ``crowd="drop"`` removes those objects (torchvision's and tensorpack's
  training loaders), counted in ``stats["crowd_dropped"]``;
* boxes with no area (width or height <= 0) are dropped and counted
  (``stats["degenerate_dropped"]``): no detector can regress them;
* instance masks: polygons (lists of x, y) and RLE (compressed string or list of
  counts, checked against the image size) are kept per object; images without
  objects are kept (``skip_empty=True`` drops them).

Bad input raises :class:`CocoFormatError` naming the JSON file and the image or
annotation id: a missing key, a box that is not 4 finite numbers, an annotation whose
image or category is unknown, an RLE whose runs do not cover its image.
"""
import json
import math
import os
from typing import Any, Dict, List, Optional, Union

import numpy as np

from fastq.annotations._table import SEG_NONE, SEG_POLYGONS, SEG_RLE, Annotations, _offsets, build
from fastq.annotations.rle import RleError, rle_from_object

__all__ = ["load_coco", "CocoFormatError"]


class CocoFormatError(ValueError):
    """A COCO annotation file that cannot be read as such."""


def _get(obj, key, where):
    try:
        return obj[key]
    except (KeyError, TypeError):
        raise CocoFormatError(f"{where}: no {key!r}") from None


def load_coco(annotation_file: Union[str, os.PathLike, Dict[str, Any]], image_root: Optional[str] = None, *,
              first_class: int = 0, crowd: str = "keep", skip_empty: bool = False,
              masks: bool = True) -> Annotations:
    """Parse a COCO instances file (a path, or the already loaded dict).

    ``image_root``: the folder holding the images (default: the JSON file's folder).
    ``first_class``: the id of the first category after renumbering (0, or 1 to keep
    0 for background as tensorpack's and torchvision's detectors do).
    ``masks``: keep the polygons / RLE of the objects (False: boxes only).
    """
    if crowd not in ("keep", "drop"):
        raise ValueError(f"load_coco: crowd must be 'keep' or 'drop', got {crowd!r}")
    if isinstance(annotation_file, dict):
        data, src = annotation_file, "<COCO dict>"
        root = image_root or "."
    else:
        src = os.fspath(annotation_file)
        try:
            with open(src, "rb") as f:
                data = json.load(f)
        except json.JSONDecodeError as e:
            raise CocoFormatError(f"{src}: not valid JSON ({e})") from None
        root = image_root if image_root is not None else os.path.dirname(os.path.abspath(src))
    if not isinstance(data, dict):
        raise CocoFormatError(f"{src}: the top level is not a JSON object")
    images = _get(data, "images", src)
    anns = data.get("annotations", [])
    cats = _get(data, "categories", src)

    cat_ids = sorted(int(_get(c, "id", f"{src}: category")) for c in cats)
    if len(set(cat_ids)) != len(cat_ids):
        raise CocoFormatError(f"{src}: duplicate category ids")
    names_by_id = {int(c["id"]): str(c.get("name", c["id"])) for c in cats}
    cat_index = {cid: first_class + k for k, cid in enumerate(cat_ids)}

    img_index: Dict[int, int] = {}
    keys: List[str] = []
    heights, widths, image_ids = [], [], []
    for im in images:
        iid = int(_get(im, "id", f"{src}: image"))
        where = f"{src}: image id {iid}"
        if iid in img_index:
            raise CocoFormatError(f"{where} appears twice")
        img_index[iid] = len(keys)
        keys.append(os.path.join(root, str(_get(im, "file_name", where))))
        heights.append(int(im.get("height", 0)))
        widths.append(int(im.get("width", 0)))
        image_ids.append(iid)

    per_image: List[List[Any]] = [[] for _ in keys]
    stats = {"crowd_dropped": 0, "degenerate_dropped": 0}
    for a in anns:
        aid = a.get("id", "?") if isinstance(a, dict) else "?"
        where = f"{src}: annotation id {aid}"
        iid = int(_get(a, "image_id", where))
        if iid not in img_index:
            raise CocoFormatError(f"{where}: image_id {iid} is not in 'images'")
        cid = int(_get(a, "category_id", where))
        if cid not in cat_index:
            raise CocoFormatError(f"{where}: category_id {cid} is not in 'categories'")
        bbox = _get(a, "bbox", where)
        try:
            x, y, w, h = (float(v) for v in bbox)
        except (TypeError, ValueError):
            raise CocoFormatError(f"{where}: bbox {bbox!r} is not 4 numbers") from None
        if not all(math.isfinite(v) for v in (x, y, w, h)):
            raise CocoFormatError(f"{where}: bbox {bbox!r} is not finite")
        is_crowd = int(a.get("iscrowd", 0))
        if is_crowd and crowd == "drop":
            stats["crowd_dropped"] += 1
            continue
        if w <= 0 or h <= 0:
            stats["degenerate_dropped"] += 1
            continue
        per_image[img_index[iid]].append((x, y, x + w, y + h, cat_index[cid], is_crowd,
                                          a.get("segmentation") if masks else None, where))

    keep = [i for i in range(len(keys)) if per_image[i] or not skip_empty]
    stats["empty_dropped"] = len(keys) - len(keep)
    seg: Dict[str, Any] = {}
    if masks:
        seg = _segmentations([per_image[i] for i in keep], [heights[i] for i in keep], [widths[i] for i in keep])
    return build([keys[i] for i in keep], [heights[i] for i in keep], [widths[i] for i in keep],
                 [[o[:4] for o in per_image[i]] for i in keep], [[o[4] for o in per_image[i]] for i in keep],
                 [[o[5] for o in per_image[i]] for i in keep], cat_ids, [names_by_id[c] for c in cat_ids],
                 first_class=first_class, image_ids=np.asarray([image_ids[i] for i in keep], np.int64),
                 stats=stats, **seg)


def _segmentations(objs_per_image, heights, widths):
    """The flat polygon / RLE arrays of Annotations for the kept objects."""
    kinds, ring_counts, rings, rle_parts = [], [], [], []
    for objs, h, w in zip(objs_per_image, heights, widths):
        for o in objs:
            s, where = o[6], o[7]
            if not s:
                kinds.append(SEG_NONE)
                ring_counts.append(0)
                rle_parts.append(np.zeros(0, np.uint32))
            elif isinstance(s, list):
                obj_rings = []
                for ring in s:
                    try:
                        arr = np.asarray(ring, np.float64)
                    except (TypeError, ValueError):
                        raise CocoFormatError(f"{where}: a polygon that is not a list of numbers") from None
                    if arr.ndim != 1 or arr.size < 6 or arr.size % 2 or not np.isfinite(arr).all():
                        raise CocoFormatError(f"{where}: a polygon needs an even number (>= 6) of finite "
                                              f"coordinates, got {arr.size}")
                    obj_rings.append(arr.reshape(-1, 2).astype(np.float32))
                kinds.append(SEG_POLYGONS)
                ring_counts.append(len(obj_rings))
                rings += obj_rings
                rle_parts.append(np.zeros(0, np.uint32))
            elif isinstance(s, dict):
                if h <= 0 or w <= 0:
                    raise CocoFormatError(f"{where}: an RLE mask on an image without height/width")
                try:
                    rle_parts.append(rle_from_object(s, h, w, where))
                except RleError as e:
                    raise CocoFormatError(str(e)) from None
                kinds.append(SEG_RLE)
                ring_counts.append(0)
            else:
                raise CocoFormatError(f"{where}: segmentation is neither polygons nor RLE")
    return {"seg_kind": np.asarray(kinds, np.uint8), "poly_offsets": _offsets(ring_counts),
            "ring_offsets": _offsets([len(r) for r in rings]),
            "poly_xy": np.concatenate(rings) if rings else np.zeros((0, 2), np.float32),
            "rle_offsets": _offsets([len(p) for p in rle_parts]),
            "rle_counts": np.concatenate(rle_parts) if rle_parts else np.zeros(0, np.uint32)}
