"""``fastq bench``: end-to-end images/s of fastq and its peers on one task, one run.

The one implementation behind ``fastq bench`` and ``benchmarks/bench_images.py``.

Method: the run is made of ``rounds``; in each round every peer runs once, in a
fresh Python process (``python -m fastq.bench_peers``), in a rotated order: one
warm-up epoch (not timed), then one timed epoch.  An epoch is timed from the
creation of its iterator to the last batch; the consumer only counts the rows
of each batch and drops it.  A peer's figure is the MEDIAN of its rounds, and
ratios are fastq / peer within the same run.  CPU taken by other processes
(and hypervisor steal) during each timed epoch is read from /proc/stat; a round
where it exceeded ``BUSY_LIMIT`` cores is measured again (``retry_busy``) and
flagged if it stays contended.  Peers whose framework does not import are
reported as "not installed", never estimated.

Tasks and peers: see :mod:`fastq.bench_peers`.
"""
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from fastq.bench_peers import PEERS, TASKS, TFRECORD_PEERS, base_peer, peer_label

__all__ = ["BenchInputError", "DEFAULT_PEERS", "IMAGE_EXTENSIONS", "TASKS", "TFRecordInput", "available",
           "find_images", "find_tfrecords",
           "generated_dataset", "default_data_dir", "run", "print_report", "usable_cores"]

DEFAULT_PEERS = ("fastq", "tfdata", "tensorpack", "pyloop", "dali")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".pnm")
BUSY_LIMIT = 0.25  # cores used by others (other processes + steal) that make a run "contended"
TARGETS = (  # (name, numerator, denominator, target) -- issue 3's targets, reference task
    ("fastq / tf.data native", "fastq", "tfdata", 2.5),
    ("fastq / tf.data native, parallel = cores", "fastq", "tfdata_n", 2.5),
    ("fastq / DALI CPU", "fastq", "dali", 2.0),
    ("fastq(cores) / fastq(1)", "fastq", "fastq@1", 1.8),
)


class BenchInputError(ValueError):
    """Bad benchmark input (missing folder, no images, too few images...)."""


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------

def default_data_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastq", "bench_data")


class _NoBar:
    """Stands in for a tqdm bar when progress is off or tqdm is not installed."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass


def _progress_bar(total, desc, enabled):
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are optional
        return _NoBar()
    if not enabled:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="img" if "JPEG" in desc else "run", leave=False,
                file=sys.stderr, dynamic_ncols=True)


def _write(msg, out):
    """Print a line without breaking an active tqdm bar."""
    if out is not print:
        return out(msg)
    try:
        from tqdm import tqdm
    except ImportError:
        return print(msg, flush=True)
    tqdm.write(msg, file=sys.stdout)
    sys.stdout.flush()


def generated_dataset(n, data_dir=None, *, progress=True, out=print):
    """Paths of n generated JPEGs (fastq.testdata, seed 0), built once in
    data_dir/jpeg_<n>_seed0 and reused while its MANIFEST.json matches."""
    d = os.path.join(data_dir or default_data_dir(), f"jpeg_{n}_seed0")
    manifest = os.path.join(d, "MANIFEST.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
        paths = [os.path.join(d, p) for p in m["files"]]
        if len(paths) == n and all(os.path.getsize(p) == s for p, s in zip(paths, m["sizes"])):
            return paths
    except (OSError, ValueError, KeyError):
        pass
    from fastq import testdata
    out(f"building {n} JPEGs in {d} (fastq.testdata, seed 0) ...")
    t = time.perf_counter()
    with _progress_bar(n, "generating JPEGs", progress) as bar:
        paths = testdata.make_jpeg_dataset(d, n, seed=0, progress=lambda i: bar.update(1))
    with open(manifest, "w") as f:
        json.dump({"files": [os.path.basename(p) for p in paths],
                   "sizes": [os.path.getsize(p) for p in paths],
                   "photos": [os.path.basename(p) for p in testdata.source_photos()]}, f)
    out(f"  done in {time.perf_counter() - t:.1f} s")
    return paths


def _is_image(p):
    return p.lower().endswith(IMAGE_EXTENSIONS) and os.path.isfile(p)


def find_images(spec):
    """Image paths from a folder (searched recursively), a glob pattern, or a
    text file listing one path per line (relative paths are relative to the
    list's folder).  Sorted; raises BenchInputError with the reason."""
    if any(c in spec for c in "*?["):
        found = sorted(p for p in glob.glob(spec, recursive=True) if _is_image(p))
        if not found:
            raise BenchInputError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) match {spec!r}")
        return found
    if not os.path.exists(spec):
        raise BenchInputError(f"{spec}: no such file or folder")
    if os.path.isdir(spec):
        found = []
        for root, dirs, files in os.walk(spec):
            dirs.sort()
            found += [os.path.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
        if not found:
            raise BenchInputError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) found under {spec}")
        return sorted(found)
    if spec.lower().endswith(IMAGE_EXTENSIONS):
        return [spec]
    base = os.path.dirname(os.path.abspath(spec))
    try:
        with open(spec, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f]
    except (OSError, UnicodeDecodeError) as e:
        raise BenchInputError(f"{spec}: cannot read it as a file list ({e})") from None
    paths = [ln if os.path.isabs(ln) else os.path.normpath(os.path.join(base, ln))
             for ln in lines if ln and not ln.startswith("#")]
    if not paths:
        raise BenchInputError(f"{spec}: the file list is empty")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise BenchInputError(f"{spec}: {len(missing)} listed file(s) do not exist, first: {missing[0]}")
    return paths


