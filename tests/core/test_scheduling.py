"""Worker scheduling (fastq.scheduling, Pipeline(worker_priority=...)): the native workers
carry the documented policy, nice value and CPU set, read back from /proc (the kernel's
view, not fastq's own record), the defaults follow the machine's topology, a refused
setting is reported and never changes a batch.  Issue 28."""
import glob
import os
import threading
import time

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq import scheduling

SCHED_OTHER, SCHED_BATCH, SCHED_IDLE = 0, 3, 5


def threads_named(name):
    """{tid: (policy, nice, affinity)} of this process's threads called `name`, from /proc."""
    out = {}
    for d in glob.glob(f"/proc/{os.getpid()}/task/*"):
        try:
            with open(os.path.join(d, "comm")) as f:
                if f.read().strip() != name:
                    continue
            with open(os.path.join(d, "stat")) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            tid = int(os.path.basename(d))
            # stat fields after the command: [0] is field 3 (state); nice is field 19, policy 41
            out[tid] = (int(fields[38]), int(fields[16]), frozenset(os.sched_getaffinity(tid)))
        except (OSError, ValueError):
            continue  # the thread exited meanwhile
    return out


def my_nice():
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def arrays_pipe(**kw):
    imgs = np.arange(96 * 8 * 8 * 3, dtype=np.uint32).astype(np.uint8).reshape(96, 8, 8, 3)
    kw.setdefault("pin_memory", False)
    return fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(96)), batch_size=8, queue_size=2,
                          ops=[ops.RandomResizedCrop(6), ops.HorizontalFlip()], seed=3, shuffle=True,
                          **kw)


def workers_while_running(pipe):
    """Threads of a live epoch: the ring is full (queue_size=2, the consumer holds one
    batch), so the workers wait inside the ring and can be read back."""
    it = iter(pipe)
    batch = next(it)
    deadline = time.monotonic() + 10
    found = {}
    n = pipe.stats()["workers"]
    while time.monotonic() < deadline:  # a nice-19 worker may be preempted between its steps
        found = threads_named("fastq-worker")
        if len(found) >= n and pipe.stats()["producers"].get("sched_applied") in (n, None):
            break
        time.sleep(0.02)
    return it, batch, found


def test_background_default_workers_are_sched_batch_at_nice_19():
    base = my_nice()
    with arrays_pipe(workers=2) as p:
        it, batch, found = workers_while_running(p)
        assert len(found) == 2, found
        for policy, nice, cpus in found.values():
            assert policy == SCHED_BATCH
            assert nice == min(19, base + 19)
            assert cpus == frozenset(os.sched_getaffinity(0))  # below 8 CPUs no core is reserved
        st = p.stats()["scheduling"]
        assert st["priority"] == "background" and st["policy"] == "SCHED_BATCH" and st["nice"] == 19
        assert st["applied"] == "2 of 2 workers" and st["error"] is None
        it.close()
    # the consumer thread (the one that created the workers) keeps its own setting
    assert my_nice() == base and os.sched_getscheduler(0) == SCHED_OTHER


def test_normal_priority_leaves_workers_alone():
    base = my_nice()
    with arrays_pipe(workers=2, worker_priority="normal") as p:
        it, batch, found = workers_while_running(p)
        assert len(found) == 2
        assert {(pol, nice) for pol, nice, _ in found.values()} == {(SCHED_OTHER, base)}
        it.close()


def test_explicit_cpu_set_idle_policy_and_nice():
    cpu = min(os.sched_getaffinity(0))
    prio = fastq.WorkerPriority(nice=5, policy="idle", cpus=[cpu])
    base = my_nice()
    with arrays_pipe(workers=3, worker_priority=prio) as p:
        it, batch, found = workers_while_running(p)
        assert len(found) == 3
        assert set(found.values()) == {(SCHED_IDLE, min(19, base + 5), frozenset([cpu]))}
        assert p.stats()["scheduling"]["worker_cpus"] == str(cpu)
        it.close()


def test_the_schedule_never_changes_a_batch():
    """Same seed: 'background' with 1 and 2 workers and 'normal' give identical batches."""
    outs = []
    for kw in ({"workers": 1}, {"workers": 2}, {"workers": 2, "worker_priority": "normal"},
               {"workers": 2, "worker_priority": fastq.WorkerPriority(policy="idle", cpus=[min(os.sched_getaffinity(0))])}):
        with arrays_pipe(**kw) as p:
            outs.append([(np.array(a), np.array(b)) for a, b in p])
    for other in outs[1:]:
        assert len(other) == len(outs[0]) == 12
        for (a0, b0), (a1, b1) in zip(outs[0], other):
            np.testing.assert_array_equal(a0, a1)
            np.testing.assert_array_equal(b0, b1)


