"""Pipeline(pad="batch") (fastq/batchpad.py, csrc/image/batch/fq_batch_pad.cpp): variable-size
images, each batch one (B, Hb, Wb, C) array padded to its largest image.

References: the same chain ending in a fixed Pad(size=capacity) (the existing path), cropped
to (Hb, Wb); an independent numpy/cv2 reference (each image resized by cv2 with the sizes of
detectron2's formula, flipped as the explain record says, pasted on a fill canvas of the
batch maximum); numpy for the in-place repacking; the ring's own slot addresses for zero copy.
"""
import io

import cv2
import numpy as np
import pytest

import fastq
from fastq import batchpad, errors, ops as O
from fastq.bench import testdata
from fastq.sources import Arrays, Bytes, Files
from fastq.targets import Targets
from helpers.native_helpers import slot_addresses

N = 12


def rup(v, m):
    return -(-v // m) * m


def rse_size(h, w, s, max_size):
    """detectron2's ResizeShortestEdge.get_output_shape (transcribed)."""
    scale = s / min(h, w)
    newh, neww = (s, scale * w) if h < w else (scale * h, s)
    if max(newh, neww) > max_size:
        scale = max_size / max(newh, neww)
        newh, neww = newh * scale, neww * scale
    return int(newh + 0.5), int(neww + 0.5)


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(5)
    return [rng.integers(0, 256, (int(rng.integers(17, 70)), int(rng.integers(17, 70)), 3), dtype=np.uint8)
            for _ in range(N)]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bp_jpegs")
    return testdata.make_jpeg_dataset(str(d), N, seed=4, min_side=40, max_side=90)


def det_chain(interp="bilinear"):
    return [O.ResizeShortestEdge([24, 32, 40], max_size=56, interpolation=interp), O.HorizontalFlip()]


def pipe(src, ops, **kw):
    kw.setdefault("workers", 2)
    kw.setdefault("seed", 3)
    kw.setdefault("dtype", "uint8")
    return fastq.Pipeline(src, batch_size=4, ops=ops, stall_timeout=20, **kw)


def collect(p, epochs=1):
    out = []
    for _ in range(epochs):
        for b in p:
            out.append(tuple(np.array(a) for a in b))
            del b
    return out


# -- the bound ----------------------------------------------------------------------

def test_chain_bound_from_the_ops():
    assert batchpad.chain_bound(det_chain()) == (56, 56)
    assert batchpad.chain_bound(det_chain() + [O.Pad(multiple=32)]) == (64, 64)
    assert batchpad.chain_bound([O.RandomResizedCrop((30, 40)), O.HorizontalFlip()]) == (30, 40)
    assert batchpad.chain_bound([O.ScaleJitter(64), O.HorizontalFlip()]) == (64, 64)
    assert batchpad.chain_bound([O.Resize(shorter_side=20)], input_size=(30, 50)) == (20, 33)
    assert batchpad.chain_bound([O.RandomResizedCrop(32), O.Resize(shorter_side=40)]) == (40, 40)
    assert batchpad.chain_bound([O.ResizeShortestEdge([10, 20])], input_size=(30, 60)) == (20, 40)
    assert batchpad.chain_bound([O.HorizontalFlip()], input_size=(30, 50)) == (30, 50)
    assert batchpad.chain_bound([O.RandomZoomOut(side_range=(1, 2)), O.Pad(multiple=8)],
                                input_size=(30, 50)) == (64, 104)
    # every size drawn stays within the bound (detectron2's formula, many aspect ratios)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        h, w = (int(v) for v in rng.integers(1, 4000, 2))
        oh, ow = rse_size(h, w, int(rng.choice([640, 800])), 1333)
        assert max(oh, ow) <= 1333


@pytest.mark.parametrize("ops, culprit", [
    ([O.HorizontalFlip()], "op 0 (HorizontalFlip)"),
    ([], "keeps the source's size"),
    ([O.ResizeShortestEdge(32), O.HorizontalFlip()], "op 0 (ResizeShortestEdge)"),
    ([O.ResizeShortestEdge(32, max_size=64), O.Resize(shorter_side=40)], "op 1 (Resize)"),
    ([O.RandomResizedCrop(32), O.RandomZoomOut(), O.Pad(multiple=32)], None),  # bounded
])
def test_unbounded_chain_fails_clearly(jpegs, ops, culprit):
    if culprit is None:
        assert batchpad.chain_bound(ops) == (128, 128)
        return
    with pytest.raises(batchpad.UnboundedChainError, match="max_image_size") as e:
        pipe(Files(jpegs), ops, pad="batch")
    assert culprit in str(e.value) and "no upper bound" in str(e.value)
    p = pipe(Files(jpegs), ops, pad="batch", max_image_size=(100, 100))  # the user's bound instead
    assert p._batch_pad.cap == (100, 100)
    p.close()


def test_option_errors(jpegs):
    with pytest.raises(ValueError, match="pad must be None or 'batch'"):
        pipe(Files(jpegs), det_chain(), pad="max")
    with pytest.raises(ValueError, match="only with pad='batch'"):
        pipe(Files(jpegs), det_chain() + [O.Pad(size=64)], pad_multiple=32)
    with pytest.raises(ValueError, match="pad_multiple"):
        pipe(Files(jpegs), det_chain(), pad="batch", pad_multiple=0)
    with pytest.raises(ValueError, match="RandomErasing"):
        pipe(Files(jpegs), det_chain() + [O.Normalize(), O.RandomErasing()], pad="batch", dtype="float32")
    with pytest.raises(ValueError, match="at most 15 ops"):
        pipe(Files(jpegs), det_chain() * 8, pad="batch")
    with pytest.raises(ValueError, match="not a fastq.ops op"):
        pipe(Files(jpegs), det_chain() + ["flip"], pad="batch")
    with pytest.raises(ValueError, match="mix="):
        fastq.Pipeline(Files(jpegs, list(range(N))), batch_size=4, ops=det_chain(), pad="batch",
                       mix=fastq.MixUp(num_classes=N))


# -- the native repacking ------------------------------------------------------------

@pytest.mark.parametrize("planes, cap, hw, px", [(3, (7, 9), (5, 6), 3), (4, (6, 6), (6, 2), 4),
                                                 (2, (5, 8), (1, 8), 1), (5, (4, 4), (4, 4), 2)])
def test_compact_in_place_against_numpy(planes, cap, hw, px):
    from fastq._native import _image
    rng = np.random.default_rng(planes)
    block = rng.integers(0, 256, (planes, cap[0], cap[1], px), dtype=np.uint8)
    want = block[:, :hw[0], :hw[1]].copy()
    tail = block.reshape(-1)[planes * hw[0] * hw[1] * px:].copy() if hw == cap else None
    _image.batch_pad_compact(block, planes, cap[0], cap[1], hw[0], hw[1], px)
    got = block.reshape(-1)[:want.size].reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    if tail is not None:
        np.testing.assert_array_equal(block.reshape(-1)[want.size:], tail)
    with pytest.raises(errors.InvalidArgumentError, match="outside the capacity"):
        _image.batch_pad_compact(block, planes, cap[0], cap[1], cap[0] + 1, 1, px)
    with pytest.raises(ValueError, match="do not fit"):
        _image.batch_pad_compact(block, planes + 1, cap[0], cap[1], 1, 1, px)


# -- batches --------------------------------------------------------------------------

def check_against_fixed(got, fixed, multiple, fill_value=0, layout="NHWC"):
    """got: the pad="batch" batches; fixed: the same chain + Pad(size=capacity)."""
    assert len(got) == len(fixed)
    for g, f in zip(got, fixed):
        sizes = g[-1]
        assert sizes.dtype == np.int32 and sizes.shape == (len(f[0]), 2)
        hb, wb = rup(int(sizes[:, 0].max()), multiple), rup(int(sizes[:, 1].max()), multiple)
        if layout == "NHWC":
            assert g[0].shape == (len(f[0]), hb, wb, f[0].shape[3])
            np.testing.assert_array_equal(g[0], f[0][:, :hb, :wb])
            for i, (h, w) in enumerate(sizes):
                if h < hb:
                    assert np.all(g[0][i, h:] == fill_value)
                if w < wb:
                    assert np.all(g[0][i, :, w:] == fill_value)
        else:
            np.testing.assert_array_equal(g[0], f[0][:, :, :hb, :wb])
        for a, b in zip(g[1:-1], f[1:]):  # every other output unchanged
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["arrays", "files", "bytes"])
def test_equals_fixed_pad_cropped(kind, arrays, jpegs):
    src = {"arrays": lambda: Arrays(arrays, list(range(N))), "files": lambda: Files(jpegs, list(range(N))),
           "bytes": lambda: Bytes([open(p, "rb").read() for p in jpegs], list(range(N)))}[kind]
    p = pipe(src(), det_chain(), pad="batch", pad_multiple=8, shuffle=True, return_index=True)
    assert p.output_names == ["images", "labels", "index", "image_sizes"]
    assert p._batch_pad.cap == (56, 56)
    got = collect(p, 2)
    fixed = collect(pipe(src(), det_chain() + [O.Pad(size=(56, 56))], shuffle=True, return_index=True), 2)
    check_against_fixed(got, fixed, 8)
    assert len({g[0].shape for g in got}) > 1  # the batches do have different sizes
    p.close()


