"""fastq.tf.ops: the native TensorFlow op FastqDecodeAugment.

The reference for every image is a fastq Pipeline over the same encoded bytes (Bytes
source, no shuffle): the op must give the Pipeline's sample for (seed, epoch, index)
bit for bit - eagerly, under tf.function, in Dataset.map with parallel calls, across a
saved and restored iterator and through Dataset.save/load.  Normalization on the
accelerator (fqt.normalize / NormalizeLayer) is checked against the Pipeline's own
Normalize output.  The kernel's input handling: wrong dtypes and shapes, empty batch,
negative index/epoch, a corrupt image under both error policies.  The ABI: the C API
table fastq._native._image exports, the build cache, the error when no compiler exists, a
kernel library loaded without binding.
"""
import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.tf

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops as ops  # noqa: E402
import fastq.tf.ops as fqt  # noqa: E402
from fastq.bench import testdata  # noqa: E402

N = 12
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def bufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfk_jpegs")
    paths = testdata.make_jpeg_dataset(str(d), N, seed=3, min_side=64, max_side=160)
    return [open(p, "rb").read() for p in paths]


@pytest.fixture(scope="module")
def op_module():
    return fqt.load()  # builds the kernel for this TF at first use (cached)


CHAIN = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.ColorJitter(0.4, 0.4, 0.4, 0.1),
         ops.RandomAffine(degrees=10, translate=(0.1, 0.1))]


def pipeline_rows(bufs, chain, *, seed, epochs, **kw):
    """{epoch: array of every sample, in index order} from a fastq Pipeline."""
    pipe = fastq.Pipeline(fastq.sources.Bytes(bufs), batch_size=len(bufs), ops=chain, seed=seed,
                          drop_remainder=False, workers=2, **kw)
    out = {}
    for e in range(max(epochs) + 1):
        rows = [b[0].copy() for b in pipe]
        if e in epochs:
            out[e] = rows[0]
    pipe.close()
    return out


@pytest.mark.parametrize("kw", [
    dict(dtype="uint8"),
    dict(dtype="float32", extra=[ops.Normalize()]),
    dict(dtype="float16", layout="NCHW"),
    dict(dtype="bfloat16"),
    dict(dtype="uint8", channels=1, layout="NCHW"),
], ids=["uint8", "float32-normalize", "float16-nchw", "bfloat16", "gray-nchw"])
def test_eager_and_tf_function_equal_pipeline(bufs, op_module, kw):
    kw = dict(kw)
    chain = CHAIN + kw.pop("extra", [])
    ref = pipeline_rows(bufs, chain, seed=9, epochs=(0, 2), **kw)
    enc = tf.constant(bufs)
    idx = tf.range(N, dtype=tf.int64)
    for e, want in ref.items():
        got = fqt.decode_augment(enc, idx, ops=chain, seed=9, epoch=e, **kw)
        assert got.shape == want.shape and got.dtype.name == str(want.dtype)
        assert got.numpy().tobytes() == want.tobytes(), f"epoch {e}"

    @tf.function
    def f(enc, idx, epoch):
        return fqt.decode_augment(enc, idx, ops=chain, seed=9, epoch=epoch, **kw)

    for e, want in ref.items():
        # a permuted batch: each row depends on its own index only
        perm = np.random.default_rng(e).permutation(N)
        got = f(tf.gather(enc, perm), tf.constant(perm, tf.int64), tf.constant(e, tf.int64)).numpy()
        assert got.tobytes() == want[perm].tobytes(), f"tf.function epoch {e}"
    assert not np.array_equal(ref[0], ref[2])  # epochs differ: the epoch input is used


def batched_dataset(bufs, *, seed=4, epoch=0, batch=3, parallel=None, chain=CHAIN):
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(bufs), tf.range(len(bufs), dtype=tf.int64))).batch(batch)
    return ds.map(lambda enc, i: (fqt.decode_augment(enc, i, ops=chain, seed=seed, epoch=epoch), i),
                  num_parallel_calls=parallel, deterministic=True if parallel else None)


