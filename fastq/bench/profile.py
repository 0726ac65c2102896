"""Single-thread per-stage profile of the reference (and hires) task (``fastq bench --profile``).

Mean µs per image, one thread, files in the page cache: the cv2 path stage by
stage (read, imdecode, cvtColor, crop + resize, flip, numpy normalize, copy into
a batch), using the crop boxes fastq drew (from its explain records), and
fastq's own per-sample path (``ImageSpec.process_encoded``) in chain variants
whose differences split decode, resampling and the fused normalize/write; and the
entropy-coded bytes the crop decodes read against the crop's share of the pixels
(:mod:`fastq.bench.entropy`).
Runs in a child process (``python -m fastq.bench.child profile CFG``).
"""
import json
import statistics
import sys
import time

from fastq.bench.entropy import crop_entropy_summary
from fastq.bench.tasks import BATCH, MEAN, RATIO, REFERENCE, SCALE, SIZE, STD

__all__ = ["profile_main", "print_profile"]


def profile_main(cfg_path):
    """Mean µs per image, one thread: the cv2 stage split and fastq's own per-sample path."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    import cv2
    import numpy as np
    from fastq import ops as O
    from fastq._native._image import ImageSpec, set_opencv_threads
    cv2.setNumThreads(1)
    set_opencv_threads(1)
    paths = cfg["paths"][:cfg["profile_images"]]
    passes = cfg["profile_passes"]
    blobs = [open(p, "rb").read() for p in paths]
    full = REFERENCE.fastq_ops()  # RandomResizedCrop, HorizontalFlip, Normalize
    rrc = full[0]
    specs = {
        "fq_full": ImageSpec(O.compile_ops(full)),
        "fq_full_nodct": ImageSpec(O.compile_ops(full, dct_scaling=False)),
        "fq_rrc_u8": ImageSpec(O.compile_ops([rrc], dtype="uint8")),
        "fq_rrc_nearest_u8": ImageSpec(O.compile_ops(
            [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")], dtype="uint8")),
        "fq_rrc_nearest_u8_nodct": ImageSpec(O.compile_ops(
            [O.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, interpolation="nearest")], dtype="uint8",
            dct_scaling=False)),
    }
    EPOCH = 1
    explains = [specs["fq_full"].process_encoded(b, 0, EPOCH, i)[1] for i, b in enumerate(blobs)]
    for k in ("fq_rrc_nearest_u8", "fq_full_nodct"):  # the scale/ROI choice must not depend on these
        for i, b in enumerate(blobs[:50]):
            e = specs[k].process_encoded(b, 0, EPOCH, i)[1]
            assert e["crop_src"] == explains[i]["crop_src"], (k, i)
            if k == "fq_rrc_nearest_u8":
                assert e["decode_scale"] == explains[i]["decode_scale"], (k, i)
    reduced = {8: cv2.IMREAD_COLOR, 4: cv2.IMREAD_REDUCED_COLOR_2, 2: cv2.IMREAD_REDUCED_COLOR_4,
               1: cv2.IMREAD_REDUCED_COLOR_8}
    sub = np.array(MEAN, np.float32) * 255
    mul = 1 / (np.array(STD, np.float32) * 255)
    batch = np.empty((BATCH, SIZE, SIZE, 3), np.float32)
    pc = time.perf_counter
    stages = ["read", "imdecode_full", "cvtColor", "crop_resize", "flip", "normalize", "copy_row",
              "imdecode_scaled_cv2", "fq_full", "fq_full_nodct", "fq_rrc_u8", "fq_rrc_nearest_u8",
              "fq_rrc_nearest_u8_nodct"]
    per_pass = {s: [] for s in stages}
    for ps in range(passes + 1):  # pass 0 is a warm-up
        acc = dict.fromkeys(stages, 0.0)
        for i, (p, b) in enumerate(zip(paths, blobs)):
            ex = explains[i]
            t0 = pc()
            with open(p, "rb") as f:
                data = f.read()
            t1 = pc()
            buf = np.frombuffer(data, np.uint8)
            bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
            t2 = pc()
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            t3 = pc()
            x, y, w, h = ex["crop_src"]  # the same box fastq drew for this sample
            img = cv2.resize(rgb[y:y + h, x:x + w], (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
            t4 = pc()
            if ex["hflip"]:
                img = cv2.flip(img, 1)
            t5 = pc()
            xf = img.astype(np.float32)
            xf -= sub
            xf *= mul
            t6 = pc()
            batch[i % BATCH] = xf
            t7 = pc()
            cv2.imdecode(buf, reduced[ex["decode_scale"][0]])
            t8 = pc()
            for d, v in zip(stages[:8], (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7)):
                acc[d] += v
            for k, spec in specs.items():
                t = pc()
                spec.process_encoded(b, 0, EPOCH, i)
                acc[k] += pc() - t
        if ps:
            for s in stages:
                per_pass[s].append(acc[s] / len(paths) * 1e6)
    us = {s: statistics.median(v) for s, v in per_pass.items()}
    full_px = [e["src_shape"][0] * e["src_shape"][1] for e in explains]
    dec_px = [e["roi"][2] * e["roi"][3] if e["roi_used"] else e["decoded_shape"][0] * e["decoded_shape"][1]
              for e in explains]
    scales = {}
    for e in explains:
        k = f"{e['decode_scale'][0]}/{e['decode_scale'][1]}"
        scales[k] = scales.get(k, 0) + 1
    out = {"images": len(paths), "passes": passes, "us_per_image": us,
           "roi_used_fraction": sum(e["roi_used"] for e in explains) / len(explains),
           "decode_scale_counts": scales,
           "mean_source_mpx": statistics.mean(full_px) / 1e6,
           "mean_decoded_mpx_fastq": statistics.mean(dec_px) / 1e6,
           "mean_file_kb": statistics.mean(len(b) for b in blobs) / 1024,
           "entropy": crop_entropy_summary(blobs, [e["crop_src"] for e in explains])}
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()


def print_profile(prof, summary, workers, out=print):
    u = prof["us_per_image"]
    out(f"\nper-stage profile, one thread, mean µs per image over {prof['images']} images "
          f"(median of {prof['passes']} passes; files in page cache; mean file {prof['mean_file_kb']:.0f} kB, "
          f"mean source {prof['mean_source_mpx']:.3f} Mpx):")
    out("  cv2 path (what the tensorpack / Python-loop peers do; same crop boxes as fastq):")
    cv2_rows = [("file read", "read"), ("JPEG decode, full (cv2.imdecode)", "imdecode_full"),
                ("BGR->RGB (cvtColor)", "cvtColor"), ("crop + resize 224 bilinear", "crop_resize"),
                ("h-flip (when drawn)", "flip"), ("normalize (numpy, float32)", "normalize"),
                ("copy float32 row into a batch", "copy_row")]
    for label, k in cv2_rows:
        out(f"    {label:46s} {u[k]:8.0f}")
    total = sum(u[k] for _, k in cv2_rows)
    out(f"    {'total':46s} {total:8.0f}   -> {1e6 / total:.0f} images/s per core")
    out(f"    {'(JPEG decode at fastq scale, full frame, cv2)':46s} {u['imdecode_scaled_cv2']:8.0f}")
    out("  fastq per-sample path (ImageSpec.process_encoded from bytes; differences of variants):")
    dec = u["fq_rrc_nearest_u8"]
    rows = [("decode: ROI + DCT-scaled (+ nearest 224 sample)", dec),
            ("decode: ROI only, full scale (+ nearest sample)", u["fq_rrc_nearest_u8_nodct"]),
            ("resample 224 bilinear (RRC u8 - nearest)", u["fq_rrc_u8"] - dec),
            ("flip + normalize + float32 write (fused)", u["fq_full"] - u["fq_rrc_u8"])]
    for label, v in rows:
        out(f"    {label:46s} {v:8.0f}")
    out(f"    {'total, dct_scaling=True (what Pipeline runs)':46s} {u['fq_full']:8.0f}")
    out(f"    {'total, dct_scaling=False':46s} {u['fq_full_nodct']:8.0f}")
    per_img = u["read"] + u["fq_full"]
    out(f"    {'+ file read':46s} {per_img:8.0f}   -> {1e6 / per_img:.0f} images/s per core, "
          f"{workers * 1e6 / per_img:.0f} with {workers} ideal workers")
    sc = ", ".join(f"{k}: {v}" for k, v in sorted(prof["decode_scale_counts"].items()))
    out(f"  fastq decode choices: ROI used for {prof['roi_used_fraction'] * 100:.0f} % of images; "
          f"DCT scale counts {{{sc}}}; pixels decoded {prof['mean_decoded_mpx_fastq']:.3f} Mpx "
          f"vs {prof['mean_source_mpx']:.3f} Mpx full ({prof['mean_decoded_mpx_fastq'] / prof['mean_source_mpx'] * 100:.0f} %)")
    ent = prof.get("entropy") or {}
    if ent.get("files"):
        how = ("exact: the restart segments that cover the crop" if ent["restart_tiled_files"] == ent["files"] else
               f"{ent['restart_tiled_files']} of {ent['files']} files with row-tiling restart segments (exact); "
               "the others: the scan down to the crop's bottom MCU row")
        out(f"  entropy-coded bytes decoded per image (RRC crop boxes above; {how}): "
            f"{ent['mean_entropy_bytes_decoded'] / 1024:.1f} kB of {ent['mean_scan_bytes'] / 1024:.1f} kB scan = "
            f"{ent['decoded_fraction_of_scan'] * 100:.0f} %, vs the crop's share of the pixels "
            f"{ent['mean_crop_pixel_share'] * 100:.0f} %")
    floor = u["read"] + dec
    bound = workers * 1e6 / floor
    line = (f"  file read + decode = {floor:.0f} of those {per_img:.0f} µs ({floor / per_img * 100:.0f} %): with every "
            f"other stage free, {workers} workers could reach at most ~{bound:.0f} images/s")
    if "tfdata" in summary:
        line += f" = {bound / summary['tfdata']['images_per_s']:.2f}x tf.data native of this run"
    out(line)
    if "fastq" in summary:
        ideal = workers * 1e6 / per_img
        got = summary["fastq"]["images_per_s"]
        out(f"  fastq(cores) measured {got:.0f} images/s = {got / ideal * 100:.0f} % of the ideal "
              f"{workers} x single-thread rate")
    if "fastq@1" in summary:
        got = summary["fastq@1"]["images_per_s"]
        out(f"  fastq(1) measured {got:.0f} images/s = {got / (1e6 / per_img) * 100:.0f} % of the "
              f"single-thread rate")