def test_numpy_reference_each_image_alone(arrays):
    """Nearest resize: cv2.resize INTER_NEAREST of the detectron2 size, flipped as drawn,
    pasted at the top-left of a fill canvas of the batch maximum."""
    fill = 77
    p = pipe(Arrays(arrays), det_chain("nearest"), pad="batch", pad_multiple=16, pad_fill=fill)
    for bi, (images, sizes) in enumerate(collect(p)):
        hb, wb = images.shape[1:3]
        assert (hb, wb) == (rup(int(sizes[:, 0].max()), 16), rup(int(sizes[:, 1].max()), 16))
        for r in range(len(images)):
            idx = bi * 4 + r
            ex = p.explain(0, idx)
            s = ex["ops"][0]["magnitude"] if "magnitude" in ex["ops"][0] else None
            h0, w0 = arrays[idx].shape[:2]
            cands = {rse_size(h0, w0, v, 56) for v in (24, 32, 40)}
            assert tuple(sizes[r]) in cands and tuple(sizes[r]) == tuple(ex["ops"][0]["out_shape"])
            h, w = sizes[r]
            ref = cv2.resize(arrays[idx], (int(w), int(h)), interpolation=cv2.INTER_NEAREST)
            if ex["ops"][1]["applied"]:
                ref = ref[:, ::-1]
            canvas = np.full((hb, wb, 3), fill, np.uint8)
            canvas[:h, :w] = ref
            np.testing.assert_array_equal(images[r], canvas, err_msg=f"sample {idx} (s={s})")
    p.close()


