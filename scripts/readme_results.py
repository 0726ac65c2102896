#!/usr/bin/env python3
"""README's Results table, measured in one sitting at one commit.

    python scripts/readme_results.py [--images N] [--rounds R] [--out DIR] [--quick]

Runs, one after the other on this machine, the ``fastq bench`` tasks the table quotes:

* ``--task reference`` (fastq against tf.data, tensorpack, a Python loop and DALI's CPU
  pipeline: each peer installed here; one missing is reported as such, not hidden),
* ``--task randaugment`` (fastq against DALI CPU and torch's DataLoader),
* ``--task fbresnet`` (tensorpack's fbresnet augmentor),
* ``--task migrate`` (torchvision / timm / Keras recipes, translated, against their own loader),

keeps each run's JSON in DIR (default ``bench_data/readme``), and prints the markdown table
with the commit, date, machine and this command, ready to paste into README.md. Every ratio
is fastq against a peer measured in the same run of the same task.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench(task, images, rounds, out_dir, quick):
    path = os.path.join(out_dir, f"{task}.json")
    cmd = [sys.executable, "-m", "fastq", "bench", "--task", task, "--json", path, "--no-progress"]
    cmd += ["--quick"] if quick else ["--images", str(images), "--rounds", str(rounds)]
    print("+", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    with open(path) as f:
        return json.load(f)


def _peer(res, key):
    """(images/s, fastq/peer, CPU us/image) of a peer of a runner result, or None when it did not run."""
    s = res["peers"].get(key)
    if not s:
        return None
    return s["images_per_s"], s["fastq_over_peer"], s["cpu_us_per_image"]


def _why_not(res, key):
    if key in res.get("not_installed", []):
        return "not installed here"
    if key in res.get("failed", {}):
        return "failed in this run"
    return "not measured"


def _ratio_cell(res, key):
    p = _peer(res, key)
    return f"{p[1]:.2f}x" if p else _why_not(res, key)


def table(ref, ra, fb, mig):
    rows = []
    fq = _peer(ref, "fastq")
    tfd = _peer(ref, "tfdata")
    rows.append((f"reference task, 2 workers: fastq {fq[0]:.0f} images/s, against tf.data native (AUTOTUNE)",
                 _ratio_cell(ref, "tfdata")))
    rows.append(("reference task against tensorpack `MultiThreadMapData(2)` + cv2", _ratio_cell(ref, "tensorpack")))
    rows.append(("reference task against a Python + cv2 loop", _ratio_cell(ref, "pyloop")))
    rows.append(("reference task against NVIDIA DALI's CPU pipeline", _ratio_cell(ref, "dali")))
    if tfd:
        rows.append((f"CPU time per image: fastq {fq[2]:.0f} µs, tf.data {tfd[2]:.0f} µs", f"{tfd[2] / fq[2]:.2f}x less"))
    rows.append(("RandAugment against DALI CPU / torchvision `DataLoader`",
                 f"{_ratio_cell(ra, 'dali')} / {_ratio_cell(ra, 'torch')}"))
    rows.append(("fbresnet augmentation against tensorpack `MultiThreadMapData(2)`", _ratio_cell(fb, "tensorpack")))
    cells = []
    for name in ("torchvision reference preset", "timm rand-m9-mstd0.5-inc1", "keras flip+rotation+zoom"):
        r = mig["rows"].get(name)
        cells.append(f"{r['ratio']:.2f}x" if r else "not measured")
    rows.append(("your torchvision / timm / Keras recipe, translated, against its own loader", " / ".join(cells)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000, help="images of the generated set (default 2000)")
    ap.add_argument("--migrate-images", type=int, default=1000,
                    help="images of the migrate task's ImageFolder (default 1000)")
    ap.add_argument("--rounds", type=int, default=3, help="timed epochs per peer; medians (default 3)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench_data", "readme"), help="where the JSON results go")
    ap.add_argument("--quick", action="store_true", help="every task with --quick (a check that it runs, not figures)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    ref = _bench("reference", a.images, a.rounds, a.out, a.quick)
    ra = _bench("randaugment", a.images, a.rounds, a.out, a.quick)
    fb = _bench("fbresnet", a.images, a.rounds, a.out, a.quick)
    mig = _bench("migrate", a.migrate_images, a.rounds, a.out, a.quick)
    rows = table(ref, ra, fb, mig)
    when = datetime.date.today().isoformat()
    machine = ref.get("machine", {}).get("description", "")
    print()
    print(f"Measured {when} at commit {commit}{' (with local changes)' if dirty else ''}, one sitting, "
          f"`python scripts/readme_results.py{' --quick' if a.quick else ''}`; {machine}.")
    print()
    print("| measurement | fastq against the peer |")
    print("|---|---|")
    for what, value in rows:
        print(f"| {what} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
