"""The feed benchmark (fastq.bench.feed, issue 28): its simulated device keeps the order a
CUDA stream keeps, its trainer's work is a fixed amount of GIL-holding CPU, its ideal is
the issue's formula; and, measured with that trainer, a consumer thread doing
GIL-holding work never waits for a CPU next to a saturated fastq pipeline under the
default worker_priority, where it does wait under a normal-priority pipeline.

"Waits for a CPU" is the thread's wall time over its own CPU time (the time it was
runnable but not running), which is what the workers' priority decides.  The thread's
CPU time itself can grow next to busy workers (a hyper-threaded sibling, shared caches
and memory bandwidth, other VMs on the host: 1.00-1.10x on the 2-vCPU CI machine);
no scheduling policy changes that, so it is reported, not asserted."""
import gc
import statistics
import threading
import time
import weakref

import numpy as np
import pytest

import fastq
from fastq.bench import BenchInputError, feed
from fastq.bench.tasks import REFERENCE
from fastq.bench.testdata import make_jpeg_dataset


@pytest.fixture(scope="module")
def work():
    return feed.Work.calibrate()


# ---------------------------------------------------------------------------
# the simulated device and trainer
# ---------------------------------------------------------------------------

def test_a_batch_is_dropped_when_its_copy_is_done_before_its_compute():
    """The copy engine lets go of the batch when its copy is done, not when the step's
    compute ends.  Compared by the clock at the moment the batch is freed, not by polling,
    so that a loaded machine that wakes this thread late cannot fail it."""
    dev = feed.Device(compute_s=1.0, copy_s=0.01, run_ahead=2)
    freed = []
    batch = np.zeros(4)
    weakref.finalize(batch, lambda: freed.append(time.perf_counter()))
    dev.copy(batch)
    del batch
    dev.launch()
    ends = dev.close()
    gc.collect()
    assert dev.copies_done == 1 and len(freed) == 1 and len(ends) == 1
    copied, _, _ = dev.starts[0]
    assert freed[0] < ends[0] - 0.5      # released long before its compute ended...
    assert freed[0] >= copied - 1e-6     # ...and not before its copy was done


def test_the_device_keeps_stream_order_and_bounds_the_run_ahead():
    """Copies run one after another as soon as queued, never waiting for compute; step N
    computes after its copy, its launches and step N-1; the trainer can queue step N
    only once step N - run_ahead has finished."""
    k, D, copy = 2, 0.02, 0.005
    dev = feed.Device(compute_s=D, copy_s=copy, run_ahead=k)
    for i in range(12):
        dev.copy(np.zeros(1))
        if i % 3 == 0:
            time.sleep(0.03)  # a slow launch now and then
        dev.launch()
    ends = dev.close()
    assert len(ends) == len(dev.starts) == len(dev.queued) == 12
    prev_copy = prev_end = 0.0
    for n, ((copied, launched, start), end) in enumerate(zip(dev.starts, ends)):
        assert copied == pytest.approx(max(dev.queued[n], prev_copy) + copy, abs=1e-9)
        assert start == max(copied, launched, prev_end)
        assert end == pytest.approx(start + D, abs=1e-9)
        if n >= k:
            assert dev.queued[n] >= ends[n - k]
        prev_copy, prev_end = copied, end
    # copies ran ahead of compute: some copy was done before the previous step's compute ended
    assert any(c < ends[n - 1] for n, (c, _, _) in enumerate(dev.starts) if n)


def test_trainer_alone_runs_at_the_device_rate_when_its_launches_are_short(work):
    tr = feed.Trainer(work, launch_us=0, device_us=50000, run_ahead=2)
    one = np.zeros(4)
    for _ in range(12):
        tr.step(one)
    ends = tr.finish()
    # virtual time: steps end exactly D apart as long as the trainer keeps 2 steps queued
    assert feed.steady_rate(ends, 64, 4) == pytest.approx(64 / 0.05, rel=1e-6)
    assert len(tr.spin_s) == 12 and tr.device_wait_s > 0.1  # it waited for the device, not for input


