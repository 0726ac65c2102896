"""``fastq bench``: end-to-end images/s of fastq and its peers on one task, one run.

The one implementation behind ``fastq bench`` and ``benchmarks/bench_images.py``.

Method: the run is made of ``rounds``; in each round every peer runs once, in a
fresh Python process (``python -m fastq.bench.child``), in a rotated order: one
warm-up epoch (not timed), then one timed epoch.  An epoch is timed from the
creation of its iterator to the last batch; the consumer only counts the rows
of each batch and drops it.  A peer's figure is the MEDIAN of its rounds, and
ratios are fastq / peer within the same run.  CPU taken by other processes
(and hypervisor steal) during each timed epoch is read from /proc/stat; a round
where it exceeded ``BUSY_LIMIT`` cores is measured again (``retry_busy``) and
flagged if it stays contended.  Peers whose framework does not import are
reported as "not installed", never estimated.

Tasks: :mod:`fastq.bench.tasks`; peers: :mod:`fastq.bench.peers`; the table:
:mod:`fastq.bench.report`.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from fastq.bench.data import BenchInputError, TFRecordInput, _progress_bar, _write
from fastq.bench.measure import contention, cpu_model, machine_description, usable_cores
from fastq.bench.peers import PEERS, TFRECORD_PEERS, base_peer, peer_label
from fastq.bench.tasks import TASKS

__all__ = ["DEFAULT_PEERS", "BUSY_LIMIT", "TARGETS", "available", "check_peers", "default_peers", "run",
           "run_child"]

DEFAULT_PEERS = ("fastq", "tfdata", "tensorpack", "pyloop", "dali")
BUSY_LIMIT = 0.25  # cores used by others (other processes + steal) that make a run "contended"
TARGETS = (  # (name, numerator, denominator, target) -- the reference task's targets
    ("fastq / tf.data native", "fastq", "tfdata", 2.5),
    ("fastq / tf.data native, parallel = cores", "fastq", "tfdata_n", 2.5),
    ("fastq / DALI CPU", "fastq", "dali", 2.0),
    ("fastq(cores) / fastq(1)", "fastq", "fastq@1", 1.8),
)


# ---------------------------------------------------------------------------
# running peers
# ---------------------------------------------------------------------------

def available(peer):
    """True if the peer's framework imports here (checked without importing it)."""
    import importlib.util
    for mod in PEERS[base_peer(peer)][2]:
        try:
            if importlib.util.find_spec(mod) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def _child_env():
    import fastq
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_child(args, cfg_path, timeout):
    """Run ``python -m fastq.bench.child *args cfg`` -> (result dict, None) or (None, error)."""
    cmd = [sys.executable, "-m", "fastq.bench.child", *args, cfg_path]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
    return None, f"exit code {r.returncode}:\n{tail}"


def _median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _summarize(key, runs):
    rates = [x for res in runs for x in res["rates"]]
    return {
        "label": peer_label(key, runs[0]["workers"]), "images_per_s": statistics.median(rates), "runs": rates,
        "images_per_epoch": runs[0]["images_per_epoch"][0], "workers": runs[0]["workers"],
        "peak_rss_mb": max(res["peak_rss_kb"] for res in runs) / 1024,
        "rss_after_setup_mb": statistics.median(res["rss_built_kb"] for res in runs) / 1024,
        "rss_bare_python_mb": statistics.median(res["rss_start_kb"] for res in runs) / 1024,
        "rss_after_import_mb": statistics.median(res["rss_import_kb"] for res in runs) / 1024,
        "info": runs[-1]["info"],
        "cpu_us_per_image": statistics.median(c["cpu_us_per_image"] for res in runs for c in res["cpu"]),
        "own_cores": statistics.median(c["own_cores"] for res in runs for c in res["cpu"]),
        "other_cores": _median_or_none(c["other_cores"] for res in runs for c in res["cpu"]),
        "steal_cores": _median_or_none(c["steal_cores"] for res in runs for c in res["cpu"]),
        "contended_runs": sum(res["contended"] for res in runs),
        "measurements": sum(res["attempts"] for res in runs),
    }