def test_dataset_map_parallel_calls(bufs, op_module):
    ref = pipeline_rows(bufs, CHAIN, seed=4, epochs=(1,), dtype="uint8")[1]
    for parallel in (None, 3, tf.data.AUTOTUNE):
        seen = 0
        for x, i in batched_dataset(bufs, epoch=1, parallel=parallel):
            assert x.numpy().tobytes() == ref[i.numpy()].tobytes()
            seen += len(i)
        assert seen == N
    # deterministic=False: order may change, content may not
    ds = batched_dataset(bufs, epoch=1, parallel=4).map(lambda x, i: (x, i), num_parallel_calls=2, deterministic=False)
    got = {int(j): row.tobytes() for x, i in ds for row, j in zip(x.numpy(), i.numpy())}
    assert got == {j: ref[j].tobytes() for j in range(N)}


def test_iterator_checkpoint_restores_the_rest(bufs, op_module, tmp_path):
    ds = batched_dataset(bufs, batch=2, parallel=2)
    it = iter(ds)
    first = [next(it) for _ in range(2)]
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "it"))
    rest = [(x.numpy(), i.numpy()) for x, i in it]
    it2 = iter(ds)
    next(it2)  # position differs from the saved one until restored
    tf.train.Checkpoint(iterator=it2).restore(path).assert_consumed()
    again = [(x.numpy(), i.numpy()) for x, i in it2]
    assert len(rest) == len(again) == N // 2 - 2 and len(first) == 2
    for (a, ia), (b, ib) in zip(rest, again):
        assert np.array_equal(ia, ib) and a.tobytes() == b.tobytes()


def test_dataset_save_load_and_graph_serialization(bufs, op_module, tmp_path):
    ds = batched_dataset(bufs, batch=4)
    # the dataset graph (what tf.data service ships to workers) carries the op and its attributes
    graph = tf.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor).numpy()
    gd = tf.compat.v1.GraphDef.FromString(graph)
    nodes = [n for f in gd.library.function for n in f.node_def if n.op == fqt.OP_NAME]
    assert len(nodes) == 1
    assert len(nodes[0].attr["ops"].s) == len(CHAIN) * ops.FQ_OP_DTYPE.itemsize
    ds.save(str(tmp_path / "saved"))
    loaded = tf.data.Dataset.load(str(tmp_path / "saved"))
    a = [(x.numpy().tobytes(), i.numpy().tolist()) for x, i in ds]
    b = [(x.numpy().tobytes(), i.numpy().tolist()) for x, i in loaded]
    assert sorted(a, key=lambda t: t[1]) == sorted(b, key=lambda t: t[1])


# -- input handling -------------------------------------------------------------------

def test_wrong_dtypes_and_shapes(bufs, op_module):
    enc, idx = tf.constant(bufs[:3]), tf.range(3, dtype=tf.int64)
    with pytest.raises(TypeError, match="encoded must be a string tensor"):
        fqt.decode_augment(tf.zeros([3], tf.uint8), idx, ops=CHAIN)
    with pytest.raises(TypeError, match="index must be an int64"):
        fqt.decode_augment(enc, tf.range(3, dtype=tf.int32), ops=CHAIN)
    with pytest.raises(tf.errors.InvalidArgumentError, match="index must be a 1-D int64 tensor as long as encoded"):
        fqt.decode_augment(enc, tf.range(2, dtype=tf.int64), ops=CHAIN)
    with pytest.raises(tf.errors.InvalidArgumentError, match="encoded must be a 1-D"):
        fqt.decode_augment(tf.reshape(tf.constant(bufs[:4]), (2, 2)), tf.zeros([2], tf.int64), ops=CHAIN)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"index\[1\] = -5 is negative"):
        fqt.decode_augment(enc, tf.constant([0, -5, 2], tf.int64), ops=CHAIN)
    with pytest.raises(tf.errors.InvalidArgumentError, match="epoch must be >= 0"):
        fqt.decode_augment(enc, idx, ops=CHAIN, epoch=-1)
    with pytest.raises(ValueError, match="Normalize"):
        fqt.decode_augment(enc, idx, ops=CHAIN + [ops.Normalize()], dtype="uint8")
    with pytest.raises(ValueError, match="on_error"):
        fqt.decode_augment(enc, idx, ops=CHAIN, on_error="ignore")
    with pytest.raises(ValueError, match="seed"):
        fqt.decode_augment(enc, idx, ops=CHAIN, seed=-1)

    # shape checks at graph construction: static shapes that cannot fit fail in tracing
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.string), tf.TensorSpec([None], tf.int64)])
    def two_d(e, i):
        return fqt.decode_augment(e, i, ops=CHAIN)

    with pytest.raises(ValueError, match="must be rank 1"):
        two_d.get_concrete_function()


