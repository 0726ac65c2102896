"""Masks, label maps and bitmap instances sit on their image's pixels (issue 29).

A resized mask pixel takes the label of the source pixel under its centre
(``mask_sampling="center"``, the default), as the image's own resampling and
``tf.image.resize(method="nearest")`` do; OpenCV's ``INTER_NEAREST`` (``floor(x * in /
out)``, torch's legacy ``nearest``) stays reachable as ``mask_sampling="legacy"``.

Two independent checks:

* the image's own pixels: lossless scenes with a red, a green and a blue rectangle, each
  also a region of the label map (1, 2, 3), go through every op with a mask rule, at down-
  and up-scaling factors (as ``ImageSpec.process_array`` and through a ``pad="batch"``
  pipeline).  Where the image shows object k is read from the image alone: its channel
  k, whose intensity is the object's share of each pixel (the background and fill are
  black, objects never touch).  The mask's region of label k must have the same centroid
  (mean offset over all objects < 0.05 px on each axis) and every interior pixel of the
  image's regions (object or background, 1 px from an edge) must carry its label;
* TensorFlow: plain resizes (Resize, ResizeShortestEdge; RandomResizedCrop's box and
  ScaleJitter's scaled size too) equal ``tf.image.resize(method="nearest")`` bit for bit,
  and so does the numpy transcription of its arithmetic (tests/helpers/mask_ref.py) that
  the tests without TensorFlow use.

The sizes of the centroid check avoid exact ties: where a source pixel edge falls exactly
on an output pixel centre (e.g. x2.5 or x0.5), the centre rule takes the pixel right of /
below the edge, as TensorFlow does, and at such factors the mask sits up to a quarter
pixel up-left of the image on average (test_exact_ties_go_right_and_down_as_in_tf).
"""
import cv2
import numpy as np
import pytest

import fastq
import fastq.ops as O
from fastq._native import _image
from fastq import targets as T
from fastq.sources import Arrays
from helpers.mask_ref import centre_index, nearest_centre

H, W = 120, 160
K3 = np.ones((3, 3), np.uint8)


def scene(seed, h=H, w=W):
    """(h x w x 3 uint8 image, h x w uint8 label map): object k (label k + 1) is a
    rectangle of pure colour channel k in the k-th third of the width, 7 px or more from
    its third's edges."""
    rng = np.random.default_rng(seed)
    img, lab = np.zeros((h, w, 3), np.uint8), np.zeros((h, w), np.uint8)
    third = w // 3
    for k in range(3):
        oh, ow = int(rng.integers(14, h - 28)), int(rng.integers(14, third - 14))
        y0, x0 = int(rng.integers(7, h - 7 - oh + 1)), k * third + int(rng.integers(7, third - 7 - ow + 1))
        img[y0:y0 + oh, x0:x0 + ow, k] = 255
        lab[y0:y0 + oh, x0:x0 + ow] = k + 1
    return img, lab


def object_boxes(lab):
    out = []
    for k in (1, 2, 3):
        ys, xs = np.nonzero(lab == k)
        out.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return np.float32(out)


def compare(img, mask, fill=0):
    """(centroid offsets (dx, dy) mask - image per object, interior pixels mislabelled,
    interior pixels checked) of one output image and its mask."""
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    offsets, bad, checked = [], 0, 0
    for k in range(3):
        share = img[..., k].astype(np.float64) / 255  # object k's share of each pixel
        mine = mask == k + 1
        if share.sum() >= 4 and mine.any():
            ym, xm = np.nonzero(mine)
            offsets.append((xm.mean() - (xx * share).sum() / share.sum(),
                            ym.mean() - (yy * share).sum() / share.sum()))
        inside = cv2.erode((img[..., k] > 127).astype(np.uint8), K3, borderType=cv2.BORDER_CONSTANT,
                           borderValue=0).astype(bool)
        bad += int((mask[inside] != k + 1).sum())
        checked += int(inside.sum())
    background = cv2.erode((img.max(-1) <= 127).astype(np.uint8), K3, borderType=cv2.BORDER_REPLICATE).astype(bool)
    bad += int((~np.isin(mask[background], (0, fill))).sum())
    checked += int(background.sum())
    return offsets, bad, checked


def process(ops, img, index, lab=None):
    spec = _image.ImageSpec(O.compile_ops(ops, dtype="uint8", input_size=img.shape[:2]))
    if any(isinstance(o, O.RandomIoUCrop) for o in ops):
        return spec.process_array(img, 3, 0, index, boxes=object_boxes(lab))
    return spec.process_array(img, 3, 0, index)


