"""The AVX2 / AVX-512 VBMI forms of the augmentation primitives (csrc/image/color/fq_image_aug_simd.cpp:
the nearest-neighbour warp of Rotate / ShearX/Y / TranslateX/Y, Sharpness, Color, Contrast's
grey sum, the table ops' lookup) give the same bytes as the scalar definitions, which are what
the aarch64 build runs and what tests/ops/test_aug_ops.py checks against torchvision.  The SIMD
kernels are switched off with set_simd_write(False) (the same switch as the float32 write).

Shapes exercise the vector tails (widths not a multiple of 8, 16 or 64 bytes), non-contiguous
inputs (a crop view of a larger image), 1 and 3 channels, and pending flips, which the
geometric ops fold into their source read instead of copying the flipped image.  On a CPU
without AVX2 both runs take the scalar path (the comparison then holds trivially)."""
import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq._native import _image
from fastq import ops as O

OPS = [O.Rotate((-45, 45), fill=(10, 20, 30)), O.Rotate((-1e5, 1e5)), O.ShearX((-0.99, 0.99)),
       O.ShearY((-0.99, 0.99), fill=128), O.TranslateX((-100, 100)), O.TranslateY((-100, 100), fill=7),
       O.Sharpness((0.0, 2.0)), O.Sharpness(1e-9), O.Color((0.0, 2.0)), O.Color(1e-9), O.Contrast((0.0, 2.0)),
       O.Equalize(), O.AutoContrast(), O.Brightness((0.1, 1.9)), O.Posterize(3), O.Solarize((0, 256)),
       O.Invert(), O.SolarizeAdd(60, 128), O.Gamma((0.5, 2.0)), O.Lighting(), O.RandAugment(2, 9),
       O.TrivialAugmentWide(), O.AutoAugment()]
FLIPS = [(), (O.HorizontalFlip(1.0),), (O.VerticalFlip(1.0),), (O.HorizontalFlip(1.0), O.VerticalFlip(1.0))]
SHAPES = [(224, 224), (61, 83), (3, 5), (9, 17), (40, 8), (33, 15), (2, 70), (70, 2), (17, 130)]


def _both(spec, img, seed, index):
    a, _ = spec.process_array(img, seed, 0, index)
    _image.set_simd_write(False)
    try:
        b, _ = spec.process_array(img, seed, 0, index)
    finally:
        _image.set_simd_write(True)
    return a, b


def _images():
    rng = np.random.default_rng(5)
    for h, w in SHAPES:
        img = rng.integers(0, 256, (h, w, 3), np.uint8)
        img[: h // 2, : w // 2] = img[0, 0]  # flat areas: repeated values in the histograms
        yield f"{h}x{w}", img


@pytest.mark.parametrize("op", OPS, ids=repr)
@pytest.mark.parametrize("channels", [3, 1])
def test_simd_equals_scalar(op, channels):
    for name, img in _images():
        h, w = img.shape[:2]
        for flips in FLIPS:
            for crop in [(h, w), (max(1, h - 1), max(1, w - 3))]:  # the second: a strided view
                chain = [O.CenterCrop(crop), *flips, op]
                spec = _image.ImageSpec(O.compile_ops(chain, dtype="uint8", channels=channels))
                for index in range(3):
                    a, b = _both(spec, img, 11, index)
                    assert a.tobytes() == b.tobytes(), f"{op!r} {name} crop {crop} {flips} index {index}"


FIXED_GEOM = [O.Rotate(33.3, fill=(10, 20, 30)), O.Rotate(-12345.6), O.ShearX(0.41), O.ShearY(-0.77, fill=128),
              O.TranslateX(37), O.TranslateY(-55, fill=7)]


@pytest.mark.parametrize("op", FIXED_GEOM, ids=repr)
def test_a_folded_flip_equals_the_flipped_input(op):
    """A pending flip is read through, not materialized: the same bytes as the op (fixed
    level: the flip's own draw shifts the stream) on the flipped array."""
    for name, img in _images():
        h, w = img.shape[:2]
        for flips, flipped in [((O.HorizontalFlip(1.0),), img[:, ::-1]), ((O.VerticalFlip(1.0),), img[::-1]),
                               ((O.HorizontalFlip(1.0), O.VerticalFlip(1.0)), img[::-1, ::-1])]:
            s1 = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), *flips, op], dtype="uint8"))
            s2 = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
            for index in range(3):
                a, ea = s1.process_array(img, 3, 0, index)
                b, eb = s2.process_array(np.ascontiguousarray(flipped), 3, 0, index)
                assert ea["ops"][-1]["magnitude"] == eb["ops"][-1]["magnitude"]
                assert a.tobytes() == b.tobytes(), f"{op!r} {name} {flips} index {index}"


def test_randaugment_preset_float32_simd_equals_scalar():
    """The bench preset's chain (float32 write, erasing) end to end on JPEG bytes."""
    import cv2
    rng = np.random.default_rng(1)
    chain = [O.RandomResizedCrop(224), O.HorizontalFlip(), O.RandAugment(2, 9), O.Normalize(), O.RandomErasing(0.25)]
    spec = _image.ImageSpec(O.compile_ops(chain, dtype="float32"))
    for k in range(4):
        img = cv2.GaussianBlur(rng.integers(0, 256, (300 + 40 * k, 350, 3), np.uint8), (7, 7), 2)
        ok, jpg = cv2.imencode(".jpg", img)
        assert ok
        for index in range(12):
            a, _ = spec.process_encoded(jpg.tobytes(), 2, 0, index)
            _image.set_simd_write(False)
            try:
                b, _ = spec.process_encoded(jpg.tobytes(), 2, 0, index)
            finally:
                _image.set_simd_write(True)
            assert a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes(), f"image {k} index {index}"


TIMM_SIMD_OPS = ["SharpnessIncreasing", "ColorIncreasing", "ContrastIncreasing", "Rotate", "ShearX", "ShearY",
                 "TranslateXRel", "TranslateYRel"]


@pytest.mark.parametrize("resample", ["bicubic", "bilinear"])
@pytest.mark.parametrize("name", TIMM_SIMD_OPS)
def test_timm_pillow_ops_simd_equal_baseline(name, resample):
    """timm's ops on Pillow's semantics (fq_image_aug_timm_ops.cpp): the AVX2 Sharpness /
    Color / grey sum (switched by set_simd_write) and the AVX2 Pillow affine sampler (its
    one-row / one-column shortcuts and 4-pixel blocks; switched by the CPU level) give the
    baseline code's bytes, strided inputs and 1 channel included; tests/ops/test_timm_policies.py
    compares both with Pillow."""
    op = O.TimmRandAugment(num_layers=1, magnitude=9, prob=1.0, magnitude_std=float("inf"), magnitude_max=30,
                           ops=[name], interpolation=resample, fill=(124, 116, 104), translate_const=20)
    for img_name, img in _images():
        h, w = img.shape[:2]
        for crop in [(h, w), (max(1, h - 1), max(1, w - 3))]:
            for channels in (3, 1):
                spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(crop), op], dtype="uint8", channels=channels))
                for index in range(4):
                    a, _ = _both(spec, img, 7, index)
                    prev = _image.set_cpu_level("baseline")
                    try:
                        b, _ = spec.process_array(img, 7, 0, index)
                    finally:
                        _image.set_cpu_level(prev)
                    assert a.tobytes() == b.tobytes(), f"{name} {resample} {img_name} crop {crop} c={channels} #{index}"
