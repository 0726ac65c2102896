"""The local caches of remote objects: :class:`LocalCache` (``cache_dir=``, whole objects
kept on local disk across epochs and processes) and :class:`Spool` (the shards a source
downloaded to index them, kept for its first epoch only).  The fetcher
(fastq.sources.fetch) reads through them."""
import hashlib
import mmap
import os
import threading

from fastq.sources.storage import Counters, ObjectInfo, RemoteOptions


class LocalCache:
    """Whole objects kept on local disk (``cache_dir=``), at most ``limit`` bytes
    (None: no limit), least recently used evicted first.  Safe with several
    processes on one node: a file appears under its final name only complete
    (written to a private temporary name, then renamed), and a file evicted while
    another process reads it stays readable through that process's mapping.  The
    name holds a hash of the URL, the size and the ETag: a changed object misses."""

    fills = True  # a miss fetches the whole object into the cache (Spool: a miss is read remotely)

    def __init__(self, directory, limit=None):
        self.dir = os.path.abspath(os.fspath(directory))
        os.makedirs(self.dir, exist_ok=True)
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError(f"cache_limit must be a positive int (bytes) or None, got {limit!r}")
        self.limit = limit
        self._total = None
        self._lock = threading.Lock()

    def path(self, obj: ObjectInfo):
        h = hashlib.sha1(f"{obj.url}\0{obj.size}\0{obj.etag}".encode()).hexdigest()[:32]
        return os.path.join(self.dir, f"{h}.obj")

    def open(self, obj: ObjectInfo):
        """A read-only mapping of the cached object (memoryview), or None."""
        if obj.size is None:
            return None
        p = self.path(obj)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size != obj.size:
                return None
            try:
                os.utime(p)  # recently used (eviction order)
            except OSError:
                pass
            if obj.size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(fd, obj.size, prot=mmap.PROT_READ))
        finally:
            os.close(fd)

    def store(self, obj: ObjectInfo, parts):
        """Write the object (its bytes in `parts`, in order) under its final name."""
        p = self.path(obj)
        tmp = f"{p}.{os.getpid()}.{threading.get_ident()}.tmp"
        n = 0
        try:
            with open(tmp, "wb") as f:
                for b in parts:
                    f.write(b)
                    n += len(b)
            os.replace(tmp, p)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return 0
        self._account(n, keep=p)
        return n

    def _account(self, n, keep):
        if self.limit is None:
            return
        with self._lock:
            if self._total is None:
                self._total = self._scan_total()
            else:
                self._total += n
            if self._total <= self.limit:
                return
            files = []
            for e in os.scandir(self.dir):
                if e.name.endswith(".obj"):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    files.append((st.st_mtime_ns, st.st_size, e.path))
            files.sort()
            total = sum(f[1] for f in files)
            for _mt, size, path in files:
                if total <= self.limit * 0.9:
                    break
                if path == keep:
                    continue
                try:
                    os.unlink(path)
                    total -= size
                except OSError:
                    pass
            self._total = total

    def _scan_total(self):
        t = 0
        for e in os.scandir(self.dir):
            if e.name.endswith(".obj"):
                try:
                    t += e.stat().st_size
                except OSError:
                    pass
        return t


class Spool(LocalCache):
    """The shards a source downloaded to index them, kept on local disk for its first
    epoch (no ``cache_dir``, no sidecar index): that epoch reads them from here instead of
    fetching them a second time.  Never filled by a read (a miss is read remotely), deleted
    by release() (when an epoch after the first starts), when the source is collected or
    at exit.  Files mapped by a reader stay readable after release()."""

    fills = False

    def __init__(self, base):
        import tempfile
        import weakref
        os.makedirs(base, exist_ok=True)
        _remove_dead_spools(base)
        super().__init__(tempfile.mkdtemp(prefix=f"{_spool_prefix(os.getpid())}-", dir=base))
        self.released = False
        self._finalizer = weakref.finalize(self, _remove_tree, self.dir)

    def open(self, obj: ObjectInfo):
        if self.released:
            return None
        return super().open(obj)

    def release(self):
        self.released = True
        self._finalizer()

    @staticmethod
    def plan(objs, opts: RemoteOptions, counters: Counters, indexed):
        """A Spool for the shards in objs not yet indexed (indexed(obj) -> bool), or None:
        when opts.first_epoch_spool is off, nothing needs downloading, or the spool's disk
        has less free space than twice those shards' bytes plus 1 GiB."""
        if not opts.first_epoch_spool:
            return None
        need = sum((o.size or 0) for o in objs if not indexed(o))
        if need == 0:
            return None
        base = opts.spool_dir or os.path.join(os.path.expanduser("~"), ".cache", "fastq", "spool")
        try:
            os.makedirs(base, exist_ok=True)
            st = os.statvfs(base)
        except OSError:
            return None
        if st.f_bavail * st.f_frsize < 2 * need + (1 << 30):
            return None
        try:
            return Spool(base)
        except OSError:
            return None


def _spool_prefix(pid):
    import socket
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:64] or "host"
    return f"spool-{host}-{pid}"


def _remove_dead_spools(base):
    """Delete the spools left in base by processes of this host that are gone (killed before
    they could delete their own)."""
    me = _spool_prefix(0)[:-1]  # "spool-<host>-"
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(me):
            continue
        pid = name[len(me):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove_tree(os.path.join(base, name))
        except OSError:  # alive (another user's, say)
            pass


def _remove_tree(d):
    import shutil
    shutil.rmtree(d, ignore_errors=True)
