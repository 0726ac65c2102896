"""tf.train.Checkpoint of a fastq.tf.dataset iterator at every position (issue 36).

A checkpoint names one point of the stream: restored, into the same iterator or into a fresh
pipeline, dataset and iterator (as a new process would), the iterator yields exactly the
batches that followed that point, and the pipeline then goes on with the epoch that followed.
Checked at every position from before the first batch (0) to the epoch boundary (all batches
taken, the end not yet seen) and after the end, and inside ``repeat(2)`` across the boundary,
for 1 and 2 workers, with shuffle, mix= and pad="batch".

The reference is the Python consumer of an identically built Pipeline (its own loop, the same
C producers), so the expected batches do not come from the code under test.

The from_generator fallback cannot restore a position (its generator has no state TF can
save): saving fails with an error, the iteration goes on untouched, and nothing resumes
elsewhere.
"""
import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
import fastq.tf as fqtf  # noqa: E402
from fastq.tf import _native as _tf_native  # noqa: E402
from fastq.bench import testdata  # noqa: E402

pytestmark = pytest.mark.tf

N = 12
B = 4
SIZE = 32
EPOCH = N // B


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    return testdata.make_jpeg_dataset(str(d), N, seed=5, min_side=64, max_side=128)


@pytest.fixture(scope="module", autouse=True)
def native_available():
    try:
        _tf_native.library()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"fastq's TensorFlow kernel must build here (g++ and TF's headers are installed): {e}")


def variant_kw(variant):
    if variant == "mix":
        return dict(mix=fastq.MixUpCutMix(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=N, seed=3),
                    ops=[fastq.ops.RandomResizedCrop(SIZE), fastq.ops.HorizontalFlip()])
    if variant == "pad":
        return dict(pad="batch", pad_multiple=8,
                    ops=[fastq.ops.ResizeShortestEdge([24, 40], max_size=64), fastq.ops.HorizontalFlip()])
    return dict(ops=[fastq.ops.RandomResizedCrop(SIZE), fastq.ops.HorizontalFlip()])


def make(paths, variant, workers):
    return fastq.Pipeline(fastq.sources.Files(paths, list(range(len(paths)))), batch_size=B, queue_size=3,
                          workers=workers, return_index=True, shuffle=True, seed=11, stall_timeout=20.0,
                          **variant_kw(variant))


def direct(p, epochs):
    """The Python consumer's batches (copies), epoch after epoch."""
    return [[tuple(np.array(a) for a in b) for b in p] for _ in range(epochs)]


def take(it, n=None):
    out = []
    if n == 0:
        return out
    for b in it:
        out.append(tuple(t.numpy() for t in b))
        if n is not None and len(out) == n:
            break
    return out


def assert_same(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} batches, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: batch {i}"
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: batch {i}")


