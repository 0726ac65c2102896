"""The uint8 augmentation primitives (csrc/image/color/fq_image_aug.cpp) against torchvision v2's
functional ops on uint8 tensors (SolarizeAdd: TF Model Garden's formula in numpy), their
random draws against the reference generator of tests/image/test_golden.py, determinism over
worker counts, and parameter validation.

Bounds (docs/ops.md "Augmentation primitives"): the table ops (Invert, AutoContrast,
Equalize, Posterize, Solarize, SolarizeAdd, Brightness) are exact; the float32 blends
(Color, Contrast, Sharpness) may differ by one level where torch's scalar and vector
kernels round differently (at most 0.1 % of values); the nearest-neighbour geometric ops
may pick the other neighbour where a source coordinate is within float32 noise of a
half-pixel tie (at most 0.5 % of pixels).
"""
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch  # torchvision v2 (on torch) is the reference

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from helpers.determinism import assert_same_for_1_and_2_workers  # noqa: I100
import fastq
from fastq._native import _image
from fastq import ops as O

torch = pytest.importorskip("torch", reason="torch is the reference implementation's runtime")
tvF = pytest.importorskip("torchvision.transforms.v2.functional",
                          reason="torchvision v2 is the independent reference for these ops")


def _photos():
    import cv2
    from fastq.bench.testdata import source_photos
    out = []
    for p in source_photos():
        if os.path.basename(p) in ("astronaut.png", "coffee.png", "chelsea.png", "camera.png"):
            img = cv2.imread(p, cv2.IMREAD_COLOR)
            out.append((os.path.basename(p), np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)[::2, ::2])))
    rng = np.random.default_rng(0)
    out.append(("noise", rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)))
    out.append(("tiny", rng.integers(0, 256, (3, 5, 3), dtype=np.uint8)))
    flat = np.full((20, 30, 3), 77, np.uint8)
    flat[0, 0] = (200, 77, 3)  # one odd pixel: equalize's step 0, autocontrast's max == min in G
    out.append(("flat", flat))
    return out


PHOTOS = _photos()
assert len(PHOTOS) >= 6, "the packaged photos of fastq.bench.testdata were not found"


def run_op(op, img, index=0, seed=1, channels=3, pre=()):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), *pre, op], dtype="uint8", channels=channels))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def tv(fn, img, *a, **k):
    t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()
    return fn(t, *a, **k).permute(1, 2, 0).numpy()


def shear_x(t, m, fill):
    return tvF.affine(t, angle=0.0, translate=[0, 0], scale=1.0, shear=[math.degrees(math.atan(m)), 0.0],
                      fill=fill, center=[0, 0])


def shear_y(t, m, fill):
    return tvF.affine(t, angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, math.degrees(math.atan(m))],
                      fill=fill, center=[0, 0])


def solarize_add_tf(img, addition, threshold):
    """official/vision/ops/augment.py solarize_add, in numpy."""
    added = np.clip(img.astype(np.int64) + addition, 0, 255).astype(np.uint8)
    return np.where(img < threshold, added, img)


# (op, reference(img, magnitude) -> uint8 HWC, tolerance class)
EXACT, BLEND, GEOM = "exact", "blend", "geom"
CASES = [
    (O.Invert(), lambda im, m: tv(tvF.invert, im), EXACT),
    (O.AutoContrast(), lambda im, m: tv(tvF.autocontrast, im), EXACT),
    (O.Equalize(), lambda im, m: tv(tvF.equalize, im), EXACT),
    (O.Posterize(0), lambda im, m: tv(tvF.posterize, im, 0), EXACT),
    (O.Posterize(3), lambda im, m: tv(tvF.posterize, im, 3), EXACT),
    (O.Posterize(8), lambda im, m: tv(tvF.posterize, im, 8), EXACT),
    (O.Solarize(128), lambda im, m: tv(tvF.solarize, im, 128.0), EXACT),
    (O.Solarize(255 * 0.3667), lambda im, m: tv(tvF.solarize, im, 255 * 0.3667), EXACT),
    (O.Solarize((0, 256)), lambda im, m: tv(tvF.solarize, im, m), EXACT),
    (O.SolarizeAdd(110, 128), lambda im, m: solarize_add_tf(im, 110, 128), EXACT),
    (O.SolarizeAdd(-40, 200), lambda im, m: solarize_add_tf(im, -40, 200), EXACT),
    (O.Brightness(1.37), lambda im, m: tv(tvF.adjust_brightness, im, 1.37), EXACT),
    (O.Brightness((0.1, 1.9)), lambda im, m: tv(tvF.adjust_brightness, im, m), EXACT),
    (O.Color(0.0), lambda im, m: tv(tvF.adjust_saturation, im, 0.0), BLEND),
    (O.Color((0.1, 1.9)), lambda im, m: tv(tvF.adjust_saturation, im, m), BLEND),
    (O.Contrast((0.1, 1.9)), lambda im, m: tv(tvF.adjust_contrast, im, m), BLEND),
    (O.Sharpness((0.1, 1.9)), lambda im, m: tv(tvF.adjust_sharpness, im, m), BLEND),
    (O.Sharpness(0.0), lambda im, m: tv(tvF.adjust_sharpness, im, 0.0), BLEND),
    (O.Rotate((-30, 30)), lambda im, m: tv(tvF.rotate, im, m, fill=0), GEOM),
    (O.Rotate(90, fill=(10, 20, 30)), lambda im, m: tv(tvF.rotate, im, 90.0, fill=[10., 20., 30.]), GEOM),
    (O.Rotate(135, fill=128), lambda im, m: tv(tvF.rotate, im, 135.0, fill=128), GEOM),
    (O.ShearX((-0.3, 0.3)), lambda im, m: tv(shear_x, im, m, 0), GEOM),
    (O.ShearY((-0.99, 0.99), fill=128), lambda im, m: tv(shear_y, im, m, 128), GEOM),
    (O.TranslateX((-50, 50)), lambda im, m: tv(tvF.affine, im, angle=0.0, translate=[int(m), 0], scale=1.0,
                                                 shear=[0.0, 0.0], fill=0), GEOM),
    (O.TranslateY(-7.9, fill=5), lambda im, m: tv(tvF.affine, im, angle=0.0, translate=[0, -7], scale=1.0,
                                                  shear=[0.0, 0.0], fill=5), GEOM),
]


