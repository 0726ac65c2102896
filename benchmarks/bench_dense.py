"""Detection and segmentation input pipelines: fastq against torchvision v2, DALI
(CPU) and a plain Python + cv2 loop, in the same run, medians.

A thin wrapper over ``fastq.bench`` (the code behind ``fastq bench --task
detection|segmentation``): the presets, peers and method are those of
fastq/bench/dense.py, fastq/bench/tasks.py and fastq/bench/runner.py (each peer in
its own process per round, a warm-up epoch then a timed one, the median of the
rounds).  What this script adds: both tasks in one call on one generated set, built
in a temporary folder, and its own defaults (96 images, 2 workers, 3 rounds).

    python benchmarks/bench_dense.py [--task detection|segmentation|both] [--images 96]
                                     [--workers 2] [--repeats 3] [--peers fastq,pyloop]
                                     [--quick] [--json out.json]

detection    ResizeShortestEdge(800, max_size=1333) + HorizontalFlip, boxes moved with
             the image (at most 8 per image, padded); each batch padded to its largest
             image, a multiple of 32 (fastq: Pipeline(pad="batch")); uint8, batch 8.
             Peers: torchvision v2 on tv_tensors.BoundingBoxes in DataLoader(num_workers=W)
             with a padding collate; DALI CPU (decoders.image, resize, flip + bb_flip,
             pad(align=32)); cv2 + numpy in one Python thread.
segmentation RandomResizedCrop(512) + HorizontalFlip with the label map moved by nearest
             neighbour; uint8, batch 8.  Peers: torchvision v2 with tv_tensors.Mask in
             DataLoader(num_workers=W); cv2 + numpy in one Python thread.

The data are the generated dense set (fastq.bench.testdata.make_dense_dataset): JPEGs
built from the bundled photos (360-640 px, like COCO / VOC) with random boxes and
random label maps (PNG).  A peer that is not installed, not available for a task or
fails is listed with the reason.  Ratios are fastq / peer in this run.  --json writes
{"args": ..., "results": {task: the fastq bench result of that task}}.

Up to commit a8fab5d this script was a standalone program with a fixed-square Pad in
every peer (and a fastq pad="batch" variant) and --short / --max-size / --seg-size;
docs/targets.md's first table was measured with that version.
"""
import argparse
import json
import os
import sys
import tempfile

import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq import bench  # noqa: E402
from fastq.bench.data import GENERATED  # noqa: E402
from fastq.bench.dense import DENSE_TASKS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--task", choices=[*DENSE_TASKS, "both"], default="both")
    ap.add_argument("--images", type=int, default=96, help="images per epoch (default 96)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="fastq's workers, DALI's threads, the DataLoader's processes (default 2)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the median is reported (default 3)")
    ap.add_argument("--peers", default=None,
                    help="comma-separated peers (default: each task's, fastq bench --task T's default)")
    ap.add_argument("--quick", action="store_true", help="a fast check: 1 round, no re-measuring of busy rounds")
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    rounds = 1 if a.quick else a.repeats
    peers = [p for p in a.peers.split(",") if p] if a.peers else None
    tasks = DENSE_TASKS if a.task == "both" else (a.task,)
    res = {}
    try:
        with tempfile.TemporaryDirectory(prefix="fastq_dense_") as tmp:
            paths = bench.generated_dataset(a.images, tmp, kind="dense")
            for task in tasks:
                res[task] = bench.run(paths, task=task, peers=peers, workers=a.workers, rounds=rounds,
                                      retry_busy=0 if a.quick else 1,
                                      data_description=f"fastq.bench.testdata, seed 0: {GENERATED['dense'][3]}")
                bench.print_report(res[task])
                print()
    except bench.BenchInputError as e:
        ap.error(str(e))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": res}, f, indent=1)
        print(f"wrote {a.json}")
    return 0 if all(r["peers"] for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
