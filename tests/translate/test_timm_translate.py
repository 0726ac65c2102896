"""fastq.torch.translate on timm's transforms (timm.data.create_transform and its classes),
against timm itself: mapping and parameters, refused values, PSNR of the eval transform,
RandomErasing's draws against timm's own, and the native timm policy hook."""
import math
import warnings

import numpy as np
import pytest
import timm  # noqa: F401  (timm/torch before anything that may import tensorflow)
import torch
from PIL import Image
from scipy import stats
from timm.data import create_transform
from timm.data import transforms as TT
from timm.data.auto_augment import augment_and_mix_transform, auto_augment_transform, rand_augment_transform
from timm.data.random_erasing import RandomErasing as TimmErasing
from torchvision import transforms as T

import fastq
import fastq.torch as ft
from fastq import ops
from fastq.ops import _base
from fastq.translate import TranslationError

pytestmark = pytest.mark.torch

PIL_EXACT = "pil_bilinear" in _base.INTERPOLATIONS
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from fastq.bench.testdata import make_jpeg_dataset
    return make_jpeg_dataset(str(tmp_path_factory.mktemp("timm_photos")), 10)


def native(tf):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = ft.translate(tf, strict=True)
    assert tr.native and tr.framework == "timm", str(tr)
    return tr


def psnr(a, b):
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def test_create_transform_train_default():
    tf = create_transform(224, is_training=True)  # RRCAI, flip, ColorJitter(0.4), MaybeToTensor, Normalize
    tr = native(tf)
    kinds = [type(o) for o in tr.ops]
    assert kinds == [ops.RandomResizedCrop, ops.HorizontalFlip, ops.ColorJitter, ops.Normalize]
    rrc = tr.ops[0]
    assert rrc.size == (224, 224) and rrc.scale == (0.08, 1.0) and rrc.interpolation in ("bilinear", "pil_bilinear")
    assert tr.ops[2].brightness == (0.6, 1.4) and tr.ops[2].hue is None
    assert (tr.options["dtype"], tr.options["layout"]) == ("float32", "NCHW")


def test_create_transform_eval_psnr(photos):
    tf = create_transform(224)  # Resize(256, bilinear) + CenterCrop(224) + MaybeToTensor + Normalize
    tr = native(tf)
    with tr.pipeline(fastq.sources.Files(photos, labels=[0] * len(photos)), len(photos)) as pipe:
        out = np.array(next(iter(pipe))[0])
    ref = np.stack([tf(Image.open(p).convert("RGB")).numpy() for p in photos])
    std, mean = np.asarray(STD)[:, None, None], np.asarray(MEAN)[:, None, None]
    assert psnr(out * std + mean, ref * std + mean) >= (40 if PIL_EXACT else 38.5)


def test_rrc_interpolation_random_is_a_choice():
    tr = native(TT.RandomResizedCropAndInterpolation(160, scale=(0.3, 1.0), interpolation="random"))
    (op,) = tr.ops
    assert isinstance(op, ops.RandomChoice) and op.p is None or isinstance(op, ops.RandomChoice)
    kids = op.transforms
    assert [k.interpolation.replace("pil_", "") for k in kids] == ["bilinear", "bicubic"]
    assert all(k.size == (160, 160) and k.scale == (0.3, 1.0) for k in kids)
    nearest = native(TT.RandomResizedCropAndInterpolation(64, interpolation="nearest")).ops[0]
    assert nearest.interpolation == "pil_nearest"  # Pillow NEAREST, exact in this build


def test_other_timm_classes():
    tr = native(T.Compose([TT.ResizeKeepRatio(128), TT.CenterCropOrPad(112), TT.MaybePILToTensor()]))
    assert [type(o) for o in tr.ops] == [ops.ResizeShortestEdge, ops.CenterCrop]
    assert tr.ops[0].short == (128,) and (tr.options["dtype"], tr.options["layout"]) == ("uint8", "NCHW")
    tr = native(T.Compose([TT.CenterCropOrPad(64), TT.ToNumpy()]))
    assert tr.options["layout"] == "NCHW" and tr.options["dtype"] == "uint8"


def test_resize_keep_ratio_and_center_crop_or_pad_pixels(photos):
    tf = T.Compose([TT.ResizeKeepRatio(96, interpolation="bicubic"), TT.CenterCropOrPad(120), TT.ToNumpy()])
    tr = native(tf)
    with tr.pipeline(fastq.sources.Files(photos, labels=[0] * len(photos)), len(photos)) as pipe:
        out = np.array(next(iter(pipe))[0])
    ref = np.stack([tf(Image.open(p).convert("RGB")) for p in photos])
    assert out.shape == ref.shape == (len(photos), 3, 120, 120)
    # the padding band is where it is in timm's output (same resized size and offsets)
    for axis in (2, 3):  # rows / columns that are all zero: the pad band
        np.testing.assert_array_equal(out.max(axis=(1, axis)) == 0, ref.max(axis=(1, axis)) == 0)
    # a 3-8x bicubic downscale: 28.5 dB measured with OpenCV's resize, which does not antialias
    # (docs/migrate.md); the 40 dB target needs PIL-exact resampling
    assert psnr(out / 255.0, ref / 255.0) >= (40 if PIL_EXACT else 27)


