"""RandomErasing (csrc/image/color/fq_image_aug_erase.cpp plans it, csrc/image/batch/fq_image_write.cpp
writes it over the output values): against torchvision 0.29's v2 RandomErasing /
functional.erase, replayed from the explain record on the same (normalized) output, and
its box statistics against torchvision's own make_params."""
import math

import numpy as np
import pytest
import torch
from scipy import stats
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

import fastq
from fastq._native import _image
from fastq import ops as O

NORM = O.Normalize()
DTYPES = ["float32", "float16", "bfloat16", "uint8"]
TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "uint8": torch.uint8}


def _img(h=40, w=56, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)


def _to_torch(a, dtype, layout):
    """A CHW torch tensor of one output sample."""
    if dtype == "bfloat16":
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a).copy())
    return t.permute(2, 0, 1) if layout == "NHWC" else t


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _erase_rec(ex):
    rec = ex["ops"][-1]
    assert rec["op"] == "RandomErasing"
    return rec


def _base_chain(dtype):
    chain = [O.RandomResizedCrop((24, 30), scale=(0.3, 1.0)), O.HorizontalFlip(0.5), O.VerticalFlip(0.5)]
    return chain + ([NORM] if dtype != "uint8" else [])


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [0, (0.5, -1.25, 2.0), (10, 200, 37)])
def test_box_is_torchvision_erase_replayed_exactly(dtype, layout, value):
    base = _base_chain(dtype)
    er = O.RandomErasing(p=0.8, value=value)
    with_e = _image.ImageSpec(O.compile_ops(base + [er], dtype=dtype, layout=layout))
    without = _image.ImageSpec(O.compile_ops(base, dtype=dtype, layout=layout))
    img = _img()
    n_applied = 0
    for index in range(24):
        out, ex = with_e.process_array(img, seed=3, index=index)
        ref, ex0 = without.process_array(img, seed=3, index=index)
        # the ops before draw the same numbers: RandomErasing draws last
        assert ex["ops"][:-1] == ex0["ops"]
        rec = _erase_rec(ex)
        assert rec["value"] == tuple(float(v) for v in (value if isinstance(value, tuple) else (value,) * 3))
        t = _to_torch(ref, dtype, layout)
        if rec["applied"]:
            n_applied += 1
            x, y, w, h = rec["box"]
            assert 0 <= x and x + w <= 30 and 0 <= y and y + h <= 24 and h < 24 and w < 30
            v = torch.tensor(rec["value"])[:, None, None]  # float32, as torchvision's make_params
            if dtype == "uint8":  # documented: rounded half to even and clipped (torch truncates)
                v = torch.tensor(np.clip(np.round(rec["value"]), 0, 255))[:, None, None]
            t = F.erase(t, i=y, j=x, h=h, w=w, v=v)
        got = _to_torch(out, dtype, layout)
        assert torch.equal(got.view(torch.int16) if dtype == "bfloat16" else got,
                           t.view(torch.int16) if dtype == "bfloat16" else t), (index, rec)
    assert 10 <= n_applied < 24  # p = 0.8: both branches seen


def test_uint8_value_is_rounded_half_to_even_and_clipped():
    chain = [O.CenterCrop((20, 20)), O.RandomErasing(p=1.0, scale=(0.2, 0.3), value=(300, -5, 12.5))]
    out, ex = _image.ImageSpec(O.compile_ops(chain, dtype="uint8")).process_array(_img(20, 20))
    x, y, w, h = _erase_rec(ex)["box"]
    assert (out[y:y + h, x:x + w] == np.array([255, 0, 12], np.uint8)).all()
    out, ex = _image.ImageSpec(O.compile_ops(chain[:1] + [O.RandomErasing(1.0, value=13.5)],
                                             dtype="uint8")).process_array(_img(20, 20))
    x, y, w, h = _erase_rec(ex)["box"]
    assert (out[y:y + h, x:x + w] == 14).all()


def _fq_boxes(n, H, W, scale, ratio, p=1.0):
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((H, W)), O.RandomErasing(p, scale, ratio)],
                                          dtype="uint8"))
    img = np.zeros((H, W, 3), np.uint8)
    recs = [_erase_rec(spec.process_array(img, seed=11, index=i)[1]) for i in range(n)]
    return recs