def test_float_nchw_normalize_and_fill(jpegs):
    ops = det_chain() + [O.Normalize()]
    kw = dict(dtype="float32", layout="NCHW")
    p = pipe(Files(jpegs), ops, pad="batch", pad_multiple=32, pad_fill=(10, 20, 30), **kw)
    assert p._batch_pad.cap == (64, 64)
    assert p.output_spec[0] == ((3, None, None), np.dtype(np.float32))
    got = collect(p)
    fixed = collect(pipe(Files(jpegs), det_chain() + [O.Pad(size=64, fill=(10, 20, 30)), O.Normalize()], **kw))
    check_against_fixed(got, fixed, 32, layout="NCHW")
    # the padding is the fill, normalized like a pixel
    mean, std = np.array(O.IMAGENET_MEAN), np.array(O.IMAGENET_STD)
    want = ((np.array([10, 20, 30]) / 255 - mean) / std).astype(np.float32)
    images, sizes = got[0][0], got[0][-1]
    i = int(np.argmin(sizes[:, 1]))
    if sizes[i, 1] < images.shape[3]:
        np.testing.assert_array_equal(images[i, :, 0, -1], want)


def test_targets_boxes_image_info_and_masks(arrays):
    rng = np.random.default_rng(1)
    boxes, masks = [], []
    for a in arrays:
        h, w = a.shape[:2]
        x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
        boxes.append([[x0, y0, x0 + w / 3, y0 + h / 3]])
        masks.append(rng.integers(0, 5, (h, w), dtype=np.uint8))
    t = dict(max_boxes=4, image_info=True, masks=masks, mask_fill=255)
    p = pipe(Arrays(arrays, targets=Targets(boxes, [[1]] * N, **t)), det_chain(), pad="batch", pad_multiple=8)
    assert p.output_names == ["images", "boxes", "classes", "num_boxes", "image_info", "masks", "image_sizes"]
    assert p.output_spec[5] == ((None, None), np.dtype(np.uint8))
    got = collect(p)
    fixed = collect(pipe(Arrays(arrays, targets=Targets(boxes, [[1]] * N, **t)),
                         det_chain() + [O.Pad(size=56)]))
    for g, f in zip(got, fixed):
        sizes = g[-1]
        hb, wb = g[0].shape[1:3]
        np.testing.assert_array_equal(g[0], f[0][:, :hb, :wb])
        for k in (1, 2, 3, 4):  # boxes, classes, num_boxes, image_info: unchanged
            np.testing.assert_array_equal(g[k], f[k])
        assert g[5].shape == (len(sizes), hb, wb)
        np.testing.assert_array_equal(g[5], f[5][:, :hb, :wb])
        for r, (h, w) in enumerate(sizes):
            assert np.all(g[5][r, h:] == 255) and np.all(g[5][r, :, w:] == 255)
            assert g[5][r, :h, :w].max() < 5
            # image_info: [orig, scaled = orig * scale, scale, offset]; the valid size is the scaled size
            info = g[4][r]
            np.testing.assert_allclose(info[1], sizes[r], atol=0.5 + 1e-3)
            np.testing.assert_array_equal(info[3], [0, 0])


