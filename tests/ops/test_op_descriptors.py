"""An op is declared once in C (its parameter struct, field list and record in
csrc/image/api/fq_image_ops.cpp) and once in Python (its class in fastq/ops/).
fastq._native._image.pack_ops packs by the C descriptors (fq_img_op_desc); these tests hold the
two declarations together: every op class fills exactly the fields of its C op, with
the shapes the C struct has, and every C op has a class."""
import inspect

import numpy as np
import pytest

from fastq._native import _image
from fastq import ops as O

# one instance per op class, with non-default arguments where the class has them
SAMPLES = {
    "RandomResizedCrop": O.RandomResizedCrop((10, 20), scale=(0.2, 0.9), ratio=(0.5, 2.0), interpolation="area"),
    "Resize": O.Resize((12, 14), interpolation="bicubic"),
    "CenterCrop": O.CenterCrop((5, 7)),
    "RandomCrop": O.RandomCrop((4, 6), padding=(1, 2, 3, 4), pad_if_needed=True, fill=(5, 6, 7),
                               padding_mode="reflect"),
    "HorizontalFlip": O.HorizontalFlip(0.25),
    "VerticalFlip": O.VerticalFlip(0.75),
    "ColorJitter": O.ColorJitter(brightness=0.4, contrast=(0.5, 1.5), saturation=0.2, hue=0.1),
    "RandomAffine": O.RandomAffine(10, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(1, 2, 3, 4),
                                   border="replicate", fill=9, interpolation="nearest"),
    "Grayscale": O.Grayscale(0.5),
    "Normalize": O.Normalize(mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6)),
    "Invert": O.Invert(0.5),
    "AutoContrast": O.AutoContrast(0.25),
    "Equalize": O.Equalize(0.75),
    "Posterize": O.Posterize(3, p=0.5),
    "Solarize": O.Solarize((10, 200), p=0.5),
    "SolarizeAdd": O.SolarizeAdd(-30, 99, p=0.5),
    "Brightness": O.Brightness((0.5, 1.5), p=0.5),
    "Color": O.Color(0.4, p=0.5),
    "Contrast": O.Contrast((0.2, 1.2), p=0.5),
    "Sharpness": O.Sharpness(1.9, p=0.5),
    "Rotate": O.Rotate((-30, 10), fill=(1, 2, 3), p=0.5),
    "ShearX": O.ShearX(0.3, fill=7, p=0.5),
    "ShearY": O.ShearY((-0.3, 0.2), p=0.5),
    "TranslateX": O.TranslateX((-5, 9), fill=4, p=0.5),
    "TranslateY": O.TranslateY(-3, p=0.5),
    "RandAugment": O.RandAugment(3, 12, 21, fill=(1, 2, 3)),
    "TrivialAugmentWide": O.TrivialAugmentWide(15, fill=128),
    "Gamma": O.Gamma((0.5, 2.0), gain=1.5, p=0.5),
    "Cutout": O.Cutout(16, fill=(1, 2, 3), p=0.5),
    "Lighting": O.Lighting(0.2, p=0.5),
    "AutoAugment": O.AutoAugment(fill=(4, 5, 6)),
    "GaussianBlur": O.GaussianBlur((5, 3), sigma=(0.5, 1.5), p=0.5),
    # topic write: RandomErasing (fq_image_aug_erase.cpp)
    "RandomErasing": O.RandomErasing(0.7, scale=(0.1, 0.2), ratio=(0.5, 2.0), value=(0.5, -1.0, 2.0)),
    # compose: compositions (their children are packed as the rows after them, see test_compose.py)
    "RandomApply": O.RandomApply([O.Invert(0.5), O.HorizontalFlip()], p=0.3),
    "RandomChoice": O.RandomChoice([O.Invert(), O.Equalize(), O.Posterize(3)], p=[1, 2, 1]),
    "RandomOrder": O.RandomOrder([O.Invert(), O.RandomApply(O.Equalize(), 0.5)]),
    # targets (issue 19): detection geometry ops
    "ResizeShortestEdge": O.ResizeShortestEdge([640, 672, 800], max_size=1333, interpolation="bicubic"),
    "Pad": O.Pad((1344, 1344), fill=(1, 2, 3)),
    "ScaleJitter": O.ScaleJitter((640, 512), scale=(0.5, 1.5), interpolation="nearest", fill=7),
    "RandomZoomOut": O.RandomZoomOut(fill=(1, 2, 3), side_range=(1.0, 2.5), p=0.7),
}
# custom ops (tests/ops/test_custom_op.py runs them; no library is loaded before a spec is built)
SAMPLES.update({
    "CustomOp": O.CustomOp("/nonexistent/libmyop.so", "my_op", params=[1.5, -2], p=0.5),
    "PyFunc": O.PyFunc(lambda image, rng: None, p=0.5),
})
# tensorpack: fbresnet_augmentor's ops (tests/tensorpack/test_tensorpack_parity.py)
SAMPLES.update({
    "TensorpackCrop": O.TensorpackCrop(64, crop_area_fraction=(0.1, 0.9), aspect_ratio_range=(0.5, 2.0),
                                       max_attempts=20, short_edge=80),
    "TensorpackColor": O.TensorpackColor(brightness=(0.7, 1.2), contrast=(0.5, 1.5), saturation=0.3,
                                         lighting_std=0.2, bgr=False),
})
# topic tfpolicy
SAMPLES.update({
    "GaussianNoise": O.GaussianNoise(0.01, 0.2, clip=False, p=0.5),
    "TFRandAugment": O.TFRandAugment(3, 7.5, cutout_const=20, translate_const=50, prob_to_apply=0.5, fill=(1, 2, 3)),
    "TFAutoAugment": O.TFAutoAugment("reduced_imagenet", fill=100),
})
# timm's policies (tests/ops/test_timm_policies.py)
SAMPLES.update({
    "TimmRandAugment": O.TimmRandAugment(3, 7.5, prob=0.7, magnitude_std=float("inf"), magnitude_max=12,
                                         ops=["Rotate", "SolarizeAdd", "TranslateXRel"], interpolation="bicubic",
                                         fill=(1, 2, 3), translate_pct=0.3, translate_const=100,
                                         choice_weights="weights"),
    "TimmAutoAugment": O.TimmAutoAugment("originalr", magnitude_std=0.5, magnitude_max=11, interpolation="bilinear",
                                         fill=(4, 5, 6), translate_pct=0.2, translate_const=90),
    "TimmAugMix": O.TimmAugMix(5, width=4, depth=2, alpha=0.5, magnitude_std=0.5, magnitude_max=12,
                               ops=["Rotate", "Equalize"], interpolation="bicubic", fill=7, translate_pct=0.3,
                               translate_const=11),
})
# RandomIoUCrop (tests/targets/test_iou_crop.py)
SAMPLES.update({
    "RandomIoUCrop": O.RandomIoUCrop(0.4, 0.9, 0.6, 1.8, sampler_options=(0.0, 0.5, 1.0), trials=7),
})
# Keras 3 layers (tests/ops/test_keras_ops.py)
SAMPLES.update({
    "KerasRandomZoom": O.KerasRandomZoom((-0.2, 0.3), (0.1, 0.4), fill_mode="constant", interpolation="nearest",
                                         fill_value=9),
    "KerasRandomTranslation": O.KerasRandomTranslation((-0.1, 0.2), 0.3, fill_mode="wrap"),
    "KerasRandomRotation": O.KerasRandomRotation((-0.05, 0.1), fill_mode="nearest"),
    "KerasRandomContrast": O.KerasRandomContrast((0.1, 0.4), value_range=(5, 250)),
    "KerasRandomBrightness": O.KerasRandomBrightness(0.2),
})


