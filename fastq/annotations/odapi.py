"""TFRecord shards in the TF Object Detection API / TF Model Garden layout.

One ``tf.train.Example`` per image with (``create_coco_tf_record.py``'s keys):

=====================================  ===========================================
``image/encoded``                      the image file's bytes
``image/height``, ``image/width``      int64
``image/object/bbox/xmin`` ... ``ymax``  float lists, NORMALIZED to [0, 1]
``image/object/class/label``           int64 list (label-map ids, usually from 1)
``image/object/is_crowd``              int64 list (optional)
``image/object/mask``                  bytes list: one PNG per object (optional)
``image/segmentation/class/encoded``   a PNG label map (optional)
=====================================  ===========================================

:func:`encode_odapi_example` writes such an Example (no TensorFlow needed;
byte-identical to TF's serializer, see tests/targets/test_annotations.py);
:func:`load_odapi` indexes shards once into an :class:`~fastq.annotations.Annotations`
table (keys ``"<shard>:<record>"``, boxes converted to absolute pixels with the
record's height and width, classes the label ids as stored).  It reads every record
once in Python (the image bytes are skipped, not decoded); use it to inspect, split or
count a dataset, or to build per-sample targets ahead of training.
"""
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from fastq.annotations._table import SEG_NONE, SEG_RLE, Annotations, _offsets, build
from fastq.tfrecord_codec import encode_example, parse_example

__all__ = ["BBOX_KEYS", "CLASS_KEY", "CROWD_KEY", "MASK_KEY", "SEG_KEY", "encode_odapi_example", "load_odapi",
           "OdapiFormatError"]

BBOX_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax")
CLASS_KEY = "image/object/class/label"
CROWD_KEY = "image/object/is_crowd"
MASK_KEY = "image/object/mask"
SEG_KEY = "image/segmentation/class/encoded"
_SIZE_KEYS = ("image/height", "image/width")


class OdapiFormatError(ValueError):
    """A record that does not follow the Object Detection API layout."""


