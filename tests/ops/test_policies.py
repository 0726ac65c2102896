"""RandAugment / TrivialAugmentWide (csrc/image/color/fq_image_aug_policy.cpp) against torchvision
v2: the ops and magnitudes of each sample's explain record are replayed through
torchvision's own ``_apply_image_or_video_transform`` (the method its policies call) and
the images compared; each magnitude is the value of torchvision's magnitude table at the
reported bin; op choices, signs and bins have the policy's frequencies (chi-square).

Bound: as the primitives (tests/ops/test_aug_ops.py): the nearest-neighbour geometric ops may
pick the other neighbour at float32 half-pixel ties (at most 0.5 % of pixels per sample).
"""
import collections
import math

import numpy as np
import pytest

pytestmark = pytest.mark.torch  # torchvision v2 (on torch) is the reference

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq._native import _image
from fastq import ops as O

torch = pytest.importorskip("torch", reason="torch is the reference implementation's runtime")
v2 = pytest.importorskip("torchvision.transforms.v2", reason="torchvision v2 is the reference for the policies")

from test_aug_ops import PHOTOS  # noqa: E402

# chi-square critical values at p = 0.001 (df: 13, 30, 1)
CHI2_001 = {13: 34.53, 30: 59.70, 1: 10.83}


def run(op, img, index, seed=7):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def replay(tv_policy, img, drawn):
    t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()
    for d in drawn:
        t = tv_policy._apply_image_or_video_transform(t, d["op"], d["magnitude"],
                                                      interpolation=tv_policy.interpolation, fill=tv_policy._fill)
    return t.permute(1, 2, 0).numpy()


def table_value(tv_policy, name, bins, bin_, h, w):
    fn, signed = tv_policy._AUGMENTATION_SPACE[name]
    mags = fn(bins, h, w)
    return (None if mags is None else float(mags[bin_])), signed


CASES = [
    (O.RandAugment(), v2.RandAugment()),
    (O.RandAugment(num_ops=3, magnitude=15, fill=128), v2.RandAugment(num_ops=3, magnitude=15, fill=128)),
    (O.RandAugment(num_ops=1, magnitude=30, num_magnitude_bins=31, fill=(10, 20, 30)),
     v2.RandAugment(num_ops=1, magnitude=30, fill=[10, 20, 30])),
    (O.RandAugment(magnitude=4, num_magnitude_bins=11), v2.RandAugment(magnitude=4, num_magnitude_bins=11)),
    (O.TrivialAugmentWide(), v2.TrivialAugmentWide()),
    (O.TrivialAugmentWide(num_magnitude_bins=7, fill=99), v2.TrivialAugmentWide(num_magnitude_bins=7, fill=99)),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[repr(c[0]) for c in CASES])
def test_replay_through_torchvision(case):
    op, tvp = CASES[case]
    bins = op.num_magnitude_bins
    for name, img in PHOTOS:
        h, w = img.shape[:2]
        for index in range(12):
            out, rec = run(op, img, index)
            drawn = rec["policy"]
            assert len(drawn) == getattr(op, "num_ops", 1)
            for d in drawn:
                assert d["op"] in O.POLICY_OPS
                want, signed = table_value(tvp, d["op"], bins, d["bin"], h, w)
                if want is None:
                    assert d["magnitude"] == 0.0
                else:
                    if isinstance(op, O.RandAugment):
                        assert d["bin"] == op.magnitude
                    assert abs(d["magnitude"]) == abs(want) and (signed or d["magnitude"] == want), (d, want)
            want = replay(tvp, img, drawn)
            px = np.abs(out.astype(int) - want.astype(int)).max(axis=-1) > 0
            assert px.mean() <= 0.005, f"{name} sample {index}: {drawn}: {px.mean():.3%} of pixels differ"


def _chi2(counts, n_cells, total):
    e = total / n_cells
    return sum((counts.get(k, 0) - e) ** 2 / e for k in range(n_cells))


