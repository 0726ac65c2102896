"""fastq.sources.Stream: a Python iterable of encoded images, decoded natively;
checked against the Files source on the same images/seed, and its error paths."""
import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata

N = 20
CHAIN = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    paths = testdata.make_jpeg_dataset(str(tmp_path_factory.mktemp("s")), N, seed=6, min_side=60, max_side=140)
    blobs = []
    for p in paths:
        with open(p, "rb") as f:
            blobs.append(f.read())
    return paths, blobs


def run(src, epochs=2, **kw):
    kw.setdefault("ops", CHAIN)
    kw.setdefault("batch_size", 4)
    with fastq.Pipeline(src, **kw) as p:
        eps = [[tuple(np.array(a) for a in b) for b in p] for _ in range(epochs)]
    return eps


def test_same_batches_as_files_for_any_worker_count(jpegs):
    paths, blobs = jpegs
    labels = np.arange(N) * 3
    ref = run(fastq.sources.Files(paths, labels=labels), seed=4, workers=2)
    for w in (1, 3):
        got = run(fastq.sources.Stream([(b, int(l)) for b, l in zip(blobs, labels)]), seed=4, workers=w)
        for ep_a, ep_b in zip(got, ref):
            assert len(ep_a) == len(ep_b) == N // 4
            for a, b in zip(ep_a, ep_b):
                assert a[0].tobytes() == b[0].tobytes()
                np.testing.assert_array_equal(a[1], b[1])
                assert a[1].dtype == np.int64


def test_unlabeled_generator_is_reiterated_each_epoch(jpegs):
    _, blobs = jpegs

    class Gen:
        def __iter__(self):
            return (bytes(b) for b in blobs[:10])

    eps = run(fastq.sources.Stream(Gen()), return_index=True, drop_remainder=False, epochs=2, workers=2)
    for ep in eps:
        assert [len(b) for b in ep] == [2, 2, 2]  # image, index: no label output
        assert np.concatenate([b[1] for b in ep]).tolist() == list(range(10))
    assert eps[0][0][0].tobytes() != eps[1][0][0].tobytes()  # a new epoch: new augmentation


def test_bad_image_raise_and_skip(jpegs):
    _, blobs = jpegs
    items = [(b, i) for i, b in enumerate(blobs[:12])]
    items[5] = (b"\xff\xd8 not a jpeg", 5)
    with pytest.raises(errors.DecodeError) as ei:
        run(fastq.sources.Stream(items), workers=2)
    assert ei.value.index == 5 and "stream item 5" in str(ei.value)
    with fastq.Pipeline(fastq.sources.Stream(items), ops=CHAIN, batch_size=4, on_error="skip", return_index=True,
                        workers=2) as p:
        out = [tuple(np.array(a) for a in b) for b in p]
        st = p.stats()
    idx = np.concatenate([b[2] for b in out]).tolist()
    lab = np.concatenate([b[1] for b in out]).tolist()
    assert idx == [0, 1, 2, 3, 4, 6, 6, 7, 8, 9, 10, 11]  # replaced by the next good item of its chunk
    assert lab == idx
    assert st["skipped"] == 1 and st["skipped_by_reason"] == {"FQ_E_DECODE": 1}


def test_iterator_exception_and_bad_items(jpegs):
    _, blobs = jpegs

    def gen():
        for i in range(6):
            yield blobs[i], i
        raise RuntimeError("network gone")

    with pytest.raises(RuntimeError, match="network gone"):
        run(fastq.sources.Stream(_Reiter(gen)), workers=2)
    with pytest.raises(TypeError, match="stream item 2"):
        run(fastq.sources.Stream([(blobs[0], 0), (blobs[1], 1), 42, (blobs[3], 3)]), batch_size=2, workers=1)
    with pytest.raises(ValueError, match="shuffle"):
        fastq.Pipeline(fastq.sources.Stream([(blobs[0], 0)]), batch_size=1, shuffle=True)
    with fastq.Pipeline(fastq.sources.Stream([(blobs[0], 0)] * 4), batch_size=2, ops=CHAIN) as p:
        with pytest.raises(TypeError):
            p.load_state_dict({"epoch": 0, "position": 1})


class _Reiter:
    def __init__(self, fn):
        self.fn = fn

    def __iter__(self):
        return self.fn()


def test_label_dtype_matches_numpy_cast_and_refuses_values_that_do_not_fit(jpegs):
    _, blobs = jpegs
    labels = [int(v) for v in (np.arange(N) * 1500 - 9000)]  # int16 holds them, int8 does not
    items = list(zip(blobs, labels))
    for dt, lab in (("int16", labels), ("float32", labels), ("float64", [v / 3 for v in labels])):
        eps = run(fastq.sources.Stream(list(zip(blobs, lab))), epochs=1, label_dtype=dt, return_index=True,
                  ops=[ops.Resize((8, 8))])
        ys = np.concatenate([b[1] for b in eps[0]])
        idx = np.concatenate([b[2] for b in eps[0]])
        assert ys.dtype == np.dtype(dt)
        np.testing.assert_array_equal(ys, np.asarray(lab)[idx].astype(dt))
    with pytest.raises(ValueError, match=r"stream item 0: label -9000 does not fit in label_dtype int8"):
        run(fastq.sources.Stream(items), epochs=1, label_dtype="int8", ops=[ops.Resize((8, 8))])
    with pytest.raises(ValueError, match="first item has no label"):
        run(fastq.sources.Stream(blobs), epochs=1, label_dtype="int32", ops=[ops.Resize((8, 8))])
    with pytest.raises(TypeError, match="label_dtype"):
        run(fastq.sources.Stream(items), epochs=1, label_dtype="U4", ops=[ops.Resize((8, 8))])
