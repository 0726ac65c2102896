"""How fastq's native workers share the CPUs with the training loop.

A training job has one thread that must never wait: the one that launches the
model's kernels (eager PyTorch, a Keras step, a tf.function's host side).  fastq's
workers are throughput threads; they should use the CPU time that thread leaves,
not take it.  ``Pipeline(worker_priority=...)`` says how:

``"background"`` (the default)
    every native worker runs under ``SCHED_BATCH`` (treated as CPU-bound, never
    preempts another thread when it wakes) at nice +19 over the process's own
    nice value; on machines with 8 or more usable CPUs, one physical core (all its
    hyper-threads) is kept free of workers for the training thread, and the default
    worker count is the CPUs left.  A pipeline alone runs as fast as at normal
    priority: nice only matters when something else wants the CPU.
``"normal"``
    workers at the process's priority, on every usable CPU, as many as there are
    usable CPUs: a machine that only preprocesses, or a benchmark of fastq alone.
``WorkerPriority(nice=..., policy=..., cpus=..., reserve_cores=...)``
    any other combination.

Only native workers (Files, Bytes, Arrays, Folder, TFRecord, WebDataset sources)
are affected.  Python producer threads (``sources.Iterable``, ``sources.Stream``)
run Python code under the GIL; a lowered priority would make the training thread
wait for the GIL that a descheduled producer holds, so they keep the normal one.

What was applied is in ``Pipeline.stats()["scheduling"]``; a setting the kernel
refuses (e.g. a CPU outside a container's mask) is reported there, never raised.
"""
import os
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union

__all__ = ["WorkerPriority", "PRESETS", "resolve", "usable_cpus", "physical_cores", "format_cpus"]

_POLICIES = ("keep", "batch", "idle")
_POLICY_NAMES = {"keep": "inherited (SCHED_OTHER)", "batch": "SCHED_BATCH", "idle": "SCHED_IDLE"}
AUTO_RESERVE_MIN_CPUS = 8  # reserve_cores="auto": one core for the consumer from this many usable CPUs


class WorkerPriority:
    """Scheduling of a pipeline's native workers (see the module docs).

    nice : int
        Added to each worker thread's nice value (0 = unchanged, at most 19 in all).
    policy : "batch", "idle" or "keep"
        ``SCHED_BATCH``, ``SCHED_IDLE`` (runs only on otherwise idle CPU time), or the
        inherited policy.
    cpus : sequence of int, optional
        The CPUs the workers may run on (default: the usable CPUs minus the reserved ones).
    reserve_cores : int or "auto"
        Physical cores (with all their hyper-threads) kept free of workers for the
        consumer; "auto": 1 when at least 8 CPUs are usable, else 0.  Ignored when
        ``cpus`` is given.
    """

    def __init__(self, nice: int = 19, policy: str = "batch", cpus: Optional[Sequence[int]] = None,
                 reserve_cores: Union[int, str] = "auto") -> None:
        if isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 39:
            raise ValueError(f"WorkerPriority: nice must be an int in [0, 39] (an increment; lowering it needs "
                             f"privileges), got {nice!r}")
        if policy not in _POLICIES:
            raise ValueError(f"WorkerPriority: policy must be one of {', '.join(_POLICIES)}, got {policy!r}")
        if cpus is not None:
            cpus = tuple(sorted({int(c) for c in cpus}))
            if not cpus or cpus[0] < 0:
                raise ValueError(f"WorkerPriority: cpus must be a non-empty list of CPU numbers >= 0, got {cpus!r}")
        if reserve_cores != "auto" and (isinstance(reserve_cores, bool) or not isinstance(reserve_cores, int)
                                        or reserve_cores < 0):
            raise ValueError(f"WorkerPriority: reserve_cores must be 'auto' or an int >= 0, got {reserve_cores!r}")
        self.nice, self.policy, self.cpus, self.reserve_cores = nice, policy, cpus, reserve_cores

    def __repr__(self) -> str:
        return (f"WorkerPriority(nice={self.nice}, policy={self.policy!r}, cpus={self.cpus!r}, "
                f"reserve_cores={self.reserve_cores!r})")

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, WorkerPriority) and repr(self) == repr(other)


PRESETS = {
    "background": WorkerPriority(nice=19, policy="batch", reserve_cores="auto"),
    "normal": WorkerPriority(nice=0, policy="keep", reserve_cores=0),
}


