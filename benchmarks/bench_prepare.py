"""fastq on a `fastq prepare`d copy of the reference-task JPEGs vs the original files,
and against tf.data native and NVIDIA DALI CPU, all in one run (docs/prepare.md).

Steps (one process orchestrates; every end-to-end peer runs in a fresh process through
``fastq bench``'s child runner (fastq.bench.run_child), in rotated order per round,
median of rounds):

1. Dataset: fastq.bench.generated_dataset (fastq.bench.testdata, seed 0, 300-800 px,
   quality 90), the reference task of fastq.bench.tasks.
   Prepared copies: fastq.prepare.prepare_tree with each --intervals target (cached
   next to the dataset; prepare time and JPEG size growth reported).
2. Identity: every image's output (RandomResizedCrop 224 + flip + Normalize, float32)
   from the prepared file equals the original's bit for bit, and so do the batches of
   one pipeline epoch (same seed; SHA-256 per batch).
3. Single thread, in memory (decode + augment + write only), CPU-µs per image (thread
   CPU time, so that other processes on a shared machine count less), median of
   --passes interleaved passes: originals with the table write (= before this work),
   originals, each prepared interval, and the chosen interval with segment decoding
   switched off (restart-marker cost without the skipping).
4. End to end (images/s, workers = cores): fastq before (originals, table write),
   fastq on the originals, fastq on the prepared copy, tf.data native and DALI CPU on
   the originals.  Ratios are taken within the run.

Usage: python benchmarks/bench_prepare.py [--images 2000] [--repeats 3]
       [--intervals 1,2,4,8] [--interval 4] [--peers ...] [--json out.json]
       [--batch-size 64] [--passes 5] [--single-images 500] [--data-dir DIR]
"""
import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _checkout  # noqa: E402,F401  (benchmarks/_checkout.py: this checkout's fastq if built, else the installed one)

from fastq import bench as B  # noqa: E402
from fastq.bench.tasks import RATIO, REFERENCE, SCALE, SIZE  # noqa: E402

E2E = {  # key -> (label, fastq bench peer, dataset, extra environment)
    "before": ("fastq, originals, before (table write)", "fastq", "orig", {"FASTQ_SIMD_WRITE": "0"}),
    "orig": ("fastq, originals", "fastq", "orig", {}),
    "prep": ("fastq, prepared copy", "fastq", "prep", {}),
    "tfdata": ("tf.data native, originals", "tfdata", "orig", {}),
    "dali": ("NVIDIA DALI CPU, originals", "dali", "orig", {}),
    "dali_prep": ("NVIDIA DALI CPU, prepared copy", "dali", "prep", {}),
}


def prepared(paths, interval, data_dir):
    from fastq.prepare import prepare_tree
    src = os.path.dirname(paths[0])
    dst = os.path.join(data_dir, os.path.basename(src) + f"_prepared_i{interval}")
    t = time.perf_counter()
    st = prepare_tree(src, dst, interval=interval, progress=False)
    dt = time.perf_counter() - t
    out = [os.path.join(dst, os.path.basename(p)) for p in paths]
    size_in = sum(os.path.getsize(p) for p in paths)
    size_out = sum(os.path.getsize(p) for p in out)
    return out, {"interval": interval, "seconds": dt, "rewritten": st["rewritten"], "kept": st["kept"],
                 "skipped": st["skipped"], "size_growth_pct": (size_out / size_in - 1) * 100}


def chain():
    return REFERENCE.fastq_ops()


def identity(orig, prep, batch):
    """(samples equal, batches equal) between the original and prepared files."""
    import numpy as np
    import fastq
    from fastq._native import _image
    from fastq import ops as O
    spec = _image.ImageSpec(O.compile_ops(chain()))
    c0 = _image.segment_decode_count()
    same = 0
    for i, (a, b) in enumerate(zip(orig, prep)):
        x, _ = spec.process_encoded(open(a, "rb").read(), 0, 3, i)
        y, _ = spec.process_encoded(open(b, "rb").read(), 0, 3, i)
        same += x.tobytes() == y.tobytes()
    used = _image.segment_decode_count() - c0

    def digests(paths):
        p = fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=batch, workers=2,
                           ops=chain(), dtype="float32", seed=0, shuffle=True, pin_memory=False)
        try:
            return [hashlib.sha256(np.ascontiguousarray(im).tobytes() + np.asarray(lb).tobytes()).hexdigest()
                    for im, lb in p]
        finally:
            p.close()
    da, db = digests(orig), digests(prep)
    return {"samples": len(orig), "samples_identical": same, "segment_decodes": used,
            "batches": len(da), "batches_identical": sum(x == y for x, y in zip(da, db)) if len(da) == len(db) else 0}


