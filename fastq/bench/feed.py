"""``fastq bench --task feed``: how fast a feeder keeps a training loop going when the two
share the CPUs, measured without a GPU.

The consumer is a synthetic trainer.  Per batch it

1. hands the batch to a simulated device: a *copy engine* (a thread) "copies" it for
   ``bytes / copy_gbps`` and then drops the batch (a real feeder's slot or tensor goes
   back at that moment, as with ``fastq.torch.DeviceLoader``, before the step computes);
   the trainer blocks here while ``run_ahead`` steps are queued and not yet computed,
   as an eager loop blocks when its CUDA stream is that far ahead;
2. spends C µs of CPU holding the GIL: the "kernel launches" of an eager training
   step (:class:`Work`: back-to-back ``sum(range(1000))`` calls, each a C loop that
   holds the GIL, 10-20 µs here like one launch through a framework's dispatcher, with the
   interpreter between them like the Python code between two ops);
3. marks the step launched: the simulated *compute stream* (another thread) runs it
   for D µs once its launches and its copy are done and the previous step has
   finished, sleeping without the GIL.

The work of step 2 is a fixed amount of CPU (calibrated in the feeder's process, with
the feeder idle, just before each setting is measured), not a deadline: CPU the
feeder takes from the trainer makes the step longer, which is the effect measured.  The device's timeline is kept in
virtual time (each step ends at ``max(copy done, launches done, previous end) + D``),
so that a device thread woken late (waiting for the GIL) delays nothing but the
trainer's next unblocking.

Per feeder and per (C, D) setting the benchmark reports the achieved images/s against
the ideal::

    ideal = min(trainer alone, feeder alone x (cores - C / max(C, D)) / cores)

"trainer alone": the same trainer fed ready-made batches (the feeder idle between two
epochs); "feeder alone": the feeder's batches taken and dropped at once; C / max(C, D) is the
share of a core the trainer's launches take when it runs at its own full speed, with C
as the trainer alone took it (the median step; on a machine whose CPU speed drifts it
is not quite the nominal C, and the share must be what the trainer really takes).  The
ideal is what a perfect feeder would reach: the trainer's own rate, or the pipeline on
the cores the trainer leaves free.  When the input is the bottleneck the trainer runs
slower than its full speed and takes less CPU than the formula assumes, so there the
ideal is conservative (a ratio can exceed 1); the default settings keep that small.

Method (as :mod:`fastq.bench.runner`): ``rounds`` rounds; in each round every feeder
runs in a fresh process (``python -m fastq.bench.child feed FEEDER ROUND CFG``), in a
rotated order, with the settings in a rotated order too.  In its process a feeder
runs an untimed warm-up epoch, then per setting, back to back, the calibration, the
trainer alone, the feeder alone and the trainer fed by the feeder (paired in time: the
CPU speed of a shared machine drifts by tens of percent over seconds).  Each epoch is
timed in steady state: from the end of batch ``skip`` to the end of the last (the end
of a trainer step is when its simulated compute finishes), so that neither a
pipeline's start-up nor a ring filled in advance counts.  Per round the ideal comes
from that process's own measurements; the figures are medians of the rounds, the
ratio the median of the rounds' fed / ideal.

Feeders reuse the peers of ``fastq bench`` (:mod:`fastq.bench.peers`): fastq with its
defaults, with ``worker_priority="normal"`` (what the scheduling buys), with
``WorkerPriority(nice=10)`` (and, on request, ``policy="idle"``); tf.data native ops
with AUTOTUNE; torch DataLoader + torchvision v2.
"""
import json
import math
import os
import platform
import queue
import statistics
import sys
import tempfile
import threading
import time

from fastq.bench.data import BenchInputError, _progress_bar, _write
from fastq.bench.measure import (contention, cpu_delta, cpu_model, cpu_snapshot, machine_description,
                                 usable_cores)
from fastq.bench.tasks import REFERENCE, Task, task_from_dict

__all__ = ["Work", "Device", "Trainer", "Setting", "DEFAULT_SETTINGS", "FEEDERS", "DEFAULT_FEEDERS",
           "ideal_rate", "tight_rate", "steady_rate", "parse_settings", "run", "print_report", "write_json", "feed_child"]

