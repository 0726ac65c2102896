"""fastq.bench.objserver, the S3-compatible test server of issue 34, checked against
independent clients and servers: boto3 and obstore must read and write it as they read S3,
moto's ThreadedMotoServer must list and serve the same objects the same way, and each
injected fault must reach the clients as the error it stands for (a reset as a connection
reset, a truncated body as an incomplete body, a stall as the client's timeout, dead as
a refused connection)."""
import datetime
import hashlib
import http.client
import random
import threading
import time
import urllib.error
import urllib.request

import pytest

from fastq.bench.objserver import Faults, ObjectServer, ObjectServerProcess, measure_raw_rate

boto3 = pytest.importorskip("boto3", reason="boto3 is the reference S3 client here (pip install boto3)")
obstore = pytest.importorskip("obstore", reason="obstore is fastq's S3 client for issue 34 (pip install obstore)")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from obstore.store import HTTPStore, S3Store  # noqa: E402

BUCKET = "bkt"


def make_objects(seed=0):
    """{key: bytes}: nested prefixes, a key with a space and a plus, an empty object, sizes 0-300 kB."""
    rng = random.Random(seed)
    keys = [f"train/class_{c}/img_{i:03d}.jpg" for c in range(3) for i in range(7)]
    keys += ["val/a.jpg", "val/b c+d.jpg", "shards/train-000000.tar", "shards/train-000001.tar", "top.txt",
             "empty.bin"]
    out = {}
    for k in keys:
        n = 0 if k == "empty.bin" else rng.choice([1, 17, 4096, 100_000, 300_001])
        out[k] = rng.randbytes(n)
    return out


OBJECTS = make_objects()


def etag(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


def boto(endpoint, **cfg):
    kw = dict(retries={"total_max_attempts": 1, "mode": "standard"}, s3={"addressing_style": "path"},
              connect_timeout=5, read_timeout=10)
    kw.update(cfg)
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                        region_name="us-east-1", config=Config(**kw))


def obstore_s3(srv, retries=0, timeout="10s"):
    return S3Store(BUCKET, **srv.obstore_config(timeout=timeout),
                   retry_config={"max_retries": retries, "retry_timeout": datetime.timedelta(seconds=30)})


@pytest.fixture
def server():
    srv = ObjectServer({f"{BUCKET}/{k}": v for k, v in OBJECTS.items()})
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def folder_server(tmp_path):
    for k, v in OBJECTS.items():
        p = tmp_path / BUCKET / k
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(v)
    (tmp_path / "other").mkdir()
    srv = ObjectServer(tmp_path)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def moto_endpoint():
    pytest.importorskip("moto.server", reason="the cross-check needs moto[server] (pip install 'moto[server]')")
    from moto.server import ThreadedMotoServer
    m = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    m.start()
    host, port = m.get_host_and_port()
    yield f"http://{host}:{port}"
    m.stop()


# ---------------------------------------------------------------------------
# boto3
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["memory", "folder"])
def test_boto3_get_head_and_ranges(which, server, folder_server):
    srv = server if which == "memory" else folder_server
    s3 = boto(srv.endpoint)
    for k, v in OBJECTS.items():
        r = s3.get_object(Bucket=BUCKET, Key=k)
        assert r["Body"].read() == v and r["ContentLength"] == len(v) and r["ETag"] == etag(v), k
        h = s3.head_object(Bucket=BUCKET, Key=k)
        assert h["ContentLength"] == len(v) and h["ETag"] == etag(v), k
        assert isinstance(h["LastModified"], datetime.datetime)
    k = "shards/train-000000.tar"
    v = OBJECTS[k]
    assert len(v) > 1000
    for spec, (a, b) in {"bytes=0-0": (0, 0), "bytes=10-99": (10, 99), f"bytes=100-{len(v) + 50}": (100, len(v) - 1),
                         "bytes=500-": (500, len(v) - 1), "bytes=-300": (len(v) - 300, len(v) - 1)}.items():
        r = s3.get_object(Bucket=BUCKET, Key=k, Range=spec)
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 206, spec
        assert r["Body"].read() == v[a:b + 1], spec
        assert r["ContentRange"] == f"bytes {a}-{b}/{len(v)}", spec
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key=k, Range=f"bytes={len(v)}-")
    assert e.value.response["Error"]["Code"] == "InvalidRange"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416


