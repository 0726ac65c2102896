"""RandomIoUCrop (csrc/image/geometry/fq_image_iou_crop.cpp): torchvision v2's SSD crop, drawn from
the sample's boxes.

Independent references:
  * the draw: torchvision 0.29's own ``RandomIoUCrop.make_params``, run on the boxes as they
    enter the op with ``torch.rand`` / ``torch.randint`` replaced by fastq's per-sample stream
    (tests/image/test_golden.py's RefRng: ``randint`` -> fq_rng_next_below, ``rand`` -> float32 of
    the top 24 bits of one 64-bit draw): fastq's crop (or no crop) must be the one torchvision
    returns, for every sample;
  * the image: torchvision's ``F.crop`` of the source at the crop fastq drew (the chain pads
    the crop with Pad(size) so the output holds it bit-exactly);
  * the boxes: torchvision's ``RandomIoUCrop.transform`` with those parameters (clamped crop,
    boxes whose centre is outside zeroed); the SSD chain RandomZoomOut -> RandomIoUCrop ->
    Resize -> HorizontalFlip against torchvision's kernels F.pad / crop / resize /
    horizontal_flip on BoundingBoxes;
  * the IoU condition recomputed in float64 with numpy; the option frequencies against the
    uniform choice (chi-square); torchvision with its own generator on zero boxes.
"""
import math
from unittest import mock

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2 as T2
from torchvision.transforms.v2 import functional as F

import fastq
import fastq.ops as O
from fastq._native import _image
from fastq import targets as T
from fastq.sources import Arrays
from helpers.golden_ref import RefRng
from helpers.determinism import rows_by_index  # noqa: I100

N = 24


class StreamTorch:
    """torch.rand / torch.randint as fastq's RandomIoUCrop draws them from its stream."""

    def __init__(self, rng):
        self.r = rng

    def rand(self, *size, **kw):
        n = size[0][0] if isinstance(size[0], (tuple, list)) else size[0]
        return torch.tensor([(self.r.u64() >> 40) / 16777216.0 for _ in range(n)], dtype=torch.float32)

    def randint(self, low=0, high=None, size=None, **kw):
        return torch.tensor([low + self.r.below(high - low)])


def tv_make_params(op, boxes, h, w, rng):
    """torchvision's RandomIoUCrop.make_params for an h x w image with these boxes (float32
    xyxy), drawing from rng."""
    t = T2.RandomIoUCrop(op.min_scale, op.max_scale, op.min_aspect_ratio, op.max_aspect_ratio,
                         list(op.sampler_options), op.trials)
    flat = [tv_tensors.Image(torch.zeros(3, h, w, dtype=torch.uint8)),
            tv_tensors.BoundingBoxes(torch.as_tensor(np.asarray(boxes, np.float32).reshape(-1, 4)), format="XYXY",
                                     canvas_size=(h, w))]
    s = StreamTorch(rng)
    with mock.patch.object(torch, "rand", s.rand), mock.patch.object(torch, "randint", s.randint):
        return t, t.make_params(flat)


def random_boxes(rng, n, h, w):
    x0, y0 = rng.uniform(0, w - 4, n), rng.uniform(0, h - 4, n)
    return np.stack([x0, y0, x0 + rng.uniform(2, w - x0), y0 + rng.uniform(2, h - y0)], 1).astype(np.float32)


def _data(n=N, seed=0, hmax=120):
    rng = np.random.default_rng(seed)
    imgs = [rng.integers(0, 255, (int(rng.integers(40, hmax)), int(rng.integers(40, hmax)), 3), dtype=np.uint8)
            for _ in range(n)]
    boxes = [random_boxes(rng, 0 if i == 5 else int(rng.integers(1, 6)), *im.shape[:2]) for i, im in enumerate(imgs)]
    return imgs, boxes


_rows = rows_by_index


def _pipe(imgs, boxes, ops, workers=2, **kw):
    tg = T.Targets(boxes, [np.arange(len(b)) + 1 for b in boxes], max_boxes=8, image_info=False, **kw)
    return fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=4, ops=ops, dtype="uint8", seed=11, shuffle=True,
                          return_index=True, drop_remainder=False, workers=workers)


