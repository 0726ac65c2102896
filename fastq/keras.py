"""Keras's loader and preprocessing layers on fastq (docs/migrate.md, "Keras").

``fastq.keras.image_dataset_from_directory`` takes the arguments of
``keras.utils.image_dataset_from_directory`` and gives the same dataset: the same class
names, file lists (the same files in each subset for a seed), labels, element spec and
pixels, read and resized by fastq's native workers; ``augment=`` fuses Keras
preprocessing layers into the native chain (``fastq.keras.translate``).
"""
import os
import posixpath
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fastq.translate._core import Step, Translation, TranslationError
from fastq.translate.keras import flatten_layers, translate as _translate

__all__ = ["image_dataset_from_directory", "translate", "index_directory", "ALLOWLIST_FORMATS"]

ALLOWLIST_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")  # keras' image_dataset_utils
_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


def translate(layers: Any, strict: bool = False, *, image_size: Optional[Tuple[int, int]] = None,
              channels: int = 3, data_format: str = "channels_last") -> Translation:
    """A :class:`fastq.translate.Translation` of Keras preprocessing layers (a list or a
    ``keras.Sequential``): ``.ops``, ``.python_steps``, ``str()`` (the table),
    ``.pipeline(source, batch_size, ...)``.  ``image_size`` (height, width) is the size
    entering the first layer, needed by CenterCrop and RandomCrop.  A layer without an
    exact native equivalent runs in Python with the layers after it (one UserWarning
    naming it); ``strict=True`` raises :class:`TranslationError` instead."""
    return _translate(layers, strict, image_size=image_size, channels=channels, data_format=data_format)


def _is_url(path: str) -> bool:
    from fastq.sources import remote as remote_mod
    return remote_mod.is_url(path)


def index_directory(directory: str, labels: Any = "inferred", class_names: Optional[Sequence[str]] = None,
                    shuffle: bool = True, seed: Optional[int] = None,
                    follow_links: bool = False) -> Tuple[List[str], Optional[np.ndarray], Optional[List[str]]]:
    """Keras's ``dataset_utils.index_directory`` for image files: the class subfolders
    (sorted, hidden ones skipped, or ``class_names`` in its order), each walked in
    sorted order, then with ``shuffle`` the paths and the labels each shuffled by
    ``np.random.RandomState(seed)``.  Local folders are walked as Keras walks them;
    URLs are listed by :class:`fastq.sources.Folder` and put in the walk's order."""
    directory = os.fspath(directory)
    if _is_url(directory):
        filenames, labels_list, subdirs = _index_remote(directory, labels, class_names)
    else:
        filenames, labels_list, subdirs = _index_local(directory, labels, class_names, follow_links)
    if labels == "inferred":
        lab: Optional[np.ndarray] = np.asarray(labels_list, dtype="int32")
        names: Optional[List[str]] = list(subdirs)
    elif labels is None:
        lab, names = None, None
    else:
        if len(labels) != len(filenames):
            raise ValueError(f"Expected the lengths of `labels` to match the number of files in the target "
                             f"directory. len(labels) is {len(labels)} while we found {len(filenames)} files "
                             f"in directory {directory}.")
        lab = np.asarray(labels)
        names = [str(v) for v in sorted(set(labels))]
    paths = list(filenames)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1_000_000)  # Keras: np.random.randint(1e6)
        rng = np.random.RandomState(seed)
        rng.shuffle(paths)
        if lab is not None:
            rng = np.random.RandomState(seed)
            rng.shuffle(lab)
    return paths, lab, names


def _subdirs(entries: Sequence[str], class_names: Optional[Sequence[str]], labels: Any) -> List[str]:
    if labels != "inferred":
        if class_names is not None:
            raise ValueError("You can only pass `class_names` if `labels=\"inferred\"`.")
        return [""]
    subdirs = [d for d in sorted(entries) if not d.startswith(".")]
    if class_names is not None:
        if not set(class_names).issubset(set(subdirs)):
            raise ValueError(f"The `class_names` passed did not match the names of the subdirectories of the "
                             f"target directory. Expected: {subdirs} (or a subset of it), but received: "
                             f"class_names={class_names}")
        subdirs = list(class_names)
    return subdirs


def _index_local(directory: str, labels: Any, class_names: Any, follow_links: bool):
    entries = [d for d in os.listdir(directory) if os.path.isdir(os.path.join(directory, d))]
    subdirs = _subdirs(entries, class_names, labels)
    files: List[str] = []
    labs: List[int] = []
    for k, sub in enumerate(subdirs):
        dirpath = os.path.join(directory, sub)
        walk = os.walk(dirpath, followlinks=follow_links)
        for root, _, names in sorted(walk, key=lambda x: x[0]):
            for fname in sorted(names):
                if fname.lower().endswith(ALLOWLIST_FORMATS):
                    rel = os.path.join(os.path.basename(dirpath), os.path.relpath(os.path.join(root, fname), dirpath))
                    files.append(os.path.join(directory, rel))
                    labs.append(k)
    return files, labs, subdirs