def test_op_sign_and_bin_frequencies():
    img = PHOTOS[5][1]  # small: many samples
    ops_seen, signs, bins = collections.Counter(), collections.Counter(), collections.Counter()
    n = 600
    for index in range(n):
        for d in run(O.RandAugment(), img, index)[1]["policy"]:
            ops_seen[O.POLICY_OPS.index(d["op"])] += 1
            if d["op"] in ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
                           "Contrast", "Sharpness") and d["magnitude"] != 0:
                signs[int(d["magnitude"] < 0)] += 1
        (d,) = run(O.TrivialAugmentWide(), img, index)[1]["policy"]
        if d["op"] not in ("Identity", "AutoContrast", "Equalize"):
            bins[d["bin"]] += 1
    assert sum(ops_seen.values()) == 2 * n
    assert _chi2(ops_seen, 14, 2 * n) < CHI2_001[13], ops_seen
    assert _chi2(signs, 2, sum(signs.values())) < CHI2_001[1], signs
    assert _chi2(bins, 31, sum(bins.values())) < CHI2_001[30], bins


def test_policy_draws_are_a_function_of_seed_epoch_index():
    img = PHOTOS[4][1]
    a = [run(O.RandAugment(), img, i, seed=3)[1]["policy"] for i in range(20)]
    b = [run(O.RandAugment(), img, i, seed=3)[1]["policy"] for i in range(20)]
    c = [run(O.RandAugment(), img, i, seed=4)[1]["policy"] for i in range(20)]
    assert a == b and a != c