def _op_classes():
    return {name: cls for name, cls in vars(O).items()
            if inspect.isclass(cls) and issubclass(cls, O.Op) and cls is not O.Op and not name.startswith("_")}


def test_every_c_op_has_a_python_class_and_back():
    assert set(_image.OP_FIELDS) == set(_op_classes()) == set(SAMPLES)
    for name, cls in _op_classes().items():
        assert _image.OP_KINDS[name] == cls.kind


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_python_fields_match_the_c_descriptor(name):
    op = SAMPLES[name]
    assert type(op).__name__ == name
    fields = op.fields()
    want = _image.OP_FIELDS[name]  # {field: shape}, all float64 in C
    assert set(fields) == set(want), (sorted(fields), sorted(want))
    for field, shape in want.items():
        value = np.asarray(fields[field])
        assert value.shape == shape, (field, value.shape, shape)
        assert value.dtype.kind in "biuf", (field, value.dtype)  # numbers, stored as doubles


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_packing_writes_each_field_at_its_c_offset(name):
    # read the packed bytes back at the offsets of the C descriptor (fq_op.raw starts at byte 8)
    op = SAMPLES[name]
    packed = _image.pack_ops([(op.kind, op.fields())])
    raw = packed.tobytes()[8:]
    flat = np.frombuffer(raw, dtype="<f8")
    at = 0
    for field, shape in _image.OP_FIELDS[name].items():
        n = int(np.prod(shape))  # 1 for a scalar
        np.testing.assert_array_equal(flat[at:at + n], np.asarray(op.fields()[field], np.float64).ravel(), field)
        at += n
    assert not flat[at:].any()  # the rest of the union stays zero


def test_field_shapes_are_enforced():
    rc = O.RandomCrop(4).fields()
    with pytest.raises(ValueError, match="RandomCrop: fill: expected 3 values, got 2"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, fill=(1, 2)))])
    with pytest.raises(ValueError, match="RandomCrop: fill: expected a sequence"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, fill=3))])
    with pytest.raises(ValueError, match="RandomCrop: out_h: expected a number"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, out_h="4"))])
    cj = O.ColorJitter(brightness=0.5).fields()
    with pytest.raises(ValueError, match="ColorJitter: range: expected 2 values, got 3"):
        _image.pack_ops([(O.K_COLOR_JITTER, dict(cj, range=((0, 1, 2),) * 4))])
    with pytest.raises(ValueError, match=r"Resize: missing parameters \['interp'\]"):
        _image.pack_ops([(O.K_RESIZE, {"out_h": 1, "out_w": 1, "shorter_side": 0})])