def _check(out, want, tol, what):
    assert out.shape == want.shape, what
    d = np.abs(out.astype(int) - want.astype(int))
    if tol == EXACT:
        assert d.max() == 0, f"{what}: {int((d > 0).sum())} values differ"
    elif tol == BLEND:
        assert d.max() <= 1 and (d > 0).mean() <= 0.001, f"{what}: max {d.max()}, {(d > 0).mean():.3%} differ"
    else:
        px = d.max(axis=-1) > 0
        assert px.mean() <= 0.005, f"{what}: {px.mean():.3%} of pixels differ"


@pytest.mark.parametrize("case", range(len(CASES)), ids=[repr(c[0]) for c in CASES])
def test_op_matches_torchvision(case):
    op, ref, tol = CASES[case]
    for name, img in PHOTOS:
        for index in range(3):
            out, rec = run_op(op, img, index=index)
            assert rec["op"] == type(op).__name__ and rec["applied"] is True
            m = rec.get("magnitude")
            _check(out, ref(img, m), tol, f"{op!r} on {name}, index {index}, magnitude {m}")


GRAY_OPS = [(O.AutoContrast(), lambda im, m: tv(tvF.autocontrast, im)),
            (O.Equalize(), lambda im, m: tv(tvF.equalize, im)),
            (O.Contrast(1.7), lambda im, m: tv(tvF.adjust_contrast, im, 1.7)),
            (O.Color(0.2), lambda im, m: im),  # torchvision: saturation is a no-op on 1 channel
            (O.Sharpness(1.8), lambda im, m: tv(tvF.adjust_sharpness, im, 1.8)),
            (O.Rotate(20, fill=50), lambda im, m: tv(tvF.rotate, im, 20.0, fill=50))]


@pytest.mark.parametrize("case", range(len(GRAY_OPS)), ids=[repr(c[0]) for c in GRAY_OPS])
def test_one_channel_output(case):
    import cv2
    op, ref = GRAY_OPS[case]
    for name, img in PHOTOS[:3]:
        out, rec = run_op(op, img, channels=1)
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[:, :, None]  # what channels=1 feeds the ops
        _check(out, ref(gray, rec.get("magnitude")), GEOM if isinstance(op, O.Rotate) else BLEND, f"{op!r} {name}")


def test_a_pending_flip_is_done_before_a_geometric_op_and_commutes_with_pixel_ops():
    name, img = PHOTOS[0]
    out, _ = run_op(O.Rotate(25), img, pre=[O.HorizontalFlip(1.0)])
    _check(out, tv(tvF.rotate, img[:, ::-1], 25.0), GEOM, "hflip + rotate")
    out, _ = run_op(O.Equalize(), img, pre=[O.VerticalFlip(1.0)])
    _check(out, tv(tvF.equalize, img[::-1]), EXACT, "vflip + equalize")


