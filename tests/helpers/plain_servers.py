"""Object servers that fastq did not write, for the remote sources' tests
(tests/sources/test_sources_remote_servers.py), each on 127.0.0.1 only:

* :class:`StdlibServer`: a folder served the way a new user would serve it with Python's
  own ``http.server``: ``ThreadingHTTPServer`` with its defaults (a listen backlog of
  ``request_queue_size = 5``, no idle timeout), HTTP/1.1 keep-alive, one thread per
  connection, a sleep of ``latency_s`` before each answer, the body by ``sendfile``,
  single ``Range``, ``HEAD``, ``ETag`` / ``If-Match``, and path-style S3 (``/<bucket>/<key>``,
  ListObjectsV2) when ``bucket`` is given (any ``Authorization`` accepted);
* :class:`Nginx`: the system's nginx (Debian package ``nginx``) serving a folder over
  http:// with its default keep-alive settings, from a config written to a temporary
  folder, on a free port.
"""
import email.utils
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

__all__ = ["StdlibServer", "Nginx", "free_port"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client dropped the connection mid-answer (a cancelled request)

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
        try:
            self._reply()
        finally:
            with srv.lock:
                srv.active -= 1

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

    def __init__(self, root, latency_s=0.0, bucket=None, idle_timeout_s=None):
        handler = type("Handler", (_Handler,), {"timeout": idle_timeout_s})  # None: never closes idle ones
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.root = os.path.realpath(root)
        self.httpd.latency_s = latency_s
        self.httpd.bucket = bucket
        self.httpd.lock = threading.Lock()
        self.httpd.counts = {}
        self.httpd.active = 0
        self.port = self.httpd.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="stdlib-http", daemon=True)

    def url(self, key):
        b = self.httpd.bucket
        return f"s3://{b}/{key}" if b is not None else f"{self.endpoint}/{key}"

    def counts(self):
        """{"GET": n, "HEAD": n, "connections": accepted, "max_concurrent": most requests
        answered at once}"""
        with self.httpd.lock:
            return dict(self.httpd.counts)

    def quiet(self, timeout=5.0):
        """Wait until no request is being answered (those a closed client cancelled
        finish their latency sleep), then start counting max_concurrent and connections
        afresh."""
        deadline = time.monotonic() + timeout
        while True:
            with self.httpd.lock:
                if self.httpd.active == 0 or time.monotonic() > deadline:
                    self.httpd.counts["max_concurrent"] = self.httpd.active
                    self.httpd.counts["connections"] = 0
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


_NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


class Nginx:
    """The system's nginx serving the folder root over http://127.0.0.1:<free port>, with
    nginx's defaults for keep-alive (keepalive_timeout 75 s, keepalive_requests 1000)."""

    def __init__(self, root):
        exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                              if os.access(p, os.X_OK)), None)
        if exe is None:
            raise RuntimeError("these tests need nginx (Debian: apt-get install nginx; scripts/setup.sh --full "
                               "installs it)")
        self.exe = exe
        self.root = os.path.realpath(root)
        self.proc = None

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="fastq-nginx-")
        for attempt in range(5):
            self.port = free_port()
            conf = os.path.join(self.tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(_NGINX_CONF.format(tmp=self.tmp, port=self.port, root=self.root))
            self.proc = subprocess.Popen([self.exe, "-p", self.tmp, "-c", conf, "-e", os.path.join(self.tmp, "error.log")],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                    self.endpoint = f"http://127.0.0.1:{self.port}"
                    return self
                except OSError:
                    time.sleep(0.05)
            err = self._stop()
            if "Address already in use" not in err:
                break
        shutil.rmtree(self.tmp, ignore_errors=True)
        raise RuntimeError(f"nginx did not start: {err.strip()[-2000:]}")

    def url(self, key):
        return f"{self.endpoint}/{key}"

    def _stop(self):
        err = ""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                _, e = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, e = self.proc.communicate(timeout=10)
            err = (e or b"").decode(errors="replace")
            try:
                with open(os.path.join(self.tmp, "error.log")) as f:
                    err += f.read()
            except OSError:
                pass
            self.proc = None
        return err

    def __exit__(self, *exc):
        self._stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
