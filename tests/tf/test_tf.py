"""fastq.tf: zero-copy tf.data datasets over a Pipeline, lifetime of slots under
TensorFlow, errors, misuse, DLPack.

Zero-copy is proven by addresses: the buffer of the tensor TensorFlow hands to
user code (read through DLPack, through numpy, or - inside a graph - by a
downstream tf.numpy_function that receives the tensor's memory) must be the
address of a slot block of the pipeline's ring.
"""
import ctypes
import os
import shutil
import time

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
import fastq.tf as fqtf  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from helpers.native_helpers import slot_addresses  # noqa: E402

pytestmark = pytest.mark.tf

N = 24       # images
B = 4        # batch size
SIZE = 32    # output side


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    return testdata.make_jpeg_dataset(str(d), N, seed=1, min_side=64, max_side=128)


def make(paths, *, queue_size=4, batch_size=B, **kw):
    kw.setdefault("workers", 1)
    kw.setdefault("stall_timeout", 10.0)
    return fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=batch_size,
                          queue_size=queue_size, ops=[fastq.ops.RandomResizedCrop(SIZE), fastq.ops.HorizontalFlip()],
                          return_index=True, **kw)




_GetPtr = ctypes.pythonapi.PyCapsule_GetPointer
_GetPtr.restype = ctypes.c_void_p
_GetPtr.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_address(t):
    """Data pointer of an eager tensor, read from its DLPack export (DLTensor.data
    is the first field of DLManagedTensor; byte_offset is 0 for TF)."""
    cap = tf.experimental.dlpack.to_dlpack(t)
    ptr = _GetPtr(cap, b"dltensor")
    return ctypes.cast(ptr, ctypes.POINTER(ctypes.c_void_p))[0]


def leased(p):
    fqtf.flush_released()
    return p.stats()["slots_leased"]


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


# -- element spec, epochs -------------------------------------------------------

def test_element_spec_static_batch_and_dtypes(jpegs):
    p = make(jpegs)
    ds = fqtf.dataset(p)
    spec = ds.element_spec
    assert spec == (tf.TensorSpec((B, SIZE, SIZE, 3), tf.float32), tf.TensorSpec((B,), tf.int64),
                    tf.TensorSpec((B,), tf.int64))
    q = make(jpegs[:10], drop_remainder=False)
    assert fqtf.dataset(q).element_spec[0].shape.as_list() == [None, SIZE, SIZE, 3]
    shapes = [int(x.shape[0]) for x, _, _ in fqtf.dataset(q)]
    assert shapes == [4, 4, 2]
    p.close()
    q.close()


def test_each_dataset_iteration_is_one_pipeline_epoch(jpegs):
    p = make(jpegs[:12], shuffle=True, seed=3)
    ds = fqtf.dataset(p)
    epochs = []
    for _ in range(2):
        idx = [int(i) for _, _, ix in ds for i in ix.numpy()]
        assert sorted(idx) == list(range(12))
        epochs.append(idx)
    assert p.epoch == 2
    # the same order a direct Python loop over the pipeline gives
    q = make(jpegs[:12], shuffle=True, seed=3)
    assert [[int(i) for _, _, ix in q for i in ix] for _ in range(2)] == epochs
    # the values are the pipeline's (same seed, same epoch)
    r = make(jpegs[:12], shuffle=True, seed=3)
    direct = [x.copy() for x, _, _ in r]
    via_tf = [x.numpy() for x, _, _ in fqtf.dataset(make(jpegs[:12], shuffle=True, seed=3))]
    for a, b in zip(direct, via_tf):
        np.testing.assert_array_equal(a, b)
    for pp in (p, q, r):
        pp.close()


def test_repeat_runs_successive_epochs(jpegs):
    p = make(jpegs[:8])
    n = sum(1 for _ in fqtf.dataset(p).repeat(3))
    assert n == 3 * 2 and p.epoch == 3
    p.close()


# -- zero copy --------------------------------------------------------------------

def test_eager_tensors_alias_the_slots(jpegs):
    p = make(jpegs)
    for x, lab, idx in fqtf.dataset(p):
        for block, t in enumerate((x, lab, idx)):
            addr = dlpack_address(t)
            assert addr in slot_addresses(p, block)
            assert np.asarray(t).ctypes.data == addr
    p.close()


