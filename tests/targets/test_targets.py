"""Dense targets (fastq.targets, csrc/image/fq_image_targets*.cpp): boxes, keypoints, masks
and image_info follow the image through the draws of its explain record.  Independent
references: torchvision.transforms.v2.functional on tv_tensors (boxes, keypoints) given the
parameters read from the explain record, cv2 / numpy for masks, and the image path itself
(a mask run as a 1-channel image through a nearest-neighbour chain)."""

import math

import numpy as np
import pytest

import fastq.ops as O
from fastq._native import _image
from fastq import errors
from fastq import targets as T

H, W = 96, 128


def run(ops, img=None, index=0, seed=7, channels=3):
    if img is None:
        img = (np.arange(H * W * 3) % 251).astype(np.uint8).reshape(H, W, 3)
    if channels == 1 and img.ndim == 3:
        img = img[:, :, 0]
    spec = _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels=channels, input_size=img.shape[:2]))
    return spec.process_array(img, seed, 0, index)


def random_boxes(rng, n, h=H, w=W):
    x0 = rng.uniform(0, w - 2, n)
    y0 = rng.uniform(0, h - 2, n)
    x1 = np.minimum(x0 + rng.uniform(1, w / 2, n), w)
    y1 = np.minimum(y0 + rng.uniform(1, h / 2, n), h)
    return np.stack([x0, y0, x1, y1], 1).astype(np.float32)


# chains covering every geometric rule; each drawn for several indices
CHAINS = {
    "rrc": [O.RandomResizedCrop((64, 80), scale=(0.2, 1.0))],
    "resize": [O.Resize((50, 70))],
    "resize_short": [O.Resize(shorter_side=60), O.CenterCrop((60, 70))],
    "center_crop": [O.CenterCrop((80, 100))],
    "center_crop_pad": [O.CenterCrop((120, 150))],
    "random_crop_pad": [O.RandomCrop((90, 110), padding=(5, 7, 3, 9))],
    "hflip": [O.HorizontalFlip(0.5)],
    "vflip": [O.VerticalFlip(0.5)],
    "affine": [O.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2))],
    "affine_shear": [O.RandomAffine(10, shear=(-10, 10, -5, 5))],
    "rotate": [O.Rotate((-40, 40))],
    "shear_x": [O.ShearX((-0.3, 0.3))],
    "shear_y": [O.ShearY((-0.3, 0.3))],
    "translate_x": [O.TranslateX((-20, 20))],
    "translate_y": [O.TranslateY((-20, 20))],
    "rse_pad": [O.ResizeShortestEdge([64, 80], max_size=120), O.Pad(size=(128, 128))],
    "scale_jitter": [O.ScaleJitter((80, 80), scale=(0.3, 2.0))],
    "zoom_out": [O.RandomZoomOut(side_range=(1.0, 2.5), p=0.7), O.Resize((80, 80))],
    "chain": [O.HorizontalFlip(0.5), O.RandomResizedCrop((72, 72)), O.VerticalFlip(0.5), O.Rotate((-20, 20)),
              O.ColorJitter(0.4, 0.4)],
}


# ---- torchvision reference: replay every record with F on tv_tensors -------------------------


def tv_replay(ex, obj, kind):
    import torch
    from torchvision.transforms.v2 import functional as F

    for r in ex["ops"]:
        op, (ih, iw), (oh, ow) = r["op"], r["in_shape"], r["out_shape"]
        if op == "RandomResizedCrop":
            x, y, w, h = r["box"]
            obj = F.resized_crop(obj, y, x, h, w, [oh, ow])
        elif op in ("Resize", "ResizeShortestEdge"):
            obj = F.resize(obj, [oh, ow])
        elif op == "CenterCrop":
            obj = F.center_crop(obj, [oh, ow])
        elif op == "RandomCrop":
            x, y, w, h = r["box"]
            obj = F.crop(F.pad(obj, list(r["pad"])), y, x, h, w)
        elif op == "Pad":
            obj = F.pad(obj, list(r["pad"]))
        elif op == "RandomZoomOut" and r["applied"]:
            obj = F.pad(obj, list(r["pad"]))
        elif op == "ScaleJitter":
            x, y, w, h = r["box"]
            obj = F.crop(F.resize(obj, [h, w]), y, x, oh, ow)
        elif op == "HorizontalFlip" and r["applied"]:
            obj = F.horizontal_flip(obj)
        elif op == "VerticalFlip" and r["applied"]:
            obj = F.vertical_flip(obj)
        elif op == "RandomAffine":
            # fastq's angle is counter-clockwise, F.affine's clockwise (F.rotate's counter-clockwise);
            # fastq's shear composition differs: sheared RandomAffine is compared to cv2 below
            assert r["shear"] == (0.0, 0.0)
            obj = F.affine(obj, angle=-r["angle"], translate=list(r["translate"]), scale=r["scale"], shear=[0.0, 0.0])
        elif op == "Rotate" and r["applied"]:
            obj = F.rotate(obj, r["magnitude"])
        elif op in ("ShearX", "ShearY") and r["applied"]:
            s = math.degrees(math.atan(r["magnitude"]))
            obj = F.affine(obj, angle=0.0, translate=[0, 0], scale=1.0,
                           shear=[s, 0.0] if op == "ShearX" else [0.0, s], center=[0, 0])
        elif op in ("TranslateX", "TranslateY") and r["applied"]:
            t = int(r["magnitude"])
            obj = F.affine(obj, angle=0.0, translate=[t, 0] if op == "TranslateX" else [0, t], scale=1.0,
                           shear=[0.0, 0.0])
    return obj


