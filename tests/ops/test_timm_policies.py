"""TimmRandAugment (csrc/image/color/fq_image_aug_timm_policy.cpp, its ops in
fq_image_aug_timm_ops.cpp, sampler in csrc/image/geometry/fq_image_pil_affine.cpp) against timm 1.0's own auto_augment.py
(AugmentOp, RandAugment, rand_augment_transform, create_transform) on Pillow.

* each timm op at fixed magnitudes, both signs, both resamples: fastq's image vs timm's
  AugmentOp applied to the same PIL image (its ``random.random`` pinned to pick the sign
  fastq drew): bit-exact (max abs diff 0) on noise, photos and odd sizes;
* whole policies (timm's objects through ``from_timm``): each sample's explain record
  replayed through timm's op functions: bit-exact;
* the draws: op choice uniform (chi-square), the prob skip rate, the magnitude
  distribution (clip(N(9, 0.5), 0, 10) and uniform for mstd inf), signs, resamples;
* from_timm on create_transform and on the configurations it refuses;
* 1 vs 2 workers bit-identical."""
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch  # timm imports torch

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from helpers.determinism import assert_same_for_1_and_2_workers  # noqa: I100
from fastq._native import _image
from fastq import ops as O

A = pytest.importorskip("timm.data.auto_augment", reason="timm is the reference (pip install timm)")
from PIL import Image  # noqa: E402
import PIL  # noqa: E402

PIL_13 = tuple(int(x) for x in PIL.__version__.split(".")[:2]) >= (13, 0)
RESAMPLE = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}
FILL = (124, 116, 104)  # create_transform's img_mean for the ImageNet mean
SIGNED = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel", "TranslateYRel",
          "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing")
# chi-square critical values at p = 0.001 by degrees of freedom
CHI2_001 = {14: 36.12, 1: 10.83}


def _images():
    import cv2
    from fastq.bench.testdata import source_photos
    rng = np.random.default_rng(0)
    out = [("noise", rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)),
           ("noise_tall", rng.integers(0, 256, (41, 16, 3), dtype=np.uint8))]
    for p in source_photos():
        if os.path.basename(p) in ("astronaut.png", "coffee.png"):
            img = cv2.imread(p, cv2.IMREAD_COLOR)
            out.append((os.path.basename(p), np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)[::5, ::5])))
    return out


IMAGES = _images()


def run(op, img, index, seed=5):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def timm_op(name, magnitude, resample, negate, img, hparams=None):
    """timm's own AugmentOp(name, prob=1, magnitude) on img, its random.random pinned so that
    _randomly_negate negates iff `negate`; PosterizeIncreasing at 0 bits: Pillow < 13 gives
    black, Pillow 13 raises (checked), fastq keeps timm's intent (black)"""
    hp = dict(translate_const=20, img_mean=FILL, interpolation=RESAMPLE[resample])
    hp.update(hparams or {})
    op = A.AugmentOp(name, prob=1.0, magnitude=magnitude, hparams=hp)
    saved = A.random.random
    A.random.random = lambda: 0.9 if negate else 0.1
    try:
        return np.asarray(op(Image.fromarray(img)))
    except ValueError:
        assert PIL_13 and name.startswith("Posterize"), name
        return np.zeros_like(img)
    finally:
        A.random.random = saved


def _negated(name, arg):
    if name.endswith("Increasing") and not name.startswith(("Posterize", "Solarize")):
        return arg < 1.0
    return math.copysign(1.0, arg) < 0