def test_work_is_a_fixed_amount_of_cpu_that_holds_the_gil(work):
    """spin() does the same number of C calls whatever the clock says, and another
    Python thread cannot run during one of them."""
    assert work.chunks(10000) == round(10000 / work.us_per_chunk) > 0
    ticks = []
    stop = threading.Event()

    def other():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)
    t = threading.Thread(target=other)
    t.start()
    try:
        r = range(feed.CHUNK * 2000)  # one long C call
        time.sleep(0.01)
        t0 = time.perf_counter()
        sum(r)
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert t1 - t0 > 0.005
    inside = [x for x in ticks if t0 + 1e-3 < x < t1 - 1e-3]
    assert inside == [], f"the other thread ran {len(inside)} times during sum()"


def test_ideal_rate_and_steady_rate_by_hand():
    s = feed.Setting("x", 45, 50)
    assert s.core_share() == pytest.approx(0.9)
    assert feed.ideal_rate(1400, 2500, s, 2) == pytest.approx(2500 * 1.1 / 2)          # input-limited
    assert feed.ideal_rate(1000, 2500, s, 2) == 1000                                      # trainer-limited
    assert feed.ideal_rate(1e9, 2000, feed.Setting("y", 30, 10), 4) == pytest.approx(2000 * 3 / 4)  # C > D
    # C as measured: the launches took 50 ms instead of 45: the trainer takes a whole core
    assert feed.ideal_rate(1400, 2500, s, 2, launch_ms=50) == pytest.approx(2500 * 1.0 / 2)
    assert s.core_share(20) == pytest.approx(0.4)
    # tight: 2000 img/s alone on 2 cores, C = 16 ms per batch of 64: x = 2000 * 2 / (2 + 0.5) = 1600, and indeed
    # 1600 img/s = 25 batches/s x 16 ms = 0.4 of a core for the trainer, 1.6 cores x 1000 img/s for the feeder
    assert feed.tight_rate(1e9, 2000, 16, 64, 2) == pytest.approx(1600)
    assert feed.tight_rate(1500, 2000, 16, 64, 2) == 1500
    assert feed.steady_rate([0.0, 1.0, 1.5, 2.0], 10, 1) == pytest.approx(3 * 10 / 2.0)  # batches 2-4
    assert feed.steady_rate([0.0, 1.0, 1.5, 2.0], 10, 2) == pytest.approx(2 * 10 / 1.0)  # batches 3-4
    with pytest.raises(ValueError):
        feed.steady_rate([0.0, 1.0], 10, 2)


@pytest.mark.parametrize("text, match", [("1:x", "is not C:D"), ("a=1:2,a=3:4", "names repeat"),
                                         ("0:0", "not both 0"), ("-1:5", ">= 0"), ("nan:5", ">= 0"), ("1:inf", ">= 0"),
                                         ("", "none given")])
def test_bad_settings_are_clear_errors(text, match):
    with pytest.raises(BenchInputError, match=match):
        feed.parse_settings(text)


def test_settings_parse():
    got = feed.parse_settings("2:40, launch=45:50")
    assert [(s.name, s.launch_ms, s.device_ms) for s in got] == [("C2/D40", 2, 40), ("launch", 45, 50)]


# ---------------------------------------------------------------------------
# scheduling: the consumer's GIL-holding work next to a saturated pipeline
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    return make_jpeg_dataset(str(tmp_path_factory.mktemp("feed_jpegs")), 64, seed=0)


