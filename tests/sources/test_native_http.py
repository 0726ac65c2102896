"""fastq's own HTTP client over plain http:// (csrc/net, fastq/sources/nethttp.py; https:// in test_native_tls.py;
RemoteOptions.http_client) against servers it did not write (nginx, moto's S3 server,
Python's http.server with keep-alive, chunked and close-delimited answers) and against
fastq's object server with its faults: the batches of the same data read locally, bit for
bit; request counters equal to what the server saw; an object replaced mid-run fails as
"the object changed"; a 404 names the URL; connections the server closes (nginx's
keepalive_requests) lose nothing; a stalled server times out and is retried; closing with
requests in flight neither hangs nor leaks a thread.  SigV4 signatures equal botocore's."""
import asyncio
import http.server
import os
import re
import threading
import time
import types

import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from fastq.bench import servers as sv  # noqa: E402
from fastq.bench.objserver import Faults, ObjectServer  # noqa: E402
from fastq.sources import nethttp, storage  # noqa: E402

N = 24
NATIVE = fastq.sources.RemoteOptions(http_client="native", ramp=False)
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("nethttp")
    root = d / "root"
    jpegs = testdata.make_jpeg_dataset(str(root / "bk" / "img"), N, seed=5, min_side=48, max_side=96)
    labels = (np.arange(N) * 3) % 10
    objects = {}
    for p in jpegs:
        with open(p, "rb") as f:
            objects[f"bk/img/{os.path.basename(p)}"] = f.read()
    local = run(fastq.sources.Files(jpegs, labels))[0]
    return dict(root=str(root), jpegs=jpegs, labels=labels, objects=objects, local=local,
                keys=[f"bk/img/{os.path.basename(p)}" for p in jpegs])


@pytest.fixture()
def server(data, monkeypatch):
    srv = ObjectServer(dict(data["objects"]))
    srv.start()
    for k, v in srv.env().items():
        monkeypatch.setenv(k, v)
    yield srv
    srv.stop()


def run(src, epochs=2, **kw):
    with fastq.Pipeline(src, batch_size=6, workers=2, seed=1, shuffle=True, ops=CHAIN, **kw) as p:
        out = [tuple(np.array(a) for a in b) for _ in range(epochs) for b in p]
        return out, p.stats()


def same(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all((u == v).all() for u, v in zip(x, y))
                                    for x, y in zip(a, b))


def files(data, url, remote=NATIVE, **kw):
    return fastq.sources.Files([url(k) for k in data["keys"]], data["labels"], remote=remote, **kw)


# -- where it applies ----------------------------------------------------------------------

def test_option_is_checked_and_native_refuses_what_it_cannot_serve(monkeypatch):
    with pytest.raises(ValueError, match="http_client must be one of"):
        fastq.sources.RemoteOptions(http_client="curl")
    opts = fastq.sources.RemoteOptions(http_client="native")
    with pytest.raises(ValueError, match=r"cannot read https://127.0.0.1:9.*client options \['user_agent'\] are obs"):
        storage.get_store("https://127.0.0.1:9", {"client_options": {"user_agent": "x"}}, opts)
    with pytest.raises(ValueError, match=r"cannot read gs://bk: gs:// stores are read through obstore"):
        storage.get_store("gs://bk", {"skip_signature": "true"}, opts)
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    so = {"endpoint": "http://127.0.0.1:9", "allow_http": "true", "region": "us-east-1"}
    with pytest.raises(ValueError, match="credential chain"):
        storage.get_store("s3://bk", so, opts)
    with pytest.raises(ValueError, match="virtual-hosted"):
        storage.get_store("s3://bk", {**so, "skip_signature": "true", "virtual_hosted_style_request": "true"}, opts)
    with pytest.raises(ValueError, match="'request_payer' is obstore's"):
        storage.get_store("s3://bk", {**so, "skip_signature": "true", "request_payer": "true"}, opts)
    # auto: obstore wherever the native client does not apply, no error
    st = storage.get_store("s3://bk", so, fastq.sources.RemoteOptions())
    assert storage.http_client_of(st) == "obstore"
    st = storage.get_store("s3://bk", {**so, "access_key_id": "a", "secret_access_key": "b"}, opts)
    assert storage.http_client_of(st) == "native"
    st = storage.get_store("s3://bk", {**so, "access_key_id": "a", "secret_access_key": "b"},
                           fastq.sources.RemoteOptions(http_client="obstore"))
    assert storage.http_client_of(st) == "obstore"