@pytest.mark.parametrize("resample", ["bilinear", "bicubic"])
@pytest.mark.parametrize("name", O.TIMM_OPS)
def test_each_op_matches_timm_augment_op(name, resample):
    signs = set()
    for mag in (0, 2.5, 5, 7.3, 9, 10):
        op = O.TimmRandAugment(num_layers=1, magnitude=mag, prob=1.0, magnitude_std=0, ops=[name],
                               interpolation=resample, fill=FILL, translate_const=20)
        for label, img in IMAGES:
            for index in range(3):
                out, rec = run(op, img, index)
                (layer,) = rec["policy"]
                assert layer["op"] == name and layer["applied"] and layer["level"] == mag
                neg = _negated(name, layer["magnitude"])
                if mag > 0:
                    signs.add(neg)
                if name == "GaussianBlurRand":  # the radius timm's op draws: fastq's, recorded
                    f = layer["magnitude"]
                    assert min(0.1, 2 * f) <= layer["radius"] <= max(0.1, 2 * f)
                    want = np.asarray(A.gaussian_blur(Image.fromarray(img), layer["radius"]))
                else:
                    want = timm_op(name, mag, resample, neg, img)
                d = np.abs(out.astype(int) - want.astype(int))
                assert d.max() == 0, f"{name} {resample} m={mag} {label}#{index}: {int((d > 0).sum())} differ"
    if name in SIGNED:
        assert signs == {True, False}, signs


@pytest.mark.parametrize("resample", ["bilinear", "bicubic"])
def test_pil_affine_sampler_random_geometry(resample):
    """the Pillow sampler over random arguments: magnitudes uniform in [0, 60] (rotations to 180
    deg, shears to 1.8, translations past the image, fractional translations of odd sizes),
    random sizes down to 1 x 1: bit-exact with timm's functions on Pillow"""
    rng = np.random.default_rng(7)
    op = O.TimmRandAugment(num_layers=1, magnitude=60, prob=1.0, magnitude_std=float("inf"), magnitude_max=60,
                           ops=["Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel",
                                "TranslateYRel"], interpolation=resample, fill=FILL, translate_const=20)
    for case in range(60):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        out, rec = run(op, img, case)
        want = _replay(op, img, rec, None)
        assert np.array_equal(out, want), (case, (h, w), rec["policy"])


def test_posterize_increasing_at_zero_bits_is_black():
    op = O.TimmRandAugment(num_layers=1, magnitude=10, prob=1.0, magnitude_std=0, ops=["PosterizeIncreasing"])
    img = IMAGES[0][1]
    out, rec = run(op, img, 0)
    assert rec["policy"][0]["magnitude"] == 0 and not out.any()
    if PIL_13:  # what timm's op does on Pillow 13 (documented in docs/ops.md)
        with pytest.raises(ValueError):
            A.AugmentOp("PosterizeIncreasing", prob=1.0, magnitude=10)(Image.fromarray(img))


def test_level_functions_match_timm():
    """each argument fastq draws is timm's LEVEL_TO_ARG at the recorded level (sign aside)"""
    hp = dict(translate_const=20, translate_pct=0.45)
    op = O.TimmRandAugment(num_layers=4, magnitude=8, prob=1.0, magnitude_std=2.0, ops=O.TIMM_OPS,
                           translate_const=20)
    for index in range(300):
        _, rec = run(op, IMAGES[0][1][:8, :8], index)
        for layer in rec["policy"]:
            fn = A.LEVEL_TO_ARG[layer["op"]]
            if fn is None:
                continue
            saved = A.random.random
            A.random.random = lambda: 0.9 if _negated(layer["op"], layer["magnitude"]) else 0.1
            try:
                want = fn(layer["level"], hp)[0]
            finally:
                A.random.random = saved
            assert layer["magnitude"] == pytest.approx(want, abs=1e-12), layer


def _replay(op, img, rec, hparams):
    cur = Image.fromarray(img)
    for layer in rec["policy"]:
        if not layer["applied"]:
            continue
        name, arg = layer["op"], layer["magnitude"]
        kw = dict(fillcolor=tuple(int(v) for v in op.fill), resample=RESAMPLE[layer.get("resample", "bilinear")])
        if A.LEVEL_TO_ARG[name] is None:
            cur = A.NAME_TO_OP[name](cur, **kw)
        elif name == "GaussianBlurRand":
            cur = A.gaussian_blur(cur, layer["radius"])
        elif name.startswith("Posterize") and arg == 0:
            cur = Image.fromarray(np.zeros_like(np.asarray(cur)))
        else:
            cur = A.NAME_TO_OP[name](cur, int(arg) if name.startswith(("Posterize", "Solarize")) else arg, **kw)
    return np.asarray(cur)


