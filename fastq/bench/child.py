"""The process one benchmark measurement runs in (started by
:func:`fastq.bench.runner.run_child`)::

    python -m fastq.bench.child PEER WORKERS CFG.json   # one peer: RESULT {json}
    python -m fastq.bench.child profile CFG.json        # the single-thread stage profile
    python -m fastq.bench.child feed FEEDER ROUND CFG.json  # the feed benchmark (fastq.bench.feed)

A peer runs a warm-up epoch, then the timed epochs, and prints one ``RESULT {json}``
line: images/s, CPU split, resident memory, the peer's info.
"""
import json
import sys
import time

from fastq.bench.data import TFRecordData
from fastq.bench.measure import cpu_delta, cpu_snapshot, proc_status_kb
from fastq.bench.peers import PEERS, base_peer
from fastq.bench.profile import profile_main
from fastq.bench.tasks import task_from_dict

__all__ = ["child_main", "main"]


def child_main(peer, workers, cfg_path):
    """One peer in this (fresh) process: warm-up epoch + timed epochs -> RESULT line."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    paths = TFRecordData(**cfg["tfrecord"]) if cfg.get("tfrecord") else cfg["paths"]
    task = task_from_dict(cfg["task"])
    base = base_peer(peer)
    _, fn, _, imports = PEERS[base]
    rss_start = proc_status_kb("VmRSS")
    for mod in imports:  # so that rss_import_kb is the frameworks' own share
        try:
            __import__(mod)
        except ImportError:
            pass
    rss_import = proc_status_kb("VmRSS")
    t = time.perf_counter()
    run_epoch, close, info = fn(paths, workers, task)
    setup_s = time.perf_counter() - t
    rss_built = proc_status_kb("VmRSS")  # imports + pipeline object, before any epoch
    settle = getattr(run_epoch, "settle", None)  # tears down an iterator after the clock (peers._batch_epochs)
    t = time.perf_counter()
    warm_n = run_epoch()
    warm_s = time.perf_counter() - t
    if settle is not None:
        settle()
    rates, counts, cpu = [], [], []
    for _ in range(cfg["epochs"]):
        c0 = cpu_snapshot()
        n = run_epoch()
        c1 = cpu_snapshot()
        if settle is not None:
            settle()
        d = cpu_delta(c0, c1)
        if n <= 0:
            raise RuntimeError(f"{peer}: an epoch delivered no images")
        rates.append(n / d["wall_s"])
        counts.append(n)
        d["cpu_us_per_image"] = d["own_cpu_s"] / n * 1e6
        cpu.append(d)
    out = {"peer": peer, "workers": workers, "rates": rates, "images_per_epoch": counts, "cpu": cpu,
           "warmup_rate": warm_n / warm_s, "setup_s": setup_s,
           "rss_start_kb": rss_start, "rss_import_kb": rss_import, "rss_built_kb": rss_built,
           "peak_rss_kb": proc_status_kb("VmHWM"), "info": info()}
    if close is not None:
        close()
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()


def main(argv):
    if len(argv) == 4 and argv[0] == "feed":  # fastq.bench.feed: FEEDER ROUND CFG
        from fastq.bench.feed import feed_child
        feed_child(argv[1], int(argv[2]), argv[3])
    elif len(argv) == 2 and argv[0] == "profile":
        profile_main(argv[1])
    elif len(argv) == 3:
        child_main(argv[0], int(argv[1]), argv[2])
    else:
        sys.exit("usage: python -m fastq.bench.child PEER WORKERS CFG.json | profile CFG.json | "
                 "feed FEEDER ROUND CFG.json")


if __name__ == "__main__":
    main(sys.argv[1:])
