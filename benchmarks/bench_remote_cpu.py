"""Client CPU per image of single objects against local files, in one process, epochs interleaved:
the reference pipeline on local Files and on Files over s3:// from fastq's test server.

bench_remote.py keeps some twenty pipelines open side by side and measures each row once per
round, so a change of a few percent in one row drowns in the machine's drift between rows.
Here every round runs one timed epoch of each row back to back (an untimed epoch before each,
so that the row's next-epoch prefetch is its own), and the report is the median over rounds
of each row's CPU time per image (``getrusage`` of this process; the server runs in its own
process), its ratio to local Files, images per second and voluntary context switches per
image (the wake-ups the fetcher's threads cost).

Rows: local Files; Files over s3:// with fastq's HTTP client; with --obstore, the same with
obstore's; with --nginx / --https / --moto, Files from those servers (--https: fastq's client,
and obstore's with --obstore); with --gather, fastq's client once per value of ``Fetcher.GATHER_S`` (seconds
between two hand-overs of results to the fetcher's loop while they keep coming; 0: none, and
no requests queued in the pool beyond ``max_in_flight`` either: docs/cloud.md, "Wake-ups").  --max-bytes and --next-epoch-bytes set the remote rows' byte caps: with a cap
that binds, the fetch follows the decoding, as in an epoch much larger than the cap.

Usage:
  python benchmarks/bench_remote_cpu.py                          # 2000 images, 20 ms, 4 rounds
  python benchmarks/bench_remote_cpu.py --gather 0,0.005 --obstore
  python benchmarks/bench_remote_cpu.py --gather 0,0.005 --workers 1 --max-bytes 8 --next-epoch-bytes 0  # cap-bound
  python benchmarks/bench_remote_cpu.py --nginx --https --obstore   # http:// and https:// side by side
  python benchmarks/bench_remote_cpu.py --images 128 --rounds 1  # a check
"""
import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed_epoch(p):
    """(CPU µs per image, images per second, voluntary context switches per image, minor page
    faults per image) of one epoch."""
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    n = sum(images.shape[0] for images, _ in p)
    r1, dt = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return cpu / n * 1e6, n / dt, (r1.ru_nvcsw - r0.ru_nvcsw) / n, (r1.ru_minflt - r0.ru_minflt) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000, help="images per epoch (default 2000)")
    ap.add_argument("--latency", type=int, default=20, help="ms the server adds per request (default 20)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds; medians are reported (default 4)")
    ap.add_argument("--workers", type=int, default=2, help="fastq's workers (default 2)")
    ap.add_argument("--gather", default=None,
                    help="comma-separated Fetcher.GATHER_S values, one native row each (default: the built-in one)")
    ap.add_argument("--max-bytes", type=float, default=None, help="RemoteOptions.max_bytes in MiB (default: its default)")
    ap.add_argument("--next-epoch-bytes", type=float, default=None,
                    help="RemoteOptions.next_epoch_bytes in MiB (default: its default)")
    ap.add_argument("--obstore", action="store_true", help="add a row with obstore's client")
    ap.add_argument("--nginx", action="store_true",
                    help="add a row of fastq's client over http:// from the system's nginx (no latency added)")
    ap.add_argument("--moto", action="store_true",
                    help="add a row of fastq's client over s3:// from moto's server (no latency added; it closes "
                         "every connection after one answer)")
    ap.add_argument("--https", action="store_true",
                    help="add a row of fastq's client over https:// from nginx with a test CA's certificate (no "
                         "latency added), and one of obstore's with --obstore")
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench_data"))
    a = ap.parse_args(argv)
    import _checkout  # noqa: F401  (this checkout's fastq if built)
    import fastq
    from fastq.bench import generated_dataset
    from fastq.bench.objserver import ObjectServerProcess
    from fastq.bench.remote import BUCKET, prepare_data, storage_options
    from fastq.bench.tasks import REFERENCE
    from fastq.sources.fetch import Fetcher
    os.makedirs(a.data_dir, exist_ok=True)
    paths = generated_dataset(a.images, a.data_dir, progress=False)
    data = prepare_data(paths, 8, os.path.join(a.data_dir, f"remote_{a.images}_8"))
    urls = [f"s3://{BUCKET}/{k}" for k in data["keys"]["files"]]
    task = REFERENCE
    default_gather = getattr(Fetcher, "GATHER_S", 0.0)  # (a build before it: the rows alike)
    caps = {}
    if a.max_bytes is not None:
        caps["max_bytes"] = int(a.max_bytes * (1 << 20))
    if a.next_epoch_bytes is not None:
        caps["next_epoch_bytes"] = int(a.next_epoch_bytes * (1 << 20))
    gathers = [float(g) for g in a.gather.split(",")] if a.gather else [default_gather]

    def pipeline(src):
        return fastq.Pipeline(src, batch_size=task.batch, queue_size=4, workers=a.workers, ops=task.fastq_ops(),
                              dtype="float32", seed=0, shuffle=True, pin_memory=False)

    srv = ObjectServerProcess(data["root"], latency_ms=a.latency)
    srv.start()
    rows = {}
    ngx = moto = None
    servers = []  # more servers to stop
    try:
        so = storage_options(srv)
        rows["local Files"] = (pipeline(fastq.sources.Files(data["files"], data["labels"])), None)
        for g in gathers:
            rows[f"s3:// fastq's client, gather {g * 1e3:g} ms"] = (pipeline(fastq.sources.Files(
                urls, data["labels"], storage_options=so,
                remote=fastq.sources.RemoteOptions(http_client="native", **caps))), g)
        if a.obstore:
            rows["s3:// obstore"] = (pipeline(fastq.sources.Files(
                urls, data["labels"], storage_options=so,
                remote=fastq.sources.RemoteOptions(http_client="obstore", **caps))), default_gather)
        if a.nginx:
            from fastq.bench.servers import Nginx
            ngx = Nginx(data["root"]).__enter__()
            rows["http:// nginx, fastq's client"] = (pipeline(fastq.sources.Files(
                [ngx.url(f"{BUCKET}/{k}") for k in data["keys"]["files"]], data["labels"],
                remote=fastq.sources.RemoteOptions(http_client="native", **caps))), default_gather)
        if a.https:
            import tempfile
            from fastq.bench.servers import Nginx, make_test_ca
            tls = make_test_ca(os.path.join(tempfile.mkdtemp(prefix="fastq-ca-"), "ca"))
            ngx_tls = Nginx(data["root"], tls=tls).__enter__()
            servers.append(ngx_tls)
            for client in ("native", "obstore") if a.obstore else ("native",):
                who = "fastq's client" if client == "native" else "obstore"
                rows[f"https:// nginx, {who}"] = (pipeline(fastq.sources.Files(
                    [ngx_tls.url(f"{BUCKET}/{k}") for k in data["keys"]["files"]], data["labels"],
                    storage_options={"ca_file": tls["ca"]},
                    remote=fastq.sources.RemoteOptions(http_client=client, **caps))), default_gather)
        if a.moto:
            from fastq.bench.servers import MotoServer
            moto = MotoServer().__enter__()
            moto.upload(BUCKET, {k: os.path.join(data["root"], BUCKET, k) for k in data["keys"]["files"]})
            rows["s3:// moto, fastq's client"] = (pipeline(fastq.sources.Files(
                urls, data["labels"], storage_options=moto.storage_options(),
                remote=fastq.sources.RemoteOptions(http_client="native", **caps))), default_gather)
        res = {name: [] for name in rows}
        for name, (p, g) in rows.items():  # warm-up: connections, caches
            if g is not None:
                Fetcher.GATHER_S = g
            sum(images.shape[0] for images, _ in p)
        for _ in range(a.rounds):
            for name, (p, g) in rows.items():
                if g is not None:
                    Fetcher.GATHER_S = g
                sum(images.shape[0] for images, _ in p)  # untimed: this row's own prefetch ahead
                res[name].append(timed_epoch(p))
    finally:
        Fetcher.GATHER_S = default_gather
        for p, _ in rows.values():
            p.close()
        srv.stop()
        for server in [ngx, moto] + servers:
            if server is not None:
                server.__exit__(None, None, None)
    base = statistics.median(x[0] for x in res["local Files"])
    print(f"{a.images} images, fastq's server at {a.latency} ms, workers={a.workers}; "
          f"median of {a.rounds} interleaved rounds" + (f"; remote {caps}" if caps else ""))
    print(f"{'row':40s} {'CPU us/img':>10s} {'/local':>7s} {'img/s':>7s} {'vcsw/img':>9s} {'flt/img':>8s}"
          "  CPU per round")
    for name, v in res.items():
        cpu = statistics.median(x[0] for x in v)
        print(f"{name:40s} {cpu:10.0f} {cpu / base:7.3f} {statistics.median(x[1] for x in v):7.0f} "
              f"{statistics.median(x[2] for x in v):9.2f} {statistics.median(x[3] for x in v):8.1f}  "
              + " ".join(f"{x[0]:.0f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
