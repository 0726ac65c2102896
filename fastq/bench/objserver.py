"""A small S3-compatible HTTP server for tests and benchmarks (issue 34), standard library only.

It serves a local folder (``root/<bucket>/<key>``: each top-level folder is a bucket) or
an in-memory dict (``{"bucket/key": bytes}``) at ``http://127.0.0.1:PORT/<bucket>/<key>``
(path-style addressing), well enough for obstore (``S3Store(..., endpoint=...,
virtual_hosted_style_request=False)``, ``client_options={"allow_http": True}``) and boto3:

* ``GET`` object, with ``Range: bytes=a-b`` / ``a-`` / ``-n`` (206 + ``Content-Range``; 416
  InvalidRange when the range starts past the end); ``HEAD`` (Content-Length, ETag = MD5 as S3
  gives it for a single-part object, Last-Modified); ``If-Match`` (412 when it differs) and
  ``If-None-Match`` (304 on GET/HEAD when it matches; 412 on PUT, so ``If-None-Match: *``
  is a create-only write);
* ListObjectsV2 (``GET /<bucket>?list-type=2&prefix=&delimiter=&continuation-token=&max-keys=
  &start-after=&encoding-type=url``), CommonPrefixes, pagination (max-keys default 1000); the
  bucket list (``GET /``), HeadBucket, CreateBucket (``PUT /<bucket>``);
* ``PUT`` object (plain, ``Transfer-Encoding: chunked`` or ``aws-chunked`` bodies), ``DELETE``;
* errors as S3's XML: 404 NoSuchKey / NoSuchBucket, 403 AccessDenied for the keys in
  ``denied`` ("bucket/key"), 503 SlowDown, 500 InternalError.

Any ``Authorization`` header (AWS SigV4 or none) is accepted and never checked.  ``mode="http"``
is a plain HTTP file server instead (``http://127.0.0.1:PORT/<path>``: GET / HEAD / Range only).
``mode="azure"`` speaks the part of Azure Blob Storage's REST API that object_store uses, at
the address of the Azurite emulator (``http://127.0.0.1:PORT/<account>/<container>/<blob>``;
containers are the buckets, any account name): Get Blob / Get Blob Properties (ranges in
``x-ms-range`` or ``Range``, conditions and faults as above), List Blobs (``?restype=container&comp=list&prefix=&delimiter=
&marker=&maxresults=``, ``EnumerationResults`` XML), Put Blob, Put Block + Put Block List
(multipart uploads) and Delete Blob.  Written from Microsoft's REST API reference; it is not
Azurite, so it shows that fastq's ``az://`` path works with object_store's Azure client, not
that every Azure quirk is covered.

Faults (:class:`Faults`), changeable while serving with :meth:`ObjectServer.set_faults`:
a fixed latency per request (an ``Event.wait``: no lock held, requests overlap), a fraction of
requests answered 503 SlowDown or 500, connection resets (headers and half the body, then an
RST), truncated bodies (the full Content-Length announced, half the body sent, then a clean
close), stalls (headers, then nothing for ``stall_s`` seconds, then the body) and ``dead`` (the
listening socket is closed and open connections are cut: clients get "connection refused"
until ``dead`` is set back).  Which fault a request gets comes from one ``random.Random(seed)``
draw per eligible request, so a run makes the same number of each fault for the same number of
requests (which request gets which depends on the order concurrent requests arrive in).

Speed: one thread per connection (``ThreadingHTTPServer``), HTTP/1.1 keep-alive, TCP_NODELAY,
a listen backlog of 512, header and body handed to the kernel in one ``sendmsg`` (memory) or
``socket.sendfile`` (files), ETags cached.  The server still costs ~0.1-1 ms of CPU per request
in Python: measure its raw rate in the same run as whatever it serves
(:func:`measure_raw_rate`).

    with ObjectServer("/data", latency_ms=20) as srv:     # root/<bucket>/<key>
        os.environ.update(srv.env())                       # AWS_ENDPOINT_URL=... for any client
        store = obstore.store.S3Store("bucket", **srv.obstore_config())

    python -m fastq.bench.objserver --root DIR [--port N] [--latency-ms 20] [--mode http]
"""
import argparse
import base64
import dataclasses
import email.utils
import hashlib
import http.server
import os
import random
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

__all__ = ["Faults", "ObjectServer", "ObjectServerProcess", "MAX_STALL_S", "measure_raw_rate"]

MAX_STALL_S = 60.0        # a stall never lasts longer (and ends at once when the server stops)
IDLE_TIMEOUT_S = 60.0     # an idle keep-alive connection is closed after this
JOIN_TIMEOUT_S = 5.0      # stop() waits at most this long for each connection thread
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
FAULT_KINDS = ("slowdown", "error", "reset", "truncate", "stall")


