"""The slot ring and the native worker pool, driven from Python.

The reference model is simple: item i of a run must appear exactly once, as
row i % batch_size of the (i // batch_size)-th batch, holding the pattern that
fq_pattern_byte() defines for i (checked byte by byte, so torn rows show)."""
import ctypes
import gc
import random
import threading
import time

import numpy as np
import pytest

from fastq._native import _core
from fastq import errors
from helpers.native_helpers import _testing
from fastq.errors import StalledError


def make_ring(cap=3, bs=5, shapes=((7, 3), ()), dtypes=(np.uint8, np.int64)):
    return _core.Ring(cap, bs, dtypes, shapes)


def expected_batch(task, ring, seq, n):
    out = []
    for b in range(ring.n_blocks):
        rows = [task.expected(seq * ring.batch_size + r, b) for r in range(n)]
        out.append(np.stack(rows).view(ring.dtypes[b]).reshape((n,) + ring.row_shapes[b]))
    return out


def check_batch(task, ring, seq, arrays):
    for a, e in zip(arrays, expected_batch(task, ring, seq, arrays[0].shape[0])):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("workers,cap,bs,n_items,drop", [
    (4, 3, 5, 5 * 60 + 2, False),
    (4, 3, 5, 5 * 60 + 2, True),
    (3, 1, 1, 200, True),
    (2, 8, 16, 16 * 10, True),
])
def test_native_producers_python_consumer_every_sample_once_in_order(workers, cap, bs, n_items, drop):
    ring = make_ring(cap, bs)
    task = _testing.PatternTask(ring, seed=workers * 31 + cap)
    rnd = random.Random(7)
    run_id = ring.begin_run(drop)
    ring.set_end(n_items)
    run = _core.NativeRun(ring, task, workers, n_items)
    seen = 0
    seq = 0
    while True:
        got = ring.next_batch(stall_timeout=10)
        if got is None:
            break
        lease, arrays = got
        assert lease.seq == seq
        n = arrays[0].shape[0]
        check_batch(task, ring, seq, arrays)
        seen += n
        seq += 1
        if rnd.random() < 0.3:
            time.sleep(rnd.random() * 0.002)
        del lease, arrays, got
    run.join()
    assert seen == (n_items // bs * bs if drop else n_items)
    st = ring.stats()
    assert st["samples_delivered"] == seen
    assert st["batches_delivered"] == seq
    assert st["rows_committed"] == n_items
    assert st["slots_leased"] == 0
    assert run_id >= 1


def test_python_producer_threads_write_rows_in_place():
    """Python threads using acquire/write_row/commit (the Iterable path) with
    random delays: no lost, duplicated or torn samples."""
    ring = _core.Ring(2, 4, [np.float64], [(33,)])
    run_id = ring.begin_run(False)
    n = 4 * 25 + 3
    counter = iter(range(n))
    lock = threading.Lock()

    def producer(seed):
        rnd = random.Random(seed)
        while True:
            with lock:
                k = next(counter, None)
            if k is None:
                return
            slot, row = ring.acquire(run_id, k)
            if rnd.random() < 0.2:
                time.sleep(rnd.random() * 0.001)
            _testing.write_row(ring, slot, row, [np.arange(33, dtype=np.float64) + k * 1000])
            assert ring.commit(run_id, slot, row)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    ring.set_end(n)
    got = []
    while True:
        r = ring.next_batch()
        if r is None:
            break
        _, (a,) = r
        for row in a:
            k = int(row[0]) // 1000
            np.testing.assert_array_equal(row, np.arange(33) + k * 1000)
            got.append(k)
    for t in threads:
        t.join()
    assert got == list(range(n))


def test_slots_are_64_byte_aligned_views_of_the_arena_no_copy():
    ring = make_ring(3, 5)
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    ring.set_end(15)
    run = _core.NativeRun(ring, task, 2, 15)
    base, size = _testing.arena_address(ring), ring.arena_bytes
    assert base % 4096 == 0
    batches = []
    for _ in range(3):
        lease, arrays = ring.next_batch()
        for b, a in enumerate(arrays):
            assert a.ctypes.data == _testing.block_address(ring, lease.slot, b)
            assert a.ctypes.data % 64 == 0
            assert base <= a.ctypes.data < base + size
            assert a.base is lease
            assert a.flags.c_contiguous and not a.flags.owndata
        batches.append(arrays)
    run.join()


@pytest.mark.parametrize("align", [64, 4096, 1 << 16, 1 << 21])
def test_the_arena_is_aligned_as_asked_and_zeroed(align):
    """The arena is a mapping of its own: page-aligned at least, and aligned to
    arena_align above the page size (made by unmapping the ends of a larger map)."""
    ring = _core.Ring(2, 3, [np.dtype(np.uint8)], [(5000,)], arena_align=align)
    base, size = _testing.arena_address(ring), ring.arena_bytes
    assert base % max(align, 4096) == 0 and size % align == 0 and size >= 2 * 3 * 5000
    arena = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(base))
    assert not arena.any()
    arena[:] = 7                                # every byte of it is ours to write
    del arena
    ring.close()


