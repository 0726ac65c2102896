"""az:// URLs (issue 34), configured only by Azure's environment variables.

No Azure service or Azurite (a Node.js program) is reachable here, so fastq.bench.objserver
has a mode="azure" that answers the Blob service operations object_store's Azure client
makes (Get Blob, Get Blob Properties, List Blobs, Put Blob, Put Block / Put Block List),
written from Microsoft's REST reference, at the address of the Azurite emulator.  The
client is pointed at it the way a user points it at Azurite: ``AZURE_STORAGE_USE_EMULATOR``
and ``AZURITE_BLOB_STORAGE_URL``, with no AWS or Google variable set.  What this shows: the
``az://`` path through fastq (URL parsing, listing, ranged reads, ETag pinning, retries,
uploads) works with object_store's real Azure client and its shared-key signing; not that
every behaviour of Azure's service is covered.
"""
import json
import os

import pytest

import fastq
from fastq import errors

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from fastq.bench.objserver import ObjectServer  # noqa: E402
from test_sources_remote import N, check_faults_lose_nothing, class_tree, data, run, same, tfr  # noqa: E402,F401  (fixtures)


@pytest.fixture()
def azure(data, tmp_path, monkeypatch):
    srv = ObjectServer(dict(data["objects"]), mode="azure")
    srv.start()
    for k in list(os.environ):
        if k.startswith(("AWS_", "GOOGLE_", "S3_", "AZURE_", "AZURITE_")):
            monkeypatch.delenv(k)
    for k, v in srv.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path))  # a private remote-index cache
    yield srv
    srv.stop()


def az_urls(data):
    return [f"az://bk/img/{os.path.basename(p)}" for p in data["jpegs"]]


def test_az_files_shards_and_tfrecord_equal_local(data, tfr, azure):
    local, _ = run(fastq.sources.Files(data["jpegs"], data["labels"]))
    remote, st = run(fastq.sources.Files(az_urls(data), data["labels"]))
    assert same(local, remote) and st["remote"]["failures"] == 0 and st["remote"]["requests"] >= N
    for sb in (None, 7):
        local, _ = run(fastq.sources.WebDataset(data["shards"], shuffle_buffer=sb))
        remote, st = run(fastq.sources.WebDataset("az://bk/wds/shard-*.tar", shuffle_buffer=sb))  # a listing
        assert same(local, remote) and st["remote"]["failures"] == 0, sb
    paths, objects = tfr
    for k, v in objects.items():
        azure.store.put("bk", k.split("/", 1)[1], v)
    local, _ = run(fastq.sources.TFRecord(paths))
    remote, st = run(fastq.sources.TFRecord("az://bk/tfr/train-*-of-00003"))
    assert same(local, remote) and st["remote"]["requests"] < 2 * N  # ranged chunks
    assert azure.stats().get("get_range", 0) > 0 and azure.stats().get("list", 0) > 0


def test_az_folder_lists_classes(data, azure, tmp_path):
    root = class_tree(data["jpegs"], tmp_path / "tree")
    for p in sorted(root.rglob("*.jpg")):
        azure.store.put("bk", f"tree/{p.relative_to(root).as_posix()}", p.read_bytes())
    local = fastq.sources.Folder(str(root))
    remote = fastq.sources.Folder("az://bk/tree")
    assert remote.class_names == local.class_names == ["a", "b"]
    assert same(run(local)[0], run(remote)[0])


def test_az_faults_lose_nothing(data, azure):
    check_faults_lose_nothing(data, azure, az_urls(data))


def test_az_missing_and_denied_objects_are_named(data, azure):
    u = az_urls(data)
    u[4] = "az://bk/img/missing.jpg"
    with pytest.raises(errors.ReadError, match=r"sample 4, object 'az://bk/img/missing.jpg'.*not found \(404\)"):
        run(fastq.sources.Files(u, data["labels"]))
    azure.denied.add(f"bk/img/{os.path.basename(data['jpegs'][2])}")
    with pytest.raises(errors.ReadError, match=r"sample 2, object 'az://bk/img/.*permission denied \(403\)"):
        run(fastq.sources.Files(az_urls(data), data["labels"]))