def _timm_ra(config="rand-m9-mstd0.5-inc1", interpolation="bicubic"):
    from timm.data import create_transform
    t = create_transform(224, is_training=True, auto_augment=config, interpolation=interpolation)
    (ra,) = [x for x in t.transforms if isinstance(x, A.RandAugment)]
    return ra


@pytest.mark.parametrize("config,interp", [("rand-m9-mstd0.5-inc1", "bicubic"), ("rand-m7-n3-mstd1", "random"),
                                           ("rand-m10-n4-p0.8-mstd101-inc1", "bilinear"),
                                           ("rand-m9-n3-mstd0.5-t3a", "bicubic")])
def test_timm_policy_replay(config, interp):
    op = O.TimmRandAugment.from_timm(_timm_ra(config, interp))
    for label, img in IMAGES:
        for index in range(15):
            out, rec = run(op, img, index)
            want = _replay(op, img, rec, None)
            d = np.abs(out.astype(int) - want.astype(int))
            assert d.max() == 0, f"{config} {label}#{index} {rec['policy']}: {int((d > 0).sum())} differ"


def test_after_a_flip():
    """a pending (lazy) flip is applied before the policy's position-dependent ops"""
    op = O.TimmRandAugment(num_layers=4, magnitude=8, prob=1.0, interpolation="bicubic", fill=FILL)
    for label, img in IMAGES[:2]:
        h, w = img.shape[:2]
        for flip, ref in ((O.HorizontalFlip(1.0), img[:, ::-1]), (O.VerticalFlip(1.0), img[::-1])):
            spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), flip, op], dtype="uint8"))
            for index in range(10):
                out, ex = spec.process_array(img, 5, 0, index)
                want = _replay(op, np.ascontiguousarray(ref), ex["ops"][-1], None)
                assert np.array_equal(out, want), (label, index, ex["ops"][-1])


def _records(op, n, seed=9):
    img = np.zeros((4, 4, 3), np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((4, 4)), op], dtype="uint8"))
    return [spec.process_array(img, seed, 0, i)[1]["ops"][-1]["policy"] for i in range(n)]


def test_draw_statistics_match_timm_parameters():
    ra = _timm_ra()
    op = O.TimmRandAugment.from_timm(ra)
    n = 6000
    layers = [layer for rec in _records(op, n) for layer in rec]
    assert len(layers) == 2 * n
    # op choice: uniform over timm's 15 ops (np.random.choice, replace=True)
    names = [o.name for o in ra.ops]
    counts = np.array([sum(layer["op"] == nm for layer in layers) for nm in names])
    assert counts.sum() == len(layers)
    e = len(layers) / len(names)
    assert ((counts - e) ** 2 / e).sum() < CHI2_001[14], counts
    # prob 0.5: applied iff random() <= 0.5
    applied = [layer for layer in layers if layer["applied"]]
    k = len(applied)
    assert abs(k - 0.5 * len(layers)) < 4 * math.sqrt(len(layers) * 0.25), k
    # magnitude: clip(gauss(9, 0.5), 0, 10), timm's AugmentOp parameters
    assert {o.magnitude for o in ra.ops} == {9} and {o.magnitude_std for o in ra.ops} == {0.5}
    lv = np.array([layer["level"] for layer in applied])
    ref = np.clip(np.random.default_rng(1).normal(9, 0.5, 10 ** 6), 0, 10)
    assert abs(lv.mean() - ref.mean()) < 4 * ref.std() / math.sqrt(k), (lv.mean(), ref.mean())
    assert abs(lv.std() - ref.std()) < 0.03, (lv.std(), ref.std())
    p10 = (ref == 10).mean()  # P(N(9, .5) > 10) = 2.3%: clipped to magnitude_max 10
    assert abs((lv == 10).mean() - p10) < 4 * math.sqrt(p10 * (1 - p10) / k)
    assert lv.min() >= 0 and lv.max() <= 10
    # signs: negated iff random() > 0.5
    signed = [_negated(layer["op"], layer["magnitude"]) for layer in applied if layer["op"] in SIGNED]
    assert abs(np.mean(signed) - 0.5) < 4 * math.sqrt(0.25 / len(signed))
    # bicubic (create_transform's interpolation): every geometric op resamples bicubic
    assert {layer["resample"] for layer in applied if "resample" in layer} == {"bicubic"}


