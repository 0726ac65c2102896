"""Ops: each op against the independent cv2/numpy reference (tests/helpers/image_ref.py), random
parameter distributions, determinism, and parameter validation.

Tolerances: uint8 outputs must match the reference within 1 level (they are exact
where the same OpenCV routine runs; hue/saturation go through cv2's own cvtColor /
addWeighted, which may differ by one level between OpenCV builds); float32 within
1e-5 relative (the normalize table is computed in double and rounded once).
"""
import os

import numpy as np
import pytest

from helpers import image_ref as ref  # noqa: I100  (also puts the repo root on sys.path)
from fastq import ops as O

from fastq._native import _image  # noqa: E402
ImageSpec = _image.ImageSpec


def _photos():
    import cv2
    from fastq.bench.testdata import source_photos
    out = []
    for p in source_photos():
        if os.path.basename(p) in ("astronaut.png", "coffee.png", "chelsea.png", "china.jpg", "flower.jpg",
                                   "rocket.jpg", "camera.png"):
            img = cv2.imread(p, cv2.IMREAD_COLOR)
            out.append((os.path.basename(p), cv2.cvtColor(img, cv2.COLOR_BGR2RGB)))
    rng = np.random.default_rng(0)
    out.append(("noise", rng.integers(0, 256, (181, 263, 3), dtype=np.uint8)))
    out.append(("tiny", rng.integers(0, 256, (17, 9, 3), dtype=np.uint8)))
    return out


PHOTOS = _photos()


def spec_for(chain, **kw):
    return ImageSpec(O.compile_ops(chain, **kw))


def run_and_compare(chain, n=6, tol=1, photos=PHOTOS, channels=3, dtype="uint8", layout="NHWC", seed=3,
                    loose=None):
    """Compare with the reference.  ``loose=(mean, frac)``: instead of a max difference,
    require mean |diff| <= mean and at most ``frac`` of the values off by more than 1
    (used for warpAffine, whose OpenCV 4.6 fixed-point and cv2 5.x float paths differ)."""
    import cv2
    spec = spec_for(chain, dtype=dtype, layout=layout, channels=channels)
    for name, img in photos:
        src = img if channels == 3 else cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[:, :, None]
        for i in range(n):
            out, ex = spec.process_array(img, seed, 1, i)
            want = ref.finish(ref.replay(src, ex, chain), chain, dtype, layout)
            assert out.shape == want.shape == spec.out_shape
            if loose:
                d = np.abs(out.astype(int) - want.astype(int))
                assert d.mean() <= loose[0] and (d > 1).mean() <= loose[1], \
                    f"{name} sample {i}: mean diff {d.mean():.3f}, {(d > 1).mean():.2%} off by > 1; {ex['ops']}"
            elif dtype == "uint8":
                d = np.abs(out.astype(int) - want.astype(int)).max()
                assert d <= tol, f"{name} sample {i}: max diff {d} > {tol}; {ex['ops']}"
            else:
                np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6,
                                           err_msg=f"{name} sample {i}")


# ---- each op against the reference --------------------------------------------------

@pytest.mark.parametrize("interp", ["nearest", "bilinear", "bicubic", "area", "lanczos"])
def test_random_resized_crop(interp):
    # nearest/bilinear are bit-identical between Debian's OpenCV 4.6 and pip's cv2;
    # the other kernels differ by at most one level (SIMD/IPP paths)
    tol = 0 if interp in ("nearest", "bilinear") else 1
    run_and_compare([O.RandomResizedCrop((48, 40), interpolation=interp)], tol=tol)


def test_resize_exact_and_shorter_side():
    run_and_compare([O.Resize(40), O.CenterCrop(32)], n=2, tol=0)
    run_and_compare([O.Resize((30, 50), interpolation="area")], n=1, tol=0)
    spec = spec_for([O.Resize(shorter_side=64), O.CenterCrop(8)])
    _, ex = spec.process_array(np.zeros((100, 250, 3), np.uint8))
    assert ex["ops"][0]["out_shape"] == (64, 160)  # int(64 * 250 / 100)
    _, ex = spec.process_array(np.zeros((333, 100, 3), np.uint8))
    assert ex["ops"][0]["out_shape"] == (213, 64)  # int(64 * 333 / 100) = 213


