"""fastq.tensorpack.translate (fastq/translate/tensorpack.py) against tensorpack 0.11 itself.

* what each augmentor becomes (its parameters), and the refused values (strict raises naming the
  augmentor and the argument; otherwise one UserWarning and a Python tail);
* deterministic chains on JPEG photos: the pipeline's batches vs tensorpack's augmentors on
  cv2.imread's BGR images, PSNR >= 40 dB (the measured values are printed and in docs/migrate.md);
* random augmentors: the drawn parameters (Pipeline.explain) vs tensorpack's own samplers;
* the Python tail: equal to the augmentor applied to the native prefix's output;
* 1 vs 2 workers bit-identical (native ops and Python tail).
"""
import math
import warnings

import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)

import fastq
import fastq.tensorpack as ftp
from fastq._native import _image
from fastq import ops as O
from fastq.bench import testdata
from fastq.translate import TranslationError

pytestmark = pytest.mark.tensorpack

cv2 = pytest.importorskip("cv2")
imgaug = pytest.importorskip("tensorpack.dataflow.imgaug")


def fbresnet(is_train):
    """tensorpack's examples/ImageNetModels/imagenet_utils.py fbresnet_augmentor, verbatim."""
    interpolation = cv2.INTER_CUBIC
    if is_train:
        return [
            imgaug.GoogleNetRandomCropAndResize(interp=interpolation),
            imgaug.ToFloat32(),
            imgaug.RandomOrderAug(
                [imgaug.BrightnessScale((0.6, 1.4)),
                 imgaug.Contrast((0.6, 1.4), rgb=False),
                 imgaug.Saturation(0.4, rgb=False),
                 imgaug.Lighting(0.1,
                                 eigval=np.asarray([0.2175, 0.0188, 0.0045][::-1]) * 255.0,
                                 eigvec=np.array([[-0.5675, 0.7192, 0.4009],
                                                  [-0.5808, -0.0045, -0.8140],
                                                  [-0.5836, -0.6948, 0.4203]], dtype='float32')[::-1, ::-1])]),
            imgaug.ToUint8(),
            imgaug.Flip(horiz=True),
        ]
    return [imgaug.ResizeShortestEdge(256, interp=interpolation), imgaug.CenterCrop((224, 224))]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    return testdata.make_jpeg_dataset(str(tmp_path_factory.mktemp("tp_translate")), 10, seed=5)


