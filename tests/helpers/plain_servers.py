"""Object servers that fastq did not write, for the remote sources' tests
(tests/sources/test_sources_remote_servers.py), each on 127.0.0.1 only:

* :class:`StdlibServer`: a folder served the way a new user would serve it with Python's
  own ``http.server``: ``ThreadingHTTPServer`` with its defaults (a listen backlog of
  ``request_queue_size = 5``, no idle timeout), HTTP/1.1 keep-alive, one thread per
  connection, a sleep of ``latency_s`` before each answer, the body by ``sendfile``,
  single ``Range``, ``HEAD``, ``ETag`` / ``If-Match``, and path-style S3 (``/<bucket>/<key>``,
  ListObjectsV2) when ``bucket`` is given (any ``Authorization`` accepted); over https://
  with ``tls=`` a certificate and key (Python's ``ssl``; the SNI names it was sent are kept);
* :class:`Nginx`: the system's nginx (Debian package ``nginx``) serving a folder over
  http:// (or https:// with ``tls=``) with its default keep-alive settings, from a config
  written to a temporary folder, on a free port (fastq.bench.servers.Nginx).
"""
import email.utils
import hashlib
import http.server
import os
import ssl
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

from fastq.bench import servers as _servers

__all__ = ["StdlibServer", "Nginx", "free_port"]


