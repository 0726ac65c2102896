"""fastq.sources.WebDataset: tar shards, the members of one sample grouped by key
(``0001.jpg`` + ``0001.cls``), the tar headers indexed natively when the source is
built.  See docs/sources.md."""
import os

import numpy as np

from fastq.sources.base import _expand_paths
from fastq.sources.images import ImageSource
from fastq.sources.readahead import _check_io, _with_read_ahead

__all__ = ["WebDataset"]


def _split_key(name):
    """WebDataset's rule: key = the path up to the first '.' of its last component,
    extension = the rest (lower-cased); None for names without an extension."""
    d, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    if not dot or not stem:
        return None, None
    return (d + "/" + stem if d else stem), ext.lower()


class WebDataset(ImageSource):
    """Tar shards in the WebDataset layout: consecutive members that share a key
    (``dir/0001.jpg``, ``dir/0001.cls`` -> key ``dir/0001``) form one sample.

    ``paths``: shard paths or a glob pattern (sorted).  Each sample's image is its
    first member whose extension is in ``image_ext`` (in that order); its label
    (int64) is the decimal integer in the ``label_ext`` member (``None``: no
    label output).  Members without an extension are ignored.

    The tar headers are read natively when the source is built (ustar, pax
    ``path``/``size`` records, GNU long names; every header checksum verified);
    the member data is read by the workers.  These samples fail (an error naming
    the shard, sample number and key, or a counted skip with
    ``on_error="skip"``): no image member, no or a non-integer label, a member
    name that is absolute or contains ``..``, a member name used twice in one
    sample.  A framing error (bad header checksum, truncated member) keeps the
    samples before it and is one failing sample itself.

    ``io_threads`` > 0: that many threads read samples up to ``read_ahead``
    samples ahead of the decoding workers (for slow storage).
    """

    kind = "reader"

    def __init__(self, paths, image_ext=("jpg", "jpeg", "png", "webp"), label_ext="cls", io_threads=0,
                 read_ahead=64):
        from fastq import _image
        _check_io(io_threads, read_ahead, "WebDataset")
        self.io_threads, self.read_ahead = io_threads, read_ahead
        self.paths = _expand_paths(paths, "WebDataset")
        if isinstance(image_ext, str):
            image_ext = (image_ext,)
        self.image_ext = tuple(e.lower().lstrip(".") for e in image_ext)
        if not self.image_ext:
            raise ValueError("WebDataset: image_ext is empty")
        self.label_ext = label_ext.lower().lstrip(".") if label_ext is not None else None
        self._extra_outputs = [((), np.dtype(np.int64))] if self.label_ext is not None else []
        self._extra_names = ["labels"] if self.label_ext is not None else []
        self._label_output = 0 if self.label_ext is not None else None
        cols = {k: [] for k in ("shard", "img_off", "img_size", "lab_off", "lab_size", "number")}
        keys, errs = [], []

        def add(k, key, members, err, number):
            img = next((members[e] for e in self.image_ext if e in members), None)
            lab = members.get(self.label_ext) if self.label_ext is not None else None
            if err is None and img is None:
                err = f"no image member ({', '.join('.' + e for e in self.image_ext)}) in the sample"
            cols["shard"].append(k)
            cols["img_off"].append(img[0] if img else 0)
            cols["img_size"].append(img[1] if img else 0)
            cols["lab_off"].append(lab[0] if lab else _image.TAR_NONE)
            cols["lab_size"].append(lab[1] if lab else 0)
            cols["number"].append(number)
            keys.append(os.fsencode(key))
            errs.append(err.encode() if err else None)

        for k, path in enumerate(self.paths):
            names, offs, sizes, unsafe, tail = _image.tar_scan(path)
            number = 0
            cur_key, members, err = None, {}, None
            for name, o, s, bad in zip(names, offs.tolist(), sizes.tolist(), unsafe.tolist()):
                key, ext = _split_key(name)
                if key is None and not bad:
                    continue
                if key is None:
                    key, ext = name, ""
                if key != cur_key:
                    if cur_key is not None:
                        add(k, cur_key, members, err, number)
                        number += 1
                    cur_key, members, err = key, {}, None
                if bad and err is None:
                    err = f"unsafe member name {name!r} (absolute or '..')"
                elif ext in members and err is None:
                    err = f"member name {name!r} appears twice in the sample"
                members[ext] = (o, s)
            if cur_key is not None:
                add(k, cur_key, members, err, number)
                number += 1
            if tail is not None:
                add(k, f"<after sample {number - 1}>" if number else "<start>", {}, tail[1], number)
        if not keys:
            raise ValueError(f"WebDataset: the shards hold no samples: {self.paths}")
        self._shard_of = np.asarray(cols["shard"], np.int32)
        self.sample_numbers = np.asarray(cols["number"], np.int64)
        self.keys = [os.fsdecode(k) for k in keys]
        reader = _image.TarReader([os.fsencode(p) for p in self.paths], self._shard_of,
                                  np.asarray(cols["img_off"], np.uint64), np.asarray(cols["img_size"], np.uint64),
                                  np.asarray(cols["lab_off"], np.uint64), np.asarray(cols["lab_size"], np.uint64),
                                  self.sample_numbers, keys, errs, self.label_ext is not None)
        super().__init__(reader, None)

    def path(self, index):
        """The shard that holds sample `index`."""
        return self.paths[self._shard_of[index]]

    def _task_items(self):
        return _with_read_ahead(self, self._items)

    def location(self, index):
        """(shard path, sample number inside the shard, key) of sample `index`."""
        return self.path(index), int(self.sample_numbers[index]), self.keys[index]