def quiet_translate(augs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return ftp.translate(augs, **kw)


def batches(pipe):
    out = []
    with pipe:
        for b in pipe:
            out.append(np.array(b[0]))
    return np.concatenate(out)


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def tp_apply(augs, img):
    return imgaug.AugmentorList(list(augs)).augment(img)


# ---- what the chains become ----------------------------------------------------------------------

def test_fbresnet_train_chain_is_fbresnet_augmentors_ops(jpegs):
    tr = ftp.translate(fbresnet(True), strict=True)
    assert tr.native and tr.options == {"dtype": "uint8", "layout": "NHWC", "channels": "BGR", "dct_scaling": False}
    want = ftp.fbresnet_augmentor(224, training=True)
    assert [type(o) for o in tr.ops] == [type(o) for o in want] == [O.TensorpackCrop, O.TensorpackColor,
                                                                    O.HorizontalFlip]
    for a, b in zip(tr.ops, want):
        assert a.fields() == b.fields(), (a, b)
    # the same batches as the hand-written chain
    src = lambda: fastq.sources.Files(jpegs[:8], labels=list(range(8)))  # noqa: E731
    a = batches(tr.pipeline(src(), 4, seed=2))
    b = batches(fastq.Pipeline(src(), batch_size=4, ops=want, dtype="uint8", channels="BGR", seed=2))
    assert a.shape == (8, 224, 224, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    text = str(tr)
    assert "TensorpackColor" in text and "fully native" in text


def test_fbresnet_eval_chain_is_one_tensorpack_crop():
    tr = ftp.translate(fbresnet(False), strict=True)
    assert tr.native
    (op,) = tr.ops
    assert isinstance(op, O.TensorpackCrop)
    assert (op.size, op.max_attempts, op.short_edge, op.interpolation) == (224, 0, 256, "bicubic")
    assert [s.ops for s in tr.steps][0] == []  # ResizeShortestEdge fused into the crop's step


def test_augmentor_list_and_nesting_are_flattened():
    inner = imgaug.AugmentorList([imgaug.ResizeShortestEdge(64), imgaug.CenterCrop(48)])
    tr = ftp.translate(imgaug.AugmentorList([inner, imgaug.Flip(vert=True, prob=0.3)]), strict=True)
    assert [type(o).__name__ for o in tr.ops] == ["TensorpackCrop", "VerticalFlip"]
    assert tr.ops[1].p == 0.3
    with pytest.raises(TypeError, match="list of tensorpack imgaug augmentors"):
        ftp.translate(imgaug.Flip(horiz=True))


@pytest.mark.parametrize("augs,check", [
    ([imgaug.Resize((120, 90), interp=cv2.INTER_AREA)],
     lambda ops: ops[0].size == (120, 90) and ops[0].interpolation == "area"),
    ([imgaug.Resize(64)], lambda ops: ops[0].size == (64, 64) and ops[0].interpolation == "bilinear"),
    ([imgaug.ResizeShortestEdge(100, interp=cv2.INTER_NEAREST), imgaug.RandomCrop((80, 60))],
     lambda ops: ops[0].short == (100,) and ops[0].interpolation == "nearest" and ops[1].size == (80, 60)),
    ([imgaug.GoogleNetRandomCropAndResize((0.2, 0.9), (0.5, 2.0), target_shape=96, interp=cv2.INTER_LANCZOS4)],
     lambda ops: (ops[0].size, ops[0].crop_area_fraction, ops[0].aspect_ratio_range, ops[0].interpolation,
                  ops[0].max_attempts) == (96, (0.2, 0.9), (0.5, 2.0), "lanczos", 10)),
    ([imgaug.Resize(64), imgaug.Flip(horiz=True, prob=0.25)], lambda ops: ops[1].p == 0.25),
    # a fixed size where tensorpack's floor and fastq's half-even rounding agree: (70-64)/2 = 3
    ([imgaug.Resize(70), imgaug.CenterCrop(64)], lambda ops: ops[1].size == (64, 64)),
    ([imgaug.Resize(64), imgaug.RandomApplyAug(imgaug.Flip(horiz=True), 0.7)],
     lambda ops: isinstance(ops[1], O.RandomApply) and ops[1].p == 0.7),
    # on uint8 each colour step truncates by itself: one TensorpackColor with the other steps disabled
    ([imgaug.Resize(64), imgaug.BrightnessScale((0.5, 1.5))],
     lambda ops: (ops[1].brightness, ops[1].contrast, ops[1].saturation, ops[1].lighting_std)
     == ((0.5, 1.5), (1.0, 1.0), 0.0, 0.0)),
    ([imgaug.Resize(64), imgaug.RandomOrderAug([imgaug.BrightnessScale((0.5, 1.5)),
                                                 imgaug.Contrast((0.8, 1.2), rgb=False)])],
     lambda ops: isinstance(ops[1], O.RandomOrder) and len(ops[1].transforms) == 2),
    # on float32 a RandomApplyAug of the colour unit
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.RandomApplyAug(imgaug.Saturation(0.3, rgb=False), 0.4),
      imgaug.Clip(), imgaug.ToUint8()],
     lambda ops: isinstance(ops[1], O.RandomApply) and ops[1].transforms[0].saturation == 0.3),
    ([imgaug.Resize(64), imgaug.ColorSpace(cv2.COLOR_BGR2RGB), imgaug.Lighting(0.2, [1, 2, 3], np.eye(3))],
     lambda ops: ops[1].bgr is False and ops[1].eigval == (1.0, 2.0, 3.0)),
    ([imgaug.Resize(64), imgaug.Grayscale(keepshape=True)], lambda ops: isinstance(ops[1], O.Grayscale)),
])
def test_translated_parameters(augs, check):
    tr = ftp.translate(augs, strict=True)
    assert tr.native
    ops = [o for o in tr.ops if not isinstance(o, O.Normalize)]
    assert check(ops), ops


