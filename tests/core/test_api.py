"""The Python API as a Keras/tensorpack/PyTorch user meets it: argument handling,
errors that name the Pipeline argument, len(), label_dtype, bfloat16 output,
the options table that the docstring is generated from (issue 13)."""
import inspect
import pathlib
import warnings

import ml_dtypes  # noqa: F401  (installed with TensorFlow: a test requirement)
import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.sources.images import IMAGE_OPTIONS, _ImageBackend
from helpers.image_ref import finish

RNG = np.random.RandomState(7)
IMGS = RNG.randint(0, 256, (10, 12, 20, 3), np.uint8)
LABELS = np.arange(10) * 3


def batches(p):
    return [tuple(np.array(a) for a in b) for b in p]


def arrays_pipe(**kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("workers", 1)
    return fastq.Pipeline(fastq.sources.Arrays(IMGS, LABELS), **kw)


# -- numbers, dtypes, layouts --------------------------------------------------

def test_numpy_integers_are_accepted():
    with arrays_pipe(batch_size=np.int64(4), queue_size=np.int32(3), workers=np.int64(1), seed=np.uint8(3)) as p:
        assert p.batch_size == 4 and type(p.batch_size) is int and p.queue_size == 3
        assert [b[0].shape[0] for b in p] == [4, 4]
    for bad in (True, 2.0, "4", 0, -1):
        with pytest.raises(ValueError, match="batch_size"):
            arrays_pipe(batch_size=bad)


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), "FLOAT32", np.float16, np.uint8,
                                   ml_dtypes.bfloat16])
def test_dtype_objects_are_accepted(dtype):
    with arrays_pipe(dtype=dtype) as p:
        got = p.output_spec[0][1]
        want = np.dtype(dtype.lower() if isinstance(dtype, str) else dtype)
        assert got == want
        x, _ = next(iter(p))
        assert x.dtype == want


def test_bad_dtype_and_layout_are_named():
    with pytest.raises(ValueError, match="dtype must be one of"):
        arrays_pipe(dtype=np.int16)
    with pytest.raises(ValueError, match="layout must be NHWC or NCHW"):
        arrays_pipe(layout="HCW")


@pytest.mark.parametrize("layout", ["nchw", "Nchw", "chw"])
def test_layout_is_case_insensitive(layout):
    with arrays_pipe(layout=layout, dtype="uint8") as p:
        x, _ = next(iter(p))
        assert x.shape == (4, 3, 12, 20)
        np.testing.assert_array_equal(x, IMGS[:4].transpose(0, 3, 1, 2))


# -- ops -----------------------------------------------------------------------

def test_a_single_op_need_not_be_in_a_list():
    with arrays_pipe(ops=ops.CenterCrop(8), dtype="uint8") as p:
        x, _ = next(iter(p))
    np.testing.assert_array_equal(x, IMGS[:4, 2:10, 6:14])  # top = (12-8)/2, left = (20-8)/2
    with pytest.raises(TypeError, match="list of fastq.ops"):
        arrays_pipe(ops="CenterCrop")


def test_equal_sized_arrays_need_no_op():
    # an empty chain keeps the size: x / 255 in float32 (numpy reference)
    with arrays_pipe() as p:
        assert p.output_spec[0][0] == (12, 20, 3)
        got = np.concatenate([b[0] for b in batches(p)])
    np.testing.assert_array_equal(got, (IMGS[:8].astype(np.float64) / 255).astype(np.float32))
    # size-keeping ops only
    with arrays_pipe(ops=[ops.HorizontalFlip(p=1.0)], dtype="uint8") as p:
        got = np.concatenate([b[0] for b in batches(p)])
    np.testing.assert_array_equal(got, IMGS[:8, :, ::-1])


def test_empty_chain_still_needs_a_size_when_images_differ():
    src = fastq.sources.Arrays([IMGS[0], IMGS[1, :10]])
    with pytest.raises(ValueError, match="empty"):
        fastq.Pipeline(src, batch_size=1)
    with pytest.raises(ValueError, match="fixed output size"):
        fastq.Pipeline(src, batch_size=1, ops=[ops.HorizontalFlip()])


def test_normalize_on_the_0_255_scale_warns():
    with pytest.warns(UserWarning, match="0..255 scale.*max_pixel_value=1.0"):
        ops.Normalize(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
    with pytest.warns(UserWarning, match="0..255 scale"):
        ops.Normalize(mean=0.5, std=[58.395, 57.12, 57.375])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.Normalize()
        ops.Normalize(mean=(0.5, 0.25, 0.0), std=(0.5, 0.25, 2.0))  # odd but on the 0..1 scale
        ops.Normalize(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], max_pixel_value=1.0)
    with pytest.raises(ValueError, match="max_pixel_value"):
        ops.Normalize(max_pixel_value=0)


