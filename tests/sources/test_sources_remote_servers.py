"""Remote sources against object servers fastq did not write, each started here on
127.0.0.1: Python's own http.server (as a new user would write one: ThreadingHTTPServer
with its defaults, keep-alive, one thread per connection, a latency before each answer;
http:// and path-style s3://), nginx (http://, its default keep-alive) and moto's S3
server (in a process of its own, fastq.bench.servers), and nginx over https:// with a
test CA trusted through storage_options["ca_file"], read by both HTTP clients.  For each, three epochs of Files and
of WebDataset shards: the batches of the same data read locally, bit for bit; no gap between two batches longer than a second
beyond a batch's own fetch time; at most 5 % more requests than the objects (or shard
chunks) needed, plus one epoch's prefetch for the epoch after the last.

The stall these catch: the next epoch's fetcher adopted the previous epoch's prefetches
still in flight without counting them against max_in_flight, so an epoch began with up
to twice max_in_flight requests, the client opened that many new connections at once,
and Python's http.server (a listen backlog of 5) dropped the excess handshakes: TCP
retried them after 1, 3, 7... s, and epoch 1 waited 3-30 s for its second batch.  Whether
a dropped handshake lands on a request a batch waits for is chance; the server's count of
requests answered at once (at most max_in_flight) is not."""
import os
import time

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.bench import testdata

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from helpers.plain_servers import Nginx, StdlibServer  # noqa: E402