def test_output_forms():
    assert ftp.translate([imgaug.Resize(64), imgaug.ColorSpace(cv2.COLOR_BGR2RGB)]).options["channels"] == "RGB"
    tr = ftp.translate([imgaug.ColorSpace(cv2.COLOR_BGR2GRAY), imgaug.Resize(64)], strict=True)
    assert tr.options["channels"] == "gray"
    tr = ftp.translate([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.Flip(horiz=True)], strict=True)
    assert tr.options["dtype"] == "float32" and isinstance(tr.ops[-1], O.Normalize)
    assert tr.ops[-1].mean == (0.0,) * 3 and tr.ops[-1].std == (1.0,) * 3 and tr.ops[-1].max_pixel_value == 1.0


class MyFlip(imgaug.Flip):
    pass


REFUSED = [
    ([imgaug.Resize(64), imgaug.Brightness(20)], "Brightness", "delta"),
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.Contrast((0.6, 1.4)), imgaug.ToUint8()], "Contrast", "rgb=None"),
    ([imgaug.Resize(64), imgaug.Contrast((0.6, 1.4), rgb=True)], "Contrast", "rgb=True"),
    ([imgaug.Resize(64), imgaug.Saturation(0.4, rgb=False)], "Saturation", "uint8"),
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.BrightnessScale((0.6, 1.4), clip=False), imgaug.ToUint8()],
     "BrightnessScale", "clip=False"),
    ([imgaug.Resize(64), imgaug.BrightnessScale((1.4, 0.6))], "BrightnessScale", "range="),
    ([imgaug.Resize(64), imgaug.Lighting(-0.1, [1, 2, 3], np.eye(3))], "Lighting", "std=-0.1"),
    ([imgaug.GoogleNetRandomCropAndResize(interp=cv2.INTER_AREA)], "GoogleNetRandomCropAndResize", "INTER_AREA"),
    ([imgaug.GoogleNetRandomCropAndResize((0.08, 1.5))], "GoogleNetRandomCropAndResize", "crop_area_fraction"),
    ([imgaug.ResizeShortestEdge(64, interp=cv2.INTER_LINEAR_EXACT), imgaug.CenterCrop(48)], "ResizeShortestEdge",
     "interp=5"),
    ([imgaug.CenterCrop(64)], "CenterCrop", "half to"),
    ([imgaug.Resize(71), imgaug.CenterCrop(64)], "CenterCrop", "(3, 3)"),  # floor 3 vs half-even 4
    ([imgaug.ResizeShortestEdge(64), imgaug.CenterCrop((48, 40))], "CenterCrop", "square"),
    ([imgaug.ToFloat32(), imgaug.Resize(64)], "Resize", "float32"),
    ([imgaug.Resize(64), imgaug.ColorSpace(cv2.COLOR_BGR2HSV)], "ColorSpace", "mode=40"),
    ([imgaug.Resize(64), imgaug.ColorSpace(cv2.COLOR_BGR2GRAY)], "ColorSpace", "first augmentor"),
    ([imgaug.Resize(64), imgaug.Clip(10, 200)], "Clip", "min=10"),
    ([imgaug.Resize(64), imgaug.Hue((0, 10))], "Hue", "imgaug.Hue"),
    ([imgaug.Resize(64), imgaug.MapImage(lambda x: x)], "MapImage", "MapImage"),
    ([imgaug.Resize(64), MyFlip(horiz=True)], "MyFlip", "subclass"),
    ([imgaug.Resize(64), imgaug.ToFloat32(),
      imgaug.RandomOrderAug([imgaug.BrightnessScale((0.6, 1.4)), imgaug.BrightnessScale((0.9, 1.1))]),
      imgaug.ToUint8()], "RandomOrderAug", "BrightnessScale twice"),
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.BrightnessScale((0.6, 1.4)),
      imgaug.Contrast((0.6, 1.4), rgb=False), imgaug.ToUint8()], "BrightnessScale", "Contrast: a second colour step"),
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.BrightnessScale((0.6, 1.4))], "BrightnessScale", "no ToUint8"),
    ([imgaug.Resize(64), imgaug.ToFloat32(), imgaug.BrightnessScale((0.6, 1.4)), imgaug.MapImage(lambda x: x),
      imgaug.ToUint8()], "BrightnessScale", "by MapImage: no native op"),
]