# TFRecord shard names: TF's ImageNet scripts write "train-00000-of-01024"; others
# use a .tfrecord / .tfrecords / .tfrec extension.
TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")
_SHARD_NAME = re.compile(r"-\d+-of-\d+$")


def _is_shard_name(p):
    name = os.path.basename(p)
    return name.lower().endswith(TFRECORD_EXTENSIONS) or bool(_SHARD_NAME.search(name))


def find_tfrecords(spec):
    """TFRecord shard paths (sorted) if `spec` names TFRecord shards: a glob whose
    matches are all shard files, a shard file, or a folder (searched recursively)
    holding shard files and no image files.  None otherwise."""
    if any(c in spec for c in "*?["):
        found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
        return found if found and all(_is_shard_name(p) for p in found) else None
    if os.path.isfile(spec):
        return [spec] if _is_shard_name(spec) else None
    if os.path.isdir(spec):
        shards, images = [], False
        for root, dirs, files in os.walk(spec):
            dirs.sort()
            shards += [os.path.join(root, f) for f in files if _is_shard_name(f)]
            images = images or any(f.lower().endswith(IMAGE_EXTENSIONS) for f in files)
        return sorted(shards) if shards and not images else None
    return None


class TFRecordInput:
    """The records a benchmark reads from TFRecord shards: the first `images`
    records in shard order (all by default), indexed once here with fastq's
    framing scanner (lengths and CRCs of the framing only).

    Attributes: shards (those that hold chosen records), offsets / framed (per
    shard: record offsets and framed sizes), records, all_jpeg (whether every
    image checked -- the first 256 records -- is a JPEG, which picks tf.data's
    decode_and_crop_jpeg path)."""

    def __init__(self, shards, images=None, image_key="image/encoded", label_key="image/class/label"):
        from fastq import _image
        from fastq.bench_peers import parse_example
        self.image_key, self.label_key = image_key, label_key
        self.all_shards = list(shards)
        self.shards, self.offsets, self.framed = [], [], []
        left = images if images else None
        total = 0
        for path in self.all_shards:
            try:
                offs, lens, tail = _image.tfrecord_scan(path)
            except (OSError, ValueError, RuntimeError) as e:
                raise BenchInputError(f"{path}: cannot read it as a TFRecord shard ({e})") from None
            if tail is not None:
                raise BenchInputError(f"{path}: not a valid TFRecord shard after record {len(offs)}: {tail[1]}")
            total += len(offs)
            if left is not None:
                offs, lens = offs[:left], lens[:left]
                left -= len(offs)
            if len(offs):
                self.shards.append(path)
                self.offsets.append([int(o) for o in offs])
                self.framed.append([int(n) + 16 for n in lens])
        self.total = total
        self.records = sum(len(o) for o in self.offsets)
        if not self.records:
            raise BenchInputError(f"the TFRecord shards hold no records: {', '.join(self.all_shards)}")
        checked = 0
        self.all_jpeg = True
        with open(self.shards[0], "rb") as f:
            for off, framed in zip(self.offsets[0][:256], self.framed[0][:256]):
                f.seek(off + 12)
                ex = parse_example(f.read(framed - 16), {image_key, label_key})
                where = f"{self.shards[0]}: record {checked}"
                if not ex.get(image_key) or not ex.get(label_key):
                    raise BenchInputError(f"{where}: the tf.train.Example has no {image_key!r} bytes feature or "
                                          f"no {label_key!r} int64 feature")
                self.all_jpeg = self.all_jpeg and ex[image_key][0][:3] == b"\xff\xd8\xff"
                checked += 1

    def __len__(self):
        return self.records

    def write_index(self, folder):
        """One DALI-style text index per shard ("offset framed_size" per line) -> paths."""
        out = []
        for k, (offs, framed) in enumerate(zip(self.offsets, self.framed)):
            p = os.path.join(folder, f"shard{k:05d}.idx")
            with open(p, "w") as f:
                f.writelines(f"{o} {n}\n" for o, n in zip(offs, framed))
            out.append(p)
        return out


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
    """Run ``python -m fastq.bench_peers *args cfg`` -> (result dict, None) or (None, error)."""
    cmd = [sys.executable, "-m", "fastq.bench_peers", *args, cfg_path]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
    return None, f"exit code {r.returncode}:\n{tail}"