def test_an_s3_endpoint_in_the_environment_that_obstore_would_prefer_is_refused(monkeypatch):
    """obstore lets AWS_ENDPOINT_URL_S3 replace the endpoint given to the store (checked here
    on obstore itself): the listing went to one server and fastq's own client to the other.
    get_store refuses the mix, naming both; agreeing values, and AWS_ENDPOINT_URL, pass."""
    import obstore
    import obstore.store
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    raw = obstore.store.from_url("s3://bk-env", endpoint="http://127.0.0.1:2", region="us-east-1", access_key_id="a",
                                 secret_access_key="b", client_options={"allow_http": True},
                                 retry_config={"max_retries": 0})
    with pytest.raises(Exception, match=r"http://127\.0\.0\.1:1/"):  # obstore: the environment's endpoint
        obstore.list(raw).collect()
    so = {"endpoint": "http://127.0.0.1:2", "allow_http": "true", "region": "us-east-1", "access_key_id": "a",
          "secret_access_key": "b"}
    for opts in (fastq.sources.RemoteOptions(), fastq.sources.RemoteOptions(http_client="obstore")):
        with pytest.raises(ValueError, match=r"endpoint='http://127\.0\.0\.1:2'.*AWS_ENDPOINT_URL_S3='http://127\.0\.0\.1:1'"):
            storage.get_store("s3://bk-env", so, opts)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2/")
    storage.get_store("s3://bk-env", so, fastq.sources.RemoteOptions())
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    raw = obstore.store.from_url("s3://bk-env", endpoint="http://127.0.0.1:2", region="us-east-1", access_key_id="a",
                                 secret_access_key="b", client_options={"allow_http": True},
                                 retry_config={"max_retries": 0})
    with pytest.raises(Exception, match=r"http://127\.0\.0\.1:2/"):  # the store's own endpoint wins
        obstore.list(raw).collect()
    storage.get_store("s3://bk-env", {**so, "skip_signature": "true"}, fastq.sources.RemoteOptions())
    # no endpoint in storage_options: both clients take AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    raw = obstore.store.from_url("s3://bk-env2", region="us-east-1", access_key_id="a", secret_access_key="b",
                                 client_options={"allow_http": True}, retry_config={"max_retries": 0})
    with pytest.raises(Exception, match=r"http://127\.0\.0\.1:2/"):
        obstore.list(raw).collect()
    bare = {k: v for k, v in so.items() if k != "endpoint"}
    st = storage.get_store("s3://bk-env2", bare, fastq.sources.RemoteOptions())
    assert storage.http_client_of(st) == "native" and storage._NATIVE[id(st)].port == 2


def test_sigv4_equals_botocore(monkeypatch):
    """The signature of a GET, with and without a session token, is botocore's."""
    import datetime
    botocore_auth = pytest.importorskip("botocore.auth", reason="boto3 (botocore) is part of requirements-dev.txt")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    for token in (None, "tok/en+="):
        t = nethttp.NativeTarget("127.0.0.1", 9000, "/bk", ("AKID", "se/cr+et", token), "eu-west-3")
        path = t.path("a b/c+d~\u00e9.jpg")[1]
        assert path == "/bk/a%20b/c%2Bd~%C3%A9.jpg"
        ours = dict(line.split(": ", 1) for line in t.sign(path).strip().split("\r\n"))
        fixed = datetime.datetime.strptime(ours["x-amz-date"], "%Y%m%dT%H%M%SZ")
        monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda *a, **k: fixed)
        req = AWSRequest(method="GET", url=f"http://127.0.0.1:9000{path}")
        botocore_auth.S3SigV4Auth(Credentials("AKID", "se/cr+et", token), "s3", "eu-west-3").add_auth(req)
        assert req.headers["Authorization"] == ours["Authorization"], token
        assert req.headers["X-Amz-Content-SHA256"] == ours["x-amz-content-sha256"]


# -- fastq's object server ---------------------------------------------------------------