def test_eager_tensors_alias_the_slots_with_batch_padding(jpegs):
    # pad="batch": the images are repacked in place to the batch's size, still in the slot
    p = fastq.Pipeline(fastq.sources.Files(jpegs), batch_size=B, workers=1, stall_timeout=10.0, pad="batch",
                       pad_multiple=8, ops=[fastq.ops.ResizeShortestEdge([24, 40], max_size=64),
                                            fastq.ops.HorizontalFlip()])
    shapes = set()
    for x, sizes in fqtf.dataset(p):
        assert dlpack_address(x) in slot_addresses(p, 0) and dlpack_address(sizes) in slot_addresses(p, 1)
        assert np.asarray(x).ctypes.data == dlpack_address(x)
        shapes.add(tuple(x.shape))
    assert len(shapes) > 1
    p.close()


def test_tensors_inside_tf_function_alias_the_slots(jpegs):
    p = make(jpegs)
    ds = fqtf.dataset(p)

    def addr(a):
        return np.int64(a.ctypes.data)

    @tf.function
    def addresses(ds):
        out = tf.TensorArray(tf.int64, size=0, dynamic_size=True)
        i = 0
        for x, lab, _ in ds:
            out = out.write(i, tf.stack([tf.numpy_function(addr, [x], tf.int64),
                                         tf.numpy_function(addr, [lab], tf.int64)]))
            i += 1
        return out.stack()

    got = addresses(ds).numpy()
    assert got.shape == (N // B, 2)
    assert set(got[:, 0].tolist()) <= slot_addresses(p, 0)
    assert set(got[:, 1].tolist()) <= slot_addresses(p, 1)
    assert leased(p) == 0
    p.close()


def test_map_and_prefetch_keep_aliasing(jpegs):
    # element-wise identity-like ops downstream (reshape) forward the same buffer
    p = make(jpegs)
    ds = fqtf.dataset(p).map(lambda x, y, i: (tf.reshape(x, (B, -1)), y)).prefetch(1)
    for x, _ in ds:
        assert dlpack_address(x) in slot_addresses(p, 0)
    p.close()


# -- lifetime -----------------------------------------------------------------------

def test_slot_is_leased_while_a_tensor_holds_it(jpegs):
    p = make(jpegs, queue_size=4)
    it = iter(fqtf.dataset(p))
    x, lab, idx = next(it)
    assert leased(p) == 1                       # no read-ahead by the feeder
    y = x[0]                                    # a slice: TF may share or copy; keeps x's buffer alive
    del lab, idx
    assert leased(p) == 1
    del x
    x2 = next(it)
    assert leased(p) >= 1
    del x2, y
    assert wait_for(lambda: leased(p) == 0)
    del it
    assert leased(p) == 0
    p.close()


def test_prefetch_buffers_hold_slots_and_are_released_with_the_iterator(jpegs):
    p = make(jpegs, queue_size=5)
    it = iter(fqtf.dataset(p).prefetch(2))
    x = next(it)
    assert wait_for(lambda: leased(p) == 3)     # 1 held by us + 2 in the prefetch buffer
    del x
    assert wait_for(lambda: leased(p) == 2)
    del it                                      # abandoned mid-epoch
    assert wait_for(lambda: leased(p) == 0)
    # the abandoned epoch's producers are stopped and the next epoch is whole
    idx = [int(i) for _, _, ix in fqtf.dataset(p) for i in ix.numpy()]
    assert idx == list(range(N))
    p.close()


@pytest.mark.parametrize("queue_size,prefetch", [(2, 0), (2, 1)])
def test_graph_consumer_frees_slots_without_eager_help(jpegs, queue_size, prefetch):
    # A tf.function loop frees tensors without the GIL: TF queues the numpy decref.
    # With a ring this small, the epoch only completes if fastq drains that queue.
    p = make(jpegs, queue_size=queue_size, stall_timeout=10.0)
    ds = fqtf.dataset(p)
    if prefetch:
        ds = ds.prefetch(prefetch)

    @tf.function
    def run(ds):
        n = tf.constant(0, tf.int64)
        s = tf.constant(0.0)
        for x, _, idx in ds:
            n += tf.reduce_sum(idx) * 0 + 1
            s += tf.reduce_sum(x)
        return n

    assert int(run(ds)) == N // B
    assert leased(p) == 0
    p.close()


def test_slot_freed_while_the_prefetch_thread_waits_is_drained(jpegs):
    # The loop frees batch i-1 only after it has taken batch i, so the prefetch
    # thread is already waiting in the feeder when that slot's decref is queued:
    # only the feeder's helper thread can hand the slot back (without it this
    # stalls).
    p = make(jpegs, queue_size=2, stall_timeout=10.0)
    ds = fqtf.dataset(p).prefetch(1)
    m0 = tf.ones((256, 256))

    @tf.function
    def run(ds):
        s = tf.constant(0.0)
        prev = tf.zeros((B, SIZE, SIZE, 3))
        for x, _, _ in ds:
            m = m0 * tf.reduce_sum(prev * x[:1, :1, :1, :1])
            for _ in range(10):
                m = tf.matmul(m, m0) / 256.0
            s += tf.reduce_sum(m)
            prev = x
        return s

    run(ds)
    assert p.stats()["batches_delivered"] == N // B
    assert wait_for(lambda: leased(p) == 0)
    p.close()


def test_keras_fit_and_evaluate(jpegs):
    p = make(jpegs, queue_size=3)
    ds = fqtf.dataset(p).map(lambda x, y, i: (x, y % 3))
    model = tf.keras.Sequential([tf.keras.Input((SIZE, SIZE, 3)), tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(3)])
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    assert len(hist.history["loss"]) == 2 and all(np.isfinite(hist.history["loss"]))
    model.evaluate(ds, verbose=0)
    assert p.epoch == 3
    assert p.stats()["batches_delivered"] == 3 * (N // B)
    assert wait_for(lambda: leased(p) == 0)
    p.close()


def test_custom_training_loop_in_tf_function(jpegs):
    p = make(jpegs, queue_size=2)
    ds = fqtf.dataset(p)
    w = tf.Variable(tf.zeros((3, 3)))
    opt = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def train_epoch(ds):
        steps = tf.constant(0)
        for x, y, _ in ds:
            with tf.GradientTape() as tape:
                feats = tf.reduce_mean(x, axis=[1, 2])
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y % 3, feats @ w))
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            steps += 1
        return steps

    assert int(train_epoch(ds)) == N // B
    assert int(train_epoch(ds)) == N // B
    assert p.epoch == 2
    p.close()