def test_prepare_shards_to_az_with_sidecars(data, azure, tmp_path):
    """Uploads go through the same client (Put Blob; Put Block + Put Block List for a
    shard above obstore's multipart threshold): the uploaded shards are the local ones,
    and their sidecar indexes are read by index="sidecar"."""
    from fastq.prepare import prepare_shards
    root = class_tree(data["jpegs"], tmp_path / "tree")
    for fmt, ext, cls in (("tfrecord", "tfrecord", fastq.sources.TFRecord), ("tar", "tar", fastq.sources.WebDataset)):
        local = tmp_path / f"out-{fmt}"
        prepare_shards(str(root), str(local), fmt=fmt, shard_size=10, progress=False)
        prepare_shards(str(root), f"az://bk/prep-{fmt}/", fmt=fmt, shard_size=10, progress=False)
        names = sorted(n for n in os.listdir(local) if n.endswith("." + ext))
        assert len(names) == 3
        for n in names:
            assert azure.store.get("bk", f"prep-{fmt}/{n}").data == (local / n).read_bytes()
        manifest = json.loads(azure.store.get("bk", f"prep-{fmt}/fastq-prepare.json").data)
        assert manifest
        want, _ = run(cls(sorted(str(local / n) for n in names)))
        assert same(want, run(cls(f"az://bk/prep-{fmt}/data-*.{ext}", index="sidecar"))[0])
    # a large object goes up in blocks
    from fastq.sources.storage import Counters, RemoteOptions, put_file
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(12 << 20))
    puts = azure.stats().get("put", 0)
    put_file("az://bk/big.bin", str(big), None, RemoteOptions(), Counters())
    assert azure.stats()["put"] - puts > 2  # blocks and the block list
    assert azure.store.get("bk", "big.bin").data == big.read_bytes()


def test_server_against_microsofts_sdk(data, azure):
    """The server's Azure dialect checked with a client fastq did not write and that
    object_store does not share: Microsoft's azure-storage-blob SDK, through Azurite's
    well-known development account."""
    blob = pytest.importorskip("azure.storage.blob", reason="azure-storage-blob is part of requirements-dev.txt")
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};"
            f"BlobEndpoint={azure.endpoint}/devstoreaccount1;")
    cc = blob.BlobServiceClient.from_connection_string(conn, max_single_put_size=64 << 10,
                                                       max_block_size=64 << 10).get_container_client("bk")
    want = {k.split("/", 1)[1]: v for k, v in data["objects"].items() if k.startswith("bk/img/")}
    listed = {b.name: b.size for b in cc.list_blobs(name_starts_with="img/", results_per_page=7)}  # pages
    assert listed == {k: len(v) for k, v in want.items()}
    name = sorted(want)[3]
    assert cc.download_blob(name).readall() == want[name]
    assert cc.download_blob(name, offset=100, length=50).readall() == want[name][100:150]
    props = cc.get_blob_client(name).get_blob_properties()
    assert props.size == len(want[name]) and props.etag.strip('"') == azure.store.get("bk", name).etag.strip('"')
    body = os.urandom(300_000)
    cc.upload_blob("sdk/one", body[:1000])
    puts = azure.stats().get("put", 0)
    cc.upload_blob("sdk/blocks", body, max_concurrency=1, length=len(body))
    assert azure.stats()["put"] - puts == 6  # 5 blocks of 64 KiB or less, then the block list
    bc = blob.BlobClient.from_connection_string(conn, "bk", "sdk/staged")
    ids = []
    for i in range(3):
        ids.append(blob.BlobBlock(block_id=f"{i:04d}"))
        bc.stage_block(ids[-1].id, body[i * 100_000:(i + 1) * 100_000])
    bc.commit_block_list(ids)
    assert azure.store.get("bk", "sdk/one").data == body[:1000]
    assert azure.store.get("bk", "sdk/blocks").data == body
    assert azure.store.get("bk", "sdk/staged").data == body
    with pytest.raises(Exception, match="404|BlobNotFound|not exist"):
        cc.download_blob("img/missing.jpg").readall()