def tv_boxes(ex, boxes, clamping_mode="hard"):
    import torch
    from torchvision import tv_tensors as tv

    b = tv.BoundingBoxes(torch.tensor(boxes, dtype=torch.float64), format="XYXY", canvas_size=(H, W),
                         clamping_mode=clamping_mode)
    return tv_replay(ex, b, "boxes").numpy()


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(n for n in CHAINS if n != "affine_shear"))
def test_boxes_match_torchvision(name):
    rng = np.random.default_rng(1)
    for index in range(6):
        _, ex = run(CHAINS[name], index=index)
        boxes = random_boxes(rng, 12)
        got = T.transform_boxes(ex, boxes, np.arange(12), max_boxes=12)
        want = tv_boxes(ex, boxes)
        keep = (want[:, 2] > want[:, 0]) & (want[:, 3] > want[:, 1])  # torchvision keeps empty boxes
        n = got["num_boxes"]
        assert n == keep.sum()
        np.testing.assert_array_equal(got["index"][:n], np.nonzero(keep)[0])
        np.testing.assert_array_equal(got["classes"][:n], np.nonzero(keep)[0])
        np.testing.assert_allclose(got["boxes"][:n], want[keep], atol=2e-3)
        assert (got["boxes"][n:] == 0).all() and (got["classes"][n:] == -1).all()


def test_affine_with_shear_boxes_are_the_corners_of_the_cv2_matrix():
    import cv2

    rng = np.random.default_rng(2)
    for index in range(5):
        _, ex = run(CHAINS["affine_shear"], index=index)
        M = np.array(ex["ops"][-1]["matrix"])
        boxes = random_boxes(rng, 8)
        got = T.transform_boxes(ex, boxes, max_boxes=8, truncate=False)
        want = []
        for x0, y0, x1, y1 in boxes.astype(np.float64):
            # pixel-centre (index) coordinates for cv2's matrix: continuous - 0.5
            c = np.array([[[x0, y0], [x1, y0], [x0, y1], [x1, y1]]]) - 0.5
            t = cv2.transform(c, M)[0] + 0.5
            b = [t[:, 0].min(), t[:, 1].min(), t[:, 0].max(), t[:, 1].max()]
            b = np.clip(b, 0, [W, H, W, H])
            if b[2] > b[0] and b[3] > b[1]:
                want.append(b)
        assert got["num_boxes"] == len(want)
        np.testing.assert_allclose(got["boxes"][:len(want)], np.array(want).reshape(-1, 4), atol=2e-3)


# ---- keypoints -----------------------------------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(n for n in CHAINS if n != "affine_shear"))
def test_keypoints_match_torchvision(name):
    """Against torchvision's zero-size, unclamped BoundingBoxes (continuous coordinates as
    fastq's; tv KeyPoints mix conventions: flips map x to W - 1 - x, resize scales x)."""
    rng = np.random.default_rng(3)
    for index in range(6):
        _, ex = run(CHAINS[name], index=index)
        pts = np.concatenate([rng.uniform(0, W, (4, 5, 1)), rng.uniform(0, H, (4, 5, 1)), np.ones((4, 5, 1))], 2)
        pts = pts.astype(np.float32)
        got = T.transform_keypoints(ex, pts)
        xy = pts[..., :2].reshape(-1, 2).astype(np.float64)
        want = tv_boxes(ex, np.concatenate([xy, xy], 1), clamping_mode=None)[:, :2].reshape(4, 5, 2)
        np.testing.assert_allclose(got[..., :2], want, atol=2e-3)
        oh, ow = ex["out_shape"][:2]
        inside = (want[..., 0] >= 0) & (want[..., 0] <= ow) & (want[..., 1] >= 0) & (want[..., 1] <= oh)
        # visibility 0 when the point leaves some op's image (the final one included)
        assert (got[..., 2][~inside] == 0).all() and (got[..., 2] == 0).mean() < 1