def _iou_record(ex, k=0):
    r = ex["ops"][k]
    assert r["op"] == "RandomIoUCrop"
    return r


@pytest.mark.parametrize("kw", [{}, dict(min_scale=0.5, max_aspect_ratio=1.5, sampler_options=(0.2, 0.6, 2.0),
                                         trials=5)])
def test_draw_image_and_boxes_are_torchvisions(kw):
    """Every sample: fastq's crop == torchvision make_params on fastq's stream; the output
    image holds F.crop of the source; the boxes are torchvision's transform of them."""
    imgs, boxes = _data(hmax=120)
    op = O.RandomIoUCrop(**kw)
    pipe = _pipe(imgs, boxes, [op, O.Pad(size=(120, 120))])
    rows = _rows(pipe)
    assert len(rows) == N
    crops = 0
    for idx, r in rows.items():
        ex = pipe.explain(0, idx)
        rec = _iou_record(ex)
        h, w = imgs[idx].shape[:2]
        t, params = tv_make_params(op, boxes[idx], h, w, RefRng(11, 0, idx)) if len(boxes[idx]) else (None, {})
        if not params:
            assert not rec["applied"] and rec["box"] == (0, 0, w, h)
            x, y, cw, ch = 0, 0, w, h
        else:
            crops += 1
            assert rec["applied"]
            x, y, cw, ch = rec["box"]
            assert (params["left"], params["top"], params["width"], params["height"]) == (x, y, cw, ch)
            assert rec["magnitude"] < 1
        # image: F.crop of the source, then Pad's zeros
        want = F.crop(torch.from_numpy(imgs[idx]).permute(2, 0, 1), y, x, ch, cw).permute(1, 2, 0).numpy()
        np.testing.assert_array_equal(r[0][:ch, :cw], want)
        assert not r[0][ch:].any() and not r[0][:, cw:].any()
        # boxes: torchvision's transform (centre outside -> zeroed), fastq keeps the others in order
        got_n = int(r[3])
        if params:
            bb = tv_tensors.BoundingBoxes(torch.as_tensor(boxes[idx]), format="XYXY", canvas_size=(h, w))
            tv = t.transform(bb, params).numpy()
            keep = [i for i in range(len(tv)) if tv[i, 2] > tv[i, 0] and tv[i, 3] > tv[i, 1]]
        else:
            tv, keep = np.clip(boxes[idx], 0, [w, h, w, h]), list(range(len(boxes[idx])))
        assert got_n == len(keep), (idx, got_n, keep)
        np.testing.assert_allclose(r[1][:got_n], tv[keep].reshape(-1, 4), atol=1e-4)
        np.testing.assert_array_equal(r[2][:got_n], np.asarray(keep) + 1)
    assert crops >= N // 3  # the comparison is mostly of crops, not of "no crop"


def test_iou_condition_holds_for_every_crop():
    """The crop's IoU (float64, numpy) with some box whose centre is inside it is >= the
    option recorded; rounds / trials / iou are recorded."""
    imgs, boxes = _data(n=64, seed=3, hmax=160)
    spec = _image.ImageSpec(O.compile_ops([O.RandomIoUCrop(), O.Resize((64, 64))], dtype="uint8"))
    crops = 0
    for i, (im, b) in enumerate(zip(imgs, boxes)):
        for epoch in range(3):
            _, ex = spec.process_array(im, 5, epoch, i, boxes=b)
            rec = _iou_record(ex)
            if not rec["applied"]:
                assert rec["magnitude"] >= 1 or len(b) == 0
                continue
            crops += 1
            x, y, w, h = rec["box"]
            c = 0.5 * (b[:, :2] + b[:, 2:])
            inside = (c[:, 0] > x) & (c[:, 0] < x + w) & (c[:, 1] > y) & (c[:, 1] < y + h)
            assert inside.any()
            bi = b[inside].astype(np.float64)
            iw = np.clip(np.minimum(bi[:, 2], x + w) - np.maximum(bi[:, 0], x), 0, None)
            ih = np.clip(np.minimum(bi[:, 3], y + h) - np.maximum(bi[:, 1], y), 0, None)
            inter = iw * ih
            iou = inter / ((bi[:, 2] - bi[:, 0]) * (bi[:, 3] - bi[:, 1]) + w * h - inter)
            assert iou.max() >= rec["magnitude"] - 1e-6
            assert abs(iou.max() - rec["iou"]) < 1e-5
            assert rec["rounds"] >= 1 and rec["trials"] >= 1
            assert 0.3 * im.shape[1] - 1 <= w <= im.shape[1] and 0.3 * im.shape[0] - 1 <= h <= im.shape[0]
            assert 0.5 <= w / h <= 2.0
    assert crops > 100


