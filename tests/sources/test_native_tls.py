"""https:// through fastq's own HTTP client (csrc/net/fq_tls.c: OpenSSL, the libssl of
Python's ssl module, loaded at run time), against Python's own TLS server (http.server
wrapped by ``ssl``, tests/helpers/plain_servers.py) with certificates made here by the
``openssl`` command:

* batches equal those of the same files read locally, for a DNS name (sent as SNI) and an
  address (no SNI), and for ``s3://`` at an ``https://`` endpoint, signed;
* bodies equal the files' bytes, whole and ranged, from 0 bytes to several TLS records;
* a certificate nobody trusts, or one for another name, is refused at once with OpenSSL's
  reason (not retried), and read when ``allow_invalid_certificates`` asks for it;
* a plain-HTTP server behind an https:// URL fails with the handshake named, and one that
  never answers the handshake fails after connect_timeout_s;
* without a usable OpenSSL, "auto" falls back to obstore and "native" says why.

(nginx over https:// is in test_sources_remote_servers.py, for both clients.)"""
import asyncio
import os
import shutil
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.bench import testdata

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from fastq.bench.servers import make_test_ca  # noqa: E402
from fastq.sources import nethttp  # noqa: E402
from helpers.plain_servers import StdlibServer  # noqa: E402

N = 12
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]
NATIVE = fastq.sources.RemoteOptions(http_client="native", timeout_s=10.0)

if nethttp.tls_version() is None:  # the machine's Python has no shared libssl (a static _ssl)
    pytest.skip(f"no OpenSSL for the native client: {nethttp.tls_unavailable()}", allow_module_level=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed (Debian: apt-get install openssl; scripts/setup.sh installs it)")
    d = tmp_path_factory.mktemp("tls")
    root = d / "root"
    jpegs = testdata.make_jpeg_dataset(str(root / "bk" / "img"), N, seed=3, min_side=40, max_side=80)
    labels = np.arange(N) % 5
    rng = np.random.default_rng(0)
    blobs = {"big.bin": rng.integers(0, 256, 3 * 1024 * 1024 + 17, dtype=np.uint8).tobytes(),
             "one.bin": b"\x07", "empty.bin": b""}
    for name, b in blobs.items():
        (root / "bk" / name).write_bytes(b)
    ca = make_test_ca(str(d / "ca"))
    # a certificate for another name, trusted as itself (self-signed)
    other = {"cert": str(d / "other.pem"), "key": str(d / "other.key")}
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", other["key"], "-out", other["cert"], "-days", "2", "-subj",
                        "/CN=other.test", "-addext", "subjectAltName=DNS:other.test"], capture_output=True)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    with fastq.Pipeline(fastq.sources.Files(jpegs, labels), batch_size=4, workers=2, seed=1, shuffle=True,
                        ops=CHAIN) as p:
        local = [tuple(np.array(a) for a in b) for b in p]
    return dict(root=str(root), jpegs=jpegs, labels=labels, blobs=blobs, ca=ca, other=other, local=local)


def batches(src):
    with fastq.Pipeline(src, batch_size=4, workers=2, seed=1, shuffle=True, ops=CHAIN) as p:
        out = [tuple(np.array(a) for a in b) for b in p]
        return out, p.stats()["remote"]


def same(a, b):
    return len(a) == len(b) and all(all((u == v).all() for u, v in zip(x, y)) for x, y in zip(a, b))


def urls(data, base):
    return [f"{base}/bk/img/{os.path.basename(p)}" for p in data["jpegs"]]


