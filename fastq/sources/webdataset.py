"""fastq.sources.WebDataset: tar shards, the members of one sample grouped by key
(``0001.jpg`` + ``0001.cls``), the tar headers indexed natively when the source is
built.  See docs/sources.md."""
import os

import numpy as np

from fastq.sources.base import _check_shuffle_buffer, _expand_paths, default_order, restrict, stream_order
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

    ``shuffle_buffer``: None (default) shuffles samples over all shards (with
    ``Pipeline(shuffle=True)``); an int N selects the streaming order instead:
    shards in an order drawn from (seed, epoch) and a shuffle buffer of N samples,
    the rule of ``TFRecord(index=False)`` (:meth:`stream_order`).  For shards in
    object storage it reads each shard front to back in large ranged chunks, where
    the global shuffle needs one request per sample.

    Object storage: ``paths`` may be URLs (``s3://bucket/train-*.tar``: the pattern
    is expanded by listing).  Each shard's index is built once by one download and
    kept under ``index_dir`` (keyed by URL, size and ETag), unless ``index`` names
    a sidecar index per shard: ``index="sidecar"`` reads ``<shard URL>.idx`` (what
    ``fastq prepare --format tar`` uploads beside each shard, see
    :func:`tar_index_text`), or give a list of index URLs or paths, one per shard
    (fastq's own, or DALI's ``wds2idx`` v1.2 indexes, which have no shard size: a
    stale one is caught only when a member falls outside its shard).
    Shards indexed by downloading them are read by the first epoch from that download
    (``cache_dir``, or a spool: ``RemoteOptions.first_epoch_spool``).  ``write_index=True``
    also uploads the index of each shard this construction indexed as ``<shard URL>.idx``
    (what :func:`tar_index_text` writes), so that later runs anywhere can pass
    ``index="sidecar"``; it needs write access to the store (a failed upload is a warning).
    ``storage_options``, ``cache_dir``, ``cache_limit``, ``remote``: see
    :class:`Files` and docs/cloud.md.
    """

    kind = "reader"

    def __init__(self, paths, image_ext=("jpg", "jpeg", "png", "webp"), label_ext="cls", io_threads=0,
                 read_ahead=64, shuffle_buffer=None, storage_options=None, cache_dir=None, cache_limit=None,
                 remote=None, index_dir=None, index=None, write_index=False):
        from fastq._native import _image
        from fastq.sources import remote as remote_mod
        _check_io(io_threads, read_ahead, "WebDataset")
        self.io_threads, self.read_ahead = io_threads, read_ahead
        self.shuffle_buffer = _check_shuffle_buffer(shuffle_buffer, "WebDataset")
        rset = None
        if remote_mod.any_url(paths):
            if io_threads:
                raise ValueError("WebDataset: io_threads applies to local shards; remote reads are tuned by "
                                 "remote=fastq.sources.RemoteOptions(...) (docs/cloud.md)")
            objs, opts, counters = remote_mod.shard_objects(paths, "WebDataset", storage_options, remote)
            cache = remote_mod.first_epoch_cache(objs, "tar", index, index_dir,
                                                 remote_mod.cache_for(cache_dir, cache_limit), opts, counters)
            self.paths = [o.url for o in objs]
            if index is not None:
                if write_index:
                    raise ValueError("WebDataset: write_index applies when the shards are indexed by downloading "
                                     "them (index=None)")
                scans = _sidecar_indexes(objs, index, storage_options, opts, counters)
            else:
                fresh = [not remote_mod.indexed(o, "tar", index_dir) for o in objs]
                scans = [_tar_index_tuple(d) for d in remote_mod.shard_indexes(objs, "tar", _tar_index_dict,
                                                                                index_dir, cache, opts, counters)]
                if write_index:
                    _write_sidecars(objs, scans, fresh, storage_options, opts, counters)
            rset = (objs, opts, counters, cache)
        else:
            remote_mod.check_local_only("WebDataset", storage_options, cache_dir, remote, cache_limit)
            for name, v in (("index=", index is not None), ("write_index", write_index)):
                if v:
                    raise ValueError(f"WebDataset: {name} applies to shards at URLs (local shards are indexed by "
                                     f"reading their headers, which is fast)")
            self.paths = _expand_paths([remote_mod.local_path(p) for p in paths]
                                       if not isinstance(paths, (str, bytes, os.PathLike)) else
                                       remote_mod.local_path(paths), "WebDataset")
            scans = None
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
            names, offs, sizes, unsafe, tail = scans[k] if scans is not None else _image.tar_scan(path)
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
        img_off, img_size = np.asarray(cols["img_off"], np.uint64), np.asarray(cols["img_size"], np.uint64)
        lab_off, lab_size = np.asarray(cols["lab_off"], np.uint64), np.asarray(cols["lab_size"], np.uint64)
        self._reader_args = ([os.fsencode(p) for p in self.paths], self._shard_of, img_off, img_size, lab_off,
                             lab_size, self.sample_numbers, keys, errs, self.label_ext is not None)
        self.sample_counts = np.bincount(self._shard_of, minlength=len(self.paths)).astype(np.int64)
        super().__init__(_image.TarReader(*self._reader_args), None)
        if rset is not None:
            objs, opts, counters, cache = rset
            with_label = self.label_ext is not None
            has_lab = lab_off != np.uint64(_image.TAR_NONE)
            lo = np.where(has_lab, np.minimum(img_off, lab_off), img_off)
            hi = np.where(has_lab, np.maximum(img_off + img_size, lab_off + lab_size), img_off + img_size)
            # samples the reader fails before reading (an error found by the scan, no label
            # member): never fetched
            skip = np.asarray([e is not None for e in errs], bool) | (with_label & ~has_lab)
            remote_mod.attach(self, remote_mod.make_remote_set(objs, opts, counters, cache, self._shard_of, lo, hi,
                                                               skip))

    def path(self, index):
        """The shard that holds sample `index`."""
        return self.paths[self._shard_of[index]]

    def _task_items(self):
        if self._remote is not None:
            from fastq._native import _image
            from fastq.sources import remote as remote_mod
            return remote_mod.task_reader(self, lambda spans: _image.TarReader(*self._reader_args, spans=spans))
        return _with_read_ahead(self, self._items)

    def stream_order(self, seed, epoch, shuffle=True):
        """With shuffle_buffer: the epoch order over all samples (before shard()): the
        shards permuted and a shuffle buffer, both drawn from (seed, epoch), the rule of
        TFRecord.stream_order; without shuffle, the samples in shard order."""
        if self.shuffle_buffer is None:
            raise ValueError("WebDataset.stream_order: only with shuffle_buffer=N")
        return stream_order(self.sample_counts, self.shuffle_buffer, seed, epoch, shuffle)

    def _epoch_order(self, seed, epoch, shuffle):
        """The backend's epoch order over this source's samples (after shard())."""
        if self.shuffle_buffer is None:
            return default_order(self.indices, seed, epoch, shuffle)
        return restrict(self.stream_order(seed, epoch, shuffle), self.indices, self.num_samples)

    def location(self, index):
        """(shard path, sample number inside the shard, key) of sample `index`."""
        return self.path(index), int(self.sample_numbers[index]), self.keys[index]


def _tar_index_dict(local):
    """tar_scan of a local copy of a shard, as arrays (the remote index cache's format)."""
    from fastq._native import _image
    names, offs, sizes, unsafe, tail = _image.tar_scan(local)
    return {"names": np.frombuffer(b"\0".join(os.fsencode(n) for n in names) + b"\0", np.uint8),
            "count": np.array([len(names)], np.int64), "offs": offs, "sizes": sizes, "unsafe": unsafe,
            "tail_code": np.array([0 if tail is None else tail[0]], np.int64),
            "tail_msg": np.frombuffer((tail[1] if tail is not None else "").encode(), np.uint8)}


def _tar_index_tuple(d):
    n = int(d["count"][0])
    names = [os.fsdecode(x) for x in bytes(d["names"]).split(b"\0")[:n]]
    code = int(d["tail_code"][0])
    tail = None if code == 0 else (code, bytes(d["tail_msg"]).decode("utf-8", "replace"))
    return names, d["offs"], d["sizes"], d["unsafe"], tail


TAR_INDEX_FORMAT = "fastq-tar-index"


def tar_index_text(path):
    """The sidecar index of the local tar shard at `path`, as JSON text: every
    regular member's name, data offset, size and unsafe flag as the native header
    walk finds them, the framing error that ended the walk (if any) and the shard's
    size.  Stored as ``<shard>.idx`` beside a shard in object storage, it lets
    ``WebDataset(urls, index="sidecar")`` skip the download that indexing needs
    otherwise.  (``index=`` also reads DALI's ``wds2idx`` indexes, version v1.2.)"""
    from fastq._native import _image
    return _tar_index_text_of(_image.tar_scan(path), os.path.getsize(path))


def _tar_index_text_of(scan, shard_bytes):
    """tar_index_text of a shard of shard_bytes bytes whose tar_scan gave scan."""
    import json
    names, offs, sizes, unsafe, tail = scan
    doc = {"format": TAR_INDEX_FORMAT, "version": 1, "shard_bytes": int(shard_bytes),
           "members": [[n, int(o), int(z), bool(u)] for n, o, z, u in
                       zip(names, offs.tolist(), sizes.tolist(), unsafe.tolist())],
           "tail": None if tail is None else [int(tail[0]), str(tail[1])]}
    return json.dumps(doc, separators=(",", ":")) + "\n"


def _write_sidecars(objs, scans, fresh, storage_options, opts, counters):
    """Upload <shard URL>.idx (tar_index_text) for the shards indexed by this construction
    (fresh[k]); a failed upload is a warning naming the URL (the index stays in the local
    index cache)."""
    import warnings
    from fastq.sources.storage import put_bytes
    for obj, scan, new in zip(objs, scans, fresh):
        if not new:
            continue
        url = obj.url + ".idx"
        try:
            put_bytes(url, _tar_index_text_of(scan, obj.size).encode(), storage_options, opts, counters)
        except Exception as e:  # noqa: BLE001 - a read-only store: the run goes on without it
            warnings.warn(f"WebDataset: write_index: could not upload {url}: {e}", RuntimeWarning, stacklevel=3)


def parse_tar_index(text, src, shard, shard_bytes):
    """(names, offsets, sizes, unsafe, tail) from a tar_index_text document, checked
    against the shard it is for (`shard_bytes`: its size, None if unknown); a
    ValueError naming the index `src`, the shard and what is wrong."""
    import json

    def bad(why):
        return ValueError(f"WebDataset: tar index {src!r} for shard {shard!r}: {why}")
    import re
    if re.match(r"v\d+\.\d+\s", text.lstrip()):  # DALI's wds2idx: "v1.2 <samples>"
        return _parse_dali_index(text, bad, shard_bytes)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise bad(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != TAR_INDEX_FORMAT:
        raise bad(f"not a {TAR_INDEX_FORMAT} document")
    if doc.get("version") != 1:
        raise bad(f"version {doc.get('version')!r}, this fastq reads version 1")
    size = doc.get("shard_bytes")
    if not isinstance(size, int) or size < 0:
        raise bad("no valid shard_bytes")
    if shard_bytes is not None and size != shard_bytes:
        raise bad(f"written for a shard of {size} bytes, the shard has {shard_bytes}: the index is stale "
                  f"(rewrite it, or leave index= out to index the shard by downloading it)")
    members = doc.get("members")
    if not isinstance(members, list):
        raise bad("no member list")
    names, offs, sizes, unsafe = [], [], [], []
    prev_end = 0
    for i, m in enumerate(members):
        if not (isinstance(m, list) and len(m) == 4 and isinstance(m[0], str) and
                all(isinstance(v, int) and not isinstance(v, bool) for v in m[1:3]) and isinstance(m[3], bool)):
            raise bad(f"member {i}: expected [name, offset, size, unsafe]")
        name, o, z, u = m
        if o < prev_end + 512 or z < 0 or o + z > size:
            raise bad(f"member {i} ({name!r}): offset {o}, size {z} is out of order or outside the shard's "
                      f"{size} bytes")
        prev_end = o + z
        names.append(name)
        offs.append(o)
        sizes.append(z)
        unsafe.append(u)
    tail = doc.get("tail")
    if tail is not None:
        if not (isinstance(tail, list) and len(tail) == 2 and isinstance(tail[0], int) and tail[0] != 0
                and isinstance(tail[1], str)):
            raise bad("tail must be null or [code, message]")
        tail = (tail[0], tail[1])
    return (names, np.asarray(offs, np.uint64), np.asarray(sizes, np.uint64), np.asarray(unsafe, np.bool_), tail)


def _unsafe_name(name):
    """The native header walk's rule (fq_tar.c): an empty or absolute name, or a '..' component."""
    return not name or name.startswith("/") or ".." in name.split("/")


def _parse_dali_index(text, bad, shard_bytes):
    """The member list of a DALI ``wds2idx`` index, version v1.2: a first line
    ``v1.2 <samples>``, then one line per sample of ``<ext> <offset> <size> <name>``
    per member (offset: of the member's data).  Version v1.1 has no member names, which
    fastq's samples are made of (keys, and the grouping rule), so it is refused.  The
    index records no shard size: members are checked to lie inside the shard, in order
    and on 512-byte blocks, and the ext to match the name, which catches a misparse (a
    name with a space in it, which this format cannot hold).  Names over 100 bytes are
    refused: for a member stored under a GNU long-name header, wds2idx (through ``tar
    --block-num``) writes the offset of that header, 1024 bytes early, and nothing in
    the index tells a GNU shard from a pax one, where the offset is right."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if not head or head[0] != "v1.2":
        if head and head[0] == "v1.1":
            raise bad("a DALI wds2idx index of version v1.1, which has no member names; rewrite it with a newer "
                      "wds2idx (v1.2) or fastq.sources.webdataset.tar_index_text")
        raise bad(f"DALI wds2idx index version {head[0] if head else ''!r}: fastq reads v1.2")
    if len(head) != 2 or not head[1].isdigit():
        raise bad("line 1: expected 'v1.2 <number of samples>'")
    n = int(head[1])
    body = [ln for ln in lines[1:] if ln.strip()]
    if len(body) != n:
        raise bad(f"line 1 says {n} samples, the index has {len(body)} sample lines")
    names, offs, sizes = [], [], []
    prev_end = 0
    for k, ln in enumerate(body):
        where = f"line {k + 2}"
        tok = ln.split()
        if len(tok) % 4:
            raise bad(f"{where}: expected '<ext> <offset> <size> <name>' per member, got {len(tok)} fields "
                      f"(a member name with a space in it cannot be written in this format)")
        for j in range(0, len(tok), 4):
            ext, o, z, name = tok[j:j + 4]
            if not (o.isdigit() and z.isdigit()):
                raise bad(f"{where}: member {name!r}: offset {o!r} and size {z!r} must be integers")
            o, z = int(o), int(z)
            base = name.rpartition("/")[2]
            if "." in base and base.partition(".")[2] != ext:
                raise bad(f"{where}: member {name!r} listed with extension {ext!r}")
            if o % 512 or o < prev_end + 512 or (shard_bytes is not None and o + z > shard_bytes):
                raise bad(f"{where}: member {name!r}: offset {o}, size {z} is out of order, off the 512-byte "
                          f"blocks or outside the shard's {shard_bytes} bytes")
            if len(name.encode()) > 100:
                raise bad(f"{where}: member {name!r} has a name longer than a tar header's 100 bytes; wds2idx "
                          f"(through GNU tar) gives such members the offset of their long-name header when the "
                          f"shard is in GNU format, which this index cannot show: use fastq's own index "
                          f"(fastq.sources.webdataset.tar_index_text) or none")
            prev_end = o + z
            names.append(name)
            offs.append(o)
            sizes.append(z)
    unsafe = [_unsafe_name(m) for m in names]
    return (names, np.asarray(offs, np.uint64), np.asarray(sizes, np.uint64), np.asarray(unsafe, np.bool_), None)


def _sidecar_indexes(objs, index, storage_options, opts, counters):
    """The member lists of remote shards from their sidecar indexes (fetched several
    at once)."""
    from concurrent.futures import ThreadPoolExecutor
    from fastq.sources import remote as remote_mod
    from fastq.sources.storage import Counters, is_url
    if isinstance(index, str) and index == "sidecar":
        index = [o.url + ".idx" for o in objs]
    elif isinstance(index, (str, bytes, os.PathLike)) or len(index) != len(objs):
        raise ValueError(f'WebDataset: index must be "sidecar" or one index URL or path per shard ({len(objs)})')
    index = [os.fsdecode(e) for e in index]
    mine = [Counters() for _ in objs]  # one per shard: no two threads update one counter

    def one(k):
        src = index[k]
        if is_url(src):
            text = remote_mod.fetch_text(src, storage_options, opts, mine[k])
        else:
            with open(src, "r", encoding="utf-8") as f:
                text = f.read()
        return parse_tar_index(text, src, objs[k].url, objs[k].size)
    with ThreadPoolExecutor(max(1, min(16, len(objs))), thread_name_prefix="fastq-index") as ex:
        out = list(ex.map(one, range(len(objs))))
    for c in mine:
        counters.add(c)
    return out
