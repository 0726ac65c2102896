"""``fastq bench --task remote`` (and benchmarks/bench_remote.py): the reference task read from
local files against the same data behind an S3-compatible server.

Data: the generated JPEGs of ``fastq bench`` (fastq.bench.testdata, seed 0), written once as
WebDataset tar shards (``NNNNNN.jpg`` + ``NNNNNN.cls``) and TFRecord shards (tf.train.Example:
image/encoded, image/class/label), and laid out for the server as
``<dir>/bucket/bench/{files,wds,tfrecord}/`` (hard links): ``s3://bench/files/<name>.jpg``,
``s3://bench/wds/train-NNNNNN.tar``, ``s3://bench/tfrecord/train-NNNNN-of-NNNNN.tfrecord``.

The server: :class:`fastq.bench.objserver.ObjectServerProcess`, one process per latency
(0, 20, 50 ms added before every answer), so its Python shares no GIL with the pipeline.

Rows (each its own pipeline in this process, reference task, ``workers`` workers, batch 64):

* local: ``fastq.sources.Files`` / ``WebDataset`` / ``TFRecord`` on the local files;
* per latency, fastq's remote sources (docs/cloud.md: ``Files(["s3://..."])``,
  ``WebDataset("s3://.../train-*.tar")``, ``TFRecord("s3://.../train-*.tfrecord")``, each with
  ``storage_options`` naming the server); a build without them prints
  "fastq remote sources not available in this build" and the run goes on;
* per latency, peers when installed: the ``webdataset`` library streaming the shards over HTTP
  (its own ``curl`` pipe) into ``fastq.sources.Stream``; a 32-thread ``urllib`` pool fetching
  single objects into ``Stream``; DALI's S3 file reader (``fn.readers.file(file_root="s3://...")``,
  CPU pipeline, ``AWS_ENDPOINT_URL`` set);
* servers fastq did not write, no latency added (:mod:`fastq.bench.servers`): nginx over
  ``http://`` and over ``https://`` (a certificate from a test CA made here, trusted with
  ``storage_options={"ca_file": ...}``), and moto's S3 server (its own process, objects uploaded
  with boto3) over ``s3://``; each serves ``Files`` and ``WebDataset``.  A server that is not
  installed is a skipped row that says so;
* per latency, and for nginx http:// and https:// and moto, ``Files`` again with the HTTP
  client that ``RemoteOptions(http_client="auto")`` does not pick for these servers (row
  "..., obstore client": "auto" reads them all with fastq's own client);
* per latency, ``Files`` over ``s3://`` again with ``RemoteOptions(event_loop="asyncio")`` (row "..., asyncio
  loop"), when uvloop is installed (the default loop then): the client CPU the event loop costs;
* per latency, the server's raw fetch rate: obstore async ``get_async``, 64 and 128 requests in
  flight, the best of the two, no decoding (:func:`fastq.bench.objserver.measure_raw_rate`).

Method: one warm-up epoch of each row, then ``rounds`` rounds, each running every row in turn
(load from elsewhere hits all alike): an untimed epoch, then the timed one; medians.  The
rows stay open side by side, and a row leaves work running when its epoch ends (its next
epoch's prefetches and their serving, its ring filling ahead); the untimed epoch lets that
end before the next row is timed.  Without it a remote Files row, whose prefetch serves
thousands of GETs, cost the WebDataset row timed after it several percent.  Ratios: remote / local (the same
form read locally: Files, WebDataset or TFRecord) and remote / min(local, raw rate): what is
left once the server's own limit is taken out.  For single objects also remote / shared bound,
1 / (1/local + 1/raw): the server runs on the same cores as the pipeline, so serving an object
(the raw rate uses every core) and decoding it (the local rate uses every core) add up; no
client can beat that on one machine.

Every row also reports the longest wait for a batch in its timed epochs, the remote source's
requests per image (every GET since the pipeline started over every image it yielded, so
an epoch's prefetch of the next one counts, and stays below one epoch), and this process's CPU time per
image (``getrusage``: the pipeline's workers and fetcher; every server runs in a process of
its own), also as a ratio to local Files in the same run.
"""
import io
import json
import os
import statistics
import sys
import tarfile
import time