def test_s3_signed_equal_local_counts_exact_and_reported(data, server):
    url = lambda k: f"s3://{k}"  # noqa: E731
    # no prefetch of a third epoch: one sent, or still waiting for a connection, when the
    # stats are read is a request the client counted and the server not yet
    out, st = run(files(data, url, remote=fastq.sources.RemoteOptions(http_client="native", next_epoch_bytes=0)))
    assert same(data["local"], out)
    r = st["remote"]
    assert r["http_client"] == "native" and r["failures"] == 0 and r["retries"] == 0
    # every GET the client counted reached the server, and no other
    assert r["requests"] == server.stats()["get"] >= 2 * N
    _, st = run(files(data, url, remote=fastq.sources.RemoteOptions(http_client="obstore", ramp=False)), epochs=1)
    assert st["remote"]["http_client"] == "obstore"


def test_faults_are_retried_and_counted(data, server):
    server.set_faults(slowdown_rate=0.1, error_rate=0.1, reset_rate=0.1, truncate_rate=0.1)
    # no prefetch of a third epoch: one still in flight when the stats are read would be a
    # fault the server counted and the client not yet
    opts = fastq.sources.RemoteOptions(http_client="native", next_epoch_bytes=0)
    out, st = run(files(data, lambda k: f"s3://{k}", remote=opts))
    assert same(data["local"], out)
    r, s = st["remote"], server.stats()
    faults = sum(s.get(f"fault_{k}", 0) for k in ("slowdown", "error", "reset", "truncate"))
    assert faults > 0 and r["failures"] == 0
    assert r["retries"] == faults and r["requests"] == s["get"], (r, s)


def test_replaced_object_fails_as_changed_and_404_names_the_url(data, server):
    src = files(data, lambda k: f"s3://{k}")
    run(src, epochs=1)
    key = data["keys"][4]
    server.store.put("bk", key.split("/", 1)[1], data["objects"][key] + b"\0")
    with pytest.raises(errors.ReadError, match=r"s3://bk/img/.*the object changed"):
        run(src, epochs=1)
    server.store.delete("bk", data["keys"][2].split("/", 1)[1])
    with pytest.raises(errors.ReadError, match=re.escape(f"s3://{data['keys'][2]}") + r".*not found \(404\)"):
        run(files(data, lambda k: f"s3://{k}"), epochs=1)


def test_stalled_server_times_out_and_is_retried(data, server):
    server.set_faults(stall_rate=0.25, stall_s=3.0)
    opts = fastq.sources.RemoteOptions(http_client="native", ramp=False, timeout_s=0.3, next_epoch_bytes=0)
    t = time.monotonic()
    out, st = run(files(data, lambda k: f"s3://{k}", remote=opts))
    assert same(data["local"], out) and time.monotonic() - t < 2.5
    stalls = server.stats().get("fault_stall", 0)
    assert stalls > 0 and st["remote"]["retries"] == stalls and st["remote"]["failures"] == 0


def test_close_with_requests_in_flight_neither_hangs_nor_leaks(data, server, no_leaked_threads):
    """A channel closed with requests waiting on a slow server, and a pool closed the same
    way, return at once; the pool's threads end."""
    server.set_faults(latency_ms=3000)
    target = storage._NATIVE[id(storage.get_store("s3://bk", None, NATIVE))]
    opts = types.SimpleNamespace(max_in_flight=8, connect_timeout_s=5.0, timeout_s=30.0)
    objs = [storage.ObjectInfo(f"s3://{k}", None, k.split("/", 1)[1]) for k in data["keys"]]

    async def main():
        tasks = [asyncio.ensure_future(nethttp.get(target, o, None, None, None, opts, RuntimeError)) for o in objs]
        await asyncio.sleep(0.3)
        t = time.monotonic()
        nethttp.close_loop(asyncio.get_running_loop())
        await asyncio.gather(*tasks, return_exceptions=True)
        return time.monotonic() - t, [x.cancelled() for x in tasks]
    took, cancelled = asyncio.run(main())
    assert took < 1.0 and all(cancelled)
    from fastq._native._core import HttpChannel, HttpPool
    pool = HttpPool("127.0.0.1", int(server.endpoint.rsplit(":", 1)[1]), "x", 4, 1.0, 30.0)
    ch = HttpChannel(pool)
    for i in range(10):
        ch.submit(i, f"/bk/{data['keys'][i].split('/', 1)[1]}".encode(), b"")
    time.sleep(0.3)
    t = time.monotonic()
    ch.close()
    pool.close()
    assert time.monotonic() - t < 1.0
    server.set_faults(latency_ms=0)


