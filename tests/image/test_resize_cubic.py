"""The AVX2 bicubic resize (csrc/image/geometry/fq_image_resize_cubic.cpp) against the linked OpenCV's
own cv::resize(INTER_CUBIC) (the same process with fastq._native._image.set_simd_resize(False)): the
same bytes on random sizes (down, up, mixed, 1-5 pixel sides, the vector range's edges),
saturating images, strided sources (a crop's view), and through the tensorpack chain on JPEGs.
pip's cv2 is not the reference here: it is OpenCV 5.x, whose bicubic kernels differ from 4.6's
by one level on some pixels (tests/tensorpack/test_tensorpack_parity.py bounds that)."""
import platform

import numpy as np
import pytest

from fastq._native import _image
from fastq import ops as O


def _avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2 " in f.read().replace("\n", " ")
    except OSError:
        return False


def test_the_fast_path_runs_where_it_should():
    """fastq's builds link OpenCV 4.6.0 with an SSE baseline (Debian's; the wheel's vendored
    copy): on x86-64 with AVX2 the path must be on, else it must say why not"""
    status = _image.simd_resize_status()
    if platform.machine() == "x86_64" and _avx2():
        assert status == "on", status
    else:
        assert status.startswith("unavailable: "), status
    was = _image.set_simd_resize(False)
    try:
        assert _image.simd_resize_status() in ("off", status)
    finally:
        _image.set_simd_resize(was)


def _resize(arr, h, w, simd, pre=()):
    was = _image.set_simd_resize(simd)
    try:
        ops = list(pre) + [O.Resize((h, w), interpolation="bicubic")]
        spec = _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels="RGB", input_size=arr.shape[:2]))
        return spec.process_array(arr, 1, 0, 0)[0]
    finally:
        _image.set_simd_resize(was)


def _same(arr, h, w, pre=()):
    a = _resize(arr, h, w, True, pre)
    b = _resize(arr, h, w, False, pre)
    assert a.shape == b.shape == (h, w, 3)
    np.testing.assert_array_equal(a, b, err_msg=f"{arr.shape} -> {(h, w)}")


def test_random_sizes_equal_cv_resize():
    rs = np.random.RandomState(0)
    for _ in range(250):
        big = rs.rand() < 0.2
        sh, sw = rs.randint(1, 600 if big else 90, 2)
        dh, dw = rs.randint(1, 300 if big else 90, 2)
        _same(rs.randint(0, 256, (sh, sw, 3), np.uint8), int(dh), int(dw))


@pytest.mark.parametrize("sw", [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17])
def test_narrow_sources_and_targets(sw):
    """every target pixel near an edge: the clamped taps and the vector range's bounds"""
    rs = np.random.RandomState(sw)
    arr = rs.randint(0, 256, (11, sw, 3), np.uint8)
    for dw in (1, 2, 3, 5, 8, 9, 16, 33, 224):
        _same(arr, 7, dw)
        _same(arr.transpose(1, 0, 2).copy(), dw, 7)


def test_saturating_images():
    """0/255 checkerboards and stripes overshoot (negative weights): the clamps to 0 and 255"""
    y, x = np.mgrid[:64, :80]
    for pat in ((x + y) % 2, (x // 3) % 2, (y // 2 + x) % 3 == 0):
        arr = np.repeat((pat * 255).astype(np.uint8)[:, :, None], 3, axis=2)
        arr[..., 1] = 255 - arr[..., 1]
        for h, w in ((224, 224), (31, 45), (64, 81), (150, 37)):
            _same(arr, h, w)
    _same(np.full((40, 40, 3), 255, np.uint8), 97, 13)
    _same(np.zeros((40, 40, 3), np.uint8), 13, 97)


def test_strided_source():
    """the resize reads a crop's view of a larger buffer (rows with a stride)"""
    arr = np.random.RandomState(3).randint(0, 256, (120, 150, 3), np.uint8)
    for h, w in ((224, 224), (40, 33), (61, 90)):
        _same(arr, h, w, pre=[O.CenterCrop((77, 101))])


def test_tensorpack_chain_on_jpegs_is_unchanged(tmp_path):
    """the chain the path was written for, from JPEG bytes (region decode + crop + bicubic):
    outputs and explain records equal with the path on and off"""
    import fastq.tensorpack as ftp
    from fastq.bench.testdata import make_jpeg_dataset

    paths = make_jpeg_dataset(str(tmp_path), 12, seed=5)
    chain = ftp.fbresnet_augmentor(224)
    spec = _image.ImageSpec(O.compile_ops(chain, dtype="uint8", channels="BGR"))
    for i, p in enumerate(paths):
        blob = open(p, "rb").read()
        outs = []
        for simd in (True, False):
            was = _image.set_simd_resize(simd)
            try:
                outs.append(spec.process_encoded(blob, 7, 0, i))
            finally:
                _image.set_simd_resize(was)
        np.testing.assert_array_equal(outs[0][0], outs[1][0], err_msg=p)
        assert outs[0][1] == outs[1][1]
