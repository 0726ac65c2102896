"""High-resolution crops, same-run figures: ``fastq bench --task hires --hires-forms original,prepared,max512``.

One run measures the camera-like set (or your folder of JPEGs) in several *forms*:

``original``  the files as they are;
``prepared``  ``fastq prepare SRC DST`` (lossless, restart markers; docs/prepare.md);
``maxN``      ``fastq prepare SRC DST --max-side N`` (training-resolution copy, quality 90).

The copies are built once next to the source set in the data folder
(``<data dir>/<set>_prepared``, ``<set>_max512``; ``fastq prepare`` skips files that
are up to date).  Every round runs each (peer, form) pair once in its own fresh
process, in a rotated order (:func:`fastq.bench.runner.run_child`: warm-up epoch +
one timed epoch), so all pairs share the machine's conditions; figures are medians
over rounds.  The issue's targets are ratios against DALI CPU **on the original
files**: fastq on ``original`` >= 2x, on ``prepared`` >= 3x, on ``max512`` >= 10x.

After the rounds, in this process and one thread: per form, the reference chain's
CPU µs per image and a decode-dominated variant (RandomResizedCrop nearest, uint8),
each image's forms interleaved; the entropy-coded bytes the crop decode reads
(:mod:`fastq.bench.entropy`, on the region fastq actually decodes: the crop box plus
the decode margin); and for each ``maxN`` form the quality of the copy: the same
RandomResizedCrop(224) boxes (drawn torchvision-style in the original, the same
relative box in the copy, both rendered by one resampler: cv2 INTER_AREA) compared
by PSNR and by SSIM (``skimage.metrics.structural_similarity``).
"""
import json
import os
import statistics
import tempfile
import time

import numpy as np

from fastq.bench.data import BenchInputError, _progress_bar, _write, default_data_dir
from fastq.bench.measure import contention
from fastq.bench.peers import peer_label
from fastq.bench.tasks import RATIO, REFERENCE, SCALE, SIZE, TASKS

__all__ = ["FORM_TARGETS", "parse_forms", "build_forms", "run_forms", "print_forms_report", "rrc_box", "render",
           "psnr", "crop_quality"]

FORM_TARGETS = {"original": 2.0, "prepared": 3.0, "max512": 10.0}  # fastq(form) / DALI CPU(original)


def parse_forms(items):
    """Validated form names: original, prepared, maxN (N >= 16)."""
    out = []
    for f in items:
        f = f.strip().lower()
        ok = f in ("original", "prepared") or (f.startswith("max") and f[3:].isdigit() and int(f[3:]) >= 16)
        if not ok:
            raise BenchInputError(f"unknown --hires-forms entry {f!r}: use original, prepared or maxN "
                                  f"(e.g. max512)")
        if f not in out:
            out.append(f)
    if "original" not in out:
        out.insert(0, "original")  # the targets' denominator
    return out


def build_forms(paths, forms, data_dir=None, progress=True, out=print):
    """{form: paths}: the copies of the folder holding ``paths`` (one folder), built with
    fastq.prepare.prepare_tree in ``data_dir`` and reused while up to date."""
    from fastq.prepare import prepare_tree
    src = os.path.dirname(os.path.abspath(paths[0]))
    if any(os.path.dirname(os.path.abspath(p)) != src for p in paths):
        raise BenchInputError("--hires-forms needs the images in one folder (the copies mirror it)")
    root = data_dir or default_data_dir()
    res = {}
    for f in forms:
        if f == "original":
            res[f] = list(paths)
            continue
        dst = os.path.join(root, f"{os.path.basename(src)}_{f}")
        kw = {} if f == "prepared" else {"max_side": int(f[3:])}
        t = time.perf_counter()
        st = prepare_tree(src, dst, progress=progress, **kw)
        if st["rewritten"] or st["resized"]:
            out(f"built the {f} copy in {dst} ({time.perf_counter() - t:.1f} s)")
        res[f] = [os.path.join(dst, os.path.basename(p)) for p in paths]
    return res