def test_center_crop_including_padding():
    run_and_compare([O.CenterCrop((31, 44))], n=1, tol=0)
    spec = spec_for([O.CenterCrop((5, 4))], dtype="uint8")
    img = np.arange(7 * 8 * 3, dtype=np.uint8).reshape(7, 8, 3)
    out, ex = spec.process_array(img)
    assert ex["ops"][0]["box"] == (2, 1, 4, 5)  # round(4/2)=2, round(2/2)=1
    np.testing.assert_array_equal(out, img[1:6, 2:6])
    out, ex = spec_for([O.CenterCrop(12)], dtype="uint8").process_array(img)
    assert ex["ops"][0]["box"] == (-2, -2, 12, 12)
    np.testing.assert_array_equal(out[2:9, 2:10], img)
    assert out[:2].max() == 0 and out[:, :2].max() == 0 and out[9:].max() == 0


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_random_crop(mode):
    run_and_compare([O.RandomCrop((24, 30), padding=(3, 5), padding_mode=mode, fill=(10, 20, 30))], tol=0,
                    photos=PHOTOS[:-1])
    run_and_compare([O.RandomCrop(40, padding=(1, 2, 3, 4), pad_if_needed=True, padding_mode=mode)],
                    photos=PHOTOS[-1:], tol=0)


def test_random_crop_too_large_is_a_sample_error():
    from fastq.errors import InvalidArgumentError
    spec = spec_for([O.RandomCrop(32)])
    with pytest.raises(InvalidArgumentError, match="RandomCrop"):
        spec.process_array(np.zeros((20, 40, 3), np.uint8))


def test_flips_and_grayscale():
    run_and_compare([O.RandomResizedCrop(32), O.HorizontalFlip(0.5), O.VerticalFlip(0.5), O.Grayscale(0.5)],
                    n=8, tol=0)
    # flips deferred past pixel ops and materialized before a geometric op
    run_and_compare([O.HorizontalFlip(0.7), O.ColorJitter(0.4, 0.4), O.RandomCrop(16), O.VerticalFlip(0.6),
                     O.Grayscale(0.3)], n=8, tol=0, photos=PHOTOS[:-1])


def test_color_jitter():
    # hue goes through cvtColor HSV_FULL, where OpenCV 4.6 and cv2 5.x differ by one
    # level; later factors (saturation, contrast > 1) can stretch that to two
    run_and_compare([O.CenterCrop(64), O.ColorJitter(hue=0.2)], n=8, tol=1)
    run_and_compare([O.CenterCrop(64), O.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.2)],
                    n=8, tol=3)
    run_and_compare([O.CenterCrop(64), O.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5)], n=8, tol=0)
    run_and_compare([O.CenterCrop(64), O.ColorJitter(brightness=(0.2, 2.5), contrast=(0.0, 3.0))], n=4, tol=0)
    run_and_compare([O.CenterCrop(64), O.ColorJitter(0.4, 0.4, 0.4, 0.1)], n=4, tol=0, channels=1)


def test_color_jitter_records_order_and_factors():
    spec = spec_for([O.CenterCrop(8), O.ColorJitter(brightness=0.3, saturation=(0.5, 0.6), hue=0.1)])
    orders = set()
    for i in range(200):
        _, ex = spec.process_array(PHOTOS[0][1], 0, 0, i)
        j = ex["jitter"]
        assert sorted(j["order"]) == ["brightness", "hue", "saturation"]
        orders.add(tuple(j["order"]))
        assert 0.7 <= j["brightness"] < 1.3 and 0.5 <= j["saturation"] < 0.6 and -0.1 <= j["hue"] < 0.1
        assert j["contrast"] == 1.0
    assert len(orders) == 6  # all permutations occur


@pytest.mark.parametrize("border", ["constant", "reflect", "replicate", "symmetric"])
def test_random_affine(border):
    run_and_compare([O.CenterCrop((60, 80)),
                     O.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-10, 10, -5, 5),
                                    border=border, fill=(255, 0, 128))], n=5, loose=(0.5, 0.08),
                    photos=PHOTOS[:-2])
    # uniform noise is the worst case for interpolation rounding differences
    run_and_compare([O.CenterCrop((60, 80)), O.RandomAffine(25, scale=(0.8, 1.2), border=border)], n=3,
                    loose=(1.0, 0.3), photos=PHOTOS[-2:-1])
    run_and_compare([O.RandomResizedCrop(40), O.RandomAffine((-90, 90), interpolation="nearest")], n=3,
                    loose=(0.5, 0.01))


