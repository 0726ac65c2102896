"""TFRandAugment / TFAutoAugment (csrc/image/fq_image_aug_tf_policy.cpp, ops in
fq_image_aug_tf.cpp) against TF Model Garden's own op functions (official/vision/ops/
augment.py of tf-models-official 2.20, vendored unmodified in tests/helpers/
tf_augment_ref.py; run on TF 2.21): each sample's explain record (ops and TF arguments
drawn) is replayed through them and the images compared; the arguments are TF's
level_to_arg values; op choices, sub-policies and signs have the policy's frequencies
(chi-square, fixed seeds); 1 vs 2 workers are bit-identical.

Bounds (measured, see each check): exact for the LUT ops, SolarizeAdd, Cutout, the
geometric ops (float32 coordinates as TF's kernel) except rare ties; Color / Contrast /
Sharpness at most 1 level on a small fraction (float32 summation order of TF's
tensordot / mean / depthwise conv)."""
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.tf

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from helpers.determinism import assert_same_for_1_and_2_workers  # noqa: I100
import fastq
from fastq import _image
from fastq import ops as O

tf = pytest.importorskip("tensorflow", reason="TF 2.21 runs the TF Model Garden reference")
from helpers import tf_augment_ref as R  # noqa: E402

# chi-square critical values at p = 0.001
CHI2_001 = {16: 39.25, 24: 51.18, 1: 10.83}
GEOM = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")


def _photos():
    import cv2
    from fastq.bench.testdata import source_photos
    out = []
    for p in source_photos():
        if os.path.basename(p) in ("astronaut.png", "coffee.png", "chelsea.png"):
            img = cv2.imread(p, cv2.IMREAD_COLOR)
            out.append((os.path.basename(p), np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)[::4, ::4])))
    rng = np.random.default_rng(0)
    out.append(("noise", rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)))
    flat = np.full((20, 30, 3), 77, np.uint8)
    flat[0, 0] = (200, 77, 3)
    out.append(("flat", flat))
    return out


PHOTOS = _photos()


def run(op, img, index, seed=11):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def ref_op(img, name, arg, centre):
    """TF Model Garden's function for `name` with argument `arg` (replace 128)"""
    t = tf.constant(img)
    rep = [128] * 3
    if name in ("AutoContrast", "Equalize", "Invert"):
        out = getattr(R, name.lower())(t)
    elif name == "Rotate":
        out = R.wrapped_rotate(t, tf.constant(arg, tf.float32), rep)
    elif name in ("ShearX", "ShearY", "TranslateX", "TranslateY"):
        fn = {"ShearX": R.shear_x, "ShearY": R.shear_y, "TranslateX": R.translate_x, "TranslateY": R.translate_y}[name]
        out = fn(t, tf.constant(arg, tf.float32), rep)
    elif name == "Posterize":
        out = R.posterize(t, int(arg))
    elif name == "Solarize":
        out = R.solarize(t, int(arg))  # 256 (M = 10): TF casts it to uint8 0, inverting every pixel
    elif name == "SolarizeAdd":
        out = R.solarize_add(t, int(arg))
    elif name == "Cutout":
        cy, cx = divmod(int(centre), 65536)
        out = R._fill_rectangle(t, cx, cy, int(arg), int(arg), 128)
    else:
        out = getattr(R, name.lower())(t, arg)
    return np.asarray(out)


def tf_arg(name, level, cutout_const, translate_const):
    """|TF's argument| from its level_to_arg helpers"""
    if name in GEOM:
        f = {"Rotate": R._rotate_level_to_arg, "ShearX": R._shear_level_to_arg,
             "ShearY": R._shear_level_to_arg}.get(name)
        v = f(level)[0] if f else R._translate_level_to_arg(level, translate_const)[0]
        return abs(float(v))
    if name in ("Color", "Contrast", "Brightness", "Sharpness"):
        return R._enhance_level_to_arg(level)[0]
    mult = {"Posterize": 4, "Solarize": 256, "SolarizeAdd": 110, "Cutout": cutout_const}.get(name)
    return None if mult is None else R._mult_to_arg(level, mult)[0]


def compare(out, want, name, what, stats):
    d = np.abs(out.astype(int) - want.astype(int))
    stats.setdefault(name, []).append((int(d.max()), float((d > 0).mean())))
    if name in ("Color", "Contrast", "Sharpness"):
        assert d.max() <= 1 and (d > 0).mean() <= 0.02, f"{what}: max {d.max()}, {(d > 0).mean():.3%} differ"
    elif name in GEOM:
        px = d.max(axis=-1) > 0
        assert px.mean() <= 0.002, f"{what}: {px.mean():.3%} of pixels differ"
    else:
        assert d.max() == 0, f"{what}: {int((d > 0).sum())} values differ"


CASES = [O.TFRandAugment(), O.TFRandAugment(num_layers=3, magnitude=7), O.TFRandAugment(num_layers=1, magnitude=3.5),
         O.TFAutoAugment("v0"), O.TFAutoAugment("reduced_imagenet")]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[repr(c) for c in CASES])