def _weighted_marginals(p):
    """P(first = j) and P(second = j) of successive draws without replacement from p"""
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(len(p)) if i != j) for j in range(len(p))])
    return p, second


def test_weighted_choice_without_replacement():
    """'tweights': timm's _RAND_WEIGHTED_0, np.random.choice(p, replace=False): no op twice in a
    sample; first and second layers' frequencies those of successive weighted draws (numpy's
    own sampler checked against the same marginals)"""
    ra = A.rand_augment_transform("rand-m9-mstd0.5-tweights", None)
    op = O.TimmRandAugment.from_timm(ra)
    assert op.choice_weights == "weights" and op.ops == tuple(o.name for o in ra.ops)
    names = [o.name for o in ra.ops]
    first, second = _weighted_marginals(np.asarray(ra.choice_weights))
    n = 6000
    recs = _records(op, n)
    assert all(r[0]["op"] != r[1]["op"] for r in recs)
    crit = 36.12  # 14 dof, p = 0.001
    for k, want in ((0, first), (1, second)):
        got = np.array([sum(r[k]["op"] == nm for r in recs) for nm in names])
        e = want * n
        assert ((got - e) ** 2 / e).sum() < crit, (k, got, e.round())
    rs = np.random.RandomState(0)
    draws = np.array([rs.choice(len(names), 2, replace=False, p=ra.choice_weights) for _ in range(n)])
    for k, want in ((0, first), (1, second)):
        got = np.bincount(draws[:, k], minlength=len(names))
        assert ((got - want * n) ** 2 / (want * n)).sum() < crit, ("numpy", k)
    with pytest.raises(ValueError, match="num_layers must be <= len"):
        O.TimmRandAugment(num_layers=3, ops=["Rotate", "ShearX"], choice_weights="weights")
    with pytest.raises(ValueError, match="have no weight"):
        O.TimmRandAugment(ops=["Rotate", "Posterize"], choice_weights="weights")


def test_uniform_magnitude_and_random_resample():
    op = O.TimmRandAugment(num_layers=2, magnitude=8, prob=1.0, magnitude_std=float("inf"))
    layers = [layer for rec in _records(op, 3000) for layer in rec]
    lv = np.array([layer["level"] for layer in layers])
    assert lv.min() >= 0 and lv.max() < 8
    assert abs(lv.mean() - 4) < 4 * (8 / math.sqrt(12)) / math.sqrt(len(lv))  # uniform(0, 8)
    assert abs(lv.std() - 8 / math.sqrt(12)) < 0.1
    rs = [layer["resample"] == "bicubic" for layer in layers if "resample" in layer]
    assert abs(np.mean(rs) - 0.5) < 4 * math.sqrt(0.25 / len(rs))  # random.choice((BILINEAR, BICUBIC))


def test_from_timm_create_transform():
    op = O.TimmRandAugment.from_timm(_timm_ra())
    assert op.num_layers == 2 and op.magnitude == 9 and op.prob == 0.5 and op.magnitude_std == 0.5
    assert op.magnitude_max is None and op.ops == O.TimmRandAugment().ops
    assert op.interpolation == "bicubic" and op.fill == FILL and op.translate_pct == 0.45
    rnd = O.TimmRandAugment.from_timm(_timm_ra("rand-m7-n3-mstd101", "random"))
    assert rnd.interpolation == "random" and rnd.magnitude_std == float("inf") and rnd.num_layers == 3
    assert rnd.ops == tuple(A._RAND_TRANSFORMS)
    plain = O.TimmRandAugment.from_timm(A.rand_augment_transform("rand-m9-mstd0.5-inc1", None))
    assert plain.fields() == O.TimmRandAugment().fields()  # the defaults are timm's defaults
    import fastq.ops
    assert getattr(fastq.ops, "TimmRandAugment").from_timm(_timm_ra()).fields() == op.fields()


