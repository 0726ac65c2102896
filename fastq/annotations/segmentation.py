"""Semantic segmentation datasets stored as image / label-map file pairs.

:func:`segmentation_pairs` finds the pairs of the common layouts and returns an
:class:`~fastq.annotations.Annotations` table with ``keys`` = image files and
``mask_keys`` = their label maps (no objects):

* ``"pairs"``: ``root/images/<rel>.<ext>`` with ``root/masks/<rel>.png`` (the same
  relative path without extension; folder names and mask extension configurable);
* ``"voc"``: Pascal VOC: ids from ``root/ImageSets/Segmentation/<split>.txt``,
  ``root/JPEGImages/<id>.jpg`` and ``root/SegmentationClass/<id>.png``;
* ``"ade20k"``: ADEChallengeData2016: ``root/images/<split>/<name>.jpg`` and
  ``root/annotations/<split>/<name>.png`` (split ``training`` / ``validation``);
* ``"cityscapes"``: ``root/leftImg8bit/<split>/<city>/<name>_leftImg8bit.png`` and
  ``root/gtFine/<split>/<city>/<name>_gtFine_<target>.png`` (target ``labelIds`` or
  ``labelTrainIds``).

Pairs are sorted by image path.  An image without its label map raises
:class:`MissingMaskError` naming both files (``missing="skip"`` drops it and counts it
in ``stats["missing_masks"]``); label maps without an image are counted
(``stats["unpaired_masks"]``) and ignored.  Whether a label map decodes and has its
image's size is checked when the sample is read, not here.
"""
import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from fastq.annotations._table import Annotations, build

__all__ = ["segmentation_pairs", "read_label_map", "MissingMaskError", "LAYOUTS"]

LAYOUTS = ("pairs", "voc", "ade20k", "cityscapes")
_IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")


class MissingMaskError(FileNotFoundError):
    """An image whose label map does not exist."""


def _walk(folder, exts):
    """{relative path without extension: path} of the files under folder with one of exts."""
    out: Dict[str, str] = {}
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"segmentation_pairs: folder {folder!r} does not exist")
    for root, _dirs, files in os.walk(folder, followlinks=True):
        for name in files:
            stem, ext = os.path.splitext(name)
            if ext.lower() in exts:
                rel = os.path.relpath(os.path.join(root, stem), folder)
                path = os.path.join(root, name)
                if rel in out:
                    raise ValueError(f"segmentation_pairs: {out[rel]!r} and {path!r} have the same name")
                out[rel] = path
    return out