def test_normalize_max_pixel_value_matches_albumentations_formula():
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    with arrays_pipe(ops=[ops.Normalize(mean, std, max_pixel_value=1.0)]) as p:
        got = np.concatenate([b[0] for b in batches(p)])
    want = (IMGS[:8].astype(np.float64) - mean * 1.0) / (std * 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- errors that name the Pipeline argument ----------------------------------------

@pytest.mark.parametrize("kw,suggest", [({"shufle": True}, "shuffle"), ({"batchsize": 2}, "batch_size"),
                                        ({"max_attempt": 3}, "max_attempts"), ({"label_type": "int32"}, "label_dtype"),
                                        ({"qeue_size": 3}, "queue_size")])
def test_typo_names_the_pipeline_argument_and_suggests(kw, suggest):
    with pytest.raises(TypeError) as e:
        arrays_pipe(**kw)
    msg = str(e.value)
    assert msg.startswith(f"Pipeline() got an unexpected keyword argument '{next(iter(kw))}'")
    assert f"did you mean '{suggest}'?" in msg
    assert "_ImageBackend" not in msg


def test_typo_with_an_iterable_source():
    with pytest.raises(TypeError, match="did you mean 'shuffle'"):
        fastq.Pipeline([np.zeros(2)] * 4, batch_size=2, shufle=True)
    with pytest.raises(TypeError, match="native image sources"):
        fastq.Pipeline([np.zeros(2)] * 4, batch_size=2, shuffle=True)


@pytest.mark.parametrize("path", ["/a/dir", b"/a/dir", pathlib.Path("/a/dir")])
def test_files_refuses_a_single_string(path):
    with pytest.raises(TypeError, match="list of file paths.*single path '/a/dir'"):
        fastq.sources.Files(path)


def test_batch_size_larger_than_the_dataset():
    with pytest.raises(ValueError, match=r"batch_size=16 is larger than the 10 samples.*0 batches"):
        arrays_pipe(batch_size=16)
    with pytest.raises(ValueError, match="larger than the 3 samples"):
        fastq.Pipeline([np.zeros(2)] * 3, batch_size=4)
    with arrays_pipe(batch_size=16, drop_remainder=False) as p:
        assert [b[0].shape[0] for b in p] == [10]


def test_queue_size_one_is_refused_with_the_reason_and_two_works():
    with pytest.raises(ValueError, match="at least 2.*holds its previous batch"):
        arrays_pipe(queue_size=1)
    with arrays_pipe(queue_size=2, batch_size=2, stall_timeout=20.0) as p:
        n = 0
        for x, y in p:  # the loop variables hold one batch while the next is fetched
            n += 1
        assert n == 5


# -- len ---------------------------------------------------------------------------

def test_len_of_native_pipelines():
    with arrays_pipe() as p:
        assert len(p) == 2 == len(batches(p))
    with arrays_pipe(drop_remainder=False) as p:
        assert len(p) == 3 == len(batches(p))
    with fastq.Pipeline(fastq.sources.Arrays(IMGS).shard(3, 1), batch_size=2, workers=1) as p:
        assert len(p) == 1  # 3 samples in shard 1
    assert bool(arrays_pipe())


@pytest.mark.tensorpack
def test_len_of_iterable_pipelines():
    samples = [(np.zeros(3, np.float32), i) for i in range(10)]
    with fastq.Pipeline(samples, batch_size=3) as p:
        assert len(p) == 3 == len(batches(p))
    with fastq.Pipeline(samples, batch_size=3, drop_remainder=False) as p:
        assert len(p) == 4 == len(batches(p))

    class NoSize:  # like a tensorpack DataFlow without a size
        def __iter__(self):
            return iter(samples)

        def __len__(self):
            raise NotImplementedError

    for src in (NoSize(), (s for s in samples)):
        with fastq.Pipeline(src, batch_size=3) as p:
            with pytest.raises(TypeError, match="len.. of this Pipeline is unknown.*no __len__"):
                len(p)
            assert bool(p)


# -- label_dtype -----------------------------------------------------------------------

def test_label_dtype():
    with arrays_pipe(label_dtype="int32") as p:
        assert p.output_spec[1] == ((), np.dtype(np.int32))
        ys = np.concatenate([b[1] for b in batches(p)])
    assert ys.dtype == np.int32 and ys.tolist() == LABELS[:8].tolist()
    with arrays_pipe() as p:
        assert p.output_spec[1][1] == np.int64  # the default
    targets = RNG.rand(10, 2)
    with fastq.Pipeline(fastq.sources.Arrays(IMGS, targets), batch_size=5, workers=1, label_dtype=np.float32) as p:
        ys = np.concatenate([b[1] for b in batches(p)])
    np.testing.assert_array_equal(ys, targets.astype(np.float32))


def test_label_dtype_refuses_values_that_do_not_fit():
    labels = np.arange(10)
    labels[6] = 1 << 40
    with pytest.raises(ValueError, match=r"label of sample 6 .* does not fit in int32"):
        fastq.Pipeline(fastq.sources.Arrays(IMGS, labels), batch_size=2, label_dtype="int32")
    with pytest.raises(TypeError, match="label_dtype"):
        arrays_pipe(label_dtype="U3")
    with pytest.raises(ValueError, match="no labels"):
        fastq.Pipeline(fastq.sources.Arrays(IMGS), batch_size=2, label_dtype="int32")


# -- bfloat16 ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("chain", [[], [ops.HorizontalFlip(p=1.0), ops.Normalize()],
                                   [ops.Normalize(mean=(0.5, 0.4, 0.3), std=(0.01, 0.2, 0.9))]])