def test_option_frequencies_are_uniform():
    """A box covering the image and min_scale 0.6 on a square image: every crop contains the
    centre and has IoU >= 0.36, so the first option drawn ends the draw and the recorded
    option is the uniform choice (chi-square, 4 dof, p = 0.001 bound 18.47)."""
    opts = (0.0, 0.1, 0.2, 0.3, 1.0)
    spec = _image.ImageSpec(O.compile_ops([O.RandomIoUCrop(min_scale=0.6, sampler_options=opts),
                                           O.Resize((16, 16))], dtype="uint8"))
    img = np.zeros((50, 50, 3), np.uint8)
    box = np.array([[0, 0, 50, 50]], np.float32)
    counts = dict.fromkeys(opts, 0)
    n = 3000
    for i in range(n):
        _, ex = spec.process_array(img, 1, 0, i, boxes=box)
        rec = _iou_record(ex)
        assert rec["rounds"] == 1 and rec["applied"] == (rec["magnitude"] < 1)
        counts[rec["magnitude"]] += 1
    e = n / len(opts)
    chi2 = sum((c - e) ** 2 / e for c in counts.values())
    assert chi2 < 18.47, counts


def test_no_crop_rate_matches_torchvision_with_its_own_generator():
    """Default options on a fixed image + boxes: the fraction of samples left uncropped by
    fastq and by torchvision (torch's own generator) agree (two-proportion z < 4; 500 samples each)."""
    rng = np.random.default_rng(4)
    h, w = 90, 130
    b = random_boxes(rng, 3, h, w)
    op = O.RandomIoUCrop()
    spec = _image.ImageSpec(O.compile_ops([op, O.Resize((16, 16))], dtype="uint8"))
    img = np.zeros((h, w, 3), np.uint8)
    n = 500
    fq_none = sum(not _iou_record(spec.process_array(img, 2, 0, i, boxes=b)[1])["applied"] for i in range(n))
    torch.manual_seed(0)
    t = T2.RandomIoUCrop()
    flat = [tv_tensors.Image(torch.zeros(3, h, w, dtype=torch.uint8)),
            tv_tensors.BoundingBoxes(torch.as_tensor(b), format="XYXY", canvas_size=(h, w))]
    tv_none = sum(not t.make_params(flat) for _ in range(n))
    p1, p2 = fq_none / n, tv_none / n
    p = (fq_none + tv_none) / (2 * n)
    z = abs(p1 - p2) / math.sqrt(2 * p * (1 - p) / n)
    assert z < 4, (p1, p2)


def test_ssd_chain_against_torchvision_kernels():
    """RandomZoomOut -> RandomIoUCrop -> Resize((300, 300)) -> HorizontalFlip: the crop is
    torchvision's draw on the zoomed-out boxes (the stream after the zoom-out's draws), and
    the boxes are torchvision's pad / RandomIoUCrop.transform / resize / flip of them."""
    imgs, boxes = _data(n=16, seed=7)
    ops = [O.RandomZoomOut(fill=0, side_range=(1.0, 3.0), p=0.5), O.RandomIoUCrop(), O.Resize((300, 300)),
           O.HorizontalFlip()]
    pipe = _pipe(imgs, boxes, ops)
    rows = _rows(pipe)
    for idx, r in rows.items():
        ex = pipe.explain(0, idx)
        zo, rec, rs, fl = ex["ops"]
        rng = RefRng(11, 0, idx)
        rng.uniform()  # the zoom-out's draws: u < p, then r, left, top
        if zo["applied"]:
            rng.uniform(), rng.uniform(), rng.uniform()
        h0, w0 = imgs[idx].shape[:2]
        bb = tv_tensors.BoundingBoxes(torch.as_tensor(boxes[idx]).reshape(-1, 4), format="XYXY", canvas_size=(h0, w0))
        if zo["applied"]:
            bb = F.pad(bb, list(zo["pad"]))
        h, w = rec["in_shape"]
        assert tuple(bb.canvas_size) == (h, w)
        if len(boxes[idx]):
            t, params = tv_make_params(O.RandomIoUCrop(), bb, h, w, rng)
        else:
            params = {}
        if params:
            assert rec["applied"] and rec["box"] == (params["left"], params["top"], params["width"],
                                                     params["height"])
            bb = t.transform(bb, params)
        else:
            assert not rec["applied"]
        bb = F.resize(bb, [300, 300])
        if fl["applied"]:
            bb = F.horizontal_flip(bb)
        tv = bb.numpy().reshape(-1, 4)
        keep = [i for i in range(len(tv)) if tv[i, 2] > tv[i, 0] and tv[i, 3] > tv[i, 1]]
        n = int(r[3])
        assert n == len(keep), (idx, n, keep)
        np.testing.assert_allclose(r[1][:n], tv[keep], atol=2e-3)