CHUNK = 1000            # sum(range(CHUNK)): one "kernel launch" (10-20 us on a 2-core EPYC VM)
RUN_AHEAD = 2           # steps the trainer may queue ahead of the simulated device
COPY_GBPS = 25.0        # host-to-device copy bandwidth (PCIe 4.0 x16, pinned)
SKIP = 8                # batches not timed at the start of an epoch (ring fill, start-up)
TARGET = 0.95           # fastq's defaults reach >= 0.95 of the ideal in every setting


class Setting:
    """One trainer: ``launch_ms`` (C) of GIL-holding CPU and ``device_ms`` (D) on the
    simulated device per batch."""

    def __init__(self, name, launch_ms, device_ms):
        if not (0 <= launch_ms < math.inf and 0 <= device_ms < math.inf) or launch_ms + device_ms <= 0:
            raise BenchInputError(f"feed setting {name!r}: C and D must be >= 0 ms and not both 0, got "
                                  f"C={launch_ms}, D={device_ms}")
        self.name, self.launch_ms, self.device_ms = name, float(launch_ms), float(device_ms)

    def core_share(self, launch_ms=None):
        """C / max(C, D): the share of a core the trainer's launches take at full speed
        (``launch_ms``: C as measured, default the nominal one)."""
        c = self.launch_ms if launch_ms is None else launch_ms
        return c / max(c, self.device_ms)

    def to_dict(self):
        return {"name": self.name, "launch_ms": self.launch_ms, "device_ms": self.device_ms}


# Chosen for a 2-core machine where the reference task makes ~2500 img/s with 2 workers
# (25 ms per batch of 64, i.e. 50 ms of CPU): see benchmarks/README.md.
DEFAULT_SETTINGS = (
    Setting("gpu-bound", 2, 40),        # the device is the limit; the trainer barely uses a core
    Setting("launch-bound", 45, 50),    # C close to D: the trainer needs 0.9 of a core, the input ~1
    Setting("input-bound", 1, 10),      # a fast model: the input is the limit
    Setting("busy-input", 10, 25),      # input-bound while the trainer uses 0.4 of a core
)


def parse_settings(text):
    """"C:D,C:D" (milliseconds) or "name=C:D,..." -> [Setting]; BenchInputError on a bad one."""
    out = []
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, _, cd = part.rpartition("=")
        try:
            c, d = (float(x) for x in cd.split(":"))
        except ValueError:
            raise BenchInputError(f"feed settings: {part!r} is not C:D or name=C:D (milliseconds)") from None
        out.append(Setting(name or f"C{c:g}/D{d:g}", c, d))
    if not out:
        raise BenchInputError("feed settings: none given")
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise BenchInputError(f"feed settings: names repeat: {', '.join(names)}")
    return out


# ---------------------------------------------------------------------------
# the synthetic trainer
# ---------------------------------------------------------------------------

class Work:
    """A fixed amount of CPU that holds the GIL: ``spin(us)`` runs the number of
    ``sum(range(CHUNK))`` calls that took ``us`` microseconds when calibrated.  Each call
    is a C loop (the builtin ``sum`` over a ``range``) that never lets the GIL go; between
    calls the interpreter may hand it over, as it may between two framework ops."""

    def __init__(self, us_per_chunk):
        if not us_per_chunk > 0:
            raise ValueError(f"Work: us_per_chunk must be > 0, got {us_per_chunk!r}")
        self.us_per_chunk = float(us_per_chunk)

    @classmethod
    def calibrate(cls, reps=100, tries=20, warmup_s=0.3):
        """Time ``reps`` chunks ``tries`` times and keep the fastest (the least disturbed),
        after ``warmup_s`` of untimed ones (the CPU's clock and the interpreter warm up)."""
        best = None
        rng = range(CHUNK)
        end = time.perf_counter() + warmup_s
        while time.perf_counter() < end:
            sum(rng)
        for _ in range(tries):
            t = time.perf_counter()
            for _ in range(reps):
                sum(rng)
            dt = (time.perf_counter() - t) / reps
            best = dt if best is None else min(best, dt)
        return cls(best * 1e6)

    def chunks(self, us):
        return int(round(us / self.us_per_chunk))

    def spin(self, us):
        rng = range(CHUNK)
        for _ in range(self.chunks(us)):
            sum(rng)


def _sleep_until(t):
    d = t - time.perf_counter()
    if d > 0:
        time.sleep(d)


