"""Object storage: the reference task from local files against the same data
behind an S3-compatible server at 0 / 20 / 50 ms per request, for shards and single objects.

A thin wrapper over ``fastq.bench.remote`` (the code behind ``fastq bench --task remote``;
its docstring says what each row runs).  Rows: local fastq Files / WebDataset / TFRecord;
per latency fastq's remote sources (``Files(["s3://..."])``, ``WebDataset("s3://.../*.tar")``,
``TFRecord("s3://.../*.tfrecord")`` with ``storage_options``, and Files again on asyncio's own
event loop when uvloop, the default one, is installed; a build without them prints
"fastq remote sources not available in this build" in that row), the webdataset library
streaming the shards into ``fastq.sources.Stream``, a 32-thread urllib pool into ``Stream``,
DALI's S3 file reader when DALI is installed, and the server's raw fetch rate (obstore async,
best of 64 and 128 in flight, no decoding).  The server (fastq.bench.objserver) runs in its own
process per latency.  Beside it, servers fastq did not write (fastq.bench.servers), no latency
added: nginx over http:// and https:// (a test CA, trusted with storage_options' ca_file) and
moto's S3 server, each serving Files and WebDataset.  Every row reports the longest wait for a
batch, remote requests per image and this process's CPU time per image (the servers run in
other processes), also as a ratio to local Files.  Medians of --rounds after a warm-up epoch; ratios remote / local,
remote / min(local, raw rate) and, for single objects, remote / (1 / (1/local + 1/raw)): the
bound when the server shares the cores with the decoding.

Usage:
  python benchmarks/bench_remote.py                      # 2000 images, 8 shards, 3 rounds, 0/20/50 ms
  python benchmarks/bench_remote.py --latencies 20 --rounds 5 --json remote.json
  python benchmarks/bench_remote.py --quick --json r.json  # 128 images, 1 round, 20 ms: checks that it runs
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=None, help="images per epoch (default 2000; --quick 128)")
    ap.add_argument("--shards", type=int, default=None, help="WebDataset / TFRecord shards (default 8; --quick 2)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (default 3)")
    ap.add_argument("--workers", type=int, default=None, help="fastq's workers (default min(2, cores))")
    ap.add_argument("--latencies", default="0,20,50", help="ms the server adds per request (default 0,20,50)")
    ap.add_argument("--raw-seconds", type=float, default=2.0,
                    help="seconds of each raw-rate measurement (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="a fast check: 128 images, 2 shards, 1 round, 20 ms only, 0.3 s raw rate")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"),
                    help="dataset cache (default <repo>/bench_data, gitignored)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    try:
        latencies = tuple(int(x) for x in a.latencies.split(",") if x.strip())
    except ValueError:
        ap.error(f"--latencies must be comma-separated integers (ms), got {a.latencies!r}")
    images, shards, rounds, raw_s = a.images or 2000, a.shards or 8, a.rounds, a.raw_seconds
    if a.quick:
        images, shards, rounds, raw_s = a.images or 128, a.shards or 2, 1, min(raw_s, 0.3)
        latencies = (20,) if a.latencies == "0,20,50" else latencies
    if images < 64 or shards < 1 or rounds < 1:
        ap.error("--images must be >= 64 (one batch), --shards and --rounds >= 1")

    import _checkout  # noqa: F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)
    from fastq.bench import remote
    os.makedirs(a.data_dir, exist_ok=True)
    return remote.main(images=images, rounds=rounds, workers=a.workers, shards=shards, latencies=latencies,
                       data_dir=a.data_dir, json_path=a.json, raw_seconds=raw_s, progress=False)


if __name__ == "__main__":
    sys.exit(main())