def test_keypoint_flip_index_swaps_left_and_right():
    pts = np.array([[[10, 20, 2], [30, 20, 2], [20, 40, 1]]], np.float32)
    flip = [1, 0, 2]
    for index in range(8):
        _, ex = run([O.HorizontalFlip(0.5), O.HorizontalFlip(0.5)], index=index)
        got = T.transform_keypoints(ex, pts, flip_index=flip)
        n_flips = sum(r.get("applied", False) for r in ex["ops"])
        want = pts.copy()
        if n_flips % 2:
            want = want[:, flip]
            want[..., 0] = W - want[..., 0]
        np.testing.assert_array_equal(got, want)


def test_keypoints_leaving_the_image_get_visibility_zero():
    _, ex = run([O.CenterCrop((40, 40))])
    pts = np.array([[[64, 48, 2], [5, 5, 2], [70, 50, 0]]], np.float32)
    got = T.transform_keypoints(ex, pts)
    np.testing.assert_array_equal(got[0, :, 2], [2, 0, 0])
    np.testing.assert_allclose(got[0, 0, :2], [64 - 44, 48 - 28])


# ---- masks -----------------------------------------------------------------------------------

def label_map(h=H, w=W, dtype=np.uint8):
    rng = np.random.default_rng(4)
    return rng.integers(0, 200, (h, w)).astype(dtype)


NEAREST = {
    "rrc": [O.RandomResizedCrop((64, 80), scale=(0.2, 1.0), interpolation="nearest")],
    "resize": [O.Resize((50, 70), interpolation="nearest")],
    "crops": [O.CenterCrop((120, 150)), O.RandomCrop((90, 110), padding=(5, 7, 3, 9))],
    "flips": [O.HorizontalFlip(0.5), O.VerticalFlip(0.5), O.CenterCrop((80, 100))],
    "affine": [O.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=5, interpolation="nearest",
                              fill=255)],
    "primitives": [O.Rotate((-40, 40), fill=255), O.ShearX((-0.3, 0.3), fill=255), O.ShearY(0.2, fill=255, p=0.5),
                   O.TranslateX((-20, 20), fill=255), O.TranslateY((-20, 20), fill=255)],
    "rse_pad": [O.ResizeShortestEdge([64, 80], max_size=120, interpolation="nearest"),
                O.Pad(size=(128, 128), fill=255)],
    "scale_jitter": [O.ScaleJitter((80, 80), scale=(0.3, 2.0), interpolation="nearest", fill=255)],
    "zoom_out": [O.RandomZoomOut(fill=255, side_range=(1.0, 2.5), p=0.7), O.Resize((80, 80), interpolation="nearest")],
}


RESAMPLING = ("rrc", "resize", "rse_pad", "scale_jitter", "zoom_out")  # chains with a resize


@pytest.mark.parametrize("name", sorted(NEAREST))
def test_legacy_mask_moves_exactly_like_a_nearest_neighbour_image(name):
    """mask_sampling "legacy" is the image path's own nearest neighbour (OpenCV's
    INTER_NEAREST); without a resize in the chain the default "center" is too (crops,
    pads, flips and the affine ops sample alike in both).  Where the chain resizes,
    "center" is checked against TensorFlow and the image's pixels in
    tests/targets/test_mask_sampling.py."""
    m = label_map()
    fill = 255 if name in ("affine", "primitives", "rse_pad", "scale_jitter", "zoom_out") else 0
    moved = 0.0
    for index in range(6):
        img, ex = run(NEAREST[name], img=m, index=index, channels=1)
        np.testing.assert_array_equal(T.transform_mask(ex, m, fill=fill, sampling="legacy"), img[:, :, 0])
        moved += (T.transform_mask(ex, m, fill=fill) != img[:, :, 0]).mean() / 6
    assert moved > 0.1 if name in RESAMPLING else moved == 0, moved  # the resized ones move


def test_legacy_mask_bit_identical_to_cv2_resize_and_flip():
    import cv2

    m = label_map(dtype=np.uint16) * 300
    for index in range(6):
        _, ex = run([O.RandomResizedCrop((64, 80)), O.HorizontalFlip(0.5)], index=index)
        r0, r1 = ex["ops"]
        x, y, w, h = r0["box"]
        want = cv2.resize(m[y:y + h, x:x + w], (80, 64), interpolation=cv2.INTER_NEAREST)
        if r1["applied"]:
            want = cv2.flip(want, 1)
        got = T.transform_mask(ex, m, fill=65535, sampling="legacy")
        assert got.dtype == np.uint16
        np.testing.assert_array_equal(got, want)


