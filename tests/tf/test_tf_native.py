"""fastq.tf.dataset's native feed: the FastqDataset op (csrc/tf/fq_tf_dataset.cc).

What is checked against what:
* values: a Python loop over an identically built Pipeline (the Python consumer path, the
  same C producers) - bit for bit, for 1 and 2 workers, with mix= and pad="batch", and
  across tf.train.Checkpoint save / restore in the middle of an epoch;
* zero copy: the tensors' data pointers (DLPack) against the ring's slot addresses
  (fastq._native._testing, the test-only module);
* "no Python per batch": the kernel's calls into Python are counted (one begin and one end
  per epoch), the dataset graph has no PyFunc node, and the iteration progresses while
  another thread holds the GIL (the from_generator feed, as a control, does not);
* lifetime: slots are read from the ring's own counters, without draining anything.
"""
import ctypes
import gc
import os
import resource
import shutil
import threading
import time

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
import fastq.tf as fqtf  # noqa: E402
from fastq.tf import _native as _tf_native  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from helpers.native_helpers import slot_addresses  # noqa: E402

pytestmark = pytest.mark.tf

N = 24
B = 4
SIZE = 32


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    return testdata.make_jpeg_dataset(str(d), N, seed=1, min_side=64, max_side=128)


@pytest.fixture(scope="module", autouse=True)
def native_available():
    try:
        _tf_native.library()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"fastq's TensorFlow kernel must build here (g++ and TF's headers are installed): {e}")


def make(paths, *, queue_size=4, batch_size=B, workers=1, **kw):
    kw.setdefault("stall_timeout", 10.0)
    kw.setdefault("ops", [fastq.ops.RandomResizedCrop(SIZE), fastq.ops.HorizontalFlip()])
    return fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=batch_size,
                          queue_size=queue_size, workers=workers, return_index=True, **kw)


_GetPtr = ctypes.pythonapi.PyCapsule_GetPointer
_GetPtr.restype = ctypes.c_void_p
_GetPtr.argtypes = [ctypes.py_object, ctypes.c_char_p]


def address(t):
    cap = tf.experimental.dlpack.to_dlpack(t)
    return ctypes.cast(_GetPtr(cap, b"dltensor"), ctypes.POINTER(ctypes.c_void_p))[0]


def leased(p):
    return p.stats()["slots_leased"]  # no flush_released(): the native feed needs no GIL to release


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def direct(p, epochs=1):
    """The Python consumer's batches (copies), epoch after epoch."""
    return [[tuple(np.array(a) for a in b) for b in p] for _ in range(epochs)]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def graph_ops(ds):
    """Every op type in the dataset's serialized graph, functions (map, flat_map...) included."""
    g = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
    return {n.op for n in g.node} | {n.op for f in g.library.function for n in f.node_def}


def numpy_batches(ds_or_it):
    return [tuple(t.numpy() for t in b) for b in ds_or_it]


# -- which feed, graph -------------------------------------------------------------------

def test_native_op_is_used_and_its_graph_has_no_python(jpegs):
    p = make(jpegs)
    ds = fqtf.dataset(p)
    assert p.stats()["tf_feed"] == {"feed": "native", "op": "FastqDataset"}
    ops_in_graph = graph_ops(ds.map(lambda x, y, i: (x, y)))
    assert "FastqDataset" in ops_in_graph
    assert not ops_in_graph & {"PyFunc", "EagerPyFunc", "PyFuncStateless", "GeneratorDataset"}, ops_in_graph
    assert int(ds.cardinality()) == N // B and len(ds) == N // B
    # the control: the from_generator feed has the Python callback node the check looks for
    q = make(jpegs)
    gen = fqtf.dataset(q, native=False)
    assert q.stats()["tf_feed"] == {"feed": "from_generator", "reason": "native=False"}
    nodes = graph_ops(gen)
    assert nodes & {"PyFunc", "EagerPyFunc", "GeneratorDataset"}, nodes
    p.close()
    q.close()


def test_python_runs_once_per_epoch_not_per_batch(jpegs, monkeypatch):
    calls = {"begin": 0, "end": 0, "fail": 0}
    for name in calls:
        real = getattr(_tf_native, f"_{name}")

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)

        # the installed ctypes callbacks call the module functions by name
        monkeypatch.setattr(_tf_native, f"_{name}", counted)
    p = make(jpegs)
    ds = fqtf.dataset(p).repeat(3)

    @tf.function
    def count(ds):
        n = tf.constant(0)
        for x, _, _ in ds:
            n += tf.shape(x)[0]
        return n

    assert int(count(ds)) == 3 * N
    assert calls == {"begin": 3, "end": 3, "fail": 0}
    p.close()


