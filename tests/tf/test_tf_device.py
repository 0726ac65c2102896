"""uint8 on the wire, conversion on the device (fastq.tf.dataset(normalize=, dtype=, layout=),
fastq.tf.to_device).

The reference is an independent Pipeline that normalizes on the host (ops.Normalize, the C
core's float64 -> float32 -> float16/bfloat16 rounding, written by the workers in the asked
layout): the converted batches must equal it bit for bit.  There is no GPU here: the
conversion runs on the CPU device, and device="/cpu:0" takes the same path as a GPU device
(copy_to_device, then the map and prefetch under tf.device); the GPU test runs only where
TensorFlow sees one.
"""
import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as ops  # noqa: E402
import fastq.tf as fqtf  # noqa: E402
from fastq.bench import testdata  # noqa: E402

pytestmark = pytest.mark.tf

N, B, SIZE = 12, 4, 24
MEAN, STD = (0.45, 0.5, 0.55), (0.2, 0.25, 0.3)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    return testdata.make_jpeg_dataset(str(tmp_path_factory.mktemp("jpegs")), N, seed=4, min_side=48, max_side=96)


def make(paths, *, normalize=False, **kw):
    chain = [ops.RandomResizedCrop(SIZE), ops.HorizontalFlip()]
    if normalize:
        chain.append(ops.Normalize(MEAN, STD))
    kw.setdefault("dtype", "uint8")
    return fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=B, workers=1,
                          shuffle=True, seed=6, ops=chain, **kw)


def host_reference(paths, dtype, layout):
    with make(paths, normalize=True, dtype=dtype, layout=layout) as p:
        return [(x.copy(), y.copy()) for x, y in p]


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a.view(np.uint32)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("device", [None, "/cpu:0"])
def test_conversion_equals_the_pipelines_normalize(jpegs, dtype, layout, device):
    want = host_reference(jpegs, dtype, layout)
    p = make(jpegs)
    ds = fqtf.dataset(p, device=device, normalize=(MEAN, STD), dtype=dtype, layout=layout)
    assert ds.element_spec[0].dtype == tf.as_dtype(dtype)
    got = [(x.numpy(), y.numpy()) for x, y in ds]
    assert len(got) == len(want)
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.shape == wx.shape and str(gx.dtype) == str(wx.dtype)
        np.testing.assert_array_equal(bits(gx), bits(wx))
        np.testing.assert_array_equal(gy, wy)
    del gx, gy, got
    assert p.stats()["slots_leased"] == 0  # the converted batches are new tensors; every slot went back
    p.close()


def test_an_nchw_pipeline_and_the_layouts_tensorflow_takes(jpegs):
    want = host_reference(jpegs, "float32", "NCHW")
    with make(jpegs, layout="NCHW") as p:  # uint8 NCHW on the wire, NCHW out
        got = [x.numpy() for x, _ in fqtf.dataset(p, device="/cpu:0", normalize=(MEAN, STD))]
    for g, (w, _) in zip(got, want):
        np.testing.assert_array_equal(g, w)
    with make(jpegs, layout="NCHW") as p:
        with pytest.raises(ValueError, match="from an NCHW pipeline is not supported"):
            fqtf.dataset(p, normalize=(MEAN, STD), layout="NHWC")
    with make(jpegs) as p:
        with pytest.raises(ValueError, match="PyTorch's memory format"):
            fqtf.dataset(p, normalize=(MEAN, STD), layout="channels_last")
        with pytest.raises(ValueError, match="layout must be one of"):
            fqtf.dataset(p, normalize=(MEAN, STD), layout="channels_first")


def test_dtype_alone_scales_as_a_pipeline_without_normalize(jpegs):
    with make(jpegs, dtype="bfloat16") as ref:  # no Normalize: the workers write x / 255
        want = [x.copy() for x, _ in ref]
    p = make(jpegs)
    got = [x.numpy() for x, _ in fqtf.dataset(p, device="/cpu:0", dtype="bfloat16")]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype) == "bfloat16"
        np.testing.assert_array_equal(bits(g), bits(w))
    p.close()
    p = make(jpegs)  # a layout change alone moves the uint8 values
    with make(jpegs) as ref:
        want = [x.copy() for x, _ in ref]
    got = [x.numpy() for x, _ in fqtf.dataset(p, device="/cpu:0", layout="NCHW")]
    for g, w in zip(got, want):
        assert g.dtype == np.uint8
        np.testing.assert_array_equal(g, w.transpose(0, 3, 1, 2))
    p.close()


