"""Pillow's resize (the pil_* interpolations) and affine sampler: the AVX2 passes
(csrc/image/geometry/fq_image_resize_pil_avx2.cpp) give the scalar passes' bytes, switched
at run time with fastq._native._image.set_cpu_level: random sizes (shrinks, enlargements, one axis,
both in either pass order), 1 and 3 channels (what compile_ops takes), every filter, saturating and strided inputs.
Bit-exactness with Pillow itself is tests/image/test_resize_pil.py."""
import numpy as np
import pytest

import fastq.ops as O
from fastq._native import _image

FILTERS = ["pil_bilinear", "pil_bicubic", "pil_lanczos", "pil_box", "pil_hamming", "pil_nearest"]

pytestmark = pytest.mark.skipif("avx2" not in _image.cpu_dispatch()["detected"], reason="the CPU has no AVX2")


def _resize(arr, h, w, interp):
    c = arr.shape[2]
    spec = _image.ImageSpec(O.compile_ops([O.Resize((h, w), interpolation=interp)], dtype="uint8", channels=c,
                                          input_size=arr.shape[:2]))
    return spec.process_array(arr, 1, 0, 0)[0]


def _both(arr, h, w, interp):
    prev = _image.set_cpu_level("baseline")
    try:
        assert _image.cpu_dispatch()["kernels"]["resize_pil"] == "baseline"
        scalar = _resize(arr, h, w, interp)
    finally:
        _image.set_cpu_level(prev)
    assert _image.cpu_dispatch()["kernels"]["resize_pil"] == "AVX2"
    return scalar, _resize(arr, h, w, interp)


def _image_of(rng, h, w, c):
    kind = rng.integers(0, 3)
    if kind == 0:  # noise
        return rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    if kind == 1:  # black / white edges: the negative lobes saturate
        return (rng.integers(0, 2, (h, w, c)) * 255).astype(np.uint8)
    big = rng.integers(0, 256, (h, w + 7, c), dtype=np.uint8)  # a strided view
    return big[:, 3:3 + w]


@pytest.mark.parametrize("c", [1, 3])
def test_avx2_equals_scalar_random_sizes(c):
    rng = np.random.default_rng(100 + c)
    for case in range(120):
        ih, iw, oh, ow = (int(v) for v in rng.integers(1, 120, 4))
        if case % 6 == 0:
            oh = ih  # horizontal only
        elif case % 6 == 1:
            ow = iw  # vertical only
        interp = FILTERS[case % len(FILTERS)]
        arr = _image_of(rng, ih, iw, c)
        scalar, simd = _both(arr, oh, ow, interp)
        assert scalar.shape == (oh, ow, c)
        assert np.array_equal(scalar, simd), (case, c, (ih, iw), (oh, ow), interp)


@pytest.mark.parametrize("interp", FILTERS[:5])
def test_avx2_equals_scalar_large_shrinks_and_photo_sizes(interp):
    rng = np.random.default_rng(7)
    for (ih, iw), (oh, ow) in [((500, 500), (224, 224)), ((375, 500), (224, 298)), ((1200, 900), (17, 13)),
                               ((600, 37), (224, 224)), ((31, 700), (5, 3)), ((224, 224), (500, 333))]:
        arr = _image_of(rng, ih, iw, 3)
        scalar, simd = _both(arr, oh, ow, interp)
        assert np.array_equal(scalar, simd), ((ih, iw), (oh, ow), interp)


@pytest.mark.parametrize("resample", ["bilinear", "bicubic"])
def test_pil_affine_avx2_equals_scalar(resample):
    """timm's geometric ops on Pillow's affine sampler (fq_image_pil_affine.cpp): its AVX2 copy
    for 3 channels gives the scalar bytes, random sizes and magnitudes (edges, fills, the last
    column and row)"""
    rng = np.random.default_rng(11)
    op = O.TimmRandAugment(num_layers=1, magnitude=60, prob=1.0, magnitude_std=float("inf"), magnitude_max=60,
                           ops=["Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"],
                           interpolation=resample, translate_const=20)
    for case in range(80):
        h, w = (int(v) for v in rng.integers(1, 70, 2))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if case % 3 == 0:
            img = (img > 127).astype(np.uint8) * 255
        spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
        prev = _image.set_cpu_level("baseline")
        try:
            scalar = spec.process_array(img, 3, 0, case)[0]
        finally:
            _image.set_cpu_level(prev)
        assert np.array_equal(scalar, spec.process_array(img, 3, 0, case)[0]), (case, (h, w))
