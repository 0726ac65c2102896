"""How the native sources read object storage: the glue between a source
(Files, Folder, TFRecord, WebDataset) and storage.py (URLs, stores, GETs) /
fetch.py (the fetcher, the local cache).

A remote source builds a :class:`~fastq.sources.fetch.RemoteSet` (its objects and,
per sample, the byte range it needs) and keeps it as ``source._remote``; each
pipeline over it gets a fresh native reader bound to a fresh spans table
(:func:`task_reader`) and a ``_RemoteBackend`` (fastq/sources/images.py) that runs
a fetcher per epoch.

Indexes of remote shards (TFRecord record offsets, tar member offsets) are built
once per shard version: the shard is downloaded once (into the cache when
``cache_dir`` is set, so that the first epoch reads it from there, else into a
temporary file) and scanned by the same native code as a local shard; the index
is kept under ``index_dir`` (default ``~/.cache/fastq/remote-index``) keyed by the
URL, size and ETag, so a changed object is indexed again.  Without ``cache_dir``
the downloads are kept in a temporary spool for the first epoch
(:class:`~fastq.sources.cache.Spool`, ``RemoteOptions.first_epoch_spool``), so that
an epoch that follows indexing fetches no shard twice.  See docs/cloud.md.
"""
import hashlib
import os
import tempfile
from typing import Any, Optional

import numpy as np

from fastq.sources.cache import LocalCache
from fastq.sources.fetch import WHOLE, RemoteSet, download
from fastq.sources.storage import (Counters, ObjectInfo, RemoteOptions, expand, head_all, is_url, list_tree,
                                   local_path)

__all__ = ["is_url", "local_path", "RemoteOptions", "files_remote", "attach", "task_reader"]

_INDEX_VERSION = 1


def _options(remote):
    if remote is None:
        return RemoteOptions()
    if isinstance(remote, dict):
        return RemoteOptions(**remote)
    if not isinstance(remote, RemoteOptions):
        raise TypeError(f"remote= must be a fastq.sources.RemoteOptions or a dict, got {type(remote).__name__}")
    return remote


def _cache(cache_dir, cache_limit):
    if cache_dir is None:
        if cache_limit is not None:
            raise ValueError("cache_limit applies with cache_dir only")
        return None
    return LocalCache(cache_dir, cache_limit)


def files_remote(urls, storage_options, cache_dir, cache_limit, remote, objects=None):
    """The RemoteSet of Files(urls): sample i is object i, whole."""
    opts = _options(remote)
    counters = Counters()
    if objects is None:
        objects = expand(list(urls), "Files", storage_options, opts, counters) if urls else []
        if len(objects) != len(urls):
            raise ValueError("Files: glob patterns are not expanded in a list of files; use Folder or list the keys")
    n = len(objects)
    if n == 0:
        raise ValueError("Files: no paths given")
    return RemoteSet(objects, opts, counters, _cache(cache_dir, cache_limit), np.arange(n, dtype=np.int32),
                     np.zeros(n, np.uint64), np.full(n, WHOLE, np.uint64))


def folder_remote(root, exts, storage_options, remote):
    """{class prefix: [ObjectInfo...]} of a class-per-prefix tree at the URL root
    (objects directly under root belong to no class), each class in the order the
    local Folder walks a directory (folder, then name), and the Counters of the
    listing."""
    opts = _options(remote)
    counters = Counters()
    by_class = {}
    for rel, obj in list_tree(root, storage_options, opts, counters):
        parts = rel.split("/")
        if len(parts) < 2 or not parts[0] or not rel.lower().endswith(exts):
            continue
        by_class.setdefault(parts[0], []).append((os.path.dirname(rel), os.path.basename(rel), obj))
    return {c: [t[2] for t in sorted(v, key=lambda t: (t[0], t[1]))] for c, v in by_class.items()}, counters


def attach(source, rs):
    """Mark source as remote: its pipelines read through rs."""
    source._remote = rs
    source.kind = "reader"
    source.io_threads = 0


def task_reader(source, make):
    """A fresh native reader for one pipeline over a remote source, made by
    make(spans) around a fresh spans table; the table is left for the backend."""
    spans = source._remote.spans()
    reader = make(spans)
    source._taken_spans = spans
    return reader


def shard_objects(paths, what, storage_options, remote):
    """(objects with size and ETag, options, counters) of remote shards."""
    opts = _options(remote)
    counters = Counters()
    objs = expand(paths, what, storage_options, opts, counters)
    head_all(objs, opts, counters)
    return objs, opts, counters


