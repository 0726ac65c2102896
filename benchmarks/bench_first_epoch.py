"""The first epoch of WebDataset shards in object storage that have no index yet: from the
source's construction to the end of its first epoch, time and bytes the server sent, for

* sidecar: ``WebDataset(urls, index=[...])`` with fastq's tar indexes (what ``fastq prepare``
  uploads): no shard is downloaded to be indexed;
* spool: no index, an empty index cache, no ``cache_dir`` (the default): each shard is
  downloaded once to be indexed and the first epoch reads that download (``RemoteOptions``
  ``first_epoch_spool=True``);
* no spool: the same with ``first_epoch_spool=False``: the first epoch fetches the shards again.

Reference task, streaming order (shuffle_buffer=1000), the server (fastq.bench.objserver) in
a process of its own, started afresh for every run so that its byte count is that run's.
Rows alternate within each round; medians of --rounds.  ``next_epoch_bytes=0`` by default, so
that the bytes counted are the first epoch's own (with the default prefetch, the second
epoch's first requests are fetched during the first: from the spool, when there is one).

Usage:
  python benchmarks/bench_first_epoch.py                 # 2000 images, 8 shards, 20 ms, 3 rounds
  python benchmarks/bench_first_epoch.py --latency 50 --rounds 5
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency", type=int, default=20, help="ms the server adds per request (default 20)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--next-epoch-bytes", type=int, default=0,
                    help="RemoteOptions.next_epoch_bytes (default 0: the bytes counted are the first epoch's "
                         "own, without the second epoch's prefetch; None is not accepted here)")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"))
    a = ap.parse_args(argv)

    import _checkout  # noqa: F401  (this checkout's fastq if built)
    import fastq
    from fastq.bench import generated_dataset, usable_cores
    from fastq.bench import remote as br
    from fastq.bench.objserver import ObjectServerProcess
    from fastq.bench.tasks import REFERENCE
    from fastq.sources.webdataset import tar_index_text
    workers = a.workers or min(2, usable_cores())
    os.makedirs(a.data_dir, exist_ok=True)
    paths = generated_dataset(a.images, a.data_dir, progress=False)
    data = br.prepare_data(paths, a.shards, os.path.join(a.data_dir, f"remote_{a.images}_{a.shards}"))
    total = sum(os.path.getsize(p) for p in data["wds"])
    tmp = tempfile.mkdtemp(prefix="fastq-first-epoch-")
    idx = []
    for p in data["wds"]:
        q = os.path.join(tmp, os.path.basename(p) + ".idx")
        with open(q, "w") as f:
            f.write(tar_index_text(p))
        idx.append(q)

    def one(kind, k):
        srv = ObjectServerProcess(data["root"], latency_ms=a.latency)
        srv.start()
        try:
            t = time.perf_counter()
            kw = dict(shuffle_buffer=br.SHUFFLE_BUFFER, storage_options=br.storage_options(srv),
                      index_dir=os.path.join(tmp, f"idx-{kind}-{k}"))
            ro = dict(next_epoch_bytes=a.next_epoch_bytes)
            if kind == "sidecar":
                kw["index"] = idx
            else:
                ro.update(first_epoch_spool=kind == "spool", spool_dir=os.path.join(tmp, "spool"))
            kw["remote"] = fastq.sources.RemoteOptions(**ro)
            src = fastq.sources.WebDataset(f"s3://{br.BUCKET}/wds/train-*.tar", **kw)
            built = time.perf_counter() - t
            run_epoch, close = br._pipeline(src, workers, REFERENCE)
            n = run_epoch()
            dt = time.perf_counter() - t
            close()
        finally:
            line = srv.stop()
        sent = int(line.split("bytes_sent ")[1].split(",")[0]) if "bytes_sent " in line else None
        return n / dt, built, sent

    rows = {k: [] for k in ("sidecar", "spool", "no spool")}
    for rd in range(a.rounds):
        for kind in rows:
            rows[kind].append(one(kind, rd))
        print(f"round {rd + 1}: " + "  ".join(f"{k} {v[-1][0]:.0f} img/s" for k, v in rows.items()), flush=True)
    ref = statistics.median(r[0] for r in rows["sidecar"])
    print(f"\n{REFERENCE.describe()}; {a.images} images, {a.shards} shards ({total / 1e6:.1f} MB), "
          f"{a.latency} ms, workers={workers}, median of {a.rounds}; construction + first epoch")
    print(f"{'row':10s} {'img/s':>7s} {'/sidecar':>9s} {'build s':>8s} {'bytes sent / shards':>20s}")
    for kind, rs in rows.items():
        v = statistics.median(r[0] for r in rs)
        b = statistics.median(r[1] for r in rs)
        s = [r[2] for r in rs if r[2] is not None]
        print(f"{kind:10s} {v:7.0f} {v / ref:9.2f} {b:8.2f} {statistics.median(s) / total if s else float('nan'):20.3f}")
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