def test_one_vs_two_workers_and_resume(jpegs):
    def make(workers):
        return pipe(Files(jpegs), det_chain(), pad="batch", pad_multiple=8, shuffle=True, workers=workers)
    one, two = collect(make(1), 2), collect(make(2), 2)
    for a, b in zip(one, two):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    p = make(2)
    it = iter(p)
    next(it)
    sd = p.state_dict()
    q = make(1)
    q.load_state_dict(sd)
    rest = collect(q)
    for a, b in zip(rest, one[1:3]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    p.close()
    q.close()


def test_partial_last_batch(arrays):
    p = fastq.Pipeline(Arrays(arrays[:10]), batch_size=4, ops=det_chain(), dtype="uint8", pad="batch",
                       drop_remainder=False, workers=2, seed=3)
    got = collect(p)
    assert [len(g[0]) for g in got] == [4, 4, 2]
    fixed = collect(fastq.Pipeline(Arrays(arrays[:10]), batch_size=4, ops=det_chain() + [O.Pad(size=56)],
                                   dtype="uint8", drop_remainder=False, workers=2, seed=3))
    check_against_fixed(got, [(f[0],) for f in fixed], 1)


def test_arrays_alias_the_slot_no_copy(jpegs):
    p = pipe(Files(jpegs), det_chain(), pad="batch", pad_multiple=8, queue_size=3)
    for images, sizes in p:
        assert images.ctypes.data in slot_addresses(p, 0)
        assert sizes.ctypes.data in slot_addresses(p, 1)
        assert images.flags.c_contiguous and not images.flags.owndata
        assert images.ctypes.data % 64 == 0
        base = images
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base).__name__ == "Lease"  # the slot's lease keeps the memory
    p.close()


def test_error_and_skip_policy(jpegs):
    bufs = [open(q, "rb").read() for q in jpegs]
    bufs[5] = b"not a jpeg at all" * 10
    p = pipe(Bytes(bufs), det_chain(), pad="batch", pad_multiple=8, on_error="skip")
    got = collect(p)
    assert p.stats()["skipped"] >= 1 and len(got) == N // 4
    for images, sizes in got:
        assert images.shape[1:3] == (rup(int(sizes[:, 0].max()), 8), rup(int(sizes[:, 1].max()), 8))
    p.close()
    p = pipe(Bytes(bufs), det_chain(), pad="batch", pad_multiple=8)
    with pytest.raises(errors.DecodeError, match="sample 5"):
        collect(p)
    p.close()
    # an image larger than max_image_size fails its sample, naming it
    p = pipe(Files(jpegs), [O.HorizontalFlip()], pad="batch", max_image_size=(60, 60))
    with pytest.raises(errors.InvalidArgumentError, match=r"sample \d+, file .*larger than size"):
        collect(p)
    p.close()
    p = pipe(Files(jpegs), [O.HorizontalFlip()], pad="batch", max_image_size=(90, 90), on_error="skip")
    for images, sizes in collect(p):
        assert images.shape[1] <= 90 and sizes.max() <= 90
    p.close()


@pytest.mark.parametrize("stream", [False, True])
def test_tfrecord_odapi_shards(tmp_path, stream):
    """TFRecord + OdapiTargets (boxes from the reader), indexed and stream modes."""
    from fastq.annotations.odapi import encode_odapi_example
    from fastq.tfrecord_codec import tfrecord_frame
    from fastq.targets import OdapiTargets
    rng = np.random.default_rng(2)
    recs = []
    for i in range(N):
        h, w = int(rng.integers(30, 90)), int(rng.integers(30, 90))
        jpeg = cv2.imencode(".jpg", rng.integers(0, 255, (h, w, 3), dtype=np.uint8))[1].tobytes()
        recs.append(tfrecord_frame(encode_odapi_example(jpeg, h, w, np.array([[1.0, 2.0, w - 3.0, h - 4.0]]),
                                                        np.array([i + 1]))))
    shard = tmp_path / "d.tfrecord"
    shard.write_bytes(b"".join(recs))

    def src():
        return fastq.sources.TFRecord([str(shard)], label_key=None, targets=OdapiTargets(max_boxes=3),
                                      index=False if stream else None, index_dir=str(tmp_path))
    kw = dict(shuffle=not stream, return_index=True)
    p = pipe(src(), det_chain(), pad="batch", pad_multiple=8, **kw)
    assert p.output_names[-2:] == ["index", "image_sizes"]
    got = collect(p)
    fixed = collect(pipe(src(), det_chain() + [O.Pad(size=56)], **kw))
    check_against_fixed(got, fixed, 8)
    p.close()


