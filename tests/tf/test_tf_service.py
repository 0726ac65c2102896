"""tf.data service with fastq's op: a dispatcher and workers as SEPARATE processes on
127.0.0.1 (an in-process WorkerServer would hide what only a process boundary shows:
every op and callback must exist in the worker's own binary).

The trainer is tests/helpers/tf_service_scenario.py, also its own process, so each scenario is
bounded by a subprocess timeout; it compares every element it receives with a fastq
Pipeline over the same files.  Every server runs with --timeout and is terminated
(then killed) by the fixture that started it.
"""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.slow]

import tensorflow as tf  # noqa: E402,F401  (collected only where TensorFlow is installed)

import fastq.tf.ops as fqt  # noqa: E402
from fastq.bench import testdata  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIO = os.path.join(ROOT, "tests", "helpers", "tf_service_scenario.py")
SERVER_LIFETIME = 600  # seconds: every server stops by itself after this at the latest
N = 16


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return e


class Proc:
    """A server process whose stdout lines are collected by a thread."""

    def __init__(self, args):
        self.p = subprocess.Popen(args, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        self.lines = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.p.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not seen (exit {self.p.poll()}); output:\n" + "\n".join(self.lines[-40:]))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(15)


def fastq_cmd(*args):
    return [sys.executable, "-m", "fastq", *args, "--timeout", str(SERVER_LIFETIME)]


def start_service(n_workers, *, worker_cmd=None):
    """(dispatcher address, [processes]) with n_workers registered."""
    procs = []
    try:
        d = Proc(fastq_cmd("serve-dispatcher", "--port", "0"))
        procs.append(d)
        port = d.wait_for("fastq serve-dispatcher: ready").rsplit(":", 1)[1]
        address = f"127.0.0.1:{port}"
        for _ in range(n_workers):
            w = Proc(worker_cmd(address) if worker_cmd else
                     fastq_cmd("serve-worker", "--dispatcher", address, "--advertise", "127.0.0.1"))
            procs.append(w)
        for w in procs[1:]:
            w.wait_for("ready")
        d.wait_for(f"{n_workers} worker(s) registered")
        return address, procs
    except BaseException:
        for p in procs:
            p.stop()
        raise


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    fqt.build()  # once, before the servers start, so they find it in the cache
    d = tmp_path_factory.mktemp("svc_jpegs")
    paths = testdata.make_jpeg_dataset(str(d), N, seed=5, min_side=64, max_side=160)
    f = d / "files.json"
    f.write_text(json.dumps(paths))
    return str(f), paths


@pytest.fixture(scope="module")
def service(files):
    address, procs = start_service(2)
    yield address
    for p in procs:
        p.stop()


def trainer(mode, address, files_json, *args, timeout=300):
    r = subprocess.run([sys.executable, SCENARIO, mode, f"grpc://{address}", files_json, *args], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["counts"] = {int(k): v for k, v in out["counts"].items()}
    return out


def test_off_sharding_two_workers_equal_local(service, files):
    out = trainer("off", service, files[0])
    assert out["error"] is None and out["mismatch"] == []
    # OFF: each of the two workers produces the whole dataset; every element is the Pipeline's
    assert out["counts"] == {i: 2 for i in range(N)}


def test_dynamic_sharding_visits_every_index_exactly_once(service, files):
    out = trainer("dynamic", service, files[0])
    assert out["error"] is None and out["mismatch"] == []
    assert out["counts"] == {i: 1 for i in range(N)}


def test_compression_off_gives_the_same_elements(service, files):
    out = trainer("dynamic", service, files[0], "--compression", "NONE")
    assert out["error"] is None and out["mismatch"] == [] and out["counts"] == {i: 1 for i in range(N)}


def test_worker_without_the_op_is_a_clear_error(files):
    def plain_worker(address):  # a stock tf.data service worker: fastq's op not loaded
        code = ("import time, tensorflow as tf; s = tf.data.experimental.service; "
                f"w = s.WorkerServer(s.WorkerConfig(dispatcher_address={address!r}, "
                "worker_address='127.0.0.1:%port%')); print('plain worker ready', flush=True); "
                f"time.sleep({SERVER_LIFETIME})")
        return [sys.executable, "-c", code]

    address, procs = start_service(1, worker_cmd=plain_worker)
    try:
        out = trainer("off", address, files[0], "--stall-timeout", "60")
    finally:
        for p in procs:
            p.stop()
    assert out["elements"] == 0 and out["error"] is not None
    assert "Op type not registered 'FastqDecodeAugment'" in out["error"], out["error"]


def test_worker_killed_mid_epoch_neither_hangs_nor_crashes(files, tmp_path):
    paths = files[1] * 6  # 96 samples (indices 0..95; the files repeat)
    f = tmp_path / "files96.json"
    f.write_text(json.dumps(paths))
    address, procs = start_service(2)
    try:
        victim = procs[1].p.pid
        t0 = time.monotonic()
        out = trainer("dynamic", address, str(f), "--kill-pid", str(victim), "--kill-after", "3",
                      "--stall-timeout", "20", timeout=400)
        took = time.monotonic() - t0
        assert procs[1].p.wait(30) == -9  # the worker really died
    finally:
        for p in procs:
            p.stop()
    assert out["killed"] and out["mismatch"] == []
    # at most once: no index twice; what the dead worker held is lost and counted
    assert all(v == 1 for v in out["counts"].values())
    lost = len(paths) - len(out["counts"])
    assert 0 <= lost < len(paths) and len(out["counts"]) >= 3 * 4
    # TF's client waits forever for the dead worker's task; fastq.tf.serve.iterate ends the epoch
    assert out["error"] is None or out["error"].startswith("ServiceStalledError"), out["error"]
    print(f"worker killed after 3 batches: {len(out['counts'])} of {len(paths)} samples received, {lost} lost, "
          f"trainer done in {took:.0f} s")


def test_iterate_bounds_a_stalled_stream_and_passes_errors_on():
    from fastq.tf.serve import ServiceStalledError, iterate
    release = threading.Event()

    def stalls():
        yield 1
        yield 2
        release.wait(60)  # a dead worker: nothing more, no end

    t0 = time.monotonic()
    got = []
    with pytest.raises(ServiceStalledError, match="for 1 s after 2 element"):
        for x in iterate(stalls(), stall_timeout=1.0):
            got.append(x)
    release.set()
    assert got == [1, 2] and time.monotonic() - t0 < 20
    assert list(iterate(iter(range(5)), stall_timeout=5)) == [0, 1, 2, 3, 4]

    def fails():
        yield "a"
        raise tf.errors.InvalidArgumentError(None, None, "sample index 7: corrupt")

    with pytest.raises(tf.errors.InvalidArgumentError, match="sample index 7"):
        list(iterate(fails(), stall_timeout=5))
    with pytest.raises(ValueError, match="stall_timeout"):
        next(iterate([], stall_timeout=0))


def test_worker_refuses_a_malformed_dispatcher_address():
    for bad in ("127.0.0.1:", "localhost", "a:b"):
        r = subprocess.run([sys.executable, "-m", "fastq", "serve-worker", "--dispatcher", bad, "--timeout", "5"],
                           cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "--dispatcher must be HOST:PORT" in r.stderr, (bad, r.stderr[-500:])


def test_worker_that_cannot_reach_its_dispatcher_still_ends_by_its_timeout():
    # TF blocks in the worker's first registration, holding the GIL: --timeout is enforced by SIGALRM
    t0 = time.monotonic()
    r = subprocess.run(fastq_cmd("serve-worker", "--dispatcher", "127.0.0.1:1", "--advertise", "127.0.0.1")[:-1]
                       + ["3"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=200)
    took = time.monotonic() - t0
    assert r.returncode in (0, -14), (r.returncode, r.stderr[-1000:])  # -14: SIGALRM
    assert took < 3 + 30 + 60, took