# -- servers fastq did not write -------------------------------------------------------------

def _nginx(root, monkeypatch, keepalive_requests=None):
    conf = sv._NGINX_CONF.replace("access_log off;", "access_log {tmp}/access.log;")
    if keepalive_requests:
        conf = conf.replace("sendfile on;", f"sendfile on;\n    keepalive_requests {keepalive_requests};")
    monkeypatch.setattr(sv, "_NGINX_CONF", conf)
    return sv.Nginx(root)


def _access_log_gets(ngx):
    with open(os.path.join(ngx.tmp, "access.log")) as f:
        return sum(1 for line in f if '"GET ' in line)


@pytest.mark.parametrize("keepalive_requests", [None, 3])
def test_nginx_http(data, monkeypatch, keepalive_requests):
    """nginx over http://: equal to local, every counted GET in nginx's log; with
    keepalive_requests 3 nginx closes each connection after its third answer, and the
    requests sent on a connection it just closed are sent again, unseen."""
    ngx = _nginx(data["root"], monkeypatch, keepalive_requests).__enter__()
    try:
        # no prefetch of a third epoch: a request still queued in the pool when the pipeline
        # closes is counted by the client and dropped unsent (test_s3_signed_equal_local...)
        out, st = run(files(data, ngx.url, remote=fastq.sources.RemoteOptions(
            http_client="native", ramp=False, next_epoch_bytes=0)))
        assert same(data["local"], out)
        r = st["remote"]
        assert r["http_client"] == "native" and r["failures"] == 0 and r["retries"] == 0
        time.sleep(0.1)  # (the log line is written after the answer)
        assert r["requests"] == _access_log_gets(ngx)
    finally:
        ngx.__exit__(None, None, None)


@pytest.mark.parametrize("server_kind,pause", [("nginx", 0.3), ("nginx", 0.8), ("http.server", 0.3),
                                               ("http.server", 0.8)])
def test_connections_closed_while_idle_are_replaced_unseen(data, monkeypatch, server_kind, pause):
    """The server closes pooled connections idle for 0.2 s (nginx's keepalive_timeout;
    http.server's handler timeout) without telling the client; after a pause, the next
    epoch's requests find them closed: a connection idle for over 0.5 s is checked before
    use, a request sent into one closed meanwhile is sent again on a new connection.
    Nothing lost, no retry counted, every counted GET answered once."""
    if server_kind == "nginx":
        conf = sv._NGINX_CONF.replace("sendfile on;", "sendfile on;\n    keepalive_timeout 200ms;")
        monkeypatch.setattr(sv, "_NGINX_CONF", conf)
        srv = _nginx(data["root"], monkeypatch).__enter__()
        gets = lambda: _access_log_gets(srv)  # noqa: E731
    else:
        from helpers.plain_servers import StdlibServer
        srv = StdlibServer(data["root"], idle_timeout_s=0.2).__enter__()
        gets = lambda: srv.counts().get("GET", 0)  # noqa: E731
    try:
        opts = fastq.sources.RemoteOptions(http_client="native", ramp=False, next_epoch_bytes=0)
        with fastq.Pipeline(files(data, srv.url, remote=opts), batch_size=6, workers=2, seed=1, shuffle=True, ops=CHAIN) as p:
            out = [tuple(np.array(a) for a in b) for b in p]
            time.sleep(pause)
            out += [tuple(np.array(a) for a in b) for b in p]
            st = p.stats()["remote"]
        assert same(data["local"], out)
        assert st["http_client"] == "native" and st["retries"] == 0 and st["failures"] == 0
        time.sleep(0.1)
        assert st["requests"] == gets()
    finally:
        srv.__exit__(None, None, None)


def test_nginx_ranged_reads_of_shards(data, monkeypatch, tmp_path):
    """WebDataset shards over http:// read in ranged GETs (chunk_bytes small): equal to local."""
    from test_sources_webdataset import write_shards
    d = tmp_path / "root"
    d.mkdir()
    shards = write_shards(str(d), data["jpegs"], data["labels"], per=8)
    local = run(fastq.sources.WebDataset(shards), epochs=1)[0]
    ngx = _nginx(str(d), monkeypatch, 2).__enter__()
    try:
        opts = fastq.sources.RemoteOptions(http_client="native", ramp=False, chunk_bytes=40_000, gap_bytes=0)
        src = fastq.sources.WebDataset([ngx.url(os.path.basename(p)) for p in shards], remote=opts,
                                       index_dir=str(tmp_path / "idx"))
        out, st = run(src, epochs=1)
        assert same(local, out) and st["remote"]["failures"] == 0 and st["remote"]["http_client"] == "native"
    finally:
        ngx.__exit__(None, None, None)