def _tv_boxes(n, H, W, scale, ratio):
    t = v2.RandomErasing(p=1.0, scale=scale, ratio=ratio)
    torch.manual_seed(1234)
    x = torch.zeros(3, H, W)
    out = []
    for _ in range(n):
        prm = t.make_params([x])
        if prm["v"] is not None:
            out.append((prm["j"], prm["i"], prm["w"], prm["h"]))
    return out


def _box_stats(boxes, H, W):
    b = np.array(boxes, dtype=np.float64)
    area = b[:, 2] * b[:, 3] / (H * W)
    aspect = np.log(b[:, 3] / np.maximum(b[:, 2], 1))
    top = (b[:, 1] + 0.5) / (H - b[:, 3] + 1)
    left = (b[:, 0] + 0.5) / (W - b[:, 2] + 1)
    return area, aspect, top, left


@pytest.mark.parametrize("H,W,scale,ratio", [(64, 96, (0.02, 0.33), (0.3, 3.3)), (50, 50, (0.1, 0.6), (0.5, 2.0))])
def test_box_statistics_match_torchvision_make_params(H, W, scale, ratio):
    n = 3000
    recs = _fq_boxes(n, H, W, scale, ratio)
    ours = [r["box"] for r in recs if r["applied"]]
    theirs = _tv_boxes(n, H, W, scale, ratio)
    for a, b in zip(_box_stats(ours, H, W), _box_stats(theirs, H, W)):
        assert stats.ks_2samp(a, b).pvalue > 1e-3
    # failure rates (no accepted try in 10) agree within a few sigma
    fa, fb = 1 - len(ours) / n, 1 - len(theirs) / n
    assert abs(fa - fb) <= 4 * math.sqrt(max(fa, fb, 1 / n) / n) + 1e-3
    # the test has power: another scale range is told apart
    other = [r["box"] for r in _fq_boxes(n, H, W, (scale[0], scale[1] * 0.8), ratio) if r["applied"]]
    assert stats.ks_2samp(_box_stats(other, H, W)[0], _box_stats(theirs, H, W)[0]).pvalue < 1e-3


def test_no_accepted_try_erases_nothing():
    # scale (0.9, 1): h*w >= 0.9 H W never fits inside h < H, w < W with this ratio range
    recs = _fq_boxes(50, 10, 10, (0.95, 1.0), (0.99, 1.01))
    assert all(not r["applied"] and r["tries"] == 10 for r in recs)
    v = v2.RandomErasing(p=1.0, scale=(0.95, 1.0), ratio=(0.99, 1.01))
    assert v.make_params([torch.zeros(3, 10, 10)])["v"] is None


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_p_is_respected(p):
    n = 2000
    recs = _fq_boxes(n, 40, 40, (0.02, 0.2), (0.5, 2.0), p=p)
    k = sum(r["applied"] for r in recs)
    assert abs(k - n * p) <= 4 * math.sqrt(n * p * (1 - p)) + 1e-9
    assert all(r["tries"] == 0 for r in recs if not r["applied"]) or p == 0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_random_values_are_standard_normal_inside_the_box_only(dtype):
    base = [O.CenterCrop((48, 48)), NORM]
    spec = _image.ImageSpec(O.compile_ops(base + [O.RandomErasing(1.0, (0.2, 0.3), value="random")], dtype=dtype))
    ref = _image.ImageSpec(O.compile_ops(base, dtype=dtype))
    img = _img(48, 48)
    vals = []
    for i in range(10):
        out, ex = spec.process_array(img, seed=5, index=i)
        r, _ = ref.process_array(img, seed=5, index=i)
        rec = _erase_rec(ex)
        assert rec["value"] == "random" and rec["applied"]
        x, y, w, h = rec["box"]
        mask = np.zeros(out.shape, bool)
        mask[y:y + h, x:x + w] = True
        assert np.array_equal(_bits(out)[~mask], _bits(r)[~mask])
        vals.append(out[mask].astype(np.float64))
        again, _ = spec.process_array(img, seed=5, index=i)
        assert _bits(again).tobytes() == _bits(out).tobytes()  # deterministic
    z = np.concatenate(vals)
    assert z.size > 3000
    assert stats.kstest(z, "norm").pvalue > 1e-3  # measured 0.11-0.12 for the three dtypes
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.05
    # two samples do not share values
    assert not np.array_equal(vals[0][:50], vals[1][:50])