def run_forms(form_paths, *, peers=("fastq", "dali"), workers=None, rounds=3, retry_busy=1, timeout=900,
              progress=True, out=print, passes=3, crops=4, data_description=None):
    """Measure every (peer, form) pair in the same rounds -> the result dict (``--json``)."""
    from fastq.bench.measure import usable_cores
    from fastq.bench.runner import _summarize, available, run_child
    t = TASKS["hires"]
    forms = list(form_paths)
    n = len(form_paths[forms[0]])
    if n < t.batch:
        raise BenchInputError(f"{n} image(s); a benchmark epoch needs at least one batch of {t.batch}")
    workers = workers or usable_cores()
    peers = [p for p in peers if p in ("fastq", "dali")]
    missing = [p for p in peers if not available(p)]
    for p in missing:
        out(f"{peer_label(p, workers)}: not installed")
    units = [(p, f) for f in forms for p in peers if p not in missing]
    load0 = os.getloadavg()
    out(f"task hires, forms {', '.join(forms)}: {t.describe()}; {n} images/epoch"
        f"{' (' + data_description + ')' if data_description else ''}")
    out(f"{rounds} round(s) x (warm-up + 1 timed epoch) per (peer, form), each in its own process, median; "
        f"workers={workers}; load average {load0[0]:.2f} {load0[1]:.2f}")
    results = {u: [] for u in units}
    failed = {}
    with tempfile.TemporaryDirectory(prefix="fastq_bench_hires_") as tmp:
        cfgs = {}
        for f in forms:
            cfgs[f] = os.path.join(tmp, f"cfg_{f}.json")
            with open(cfgs[f], "w") as fh:
                json.dump({"task": t.to_dict(), "epochs": 1, "profile_images": 0, "profile_passes": 0,
                           "paths": form_paths[f]}, fh)
        for r in range(rounds):
            order = units[r % len(units):] + units[:r % len(units)]
            with _progress_bar(len(order), f"round {r + 1}/{rounds}", progress) as bar:
                for u in order:
                    p, f = u
                    if u in failed:
                        bar.update(1)
                        continue
                    for attempt in range(retry_busy + 1):
                        res, err = run_child([p, str(workers)], cfgs[f], timeout)
                        if res is None:
                            failed[u] = err
                            _write(f"  round {r + 1}: {p} on {f}: FAILED ({err})", out)
                            break
                        c = res["cpu"][0]
                        res["contended"] = contention(c) > 0.25
                        res["attempts"] = attempt + 1
                        again = res["contended"] and attempt < retry_busy
                        _write(f"  round {r + 1}: {peer_label(p, workers) + ' on ' + f:44s} "
                               f"{res['rates'][0]:8.0f} images/s (cores own {c['own_cores']:.2f}, others "
                               f"{contention(c):.2f}){'  -> busy, again' if again else ''}", out)
                        if not again:
                            results[u].append(res)
                            break
                    bar.update(1)
    summary = {f"{p}@{f}": dict(_summarize(p, runs), peer=p, form=f) for (p, f), runs in results.items() if runs}
    base = summary.get("dali@original", {}).get("images_per_s")
    for f in forms:
        fq, da = summary.get(f"fastq@{f}"), summary.get(f"dali@{f}")
        if fq and base:
            fq["over_dali_original"] = fq["images_per_s"] / base
            if "dali@original" in summary:
                fq["cpu_dali_original_over_fastq"] = summary["dali@original"]["cpu_us_per_image"] / fq["cpu_us_per_image"]
        if fq and da:
            fq["over_dali_same_form"] = fq["images_per_s"] / da["images_per_s"]
    prof = single_thread_forms(form_paths, passes=passes, progress=progress, out=out)
    quality = {f: crop_quality(form_paths["original"], form_paths[f], crops=crops)
               for f in forms if f.startswith("max")}
    load1 = os.getloadavg()
    return {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "images": n, "rounds": rounds,
            "workers": workers, "forms": forms, "loadavg_start": load0, "loadavg_end": load1,
            "data": data_description, "peers": summary, "failed": {f"{p}@{f}": e for (p, f), e in failed.items()},
            "targets": {f: FORM_TARGETS.get(f) for f in forms}, "single_thread": prof, "quality": quality}


