"""TensorpackColor's AVX2 path (csrc/image/color/fq_image_aug_tensorpack_simd.cpp) against its scalar path
(csrc/image/color/fq_image_aug_tensorpack.cpp, the one non-x86 builds run, and the one the tensorpack replay
in tests/tensorpack/test_tensorpack_parity.py bounds): the same bytes and the same recorded contrast mean
(a double: the grey sum is compared to the last bit), on widths that are and are not multiples
of the 16-pixel block, strided (cropped) inputs, saturated images, wide parameter ranges, and
images whose grey levels fall just above 0 (the vector sum's exactness check must send those
to the scalar order).  Where the CPU has no AVX2 both runs take the scalar path and the test
still checks that the switch changes nothing."""
import numpy as np
import pytest

from fastq._native import _image
from fastq import ops as O


def _run(ops, arr, index, simd):
    was = _image.set_simd_tp(simd)
    try:
        spec = _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels="BGR", input_size=arr.shape[:2]))
        return spec.process_array(arr, 11, 0, index)
    finally:
        _image.set_simd_tp(was)


def _same(ops, arr, indices):
    means = []
    for i in indices:
        a, ea = _run(ops, arr, i, True)
        b, eb = _run(ops, arr, i, False)
        np.testing.assert_array_equal(a, b, err_msg=f"index {i}")
        ra, rb = ea["ops"][-1], eb["ops"][-1]
        assert ra == rb, (i, ra, rb)
        means.append(ra["contrast_mean"])
    return means


@pytest.mark.parametrize("shape", [(224, 224), (1, 1), (3, 17), (31, 16), (50, 97), (64, 255)])
def test_simd_equals_scalar_default_params(shape):
    rs = np.random.RandomState(shape[0] * 1000 + shape[1])
    arr = rs.randint(0, 256, shape + (3,), np.uint8)
    arr[: max(1, shape[0] // 8)] = 255  # clipped rows
    arr[-max(1, shape[0] // 8):] = 0
    _same([O.TensorpackColor()], arr, range(24))


def test_simd_equals_scalar_on_a_strided_view():
    """the op's input is a region of a larger buffer (rows with a stride)"""
    arr = np.random.RandomState(1).randint(0, 256, (90, 130, 3), np.uint8)
    ops = [O.CenterCrop((61, 77)), O.TensorpackColor()]
    for i in range(12):
        a, ea = _run(ops, arr, i, True)
        b, eb = _run(ops, arr, i, False)
        np.testing.assert_array_equal(a, b)
        assert ea == eb


def test_simd_equals_scalar_wide_ranges():
    arr = np.random.RandomState(2).randint(0, 256, (40, 53, 3), np.uint8)
    ops = [O.TensorpackColor(brightness=(0.0, 3.0), contrast=(0.0, 4.0), saturation=0.99, lighting_std=5.0)]
    _same(ops, arr, range(48))


def test_simd_equals_scalar_with_grey_levels_just_above_zero():
    """dark images with a small positive lighting increment: after lighting the grey levels are
    tiny positive floats (~1e-12, not multiples of 2^-29), added to a sum of ~50: the double sum
    rounds, so its value depends on the order, and must be the scalar order's double, bit for
    bit (checked: with the exactness check removed, contrast_mean differs here)"""
    arr = np.zeros((37, 45, 3), np.uint8)
    arr[::7, ::5] = 1
    eig = ((1e-12, 0, 0), (0, 1e-12, 0), (0, 0, 1e-12))
    ops = [O.TensorpackColor(brightness=(1.0, 1.0), contrast=(1.5, 3.0), saturation=0.0, lighting_std=1.0,
                             eigval=(1.0, 1.0, 1.0), eigvec=eig)]
    _same(ops, arr, range(64))
