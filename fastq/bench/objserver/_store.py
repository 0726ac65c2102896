"""What the test server serves: a folder or a dict of objects (:class:`_Store`), ETags, dates,
ranges."""
import email.utils
import hashlib
import os
import stat
import tempfile
import threading
import time

class _Obj:
    """An object's metadata (and its bytes when held in memory)."""
    __slots__ = ("size", "etag", "mtime", "data", "path")

    def __init__(self, size, etag, mtime, data=None, path=None):
        self.size, self.etag, self.mtime, self.data, self.path = size, etag, mtime, data, path


def _md5_etag(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


def _http_date(t):
    return email.utils.formatdate(t, usegmt=True)


def _iso_date(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def _etag_matches(header, etag):
    """An If-Match / If-None-Match header against an ETag ('*' matches any existing object)."""
    for tag in header.split(","):
        tag = tag.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == "*" or tag == etag or tag.strip('"') == etag.strip('"'):
            return True
    return False


def _parse_range(header, size):
    """'bytes=a-b' -> (start, end inclusive), None when absent or not a single byte range
    (then the whole object is sent, as S3 does), 'unsatisfiable' for a start past the end."""
    if not header:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    a, sep, b = spec.strip().partition("-")
    if not sep:
        return None
    try:
        if a == "":  # suffix: the last b bytes
            n = int(b)
            if n <= 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1) if size else "unsatisfiable"
        start = int(a)
        end = int(b) if b else size - 1
    except ValueError:
        return None
    if start < 0:
        return None
    if start >= size:
        return "unsatisfiable"
    if end < start:
        return None
    return start, min(end, size - 1)


class _Store:
    """Buckets and objects: a folder (root/<bucket>/<key>) or a dict {"bucket/key": bytes}.
    mode "http": one unnamed bucket, "" (root/<path> or {"path": bytes})."""

    def __init__(self, source, mode):
        self.mode = mode
        self.lock = threading.Lock()
        self.etags = {}  # folder: path -> (size, mtime_ns, etag)
        if isinstance(source, dict):
            self.root = None
            self.mem = {}
            self.buckets = set()
            now = time.time()
            for name, data in source.items():
                b, k = self._split(name)
                if not k:
                    raise ValueError(f"ObjectServer: {name!r} is not 'bucket/key'")
                data = bytes(data)
                self.mem.setdefault(b, {})[k] = _Obj(len(data), _md5_etag(data), now, data=data)
                self.buckets.add(b)
        else:
            self.root = os.path.abspath(os.fspath(source))
            if not os.path.isdir(self.root):
                raise FileNotFoundError(f"ObjectServer: root {self.root} is not a folder")
            self.mem = None

    def _split(self, name):
        if self.mode == "http":
            return "", name.lstrip("/")
        b, _, k = name.lstrip("/").partition("/")
        return b, k

    # -- buckets --
    def bucket_names(self):
        if self.mem is not None:
            with self.lock:
                return sorted(self.buckets)
        return sorted(e.name for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith("."))

    def has_bucket(self, b):
        if self.mode == "http":
            return True
        if self.mem is not None:
            with self.lock:
                return b in self.buckets
        return bool(b) and "/" not in b and b not in (".", "..") and os.path.isdir(os.path.join(self.root, b))

    def create_bucket(self, b):
        if self.mem is not None:
            with self.lock:
                self.buckets.add(b)
                self.mem.setdefault(b, {})
        else:
            os.makedirs(os.path.join(self.root, b), exist_ok=True)

    # -- objects --
    def _path(self, b, k):
        parts = k.split("/")
        if any(p in ("", ".", "..") for p in parts) or "\0" in k:
            return None
        base = os.path.join(self.root, b) if b else self.root
        return os.path.join(base, *parts)

    def get(self, b, k):
        """_Obj or None."""
        if self.mem is not None:
            with self.lock:
                return self.mem.get(b, {}).get(k)
        p = self._path(b, k)
        if p is None:
            return None
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return _Obj(st.st_size, self._file_etag(p, st), st.st_mtime, path=p)

    def _file_etag(self, p, st):
        key = (st.st_size, st.st_mtime_ns)
        hit = self.etags.get(p)
        if hit is not None and hit[0] == key:
            return hit[1]
        h = hashlib.md5()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        etag = '"' + h.hexdigest() + '"'
        self.etags[p] = (key, etag)  # a dict store is atomic under the GIL
        return etag

    def put(self, b, k, data):
        etag = _md5_etag(data)
        if self.mem is not None:
            with self.lock:
                self.mem.setdefault(b, {})[k] = _Obj(len(data), etag, time.time(), data=data)
            return etag
        p = self._path(b, k)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p), prefix=".objserver-put-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return etag

    def delete(self, b, k):
        if self.mem is not None:
            with self.lock:
                self.mem.get(b, {}).pop(k, None)
            return
        p = self._path(b, k)
        if p is not None and os.path.isfile(p):
            os.unlink(p)

    def keys(self, b, prefix=""):
        """Sorted [(key, _Obj)] of a bucket whose keys start with prefix."""
        if self.mem is not None:
            with self.lock:
                items = list(self.mem.get(b, {}).items())
            return sorted((k, o) for k, o in items if k.startswith(prefix))
        out = []
        base = os.path.join(self.root, b)
        # walk only the folders that can hold keys with this prefix
        pdir = prefix.rpartition("/")[0]
        start = os.path.join(base, *pdir.split("/")) if pdir else base
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = [d for d in dirnames if not d.startswith(".objserver-")]
            rel = os.path.relpath(dirpath, base).replace(os.sep, "/")
            rel = "" if rel == "." else rel + "/"
            for fn in filenames:
                if fn.startswith(".objserver-put-"):
                    continue
                k = rel + fn
                if k.startswith(prefix):
                    p = os.path.join(dirpath, fn)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    out.append((k, _Obj(st.st_size, self._file_etag(p, st), st.st_mtime, path=p)))
        out.sort(key=lambda kv: kv[0])
        return out


class _Headers(dict):
    """Request headers, looked up case-insensitively (stored lower-cased)."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name):
        return dict.get(self, name.lower())


def _query_int(q, name, most, least):
    """min(most, the integer query parameter `name`) (most if absent), or None if it is
    not an integer >= least."""
    try:
        v = int(q.get(name, str(most)))
    except ValueError:
        return None
    return min(most, v) if v >= least else None