def test_masks_follow_the_crop():
    imgs, boxes = _data(n=8, seed=9, hmax=100)
    masks = [np.random.default_rng(i).integers(0, 7, im.shape[:2], dtype=np.uint8) for i, im in enumerate(imgs)]
    pipe = _pipe(imgs, boxes, [O.RandomIoUCrop(), O.Pad(size=(100, 100))], masks=masks, mask_fill=255)
    for idx, r in _rows(pipe).items():
        x, y, w, h = _iou_record(pipe.explain(0, idx))["box"]
        m = r[4]
        np.testing.assert_array_equal(m[:h, :w], masks[idx][y:y + h, x:x + w])
        assert (m[h:] == 255).all() and (m[:, w:] == 255).all()


def test_one_vs_two_workers_bit_identical():
    imgs, boxes = _data(seed=1)
    ops = [O.RandomZoomOut(p=0.5), O.RandomIoUCrop(), O.Resize((48, 48)), O.HorizontalFlip()]
    a, b = _rows(_pipe(imgs, boxes, ops, workers=1)), _rows(_pipe(imgs, boxes, ops, workers=2))
    assert a.keys() == b.keys()
    for k in a:
        for x, y in zip(a[k], b[k]):
            np.testing.assert_array_equal(x, y)


def test_zero_boxes_leave_the_image_as_is_like_torchvision():
    """A sample without boxes: no crop and nothing drawn (the flip after it draws first);
    torchvision (its own generator, options with 1.0) returns its input unchanged."""
    img = np.random.default_rng(0).integers(0, 255, (40, 50, 3), dtype=np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.RandomIoUCrop(), O.Pad(size=(40, 50))], dtype="uint8"))
    out, ex = spec.process_array(img, 0, 0, 3, boxes=np.zeros((0, 4), np.float32))
    rec = _iou_record(ex)
    assert not rec["applied"] and rec["rounds"] == 0 and rec["box"] == (0, 0, 50, 40)
    np.testing.assert_array_equal(out, img)
    torch.manual_seed(0)
    t = T2.RandomIoUCrop()
    im = tv_tensors.Image(torch.from_numpy(img).permute(2, 0, 1))
    for _ in range(20):
        o, bb = t(im, tv_tensors.BoundingBoxes(torch.zeros(0, 4), format="XYXY", canvas_size=(40, 50)))
        assert torch.equal(o, im)


