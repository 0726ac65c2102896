"""Output channel order (channels="RGB" | "BGR" | 3 | 1 | "gray"), fused into the final
write (csrc/image/batch/fq_image_write.cpp, fq_image_write_simd.cpp): the BGR output must be
the RGB output reversed along the channel axis, exactly (bit for bit), for every dtype
and layout, with flips still pending, through the Files, Bytes and Arrays sources, for
the AVX2 and the table write; Normalize's mean/std (RGB order) follow their channel."""
import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import ops as O
from fastq.bench import testdata

DTYPES = ["uint8", "float32", "float16", "bfloat16"]
NORM = O.Normalize(mean=(0.1, 0.5, 0.9), std=(0.2, 0.3, 0.05))


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("chan")
    return testdata.make_jpeg_dataset(str(d), 12, seed=5, min_side=60, max_side=140)


def _bits(a):
    """The raw element bits (bfloat16 arrays are ml_dtypes: compare as integers)."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _reverse(a, layout, batched=True):
    axis = (-1 if layout == "NHWC" else (1 if batched else 0))
    return np.flip(a, axis=axis)


def _chain(dtype, size=(23, 37)):
    # odd sizes: the SIMD row tails; flips with p=0.5: some rows pending hflip/vflip
    chain = [O.RandomResizedCrop(size), O.HorizontalFlip(0.5), O.VerticalFlip(0.5)]
    return chain + ([NORM] if dtype != "uint8" else [])


def _source(kind, paths):
    if kind == "files":
        return fastq.sources.Files(paths)
    datas = [open(p, "rb").read() for p in paths]
    if kind == "bytes":
        return fastq.sources.Bytes(datas)
    import cv2
    return fastq.sources.Arrays([cv2.cvtColor(cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR),
                                              cv2.COLOR_BGR2RGB) for d in datas])


def _run(src, **kw):
    with fastq.Pipeline(src, batch_size=4, seed=7, **kw) as p:
        return [np.array(b[0]) for b in p]


@pytest.mark.parametrize("kind", ["files", "bytes", "arrays"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bgr_is_rgb_reversed_exactly(jpegs, kind, layout, dtype):
    kw = dict(ops=_chain(dtype), dtype=dtype, layout=layout)
    rgb = _run(_source(kind, jpegs), channels="RGB", **kw)
    bgr = _run(_source(kind, jpegs), channels="BGR", **kw)
    three = _run(_source(kind, jpegs), channels=3, **kw)
    assert len(rgb) == len(bgr) == 3
    for a, b, c in zip(rgb, bgr, three):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert _bits(a).tobytes() == _bits(c).tobytes()  # 3 and "RGB" are the same
        assert _bits(b).tobytes() == _bits(_reverse(a, layout)).tobytes()
        assert not np.array_equal(_bits(a), _bits(b))  # the test sees a difference


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_flips_and_simd_and_table_writes(dtype, layout):
    """Every flip combination, widths around the AVX2 block sizes, both write paths."""
    rng = np.random.default_rng(1)
    for h, w in [(3, 1), (5, 4), (6, 5), (7, 6), (9, 21), (4, 22), (11, 64), (8, 67)]:
        img = rng.integers(0, 256, (h, w, 3), np.uint8)
        for flips in [(), (O.HorizontalFlip(1.0),), (O.VerticalFlip(1.0),),
                      (O.HorizontalFlip(1.0), O.VerticalFlip(1.0))]:
            chain = [O.CenterCrop((h, w)), *flips] + ([NORM] if dtype != "uint8" else [])
            outs = {}
            for order in ("RGB", "BGR"):
                spec = _image.ImageSpec(O.compile_ops(chain, dtype=dtype, layout=layout, channels=order))
                assert spec.channel_order == order
                outs[order], _ = spec.process_array(img)
                _image.set_simd_write(False)
                try:
                    table, _ = spec.process_array(img)
                finally:
                    _image.set_simd_write(True)
                assert _bits(table).tobytes() == _bits(outs[order]).tobytes()
            want = _reverse(outs["RGB"], layout, batched=False)
            assert _bits(outs["BGR"]).tobytes() == _bits(want).tobytes(), (h, w, flips)


def test_normalize_mean_std_follow_their_channel():
    img = np.random.default_rng(2).integers(0, 256, (6, 9, 3), np.uint8)
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((6, 9)), NORM], dtype="float32", channels="BGR"))
    out, _ = spec.process_array(img)
    mean, std = np.array(NORM.mean), np.array(NORM.std)
    for oc in range(3):
        c = 2 - oc  # output channel 0 is blue: mean[2], std[2]
        want = ((img[:, :, c] / 255.0 - mean[c]) / std[c]).astype(np.float32)
        np.testing.assert_array_equal(out[:, :, oc], want)


def test_channel_option_spellings_and_errors():
    for ch, want in [(3, (3, "RGB")), ("RGB", (3, "RGB")), ("rgb", (3, "RGB")), ("BGR", (3, "BGR")),
                     ("bgr", (3, "BGR")), (1, (1, "RGB")), ("gray", (1, "RGB")), ("GRAY", (1, "RGB")),
                     (np.int64(3), (3, "RGB"))]:
        c = O.compile_ops([O.CenterCrop(4)], channels=ch)
        assert (c.channels, c.channel_order) == want
        assert c.out_shape == (4, 4, want[0])
        assert O.compile_ops([O.CenterCrop(4)], channels=ch, layout="NCHW").out_shape == (want[0], 4, 4)
    for bad in [2, 4, "RGBA", "BRG", True, None, 3.0]:
        with pytest.raises(ValueError, match="channels must be"):
            O.compile_ops([O.CenterCrop(4)], channels=bad)
    with pytest.raises(ValueError, match="channels must be"):
        _image.ImageSpec(O.compile_ops([O.CenterCrop(4)]).packed_ops, channels="RGBX")
    # ImageSpec takes the spelling directly too
    assert _image.ImageSpec(O.compile_ops([O.CenterCrop(4)]).packed_ops, channels="bgr").channel_order == "BGR"
    gray = _image.ImageSpec(O.compile_ops([O.CenterCrop(4)]).packed_ops, channels="gray")
    assert gray.channels == 1 and gray.channel_order == "RGB"


def test_gray_output_unchanged_by_the_option(jpegs):
    kw = dict(ops=[O.Resize((20, 20))], dtype="uint8")
    a = _run(fastq.sources.Files(jpegs), channels=1, **kw)
    b = _run(fastq.sources.Files(jpegs), channels="gray", **kw)
    assert all(x.shape == (4, 20, 20, 1) and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def test_pipeline_output_shape_and_docs_row(jpegs):
    with fastq.Pipeline(fastq.sources.Files(jpegs), batch_size=4, ops=[O.Resize((8, 10))], channels="BGR",
                        layout="NCHW") as p:
        x = np.array(next(iter(p))[0])
    assert x.shape == (4, 3, 8, 10)
    from fastq.sources.images import IMAGE_OPTIONS
    assert "'BGR'" in dict((n, t) for n, _, t in IMAGE_OPTIONS)["channels"]


@pytest.mark.tf
def test_tf_element_spec_and_kernel_refusal(jpegs):
    tf = pytest.importorskip("tensorflow", reason="the TensorFlow op needs TensorFlow (requirements-dev.txt)")
    import fastq.tf as fqtf
    with fastq.Pipeline(fastq.sources.Files(jpegs), batch_size=4, ops=[O.Resize((8, 10))], channels="BGR",
                        dtype="float16") as p:
        spec = fqtf.element_spec(p)
        assert spec[0].shape.as_list()[1:] == [8, 10, 3] and spec[0].dtype == tf.float16
        ds = fqtf.dataset(p)
        x = next(iter(ds))[0].numpy()
    with fastq.Pipeline(fastq.sources.Files(jpegs), batch_size=4, ops=[O.Resize((8, 10))],
                        dtype="float16") as q:
        y = np.array(next(iter(q))[0])
    assert x.tobytes() == y[..., ::-1].tobytes()
    # the in-graph op: its channel_order attr, same bytes as the Pipeline's
    from fastq.tf import ops as tf_ops
    enc = tf.constant([open(p, "rb").read() for p in jpegs[:4]])
    idx = tf.constant([0, 1, 2, 3], tf.int64)
    chain = [O.RandomResizedCrop((9, 13)), O.HorizontalFlip(), NORM]
    for layout, axis in (("NHWC", -1), ("NCHW", 1)):
        kw = dict(ops=chain, seed=4, dtype="float32", layout=layout)
        rgb = tf_ops.decode_augment(enc, idx, channels="RGB", **kw).numpy()
        bgr = tf_ops.decode_augment(enc, idx, channels="BGR", **kw).numpy()
        assert bgr.shape == rgb.shape and bgr.tobytes() == np.flip(rgb, axis).tobytes()
        with fastq.Pipeline(fastq.sources.Files(jpegs[:4]), batch_size=4, channels="BGR", **kw) as p:
            assert np.array(next(iter(p))[0]).tobytes() == bgr.tobytes()