@dataclasses.dataclass(frozen=True)
class Faults:
    """What the server does wrong, and how often.

    latency_ms     added before every request is answered (every kind of request)
    slowdown_rate  fraction of eligible requests answered 503 SlowDown (S3 XML)
    error_rate     fraction answered 500 InternalError
    reset_rate     fraction cut with an RST after the headers and half the body
    truncate_rate  fraction sent with the full Content-Length but half the body, then closed
    stall_rate     fraction that send their headers, then nothing for stall_s seconds
    stall_s        length of a stall (at most MAX_STALL_S)
    dead           refuse connections (the listening socket is closed)
    ops            the request kinds the rates apply to: "get", "head", "list", "put", "delete"
                   (truncate and stall need a body: they leave HEAD and bodiless answers alone)
    """
    latency_ms: float = 0.0
    slowdown_rate: float = 0.0
    error_rate: float = 0.0
    reset_rate: float = 0.0
    truncate_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 5.0
    dead: bool = False
    ops: tuple = ("get",)

    def __post_init__(self):
        if not 0 <= self.latency_ms <= 60_000:
            raise ValueError(f"Faults: latency_ms must be in [0, 60000], got {self.latency_ms!r}")
        rates = [getattr(self, k + "_rate") for k in FAULT_KINDS]
        for k, r in zip(FAULT_KINDS, rates):
            if not 0 <= r <= 1:
                raise ValueError(f"Faults: {k}_rate must be in [0, 1], got {r!r}")
        if sum(rates) > 1 + 1e-9:
            raise ValueError(f"Faults: the rates add up to {sum(rates):g} > 1")
        if not 0 <= self.stall_s <= MAX_STALL_S:
            raise ValueError(f"Faults: stall_s must be in [0, {MAX_STALL_S:g}], got {self.stall_s!r}")
        ops = (self.ops,) if isinstance(self.ops, str) else tuple(self.ops)
        bad = set(ops) - {"get", "head", "list", "put", "delete"}
        if bad:
            raise ValueError(f"Faults: unknown ops {sorted(bad)}; choose from get, head, list, put, delete")
        object.__setattr__(self, "ops", ops)

    @classmethod
    def coerce(cls, faults):
        if faults is None:
            return cls()
        if isinstance(faults, cls):
            return faults
        if isinstance(faults, dict):
            unknown = set(faults) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise ValueError(f"Faults: unknown fields {sorted(unknown)}")
            return cls(**faults)
        raise TypeError(f"faults must be a Faults, a dict or None, got {type(faults).__name__}")

    def pick(self, u):
        """The fault for a uniform draw u in [0, 1), or None."""
        acc = 0.0
        for k in FAULT_KINDS:
            acc += getattr(self, k + "_rate")
            if u < acc:
                return k
        return None


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


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fastq-objserver"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S
    disable_nagle_algorithm = True  # StreamRequestHandler sets TCP_NODELAY
    rbufsize = 1 << 16

    def log_message(self, format, *args):  # noqa: A002  (no per-request log line)
        pass

    def parse_request(self):
        """The request line and headers, as BaseHTTPRequestHandler.parse_request does for
        HTTP/1.1 requests, without the email parser (half the server's CPU per request)."""
        self.command = None
        self.close_connection = True
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = line
        words = line.split()
        if len(words) != 3 or not words[2].startswith("HTTP/1."):
            self.send_error(400, f"Bad request line {line!r}")
            return False
        self.command, self.path, self.request_version = words
        headers = _Headers()
        for _ in range(200):  # http.client's own limit is 100 headers
            h = self.rfile.readline(65537)
            if len(h) > 65536:
                self.send_error(431, "Line too long")
                return False
            if h in (b"\r\n", b"\n", b""):
                break
            k, sep, v = h.decode("iso-8859-1").partition(":")
            if not sep:
                self.send_error(400, "Bad header line")
                return False
            k = k.strip().lower()
            v = v.strip()
            headers[k] = headers[k] + "," + v if k in headers else v
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = headers
        conn = headers.get("connection", "").lower()
        self.close_connection = conn == "close" or self.request_version == "HTTP/1.0" and conn != "keep-alive"
        if headers.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    # -- plumbing --
    def _send(self, status, headers=(), body=b"", file=None, offset=0, count=0, head=False, fault=None):
        """Status line, headers and body in one sendmsg (a file's bytes by sendfile);
        `fault` "reset" / "truncate" / "stall" bends the body as Faults describe."""
        o = self.server.owner
        length = count if file is not None else len(body)
        lines = [f"HTTP/1.1 {status} {http.server.BaseHTTPRequestHandler.responses.get(status, ('',))[0]}",
                 "Server: fastq-objserver", f"Date: {_http_date(time.time())}",
                 "x-amz-request-id: %016X" % o._next_id()]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append(f"Content-Length: {length}")
        if self.close_connection:
            lines.append("Connection: close")
        hdr = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        sock = self.connection
        if fault == "reset" and (head or length == 0 or status == 304):  # nothing to cut: reset at once
            self._reset()
            return
        if head or length == 0 or status == 304:
            self._sendall([hdr])
            return
        if fault in ("reset", "truncate", "stall"):
            half = length // 2
            part = self._body_bytes(body, file, offset, half)
            if fault == "stall":
                self._sendall([hdr])
                if o._stop.wait(o.faults.stall_s):  # the server stops: the answer stays unfinished
                    self._reset()
                    return
                part = self._body_bytes(body, file, offset, length)
                self._sendall([part])
                return
            self._sendall([hdr, part])
            self.close_connection = True
            if fault == "reset":
                self._reset()
            else:
                sock.shutdown(socket.SHUT_WR)
            return
        if file is not None:  # one read + one sendmsg beat sendfile's per-call selector on ~100 kB objects
            body = self._body_bytes(None, file, offset, count)
            if len(body) != count:
                raise ConnectionError(f"{file} changed while it was served")
        self._sendall([hdr, body])
        o._count("bytes_sent", length)

    def _reset(self):
        """SO_LINGER 0: close() sends an RST, not a FIN."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    @staticmethod
    def _body_bytes(body, file, offset, n):
        if file is None:
            return body[:n]
        with open(file, "rb") as f:
            f.seek(offset)
            return f.read(n)

    def _sendall(self, bufs):
        sock = self.connection
        bufs = [memoryview(b).cast("B") for b in bufs if len(b)]
        while bufs:
            n = sock.sendmsg(bufs)
            while bufs and n >= len(bufs[0]):
                n -= len(bufs[0])
                bufs.pop(0)
            if bufs and n:
                bufs[0] = bufs[0][n:]

    def _error(self, status, code, message, resource="", head=False, fault=None, extra=()):
        o = self.server.owner
        o._count(f"status_{status}")
        body = b""
        if not head and o.mode in ("s3", "azure"):
            body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                    f"<Message>{escape(message)}</Message><Resource>{escape(resource)}</Resource>"
                    f"<RequestId>{o._last_id():016X}</RequestId></Error>").encode()
        elif not head:
            body = f"{status} {message}\n".encode()
        ctype = "application/xml" if o.mode in ("s3", "azure") else "text/plain"
        self._send(status, [("Content-Type", ctype), *extra], body, head=head, fault=fault)

    def _read_body(self):
        """The request body: Content-Length or chunked, aws-chunked decoded."""
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            raw = self._read_chunked(self.rfile)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if len(raw) != n:
                raise ConnectionError("request body cut short")
        enc = (self.headers.get("Content-Encoding") or "").lower()
        sha = self.headers.get("x-amz-content-sha256") or ""
        if "aws-chunked" in enc or sha.startswith("STREAMING-"):
            import io
            raw = self._read_chunked(io.BytesIO(raw))
        return raw

    @staticmethod
    def _read_chunked(f):
        out = bytearray()
        for _ in range(1 << 30):  # bounded: one turn per chunk
            line = f.readline(65537)
            if not line:
                raise ConnectionError("chunked body cut short")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                for _ in range(1024):  # trailers, up to the blank line
                    t = f.readline(65537)
                    if t in (b"\r\n", b"\n", b""):
                        break
                return bytes(out)
            data = f.read(size)
            if len(data) != size:
                raise ConnectionError("chunked body cut short")
            out += data
            f.readline(3)
        raise ConnectionError("chunked body: too many chunks")

    # -- dispatch --
    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method):
        o = self.server.owner
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        if o.mode == "http":
            bucket, key = "", path.lstrip("/")
        elif o.mode == "azure":  # /<account>/<container>/<blob>
            bucket, _, key = path.lstrip("/").partition("/")[2].partition("/")
        else:
            bucket, _, key = path.lstrip("/").partition("/")
        if method in ("GET", "HEAD") and key:
            op = "get" if method == "GET" else "head"
        elif method == "GET" and bucket and (o.mode == "s3" or query.get("comp") == "list"):
            op = "list"
        elif method == "PUT":
            op = "put"
        elif method == "DELETE":
            op = "delete"
        else:
            op = "other"
        o._count(op)
        f = o.faults
        if f.latency_ms:
            o._stop.wait(f.latency_ms / 1000)
        fault = o._draw(op, f)
        if method == "PUT" and key:
            try:
                body = self._read_body()  # read before any answer, so the connection stays usable
            except ValueError as e:
                self.close_connection = True
                return self._error(400, "InvalidRequest", f"the request body could not be read: {e}", path)
        elif (self.headers.get("Content-Length") or "0").strip() != "0":
            self.close_connection = True  # a body nobody reads: this connection ends with the answer
        if fault in ("slowdown", "error"):
            if fault == "slowdown":
                self._error(503, "SlowDown", "Please reduce your request rate.", path, head=method == "HEAD")
            else:
                self._error(500, "InternalError", "We encountered an internal error. Please try again.", path,
                            head=method == "HEAD")
            return
        if fault in ("truncate", "stall") and (method == "HEAD" or op not in ("get", "list")):
            fault = None  # nothing to cut short
        try:
            if o.mode == "http":
                if method not in ("GET", "HEAD"):
                    self.close_connection = True
                    return self._error(405, "MethodNotAllowed", "plain HTTP mode serves GET and HEAD only", path)
                return self._get_object("", key, path, head=method == "HEAD", fault=fault)
            if o.mode == "azure":
                return self._azure(method, bucket, key, query, body if method == "PUT" and key else b"", path,
                                   fault)
            if not bucket:
                if method == "GET":
                    return self._list_buckets(fault)
                return self._error(405, "MethodNotAllowed", "The specified method is not allowed", path)
            if not key:
                if method == "PUT":
                    o.store.create_bucket(bucket)
                    return self._send(200, [("Location", "/" + bucket)])
                if not o.store.has_bucket(bucket):
                    return self._error(404, "NoSuchBucket", "The specified bucket does not exist", path,
                                       head=method == "HEAD", fault=fault)
                if method == "HEAD":
                    return self._send(200, [("x-amz-bucket-region", o.region)], head=True)
                if method == "GET":
                    if "location" in query:
                        return self._send(200, [("Content-Type", "application/xml")],
                                          f'<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint '
                                          f'xmlns="{S3_NS}"></LocationConstraint>'.encode())
                    return self._list(bucket, query, fault)
                return self._error(405, "MethodNotAllowed", "The specified method is not allowed", path)
            if not o.store.has_bucket(bucket):
                return self._error(404, "NoSuchBucket", "The specified bucket does not exist", path,
                                   head=method == "HEAD", fault=fault)
            if f"{bucket}/{key}" in o.denied:
                o._count("denied")
                return self._error(403, "AccessDenied", "Access Denied", path, head=method == "HEAD", fault=fault)
            if method in ("GET", "HEAD"):
                return self._get_object(bucket, key, path, head=method == "HEAD", fault=fault)
            if method == "PUT":
                return self._put_object(bucket, key, body, path)
            if method == "DELETE":
                o.store.delete(bucket, key)
                return self._send(204)
            return self._error(405, "MethodNotAllowed", "The specified method is not allowed", path)
        except ValueError as e:  # a header that does not parse (Content-Length, chunk size...)
            self.close_connection = True
            self._error(400, "InvalidRequest", f"the request could not be read: {e}", path)

    def _azure(self, method, container, key, q, body, path, fault):
        """mode "azure": the Blob service operations object_store's Azure client makes."""
        o = self.server.owner
        if not container or not o.store.has_bucket(container):
            return self._error(404, "ContainerNotFound", "The specified container does not exist.", path,
                               head=method == "HEAD", fault=fault)
        if not key:
            if method == "GET" and q.get("restype") == "container" and q.get("comp") == "list":
                return self._azure_list(container, q, fault)
            return self._error(405, "UnsupportedHttpVerb", "not supported by this server", path)
        if f"{container}/{key}" in o.denied:
            o._count("denied")
            return self._error(403, "AuthorizationPermissionMismatch", "This request is not authorized.", path,
                               head=method == "HEAD", fault=fault)
        if method in ("GET", "HEAD"):
            return self._get_object(container, key, path, head=method == "HEAD", fault=fault)
        if method == "DELETE":
            o.store.delete(container, key)
            return self._send(202)
        if method != "PUT":
            return self._error(405, "UnsupportedHttpVerb", "not supported by this server", path)
        comp = q.get("comp")
        if comp == "block":  # Put Block: kept until Put Block List names it
            with o._lock:
                o._blocks.setdefault((container, key), {})[q.get("blockid", "")] = body
            o._count("bytes_received", len(body))
            return self._send(201)
        if comp == "blocklist":  # Put Block List: the blob is the named blocks, in order
            import xml.etree.ElementTree as ET
            try:
                ids = [e.text or "" for e in ET.fromstring(body) if e.tag in ("Latest", "Committed", "Uncommitted")]
            except ET.ParseError as e:
                return self._error(400, "InvalidXmlDocument", f"block list: {e}", path)
            with o._lock:
                blocks = o._blocks.pop((container, key), {})
            if any(i not in blocks for i in ids):
                return self._error(400, "InvalidBlockList", "The specified block list is invalid.", path)
            etag = o.store.put(container, key, b"".join(blocks[i] for i in ids))
            return self._send(201, [("ETag", etag), ("Last-Modified", _http_date(time.time()))])
        if comp is not None:
            return self._error(400, "InvalidQueryParameterValue", f"comp={comp} is not supported", path)
        if self._put_refused(o.store.get(container, key)):
            return self._error(412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) "
                                                       "is not met.", path)
        etag = o.store.put(container, key, body)
        o._count("bytes_received", len(body))
        return self._send(201, [("ETag", etag), ("Last-Modified", _http_date(time.time()))])

    def _azure_list(self, container, q, fault):
        """List Blobs: EnumerationResults, the prefixes (BlobPrefix) before the blobs."""
        o = self.server.owner
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        limit = _query_int(q, "maxresults", 5000, 1)
        if limit is None:
            return self._error(400, "OutOfRangeQueryParameterValue", "maxresults must be >= 1", "/" + container)
        after = ""
        if q.get("marker"):
            try:
                after = base64.urlsafe_b64decode(q["marker"].encode()).decode()
            except ValueError:
                return self._error(400, "OutOfRangeInput", "The marker is not valid.", "/" + container)
        entries = self._entries(container, prefix, delim, after)
        page, truncated = entries[:limit], len(entries) > limit
        parts = [f'<?xml version="1.0" encoding="utf-8"?>\n<EnumerationResults ServiceEndpoint="{self.server.owner.endpoint}/" '
                 f'ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix>'
                 f"<MaxResults>{limit}</MaxResults>"]
        if delim:
            parts.append(f"<Delimiter>{escape(delim)}</Delimiter>")
        parts.append("<Blobs>")
        parts += [f"<BlobPrefix><Name>{escape(n)}</Name></BlobPrefix>" for n, ob in page if ob is None]
        parts += [f"<Blob><Name>{escape(n)}</Name><Properties><Last-Modified>{_http_date(ob.mtime)}</Last-Modified>"
                  f"<Etag>{escape(ob.etag)}</Etag><Content-Length>{ob.size}</Content-Length>"
                  f"<Content-Type>application/octet-stream</Content-Type><BlobType>BlockBlob</BlobType>"
                  f"</Properties></Blob>" for n, ob in page if ob is not None]
        parts.append("</Blobs>")
        nxt = base64.urlsafe_b64encode(page[-1][0].encode()).decode() if truncated else ""
        parts.append(f"<NextMarker>{nxt}</NextMarker></EnumerationResults>")
        self._send(200, [("Content-Type", "application/xml")], "".join(parts).encode(), fault=fault)

    def _put_refused(self, old):
        """True when the write's If-Match / If-None-Match does not hold for `old` (None: absent)."""
        im, inm = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        return (im is not None and (old is None or not _etag_matches(im, old.etag))) or \
            (inm is not None and old is not None and _etag_matches(inm, old.etag))

    def _entries(self, bucket, prefix, delim, after):
        """[(name, obj)] of a listing after `after`, in key order; with a delimiter the
        common prefixes are (prefix, None), and none of their keys come back."""
        entries = []
        for k, obj in self.server.owner.store.keys(bucket, prefix):
            if delim:
                i = k.find(delim, len(prefix))
                if i >= 0:
                    cp = k[:i + len(delim)]
                    if not entries or entries[-1][0] != cp:
                        entries.append((cp, None))
                    continue
            entries.append((k, obj))
        return [(n, ob) for n, ob in entries if n > after]

    def _conditions(self, obj, head):
        """(status, code) of a failed If-Match / If-None-Match, or None."""
        im = self.headers.get("If-Match")
        if im is not None and not _etag_matches(im, obj.etag):
            return 412, "PreconditionFailed"
        inm = self.headers.get("If-None-Match")
        if inm is not None and _etag_matches(inm, obj.etag):
            return 304, "NotModified"
        return None

    def _get_object(self, bucket, key, path, head, fault):
        o = self.server.owner
        obj = o.store.get(bucket, key)
        if obj is None:
            return self._error(404, "NoSuchKey", "The specified key does not exist.", path, head=head, fault=fault)
        meta = [("ETag", obj.etag), ("Last-Modified", _http_date(obj.mtime)), ("Accept-Ranges", "bytes")]
        cond = self._conditions(obj, head)
        if cond and cond[0] == 304:
            o._count("status_304")
            return self._send(304, meta, head=True)
        if cond:
            return self._error(412, cond[1], "At least one of the pre-conditions you specified did not hold",
                               path, head=head)
        rh = self.headers.get("Range")
        if o.mode == "azure" and self.headers.get("x-ms-range"):  # Azure's own header wins over Range
            rh = self.headers.get("x-ms-range")
        rng = _parse_range(rh, obj.size)
        if rng == "unsatisfiable":
            o._count("status_416")
            return self._error(416, "InvalidRange", "The requested range is not satisfiable", path, head=head,
                               extra=[("Content-Range", f"bytes */{obj.size}")])
        ctype = [("Content-Type", "application/octet-stream")]
        if rng is None:
            start, count, status, extra = 0, obj.size, 200, []
        else:
            start, count, status = rng[0], rng[1] - rng[0] + 1, 206
            extra = [("Content-Range", f"bytes {rng[0]}-{rng[1]}/{obj.size}")]
            o._count("get_range" if not head else "head_range")
        if obj.data is not None:
            body = memoryview(obj.data)[start:start + count]
            return self._send(status, ctype + meta + extra, body, head=head, fault=fault)
        return self._send(status, ctype + meta + extra, file=obj.path, offset=start, count=count, head=head,
                          fault=fault)

    def _put_object(self, bucket, key, body, path):
        o = self.server.owner
        if self._put_refused(o.store.get(bucket, key)):
            return self._error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did "
                                                          "not hold", path)
        etag = o.store.put(bucket, key, body)
        o._count("bytes_received", len(body))
        self._send(200, [("ETag", etag)])

    def _list_buckets(self, fault):
        names = self.server.owner.store.bucket_names()
        now = _iso_date(time.time())
        xml = "".join(f"<Bucket><Name>{escape(n)}</Name><CreationDate>{now}</CreationDate></Bucket>" for n in names)
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="{S3_NS}"><Owner><ID>fastq'
                f"</ID><DisplayName>fastq</DisplayName></Owner><Buckets>{xml}</Buckets></ListAllMyBucketsResult>")
        self._send(200, [("Content-Type", "application/xml")], body.encode(), fault=fault)

    def _list(self, bucket, q, fault):
        o = self.server.owner
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        max_keys = _query_int(q, "max-keys", 1000, 0)
        if max_keys is None:
            return self._error(400, "InvalidArgument", "max-keys must be an integer >= 0", "/" + bucket)
        v2 = q.get("list-type") == "2"
        token = q.get("continuation-token")
        after = q.get("start-after", "") if v2 else q.get("marker", "")
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except ValueError:
                return self._error(400, "InvalidArgument", "The continuation token provided is incorrect",
                                   "/" + bucket)
        enc = q.get("encoding-type") == "url"

        def e(s):
            return escape(urllib.parse.quote_plus(s, safe="/") if enc else s)
        entries = self._entries(bucket, prefix, delim, after)
        page, truncated = entries[:max_keys], len(entries) > max_keys
        parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{S3_NS}">',
                 f"<Name>{escape(bucket)}</Name><Prefix>{e(prefix)}</Prefix>"]
        if v2:
            parts.append(f"<KeyCount>{len(page)}</KeyCount>")
        else:
            parts.append(f"<Marker>{e(after)}</Marker>")
        parts.append(f"<MaxKeys>{max_keys}</MaxKeys>")
        if delim:
            parts.append(f"<Delimiter>{e(delim)}</Delimiter>")
        if enc:
            parts.append("<EncodingType>url</EncodingType>")
        parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if v2 and token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if v2 and q.get("start-after"):
            parts.append(f"<StartAfter>{e(q['start-after'])}</StartAfter>")
        if truncated:
            nxt = base64.urlsafe_b64encode(page[-1][0].encode()).decode()
            parts.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>" if v2
                         else f"<NextMarker>{e(page[-1][0])}</NextMarker>")
        for n, obj in page:
            if obj is None:
                parts.append(f"<CommonPrefixes><Prefix>{e(n)}</Prefix></CommonPrefixes>")
            else:
                parts.append(f"<Contents><Key>{e(n)}</Key><LastModified>{_iso_date(obj.mtime)}</LastModified>"
                             f"<ETag>{escape(obj.etag)}</ETag><Size>{obj.size}</Size>"
                             f"<StorageClass>STANDARD</StorageClass></Contents>")
        parts.append("</ListBucketResult>")
        self._send(200, [("Content-Type", "application/xml")], "".join(parts).encode(), fault=fault)


