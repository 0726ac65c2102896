"""The segmentation preset with label maps sampled at pixel centres vs OpenCV's legacy nearest, and vs another build.

The fastq peer of ``fastq bench --task segmentation`` (fastq.bench.dense: Files +
Targets(masks=...), RandomResizedCrop(512) + HorizontalFlip, uint8, batch 8) on the
generated dense set, one fresh process per measurement: a warm-up epoch, then --epochs
epochs; images/s and CPU microseconds per image of the whole process.  Variants, in an
order that alternates every round: this checkout with mask_sampling="center" (the
default) and "legacy" (OpenCV's INTER_NEAREST, the earlier default), and,
with --base DIR, another checkout built in place (e.g. one from before "center") with
its own default.  Medians over --rounds, and ratios to the first variant's.

    python benchmarks/bench_mask_sampling.py --images 512 --rounds 7 --epochs 3 \\
        --base /tmp/before     # a copy of the commit before, built in place
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)


# One measurement, in a fresh `python -c` process (so that PYTHONPATH alone picks the build:
# importing this script would put this checkout first): prints a JSON line.
CHILD = """
import glob, json, os, sys, time
import cv2
import numpy as np
import fastq
from fastq.bench import dense
from fastq.bench.tasks import TASKS
from fastq.targets import Targets
data, sampling, epochs, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
paths = sorted(glob.glob(os.path.join(data, "*.jpg")))
task = TASKS["segmentation"]
ann = dense.load_annotations(paths)
masks = [cv2.imread(m, cv2.IMREAD_UNCHANGED) for m in ann["mask_paths"]]
kw = {} if sampling == "default" else {"mask_sampling": sampling}
tg = Targets([np.zeros((0, 4), np.float32)] * len(paths), max_boxes=0, image_info=False, masks=masks, mask_fill=255,
             **kw)
p = fastq.Pipeline(fastq.sources.Files(paths, targets=tg), batch_size=task.batch, queue_size=4, workers=workers,
                   ops=task.fastq_ops(), dtype="uint8", seed=0, shuffle=True, pin_memory=False)
def epoch():
    n = 0
    for b in p:
        n += len(b[0])
        del b
    return n
epoch()
t0, c0 = time.perf_counter(), time.process_time()
n = sum(epoch() for _ in range(epochs))
t, c = time.perf_counter() - t0, time.process_time() - c0
p.close()
print(json.dumps({"fastq": os.path.dirname(fastq.__file__), "images_per_s": n / t, "cpu_us_per_image": c / n * 1e6,
                  "chain": [type(o).__name__ for o in task.fastq_ops()]}))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=512, help="images in the generated dense set (default 512)")
    ap.add_argument("--rounds", type=int, default=7, help="measurements per variant; medians (default 7)")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per measurement (default 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--base", default=None, help="another checkout, built in place, measured with its default")
    ap.add_argument("--data-dir", default=None, help="where the set is generated (default: a temporary folder)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    import fastq
    from fastq.bench.testdata import make_dense_dataset
    here = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))
    variants = {"center": (here, "center"), "legacy": (here, "legacy")}
    if a.base:
        if not _checkout.built(os.path.join(os.path.abspath(a.base), "fastq")):
            sys.exit(f"--base {a.base}: no fastq built in place there (python setup.py build_ext --inplace)")
        variants["base"] = (os.path.abspath(a.base), "default")
    with tempfile.TemporaryDirectory(prefix="fastq_masks_") as tmp:
        data = a.data_dir or os.path.join(tmp, "dense")
        if not os.path.exists(os.path.join(data, "dense_annotations.json")):
            make_dense_dataset(data, a.images)
        res = {k: [] for k in variants}
        for r in range(a.rounds):
            for k in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                path, sampling = variants[k]
                env = dict(os.environ, PYTHONPATH=path)
                cmd = [sys.executable, "-c", CHILD, data, sampling, str(a.epochs), str(a.workers)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp, timeout=1800)
                if out.returncode:
                    sys.exit(f"{k}: exit {out.returncode}\n{out.stderr[-3000:]}")
                d = json.loads(out.stdout.strip().splitlines()[-1])
                if not d["fastq"].startswith(path):
                    sys.exit(f"{k}: ran the fastq at {d['fastq']}, not {path}")
                d["load"] = os.getloadavg()[0]
                res[k].append(d)
                print(f"round {r} {k:7s} {d['images_per_s']:7.0f} img/s {d['cpu_us_per_image']:7.0f} CPU us/img "
                      f"(load {d['load']:.2f})", flush=True)
    med = {k: {"images_per_s": statistics.median(x["images_per_s"] for x in v),
               "cpu_us_per_image": statistics.median(x["cpu_us_per_image"] for x in v)} for k, v in res.items()}
    ref = med["base" if "base" in med else "legacy"]
    print(f"chain {res['center'][0]['chain']}, {a.images} images, {a.workers} workers, medians of {a.rounds} rounds")
    for k, m in med.items():
        m["images_per_s_ratio"] = m["images_per_s"] / ref["images_per_s"]
        m["cpu_per_image_ratio"] = ref["cpu_us_per_image"] / m["cpu_us_per_image"]
        print(f"  {k:7s} {m['images_per_s']:7.0f} img/s {m['cpu_us_per_image']:7.0f} CPU us/img   x{m['images_per_s_ratio']:.3f} "
              f"images/s, x{m['cpu_per_image_ratio']:.3f} CPU per image (vs {'base' if 'base' in med else 'legacy'})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"medians": med, "runs": res}, f, indent=1)


if __name__ == "__main__":
    main()