def single_thread(sets, passes):
    """Median over passes of the mean CPU-µs/image per named config
    {name: (blobs, segment_decode, simd_write[, chain name])}.  Paired and interleaved: for every
    image the configs run back to back (in an order rotated per image), so that a
    change of load on a shared machine hits all of them alike."""
    from fastq._native import _image
    from fastq import ops as O
    _image.set_opencv_threads(1)
    specs = {"task": _image.ImageSpec(O.compile_ops(chain())),
             # decode-dominated: the same crop boxes, nearest resize, uint8 memcpy write
             "decode": _image.ImageSpec(O.compile_ops(
                 [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")],
                 dtype="uint8"))}
    names = list(sets)
    n = len(sets[names[0]][0])
    res = {k: [] for k in names}
    clock = time.thread_time  # CPU time of this thread: robust on a shared machine
    for ps in range(passes + 1):  # pass 0: warm-up
        acc = dict.fromkeys(names, 0.0)
        for i in range(n):
            r = (i + ps) % len(names)
            for k in names[r:] + names[:r]:
                blobs, seg, simd, *which = sets[k]
                spec = specs[which[0] if which else "task"]
                _image.set_segment_decode(seg)
                _image.set_simd_write(simd)
                t = clock()
                spec.process_encoded(blobs[i], 0, 1, i)
                acc[k] += clock() - t
        if ps:
            for k in names:
                res[k].append(acc[k] / n * 1e6)
    _image.set_segment_decode(True)
    _image.set_simd_write(True)
    return {k: statistics.median(v) for k, v in res.items()}


def write_stage(passes):
    """CPU-µs per 224x224x3 array through CenterCrop(224) + flip + Normalize (float32):
    the write dominates; table vs SIMD, paired."""
    import numpy as np
    from fastq._native import _image
    from fastq import ops as O
    img = np.random.default_rng(0).integers(0, 256, (SIZE, SIZE, 3), np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(SIZE), O.HorizontalFlip(),
                                           O.Normalize(O.IMAGENET_MEAN, O.IMAGENET_STD)]))
    res = {"table": [], "simd": []}
    for ps in range(passes + 1):
        acc = {"table": 0.0, "simd": 0.0}
        for i in range(200):
            for k in (("table", "simd") if i % 2 else ("simd", "table")):
                _image.set_simd_write(k == "simd")
                t = time.thread_time()
                spec.process_array(img, 0, 0, i)
                acc[k] += time.thread_time() - t
        if ps:
            for k in res:
                res[k].append(acc[k] / 200 * 1e6)
    _image.set_simd_write(True)
    return {k: statistics.median(v) for k, v in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--passes", type=int, default=5, help="single-thread passes (default 5)")
    ap.add_argument("--single-images", type=int, default=500, help="images in the single-thread part")
    ap.add_argument("--intervals", default="1,2,4,8", help="restart interval targets to measure (MCUs)")
    ap.add_argument("--interval", type=int, default=4, help="interval of the prepared copy used end to end")
    ap.add_argument("--peers", default="before,orig,prep,tfdata,dali", help=f"subset of {','.join(E2E)}")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench_data"))
    ap.add_argument("--batch-size", type=int, default=REFERENCE.batch,
                    help=f"batch size (default {REFERENCE.batch}, the reference task's)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json")
    a = ap.parse_args()
    intervals = sorted({int(x) for x in a.intervals.split(",") if x} | {a.interval})
    peers = [p for p in a.peers.split(",") if p]
    bad = [p for p in peers if p not in E2E]
    if bad:
        ap.error(f"unknown peers {bad}")
    out = {"images": a.images, "load_average_start": os.getloadavg(), "cores": B.usable_cores()}

    paths = B.generated_dataset(a.images, a.data_dir)
    if len(paths) < a.batch_size:
        ap.error(f"--images {a.images} is less than one batch of {a.batch_size}")
    preps = {}
    out["prepare"] = []
    for iv in intervals:
        preps[iv], info = prepared(paths, iv, a.data_dir)
        out["prepare"].append(info)
        print(f"prepare interval target {iv}: JPEG size {info['size_growth_pct']:+.2f} %, "
              f"{info['rewritten']} re-encoded, {info['kept']} kept"
              + (f", {info['seconds']:.1f} s" if info["rewritten"] else " (cached)"), flush=True)

    out["identity"] = identity(paths, preps[a.interval], a.batch_size)
    idn = out["identity"]
    print(f"identity (interval {a.interval}): {idn['samples_identical']}/{idn['samples']} samples bit-identical "
          f"({idn['segment_decodes']} through segment decoding); {idn['batches_identical']}/{idn['batches']} "
          "pipeline batches bit-identical", flush=True)

    n1 = min(a.single_images, len(paths))
    rd = lambda ps: [open(p, "rb").read() for p in ps[:n1]]  # noqa: E731
    ob = rd(paths)
    sets = {"originals, table write (before)": (ob, True, False), "originals": (ob, True, True)}
    for iv in intervals:
        sets[f"prepared i{iv}"] = (rd(preps[iv]), True, True)
    pb = rd(preps[a.interval])
    sets[f"prepared i{a.interval}, segment decode off"] = (pb, False, True)
    sets["[decode stage] originals"] = (ob, True, True, "decode")
    sets[f"[decode stage] prepared i{a.interval}"] = (pb, True, True, "decode")
    sets[f"[decode stage] prepared i{a.interval}, segments off"] = (pb, False, True, "decode")
    us = single_thread(sets, a.passes)
    out["single_thread_us"] = us
    base = us["originals"]
    print(f"\nsingle thread, {n1} images in memory, paired, median of {a.passes} passes (CPU-µs/image; speed "
          "vs originals with the same chain; [decode stage] = nearest resize, uint8 output):")
    for k, v in us.items():
        ref = us["[decode stage] originals"] if k.startswith("[decode") else base
        print(f"  {k:42s} {v:8.1f}   {ref / v:5.2f}x")
    wr = write_stage(a.passes)
    out["write_stage_us"] = wr
    print(f"write stage (224x224x3 -> float32 normalize + flip, CenterCrop input, CPU-µs): table {wr['table']:.1f}, "
          f"SIMD {wr['simd']:.1f} ({wr['table'] / wr['simd']:.2f}x)")

    avail = {p for p in peers if B.available(E2E[p][1])}
    for p in peers:
        if p not in avail:
            print(f"{E2E[p][0]}: not installed, skipped")
    todo = [p for p in peers if p in avail]
    rates = {p: [] for p in todo}
    cpu_us = {p: [] for p in todo}
    with tempfile.TemporaryDirectory(prefix="fastq_bench_prep_") as tmp:
        cfgs = {}
        for ds, ps in (("orig", paths), ("prep", preps[a.interval])):
            cfgs[ds] = os.path.join(tmp, f"{ds}.json")
            with open(cfgs[ds], "w") as f:
                json.dump({"paths": ps, "task": dict(REFERENCE.to_dict(), batch=a.batch_size), "epochs": 1}, f)
        print(f"\nend to end, {a.images} images/epoch, workers = {B.usable_cores()}, {a.repeats} rounds:", flush=True)
        for r in range(a.repeats if todo else 0):
            order = todo[r % len(todo):] + todo[:r % len(todo)]
            for p in order:
                label, peer, ds, env = E2E[p]
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    res, err = B.run_child([peer, str(B.usable_cores())], cfgs[ds], a.timeout)
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                if res is None:
                    print(f"  round {r + 1}: {label}: FAILED {err}", flush=True)
                    continue
                c = res["cpu"][0]
                rates[p].append(res["rates"][0])
                cpu_us[p].append(c["cpu_us_per_image"])
                print(f"  round {r + 1}: {label:40s} {res['rates'][0]:8.0f} images/s "
                      f"({c['cpu_us_per_image']:.0f} CPU-µs/image; other load {B.contention(c):.2f} cores)", flush=True)
    med = {p: statistics.median(v) for p, v in rates.items() if v}
    cmed = {p: statistics.median(v) for p, v in cpu_us.items() if v}
    out["end_to_end_images_per_s"] = med
    out["end_to_end_cpu_us_per_image"] = cmed
    out["end_to_end_rounds"] = rates
    print("\nmedians (images/s; process CPU-µs per image):")
    for p, v in med.items():
        print(f"  {E2E[p][0]:40s} {v:8.0f}   {cmed[p]:6.0f}")
    ratios = {}
    for num, den in (("prep", "orig"), ("prep", "before"), ("orig", "before"), ("prep", "tfdata"),
                     ("orig", "tfdata"), ("prep", "dali"), ("orig", "dali"), ("dali_prep", "dali")):
        if num in med and den in med:
            ratios[f"{num}/{den}"] = med[num] / med[den]
            # CPU time is read in clock ticks: a tiny run can measure 0 (no ratio then)
            cpu_ratio = cmed[den] / cmed[num] if cmed[num] else float("nan")
            ratios[f"{num}/{den} (CPU per image)"] = cpu_ratio
            print(f"  {E2E[num][0]} / {E2E[den][0]}: {med[num] / med[den]:.2f}x images/s, "
                  f"{cpu_ratio:.2f}x less CPU per image")
    out["ratios"] = ratios
    out["load_average_end"] = os.getloadavg()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