@pytest.fixture(scope="module")
def reference(jpegs):
    cache = {}

    def get(variant):
        if variant not in cache:
            p = make(jpegs, variant, 1)
            cache[variant] = direct(p, 3)
            p.close()
        return cache[variant]
    return get


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("variant", ["shuffle", "mix", "pad"])
def test_every_position_of_one_iteration(jpegs, reference, tmp_path, variant, workers):
    want = reference(variant)
    flat = want[0]
    # positions 0 (before the first batch) .. EPOCH (the boundary: all taken, the end not seen),
    # and EPOCH + 1: after the iteration's end
    for k in range(EPOCH + 2):
        what = f"{variant}, {workers} worker(s), checkpoint at {k}"
        p = make(jpegs, variant, workers)
        ds = fqtf.dataset(p)
        assert p.stats()["tf_feed"]["feed"] == "native"
        it = iter(ds)
        head = take(it, min(k, EPOCH))
        if k > EPOCH:
            assert take(it) == []  # the end of the iteration seen
        ckpt = tf.train.Checkpoint(iterator=it)
        path = ckpt.save(str(tmp_path / f"ck_{variant}_{workers}_{k}"))
        rest = take(it)
        assert_same(head + rest, flat, what + " (first pass)")
        # restore into the same iterator: the batches after the point, again
        ckpt.restore(path)
        assert_same(take(it), flat[min(k, EPOCH):], what + ", same iterator")
        # ... and the pipeline goes on with the next epoch
        assert_same(take(ds), want[1], what + ", same pipeline, next iteration")
        # into a fresh pipeline, dataset and iterator
        q = make(jpegs, variant, workers)
        ds2 = fqtf.dataset(q)
        it2 = iter(ds2)
        tf.train.Checkpoint(iterator=it2).restore(path)
        assert_same(take(it2), flat[min(k, EPOCH):], what + ", fresh iterator")
        assert q.state_dict()["epoch"] == 1 and q.state_dict()["position"] == 0, what
        assert_same(take(ds2), want[1], what + ", fresh pipeline, next iteration")
        p.close()
        q.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_every_position_inside_repeat(jpegs, reference, tmp_path, workers):
    want = reference("shuffle")
    flat = want[0] + want[1]
    for k in range(2 * EPOCH + 1):
        what = f"repeat(2), {workers} worker(s), checkpoint at {k}"
        p = make(jpegs, "shuffle", workers)
        it = iter(fqtf.dataset(p).repeat(2))
        head = take(it, k)
        ckpt = tf.train.Checkpoint(iterator=it)
        path = ckpt.save(str(tmp_path / f"ckr_{workers}_{k}"))
        assert_same(head + take(it), flat, what + " (first pass)")
        ckpt.restore(path)
        assert_same(take(it), flat[k:], what + ", same iterator")
        q = make(jpegs, "shuffle", workers)
        it2 = iter(fqtf.dataset(q).repeat(2))
        tf.train.Checkpoint(iterator=it2).restore(path)
        assert_same(take(it2), flat[k:], what + ", fresh iterator")
        assert q.epoch == 2, what
        p.close()
        q.close()


def test_checkpoint_before_the_first_batch_of_a_later_epoch(jpegs, reference, tmp_path):
    """An iterator made after epoch 0 was read, checkpointed before its first batch, names
    epoch 1, also when restored after more epochs ran (and into a fresh pipeline)."""
    want = reference("shuffle")
    p = make(jpegs, "shuffle", 1)
    ds = fqtf.dataset(p)
    take(ds)
    it = iter(ds)
    path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ck"))
    assert_same(take(it), want[1], "epoch 1")
    assert_same(take(ds), want[2], "epoch 2")
    tf.train.Checkpoint(iterator=it).restore(path)
    assert_same(take(it), want[1], "restored: epoch 1")
    q = make(jpegs, "shuffle", 1)
    it2 = iter(fqtf.dataset(q))
    tf.train.Checkpoint(iterator=it2).restore(path)
    assert_same(take(it2), want[1], "fresh: epoch 1")
    p.close()
    q.close()


def test_a_source_that_cannot_be_rewound_refuses_the_checkpoint(jpegs, tmp_path):
    batches = [(np.full((4, 4, 3), i, np.uint8), np.int64(i)) for i in range(8)]
    p = fastq.Pipeline(fastq.sources.Iterable(batches), batch_size=2)
    it = iter(fqtf.dataset(p))
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot be checkpointed.*Python iterable"):
        tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ck"))
    assert len(take(it)) == 4  # the iteration is untouched
    p.close()


def test_the_from_generator_feed_refuses_to_save_and_goes_on(jpegs, reference, tmp_path):
    want = reference("shuffle")
    p = make(jpegs, "shuffle", 1)
    ds = fqtf.dataset(p, native=False)
    assert p.stats()["tf_feed"]["feed"] == "from_generator"
    it = iter(ds)
    head = take(it, 1)
    with pytest.raises((tf.errors.FailedPreconditionError, tf.errors.UnimplementedError)):
        tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ck"))
    assert_same(head + take(it), want[0], "from_generator after a refused save")
    p.close()
