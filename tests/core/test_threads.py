"""The claims of docs/threads.md ("Thread and object reuse safety") that no other
test makes: batches released from another thread, one source feeding two pipelines
on two threads, what two threads on one Pipeline get, and a batch read in a forked
child."""
import os
import queue
import threading

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.errors import SupersededIterationError

N = 48


def arrays_source(n=N):
    return fastq.sources.Arrays([np.full((8, 8, 3), i % 251, np.uint8) for i in range(n)],
                                labels=list(range(n)))


def pipeline(src=None, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("queue_size", 3)
    return fastq.Pipeline(src if src is not None else arrays_source(), ops=[ops.CenterCrop(4)],
                          return_index=True, workers=2, **kw)


def test_batches_released_from_another_thread_free_their_slots():
    # queue_size 2 and 12 batches: the consumer only gets past the second batch
    # if the slots dropped by the other thread go back to the producers.
    q = queue.Queue()
    dropped = []

    def release():
        while True:
            b = q.get()
            if b is None:
                return
            dropped.append(int(b[-1][0]))
            del b
    t = threading.Thread(target=release)
    t.start()
    with pipeline(queue_size=2, stall_timeout=20) as p:
        for b in p:
            q.put(b)
            del b
        q.put(None)
        t.join()
        assert p.stats()["slots_leased"] == 0
    assert len(dropped) == N // 4


def _epoch_indices(p):
    return [int(i) for b in p for i in b[-1]]


@pytest.mark.parametrize("make", [arrays_source, "files"])
def test_one_source_feeds_two_pipelines_on_two_threads(make, tmp_path):
    if make == "files":
        from fastq.bench import testdata
        paths = testdata.make_jpeg_dataset(str(tmp_path), 16, seed=3, min_side=40, max_side=64)
        src = fastq.sources.Files(paths, list(range(len(paths))))
    else:
        src = make()
    with pipeline(src, seed=7, shuffle=True) as alone:
        want = [[np.array(x) for x in b] for b in alone]
    got = {}

    def run(k):
        with pipeline(src, seed=7, shuffle=True) as p:
            got[k] = [[np.array(x) for x in b] for b in p]
    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        assert len(got[k]) == len(want)
        for a, b in zip(got[k], want):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


def test_a_second_iteration_from_another_thread_supersedes_the_first():
    with pipeline() as p:
        it = iter(p)
        first = next(it)
        del first
        started = threading.Event()

        def other():
            other.indices = _epoch_indices(p)  # iter(p) here starts the next epoch
            started.set()
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert started.is_set() and sorted(other.indices) == list(range(N))
        with pytest.raises(SupersededIterationError):
            next(it)


@pytest.mark.parametrize("attempt", range(3))
def test_two_threads_on_one_iterator_never_get_a_batch_twice(attempt):
    # Not a supported use (docs/threads.md); what the ring guarantees anyway:
    # every batch goes to exactly one of the threads, and each thread's loop ends
    # with StopIteration or SupersededIterationError.
    with pipeline(queue_size=4) as p:
        it = iter(p)
        seen, ends = [[], []], []

        def consume(k):
            try:
                for b in it:
                    seen[k] += [int(i) for i in b[-1]]
                    del b
                ends.append("stop")
            except SupersededIterationError:
                ends.append("superseded")
        threads = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(seen[0] + seen[1]) == list(range(N))
    assert len(ends) == 2 and set(ends) <= {"stop", "superseded"}


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_reads_a_batch_it_inherited_and_drops_it_without_touching_the_ring():
    with pipeline() as p:
        it = iter(p)
        b = next(it)
        want = [np.array(x) for x in b]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                same = all(np.array_equal(x, y) for x, y in zip(b, want))
                del b  # the Lease in the child: nothing of the parent's ring is touched
                os.write(w, b"same" if same else b"differs")
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        msg = os.read(r, 100)
        os.close(r)
        assert os.waitstatus_to_exitcode(status) == 0 and msg == b"same"
        del b  # the parent's own reference releases the slot here
        assert 1 + sum(1 for _ in it) == N // 4
        assert p.stats()["slots_leased"] == 0


def test_stats_from_another_thread_while_the_consumer_iterates():
    # what the Keras stage callback (fastq.stages) does: stats() on the training
    # thread while TensorFlow's thread iterates the pipeline.
    errors, calls = [], [0]
    stop = threading.Event()
    with pipeline(queue_size=2) as p:
        def poll():
            while not stop.is_set():
                try:
                    s = p.stats()
                    assert s["batch_size"] == 4 and s["stages"] is not None
                    calls[0] += 1
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
                    return
        t = threading.Thread(target=poll)
        t.start()
        try:
            for _ in range(5):
                assert sorted(_epoch_indices(p)) == list(range(N))
        finally:
            stop.set()
            t.join()
    assert not errors, errors
    assert calls[0] > 0


def test_close_from_another_thread_wakes_a_waiting_consumer():
    gate = threading.Event()

    def gen():  # (producers pull up to 8 samples at a time)
        for i in range(8):
            yield np.full(3, i, np.float32), i
        gate.wait(30)  # the producer is stuck here: the consumer waits for batch 2
        for i in range(8, 16):
            yield np.full(3, i, np.float32), i
    p = fastq.Pipeline(fastq.sources.Iterable(gen()), batch_size=4, queue_size=2, workers=1)
    it = iter(p)
    assert [int(v) for v in next(it)[1]] == [0, 1, 2, 3]
    assert [int(v) for v in next(it)[1]] == [4, 5, 6, 7]
    got = []

    def consume():
        try:
            next(it)
            got.append("batch")
        except fastq.errors.PipelineClosedError:
            got.append("closed")
    t = threading.Thread(target=consume)
    t.start()
    t.join(0.3)
    assert t.is_alive()  # waiting for a batch that cannot come
    closer = threading.Thread(target=p.close)
    closer.start()
    t.join(30)
    gate.set()  # let the producer out of the user's iterator, so close() can join it
    closer.join(30)
    assert not t.is_alive() and not closer.is_alive()
    assert got == ["closed"] and p.closed