def test_batches_arrive_while_another_thread_holds_the_gil(jpegs):
    """The iterator takes batches while the GIL is held elsewhere (a PyDLL call keeps it);
    the from_generator feed, whose callback needs the GIL per batch, cannot."""
    hold = ctypes.PyDLL(None).usleep  # a C call that does not release the GIL
    hold.argtypes = [ctypes.c_uint]

    m0 = tf.ones((384, 384)) / 384.0

    @tf.function
    def take(it, k):
        s = tf.constant(0.0)
        for _ in tf.range(k):
            x, _, _ = next(it)
            m = m0 * tf.reduce_mean(x)
            for _ in range(8):  # a few ms of graph work per batch, so the loop spans the hold
                m = tf.matmul(m, m0)
            s += tf.reduce_sum(m)
        return s

    during = {}
    for native in (True, False):
        # 120 batches; workers at normal priority, so the graph work below does not starve them
        p = make(list(jpegs) * 20, queue_size=6, worker_priority="normal")
        it = iter(fqtf.dataset(p, native=native))
        take(it, tf.constant(1))  # traces; the epoch has begun
        t = threading.Thread(target=take, args=(it, tf.constant(110)))
        t.start()
        assert wait_for(lambda: p.stats()["batches_delivered"] >= 3)  # the thread is in TensorFlow's C++ now
        before = p.stats()["batches_delivered"]
        hold(1_000_000)      # 1 s with the GIL held by this thread
        during[native] = p.stats()["batches_delivered"] - before  # before the thread runs Python again
        t.join()
        del it
        p.close()
    assert during[True] >= 5, during
    assert during[False] <= 1, during  # the control: that feed waits for the GIL


# -- values --------------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_bit_identical_to_the_python_consumer(jpegs, workers):
    kw = dict(shuffle=True, seed=5, workers=workers,
              ops=[fastq.ops.RandomResizedCrop(SIZE), fastq.ops.HorizontalFlip(),
                   fastq.ops.Normalize(fastq.ops.IMAGENET_MEAN, fastq.ops.IMAGENET_STD)])
    want = direct(make(jpegs, **kw), epochs=2)
    p = make(jpegs, **kw)
    ds = fqtf.dataset(p)
    got = [numpy_batches(ds) for _ in range(2)]
    for g, w in zip(got, want):
        assert_same(g, w)
    assert p.epoch == 2
    p.close()


def test_mix_is_applied_natively_and_equals_the_python_consumer(jpegs):
    mix = fastq.MixUpCutMix(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=N, seed=3)
    kw = dict(mix=mix, shuffle=True, seed=2)
    want = direct(make(jpegs, **kw), epochs=2)
    p = make(jpegs, **kw)
    ds = fqtf.dataset(p)
    assert p.stats()["tf_feed"]["feed"] == "native"
    assert ds.element_spec[1] == tf.TensorSpec((B, N), tf.float32)
    got = [numpy_batches(ds) for _ in range(2)]
    for g, w in zip(got, want):
        assert_same(g, w)
    for x, y, _ in ds:  # the soft labels are in the slot too (the ring's extra block)
        assert address(x) in slot_addresses(p, 0) and address(y) in slot_addresses(p, 3)
    p.close()


def test_mix_label_out_of_range_names_the_sample(jpegs):
    mix = fastq.MixUpCutMix(mixup_alpha=1.0, num_classes=10)  # labels go up to N - 1
    p = make(jpegs, mix=mix)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"MixUpCutMix: label 1\d of sample 1\d"):
        for batch in fqtf.dataset(p):
            pass
    del batch  # the last good batch
    assert wait_for(lambda: leased(p) == 0)
    p.close()


def test_batch_padding_is_repacked_natively_and_equals_the_python_consumer(jpegs):
    kw = dict(pad="batch", pad_multiple=8, ops=[fastq.ops.ResizeShortestEdge([24, 40], max_size=64),
                                                 fastq.ops.HorizontalFlip()])
    want = direct(make(jpegs, **kw))[0]
    p = make(jpegs, **kw)
    got = numpy_batches(fqtf.dataset(p))
    assert_same(got, want)
    assert len({b[0].shape for b in got}) > 1
    p.close()


# -- zero copy, lifetime -----------------------------------------------------------------

def test_tensors_alias_slots_and_each_slot_returns_when_its_last_tensor_dies(jpegs):
    p = make(jpegs, queue_size=4)
    it = iter(fqtf.dataset(p))
    x, lab, idx = next(it)
    for block, t in enumerate((x, lab, idx)):
        assert address(t) in slot_addresses(p, block)
    del t
    assert leased(p) == 1           # the feed reads no batch ahead
    del lab, idx
    assert leased(p) == 1           # x still views the slot
    view = tf.reshape(x, (-1,))     # shares x's buffer
    del x
    assert leased(p) == 1
    del view
    assert leased(p) == 0           # at once: no GIL, no drain
    batches = [next(it) for _ in range(3)]
    assert leased(p) == 3
    del batches
    assert leased(p) == 0
    del it
    p.close()