def test_refusals_are_clear():
    # no targets: at pipeline build time
    imgs, _ = _data(n=4)
    with pytest.raises(ValueError, match="RandomIoUCrop needs targets with boxes"):
        fastq.Pipeline(Arrays(imgs), batch_size=2, ops=[O.RandomIoUCrop(), O.Resize((32, 32))], dtype="uint8")
    # masks only (max_boxes=0): no boxes to draw from
    with pytest.raises(ValueError, match="RandomIoUCrop needs targets with boxes"):
        tg = T.Targets([np.zeros((0, 4))] * 4, max_boxes=0, masks=[np.zeros(im.shape[:2], np.uint8) for im in imgs])
        fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=2, ops=[O.RandomIoUCrop(), O.Resize((32, 32))],
                       dtype="uint8")
    # the single-sample API without boxes
    spec = _image.ImageSpec(O.compile_ops([O.RandomIoUCrop(), O.Resize((32, 32))], dtype="uint8"))
    with pytest.raises(fastq.errors.FastqError, match="RandomIoUCrop needs targets with boxes"):
        spec.process_array(imgs[0])
    # an op before it without a target rule (its boxes cannot reach it)
    with pytest.raises(ValueError, match=r"op 1 \(RandomIoUCrop\): op 0 \(TrivialAugmentWide\) before it has no "
                                         r"target rule"):
        O.compile_ops([O.TrivialAugmentWide(), O.RandomIoUCrop(), O.Resize((32, 32))], dtype="uint8")
    # inside a composition (its output size depends on the draw)
    with pytest.raises(ValueError, match="RandomIoUCrop"):
        O.compile_ops([O.RandomApply([O.RandomIoUCrop()], p=0.5), O.Resize((32, 32))], dtype="uint8")
    # variable size: a resize / pad must follow
    with pytest.raises(ValueError, match="fixed output size"):
        O.compile_ops([O.RandomIoUCrop()], dtype="uint8")
    for bad, msg in [(dict(min_scale=0), "scale"), (dict(max_scale=1.5), "scale"),
                     (dict(min_aspect_ratio=3.0), "aspect"), (dict(sampler_options=[]), "sampler_options"),
                     (dict(sampler_options=[0.1] * 11), "sampler_options"), (dict(trials=0), "trials"),
                     (dict(sampler_options=[float("nan")]), "sampler_options")]:
        with pytest.raises(ValueError, match=msg):
            O.RandomIoUCrop(**bad)


def test_bad_boxes_fail_naming_the_box():
    spec = _image.ImageSpec(O.compile_ops([O.RandomIoUCrop(), O.Resize((32, 32))], dtype="uint8"))
    img = np.zeros((40, 40, 3), np.uint8)
    with pytest.raises(fastq.errors.FastqError, match="box 1: coordinates must be finite"):
        spec.process_array(img, boxes=[[0, 0, 5, 5], [np.nan, 0, 4, 4]])
    with pytest.raises(fastq.errors.FastqError, match="box 0: .* is not x0 <= x1"):
        spec.process_array(img, boxes=[[9, 0, 5, 5]])


def test_targets_rule_drops_boxes_whose_centre_is_outside():
    """transform_boxes on a hand-made record: the box whose centre is outside the crop is
    dropped even though part of it is inside (torchvision zeroes it); a not-applied record
    moves nothing."""
    rec = {"op": "RandomIoUCrop", "in_shape": (100, 100), "out_shape": (50, 50), "box": (10, 10, 50, 50),
           "applied": True}
    ex = {"ops": [rec], "src_shape": (100, 100), "out_shape": (50, 50, 3)}
    b = np.array([[20, 20, 40, 40], [50, 50, 90, 90], [0, 0, 30, 30]], np.float32)
    got = T.transform_boxes(ex, b, max_boxes=4)
    assert got["num_boxes"] == 2 and list(got["index"][:2]) == [0, 2]
    np.testing.assert_array_equal(got["boxes"][:2], [[10, 10, 30, 30], [0, 0, 20, 20]])
    ex["ops"][0] = dict(rec, applied=False, box=(0, 0, 100, 100), out_shape=(100, 100))
    got = T.transform_boxes(ex, b, max_boxes=4)
    assert got["num_boxes"] == 3
    np.testing.assert_array_equal(got["boxes"][:3], b)
    assert T.rule(O.RandomIoUCrop) == "geometric"