def _query_int(q, name, most, least):
    """min(most, the integer query parameter `name`) (most if absent), or None if it is
    not an integer >= least."""
    try:
        v = int(q.get(name, str(most)))
    except ValueError:
        return None
    return min(most, v) if v >= least else None


class _HTTPServer(http.server.ThreadingHTTPServer):
    request_queue_size = 512
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, addr, owner):
        self.owner = owner
        super().__init__(addr, _Handler)

    def process_request(self, request, client_address):
        o = self.owner
        if o.faults.dead:  # accepted in the moment before the listener closed
            o._count("refused")
            request.close()
            return
        t = threading.Thread(target=self._serve_conn, args=(request, client_address), daemon=True,
                             name="objserver-conn")
        with o._lock:
            o._conns[request] = t
        t.start()

    def _serve_conn(self, request, client_address):
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.owner._lock:
                self.owner._conns.pop(request, None)

    def handle_error(self, request, client_address):
        # a client that hangs up mid-answer (or a fault that cut it) is not worth a traceback
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


class ObjectServer:
    """``ObjectServer(root_or_dict, mode="s3" | "http", latency_ms=0, faults=None, seed=0,
    denied=(), host="127.0.0.1", port=0, region="us-east-1")``.

    ``start()`` binds (port 0: a free port the OS picks), serves in a background thread and
    returns the endpoint URL; ``stop()`` closes the listener and every open connection and
    joins the threads (also a context manager).  ``stats()``: counters of requests by kind
    ("get", "get_range", "head", "list", "put", "delete", "other"), answers by status
    ("status_404"...), faults injected ("fault_slowdown", "fault_error", "fault_reset",
    "fault_truncate", "fault_stall", "refused"), "requests" and "bytes_sent".
    """

    def __init__(self, source, mode="s3", latency_ms=0, faults=None, seed=0, denied=(), host="127.0.0.1", port=0,
                 region="us-east-1"):
        if mode not in ("s3", "http", "azure"):
            raise ValueError(f"ObjectServer: mode must be 's3', 'http' or 'azure', got {mode!r}")
        self.mode, self.host, self.port, self.region = mode, host, int(port), region
        self.store = _Store(source, mode)
        f = Faults.coerce(faults)
        if latency_ms:
            f = dataclasses.replace(f, latency_ms=float(latency_ms))
        self._faults = f
        self.denied = set(denied)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stats = {}
        self._ids = 0
        self._blocks = {}  # mode "azure": (container, blob) -> {block id: bytes} until Put Block List
        self._conns = {}
        self._stop = threading.Event()
        self._httpd = None
        self._thread = None
        self._started = False

    # -- faults --
    @property
    def faults(self):
        return self._faults

    @faults.setter
    def faults(self, value):
        self.set_faults(value)

    def set_faults(self, faults=None, **changes):
        """Replace the faults (a Faults or dict; None keeps the current ones) and apply
        ``changes`` (field=value) on top; takes effect for the next request.  Turning
        ``dead`` on closes the listener and cuts open connections; off, listens again on
        the same port."""
        f = self._faults if faults is None else Faults.coerce(faults)
        f = dataclasses.replace(f, **changes) if changes else f
        was_dead = self._faults.dead
        self._faults = f
        if self._started and f.dead != was_dead:
            if f.dead:
                self._close_listener()
                self._cut_connections()
            else:
                self._open_listener()
        return f

    def _draw(self, op, f):
        if op not in f.ops or not any(getattr(f, k + "_rate") for k in FAULT_KINDS):
            return None
        with self._lock:
            u = self._rng.random()
        kind = f.pick(u)
        if kind:
            self._count("fault_" + kind)
        return kind

    # -- counters --
    def _count(self, key, n=1):
        with self._lock:
            self._stats[key] = self._stats.get(key, 0) + n

    def _next_id(self):
        with self._lock:
            self._ids += 1
            return self._ids

    def _last_id(self):
        return self._ids

    def stats(self):
        """A copy of the counters (see the class docstring), with "requests" = all requests."""
        with self._lock:
            s = dict(self._stats)
        s["requests"] = sum(s.get(k, 0) for k in ("get", "head", "list", "put", "delete", "other"))
        return s

    def reset_stats(self):
        with self._lock:
            self._stats.clear()

    # -- life cycle --
    @property
    def endpoint(self):
        return f"http://{self.host}:{self.port}"

    def start(self):
        if self._started:
            raise RuntimeError("ObjectServer: already started")
        self._stop.clear()
        self._started = True
        if self._faults.dead:  # bind now to own the port, then close it: refused from the start
            self._open_listener()
            self._close_listener()
        else:
            self._open_listener()
        return self.endpoint

    def _open_listener(self):
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"objserver-{self.port}")
        self._thread.start()

    def _close_listener(self):
        if self._httpd is not None:
            self._httpd.shutdown()  # returns once serve_forever has stopped (<= poll_interval)
            self._httpd.server_close()
            self._thread.join(JOIN_TIMEOUT_S)
            self._httpd = self._thread = None

    def _cut_connections(self):
        with self._lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _, t in conns:
            t.join(JOIN_TIMEOUT_S)

    def stop(self):
        """Stop serving: the listener, then every connection (a stall or latency wait ends at
        once); joins the threads (each at most JOIN_TIMEOUT_S)."""
        if not self._started:
            return
        self._stop.set()
        self._close_listener()
        self._cut_connections()
        self._started = False

    def __enter__(self):
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- what a client needs --
    def env(self):
        """Environment variables that point an S3 client (obstore / object_store, boto3, the
        AWS SDKs, DALI) at this server, with dummy credentials; mode "azure": object_store's
        Azure client, in its emulator mode (Azurite's well-known account and key)."""
        if self.mode == "azure":
            return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": self.endpoint,
                    "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1"}
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ENDPOINT_URL_S3": self.endpoint,
                "AWS_ACCESS_KEY_ID": "fastq-test", "AWS_SECRET_ACCESS_KEY": "fastq-test-secret",
                "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region, "AWS_ALLOW_HTTP": "true",
                "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_EC2_METADATA_DISABLED": "true",
                "S3_USE_HTTPS": "0", "S3_ENDPOINT": f"{self.host}:{self.port}", "S3_VERIFY_SSL": "0"}

    def obstore_config(self, **client_options):
        """Keyword arguments of ``obstore.store.S3Store(bucket, **kw)`` for this server
        (``client_options`` added to allow_http)."""
        return {"endpoint": self.endpoint, "region": self.region, "access_key_id": "fastq-test",
                "secret_access_key": "fastq-test-secret", "virtual_hosted_style_request": False,
                "client_options": {"allow_http": True, **client_options}}

    def url(self, bucket, key=""):
        """s3://bucket/key (mode "s3"), az://container/key (mode "azure") or
        http://host:port/key (mode "http")."""
        if self.mode == "azure":
            return f"az://{bucket}/{key}"
        if self.mode == "http":
            return f"{self.endpoint}/{urllib.parse.quote(key)}"
        return f"s3://{bucket}/{key}"