def default_peers(task):
    """The peers ``fastq bench --task TASK`` runs when --peers is not given: DEFAULT_PEERS,
    or for an augmentation preset the peers that implement it (tfdata_n only on request)."""
    t = TASKS[task] if isinstance(task, str) else task
    if t.peers is None:
        return list(DEFAULT_PEERS)
    return [p for p in t.peers if p != "tfdata_n"]


def check_peers(peers):
    """Peer keys, validated ("fastq1" -> "fastq@1"); BenchInputError names an unknown one."""
    out = []
    for p in peers:
        p = "fastq@1" if p == "fastq1" else p
        if base_peer(p) not in PEERS or (p.startswith("fastq@") and not (p[6:].isdigit() and int(p[6:]) > 0)):
            raise BenchInputError(f"unknown peer {p!r}; choose from {', '.join(PEERS)} (or fastq@N)")
        out.append(p)
    return out


def run(paths, *, task="reference", peers=None, workers=None, rounds=3, scaling=(), profile=False,
        profile_images=300, retry_busy=1, timeout=900, progress=True, out=print, data_description=None):
    """Measure the peers on `paths` (image files, or a :class:`TFRecordInput`);
    returns the result dict (what --json writes).

    peers: keys of fastq.bench.peers.PEERS, plus "fastq@N" (fastq with N workers;
    "fastq1" is "fastq@1"); None: :func:`default_peers` of the task.  scaling: worker counts, each measured as "fastq@N"
    ("fastq" itself when N == workers)."""
    if task not in TASKS:
        raise BenchInputError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    t = TASKS[task]
    tfr = paths if isinstance(paths, TFRecordInput) else None
    if len(paths) < t.batch:
        raise BenchInputError(f"{len(paths)} image(s) found; a benchmark epoch needs at least one batch "
                              f"of {t.batch}")
    if rounds < 1:
        raise BenchInputError("rounds must be >= 1")
    cores = usable_cores()
    workers = workers or cores
    keys = []
    for p in check_peers(default_peers(t) if peers is None else peers):
        if p == f"fastq@{workers}":
            p = "fastq"
        if p not in keys:
            keys.append(p)
    scaling = sorted({int(n) for n in scaling})
    if any(n < 1 for n in scaling):
        raise BenchInputError("--scaling worker counts must be >= 1")
    for n in scaling:
        k = "fastq" if n == workers else f"fastq@{n}"
        if k not in keys:
            keys.append(k)
    load0 = os.getloadavg()
    out(f"task {task}: {t.describe()}; {len(paths)} images/epoch"
        f"{' (' + data_description + ')' if data_description else ''}")
    out(f"{rounds} round(s) x (warm-up + 1 timed epoch), each peer in its own process, median; "
        f"{cores} usable core(s), fastq workers={workers}; load average {load0[0]:.2f} {load0[1]:.2f}")

    not_installed = {p: f"{PEERS[base_peer(p)][0]}: not installed ({', '.join(PEERS[base_peer(p)][2])} "
                        f"does not import)" for p in keys if not available(p)}
    not_available = {}
    if tfr is not None:
        not_available = {p: f"{peer_label(p, workers)}: not available for TFRecord input" for p in keys
                         if p not in not_installed and base_peer(p) not in TFRECORD_PEERS}
    if t.peers is not None:  # an augmentation preset: only the peers that implement it
        not_available.update({p: f"{peer_label(p, workers)}: not available for task {task} (runs only on "
                                  f"{', '.join(t.peers)})" for p in keys
                              if p not in not_installed and p not in not_available and base_peer(p) not in t.peers})
    todo = [p for p in keys if p not in not_installed and p not in not_available]
    notes = {}
    if t.aug:
        from fastq.bench.tasks import augment_chain
        note = augment_chain(t)[1]
        if note:
            notes["fastq"] = note
            out(f"NOTE fastq chain: {note}")
    for msg in list(not_installed.values()) + list(not_available.values()):
        out(msg)

    def peer_workers(p):
        return int(p.split("@")[1]) if "@" in p else workers

    results = {p: [] for p in todo}
    failed = {}
    prof = None
    with tempfile.TemporaryDirectory(prefix="fastq_bench_") as tmp:
        cfg_path = os.path.join(tmp, "cfg.json")
        cfg = {"task": t.to_dict(), "epochs": 1, "profile_images": min(profile_images, len(paths)),
               "profile_passes": 3}
        if tfr is not None:
            cfg["paths"] = []
            cfg["tfrecord"] = {"shards": tfr.shards, "index_files": tfr.write_index(tmp), "records": len(tfr),
                               "all_jpeg": tfr.all_jpeg, "image_key": tfr.image_key, "label_key": tfr.label_key}
        else:
            cfg["paths"] = list(paths)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        for r in range(rounds):
            order = todo[r % len(todo):] + todo[:r % len(todo)] if todo else []
            with _progress_bar(len(order), f"round {r + 1}/{rounds}", progress) as bar:
                for p in order:
                    bar.set_postfix_str(peer_label(p, workers))
                    if p in failed:
                        bar.update(1)
                        continue
                    for attempt in range(retry_busy + 1):
                        res, err = run_child([p, str(peer_workers(p))], cfg_path, timeout)
                        if res is None:
                            failed[p] = err
                            _write(f"  round {r + 1}: {peer_label(p, workers)}: FAILED ({err})", out)
                            break
                        c = res["cpu"][0]
                        res["contended"] = contention(c) > BUSY_LIMIT
                        res["attempts"] = attempt + 1
                        oth = "" if c["other_cores"] is None else \
                            f", other processes {c['other_cores']:.2f}, steal {c['steal_cores']:.2f}"
                        again = res["contended"] and attempt < retry_busy
                        msg = (f"  round {r + 1}: {peer_label(p, workers):38s} {res['rates'][0]:8.0f} images/s "
                               f"(warm-up {res['warmup_rate']:.0f}; cores used: own {c['own_cores']:.2f}{oth})"
                               f"{'  -> busy machine, measuring again' if again else ''}")
                        _write(msg, out)
                        if not again:
                            results[p].append(res)
                            break
                    bar.update(1)
        profiled = task in ("reference", "hires")  # the reference chain (hires: on camera-like files)
        if profile and profiled and tfr is not None:
            out("the single-thread stage profile reads image files; not run for TFRecord input")
        elif profile and profiled:
            out("profiling (one thread) ...")
            prof, err = run_child(["profile"], cfg_path, timeout)
            if prof is None:
                out(f"  profile FAILED ({err})")
        elif profile:
            out("the single-thread stage profile runs for the reference and hires tasks only")
    load1 = os.getloadavg()

    summary = {p: _summarize(p, runs) for p, runs in results.items() if runs}
    for p, s in summary.items():
        if t.aug == "randaugment" and base_peer(p) in ("tfdata", "tfdata_n"):
            s["label"] = s["label"].replace("tf.data native", "tf.data + keras RandAugment")
        if base_peer(p) in notes:
            s["label"] += f" [{notes[base_peer(p)].split(' (')[0]}]"
    fq = summary.get("fastq", {}).get("images_per_s")
    for s in summary.values():
        s["fastq_over_peer"] = fq / s["images_per_s"] if fq else None
    ratios = {}
    if task == "reference":
        for name, num, den, target in TARGETS:
            if num in summary and den in summary:
                v = summary[num]["images_per_s"] / summary[den]["images_per_s"]
                ratios[name] = {"value": v, "target": target, "met": v >= target}
    scaling_out = {}
    for n in scaling:
        k = "fastq" if n == workers else f"fastq@{n}"
        if k in summary:
            scaling_out[str(n)] = summary[k]["images_per_s"]
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "task": dict(t.to_dict(), description=t.describe(), images=len(paths), rounds=rounds,
                     data=data_description),
        "machine": {"description": machine_description(), "cpu": cpu_model(), "usable_cores": cores,
                    "cpu_count": os.cpu_count(), "fastq_workers": workers, "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg_start": load0, "loadavg_end": load1},
        "input": ({"kind": "tfrecord", "shards": tfr.shards, "records": len(tfr), "records_in_shards": tfr.total,
                   "readers": {p: TFRECORD_PEERS[base_peer(p)] for p in todo}}
                  if tfr is not None else {"kind": "files", "files": len(paths)}),
        "peers": summary, "order": [p for p in keys], "not_installed": not_installed,
        "not_available": not_available, "failed": failed,
        "ratios": ratios, "scaling": scaling_out, "profile": prof, "notes": notes,
    }