def test_features_labels_structure_keeps_the_dict(jpegs):
    want = host_reference(jpegs, "float16", "NHWC")
    p = make(jpegs)
    ds = fqtf.dataset(p, structure="features_labels", device="/cpu:0", normalize=(MEAN, STD), dtype="float16")
    for (x, d), (wx, wy) in zip(ds, want):
        np.testing.assert_array_equal(bits(x.numpy()), bits(wx))
        np.testing.assert_array_equal(d["labels"].numpy(), wy)
    p.close()


def test_to_device_eager_and_in_a_training_step(jpegs):
    want = host_reference(jpegs, "bfloat16", "NCHW")
    p = make(jpegs)
    kw = dict(normalize=ops.Normalize(MEAN, STD), dtype=tf.bfloat16, layout="NCHW")

    @tf.function
    def step(images, labels):
        x, y = fqtf.to_device((images, labels), "/cpu:0", **kw)
        return x, y

    for (x8, y), (wx, wy) in zip(fqtf.dataset(p), want):
        x, yy = fqtf.to_device((x8, y), "/cpu:0", **kw)
        assert x.device.endswith("CPU:0")
        np.testing.assert_array_equal(bits(x.numpy()), bits(wx))
        np.testing.assert_array_equal(yy.numpy(), wy)
        gx, _ = step(x8, y)
        np.testing.assert_array_equal(bits(gx.numpy()), bits(wx))
        single = fqtf.to_device(x8, **kw)  # a tensor alone, no device: where TF places it
        np.testing.assert_array_equal(bits(single.numpy()), bits(wx))
    p.close()


def test_keras_normalize_layer_is_the_in_model_equivalent(jpegs):
    from fastq.tf import ops as tf_ops
    want = host_reference(jpegs, "float32", "NHWC")
    p = make(jpegs)
    layer = tf_ops.NormalizeLayer(MEAN, STD)
    for (x8, _), (wx, _) in zip(fqtf.dataset(p), want):
        np.testing.assert_array_equal(layer(x8).numpy(), wx)
    p.close()


def test_bad_requests_are_clear_errors(jpegs):
    with make(jpegs, normalize=True, dtype="float32") as p:
        with pytest.raises(ValueError, match="takes uint8 images"):
            fqtf.dataset(p, normalize=(MEAN, STD))
    with make(jpegs) as p:
        with pytest.raises(TypeError, match=r"normalize must be None, True, \(mean, std\)"):
            fqtf.dataset(p, normalize=0.5)
        with pytest.raises(ValueError, match="layout must be"):
            fqtf.dataset(p, normalize=(MEAN, STD), layout="HWCN")
        with pytest.raises(ValueError, match="needs a float dtype"):
            fqtf.dataset(p, normalize=(MEAN, STD), dtype="uint8")
        with pytest.raises(ValueError, match="dtype"):
            fqtf.dataset(p, normalize=(MEAN, STD), dtype="int32")
        with pytest.raises(TypeError, match="needs uint8 images"):
            fqtf.to_device(tf.zeros((1, 2, 2, 3), tf.float32), normalize=(MEAN, STD))


@pytest.mark.skipif(not tf.config.list_physical_devices("GPU"),
                    reason="TensorFlow sees no GPU here (the CPU device tests above run the same code)")
def test_on_a_gpu(jpegs):
    want = host_reference(jpegs, "float32", "NCHW")
    p = make(jpegs)
    ds = fqtf.dataset(p, device="/gpu:0", normalize=(MEAN, STD), layout="NCHW")
    for (x, _), (wx, _) in zip(ds, want):
        assert "GPU" in x.device
        np.testing.assert_array_equal(x.numpy(), wx)
    p.close()