def _rename(ra):
    ra.ops[2].name = "Cutout"
    return ra


def _reweight(ra):
    ra.choice_weights = np.full(len(ra.ops), 1 / len(ra.ops))
    return ra


def _with(ra, **attrs):
    for k, v in attrs.items():
        setattr(ra.ops[1], k, v)
    return ra


@pytest.mark.parametrize("make,msg", [
    (lambda: _reweight(A.rand_augment_transform("rand-m9-tweights", None)), "not timm's 'weights' table"),
    (lambda: A.rand_augment_transform("rand-m9-t3aw", None), "only timm's 'weights' table"),
    (lambda: _rename(A.rand_augment_transform("rand-m9", None)), "'Cutout' is not implemented"),
    (lambda: A.rand_augment_transform("rand-m9-n5", None), "num_layers"),
    (lambda: _with(_timm_ra(), prob=0.7), "prob differ"),
    (lambda: _with(_timm_ra(), magnitude=3), "magnitude differ"),
    (lambda: _with(_timm_ra(), magnitude_std=1.0), "magnitude_std differ"),
    (lambda: A.rand_augment_transform("rand-m9", dict(img_mean=FILL, interpolation=Image.Resampling.NEAREST)),
     "resample"),
    (lambda: A.RandAugment(A.rand_augment_ops(9, transforms=["Rotate", "Rotate"]), 2), "repeated"),
    (lambda: object(), "expected timm's RandAugment"),
])
def test_from_timm_refuses(make, msg):
    with pytest.raises(ValueError, match=msg):
        O.TimmRandAugment.from_timm(make())