@pytest.mark.parametrize("augs,name,arg", REFUSED, ids=[f"{r[1]}-{i}" for i, r in enumerate(REFUSED)])
def test_refused_values(augs, name, arg):
    with pytest.raises(TranslationError) as e:
        ftp.translate(augs, strict=True)
    assert name in str(e.value) and arg in str(e.value), str(e.value)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tr = ftp.translate(augs)
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1 and name in msgs[0] and arg in msgs[0], msgs
    assert not tr.native and tr.tail is not None
    first = next(s for s in tr.steps if s.python)
    assert type(first.original).__name__ == name


# ---- deterministic chains vs tensorpack (PSNR on photos) -----------------------------------------

DETERMINISTIC = {
    "eval: ResizeShortestEdge(256, cubic) + CenterCrop(224)": fbresnet(False),
    "ResizeShortestEdge(160, linear) + CenterCrop(128)": [imgaug.ResizeShortestEdge(160), imgaug.CenterCrop(128)],
    "Resize((200, 240), linear)": [imgaug.Resize((200, 240))],
    "Resize((200, 240), cubic)": [imgaug.Resize((200, 240), interp=cv2.INTER_CUBIC)],
    "Resize((150, 150), area)": [imgaug.Resize(150, interp=cv2.INTER_AREA)],
    "eval + ColorSpace(BGR2RGB)": fbresnet(False) + [imgaug.ColorSpace(cv2.COLOR_BGR2RGB)],
    "eval + Grayscale(keepshape=True)": fbresnet(False) + [imgaug.Grayscale(keepshape=True)],
    "eval + ToFloat32 (float32 output)": fbresnet(False) + [imgaug.ToFloat32()],
    "ColorSpace(BGR2GRAY) first + eval": [imgaug.ColorSpace(cv2.COLOR_BGR2GRAY)] + fbresnet(False),
}


@pytest.mark.parametrize("name", list(DETERMINISTIC))
def test_deterministic_chain_psnr_vs_tensorpack(jpegs, name):
    augs = DETERMINISTIC[name]
    tr = ftp.translate(augs, strict=True)
    ours = batches(tr.pipeline(fastq.sources.Files(jpegs, labels=[0] * len(jpegs)), 5))
    theirs = np.stack([tp_apply(augs, cv2.imread(p, cv2.IMREAD_COLOR)) for p in jpegs])
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.shape, theirs.shape, ours.dtype)
    value = psnr(ours, theirs)
    print(f"PSNR {name}: {value:.1f} dB")
    assert value >= 40, (name, value)


# ---- random augmentors: the draws vs tensorpack's samplers ---------------------------------------