@pytest.mark.parametrize("kw, words", [
    (dict(mode="rand"), "mode='rand'"),
    (dict(max_count=3), "max_count=3"),
    (dict(num_splits=2), "num_splits=2"),
])
def test_random_erasing_refused(kw, words):
    tf = T.Compose([T.CenterCrop(32), T.ToTensor(), TimmErasing(0.5, device="cpu", **kw)])
    with pytest.warns(UserWarning, match="RandomErasing") as rec:
        tr = ft.translate(tf)
    assert not tr.native and any(words in str(r.message) for r in rec)
    with pytest.raises(TranslationError, match="RandomErasing"):
        ft.translate(tf, strict=True)


@pytest.mark.parametrize("timm_cls, words", [
    (lambda: TT.ResizeKeepRatio(64, random_scale_prob=0.5), "random_scale_prob"),
    (lambda: TT.ResizeKeepRatio((64, 80)), "square"),
    (lambda: TT.ResizeKeepRatio(64, longest=1.0), "longest"),
    (lambda: TT.CenterCropOrPad(64, fill=3), "fill="),
    (lambda: TT.CenterCropOrPad(64, padding_mode="edge"), "padding_mode"),
    (lambda: TT.RandomPad(4, 0), "no native equivalent"),
])
def test_timm_classes_refused(timm_cls, words):
    tf = T.Compose([timm_cls(), T.CenterCrop(32)])
    with pytest.warns(UserWarning) as rec:
        tr = ft.translate(tf)
    assert not tr.native and any(words in str(r.message) for r in rec), [str(r.message) for r in rec]


@pytest.mark.parametrize("mode, value", [("const", (0.0, 0.0, 0.0)), ("pixel", "random")])
def test_random_erasing_mapping_and_draws(mode, value, photos):
    tf = T.Compose([T.CenterCrop(64), T.ToTensor(), T.Normalize(MEAN, STD),
                    TimmErasing(0.4, min_area=0.05, max_area=0.3, mode=mode, device="cpu")])
    tr = native(tf)
    er = tr.ops[-1]
    assert isinstance(er, ops.RandomErasing) and er.value == value and er.p == 0.4
    assert er.scale == (0.05, 0.3) and abs(er.ratio[0] - 0.3) < 1e-12 and abs(er.ratio[1] - 1 / 0.3) < 1e-9
    if mode != "const":
        return
    with tr.pipeline(fastq.sources.Files(photos[:1], labels=[0]), 1, seed=3) as pipe:
        recs = [pipe.explain(e, 0)["ops"][-1] for e in range(1500)]
    ours = np.asarray([r["box"][2] * r["box"][3] / 64 ** 2 for r in recs if r["applied"]])
    # timm's own draws: erase a tensor of ones and measure the zeros
    import random
    random.seed(0)
    re = TimmErasing(0.4, min_area=0.05, max_area=0.3, mode="const", device="cpu")
    theirs = []
    for _ in range(1500):
        x = torch.ones(3, 64, 64)
        re(x)
        frac = float((x[0] == 0).float().mean())
        if frac > 0:
            theirs.append(frac)
    assert abs(len(ours) / 1500 - 0.4) < 0.05 and abs(len(theirs) / 1500 - 0.4) < 0.05
    assert stats.ks_2samp(ours, theirs).pvalue > 1e-3


@pytest.mark.parametrize("make, op_name, what", [
    (lambda: rand_augment_transform("rand-m9-mstd0.5-inc1", {}), "TimmRandAugment", "RandAugment"),
    (lambda: auto_augment_transform("original", {}), "TimmAutoAugment", "AutoAugment"),
    (lambda: augment_and_mix_transform("augmix-m5-w4-d2", {}), "TimmAugMix", "AugMix"),
])
def test_timm_policies_use_the_native_op_when_there(monkeypatch, make, op_name, what):
    pol = make()
    tf = T.Compose([T.CenterCrop(32), pol, T.ToTensor()])
    monkeypatch.delattr(ops, op_name, raising=False)
    with pytest.warns(UserWarning, match=f"no native timm {what} in this build"):
        tr = ft.translate(tf)
    assert not tr.native

    class Refusing:
        @classmethod
        def from_timm(cls, obj):
            assert obj is pol
            raise ValueError(f"{what}: magnitude_max is not supported")

    monkeypatch.setattr(ops, op_name, Refusing, raising=False)
    with pytest.warns(UserWarning, match="magnitude_max is not supported"):
        assert not ft.translate(tf).native

    class Converting:
        @classmethod
        def from_timm(cls, obj):
            return ops.Invert(p=0.5)  # stands in for the converted policy

    monkeypatch.setattr(ops, op_name, Converting, raising=False)
    tr = native(tf)
    assert [type(o) for o in tr.ops] == [ops.CenterCrop, ops.Invert]


def test_reference_timm_train_recipe_runs_with_python_policy(photos):
    """timm's rand-m9 recipe: native crop and flip, the rest in Python unless fastq has the op."""
    tf = create_transform(96, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic",
                          re_prob=0.25, re_mode="pixel")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = ft.translate(tf)
    assert [type(o) for o in tr.ops][:2] == [ops.RandomResizedCrop, ops.HorizontalFlip]
    with tr.pipeline(fastq.sources.Files(photos, labels=list(range(len(photos)))), 5, seed=1) as pipe:
        batches = [tuple(np.array(a) for a in b) for b in pipe]
    assert batches[0][0].shape == (5, 3, 96, 96) and batches[0][0].dtype == np.float32