# Every op with a mask rule, down- and up-scaling where it resizes.  Sizes with few exact
# ties (see the module's docstring).
CHAINS = {
    "resize_down": [O.Resize((53, 71))],
    "resize_up": [O.Resize((257, 331))],
    "rse_down": [O.ResizeShortestEdge([43, 47], max_size=100), O.Pad(size=(64, 100))],
    "rse_up": [O.ResizeShortestEdge([287, 311], max_size=500), O.Pad(size=(320, 420))],
    "rrc_down": [O.RandomResizedCrop((37, 45), scale=(0.5, 1.0))],
    "rrc_up": [O.RandomResizedCrop((157, 203), scale=(0.2, 0.5))],
    "scale_jitter_down": [O.ScaleJitter((64, 80), scale=(0.3, 0.6))],
    "scale_jitter_up": [O.ScaleJitter((200, 260), scale=(1.5, 2.5))],
    "zoom_out_resize": [O.RandomZoomOut(side_range=(1.2, 2.0), p=1.0), O.Resize((91, 119))],
    "iou_crop_resize_flip": [O.RandomIoUCrop(), O.Resize((97, 131)), O.HorizontalFlip()],
    "affine_down": [O.RandomAffine(20, translate=(0.1, 0.1), scale=(0.5, 0.7))],
    "affine_up": [O.RandomAffine(20, scale=(1.4, 1.8), shear=5)],
    "primitives": [O.Rotate((-30, 30)), O.ShearX((-0.2, 0.2)), O.ShearY((-0.2, 0.2)), O.TranslateX((-15, 15)),
                   O.TranslateY((-15, 15))],
    "crops_pads_flips": [O.RandomCrop((100, 140), padding=(6, 4, 8, 5)), O.HorizontalFlip(), O.VerticalFlip(),
                         O.CenterCrop((110, 150)), O.Pad(size=(128, 160))],
}
RESIZING = [n for n in CHAINS if not n.startswith(("affine", "primitives", "crops"))]
SCENES = 96


def measure(name, sampling):
    offsets, bad, checked = [], 0, 0
    for i in range(SCENES):
        img, lab = scene(i)
        out, ex = process(CHAINS[name], img, i, lab)
        o, b, c = compare(out, T.transform_mask(ex, lab, sampling=sampling))
        offsets += o
        bad, checked = bad + b, checked + c
    return np.array(offsets), bad, checked


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_mask_sits_on_the_image_pixels(name):
    offsets, bad, checked = measure(name, "center")
    assert len(offsets) >= SCENES * 3 // 2 and checked > 10000, (len(offsets), checked)
    mean = offsets.mean(0)
    assert np.abs(mean).max() < 0.05, f"{name}: mean centroid offset (x, y) {mean}"
    assert bad == 0, f"{name}: {bad} of {checked} interior pixels mislabelled"
    # a single object is off by at most its edges' rounding (1.6: an affine object cut by the border)
    assert np.abs(offsets).max() <= 0.5 + 1e-9 or name.startswith("affine"), np.abs(offsets).max(0)


@pytest.mark.parametrize("name", RESIZING)
def test_the_check_sees_legacy_sampling_half_a_pixel_off(name):
    """OpenCV's INTER_NEAREST (mask_sampling="legacy") puts every resized label about half
    an output pixel down and right of its image (a horizontal flip averages x out): the
    check above fails it."""
    offsets, _, _ = measure(name, "legacy")
    assert np.abs(offsets.mean(0)).max() > 0.25, offsets.mean(0)