def test_prefetch_buffers_and_an_abandoned_iterator_hold_then_release_slots(jpegs):
    p = make(jpegs, queue_size=5)
    it = iter(fqtf.dataset(p).prefetch(2))
    x = next(it)
    assert wait_for(lambda: leased(p) == 3)   # ours + 2 in the prefetch buffer
    del x
    assert wait_for(lambda: leased(p) == 2)
    del it                                    # abandoned mid-epoch: buffered tensors die, producers stop
    assert wait_for(lambda: leased(p) == 0)
    assert wait_for(lambda: p._state.producers is None)  # the end callback stopped them
    idx = [int(i) for _, _, ix in fqtf.dataset(p) for i in ix.numpy()]
    assert idx == list(range(N))             # the next epoch is whole
    p.close()


def test_tensor_outliving_the_pipeline_keeps_the_arena(jpegs):
    p = make(jpegs)
    x, _, _ = next(iter(fqtf.dataset(p)))
    want = x.numpy().copy()
    p.close()
    del p
    gc.collect()
    filler = [np.full(1 << 16, 7, np.uint8) for _ in range(64)]  # reuse freed memory if it were freed
    np.testing.assert_array_equal(x.numpy(), want)
    del filler, x


# -- checkpoints ---------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_checkpoint_restores_the_position_exactly(jpegs, tmp_path, workers):
    kw = dict(shuffle=True, seed=9, workers=workers)
    want = direct(make(jpegs, **kw), epochs=2)
    p = make(jpegs, **kw)
    ds = fqtf.dataset(p)
    it = iter(ds)
    first = [tuple(t.numpy() for t in next(it)) for _ in range(2)]
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "ck"))
    rest = numpy_batches(it)
    assert_same(first + rest, want[0])
    # restore into the same iterator: the same batches again
    ckpt.restore(path)
    assert_same(numpy_batches(it), want[0][2:])
    # into a fresh pipeline, dataset and iterator (as a new process would): the same, and the
    # pipeline then goes on with the next epoch
    q = make(jpegs, **kw)
    ds2 = fqtf.dataset(q)
    it2 = iter(ds2)
    tf.train.Checkpoint(iterator=it2).restore(path)
    assert_same(numpy_batches(it2), want[0][2:])
    assert q.epoch == 1 and q.state_dict()["position"] == 0
    assert_same(numpy_batches(ds2), want[1])
    for pp in (p, q):
        pp.close()


def test_checkpoint_inside_repeat_and_state_dict_while_tf_reads(jpegs, tmp_path):
    want = direct(make(jpegs, shuffle=True, seed=1), epochs=2)
    p = make(jpegs, shuffle=True, seed=1)
    it = iter(fqtf.dataset(p).repeat(2))
    n = N // B
    head = [tuple(t.numpy() for t in next(it)) for _ in range(n + 1)]  # epoch 0 and one batch of epoch 1
    assert p.state_dict()["epoch"] == 1 and p.state_dict()["position"] == 1  # the kernel's position
    path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ck"))
    tail = numpy_batches(it)
    assert_same(head + tail, want[0] + want[1])
    q = make(jpegs, shuffle=True, seed=1)
    it2 = iter(fqtf.dataset(q).repeat(2))
    tf.train.Checkpoint(iterator=it2).restore(path)
    assert_same(numpy_batches(it2), want[1][1:])
    p.close()
    q.close()


# -- errors -------------------------------------------------------------------------------------

def test_corrupt_sample_raise_names_it_and_skip_counts_it(jpegs, tmp_path):
    paths = list(jpegs[:12])
    bad = str(tmp_path / "broken.jpg")
    with open(bad, "wb") as f:
        f.write(os.urandom(3000))
    paths[6] = bad
    p = make(paths, on_error="raise")
    got = []
    with pytest.raises(tf.errors.InvalidArgumentError) as ei:
        for _, _, idx in fqtf.dataset(p):
            got += idx.numpy().tolist()
    assert bad in ei.value.message and "DecodeError" in ei.value.message and "sample 6" in ei.value.message
    assert got == list(range(4))
    del _, idx  # the loop variables hold the last good batch
    assert wait_for(lambda: leased(p) == 0)
    p.close()
    q = make(paths, on_error="skip")
    idx = [i for _, _, ix in fqtf.dataset(q) for i in ix.numpy().tolist()]
    assert len(idx) == 12 and 6 not in idx
    assert q.stats()["skipped"] == 1
    q.close()