def test_boto3_errors(server):
    s3 = boto(server.endpoint)
    server.denied = {f"{BUCKET}/val/a.jpg"}
    cases = [(lambda: s3.get_object(Bucket=BUCKET, Key="nope.jpg"), 404, "NoSuchKey"),
             (lambda: s3.get_object(Bucket="nobucket", Key="a.jpg"), 404, "NoSuchBucket"),
             (lambda: s3.list_objects_v2(Bucket="nobucket"), 404, "NoSuchBucket"),
             (lambda: s3.get_object(Bucket=BUCKET, Key="val/a.jpg"), 403, "AccessDenied"),
             (lambda: s3.head_object(Bucket=BUCKET, Key="nope.jpg"), 404, "404"),  # HEAD: no body, no code
             (lambda: s3.head_object(Bucket=BUCKET, Key="val/a.jpg"), 403, "403"),
             (lambda: s3.put_object(Bucket=BUCKET, Key="val/a.jpg", Body=b"x"), 403, "AccessDenied")]
    for call, status, code in cases:
        with pytest.raises(ClientError) as e:
            call()
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
        assert e.value.response["Error"]["Code"] == code
    server.denied = set()  # changeable while serving
    assert s3.get_object(Bucket=BUCKET, Key="val/a.jpg")["Body"].read() == OBJECTS["val/a.jpg"]
    s = server.stats()
    assert s["status_404"] == 4 and s["status_403"] == 3 and s["denied"] == 3


def test_boto3_conditional_requests(server):
    s3 = boto(server.endpoint)
    k, v = "top.txt", OBJECTS["top.txt"]
    assert s3.get_object(Bucket=BUCKET, Key=k, IfMatch=etag(v))["Body"].read() == v
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key=k, IfMatch='"0123"')
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert e.value.response["Error"]["Code"] == "PreconditionFailed"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=BUCKET, Key=k, IfNoneMatch=etag(v))
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    assert s3.get_object(Bucket=BUCKET, Key=k, IfNoneMatch='"0123"')["Body"].read() == v
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=BUCKET, Key=k, IfMatch='"0123"')
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


@pytest.mark.parametrize("which", ["memory", "folder"])
def test_boto3_put_then_read_back(which, server, folder_server, tmp_path):
    srv = server if which == "memory" else folder_server
    s3 = boto(srv.endpoint)
    blob = random.Random(1).randbytes(2_500_001)
    r = s3.put_object(Bucket=BUCKET, Key="new/dir/blob.bin", Body=blob)
    assert r["ETag"] == etag(blob)
    assert s3.get_object(Bucket=BUCKET, Key="new/dir/blob.bin")["Body"].read() == blob
    # a file object: boto3 may stream it with its own chunked/checksum framing
    p = tmp_path / "up.bin"
    p.write_bytes(blob[:70_000])
    s3.upload_file(str(p), BUCKET, "new/up.bin")
    assert s3.get_object(Bucket=BUCKET, Key="new/up.bin")["Body"].read() == blob[:70_000]
    if which == "folder":
        assert (tmp_path / BUCKET / "new" / "dir" / "blob.bin").read_bytes() == blob
    s3.create_bucket(Bucket="made-here")
    s3.put_object(Bucket="made-here", Key="k", Body=b"v")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == sorted(
        [BUCKET, "made-here"] + (["other"] if which == "folder" else []))
    s3.delete_object(Bucket=BUCKET, Key="new/up.bin")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="new/up.bin")