@pytest.mark.parametrize("make,msg", [
    (lambda: O.RandAugment(num_ops=5), "RandAugment: num_ops must be an int in"),
    (lambda: O.RandAugment(magnitude=31), "RandAugment: magnitude must be an int in"),
    (lambda: O.RandAugment(num_magnitude_bins=1), "RandAugment: num_magnitude_bins must be an int in"),
    (lambda: O.RandAugment(fill=-1), "RandAugment: fill must be"),
    (lambda: O.TrivialAugmentWide(num_magnitude_bins=2.5), "TrivialAugmentWide: num_magnitude_bins must be"),
])
def test_bad_parameters(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_magnitude_tables_match_torch_linspace_for_other_sizes():
    # translate's RandAugment range depends on the image size: check a few sizes and bins
    tvp = v2.RandAugment()
    rng = np.random.default_rng(1)
    for _ in range(4):
        h, w = (int(v) for v in rng.integers(40, 120, 2))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for index in range(30):
            for d in run(O.RandAugment(magnitude=int(rng.integers(0, 31))), img, index)[1]["policy"]:
                want, _ = table_value(tvp, d["op"], 31, d["bin"], h, w)
                assert want is None or abs(d["magnitude"]) == abs(want)
    assert math.isfinite(want or 0.0)


def test_every_bin_of_every_table_is_torchs():
    # all bins of the tables, through TrivialAugmentWide's drawn bins and RandAugment's fixed ones
    for tvp, make in ((v2.RandAugment(), lambda b, m: O.RandAugment(num_ops=4, magnitude=m, num_magnitude_bins=b)),):
        for bins in (31, 10, 100):
            img = PHOTOS[5][1]
            h, w = img.shape[:2]
            for m in range(0, bins, 3):
                for index in range(8):
                    for d in run(make(bins, m), img, index)[1]["policy"]:
                        want, _ = table_value(tvp, d["op"], bins, d["bin"], h, w)
                        assert want is None or abs(d["magnitude"]) == abs(want), (bins, d, want)


# ---- AutoAugment (imagenet) ------------------------------------------------------------------

def test_auto_augment_replays_through_torchvision():
    tvp = v2.AutoAugment(fill=[10, 20, 30])
    subs = tvp._policies
    for name, img in PHOTOS:
        h, w = img.shape[:2]
        for index in range(16):
            out, rec = run(O.AutoAugment(fill=(10, 20, 30)), img, index)
            sub = subs[rec["subpolicy"]]
            drawn = rec["policy"]
            # the ops applied are a subsequence of the sub-policy, each at its own bin of 10
            pos = 0
            for d in drawn:
                while pos < 2 and sub[pos][0] != d["op"]:
                    pos += 1
                assert pos < 2, (sub, drawn)
                _, _, bin_ = sub[pos]
                want, signed = table_value(tvp, d["op"], 10, bin_ or 0, h, w)
                if bin_ is None:
                    assert d["magnitude"] == 0.0
                else:
                    assert abs(d["magnitude"]) == abs(want) and (signed or d["magnitude"] == want), (d, want)
                pos += 1
            want = replay(tvp, img, drawn)
            px = np.abs(out.astype(int) - want.astype(int)).max(axis=-1) > 0
            assert px.mean() <= 0.005, f"{name} sample {index}: {drawn}: {px.mean():.3%} of pixels differ"


def test_auto_augment_frequencies():
    subs = v2.AutoAugment()._policies
    img = PHOTOS[5][1]
    n = 1000
    chosen = collections.Counter()
    expected_applied, applied = 0.0, 0
    for index in range(n):
        rec = run(O.AutoAugment(), img, index)[1]
        chosen[rec["subpolicy"]] += 1
        expected_applied += sum(p for _, p, _ in subs[rec["subpolicy"]])
        applied += len(rec["policy"])
    assert _chi2(chosen, 25, n) < 51.18, chosen  # df 24, p = 0.001
    var = sum(p * (1 - p) for s in subs for _, p, _ in s) / 25 * n
    assert abs(applied - expected_applied) <= 4 * math.sqrt(var), (applied, expected_applied)


def test_auto_augment_bad_policy():
    with pytest.raises(ValueError, match="AutoAugment: policy must be 'imagenet'"):
        O.AutoAugment("cifar10")


# ---- golden draws (tests/data/golden.json "policy_draws") --------------------------------------

SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast", "Sharpness"}


def _ref_policy_draws(kind, seed, epoch, index, h, w):
    """Independent replay of the documented draws (docs/ops.md "Policies") with the reference
    generator of tests/image/test_golden.py and torchvision's own magnitude tables."""
    from helpers.golden_ref import RefRng
    r = RefRng(seed, epoch, index)
    out = []

    def one(tvp, name, bin_, bins):
        m, signed = table_value(tvp, name, bins, bin_, h, w)
        if m is None:
            return {"op": name, "magnitude": 0.0, "bin": 0}
        if signed and r.uniform() <= 0.5:
            m = -m
        return {"op": name, "magnitude": m, "bin": bin_}

    if kind == "RandAugment":
        tvp = v2.RandAugment()
        for _ in range(2):
            out.append(one(tvp, O.POLICY_OPS[r.below(14)], 9, 31))
        return {"policy": out}
    if kind == "TrivialAugmentWide":
        tvp = v2.TrivialAugmentWide()
        name = O.POLICY_OPS[r.below(14)]
        has = tvp._AUGMENTATION_SPACE[name][0](31, h, w) is not None
        return {"policy": [one(tvp, name, r.below(31) if has else 0, 31)]}
    tvp = v2.AutoAugment()
    sp = r.below(25)
    for name, p, bin_ in tvp._policies[sp]:
        if r.uniform() <= p:
            out.append(one(tvp, name, bin_ if bin_ is not None else 0, 10))
    return {"policy": out, "subpolicy": sp}


@pytest.mark.parametrize("kind", ["RandAugment", "TrivialAugmentWide", "AutoAugment"])
def test_policy_draws_are_frozen_and_match_an_independent_replay(kind):
    from helpers.golden_ref import GOLDEN
    frozen = GOLDEN["policy_draws"][kind]
    rng = np.random.default_rng(11)
    img = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    op = getattr(O, kind)()
    for index, want in enumerate(frozen):
        h, w = img.shape[:2]
        spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
        rec = spec.process_array(img, 1234, 3, index)[1]["ops"][-1]
        got = {k: rec[k] for k in ("policy", "subpolicy") if k in rec}
        assert got == want, (index, got, want)
        assert _ref_policy_draws(kind, 1234, 3, index, h, w) == want, index