class Device:
    """A simulated accelerator: a copy engine and a compute stream, two threads that
    sleep without the GIL.

    ``copy(batch)`` queues the batch's host-to-device copy (``copy_s`` each, one at a
    time, never waiting for compute) after blocking while ``run_ahead`` steps are queued
    and not computed; the copy engine drops its reference to the batch as soon as the
    copy is done.  ``launch()`` says the step's kernels are all queued: the compute
    stream runs the step for ``compute_s`` from max(copy done, launch, previous step's
    end), in virtual time.  ``close()`` waits for the queued steps and returns their end
    times (perf_counter seconds).  One trainer thread calls copy / launch / close."""

    def __init__(self, compute_s, copy_s=0.0, run_ahead=RUN_AHEAD):
        if run_ahead < 1:
            raise ValueError(f"Device: run_ahead must be >= 1, got {run_ahead}")
        self.compute_s, self.copy_s, self.run_ahead = compute_s, copy_s, run_ahead
        self._ahead = threading.Semaphore(run_ahead)
        self._copies, self._copied, self._launches = queue.SimpleQueue(), queue.SimpleQueue(), queue.SimpleQueue()
        self.copies_done = 0      # batches whose copy is done (and reference dropped)
        self.queued = []          # when each step's copy was queued (the trainer got past run-ahead)
        self.ends = []            # compute end time of each step, in order
        self.starts = []          # (copy done, launched, compute start) of each step
        self._threads = [threading.Thread(target=self._copy_engine, name="feed-copy", daemon=True),
                         threading.Thread(target=self._compute_stream, name="feed-compute", daemon=True)]
        for t in self._threads:
            t.start()

    def copy(self, batch):
        self._ahead.acquire()
        t = time.perf_counter()
        self.queued.append(t)
        self._copies.put((batch, t))

    def launch(self):
        self._launches.put(time.perf_counter())

    def close(self):
        self._copies.put(None)
        self._launches.put(None)
        for t in self._threads:
            t.join()
        return self.ends

    def _copy_engine(self):
        free = 0.0
        while True:
            item = self._copies.get()
            if item is None:
                self._copied.put(None)
                return
            queued = item[1]
            done = max(queued, free) + self.copy_s
            free = done
            _sleep_until(done)
            del item  # the copy has read the batch: its memory may be reused now
            self.copies_done += 1
            self._copied.put(done)

    def _compute_stream(self):
        end = 0.0
        while True:
            copied = self._copied.get()
            launched = self._launches.get()
            if copied is None or launched is None:
                return
            start = max(copied, launched, end)
            end = start + self.compute_s
            self.starts.append((copied, launched, start))
            _sleep_until(end)
            self.ends.append(end)
            self._ahead.release()


class Trainer:
    """An eager training loop: ``step(batch)`` per batch (see the module docs).

    Records per step the wall time of the launches (``spin_s``: C of CPU work, longer
    when something takes the trainer's CPU), and in total the time spent waiting for
    the next batch (``input_wait_s``) and for the device (``device_wait_s``)."""

    def __init__(self, work, launch_us, device_us, run_ahead=RUN_AHEAD, copy_us=0.0):
        self.work, self.launch_us = work, launch_us
        self.device = Device(device_us * 1e-6, copy_us * 1e-6, run_ahead)
        self.spin_s = []
        self.input_wait_s = self.device_wait_s = 0.0
        self._last = None

    def step(self, batch):
        t0 = time.perf_counter()
        if self._last is not None:
            self.input_wait_s += t0 - self._last
        self.device.copy(batch)
        del batch
        t1 = time.perf_counter()
        self.device_wait_s += t1 - t0
        self.work.spin(self.launch_us)
        t2 = time.perf_counter()
        self.spin_s.append(t2 - t1)
        self.device.launch()
        self._last = time.perf_counter()

    def finish(self):
        """Wait for the device; the compute end time of every step."""
        return self.device.close()


def steady_rate(times, batch, skip):
    """Images/s from the end of batch number `skip` (1-based) to the last end time."""
    n = len(times)
    if skip < 1 or n < skip + 1:
        raise ValueError(f"steady_rate: {n} batch(es), need more than skip={skip}")
    return (n - skip) * batch / (times[-1] - times[skip - 1])