def test_raw_op_attribute_checks(op_module):
    raw = op_module.fastq_decode_augment
    enc, idx = tf.constant([b"x"]), tf.constant([0], tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError, match="packed array of at most 16 fq_op records"):
        raw(enc, idx, 0, ops=b"\x00" * 7, seed=0, out_size=[8, 8])
    packed = ops.compile_ops([ops.CenterCrop(8)], dtype="uint8").packed_ops.tobytes()
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not match the op chain's output 8x8"):
        raw(enc, idx, 0, ops=packed, seed=0, out_size=[9, 8])
    bad = bytearray(packed)
    bad[0] = 99  # an unknown op kind: the C core's own validation answers
    with pytest.raises(tf.errors.InvalidArgumentError, match="invalid op chain"):
        raw(enc, idx, 0, ops=bytes(bad), seed=0, out_size=[8, 8])


def test_fast_idct_decodes_as_tf_decode_jpeg(bufs, op_module):
    """idct="fast": the op's decode is TensorFlow's default JPEG decode, byte for byte (the
    default, "accurate", is PIL's); the attribute reaches the kernel."""
    shapes = [tf.io.extract_jpeg_shape(b).numpy() for b in bufs]
    h, w = (int(v) for v in min(shapes, key=lambda s: int(s[0]) * int(s[1]))[:2])
    same = [b for b, s in zip(bufs, shapes) if (int(s[0]), int(s[1])) == (h, w)]
    enc, idx = tf.constant(same), tf.range(len(same), dtype=tf.int64)
    chain = [ops.CenterCrop((h, w))]
    fast = fqt.decode_augment(enc, idx, ops=chain, dct_scaling=False, idct="fast").numpy()
    acc = fqt.decode_augment(enc, idx, ops=chain, dct_scaling=False).numpy()
    for i, b in enumerate(same):
        np.testing.assert_array_equal(fast[i], tf.io.decode_jpeg(b, channels=3).numpy())
    assert not np.array_equal(fast, acc)
    with pytest.raises(ValueError, match="idct must be one of"):
        fqt.decode_augment(enc, idx, ops=chain, idct="INTEGER_FAST")


def test_empty_batch(op_module):
    x = fqt.decode_augment(tf.zeros([0], tf.string), tf.zeros([0], tf.int64), ops=CHAIN)
    assert x.shape == (0, 40, 40, 3) and x.dtype == tf.uint8
    x, ok = fqt.decode_augment(tf.zeros([0], tf.string), tf.zeros([0], tf.int64), ops=CHAIN, on_error="skip")
    assert x.shape == (0, 40, 40, 3) and ok.shape == (0,)


def corrupt_batch(bufs):
    bad = bytearray(bufs[5])
    bad[len(bad) // 3:] = b"\x00" * (len(bad) - len(bad) // 3)  # JPEG header intact, entropy data zeroed
    batch = list(bufs[:8])
    batch[5] = bytes(bad[:200])  # truncated inside the scan
    batch[2] = b""                # empty
    return batch


def test_corrupt_image_raises_naming_the_index(bufs, op_module):
    batch = corrupt_batch(bufs)
    idx = tf.range(100, 108, dtype=tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        fqt.decode_augment(tf.constant(batch), idx, ops=CHAIN)
    msg = str(e.value)
    assert "sample index 102 (batch row 2)" in msg and "FQ_E_EMPTY" in msg
    assert "1 more sample(s) of this batch failed too" in msg
    # inside a Dataset.map the iterator reports the same
    ds = tf.data.Dataset.from_tensors((tf.constant(batch), idx)).map(
        lambda enc, i: fqt.decode_augment(enc, i, ops=CHAIN))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"sample index 102 \(batch row 2\)"):
        next(iter(ds))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"sample index 105 .*(FQ_E_DECODE|corrupt|premature)"):
        fqt.decode_augment(tf.constant(batch[3:]), idx[3:], ops=CHAIN)