free_port = _servers.free_port


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server_version = "stdlib-test/1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        with self.server.lock:  # connections accepted (a client that reuses them opens few)
            self.server.counts["connections"] = self.server.counts.get("connections", 0) + 1

    def handle(self):
        if isinstance(self.request, ssl.SSLSocket):
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                return  # the client refused the certificate (or hung up): nothing to answer
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client dropped the connection mid-answer (a cancelled request; over TLS
            # OpenSSL may say so with an alert first)

    def _path(self):
        u = urllib.parse.urlsplit(self.path)
        key = urllib.parse.unquote(u.path).lstrip("/")
        srv = self.server
        if srv.bucket is not None:
            b, _, key = key.partition("/")
            if b != srv.bucket:
                return None, u
        full = os.path.normpath(os.path.join(srv.root, key))
        if not full.startswith(srv.root + os.sep) or not os.path.isfile(full):
            return None, u
        return full, u

    def _send(self, code, body=b"", ctype="application/xml"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _answer(self):
        srv = self.server
        with srv.lock:
            srv.counts[self.command] = srv.counts.get(self.command, 0) + 1
            srv.active += 1  # requests being answered at once (what the client has in flight)
            srv.counts["max_concurrent"] = max(srv.counts.get("max_concurrent", 0), srv.active)
            if not srv.counts.get("answered"):  # what the client sent before it had any answer
                srv.counts["max_concurrent_before_first_answer"] = max(
                    srv.counts.get("max_concurrent_before_first_answer", 0), srv.active)
        try:
            self._reply()
        finally:
            with srv.lock:
                srv.active -= 1
                srv.counts["answered"] = srv.counts.get("answered", 0) + 1

    def _reply(self):
        srv = self.server
        time.sleep(srv.latency_s)
        full, u = self._path()
        if full is None:
            q = urllib.parse.parse_qs(u.query)
            if srv.bucket is not None and self.command == "GET" and q.get("list-type") == ["2"]:
                return self._list(q.get("prefix", [""])[0])
            return self._send(404, b"<Error><Code>NoSuchKey</Code></Error>")
        st = os.stat(full)
        etag = '"%s"' % hashlib.md5(f"{st.st_size}-{st.st_mtime_ns}".encode()).hexdigest()
        im = self.headers.get("If-Match")
        if im and im.strip() != "*" and etag not in [t.strip() for t in im.split(",")]:
            return self._send(412, b"<Error><Code>PreconditionFailed</Code></Error>")
        size, start, end = st.st_size, 0, st.st_size
        rng = self.headers.get("Range")
        code = 200
        if rng and rng.startswith("bytes=") and "," not in rng:
            a, _, b = rng[6:].partition("-")
            if a:
                start, end = int(a), min(size, int(b) + 1 if b else size)
            else:
                start, end = max(0, size - int(b)), size
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
        self.send_response(code)
        self.send_header("Content-Length", str(end - start))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        if code == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if self.command == "GET" and end > start:
            self.wfile.flush()
            with open(full, "rb") as f:
                self.connection.sendfile(f, start, end - start)

    def _list(self, prefix):
        srv = self.server
        rows = []
        for dirpath, _dirs, names in os.walk(srv.root):
            for n in names:
                full = os.path.join(dirpath, n)
                key = os.path.relpath(full, srv.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    st = os.stat(full)
                    etag = '"%s"' % hashlib.md5(f"{st.st_size}-{st.st_mtime_ns}".encode()).hexdigest()
                    mod = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
                    rows.append(f"<Contents><Key>{escape(key)}</Key><LastModified>{mod}</LastModified>"
                                f"<ETag>{escape(etag)}</ETag><Size>{st.st_size}</Size>"
                                f"<StorageClass>STANDARD</StorageClass></Contents>")
        rows.sort()
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{srv.bucket}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(rows)}</KeyCount>"
                f"<MaxKeys>100000</MaxKeys><IsTruncated>false</IsTruncated>{''.join(rows)}</ListBucketResult>")
        self._send(200, body.encode())

    do_GET = do_HEAD = _answer


class StdlibServer:
    """Python's ThreadingHTTPServer (its defaults) serving the folder root; see the module
    docstring.  idle_timeout_s: close a keep-alive connection idle this long (the handler's
    ``timeout``; Python's default None keeps it open).  ``with StdlibServer(root, latency_s=0.05) as srv: srv.url("a/b.jpg")``."""

    def __init__(self, root, latency_s=0.0, bucket=None, idle_timeout_s=None, tls=None):
        handler = type("Handler", (_Handler,), {"timeout": idle_timeout_s})  # None: never closes idle ones
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server_names = []  # https: the SNI name of each handshake (None: none sent)
        if tls is not None:  # https:// (Python's ssl; the handshake in the connection's thread)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls["cert"], tls["key"])
            ctx.sni_callback = lambda sock, name, c: self.server_names.append(name)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.httpd.daemon_threads = True
        self.httpd.root = os.path.realpath(root)
        self.httpd.latency_s = latency_s
        self.httpd.bucket = bucket
        self.httpd.lock = threading.Lock()
        self.httpd.counts = {}
        self.httpd.active = 0
        self.port = self.httpd.server_address[1]
        self.endpoint = f"{'http' if tls is None else 'https'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="stdlib-http", daemon=True)

    def url(self, key):
        b = self.httpd.bucket
        return f"s3://{b}/{key}" if b is not None else f"{self.endpoint}/{key}"

    def counts(self):
        """{"GET": n, "HEAD": n, "connections": accepted, "max_concurrent": most requests
        answered at once, "max_concurrent_before_first_answer": the same before the first
        answer was sent, "answered": requests answered}"""
        with self.httpd.lock:
            return dict(self.httpd.counts)

    def quiet(self, timeout=5.0):
        """Wait until no request is being answered (those a closed client cancelled
        finish their latency sleep), then start counting max_concurrent and connections
        afresh (and the first answer: the ramp's test)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.httpd.lock:
                if self.httpd.active == 0 or time.monotonic() > deadline:
                    self.httpd.counts["max_concurrent"] = self.httpd.active
                    self.httpd.counts["connections"] = 0
                    self.httpd.counts["answered"] = 0
                    self.httpd.counts.pop("max_concurrent_before_first_answer", None)
                    return
            time.sleep(0.01)

    def s3_env(self):
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


# nginx (and moto's server, and a test CA for https://) are bench tools as well: one copy,
# in fastq/bench/servers.py
Nginx = _servers.Nginx