@pytest.mark.parametrize("make,msg", [
    (lambda: O.TimmRandAugment(num_layers=5), "num_layers"),
    (lambda: O.TimmRandAugment(ops=["Cutout"]), "'Cutout' is not implemented"),
    (lambda: O.TimmRandAugment(ops="Rotate"), "not a string"),
    (lambda: O.TimmRandAugment(interpolation="nearest"), "interpolation"),
    (lambda: O.TimmRandAugment(fill=1.5), "fill"),
    (lambda: O.TimmRandAugment(prob=2), "prob"),
])
def test_constructor_refuses(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_one_and_two_workers_identical():
    imgs = [img for _, img in IMAGES] * 3
    chain = [O.CenterCrop((16, 16)), O.TimmRandAugment(), O.TimmRandAugment(num_layers=4, magnitude=10, prob=0.9,
                                                                          magnitude_std=float("inf")),
             O.TimmRandAugment(num_layers=3, choice_weights="weights")]
    assert_same_for_1_and_2_workers(imgs, chain)


# ---- TimmAutoAugment ------------------------------------------------------------------------

def _timm_aa(config, interpolation="bicubic"):
    from timm.data import create_transform
    t = create_transform(224, is_training=True, auto_augment=config, interpolation=interpolation)
    (aa,) = [x for x in t.transforms if isinstance(x, A.AutoAugment)]
    return aa


@pytest.mark.parametrize("policy", list(O.TIMM_AUTOAUGMENT_POLICIES))
def test_auto_augment_replay_and_tables(policy):
    """the sub-policy drawn, its ops (names, levels = timm's magnitudes without mstd) are
    timm's table; each sample replayed through timm's op functions: bit-exact"""
    aa = _timm_aa(policy)
    op = O.TimmAutoAugment.from_timm(aa)
    assert op.policy == policy and op.interpolation == "bicubic" and op.fill == FILL and op.magnitude_std == 0
    for label, img in IMAGES:
        for index in range(25):
            out, rec = run(op, img, index)
            sub = aa.policy[rec["subpolicy"]]
            assert [layer["op"] for layer in rec["policy"]] == [o.name for o in sub]
            assert len(aa.policy) == (3 if policy == "3a" else 25)
            for layer, o in zip(rec["policy"], sub):
                if layer["applied"]:
                    assert layer["level"] == o.magnitude
            want = _replay(op, img, rec, None)
            d = np.abs(out.astype(int) - want.astype(int))
            assert d.max() == 0, f"{policy} {label}#{index} {rec}: {int((d > 0).sum())} differ"


def test_auto_augment_draw_statistics():
    aa = _timm_aa("v0r-mstd0.5")
    op = O.TimmAutoAugment.from_timm(aa)
    assert op.policy == "v0r" and op.magnitude_std == 0.5
    n = 5000
    img = np.zeros((4, 4, 3), np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((4, 4)), op], dtype="uint8"))
    recs = [spec.process_array(img, 9, 0, i)[1]["ops"][-1] for i in range(n)]
    counts = np.bincount([r["subpolicy"] for r in recs], minlength=25)
    e = n / 25
    assert ((counts - e) ** 2 / e).sum() < 51.18, counts  # chi-square, 24 dof, p = 0.001
    # each op applied with its prob (AugmentOp: skipped iff random() > prob)
    chi2, dof = 0.0, 0
    for sp, sub in enumerate(aa.policy):
        mine = [r for r in recs if r["subpolicy"] == sp]
        for k, o in enumerate(sub):
            got = sum(r["policy"][k]["applied"] for r in mine)
            if o.prob in (0.0, 1.0):
                assert got == (len(mine) if o.prob == 1.0 else 0), (sp, k)
                continue
            chi2 += (got - o.prob * len(mine)) ** 2 / (o.prob * (1 - o.prob) * len(mine))
            dof += 1
    assert chi2 < dof + 4 * math.sqrt(2 * dof), (chi2, dof)
    # magnitudes: clip(N(m, 0.5), 0, 10) around each op's table magnitude
    dev = np.array([layer["level"] - o.magnitude for r in recs for layer, o in zip(r["policy"],
                    aa.policy[r["subpolicy"]]) if layer["applied"] and 1 <= o.magnitude <= 9])
    assert abs(dev.mean()) < 4 * 0.5 / math.sqrt(len(dev)) and abs(dev.std() - 0.5) < 0.03


@pytest.mark.parametrize("make,msg", [
    (lambda: _aa_drop(A.auto_augment_transform("3a", None)), "not one of timm's"),
    (lambda: _aa_with(_timm_aa("v0"), magnitude=3), "not one of timm's"),
    (lambda: _aa_hp(_timm_aa("v0")), "magnitude_std differ"),
    (lambda: A.auto_augment_transform("v0", dict(img_mean=FILL, interpolation=Image.Resampling.NEAREST)),
     "resample"),
    (lambda: _timm_ra(), "expected timm's AutoAugment"),
])
def test_auto_augment_from_timm_refuses(make, msg):
    with pytest.raises(ValueError, match=msg):
        O.TimmAutoAugment.from_timm(make())


def _aa_drop(aa):
    aa.policy = aa.policy[:2]
    return aa


def _aa_with(aa, **attrs):
    for k, v in attrs.items():
        setattr(aa.policy[3][1], k, v)
    return aa


def _aa_hp(aa):
    aa.policy[5][0].magnitude_std = 2.0
    return aa


def test_auto_augment_defaults_and_refusals():
    plain = O.TimmAutoAugment.from_timm(A.auto_augment_transform("original-mstd0.5", None))
    assert plain.fields() == O.TimmAutoAugment("original", magnitude_std=0.5).fields()
    with pytest.raises(ValueError, match="policy must be"):
        O.TimmAutoAugment("3b")


def test_auto_augment_one_and_two_workers_identical():
    imgs = [img for _, img in IMAGES] * 3
    chain = [O.CenterCrop((16, 16))] + [O.TimmAutoAugment(p, magnitude_std=0.5) for p in O.TIMM_AUTOAUGMENT_POLICIES]
    assert_same_for_1_and_2_workers(imgs, chain)