def test_mask_sampling_must_be_named():
    _, ex = run([O.Resize((50, 70))])
    with pytest.raises(ValueError, match="sampling must be one of"):
        T.transform_mask(ex, label_map(), sampling="nearest")
    with pytest.raises(ValueError, match="mask_sampling must be one of"):
        T.Targets([np.zeros((0, 4))], max_boxes=0, masks=[label_map()], mask_sampling="exact")
    with pytest.raises(errors.FastqError, match="neither FQ_TGT_CENTER nor FQ_TGT_LEGACY"):
        _image.targets_mask(ex, label_map(), 0, 7)  # the C check behind the Python one


def test_mask_affine_matches_cv2_warp_affine():
    """cv2.warpAffine INTER_NEAREST of the record's matrix.  The native OpenCV (4.6,
    fixed-point) and the tests' cv2 (5.x) round a few sampling positions differently:
    at most 1% of the pixels may differ (exactness against the image path itself is
    test_mask_moves_exactly_like_a_nearest_neighbour_image)."""
    import cv2

    m = label_map(dtype=np.uint16) * 300
    for index in range(6):
        _, ex = run([O.RandomAffine(30, scale=(0.7, 1.3), shear=8)], index=index)
        M = np.array(ex["ops"][-1]["matrix"])
        want = cv2.warpAffine(m, M, (W, H), flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=65535)
        got = T.transform_mask(ex, m, fill=65535)
        assert (got != want).mean() <= 0.01


@pytest.mark.parametrize("name,tol", [("rrc", 1), ("center_crop_pad", 1), ("random_crop_pad", 1), ("resize", 1),
                                      ("translate_y", 1), ("rse_pad", 1), ("scale_jitter", 1), ("zoom_out", 1), ("chain", 2.5), ("rotate", 2.5),
                                      ("affine", 2.5), ("affine_shear", 2.5), ("shear_x", 2.5)])
