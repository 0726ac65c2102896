"""RandomChannelPermutation (csrc/image/color/fq_image_aug.cpp, fastq/ops/_color.py) against
torchvision.transforms.v2's RandomChannelPermutation: given the permutation the sample drew
(its explain record), the output is torchvision's permute_channels of the input, bit for bit;
the draw is the documented Fisher-Yates over the sample's stream (replayed by the independent
generator of tests/helpers/golden_ref.py); the six permutations are equally likely, as
torch.randperm(3)'s; outputs do not depend on the number of workers, and follow the seed.
"""
import itertools

import numpy as np
import pytest

from helpers.determinism import assert_same_for_1_and_2_workers, rows_by_index  # noqa: I100
from helpers.golden_ref import RefRng

import fastq
from fastq import ops as O
from fastq._native import _image

pytestmark = pytest.mark.torch  # torchvision v2 is the reference

torch = pytest.importorskip("torch", reason="torch is the reference implementation's runtime")
tv2 = pytest.importorskip("torchvision.transforms.v2", reason="torchvision v2 is the reference")
tvF = pytest.importorskip("torchvision.transforms.v2.functional", reason="torchvision v2 is the reference")

PERMS = list(itertools.permutations(range(3)))
IMG = np.random.default_rng(7).integers(0, 256, (23, 31, 3), dtype=np.uint8)


def run(img, index, seed=3, p=1.0, channels=3):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), O.RandomChannelPermutation(p)], dtype="uint8",
                                          channels=channels))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def perm_of(rec):
    m = int(rec["magnitude"])
    return (m // 100, m // 10 % 10, m % 10)


def ref_draw(seed, index, p=1.0):
    """The documented draw: u < p, then (when applied) Fisher-Yates, k = 2, 1."""
    r = RefRng(seed, 0, index)
    applied = r.uniform() < p
    perm = [0, 1, 2]
    if applied:
        for k in (2, 1):
            j = r.below(k + 1)
            perm[k], perm[j] = perm[j], perm[k]
    return applied, tuple(perm)


def test_the_output_is_torchvisions_permute_channels_of_the_drawn_permutation():
    chw = torch.from_numpy(IMG).permute(2, 0, 1).contiguous()
    for index in range(60):
        out, rec = run(IMG, index)
        perm = perm_of(rec)
        assert rec["applied"] and sorted(perm) == [0, 1, 2], rec
        want = tvF.permute_channels(chw, list(perm)).permute(1, 2, 0).numpy()
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(out, IMG[..., list(perm)])  # some channel permutation of the input


def test_the_draw_is_the_documented_fisher_yates():
    for seed, p in ((3, 1.0), (11, 0.5)):
        for index in range(200):
            _, rec = run(IMG, index, seed=seed, p=p)
            applied, perm = ref_draw(seed, index, p)
            assert bool(rec["applied"]) == applied and perm_of(rec) == perm, (seed, index, rec)


def test_the_six_permutations_are_equally_likely_as_torchvisions():
    n = 3000
    ours = {q: 0 for q in PERMS}
    for index in range(n):
        ours[ref_draw(17, index)[1]] += 1
    for index in range(0, n, 10):  # the C draws are the reference's (checked above on a sample here too)
        assert perm_of(run(IMG, index, seed=17)[1]) == ref_draw(17, index)[1]
    # chi-square with 5 degrees of freedom: 20.5 is its 0.999 quantile
    chi2 = sum((c - n / 6) ** 2 / (n / 6) for c in ours.values())
    assert min(ours.values()) > 0 and chi2 < 20.5, ours
    # torchvision's class draws torch.randperm(3): the same six, equally likely
    torch.manual_seed(0)
    t = tv2.RandomChannelPermutation()
    small = torch.arange(3, dtype=torch.uint8).reshape(3, 1, 1)
    theirs = {q: 0 for q in PERMS}
    for _ in range(n):
        theirs[tuple(int(v) for v in t(small).flatten())] += 1
    chi2_theirs = sum((c - n / 6) ** 2 / (n / 6) for c in theirs.values())
    assert min(theirs.values()) > 0 and chi2_theirs < 20.5, theirs


def test_p_zero_and_one_channel_leave_the_image_unchanged():
    for index in range(20):
        out, rec = run(IMG, index, p=0.0)
        assert not rec["applied"] and perm_of(rec) == (0, 1, 2)
        np.testing.assert_array_equal(out, IMG)
    gray = np.random.default_rng(1).integers(0, 256, (9, 11, 1), dtype=np.uint8)
    for index in range(20):
        out, rec = run(gray, index, channels=1)
        assert rec["applied"] and perm_of(rec) == ref_draw(3, index)[1]  # drawn all the same
        np.testing.assert_array_equal(out.reshape(gray.shape), gray)


def test_one_and_two_workers_are_bit_identical_and_the_seed_decides():
    imgs = [np.ascontiguousarray(np.roll(IMG, k, axis=1)) for k in range(12)]
    chain = [O.RandomChannelPermutation(), O.HorizontalFlip()]
    a = assert_same_for_1_and_2_workers(imgs, chain, seed=5)
    b = assert_same_for_1_and_2_workers(imgs, chain, seed=5)
    c = assert_same_for_1_and_2_workers(imgs, chain, seed=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with fastq.Pipeline(fastq.sources.Arrays(imgs), batch_size=4, ops=chain, dtype="uint8", seed=5,
                        return_index=True) as pipe:
        rows = rows_by_index(pipe)
        assert sorted(rows) == list(range(len(imgs)))
        for i, img in enumerate(imgs):
            ex = pipe.explain(0, i)["ops"][-2:]  # (after the source's own op 0)
            assert ex[0]["op"] == "RandomChannelPermutation" and ex[1]["op"] == "HorizontalFlip"
            want = img[..., list(perm_of(ex[0]))]
            np.testing.assert_array_equal(rows[i][0], want[:, ::-1] if ex[1]["applied"] else want)

def test_arguments_are_checked():
    with pytest.raises(ValueError, match="RandomChannelPermutation"):
        O.RandomChannelPermutation(1.5)
    assert O.RandomChannelPermutation() == O.RandomChannelPermutation(1.0)