# ---- TimmAugMix -----------------------------------------------------------------------------

class _ScriptedNp:
    """numpy for timm's AugMixAugment._apply_basic, its np.random replaced by fastq's draws"""

    def __init__(self, depths, chains):
        import types
        self._depths, self._chains = iter(depths), iter(chains)
        self.random = types.SimpleNamespace(randint=lambda lo, hi: next(self._depths),
                                            choice=lambda ops, k, replace: next(self._chains)(ops, k))

    def __getattr__(self, name):
        return getattr(np, name)


def _timm_mix(am, img, rec):
    by_name = lambda names: (lambda ops, k: [o for nm in names for o in ops if o.name == nm])  # noqa: E731
    script = _ScriptedNp([len(c) for c in rec["chains"]], [by_name(c) for c in rec["chains"]])
    saved = A.np
    A.np = script
    try:
        out = am._apply_basic(Image.fromarray(img), np.array(rec["weights"], np.float32), np.float32(rec["m"]))
    finally:
        A.np = saved
    return np.asarray(out)


@pytest.mark.parametrize("magnitude,names", [
    (5, ["AutoContrast", "Equalize", "Invert", "PosterizeIncreasing", "SolarizeIncreasing", "SolarizeAdd",
         "Posterize", "Solarize"]),  # ops without a sign: the chains are fully recorded
    (0, list(A._AUGMIX_TRANSFORMS)),  # magnitude 0: every op's result is sign- and resample-free
])
def test_augmix_mixing_matches_timm_apply_basic(magnitude, names):
    """timm's own _apply_basic (float32 accumulation, clip, uint8, Image.blend) on fastq's recorded
    weights, m, depths and chains: bit-exact"""
    hp = dict(translate_const=20, img_mean=FILL, interpolation=RESAMPLE["bicubic"], magnitude_std=0)
    am = A.AugMixAugment(A.augmix_ops(magnitude, hparams=hp, transforms=names), alpha=1.0, width=4, depth=-1)
    op = O.TimmAugMix.from_timm(am)
    assert op.magnitude == magnitude and op.width == 4 and op.depth == -1 and op.magnitude_std == 0
    for label, img in IMAGES:
        for index in range(20):
            out, rec = run(op, img, index)
            want = _timm_mix(am, img, rec)
            d = np.abs(out.astype(int) - want.astype(int))
            assert d.max() == 0, f"{label}#{index} {rec}: {int((d > 0).sum())} differ"


@pytest.mark.parametrize("name", ["Rotate", "ShearX", "ColorIncreasing", "TranslateYRel"])
def test_augmix_hidden_draws(name):
    """one chain of one op at a fixed magnitude: the output is timm's for one of the sign x resample
    choices fastq draws at exec (not in the record), each about equally often"""
    img = IMAGES[0][1]
    hp = dict(translate_const=20, img_mean=FILL, magnitude_std=0)
    am = A.AugMixAugment(A.augmix_ops(7, hparams=hp, transforms=[name]), alpha=1.0, width=1, depth=1)
    op = O.TimmAugMix.from_timm(am)
    assert op.interpolation == "random"
    combos = {}
    for neg in (False, True):
        for rs in ("bilinear", "bicubic"):
            single = timm_op(name, 7, rs, neg, img)
            combos[(neg, rs)] = single
    seen = {}
    for index in range(200):
        out, rec = run(op, img, index)
        assert rec["weights"] == [1.0] and rec["chains"] == [[name]]
        m = np.float32(rec["m"])
        hits = [k for k, single in combos.items()
                if np.array_equal(out, np.asarray(Image.blend(Image.fromarray(img), Image.fromarray(single), m)))]
        assert hits, f"#{index}: no sign / resample of timm's {name} gives fastq's image"
        seen[hits[0]] = seen.get(hits[0], 0) + 1
    k = 2 if name == "ColorIncreasing" else 4  # enhance ops have no resample
    assert len(seen) == k and min(seen.values()) > 200 / k / 2, seen