def test_a_box_drawn_into_a_mask_moves_like_the_mask(name, tol):
    """The transformed box and the bounding box of the transformed mask's pixels agree
    within 1 output pixel per side for axis-aligned chains (crops, resizes, pads, flips,
    translations; nearest sampling is off by less than a pixel, also when upscaling), and
    within 2.5 pixels when a rotation / shear / affine scale is in the chain (the box is
    the axis-aligned box of the exact corners, the mask the pixels whose centres land in
    the rotated rectangle: a corner tip may hold no pixel centre, and errors compound)."""
    rng = np.random.default_rng(5)
    for index in range(8):
        _, ex = run(CHAINS[name], index=index)
        x0, y0 = int(rng.integers(10, W // 2)), int(rng.integers(10, H // 2))
        x1, y1 = x0 + int(rng.integers(12, 40)), y0 + int(rng.integers(12, 30))
        m = np.zeros((H, W), np.uint8)
        m[y0:y1, x0:x1] = 1
        mo = T.transform_mask(ex, m)
        b = T.transform_boxes(ex, [[x0, y0, x1, y1]], max_boxes=1)
        ys, xs = np.nonzero(mo == 1)
        if b["num_boxes"] == 0 or len(xs) == 0:
            assert len(xs) <= 2 and (b["num_boxes"] == 0 or (b["boxes"][0, 2:] - b["boxes"][0, :2]).min() < 2)
            continue
        mb = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        assert np.abs(mb - b["boxes"][0]).max() <= tol + 1e-4, (mb, b["boxes"][0], ex["ops"])


def test_mask_of_another_size_is_refused():
    _, ex = run([O.CenterCrop(40)])
    with pytest.raises(errors.FastqError, match="mask: a 10x20 mask for a 128x96 image"):
        T.transform_mask(ex, np.zeros((20, 10), np.uint8))
    with pytest.raises(TypeError, match="uint8 or uint16"):
        T.transform_mask(ex, np.zeros((H, W), np.float32))
    with pytest.raises(errors.FastqError, match="does not fit"):
        T.transform_mask(ex, np.zeros((H, W), np.uint8), fill=256)


# ---- drops, truncation, bad input, refusal -------------------------------------------------

def test_min_area_min_visibility_and_truncation():
    _, ex = run([O.CenterCrop((48, 64))])  # box (32, 24, 64, 48)
    boxes = np.array([[0, 0, 40, 30],      # 8 x 6 visible of 40 x 30 -> vis 0.04, area 48
                      [30, 20, 70, 50],    # 32*... fully: 38 x 26 of 40 x 30 visible? (32..70, 24..50)
                      [0, 0, 10, 10],      # outside the crop -> empty
                      [40, 30, 50, 40]], np.float32)
    r = T.transform_boxes(ex, boxes, [1, 2, 3, 4], max_boxes=4)
    assert r["num_boxes"] == 3 and list(r["index"][:3]) == [0, 1, 3]
    np.testing.assert_allclose(r["boxes"][0], [0, 0, 8, 6])
    r = T.transform_boxes(ex, boxes, [1, 2, 3, 4], max_boxes=4, min_area=50)
    assert list(r["classes"]) == [2, 4, -1, -1]
    r = T.transform_boxes(ex, boxes, [1, 2, 3, 4], max_boxes=4, min_visibility=0.5)
    assert list(r["classes"][:r["num_boxes"]]) == [2, 4]
    r = T.transform_boxes(ex, boxes, [1, 2, 3, 4], max_boxes=2)
    assert r["num_boxes"] == 2 and r["truncated"] == 1 and list(r["classes"]) == [1, 2]
    with pytest.raises(errors.FastqError, match="more than max_boxes=2"):
        T.transform_boxes(ex, boxes, [1, 2, 3, 4], max_boxes=2, truncate=False)
    r = T.transform_boxes(ex, np.zeros((0, 4)), None, max_boxes=3)
    assert r["num_boxes"] == 0 and r["boxes"].shape == (3, 4)


@pytest.mark.parametrize("box,match", [
    ([np.nan, 0, 5, 5], "finite"),
    ([10, 10, 5, 20], "not x0 <= x1"),
    ([-5, 0, 5, 5], "outside the 128x96 source"),
    ([0, 0, 500, 5], "outside"),
])
def test_bad_boxes_are_refused(box, match):
    _, ex = run([O.HorizontalFlip()])
    with pytest.raises(errors.FastqError, match=match):
        T.transform_boxes(ex, [box], max_boxes=2)


def test_bad_keypoints_are_refused():
    _, ex = run([O.HorizontalFlip()])
    with pytest.raises(errors.FastqError, match="finite"):
        T.transform_keypoints(ex, [[[np.inf, 1, 1]]])
    with pytest.raises(errors.FastqError, match="flip_index"):
        T.transform_keypoints(ex, np.ones((1, 3, 3)), flip_index=[1, 1, 2])
    with pytest.raises(ValueError, match="N, K, 3"):
        T.transform_keypoints(ex, np.ones((3, 3)))


@pytest.mark.parametrize("policy", [O.RandAugment(), O.TrivialAugmentWide(), O.AutoAugment()])
def test_policies_are_refused(policy):
    _, ex = run([O.CenterCrop(64), policy])
    for f in (lambda: T.transform_boxes(ex, [[0, 0, 5, 5]], max_boxes=1),
              lambda: T.transform_keypoints(ex, np.ones((1, 1, 3))),
              lambda: T.transform_mask(ex, np.zeros((H, W), np.uint8)),
              lambda: T.image_info(ex)):
        with pytest.raises(errors.FastqError, match=f"op 1 \\({type(policy).__name__}\\) has no target rule"):
            f()
    assert T.rule(policy) == "refused"


def test_check_ops_refuses_policies_before_any_sample():
    T.check_ops([O.RandomResizedCrop(64), O.HorizontalFlip(), O.ColorJitter(0.4)])
    T.check_ops(O.compile_ops([O.ResizeShortestEdge(800, 1333), O.Pad(size=(1344, 1344))]))
    with pytest.raises(errors.FastqError, match="op 1 \\(TrivialAugmentWide\\) has no target rule"):
        T.check_ops([O.RandomResizedCrop(64), O.TrivialAugmentWide()])


def test_every_op_kind_has_an_explicit_rule_or_is_refused():
    rules = {name: T.rule(name) for name in _image.OP_KINDS}
    # policies may draw geometric ops; compositions and user ops have no rule (yet)
    assert {n for n, r in rules.items() if r == "refused"} == {"RandAugment", "TrivialAugmentWide", "AutoAugment",
                                                               "RandomApply", "RandomChoice", "RandomOrder",
                                                               "CustomOp", "PyFunc", "TensorpackCrop",
                                                               "TFRandAugment", "TFAutoAugment",
                                                               "TimmRandAugment", "TimmAutoAugment",
                                                               "TimmAugMix",
                                                               # Keras warps: no target rule (yet)
                                                               "KerasRandomZoom", "KerasRandomTranslation",
                                                               "KerasRandomRotation"}
    assert rules["RandomErasing"] == "pixel"
    assert rules["KerasRandomContrast"] == rules["KerasRandomBrightness"] == "pixel"
    assert T.rule("SomeFutureOp") == "refused"


def test_pixel_ops_leave_targets_unchanged():
    m = label_map()
    boxes = random_boxes(np.random.default_rng(6), 5)
    _, ex = run([O.ColorJitter(0.4, 0.4, 0.4, 0.1), O.Grayscale(0.5), O.Solarize(100), O.GaussianBlur(3),
                 O.Cutout(8)], index=3)
    r = T.transform_boxes(ex, boxes, max_boxes=5)
    np.testing.assert_array_equal(r["boxes"], boxes)
    np.testing.assert_array_equal(T.transform_mask(ex, m), m)


def test_explain_record_is_checked():
    with pytest.raises(TypeError, match="explain record"):
        T.transform_boxes({"ops": []}, [[0, 0, 1, 1]], max_boxes=1)


# ---- image_info ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rrc", "resize", "center_crop_pad", "random_crop_pad", "rse_pad", "scale_jitter",
                                  "zoom_out"])