def _index_remote(directory: str, labels: Any, class_names: Any):
    from fastq.sources import Folder
    if labels != "inferred":
        raise ValueError("fastq.keras.image_dataset_from_directory: labels=None or a list needs a local "
                         "directory (a URL is listed by class subfolder)")
    folder = Folder(directory, extensions=ALLOWLIST_FORMATS, class_names=class_names)
    subdirs = _subdirs(folder.class_names, class_names, labels)
    by_class: Dict[str, List[str]] = {name: [] for name in subdirs}
    for path, lab in zip(folder.paths, folder.labels):
        by_class[folder.class_names[int(lab)]].append(path)
    files: List[str] = []
    labs: List[int] = []
    for k, name in enumerate(subdirs):
        ps = sorted(by_class[name], key=lambda p: (posixpath.dirname(p), posixpath.basename(p)))
        files += ps
        labs += [k] * len(ps)
    return files, labs, subdirs


def _split(paths: List[str], labels: Optional[np.ndarray], validation_split: Optional[float], subset: Optional[str],
           verbose: bool):
    """Keras's get_training_or_validation_split (the last int(split * n) files validate)."""
    if not validation_split:
        return paths, labels
    n_val = int(validation_split * len(paths))
    if subset == "training":
        if verbose:
            print(f"Using {len(paths) - n_val} files for training.")
        return paths[:-n_val], (labels[:-n_val] if labels is not None else None)
    if verbose:
        print(f"Using {n_val} files for validation.")
    return paths[-n_val:], (labels[-n_val:] if labels is not None else None)


def _inference_layers(layers: Any) -> List[Any]:
    """The layers as Keras runs them outside training (validation data): the random
    layers are the identity; RandomCrop (a centre crop to the aspect ratio + resize there)
    is refused."""
    out = []
    for layer in flatten_layers(layers):
        name = type(layer).__name__
        if name == "RandomCrop":
            raise ValueError("fastq.keras.image_dataset_from_directory: augment with RandomCrop on the validation "
                             "subset is not supported (Keras's inference-mode RandomCrop resizes)")
        if name.startswith("Random") or name == "RandAugment":
            continue
        out.append(layer)
    return out