def test_boto3_list_pagination_default_1000(server):
    """More than 1000 keys: one request gives 1000 (S3's default max-keys), the paginator all."""
    objs = {f"{BUCKET}/k/{i:05d}": b"%d" % i for i in range(2345)}
    with ObjectServer(objs) as srv:
        s3 = boto(srv.endpoint)
        r = s3.list_objects_v2(Bucket=BUCKET)
        assert r["KeyCount"] == 1000 and r["MaxKeys"] == 1000 and r["IsTruncated"] is True
        assert "NextContinuationToken" in r
        keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                for o in p["Contents"]]
        assert keys == sorted(k.partition("/")[2] for k in objs)
        assert srv.stats()["list"] == 4


def test_boto3_list_prefix_delimiter_pages(server):
    s3 = boto(server.endpoint)
    pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Delimiter="/",
                                                              PaginationConfig={"PageSize": 2}))
    keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
    prefixes = [c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]
    assert keys == ["empty.bin", "top.txt"] and prefixes == ["shards/", "train/", "val/"]
    assert len(pages) == 3 and all(p["KeyCount"] <= 2 for p in pages)
    r = s3.list_objects_v2(Bucket=BUCKET, Prefix="train/class_1/")
    assert [o["Key"] for o in r["Contents"]] == [f"train/class_1/img_{i:03d}.jpg" for i in range(7)]
    assert [o["Size"] for o in r["Contents"]] == [len(OBJECTS[o["Key"]]) for o in r["Contents"]]
    assert [o["ETag"] for o in r["Contents"]] == [etag(OBJECTS[o["Key"]]) for o in r["Contents"]]
    r = s3.list_objects_v2(Bucket=BUCKET, Prefix="val/")
    assert [o["Key"] for o in r["Contents"]] == ["val/a.jpg", "val/b c+d.jpg"]  # url-encoded on the wire
    r = s3.list_objects_v2(Bucket=BUCKET, Prefix="train/", Delimiter="/")
    assert [c["Prefix"] for c in r["CommonPrefixes"]] == [f"train/class_{c}/" for c in range(3)]
    assert "Contents" not in r
    r = s3.list_objects_v2(Bucket=BUCKET, StartAfter="train/class_2/img_005.jpg")
    assert [o["Key"] for o in r["Contents"]] == ["train/class_2/img_006.jpg", "val/a.jpg", "val/b c+d.jpg"]


def test_any_signature_is_accepted(server):
    """Wrong secret, SigV4 from a client that signs: still served (nothing is checked)."""
    s3 = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="who", aws_secret_access_key="wrong",
                      region_name="eu-west-3", config=Config(s3={"addressing_style": "path"}))
    assert s3.get_object(Bucket=BUCKET, Key="top.txt")["Body"].read() == OBJECTS["top.txt"]
    with urllib.request.urlopen(f"{server.endpoint}/{BUCKET}/top.txt", timeout=5) as r:  # no signature at all
        assert r.read() == OBJECTS["top.txt"]


# ---------------------------------------------------------------------------
# obstore (the client of fastq's remote sources)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["memory", "folder"])
def test_obstore_get_range_list_head_put(which, server, folder_server):
    srv = server if which == "memory" else folder_server
    st = obstore_s3(srv)
    k = "shards/train-000001.tar"
    v = OBJECTS[k]
    assert bytes(obstore.get(st, k).bytes()) == v
    assert bytes(obstore.get_range(st, k, start=3, end=4000)) == v[3:4000]
    assert bytes(obstore.get_range(st, k, start=len(v) - 10, length=10)) == v[-10:]
    got = obstore.get_ranges(st, k, starts=[0, 50, 900], ends=[10, 700, 1000])
    assert [bytes(b) for b in got] == [v[0:10], v[50:700], v[900:1000]]
    h = obstore.head(st, k)
    assert h["size"] == len(v) and h["e_tag"] == etag(v)
    listed = {o["path"]: o for batch in obstore.list(st) for o in batch}
    assert sorted(listed) == sorted(OBJECTS)
    assert all(listed[p]["size"] == len(OBJECTS[p]) and listed[p]["e_tag"] == etag(OBJECTS[p]) for p in listed)
    r = obstore.list_with_delimiter(st, "train")
    assert r["common_prefixes"] == ["train/class_0", "train/class_1", "train/class_2"] and r["objects"] == []
    r = obstore.list_with_delimiter(st)
    assert [o["path"] for o in r["objects"]] == ["empty.bin", "top.txt"]
    assert [o["path"] for o in obstore.list(st, prefix="val").collect()] == ["val/a.jpg", "val/b c+d.jpg"]
    obstore.put(st, "out/x.bin", b"written by obstore")
    assert bytes(obstore.get(st, "out/x.bin").bytes()) == b"written by obstore"
    with pytest.raises(obstore.exceptions.AlreadyExistsError):  # create-only: If-None-Match: * -> 412
        obstore.put(st, "out/x.bin", b"again", mode="create")
    with pytest.raises(FileNotFoundError):
        obstore.get(st, "nope")
    with pytest.raises(FileNotFoundError):
        obstore.head(st, "nope")