class ObjectServerProcess:
    """An :class:`ObjectServer` on a folder in a process of its own (``python -m
    fastq.bench.objserver``), so that its Python does not share a GIL with the client
    measured: ``start()`` -> endpoint URL, ``stop()`` (SIGTERM, then waits; kills after
    ``JOIN_TIMEOUT_S``) -> the counters it printed; ``env()``, ``obstore_config()`` and
    ``url()`` as ObjectServer's.  The process also stops by itself after ``duration`` s."""

    def __init__(self, root, mode="s3", latency_ms=0, seed=0, duration=3600.0, region="us-east-1", **rates):
        self.root, self.mode, self.region = os.fspath(root), mode, region
        self.args = ["--root", self.root, "--mode", mode, "--latency-ms", str(latency_ms), "--seed", str(seed),
                     "--duration", str(duration)]
        for k, v in rates.items():  # slowdown_rate=..., stall_s=...
            self.args += ["--" + k.replace("_", "-"), str(v)]
        self.proc = None
        self.host, self.port = "127.0.0.1", None

    @property
    def endpoint(self):
        return f"http://{self.host}:{self.port}"

    def start(self, timeout=30.0):
        import subprocess
        self.proc = subprocess.Popen([sys.executable, "-m", "fastq.bench.objserver", *self.args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                         [os.path.dirname(os.path.dirname(os.path.dirname(
                                             os.path.abspath(__file__))))] + sys.path)))
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ok = sel.select(timeout)
        sel.close()
        line = self.proc.stdout.readline() if ok else ""
        if " at http://" not in line:
            self.stop()
            err = self.proc.stderr.read()[-2000:] if self.proc.stderr else ""
            raise RuntimeError(f"objserver process did not start within {timeout:g} s: {line!r} {err}")
        url = line.split(" at ")[1].split()[0]
        self.port = int(url.rsplit(":", 1)[1])
        return self.endpoint

    def stop(self):
        """-> the stats line the process printed when it stopped ("" when none)."""
        import signal
        import subprocess
        if self.proc is None:
            return ""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=JOIN_TIMEOUT_S + 5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.proc = None
        return next((ln for ln in out.splitlines() if ln.startswith("stopped;")), "")

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    env = ObjectServer.env
    obstore_config = ObjectServer.obstore_config
    url = ObjectServer.url


