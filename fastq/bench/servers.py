"""Object servers fastq did not write, started on 127.0.0.1 for ``fastq bench --task remote``
and the remote sources' tests (tests/helpers/plain_servers.py reuses them):

* :class:`Nginx`: the system's nginx (Debian package ``nginx``) serving a folder over
  ``http://``, or ``https://`` with ``tls=`` a :func:`make_test_ca` result, with its default
  keep-alive settings, from a config written to a temporary folder, on a free port;
* :class:`MotoServer`: moto's S3 server (``python -m moto.server``) in a process of its own,
  so that its Python shares no GIL with the client measured; :meth:`MotoServer.upload`
  puts local files in a bucket with boto3;
* :func:`make_test_ca`: a throw-away certificate authority and a server certificate for
  ``127.0.0.1`` and ``localhost`` (the ``openssl`` command, Debian package ``openssl``).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["Nginx", "MotoServer", "make_test_ca", "free_port"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(proc, port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


_EXT = """\
subjectAltName=DNS:localhost,IP:127.0.0.1
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
"""


def make_test_ca(d):
    """A certificate authority and a server certificate signed by it, valid two days for
    ``DNS:localhost`` and ``IP:127.0.0.1`` (ECDSA P-256), written in folder d ->
    dict(ca=<CA certificate, PEM>, cert=<server certificate>, key=<server key>).  Trust
    the CA with ``storage_options={"ca_file": ...["ca"]}``."""
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("make_test_ca needs the openssl command (Debian: apt-get install openssl)")
    os.makedirs(d, exist_ok=True)
    p = {k: os.path.join(d, n) for k, n in (("ca", "ca.pem"), ("ca_key", "ca.key"), ("cert", "server.pem"),
                                            ("key", "server.key"), ("csr", "server.csr"), ("ext", "server.ext"))}
    with open(p["ext"], "w") as f:
        f.write(_EXT)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for cmd in ([exe, "req", "-x509", *ec, "-keyout", p["ca_key"], "-out", p["ca"], "-days", "2",
                 "-subj", "/CN=fastq test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                [exe, "req", *ec, "-keyout", p["key"], "-out", p["csr"], "-subj", "/CN=localhost"],
                [exe, "x509", "-req", "-in", p["csr"], "-CA", p["ca"], "-CAkey", p["ca_key"], "-CAcreateserial",
                 "-out", p["cert"], "-days", "2", "-extfile", p["ext"]]):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed: {r.stderr.decode(errors='replace')[-1000:]}")
    return {"ca": p["ca"], "cert": p["cert"], "key": p["key"]}


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
        listen 127.0.0.1:{port}{ssl};
        root {root};{tls}
    }}
}}
"""


class Nginx:
    """The system's nginx serving the folder root over http://127.0.0.1:<free port> (or
    https:// with ``tls=`` a :func:`make_test_ca` dict), with nginx's defaults for
    keep-alive (keepalive_timeout 75 s, keepalive_requests 1000).  A context manager;
    ``endpoint``, ``url(key)``."""

    def __init__(self, root, tls=None):
        exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                              if os.access(p, os.X_OK)), None)
        if exe is None:
            raise RuntimeError("nginx is not installed (Debian: apt-get install nginx; scripts/setup.sh --full "
                               "installs it)")
        self.exe = exe
        self.root = os.path.realpath(root)
        self.tls = tls
        self.proc = None

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="fastq-nginx-")
        tls = "" if self.tls is None else (f"\n        ssl_certificate {self.tls['cert']};"
                                           f"\n        ssl_certificate_key {self.tls['key']};")
        err = ""
        for _attempt in range(5):
            self.port = free_port()
            conf = os.path.join(self.tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(_NGINX_CONF.format(tmp=self.tmp, port=self.port, root=self.root,
                                           ssl="" if self.tls is None else " ssl", tls=tls))
            self.proc = subprocess.Popen([self.exe, "-p", self.tmp, "-c", conf, "-e", os.path.join(self.tmp, "error.log")],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if _wait_port(self.proc, self.port, 10):
                scheme = "http" if self.tls is None else "https"
                self.endpoint = f"{scheme}://127.0.0.1:{self.port}"
                return self
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


class MotoServer:
    """moto's S3 server (``python -m moto.server``, package ``moto[server]``) on
    127.0.0.1:<free port> in a process of its own.  A context manager; ``endpoint``,
    ``env()`` (the AWS_* variables that point obstore at it, path-style, plain HTTP),
    ``storage_options()`` (the same as fastq's ``storage_options``) and
    ``upload(bucket, {key: local path})``."""

    REGION = "us-east-1"

    def __init__(self, start_timeout=60.0):
        import importlib.util
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("moto.server") is None:
            raise RuntimeError("moto's server is not installed (pip install 'moto[server]')")
        self.start_timeout = start_timeout
        self.proc = None

    def __enter__(self):
        for _attempt in range(5):
            self.port = free_port()
            # its log (a line per request) goes to a file: a pipe nobody reads would fill and
            # stop the server mid-run
            self.log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=self.log)
            if _wait_port(self.proc, self.port, self.start_timeout):
                self.endpoint = f"http://127.0.0.1:{self.port}"
                return self
            err = self._stop()
            if "Address already in use" not in err:
                break
        raise RuntimeError(f"moto's server did not start: {err.strip()[-2000:]}")

    def env(self):
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                "AWS_REGION": self.REGION, "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}

    def storage_options(self):
        return {"endpoint": self.endpoint, "region": self.REGION, "access_key_id": "k", "secret_access_key": "s",
                "virtual_hosted_style_request": "false", "allow_http": "true"}

    def upload(self, bucket, files):
        """Create the bucket (if new) and put each local file at its key ({key: path})."""
        import boto3
        s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.REGION, aws_access_key_id="k",
                          aws_secret_access_key="s")
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        for key, path in files.items():
            s3.upload_file(path, bucket, key)

    def _stop(self):
        err = ""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.log.seek(0)
            err = self.log.read()[-4000:].decode(errors="replace")
            self.log.close()
            self.proc = None
        return err

    def __exit__(self, *exc):
        self._stop()