def test_bfloat16_matches_a_numpy_ml_dtypes_reference(layout, chain):
    with arrays_pipe(dtype="bfloat16", layout=layout, ops=chain) as p:
        got = np.concatenate([b[0] for b in batches(p)])
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    for i in range(8):
        img = IMGS[i, :, ::-1] if chain and isinstance(chain[0], ops.HorizontalFlip) else IMGS[i]
        want = finish(img, chain, "float32", layout).astype(ml_dtypes.bfloat16)  # float32 -> bf16, RNE
        assert got[i].view(np.uint16).tobytes() == want.view(np.uint16).tobytes()


def test_bfloat16_from_jpeg_files_with_resampling(tmp_path):
    from fastq.bench import testdata
    paths = testdata.make_jpeg_dataset(str(tmp_path), 6, seed=1, min_side=60, max_side=90)
    chain = [ops.RandomResizedCrop(32), ops.HorizontalFlip(), ops.Normalize()]
    outs = {}
    for dt in ("float32", "bfloat16"):
        with fastq.Pipeline(fastq.sources.Files(paths), batch_size=3, workers=2, seed=4, ops=chain, dtype=dt) as p:
            outs[dt] = np.concatenate([b[0] for b in batches(p)])
    want = outs["float32"].astype(ml_dtypes.bfloat16)
    assert outs["bfloat16"].view(np.uint16).tobytes() == want.view(np.uint16).tobytes()


# -- the options table -------------------------------------------------------------------

def test_options_table_matches_the_backend_and_the_docstring():
    sig = inspect.signature(_ImageBackend.__init__)
    kwonly = {n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
    table = {name: default for name, default, _ in IMAGE_OPTIONS}
    assert kwonly == table
    doc = fastq.Pipeline.__doc__
    assert "{image_options}" not in doc
    for name, default, text in IMAGE_OPTIONS:
        assert f"{name} : default {default!r}" in doc
        assert text.split()[0] in doc
    assert "max_attempts" in doc and "label_dtype" in doc


def test_shuffle_is_off_by_default_and_on_when_asked():
    with fastq.Pipeline(fastq.sources.Arrays(IMGS), batch_size=5, workers=1, return_index=True) as p:
        assert [np.concatenate([b[1] for b in batches(p)]).tolist() for _ in range(2)] == [list(range(10))] * 2
    with fastq.Pipeline(fastq.sources.Arrays(IMGS), batch_size=5, workers=1, return_index=True, shuffle=True) as p:
        orders = [np.concatenate([b[1] for b in batches(p)]).tolist() for _ in range(2)]
    assert sorted(orders[0]) == list(range(10)) and orders[0] != orders[1]


def test_typo_with_another_sources_backend_names_the_pipeline_argument():
    class Backend:
        def __init__(self, source, config, *, window=3):
            pass

    class Custom(fastq.sources.Source):
        def _make_backend(self, config, **options):
            return Backend(self, config, **options)

    with pytest.raises(TypeError) as e:
        fastq.Pipeline(Custom(), batch_size=2, widnow=4)
    assert str(e.value).startswith("Pipeline() got an unexpected keyword argument 'widnow'")
    assert "Backend" not in str(e.value)


def test_docs_options_table_is_generated_from_the_same_table():
    import os
    from fastq.sources.images import image_options_markdown
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "ops.md")) as f:
        assert image_options_markdown() in f.read()


@pytest.mark.parametrize("mean,std", [(0.0, 2.9415e-39), (0.5, 1e38), (0.2, 1e-30)],
                         ids=["overflow-to-inf", "subnormal", "large"])
def test_bfloat16_rounding_at_the_edges(mean, std):
    # float32 values near the top of the range (bf16 rounds some to inf) and subnormals
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        norm = ops.Normalize(mean=mean, std=std)
    with arrays_pipe(dtype="bfloat16", ops=[norm]) as p:
        got = np.concatenate([b[0] for b in batches(p)])
    want = finish(IMGS[:8].reshape(-1, 20, 3), [norm], "float32").reshape(8, 12, 20, 3).astype(ml_dtypes.bfloat16)
    assert got.view(np.uint16).tobytes() == want.view(np.uint16).tobytes()