from fastq.bench.tasks import REFERENCE

__all__ = ["LATENCIES", "NOT_AVAILABLE", "prepare_data", "run", "print_report", "main"]

LATENCIES = (0, 20, 50)
NOT_AVAILABLE = "fastq remote sources not available in this build"
BUCKET = "bench"
CLASSES = 10
IN_FLIGHT = (64, 128)
URLLIB_THREADS = 32
SHUFFLE_BUFFER = 1000  # shard rows: the streaming order's buffer (samples)
# the HTTP client of the extra rows: the one RemoteOptions(http_client="auto") does not use
# for plain-http:// servers (fastq.sources.storage.AUTO_NATIVE)
OTHER_CLIENT = "obstore"


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------

def _link(src, dst):
    if not os.path.exists(dst):
        try:
            os.link(src, dst)
        except OSError:
            import shutil
            shutil.copy(src, dst)


def prepare_data(paths, shards, d):
    """The local forms and the server's folder, built once in ``d`` -> dict(root, files, labels,
    wds, tfrecord: local paths; keys: the object keys of files / wds / tfrecord)."""
    from fastq.tfrecord_codec import encode_example, tfrecord_frame
    labels = [i % CLASSES for i in range(len(paths))]
    base = os.path.join(d, "bucket", BUCKET)
    out = {"root": os.path.join(d, "bucket"), "files": list(paths), "labels": labels}
    per = -(-len(paths) // shards)
    wds = [os.path.join(base, "wds", f"train-{s:06d}.tar") for s in range(shards)]
    tfr = [os.path.join(base, "tfrecord", f"train-{s:05d}-of-{shards:05d}.tfrecord") for s in range(shards)]
    done = os.path.join(d, "DONE")
    if not os.path.exists(done):
        for sub in ("files", "wds", "tfrecord"):
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        for p in paths:
            _link(p, os.path.join(base, "files", os.path.basename(p)))
        for s in range(shards):
            idx = range(s * per, min(len(paths), (s + 1) * per))
            with tarfile.open(wds[s], "w", format=tarfile.USTAR_FORMAT) as t:
                for i in idx:
                    t.add(paths[i], arcname=f"{i:06d}.jpg")
                    info = tarfile.TarInfo(f"{i:06d}.cls")
                    data = str(labels[i]).encode()
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
            with open(tfr[s], "wb") as w:
                for i in idx:
                    with open(paths[i], "rb") as f:
                        img = f.read()
                    w.write(tfrecord_frame(encode_example({"image/encoded": img, "image/format": b"jpeg",
                                                           "image/class/label": labels[i]})))
        open(done, "w").close()
    out["wds"], out["tfrecord"] = wds, tfr
    out["keys"] = {"files": [f"files/{os.path.basename(p)}" for p in paths],
                   "wds": [f"wds/{os.path.basename(p)}" for p in wds],
                   "tfrecord": [f"tfrecord/{os.path.basename(p)}" for p in tfr]}
    return out


# ---------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------

def _pipeline(src, workers, task, shuffle=True):
    """(run_epoch, close) of the reference task on a fastq source.  run_epoch() -> images;
    run_epoch.last: the largest gap between two batches of the last epoch (from its start to
    the first batch included, seconds), and the remote requests and images of every epoch so
    far (requests None: not a remote source).  Requests are counted from the pipeline's start,
    not per epoch: an epoch's prefetches of the next one are made inside it, so one epoch's
    window can hold fewer requests than its objects though none is ever skipped."""
    import fastq
    p = fastq.Pipeline(src, batch_size=task.batch, queue_size=4, workers=workers, ops=task.fastq_ops(),
                       dtype="float32", seed=0, shuffle=shuffle, pin_memory=False)

    def requests():
        r = p.stats().get("remote")
        return r["requests"] if r else None

    seen = [0]

    def run_epoch():
        n, gap = 0, 0.0
        t = time.perf_counter()
        for images, lab in p:
            now = time.perf_counter()
            gap, t = max(gap, now - t), now
            n += images.shape[0]
            del images, lab
        seen[0] += n
        run_epoch.last = {"max_gap_s": gap, "requests": requests(), "objects": seen[0]}
        return n
    run_epoch.last = {}
    return run_epoch, p.close


def storage_options(srv):
    """What fastq's remote sources get as ``storage_options`` (obstore's S3 config keys)."""
    return {"endpoint": srv.endpoint, "region": srv.region, "access_key_id": "fastq-test",
            "secret_access_key": "fastq-test-secret", "virtual_hosted_style_request": "false",
            "allow_http": "true"}


def fastq_remote_source(form, srv, data, remote=None):
    import fastq
    so = storage_options(srv)
    if form == "files":
        return fastq.sources.Files([f"s3://{BUCKET}/{k}" for k in data["keys"]["files"]], data["labels"],
                                   storage_options=so, remote=remote)
    if form == "wds":
        return fastq.sources.WebDataset(f"s3://{BUCKET}/wds/train-*.tar", shuffle_buffer=SHUFFLE_BUFFER,
                                        storage_options=so)
    return fastq.sources.TFRecord(f"s3://{BUCKET}/tfrecord/train-*.tfrecord", index=False,
                                  shuffle_buffer=SHUFFLE_BUFFER, storage_options=so)


class UrllibPool:
    """An iterable of (jpeg bytes, label): single objects fetched over HTTP by a pool of
    ``threads`` urllib threads, at most ``2 * threads`` ahead, in order."""

    def __init__(self, urls, labels, threads=URLLIB_THREADS):
        self.urls, self.labels, self.threads = urls, labels, threads

    def __iter__(self):
        import collections
        import urllib.request
        from concurrent.futures import ThreadPoolExecutor

        def fetch(u):
            with urllib.request.urlopen(u, timeout=60) as r:
                return r.read()
        with ThreadPoolExecutor(self.threads) as ex:
            window = collections.deque()
            it = iter(zip(self.urls, self.labels))
            for u, lab in it:
                window.append((ex.submit(fetch, u), lab))
                if len(window) >= 2 * self.threads:
                    break
            while window:
                fut, lab = window.popleft()
                nxt = next(it, None)
                if nxt is not None:
                    window.append((ex.submit(fetch, nxt[0]), nxt[1]))
                yield fut.result(), lab


class WdsStream:
    """An iterable of (jpeg bytes, label): the webdataset library reading the shards from
    http:// URLs (its gopen pipes them through curl)."""

    def __init__(self, urls):
        self.urls = urls

    def __iter__(self):
        import importlib
        wds = importlib.import_module("webdataset")  # (no type information: mypy leaves it alone)
        ds = wds.WebDataset(self.urls, shardshuffle=False, empty_check=False).to_tuple("jpg", "cls")
        for img, cls in ds:
            yield img, int(cls)


def dali_runner(srv, workers, task, n):
    """DALI's S3 file reader on s3://bench/files (class folders are not used: labels are 0)."""
    from nvidia.dali import fn, pipeline_def, types
    # AWS_ENDPOINT_URL reaches DALI's AWS SDK; AWS_ENDPOINT_URL_S3 is left out: obstore lets it
    # override a store's own endpoint, and fastq refuses that mix (storage.get_store) for the
    # rows at the other servers built after this one
    os.environ.update({k: v for k, v in srv.env().items() if k != "AWS_ENDPOINT_URL_S3"})

    @pipeline_def(batch_size=task.batch, num_threads=workers, device_id=None, seed=0)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=f"s3://{BUCKET}/files/", random_shuffle=True, name="r")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=task.size, resize_y=task.size)
        out = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                       mean=[m * 255 for m in (0.485, 0.456, 0.406)],
                                       std=[s * 255 for s in (0.229, 0.224, 0.225)],
                                       mirror=fn.random.coin_flip())
        return out, labels
    p = pipe()
    p.build()
    batches = n // task.batch

    def run_epoch():
        for _ in range(batches):
            p.run()
        return batches * task.batch
    return run_epoch, None


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------