def test_replay_through_tf_model_garden(case):
    op = CASES[case]
    stats = {}
    for name, img in PHOTOS:
        for index in range(20):
            out, rec = run(op, img, index)
            cur = img
            for k, d in enumerate(rec["policy"]):
                if d["op"] == "Identity":
                    continue
                assert d["op"] in O.TF_POLICY_OPS
                if isinstance(op, O.TFRandAugment):
                    level, cc, tc = op.magnitude, op.cutout_const, op.translate_const
                else:
                    level = None  # AutoAugment: the sub-policy's level (checked in its own test)
                if level is not None:
                    want_arg = tf_arg(d["op"], level, cc, tc)
                    if want_arg is not None:
                        assert abs(abs(d["magnitude"]) - want_arg) <= 1e-6 * max(1.0, want_arg), d
                cur = ref_op(cur, d["op"], d["magnitude"], d["bin"])
            names = [d["op"] for d in rec["policy"] if d["op"] != "Identity"]
            dd = np.abs(out.astype(int) - cur.astype(int))
            what = f"{op!r} {name} #{index} {names}"
            if all(n not in GEOM + ("Color", "Contrast", "Sharpness") for n in names):
                assert dd.max() == 0, what  # LUT ops, SolarizeAdd, Cutout: exact
            else:  # one op's 1-level / rare-tie differences carried through the next op
                assert (dd > 0).mean() <= 0.03, f"{what}: {(dd > 0).mean():.3%} differ"


@pytest.mark.parametrize("name", O.TF_POLICY_OPS)
def test_each_op_alone_matches_tf(name):
    """every op through a 1-op AutoAugment-like replay: fastq's TFRandAugment at magnitude
    M drawing `name`, against TF's function on the same image"""
    stats = {}
    seen = 0
    for m in (10.0, 6.0, 2.5):
        op = O.TFRandAugment(num_layers=1, magnitude=m)
        for iname, img in PHOTOS:
            for index in range(200):
                out, rec = run(op, img, index)
                d = rec["policy"][0]
                if d["op"] != name:
                    continue
                seen += 1
                want = ref_op(img, name, d["magnitude"], d["bin"])
                compare(out, want, name, f"{name}({d['magnitude']}) on {iname} #{index}", stats)
    assert seen >= 10, f"{name} drawn {seen} times"


def test_autoaugment_levels_and_subpolicies():
    """the ops applied are the drawn sub-policy's, in order, at level_to_arg of its levels
    (cutout 100, translate 250); each op applied with its probability; sub-policies uniform"""
    for pol, table in (("v0", R.POLICY_V0), ("reduced_imagenet", R.POLICY_REDUCED_IMAGENET)):
        op = O.TFAutoAugment(pol)
        counts = np.zeros(25)
        applied = np.zeros((25, 2))
        for index in range(2000):
            _, rec = run(op, PHOTOS[3][1], index)
            sp = rec["subpolicy"]
            counts[sp] += 1
            drawn = list(rec["policy"])
            for j, (name, prob, level) in enumerate(table[sp]):
                if drawn and drawn[0]["op"] == name:
                    d = drawn.pop(0)
                    applied[sp, j] += 1
                    want = tf_arg(name, level, 100.0, 250.0)
                    if want is not None:
                        assert abs(abs(d["magnitude"]) - want) <= 1e-6 * max(1.0, want), (pol, sp, d)
            assert not drawn, (pol, sp, rec["policy"])
        chi2 = ((counts - 2000 / 25) ** 2 / (2000 / 25)).sum()
        assert chi2 < CHI2_001[24], chi2
        # application frequency of each op: binomial, 5 sigma (two equal ops in a row are ambiguous: skipped)
        for sp, sub in enumerate(table):
            n = counts[sp]
            for j, (name, prob, _) in enumerate(sub):
                if sub[0][0] == sub[1][0]:
                    continue
                assert abs(applied[sp, j] - n * prob) <= 5 * math.sqrt(n * prob * (1 - prob)) + 1e-9, (pol, sp, j)


def test_op_choice_and_sign_frequencies():
    op = O.TFRandAugment(num_layers=2)
    counts = {n: 0 for n in ("Identity",) + O.TF_POLICY_OPS}
    neg = pos = 0
    img = PHOTOS[3][1]
    for index in range(1500):
        _, rec = run(op, img, index, seed=3)
        for d in rec["policy"]:
            counts[d["op"]] += 1
            if d["op"] in GEOM:
                neg += d["magnitude"] < 0
                pos += d["magnitude"] > 0
    n = sum(counts.values())
    e = n / 17
    chi2 = sum((c - e) ** 2 / e for c in counts.values())
    assert chi2 < CHI2_001[16], (chi2, counts)
    s = neg + pos
    assert (neg - s / 2) ** 2 / (s / 2) * 2 < CHI2_001[1], (neg, pos)


def test_prob_to_apply():
    op = O.TFRandAugment(num_layers=2, prob_to_apply=0.3)
    kept = total = 0
    for index in range(600):
        _, rec = run(op, PHOTOS[3][1], index)
        total += 2
        kept += sum(d["op"] != "Identity" for d in rec["policy"])
    p = 0.3 * 16 / 17
    assert abs(kept - total * p) <= 4 * math.sqrt(total * p * (1 - p))


def test_one_and_two_workers_are_bit_identical():
    imgs = [np.ascontiguousarray(img[:40, :40]) for _, img in PHOTOS[:4]] * 3
    chain = [O.HorizontalFlip(), O.TFRandAugment(num_layers=3), O.TFAutoAugment("v0"),
             O.TFAutoAugment("imagenet"), O.GaussianNoise(p=0.5)]
    assert_same_for_1_and_2_workers(imgs, chain)


@pytest.mark.parametrize("make,msg", [
    (lambda: O.TFRandAugment(magnitude=11), "magnitude must be"),
    (lambda: O.TFRandAugment(num_layers=5), "num_layers must be"),
    (lambda: O.TFRandAugment(prob_to_apply=1.5), "p"),
    (lambda: O.TFAutoAugment("cifar"), "policy must be"),
    (lambda: O.TFAutoAugment(fill=1.5), "fill must be"),
])
def test_bad_parameters(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()
