"""The test server's request handler: parsing, sending (with faults), and what every
dialect shares (conditions, GET / HEAD / PUT of one object); the dialects' own operations
are mixed in from _s3.py and _azure.py."""
import http.server
import socket
import struct
import time
import urllib.parse
from xml.sax.saxutils import escape

from fastq.bench.objserver._azure import AzureMixin
from fastq.bench.objserver._faults import IDLE_TIMEOUT_S, S3_NS
from fastq.bench.objserver._s3 import S3Mixin
from fastq.bench.objserver._store import _etag_matches, _Headers, _http_date, _parse_range

class _Handler(S3Mixin, AzureMixin, http.server.BaseHTTPRequestHandler):
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