def usable_cpus() -> List[int]:
    """The CPUs the calling thread may run on (its affinity mask)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _parse_list(text: str) -> FrozenSet[int]:
    out: Set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def physical_cores(cpus: Sequence[int], sysfs: str = "/sys/devices/system/cpu") -> List[Tuple[int, ...]]:
    """`cpus` grouped by physical core (hyper-threads of one core together, from
    sysfs' thread_siblings_list; a CPU whose topology cannot be read is its own core),
    in order of each core's lowest CPU."""
    usable, seen = set(cpus), set()  # type: Set[int], Set[int]
    groups: List[Tuple[int, ...]] = []
    for c in sorted(usable):
        if c in seen:
            continue
        try:
            with open(os.path.join(sysfs, f"cpu{c}", "topology", "thread_siblings_list")) as f:
                sib = _parse_list(f.read()) & usable
        except (OSError, ValueError):
            sib = frozenset()
        group = tuple(sorted(sib | {c}))
        seen.update(group)
        groups.append(group)
    return groups


def format_cpus(cpus: Optional[Sequence[int]]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (as /proc and taskset write CPU lists)."""
    if not cpus:
        return ""
    cpus = sorted(cpus)
    out, start, prev = [], cpus[0], cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if c is not None:
            start = prev = c
    return ",".join(out)


class Resolved:
    """A WorkerPriority applied to this machine: what NativeRun is given."""

    def __init__(self, name: str, prio: WorkerPriority, cpus: Optional[List[int]], reserved: List[int],
                 default_workers: int):
        self.name, self.prio, self.cpus, self.reserved, self.default_workers = \
            name, prio, cpus, reserved, default_workers

    def run_args(self) -> Dict[str, Any]:
        """Keyword arguments of fastq._native._core.NativeRun."""
        return {"policy": self.prio.policy, "nice": self.prio.nice, "cpus": self.cpus}

    def describe(self, run_stats: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        d = {"priority": self.name, "policy": _POLICY_NAMES[self.prio.policy], "nice": self.prio.nice,
             "worker_cpus": format_cpus(self.cpus) if self.cpus is not None else "inherited",
             "reserved_cpus": format_cpus(self.reserved)}
        if run_stats is not None and "sched_applied" in run_stats:
            d["applied"] = f"{run_stats['sched_applied']} of {run_stats['workers']} workers"
            d["error"] = run_stats.get("sched_error")
        return d


def resolve(priority: Union[str, WorkerPriority, None], cpus: Optional[Sequence[int]] = None,
            sysfs: Optional[str] = None) -> Resolved:
    """Turn a ``worker_priority`` argument into CPUs, policy and nice for this
    machine (`cpus`: the usable CPUs, default the calling thread's mask; `sysfs`:
    where the CPU topology is read, default /sys/devices/system/cpu)."""
    if priority is None:
        priority = "background"
    if isinstance(priority, str):
        if priority not in PRESETS:
            raise ValueError(f"worker_priority must be one of {', '.join(repr(k) for k in PRESETS)} or a "
                             f"fastq.WorkerPriority, got {priority!r}")
        name, prio = priority, PRESETS[priority]
    elif isinstance(priority, WorkerPriority):
        name, prio = "custom", priority
    else:
        raise TypeError(f"worker_priority must be a string or a fastq.WorkerPriority, got "
                        f"{type(priority).__name__}")
    usable = list(cpus) if cpus is not None else usable_cpus()
    if prio.cpus is not None:
        return Resolved(name, prio, list(prio.cpus), [], len(prio.cpus))
    k = prio.reserve_cores if isinstance(prio.reserve_cores, int) else \
        (1 if len(usable) >= AUTO_RESERVE_MIN_CPUS else 0)  # "auto"
    reserved: List[int] = []
    if k:
        cores = physical_cores(usable) if sysfs is None else physical_cores(usable, sysfs)
        if k >= len(cores):
            raise ValueError(f"worker_priority reserves {k} cores but only {len(cores)} are usable "
                             f"(CPUs {format_cpus(usable)})")
        for group in cores[-k:]:  # the highest-numbered cores: CPU 0 often takes more interrupts
            reserved.extend(group)
    if not reserved:
        return Resolved(name, prio, None, [], len(usable))
    left = sorted(set(usable) - set(reserved))
    return Resolved(name, prio, left, sorted(reserved), len(left))
