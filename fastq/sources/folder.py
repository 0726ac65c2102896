"""fastq.sources.Folder: a class-per-subfolder image tree (the layout of Keras'
``image_dataset_from_directory`` and torchvision's ``ImageFolder``), read through the
:class:`~fastq.sources.Files` path.  See docs/sources.md."""
import os

import numpy as np

from fastq.sources.images import Files
from fastq.sources.readahead import _check_io, _init_file_read_ahead

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


def _select_classes(found, class_names, root):
    """The class names to read, in label order: the sorted subfolders (prefixes)
    found, or class_names (each must be among them)."""
    if class_names is None:
        names = sorted(found)
    else:
        names = [str(c) for c in class_names]
        if len(set(names)) != len(names):
            raise ValueError(f"Folder: class_names has duplicates: {names}")
        missing = [c for c in names if c not in found]
        if missing:
            raise ValueError(f"Folder: class_names {missing} are not subfolders of {root!r} "
                             f"(found {sorted(found)})")
    if not names:
        raise ValueError(f"Folder: {root!r} has no class subfolders")
    return names


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

    ``io_threads`` > 0: that many threads read files up to ``read_ahead`` samples
    ahead of the decoding workers (for slow storage; see docs/sources.md).

    ``root`` may be a URL (``s3://bucket/train``, ``gs://``, ``az://``, ``http(s)://``):
    the class prefixes and their objects are found by listing, in the same order as a
    local tree; ``storage_options``, ``cache_dir``, ``cache_limit`` and ``remote`` are
    those of :class:`Files` (docs/cloud.md).

    Attributes: ``root``, ``class_names``, ``paths`` (list of str), ``labels`` (int64).
    """

    def __init__(self, root, extensions=None, class_names=None, io_threads=0, read_ahead=64, _read_delay_us=0,
                 storage_options=None, cache_dir=None, cache_limit=None, remote=None):
        from fastq.sources import remote as remote_mod
        _check_io(io_threads, read_ahead, "Folder")
        root = remote_mod.local_path(os.fspath(root))
        exts = _norm_exts(extensions)
        if remote_mod.is_url(root):
            if io_threads:
                raise ValueError("Folder: io_threads applies to local folders; remote reads are tuned by "
                                 "remote=fastq.sources.RemoteOptions(...) (docs/cloud.md)")
            by_class, counters = remote_mod.folder_remote(root, exts, storage_options, remote)
            names = _select_classes(set(by_class), class_names, root)
            objs = [o for name in names for o in by_class[name]]
            labels = [k for k, name in enumerate(names) for _ in by_class[name]]
            if not objs:
                raise ValueError(f"Folder: no objects with extensions {list(exts)} under {root!r}")
            self.root, self.class_names, self.extensions = root, list(names), exts
            self.paths = [o.url for o in objs]
            super().__init__(self.paths, np.asarray(labels, dtype=np.int64), storage_options=storage_options,
                             cache_dir=cache_dir, cache_limit=cache_limit, remote=remote, _objects=objs)
            self._remote.counters.add(counters)
            return
        if storage_options is not None or cache_dir is not None or remote is not None:
            raise ValueError("Folder: storage_options, cache_dir and remote apply to URLs only")
        if not os.path.isdir(root):
            raise FileNotFoundError(f"Folder: {root!r} is not a directory")
        names = _select_classes({e.name for e in os.scandir(root) if e.is_dir()}, class_names, root)
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
        super().__init__(paths, np.asarray(labels, dtype=np.int64), io_threads, read_ahead)
        _init_file_read_ahead(self, io_threads, read_ahead, _read_delay_us)