def test_corrupt_image_skip_is_counted(bufs, op_module):
    batch = corrupt_batch(bufs)
    ref = pipeline_rows(bufs[:8], CHAIN, seed=2, epochs=(0,), dtype="uint8")[0]
    x, ok = fqt.decode_augment(tf.constant(batch), tf.range(8, dtype=tf.int64), ops=CHAIN, seed=2,
                               on_error="skip")
    ok = ok.numpy()
    assert ok.tolist() == [True, True, False, True, True, False, True, True]
    assert int(np.sum(~ok)) == 2  # the skip count
    x = x.numpy()
    assert not x[~ok].any()  # skipped rows are zeros
    assert x[ok].tobytes() == ref[ok].tobytes()
    kept = tf.boolean_mask(x, ok)
    assert kept.shape[0] == 6


# -- file mode: decode_augment_files -----------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfk_files")
    return testdata.make_jpeg_dataset(str(d), N, seed=3, min_side=64, max_side=160)


def files_pipeline_rows(paths, chain, *, seed, epoch, **kw):
    """Every sample of epoch `epoch` in index order, from a Pipeline over sources.Files
    (the reference: the op must read and process each file as the FILES source does)."""
    kw.setdefault("dtype", "uint8")  # the op's default (a Pipeline's is float32)
    pipe = fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=len(paths), ops=chain,
                          seed=seed, drop_remainder=False, workers=2, shuffle=False, **kw)
    for e in range(epoch + 1):
        rows = [b[0].copy() for b in pipe]
    pipe.close()
    return rows[0]


@pytest.mark.parametrize("kw", [dict(dtype="uint8"), dict(dtype="float32", extra=[ops.Normalize()], layout="NCHW")],
                         ids=["uint8", "float32-normalize-nchw"])
def test_files_equal_the_files_pipeline_and_the_bytes_op(files, bufs, op_module, kw):
    kw = dict(kw)
    chain = CHAIN + kw.pop("extra", [])
    for e in (0, 1):
        want = files_pipeline_rows(files, chain, seed=5, epoch=e, **kw)
        perm = np.random.default_rng(e).permutation(N)
        got = fqt.decode_augment_files([files[j] for j in perm], tf.constant(perm, tf.int64), ops=chain, seed=5,
                                       epoch=e, **kw).numpy()
        assert got.tobytes() == want[perm].tobytes(), f"epoch {e}"
        from_bytes = fqt.decode_augment(tf.constant(bufs), tf.range(N, dtype=tf.int64), ops=chain, seed=5, epoch=e,
                                        **kw).numpy()
        assert from_bytes.tobytes() == want.tobytes()


def test_files_in_dataset_map_and_checkpoint(files, op_module, tmp_path):
    want = files_pipeline_rows(files, CHAIN, seed=4, epoch=0)

    def make(parallel):
        ds = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.range(N, dtype=tf.int64))).batch(3)
        return ds.map(lambda p, i: (fqt.decode_augment_files(p, i, ops=CHAIN, seed=4), i),
                      num_parallel_calls=parallel).prefetch(1)

    for parallel in (None, 2, tf.data.AUTOTUNE):
        got = {int(j): row.tobytes() for x, i in make(parallel) for row, j in zip(x.numpy(), i.numpy())}
        assert got == {j: want[j].tobytes() for j in range(N)}
    ds = make(2)
    it = iter(ds)
    next(it)
    path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "it"))
    rest = [(x.numpy().tobytes(), i.numpy().tolist()) for x, i in it]
    it2 = iter(ds)
    tf.train.Checkpoint(iterator=it2).restore(path).assert_consumed()
    assert [(x.numpy().tobytes(), i.numpy().tolist()) for x, i in it2] == rest
    graph = tf.compat.v1.GraphDef.FromString(tf.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor).numpy())
    nodes = [n for f in graph.library.function for n in f.node_def if n.op == fqt.OP_NAME]
    assert len(nodes) == 1 and nodes[0].attr["source"].s == b"files"
    assert not [n for f in graph.library.function for n in f.node_def if "PyFunc" in n.op]