@pytest.mark.parametrize("value", [(0.5, -1.0, 2.0), "random"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_bgr_and_layouts_with_erasing(value, layout):
    """BGR is the RGB output reversed, erased box included (values follow their channel);
    NCHW is NHWC transposed (random values included)."""
    chain = [O.RandomResizedCrop(20), O.HorizontalFlip(0.5), NORM, O.RandomErasing(1.0, value=value)]
    img = _img()
    outs = {}
    for ch in ("RGB", "BGR"):
        for lay in ("NHWC", "NCHW"):
            spec = _image.ImageSpec(O.compile_ops(chain, dtype="float32", layout=lay, channels=ch))
            outs[ch, lay] = [spec.process_array(img, seed=2, index=i)[0] for i in range(6)]
    ax = -1 if layout == "NHWC" else 0
    for a, b in zip(outs["RGB", layout], outs["BGR", layout]):
        assert np.array_equal(np.flip(a, ax), b)
    for a, b in zip(outs["RGB", "NHWC"], outs["RGB", "NCHW"]):
        assert np.array_equal(a.transpose(2, 0, 1), b)


def test_gray_takes_one_value_and_refuses_three():
    chain = [O.CenterCrop((16, 16)), NORM, O.RandomErasing(1.0, value=0.25)]
    out, ex = _image.ImageSpec(O.compile_ops(chain, channels=1)).process_array(_img(16, 16))
    x, y, w, h = _erase_rec(ex)["box"]
    assert out.shape == (16, 16, 1) and (out[y:y + h, x:x + w] == np.float32(0.25)).all()
    with pytest.raises(ValueError, match="channels=1 needs a single value"):
        _image.ImageSpec(O.compile_ops(chain[:2] + [O.RandomErasing(1.0, value=(1, 2, 3))], channels=1))


def test_pipeline_one_and_two_workers_bit_identical(tmp_path):
    from fastq.bench import testdata
    paths = testdata.make_jpeg_dataset(str(tmp_path), 16, seed=2, min_side=60, max_side=120)
    chain = [O.RandomResizedCrop(32), O.HorizontalFlip(), NORM, O.RandomErasing(0.7, value="random")]
    runs = []
    for workers in (1, 2):
        with fastq.Pipeline(fastq.sources.Files(paths), ops=chain, batch_size=4, seed=9, shuffle=True,
                            workers=workers, dtype="bfloat16", layout="NCHW") as p:
            runs.append([_bits(np.array(b[0])).tobytes() for b in p])
            ex = p.explain(0, 3)
    assert runs[0] == runs[1]
    rec = _erase_rec(ex)
    assert set(rec) >= {"applied", "box", "value", "tries"}


def test_validation_errors():
    bad = [dict(value="noise"), dict(value=(1, 2)), dict(value=float("nan")), dict(value=(1, 2, math.inf)),
           dict(value=None), dict(p=1.5), dict(p=-0.1), dict(scale=(0.5, 0.2)), dict(scale=(0.1, 1.5)),
           dict(scale=(-0.1, 0.2)), dict(ratio=(0.0, 1.0)), dict(ratio=(2.0, 1.0)), dict(ratio=5)]
    for kw in bad:
        with pytest.raises(ValueError, match="RandomErasing"):
            O.RandomErasing(**kw)
    assert O.RandomErasing(value=[3]).value == (3.0, 3.0, 3.0)
    assert O.RandomErasing(value=np.float32(0.5)).value == (0.5, 0.5, 0.5)
    # the chain rules: last, after Normalize
    with pytest.raises(ValueError, match="RandomErasing must be the last op"):
        O.compile_ops([O.CenterCrop(8), O.RandomErasing(), NORM])
    with pytest.raises(ValueError, match="RandomErasing must be the last op"):
        O.compile_ops([O.CenterCrop(8), O.RandomErasing(), O.HorizontalFlip()])
    with pytest.raises(ValueError, match="RandomErasing must be the last op"):
        O.compile_ops([O.CenterCrop(8), O.RandomErasing(), O.RandomErasing()])
    with pytest.raises(ValueError, match="Normalize must be the last op"):
        O.compile_ops([O.CenterCrop(8), NORM, O.HorizontalFlip(), O.RandomErasing()])
    c = O.compile_ops([O.CenterCrop(8), NORM, O.RandomErasing()])
    assert c.out_shape == (8, 8, 3)
    O.compile_ops([O.CenterCrop(8), O.RandomErasing()], dtype="uint8")
    # the C core checks packed parameters too (bypassing the Python class)
    packed = _image.pack_ops([(O.RandomErasing.kind, dict(O.RandomErasing().fields(), random=0.5))])
    assert "random must be 0 or 1" in _image.check_chain(packed, "float32")["error"]