def tight_rate(trainer_alone, feeder_alone, launch_ms, batch, cores):
    """A tighter ideal for input-bound settings: the feeder alone on the CPU the trainer
    leaves when it runs at that very rate, min(trainer alone, x) with
    x = feeder alone x (cores - x / batch x C) / cores, i.e.
    x = feeder alone x cores / (cores + feeder alone x C / batch), C in seconds."""
    return min(trainer_alone, feeder_alone * cores / (cores + feeder_alone * launch_ms * 1e-3 / batch))


def ideal_rate(trainer_alone, feeder_alone, setting, cores, launch_ms=None):
    """The ideal: min(trainer alone, feeder alone x (cores - C/max(C, D)) / cores),
    with C = ``launch_ms`` when given (the launches' time measured in the trainer alone)."""
    return min(trainer_alone, feeder_alone * (cores - setting.core_share(launch_ms)) / cores)


# ---------------------------------------------------------------------------
# feeders: fastq.bench.peers, each giving run_epoch(consume) -> images
# ---------------------------------------------------------------------------

# key -> (label, peer of fastq.bench.peers it runs, fastq's worker_priority: a preset name,
#         WorkerPriority keyword arguments, or None for the default)
FEEDERS = {
    "fastq": ("fastq, defaults (worker_priority='background')", "fastq", None),
    "fastq_normal": ("fastq, worker_priority='normal'", "fastq", "normal"),
    "fastq_nice10": ("fastq, WorkerPriority(nice=10)", "fastq", {"nice": 10}),
    "fastq_idle": ("fastq, WorkerPriority(policy='idle')", "fastq", {"policy": "idle"}),
    "tfdata": ("tf.data native (AUTOTUNE)", "tfdata", None),
    "torch": ("torch DataLoader + torchvision v2", "torch", None),
}
DEFAULT_FEEDERS = ("fastq", "fastq_normal", "fastq_nice10", "tfdata", "torch")


def _feeder(key, paths, workers, task):
    """(run_epoch(consume=None) -> images, close or None, info() -> dict) of a feeder."""
    from fastq.bench.peers import PEERS, peer_fastq
    _, peer, prio = FEEDERS[key]
    if peer != "fastq":
        return PEERS[peer][1](paths, workers, task)
    import fastq
    if isinstance(prio, dict):
        prio = fastq.WorkerPriority(**prio)
    return peer_fastq(paths, workers, task, **({} if prio is None else {"worker_priority": prio}))


def _ready_batches(batches, task):
    """run_epoch(consume) of ready-made batches (one float32 array handed over `batches`
    times): the trainer alone."""
    import numpy as np
    one = np.zeros((task.batch, task.size, task.size, 3), np.float32)

    def run_epoch(consume):
        for _ in range(batches):
            consume(one)
        return batches * task.batch
    return run_epoch


def _train(run_epoch, work, s, cfg, copy_us, batch):
    """One epoch of `run_epoch` into a Trainer for setting `s` -> measurement dict."""
    tr = Trainer(work, s.launch_ms * 1e3, s.device_ms * 1e3, cfg["run_ahead"], copy_us)
    c0 = cpu_snapshot()
    n = run_epoch(tr.step)
    ends = tr.finish()
    c = cpu_delta(c0, cpu_snapshot())
    spins = tr.spin_s[cfg["skip"]:] or tr.spin_s
    return {"images_per_s": steady_rate(ends, batch, cfg["skip"]), "images": n, "cpu": c,
            "launch_s": statistics.median(spins) if s.launch_ms > 0 else None,
            "input_wait_share": tr.input_wait_s / c["wall_s"], "device_wait_share": tr.device_wait_s / c["wall_s"]}


def _alone(run_epoch, skip, batch):
    """One epoch of the feeder alone: its batches taken and dropped at once."""
    arrivals = []
    c0 = cpu_snapshot()
    n = run_epoch(lambda images: arrivals.append(time.perf_counter()))
    return {"images_per_s": steady_rate(arrivals, batch, skip), "images": n, "cpu": cpu_delta(c0, cpu_snapshot())}


