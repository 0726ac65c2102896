"""plan_decode (csrc/image/api/fq_image_plan.cpp) on its own: what the JPEG decoder does of op 0
(box, DCT scale, region of interest, resampling) for a source size, against values
computed by hand from the rules in docs/ops.md; plus the one-record-per-op tables and
the exported constants of the C core."""
import cv2
import numpy as np
import pytest

from fastq._native import _image
from fastq import ops as O

ImageSpec = _image.ImageSpec


def plan(chain, h, w, dct_scaling=True, **kw):
    return ImageSpec(O.compile_ops(chain, dct_scaling=dct_scaling)).plan_decode(h, w, **kw)


def test_center_crop_inside_decodes_a_margin_of_16_around_the_box():
    p = plan([O.CenterCrop(100)], 400, 600)
    # top = round((400 - 100) / 2) = 150, left = round((600 - 100) / 2) = 250
    assert p["first_op"] == "CenterCrop" and p["box_op"] and not p["resize_after"]
    assert p["box"] == (250, 150, 100, 100) and p["interp"] is None
    assert p["scale"] == (8, 8) and p["scaled_shape"] == (400, 600)
    assert p["scaled_box"] == (250, 150, 100, 100)
    assert p["roi"] == (250 - 16, 150 - 16, 100 + 32, 100 + 32) and p["roi_used"]


def test_margin_is_clamped_at_the_image_edges():
    # 120 x 120, crop 100: box (10, 10, 100, 100); margin reaches every edge: no ROI
    p = plan([O.CenterCrop(100)], 120, 120)
    assert p["box_op"] and p["box"] == (10, 10, 100, 100)
    assert p["roi"] == (0, 0, 120, 120) and not p["roi_used"]
    # 200 x 300, crop 100 x 50: box (125, 50, 50, 100); roi x 109..191, y 34..166
    p = plan([O.CenterCrop((100, 50))], 200, 300)
    assert p["box"] == (125, 50, 50, 100) and p["roi"] == (109, 34, 82, 132) and p["roi_used"]


