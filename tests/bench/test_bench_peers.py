"""fastq.bench.peers: a tf.data peer's iterator is torn down after the caller's clock.

With autotune on, a tf.data iterator's destructor waits for the autotune thread (up to
about a second per iterator on the 2-core machine); fastq.bench.child stops the clock,
then calls run_epoch.settle(), so that wait is not counted as a peer's images/s."""
import gc
import weakref

import pytest

pytestmark = pytest.mark.tf

import tensorflow as tf  # noqa: E402

from fastq.bench.peers import _batch_epochs  # noqa: E402


def test_a_tfdata_iterator_outlives_its_epoch_until_settle():
    ds = tf.data.Dataset.range(10).batch(2).map(lambda x: (x, x))
    run_epoch, close, info = _batch_epochs(ds, {"tensorflow": tf.__version__})
    assert close is None and info() == {"tensorflow": tf.__version__} and run_epoch.batches is ds
    held = run_epoch.settle.__self__
    assert run_epoch() == 10
    assert len(held) == 1
    first = weakref.ref(held[0])
    with pytest.raises(StopIteration):
        next(held[0])  # exhausted: the epoch is over, only its teardown is left
    run_epoch.settle()
    gc.collect()
    assert held == [] and first() is None
    # not settled: the next epoch tears the previous iterator down first, as before
    assert run_epoch() == 10
    second = weakref.ref(held[0])
    seen = []
    assert run_epoch(lambda images: seen.append(int(images.shape[0]))) == 10 and seen == [2] * 5
    gc.collect()
    assert second() is None and len(held) == 1


def test_other_peers_hold_nothing():
    batches = [(tf.zeros([3, 1]), tf.zeros([3]))] * 2  # any re-iterable of (images, labels)
    run_epoch, _, _ = _batch_epochs(batches, {})
    assert run_epoch() == 6 and run_epoch.settle.__self__ == []
