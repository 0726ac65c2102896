"""What a benchmark reads about the machine and a process: usable cores, CPU
model, CPU time split (this process / other processes / hypervisor steal) and
resident memory.  Standard library only."""
import os
import platform
import time

__all__ = ["usable_cores", "cpu_model", "machine_description", "proc_status_kb", "cpu_snapshot", "cpu_delta",
           "contention"]


def usable_cores():
    from fastq.scheduling import usable_cpus
    return len(usable_cpus())


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description():
    return f"{cpu_model()}, {usable_cores()} usable core(s) of {os.cpu_count()}, {platform.system()} " \
           f"{platform.release()}, Python {platform.python_version()}"


def proc_status_kb(field):
    """VmRSS / VmHWM of this process in kB (0 where /proc is not available)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    if field == "VmHWM":
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return 0


def _descendants_cpu_s():
    """CPU seconds of this process's live descendants (worker processes: torch
    DataLoader, tensorpack's ZMQ workers), from /proc/PID/stat; 0 without /proc."""
    try:
        hz = os.sysconf("SC_CLK_TCK")
        parent, ticks = {}, {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(name)] = int(rest[1])
            ticks[int(name)] = int(rest[11]) + int(rest[12])  # utime + stime
    except (OSError, ValueError, IndexError):
        return 0.0
    me, total = os.getpid(), 0
    for pid in parent:
        p, seen = parent[pid], 0
        while p > 1 and seen < 64:
            if p == me:
                total += ticks[pid]
                break
            p, seen = parent.get(p, 0), seen + 1
    return total / hz


def cpu_snapshot():
    """(machine busy s, machine steal s, this process's CPU s, wall s).  Busy and steal
    come from /proc/stat (all CPUs of this machine); steal is time the hypervisor gave
    to other guests.  None for the first two where /proc/stat is missing.  This
    process's CPU includes its child processes (live ones from /proc, reaped ones
    from os.times), so that multi-process peers are not counted as "other" load."""
    busy = steal = None
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz
        steal = v[7] / hz
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system + _descendants_cpu_s()
    return busy, steal, own, time.perf_counter()


def cpu_delta(a, b):
    """Cores in use during [a, b]: this process, other processes, hypervisor steal."""
    wall = b[3] - a[3]
    own = (b[2] - a[2]) / wall
    other = None if a[0] is None else max(0.0, (b[0] - a[0]) / wall - own)
    steal = None if a[1] is None else (b[1] - a[1]) / wall
    return {"wall_s": wall, "own_cores": own, "other_cores": other, "steal_cores": steal,
            "own_cpu_s": b[2] - a[2]}


def contention(c):
    """Cores taken by other processes and hypervisor steal during a measurement (cpu_delta)."""
    return (c["other_cores"] or 0.0) + (c["steal_cores"] or 0.0)