@pytest.mark.parametrize("out, want_m", [
    ((50, 75), 1),    # 600 * 1 >= 75 * 8 and 400 * 1 >= 50 * 8: 1/8
    ((51, 75), 2),    # 400 * 1 < 51 * 8 = 408; 400 * 2 >= 408 and 600 * 2 >= 600: 1/4
    ((100, 150), 2),  # 800 >= 800, 1200 >= 1200
    ((101, 150), 4),  # 800 < 808
    ((201, 150), 8),  # 400 * 4 = 1600 < 1608: full size
])
def test_resize_picks_the_smallest_dct_scale_that_keeps_the_target(out, want_m):
    p = plan([O.Resize(out)], 400, 600)
    assert p["first_op"] == "Resize" and p["resize_after"] and not p["box_op"]
    assert p["box"] == (0, 0, 600, 400) and p["out_shape"] == out and p["interp"] == "bilinear"
    m = want_m
    assert p["scale"] == (m, 8)
    assert p["scaled_shape"] == ((400 * m + 7) // 8, (600 * m + 7) // 8)
    assert p["roi"] == (0, 0, p["scaled_shape"][1], p["scaled_shape"][0]) and not p["roi_used"]


def test_scaled_sizes_round_up_and_the_box_rounds_to_nearest():
    p = plan([O.Resize((51, 75), interpolation="area")], 401, 601)
    assert p["scale"] == (2, 8) and p["interp"] == "area"
    assert p["scaled_shape"] == (101, 151)  # ceil(401 / 4), ceil(601 / 4)
    # box x1 = round(601 * 2 / 8) = round(150.25) = 150, y1 = round(100.25) = 100
    assert p["scaled_box"] == (0, 0, 150, 100)


def test_without_dct_scaling_the_scale_stays_full():
    p = plan([O.Resize((51, 75))], 400, 600, dct_scaling=False)
    assert p["scale"] == (8, 8) and p["scaled_shape"] == (400, 600) and p["resize_after"]


def test_random_resized_crop_with_a_degenerate_range_is_the_whole_image():
    # scale (1, 1), ratio (1.5, 1.5) on 400 x 600: w = sqrt(240000 * 1.5) = 600,
    # h = sqrt(240000 / 1.5) = 400, one position only: box = the image, whatever the seed
    for index in range(5):
        p = plan([O.RandomResizedCrop((100, 150), scale=(1, 1), ratio=(1.5, 1.5), interpolation="bicubic")],
                 400, 600, seed=7, index=index)
        assert p["box_op"] and p["resize_after"] and p["box"] == (0, 0, 600, 400)
        assert p["scale"] == (2, 8) and p["scaled_box"] == (0, 0, 150, 100) and p["interp"] == "bicubic"
        assert not p["roi_used"]


def test_padded_or_oversized_crops_decode_the_whole_image():
    p = plan([O.RandomCrop(100, padding=4)], 400, 600)
    assert p["first_op"] == "RandomCrop" and not p["box_op"] and not p["roi_used"] and p["scale"] == (8, 8)
    p = plan([O.CenterCrop(700)], 400, 600)  # box starts at negative coordinates
    assert not p["box_op"] and not p["roi_used"]
    p = plan([O.HorizontalFlip(), O.CenterCrop(100)], 400, 600)  # op 0 is not a crop
    assert p["first_op"] == "HorizontalFlip" and not p["box_op"] and not p["resize_after"]


def test_plan_decode_agrees_with_the_decode_that_runs():
    rng = np.random.default_rng(3)
    img = (rng.random((333, 517, 3)) * 255).astype(np.uint8)
    ok, enc = cv2.imencode(".jpg", img)
    assert ok
    spec = ImageSpec(O.compile_ops([O.RandomResizedCrop(64, scale=(0.05, 0.5)), O.HorizontalFlip()]))
    for index in range(8):
        p = spec.plan_decode(333, 517, seed=11, epoch=2, index=index)
        _, ex = spec.process_encoded(enc.tobytes(), seed=11, epoch=2, index=index)
        assert ex["decode_scale"] == p["scale"]
        assert ex["decoded_shape"] == p["scaled_shape"]
        assert ex["roi"] == p["roi"] and ex["roi_used"] == p["roi_used"]
        assert ex["ops"][0]["box"] == p["box"]


def test_plan_decode_errors():
    spec = ImageSpec(O.compile_ops([O.CenterCrop(8)]))
    with pytest.raises(ValueError, match="source size"):
        spec.plan_decode(0, 10)
    with pytest.raises(ValueError, match="larger than"):
        ImageSpec(O.compile_ops([O.RandomCrop(64)])).plan_decode(10, 10)


def test_constants_come_from_the_c_core():
    assert O.FQ_OP_DTYPE is _image.FQ_OP_DTYPE and O.FQ_OP_DTYPE.itemsize == 136
    assert O.DEFAULT_MAX_PIXELS == 1 << 26 and O.MAX_OPS == 16 and O.MAX_SIDE == 32768
    first = {"RandomResizedCrop": 1, "Resize": 2, "CenterCrop": 3, "RandomCrop": 4, "HorizontalFlip": 5,
             "VerticalFlip": 6, "ColorJitter": 7, "RandomAffine": 8, "Grayscale": 9, "Normalize": 10}
    assert {k: v for k, v in _image.OP_KINDS.items() if v <= 10} == first
    # the augmentation ops' table (fq_image_aug.cpp) continues the kinds after Normalize, densely
    assert sorted(_image.OP_KINDS.values()) == list(range(1, len(_image.OP_KINDS) + 1))
    # every op class of fastq.ops has its record in C under its own name
    for cls in (O.RandomResizedCrop, O.Resize, O.CenterCrop, O.RandomCrop, O.HorizontalFlip, O.VerticalFlip,
                O.ColorJitter, O.RandomAffine, O.Grayscale, O.Normalize):
        assert _image.OP_KINDS[cls.__name__] == cls.kind
    # OpenCV's INTER_* (then Pillow's resizes, fastq's own numbers) and the torchvision border
    # names (ops.md)
    assert O.INTERPOLATIONS == {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR,
                                "bicubic": cv2.INTER_CUBIC, "area": cv2.INTER_AREA,
                                "lanczos": cv2.INTER_LANCZOS4, "pil_nearest": 5, "pil_bilinear": 6,
                                "pil_bicubic": 7, "pil_lanczos": 8, "pil_box": 9, "pil_hamming": 10}
    assert O.BORDERS == {"constant": 0, "replicate": 1, "edge": 1, "reflect": 2, "symmetric": 3}
    assert O.DTYPES == ("uint8", "float32", "float16", "bfloat16")
    assert _image.FORMATS[2] == "jpeg" and _image.FORMATS[6] == "webp" and _image.FORMATS[0] == "unknown"


def test_ops_are_packed_by_field_name():
    with pytest.raises(ValueError, match="out_w"):
        _image.pack_ops([(O.K_RANDOM_RESIZED_CROP, {"out_h": 8})])
    with pytest.raises(ValueError, match="unknown parameters"):
        _image.pack_ops([(O.K_HFLIP, {"p": 0.5, "q": 1})])
    a = _image.pack_ops([(O.K_RANDOM_CROP, O.RandomCrop((4, 6), padding=(1, 2, 3, 4), fill=(5, 6, 7)).fields())])
    # the flat view follows the struct's field order in fq_image.h
    assert list(a[0]["f"][:11]) == [4, 6, 1, 2, 3, 4, 0, 0, 5, 6, 7]


def test_chain_rules_are_checked_once_in_c():
    c = _image.check_chain(_image.pack_ops([(O.K_HFLIP, {"p": 0.5})]))
    assert c["out_size"] is None and c["keeps_size"] and "fixed output size" in c["error"]
    c = _image.check_chain(_image.pack_ops([(k, o.fields()) for k, o in (
        (O.K_RESIZE, O.Resize(32)), (O.K_CENTER_CROP, O.CenterCrop((8, 9))), (O.K_NORMALIZE, O.Normalize()))]),
        "float16")
    assert c == {"out_size": (8, 9), "keeps_size": False, "normalize": True, "error": None}
    c = _image.check_chain(_image.pack_ops([(O.K_CENTER_CROP, {"out_h": 8, "out_w": 8}),
                                            (O.K_NORMALIZE, O.Normalize().fields())]), "uint8")
    assert "float dtype" in c["error"]