def run(data, *, workers=2, rounds=3, latencies=LATENCIES, raw_seconds=2.0, other_servers=True, out=print):
    """Measure every row -> result dict (see print_report)."""
    from fastq import sources
    from fastq.bench.objserver import ObjectServerProcess, measure_raw_rate
    from fastq.sources.storage import loop_name
    task = REFERENCE
    n = len(data["files"])
    rows, skipped, raw, servers = {}, {}, {}, []

    def add(name, make, form, latency, kind, server="objserver"):
        try:
            runner = make()
        except Exception as e:  # noqa: BLE001  (a row that cannot be built is reported, not fatal)
            skipped[name] = f"{type(e).__name__}: {e}"
            return
        rows[name] = {"runner": runner, "form": form, "latency_ms": latency, "kind": kind, "runs": [], "cpu_us": [],
                      "gaps": [], "req_per_obj": [], "server": server}

    add("local Files", lambda: _pipeline(sources.Files(data["files"], data["labels"]), workers, task),
        "files", None, "objects", None)
    # shards in their streaming order (shard shuffle + a shuffle buffer), locally and remotely alike:
    # the order people train with from buckets (tf.data's interleave + shuffle, webdataset's)
    add("local WebDataset", lambda: _pipeline(sources.WebDataset(data["wds"], shuffle_buffer=SHUFFLE_BUFFER),
                                              workers, task), "wds", None, "shards", None)
    add("local TFRecord", lambda: _pipeline(sources.TFRecord(data["tfrecord"], index=False,
                                                             shuffle_buffer=SHUFFLE_BUFFER), workers, task),
        "tfrecord", None, "shards", None)
    import importlib.util
    have_wds = importlib.util.find_spec("webdataset") is not None
    if not have_wds:
        skipped["webdataset -> Stream"] = "the webdataset library is not installed (pip install webdataset)"
    try:
        import nvidia.dali  # noqa: F401
        have_dali = True
    except ImportError:
        have_dali = False
        skipped["DALI S3 file reader"] = "DALI is not installed (pip install nvidia-dali-cuda130)"
    try:
        for lat in latencies:
            srv = ObjectServerProcess(data["root"], latency_ms=lat)
            srv.start()
            servers.append(srv)
            best = None
            for k in IN_FLIGHT:
                r = measure_raw_rate(srv, BUCKET, data["keys"]["files"], in_flight=k, seconds=raw_seconds)
                raw.setdefault(lat, {})[k] = r["objects_per_s"]
                best = max(best or 0, r["objects_per_s"])
            raw[lat]["best"] = best
            out(f"server at {lat} ms: raw obstore fetch rate " + ", ".join(
                f"{raw[lat][k]:.0f}/s at {k} in flight" for k in IN_FLIGHT), flush=True)
            for form, label in (("files", "Files"), ("wds", "WebDataset"), ("tfrecord", "TFRecord")):
                name = f"fastq {label} s3 {lat} ms"
                add(name, lambda form=form, srv=srv: _pipeline(fastq_remote_source(form, srv, data), workers, task),
                    form, lat, "objects" if form == "files" else "shards")
                if name in skipped:
                    skipped[name] = f"{NOT_AVAILABLE} ({skipped[name]})"
            # Files through the HTTP client that "auto" does not pick for this server
            name = f"fastq Files s3 {lat} ms, {OTHER_CLIENT} client"
            add(name, lambda srv=srv: _pipeline(fastq_remote_source(
                "files", srv, data, remote=sources.RemoteOptions(http_client=OTHER_CLIENT)), workers, task),
                "files", lat, "objects")
            if loop_name() != "asyncio":  # Files on asyncio's own loop (without uvloop): the client CPU it costs
                name = f"fastq Files s3 {lat} ms, asyncio loop"
                add(name, lambda srv=srv: _pipeline(fastq_remote_source(
                    "files", srv, data, remote=sources.RemoteOptions(event_loop="asyncio")), workers, task),
                    "files", lat, "objects")
            if have_wds:
                urls = [f"{srv.endpoint}/{BUCKET}/{k}" for k in data["keys"]["wds"]]
                add(f"webdataset -> Stream {lat} ms",
                    lambda urls=urls: _pipeline(sources.Stream(WdsStream(urls)), workers, task, shuffle=False),
                    "wds", lat, "shards")
            urls = [f"{srv.endpoint}/{BUCKET}/{k}" for k in data["keys"]["files"]]
            add(f"urllib x{URLLIB_THREADS} -> Stream {lat} ms",
                lambda urls=urls: _pipeline(sources.Stream(UrllibPool(urls, data["labels"])), workers, task,
                                            shuffle=False), "files", lat, "objects")
            if have_dali:
                add(f"DALI S3 file reader {lat} ms", lambda srv=srv: dali_runner(srv, workers, task, n),
                    "files", lat, "objects")
        if other_servers:
            _other_servers(data, workers, task, add, skipped, servers, out)
        for name, r in list(rows.items()):  # warm-up (a row that fails here is reported, not fatal)
            try:
                r["runner"][0]()
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {str(e)[:300]}"
                skipped[name] = f"{NOT_AVAILABLE} ({msg})" if name.startswith("fastq ") and " s3 " in name else msg
                _close(rows.pop(name))
        for rd in range(rounds):
            for name, r in rows.items():
                # an untimed epoch first: the rows stay open side by side, and what the row
                # before left running (its next epoch's prefetches, its ring filling ahead, its
                # server's work) ends inside it, not inside this row's timed epoch; this row's
                # own work ahead (for the timed epoch) is done in it, as in training
                r["runner"][0]()
                c = _cpu_s()
                t = time.perf_counter()
                k = r["runner"][0]()
                r["runs"].append(k / (time.perf_counter() - t))
                r["cpu_us"].append((_cpu_s() - c) / k * 1e6)
                last = getattr(r["runner"][0], "last", {})
                if "max_gap_s" in last:
                    r["gaps"].append(last["max_gap_s"])
                if last.get("requests") is not None:
                    r["req_per_obj"].append(last["requests"] / last["objects"])
            out(f"round {rd + 1}: " + "  ".join(f"{k} {v['runs'][-1]:.0f}" for k, v in rows.items()), flush=True)
    finally:
        for r in rows.values():
            _close(r)
        for srv in servers:
            if hasattr(srv, "stop"):
                srv.stop()
            else:
                srv.__exit__(None, None, None)
    res = {"task": task.describe(), "images": n, "workers": workers, "rounds": rounds,
           "shards": len(data["wds"]), "latencies_ms": list(latencies), "raw_rate": raw, "skipped": skipped,
           "rows": {}}
    local = {r["form"]: statistics.median(r["runs"]) for name, r in rows.items() if r["latency_ms"] is None}
    for name, r in rows.items():
        med = statistics.median(r["runs"])
        row = {"images_per_s": med, "runs": r["runs"], "form": r["form"], "kind": r["kind"],
               "latency_ms": r["latency_ms"], "server": r["server"],
               "cpu_us_per_object": statistics.median(r["cpu_us"]),
               "max_gap_s": max(r["gaps"]) if r["gaps"] else None,
               "requests_per_object": statistics.median(r["req_per_obj"]) if r["req_per_obj"] else None}
        if "local Files" in rows and rows["local Files"]["cpu_us"]:
            row["cpu_ratio_local_files"] = row["cpu_us_per_object"] / statistics.median(rows["local Files"]["cpu_us"])
        if r["latency_ms"] is not None and r["form"] in local:
            row["ratio_local"] = med / local[r["form"]]
        if r["server"] == "objserver" and r["latency_ms"] in raw and r["form"] in local:
            row["ratio_bound"] = med / min(local[r["form"]], raw[r["latency_ms"]]["best"])
            if r["kind"] == "objects":  # (objserver rows: the raw rate is its own)
                # the server shares these cores: serving one object (the raw rate, measured alone,
                # uses all of them) and decoding one image (local, alone) add up, at best
                row["shared_bound"] = 1.0 / (1.0 / local[r["form"]] + 1.0 / raw[r["latency_ms"]]["best"])
                row["ratio_shared_bound"] = med / row["shared_bound"]
        res["rows"][name] = row
    return res


