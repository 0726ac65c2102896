"""fastq.tf with ordinary tf.data idioms (issue 12, items 3 and 4): shuffle and
cache after fastq.tf.dataset, a warm-up loop, and no pipeline or slot arena
kept alive by a dataset once the pipeline is closed.

Reference: every sample carries its index, so what an epoch must contain is
known without fastq (range(N))."""
import gc
import os
import weakref

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.tf as fqtf  # noqa: E402

pytestmark = pytest.mark.tf

N, B = 40, 4


def make(queue_size=4, n=N, stall_timeout=10.0, shape=(3,), dtype=np.int64):
    data = [(np.full(shape, i, dtype), np.int64(i)) for i in range(n)]
    return fastq.Pipeline(data, batch_size=B, queue_size=queue_size, stall_timeout=stall_timeout)


def indices(batches):
    return sorted(int(i) for _, y in batches for i in np.asarray(y))


@pytest.mark.parametrize("n", [2, 3])
def test_shuffle_below_queue_size_eager_and_in_tf_function(n):
    p = make(queue_size=4)
    got = []
    for x, y in fqtf.dataset(p).shuffle(n, seed=1):
        np.testing.assert_array_equal(np.asarray(x)[:, 0], np.asarray(y))
        got.append(np.asarray(y).copy())
    assert sorted(np.concatenate(got).tolist()) == list(range(N))

    @tf.function
    def total(ds):
        s = tf.constant(0, tf.int64)
        for x, y in ds:
            s += tf.reduce_sum(y)
        return s

    for _ in range(2):
        assert int(total(fqtf.dataset(p).shuffle(n))) == sum(range(N))
    p.close()


def test_shuffle_holding_every_slot_is_a_clear_stall():
    p = make(queue_size=4, stall_timeout=1.0)
    with pytest.raises(tf.errors.OpError, match=r"holds 4 batches.*shuffle"):
        for _ in fqtf.dataset(p).shuffle(8):
            pass
    p.close()


def test_cache_copies_and_the_second_epoch_reads_the_cache():
    p = make(queue_size=4)
    ds = fqtf.dataset(p).cache()
    first = [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in ds]
    assert indices(first) == list(range(N)) and p.epoch == 1
    fqtf.flush_released()
    assert p.stats()["slots_leased"] == 0       # the cache holds copies, not slots
    second = [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in ds]
    assert p.epoch == 1                         # served from the cache
    for (a, b), (c, d) in zip(first, second):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    p.close()


def test_copy_before_a_cache_further_down_the_chain():
    p = make(queue_size=3)
    ds = fqtf.dataset(p).map(lambda x, y: (x * 2, y)).map(fqtf.copy).cache()
    for _ in range(2):
        out = list(ds)
        assert indices(out) == list(range(N))
    assert p.epoch == 1
    p.close()


def test_warm_up_loop_then_unpacking_loop():
    p = make(queue_size=4)
    ds = fqtf.dataset(p)
    for _ in ds:
        pass
    n = 0
    for x, y in ds:
        np.testing.assert_array_equal(np.asarray(y), np.arange(n * B, n * B + B))
        n += 1
    assert n == N // B
    p.close()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_closed_pipelines_behind_datasets_are_collected_and_free_their_arena():
    """10 create -> fastq.tf.dataset -> 4 batches -> close cycles (32 MB arena
    each): RSS grows by less than one arena, and every pipeline is collected.
    (Before: TF's generator registry kept every pipeline and its arena.)"""
    shape = (512, 256)
    arena = 8 * B * shape[0] * shape[1] * 4
    refs = []

    def cycle():
        p = make(queue_size=8, n=64, shape=shape, dtype=np.float32)
        ds = fqtf.dataset(p)
        for i, (x, y) in enumerate(ds):
            if i == 3:
                break
        del x, y
        p.close()
        refs.append(weakref.ref(p))

    def settled_rss():
        # freed heap memory goes back to the system first: RSS then measures what is still
        # held, not how fragmented the heap of a long test process already was
        gc.collect()
        fqtf.flush_released()
        gc.collect()
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return rss()

    cycle()
    base = settled_rss()
    for _ in range(10):
        cycle()
    grown = settled_rss() - base
    assert all(r() is None for r in refs), "a closed pipeline is still referenced"
    assert grown < arena, f"RSS grew by {grown / 2**20:.0f} MB over 10 cycles (arena {arena / 2**20:.0f} MB)"


def test_a_dataset_keeps_its_pipeline_alive_but_the_registry_does_not():
    p = make()
    ref = weakref.ref(p)
    ds = fqtf.dataset(p).map(lambda x, y: (x, y))
    del p  # as in fastq.tf.dataset(fastq.Pipeline(...))
    gc.collect()
    for _ in range(2):
        assert indices([(None, np.asarray(y).copy()) for _, y in ds]) == list(range(N))
    ref().close()
    del ds
    gc.collect()
    assert ref() is None
