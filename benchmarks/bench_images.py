"""End-to-end images/s on the reference image task, fastq against its peers, one run.

A thin wrapper over ``fastq.bench`` (the code behind ``fastq bench``): same tasks,
peers and method.  It keeps this script's defaults -- every peer including
fastq with 1 worker and tf.data with map parallelism = cores, the dataset cached
in ``<repo>/bench_data/``, and the ratio targets (benchmarks/README.md) printed as met / MISSED.

Usage:
  python benchmarks/bench_images.py                 # 2000 images, 3 rounds
  python benchmarks/bench_images.py --quick         # 256 images, a smoke test
  python benchmarks/bench_images.py --profile       # + single-thread stage profile
  python benchmarks/bench_images.py --peers fastq,fastq1 --images 4000 --json out.json
"""
import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq import bench  # noqa: E402

ALL_PEERS = "fastq,fastq1,tfdata,tfdata_n,dali,tensorpack,pyloop"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=2000, help="images per epoch (default 2000)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 256 images")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the median is reported (default 3)")
    ap.add_argument("--task", default="reference", choices=list(bench.TASKS))
    ap.add_argument("--workers", type=int, default=None, help="workers of fastq(cores) (default: usable cores)")
    ap.add_argument("--peers", default=ALL_PEERS, help=f"comma-separated subset of {ALL_PEERS}")
    ap.add_argument("--scaling", default="", help="fastq worker counts to measure too, e.g. 1,2")
    ap.add_argument("--profile", action="store_true", help="also run the single-thread per-stage profile")
    ap.add_argument("--profile-images", type=int, default=300, help="images in the profile (default 300)")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"),
                    help="dataset cache (default <repo>/bench_data, gitignored)")
    ap.add_argument("--retry-busy", type=int, default=1,
                    help="measure a peer's round again (fresh process) up to this many times when other "
                         f"processes or the hypervisor took > {bench.BUSY_LIMIT} cores during it (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed per peer process")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write a PNG chart here")
    a = ap.parse_args()
    if a.quick:
        a.images = 256
    try:
        paths = bench.generated_dataset(a.images, a.data_dir)
        res = bench.run(paths, task=a.task, peers=[p for p in a.peers.split(",") if p], workers=a.workers,
                        rounds=a.repeats, scaling=[int(x) for x in a.scaling.split(",") if x],
                        profile=a.profile, profile_images=a.profile_images, retry_busy=a.retry_busy,
                        timeout=a.timeout, data_description="fastq.bench.testdata, seed 0")
    except bench.BenchInputError as e:
        ap.error(str(e))
    bench.print_report(res, show_targets=True)
    bench.write_outputs(res, a.json, a.plot)


if __name__ == "__main__":
    main()