def test_exact_ties_go_right_and_down_as_in_tf():
    """x2.5: the edge of source pixel 1 maps to output 2.5, the centre of output pixel 2,
    which takes source pixel 1 (right of the edge), as TensorFlow's floor((x + 0.5) *
    scale) does; OpenCV's INTER_NEAREST takes source pixel 0 there."""
    assert list(centre_index(4, 10)) == [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    m = np.arange(4, dtype=np.uint8)[None].repeat(2, 0)
    _, ex = process([O.Resize((5, 10))], np.zeros((2, 4, 3), np.uint8), 0)
    assert list(T.transform_mask(ex, m)[0]) == [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    assert list(T.transform_mask(ex, m, sampling="legacy")[0]) == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]


# ---- plain resizes: TensorFlow's half-pixel-centre nearest, bit for bit ---------------------

SIZE_PAIRS = [((96, 128), (50, 70)), ((37, 53), (111, 160)), ((480, 640), (333, 517)), ((101, 99), (100, 98)),
              ((120, 160), (300, 400)), ((120, 160), (60, 80)), ((64, 48), (256, 13)), ((7, 5), (1, 1))]


def label_map(h, w, dtype, seed=0):
    return np.random.default_rng(seed).integers(0, np.iinfo(dtype).max, (h, w), dtype=dtype, endpoint=True)


def resized(mask, chain, index=0):
    _, ex = process(chain, np.zeros(mask.shape + (3,), np.uint8), index)
    return T.transform_mask(ex, mask, fill=7), ex


def window(scaled, ex, fill):
    """ScaleJitter's window of its scaled image (TF Model Garden's resize_and_crop_masks:
    crop at the offset, pad to the output size with fill)."""
    x, y = ex["box"][:2]
    oh, ow = ex["out_shape"]
    out = np.full((oh, ow), fill, scaled.dtype)
    part = scaled[y:y + oh, x:x + ow]
    out[:part.shape[0], :part.shape[1]] = part
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_resizes_equal_the_numpy_centre_reference(dtype):
    for (h, w), (oh, ow) in SIZE_PAIRS:
        m = label_map(h, w, dtype)
        got, _ = resized(m, [O.Resize((oh, ow))])
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, nearest_centre(m, oh, ow), err_msg=f"{(h, w)} -> {(oh, ow)}")
    m = label_map(H, W, dtype, 1)
    for i in range(6):
        got, ex = resized(m, [O.RandomResizedCrop((57, 73), scale=(0.05, 1.0))], i)
        x, y, bw, bh = ex["ops"][0]["box"]
        np.testing.assert_array_equal(got, nearest_centre(m[y:y + bh, x:x + bw], 57, 73))
        got, ex = resized(m, [O.ScaleJitter((90, 110), scale=(0.3, 2.0))], i)
        r = ex["ops"][0]
        np.testing.assert_array_equal(got, window(nearest_centre(m, r["box"][3], r["box"][2]), r, 7))
        got, ex = resized(m, [O.ResizeShortestEdge([40, 77, 230], max_size=400), O.Pad(size=(400, 400))], i)
        oh, ow = ex["ops"][0]["out_shape"]
        np.testing.assert_array_equal(got[:oh, :ow], nearest_centre(m, oh, ow))


@pytest.mark.tf
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_resizes_equal_tf_image_resize_nearest(dtype):
    """TensorFlow is the reference: its nearest resize (half-pixel centres, float32), bit
    for bit, for Resize, ResizeShortestEdge, RandomResizedCrop's box and ScaleJitter's
    scaled size; and the numpy transcription the other tests use equals it."""
    import tensorflow as tf

    def tf_nearest(a, oh, ow):
        return tf.image.resize(a[None, :, :, None], (oh, ow), method="nearest").numpy()[0, :, :, 0]

    for (h, w), (oh, ow) in SIZE_PAIRS:
        m = label_map(h, w, dtype)
        want = tf_nearest(m, oh, ow)
        assert want.dtype == dtype
        np.testing.assert_array_equal(nearest_centre(m, oh, ow), want)
        np.testing.assert_array_equal(resized(m, [O.Resize((oh, ow))])[0], want, err_msg=f"{(h, w)} -> {(oh, ow)}")
    m = label_map(H, W, dtype, 1)
    for i in range(6):
        got, ex = resized(m, [O.RandomResizedCrop((57, 73), scale=(0.05, 1.0))], i)
        x, y, bw, bh = ex["ops"][0]["box"]
        np.testing.assert_array_equal(got, tf_nearest(m[y:y + bh, x:x + bw], 57, 73))
        got, ex = resized(m, [O.ScaleJitter((90, 110), scale=(0.3, 2.0))], i)
        r = ex["ops"][0]
        np.testing.assert_array_equal(got, window(tf_nearest(m, r["box"][3], r["box"][2]), r, 7))
        got, ex = resized(m, [O.ResizeShortestEdge([40, 77, 230], max_size=400), O.Pad(size=(400, 400))], i)
        oh, ow = ex["ops"][0]["out_shape"]
        np.testing.assert_array_equal(got[:oh, :ow], tf_nearest(m, oh, ow))


# ---- in a pipeline: pad="batch", the targets' mask_sampling, bitmap instances -------------

def scenes_of_many_sizes(n):
    rng = np.random.default_rng(9)
    return [scene(100 + i, int(rng.integers(90, 150)), int(rng.integers(120, 200))) for i in range(n)]


