"""fastq.bench.entropy (the entropy-bytes profile of ``fastq bench --profile`` and
benchmarks/bench_hires.py) on JPEGs written by cv2, with and without restart markers.

References: the scan start is found independently (the bytes after the SOS segment, by
searching for the marker), the restart segment sizes from the RST marker positions
found with bytes.find; the expected counts follow from the MCU grid of the image size."""
import cv2
import numpy as np
import pytest

from fastq.bench.entropy import crop_entropy_summary, entropy_bytes, jpeg_layout, scan_layout

W, H = 256, 160  # 4:2:0 -> 16 x 16 MCUs: 16 columns, 10 rows


def jpeg(rst_interval=0, progressive=False):
    img = (np.random.RandomState(0).rand(H, W, 3) * 255).astype(np.uint8)
    params = [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
    if rst_interval:
        params += [cv2.IMWRITE_JPEG_RST_INTERVAL, rst_interval]
    if progressive:
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


def scan_start(data):
    sos = data.find(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


def test_without_restart_markers_the_scan_down_to_the_bottom_row_is_read():
    data = jpeg()
    w, h, mw, mh, ri, start, rst = scan_layout(data)
    assert (w, h, mw, mh, ri, rst) == (W, H, 16, 16, 0, []) and start == scan_start(data)
    scan = len(data) - 2 - start
    assert entropy_bytes(data, (0, 0, W, H)) == (scan, scan)
    # a crop in MCU rows 2..4 of 10 needs rows 0..4: half the scan
    assert entropy_bytes(data, (100, 40, 20, 30)) == (int(scan * 5 / 10), scan)


def test_with_row_tiling_restart_markers_only_the_covering_segments_count():
    data = jpeg(rst_interval=4)  # 16 MCU columns / 4: 4 segments per MCU row
    w, h, mw, mh, ri, start, rst = scan_layout(data)
    assert ri == 4 and len(rst) == 16 * 10 // 4 - 1
    marks, p = [], start
    while True:
        p = data.find(b"\xff", p)
        if p < 0 or p >= len(data) - 2:
            break
        if 0xD0 <= data[p + 1] <= 0xD7:
            marks.append(p)
        p += 2
    assert marks == rst
    bounds = [start] + [m + 2 for m in marks] + [len(data) - 2]
    seg = [bounds[k + 1] - bounds[k] for k in range(len(bounds) - 1)]
    # x 70..129 -> MCU columns 4..8 -> segments 1 and 2 of each row; y 20..35 -> MCU rows 1..2
    expect = sum(seg[r * 4 + c] for r in (1, 2) for c in (1, 2))
    assert entropy_bytes(data, (70, 20, 60, 16)) == (expect, len(data) - 2 - start)
    s = crop_entropy_summary([data, jpeg(), b"\x89PNG not a jpeg"], [(70, 20, 60, 16), (0, 0, W, H), (0, 0, 1, 1)])
    assert s["files"] == 2 and s["restart_tiled_files"] == 1
    assert s["mean_crop_pixel_share"] == pytest.approx((60 * 16 / (W * H) + 1) / 2)
    full = len(jpeg()) - 2 - scan_start(jpeg())
    assert s["decoded_fraction_of_scan"] == pytest.approx((expect + full) / (len(data) - 2 - start + full))


def test_jpeg_layout_names_the_frame_type_and_scan_layout_is_its_first_fields():
    """The SOF marker is what tests/sources/test_prepare.py reads "progressive" from."""
    base, prog, gray = jpeg(rst_interval=4), jpeg(progressive=True), cv2.imencode(".jpg", np.zeros((H, W), np.uint8))[1]
    lb, lp, lg = jpeg_layout(base), jpeg_layout(prog), jpeg_layout(gray.tobytes())
    assert (lb.sof, lp.sof, lg.sof) == (0xC0, 0xC2, 0xC0)
    assert (lb.width, lb.height, lb.mcu_w, lb.mcu_h, lb.restart_interval) == (W, H, 16, 16, 4)
    assert (lg.mcu_w, lg.mcu_h) == (8, 8) and lp.scan_start == scan_start(prog)
    assert scan_layout(base) == tuple(lb)[:7] and len(lb.rst) == 16 * 10 // 4 - 1
    with pytest.raises(ValueError, match="bad JPEG marker layout"):
        jpeg_layout(b"\xff\xd8garbage!")
