"""Detection geometry ops (csrc/image/geometry/fq_image_detection.cpp): ResizeShortestEdge and Pad, against
tensorpack's imgaug.ResizeShortestEdge (sizes and boxes), a Python transcription of
detectron2's ResizeShortestEdge.get_output_shape (max_size), cv2.resize and numpy."""

import numpy as np
import pytest

import fastq.ops as O
from fastq._native import _image
from fastq import errors
from fastq import targets as T


def spec(ops, input_size=None, channels=3):
    return _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels=channels, input_size=input_size))


def photo(h, w, c=3, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h // 8 + 2, w // 8 + 2, c)).astype(np.uint8)
    import cv2
    return np.ascontiguousarray(cv2.resize(base, (w, h), interpolation=cv2.INTER_CUBIC).reshape(h, w, c))


def d2_shape(h, w, short, max_size):
    """detectron2 ResizeShortestEdge.get_output_shape, transcribed."""
    size = short * 1.0
    scale = size / min(h, w)
    if h < w:
        newh, neww = size, scale * w
    else:
        newh, neww = scale * h, size
    if max(newh, neww) > max_size:
        scale = max_size * 1.0 / max(newh, neww)
        newh, neww = newh * scale, neww * scale
    return int(newh + 0.5), int(neww + 0.5)


SIZES = [(480, 640), (640, 480), (333, 500), (500, 333), (427, 640), (1, 300), (300, 1), (800, 800), (17, 1023)]


@pytest.mark.parametrize("hw", SIZES)
@pytest.mark.parametrize("short,max_size", [(800, 1333), (640, 1000), (224, 10000), (600, 600)])
def test_resize_shortest_edge_sizes_match_detectron2(hw, short, max_size):
    h, w = hw
    s = spec([O.ResizeShortestEdge(short, max_size=max_size), O.CenterCrop(8)])
    _, ex = s.process_array(np.zeros((h, w, 3), np.uint8))
    assert ex["ops"][0]["out_shape"] == d2_shape(h, w, short, max_size)
    assert ex["ops"][0]["magnitude"] == short


@pytest.mark.tensorpack
@pytest.mark.parametrize("hw", SIZES[:5])
def test_resize_shortest_edge_matches_tensorpack(hw):
    import cv2
    from tensorpack.dataflow import imgaug

    h, w = hw
    img = photo(h, w)
    aug = imgaug.ResizeShortestEdge(96, interp=cv2.INTER_LINEAR)
    tf = aug.get_transform(img)
    want = tf.apply_image(img)
    out, ex = spec([O.ResizeShortestEdge(96), O.Pad(size=(200, 200))]).process_array(img)
    oh, ow = ex["ops"][0]["out_shape"]
    assert (oh, ow) == want.shape[:2]
    # pixels: OpenCV 4.6 (native) vs the tests' cv2: bilinear within 1
    assert np.abs(out[:oh, :ow].astype(int) - want.astype(int)).max() <= 1
    # boxes: tensorpack's ResizeTransform.apply_coords (x * new_w / w, y * new_h / h)
    rng = np.random.default_rng(1)
    x0, y0 = rng.uniform(0, w / 2, 5), rng.uniform(0, h / 2, 5)
    boxes = np.stack([x0, y0, x0 + w / 3, y0 + h / 3], 1).astype(np.float32)
    pts = tf.apply_coords(boxes.reshape(-1, 2).astype(np.float64)).reshape(-1, 4)
    got = T.transform_boxes(ex, boxes, max_boxes=5)
    np.testing.assert_allclose(got["boxes"], pts, rtol=1e-5, atol=1e-3)


def test_resize_shortest_edge_pixels_match_cv2_resize():
    import cv2

    img = photo(120, 170)
    for interp, cv in (("nearest", cv2.INTER_NEAREST), ("bilinear", cv2.INTER_LINEAR), ("area", cv2.INTER_AREA)):
        out, ex = spec([O.ResizeShortestEdge(64, interpolation=interp), O.Pad(size=(64, 96))]).process_array(img)
        assert ex["ops"][0]["out_shape"] == (64, 91)
        want = cv2.resize(img, (91, 64), interpolation=cv)
        assert np.abs(out[:, :91].astype(int) - want.astype(int)).max() <= 1
        assert (out[:, 91:] == 0).all()


def test_multi_scale_draw_is_uniform_and_deterministic():
    s = spec([O.ResizeShortestEdge([32, 48, 64], max_size=200), O.Pad(size=(256, 256))])
    img = photo(40, 60)
    seen = [s.process_array(img, 5, 0, i)[1]["ops"][0]["magnitude"] for i in range(300)]
    counts = {v: seen.count(v) for v in (32.0, 48.0, 64.0)}
    assert sum(counts.values()) == 300 and min(counts.values()) > 70, counts
    again = [s.process_array(img, 5, 0, i)[1]["ops"][0]["magnitude"] for i in range(300)]
    assert seen == again


def test_pad_size_and_multiple_match_numpy():
    img = photo(50, 70)
    out, ex = spec([O.Pad(size=(64, 80), fill=(1, 2, 3))]).process_array(img)
    want = np.empty((64, 80, 3), np.uint8)
    want[:] = (1, 2, 3)
    want[:50, :70] = img
    np.testing.assert_array_equal(out, want)
    assert ex["ops"][0]["pad"] == (0, 0, 10, 14)
    out, ex = spec([O.Resize((50, 70)), O.Pad(multiple=32), O.CenterCrop((64, 96))]).process_array(img)
    assert ex["ops"][1]["out_shape"] == (64, 96)
    np.testing.assert_array_equal(out[:50, :70], img)
    assert (out[50:] == 0).all() and (out[:, 70:] == 0).all()


def test_pad_after_a_flip_flips_the_image_not_the_canvas():
    img = photo(50, 70)
    out, ex = spec([O.HorizontalFlip(1.0), O.Pad(size=(60, 80))]).process_array(img)
    np.testing.assert_array_equal(out[:50, :70], img[:, ::-1])
    assert (out[50:] == 0).all() and (out[:, 70:] == 0).all()


def test_pad_never_crops():
    with pytest.raises(errors.FastqError, match="larger than size"):
        spec([O.Pad(size=(40, 40))]).process_array(photo(50, 70))


def test_chain_rule_fixed_output_size():
    assert O.compile_ops([O.ResizeShortestEdge(800, 1333), O.Pad(size=(1344, 1344))]).out_shape == (1344, 1344, 3)
    with pytest.raises(ValueError, match="fixed output size"):
        O.compile_ops([O.ResizeShortestEdge(800, 1333)])
    with pytest.raises(ValueError, match="fixed output size"):
        O.compile_ops([O.Resize((100, 100)), O.Pad(multiple=32)])


@pytest.mark.parametrize("bad,match", [
    (lambda: O.ResizeShortestEdge([]), "1 to 8"),
    (lambda: O.ResizeShortestEdge(0), "short must be an int"),
    (lambda: O.ResizeShortestEdge(800, max_size=0), "max_size"),
    (lambda: O.Pad(), "exactly one"),
    (lambda: O.Pad((10, 10), multiple=32), "exactly one"),
    (lambda: O.Pad(multiple=0), "multiple"),
    (lambda: O.Pad((10, 10), fill=300), "fill"),
    (lambda: O.ScaleJitter(64, scale=(0, 1)), "scale"),
    (lambda: O.ScaleJitter(64, scale=(2, 1)), "scale"),
    (lambda: O.RandomZoomOut(side_range=(0.5, 2)), "side_range"),
])
def test_bad_parameters(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_c_checks_the_packed_parameters():
    k = _image.OP_KINDS["ResizeShortestEdge"]
    f = O.ResizeShortestEdge(800).fields()
    chain = _image.check_chain(_image.pack_ops([(k, dict(f, n_sizes=2))]), "uint8")
    assert "unused slots 0" in chain["error"] or "sizes" in chain["error"]
    k = _image.OP_KINDS["Pad"]
    chain = _image.check_chain(_image.pack_ops([(k, dict(O.Pad(8).fields(), multiple=4))]), "uint8")
    assert "multiple" in chain["error"]


def tf_resize_and_crop_params(h, w, out_h, out_w, s, jitter=True):
    """TF Model Garden resize_and_crop_image's sizes (transcribed; numpy rounds half to
    even as tf.round), given the random scale s read from the explain record."""
    th, tw = (np.round(s * out_h), np.round(s * out_w)) if jitter else (out_h, out_w)
    k = min(th / h, tw / w)
    nh, nw = int(np.round(h * k)), int(np.round(w * k))
    return nh, nw, max(nh - out_h, 0), max(nw - out_w, 0)


@pytest.mark.parametrize("hw", [(480, 640), (640, 480), (300, 300), (50, 900)])
def test_scale_jitter_matches_tf_model_garden(hw):
    import cv2

    h, w = hw
    img = photo(h, w)
    s = spec([O.ScaleJitter((256, 320), scale=(0.3, 2.0), fill=(9, 8, 7))])
    offsets = set()
    for i in range(12):
        out, ex = s.process_array(img, 3, 0, i)
        r = ex["ops"][0]
        sc = r["magnitude"]
        assert 0.3 <= sc <= 2.0
        nh, nw, my, mx = tf_resize_and_crop_params(h, w, 256, 320, sc)
        ox, oy, sw, sh = r["box"]
        assert (sh, sw) == (nh, nw) and 0 <= oy <= my and 0 <= ox <= mx
        offsets.add((ox, oy))
        want = np.empty((256, 320, 3), np.uint8)
        want[:] = (9, 8, 7)
        win = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)[oy:oy + 256, ox:ox + 320]
        want[:win.shape[0], :win.shape[1]] = win
        assert np.abs(out.astype(int) - want.astype(int)).max() <= 1
        info = T.image_info(ex)
        np.testing.assert_allclose(info, [[h, w], [nh, nw], [nh / h, nw / w], [oy, ox]], rtol=1e-6)
        # TF resize_and_crop_boxes: boxes * image_scale - offset, clipped to the output
        boxes = np.array([[10, 20, w / 2, h / 2], [w / 3, h / 3, w, h]], np.float32)
        want_b = boxes * np.array([nw / w, nh / h] * 2) - np.array([ox, oy] * 2)
        want_b = np.clip(want_b, 0, [320, 256, 320, 256])
        keep = (want_b[:, 2] > want_b[:, 0]) & (want_b[:, 3] > want_b[:, 1])
        got = T.transform_boxes(ex, boxes, max_boxes=2)
        np.testing.assert_allclose(got["boxes"][:got["num_boxes"]], want_b[keep], rtol=1e-5, atol=1e-3)
    assert len(offsets) > 3


def test_scale_jitter_without_jitter_is_a_fit_and_pad():
    img = photo(100, 200)
    out, ex = spec([O.ScaleJitter((128, 128), scale=(1.0, 1.0))]).process_array(img)
    assert ex["ops"][0]["box"] == (0, 0, 128, 64)
    assert (out[64:] == 0).all()


def test_random_zoom_out_matches_numpy_padding():
    img = photo(40, 60)
    s = spec([O.RandomZoomOut(fill=(5, 6, 7), side_range=(1.0, 3.0), p=0.7), O.CenterCrop((200, 200))])
    applied = 0
    for i in range(20):
        out, ex = s.process_array(img, 4, 0, i)
        r = ex["ops"][0]
        if not r["applied"]:
            assert r["out_shape"] == (40, 60)
            continue
        applied += 1
        left, top, right, bottom = r["pad"]
        sc = r["magnitude"]  # torchvision: canvas int(W r) x int(H r)
        assert min(left, top, right, bottom) >= 0 and 1 <= sc <= 3
        ch, cw = r["out_shape"]
        assert (ch, cw) == (40 + top + bottom, 60 + left + right) == (int(40 * sc), int(60 * sc))
        want = np.empty((ch, cw, 3), np.uint8)
        want[:] = (5, 6, 7)
        want[top:top + 40, left:left + 60] = img
        y0, x0 = ex["ops"][1]["box"][1], ex["ops"][1]["box"][0]
        canvas = np.zeros((200, 200, 3), np.uint8)  # CenterCrop pads with 0
        ys, xs = max(y0, 0), max(x0, 0)
        sub = want[ys:y0 + 200, xs:x0 + 200]
        canvas[ys - y0:ys - y0 + sub.shape[0], xs - x0:xs - x0 + sub.shape[1]] = sub
        np.testing.assert_array_equal(out, canvas)
    assert 8 <= applied <= 19
    assert O.compile_ops([O.RandomZoomOut(p=0.0)], input_size=(10, 10)).out_shape == (10, 10, 3)
