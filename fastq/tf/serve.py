"""tf.data service processes for datasets that use fastq's TensorFlow op.

    fastq serve-dispatcher --port 5050
    fastq serve-worker --dispatcher dispatcher-host:5050 --port 5051 --advertise this-host

A worker runs the dataset graphs that trainers send it.  A graph that contains
``FastqDecodeAugment`` (:func:`fastq.tf.ops.decode_augment`, :func:`~fastq.tf.ops.decode_augment_files`) needs the op registered
in the worker's process, which is what ``serve-worker`` does first (it builds the
kernel for the worker's TensorFlow at first use; see fastq.tf.ops).  A plain
``tf.data.experimental.service.WorkerServer`` without it fails every such job with
``Op type not registered 'FastqDecodeAugment'``.  The dispatcher needs the op too
for DYNAMIC sharding (``distributed_epoch``): it builds the dataset graph to make the
split provider (measured on TF 2.21: without the op every dynamic job fails with the
same "Op type not registered ... in binary running on <dispatcher host>").
``serve-dispatcher`` loads it (and only warns if it cannot: OFF-sharded jobs do not
need it there).

Both run until SIGTERM / SIGINT (Ctrl-C), or for ``--timeout`` seconds, then stop
their server and exit 0.  Each prints one line ``fastq serve-...: ready <address>``
(flushed) once it serves, so scripts can wait for it.  Deployment, sharding policy,
compression and delivery semantics: docs/tensorflow.md.
"""
import os
import queue
import re
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from fastq.errors import FastqError

__all__ = ["iterate", "ServiceStalledError", "start_dispatcher", "start_worker", "serve", "cmd_dispatcher",
           "cmd_worker",
           "DISPATCHER_ARGS", "WORKER_ARGS", "DISPATCHER_HELP", "WORKER_HELP"]



class ServiceStalledError(FastqError):
    """No element came from the tf.data service for ``stall_timeout`` seconds."""