def test_obstore_errors_and_conditions(server):
    st = obstore_s3(server)
    server.denied = {f"{BUCKET}/val/a.jpg"}
    with pytest.raises(obstore.exceptions.PermissionDeniedError):
        obstore.get(st, "val/a.jpg")
    v = OBJECTS["top.txt"]
    assert bytes(obstore.get(st, "top.txt", options={"if_match": etag(v)}).bytes()) == v
    with pytest.raises(obstore.exceptions.PreconditionError):
        obstore.get(st, "top.txt", options={"if_match": '"deadbeef"'})
    with pytest.raises(obstore.exceptions.NotModifiedError):
        obstore.get(st, "top.txt", options={"if_none_match": etag(v)})


def test_obstore_and_boto3_from_env_alone(server, monkeypatch):
    """srv.env() is all a client needs: obstore and boto3 built with no endpoint argument."""
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    st = S3Store(BUCKET)
    assert bytes(obstore.get(st, "top.txt").bytes()) == OBJECTS["top.txt"]
    s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
    assert s3.get_object(Bucket=BUCKET, Key="top.txt")["Body"].read() == OBJECTS["top.txt"]


def test_plain_http_mode(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.bin").write_bytes(OBJECTS["shards/train-000000.tar"])
    v = OBJECTS["shards/train-000000.tar"]
    with ObjectServer(tmp_path, mode="http") as srv:
        url = srv.url(None, "d/f.bin")
        assert url == f"{srv.endpoint}/d/f.bin"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.read() == v and r.headers["ETag"] == etag(v)
        req = urllib.request.Request(url, headers={"Range": "bytes=5-9"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 206 and r.read() == v[5:10] and r.headers["Content-Range"] == f"bytes 5-9/{len(v)}"
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as r:
            assert r.headers["Content-Length"] == str(len(v)) and r.read() == b""
        st = HTTPStore.from_url(srv.endpoint, client_options={"allow_http": True})
        assert bytes(obstore.get_range(st, "d/f.bin", start=100, end=200)) == v[100:200]
        for path, status in (("d/", 404), ("nope", 404), ("d/../../etc/passwd", 404)):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"{srv.endpoint}/{path}", timeout=5)
            assert e.value.code == status, path
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="PUT"), timeout=5)
        assert e.value.code == 405


def test_folder_keys_cannot_escape_the_root(folder_server, tmp_path):
    (tmp_path / "secret.txt").write_bytes(b"outside the bucket")
    conn = http.client.HTTPConnection("127.0.0.1", folder_server.port, timeout=5)
    for path in (f"/{BUCKET}/../secret.txt", f"/{BUCKET}/%2e%2e/secret.txt", f"/{BUCKET}/train//x"):
        conn.request("GET", path)
        r = conn.getresponse()
        assert r.status == 404 and b"NoSuchKey" in r.read(), path
    conn.close()


# ---------------------------------------------------------------------------
# moto: the same objects, the same answers
# ---------------------------------------------------------------------------

def _listing(s3, **kw):
    pages = []
    for p in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, **kw):
        pages.append(([(o["Key"], o["Size"], o["ETag"]) for o in p.get("Contents", [])],
                      [c["Prefix"] for c in p.get("CommonPrefixes", [])], p["KeyCount"], p["IsTruncated"]))
    return pages