def test_image_info_is_the_scale_and_offset_of_the_boxes(name):
    rng = np.random.default_rng(8)
    for index in range(4):
        _, ex = run(CHAINS[name], index=index)
        info = T.image_info(ex)
        assert info.shape == (4, 2) and info.dtype == np.float32
        np.testing.assert_array_equal(info[0], [H, W])
        np.testing.assert_allclose(info[1], info[0] * info[2], rtol=1e-6)
        boxes = random_boxes(rng, 6)
        s, off = info[2][::-1], info[3][::-1]  # (x, y)
        want = boxes * np.tile(s, 2) - np.tile(off, 2)
        oh, ow = ex["out_shape"][:2]
        want = np.clip(want, 0, [ow, oh, ow, oh])
        keep = (want[:, 2] > want[:, 0]) & (want[:, 3] > want[:, 1])
        got = T.transform_boxes(ex, boxes, max_boxes=6)
        np.testing.assert_allclose(got["boxes"][:got["num_boxes"]], want[keep], rtol=1e-5, atol=1e-3)


def test_image_info_of_resize_shortest_edge_and_pad():
    img = np.zeros((480, 640, 3), np.uint8)
    _, ex = run([O.ResizeShortestEdge(800, max_size=1333), O.Pad(size=(1344, 1344))], img=img)
    np.testing.assert_allclose(T.image_info(ex), [[480, 640], [800, 1067], [800 / 480, 1067 / 640], [0, 0]],
                               rtol=1e-6)


def test_image_info_refuses_affine():
    _, ex = run([O.Rotate(10)])
    with pytest.raises(errors.FastqError, match="no scale \\+ offset"):
        T.image_info(ex)


def test_targets_are_deterministic_functions_of_the_explain_record():
    boxes = random_boxes(np.random.default_rng(9), 10)
    m = label_map()
    _, ex1 = run(CHAINS["chain"], index=5)
    _, ex2 = run(CHAINS["chain"], index=5)
    a, b = T.transform_boxes(ex1, boxes, max_boxes=10), T.transform_boxes(ex2, boxes, max_boxes=10)
    np.testing.assert_array_equal(a["boxes"], b["boxes"])
    np.testing.assert_array_equal(T.transform_mask(ex1, m), T.transform_mask(ex2, m))


# ---- pipeline: sources with targets= ---------------------------------------------------------

def _det_source(kind="arrays", n=10, bad=None):
    import cv2
    from fastq.sources import Arrays, Bytes

    rng = np.random.default_rng(10)
    imgs = [rng.integers(0, 255, (60 + 3 * i, 90 - 2 * i, 3), dtype=np.uint8) for i in range(n)]
    boxes = [random_boxes(rng, i % 4, *im.shape[:2]) for i, im in enumerate(imgs)]
    if bad is not None:
        boxes[bad] = np.array([[np.nan, 0, 5, 5]], np.float32)
    tg = T.Targets(boxes, [np.arange(len(b)) + 1 for b in boxes], max_boxes=5, min_area=2.0)
    if kind == "bytes":
        return Bytes([cv2.imencode(".png", im)[1].tobytes() for im in imgs], labels=list(range(n)), targets=tg), boxes
    return Arrays(imgs, labels=list(range(n)), targets=tg), boxes


DET_OPS = [O.ResizeShortestEdge([48, 64], max_size=96), O.HorizontalFlip(), O.RandomAffine(0, translate=(0.1, 0.1)),
           O.Pad(size=(96, 96))]