def test_normalize_dtypes_layouts():
    chain = [O.RandomResizedCrop(24), O.HorizontalFlip(), O.Normalize()]
    for dtype in ("float32", "float16"):
        for layout in ("NHWC", "NCHW"):
            run_and_compare(chain, n=3, dtype=dtype, layout=layout)
    run_and_compare([O.RandomResizedCrop(24), O.VerticalFlip()], n=3, dtype="float32", layout="NCHW")
    run_and_compare([O.RandomResizedCrop(24), O.HorizontalFlip()], n=3, dtype="uint8", layout="NCHW")
    run_and_compare([O.RandomResizedCrop(24), O.Normalize(0.5, 0.25)], n=3, channels=1, dtype="float32")
    spec = spec_for(chain, layout="NCHW", dtype="float16")
    assert spec.out_shape == (3, 24, 24) and spec.row_bytes == 3 * 24 * 24 * 2


def test_normalize_values():
    spec = spec_for([O.CenterCrop(2), O.Normalize(mean=(0.5, 0.25, 0), std=(0.5, 0.25, 2))])
    img = np.array([[[0, 255, 51], [255, 0, 102]], [[128, 64, 0], [1, 2, 3]]], np.uint8)
    out, _ = spec.process_array(img)
    want = ((img / 255.0 - np.array([0.5, 0.25, 0])) / np.array([0.5, 0.25, 2])).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    out, _ = spec_for([O.CenterCrop(2)]).process_array(img)  # float without Normalize: x / 255
    np.testing.assert_array_equal(out, (img / 255.0).astype(np.float32))


def test_array_inputs_gray_rgba_strided():
    spec = spec_for([O.CenterCrop(16)], dtype="uint8")
    rgb = PHOTOS[0][1]
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 7, np.uint8)])
    a, _ = spec.process_array(rgba)
    b, _ = spec.process_array(rgb)
    np.testing.assert_array_equal(a, b)  # alpha dropped
    c, _ = spec.process_array(rgb[::2, ::3])  # non-contiguous view
    d, _ = spec.process_array(np.ascontiguousarray(rgb[::2, ::3]))
    np.testing.assert_array_equal(c, d)
    g = rgb[:, :, 1].copy()
    e, _ = spec.process_array(g)
    assert (e[:, :, 0] == e[:, :, 1]).all() and (e[:, :, 1] == e[:, :, 2]).all()


# ---- distributions -------------------------------------------------------------

def test_random_resized_crop_distribution():
    spec = spec_for([O.RandomResizedCrop(4, scale=(0.2, 0.7), ratio=(0.5, 2.0))], dtype="uint8")
    img = np.zeros((350, 350, 3), np.uint8)
    areas, ratios, xs = [], [], []
    for i in range(2000):
        _, ex = spec.process_array(img, 11, 0, i)
        x, y, w, h = ex["crop_src"]
        assert 0 <= x and 0 <= y and x + w <= 350 and y + h <= 350
        areas.append(w * h / (350 * 350))
        ratios.append(w / h)
        xs.append(x / max(1, 350 - w))
    areas, ratios = np.array(areas), np.array(ratios)
    # rounding w and h to ints moves the area/aspect slightly outside the nominal range
    assert areas.min() >= 0.2 * 0.98 and areas.max() <= 0.7 * 1.02
    assert ratios.min() >= 0.5 * 0.97 and ratios.max() <= 2.0 * 1.03
    assert abs(np.median(np.log(ratios))) < 0.05  # log-uniform aspect, centred on 1
    assert 0.45 < np.mean(xs) < 0.55
    # with every try fitting (square crops of at most 70 % of a 300x400 image) the
    # area fraction is uniform on the scale range
    img = np.zeros((300, 400, 3), np.uint8)
    spec = spec_for([O.RandomResizedCrop(4, scale=(0.2, 0.7), ratio=(1, 1))], dtype="uint8")
    areas = []
    for i in range(2000):
        x, y, w, h = spec.process_array(img, 12, 0, i)[1]["crop_src"]
        assert w == h
        areas.append(w * h / (300 * 400))
    assert abs(np.mean(areas) - 0.45) < 0.01 and abs(np.median(areas) - 0.45) < 0.02