def iterate(dataset: Any, *, stall_timeout: float = 120.0, buffer: int = 2) -> Iterator[Any]:
    """Yield the elements of `dataset` (typically one that goes through
    ``tf.data.experimental.service.distribute``), but raise
    :class:`ServiceStalledError` when none arrives for `stall_timeout` seconds
    instead of waiting forever.

    Why: TensorFlow's data service client (measured on TF 2.21) retries a worker that
    died forever, and its tasks are never given to another worker; the dispatcher's
    ``worker_timeout_ms`` does not end them.  So a trainer reading a job one of whose
    workers was killed keeps receiving the other workers' elements and then blocks
    at the end of the epoch (DYNAMIC sharding: the lost worker's splits never
    finish).  This reads the dataset on a helper thread and bounds each wait; after a
    stall that thread stays blocked inside TF until the process exits (it holds
    nothing of yours but the dataset).  `buffer`: elements read ahead."""
    if not stall_timeout or stall_timeout <= 0:
        raise ValueError(f"iterate: stall_timeout must be > 0 seconds, got {stall_timeout!r}")
    q: "queue.Queue" = queue.Queue(maxsize=max(1, int(buffer)))
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def run():
        try:
            for x in dataset:
                if not put(("x", x)):
                    return
            put(("end", None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put(("err", e))

    t = threading.Thread(target=run, name="fastq-serve-iterate", daemon=True)
    t.start()
    received = 0
    try:
        while True:
            try:
                kind, x = q.get(timeout=stall_timeout)
            except queue.Empty:
                raise ServiceStalledError(
                    f"no element from the tf.data service for {stall_timeout:g} s after {received} element(s): a "
                    f"worker was probably lost (TensorFlow's client retries a dead worker forever and never "
                    f"reassigns its tasks), or the service has no worker. The elements that worker held are "
                    f"lost (at-most-once); see docs/tensorflow.md") from None
            if kind == "end":
                return
            if kind == "err":
                raise x
            received += 1
            yield x
    finally:
        stop.set()


DISPATCHER_HELP = "run a tf.data service dispatcher (for datasets that use fastq's TensorFlow op)"
WORKER_HELP = "run a tf.data service worker with fastq's TensorFlow op loaded"


def start_dispatcher(port: int = 0, *, work_dir: Optional[str] = None, fault_tolerant: bool = False,
                     worker_timeout_ms: Optional[int] = None, check_interval_ms: Optional[int] = None,
                     load_op: bool = True) -> Any:
    """A started ``tf.data.experimental.service.DispatchServer`` on `port` (0: any free
    port; ``server.target`` is ``grpc://localhost:<port>``).  ``work_dir`` +
    ``fault_tolerant`` keep the dispatcher's journal so a restarted dispatcher resumes
    its jobs; ``worker_timeout_ms``: how long a silent worker stays registered;
    ``check_interval_ms`` (TF's ``job_gc_check_interval_ms``, default 10 min): how often
    the dispatcher looks for silent workers and idle jobs - a dead worker's tasks are
    dropped (and trainers stop waiting for them) only at such a check.
    ``load_op``: register fastq's op in this process (needed for DYNAMIC sharding);
    a failure to build it is a warning, not an error."""
    if load_op:
        from fastq.tf import ops as tf_ops
        try:
            tf_ops.load()
        except tf_ops.KernelBuildError as e:
            import warnings
            warnings.warn(f"fastq's TensorFlow op is not available in this dispatcher ({e}); jobs with DYNAMIC "
                          f"sharding over datasets that use it will fail", RuntimeWarning, stacklevel=2)
    import tensorflow as tf
    kw = {}
    if worker_timeout_ms is not None:
        kw["worker_timeout_ms"] = int(worker_timeout_ms)
    if check_interval_ms is not None:
        kw["job_gc_check_interval_ms"] = int(check_interval_ms)
    cfg = tf.data.experimental.service.DispatcherConfig(port=int(port), work_dir=work_dir,
                                                        fault_tolerant_mode=bool(fault_tolerant), **kw)
    return tf.data.experimental.service.DispatchServer(cfg, start=True)


def start_worker(dispatcher: str, port: int = 0, *, advertise: str = "localhost", load_op: bool = True,
                 heartbeat_ms: Optional[int] = None) -> Any:
    """A started ``WorkerServer`` registered with `dispatcher` (``host:port``, with or
    without ``grpc://``), listening on `port` (0: any free port) and telling the
    dispatcher (and so the trainers) to reach it at ``<advertise>:<port>``: on a real
    cluster pass this host's name or IP address.  ``load_op``: register fastq's op in
    this process first (:func:`fastq.tf.ops.load`)."""
    if load_op:
        from fastq.tf import ops as tf_ops
        tf_ops.load()
    import tensorflow as tf
    address = dispatcher.split("://", 1)[-1]
    kw = {}
    if heartbeat_ms is not None:
        kw["heartbeat_interval_ms"] = int(heartbeat_ms)
    cfg = tf.data.experimental.service.WorkerConfig(dispatcher_address=address, worker_address=f"{advertise}:%port%",
                                                    port=int(port), **kw)
    return tf.data.experimental.service.WorkerServer(cfg, start=True)


def _stop(server):
    stop = getattr(server, "stop", None) or getattr(server, "_stop", None)
    if stop is not None:
        stop()


def serve(server: Any, timeout: Optional[float] = None, *, stop_event: Optional[threading.Event] = None,
          report: Optional[Callable[[str], None]] = None) -> None:
    """Block until SIGTERM/SIGINT (main thread only), `stop_event` or `timeout` seconds,
    then stop `server`.  For a dispatcher, `report` (if given) gets a line each time
    the number of registered workers changes."""
    workers = getattr(server, "_num_workers", None) if report else None
    seen = None
    ev = stop_event or threading.Event()
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda *_: ev.set())
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ev.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            ev.wait(0.5 if left is None else min(0.5, left))
            if workers is not None and report is not None:
                n = workers()
                if n != seen:
                    seen = n
                    report(f"{n} worker(s) registered")
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        _stop(server)


def _port(text):
    import argparse
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {v}")
    return v


def _seconds(text):
    import argparse
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
    return v


# (names, add_argument kwargs) of each subcommand, registered by fastq.cli
DISPATCHER_ARGS: List[Tuple[Tuple[str, ...], Dict[str, Any]]] = [
    (("--port",), dict(type=_port, default=5050, help="port to listen on (default %(default)s; 0: any free port)")),
    (("--work-dir",), dict(help="journal folder: with --fault-tolerant a restarted dispatcher resumes its jobs")),
    (("--fault-tolerant",), dict(action="store_true", help="journal state to --work-dir (needs --work-dir)")),
    (("--worker-timeout-ms",), dict(type=int, help="drop a worker silent this long (TF's default: 1 min)")),
    (("--check-interval-ms",), dict(type=int, help="how often to look for silent workers and idle jobs (TF's "
                                                   "job_gc_check_interval_ms, default 10 min): a dead worker's "
                                                   "tasks are dropped only then")),
    (("--timeout",), dict(type=_seconds, help="stop after this many seconds (default: run until SIGTERM/Ctrl-C); "
                                              "30 s later the process is ended by SIGALRM whatever it is doing")),
]
WORKER_ARGS: List[Tuple[Tuple[str, ...], Dict[str, Any]]] = [
    (("--dispatcher",), dict(required=True, metavar="HOST:PORT", help="the dispatcher's address")),
    (("--port",), dict(type=_port, default=0, help="port to listen on (default: any free port)")),
    (("--advertise",), dict(default="localhost", metavar="HOST",
                            help="host name or IP trainers use to reach this worker (default %(default)s: "
                                 "single-machine use; on a cluster pass this host's address)")),
    (("--heartbeat-ms",), dict(type=int, help="how often the worker reports to the dispatcher (TF's default: 1 s)")),
    (("--timeout",), dict(type=_seconds, help="stop after this many seconds (default: run until SIGTERM/Ctrl-C); "
                                              "30 s later the process is ended by SIGALRM whatever it is doing")),
]


def _ready(line: str, out: Callable = print) -> None:
    out(line, flush=True)


def _watchdog(timeout: Optional[float], grace: float = 30.0) -> None:
    """With --timeout, end the process `grace` s after the deadline whatever it is doing:
    the server's own start (a worker's first registration with an unreachable dispatcher)
    or stop can block inside TensorFlow holding the GIL, where no Python code (a timer
    thread, a signal handler) runs.  So: SIGALRM with its default action, which ends the
    process (exit status 128 + 14)."""
    if timeout is None:
        return
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(timeout + grace + 0.999)))