# -- errors and misuse ------------------------------------------------------------------

def test_corrupt_file_surfaces_with_its_path_and_next_epoch_works(jpegs, tmp_path):
    paths = list(jpegs[:12])
    bad = str(tmp_path / "broken.jpg")
    with open(bad, "wb") as f:
        f.write(os.urandom(3000))
    paths[9] = bad
    p = make(paths, queue_size=2, on_error="raise")
    ds = fqtf.dataset(p)
    got = []
    with pytest.raises(tf.errors.OpError) as ei:
        for _, _, idx in ds:
            got += idx.numpy().tolist()
    assert bad in str(ei.value.message)
    assert "DecodeError" in str(ei.value.message)
    assert got == list(range(8))                 # the batches before the broken one
    del _, idx                                   # the loop variables held the last good batch
    assert wait_for(lambda: leased(p) == 0)
    shutil.copy(jpegs[20], bad)                  # fix the file: the next epoch is complete
    assert [int(i) for _, _, ix in ds for i in ix.numpy()] == list(range(12))
    assert leased(p) == 0
    p.close()


def test_two_iterations_at_once_are_refused_not_interleaved(jpegs):
    p = make(jpegs[:16])
    ds1, ds2 = fqtf.dataset(p), fqtf.dataset(p)
    it1 = iter(ds1)
    first = next(it1)[2].numpy().tolist()
    it2 = iter(ds2)
    with pytest.raises(tf.errors.OpError, match="ConcurrentIterationError"):
        next(it2)
    it3 = iter(ds1)                              # the same dataset twice: refused too
    with pytest.raises(tf.errors.OpError, match="already being read"):
        next(it3)
    rest = [i for _, _, ix in it1 for i in ix.numpy().tolist()]
    assert first + rest == list(range(16))       # it1 saw its whole epoch, in order
    del it1, it2, it3
    assert sorted(i for _, _, ix in ds2 for i in ix.numpy().tolist()) == list(range(16))
    # an abandoned (deleted) iterator does not block the next one
    it = iter(ds1)
    next(it)
    del it
    assert sum(1 for _ in ds2) == 4
    p.close()


def test_direct_iteration_supersedes_a_tf_iterator_with_an_error(jpegs):
    p = make(jpegs[:16])
    it = iter(fqtf.dataset(p))
    next(it)
    direct = [int(i) for _, _, ix in p for i in ix]    # a new epoch, read directly
    assert direct == list(range(16))
    with pytest.raises(tf.errors.OpError, match="Superseded"):
        for _ in it:
            pass
    p.close()