def single_thread_forms(form_paths, passes=3, progress=True, out=print):
    """Per form, one thread, files in memory: mean thread-CPU µs per image of the reference
    chain and of RandomResizedCrop(nearest, uint8) (decode-dominated), median of
    ``passes`` (each image's forms interleaved, rotated); entropy-coded bytes read.  With a
    ``prepared`` form also ``prepared, segments off``: the same files through the plain
    ROI decode (``set_segment_decode(False)``), which Huffman-decodes every row down to
    the region's bottom, as on the originals."""
    from fastq._native import _image
    from fastq import ops as O
    from fastq.bench.entropy import crop_entropy_summary
    _image.set_opencv_threads(1)
    full = REFERENCE.fastq_ops()
    specs = {"chain": _image.ImageSpec(O.compile_ops(full)),
             "decode": _image.ImageSpec(O.compile_ops(
                 [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")], dtype="uint8"))}
    forms = list(form_paths)
    blobs = {f: [open(p, "rb").read() for p in ps] for f, ps in form_paths.items()}
    if "prepared" in blobs:
        forms.append(SEGMENTS_OFF)
        blobs[SEGMENTS_OFF] = blobs["prepared"]
    n = len(blobs[forms[0]])
    res = {f: {k: [] for k in specs} for f in forms}
    with _progress_bar(passes + 1, "single-thread profile", progress) as bar:
        for ps in range(passes + 1):  # pass 0: warm-up
            acc = {f: dict.fromkeys(specs, 0.0) for f in forms}
            for i in range(n):
                r = (i + ps) % len(forms)
                for f in forms[r:] + forms[:r]:
                    _image.set_segment_decode(f != SEGMENTS_OFF)
                    for k, spec in specs.items():
                        t0 = time.thread_time()
                        spec.process_encoded(blobs[f][i], 0, 1, i)
                        acc[f][k] += time.thread_time() - t0
                _image.set_segment_decode(True)
            if ps:
                for f in forms:
                    for k in specs:
                        res[f][k].append(acc[f][k] / n * 1e6)
            bar.update(1)
    prof = {}
    for f in forms:
        boxes, rois = [], []
        seg0 = _image.segment_decode_count()
        for i, b in enumerate(blobs[f]):
            _image.set_segment_decode(f != SEGMENTS_OFF)
            before = _image.segment_decode_count()
            ex = specs["chain"].process_encoded(b, 0, 1, i)[1]
            _image.set_segment_decode(True)
            boxes.append(ex["crop_src"])
            reg = _decoded_region(ex, _image.segment_decode_count() > before)
            if f == SEGMENTS_OFF:  # the plain path Huffman-decodes whole rows down to the region's bottom
                reg = (0, 0, ex["src_shape"][1], reg[1] + reg[3])
            rois.append(reg)
        prof[f] = {"chain_us": statistics.median(res[f]["chain"]), "decode_us": statistics.median(res[f]["decode"]),
                   "file_kb": statistics.mean(len(b) for b in blobs[f]) / 1e3,
                   "segment_decodes": _image.segment_decode_count() - seg0,
                   "entropy_box": crop_entropy_summary(blobs[f], boxes),
                   "entropy_decoded": crop_entropy_summary(blobs[f], rois)}
    return prof


SEGMENTS_OFF = "prepared, segments off"
KEEP = 8  # scaled pixels the segment decode keeps around the box (kKeep, csrc/image/decode/fq_image_restart_crop.cpp)


def _decoded_region(ex, segments):
    """The region fastq decodes, in source pixels: explain's roi (DCT-scaled pixels: the box
    plus a 16-pixel margin) on the plain path; on the restart-segment path (``segments``)
    the scaled box plus KEEP pixels, within that roi."""
    H, W = ex["src_shape"]
    if not ex["roi_used"]:
        return (0, 0, W, H)
    M = ex["decode_scale"][0]
    f = 8 // M
    x, y, w, h = ex["roi"]
    x0, y0, x1, y1 = x, y, x + w, y + h
    if segments:
        bx, by, bw, bh = ex["crop_src"]
        def lround(v):  # fq_image_plan.cpp rounds the scaled box with lround (half away from 0)
            return int(v + 0.5)
        sx0, sy0 = lround(bx * M / 8), lround(by * M / 8)
        sx1, sy1 = max(lround((bx + bw) * M / 8), sx0 + 1), max(lround((by + bh) * M / 8), sy0 + 1)
        x0, y0 = max(x0, sx0 - KEEP), max(y0, sy0 - KEEP)
        x1, y1 = min(x1, sx1 + KEEP), min(y1, sy1 + KEEP)
    return (x0 * f, y0 * f, min(x1 * f, W) - x0 * f, min(y1 * f, H) - y0 * f)


def rrc_box(rng, H, W):
    """torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3)."""
    area = H * W
    for _ in range(10):
        a = area * rng.uniform(*SCALE)
        ar = np.exp(rng.uniform(np.log(RATIO[0]), np.log(RATIO[1])))
        w, h = int(round(np.sqrt(a * ar))), int(round(np.sqrt(a / ar)))
        if 0 < w <= W and 0 < h <= H:
            return int(rng.integers(0, W - w + 1)), int(rng.integers(0, H - h + 1)), w, h
    s = min(H, W)
    return (W - s) // 2, (H - s) // 2, s, s


def render(img, rel):
    """RRC output for the relative box rel = (fx, fy, fw, fh): INTER_AREA resize of the
    whole image so that the box is SIZE x SIZE, then the crop (the same geometry for
    any resolution of the same picture)."""
    import cv2
    fx, fy, fw, fh = rel
    tw, th = max(int(round(SIZE / fw)), SIZE), max(int(round(SIZE / fh)), SIZE)
    big = cv2.resize(img, (tw, th), interpolation=cv2.INTER_AREA)
    x0, y0 = min(int(round(fx * tw)), tw - SIZE), min(int(round(fy * th)), th - SIZE)
    return big[y0:y0 + SIZE, x0:x0 + SIZE]


def psnr(a, b):
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-10))


def crop_quality(orig_paths, copy_paths, crops=4, seed=0):
    """PSNR and SSIM (skimage) of RandomResizedCrop(SIZE) outputs from the copy vs from the
    original for the same boxes: medians and 5th percentiles over images x crops, and the
    share of crops the copy has to upsample."""
    import cv2
    from skimage.metrics import structural_similarity
    rng = np.random.default_rng(seed)
    ps, ss, up = [], [], 0
    for po, pc in zip(orig_paths, copy_paths):
        a = cv2.imread(po, cv2.IMREAD_COLOR)
        b = cv2.imread(pc, cv2.IMREAD_COLOR)
        if a is None or b is None:
            raise BenchInputError(f"cannot read {po if a is None else pc}")
        H, W = a.shape[:2]
        for _ in range(crops):
            x, y, w, h = rrc_box(rng, H, W)
            rel = (x / W, y / H, w / W, h / H)
            ra, rb = render(a, rel), render(b, rel)
            ps.append(psnr(ra, rb))
            ss.append(float(structural_similarity(ra, rb, channel_axis=2, data_range=255)))
            up += rel[2] * b.shape[1] < SIZE or rel[3] * b.shape[0] < SIZE
    return {"crops": len(ps), "psnr_median_db": float(np.median(ps)), "psnr_p5_db": float(np.percentile(ps, 5)),
            "ssim_median": float(np.median(ss)), "ssim_p5": float(np.percentile(ss, 5)),
            "upsampled_share": up / len(ps)}


def print_forms_report(res, out=print):
    """The table of a run_forms result."""
    s, forms = res["peers"], res["forms"]
    out("")
    out(f"{'form':10s} {'peer':14s} {'images/s':>9s} {'runs (min-max)':>16s} {'CPU us/img':>10s} "
        f"{'/ DALI orig':>11s} {'/ DALI same':>11s} {'target':>7s}")
    for f in forms:
        for p in ("fastq", "dali"):
            k = f"{p}@{f}"
            if k not in s:
                if k in res["failed"]:
                    out(f"{f:10s} {p:14s} {'FAILED':>9s}")
                continue
            r = s[k]
            o = f"{r['over_dali_original']:10.2f}x" if "over_dali_original" in r else f"{'-':>11s}"
            m = f"{r['over_dali_same_form']:10.2f}x" if "over_dali_same_form" in r else f"{'-':>11s}"
            tg = res["targets"].get(f)
            tgs = f"{tg:6.1f}x" if (p == "fastq" and tg) else f"{'':7s}"
            out(f"{f:10s} {p:14s} {r['images_per_s']:9.0f} {min(r['runs']):7.0f}-{max(r['runs']):<8.0f} "
                f"{r['cpu_us_per_image']:10.0f} {o} {m} {tgs}")
    out(f"/ DALI orig = fastq images/s on the form / DALI CPU images/s on the original files (the issue's "
        f"targets); / DALI same = against DALI CPU on the same form; medians of {res['rounds']} rounds, same run; "
        f"load average {res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}")
    for f in forms:
        r = s.get(f"fastq@{f}")
        tg = res["targets"].get(f)
        if r and tg and "over_dali_original" in r:
            v = r["over_dali_original"]
            out(f"  target fastq on {f} >= {tg:.0f}x DALI CPU on the originals: {v:.2f}x "
                f"{'met' if v >= tg else 'MISSED'}")
    out("\nsingle thread (files in memory; thread CPU µs per image, median of passes):")
    out(f"{'form':22s} {'kB/file':>8s} {'chain us':>9s} {'decode us':>10s} {'entropy kB read':>16s} "
        f"{'of scan':>8s} {'box kB':>7s} {'crop px':>8s} {'us/kB':>6s}")
    for f, p in res["single_thread"].items():
        e, eb = p["entropy_decoded"], p["entropy_box"]
        if e.get("files"):
            kb = e["mean_entropy_bytes_decoded"] / 1e3
            out(f"{f:22s} {p['file_kb']:8.1f} {p['chain_us']:9.0f} {p['decode_us']:10.0f} {kb:16.1f} "
                f"{100 * e['decoded_fraction_of_scan']:7.0f}% {eb['mean_entropy_bytes_decoded'] / 1e3:7.1f} "
                f"{100 * eb['mean_crop_pixel_share']:7.0f}% {p['decode_us'] / kb:6.2f}")
    out("entropy kB read: the entropy-coded bytes the decode reads for the region fastq decodes (crop box + "
        "margin; exact on files with row-tiling restart segments, else the scan down to the region's bottom "
        "MCU row); box kB: the same for the crop box alone; decode us: RandomResizedCrop(nearest) to uint8")
    for f, q in res["quality"].items():
        out(f"\nquality of the {f} copy: RandomResizedCrop({SIZE}) from the copy vs from the original, same boxes "
            f"({q['crops']} crops): PSNR median {q['psnr_median_db']:.1f} dB (5th percentile "
            f"{q['psnr_p5_db']:.1f}), SSIM median {q['ssim_median']:.4f} (5th percentile {q['ssim_p5']:.4f}); "
            f"{100 * q['upsampled_share']:.0f} % of the crops upsampled from the copy")