def test_draws_follow_the_reference_generator():
    from helpers.golden_ref import RefRng
    img = PHOTOS[4][1]
    for index in range(40):
        _, rec = run_op(O.Rotate((-30, 30), p=0.6), img, index=index, seed=9)
        r = RefRng(9, 0, index)
        applied = r.uniform() < 0.6
        assert rec["applied"] is applied
        if applied:
            assert rec["magnitude"] == r.uniform_range(-30.0, 30.0)
        else:
            assert rec["magnitude"] == -30.0  # not drawn: the lower end is reported
            out, _ = run_op(O.Rotate((-30, 30), p=0.6), img, index=index, seed=9)
            assert np.array_equal(out, img)
        _, rec = run_op(O.TranslateX((-10, 10)), img, index=index, seed=9)
        r = RefRng(9, 0, index)
        r.uniform()
        assert rec["magnitude"] == math.trunc(r.uniform_range(-10.0, 10.0))


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_probability(p):
    img = PHOTOS[4][1]
    n = 400
    hits = sum(run_op(O.Invert(p), img, index=i)[1]["applied"] for i in range(n))
    if p in (0.0, 1.0):
        assert hits == n * p
    else:
        assert abs(hits - n * p) <= 4 * math.sqrt(n * p * (1 - p))  # 4 sigma


def test_one_and_two_workers_are_bit_identical():
    imgs = [img for _, img in PHOTOS[:4]]
    imgs = [np.ascontiguousarray(i[:96, :96]) for i in imgs if i.shape[0] >= 96 and i.shape[1] >= 96] * 4
    chain = [O.RandomResizedCrop(64), O.HorizontalFlip(), O.Rotate((-30, 30), p=0.5), O.ShearX((-0.3, 0.3), p=0.5),
             O.TranslateY((-20, 20), p=0.5), O.Equalize(0.5), O.AutoContrast(0.5), O.Posterize(4, 0.5),
             O.Solarize((0, 256), 0.5), O.Color((0.1, 1.9), 0.5), O.Contrast((0.1, 1.9), 0.5),
             O.Sharpness((0.1, 1.9), 0.5), O.Brightness((0.1, 1.9), 0.5), O.Invert(0.3), O.SolarizeAdd(60, 128, 0.3)]
    chain2 = [O.RandomResizedCrop(64), O.HorizontalFlip(), O.RandAugment(), O.TrivialAugmentWide(), O.Gamma((0.5, 2)),
              O.Cutout(10, p=0.5), O.Lighting(0.3), O.GaussianBlur(5, p=0.5), O.AutoAugment()]
    for c in (chain, chain2):
        assert_same_for_1_and_2_workers(imgs, c)


BAD = [
    (lambda: O.Invert(1.5), "Invert: p must be a probability"),
    (lambda: O.Posterize(9), "Posterize: bits must be an int in"),
    (lambda: O.Posterize(3.5), "Posterize: bits must be an int in"),
    (lambda: O.Solarize(300), "Solarize: threshold must be"),
    (lambda: O.Solarize((200, 100)), "Solarize: threshold must be"),
    (lambda: O.SolarizeAdd(300), "SolarizeAdd: addition must be"),
    (lambda: O.SolarizeAdd(10, threshold=-1), "SolarizeAdd: threshold must be"),
    (lambda: O.Brightness(-0.5), "Brightness: factor must be"),
    (lambda: O.Color(float("nan")), "Color: factor must be"),
    (lambda: O.Contrast("x"), "Contrast: factor must be"),
    (lambda: O.Sharpness((1, 2, 3)), "Sharpness: factor must be"),
    (lambda: O.Rotate(float("inf")), "Rotate: angle must be"),
    (lambda: O.ShearX(150), "ShearX: level must be"),
    (lambda: O.ShearY(0.1, fill=300), "ShearY: fill must be"),
    (lambda: O.TranslateX(1e9), "TranslateX: pixels must be"),
    (lambda: O.TranslateY(3, p=-1), "TranslateY: p must be"),
]