def test_same_answers_as_moto(server, moto_endpoint):
    mine, moto = boto(server.endpoint), boto(moto_endpoint)
    moto.create_bucket(Bucket=BUCKET)
    for k, v in OBJECTS.items():
        moto.put_object(Bucket=BUCKET, Key=k, Body=v)
    for kw in ({}, {"Delimiter": "/"}, {"Prefix": "train/"}, {"Prefix": "train/", "Delimiter": "/"},
               {"Prefix": "train/class_", "Delimiter": "/"}, {"Prefix": "val/"}, {"Prefix": "zzz"},
               {"PaginationConfig": {"PageSize": 4}}, {"Delimiter": "/", "PaginationConfig": {"PageSize": 2}},
               {"StartAfter": "train/class_1/img_003.jpg", "PaginationConfig": {"PageSize": 5}}):
        assert _listing(mine, **kw) == _listing(moto, **kw), kw
    for k, v in OBJECTS.items():
        a, b = mine.head_object(Bucket=BUCKET, Key=k), moto.head_object(Bucket=BUCKET, Key=k)
        assert (a["ContentLength"], a["ETag"]) == (b["ContentLength"], b["ETag"]) == (len(v), etag(v)), k
        for rng in ("bytes=0-0", "bytes=3-70000", "bytes=-5", "bytes=10-"):
            if len(v) <= 10:
                continue
            ra, rb = mine.get_object(Bucket=BUCKET, Key=k, Range=rng), moto.get_object(Bucket=BUCKET, Key=k, Range=rng)
            assert ra["Body"].read() == rb["Body"].read(), (k, rng)
            assert ra["ContentRange"] == rb["ContentRange"], (k, rng)
    for call in (lambda s: s.get_object(Bucket=BUCKET, Key="nope"), lambda s: s.get_object(Bucket="nob", Key="x"),
                 lambda s: s.get_object(Bucket=BUCKET, Key="top.txt", Range="bytes=999999-")):
        codes = []
        for s in (mine, moto):
            with pytest.raises(ClientError) as e:
                call(s)
            codes.append((e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]))
        assert codes[0] == codes[1]


# ---------------------------------------------------------------------------
# faults
# ---------------------------------------------------------------------------

N_FAULT = 300


def _fault_run(srv, n=N_FAULT):
    """n sequential GETs with boto3 (no retries): the error codes seen, in order."""
    s3 = boto(srv.endpoint)
    seen = []
    for i in range(n):
        try:
            s3.get_object(Bucket=BUCKET, Key="top.txt")["Body"].read()
            seen.append("ok")
        except ClientError as e:
            seen.append((e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]))
    return seen


@pytest.mark.parametrize("kind,status,code", [("slowdown", 503, "SlowDown"), ("error", 500, "InternalError")])
def test_error_faults_at_their_rate(kind, status, code):
    rate = 0.2
    objs = {f"{BUCKET}/top.txt": OBJECTS["top.txt"]}
    runs = []
    for seed in (7, 7, 8):
        with ObjectServer(objs, faults={kind + "_rate": rate}, seed=seed) as srv:
            seen = _fault_run(srv)
            stats = srv.stats()
        n_err = seen.count((status, code))
        assert n_err + seen.count("ok") == N_FAULT, set(seen)
        assert stats[f"fault_{kind}"] == n_err and stats["get"] == N_FAULT
        # binomial(300, 0.2): mean 60, sd 6.9 -> within 4.5 sd
        assert 29 <= n_err <= 91, n_err
        runs.append(seen)
    assert runs[0] == runs[1], "the same seed must give the same faults"
    assert runs[0] != runs[2], "another seed, other faults"