def _cpu_s():
    """CPU seconds this process has used (user + system, every thread: the pipeline's workers
    and fetcher; the servers run in processes of their own)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _other_servers(data, workers, task, add, skipped, servers, out):
    """Rows for servers fastq did not write (fastq.bench.servers), no latency added: nginx over
    http:// and over https:// (a test CA made here, trusted through storage_options' ca_file),
    and moto's S3 server over s3://, each serving Files and WebDataset.  A server that cannot
    start is a skipped row with the reason."""
    import tempfile
    from fastq import sources
    from fastq.bench import servers as sv
    wds_keys, file_keys = data["keys"]["wds"], data["keys"]["files"]

    def both(label, file_url, shard_urls, so, server):
        add(f"fastq Files {label}", lambda: _pipeline(sources.Files([file_url(k) for k in file_keys], data["labels"],
                                                                    storage_options=so), workers, task),
            "files", 0, "objects", server)
        # the same through the HTTP client "auto" does not pick (obstore's)
        add(f"fastq Files {label}, {OTHER_CLIENT} client", lambda: _pipeline(sources.Files(
            [file_url(k) for k in file_keys], data["labels"], storage_options=so,
            remote=sources.RemoteOptions(http_client=OTHER_CLIENT)), workers, task), "files", 0, "objects", server)
        add(f"fastq WebDataset {label}", lambda: _pipeline(sources.WebDataset(shard_urls, shuffle_buffer=SHUFFLE_BUFFER,
                                                                              storage_options=so), workers, task),
            "wds", 0, "shards", server)

    tmp = tempfile.mkdtemp(prefix="fastq-bench-servers-")
    for label, tls in (("nginx http", False), ("nginx https", True)):
        try:
            ngx = sv.Nginx(data["root"], tls=sv.make_test_ca(os.path.join(tmp, "ca")) if tls else None).__enter__()
        except Exception as e:  # noqa: BLE001  (reported as skipped rows)
            for f in ("Files", "WebDataset"):
                skipped[f"fastq {f} {label}"] = f"{type(e).__name__}: {e}"
            continue
        servers.append(ngx)
        so = {"ca_file": ngx.tls["ca"]} if tls else None
        both(label, lambda k, n=ngx: n.url(f"{BUCKET}/{k}"), [ngx.url(f"{BUCKET}/{k}") for k in wds_keys], so, label)
        out(f"{label} at {ngx.endpoint}", flush=True)
    try:
        moto = sv.MotoServer().__enter__()
    except Exception as e:  # noqa: BLE001
        for f in ("Files", "WebDataset"):
            skipped[f"fastq {f} moto s3"] = f"{type(e).__name__}: {e}"
        return
    servers.append(moto)
    t = time.perf_counter()
    moto.upload(BUCKET, {k: os.path.join(data["root"], BUCKET, k) for k in file_keys + wds_keys})
    out(f"moto s3 at {moto.endpoint} ({len(file_keys) + len(wds_keys)} objects uploaded in "
        f"{time.perf_counter() - t:.1f} s)", flush=True)
    both("moto s3", lambda k: f"s3://{BUCKET}/{k}", f"s3://{BUCKET}/wds/train-*.tar", moto.storage_options(),
         "moto s3")


def _close(r):
    close = r["runner"][1]
    if close:
        close()


def print_report(res, out=print):
    out(f"\n{res['task']}; {res['images']} images, {res['shards']} shards, workers={res['workers']}, "
        f"median of {res['rounds']} round(s)")
    out(f"{'row':34s} {'img/s':>8s} {'remote/local':>13s} {'remote/min(local,raw)':>22s} "
        f"{'remote/shared bound':>20s} {'max gap s':>10s} {'req/obj':>8s} {'CPU us/obj':>11s} {'/local Files':>13s}")
    for name, r in res["rows"].items():
        rl = f"{r['ratio_local']:.2f}" if "ratio_local" in r else ""
        rb = f"{r['ratio_bound']:.2f}" if "ratio_bound" in r else ""
        rs = f"{r['ratio_shared_bound']:.2f}" if "ratio_shared_bound" in r else ""
        gap = f"{r['max_gap_s']:.2f}" if r.get("max_gap_s") is not None else ""
        rpo = f"{r['requests_per_object']:.3f}" if r.get("requests_per_object") is not None else ""
        cpu = f"{r['cpu_us_per_object']:.0f}" if r.get("cpu_us_per_object") is not None else ""
        cr = f"{r['cpu_ratio_local_files']:.2f}" if r.get("cpu_ratio_local_files") is not None else ""
        out(f"{name:34s} {r['images_per_s']:8.0f} {rl:>13s} {rb:>22s} {rs:>20s} {gap:>10s} {rpo:>8s} {cpu:>11s} "
            f"{cr:>13s}")
    out("max gap: the longest wait for a batch in a timed epoch (its first batch included), over the rounds; "
        "req/obj: the remote source's GETs since the pipeline started per image yielded (prefetch ahead included); "
        "CPU: this process's user + system time per image (the servers run in processes of their own)")
    out("shared bound (single objects): 1 / (1/local + 1/raw), what both fit in when the server "
        "runs on the same cores as the decoding")
    for lat, r in res["raw_rate"].items():
        out(f"{'server raw rate ' + str(lat) + ' ms':34s} {r['best']:8.0f}   (obstore get_async, best of "
            + ", ".join(f"{r[k]:.0f} at {k}" for k in IN_FLIGHT) + " in flight; objects/s, no decoding)")
    for name, why in res["skipped"].items():
        out(f"{name:34s} {'-':>8s}   {why}")


def main(images=2000, rounds=3, workers=None, shards=8, latencies=LATENCIES, data_dir=None, json_path=None,
         raw_seconds=2.0, progress=True, other_servers=True, out=print):
    """The whole benchmark -> 0 (1 when no row could run)."""
    from fastq.bench import generated_dataset, usable_cores
    from fastq.bench.data import default_data_dir
    try:
        import obstore  # noqa: F401
    except ImportError:
        out("fastq bench --task remote needs obstore (the server's raw rate and fastq's remote sources): "
            "pip install obstore", file=sys.stderr)
        return 2
    workers = workers or min(2, usable_cores())
    data_dir = data_dir or default_data_dir()
    paths = generated_dataset(images, data_dir, progress=progress)
    data = prepare_data(paths, shards, os.path.join(data_dir, f"remote_{images}_{shards}"))
    res = run(data, workers=workers, rounds=rounds, latencies=latencies, raw_seconds=raw_seconds,
              other_servers=other_servers, out=out)
    print_report(res, out=out)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)
        out(f"wrote {json_path}")
    return 0 if res["rows"] else 1