def consumer_slowdown(paths, work, priority, pairs=11, steps=6):
    """The busy-input setting's trainer work (C ms of GIL-holding CPU per batch) with a
    saturated reference-task pipeline (the trainer takes the next batch after each
    step; the pipeline cannot keep up, so its workers never wait for a slot) and with
    the pipeline idle (its ring full, every worker waiting), alternated.  A pair during
    which other processes took more than fastq.bench.BUSY_LIMIT cores in either half is
    measured again (at most `pairs` more times).  Returns (median over pairs of
    with/without wall time per step; the same for wall / thread CPU time; the share of
    the 'with' steps that ended with the ring full, i.e. the workers idle; the pairs
    discarded as contended)."""
    from fastq.bench import BUSY_LIMIT, contention
    from fastq.bench.measure import cpu_delta, cpu_snapshot
    C = next(s for s in feed.DEFAULT_SETTINGS if s.name == "busy-input").launch_ms * 1e3
    workers = fastq.scheduling.resolve(priority).default_workers
    many = list(paths) * 300  # one long epoch: no epoch boundary during the measurement
    # 64 images per worker and batch: a batch takes several times the trainer's step to make, so
    # the ring stays short of full on a fast machine too (32 left it full after ~25% of the steps
    # in 1 of 2-3 runs on an AVX-512 machine, before and after the migration work)
    p = fastq.Pipeline(fastq.sources.Files(many, list(range(len(many)))), batch_size=64 * min(workers, 8),
                       queue_size=3, ops=REFERENCE.fastq_ops(), dtype="float32", shuffle=True, seed=0,
                       pin_memory=False, worker_priority=priority)

    def until_idle():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            s = p.stats()
            if s["slots_free"] == 0 and s["slots_filling"] == 0:
                return
            time.sleep(0.005)
        raise AssertionError(f"the pipeline's ring did not fill: {p.stats()}")

    def spins(take):
        out, idle = [], 0
        c0 = cpu_snapshot()
        for _ in range(steps):
            if take:
                batch = next(it)
                del batch
            w, c = time.perf_counter(), time.thread_time()
            work.spin(C)
            out.append((time.perf_counter() - w, time.thread_time() - c))
            if take:
                s = p.stats()  # a full ring now: the workers had nothing to do during (part of) the step
                idle += s["slots_free"] == 0 and s["slots_filling"] == 0
        return out, idle, contention(cpu_delta(c0, cpu_snapshot()))

    wall, sched, idle, busy = [], [], 0, 0
    try:
        it = iter(p)
        next(it)
        until_idle()
        while len(wall) < pairs and busy < pairs:
            on, full, other_on = spins(True)
            until_idle()
            off, _, other_off = spins(False)
            if max(other_on, other_off) > BUSY_LIMIT:
                busy += 1
                continue
            idle += full
            wall.append(statistics.median(x for x, _ in on) / statistics.median(x for x, _ in off))
            sched.append(statistics.median(x / y for x, y in on) / statistics.median(x / y for x, y in off))
        it.close()
    finally:
        p.close()
    assert len(wall) >= 3, f"other processes kept the CPUs busy: {busy} contended pair(s), {len(wall)} clean"
    return statistics.median(wall), statistics.median(sched), idle / (len(wall) * steps), busy


def test_the_consumer_never_waits_for_a_cpu_next_to_a_saturated_pipeline_under_the_defaults(jpegs, work):
    """Measured once more when the first median is over the limit: the other processes'
    load is read from /proc/stat at the clock tick (10 ms), coarse next to 6 steps of a few
    ms, so a neighbour's burst can slip past the contention check (seen once: 1.10x, in a
    full run on a machine where other work ran beside the suite; the test alone passed 6 of
    6 times after it).  A real regression (workers at the consumer's priority, the next
    test) stays over the limit in both measurements."""
    runs = []
    for _ in range(2):
        slowdown, sched, idle, busy = consumer_slowdown(jpegs, work, "background")
        assert idle <= 0.1, f"the pipeline was not saturated: its ring was full after {idle:.0%} of the steps"
        runs.append(f"{sched:.3f}x (its work took {slowdown:.3f}x the wall time; {busy} contended pair(s) "
                    f"measured again)")
        if sched <= 1.05:
            return
    pytest.fail("the consumer's wall / CPU time was over 1.05x its value without the pipeline in both "
                "measurements: " + "; ".join(runs))


def test_the_consumer_waits_for_a_cpu_next_to_a_normal_priority_pipeline(jpegs, work):
    """The same measurement can fail: with the workers at the consumer's priority on
    every CPU, N workers + the consumer share N cores."""
    cores = len(fastq.scheduling.usable_cpus())
    if cores > 4:
        pytest.skip(f"{cores} CPUs: a normal-priority pipeline takes ~1/{cores + 1} of the consumer's core, "
                    f"too little to tell from noise; the assertion is for machines of <= 4 CPUs")
    slowdown, sched, idle, busy = consumer_slowdown(jpegs, work, "normal")
    assert idle <= 0.1, f"the pipeline was not saturated: its ring was full after {idle:.0%} of the steps"
    assert sched >= 1.1, (f"expected the consumer's wall / CPU time at ~{(cores + 1) / cores:.2f}x its value "
                          f"without the pipeline, got {sched:.3f}x (its work took {slowdown:.3f}x the wall time; "
                          f"{busy} contended pair(s) measured again)")