N = 384          # objects
PER_SHARD = 32   # samples per WebDataset shard
BATCH = 32
EPOCHS = 3
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]
# a stalled request fails after this and is retried (the default 30 s would only make a
# failing run slower: a stall is caught by the gap check, not by the timeout)
OPTS = fastq.sources.RemoteOptions(timeout_s=10.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from test_sources_webdataset import write_shards
    d = tmp_path_factory.mktemp("servers")
    root = d / "root"
    (root / "bk" / "wds").mkdir(parents=True)
    jpegs = testdata.make_jpeg_dataset(str(root / "bk" / "img"), N, seed=11, min_side=40, max_side=72)
    labels = (np.arange(N) * 7) % 10
    shards = write_shards(str(root / "bk" / "wds"), jpegs, labels, per=PER_SHARD)
    local_files = epochs(fastq.sources.Files(jpegs, labels))
    local_wds = epochs(fastq.sources.WebDataset(shards))
    return dict(root=str(root), jpegs=jpegs, labels=labels, shards=shards,
                local_files=local_files[0], local_wds=local_wds[0])


def epochs(src):
    """EPOCHS epochs of src: (batches, per epoch the seconds from its start to each batch,
    stats)."""
    out, times = [], []
    with fastq.Pipeline(src, batch_size=BATCH, workers=2, seed=1, shuffle=True, ops=CHAIN) as p:
        for _ in range(EPOCHS):
            t0 = time.monotonic()
            ts = []
            for b in p:
                ts.append(time.monotonic() - t0)
                out.append(tuple(np.array(a) for a in b))
            times.append(ts)
        return out, times, p.stats()


def same(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all((u == v).all() for u, v in zip(x, y))
                                    for x, y in zip(a, b))


def check(src, local, latency_s, needed_per_epoch, what, server=None):
    """Three epochs of the remote source src: the local batches, no stall, no request
    wasted (needed_per_epoch: the requests one epoch needs; None: as many as were planned)."""
    built = src._remote.counters.requests  # listing, HEADs, index downloads
    if server is not None:
        server.quiet()
    got, times, st = epochs(src)
    r = st["remote"]
    diag = f"{what}: batch times {[[round(t, 2) for t in ts] for ts in times]}, remote stats {r}" + \
           (f", server {server.counts()}" if server is not None else "")
    assert same(local, got), diag
    if server is not None:
        # the cause of the stall, seen by the server: never more than max_in_flight requests at once
        c = server.counts()
        assert c["max_concurrent"] <= OPTS.max_in_flight, diag
        # a pool's worth of connections, reused (some more: a request waiting for a handshake
        # takes a connection freed meanwhile, and the handshake's one joins the pool later);
        # a second pool's worth means the client opened connections it should not have needed
        assert c["connections"] < 2 * OPTS.max_in_flight, diag
    # a batch's own fetch: one request's latency (64 requests in flight cover a batch),
    # a second of slack for a loaded machine; a stalled handshake costs TCP's 1, 3, 7... s
    limit = 1.0 + 2 * latency_s
    for e, ts in enumerate(times):
        gaps = np.diff([0.0] + ts)
        worst = int(np.argmax(gaps))
        assert gaps[worst] <= limit, f"epoch {e}: {gaps[worst]:.2f} s before batch {worst} (limit {limit:.2f} s); {diag}"
    assert r["failures"] == 0 and r["requests_extra"] == 0, diag
    used = r["requests"] - built
    if needed_per_epoch is None:
        needed_per_epoch = r["requests_planned"]
    cap = 1.05 * EPOCHS * needed_per_epoch + needed_per_epoch  # + one epoch prefetched after the last
    assert used <= cap, f"{used} requests for {EPOCHS} x {needed_per_epoch} needed (at most {cap:.0f}); {diag}"
    return r


def check_both(data, file_url, shard_urls, latency_s, what, server=None):
    names = [os.path.basename(p) for p in data["jpegs"]]
    check(fastq.sources.Files([file_url(n) for n in names], data["labels"], remote=OPTS),
          data["local_files"], latency_s, N, f"{what} Files", server)
    # the chunks of shards one epoch reads: what the fetcher planned for it
    check(fastq.sources.WebDataset(shard_urls, remote=OPTS), data["local_wds"], latency_s, None,
          f"{what} WebDataset", server)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # a private remote-index cache


@pytest.mark.parametrize("latency_ms", [20, 50])
def test_python_http_server(data, home, latency_ms):
    """http:// from Python's ThreadingHTTPServer with its defaults (listen backlog 5)."""
    with StdlibServer(data["root"], latency_s=latency_ms / 1000) as srv:
        check_both(data, lambda n: srv.url(f"bk/img/{n}"),
                   [srv.url(f"bk/wds/{os.path.basename(p)}") for p in data["shards"]],
                   latency_ms / 1000, f"http.server {latency_ms} ms", srv)


def test_python_http_server_as_s3(data, home, monkeypatch):
    """s3:// (path-style, ListObjectsV2 for the shard pattern) from the same server at 50 ms."""
    with StdlibServer(os.path.join(data["root"], "bk"), latency_s=0.05, bucket="bk") as srv:
        for k, v in srv.s3_env().items():
            monkeypatch.setenv(k, v)
        check_both(data, lambda n: srv.url(f"img/{n}"), "s3://bk/wds/shard-*.tar", 0.05, "http.server s3 50 ms", srv)


def test_nginx(data, home):
    """http:// from nginx (Debian's package; its default keepalive_timeout and
    keepalive_requests), started here on a free port with a generated config."""
    with Nginx(data["root"]) as srv:
        check_both(data, lambda n: srv.url(f"bk/img/{n}"),
                   [srv.url(f"bk/wds/{os.path.basename(p)}") for p in data["shards"]], 0.0, "nginx")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    from fastq.bench.servers import make_test_ca
    return make_test_ca(str(tmp_path_factory.mktemp("ca")))


@pytest.mark.parametrize("client", ["native", "obstore"])
def test_nginx_https(data, home, tls, client):
    """https:// from nginx with a certificate of a CA made here, trusted through
    storage_options={"ca_file": ...}, read by either HTTP client; without the option the
    certificate is refused (the CA is trusted by that option, not by chance), and by the
    native client at once, with OpenSSL's reason (no retry can make it trusted)."""
    so = {"ca_file": tls["ca"]}
    opts = fastq.sources.RemoteOptions(timeout_s=10.0, http_client=client)
    with Nginx(data["root"], tls=tls) as srv:
        assert srv.endpoint.startswith("https://")
        names = [os.path.basename(p) for p in data["jpegs"]]
        st = check(fastq.sources.Files([srv.url(f"bk/img/{n}") for n in names], data["labels"], remote=opts,
                                       storage_options=so), data["local_files"], 0.0, N, f"nginx https Files {client}")
        assert st["http_client"] == client
        check(fastq.sources.WebDataset([srv.url(f"bk/wds/{os.path.basename(p)}") for p in data["shards"]],
                                       remote=opts, storage_options=so), data["local_wds"], 0.0, None,
              f"nginx https WebDataset {client}")
        if client == "native":
            why = r"000000\.jpg.*certificate of 127\.0\.0\.1 was refused: unable to get local issuer certificate"
            retries = 3  # not used: the refusal is not transient
        else:  # (obstore's message says only "error sending request": reqwest's TLS error is not in it)
            why, retries = r"000000\.jpg.*error sending request", 0
        with pytest.raises(fastq.errors.ReadError, match=why) as ei:
            src = fastq.sources.Files([srv.url(f"bk/img/{names[0]}")], [0], remote=fastq.sources.RemoteOptions(
                retries=retries, timeout_s=5.0, http_client=client))
            with fastq.Pipeline(src, batch_size=1, workers=1, ops=CHAIN) as p:
                next(iter(p))
        assert "attempts" not in str(ei.value)


def test_ca_file_must_hold_a_certificate(tmp_path):
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="no PEM certificate"):
        fastq.sources.Files(["https://127.0.0.1:9/x.jpg"], [0], storage_options={"ca_file": str(bad)})
    with pytest.raises(ValueError, match="ca_file"):
        fastq.sources.Files(["https://127.0.0.1:9/x.jpg"], [0], storage_options={"ca_file": str(tmp_path / "no")})


def test_moto_server(data, home, monkeypatch):
    """s3:// from moto's S3 server (werkzeug) in a process of its own (fastq.bench.servers,
    the starter fastq bench uses), objects uploaded with boto3."""
    pytest.importorskip("moto.server", reason="moto[server] is part of requirements-dev.txt")
    from fastq.bench.servers import MotoServer
    with MotoServer() as m:
        for k, v in m.env().items():
            monkeypatch.setenv(k, v)
        m.upload("fq-srv", {**{f"img/{os.path.basename(p)}": p for p in data["jpegs"]},
                            **{f"wds/{os.path.basename(p)}": p for p in data["shards"]}})
        check_both(data, lambda n: f"s3://fq-srv/img/{n}", "s3://fq-srv/wds/shard-*.tar", 0.0, "moto")
