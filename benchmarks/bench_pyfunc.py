"""What a PyFunc costs: the same chain with and without an identity PyFunc (once and
four times), in the same run, alternating, medians: through a Pipeline (images/s) and
on one thread (ImageSpec.process_array, us per image).

    python benchmarks/bench_pyfunc.py [--images 512] [--size 256] [--workers 4]
                                      [--repeats 5] [--json out.json]

Each PyFunc call takes the GIL, builds a numpy view and a numpy Generator seeded from
the sample's stream, and calls the function: a per-sample cost on top of the chain,
serialized across the workers (docs/custom_ops.md "Costs").  Source: in-memory uint8
arrays (no decode), chain RandomResizedCrop(224) + HorizontalFlip, uint8 output.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

import fastq  # noqa: E402
from fastq._native import _image  # noqa: E402
from fastq import ops as O  # noqa: E402


def identity(image, rng):
    return None


def run_once(imgs, chain, workers, batch):
    t0 = time.perf_counter()
    n = 0
    with fastq.Pipeline(fastq.sources.Arrays(imgs), batch_size=batch, workers=workers, ops=chain, dtype="uint8",
                        seed=1) as p:
        for b in p:
            n += len(b[0])
    return n / (time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--size", type=int, default=256, help="side of the square source images")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (a.size, a.size, 3), dtype=np.uint8) for _ in range(a.images)]
    base = [O.RandomResizedCrop(min(224, a.size)), O.HorizontalFlip()]
    chains = {
        "chain": base,
        "chain + PyFunc(identity)": base + [O.PyFunc(identity)],
        "chain + PyFunc(identity) x4": base + [O.PyFunc(identity)] * 4,
    }
    rates = {k: [] for k in chains}
    run_once(imgs[: a.batch], base, a.workers, a.batch)  # warm-up
    for _ in range(a.repeats):
        for name, chain in chains.items():  # alternating: drift hits every variant alike
            rates[name].append(run_once(imgs, chain, a.workers, a.batch))
    # one thread, no pipeline: ImageSpec.process_array over the images, per-sample time
    single = {k: [] for k in chains}
    specs = {k: _image.ImageSpec(O.compile_ops(c, dtype="uint8")) for k, c in chains.items()}
    m = min(len(imgs), 256)
    for _ in range(a.repeats):
        for name, spec in specs.items():
            t0 = time.perf_counter()
            for i in range(m):
                spec.process_array(imgs[i], index=i)
            single[name].append((time.perf_counter() - t0) / m * 1e6)
    med = {k: statistics.median(v) for k, v in rates.items()}
    smed = {k: statistics.median(v) for k, v in single.items()}
    print(f"{a.images} images {a.size}x{a.size}, workers={a.workers}, batch={a.batch}, repeats={a.repeats} "
          f"(medians, images/s)")
    for k, v in med.items():
        print(f"  {k:32s} {v:10.0f} img/s   {1e6 / v:8.1f} us/img")
    per_call = (1e6 / med["chain + PyFunc(identity)"] - 1e6 / med["chain"])
    per_call4 = (1e6 / med["chain + PyFunc(identity) x4"] - 1e6 / med["chain"]) / 4
    print(f"pyfunc overhead: {per_call:.1f} us per sample (one call), {per_call4:.1f} us per call (4 calls), "
          f"wall time per image across {a.workers} workers")
    print(f"one thread, ImageSpec.process_array ({m} images, medians):")
    for k, v in smed.items():
        print(f"  {k:32s} {v:8.1f} us/img")
    print(f"pyfunc cost, one thread: {smed['chain + PyFunc(identity)'] - smed['chain']:.1f} us per call (1 call), "
          f"{(smed['chain + PyFunc(identity) x4'] - smed['chain']) / 4:.1f} us per call (4 calls)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rates": rates, "median": med, "overhead_us": per_call,
                       "overhead_us_per_call_x4": per_call4,
                       "single_thread_us": single, "single_thread_median_us": smed}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