def first_batch(src):
    with fastq.Pipeline(src, batch_size=1, workers=1, ops=CHAIN) as p:
        next(iter(p))


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_files_over_https_equal_local(data, host):
    with StdlibServer(data["root"], tls=data["ca"]) as srv:
        base = f"https://{host}:{srv.port}"
        got, st = batches(fastq.sources.Files(urls(data, base), data["labels"], remote=NATIVE,
                                              storage_options={"ca_file": data["ca"]["ca"]}))
        assert st["http_client"] == "native"
        assert same(data["local"], got)
        assert st["failures"] == 0 and st["retries"] == 0
        # SNI carries a name, never an address (RFC 6066)
        assert set(srv.server_names) == ({"localhost"} if host == "localhost" else {None})


def test_bodies_bit_for_bit(data):
    """Whole and ranged GETs of objects of 0 bytes, 1 byte and 3 MB (about 200 TLS records:
    several reads and the wait for a body's rest) equal the files' bytes."""
    with open(data["ca"]["ca"]) as f:
        pem = f.read()
    with StdlibServer(data["root"], tls=data["ca"]) as srv:
        target, why = nethttp.native_target(f"https://localhost:{srv.port}", {}, {"root_certificate": pem})
        assert target is not None, why

        async def get(key, start=None, end=None):
            try:
                body, _, _ = await nethttp.get(target, types.SimpleNamespace(key=key), start, end, None, NATIVE,
                                               lambda msg, transient, status: RuntimeError(msg))
                return bytes(body)
            finally:
                nethttp.close_loop(asyncio.get_running_loop())

        for name, blob in data["blobs"].items():
            assert asyncio.run(get(f"bk/{name}")) == blob, name
        big = data["blobs"]["big.bin"]
        for a, b in ((0, 1), (5, 70000), (1 << 20, len(big))):
            assert asyncio.run(get("bk/big.bin", a, b)) == big[a:b], (a, b)
        # one request at a time: one connection, kept alive from the first to the last
        assert srv.server_names == ["localhost"] and srv.counts()["connections"] == 1


def test_s3_at_an_https_endpoint(data, monkeypatch):
    """A bucket at an https:// endpoint, signed with static keys, no allow_http: native."""
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ALLOW_HTTP", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    with StdlibServer(os.path.join(data["root"], "bk"), tls=data["ca"], bucket="bk") as srv:
        so = {"endpoint": f"https://localhost:{srv.port}", "access_key_id": "k", "secret_access_key": "s",
              "region": "us-east-1", "ca_file": data["ca"]["ca"]}
        keys = [f"s3://bk/img/{os.path.basename(p)}" for p in data["jpegs"]]
        got, st = batches(fastq.sources.Files(keys, data["labels"], remote=NATIVE, storage_options=so))
        assert st["http_client"] == "native"
        assert same(data["local"], got)
        assert srv.counts()["GET"] >= N


def test_closing_mid_epoch_over_tls_then_reading_on(data):
    """Pipelines closed after their first batch, with requests in flight on TLS connections
    (reset mid-read), five times; then an epoch on the same pool equals local."""
    with StdlibServer(data["root"], latency_s=0.02, tls=data["ca"]) as srv:
        base = f"https://localhost:{srv.port}"
        so = {"ca_file": data["ca"]["ca"]}
        for _ in range(5):
            src = fastq.sources.Files(urls(data, base) * 8, np.tile(data["labels"], 8), remote=NATIVE,
                                      storage_options=so)
            with fastq.Pipeline(src, batch_size=4, workers=2, seed=1, shuffle=True, ops=CHAIN) as p:
                next(iter(p))
        got, st = batches(fastq.sources.Files(urls(data, base), data["labels"], remote=NATIVE, storage_options=so))
        assert same(data["local"], got) and st["failures"] == 0