def test_closing_the_pipeline_while_tf_iterates_ends_the_iteration(jpegs):
    p = make(list(jpegs) * 4, queue_size=2)
    seen = []

    def consume():
        for x, _, _ in fqtf.dataset(p):
            seen.append(int(x.shape[0]))
            time.sleep(0.05)

    t = threading.Thread(target=consume)
    t.start()
    assert wait_for(lambda: len(seen) >= 2)
    p.close()
    t.join(20)
    assert not t.is_alive()
    assert 2 <= len(seen) < 4 * N // B


def test_stall_is_a_tf_error_not_a_hang(jpegs):
    p = make(jpegs, queue_size=2, stall_timeout=0.5)
    it = iter(fqtf.dataset(p))
    held = [next(it), next(it)]  # every slot
    with pytest.raises(tf.errors.OpError, match="StalledError: fastq consumer stalled"):
        next(it)
    del held, it
    p.close()


def test_fallback_when_the_kernel_cannot_be_built(jpegs, monkeypatch, caplog):
    from fastq.tf import ops as tf_ops

    def no_kernel():
        raise tf_ops.KernelBuildError("no C++ compiler found (test)")

    monkeypatch.setattr(_tf_native, "library", no_kernel)
    monkeypatch.setattr("fastq.tf._dataset._LOGGED_REASONS", set())
    p = make(jpegs)
    with caplog.at_level("WARNING", logger="fastq.tf"):
        ds = fqtf.dataset(p)
        fqtf.dataset(p)
    assert p.stats()["tf_feed"] == {"feed": "from_generator",
                                    "reason": "KernelBuildError: no C++ compiler found (test)"}
    assert sum("from_generator" in r.getMessage() for r in caplog.records) == 1  # said once
    assert len(numpy_batches(ds)) == N // B
    with pytest.raises(tf_ops.KernelBuildError):
        fqtf.dataset(p, native=True)
    p.close()


def test_python_iterable_source_runs_natively(jpegs):
    samples = [(np.full((2, 3), i, np.float32), np.int32(i)) for i in range(10)]
    p = fastq.Pipeline(samples, batch_size=5)
    ds = fqtf.dataset(p)
    assert p.stats()["tf_feed"]["feed"] == "native"
    out = [(x.numpy(), y.numpy()) for x, y in ds]
    assert [y.tolist() for _, y in out] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    p.close()


# -- soak -----------------------------------------------------------------------------------

def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_soak_100_datasets_partly_iterated_and_dropped(jpegs):
    shared = make(jpegs, queue_size=3)

    def cycle(i):
        p = make(jpegs, queue_size=3) if i % 2 else shared
        ds = fqtf.dataset(p)
        it = iter(ds)
        for _ in range(1 + i % 3):
            next(it)
        del it, ds
        assert wait_for(lambda: leased(p) == 0), i
        if p is not shared:
            p.close()

    for i in range(10):  # warm-up: TF's thread pools, allocator arenas
        cycle(i)
    gc.collect()
    rss0, threads0 = _rss_mb(), _threads()
    for i in range(100):
        cycle(i)
    gc.collect()
    assert wait_for(lambda: _threads() <= threads0 + 2), (threads0, _threads())
    assert _rss_mb() - rss0 < 40, (rss0, _rss_mb())  # one arena here is ~1 MB; a leak per cycle would show
    assert leased(shared) == 0 and len(_tf_native.FEEDS.live) == 0
    shared.close()


# -- other processes, interpreter exit -------------------------------------------------------

def test_a_graph_from_another_process_is_a_clear_error(jpegs):
    mod, _ = _tf_native.library()
    other = ((_tf_native.FEEDS.key + 1) & 0x7FFFFFFF) << _tf_native.FEEDS._KEY_SHIFT | 1
    variant = mod.fastq_dataset(feed_id=other, output_types=[tf.int64], output_shapes=[[2]])
    ds = _tf_native._dataset_class()(variant, (tf.TensorSpec((2,), tf.int64),))
    with pytest.raises(tf.errors.OpError, match="PipelineClosedError: this FastqDataset was made by "
                                                "fastq.tf.dataset in another process"):
        next(iter(ds))


def test_interpreter_exit_with_live_iterators_and_tensors(jpegs, tmp_path):
    """A live epoch, a prefetch thread waiting in the kernel and a tensor that aliases a slot
    at exit: the process ends normally (the callbacks are unset at exit; the kernel then
    cancels its run without Python)."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(f"""
        import fastq, fastq.ops, fastq.tf as fqtf
        paths = {list(jpegs)!r}
        p = fastq.Pipeline(fastq.sources.Files(paths * 4), batch_size=4, queue_size=3, workers=1,
                           ops=[fastq.ops.RandomResizedCrop(16)])
        it = iter(fqtf.dataset(p).prefetch(1))
        x = next(it)
        assert p.stats()["tf_feed"]["feed"] == "native"
        print("ok", flush=True)
    """))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
               TF_CPP_MIN_LOG_LEVEL="2")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])