def test_fixed_size_chains_are_unchanged(jpegs):
    """Without pad= the outputs and output names are those of main (no image_sizes)."""
    p = pipe(Files(jpegs), det_chain() + [O.Pad(size=56)])
    assert p.output_names == ["images"] and p.output_spec[0][0] == (56, 56, 3)
    assert p._batch_pad is None
    p.close()


# -- TensorFlow ---------------------------------------------------------------------

@pytest.mark.tf
def test_tf_dataset_has_none_dims_aliases_and_feeds_a_model(jpegs):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed")
    import ctypes
    import fastq.tf as fqtf
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]

    def address(t):  # the eager tensor's buffer, from its DLPack export (as tests/tf/test_tf.py)
        ptr = get(tf.experimental.dlpack.to_dlpack(t), b"dltensor")
        return ctypes.cast(ptr, ctypes.POINTER(ctypes.c_void_p))[0]

    p = pipe(Files(jpegs, [i % 2 for i in range(N)]), det_chain() + [O.Normalize()], pad="batch",
             pad_multiple=8, dtype="float32", workers=1)
    ds = fqtf.dataset(p)
    spec = ds.element_spec
    assert spec[0].shape.as_list() == [4, None, None, 3] and spec[2].shape.as_list() == [4, 2]
    shapes = []
    traced = []

    @tf.function(input_signature=[spec[0], spec[2]])  # the dataset's own signature
    def step(x, sizes):
        traced.append(1)
        return tf.reduce_sum(x, axis=[1, 2, 3]), tf.reduce_max(sizes, axis=0)

    for x, lab, sizes in ds:
        assert address(x) in slot_addresses(p, 0)  # zero copy through tf.data
        hb, wb = (rup(int(v), 8) for v in sizes.numpy().max(axis=0))
        assert tuple(x.shape) == (4, hb, wb, 3)
        shapes.append(tuple(x.shape))
        s, m = step(x, sizes)
        assert s.shape == (4,)
    assert len(set(shapes)) > 1
    assert len(traced) == 1  # one trace serves batches of every size

    # Keras takes the (None, None, None, 3) images: a tiny fully convolutional classifier
    model = tf.keras.Sequential([tf.keras.Input((None, None, 3)), tf.keras.layers.Conv2D(4, 3, strides=2),
                                 tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(2)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(fqtf.dataset(p).map(lambda x, y, s: (x, y)), epochs=1, verbose=0)
    assert np.isfinite(hist.history["loss"][0])
    p.close()


@pytest.mark.parametrize("mask_size", [None, 6])
def test_instance_masks_are_repacked_like_the_images(arrays, mask_size):
    """Full-size instance masks ((max_boxes, H, W) per sample) come out (B, max_boxes, Hb,
    Wb), equal to the fixed-Pad chain's cropped, zero outside each image; M x M instance
    masks (instance_mask_size) are not planes of the image and stay as they are."""
    rng = np.random.default_rng(2)
    boxes, polys = [], []
    for a in arrays:
        h, w = a.shape[:2]
        x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
        x1, y1 = x0 + w / 3, y0 + h / 3
        boxes.append([[x0, y0, x1, y1]])
        polys.append([[np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)]])

    def src():
        return Arrays(arrays, targets=Targets(boxes, [[1]] * N, max_boxes=2, instance_polygons=polys,
                                              instance_mask_size=mask_size))
    p = pipe(src(), det_chain(), pad="batch", pad_multiple=8)
    k = p.output_names.index("instance_masks")
    got = collect(p)
    fixed = collect(pipe(src(), det_chain() + [O.Pad(size=56)]))
    for g, f in zip(got, fixed):
        sizes = g[-1]
        hb, wb = g[0].shape[1:3]
        if mask_size is None:
            assert g[k].shape == (len(sizes), 2, hb, wb)
            np.testing.assert_array_equal(g[k], f[k][:, :, :hb, :wb])
            for r, (h, w) in enumerate(sizes):
                assert g[k][r, 0].any() and not g[k][r, :, h:].any() and not g[k][r, :, :, w:].any()
        else:
            assert g[k].shape == (len(sizes), 2, 6, 6)
            np.testing.assert_array_equal(g[k], f[k])
    p.close()