_ADDRESS = re.compile(r"^(grpc://)?[^:/\s]+:[0-9]{1,5}$")


def cmd_dispatcher(a) -> int:
    """``fastq serve-dispatcher``."""
    if a.fault_tolerant and not a.work_dir:
        print("fastq serve-dispatcher: error: --fault-tolerant needs --work-dir", file=sys.stderr)
        return 2
    _watchdog(a.timeout)
    server = start_dispatcher(a.port, work_dir=a.work_dir, fault_tolerant=a.fault_tolerant,
                              worker_timeout_ms=a.worker_timeout_ms, check_interval_ms=a.check_interval_ms)
    _ready(f"fastq serve-dispatcher: ready {server.target}")
    serve(server, a.timeout, report=lambda line: _ready(f"fastq serve-dispatcher: {line}"))
    return 0


def cmd_worker(a) -> int:
    """``fastq serve-worker``."""
    if not _ADDRESS.match(a.dispatcher):
        print(f"fastq serve-worker: error: --dispatcher must be HOST:PORT, got {a.dispatcher!r}", file=sys.stderr)
        return 2
    _watchdog(a.timeout)
    from fastq.tf.ops import KernelBuildError
    try:
        server = start_worker(a.dispatcher, a.port, advertise=a.advertise, heartbeat_ms=a.heartbeat_ms)
    except KernelBuildError as e:
        print(f"fastq serve-worker: error: {e}", file=sys.stderr)
        return 1
    _ready(f"fastq serve-worker: ready {server._address} (dispatcher {a.dispatcher})")
    serve(server, a.timeout)
    return 0