def encode_odapi_example(image: bytes, height: int, width: int, boxes: Any, classes: Any, *,
                         is_crowd: Any = None, instance_masks: Optional[Sequence[bytes]] = None,
                         segmentation: Optional[bytes] = None, image_format: bytes = b"jpeg",
                         filename: bytes = b"", source_id: bytes = b"") -> bytes:
    """A serialized Example for one image.  ``boxes``: (N, 4) x0, y0, x1, y1 in
    absolute pixels (stored normalized by width / height, as the OD API expects)."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    feats: Dict[str, Any] = {
        "image/encoded": image, "image/format": image_format, "image/filename": filename,
        "image/source_id": source_id, "image/height": int(height), "image/width": int(width),
        BBOX_KEYS[0]: (b[:, 0] / width).astype(np.float32), BBOX_KEYS[1]: (b[:, 1] / height).astype(np.float32),
        BBOX_KEYS[2]: (b[:, 2] / width).astype(np.float32), BBOX_KEYS[3]: (b[:, 3] / height).astype(np.float32),
        CLASS_KEY: np.asarray(classes, np.int64).reshape(-1),
    }
    if is_crowd is not None:
        feats[CROWD_KEY] = np.asarray(is_crowd, np.int64).reshape(-1)
    if instance_masks is not None:
        feats[MASK_KEY] = list(instance_masks)
    if segmentation is not None:
        feats[SEG_KEY] = segmentation
    return encode_example(feats)


def _records(path):
    """(index, memoryview of the record) of one shard, framing and CRCs checked."""
    from fastq._native import _image
    offsets, lengths, tail = _image.tfrecord_scan(path)
    if tail is not None:
        raise OdapiFormatError(f"{path}: TFRecord framing error after record {len(offsets) - 1}: {tail[1]}")
    if not len(offsets):
        return
    with open(path, "rb") as f:
        for i, (o, n) in enumerate(zip(offsets.tolist(), lengths.tolist())):
            f.seek(o + 12)  # the frame: length (8), its CRC (4), data, data CRC (4)
            yield i, f.read(n)


def load_odapi(shards: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], *,
               masks: bool = False) -> Annotations:
    """Index OD-API shards: one row per record, in shard then record order.

    ``masks=True``: each object's ``image/object/mask`` PNG is decoded now (OpenCV; one
    channel of the record's height x width, nonzero = inside) and kept run-length encoded
    (``seg_kind`` SEG_RLE), for ``Targets.from_annotations(ann, instance_masks=True)``;
    objects of records without masks get none.  A PNG that cannot be decoded or has
    another size raises OdapiFormatError naming the record and object."""
    if isinstance(shards, (str, os.PathLike)):
        shards = [shards]
    wanted = set(BBOX_KEYS + (CLASS_KEY, CROWD_KEY, MASK_KEY, SEG_KEY) + _SIZE_KEYS)
    keys: List[str] = []
    heights, widths, boxes, classes, crowd = [], [], [], [], []
    n_masks, has_seg = [], []
    runs: List[List[Optional[np.ndarray]]] = []
    for shard in shards:
        shard = os.fspath(shard)
        for i, rec in _records(shard):
            where = f"shard {shard!r}, record {i}"
            try:
                ex = parse_example(rec, wanted)
            except (ValueError, IndexError) as e:
                raise OdapiFormatError(f"{where}: not a tf.train.Example ({e})") from None
            h = ex.get("image/height", [0])
            w = ex.get("image/width", [0])
            if len(h) != 1 or len(w) != 1 or h[0] <= 0 or w[0] <= 0:
                raise OdapiFormatError(f"{where}: image/height and image/width must be one positive int each")
            cols = [np.asarray(ex.get(k, []), np.float64) for k in BBOX_KEYS]
            n = len(cols[0])
            cls = np.asarray(ex.get(CLASS_KEY, []), np.int64)
            if any(len(c) != n for c in cols) or len(cls) != n:
                raise OdapiFormatError(f"{where}: bbox xmin/ymin/xmax/ymax and class/label have different "
                                       f"lengths ({[len(c) for c in cols]}, {len(cls)})")
            b = np.stack([cols[0] * w[0], cols[1] * h[0], cols[2] * w[0], cols[3] * h[0]], 1) if n else \
                np.zeros((0, 4))
            if not np.isfinite(b).all():
                raise OdapiFormatError(f"{where}: a box coordinate is not finite")
            cr = np.asarray(ex.get(CROWD_KEY, [0] * n), np.int64)
            if len(cr) != n:
                raise OdapiFormatError(f"{where}: is_crowd has {len(cr)} values for {n} objects")
            m = ex.get(MASK_KEY)
            if m is not None and len(m) != n:
                raise OdapiFormatError(f"{where}: {len(m)} instance masks for {n} objects")
            keys.append(f"{shard}:{i}")
            heights.append(h[0])
            widths.append(w[0])
            boxes.append(b)
            classes.append(cls)
            crowd.append(cr)
            n_masks.append(0 if m is None else len(m))
            if masks:
                runs.append(_mask_runs(m, n, h[0], w[0], where))
            has_seg.append(SEG_KEY in ex)
    labels = np.unique(np.concatenate(classes)) if classes else np.zeros(0, np.int64)
    seg: Dict[str, Any] = {}
    if masks:
        flat = [r for per in runs for r in per]
        seg = {"seg_kind": np.asarray([SEG_NONE if r is None else SEG_RLE for r in flat], np.uint8),
               "poly_offsets": np.zeros(len(flat) + 1, np.int64), "ring_offsets": np.zeros(1, np.int64),
               "poly_xy": np.zeros((0, 2), np.float32), "rle_offsets": _offsets([0 if r is None else len(r)
                                                                                  for r in flat]),
               "rle_counts": np.concatenate([r for r in flat if r is not None] or [np.zeros(0, np.uint32)])}
    return build(keys, heights, widths, boxes, classes, crowd, labels, [str(c) for c in labels], **seg,
                 first_class=0, stats={"records": len(keys), "with_instance_masks": int(sum(1 for x in n_masks if x)),
                                       "with_segmentation": int(sum(has_seg))})


def _mask_runs(pngs: Any, n: int, h: int, w: int, where: str) -> List[Optional[np.ndarray]]:
    """The run lengths of a record's n instance PNGs (None each when the record has none)."""
    import cv2

    from fastq.annotations.rle import rle_encode
    if pngs is None:
        return [None] * n
    out: List[Optional[np.ndarray]] = []
    for k, png in enumerate(pngs):
        m = cv2.imdecode(np.frombuffer(bytes(png), np.uint8), cv2.IMREAD_UNCHANGED) if len(png) else None
        if m is None or m.ndim != 2 or m.shape != (h, w):
            why = "cannot be decoded" if m is None else f"is {m.shape}, the image {h}x{w} (one channel)"
            raise OdapiFormatError(f"{where}: image/object/mask {k} {why}")
        out.append(rle_encode(m != 0))
    return out