@pytest.mark.parametrize("kind", ["arrays", "bytes"])
def test_pipeline_outputs_follow_the_explain_record_for_1_and_2_workers(kind):
    import fastq

    src, boxes = _det_source(kind)
    outs = []
    for workers in (1, 2):
        p = fastq.Pipeline(src, batch_size=4, ops=DET_OPS[:2] + DET_OPS[3:], dtype="uint8", seed=3, shuffle=True,
                           workers=workers, return_index=True)
        assert [s for s, _ in p.output_spec] == [(96, 96, 3), (), (5, 4), (5,), (), (4, 2), ()]
        outs.append([[np.array(x) for x in b] for b in p])
        for b in outs[-1]:
            for row, idx in enumerate(b[6]):
                ex = p.explain(0, int(idx))
                want = T.transform_boxes(ex, boxes[idx], np.arange(len(boxes[idx])) + 1, max_boxes=5, min_area=2.0)
                np.testing.assert_array_equal(b[2][row], want["boxes"])
                np.testing.assert_array_equal(b[3][row], want["classes"])
                assert b[4][row] == want["num_boxes"] and b[1][row] == idx
                np.testing.assert_array_equal(b[5][row], T.image_info(ex))
    for a, b in zip(*outs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_pipeline_refuses_policies_with_targets():
    import fastq

    src, _ = _det_source()
    with pytest.raises(errors.FastqError, match="has no target rule"):
        fastq.Pipeline(src, batch_size=2, ops=[O.CenterCrop(48), O.RandAugment()], dtype="uint8")


def test_pipeline_image_info_refused_for_affine_but_boxes_fine():
    import fastq
    from fastq.sources import Arrays

    src, boxes = _det_source()
    p = fastq.Pipeline(src, batch_size=2, ops=DET_OPS, dtype="uint8")
    with pytest.raises(errors.FastqError, match="image_info"):
        next(iter(p))
    src2 = Arrays(src._items, targets=T.Targets(boxes, max_boxes=5, image_info=False))
    p = fastq.Pipeline(src2, batch_size=2, ops=DET_OPS, dtype="uint8")
    assert len(next(iter(p))) == 4


def test_pipeline_bad_boxes_fail_their_sample():
    import fastq

    src, _ = _det_source(bad=2)
    p = fastq.Pipeline(src, batch_size=4, ops=[O.CenterCrop(48)], dtype="uint8")
    with pytest.raises(errors.FastqError, match="sample 2: targets: box 0: coordinates must be finite"):
        list(p)
    p = fastq.Pipeline(src, batch_size=4, ops=[O.CenterCrop(48)], dtype="uint8", on_error="skip")
    assert sum(len(b[0]) for b in p) == 8 and p.stats()["skipped"] == 1  # drop_remainder


def test_targets_of_another_length_are_refused():
    from fastq.sources import Arrays

    with pytest.raises(ValueError, match="2 samples of targets for 3 images"):
        Arrays(np.zeros((3, 8, 8, 3), np.uint8), targets=T.Targets([np.zeros((0, 4))] * 2))


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_pipeline_keypoints_and_masks_follow_their_boxes(layout):
    import fastq
    from fastq.sources import Arrays

    rng = np.random.default_rng(11)
    n = 8
    imgs = [rng.integers(0, 255, (70 + 2 * i, 90 - 3 * i, 3), dtype=np.uint8) for i in range(n)]
    boxes = [random_boxes(rng, i % 4, *im.shape[:2]) for i, im in enumerate(imgs)]
    kps = [np.concatenate([rng.uniform(0, im.shape[1], (len(b), 4, 1)), rng.uniform(0, im.shape[0], (len(b), 4, 1)),
                           np.full((len(b), 4, 1), 2.0)], 2).astype(np.float32) for b, im in zip(boxes, imgs)]
    masks = [label_map(*im.shape[:2], dtype=np.uint16) for im in imgs]
    flip = [1, 0, 2, 3]
    tg = T.Targets(boxes, [np.arange(len(b)) for b in boxes], max_boxes=3, min_visibility=0.2, image_info=False,
                   keypoints=kps, flip_index=flip, masks=masks, mask_fill=65535)
    ops = [O.HorizontalFlip(), O.RandomResizedCrop((48, 56), scale=(0.3, 1)), O.Rotate((-20, 20), fill=7)]
    p = fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=4, ops=ops, dtype="uint8", seed=2, workers=2,
                       return_index=True, layout=layout)
    assert [s for s, _ in p.output_spec][1:] == [(3, 4), (3,), (), (3, 4, 3), (48, 56), ()]
    seen = 0
    for b in p:
        for row, idx in enumerate(b[6]):
            ex = p.explain(0, int(idx))
            want = T.transform_boxes(ex, boxes[idx], max_boxes=3, min_visibility=0.2)
            np.testing.assert_array_equal(b[1][row], want["boxes"])
            k = want["num_boxes"]
            wk = T.transform_keypoints(ex, kps[idx], flip_index=flip)
            np.testing.assert_array_equal(b[4][row][:k], wk[want["index"][:k]])
            assert (b[4][row][k:] == 0).all()
            np.testing.assert_array_equal(b[5][row], T.transform_mask(ex, masks[idx], fill=65535))
            seen += 1
    assert seen == n


