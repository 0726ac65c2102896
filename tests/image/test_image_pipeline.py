"""The native image pipeline end to end: determinism, epochs, resume, shards,
bad input under both policies, replay against cv2, and the GIL."""
import sys
import threading
import time

import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata
from helpers.image_ref import cv2_decode_rgb, finish, replay

CHAIN = [ops.RandomResizedCrop(64), ops.HorizontalFlip(), ops.ColorJitter(0.3, 0.3, 0.3, 0.05),
         ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    return testdata.make_jpeg_dataset(str(d), 40, seed=3, min_side=120, max_side=300)


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return testdata.make_bad_files(str(tmp_path_factory.mktemp("bad")))


def run_epochs(source, epochs=1, **kw):
    kw.setdefault("ops", CHAIN)
    kw.setdefault("batch_size", 8)
    out = []
    with fastq.Pipeline(source, **kw) as p:
        for _ in range(epochs):
            out.append([tuple(np.array(a) for a in b) for b in p])
    return out


def test_bit_identical_for_any_worker_count(jpegs):
    src = fastq.sources.Files(jpegs, labels=np.arange(40))
    results = [run_epochs(src, 2, workers=w, seed=11, shuffle=True, queue_size=3) for w in (1, 2, 4)]
    for other in results[1:]:
        for ep_a, ep_b in zip(results[0], other):
            assert len(ep_a) == len(ep_b) == 5
            for ba, bb in zip(ep_a, ep_b):
                for x, y in zip(ba, bb):
                    assert x.tobytes() == y.tobytes()


def test_epochs_shuffle_and_cover_every_sample_once(jpegs):
    src = fastq.sources.Files(jpegs, labels=np.arange(40) * 10)
    eps = run_epochs(src, 3, seed=5, shuffle=True, return_index=True)
    orders = []
    for ep in eps:
        idx = np.concatenate([b[2] for b in ep])
        lab = np.concatenate([b[1] for b in ep])
        assert sorted(idx.tolist()) == list(range(40))
        np.testing.assert_array_equal(lab, idx * 10)  # label travels with its sample
        orders.append(idx.tolist())
    assert orders[0] != orders[1] != orders[2]
    # the same sample gets different augmentation in different epochs
    first = {int(i): r for b in eps[0] for r, i in zip(b[0], b[2])}
    second = {int(i): r for b in eps[1] for r, i in zip(b[0], b[2])}
    assert sum(not np.array_equal(first[i], second[i]) for i in range(40)) > 30
    # a different seed gives a different order
    other = run_epochs(src, 1, seed=6, shuffle=True, return_index=True)[0]
    assert np.concatenate([b[2] for b in other]).tolist() != orders[0]


def test_resume_from_state_dict_reproduces_the_rest_exactly(jpegs):
    src = fastq.sources.Files(jpegs, labels=np.arange(40))
    kw = dict(ops=CHAIN, batch_size=8, seed=9, shuffle=True, workers=2, stall_timeout=10)
    with fastq.Pipeline(src, **kw) as p:
        for _ in p:  # epoch 0 (list(p) would keep all 5 batches alive: more than queue_size)
            pass
        del _
        it = iter(p)  # epoch 1
        [next(it) for _ in range(2)]
        state = p.state_dict()
        assert state["epoch"] == 1 and state["position"] == 2
        rest = [tuple(np.array(a) for a in b) for b in it]
        nxt = [tuple(np.array(a) for a in b) for b in p]  # epoch 2
    with fastq.Pipeline(src, **kw) as q:
        q.load_state_dict(state)
        got = [tuple(np.array(a) for a in b) for b in q]
        got_next = [tuple(np.array(a) for a in b) for b in q]
    assert len(got) == len(rest) == 3
    for a, b in zip(got + got_next, rest + nxt):
        for x, y in zip(a, b):
            assert x.tobytes() == y.tobytes()
    with fastq.Pipeline(src, **dict(kw, batch_size=4)) as r:
        with pytest.raises(ValueError, match="batch_size"):
            r.load_state_dict(state)


def test_shards_are_disjoint_and_cover_the_source(jpegs):
    src = fastq.sources.Files(jpegs)
    seen = []
    for i in range(3):
        ep = run_epochs(src.shard(3, i), 1, batch_size=4, return_index=True, drop_remainder=False)[0]
        idx = np.concatenate([b[1] for b in ep]).tolist()
        assert all(j % 3 == i for j in idx)
        seen += idx
    assert sorted(seen) == list(range(40))
    with pytest.raises(ValueError):
        src.shard(3, 3)


def test_batch_rows_match_a_cv2_replay_of_explain(jpegs):
    chain = [ops.RandomResizedCrop(48), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
    src = fastq.sources.Files(jpegs[:16])
    with fastq.Pipeline(src, ops=chain, batch_size=4, seed=2, shuffle=True, return_index=True,
                        dct_scaling=False) as p:
        for img, idx in p:
            for row, i in zip(img, idx):
                ex = p.explain(0, int(i))
                with open(jpegs[int(i)], "rb") as f:
                    full = cv2_decode_rgb(f.read())
                ref = finish(replay(full, ex, chain), chain)
                np.testing.assert_allclose(row, ref, rtol=1e-5, atol=1e-5)


def test_arrays_and_bytes_sources_match_files(jpegs):
    import cv2
    datas = []
    for path in jpegs[:8]:
        with open(path, "rb") as f:
            datas.append(f.read())
    decoded = [cv2.cvtColor(cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
               for d in datas]
    chain = [ops.Resize(40), ops.CenterCrop(32)]
    kw = dict(ops=chain, batch_size=4, dtype="uint8", seed=1, dct_scaling=False)
    f = run_epochs(fastq.sources.Files(jpegs[:8]), **kw)[0]
    b = run_epochs(fastq.sources.Bytes(datas), **kw)[0]
    a = run_epochs(fastq.sources.Arrays(decoded), **kw)[0]
    for x, y, z in zip(f, b, a):
        assert x[0].dtype == np.uint8 and x[0].shape == (4, 32, 32, 3)
        assert x[0].tobytes() == y[0].tobytes()
        # pip cv2 and libjpeg-turbo 2.1 decode identically for these baseline JPEGs
        assert np.abs(x[0].astype(int) - z[0].astype(int)).max() <= 1


def _mixed_source(jpegs, bad, names):
    paths = list(jpegs[:14])
    where = {}
    for k, name in enumerate(names):
        pos = 2 + 3 * k
        paths.insert(pos, bad[name])
        where[pos] = name
    return paths, where


@pytest.mark.parametrize("name", ["missing", "empty", "truncated", "garbage", "bomb", "bomb_png"])
def test_bad_file_raises_named_error_at_its_batch(jpegs, bad, name):
    paths, where = _mixed_source(jpegs, bad, [name])
    (pos,) = where
    expected = getattr(errors, testdata.BAD_FILE_ERRORS[name])
    with fastq.Pipeline(fastq.sources.Files(paths), ops=CHAIN, batch_size=4, workers=2) as p:
        it = iter(p)
        for _ in range(pos // 4):
            next(it)
        with pytest.raises(expected) as ei:
            next(it)
        assert ei.value.path == bad[name] and ei.value.index == pos
        assert bad[name] in str(ei.value)
        with pytest.raises(StopIteration):
            next(it)
        # the pipeline is still usable: the next epoch fails at the same place again
        it2 = iter(p)
        for _ in range(pos // 4):
            next(it2)
        with pytest.raises(expected):
            next(it2)


def test_skip_policy_replaces_bad_samples_deterministically_and_counts_reasons(jpegs, bad):
    names = ["missing", "empty", "truncated", "garbage", "bomb"]
    paths, where = _mixed_source(jpegs, bad, names)
    src = fastq.sources.Files(paths, labels=np.arange(len(paths)))
    kw = dict(ops=CHAIN, batch_size=4, on_error="skip", return_index=True, seed=4, drop_remainder=False)
    with fastq.Pipeline(src, **kw) as p:
        batches = [tuple(np.array(a) for a in b) for b in p]
        st = p.stats()
    n = sum(len(b[2]) for b in batches)
    assert n == len(paths)
    assert all(b[0].shape[1:] == (64, 64, 3) for b in batches)
    idx = np.concatenate([b[2] for b in batches])
    lab = np.concatenate([b[1] for b in batches])
    np.testing.assert_array_equal(idx, lab)
    bad_positions = set(where)
    for pos in range(len(paths)):
        if pos in bad_positions:
            assert idx[pos] != pos and idx[pos] not in bad_positions  # replaced by a good sample
        else:
            assert idx[pos] == pos
    assert st["skipped"] == len(names)
    assert st["skipped_by_reason"] == {"FQ_E_IO": 1, "FQ_E_EMPTY": 1, "FQ_E_DECODE": 2, "FQ_E_TOO_LARGE": 1}
    assert bad["missing"] in st["last_skip_message"]["FQ_E_IO"]
    again = run_epochs(src, 1, **kw)[0]
    for a, b in zip(again, batches):
        assert a[0].tobytes() == b[0].tobytes()


def test_unusual_but_valid_formats_decode(bad):
    names = [n for n in ("png", "png16", "gray_jpeg", "rgba_png", "progressive_jpeg", "cmyk_jpeg") if n in bad]
    src = fastq.sources.Files([bad[n] for n in names])
    ep = run_epochs(src, 1, ops=[ops.Resize((32, 32))], batch_size=len(names), dtype="uint8")[0]
    assert ep[0][0].shape == (len(names), 32, 32, 3)


def test_invalid_image_options_fail_when_the_pipeline_is_built(jpegs):
    src = fastq.sources.Files(jpegs)
    with pytest.raises(ValueError, match="on_error"):
        fastq.Pipeline(src, batch_size=2, ops=CHAIN, on_error="ignore")
    with pytest.raises(ValueError):
        fastq.Pipeline(src, batch_size=2, ops=[ops.HorizontalFlip()])  # no fixed output size
    with pytest.raises(ValueError):
        fastq.Pipeline(src, batch_size=2, ops=CHAIN, dtype="int7")
    with pytest.raises(TypeError, match="native image sources"):
        fastq.Pipeline([1, 2], batch_size=2, ops=CHAIN)
    with pytest.raises(ValueError, match="labels"):
        fastq.sources.Files(jpegs, labels=[1, 2])


def test_native_workers_make_progress_while_python_holds_the_gil(jpegs):
    """With a huge switch interval the main thread keeps the GIL for a whole
    second of pure-Python busy work; native workers must keep decoding."""
    src = fastq.sources.Files(jpegs * 10)  # 400 samples; the ring has room for 256
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, queue_size=64, workers=2) as p:
        it = iter(p)
        next(it)
        before = p.stats()["rows_committed"]
        assert before < 200
        old = sys.getswitchinterval()
        sys.setswitchinterval(100.0)
        try:
            t0 = time.perf_counter()
            x = 0
            while time.perf_counter() - t0 < 1.0:
                x += 1
        finally:
            sys.setswitchinterval(old)
        after = p.stats()["rows_committed"]
        assert after - before >= 32, (before, after)


def test_python_thread_keeps_running_while_workers_decode(jpegs):
    src = fastq.sources.Files(jpegs)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        run_epochs(src, 3, workers=2, queue_size=2)
    finally:
        stop.set()
        t.join()
    assert np.diff(ticks).max() < 0.25


def test_repeat_runs_consecutive_epochs_and_2d_labels(jpegs):
    labels = np.stack([np.arange(40), np.arange(40) * 2], axis=1).astype(np.float32)
    src = fastq.sources.Files(jpegs[:12], labels=labels[:12])
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, seed=1, shuffle=True, return_index=True) as p:
        assert p.output_spec[1] == ((2,), np.float32)
        seen = []
        for img, lab, idx in p.repeat(3):
            np.testing.assert_array_equal(lab, labels[idx])
            seen.append(idx.copy())
        assert p.epoch == 3
    per_epoch = [np.sort(np.concatenate(seen[i * 3:(i + 1) * 3])).tolist() for i in range(3)]
    assert per_epoch == [list(range(12))] * 3