@pytest.mark.parametrize("chain", ["rse_flip", "iou_crop_resize_flip", "scale_jitter_flips"])
def test_pipeline_masks_sit_on_the_image_pixels_with_batch_padding(chain):
    """The issue's chains, through Pipeline(pad="batch") with Targets(masks=...):
    the same centroid and interior checks on each row's valid region, mask_fill in the
    padding; the rows equal transform_mask of their explain records (which end in the
    padding to the capacity), cropped to the batch."""
    data = scenes_of_many_sizes(24)
    ops = {"rse_flip": [O.ResizeShortestEdge([71, 97, 113], max_size=190), O.HorizontalFlip()],
           "iou_crop_resize_flip": [O.RandomIoUCrop(), O.Resize((97, 131)), O.HorizontalFlip()],
           "scale_jitter_flips": [O.ScaleJitter((96, 128), scale=(0.3, 1.7)), O.HorizontalFlip(), O.VerticalFlip()],
           }[chain]
    labs = [lab for _, lab in data]
    tg = T.Targets([object_boxes(lab) for lab in labs], [[1, 2, 3]] * len(data), max_boxes=3, masks=labs,
                   mask_fill=255, image_info=False)
    offsets, bad, checked = [], 0, 0
    with fastq.Pipeline(Arrays([img for img, _ in data], targets=tg), batch_size=8, ops=ops, dtype="uint8",
                        seed=5, pad="batch", pad_multiple=32, return_index=True, shuffle=False) as p:
        assert p.output_names[-3:] == ["masks", "index", "image_sizes"], p.output_names
        for images, *_, masks, index, sizes in p:
            for r, i in enumerate(index.tolist()):
                h, w = sizes[r]
                assert (masks[r, h:] == 255).all() and (masks[r, :, w:] == 255).all()
                ex = p.explain(0, i)
                hb, wb = masks.shape[1:]  # the explain record ends at the capacity
                np.testing.assert_array_equal(masks[r], T.transform_mask(ex, labs[i], fill=255)[:hb, :wb])
                o, b, c = compare(images[r, :h, :w], masks[r, :h, :w], fill=255)
                offsets += o
                bad, checked = bad + b, checked + c
    assert len(offsets) >= 36, len(offsets)
    mean = np.array(offsets).mean(0)
    assert np.abs(mean).max() < 0.05, f"mean centroid offset (x, y) {mean}"
    assert bad == 0, f"{bad} of {checked} interior pixels mislabelled"


def test_targets_mask_sampling_reaches_label_maps_and_bitmap_instances():
    """Targets(mask_sampling=...) applies to the label map and to bitmap (RLE) instances;
    "legacy" gives OpenCV's INTER_NEAREST in the worker, as transform_mask(sampling=
    "legacy") does; 1 and 2 workers give the same bits."""
    data = scenes_of_many_sizes(8)
    labs = [lab for _, lab in data]
    ops = [O.RandomResizedCrop((61, 83), scale=(0.3, 1.0)), O.HorizontalFlip()]
    out = {}
    for sampling in ("center", "legacy"):
        for workers in (1, 2):
            tg = T.Targets([object_boxes(lab) for lab in labs], [[1, 2, 3]] * len(data), max_boxes=3, masks=labs,
                           instance_masks=[np.stack([lab == k for k in (1, 2, 3)]).astype(np.uint8) for lab in labs],
                           image_info=False, mask_sampling=sampling)
            with fastq.Pipeline(Arrays([img for img, _ in data], targets=tg), batch_size=8, ops=ops, dtype="uint8",
                                seed=2, workers=workers, shuffle=False) as p:
                images, boxes, classes, num, masks, inst = next(iter(p))
                out[sampling, workers] = (masks.copy(), inst.copy())
                for i in range(8):
                    ex = p.explain(0, i)
                    want = T.transform_mask(ex, labs[i], sampling=sampling)
                    np.testing.assert_array_equal(masks[i], want)
                    kept = {int(c) for c in classes[i][:num[i]]}
                    for row, k in enumerate(sorted(kept)):
                        np.testing.assert_array_equal(inst[i][row], (want == k).astype(np.uint8))
                    if sampling == "legacy":
                        x, y, bw, bh = ex["ops"][0]["box"]
                        ref = cv2.resize(labs[i][y:y + bh, x:x + bw], (83, 61), interpolation=cv2.INTER_NEAREST)
                        np.testing.assert_array_equal(masks[i], ref[:, ::-1] if ex["ops"][1]["applied"] else ref)
                del images, boxes, classes, num, masks, inst
        for a, b in zip(out[sampling, 1], out[sampling, 2]):
            np.testing.assert_array_equal(a, b)
    assert (out["center", 1][0] != out["legacy", 1][0]).any()