def test_a_refused_cpu_set_is_reported_not_raised():
    """A CPU the process may not use: the kernel refuses the mask; the workers run
    with the inherited one, stats() says so, and every batch is still right."""
    allowed = os.sched_getaffinity(0)
    outside = max(allowed) + 1  # not in the mask, or no such CPU: the kernel refuses (EINVAL) either way
    with arrays_pipe(workers=2, worker_priority=fastq.WorkerPriority(cpus=[outside])) as p:
        got = [np.array(b[1]) for b in p]
        st = p.stats()
    with arrays_pipe(workers=2) as p:
        want = [np.array(b[1]) for b in p]
    assert [list(g) for g in got] == [list(w) for w in want]
    sched = st["scheduling"]
    assert "pthread_setaffinity_np refused" in sched["error"], sched
    assert sched["applied"] == "0 of 2 workers"


def test_python_producers_keep_normal_priority():
    """An Iterable source's producers are Python threads (they hold the GIL): not niced."""
    base = my_nice()
    seen = []

    class Gen:
        def __iter__(self):
            return gen()

    def gen():
        for i in range(16):
            seen.append((os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), os.sched_getscheduler(0)))
            yield np.full((4,), i, np.float32), np.int64(i)

    with fastq.Pipeline(fastq.sources.Iterable(Gen()), batch_size=4, queue_size=2, pin_memory=False) as p:
        n = sum(1 for _ in p)
        assert "scheduling" not in p.stats()
    assert n == 4 and set(seen) == {(base, SCHED_OTHER)}


@pytest.mark.parametrize("bad, match", [
    ("fast", "worker_priority must be one of"),
    (fastq.WorkerPriority, "must be a string or a fastq.WorkerPriority"),
])
def test_bad_priority_is_a_clear_error(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        arrays_pipe(worker_priority=bad)


@pytest.mark.parametrize("kw, match", [
    ({"nice": -1}, "nice must be an int in"),
    ({"policy": "fifo"}, "policy must be one of"),
    ({"cpus": []}, "non-empty list"),
    ({"reserve_cores": -2}, "reserve_cores must be"),
])
def test_bad_worker_priority_fields(kw, match):
    with pytest.raises(ValueError, match=match):
        fastq.WorkerPriority(**kw)


def fake_sysfs(tmp_path, n, smt):
    """A /sys/devices/system/cpu with n CPUs; smt: CPU i and i + n/2 share a core."""
    for c in range(n):
        d = tmp_path / f"cpu{c}" / "topology"
        d.mkdir(parents=True)
        sib = f"{c % (n // 2)},{c % (n // 2) + n // 2}" if smt else str(c)
        (d / "thread_siblings_list").write_text(sib + "\n")
    return str(tmp_path)


def test_physical_cores_and_cpu_lists(tmp_path):
    root = fake_sysfs(tmp_path, 16, smt=True)
    cores = scheduling.physical_cores(range(16), sysfs=root)
    assert cores[0] == (0, 8) and cores[-1] == (7, 15) and len(cores) == 8
    assert scheduling.physical_cores([0, 1, 8], sysfs=root) == [(0, 8), (1,)]
    assert scheduling.format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert scheduling._parse_list("0-2,5,7-8\n") == frozenset({0, 1, 2, 5, 7, 8})


def test_auto_reserve_follows_the_machine(tmp_path):
    root = fake_sysfs(tmp_path, 16, smt=True)
    r = scheduling.resolve("background", cpus=range(16), sysfs=root)
    assert r.reserved == [7, 15]                  # one whole physical core: both hyper-threads
    assert r.cpus == [c for c in range(16) if c not in (7, 15)] and r.default_workers == 14
    assert r.run_args() == {"policy": "batch", "nice": 19, "cpus": r.cpus}
    small = scheduling.resolve("background", cpus=range(4), sysfs=root)  # below 8 CPUs: nothing reserved
    assert small.reserved == [] and small.cpus is None and small.default_workers == 4
    normal = scheduling.resolve("normal", cpus=range(16), sysfs=root)
    assert normal.reserved == [] and normal.default_workers == 16 and normal.run_args()["policy"] == "keep"
    two = scheduling.resolve(fastq.WorkerPriority(reserve_cores=2), cpus=range(16), sysfs=root)
    assert two.reserved == [6, 7, 14, 15] and two.default_workers == 12
    with pytest.raises(ValueError, match="only 8 are usable"):
        scheduling.resolve(fastq.WorkerPriority(reserve_cores=8), cpus=range(16), sysfs=root)


def test_default_worker_count_is_what_the_priority_leaves(monkeypatch):
    monkeypatch.setattr(scheduling, "usable_cpus", lambda: list(range(12)))
    monkeypatch.setattr(scheduling, "physical_cores",
                        lambda cpus, sysfs=None: [(c,) for c in sorted(cpus)])  # no SMT
    with arrays_pipe(pin_memory=False) as p:
        assert p.stats()["workers"] == 11
        assert p.stats()["scheduling"]["reserved_cpus"] == "11"
    with arrays_pipe(pin_memory=False, worker_priority="normal") as p:
        assert p.stats()["workers"] == 12
    with arrays_pipe(pin_memory=False, workers=3) as p:
        assert p.stats()["workers"] == 3