def test_obstore_retries_through_slowdowns():
    objs = {f"{BUCKET}/o{i}": OBJECTS["shards/train-000000.tar"] for i in range(20)}
    with ObjectServer(objs, faults=Faults(slowdown_rate=0.3), seed=3) as srv:
        st = obstore_s3(srv, retries=10)
        for i in range(20):
            assert bytes(obstore.get(st, f"o{i}").bytes()) == OBJECTS["shards/train-000000.tar"]
        s = srv.stats()
        assert s["fault_slowdown"] > 0 and s["get"] == 20 + s["fault_slowdown"]


def _raw_get(port, path, timeout=5.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_reset_is_a_connection_reset():
    v = OBJECTS["shards/train-000000.tar"]
    assert len(v) >= 100_000
    with ObjectServer({f"{BUCKET}/x": v}, faults={"reset_rate": 1.0}) as srv:
        with pytest.raises(ConnectionResetError):
            _raw_get(srv.port, f"/{BUCKET}/x")
        with pytest.raises(obstore.exceptions.GenericError, match="ConnectionReset"):
            obstore.get(obstore_s3(srv), "x").bytes()
        srv.set_faults(reset_rate=0.0)
        assert _raw_get(srv.port, f"/{BUCKET}/x") == (200, v)
        assert srv.stats()["fault_reset"] == 2


def test_truncated_body_is_an_incomplete_read():
    v = OBJECTS["shards/train-000000.tar"]
    with ObjectServer({f"{BUCKET}/x": v}, faults={"truncate_rate": 1.0}) as srv:
        with pytest.raises(http.client.IncompleteRead) as e:
            _raw_get(srv.port, f"/{BUCKET}/x")
        assert e.value.partial == v[:len(v) // 2] and e.value.expected == len(v) - len(v) // 2
        with pytest.raises(obstore.exceptions.GenericError, match="IncompleteBody"):
            obstore.get(obstore_s3(srv), "x").bytes()
        from botocore.exceptions import IncompleteReadError, ResponseStreamingError
        with pytest.raises((IncompleteReadError, ResponseStreamingError)):
            boto(srv.endpoint).get_object(Bucket=BUCKET, Key="x")["Body"].read()
        assert srv.stats()["fault_truncate"] == 3


def test_stall_hits_the_client_timeout_and_stop_ends_it():
    v = OBJECTS["shards/train-000000.tar"]
    with ObjectServer({f"{BUCKET}/x": v}, faults={"stall_rate": 1.0, "stall_s": 30}) as srv:
        t = time.monotonic()
        with pytest.raises(TimeoutError):
            _raw_get(srv.port, f"/{BUCKET}/x", timeout=0.5)
        assert 0.4 < time.monotonic() - t < 5
        t = time.monotonic()
        with pytest.raises(obstore.exceptions.GenericError, match="Timeout"):
            obstore.get(obstore_s3(srv, timeout="500ms"), "x").bytes()
        assert 0.4 < time.monotonic() - t < 5
        # a stall shorter than the client's patience only delays the answer
        srv.set_faults(stall_s=0.3)
        t = time.monotonic()
        assert _raw_get(srv.port, f"/{BUCKET}/x", timeout=5) == (200, v)
        assert time.monotonic() - t >= 0.3
        srv.set_faults(stall_s=30)
        seen = []

        def stalled():
            try:
                seen.append(_raw_get(srv.port, f"/{BUCKET}/x", 60))
            except (ConnectionError, http.client.HTTPException) as e:
                seen.append(e)
        th = threading.Thread(target=stalled, daemon=True)
        th.start()
        time.sleep(0.3)
        t = time.monotonic()
    assert time.monotonic() - t < 3, "stop() waited for a stall"
    th.join(5)
    assert len(seen) == 1 and isinstance(seen[0], (ConnectionError, http.client.IncompleteRead)), seen
    assert srv.stats()["fault_stall"] == 4


def test_dead_refuses_connections_then_comes_back():
    with ObjectServer({f"{BUCKET}/x": b"abc"}) as srv:
        port = srv.port
        assert _raw_get(port, f"/{BUCKET}/x") == (200, b"abc")
        srv.set_faults(dead=True)
        with pytest.raises(ConnectionRefusedError):
            _raw_get(port, f"/{BUCKET}/x")
        with pytest.raises(obstore.exceptions.GenericError, match="error sending request"):
            obstore.get(obstore_s3(srv), "x")
        srv.set_faults(dead=False)
        assert srv.port == port and _raw_get(port, f"/{BUCKET}/x") == (200, b"abc")


def test_latency_is_per_request_and_requests_overlap():
    objs = {f"{BUCKET}/o{i}": b"x" * 1000 for i in range(32)}
    with ObjectServer(objs, latency_ms=100) as srv:
        t = time.monotonic()
        for i in range(3):
            assert _raw_get(srv.port, f"/{BUCKET}/o{i}")[0] == 200
        assert time.monotonic() - t >= 0.3
        results = []
        threads = [threading.Thread(target=lambda i=i: results.append(_raw_get(srv.port, f"/{BUCKET}/o{i}")[0]))
                   for i in range(32)]
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        dt = time.monotonic() - t
        assert results == [200] * 32
        assert 0.1 <= dt < 1.6, f"32 requests of 100 ms took {dt:.2f} s: they did not overlap"
        srv.set_faults(latency_ms=0)
        t = time.monotonic()
        _raw_get(srv.port, f"/{BUCKET}/o0")
        assert time.monotonic() - t < 0.09


def test_faults_are_checked():
    with pytest.raises(ValueError, match="add up"):
        Faults(slowdown_rate=0.6, reset_rate=0.6)
    with pytest.raises(ValueError, match="stall_s"):
        Faults(stall_s=1e6)
    with pytest.raises(ValueError, match="unknown fields"):
        Faults.coerce({"slowdown": 0.1})
    with pytest.raises(ValueError, match="unknown ops"):
        Faults(ops=("get", "gets"))
    with pytest.raises(ValueError, match="mode"):
        ObjectServer({}, mode="ftp")
    with pytest.raises(FileNotFoundError):
        ObjectServer("/nonexistent/objserver/root")


def test_stop_joins_every_thread(no_leaked_threads):
    with ObjectServer({f"{BUCKET}/x": b"abc"}) as srv:
        s3 = boto(srv.endpoint)
        for _ in range(3):  # keep-alive connections stay open until stop()
            s3.get_object(Bucket=BUCKET, Key="x")["Body"].read()
        st = obstore_s3(srv)
        obstore.get(st, "x").bytes()
    assert srv.stats()["get"] == 4
    s3.close()
    del st


def test_raw_rate_and_the_server_process(tmp_path):
    """measure_raw_rate counts what obstore fetched; a server in its own process answers too."""
    v = OBJECTS["shards/train-000000.tar"]
    objs = {f"{BUCKET}/o{i}": v for i in range(8)}
    with ObjectServer(objs) as srv:
        r = measure_raw_rate(srv, BUCKET, [f"o{i}" for i in range(8)], in_flight=8, seconds=0.3)
        assert r["requests"] > 0 and r["MB_per_s"] == pytest.approx(r["objects_per_s"] * len(v) / 1e6)
        assert srv.stats()["get"] == r["requests"] + 8  # + one warm-up request per slot
    for k in objs:
        (tmp_path / k).parent.mkdir(exist_ok=True)
        (tmp_path / k).write_bytes(v)
    with ObjectServerProcess(tmp_path, latency_ms=1) as p:
        r = measure_raw_rate(p, BUCKET, ["o0", "o1"], in_flight=4, seconds=0.2, ranged=True)
        assert r["requests"] > 0
        line = p.stop()
    assert line.startswith("stopped;") and f"get {r['requests'] + 4}" in line


def test_the_benchmarks_storage_options_reach_the_server(server):
    """fastq.bench.remote hands fastq's remote sources these storage_options: they must be a
    working obstore S3 configuration on their own (no AWS_* variables needed)."""
    from fastq.bench.remote import storage_options
    st = S3Store(BUCKET, **storage_options(server))
    assert bytes(obstore.get(st, "top.txt").bytes()) == OBJECTS["top.txt"]
