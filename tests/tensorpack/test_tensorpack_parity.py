"""tensorpack parity of fbresnet_augmentor (fastq.tensorpack.fbresnet_augmentor, the ops
TensorpackCrop / TensorpackColor, csrc/image/color/fq_image_aug_tensorpack.cpp) and RandomResizedCrop's
max_attempts.

The draws fastq made (explain records) are replayed through tensorpack 0.11's own imgaug
classes on the same BGR image.  Bounds:
  * crop box: identical (the sampler is also run *inside* tensorpack's
    GoogleNetRandomCropAndResize.get_transform, its rng replaced by fastq's stream);
  * crop pixels: <= 1 level on a few % of values: fastq links Debian's OpenCV 4.6, the test's
    cv2 is pip's 5.x, and their bicubic resize kernels differ by one level (SIMD paths; the
    same bound as tests/ops/test_ops.py's bicubic RandomResizedCrop);
  * colour: <= 1 level on <= 1e-3 of the values: same float32 formulas, but the grey mean is
    summed in double (numpy: float32 pairwise), the grey level is computed without cv2's SIMD
    FMA, and eigvec * eigval is premultiplied (numpy: alpha * eigval first) - an intermediate
    differing in its last bit can truncate across an integer at ToUint8.
"""
import math

import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
import fastq
import fastq.tensorpack as ftp
from fastq._native import _image
from fastq import ops as O
from fastq.bench import testdata
from helpers.golden_ref import RefRng

M64 = (1 << 64) - 1


def next_below(rng, n):
    """fq_rng_next_below."""
    if n <= 1:
        return 0
    threshold = ((1 << 64) - n) % n
    while True:
        x = rng.u64()
        if x >= threshold:
            return x % n


def uniform_range(rng, lo, hi):
    u = rng.uniform()
    if not hi > lo:
        return lo
    v = lo + (hi - lo) * u
    return v if v < hi else lo


class StreamRng:
    """numpy RandomState's uniform / randint / permutation / randn as fastq draws them, for
    tensorpack's augmentors (their ``rng`` attribute)."""

    def __init__(self, seed, epoch, index):
        self.r = RefRng(seed, epoch, index)

    def uniform(self, low=0.0, high=1.0, size=None):
        assert size is None
        return uniform_range(self.r, low, high)

    def randint(self, low, high=None):
        return low + next_below(self.r, high - low)


def _image_of(h, w, seed=0):
    import cv2
    rs = np.random.RandomState(seed)
    small = rs.randint(0, 256, (max(2, h // 10), max(2, w // 10), 3), np.uint8)
    return np.ascontiguousarray(cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC))


def _spec(ops, channels="BGR", **kw):
    return _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels=channels, **kw))


# ---- RandomResizedCrop(max_attempts) --------------------------------------------------------