def test_random_resized_crop_fallback():
    # an extreme aspect the ratio range cannot reach in 10 tries: central, clamped crop
    spec = spec_for([O.RandomResizedCrop(4, scale=(0.99, 1.0), ratio=(1.0, 1.0))], dtype="uint8")
    _, ex = spec.process_array(np.zeros((10, 200, 3), np.uint8))
    assert ex["crop_src"] == (95, 0, 10, 10)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_flip_rate(p):
    spec = spec_for([O.CenterCrop(2), O.HorizontalFlip(p), O.VerticalFlip(1 - p)], dtype="uint8")
    img = np.zeros((2, 2, 3), np.uint8)
    h = v = 0
    for i in range(2000):
        _, ex = spec.process_array(img, 5, 2, i)
        h += ex["hflip"]
        v += ex["vflip"]
    assert abs(h / 2000 - p) < 0.04 and abs(v / 2000 - (1 - p)) < 0.04


def test_affine_distribution():
    spec = spec_for([O.CenterCrop(20), O.RandomAffine((-30, 10), translate=(0.5, 0), scale=(0.5, 2),
                                                      shear=(5, 6))])
    img = np.zeros((20, 20, 3), np.uint8)
    recs = [spec.process_array(img, 0, 0, i)[1]["ops"][1] for i in range(500)]
    ang = np.array([r["angle"] for r in recs])
    tx = np.array([r["translate"][0] for r in recs])
    assert ang.min() >= -30 and ang.max() < 10 and abs(ang.mean() + 10) < 2
    assert set(np.unique(tx)) <= set(range(-10, 11)) and all(r["translate"][1] == 0 for r in recs)
    assert all(0.5 <= r["scale"] < 2 and 5 <= r["shear"][0] < 6 and r["shear"][1] == 0 for r in recs)


# ---- determinism -----------------------------------------------------------------

def test_determinism():
    chain = [O.RandomResizedCrop(32), O.HorizontalFlip(), O.ColorJitter(0.4, 0.4, 0.4, 0.1),
             O.RandomAffine(10, translate=(0.1, 0.1)), O.Grayscale(0.2), O.Normalize()]
    spec_a, spec_b = spec_for(chain), spec_for(chain)
    img = PHOTOS[0][1]
    for i in range(20):
        a, ea = spec_a.process_array(img, 7, 3, i)
        b, eb = spec_b.process_array(img, 7, 3, i)
        assert a.tobytes() == b.tobytes() and ea == eb
    boxes = {spec_a.process_array(img, 7, 3, i)[1]["crop_src"] for i in range(50)}
    assert len(boxes) == 50  # different index -> different parameters
    e1 = [spec_a.process_array(img, 7, 3, i)[1]["crop_src"] for i in range(10)]
    e2 = [spec_a.process_array(img, 7, 4, i)[1]["crop_src"] for i in range(10)]
    e3 = [spec_a.process_array(img, 8, 3, i)[1]["crop_src"] for i in range(10)]
    assert e1 != e2 and e1 != e3


def test_threads_give_identical_bytes():
    from concurrent.futures import ThreadPoolExecutor
    chain = [O.RandomResizedCrop(32), O.HorizontalFlip(), O.ColorJitter(0.4, 0.4), O.Normalize()]
    spec = spec_for(chain)
    img = PHOTOS[1][1]
    serial = [spec.process_array(img, 1, 1, i)[0].tobytes() for i in range(40)]
    with ThreadPoolExecutor(4) as ex:
        par = list(ex.map(lambda i: spec.process_array(img, 1, 1, i)[0].tobytes(), range(40)))
    assert serial == par


# ---- validation --------------------------------------------------------------------