def test_certificates_refused_at_once(data):
    with StdlibServer(data["root"], tls=data["ca"]) as srv:
        url = urls(data, f"https://localhost:{srv.port}")[:1]
        opts = fastq.sources.RemoteOptions(http_client="native", retries=3, timeout_s=5.0)
        with pytest.raises(fastq.errors.ReadError, match=r"000000\.jpg.*certificate of localhost was refused: "
                                                         r"unable to get local issuer certificate") as ei:
            first_batch(fastq.sources.Files(url, [0], remote=opts))
        assert "attempts" not in str(ei.value)  # not transient: no retry
    with StdlibServer(data["root"], tls=data["other"]) as srv:  # trusted, but for other.test
        url = urls(data, f"https://localhost:{srv.port}")[:1]
        so = {"ca_file": data["other"]["cert"]}
        with pytest.raises(fastq.errors.ReadError, match=r"certificate of localhost was refused: hostname mismatch"):
            first_batch(fastq.sources.Files(url, [0], remote=opts, storage_options=so))
        # asked for: no check at all (the CA not given either)
        got, st = batches(fastq.sources.Files(urls(data, f"https://localhost:{srv.port}"), data["labels"],
                                              remote=NATIVE, storage_options={"allow_invalid_certificates": True}))
        assert st["http_client"] == "native" and same(data["local"], got)


def test_plain_http_behind_an_https_url(data):
    with StdlibServer(data["root"]) as srv:
        url = urls(data, f"https://127.0.0.1:{srv.port}")[:1]
        with pytest.raises(fastq.errors.ReadError, match=r"000000\.jpg.*TLS handshake with 127\.0\.0\.1: "):
            first_batch(fastq.sources.Files(url, [0], remote=fastq.sources.RemoteOptions(
                http_client="native", retries=0, timeout_s=5.0)))


def test_a_server_that_never_answers_the_handshake_times_out():
    """The handshake is part of connecting: connect_timeout_s bounds it as a whole."""
    import socket
    import time
    with socket.socket() as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(8)  # the kernel completes TCP's handshake; nobody answers TLS's
        url = f"https://127.0.0.1:{lsock.getsockname()[1]}/x.jpg"
        opts = fastq.sources.RemoteOptions(http_client="native", retries=0, connect_timeout_s=0.5, timeout_s=30.0)
        t0 = time.monotonic()
        with pytest.raises(fastq.errors.ReadError, match=r"TLS handshake with 127\.0\.0\.1 timed out after 0\.5 s"):
            first_batch(fastq.sources.Files([url], [0], remote=opts))
        assert time.monotonic() - t0 < 10  # not timeout_s (30 s) per read
        # closing the pipeline ends handshakes still waiting (connect_timeout_s 60 s here)
        opts = fastq.sources.RemoteOptions(http_client="native", retries=0, connect_timeout_s=60.0)
        p = fastq.Pipeline(fastq.sources.Files([url.replace("x.jpg", f"{i}.jpg") for i in range(16)], [0] * 16,
                                               remote=opts), batch_size=4, workers=1, ops=CHAIN)
        import threading
        errs = []

        def consume():
            try:
                next(iter(p))
            except Exception as e:  # noqa: BLE001 - whatever the close makes of it
                errs.append(e)
        th = threading.Thread(target=consume)
        th.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        p.close()
        th.join(20)
        assert not th.is_alive() and time.monotonic() - t0 < 10


def test_without_openssl_auto_falls_back_and_native_says_why(tmp_path):
    code = textwrap.dedent("""
        import fastq, pytest
        from fastq.sources import nethttp, storage
        nethttp._libssl_candidates = lambda: ["/nonexistent/libssl.so.3", "libc.so.6"]
        assert nethttp.tls_version() is None
        why = nethttp.tls_unavailable()
        assert "no usable OpenSSL" in why and "libc.so.6: no TLS_client_method" in why, why
        st = storage.get_store("https://127.0.0.1:9", None, fastq.sources.RemoteOptions())
        assert id(st) not in storage._NATIVE  # auto: obstore reads it
        with pytest.raises(ValueError, match="cannot read https://127.0.0.1:9.*no usable OpenSSL"):
            storage.get_store("https://127.0.0.1:9", None, fastq.sources.RemoteOptions(http_client="native"))
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