def test_an_arena_alignment_that_is_not_a_power_of_two_or_above_1_gib_is_refused():
    for align in (100, 1 << 31):
        with pytest.raises(ValueError, match="alignment"):
            _core.Ring(2, 3, [np.dtype(np.uint8)], [(16,)], arena_align=align)


def test_lease_returns_slot_on_garbage_collection_and_stats_track_states():
    ring = make_ring(2, 2)
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    ring.set_end(8)
    run = _core.NativeRun(ring, task, 1, 8)
    lease, arrays = ring.next_batch()
    img = arrays[0]
    del lease, arrays
    gc.collect()
    assert ring.stats()["slots_leased"] == 1  # `img` still views the slot
    view = img[1:]  # a view of a view keeps the lease too
    del img
    assert ring.stats()["slots_leased"] == 1
    del view
    assert ring.stats()["slots_leased"] == 0
    rest = 0
    while True:
        r = ring.next_batch()
        if r is None:
            break
        rest += 1
    run.join()
    st = ring.stats()
    assert rest == 3
    assert st["batches_delivered"] == 4 and st["samples_delivered"] == 8
    assert st["slots_free"] + st["slots_filling"] + st["slots_ready"] + st["slots_leased"] == 2


def test_failed_sample_reaches_consumer_at_its_batch_in_order():
    ring = make_ring(2, 4)
    task = _testing.PatternTask(ring, fail_item=9)
    ring.begin_run(True)
    ring.set_end(20)
    run = _core.NativeRun(ring, task, 3, 20)
    assert ring.next_batch() is not None
    assert ring.next_batch() is not None
    with pytest.raises(errors.DecodeError) as ei:  # batch 2, row 1
        ring.next_batch()
    assert ei.value.index == 9  # carried as a field of the slot's error record
    assert "sample 9" in str(ei.value)
    assert ei.value.code == "FQ_E_DECODE"
    assert ring.stats()["batches_delivered"] == 3 and ring.stats()["slots_leased"] == 0
    ring.cancel()
    run.join()


def test_close_wakes_blocked_producers_and_consumer(no_leaked_threads):
    ring = make_ring(2, 2)
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    run = _core.NativeRun(ring, task, 4, 10**9)  # endless; ring fills, producers block
    held = [ring.next_batch(), ring.next_batch()]  # consumer holds both slots
    time.sleep(0.05)
    assert run.running == 4
    errors = []

    def consumer():
        try:
            ring.next_batch(stall_timeout=-1)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    ring.close()
    t.join(5)
    run.join()
    assert time.monotonic() - t0 < 2.0
    assert not t.is_alive()
    assert errors and type(errors[0]).__name__ == "PipelineClosedError"
    del held


def test_timeouts():
    ring = make_ring(1, 2)
    run_id = ring.begin_run(True)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        ring.next_batch(timeout=0.1)
    assert 0.09 <= time.monotonic() - t0 < 2.0
    assert ring.acquire(run_id, 0, timeout=0.0) is not None
    with pytest.raises(TimeoutError):
        ring.acquire(run_id, 2, timeout=0.05)  # slot still filling with batch 0


def test_consumer_holding_every_slot_gets_a_clear_stall_error():
    ring = make_ring(2, 1)
    task = _testing.PatternTask(ring)
    ring.begin_run(True)
    ring.set_end(100)
    run = _core.NativeRun(ring, task, 2, 100)
    held = [ring.next_batch(), ring.next_batch()]
    t0 = time.monotonic()
    with pytest.raises(StalledError) as ei:
        ring.next_batch(stall_timeout=0.3)
    assert 0.25 <= time.monotonic() - t0 < 3.0
    msg = str(ei.value)
    assert "queue_size" in msg and "leased" in msg and "holds 2 batches" in msg
    del held  # releasing unblocks everything
    n = 0
    while ring.next_batch(stall_timeout=5) is not None:
        n += 1
    assert n == 98
    run.join()


def test_slot_leased_across_runs_only_reduces_the_depth_by_one():
    ring = make_ring(3, 2)
    task = _testing.PatternTask(ring, seed=3)
    ring.begin_run(True)
    ring.set_end(1000)
    run = _core.NativeRun(ring, task, 2, 1000)
    kept = ring.next_batch()
    ring.cancel()
    run.join()
    ring.begin_run(True)
    ring.set_end(40)
    run = _core.NativeRun(ring, task, 2, 40)
    out = []
    # the old run's batch stays leased for the whole new run
    while (r := ring.next_batch(stall_timeout=5)) is not None:
        lease, arrays = r
        assert lease.slot != kept[0].slot
        np.testing.assert_array_equal(arrays[0], expected_batch(task, ring, lease.seq, 2)[0])
        out.append(lease.seq)
        del r, lease, arrays
    run.join()
    assert out == list(range(20))
    assert ring.stats()["slots_leased"] == 1
    del kept
    assert ring.stats()["slots_leased"] == 0


