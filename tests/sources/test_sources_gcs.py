"""gs:// URLs (issue 34), configured only by Google's environment variables.

obstore (Rust's object_store) speaks GCS's XML API, which Google made interoperable with
S3's: objects at ``<base>/<bucket>/<key>``, ranged GETs with ``Range``, listings with
``?list-type=2``.  So an S3-compatible server that accepts a bearer token answers a GCS
client, and these tests run gs:// against two of them: fastq.bench.objserver (with its fault
injection) and moto's S3 server (an independent implementation).  The client is pointed
at them the way a user points it at an emulator or a private gateway: ``GOOGLE_BASE_URL``
and a credential (``GOOGLE_BEARER_TOKEN`` here), with no AWS variable set.

gcp-storage-emulator is not used: it serves GCS's JSON API only (no HEAD, no XML listing,
no Last-Modified on a GET), which object_store does not speak; every read fails against it.
"""
import os

import numpy as np
import pytest

import fastq
from fastq import errors

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from fastq.bench.objserver import ObjectServer  # noqa: E402
from test_sources_remote import N, check_faults_lose_nothing, class_tree, data, run, same, tfr  # noqa: E402,F401  (fixtures)


def _google_env(monkeypatch, tmp_path, base_url):
    for k in list(os.environ):
        if k.startswith(("AWS_", "GOOGLE_", "S3_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("GOOGLE_BASE_URL", base_url)
    monkeypatch.setenv("GOOGLE_BEARER_TOKEN", "fastq-test-token")
    monkeypatch.setenv("HOME", str(tmp_path))  # a private remote-index cache


@pytest.fixture()
def gcs(data, tmp_path, monkeypatch):
    srv = ObjectServer(dict(data["objects"]))
    srv.start()
    _google_env(monkeypatch, tmp_path, srv.endpoint)
    yield srv
    srv.stop()


def gs_urls(data):
    return [f"gs://bk/img/{os.path.basename(p)}" for p in data["jpegs"]]


def test_gs_files_shards_and_tfrecord_equal_local(data, tfr, gcs):
    local, _ = run(fastq.sources.Files(data["jpegs"], data["labels"]))
    remote, st = run(fastq.sources.Files(gs_urls(data), data["labels"]))
    assert same(local, remote) and st["remote"]["failures"] == 0 and st["remote"]["requests"] >= N
    local, _ = run(fastq.sources.WebDataset(data["shards"], shuffle_buffer=7))
    remote, st = run(fastq.sources.WebDataset("gs://bk/wds/shard-*.tar", shuffle_buffer=7))  # a listing
    assert same(local, remote) and st["remote"]["failures"] == 0
    paths, objects = tfr
    for k, v in objects.items():
        gcs.store.put("bk", k.split("/", 1)[1], v)
    local, _ = run(fastq.sources.TFRecord(paths))
    remote, st = run(fastq.sources.TFRecord("gs://bk/tfr/train-*-of-00003"))
    assert same(local, remote) and st["remote"]["requests"] < 2 * N  # ranged chunks


def test_gs_faults_lose_nothing(data, gcs):
    check_faults_lose_nothing(data, gcs, gs_urls(data))


def test_gs_missing_object_is_named(data, gcs):
    u = gs_urls(data)
    u[4] = "gs://bk/img/missing.jpg"
    with pytest.raises(errors.ReadError, match=r"sample 4, object 'gs://bk/img/missing.jpg'.*not found \(404\)"):
        run(fastq.sources.Files(u, data["labels"]))


def test_prepare_shards_to_gs(data, gcs, tmp_path):
    """Writing goes through the same client: shards uploaded to gs:// are the local ones."""
    from fastq.prepare import prepare_shards
    root = class_tree(data["jpegs"], tmp_path / "tree")
    local = tmp_path / "out"
    prepare_shards(str(root), str(local), fmt="tfrecord", shard_size=10, progress=False)
    prepare_shards(str(root), "gs://bk/prep/", fmt="tfrecord", shard_size=10, progress=False)
    names = sorted(n for n in os.listdir(local) if n.endswith(".tfrecord"))
    assert len(names) == 3
    for n in names:
        assert gcs.store.get("bk", f"prep/{n}").data == (local / n).read_bytes()
    want, _ = run(fastq.sources.TFRecord(sorted(str(local / n) for n in names)))
    assert same(want, run(fastq.sources.TFRecord("gs://bk/prep/data-*.tfrecord", index="sidecar"))[0])


def test_gs_against_moto(data, tmp_path, monkeypatch):
    """moto's S3 server, an implementation of the XML API that fastq did not write."""
    pytest.importorskip("moto.server", reason="moto[server] is part of requirements-dev.txt")
    import boto3
    from moto.server import ThreadedMotoServer
    m = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    m.start()
    try:
        host, port = m.get_host_and_port()
        s3 = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="k", aws_secret_access_key="s")
        s3.create_bucket(Bucket="fq-gs")
        for k, v in data["objects"].items():
            s3.put_object(Bucket="fq-gs", Key=k.split("/", 1)[1], Body=v)
        _google_env(monkeypatch, tmp_path, f"http://{host}:{port}")
        local, _ = run(fastq.sources.Files(data["jpegs"], data["labels"]))
        remote, _ = run(fastq.sources.Files([u.replace("gs://bk/", "gs://fq-gs/") for u in gs_urls(data)],
                                            data["labels"]))
        assert same(local, remote)
        local, _ = run(fastq.sources.WebDataset(data["shards"]))
        assert same(local, run(fastq.sources.WebDataset("gs://fq-gs/wds/shard-*.tar"))[0])
    finally:
        m.stop()


def test_https_base_url_is_not_downgraded(data, gcs, monkeypatch):
    """Only an http:// base URL turns plain HTTP on; storage_options may name it too."""
    from fastq.sources.storage import RemoteOptions, get_store
    monkeypatch.setenv("GOOGLE_BASE_URL", "https://storage.example.invalid")
    st = get_store("gs://bk", None, RemoteOptions())
    assert str(st.client_options.get("allow_http", False)).lower() == "false"
    st = get_store("gs://bk", {"base_url": gcs.endpoint}, RemoteOptions())
    assert str(st.client_options.get("allow_http")).lower() == "true"
    monkeypatch.setenv("GOOGLE_BASE_URL", gcs.endpoint)
    remote, _ = run(fastq.sources.Files(gs_urls(data)[:10], data["labels"][:10]))
    local, _ = run(fastq.sources.Files(data["jpegs"][:10], data["labels"][:10]))
    assert same(local, remote)