def measure_raw_rate(srv, bucket, keys, in_flight=64, seconds=2.0, ranged=False, max_requests=None):
    """Objects/s the server delivers to obstore's async client (``get_async`` or, with
    ``ranged``, ``get_range_async`` of the whole object) with ``in_flight`` requests
    outstanding, fetching ``keys`` round-robin for about ``seconds`` (no decoding) ->
    dict(objects_per_s, MB_per_s, requests, seconds)."""
    import asyncio

    import obstore
    from obstore.store import S3Store
    if not keys:
        raise ValueError("measure_raw_rate: no keys")
    store = S3Store(bucket, **srv.obstore_config(pool_max_idle_per_host="1024"))
    sizes = {}
    if ranged:
        for k in set(keys):
            sizes[k] = obstore.head(store, k)["size"]
    limit = max_requests if max_requests is not None else 1 << 40

    async def main():
        done = [0, 0]
        deadline = time.perf_counter() + seconds
        idx = [0]

        async def worker():
            while time.perf_counter() < deadline and idx[0] < limit:
                k = keys[idx[0] % len(keys)]
                idx[0] += 1
                if ranged:
                    b = await obstore.get_range_async(store, k, start=0, end=sizes[k])
                    done[1] += len(b)
                else:
                    r = await obstore.get_async(store, k)
                    b = await r.bytes_async()
                    done[1] += len(b)
                done[0] += 1
        # warm up the connections: one request per slot
        await asyncio.gather(*(obstore.get_async(store, keys[i % len(keys)]) for i in range(in_flight)))
        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return done, time.perf_counter() - t
    (n, nbytes), dt = asyncio.run(main())
    return {"objects_per_s": n / dt, "MB_per_s": nbytes / dt / 1e6, "requests": n, "seconds": dt,
            "in_flight": in_flight}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fastq.bench.objserver",
                                 description="Serve a folder as S3 (ROOT/<bucket>/<key>, path-style), Azure Blob (containers) or plain HTTP, "
                                             "for tests and benchmarks; stops on Ctrl-C or after --duration.")
    ap.add_argument("--root", required=True, help="the folder served (mode s3: each top-level folder is a bucket)")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port (default 0: one the OS picks)")
    ap.add_argument("--mode", choices=("s3", "http", "azure"), default="s3")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="added before every answer")
    ap.add_argument("--slowdown-rate", type=float, default=0.0, help="fraction of GETs answered 503 SlowDown")
    ap.add_argument("--error-rate", type=float, default=0.0, help="fraction of GETs answered 500")
    ap.add_argument("--reset-rate", type=float, default=0.0, help="fraction of GETs reset mid-body")
    ap.add_argument("--truncate-rate", type=float, default=0.0, help="fraction of GETs with a truncated body")
    ap.add_argument("--stall-rate", type=float, default=0.0, help="fraction of GETs that stall after the headers")
    ap.add_argument("--stall-s", type=float, default=5.0, help="length of a stall (default 5 s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=3600.0,
                    help="seconds to serve before stopping by itself (default 3600)")
    a = ap.parse_args(argv)
    faults = Faults(latency_ms=a.latency_ms, slowdown_rate=a.slowdown_rate, error_rate=a.error_rate,
                    reset_rate=a.reset_rate, truncate_rate=a.truncate_rate, stall_rate=a.stall_rate,
                    stall_s=a.stall_s)
    srv = ObjectServer(a.root, mode=a.mode, faults=faults, seed=a.seed, host=a.host, port=a.port)
    url = srv.start()
    import signal
    signal.signal(signal.SIGTERM, lambda *_: srv._stop.set())
    print(f"serving {os.path.abspath(a.root)} ({a.mode}) at {url} for at most {a.duration:g} s", flush=True)
    if a.mode in ("s3", "azure"):
        for k, v in srv.env().items():
            if k.startswith(("AWS_", "AZURE_", "AZURITE_")):
                print(f"export {k}={v}")
    try:
        srv._stop.wait(a.duration)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
        print("stopped; " + ", ".join(f"{k} {v}" for k, v in sorted(srv.stats().items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
