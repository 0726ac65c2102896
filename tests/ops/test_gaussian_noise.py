"""GaussianNoise (csrc/image/color/fq_image_aug_model_garden.cpp) against torchvision 0.29 v2
``gaussian_noise`` with its ``torch.randn_like`` replaced by fastq's noise field (replayed
here from the explain record's ``rng_key``: SplitMix64 stream, Box-Muller): the uint8
kernel must match exactly, the float kernel on ``x / 255`` to within one level (the uint8
kernel truncates the noise to whole levels).  Also: noise mean / std vs the parameters,
clipping / wrapping, p, 1 vs 2 workers."""
import math
from unittest import mock

import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from helpers.determinism import assert_same_for_1_and_2_workers  # noqa: I100
import fastq
from fastq._native import _image
from fastq import ops as O

GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def noise_field(key, n):
    """fastq's z for n elements: the stream {state = key}, two uniforms per element"""
    with np.errstate(over="ignore"):
        states = np.uint64(key) + GAMMA * np.arange(1, 2 * n + 1, dtype=np.uint64)
        u = (_mix64(states) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    u1, u2 = u[0::2], u[1::2]
    return (np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(6.283185307179586 * u2)).astype(np.float32)


def run(op, img, index, seed=3):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), op], dtype="uint8"))
    out, ex = spec.process_array(img, seed, 0, index)
    return out, ex["ops"][-1]


def photo(h=48, w=64, seed=0):
    rng = np.random.default_rng(seed)
    base = np.linspace(0, 255, h * w * 3).reshape(h, w, 3)
    return np.clip(base + rng.normal(0, 30, base.shape), 0, 255).astype(np.uint8)


CASES = [(0.0, 0.1, True), (0.05, 0.2, True), (-0.1, 0.05, False), (0.0, 1.0, True), (0.3, 0.5, False)]


@pytest.mark.torch
@pytest.mark.parametrize("mean,sigma,clip", CASES)
def test_matches_torchvision_with_the_same_noise_field(mean, sigma, clip):
    torch = pytest.importorskip("torch", reason="torchvision's runtime")
    F = pytest.importorskip("torchvision.transforms.v2.functional", reason="torchvision v2 is the reference")
    img = photo()
    for index in range(6):
        out, rec = run(O.GaussianNoise(mean, sigma, clip), img, index)
        assert rec["applied"] and rec["magnitude"] == sigma
        z = noise_field(rec["rng_key"], img.size).reshape(img.shape)
        zt = torch.from_numpy(z).permute(2, 0, 1).contiguous()
        t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        with mock.patch.object(torch, "randn_like", lambda x, dtype=None, **k: zt.clone()):
            want = F.gaussian_noise(t, mean=mean, sigma=sigma, clip=clip).permute(1, 2, 0).numpy()
            wantf = F.gaussian_noise(t.float() / 255, mean=mean, sigma=sigma, clip=clip)
        assert np.array_equal(out, want), f"index {index}: {np.count_nonzero(out != want)} values differ"
        if clip:  # float kernel: x/255 + noise, clamped; uint8 truncates the noise to whole levels
            wf = (wantf.permute(1, 2, 0).numpy() * 255).astype(np.float64)
            assert np.abs(out.astype(np.float64) - wf).max() < 1.0 + 1e-3


def test_noise_mean_and_std_follow_the_parameters():
    img = np.full((256, 256, 3), 128, np.uint8)
    for seed, (mean, sigma) in enumerate([(0.0, 0.05), (0.02, 0.1), (-0.03, 0.08)]):
        out, rec = run(O.GaussianNoise(mean, sigma), img, index=0, seed=seed)
        d = (out.astype(np.float64) - 128) / 255
        n = d.size
        # truncation toward zero of (mean + sigma z) * 255: mean shrinks by E[frac part] (<= 1/255),
        # std by well under 1/255; bounds: 6 standard errors + 1 level
        assert abs(d.mean() - mean) < 6 * sigma / math.sqrt(n) + 1 / 255
        assert abs(d.std() - sigma) < 6 * sigma / math.sqrt(2 * n) + 1 / 255
        # the field itself (no truncation) at 6 standard errors
        z = noise_field(rec["rng_key"], n)
        assert abs(z.mean()) < 6 / math.sqrt(n) and abs(z.std() - 1) < 6 / math.sqrt(2 * n)


def test_clip_clamps_and_no_clip_wraps_like_torch():
    hi = np.full((8, 8, 3), 250, np.uint8)
    out, _ = run(O.GaussianNoise(0.5, 0.0), hi, 0)
    assert (out == 255).all()
    lo = np.full((8, 8, 3), 5, np.uint8)
    out, _ = run(O.GaussianNoise(-0.5, 0.0), lo, 0)
    assert (out == 0).all()
    out, _ = run(O.GaussianNoise(0.5, 0.0, clip=False), hi, 0)
    assert (out == (250 + 127) % 256).all()  # int16(127.5) = 127, uint8 wraps
    out, _ = run(O.GaussianNoise(-0.5, 0.0, clip=False), lo, 0)
    assert (out == (5 - 127) % 256).all()


def test_p():
    img = photo(16, 16)
    out, rec = run(O.GaussianNoise(sigma=0.5, p=0.0), img, 0)
    assert not rec["applied"] and np.array_equal(out, img)
    n, p = 400, 0.3
    hits = sum(run(O.GaussianNoise(p=p), img, i)[1]["applied"] for i in range(n))
    assert abs(hits - n * p) <= 4 * math.sqrt(n * p * (1 - p))


def test_deterministic_and_one_vs_two_workers():
    img = photo()
    a, ra = run(O.GaussianNoise(), img, 5)
    b, rb = run(O.GaussianNoise(), img, 5)
    assert np.array_equal(a, b) and ra["rng_key"] == rb["rng_key"]
    assert not np.array_equal(a, run(O.GaussianNoise(), img, 6)[0])
    imgs = [photo(40, 40, s) for s in range(8)]
    chain = [O.HorizontalFlip(), O.GaussianNoise(0.01, 0.2, p=0.7), O.GaussianNoise(sigma=0.05, clip=False)]
    assert_same_for_1_and_2_workers(imgs, chain)


@pytest.mark.parametrize("kw,msg", [({"sigma": -1}, "sigma must be"), ({"sigma": 11}, "sigma must be"),
                                    ({"mean": float("nan")}, "mean must be"), ({"clip": 1}, "clip must be a bool"),
                                    ({"p": 2}, "p must be")])
def test_bad_parameters(kw, msg):
    with pytest.raises(ValueError, match="GaussianNoise: " + msg):
        O.GaussianNoise(**kw)