def test_files_accept_pathlike_and_check_their_input(files, op_module):
    import pathlib
    want = files_pipeline_rows(files, CHAIN, seed=0, epoch=0)
    got = fqt.decode_augment_files([pathlib.Path(p) for p in files[:3]], [0, 1, 2], ops=CHAIN)
    assert got.numpy().tobytes() == want[:3].tobytes()
    with pytest.raises(TypeError, match="decode_augment_files: paths must be a string tensor"):
        fqt.decode_augment_files(tf.zeros([3], tf.uint8), [0, 1, 2], ops=CHAIN)
    with pytest.raises(tf.errors.InvalidArgumentError, match="decode_augment_files: index must be a 1-D int64 "
                                                             "tensor as long as paths"):
        fqt.decode_augment_files(files[:3], tf.range(2, dtype=tf.int64), ops=CHAIN)
    with pytest.raises(ValueError, match="decode_augment_files: on_error"):
        fqt.decode_augment_files(files[:3], [0, 1, 2], ops=CHAIN, on_error="ignore")


@pytest.fixture()
def bad_files(files, bufs, tmp_path):
    """files[:8] with row 1 missing, row 3 a directory, row 4 empty, row 6 truncated."""
    out = list(files[:8])
    out[1] = str(tmp_path / "missing.jpg")
    out[3] = str(tmp_path)
    (tmp_path / "empty.jpg").write_bytes(b"")
    out[4] = str(tmp_path / "empty.jpg")
    (tmp_path / "cut.jpg").write_bytes(bufs[6][:300])
    out[6] = str(tmp_path / "cut.jpg")
    return out


def test_unreadable_files_raise_naming_index_and_path(bad_files, op_module):
    idx = tf.range(200, 208, dtype=tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        fqt.decode_augment_files(bad_files, idx, ops=CHAIN)
    msg = str(e.value)
    assert (f"fastq.decode_augment_files: sample index 201 (batch row 1): file '{bad_files[1]}': cannot open: "
            "No such file or directory (FQ_E_IO)") in msg
    assert "3 more sample(s) of this batch failed too" in msg
    for row, words in ((3, "not a regular file (FQ_E_IO)"), (4, "empty file (0 bytes) (FQ_E_EMPTY)"),
                       (6, "FQ_E_DECODE")):
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            fqt.decode_augment_files(bad_files[row:row + 1], idx[row:row + 1], ops=CHAIN)
        msg = str(e.value)
        assert f"sample index {200 + row} (batch row 0): file '{bad_files[row]}': " in msg and words in msg, msg
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"file .a\\x00b.: the path holds a NUL byte"):
        fqt.decode_augment_files(tf.constant([b"a\x00b"]), [0], ops=CHAIN)
    # the Pipeline over the same files reports the same reason for the same file
    pipe = fastq.Pipeline(fastq.sources.Files(bad_files[1:2], [0]), batch_size=1, ops=CHAIN)
    with pytest.raises(fastq.errors.ReadError, match="cannot open: No such file or directory"):
        next(iter(pipe))
    pipe.close()


def test_unreadable_files_skip_is_counted(bad_files, files, op_module):
    want = files_pipeline_rows(files[:8], CHAIN, seed=2, epoch=0)
    x, ok = fqt.decode_augment_files(bad_files, tf.range(8, dtype=tf.int64), ops=CHAIN, seed=2, on_error="skip")
    ok, x = ok.numpy(), x.numpy()
    assert ok.tolist() == [True, False, True, False, False, True, False, True]
    assert not x[~ok].any() and x[ok].tobytes() == want[ok].tobytes()


