"""Batches the consumer keeps: each one held reduces the usable ring depth by
exactly one (issue 12, item 3), and misuse of sample shapes is a clear error.

The rule: producers run while the consumer side holds fewer than queue_size
batches.  A `for` loop variable counts: it still holds the previous batch
while the next one is fetched, so a loop that keeps k batches needs
queue_size >= k + 2.

Reference: the samples are numbered, so every batch's expected content is
known without fastq (np.arange)."""
import numpy as np
import pytest

import fastq
import fastq.ops
from fastq.errors import StalledError


def numbered(n, dims=(3,)):
    return [(np.full(dims, i, np.int64), np.int64(i)) for i in range(n)]


def expected(seq, bs):
    return np.arange(seq * bs, (seq + 1) * bs)


def arrays_source(n):
    imgs = np.stack([np.full((4, 5, 3), i % 251, np.uint8) for i in range(n)])
    return fastq.sources.Arrays(imgs, np.arange(n, dtype=np.int64))


@pytest.mark.parametrize("queue_size", [3, 4, 8])
def test_keeping_one_batch_then_iterating_the_rest(queue_size):
    """The issue's reproducer: `keep = next(it); for x in it: pass` stalled
    after queue_size batches, for any queue_size (now: 2 held < queue_size)."""
    p = fastq.Pipeline(numbered(60), batch_size=3, queue_size=queue_size, stall_timeout=5)
    it = iter(p)
    keep = next(it)
    seq = 1
    for x, y in it:
        np.testing.assert_array_equal(y, expected(seq, 3))
        seq += 1
    assert seq == 20
    np.testing.assert_array_equal(keep[1], expected(0, 3))  # the kept batch is intact
    p.close()


@pytest.mark.parametrize("source", ["iterable", "native"])
@pytest.mark.parametrize("queue_size", [3, 5])
def test_holding_k_below_queue_size_for_a_whole_epoch(source, queue_size):
    for k in range(1, queue_size - 1):  # + the loop variable: k + 1 < queue_size held
        if source == "iterable":
            p = fastq.Pipeline(numbered(90), batch_size=3, queue_size=queue_size, stall_timeout=5)
        else:
            p = fastq.Pipeline(arrays_source(90), batch_size=3, queue_size=queue_size, stall_timeout=5,
                               dtype="uint8", workers=2, ops=[fastq.ops.Resize((4, 5))])
        for epoch in range(2):  # the held batches of epoch 0 stay held through epoch 1
            held = [] if epoch == 0 else held
            seq = 0
            for x, y in p:
                np.testing.assert_array_equal(y, expected(seq, 3))
                if epoch == 0 and seq % 4 == 0 and len(held) < k:
                    held.append((seq, x, y))
                seq += 1
            assert seq == 30
        for s, x, y in held:
            np.testing.assert_array_equal(y, expected(s, 3))
        assert p.stats()["slots_leased"] == k
        del held, x, y
        assert p.stats()["slots_leased"] == 0
        p.close()


def test_warm_up_loop_then_unpacking_loop():
    """`for _ in p: pass` leaves `_` holding the epoch's last batch; the next
    loop must still run (it stalled at the queue_size-th batch)."""
    p = fastq.Pipeline(numbered(40), batch_size=4, queue_size=4, stall_timeout=5)
    for _ in p:
        pass
    n = 0
    for x, y in p:
        np.testing.assert_array_equal(y, expected(n, 4))
        n += 1
    assert n == 10
    p.close()


def test_keeping_one_batch_with_two_slots_stalls_with_the_count():
    """keep + the loop variable = 2 batches = every slot of queue_size=2."""
    p = fastq.Pipeline(numbered(60), batch_size=3, queue_size=2, stall_timeout=0.5)
    it = iter(p)
    keep = next(it)
    with pytest.raises(StalledError, match="holds 2 batches"):
        for x in it:
            pass
    del keep
    p.close()


def test_holding_queue_size_batches_still_stalls_and_says_how_many():
    p = fastq.Pipeline(numbered(100), batch_size=2, queue_size=3, stall_timeout=0.5)
    kept = []
    with pytest.raises(StalledError, match="holds 3 batches"):
        for b in p:
            kept.append(b)
    assert len(kept) == 3
    p.close()


def test_sample_with_more_than_31_dimensions_is_a_value_error():
    """Was a segfault (rc 139): a fixed 33-entry dims array filled unchecked."""
    with pytest.raises(ValueError, match="40 dimensions"):
        p = fastq.Pipeline([np.zeros((1,) * 40, np.uint8)] * 4, batch_size=2)
        list(p)
    p = fastq.Pipeline([np.zeros((1,) * 31, np.uint8)] * 4, batch_size=2)
    shapes = [b[0].shape for b in p]
    assert shapes == [(2,) + (1,) * 31] * 2
    p.close()