def test_train_chain_draw_statistics_match_tensorpack(jpegs):
    """Pipeline.explain records of the translated fbresnet chain vs tensorpack's own augmentors
    drawing with numpy's generator on images of the same sizes: crop area fraction, aspect, fallback
    rate (GoogleNetRandomCropAndResize), flip rate (Flip), colour factors and order (RandomOrderAug)."""
    from scipy import stats
    augs = fbresnet(True)
    tr = ftp.translate(augs, strict=True)
    pipe = tr.pipeline(fastq.sources.Files(jpegs, labels=[0] * len(jpegs)), 5, seed=4)
    crop_ref, _, order_ref, _, flip_ref = augs
    for a in (crop_ref, order_ref, flip_ref):
        a.rng = np.random.RandomState(99)
        for c in getattr(a, "aug_lists", ()):
            c.rng = np.random.RandomState(100 + len(c.__class__.__name__))
    ours = {k: [] for k in ("area", "aspect", "fallback", "flip", "b", "c", "s", "alpha", "order")}
    theirs = {k: [] for k in ours}
    names = {"BrightnessScale": "brightness", "Contrast": "contrast", "Saturation": "saturation",
             "Lighting": "lighting"}
    with pipe:
        for epoch in range(40):
            for i in range(len(jpegs)):
                ex = pipe.explain(epoch, i)
                H, W = ex["src_shape"]
                crop, color, flip = ex["ops"]
                if crop["applied"]:
                    x, y, w, h = crop["box"]
                    ours["area"].append(w * h / (H * W))
                    ours["aspect"].append(w / h)
                ours["fallback"].append(not crop["applied"])
                ours["flip"].append(flip["applied"])
                ours["b"].append(color["brightness"])
                ours["c"].append(color["contrast"])
                ours["s"].append(color["saturation"])
                ours["alpha"].extend(color["alpha"])
                ours["order"].append(tuple(color["order"]))
                # tensorpack's samplers on an image of that size
                img = np.zeros((H, W, 3), np.uint8)
                t = crop_ref.get_transform(img).tfms
                if type(t[0]).__name__ == "CropTransform":
                    theirs["area"].append(t[0].w * t[0].h / (H * W))
                    theirs["aspect"].append(t[0].w / t[0].h)
                theirs["fallback"].append(type(t[0]).__name__ != "CropTransform")
                theirs["flip"].append(type(flip_ref.get_transform(img)).__name__ == "FlipTransform")
                idx = order_ref.rng.permutation(4)
                theirs["order"].append(tuple(names[type(order_ref.aug_lists[k]).__name__] for k in idx))
                bs, ct, sat, lt = order_ref.aug_lists
                theirs["b"].append(float(bs._get_augment_params(img)))
                theirs["c"].append(float(ct._get_augment_params(img)))
                theirs["s"].append(float(sat._get_augment_params(img)))
                theirs["alpha"].extend(float(v) for v in lt._get_augment_params(img))
    n = len(ours["flip"])
    assert n == 400
    for k in ("area", "aspect", "b", "c", "s", "alpha"):
        p = stats.ks_2samp(ours[k], theirs[k]).pvalue
        assert p > 1e-3, (k, p)
    assert min(ours["b"]) >= 0.6 and max(ours["b"]) < 1.4 and min(ours["s"]) >= 0.6 and max(ours["s"]) < 1.4
    assert 0.08 * 0.99 <= min(ours["area"]) and max(ours["area"]) <= 1.0
    assert min(ours["aspect"]) >= 0.75 * 0.95 and max(ours["aspect"]) <= 1 / 0.75 * 1.05
    for k in ("flip", "fallback"):
        a, b = sum(ours[k]), sum(theirs[k])
        table = [[a, n - a], [b, n - b]]
        if min(a, b) > 0:
            assert stats.chi2_contingency(table).pvalue > 1e-3, (k, table)
        else:
            assert max(a, b) <= 5, (k, table)
    assert abs(np.mean(ours["flip"]) - 0.5) < 0.1
    # all 24 orders, about equally often (chi-square against uniform)
    counts = [ours["order"].count(o) for o in set(theirs["order"]) | set(ours["order"])]
    assert len(counts) == 24 and stats.chisquare(counts).pvalue > 1e-3, counts


# ---- exactness of the disabled colour steps ------------------------------------------------------

def _photo(path, h=96, w=128):
    return cv2.resize(cv2.imread(path, cv2.IMREAD_COLOR), (w, h), interpolation=cv2.INTER_AREA)


@pytest.mark.parametrize("aug,key", [
    (imgaug.BrightnessScale((0.5, 1.6)), "brightness"),
    (imgaug.Contrast((0.3, 1.8), rgb=False), "contrast"),
    (imgaug.Lighting(3.0, np.asarray([0.2175, 0.0188, 0.0045]) * 255.0, np.eye(3)[::-1]), "lighting"),
])
@pytest.mark.parametrize("float_segment", [False, True])
def test_lone_colour_step_matches_tensorpack_replay(jpegs, aug, key, float_segment):
    """One colour augmentor (on uint8, or between ToFloat32 and ToUint8) = TensorpackColor with the
    other three steps disabled: replayed with tensorpack's own _augment at the recorded parameter."""
    augs = [imgaug.ToFloat32(), aug, imgaug.ToUint8()] if float_segment else [aug]
    tr = ftp.translate(augs, strict=True)
    (op,) = tr.ops
    spec = _image.ImageSpec(O.compile_ops([op], dtype="uint8", channels="BGR", input_size=(96, 128)))
    worst, diff, total = 0, 0, 0
    for j, path in enumerate(jpegs[:4]):
        bgr = _photo(path)
        rgb = np.ascontiguousarray(bgr[:, :, ::-1])
        for i in range(6):
            out, ex = spec.process_array(rgb, 1, 0, 10 * j + i)
            rec = ex["ops"][-1]
            param = {"brightness": np.float32(rec["brightness"]), "contrast": np.float32(rec["contrast"]),
                     "lighting": np.asarray(rec["alpha"], np.float32)}[key]
            img = bgr.astype(np.float32) if float_segment else bgr
            want = aug._augment(img, param)
            want = np.clip(want, 0, 255).astype(np.uint8)
            d = np.abs(out.astype(int) - want.astype(int))
            worst, diff, total = max(worst, d.max()), diff + (d > 0).sum(), total + d.size
    assert worst <= 1 and diff / total <= 1e-3, (worst, diff / total)