def test_urls_are_refused_naming_the_alternatives(files, op_module):
    """A URL is not a file: refused whatever on_error says, pointing at the readers that take URLs."""
    for url in ("s3://bucket/a.jpg", "gs://b/x/y.jpg", "http://127.0.0.1:9000/b/k.jpg", "abfs+x.y://c/d"):
        for on_error in ("raise", "skip"):
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                fqt.decode_augment_files(files[:1] + [url], [0, 1], ops=CHAIN, on_error=on_error)
            msg = str(e.value)
            assert f"paths[1] = '{url}' is a URL; this op reads local files only" in msg, msg
            assert "fastq.sources.Files" in msg and "docs/cloud.md" in msg
    # names that only look alike are paths (and fail as missing files, under on_error)
    for path in ("3s://x", "dir/s3://x", "a:/b", "s3:x"):
        x, ok = fqt.decode_augment_files([path], [0], ops=CHAIN, on_error="skip")
        assert ok.numpy().tolist() == [False]


# -- normalize on the accelerator ------------------------------------------------------

@pytest.mark.parametrize("dtype,layout,channels", [("float32", "NHWC", 3), ("float16", "NCHW", 3),
                                                   ("bfloat16", "NHWC", 3), ("float32", "NHWC", 1)])
def test_normalize_equals_pipeline_normalize(bufs, op_module, dtype, layout, channels):
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    geo = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]
    want = pipeline_rows(bufs, geo + [ops.Normalize(mean, std)], seed=1, epochs=(0,), dtype=dtype,
                         layout=layout, channels=channels)[0]
    u8 = fqt.decode_augment(tf.constant(bufs), tf.range(N, dtype=tf.int64), ops=geo, seed=1, layout=layout,
                            channels=channels)
    got = fqt.normalize(u8, mean, std, dtype=dtype, layout=layout)
    assert got.dtype.name == str(want.dtype) and got.shape == want.shape
    assert got.numpy().tobytes() == want.tobytes()
    if dtype == "float32" and channels == 3:
        layer = fqt.NormalizeLayer(mean, std)
        assert layer(u8).numpy().tobytes() == want.tobytes()
        # max_pixel_value=1: mean/std on the 0..255 scale, as Normalize takes them
        m255, s255 = tuple(m * 255 for m in mean), tuple(s * 255 for s in std)
        want255 = pipeline_rows(bufs, geo + [ops.Normalize(m255, s255, max_pixel_value=1.0)], seed=1,
                                epochs=(0,), dtype=dtype)[0]
        got255 = fqt.normalize(u8, m255, s255, max_pixel_value=1.0)
        assert got255.numpy().tobytes() == want255.tobytes()


def test_reachable_as_fastq_tf_ops():
    import fastq.tf
    assert fastq.tf.ops is fqt


# -- the ABI: exported table, cache, build errors, binding -----------------------------

def test_image_module_exports_the_capi_table():
    from fastq._native import _image
    lib = ctypes.CDLL(_image.__file__)
    head = (ctypes.c_uint32 * 6).in_dll(lib, "fastq_capi_v1")
    abi, size, op_size, err_size, fmt_size, max_ops = list(head)
    assert abi == 1 and op_size == ops.FQ_OP_DTYPE.itemsize == 136 and max_ops == ops.MAX_OPS
    # 9 functions of the image op, then (for fastq.tf.dataset) two sizes and 5 mix / pad functions,
    # then (for decode_augment_files) read_file and buf_free
    ptr = ctypes.sizeof(ctypes.c_void_p)
    assert size == 6 * 4 + 9 * ptr + 2 * 4 + 5 * ptr + 2 * ptr
    assert err_size > 512 and fmt_size >= 24
    out = subprocess.run(["nm", "-D", "--defined-only", _image.__file__], capture_output=True, text=True)
    if out.returncode == 0:  # binutils present: exactly PyInit__image and the table are exported
        names = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.strip())
        assert names == ["PyInit__image", "fastq_capi_v1"], names