def test_gpu_device_without_a_gpu_is_a_clear_error(jpegs):
    p = make(jpegs[:8])
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU is visible")
    with pytest.raises(ValueError, match="sees no GPU"):
        fqtf.dataset(p, device="/gpu:0")
    ds = fqtf.dataset(p, device="/cpu:0")        # a no-op
    assert sum(1 for _ in ds) == 2
    p.close()


def test_closed_pipeline_and_wrong_type(jpegs):
    p = make(jpegs[:8])
    p.close()
    with pytest.raises(fastq.errors.PipelineClosedError):
        fqtf.dataset(p)
    with pytest.raises(TypeError):
        fqtf.dataset([1, 2, 3])


def test_iterable_source(jpegs):
    samples = [(np.full((2, 3), i, np.float32), np.int32(i)) for i in range(10)]
    p = fastq.Pipeline(samples, batch_size=5)
    ds = fqtf.dataset(p)
    assert ds.element_spec == (tf.TensorSpec((5, 2, 3), tf.float32), tf.TensorSpec((5,), tf.int32))
    out = [(x.numpy(), y.numpy()) for x, y in ds]
    assert [y.tolist() for _, y in out] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    for x, y in out:
        assert (x == y[:, None, None]).all()
    p.close()


# -- DLPack ------------------------------------------------------------------------------

def test_dlpack_views_alias_and_hold_the_lease(jpegs):
    p = make(jpegs[:8])
    it = iter(p)
    x, lab, idx = next(it)
    ax, alab = x.ctypes.data, lab.ctypes.data
    assert ax in slot_addresses(p, 0) and alab in slot_addresses(p, 1)
    tx = fqtf.from_dlpack(x)
    tlab = tf.experimental.dlpack.from_dlpack(lab.__dlpack__())
    assert dlpack_address(tx) == ax and dlpack_address(tlab) == alab
    np.testing.assert_array_equal(tx.numpy(), x)
    assert x.__dlpack_device__() == (1, 0)        # kDLCPU
    nx = np.from_dlpack(x)                       # numpy's own DLPack import shares too
    assert nx.ctypes.data == ax
    del x, lab, idx
    assert p.stats()["slots_leased"] == 1        # the tensors and nx still hold the slot
    del nx, tlab
    assert p.stats()["slots_leased"] == 1
    del tx
    assert p.stats()["slots_leased"] == 0
    # an unconsumed capsule holds the lease too, until it is dropped
    x2, _, _ = next(it)
    cap = x2.__dlpack__()
    del x2, _
    assert p.stats()["slots_leased"] == 1
    del cap
    assert p.stats()["slots_leased"] == 0
    it.close()
    p.close()


# -- structure="features_labels" ---------------------------------------------------

def test_features_labels_structure_names_the_outputs_and_keeps_aliasing(jpegs):
    from fastq.targets import Targets
    boxes = [np.float32([[2, 3, 40, 50], [10, 10, 20, 20]])] * len(jpegs)
    p = fastq.Pipeline(fastq.sources.Files(jpegs, list(range(len(jpegs))),
                                           targets=Targets(boxes, [[1, 2]] * len(jpegs), max_boxes=3)),
                       batch_size=B, ops=[fastq.ops.Resize((SIZE, SIZE))], dtype="uint8", workers=1)
    assert p.output_names == ["images", "labels", "boxes", "classes", "num_boxes", "image_info"]
    flat = [[np.array(t) for t in b] for b in fqtf.dataset(p)]
    ds = fqtf.dataset(p, structure="features_labels")
    spec = ds.element_spec
    assert spec[0].shape == (B, SIZE, SIZE, 3) and sorted(spec[1]) == ["boxes", "classes", "image_info", "labels",
                                                                       "num_boxes"]
    for (x, y), ref in zip(ds, flat):
        assert dlpack_address(x) in slot_addresses(p, 0)  # the map moves no data
        assert dlpack_address(y["boxes"]) in slot_addresses(p, 2)
        np.testing.assert_array_equal(x.numpy(), ref[0])
        for k, name in enumerate(p.output_names[1:], 1):
            np.testing.assert_array_equal(y[name].numpy(), ref[k])
    del x, y
    kept = list(ds.cache())  # cache() copies out of the slots first (nested elements)
    assert len(kept) == len(flat) and leased(p) == 0  # the kept elements hold no slot
    p.close()
    with pytest.raises(ValueError, match="structure must be"):
        fqtf.dataset(make(jpegs[:8]), structure="dict")
    with pytest.raises(ValueError, match="needs a native image source"):
        fqtf.dataset(fastq.Pipeline([(np.zeros(2), 1)] * 4, batch_size=2), structure="features_labels")
