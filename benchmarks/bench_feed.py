"""Feeding a training loop that shares the CPUs: fastq (default scheduling, normal
priority, nice 10) against tf.data (AUTOTUNE) and torch DataLoader, one run.

A thin wrapper over ``fastq.bench.feed`` (the code behind ``fastq bench --task feed``):
a synthetic trainer spends, per batch of the reference task, C ms of CPU holding the GIL
("kernel launches") and D ms on a simulated device (a thread that sleeps without the GIL,
at most --run-ahead steps behind the trainer; the batch is dropped when its simulated
copy is done).  Per setting and feeder it prints images/s fed, the ideal
min(trainer alone, feeder alone x (cores - C/max(C, D)) / cores) and their ratio,
medians of the rounds, each feeder in a fresh process per round.  What this script
adds: the dataset cached in <repo>/bench_data, and --reference-check, which also runs
``fastq bench``'s reference task with fastq's default worker_priority ("background")
against "normal", alternated in the same run (the target: >= 0.98).

Usage:
  python benchmarks/bench_feed.py                       # 2000 images, 3 rounds, all feeders
  python benchmarks/bench_feed.py --rounds 5 --reference-check --json feed.json
  python benchmarks/bench_feed.py --feeders fastq,fastq_normal --settings "launch=45:50,gpu=2:40"
  python benchmarks/bench_feed.py --quick                # 512 images, 1 round: checks that it runs
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq import bench  # noqa: E402
from fastq.bench import feed  # noqa: E402

REFERENCE_TARGET = 0.98  # target: the reference task alone keeps >= 0.98 of its rate under the new defaults


def reference_check(paths, rounds, workers, timeout, out=print):
    """fastq bench's reference task: fastq (default worker_priority) vs fastq_normal,
    each round in fresh processes, rotated order -> (ratio, result dict)."""
    res = bench.run(paths, task="reference", peers=["fastq", "fastq_normal"], workers=workers, rounds=rounds,
                    timeout=timeout, progress=False, out=out, data_description="fastq.bench.testdata, seed 0")
    bench.print_report(res, out=out)
    p = res["peers"]
    ratio = (p["fastq"]["images_per_s"] / p["fastq_normal"]["images_per_s"]
             if "fastq" in p and "fastq_normal" in p else None)
    if ratio is not None:
        out(f"reference task alone, worker_priority background / normal: {ratio:.3f} "
            f"(target >= {REFERENCE_TARGET}: {'met' if ratio >= REFERENCE_TARGET else 'MISSED'})")
    return ratio, res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=2000, help="images per epoch (default 2000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (default 3)")
    ap.add_argument("--feeders", default=",".join(feed.DEFAULT_FEEDERS),
                    help=f"comma-separated subset of {','.join(feed.FEEDERS)} (default: "
                         f"{','.join(feed.DEFAULT_FEEDERS)})")
    ap.add_argument("--settings", default=None,
                    help="C:D or NAME=C:D, comma-separated, in ms per batch (default: " +
                         ",".join(f"{s.name}={s.launch_ms:g}:{s.device_ms:g}" for s in feed.DEFAULT_SETTINGS) + ")")
    ap.add_argument("--run-ahead", type=int, default=feed.RUN_AHEAD,
                    help=f"steps the trainer may queue ahead of the device (default {feed.RUN_AHEAD})")
    ap.add_argument("--copy-gbps", type=float, default=feed.COPY_GBPS,
                    help=f"simulated host-to-device bandwidth (default {feed.COPY_GBPS:g} GB/s)")
    ap.add_argument("--workers", type=int, default=None,
                    help="fastq's workers (default: its own default) and tf.data / DataLoader's (default: cores)")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: the reference task's 64)")
    ap.add_argument("--reference-check", action="store_true",
                    help="also: the reference task alone, worker_priority background vs normal, same run")
    ap.add_argument("--quick", action="store_true", help="a fast check: 512 images (unless --images), 1 round")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"),
                    help="dataset cache (default <repo>/bench_data, gitignored)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed per feeder process")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds = 1
        if "--images" not in (argv if argv is not None else sys.argv[1:]):
            a.images = 512
    try:
        settings = feed.parse_settings(a.settings) if a.settings else feed.DEFAULT_SETTINGS
        paths = bench.generated_dataset(a.images, a.data_dir, progress=False)
        res = feed.run(paths, feeders=[f for f in a.feeders.split(",") if f], settings=settings, rounds=a.rounds,
                       workers=a.workers, run_ahead=a.run_ahead, copy_gbps=a.copy_gbps, batch=a.batch,
                       timeout=a.timeout, progress=False, data_description="fastq.bench.testdata, seed 0")
        feed.print_report(res)
        if a.reference_check:
            print()
            ratio, ref = reference_check(paths, a.rounds, a.workers, a.timeout)
            res["reference_check"] = {"background_over_normal": ratio, "target": REFERENCE_TARGET, "result": ref}
    except bench.BenchInputError as e:
        ap.error(str(e))
    feed.write_json(res, a.json)
    return 0 if res["feeders"] else 1


if __name__ == "__main__":
    sys.exit(main())