@pytest.mark.parametrize("cap", [2, 3, 5])
def test_holding_k_batches_below_capacity_never_stalls(cap):
    """k < capacity batches kept for a whole run (several k, held at the start,
    spread out, or a sliding window of the newest k): the run completes in
    order with correct contents.  Before slots were decoupled from seq %
    capacity this stalled after `capacity` batches for any k >= 1."""
    for k in range(1, cap):
        for pattern in ("first", "spread", "sliding"):
            ring = make_ring(cap, 3)
            task = _testing.PatternTask(ring, seed=cap * 10 + k)
            ring.begin_run(False)
            n_items = 3 * 40 + 2
            ring.set_end(n_items)
            run = _core.NativeRun(ring, task, 3, n_items)
            held, seq = [], 0
            while (r := ring.next_batch(stall_timeout=5)) is not None:
                lease, arrays = r
                assert lease.seq == seq
                check_batch(task, ring, seq, arrays)
                if pattern == "first" and len(held) < k:
                    held.append(r)
                elif pattern == "spread" and seq % 3 == 1 and len(held) < k:
                    held.append(r)
                elif pattern == "sliding":
                    held.append(r)
                    if len(held) > k:
                        held.pop(0)
                seq += 1
                del r, lease, arrays
            run.join()
            assert seq == 41
            assert ring.stats()["slots_leased"] == len(held) == k
            for h in held:  # what was kept is intact
                check_batch(task, ring, h[0].seq, h[1])


def test_sample_with_too_many_dimensions_is_a_value_error():
    with pytest.raises(ValueError, match="40 dimensions"):
        _core.Ring(2, 2, [np.uint8], [(1,) * 40])
    ring = _core.Ring(2, 2, [np.uint8], [(1,) * 31])  # the most a numpy batch can have
    ring.begin_run(False)
    ring.set_end(2)
    run = _core.NativeRun(ring, _testing.PatternTask(ring), 1, 2)
    lease, (a,) = ring.next_batch()
    assert a.shape == (2,) + (1,) * 31
    run.join()


def test_stale_run_id_cannot_write():
    ring = make_ring(2, 2)
    old = ring.begin_run(True)
    ring.begin_run(True)
    assert ring.acquire(old, 0) is None
    assert ring.commit(old, 0, 0) is False


def test_bad_ring_arguments():
    with pytest.raises(ValueError, match="queue_size"):
        _core.Ring(0, 4, [np.uint8], [(3,)])
    with pytest.raises(ValueError, match="batch_size"):
        _core.Ring(2, 0, [np.uint8], [(3,)])
    with pytest.raises(TypeError):
        _core.Ring(2, 2, [object], [(3,)])
    with pytest.raises(ValueError):
        _core.Ring(2, 2, [np.uint8], [(0,)])


def test_native_workers_run_without_the_gil():
    """While 2 native workers busy-wait 200 x 5 ms of 'work' and a C consumer
    drains the ring (GIL released), a Python thread keeps running."""
    ring = make_ring(4, 4)
    task = _testing.PatternTask(ring, work_us=5000)
    ring.begin_run(True)
    ring.set_end(200)
    run = _core.NativeRun(ring, task, 2, 200)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    batches, rows, bad, secs = task.drain(ring, True)
    stop.set()
    t.join()
    run.join()
    assert (batches, rows, bad) == (50, 200, 0)
    assert secs >= 0.4  # 200 x 5 ms over 2 workers
    # the Python thread ticked throughout: no gap longer than 100 ms
    gaps = np.diff(ticks)
    assert len(ticks) > secs * 100
    assert gaps.max() < 0.1


def test_native_run_takes_typed_tasks_and_refuses_an_uninitialized_one():
    from fastq._native import _image
    assert issubclass(_image.ImageTask, _core.TaskBase)  # a typed handle, not C addresses
    ring = make_ring(2, 2)
    ring.begin_run(True)
    with pytest.raises(ValueError, match="not initialized"):
        _core.NativeRun(ring, _image.ImageTask.__new__(_image.ImageTask), 1, 4)
    with pytest.raises(TypeError):
        _core.NativeRun(ring, object(), 1, 4)
    ring.close()


def test_typed_native_arguments_refuse_none():
    """The Cython entry points that take a typed native object (a Ring, a task, an
    ImageSpec) refuse None with a TypeError instead of dereferencing it."""
    from fastq._native import _cuda, _image
    ring = make_ring(2, 2)
    task = _testing.PatternTask(ring)
    for call in (lambda: _core.NativeRun(None, task, 1, 1), lambda: _core.NativeRun(ring, None, 1, 1),
                 lambda: _testing.PatternTask(None), lambda: task.drain(None),
                 lambda: _testing.block_address(None, 0, 0), lambda: _cuda.pin(None),
                 lambda: _image.ImageTask(None, "files", [b"x"]), lambda: _image.Decoder(None),
                 lambda: _image.ReadAhead(None, 1, 4), lambda: _image.ReadAhead(object(), 1, 4)):
        with pytest.raises(TypeError):
            call()
    # a reader is a typed native object, not an address or any object with a length
    from fastq import ops
    spec = _image.ImageSpec(ops.compile_ops([ops.CenterCrop(8)]))
    for bad in ([b"x"], (b"x", b"y")):
        with pytest.raises(TypeError, match="native reader"):
            _image.ImageTask(spec, "reader", bad)