@pytest.mark.parametrize("make, match", [
    (lambda: O.RandomResizedCrop(224, scale=(0.9, 0.1)), r"RandomResizedCrop: scale must satisfy 0 < min <= max <= 1, got \(0.9, 0.1\)"),
    (lambda: O.RandomResizedCrop(224, scale=(0, 1)), "scale"),
    (lambda: O.RandomResizedCrop(224, ratio=(2, 1)), "ratio"),
    (lambda: O.RandomResizedCrop(0), "size"),
    (lambda: O.RandomResizedCrop((224,)), "size"),
    (lambda: O.RandomResizedCrop(224, interpolation="cubic"), "interpolation"),
    (lambda: O.Resize(), "exactly one"),
    (lambda: O.Resize(10, shorter_side=10), "exactly one"),
    (lambda: O.Resize(-3), "shorter_side"),
    (lambda: O.CenterCrop((10, 0)), "size"),
    (lambda: O.RandomCrop(10, padding=-1), "padding"),
    (lambda: O.RandomCrop(10, padding=(1, 2, 3)), "padding"),
    (lambda: O.RandomCrop(10, padding_mode="wrap"), "padding_mode"),
    (lambda: O.RandomCrop(10, fill=300), "fill"),
    (lambda: O.HorizontalFlip(1.5), "p must be"),
    (lambda: O.VerticalFlip(-0.1), "p must be"),
    (lambda: O.Grayscale(2), "p must be"),
    (lambda: O.ColorJitter(brightness=-1), "brightness"),
    (lambda: O.ColorJitter(contrast=(2, 1)), "contrast"),
    (lambda: O.ColorJitter(hue=0.6), "hue"),
    (lambda: O.ColorJitter(hue=(-0.6, 0)), "hue"),
    (lambda: O.RandomAffine(-5), "degrees"),
    (lambda: O.RandomAffine(5, translate=(1.5, 0)), "translate"),
    (lambda: O.RandomAffine(5, scale=(0, 1)), "scale"),
    (lambda: O.RandomAffine(5, shear=(10, 5)), "shear"),
    (lambda: O.RandomAffine(5, shear=(1, 2, 3)), "shear"),
    (lambda: O.RandomAffine(5, border="wrap"), "border"),
    (lambda: O.RandomAffine(5, interpolation="area"), "interpolation"),
    (lambda: O.Normalize(std=(1, 0, 1)), "std"),
    (lambda: O.Normalize(mean=(1, 2)), "mean"),
    (lambda: O.Normalize(mean=float("nan")), "mean"),
])
def test_invalid_params(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("chain, kw, match", [
    ([], {}, "empty"),
    ([O.HorizontalFlip()], {}, "fixed output size"),
    ([O.CenterCrop(8), O.Resize(32)], {}, "fixed output size"),
    ([O.Normalize(), O.CenterCrop(8)], {}, "Normalize must be the last op"),
    ([O.CenterCrop(8), O.Normalize()], {"dtype": "uint8"}, "float"),
    ([O.CenterCrop(8)], {"dtype": "float64"}, "dtype"),
    ([O.CenterCrop(8)], {"layout": "NWHC"}, "layout"),
    ([O.CenterCrop(8)], {"channels": 4}, "channels"),
    ([O.CenterCrop(8)], {"max_pixels": 0}, "max_pixels"),
    ([O.CenterCrop(8)] * 17, {}, "at most 16"),
    ([O.CenterCrop(8), "flip"], {}, "not a fastq.ops op"),
])
def test_invalid_chains(chain, kw, match):
    with pytest.raises(ValueError, match=match):
        O.compile_ops(chain, **kw)


def test_c_side_validation_is_a_value_error():
    # a hand-packed op that Python would have rejected is refused by the C core too
    bad = np.zeros(1, dtype=O.FQ_OP_DTYPE)
    bad[0]["kind"] = O.K_RANDOM_RESIZED_CROP
    bad[0]["f"][:7] = [224, 224, 0.9, 0.1, 0.75, 1.33, 1]
    with pytest.raises(ValueError, match="scale"):
        ImageSpec(bad)
    with pytest.raises(ValueError, match="unknown op kind"):
        ImageSpec([(max(_image.OP_KINDS.values()) + 1, [1, 2])])  # one past the last kind


def test_compiled_ops_packing():
    c = O.compile_ops([O.RandomResizedCrop((10, 20)), O.HorizontalFlip(0.25), O.Normalize()], layout="NCHW")
    assert c.out_shape == (3, 10, 20)
    assert c.packed_ops.dtype == O.FQ_OP_DTYPE and c.packed_ops.itemsize == 136
    assert list(c.packed_ops["kind"]) == [1, 5, 10]
    assert c.packed_ops[1]["f"][0] == 0.25
    spec = ImageSpec(c)
    assert spec.out_shape == (3, 10, 20) and spec.row_bytes == 3 * 10 * 20 * 4
