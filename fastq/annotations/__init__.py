"""Annotations for detection and segmentation, read once at construction.

A detection or segmentation dataset is images plus, per image, a variable number of
objects.  The readers of this package parse the formats users have into one
columnar, numpy-backed table (:class:`Annotations`), so that nothing is parsed per
sample in Python while a pipeline runs:

* :func:`fastq.annotations.coco.load_coco` - COCO ``instances_*.json`` + image folder;
* :func:`fastq.annotations.odapi.load_odapi` - TFRecord shards in the TF Object
  Detection API / Model Garden layout (``image/object/bbox/xmin`` ...);
* :func:`fastq.annotations.segmentation.segmentation_pairs` - image / mask file pairs
  (plain ``images/`` + ``masks/`` folders, VOC, ADE20K and Cityscapes layouts).

Conventions (docs/targets.md): boxes are float32 ``(x0, y0, x1, y1)`` in absolute
pixels of the stored image; class ids are contiguous ints (the mapping from the
dataset's own ids is kept); instance masks are kept as the dataset gives them
(polygons or run-length encodings), to be transformed with the image and rasterized
at the end.
"""
from fastq.annotations._table import SEG_NONE, SEG_POLYGONS, SEG_RLE, Annotations

__all__ = ["Annotations", "SEG_NONE", "SEG_POLYGONS", "SEG_RLE"]

Annotations.__module__ = __name__  # its public home (reprs, pickles), as before the table had a module