def image_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, color_mode="rgb",
                                 batch_size=32, image_size=(256, 256), shuffle=True, seed=None, validation_split=None,
                                 subset=None, interpolation="bilinear", follow_links=False, crop_to_aspect_ratio=False,
                                 pad_to_aspect_ratio=False, data_format=None, verbose=True, *, augment=None,
                                 strict=False, workers=None):
    """``keras.utils.image_dataset_from_directory`` on fastq: the same arguments and the
    same ``tf.data.Dataset`` (``class_names`` and ``file_paths`` attributes, float32
    images 0..255 of shape (None, h, w, c), int32 / one-hot float32 / (B, 1) float32
    labels), read, decoded and resized by fastq's native workers.

    ``augment``: Keras preprocessing layers (a list or keras.Sequential) run on each
    image after the resize, in training mode, fused into the native chain where they
    translate exactly (``fastq.keras.translate``; the others run in Python, with one
    warning, or raise with ``strict=True``).  ``workers``: fastq's worker threads.
    ``directory`` may be a URL that :class:`fastq.sources.Folder` lists (``s3://...``).

    Refused (ValueError naming the argument): ``color_mode="rgba"``, ``interpolation``
    other than "bilinear", ``crop_to_aspect_ratio`` and ``pad_to_aspect_ratio`` (their
    crop or pad depends on each image's size; fastq's chain has fixed sizes), and GIF
    files (fastq does not decode GIF)."""
    import tensorflow as tf

    from fastq.sources import Files
    from fastq.tf import dataset as fastq_dataset
    if labels not in ("inferred", None) and not isinstance(labels, (list, tuple)):
        raise ValueError("`labels` argument should be a list/tuple of integer labels, \"inferred\" or None. "
                         f"Received: labels={labels}")
    if label_mode not in {"int", "categorical", "binary", None}:
        raise ValueError(f'`label_mode` argument must be one of "int", "categorical", "binary", or None. '
                         f"Received: label_mode={label_mode}")
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    if color_mode == "rgb":
        channels = 3
    elif color_mode == "grayscale":
        channels = 1
    elif color_mode == "rgba":
        raise ValueError("fastq.keras.image_dataset_from_directory: color_mode='rgba' is not supported "
                         "(fastq's images have 1 or 3 channels); use 'rgb' or 'grayscale', or Keras's own loader")
    else:
        raise ValueError(f'`color_mode` must be one of {{"rgb", "rgba", "grayscale"}}. Received: color_mode={color_mode}')
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    elif not isinstance(image_size, (list, tuple)) or len(image_size) != 2:
        raise ValueError(f"Invalid `image_size` value. Expected a tuple of 2 integers. Received: image_size={image_size}")
    image_size = (int(image_size[0]), int(image_size[1]))
    interpolation = interpolation.lower()
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"Argument `interpolation` should be one of {_INTERPOLATIONS}. "
                         f"Received: interpolation={interpolation}")
    if interpolation != "bilinear":
        raise ValueError(f"fastq.keras.image_dataset_from_directory: interpolation={interpolation!r} is not "
                         "supported: only 'bilinear' (tf.image.resize without antialias = OpenCV INTER_LINEAR) "
                         "matches Keras's resize")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("Only one of `pad_to_aspect_ratio`, `crop_to_aspect_ratio` can be set to `True`.")
    if crop_to_aspect_ratio or pad_to_aspect_ratio:
        arg = "crop_to_aspect_ratio" if crop_to_aspect_ratio else "pad_to_aspect_ratio"
        raise ValueError(f"fastq.keras.image_dataset_from_directory: {arg}=True is not supported (its window "
                         "depends on each image's size and Keras rounds it differently from fastq's crops)")
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(f"`validation_split` must be between 0 and 1, received: {validation_split}")
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and inversely.")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(f'`subset` must be either "training", "validation" or "both", received: {subset}')
    if validation_split and shuffle and seed is None:
        raise ValueError("If using `validation_split` and shuffling the data, you must provide a `seed` argument, "
                         "to make sure that there is no overlap between the training and validation subset.")
    if data_format is None:
        import keras
        data_format = keras.config.image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    if seed is None:
        seed = np.random.randint(1e6)
    seed = int(seed)
    paths, labs, names = index_directory(directory, labels, class_names, shuffle, seed, follow_links)
    gifs = [p for p in paths if p.lower().endswith(".gif")]
    if gifs:
        raise ValueError(f"fastq.keras.image_dataset_from_directory: {len(gifs)} GIF file(s), e.g. {gifs[0]!r}: "
                         "fastq does not decode GIF")
    if verbose:
        if labs is None:
            print(f"Found {len(paths)} files.")
        else:
            print(f"Found {len(paths)} files belonging to {len(names)} classes.")
    if label_mode == "binary" and len(names) != 2:
        raise ValueError(f'When passing `label_mode="binary"`, there must be exactly 2 class_names. '
                         f"Received: class_names={names}")
    head = [Step(None, [], name="(image_dataset_from_directory)",
                 becomes=f"decode ({color_mode}, TF's fast IDCT), Resize({image_size}, bilinear), no DCT scaling")]
    from fastq import ops as fops
    head[0] = Step(None, [fops.Resize(image_size, interpolation="bilinear")], name="(image_dataset_from_directory)",
                   becomes=f"decode ({color_mode}) + Resize({image_size}, bilinear) = tf.image.resize")
    tr = _translate(augment, strict, image_size=image_size, channels=channels, data_format=data_format, head=head)
    tr_val = tr
    if augment is not None and (subset in ("both", "validation")):
        tr_val = _translate(_inference_layers(augment), strict, image_size=image_size, channels=channels,
                            data_format=data_format, head=head)

    def make(ps: List[str], ls: Optional[np.ndarray], train: bool):
        if not ps:
            raise ValueError(f"No images found in directory {directory}. Allowed formats: {ALLOWLIST_FORMATS}")
        src = Files(ps, np.asarray(ls if ls is not None else np.zeros(len(ps)), dtype=np.int64))
        bs = batch_size if batch_size is not None else 32
        pkw = {"shuffle": bool(shuffle and train), "seed": seed, "drop_remainder": False, "label_dtype": "int32"}
        if workers is not None:
            pkw["workers"] = workers
        pipe = (tr if train else tr_val).pipeline(src, bs, **pkw)
        ds = fastq_dataset(pipe)
        nclass = len(names) if names else 0
        if label_mode is None:
            ds = ds.map(lambda x, y: x)
        elif label_mode == "categorical":
            ds = ds.map(lambda x, y: (x, tf.one_hot(tf.cast(y, tf.int32), nclass)))
        elif label_mode == "binary":
            ds = ds.map(lambda x, y: (x, tf.expand_dims(tf.cast(y, tf.float32), axis=-1)))
        if batch_size is None:
            ds = ds.unbatch()
        ds.class_names = names
        ds.file_paths = ps
        ds.fastq_pipeline = pipe
        ds.fastq_translation = tr if train else tr_val
        return ds

    if subset == "both":
        p_tr, l_tr = _split(paths, labs, validation_split, "training", verbose)
        p_va, l_va = _split(paths, labs, validation_split, "validation", verbose)
        if not p_tr:
            raise ValueError(f"No training images found in directory {directory}. Allowed formats: {ALLOWLIST_FORMATS}")
        if not p_va:
            raise ValueError(f"No validation images found in directory {directory}. Allowed formats: {ALLOWLIST_FORMATS}")
        return [make(p_tr, l_tr, True), make(p_va, l_va, False)]
    ps, ls = _split(paths, labs, validation_split, subset, verbose)
    return make(ps, ls, subset != "validation")


__all__ += ["TranslationError", "flatten_layers"]
