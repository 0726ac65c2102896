"""ObjectServer, ObjectServerProcess, measure_raw_rate and the command line."""
import argparse
import dataclasses
import http.server
import os
import random
import socket
import sys
import threading
import time
import urllib.parse

from fastq.bench.objserver._faults import FAULT_KINDS, JOIN_TIMEOUT_S, Faults
from fastq.bench.objserver._handler import _Handler
from fastq.bench.objserver._store import _Store

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
                                         [os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
                                             os.path.abspath(__file__)))))] + sys.path)))
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