def _png_color_type(path):
    """The IHDR colour type of a PNG file (3: palette), or None when it is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(26)
    if len(head) < 26 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return head[25]


def read_label_map(path: str, where: str = "read_label_map") -> np.ndarray:
    """A label map file as a 2-D uint8 / uint16 array of class indices.

    Palette PNGs (Pascal VOC's ``SegmentationClass``) give their palette **indices**
    (read with Pillow, which keeps them; OpenCV expands a palette to colours).  Other
    files are read with OpenCV ``IMREAD_UNCHANGED`` (8- or 16-bit grey PNG: ADE20K,
    Cityscapes ``*_labelIds.png``).  A file that cannot be read, or that is not one
    channel of 8 or 16 bits, raises ValueError naming it."""
    try:
        palette = _png_color_type(path) == 3
    except OSError as e:
        raise ValueError(f"{where}: the label map {path!r} cannot be read ({e.strerror})") from None
    if palette:
        try:
            from PIL import Image
        except ImportError:
            raise ValueError(f"{where}: the label map {path!r} is a palette PNG, whose class indices only "
                             "Pillow reads (pip install pillow)") from None
        with Image.open(path) as im:
            m = np.asarray(im) if im.mode == "P" else None
    else:
        import cv2
        m = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if m is None or m.ndim != 2 or m.dtype not in (np.uint8, np.uint16):
        why = "cannot be read" if m is None else f"is {m.dtype} with shape {m.shape}, not one channel"
        raise ValueError(f"{where}: the label map {path!r} {why}")
    return np.ascontiguousarray(m)


_Pair = Tuple[str, Optional[str], Optional[str]]  # image, its label map (None: missing), the expected name


def _pairs_by_stem(images: Dict[str, str], masks: Dict[str, str], mask_for) -> Tuple[List[_Pair], int]:
    pairs: List[_Pair] = []
    used = set()
    for rel in sorted(images, key=lambda r: images[r]):
        mrel = mask_for(rel)
        pairs.append((images[rel], masks.get(mrel) if mrel is not None else None, mrel))
        used.add(mrel)
    return pairs, sum(1 for m in masks if m not in used)


def segmentation_pairs(root: str, layout: str = "pairs", *, split: Optional[str] = None,
                       images_dir: str = "images", masks_dir: str = "masks", mask_ext: str = ".png",
                       target: str = "labelIds", missing: str = "error") -> Annotations:
    """Image / label-map pairs under root in one of :data:`LAYOUTS` (see the module doc)."""
    if layout not in LAYOUTS:
        raise ValueError(f"segmentation_pairs: layout must be one of {LAYOUTS}, got {layout!r}")
    if missing not in ("error", "skip"):
        raise ValueError(f"segmentation_pairs: missing must be 'error' or 'skip', got {missing!r}")
    root = os.fspath(root)
    pairs: List[_Pair]
    if layout == "pairs":
        ext = "." + mask_ext.lower().lstrip(".")
        imgs = _walk(os.path.join(root, images_dir), _IMAGE_EXTS)
        masks = _walk(os.path.join(root, masks_dir), (ext,))
        pairs, unpaired = _pairs_by_stem(imgs, masks, lambda rel: rel)
    elif layout == "voc":
        split = split or "train"
        list_file = os.path.join(root, "ImageSets", "Segmentation", f"{split}.txt")
        with open(list_file) as f:
            ids = [line.strip() for line in f if line.strip()]
        pairs = []
        for i in ids:
            m = os.path.join(root, "SegmentationClass", f"{i}.png")
            pairs.append((os.path.join(root, "JPEGImages", f"{i}.jpg"), m if os.path.exists(m) else None, m))
        pairs.sort(key=lambda p: p[0])
        unpaired = 0
    elif layout == "ade20k":
        split = split or "training"
        imgs = _walk(os.path.join(root, "images", split), (".jpg", ".jpeg"))
        masks = _walk(os.path.join(root, "annotations", split), (".png",))
        pairs, unpaired = _pairs_by_stem(imgs, masks, lambda rel: rel)
    else:  # cityscapes
        if target not in ("labelIds", "labelTrainIds"):
            raise ValueError(f"segmentation_pairs: cityscapes target must be 'labelIds' or 'labelTrainIds', "
                             f"got {target!r}")
        split = split or "train"
        suffix = "_leftImg8bit"
        imgs = {r: p for r, p in _walk(os.path.join(root, "leftImg8bit", split), (".png",)).items()
                if r.endswith(suffix)}
        masks = _walk(os.path.join(root, "gtFine", split), (".png",))
        pairs, _ = _pairs_by_stem(imgs, masks, lambda rel: rel[:-len(suffix)] + f"_gtFine_{target}")
        unpaired = sum(1 for r in masks if r.endswith(f"_gtFine_{target}")) - sum(1 for p in pairs if p[1])
    kept, dropped = [], 0
    for img, mask, expected in pairs:
        if mask is None:
            if missing == "error":
                exp = expected if os.path.isabs(str(expected)) else f"{expected}{mask_ext if layout == 'pairs' else ''}"
                raise MissingMaskError(f"segmentation_pairs: image {img!r} has no label map ({exp!r} "
                                       f"in layout {layout!r}); pass missing='skip' to drop such images")
            dropped += 1
            continue
        kept.append((img, mask))
    n = len(kept)
    ann = build([p[0] for p in kept], np.zeros(n, np.int32), np.zeros(n, np.int32), [[] for _ in kept],
                [[] for _ in kept], [[] for _ in kept], [], [],
                mask_keys=[p[1] for p in kept], stats={"missing_masks": dropped, "unpaired_masks": max(unpaired, 0)})
    return ann