def test_moto_s3_signed(data, monkeypatch):
    moto = sv.MotoServer().__enter__()
    try:
        moto.upload("bkt", {k.split("/", 1)[1]: p for k, p in zip(data["keys"], data["jpegs"])})
        so = moto.storage_options()
        out, st = run(files(data, lambda k: f"s3://bkt/{k.split('/', 1)[1]}", storage_options=so), epochs=1)
        assert same(data["local"][:len(out)], out) and len(out) == -(-N // 6)
        assert st["remote"]["http_client"] == "native" and st["remote"]["failures"] == 0
    finally:
        moto.__exit__(None, None, None)


class _Odd(http.server.BaseHTTPRequestHandler):
    """http.server, keep-alive: /chunked/<n> answers n bytes in chunks, /close/<n> HTTP/1.0
    without a length (the body ends with the connection), /closes/<n> after 5 ms with
    "Connection: close", /len/<n> with Content-Length,
    /trickle/<n> and /drip/<n> n bytes one by one, 0.1 s / 0.4 s apart, /pieces/<n> in 8
    pieces 3 ms apart, /slow/<n> with Content-Length after 0.35 s."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        kind, n = self.path.strip("/").split("/")
        body = bytes(range(256)) * (int(n) // 256) + bytes(int(n) % 256)
        if kind == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 7000):
                part = body[i:i + 7000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: 1\r\n\r\n")
        elif kind in ("trickle", "drip"):  # the headers, then one byte of the body every 0.1 / 0.4 s
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.1 if kind == "trickle" else 0.4)
            except OSError:  # the client gave up
                self.close_connection = True
        elif kind == "pieces":  # Content-Length, the body in 8 pieces 3 ms apart
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            step = -(-len(body) // 8)
            for i in range(0, len(body), step):
                time.sleep(0.003)
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
        elif kind == "slow":  # Content-Length, after 0.35 s
            time.sleep(0.35)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif kind == "closes":  # HTTP/1.1, Connection: close (as moto's server), after 5 ms
            time.sleep(0.005)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        elif kind == "close":
            self.protocol_version = "HTTP/1.0"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"e1"')
            self.end_headers()
            self.wfile.write(body)


@pytest.fixture
def odd_target():
    """A NativeTarget of an http.server serving _Odd (its pool closed after the test)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    httpd.daemon_threads = True
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    target = nethttp.NativeTarget("127.0.0.1", httpd.server_address[1], "")
    try:
        yield target
    finally:
        if target.pool is not None:
            target.pool.close()
        httpd.shutdown()
        httpd.server_close()


def test_http_server_chunked_close_delimited_and_keep_alive(odd_target):
    target = odd_target
    opts = types.SimpleNamespace(max_in_flight=4, connect_timeout_s=5.0, timeout_s=10.0)

    async def main():
        try:
            return await asyncio.gather(*(nethttp.get(target, storage.ObjectInfo(k, None, k), None, None, None,
                                                      opts, RuntimeError)
                                          for k in ("chunked/100000", "close/70001", "len/5", "chunked/0",
                                                    "len/300000") * 3))
        finally:
            nethttp.close_loop(asyncio.get_running_loop())
    got = asyncio.run(main())
    for (body, size, etag), n in zip(got, (100000, 70001, 5, 0, 300000) * 3):
        want = bytes(range(256)) * (n // 256) + bytes(n % 256)
        assert bytes(body) == want
    assert got[2][1:] == (5, '"e1"')


def test_a_server_sending_a_byte_now_and_then_cannot_stretch_a_request_past_its_timeout(odd_target):
    """Each read waits at most what is left of the request's timeout_s: a body dripping in (a
    byte every 0.4 s, timeout_s 0.5) fails at about 0.5 s, not when the read after the
    deadline returns (0.8 s here; up to twice timeout_s)."""
    target = odd_target
    opts = types.SimpleNamespace(max_in_flight=1, connect_timeout_s=5.0, timeout_s=0.5)

    async def main():
        try:
            t = time.perf_counter()
            with pytest.raises(RuntimeError, match="timed out") as ei:
                await nethttp.get(target, storage.ObjectInfo("drip/50", None, "drip/50"), None, None, None,
                                  opts, RuntimeError)
            took = time.perf_counter() - t
            assert 0.45 <= took < 0.7, took  # bytes at 0.4 and 0.8 s: the second read is cut short
            assert ei.value.args[1] is True  # transient: fetch() retries it

            def get(key):
                return nethttp.get(target, storage.ObjectInfo(key, None, key), None, None, None, opts, RuntimeError)
            # one connection (max_in_flight=1): a request that ends well after lowering the
            # read timeout (3 bytes over 0.3 s), then one whose answer takes 0.35 s: the
            # read timeout is back at timeout_s (0.5 s) for it, not what the last one left
            for key, n in (("trickle/3", 3), ("slow/5", 5), ("trickle/3", 3), ("slow/5", 5)):
                body, size, _ = await get(key)
                assert bytes(body) == bytes(n) and size == n
        finally:
            nethttp.close_loop(asyncio.get_running_loop())
    asyncio.run(main())


def _switches(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        return int(next(ln for ln in f if ln.startswith("voluntary_ctxt_switches")).split()[1])


def test_a_body_arriving_in_pieces_wakes_the_pool_thread_once(odd_target):
    """The rest of a body that is not all there yet is waited for in one wake-up of the pool
    thread (SO_RCVLOWAT raised to what is left), not one per piece: 8 pieces 3 ms apart cost
    the thread about 3 switches per request (waiting for the request, for the headers, for
    the body), 8-9 without.  The bytes are all there, and the connection serves the
    next request (the mark was put back: a response read with it raised would wait)."""
    import select
    from fastq._native._core import HttpChannel, HttpPool
    pool = HttpPool("127.0.0.1", odd_target.port, "x", 1, 5.0, 10.0)
    ch = HttpChannel(pool)

    def one(path):
        ch.submit(0, path, b"")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            select.select([ch.fileno()], [], [], 1.0)
            got = ch.take()
            if got:
                return got[0]
        raise AssertionError(f"no answer to {path}")
    try:
        n = 400000
        want = bytes(range(256)) * (n // 256) + bytes(n % 256)
        r = one(b"/len/5")  # the pool's one thread and connection
        assert r[1] == 0 and r[2] == 200
        tid = [t for t in os.listdir("/proc/self/task")
               if open(f"/proc/self/task/{t}/comm").read().strip() == "fastq-http"][0]
        switches, k = 0, 6
        for _ in range(k):
            before = _switches(tid)
            r = one(b"/pieces/%d" % n)
            switches += _switches(tid) - before
            assert r[1] == 0 and r[2] == 200 and bytes(r[3]) == want
            r = one(b"/len/5")  # the next response is read at once (the mark is back at 1)
            assert r[1] == 0 and bytes(r[3]) == bytes(5)
        assert switches / k <= 5, f"{switches / k:.1f} switches of the pool thread per body in 8 pieces"
    finally:
        ch.close()
        pool.close()


def test_requests_are_served_in_order_at_a_server_that_closes_every_connection(odd_target):
    """A server that closes every connection (moto's S3 server does) makes every request
    wait for one of the pool's few new-connection slots (MAX_UNCONFIRMED).  Those go to the
    waiting workers first come, first served: the oldest requests, which a batch waits for,
    are not overtaken by the requests of workers that just finished one.  (Before, a freed
    slot went to whichever worker asked first, and at moto a batch waited up to a second
    for requests overtaken by hundreds of newer ones.)"""
    import select
    from fastq._native._core import HttpChannel, HttpPool
    pool = HttpPool("127.0.0.1", odd_target.port, "x", 64, 5.0, 10.0)
    ch = HttpChannel(pool)
    n = 240
    try:
        for i in range(n):
            ch.submit(i, b"/closes/100", b"")
        order = []
        deadline = time.monotonic() + 60
        while len(order) < n and time.monotonic() < deadline:
            select.select([ch.fileno()], [], [], 1.0)
            for r in ch.take():
                assert r[1] == 0 and r[2] == 200, r
                order.append(r[0])
    finally:
        ch.close()
        pool.close()
    assert sorted(order) == list(range(n))
    # 4 requests at a time (the slots) plus the workers' race to the FIFO: a request may finish
    # a few places out of turn, never dozens
    late = max(pos - rid for pos, rid in enumerate(order))
    assert late <= 16, f"request {order[int(np.argmax([p - r for p, r in enumerate(order)]))]} finished {late} places late"


@pytest.mark.parametrize("gather_s", [0.0, 0.5])
def test_results_gathered_into_fewer_wake_ups_lose_nothing(odd_target, monkeypatch, gather_s):
    """nethttp.gather_results (the fetcher's loop: fastq.sources.fetch.Fetcher.GATHER_S):
    while results keep coming, the loop collects them every gather_s instead of waking at
    each; after a quiet interval the first result wakes it again at once; close() cancels a
    collection that is due."""
    target = odd_target
    opts = types.SimpleNamespace(max_in_flight=8, connect_timeout_s=5.0, timeout_s=10.0)
    deliveries = []
    deliver = nethttp.Client._deliver

    def counted(self):
        got = deliver(self)
        if got:
            deliveries.append(time.monotonic())
        return got
    monkeypatch.setattr(nethttp.Client, "_deliver", counted)

    def one(n):
        return nethttp.get(target, storage.ObjectInfo(f"len/{n}", None, f"len/{n}"), None, None, None, opts,
                           RuntimeError)

    async def main():
        loop = asyncio.get_running_loop()
        nethttp.gather_results(loop, gather_s)
        try:
            tasks = []
            for i in range(30):  # a result about every 5 ms
                tasks.append(asyncio.ensure_future(one(1000 + i)))
                await asyncio.sleep(0.005)
            burst = await asyncio.gather(*tasks)
            await asyncio.sleep(1.2)  # quiet: the loop waits for the descriptor again
            t0 = time.monotonic()
            late = await asyncio.wait_for(one(77), 5)
            return burst, late, time.monotonic() - t0
        finally:
            client = target.clients[loop]
            nethttp.close_loop(loop)
            assert client.timer is None
    burst, late, waited = asyncio.run(main())
    for (body, size, _), i in zip(burst, range(30)):
        n = 1000 + i
        assert bytes(body) == bytes(range(256)) * (n // 256) + bytes(n % 256) and size == n
    assert bytes(late[0]) == bytes(77)  # (_Odd's body of n < 256 bytes: n zeros)
    assert waited < 0.3, waited  # woken by the result, not by a collection (0.5 s) after the quiet interval
    if gather_s:
        assert len(deliveries) <= 6, len(deliveries)  # 30 results over ~0.15 s, collected every 0.5 s
    else:
        assert len(deliveries) >= 20, len(deliveries)  # (the check above can fail: it is measured here)


def _pool_threads():
    n = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                n += f.read().strip() == "fastq-http"
        except OSError:
            pass
    return n


@pytest.mark.parametrize("client", ["native", "obstore"])
def test_native_results_gathered_with_requests_queued_in_the_pool(data, server, monkeypatch, client):
    """With fastq's client the fetcher gathers results (Fetcher.GATHER_S) and submits up to
    max_in_flight * (1 + QUEUED_EXTRA) requests, of which the pool runs at most max_in_flight
    (its threads); obstore gets max_in_flight at most and no gathering.  The batches equal
    local files' either way."""
    from fastq.sources.fetch import Fetcher
    busy, threads = [], []
    start = Fetcher._start

    def watched(self, r, est):
        start(self, r, est)
        busy.append(self._busy())
        if len(busy) % 8 == 0:
            threads.append(_pool_threads())
    monkeypatch.setattr(Fetcher, "_start", watched)
    for _ in range(30):  # other tests' pools end their threads after a second idle
        if _pool_threads() == 0:
            break
        time.sleep(0.1)
    others = _pool_threads()
    opts = fastq.sources.RemoteOptions(http_client=client, ramp=False, max_in_flight=4)
    out, st = run(files(data, lambda k: f"s3://{k}", remote=opts))
    assert same(data["local"], out)
    if client == "native":
        assert st["remote"]["result_gather_s"] == Fetcher.GATHER_S > 0
        assert 4 < max(busy) <= 4 + int(4 * Fetcher.QUEUED_EXTRA), max(busy)
        assert max(threads) <= 4 + others
    else:
        assert st["remote"]["result_gather_s"] == 0
        assert max(busy) <= 4