def feed_child(key, round_index, cfg_path):
    """One feeder in this (fresh) process -> RESULT line: a warm-up epoch, then per
    setting (in an order rotated by `round_index`) the trainer's work calibrated, the
    trainer fed ready-made batches, the feeder alone, and the trainer fed by the
    feeder, back to back: the four are paired in time, as a shared machine's CPU
    speed drifts."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    task = task_from_dict(cfg["task"])
    settings = [Setting(**s) for s in cfg["settings"]]
    k = round_index % len(settings)
    settings = settings[k:] + settings[:k]
    B = task.batch
    copy_us = B * task.size * task.size * 3 * 4 / (cfg["copy_gbps"] * 1e3)
    workers = cfg["workers"] if key.startswith("fastq") else (cfg["workers"] or usable_cores())
    run_epoch, close, info = _feeder(key, cfg["paths"], workers, task)
    ready = _ready_batches(len(cfg["paths"]) // B, task)
    run_epoch(None)  # warm-up
    out = {"feeder": key, "trainer": {}, "alone": {}, "settings": {}}
    for s in settings:
        work = Work.calibrate()  # now: a shared machine's CPU speed drifts (its feeder is idle)
        out["trainer"][s.name] = dict(_train(ready, work, s, cfg, copy_us, B), us_per_chunk=work.us_per_chunk)
        out["alone"][s.name] = _alone(run_epoch, cfg["skip"], B)
        out["settings"][s.name] = _train(run_epoch, work, s, cfg, copy_us, B)
    out["info"] = info()
    if close is not None:
        close()
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# the run: rounds of every feeder, medians, ratios
# ---------------------------------------------------------------------------

def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def run(paths, *, feeders=None, settings=DEFAULT_SETTINGS, rounds=3, workers=None, run_ahead=RUN_AHEAD,
        copy_gbps=COPY_GBPS, batch=None, skip=SKIP, timeout=900, progress=True, out=print,
        data_description=None):
    """Measure the feeders under every setting; returns the result dict (what --json writes).

    feeders: keys of FEEDERS (default DEFAULT_FEEDERS); workers: fastq's (default: its
    own default) and tf.data / DataLoader's (default: usable cores); batch: the batch
    size (default the reference task's 64)."""
    from fastq.bench.runner import available, run_child
    keys = list(DEFAULT_FEEDERS if feeders is None else feeders)
    for k in keys:
        if k not in FEEDERS:
            raise BenchInputError(f"unknown feeder {k!r}; choose from {', '.join(FEEDERS)}")
    if rounds < 1:
        raise BenchInputError("rounds must be >= 1")
    if run_ahead < 1:
        raise BenchInputError("run-ahead must be >= 1")
    task = REFERENCE if batch is None else Task("reference", REFERENCE.size, batch=batch)
    batches = len(paths) // task.batch
    skip = min(skip, batches // 2)
    if skip < 1 or batches - skip < 2:
        raise BenchInputError(f"{len(paths)} images make {batches} batch(es) of {task.batch}; the feed "
                              f"benchmark times at least 2 batches after skipping 1 (use --images)")
    cores = usable_cores()
    work = Work.calibrate()
    not_installed = {k: f"{FEEDERS[k][0]}: not installed" for k in keys if not available(FEEDERS[k][1])}
    todo = [k for k in keys if k not in not_installed]
    load0 = os.getloadavg()
    out(f"feed: task reference ({task.describe()}); {len(paths)} images/epoch"
        f"{' (' + data_description + ')' if data_description else ''}; {batches - skip} batches timed "
        f"per epoch after {skip}")
    out(f"trainer per batch: C ms of CPU holding the GIL (sum(range({CHUNK})) calls, {work.us_per_chunk:.1f} us "
        f"each here now; each feeder process calibrates again before each setting), then D ms on a simulated "
        f"device (run-ahead {run_ahead} steps, copy "
        f"{task.batch * task.size * task.size * 12 / (copy_gbps * 1e6):.2f} ms per batch at {copy_gbps:g} GB/s); "
        f"{rounds} round(s), each feeder in its own process; {cores} usable core(s); "
        f"load average {load0[0]:.2f} {load0[1]:.2f}")
    for msg in not_installed.values():
        out(msg)
    results = {k: [] for k in todo}
    failed = {}
    order0 = todo
    with tempfile.TemporaryDirectory(prefix="fastq_feed_") as tmp:
        cfg_path = os.path.join(tmp, "cfg.json")
        with open(cfg_path, "w") as f:
            json.dump({"task": task.to_dict(), "paths": list(paths), "settings": [s.to_dict() for s in settings],
                       "skip": skip, "run_ahead": run_ahead, "copy_gbps": copy_gbps, "workers": workers}, f)
        for r in range(rounds):
            order = order0[r % len(order0):] + order0[:r % len(order0)]
            with _progress_bar(len(order), f"round {r + 1}/{rounds}", progress) as bar:
                for k in order:
                    bar.set_postfix_str(k)
                    if k not in failed:
                        res, err = run_child(["feed", k, str(r)], cfg_path, timeout)
                        if res is None:
                            failed[k] = err
                            _write(f"  round {r + 1}: {k}: FAILED ({err})", out)
                        else:
                            results[k].append(res)
                            _write(f"  round {r + 1}: {_round_line(k, res, settings)}", out)
                    bar.update(1)
    load1 = os.getloadavg()
    summary = _summarize(results, settings, cores, task.batch)
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "task": dict(task.to_dict(), description=task.describe(), images=len(paths), rounds=rounds,
                     data=data_description, timed_batches=batches - skip, skip=skip),
        "trainer": {"us_per_chunk_at_start": work.us_per_chunk, "chunk": CHUNK, "run_ahead": run_ahead,
                    "copy_gbps": copy_gbps, "settings": [s.to_dict() for s in settings]},
        "machine": {"description": machine_description(), "cpu": cpu_model(), "usable_cores": cores,
                    "cpu_count": os.cpu_count(), "workers": workers, "python": platform.python_version(),
                    "loadavg_start": load0, "loadavg_end": load1},
        "feeders": summary["feeders"], "trainer_alone": summary["trainer_alone"],
        "trainer_launch_ms": summary["trainer_launch_ms"], "regimes": summary["regimes"],
        "labels": {k: FEEDERS[k][0] for k in todo}, "order": todo, "not_installed": not_installed,
        "failed": failed, "target": TARGET, "runs": results,
    }


def _round_line(key, res, settings):
    parts = [f"{s.name} {res['settings'][s.name]['images_per_s']:.0f} (alone: trainer "
             f"{res['trainer'][s.name]['images_per_s']:.0f}, feeder {res['alone'][s.name]['images_per_s']:.0f})"
             for s in settings]
    return f"{key:13s} images/s fed: " + ", ".join(parts)


def _summarize(results, settings, cores, batch):
    """Medians over the rounds.  Per round, the ideals come from that process's own
    measurements (trainer alone and feeder alone just before the fed epoch); the
    ratios reported are the medians of the rounds' fed / ideal."""
    everyone = [r for runs in results.values() for r in runs]
    trainer = {s.name: _median(r["trainer"][s.name]["images_per_s"] for r in everyone) for s in settings}
    launch_ms = {s.name: _median(r["trainer"][s.name]["launch_s"] and r["trainer"][s.name]["launch_s"] * 1e3
                                 for r in everyone) for s in settings}
    feeders, regimes = {}, {}
    for k, runs in results.items():
        if not runs:
            continue
        per = {}
        for s in settings:
            ms = [r["settings"][s.name] for r in runs]
            ts = [r["trainer"][s.name] for r in runs]
            al = [r["alone"][s.name] for r in runs]
            took = [t["launch_s"] * 1e3 if t["launch_s"] else 0.0 for t in ts]
            ideals = [ideal_rate(t["images_per_s"], a["images_per_s"], s, cores, c) for t, a, c in zip(ts, al, took)]
            tights = [tight_rate(t["images_per_s"], a["images_per_s"], c, batch, cores)
                      for t, a, c in zip(ts, al, took)]
            ratios = [m["images_per_s"] / i for m, i in zip(ms, ideals)]
            stretch = [m["launch_s"] / t["launch_s"] for m, t in zip(ms, ts) if m["launch_s"] and t["launch_s"]]
            per[s.name] = {
                "images_per_s": _median(m["images_per_s"] for m in ms), "runs": [m["images_per_s"] for m in ms],
                "alone": _median(a["images_per_s"] for a in al), "alone_runs": [a["images_per_s"] for a in al],
                "trainer_alone": _median(t["images_per_s"] for t in ts), "ideal": _median(ideals),
                "ratio": _median(ratios), "ratio_runs": ratios, "tight": _median(tights),
                "tight_ratio": _median(m["images_per_s"] / i for m, i in zip(ms, tights)),
                "launch_stretch": _median(stretch),
                "input_wait_share": _median(m["input_wait_share"] for m in ms),
                "device_wait_share": _median(m["device_wait_share"] for m in ms),
                "own_cores": _median(m["cpu"]["own_cores"] for m in ms),
                "other_cores": _median(contention(m["cpu"]) for m in ms)}
        feeders[k] = {"alone": _median(a["images_per_s"] for r in runs for a in r["alone"].values()),
                      "settings": per, "info": runs[-1]["info"]}
    ref = feeders.get("fastq") or next(iter(feeders.values()), None)
    for s in settings:  # what limits a perfect feeder with fastq's rate alone (medians)
        t = trainer[s.name]
        if ref is None or t is None:
            regimes[s.name] = None
            continue
        x = tight_rate(math.inf, ref["settings"][s.name]["alone"], launch_ms[s.name] or 0.0, batch, cores)
        regimes[s.name] = ("both" if abs(x - t) <= 0.05 * min(x, t) else "input" if x < t else
                           "launches" if (launch_ms[s.name] or 0.0) >= s.device_ms else "device")
    return {"feeders": feeders, "trainer_alone": trainer, "trainer_launch_ms": launch_ms, "regimes": regimes}


_LIMITS = {"input": "the input", "launches": "the trainer (launches)", "device": "the trainer (device)",
           "both": "the trainer and the input alike (within 5 %)"}


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def print_report(res, out=print):
    """The tables of a :func:`run` result."""
    settings = [Setting(**s) for s in res["trainer"]["settings"]]
    cores = res["machine"]["usable_cores"]
    out("")
    out(f"ideal = min(trainer alone, feeder alone x ({cores} - C/max(C, D)) / {cores}), C as the trainer alone took "
        f"it; tight = min(trainer alone, x = feeder alone x ({cores} - x/batch x C) / {cores}): the "
        f"CPU the trainer leaves at the rate it gets; medians of {res['task']['rounds']} round(s), each ratio "
        f"paired within its round")
    for s in settings:
        reg = res["regimes"].get(s.name)
        out("")
        took = res["trainer_launch_ms"].get(s.name)
        out(f"{s.name}: C {s.launch_ms:g} ms (took {_f(took, '.1f')} ms in the trainer alone), D {s.device_ms:g} ms; "
            f"trainer alone {_f(res['trainer_alone'][s.name], '.0f')} images/s; limited by {_LIMITS.get(reg, '?')}")
        out(f"  {'feeder':50s} {'alone':>7s} {'fed':>7s} {'ideal':>7s} {'fed/ideal':>9s} {'fed/tight':>9s} "
            f"{'launch x':>8s} {'input wait':>10s} {'others':>6s}")
        for k in res["order"]:
            f = res["feeders"].get(k)
            if f is None:
                continue
            m = f["settings"][s.name]
            out(f"  {res['labels'][k]:50s} {_f(m['alone'], '7.0f')} {_f(m['images_per_s'], '7.0f')} "
                f"{_f(m['ideal'], '7.0f')} {_f(m['ratio'], '9.2f')} {_f(m['tight_ratio'], '9.2f')} "
                f"{_f(m['launch_stretch'], '8.2f')} "
                f"{_f(m['input_wait_share'] and 100 * m['input_wait_share'], '9.0f')}% "
                f"{_f(m['other_cores'], '6.2f')}")
    for k, msg in list(res["not_installed"].items()) + [(k, f"{k}: FAILED ({e})") for k, e in res["failed"].items()]:
        out(msg)
    f = res["feeders"].get("fastq")
    if f is not None:
        out("")
        for s in settings:
            m = f["settings"][s.name]
            if m["ratio"] is not None:
                out(f"target fastq defaults >= {res['target']:.2f} of the ideal, {s.name}: {m['ratio']:.3f} "
                    f"{'met' if m['ratio'] >= res['target'] else 'MISSED'} (of the tight ideal: "
                    f"{m['tight_ratio']:.3f})")
    out("launch x: a step's launches took this many times as long as in the trainer alone (medians); "
        "input wait: share of the epoch the trainer waited for a batch; others: cores other processes took")


def write_json(res, path, out=print):
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
        out(f"wrote {path}")