def test_build_is_cached_per_tf_version(op_module):
    path = fqt.build()
    assert path == fqt.library_path()
    assert os.path.basename(os.path.dirname(path)).startswith(f"tf{tf.__version__}-")
    assert os.path.dirname(os.path.dirname(path)) == fqt.cache_dir()
    mtime = os.stat(path).st_mtime_ns
    assert fqt.build() == path and os.stat(path).st_mtime_ns == mtime  # no rebuild


def test_no_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++ / c++ / clang++ here
    monkeypatch.setenv("CXX", "no-such-compiler-fastq")
    with pytest.raises(fqt.KernelBuildError, match=f"TensorFlow {tf.__version__}: no C\\+\\+ compiler"):
        fqt.build()


def test_library_loaded_without_binding_says_how_to_fix(op_module):
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {ROOT!r})
        import tensorflow as tf, fastq.ops as ops
        mod = tf.load_op_library({fqt.library_path()!r})   # no fastq.tf.ops.load(): the C API is not bound
        packed = ops.compile_ops([ops.CenterCrop(8)], dtype="uint8").packed_ops.tobytes()
        try:
            mod.fastq_decode_augment(tf.constant([b"x"]), tf.constant([0], tf.int64), 0, ops=packed, seed=0,
                                     out_size=[8, 8])
        except tf.errors.FailedPreconditionError as e:
            print("ERR", e.message)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "ERR" in r.stdout and "fastq.tf.ops.load()" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_build_py_ships_the_kernel_sources(tmp_path):
    pytest.importorskip("Cython", reason="setup.py needs Cython (a development install); the wheel test "
                                         "(tests/wheel/test_wheel.py) checks the same files in the built wheel")
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    top = tmp_path / "fastq" / "_tf_kernel"
    shipped = sorted(str(p.relative_to(top)) for p in top.rglob("*") if p.is_file())
    assert shipped == ["core/fq_common.h", "core/fq_stage_times.h", "image/fq_batch_mix.h", "image/fq_batch_pad.h",
                       "image/fq_capi.h", "image/fq_image.h", "ring/fq_ring.h", "ring/fq_ring_capi.h",
                       "tf/fq_tf_dataset.cc", "tf/fq_tf_dataset.h", "tf/fq_tf_feed.cc", "tf/fq_tf_feed.h",
                       "tf/fq_tf_kernel.cc"]


def test_fuzzed_inputs_match_the_c_core_sample_by_sample(op_module):
    """Differential fuzzing of the kernel's input handling: a batch of mutated JPEG/PNG/WebP
    files (tests/helpers/fuzz_corpus.py) with on_error="skip"; each row must be what the C core
    gives for that sample alone (fastq._native._image.ImageSpec.process_encoded): the same pixels
    when it succeeds, ok=False and a zero row when it fails; and with on_error="raise" the
    error names the first failing sample's index."""
    from helpers import fuzz_corpus
    from fastq._native import _image
    from fastq.errors import FastqError
    corpus = [data for _, data in fuzz_corpus.mutants(seed=1, per_seed=6)]
    chain = fuzz_corpus.OPS
    spec = _image.ImageSpec(ops.compile_ops(chain, dtype="uint8"))
    want_ok, want = [], []
    for i, data in enumerate(corpus):
        try:
            want.append(spec.process_encoded(data, 3, 1, 1000 + i)[0])
            want_ok.append(True)
        except FastqError:
            want.append(None)
            want_ok.append(False)
    assert 0 < sum(want_ok) < len(corpus)  # the corpus has both kinds
    idx = tf.range(1000, 1000 + len(corpus), dtype=tf.int64)
    x, ok = fqt.decode_augment(tf.constant(corpus), idx, ops=chain, seed=3, epoch=1, on_error="skip",
                               num_threads=3)
    x, ok = x.numpy(), ok.numpy()
    assert ok.tolist() == want_ok
    for i, w in enumerate(want):
        if w is None:
            assert not x[i].any()
        else:
            assert x[i].tobytes() == w.tobytes(), f"sample {i}"
    first_bad = want_ok.index(False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"sample index {1000 + first_bad} "):
        fqt.decode_augment(tf.constant(corpus), idx, ops=chain, seed=3, epoch=1)
