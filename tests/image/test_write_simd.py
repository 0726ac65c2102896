"""The AVX2 float32 NHWC write (csrc/image/batch/fq_image_write_simd.cpp) against numpy: every value
must equal float32(((v / 255) - mean) / std) computed in float64 (tests/helpers/image_ref.py, finish(),
the definition of the write), bit for bit, with and without flips, for several
mean/std choices, 1 and 3 channels, widths that exercise the vector tails; and equal to
the table write (set_simd_write(False)) of the same build."""
import numpy as np
import pytest

from helpers import image_ref as ref  # noqa: I100
from fastq import ops as O

from fastq._native import _image  # noqa: E402

NORMS = [None, O.Normalize(), O.Normalize(mean=(0.1, 0.7, 0.3), std=(0.3, 0.01, 2.0)),
         O.Normalize(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)), O.Normalize(mean=(-3.0, 1e-3, 0.5), std=(7.0, 0.2, 1e-4))]


def assert_table_write_equal(spec, src, out):
    """The table write (SIMD off) of the same spec gives the same bytes as out."""
    _image.set_simd_write(False)
    try:
        table, _ = spec.process_array(src)
    finally:
        _image.set_simd_write(True)
    assert table.tobytes() == out.tobytes()


@pytest.mark.parametrize("norm", range(len(NORMS)))
@pytest.mark.parametrize("channels", [3, 1])
def test_float32_write_is_exact(norm, channels):
    rng = np.random.default_rng(norm)
    for h, w in [(7, 1), (5, 3), (9, 17), (31, 45), (64, 224)]:
        img = rng.integers(0, 256, (h, w, 3), np.uint8)
        img[0, : min(w, 256)] = np.arange(min(w, 256), dtype=np.uint8)[:, None]  # many distinct values
        src = img if channels == 3 else img[:, :, :1].copy()
        for flips in [(), (O.HorizontalFlip(1.0),), (O.VerticalFlip(1.0),), (O.HorizontalFlip(1.0), O.VerticalFlip(1.0))]:
            chain = [O.CenterCrop((h, w)), *flips] + ([NORMS[norm]] if NORMS[norm] else [])
            spec = _image.ImageSpec(O.compile_ops(chain, dtype="float32", channels=channels))
            out, ex = spec.process_array(src)
            want = ref.finish(ref.replay(src, ex, chain), chain, "float32")
            assert out.dtype == want.dtype == np.float32
            np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32), err_msg=f"{h}x{w} {chain}")
            assert_table_write_equal(spec, src, out)


@pytest.mark.parametrize("channels, order", [(3, "RGB"), (3, "BGR"), (1, "gray")])
def test_uint8_write_is_exact(channels, order):
    """The SSSE3 uint8 NHWC write (pixels reversed for a horizontal flip, rows for a
    vertical one, channels for BGR) against numpy, widths that exercise the 4-pixel
    and 16-pixel shuffles and their tails, and equal to the table write."""
    rng = np.random.default_rng(7)
    for h, w in [(7, 1), (5, 3), (3, 4), (9, 5), (9, 17), (31, 45), (64, 224)]:
        img = rng.integers(0, 256, (h, w, 3), np.uint8)
        src = img if channels == 3 else img[:, :, :1].copy()
        for hf, vf in [(0, 0), (1, 0), (0, 1), (1, 1)]:
            chain = [O.CenterCrop((h, w)), O.HorizontalFlip(hf), O.VerticalFlip(vf)]
            spec = _image.ImageSpec(O.compile_ops(chain, dtype="uint8", channels=order))
            out, _ = spec.process_array(src)
            want = src[::-1 if vf else 1, ::-1 if hf else 1]
            if order == "BGR":
                want = want[:, :, ::-1]
            np.testing.assert_array_equal(out, want.reshape(out.shape), err_msg=f"{h}x{w} hf={hf} vf={vf}")
            assert_table_write_equal(spec, src, out)