def rrc_replay(seed, index, H, W, scale, ratio, tries):
    """The documented sampler (torchvision get_params) on fastq's stream -> (box, fallback)."""
    r = RefRng(seed, 0, index)
    area = H * W
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(tries):
        target = area * uniform_range(r, *scale)
        ar = math.exp(uniform_range(r, *lr))
        w = int(np.rint(math.sqrt(target * ar)))
        h = int(np.rint(math.sqrt(target / ar)))
        if 0 < w <= W and 0 < h <= H:
            y = next_below(r, H - h + 1)
            x = next_below(r, W - w + 1)
            return (x, y, w, h), False
    in_ratio = W / H
    if in_ratio < ratio[0]:
        w, h = W, int(np.rint(W / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = H, int(np.rint(H * ratio[1]))
    else:
        w, h = W, H
    w, h = min(max(w, 1), W), min(max(h, 1), H)
    return ((W - w) // 2, (H - h) // 2, w, h), True


def test_rrc_max_attempts_changes_fallback_frequency():
    img = np.zeros((50, 400, 3), np.uint8)  # extreme aspect: few tries fit
    n = 300
    freq = {}
    for tries in (1, 10, 100):
        spec = _spec([O.RandomResizedCrop(8, max_attempts=tries)], channels="RGB")
        fallbacks = 0
        for i in range(n):
            _, ex = spec.process_array(img, 3, 0, i)
            box, fb = rrc_replay(3, i, 50, 400, (0.08, 1.0), (3 / 4, 4 / 3), tries)
            assert ex["ops"][0]["box"] == box, (tries, i)
            fallbacks += fb
        freq[tries] = fallbacks / n
    assert freq[1] > freq[10] > freq[100], freq
    # one try fits with p ~ 0.06 on this image (h <= 50 needs an area fraction <= 0.125 * ratio)
    assert 0.85 < freq[1] < 0.99 and 0.3 < freq[10] < 0.8 and freq[100] < 0.05, freq
    assert O.RandomResizedCrop(8).fields()["max_attempts"] == 10
    with pytest.raises(ValueError, match="max_attempts must be an int in"):
        O.RandomResizedCrop(8, max_attempts=0)


# ---- TensorpackCrop ----------------------------------------------------------------------------

def tp_crop_reference(bgr, rec, size=224, interp=None, short_edge=0):
    """tensorpack's transforms for the recorded box (tensorpack's own Crop/Resize/CenterCrop)."""
    import cv2
    from tensorpack.dataflow import imgaug as ia
    from tensorpack.dataflow.imgaug.transform import CropTransform, ResizeTransform
    interp = cv2.INTER_CUBIC if interp is None else interp
    h, w = bgr.shape[:2]
    if rec["applied"]:
        x, y, ww, hh = rec["box"]
        img = CropTransform(y, x, hh, ww).apply_image(bgr)
        return ResizeTransform(hh, ww, size, size, interp).apply_image(img)
    resize = ia.ResizeShortestEdge(short_edge or size, interp=interp).get_transform(bgr)
    assert rec["resized_shape"] == (resize.new_h, resize.new_w)
    img = resize.apply_image(bgr)
    crop = ia.CenterCrop(size).get_transform(img)
    assert rec["box"] == (crop.x0, crop.y0, size, size)
    return crop.apply_image(img)


@pytest.mark.tensorpack
@pytest.mark.parametrize("shape", [(300, 400), (500, 180), (224, 224), (40, 900)])
def test_tp_crop_is_tensorpacks_sampler_and_transform(shape):
    from tensorpack.dataflow import imgaug as ia
    H, W = shape
    rgb = _image_of(H, W)
    bgr = rgb[:, :, ::-1]
    spec = _spec([O.TensorpackCrop(224)])
    ref = ia.GoogleNetRandomCropAndResize(interp=2)  # cv2.INTER_CUBIC
    seen_fallback = False
    for i in range(12):
        out, ex = spec.process_array(rgb, 7, 0, i)
        rec = ex["ops"][0]
        # tensorpack's own get_transform, drawing from fastq's stream, gives the same box
        ref.rng = StreamRng(7, 0, i)
        tfms = ref.get_transform(bgr).tfms
        if rec["applied"]:
            crop = tfms[0]
            assert (crop.x0, crop.y0, crop.w, crop.h) == rec["box"], (shape, i)
        else:
            seen_fallback = True
            assert (tfms[0].new_h, tfms[0].new_w) == rec["resized_shape"]
            assert (tfms[1].x0, tfms[1].y0) == rec["box"][:2]
        want = tp_crop_reference(bgr, rec)
        d = np.abs(out.astype(int) - want.astype(int))
        assert d.max() <= 1 and (d > 0).mean() < 0.1, (shape, i, d.max(), (d > 0).mean())
    if shape == (40, 900):
        assert seen_fallback


@pytest.mark.tensorpack
def test_tp_crop_sampler_statistics_match_tensorpack():
    """fastq's boxes vs tensorpack's sampler with numpy's own generator (fixed seeds): the same
    distributions of area fraction, aspect and fallback rate (two-sample KS, chi-square)."""
    from scipy import stats
    from tensorpack.dataflow import imgaug as ia
    H, W = 120, 300
    img = np.zeros((H, W, 3), np.uint8)
    spec = _spec([O.TensorpackCrop(16)])
    n = 1500
    ours, theirs = [], []
    ref = ia.GoogleNetRandomCropAndResize(target_shape=16)
    ref.rng = np.random.RandomState(1234)
    for i in range(n):
        rec = spec.process_array(img, 11, 0, i)[1]["ops"][0]
        ours.append((rec["box"][2], rec["box"][3]) if rec["applied"] else None)
        t = ref.get_transform(img).tfms
        theirs.append((t[0].w, t[0].h) if type(t[0]).__name__ == "CropTransform" else None)
    fb = [sum(b is None for b in s) for s in (ours, theirs)]
    chi = stats.chi2_contingency([[fb[0], n - fb[0]], [fb[1], n - fb[1]]])
    assert chi.pvalue > 1e-3, (fb, chi.pvalue)
    for f in (lambda w, h: w * h / (H * W), lambda w, h: w / h, lambda w, h: w):
        a = [f(*b) for b in ours if b]
        b = [f(*b) for b in theirs if b]
        assert stats.ks_2samp(a, b).pvalue > 1e-3


def test_tp_crop_validation_chain_rounding():
    """ResizeShortestEdge(256) rounds the long side (int(x + 0.5)) and CenterCrop floors
    (int((side - size) * 0.5)), unlike fastq's Resize / CenterCrop."""
    spec = _spec(ftp.fbresnet_augmentor(224, training=False))
    rec = spec.process_array(np.zeros((301, 451, 3), np.uint8))[1]["ops"][0]
    assert rec["applied"] is False and rec["tries"] == 0
    assert rec["resized_shape"] == (256, int(256 / 301 * 451 + 0.5))  # 384 (fastq's Resize: 383)
    assert rec["box"] == ((384 - 224) // 2, (256 - 224) // 2, 224, 224)
    rec = spec.process_array(np.zeros((400, 257, 3), np.uint8))[1]["ops"][0]
    assert rec["resized_shape"] == (int(256 / 257 * 400 + 0.5), 256) == (398, 256)
    assert rec["box"] == (16, 87, 224, 224)  # int(174 * 0.5) = 87, int(32 * 0.5) = 16


@pytest.mark.tensorpack
def test_tp_validation_chain_matches_tensorpack():
    import cv2
    from tensorpack.dataflow import imgaug as ia
    for H, W in ((301, 451), (400, 257)):
        rgb = _image_of(H, W, seed=H)
        bgr = rgb[:, :, ::-1]
        out = _spec(ftp.fbresnet_augmentor(224, training=False)).process_array(rgb)[0]
        want = ia.AugmentorList([ia.ResizeShortestEdge(256, interp=cv2.INTER_CUBIC),
                                 ia.CenterCrop((224, 224))]).augment(np.ascontiguousarray(bgr))
        d = np.abs(out.astype(int) - want.astype(int))
        assert d.max() <= 1 and (d > 0).mean() < 0.1


# ---- TensorpackColor ---------------------------------------------------------------------------

def tp_color_augmentors():
    from tensorpack.dataflow import imgaug as ia
    # fbresnet_augmentor's list, verbatim (tensorpack master examples/ImageNetModels/imagenet_utils.py)
    return ia.RandomOrderAug(
        [ia.BrightnessScale((0.6, 1.4)),
         ia.Contrast((0.6, 1.4), rgb=False),
         ia.Saturation(0.4, rgb=False),
         ia.Lighting(0.1,
                     eigval=np.asarray([0.2175, 0.0188, 0.0045][::-1]) * 255.0,
                     eigvec=np.array([[-0.5675, 0.7192, 0.4009],
                                      [-0.5808, -0.0045, -0.8140],
                                      [-0.5836, -0.6948, 0.4203]], dtype='float32')[::-1, ::-1])])


def tp_color_reference(bgr_u8, rec, order_aug):
    """ToFloat32, the four augmentors in the recorded order with the recorded parameters
    (through PhotometricTransform, as get_transform builds it), ToUint8."""
    from tensorpack.dataflow import imgaug as ia
    from tensorpack.dataflow.imgaug.transform import PhotometricTransform
    augs = dict(zip(("brightness", "contrast", "saturation", "lighting"), order_aug.aug_lists))
    params = {"brightness": rec["brightness"], "contrast": rec["contrast"], "saturation": rec["saturation"],
              "lighting": np.asarray(rec["alpha"], np.float32)}
    img = ia.ToFloat32().augment(bgr_u8)
    for name in rec["order"]:
        aug, p = augs[name], params[name]
        img = PhotometricTransform(func=lambda im, a=aug, p=p: a._augment(im, p)).apply_image(img)
    return ia.ToUint8().augment(img)


def color_draws(seed, index, std=0.1):
    """The documented draws of TensorpackColor (alone in the chain)."""
    r = RefRng(seed, 0, index)
    order = [0, 1, 2, 3]
    for k in (3, 2, 1):
        j = next_below(r, k + 1)
        order[k], order[j] = order[j], order[k]
    b = uniform_range(r, 0.6, 1.4)
    c = uniform_range(r, 0.6, 1.4)
    s = 1 + uniform_range(r, -0.4, 0.4)
    alpha = []
    for _ in range(3):
        u1, u2 = r.uniform(), r.uniform()
        alpha.append(float(np.float32(math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2) * std)))
    names = ("brightness", "contrast", "saturation", "lighting")
    return [names[k] for k in order], b, c, s, tuple(alpha)


@pytest.mark.tensorpack
def test_tp_color_matches_tensorpack_replay():
    ref = tp_color_augmentors()
    worst, total, diff = 0, 0, 0
    orders = set()
    for shape, seed in (((64, 80), 0), ((97, 61), 1), ((224, 224), 2)):
        spec = _spec([O.TensorpackColor()], input_size=shape)
        rgb = _image_of(*shape, seed=seed)
        rgb[:5] = 255  # saturated rows: the clips matter
        rgb[-5:] = 0
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])
        for i in range(16):
            out, ex = spec.process_array(rgb, 5, 0, i)
            rec = ex["ops"][-1]  # after the input_size CenterCrop (no draw)
            order, b, c, s, alpha = color_draws(5, i)
            assert (rec["order"], rec["brightness"], rec["contrast"], rec["saturation"], rec["alpha"]) == \
                (order, b, c, s, alpha)
            orders.add(tuple(order))
            want = tp_color_reference(bgr, rec, ref)
            d = np.abs(out.astype(int) - want.astype(int))
            worst = max(worst, d.max())
            total += d.size
            diff += (d > 0).sum()
    assert worst <= 1 and diff / total <= 1e-3, (worst, diff / total)
    assert len(orders) >= 10  # the random order really varies


def test_tp_color_bgr_flag_is_a_channel_reversal():
    """bgr=True (tensorpack's channel i = fastq's 2 - i) with the BGR constants = bgr=False with
    eigvec's rows reversed, on the reversed output: bit-identical (same grey weights, same
    increments per colour, same draws: alpha_k multiplies eigval[k] either way)."""
    rgb = _image_of(50, 70, seed=3)
    a = _spec([O.TensorpackColor()], channels="BGR", input_size=(50, 70)).process_array(rgb, 1, 0, 4)[0]
    b = _spec([O.TensorpackColor(eigval=O.TP_EIGVAL_BGR, eigvec=O.TP_EIGVEC_BGR[::-1], bgr=False)],
              channels="RGB", input_size=(50, 70)).process_array(rgb, 1, 0, 4)[0]
    np.testing.assert_array_equal(a[:, :, ::-1], b)
    assert O.TP_EIGVEC_BGR[0] == O.LIGHTING_EIGVEC[2][::-1] and O.TP_EIGVAL_BGR[0] == O.LIGHTING_EIGVAL[2]


def test_tp_color_on_gray_output():
    """channels=1: contrast uses the image mean, saturation is the identity up to float32
    rounding, lighting adds inc[0]: every value stays a clipped truncation of a float32 step."""
    gray = _image_of(40, 60, seed=4)[:, :, 0]
    spec = _image.ImageSpec(O.compile_ops([O.TensorpackColor(lighting_std=0)], dtype="uint8", channels=1,
                                          input_size=(40, 60)))
    out, ex = spec.process_array(gray, 1, 0, 2)
    rec = ex["ops"][-1]
    x = gray.astype(np.float32)
    for name in rec["order"]:
        if name == "brightness":
            x = np.clip(x * np.float32(rec["brightness"]), 0, 255)
        elif name == "contrast":
            r = rec["contrast"]
            x = np.clip(x * np.float32(r) + np.float32(x.astype(np.float64).mean()) * np.float32(1 - r), 0, 255)
        elif name == "saturation":
            v = rec["saturation"]
            x = np.clip(x * np.float32(v) + x * np.float32(1 - v), 0, 255)
    d = np.abs(out[:, :, 0].astype(int) - x.astype(np.uint8).astype(int))
    assert out.shape == (40, 60, 1) and d.max() <= 1 and (d > 0).mean() < 1e-2


@pytest.mark.parametrize("make,msg", [
    (lambda: O.TensorpackColor(saturation=1.0), "saturation must be"),
    (lambda: O.TensorpackColor(brightness=(1.4, 0.6)), "brightness must satisfy"),
    (lambda: O.TensorpackColor(eigvec=((1, 2, 3),)), "eigvec must be 3 x 3"),
    (lambda: O.TensorpackCrop(224, crop_area_fraction=(0, 1)), "crop_area_fraction must satisfy"),
    (lambda: O.TensorpackCrop(224, interpolation="area"), "interpolation must be"),
    (lambda: O.TensorpackCrop(224, short_edge=100), "short_edge must be"),
    (lambda: O.TensorpackCrop(224, max_attempts=-1), "max_attempts must be"),
])
def test_tp_param_errors(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


# ---- the chain ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tp_jpegs")
    return testdata.make_jpeg_dataset(str(d), 8, seed=9, min_side=180, max_side=420)


@pytest.mark.tensorpack
def test_fbresnet_chain_on_jpegs_matches_tensorpack(jpegs):
    """The whole train chain on JPEGs (op 0 decoded as a region when the sampler found a box)
    vs tensorpack's augmentors replayed on cv2's full decode (BGR, as cv2.imread)."""
    import cv2
    from tensorpack.dataflow import imgaug as ia
    from tensorpack.dataflow.imgaug.transform import FlipTransform
    ops = ftp.fbresnet_augmentor(224)
    spec = _spec(ops, dct_scaling=False)
    ref = tp_color_augmentors()
    rois = 0
    for i, path in enumerate(jpegs):
        data = open(path, "rb").read()
        bgr = cv2.imread(path, cv2.IMREAD_COLOR)
        for index in range(3):
            out, ex = spec.process_encoded(data, 2, 0, 10 * i + index)
            crop, color, flip = ex["ops"]
            rois += ex["roi_used"]
            if crop["applied"]:
                plan = spec.plan_decode(*bgr.shape[:2], 2, 0, 10 * i + index)
                assert plan["box_op"] and plan["resize_after"] and plan["box"] == crop["box"]
                assert plan["interp"] == "bicubic"
            img = tp_crop_reference(bgr, crop)
            img = tp_color_reference(img, color, ref)
            if flip["applied"]:
                img = FlipTransform(224, 224, horiz=True).apply_image(img)
            d = np.abs(out.astype(int) - img.astype(int))
            # decode (libjpeg-turbo 2.1 region vs cv2's bundled libjpeg) + bicubic kernels: a
            # few levels at most (measured: max 2, mean 0.02 over 64 samples)
            assert d.mean() < 0.1 and d.max() <= 3, (path, index, d.mean(), d.max())
    assert rois > 0
    assert isinstance(ia.Flip(horiz=True), ia.ImageAugmentor)


def _pipeline_batches(jpegs, workers):
    src = fastq.sources.Files(jpegs, list(range(len(jpegs))))
    out = []
    with fastq.Pipeline(src, batch_size=4, ops=ftp.fbresnet_augmentor(64), channels="BGR", dtype="uint8",
                        workers=workers, seed=3) as pipe:
        for _ in range(2):  # two epochs
            for batch in pipe:
                out.append(np.array(batch[0]))
    return out


def test_fbresnet_pipeline_one_vs_two_workers_bit_identical(jpegs):
    a = _pipeline_batches(jpegs, 1)
    b = _pipeline_batches(jpegs, 2)
    assert len(a) == len(b) == 4
    for x, y in zip(a, b):
        assert x.shape == (4, 64, 64, 3) and x.dtype == np.uint8
        np.testing.assert_array_equal(x, y)



def test_fbresnet_chain_never_dct_scales(jpegs):
    """TensorpackCrop as op 0 decodes its region at full scale even with dct_scaling=True (the
    pipeline default): tensorpack decodes with cv2.imread, and the DCT-scaled path (warpAffine of a
    1/2..1/8 decode) gives other pixels.  Boxes of at least twice the output are the ones the
    DCT-scaled path would take: the test makes sure some are drawn."""
    ops = ftp.fbresnet_augmentor(64)
    on, off = _spec(ops, dct_scaling=True), _spec(ops, dct_scaling=False)
    big = 0
    for i, path in enumerate(jpegs):
        data = open(path, "rb").read()
        for index in range(6):
            a, ea = on.process_encoded(data, 4, 0, 10 * i + index)
            b, eb = off.process_encoded(data, 4, 0, 10 * i + index)
            assert ea["decode_scale"] == (8, 8) and ea["ops"][0] == eb["ops"][0]
            np.testing.assert_array_equal(a, b)
            crop = ea["ops"][0]
            big += crop["applied"] and min(crop["box"][2], crop["box"][3]) >= 128
    assert big > 0