def test_augmix_draw_statistics():
    op = O.TimmAugMix(magnitude=3, width=4, depth=-1, alpha=1.0)
    n = 4000
    img = np.zeros((4, 4, 3), np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((4, 4)), op], dtype="uint8"))
    recs = [spec.process_array(img, 9, 0, i)[1]["ops"][-1] for i in range(n)]
    w = np.array([r["weights"] for r in recs])
    assert np.allclose(w.sum(1), 1, atol=1e-6) and (w >= 0).all()
    # Dirichlet([1] * 4): mean 1/4, var (1/4)(3/4)/5
    assert np.abs(w.mean(0) - 0.25).max() < 4 * math.sqrt(0.0375 / n)
    assert np.abs(w.var(0) - 0.0375).max() < 0.004
    m = np.array([r["m"] for r in recs])  # Beta(1, 1): uniform
    assert abs(m.mean() - 0.5) < 4 * math.sqrt(1 / 12 / n) and abs(m.var() - 1 / 12) < 0.006
    depths = np.bincount([len(c) for r in recs for c in r["chains"]], minlength=4)[1:]
    e = depths.sum() / 3
    assert ((depths - e) ** 2 / e).sum() < 13.82, depths  # chi-square, 2 dof, p = 0.001
    ops = [o for r in recs for c in r["chains"] for o in c]
    counts = np.array([ops.count(nm) for nm in A._AUGMIX_TRANSFORMS])
    e = len(ops) / len(counts)
    assert counts.sum() == len(ops) and ((counts - e) ** 2 / e).sum() < 32.91, counts  # 12 dof
    # alpha 0.5: Beta(0.5, 0.5) has variance 1/8
    op = O.TimmAugMix(alpha=0.5, width=2)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((4, 4)), op], dtype="uint8"))
    m = np.array([spec.process_array(img, 9, 0, i)[1]["ops"][-1]["m"] for i in range(n)])
    assert abs(m.mean() - 0.5) < 4 * math.sqrt(1 / 8 / n) and abs(m.var() - 1 / 8) < 0.008


def _timm_am(config="augmix-m5-w4-d2", interpolation="bicubic"):
    from timm.data import create_transform
    t = create_transform(224, is_training=True, auto_augment=config, interpolation=interpolation)
    (am,) = [x for x in t.transforms if isinstance(x, A.AugMixAugment)]
    return am


def test_augmix_from_timm():
    op = O.TimmAugMix.from_timm(_timm_am())
    assert (op.magnitude, op.width, op.depth, op.alpha) == (5, 4, 2, 1.0)
    assert op.magnitude_std == float("inf") and op.translate_pct == 0.3 and op.fill == FILL
    assert op.interpolation == "bicubic" and op.ops == tuple(A._AUGMIX_TRANSFORMS)
    plain = O.TimmAugMix.from_timm(A.augment_and_mix_transform("augmix", None))
    assert plain.fields() == O.TimmAugMix().fields()


def _am_prob(am):
    for o in am.ops:
        o.prob = 0.5
    return am


@pytest.mark.parametrize("make,msg", [
    (lambda: A.augment_and_mix_transform("augmix-b1", None), "blended"),
    (lambda: A.augment_and_mix_transform("augmix-w5", None), "width"),
    (lambda: A.augment_and_mix_transform("augmix-d4", None), "depth"),
    (lambda: _am_prob(A.augment_and_mix_transform("augmix", None)), "prob < 1"),
    (lambda: _timm_ra(), "expected timm's AugMixAugment"),
])
def test_augmix_from_timm_refuses(make, msg):
    with pytest.raises(ValueError, match=msg):
        O.TimmAugMix.from_timm(make())


def test_augmix_one_and_two_workers_identical():
    imgs = [img for _, img in IMAGES] * 3
    chain = [O.CenterCrop((16, 16)), O.TimmAugMix(), O.TimmAugMix(magnitude=9, width=4, depth=3, alpha=0.5,
                                                                  magnitude_std=0.5)]
    assert_same_for_1_and_2_workers(imgs, chain)
