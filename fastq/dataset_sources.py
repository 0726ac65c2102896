"""Native dataset sources: the on-disk layouts users already have.

* :class:`Folder` - a class-per-subfolder tree (``keras.utils.image_dataset_from_directory``,
  ``torchvision.datasets.ImageFolder``); read through the :class:`~fastq.sources.Files` path.
* :class:`TFRecord` - TFRecord shards of ``tf.train.Example`` records (TF's ImageNet layout).
* :class:`WebDataset` - tar shards, samples grouped by key.

Reading, parsing, decoding and augmenting run on fastq's native workers and never take
the GIL.  Every source is indexed (one entry per sample) when it is built, so the
promises of the native sources hold for all of them: deterministic order and
augmentation for any worker count, ``shard(n, i)`` disjoint and covering, exact resume,
``explain``, ``on_error`` and ``stats``.  See docs/sources.md.
"""
import os

import numpy as np

from fastq.image_sources import Files, ImageSource

__all__ = ["Folder", "IMAGE_EXTENSIONS"]

# The union of the extensions Keras (bmp gif jpeg jpg png) and torchvision
# (jpg jpeg png ppm bmp pgm tif tiff webp) accept, minus gif (OpenCV cannot decode it).
IMAGE_EXTENSIONS = (".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp")


def _norm_exts(extensions):
    if extensions is None:
        return IMAGE_EXTENSIONS
    if isinstance(extensions, str):
        extensions = (extensions,)
    out = []
    for e in extensions:
        if not isinstance(e, str) or not e.strip("."):
            raise ValueError(f"Folder: bad extension {e!r}")
        out.append("." + e.lower().lstrip("."))
    return tuple(out)


def _list_class(class_dir, exts):
    """Files under class_dir (recursively, symlinks followed) whose extension is in
    exts: directories in sorted path order, file names sorted within each directory
    (the order of Keras' index_directory and torchvision's make_dataset)."""
    out = []
    for root, _dirs, files in sorted(os.walk(class_dir, followlinks=True), key=lambda w: w[0]):
        for name in sorted(files):
            if name.lower().endswith(exts):
                out.append(os.path.join(root, name))
    return out


class Folder(Files):
    """A class-per-subfolder image tree::

        root/cat/0001.jpg      -> label 0
        root/dog/a/0002.png    -> label 1   (subfolders of a class folder are walked too)

    Class names are the sorted names of the subfolders of ``root`` (the rule of Keras'
    ``image_dataset_from_directory`` and torchvision's ``ImageFolder``); the label of a
    file is the position of its class in :attr:`class_names`.  ``class_names`` given
    explicitly selects those subfolders and fixes their order (each must exist).
    ``extensions``: the file extensions to take, case-insensitive (default
    :data:`IMAGE_EXTENSIONS`); other files are ignored.  Files directly in ``root``
    belong to no class and are ignored.  Files that do not decode follow the
    pipeline's ``on_error`` policy like any :class:`Files` sample.

    Attributes: ``root``, ``class_names``, ``paths`` (list of str), ``labels`` (int64).
    """

    def __init__(self, root, extensions=None, class_names=None):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"Folder: {root!r} is not a directory")
        exts = _norm_exts(extensions)
        found = sorted(e.name for e in os.scandir(root) if e.is_dir())
        if class_names is None:
            names = found
        else:
            names = [str(c) for c in class_names]
            if len(set(names)) != len(names):
                raise ValueError(f"Folder: class_names has duplicates: {names}")
            missing = [c for c in names if c not in found]
            if missing:
                raise ValueError(f"Folder: class_names {missing} are not subfolders of {root!r} "
                                 f"(found {found})")
        if not names:
            raise ValueError(f"Folder: {root!r} has no class subfolders")
        paths, labels = [], []
        for k, name in enumerate(names):
            files = _list_class(os.path.join(root, name), exts)
            paths += files
            labels += [k] * len(files)
        if not paths:
            raise ValueError(f"Folder: no files with extensions {list(exts)} under {root!r}")
        self.root = root
        self.class_names = list(names)
        self.paths = paths
        self.extensions = exts
        super().__init__(paths, np.asarray(labels, dtype=np.int64))