def _index_file(index_dir, obj: ObjectInfo, kind):
    d = index_dir or os.path.join(os.path.expanduser("~"), ".cache", "fastq", "remote-index")
    h = hashlib.sha1(f"{_INDEX_VERSION}\0{kind}\0{obj.url}\0{obj.size}\0{obj.etag}".encode()).hexdigest()[:32]
    return os.path.join(d, f"{os.path.basename(obj.key) or 'object'}.{h}.{kind}.npz")


def shard_index(obj: ObjectInfo, kind, scan, index_dir, cache: Optional[LocalCache], opts, counters):
    """The index of one remote shard (a dict of arrays): from the index cache, else
    scanned (scan(local_path) -> dict) after one download, and cached.  With a local
    cache the download goes into it (the first epoch then reads it from disk)."""
    path = _index_file(index_dir, obj, kind)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):
        pass
    if cache is not None:
        mv = cache.open(obj)
        if mv is None:
            from fastq.sources.fetch import fill_object
            from fastq.sources.storage import run_sync
            import random
            parts = run_sync(fill_object(obj, opts, counters, random.Random(opts.seed)), opts.event_loop)
            written = cache.store(obj, parts)
            del parts
            if cache.fills:  # a Spool's writes are not the user's cache's
                counters.cache_misses += 1
                counters.cache_bytes_written += written
        elif cache.fills:
            counters.cache_hits += 1
        del mv
        local = cache.path(obj)
        if os.path.exists(local):
            idx = scan(local)
            _save(path, idx)
            return idx
    with tempfile.TemporaryDirectory(prefix="fastq-index-") as tmp:
        local = os.path.join(tmp, "shard")
        download(obj, opts, counters, local)
        idx = scan(local)
    _save(path, idx)
    return idx


def indexed(obj, kind, index_dir):
    """Whether obj's index of this kind is in the index cache already."""
    return os.path.exists(_index_file(index_dir, obj, kind))


def first_epoch_cache(objs, kind, index, index_dir, cache, opts, counters):
    """The cache the source's reads go through: the user's (cache_dir), else, when its
    shards are indexed by downloading them (no index=) and some are not in the index
    cache yet, a Spool that keeps those downloads for the first epoch (None: neither)."""
    if cache is not None or index is not None:
        return cache
    from fastq.sources.cache import Spool
    return Spool.plan(objs, opts, counters, lambda o: indexed(o, kind, index_dir))


def shard_indexes(objs, kind, scan, index_dir, cache: Optional[LocalCache], opts, counters):
    """shard_index of every shard, in order; the shards not indexed yet are fetched
    several at once (as many as fit in half the byte cap, at most 8)."""
    if len(objs) < 2:
        return [shard_index(o, kind, scan, index_dir, cache, opts, counters) for o in objs]
    from concurrent.futures import ThreadPoolExecutor
    biggest = max((o.size or 0) for o in objs) or 1
    n = max(1, min(8, len(objs), (opts.max_bytes // 2) // biggest))
    mine = [Counters() for _ in objs]  # one per shard: no two threads update one counter
    with ThreadPoolExecutor(n, thread_name_prefix="fastq-index") as ex:
        out = list(ex.map(lambda k: shard_index(objs[k], kind, scan, index_dir, cache, opts, mine[k]),
                          range(len(objs))))
    for c in mine:
        counters.add(c)
    return out


def fetch_text(url, storage_options, opts, counters):
    """The whole (small) object at url as text: a sidecar index."""
    import random
    from fastq.sources.storage import fetch, run_sync
    (obj,) = expand([url], "index", storage_options, opts, counters)
    return bytes(run_sync(fetch(obj, None, None, opts, counters, random.Random(opts.seed)),
                           opts.event_loop)).decode("utf-8")


def _save(path, idx):
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, **idx)
        os.replace(tmp, path)
    except OSError:  # best effort: an unwritable index cache costs a rescan next time
        try:
            os.unlink(tmp)
        except OSError:
            pass


def cache_for(cache_dir, cache_limit):
    return _cache(cache_dir, cache_limit)


def options_for(remote):
    return _options(remote)


def check_local_only(what, storage_options, cache_dir, remote, cache_limit=None):
    if storage_options is not None or cache_dir is not None or remote is not None or cache_limit is not None:
        raise ValueError(f"{what}: storage_options, cache_dir, cache_limit and remote apply to URLs only")


def any_url(paths) -> bool:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return is_url(paths)
    return any(is_url(p) for p in paths)


def make_remote_set(objects, opts, counters, cache, obj, off, end, skip) -> Any:
    return RemoteSet(objects, opts, counters, cache, obj, off, end, skip)