# ---- the Python tail -----------------------------------------------------------------------------

def test_fallback_equals_augmentor_on_native_prefix(jpegs):
    blur = imgaug.MapImage(lambda x: cv2.GaussianBlur(x, (5, 5), 0))
    src = lambda: fastq.sources.Files(jpegs, labels=list(range(len(jpegs))))  # noqa: E731
    tr = quiet_translate(fbresnet(False) + [blur])
    assert tr.python_steps == [tr.steps[-1].name] and len(tr.ops) == 1
    got = batches(tr.pipeline(src(), 5))
    prefix = batches(ftp.translate(fbresnet(False)).pipeline(src(), 5))
    np.testing.assert_array_equal(got, np.stack([cv2.GaussianBlur(x, (5, 5), 0) for x in prefix]))
    # float32 at the split: the tail gets float32, as tensorpack's augmentor would
    half = imgaug.MapImage(lambda x: x * np.float32(0.5))
    tr = quiet_translate(fbresnet(False) + [imgaug.ToFloat32(), half])
    assert tr.tail.float_input
    got = batches(tr.pipeline(src(), 5))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, prefix.astype(np.float32) * np.float32(0.5))
    pipe = tr.pipeline(src(), 5)
    with pipe:
        for _ in pipe:
            pass
        info = pipe.stats()["translation"]
    assert info["python_samples"] == len(jpegs) and info["framework"] == "tensorpack"


def test_fallback_after_variable_size_prefix_matches_tensorpack(jpegs):
    """ResizeShortestEdge natively (pad='batch' prefix), then MapImage and CenterCrop in Python."""
    augs = [imgaug.ResizeShortestEdge(256, interp=cv2.INTER_CUBIC), imgaug.MapImage(lambda x: 255 - x),
            imgaug.CenterCrop(224)]
    tr = quiet_translate(augs)
    assert tr.prefix_options.get("pad") == "batch"
    ours = batches(tr.pipeline(fastq.sources.Files(jpegs, labels=[0] * len(jpegs)), 5, max_image_size=(700, 700)))
    theirs = np.stack([tp_apply(augs, cv2.imread(p, cv2.IMREAD_COLOR)) for p in jpegs])
    assert ours.shape == theirs.shape == (len(jpegs), 224, 224, 3)
    assert psnr(ours, theirs) >= 40


def _run(jpegs, workers):
    augs = fbresnet(True)[:-1] + [imgaug.Hue((-20, 20), rgb=False), imgaug.Flip(horiz=True)]
    tr = quiet_translate(augs)
    assert tr.python_steps[0].startswith("imgaug.Hue")
    pipe = tr.pipeline(fastq.sources.Files(jpegs[:8], labels=list(range(8))), 4, workers=workers, seed=3,
                       shuffle=True)
    out = []
    with pipe:
        for _ in range(2):
            for b in pipe:
                out.append((np.array(b[0]), np.array(b[1])))
    return out


def test_one_vs_two_workers_bit_identical_with_tail(jpegs):
    a, b = _run(jpegs, 1), _run(jpegs, 2)
    assert len(a) == len(b) == 4
    for (x, lx), (y, ly) in zip(a, b):
        np.testing.assert_array_equal(lx, ly)
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0][0], a[2][0])  # epochs differ