def contention(c):
    return (c["other_cores"] or 0.0) + (c["steal_cores"] or 0.0)


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


def check_peers(peers):
    """Peer keys, validated ("fastq1" -> "fastq@1"); BenchInputError names an unknown one."""
    out = []
    for p in peers:
        p = "fastq@1" if p == "fastq1" else p
        if base_peer(p) not in PEERS or (p.startswith("fastq@") and not (p[6:].isdigit() and int(p[6:]) > 0)):
            raise BenchInputError(f"unknown peer {p!r}; choose from {', '.join(PEERS)} (or fastq@N)")
        out.append(p)
    return out


def run(paths, *, task="reference", peers=DEFAULT_PEERS, workers=None, rounds=3, scaling=(), profile=False,
        profile_images=300, retry_busy=1, timeout=900, progress=True, out=print, data_description=None):
    """Measure the peers on `paths` (image files, or a :class:`TFRecordInput`);
    returns the result dict (what --json writes).

    peers: keys of fastq.bench_peers.PEERS, plus "fastq@N" (fastq with N workers;
    "fastq1" is "fastq@1").  scaling: worker counts, each measured as "fastq@N"
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
    for p in check_peers(peers):
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
    todo = [p for p in keys if p not in not_installed and p not in not_available]
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
        if profile and task == "reference" and tfr is not None:
            out("the single-thread stage profile reads image files; not run for TFRecord input")
        elif profile and task == "reference":
            out("profiling (one thread) ...")
            prof, err = run_child(["profile"], cfg_path, timeout)
            if prof is None:
                out(f"  profile FAILED ({err})")
    load1 = os.getloadavg()

    summary = {p: _summarize(p, runs) for p, runs in results.items() if runs}
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
        "ratios": ratios, "scaling": scaling_out, "profile": prof,
    }


def _verdict(value, target):
    if value >= target:
        return f"met (>= {target:.1f}x)"
    return (f"MISSED: {value:.2f}x vs {target:.1f}x target, short by {target - value:.2f}x "
            f"({(1 - value / target) * 100:.0f} %)")


def write_outputs(res, json_path=None, plot_path=None, out=print):
    """Write a run's result as JSON and/or as the PNG chart (fastq.bench_plot)."""
    if json_path:
        import json
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)
        out(f"wrote {json_path}")
    if plot_path:
        from fastq.bench_plot import plot
        plot(res, plot_path)
        out(f"wrote {plot_path}")


