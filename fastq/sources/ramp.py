"""The ramp of a remote pipeline's requests in flight (RemoteOptions.ramp); used by
fastq.sources.fetch."""
import threading
from typing import Optional

from fastq.sources.storage import RemoteOptions

__all__ = ["Ramp"]


class Ramp:
    """How many requests a pipeline may have in flight now (shared by its epochs' fetchers).

    max_in_flight, except after the pipeline's first request and after a pause (nothing in
    flight for PAUSE_S): then the limit starts at START and grows by at most START every
    TICK_S and by at most one per request that ended, up to max_in_flight (about 0.15 s).
    Each request beyond the connections the client holds opens one, and a server that
    accepts slowly from a short listen queue (Python's http.server: 5) drops the handshakes
    that find it full; TCP retries them after 1, 3, 7... s, and the batches that wait for
    those requests stall.  Opening the pool a few connections at a time keeps the queue
    short; a pool that is already open (nginx, the cloud stores) loses about 0.1 s of
    requests once.  RemoteOptions.ramp=False opens them all at once.

    Thread-safety: started / ended / limit are called from the loop threads of two
    fetchers at an epoch boundary (the previous one's prefetches end on its own loop);
    every field is read and written under `lock`."""

    START = 4
    TICK_S = 0.01
    PAUSE_S = 0.25

    def __init__(self, opts: RemoteOptions):
        self.max = opts.max_in_flight
        self.on = opts.ramp
        self.lock = threading.Lock()
        self.t0: Optional[float] = None   # when the current ramp began (None: no request yet)
        self.ended_since = 0              # requests ended since t0
        self.inflight = 0                 # requests of every fetcher of the pipeline
        self.idle_since: Optional[float] = None
        self.ramping = False
        self.ramps = 0

    def started(self):
        with self.lock:
            self.inflight += 1
            self.idle_since = None

    def ended(self, now: float):
        with self.lock:
            self.inflight -= 1
            self.ended_since += 1
            if self.inflight == 0:
                self.idle_since = now

    def limit(self, now: float) -> int:
        """The in-flight limit at `now` (time.monotonic()); below max_in_flight while ramping."""
        if not self.on:
            return self.max
        with self.lock:
            paused = self.inflight == 0 and self.idle_since is not None and now - self.idle_since >= self.PAUSE_S
            if self.t0 is None or paused:
                self.t0, self.ended_since, self.ramping, self.idle_since = now, 0, True, None
                self.ramps += 1
            if not self.ramping:
                return self.max
            lim = self.START + min(self.ended_since, int((now - self.t0) / self.TICK_S) * self.START)
            if lim >= self.max:
                self.ramping = False
                return self.max
            return lim