@pytest.mark.parametrize("make,msg", BAD, ids=[m for _, m in BAD])
def test_bad_parameters_raise_naming_op_and_argument(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_the_c_core_refuses_bad_packed_parameters_too():
    # bypassing the Python checks: fq_img_chain_check names the op and the reason
    bad = dict(O.Posterize(3).fields(), bits=2.5)
    with pytest.raises(ValueError, match=r"op 1 \(Posterize\): bits must be an integer"):
        _image.ImageSpec(O.CompiledOps((), _image.pack_ops([(O.CenterCrop(4).kind, O.CenterCrop(4).fields()),
                                                             (O.Posterize.kind, bad)]),
                                       3, "uint8", "NHWC", 1 << 26, True, (4, 4, 3)))


# ---- Gamma, Cutout, Lighting ---------------------------------------------------------------

@pytest.mark.parametrize("gamma,gain", [(0.5, 1.0), (2.2, 1.0), ((0.3, 3.0), 1.0), (0.8, 1.3)])
def test_gamma_matches_torchvision(gamma, gain):
    for name, img in PHOTOS:
        out, rec = run_op(O.Gamma(gamma, gain=gain), img, index=2)
        want = tv(tvF.adjust_gamma, img, rec["magnitude"], gain)
        # torch's vectorised pow (Sleef) and libm's powf may differ in the last ulp
        _check(out, want, BLEND, f"Gamma({gamma}, {gain}) on {name}")


def test_cutout_matches_tf_model_garden():
    from helpers.golden_ref import RefRng
    for name, img in PHOTOS:
        H, W = img.shape[:2]
        for index in range(6):
            out, rec = run_op(O.Cutout(12, fill=(128, 0, 7), p=0.8), img, index=index, seed=4)
            r = RefRng(4, 0, index)
            if not r.uniform() < 0.8:
                assert rec["applied"] is False and np.array_equal(out, img)
                continue
            cy, cx = r.below(H), r.below(W)
            # official/vision/ops/augment.py cutout: pads around the square, then a mask
            lower, upper = max(0, cy - 12), max(0, H - cy - 12)
            left, right = max(0, cx - 12), max(0, W - cx - 12)
            want = img.copy()
            want[lower:H - upper, left:W - right] = (128, 0, 7)
            assert np.array_equal(out, want), (name, index)
            assert rec["box"] == (left, lower, W - right - left, H - upper - lower)


def test_lighting_matches_tensorpack():
    ia = pytest.importorskip("tensorpack.dataflow.imgaug", reason="tensorpack is the reference for Lighting")
    from helpers.golden_ref import RefRng
    ref = ia.Lighting(0.1, eigval=np.asarray(O.LIGHTING_EIGVAL), eigvec=np.asarray(O.LIGHTING_EIGVEC, "float32"))
    for name, img in PHOTOS:
        for index in range(4):
            out, rec = run_op(O.Lighting(0.1), img, index=index, seed=2)
            r = RefRng(2, 0, index)
            r.uniform()
            alpha = []
            for _ in range(3):
                u1, u2 = r.uniform(), r.uniform()
                alpha.append(math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2) * 0.1)
            alpha = np.asarray(alpha, np.float32)  # tensorpack draws float32 alphas too
            np.testing.assert_array_equal(np.asarray(rec["alpha"], np.float32), alpha)
            want = ref._augment(img, alpha)
            d = np.abs(out.astype(int) - want.astype(int))
            # the increment is summed in another order than numpy's dot: an x + inc landing
            # within 1e-12 of an integer could truncate the other way
            assert d.max() <= 1 and (d > 0).mean() <= 1e-4, (name, index, d.max())


@pytest.mark.parametrize("make,msg", [
    (lambda: O.Gamma(-1), "Gamma: gamma must be"),
    (lambda: O.Gamma(1, gain=-2), "Gamma: gain must be"),
    (lambda: O.Cutout(-3), "Cutout: pad_size must be an int"),
    (lambda: O.Cutout(3, fill=256), "Cutout: fill must be"),
    (lambda: O.Lighting(std=-0.1), "Lighting: std must be"),
    (lambda: O.Lighting(eigval=(1, 2)), "Lighting: eigval must be 3"),
    (lambda: O.Lighting(eigvec=((1, 2, 3),)), "Lighting: eigvec must be 3 x 3"),
])
def test_bad_parameters_of_gamma_cutout_lighting(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


@pytest.mark.parametrize("ks,sigma", [(3, 0.8), (5, (0.1, 2.0)), ((7, 3), 1.3), (9, 3.0), (1, 1.0), (23, 5.0)])
def test_gaussian_blur_matches_torchvision(ks, sigma):
    k = [ks, ks] if isinstance(ks, int) else list(ks)
    for name, img in PHOTOS:
        for index in range(2):
            out, rec = run_op(O.GaussianBlur(ks, sigma), img, index=index)
            if img.shape[1] <= k[0] // 2 or img.shape[0] <= k[1] // 2:
                # torchvision refuses (reflect padding larger than the image); fastq leaves it
                assert np.array_equal(out, img)
                continue
            want = tv(tvF.gaussian_blur, img, k, [rec["magnitude"]] * 2)
            # torch sums the 2-D kernel in another order (and its exp is Sleef's): a value
            # within float noise of .5 may round the other way (measured: <= 3e-5 of values)
            _check(out, want, BLEND, f"GaussianBlur({ks}, {sigma}) on {name}")


@pytest.mark.parametrize("make,msg", [
    (lambda: O.GaussianBlur(4), "GaussianBlur: kernel_size must be odd"),
    (lambda: O.GaussianBlur((3, 301)), "GaussianBlur: kernel_size must be an int in"),
    (lambda: O.GaussianBlur(3, sigma=0), "GaussianBlur: sigma must be"),
])
def test_bad_gaussian_blur(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()