def print_report(res, out=print, show_targets=False):
    """The table (one row per peer), ratios, scaling, profile."""
    summary, workers = res["peers"], res["machine"]["fastq_workers"]
    out("")
    out(f"{'peer':40s} {'images/s':>9s} {'runs (min-max)':>15s} {'fastq/peer':>10s} {'peak RSS':>9s}"
        f" {'CPU us/img':>10s} {'cores own/others':>16s}")
    for p in res["order"]:
        if p in summary:
            s = summary[p]
            ratio = f"{s['fastq_over_peer']:9.2f}x" if s["fastq_over_peer"] else "         -"
            oth = "-" if s["other_cores"] is None else f"{s['other_cores'] + (s['steal_cores'] or 0):.2f}"
            out(f"{s['label']:40s} {s['images_per_s']:9.0f} {min(s['runs']):7.0f}-{max(s['runs']):<7.0f} "
                f"{ratio} {s['peak_rss_mb']:7.0f}MB {s['cpu_us_per_image']:10.0f} "
                f"{s['own_cores']:8.2f}/{oth:<7s}")
        elif p in res["not_installed"] or p in res["failed"] or p in res.get("not_available", {}):
            why = "not installed" if p in res["not_installed"] else \
                "FAILED" if p in res["failed"] else "n/a for TFRecord"
            out(f"{peer_label(p, workers):40s} {'-':>9s} {why:>15s}")
    out("fastq/peer = fastq(workers=%d) images/s / peer images/s, same run; images/s = median of the rounds;\n"
        "CPU us/img = the peer process's CPU time per image (all threads); cores own/others = cores busy\n"
        "with this peer / with other processes + hypervisor steal during its timed epochs." % workers)
    if show_targets and res["task"]["name"] == "reference":
        out("\nratios (same run) against issue 3's targets:")
        for name, num, den, target in TARGETS:
            r = res["ratios"].get(name)
            if r:
                out(f"  {name:42s} {r['value']:5.2f}x  {_verdict(r['value'], r['target'])}")
            elif den in res["not_installed"] or den in res["failed"]:
                out(f"  {name:42s}   n/a  target >= {target:.1f}x: not measured ({den} "
                    f"{'not installed' if den in res['not_installed'] else 'failed'})")
    if res["scaling"]:
        base = res["scaling"].get("1")
        out("\nscaling (fastq, images/s by workers): " + ", ".join(
            f"{n}: {v:.0f}" + (f" ({v / base:.2f}x)" if base else "") for n, v in res["scaling"].items()))
    load0, load1 = res["machine"]["loadavg_start"], res["machine"]["loadavg_end"]
    out(f"load average at start {load0[0]:.2f}, at end {load1[0]:.2f} (1 min)")
    for p, s in summary.items():
        if s["contended_runs"]:
            again = " even after re-measuring" if s["measurements"] > len(s["runs"]) else ""
            out(f"note: {s['contended_runs']} of {len(s['runs'])} runs of {s['label']} shared the CPUs with "
                f"other work (> {BUSY_LIMIT} cores){again}; those runs read low")
    fqinfo = summary.get("fastq", {}).get("info") or {}
    if fqinfo.get("stages"):
        from fastq.stages import format_stages
        out("\nfastq pipeline stages (pipeline.stats()['stages'] of the last round's fastq process: warm-up + "
            "timed epoch, summed over workers):")
        for line in format_stages(fqinfo["stages"]):
            out("  " + line)
    if res.get("profile"):
        from fastq.bench_profile import print_profile
        print_profile(res["profile"], summary, workers, out=out)
    for p, err in res["failed"].items():
        out(f"failed: {peer_label(p, workers)}: {err}")
