"""fastq.sources.TFRecord: TFRecord shards of ``tf.train.Example`` records (TF's
ImageNet layout), read natively in one of two modes: indexed (a record index per
shard, built by a framing scan and cached, or given; random access) or streaming
(``index=False``: record counts only, sequential cursors and a shuffle buffer).
See docs/sources.md."""
import os

import numpy as np

from fastq.sources.base import _check_shuffle_buffer, _expand_paths, default_order, restrict, stream_order
from fastq.sources.images import ImageSource, _ImageBackend
from fastq.sources.readahead import _check_io, _with_read_ahead
from fastq.sources.storage import is_url

__all__ = ["TFRecord"]


_INDEX_MAGIC = b"FQTFRIX1"


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


def _given_index(entry, path, size, k, fetch_text=None):
    """index= entry for shard k: a path (or, for remote shards, a URL: a sidecar
    index stored next to the shard) to a DALI-style text index ("offset size" per
    line, size = the framed record size: what DALI's tfrecord2idx writes) or a
    sequence of record offsets."""
    if isinstance(entry, (str, bytes, os.PathLike)):
        src = os.fsdecode(entry)
        if fetch_text is not None and is_url(src):
            lines = fetch_text(src).splitlines()
        else:
            with open(entry, "r") as f:
                lines = f.read().splitlines()
        rows = []
        for ln, line in enumerate(lines, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
                raise ValueError(f"TFRecord index {src!r} line {ln}: expected 'offset size'")
            rows.append((int(parts[0]), int(parts[1])))
        offsets = np.array([r[0] for r in rows], np.uint64)
        framed = np.array([r[1] for r in rows], np.uint64)
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
    ``cache_index=False`` disables it).  For shards at URLs an ``index`` entry may
    be a URL too (a sidecar index stored beside the shard, e.g. written by DALI's
    ``tfrecord2idx``), and ``index="sidecar"`` means ``<shard URL>.idx`` for every
    shard (what ``fastq prepare`` uploads with shards): the shards are then not
    downloaded to be indexed (docs/cloud.md).

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

    ``targets``: a :class:`fastq.targets.OdapiTargets`: each record's OD-API boxes and
    classes are read with it and moved with the image natively (outputs ``boxes``,
    ``classes``, ``num_boxes``, ``image_info`` after the others; docs/targets.md).
    """

    kind = "reader"

    def __init__(self, paths, image_key="image/encoded", label_key="image/class/label", index=None,
                 compression=None, features=None, index_dir=None, cache_index=True, io_threads=0, read_ahead=64,
                 shuffle_buffer=None, targets=None, storage_options=None, cache_dir=None, cache_limit=None,
                 remote=None):
        from fastq.sources import remote as remote_mod
        _check_io(io_threads, read_ahead, "TFRecord")
        is_remote = remote_mod.any_url(paths)
        self._remote_stream = False
        from fastq.targets import OdapiTargets
        if targets is not None and not isinstance(targets, OdapiTargets):
            raise TypeError(f"TFRecord: targets= must be a fastq.targets.OdapiTargets, got {type(targets).__name__}")
        self._stream = index is False
        if shuffle_buffer is not None and not self._stream:
            raise ValueError("TFRecord: shuffle_buffer= applies to the streaming mode (index=False) only")
        if self._stream:
            self.shuffle_buffer = _check_shuffle_buffer(shuffle_buffer, "TFRecord", 10000)
            index = None
        self.io_threads, self.read_ahead = io_threads, read_ahead
        if is_remote:
            if io_threads:
                raise ValueError("TFRecord: io_threads applies to local shards; remote reads are tuned by "
                                 "remote=fastq.sources.RemoteOptions(...) (docs/cloud.md)")
            if compression:
                raise ValueError("TFRecord: compressed shards cannot be read from object storage (a compressed "
                                 "stream has no random access); store them uncompressed, or copy them locally")
            objs, opts, counters = remote_mod.shard_objects(paths, "TFRecord", storage_options, remote)
            self.paths = [o.url for o in objs]
            self._storage_options = storage_options
        else:
            remote_mod.check_local_only("TFRecord", storage_options, cache_dir, remote, cache_limit)
            self.paths = _expand_paths([remote_mod.local_path(p) for p in paths]
                                       if not isinstance(paths, (str, bytes, os.PathLike)) else
                                       remote_mod.local_path(paths), "TFRecord")
        comp = (compression or "").upper()
        if comp not in ("", "NONE", "GZIP", "ZLIB"):
            raise ValueError(f"TFRecord: compression must be None, 'GZIP' or 'ZLIB', got {compression!r}")
        self.compression = comp if comp in ("GZIP", "ZLIB") else None
        if isinstance(index, str) and index == "sidecar":
            if not is_remote:
                raise ValueError('TFRecord: index="sidecar" applies to shards at URLs (for local shards give the '
                                 'index paths)')
            index = [p + ".idx" for p in self.paths]
        if index is not None and (isinstance(index, (str, bytes)) or len(index) != len(self.paths)):
            raise ValueError(f"TFRecord: index must have one entry per shard ({len(self.paths)})")
        if index is not None and self.compression:
            raise ValueError("TFRecord: index= applies to uncompressed shards only")
        feats = self._feature_table(image_key, label_key, features)
        if targets is not None:  # the box lists: read with each record, not outputs themselves
            keys = {f[0] for f in feats}
            tf = targets.reader_features()
            if any(f[0] in keys for f in tf) or len(feats) + len(tf) > 16:
                raise ValueError("TFRecord: targets= needs its five keys apart from image_key, label_key and "
                                 "features, and at most 16 keys in all")
            feats += tf
        if is_remote:
            # remote shards are always indexed (one download per shard version, then cached):
            # index=False keeps its streaming order, read through the index in large ranges
            self._remote_stream, self._stream = self._stream, False
            self._init_remote(feats, objs, opts, counters, index, index_dir,
                              remote_mod.first_epoch_cache(objs, "tfr", index, index_dir,
                                                           remote_mod.cache_for(cache_dir, cache_limit), opts,
                                                           counters))
        elif self._stream:
            self._init_stream(feats)
        else:
            self._init_indexed(feats, index, index_dir, cache_index)
        self.targets = targets  # outputs after the reader's (fastq.targets.OdapiTargets)

    def _feature_table(self, image_key, label_key, features):
        """The reader's (key, type, count) table: the image, the label, then
        `features`; sets the extra outputs that follow the image."""
        feats = [(image_key, "bytes", 1)]
        self._extra_outputs = []
        self._extra_names = []  # their names (fastq.tf.dataset(structure="dict"))
        self._label_output = None  # index of the label in _extra_outputs (label_dtype converts it)
        if label_key is not None:
            feats.append((label_key, "int64", 1))
            self._label_output = 0
            self._extra_outputs.append(((), np.dtype(np.int64)))
            self._extra_names.append("labels")
        for key, spec in (features or {}).items():
            dtype, count = spec
            dtype = np.dtype(dtype)
            if dtype not in (np.float32, np.int64) or int(count) < 1:
                raise ValueError(f"TFRecord: feature {key!r}: need (float32 | int64, count >= 1), got {spec!r}")
            feats.append((key, dtype.name, int(count)))
            self._extra_outputs.append(((int(count),), dtype))
            self._extra_names.append(key)
        keys = [f[0] for f in feats]
        if len(set(keys)) != len(keys):
            raise ValueError(f"TFRecord: a feature key is asked for twice: {keys}")
        self.image_key, self.label_key = image_key, label_key
        self.features = dict(features or {})
        return feats

    def _shard_index(self, k, path, index, index_dir, cache_index):
        """(offsets, lengths, in-memory data or None, framing-break message or "")
        of shard k: decompressed and scanned, given by `index`, loaded from the
        cache, or scanned (and cached unless its framing breaks)."""
        from fastq._native import _image
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
        return o, ln, mem, tail

    def _init_remote(self, feats, objs, opts, counters, index, index_dir, cache):
        """Shards in object storage: the record index from index= (a DALI text index
        or offsets per shard), the remote index cache, or one download and a scan."""
        from fastq._native import _image
        from fastq.sources import remote as remote_mod
        offsets, lengths, tails = [], [], []
        scanned = None if index is not None else \
            remote_mod.shard_indexes(objs, "tfr", _tfr_index_dict, index_dir, cache, opts, counters)
        for k, obj in enumerate(objs):
            tail = ""
            if index is not None:
                o, ln = _given_index(index[k], obj.url, obj.size, k,
                                     lambda url: remote_mod.fetch_text(url, self._storage_options, opts, counters))
            else:
                d = scanned[k]
                o, ln = d["offsets"], d["lengths"]
                tail = bytes(d["tail_msg"]).decode("utf-8", "replace")
            if tail:
                o = np.append(o, np.uint64(0))
                ln = np.append(ln, np.uint64(_image.TFR_BROKEN))
            offsets.append(np.asarray(o, np.uint64))
            lengths.append(np.asarray(ln, np.uint64))
            tails.append(tail.encode())
        self._shard_of = np.concatenate([np.full(len(o), k, np.int32) for k, o in enumerate(offsets)])
        self.record_numbers = np.concatenate([np.arange(len(o), dtype=np.int64) for o in offsets])
        if len(self._shard_of) == 0:
            raise ValueError(f"TFRecord: the shards hold no records: {self.paths}")
        self.record_counts = np.asarray([len(o) for o in offsets], np.int64)
        self._base = np.concatenate([[0], np.cumsum(self.record_counts)]).astype(np.int64)
        off, ln = np.concatenate(offsets), np.concatenate(lengths)
        self._reader_args = ([os.fsencode(p) for p in self.paths], [None] * len(self.paths), tails, self._shard_of,
                             off, ln, self.record_numbers, feats, 0)
        ImageSource.__init__(self, _image.TFRecordReader(*self._reader_args), None)
        broken = ln == np.uint64(_image.TFR_BROKEN)
        end = np.where(broken, off, off + ln + np.uint64(16))
        remote_mod.attach(self, remote_mod.make_remote_set(objs, opts, counters, cache, self._shard_of, off, end,
                                                           broken))

    def _init_indexed(self, feats, index, index_dir, cache_index):
        """The default mode: a record index over all shards; random access."""
        from fastq._native import _image
        shard_ids, offsets, lengths, numbers, mems, tails = [], [], [], [], [], []
        for k, path in enumerate(self.paths):
            o, ln, mem, tail = self._shard_index(k, path, index, index_dir, cache_index)
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
        ImageSource.__init__(self, reader, None)

    def _init_stream(self, feats):
        """index=False: per shard only its record count (a framing walk that
        keeps no offsets); the records are read by sequential cursors."""
        from fastq._native import _image
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
        if not (self._stream or self._remote_stream):
            raise ValueError("TFRecord.stream_order: only with index=False")
        return stream_order(self.record_counts, self.shuffle_buffer, seed, epoch, shuffle)

    def _epoch_order(self, seed, epoch, shuffle):
        """The epoch order of a remote source (after shard()): index=False's streaming
        order, else the pipeline's default (shuffle: a permutation of all samples)."""
        if self._remote_stream:
            return restrict(self.stream_order(seed, epoch, shuffle), self.indices, self.num_samples)
        return default_order(self.indices, seed, epoch, shuffle)

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
        if self._remote is not None:
            from fastq._native import _image
            from fastq.sources import remote as remote_mod
            return remote_mod.task_reader(self, lambda spans: _image.TFRecordReader(*self._reader_args, spans=spans))
        if not self._stream:
            return _with_read_ahead(self, self._items)
        # the stream reader follows one pipeline's order: a fresh one per pipeline
        import weakref
        from fastq._native import _image
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
        return restrict(src.stream_order(self.seed, epoch, self.shuffle), src.indices, src.num_samples)


def _tfr_index_dict(local):
    """tfrecord_scan of a local copy of a shard, as arrays (the remote index cache's format)."""
    from fastq._native import _image
    o, ln, t = _image.tfrecord_scan(local)
    return {"offsets": o, "lengths": ln,
            "tail_msg": np.frombuffer((t[1] if t is not None else "").encode(), np.uint8)}
