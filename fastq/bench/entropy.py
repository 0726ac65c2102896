"""Entropy-coded bytes a crop decode reads from a baseline JPEG (the high-resolution profile:
bytes entropy-decoded per image against the crop's share of the file).

On a file whose restart segments tile each MCU row (``fastq prepare``'s layout) the
segments that cover the crop box are counted exactly from the RST marker offsets; on
a file without them every byte of the scan down to the crop's bottom MCU row has to be
entropy-decoded (estimated as that row's share of the scan).  Used by
``fastq bench --profile`` (:mod:`fastq.bench.profile`) and ``benchmarks/bench_hires.py``.
"""
from collections import namedtuple

import numpy as np

__all__ = ["JpegLayout", "jpeg_layout", "scan_layout", "entropy_bytes", "crop_entropy_summary"]

JpegLayout = namedtuple("JpegLayout", "width height mcu_w mcu_h restart_interval scan_start rst sof")
JpegLayout.__doc__ = """A JPEG's layout up to its first scan (:func:`jpeg_layout`): frame size, MCU size,
restart interval (0: none), scan start (the first byte after the first SOS), the offsets
of the RST markers after it, and the SOF marker byte (0xC0 baseline, 0xC1 extended,
0xC2 progressive)."""


def jpeg_layout(data):
    """The :class:`JpegLayout` of a JPEG (SOF0-2), parsed from its markers; ValueError
    when the bytes after SOI are not a marker sequence up to an SOS."""
    p, w, h, sof = 2, None, None, None
    mcu_w = mcu_h = 8
    ri = 0
    while p + 4 <= len(data):
        if data[p] != 0xFF:
            raise ValueError("bad JPEG marker layout")
        m = data[p + 1]
        n = int.from_bytes(data[p + 2:p + 4], "big")
        seg = data[p + 4:p + 2 + n]
        if m in (0xC0, 0xC1, 0xC2):
            sof = m
            h, w, nc = int.from_bytes(seg[1:3], "big"), int.from_bytes(seg[3:5], "big"), seg[5]
            if nc == 3:
                mcu_w = 8 * max(seg[6 + 3 * i + 1] >> 4 for i in range(3))
                mcu_h = 8 * max(seg[6 + 3 * i + 1] & 15 for i in range(3))
        elif m == 0xDD:
            ri = int.from_bytes(seg[:2], "big")
        elif m == 0xDA:
            start = p + 2 + n
            body = np.frombuffer(data, np.uint8, offset=start)
            ff = np.flatnonzero(body[:-1] == 0xFF)
            nxt = body[ff + 1]
            rst = (ff[(nxt >= 0xD0) & (nxt <= 0xD7)] + start).tolist()
            return JpegLayout(w, h, mcu_w, mcu_h, ri, start, rst, sof)
        p += 2 + n
    raise ValueError("no SOS")


def scan_layout(data):
    """(width, height, mcu_w, mcu_h, restart interval, scan start, [RST offsets]) of a
    baseline JPEG: :func:`jpeg_layout` without the SOF marker."""
    return tuple(jpeg_layout(data))[:7]


def entropy_bytes(data, box):
    """(bytes the crop decode entropy-decodes, scan bytes) for crop box (x, y, w, h)
    in source pixels (see the module doc)."""
    W, H, mw, mh, ri, start, rst = scan_layout(data)
    end = len(data) - 2
    scan = end - start
    x, y, w, h = box
    mcux, mcuy = -(-W // mw), -(-H // mh)
    r0, r1 = y // mh, (y + h - 1) // mh
    if ri and mcux % ri == 0 and len(rst) == mcux * mcuy // ri - 1:
        per_row = mcux // ri
        bounds = [start] + [o + 2 for o in rst] + [end]
        c0, c1 = (x // mw) // ri, ((x + w - 1) // mw) // ri
        total = 0
        for r in range(r0, r1 + 1):
            for c in range(c0, c1 + 1):
                k = r * per_row + c
                total += bounds[k + 1] - bounds[k]
        return total, scan
    return int(scan * (r1 + 1) / mcuy), scan


def crop_entropy_summary(blobs, boxes):
    """Means over the baseline JPEGs among ``blobs`` with crop ``boxes`` (x, y, w, h in
    source pixels): entropy bytes decoded, scan bytes, their ratio, the crop's share of
    the pixels, and how many files had row-tiling restart segments (exact count)."""
    dec, scan, share, tiled, n = [], [], [], 0, 0
    for data, box in zip(blobs, boxes):
        try:
            W, H, mw, mh, ri, start, rst = scan_layout(data)
        except (ValueError, IndexError):
            continue  # not a baseline JPEG (PNG, progressive, ...)
        if not W or not H:
            continue
        d, s = entropy_bytes(data, box)
        n += 1
        mcux, mcuy = -(-W // mw), -(-H // mh)
        tiled += bool(ri and mcux % ri == 0 and len(rst) == mcux * mcuy // ri - 1)
        dec.append(d)
        scan.append(s)
        share.append(box[2] * box[3] / (W * H))
    if not n:
        return {"files": 0}
    return {"files": n, "restart_tiled_files": tiled, "mean_entropy_bytes_decoded": float(np.mean(dec)),
            "mean_scan_bytes": float(np.mean(scan)), "decoded_fraction_of_scan": float(np.sum(dec) / np.sum(scan)),
            "mean_crop_pixel_share": float(np.mean(share))}
