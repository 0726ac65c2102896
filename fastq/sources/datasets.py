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

from fastq.sources.images import Files, ImageSource, _ImageBackend
from fastq.sources.readahead import _check_io, _init_file_read_ahead, _with_read_ahead

__all__ = ["Folder", "TFRecord", "WebDataset", "IMAGE_EXTENSIONS"]

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

    ``io_threads`` > 0: that many threads read files up to ``read_ahead`` samples
    ahead of the decoding workers (for slow storage; see docs/sources.md).

    Attributes: ``root``, ``class_names``, ``paths`` (list of str), ``labels`` (int64).
    """

    def __init__(self, root, extensions=None, class_names=None, io_threads=0, read_ahead=64, _read_delay_us=0):
        _check_io(io_threads, read_ahead, "Folder")
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
        super().__init__(paths, np.asarray(labels, dtype=np.int64), io_threads, read_ahead)
        _init_file_read_ahead(self, io_threads, read_ahead, _read_delay_us)


# ---------------------------------------------------------------- TFRecord

_INDEX_MAGIC = b"FQTFRIX1"


def _expand_paths(paths, what):
    import glob
    if isinstance(paths, (str, bytes, os.PathLike)):
        p = os.fsdecode(paths)
        paths = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
    paths = [os.fsdecode(p) for p in paths]
    if not paths:
        raise ValueError(f"{what}: no shard paths given (or the pattern matched nothing)")
    return paths


def _cache_path(path, index_dir):
    """Where the index of shard `path` is cached: next to it (path + '.fqidx') if
    index_dir is None and its folder is writable, else in index_dir (default
    ~/.cache/fastq/tfrecord-index) under a name derived from the absolute path."""
    import hashlib
    ap = os.path.abspath(path)
    if index_dir is None and os.access(os.path.dirname(ap), os.W_OK):
        return ap + ".fqidx"
    d = index_dir or os.path.join(os.path.expanduser("~"), ".cache", "fastq", "tfrecord-index")
    h = hashlib.sha1(os.fsencode(ap)).hexdigest()[:20]
    return os.path.join(d, f"{os.path.basename(ap)}.{h}.fqidx")


def _load_cached_index(cpath, st):
    try:
        with open(cpath, "rb") as f:
            head = f.read(32)
            if len(head) != 32 or head[:8] != _INDEX_MAGIC:
                return None
            size, mtime, n = np.frombuffer(head[8:], np.int64)
            if size != st.st_size or mtime != st.st_mtime_ns:
                return None  # stale: the shard changed since the index was written
            body = np.fromfile(f, np.uint64, count=2 * int(n))
    except OSError:
        return None
    if len(body) != 2 * n:
        return None
    return body[:n].copy(), body[n:].copy()


def _save_index(cpath, st, offsets, lengths):
    """Best effort (an unwritable cache only costs a rescan next time); atomic rename."""
    tmp = f"{cpath}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cpath), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(_INDEX_MAGIC + np.array([st.st_size, st.st_mtime_ns, len(offsets)], np.int64).tobytes())
            f.write(np.ascontiguousarray(offsets, np.uint64).tobytes())
            f.write(np.ascontiguousarray(lengths, np.uint64).tobytes())
        os.replace(tmp, cpath)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _given_index(entry, path, size, k):
    """index= entry for shard k: a path to a DALI-style text index ("offset size"
    per line, size = the framed record size) or a sequence of record offsets."""
    if isinstance(entry, (str, bytes, os.PathLike)):
        rows = []
        with open(entry, "r") as f:
            for ln, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
                    raise ValueError(f"TFRecord index {os.fsdecode(entry)!r} line {ln}: expected 'offset size'")
                rows.append((int(parts[0]), int(parts[1])))
        offsets = np.array([r[0] for r in rows], np.uint64)
        framed = np.array([r[1] for r in rows], np.uint64)
        src = os.fsdecode(entry)
    else:
        offsets = np.asarray(entry, np.int64)
        if offsets.ndim != 1 or (offsets < 0).any() or (len(offsets) > 1 and (np.diff(offsets) <= 0).any()):
            raise ValueError(f"TFRecord: index[{k}] must be increasing non-negative record offsets")
        offsets = offsets.astype(np.uint64)
        framed = np.diff(np.append(offsets, np.uint64(size))).astype(np.uint64)
        src = f"index[{k}]"
    if len(offsets) and ((framed < 16).any() or (offsets + framed > size).any()):
        bad = int(np.nonzero((framed < 16) | (offsets + framed > size))[0][0])
        raise ValueError(f"TFRecord: {src}: record {bad} (offset {int(offsets[bad])}, size {int(framed[bad])}) "
                         f"does not fit shard {path!r} of {size} bytes")
    return offsets, framed - np.uint64(16)


def _decompress(path, compression):
    """Whole decompressed shard (bytes) and a truncation message (or "")."""
    import zlib
    with open(path, "rb") as f:
        raw = f.read()
    out = []
    wbits = 31 if compression == "GZIP" else 15
    rest = raw
    while rest:
        d = zlib.decompressobj(wbits)
        try:
            out.append(d.decompress(rest))
            out.append(d.flush())
        except zlib.error as e:
            return b"".join(out), f"corrupt {compression} stream: {e}"
        if not d.eof:
            return b"".join(out), f"truncated {compression} stream"
        rest = d.unused_data
        if compression != "GZIP":
            break  # ZLIB: a single stream
    return b"".join(out), ""


class TFRecord(ImageSource):
    """TFRecord shards of ``tf.train.Example`` records, read natively.

    ``paths``: shard paths, or a glob pattern (sorted).  Records are numbered in
    shard order, then record order; that numbering is the sample index used for
    shuffling, ``shard()`` and ``explain``.

    Outputs: the decoded, augmented image from the bytes feature ``image_key``;
    then the int64 label ``label_key`` (a single int64 value; ``None``: no
    label); then each of ``features``: ``{key: (dtype, count)}`` with dtype
    ``"float32"`` or ``"int64"``, a fixed number of values per record, e.g.
    ``{"image/object/bbox/xmin": ("float32", 1)}`` (delivered with shape
    (count,)).

    Both CRCs of every record are verified when it is read.  A record that fails
    (CRC mismatch, malformed Example, missing key or wrong type, undecodable
    image) raises an error naming the shard path and record number, or is a
    counted skip with ``on_error="skip"``.  A shard whose framing breaks
    (truncation, corrupt length field) keeps the records before the break; the
    break itself is one failing sample (the records after it cannot be located).

    Random access needs a record index (16 bytes per record).  ``index``: per
    shard a DALI-style text index file (``offset size`` per line) or a sequence
    of record offsets; by default it is built by scanning the framing on first use
    and cached in ``<shard>.fqidx`` (or under ``index_dir``, default
    ``~/.cache/fastq/tfrecord-index`` when the shard's folder is read-only; the
    cache is rebuilt when the shard's size or mtime changes;
    ``cache_index=False`` disables it).

    ``compression``: None / ``"GZIP"`` / ``"ZLIB"`` (TF's ``compression_type``).
    Compressed shards cannot be read at random offsets: with an index each one
    is decompressed into memory when the source is built (memory cost: the
    uncompressed size of all shards) and read from there; with
    ``index=False`` they are inflated as a stream by the reader.

    ``io_threads`` > 0: that many threads read records up to ``read_ahead``
    samples ahead of the decoding workers (for slow storage).

    ``index=False``: data too large to index.  No record index: each shard's
    records are counted once (a framing walk that keeps no offsets) and read by
    a sequential cursor per shard; with ``shuffle=True`` the epoch order is the
    shards permuted by (seed, epoch) and a shuffle buffer of ``shuffle_buffer``
    records (default 10000), see :meth:`stream_order` and docs/sources.md
    (memory: the buffered records and 2 bits per record in the reader).
    """

    kind = "reader"

    def __init__(self, paths, image_key="image/encoded", label_key="image/class/label", index=None,
                 compression=None, features=None, index_dir=None, cache_index=True, io_threads=0, read_ahead=64,
                 shuffle_buffer=None):
        from fastq import _image
        _check_io(io_threads, read_ahead, "TFRecord")
        self._stream = index is False
        if shuffle_buffer is not None and not self._stream:
            raise ValueError("TFRecord: shuffle_buffer= applies to the streaming mode (index=False) only")
        if self._stream:
            sb = 10000 if shuffle_buffer is None else shuffle_buffer
            if not isinstance(sb, int) or isinstance(sb, bool) or not 1 <= sb <= 1 << 24:
                raise ValueError(f"TFRecord: shuffle_buffer must be an int in [1, 2**24], got {shuffle_buffer!r}")
            self.shuffle_buffer = sb
            index = None
        self.io_threads, self.read_ahead = io_threads, read_ahead
        self.paths = _expand_paths(paths, "TFRecord")
        comp = (compression or "").upper()
        if comp not in ("", "NONE", "GZIP", "ZLIB"):
            raise ValueError(f"TFRecord: compression must be None, 'GZIP' or 'ZLIB', got {compression!r}")
        self.compression = comp if comp in ("GZIP", "ZLIB") else None
        if index is not None and (isinstance(index, (str, bytes)) or len(index) != len(self.paths)):
            raise ValueError(f"TFRecord: index must have one entry per shard ({len(self.paths)})")
        if index is not None and self.compression:
            raise ValueError("TFRecord: index= applies to uncompressed shards only")
        feats = [(image_key, "bytes", 1)]
        self._extra_outputs = []
        self._label_output = None  # index of the label in _extra_outputs (label_dtype converts it)
        if label_key is not None:
            feats.append((label_key, "int64", 1))
            self._label_output = 0
            self._extra_outputs.append(((), np.dtype(np.int64)))
        for key, spec in (features or {}).items():
            dtype, count = spec
            dtype = np.dtype(dtype)
            if dtype not in (np.float32, np.int64) or int(count) < 1:
                raise ValueError(f"TFRecord: feature {key!r}: need (float32 | int64, count >= 1), got {spec!r}")
            feats.append((key, dtype.name, int(count)))
            self._extra_outputs.append(((int(count),), dtype))
        keys = [f[0] for f in feats]
        if len(set(keys)) != len(keys):
            raise ValueError(f"TFRecord: a feature key is asked for twice: {keys}")
        self.image_key, self.label_key = image_key, label_key
        self.features = dict(features or {})

        if self._stream:
            self._init_stream(feats)
            return
        shard_ids, offsets, lengths, numbers, mems, tails = [], [], [], [], [], []
        for k, path in enumerate(self.paths):
            mem, tail = None, ""
            if self.compression:
                mem, tail = _decompress(path, self.compression)
                o, ln, t = _image.tfrecord_scan(path, mem)
                if t is not None:
                    tail = t[1] + (f" ({tail})" if tail else "")
            elif index is not None:
                o, ln = _given_index(index[k], path, os.stat(path).st_size, k)
            else:
                st = os.stat(path)
                cpath = _cache_path(path, index_dir) if cache_index else None
                got = _load_cached_index(cpath, st) if cpath else None
                if got is not None:
                    o, ln = got
                else:
                    o, ln, t = _image.tfrecord_scan(path)
                    if t is not None:
                        tail = t[1]
                    elif cpath:
                        _save_index(cpath, st, o, ln)  # shards with a broken framing are not cached
            if tail:  # one more sample that stands for the break
                o = np.append(o, np.uint64(0))
                ln = np.append(ln, np.uint64(_image.TFR_BROKEN))
            shard_ids.append(np.full(len(o), k, np.int32))
            offsets.append(o)
            lengths.append(ln)
            numbers.append(np.arange(len(o), dtype=np.int64))
            mems.append(mem)
            tails.append(tail.encode())
        self._shard_of = np.concatenate(shard_ids)
        self.record_numbers = np.concatenate(numbers)
        if len(self._shard_of) == 0:
            raise ValueError(f"TFRecord: the shards hold no records: {self.paths}")
        reader = _image.TFRecordReader([os.fsencode(p) for p in self.paths], mems, tails, self._shard_of,
                                       np.concatenate(offsets), np.concatenate(lengths), self.record_numbers,
                                       feats, 0)
        super().__init__(reader, None)

    def _init_stream(self, feats):
        """index=False: per shard only its record count (a framing walk that
        keeps no offsets); the records are read by sequential cursors."""
        from fastq import _image
        gz = {None: 0, "GZIP": 31, "ZLIB": 15}[self.compression]  # compressed shards: inflated as a stream
        counts, mems, tails = [], [], []
        for path in self.paths:
            n, t = _image.tfrecord_count(path, None, gz)
            tail = t[1] if t is not None else ""
            counts.append(n + (1 if tail else 0))  # the break is one failing sample
            mems.append(None)
            tails.append(tail.encode())
        self.record_counts = np.asarray(counts, np.int64)
        self._base = np.concatenate([[0], np.cumsum(self.record_counts)]).astype(np.int64)
        if self._base[-1] == 0:
            raise ValueError(f"TFRecord: the shards hold no records: {self.paths}")
        # held records: the shuffle buffer + what the workers and the read-ahead claim out of order
        hold_cap = self.shuffle_buffer + int(self.read_ahead) + 1024
        self._stream_args = ([os.fsencode(p) for p in self.paths], mems, tails, self.record_counts, feats, 0, hold_cap,
                             gz)
        ImageSource.__init__(self, _image.TFRecordStreamReader(*self._stream_args), None)

    def stream_order(self, seed, epoch, shuffle=True):
        """index=False: the epoch order over all records (before shard()): with
        shuffle, the shards permuted and a shuffle buffer of
        ``shuffle_buffer`` records, both drawn from (seed, epoch); without,
        the records in shard order.  See docs/sources.md for the exact rule."""
        if not self._stream:
            raise ValueError("TFRecord.stream_order: only with index=False")
        from fastq import _image
        counts, base = self.record_counts, self._base
        if not shuffle:
            return np.arange(base[-1], dtype=np.int64)
        rng = np.random.default_rng([int(seed), int(epoch), 0x54465253])  # "TFRS"
        perm = rng.permutation(len(counts))
        stream = np.concatenate([np.arange(base[s], base[s + 1], dtype=np.int64) for s in perm])
        b = min(self.shuffle_buffer, len(stream))
        fill = rng.integers(0, b, size=len(stream) - b, dtype=np.int64)
        drain = rng.integers(0, np.arange(b, 0, -1, dtype=np.int64), dtype=np.int64)
        return _image.shuffle_buffer_apply(stream, fill, drain)

    def _make_backend(self, config, **options):
        if not self._stream:
            return super()._make_backend(config, **options)
        return _StreamBackend(self, config, **options)

    def stream_stats(self):
        """index=False: {"streamed", "random", "max_held"} of the stream reader
        of the last pipeline built on this source, while that pipeline exists."""
        ref = getattr(self, "_last_stream", None)
        reader = ref() if ref is not None else None
        return reader.stats() if reader is not None else {}

    def path(self, index):
        """The shard that holds sample `index`."""
        if self._stream:
            return self.paths[int(np.searchsorted(self._base, index, side="right")) - 1]
        return self.paths[self._shard_of[index]]

    def _task_items(self):
        if not self._stream:
            return _with_read_ahead(self, self._items)
        # the stream reader follows one pipeline's order: a fresh one per pipeline
        import weakref
        from fastq import _image
        reader = _image.TFRecordStreamReader(*self._stream_args)
        self._last_stream = weakref.ref(reader)
        return _with_read_ahead(self, reader)

    def location(self, index):
        """(shard path, record number inside the shard) of sample `index`."""
        if self._stream:
            s = int(np.searchsorted(self._base, index, side="right")) - 1
            return self.paths[s], int(index - self._base[s])
        return self.path(index), int(self.record_numbers[index])


class _StreamBackend(_ImageBackend):
    """TFRecord(index=False): the epoch order is the stream order (shard
    permutation + shuffle buffer), restricted to this source's samples."""

    def __init__(self, source, config, **options):
        super().__init__(source, config, **options)
        self._stream_reader = source._last_stream()  # made by source._task_items() for this task

    def start(self, ring, run_id, epoch, position=0):
        # a ReadAhead does not pass the order on to the reader it wraps: tell it here
        # (before the task's set_epoch, which starts the read-ahead threads on it)
        self._stream_reader.set_order(self.order(epoch)[position * self.batch_size:])
        return super().start(ring, run_id, epoch, position)

    def order(self, epoch):
        src = self.source
        full = src.stream_order(self.seed, epoch, self.shuffle)
        if len(src.indices) == src.num_samples:
            return full
        mask = np.zeros(src.num_samples, bool)
        mask[src.indices] = True
        return full[mask[full]]


# --------------------------------------------------------------- WebDataset

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