def test_pipeline_mask_of_another_size_fails_its_sample():
    import fastq
    from fastq.sources import Arrays

    imgs = np.zeros((4, 20, 30, 3), np.uint8)
    masks = [np.zeros((20, 30), np.uint8)] * 3 + [np.zeros((30, 20), np.uint8)]
    src = Arrays(imgs, targets=T.Targets([np.zeros((0, 4))] * 4, masks=masks))
    p = fastq.Pipeline(src, batch_size=4, ops=[O.CenterCrop(16)], dtype="uint8")
    with pytest.raises(errors.FastqError, match="sample 3: targets: mask: a 20x30 mask for a 30x20 image"):
        list(p)


def test_dct_scaled_decode_keeps_source_coordinates():
    """A JPEG decoded at 1/4 scale by the DCT: the explain record (and so the targets) is
    in full-resolution source pixels."""
    import cv2

    img = cv2.resize((np.arange(50 * 75 * 3) % 251).astype(np.uint8).reshape(50, 75, 3), (600, 400))
    data = cv2.imencode(".jpg", img)[1].tobytes()
    spec = _image.ImageSpec(O.compile_ops([O.RandomResizedCrop((40, 40), scale=(0.8, 1.0))], dtype="uint8"))
    _, ex = spec.process_encoded(data, 1, 0, 0)
    assert ex["decode_scale"][0] < 8 and ex["ops"][0]["in_shape"] == (400, 600)
    x, y, w, h = ex["ops"][0]["box"]
    r = T.transform_boxes(ex, [[x, y, x + w, y + h], [x + w / 2, y, x + w, y + h / 4]], max_boxes=2)
    np.testing.assert_allclose(r["boxes"], [[0, 0, 40, 40], [20, 0, 40, 10]], atol=1e-4)


@pytest.mark.parametrize("kind", ["arrays", "bytes"])
def test_normalized_boxes_equal_the_same_boxes_in_pixels(kind):
    """Targets(normalized=True): fractions of the source image, multiplied by its decoded
    size in the worker (float64, rounded to float32, numpy here) before the rules: the
    outputs equal Targets given those pixels; 1 and 2 workers agree; RandomIoUCrop draws
    from the same (scaled) boxes."""
    import cv2
    import fastq
    from fastq.sources import Arrays, Bytes

    rng = np.random.default_rng(12)
    imgs = [rng.integers(0, 255, (50 + 4 * i, 80 - 3 * i, 3), dtype=np.uint8) for i in range(8)]
    px = [random_boxes(rng, 1 + i % 3, *im.shape[:2]) for i, im in enumerate(imgs)]
    frac = [(b / np.array([w, h, w, h], np.float64)).astype(np.float32)
            for b, (h, w) in zip(px, (im.shape[:2] for im in imgs))]
    scaled = [(f.astype(np.float64) * np.array([w, h, w, h])).astype(np.float32)
              for f, (h, w) in zip(frac, (im.shape[:2] for im in imgs))]
    cls = [np.arange(len(b)) + 1 for b in px]

    def src(boxes, **kw):
        tg = T.Targets(boxes, cls, max_boxes=4, **kw)
        if kind == "bytes":
            return Bytes([cv2.imencode(".png", im)[1].tobytes() for im in imgs], targets=tg)
        return Arrays(imgs, targets=tg)

    for ops in (DET_OPS[:2] + DET_OPS[3:], [O.RandomIoUCrop(), O.Resize((40, 40)), O.HorizontalFlip()]):
        runs = []
        for boxes, kw, workers in ((frac, {"normalized": True}, 1), (frac, {"normalized": True}, 2),
                                   (scaled, {}, 2)):
            with fastq.Pipeline(src(boxes, **kw), batch_size=4, ops=ops, dtype="uint8", seed=4,
                                workers=workers) as p:
                runs.append([[np.array(x) for x in b] for b in p])
        for other in runs[1:]:
            for a, b in zip(runs[0], other):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y)
        assert sum(int(b[3].sum()) for b in runs[0]) > 0  # some boxes survive
    with pytest.raises(ValueError, match="normalized=True applies to boxes only"):
        T.Targets(frac, cls, normalized=True, keypoints=[np.zeros((len(b), 2, 3), np.float32) for b in frac])