def test_odapi_tfrecord_targets_draw_from_the_records_boxes(tmp_path):
    """TFRecord + OdapiTargets (normalized boxes read with the record, indexed and stream
    readers) == Files + Targets.from_annotations(load_odapi) on every output; the crop is
    torchvision's draw on the denormalized boxes."""
    import cv2
    from fastq.annotations.odapi import encode_odapi_example, load_odapi
    from fastq.tfrecord_codec import tfrecord_frame
    imgs, boxes = _data(n=12, seed=5)
    shard, jpegs = tmp_path / "d.tfrecord", []
    frames = []
    for i, (im, b) in enumerate(zip(imgs, boxes)):
        jpeg = cv2.imencode(".jpg", im)[1].tobytes()
        frames.append(tfrecord_frame(encode_odapi_example(jpeg, im.shape[0], im.shape[1], b, np.arange(len(b)) + 1)))
        (tmp_path / f"{i:03d}.jpg").write_bytes(jpeg)
        jpegs.append(str(tmp_path / f"{i:03d}.jpg"))
    shard.write_bytes(b"".join(frames))
    ann = load_odapi([str(shard)])
    ops = [O.RandomIoUCrop(), O.Resize((48, 48)), O.HorizontalFlip()]
    kw = dict(batch_size=4, ops=ops, dtype="uint8", seed=11, shuffle=True, return_index=True, drop_remainder=False,
              workers=2)
    got = []
    for index in (None, False):
        src = fastq.sources.TFRecord([str(shard)], label_key=None, index=index,
                                     targets=T.OdapiTargets(max_boxes=8, image_info=False))
        with fastq.Pipeline(src, **kw) as p:
            got.append(_rows(p))
            if index is None:
                exs = {i: p.explain(0, i) for i in range(len(imgs))}
    files = fastq.sources.Files(jpegs, targets=T.Targets.from_annotations(ann, max_boxes=8, image_info=False))
    with fastq.Pipeline(files, **kw) as f:
        want = _rows(f)
    crops = 0
    for i in range(len(imgs)):
        for rows in got:
            for a, b in zip(rows[i], want[i]):
                np.testing.assert_array_equal(a, b)
        rec = _iou_record(exs[i])
        b = ann.sample(i)["boxes"]
        h, w = imgs[i].shape[:2]
        params = tv_make_params(O.RandomIoUCrop(), b, h, w, RefRng(11, 0, i))[1] if len(b) else {}
        assert rec["applied"] == bool(params)
        if params:
            crops += 1
            assert rec["box"] == (params["left"], params["top"], params["width"], params["height"])
    assert crops >= 4


def test_batch_padding_after_the_crop():
    """pad="batch": RandomIoUCrop's output (bounded by its input) at the top-left of each
    batch, image_sizes = the crop drawn, pixels = F.crop of the source."""
    from fastq import batchpad
    rng = np.random.default_rng(2)
    imgs = [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(8)]
    boxes = [random_boxes(rng, 3, 60, 80) for _ in imgs]
    assert batchpad.chain_bound([O.RandomIoUCrop(), O.HorizontalFlip(p=0)], input_size=(60, 80)) == (60, 80)
    tg = T.Targets(boxes, max_boxes=4, image_info=False)
    p = fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=4, ops=[O.RandomIoUCrop()], dtype="uint8", seed=3,
                       return_index=True, pad="batch")
    seen = 0
    for b in p:
        images, idxs, sizes = np.array(b[0]), np.array(b[-2]), np.array(b[-1])
        for row, idx in enumerate(idxs):
            x, y, w, h = _iou_record(p.explain(0, int(idx)))["box"]
            assert tuple(sizes[row]) == (h, w)
            np.testing.assert_array_equal(images[row][:h, :w], imgs[idx][y:y + h, x:x + w])
            seen += 1
    assert seen == 8


def test_pad_after_a_crop_view_is_the_fill():
    """A crop leaves a view of its input; the padding of a Pad after it is the fill, not the
    pixels around the view (cv::copyMakeBorder's ROI extrapolation; BORDER_ISOLATED)."""
    img = np.random.default_rng(0).integers(1, 255, (40, 40, 3), dtype=np.uint8)
    for crop in (O.CenterCrop(20), O.RandomCrop(20)):
        spec = _image.ImageSpec(O.compile_ops([crop, O.Pad(size=(30, 30), fill=0)], dtype="uint8"))
        out, ex = spec.process_array(img, 0, 0, 1)
        x, y, w, h = ex["ops"][0]["box"]
        want = np.zeros((30, 30, 3), np.uint8)
        want[:20, :20] = F.crop(torch.from_numpy(img).permute(2, 0, 1), y, x, 20, 20).permute(1, 2, 0).numpy()
        np.testing.assert_array_equal(out, want)
